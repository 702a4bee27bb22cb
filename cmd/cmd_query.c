/* cmd_query.c: `simstore query`: the stored documents within distance k of a
 * fingerprint, a text, a file, or each line of a queries file. */
#include "cli.h"
#include "optcheck.h"
#include "commands.h"
#include "ingest.h"
#include "input.h"
#include "matchjson.h"
#include "textopts.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const CMD = "query";

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore query STORE [OPTIONS] (--fp HEX | --text STRING | --file PATH |\n"
            "                                       --queries FILE)\n"
            "\n"
            "Print every stored document whose fingerprint is within distance K of the\n"
            "query, one line per match, sorted by distance then document id:\n"
            "  QUERY_ID<TAB>DOC_ID<TAB>HEX16<TAB>DISTANCE[<TAB>SIMILARITY]\n"
            "QUERY_ID is '-' for a single query; DOC_ID is '-' in fingerprint-only stores.\n"
            "STORE may be a sharded store (build --shards): every shard is asked and the\n"
            "answers merged, exactly as one store of the same documents answers.\n"
            "With --paragraphs (a store built with --paragraphs), one line per stored\n"
            "document sharing near-duplicate paragraphs with the query's text, sorted by\n"
            "FRACTION (larger first) then document id:\n"
            "  QUERY_ID<TAB>DOC_ID<TAB>SHARED<TAB>OF<TAB>FRACTION\n"
            "SHARED of the query's OF paragraphs (those of at least the store's minimum\n"
            "of words; a paragraph repeated in the query counts each time) have a\n"
            "paragraph of DOC_ID within distance K; FRACTION = SHARED/OF, 4 decimals.\n"
            "\n"
            "Query:\n"
            "      --fp HEX         a fingerprint (16 hex digits)\n"
            "      --text STRING    a text, fingerprinted as `simstore fingerprint` does\n"
            "      --file PATH      the text of a file ('-' for standard input)\n"
            "      --queries FILE   one query per line: TSV id<TAB>hex16, fingerprint\n"
            "                       lines hex16<TAB>id, or JSON Lines {\"id\": ...,\n"
            "                       \"text\": ...}, by extension (.tsv, .fp, .jsonl) or\n"
            "                       --format; '-' is standard input, which has no\n"
            "                       extension: give --format with it. From a pipe each\n"
            "                       answer is written as soon as it is known\n"
            "      --format tsv|fp|jsonl\n"
            "JSON Lines queries (members other than these are ignored):\n" INPUT_FIELD_HELP "\n");
    fprintf(out,
            "Answer:\n"
            "      --k K            distance, 0..7 (default: the store's k). Above the\n"
            "                       store's k the answer is as exact, but each table is\n"
            "                       probed at every prefix near the query's: slower\n"
            "                       (README, \"Distances above the store's k\")\n"
            "      --json           JSON Lines {\"query\", \"id\", \"fp\", \"distance\"[,\n"
            "                       \"similarity\"][, \"meta\"]}\n"
            "      --meta           with --json, include each document's metadata\n"
            "      --similarity     add each match's estimated Jaccard similarity to the\n"
            "                       query (format/sketch.md): a fifth column, or the\n"
            "                       member \"similarity\" with --json; '-' (null) when\n"
            "                       unknown: a query by fingerprint (--fp, TSV and\n"
            "                       fingerprint-line queries), a store without sketches\n"
            "      --min-similarity J\n"
            "                       only the matches whose estimated similarity is at\n"
            "                       least J, 0..1 (0: all): with a larger K (4..7),\n"
            "                       the K finds the candidates and J keeps the near\n"
            "                       ones. Needs a store that keeps\n"
            "                       sketches and text queries (--text, --file, JSON\n"
            "                       Lines --queries)\n"
            "      --paragraphs     answer by shared paragraphs (above): needs a text\n"
            "                       query (--text, --file, JSON Lines --queries)\n"
            "      --min-fraction F with --paragraphs, only documents with FRACTION >= F,\n"
            "                       0..1 (default 0.3); JSON members \"shared\", \"of\",\n"
            "                       \"fraction\" replace \"fp\" and \"distance\"\n"
            "      --skip-self      omit a match whose document id equals the query id\n"
            "      --end-marker     end each query's answer, even an empty one or a bad\n"
            "                       line's, with a line '.'; with --json, print one\n"
            "                       record per query instead, {\"query\", \"matches\": [{\"id\",\n"
            "                       \"fp\", \"distance\"[, \"meta\"]}, ...]} (a bad line:\n"
            "                       {\"query\": null, \"matches\": [], \"error\": MESSAGE})\n"
            "      --strategy auto|scan|probe|one-by-one\n"
            "                       how --queries from a regular file is answered: in\n"
            "                       batches, each table merge-scanned or probed as a\n"
            "                       cost model chooses (auto, the default), always\n"
            "                       scanned, always probed; or query by query as from a\n"
            "                       pipe (one-by-one). The output is the same\n"
            "      --threads N      batch worker threads (default: all cores)\n"
            "      --memory SIZE    batch working memory, at least 64K (default 256M): it\n"
            "                       bounds the queries read and answered at once\n"
            "      --no-verify      skip block checksums and the checks of LMDB's\n"
            "                       pages (trusts the files on disk)\n"
            "      --full-walk      check all of data.mdb's pages at open rather than\n"
            "                       each query's as it reads them (the same answers;\n"
            "                       an open that costs the whole file)\n"
            "      --huge-pages     bring the store's files into the page cache in\n"
            "                       2 MiB pages as they are first read, so that queries\n"
            "                       then map them 2 MiB at a time (for a store kept in\n"
            "                       RAM; a store larger than RAM would read 2 MiB for\n"
            "                       each page it needs)\n"
            "\n");
    fprintf(out, "Fingerprints of texts (default: as the store's documents were made, which\n"
                 "the store records, fingerprint version included; an option given changes\n"
                 "only itself). The lines of a store's boilerplate (build --boilerplate\n"
                 "auto) are removed from query texts; a text that is nothing else is\n"
                 "fingerprinted whole, with a warning:\n" TEXTOPT_HELP "\n"
                 "  -h, --help           show this help\n"
                 "\n"
                 "Exit status: 0 success (with or without matches), 1 failure (a bad query\n"
                 "line is reported as FILE:LINE: message and skipped), 2 usage error.\n");
}

