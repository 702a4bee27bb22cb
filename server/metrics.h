/* metrics.h: the server's Prometheus metrics: the counters of the requests
 * answered (by route and status), their latencies (a histogram by route)
 * and the connections closed unanswered, and the /metrics text that prints
 * them with the store's gauges. handler.c holds one per server and calls
 * only this. */
#ifndef SIMS_SERVER_METRICS_H
#define SIMS_SERVER_METRICS_H

#include "handler.h"
#include "simstore.h"

#include <stddef.h>

typedef struct serve_metrics serve_metrics;

/* New counters, all zero; NULL when out of memory. */
serve_metrics *serve_metrics_new(void);

/* NULL allowed. */
void serve_metrics_free(serve_metrics *m);

/* Count a finished request: its route (SERVE_ROUTE_OTHER for one beyond
 * the routes), status (those /metrics does not name count as "other") and
 * latency in seconds. Thread-safe. */
void serve_metrics_record(serve_metrics *m, serve_route route, unsigned status, double seconds);

/* Count a connection closed before its answer (a reason beyond the
 * reasons is ignored). Thread-safe. */
void serve_metrics_record_closed(serve_metrics *m, serve_close_reason why);

/* The /metrics text (Prometheus' text format): m's counters, then the
 * gauges of request_memory_bytes (what the requests in flight hold), of
 * store (when simstore_get_stats() answers) and of live (NULL: a read-only
 * server, no such gauges). 0 with *text (malloc'ed, NUL-terminated) and
 * *len set; -1 when out of memory. Thread-safe. */
int serve_metrics_render(serve_metrics *m, size_t request_memory_bytes, simstore *store,
                         simstore_live *live, char **text, size_t *len);

#endif
