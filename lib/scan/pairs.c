/* pairs.c: simstore_pairs (the join's fingerprint pairs turned into
 * document pairs, or counted fingerprint pairs, in the documented order)
 * and simstore_join_fingerprints (the same join over an array). */
#include "scan/pairs.h"
#include "scan/bands.h"
#include "scan/joinall.h"
#include "scan/state.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/fileio.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A key: distance, then two escaped ids of up to 511 bytes each. */
#define KEY_MAX (1 + 2 * (2 * SIMSTORE_MAX_ID_BYTES + 2))

const char *sims_scan_tmp_dir(const simstore_scan_options *o)
{
    return sims_scratch_dir(o->tmp_dir);
}

int sims_scan_sorter_new(const simstore_scan_options *o, unsigned share, sims_recsort **out)
{
    return sims_recsort_new((size_t)(o->memory_bytes / share), sims_scan_tmp_dir(o), out);
}

/* Bytes the join of n fingerprints in memory holds on `threads` threads:
 * the array, and per thread a permuted copy and its radix-sort scratch
 * (joinall.c, array_open); UINT64_MAX past 64 bits. */
static uint64_t array_join_bytes(uint64_t n, unsigned threads)
{
    uint64_t per_fp = 8 * (1 + 2 * (uint64_t)threads);
    return n > UINT64_MAX / per_fp ? UINT64_MAX : n * per_fp;
}

/* The fingerprints in a spool of values kept in memory up to this many. */
#define SPOOL_MEM_VALUES ((size_t)1 << 16)

/* o->k above the store's design: its tables miss pairs, so the distinct
 * fingerprints are read once and joined under a design for o->k
 * (simstore_join_fingerprints' way): the same pairs a store built for o->k
 * would join. The half of o->memory_bytes that the pair sorter and the
 * prefix groups leave holds them: as an array with each thread's permuted
 * copy when that fits (checked with the segments' counts, repeats
 * included), else in a spool whose tables each thread sorts through a
 * spilling sorter of its share, runs in the scan's temporary directory. */
static int join_beyond_design(scan_state *st, const simstore_scan_options *o, sims_recsort *out)
{
    const sims_snapshot *snap = st->snap;
    uint64_t n_max = 0;
    for (uint32_t i = 0; i < snap->segment_count; i++)
        n_max += snap->segments[i]->fp_count;
    if (n_max < 2)
        return 0;
    sims_design *d = malloc(sizeof *d);
    if (!d)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a design");
    int rc = sims_scan_join_design(o->k, n_max, d);
    unsigned threads = 1; /* the join's threads: at most one a table */
    if (rc == 0 && o->threads > 1)
        threads = o->threads < d->n_tables ? o->threads : d->n_tables;
    int in_memory = array_join_bytes(n_max, threads) <= o->memory_bytes / 2 &&
                    n_max <= SIZE_MAX / sizeof(uint64_t);
    uint64_t *fps = NULL;
    sims_spool *spool = NULL;
    size_t n = 0;
    if (rc == 0 && o->progress)
        o->progress(o->progress_ctx, "reading fingerprints", 0, n_max);
    if (rc == 0 && in_memory) {
        fps = malloc((size_t)n_max * sizeof *fps);
        if (!fps)
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for %llu fingerprints",
                           (unsigned long long)n_max);
        if (rc == 0)
            rc = sims_scan_store_distinct_fps(st->s, snap, fps, (size_t)n_max, &n);
    } else if (rc == 0) {
        rc = sims_spool_new(SPOOL_MEM_VALUES, sims_scan_tmp_dir(o), &spool);
        if (rc == 0)
            rc = sims_scan_store_distinct_spool(st->s, snap, spool);
        if (rc == 0)
            rc = sims_spool_seal(spool);
        if (rc == 0)
            n = (size_t)sims_spool_count(spool);
    }
    if (rc == 0 && o->progress)
        o->progress(o->progress_ctx, "reading fingerprints", n_max, n_max);
    if (rc == 0 && n < n_max)
        rc = sims_scan_join_design(o->k, n, d);
    if (rc == 0) {
        if (threads > d->n_tables)
            threads = d->n_tables;
        if (o->progress)
            o->progress(o->progress_ctx, "joining tables", 0, d->n_tables);
        scan_join_input in;
        scan_array_ctx actx;
        sims_scan_array_init(&actx, d, fps, n, 1); /* distinct: scan_store_distinct_* */
        /* Each thread's sorter: its share of the half, 16 bytes a value. */
        uint64_t run = o->memory_bytes / 2 / threads / 16;
        scan_spool_ctx sctx = {d, spool, (size_t)(run > SPOOL_MEM_VALUES ? run : SPOOL_MEM_VALUES),
                               sims_scan_tmp_dir(o)};
        if (in_memory)
            sims_scan_array_input(&in, &actx);
        else
            sims_scan_spool_input(&in, &sctx);
        rc = sims_scan_join_all(d, o->k, threads, o->memory_bytes / 4, &in, out);
        sims_scan_array_release(&actx);
        if (o->progress)
            o->progress(o->progress_ctx, "joining tables", d->n_tables, d->n_tables);
    }
    sims_spool_free(spool);
    free(fps);
    free(d);
    return rc;
}

