/* shrink.c: returning data.mdb's free pages to the file system
 * (simstore_shrink): LMDB's compacting copy of the environment and hard
 * links of the live table files in a new build directory, checked, then
 * swapped in for the store as build --replace swaps one, with the store's
 * write-ahead log (format/store.md, "Shrinking data.mdb"). */
#include "store/store_internal.h"

#include "common/error.h"
#include "common/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t data_mdb_bytes(const char *dir)
{
    char path[PATH_MAX];
    struct stat st;
    if (sims_join_path(path, sizeof path, dir, "data.mdb") != SIMSTORE_OK || stat(path, &st) != 0)
        return 0;
    return (uint64_t)st.st_size;
}

/* Hard-link the tables (and document files) of `count` segments from the
 * store into dir. */
static int link_segments(const simstore *s, const char *dir, const sims_segment_entry *segs,
                         uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        for (uint32_t t = 0; t <= segs[i].table_count; t++) {
            char from[PATH_MAX], to[PATH_MAX];
            int rc;
            if (t == segs[i].table_count) {
                if (!(segs[i].flags & SIMS_SEGMENT_FLAG_DOCFILE))
                    break;
                rc = sims_docfile_path(from, sizeof from, s->path, segs[i].id);
                if (rc == SIMSTORE_OK)
                    rc = sims_docfile_path(to, sizeof to, dir, segs[i].id);
            } else {
                rc = sims_table_path(from, sizeof from, s->path, segs[i].id, t);
                if (rc == SIMSTORE_OK)
                    rc = sims_table_path(to, sizeof to, dir, segs[i].id, t);
            }
            if (rc)
                return rc;
            if (link(from, to) != 0)
                return sims_fail_errno("link %s to %s", from, to);
        }
    return SIMSTORE_OK;
}

/* Hard-link the write-ahead log and the torn tails kept beside it into dir:
 * the rewritten store goes on with the log (its numbering, and anything a
 * server left that the writer's open has not refused). */
static int link_logs(const simstore *s, const char *dir)
{
    DIR *d = opendir(s->path);
    if (!d)
        return sims_fail_errno("open directory %s", s->path);
    const char *torn = SIMS_STORE_WAL_NAME ".torn-";
    int rc = SIMSTORE_OK;
    struct dirent *e;
    while (rc == SIMSTORE_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, SIMS_STORE_WAL_NAME) != 0 &&
            strncmp(e->d_name, torn, strlen(torn)) != 0)
            continue;
        char from[PATH_MAX], to[PATH_MAX];
        rc = sims_join_path(from, sizeof from, s->path, e->d_name);
        if (rc == SIMSTORE_OK)
            rc = sims_join_path(to, sizeof to, dir, e->d_name);
        if (rc == SIMSTORE_OK && link(from, to) != 0)
            rc = sims_fail_errno("link %s to %s", from, to);
    }
    closedir(d);
    return rc;
}

int simstore_shrink(const char *path, uint64_t *bytes_before, uint64_t *bytes_after)
{
    if (bytes_before)
        *bytes_before = 0;
    if (bytes_after)
        *bytes_after = 0;
    /* The writer's open takes the store's writer lock for the whole of it
     * (a server or another writer: SIMSTORE_EBUSY) and checks data.mdb. */
    simstore *s;
    int rc = simstore_open(path, SIMSTORE_OPEN_WRITE, &s);
    if (rc)
        return rc;
    sims_state_record st;
    memset(&st, 0, sizeof st);
    char *work = NULL;
    int work_lock = -1, have_state = 0;
    uint64_t before = data_mdb_bytes(s->path), after = before;
    rc = sims_store_read_committed_state(s, &st);
    have_state = rc == SIMSTORE_OK;
    if (rc == SIMSTORE_OK)
        rc = sims_build_dir_create(s->path, &work, &work_lock);
    if (rc == SIMSTORE_OK)
        rc = link_segments(s, work, st.segments, st.segment_count);
    if (rc == SIMSTORE_OK)
        rc = link_segments(s, work, st.para_segments, st.para_segment_count);
    if (rc == SIMSTORE_OK)
        rc = link_logs(s, work);
    if (rc == SIMSTORE_OK)
        rc = sims_env_copy_compact(&s->env, work);
    if (rc == SIMSTORE_OK)
        rc = sims_fsync_dir(work);
    if (rc == SIMSTORE_OK) {
        /* The copy is read back as any store is, the whole of data.mdb
         * walked, before it replaces the store. */
        simstore *check;
        rc = simstore_open(work, SIMSTORE_OPEN_READONLY | SIMSTORE_OPEN_FULL_WALK, &check);
        if (rc == SIMSTORE_OK) {
            simstore_stats cs;
            rc = simstore_get_stats(check, &cs);
            if (rc == SIMSTORE_OK && cs.generation != st.generation)
                rc = sims_fail(SIMSTORE_ECORRUPT,
                               "%s: the copy of data.mdb holds generation %" PRIu64
                               ", the store %" PRIu64,
                               work, cs.generation, st.generation);
            simstore_close(check);
        }
        if (rc)
            rc = sims_fail_context(rc, "%s: check the compacted copy", s->path);
    }
    if (rc == SIMSTORE_OK) {
        after = data_mdb_bytes(work);
        rc = sims_store_swap_in(work, s->path, s->lock_fd);
        if (rc == SIMSTORE_OK) {
            free(work); /* swapped in, and the old store removed */
            work = NULL;
        }
    }
    if (work) {
        sims_build_dir_remove(work);
        free(work);
    }
    if (work_lock >= 0)
        close(work_lock);
    if (have_state)
        sims_state_record_release(&st);
    simstore_close(s);
    if (rc == SIMSTORE_OK) {
        if (bytes_before)
            *bytes_before = before;
        if (bytes_after)
            *bytes_after = after;
    }
    return rc;
}
