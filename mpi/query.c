/* query.c: `simstore-mpi query OUT --queries FILE`: every rank reads the
 * queries (the same fingerprints, in order) and answers each batch against
 * its shard (documents, or with --paragraphs the documents sharing
 * paragraphs: each lives on one shard, so its counts are complete there);
 * rank 0 gathers the answers, merges them into one store's order and
 * prints exactly what `simstore query` prints for one store of the same
 * documents. Also open_my_shard, which pairs and clusters open with. */
#include "mpi_internal.h"

#include "cli.h"
#include "matchjson.h"
#include "optcheck.h"

#include <mpi.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int open_my_shard(const char *out, simstore **s, simstore_stats *st, char *shard, size_t size)
{
    *s = NULL;
    /* Rank 0 checks the whole (manifest, every shard's agreement, R). */
    int failed = 0;
    if (rank == 0) {
        simstore_sharded *sh;
        int rc = simstore_sharded_open(out, SIMSTORE_OPEN_READONLY, &sh);
        if (rc) {
            say("%s", simstore_last_error());
            failed = 1;
        } else if (simstore_sharded_count(sh) != (unsigned)nranks) {
            say("%s has %u shards: run it with -np %u", out, simstore_sharded_count(sh),
                simstore_sharded_count(sh));
            failed = 1;
        }
        simstore_sharded_close(sh);
    }
    if (agree(failed, "opening the store"))
        return 1;
    char name[16];
    simstore_shard_name((unsigned)rank, name, sizeof name);
    snprintf(shard, size, "%s/%s", out, name);
    int rc = simstore_open(shard, SIMSTORE_OPEN_READONLY, s);
    if (rc == SIMSTORE_OK)
        rc = simstore_get_stats(*s, st);
    if (rc)
        say("%s: %s", shard, simstore_last_error());
    if (agree(rc != SIMSTORE_OK, "opening the shards")) {
        simstore_close(*s);
        *s = NULL;
        return 1;
    }
    return 0;
}

/* What shapes `simstore query`'s answer, the same on every rank. */
typedef struct query_opts {
    int json, meta, similarity, skip_self, end_marker, paragraphs;
    double min_similarity; /* 0: every match */
    double min_fraction;   /* --paragraphs */
} query_opts;

/* One line of the queries file, kept by rank 0 for printing: a query (its
 * id) or a bad line (its message, which --end-marker prints again). */
typedef struct query_item {
    char *text; /* the id or the message, NUL-terminated */
    size_t len;
    int qid_integer;
    int bad;
} query_item;

static int item_set(query_item *it, const char *text, size_t len, int qid_integer, int bad)
{
    it->text = malloc(len + 1);
    if (!it->text)
        return -1;
    memcpy(it->text, text, len);
    it->text[len] = '\0';
    it->len = len;
    it->qid_integer = qid_integer;
    it->bad = bad;
    return 0;
}

/* Doubles travel as their bits: the similarity and fraction printed by rank
 * 0 are the very values its shard's rank computed. */
static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bits_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* The answer buffer of one rank, per query: u32 count; per match of a
 * document query: distance u8, flags u8, fp u64, similarity (bits) u64, id
 * length u32, meta length u32 (UINT32_MAX: none), id, meta. */
static int collect(void *ctx, size_t index, uint64_t fp, const simstore_match *m, size_t n)
{
    (void)index;
    (void)fp;
    buf *b = (buf *)ctx;
    if (buf_u32(b, (uint32_t)n))
        return 1;
    for (size_t i = 0; i < n; i++) {
        uint8_t d = (uint8_t)m[i].distance, f = (uint8_t)m[i].flags;
        uint32_t id_len = m[i].id ? (uint32_t)m[i].id_len : UINT32_MAX;
        uint32_t meta_len = m[i].meta ? (uint32_t)m[i].meta_len : UINT32_MAX;
        if (buf_put(b, &d, 1) || buf_put(b, &f, 1) || buf_u64(b, m[i].fp) ||
            buf_u64(b, double_bits(m[i].similarity)) || buf_u32(b, id_len) ||
            buf_u32(b, meta_len) || (m[i].id && buf_put(b, m[i].id, m[i].id_len)) ||
            (m[i].meta && buf_put(b, m[i].meta, m[i].meta_len)))
            return 1;
    }
    return 0;
}

