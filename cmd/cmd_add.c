/* cmd_add.c: `simstore add`: add documents (or fingerprints) to a store as
 * a new segment, committed all at once. */
#include "cli.h"
#include "commands.h"
#include "ingest.h"
#include "progress.h"

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
            "with the options the store recorded when it was built.\n"
            "\n"
            "      --format tsv|fp|jsonl|hex|u64\n"
            "      --memory SIZE    memory budget for sorting (default 1G)\n"
            "      --threads N      worker threads (default: all cores)\n"
            "      --no-auto-compact\n"
            "                       do not compact afterwards, even when the store has\n"
            "                       more than 8 segments\n"
            "  -q, --quiet          no progress on stderr\n"
            "  -v, --verbose        report wall time and peak memory on stderr\n"
            "  -h, --help           show this help\n"
            "\n"
            "An id already in the store, or given twice, is an error (both places are\n"
            "named); bad records are reported as FILE:LINE: message. Either way nothing\n"
            "is added. On success one summary line goes to stdout.\n"
            "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

enum { OPT_FORMAT = 1, OPT_MEMORY, OPT_THREADS, OPT_NO_COMPACT };

int cmd_add(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, OPT_FORMAT},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"no-auto-compact", no_argument, NULL, OPT_NO_COMPACT},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    simstore_build_options o;
    simstore_build_options_init(&o);
    ingest_options io;
    memset(&io, 0, sizeof io);
    io.cmd = CMD;
    unsigned open_flags = SIMSTORE_OPEN_WRITE;
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
        case OPT_NO_COMPACT: open_flags |= SIMSTORE_OPEN_NO_AUTO_COMPACT; break;
        case 'q': quiet = 1; break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = argv[optind++];
    if (optind >= argc)
        return cli_usage_error(CMD, "missing INPUT (use '-' for standard input)");

    simstore *s;
    int rc = simstore_open(path, open_flags, &s);
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
    io.fingerprint_only = before.fingerprint_only;
    io.threads = o.threads;

    cli_progress prog;
    cli_progress_init(&prog, CMD, !quiet);
    o.progress = io.progress = cli_progress_update;
    o.progress_ctx = io.progress_ctx = &prog;
    o.source_name = ingest_source_name;
    o.source_ctx = argv + optind;

    simstore_builder *b;
    rc = simstore_add_begin(s, &o, &b);
    if (rc) {
        simstore_close(s);
        return cli_api_error(CMD, rc, "%s", path);
    }
    ingest_result res;
    char failed[PATH_MAX + 32];
    snprintf(failed, sizeof failed, "nothing added to %s", path);
    if (ingest_and_finish(b, argv + optind, argc - optind, &io, &res, cli_progress_done_cb,
                          failed)) {
        simstore_close(s);
        return CLI_EXIT_FAIL;
    }
    simstore_stats after;
    rc = simstore_get_stats(s, &after);
    simstore_close(s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    if (verbose)
        cli_report_resources(CMD, started);
    printf("added %llu %s to %s (%llu new fingerprints); now %llu documents, %llu fingerprints "
           "in %llu segment%s\n",
           (unsigned long long)res.records, before.fingerprint_only ? "fingerprints" : "documents",
           path, (unsigned long long)(after.fingerprints - before.fingerprints),
           (unsigned long long)after.documents, (unsigned long long)after.fingerprints,
           (unsigned long long)after.segments, after.segments == 1 ? "" : "s");
    return CLI_EXIT_OK;
}
