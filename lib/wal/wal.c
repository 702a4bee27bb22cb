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
#include "simstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    int writing;   /* a leader is writing and syncing a group */
    int resetting; /* sims_wal_reset is replacing the file */
    int broken;    /* a write or fsync failed */
    uint64_t next_seq;
    uint64_t durable_seq;
    uint64_t first_seq;
    uint64_t file_bytes; /* durable or in flight */
    uint64_t records;
    uint64_t groups;
    uint64_t torn_bytes;
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
    if (le_load64(h + 56) != sims_xxh3_64(h, 56, WAL_HEADER_SEED))
        return SIMS_CORRUPT("%s: the log's header fails its check", path);
    uint32_t version = le_load32(h + 8);
    if (version != SIMS_WAL_VERSION)
        return sims_fail(SIMSTORE_EVERSION, "%s: log version %" PRIu32 " (this build reads %u)",
                         path, version, SIMS_WAL_VERSION);
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

/* The valid record at data[p..size) with sequence number seq: its payload
 * length, or -1 when none starts there. */
static int64_t valid_record_at(const uint8_t *data, size_t size, size_t p, uint64_t seq,
                               uint64_t store_tag)
{
    if (size - p < SIMS_WAL_RECORD_OVERHEAD)
        return -1;
    const uint8_t *r = data + p;
    uint64_t len = le_load32(r);
    if (len > SIMS_WAL_MAX_PAYLOAD || len > size - p - SIMS_WAL_RECORD_OVERHEAD)
        return -1;
    if (r[4] == 0 || r[5] || r[6] || r[7] || le_load64(r + 8) != seq)
        return -1;
    if (le_load64(r + 16 + len) != sims_xxh3_64(r, 16 + len, WAL_RECORD_SEED ^ store_tag))
        return -1;
    return (int64_t)len;
}

/* ---- open ------------------------------------------------------------------- */

static int create_log(const char *path, uint64_t store_tag, uint64_t first_seq)
{
    uint8_t h[SIMS_WAL_HEADER_BYTES];
    encode_header(h, store_tag, first_seq);
    sims_outfile f;
    int rc = sims_outfile_open(&f, path);
    if (rc)
        return rc;
    rc = sims_outfile_write(&f, h, sizeof h);
    if (rc) {
        sims_outfile_abort(&f);
        return rc;
    }
    return sims_outfile_commit(&f);
}

/* Replay data[0, size) and find where the valid records end (*end). */
static int replay(sims_wal *w, const uint8_t *data, size_t size, sims_wal_replay_fn fn, void *ctx,
                  size_t *end)
{
    uint64_t first = 0;
    int rc = check_header(w->path, data, size, w->store_tag, &first);
    if (rc)
        return rc;
    w->first_seq = first;
    uint64_t seq = first;
    size_t p = SIMS_WAL_HEADER_BYTES;
    while (p < size) {
        int64_t len = valid_record_at(data, size, p, seq, w->store_tag);
        if (len < 0) {
            /* Only the last group can be torn: everything before it was
             * fsynced before the group was written (format/wal.md). */
            if (size - p > w->group_bytes)
                return SIMS_CORRUPT("%s: damaged record at byte %zu (sequence number %" PRIu64
                                    "), %zu bytes before the end of the log",
                                    w->path, p, seq, size - p);
            break;
        }
        if (fn && (rc = fn(ctx, seq, data[p + 4], data + p + 16, (size_t)len)) != 0)
            return rc;
        p += record_bytes((size_t)len);
        seq++;
        w->records++;
    }
    *end = p;
    w->next_seq = seq;
    w->durable_seq = seq - 1;
    w->torn_bytes = size - p;
    return SIMSTORE_OK;
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
        rc = errno == ENOENT ? create_log(path, w->store_tag, 1) : sims_fail_errno("%s", path);
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
        rc = replay(w, m.data, m.size, fn, ctx, &end);
        size_t size = m.size;
        sims_map_close(&m);
        /* Drop the torn tail before anything is appended after it. */
        if (rc == SIMSTORE_OK && end < size) {
            if (ftruncate(w->fd, (off_t)end) != 0)
                rc = sims_fail_errno("truncate %s to %zu bytes", path, end);
            else if (sims_fsync(w->fd) != 0)
                rc = sims_fail_errno("fsync %s", path);
        }
    }
    if (rc == SIMSTORE_OK && lseek(w->fd, (off_t)end, SEEK_SET) < 0)
        rc = sims_fail_errno("seek in %s", path);
    if (rc) {
        wal_free(w);
        return rc;
    }
    w->file_bytes = end;
    *out = w;
    return SIMSTORE_OK;
}

/* ---- append ----------------------------------------------------------------- */

static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    uint8_t *p = realloc(*buf, n);
    if (!p)
        return -1;
    *buf = p;
    *cap = n;
    return 0;
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
    if (rc)
        w->broken = 1;
    else {
        w->durable_seq = last;
        w->groups++;
    }
    w->writing = 0;
    pthread_cond_broadcast(&w->cv);
}

