/* state.h: what the store-wide scans (pairs, clusters) share: one
 * committed state held for the whole scan (a read transaction and the
 * snapshot of its segments), the documents of a fingerprint read from LMDB
 * and checked against their records, and the order-preserving encoding of
 * ids inside sort keys. */
#ifndef SIMS_SCAN_STATE_H
#define SIMS_SCAN_STATE_H

#include "simstore.h"
#include "store/store_internal.h"

#include <stddef.h>
#include <stdint.h>

/* A document record's insertion number (0 for records written without). */
#define SCAN_RECORD_INSERTION(rec) ((rec).insertion)

typedef struct scan_state {
    simstore *s;
    MDB_txn *txn;
    MDB_cursor *fps; /* NULL in a fingerprint-only store */
    sims_snapshot *snap;
    int fp_only;
    int walked; /* data.mdb walked (sims_scan_state_begin): reads need no check */
} scan_state;

/* Begin: a read transaction and the snapshot it sees (read again while
 * writers remove the files of the state it saw). */
int sims_scan_state_begin(simstore *s, scan_state *st);
/* The same for a reader of single keys that checks each read first
 * (sims_env_check): no walk of data.mdb. */
int sims_scan_state_begin_lookups(simstore *s, scan_state *st);
void sims_scan_state_end(scan_state *st);

/* The resolved scan options: k and the minimum similarity by the
 * near-duplicate rule (simstore_near_rule_resolve() with flags, for this
 * store: k at most SIMSTORE_MAX_K, ERANGE; above the store's design the
 * join runs in memory, pairs.h), the other defaults filled in. */
int sims_scan_options_resolve(const simstore *s, const simstore_scan_options *in, unsigned flags,
                              simstore_scan_options *out);

/* The near-duplicate rule of resolved options o on a store keeping
 * sketches of kind `sketch` (its bands' shape), for
 * simstore_near_duplicate_sketches(). */
void sims_scan_near_rule(const simstore_scan_options *o, simstore_sketch_kind sketch,
                         simstore_near_rule *rule);

/* The documents holding one fingerprint, in fps order (id byte order). */
typedef struct scan_doc {
    size_t off; /* of the id in ids */
    uint32_t len;
    uint32_t flags;     /* SIMSTORE_MATCH_INTEGER_ID or 0 */
    uint64_t insertion; /* the record's insertion number (0: none) */
    size_t meta_off;    /* of the metadata in ids; meta_len 0: none */
    size_t meta_len;
    size_t sketch_off; /* of its sketch in ids (the store's kind), + 1;
                            0: it has none */
} scan_doc;

typedef struct scan_docs {
    uint64_t fp;
    int valid;
    scan_doc *docs;
    size_t count, cap;
    char *ids;
    size_t ids_len, ids_cap;
} scan_docs;

/* Load fp's documents into d (replacing what it held): each id from fps,
 * its record from docs (flags, insertion number, its sketch, and metadata
 * when with_meta), checked to hold fp and a sketch of the store's kind. A
 * fingerprint without documents (dead) gives count 0. Errors:
 * SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM. */
int sims_scan_docs_load(scan_state *st, uint64_t fp, int with_meta, scan_docs *d);

/* Document i's sketch in d, or NULL when it has none. */
static inline const uint8_t *scan_doc_sketch(const scan_docs *d, size_t i)
{
    size_t off = d->docs[i].sketch_off;
    return off ? (const uint8_t *)d->ids + off - 1 : NULL;
}
void sims_scan_docs_free(scan_docs *d);

/* The same documents one at a time, for a fingerprint that may have more
 * than memory holds: each is read into scratch (which then holds it alone,
 * as scratch->docs[0]) and handed to fn, which must not use st's fps
 * cursor (sims_scan_docs_load, sims_scan_fp_count). *visited: the documents fn saw.
 * Errors: those of sims_scan_docs_load, or fn's nonzero value. */
typedef int (*scan_doc_fn)(void *ctx, const scan_docs *d, const scan_doc *doc);
int sims_scan_docs_each(scan_state *st, uint64_t fp, int with_meta, scan_docs *scratch,
                        scan_doc_fn fn, void *ctx, uint64_t *visited);

/* Documents holding fp (0 when none). */
int sims_scan_fp_count(scan_state *st, uint64_t fp, uint64_t *count);

/* Visit every fingerprint held by two documents or more, in order. */
typedef int (*scan_shared_fn)(void *ctx, uint64_t fp, uint64_t count);
int sims_scan_each_shared_fp(scan_state *st, scan_shared_fn fn, void *ctx);

/* Ids inside sort keys: each 0x00 byte becomes 0x00 0x01 and the id ends
 * with 0x00 0x00, so that keys compare as the ids do in byte order (a
 * shorter id first when it is a prefix of the other). */
size_t sims_scan_key_put_id(uint8_t *out, const char *id, size_t len);
/* Decode one such id at key[*pos..n) into out (capacity cap >= n); returns
 * its length and moves *pos past it. */
size_t sims_scan_key_get_id(const uint8_t *key, size_t n, size_t *pos, char *out);

#endif
