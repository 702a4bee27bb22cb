/* bench_batch.c: batch queries (simstore_query_batch) beside the one-by-one
 * path (simstore_query_fp per query) in the same run, on the same store and
 * queries.
 *
 * It builds (or reuses, when --store names an existing store) a
 * fingerprint-only store of 2^LOG2N uniform random fingerprints with the
 * automatic design for k, and answers Q queries (half stored fingerprints
 * with 0..k bits flipped, half random): one by one on 1 and on T threads,
 * then in one batch on 1 and T threads with each strategy. Before timing,
 * one untimed batch pass brings the tables into the page cache, so both
 * paths read warm files. Each line gives queries/s, us/query, the speedup
 * over one by one on 1 thread and on T threads, and the total number of
 * matches (equal for every path).
 *
 * Usage: bench_batch [--log2n 26] [--queries 2^20 count] [--k 3] [--threads 2]
 *                    [--store PATH (kept)] [--dir DIR] [--docs]
 *                    [--write-queries FILE (hex16<TAB>id lines, for the CLI)] */
#include "simstore.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The i-th stored fingerprint (regenerated, not kept: 2^28 of them are 2 GiB). */
static uint64_t stored_fp(unsigned log2n, size_t i)
{
    uint64_t s = (0xB0BA0000ULL + log2n) ^ ((uint64_t)i * 0xD1B54A32D192ED03ULL);
    return splitmix(&s);
}

static int build_store(const char *path, unsigned log2n, unsigned k, unsigned threads, int docs)
{
    size_t n = (size_t)1 << log2n;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.fingerprint_only = !docs;
    o.threads = threads;
    o.memory_bytes = (uint64_t)4 << 30;
    simstore_builder *b;
    double t0 = now();
    if (simstore_build_begin(path, &o, &b)) {
        fprintf(stderr, "build %s: %s\n", path, simstore_last_error());
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (docs) {
            char id[24];
            int len = snprintf(id, sizeof id, "d%zu", i);
            simstore_doc d = {id, (size_t)len, stored_fp(log2n, i), NULL, 0, i};
            rc = simstore_builder_add(b, &d);
        } else {
            rc = simstore_builder_add_fp(b, stored_fp(log2n, i));
        }
        if (rc) {
            fprintf(stderr, "build: %s\n", simstore_last_error());
            simstore_builder_abort(b);
            return 1;
        }
    }
    if (simstore_builder_finish(b)) {
        fprintf(stderr, "build: %s\n", simstore_last_error());
        return 1;
    }
    printf("built 2^%u %s in %.1f s\n", log2n, docs ? "documents" : "fingerprints", now() - t0);
    return 0;
}

static uint64_t *make_queries(unsigned log2n, size_t nq, unsigned k)
{
    uint64_t *q = malloc(nq * sizeof *q);
    uint64_t s = 0xC0FFEE;
    size_t n = (size_t)1 << log2n;
    for (size_t i = 0; q && i < nq; i++) {
        if (i & 1) {
            q[i] = splitmix(&s);
        } else {
            uint64_t x = stored_fp(log2n, splitmix(&s) % n);
            unsigned flips = (unsigned)(splitmix(&s) % (k + 1));
            for (unsigned f = 0; f < flips; f++)
                x ^= 1ULL << (splitmix(&s) % 64);
            q[i] = x;
        }
    }
    return q;
}

typedef struct one_arg {
    simstore *s;
    const uint64_t *q;
    size_t nq;
    unsigned k;
    uint64_t matches;
    int rc;
} one_arg;

static void *one_by_one_thread(void *p)
{
    one_arg *a = (one_arg *)p;
    simstore_query *q;
    a->rc = simstore_query_new(a->s, 0, &q);
    for (size_t i = 0; a->rc == 0 && i < a->nq; i++) {
        const simstore_match *m;
        size_t n;
        a->rc = simstore_query_fp(q, a->q[i], a->k, &m, &n);
        a->matches += n;
    }
    simstore_query_free(q);
    return NULL;
}

/* One by one on `threads` threads, each a contiguous share of the queries. */
static double one_by_one(simstore *s, const uint64_t *q, size_t nq, unsigned k, unsigned threads,
                         uint64_t *matches)
{
    pthread_t tid[64];
    one_arg args[64];
    double t0 = now();
    for (unsigned i = 0; i < threads; i++) {
        args[i] =
            (one_arg){s, q + nq * i / threads, nq * (i + 1) / threads - nq * i / threads, k, 0, 0};
        pthread_create(&tid[i], NULL, one_by_one_thread, &args[i]);
    }
    *matches = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        if (args[i].rc)
            fprintf(stderr, "query: %s\n", simstore_strerror(args[i].rc));
        *matches += args[i].matches;
    }
    return now() - t0;
}

static int count_matches(void *ctx, size_t index, uint64_t fp, const simstore_match *m,
                         size_t count)
{
    (void)index;
    (void)fp;
    (void)m;
    *(uint64_t *)ctx += count;
    return 0;
}

