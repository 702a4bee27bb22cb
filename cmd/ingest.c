/* ingest.c: input files into a builder: record formats, per-record checks and
 * messages, fingerprinting of JSON Lines documents. A source value packs the
 * input's index (high 20 bits) and line number (low 44 bits). */
#include "ingest.h"

#include "cli.h"
#include "input.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_BITS 44
#define DEFAULT_MAX_ERRORS 20

int ingest_format_parse(const char *name)
{
    if (strcmp(name, "tsv") == 0)
        return INGEST_TSV;
    if (strcmp(name, "fp") == 0)
        return INGEST_FP;
    if (strcmp(name, "jsonl") == 0)
        return INGEST_JSONL;
    if (strcmp(name, "hex") == 0)
        return INGEST_HEX;
    if (strcmp(name, "u64") == 0)
        return INGEST_U64;
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int format_for(const char *path, ingest_format f)
{
    if (f != INGEST_BY_EXTENSION)
        return f;
    if (ends_with(path, ".tsv"))
        return INGEST_TSV;
    if (ends_with(path, ".fp"))
        return INGEST_FP;
    if (ends_with(path, ".jsonl"))
        return INGEST_JSONL;
    if (ends_with(path, ".hex"))
        return INGEST_HEX;
    if (ends_with(path, ".u64"))
        return INGEST_U64;
    return -1;
}

void ingest_source_name(void *ctx, uint64_t source, char *buf, size_t size)
{
    char **paths = (char **)ctx;
    uint64_t file = source >> LINE_BITS;
    uint64_t line = source & ((1ULL << LINE_BITS) - 1);
    const char *name = strcmp(paths[file], "-") == 0 ? "<stdin>" : paths[file];
    snprintf(buf, size, "%s:%llu", name, (unsigned long long)line);
}

/* ---- parallel fingerprinting ---------------------------------------------
 * JSON Lines texts are fingerprinted by worker threads: the reading thread
 * fills batches of records, workers fingerprint whole batches, and the reading
 * thread hands finished batches to the builder in the order they were read
 * (so every message is the same whatever the thread count). A fixed ring of
 * batches bounds the memory in flight. */

#define BATCH_RECORDS 512
#define BATCH_BYTES ((size_t)4 << 20)
#define RING_BATCHES 8

typedef struct batch_rec {
    size_t id_off, id_len, text_off, text_len, meta_off, meta_len;
    int has_meta;
    unsigned long long line;
    uint64_t fp;
    unsigned flags;
    int rc;
} batch_rec;

enum { BATCH_FREE = 0, BATCH_READY, BATCH_CLAIMED, BATCH_DONE };

typedef struct batch {
    batch_rec recs[BATCH_RECORDS];
    size_t n;
    char *arena;
    size_t used, cap;
    unsigned file_index;
    const char *file;
    int state;
} batch;

typedef struct fp_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    batch *ring; /* RING_BATCHES */
    unsigned head;       /* oldest batch not yet handed to the builder */
    unsigned filling;    /* the batch being filled */
    unsigned in_flight;  /* submitted, not yet drained */
    unsigned next_claim; /* the next ready batch a worker takes */
    int stop;
    pthread_t threads[64];
    unsigned nthreads;
    const simstore_text_options *text;
} fp_pool;

typedef struct ingest_state {
    simstore_builder *b;
    const ingest_options *o;
    ingest_result *res;
    simstore_fingerprinter *fpr;
    fp_pool *pool;
    unsigned max_errors;
    int fatal;
} ingest_state;

/* Report a bad record; returns nonzero when reading should stop. */
static int bad_record(ingest_state *st, const char *message)
{
    st->res->bad++;
    fprintf(stderr, "simstore %s: %s\n", st->o->cmd, message);
    if (st->res->bad >= st->max_errors) {
        fprintf(stderr, "simstore %s: stopping after %u bad records\n", st->o->cmd,
                st->max_errors);
        return 1;
    }
    return 0;
}

