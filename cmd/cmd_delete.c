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
    fprintf(out,
            "Usage: simstore delete STORE (ID... | --ids FILE)\n"
            "\n"
            "Remove the documents with these ids from STORE, all in one commit: they\n"
            "are gone from every answer from then on. Their fingerprints stay in the\n"
            "table files until a compaction (automatic when more than half of the\n"
            "tables' fingerprints are dead; or `simstore compact`).\n"
            "\n"
            "      --ids FILE       one id per line ('-' for standard input); empty\n"
            "                       lines are skipped\n"
            "      --no-auto-compact\n"
            "                       never compact afterwards\n"
            "      --memory SIZE    memory budget of an automatic compaction (default 1G)\n"
            "      --threads N      its worker threads (default: all cores)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Ids that are not in the store are reported as warnings. One summary line\n"
            "goes to stdout: deleted N documents from STORE (M not found).\n"
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
    cli_warn(CMD, "no document '%.*s'", (int)len, id);
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
    unsigned open_flags = SIMSTORE_OPEN_WRITE;
    simstore_build_options o;
    simstore_build_options_init(&o);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_IDS: ids_file = optarg; break;
        case OPT_NO_COMPACT: open_flags |= SIMSTORE_OPEN_NO_AUTO_COMPACT; break;
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
    const char *path = argv[optind++];
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
            if (len == 0)
                continue;
            if (len > SIMSTORE_MAX_ID_BYTES || memchr(lines.line, '\0', len)) {
                cli_error(CMD, "%s:%llu: not a document id (1 to %d bytes, no NUL)", lines.name,
                          lines.lineno, SIMSTORE_MAX_ID_BYTES);
                status = CLI_EXIT_FAIL;
                break;
            }
            if (push_id(&l, lines.line, len)) {
                status = cli_error(CMD, "out of memory");
                break;
            }
        }
        if (got < 0)
            status = cli_error(CMD, "%s: %s", lines.name, strerror(errno));
        cli_lines_close(&lines);
        if (status != CLI_EXIT_OK) {
            free_ids(&l);
            fprintf(stderr, "simstore %s: nothing deleted\n", CMD);
            return status;
        }
    }
    simstore *s;
    int rc = simstore_open(path, open_flags, &s);
    if (rc) {
        free_ids(&l);
        return cli_api_error(CMD, rc, "%s", path);
    }
    simstore_set_maintenance_options(s, &o);
    uint64_t deleted = 0;
    size_t missing = 0;
    rc = simstore_delete(s, (const char *const *)l.ids, l.lens, l.n, &deleted, report_missing,
                         &missing);
    simstore_close(s);
    free_ids(&l);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    printf("deleted %llu document%s from %s (%zu not found)\n", (unsigned long long)deleted,
           deleted == 1 ? "" : "s", path, missing);
    return CLI_EXIT_OK;
}
