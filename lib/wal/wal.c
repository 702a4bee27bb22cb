/* wal.c: the write-ahead log of wal.h (format/wal.md). Appenders copy their
 * record into the pending group under the lock; the first appender that
 * finds no write in flight becomes the leader, takes the whole pending group,
 * writes and fsyncs it without the lock, then publishes the new durable
 * sequence number and wakes everyone: records that arrived meanwhile form the
 * next group, so concurrent appenders share one fsync. An append is also two
 * steps a caller may separate (enqueue, then wait): a serving store numbers
 * its changes in the order it decides them, under its own lock, and waits
 * for the disk outside it. */
#include "wal/wal.h"

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"
#include "simstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WAL_MAGIC "SIMSWAL\n"
#define WAL_HEADER_SEED 0x53494D5357414C48ull /* "SIMSWALH" */
#define WAL_RECORD_SEED 0x53494D5357414C52ull /* "SIMSWALR" */

struct sims_wal {
    char *path;
    int fd;
    uint64_t store_tag;
    size_t group_bytes;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* Under mu. */
    uint8_t *pending; /* records appended, not yet taken by a leader */
    size_t pending_len, pending_cap;
    uint64_t pending_last; /* seq of the last pending record */
    uint8_t *spare;        /* the leader's buffer, swapped with pending */
    size_t spare_cap;
    int writing;       /* a leader is writing and syncing a group */
    int resetting;     /* sims_wal_reset is replacing the file */
    int failed;        /* a group's write or fsync failed: sims_wal_recover */
    int broken;        /* the file's state is unknown: reopen the log */
    char failure[256]; /* why failed or broken */
    uint64_t next_seq;
    uint64_t durable_seq;
    uint64_t durable_bytes; /* the file's bytes up to durable_seq's end */
    uint64_t first_seq;
    uint64_t file_bytes; /* durable or in flight */
    uint64_t records;
    uint64_t groups;
    sims_wal_tail tail; /* what the open found after the last record */
};

/* ---- bytes ------------------------------------------------------------------ */

static void encode_header(uint8_t h[SIMS_WAL_HEADER_BYTES], uint64_t store_tag, uint64_t first_seq)
{
    memset(h, 0, SIMS_WAL_HEADER_BYTES);
    memcpy(h, WAL_MAGIC, 8);
    le_store32(h + 8, SIMS_WAL_VERSION);
    le_store32(h + 12, 0);
    le_store64(h + 16, store_tag);
    le_store64(h + 24, first_seq);
    le_store64(h + 56, sims_xxh3_64(h, 56, WAL_HEADER_SEED));
}

static int check_header(const char *path, const uint8_t *h, size_t size, uint64_t store_tag,
                        uint64_t *first_seq)
{
    if (size < SIMS_WAL_HEADER_BYTES)
        return SIMS_CORRUPT("%s: %zu bytes, too short for the log's header", path, size);
    if (memcmp(h, WAL_MAGIC, 8) != 0)
        return SIMS_CORRUPT("%s: not a simstore write-ahead log (bad magic)", path);
    /* The version before the checksum: another version may lay out (and
     * check) its header otherwise. */
    uint32_t version = le_load32(h + 8);
    if (version != SIMS_WAL_VERSION)
        return sims_fail(SIMSTORE_EVERSION,
                         "%s: log version %" PRIu32 " unknown to this simstore (%s), which reads "
                         "version %u",
                         path, version, SIMSTORE_VERSION_STRING, SIMS_WAL_VERSION);
    if (le_load64(h + 56) != sims_xxh3_64(h, 56, WAL_HEADER_SEED))
        return SIMS_CORRUPT("%s: the log's header fails its check", path);
    for (size_t i = 32; i < 56; i++)
        if (h[i])
            return SIMS_CORRUPT("%s: the log's header has reserved byte %zu set", path, i);
    if (le_load32(h + 12) != 0)
        return SIMS_CORRUPT("%s: the log's header has flags 0x%" PRIx32, path, le_load32(h + 12));
    *first_seq = le_load64(h + 24);
    if (*first_seq == 0)
        return SIMS_CORRUPT("%s: the log's first sequence number is 0", path);
    if (le_load64(h + 16) != store_tag)
        return SIMS_CORRUPT("%s: the log belongs to another store (tag %016" PRIx64
                            ", the store's %016" PRIx64 ")",
                            path, le_load64(h + 16), store_tag);
    return SIMSTORE_OK;
}

