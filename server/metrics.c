/* metrics.c: the server's Prometheus metrics (metrics.h): the counters of
 * the requests answered and of the connections closed unanswered, under a
 * lock, and the /metrics text printed from them and the store's stats. */
#include "metrics.h"

#include "cli.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const unsigned metric_statuses[] = {200, 201, 400, 401, 403, 404, 405, 409, 413, 500, 503};
#define STATUS_SLOTS (sizeof metric_statuses / sizeof metric_statuses[0] + 1) /* + other */
static const double latency_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                        0.01,   0.025,   0.05,   0.1,   0.25,   1.0};
#define LATENCY_BUCKETS (sizeof latency_bounds / sizeof latency_bounds[0])

struct serve_metrics {
    pthread_mutex_t lock;
    uint64_t requests[SERVE_ROUTE_COUNT][STATUS_SLOTS];
    uint64_t latency_le[SERVE_ROUTE_COUNT][LATENCY_BUCKETS]; /* cumulative at print */
    uint64_t latency_count[SERVE_ROUTE_COUNT];
    double latency_sum[SERVE_ROUTE_COUNT];
    uint64_t closed[SERVE_CLOSE_REASONS];
};

serve_metrics *serve_metrics_new(void)
{
    serve_metrics *m = calloc(1, sizeof *m);
    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void serve_metrics_free(serve_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m);
}

void serve_metrics_record(serve_metrics *m, serve_route route, unsigned status, double seconds)
{
    if (route >= SERVE_ROUTE_COUNT)
        route = SERVE_ROUTE_OTHER;
    unsigned slot = STATUS_SLOTS - 1;
    for (unsigned i = 0; i < STATUS_SLOTS - 1; i++)
        if (metric_statuses[i] == status)
            slot = i;
    unsigned bucket = 0;
    while (bucket < LATENCY_BUCKETS && seconds > latency_bounds[bucket])
        bucket++;
    pthread_mutex_lock(&m->lock);
    m->requests[route][slot]++;
    if (bucket < LATENCY_BUCKETS)
        m->latency_le[route][bucket]++;
    m->latency_count[route]++;
    m->latency_sum[route] += seconds;
    pthread_mutex_unlock(&m->lock);
}

void serve_metrics_record_closed(serve_metrics *m, serve_close_reason why)
{
    if (why >= SERVE_CLOSE_REASONS)
        return;
    pthread_mutex_lock(&m->lock);
    m->closed[why]++;
    pthread_mutex_unlock(&m->lock);
}

/* ---- The /metrics text ---------------------------------------------------- */

typedef struct text_buf {
    char *p;
    size_t len, cap;
    int failed;
} text_buf;

static void tb_printf(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(text_buf *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        if (cli_grow((void **)&b->p, &b->cap, b->len + (size_t)n + 1, 1, 4096)) {
            b->failed = 1;
            return;
        }
    }
}