static int builder_failed(ingest_state *st, int rc, const char *file, unsigned long long line)
{
    fprintf(stderr, "simstore %s: %s:%llu: %s\n", st->o->cmd, file, line,
            *simstore_last_error() ? simstore_last_error() : simstore_strerror(rc));
    st->fatal = 1;
    return 1;
}

static void *pool_worker(void *arg)
{
    fp_pool *p = (fp_pool *)arg;
    simstore_fingerprinter *fpr = NULL;
    int init_rc = simstore_fingerprinter_new(p->text, &fpr);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->ring[p->next_claim].state != BATCH_READY)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->ring[p->next_claim].state != BATCH_READY) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        batch *bt = &p->ring[p->next_claim];
        bt->state = BATCH_CLAIMED;
        p->next_claim = (p->next_claim + 1) % RING_BATCHES;
        pthread_mutex_unlock(&p->mu);
        for (size_t i = 0; i < bt->n; i++) {
            batch_rec *r = &bt->recs[i];
            r->rc = init_rc ? init_rc
                            : simstore_fingerprint_text(fpr, bt->arena + r->text_off, r->text_len,
                                                        &r->fp, &r->flags);
        }
        pthread_mutex_lock(&p->mu);
        bt->state = BATCH_DONE;
        pthread_cond_broadcast(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
    simstore_fingerprinter_free(fpr);
    return NULL;
}

static void pool_free(fp_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    for (unsigned i = 0; p->ring && i < RING_BATCHES; i++)
        free(p->ring[i].arena);
    free(p->ring);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p);
}

static fp_pool *pool_new(const simstore_text_options *text, unsigned threads)
{
    fp_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->text = text;
    p->ring = calloc(RING_BATCHES, sizeof *p->ring);
    if (!p->ring) {
        pool_free(p);
        return NULL;
    }
    for (unsigned i = 0; i < threads && i < 64; i++)
        if (pthread_create(&p->threads[p->nthreads], NULL, pool_worker, p) == 0)
            p->nthreads++;
    if (p->nthreads == 0) {
        pool_free(p);
        return NULL;
    }
    return p;
}

/* Hand a finished batch to the builder, in read order. Returns nonzero to stop. */
static int drain_batch(ingest_state *st, batch *bt)
{
    int stop = 0;
    for (size_t i = 0; i < bt->n && !stop; i++) {
        batch_rec *r = &bt->recs[i];
        const char *id = bt->arena + r->id_off;
        if (r->rc) {
            stop = builder_failed(st, r->rc, bt->file, r->line);
            break;
        }
        if (r->flags & SIMSTORE_FP_EMPTY) {
            st->res->empty_docs++;
            fprintf(stderr, "simstore %s: warning: %s:%llu: document '%.*s' has no words\n",
                    st->o->cmd, bt->file, r->line, (int)r->id_len, id);
        }
        simstore_doc d = {id, r->id_len, r->fp, r->has_meta ? bt->arena + r->meta_off : NULL,
                          r->meta_len, (uint64_t)bt->file_index << LINE_BITS | r->line};
        int e = simstore_builder_add(st->b, &d);
        if (e) {
            stop = builder_failed(st, e, bt->file, r->line);
            break;
        }
        if (++st->res->records % 65536 == 0 && st->o->progress)
            st->o->progress(st->o->progress_ctx, "reading", st->res->records, 0);
    }
    bt->n = 0;
    bt->used = 0;
    return stop;
}

/* Wait for the oldest batch in flight and drain it. */
static int drain_oldest(ingest_state *st)
{
    fp_pool *p = st->pool;
    batch *bt = &p->ring[p->head];
    pthread_mutex_lock(&p->mu);
    while (bt->state != BATCH_DONE)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    int stop = drain_batch(st, bt);
    pthread_mutex_lock(&p->mu);
    bt->state = BATCH_FREE;
    p->head = (p->head + 1) % RING_BATCHES;
    p->in_flight--;
    pthread_mutex_unlock(&p->mu);
    return stop;
}

