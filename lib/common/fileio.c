/* fileio.c: atomic publish of output files, read-only mappings, directory
 * fsync and fault injection. */
#include "common/fileio.h"

#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Output files reach the file system in whole pieces of this size at
 * offsets that are multiples of it (sims_outfile_write), so that a kernel
 * whose page cache keeps large folios for the file system (Linux 6.16 and
 * later for ext4, among others) holds a freshly written file in 2 MiB
 * folios, which every reader's mapping then maps with one TLB entry each
 * instead of 512: a store's queries touch a few random pages of each file
 * and would otherwise pay a page walk for most of them. Elsewhere it costs
 * nothing. */
#define OUTFILE_PIECE_BYTES ((size_t)2 << 20)
/* The buffer starts at this and doubles, up to a piece, as the file grows:
 * the many small files (a live store's flushes, manifests, logs) never
 * allocate a whole piece. */
#define OUTFILE_FIRST_BUF_BYTES ((size_t)64 << 10)

/* ---- fault points (test builds only) -------------------------------------- */
#if SIMS_FAULT_INJECTION
/* The library's own definition does nothing: common/fault.c, linked into the
 * test programs and the tools of a test build (never into a library),
 * replaces it with the one that reads SIMSTORE_FAULT. So no libsimstore,
 * the installed one included, carries the hooks. */
__attribute__((weak)) int sims_fault_hit(enum sims_fault_op op)
{
    (void)op;
    return 0;
}
#endif

int sims_rename(const char *from, const char *to)
{
    if (sims_fault_hit(SIMS_FAULT_RENAME))
        return -1;
    return rename(from, to);
}

int sims_fsync(int fd)
{
    if (sims_fault_hit(SIMS_FAULT_FSYNC))
        return -1;
    return fsync(fd);
}

int sims_write_all(int fd, const void *data, size_t n, const char *what)
{
    const uint8_t *p = (const uint8_t *)data;
    while (n > 0) {
        if (sims_fault_hit(SIMS_FAULT_WRITE))
            return sims_fail_errno("write %s", what);
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return sims_fail_errno("write %s", what);
        }
        p += w;
        n -= (size_t)w;
    }
    return SIMSTORE_OK;
}

const char *sims_scratch_dir(const char *given)
{
    if (given && *given)
        return given;
    const char *env = getenv("TMPDIR");
    return env && *env ? env : "/tmp";
}

int sims_tmpfile_unlinked(const char *dir, const char *stem, int *fd_out)
{
    char path[PATH_MAX], name[64];
    snprintf(name, sizeof name, "%s.tmp-XXXXXX", stem);
    int rc = sims_join_path(path, sizeof path, dir, name);
    if (rc)
        return rc;
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0)
        return sims_fail_errno("create a scratch file in %s", dir);
    unlink(path);
    *fd_out = fd;
    return SIMSTORE_OK;
}

int sims_pread_all(int fd, void *buf, size_t n, uint64_t offset, const char *what)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(offset + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return sims_fail_errno("read %s", what);
        if (k == 0)
            return sims_fail(SIMSTORE_EIO, "read %s: ends before its end", what);
        got += (size_t)k;
    }
    return SIMSTORE_OK;
}

/* ---- directories --------------------------------------------------------- */

int sims_fsync_dir(const char *dir_path)
{
    int fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sims_fail_errno("open directory %s", dir_path);
    int rc = SIMSTORE_OK;
    if (sims_fsync(fd) != 0)
        rc = sims_fail_errno("fsync directory %s", dir_path);
    close(fd);
    return rc;
}

int sims_parent_dir(char *dir, size_t size, const char *path)
{
    size_t n = strlen(path);
    if (n >= size)
        return sims_fail(SIMSTORE_EINVAL, "path too long: %s", path);
    memcpy(dir, path, n + 1);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash)
        memcpy(dir, ".", 2);
    else if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    return SIMSTORE_OK;
}

int sims_fsync_parent(const char *path)
{
    char dir[PATH_MAX];
    int rc = sims_parent_dir(dir, sizeof dir, path);
    return rc ? rc : sims_fsync_dir(dir);
}

int sims_join_path(char *buf, size_t size, const char *dir, const char *name)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size)
        return sims_fail(SIMSTORE_EINVAL, "path too long: %s/%s", dir, name);
    return SIMSTORE_OK;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (!sims_fault_hit(SIMS_FAULT_REMOVE))
        remove(path);
    return 0;
}

int sims_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return lstat(path, &st) == 0 ? -1 : 0;
}

/* ---- output files -------------------------------------------------------- */

static void outfile_release(sims_outfile *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    free(f->tmp_path);
    free(f->final_path);
    free(f->buf);
    f->tmp_path = f->final_path = NULL;
    f->buf = NULL;
}

int sims_outfile_open(sims_outfile *f, const char *final_path)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    size_t n = strlen(final_path);
    f->final_path = strdup(final_path);
    f->tmp_path = malloc(n + sizeof ".tmp-XXXXXX");
    f->buf = malloc(OUTFILE_FIRST_BUF_BYTES);
    if (!f->final_path || !f->tmp_path || !f->buf) {
        outfile_release(f);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory opening %s", final_path);
    }
    memcpy(f->tmp_path, final_path, n);
    memcpy(f->tmp_path + n, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    f->buf_cap = OUTFILE_FIRST_BUF_BYTES;
    f->fd = mkostemp(f->tmp_path, O_CLOEXEC);
    if (f->fd < 0) {
        int rc = sims_fail_errno("create %s", f->tmp_path);
        outfile_release(f);
        return rc;
    }
    /* mkstemp creates 0600; published files are ordinary readable files. */
    if (fchmod(f->fd, 0644) != 0) {
        int rc = sims_fail_errno("chmod %s", f->tmp_path);
        sims_outfile_abort(f);
        return rc;
    }
    return SIMSTORE_OK;
}