enum {
    OPT_K = 1,
    OPT_JSON,
    OPT_META,
    OPT_FP,
    OPT_TEXT,
    OPT_FILE,
    OPT_QUERIES,
    OPT_FORMAT,
    OPT_NOVERIFY,
    OPT_HUGE_PAGES,
    OPT_FULL_WALK,
    OPT_SKIP_SELF,
    OPT_END_MARKER,
    OPT_STRATEGY,
    OPT_THREADS,
    OPT_MEMORY
};
enum { OPT_SIMILARITY = OPT_MEMORY + 1, OPT_MIN_SIMILARITY, OPT_PARAGRAPHS, OPT_MIN_FRACTION };

/* --strategy one-by-one: simstore_query_fp per query, as from a pipe. */
#define STRATEGY_ONE_BY_ONE (-1)
#define BATCH_MIN_MEMORY ((uint64_t)64 << 10)

typedef struct query_run {
    simstore_query *q;
    /* A sharded store (format/shards.md): every shard asked and the answers
     * merged; s is then its first shard (text options, boilerplate). */
    simstore_sharded *sh;
    simstore_sharded_query *sq;
    simstore_fingerprinter *fpr;
    int fpr_sketches; /* fpr makes sketches of the store's kind */
    const simstore_text_options *text;
    unsigned k;
    int json;
    int skip_self;
    int print_similarity;       /* --similarity */
    double min_similarity;      /* --min-similarity (0: none) */
    int qid_integer;            /* the query's id was a JSON integer */
    const input_fields *fields; /* of --queries JSON Lines */
    int end_marker;             /* end each query's answer: a '.' line, or one JSON record */
    int flush_each;             /* flush each answer: queries come from a pipe or terminal */
    /* The store, and what reopening it needs (build --replace may swap
     * another store in at its path while queries are read). */
    simstore *s;
    const char *path;
    unsigned open_flags, query_flags;
    int have_k;                        /* --k given: check it, else the store's k */
    simstore_text_options *store_text; /* texts as the store's, with the text
                                           options given over them: updated at
                                           each open */
    const textopt_state *given_text;   /* the text options given */
    int64_t checked_ms;                /* when follow_store last looked */
    int strategy;                      /* simstore_batch_strategy, or
                                           STRATEGY_ONE_BY_ONE */
    int paragraphs;                    /* --paragraphs */
    double min_fraction;               /* --min-fraction */
    unsigned para_min_words;           /* the store's */
    uint64_t *para_fps;                /* the query's paragraph fingerprints */
    size_t para_cap;
    unsigned threads;
    uint64_t memory_bytes;
} query_run;

static void close_store(query_run *r)
{
    simstore_fingerprinter_free(r->fpr); /* made with the store's text options */
    r->fpr = NULL;
    simstore_query_free(r->q);
    r->q = NULL;
    simstore_sharded_query_free(r->sq);
    r->sq = NULL;
    if (r->sh)
        simstore_sharded_close(r->sh); /* s is its first shard */
    else
        simstore_close(r->s);
    r->sh = NULL;
    r->s = NULL;
}

/* Open r->path into r->s and r->q (a sharded store: r->sh and r->sq): --k against the store's design, the
 * store's text options with those given over them. Returns an exit code. */