/* Submit the batch being filled (if it holds anything). */
static void submit_filling(ingest_state *st)
{
    fp_pool *p = st->pool;
    batch *bt = &p->ring[p->filling];
    if (bt->n == 0)
        return;
    pthread_mutex_lock(&p->mu);
    bt->state = BATCH_READY;
    p->in_flight++;
    p->filling = (p->filling + 1) % RING_BATCHES;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

/* Drain everything in flight, in order. Returns nonzero to stop. */
static int drain_all(ingest_state *st)
{
    int stop = 0;
    submit_filling(st);
    while (st->pool->in_flight > 0)
        stop |= drain_oldest(st);
    return stop;
}

static int arena_copy(batch *bt, const char *data, size_t len, size_t *off)
{
    if (len + 1 > bt->cap - bt->used) {
        size_t cap = bt->cap ? bt->cap : BATCH_BYTES;
        while (cap - bt->used < len + 1)
            cap *= 2;
        char *g = realloc(bt->arena, cap);
        if (!g)
            return -1;
        bt->arena = g;
        bt->cap = cap;
    }
    *off = bt->used;
    if (len)
        memcpy(bt->arena + bt->used, data, len);
    bt->arena[bt->used + len] = '\0';
    bt->used += len + 1;
    return 0;
}

/* Queue a JSON Lines record for the workers. Returns nonzero to stop. */
static int pool_add(ingest_state *st, const input_record *rec, unsigned index)
{
    fp_pool *p = st->pool;
    batch *bt = &p->ring[p->filling];
    if (bt->n == 0) {
        /* Reusing a slot: it must have been drained. */
        while (p->in_flight == RING_BATCHES || bt->state != BATCH_FREE)
            if (drain_oldest(st))
                return 1;
        bt->file_index = index;
        bt->file = rec->file;
    }
    batch_rec *r = &bt->recs[bt->n];
    size_t meta_len = rec->meta ? strlen(rec->meta) : 0;
    if (arena_copy(bt, rec->id, rec->id_len, &r->id_off) ||
        arena_copy(bt, rec->text, rec->text_len, &r->text_off) ||
        arena_copy(bt, rec->meta ? rec->meta : "", meta_len, &r->meta_off)) {
        fprintf(stderr, "simstore %s: out of memory\n", st->o->cmd);
        st->fatal = 1;
        return 1;
    }
    r->id_len = rec->id_len;
    r->text_len = rec->text_len;
    r->meta_len = meta_len;
    r->has_meta = rec->meta != NULL;
    r->line = rec->line;
    r->rc = 0;
    r->flags = 0;
    bt->n++;
    if (bt->n == BATCH_RECORDS || bt->used >= BATCH_BYTES)
        submit_filling(st);
    return 0;
}

/* Documents from TSV or JSON Lines. Returns nonzero to stop. */
static int ingest_documents(ingest_state *st, const char *path, unsigned index, int fmt)
{
    input_reader *r;
    input_format in = fmt == INGEST_TSV ? INPUT_ID_FP : fmt == INGEST_FP ? INPUT_FP_ID : INPUT_JSONL;
    if (input_open(&r, in, path) != 0) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, path, strerror(errno));
        st->fatal = 1;
        return 1;
    }
    input_record rec;
    int rc;
    while ((rc = input_next(r, &rec)) != 0) {
        if (rc == -2) {
            fprintf(stderr, "simstore %s: %s\n", st->o->cmd, input_error(r));
            st->fatal = 1;
            break;
        }
        if (rc == -1) {
            if (bad_record(st, input_error(r)))
                break;
            continue;
        }
        if (rec.line >= (1ULL << LINE_BITS)) {
            fprintf(stderr, "simstore %s: %s: too many lines\n", st->o->cmd, rec.file);
            st->fatal = 1;
            break;
        }
        if (fmt == INGEST_JSONL && st->pool) {
            if (pool_add(st, &rec, index))
                break;
            continue;
        }
        uint64_t fp = rec.fingerprint;
        if (fmt == INGEST_JSONL) {
            unsigned flags = 0;
            int e = simstore_fingerprint_text(st->fpr, rec.text, rec.text_len, &fp, &flags);
            if (e) {
                builder_failed(st, e, rec.file, rec.line);
                break;
            }
            if (flags & SIMSTORE_FP_EMPTY) {
                st->res->empty_docs++;
                fprintf(stderr, "simstore %s: warning: %s:%llu: document '%.*s' has no words\n",
                        st->o->cmd, rec.file, rec.line, (int)rec.id_len, rec.id);
            }
        }
        simstore_doc d = {rec.id, rec.id_len, fp, rec.meta, rec.meta ? strlen(rec.meta) : 0,
                          (uint64_t)index << LINE_BITS | rec.line};
        int e = simstore_builder_add(st->b, &d);
        if (e) {
            builder_failed(st, e, rec.file, rec.line);
            break;
        }
        if (++st->res->records % 65536 == 0 && st->o->progress)
            st->o->progress(st->o->progress_ctx, "reading", st->res->records, 0);
    }
    /* The batches hold copies: finish them before this file's reader goes. */
    if (st->pool && drain_all(st))
        st->fatal = 1;
    input_close(r);
    return st->fatal || st->res->bad >= st->max_errors;
}

