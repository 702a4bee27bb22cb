/* serve.c: the simstore serve command: options, libmicrohttpd around the
 * request handler (handler.c), the connections' deadlines and room for new
 * clients, the memory of request bodies, the access log, and the signals
 * (SIGTERM drains and flushes, SIGHUP reopens the log). */
#include "cli.h"
#include "handler.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#define CMD "serve"
#define DEFAULT_LISTEN "127.0.0.1:8077"
#define DEFAULT_TIMEOUT_SECONDS 30u
#define DEFAULT_REQUEST_TIMEOUT_SECONDS 30u
#define DEFAULT_MAX_CONNECTIONS 1024u
#define DEFAULT_MAX_CONNECTIONS_PER_IP 128u
/* The default --request-memory, unless three times --max-body is more. */
#define DEFAULT_REQUEST_MEMORY_BYTES ((size_t)256 << 20)
/* The smallest --memtable: what the changes add to an empty in-memory
 * table (whose own ~100 KiB are not counted); 16K holds a hundred or more
 * small documents, so a flush is never a change or two. */
#define MIN_MEMTABLE_BYTES (16u << 10)
/* A request's deadline grows by a second for each this many bytes of its
 * body (a client sending 16 MiB at 64 KiB/s still makes it). */
#define BODY_BYTES_PER_SECOND (64u << 10)
/* File descriptors kept for the store, its log and its flushes besides
 * the connections. */
#define SPARE_FDS 256u
/* After a request whose body took this much, malloc's free memory goes
 * back to the system. */
#define TRIM_AFTER_BODY_BYTES ((size_t)1 << 20)
/* malloc's thresholds, fixed: blocks of 1 MiB and more are mapped on their
 * own (and unmapped when freed), and a thread's arena gives back free
 * memory at its top past 1 MiB. glibc would raise both to the largest
 * block freed so far (up to 32 and 64 MiB), so that after one 16 MiB body
 * each thread kept that much free memory for the process's life. */
#define MALLOC_MMAP_THRESHOLD_BYTES (1 << 20)
#define MALLOC_TRIM_THRESHOLD_BYTES (1 << 20)
#define DRAIN_SECONDS 30
/* How often the connections are looked at for their deadlines. */
#define SWEEP_MS 100
/* Threads answering writes (writers_start below): they spend their time
 * waiting for the log's fsync, so more of them than cores; writes waiting
 * at once share one fsync. */
#define WRITER_THREADS 16

int cmd_serve(int argc, char **argv);

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore serve STORE [OPTIONS]\n"
                 "\n"
                 "Serve a store over HTTP/1.1 with JSON (README.md, \"Serve\"): queries,\n"
                 "online inserts and deletes (durable before their answer), stats, metrics.\n"
                 "\n"
                 "Options:\n"
                 "      --listen ADDR:PORT   address and port (default " DEFAULT_LISTEN "):\n"
                 "                           IPv4 as 127.0.0.1:8077, IPv6 in brackets as\n"
                 "                           [::1]:8077; [::]:PORT takes IPv6 and IPv4\n"
                 "                           (dual stack); port 0 picks a free one, and the\n"
                 "                           first line on stdout says which\n"
                 "      --threads N          threads answering requests (default: every core);\n"
                 "                           writes wait for the log on 16 threads besides\n"
                 "      --token-file FILE    write routes need 'Authorization: Bearer TOKEN',\n"
                 "                           TOKEN the file's first line\n"
                 "      --read-only          open the store read-only: writes get 403, and\n"
                 "                           the CLI's add, delete and compact keep working;\n"
                 "                           when build --replace or compact's shrink swaps\n"
                 "                           another store in, the next request opens it\n"
                 "      --log FILE           the access log, one line a request (default:\n"
                 "                           stderr); SIGHUP reopens it\n"
                 "      --memtable SIZE      flush inserts into a new segment past this size\n"
                 "                           (default 64M, at least 16K); writes wait while a\n"
                 "                           second table passes it before the first is flushed\n"
                 "      --max-body SIZE      largest request body (default 16M; 413 above); its\n"
                 "                           JSON may take twice that and 1M while parsed\n"
                 "      --max-batch N        most queries or documents in one request\n"
                 "                           (default 10000; 413 above)\n"
                 "      --request-memory SIZE  memory the bodies of the requests in flight and\n"
                 "                           their parsed JSON may hold together (default\n"
                 "                           256M, or 3 x --max-body + 1M if more; at least\n"
                 "                           that): 503 and Retry-After past it\n"
                 "      --timeout SECONDS    close connections idle this long (default 30)\n"
                 "      --request-timeout SECONDS  a client has this long to send a request's\n"
                 "                           head and body, a second more for every 64 KiB of\n"
                 "                           body, and as long to take its answer; closed past\n"
                 "                           it, even while it trickles bytes (default 30)\n"
                 "      --max-connections N  connections at once (default 1024, fewer if the\n"
                 "                           open-file limit leaves no room); once 7/8 of them\n"
                 "                           are open, those waiting longest for a request are\n"
                 "                           closed, so that new clients find room\n"
                 "      --max-connections-per-ip N  connections at once from one client address\n"
                 "                           (default 128; 0: no limit); more are refused\n"
                 "      --huge-pages         bring the store's files into the page cache in\n"
                 "                           2 MiB pages as they are first read (for a store\n"
                 "                           kept in RAM: queries then map it 2 MiB at a time)\n"
                 "  -h, --help               this help\n"
                 "\n"
                 "SIGTERM or SIGINT: finish the requests in flight (new ones get 503), flush\n"
                 "the in-memory inserts into the store and exit 0.\n");
}

