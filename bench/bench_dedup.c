/* bench_dedup.c: `simstore dedup` throughput (MB of JSON Lines per second)
 * beside fingerprinting alone on the same input, measured in the same run
 * with the same thread count, for both settings: the default (the
 * near-duplicate setting: k = 7, similarity 0.9, minhash256 sketches) and
 * `--k 3` (a distance alone, no sketch). The baseline of each is the ingest
 * pipeline `dedup` is built on (cmd/ingest.c: reader, parsing and
 * fingerprinting workers, records in input order) ending in a sink that
 * only counts, fingerprinting as the setting does (with the sketch for the
 * default); `dedup` is the command itself (cmd_dedup, in process; stdout
 * to /dev/null, as the baseline writes nothing, and once to a file in
 * /tmp), without and with --store (a store built from the first tenth of
 * the corpus, under other ids, keeping minhash256 sketches).
 *
 *   bench_dedup [MEGABYTES [THREADS [SEED]]]   (default 64 MB, 2, seed 1)
 *
 * The corpus is shaped like C4 (1..8 KB texts, an id, a url and a
 * timestamp); a third of its records are near-duplicates of an earlier one
 * (a few letters changed), so dedup drops about that many. */
#include "commands.h"
#include "ingest.h"
#include "simstore.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PASSES 5

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

/* One record's text: fresh words from a skewed vocabulary, or (one in
 * three) an earlier text with three letters changed. */
static size_t write_text(char *buf, size_t cap, char (*words)[12], size_t vocab, char **texts,
                         size_t *text_lens, size_t docs)
{
    size_t len = 0;
    if (docs > 0 && rng_next() % 3 == 0) {
        size_t j = rng_next() % docs;
        memcpy(buf, texts[j], text_lens[j]);
        len = text_lens[j];
        for (int c = 0; c < 3; c++) {
            size_t at = rng_next() % len;
            if (buf[at] >= 'a' && buf[at] <= 'z')
                buf[at] = (char)('a' + rng_next() % 26);
        }
        return len;
    }
    size_t target = 1000 + rng_next() % 7000;
    while (len < target && len + 16 < cap) {
        uint64_t r = rng_next();
        size_t w = (size_t)((r % vocab) * ((r >> 32) % 1000) / 1000);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", words[w], r % 17 == 0 ? ". " : " ");
    }
    return len;
}

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
    size_t cap = bytes + (1 << 16), max_docs = bytes / 500 + 16;
    char *buf = malloc(cap);
    char **texts = malloc(max_docs * sizeof *texts);
    size_t *text_lens = malloc(max_docs * sizeof *text_lens);
    size_t len = 0, docs = 0;
    while (len + 10000 < bytes && docs < max_docs) {
        len += (size_t)snprintf(buf + len, cap - len, "{\"text\": \"");
        size_t n = write_text(buf + len, 9000, words, VOCAB, texts, text_lens, docs);
        texts[docs] = buf + len;
        text_lens[docs] = n;
        len += n;
        len += (size_t)snprintf(buf + len, cap - len,
                                "\", \"id\": \"doc-%zu\", \"url\": \"https://example.org/%zu\", "
                                "\"timestamp\": \"2024-01-01T00:00:00Z\"}\n",
                                docs, docs);
        docs++;
    }
    free(texts);
    free(text_lens);
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

static int count_doc(void *ctx, const simstore_doc *d)
{
    *(uint64_t *)ctx += d->fp + d->flags;
    return 0;
}

static int count_fp(void *ctx, uint64_t fp)
{
    *(uint64_t *)ctx += fp;
    return 0;
}

