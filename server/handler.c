/* handler.c: the server's routes over the public API: parsing and checking
 * requests (JSON through jansson), answering them from a live or read-only
 * store; /metrics from metrics.c's counters. No sockets here: see serve.c. */
#include "handler.h"

#include "cli.h"
#include "metrics.h"
#include "reqjson.h"
#include "statsjson.h"

#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- Routes ------------------------------------------------------------- */

static const char *const route_names[SERVE_ROUTE_COUNT] = {
    "query_get", "query_post", "documents_post", "document_get", "document_delete",
    "stats",     "healthz",    "metrics",        "other"};

const char *serve_route_name(serve_route route)
{
    return route < SERVE_ROUTE_COUNT ? route_names[route] : "other";
}

/* ---- The server, its stores and its per-thread query contexts ------------ */

typedef struct store_gen store_gen;

/* What one request needs for itself: query objects are for one thread at a
 * time, and so is a fingerprinter. Taken from a free list, given back. */
typedef struct worker {
    store_gen *gen;          /* the store it queries */
    simstore_live_query *lq; /* live stores */
    simstore_query *q;       /* read-only stores */
    simstore_fingerprinter *fpr;
    int sketches; /* fpr makes the store's kind of sketch */
    struct worker *next;
} worker;

/* One opening of the store: a live server has one for its life; a
 * read-only one opens another when the path comes to name another store
 * (build --replace, compact's shrink) and frees the old one once the last
 * request using it is answered. */
struct store_gen {
    simstore *store; /* the live store's, or a read-only store this owns */
    simstore_stats opened;
    size_t sketch_bytes;
    worker *idle;  /* under the server's lock */
    unsigned refs; /* under the server's lock: requests using it, + 1 while current */
};

struct serve_server {
    serve_options o;
    char *path;
    simstore_live *live; /* NULL when read-only */
    pthread_mutex_t lock;
    store_gen *gen; /* the current one, under lock */
    /* A read-only store's reopening: one thread at a time; after a failed
     * one, the next waits a second (the old store answers meanwhile). */
    pthread_mutex_t reopen_lock;
    struct timespec reopen_failed_at;
    int reopen_failing;
    reqjson_budget memory; /* bodies and parsed JSON in flight */
    serve_metrics *metrics;
};

static int worker_take(serve_server *srv, store_gen *g, worker **out);
static void worker_give_back(serve_server *srv, worker *w);

void serve_options_init(serve_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_body_bytes = SERVE_DEFAULT_MAX_BODY_BYTES;
    o->max_batch = SERVE_DEFAULT_MAX_BATCH;
}

static void notice(serve_server *srv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notice(serve_server *srv, const char *fmt, ...)
{
    if (!srv->o.notice)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    srv->o.notice(srv->o.notice_ctx, line);
}

static void worker_free(worker *w)
{
    if (!w)
        return;
    simstore_live_query_free(w->lq);
    simstore_query_free(w->q);
    simstore_fingerprinter_free(w->fpr);
    free(w);
}

/* Free g's workers, and its store when read-only (a live store's is the
 * live store's). */
static void gen_free(serve_server *srv, store_gen *g)
{
    if (!g)
        return;
    while (g->idle) {
        worker *w = g->idle;
        g->idle = w->next;
        worker_free(w);
    }
    if (!srv->live)
        simstore_close(g->store);
    free(g);
}

/* A generation of store (taken: closed on failure). */
static int gen_new(serve_server *srv, simstore *store, store_gen **out)
{
    *out = NULL;
    store_gen *g = calloc(1, sizeof *g);
    if (!g) {
        if (!srv->live)
            simstore_close(store);
        return SIMSTORE_ENOMEM;
    }
    g->store = store;
    g->refs = 1;
    int rc = simstore_get_stats(store, &g->opened);
    if (rc != SIMSTORE_OK) {
        gen_free(srv, g);
        return rc;
    }
    simstore_text_options text;
    simstore_get_text_options(store, &text);
    g->sketch_bytes = simstore_sketch_bytes(text.sketch);
    /* The CJK dictionary (friso, about 75 ms) loaded now, and one worker
     * made, not at the first request (fingerprinters load the dictionary
     * at their first Han text): that would stall the request and every one
     * queued behind it on its thread. An error here is left for the
     * requests to report, as they did before. */
    if (text.cjk == SIMSTORE_CJK_FRISO)
        (void)simstore_cjk_segmenter(NULL);
    worker *w;
    if (worker_take(srv, g, &w) == SIMSTORE_OK)
        worker_give_back(srv, w);
    *out = g;
    return SIMSTORE_OK;
}

static store_gen *gen_current(serve_server *srv)
{
    pthread_mutex_lock(&srv->lock);
    store_gen *g = srv->gen;
    g->refs++;
    pthread_mutex_unlock(&srv->lock);
    return g;
}

static void gen_release(serve_server *srv, store_gen *g)
{
    pthread_mutex_lock(&srv->lock);
    unsigned refs = --g->refs;
    pthread_mutex_unlock(&srv->lock);
    if (refs == 0)
        gen_free(srv, g);
}

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* The read-only store's path names another store than the current
 * generation's: open it and make it current, as a new `simstore query`
 * would; on failure keep the old one (a second before the next try). */
static void gen_reopen(serve_server *srv)
{
    pthread_mutex_lock(&srv->reopen_lock);
    store_gen *g = gen_current(srv);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (simstore_replaced(g->store) &&
        (!srv->reopen_failing || seconds_between(&srv->reopen_failed_at, &now) >= 1.0)) {
        simstore *s = NULL;
        store_gen *fresh = NULL;
        int rc = simstore_open(
            srv->path, SIMSTORE_OPEN_READONLY | (srv->o.huge_pages ? SIMSTORE_OPEN_HUGE_PAGES : 0),
            &s);
        if (rc == SIMSTORE_OK)
            rc = gen_new(srv, s, &fresh);
        if (rc == SIMSTORE_OK) {
            pthread_mutex_lock(&srv->lock);
            store_gen *old = srv->gen;
            srv->gen = fresh;
            pthread_mutex_unlock(&srv->lock);
            gen_release(srv, old); /* no longer current */
            srv->reopen_failing = 0;
            notice(srv, "%s was replaced by another store (%llu %s, %llu %s); answering from it",
                   srv->path, (unsigned long long)fresh->opened.documents,
                   CLI_NOUN(fresh->opened.documents, "document"),
                   (unsigned long long)fresh->opened.segments,
                   CLI_NOUN(fresh->opened.segments, "segment"));
        } else {
            const char *detail = simstore_last_error();
            if (!srv->reopen_failing)
                notice(srv,
                       "%s was replaced by another store, which cannot be opened: %s%s%s; "
                       "answering from the store opened before until it can",
                       srv->path, simstore_strerror(rc), detail && *detail ? ": " : "",
                       detail && *detail ? detail : "");
            srv->reopen_failing = 1;
            srv->reopen_failed_at = now;
        }
    }
    gen_release(srv, g);
    pthread_mutex_unlock(&srv->reopen_lock);
}

/* The generation a request uses, held until gen_release(): a read-only
 * server first looks whether the path names another store now (one stat;
 * before every request, so that a request made after build --replace
 * returned is answered from the new store). */
static store_gen *gen_acquire(serve_server *srv)
{
    store_gen *g = gen_current(srv);
    if (srv->live || !simstore_replaced(g->store))
        return g;
    gen_release(srv, g);
    gen_reopen(srv);
    return gen_current(srv);
}

int serve_server_open(const char *path, const serve_options *o, serve_server **out)
{
    *out = NULL;
    serve_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return SIMSTORE_ENOMEM;
    srv->o = *o;
    srv->o.token = NULL; /* the caller keeps its string; copied below */
    srv->memory.limit = o->request_memory_bytes;
    pthread_mutex_init(&srv->lock, NULL);
    pthread_mutex_init(&srv->reopen_lock, NULL);
    if ((o->token && !(srv->o.token = strdup(o->token))) || !(srv->path = strdup(path)) ||
        !(srv->metrics = serve_metrics_new())) {
        serve_server_close(srv);
        return SIMSTORE_ENOMEM;
    }
    int rc;
    simstore *store = NULL;
    if (o->read_only) {
        rc = simstore_open(
            path, SIMSTORE_OPEN_READONLY | (o->huge_pages ? SIMSTORE_OPEN_HUGE_PAGES : 0), &store);
    } else {
        simstore_live_options lo;
        simstore_live_options_init(&lo);
        if (o->memtable_bytes)
            lo.memtable_bytes = o->memtable_bytes;
        lo.threads = o->threads;
        lo.open_flags = o->huge_pages ? SIMSTORE_OPEN_HUGE_PAGES : 0;
        rc = simstore_live_open(path, &lo, &srv->live);
        if (rc == SIMSTORE_OK)
            store = simstore_live_store(srv->live);
    }
    if (rc == SIMSTORE_OK)
        rc = gen_new(srv, store, &srv->gen);
    if (rc != SIMSTORE_OK) {
        serve_server_close(srv);
        return rc;
    }
    if (srv->live) {
        /* What the open did with the log a stop left (format/wal.md). */
        simstore_live_stats ls;
        simstore_live_get_stats(srv->live, &ls);
        if (ls.replayed)
            notice(srv,
                   "%s: replayed %llu %s of its write-ahead log (acknowledged before the server "
                   "stopped, not yet in the store's files)",
                   path, (unsigned long long)ls.replayed, CLI_NOUN(ls.replayed, "change"));
        if (ls.torn_bytes)
            notice(srv,
                   "%s: the write-ahead log ended in a torn write of %llu bytes (%llu %s begun, "
                   "never acknowledged): cut from the log and kept in %s/%s",
                   path, (unsigned long long)ls.torn_bytes, (unsigned long long)ls.torn_records,
                   ls.torn_records == 1 ? "record" : "records", path, ls.torn_name);
    }
    *out = srv;
    return SIMSTORE_OK;
}

int serve_server_flush(serve_server *srv)
{
    return srv->live ? simstore_live_flush(srv->live) : SIMSTORE_OK;
}

void serve_server_close(serve_server *srv)
{
    if (!srv)
        return;
    if (srv->gen)
        gen_release(srv, srv->gen); /* no request runs: its last reference */
    if (srv->live)
        simstore_live_close(srv->live);
    pthread_mutex_destroy(&srv->lock);
    pthread_mutex_destroy(&srv->reopen_lock);
    serve_metrics_free(srv->metrics);
    free((char *)srv->o.token);
    free(srv->path);
    free(srv);
}

int serve_memory_take(serve_server *srv, size_t bytes)
{
    return reqjson_budget_take(&srv->memory, bytes);
}

void serve_memory_give(serve_server *srv, size_t bytes)
{
    reqjson_budget_give(&srv->memory, bytes);
}

static int worker_take(serve_server *srv, store_gen *g, worker **out)
{
    pthread_mutex_lock(&srv->lock);
    worker *w = g->idle;
    if (w)
        g->idle = w->next;
    pthread_mutex_unlock(&srv->lock);
    if (w) {
        *out = w;
        return SIMSTORE_OK;
    }
    if (!(w = calloc(1, sizeof *w)))
        return SIMSTORE_ENOMEM;
    w->gen = g;
    int rc = srv->live ? simstore_live_query_new(srv->live, SIMSTORE_QUERY_WITH_META, &w->lq)
                       : simstore_query_new(g->store, SIMSTORE_QUERY_WITH_META, &w->q);
    /* Texts are fingerprinted as the store's documents were: its text
     * options, its boilerplate set, its kind of sketch. */
    simstore_text_options text;
    simstore_get_text_options(g->store, &text);
    if (rc == SIMSTORE_OK)
        rc = simstore_fingerprinter_new(&text, &w->fpr);
    if (rc == SIMSTORE_OK)
        rc = simstore_fingerprinter_set_boilerplate(w->fpr, simstore_get_boilerplate(g->store));
    if (rc != SIMSTORE_OK) {
        worker_free(w);
        return rc;
    }
    simstore_sketch_kind kind = simstore_fingerprinter_sketch(w->fpr);
    w->sketches = kind != SIMSTORE_SKETCH_NONE && kind == text.sketch;
    *out = w;
    return SIMSTORE_OK;
}

static void worker_give_back(serve_server *srv, worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&srv->lock);
    w->next = w->gen->idle;
    w->gen->idle = w;
    pthread_mutex_unlock(&srv->lock);
}