/* ---- The access log --------------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;       /* stderr, or the --log file */
static const char *log_path; /* NULL: stderr */

static int log_open(void)
{
    if (!log_path) {
        log_file = stderr;
        return 0;
    }
    FILE *f = fopen(log_path, "a");
    if (!f)
        return -1;
    setvbuf(f, NULL, _IOLBF, 0);
    pthread_mutex_lock(&log_lock);
    FILE *old = log_file;
    log_file = f;
    pthread_mutex_unlock(&log_lock);
    if (old && old != stderr)
        fclose(old);
    return 0;
}

/* s[0..len) as a field of the access log: control characters (C0, DEL,
 * C1), bytes that are not UTF-8, '"' and '\' as \xHH, so that a request
 * line can neither forge a log line nor end its quoted field early, and a
 * reader can undo the escapes. Writes at most size bytes, NUL-terminated,
 * ending in "..." when the field does not fit. The one escape of every
 * request field the log prints (the method and the URI). */
static const char *log_escape(const char *s, size_t len, char *buf, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    size_t o = 0;
    while (p < end) {
        unsigned c = p[0];
        size_t keep = 0; /* bytes copied as they are; 0: escape one */
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            keep = 1;
        } else if (c >= 0x80) {
            size_t n = cli_utf8_sequence(p, (size_t)(end - p));
            if (n && !(c == 0xc2 && p[1] < 0xa0)) /* U+0080..U+009F: C2 80..C2 9F */
                keep = n;
        }
        size_t need = keep ? keep : 4;
        if (o + need + 3 + 1 > size) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (keep) {
            memcpy(buf + o, p, keep);
            p += keep;
        } else {
            buf[o] = '\\';
            buf[o + 1] = 'x';
            buf[o + 2] = hex[c >> 4];
            buf[o + 3] = hex[c & 15];
            p++;
        }
        o += need;
    }
    buf[o] = '\0';
    return buf;
}

/* ---- Connections: deadlines, and room for new clients ------------------------
 * libmicrohttpd closes a connection idle for --timeout, but one that sends
 * a header line every few seconds is never idle, and 1,024 of them would
 * hold every connection the server takes. So every connection is in a
 * table with what it waits for and since when. A thread of its own closes
 * (shutdown(); libmicrohttpd then sees the end and closes it) those past
 * their deadline and, when the table is nearly full, those that have
 * waited longest for a request, so that new clients always find room. A
 * connection is removed from the table before libmicrohttpd closes its
 * socket (NOTIFY_CLOSED), under the table's lock: a shutdown() under the
 * lock never hits a socket number reused by another connection. */

typedef enum conn_phase {
    CONN_WAITING,   /* for a request's first line, since the start or the last answer */
    CONN_RECEIVING, /* for the rest of the request, its head and body */
    CONN_WORKING,   /* answering it: no deadline */
    CONN_SENDING    /* for the client to take the answer */
} conn_phase;

typedef struct conn {
    int fd;
    conn_phase phase;
    struct timespec since;
    size_t body_bytes; /* received of the request's body */
    int closing;       /* shut down: libmicrohttpd will close it */
    struct conn *prev, *next;
} conn;

typedef struct conn_table {
    pthread_mutex_t lock;
    conn *head;
    unsigned open;    /* connections not closing */
    unsigned room_at; /* past this many open, the longest waiting are closed */
    double idle_seconds, request_seconds;
    pthread_t sweeper;
    int sweeper_started, stopping;
    pthread_cond_t stop;
} conn_table;

static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void conn_set_phase(conn_table *t, struct MHD_Connection *c, conn_phase phase)
{
    conn *cn = conn_of(c);
    if (!cn)
        return;
    pthread_mutex_lock(&t->lock);
    cn->phase = phase;
    clock_gettime(CLOCK_MONOTONIC, &cn->since);
    cn->body_bytes = 0;
    pthread_mutex_unlock(&t->lock);
}

static void conn_received(conn_table *t, struct MHD_Connection *c, size_t bytes)
{
    conn *cn = conn_of(c);
    if (!cn)
        return;
    pthread_mutex_lock(&t->lock);
    cn->body_bytes += bytes;
    pthread_mutex_unlock(&t->lock);
}

/* Under t's lock. */
static void conn_close(conn_table *t, conn *cn)
{
    if (cn->fd >= 0)
        shutdown(cn->fd, SHUT_RDWR);
    cn->closing = 1;
    t->open--;
}

/* How long cn may stay in its phase; < 0: as long as it takes. */
static double conn_allowance(const conn_table *t, const conn *cn)
{
    switch (cn->phase) {
    case CONN_WAITING: return t->idle_seconds + t->request_seconds;
    case CONN_RECEIVING: return t->request_seconds + (double)cn->body_bytes / BODY_BYTES_PER_SECOND;
    case CONN_SENDING: return t->request_seconds;
    default: return -1;
    }
}

