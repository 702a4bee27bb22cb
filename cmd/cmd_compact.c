/* cmd_compact.c: `simstore compact`: merge a store's segments into one,
 * drop the fingerprints no document uses any more, and give data.mdb's
 * free pages back to the file system. */
#include "cli.h"
#include "commands.h"
#include "progress.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char *const CMD = "compact";

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore compact STORE [OPTIONS]\n"
                 "\n"
                 "Rewrite STORE's segments as one, without the fingerprints of deleted\n"
                 "documents, in one commit, with the documents in a new document file (the\n"
                 "adds and deletes LMDB holds since the last one folded in); the old files\n"
                 "are removed afterwards. Readers keep answering throughout. A store of one\n"
                 "segment without dead fingerprints or changes is left as it is, unless its\n"
                 "documents are all in LMDB (a store built empty and added to): they move\n"
                 "into a document file.\n"
                 "\n"
                 "Then, when at least an eighth of data.mdb (and 1 MiB) is free pages that\n"
                 "LMDB keeps for reuse after deletes and adds, data.mdb is rewritten without\n"
                 "them and swapped in with the table files, atomically, as build --replace\n"
                 "swaps a store: processes that have STORE open keep answering from what\n"
                 "they opened.\n"
                 "\n"
                 "      --shrink         rewrite data.mdb whatever its free pages\n"
                 "      --no-shrink      never rewrite data.mdb\n"
                 "      --memory SIZE    memory budget for sorting, e.g. 512M, 4GiB (default 1G);\n"
                 "                       the process uses about 25 MiB more\n"
                 "      --threads N      worker threads (default: all cores)\n"
                 "  -q, --quiet          no progress on stderr\n"
                 "  -v, --verbose        report wall time and peak memory on stderr\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "One summary line goes to stdout: compacted STORE: S segments -> T, D dead\n"
                 "fingerprints dropped, and when data.mdb was rewritten: ; data.mdb B bytes\n"
                 "-> A bytes.\n"
                 "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

enum { OPT_MEMORY = 1, OPT_THREADS, OPT_SHRINK, OPT_NO_SHRINK };

/* The share of data.mdb that free pages must reach for compact to rewrite
 * it (1/SHRINK_SHARE), and the least bytes. */
#define SHRINK_SHARE 8u
#define SHRINK_MIN_BYTES ((uint64_t)1 << 20)

int cmd_compact(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"shrink", no_argument, NULL, OPT_SHRINK},
        {"no-shrink", no_argument, NULL, OPT_NO_SHRINK},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    simstore_build_options o;
    simstore_build_options_init(&o);
    int quiet = 0, verbose = 0, shrink = -1, c; /* shrink -1: when worth it */
    double started = cli_now();
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qvh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_MEMORY:
            if (cli_memory_option(CMD, optarg, &o.memory_bytes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS:
            if (cli_threads_option(CMD, optarg, &o.threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_SHRINK: shrink = 1; break;
        case OPT_NO_SHRINK: shrink = 0; break;
        case 'q': quiet = 1; break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    simstore *s;
    simstore_stats before, after;
    int rc = cli_apply_server_log(CMD, path);
    if (rc)
        return rc;
    rc = simstore_open(path, SIMSTORE_OPEN_WRITE, &s);
    if (rc == SIMSTORE_OK)
        rc = simstore_get_stats(s, &before);
    cli_progress prog;
    cli_progress_init(&prog, CMD, !quiet);
    o.progress = cli_progress_update;
    o.progress_ctx = &prog;
    if (rc == SIMSTORE_OK)
        rc = simstore_compact(s, &o);
    cli_progress_done(&prog);
    if (rc == SIMSTORE_OK)
        rc = simstore_get_stats(s, &after);
    simstore_close(s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    /* The store's handle is closed: the rewrite opens it alone. */
    uint64_t mdb_before = 0, mdb_after = 0;
    int shrunk = shrink == 1 || (shrink == -1 && after.lmdb_free_bytes >= SHRINK_MIN_BYTES &&
                                 after.lmdb_free_bytes >= after.lmdb_bytes / SHRINK_SHARE);
    if (shrunk) {
        cli_progress_update(&prog, "rewriting data.mdb without its free pages", 0, 0);
        rc = simstore_shrink(path, &mdb_before, &mdb_after);
        cli_progress_done(&prog);
        if (rc)
            return cli_api_error(CMD, rc, "%s: the segments are compacted; data.mdb is as it was",
                                 path);
    }
    if (verbose)
        cli_report_resources(CMD, started);
    unsigned long long dropped = before.table_fps - after.table_fps;
    printf("compacted %s: %llu %s -> %llu, %llu dead %s dropped", path,
           (unsigned long long)before.segments, CLI_NOUN(before.segments, "segment"),
           (unsigned long long)after.segments, dropped, CLI_NOUN(dropped, "fingerprint"));
    if (shrunk)
        printf("; data.mdb %llu bytes -> %llu", (unsigned long long)mdb_before,
               (unsigned long long)mdb_after);
    printf("\n");
    return CLI_EXIT_OK;
}