static int open_store(query_run *r)
{
    int rc;
    simstore_stats st;
    if (simstore_is_sharded(r->path)) {
        rc = simstore_sharded_open(r->path, r->open_flags, &r->sh);
        if (rc)
            return cli_api_error(CMD, rc, "%s", r->path);
        r->s = simstore_sharded_shard(r->sh, 0);
        rc = simstore_sharded_get_stats(r->sh, &st);
    } else {
        rc = simstore_open(r->path, r->open_flags, &r->s);
        if (rc)
            return cli_api_error(CMD, rc, "%s", r->path);
        rc = simstore_get_stats(r->s, &st);
    }
    const char *refused =
        rc == SIMSTORE_OK ? cli_store_problem(&st, r->min_similarity, r->paragraphs) : NULL;
    if (refused) {
        cli_error(CMD, "%s %s", r->path, refused);
        close_store(r);
        return CLI_EXIT_FAIL;
    }
    if (rc == SIMSTORE_OK) {
        r->para_min_words = st.paragraph_min_words;
        if (!r->have_k)
            r->k = st.k;
        simstore_get_text_options(r->s, r->store_text);
        textopt_over(r->given_text, r->store_text);
        /* Texts are sketched (the store's kind) only when similarities are
         * asked for. */
        if (!r->print_similarity && r->min_similarity <= 0)
            r->store_text->sketch = SIMSTORE_SKETCH_NONE;
        rc = r->sh ? simstore_sharded_query_new(r->sh, r->query_flags, &r->sq)
                   : simstore_query_new(r->s, r->query_flags, &r->q);
    }
    if (rc) {
        cli_api_error(CMD, rc, "%s", r->path);
        close_store(r);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

static int64_t coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Before a query read from a file or pipe: when build --replace has swapped
 * another store in at the path, answer from that one, as a new `simstore
 * query` would. Looking is one stat (about 1 us, a sixth of a query): made
 * before every query that comes from a pipe or terminal (a co-process, which
 * waits for each answer anyway), and from a regular file at most every
 * FOLLOW_EVERY_MS. Returns an exit code. */
#define FOLLOW_EVERY_MS 20
static int follow_store(query_run *r)
{
    if (!r->flush_each) {
        int64_t now = coarse_ms();
        if (now - r->checked_ms < FOLLOW_EVERY_MS)
            return CLI_EXIT_OK;
        r->checked_ms = now;
    }
    if (!simstore_replaced(r->s))
        return CLI_EXIT_OK;
    close_store(r);
    int status = open_store(r);
    if (status == CLI_EXIT_OK)
        fprintf(stderr, "simstore %s: %s was replaced by another store; answering from it\n", CMD,
                r->path);
    return status;
}

static void print_matches(const query_run *r, const char *qid, size_t qid_len,
                          const simstore_match *m, size_t n)
{
    char hex[17];
    cli_answer a = {qid, qid_len, r->qid_integer, r->json, r->end_marker, 0};
    cli_answer_start(&a);
    char sim[32];
    for (size_t i = 0; i < n; i++) {
        if (r->skip_self && m[i].id && m[i].id_len == qid_len && memcmp(m[i].id, qid, qid_len) == 0)
            continue;
        /* An unknown similarity (-1) passes no minimum. */
        if (r->min_similarity > 0 && !(m[i].similarity >= r->min_similarity))
            continue;
        if (r->json) {
            cli_answer_json_match(&a, &m[i], r->print_similarity);
            continue;
        }
        cli_format_hex64(m[i].fp, hex);
        cli_format_similarity(m[i].similarity, 0, sim);
        cli_tsv_id(CMD, qid, qid_len);
        putchar('\t');
        if (m[i].id)
            cli_tsv_id(CMD, m[i].id, m[i].id_len);
        else
            putchar('-');
        printf("\t%s\t%u", hex, m[i].distance);
        if (r->print_similarity)
            printf("\t%s", sim);
        putchar('\n');
    }
    cli_answer_end(&a);
}

/* The fingerprinter of text queries: the store's text options (with those
 * given over them) and its boilerplate set, as its documents were made. */
static int need_fingerprinter(query_run *r)
{
    if (r->fpr)
        return 0;
    int rc = simstore_fingerprinter_new(r->text, &r->fpr);
    if (rc == SIMSTORE_OK)
        rc = simstore_fingerprinter_set_boilerplate(r->fpr, simstore_get_boilerplate(r->s));
    if (rc == SIMSTORE_OK) {
        simstore_text_options stored;
        simstore_get_text_options(r->s, &stored);
        simstore_sketch_kind kind = simstore_fingerprinter_sketch(r->fpr);
        r->fpr_sketches = kind != SIMSTORE_SKETCH_NONE && kind == stored.sketch;
    }
    if (rc) {
        cli_api_error(CMD, rc, "fingerprinter");
        return -1;
    }
    return 0;
}

/* A query text that is only the store's boilerplate was fingerprinted
 * whole: say so (file NULL for --text and --file). */
static void warn_only_boilerplate(const char *file, unsigned long long line, const char *qid,
                                  size_t qid_len)
{
    char esc[CLI_ESCAPED_ID_BYTES];
    if (file)
        fprintf(stderr,
                "simstore %s: warning: %s:%llu: query id '%s' is only boilerplate: fingerprinted "
                "whole\n",
                CMD, file, line, cli_escape(qid, qid_len, esc, sizeof esc));
    else
        cli_warn(CMD, "the query text is only boilerplate (every line of it is in the store's "
                      "boilerplate): fingerprinted whole");
}

/* --paragraphs: the documents sharing paragraphs with the query. */
static void print_paragraph_matches(const query_run *r, const char *qid, size_t qid_len,
                                    const simstore_paragraph_match *m, size_t n)
{
    cli_answer a = {qid, qid_len, r->qid_integer, r->json, r->end_marker, 0};
    cli_answer_start(&a);
    for (size_t i = 0; i < n; i++) {
        if (r->skip_self && m[i].id_len == qid_len && memcmp(m[i].id, qid, qid_len) == 0)
            continue;
        if (r->json) {
            cli_answer_json_paragraph_match(&a, &m[i]);
            continue;
        }
        cli_tsv_id(CMD, qid, qid_len);
        putchar('\t');
        cli_tsv_id(CMD, m[i].id, m[i].id_len);
        printf("\t%zu\t%zu\t%.4f\n", m[i].shared, m[i].of, m[i].fraction);
    }
    cli_answer_end(&a);
}

static int run_one_paragraphs(query_run *r, const char *qid, size_t qid_len, const char *text,
                              size_t text_len)
{
    if (need_fingerprinter(r))
        return CLI_EXIT_FAIL;
    size_t n = 0;
    int rc;
    for (;;) {
        rc = simstore_paragraph_fingerprints(r->fpr, text, text_len, r->para_min_words, r->para_fps,
                                             r->para_cap, &n);
        if (rc || n <= r->para_cap)
            break;
        uint64_t *g = realloc(r->para_fps, n * sizeof *g);
        if (!g)
            return cli_error(CMD, "out of memory");
        r->para_fps = g;
        r->para_cap = n;
    }
    const simstore_paragraph_match *m = NULL;
    size_t count = 0;
    if (rc == SIMSTORE_OK)
        rc = r->sq ? simstore_sharded_query_paragraphs(r->sq, r->para_fps, n, r->k, r->min_fraction,
                                                       &m, &count)
                   : simstore_query_paragraphs(r->q, r->para_fps, n, r->k, r->min_fraction, &m,
                                               &count);
    if (rc)
        return cli_api_error(CMD, rc, "query");
    print_paragraph_matches(r, qid, qid_len, m, count);
    return CLI_EXIT_OK;
}

/* One query; file and line name a line of --queries (file NULL for a
 * single query). Returns an exit code. */
static int run_one(query_run *r, const char *qid, size_t qid_len, int is_text, uint64_t fp,
                   const char *text, size_t text_len, const char *file, unsigned long long line)
{
    const simstore_match *m;
    size_t n;
    int rc = SIMSTORE_OK;
    uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
    int sketched = 0;
    if (r->paragraphs) {
        if (!is_text) {
            char esc[CLI_ESCAPED_ID_BYTES];
            return file ? cli_error(CMD,
                                    "%s:%llu: query '%s' has no text: --paragraphs needs "
                                    "texts",
                                    file, line, cli_escape(qid, qid_len, esc, sizeof esc))
                        : cli_error(CMD, "--paragraphs needs a text");
        }
        return run_one_paragraphs(r, qid, qid_len, text, text_len);
    }
    if (is_text) {
        unsigned flags = 0;
        if (need_fingerprinter(r))
            return CLI_EXIT_FAIL;
        /* Fingerprint (without the store's boilerplate) and, when the
         * fingerprinter makes the store's kind, the sketch in one pass. */
        sketched = r->fpr_sketches;
        rc = sketched ? simstore_fingerprint_sketch(r->fpr, text, text_len, &fp, sketch, &flags)
                      : simstore_fingerprint_text(r->fpr, text, text_len, &fp, &flags);
        if (rc == SIMSTORE_OK && (flags & SIMSTORE_FP_ONLY_BOILERPLATE))
            warn_only_boilerplate(file, line, qid, qid_len);
    }
    if (rc == SIMSTORE_OK)
        rc = r->sq ? simstore_sharded_query_fp(r->sq, fp, sketched ? sketch : NULL, r->k, &m, &n)
                   : simstore_query_fp_sketch(r->q, fp, sketched ? sketch : NULL, r->k, &m, &n);
    if (rc)
        return cli_api_error(CMD, rc, "query");
    print_matches(r, qid, qid_len, m, n);
    return CLI_EXIT_OK;
}

/* ---- --queries from a regular file, in batches (simstore_query_batch) ---- */

/* One line of a chunk: a query, or a bad line already reported on stderr. */
typedef struct chunk_item {
    int bad;
    int qid_integer;
    size_t off, len; /* the query id, or the bad line's message, in bytes */
} chunk_item;

/* Queries read ahead, answered together, printed in input order. */
typedef struct query_chunk {
    query_run *r;
    chunk_item *items;
    size_t len, cap;
    char *bytes;
    size_t bytes_len, bytes_cap;
    uint64_t *fps;
    size_t *item_of; /* the item of each fingerprint */
    size_t nfps, fps_cap, item_of_cap;
    uint8_t *sketches;   /* sketch_bytes per fingerprint, when the texts are sketched */
    size_t sketches_cap; /* in sketches */
    size_t sketch_bytes; /* 0: queries without sketches */
    size_t printed;      /* items printed so far */
    const char *file;
    unsigned long long first_line, last_line;
    int write_failed;
} query_chunk;

static int chunk_push(query_chunk *c, int bad, int qid_integer, const char *bytes, size_t len)
{
    if (cli_grow((void **)&c->items, &c->cap, c->len + 1, sizeof *c->items, 1024) ||
        cli_grow((void **)&c->bytes, &c->bytes_cap, c->bytes_len + len + 1, 1, 1024))
        return -1;
    c->items[c->len++] = (chunk_item){bad, qid_integer, c->bytes_len, len};
    if (len)
        memcpy(c->bytes + c->bytes_len, bytes, len);
    c->bytes_len += len;
    c->bytes[c->bytes_len++] = '\0'; /* messages are read as strings */
    return 0;
}

static int chunk_push_query(query_chunk *c, const input_record *rec, uint64_t fp,
                            const uint8_t *sketch)
{
    if (cli_grow((void **)&c->fps, &c->fps_cap, c->nfps + 1, sizeof *c->fps, 1024) ||
        cli_grow((void **)&c->item_of, &c->item_of_cap, c->nfps + 1, sizeof *c->item_of, 1024) ||
        (c->sketch_bytes && cli_grow((void **)&c->sketches, &c->sketches_cap,
                                     (c->nfps + 1) * c->sketch_bytes, 1, 1024)) ||
        chunk_push(c, 0, rec->id_is_integer, rec->id, rec->id_len))
        return -1;
    c->fps[c->nfps] = fp;
    if (c->sketch_bytes)
        memcpy(c->sketches + c->nfps * c->sketch_bytes, sketch, c->sketch_bytes);
    c->item_of[c->nfps++] = c->len - 1;
    return 0;
}

/* Print the bad lines' ends (with --end-marker) before item `upto`. */
static void print_bad_items(query_chunk *c, size_t upto)
{
    for (; c->printed < upto; c->printed++) {
        const chunk_item *it = &c->items[c->printed];
        if (it->bad && c->r->end_marker)
            cli_print_bad_query_end(c->r->json, c->bytes + it->off, strlen(c->bytes + it->off));
    }
}

static int print_batch_answer(void *ctx, size_t index, uint64_t fp, const simstore_match *m,
                              size_t count)
{
    (void)fp;
    query_chunk *c = (query_chunk *)ctx;
    size_t item = c->item_of[index];
    print_bad_items(c, item);
    const chunk_item *it = &c->items[item];
    c->r->qid_integer = it->qid_integer;
    print_matches(c->r, c->bytes + it->off, it->len, m, count);
    c->r->qid_integer = 0;
    c->printed = item + 1;
    if (ferror(stdout)) {
        c->write_failed = 1;
        return 1; /* stop answering queries whose answers cannot be written */
    }
    return 0;
}

/* Answer and print the chunk, then empty it. Returns an exit code. */
static int flush_chunk(query_chunk *c)
{
    query_run *r = c->r;
    int status = CLI_EXIT_OK;
    if (c->nfps) {
        simstore_batch_options o;
        simstore_batch_options_init(&o);
        o.threads = r->threads;
        if (r->memory_bytes)
            o.memory_bytes = r->memory_bytes;
        o.strategy = (simstore_batch_strategy)r->strategy;
        o.flags = r->query_flags;
        int rc =
            r->sh
                ? simstore_sharded_query_batch(r->sh, c->fps, c->sketch_bytes ? c->sketches : NULL,
                                               c->nfps, r->k, &o, print_batch_answer, c)
                : simstore_query_batch_sketches(r->s, c->fps, c->sketch_bytes ? c->sketches : NULL,
                                                c->nfps, r->k, &o, print_batch_answer, c);
        if (c->write_failed) {
            status = cli_error(CMD, "writing the answers: %s", strerror(errno ? errno : EIO));
        } else if (rc) {
            cli_api_error(CMD, rc, "query");
            fprintf(stderr, "simstore %s: (at %s:%llu-%llu)\n", CMD, c->file, c->first_line,
                    c->last_line);
            status = CLI_EXIT_FAIL;
        }
    }
    if (status == CLI_EXIT_OK) {
        print_bad_items(c, c->len);
        if (ferror(stdout))
            status = cli_error(CMD, "writing the answers: %s", strerror(errno ? errno : EIO));
    }
    c->len = c->bytes_len = c->nfps = c->printed = 0;
    c->first_line = 0;
    return status;
}

/* Read queries into chunks of at most `per_chunk` lines and answer each
 * chunk with one batch call: the same lines on stdout as query by query. */
static int run_queries_batched(query_run *r, input_reader *in, int format)
{
    uint64_t memory = r->memory_bytes ? r->memory_bytes : (uint64_t)256 << 20;
    size_t per_chunk = (size_t)(memory / 128);
    if (per_chunk < 1)
        per_chunk = 1;
    if (per_chunk > ((size_t)1 << 22))
        per_chunk = (size_t)1 << 22;
    query_chunk c;
    memset(&c, 0, sizeof c);
    c.r = r;
    input_record rec;
    int got = 1, bad_lines = 0, status = CLI_EXIT_OK;
    while (got > 0 && status == CLI_EXIT_OK) {
        /* Each chunk from the store now at the path, its texts fingerprinted
         * as that store's. */
        status = follow_store(r);
        while (status == CLI_EXIT_OK && c.len < per_chunk && (got = input_next(in, &rec)) != 0) {
            if (got == -2)
                break;
            if (!c.first_line)
                c.first_line = rec.line;
            c.file = rec.file;
            c.last_line = rec.line;
            uint64_t fp = rec.fingerprint;
            unsigned flags = 0;
            uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
            if (got != -1 && format == INPUT_JSONL && need_fingerprinter(r) == 0)
                /* Texts are sketched when the fingerprinter is made to (the
                 * store's kind, when similarities are asked for). */
                c.sketch_bytes = simstore_sketch_bytes(simstore_fingerprinter_sketch(r->fpr));
            if (got != -1 && format == INPUT_JSONL && rec.has_fp && c.sketch_bytes) {
                char why[512];
                snprintf(why, sizeof why,
                         "%s:%llu: a record giving \"fp\" has no text to sketch "
                         "(similarities need texts)",
                         rec.file, rec.line);
                cli_error(CMD, "%s", why);
                bad_lines = 1;
                if (chunk_push(&c, 1, 0, why, strlen(why)))
                    status = cli_error(CMD, "out of memory");
                continue;
            }
            if (got == -1) {
                const char *why = input_error(in);
                cli_error(CMD, "%s", why);
                bad_lines = 1;
                if (chunk_push(&c, 1, 0, why, strlen(why)))
                    status = cli_error(CMD, "out of memory");
            } else if (format == INPUT_JSONL && !rec.has_fp &&
                       (need_fingerprinter(r) ||
                        (c.sketch_bytes ? simstore_fingerprint_sketch(
                                              r->fpr, rec.text, rec.text_len, &fp, sketch, &flags)
                                        : simstore_fingerprint_text(r->fpr, rec.text, rec.text_len,
                                                                    &fp, &flags)))) {
                if (r->fpr)
                    cli_api_error(CMD, SIMSTORE_ENOMEM, "query");
                fprintf(stderr, "simstore %s: (at %s:%llu)\n", CMD, rec.file, rec.line);
                status = CLI_EXIT_FAIL;
            } else {
                if (format == INPUT_JSONL && (flags & SIMSTORE_FP_ONLY_BOILERPLATE))
                    warn_only_boilerplate(rec.file, rec.line, rec.id, rec.id_len);
                if (chunk_push_query(&c, &rec, fp, sketch))
                    status = cli_error(CMD, "out of memory");
            }
        }
        /* What was read before a failure is still answered. */
        int flushed = flush_chunk(&c);
        if (status == CLI_EXIT_OK)
            status = flushed;
        if (status == CLI_EXIT_OK && got == -2)
            status = cli_error(CMD, "%s", input_error(in));
    }
    free(c.items);
    free(c.bytes);
    free(c.fps);
    free(c.item_of);
    free(c.sketches);
    return status == CLI_EXIT_OK && bad_lines ? CLI_EXIT_FAIL : status;
}

static int run_queries_file(query_run *r, const char *path, int format)
{
    if (format < 0) {
        /* The extension under a compression suffix, as build and add tell
         * it (the compression itself is told from the bytes). */
        int by_name = ingest_format_of_name(path);
        if (by_name == INGEST_TSV)
            format = INPUT_ID_FP;
        else if (by_name == INGEST_FP)
            format = INPUT_FP_ID;
        else if (by_name == INGEST_JSONL)
            format = INPUT_JSONL;
        else if (strcmp(path, "-") == 0)
            return cli_usage_error(CMD, "standard input ('-') needs --format tsv|fp|jsonl");
        else
            return cli_usage_error(CMD,
                                   "%s: cannot tell the format from the name; use --format "
                                   "tsv|fp|jsonl",
                                   path);
    }
    const char *refused =
        cli_query_format_problem(format == INPUT_JSONL, r->min_similarity, r->paragraphs);
    if (refused)
        return cli_usage_error(CMD, "%s", refused);
    input_reader *in;
    if (input_open(&in, (input_format)format, path) != 0)
        return cli_error(CMD, "%s: %s", path, strerror(errno));
    input_set_fields(in, r->fields);
    /* A co-process writing queries into a pipe waits for each answer. */
    struct stat st;
    int regular = strcmp(path, "-") == 0 ? fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)
                                         : stat(path, &st) == 0 && S_ISREG(st.st_mode);
    r->flush_each = !regular;
    /* Paragraph queries go one by one (no batch form yet). A sharded
     * store's batches are answered by every shard and merged. */
    if (regular && r->strategy != STRATEGY_ONE_BY_ONE && !r->paragraphs) {
        int status = run_queries_batched(r, in, format);
        input_close(in);
        return status;
    }
    input_record rec;
    int got, status = CLI_EXIT_OK;
    while ((got = input_next(in, &rec)) != 0) {
        if (got == -2) {
            cli_error(CMD, "%s", input_error(in));
            status = CLI_EXIT_FAIL;
            break;
        }
        if (got == -1) {
            const char *why = input_error(in);
            cli_error(CMD, "%s", why);
            status = CLI_EXIT_FAIL;
            if (r->end_marker)
                cli_print_bad_query_end(r->json, why, strlen(why));
            if (r->flush_each)
                fflush(stdout);
            continue;
        }
        r->qid_integer = rec.id_is_integer;
        int rc = follow_store(r);
        if (rc == CLI_EXIT_OK)
            rc = run_one(r, rec.id, rec.id_len, format == INPUT_JSONL && !rec.has_fp,
                         rec.fingerprint, rec.text, rec.text_len, rec.file, rec.line);
        r->qid_integer = 0;
        if (rc != CLI_EXIT_OK) {
            fprintf(stderr, "simstore %s: (at %s:%llu)\n", CMD, rec.file, rec.line);
            status = rc;
            break;
        }
        if ((r->flush_each && fflush(stdout) != 0) || ferror(stdout)) {
            /* Stop reading queries whose answers cannot be written. */
            status = cli_error(CMD, "writing the answers: %s", strerror(errno ? errno : EIO));
            break;
        }
    }
    input_close(in);
    return status;
}

int cmd_query(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"k", required_argument, NULL, OPT_K},
        {"json", no_argument, NULL, OPT_JSON},
        {"meta", no_argument, NULL, OPT_META},
        {"fp", required_argument, NULL, OPT_FP},
        {"text", required_argument, NULL, OPT_TEXT},
        {"file", required_argument, NULL, OPT_FILE},
        {"queries", required_argument, NULL, OPT_QUERIES},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"no-verify", no_argument, NULL, OPT_NOVERIFY},
        {"huge-pages", no_argument, NULL, OPT_HUGE_PAGES},
        {"full-walk", no_argument, NULL, OPT_FULL_WALK},
        {"skip-self", no_argument, NULL, OPT_SKIP_SELF},
        {"end-marker", no_argument, NULL, OPT_END_MARKER},
        {"strategy", required_argument, NULL, OPT_STRATEGY},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"similarity", no_argument, NULL, OPT_SIMILARITY},
        {"min-similarity", required_argument, NULL, OPT_MIN_SIMILARITY},
        {"paragraphs", no_argument, NULL, OPT_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, OPT_MIN_FRACTION},
        {"help", no_argument, NULL, 'h'},
        TEXTOPT_LONG_OPTIONS,
        INPUT_FIELD_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    textopt_state text;
    textopt_init(&text);
    input_fields fields;
    input_fields_init(&fields);
    query_run r;
    memset(&r, 0, sizeof r);
    simstore_text_options effective;
    simstore_text_options_init(&effective);
    r.text = &effective;
    r.fields = &fields;
    int have_k = 0, meta = 0, format = -1, sources = 0, min_fraction_given = 0, c;
    r.min_fraction = SIMSTORE_NEAR_FRACTION;
    unsigned open_flags = SIMSTORE_OPEN_READONLY;
    const char *fp_arg = NULL, *text_arg = NULL, *file_arg = NULL, *queries_arg = NULL;
    unsigned long long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &v))
                return cli_usage_error(CMD, "--k takes 0..%d, not '%s'", SIMSTORE_MAX_K, optarg);
            r.k = (unsigned)v;
            have_k = 1;
            break;
        case OPT_JSON: r.json = 1; break;
        case OPT_META: meta = 1; break;
        case OPT_FP:
            fp_arg = optarg;
            sources++;
            break;
        case OPT_TEXT:
            text_arg = optarg;
            sources++;
            break;
        case OPT_FILE:
            file_arg = optarg;
            sources++;
            break;
        case OPT_QUERIES:
            queries_arg = optarg;
            sources++;
            break;
        case OPT_FORMAT:
            if (strcmp(optarg, "tsv") == 0)
                format = INPUT_ID_FP;
            else if (strcmp(optarg, "fp") == 0)
                format = INPUT_FP_ID;
            else if (strcmp(optarg, "jsonl") == 0)
                format = INPUT_JSONL;
            else
                return cli_usage_error(CMD, "--format takes tsv, fp or jsonl, not '%s'", optarg);
            break;
        case OPT_NOVERIFY:
            open_flags |= SIMSTORE_OPEN_SKIP_BLOCK_CHECKSUMS | SIMSTORE_OPEN_TRUST_LMDB;
            break;
        case OPT_HUGE_PAGES: open_flags |= SIMSTORE_OPEN_HUGE_PAGES; break;
        case OPT_FULL_WALK: open_flags |= SIMSTORE_OPEN_FULL_WALK; break;
        case OPT_SKIP_SELF: r.skip_self = 1; break;
        case OPT_END_MARKER: r.end_marker = 1; break;
        case OPT_STRATEGY:
            if (strcmp(optarg, "auto") == 0)
                r.strategy = SIMSTORE_BATCH_AUTO;
            else if (strcmp(optarg, "scan") == 0)
                r.strategy = SIMSTORE_BATCH_SCAN;
            else if (strcmp(optarg, "probe") == 0)
                r.strategy = SIMSTORE_BATCH_PROBE;
            else if (strcmp(optarg, "one-by-one") == 0)
                r.strategy = STRATEGY_ONE_BY_ONE;
            else
                return cli_usage_error(CMD,
                                       "--strategy takes auto, scan, probe or one-by-one, "
                                       "not '%s'",
                                       optarg);
            break;
        case OPT_THREADS:
            if (cli_threads_option(CMD, optarg, &r.threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_MEMORY:
            /* Small budgets are allowed (they only make chunks small). */
            if (cli_parse_size(optarg, &v) || v < BATCH_MIN_MEMORY)
                return cli_usage_error(CMD,
                                       "--memory takes a size of at least 64K (K, M, G: "
                                       "powers of 1024; 256M, 1GiB), not '%s'",
                                       optarg);
            r.memory_bytes = v;
            break;
        case OPT_SIMILARITY: r.print_similarity = 1; break;
        case OPT_MIN_SIMILARITY:
            if (cli_min_similarity_option(CMD, optarg, &r.min_similarity))
                return CLI_EXIT_USAGE;
            break;
        case OPT_PARAGRAPHS: r.paragraphs = 1; break;
        case OPT_MIN_FRACTION:
            if (cli_min_fraction_option(CMD, optarg, &r.min_fraction))
                return CLI_EXIT_USAGE;
            min_fraction_given = 1;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case '?':
        case ':': return cli_bad_option(CMD, c, argv, optind);
        default: {
            int t = textopt_or_field_or_bad_option(CMD, c, argv, optind, &text, &fields, NULL);
            if (t >= 0)
                return t;
        }
        }
    }
    if (textopt_finish(CMD, &text))
        return CLI_EXIT_USAGE;
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (sources != 1)
        return cli_usage_error(CMD, "give exactly one of --fp, --text, --file, --queries");
    const char *refused =
        cli_query_options_problem(meta, r.json, min_fraction_given, r.paragraphs, fp_arg != NULL,
                                  r.print_similarity, r.min_similarity);
    if (refused)
        return cli_usage_error(CMD, "%s", refused);
    uint64_t fp = 0;
    if (fp_arg && cli_parse_hex64(fp_arg, &fp))
        return cli_usage_error(CMD, "--fp takes 16 hex digits, not '%s'", fp_arg);
    if (fp_arg && r.min_similarity > 0)
        return cli_usage_error(CMD, "--min-similarity needs the query's text: a query by "
                                    "--fp has no sketch (give --text, --file or JSON Lines "
                                    "--queries)");

    r.path = path;
    r.open_flags = open_flags;
    r.query_flags = meta ? SIMSTORE_QUERY_WITH_META : 0;
    r.have_k = have_k;
    /* Texts are fingerprinted the way the store's documents were (its
     * fingerprint version included), except for the options the command
     * line gives. */
    r.store_text = &effective;
    r.given_text = &text;
    if (open_store(&r) != CLI_EXIT_OK)
        return CLI_EXIT_FAIL;
    simstore_text_options stored;
    simstore_get_text_options(r.s, &stored);
    char stored_desc[256], effective_desc[256];
    textopt_describe(&stored, stored_desc, sizeof stored_desc);
    textopt_describe(&effective, effective_desc, sizeof effective_desc);
    if (text.given && (text_arg || file_arg || format == INPUT_JSONL) &&
        strcmp(stored_desc, effective_desc) != 0)
        cli_warn(CMD,
                 "the store's texts were fingerprinted with %s; these options (%s) "
                 "differ, so near texts may not match",
                 stored_desc, effective_desc);
    int status;
    if (fp_arg) {
        status = run_one(&r, "-", 1, 0, fp, NULL, 0, NULL, 0);
    } else if (text_arg) {
        status = run_one(&r, "-", 1, 1, 0, text_arg, strlen(text_arg), NULL, 0);
    } else if (file_arg) {
        char *data, why[1024];
        size_t len;
        if (cli_read_file(file_arg, &data, &len, why, sizeof why) != 0) {
            status = cli_error(CMD, "%s", why);
        } else {
            status = run_one(&r, "-", 1, 1, 0, data, len, NULL, 0);
            free(data);
        }
    } else {
        status = run_queries_file(&r, queries_arg, format);
    }
    if (fflush(stdout) != 0 && status == CLI_EXIT_OK)
        status = cli_error(CMD, "writing the answers: %s", strerror(errno));
    close_store(&r);
    free(r.para_fps);
    return status;
}