static int older_first(const void *a, const void *b)
{
    const conn *x = *(conn *const *)a, *y = *(conn *const *)b;
    if (x->since.tv_sec != y->since.tv_sec)
        return x->since.tv_sec < y->since.tv_sec ? -1 : 1;
    return x->since.tv_nsec < y->since.tv_nsec ? -1 : x->since.tv_nsec > y->since.tv_nsec;
}

/* Close what is past its deadline and, above room_at, what has waited
 * longest for a request. */
static void conns_sweep(conn_table *t, serve_server *srv)
{
    struct timespec now;
    unsigned late = 0, made_room = 0;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&t->lock);
    for (conn *cn = t->head; cn; cn = cn->next) {
        double allowed = conn_allowance(t, cn);
        if (!cn->closing && allowed >= 0 && seconds_between(&cn->since, &now) > allowed) {
            conn_close(t, cn);
            late++;
        }
    }
    if (t->open > t->room_at) {
        conn **waiting = malloc(t->open * sizeof *waiting);
        size_t n = 0;
        for (conn *cn = t->head; waiting && cn; cn = cn->next)
            if (!cn->closing && (cn->phase == CONN_WAITING || cn->phase == CONN_RECEIVING))
                waiting[n++] = cn;
        if (waiting)
            qsort(waiting, n, sizeof *waiting, older_first);
        for (size_t i = 0; i < n && t->open > t->room_at; i++) {
            conn_close(t, waiting[i]);
            made_room++;
        }
        free(waiting);
    }
    pthread_mutex_unlock(&t->lock);
    while (late--)
        serve_record_closed(srv, SERVE_CLOSED_DEADLINE);
    while (made_room--)
        serve_record_closed(srv, SERVE_CLOSED_ROOM);
}

/* ---- Requests ----------------------------------------------------------- */

typedef struct request_state request_state;

typedef struct server_state {
    serve_server *srv;
    size_t max_body_bytes;
    atomic_uint in_flight;
    atomic_int stopping; /* SIGTERM: new requests answered 503 */
    conn_table conns;
    /* Writes waiting for a writer thread (a FIFO), and the writers. */
    pthread_mutex_t write_lock;
    pthread_cond_t write_ready;
    request_state *write_head, *write_tail;
    int writers_stopping, writers_initialized;
    pthread_t writers[WRITER_THREADS];
    unsigned writer_count;
} server_state;

static void *sweeper_main(void *arg)
{
    server_state *st = arg;
    conn_table *t = &st->conns;
    pthread_mutex_lock(&t->lock);
    while (!t->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += SWEEP_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&t->stop, &t->lock, &until);
        if (t->stopping)
            break;
        pthread_mutex_unlock(&t->lock);
        conns_sweep(t, st->srv);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    server_state *st = cls;
    conn_table *t = &st->conns;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        /* Out of memory: the connection goes without a deadline. */
        conn *cn = calloc(1, sizeof *cn);
        if (!cn)
            return;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        cn->fd = ci ? ci->connect_fd : -1;
        cn->phase = CONN_WAITING;
        clock_gettime(CLOCK_MONOTONIC, &cn->since);
        pthread_mutex_lock(&t->lock);
        cn->next = t->head;
        if (t->head)
            t->head->prev = cn;
        t->head = cn;
        t->open++;
        pthread_mutex_unlock(&t->lock);
        *socket_context = cn;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn *cn = *socket_context;
        if (!cn)
            return;
        pthread_mutex_lock(&t->lock);
        if (cn->prev)
            cn->prev->next = cn->next;
        else
            t->head = cn->next;
        if (cn->next)
            cn->next->prev = cn->prev;
        if (!cn->closing)
            t->open--;
        pthread_mutex_unlock(&t->lock);
        free(cn);
        *socket_context = NULL;
    }
}

/* One request on a connection, from its URI to its completion. */
struct request_state {
    char *uri; /* raw, as the request line gave it */
    char *body;
    size_t body_len, body_cap;   /* body_cap is taken from --request-memory */
    unsigned long long declared; /* Content-Length; 0: none given */
    int started;
    int too_large; /* past --max-body: the rest is read and dropped, 413 */
    int no_memory; /* past --request-memory: the rest is read and dropped, 503 */
    struct timespec start;
    /* A write handed to a writer thread: its connection, suspended until
     * the answer is in resp (answered set; the resume orders the two). */
    struct MHD_Connection *conn;
    serve_request req;
    serve_response resp;
    int queued; /* handed to a writer (set and read on the polling thread) */
    atomic_int answered;
    request_state *next_write;
};

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return seconds_between(t0, &t);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    server_state *st = cls;
    conn_set_phase(&st->conns, c, CONN_RECEIVING);
    request_state *rs = calloc(1, sizeof *rs);
    if (!rs)
        return NULL;
    clock_gettime(CLOCK_MONOTONIC, &rs->start);
    rs->uri = strdup(uri ? uri : "");
    atomic_fetch_add(&st->in_flight, 1);
    return rs;
}

/* Drop rs's body and give its memory back. */
static void body_free(server_state *st, request_state *rs)
{
    free(rs->body);
    serve_memory_give(st->srv, rs->body_cap);
    if (rs->body_cap >= TRIM_AFTER_BODY_BYTES)
        malloc_trim(0);
    rs->body = NULL;
    rs->body_len = rs->body_cap = 0;
}