/* ---- Replies -------------------------------------------------------------- */

typedef struct reply {
    unsigned status;
    json_t *json; /* the body, or NULL with text */
    char *text;   /* a text body (metrics) */
    size_t text_len;
    int retry_after;       /* a Retry-After header's seconds; 0: none */
    size_t parse_reserved; /* taken from --request-memory for the body's JSON */
} reply;

/* j as text from malloc, with a newline after it when newline is set
 * (json_dumps' text comes from jansson's allocator, which need not be
 * malloc: the fuzz target counts what jansson holds); NULL when out of
 * memory. */
static char *dump_json(const json_t *j, size_t flags, int newline, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f)
        return NULL;
    int bad = json_dumpf(j, f, flags) != 0 || (newline && fputc('\n', f) == EOF);
    if (fclose(f) != 0 || bad) {
        free(text);
        return NULL;
    }
    *len = n;
    return text;
}

static void reply_error(reply *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply_error(reply *r, unsigned status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_decref(r->json);
    r->status = status;
    /* The message may quote request bytes: keep it valid UTF-8. */
    char clean[4 * sizeof msg];
    size_t n = 0, len = strlen(msg);
    for (size_t i = 0; i < len && n + 4 < sizeof clean;) {
        size_t seq = cli_utf8_sequence((const unsigned char *)msg + i, len - i);
        if (seq == 0) {
            memcpy(clean + n, "\xef\xbf\xbd", 3);
            n += 3;
            i++;
        } else {
            memcpy(clean + n, msg + i, seq);
            n += seq;
            i += seq;
        }
    }
    clean[n] = '\0';
    r->json = json_pack("{s:s}", "error", clean);
}

/* A library error as a status: what the caller did wrong, or ours. */
static void reply_api_error(reply *r, int rc, const char *what)
{
    unsigned status = 500;
    switch (rc) {
    case SIMSTORE_EINVAL:
    case SIMSTORE_ERANGE: status = 400; break;
    case SIMSTORE_ENOTFOUND: status = 404; break;
    case SIMSTORE_EEXIST: status = 409; break;
    case SIMSTORE_EREADONLY: status = 403; break;
    case SIMSTORE_EBUSY: status = 503; break;
    case SIMSTORE_ENOMEM: status = 503; break;
    case SIMSTORE_EFULL: status = 503; break; /* no room in memory: try again */
    default: break;
    }
    const char *detail = simstore_last_error();
    reply_error(r, status, "%s: %s%s%s", what, simstore_strerror(rc), detail && *detail ? ": " : "",
                detail && *detail ? detail : "");
}

/* A write's library error: as reply_api_error(), but an I/O error is the
 * live store's log or files failing (a full disk, say), which the client
 * did not cause and which may pass: 503, with the library's message. */
static void reply_write_error(reply *r, int rc, const char *what)
{
    reply_api_error(r, rc, what);
    if (rc == SIMSTORE_EIO)
        r->status = 503;
}

/* An id as an error message quotes it: control characters and bytes that
 * are not UTF-8 as \xHH (cli_escape), at most 200 bytes of it. */
#define MESSAGE_ID_BYTES (4 * 200 + 4)
static const char *message_id(const char *id, size_t len, char *buf)
{
    return cli_escape(id, len, buf, MESSAGE_ID_BYTES);
}

/* A JSON string of s[0..n), bytes that are not UTF-8 as U+FFFD (stored ids
 * come from files and need not be UTF-8). */
static json_t *json_text(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n);
    if (j)
        return j;
    char *buf = malloc(3 * n + 1);
    if (!buf)
        return NULL;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t seq = s[i] ? cli_utf8_sequence((const unsigned char *)s + i, n - i) : 0;
        if (seq == 0) {
            memcpy(buf + out, "\xef\xbf\xbd", 3);
            out += 3;
            i++;
        } else {
            memcpy(buf + out, s + i, seq);
            out += seq;
            i += seq;
        }
    }
    j = json_stringn(buf, out);
    free(buf);
    return j;
}

