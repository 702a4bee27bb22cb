/* bands.c: the near-duplicate rule's band candidates beyond k over the ranks (sketch.md 6.2).
 * What lib/scan/bands.c finds for one store, from the public layout of a
 * sketch alone: each owner makes, for the documents of each fingerprint it
 * owns, every distinct (band, key, fingerprint) of their sketches and sends
 * it to the rank of a hash of (band, key); each rank sorts what it
 * received, and every pair of distinct fingerprints of one (band, key)
 * more than k apart is a candidate. The candidates go to the owner of
 * their smaller fingerprint, which drops repeats (a pair sharing several
 * bands) and adds them to the join's pairs, for each_pair to make their
 * document pairs (the rule, simstore_near_duplicate_sketches, decides each
 * one). The bands go in passes of as many as fit in the memory given, one
 * band a pass at least (its records cost 64 bytes a document, as much as a
 * minhash64 sketch its owner already holds). */
#include "scan_internal.h"

#include "cli.h"
#include "simstore.h"

#include <mpi.h>

#include <stdlib.h>
#include <string.h>

/* A (band, key, fingerprint) record: 20 bytes as it travels (band u32,
 * key u64, fp u64), 24 in memory; with the bytes sent and received, a
 * budget of RECORD_COST bytes a record in a pass. */
typedef struct band_rec {
    uint64_t key, fp;
    uint32_t band;
} band_rec;

#define RECORD_COST 64

static int by_band_key_fp(const void *x, const void *y)
{
    const band_rec *a = x, *b = y;
    if (a->band != b->band)
        return a->band < b->band ? -1 : 1;
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    return (a->fp > b->fp) - (a->fp < b->fp);
}

static int by_a_b(const void *x, const void *y)
{
    const fpair *p = x, *q = y;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return (p->b > q->b) - (p->b < q->b);
}

/* The rank a band's key goes to. */
static int band_dest(uint32_t band, uint64_t key)
{
    uint64_t h =
        (key ^ ((uint64_t)band + 1) * UINT64_C(0xC2B2AE3D27D4EB4F)) * UINT64_C(0x9E3779B97F4A7C15);
    h ^= h >> 29;
    return (int)(h % (uint64_t)nranks);
}

/* Band `band` of `rows` bits of a sketch (format/sketch.md 6.2): its bit j
 * is the sketch's bit band * rows + j, bit i of a sketch being bit i % 8
 * of its byte i / 8. */
static uint64_t band_key(const uint8_t *sketch, unsigned rows, uint32_t band)
{
    size_t first = (size_t)band * rows;
    uint64_t key = 0;
    for (unsigned j = 0; j < rows; j++) {
        size_t bit = first + j;
        key |= (uint64_t)((sketch[bit >> 3] >> (bit & 7)) & 1) << j;
    }
    return key;
}

static void take(pairs_acc *p, uint64_t a, uint64_t b, unsigned distance)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 1024;
        p->v = must(realloc(p->v, p->cap * sizeof *p->v));
    }
    p->v[p->n++] = (fpair){a, b, distance};
}

/* Sort p's pairs by (a, b) and drop repeats. */
static void sort_unique(pairs_acc *p)
{
    sort_items(p->v, p->n, sizeof *p->v, by_a_b);
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (n == 0 || p->v[i].a != p->v[n - 1].a || p->v[i].b != p->v[n - 1].b)
            p->v[n++] = p->v[i];
    p->n = n;
}

/* Bands [b0, b1) of every document of o with a sketch long enough, one
 * record for each distinct key of a fingerprint's documents, into out.
 * keys: room for the most documents of one fingerprint. */
static void send_bands(const owned *o, unsigned rows, uint32_t b0, uint32_t b1, uint64_t *keys,
                       buf *out)
{
    size_t need = (size_t)b1 * rows; /* the bits the pass reads */
    for (size_t i = 0; i < o->nfps; i++) {
        size_t lo = o->first[i], hi = o->first[i + 1];
        for (uint32_t band = b0; band < b1; band++) {
            size_t n = 0;
            for (size_t x = lo; x < hi; x++) {
                const sdoc *d = &o->docs[x];
                if (d->sketch && (size_t)d->sketch_len * 8 >= need)
                    keys[n++] = band_key(d->sketch, rows, band);
            }
            sort_items(keys, n, sizeof *keys, cmp_u64);
            for (size_t j = 0; j < n; j++) {
                if (j && keys[j] == keys[j - 1])
                    continue;
                buf *to = &out[band_dest(band, keys[j])];
                put32(to, band);
                put64(to, keys[j]);
                put64(to, o->fps[i]);
            }
        }
    }
}

