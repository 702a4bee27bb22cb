/* cmd_verify.c: `simstore verify`: check a store (or one table file) without
 * trusting it and list every problem with its file, block and byte offset;
 * exit 1 when anything is wrong. */
#include "cli.h"
#include "commands.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const CMD = "verify";

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore verify STORE|FILE [--quick] [--json] [--quiet]\n"
                 "\n"
                 "Check a store directory, or one table file, and print one line per\n"
                 "problem found: 'error: ...' or 'warning: ...', naming the file and, where\n"
                 "it applies, the block (LMDB page) and byte offset. Then one summary line.\n"
                 "\n"
                 "A store check walks data.mdb's B-trees page by page (LMDB keeps no\n"
                 "checksums), checks the store, state, text and design records, every table\n"
                 "file (header, footer, index and block checksums, decoding, order and\n"
                 "uniqueness inside and across blocks, counts, and tag, table number, block\n"
                 "size, permutation and count against the store), that the tables of a\n"
                 "segment hold the same fingerprints (exactly up to 2^22 per segment, by an\n"
                 "order-independent digest beyond), that every fps fingerprint is in a live\n"
                 "segment, that docs and fps agree both ways, the document file (every\n"
                 "block and directory, its fingerprints in its segment's tables, the\n"
                 "tombstones of its deleted documents), and the state's counts; files the\n"
                 "store does not use are warnings.\n"
                 "\n"
                 "      --quick          headers, indexes, records and counts only (no block\n"
                 "                       decoding and no cross-checks)\n"
                 "      --json           JSON Lines: one object per problem, then\n"
                 "                       {\"summary\": {...}}\n"
                 "      --quiet          print only errors and the summary\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "A sharded store (build --shards): its manifest and the shards' agreement\n"
                 "with it, then every shard as a store (a summary line each) and, but with\n"
                 "--quick, that every document is on the shard its id gives; then a summary\n"
                 "of the whole.\n"
                 "\n"
                 "Exit status: 0 no error (warnings allowed), 1 errors found or the check\n"
                 "could not run, 2 usage error.\n");
}

static const char *kind_name(simstore_problem_kind k)
{
    switch (k) {
    case SIMSTORE_PROBLEM_IO: return "io";
    case SIMSTORE_PROBLEM_MISSING: return "missing";
    case SIMSTORE_PROBLEM_LEFTOVER: return "leftover";
    case SIMSTORE_PROBLEM_LMDB: return "lmdb";
    case SIMSTORE_PROBLEM_RECORD: return "record";
    case SIMSTORE_PROBLEM_TABLE: return "table";
    case SIMSTORE_PROBLEM_BLOCK: return "block";
    case SIMSTORE_PROBLEM_TABLE_STORE: return "table_store";
    case SIMSTORE_PROBLEM_TABLE_SET: return "table_set";
    case SIMSTORE_PROBLEM_SEGMENT_OVERLAP: return "segment_overlap";
    case SIMSTORE_PROBLEM_DOC: return "doc";
    case SIMSTORE_PROBLEM_DOC_WITHOUT_FPS: return "doc_without_fps";
    case SIMSTORE_PROBLEM_FPS_WITHOUT_DOC: return "fps_without_doc";
    case SIMSTORE_PROBLEM_FPS_WITHOUT_TABLE: return "fps_without_table";
    case SIMSTORE_PROBLEM_COUNTS: return "counts";
    case SIMSTORE_PROBLEM_LOG: return "log";
    }
    return "other";
}