static size_t record_bytes(size_t len)
{
    return SIMS_WAL_RECORD_OVERHEAD + len;
}

static void encode_record(uint8_t *r, uint64_t store_tag, uint64_t seq, unsigned type,
                          const void *payload, size_t len)
{
    le_store32(r, (uint32_t)len);
    r[4] = (uint8_t)type;
    r[5] = r[6] = r[7] = 0;
    le_store64(r + 8, seq);
    if (len)
        memcpy(r + 16, payload, len);
    le_store64(r + 16 + len, sims_xxh3_64(r, 16 + len, WAL_RECORD_SEED ^ store_tag));
}

/* Whether data[p..size) starts with the header of a record numbered
 * seq_lo..seq_hi (length within the bound and the file, type, reserved
 * bytes): its payload length, or -1. */
static int64_t record_header_at(const uint8_t *data, size_t size, size_t p, uint64_t seq_lo,
                                uint64_t seq_hi)
{
    if (size - p < SIMS_WAL_RECORD_OVERHEAD)
        return -1;
    const uint8_t *r = data + p;
    uint64_t len = le_load32(r);
    if (len > SIMS_WAL_MAX_PAYLOAD || len > size - p - SIMS_WAL_RECORD_OVERHEAD)
        return -1;
    uint64_t seq = le_load64(r + 8);
    if (r[4] == 0 || r[5] || r[6] || r[7] || seq < seq_lo || seq > seq_hi)
        return -1;
    return (int64_t)len;
}

/* The valid record at data[p..size) numbered seq_lo..seq_hi: its payload
 * length, or -1 when none starts there. */
static int64_t valid_record_in(const uint8_t *data, size_t size, size_t p, uint64_t seq_lo,
                               uint64_t seq_hi, uint64_t store_tag)
{
    int64_t len = record_header_at(data, size, p, seq_lo, seq_hi);
    if (len < 0)
        return -1;
    const uint8_t *r = data + p;
    if (le_load64(r + 16 + (size_t)len) !=
        sims_xxh3_64(r, 16 + (size_t)len, WAL_RECORD_SEED ^ store_tag))
        return -1;
    return len;
}

static int64_t valid_record_at(const uint8_t *data, size_t size, size_t p, uint64_t seq,
                               uint64_t store_tag)
{
    return valid_record_in(data, size, p, seq, seq, store_tag);
}

/* ---- reading (format/wal.md, "Reading") ---------------------------------- */

/* A valid record numbered seq or later anywhere in data(p..size): its
 * offset, or 0. Such a record was written after the one expected at p, so
 * the group holding that one was made durable before it: p is damage. */
static size_t later_record_after(const uint8_t *data, size_t size, size_t p, uint64_t seq,
                                 uint64_t store_tag, uint64_t *found_seq)
{
    /* A record takes at least 24 bytes: no later one can be numbered beyond
     * this. */
    uint64_t seq_hi = seq + (size - p) / SIMS_WAL_RECORD_OVERHEAD;
    for (size_t q = p + 1; q + SIMS_WAL_RECORD_OVERHEAD <= size; q++)
        if (valid_record_in(data, size, q, seq, seq_hi, store_tag) >= 0) {
            *found_seq = le_load64(data + q + 8);
            return q;
        }
    return 0;
}

/* Check the header of data[0, size) and deliver its valid records to fn in
 * order; *tail receives where they end and what follows them. A log with
 * damage before its end is SIMSTORE_ECORRUPT. */
