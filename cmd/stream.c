/* stream.c: cli_stream (stream.h): an input opened once and read as bytes,
 * plain straight from the descriptor, gzip (zlib) or zstd (libzstd)
 * decompressed by a producer thread into a small ring of chunks. */
#include "stream.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

/* The producer runs at most RING_CHUNKS chunks of CHUNK_BYTES ahead. */
#define RING_CHUNKS 4
#define CHUNK_BYTES ((size_t)256 << 10)
#define INPUT_BYTES ((size_t)128 << 10)
#define MAGIC_BYTES 4

/* Where a stream (or its producer) stands. */
enum { STATE_RUNNING = 0, STATE_END = 1, STATE_ERROR = -1 };

typedef struct chunk {
    unsigned char *data;
    size_t len;
} chunk;

struct cli_stream {
    int fd;
    int owns_fd;
    cli_stream_kind kind;
    unsigned long long plain_size;

    /* The bytes read to tell the kind, served (plain) or decompressed first. */
    unsigned char head[MAGIC_BYTES];
    size_t head_len, head_pos;

    /* The reader's side: once not RUNNING, every read returns the same. */
    int state;
    char error[256];

    /* Compressed only: the producer thread and the ring it fills. ring[head]
     * .. ring[head + count - 1] hold data for the reader, who owns ring[head]
     * while count > 0; the producer owns the slot after the last one. */
    pthread_t thread;
    int thread_started;
    int wake[2]; /* written by close to interrupt the producer's poll */
    pthread_mutex_t mu;
    pthread_cond_t filled, freed;
    chunk ring[RING_CHUNKS];
    size_t ring_head, ring_count, read_pos;
    int stop;           /* set by close */
    int producer_state; /* RUNNING until the producer has published its end */
    char producer_error[256];
};

static void set_message(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_message(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

const char *cli_stream_kind_name(cli_stream_kind kind)
{
    switch (kind) {
    case CLI_STREAM_PLAIN: return "plain";
    case CLI_STREAM_GZIP: return "gzip";
    case CLI_STREAM_ZSTD: return "zstd";
    }
    return "unknown";
}

cli_stream_kind cli_stream_get_kind(const cli_stream *s)
{
    return s->kind;
}

unsigned long long cli_stream_plain_size(const cli_stream *s)
{
    return s->plain_size;
}

const char *cli_stream_error(const cli_stream *s)
{
    return s->state == STATE_ERROR ? s->error : "";
}

/* read(2) in the calling thread: retried on EINTR, and on EAGAIN (a
 * descriptor someone made non-blocking) after waiting for data. */
static ssize_t read_fd(int fd, void *buf, size_t n)
{
    for (;;) {
        ssize_t got = read(fd, buf, n);
        if (got >= 0)
            return got;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, -1) < 0 && errno != EINTR)
                return -1;
            continue;
        }
        return -1;
    }
}

/* Tell the kind from the first bytes, reading no more than it takes to decide
 * (so an interactive plain input is not held up waiting for 4 bytes). */
static int read_magic(cli_stream *s)
{
    static const unsigned char gzip_magic[2] = {0x1f, 0x8b};
    static const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    for (;;) {
        int gzip_may = memcmp(s->head, gzip_magic, s->head_len < 2 ? s->head_len : 2) == 0;
        int zstd_may = memcmp(s->head, zstd_magic, s->head_len) == 0;
        if (gzip_may && s->head_len >= 2) {
            s->kind = CLI_STREAM_GZIP;
            return 0;
        }
        if (zstd_may && s->head_len == MAGIC_BYTES) {
            s->kind = CLI_STREAM_ZSTD;
            return 0;
        }
        if (!gzip_may && !zstd_may)
            break;
        ssize_t got = read_fd(s->fd, s->head + s->head_len, MAGIC_BYTES - s->head_len);
        if (got < 0)
            return -1;
        if (got == 0)
            break;
        s->head_len += (size_t)got;
    }
    s->kind = CLI_STREAM_PLAIN;
    return 0;
}

/* ---- the producer --------------------------------------------------------
 * Everything below runs on the decompression thread. It publishes the data it
 * decoded before any error, then its end (STATE_END or STATE_ERROR). */

