/* joinall.c: the self-join of every table on N threads (joinall.h), and
 * its two inputs: a store's segments merged per table, or an array; and a
 * store's distinct fingerprints read into an array. */
#include "scan/joinall.h"

#include "common/bytes.h"
#include "common/error.h"
#include "sort/u64sort.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAIR_BATCH 4096 /* pairs a worker gathers before taking the lock */
#define MAX_THREADS 256

typedef struct join_shared {
    const sims_design *d;
    unsigned k;
    const scan_join_input *in;
    sims_recsort *out;
    unsigned items;
    atomic_uint next;
    atomic_int failed;
    pthread_mutex_t mu;
    int rc;            /* the first failure, under mu */
    char message[512]; /* its message (the workers' own are thread-local) */
} join_shared;

typedef struct join_worker {
    join_shared *sh;
    scan_joiner *joiner;
    uint8_t (*batch)[17];
    size_t batch_len;
    pthread_t thread;
} join_worker;

static int flush_batch(join_worker *w)
{
    join_shared *sh = w->sh;
    int rc = 0;
    pthread_mutex_lock(&sh->mu);
    for (size_t i = 0; i < w->batch_len && rc == 0; i++)
        rc = sims_recsort_push(sh->out, w->batch[i], 16, w->batch[i] + 16, 1);
    pthread_mutex_unlock(&sh->mu);
    w->batch_len = 0;
    return rc;
}

static int collect_pair(void *ctx, uint64_t a, uint64_t b, unsigned distance)
{
    join_worker *w = (join_worker *)ctx;
    uint8_t *r = w->batch[w->batch_len++];
    be_store64(r, a);
    be_store64(r + 8, b);
    r[16] = (uint8_t)distance;
    if (w->batch_len == PAIR_BATCH)
        return flush_batch(w);
    return atomic_load(&w->sh->failed) ? SIMSTORE_EINVAL : 0;
}

static void note_failure(join_shared *sh, int rc)
{
    pthread_mutex_lock(&sh->mu);
    if (sh->rc == 0) {
        sh->rc = rc;
        snprintf(sh->message, sizeof sh->message, "%s", simstore_last_error());
    }
    pthread_mutex_unlock(&sh->mu);
    atomic_store(&sh->failed, 1);
}

static void *join_worker_main(void *arg)
{
    join_worker *w = (join_worker *)arg;
    join_shared *sh = w->sh;
    const scan_join_input *in = sh->in;
    for (;;) {
        unsigned item = atomic_fetch_add(&sh->next, 1);
        if (item >= sh->items || atomic_load(&sh->failed))
            break;
        unsigned t = item / in->parts, part = item % in->parts;
        uint64_t lo, hi;
        sims_scan_part_range(sh->d, part, in->parts, &lo, &hi);
        void *src = NULL;
        int rc = in->open(in->ctx, t, lo, hi, &src);
        if (rc == 0)
            rc = sims_scan_join_table(w->joiner, t, in->next, src, collect_pair, w);
        if (src)
            in->close(src);
        if (rc == 0 && w->batch_len)
            rc = flush_batch(w);
        if (rc) {
            note_failure(sh, rc);
            break;
        }
    }
    return NULL;
}

int sims_scan_join_all(const sims_design *d, unsigned k, unsigned threads, uint64_t memory,
                       const scan_join_input *in, sims_recsort *out)
{
    if (k == 0)
        return SIMSTORE_OK; /* tables hold distinct values: no pair at 0 */
    if (threads == 0)
        threads = simstore_default_threads();
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    join_shared sh = {.d = d, .k = k, .in = in, .out = out, .items = d->n_tables * in->parts};
    atomic_init(&sh.next, 0);
    atomic_init(&sh.failed, 0);
    pthread_mutex_init(&sh.mu, NULL);
    if (threads > sh.items)
        threads = sh.items;
    join_worker *w = calloc(threads, sizeof *w);
    int rc = w ? 0 : sims_fail(SIMSTORE_ENOMEM, "out of memory for join threads");
    unsigned started = 0;
    for (unsigned i = 0; i < threads && rc == 0; i++) {
        w[i].sh = &sh;
        w[i].batch = malloc(PAIR_BATCH * sizeof *w[i].batch);
        if (!w[i].batch)
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for join threads");
        if (rc == 0)
            rc = sims_scan_joiner_new(d, k, memory / threads, &w[i].joiner);
        if (rc == 0) {
            if (pthread_create(&w[i].thread, NULL, join_worker_main, &w[i]) != 0)
                rc = sims_fail(SIMSTORE_EIO, "cannot start a join thread");
            else
                started++;
        }
    }
    if (rc)
        note_failure(&sh, rc);
    for (unsigned i = 0; i < started; i++)
        pthread_join(w[i].thread, NULL);
    if (w) {
        for (unsigned i = 0; i < threads; i++) {
            sims_scan_joiner_free(w[i].joiner);
            free(w[i].batch);
        }
    }
    free(w);
    pthread_mutex_destroy(&sh.mu);
    if (sh.rc && sh.rc != rc) /* a worker's failure: its message here */
        return sims_fail(sh.rc, "%s", sh.message);
    return sh.rc;
}

