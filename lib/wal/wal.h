/* wal.h: the write-ahead log of a serving store (format/wal.md): typed,
 * checksummed records appended by many threads and made durable in groups
 * (one fsync for every record waiting when the previous fsync returned),
 * replayed in order when the log is opened (a torn tail kept aside, damage
 * an error), trimmed by replacing the file, cut back to its durable records
 * after a failed write; read without changing it by whoever only looks. The
 * payload's meaning is the caller's. */
#ifndef SIMS_WAL_WAL_H
#define SIMS_WAL_WAL_H

#include <stddef.h>
#include <stdint.h>

#define SIMS_WAL_VERSION 1u
#define SIMS_WAL_HEADER_BYTES 64u
#define SIMS_WAL_RECORD_OVERHEAD 24u             /* length, type, seq, check */
#define SIMS_WAL_MAX_PAYLOAD (4u << 20)          /* format/wal.md, "Record"   */
#define SIMS_WAL_DEFAULT_GROUP_BYTES (16u << 20) /* the group bound G         */
#define SIMS_WAL_MIN_GROUP_BYTES 64u

typedef struct sims_wal sims_wal;

typedef struct sims_wal_options {
    uint64_t store_tag; /* binds the log to its store                      */
    size_t group_bytes; /* the group bound G: 0 for the default; tests use
                             small ones. A record (payload + 24 bytes) must
                             fit in it.                                      */
} sims_wal_options;

/* Called per replayed record, in order; payload is valid during the call.
 * A nonzero return stops the open, which then returns that value. */
typedef int (*sims_wal_replay_fn)(void *ctx, uint64_t seq, unsigned type, const uint8_t *payload,
                                  size_t len);

/* What follows a log's last valid record (format/wal.md, "Reading"). */
typedef struct sims_wal_tail {
    uint64_t end;        /* offset after the last valid record          */
    uint64_t next_seq;   /* the sequence number of the next record      */
    uint64_t bytes;      /* torn bytes after it (0: the file ends there) */
    uint64_t records;    /* records they began, by their lengths        */
    char aside_name[64]; /* sims_wal_open: the file keeping them aside,
                              in the log's directory ("" when none)       */
} sims_wal_tail;

/* What sims_wal_read() found. */
typedef struct sims_wal_summary {
    uint64_t file_bytes;
    uint64_t first_seq;
    uint64_t records; /* valid records, first_seq .. tail.next_seq - 1 */
    sims_wal_tail tail;
} sims_wal_summary;

/* Read the log at path without changing it (a store's stats and verify, a
 * writer's check for changes to apply): check its header and records as an
 * open does, call fn (may be NULL) per valid record, fill *out. A torn tail
 * is reported in out->tail, not dropped. group_bytes: 0 for the default.
 * Errors: SIMSTORE_ENOTFOUND/SIMSTORE_EIO (no such file or it cannot be
 * read), SIMSTORE_ECORRUPT (damage, naming the byte offset; another store's
 * log), SIMSTORE_EVERSION, or fn's nonzero value. */
int sims_wal_read(const char *path, uint64_t store_tag, size_t group_bytes, sims_wal_replay_fn fn,
                  void *ctx, sims_wal_summary *out);

typedef struct sims_wal_stats {
    uint64_t first_seq;   /* of the file's first record                    */
    uint64_t next_seq;    /* the next append's                             */
    uint64_t durable_seq; /* every record up to this one is durable (or 0) */
    uint64_t file_bytes;  /* header and records                            */
    uint64_t records;     /* in the file                                   */
    uint64_t groups;      /* fsyncs of records since open                  */
    sims_wal_tail tail;   /* the torn tail the open dropped and kept aside */
    int failed;           /* a group could not be written: appends fail
                             until sims_wal_recover()                      */
    int broken;           /* the file's state is unknown: reopen the log   */
    char failure[256];    /* why failed or broken ("" otherwise)           */
} sims_wal_stats;

