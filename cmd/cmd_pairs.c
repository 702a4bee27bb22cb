/* cmd_pairs.c: `simstore pairs`: every pair of stored documents within
 * distance K (simstore_pairs, the self-join of the store's tables), or every
 * pair of fingerprint lines (the same join for large inputs, all pairs
 * compared for small ones; the same bytes either way). */
#include "cli.h"
#include "optcheck.h"
#include "commands.h"
#include "input.h"
#include "progress.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const CMD = "pairs";

/* Fingerprint lines above this many go through the join (auto). */
#define JOIN_MIN_LINES 4096

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore pairs STORE [--k K] [--by-fingerprint] [--json] [--threads N]\n"
            "                      [--memory SIZE] [--similarity] [--min-similarity J]\n"
            "                      [--bands on|off]\n"
            "       simstore pairs STORE --paragraphs [--min-fraction F] [--k K] [--json]\n"
            "       simstore pairs [--k K] [--json] [--method auto|join|brute] [FILE...]\n"
            "\n"
            "Print every unordered pair of stored documents within Hamming distance K,\n"
            "once, as ID_A<TAB>ID_B<TAB>DISTANCE with ID_A before ID_B in byte order,\n"
            "lines sorted by distance, then ID_A, then ID_B: the same bytes for every\n"
            "--threads. Documents sharing a fingerprint are pairs at distance 0. The\n"
            "store's permuted tables are scanned once each (a self-join, not one query\n"
            "per document). A fingerprint-only store prints HEX_A<TAB>HEX_B<TAB>DISTANCE.\n"
            "\n"
            "With --paragraphs (a store built with --paragraphs), every unordered pair\n"
            "of documents sharing near-duplicate paragraphs, once, as\n"
            "ID_A<TAB>ID_B<TAB>SHARED_A<TAB>OF_A<TAB>SHARED_B<TAB>OF_B<TAB>FRACTION:\n"
            "SHARED_A of A's OF_A paragraphs have a paragraph of B within K (as `query\n"
            "--paragraphs` counts them), and the other way; FRACTION is the larger of\n"
            "the two (so a page copying part of a long document pairs with it); lines\n"
            "sorted by FRACTION (larger first), then ID_A, then ID_B. --min-fraction F\n"
            "(0..1, default 0.3) keeps those with FRACTION >= F; with --json,\n"
            "{\"a\", \"b\", \"shared_a\", \"of_a\", \"shared_b\", \"of_b\", \"fraction\"}.\n"
            "\n"
            "Without a STORE, read fingerprint lines HEX16<TAB>ID (as `simstore\n"
            "fingerprint` prints them) from the FILEs or standard input and print their\n"
            "pairs the same way (ids repeated in the input pair as often as they occur).\n"
            "\n"
            "      --k K            largest distance: for a STORE 0..7 (default: 7 with\n"
            "                       the similarity filter below, else the store's k;\n"
            "                       above its k its fingerprints are joined in memory, 8\n"
            "                       bytes each plus 16 a thread, when that fits in half\n"
            "                       of --memory, else through sorted runs in $TMPDIR;\n"
            "                       --paragraphs probes more); for lines 0..64 (default 3)\n"
            "      --by-fingerprint pairs of distinct fingerprints with their document\n"
            "                       counts, HEX_A<TAB>HEX_B<TAB>DISTANCE<TAB>COUNT_A<TAB>COUNT_B,\n"
            "                       sorted by distance, HEX_A, HEX_B; a fingerprint held\n"
            "                       by several documents is paired with itself at 0\n"
            "      --json           JSON Lines {\"a\", \"b\", \"distance\"[, \"count_a\",\n"
            "                       \"count_b\"][, \"similarity\"]}\n"
            "      --similarity     STORE: add the pair's estimated Jaccard similarity\n"
            "                       (format/sketch.md) as a fourth column (\"similarity\"\n"
            "                       with --json; '-', null, when unknown: a store or a\n"
            "                       document without sketches)\n"
            "      --min-similarity J\n"
            "                       STORE: only the pairs whose estimated similarity is\n"
            "                       at least J, 0..1 (0: all); needs a store that keeps\n"
            "                       sketches, not with --by-fingerprint. Default: 0.9\n"
            "                       with bands and the store's k (with --bands off,\n"
            "                       --k 7) on a store that keeps sketches when --k is\n"
            "                       not given (the near-duplicate setting: README,\n"
            "                       \"Similarity\"), else 0\n"
            "      --bands on|off   STORE: candidates also from the sketches' LSH bands\n"
            "                       (format/sketch.md 6.2): two documents whose sketches\n"
            "                       agree on every bit of one band are judged by J at any\n"
            "                       distance (so pairs beyond K are printed); the bands'\n"
            "                       shape derives from J. Default: on when J is 0.5 or\n"
            "                       more; off: within K alone\n");
    fprintf(out,
            "      --threads N      threads (default: every core)\n"
            "      --memory SIZE    memory for sorting pairs (default 1G); more spills to\n"
            "                       $TMPDIR\n"
            "      --method M       lines only: join (the store's method, K <= 7), brute\n"
            "                       (all pairs compared), or auto (default): join above\n"
            "                       %d lines when K <= 7\n"
            "      --progress       report progress on stderr (STORE)\n"
            "  -h, --help           show this help\n"
            "\n"
            "A malformed line is reported as FILE:LINE: message and skipped.\n"
            "Exit status: 0 success, 1 some input failed, 2 usage error.\n",
            JOIN_MIN_LINES);
}

