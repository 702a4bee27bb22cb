/* bench_serve_baseline.c: the in-process baseline of bench/serve_load.sh: the
 * same queries the load test sends over HTTP, asked of the same store through
 * the public API in this process (simstore_query_fp; simstore_query_text for
 * the texts), and the resident memory of this plain reader, which the
 * server's is compared with.
 *
 * It opens STORE read-only, runs the fingerprints of FPS_FILE (hex16 a line)
 * in turn for --seconds on 1 thread (timing each query), then on 2 threads
 * (throughput only), then the texts of TEXTS_FILE (one a line, when given) on
 * 1 thread, and prints one machine-readable line each:
 *   BASELINE fp threads=1 qps=.. p50_us=.. p99_us=.. p999_us=.. matches_per_query=..
 *   BASELINE fp threads=2 qps=..
 *   BASELINE rss open_kib=.. open_anon_kib=.. after_kib=.. after_anon_kib=..
 *   BASELINE text threads=1 qps=.. p50_us=.. p99_us=.. p999_us=..
 * (RSS after the open and after the fingerprint queries, VmRSS and RssAnon
 * of /proc/self/status, before the texts are read.)
 *
 * Usage: bench_serve_baseline STORE FPS_FILE [TEXTS_FILE] [--k K] [--seconds S] */
#include "simstore.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A field of /proc/self/status in KiB ("VmRSS:", "RssAnon:"), -1 if absent. */
static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t len = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && sscanf(line + len, " %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* Latencies in a log histogram of 1 % steps from 10 ns (constant memory:
 * an array of every latency would count in the reader's RSS). */
#define HIST_BUCKETS 2400
typedef struct histogram {
    uint64_t count[HIST_BUCKETS];
    uint64_t total;
} histogram;

static void hist_add(histogram *h, double seconds)
{
    double b = seconds > 1e-8 ? log(seconds / 1e-8) / log(1.01) : 0;
    size_t i = b < HIST_BUCKETS - 1 ? (size_t)b : HIST_BUCKETS - 1;
    h->count[i]++;
    h->total++;
}

/* The latency at quantile q (0..1) in microseconds: its bucket's middle. */
static double hist_quantile_us(const histogram *h, double q)
{
    uint64_t rank = (uint64_t)(q * (double)h->total), seen = 0;
    for (size_t i = 0; i < HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen > rank)
            return 1e-8 * pow(1.01, (double)i + 0.5) * 1e6;
    }
    return 0;
}

/* Every line of path, without its newline, as NUL-terminated strings in one
 * buffer; *count lines. Empty lines are skipped. */