static int read_log(const char *path, const uint8_t *data, size_t size, uint64_t store_tag,
                    size_t group_bytes, sims_wal_replay_fn fn, void *ctx, uint64_t *first_seq,
                    uint64_t *records, sims_wal_tail *tail)
{
    memset(tail, 0, sizeof *tail);
    *records = 0;
    uint64_t first = 0;
    int rc = check_header(path, data, size, store_tag, &first);
    if (rc)
        return rc;
    *first_seq = first;
    uint64_t seq = first;
    size_t p = SIMS_WAL_HEADER_BYTES;
    while (p < size) {
        int64_t len = valid_record_at(data, size, p, seq, store_tag);
        if (len < 0)
            break;
        if (fn && (rc = fn(ctx, seq, data[p + 4], data + p + 16, (size_t)len)) != 0)
            return rc;
        p += record_bytes((size_t)len);
        seq++;
        (*records)++;
    }
    tail->end = p;
    tail->next_seq = seq;
    if (p == size)
        return SIMSTORE_OK;
    /* Only the last group can be torn: every group before it was fsynced
     * before it was written, so a record that fails its checks with a
     * valid later record behind it, or more than a group's bytes before the
     * end, is damage in acknowledged bytes. */
    if (size - p > group_bytes)
        return SIMS_CORRUPT("%s: damaged record at byte %zu (sequence number %" PRIu64
                            "), %zu bytes before the end of the log: records the log "
                            "acknowledged cannot be read; the file is left as it is",
                            path, p, seq, size - p);
    uint64_t later_seq = 0;
    size_t later = later_record_after(data, size, p, seq, store_tag, &later_seq);
    if (later)
        return SIMS_CORRUPT("%s: damaged record at byte %zu (sequence number %" PRIu64
                            "): the valid record %" PRIu64 " at byte %zu follows it, so it "
                            "was acknowledged and cannot be read; the file is left as it is",
                            path, p, seq, later_seq, later);
    tail->bytes = size - p;
    /* The records the torn group began, by their lengths. */
    for (size_t q = p; q < size; q += SIMS_WAL_RECORD_OVERHEAD) {
        if (size - q < 16 || le_load64(data + q + 8) != seq + tail->records)
            break;
        tail->records++;
        uint64_t len = le_load32(data + q);
        if (len > size - q)
            break;
        q += (size_t)len;
    }
    return SIMSTORE_OK;
}

int sims_wal_read(const char *path, uint64_t store_tag, size_t group_bytes, sims_wal_replay_fn fn,
                  void *ctx, sims_wal_summary *out)
{
    memset(out, 0, sizeof *out);
    size_t group = group_bytes ? group_bytes : SIMS_WAL_DEFAULT_GROUP_BYTES;
    sims_map m = {NULL, 0};
    int rc = sims_map_open(path, &m);
    if (rc)
        return rc;
    out->file_bytes = m.size;
    rc = read_log(path, m.data, m.size, store_tag, group, fn, ctx, &out->first_seq, &out->records,
                  &out->tail);
    sims_map_close(&m);
    return rc;
}

/* ---- open ------------------------------------------------------------------- */

/* Publish at `path` a log of store_tag starting at first_seq that holds
 * records[0, len): whole records, first_seq's first (none: a new log, or a
 * reset one; a trim keeps the records not yet applied). */
static int write_log(const char *path, uint64_t store_tag, uint64_t first_seq,
                     const uint8_t *records, size_t len)
{
    uint8_t h[SIMS_WAL_HEADER_BYTES];
    encode_header(h, store_tag, first_seq);
    sims_outfile f;
    int rc = sims_outfile_open(&f, path);
    if (rc)
        return rc;
    rc = sims_outfile_write(&f, h, sizeof h);
    if (rc == SIMSTORE_OK && len)
        rc = sims_outfile_write(&f, records, len);
    if (rc) {
        sims_outfile_abort(&f);
        return rc;
    }
    return sims_outfile_commit(&f);
}

/* Keep the torn tail data[end, size) of the log at w->path aside, in
 * "<log>.torn-<sequence number>-<time>", published atomically, before it
 * is cut from the log: its bytes were never acknowledged, but an operator
 * may want to see them. */
static int keep_tail_aside(sims_wal *w, const uint8_t *data, size_t end, size_t size)
{
    char stamp[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    char path[4096];
    int rc = SIMSTORE_EEXIST;
    for (unsigned n = 0; rc == SIMSTORE_EEXIST && n < 1000; n++) {
        char suffix[16] = "";
        if (n)
            snprintf(suffix, sizeof suffix, "-%u", n);
        if (snprintf(path, sizeof path, "%s.torn-%" PRIu64 "-%s%s", w->path, w->tail.next_seq,
                     stamp, suffix) >= (int)sizeof path)
            return sims_fail(SIMSTORE_EINVAL, "%s: path too long", w->path);
        struct stat st;
        if (lstat(path, &st) == 0)
            continue;
        sims_outfile f;
        rc = sims_outfile_open(&f, path);
        if (rc == SIMSTORE_OK) {
            rc = sims_outfile_write(&f, data + end, size - end);
            if (rc == SIMSTORE_OK)
                rc = sims_outfile_commit(&f);
            else
                sims_outfile_abort(&f);
        }
    }
    if (rc == SIMSTORE_OK) {
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        size_t n = strlen(name);
        if (n >= sizeof w->tail.aside_name)
            n = sizeof w->tail.aside_name - 1;
        memcpy(w->tail.aside_name, name, n);
        w->tail.aside_name[n] = '\0';
    }
    return rc;
}

static void wal_free(sims_wal *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->pending);
    free(w->spare);
    free(w->path);
    free(w);
}

