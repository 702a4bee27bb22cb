/* lmdbwalk.h: a bounded, read-only validator of a store's LMDB data file.
 *
 * LMDB 0.9 (data format version 1, as Debian packages it) keeps no page
 * checksums, and it trusts every page number, node offset and size it reads:
 * a damaged data.mdb can make it return garbage, loop, read outside a page,
 * or touch the mapping past the end of the file (SIGBUS). simstore therefore
 * walks the B-trees itself, over the file's bytes, before LMDB reads them
 * (format/store.md, "Trusting LMDB"). The walk checks, for the snapshot LMDB
 * will use:
 *  - both meta pages: magic, version, page size, flags, database records,
 *    last page, and transaction ids (meta page i holds an id of parity i, the
 *    two ids are consecutive, and a snapshot's free-page records are keyed
 *    by transaction ids no later than its own; the newest snapshot's newest
 *    record is keyed by its own id);
 *  - every page of every tree (free list, main, meta, docs, fps and the fps
 *    duplicate sub-databases and sub-pages): page numbers inside the file
 *    and not beyond the last page, the page's own number, type flags by
 *    level, lower/upper bounds, every node inside the page, nodes tiling the
 *    used area exactly, key sizes, keys strictly increasing within a page and
 *    bounded by the parent's separators, node flags allowed for that database,
 *    data sizes (overflow runs: type, page count, inside the file), no page
 *    reached twice (so no cycles), tree depth, and the page and entry counts
 *    of every database record;
 *  - simstore's schema: exactly the databases meta, docs (plain) and fps
 *    (MDB_DUPSORT), fingerprint keys of 8 bytes, ids of 1..511 bytes;
 *  - page accounting: every page up to the last is used exactly once, by a
 *    tree or the free list (a page both used and free is an error; a page in
 *    neither is reported as a warning: it wastes space but misleads nobody).
 *
 * What the walk cannot see: a byte changed inside a key or value that keeps
 * every structural rule (for example a fingerprint key changed into another
 * that still sorts between its neighbours). simstore's own records are
 * checksummed for that; queries cross-check fps answers against the
 * checksummed document records (query.c), and verify cross-checks docs and
 * fps both ways.
 *
 * The layout constants are LMDB 0.9's on 64-bit little-endian hosts (pgno_t
 * and size_t of 8 bytes); elsewhere the walk reports that it cannot check.
 * Pure: works on a byte buffer, no LMDB calls, no I/O. */
#ifndef SIMS_STORE_LMDBWALK_H
#define SIMS_STORE_LMDBWALK_H

#include <stddef.h>
#include <stdint.h>

#define SIMS_LMDB_NONE UINT64_MAX /* no page / no offset */

/* One finding. */
typedef struct sims_lmdb_problem {
    int warning;         /* 0: the store must not be trusted; 1: harmless    */
    uint64_t pgno;       /* the page, or SIMS_LMDB_NONE                     */
    uint64_t offset;     /* byte offset in data.mdb, or SIMS_LMDB_NONE      */
    const char *db;      /* "free", "main", "meta", "docs", "fps", or NULL  */
    const char *message; /* "page 37 (byte offset 151576): ..."; valid
                            during the callback only */
} sims_lmdb_problem;

/* Called per finding; return nonzero to stop the walk (that value is then
 * returned by sims_lmdb_walk). */
typedef int (*sims_lmdb_problem_fn)(void *ctx, const sims_lmdb_problem *p);

/* Databases counted in the summary. */
enum {
    SIMS_LMDB_FREE,
    SIMS_LMDB_MAIN,
    SIMS_LMDB_META,
    SIMS_LMDB_DOCS,
    SIMS_LMDB_FPS,
    SIMS_LMDB_PFPS, /* only in stores with a paragraph index */
    SIMS_LMDB_DB_COUNT
};

