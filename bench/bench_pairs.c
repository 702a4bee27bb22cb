/* bench_pairs.c: `pairs` and `clusters` of a store of N documents (uniform
 * fingerprints plus planted groups of near-duplicates), beside two
 * baselines measured in the same run: all pairs compared on a 2^16 sample
 * (scaled to N by (N / 2^16)^2) and one query per stored fingerprint
 * (2^16 of them timed, scaled to N).
 * Usage: bench_pairs [N (2^26)] [K (3)] [STORE_DIR (a temporary one)]
 *        [THREADS (2)] [MEMORY_MIB (1024)] [CLUSTERS (memory)] [SCAN_K (K)]
 * SCAN_K: the distance pairs, clusters and both baselines use; above the
 * store's K, the join of its distinct fingerprints under a design for
 * SCAN_K (README, "Distances above the store's k").
 * CLUSTERS: `memory` (the path simstore_clusters chooses), `spill` (the
 * spilling path of components forced through its test hook), or `both`
 * (the chosen path, then the spilling one, their outputs compared). */
#include "scan/clusters.h" /* sims_scan_clusters_force_spill: a measurement hook */
#include "simstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Document i's fingerprint: every 64th starts a group of 4 near-duplicates
 * (1 to 3 bits from the first). */
static uint64_t *make_fps(size_t n)
{
    uint64_t *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) {
        size_t g = i % 64;
        if (g >= 1 && g <= 3) {
            f[i] = f[i - g];
            for (unsigned b = 0, flips = 1 + (unsigned)(rng() % 3); b < flips; b++)
                f[i] ^= UINT64_C(1) << (rng() % 64);
        } else {
            f[i] = rng();
        }
    }
    return f;
}

static int build(const char *path, const uint64_t *f, size_t n, unsigned k, unsigned threads,
                 uint64_t memory)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.threads = threads;
    o.memory_bytes = memory;
    simstore_builder *b;
    int rc = simstore_build_begin(path, &o, &b);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char id[24];
        int len = snprintf(id, sizeof id, "d%010zu", i);
        simstore_doc d = {id, (size_t)len, f[i], NULL, 0, i};
        rc = simstore_builder_add(b, &d);
    }
    return rc ? rc : simstore_builder_finish(b);
}

static int count_pair(void *ctx, const simstore_pair *p)
{
    (void)p;
    ++*(uint64_t *)ctx;
    return 0;
}

/* Members counted and hashed (FNV-1a over every field), to compare paths. */
typedef struct member_hash {
    uint64_t count, hash;
} member_hash;

static void hash_bytes(member_hash *h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h->hash = (h->hash ^ ((const unsigned char *)p)[i]) * 0x100000001B3ULL;
}

static int count_member(void *ctx, const simstore_cluster_member *m)
{
    member_hash *h = (member_hash *)ctx;
    h->count++;
    hash_bytes(h, m->cluster, m->cluster_len);
    hash_bytes(h, "\t", 1);
    hash_bytes(h, m->id, m->id_len);
    unsigned v[4] = {m->flags, m->cluster_flags, (unsigned)m->kept, m->distance};
    uint64_t fps[2] = {m->fp, m->cluster_fp};
    hash_bytes(h, v, sizeof v);
    hash_bytes(h, fps, sizeof fps);
    return 0;
}

/* One clusters run: seconds, or -1 on failure. */
static double time_clusters(simstore *s, const simstore_cluster_options *co, int spill,
                            member_hash *h, simstore_cluster_summary *sum, scan_spill_stats *stats)
{
    memset(h, 0, sizeof *h);
    h->hash = 0xCBF29CE484222325ULL;
    memset(stats, 0, sizeof *stats);
    sims_scan_clusters_force_spill(spill);
    sims_scan_clusters_spill_stats(stats);
    double t0 = now();
    int rc = simstore_clusters(s, co, count_member, h, sum);
    double t = now() - t0;
    sims_scan_clusters_force_spill(0);
    sims_scan_clusters_spill_stats(NULL);
    if (rc) {
        fprintf(stderr, "clusters: %s\n", simstore_last_error());
        return -1;
    }
    return t;
}

