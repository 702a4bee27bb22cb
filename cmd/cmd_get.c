/* cmd_get.c: `simstore get` and `simstore export`: stored documents by id
 * (their fingerprint, segment and metadata), and every live document in a
 * form `build` reads back. */
#include "cli.h"
#include "commands.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void get_usage(FILE *out)
{
    fprintf(out, "Usage: simstore get STORE ID... [--json]\n"
                 "\n"
                 "Print each stored document named, in the order given:\n"
                 "  ID<TAB>FINGERPRINT<TAB>SEGMENT<TAB>META\n"
                 "FINGERPRINT as 16 hex digits, SEGMENT the number of the newest live\n"
                 "segment whose tables hold the fingerprint, META the document's metadata\n"
                 "(compact JSON) or '-' when it has none. An id no document has is\n"
                 "reported on stderr ('no document ID') and makes the exit status 1; the\n"
                 "others are still printed. All of them are read from one committed state.\n"
                 "\n"
                 "      --json           one JSON object per id instead:\n"
                 "                       {\"id\", \"fp\", \"segment\", \"meta\"} (integer ids\n"
                 "                       as numbers), or {\"id\", \"missing\": true}\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "Exit status: 0 every id found, 1 failure or an id not found, 2 usage error.\n");
}

static void export_usage(FILE *out)
{
    fprintf(out, "Usage: simstore export STORE [--json] [--order id|insertion] [--memory SIZE]\n"
                 "\n"
                 "Print every live document of the store, read from one committed state:\n"
                 "  ID<TAB>FINGERPRINT\n"
                 "the TSV that `simstore build --format tsv` reads (metadata is left out),\n"
                 "or with --json one JSON object per document,\n"
                 "  {\"id\": ..., \"fp\": \"HEX16\", \"meta\": ...}\n"
                 "which `simstore build` reads back (a record with \"fp\" and no \"text\"\n"
                 "is stored under that fingerprint) into a store giving the same answers.\n"
                 "A fingerprint-only store prints its distinct fingerprints, one per line\n"
                 "(`build --fingerprint-only --format hex` reads them back).\n"
                 "\n"
                 "      --json           JSON Lines (above)\n"
                 "      --order id|insertion\n"
                 "                       id byte order (default), or the order documents\n"
                 "                       were inserted in, so that a store built from the\n"
                 "                       export keeps the same documents with\n"
                 "                       `clusters --keep first` (sorted within --memory,\n"
                 "                       spilling to $TMPDIR)\n"
                 "      --memory SIZE    memory for --order insertion (default 1G)\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

typedef struct printer {
    int json;
    unsigned long long missing;
    const char *cmd;
} printer;

static void print_id(const simstore_document *d)
{
    if (d->flags & SIMSTORE_MATCH_INTEGER_ID)
        fwrite(d->id, 1, d->id_len, stdout);
    else
        cli_json_string(stdout, d->id, d->id_len);
}

static int print_got(void *ctx, const simstore_document *d)
{
    printer *p = (printer *)ctx;
    char hex[17];
    if (d->missing) {
        char esc[CLI_ESCAPED_ID_BYTES];
        cli_error(p->cmd, "no document '%s'", cli_escape(d->id, d->id_len, esc, sizeof esc));
        p->missing++;
        if (p->json) {
            fputs("{\"id\":", stdout);
            cli_json_string(stdout, d->id, d->id_len);
            fputs(",\"missing\":true}\n", stdout);
        }
        return 0;
    }
    cli_format_hex64(d->fp, hex);
    if (p->json) {
        fputs("{\"id\":", stdout);
        print_id(d);
        printf(",\"fp\":\"%s\",\"segment\":%llu", hex, (unsigned long long)d->segment);
        if (d->meta) {
            fputs(",\"meta\":", stdout);
            fwrite(d->meta, 1, d->meta_len, stdout);
        }
        fputs("}\n", stdout);
    } else {
        cli_tsv_id(p->cmd, d->id, d->id_len);
        printf("\t%s\t%llu\t", hex, (unsigned long long)d->segment);
        if (d->meta)
            fwrite(d->meta, 1, d->meta_len, stdout);
        else
            putchar('-');
        putchar('\n');
    }
    return ferror(stdout) ? SIMSTORE_EIO : 0;
}

static int print_exported(void *ctx, const simstore_document *d)
{
    printer *p = (printer *)ctx;
    char hex[17];
    cli_format_hex64(d->fp, hex);
    if (!d->id) {
        puts(hex);
    } else if (p->json) {
        fputs("{\"id\":", stdout);
        print_id(d);
        printf(",\"fp\":\"%s\"", hex);
        if (d->sketch) {
            fputs(",\"sketch\":\"", stdout);
            for (size_t i = 0; i < d->sketch_bytes; i++)
                printf("%02x", d->sketch[i]);
            putchar('"');
        }
        if (d->meta) {
            fputs(",\"meta\":", stdout);
            fwrite(d->meta, 1, d->meta_len, stdout);
        }
        fputs("}\n", stdout);
    } else {
        cli_tsv_id(p->cmd, d->id, d->id_len);
        printf("\t%s\n", hex);
    }
    return ferror(stdout) ? SIMSTORE_EIO : 0;
}

static int finish_output(const char *cmd, int rc, const char *path)
{
    if (fflush(stdout) != 0 && rc == 0)
        return cli_error(cmd, "cannot write the output");
    return rc ? cli_api_error(cmd, rc, "%s", path) : 0;
}

int cmd_get(int argc, char **argv)
{
    static const char *const CMD = "get";
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    printer p = {0, 0, CMD};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': p.json = 1; break;
        case 'h': get_usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind >= argc)
        return cli_usage_error(CMD, "missing ID (one or more document ids)");
    size_t n = (size_t)(argc - optind);
    size_t *lens = malloc(n * sizeof *lens);
    if (!lens)
        return cli_error(CMD, "out of memory");
    for (size_t i = 0; i < n; i++) {
        lens[i] = strlen(argv[optind + (int)i]);
        if (lens[i] == 0 || lens[i] > SIMSTORE_MAX_ID_BYTES) {
            free(lens);
            return cli_usage_error(CMD, "an id must have 1..%d bytes", SIMSTORE_MAX_ID_BYTES);
        }
    }
    simstore *s;
    int rc = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
    if (rc == 0)
        rc = simstore_get(s, (const char *const *)(argv + optind), lens, n, print_got, &p);
    simstore_close(s);
    free(lens);
    if (finish_output(CMD, rc, path))
        return CLI_EXIT_FAIL;
    return p.missing ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cmd_export(int argc, char **argv)
{
    static const char *const CMD = "export";
    enum { OPT_ORDER = 1, OPT_MEMORY };
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"order", required_argument, NULL, OPT_ORDER},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    printer p = {0, 0, CMD};
    unsigned flags = 0;
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': p.json = 1; break;
        case OPT_ORDER:
            if (strcmp(optarg, "insertion") == 0)
                flags = SIMSTORE_EXPORT_BY_INSERTION;
            else if (strcmp(optarg, "id") == 0)
                flags = 0;
            else
                return cli_usage_error(CMD, "--order takes id or insertion, not '%s'", optarg);
            break;
        case OPT_MEMORY:
            if (cli_memory_option(CMD, optarg, &o.memory_bytes))
                return CLI_EXIT_USAGE;
            break;
        case 'h': export_usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    simstore *s;
    int rc = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
    if (rc == 0)
        rc = simstore_export(s, &o, flags, print_exported, &p);
    simstore_close(s);
    return finish_output(CMD, rc, path) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