int sims_scan_pairs_each(sims_recsort *joined, scan_pair_fn fn, void *ctx)
{
    sims_rec r;
    int got, rc = 0, have = 0;
    uint64_t last_a = 0, last_b = 0;
    while (rc == 0 && (got = sims_recsort_next(joined, &r)) == 1) {
        uint64_t a = be_load64(r.key), b = be_load64(r.key + 8);
        if (have && a == last_a && b == last_b)
            continue; /* a band pair found in several bands (bands.h) */
        have = 1;
        last_a = a;
        last_b = b;
        rc = fn(ctx, a, b, r.val_len ? r.val[0] : 0);
    }
    return rc ? rc : got < 0 ? got : 0;
}

/* ---- a store's segments ------------------------------------------------- */

#define SEG_BUF 1024

typedef struct seg_head {
    table_cursor cur;
    uint64_t buf[SEG_BUF];
    size_t len, pos;
    int done;
} seg_head;

typedef struct store_src {
    unsigned nsegs;
    seg_head heads[];
} store_src;

static int seg_fill(seg_head *h)
{
    if (h->pos < h->len || h->done)
        return 0;
    h->pos = 0;
    int rc = sims_table_cursor_next(&h->cur, h->buf, SEG_BUF, &h->len);
    if (rc == 0 && h->len == 0)
        h->done = 1;
    return rc;
}

static int store_open(void *ctx, unsigned t, uint64_t lo, uint64_t hi, void **out)
{
    const sims_snapshot *snap = (const sims_snapshot *)ctx;
    store_src *s = malloc(sizeof *s + snap->segment_count * sizeof s->heads[0]);
    if (!s)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a table scan");
    s->nsegs = snap->segment_count;
    for (unsigned i = 0; i < s->nsegs; i++) {
        seg_head *h = &s->heads[i];
        h->len = h->pos = 0;
        h->done = 0;
        sims_table_cursor_init(&h->cur, snap->segments[i]->tables[t], lo, hi);
    }
    *out = s;
    return 0;
}

/* The next values in order: one segment hands its chunks straight over,
 * several are merged (segments are few: a linear pick of the least). */
static int store_next(void *src, uint64_t *out, size_t cap, size_t *n)
{
    store_src *s = (store_src *)src;
    *n = 0;
    for (unsigned i = 0; i < s->nsegs; i++) {
        int rc = seg_fill(&s->heads[i]);
        if (rc)
            return rc;
    }
    if (s->nsegs == 1) {
        seg_head *h = &s->heads[0];
        size_t m = h->len - h->pos < cap ? h->len - h->pos : cap;
        memcpy(out, h->buf + h->pos, m * sizeof *out);
        h->pos += m;
        *n = m;
        return 0;
    }
    while (*n < cap) {
        seg_head *best = NULL;
        for (unsigned i = 0; i < s->nsegs; i++) {
            seg_head *h = &s->heads[i];
            if (h->pos < h->len && (!best || h->buf[h->pos] < best->buf[best->pos]))
                best = h;
        }
        if (!best)
            break;
        out[(*n)++] = best->buf[best->pos++];
        int rc = seg_fill(best);
        if (rc)
            return rc;
    }
    return 0;
}

static void store_close(void *src)
{
    free(src);
}

void sims_scan_store_input(scan_join_input *in, const simstore *s, const sims_snapshot *snap,
                           unsigned threads)
{
    *in = (scan_join_input){
        store_open, store_next, store_close, (void *)snap,
        sims_scan_parts_for(s->design, threads ? threads : simstore_default_threads())};
}

