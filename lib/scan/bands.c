/* bands.c: the near-duplicate rule's band candidates over a store
 * (format/sketch.md 6.2): every pair of distinct fingerprints more than k
 * apart whose documents' sketches agree on one band. One pass over the
 * live documents keeps their fingerprints and, for as many bands as the
 * memory allows, their keys; then the scan's threads take the bands in
 * turn: each band's (key, document) values radix-sorted (through a
 * spilling sorter on one thread when they do not fit), its groups of equal
 * keys read, and their pairs pushed into the join's pair sorter beside the
 * pairs within k (which sorts them: the same output for every thread
 * count). */
#include "scan/bands.h"
#include "scan/pairs.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/sketch.h"
#include "sort/u64sort.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct band_run {
    const simstore_scan_options *o;
    unsigned rows, first, count; /* this pass: bands first .. first + count - 1 */
    uint64_t *fps;               /* document ordinal -> fingerprint */
    size_t n, cap, limit;        /* limit: the documents of the first pass */
    uint32_t *keys;              /* this pass's keys: ordinal * count + band - first */
    int collect_fps;
} band_run;

static int take_doc(void *ctx, const uint8_t *id, size_t len, const sims_doc_record *rec)
{
    (void)id;
    (void)len;
    band_run *b = (band_run *)ctx;
    if (!rec->sketch)
        return 0;
    size_t i = b->n++;
    if (b->collect_fps) {
        if (i >= UINT32_MAX)
            return sims_fail(SIMSTORE_EFULL, "band candidates of more than 2^32 documents");
        if (sims_grow((void **)&b->fps, &b->cap, i + 1, sizeof *b->fps, 1024) != 0)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for the documents' fingerprints");
        b->fps[i] = rec->fp;
    } else if (i >= b->limit || b->fps[i] != rec->fp) {
        return sims_fail(SIMSTORE_EIO, "the store's documents changed between band passes");
    }
    if (b->keys)
        for (unsigned j = 0; j < b->count; j++)
            b->keys[(size_t)j * b->limit + i] =
                sims_sketch_band_key(rec->sketch, b->rows, b->first + j);
    return 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* One group of documents sharing a band key: each pair of its distinct
 * fingerprints more than k apart into the join's sorter (under mu, which
 * the band workers share). */
