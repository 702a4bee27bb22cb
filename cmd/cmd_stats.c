/* cmd_stats.c: `simstore stats`: counts, design and sizes of a store. */
#include "cli.h"
#include "commands.h"
#include "boilerplate.h"
#include "parts.h"
#include "statsjson.h"
#include "textopts.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "stats";

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore stats STORE [--json]\n"
                 "\n"
                 "Print the store's design, counts and sizes, one 'name: value' per line:\n"
                 "k, tables, design, block bytes, documents, fingerprints (distinct),\n"
                 "segments, generation, table bytes (with bytes and bits per fingerprint),\n"
                 "LMDB bytes, bytes per document by part (tables, document file, LMDB's\n"
                 "records, mapping, other and free pages), the block keys an open store\n"
                 "keeps in RAM, how its texts are fingerprinted (the fingerprint version\n"
                 "and the text options), the sketch each document keeps, with its bytes\n"
                 "per document, the boilerplate lines removed from its texts (none, or\n"
                 "how many, and from how many documents), and the write-ahead log a server\n"
                 "keeps (its bytes, and the changes it acknowledged that the store's files\n"
                 "do not hold yet).\n"
                 "\n"
                 "      --json           one JSON object instead\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "STORE may be a sharded store (build --shards): counts and sizes are summed\n"
                 "over its shards, and a line per shard follows.\n"
                 "\n"
                 "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

/* The write-ahead log's line: what a server acknowledged that the store's
 * files do not hold yet. */
static void print_wal(const simstore_stats *st)
{
    if (st->wal_damaged)
        printf("write-ahead log: %llu bytes, DAMAGED (simstore verify says where; writers and "
               "serve refuse the store)\n",
               (unsigned long long)st->wal_bytes);
    else if (!st->wal_bytes)
        printf("write-ahead log: none\n");
    else {
        printf("write-ahead log: %llu bytes, %llu pending %s", (unsigned long long)st->wal_bytes,
               (unsigned long long)st->wal_pending_records,
               CLI_NOUN(st->wal_pending_records, "change"));
        if (st->wal_pending_records)
            printf(" (acknowledged by a server, not yet in the store's files: a running server "
                   "holds them in memory; after one stopped, the next serve, add, delete or "
                   "compact applies them)");
        if (st->wal_torn_bytes)
            printf(", %llu bytes after the last whole record (a write in flight, or a torn "
                   "tail the next open keeps aside)",
                   (unsigned long long)st->wal_torn_bytes);
        printf("\n");
    }
}

/* Each shard: its name, counts and design. */
static int shard_lines(simstore_sharded *sh, int json)
{
    for (unsigned i = 0; i < simstore_sharded_count(sh); i++) {
        simstore_stats st;
        const char *p = simstore_sharded_shard_path(sh, i);
        const char *name = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
        int rc = simstore_get_stats(simstore_sharded_shard(sh, i), &st);
        if (rc)
            return cli_api_error(CMD, rc, "%s", p);
        if (json)
            printf("%s{\"name\":\"%s\",\"documents\":%llu,\"fingerprints\":%llu,"
                   "\"tables\":%u,\"design\":\"%s\"}",
                   i ? "," : "", name, (unsigned long long)st.documents,
                   (unsigned long long)st.fingerprints, st.tables, st.design);
        else
            printf("shard %u: %s: %llu %s, %llu %s; %s\n", i, name,
                   (unsigned long long)st.documents, CLI_NOUN(st.documents, "document"),
                   (unsigned long long)st.fingerprints, CLI_NOUN(st.fingerprints, "fingerprint"),
                   st.design);
    }
    return CLI_EXIT_OK;
}

/* stats of a sharded store: the lines of one store over the sums, then
 * the shards (JSON: "shards" and "shard_stats" added to the object). */