static void print_clusters(const char *what, double t, const simstore_cluster_summary *sum,
                           const scan_spill_stats *st)
{
    printf("%s %8.1f s  (%llu documents in %llu clusters, %llu to drop, largest %llu)", what, t,
           (unsigned long long)sum->documents, (unsigned long long)sum->clusters,
           (unsigned long long)sum->dropped, (unsigned long long)sum->largest);
    if (st->runs)
        printf("; spilled: %llu edges, %llu rounds, %llu sorted runs on disk",
               (unsigned long long)st->edges, (unsigned long long)st->rounds,
               (unsigned long long)st->spilled_runs);
    printf("\n");
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtod(argv[1], NULL) : (size_t)1 << 26;
    unsigned k = argc > 2 ? (unsigned)atoi(argv[2]) : 3;
    char tmpl[] = "/tmp/bench_pairs-XXXXXX";
    const char *dir = argc > 3 ? argv[3] : mkdtemp(tmpl);
    unsigned threads = argc > 4 ? (unsigned)atoi(argv[4]) : 2;
    uint64_t memory = (argc > 5 ? strtoull(argv[5], NULL, 10) : 1024) << 20;
    const char *mode = argc > 6 ? argv[6] : "memory";
    unsigned scan_k = argc > 7 ? (unsigned)atoi(argv[7]) : k;
    if (strcmp(mode, "memory") != 0 && strcmp(mode, "spill") != 0 && strcmp(mode, "both") != 0) {
        fprintf(stderr, "CLUSTERS: memory, spill or both\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/store", dir);
    uint64_t *f = make_fps(n);
    simstore *s = NULL;
    if (simstore_open(path, SIMSTORE_OPEN_READONLY, &s) != 0) {
        double t0 = now();
        if (build(path, f, n, k, threads, memory) != 0) {
            fprintf(stderr, "build: %s\n", simstore_last_error());
            return 1;
        }
        printf("built %zu documents in %.1f s\n", n, now() - t0);
        if (simstore_open(path, SIMSTORE_OPEN_READONLY, &s) != 0) {
            fprintf(stderr, "open: %s\n", simstore_last_error());
            return 1;
        }
    }
    simstore_scan_options so;
    simstore_scan_options_init(&so);
    so.k = scan_k;
    so.threads = threads;
    so.memory_bytes = memory;
    uint64_t pairs = 0;
    double t0 = now();
    int rc = simstore_pairs(s, &so, 0, count_pair, &pairs);
    double t_pairs = now() - t0;
    if (rc) {
        fprintf(stderr, "scan: %s\n", simstore_last_error());
        return 1;
    }
    simstore_cluster_options co;
    simstore_cluster_options_init(&co);
    co.scan = so;
    simstore_cluster_summary sum, spill_sum;
    scan_spill_stats stats, spill_stats;
    member_hash members, spill_members;
    double t_clusters = 0, t_spill = 0;
    if (strcmp(mode, "spill") != 0 &&
        (t_clusters = time_clusters(s, &co, 0, &members, &sum, &stats)) < 0)
        return 1;
    if (strcmp(mode, "memory") != 0 &&
        (t_spill = time_clusters(s, &co, 1, &spill_members, &spill_sum, &spill_stats)) < 0)
        return 1;
    /* Baseline 1: all pairs of a 2^16 sample, scaled by (N / 2^16)^2. */
    size_t m = n < 65536 ? n : 65536;
    uint64_t found = 0;
    t0 = now();
    for (size_t i = 0; i < m; i++)
        for (size_t j = i + 1; j < m; j++)
            found += simstore_distance(f[i], f[j]) <= scan_k;
    double t_brute = (now() - t0) * ((double)n / m) * ((double)n / m);
    /* Baseline 2: one query per stored fingerprint, 2^16 timed, scaled. */
    simstore_query *q;
    simstore_query_new(s, 0, &q);
    uint64_t answers = 0;
    t0 = now();
    for (size_t i = 0; i < m; i++) {
        const simstore_match *mt;
        size_t c;
        simstore_query_fp(q, f[(i * 2654435761u) % n], scan_k, &mt, &c);
        answers += c;
    }
    double t_query = (now() - t0) * ((double)n / m);
    simstore_query_free(q);
    printf("N=%zu k=%u threads=%u memory=%lluMiB", n, k, threads,
           (unsigned long long)(memory >> 20));
    if (scan_k != k)
        printf(" scans at k=%u (above the store's)", scan_k);
    printf("\n");
    printf("pairs:    %8.1f s  (%llu pairs)\n", t_pairs, (unsigned long long)pairs);
    if (strcmp(mode, "spill") != 0)
        print_clusters("clusters:", t_clusters, &sum, &stats);
    if (strcmp(mode, "memory") != 0)
        print_clusters("clusters, spilling path forced:", t_spill, &spill_sum, &spill_stats);
    if (strcmp(mode, "both") == 0) {
        int same = members.count == spill_members.count && members.hash == spill_members.hash &&
                   memcmp(&sum, &spill_sum, sizeof sum) == 0;
        printf("spilling path / chosen path: %.2fx the time, output %s\n", t_spill / t_clusters,
               same ? "identical (hash of every member, summary)" : "DIFFERENT");
        if (!same)
            return 1;
    }
    printf("baseline all pairs (2^16 sample, %llu pairs, scaled to N): %10.1f s  (pairs %.0fx "
           "faster)\n",
           (unsigned long long)found, t_brute, t_brute / t_pairs);
    printf("baseline one query per fingerprint (2^16 timed, 1 thread, scaled to N): %8.1f s  "
           "(pairs %.1fx faster)\n",
           t_query, t_query / t_pairs);
    simstore_close(s);
    free(f);
    (void)answers;
    return 0;
}