/* Room in rs's body for need bytes, taken from --request-memory: doubling,
 * up to the declared length (or --max-body) and a NUL. 0, or -1 when the
 * memory is not there (nothing changed). */
static int body_reserve(server_state *st, request_state *rs, size_t need)
{
    if (need <= rs->body_cap)
        return 0;
    size_t most = (rs->declared ? (size_t)rs->declared : st->max_body_bytes) + 1;
    size_t cap = rs->body_cap ? 2 * rs->body_cap : 4096;
    if (cap > most)
        cap = most;
    if (cap < need)
        cap = need;
    if (serve_memory_take(st->srv, cap - rs->body_cap) != 0)
        return -1;
    char *p = realloc(rs->body, cap);
    if (!p) {
        serve_memory_give(st->srv, cap - rs->body_cap);
        return -1;
    }
    rs->body = p;
    rs->body_cap = cap;
    return 0;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    server_state *st = cls;
    request_state *rs = *con_cls;
    (void)why;
    conn_set_phase(&st->conns, c, CONN_WAITING);
    if (!rs)
        return;
    if (rs->answered)
        serve_response_free(&rs->resp); /* NULL once sent */
    free(rs->uri);
    body_free(st, rs);
    free(rs);
    *con_cls = NULL;
    atomic_fetch_sub(&st->in_flight, 1);
}

/* The longest part of a method or URI the access log prints. */
#define LOG_FIELD_BYTES 256

static void access_log(struct MHD_Connection *c, const char *method, const char *uri,
                       const serve_response *resp, double seconds)
{
    char addr[INET6_ADDRSTRLEN] = "-";
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ci->client_addr)->sin_addr, addr,
                  sizeof addr);
    else if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ci->client_addr)->sin6_addr, addr,
                  sizeof addr);
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    /* The request line as received, escaped: it cannot forge log lines. */
    char method_esc[4 * LOG_FIELD_BYTES + 4], uri_esc[4 * LOG_FIELD_BYTES + 4];
    log_escape(method, strlen(method), method_esc, sizeof method_esc);
    log_escape(uri, strlen(uri), uri_esc, sizeof uri_esc);
    pthread_mutex_lock(&log_lock);
    if (log_file) {
        fprintf(log_file, "%s %s \"%s %s\" %u %zu %.3fms %s\n", when, addr, method_esc, uri_esc,
                resp->status, resp->body_len, seconds * 1e3, serve_route_name(resp->route));
        fflush(log_file);
    }
    pthread_mutex_unlock(&log_lock);
}

static enum MHD_Result respond(server_state *st, struct MHD_Connection *c, const char *method,
                               request_state *rs, serve_response *resp)
{
    double seconds = seconds_since(&rs->start);
    conn_set_phase(&st->conns, c, CONN_SENDING);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        serve_response_free(resp);
        return MHD_NO;
    }
    resp->body = NULL; /* MHD frees it */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    if (resp->status == 401)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (resp->retry_after > 0) {
        char seconds_text[16];
        snprintf(seconds_text, sizeof seconds_text, "%d", resp->retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, seconds_text);
    }
    enum MHD_Result ok = MHD_queue_response(c, resp->status, r);
    MHD_destroy_response(r);
    serve_record(st->srv, resp->route, resp->status, seconds);
    access_log(c, method, rs->uri ? rs->uri : "", resp, seconds);
    return ok;
}

/* ---- Writes off the polling threads ---------------------------------------
 * An insert, insert-if-new or delete is answered only once its log record
 * is durable: an fsync, a millisecond or more on common disks. Handled on a
 * polling thread, it would hold up every other connection of that thread
 * for as long, and writes could share an fsync only with writes of the
 * other polling threads. So a write's connection is suspended and the
 * request handed to a writer thread, which answers it and resumes the
 * connection; the polling thread sends the answer. Writes that wait at
 * once share the log's fsync (simstore_live's group commit). */

static void *writer_main(void *arg)
{
    server_state *st = arg;
    for (;;) {
        pthread_mutex_lock(&st->write_lock);
        while (!st->write_head && !st->writers_stopping)
            pthread_cond_wait(&st->write_ready, &st->write_lock);
        request_state *rs = st->write_head;
        if (rs) {
            st->write_head = rs->next_write;
            if (!st->write_head)
                st->write_tail = NULL;
        }
        pthread_mutex_unlock(&st->write_lock);
        if (!rs)
            return NULL; /* stopping, and the queue is empty */
        serve_handle(st->srv, &rs->req, &rs->resp);
        atomic_store_explicit(&rs->answered, 1, memory_order_release);
        MHD_resume_connection(rs->conn);
    }
}

static int writers_start(server_state *st)
{
    pthread_mutex_init(&st->write_lock, NULL);
    pthread_cond_init(&st->write_ready, NULL);
    st->writers_initialized = 1;
    for (st->writer_count = 0; st->writer_count < WRITER_THREADS; st->writer_count++)
        if (pthread_create(&st->writers[st->writer_count], NULL, writer_main, st) != 0)
            break;
    return st->writer_count > 0 ? 0 : -1;
}

/* The writers answer what is queued and exit; writes that come after are
 * answered on the polling threads (write_enqueue refuses them), so no
 * connection stays suspended. */