/* The live store's failure message as a JSON string. */
static json_t *live_failure(const simstore_live_stats *ls)
{
    return json_text(ls->failure, strnlen(ls->failure, sizeof ls->failure));
}

/* A document id as the CLI prints it: integer ids as numbers. */
static json_t *json_id(const char *id, size_t len, unsigned flags)
{
    if (!id)
        return json_null();
    if (flags & SIMSTORE_MATCH_INTEGER_ID) {
        unsigned long long v;
        char buf[32];
        if (len < sizeof buf) {
            memcpy(buf, id, len);
            buf[len] = '\0';
            if (cli_parse_uint(buf, 0, INT64_MAX, &v) == 0)
                return json_integer((json_int_t)v);
        }
    }
    return json_text(id, len);
}

static json_t *json_hex(uint64_t fp)
{
    char hex[17];
    cli_format_hex64(fp, hex);
    return json_string(hex);
}

/* Stored metadata (compact JSON text) as a JSON value. */
static json_t *json_meta(const char *meta, size_t len)
{
    json_t *j = json_loadb(meta, len, JSON_DECODE_ANY, NULL);
    return j ? j : json_text(meta, len);
}

/* The matches as JSON; with a rule (not NULL), only its near-duplicates. */
static json_t *rule_matches_json(const simstore_match *m, size_t n, int with_meta,
                                 const simstore_near_rule *rule)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        if (rule && !simstore_near_duplicate(rule, m[i].distance, m[i].similarity))
            continue;
        json_t *o = json_object();
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            return NULL;
        }
        json_object_set_new(o, "id", json_id(m[i].id, m[i].id_len, m[i].flags));
        json_object_set_new(o, "fp", json_hex(m[i].fp));
        json_object_set_new(o, "distance", json_integer(m[i].distance));
        if (m[i].similarity >= 0)
            json_object_set_new(o, "similarity", json_real(m[i].similarity));
        if (with_meta && m[i].meta)
            json_object_set_new(o, "meta", json_meta(m[i].meta, m[i].meta_len));
    }
    return arr;
}

static json_t *matches_json(const simstore_match *m, size_t n, int with_meta)
{
    return rule_matches_json(m, n, with_meta, NULL);
}

/* ---- Request checks ------------------------------------------------------- */

/* Every member of obj is one of names (NULL-terminated); else a 400. */
static int check_fields(reply *r, const json_t *obj, const char *where, const char *const *names)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value)
    {
        (void)value;
        int known = 0;
        for (size_t i = 0; names[i] && !known; i++)
            known = strcmp(key, names[i]) == 0;
        if (!known) {
            reply_error(r, 400, "%sunknown field '%.200s'", where, key);
            return -1;
        }
    }
    return 0;
}

/* k up to SIMSTORE_MAX_K: above the store's k the answer is as exact, the
 * tables probed at the prefixes near the query's (README, "Distances above
 * the store's k"), the in-memory table's chains likewise. */
static int parse_k_value(reply *r, long long v, unsigned *k)
{
    if (v < 0 || v > SIMSTORE_MAX_K) {
        reply_error(r, 400, "k must be an integer from 0 to %d, not %lld", SIMSTORE_MAX_K, v);
        return -1;
    }
    *k = (unsigned)v;
    return 0;
}

/* "k" of a JSON body: absent means the store's k. */
static int json_k(const worker *w, reply *r, const json_t *obj, unsigned *k)
{
    json_t *j = json_object_get(obj, "k");
    *k = w->gen->opened.k;
    if (!j)
        return 0;
    if (!json_is_integer(j)) {
        reply_error(r, 400, "k must be an integer from 0 to %d", SIMSTORE_MAX_K);
        return -1;
    }
    return parse_k_value(r, (long long)json_integer_value(j), k);
}

/* The near-duplicate rule of a POST /v1/documents body: "k" and
 * "min_similarity", each absent for the rule's default, resolved for the
 * store as the library resolves it (simstore_near_rule_resolve(): the
 * defaults in one place, and its message for a part it refuses). */
static int json_near_rule(const worker *w, reply *r, const json_t *obj, simstore_near_rule *rule)
{
    simstore_near_rule_init(rule);
    json_t *j = json_object_get(obj, "k");
    if (j) {
        if (!json_is_integer(j)) {
            reply_error(r, 400, "k must be an integer from 0 to %d", SIMSTORE_MAX_K);
            return -1;
        }
        if (parse_k_value(r, (long long)json_integer_value(j), &rule->k))
            return -1;
    }
    j = json_object_get(obj, "min_similarity");
    if (j) {
        double v = json_is_number(j) ? json_number_value(j) : -1;
        if (!(v >= 0 && v <= 1)) {
            reply_error(r, 400, "min_similarity must be a number from 0 to 1");
            return -1;
        }
        rule->min_similarity = v;
    }
    if (simstore_near_rule_resolve(rule, w->gen->opened.k, w->gen->opened.sketch,
                                   SIMSTORE_NEAR_WITHOUT_BANDS)) {
        reply_error(r, 400, "%s", simstore_last_error());
        return -1;
    }
    return 0;
}

static int json_flag(reply *r, const json_t *obj, const char *name, int *out)
{
    json_t *j = json_object_get(obj, name);
    *out = 0;
    if (!j)
        return 0;
    if (!json_is_boolean(j)) {
        reply_error(r, 400, "%s must be true or false", name);
        return -1;
    }
    *out = json_is_true(j);
    return 0;
}

static int parse_fp_string(reply *r, const char *where, const json_t *j, uint64_t *fp)
{
    if (!json_is_string(j) || json_string_length(j) != 16 ||
        cli_parse_hex64(json_string_value(j), fp) != 0) {
        reply_error(r, 400, "%sfp must be a string of 16 hex digits", where);
        return -1;
    }
    return 0;
}

/* One query or document's fingerprint: from "fp", or from "text" with the
 * worker's fingerprinter (and its sketch, when the store keeps sketches). */
typedef struct fp_source {
    uint64_t fp;
    int sketched;
    uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
} fp_source;

static int source_of(serve_server *srv, reply *r, worker *w, const char *where, const json_t *obj,
                     fp_source *src)
{
    (void)srv;
    json_t *fp = json_object_get(obj, "fp"), *text = json_object_get(obj, "text");
    src->sketched = 0;
    if ((fp != NULL) == (text != NULL)) {
        reply_error(r, 400, "%sgive exactly one of fp and text", where);
        return -1;
    }
    if (fp)
        return parse_fp_string(r, where, fp, &src->fp);
    if (!json_is_string(text)) {
        reply_error(r, 400, "%stext must be a string", where);
        return -1;
    }
    const char *t = json_string_value(text);
    size_t len = json_string_length(text);
    int rc = w->sketches ? simstore_fingerprint_sketch(w->fpr, t, len, &src->fp, src->sketch, NULL)
                         : simstore_fingerprint_text(w->fpr, t, len, &src->fp, NULL);
    if (rc != SIMSTORE_OK) {
        reply_api_error(r, rc, "fingerprinting the text");
        return -1;
    }
    src->sketched = w->sketches;
    return 0;
}

static int query_one(serve_server *srv, worker *w, const fp_source *src, unsigned k,
                     const simstore_match **m, size_t *n)
{
    const uint8_t *sketch = src->sketched ? src->sketch : NULL;
    if (srv->live)
        return simstore_live_query_fp(w->lq, src->fp, sketch, k, m, n);
    return simstore_query_fp_sketch(w->q, src->fp, sketch, k, m, n);
}

