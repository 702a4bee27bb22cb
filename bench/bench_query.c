/* bench_query.c: store query latency and size, beside a brute-force popcount
 * scan measured in the same run.
 *
 * For each N (default 2^20, 2^23, 2^26) it builds a store of N uniform random
 * fingerprints with the automatic design (documents with 9-byte ids up to
 * --docs-up-to, fingerprint-only above), then, in a fresh child process (so
 * the build's memory does not count), opens it read-only, records resident
 * memory, and runs k = 3 queries: half are stored fingerprints with 0..3 bits
 * flipped (hits), half random (misses). It prints build time, p50/p99/mean
 * latency, single- and two-thread throughput, the brute-force scan's time per
 * query over the same fingerprints, and bytes on disk per fingerprint for the
 * tables, for LMDB and for the document file separately (format/store.md,
 * "Document files").
 *
 * Opening: the time of simstore_open (read-only) and the pages of data.mdb
 * it checked, with today's lazy checks and with the walk of the whole file
 * (SIMSTORE_OPEN_FULL_WALK, the open before lazy checks), and the whole
 * process of one CLI query (fork/exec `simstore query STORE --fp HEX`, warm
 * page cache, median of 21; the walk median of 3 at 2^24 documents and
 * beyond) both ways (the second with --full-walk). The CLI is --cli PATH, or `simstore` beside
 * the bench/ folder of this program.
 *
 * Usage: bench_query [--sizes 20,23,26] [--docs-up-to 23] [--queries 200000]
 *                    [--dir DIR] [--k 3] [--block-bytes B] [--tables T] [--keep]
 *                    [--beyond K2] [--cli PATH]
 *
 * Page tables: the child also prints how much of the store's mapped table
 * and document file pages are mapped by 2 MiB entries. simstore's writers
 * write whole aligned 2 MiB pieces, so a kernel whose page cache keeps
 * large folios for the file system (ext4 on Linux 6.16 and later) holds a
 * store just built in 2 MiB folios, one TLB entry for 512 pages; the
 * baseline beside it is the same store copied 64 KiB a write (small folios,
 * 4 KiB entries, as any store on a kernel without large folios), measured
 * with the same queries in the same run.
 *
 * --beyond K2 also measures queries at distance K2 above k on each store
 * (format/design.md, "Beyond k": every table probed at each prefix near the
 * query's), beside a store built for K2 from the same fingerprints. */
#include "simstore.h"
#include "simstore_unstable.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <inttypes.h>
#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static uint64_t *make_fps(unsigned log2n)
{
    size_t n = (size_t)1 << log2n;
    uint64_t *v = malloc(n * sizeof *v);
    uint64_t s = 0xB0BA0000 + log2n;
    for (size_t i = 0; i < n && v; i++)
        v[i] = splitmix(&s);
    return v;
}

static uint64_t *make_queries(const uint64_t *fps, size_t n, size_t nq, unsigned k)
{
    uint64_t *q = malloc(nq * sizeof *q);
    uint64_t s = 0xC0FFEE;
    for (size_t i = 0; i < nq; i++) {
        if (i & 1) {
            q[i] = splitmix(&s);
        } else {
            uint64_t x = fps[splitmix(&s) % n];
            unsigned flips = (unsigned)(splitmix(&s) % (k + 1));
            for (unsigned f = 0; f < flips; f++)
                x ^= 1ULL << (splitmix(&s) % 64);
            q[i] = x;
        }
    }
    return q;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct thread_arg {
    simstore *s;
    const uint64_t *q;
    size_t nq;
    unsigned k;
    uint64_t matches;
} thread_arg;

static void *query_thread(void *p)
{
    thread_arg *a = (thread_arg *)p;
    simstore_query *q;
    if (simstore_query_new(a->s, 0, &q))
        return NULL;
    for (size_t i = 0; i < a->nq; i++) {
        const simstore_match *m;
        size_t n;
        if (simstore_query_fp(q, a->q[i], a->k, &m, &n) == 0)
            a->matches += n;
    }
    simstore_query_free(q);
    return NULL;
}

/* Of this process's mappings of files under `dir` (the store's tables and
 * document file): resident KiB, and how many of them are mapped by 2 MiB
 * page-table entries (FilePmdMapped: the page cache holds those files in
 * 2 MiB folios, which simstore's writers allow by writing whole aligned
 * 2 MiB pieces; it depends on the kernel and its file system). */
static void huge_mapped(const char *dir, long *rss, long *pmd)
{
    *rss = *pmd = 0;
    char full[PATH_MAX];
    if (!realpath(dir, full))
        return;
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[PATH_MAX + 256];
    int mine = 0;
    size_t dl = strlen(full);
    long v;
    unsigned long from, to;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &from, &to) == 2) { /* a mapping's first line */
            char *slash = strchr(line, '/');
            mine = slash && strncmp(slash, full, dl) == 0 && slash[dl] == '/';
            continue;
        }
        if (mine && sscanf(line, "Rss: %ld kB", &v) == 1)
            *rss += v;
        else if (mine && sscanf(line, "FilePmdMapped: %ld kB", &v) == 1)
            *pmd += v;
    }
    if (f)
        fclose(f);
}

