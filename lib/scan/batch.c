/* batch.c: many queries at once (simstore_query_batch): per table of every
 * segment, sort a chunk of queries by permuted probe range and merge-scan
 * the table's blocks (or probe query by query, by a cost model), collect
 * (fingerprint, query) candidates, de-duplicate them, resolve documents in
 * fingerprint order on every worker, and hand each query its answer in input
 * order, exactly as simstore_query_fp() would give it (store/query.c shares
 * the document lookup, the cross-checks and the match order). */
#include "store/store_internal.h"

#include "common/bits.h"
#include "common/error.h"
#include "common/grow.h"
#include "design/design.h"
#include "table/table.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_DEFAULT_MEMORY ((uint64_t)256 << 20)
#define BATCH_MAX_THREADS 256u
/* Working bytes per query of a chunk: its probe-range pairs (and their radix
 * buffer) on each worker, the candidate pairs (a few per query), the per-query
 * answer index. A chunk is sized so that these take half the memory budget;
 * the other half bounds what grows with the answers (more candidates than a
 * few per query, the documents found): a chunk that passes it is answered
 * again as two halves (CHUNK_SPLIT), down to single queries, whose answer
 * is held whole as simstore_query_fp() holds it. */
#define BATCH_BYTES_PER_QUERY(threads) (16u * (2u * (threads) + 4u))
/* A worker's answers outgrew its share: split the chunk (internal). */
#define CHUNK_SPLIT 1

/* Sorted by (a, b): (probe range low end, query) or (fingerprint, query).
 * A probe key's b is the query's number, with (beyond the design's k) the
 * prefix bits its range flips in the top byte (KEY_FLIPS). */
typedef struct pair {
    uint64_t a, b;
} pair;

#define KEY_QUERY(b) ((b) & ((UINT64_C(1) << 56) - 1))
#define KEY_FLIPS(b) ((unsigned)((b) >> 56))

typedef struct batch batch;

/* One worker's state, kept across chunks. */
typedef struct worker {
    batch *run;
    pair *keys, *keys_tmp; /* one task's queries by probe range */
    size_t keys_cap;
    uint64_t *masks; /* beyond the design's k: the table's prefix masks */
    size_t mask_cap;
    uint64_t *block; /* one decoded block */
    size_t block_cap;
    pair *cand; /* (fingerprint, query) found by this worker's tasks */
    size_t cand_len, cand_cap;
    simstore_query *q;    /* document lookups, in the batch's state */
    simstore_match *docs; /* documents of this worker's fingerprints: id and
                             meta as arena offsets + 1 until fixed up */
    size_t docs_len, docs_cap;
    char *arena;
    size_t arena_len, arena_cap;
    size_t fp_from, fp_to; /* this worker's share of the distinct fingerprints */
    size_t limit;          /* bytes of candidates, documents and ids before CHUNK_SPLIT */
    int rc;
    char message[512];
} worker;

struct batch {
    simstore *s;
    const sims_design *design;
    sims_snapshot *snap;
    int fp_only;
    const uint8_t *sketches; /* of every query (sketch_bytes each), or NULL */
    size_t sketch_bytes;     /* of the store's kind; 0: it keeps none */
    unsigned k;
    unsigned flips;   /* beyond the design's k: sims_design_prefix_flips; else 0 */
    size_t max_masks; /* prefix masks of the table with the most (1 within k) */
    simstore_batch_strategy strategy;
    unsigned threads;
    worker *workers;
    /* The chunk being answered. */
    const uint64_t *fps;
    size_t m;
    uint64_t answer_memory; /* the half of the budget answers may take */
    unsigned parts;         /* tasks per table and segment: query ranges */
    size_t tasks;
    atomic_size_t next_task;
    /* After phase 1: distinct (fingerprint, query) pairs, by fingerprint. */
    pair *cand, *cand_tmp;
    size_t cand_len, cand_cap;
    uint64_t *ufp; /* distinct candidate fingerprints */
    size_t ufp_len, ufp_cap;
    size_t *ufp_of_cand; /* per candidate: its index in ufp */
    size_t ufp_of_cand_cap;
    const simstore_match **fp_docs; /* per distinct fingerprint: its documents */
    uint32_t *fp_doc_count;
    size_t fp_docs_cap;
    size_t *by_query;    /* candidate indices grouped by query (counting sort) */
    size_t *query_start; /* m + 1 offsets into by_query */
    size_t by_query_cap, query_start_cap;
    simstore_match *answer;
    size_t answer_cap;
};

