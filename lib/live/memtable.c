/* memtable.c: the live store's in-memory table of memtable.h. Changes are
 * separate allocations in an array (sequence order); ids go to an
 * open-addressing hash of the newest change per id (linear probing, at most
 * half full); inserts' fingerprints go to a simstore_memindex whose values
 * are change numbers. Nothing is removed before the table is freed: a
 * superseded change stays, found by sims_memtable_find's walk back. */
#include "live/memtable.h"

#include "common/checksum.h"
#include "common/error.h"
#include "common/grow.h"
#include "simstore.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define ID_HASH_SEED 0x53494D534C495645ull /* "SIMSLIVE" */
#define MIN_SLOTS 64u

struct sims_memtable {
    unsigned k;
    sims_mt_doc **docs;
    size_t count, cap;
    uint64_t *slots;   /* change number + 1 of an id's newest change; 0 empty */
    size_t slot_count; /* a power of two */
    size_t ids;        /* slots used */
    simstore_memindex *ix;
    uint64_t doc_bytes;
    uint64_t empty_bytes; /* sims_memtable_bytes() of the new table */
    uint64_t inserts, deletes;
};

int sims_memtable_new(unsigned k, sims_memtable **out)
{
    *out = NULL;
    sims_memtable *m = calloc(1, sizeof *m);
    if (!m)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a memtable");
    m->k = k;
    m->slot_count = MIN_SLOTS;
    m->slots = calloc(m->slot_count, sizeof *m->slots);
    int rc = m->slots ? simstore_memindex_new(k, 0, &m->ix)
                      : sims_fail(SIMSTORE_ENOMEM, "out of memory for a memtable");
    if (rc) {
        sims_memtable_free(m);
        return rc;
    }
    m->empty_bytes = sims_memtable_bytes(m);
    *out = m;
    return SIMSTORE_OK;
}

void sims_memtable_free(sims_memtable *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->count; i++)
        free(m->docs[i]);
    free(m->docs);
    free(m->slots);
    simstore_memindex_free(m->ix);
    free(m);
}

static uint64_t id_hash(const char *id, size_t len)
{
    return sims_xxh3_64(id, len, ID_HASH_SEED);
}

/* The slot holding id, or the empty slot where it would go. */
static size_t find_slot(const sims_memtable *m, const char *id, size_t len)
{
    size_t mask = m->slot_count - 1;
    for (size_t i = (size_t)id_hash(id, len) & mask;; i = (i + 1) & mask) {
        uint64_t v = m->slots[i];
        if (v == 0)
            return i;
        const sims_mt_doc *d = m->docs[v - 1];
        if (d->id_len == len && memcmp(d->data, id, len) == 0)
            return i;
    }
}

static int grow_slots(sims_memtable *m)
{
    size_t n = m->slot_count * 2;
    uint64_t *slots = calloc(n, sizeof *slots);
    if (!slots)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory growing a memtable");
    uint64_t *old = m->slots;
    size_t old_count = m->slot_count;
    m->slots = slots;
    m->slot_count = n;
    for (size_t i = 0; i < old_count; i++)
        if (old[i]) {
            const sims_mt_doc *d = m->docs[old[i] - 1];
            m->slots[find_slot(m, d->data, d->id_len)] = old[i];
        }
    free(old);
    return SIMSTORE_OK;
}

int sims_memtable_reserve(sims_memtable *m)
{
    if (sims_grow((void **)&m->docs, &m->cap, m->count + 1, sizeof *m->docs, 256))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory growing a memtable");
    if (2 * (m->ids + 1) > m->slot_count)
        return grow_slots(m);
    return SIMSTORE_OK;
}