static void writers_stop(server_state *st)
{
    pthread_mutex_lock(&st->write_lock);
    st->writers_stopping = 1;
    pthread_cond_broadcast(&st->write_ready);
    pthread_mutex_unlock(&st->write_lock);
    for (unsigned i = 0; i < st->writer_count; i++)
        pthread_join(st->writers[i], NULL);
    st->writer_count = 0;
}

/* Suspends c and queues rs for a writer; 0, or -1 when there are no
 * writers (then c is not suspended: answer on this thread). */
static int write_enqueue(server_state *st, struct MHD_Connection *c, request_state *rs)
{
    pthread_mutex_lock(&st->write_lock);
    if (st->writers_stopping || st->writer_count == 0) {
        pthread_mutex_unlock(&st->write_lock);
        return -1;
    }
    rs->conn = c;
    rs->next_write = NULL;
    MHD_suspend_connection(c);
    if (st->write_tail)
        st->write_tail->next_write = rs;
    else
        st->write_head = rs;
    st->write_tail = rs;
    pthread_cond_signal(&st->write_ready);
    pthread_mutex_unlock(&st->write_lock);
    return 0;
}

/* The routes that write: POST /v1/documents (every mode but check writes)
 * and DELETE /v1/documents/ID. */
static int is_write(const char *method, const char *path, size_t path_len)
{
    static const char documents[] = "/v1/documents";
    size_t n = sizeof documents - 1;
    if (path_len < n || memcmp(path, documents, n) != 0 || (path_len > n && path[n] != '/'))
        return 0;
    return strcmp(method, MHD_HTTP_METHOD_POST) == 0 || strcmp(method, MHD_HTTP_METHOD_DELETE) == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    server_state *st = cls;
    request_state *rs = *con_cls;
    (void)url;
    (void)version;
    if (!rs || !rs->uri)
        return MHD_NO; /* out of memory at the URI: drop the connection */
    if (!rs->started) {
        rs->started = 1;
        if (atomic_load(&st->stopping)) {
            serve_response resp;
            serve_stopping(st->srv, &resp);
            return respond(st, c, method, rs, &resp);
        }
        /* A declared length above the limit is refused before its body.
         * One the memory of the requests in flight has no room for now is
         * read and dropped, then answered 503: a client sending a large
         * body reads no answer before it has sent it all. */
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long declared;
        if (cl && cli_parse_uint(cl, 0, ~0ull, &declared) == 0) {
            if (declared > st->max_body_bytes) {
                serve_response resp;
                serve_too_large(st->srv, &resp);
                rs->too_large = 1;
                return respond(st, c, method, rs, &resp);
            }
            if (serve_memory_take(st->srv, (size_t)declared + 1) != 0)
                rs->no_memory = 1;
            else
                serve_memory_give(st->srv, (size_t)declared + 1);
            rs->declared = declared;
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        conn_received(&st->conns, c, n);
        if (rs->too_large || rs->no_memory)
            return MHD_YES; /* read and dropped */
        if (rs->body_len + n > st->max_body_bytes) {
            /* Read and drop the rest: the answer is 413. */
            rs->too_large = 1;
            body_free(st, rs);
            return MHD_YES;
        }
        /* The body's memory is taken as its bytes come (a client that
         * declares a length and sends nothing holds none): when it is not
         * there, the rest is dropped and the answer is 503. */
        if (body_reserve(st, rs, rs->body_len + n + 1) != 0) {
            rs->no_memory = 1;
            body_free(st, rs);
            return MHD_YES;
        }
        memcpy(rs->body + rs->body_len, upload_data, n);
        rs->body_len += n;
        return MHD_YES;
    }
    /* A writer's answer: the writer resumed the connection. */
    if (atomic_load_explicit(&rs->answered, memory_order_acquire))
        return respond(st, c, method, rs, &rs->resp);
    if (rs->queued)
        return MHD_YES; /* with a writer still (the connection is suspended) */
    serve_response resp;
    if (rs->too_large) {
        serve_too_large(st->srv, &resp);
        return respond(st, c, method, rs, &resp);
    }
    if (rs->no_memory) {
        serve_busy(st->srv, &resp);
        return respond(st, c, method, rs, &resp);
    }
    conn_set_phase(&st->conns, c, CONN_WORKING);
    char *q = strchr(rs->uri, '?');
    serve_request req = {
        .method = method,
        .path = rs->uri,
        .path_len = q ? (size_t)(q - rs->uri) : strlen(rs->uri),
        .query = q ? q + 1 : NULL,
        .query_len = q ? strlen(q + 1) : 0,
        .authorization =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
        .body = rs->body ? rs->body : "",
        .body_len = rs->body_len,
    };
    /* The strings req points to (MHD's method and header values, rs's URI
     * and body) live until the request completes, after the answer. */
    if (is_write(method, req.path, req.path_len)) {
        rs->req = req;
        if (write_enqueue(st, c, rs) == 0) {
            rs->queued = 1;
            return MHD_YES;
        }
    }
    serve_handle(st->srv, &req, &resp);
    return respond(st, c, method, rs, &resp);
}

/* ---- Options ----------------------------------------------------------------- */

/* A --listen address: IPv4 "ADDR:PORT" or IPv6 "[ADDR]:PORT". */
typedef struct listen_addr {
    union {
        struct sockaddr sa;
        struct sockaddr_in v4;
        struct sockaddr_in6 v6;
    } u;
    unsigned mhd_flags; /* MHD_USE_IPv6, or MHD_USE_DUAL_STACK for [::] */
} listen_addr;

/* Parse arg into *out: NULL, or what is wrong with it. */
static const char *parse_listen(const char *arg, listen_addr *out)
{
    char host[INET6_ADDRSTRLEN];
    const char *host_start = arg, *host_end, *port;
    memset(out, 0, sizeof *out);
    if (arg[0] == '[') {
        host_start = arg + 1;
        host_end = strchr(host_start, ']');
        if (!host_end)
            return "an IPv6 address needs its closing ']'";
        if (host_end[1] != ':')
            return "the port follows the IPv6 address after ':', as in [::1]:8077";
        port = host_end + 2;
    } else {
        host_end = strrchr(arg, ':');
        if (!host_end)
            return "no ':PORT'";
        if (memchr(arg, ':', (size_t)(host_end - arg)))
            return "an IPv6 address goes in brackets, as in [::1]:8077";
        port = host_end + 1;
    }
    size_t host_len = (size_t)(host_end - host_start);
    if (host_len == 0 || host_len >= sizeof host)
        return "no address before the port";
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    unsigned long long port_number;
    if (cli_parse_uint(port, 0, 65535, &port_number) != 0)
        return "the port must be a number from 0 to 65535";
    if (arg[0] == '[') {
        out->u.v6.sin6_family = AF_INET6;
        out->u.v6.sin6_port = htons((uint16_t)port_number);
        if (inet_pton(AF_INET6, host, &out->u.v6.sin6_addr) != 1)
            return "not an IPv6 address between the brackets";
        /* The unspecified address takes IPv4 connections too. */
        out->mhd_flags =
            IN6_IS_ADDR_UNSPECIFIED(&out->u.v6.sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
        return NULL;
    }
    out->u.v4.sin_family = AF_INET;
    out->u.v4.sin_port = htons((uint16_t)port_number);
    if (inet_pton(AF_INET, host, &out->u.v4.sin_addr) != 1)
        return "not an IPv4 address (IPv6 ones go in brackets, as in [::1]:8077)";
    return NULL;
}

/* addr as the URL's host: "127.0.0.1", "[::1]". */
static void url_host(const listen_addr *addr, char *out, size_t size)
{
    char text[INET6_ADDRSTRLEN] = "?";
    if (addr->u.sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &addr->u.v6.sin6_addr, text, sizeof text);
        snprintf(out, size, "[%s]", text);
    } else {
        inet_ntop(AF_INET, &addr->u.v4.sin_addr, text, sizeof text);
        snprintf(out, size, "%s", text);
    }
}

/* The token: the file's first line, without trailing white space. */
static int read_token(const char *path, char **out)
{
    char *data, why[1024];
    size_t len;
    if (cli_read_file(path, &data, &len, why, sizeof why) != 0)
        return cli_error(CMD, "%s", why);
    char *nl = memchr(data, '\n', len);
    if (nl)
        len = (size_t)(nl - data);
    while (len > 0 && (data[len - 1] == ' ' || data[len - 1] == '\t' || data[len - 1] == '\r'))
        len--;
    data[len] = '\0';
    if (len == 0 || memchr(data, '\0', len)) {
        free(data);
        return cli_error(CMD, "%s: the token file's first line is empty", path);
    }
    *out = data;
    return CLI_EXIT_OK;
}

/* The handler's notices (a read-only store reopened) on stderr. */
static void print_notice(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "simstore " CMD ": %s\n", line);
}