int serve_metrics_render(serve_metrics *m, size_t request_memory_bytes, simstore *store,
                         simstore_live *live, char **text, size_t *len)
{
    text_buf b = {0};
    tb_printf(&b, "# HELP simstore_http_requests_total HTTP requests answered, by route and "
                  "status.\n# TYPE simstore_http_requests_total counter\n");
    pthread_mutex_lock(&m->lock);
    for (unsigned rt = 0; rt < SERVE_ROUTE_COUNT; rt++)
        for (unsigned s = 0; s < STATUS_SLOTS; s++) {
            if (!m->requests[rt][s])
                continue;
            char code[8];
            if (s < STATUS_SLOTS - 1)
                snprintf(code, sizeof code, "%u", metric_statuses[s]);
            else
                snprintf(code, sizeof code, "other");
            tb_printf(&b, "simstore_http_requests_total{route=\"%s\",status=\"%s\"} %llu\n",
                      serve_route_name(rt), code, (unsigned long long)m->requests[rt][s]);
        }
    tb_printf(&b, "# HELP simstore_http_request_duration_seconds Time from a request's first "
                  "line to its answer, by route.\n"
                  "# TYPE simstore_http_request_duration_seconds histogram\n");
    for (unsigned rt = 0; rt < SERVE_ROUTE_COUNT; rt++) {
        if (!m->latency_count[rt])
            continue;
        uint64_t cumulative = 0;
        for (unsigned i = 0; i < LATENCY_BUCKETS; i++) {
            cumulative += m->latency_le[rt][i];
            tb_printf(&b,
                      "simstore_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} "
                      "%llu\n",
                      serve_route_name(rt), latency_bounds[i], (unsigned long long)cumulative);
        }
        tb_printf(&b,
                  "simstore_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n"
                  "simstore_http_request_duration_seconds_sum{route=\"%s\"} %.9f\n"
                  "simstore_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                  serve_route_name(rt), (unsigned long long)m->latency_count[rt],
                  serve_route_name(rt), m->latency_sum[rt], serve_route_name(rt),
                  (unsigned long long)m->latency_count[rt]);
    }
    static const char *const close_reasons[SERVE_CLOSE_REASONS] = {"deadline", "room"};
    tb_printf(&b, "# HELP simstore_http_connections_closed_total Connections the server closed "
                  "before their request was answered: past their deadline, or to make room for "
                  "new clients.\n# TYPE simstore_http_connections_closed_total counter\n");
    for (unsigned i = 0; i < SERVE_CLOSE_REASONS; i++)
        tb_printf(&b, "simstore_http_connections_closed_total{reason=\"%s\"} %llu\n",
                  close_reasons[i], (unsigned long long)m->closed[i]);
    pthread_mutex_unlock(&m->lock);
    simstore_stats st;
    tb_printf(&b,
              "# HELP simstore_request_memory_bytes Bytes the requests in flight hold in their "
              "bodies and parsed JSON.\n# TYPE simstore_request_memory_bytes gauge\n"
              "simstore_request_memory_bytes %llu\n",
              (unsigned long long)request_memory_bytes);
    if (simstore_get_stats(store, &st) == SIMSTORE_OK) {
        tb_printf(&b,
                  "# HELP simstore_documents Documents in the store's committed state.\n"
                  "# TYPE simstore_documents gauge\nsimstore_documents %llu\n"
                  "# HELP simstore_segments Segments of the store.\n"
                  "# TYPE simstore_segments gauge\nsimstore_segments %llu\n",
                  (unsigned long long)st.documents, (unsigned long long)st.segments);
    }
    if (live) {
        simstore_live_stats ls;
        simstore_live_get_stats(live, &ls);
        tb_printf(&b,
                  "# HELP simstore_memtable_documents Inserted documents not yet flushed.\n"
                  "# TYPE simstore_memtable_documents gauge\nsimstore_memtable_documents %llu\n"
                  "# HELP simstore_memtable_bytes Bytes the in-memory tables hold.\n"
                  "# TYPE simstore_memtable_bytes gauge\nsimstore_memtable_bytes %llu\n"
                  "# HELP simstore_wal_bytes The write-ahead log's size.\n"
                  "# TYPE simstore_wal_bytes gauge\nsimstore_wal_bytes %llu\n"
                  "# HELP simstore_wal_syncs_total Group fsyncs of the log since start.\n"
                  "# TYPE simstore_wal_syncs_total counter\nsimstore_wal_syncs_total %llu\n"
                  "# HELP simstore_flushes_total Flushes committed since start.\n"
                  "# TYPE simstore_flushes_total counter\nsimstore_flushes_total %llu\n"
                  "# HELP simstore_compactions_total Compactions committed since start.\n"
                  "# TYPE simstore_compactions_total counter\nsimstore_compactions_total %llu\n"
                  "# HELP simstore_inserts_total Inserts acknowledged since start.\n"
                  "# TYPE simstore_inserts_total counter\nsimstore_inserts_total %llu\n"
                  "# HELP simstore_deletes_total Deletes acknowledged since start.\n"
                  "# TYPE simstore_deletes_total counter\nsimstore_deletes_total %llu\n"
                  "# HELP simstore_live_failing 1 while the live store refuses changes (its "
                  "log cannot be written, or a flush failed with the tables full).\n"
                  "# TYPE simstore_live_failing gauge\nsimstore_live_failing %d\n",
                  (unsigned long long)ls.memtable_docs, (unsigned long long)ls.memtable_bytes,
                  (unsigned long long)ls.wal_bytes, (unsigned long long)ls.wal_syncs,
                  (unsigned long long)ls.flushes, (unsigned long long)ls.compactions,
                  (unsigned long long)ls.inserts, (unsigned long long)ls.deletes,
                  ls.failing ? 1 : 0);
    }
    if (b.failed) {
        free(b.p);
        return -1;
    }
    *text = b.p;
    *len = b.len;
    return 0;
}