typedef struct entry {
    uint64_t fp;
    size_t id_offset; /* into the id arena */
    size_t id_len;
} entry;

typedef struct pair {
    uint32_t a, b; /* entries, a's id <= b's id */
    unsigned distance;
} pair;

typedef struct store {
    entry *entries;
    size_t count, cap;
    char *ids;
    size_t ids_len, ids_cap;
} store;

static const char *sort_ids; /* qsort has no context argument */
static const entry *sort_entries;

static int id_cmp(const entry *x, const entry *y)
{
    size_t n = x->id_len < y->id_len ? x->id_len : y->id_len;
    int c = memcmp(sort_ids + x->id_offset, sort_ids + y->id_offset, n);
    if (c)
        return c;
    return (x->id_len > y->id_len) - (x->id_len < y->id_len);
}

static int pair_cmp(const void *pa, const void *pb)
{
    const pair *p = pa, *q = pb;
    if (p->distance != q->distance)
        return p->distance < q->distance ? -1 : 1;
    int c = id_cmp(&sort_entries[p->a], &sort_entries[q->a]);
    if (c)
        return c;
    c = id_cmp(&sort_entries[p->b], &sort_entries[q->b]);
    if (c)
        return c;
    /* Equal ids (the same id given twice): input order. */
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

static int add_entry(store *s, const input_record *rec)
{
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        entry *grown = realloc(s->entries, cap * sizeof *grown);
        if (!grown)
            return -1;
        s->entries = grown;
        s->cap = cap;
    }
    if (rec->id_len > s->ids_cap - s->ids_len) {
        size_t cap = s->ids_cap ? s->ids_cap : 65536;
        while (cap - s->ids_len < rec->id_len)
            cap *= 2;
        char *grown = realloc(s->ids, cap);
        if (!grown)
            return -1;
        s->ids = grown;
        s->ids_cap = cap;
    }
    memcpy(s->ids + s->ids_len, rec->id, rec->id_len);
    s->entries[s->count].fp = rec->fingerprint;
    s->entries[s->count].id_offset = s->ids_len;
    s->entries[s->count].id_len = rec->id_len;
    s->ids_len += rec->id_len;
    s->count++;
    return 0;
}

static int read_input(store *s, const char *path, int *failed)
{
    input_reader *r;
    if (input_open(&r, INPUT_FP_ID, path) != 0) {
        cli_error(CMD, "%s: %s", path, strerror(errno));
        *failed = 1;
        return 0;
    }
    input_record rec;
    int got, rc = 0;
    while ((got = input_next(r, &rec)) != 0) {
        if (got == 1) {
            if (s->count >= UINT32_MAX || add_entry(s, &rec) != 0) {
                cli_error(CMD, "%s:%llu: out of memory", rec.file, rec.line);
                rc = -1;
                break;
            }
            continue;
        }
        cli_error(CMD, "%s", input_error(r));
        *failed = 1;
        if (got == -2)
            break;
    }
    input_close(r);
    return rc;
}

/* ---- fingerprint lines ------------------------------------------------------ */