static void producer_end(cli_stream *s, int state, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Wait for a free slot; NULL when the stream is being closed, or when there
 * is no memory for the slot (the end is published then). Slots get their
 * memory on first use, so a small input costs one chunk. */
static chunk *producer_slot(cli_stream *s)
{
    chunk *c = NULL;
    pthread_mutex_lock(&s->mu);
    while (s->ring_count == RING_CHUNKS && !s->stop)
        pthread_cond_wait(&s->freed, &s->mu);
    if (!s->stop)
        c = &s->ring[(s->ring_head + s->ring_count) % RING_CHUNKS];
    pthread_mutex_unlock(&s->mu);
    if (c && !c->data) {
        c->data = malloc(CHUNK_BYTES);
        if (!c->data) {
            producer_end(s, STATE_ERROR, "out of memory");
            c = NULL;
        }
    }
    return c;
}

static void producer_publish(cli_stream *s, chunk *c, size_t len)
{
    pthread_mutex_lock(&s->mu);
    c->len = len;
    s->ring_count++;
    pthread_cond_signal(&s->filled);
    pthread_mutex_unlock(&s->mu);
}

static void producer_end(cli_stream *s, int state, const char *fmt, ...)
{
    pthread_mutex_lock(&s->mu);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->producer_error, sizeof s->producer_error, fmt, ap);
        va_end(ap);
    }
    s->producer_state = state;
    pthread_cond_signal(&s->filled);
    pthread_mutex_unlock(&s->mu);
}

/* The compressed input, read into buf (the kind bytes first). */
typedef struct source {
    cli_stream *s;
    unsigned char *buf;
    size_t len, pos;
    int eof;
} source;

enum { FILL_OK = 0, FILL_ERROR = -1, FILL_STOPPED = -2 };

/* Refill src->buf when it is used up: FILL_OK (src->eof set at the end),
 * FILL_ERROR with the stream's end published, or FILL_STOPPED (closing). */
static int source_fill(source *src)
{
    cli_stream *s = src->s;
    if (src->pos < src->len || src->eof)
        return FILL_OK;
    src->pos = src->len = 0;
    if (s->head_pos < s->head_len) {
        memcpy(src->buf, s->head, s->head_len);
        src->len = s->head_len;
        s->head_pos = s->head_len;
        return FILL_OK;
    }
    for (;;) {
        /* Poll so that close can interrupt a wait on a pipe or FIFO. */
        struct pollfd p[2] = {{s->fd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            producer_end(s, STATE_ERROR, "read error: %s", strerror(errno));
            return FILL_ERROR;
        }
        if (p[1].revents)
            return FILL_STOPPED;
        if (!p[0].revents)
            continue;
        ssize_t got = read(s->fd, src->buf, INPUT_BYTES);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            producer_end(s, STATE_ERROR, "read error: %s", strerror(errno));
            return FILL_ERROR;
        }
        if (got == 0)
            src->eof = 1;
        src->len = (size_t)got;
        return FILL_OK;
    }
}

static void produce_gzip(cli_stream *s, source *src)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) {
        producer_end(s, STATE_ERROR, "out of memory");
        return;
    }
    chunk *c = NULL;
    int member_done = 0; /* a member ended: only another one or the end may follow */
    for (;;) {
        if (!c) {
            c = producer_slot(s);
            if (!c)
                break;
            z.next_out = c->data;
            z.avail_out = (uInt)CHUNK_BYTES;
        }
        int fill = source_fill(src);
        if (fill == FILL_STOPPED)
            break;
        if (fill == FILL_ERROR) {
            if (z.avail_out < CHUNK_BYTES)
                producer_publish(s, c, CHUNK_BYTES - z.avail_out);
            break; /* the end is published, after the data */
        }
        size_t avail = src->len - src->pos;
        if (member_done) {
            if (avail == 0) { /* the end, after a whole member */
                if (z.avail_out < CHUNK_BYTES)
                    producer_publish(s, c, CHUNK_BYTES - z.avail_out);
                producer_end(s, STATE_END, NULL);
                break;
            }
            /* Only another member may follow (cat a.gz b.gz). Its first byte
             * is enough to tell: inflate checks the rest of its header, and no
             * zlib header starts with 0x1f (method 15). */
            if (src->buf[src->pos] != 0x1f) {
                if (z.avail_out < CHUNK_BYTES)
                    producer_publish(s, c, CHUNK_BYTES - z.avail_out);
                producer_end(s, STATE_ERROR,
                             "gzip data is corrupt: trailing garbage after a gzip member");
                break;
            }
            member_done = 0;
            inflateReset(&z);
        }
        size_t out_before = z.avail_out;
        z.next_in = src->buf + src->pos;
        z.avail_in = (uInt)avail;
        int zrc = inflate(&z, Z_NO_FLUSH);
        src->pos += avail - z.avail_in;
        if (zrc == Z_STREAM_END) {
            member_done = 1;
        } else if (zrc == Z_OK || zrc == Z_BUF_ERROR) {
            /* No progress with no input left (avail is 0 only at the end of
             * the input): it ended mid-member. */
            if (avail == 0 && z.avail_out == out_before) {
                if (z.avail_out < CHUNK_BYTES)
                    producer_publish(s, c, CHUNK_BYTES - z.avail_out);
                producer_end(s, STATE_ERROR, "gzip data is truncated");
                break;
            }
        } else {
            if (z.avail_out < CHUNK_BYTES)
                producer_publish(s, c, CHUNK_BYTES - z.avail_out);
            if (zrc == Z_MEM_ERROR)
                producer_end(s, STATE_ERROR, "out of memory");
            else
                producer_end(s, STATE_ERROR, "gzip data is corrupt: %s",
                             z.msg                ? z.msg
                             : zrc == Z_NEED_DICT ? "needs a preset dictionary"
                                                  : "inflate failed");
            break;
        }
        if (z.avail_out == 0) {
            producer_publish(s, c, CHUNK_BYTES);
            c = NULL;
        }
    }
    inflateEnd(&z);
}