/* The distinct fingerprints of the snapshot, unpermuted, a chunk at a time
 * to emit. The merge is in table 0's permuted order, where a repeat (a
 * fingerprint in two segments) comes next to itself: dropped there, no
 * sort needed. */
static int distinct_fps(const simstore *s, const sims_snapshot *snap,
                        int (*emit)(void *ctx, const uint64_t *v, size_t n), void *ctx)
{
    void *src = NULL;
    int rc = store_open((void *)snap, 0, 0, UINT64_MAX, &src);
    uint64_t buf[SEG_BUF], last = 0;
    size_t got = 0;
    int any = 0;
    const sims_permuter *p = &s->design->tables[0].permuter;
    while (rc == 0 && (rc = store_next(src, buf, SEG_BUF, &got)) == 0 && got) {
        size_t w = 0;
        for (size_t i = 0; i < got; i++) {
            if (any && buf[i] == last)
                continue;
            any = 1;
            last = buf[i];
            buf[w++] = sims_unpermute(p, buf[i]);
        }
        rc = emit(ctx, buf, w);
    }
    if (src)
        store_close(src);
    return rc;
}

typedef struct array_sink {
    const simstore *s;
    uint64_t *out;
    size_t cap, n;
} array_sink;

static int to_array(void *ctx, const uint64_t *v, size_t n)
{
    array_sink *a = (array_sink *)ctx;
    if (n > a->cap - a->n)
        return SIMS_CORRUPT("%s: table 0 holds more fingerprints than its segments count (%zu)",
                            a->s->path, a->cap);
    memcpy(a->out + a->n, v, n * sizeof *v);
    a->n += n;
    return 0;
}

int sims_scan_store_distinct_fps(const simstore *s, const sims_snapshot *snap, uint64_t *out,
                                 size_t cap, size_t *n)
{
    array_sink a = {s, out, cap, 0};
    int rc = distinct_fps(s, snap, to_array, &a);
    *n = a.n;
    return rc;
}

static int to_spool(void *ctx, const uint64_t *v, size_t n)
{
    return sims_spool_append((sims_spool *)ctx, v, n);
}

int sims_scan_store_distinct_spool(const simstore *s, const sims_snapshot *snap, sims_spool *out)
{
    return distinct_fps(s, snap, to_spool, out);
}

/* ---- a spool, through spilling sorters ------------------------------------ */

typedef struct spool_src {
    sims_u64sort *sorter;
} spool_src;

static int spool_open(void *ctx, unsigned t, uint64_t lo, uint64_t hi, void **out)
{
    (void)lo;
    (void)hi; /* one part per table */
    const scan_spool_ctx *c = (const scan_spool_ctx *)ctx;
    spool_src *src = calloc(1, sizeof *src);
    if (!src)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a table of the join");
    int rc = sims_u64sort_new(c->run_values, c->tmp_dir, &src->sorter);
    const sims_permuter *p = &c->d->tables[t].permuter;
    sims_spool_reader r;
    sims_spool_reader_init(&r, c->fps);
    uint64_t buf[SEG_BUF];
    size_t got;
    while (rc == 0 && (rc = sims_spool_read(&r, buf, SEG_BUF, &got)) == 0 && got) {
        for (size_t i = 0; i < got; i++)
            buf[i] = sims_permute(p, buf[i]);
        rc = sims_u64sort_push(src->sorter, buf, got);
    }
    if (rc == 0)
        rc = sims_u64sort_finish(src->sorter, 0);
    if (rc == 0)
        rc = sims_u64sort_rewind(src->sorter);
    if (rc) {
        sims_u64sort_free(src->sorter);
        free(src);
        return rc;
    }
    *out = src;
    return 0;
}

static int spool_next(void *src, uint64_t *out, size_t cap, size_t *n)
{
    return sims_u64sort_read(((spool_src *)src)->sorter, out, cap, n);
}

static void spool_close(void *src)
{
    spool_src *s = (spool_src *)src;
    sims_u64sort_free(s->sorter);
    free(s);
}

void sims_scan_spool_input(scan_join_input *in, scan_spool_ctx *ctx)
{
    *in = (scan_join_input){spool_open, spool_next, spool_close, ctx, 1};
}