/* ---- Percent-decoding and the query string -------------------------------- */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decode s[0..n) (%XX, and '+' as a space when plus) into out (n + 1
 * bytes, NUL-terminated); -1 on a bad escape or, unless nul_ok, a NUL
 * byte. */
static int percent_decode(const char *s, size_t n, int plus, int nul_ok, char *out, size_t *out_len)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (n - i < 3)
                return -1;
            int hi = hex_digit(s[i + 1]);
            int lo = hex_digit(s[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus) {
            c = ' ';
        }
        if (c == '\0' && !nul_ok)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    *out_len = o;
    return 0;
}

/* ---- Routes --------------------------------------------------------------- */

/* GET /v1/query?fp=HEX16[&k=K][&meta=true] */
static void route_query_get(serve_server *srv, worker *w, const serve_request *req, reply *r)
{
    uint64_t fp = 0;
    unsigned k = w->gen->opened.k;
    int have_fp = 0, have_k = 0, have_meta = 0, with_meta = 0;
    const char *q = req->query ? req->query : "";
    size_t qlen = req->query ? req->query_len : 0;
    char *buf = malloc(qlen + 1);
    if (!buf) {
        reply_error(r, 503, "out of memory");
        return;
    }
    size_t pos = 0;
    while (pos < qlen) {
        size_t end = pos;
        while (end < qlen && q[end] != '&')
            end++;
        size_t eq = pos;
        while (eq < end && q[eq] != '=')
            eq++;
        if (end == pos) {
            pos = end + 1;
            continue;
        }
        char name[16];
        size_t name_len, value_len;
        if (eq - pos >= sizeof name || percent_decode(q + pos, eq - pos, 1, 0, buf, &name_len)) {
            reply_error(r, 400, "unknown query parameter '%.*s'",
                        (int)(eq - pos > 64 ? 64 : eq - pos), q + pos);
            goto done;
        }
        memcpy(name, buf, name_len + 1);
        const char *raw = eq < end ? q + eq + 1 : q + end;
        if (percent_decode(raw, (size_t)(q + end - raw), 1, 0, buf, &value_len)) {
            reply_error(r, 400, "query parameter '%s': bad percent-escape", name);
            goto done;
        }
        int *seen = strcmp(name, "fp") == 0     ? &have_fp
                    : strcmp(name, "k") == 0    ? &have_k
                    : strcmp(name, "meta") == 0 ? &have_meta
                                                : NULL;
        if (!seen) {
            reply_error(r, 400, "unknown query parameter '%s' (fp, k, meta)", name);
            goto done;
        }
        if (*seen) {
            reply_error(r, 400, "query parameter '%s' given twice", name);
            goto done;
        }
        *seen = 1;
        if (seen == &have_fp) {
            if (value_len != 16 || cli_parse_hex64(buf, &fp)) {
                reply_error(r, 400, "fp must be 16 hex digits, not '%.64s'", buf);
                goto done;
            }
        } else if (seen == &have_k) {
            unsigned long long v;
            if (cli_parse_uint(buf, 0, 64, &v)) {
                reply_error(r, 400, "k must be an integer from 0 to %d, not '%.64s'",
                            SIMSTORE_MAX_K, buf);
                goto done;
            }
            if (parse_k_value(r, (long long)v, &k))
                goto done;
        } else {
            if (strcmp(buf, "true") == 0 || strcmp(buf, "1") == 0) {
                with_meta = 1;
            } else if (strcmp(buf, "false") != 0 && strcmp(buf, "0") != 0) {
                reply_error(r, 400, "meta must be true or false, not '%.64s'", buf);
                goto done;
            }
        }
        pos = end + 1;
    }
    if (!have_fp) {
        reply_error(r, 400, "missing query parameter fp (16 hex digits)");
        goto done;
    }
    const simstore_match *m;
    size_t n;
    fp_source src = {.fp = fp};
    int rc = query_one(srv, w, &src, k, &m, &n);
    if (rc != SIMSTORE_OK) {
        reply_api_error(r, rc, "query");
        goto done;
    }
    r->status = 200;
    r->json = json_pack("{s:o,s:I,s:o}", "fp", json_hex(fp), "k", (json_int_t)k, "matches",
                        matches_json(m, n, with_meta));
done:
    free(buf);
}

/* The answers of a batch over a read-only store (simstore_query_batch):
 * the batch's index i is the request's index[i]. */
typedef struct batch_answers {
    json_t *results;
    const size_t *index;
    int with_meta;
} batch_answers;

static int batch_answer(void *ctx, size_t i, uint64_t fp, const simstore_match *m, size_t n)
{
    batch_answers *a = ctx;
    json_t *one = json_array_get(a->results, a->index[i]);
    (void)fp;
    json_t *arr = matches_json(m, n, a->with_meta);
    if (!one || !arr || json_object_set_new(one, "matches", arr)) {
        json_decref(arr);
        return SIMSTORE_ENOMEM;
    }
    return 0;
}

/* Answer fps[0..count) through the batch path, the queries with sketches
 * (text) in one batch and those without (fp) in another: a batch takes
 * sketches for all its queries or none. */
static int batch_read_only(const store_gen *g, const uint64_t *fps, const uint8_t *sketches,
                           const unsigned char *sketched, size_t count, unsigned k, json_t *results,
                           int with_meta)
{
    size_t sb = g->sketch_bytes;
    uint64_t *part_fps = malloc(count * sizeof *part_fps);
    size_t *index = malloc(count * sizeof *index);
    uint8_t *part_sketches = sb ? malloc(count * sb) : NULL;
    int rc = SIMSTORE_OK;
    if (!part_fps || !index || (sb && !part_sketches))
        rc = SIMSTORE_ENOMEM;
    for (int with = 0; with < 2 && rc == SIMSTORE_OK; with++) {
        size_t n = 0;
        for (size_t i = 0; i < count; i++) {
            if (sketched[i] != with)
                continue;
            part_fps[n] = fps[i];
            if (with)
                memcpy(part_sketches + n * sb, sketches + i * sb, sb);
            index[n++] = i;
        }
        if (n == 0)
            continue;
        simstore_batch_options bo;
        simstore_batch_options_init(&bo);
        bo.flags = SIMSTORE_QUERY_WITH_META;
        bo.threads = 1; /* the server's threads already share the cores */
        batch_answers a = {results, index, with_meta};
        rc = simstore_query_batch_sketches(g->store, part_fps, with ? part_sketches : NULL, n, k,
                                           &bo, batch_answer, &a);
    }
    free(part_fps);
    free(index);
    free(part_sketches);
    return rc;
}