/* libmicrohttpd's messages on stderr, at most MHD_LINES_PER_SECOND a
 * second: a flood of refused connections would otherwise write a line
 * each. */
#define MHD_LINES_PER_SECOND 5
static void mhd_log(void *ctx, const char *fmt, va_list ap)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static time_t second;
    static unsigned lines, dropped;
    (void)ctx;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
    time_t now = time(NULL);
    pthread_mutex_lock(&lock);
    if (now != second) {
        if (dropped)
            fprintf(stderr, "simstore " CMD ": libmicrohttpd: %u more messages not shown\n",
                    dropped);
        second = now;
        lines = dropped = 0;
    }
    if (lines++ < MHD_LINES_PER_SECOND)
        fprintf(stderr, "simstore " CMD ": libmicrohttpd: %s\n", line);
    else
        dropped++;
    pthread_mutex_unlock(&lock);
}

/* The connections the open-file limit leaves room for, wanting `want`: the
 * soft limit is raised to the hard one first (as a server would be started
 * with `ulimit -n` raised), and SPARE_FDS kept for the store's files. */
static unsigned fit_connections(unsigned want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return want;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)want + SPARE_FDS)
        return want;
    unsigned fit = rl.rlim_cur > 2 * SPARE_FDS ? (unsigned)(rl.rlim_cur - SPARE_FDS)
                                               : (unsigned)(rl.rlim_cur / 2);
    if (fit == 0)
        fit = 1;
    cli_warn(CMD,
             "the open-file limit (%llu) leaves room for %u connections, not %u; raise it "
             "(ulimit -n, LimitNOFILE=) to take more",
             (unsigned long long)rl.rlim_cur, fit, want);
    return fit;
}