/* Seconds of the pipeline alone (parse + fingerprint), best of `passes`. */
static double fingerprint_seconds(const char *path, unsigned threads, int passes,
                                  simstore_sketch_kind sketch)
{
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        uint64_t sum = 0;
        ingest_sink s = {count_doc, count_fp, &sum, NULL};
        simstore_text_options text;
        simstore_text_options_init(&text);
        text.sketch = sketch;
        ingest_options o;
        memset(&o, 0, sizeof o);
        o.cmd = "bench";
        o.format = INGEST_JSONL;
        o.text = &text;
        o.threads = threads;
        ingest_result res;
        char *paths[1] = {(char *)path};
        double t0 = now();
        if (ingest_run(&s, paths, 1, &o, &res) != 0) {
            fprintf(stderr, "bench_dedup: %s: ingest failed\n", path);
            exit(1);
        }
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

/* Seconds of `simstore dedup ARGS... path` in process, best of `passes`;
 * the kept records' bytes to *kept_bytes. */
static double dedup_seconds(char **args, int nargs, const char *path, int passes, long *kept_bytes,
                            const char *out_path)
{
    double best = 1e30;
    for (int p = 0; p < passes; p++) {
        char *argv[16];
        int argc = 0;
        argv[argc++] = (char *)"dedup";
        for (int i = 0; i < nargs; i++)
            argv[argc++] = args[i];
        argv[argc++] = (char *)path;
        argv[argc] = NULL;
        fflush(stdout);
        int saved = dup(1);
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        close(fd);
        optind = 0;
        double t0 = now();
        int rc = cmd_dedup(argc, argv);
        fflush(stdout);
        double t = now() - t0;
        dup2(saved, 1);
        close(saved);
        if (rc != 0) {
            fprintf(stderr, "bench_dedup: dedup failed (%d)\n", rc);
            exit(1);
        }
        if (t < best)
            best = t;
    }
    FILE *f = fopen(out_path, "rb");
    fseek(f, 0, SEEK_END);
    *kept_bytes = ftell(f);
    fclose(f);
    return best;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 64;
    unsigned threads = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 2;
    rng_state = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    if (mb < 1)
        mb = 1;
    if (threads < 1)
        threads = 1;
    size_t len, docs;
    char *corpus = make_corpus(mb << 20, &len, &docs);
    char dir[] = "/tmp/bench_dedup-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_dedup: mkdtemp");
        return 1;
    }
    char plain[96], base[96], store[96], out[96], cmd[512];
    snprintf(plain, sizeof plain, "%s/corpus.jsonl", dir);
    snprintf(base, sizeof base, "%s/base.jsonl", dir);
    snprintf(store, sizeof store, "%s/store", dir);
    snprintf(out, sizeof out, "%s/kept.jsonl", dir);
    /* The store: the first tenth of the records, cut at a line end. */
    size_t base_len = len / 10;
    while (base_len < len && corpus[base_len - 1] != '\n')
        base_len++;
    int wrote = write_file(plain, corpus, len);
    /* Stored under other ids ("old-N"): the same id would be an error. */
    for (char *p = corpus; (p = strstr(p, "\"id\": \"doc-")) && p < corpus + base_len; p++)
        memcpy(p + 7, "old", 3);
    if (wrote || write_file(base, corpus, base_len)) {
        fprintf(stderr, "bench_dedup: cannot write the corpus in %s\n", dir);
        return 1;
    }
    free(corpus);
    char tbuf[16];
    snprintf(tbuf, sizeof tbuf, "%u", threads);
    {
        simstore_text_options text;
        simstore_text_options_init(&text);
        text.sketch = SIMSTORE_SKETCH_DEFAULT; /* as `simstore build` of JSON Lines */
        simstore_build_options o;
        simstore_build_options_init(&o);
        o.text = &text;
        simstore_builder *b;
        char *paths[1] = {base};
        ingest_options io;
        memset(&io, 0, sizeof io);
        io.cmd = "bench";
        io.format = INGEST_JSONL;
        io.text = &text;
        io.threads = threads;
        ingest_result res;
        if (simstore_build_begin(store, &o, &b) ||
            ingest_and_finish(b, paths, 1, &io, &res, NULL, "store not built")) {
            fprintf(stderr, "bench_dedup: cannot build %s\n", store);
            return 1;
        }
    }

    double mbytes = (double)len / 1e6;
    /* The machine is shared: interleave each setting's measurements, pass
     * by pass, so that each sees the same load as its baseline, and keep
     * each one's best; one setting after the other (the defaults' larger
     * memory is not churned between the other's runs). Setting 0: the
     * defaults; setting 1: --k 3. */
    static const char *const names[2] = {"defaults (k 7, J >= 0.9, minhash256)",
                                         "--k 3 (a distance alone)"};
    long kept_bytes[2] = {0, 0}, kept_store_bytes[2] = {0, 0}, ignored;
    char *plain_args[2][4] = {{(char *)"--threads", tbuf},
                              {(char *)"--threads", tbuf, (char *)"--k", (char *)"3"}};
    char *store_args[2][6] = {
        {(char *)"--threads", tbuf, (char *)"--store", store},
        {(char *)"--threads", tbuf, (char *)"--store", store, (char *)"--k", (char *)"3"}};
    int nplain[2] = {2, 4}, nstore[2] = {4, 6};
    double fp_s[2] = {1e30, 1e30}, dd_s[2] = {1e30, 1e30}, df_s[2] = {1e30, 1e30},
           ds_s[2] = {1e30, 1e30};
    for (int m = 0; m < 2; m++)
        for (int pass = 0; pass < PASSES; pass++) {
            double t = fingerprint_seconds(plain, threads, 1,
                                           m == 0 ? SIMSTORE_SKETCH_DEFAULT : SIMSTORE_SKETCH_NONE);
            fp_s[m] = t < fp_s[m] ? t : fp_s[m];
            t = dedup_seconds(plain_args[m], nplain[m], plain, 1, &ignored, "/dev/null");
            dd_s[m] = t < dd_s[m] ? t : dd_s[m];
            t = dedup_seconds(plain_args[m], nplain[m], plain, 1, &kept_bytes[m], out);
            df_s[m] = t < df_s[m] ? t : df_s[m];
            t = dedup_seconds(store_args[m], nstore[m], plain, 1, &ignored, "/dev/null");
            ds_s[m] = t < ds_s[m] ? t : ds_s[m];
        }
    printf("bench_dedup: %.1f MB of JSON Lines, %zu records (1 in 3 a near-duplicate), "
           "%u threads, best of %d interleaved passes a setting\n",
           mbytes, docs, threads, PASSES);
    for (int m = 0; m < 2; m++) {
        dedup_seconds(store_args[m], nstore[m], plain, 1, &kept_store_bytes[m], out);
        printf(" %s:\n", names[m]);
        printf("  %-40s %7.1f MB/s  (baseline)\n",
               m == 0 ? "fingerprint + sketch alone (parse + both)"
                      : "fingerprint alone (parse + simhash)",
               mbytes / fp_s[m]);
        printf("  %-40s %7.1f MB/s  %5.1f %% of the baseline; kept %.1f MB\n", "dedup >/dev/null",
               mbytes / dd_s[m], 100.0 * fp_s[m] / dd_s[m], (double)kept_bytes[m] / 1e6);
        printf("  %-40s %7.1f MB/s  %5.1f %% of the baseline\n",
               "dedup >file (the kept records written)", mbytes / df_s[m],
               100.0 * fp_s[m] / df_s[m]);
        printf("  %-40s %7.1f MB/s  %5.1f %% of the baseline; kept %.1f MB\n",
               "dedup --store (1/10 of it stored)", mbytes / ds_s[m], 100.0 * fp_s[m] / ds_s[m],
               (double)kept_store_bytes[m] / 1e6);
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_dedup: could not remove %s\n", dir);
    return 0;
}