/* The child: open, measure, query; prints one line of results. */
static int measure(const char *path, unsigned log2n, size_t nq, unsigned k)
{
    long rss0 = rss_kib();
    simstore *s;
    /* The open before lazy checks: the walk of all of data.mdb (its pages
     * come into the page cache for the lazy open after it too). */
    double t_full = now();
    if (simstore_open(path, SIMSTORE_OPEN_READONLY | SIMSTORE_OPEN_FULL_WALK, &s)) {
        fprintf(stderr, "open %s: %s\n", path, simstore_last_error());
        return 1;
    }
    t_full = now() - t_full;
    uint64_t pages_full = simstore_lmdb_pages_checked(s);
    simstore_close(s);
    double t_lazy = now();
    if (simstore_open(path, SIMSTORE_OPEN_READONLY, &s)) {
        fprintf(stderr, "open %s: %s\n", path, simstore_last_error());
        return 1;
    }
    t_lazy = now() - t_lazy;
    uint64_t pages_lazy = simstore_lmdb_pages_checked(s);
    printf("  open: %.2f ms checking %" PRIu64 " pages of data.mdb (lazy checks); %.2f ms "
           "checking %" PRIu64 " pages (walk of the whole file)\n",
           t_lazy * 1e3, pages_lazy, t_full * 1e3, pages_full);
    simstore_query *q;
    simstore_query_new(s, 0, &q);
    const simstore_match *m;
    size_t n;
    simstore_query_fp(q, 0, k, &m, &n); /* loads the segments */
    long rss1 = rss_kib();
    simstore_stats st;
    simstore_get_stats(s, &st);

    uint64_t *fps = make_fps(log2n);
    uint64_t *qs = make_queries(fps, (size_t)1 << log2n, nq, k);
    free(fps);
    double *lat = malloc(nq * sizeof *lat);
    unsigned char *hit = malloc(nq);
    uint64_t matches = 0;
    /* Warm the page cache and branch predictors on a prefix. */
    for (size_t i = 0; i < nq / 10; i++)
        simstore_query_fp(q, qs[i], k, &m, &n);
    double t0 = now();
    for (size_t i = 0; i < nq; i++) {
        double a = now();
        simstore_query_fp(q, qs[i], k, &m, &n);
        lat[i] = now() - a;
        matches += n;
        hit[i] = n > 0;
    }
    double total = now() - t0;
    long rss2 = rss_kib();
    /* The same queries again: a long-running reader's steady state, every
     * page they read already checked and mapped. */
    double *lat2 = malloc(nq * sizeof *lat2);
    double t_again = now();
    for (size_t i = 0; i < nq; i++) {
        double a = now();
        simstore_query_fp(q, qs[i], k, &m, &n);
        lat2[i] = now() - a;
    }
    t_again = now() - t_again;
    simstore_query_free(q);
    /* The two kinds apart: a query with matches also reads their documents. */
    double *part[2];
    size_t plen[2] = {0, 0};
    part[0] = malloc(nq * sizeof *lat);
    part[1] = malloc(nq * sizeof *lat);
    for (size_t i = 0; i < nq; i++)
        part[hit[i]][plen[hit[i]]++] = lat[i];
    free(hit);
    qsort(lat, nq, sizeof *lat, cmp_double);
    qsort(lat2, nq, sizeof *lat2, cmp_double);

    thread_arg ta[2];
    pthread_t tid[2];
    double t1 = now();
    for (int i = 0; i < 2; i++) {
        ta[i] = (thread_arg){s, qs + (size_t)i * (nq / 2), nq / 2, k, 0};
        pthread_create(&tid[i], NULL, query_thread, &ta[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    double total2 = now() - t1;

    printf("  query k=%u: p50 %.2f us, p99 %.2f us, mean %.2f us; %.0f q/s on 1 thread, "
           "%.0f q/s on 2 threads; %.3f matches/query\n",
           k, lat[nq / 2] * 1e6, lat[nq * 99 / 100] * 1e6, total / (double)nq * 1e6,
           (double)nq / total, (double)(nq / 2 * 2) / total2, (double)matches / (double)nq);
    for (int h = 0; h < 2; h++) {
        qsort(part[h], plen[h], sizeof *lat, cmp_double);
        if (plen[h])
            printf("    %zu queries %s: p50 %.2f us, p99 %.2f us\n", plen[h],
                   h ? "with matches" : "without", part[h][plen[h] / 2] * 1e6,
                   part[h][plen[h] * 99 / 100] * 1e6);
        free(part[h]);
    }
    printf("  the same queries again (steady state: their pages checked and mapped): p50 %.2f us, "
           "p99 %.2f us, mean %.2f us\n",
           lat2[nq / 2] * 1e6, lat2[nq * 99 / 100] * 1e6, t_again / (double)nq * 1e6);
    free(lat2);
    printf("  memory: RSS %.2f MiB after open (+%.2f MiB for the store; block keys %.2f MiB), "
           "%.2f MiB after %zu queries (mapped table and data.mdb pages they touched "
           "included)\n",
           (double)rss1 / 1024, (double)(rss1 - rss0) / 1024,
           (double)st.block_key_bytes / (1 << 20), (double)rss2 / 1024, nq + nq / 10);
    long map_rss, map_pmd;
    huge_mapped(path, &map_rss, &map_pmd);
    printf("  page tables: %.1f of the %.1f MiB of table and document file pages mapped are "
           "mapped in 2 MiB pages\n",
           (double)map_pmd / 1024, (double)map_rss / 1024);
    printf("  median query %.2f us; data.mdb pages checked after all queries: %" PRIu64 "\n",
           lat[nq / 2] * 1e6, simstore_lmdb_pages_checked(s));
    free(lat);
    free(qs);
    simstore_close(s);
    return 0;
}

/* Brute force: popcount over the whole array, a few queries. */
static __attribute__((noinline)) double brute_force_us(const uint64_t *fps, size_t n,
                                                       const uint64_t *qs, size_t nq, unsigned k,
                                                       uint64_t *found)
{
    double t0 = now();
    volatile uint64_t hits = 0;
    for (size_t i = 0; i < nq; i++) {
        uint64_t q = qs[i];
        uint64_t h = 0;
        for (size_t j = 0; j < n; j++)
            h += (unsigned)__builtin_popcountll(fps[j] ^ q) <= k;
        hits += h;
    }
    *found = hits;
    return (now() - t0) / (double)nq * 1e6;
}

static unsigned block_bytes = 0; /* 0: the store's default */
static unsigned tables = 0;      /* 0: the automatic design */

static int build(const char *path, const uint64_t *fps, size_t n, int docs, unsigned k,
                 double *seconds)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    if (block_bytes)
        o.block_bytes = block_bytes;
    o.tables = tables;
    o.fingerprint_only = !docs;
    o.memory_bytes = (uint64_t)4 << 30;
    simstore_builder *b;
    double t0 = now();
    if (simstore_build_begin(path, &o, &b))
        return -1;
    char id[24];
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (docs) {
            snprintf(id, sizeof id, "d%08zx", i);
            simstore_doc d = {id, 9, fps[i], NULL, 0, i};
            rc = simstore_builder_add(b, &d);
        } else {
            rc = simstore_builder_add_fp(b, fps[i]);
        }
        if (rc) {
            simstore_builder_abort(b);
            return -1;
        }
    }
    int rc = simstore_builder_finish(b);
    *seconds = now() - t0;
    return rc;
}

static const char *cli_path;

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One whole CLI query process, output to /dev/null: seconds, or -1. */
static double cli_query_once(const char *store, uint64_t fp, int full_walk)
{
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, fp);
    char cmd_query[] = "query", opt_fp[] = "--fp", opt_walk[] = "--full-walk";
    char *argv[] = {
        (char *)cli_path, cmd_query, (char *)store, opt_fp, hex, full_walk ? opt_walk : NULL, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    double t0 = now();
    extern char **environ;
    int rc = posix_spawn(&pid, cli_path, &fa, NULL, argv, environ);
    int status = 1;
    if (rc == 0)
        waitpid(pid, &status, 0);
    double t = now() - t0;
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? t : -1;
}

/* A copy of store directory `from` at `to`, every file written 64 KiB at a
 * time: the page cache then holds the copy in small folios, mapped 4 KiB a
 * page-table entry (as simstore's writers left their files before they
 * wrote whole aligned 2 MiB pieces, and as any kernel without large folios
 * for the file system does), the baseline for the 2 MiB mappings. */
static int copy_small(const char *from, const char *to)
{
    DIR *d = opendir(from);
    if (!d || mkdir(to, 0755) != 0) {
        if (d)
            closedir(d);
        return -1;
    }
    static char buf[64 << 10];
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char a[PATH_MAX], b[PATH_MAX];
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ssize_t got;
        while (in >= 0 && out >= 0 && (got = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)got) != got)
                rc = -1;
        if (in < 0 || out < 0 || fsync(out) != 0) /* no writeback during the measure */
            rc = -1;
        if (in >= 0)
            close(in);
        if (out >= 0)
            close(out);
    }
    closedir(d);
    return rc;
}

