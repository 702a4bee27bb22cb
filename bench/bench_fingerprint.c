/* bench_fingerprint.c: fingerprinting throughput (MB of text per second, one
 * core) on a generated corpus, for fingerprint versions 1 and 2, w = 1 and
 * w = 3, TF and LENGTH weighting (and LOG, version 2), beside two baselines
 * measured in the same run over the same bytes: raw XXH3-64 of each
 * document, and version 1 tokenization alone. The "v2 / v1" line is the
 * ratio of the defaults' throughputs (w = 3, TF). The "defaults" lines set
 * what `simstore build` now does to a text by default (version 2, Chinese
 * as bigrams, a minhash256 sketch in the same pass) beside version 1's
 * defaults (friso words, no sketch), alternating passes. The sketch lines
 * fingerprint and sketch in one pass (simstore_fingerprint_sketch, every
 * kind, version 2, w = 3, TF), beside the fingerprint alone in alternating
 * passes; and, since a sketch's densification costs about the same for
 * every document, again on short documents (the first 300 bytes of each
 * Latin one).
 *
 *   bench_fingerprint [MEGABYTES [SEED]]      (default 24 MB, seed 1)
 *
 * The corpus: documents of 2..8 KB drawn from a seeded Zipf(1.1) vocabulary
 * of 50,000 Latin words (some capitalised or accented) with punctuation and
 * paragraph breaks; 12% of the documents are Chinese, built from a Zipf
 * vocabulary of 1-4 character Han words. */