static int push_pair(pair **pairs, size_t *npairs, size_t *cap, uint32_t a, uint32_t b, unsigned d)
{
    if (*npairs == *cap) {
        size_t c = *cap ? *cap * 2 : 1024;
        pair *grown = realloc(*pairs, c * sizeof *grown);
        if (!grown) {
            cli_error(CMD, "out of memory after %zu pairs", *npairs);
            return -1;
        }
        *pairs = grown;
        *cap = c;
    }
    pair *p = &(*pairs)[(*npairs)++];
    p->a = a;
    p->b = b;
    p->distance = d;
    return 0;
}

static int brute_pairs(const store *s, unsigned k, pair **pairs, size_t *npairs, size_t *cap)
{
    for (size_t i = 0; i < s->count; i++) {
        for (size_t j = i + 1; j < s->count; j++) {
            unsigned d = simstore_distance(s->entries[i].fp, s->entries[j].fp);
            if (d <= k && push_pair(pairs, npairs, cap, (uint32_t)i, (uint32_t)j, d) != 0)
                return -1;
        }
    }
    return 0;
}

typedef struct join_ctx {
    const store *s;
    const uint32_t *by_fp; /* entry numbers sorted by (fingerprint, number) */
    pair **pairs;
    size_t *npairs, *cap;
    int out_of_memory; /* push_pair failed (and said so) */
} join_ctx;

static const entry *g_entries;

static int cmp_by_fp(const void *x, const void *y)
{
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    uint64_t fa = g_entries[a].fp, fb = g_entries[b].fp;
    if (fa != fb)
        return fa < fb ? -1 : 1;
    return (a > b) - (a < b);
}

/* The run of by_fp holding fingerprint fp: [*lo, *hi). */
static void fp_run(const join_ctx *j, uint64_t fp, size_t *lo, size_t *hi)
{
    size_t a = 0, b = j->s->count;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (j->s->entries[j->by_fp[m]].fp < fp)
            a = m + 1;
        else
            b = m;
    }
    *lo = a;
    for (b = a; b < j->s->count && j->s->entries[j->by_fp[b]].fp == fp; b++)
        ;
    *hi = b;
}

/* Entry pairs (i < j, as all-pairs gives them) of two runs. */
static int push_runs(join_ctx *j, size_t alo, size_t ahi, size_t blo, size_t bhi, unsigned d)
{
    for (size_t x = alo; x < ahi; x++) {
        for (size_t y = blo; y < bhi; y++) {
            uint32_t a = j->by_fp[x], b = j->by_fp[y];
            if (alo == blo && b <= a)
                continue; /* one run: each pair once */
            if (push_pair(j->pairs, j->npairs, j->cap, a < b ? a : b, a < b ? b : a, d) != 0)
                return -1;
        }
    }
    return 0;
}

static int joined_pair(void *ctx, uint64_t a, uint64_t b, unsigned d)
{
    join_ctx *j = (join_ctx *)ctx;
    size_t alo, ahi, blo, bhi;
    fp_run(j, a, &alo, &ahi);
    fp_run(j, b, &blo, &bhi);
    if (push_runs(j, alo, ahi, blo, bhi, d) != 0) {
        j->out_of_memory = 1;
        return SIMSTORE_ENOMEM;
    }
    return 0;
}

/* The pairs of the join of the distinct fingerprints, plus the entries
 * sharing one: the same set all-pairs gives. */
static int join_pairs(const store *s, unsigned k, unsigned threads, uint64_t memory, pair **pairs,
                      size_t *npairs, size_t *cap)
{
    uint32_t *by_fp = malloc((s->count ? s->count : 1) * sizeof *by_fp);
    uint64_t *fps = malloc((s->count ? s->count : 1) * sizeof *fps);
    if (!by_fp || !fps) {
        free(by_fp);
        free(fps);
        cli_error(CMD, "out of memory for %zu fingerprints", s->count);
        return -1;
    }
    for (size_t i = 0; i < s->count; i++) {
        by_fp[i] = (uint32_t)i;
        fps[i] = s->entries[i].fp;
    }
    g_entries = s->entries;
    qsort(by_fp, s->count, sizeof *by_fp, cmp_by_fp);
    join_ctx j = {s, by_fp, pairs, npairs, cap, 0};
    int rc = 0;
    for (size_t lo = 0, hi; lo < s->count && rc == 0; lo = hi) {
        for (hi = lo + 1; hi < s->count && s->entries[by_fp[hi]].fp == s->entries[by_fp[lo]].fp;
             hi++)
            ;
        if (hi - lo > 1)
            rc = push_runs(&j, lo, hi, lo, hi, 0);
    }
    if (rc == 0 && k > 0) {
        simstore_scan_options o;
        simstore_scan_options_init(&o);
        o.threads = threads;
        o.memory_bytes = memory;
        int jrc = simstore_join_fingerprints(fps, s->count, k, &o, joined_pair, &j);
        if (jrc && !j.out_of_memory)
            cli_api_error(CMD, jrc, "joining %zu fingerprints", s->count);
        if (jrc)
            rc = -1;
    }
    free(by_fp);
    free(fps);
    return rc;
}