int sims_scan_join_store(scan_state *st, const simstore_scan_options *o, sims_recsort **joined)
{
    int rc = sims_scan_sorter_new(o, 4, joined);
    if (rc)
        return rc;
    const sims_design *d = st->s->design;
    if (o->k > d->params.k) {
        rc = join_beyond_design(st, o, *joined);
    } else {
        scan_join_input in;
        sims_scan_store_input(&in, st->s, st->snap, o->threads);
        if (o->progress)
            o->progress(o->progress_ctx, "joining tables", 0, d->n_tables);
        rc = sims_scan_join_all(d, o->k, o->threads, o->memory_bytes / 4, &in, *joined);
        if (o->progress)
            o->progress(o->progress_ctx, "joining tables", d->n_tables, d->n_tables);
    }
    if (rc == 0)
        rc = sims_scan_band_pairs(st, o, *joined);
    if (rc == 0)
        rc = sims_recsort_finish(*joined, (size_t)(o->memory_bytes / 4));
    return rc;
}

typedef struct pairs_run {
    scan_state *st;
    const simstore_scan_options *o;
    simstore_near_rule rule; /* o's k and minimum similarity */
    unsigned flags;
    sims_recsort *out;
    scan_docs da, db;
    uint8_t key[KEY_MAX];
} pairs_run;

/* ---- the final records ---------------------------------------------------- */

static int push_fp_pair(pairs_run *r, uint64_t a, uint64_t b, unsigned d, uint64_t ca, uint64_t cb)
{
    uint8_t key[17], val[16];
    key[0] = (uint8_t)d;
    be_store64(key + 1, a);
    be_store64(key + 9, b);
    be_store64(val, ca);
    be_store64(val + 8, cb);
    return sims_recsort_push(r->out, key, sizeof key, val, sizeof val);
}

static int push_doc_pair(pairs_run *r, const scan_docs *x, size_t i, const scan_docs *y, size_t j,
                         unsigned d)
{
    double sim;
    if (!simstore_near_duplicate_sketches(&r->rule, r->st->s->text.sketch, d, scan_doc_sketch(x, i),
                                          scan_doc_sketch(y, j), &sim))
        return 0;
    const scan_doc *p = &x->docs[i], *q = &y->docs[j];
    const char *pid = x->ids + p->off, *qid = y->ids + q->off;
    if (sims_id_cmp(pid, p->len, qid, q->len) > 0) {
        const scan_doc *td = p;
        p = q;
        q = td;
        const char *ti = pid;
        pid = qid;
        qid = ti;
        const scan_docs *tx = x;
        x = y;
        y = tx;
    }
    size_t len = 0;
    r->key[len++] = (uint8_t)d;
    len += sims_scan_key_put_id(r->key + len, pid, p->len);
    len += sims_scan_key_put_id(r->key + len, qid, q->len);
    uint8_t val[26];
    val[0] = (uint8_t)p->flags;
    val[1] = (uint8_t)q->flags;
    be_store64(val + 2, x->fp);
    be_store64(val + 10, y->fp);
    uint64_t bits;
    memcpy(&bits, &sim, sizeof bits);
    le_store64(val + 18, bits);
    return sims_recsort_push(r->out, r->key, (uint32_t)len, val, sizeof val);
}

