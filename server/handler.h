/* handler.h: the server's request handling without the network: a store (a
 * live store, or a read-only one), one request in (method, path, query,
 * authorization, body), one response out (status, content type, body), and
 * the counters /metrics prints (kept by metrics.c). serve.c feeds it from
 * libmicrohttpd; the fuzz target tests/fuzz/fuzz_serve_request.c feeds it
 * bytes. */
#ifndef SIMS_SERVER_HANDLER_H
#define SIMS_SERVER_HANDLER_H

#include "simstore.h"

#include <stddef.h>
#include <stdint.h>

/* The limits a request is held to (413 beyond them). */
#define SERVE_DEFAULT_MAX_BODY_BYTES (16u << 20)
#define SERVE_DEFAULT_MAX_BATCH 10000u
/* The most bytes a request's JSON may take while it is parsed (as
 * reqjson_scan() bounds it): twice the largest body (a string is held
 * twice as it is decoded) and 1 MiB for the values around it; 413 above. */
#define SERVE_PARSE_BYTES(max_body_bytes) (2 * (size_t)(max_body_bytes) + ((size_t)1 << 20))

typedef struct serve_options {
    int read_only;               /* open the store read-only; writes get 403   */
    int huge_pages;              /* SIMSTORE_OPEN_HUGE_PAGES                    */
    const char *token;           /* bearer token of write routes; NULL: none   */
    size_t max_body_bytes;       /* (SERVE_DEFAULT_MAX_BODY_BYTES)             */
    size_t max_batch;            /* queries or documents in one request        */
    uint64_t memtable_bytes;     /* the live store's flush size; 0: default    */
    unsigned threads;            /* flush and compaction threads; 0: default   */
    size_t request_memory_bytes; /* what the bodies of the requests in flight
                                and their parsed JSON may hold together
                                (serve_memory_take); 0: no limit            */
    /* Told what an operator should know that no request is answered with
     * (a read-only store swapped under the server and reopened), one line
     * without a newline; NULL: nobody. */
    void (*notice)(void *ctx, const char *line);
    void *notice_ctx;
} serve_options;

void serve_options_init(serve_options *o);

typedef struct serve_server serve_server;

/* Open the store at path as options say: a live store, or with read_only a
 * read-only store (no writer lock: the CLI's add and compact keep working),
 * which follows the path: when build --replace or compact's shrink swaps
 * another store in at it, the next request opens that one and answers from
 * it (o->notice is told).
 * Errors: those of simstore_live_open() or simstore_open(), SIMSTORE_ENOMEM. */
int serve_server_open(const char *path, const serve_options *o, serve_server **out);

/* Flush the live store's changes into the store (nothing when read-only).
 * Errors: those of simstore_live_flush(). */
int serve_server_flush(serve_server *srv);

/* Close; no request may be running. NULL allowed. */
void serve_server_close(serve_server *srv);

/* The routes, for metrics and the access log. */
typedef enum serve_route {
    SERVE_ROUTE_QUERY_GET,
    SERVE_ROUTE_QUERY_POST,
    SERVE_ROUTE_DOCUMENTS_POST,
    SERVE_ROUTE_DOCUMENT_GET,
    SERVE_ROUTE_DOCUMENT_DELETE,
    SERVE_ROUTE_STATS,
    SERVE_ROUTE_HEALTHZ,
    SERVE_ROUTE_METRICS,
    SERVE_ROUTE_OTHER,
    SERVE_ROUTE_COUNT
} serve_route;

const char *serve_route_name(serve_route route);

typedef struct serve_request {
    const char *method; /* "GET", "POST", ... (NUL-terminated)        */
    const char *path;   /* the raw path, percent-escapes undecoded    */
    size_t path_len;
    const char *query; /* the raw query string after '?', or NULL    */
    size_t query_len;
    const char *authorization; /* the Authorization header, or NULL          */
    const char *body;          /* may hold any bytes                         */
    size_t body_len;
} serve_request;

typedef struct serve_response {
    unsigned status;
    const char *content_type; /* static string                            */
    char *body;               /* malloc'ed; serve_response_free()         */
    size_t body_len;
    serve_route route;
    int retry_after; /* seconds for a Retry-After header; 0: none */
} serve_response;

/* Answer one request; always fills *out (500 with a JSON error when memory
 * runs out). Thread-safe: any number of threads may call it at once. */
void serve_handle(serve_server *srv, const serve_request *req, serve_response *out);

/* A response saying the body passed the limit (413), for the network layer
 * that stops reading it. */
void serve_too_large(serve_server *srv, serve_response *out);

/* The memory of the requests in flight: their bodies, which the network
 * layer takes as it receives them, and their parsed JSON, which
 * serve_handle() takes, held together to o->request_memory_bytes. Take
 * bytes: 0, or -1 (nothing taken) when that would pass the limit. Give
 * them back once freed. Thread-safe. */
int serve_memory_take(serve_server *srv, size_t bytes);
void serve_memory_give(serve_server *srv, size_t bytes);

/* A response saying the requests in flight hold all the memory they may
 * (503, to try again shortly), for the network layer that cannot take a
 * body's bytes. */
void serve_busy(serve_server *srv, serve_response *out);
/* The 503 of a request that arrives while the server stops (SIGTERM): it
 * finishes the requests it has, answers new ones this. */
void serve_stopping(serve_server *srv, serve_response *out);

void serve_response_free(serve_response *r);

/* Count a finished request for /metrics: its route, status and latency. */
void serve_record(serve_server *srv, serve_route route, unsigned status, double seconds);

/* Why the network layer closed a connection before answering it. */
typedef enum serve_close_reason {
    SERVE_CLOSED_DEADLINE, /* its request, or the taking of its answer, outlasted the deadline */
    SERVE_CLOSED_ROOM,     /* idle or unfinished, closed to make room for new clients */
    SERVE_CLOSE_REASONS
} serve_close_reason;

/* Count such a closing for /metrics. */
void serve_record_closed(serve_server *srv, serve_close_reason why);

#endif