static double batch(simstore *s, const uint64_t *q, size_t nq, unsigned k, unsigned threads,
                    simstore_batch_strategy strategy, uint64_t *matches)
{
    simstore_batch_options o;
    simstore_batch_options_init(&o);
    o.threads = threads;
    o.strategy = strategy;
    o.memory_bytes = (uint64_t)1 << 30;
    *matches = 0;
    double t0 = now();
    if (simstore_query_batch(s, q, nq, k, &o, count_matches, matches))
        fprintf(stderr, "batch: %s\n", simstore_last_error());
    return now() - t0;
}

static void line(const char *what, double secs, size_t nq, double base1, double baset,
                 unsigned threads, uint64_t matches)
{
    printf("%-34s %10.0f queries/s %7.3f us/query  %5.2fx one-by-one(1t)  %5.2fx "
           "one-by-one(%ut)  matches %" PRIu64 "\n",
           what, (double)nq / secs, secs * 1e6 / (double)nq, base1 / secs, baset / secs, threads,
           matches);
}

int main(int argc, char **argv)
{
    unsigned log2n = 26, k = 3, threads = 2;
    size_t nq = (size_t)1 << 20;
    const char *store = NULL, *dir = "/tmp", *write_queries = NULL;
    int docs = 0, batch_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--log2n") == 0 && i + 1 < argc)
            log2n = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--queries") == 0 && i + 1 < argc)
            nq = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--k") == 0 && i + 1 < argc)
            k = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc)
            store = argv[++i];
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--write-queries") == 0 && i + 1 < argc)
            write_queries = argv[++i];
        else if (strcmp(argv[i], "--batch-only") == 0)
            batch_only = 1; /* for profiling: no one-by-one baseline */
        else if (strcmp(argv[i], "--docs") == 0)
            docs = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--log2n 26] [--queries N] [--k 3] [--threads 2] "
                    "[--store PATH] [--dir DIR] [--docs]\n",
                    argv[0]);
            return 2;
        }
    }
    if (threads < 1 || threads > 64 || nq == 0)
        return 2;
    char made[4096];
    struct stat st;
    if (!store) {
        snprintf(made, sizeof made, "%s/bench_batch_%u_%d.store", dir, log2n, (int)getpid());
        store = made;
    }
    if (stat(store, &st) != 0 && build_store(store, log2n, k, threads, docs))
        return 1;
    simstore *s;
    if (simstore_open(store, SIMSTORE_OPEN_READONLY, &s)) {
        fprintf(stderr, "open %s: %s\n", store, simstore_last_error());
        return 1;
    }
    simstore_stats sst;
    simstore_get_stats(s, &sst);
    uint64_t *q = make_queries(log2n, nq, k);
    if (write_queries) {
        FILE *f = fopen(write_queries, "w");
        for (size_t i = 0; f && i < nq; i++)
            fprintf(f, "%016" PRIx64 "\tq%zu\n", q[i], i);
        if (!f || fclose(f) != 0) {
            perror(write_queries);
            return 1;
        }
        printf("queries written to %s\n", write_queries);
        return 0;
    }
    printf("store %s: %" PRIu64 " fingerprints, %s; %zu queries at k=%u (half near stored), "
           "%u threads, %ld cores\n",
           store, sst.table_fps, sst.design, nq, k, threads, sysconf(_SC_NPROCESSORS_ONLN));
    uint64_t m;
    char what[64];
    batch(s, q, nq, k, threads, SIMSTORE_BATCH_SCAN, &m); /* warm the page cache */
    if (batch_only) {
        /* Speedups here are over the batch on 1 thread. */
        double b = batch(s, q, nq, k, 1, SIMSTORE_BATCH_AUTO, &m);
        line("batch auto, 1 thread", b, nq, b, b, threads, m);
        double bt = batch(s, q, nq, k, threads, SIMSTORE_BATCH_AUTO, &m);
        snprintf(what, sizeof what, "batch auto, %u threads", threads);
        line(what, bt, nq, b, b, threads, m);
        simstore_close(s);
        free(q);
        return 0;
    }
    uint64_t m1, mt;
    double t1 = one_by_one(s, q, nq, k, 1, &m1);
    double tt = one_by_one(s, q, nq, k, threads, &mt);
    line("one-by-one, 1 thread", t1, nq, t1, tt, threads, m1);
    snprintf(what, sizeof what, "one-by-one, %u threads", threads);
    line(what, tt, nq, t1, tt, threads, mt);
    static const struct {
        simstore_batch_strategy strategy;
        const char *name;
    } ways[] = {{SIMSTORE_BATCH_AUTO, "auto"},
                {SIMSTORE_BATCH_SCAN, "scan"},
                {SIMSTORE_BATCH_PROBE, "probe"}};
    snprintf(what, sizeof what, "batch auto, 1 thread");
    double b1 = batch(s, q, nq, k, 1, SIMSTORE_BATCH_AUTO, &m);
    line(what, b1, nq, t1, tt, threads, m);
    for (int w = 0; w < 3; w++) {
        snprintf(what, sizeof what, "batch %s, %u threads", ways[w].name, threads);
        double bt = batch(s, q, nq, k, threads, ways[w].strategy, &m);
        line(what, bt, nq, t1, tt, threads, m);
    }
    simstore_close(s);
    free(q);
    if (store == made)
        printf("(store kept at %s)\n", store);
    return 0;
}