/* Every pair of fp's documents: distance 0. */
static int push_shared(void *ctx, uint64_t fp, uint64_t count)
{
    pairs_run *r = (pairs_run *)ctx;
    if (r->flags & SIMSTORE_PAIRS_BY_FINGERPRINT)
        return push_fp_pair(r, fp, fp, 0, count, count);
    int rc = sims_scan_docs_load(r->st, fp, 0, &r->da);
    for (size_t i = 0; rc == 0 && i < r->da.count; i++)
        for (size_t j = i + 1; rc == 0 && j < r->da.count; j++)
            rc = push_doc_pair(r, &r->da, i, &r->da, j, 0);
    r->da.valid = 0; /* reused: not a cache of the join's a */
    return rc;
}

/* One pair of distinct fingerprints from the join: skipped when either has
 * no document (dead), else its document pairs or its counts. */
static int push_joined(void *ctx, uint64_t a, uint64_t b, unsigned d)
{
    pairs_run *r = (pairs_run *)ctx;
    if (r->st->fp_only)
        return push_fp_pair(r, a, b, d, 1, 1);
    int rc;
    if (r->flags & SIMSTORE_PAIRS_BY_FINGERPRINT) {
        uint64_t ca, cb;
        if ((rc = sims_scan_fp_count(r->st, a, &ca)) || (rc = sims_scan_fp_count(r->st, b, &cb)))
            return rc;
        return ca && cb ? push_fp_pair(r, a, b, d, ca, cb) : 0;
    }
    if (!r->da.valid || r->da.fp != a) {
        if ((rc = sims_scan_docs_load(r->st, a, 0, &r->da)))
            return rc;
    }
    if (r->da.count == 0)
        return 0;
    if ((rc = sims_scan_docs_load(r->st, b, 0, &r->db)))
        return rc;
    for (size_t i = 0; rc == 0 && i < r->da.count; i++)
        for (size_t j = 0; rc == 0 && j < r->db.count; j++)
            rc = push_doc_pair(r, &r->da, i, &r->db, j, d);
    return rc;
}

static int deliver(pairs_run *r, simstore_pair_fn fn, void *ctx)
{
    char ida[SIMSTORE_MAX_ID_BYTES + 1], idb[SIMSTORE_MAX_ID_BYTES + 1];
    sims_rec rec;
    int got;
    while ((got = sims_recsort_next(r->out, &rec)) == 1) {
        simstore_pair p;
        memset(&p, 0, sizeof p);
        p.distance = rec.key[0];
        p.similarity = SIMSTORE_SIMILARITY_UNKNOWN;
        if (rec.key_len == 17 && rec.val_len == 16) {
            p.fp_a = be_load64(rec.key + 1);
            p.fp_b = be_load64(rec.key + 9);
            if (r->flags & SIMSTORE_PAIRS_BY_FINGERPRINT) {
                p.count_a = be_load64(rec.val);
                p.count_b = be_load64(rec.val + 8);
            }
        } else {
            size_t pos = 1;
            p.id_a_len = sims_scan_key_get_id(rec.key, rec.key_len, &pos, ida);
            p.id_b_len = sims_scan_key_get_id(rec.key, rec.key_len, &pos, idb);
            ida[p.id_a_len] = idb[p.id_b_len] = '\0';
            p.id_a = ida;
            p.id_b = idb;
            p.flags_a = rec.val[0];
            p.flags_b = rec.val[1];
            p.fp_a = be_load64(rec.val + 2);
            p.fp_b = be_load64(rec.val + 10);
            uint64_t bits = le_load64(rec.val + 18);
            memcpy(&p.similarity, &bits, sizeof bits);
        }
        int rc = fn(ctx, &p);
        if (rc)
            return rc;
    }
    return got < 0 ? got : 0;
}