/* --paragraphs, per query: u32 count; per match: flags u8, shared u64, of
 * u64, fraction (bits) u64, fp u64, id length u32, meta length u32
 * (UINT32_MAX: none), id, meta. A document lives on one shard, so its
 * SHARED of OF, and whether it reaches --min-fraction, are complete here. */
static int collect_paragraphs(buf *b, const simstore_paragraph_match *m, size_t n)
{
    if (buf_u32(b, (uint32_t)n))
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint8_t f = (uint8_t)m[i].flags;
        uint32_t meta_len = m[i].meta ? (uint32_t)m[i].meta_len : UINT32_MAX;
        if (buf_put(b, &f, 1) || buf_u64(b, m[i].shared) || buf_u64(b, m[i].of) ||
            buf_u64(b, double_bits(m[i].fraction)) || buf_u64(b, m[i].fp) ||
            buf_u32(b, (uint32_t)m[i].id_len) || buf_u32(b, meta_len) ||
            buf_put(b, m[i].id, m[i].id_len) || (m[i].meta && buf_put(b, m[i].meta, m[i].meta_len)))
            return -1;
    }
    return 0;
}

/* An answer record's id and metadata (each u32 length, UINT32_MAX for none,
 * then the bytes) from *cur, advanced past them. */
static void get_id_meta(const char **cur, const char **id, size_t *id_len, const char **meta,
                        size_t *meta_len)
{
    uint32_t il = get_u32(cur), ml = get_u32(cur);
    if (il != UINT32_MAX) {
        *id = *cur;
        *id_len = il;
        *cur += il;
    }
    if (ml != UINT32_MAX) {
        *meta = *cur;
        *meta_len = ml;
        *cur += ml;
    }
}

/* One answer record (collect's) from *cur into the zeroed match at x. */
static void get_match(const char **cur, void *x)
{
    simstore_match *m = x;
    m->distance = (uint8_t)(*cur)[0];
    m->flags = (uint8_t)(*cur)[1];
    *cur += 2;
    m->fp = get_u64(cur);
    m->similarity = bits_double(get_u64(cur));
    get_id_meta(cur, &m->id, &m->id_len, &m->meta, &m->meta_len);
}

/* One answer record (collect_paragraphs') from *cur into the zeroed
 * paragraph match at x. */
static void get_paragraph_match(const char **cur, void *x)
{
    simstore_paragraph_match *m = x;
    m->flags = (uint8_t)(*cur)[0];
    *cur += 1;
    m->shared = (size_t)get_u64(cur);
    m->of = (size_t)get_u64(cur);
    m->fraction = bits_double(get_u64(cur));
    m->fp = get_u64(cur);
    get_id_meta(cur, &m->id, &m->id_len, &m->meta, &m->meta_len);
}

/* Rank 0: one query's answer records from every rank's answer buffer
 * (cursors advanced), each read by get into *m (of *cap elements of size
 * bytes, grown): *n of them. Returns 0, or -1 out of memory. */
static int gather_matches(const char **cur, void **m, size_t *cap, size_t size,
                          void (*get)(const char **cur, void *x), size_t *n)
{
    *n = 0;
    for (int r = 0; r < nranks; r++) {
        uint32_t count = get_u32(&cur[r]);
        for (uint32_t i = 0; i < count; i++) {
            if (cli_grow(m, cap, *n + 1, size, 64))
                return -1;
            void *x = (char *)*m + (*n)++ * size;
            memset(x, 0, size);
            get(&cur[r], x);
        }
    }
    return 0;
}

static int is_self(const query_opts *o, const query_item *q, const char *id, size_t id_len)
{
    return o->skip_self && id && id_len == q->len && memcmp(id, q->text, id_len) == 0;
}

/* Rank 0: one query's matches from every rank's answer buffer (cursors
 * advanced), merged into one store's order, printed as `simstore query`
 * prints them (the JSON by cmd/matchjson.h). Returns 0, or -1 out of
 * memory. */
