/* bench_ingest.c: JSON Lines ingest throughput (MB of input per second) of
 * the pipeline `build` and `add` use (cmd/ingest.c: a reader thread, N
 * parsing and fingerprinting workers, records handed on in input order),
 * with --threads 1 and 2, from a plain and a .zst file, beside one-core
 * baselines measured in the same run over the same records: parsing alone
 * (the record parser the pipeline uses, whose one-pass reader takes these
 * records, and the same parser with jansson only) and fingerprinting alone
 * (the texts already in memory).
 *
 *   bench_ingest [MEGABYTES [SEED]]      (default 64 MB, seed 1)
 *
 * The records end in a sink that only counts them, so the figures are the
 * pipeline's, not the store builder's. */
#include "ingest.h"
#include "input.h"
#include "simstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A corpus shaped like C4 or FineWeb: {"text", "id", "url", "timestamp"} with
 * 1..8 KB texts of words from a skewed vocabulary. */
static char *make_corpus(size_t bytes, size_t *len_out, size_t *docs_out)
{
    enum { VOCAB = 20000 };
    static char words[VOCAB][12];
    for (size_t i = 0; i < VOCAB; i++) {
        size_t n = 2 + rng_next() % 9;
        for (size_t j = 0; j < n; j++)
            words[i][j] = (char)('a' + rng_next() % 26);
        words[i][n] = '\0';
    }
    size_t cap = bytes + (1 << 16);
    char *buf = malloc(cap);
    size_t len = 0, docs = 0;
    while (len + 10000 < bytes) {
        size_t target = 1000 + rng_next() % 7000;
        len += (size_t)snprintf(buf + len, cap - len, "{\"text\": \"");
        size_t start = len;
        while (len - start < target) {
            /* Skew: small ranks far more often. */
            uint64_t r = rng_next();
            size_t w = (size_t)((r % VOCAB) * ((r >> 32) % 1000) / 1000);
            len +=
                (size_t)snprintf(buf + len, cap - len, "%s%s", words[w], r % 17 == 0 ? ". " : " ");
        }
        len += (size_t)snprintf(buf + len, cap - len,
                                "\", \"id\": \"doc-%zu\", \"url\": \"https://example.org/%zu\", "
                                "\"timestamp\": \"2024-01-01T00:00:00Z\"}\n",
                                docs, docs);
        docs++;
    }
    *len_out = len;
    *docs_out = docs;
    return buf;
}

static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = fwrite(data, 1, len, f) == len ? 0 : -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

typedef struct counter {
    uint64_t docs;
    uint64_t sink;
} counter;

static int count_doc(void *ctx, const simstore_doc *d)
{
    counter *c = (counter *)ctx;
    c->docs++;
    c->sink ^= d->fp + d->flags;
    return 0;
}

static int count_fp(void *ctx, uint64_t fp)
{
    ((counter *)ctx)->sink ^= fp;
    return 0;
}

