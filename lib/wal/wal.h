/* wal.h: the write-ahead log of a serving store (format/wal.md): typed,
 * checksummed records appended by many threads and made durable in groups
 * (one fsync for every record waiting when the previous fsync returned),
 * replayed in order when the log is opened, trimmed by replacing the file.
 * The payload's meaning is the caller's. */
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

typedef struct sims_wal_stats {
    uint64_t first_seq;   /* of the file's first record                    */
    uint64_t next_seq;    /* the next append's                             */
    uint64_t durable_seq; /* every record up to this one is durable (or 0) */
    uint64_t file_bytes;  /* header and records                            */
    uint64_t records;     /* in the file                                   */
    uint64_t groups;      /* fsyncs of records since open                  */
    uint64_t torn_bytes;  /* dropped from the tail at open                 */
} sims_wal_stats;

/* Open the log at `path`, creating an empty one (first_seq 1, published
 * atomically) when none exists, and replay its records through fn (may be
 * NULL). A torn tail (format/wal.md, "Reading") is truncated away.
 * Errors: SIMSTORE_ECORRUPT (damaged durable bytes, another store's log),
 * SIMSTORE_EVERSION, SIMSTORE_EIO, SIMSTORE_ENOMEM, SIMSTORE_EINVAL (bad
 * options), or fn's nonzero value. */
int sims_wal_open(const char *path, const sims_wal_options *opt, sims_wal_replay_fn fn, void *ctx,
                  sims_wal **out);

/* Append one record and return once it is durable; *seq (may be NULL) gets
 * its sequence number. Safe from many threads at once: concurrent appends
 * share fsyncs. Errors: SIMSTORE_EINVAL (type 0, payload over the bound
 * or a record larger than the group bound),
 * SIMSTORE_ENOMEM, SIMSTORE_EIO (the write or fsync failed: this append
 * and every later one fail until the log is opened again). */
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

/* Close (NULL is fine). Appends must have returned. */
void sims_wal_close(sims_wal *w);

#endif