static int sweeper_start(server_state *st)
{
    conn_table *t = &st->conns;
    if (pthread_create(&t->sweeper, NULL, sweeper_main, st) != 0)
        return -1;
    t->sweeper_started = 1;
    return 0;
}

static void sweeper_stop(server_state *st)
{
    conn_table *t = &st->conns;
    if (!t->sweeper_started)
        return;
    pthread_mutex_lock(&t->lock);
    t->stopping = 1;
    pthread_cond_signal(&t->stop);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->sweeper, NULL);
    t->sweeper_started = 0;
}

enum {
    OPT_LISTEN = 1,
    OPT_THREADS,
    OPT_TOKEN_FILE,
    OPT_READ_ONLY,
    OPT_LOG,
    OPT_MEMTABLE,
    OPT_MAX_BODY,
    OPT_MAX_BATCH,
    OPT_REQUEST_MEMORY,
    OPT_TIMEOUT,
    OPT_REQUEST_TIMEOUT,
    OPT_MAX_CONNECTIONS,
    OPT_MAX_CONNECTIONS_PER_IP,
    OPT_HUGE_PAGES
};

int cmd_serve(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
        {"read-only", no_argument, NULL, OPT_READ_ONLY},
        {"log", required_argument, NULL, OPT_LOG},
        {"memtable", required_argument, NULL, OPT_MEMTABLE},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"max-batch", required_argument, NULL, OPT_MAX_BATCH},
        {"request-memory", required_argument, NULL, OPT_REQUEST_MEMORY},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
        {"max-connections-per-ip", required_argument, NULL, OPT_MAX_CONNECTIONS_PER_IP},
        {"huge-pages", no_argument, NULL, OPT_HUGE_PAGES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    serve_options so;
    serve_options_init(&so);
    const char *listen = DEFAULT_LISTEN, *token_file = NULL;
    unsigned threads = 0, timeout = DEFAULT_TIMEOUT_SECONDS,
             request_timeout = DEFAULT_REQUEST_TIMEOUT_SECONDS,
             max_connections = DEFAULT_MAX_CONNECTIONS, max_per_ip = DEFAULT_MAX_CONNECTIONS_PER_IP;
    const char *request_memory_arg = NULL;
    unsigned long long v;
    int c;
    log_path = NULL;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_LISTEN: listen = optarg; break;
        case OPT_THREADS:
            if (cli_threads_option(CMD, optarg, &threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_TOKEN_FILE: token_file = optarg; break;
        case OPT_READ_ONLY: so.read_only = 1; break;
        case OPT_HUGE_PAGES: so.huge_pages = 1; break;
        case OPT_LOG: log_path = optarg; break;
        case OPT_MEMTABLE:
            if (cli_parse_size(optarg, &v) || v < MIN_MEMTABLE_BYTES)
                return cli_usage_error(CMD,
                                       "--memtable takes a size of at least 16K (K, M, G: "
                                       "powers of 1024), not '%s': what the changes held in "
                                       "memory add, so that a flush takes many of them",

                                       optarg);
            so.memtable_bytes = v;
            break;
        case OPT_MAX_BODY:
            if (cli_parse_size(optarg, &v) || v < 1024 || v > (1ull << 32))
                return cli_usage_error(CMD, "--max-body takes a size from 1K to 4G, not '%s'",
                                       optarg);
            so.max_body_bytes = (size_t)v;
            break;
        case OPT_MAX_BATCH:
            if (cli_parse_uint(optarg, 1, 1000000, &v))
                return cli_usage_error(CMD, "--max-batch takes 1 to 1000000, not '%s'", optarg);
            so.max_batch = (size_t)v;
            break;
        case OPT_REQUEST_MEMORY: request_memory_arg = optarg; break;
        case OPT_TIMEOUT:
            if (cli_parse_uint(optarg, 1, 86400, &v))
                return cli_usage_error(CMD, "--timeout takes 1 to 86400 seconds, not '%s'", optarg);
            timeout = (unsigned)v;
            break;
        case OPT_REQUEST_TIMEOUT:
            if (cli_parse_uint(optarg, 1, 86400, &v))
                return cli_usage_error(CMD, "--request-timeout takes 1 to 86400 seconds, not '%s'",
                                       optarg);
            request_timeout = (unsigned)v;
            break;
        case OPT_MAX_CONNECTIONS:
            if (cli_parse_uint(optarg, 2, 1000000, &v))
                return cli_usage_error(CMD, "--max-connections takes 2 to 1000000, not '%s'",
                                       optarg);
            max_connections = (unsigned)v;
            break;
        case OPT_MAX_CONNECTIONS_PER_IP:
            if (cli_parse_uint(optarg, 0, 1000000, &v))
                return cli_usage_error(CMD,
                                       "--max-connections-per-ip takes 0 (no limit) to 1000000, "
                                       "not '%s'",
                                       optarg);
            max_per_ip = (unsigned)v;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    /* One request may hold its body and its JSON's parse: the budget of
     * all of them must hold one. */
    size_t one_request = so.max_body_bytes + SERVE_PARSE_BYTES(so.max_body_bytes);
    if (request_memory_arg) {
        if (cli_parse_size(request_memory_arg, &v) || v < one_request || v > SIZE_MAX)
            return cli_usage_error(CMD,
                                   "--request-memory takes a size of at least %zuM, three times "
                                   "--max-body and 1M (what one request may hold), not '%s'",
                                   (one_request + (1u << 20) - 1) >> 20, request_memory_arg);
        so.request_memory_bytes = (size_t)v;
    } else {
        so.request_memory_bytes =
            one_request > DEFAULT_REQUEST_MEMORY_BYTES ? one_request : DEFAULT_REQUEST_MEMORY_BYTES;
    }
    so.notice = print_notice;
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    listen_addr la;
    const char *bad_listen = parse_listen(listen, &la);
    if (bad_listen)
        return cli_usage_error(CMD,
                               "--listen takes ADDR:PORT (IPv4, such as %s) or [ADDR]:PORT (IPv6, "
                               "such as [::1]:8077), not '%s': %s",
                               DEFAULT_LISTEN, listen, bad_listen);
    if (threads == 0)
        threads = simstore_default_threads();
    char *token = NULL;
    if (token_file && read_token(token_file, &token) != CLI_EXIT_OK)
        return CLI_EXIT_FAIL;
    so.token = token;
    if (log_open() != 0) {
        int err = errno;
        free(token);
        return cli_error(CMD, "%s: %s", log_path, strerror(err));
    }
    max_connections = fit_connections(max_connections);
    mallopt(M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD_BYTES);
    mallopt(M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD_BYTES);

    /* The signals are taken by the main thread alone (sigwaitinfo below):
     * block them before any thread starts, so every thread inherits it. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    int status = CLI_EXIT_OK;
    struct MHD_Daemon *d = NULL;
    server_state st = {0};
    st.max_body_bytes = so.max_body_bytes;
    conn_table *conns = &st.conns;
    pthread_mutex_init(&conns->lock, NULL);
    pthread_cond_init(&conns->stop, NULL);
    conns->idle_seconds = timeout;
    conns->request_seconds = request_timeout;
    /* An eighth of the connections is room kept for new clients. */
    conns->room_at = max_connections - (max_connections / 8 ? max_connections / 8 : 1);
    int rc = serve_server_open(path, &so, &st.srv);
    free(token);
    so.token = NULL;
    if (rc != SIMSTORE_OK) {
        status = cli_api_error(CMD, rc, "%s", path);
        goto done;
    }
    if (writers_start(&st) != 0 || sweeper_start(&st) != 0) {
        status = cli_error(CMD, "cannot start the server's threads");
        goto done;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG | la.mhd_flags;
    /* The logger first: libmicrohttpd's own would print what comes before. */
    d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &st, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, &la.u.sa, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_LIMIT, max_connections,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, max_per_ip, MHD_OPTION_URI_LOG_CALLBACK, on_uri, &st,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &st, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        &st, MHD_OPTION_END);
    if (!d) {
        status = cli_error(CMD, "cannot listen on %s: %s", listen, strerror(errno));
        goto done;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    char addr[INET6_ADDRSTRLEN + 2];
    url_host(&la, addr, sizeof addr);
    unsigned port =
        la.u.sa.sa_family == AF_INET6 ? ntohs(la.u.v6.sin6_port) : ntohs(la.u.v4.sin_port);
    printf("simstore serve: listening on http://%s:%u (%s, %u %s%s)\n", addr,
           di ? (unsigned)di->port : port, path, threads, CLI_NOUN(threads, "thread"),
           so.read_only ? ", read-only" : "");
    fflush(stdout);

    /* The live store's flush thread compacts after flushes, by the store's
     * policy: this thread only waits for signals. */
    for (;;) {
        int sig = sigwaitinfo(&set, NULL);
        if (sig == SIGHUP) {
            if (log_open() != 0)
                cli_warn(CMD, "cannot reopen %s: %s; logging on to the old file", log_path,
                         strerror(errno));
            continue;
        }
        if (sig == SIGTERM || sig == SIGINT)
            break;
    }
    /* Drain: the requests in flight finish; new ones get 503. (Not
     * MHD_quiesce_daemon: in libmicrohttpd 0.9.75 it races a worker
     * thread's own removal of the listening socket from its epoll set and
     * aborts the process, "Failed to remove listen FD from epoll set", and
     * the final flush with it.) */
    atomic_store(&st.stopping, 1);
    for (int i = 0; i < DRAIN_SECONDS * 100 && atomic_load(&st.in_flight) > 0; i++) {
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    /* Every suspended connection is resumed before the daemon stops. */
    writers_stop(&st);
    MHD_stop_daemon(d);
    d = NULL;
    rc = serve_server_flush(st.srv);
    if (rc != SIMSTORE_OK)
        status = cli_api_error(CMD, rc, "%s: flushing the in-memory inserts", path);
done:
    if (d)
        MHD_stop_daemon(d);
    sweeper_stop(&st);
    if (st.writer_count)
        writers_stop(&st);
    if (st.writers_initialized) {
        pthread_cond_destroy(&st.write_ready);
        pthread_mutex_destroy(&st.write_lock);
    }
    pthread_cond_destroy(&conns->stop);
    pthread_mutex_destroy(&conns->lock);
    serve_server_close(st.srv);
    pthread_mutex_lock(&log_lock);
    if (log_file && log_file != stderr)
        fclose(log_file);
    log_file = NULL;
    pthread_mutex_unlock(&log_lock);
    return status;
}