/* Bare fingerprints, one hex16 per line. */
static int ingest_hex(ingest_state *st, const char *path)
{
    cli_lines lines;
    if (cli_lines_open(&lines, path) != 0) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, path, strerror(errno));
        st->fatal = 1;
        return 1;
    }
    size_t len;
    int got;
    char msg[1200];
    while ((got = cli_lines_next(&lines, &len)) == 1) {
        if (len == 0)
            continue;
        uint64_t fp;
        if (cli_parse_hex64(lines.line, &fp) != 0) {
            snprintf(msg, sizeof msg, "%s:%llu: expected 16 hex digits, got '%.40s'", lines.name,
                     lines.lineno, lines.line);
            if (bad_record(st, msg))
                break;
            continue;
        }
        int e = simstore_builder_add_fp(st->b, fp);
        if (e) {
            builder_failed(st, e, lines.name, lines.lineno);
            break;
        }
        if (++st->res->records % (1u << 20) == 0 && st->o->progress)
            st->o->progress(st->o->progress_ctx, "reading", st->res->records, 0);
    }
    if (got < 0) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, lines.name, strerror(errno));
        st->fatal = 1;
    }
    cli_lines_close(&lines);
    return st->fatal || st->res->bad >= st->max_errors;
}

/* Bare fingerprints as raw little-endian 64-bit values. */
static int ingest_u64(ingest_state *st, const char *path)
{
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, path, strerror(errno));
        st->fatal = 1;
        return 1;
    }
    enum { CHUNK = 1 << 16 };
    /* A regular file's size gives the total, and so an ETA. */
    uint64_t total = 0;
    struct stat sb;
    if (!is_stdin && fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode))
        total = (uint64_t)sb.st_size / 8;
    uint8_t *buf = malloc(CHUNK * 8);
    uint64_t offset = 0;
    size_t got;
    while (buf && (got = fread(buf, 1, CHUNK * 8, f)) > 0) {
        if (got % 8) {
            /* A short read mid-file is legal: top up to whole values. */
            size_t more = fread(buf + got, 1, 8 - got % 8, f);
            got += more;
            if (got % 8) {
                fprintf(stderr, "simstore %s: %s: length is not a multiple of 8 bytes\n",
                        st->o->cmd, name);
                st->fatal = 1;
                break;
            }
        }
        for (size_t i = 0; i < got; i += 8) {
            uint64_t v = 0;
            for (int j = 7; j >= 0; j--)
                v = v << 8 | buf[i + (size_t)j];
            int e = simstore_builder_add_fp(st->b, v);
            if (e) {
                builder_failed(st, e, name, (offset + i) / 8 + 1);
                break;
            }
        }
        if (st->fatal)
            break;
        offset += got;
        st->res->records += got / 8;
        if (st->o->progress)
            st->o->progress(st->o->progress_ctx, "reading", st->res->records, total);
    }
    if (!buf || ferror(f)) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, name, buf ? "read error" : "out of memory");
        st->fatal = 1;
    }
    free(buf);
    if (!is_stdin)
        fclose(f);
    return st->fatal;
}