static void produce_zstd(cli_stream *s, source *src)
{
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    if (!dctx) {
        producer_end(s, STATE_ERROR, "out of memory");
        return;
    }
    chunk *c = NULL;
    ZSTD_outBuffer out = {NULL, 0, 0};
    size_t last = 1; /* ZSTD_decompressStream's last answer: 0 = at a frame's end */
    for (;;) {
        if (!c) {
            c = producer_slot(s);
            if (!c)
                break;
            out.dst = c->data;
            out.size = CHUNK_BYTES;
            out.pos = 0;
        }
        int fill = source_fill(src);
        if (fill == FILL_STOPPED)
            break;
        if (fill == FILL_ERROR) {
            if (out.pos)
                producer_publish(s, c, out.pos);
            break;
        }
        int at_end = src->eof && src->pos == src->len;
        if (at_end && last == 0) {
            if (out.pos)
                producer_publish(s, c, out.pos);
            producer_end(s, STATE_END, NULL);
            break;
        }
        if (src->pos == src->len && !src->eof)
            continue;
        ZSTD_inBuffer in = {src->buf, src->len, src->pos};
        size_t out_before = out.pos;
        size_t zrc = ZSTD_decompressStream(dctx, &out, &in);
        src->pos = in.pos;
        if (ZSTD_isError(zrc)) {
            if (out.pos)
                producer_publish(s, c, out.pos);
            if (ZSTD_getErrorCode(zrc) == ZSTD_error_memory_allocation)
                producer_end(s, STATE_ERROR, "out of memory");
            else
                producer_end(s, STATE_ERROR, "zstd data is corrupt: %s", ZSTD_getErrorName(zrc));
            break;
        }
        last = zrc;
        if (at_end && zrc != 0 && out.pos == out_before && out.pos < out.size) {
            if (out.pos)
                producer_publish(s, c, out.pos);
            producer_end(s, STATE_ERROR, "zstd data is truncated");
            break;
        }
        if (out.pos == out.size) {
            producer_publish(s, c, out.pos);
            c = NULL;
        }
    }
    ZSTD_freeDCtx(dctx);
}