int sims_wal_open(const char *path, const sims_wal_options *opt, sims_wal_replay_fn fn, void *ctx,
                  sims_wal **out)
{
    *out = NULL;
    size_t group = opt && opt->group_bytes ? opt->group_bytes : SIMS_WAL_DEFAULT_GROUP_BYTES;
    if (group < SIMS_WAL_MIN_GROUP_BYTES || group > SIMS_WAL_DEFAULT_GROUP_BYTES)
        return sims_fail(SIMSTORE_EINVAL, "%s: a group bound of %zu bytes (%u..%u)", path, group,
                         SIMS_WAL_MIN_GROUP_BYTES, SIMS_WAL_DEFAULT_GROUP_BYTES);
    sims_wal *w = calloc(1, sizeof *w);
    if (!w)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory opening %s", path);
    w->fd = -1;
    w->store_tag = opt ? opt->store_tag : 0;
    w->group_bytes = group;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->path = strdup(path);
    if (!w->path) {
        wal_free(w);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory opening %s", path);
    }
    struct stat st;
    int rc = SIMSTORE_OK;
    if (lstat(path, &st) != 0) {
        rc = errno == ENOENT ? write_log(path, w->store_tag, 1, NULL, 0)
                             : sims_fail_errno("%s", path);
    } else if (!S_ISREG(st.st_mode)) {
        rc = sims_fail(SIMSTORE_EINVAL, "%s is not a regular file", path);
    }
    if (rc == SIMSTORE_OK) {
        w->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (w->fd < 0)
            rc = sims_fail_errno("open %s", path);
    }
    sims_map m = {NULL, 0};
    size_t end = 0;
    if (rc == SIMSTORE_OK)
        rc = sims_map_open(path, &m);
    if (rc == SIMSTORE_OK) {
        rc = read_log(w->path, m.data, m.size, w->store_tag, w->group_bytes, fn, ctx, &w->first_seq,
                      &w->records, &w->tail);
        end = (size_t)w->tail.end;
        w->next_seq = w->tail.next_seq;
        w->durable_seq = w->next_seq - 1;
        /* Keep a torn tail aside, then drop it before anything is appended
         * after it. */
        if (rc == SIMSTORE_OK && end < m.size)
            rc = keep_tail_aside(w, m.data, end, m.size);
        if (rc == SIMSTORE_OK && end < m.size) {
            if (ftruncate(w->fd, (off_t)end) != 0)
                rc = sims_fail_errno("truncate %s to %zu bytes", path, end);
            else if (sims_fsync(w->fd) != 0)
                rc = sims_fail_errno("fsync %s", path);
        }
        sims_map_close(&m);
    }
    if (rc == SIMSTORE_OK && lseek(w->fd, (off_t)end, SEEK_SET) < 0)
        rc = sims_fail_errno("seek in %s", path);
    if (rc) {
        wal_free(w);
        return rc;
    }
    w->durable_bytes = end;
    w->file_bytes = end;
    *out = w;
    return SIMSTORE_OK;
}

/* ---- append ----------------------------------------------------------------- */

/* The file's state is no longer known (mu held): nothing more is written
 * to it; the log must be opened again. */
static void break_log(sims_wal *w)
{
    w->broken = 1;
    snprintf(w->failure, sizeof w->failure, "%s (the log must be opened again)",
             simstore_last_error());
}

/* As the leader (w->writing set by the caller, mu held): write and fsync the
 * pending group without the lock. */