static char **read_lines(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    char **lines = NULL;
    size_t n = 0, cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    while ((len = getline(&line, &line_cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 1024;
            char **grown = realloc(lines, cap * sizeof *lines);
            if (!grown)
                break;
            lines = grown;
        }
        if (!(lines[n] = strdup(line)))
            break;
        n++;
    }
    free(line);
    fclose(f);
    *count = n;
    return lines;
}

static void free_lines(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

typedef struct run_arg {
    simstore *s;
    const uint64_t *fps;
    size_t nfps, start;
    unsigned k;
    double seconds;
    uint64_t done;
} run_arg;

/* Queries fps in turn from start until the time is up (checked every 256). */
static void *run_fps(void *p)
{
    run_arg *a = p;
    simstore_query *q;
    if (simstore_query_new(a->s, 0, &q))
        return NULL;
    double end = now() + a->seconds;
    size_t i = a->start;
    do {
        for (int j = 0; j < 256; j++, a->done++) {
            const simstore_match *m;
            size_t n;
            simstore_query_fp(q, a->fps[i], a->k, &m, &n);
            i = i + 1 == a->nfps ? 0 : i + 1;
        }
    } while (now() < end);
    simstore_query_free(q);
    return NULL;
}

/* p50, p99, p999 in microseconds. */
static void percentiles(const histogram *h, double out[3])
{
    out[0] = hist_quantile_us(h, 0.5);
    out[1] = hist_quantile_us(h, 0.99);
    out[2] = hist_quantile_us(h, 0.999);
}

int main(int argc, char **argv)
{
    const char *store = NULL, *fps_path = NULL, *texts_path = NULL;
    unsigned k = 3;
    double seconds = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--k") == 0 && i + 1 < argc)
            k = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = strtod(argv[++i], NULL);
        else if (!store)
            store = argv[i];
        else if (!fps_path)
            fps_path = argv[i];
        else if (!texts_path)
            texts_path = argv[i];
        else
            store = NULL, i = argc;
    }
    if (!store || !fps_path || seconds <= 0) {
        fprintf(stderr, "usage: bench_serve_baseline STORE FPS_FILE [TEXTS_FILE] [--k K] "
                        "[--seconds S]\n");
        return 2;
    }
    size_t nfps;
    char **hex = read_lines(fps_path, &nfps);
    if (!hex || nfps == 0) {
        fprintf(stderr, "%s: no fingerprints\n", fps_path);
        return 1;
    }
    uint64_t *fps = malloc(nfps * sizeof *fps);
    for (size_t i = 0; fps && i < nfps; i++)
        fps[i] = strtoull(hex[i], NULL, 16);
    free_lines(hex, nfps);
    if (!fps)
        return 1;

    simstore *s;
    if (simstore_open(store, SIMSTORE_OPEN_READONLY, &s)) {
        fprintf(stderr, "open %s: %s\n", store, simstore_last_error());
        return 1;
    }
    simstore_query *q;
    if (simstore_query_new(s, 0, &q)) {
        fprintf(stderr, "%s: %s\n", store, simstore_last_error());
        return 1;
    }
    const simstore_match *m;
    size_t n;
    simstore_query_fp(q, 0, k, &m, &n); /* loads the segments */
    long rss_open = status_kib("VmRSS:"), anon_open = status_kib("RssAnon:");

    /* 1 thread, each query timed, as many as fit in the time. */
    static histogram lat;
    for (size_t i = 0; i < nfps && i < 10000; i++) /* warm the page cache */
        simstore_query_fp(q, fps[i], k, &m, &n);
    size_t done = 0;
    uint64_t matches = 0;
    double t0 = now(), end = t0 + seconds;
    while (done % 256 != 0 || now() < end) {
        double a = now();
        simstore_query_fp(q, fps[done % nfps], k, &m, &n);
        hist_add(&lat, now() - a);
        done++;
        matches += n;
    }
    double total = now() - t0, p[3];
    percentiles(&lat, p);
    printf("BASELINE fp threads=1 qps=%.0f p50_us=%.2f p99_us=%.2f p999_us=%.2f "
           "matches_per_query=%.3f\n",
           (double)done / total, p[0], p[1], p[2], (double)matches / (double)done);
    fflush(stdout);

    run_arg ra[2];
    pthread_t tid[2];
    double t1 = now();
    for (int i = 0; i < 2; i++) {
        ra[i] = (run_arg){s, fps, nfps, (size_t)i * (nfps / 2), k, seconds, 0};
        pthread_create(&tid[i], NULL, run_fps, &ra[i]);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    double total2 = now() - t1;
    printf("BASELINE fp threads=2 qps=%.0f\n", (double)(ra[0].done + ra[1].done) / total2);
    /* The plain reader's memory: the store open and queried, nothing else
     * of this program's but the query fingerprints (8 bytes each). */
    printf("BASELINE rss open_kib=%ld open_anon_kib=%ld after_kib=%ld after_anon_kib=%ld\n",
           rss_open, anon_open, status_kib("VmRSS:"), status_kib("RssAnon:"));
    fflush(stdout);

    if (texts_path) {
        size_t ntexts;
        char **texts = read_lines(texts_path, &ntexts);
        simstore_text_options text;
        simstore_get_text_options(s, &text);
        simstore_fingerprinter *fpr = NULL;
        if (!texts || ntexts == 0 || simstore_fingerprinter_new(&text, &fpr) ||
            simstore_fingerprinter_set_boilerplate(fpr, simstore_get_boilerplate(s))) {
            fprintf(stderr, "%s: no texts, or no fingerprinter\n", texts_path);
            return 1;
        }
        memset(&lat, 0, sizeof lat);
        done = 0;
        t0 = now();
        end = t0 + seconds;
        while (done % 64 != 0 || now() < end) {
            const char *t = texts[done % ntexts];
            double a = now();
            simstore_query_text(q, fpr, t, strlen(t), k, NULL, &m, &n);
            hist_add(&lat, now() - a);
            done++;
        }
        total = now() - t0;
        percentiles(&lat, p);
        printf("BASELINE text threads=1 qps=%.0f p50_us=%.2f p99_us=%.2f p999_us=%.2f\n",
               (double)done / total, p[0], p[1], p[2]);
        simstore_fingerprinter_free(fpr);
        free_lines(texts, ntexts);
    }
    free(fps);
    simstore_query_free(q);
    simstore_close(s);
    return 0;
}
