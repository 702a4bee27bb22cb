/* env.h: the store's LMDB environment: opening (read-write, read-only, and
 * read-only on a read-only copy), the three named databases, write
 * transactions that grow the map on MDB_MAP_FULL and replay, read
 * transactions that survive another process growing the map, and the mapping
 * of LMDB's error codes to simstore's.
 *
 * LMDB forbids opening one environment twice in a process (closing the second
 * clears the first's reader slots and locks), so environments are shared: a
 * process-wide registry keyed by the directory's device and inode hands every
 * opener of a store the same MDB_env, closed with its last user. The map is
 * sized generously (address space only) at open, because resizing it needs
 * every transaction in the process to be idle. */
#ifndef SIMS_STORE_ENV_H
#define SIMS_STORE_ENV_H

#include "lmdb/lmdbwalk.h"

#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sims_env_shared sims_env_shared;

typedef struct sims_env {
    sims_env_shared *shared;
    MDB_env *env;
    MDB_dbi meta;
    MDB_dbi docs;
    MDB_dbi fps;
    MDB_dbi pfps; /* the paragraph index (format/store.md, "Paragraphs"),
                     or 0 when the store has none */
    int readonly; /* this opener may not write */
    int nolock;   /* opened without LMDB's lock file (read-only copy) */
} sims_env;

#define SIMS_ENV_CREATE 1u /* create the databases (a new store) */
#define SIMS_ENV_READONLY                                                                          \
    2u                         /* read-only; falls back to MDB_NOLOCK when the
                                lock file cannot be opened for writing */
#define SIMS_ENV_TRUST 4u      /* skip the walk of data.mdb at open (below) */
#define SIMS_ENV_PARAGRAPHS 8u /* with SIMS_ENV_CREATE: create `pfps` too */
/* Instead of the walk at open, check the pages of each read before it
 * (sims_env_check, below). */
#define SIMS_ENV_LAZY 16u

/* Open (or share) the environment in directory `dir`. A writable opener of a
 * store that this process already has open only read-only (a read-only copy)
 * gets SIMSTORE_EREADONLY.
 * LMDB 0.9 trusts its pages, so the first opener in a process checks the
 * meta pages before mdb_env_open and walks the snapshot LMDB will read
 * before any B-tree is touched (lmdbwalk.h; format/store.md, "Trusting
 * LMDB"), unless SIMS_ENV_CREATE or SIMS_ENV_TRUST; a damaged data.mdb is
 * then SIMSTORE_ECORRUPT naming the page and byte offset. */
int sims_env_open(sims_env *e, const char *dir, unsigned flags);
void sims_env_close(sims_env *e);

/* Lazy checks (SIMS_ENV_LAZY; format/store.md, "Trusting LMDB"). An
 * environment opened with them has checked, at open, only the meta pages,
 * the free list and the main database of the snapshot it opened; each read
 * transaction's snapshot gets the same when it begins
 * (sims_env_read_begin, sims_env_read_renew). Before each LMDB read of a
 * tree the caller calls sims_env_check with what the read will do
 * (SIMS_LMDB_READ_*: mdb_get; MDB_SET_KEY then MDB_NEXT_DUP; MDB_SET_RANGE
 * then MDB_PREV_NODUP or MDB_LAST), and reads only on SIMSTORE_OK.
 * Anything else (a cursor walking a whole database) needs
 * sims_env_full_walk first. Both are free once the file has been walked,
 * and in environments opened without SIMS_ENV_LAZY
 * (SIMSTORE_OPEN_FULL_WALK). sims_env_check returns SIMSTORE_OK,
 * SIMSTORE_ECORRUPT (naming the page and byte offset), SIMS_ERETRY (under
 * sims_retry: a writer moved on), SIMSTORE_ENOMEM or SIMSTORE_EINVAL (a
 * database without checks). */
int sims_env_check(const sims_env *e, MDB_txn *txn, MDB_dbi dbi, const void *key, size_t key_len,
                   int read);