static void lead_group(sims_wal *w)
{
    uint8_t *buf = w->pending;
    size_t len = w->pending_len;
    uint64_t last = w->pending_last;
    size_t cap = w->pending_cap;
    w->pending = w->spare;
    w->pending_cap = w->spare_cap;
    w->pending_len = 0;
    pthread_mutex_unlock(&w->mu);
    int rc = sims_write_all(w->fd, buf, len, w->path);
    if (rc == SIMSTORE_OK && sims_fsync(w->fd) != 0)
        rc = sims_fail_errno("fsync %s", w->path);
    pthread_mutex_lock(&w->mu);
    w->spare = buf;
    w->spare_cap = cap;
    if (rc) {
        /* None of the group is acknowledged; nothing more is written until
         * sims_wal_recover() cuts the file back to its durable records. */
        w->failed = 1;
        snprintf(w->failure, sizeof w->failure, "%s", simstore_last_error());
    } else {
        w->durable_seq = last;
        w->durable_bytes += len;
        w->groups++;
    }
    w->writing = 0;
    pthread_cond_broadcast(&w->cv);
}

/* Whether appends stop (mu held). */
static int stopped(const sims_wal *w)
{
    return w->failed || w->broken;
}

/* The error of an append or wait refused because the log stopped (mu
 * held). */
static int stopped_error(const sims_wal *w)
{
    return sims_fail(SIMSTORE_EIO, "%s", w->failure[0] ? w->failure : "writing the log failed");
}

/* Whether the caller may lead the pending group now (mu held). */
static int can_lead(const sims_wal *w)
{
    return !w->writing && !w->resetting && !stopped(w) && w->pending_len > 0;
}

/* One step of waiting on the log (mu held): write the pending group when
 * no one is writing one, else wait for whoever is. */
static void lead_or_wait(sims_wal *w)
{
    if (can_lead(w)) {
        w->writing = 1;
        lead_group(w);
    } else {
        pthread_cond_wait(&w->cv, &w->mu);
    }
}