static int print_sharded(const char *path, simstore_sharded *sh, simstore *first,
                         const simstore_stats *st, int json)
{
    if (json) {
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        if (!mem)
            return cli_error(CMD, "out of memory");
        stats_json(mem, first, st);
        fclose(mem);
        if (len == 0 || buf[len - 1] != '}') {
            free(buf);
            return cli_error(CMD, "out of memory");
        }
        fwrite(buf, 1, len - 1, stdout);
        free(buf);
        printf(",\"shards\":%u,\"shard_stats\":[", simstore_sharded_count(sh));
        int rc = shard_lines(sh, 1);
        puts("]}");
        return rc;
    }
    simstore_text_options text;
    simstore_get_text_options(first, &text);
    char boiler_desc[160], desc[256];
    boiler_describe(simstore_get_boilerplate(first), boiler_desc, sizeof boiler_desc);
    double per_fp = st->table_fps ? (double)st->table_bytes / (double)st->table_fps : 0;
    double per_table_bits = st->tables ? per_fp * 8 / st->tables : 0;
    printf("store: %s\n", path);
    printf("shards: %u\n", simstore_sharded_count(sh));
    printf("k: %u\n", st->k);
    printf("tables: %u\n", st->tables);
    printf("design: %s\n", st->design);
    printf("block bytes: %u\n", st->block_bytes);
    printf("kind: %s\n", st->fingerprint_only ? "fingerprint-only" : "documents");
    printf("documents: %llu\n", (unsigned long long)st->documents);
    printf("fingerprints: %llu (each shard's distinct ones, summed)\n",
           (unsigned long long)st->fingerprints);
    printf("segments: %llu\n", (unsigned long long)st->segments);
    printf("table bytes: %llu (%.2f bytes per fingerprint, %.2f bits per fingerprint per table)\n",
           (unsigned long long)st->table_bytes, per_fp, per_table_bits);
    printf("lmdb bytes: %llu\n", (unsigned long long)st->lmdb_bytes);
    parts_text(stdout, st);
    printf("block keys in RAM: %llu bytes\n", (unsigned long long)st->block_key_bytes);
    textopt_describe(&text, desc, sizeof desc);
    printf("fingerprint version: %u\n", text.version);
    printf("text options: %s\n", desc);
    textopt_describe_sketch(text.sketch, desc, sizeof desc);
    printf("sketch: %s\n", desc);
    printf("boilerplate: %s\n", boiler_desc);
    textopt_describe_paragraphs(st, desc, sizeof desc);
    printf("paragraph index: %s\n", desc);
    return shard_lines(sh, 0);
}

int cmd_stats(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    simstore *s = NULL;
    simstore_sharded *sh = NULL;
    simstore_stats st;
    simstore_text_options text;
    char boiler_desc[160];
    int rc;
    if (simstore_is_sharded(path)) {
        /* A sharded store: counts and sizes summed over its shards, the
         * rest as every shard has it (format/shards.md). */
        rc = simstore_sharded_open(path, SIMSTORE_OPEN_READONLY, &sh);
        s = simstore_sharded_shard(sh, 0);
        if (rc == SIMSTORE_OK)
            rc = simstore_sharded_get_stats(sh, &st);
    } else {
        rc = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
        if (rc == SIMSTORE_OK)
            rc = simstore_get_stats(s, &st);
    }
    if (rc == SIMSTORE_OK)
        simstore_get_text_options(s, &text);
    if (rc) {
        if (sh)
            simstore_sharded_close(sh);
        else
            simstore_close(s);
        return cli_api_error(CMD, rc, "%s", path);
    }
    if (sh) {
        rc = print_sharded(path, sh, s, &st, json);
        simstore_sharded_close(sh);
        return rc;
    }
    boiler_describe(simstore_get_boilerplate(s), boiler_desc, sizeof boiler_desc);
    double per_fp = st.table_fps ? (double)st.table_bytes / (double)st.table_fps : 0;
    double per_table_bits = st.tables ? per_fp * 8 / st.tables : 0;
    if (json) {
        stats_json(stdout, s, &st);
        putchar('\n');
        simstore_close(s);
        return CLI_EXIT_OK;
    }
    printf("store: %s\n", path);
    printf("k: %u\n", st.k);
    printf("tables: %u\n", st.tables);
    printf("design: %s\n", st.design);
    printf("block bytes: %u\n", st.block_bytes);
    printf("kind: %s\n", st.fingerprint_only ? "fingerprint-only" : "documents");
    printf("documents: %llu\n", (unsigned long long)st.documents);
    printf("fingerprints: %llu\n", (unsigned long long)st.fingerprints);
    printf("segments: %llu\n", (unsigned long long)st.segments);
    printf("generation: %llu\n", (unsigned long long)st.generation);
    printf("table bytes: %llu (%.2f bytes per fingerprint, %.2f bits per fingerprint per table)\n",
           (unsigned long long)st.table_bytes, per_fp, per_table_bits);
    printf("lmdb bytes: %llu\n", (unsigned long long)st.lmdb_bytes);
    parts_text(stdout, &st);
    printf("block keys in RAM: %llu bytes\n", (unsigned long long)st.block_key_bytes);
    char desc[256];
    textopt_describe(&text, desc, sizeof desc);
    printf("fingerprint version: %u\n", text.version);
    printf("text options: %s\n", desc);
    textopt_describe_sketch(text.sketch, desc, sizeof desc);
    printf("sketch: %s\n", desc);
    printf("boilerplate: %s\n", boiler_desc);
    textopt_describe_paragraphs(&st, desc, sizeof desc);
    printf("paragraph index: %s\n", desc);
    print_wal(&st);
    simstore_close(s);
    return CLI_EXIT_OK;
}