typedef struct sims_lmdb_db_summary {
    uint64_t depth, branch_pages, leaf_pages, overflow_pages, entries;
    uint64_t keys; /* distinct keys (for fps: fingerprints; entries counts ids) */
} sims_lmdb_db_summary;

typedef struct sims_lmdb_summary {
    uint64_t txnid; /* of the snapshot walked */
    uint32_t page_bytes;
    uint64_t file_pages; /* whole pages in the file */
    uint64_t last_pgno;
    uint64_t used_pages; /* reached from the trees, metas included */
    uint64_t free_pages; /* listed in the free list */
    uint64_t leaked_pages;
    uint64_t errors, warnings;
    uint64_t store_record_offset;                /* byte offset in the file of the value of
                                     meta key "store", or SIMS_LMDB_NONE: lets
                                     a reader of LMDB's map turn value
                                     pointers into file offsets */
    sims_lmdb_db_summary db[SIMS_LMDB_DB_COUNT]; /* as walked */
} sims_lmdb_summary;

/* Walk the snapshot of data[0, size) (the bytes of data.mdb, or a prefix of
 * them the caller can read safely) committed by transaction `txnid`, or by
 * the newest meta page when txnid is 0.
 *   fn, ctx   receive every finding (NULL: stop at the first error).
 *   summary   if not NULL, receives counts (valid whatever the result).
 * Returns SIMSTORE_OK when no error was found (warnings allowed);
 * SIMSTORE_ECORRUPT when one was (simstore_last_error() then holds the first
 * error's message); SIMS_ERETRY (common/error.h) when txnid is not 0 and
 * neither meta page holds it, or a meta page changed while it was read (a
 * writer moved on: begin a new read transaction and walk again, under
 * sims_retry(); if it keeps happening the result is SIMSTORE_ECORRUPT);
 * SIMSTORE_ENOMEM; or fn's nonzero value. */
int sims_lmdb_walk(const uint8_t *data, uint64_t size, uint64_t txnid, sims_lmdb_problem_fn fn,
                   void *ctx, sims_lmdb_summary *summary);

/* Only the two meta pages, as LMDB's own open reads them (mdb_env_open
 * takes the page size and the last page of the newer meta page and trusts
 * them): the checks of the walk's first step. Run it before mdb_env_open;
 * the full walk needs an open environment's read transaction. Returns
 * SIMSTORE_OK, SIMSTORE_ECORRUPT, SIMS_ERETRY (a meta page changed while it
 * was read, as sims_lmdb_walk) or fn's nonzero value. */
int sims_lmdb_check_metas(const uint8_t *data, uint64_t size, sims_lmdb_problem_fn fn, void *ctx);

/* The counts of one database record of a meta page, as LMDB's MDB_stat
 * gives them for a transaction. */
typedef struct sims_lmdb_db_counts {
    uint64_t depth, branch_pages, leaf_pages, overflow_pages, entries;
} sims_lmdb_db_counts;

/* Whether the meta page of transaction `id`'s parity, in `head` (at least
 * two pages of psize bytes from the start of data.mdb), holds that id and
 * these counts of the free list (dbs[0]) and the main database (dbs[1]).
 * LMDB 0.9 begins a read transaction by taking the last committed id, then
 * copying the database records of that id's meta page: a reader delayed
 * between the two while writers commit twice copies a newer commit's
 * records under the older id. Reading the page after the copy and finding
 * the id and the counts there tells that the copy was of that id. */
int sims_lmdb_meta_holds(const uint8_t *head, uint64_t psize, uint64_t id,
                         const sims_lmdb_db_counts dbs[2]);