static int push_group(uint64_t *fps, size_t n, unsigned k, sims_recsort *joined,
                      pthread_mutex_t *mu)
{
    if (n < 2)
        return 0;
    qsort(fps, n, sizeof *fps, cmp_u64); /* pairs (a, b) with a < b, repeats side by side */
    uint8_t key[16], val[1];
    for (size_t i = 0; i < n; i++) {
        if (i && fps[i] == fps[i - 1])
            continue;
        for (size_t j = i + 1; j < n; j++) {
            if (fps[j] == fps[j - 1])
                continue;
            unsigned d = sims_distance(fps[i], fps[j]);
            if (d <= k)
                continue; /* the join's own */
            be_store64(key, fps[i]);
            be_store64(key + 8, fps[j]);
            val[0] = (uint8_t)d;
            pthread_mutex_lock(mu);
            int rc = sims_recsort_push(joined, key, sizeof key, val, sizeof val);
            pthread_mutex_unlock(mu);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Read sorted (key << 32 | ordinal) values and push each group's pairs.
 * Most keys are held by one document: a run's fingerprints are looked up
 * (a random read of fps) only once a second document shares its key. */
typedef struct group_reader {
    const uint64_t *fps;
    unsigned k;
    sims_recsort *joined;
    pthread_mutex_t *mu;
    uint64_t *group;
    size_t n, cap;
    int have;       /* key and first hold the current run */
    uint32_t key;   /* the current run's key */
    uint32_t first; /* its first document */
} group_reader;

static int group_add(group_reader *g, uint32_t ordinal)
{
    if (sims_grow((void **)&g->group, &g->cap, g->n + 1, sizeof *g->group, 64) != 0)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a band's documents");
    g->group[g->n++] = g->fps[ordinal];
    return 0;
}

static int group_end(group_reader *g)
{
    int rc = g->n ? push_group(g->group, g->n, g->k, g->joined, g->mu) : 0;
    g->n = 0;
    g->have = 0;
    return rc;
}

static int group_take(group_reader *g, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t key = (uint32_t)(v[i] >> 32), ordinal = (uint32_t)v[i];
        int rc = 0;
        if (g->have && key == g->key) {
            if (g->n == 0)
                rc = group_add(g, g->first);
            if (rc == 0)
                rc = group_add(g, ordinal);
        } else {
            rc = group_end(g);
            g->have = 1;
            g->key = key;
            g->first = ordinal;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* Band j of this pass: its values sorted in memory when v and tmp are
 * given, else through a spilling sorter of run_values. */
static int one_band(band_run *b, unsigned j, uint64_t *v, uint64_t *tmp, size_t run_values,
                    group_reader *g)
{
    if (v) {
        const uint32_t *keys = b->keys + (size_t)j * b->limit;
        for (size_t i = 0; i < b->n; i++)
            v[i] = (uint64_t)keys[i] << 32 | i;
        sims_radix_sort_u64_top(v, tmp, b->n, 32);
        int rc = group_take(g, v, b->n);
        return rc ? rc : group_end(g);
    }
    sims_u64sort *sorter = NULL;
    int rc = sims_u64sort_new(run_values, sims_scan_tmp_dir(b->o), &sorter);
    uint64_t buf[1024];
    for (size_t i = 0; rc == 0 && i < b->n; i += 1024) {
        size_t m = b->n - i < 1024 ? b->n - i : 1024;
        for (size_t x = 0; x < m; x++)
            buf[x] = (uint64_t)b->keys[(size_t)j * b->limit + i + x] << 32 | (i + x);
        rc = sims_u64sort_push(sorter, buf, m);
    }
    if (rc == 0)
        rc = sims_u64sort_finish(sorter, 0);
    size_t m;
    while (rc == 0 && (rc = sims_u64sort_read(sorter, buf, 1024, &m)) == 0 && m)
        rc = group_take(g, buf, m);
    if (rc == 0)
        rc = group_end(g);
    sims_u64sort_free(sorter);
    return rc;
}

/* A thread's share of a pass: bands t, t + threads, ... */
typedef struct band_worker {
    band_run *b;
    unsigned t, threads;
    uint64_t *v, *tmp; /* its sort arrays (NULL: through a spilling sorter) */
    size_t run_values;
    group_reader g;
    atomic_int *failed;
    int rc;
} band_worker;

static void *band_worker_run(void *arg)
{
    band_worker *w = (band_worker *)arg;
    for (unsigned j = w->t; w->rc == 0 && j < w->b->count; j += w->threads) {
        if (atomic_load(w->failed))
            break;
        w->rc = one_band(w->b, j, w->v, w->tmp, w->run_values, &w->g);
    }
    if (w->rc)
        atomic_store(w->failed, 1);
    return NULL;
}

int sims_scan_band_pairs(scan_state *st, const simstore_scan_options *o, sims_recsort *joined)
{
    band_run b;
    memset(&b, 0, sizeof b);
    b.o = o;
    unsigned total;
    simstore_sketch_bands(st->s->text.sketch, o->min_similarity, &b.rows, &total);
    if (!o->bands || !total || st->fp_only)
        return 0;
    /* The documents' fingerprints first (and how many there are). */
    b.collect_fps = 1;
    int rc = sims_docs_each_live(st->s, st->snap, st->txn, st->walked, take_doc, &b);
    b.collect_fps = 0;
    size_t n = b.limit = b.n;
    /* Memory (half the scan's: the join's sorter holds the rest): the
     * fingerprints, then per pass each band's keys and, per thread when
     * they fit, a band's values and their radix scratch (16 bytes a
     * document); else one thread through a spilling sorter. */
    uint64_t budget = o->memory_bytes / 2, fixed = (uint64_t)n * 8;
    uint64_t sort_bytes = (uint64_t)n * 16;
    unsigned threads = o->threads ? o->threads : 1;
    if (threads > total)
        threads = total;
    if (threads > 64)
        threads = 64;
    while (threads > 1 && fixed + threads * sort_bytes + (uint64_t)n * 4 * threads > budget)
        threads--;
    int in_memory = fixed + threads * sort_bytes + (uint64_t)n * 4 * threads <= budget;
    uint64_t sorting = in_memory ? threads * sort_bytes : 0;
    uint64_t room = budget > fixed + sorting ? budget - fixed - sorting : 0;
    unsigned per_pass = n ? (unsigned)(room / ((uint64_t)n * 4)) : total;
    if (per_pass < 1)
        per_pass = 1;
    if (per_pass > total)
        per_pass = total;
    size_t run_values = (size_t)(budget / 2 / 16);
    if (run_values < ((size_t)1 << 16))
        run_values = (size_t)1 << 16;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    atomic_int failed = 0;
    band_worker *w = calloc(threads, sizeof *w);
    if (rc == 0 && !w)
        rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for the band workers");
    for (unsigned t = 0; rc == 0 && t < threads; t++) {
        w[t] = (band_worker){&b,
                             t,
                             threads,
                             NULL,
                             NULL,
                             run_values,
                             (group_reader){b.fps, o->k, joined, &mu, NULL, 0, 0, 0, 0, 0},
                             &failed,
                             0};
        if (in_memory && n) {
            w[t].v = malloc(n * sizeof *w[t].v);
            w[t].tmp = malloc(n * sizeof *w[t].tmp);
            if (!w[t].v || !w[t].tmp)
                rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for a band of %zu documents", n);
        }
    }
    if (rc == 0 && o->progress)
        o->progress(o->progress_ctx, "banding sketches", 0, total);
    for (unsigned first = 0; rc == 0 && n > 1 && first < total; first += per_pass) {
        b.first = first;
        b.count = total - first < per_pass ? total - first : per_pass;
        uint32_t *keys = realloc(b.keys, (size_t)n * b.count * sizeof *keys);
        if (!keys) {
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for %u bands of %zu documents", b.count,
                           n);
            break;
        }
        b.keys = keys;
        b.n = 0;
        rc = sims_docs_each_live(st->s, st->snap, st->txn, st->walked, take_doc, &b);
        if (rc == 0 && b.n != n)
            rc = sims_fail(SIMSTORE_EIO, "the store's documents changed between band passes");
        if (rc)
            break;
        pthread_t tid[64];
        unsigned started = 1;
        for (unsigned t = 1; t < threads && t < 64; t++, started++)
            if (pthread_create(&tid[t], NULL, band_worker_run, &w[t]) != 0)
                break;
        for (unsigned t = started; t < threads; t++) /* not started: this thread takes them */
            band_worker_run(&w[t]);
        band_worker_run(&w[0]);
        for (unsigned t = 1; t < started; t++)
            pthread_join(tid[t], NULL);
        for (unsigned t = 0; rc == 0 && t < threads; t++)
            rc = w[t].rc;
        if (rc == 0 && o->progress)
            o->progress(o->progress_ctx, "banding sketches", first + b.count, total);
    }
    for (unsigned t = 0; w && t < threads; t++) {
        free(w[t].g.group);
        free(w[t].v);
        free(w[t].tmp);
    }
    free(w);
    pthread_mutex_destroy(&mu);
    free(b.keys);
    free(b.fps);
    return rc;
}