static int outfile_flush(sims_outfile *f)
{
    if (f->buf_used == 0)
        return SIMSTORE_OK;
    int rc = sims_write_all(f->fd, f->buf, f->buf_used, f->tmp_path);
    f->buf_used = 0;
    return rc;
}

/* Room in the buffer for `need` bytes (at most a piece). */
static int outfile_reserve(sims_outfile *f, size_t need)
{
    if (need <= f->buf_cap)
        return SIMSTORE_OK;
    size_t cap = f->buf_cap;
    while (cap < need)
        cap *= 2;
    cap = cap < OUTFILE_PIECE_BYTES ? cap : OUTFILE_PIECE_BYTES;
    uint8_t *b = realloc(f->buf, cap);
    if (!b)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory writing %s", f->tmp_path);
    f->buf = b;
    f->buf_cap = cap;
    return SIMSTORE_OK;
}

int sims_outfile_write(sims_outfile *f, const void *data, size_t n)
{
    const size_t piece = OUTFILE_PIECE_BYTES;
    const uint8_t *p = (const uint8_t *)data;
    while (n > 0) {
        /* The buffer holds the file's bytes from f->offset - buf_used up to
         * the next multiple of a piece, and is written out when full. */
        size_t room = piece - (size_t)((f->offset - f->buf_used) % piece) - f->buf_used;
        if (f->buf_used == 0 && room == piece && n >= piece) {
            /* Whole aligned pieces need no copy. */
            size_t whole = n - n % piece;
            int rc = sims_write_all(f->fd, p, whole, f->tmp_path);
            if (rc)
                return rc;
            f->offset += whole;
            p += whole;
            n -= whole;
            continue;
        }
        size_t take = n < room ? n : room;
        int rc = outfile_reserve(f, f->buf_used + take);
        if (rc)
            return rc;
        memcpy(f->buf + f->buf_used, p, take);
        f->buf_used += take;
        f->offset += take;
        p += take;
        n -= take;
        if (take == room && (rc = outfile_flush(f)) != SIMSTORE_OK)
            return rc;
    }
    return SIMSTORE_OK;
}

int sims_outfile_pwrite(sims_outfile *f, const void *data, size_t n, uint64_t offset)
{
    if (offset > f->offset || n > f->offset - offset)
        return sims_fail(SIMSTORE_EINVAL, "pwrite beyond the end of %s", f->tmp_path);
    int rc = outfile_flush(f);
    if (rc)
        return rc;
    const uint8_t *p = (const uint8_t *)data;
    while (n > 0) {
        if (sims_fault_hit(SIMS_FAULT_WRITE))
            return sims_fail_errno("write %s", f->tmp_path);
        ssize_t w = pwrite(f->fd, p, n, (off_t)offset);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return sims_fail_errno("write %s", f->tmp_path);
        }
        p += w;
        n -= (size_t)w;
        offset += (uint64_t)w;
    }
    return SIMSTORE_OK;
}

int sims_outfile_commit(sims_outfile *f)
{
    int rc = outfile_flush(f);
    if (rc)
        goto fail;
    if (sims_fsync(f->fd) != 0) {
        rc = sims_fail_errno("fsync %s", f->tmp_path);
        goto fail;
    }
    if (close(f->fd) != 0) {
        f->fd = -1;
        rc = sims_fail_errno("close %s", f->tmp_path);
        goto fail;
    }
    f->fd = -1;
    if (sims_rename(f->tmp_path, f->final_path) != 0) {
        rc = sims_fail_errno("rename %s to %s", f->tmp_path, f->final_path);
        goto fail;
    }
    rc = sims_fsync_parent(f->final_path);
    outfile_release(f);
    return rc;
fail:
    sims_outfile_abort(f);
    return rc;
}

void sims_outfile_abort(sims_outfile *f)
{
    if (f->tmp_path)
        unlink(f->tmp_path);
    outfile_release(f);
}

/* ---- mappings ------------------------------------------------------------ */

int sims_map_open(const char *path, sims_map *m)
{
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return sims_fail(SIMSTORE_ENOTFOUND, "%s: no such file", path);
        return sims_fail_errno("open %s", path);
    }
    struct stat st;
    int rc = SIMSTORE_OK;
    if (fstat(fd, &st) != 0) {
        rc = sims_fail_errno("stat %s", path);
    } else if (!S_ISREG(st.st_mode)) {
        rc = sims_fail(SIMSTORE_EINVAL, "%s: not a regular file", path);
    } else if ((uint64_t)st.st_size > SIZE_MAX) {
        rc = sims_fail(SIMSTORE_EFULL, "%s: too large to map", path);
    } else if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            rc = sims_fail_errno("mmap %s", path);
        } else {
            m->data = (const uint8_t *)p;
            m->size = (size_t)st.st_size;
        }
    }
    close(fd);
    return rc;
}

void sims_map_advise_huge(const sims_map *m)
{
#ifdef MADV_HUGEPAGE
    if (m->data && m->size)
        madvise((void *)(uintptr_t)m->data, m->size, MADV_HUGEPAGE);
#else
    (void)m;
#endif
}

void sims_map_close(sims_map *m)
{
    if (m->data)
        munmap((void *)(uintptr_t)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}