/* Best of `passes` runs of the pipeline over path; MB/s of `bytes`. */
static double ingest_mbs(const char *path, unsigned threads, size_t bytes, size_t docs, int passes,
                         uint64_t *sink)
{
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        counter c = {0, 0};
        ingest_sink s = {count_doc, count_fp, &c, NULL};
        simstore_text_options text;
        simstore_text_options_init(&text);
        ingest_options o;
        memset(&o, 0, sizeof o);
        o.cmd = "bench";
        o.format = INGEST_JSONL;
        o.text = &text;
        o.threads = threads;
        ingest_result res;
        char *paths[1] = {(char *)path};
        double t0 = now();
        int rc = ingest_run(&s, paths, 1, &o, &res);
        double t = now() - t0;
        if (rc != 0 || c.docs != docs) {
            fprintf(stderr, "bench_ingest: %s: ingest failed (%d, %llu of %zu documents)\n", path,
                    rc, (unsigned long long)c.docs, docs);
            exit(1);
        }
        *sink ^= c.sink;
        if (t < best)
            best = t;
    }
    return (double)bytes / 1e6 / best;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 64;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    if (mb < 1)
        mb = 1;
    size_t len, docs;
    char *corpus = make_corpus(mb << 20, &len, &docs);

    char dir[] = "/tmp/bench_ingest-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_ingest: mkdtemp");
        return 1;
    }
    char plain[64], zst[64];
    snprintf(plain, sizeof plain, "%s/corpus.jsonl", dir);
    snprintf(zst, sizeof zst, "%s/corpus.jsonl.zst", dir);
    size_t zcap = ZSTD_compressBound(len);
    void *z = malloc(zcap);
    size_t zlen = ZSTD_compress(z, zcap, corpus, len, 3);
    if (ZSTD_isError(zlen) || write_file(plain, corpus, len) || write_file(zst, z, zlen)) {
        fprintf(stderr, "bench_ingest: cannot write the corpus in %s\n", dir);
        return 1;
    }
    free(z);

    /* Baselines, one core: parse every record (both readers); fingerprint
     * every text. */
    input_parser *parser, *jansson;
    simstore_fingerprinter *fpr;
    if (input_parser_new(&parser, INPUT_JSONL, NULL) ||
        input_parser_new(&jansson, INPUT_JSONL, NULL) ||
        simstore_fingerprinter_new(NULL, &fpr) != SIMSTORE_OK) {
        fprintf(stderr, "bench_ingest: setup failed\n");
        return 1;
    }
    input_parser_jansson_only(jansson);
    char **texts = malloc(docs * sizeof *texts);
    size_t *text_lens = malloc(docs * sizeof *text_lens);
    uint64_t sink = 0;
    double parse_best = 1e30, jansson_best = 1e30, fp_best = 1e30;
    for (int pass = 0; pass < 6; pass++) {
        /* The two readers in turn. */
        input_parser *pp = pass % 2 ? jansson : parser;
        double t0 = now();
        size_t i = 0;
        for (const char *p = corpus, *end = corpus + len; p < end; i++) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            input_record rec;
            if (input_parse_line(pp, p, (size_t)(nl - p), "corpus", i + 1, &rec) != 1) {
                fprintf(stderr, "bench_ingest: record %zu: %s\n", i, input_parser_error(pp));
                return 1;
            }
            sink += rec.text_len + rec.id_len;
            if (pass == 0) {
                texts[i] = malloc(rec.text_len);
                memcpy(texts[i], rec.text, rec.text_len);
                text_lens[i] = rec.text_len;
            }
            p = nl + 1;
        }
        double t = now() - t0;
        double *best = pass % 2 ? &jansson_best : &parse_best;
        if (t < *best)
            *best = t;
    }
    for (int pass = 0; pass < 3; pass++) {
        double t0 = now();
        for (size_t i = 0; i < docs; i++) {
            uint64_t fp;
            unsigned flags;
            simstore_fingerprint_text(fpr, texts[i], text_lens[i], &fp, &flags);
            sink ^= fp;
        }
        double t = now() - t0;
        if (t < fp_best)
            fp_best = t;
    }
    double parse_mbs = (double)len / 1e6 / parse_best;
    double jansson_mbs = (double)len / 1e6 / jansson_best;
    double fp_mbs = (double)len / 1e6 / fp_best;
    double serial_mbs = 1.0 / (1.0 / parse_mbs + 1.0 / fp_mbs);

    double t1 = ingest_mbs(plain, 1, len, docs, 3, &sink);
    double t2 = ingest_mbs(plain, 2, len, docs, 3, &sink);
    double z1 = ingest_mbs(zst, 1, len, docs, 3, &sink);
    double z2 = ingest_mbs(zst, 2, len, docs, 3, &sink);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_ingest: %zu documents, %.1f MB of JSON Lines (%.1f MB as .zst); %ld cores\n",
           docs, (double)len / 1e6, (double)zlen / 1e6, cores);
    printf("MB/s of JSON Lines input (10^6 bytes), best of 3\n\n");
    printf("  %-46s %8.1f MB/s  (%.2fx jansson)\n", "parse alone (one-pass reader), 1 core",
           parse_mbs, parse_mbs / jansson_mbs);
    printf("  %-46s %8.1f MB/s\n", "baseline: parse alone (jansson), 1 core", jansson_mbs);
    printf("  %-46s %8.1f MB/s\n", "baseline: fingerprint alone (w=3 tf), 1 core", fp_mbs);
    printf("  %-46s %8.1f MB/s\n", "baseline: parse then fingerprint, 1 core", serial_mbs);
    printf("  %-46s %8.1f MB/s\n", "ingest --threads 1, plain", t1);
    printf("  %-46s %8.1f MB/s  (%.2fx --threads 1; target >= 1.7x)\n", "ingest --threads 2, plain",
           t2, t2 / t1);
    printf("  %-46s %8.1f MB/s  (%.1f%% of plain)\n", "ingest --threads 1, .zst", z1,
           100.0 * z1 / t1);
    printf("  %-46s %8.1f MB/s  (%.1f%% of plain; target >= 90%%)\n", "ingest --threads 2, .zst",
           z2, 100.0 * z2 / t2);
    printf("\n(sink %016llx: printed so that no measured work can be optimised away)\n",
           (unsigned long long)sink);

    for (size_t i = 0; i < docs; i++)
        free(texts[i]);
    free(texts);
    free(text_lens);
    input_parser_free(parser);
    input_parser_free(jansson);
    simstore_fingerprinter_free(fpr);
    free(corpus);
    unlink(plain);
    unlink(zst);
    rmdir(dir);
    return 0;
}
