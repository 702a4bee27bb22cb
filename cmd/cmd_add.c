/* cmd_add.c: `simstore add`: add documents (or fingerprints) to a store as
 * a new segment, committed all at once. */
#include "boilerplate.h"
#include "cli.h"
#include "commands.h"
#include "ingest.h"
#include "progress.h"
#include "textopts.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const CMD = "add";

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore add STORE [OPTIONS] INPUT...\n"
            "\n"
            "Add the INPUT files' documents to STORE as a new segment. Queries see all\n"
            "of them at once when the add commits, or none if it fails. Input formats\n"
            "are those of `simstore build` (.tsv, .fp, .jsonl; .hex, .u64 for\n"
            "fingerprint-only stores; or --format). JSON Lines texts are fingerprinted\n"
            "with the options the store recorded when it was built, and without the\n"
            "boilerplate lines it recorded (build --boilerplate auto; the set is not\n"
            "computed again: `simstore stats` shows it). In a store built with\n"
            "--paragraphs, their paragraphs are indexed too (with the store's minimum\n"
            "of words). '-' is standard input, which has no extension: give --format\n"
            "with it.\n"
            "\n"
            "      --format tsv|fp|jsonl|hex|u64\n"
            "      --skip-existing  skip documents whose id is already in the store, or\n"
            "                       was given earlier in the input (the first is kept),\n"
            "                       and count them in the summary\n"
            "      --memory SIZE    memory budget for sorting, e.g. 512M, 4GiB (default 1G;\n"
            "                       K, M, G, T: powers of 1024); the process uses about\n"
            "                       25 MiB more, plus about 3x the size of each JSON\n"
            "                       Lines record being read (README: Building at scale)\n"
            "      --threads N      worker threads (default: all cores)\n"
            "      --no-auto-compact\n"
            "                       do not compact afterwards, even when the store has\n"
            "                       more than 8 segments\n"
            "  -q, --quiet          no progress on stderr\n"
            "  -v, --verbose        report wall time and peak memory on stderr\n"
            "\n"
            "JSON Lines records (members other than these are ignored):\n" INPUT_FIELD_HELP "\n"
            "  -h, --help           show this help\n"
            "\n"
            "Without --skip-existing an id already in the store, or given twice, is an\n"
            "error: each is reported (the first 20, then how many more) and nothing is\n"
            "added. Bad records are reported as FILE:LINE: message, and nothing is\n"
            "added. A document that is nothing but the store's boilerplate is reported\n"
            "(FILE:LINE: document id 'ID' is only boilerplate) and added with the\n"
            "fingerprint of its whole text. On success one summary line goes to stdout:\n"
            "  added N documents to STORE (M new fingerprints)[; skipped K (I already\n"
            "  stored, J repeated)]; now D documents, F fingerprints in S segments[;\n"
            "  compacted S1 segments -> S2, X dead fingerprints dropped]\n"
            "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

enum { OPT_FORMAT = 1, OPT_MEMORY, OPT_THREADS, OPT_NO_COMPACT, OPT_SKIP_EXISTING };

