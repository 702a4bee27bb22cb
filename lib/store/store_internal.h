/* store_internal.h: the structures behind the public store handles, shared by
 * store.c (open, segments, stats), build.c (builders) and query.c. */
#ifndef SIMS_STORE_INTERNAL_H
#define SIMS_STORE_INTERNAL_H

#include "simstore.h"
#include "design/design.h"
#include "docfile/docfile.h"
#include "lmdb/env.h"
#include "lmdb/records.h"
#include "sort/spool.h"
#include "table/table.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

/* The write-ahead log of a live store, in the store's directory
 * (format/store.md "Directory layout", format/wal.md): written by live/,
 * checked by check/, and a name a store holds for build --replace. */
#define SIMS_STORE_WAL_NAME "live.wal"

/* simstore_open() flag of the live store (lib/live): the write-ahead log's
 * pending changes are its to replay, so the open does not refuse them. */
#define SIMS_OPEN_LIVE (1u << 24)

/* What the store's write-ahead log holds (walstate.c), read without
 * changing it. */
typedef struct sims_store_log {
    int exists; /* STORE/live.wal is there               */
    uint64_t file_bytes;
    uint64_t first_seq;   /* of its first record                   */
    uint64_t records;     /* whole valid records                   */
    uint64_t applied_seq; /* the store's state's applied number    */
    uint64_t pending;     /* records after it: changes to apply    */
    uint64_t first_pending_seq, last_pending_seq;
    uint64_t torn_bytes;  /* after the last whole record           */
    uint64_t torn_offset; /* where they begin                      */
} sims_store_log;

/* Read the log at path (none: all zero but applied_seq) of the store with
 * this tag and applied sequence number: the same errors as below. */
int sims_log_read(const char *path, uint64_t store_tag, uint64_t applied, sims_store_log *out);
/* Read STORE/live.wal (none: all zero). Errors: SIMSTORE_ECORRUPT (the log
 * is damaged, named with its byte offset; it belongs to another store; it
 * misses records the store has not applied), SIMSTORE_EVERSION,
 * SIMSTORE_EIO. */
int sims_store_read_log(simstore *s, sims_store_log *out);

/* SIMSTORE_EBUSY when the log holds changes the store's files do not: the
 * message names `what` (the refused operation) and says how to apply them
 * (or `advice`, when not NULL); the errors of sims_store_read_log() in
 * context. */
int sims_store_refuse_pending_log(simstore *s, const char *what, const char *advice);
/* The same for the store directory `dir`, opened read-only here; a log with
 * records beside a store that cannot be read is refused too. */
int sims_store_dir_refuse_pending_log(const char *dir, const char *what, const char *advice);

/* One segment: its table files, open. Shared by every snapshot that lists it
 * and freed with the last. */
typedef struct sims_segment {
    atomic_uint refs;
    uint64_t id;
    uint64_t fp_count;
    uint64_t created_unix;
    uint32_t table_count;
    uint32_t flags; /* the entry's SIMS_SEGMENT_FLAG_* */
    table_reader **tables;
    docfile_reader *docs; /* its document file (SIMS_SEGMENT_FLAG_DOCFILE), or NULL */
} sims_segment;

/* The segments of one committed state (one generation), as readers use it. */
typedef struct sims_snapshot {
    atomic_uint refs;
    uint64_t generation;
    uint64_t txn_id; /* an LMDB read transaction id that saw this state */
    uint64_t doc_count;
    uint64_t fp_count;
    uint32_t segment_count;
    sims_segment **segments;
    /* The paragraph segments (format/store.md, "Paragraphs"): tables of the
     * store's design over paragraph fingerprints. */
    uint32_t para_segment_count;
    sims_segment **para_segments;
    /* The store's document file (format/store.md, "Document files"), or
     * sims_docfile_empty() when it has none (docfile_segment 0, docfile_changed
     * set: docs holds every document). Unless docfile_changed, it holds every document and docs and
     * fps are empty; with it, docs and fps hold the documents added since
     * and docs the tombstones of the file's documents deleted or replaced
     * (a file document is live iff docs has no key of its id). */
    const docfile_reader *docfile;
    uint64_t docfile_segment;
    int docfile_changed;
} sims_snapshot;