static void print_entry_id(const store *s, const entry *e, int json)
{
    if (json)
        cli_json_string(stdout, s->ids + e->id_offset, e->id_len);
    else
        cli_tsv_id(CMD, s->ids + e->id_offset, e->id_len);
}

typedef struct lines_opts {
    unsigned k;
    int json;
    int method; /* 0 auto, 1 join, 2 brute */
    unsigned threads;
    uint64_t memory;
} lines_opts;

static int pairs_of_lines(const lines_opts *lo, int nfiles, char **files)
{
    store s;
    memset(&s, 0, sizeof s);
    int failed = 0, fatal = 0;
    if (nfiles == 0)
        fatal = read_input(&s, "-", &failed);
    for (int i = 0; i < nfiles && !fatal; i++)
        fatal = read_input(&s, files[i], &failed);

    pair *pairs = NULL;
    size_t npairs = 0, cap = 0;
    int join = lo->k <= SIMSTORE_MAX_K &&
               (lo->method == 1 || (lo->method == 0 && s.count > JOIN_MIN_LINES));
    if (!fatal)
        fatal = (join ? join_pairs(&s, lo->k, lo->threads, lo->memory, &pairs, &npairs, &cap)
                      : brute_pairs(&s, lo->k, &pairs, &npairs, &cap)) != 0;
    sort_ids = s.ids;
    sort_entries = s.entries;
    for (size_t i = 0; i < npairs; i++) {
        pair *p = &pairs[i];
        if (id_cmp(&s.entries[p->b], &s.entries[p->a]) < 0) {
            uint32_t t = p->a;
            p->a = p->b;
            p->b = t;
        }
    }
    if (!fatal) {
        qsort(pairs, npairs, sizeof *pairs, pair_cmp);
        for (size_t i = 0; i < npairs; i++) {
            const entry *a = &s.entries[pairs[i].a], *b = &s.entries[pairs[i].b];
            fputs(lo->json ? "{\"a\":" : "", stdout);
            print_entry_id(&s, a, lo->json);
            fputs(lo->json ? ",\"b\":" : "\t", stdout);
            print_entry_id(&s, b, lo->json);
            printf(lo->json ? ",\"distance\":%u}\n" : "\t%u\n", pairs[i].distance);
        }
    }
    free(pairs);
    free(s.entries);
    free(s.ids);
    return (failed || fatal) ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ---- a store ---------------------------------------------------------------- */

typedef struct store_out {
    int json;
    unsigned flags;
    int similarity;        /* --similarity */
    double min_similarity; /* --min-similarity (0: none; SIMSTORE_NEAR_DEFAULT_SIMILARITY:
                              not given) */
    int bands;             /* --bands: 1, 0 or SIMSTORE_NEAR_DEFAULT_BANDS */
    int paragraphs;        /* --paragraphs */
    double min_fraction;   /* --min-fraction */
} store_out;

static void print_pair_id(const char *id, size_t len, unsigned flags, uint64_t fp, int json)
{
    char hex[17];
    if (!id) {
        cli_format_hex64(fp, hex);
        printf(json ? "\"%s\"" : "%s", hex);
    } else if (json && !(flags & SIMSTORE_MATCH_INTEGER_ID)) {
        cli_json_string(stdout, id, len);
    } else if (json) {
        fwrite(id, 1, len, stdout);
    } else {
        cli_tsv_id(CMD, id, len);
    }
}

static int print_store_pair(void *ctx, const simstore_pair *p)
{
    const store_out *o = (const store_out *)ctx;
    fputs(o->json ? "{\"a\":" : "", stdout);
    print_pair_id(p->id_a, p->id_a_len, p->flags_a, p->fp_a, o->json);
    fputs(o->json ? ",\"b\":" : "\t", stdout);
    print_pair_id(p->id_b, p->id_b_len, p->flags_b, p->fp_b, o->json);
    printf(o->json ? ",\"distance\":%u" : "\t%u", p->distance);
    if (o->flags & SIMSTORE_PAIRS_BY_FINGERPRINT)
        printf(o->json ? ",\"count_a\":%llu,\"count_b\":%llu" : "\t%llu\t%llu",
               (unsigned long long)p->count_a, (unsigned long long)p->count_b);
    if (o->similarity) {
        char sim[32];
        cli_format_similarity(p->similarity, o->json, sim);
        printf(o->json ? ",\"similarity\":%s" : "\t%s", sim);
    }
    fputs(o->json ? "}\n" : "\n", stdout);
    return ferror(stdout) ? SIMSTORE_EIO : 0;
}

static int print_paragraph_pair(void *ctx, const simstore_paragraph_pair *p)
{
    const store_out *o = (const store_out *)ctx;
    fputs(o->json ? "{\"a\":" : "", stdout);
    print_pair_id(p->id_a, p->id_a_len, p->flags_a, 0, o->json);
    fputs(o->json ? ",\"b\":" : "\t", stdout);
    print_pair_id(p->id_b, p->id_b_len, p->flags_b, 0, o->json);
    printf(o->json ? ",\"shared_a\":%zu,\"of_a\":%zu,\"shared_b\":%zu,\"of_b\":%zu,"
                     "\"fraction\":%.4f}\n"
                   : "\t%zu\t%zu\t%zu\t%zu\t%.4f\n",
           p->shared_a, p->of_a, p->shared_b, p->of_b, p->fraction);
    return ferror(stdout) ? SIMSTORE_EIO : 0;
}

static int pairs_of_store(const char *path, int have_k, unsigned k, unsigned threads,
                          uint64_t memory, store_out *out, int progress)
{
    simstore *s;
    int rc = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    simstore_stats st;
    rc = simstore_get_stats(s, &st);
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.k = have_k ? k : SIMSTORE_NEAR_DEFAULT_K;
    o.threads = threads;
    o.memory_bytes = memory;
    o.min_similarity = out->min_similarity;
    o.bands = out->bands;
    /* The near-duplicate rule (--k, --min-similarity, --bands) is resolved and
     * checked by the library, as for every client. */
    const char *lacks = rc == 0 ? cli_store_problem(&st, 0, out->paragraphs) : NULL;
    if (lacks) {
        simstore_close(s);
        return cli_error(CMD, "%s %s", path, lacks);
    }
    cli_progress prog;
    cli_progress_init(&prog, CMD, progress);
    o.progress = cli_progress_update;
    o.progress_ctx = &prog;
    if (rc == 0 && out->paragraphs)
        rc = simstore_paragraph_pairs(s, o.k, out->min_fraction, print_paragraph_pair, out);
    else if (rc == 0)
        rc = simstore_pairs(s, &o, out->flags, print_store_pair, out);
    cli_progress_done(&prog);
    simstore_close(s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    return CLI_EXIT_OK;
}

enum { OPT_JSON = 1, OPT_BY_FP, OPT_THREADS, OPT_MEMORY, OPT_METHOD, OPT_PROGRESS };
enum { OPT_SIMILARITY = OPT_PROGRESS + 1, OPT_MIN_SIMILARITY, OPT_PARAGRAPHS, OPT_MIN_FRACTION };
enum { OPT_BANDS = OPT_MIN_FRACTION + 1 };

int cmd_pairs(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"k", required_argument, NULL, 'k'},
        {"json", no_argument, NULL, OPT_JSON},
        {"by-fingerprint", no_argument, NULL, OPT_BY_FP},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"method", required_argument, NULL, OPT_METHOD},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"similarity", no_argument, NULL, OPT_SIMILARITY},
        {"min-similarity", required_argument, NULL, OPT_MIN_SIMILARITY},
        {"bands", required_argument, NULL, OPT_BANDS},
        {"paragraphs", no_argument, NULL, OPT_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, OPT_MIN_FRACTION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    unsigned long long k = 3;
    int have_k = 0, c, rc, progress = 0, have_method = 0;
    lines_opts lo = {3, 0, 0, 0, 0};
    store_out out = {0,
                     0,
                     0,
                     SIMSTORE_NEAR_DEFAULT_SIMILARITY,
                     SIMSTORE_NEAR_DEFAULT_BANDS,
                     0,
                     SIMSTORE_NEAR_FRACTION};
    int min_fraction_given = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'k':
            if (cli_parse_uint(optarg, 0, 64, &k) != 0)
                return cli_usage_error(CMD, "--k: '%s' is not a distance in 0..64", optarg);
            have_k = 1;
            break;
        case OPT_JSON: lo.json = out.json = 1; break;
        case OPT_BY_FP: out.flags |= SIMSTORE_PAIRS_BY_FINGERPRINT; break;
        case OPT_THREADS:
            if ((rc = cli_threads_option(CMD, optarg, &lo.threads)) != 0)
                return rc;
            break;
        case OPT_MEMORY:
            if ((rc = cli_memory_option(CMD, optarg, &lo.memory)) != 0)
                return rc;
            break;
        case OPT_METHOD:
            if (strcmp(optarg, "auto") == 0)
                lo.method = 0;
            else if (strcmp(optarg, "join") == 0)
                lo.method = 1;
            else if (strcmp(optarg, "brute") == 0)
                lo.method = 2;
            else
                return cli_usage_error(CMD, "--method: '%s' is not auto, join or brute", optarg);
            have_method = 1;
            break;
        case OPT_PROGRESS: progress = 1; break;
        case OPT_SIMILARITY: out.similarity = 1; break;
        case OPT_MIN_SIMILARITY:
            if (cli_min_similarity_option(CMD, optarg, &out.min_similarity))
                return CLI_EXIT_USAGE;
            break;
        case OPT_BANDS:
            if (cli_bands_option(CMD, optarg, &out.bands))
                return CLI_EXIT_USAGE;
            break;
        case OPT_PARAGRAPHS: out.paragraphs = 1; break;
        case OPT_MIN_FRACTION:
            if (cli_min_fraction_option(CMD, optarg, &out.min_fraction))
                return CLI_EXIT_USAGE;
            min_fraction_given = 1;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    const char *refused = cli_pairs_options_problem(min_fraction_given, out.paragraphs, out.flags,
                                                    out.similarity, out.min_similarity);
    if (!refused)
        refused = cli_bands_rule_problem(out.bands, have_k, out.min_similarity, out.paragraphs,
                                         out.flags & SIMSTORE_PAIRS_BY_FINGERPRINT);
    if (refused)
        return cli_usage_error(CMD, "%s", refused);
    struct stat sb;
    int is_store = optind < argc && stat(argv[optind], &sb) == 0 && S_ISDIR(sb.st_mode);
    if (out.paragraphs && !is_store)
        return cli_usage_error(CMD, "--paragraphs needs a STORE built with --paragraphs");
    if (is_store) {
        if (optind != argc - 1)
            return cli_usage_error(CMD, "one STORE only (fingerprint lines come from files)");
        if (have_method)
            return cli_usage_error(CMD, "--method is for fingerprint lines, not a STORE");
        if (have_k && k > SIMSTORE_MAX_K)
            return cli_usage_error(CMD, "--k: %llu is above %d, the largest a store has", k,
                                   SIMSTORE_MAX_K);
        if (out.min_similarity > 0 && (out.flags & SIMSTORE_PAIRS_BY_FINGERPRINT))
            return cli_usage_error(CMD, "--min-similarity compares documents: not with "
                                        "--by-fingerprint");
        rc = pairs_of_store(cli_store_path(argv[optind]), have_k, (unsigned)k, lo.threads,
                            lo.memory, &out, progress);
    } else {
        if (out.flags)
            return cli_usage_error(CMD, "--by-fingerprint needs a STORE");
        if (out.similarity || out.min_similarity > 0)
            return cli_usage_error(CMD, "--similarity and --min-similarity need a STORE (that "
                                        "keeps sketches); fingerprint lines have none");
        if (out.bands != SIMSTORE_NEAR_DEFAULT_BANDS)
            return cli_usage_error(CMD, "--bands needs a STORE (that keeps sketches); "
                                        "fingerprint lines have none");
        if (lo.method == 1 && k > SIMSTORE_MAX_K)
            return cli_usage_error(CMD, "--method join: --k at most %d", SIMSTORE_MAX_K);
        lo.k = (unsigned)k;
        rc = pairs_of_lines(&lo, argc - optind, argv + optind);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(CMD, "writing standard output: %s", strerror(errno ? errno : EIO));
        return CLI_EXIT_FAIL;
    }
    return rc;
}