/* POST /v1/query: {"fp"|"text", "k", "meta"} or {"queries": [...], "k", "meta"}. */
static void route_query_post(serve_server *srv, worker *w, const json_t *body, reply *r)
{
    static const char *const fields[] = {"fp", "text", "k", "meta", "queries", NULL};
    static const char *const item_fields[] = {"fp", "text", "id", NULL};
    unsigned k;
    int with_meta;
    if (check_fields(r, body, "", fields) || json_k(w, r, body, &k) ||
        json_flag(r, body, "meta", &with_meta))
        return;
    json_t *queries = json_object_get(body, "queries");
    const simstore_match *m;
    size_t n;
    if (!queries) {
        fp_source src;
        if (source_of(srv, r, w, "", body, &src))
            return;
        int rc = query_one(srv, w, &src, k, &m, &n);
        if (rc != SIMSTORE_OK) {
            reply_api_error(r, rc, "query");
            return;
        }
        r->status = 200;
        r->json = json_pack("{s:o,s:I,s:o}", "fp", json_hex(src.fp), "k", (json_int_t)k, "matches",
                            matches_json(m, n, with_meta));
        return;
    }
    if (json_object_get(body, "fp") || json_object_get(body, "text")) {
        reply_error(r, 400, "give queries, or fp or text, not both");
        return;
    }
    if (!json_is_array(queries)) {
        reply_error(r, 400, "queries must be an array of {\"fp\"} or {\"text\"} objects");
        return;
    }
    size_t count = json_array_size(queries);
    if (count > srv->o.max_batch) {
        reply_error(r, 413, "queries holds %zu queries, above the limit of %zu", count,
                    srv->o.max_batch);
        return;
    }
    uint64_t *fps = malloc((count ? count : 1) * sizeof *fps);
    size_t sketch_bytes = w->gen->sketch_bytes;
    uint8_t *sketches = sketch_bytes ? malloc((count ? count : 1) * sketch_bytes) : NULL;
    unsigned char *sketched = malloc(count ? count : 1);
    fp_source *src = malloc(sizeof *src);
    json_t *results = json_array();
    if (!fps || (sketch_bytes && !sketches) || !sketched || !src || !results) {
        reply_error(r, 503, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        json_t *item = json_array_get(queries, i);
        char where[48];
        snprintf(where, sizeof where, "queries[%zu]: ", i);
        if (!json_is_object(item)) {
            reply_error(r, 400, "%smust be an object with fp or text", where);
            goto done;
        }
        if (check_fields(r, item, where, item_fields) || source_of(srv, r, w, where, item, src))
            goto done;
        json_t *id = json_object_get(item, "id");
        json_t *one = json_pack("{s:o}", "fp", json_hex(src->fp));
        if (!one || json_array_append_new(results, one)) {
            reply_error(r, 503, "out of memory");
            goto done;
        }
        if (id)
            json_object_set(one, "id", id);
        fps[i] = src->fp;
        sketched[i] = (unsigned char)src->sketched;
        if (src->sketched)
            memcpy(sketches + i * sketch_bytes, src->sketch, sketch_bytes);
        if (srv->live) {
            /* The memtable is not in the store's tables: query by query. */
            int rc = simstore_live_query_fp(w->lq, src->fp, src->sketched ? src->sketch : NULL, k,
                                            &m, &n);
            json_t *arr = rc == SIMSTORE_OK ? matches_json(m, n, with_meta) : NULL;
            if (rc != SIMSTORE_OK) {
                reply_api_error(r, rc, "query");
                goto done;
            }
            json_object_set_new(one, "matches", arr);
        }
    }
    if (!srv->live && count > 0) {
        int rc = batch_read_only(w->gen, fps, sketches, sketched, count, k, results, with_meta);
        if (rc != SIMSTORE_OK) {
            reply_api_error(r, rc, "batch query");
            goto done;
        }
    }
    r->status = 200;
    r->json = json_pack("{s:I,s:O}", "k", (json_int_t)k, "results", results);
done:
    json_decref(results);
    free(fps);
    free(sketches);
    free(sketched);
    free(src);
}

/* One document of a POST /v1/documents, checked. */
typedef struct doc_in {
    simstore_doc doc;
    char id_buf[32]; /* an integer id's digits */
    char *meta;      /* compact JSON, malloc'ed */
    fp_source src;
} doc_in;

static int parse_doc(serve_server *srv, reply *r, worker *w, const char *where, const json_t *obj,
                     doc_in *d)
{
    memset(&d->doc, 0, sizeof d->doc);
    d->meta = NULL;
    json_t *id = json_object_get(obj, "id"), *meta = json_object_get(obj, "meta");
    if (json_is_string(id)) {
        d->doc.id = json_string_value(id);
        d->doc.id_len = json_string_length(id);
    } else if (json_is_integer(id) && json_integer_value(id) >= 0) {
        snprintf(d->id_buf, sizeof d->id_buf, "%lld", (long long)json_integer_value(id));
        d->doc.id = d->id_buf;
        d->doc.id_len = strlen(d->id_buf);
        d->doc.flags = SIMSTORE_DOC_INTEGER_ID;
    } else {
        reply_error(r, 400, "%sid must be a string or a non-negative integer", where);
        return -1;
    }
    if (d->doc.id_len == 0 || d->doc.id_len > SIMSTORE_MAX_ID_BYTES) {
        reply_error(r, 400, "%sid must have 1 to %u bytes", where, SIMSTORE_MAX_ID_BYTES);
        return -1;
    }
    /* The library's one rule for the ids a writer may store, which the
     * CLI's inputs apply too: checked here so that a batch with one bad id
     * is refused whole, naming the document, before any is applied. */
    const char *problem = simstore_id_problem(d->doc.id, d->doc.id_len);
    if (problem) {
        char shown[MESSAGE_ID_BYTES];
        reply_error(r, 400, "%sid '%s': %s", where, message_id(d->doc.id, d->doc.id_len, shown),
                    problem);
        return -1;
    }
    if (meta && !json_is_null(meta)) {
        d->meta = dump_json(meta, JSON_COMPACT | JSON_ENCODE_ANY, 0, &d->doc.meta_len);
        if (!d->meta) {
            reply_error(r, 503, "out of memory");
            return -1;
        }
        d->doc.meta = d->meta;
        if (d->doc.meta_len > SIMSTORE_MAX_META_BYTES) {
            reply_error(r, 400, "%smeta has %zu bytes, above the limit of %u", where,
                        d->doc.meta_len, SIMSTORE_MAX_META_BYTES);
            return -1;
        }
    }
    if (source_of(srv, r, w, where, obj, &d->src))
        return -1;
    d->doc.fp = d->src.fp;
    d->doc.sketch = d->src.sketched ? d->src.sketch : NULL;
    if (w->gen->sketch_bytes && !d->src.sketched) {
        reply_error(r, 400,
                    "%sthis store keeps a sketch of every document: give the text, not "
                    "the fp",
                    where);
        return -1;
    }
    return 0;
}

typedef enum doc_mode { MODE_INSERT, MODE_INSERT_IF_NEW, MODE_CHECK } doc_mode;

/* The result object of one document (its "status" says what happened)
 * from what the library answered; NULL with r set on a failure of the whole
 * request. */
static json_t *doc_result(doc_mode mode, const doc_in *d, int rc, int inserted,
                          const simstore_match *m, size_t n, const simstore_near_rule *rule,
                          reply *r, unsigned *status)
{
    json_t *out = json_pack("{s:o,s:o}", "id", json_id(d->doc.id, d->doc.id_len, d->doc.flags),
                            "fp", json_hex(d->doc.fp));
    if (!out) {
        reply_error(r, 503, "out of memory");
        return NULL;
    }
    if (rc == SIMSTORE_EEXIST) {
        *status = 409;
        json_object_set_new(out, "inserted", json_false());
        json_object_set_new(out, "error", json_string("a document with this id is stored"));
        return out;
    }
    if (rc != SIMSTORE_OK) {
        json_decref(out);
        if (mode == MODE_CHECK)
            reply_api_error(r, rc, "query");
        else
            reply_write_error(r, rc, "insert");
        return NULL;
    }
    *status = inserted ? 201 : 200;
    json_object_set_new(out, "inserted", json_boolean(inserted));
    /* A check answers what insert-if-new would: the rule's near-duplicates
     * among the matches within its k (insert-if-new's are already). */
    if (mode != MODE_INSERT)
        json_object_set_new(out, "matches",
                            rule_matches_json(m, n, 0, mode == MODE_CHECK ? rule : NULL));
    return out;
}

/* Apply one checked document: doc_result()'s answer. */
static json_t *apply_doc(serve_server *srv, worker *w, doc_mode mode,
                         const simstore_near_rule *rule, doc_in *d, reply *r, unsigned *status)
{
    const simstore_match *m = NULL;
    size_t n = 0;
    int inserted = 0, rc;
    if (mode == MODE_INSERT) {
        rc = simstore_live_insert(srv->live, &d->doc);
        inserted = rc == SIMSTORE_OK;
    } else if (mode == MODE_INSERT_IF_NEW) {
        rc = simstore_live_insert_if_new(w->lq, &d->doc, rule, &inserted, &m, &n);
    } else {
        rc = query_one(srv, w, &d->src, rule->k, &m, &n);
    }
    return doc_result(mode, d, rc, inserted, m, n, rule, r, status);
}

/* Append one result to results with its "status"; -1 with r set. */
static int push_result(json_t *results, json_t *out, unsigned status, reply *r)
{
    if (!out)
        return -1;
    json_object_set_new(out, "status", json_integer(status));
    if (json_array_append_new(results, out)) {
        reply_error(r, 503, "out of memory");
        return -1;
    }
    return 0;
}

/* The results of a batch of checked documents: checks one by one (they
 * write nothing); inserts in one simstore_live_apply_batch(), whose records
 * share one durable commit. 0, or -1 with r set. */
static int apply_docs(serve_server *srv, worker *w, doc_mode mode, const simstore_near_rule *rule,
                      doc_in *d, size_t count, json_t *results, reply *r)
{
    if (mode == MODE_CHECK) {
        for (size_t i = 0; i < count; i++) {
            /* The result first: apply_doc sets the status push_result takes
             * (one call with both would read it unset, in whichever order
             * the compiler evaluates the arguments). */
            unsigned status = 0;
            json_t *out = apply_doc(srv, w, mode, rule, &d[i], r, &status);
            if (push_result(results, out, status, r))
                return -1;
        }
        return 0;
    }
    simstore_live_change *changes = malloc((count ? count : 1) * sizeof *changes);
    simstore_live_result *res = malloc((count ? count : 1) * sizeof *res);
    int rc = -1;
    if (!changes || !res) {
        reply_error(r, 503, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        changes[i].op = mode == MODE_INSERT ? SIMSTORE_LIVE_INSERT : SIMSTORE_LIVE_INSERT_IF_NEW;
        changes[i].doc = d[i].doc;
    }
    int batch_rc = simstore_live_apply_batch(w->lq, changes, count, rule, res);
    if (batch_rc != SIMSTORE_OK) {
        reply_write_error(r, batch_rc, "insert");
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        unsigned status = 0;
        json_t *out = doc_result(mode, &d[i], res[i].rc, res[i].applied, res[i].matches,
                                 res[i].count, rule, r, &status);
        if (push_result(results, out, status, r))
            goto done;
    }
    rc = 0;
done:
    free(changes);
    free(res);
    return rc;
}

/* The bearer token and the read-only switch of write routes: 0 to go on. */
static int check_write(serve_server *srv, const serve_request *req, reply *r);

/* POST /v1/documents: one {"id", "text"|"fp", "meta", "mode", "k",
 * "min_similarity"} or {"documents": [...], "mode", "k", "min_similarity"};
 * insert-if-new and check judge by the near-duplicate rule. */
static void route_documents_post(serve_server *srv, worker *w, const serve_request *req,
                                 const json_t *body, reply *r)
{
    static const char *const fields[] = {"id",        "text",           "fp", "meta", "mode", "k",
                                         "documents", "min_similarity", NULL};
    static const char *const batch_fields[] = {"documents", "mode", "k", "min_similarity", NULL};
    static const char *const item_fields[] = {"id", "text", "fp", "meta", NULL};
    json_t *docs = json_object_get(body, "documents");
    if (check_fields(r, body, "", docs ? batch_fields : fields))
        return;
    doc_mode mode = MODE_INSERT;
    json_t *jm = json_object_get(body, "mode");
    if (jm) {
        const char *s = json_is_string(jm) ? json_string_value(jm) : "";
        if (strcmp(s, "insert") == 0)
            mode = MODE_INSERT;
        else if (strcmp(s, "insert-if-new") == 0)
            mode = MODE_INSERT_IF_NEW;
        else if (strcmp(s, "check") == 0)
            mode = MODE_CHECK;
        else {
            reply_error(r, 400, "mode must be \"insert\", \"insert-if-new\" or \"check\"");
            return;
        }
    }
    /* A check only reads: it needs neither the token nor a writable store. */
    if (mode != MODE_CHECK && check_write(srv, req, r))
        return;
    simstore_near_rule rule;
    if (json_near_rule(w, r, body, &rule))
        return;
    if (!docs) {
        doc_in *d = malloc(sizeof *d);
        unsigned status = 0;
        if (!d) {
            reply_error(r, 503, "out of memory");
            return;
        }
        if (parse_doc(srv, r, w, "", body, d) == 0) {
            json_t *out = apply_doc(srv, w, mode, &rule, d, r, &status);
            if (out) {
                r->status = status;
                r->json = out;
            }
        }
        free(d->meta);
        free(d);
        return;
    }
    if (!json_is_array(docs)) {
        reply_error(r, 400, "documents must be an array of document objects");
        return;
    }
    size_t count = json_array_size(docs);
    if (count > srv->o.max_batch) {
        reply_error(r, 413, "documents holds %zu documents, above the limit of %zu", count,
                    srv->o.max_batch);
        return;
    }
    doc_in *d = calloc(count ? count : 1, sizeof *d);
    json_t *results = json_array();
    if (!d || !results) {
        reply_error(r, 503, "out of memory");
        goto done;
    }
    /* Every document is checked before the first is applied. */
    for (size_t i = 0; i < count; i++) {
        json_t *item = json_array_get(docs, i);
        char where[48];
        snprintf(where, sizeof where, "documents[%zu]: ", i);
        if (!json_is_object(item)) {
            reply_error(r, 400, "%smust be an object", where);
            goto done;
        }
        if (check_fields(r, item, where, item_fields) || parse_doc(srv, r, w, where, item, &d[i]))
            goto done;
    }
    if (apply_docs(srv, w, mode, &rule, d, count, results, r))
        goto done;
    r->status = 200;
    r->json = json_pack("{s:O}", "results", results);
done:
    for (size_t i = 0; d && i < count; i++)
        free(d[i].meta);
    free(d);
    json_decref(results);
}

typedef struct got_doc {
    json_t *json;
    int missing;
} got_doc;

static json_t *document_json(const simstore_document *doc)
{
    json_t *o = json_pack("{s:o,s:o,s:I,s:I}", "id", json_id(doc->id, doc->id_len, doc->flags),
                          "fp", json_hex(doc->fp), "segment", (json_int_t)doc->segment, "insertion",
                          (json_int_t)doc->insertion);
    if (o && doc->meta)
        json_object_set_new(o, "meta", json_meta(doc->meta, doc->meta_len));
    return o;
}

static int got_one(void *ctx, const simstore_document *doc)
{
    got_doc *g = ctx;
    g->missing = doc->missing;
    if (!doc->missing && !(g->json = document_json(doc)))
        return SIMSTORE_ENOMEM;
    return 0;
}

/* GET /v1/documents/ID */
static void route_document_get(serve_server *srv, worker *w, const char *id, size_t id_len,
                               reply *r)
{
    got_doc g = {NULL, 1};
    int rc;
    if (srv->live) {
        simstore_document doc;
        rc = simstore_live_get(w->lq, id, id_len, &doc);
        if (rc == 1) {
            g.missing = 0;
            rc = (g.json = document_json(&doc)) ? SIMSTORE_OK : SIMSTORE_ENOMEM;
        }
    } else {
        const char *ids[1] = {id};
        size_t lens[1] = {id_len};
        rc = simstore_get(w->gen->store, ids, lens, 1, got_one, &g);
    }
    if (rc != SIMSTORE_OK) {
        json_decref(g.json);
        reply_api_error(r, rc, "get");
        return;
    }
    if (g.missing) {
        char shown[MESSAGE_ID_BYTES];
        reply_error(r, 404, "no document has the id '%s'", message_id(id, id_len, shown));
        return;
    }
    r->status = 200;
    r->json = g.json;
}

/* DELETE /v1/documents/ID */
static void route_document_delete(serve_server *srv, const char *id, size_t id_len, reply *r)
{
    int rc = simstore_live_delete(srv->live, id, id_len);
    if (rc == SIMSTORE_ENOTFOUND) {
        char shown[MESSAGE_ID_BYTES];
        reply_error(r, 404, "no document has the id '%s'", message_id(id, id_len, shown));
        return;
    }
    if (rc != SIMSTORE_OK) {
        reply_write_error(r, rc, "delete");
        return;
    }
    r->status = 200;
    r->json = json_pack("{s:o,s:b}", "id", json_text(id, id_len), "deleted", 1);
}

/* GET /v1/stats: what stats --json says, and the live part. */
static void route_stats(serve_server *srv, const store_gen *g, reply *r)
{
    simstore_stats st;
    int rc = simstore_get_stats(g->store, &st);
    if (rc != SIMSTORE_OK) {
        reply_api_error(r, rc, "stats");
        return;
    }
    /* The object stats --json prints, from the same writer. */
    char *text = NULL;
    size_t text_len = 0;
    FILE *mem = open_memstream(&text, &text_len);
    json_t *o = NULL;
    if (mem) {
        stats_json(mem, g->store, &st);
        if (fclose(mem) == 0)
            o = json_loadb(text, text_len, 0, NULL);
    }
    free(text);
    if (o)
        json_object_set_new(o, "read_only", json_boolean(srv->live == NULL));
    if (o && srv->live) {
        simstore_live_stats ls;
        simstore_live_get_stats(srv->live, &ls);
        json_object_set_new(
            o, "live",
            json_pack(
                "{s:I,s:I,s:I,s:I,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:o}",
                "memtable_documents", (json_int_t)ls.memtable_docs, "memtable_deletes",
                (json_int_t)ls.memtable_deletes, "memtable_changes",
                (json_int_t)ls.memtable_changes, "memtable_bytes", (json_int_t)ls.memtable_bytes,
                "flushing", ls.flushing, "wal_bytes", (json_int_t)ls.wal_bytes, "wal_records",
                (json_int_t)ls.wal_records, "wal_syncs", (json_int_t)ls.wal_syncs, "wal_last_seq",
                (json_int_t)ls.wal_last_seq, "wal_applied_seq", (json_int_t)ls.wal_applied_seq,
                "replayed", (json_int_t)ls.replayed, "flushes", (json_int_t)ls.flushes,
                "compactions", (json_int_t)ls.compactions, "inserts", (json_int_t)ls.inserts,
                "deletes", (json_int_t)ls.deletes, "failing", ls.failing, "failure",
                ls.failing ? live_failure(&ls) : json_null()));
    }
    r->status = o ? 200 : 503;
    r->json = o ? o : json_pack("{s:s}", "error", "out of memory");
}

/* ---- /metrics ------------------------------------------------------------- */

static void route_metrics(serve_server *srv, const store_gen *g, reply *r)
{
    if (serve_metrics_render(srv->metrics, atomic_load(&srv->memory.used), g->store, srv->live,
                             &r->text, &r->text_len)) {
        reply_error(r, 503, "out of memory");
        return;
    }
    r->status = 200;
}

void serve_record_closed(serve_server *srv, serve_close_reason why)
{
    serve_metrics_record_closed(srv->metrics, why);
}

void serve_record(serve_server *srv, serve_route route, unsigned status, double seconds)
{
    serve_metrics_record(srv->metrics, route, status, seconds);
}

/* ---- Authorization ---------------------------------------------------------- */

/* Whether given[0..given_len) equals token, in time that depends on the
 * token's length only. */
static int token_equal(const char *given, size_t given_len, const char *token)
{
    size_t token_len = strlen(token);
    unsigned char diff = given_len != token_len;
    for (size_t i = 0; i < token_len; i++)
        diff |= (unsigned char)(token[i] ^ (i < given_len ? given[i] : 0));
    return diff == 0;
}

static int check_write(serve_server *srv, const serve_request *req, reply *r)
{
    if (!srv->live) {
        reply_error(r, 403, "the server is read-only (--read-only)");
        return -1;
    }
    if (!srv->o.token)
        return 0;
    const char *a = req->authorization;
    if (!a || strncasecmp(a, "Bearer ", 7) != 0) {
        reply_error(r, 401, "this route needs the header 'Authorization: Bearer TOKEN'");
        return -1;
    }
    a += 7;
    while (*a == ' ')
        a++;
    if (!token_equal(a, strlen(a), srv->o.token)) {
        reply_error(r, 401, "wrong bearer token");
        return -1;
    }
    return 0;
}

/* ---- Dispatch ------------------------------------------------------------- */

/* 503: the requests in flight hold all the memory --request-memory gives
 * them; this one may be answered in a moment. */
static void server_busy(serve_server *srv, reply *r)
{
    reply_error(r, 503,
                "the requests in flight hold the %zu bytes of memory the server gives request "
                "bodies and their JSON (--request-memory): try again shortly",
                srv->o.request_memory_bytes);
    r->retry_after = 1;
}

/* The body's JSON object. Bounds first, before jansson allocates (a body
 * of small values costs jansson a hundred times its bytes): the scan
 * refuses a body that is not an object, nests too deep or whose batch
 * array (batch_key, of batch_nouns) passes --max-batch, as soon as it sees
 * it, and bounds what the parse will hold: past SERVE_PARSE_BYTES(--max-body)
 * the body is refused, and the rest is reserved from --request-memory for
 * the request's life (given back by serve_handle). */
static json_t *parse_body(serve_server *srv, const serve_request *req, const char *batch_key,
                          const char *batch_nouns, reply *r)
{
    if (req->body_len == 0) {
        reply_error(r, 400, "the request needs a JSON object as its body");
        return NULL;
    }
    size_t parse_bytes = 0, parse_limit = SERVE_PARSE_BYTES(srv->o.max_body_bytes);
    switch (reqjson_scan(req->body, req->body_len, batch_key, srv->o.max_batch, &parse_bytes)) {
    case REQJSON_NOT_OBJECT: reply_error(r, 400, "the body must be a JSON object"); return NULL;
    case REQJSON_TOO_DEEP:
        reply_error(r, 400, "the body nests arrays and objects deeper than %d levels",
                    REQJSON_MAX_DEPTH);
        return NULL;
    case REQJSON_BATCH_TOO_LONG:
        reply_error(r, 413, "%s holds more than %zu %s, above the limit of %zu (--max-batch)",
                    batch_key, srv->o.max_batch, batch_nouns, srv->o.max_batch);
        return NULL;
    default: break;
    }
    if (parse_bytes > parse_limit) {
        reply_error(r, 413,
                    "the body's JSON would take %zu bytes of memory to parse, above the limit of "
                    "%zu (twice --max-body and 1 MiB): send fewer or smaller values",
                    parse_bytes, parse_limit);
        return NULL;
    }
    if (serve_memory_take(srv, parse_bytes) != 0) {
        server_busy(srv, r);
        return NULL;
    }
    r->parse_reserved = parse_bytes;
    json_error_t err;
    json_t *j = reqjson_load(req->body, req->body_len, &err);
    if (!j) {
        reply_error(r, 400, "malformed JSON at line %d, column %d: %s", err.line, err.column,
                    err.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        reply_error(r, 400, "the body must be a JSON object");
        return NULL;
    }
    return j;
}

#define DOCUMENTS_PREFIX "/v1/documents/"

/* Whether path[0..len), which may hold NUL bytes, is route. */
static int path_is(const char *path, size_t len, const char *route)
{
    return len == strlen(route) && memcmp(path, route, len) == 0;
}

/* GET /healthz: ok, or 503 while the live store refuses changes (its log
 * cannot be written, say on a full disk), so that a supervisor sees it. */
static void route_healthz(serve_server *srv, reply *r)
{
    simstore_live_stats ls = {0};
    if (srv->live)
        simstore_live_get_stats(srv->live, &ls);
    if (ls.failing) {
        r->status = 503;
        r->json = json_pack("{s:s,s:o,s:b}", "status", "failing", "error", live_failure(&ls),
                            "read_only", 0);
        return;
    }
    r->status = 200;
    r->json = json_pack("{s:s,s:b}", "status", "ok", "read_only", srv->live == NULL);
}

static void dispatch(serve_server *srv, const serve_request *req, reply *r, serve_route *route)
{
    const char *method = req->method ? req->method : "";
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0,
        del = strcmp(method, "DELETE") == 0;
    size_t raw_len = req->path_len;
    char *path = malloc(raw_len + 1);
    size_t path_len = 0;
    store_gen *g = NULL;
    worker *w = NULL;
    json_t *body = NULL;
    if (!path) {
        reply_error(r, 503, "out of memory");
        return;
    }
    /* NUL bytes (%00) are for the ids of documents an older version
     * stored: no route's name holds one. */
    if (percent_decode(req->path ? req->path : "", raw_len, 0, 1, path, &path_len)) {
        reply_error(r, 400, "the path has a bad percent-escape");
        goto done;
    }
    const char *allowed = NULL;
    size_t prefix_len = strlen(DOCUMENTS_PREFIX);
    if (path_is(path, path_len, "/v1/query")) {
        *route = post ? SERVE_ROUTE_QUERY_POST : SERVE_ROUTE_QUERY_GET;
        allowed = get || post ? NULL : "GET, POST";
    } else if (path_is(path, path_len, "/v1/documents")) {
        *route = SERVE_ROUTE_DOCUMENTS_POST;
        allowed = post ? NULL : "POST";
    } else if (path_len >= prefix_len && memcmp(path, DOCUMENTS_PREFIX, prefix_len) == 0) {
        *route = del ? SERVE_ROUTE_DOCUMENT_DELETE : SERVE_ROUTE_DOCUMENT_GET;
        allowed = get || del ? NULL : "GET, DELETE";
    } else if (path_is(path, path_len, "/v1/stats")) {
        *route = SERVE_ROUTE_STATS;
        allowed = get ? NULL : "GET";
    } else if (path_is(path, path_len, "/healthz")) {
        *route = SERVE_ROUTE_HEALTHZ;
        allowed = get ? NULL : "GET";
    } else if (path_is(path, path_len, "/metrics")) {
        *route = SERVE_ROUTE_METRICS;
        allowed = get ? NULL : "GET";
    } else {
        char shown[MESSAGE_ID_BYTES];
        *route = SERVE_ROUTE_OTHER;
        reply_error(r, 404, "no route %s (see the README, \"Serve\")",
                    message_id(path, path_len, shown));
        goto done;
    }
    if (allowed) {
        char shown[4 * 32 + 4];
        reply_error(r, 405, "%s takes %s, not %s",
                    *route == SERVE_ROUTE_DOCUMENT_GET ? DOCUMENTS_PREFIX "ID" : path, allowed,
                    cli_escape(method, strlen(method), shown, sizeof shown));
        goto done;
    }
    if (*route != SERVE_ROUTE_QUERY_GET && req->query && req->query_len) {
        reply_error(r, 400, "%s takes no query parameters",
                    *route == SERVE_ROUTE_DOCUMENT_GET || *route == SERVE_ROUTE_DOCUMENT_DELETE
                        ? DOCUMENTS_PREFIX "ID"
                        : path);
        goto done;
    }
    if (*route == SERVE_ROUTE_HEALTHZ) {
        route_healthz(srv, r);
        goto done;
    }
    if (*route == SERVE_ROUTE_DOCUMENT_DELETE && check_write(srv, req, r))
        goto done;
    if (*route == SERVE_ROUTE_QUERY_POST || *route == SERVE_ROUTE_DOCUMENTS_POST) {
        if (req->body_len > srv->o.max_body_bytes) {
            reply_error(r, 413, "the body has %zu bytes, above the limit of %zu", req->body_len,
                        srv->o.max_body_bytes);
            goto done;
        }
        body = *route == SERVE_ROUTE_QUERY_POST ? parse_body(srv, req, "queries", "queries", r)
                                                : parse_body(srv, req, "documents", "documents", r);
        if (!body)
            goto done;
    }
    /* The store to answer from (a read-only server follows its path). */
    g = gen_acquire(srv);
    if (*route == SERVE_ROUTE_STATS) {
        route_stats(srv, g, r);
        goto done;
    }
    if (*route == SERVE_ROUTE_METRICS) {
        route_metrics(srv, g, r);
        goto done;
    }
    int rc = worker_take(srv, g, &w);
    if (rc != SIMSTORE_OK) {
        reply_api_error(r, rc, "query context");
        goto done;
    }
    const char *id = path + prefix_len;
    size_t id_len = path_len >= prefix_len ? path_len - prefix_len : 0;
    /* Gets and deletes take any id of 1..511 bytes, as the library's
     * readers do: an id stored by an older version may break today's rule. */
    if ((*route == SERVE_ROUTE_DOCUMENT_GET || *route == SERVE_ROUTE_DOCUMENT_DELETE) &&
        (id_len == 0 || id_len > SIMSTORE_MAX_ID_BYTES)) {
        reply_error(r, 400, "a document id has 1 to %u bytes", SIMSTORE_MAX_ID_BYTES);
        goto done;
    }
    switch (*route) {
    case SERVE_ROUTE_QUERY_GET: route_query_get(srv, w, req, r); break;
    case SERVE_ROUTE_QUERY_POST: route_query_post(srv, w, body, r); break;
    case SERVE_ROUTE_DOCUMENTS_POST: route_documents_post(srv, w, req, body, r); break;
    case SERVE_ROUTE_DOCUMENT_GET: route_document_get(srv, w, id, id_len, r); break;
    case SERVE_ROUTE_DOCUMENT_DELETE: route_document_delete(srv, id, id_len, r); break;
    default: break;
    }
done:
    worker_give_back(srv, w);
    if (g)
        gen_release(srv, g);
    json_decref(body);
    free(path);
}

static void finish(reply *r, serve_response *out)
{
    if (r->text) {
        out->status = r->status;
        out->content_type = "text/plain; version=0.0.4; charset=utf-8";
        out->body = r->text;
        out->body_len = r->text_len;
        return;
    }
    /* One line: a response read with curl ends in a newline. */
    size_t len = 0;
    char *s = r->json ? dump_json(r->json, JSON_COMPACT, 1, &len) : NULL;
    json_decref(r->json);
    out->content_type = "application/json";
    out->retry_after = r->retry_after;
    if (!s) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        out->status = 503;
        out->body = malloc(sizeof oom);
        if (out->body)
            memcpy(out->body, oom, sizeof oom);
        out->body_len = out->body ? sizeof oom - 1 : 0;
        return;
    }
    out->status = r->status;
    out->body = s;
    out->body_len = len;
}

/* After a request whose JSON took this much, the memory its values took
 * (small blocks spread over the allocator's arenas) goes back to the
 * system: malloc would keep it for the process's life. */
#define TRIM_AFTER_PARSE_BYTES ((size_t)1 << 20)

void serve_handle(serve_server *srv, const serve_request *req, serve_response *out)
{
    reply r = {.status = 500};
    memset(out, 0, sizeof *out);
    out->route = SERVE_ROUTE_OTHER;
    dispatch(srv, req, &r, &out->route);
    if (!r.json && !r.text)
        reply_error(&r, 500, "internal error: no answer");
    finish(&r, out);
    /* The body's values are freed (the answer is text now). */
    serve_memory_give(srv, r.parse_reserved);
    if (r.parse_reserved >= TRIM_AFTER_PARSE_BYTES)
        malloc_trim(0);
}

void serve_too_large(serve_server *srv, serve_response *out)
{
    reply r = {.status = 500};
    memset(out, 0, sizeof *out);
    out->route = SERVE_ROUTE_OTHER;
    reply_error(&r, 413, "the body is above the limit of %zu bytes", srv->o.max_body_bytes);
    finish(&r, out);
}

void serve_busy(serve_server *srv, serve_response *out)
{
    reply r = {.status = 500};
    memset(out, 0, sizeof *out);
    out->route = SERVE_ROUTE_OTHER;
    server_busy(srv, &r);
    finish(&r, out);
}

void serve_stopping(serve_server *srv, serve_response *out)
{
    (void)srv;
    reply r = {.status = 503};
    memset(out, 0, sizeof *out);
    out->route = SERVE_ROUTE_OTHER;
    reply_error(&r, 503, "the server is stopping: try again once it is back");
    r.retry_after = 1;
    finish(&r, out);
}

void serve_response_free(serve_response *r)
{
    if (r) {
        free(r->body);
        r->body = NULL;
    }
}