static int print_merged(const query_opts *o, const query_item *q, const char **cur,
                        simstore_match **m, size_t *cap)
{
    size_t n;
    if (gather_matches(cur, (void **)m, cap, sizeof **m, get_match, &n))
        return -1;
    simstore_sort_matches(*m, n);
    char hex[17], sim[32];
    cli_answer a = {q->text, q->len, q->qid_integer, o->json, o->end_marker, 0};
    cli_answer_start(&a);
    for (size_t i = 0; i < n; i++) {
        const simstore_match *x = &(*m)[i];
        if (is_self(o, q, x->id, x->id_len))
            continue;
        /* An unknown similarity (-1) passes no minimum. */
        if (o->min_similarity > 0 && !(x->similarity >= o->min_similarity))
            continue;
        if (o->json) {
            cli_answer_json_match(&a, x, o->similarity);
            continue;
        }
        cli_format_hex64(x->fp, hex);
        cli_format_similarity(x->similarity, 0, sim);
        print_tsv_id(stdout, q->text, q->len);
        putchar('\t');
        if (x->id)
            print_tsv_id(stdout, x->id, x->id_len);
        else
            putchar('-');
        printf("\t%s\t%u", hex, x->distance);
        if (o->similarity)
            printf("\t%s", sim);
        putchar('\n');
    }
    cli_answer_end(&a);
    return 0;
}

/* Rank 0, --paragraphs: print_merged for the documents sharing paragraphs
 * with one query. */
static int print_merged_paragraphs(const query_opts *o, const query_item *q, const char **cur,
                                   simstore_paragraph_match **m, size_t *cap)
{
    size_t n;
    if (gather_matches(cur, (void **)m, cap, sizeof **m, get_paragraph_match, &n))
        return -1;
    sort_items(*m, n, sizeof **m, simstore_paragraph_match_cmp);
    cli_answer a = {q->text, q->len, q->qid_integer, o->json, o->end_marker, 0};
    cli_answer_start(&a);
    for (size_t i = 0; i < n; i++) {
        const simstore_paragraph_match *x = &(*m)[i];
        if (is_self(o, q, x->id, x->id_len))
            continue;
        if (o->json) {
            cli_answer_json_paragraph_match(&a, x);
            continue;
        }
        print_tsv_id(stdout, q->text, q->len);
        putchar('\t');
        print_tsv_id(stdout, x->id, x->id_len);
        printf("\t%zu\t%zu\t%.4f\n", x->shared, x->of, x->fraction);
    }
    cli_answer_end(&a);
    return 0;
}

/* --paragraphs: this rank's answer to one text query, from its shard, into
 * ans. Returns 0, or -1 (said why). */
static int answer_paragraphs(simstore_query *q, simstore_fingerprinter *fpr, const char *text,
                             size_t len, unsigned min_words, unsigned k, double min_fraction,
                             uint64_t **paras, size_t *paras_cap, buf *ans)
{
    size_t n = 0;
    int rc;
    for (;;) {
        rc = simstore_paragraph_fingerprints(fpr, text, len, min_words, *paras, *paras_cap, &n);
        if (rc || n <= *paras_cap)
            break;
        if (cli_grow((void **)paras, paras_cap, n, sizeof **paras, 64)) {
            say("out of memory");
            return -1;
        }
    }
    const simstore_paragraph_match *m = NULL;
    size_t count = 0;
    if (rc == SIMSTORE_OK)
        rc = simstore_query_paragraphs(q, *paras, n, k, min_fraction, &m, &count);
    if (rc) {
        say("query: %s", simstore_last_error());
        return -1;
    }
    if (collect_paragraphs(ans, m, count)) {
        say("out of memory");
        return -1;
    }
    return 0;
}