/* sims_env_check, and with it the answer of the read (SIMS_LMDB_READ_GET
 * or SIMS_LMDB_READ_DUPS) taken from the pages just checked, so that LMDB
 * need not search them again: when this environment checks its reads
 * lazily, *done is set, *found says whether key is in the database, and fn
 * got its value (GET: the record, as mdb_get returns it) or each of its
 * duplicates in MDB_NEXT_DUP's order (DUPS), each valid only during the
 * call, with the checks' lock held (fn must not call sims_env_*). A nonzero
 * return of fn stops the read and is returned. Otherwise (a walked or
 * trusted file) *done is 0 and the caller reads through LMDB as before.
 * Errors as sims_env_check's, and fn's. */
int sims_env_check_read(const sims_env *e, MDB_txn *txn, MDB_dbi dbi, const void *key,
                        size_t key_len, int read, sims_lmdb_value_fn fn, void *ctx, int *done,
                        int *found);

/* Walk all of data.mdb now, unless done (as a non-lazy open does): for a
 * reader about to scan whole databases. SIMSTORE_OK or the walk's error. */
int sims_env_full_walk(sims_env *e);

/* Pages of data.mdb this process's environment has checked: by the full
 * walk and by lazy checks (tests and benchmarks count work with it). */
uint64_t sims_env_pages_checked(const sims_env *e);

/* Map an LMDB return code to a SIMSTORE_E* code with a message naming `what`. */
int sims_mdb_fail(int mdb_rc, const char *what);

/* Run fn inside one write transaction and commit it. When LMDB reports
 * MDB_MAP_FULL (from fn or the commit), the transaction is aborted, the map
 * doubled and fn run again from the start, so fn must be replayable: it may
 * read its inputs again but must not consume them irreversibly. fn returns a
 * SIMSTORE code; anything but OK aborts. */
typedef int (*sims_write_fn)(MDB_txn *txn, void *ctx);
int sims_env_write(sims_env *e, sims_write_fn fn, void *ctx);

/* fn signals map exhaustion by returning this private code when an LMDB call
 * failed with MDB_MAP_FULL; sims_mdb_write_status() does the mapping. */
#define SIMS_MAP_FULL_RETRY (-1000)

/* For LMDB calls inside a sims_write_fn: 0 stays 0, MDB_MAP_FULL becomes
 * SIMS_MAP_FULL_RETRY, anything else goes through sims_mdb_fail. */
int sims_mdb_write_status(int mdb_rc, const char *what);

/* Begin a read-only transaction (MDB_RDONLY), adopting a larger map size when
 * another process has grown it. */
int sims_env_read_begin(sims_env *e, MDB_txn **txn);
/* Renew a reset read transaction, with the same map-size handling. */
int sims_env_read_renew(sims_env *e, MDB_txn *txn);

/* What data.mdb's pages hold, in the snapshot of read transaction `txn`
 * (cheap: database records and the free list, no walk). */
typedef struct sims_env_usage_info {
    uint64_t page_bytes;
    uint64_t file_pages;  /* whole pages in data.mdb                        */
    uint64_t docs_pages;  /* the docs database: document records by id      */
    uint64_t fps_pages;   /* the fps database, its duplicates included      */
    uint64_t other_pages; /* meta pages, main and meta databases, free list */
    uint64_t free_pages;  /* freed pages LMDB will reuse                    */
    uint64_t tail_pages;  /* the file's pages past the last one in use      */
} sims_env_usage_info;
int sims_env_usage(sims_env *e, MDB_txn *txn, sims_env_usage_info *out);

/* Write a compact copy of the environment into directory `dir` (which
 * exists and holds no data.mdb): LMDB's copy with MDB_CP_COMPACT, from one
 * read snapshot, free pages left out and the pages renumbered, then made
 * durable (fsync of the file and of `dir`). SIMSTORE_EIO, SIMSTORE_EFULL. */
int sims_env_copy_compact(sims_env *e, const char *dir);

#endif
