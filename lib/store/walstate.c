/* walstate.c: the store's view of its write-ahead log (format/wal.md, "Live
 * store records"): the changes a server acknowledged that the store's files
 * do not hold yet, read without changing the log. Writers refuse a store
 * whose log holds such changes (simstore_live_recover() applies them);
 * stats, verify and build --replace report or refuse on what it finds. */
#include "store/store_internal.h"

#include "common/error.h"
#include "common/fileio.h"
#include "wal/wal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

typedef struct pending_ctx {
    uint64_t applied;
    sims_store_log *out;
} pending_ctx;

static int count_pending(void *ctx, uint64_t seq, unsigned type, const uint8_t *payload, size_t len)
{
    (void)type;
    (void)payload;
    (void)len;
    pending_ctx *p = (pending_ctx *)ctx;
    if (seq > p->applied) {
        if (p->out->pending == 0)
            p->out->first_pending_seq = seq;
        p->out->pending++;
        p->out->last_pending_seq = seq;
    }
    return 0;
}

int sims_log_read(const char *path, uint64_t store_tag, uint64_t applied, sims_store_log *out)
{
    memset(out, 0, sizeof *out);
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? SIMSTORE_OK : sims_fail_errno("%s", path);
    if (!S_ISREG(st.st_mode))
        return sims_fail(SIMSTORE_ECORRUPT, "%s is not a regular file", path);
    out->exists = 1;
    out->applied_seq = applied;
    pending_ctx p = {applied, out};
    sims_wal_summary sum;
    int rc = sims_wal_read(path, store_tag, 0, count_pending, &p, &sum);
    out->file_bytes = sum.file_bytes ? sum.file_bytes : (uint64_t)st.st_size;
    out->records = sum.records;
    out->first_seq = sum.first_seq;
    out->torn_bytes = sum.tail.bytes;
    out->torn_offset = sum.tail.end;
    /* A log starting after the applied record has lost the records
     * between (format/wal.md): the live store's open refuses it. */
    if (rc == SIMSTORE_OK && sum.records && sum.first_seq > applied + 1)
        rc = SIMS_CORRUPT("%s: the log starts at record %" PRIu64 ", but the store holds the "
                          "changes only up to record %" PRIu64 ": the records between are lost",
                          path, sum.first_seq, applied);
    return rc;
}

int sims_store_read_log(simstore *s, sims_store_log *out)
{
    memset(out, 0, sizeof *out);
    char path[PATH_MAX];
    uint64_t applied = 0;
    int rc = sims_join_path(path, sizeof path, s->path, SIMS_STORE_WAL_NAME);
    if (rc == SIMSTORE_OK)
        rc = sims_store_wal_applied(s, &applied);
    return rc ? rc : sims_log_read(path, s->store_tag, applied, out);
}

int sims_store_refuse_pending_log(simstore *s, const char *what, const char *advice)
{
    sims_store_log log;
    int rc = sims_store_read_log(s, &log);
    if (rc)
        return sims_fail_context(rc,
                                 "%s: %s is refused: whether the write-ahead log holds "
                                 "changes to apply cannot be told",
                                 s->path, what);
    if (log.pending == 0)
        return SIMSTORE_OK;
    return sims_fail(SIMSTORE_EBUSY,
                     "%s: its write-ahead log (%s) holds %" PRIu64 " change%s (records %" PRIu64
                     "..%" PRIu64 ") that a server acknowledged and the store's files do not "
                     "hold yet (the server stopped before writing them): %s is refused until "
                     "they are applied; %s",
                     s->path, SIMS_STORE_WAL_NAME, log.pending, log.pending == 1 ? "" : "s",
                     log.first_pending_seq, log.last_pending_seq, what,
                     advice ? advice
                            : "start simstore serve once, or run simstore add, delete or compact, "
                              "which apply them first (simstore_live_recover())");
}

int sims_store_dir_refuse_pending_log(const char *dir, const char *what, const char *advice)
{
    char path[PATH_MAX];
    int rc = sims_join_path(path, sizeof path, dir, SIMS_STORE_WAL_NAME);
    if (rc)
        return rc;
    struct stat st;
    if (lstat(path, &st) != 0 || (S_ISREG(st.st_mode) && st.st_size <= SIMS_WAL_HEADER_BYTES))
        return SIMSTORE_OK; /* no log, or one without records */
    simstore *s;
    rc = simstore_open(dir, SIMSTORE_OPEN_READONLY, &s);
    if (rc)
        return sims_fail(SIMSTORE_EBUSY,
                         "%s: %s is refused: its write-ahead log (%s, %lld bytes) may hold "
                         "changes a server acknowledged, and the store cannot be read to tell "
                         "(%s); %s",
                         dir, what, SIMS_STORE_WAL_NAME, (long long)st.st_size,
                         simstore_last_error(), advice);
    rc = sims_store_refuse_pending_log(s, what, advice);
    simstore_close(s);
    return rc;
}