static void usage_query(FILE *out)
{
    fprintf(out,
            "Usage: mpirun -np R simstore-mpi query OUT --queries FILE [OPTIONS]\n"
            "\n"
            "Answer the queries of FILE against the sharded store OUT of R shards, rank r\n"
            "asking shard r, rank 0 merging: it prints exactly what `simstore query OUT\n"
            "--queries FILE` prints with the same options, one line per match,\n"
            "  QUERY_ID<TAB>DOC_ID<TAB>HEX16<TAB>DISTANCE[<TAB>SIMILARITY]\n"
            "sorted by distance then document id, or JSON Lines with --json. With\n"
            "--paragraphs, one line per document sharing near-duplicate paragraphs with\n"
            "the query's text, sorted by FRACTION (larger first) then document id:\n"
            "  QUERY_ID<TAB>DOC_ID<TAB>SHARED<TAB>OF<TAB>FRACTION\n"
            "(each rank answers for the documents of its shard: a document lives on one).\n"
            "\n"
            "      --queries FILE   .tsv (id<TAB>hex16), .fp (hex16<TAB>id) or .jsonl\n"
            "                       ({\"id\", \"text\"}: fingerprinted with the store's\n"
            "                       text options); a regular file\n"
            "      --format tsv|fp|jsonl\n"
            "      --id-field NAME  JSON Lines: the member holding the id (default id;\n"
            "                       nested names as a.b)\n"
            "      --text-field NAME\n"
            "                       the member holding the text (default text)\n"
            "      --id-from-line   a record without an id gets FILE:LINE as its id\n"
            "      --strict         refuse records with other members (default: ignore)\n"
            "      --k K            distance (default: the store's k)\n"
            "      --json           JSON Lines {\"query\", \"id\", \"fp\", \"distance\"[,\n"
            "                       \"similarity\"][, \"meta\"]}\n"
            "      --meta           with --json: each document's metadata\n"
            "      --similarity     each match's estimated Jaccard similarity to the\n"
            "                       query: a fifth column, or the member \"similarity\";\n"
            "                       '-' (null) when unknown (queries by fingerprint, a\n"
            "                       store without sketches)\n"
            "      --min-similarity J\n"
            "                       only matches whose estimated similarity is at least\n"
            "                       J, 0..1 (0: all): needs a store that keeps sketches\n"
            "                       and JSON Lines text queries\n"
            "      --paragraphs     answer by shared paragraphs (above): a store built\n"
            "                       with --paragraphs and JSON Lines text queries\n"
            "      --min-fraction F with --paragraphs, only documents with FRACTION >= F,\n"
            "                       0..1 (default 0.3); JSON members \"shared\", \"of\",\n"
            "                       \"fraction\" replace \"fp\" and \"distance\"\n"
            "      --skip-self      omit a match whose document id equals the query id\n"
            "      --end-marker     end each query's answer, even an empty one or a bad\n"
            "                       line's, with a line '.'; with --json, one record per\n"
            "                       query instead, {\"query\", \"matches\": [...]} (a bad\n"
            "                       line: {\"query\": null, \"matches\": [], \"error\": MESSAGE})\n"
            "      --batch N        queries answered per round (4096)\n"
            "      --threads N      worker threads per rank (all cores)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Exit status: 0 success, 1 failure (a bad query line is reported as\n"
            "FILE:LINE: message and skipped), 2 usage error.\n");
}

/* The command line of query, checked. */
typedef struct query_args {
    query_opts o;
    input_fields fields;
    const char *queries, *out;
    int format, have_k, min_fraction_given;
    unsigned k, threads;
    unsigned long long batch;
} query_args;

/* The options into *a. Returns -1 to go on, else the exit status (the
 * usage error said by rank 0). */
