/* bands.c: the near-duplicate rule's band candidates over a store
 * (format/sketch.md 6.2): every pair of distinct fingerprints more than k
 * apart whose documents' sketches agree on one band. One pass over the
 * live documents keeps their fingerprints and, for as many bands as the
 * memory allows, their keys; then each band's (key, document) values are
 * radix-sorted (spilled through a sorter when they do not fit), its groups
 * of equal keys read, and their pairs pushed into the join's pair sorter
 * beside the pairs within k. */
#include "scan/bands.h"
#include "scan/pairs.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/sketch.h"
#include "sort/u64sort.h"

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
            b->keys[i * b->count + j] = sims_sketch_band_key(rec->sketch, b->rows, b->first + j);
    return 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* One group of documents sharing a band key: each pair of its distinct
 * fingerprints more than k apart into the join's sorter. */
static int push_group(uint64_t *fps, size_t n, unsigned k, sims_recsort *joined)
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
            int rc = sims_recsort_push(joined, key, sizeof key, val, sizeof val);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Read sorted (key << 32 | ordinal) values and push each group's pairs. */
typedef struct group_reader {
    const uint64_t *fps;
    unsigned k;
    sims_recsort *joined;
    uint64_t *group;
    size_t n, cap;
    uint32_t key;
} group_reader;

static int group_take(group_reader *g, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t key = (uint32_t)(v[i] >> 32);
        if (g->n && key != g->key) {
            int rc = push_group(g->group, g->n, g->k, g->joined);
            if (rc)
                return rc;
            g->n = 0;
        }
        g->key = key;
        if (sims_grow((void **)&g->group, &g->cap, g->n + 1, sizeof *g->group, 64) != 0)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for a band's documents");
        g->group[g->n++] = g->fps[(uint32_t)v[i]];
    }
    return 0;
}

static int group_end(group_reader *g)
{
    int rc = push_group(g->group, g->n, g->k, g->joined);
    g->n = 0;
    return rc;
}

/* Band j of this pass: its values sorted in memory when v and tmp are
 * given, else through a spilling sorter of run_values. */
static int one_band(band_run *b, unsigned j, uint64_t *v, uint64_t *tmp, size_t run_values,
                    group_reader *g)
{
    if (v) {
        for (size_t i = 0; i < b->n; i++)
            v[i] = (uint64_t)b->keys[i * b->count + j] << 32 | i;
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
            buf[x] = (uint64_t)b->keys[(i + x) * b->count + j] << 32 | (i + x);
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
     * fingerprints, then per pass each band's keys and, when they fit,
     * the values and their radix scratch (16 bytes a document). */
    uint64_t budget = o->memory_bytes / 2, fixed = (uint64_t)n * 8;
    uint64_t sort_bytes = (uint64_t)n * 16;
    int in_memory = fixed + sort_bytes + (uint64_t)n * 4 <= budget;
    uint64_t room = budget > fixed + (in_memory ? sort_bytes : 0)
                        ? budget - fixed - (in_memory ? sort_bytes : 0)
                        : 0;
    unsigned per_pass = n ? (unsigned)(room / ((uint64_t)n * 4)) : total;
    if (per_pass < 1)
        per_pass = 1;
    if (per_pass > total)
        per_pass = total;
    uint64_t *v = NULL, *tmp = NULL;
    if (rc == 0 && in_memory && n) {
        v = malloc(n * sizeof *v);
        tmp = malloc(n * sizeof *tmp);
        if (!v || !tmp)
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for a band of %zu documents", n);
    }
    size_t run_values = (size_t)(budget / 2 / 16);
    if (run_values < ((size_t)1 << 16))
        run_values = (size_t)1 << 16;
    group_reader g = {b.fps, o->k, joined, NULL, 0, 0, 0};
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
        for (unsigned j = 0; rc == 0 && j < b.count; j++) {
            rc = one_band(&b, j, v, tmp, run_values, &g);
            if (rc == 0 && o->progress)
                o->progress(o->progress_ctx, "banding sketches", first + j + 1, total);
        }
    }
    free(g.group);
    free(v);
    free(tmp);
    free(b.keys);
    free(b.fps);
    return rc;
}
