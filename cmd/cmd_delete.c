/* cmd_delete.c: `simstore delete`: remove documents by id, in one commit. */
#include "cli.h"
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "delete";

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore delete STORE (ID... | --ids FILE)\n"
                 "\n"
                 "Remove the documents with these ids from STORE, all in one commit: they\n"
                 "are gone from every answer from then on. Their fingerprints stay in the\n"
                 "table files until a compaction (automatic when more than half of the\n"
                 "tables' fingerprints are dead; or `simstore compact`).\n"
                 "\n"
                 "      --ids FILE       one id per line ('-' for standard input); empty\n"
                 "                       lines are skipped, and so is a UTF-8 byte-order mark\n"
                 "                       at the start\n"
                 "      --no-auto-compact\n"
                 "                       never compact afterwards\n"
                 "      --memory SIZE    memory budget of an automatic compaction, e.g. 512M\n"
                 "                       (default 1G); the process uses about 25 MiB more\n"
                 "      --threads N      its worker threads (default: all cores)\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "Ids that are not in the store are reported as warnings (control characters\n"
                 "shown as \\xHH). One summary line goes to stdout: deleted N documents from\n"
                 "STORE (M not found)[; compacted S segments -> T, D dead fingerprints\n"
                 "dropped], the last part when the delete compacted the store.\n"
                 "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

typedef struct id_list {
    char **ids;
    size_t *lens;
    size_t n, cap;
} id_list;

static int push_id(id_list *l, const char *id, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **ids = realloc(l->ids, cap * sizeof *ids);
        if (!ids)
            return -1;
        l->ids = ids;
        size_t *lens = realloc(l->lens, cap * sizeof *lens);
        if (!lens)
            return -1;
        l->lens = lens;
        l->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, id, len);
    copy[len] = '\0';
    l->ids[l->n] = copy;
    l->lens[l->n++] = len;
    return 0;
}

static void free_ids(id_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ids[i]);
    free(l->ids);
    free(l->lens);
}

static void report_missing(void *ctx, const char *id, size_t len)
{
    size_t *count = (size_t *)ctx;
    (*count)++;
    char shown[CLI_ESCAPED_ID_BYTES];
    cli_warn(CMD, "no document '%s'", cli_escape(id, len, shown, sizeof shown));
}

enum { OPT_IDS = 1, OPT_NO_COMPACT, OPT_MEMORY, OPT_THREADS };

int cmd_delete(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ids", required_argument, NULL, OPT_IDS},
        {"no-auto-compact", no_argument, NULL, OPT_NO_COMPACT},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *ids_file = NULL;
    /* The automatic compaction runs below, where its failure can be told. */
    unsigned open_flags = SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT;
    int auto_compact = 1;
    simstore_build_options o;
    simstore_build_options_init(&o);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_IDS: ids_file = optarg; break;
        case OPT_NO_COMPACT: auto_compact = 0; break;
        case OPT_MEMORY:
            if (cli_memory_option(CMD, optarg, &o.memory_bytes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS:
            if (cli_threads_option(CMD, optarg, &o.threads))
                return CLI_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (!ids_file && optind >= argc)
        return cli_usage_error(CMD, "give ids to delete, or --ids FILE");
    if (ids_file && optind < argc)
        return cli_usage_error(CMD, "give ids on the command line or with --ids, not both");

    id_list l = {0};
    int status = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        size_t len = strlen(argv[i]);
        if (len == 0 || len > SIMSTORE_MAX_ID_BYTES) {
            free_ids(&l);
            return cli_usage_error(CMD, "an id has 1 to %d bytes", SIMSTORE_MAX_ID_BYTES);
        }
        if (push_id(&l, argv[i], len)) {
            free_ids(&l);
            return cli_error(CMD, "out of memory");
        }
    }
    if (ids_file) {
        cli_lines lines;
        if (cli_lines_open(&lines, ids_file) != 0)
            return cli_error(CMD, "%s: %s", ids_file, strerror(errno));
        size_t len;
        int got;
        while ((got = cli_lines_next(&lines, &len)) == 1) {
            const char *id = lines.line;
            /* Editors put a byte-order mark at the start of "UTF-8" files:
             * it is not part of the first id. */
            if (lines.lineno == 1 && len >= 3 && memcmp(id, "\xEF\xBB\xBF", 3) == 0) {
                id += 3;
                len -= 3;
            }
            if (len == 0)
                continue;
            if (len > SIMSTORE_MAX_ID_BYTES || memchr(id, '\0', len)) {
                cli_error(CMD, "%s:%llu: not a document id (1 to %d bytes, no NUL)", lines.name,
                          lines.lineno, SIMSTORE_MAX_ID_BYTES);
                status = CLI_EXIT_FAIL;
                break;
            }
            if (push_id(&l, id, len)) {
                status = cli_error(CMD, "out of memory");
                break;
            }
        }
        if (got < 0)
            status =
                cli_error(CMD, "%s:%llu: %s", lines.name, lines.lineno, cli_lines_error(&lines));
        cli_lines_close(&lines);
        if (status != CLI_EXIT_OK) {
            free_ids(&l);
            fprintf(stderr, "simstore %s: nothing deleted\n", CMD);
            return status;
        }
    }
    simstore *s;
    int rc = cli_apply_server_log(CMD, path);
    if (rc) {
        free_ids(&l);
        return rc;
    }
    rc = simstore_open(path, open_flags, &s);
    if (rc) {
        free_ids(&l);
        return cli_api_error(CMD, rc, "%s", path);
    }
    cli_compaction compaction = {0, {0, 0, 0}};
    o.compacted = cli_note_compaction;
    o.compacted_ctx = &compaction;
    rc = simstore_set_maintenance_options(s, &o);
    if (rc) {
        free_ids(&l);
        simstore_close(s);
        return cli_api_error(CMD, rc, "%s", path);
    }
    uint64_t deleted = 0;
    size_t missing = 0;
    rc = simstore_delete(s, (const char *const *)l.ids, l.lens, l.n, &deleted, report_missing,
                         &missing);
    /* The library's policy after a delete, run here rather than inside
     * simstore_delete(), which keeps a failure to itself: the delete is
     * committed either way, but a failed compaction is reported and fails
     * the command. */
    char compact_failed[1024] = "";
    if (rc == SIMSTORE_OK && deleted > 0 && auto_compact) {
        int crc = simstore_maybe_compact_dead(s, &o);
        if (crc)
            snprintf(compact_failed, sizeof compact_failed, "%s",
                     *simstore_last_error() ? simstore_last_error() : simstore_strerror(crc));
    }
    simstore_close(s);
    free_ids(&l);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    printf("deleted %llu %s from %s (%zu not found)", (unsigned long long)deleted,
           CLI_NOUN(deleted, "document"), path, missing);
    cli_print_compaction(&compaction);
    putchar('\n');
    if (compact_failed[0])
        return cli_error(CMD,
                         "%s: the delete is committed, but the automatic compaction failed "
                         "(the store stays valid, with dead fingerprints; `simstore compact` "
                         "or the next delete tries again): %s",
                         path, compact_failed);
    return CLI_EXIT_OK;
}