static int parse_query_options(int argc, char **argv, query_args *a)
{
    enum {
        O_K = 1,
        O_QUERIES,
        O_FORMAT,
        O_JSON,
        O_META,
        O_BATCH,
        O_THREADS,
        O_SIMILARITY,
        O_MIN_SIMILARITY,
        O_PARAGRAPHS,
        O_MIN_FRACTION,
        O_SKIP_SELF,
        O_END_MARKER
    };
    static const struct option longopts[] = {
        {"k", required_argument, NULL, O_K},
        {"queries", required_argument, NULL, O_QUERIES},
        {"format", required_argument, NULL, O_FORMAT},
        {"json", no_argument, NULL, O_JSON},
        {"meta", no_argument, NULL, O_META},
        {"batch", required_argument, NULL, O_BATCH},
        {"threads", required_argument, NULL, O_THREADS},
        {"similarity", no_argument, NULL, O_SIMILARITY},
        {"min-similarity", required_argument, NULL, O_MIN_SIMILARITY},
        {"paragraphs", no_argument, NULL, O_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, O_MIN_FRACTION},
        {"skip-self", no_argument, NULL, O_SKIP_SELF},
        {"end-marker", no_argument, NULL, O_END_MARKER},
        {"id-field", required_argument, NULL, INPUTOPT_ID_FIELD},
        {"text-field", required_argument, NULL, INPUTOPT_TEXT_FIELD},
        {"strict", no_argument, NULL, INPUTOPT_STRICT},
        {"id-from-line", no_argument, NULL, INPUTOPT_ID_FROM_LINE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    a->o.min_fraction = SIMSTORE_NEAR_FRACTION;
    input_fields_init(&a->fields);
    a->format = -1;
    a->batch = 4096;
    unsigned long long v;
    const char *problem;
    char why[256];
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &v))
                return usage_error(argc, argv);
            a->k = (unsigned)v;
            a->have_k = 1;
            break;
        case O_QUERIES: a->queries = optarg; break;
        case O_FORMAT:
            if ((a->format = parse_format(optarg)) < 0 || a->format == INPUT_HEX_LINES)
                return usage_error(argc, argv);
            break;
        case O_JSON: a->o.json = 1; break;
        case O_META: a->o.meta = 1; break;
        case O_BATCH:
            if (cli_parse_uint(optarg, 1, 1u << 22, &a->batch))
                return usage_error(argc, argv);
            break;
        case O_THREADS:
            if (cli_parse_uint(optarg, 1, 1024, &v))
                return usage_error(argc, argv);
            a->threads = (unsigned)v;
            break;
        case O_SIMILARITY: a->o.similarity = 1; break;
        case O_MIN_SIMILARITY:
            if (cli_min_similarity_problem(optarg, &a->o.min_similarity, why, sizeof why)) {
                rank0_says("%s", why);
                return 2;
            }
            break;
        case O_PARAGRAPHS: a->o.paragraphs = 1; break;
        case O_MIN_FRACTION:
            if (cli_min_fraction_problem(optarg, &a->o.min_fraction, why, sizeof why)) {
                rank0_says("%s", why);
                return 2;
            }
            a->min_fraction_given = 1;
            break;
        case O_SKIP_SELF: a->o.skip_self = 1; break;
        case O_END_MARKER: a->o.end_marker = 1; break;
        case INPUTOPT_ID_FIELD:
        case INPUTOPT_TEXT_FIELD:
            /* Checked here so that rank 0 alone says what is wrong. */
            if ((problem = input_field_name_problem(optarg)) != NULL) {
                rank0_says("--%s: the name '%s' %s",
                           c == INPUTOPT_ID_FIELD ? "id-field" : "text-field", optarg, problem);
                return 2;
            }
            input_fields_apply(cmd_name, c, optarg, &a->fields);
            break;
        case INPUTOPT_STRICT:
        case INPUTOPT_ID_FROM_LINE: input_fields_apply(cmd_name, c, optarg, &a->fields); break;
        case 'h':
            if (rank == 0)
                usage_query(stdout);
            return 0;
        default: return usage_error(argc, argv);
        }
    }
    if (argc - optind != 1 || !a->queries)
        return usage_error(argc, argv);
    /* The checks of `simstore query`, in its order and words. */
    const char *refused =
        cli_query_options_problem(a->o.meta, a->o.json, a->min_fraction_given, a->o.paragraphs, 0,
                                  a->o.similarity, a->o.min_similarity);
    if (refused) {
        rank0_says("%s", refused);
        return 2;
    }
    a->out = argv[optind];
    return -1;
}

/* What the queries are answered with on this rank: its shard, and for
 * texts its fingerprinter (the store's text options; sketched only when
 * similarities are asked for, as `simstore query` does) and with
 * --paragraphs a query handle. */