struct simstore {
    char *path;
    dev_t dir_dev; /* the directory opened: another one may be renamed to */
    ino_t dir_ino; /* `path` later (build --replace) */
    unsigned open_flags;
    sims_env env;
    int lock_fd; /* writer.lock held with flock(LOCK_EX), or -1 */
    uint32_t store_flags;
    uint64_t store_tag;
    uint32_t block_bytes;
    uint64_t created_unix;
    sims_design *design;
    simstore_text_options text;         /* from the text record */
    simstore_boilerplate *boilerplate;  /* from the boilerplate record, or NULL */
    simstore_build_options maintenance; /* for automatic compaction after deletes */
    pthread_mutex_t mu;                 /* guards `current` and `builder_open` */
    sims_snapshot *current;             /* the newest snapshot loaded */
    int builder_open;
    /* Held (recursively: an add or delete may compact) by each change made
     * through this handle: adds (from finish), deletes, compactions. Each
     * reads the state it replaces and names its new segment from it, so two
     * threads changing the store through one handle must not interleave
     * (test_concurrency writers__one_at_a_time). */
    pthread_mutex_t write_mu;
};

/* "<dir>/s<segment:10>-t<table:3>.tbl" into buf; SIMSTORE_EINVAL when too long. */
int sims_table_path(char *buf, size_t size, const char *dir, uint64_t segment, unsigned table);
/* "<dir>/s<segment:10>.doc", the segment's document file (format/store.md,
 * "Document files"); SIMSTORE_EINVAL when too long. */
int sims_docfile_path(char *buf, size_t size, const char *dir, uint64_t segment);
/* Whether a directory entry's name is a segment file's: a table file
 * (SIMS_SEGMENT_TABLE_FILE, its table in *table) or a document file
 * (SIMS_SEGMENT_DOC_FILE); 0 for neither. Its segment id in *segment. */
#define SIMS_SEGMENT_TABLE_FILE 1
#define SIMS_SEGMENT_DOC_FILE 2
int sims_segment_file_name(const char *name, uint64_t *segment, unsigned *table);

/* Open the segment's table files and check each against the store (tag,
 * table index, block size, permutation, prefix, fingerprint count). */
int sims_segment_open(const simstore *s, const char *dir, const sims_segment_entry *e,
                      sims_segment **out);
void sims_segment_release(sims_segment *seg);

/* The snapshot for the state committed as seen by `txn`: the current one when
 * its generation matches, else a new one (sharing open segments) that becomes
 * current. The caller owns one reference. SIMS_ERETRY when files of that
 * state are gone because a writer has committed since txn began (a reader
 * reads again from a new transaction, under sims_retry(); a writer, holding
 * the lock, never sees it); SIMSTORE_ENOTFOUND when they are missing
 * otherwise, or the path now names another store. */
int sims_store_snapshot(simstore *s, MDB_txn *txn, sims_snapshot **out);
void sims_snapshot_release(sims_snapshot *snap);

/* The snapshot of the newest committed state, from a read transaction of its
 * own, read again (sims_retry) while writers remove the files of the state it
 * saw. The caller owns one reference. Errors: those of sims_store_snapshot
 * but SIMS_ERETRY. */
int sims_read_snapshot(simstore *s, sims_snapshot **out);

/* Read and decode the state record inside txn (free with
 * sims_state_record_release). */
int sims_store_read_state(const simstore *s, MDB_txn *txn, sims_state_record *out);

/* The meta database's record `name` ("store", "state", "text", ...) in
 * txn, checked first (sims_env_check): SIMSTORE_OK with *val, 1 when there
 * is none, or a failure. */
int sims_store_get_record(const simstore *s, MDB_txn *txn, const char *name, MDB_val *val);
/* The state committed now, read in a read transaction of its own (released
 * before returning); *out is released by the caller with
 * sims_state_record_release(). */
int sims_store_read_committed_state(simstore *s, sims_state_record *out);

/* Remove leftovers of interrupted writers: temporary files and table files
 * the committed state does not name. Called with the writer lock held. */
int sims_store_clean(simstore *s);

/* Writing a segment's table files (segment.c). */
typedef struct sims_segment_job {
    const sims_design *design;
    uint64_t store_tag;
    uint32_t block_bytes;
    const char *dir;
    uint64_t segment_id;
    const struct sims_spool *distinct; /* the fingerprints, in any order, repeats allowed */
    unsigned threads;
    uint64_t memory_bytes; /* for all table sorters together */
    simstore_progress_fn progress;
    void *progress_ctx;
    uint64_t *fp_count; /* out (may be NULL): distinct fingerprints written */
} sims_segment_job;

/* Write every table file of the segment (published atomically, one by one;
 * on failure the ones written are removed). */