int sims_memtable_apply(sims_memtable *m, const sims_change *c, uint64_t seq)
{
    int rc = sims_memtable_reserve(m);
    if (rc)
        return rc;
    int del = c->type == SIMS_CHANGE_DELETE;
    size_t sketch_len = del ? 0 : simstore_sketch_bytes((simstore_sketch_kind)c->sketch_kind);
    size_t meta_len = del ? 0 : c->meta_len;
    size_t bytes = sizeof(sims_mt_doc) + c->id_len + 1 + sketch_len + meta_len;
    sims_mt_doc *d = malloc(bytes);
    if (!d)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a memtable change");
    d->seq = seq;
    d->fp = del ? 0 : c->fp;
    d->is_delete = (uint8_t)del;
    d->flags = (uint8_t)(del ? 0 : c->flags);
    d->sketch_kind = (uint8_t)(del ? 0 : c->sketch_kind);
    d->id_len = (uint16_t)c->id_len;
    d->sketch_len = (uint32_t)sketch_len;
    d->meta_len = (uint32_t)meta_len;
    memcpy(d->data, c->id, c->id_len);
    d->data[c->id_len] = '\0';
    if (sketch_len)
        memcpy(d->data + c->id_len + 1, c->sketch, sketch_len);
    if (meta_len)
        memcpy(d->data + c->id_len + 1 + sketch_len, c->meta, meta_len);
    size_t slot = find_slot(m, c->id, c->id_len);
    uint64_t prev = m->slots[slot];
    d->prev = prev ? (int64_t)prev - 1 : -1;
    if (!del && (rc = simstore_memindex_add(m->ix, d->fp, m->count)) != SIMSTORE_OK) {
        free(d);
        return rc;
    }
    if (prev) {
        if (m->docs[prev - 1]->is_delete)
            m->deletes--;
        else
            m->inserts--;
    } else {
        m->ids++;
    }
    if (del)
        m->deletes++;
    else
        m->inserts++;
    m->docs[m->count++] = d;
    m->slots[slot] = m->count;
    /* What the allocation takes: its usable size and malloc's header. */
    m->doc_bytes += malloc_usable_size(d) + sizeof(size_t);
    return SIMSTORE_OK;
}

const sims_mt_doc *sims_memtable_find(const sims_memtable *m, const char *id, size_t id_len,
                                      uint64_t visible)
{
    uint64_t v = m->slots[find_slot(m, id, id_len)];
    if (v == 0)
        return NULL;
    const sims_mt_doc *d = m->docs[v - 1];
    while (d->seq > visible) {
        if (d->prev < 0)
            return NULL;
        d = m->docs[d->prev];
    }
    return d;
}

typedef struct query_ctx {
    const sims_memtable *m;
    sims_memtable_fn fn;
    void *ctx;
} query_ctx;

static int query_entry(void *ctx, uint64_t fp, uint64_t value, unsigned distance)
{
    (void)fp;
    query_ctx *q = (query_ctx *)ctx;
    return q->fn(q->ctx, q->m->docs[value], distance);
}

int sims_memtable_query(const sims_memtable *m, uint64_t fp, unsigned k, sims_memtable_fn fn,
                        void *ctx)
{
    query_ctx q = {m, fn, ctx};
    if (m->count == 0)
        return k > SIMSTORE_MAX_K
                   ? sims_fail(SIMSTORE_ERANGE, "k = %u is above %d, the largest there is", k,
                               SIMSTORE_MAX_K)
                   : SIMSTORE_OK;
    return simstore_memindex_query(m->ix, fp, k, query_entry, &q);
}

size_t sims_memtable_count(const sims_memtable *m)
{
    return m->count;
}

const sims_mt_doc *sims_memtable_doc(const sims_memtable *m, size_t i)
{
    return m->docs[i];
}

uint64_t sims_memtable_last_seq(const sims_memtable *m)
{
    return m->count ? m->docs[m->count - 1]->seq : 0;
}

uint64_t sims_memtable_bytes(const sims_memtable *m)
{
    return m->doc_bytes + m->cap * sizeof *m->docs + m->slot_count * sizeof *m->slots +
           simstore_memindex_bytes(m->ix);
}

uint64_t sims_memtable_fill_bytes(const sims_memtable *m)
{
    uint64_t bytes = sims_memtable_bytes(m);
    return bytes > m->empty_bytes ? bytes - m->empty_bytes : 0;
}

uint64_t sims_memtable_inserts(const sims_memtable *m)
{
    return m->inserts;
}

uint64_t sims_memtable_deletes(const sims_memtable *m)
{
    return m->deletes;
}