/* Open the log at `path`, creating an empty one (first_seq 1, published
 * atomically) when none exists, and replay its records through fn (may be
 * NULL). A torn tail (format/wal.md, "Reading") is copied to
 * "<path>.torn-<next sequence number>-<UTC time>" (published atomically),
 * then cut from the log; sims_wal_get_stats() reports it. A record that
 * fails its checks with a valid later record behind it is damage, not a
 * torn tail: SIMSTORE_ECORRUPT, the file left as it is.
 * Errors: SIMSTORE_ECORRUPT (damaged durable bytes, another store's log),
 * SIMSTORE_EVERSION, SIMSTORE_EIO, SIMSTORE_ENOMEM, SIMSTORE_EINVAL (bad
 * options), or fn's nonzero value. */
int sims_wal_open(const char *path, const sims_wal_options *opt, sims_wal_replay_fn fn, void *ctx,
                  sims_wal **out);

/* Append one record and return once it is durable; *seq (may be NULL) gets
 * its sequence number. Safe from many threads at once: concurrent appends
 * share fsyncs. Errors: SIMSTORE_EINVAL (type 0, payload over the bound
 * or a record larger than the group bound),
 * SIMSTORE_ENOMEM, SIMSTORE_EIO (the write or fsync of its group failed,
 * with the system's reason: no record of the group, nor any enqueued after
 * it, is durable; every append fails until sims_wal_recover()). */
int sims_wal_append(sims_wal *w, unsigned type, const void *payload, size_t len, uint64_t *seq);

/* sims_wal_append() in two steps. Enqueue copies the record into the
 * pending group and gives it the next sequence number (*seq), without
 * waiting for the disk (unless the group is full: then it writes that one
 * first); records are numbered, and replayed, in the order of their
 * enqueues. Same errors as sims_wal_append(). */
int sims_wal_enqueue(sims_wal *w, unsigned type, const void *payload, size_t len, uint64_t *seq);
/* Return once every record up to `seq` is durable, writing the pending
 * group when no one else is. Errors: SIMSTORE_EINVAL (seq never given),
 * SIMSTORE_EIO (a write or fsync failed, as sims_wal_append()). */
int sims_wal_wait(sims_wal *w, uint64_t seq);
/* The sequence number of the last record enqueued (first_seq - 1 when
 * none). */
uint64_t sims_wal_last_seq(sims_wal *w);

/* Replace the log by an empty one whose first record will be `first_seq`
 * (≥ the next sequence number: numbers never go back), published
 * atomically. Waits for appends in flight; appends that start meanwhile go
 * to the new file. Errors: SIMSTORE_EINVAL, SIMSTORE_EIO. */
int sims_wal_reset(sims_wal *w, uint64_t first_seq);

/* Trim (format/wal.md, "Trimming"): replace the log by one holding only the
 * records after `applied` (first_seq = applied + 1), published atomically.
 * applied must be durable; records at or before the log's start are
 * nothing to trim (SIMSTORE_OK). Appends may enqueue meanwhile; their
 * groups are written after it, to the new file. Errors: SIMSTORE_EINVAL
 * (applied beyond the durable records), SIMSTORE_EIO (the log is then
 * broken, as after a failed write), SIMSTORE_ECORRUPT, SIMSTORE_ENOMEM. */
int sims_wal_trim(sims_wal *w, uint64_t applied);

void sims_wal_get_stats(sims_wal *w, sims_wal_stats *out);

/* After a failed group (appends fail with SIMSTORE_EIO): cut the file back
 * to its durable records, drop the records enqueued since (they were never
 * acknowledged) and number the next append durable_seq + 1, so that
 * appends work again once the disk takes them. The caller makes sure no
 * thread is waiting for, or will wait for, a record enqueued before the
 * call: their numbers are given again. SIMSTORE_OK when nothing failed.
 * Errors: SIMSTORE_EIO (the file could not be cut back: the log is broken
 * and must be opened again). */
int sims_wal_recover(sims_wal *w);

/* Call fn for each durable record in the file, in order (the log's lock is
 * held meanwhile: fn must not call the log). Errors: SIMSTORE_EIO (the log
 * failed), SIMSTORE_ECORRUPT, or fn's nonzero value. */
int sims_wal_each_record(sims_wal *w, sims_wal_replay_fn fn, void *ctx);

/* Close (NULL is fine). Appends must have returned. */
void sims_wal_close(sims_wal *w);

#endif