int sims_segment_write(const sims_segment_job *job);
/* Unlink the segment's table files and document file (best effort). */
void sims_segment_remove(const char *dir, uint64_t segment_id, unsigned tables);
/* Encode and put the state record. */
int sims_put_state(MDB_txn *txn, MDB_dbi meta, const sims_state_record *st);

/* Read the boilerplate record inside txn into s->boilerplate (NULL when the
 * store has none). SIMSTORE_ECORRUPT, SIMSTORE_EVERSION, SIMSTORE_ENOMEM,
 * SIMSTORE_EIO (boilerplate.c). */
int sims_store_load_boilerplate(simstore *s, MDB_txn *txn);
/* The boilerplate record of bp in a new malloc'd buffer (*out, *len).
 * SIMSTORE_ENOMEM. */
int sims_boilerplate_encode(const simstore_boilerplate *bp, uint8_t **out, size_t *len);
/* Sorted runs the counter has spilled to disk so far (for tests). */
unsigned sims_boilerplate_counter_spilled_runs(const simstore_boilerplate_counter *c);
/* A document record's sketch against the store: a record may hold a sketch
 * only of the store's kind (the text record's), so that answers compare
 * sketches made alike. SIMSTORE_ECORRUPT naming the document otherwise. A
 * record without a sketch is accepted (its similarity is unknown). */
/* An id docs lacks (mdb_get said MDB_NOTFOUND in txn): SIMSTORE_OK when its
 * neighbours in docs lie on either side of it and their records pass their
 * checks (which mix in their ids), so that it is truly absent rather than
 * looked for down a branch a damaged separator chose (format/store.md,
 * "Trusting LMDB"); SIMSTORE_ECORRUPT otherwise. */
int sims_check_doc_absent(simstore *s, MDB_txn *txn, const void *id, size_t id_len);

/* A document of a document file as the record docs would hold for it (its
 * pointers borrow d's; docsource.c). Without a store at hand (s NULL:
 * verify) it has no sketch. */
void sims_docfile_record(const simstore *s, const docfile_doc *d, sims_doc_record *rec);
/* A store with a document file and changes in docs (docsource.c): whether
 * document-file document d is live in txn's state (1: docs has no key of
 * its id; 0: docs's document or tombstone takes its place), each docs read
 * checked first unless the file was walked (then walked = 1). `changed`:
 * whether docs may hold changes (the snapshot's docfile_changed; a writer
 * that has changed docs in txn passes 1); when 0 every document is live. */
int sims_docfile_doc_live(simstore *s, int changed, MDB_txn *txn, int walked, const docfile_doc *d);
/* Whether a document of the store holds fp in txn (1 or 0, or an error):
 * fps has it, or a live document of `file` does, as sims_docfile_doc_live
 * judges each (a walked file). */
int sims_store_holds_fp(simstore *s, const docfile_reader *file, int changed, MDB_txn *txn,
                        uint64_t fp);
/* LMDB's order of ids (docs's keys): memcmp, then the shorter first. */
int sims_id_cmp(const void *a, size_t alen, const void *b, size_t blen);
/* Where a document of a store with a document file is. */
#define SIMS_DOC_NONE 0    /* in neither */
#define SIMS_DOC_IN_DOCS 1 /* docs's record (rec borrows txn's page) */
#define SIMS_DOC_IN_FILE 2 /* the file's (file, and rec borrowing from it) */
#define SIMS_DOC_GONE 3    /* a tombstone: deleted (rec.fp its fingerprint) */
typedef struct sims_doc_found {
    int where;
    sims_doc_record rec;
    docfile_doc file;
} sims_doc_found;
/* The document of `id` in snap (which has a document file) and txn's docs. */
int sims_doc_lookup(simstore *s, const sims_snapshot *snap, MDB_txn *txn, int walked,
                    const void *id, size_t len, sims_doc_found *out);
/* Every live document of snap (with a document file) in id order, docs's
 * merged with the file's (docs's entries take the place of the file's of
 * the same id; tombstones are skipped). The file's ids are sorted within
 * memory_bytes; docs is read with a cursor, so the file must have been
 * walked (sims_env_full_walk). Returns 0, fn's nonzero value, or an error. */
typedef int (*sims_doc_fn)(void *ctx, const uint8_t *id, size_t len, const sims_doc_record *rec);
int sims_docs_each_by_id(simstore *s, const sims_snapshot *snap, MDB_txn *txn,
                         uint64_t memory_bytes, sims_doc_fn fn, void *ctx);
/* Every live document of snap (with a document file) once, in no
 * particular order (the file's in its order, then docs's): the cheapest
 * pass over all of them, for work that does not need an order (bands). */