#include "simstore.h"
#include "text/segment.h"
#include "text/tokenize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double rng_unit(void)
{
    return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct zipf {
    double *cdf;
    size_t n;
} zipf;

static void zipf_init(zipf *z, size_t n, double s)
{
    z->n = n;
    z->cdf = malloc(n * sizeof *z->cdf);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        z->cdf[i] = (sum += 1.0 / pow((double)(i + 1), s));
    for (size_t i = 0; i < n; i++)
        z->cdf[i] /= sum;
}

static size_t zipf_draw(const zipf *z)
{
    double u = rng_unit();
    size_t lo = 0, hi = z->n - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct corpus {
    char *bytes;
    size_t len;
    size_t *offset; /* document i is bytes[offset[i] .. offset[i + 1]) */
    size_t docs;
    size_t cjk_docs;
} corpus;

static void make_corpus(corpus *c, size_t target_bytes)
{
    static const char *const syll[] = {
        "ba",  "ke", "ri", "mo", "tu", "sa", "le", "ni", "po", "da", "ve", "gi", "ro",  "chu",
        "str", "an", "el", "or", "ul", "é",  "ü",  "ø",  "ñ",  "th", "qu", "sh", "ing", "er"};
    enum { LATIN = 50000, HAN = 20000 };
    char(*latin)[40] = malloc(sizeof(*latin) * LATIN);
    char(*han)[16] = malloc(sizeof(*han) * HAN);
    for (size_t i = 0; i < LATIN; i++) {
        /* Frequent words are short, as in real text. */
        unsigned n = 1 + (unsigned)(i < 100    ? rng_next() % 2
                                    : i < 5000 ? rng_next() % 3
                                               : 1 + rng_next() % 4);
        latin[i][0] = '\0';
        for (unsigned k = 0; k < n; k++)
            strcat(latin[i], syll[rng_next() % (sizeof syll / sizeof syll[0])]);
    }
    for (size_t i = 0; i < HAN; i++) {
        unsigned n = i < 2000 ? 1 + (unsigned)(rng_next() % 2) : 1 + (unsigned)(rng_next() % 4);
        size_t len = 0;
        for (unsigned k = 0; k < n; k++) {
            /* Common ideographs: U+4E00..U+5FFF. */
            uint32_t cp = 0x4E00 + (uint32_t)(rng_next() % 0x1200);
            han[i][len++] = (char)(0xE0 | cp >> 12);
            han[i][len++] = (char)(0x80 | (cp >> 6 & 0x3F));
            han[i][len++] = (char)(0x80 | (cp & 0x3F));
        }
        han[i][len] = '\0';
    }
    zipf zl, zh;
    zipf_init(&zl, LATIN, 1.1);
    zipf_init(&zh, HAN, 1.1);

    c->bytes = malloc(target_bytes + 16384);
    size_t cap_docs = target_bytes / 2048 + 2;
    c->offset = malloc(cap_docs * sizeof *c->offset);
    c->len = 0;
    c->docs = 0;
    c->cjk_docs = 0;
    while (c->len + 8192 < target_bytes && c->docs + 1 < cap_docs) {
        size_t doc_bytes = 2048 + (size_t)(rng_next() % 6145), start = c->len;
        int cjk = rng_next() % 100 < 12;
        c->offset[c->docs++] = start;
        c->cjk_docs += cjk;
        size_t since_stop = 0;
        while (c->len - start < doc_bytes) {
            const char *w = cjk ? han[zipf_draw(&zh)] : latin[zipf_draw(&zl)];
            size_t wl = strlen(w);
            memcpy(c->bytes + c->len, w, wl);
            if (!cjk && since_stop == 0 && c->bytes[c->len] >= 'a' && c->bytes[c->len] <= 'z')
                c->bytes[c->len] -= 32;
            c->len += wl;
            since_stop++;
            uint64_t r = rng_next() % 100;
            const char *sep = cjk ? (r < 8    ? "，"
                                     : r < 12 ? "。"
                                     : r < 13 ? "。\n\n"
                                              : "")
                                  : (r < 6    ? ", "
                                     : r < 10 ? ". "
                                     : r < 11 ? ".\n\n"
                                              : " ");
            if ((cjk && r < 13) || (!cjk && r >= 6 && r < 11))
                since_stop = 0;
            memcpy(c->bytes + c->len, sep, strlen(sep));
            c->len += strlen(sep);
        }
    }
    c->offset[c->docs] = c->len;
    free(latin);
    free(han);
    free(zl.cdf);
    free(zh.cdf);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct job {
    const corpus *c;
    simstore_fingerprinter *fpr; /* fingerprinting */
    sims_tokenizer *tok;         /* tokenizing only */
    int xxh3;                    /* hashing only */
    uint64_t sink;
    int sketch; /* fingerprint and sketch in one pass */
} job;

static int count_token(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints, int cjk)
{
    (void)bytes;
    (void)cjk;
    *(uint64_t *)ctx += len + codepoints;
    return 0;
}

static void run_once(job *j)
{
    const corpus *c = j->c;
    for (size_t d = 0; d < c->docs; d++) {
        const char *text = c->bytes + c->offset[d];
        size_t len = c->offset[d + 1] - c->offset[d];
        if (j->xxh3) {
            j->sink += XXH3_64bits_withSeed(text, len, 0);
        } else if (j->tok) {
            int invalid = 0;
            sims_tokenize(j->tok, (const uint8_t *)text, len, count_token, &j->sink, &invalid);
        } else if (j->sketch) {
            uint64_t fp;
            uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
            simstore_fingerprint_sketch(j->fpr, text, len, &fp, sketch, NULL);
            j->sink += fp + sketch[0] + sketch[15];
        } else {
            uint64_t fp;
            simstore_fingerprint_text(j->fpr, text, len, &fp, NULL);
            j->sink += fp;
        }
    }
}

/* Every result feeds this, and it is printed, so no work can be optimised away. */
static uint64_t checksum;

/* Best of several passes (at least 3, at least ~0.6 s), in MB/s. */
static double measure(job *j)
{
    double best = 1e30, spent = 0;
    run_once(j); /* warm up: buffers grow, caches fill */
    for (int pass = 0; pass < 3 || (spent < 0.6 && pass < 50); pass++) {
        double t0 = now();
        run_once(j);
        double t = now() - t0;
        spent += t;
        if (t < best)
            best = t;
    }
    checksum ^= j->sink;
    return (double)j->c->len / 1e6 / best;
}

static double bench_fpr(const corpus *c, unsigned version, unsigned w, simstore_weighting weighting,
                        simstore_cjk_mode cjk)
{
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.version = version;
    o.shingle_words = w;
    o.weighting = weighting;
    o.cjk = cjk;
    job j = {c, NULL, NULL, 0, 0, 0};
    if (simstore_fingerprinter_new(&o, &j.fpr) != 0) {
        fprintf(stderr, "bench_fingerprint: %s\n", simstore_last_error());
        exit(1);
    }
    double mbs = measure(&j);
    simstore_fingerprinter_free(j.fpr);
    return mbs;
}

/* Two fingerprinters, their passes alternating (a shared machine's load
 * then weighs on both alike): best of each, in MB/s. A fingerprinter with a
 * sketch kind fingerprints and sketches in one pass. */
static void bench_alternating(const corpus *c, const simstore_text_options *oa,
                              const simstore_text_options *ob, double *a_mbs, double *b_mbs)
{
    job a = {c, NULL, NULL, 0, 0, oa->sketch != SIMSTORE_SKETCH_NONE};
    job b = {c, NULL, NULL, 0, 0, ob->sketch != SIMSTORE_SKETCH_NONE};
    if (simstore_fingerprinter_new(oa, &a.fpr) != 0 ||
        simstore_fingerprinter_new(ob, &b.fpr) != 0) {
        fprintf(stderr, "bench_fingerprint: %s\n", simstore_last_error());
        exit(1);
    }
    double best[2] = {1e30, 1e30}, spent = 0;
    job *jobs[2] = {&a, &b};
    run_once(&a);
    run_once(&b);
    for (int pass = 0; pass < 5 || (spent < 1.5 && pass < 60); pass++)
        for (int i = 0; i < 2; i++) {
            double t0 = now();
            run_once(jobs[i]);
            double t = now() - t0;
            spent += t;
            if (t < best[i])
                best[i] = t;
        }
    checksum ^= a.sink ^ b.sink;
    *a_mbs = (double)c->len / 1e6 / best[0];
    *b_mbs = (double)c->len / 1e6 / best[1];
    simstore_fingerprinter_free(a.fpr);
    simstore_fingerprinter_free(b.fpr);
}

/* Version 2, w = 3, TF, with a sketch of `kind` against the fingerprint
 * alone. */
static void bench_sketch(const corpus *c, simstore_sketch_kind kind, double *plain_mbs,
                         double *sketch_mbs)
{
    simstore_text_options plain, o;
    simstore_text_options_init(&plain);
    o = plain;
    o.sketch = kind;
    bench_alternating(c, &plain, &o, plain_mbs, sketch_mbs);
}

/* What `simstore build` does to JSON Lines texts by default against what
 * it did with fingerprint version 1: version 2 with its default options
 * (Chinese as character bigrams) and the default sketch (minhash256), in
 * one pass, against version 1 with friso words where its dictionary loads
 * (version 1's default then) and no sketch. */
static void print_defaults(const corpus *c, const char *name)
{
    simstore_text_options v1, now;
    simstore_text_options_init(&now);
    now.sketch = SIMSTORE_SKETCH_DEFAULT;
    simstore_text_options_init(&v1);
    v1.version = 1;
    v1.cjk = SIMSTORE_CJK_AUTO;
    double a, b;
    bench_alternating(c, &v1, &now, &a, &b);
    printf("  %-44s %8.1f MB/s  (%.2f x version 1's defaults: %.1f MB/s; target >= 0.75)\n", name,
           b, b / a, a);
}

/* The first `bytes` bytes of every document (whole UTF-8 sequences). */
static void shorten(const corpus *all, size_t bytes, corpus *out)
{
    out->bytes = malloc(all->len);
    out->offset = malloc((all->docs + 1) * sizeof *out->offset);
    out->len = out->docs = out->cjk_docs = 0;
    for (size_t d = 0; d < all->docs; d++) {
        const char *t = all->bytes + all->offset[d];
        size_t len = all->offset[d + 1] - all->offset[d];
        if (len > bytes) {
            len = bytes;
            while (len > 0 && ((unsigned char)t[len] & 0xC0) == 0x80)
                len--;
        }
        out->offset[out->docs++] = out->len;
        memcpy(out->bytes + out->len, t, len);
        out->len += len;
    }
    out->offset[out->docs] = out->len;
}

static void print_sketches(const corpus *c, const char *name)
{
    printf("%s (%.1f MB, %zu documents, mean %.0f bytes): v2 w=3 tf\n", name, (double)c->len / 1e6,
           c->docs, (double)c->len / (double)c->docs);
    for (int k = SIMSTORE_SKETCH_MINHASH16; k <= SIMSTORE_SKETCH_MINHASH256; k++) {
        double plain, mbs;
        bench_sketch(c, (simstore_sketch_kind)k, &plain, &mbs);
        char label[64];
        snprintf(label, sizeof label, "fingerprint + sketch %s",
                 simstore_sketch_name((simstore_sketch_kind)k));
        printf("  %-34s %8.1f MB/s  (fingerprint alone %.1f MB/s: %.3f x)\n", label, mbs, plain,
               mbs / plain);
    }
    printf("\n");
}

static double bench_tokenize(const corpus *c, int friso)
{
    sims_friso_task *task = NULL;
    if (friso && sims_friso_task_new(&task) != 0)
        return 0;
    sims_tokenizer tok;
    sims_tokenizer_init(&tok, task);
    job j = {c, NULL, &tok, 0, 0, 0};
    double mbs = measure(&j);
    sims_tokenizer_release(&tok);
    sims_friso_task_free(task);
    return mbs;
}

/* The documents of one kind (CJK or not), as a corpus of their own. */
static void subset(const corpus *all, int want_cjk, corpus *out)
{
    out->bytes = malloc(all->len);
    out->offset = malloc((all->docs + 1) * sizeof *out->offset);
    out->len = out->docs = out->cjk_docs = 0;
    for (size_t d = 0; d < all->docs; d++) {
        const unsigned char *t = (const unsigned char *)all->bytes + all->offset[d];
        int is_cjk = t[0] >= 0xE0; /* generated documents start with a word */
        if (is_cjk != want_cjk)
            continue;
        size_t len = all->offset[d + 1] - all->offset[d];
        out->offset[out->docs++] = out->len;
        memcpy(out->bytes + out->len, t, len);
        out->len += len;
    }
    out->offset[out->docs] = out->len;
    out->cjk_docs = want_cjk ? out->docs : 0;
}

int main(int argc, char **argv)
{
    size_t megabytes = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 24;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 1;
    if (megabytes < 1)
        megabytes = 1;
    const char *segmenter;
    int friso = simstore_cjk_segmenter(&segmenter) == SIMSTORE_CJK_FRISO;

    corpus all, latin, cjk;
    make_corpus(&all, megabytes << 20);
    subset(&all, 0, &latin);
    subset(&all, 1, &cjk);
    printf("bench_fingerprint: corpus %zu documents, %.1f MB (mean %.1f KB; %zu CJK documents, "
           "%.1f MB), seed %llu\n",
           all.docs, (double)all.len / 1e6, (double)all.len / 1024.0 / (double)all.docs,
           all.cjk_docs, (double)cjk.len / 1e6,
           (unsigned long long)(argc > 2 ? strtoull(argv[2], NULL, 10) : 1));
    printf("CJK segmenter: %s\n", segmenter);
    printf("one core; MB/s of text (10^6 bytes), best of several passes\n\n");

    struct {
        const char *name;
        const corpus *c;
    } sets[] = {
        {"mixed corpus", &all}, {"Latin documents only", &latin}, {"CJK documents only", &cjk}};
    for (size_t s = 0; s < 3; s++) {
        const corpus *c = sets[s].c;
        job hash = {c, NULL, NULL, 1, 0, 0};
        double xxh = measure(&hash);
        double tok = bench_tokenize(c, friso);
        printf("%s (%.1f MB):\n", sets[s].name, (double)c->len / 1e6);
        printf("  %-44s %8.1f MB/s\n", "baseline: XXH3-64 of each document", xxh);
        printf("  %-44s %8.1f MB/s\n",
               friso ? "baseline: tokenize only (friso)" : "baseline: tokenize only (bigrams)",
               tok);
        if (s == 2 && friso)
            printf("  %-44s %8.1f MB/s\n", "baseline: tokenize only (bigrams)",
                   bench_tokenize(c, 0));
        static const unsigned ws[] = {1, 3};
        static const simstore_weighting weights[] = {SIMSTORE_WEIGHT_TF, SIMSTORE_WEIGHT_LENGTH,
                                                     SIMSTORE_WEIGHT_LOG};
        static const char *const weight_names[] = {"tf", "length", "log"};
        double defaults[3] = {0, 0, 0}; /* w = 3, tf, by version */
        for (unsigned version = 1; version <= 2; version++)
            for (int wi = 0; wi < 2; wi++)
                for (int l = 0; l < (version == 1 ? 2 : 3); l++) {
                    if (l == 2 && ws[wi] == 1)
                        continue;
                    double mbs = bench_fpr(c, version, ws[wi], weights[l], SIMSTORE_CJK_AUTO);
                    if (ws[wi] == 3 && l == 0)
                        defaults[version] = mbs;
                    char label[64];
                    snprintf(label, sizeof label, "fingerprint v%u w=%u %s", version, ws[wi],
                             weight_names[l]);
                    printf("  %-44s %8.1f MB/s  (%.2f x tokenize, %.4f x XXH3)\n", label, mbs,
                           mbs / tok, mbs / xxh);
                }
        printf("  %-44s %8.2f\n", "v2 / v1 (w=3 tf)", defaults[2] / defaults[1]);
        if (s == 2 && friso)
            for (unsigned version = 1; version <= 2; version++) {
                char label[64];
                snprintf(label, sizeof label, "fingerprint v%u w=3 tf --cjk bigram", version);
                printf("  %-44s %8.1f MB/s\n", label,
                       bench_fpr(c, version, 3, SIMSTORE_WEIGHT_TF, SIMSTORE_CJK_BIGRAM));
            }
        printf("\n");
    }
    corpus short_docs;
    shorten(&latin, 300, &short_docs);
    printf("defaults: v2, bigrams, %s sketch, one pass, against v1 with friso (auto), no "
           "sketch\n",
           simstore_sketch_name(SIMSTORE_SKETCH_DEFAULT));
    print_defaults(&all, "defaults, mixed corpus");
    print_defaults(&latin, "defaults, Latin documents");
    print_defaults(&cjk, "defaults, CJK documents");
    print_defaults(&short_docs, "defaults, short Latin documents");
    printf("\n");
    print_sketches(&all, "sketches, mixed corpus");
    print_sketches(&latin, "sketches, Latin documents");
    print_sketches(&short_docs, "sketches, short Latin documents");
    free(short_docs.bytes);
    free(short_docs.offset);
    printf("(sink %016llx: printed so that no measured work can be optimised away)\n",
           (unsigned long long)checksum);
    free(all.bytes);
    free(all.offset);
    free(latin.bytes);
    free(latin.offset);
    free(cjk.bytes);
    free(cjk.offset);
    return 0;
}