/* ---- the design of a join -------------------------------------------------- */

/* A join's cost per fingerprint, in the query model's form (design.h):
 * per table, ~14 ns to permute it, sort it by the prefix (two radix
 * passes) and cut the groups (probe_ns), then the pairs of its group,
 * N / 2^p values, each pair checked once for two fingerprints at ~2.5 ns
 * (decode_ns = 1.25); no blocks to decode (one fingerprint a "block").
 * Measured with pairs --k 5 and --k 7 at 2^21 and 2^23 (2026-11-29). */
static const sims_cost_model JOIN_MODEL = {24.0, 0.69, 0.0, 0};

int sims_scan_join_design(unsigned k, uint64_t n, sims_design *d)
{
    return sims_design_choose(k, n, 1.0, &JOIN_MODEL, d);
}

/* ---- an array ------------------------------------------------------------- */

typedef struct array_src {
    scan_values values; /* first: the source sims_scan_values_next reads */
    uint64_t *v;        /* the permuted copy it reads, owned */
    scan_array_ctx *owner;
} array_src;

void sims_scan_array_init(scan_array_ctx *a, const sims_design *d, const uint64_t *fps, size_t n,
                          int distinct)
{
    memset(a, 0, sizeof *a);
    a->d = d;
    a->fps = fps;
    a->n = n;
    a->distinct = distinct;
    pthread_mutex_init(&a->mu, NULL);
}

void sims_scan_array_release(scan_array_ctx *a)
{
    for (unsigned i = 0; i < a->nspare; i++)
        free(a->spare[i]);
    a->nspare = 0;
    pthread_mutex_destroy(&a->mu);
}

/* A buffer of n values: a spare, or a new one (NULL when out of memory). */
static uint64_t *array_take(scan_array_ctx *a)
{
    uint64_t *v = NULL;
    pthread_mutex_lock(&a->mu);
    if (a->nspare)
        v = a->spare[--a->nspare];
    pthread_mutex_unlock(&a->mu);
    return v ? v : malloc((a->n ? a->n : 1) * sizeof *v);
}

static void array_give(scan_array_ctx *a, uint64_t *v)
{
    if (!v)
        return;
    pthread_mutex_lock(&a->mu);
    if (a->nspare < SCAN_ARRAY_SPARE) {
        a->spare[a->nspare++] = v;
        v = NULL;
    }
    pthread_mutex_unlock(&a->mu);
    free(v);
}

static int array_open(void *ctx, unsigned t, uint64_t lo, uint64_t hi, void **out)
{
    (void)lo;
    (void)hi; /* one part per table */
    scan_array_ctx *a = (scan_array_ctx *)ctx;
    array_src *s = calloc(1, sizeof *s);
    uint64_t *tmp = array_take(a);
    if (s)
        s->v = array_take(a);
    if (!s || !s->v || !tmp) {
        array_give(a, tmp);
        if (s)
            array_give(a, s->v);
        free(s);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for %zu fingerprints", a->n);
    }
    const sims_design_table *tab = &a->d->tables[t];
    for (size_t i = 0; i < a->n; i++)
        s->v[i] = sims_permute(&tab->permuter, a->fps[i]);
    if (a->distinct)
        sims_radix_sort_u64_top(s->v, tmp, a->n, tab->prefix_bits);
    else /* sorted whole: repeats side by side, where the join drops them */
        sims_radix_sort_u64_grouped(s->v, tmp, a->n, tab->prefix_bits);
    array_give(a, tmp);
    s->owner = a;
    s->values.v = s->v;
    s->values.n = a->n;
    *out = s;
    return 0;
}

int sims_scan_values_next(void *src, uint64_t *out, size_t cap, size_t *n)
{
    scan_values *s = (scan_values *)src;
    size_t m = s->n - s->pos < cap ? s->n - s->pos : cap;
    memcpy(out, s->v + s->pos, m * sizeof *out);
    s->pos += m;
    *n = m;
    return 0;
}

static void array_close(void *src)
{
    array_src *s = (array_src *)src;
    array_give(s->owner, s->v);
    free(s);
}

void sims_scan_array_input(scan_join_input *in, scan_array_ctx *ctx)
{
    *in = (scan_join_input){array_open, sims_scan_values_next, array_close, ctx, 1};
}