int sims_docs_each_live(simstore *s, const sims_snapshot *snap, MDB_txn *txn, int walked,
                        sims_doc_fn fn, void *ctx);
/* Every fingerprint with live documents in snap (with a document file), in
 * order: their count and the first one's id (in id order), the file's
 * merged with fps's. */
typedef int (*sims_fp_fn)(void *ctx, uint64_t fp, uint64_t count, const uint8_t *first_id,
                          size_t first_len);
int sims_docs_each_fp(simstore *s, const sims_snapshot *snap, MDB_txn *txn, int walked,
                      sims_fp_fn fn, void *ctx);
int sims_check_doc_sketch(const simstore *s, const sims_doc_record *rec, const char *id,
                          size_t id_len);

/* The serving layer (lib/live) and the applied WAL sequence number
 * (format/store.md, "The state record"). */

/* Make the commit of an add's builder (simstore_add_begin) record `seq` as
 * the applied WAL sequence number (the larger of it and the number the
 * store's state holds). SIMSTORE_EINVAL for a build's builder. */
int sims_builder_set_wal_applied(simstore_builder *b, uint64_t seq);
/* Make b take ids as a logged change carries them: of 1..511 bytes, not
 * checked against the id rule (simstore_id_problem), which an older server
 * did not apply before acknowledging them. */
void sims_builder_take_logged_ids(simstore_builder *b);
/* The applied WAL sequence number of the state committed now (0: none).
 * SIMSTORE_ECORRUPT, SIMSTORE_EIO. */
int sims_store_wal_applied(simstore *s, uint64_t *seq);
/* The store's tag (the store record's), which binds a WAL to the store. */
uint64_t sims_store_tag(const simstore *s);
/* Note in writer.lock that a server (a live store) holds the store, so that
 * writers refused with SIMSTORE_EBUSY say so (format/store.md, "Directory
 * layout"). The handle must be open with SIMSTORE_OPEN_WRITE. SIMSTORE_EIO,
 * SIMSTORE_EINVAL. */
int sims_store_note_holder(simstore *s, const char *role);
/* SIMSTORE_EBUSY for the store `dir` whose writer.lock (open as fd) another
 * process holds, with a message naming the holder when it left a note. */
int sims_store_busy(const char *dir, int fd);

/* Temporary build directories (build.c; format/store.md, "Temporary build
 * directories"): a new marked "<path>.tmp-XXXXXX" beside the store path
 * (after removing the ones dead builds left), with its writer.lock created
 * and locked (*lock_fd). On failure *work_dir may name a directory to
 * remove with sims_build_dir_remove. SIMSTORE_EIO, SIMSTORE_ENOMEM. */
int sims_build_dir_create(const char *path, char **work_dir, int *lock_fd);
/* Remove a build directory, its marker last. */
void sims_build_dir_remove(const char *work_dir);
/* Swap the complete store in work_dir into final_path (an existing store)
 * with one atomic exchange, holding the old store's writer lock (through
 * held_lock_fd, or taken here when it is -1: SIMSTORE_EBUSY when another
 * writer has it), make it durable, and remove the old store (now at
 * work_dir). On failure the old store stays at final_path and work_dir
 * holds the new one. SIMSTORE_EBUSY, SIMSTORE_EIO. */
int sims_store_swap_in(const char *work_dir, const char *final_path, int held_lock_fd);

/* Seconds since the epoch. */
uint64_t sims_now_unix(void);

/* The memory budget every writer (build, add, compaction) works with:
 * memory_bytes (simstore_build_options) raised to SIMSTORE_MIN_MEMORY_BYTES. */
uint64_t sims_memory_budget(uint64_t memory_bytes);
/* What a builder's sorting, spilling and table writing may use of
 * memory_bytes: its sims_memory_budget() less the part kept back for the
 * rest of the process (I/O buffers, the program, LMDB, threads' stacks):
 * 1/8 of it, at most 64 MiB. */
uint64_t sims_sorting_budget(uint64_t memory_bytes);

/* ---- Batch support: what lib/scan shares with the single query (query.c) --
 * so that a batch answers exactly as simstore_query_fp() does. */

/* The most prefixes a query may probe per segment (sims_design_probes):
 * about a second of probing. */
#define SIMS_QUERY_MAX_PROBES (1u << 20)

/* Whether the store answers distance k: any k up to SIMSTORE_MAX_K whose
 * probes stay within SIMS_QUERY_MAX_PROBES (above the design's k, every
 * table is probed at each prefix near the query's: format/design.md,
 * "Beyond k"). SIMSTORE_OK or SIMSTORE_ERANGE with a message. */
