/* bench_bands.c: the cost of the near-duplicate rule's band candidates
 * (format/sketch.md 6.2) on a store of N documents with minhash256
 * sketches: build time and bytes a document, and `pairs` with the bands at
 * the defaults (J 0.9, the store's k 3) and at J 0.8, beside the baseline
 * of the same run, `pairs` at k 3 by distance alone (the scan the issue's
 * target compares with: at most 5x), and the rule without bands (k 7,
 * J 0.9: the default before bands). Documents: uniform fingerprints and
 * sketches, with every 64th starting a group of 4 near-duplicates whose
 * sketches are 0..100 bins from the first's (J about 0.9..1) and whose
 * fingerprints are 1..3 bits away for half of them and anywhere for the
 * others (near-duplicates no distance finds).
 * Usage: bench_bands [N (2^20)] [STORE_DIR (a temporary one)] [THREADS (2)]
 *        [MEMORY_MIB (1024)] */
#include "simstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SK SIMSTORE_SKETCH_MINHASH256
#define SKB 256

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Document i (i in order): its fingerprint and sketch from the previous
 * group head's. */
static void make_doc(size_t i, uint64_t *fp, uint8_t *sk, uint64_t *head_fp, uint8_t *head_sk)
{
    size_t g = i % 64;
    if (g >= 1 && g <= 3) {
        *fp = *head_fp;
        if (g <= 2)
            for (unsigned b = 0, flips = 1 + (unsigned)(rng() % 3); b < flips; b++)
                *fp ^= UINT64_C(1) << (rng() % 64);
        else
            *fp = rng();
        memcpy(sk, head_sk, SKB);
        for (unsigned b = 0, flips = (unsigned)(rng() % 101); b < flips; b++) {
            unsigned bit = (unsigned)(rng() % (SKB * 8));
            sk[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        return;
    }
    *fp = rng();
    for (size_t b = 0; b < SKB; b += 8) {
        uint64_t v = rng();
        memcpy(sk + b, &v, 8);
    }
    if (g == 0) {
        *head_fp = *fp;
        memcpy(head_sk, sk, SKB);
    }
}

static int build(const char *path, size_t n, unsigned threads, uint64_t memory)
{
    simstore_text_options text;
    simstore_text_options_init(&text);
    text.sketch = SK;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.threads = threads;
    o.memory_bytes = memory;
    o.text = &text;
    simstore_builder *b;
    int rc = simstore_build_begin(path, &o, &b);
    uint64_t head_fp = 0;
    uint8_t head_sk[SKB], sk[SKB];
    for (size_t i = 0; i < n && rc == 0; i++) {
        char id[24];
        int len = snprintf(id, sizeof id, "d%010zu", i);
        uint64_t fp;
        make_doc(i, &fp, sk, &head_fp, head_sk);
        simstore_doc d = {id, (size_t)len, fp, NULL, 0, i};
        d.sketch = sk;
        rc = simstore_builder_add(b, &d);
    }
    return rc ? rc : simstore_builder_finish(b);
}

static int count_pair(void *ctx, const simstore_pair *p)
{
    uint64_t *c = (uint64_t *)ctx;
    c[0]++;
    c[1] += p->distance > 7;
    return 0;
}

/* One pairs run: seconds (or -1), the pairs and those beyond 7 bits. */
static double time_pairs(simstore *s, unsigned k, double j, int bands, unsigned threads,
                         uint64_t memory, uint64_t counts[2])
{
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.k = k;
    o.min_similarity = j;
    o.bands = bands;
    o.threads = threads;
    o.memory_bytes = memory;
    counts[0] = counts[1] = 0;
    double t0 = now();
    if (simstore_pairs(s, &o, 0, count_pair, counts) != 0) {
        fprintf(stderr, "pairs: %s\n", simstore_last_error());
        return -1;
    }
    return now() - t0;
}

/* The store's files: tables, document files, data.mdb. */
static uint64_t store_bytes(simstore *s)
{
    simstore_stats st;
    if (simstore_get_stats(s, &st) != 0)
        return 0;
    return st.table_bytes + st.document_file_bytes + st.lmdb_bytes + st.paragraph_table_bytes;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtod(argv[1], NULL) : (size_t)1 << 20;
    char tmpl[] = "/tmp/bench_bands-XXXXXX";
    const char *dir = argc > 2 ? argv[2] : mkdtemp(tmpl);
    unsigned threads = argc > 3 ? (unsigned)atoi(argv[3]) : 2;
    uint64_t memory = (argc > 4 ? strtoull(argv[4], NULL, 10) : 1024) << 20;
    char path[4096];
    snprintf(path, sizeof path, "%s/store", dir);
    simstore *s = NULL;
    if (simstore_open(path, SIMSTORE_OPEN_READONLY, &s) != 0) {
        double t0 = now();
        if (build(path, n, threads, memory) != 0) {
            fprintf(stderr, "build: %s\n", simstore_last_error());
            return 1;
        }
        printf("built %zu documents with minhash256 sketches in %.1f s\n", n, now() - t0);
        if (simstore_open(path, SIMSTORE_OPEN_READONLY, &s) != 0) {
            fprintf(stderr, "open: %s\n", simstore_last_error());
            return 1;
        }
    }
    printf("store: %.1f bytes a document (its files over documents; the sketch alone is 256)\n",
           (double)store_bytes(s) / (double)n);
    static const struct {
        const char *what;
        unsigned k;
        double j;
        int bands;
    } runs[] = {
        {"pairs --k 3 (distance alone: the baseline)", 3, 0, 0},
        {"pairs (defaults: J 0.9, bands, the store's k 3)", SIMSTORE_NEAR_DEFAULT_K,
         SIMSTORE_NEAR_DEFAULT_SIMILARITY, SIMSTORE_NEAR_DEFAULT_BANDS},
        {"pairs --min-similarity 0.8 (bands, k 3)", SIMSTORE_NEAR_DEFAULT_K, 0.8,
         SIMSTORE_NEAR_DEFAULT_BANDS},
        {"pairs --bands off (k 7, J 0.9: before bands)", SIMSTORE_NEAR_DEFAULT_K,
         SIMSTORE_NEAR_DEFAULT_SIMILARITY, 0},
    };
    double base = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        uint64_t c[2];
        double t = time_pairs(s, runs[i].k, runs[i].j, runs[i].bands, threads, memory, c);
        if (t < 0)
            return 1;
        if (i == 0)
            base = t;
        printf("%-48s %8.2f s  %5.2fx baseline  %llu pairs, %llu beyond 7 bits\n", runs[i].what, t,
               base > 0 ? t / base : 0, (unsigned long long)c[0], (unsigned long long)c[1]);
        fflush(stdout);
    }
    simstore_close(s);
    return 0;
}