/* Whether the caller may lead the pending group now (mu held). */
static int can_lead(const sims_wal *w)
{
    return !w->writing && !w->resetting && !w->broken && w->pending_len > 0;
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
    while (!w->broken && w->pending_len && w->pending_len + n > w->group_bytes) {
        if (can_lead(w)) {
            w->writing = 1;
            lead_group(w);
        } else {
            pthread_cond_wait(&w->cv, &w->mu);
        }
    }
    if (w->broken) {
        pthread_mutex_unlock(&w->mu);
        return sims_fail(SIMSTORE_EIO, "%s: an earlier write failed; reopen the log", w->path);
    }
    if (reserve(&w->pending, &w->pending_cap, w->pending_len + n)) {
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
    while (!w->broken && w->durable_seq < seq) {
        if (can_lead(w)) {
            w->writing = 1;
            lead_group(w);
        } else {
            pthread_cond_wait(&w->cv, &w->mu);
        }
    }
    int broken = w->durable_seq < seq;
    pthread_mutex_unlock(&w->mu);
    if (broken)
        return sims_fail(SIMSTORE_EIO, "%s: writing the log failed", w->path);
    return SIMSTORE_OK;
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

int sims_wal_reset(sims_wal *w, uint64_t first_seq)
{
    pthread_mutex_lock(&w->mu);
    /* Records enqueued but not yet written belong to the old log: write
     * them out first (their appenders may not be waiting yet). */
    while (!w->broken && (w->resetting || w->writing || w->pending_len)) {
        if (can_lead(w)) {
            w->writing = 1;
            lead_group(w);
        } else {
            pthread_cond_wait(&w->cv, &w->mu);
        }
    }
    if (w->broken) {
        pthread_mutex_unlock(&w->mu);
        return sims_fail(SIMSTORE_EIO, "%s: an earlier write failed; reopen the log", w->path);
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
    int rc = create_log(w->path, w->store_tag, first_seq);
    int fd = -1;
    if (rc == SIMSTORE_OK) {
        fd = open(w->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || lseek(fd, SIMS_WAL_HEADER_BYTES, SEEK_SET) < 0)
            rc = sims_fail_errno("open %s", w->path);
    }
    pthread_mutex_lock(&w->mu);
    if (rc == SIMSTORE_OK) {
        close(w->fd);
        w->fd = fd;
        w->first_seq = first_seq;
        w->next_seq = first_seq;
        w->durable_seq = first_seq - 1;
        w->file_bytes = SIMS_WAL_HEADER_BYTES;
        w->records = 0;
    } else {
        if (fd >= 0)
            close(fd);
        /* The old file may or may not have been replaced. */
        w->broken = 1;
    }
    w->resetting = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* ---- trim ------------------------------------------------------------------- */

/* Publish at w->path a log starting at first_seq that holds tail[0, len):
 * whole records, first_seq's first. */
static int write_trimmed(sims_wal *w, uint64_t first_seq, const uint8_t *tail, size_t len)
{
    uint8_t h[SIMS_WAL_HEADER_BYTES];
    encode_header(h, w->store_tag, first_seq);
    sims_outfile f;
    int rc = sims_outfile_open(&f, w->path);
    if (rc)
        return rc;
    rc = sims_outfile_write(&f, h, sizeof h);
    if (rc == SIMSTORE_OK && len)
        rc = sims_outfile_write(&f, tail, len);
    if (rc) {
        sims_outfile_abort(&f);
        return rc;
    }
    return sims_outfile_commit(&f);
}

int sims_wal_trim(sims_wal *w, uint64_t applied)
{
    pthread_mutex_lock(&w->mu);
    while (!w->broken && (w->resetting || w->writing))
        pthread_cond_wait(&w->cv, &w->mu);
    if (w->broken) {
        pthread_mutex_unlock(&w->mu);
        return sims_fail(SIMSTORE_EIO, "%s: an earlier write failed; reopen the log", w->path);
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
    uint64_t disk_bytes = w->file_bytes - w->pending_len;
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
        rc = write_trimmed(w, applied + 1, m.data + keep_from, tail_len);
    sims_map_close(&m);
    int fd = -1;
    if (rc == SIMSTORE_OK) {
        fd = open(w->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 || lseek(fd, 0, SEEK_END) < 0)
            rc = sims_fail_errno("open %s", w->path);
    }
    pthread_mutex_lock(&w->mu);
    if (rc == SIMSTORE_OK) {
        close(w->fd);
        w->fd = fd;
        w->first_seq = applied + 1;
        w->records -= applied + 1 - first;
        w->file_bytes = SIMS_WAL_HEADER_BYTES + tail_len + w->pending_len;
    } else {
        if (fd >= 0)
            close(fd);
        /* The old file may or may not have been replaced. */
        w->broken = 1;
    }
    w->resetting = 0;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return rc;
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
    out->torn_bytes = w->torn_bytes;
    pthread_mutex_unlock(&w->mu);
}

void sims_wal_close(sims_wal *w)
{
    wal_free(w);
}