void simstore_batch_options_init(simstore_batch_options *o)
{
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->threads = 0;
    o->memory_bytes = BATCH_DEFAULT_MEMORY;
    o->strategy = SIMSTORE_BATCH_AUTO;
    o->flags = 0;
}

/* Room for need pairs in *v and in its radix buffer *tmp (same capacity). */
static int grow_pairs(pair **v, pair **tmp, size_t *cap, size_t need)
{
    size_t old = *cap;
    if (sims_grow16((void **)v, cap, need, sizeof **v))
        return -1;
    if (*cap != old || !*tmp) {
        pair *t = (pair *)realloc(*tmp, *cap * sizeof *t);
        if (!t)
            return -1;
        *tmp = t;
    }
    return 0;
}

static int cmp_pair(const void *x, const void *y)
{
    const pair *a = (const pair *)x, *b = (const pair *)y;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* One stable counting pass of an LSD radix sort on byte `shift / 8` of the
 * a (high) or b (low) half. */
static void radix_pass(const pair *in, pair *out, size_t n, int high, unsigned shift)
{
    size_t count[256] = {0};
    for (size_t i = 0; i < n; i++)
        count[((high ? in[i].a : in[i].b) >> shift) & 0xff]++;
    size_t sum = 0;
    for (unsigned d = 0; d < 256; d++) {
        size_t c = count[d];
        count[d] = sum;
        sum += c;
    }
    for (size_t i = 0; i < n; i++)
        out[count[((high ? in[i].a : in[i].b) >> shift) & 0xff]++] = in[i];
}

/* Sort v by the bits a_mask keeps of a, then (with by_b) by b: LSD radix
 * over the bytes that differ between elements (query numbers are small),
 * qsort for short arrays (which orders by all of a and b: also an order by
 * the masked bits). tmp has room for n. */
static void sort_pairs(pair *v, pair *tmp, size_t n, uint64_t a_mask, int by_b)
{
    if (n < 256) {
        qsort(v, n, sizeof *v, cmp_pair);
        return;
    }
    uint64_t a_and = ~0ULL, a_or = 0, b_and = ~0ULL, b_or = 0;
    for (size_t i = 0; i < n; i++) {
        a_and &= v[i].a;
        a_or |= v[i].a;
        b_and &= v[i].b;
        b_or |= v[i].b;
    }
    pair *src = v, *dst = tmp;
    for (int high = by_b ? 0 : 1; high <= 1; high++) {
        uint64_t varies = high ? (a_and ^ a_or) & a_mask : b_and ^ b_or;
        for (unsigned shift = 0; shift < 64; shift += 8) {
            if (((varies >> shift) & 0xff) == 0)
                continue;
            radix_pass(src, dst, n, high, shift);
            pair *t = src;
            src = dst;
            dst = t;
        }
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

static int worker_fail(worker *w, int rc)
{
    if (w->rc == SIMSTORE_OK) {
        w->rc = rc;
        if (rc != CHUNK_SPLIT)
            snprintf(w->message, sizeof w->message, "%s", simstore_last_error());
    }
    return rc;
}

static int push_candidate(worker *w, uint64_t fp, uint64_t query)
{
    if (w->cand_len == w->cand_cap && w->run->m > 1 &&
        (w->cand_len + 1) * sizeof *w->cand > w->limit)
        return CHUNK_SPLIT;
    if (w->cand_len == w->cand_cap &&
        sims_grow16((void **)&w->cand, &w->cand_cap, w->cand_len + 1, sizeof *w->cand))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch candidates");
    w->cand[w->cand_len++] = (pair){fp, query};
    return SIMSTORE_OK;
}

/* ---- Phase 1: candidates from the tables ---------------------------------- */

typedef struct probe_emit {
    worker *w;
    const sims_permuter *permuter;
    uint64_t query;
} probe_emit;

static int emit_probed(void *ctx, uint64_t permuted)
{
    probe_emit *e = (probe_emit *)ctx;
    return push_candidate(e->w, sims_unpermute(e->permuter, permuted), e->query);
}

/* Probe the table for each query, in probe-range order (so that the block
 * keys and blocks read move forward through the table). */
static int probe_table(worker *w, const table_reader *r, unsigned t, size_t n, uint64_t low)
{
    batch *b = w->run;
    probe_emit e = {w, &b->design->tables[t].permuter, 0};
    for (size_t i = 0; i < n; i++) {
        /* A key beyond the design's k is the query with f prefix bits
         * flipped: its values are those f bits further from the query. */
        uint64_t pq = w->keys[i].a, lo = pq & ~low;
        e.query = KEY_QUERY(w->keys[i].b);
        int rc = sims_table_reader_search(r, lo, lo | low, pq, b->k - KEY_FLIPS(w->keys[i].b),
                                          emit_probed, &e);
        if (rc)
            return rc;
    }
    return SIMSTORE_OK;
}

/* Test every stored value of [lo, hi] in the decoded block against the
 * group's queries. */
static int scan_values(worker *w, const sims_permuter *perm, const pair *group, size_t gn,
                       size_t nv, uint64_t lo, uint64_t hi)
{
    unsigned k = w->run->k;
    for (size_t i = sims_lower_bound_u64(w->block, nv, lo); i < nv && w->block[i] <= hi; i++) {
        uint64_t v = w->block[i];
        for (size_t j = 0; j < gn; j++) {
            if (sims_distance(v, group[j].a) + KEY_FLIPS(group[j].b) <= k) {
                int rc = push_candidate(w, sims_unpermute(perm, v), KEY_QUERY(group[j].b));
                if (rc)
                    return rc;
            }
        }
    }
    return SIMSTORE_OK;
}

/* Values decoded at a time while a scan needs more of a block. */
#define SCAN_STEP 16

/* Merge-scan: walk the probe-range groups (equal ranges together; ranges of
 * one table never overlap otherwise) and the table's blocks together,
 * decoding each block a group needs once, however many groups share it. */
static int scan_table(worker *w, const table_reader *r, unsigned t, size_t n, uint64_t low)
{
    batch *b = w->run;
    const sims_permuter *perm = &b->design->tables[t].permuter;
    uint64_t nb = sims_table_reader_info(r)->block_count;
    uint64_t decoded = UINT64_MAX, first = 0;
    size_t nv = 0; /* values of block `decoded` decoded so far */
    codec_block_decoder dec;
    for (size_t g = 0, gend; g < n; g = gend) {
        uint64_t lo = w->keys[g].a & ~low, hi = lo | low;
        for (gend = g + 1; gend < n && (w->keys[gend].a & ~low) == lo; gend++)
            ;
        /* Ranges ascend, so the first block does too: the previous one
         * stays first while its key is >= lo. */
        if (first >= nb || sims_table_reader_key(r, first) < lo)
            first = sims_table_reader_find_block(r, lo);
        for (uint64_t blk = first; blk < nb; blk++) {
            /* Block blk holds values above key[blk - 1]. */
            if (blk > first && sims_table_reader_key(r, blk - 1) >= hi)
                break;
            if (blk != decoded) {
                int rc = sims_table_reader_block_start(r, blk, &dec);
                if (rc)
                    return rc;
                decoded = blk;
                nv = 0;
            }
            /* Decode only as far as this range needs: the next ranges may
             * need more of the block, or not. */
            while (dec.remaining > 0 && (nv == 0 || w->block[nv - 1] <= hi)) {
                size_t got, room = w->block_cap - nv;
                int rc = sims_table_reader_block_next(r, blk, &dec, w->block + nv,
                                                      room < SCAN_STEP ? room : SCAN_STEP, &got);
                if (rc)
                    return rc;
                if (got == 0)
                    break;
                nv += got;
            }
            int rc = scan_values(w, perm, &w->keys[g], gend - g, nv, lo, hi);
            if (rc)
                return rc;
        }
    }
    return SIMSTORE_OK;
}

/* The cost model, in values decoded (a binary-search step into cold block
 * keys costs about 4; a scan decodes a block only as far as its ranges
 * need, counted here as the whole block). For G distinct probe ranges among n queries over a
 * table of nb blocks holding f values each and about c blocks per range
 * (c = 1 + values per range / f, values per range = fps / 2^prefix_bits):
 *   merge-scan decodes about D = nb * (1 - exp(-G * c / nb)) whole blocks
 *              (G * c when ranges are sparse, nb when dense): D * f + 2 * G;
 *   probing    searches the keys and decodes about half of c blocks per
 *              query: n * (c * f / 2 + 4 * log2(nb + 1)).
 * Merge-scan wins once queries share blocks or the searches dominate. */
static int choose_scan(const table_reader *r, unsigned prefix_bits, size_t n, size_t groups)
{
    const table_info *info = sims_table_reader_info(r);
    double nb = (double)info->block_count, fps = (double)info->fp_count;
    if (nb < 1)
        return 0;
    double f = fps / nb, per_range = ldexp(fps, -(int)prefix_bits);
    double c = 1.0 + per_range / f;
    double blocks = nb * -expm1(-(double)groups * c / nb);
    double scan = blocks * f + 2.0 * (double)groups;
    double probe = (double)n * (c * f / 2.0 + 4.0 * log2(nb + 1.0));
    return scan <= probe;
}

/* Task: the queries [from, to) of the chunk against table t of one segment. */
static int run_task(worker *w, size_t task)
{
    batch *b = w->run;
    size_t per_segment = (size_t)b->design->n_tables * b->parts;
    const sims_segment *seg = b->snap->segments[task / per_segment];
    unsigned t = (unsigned)(task % per_segment / b->parts), part = (unsigned)(task % b->parts);
    const table_reader *r = seg->tables[t];
    if (sims_table_reader_info(r)->block_count == 0)
        return SIMSTORE_OK;
    size_t from = b->m * part / b->parts, to = b->m * (part + 1) / b->parts, n = to - from;
    if (n == 0)
        return SIMSTORE_OK;
    unsigned prefix_bits = b->design->tables[t].prefix_bits;
    uint64_t low = (UINT64_MAX >> 1) >> (prefix_bits - 1u);
    /* Beyond the design's k each query has a key per prefix mask (the
     * empty one first): format/design.md, "Beyond k". */
    size_t nmasks = sims_design_prefix_masks(prefix_bits, b->flips, w->masks, w->mask_cap);
    if (nmasks > w->mask_cap) {
        if (sims_grow16((void **)&w->masks, &w->mask_cap, nmasks, sizeof *w->masks))
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for a batch");
        sims_design_prefix_masks(prefix_bits, b->flips, w->masks, w->mask_cap);
    }
    if (grow_pairs(&w->keys, &w->keys_tmp, &w->keys_cap, n * nmasks))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a batch");
    /* Each query permuted, sorted by its prefix: its probe range. */
    const sims_permuter *perm = &b->design->tables[t].permuter;
    for (size_t i = 0; i < n; i++) {
        uint64_t pq = sims_permute(perm, b->fps[from + i]);
        for (size_t j = 0; j < nmasks; j++) {
            w->keys[i * nmasks + j].a = pq ^ w->masks[j];
            w->keys[i * nmasks + j].b = (from + i) | (uint64_t)sims_popcount64(w->masks[j]) << 56;
        }
    }
    n *= nmasks;
    sort_pairs(w->keys, w->keys_tmp, n, ~low, 0);
    int scan = b->strategy == SIMSTORE_BATCH_SCAN;
    if (b->strategy == SIMSTORE_BATCH_AUTO) {
        size_t groups = n ? 1 : 0;
        for (size_t i = 1; i < n; i++)
            groups += (w->keys[i].a & ~low) != (w->keys[i - 1].a & ~low);
        scan = choose_scan(r, prefix_bits, n, groups);
    }
    return scan ? scan_table(w, r, t, n, low) : probe_table(w, r, t, n, low);
}

static void *candidates_worker(void *arg)
{
    worker *w = (worker *)arg;
    batch *b = w->run;
    for (;;) {
        size_t task = atomic_fetch_add(&b->next_task, 1);
        if (task >= b->tasks)
            break;
        int rc = run_task(w, task);
        if (rc) {
            worker_fail(w, rc);
            atomic_store(&b->next_task, b->tasks); /* the others stop too */
            break;
        }
    }
    return NULL;
}

/* ---- Phase 2: documents, in fingerprint order ------------------------------ */

static int arena_copy(worker *w, const char *data, size_t n, const char **offset_out)
{
    if (!data) {
        *offset_out = NULL;
        return SIMSTORE_OK;
    }
    size_t off;
    if (sims_arena_put(&w->arena, &w->arena_cap, &w->arena_len, data, n, &off))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch results");
    /* An offset + 1 until the arena stops moving (NULL stays NULL). */
    *offset_out = (const char *)(uintptr_t)(off + 1);
    return SIMSTORE_OK;
}

/* The documents of the worker's share of the distinct fingerprints, looked
 * up in increasing fingerprint order (sequential in LMDB's fps table). */
static int resolve_share(worker *w)
{
    batch *b = w->run;
    size_t *first = (size_t *)calloc(w->fp_to - w->fp_from + 1, sizeof *first);
    if (!first)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch results");
    int rc = SIMSTORE_OK;
    for (size_t u = w->fp_from; u < w->fp_to && rc == SIMSTORE_OK; u++) {
        const simstore_match *docs;
        size_t n;
        first[u - w->fp_from] = w->docs_len;
        rc = sims_query_fp_documents(w->q, b->ufp[u], &docs, &n);
        if (rc == SIMSTORE_OK && b->m > 1 &&
            (w->docs_len + n) * sizeof *w->docs + w->arena_len > w->limit)
            rc = CHUNK_SPLIT;
        if (rc == SIMSTORE_OK &&
            sims_grow16((void **)&w->docs, &w->docs_cap, w->docs_len + n, sizeof *w->docs))
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for batch results");
        for (size_t i = 0; i < n && rc == SIMSTORE_OK; i++) {
            simstore_match *d = &w->docs[w->docs_len];
            const char *sketch_off = NULL;
            *d = docs[i];
            rc = arena_copy(w, docs[i].id, docs[i].id_len, &d->id);
            if (rc == SIMSTORE_OK)
                rc = arena_copy(w, docs[i].meta, docs[i].meta_len, &d->meta);
            if (rc == SIMSTORE_OK)
                rc = arena_copy(w, (const char *)docs[i].sketch, b->sketch_bytes, &sketch_off);
            d->sketch = (const uint8_t *)sketch_off;
            w->docs_len++;
        }
        b->fp_doc_count[u] = (uint32_t)n;
    }
    if (rc == SIMSTORE_OK) {
        /* The arrays are final: offsets into pointers. */
        sims_matches_point_into(w->docs, w->docs_len, w->arena);
        for (size_t u = w->fp_from; u < w->fp_to; u++)
            b->fp_docs[u] = w->docs + first[u - w->fp_from];
    }
    free(first);
    return rc;
}

static void *documents_worker(void *arg)
{
    worker *w = (worker *)arg;
    w->docs_len = 0;
    w->arena_len = 0;
    int rc = resolve_share(w);
    if (rc)
        worker_fail(w, rc);
    return NULL;
}

/* ---- Running the workers ---------------------------------------------------- */

/* Run fn on `count` workers (worker 0 on the calling thread); then the first
 * failure, by worker number, becomes this thread's error. */
static int run_workers(batch *b, unsigned count, void *(*fn)(void *))
{
    pthread_t tid[BATCH_MAX_THREADS];
    unsigned started = 1;
    for (unsigned i = 0; i < count; i++)
        b->workers[i].rc = SIMSTORE_OK;
    for (unsigned i = 1; i < count; i++, started++)
        if (pthread_create(&tid[i], NULL, fn, &b->workers[i]) != 0)
            break; /* the workers started share the tasks */
    if (fn == documents_worker && started < count) {
        /* Document shares are fixed per worker: do the rest here. */
        for (unsigned i = started; i < count; i++)
            fn(&b->workers[i]);
    }
    fn(&b->workers[0]);
    for (unsigned i = 1; i < started; i++)
        pthread_join(tid[i], NULL);
    int split = 0;
    for (unsigned i = 0; i < count; i++) {
        if (b->workers[i].rc == CHUNK_SPLIT)
            split = 1;
        else if (b->workers[i].rc)
            return sims_fail(b->workers[i].rc, "%s", b->workers[i].message);
    }
    return split ? CHUNK_SPLIT : SIMSTORE_OK;
}

/* Gather the workers' candidates, sort by (fingerprint, query) and drop
 * repeats (a fingerprint is found by every table whose prefix it shares
 * with the query). Then the distinct fingerprints. */
static int gather_candidates(batch *b)
{
    size_t total = 0;
    for (unsigned i = 0; i < b->threads; i++)
        total += b->workers[i].cand_len;
    if (grow_pairs(&b->cand, &b->cand_tmp, &b->cand_cap, total ? total : 1))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch candidates");
    size_t len = 0;
    for (unsigned i = 0; i < b->threads; i++) {
        worker *w = &b->workers[i];
        if (w->cand_len)
            memcpy(b->cand + len, w->cand, w->cand_len * sizeof *w->cand);
        len += w->cand_len;
        w->cand_len = 0;
    }
    sort_pairs(b->cand, b->cand_tmp, len, ~0ULL, 1);
    size_t keep = len ? 1 : 0;
    for (size_t i = 1; i < len; i++)
        if (b->cand[i].a != b->cand[keep - 1].a || b->cand[i].b != b->cand[keep - 1].b)
            b->cand[keep++] = b->cand[i];
    b->cand_len = keep;
    if (sims_grow16((void **)&b->ufp_of_cand, &b->ufp_of_cand_cap, keep ? keep : 1,
                    sizeof *b->ufp_of_cand) ||
        sims_grow16((void **)&b->ufp, &b->ufp_cap, keep ? keep : 1, sizeof *b->ufp))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch candidates");
    b->ufp_len = 0;
    for (size_t i = 0; i < keep; i++) {
        if (i == 0 || b->cand[i].a != b->cand[i - 1].a)
            b->ufp[b->ufp_len++] = b->cand[i].a;
        b->ufp_of_cand[i] = b->ufp_len - 1;
    }
    return SIMSTORE_OK;
}

/* Phase 2 for a store of documents: each worker resolves a contiguous share
 * of the distinct fingerprints. */
static int resolve_documents(batch *b)
{
    size_t u = b->ufp_len;
    if (sims_grow16((void **)&b->fp_docs, &b->fp_docs_cap, u ? u : 1, sizeof *b->fp_docs))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch results");
    free(b->fp_doc_count);
    b->fp_doc_count = (uint32_t *)malloc(b->fp_docs_cap * sizeof *b->fp_doc_count);
    if (!b->fp_doc_count)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch results");
    if (b->fp_only || u == 0)
        return SIMSTORE_OK;
    unsigned count = b->threads;
    if (count > u)
        count = (unsigned)u;
    for (unsigned i = 0; i < count; i++) {
        b->workers[i].fp_from = u * i / count;
        b->workers[i].fp_to = u * (i + 1) / count;
    }
    return run_workers(b, count, documents_worker);
}

/* Candidate indices grouped by query, each group in fingerprint order (a
 * stable counting sort). */
static int group_by_query(batch *b)
{
    if (sims_grow16((void **)&b->query_start, &b->query_start_cap, b->m + 1,
                    sizeof *b->query_start) ||
        sims_grow16((void **)&b->by_query, &b->by_query_cap, b->cand_len ? b->cand_len : 1,
                    sizeof *b->by_query))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch results");
    memset(b->query_start, 0, (b->m + 1) * sizeof *b->query_start);
    for (size_t i = 0; i < b->cand_len; i++)
        b->query_start[b->cand[i].b + 1]++;
    for (size_t i = 0; i < b->m; i++)
        b->query_start[i + 1] += b->query_start[i];
    for (size_t i = 0; i < b->cand_len; i++)
        b->by_query[b->query_start[b->cand[i].b]++] = i;
    /* The fill moved each start to the next one's: shift back. */
    memmove(b->query_start + 1, b->query_start, b->m * sizeof *b->query_start);
    b->query_start[0] = 0;
    return SIMSTORE_OK;
}

/* ---- Phase 3: the answers, in input order ------------------------------------ */

static int deliver(batch *b, size_t base, simstore_batch_fn fn, void *ctx)
{
    for (size_t i = 0; i < b->m; i++) {
        uint64_t q = b->fps[i];
        const uint8_t *sketch = b->sketches ? b->sketches + (base + i) * b->sketch_bytes : NULL;
        size_t n = 0;
        for (size_t j = b->query_start[i]; j < b->query_start[i + 1]; j++) {
            size_t u = b->ufp_of_cand[b->by_query[j]];
            size_t docs = b->fp_only ? 1 : b->fp_doc_count[u];
            if (sims_grow16((void **)&b->answer, &b->answer_cap, n + docs, sizeof *b->answer))
                return sims_fail(SIMSTORE_ENOMEM, "out of memory for batch results");
            unsigned dist = sims_distance(b->ufp[u], q);
            if (b->fp_only) {
                memset(&b->answer[n], 0, sizeof b->answer[n]);
                b->answer[n].fp = b->ufp[u];
                b->answer[n].distance = dist;
                n++;
                continue;
            }
            for (size_t d = 0; d < docs; d++, n++) {
                b->answer[n] = b->fp_docs[u][d];
                b->answer[n].distance = dist;
                if (sketch && b->answer[n].sketch)
                    b->answer[n].similarity =
                        simstore_sketch_similarity(b->s->text.sketch, sketch, b->answer[n].sketch);
            }
        }
        sims_sort_matches(b->answer, n);
        int rc = fn(ctx, base + i, q, n ? b->answer : NULL, n);
        if (rc)
            return rc;
    }
    return SIMSTORE_OK;
}

static int answer_chunk(batch *b, const uint64_t *fps, size_t m, size_t base, simstore_batch_fn fn,
                        void *ctx)
{
    b->fps = fps;
    b->m = m;
    for (unsigned i = 0; i < b->threads; i++) {
        worker *w = &b->workers[i];
        w->cand_len = 0;
        w->limit = (size_t)(b->answer_memory / b->threads);
    }
    size_t per_part = (size_t)b->snap->segment_count * b->design->n_tables;
    /* Enough tasks to keep every worker busy: split the queries when the
     * tables alone are too few. */
    b->parts = 1;
    if (per_part && per_part < 2u * b->threads && m >= 4096)
        b->parts = (unsigned)((2u * b->threads + per_part - 1) / per_part);
    b->tasks = per_part * b->parts;
    atomic_store(&b->next_task, 0);
    int rc = b->tasks ? run_workers(b, b->threads, candidates_worker) : SIMSTORE_OK;
    if (rc == SIMSTORE_OK)
        rc = gather_candidates(b);
    if (rc == SIMSTORE_OK)
        rc = resolve_documents(b);
    if (rc == SIMSTORE_OK)
        rc = group_by_query(b);
    if (rc == SIMSTORE_OK)
        rc = deliver(b, base, fn, ctx);
    return rc;
}

/* Free what a chunk too big for the budget left grown. */
static void shrink_workers(batch *b)
{
    for (unsigned i = 0; i < b->threads; i++) {
        worker *w = &b->workers[i];
        free(w->cand);
        free(w->docs);
        free(w->arena);
        w->cand = NULL;
        w->docs = NULL;
        w->arena = NULL;
        w->cand_len = w->cand_cap = w->docs_len = w->docs_cap = 0;
        w->arena_len = w->arena_cap = 0;
    }
    free(b->cand);
    free(b->cand_tmp);
    b->cand = b->cand_tmp = NULL;
    b->cand_len = b->cand_cap = 0;
}

/* A chunk whose answers outgrow the budget is answered as two halves: no
 * answer of it was delivered yet, so the halves deliver each query once. */
static int answer_bounded(batch *b, const uint64_t *fps, size_t m, size_t base,
                          simstore_batch_fn fn, void *ctx)
{
    int rc = answer_chunk(b, fps, m, base, fn, ctx);
    if (rc != CHUNK_SPLIT)
        return rc;
    shrink_workers(b);
    size_t half = m / 2;
    rc = answer_bounded(b, fps, half, base, fn, ctx);
    if (rc == SIMSTORE_OK)
        rc = answer_bounded(b, fps + half, m - half, base + half, fn, ctx);
    return rc;
}

/* ---- Setup ------------------------------------------------------------------- */

static void end_states(batch *b, unsigned begun)
{
    for (unsigned i = 0; i < begun; i++)
        sims_query_end_state(b->workers[i].q);
}

/* One committed state for the whole batch: the snapshot, and for a store of
 * documents every worker's read transaction on it. SIMS_ERETRY when a
 * writer moved the store on meanwhile. */
static int begin_state(void *ctx)
{
    batch *b = (batch *)ctx;
    if (b->fp_only)
        return sims_read_snapshot(b->s, &b->snap);
    int rc = sims_query_begin_state(b->workers[0].q, &b->snap);
    if (rc)
        return rc;
    for (unsigned i = 1; i < b->threads; i++) {
        rc = sims_query_join_state(b->workers[i].q, b->snap);
        if (rc) {
            end_states(b, i);
            sims_snapshot_release(b->snap);
            b->snap = NULL;
            return rc;
        }
    }
    return SIMSTORE_OK;
}

static int workers_new(batch *b, unsigned flags)
{
    b->workers = (worker *)calloc(b->threads, sizeof *b->workers);
    if (!b->workers)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a batch");
    /* A value takes at least one bit of a block. */
    size_t block_cap = (size_t)b->s->block_bytes * 8;
    for (unsigned i = 0; i < b->threads; i++) {
        worker *w = &b->workers[i];
        w->run = b;
        w->block_cap = block_cap;
        w->block = (uint64_t *)malloc(block_cap * sizeof *w->block);
        if (!w->block)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for a batch");
        if (!b->fp_only) {
            int rc = simstore_query_new(b->s, flags, &w->q);
            if (rc)
                return rc;
        }
    }
    return SIMSTORE_OK;
}

static void batch_free(batch *b)
{
    for (unsigned i = 0; b->workers && i < b->threads; i++) {
        worker *w = &b->workers[i];
        free(w->keys);
        free(w->keys_tmp);
        free(w->masks);
        free(w->block);
        free(w->cand);
        free(w->docs);
        free(w->arena);
        simstore_query_free(w->q);
    }
    free(b->workers);
    free(b->cand);
    free(b->cand_tmp);
    free(b->ufp);
    free(b->ufp_of_cand);
    free(b->fp_docs);
    free(b->fp_doc_count);
    free(b->by_query);
    free(b->query_start);
    free(b->answer);
}

static int check_args(simstore *s, const uint64_t *fps, size_t n, unsigned k,
                      const simstore_batch_options *o, simstore_batch_fn fn)
{
    if (!s || !fn || (!fps && n > 0))
        return sims_fail(SIMSTORE_EINVAL,
                         "query_batch: a store, queries and a callback are needed");
    if (o->strategy != SIMSTORE_BATCH_AUTO && o->strategy != SIMSTORE_BATCH_PROBE &&
        o->strategy != SIMSTORE_BATCH_SCAN)
        return sims_fail(SIMSTORE_EINVAL, "query_batch: unknown strategy %d", (int)o->strategy);
    if (o->flags & ~(unsigned)SIMSTORE_QUERY_WITH_META)
        return sims_fail(SIMSTORE_EINVAL, "query_batch: unknown flags %#x", o->flags);
    return sims_query_check_k(s, k);
}

int simstore_query_batch(simstore *s, const uint64_t *fps, size_t n, unsigned k,
                         const simstore_batch_options *o, simstore_batch_fn fn, void *ctx)
{
    return simstore_query_batch_sketches(s, fps, NULL, n, k, o, fn, ctx);
}

int simstore_query_batch_sketches(simstore *s, const uint64_t *fps, const uint8_t *sketches,
                                  size_t n, unsigned k, const simstore_batch_options *o,
                                  simstore_batch_fn fn, void *ctx)
{
    if (SIMS_CHECK_OPTIONS(o, simstore_batch_options))
        return SIMSTORE_EINVAL;
    simstore_batch_options defaults;
    if (!o) {
        simstore_batch_options_init(&defaults);
        o = &defaults;
    }
    int rc = check_args(s, fps, n, k, o, fn);
    if (rc)
        return rc;
    batch b;
    memset(&b, 0, sizeof b);
    b.s = s;
    b.design = s->design;
    b.fp_only = (s->store_flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    b.sketch_bytes = simstore_sketch_bytes(s->text.sketch);
    b.sketches = b.sketch_bytes ? sketches : NULL;
    b.k = k;
    b.flips = sims_design_prefix_flips(s->design, k);
    b.max_masks = 1;
    for (uint32_t t = 0; b.flips && t < s->design->n_tables; t++) {
        size_t nm = sims_design_prefix_masks(s->design->tables[t].prefix_bits, b.flips, NULL, 0);
        b.max_masks = nm > b.max_masks ? nm : b.max_masks;
    }
    b.strategy = o->strategy;
    b.threads = o->threads ? o->threads : simstore_default_threads();
    if (b.threads > BATCH_MAX_THREADS)
        b.threads = BATCH_MAX_THREADS;
    uint64_t memory = o->memory_bytes ? o->memory_bytes : BATCH_DEFAULT_MEMORY;
    b.answer_memory = memory / 2;
    /* Beyond the design's k a query has max_masks keys per table task. */
    uint64_t chunk =
        memory / 2 / (BATCH_BYTES_PER_QUERY(b.threads) + 32u * b.threads * (b.max_masks - 1));
    if (chunk < 1)
        chunk = 1;
    if (chunk > n)
        chunk = n;
    rc = workers_new(&b, o->flags);
    if (rc == SIMSTORE_OK)
        rc = sims_retry(begin_state, &b);
    if (rc == SIMSTORE_OK) {
        for (size_t base = 0; base < n && rc == SIMSTORE_OK; base += (size_t)chunk) {
            size_t m = n - base < chunk ? n - base : (size_t)chunk;
            rc = answer_bounded(&b, fps + base, m, base, fn, ctx);
        }
        if (!b.fp_only)
            end_states(&b, b.threads);
        sims_snapshot_release(b.snap);
    }
    batch_free(&b);
    /* A view that went stale mid-batch, after answers went out. */
    return sims_retry_final(rc);
}