typedef struct query_shard {
    char path[PATH_MAX];
    simstore *s;
    simstore_stats st;
    size_t sketch_bytes;
    simstore_fingerprinter *fpr;
    simstore_query *pq; /* --paragraphs */
} query_shard;

static void query_shard_close(query_shard *q)
{
    simstore_query_free(q->pq);
    simstore_fingerprinter_free(q->fpr);
    simstore_close(q->s);
    q->pq = NULL;
    q->fpr = NULL;
    q->s = NULL;
}

/* Every rank opens its shard; the shards agree on k, sketches and the
 * paragraph index (the manifest): every rank decides alike what it
 * refuses, rank 0 says. Resolves a->k and a->format. Returns -1 to go on,
 * else the exit status (nothing left open). Collective. */
static int open_query_shard(query_args *a, query_shard *q)
{
    if (open_my_shard(a->out, &q->s, &q->st, q->path, sizeof q->path))
        return 1;
    const char *refused = cli_store_problem(&q->st, a->o.min_similarity, a->o.paragraphs);
    if (refused) {
        rank0_says("%s %s", a->out, refused);
        query_shard_close(q);
        return 1;
    }
    if (!a->have_k)
        a->k = q->st.k;
    a->format = format_of(a->queries, a->format);
    const char *bad_format = a->format < 0 || a->format == INPUT_HEX_LINES
                                 ? "cannot tell the format from the name; use --format tsv|fp|jsonl"
                                 : cli_query_format_problem(a->format == INPUT_JSONL,
                                                            a->o.min_similarity, a->o.paragraphs);
    if (bad_format) {
        rank0_says("%s%s%s", a->format < 0 ? a->queries : "", a->format < 0 ? ": " : "",
                   bad_format);
        query_shard_close(q);
        return 2;
    }
    q->sketch_bytes = a->format == INPUT_JSONL && (a->o.similarity || a->o.min_similarity > 0)
                          ? simstore_sketch_bytes(q->st.sketch)
                          : 0;
    int failed = 0, rc = SIMSTORE_OK;
    if (a->format == INPUT_JSONL) {
        simstore_text_options text;
        simstore_get_text_options(q->s, &text);
        if (!q->sketch_bytes)
            text.sketch = SIMSTORE_SKETCH_NONE;
        rc = simstore_fingerprinter_new(&text, &q->fpr);
        if (rc == SIMSTORE_OK)
            rc = simstore_fingerprinter_set_boilerplate(q->fpr, simstore_get_boilerplate(q->s));
    }
    if (rc == SIMSTORE_OK && a->o.paragraphs)
        rc = simstore_query_new(q->s, a->o.meta ? SIMSTORE_QUERY_WITH_META : 0, &q->pq);
    if (rc) {
        say("%s: %s", q->path, simstore_last_error());
        failed = 1;
    }
    if (agree(failed, "opening the shards")) {
        query_shard_close(q);
        return 1;
    }
    return -1;
}

/* One round's state: the queries' fingerprints (and sketches) of this
 * rank, the lines rank 0 keeps for printing, the buffers merging reuses. */
typedef struct query_round {
    input_reader *in;
    uint64_t *fps;
    uint8_t *sketches;
    query_item *items;
    size_t n, nq; /* lines kept (queries and bad lines), queries */
    int eof, failed, status;
    uint64_t *paras; /* --paragraphs: one text's */
    size_t paras_cap;
    simstore_match *merged;
    simstore_paragraph_match *para_merged;
    size_t merged_cap, para_merged_cap;
} query_round;

/* The next line of the queries: 1 (a query, read into r at n and nq, or a
 * bad line kept for printing), 0 at the end or when this rank stops (eof
 * or failed set), with its answer to a --paragraphs query in ans. */