static int pairs_in_state(scan_state *st, const simstore_scan_options *o, unsigned flags,
                          simstore_pair_fn fn, void *ctx)
{
    sims_recsort *joined = NULL;
    pairs_run r;
    memset(&r, 0, sizeof r);
    r.st = st;
    r.o = o;
    sims_scan_near_rule(o, st->s->text.sketch, &r.rule);
    r.flags = flags;
    int rc = sims_scan_join_store(st, o, &joined);
    if (rc == 0)
        rc = sims_scan_sorter_new(o, 4, &r.out);
    if (rc == 0 && !st->fp_only)
        rc = sims_scan_each_shared_fp(st, push_shared, &r);
    if (rc == 0 && o->progress)
        o->progress(o->progress_ctx, "reading documents", 0, sims_recsort_count(joined));
    if (rc == 0)
        rc = sims_scan_pairs_each(joined, push_joined, &r);
    sims_recsort_free(joined);
    if (rc == 0)
        rc = sims_recsort_finish(r.out, (size_t)(o->memory_bytes / 4));
    if (rc == 0)
        rc = deliver(&r, fn, ctx);
    sims_recsort_free(r.out);
    sims_scan_docs_free(&r.da);
    sims_scan_docs_free(&r.db);
    return rc;
}

int simstore_pairs(simstore *s, const simstore_scan_options *opts, unsigned flags,
                   simstore_pair_fn fn, void *ctx)
{
    if (!s || !fn)
        return sims_fail(SIMSTORE_EINVAL, "simstore_pairs: NULL store or callback");
    if (flags & ~SIMSTORE_PAIRS_BY_FINGERPRINT)
        return sims_fail(SIMSTORE_EINVAL, "simstore_pairs: unknown flags %#x", flags);
    simstore_scan_options o;
    /* Pairs of fingerprints have no similarity: the rule's default asks
     * none, a minimum is refused. */
    int rc = sims_scan_options_resolve(
        s, opts, flags & SIMSTORE_PAIRS_BY_FINGERPRINT ? SIMSTORE_NEAR_BY_FINGERPRINT : 0, &o);
    if (rc)
        return rc;
    scan_state st;
    rc = sims_scan_state_begin(s, &st);
    if (rc)
        return rc;
    rc = pairs_in_state(&st, &o, flags, fn, ctx);
    sims_scan_state_end(&st);
    return rc;
}

/* ---- an array of fingerprints --------------------------------------------- */

int simstore_join_fingerprints(const uint64_t *fps, size_t n, unsigned k,
                               const simstore_scan_options *opts, simstore_fp_pair_fn fn, void *ctx)
{
    if ((!fps && n) || !fn)
        return sims_fail(SIMSTORE_EINVAL, "simstore_join_fingerprints: NULL argument");
    if (k < 1 || k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_EINVAL, "join distance %u outside 1..%u", k, SIMSTORE_MAX_K);
    if (opts && opts->min_similarity != 0 &&
        opts->min_similarity != SIMSTORE_NEAR_DEFAULT_SIMILARITY)
        return sims_fail(SIMSTORE_EINVAL, "a join of fingerprints has no similarity: give no "
                                          "minimum similarity");
    simstore_scan_options o;
    if (opts)
        o = *opts;
    else
        simstore_scan_options_init(&o);
    if (o.threads == 0)
        o.threads = simstore_default_threads();
    if (o.memory_bytes < ((uint64_t)16 << 20))
        o.memory_bytes = o.memory_bytes ? ((uint64_t)16 << 20) : ((uint64_t)1 << 30);
    sims_design *d = malloc(sizeof *d);
    if (!d)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a design");
    int rc = sims_scan_join_design(k, n, d);
    sims_recsort *joined = NULL;
    if (rc == 0)
        rc = sims_scan_sorter_new(&o, 2, &joined);
    if (rc == 0) {
        scan_array_ctx actx;
        sims_scan_array_init(&actx, d, fps, n, 0); /* repeats allowed: sorted whole */
        scan_join_input in;
        sims_scan_array_input(&in, &actx);
        rc = sims_scan_join_all(d, k, o.threads, o.memory_bytes / 4, &in, joined);
        sims_scan_array_release(&actx);
    }
    if (rc == 0)
        rc = sims_recsort_finish(joined, (size_t)(o.memory_bytes / 2));
    if (rc == 0)
        rc = sims_scan_pairs_each(joined, fn, ctx);
    sims_recsort_free(joined);
    free(d);
    return rc;
}