int sims_wal_enqueue(sims_wal *w, unsigned type, const void *payload, size_t len, uint64_t *seq)
{
    *seq = 0;
    if (type == 0 || type > 255 || len > SIMS_WAL_MAX_PAYLOAD || (len && !payload))
        return sims_fail(SIMSTORE_EINVAL, "%s: a record of type %u and %zu bytes", w->path, type,
                         len);
    size_t n = record_bytes(len);
    if (n > w->group_bytes) /* a torn group must fit the reader's window */
        return sims_fail(SIMSTORE_EINVAL, "%s: a record of %zu bytes exceeds the group bound (%zu)",
                         w->path, n, w->group_bytes);
    pthread_mutex_lock(&w->mu);
    /* Room in the group: write the full one out first (or wait for the
     * leader to take it). */
    while (!stopped(w) && w->pending_len && w->pending_len + n > w->group_bytes)
        lead_or_wait(w);
    if (stopped(w)) {
        int rc = stopped_error(w);
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    if (sims_grow_bytes(&w->pending, &w->pending_cap, w->pending_len, n, 4096)) {
        pthread_mutex_unlock(&w->mu);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a log record");
    }
    uint64_t mine = w->next_seq++;
    encode_record(w->pending + w->pending_len, w->store_tag, mine, type, payload, len);
    w->pending_len += n;
    w->pending_last = mine;
    w->file_bytes += n;
    w->records++;
    pthread_mutex_unlock(&w->mu);
    *seq = mine;
    return SIMSTORE_OK;
}

int sims_wal_wait(sims_wal *w, uint64_t seq)
{
    pthread_mutex_lock(&w->mu);
    if (seq >= w->next_seq) {
        uint64_t next = w->next_seq;
        pthread_mutex_unlock(&w->mu);
        return sims_fail(SIMSTORE_EINVAL,
                         "%s: waiting for record %" PRIu64 ", never appended (next %" PRIu64 ")",
                         w->path, seq, next);
    }
    while (!stopped(w) && w->durable_seq < seq) {
        if (seq >= w->next_seq) /* dropped by sims_wal_recover() meanwhile */
            break;
        lead_or_wait(w);
    }
    int rc = w->durable_seq >= seq ? SIMSTORE_OK
             : stopped(w)          ? stopped_error(w)
                                   : sims_fail(SIMSTORE_EIO,
                                               "%s: record %" PRIu64 " was dropped when "
                                                        "the log recovered from a failed write",
                                               w->path, seq);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int sims_wal_append(sims_wal *w, unsigned type, const void *payload, size_t len, uint64_t *seq)
{
    uint64_t mine;
    if (seq)
        *seq = 0;
    int rc = sims_wal_enqueue(w, type, payload, len, &mine);
    if (rc == SIMSTORE_OK)
        rc = sims_wal_wait(w, mine);
    if (rc == SIMSTORE_OK && seq)
        *seq = mine;
    return rc;
}

uint64_t sims_wal_last_seq(sims_wal *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t last = w->next_seq - 1;
    pthread_mutex_unlock(&w->mu);
    return last;
}

/* ---- reset ------------------------------------------------------------------ */

/* A rewrite of the log (reset, trim) replaces the file at w->path while
 * w->resetting keeps groups from being written. Once the new file is
 * written (rc), open it for appends at `offset` from `whence` and, under
 * w->mu, put it in the old one's place; on failure the log breaks (the old
 * file may or may not have been replaced). Returns with w->mu held, for
 * the caller to set its counters and end_rewrite. */
static int adopt_rewrite(sims_wal *w, int rc, off_t offset, int whence)
{
    int fd = -1;
    if (rc == SIMSTORE_OK) {
        fd = open(w->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || lseek(fd, offset, whence) < 0)
            rc = sims_fail_errno("open %s", w->path);
    }
    pthread_mutex_lock(&w->mu);
    if (rc == SIMSTORE_OK) {
        close(w->fd);
        w->fd = fd;
    } else {
        if (fd >= 0)
            close(fd);
        break_log(w);
    }
    return rc;
}

/* The rewrite is over (w->mu held, released here): wake the waiters. */
static int end_rewrite(sims_wal *w, int rc)
{
    w->resetting = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int sims_wal_reset(sims_wal *w, uint64_t first_seq)
{
    pthread_mutex_lock(&w->mu);
    /* Records enqueued but not yet written belong to the old log: write
     * them out first (their appenders may not be waiting yet). */
    while (!stopped(w) && (w->resetting || w->writing || w->pending_len))
        lead_or_wait(w);
    if (stopped(w)) {
        int rc = stopped_error(w);
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    if (first_seq < w->next_seq || first_seq == 0) {
        uint64_t next = w->next_seq;
        pthread_mutex_unlock(&w->mu);
        return sims_fail(SIMSTORE_EINVAL,
                         "%s: a log starting at %" PRIu64
                         " would reuse sequence numbers (next %" PRIu64 ")",
                         w->path, first_seq, next);
    }
    w->resetting = 1;
    pthread_mutex_unlock(&w->mu);
    int rc = write_log(w->path, w->store_tag, first_seq, NULL, 0);
    rc = adopt_rewrite(w, rc, SIMS_WAL_HEADER_BYTES, SEEK_SET);
    if (rc == SIMSTORE_OK) {
        w->first_seq = first_seq;
        w->next_seq = first_seq;
        w->durable_seq = first_seq - 1;
        w->durable_bytes = SIMS_WAL_HEADER_BYTES;
        w->file_bytes = SIMS_WAL_HEADER_BYTES;
        w->records = 0;
    }
    return end_rewrite(w, rc);
}

/* ---- trim ------------------------------------------------------------------- */

int sims_wal_trim(sims_wal *w, uint64_t applied)
{
    pthread_mutex_lock(&w->mu);
    while (!stopped(w) && (w->resetting || w->writing))
        pthread_cond_wait(&w->cv, &w->mu);
    if (stopped(w)) {
        int rc = stopped_error(w);
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    if (applied > w->durable_seq) {
        uint64_t durable = w->durable_seq;
        pthread_mutex_unlock(&w->mu);
        return sims_fail(SIMSTORE_EINVAL,
                         "%s: trimming through record %" PRIu64 ", but only %" PRIu64
                         " are durable",
                         w->path, applied, durable);
    }
    if (applied < w->first_seq) { /* nothing to drop */
        pthread_mutex_unlock(&w->mu);
        return SIMSTORE_OK;
    }
    /* No group is written meanwhile (appends still enqueue): the file holds
     * exactly the durable records, first_seq .. durable_seq. */
    w->resetting = 1;
    uint64_t first = w->first_seq;
    uint64_t disk_bytes = w->durable_bytes;
    pthread_mutex_unlock(&w->mu);

    sims_map m = {NULL, 0};
    int rc = sims_map_open(w->path, &m);
    size_t keep_from = SIMS_WAL_HEADER_BYTES;
    if (rc == SIMSTORE_OK && m.size < disk_bytes)
        rc = sims_fail(SIMSTORE_EIO, "%s: %zu bytes, %" PRIu64 " written", w->path, m.size,
                       disk_bytes);
    /* Skip the applied records (written by this process: whole, checked). */
    for (uint64_t seq = first; rc == SIMSTORE_OK && seq <= applied; seq++) {
        int64_t len = valid_record_at(m.data, (size_t)disk_bytes, keep_from, seq, w->store_tag);
        if (len < 0)
            rc = SIMS_CORRUPT("%s: record %" PRIu64 " at byte %zu fails its check", w->path, seq,
                              keep_from);
        else
            keep_from += record_bytes((size_t)len);
    }
    size_t tail_len = (size_t)disk_bytes - keep_from;
    if (rc == SIMSTORE_OK)
        rc = write_log(w->path, w->store_tag, applied + 1, m.data + keep_from, tail_len);
    sims_map_close(&m);
    rc = adopt_rewrite(w, rc, 0, SEEK_END);
    if (rc == SIMSTORE_OK) {
        w->first_seq = applied + 1;
        w->records -= applied + 1 - first;
        w->durable_bytes = SIMS_WAL_HEADER_BYTES + tail_len;
        w->file_bytes = w->durable_bytes + w->pending_len;
    }
    return end_rewrite(w, rc);
}

void sims_wal_get_stats(sims_wal *w, sims_wal_stats *out)
{
    pthread_mutex_lock(&w->mu);
    out->first_seq = w->first_seq;
    out->next_seq = w->next_seq;
    out->durable_seq = w->durable_seq;
    out->file_bytes = w->file_bytes;
    out->records = w->records;
    out->groups = w->groups;
    out->tail = w->tail;
    out->failed = w->failed;
    out->broken = w->broken;
    snprintf(out->failure, sizeof out->failure, "%s", w->failure);
    pthread_mutex_unlock(&w->mu);
}

int sims_wal_recover(sims_wal *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->writing || w->resetting)
        pthread_cond_wait(&w->cv, &w->mu);
    int rc = SIMSTORE_OK;
    if (w->broken) {
        rc = stopped_error(w);
    } else if (w->failed) {
        /* Cut the file back to its durable records (a failed write may have
         * left part of its group) and forget the records that were waiting:
         * their appenders got an error. */
        if (ftruncate(w->fd, (off_t)w->durable_bytes) != 0)
            rc = sims_fail_errno("truncate %s to %" PRIu64 " bytes", w->path, w->durable_bytes);
        else if (sims_fsync(w->fd) != 0)
            rc = sims_fail_errno("fsync %s", w->path);
        else if (lseek(w->fd, (off_t)w->durable_bytes, SEEK_SET) < 0)
            rc = sims_fail_errno("seek in %s", w->path);
        if (rc) {
            break_log(w);
        } else {
            w->pending_len = 0;
            w->next_seq = w->durable_seq + 1;
            w->file_bytes = w->durable_bytes;
            w->records = w->durable_seq + 1 - w->first_seq;
            w->failed = 0;
            w->failure[0] = '\0';
        }
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int sims_wal_each_record(sims_wal *w, sims_wal_replay_fn fn, void *ctx)
{
    pthread_mutex_lock(&w->mu);
    while (w->writing || w->resetting)
        pthread_cond_wait(&w->cv, &w->mu);
    /* Held throughout: the file holds the durable records and no more. */
    sims_map m = {NULL, 0};
    int rc = stopped(w) ? stopped_error(w) : sims_map_open(w->path, &m);
    uint64_t seq = w->first_seq;
    size_t p = SIMS_WAL_HEADER_BYTES;
    while (rc == SIMSTORE_OK && seq <= w->durable_seq) {
        int64_t len =
            valid_record_at(m.data, m.size < w->durable_bytes ? m.size : (size_t)w->durable_bytes,
                            p, seq, w->store_tag);
        if (len < 0)
            rc =
                SIMS_CORRUPT("%s: record %" PRIu64 " at byte %zu fails its check", w->path, seq, p);
        else
            rc = fn(ctx, seq, m.data[p + 4], m.data + p + 16, (size_t)len);
        p += record_bytes(len < 0 ? 0 : (size_t)len);
        seq++;
    }
    sims_map_close(&m);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void sims_wal_close(sims_wal *w)
{
    wal_free(w);
}