static int read_query(const query_args *a, query_shard *q, query_round *r, buf *ans)
{
    input_record rec;
    int got = input_next(r->in, &rec);
    if (got == 0) {
        r->eof = 1;
        return 0;
    }
    if (got == -2) {
        say("%s", input_error(r->in));
        r->failed = 1;
        r->eof = 1;
        return 0;
    }
    char why_fp[1024];
    const char *bad = NULL;
    if (got == -1) {
        bad = input_error(r->in);
    } else if (a->format == INPUT_JSONL && rec.has_fp && q->sketch_bytes) {
        snprintf(why_fp, sizeof why_fp,
                 "%s:%llu: a record giving \"fp\" has no text to sketch (similarities "
                 "need texts)",
                 rec.file, rec.line);
        bad = why_fp;
    } else if (a->o.paragraphs && rec.has_fp) {
        /* `simstore query` stops at such a line, after answering those
         * before it. */
        if (rank == 0) {
            char esc[CLI_ESCAPED_ID_BYTES];
            fprintf(stderr,
                    "simstore query: %s:%llu: query '%s' has no text: --paragraphs "
                    "needs texts\nsimstore query: (at %s:%llu)\n",
                    rec.file, rec.line, cli_escape(rec.id, rec.id_len, esc, sizeof esc), rec.file,
                    rec.line);
        }
        r->status = 1;
        r->eof = 1;
        return 0;
    }
    if (bad) {
        /* Reported as `simstore query` reports it, and skipped. */
        if (rank == 0) {
            fprintf(stderr, "simstore query: %s\n", bad);
            if (item_set(&r->items[r->n], bad, strlen(bad), 0, 1))
                r->failed = 1;
        }
        r->status = 1;
        r->n++;
        return 1;
    }
    uint64_t fp = rec.fingerprint;
    if (a->o.paragraphs) {
        if (answer_paragraphs(q->pq, q->fpr, rec.text, rec.text_len, q->st.paragraph_min_words,
                              a->k, a->o.min_fraction, &r->paras, &r->paras_cap, ans))
            r->failed = 1;
    } else if (a->format == INPUT_JSONL && !rec.has_fp) {
        unsigned fl = 0;
        int rc = q->sketch_bytes
                     ? simstore_fingerprint_sketch(q->fpr, rec.text, rec.text_len, &fp,
                                                   r->sketches + r->nq * q->sketch_bytes, &fl)
                     : simstore_fingerprint_text(q->fpr, rec.text, rec.text_len, &fp, &fl);
        if (rc) {
            say("%s:%llu: %s", rec.file, rec.line, simstore_last_error());
            r->failed = 1;
        } else if (rank == 0 && (fl & SIMSTORE_FP_ONLY_BOILERPLATE)) {
            char esc[CLI_ESCAPED_ID_BYTES];
            fprintf(stderr,
                    "simstore query: warning: %s:%llu: query id '%s' is only "
                    "boilerplate: fingerprinted whole\n",
                    rec.file, rec.line, cli_escape(rec.id, rec.id_len, esc, sizeof esc));
        }
    }
    if (r->failed)
        return 0;
    r->fps[r->nq++] = fp;
    if (rank == 0 && item_set(&r->items[r->n], rec.id, rec.id_len, rec.id_is_integer, 0))
        r->failed = 1;
    r->n++;
    return 1;
}

/* Rank 0 gathers every rank's answers to this round's queries: rank r's
 * at *all + displs[r] (rank 0's arrays; NULL elsewhere). Collective. */