/* Median of `runs` (at most 21) CLI queries, after 3 (1 when runs < 21)
 * to warm the page cache. */
static double cli_query_ms(const char *store, const uint64_t *fps, size_t n, int full_walk,
                           int runs)
{
    double t[21];
    if (runs > 21)
        runs = 21;
    for (int i = 0; i < (runs < 21 ? 1 : 3); i++)
        if (cli_query_once(store, fps[(size_t)i * 7919 % n], full_walk) < 0)
            return -1;
    for (int i = 0; i < runs; i++)
        if ((t[i] = cli_query_once(store, fps[(size_t)(i + 3) * 7919 % n], full_walk)) < 0)
            return -1;
    qsort(t, (size_t)runs, sizeof *t, cmp_dbl);
    return t[runs / 2] * 1e3;
}

int main(int argc, char **argv)
{
    unsigned sizes[8] = {20, 23, 26};
    unsigned nsizes = 3, docs_up_to = 23, k = 3, beyond = 0;
    size_t nq = 200000;
    const char *dir = "bench-query.tmp";
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--measure") == 0 && i + 3 < argc)
            return measure(argv[i + 1], (unsigned)atoi(argv[i + 2]), (size_t)atol(argv[i + 3]),
                           i + 4 < argc ? (unsigned)atoi(argv[i + 4]) : 3);
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char *p = strtok(argv[++i], ","); p && nsizes < 8; p = strtok(NULL, ","))
                sizes[nsizes++] = (unsigned)atoi(p);
        } else if (strcmp(argv[i], "--docs-up-to") == 0 && i + 1 < argc) {
            docs_up_to = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--queries") == 0 && i + 1 < argc) {
            nq = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--k") == 0 && i + 1 < argc) {
            k = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--block-bytes") == 0 && i + 1 < argc) {
            block_bytes = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--tables") == 0 && i + 1 < argc) {
            tables = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--cli") == 0 && i + 1 < argc) {
            cli_path = argv[++i];
        } else if (strcmp(argv[i], "--beyond") == 0 && i + 1 < argc) {
            beyond = (unsigned)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--keep") == 0) {
            keep = 1;
        } else {
            fprintf(stderr,
                    "usage: %s [--sizes 20,23,26] [--docs-up-to 23] [--queries N] "
                    "[--dir DIR] [--k K] [--block-bytes B] [--tables T] [--beyond K2] [--keep] "
                    "[--cli PATH]\n",
                    argv[0]);
            return 2;
        }
    }
    static char cli_default[600];
    if (!cli_path) {
        /* `simstore` in the build directory, above bench/. */
        char self[512];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len > 0) {
            self[len] = '\0';
            char *slash = strrchr(self, '/');
            if (slash) {
                *slash = '\0';
                snprintf(cli_default, sizeof cli_default, "%s/../simstore", self);
                if (access(cli_default, X_OK) == 0)
                    cli_path = cli_default;
            }
        }
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(cmd) != 0)
        return 1;
    printf("bench_query: k=%u, %zu queries per size (half hits: stored fingerprints with "
           "0..%u bits flipped; half random)\n",
           k, nq, k);
    for (unsigned si = 0; si < nsizes; si++) {
        unsigned log2n = sizes[si];
        size_t n = (size_t)1 << log2n;
        int docs = log2n <= docs_up_to;
        uint64_t *fps = make_fps(log2n);
        char path[512];
        snprintf(path, sizeof path, "%s/n%u", dir, log2n);
        double secs;
        if (build(path, fps, n, docs, k, &secs)) {
            fprintf(stderr, "build: %s\n", simstore_last_error());
            return 1;
        }
        simstore *s;
        simstore_stats st;
        simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
        simstore_get_stats(s, &st);
        simstore_close(s);
        printf("N=2^%u (%zu) %s, %u-byte blocks: %s\n", log2n, n,
               docs ? "documents" : "fingerprint-only", st.block_bytes, st.design);
        printf("  build: %.1f s (%.2f M fingerprints/s)\n", secs, (double)n / secs / 1e6);
        printf("  disk: tables %.2f bytes/fp (%.2f bits/fp per table), LMDB %.2f bytes/fp, "
               "document file %.2f bytes/fp; total %.2f\n",
               (double)st.table_bytes / (double)n,
               (double)st.table_bytes * 8 / (double)n / st.tables,
               docs ? (double)st.lmdb_bytes / (double)n : 0.0,
               (double)st.document_file_bytes / (double)n,
               (double)(st.table_bytes + (docs ? st.lmdb_bytes : 0) + st.document_file_bytes) /
                   (double)n);
        fflush(stdout);
        char self[64];
        snprintf(self, sizeof self, "/proc/%d/exe", getpid());
        snprintf(cmd, sizeof cmd, "'%s' --measure '%s' %u %zu %u", self, path, log2n, nq, k);
        if (system(cmd) != 0)
            return 1;
        if (docs) {
            /* The same files mapped 4 KiB a page-table entry. */
            char small[600];
            snprintf(small, sizeof small, "%s-4k", path);
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", small);
            if (system(cmd) != 0 || copy_small(path, small) != 0) {
                fprintf(stderr, "copy %s to %s failed\n", path, small);
                return 1;
            }
            printf("  baseline: the same store copied 64 KiB a write (its page cache in small "
                   "folios, pages mapped 4 KiB each), the same queries:\n");
            fflush(stdout);
            snprintf(cmd, sizeof cmd,
                     "'%s' --measure '%s' %u %zu %u | grep -E 'query k=|queries "
                     "with|page tables|steady'",
                     self, small, log2n, nq, k);
            if (system(cmd) != 0)
                return 1;
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", small);
            if (system(cmd) != 0)
                return 1;
        }
        if (cli_path) {
            /* The walk takes seconds at 2^24 and beyond: a median of 3. */
            int walk_runs = docs && log2n >= 24 ? 3 : 21;
            double lazy = cli_query_ms(path, fps, n, 0, 21);
            double full = cli_query_ms(path, fps, n, 1, walk_runs);
            printf("  CLI query, whole process (warm): %.2f ms (median of 21); %.2f ms with the "
                   "walk of data.mdb at open (query --full-walk, median of %d)\n",
                   lazy, full, walk_runs);
        }
        size_t bq = log2n >= 26 ? 4 : 16;
        uint64_t *qs = make_queries(fps, n, bq, k);
        uint64_t found;
        double bf = brute_force_us(fps, n, qs, bq, k, &found);
        printf("  brute force popcount scan: %.1f us/query (%.2f G fingerprints/s, %" PRIu64
               " matches in %zu queries)\n",
               bf, (double)n / bf / 1e3, found, bq);
        free(qs);
        if (beyond > k) {
            /* Queries at K2 above the store's k (each table probed at every
             * prefix near the query's), beside a store built for K2. */
            size_t nq2 = nq / 10 ? nq / 10 : 1;
            printf("  beyond k: queries at k=%u on this store (built for k=%u):\n", beyond, k);
            fflush(stdout);
            snprintf(cmd, sizeof cmd, "'%s' --measure '%s' %u %zu %u", self, path, log2n, nq2,
                     beyond);
            if (system(cmd) != 0)
                return 1;
            char path2[600];
            snprintf(path2, sizeof path2, "%s-k%u", path, beyond);
            if (build(path2, fps, n, docs, beyond, &secs)) {
                fprintf(stderr, "build: %s\n", simstore_last_error());
                return 1;
            }
            simstore_open(path2, SIMSTORE_OPEN_READONLY, &s);
            simstore_get_stats(s, &st);
            simstore_close(s);
            printf("  baseline: a store built for k=%u: %s; tables %.2f bytes/fp; build %.1f s\n",
                   beyond, st.design, (double)st.table_bytes / (double)n, secs);
            fflush(stdout);
            snprintf(cmd, sizeof cmd, "'%s' --measure '%s' %u %zu %u", self, path2, log2n, nq2,
                     beyond);
            if (system(cmd) != 0)
                return 1;
            qs = make_queries(fps, n, bq, beyond);
            bf = brute_force_us(fps, n, qs, bq, beyond, &found);
            printf("  brute force popcount scan at k=%u: %.1f us/query\n", beyond, bf);
            free(qs);
            if (!keep) {
                snprintf(cmd, sizeof cmd, "rm -rf '%s'", path2);
                if (system(cmd) != 0)
                    return 1;
            }
        }
        free(fps);
        if (!keep) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
            if (system(cmd) != 0)
                return 1;
        }
        fflush(stdout);
    }
    return 0;
}