int ingest_inputs(simstore_builder *b, char **paths, int npaths, const ingest_options *o,
                  ingest_result *res)
{
    memset(res, 0, sizeof *res);
    ingest_state st = {b, o, res, NULL, NULL, o->max_errors ? o->max_errors : DEFAULT_MAX_ERRORS, 0};
    for (int i = 0; i < npaths && !st.fatal; i++) {
        int fmt = format_for(paths[i], o->format);
        if (fmt < 0) {
            fprintf(stderr,
                    "simstore %s: %s: cannot tell the format from the name; use --format "
                    "tsv|fp|jsonl%s\n",
                    o->cmd, paths[i], o->fingerprint_only ? "|hex|u64" : "");
            st.fatal = 1;
            break;
        }
        int fp_format = fmt == INGEST_HEX || fmt == INGEST_U64;
        if (fp_format != (o->fingerprint_only != 0)) {
            fprintf(stderr, "simstore %s: %s: %s\n", o->cmd, paths[i],
                    o->fingerprint_only
                        ? "a fingerprint-only store reads --format hex or u64"
                        : "bare fingerprints (hex, u64) need a fingerprint-only store");
            st.fatal = 1;
            break;
        }
        if (fmt == INGEST_JSONL && !st.fpr) {
            /* Made first even with workers: it checks the options and loads
             * the friso dictionary once, before the threads need it. */
            int e = simstore_fingerprinter_new(o->text, &st.fpr);
            if (e) {
                fprintf(stderr, "simstore %s: %s\n", o->cmd, simstore_last_error());
                st.fatal = 1;
                break;
            }
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            unsigned threads = o->threads ? o->threads : cores < 1 ? 1u : (unsigned)cores;
            if (threads > 1 && !(st.pool = pool_new(o->text, threads))) {
                fprintf(stderr, "simstore %s: cannot start fingerprinting threads\n", o->cmd);
                st.fatal = 1;
                break;
            }
        }
        int stop = fmt == INGEST_HEX   ? ingest_hex(&st, paths[i])
                   : fmt == INGEST_U64 ? ingest_u64(&st, paths[i])
                                       : ingest_documents(&st, paths[i], (unsigned)i, fmt);
        if (stop)
            break;
    }
    pool_free(st.pool);
    simstore_fingerprinter_free(st.fpr);
    if (st.fatal)
        return 2;
    return res->bad ? 1 : 0;
}

int ingest_and_finish(simstore_builder *b, char **paths, int npaths, const ingest_options *o,
                      ingest_result *res, void (*progress_done)(void *ctx), const char *failed)
{
    int got = ingest_inputs(b, paths, npaths, o, res);
    if (got != 0) {
        if (progress_done)
            progress_done(o->progress_ctx);
        simstore_builder_abort(b);
        fprintf(stderr, "simstore %s: %s: %s\n", o->cmd, failed,
                got == 1 ? "the input has bad records" : "the input could not be read");
        return CLI_EXIT_FAIL;
    }
    int rc = simstore_builder_finish(b);
    if (progress_done)
        progress_done(o->progress_ctx);
    if (rc)
        return cli_api_error(o->cmd, rc, "%s", failed);
    return CLI_EXIT_OK;
}