/* ---- Checking what LMDB will read, as it reads (lazy) ------------------
 *
 * Instead of walking every page at open, a reader may check, before each
 * LMDB read of a snapshot, exactly the pages that read will touch, with the
 * walk's per-page rules (page number inside the file and not past the last
 * page, the page's own number, type flags for its level, lower/upper, nodes
 * tiling the page, key sizes, keys in order and inside the parent's
 * separators, node flags and data sizes for the database, duplicate
 * sub-pages, overflow runs, depth from the database record), and two rules
 * of the walk's page accounting applied to those pages: no page reached
 * from two places, and no page in use that the snapshot's free list lists
 * (format/store.md, "Trusting LMDB"). Loading a snapshot checks both meta
 * pages, walks the free list (every page: it is how a page is known to be
 * free; its size is LMDB's free space, not the number of documents) and
 * the main database (the named databases' records), but no other tree. A
 * page checked once is not checked again in the same snapshot.
 *
 * Not thread-safe: the caller serializes. */
typedef struct sims_lmdb_lazy sims_lmdb_lazy;

/* What an LMDB read of one key will do: */
enum {
    SIMS_LMDB_READ_GET,   /* mdb_get: the key's path, its overflow run      */
    SIMS_LMDB_READ_DUPS,  /* MDB_SET_KEY then MDB_NEXT_DUP to the end: the
                             key's path and all its duplicates              */
    SIMS_LMDB_READ_AROUND /* MDB_SET_RANGE, then MDB_PREV_NODUP (MDB_PREV in
                             a database without duplicates; MDB_LAST when
                             nothing follows): the key's path, the
                             neighbouring leaves those moves reach, the first
                             and last duplicates (or the overflow runs) of
                             the entries they return                      */
};

int sims_lmdb_lazy_new(sims_lmdb_lazy **out);
void sims_lmdb_lazy_free(sims_lmdb_lazy *lz);

/* Make transaction txnid's snapshot of data[0, size) (data.mdb, mapped) the
 * one checked; nothing to do when it is already. A new snapshot forgets the
 * pages checked in the previous one. Returns SIMSTORE_OK,
 * SIMSTORE_ECORRUPT (meta pages, free list or main database; again on
 * every later call for this snapshot), SIMS_ERETRY (no meta page holds
 * txnid any more: a writer moved on; begin a new read transaction) or
 * SIMSTORE_ENOMEM. */
int sims_lmdb_lazy_snapshot(sims_lmdb_lazy *lz, const uint8_t *data, uint64_t size, uint64_t txnid);

/* Check what read `read` (SIMS_LMDB_READ_*) of key[0, key_len) in database
 * db (SIMS_LMDB_META, _DOCS, _FPS, _PFPS) of the loaded snapshot touches.
 * SIMSTORE_OK (a database the snapshot lacks has nothing to check),
 * SIMSTORE_ECORRUPT naming the page and byte offset (and for every later
 * check of this snapshot), SIMSTORE_ENOMEM. */
int sims_lmdb_lazy_check(sims_lmdb_lazy *lz, int db, const void *key, size_t key_len, int read);

/* sims_lmdb_lazy_check, then the answer of a read of the pages it has just
 * checked, without LMDB searching them again: for SIMS_LMDB_READ_GET the
 * key's value (its overflow run's bytes when it has one), as mdb_get
 * returns it; for SIMS_LMDB_READ_DUPS each duplicate in MDB_NEXT_DUP's
 * order. fn gets each value (pointing into data.mdb's mapping, valid only
 * during the call); its nonzero return stops the read and is returned.
 * *found (when fn is not NULL) says whether the key is in the database;
 * with fn NULL, or with SIMS_LMDB_READ_AROUND, this is
 * sims_lmdb_lazy_check. */
typedef int (*sims_lmdb_value_fn)(void *ctx, const uint8_t *value, size_t len);
int sims_lmdb_lazy_read(sims_lmdb_lazy *lz, int db, const void *key, size_t key_len, int read,
                        sims_lmdb_value_fn fn, void *ctx, int *found);

/* The loaded snapshot's transaction id, 0 when none. */
uint64_t sims_lmdb_lazy_txnid(const sims_lmdb_lazy *lz);

/* Pages checked so far, in every snapshot (a test's measure of work). */
uint64_t sims_lmdb_lazy_pages(const sims_lmdb_lazy *lz);

#endif