int cmd_add(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, OPT_FORMAT},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"no-auto-compact", no_argument, NULL, OPT_NO_COMPACT},
        {"skip-existing", no_argument, NULL, OPT_SKIP_EXISTING},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        INPUT_FIELD_LONG_OPTIONS,
        BOILER_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    simstore_build_options o;
    simstore_build_options_init(&o);
    input_fields fields;
    input_fields_init(&fields);
    ingest_options io;
    memset(&io, 0, sizeof io);
    io.fields = &fields;
    io.cmd = CMD;
    /* The automatic compaction runs below, where its failure can be told. */
    unsigned open_flags = SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT;
    int auto_compact = 1;
    int quiet = 0, verbose = 0, c;
    double started = cli_now();
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qvh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_FORMAT: {
            int f = ingest_format_parse(optarg);
            if (f < 0)
                return cli_usage_error(CMD, "--format takes tsv, fp, jsonl, hex or u64, not '%s'",
                                       optarg);
            io.format = (ingest_format)f;
            break;
        }
        case OPT_MEMORY:
            if (cli_memory_option(CMD, optarg, &o.memory_bytes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS:
            if (cli_threads_option(CMD, optarg, &o.threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_NO_COMPACT: auto_compact = 0; break;
        case OPT_SKIP_EXISTING: o.skip_existing = 1; break;
        case 'q': quiet = 1; break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case BOILEROPT_MODE:
        case BOILEROPT_FRACTION:
        case BOILEROPT_MIN_DOCS:
            return cli_usage_error(CMD,
                                   "--boilerplate%s: add removes the boilerplate lines "
                                   "the store recorded when it was built, and computes "
                                   "none of its own (rebuild the store to change them)",
                                   c == BOILEROPT_MODE       ? ""
                                   : c == BOILEROPT_FRACTION ? "-fraction"
                                                             : "-min-docs");
        default: {
            int t = textopt_or_field_or_bad_option(CMD, c, argv, optind, NULL, &fields, NULL);
            if (t >= 0)
                return t;
        }
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind >= argc)
        return cli_usage_error(CMD, "missing INPUT (use '-' for standard input)");

    simstore *s;
    int rc = cli_apply_server_log(CMD, path);
    if (rc)
        return rc;
    rc = simstore_open(path, open_flags, &s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    simstore_stats before;
    simstore_text_options text;
    rc = simstore_get_stats(s, &before);
    if (rc) {
        simstore_close(s);
        return cli_api_error(CMD, rc, "%s", path);
    }
    simstore_get_text_options(s, &text);
    io.text = &text;
    io.boilerplate = simstore_get_boilerplate(s);
    io.fingerprint_only = before.fingerprint_only;
    io.threads = o.threads;

    cli_progress prog;
    cli_progress_init(&prog, CMD, !quiet);
    o.progress = io.progress = cli_progress_update;
    o.progress_ctx = io.progress_ctx = &prog;
    o.source_name = ingest_source_name;
    o.source_ctx = argv + optind;
    cli_clashes clashes = {
        CMD, o.skip_existing, ingest_source_name, argv + optind, cli_progress_done_cb, &prog, 0, 0};
    o.clash = cli_clash_report;
    o.clash_ctx = &clashes;
    cli_compaction compaction = {0, {0, 0, 0}};
    o.compacted = cli_note_compaction;
    o.compacted_ctx = &compaction;

    simstore_builder *b;
    rc = simstore_add_begin(s, &o, &b);
    if (rc) {
        simstore_close(s);
        return cli_api_error(CMD, rc, "%s", path);
    }
    ingest_result res;
    char failed[PATH_MAX + 32];
    snprintf(failed, sizeof failed, "nothing added to %s", path);
    int failed_add =
        ingest_and_finish(b, argv + optind, argc - optind, &io, &res, cli_progress_done_cb, failed);
    if (failed_add) {
        cli_clashes_finish(&clashes, "use --skip-existing to add the other documents");
        simstore_close(s);
        return CLI_EXIT_FAIL;
    }
    /* The library's policy after an add (simstore_maybe_compact), run here
     * rather than inside the add, which keeps a failure to itself: the add
     * is committed either way, but a failed compaction is reported and fails
     * the command. */
    char compact_failed[1024] = "";
    if (auto_compact && (rc = simstore_maybe_compact(s, &o)) != SIMSTORE_OK)
        snprintf(compact_failed, sizeof compact_failed, "%s",
                 *simstore_last_error() ? simstore_last_error() : simstore_strerror(rc));
    cli_progress_done(&prog);
    simstore_stats after;
    rc = simstore_get_stats(s, &after);
    simstore_close(s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    if (verbose)
        cli_report_resources(CMD, started);
    unsigned long long skipped = clashes.stored + clashes.repeated;
    unsigned long long added = res.records - skipped;
    unsigned long long new_fps = after.fingerprints - before.fingerprints;
    printf("added %llu %s to %s (%llu new %s)", added,
           before.fingerprint_only ? CLI_NOUN(added, "fingerprint") : CLI_NOUN(added, "document"),
           path, new_fps, CLI_NOUN(new_fps, "fingerprint"));
    if (o.skip_existing)
        printf("; skipped %llu (%llu already stored, %llu repeated)", skipped, clashes.stored,
               clashes.repeated);
    printf("; now %llu %s, %llu %s in %llu %s", (unsigned long long)after.documents,
           CLI_NOUN(after.documents, "document"), (unsigned long long)after.fingerprints,
           CLI_NOUN(after.fingerprints, "fingerprint"), (unsigned long long)after.segments,
           CLI_NOUN(after.segments, "segment"));
    cli_print_compaction(&compaction);
    putchar('\n');
    if (compact_failed[0])
        return cli_error(CMD,
                         "%s: the add is committed, but the automatic compaction failed "
                         "(the store stays valid, with more segments; `simstore compact` "
                         "or the next add tries again): %s",
                         path, compact_failed);
    return CLI_EXIT_OK;
}