/* A NUL-terminated string as JSON (cli_json_string). */
static void json_string(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

typedef struct printer {
    int json;
    int quiet;
} printer;

static int print_problem(void *ctx, const simstore_problem *p)
{
    const printer *pr = (const printer *)ctx;
    if (pr->quiet && p->warning)
        return 0;
    if (pr->json) {
        printf("{\"severity\":\"%s\",\"kind\":\"%s\",\"file\":", p->warning ? "warning" : "error",
               kind_name(p->kind));
        if (p->file)
            json_string(p->file);
        else
            printf("null");
        printf(",\"block\":%" PRId64 ",\"offset\":%" PRId64 ",\"message\":", p->block, p->offset);
        json_string(p->message);
        printf("}\n");
    } else {
        printf("%s: %s\n", p->warning ? "warning" : "error", p->message);
    }
    return 0;
}

/* The summary line (JSON: object) of one store or table file. */
static void print_summary(const printer *pr_, const char *path, unsigned flags,
                          const simstore_verify_summary *sum_)
{
    const printer pr = *pr_;
    const simstore_verify_summary sum = *sum_;
    if (pr.json) {
        printf("{\"summary\":{\"path\":");
        json_string(path);
        printf(",\"kind\":\"%s\",\"ok\":%s,\"errors\":%" PRIu64 ",\"warnings\":%" PRIu64
               ",\"quick\":%s,\"table_files\":%" PRIu64 ",\"blocks\":%" PRIu64
               ",\"fingerprints\":%" PRIu64 ",\"documents\":%" PRIu64 ",\"fps_entries\":%" PRIu64
               ",\"lmdb_pages\":%" PRIu64 ",\"dead_fingerprints\":%" PRIu64
               ",\"sets_by_digest\":%s,\"paragraph_entries\":%" PRIu64 ",\"log_records\":%" PRIu64
               ",\"log_pending\":%" PRIu64 ",\"attempts\":%u}}\n",
               sum.store == 2 ? "sharded"
               : sum.store    ? "store"
                              : "table",
               sum.errors ? "false" : "true", sum.errors, sum.warnings,
               (flags & SIMSTORE_VERIFY_QUICK) ? "true" : "false", sum.table_files, sum.blocks,
               sum.fingerprints, sum.documents, sum.fps_entries, sum.lmdb_pages,
               sum.dead_fingerprints, sum.sets_by_digest ? "true" : "false", sum.paragraph_entries,
               sum.log_records, sum.log_pending, sum.attempts);
    } else {
        printf("verify %s: %s: %" PRIu64 " %s, %" PRIu64 " %s (%s%" PRIu64 " %s, %" PRIu64
               " %s, %" PRIu64 " %s decoded",
               path, sum.errors ? "FAILED" : "OK", sum.errors, CLI_NOUN(sum.errors, "error"),
               sum.warnings, CLI_NOUN(sum.warnings, "warning"),
               (flags & SIMSTORE_VERIFY_QUICK) ? "quick; " : "", sum.table_files,
               CLI_NOUN(sum.table_files, "table file"), sum.blocks, CLI_NOUN(sum.blocks, "block"),
               sum.fingerprints, CLI_NOUN(sum.fingerprints, "fingerprint"));
        if (sum.store)
            printf(", %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64 " %s%s", sum.documents,
                   CLI_NOUN(sum.documents, "document"), sum.fps_entries,
                   cli_plural(sum.fps_entries, "fps entry", "fps entries"), sum.lmdb_pages,
                   CLI_NOUN(sum.lmdb_pages, "LMDB page"),
                   sum.sets_by_digest ? ", sets by digest" : "");
        if (sum.paragraph_entries)
            printf(", %" PRIu64 " %s", sum.paragraph_entries,
                   cli_plural(sum.paragraph_entries, "paragraph entry", "paragraph entries"));
        if (sum.log_records)
            printf(", %" PRIu64 " %s (%" PRIu64 " pending)", sum.log_records,
                   cli_plural(sum.log_records, "log record", "log records"), sum.log_pending);
        if (sum.attempts > 1)
            printf(", checked %u times: a writer committed meanwhile", sum.attempts);
        printf(")\n");
    }
}

typedef struct placement {
    unsigned shard, shards;
    uint64_t misplaced;
    const char *path;
    const printer *pr;
} placement;

/* A document on a shard the assignment does not give it: an error. */
static int check_placement(void *ctx, const simstore_document *doc)
{
    placement *pl = (placement *)ctx;
    unsigned want = doc->id ? simstore_shard_of(doc->id, doc->id_len, pl->shards)
                            : simstore_shard_of_fp(doc->fp, pl->shards);
    if (want == pl->shard)
        return 0;
    if (pl->misplaced++ < 20) {
        char msg[CLI_ESCAPED_ID_BYTES + PATH_MAX + 128], esc[CLI_ESCAPED_ID_BYTES];
        if (doc->id)
            snprintf(msg, sizeof msg, "%s: document '%s' belongs on shard %u, not %u", pl->path,
                     cli_escape(doc->id, doc->id_len, esc, sizeof esc), want, pl->shard);
        else
            snprintf(msg, sizeof msg, "%s: fingerprint %016llx belongs on shard %u, not %u",
                     pl->path, (unsigned long long)doc->fp, want, pl->shard);
        simstore_problem p;
        memset(&p, 0, sizeof p);
        p.message = msg;
        p.file = pl->path;
        p.block = -1;
        p.offset = -1;
        print_problem((void *)pl->pr, &p);
    }
    return 0;
}

/* A sharded store (format/shards.md): the manifest and the agreement of
 * the shards with it (simstore_sharded_open), then every shard as a store,
 * and (but with --quick) that each document is on the shard its id gives.
 * A summary per shard, then one for the whole. */
static int verify_sharded(const printer *pr, const char *path, unsigned flags)
{
    simstore_sharded *sh;
    int rc = simstore_sharded_open(path, SIMSTORE_OPEN_READONLY, &sh);
    simstore_verify_summary total;
    memset(&total, 0, sizeof total);
    total.store = 2; /* "sharded" in JSON */
    if (rc) {
        simstore_problem p;
        memset(&p, 0, sizeof p);
        p.message = simstore_last_error();
        p.file = path;
        p.block = -1;
        p.offset = -1;
        print_problem((void *)pr, &p);
        total.errors = 1;
        print_summary(pr, path, flags, &total);
        return CLI_EXIT_FAIL;
    }
    unsigned r = simstore_sharded_count(sh);
    for (unsigned i = 0; i < r; i++) {
        const char *sp = simstore_sharded_shard_path(sh, i);
        simstore_verify_summary sum;
        memset(&sum, 0, sizeof sum);
        rc = simstore_verify(sp, flags, print_problem, (void *)pr, &sum);
        if (rc && rc != SIMSTORE_ECORRUPT) {
            fflush(stdout);
            simstore_sharded_close(sh);
            return cli_api_error(CMD, rc, "%s", sp);
        }
        if (!(flags & SIMSTORE_VERIFY_QUICK) && sum.errors == 0) {
            placement pl = {i, r, 0, sp, pr};
            rc = simstore_export(simstore_sharded_shard(sh, i), NULL, 0, check_placement, &pl);
            if (rc) {
                fflush(stdout);
                simstore_sharded_close(sh);
                return cli_api_error(CMD, rc, "%s", sp);
            }
            sum.errors += pl.misplaced;
        }
        print_summary(pr, sp, flags, &sum);
        total.errors += sum.errors;
        total.warnings += sum.warnings;
        total.table_files += sum.table_files;
        total.blocks += sum.blocks;
        total.fingerprints += sum.fingerprints;
        total.documents += sum.documents;
        total.fps_entries += sum.fps_entries;
        total.lmdb_pages += sum.lmdb_pages;
        total.dead_fingerprints += sum.dead_fingerprints;
        total.sets_by_digest |= sum.sets_by_digest;
        total.paragraph_entries += sum.paragraph_entries;
    }
    simstore_sharded_close(sh);
    print_summary(pr, path, flags, &total);
    return total.errors ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cmd_verify(int argc, char **argv)
{
    enum { OPT_QUICK = 1, OPT_JSON, OPT_QUIET };
    static const struct option longopts[] = {
        {"quick", no_argument, NULL, OPT_QUICK},
        {"json", no_argument, NULL, OPT_JSON},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    printer pr = {0, 0};
    unsigned flags = 0;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_QUICK: flags |= SIMSTORE_VERIFY_QUICK; break;
        case OPT_JSON: pr.json = 1; break;
        case OPT_QUIET: pr.quiet = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE or FILE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (simstore_is_sharded(path)) {
        int status = verify_sharded(&pr, path, flags);
        if (fflush(stdout) != 0)
            return cli_error(CMD, "cannot write standard output: %s", strerror(errno));
        return status;
    }
    simstore_verify_summary sum;
    int rc = simstore_verify(path, flags, print_problem, &pr, &sum);
    if (rc && rc != SIMSTORE_ECORRUPT) {
        fflush(stdout);
        return cli_api_error(CMD, rc, "%s", path);
    }
    print_summary(&pr, path, flags, &sum);
    if (fflush(stdout) != 0)
        return cli_error(CMD, "cannot write standard output: %s", strerror(errno));
    return sum.errors ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