static void *producer_main(void *arg)
{
    cli_stream *s = arg;
    source src = {s, malloc(INPUT_BYTES), 0, 0, 0};
    if (!src.buf) {
        producer_end(s, STATE_ERROR, "out of memory");
        return NULL;
    }
    if (s->kind == CLI_STREAM_GZIP)
        produce_gzip(s, &src);
    else
        produce_zstd(s, &src);
    free(src.buf);
    /* Closing (stop) ends a producer without publishing; make sure the reader
     * never waits on it (close does not read, but be safe). */
    pthread_mutex_lock(&s->mu);
    if (s->producer_state == STATE_RUNNING) {
        s->producer_state = STATE_ERROR;
        snprintf(s->producer_error, sizeof s->producer_error, "the stream was closed");
        pthread_cond_signal(&s->filled);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- open, read, close ---------------------------------------------------- */

static int start_producer(cli_stream *s)
{
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    int rc = pthread_mutex_init(&s->mu, NULL);
    if (rc == 0) {
        rc = pthread_cond_init(&s->filled, NULL);
        if (rc == 0) {
            rc = pthread_cond_init(&s->freed, NULL);
            if (rc != 0)
                pthread_cond_destroy(&s->filled);
        }
        if (rc != 0)
            pthread_mutex_destroy(&s->mu);
    }
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    /* Signals go to the other threads, never to the decompressor. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&s->thread, NULL, producer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&s->freed);
        pthread_cond_destroy(&s->filled);
        pthread_mutex_destroy(&s->mu);
        errno = rc;
        return -1;
    }
    s->thread_started = 1;
    return 0;
}

int cli_stream_open(cli_stream **out, const char *path)
{
    *out = NULL;
    cli_stream *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->wake[0] = s->wake[1] = -1;
    int saved = 0;
    if (strcmp(path, "-") == 0) {
        s->fd = STDIN_FILENO;
    } else {
        s->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (s->fd < 0) {
            saved = errno;
            goto fail;
        }
        s->owns_fd = 1;
    }
    struct stat st;
    if (fstat(s->fd, &st) != 0) {
        saved = errno;
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        saved = EISDIR;
        goto fail;
    }
    if (read_magic(s) != 0) {
        saved = errno;
        goto fail;
    }
    if (s->kind == CLI_STREAM_PLAIN) {
        if (S_ISREG(st.st_mode) && st.st_size > 0)
            s->plain_size = (unsigned long long)st.st_size;
    } else if (start_producer(s) != 0) {
        saved = errno;
        goto fail;
    }
    *out = s;
    return 0;
fail:
    cli_stream_close(s);
    errno = saved;
    return -1;
}

static ssize_t read_plain(cli_stream *s, unsigned char *buf, size_t n)
{
    if (s->head_pos < s->head_len) {
        size_t take = s->head_len - s->head_pos;
        if (take > n)
            take = n;
        memcpy(buf, s->head + s->head_pos, take);
        s->head_pos += take;
        return (ssize_t)take;
    }
    ssize_t got = read_fd(s->fd, buf, n);
    if (got < 0) {
        set_message(s->error, sizeof s->error, "read error: %s", strerror(errno));
        s->state = STATE_ERROR;
        return -1;
    }
    if (got == 0)
        s->state = STATE_END;
    return got;
}

static ssize_t read_ring(cli_stream *s, unsigned char *buf, size_t n)
{
    pthread_mutex_lock(&s->mu);
    while (s->ring_count == 0 && s->producer_state == STATE_RUNNING)
        pthread_cond_wait(&s->filled, &s->mu);
    if (s->ring_count == 0) {
        s->state = s->producer_state;
        memcpy(s->error, s->producer_error, sizeof s->error);
        pthread_mutex_unlock(&s->mu);
        return s->state == STATE_END ? 0 : -1;
    }
    chunk *c = &s->ring[s->ring_head];
    pthread_mutex_unlock(&s->mu);

    /* The reader owns ring[head] while it is counted: copy without the lock. */
    size_t take = c->len - s->read_pos;
    if (take > n)
        take = n;
    memcpy(buf, c->data + s->read_pos, take);
    s->read_pos += take;
    if (s->read_pos == c->len) {
        pthread_mutex_lock(&s->mu);
        s->ring_head = (s->ring_head + 1) % RING_CHUNKS;
        s->ring_count--;
        s->read_pos = 0;
        pthread_cond_signal(&s->freed);
        pthread_mutex_unlock(&s->mu);
    }
    return (ssize_t)take;
}

ssize_t cli_stream_read(cli_stream *s, void *buf, size_t n)
{
    if (s->state != STATE_RUNNING)
        return s->state == STATE_END ? 0 : -1;
    if (n == 0)
        return 0;
    if (n > SSIZE_MAX)
        n = SSIZE_MAX;
    if (s->kind == CLI_STREAM_PLAIN)
        return read_plain(s, buf, n);
    return read_ring(s, buf, n);
}

void cli_stream_close(cli_stream *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->freed);
        pthread_mutex_unlock(&s->mu);
        /* Interrupt a poll on a pipe that has no data (the pipe is
         * non-blocking and has room: nothing else writes to it). */
        ssize_t w;
        do
            w = write(s->wake[1], "", 1);
        while (w < 0 && errno == EINTR);
        pthread_join(s->thread, NULL);
        pthread_cond_destroy(&s->freed);
        pthread_cond_destroy(&s->filled);
        pthread_mutex_destroy(&s->mu);
    }
    for (size_t i = 0; i < RING_CHUNKS; i++)
        free(s->ring[i].data);
    if (s->wake[0] >= 0)
        close(s->wake[0]);
    if (s->wake[1] >= 0)
        close(s->wake[1]);
    if (s->owns_fd)
        close(s->fd);
    free(s);
}