static void gather_answers(const buf *ans, char **all, int **displs)
{
    int len = (int)ans->len, *lens = NULL;
    *all = NULL;
    *displs = NULL;
    if (rank == 0) {
        lens = calloc((size_t)nranks, sizeof *lens);
        *displs = calloc((size_t)nranks, sizeof **displs);
        if (!lens || !*displs)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        size_t total = 0;
        for (int r = 0; r < nranks; r++) {
            (*displs)[r] = (int)total;
            total += (size_t)lens[r];
        }
        *all = malloc(total ? total : 1);
        if (!*all)
            MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gatherv(ans->data, len, MPI_BYTE, *all, lens, *displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    free(lens);
}

/* Rank 0: the round's lines, each query's matches merged from every
 * rank's answers (all, displs), a bad line's end marker. */
static void print_round(const query_args *a, query_round *r, const char *all, const int *displs)
{
    const char **cur = malloc((size_t)nranks * sizeof *cur);
    if (!cur)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < nranks; i++)
        cur[i] = all + displs[i];
    for (size_t i = 0; i < r->n && !r->failed; i++) {
        query_item *it = &r->items[i];
        if (it->bad) {
            if (a->o.end_marker)
                cli_print_bad_query_end(a->o.json, it->text, it->len);
        } else if (a->o.paragraphs ? print_merged_paragraphs(&a->o, it, cur, &r->para_merged,
                                                             &r->para_merged_cap)
                                   : print_merged(&a->o, it, cur, &r->merged, &r->merged_cap)) {
            say("out of memory");
            r->failed = 1;
        }
    }
    free(cur);
    if (ferror(stdout)) {
        say("writing the answers: %s", strerror(errno ? errno : EIO));
        r->failed = 1;
    }
}

/* One round: up to --batch lines read and answered by every rank, the
 * answers gathered and printed by rank 0. Returns 1 to go on, else 0.
 * Collective. */
static int query_one_round(const query_args *a, query_shard *q, query_round *r,
                           const simstore_batch_options *bo)
{
    r->n = r->nq = 0;
    buf ans = {NULL, 0, 0};
    while (!r->eof && !r->failed && r->n < a->batch && read_query(a, q, r, &ans))
        ;
    if (!r->failed && r->nq && !a->o.paragraphs) {
        int rc = simstore_query_batch_sketches(q->s, r->fps, r->sketches, r->nq, a->k, bo, collect,
                                               &ans);
        if (rc) {
            say("%s: %s", q->path, simstore_last_error());
            r->failed = 1;
        }
    }
    if (!r->failed && ans.len > (size_t)INT_MAX / (size_t)nranks) {
        say("the answers of %zu queries take %zu bytes: give a smaller --batch", r->nq, ans.len);
        r->failed = 1;
    }
    if (r->failed)
        ans.len = 0;
    char *all;
    int *displs;
    gather_answers(&ans, &all, &displs);
    free(ans.data);
    int round_failed = agree(r->failed, "answering");
    if (rank == 0 && !round_failed)
        print_round(a, r, all, displs);
    if (rank == 0)
        for (size_t i = 0; i < r->n; i++) {
            free(r->items[i].text);
            r->items[i].text = NULL;
        }
    free(all);
    free(displs);
    int more = !r->eof && !r->failed;
    MPI_Allreduce(MPI_IN_PLACE, &more, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (round_failed) {
        r->status = 1;
        return 0;
    }
    return more;
}

int cmd_mpi_query(int argc, char **argv)
{
    cmd_name = "simstore-mpi query";
    query_args a;
    memset(&a, 0, sizeof a);
    int status = parse_query_options(argc, argv, &a);
    if (status >= 0)
        return status;
    query_shard q;
    memset(&q, 0, sizeof q);
    if ((status = open_query_shard(&a, &q)) >= 0)
        return status;
    /* Every rank reads the queries (the same fingerprints, in order); rank
     * 0 keeps their ids and reports bad lines. */
    query_round r;
    memset(&r, 0, sizeof r);
    if (input_open(&r.in, (input_format)a.format, a.queries) != 0 ||
        input_set_fields(r.in, &a.fields) != 0) {
        say("%s: %s", a.queries, strerror(errno));
        r.failed = 1;
    }
    r.fps = malloc(a.batch * sizeof *r.fps);
    r.sketches = q.sketch_bytes ? malloc(a.batch * q.sketch_bytes) : NULL;
    r.items = calloc(a.batch, sizeof *r.items);
    simstore_batch_options bo;
    simstore_batch_options_init(&bo);
    bo.threads = a.threads;
    bo.flags = a.o.meta ? SIMSTORE_QUERY_WITH_META : 0;
    if (!r.fps || !r.items || (q.sketch_bytes && !r.sketches))
        r.failed = 1;
    r.eof = r.failed;
    while (query_one_round(&a, &q, &r, &bo))
        ;
    status = r.status || r.failed;
    fflush(stdout);
    free(r.merged);
    free(r.para_merged);
    free(r.paras);
    free(r.fps);
    free(r.sketches);
    free(r.items);
    input_close(r.in);
    query_shard_close(&q);
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return status;
}