/* The records received, sorted; every pair of distinct fingerprints of
 * one (band, key) more than k apart into found (a < b). */
static void pair_groups(buf *in, unsigned k, pairs_acc *found)
{
    size_t n = 0;
    for (int r = 0; r < nranks; r++)
        n += in[r].len / 20;
    band_rec *v = must(malloc((n ? n : 1) * sizeof *v));
    n = 0;
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; n++) {
            v[n].band = get_u32(&q);
            v[n].key = get_u64(&q);
            v[n].fp = get_u64(&q);
        }
        free(in[r].data);
        in[r].data = NULL;
        in[r].len = in[r].cap = 0;
    }
    sort_items(v, n, sizeof *v, by_band_key_fp);
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && v[hi].band == v[lo].band && v[hi].key == v[lo].key; hi++)
            ;
        for (size_t i = lo; i < hi; i++) {
            if (i > lo && v[i].fp == v[i - 1].fp)
                continue;
            for (size_t j = i + 1; j < hi; j++) {
                if (v[j].fp == v[j - 1].fp)
                    continue;
                unsigned d = simstore_distance(v[i].fp, v[j].fp);
                if (d > k) /* within k: the join's own */
                    take(found, v[i].fp, v[j].fp, d);
            }
        }
    }
    free(v);
}

void band_pairs(const owned *o, const simstore_near_rule *rule, uint64_t memory, pairs_acc *pairs)
{
    unsigned rows = rule->band_rows, count = rule->band_count;
    if (!rule->bands || !count || !rows)
        return;
    /* Records a rank sends for one band: at most its documents with sketches. */
    uint64_t with_sketch = 0, most_docs = 0;
    for (size_t i = 0; i < o->nfps; i++) {
        uint64_t n = o->first[i + 1] - o->first[i];
        most_docs = n > most_docs ? n : most_docs;
    }
    for (size_t x = 0; x < o->ndocs; x++)
        with_sketch += o->docs[x].sketch != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &with_sketch, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    uint64_t per_pass = memory / RECORD_COST / (with_sketch ? with_sketch : 1);
    if (per_pass < 1)
        per_pass = 1;
    if (per_pass > count)
        per_pass = count;
    uint32_t passes = (uint32_t)((count + per_pass - 1) / per_pass);
    uint64_t *keys = must(malloc((most_docs ? most_docs : 1) * sizeof *keys));
    buf *out = bufs_new(), *in = bufs_new();
    pairs_acc found = {NULL, 0, 0}, mine = {NULL, 0, 0};
    for (uint32_t p = 0; p < passes; p++) {
        uint32_t b0 = (uint32_t)(p * per_pass), b1 = (uint32_t)(b0 + per_pass);
        if (b1 > count)
            b1 = count;
        send_bands(o, rows, b0, b1, keys, out);
        exchange_bufs(out, in, chunk_bytes);
        pair_groups(in, rule->k, &found);
        /* This pass's candidates, once each, to the owner of a. */
        sort_unique(&found);
        for (size_t i = 0; i < found.n; i++) {
            buf *to = &out[owner_of(found.v[i].a)];
            put64(to, found.v[i].a);
            put64(to, found.v[i].b);
            put32(to, found.v[i].distance);
        }
        found.n = 0;
        exchange_bufs(out, in, chunk_bytes);
        for (int r = 0; r < nranks; r++) {
            for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
                uint64_t a = get_u64(&q), b = get_u64(&q);
                take(&mine, a, b, get_u32(&q));
            }
            in[r].len = 0;
        }
        sort_unique(&mine);
        if (show_progress) {
            uint64_t total = sum_ranks(mine.n);
            progress("bands: %u of %u done (%u bits each), %llu fingerprint %s beyond k %u so far",
                     b1, count, rows, (unsigned long long)total, CLI_NOUN(total, "pair"), rule->k);
        }
    }
    for (size_t i = 0; i < mine.n; i++)
        take(pairs, mine.v[i].a, mine.v[i].b, mine.v[i].distance);
    free(mine.v);
    free(found.v);
    free(keys);
    bufs_free(out);
    bufs_free(in);
}