int sims_query_check_k(const simstore *s, unsigned k);

/* simstore_query_fp()'s order of matches: distance, then id bytes (then
 * fingerprint, for fingerprint-only stores); a qsort comparator. */
int sims_match_cmp(const void *a, const void *b);
/* Sort matches into that order. */
void sims_sort_matches(simstore_match *m, size_t n);
/* Matches built while their arena may still move hold, in id, meta and
 * sketch, an offset into it + 1 (NULL: none): make them pointers into
 * arena, now final. */
void sims_matches_point_into(simstore_match *m, size_t n, const char *arena);

/* A fingerprint fp a table holds but database dbi (fps or pfps, called
 * `name` in messages) does not: deleted, unless a damaged key or branch
 * page hides it (format/store.md, "Trusting LMDB"). The keys on either side
 * of fp, found through cur (on dbi), go to neighbour (a damaged key gives
 * itself away there: its rc is the cursor's) and must lie on their side of
 * fp. SIMSTORE_OK, or neighbour's error, or SIMSTORE_ECORRUPT. */
typedef int (*sims_neighbour_fn)(void *ctx, int rc, const MDB_val *key, const MDB_val *val);
int sims_check_fp_absent(simstore *s, MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur, const char *name,
                         uint64_t fp, sims_neighbour_fn neighbour, void *ctx);

/* What probing the tables near a fingerprint keeps between probes (a
 * query's, query.c; a paragraph query's, paragraphs.c). */
typedef struct sims_prober {
    const sims_permuter *permuter; /* of the table being probed, for emit */
    int grow_failed;               /* set by emit when out of memory */
    uint64_t *masks;               /* beyond the design's k: a table's prefix masks */
    size_t mask_cap;
} sims_prober;

/* Probe every table of segs[0..n) (of design d) for the values within k
 * of fp, at every prefix within flips bits of fp's (flips 0: fp's own),
 * each to emit(ctx, permuted value) with pr->permuter its table's. `what`
 * names the query in messages. SIMSTORE_ENOMEM (also when emit set
 * pr->grow_failed), or a search's error. */
int sims_probe_near(sims_prober *pr, const sims_design *d, sims_segment *const *segs, uint32_t n,
                    uint64_t fp, unsigned k, unsigned flips, int (*emit)(void *ctx, uint64_t value),
                    void *ctx, const char *what);

/* Decode the record (value[0, len)) of document id, checked to hold
 * fingerprint fp (as fps lists it) and a sketch of the store's kind, into
 * *rec: the LMDB answer cross-check of a query and of a scan (issue 6).
 * SIMSTORE_ECORRUPT (with the document named) otherwise. */
int sims_doc_record_of_fp(const simstore *s, const void *id, size_t id_len, const void *value,
                          size_t len, uint64_t fp, sims_doc_record *rec);

/* Begin q's read transaction and take the snapshot of the state it sees
 * (the caller owns one reference). SIMS_ERETRY as sims_store_snapshot();
 * on failure the transaction is reset. */
int sims_query_begin_state(simstore_query *q, sims_snapshot **snap);
/* Begin q's read transaction on the state of snap, taken by another query
 * object: SIMS_ERETRY (sims_retry_or_fail) when a writer committed since. */
int sims_query_join_state(simstore_query *q, const sims_snapshot *snap);
/* End the transaction begun by one of the two above. */
void sims_query_end_state(simstore_query *q);

/* Inside such a transaction: the documents stored under fingerprint fp as
 * simstore_query_fp() finds and checks them (fps, the cross-check against
 * each document record, metadata as q's flags say), as matches of distance
 * 0 with fp set, in q's buffers: valid until the next call on q. A
 * fingerprint the tables hold without documents (deleted) gives none. For a
 * fingerprint-only store: one match of id NULL. Errors: SIMSTORE_ECORRUPT,
 * SIMSTORE_EIO, SIMSTORE_ENOMEM. */
int sims_query_fp_documents(simstore_query *q, uint64_t fp, const simstore_match **docs,
                            size_t *count);

/* ---- The paragraph query (paragraphs.c) and the query object it uses. */

/* A query object's buffers for paragraph queries, made on first use. */
typedef struct sims_para_buffers sims_para_buffers;
void sims_para_buffers_free(sims_para_buffers *p);
simstore *sims_query_store(const simstore_query *q);
unsigned sims_query_flags(const simstore_query *q);
sims_para_buffers **sims_query_para_buffers(simstore_query *q);

#endif
