/* memtable.h: the in-memory table of a live store: every change (insert or
 * delete) since the last flush, in sequence order, found by id (a hash of
 * the newest change per id, each change linked to the one before it) and,
 * for inserts, by fingerprint (simstore_memindex, exact within its k).
 * Threads: one writer at a time; readers need the writer excluded (the
 * live store's rwlock). */
#ifndef SIMS_LIVE_MEMTABLE_H
#define SIMS_LIVE_MEMTABLE_H

#include "live/change.h"

#include <stddef.h>
#include <stdint.h>

/* One change, as held. */
typedef struct sims_mt_doc {
    uint64_t seq; /* its WAL sequence number                    */
    uint64_t fp;  /* inserts                                    */
    int64_t prev; /* the previous change of its id here, or -1 */
    uint8_t is_delete;
    uint8_t flags;       /* SIMS_CHANGE_FLAG_INTEGER_ID              */
    uint8_t sketch_kind; /* 0: none                                   */
    uint16_t id_len;
    uint32_t sketch_len;
    uint32_t meta_len;
    char data[]; /* id, NUL, sketch, metadata                   */
} sims_mt_doc;

static inline const char *sims_mt_doc_id(const sims_mt_doc *d)
{
    return d->data;
}
static inline const uint8_t *sims_mt_doc_sketch(const sims_mt_doc *d)
{
    return d->sketch_len ? (const uint8_t *)d->data + d->id_len + 1 : NULL;
}
static inline const char *sims_mt_doc_meta(const sims_mt_doc *d)
{
    return d->meta_len ? d->data + d->id_len + 1 + d->sketch_len : NULL;
}

typedef struct sims_memtable sims_memtable;

/* An empty table exact for distances up to k. SIMSTORE_ENOMEM, SIMSTORE_EINVAL. */
int sims_memtable_new(unsigned k, sims_memtable **out);
void sims_memtable_free(sims_memtable *m);

/* Make room so that the next sims_memtable_apply() of a change of
 * change_bytes fails only for memory its fingerprint index needs.
 * SIMSTORE_ENOMEM. */
int sims_memtable_reserve(sims_memtable *m);
/* Record change c with sequence number seq (larger than every one held).
 * SIMSTORE_ENOMEM, SIMSTORE_EFULL (the index's limit): the table is then
 * unchanged. */
int sims_memtable_apply(sims_memtable *m, const sims_change *c, uint64_t seq);

/* The newest change of the id with a sequence number <= visible (UINT64_MAX:
 * every change), or NULL. Valid until the next apply or the free. */
const sims_mt_doc *sims_memtable_find(const sims_memtable *m, const char *id, size_t id_len,
                                      uint64_t visible);

/* Call fn for every insert whose fingerprint is within k of fp (superseded
 * ones too: the caller checks sims_memtable_find). fn's nonzero value stops
 * the query and is returned. k may be above the table's (up to
 * SIMSTORE_MAX_K, SIMSTORE_ERANGE beyond): exact all the same. */
typedef int (*sims_memtable_fn)(void *ctx, const sims_mt_doc *d, unsigned distance);
int sims_memtable_query(const sims_memtable *m, uint64_t fp, unsigned k, sims_memtable_fn fn,
                        void *ctx);

/* Changes held, in sequence order: 0..count-1. */
size_t sims_memtable_count(const sims_memtable *m);
const sims_mt_doc *sims_memtable_doc(const sims_memtable *m, size_t i);
/* The largest sequence number held (0: none). */
uint64_t sims_memtable_last_seq(const sims_memtable *m);
/* Bytes held: changes, the id hash, the fingerprint index. */
uint64_t sims_memtable_bytes(const sims_memtable *m);
/* Bytes the changes added to an empty table's (about 100 KiB, mostly the
 * fingerprint index's buckets): what a flush threshold compares, so that a
 * small one still holds changes. */
uint64_t sims_memtable_fill_bytes(const sims_memtable *m);
/* Ids whose newest change is an insert, and a delete. */
uint64_t sims_memtable_inserts(const sims_memtable *m);
uint64_t sims_memtable_deletes(const sims_memtable *m);

#endif
