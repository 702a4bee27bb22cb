/* fileio.h: the file operations every layer above the codec shares:
 * atomically published output files (temp, fsync, rename, fsync directory),
 * read-only mappings, directory sync, and the fault-injection points the
 * crash tests use. */
#ifndef SIMS_COMMON_FILEIO_H
#define SIMS_COMMON_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* An output file written to a temporary name beside its final path and
 * published by sims_outfile_commit(). Writes are buffered: appended bytes
 * reach the file in whole 2 MiB pieces at multiples of 2 MiB (the last
 * piece, and one before each sims_outfile_pwrite, excepted; fileio.c says
 * why). After any failure the object only accepts sims_outfile_abort(). */
typedef struct sims_outfile {
    int fd;
    char *tmp_path;
    char *final_path;
    uint8_t *buf;
    size_t buf_used;
    size_t buf_cap;
    uint64_t offset; /* bytes appended so far (the file's logical size) */
} sims_outfile;

/* Create "<final_path>.tmp-XXXXXX" (mode 0644). */
int sims_outfile_open(sims_outfile *f, const char *final_path);
/* Append `n` bytes. */
int sims_outfile_write(sims_outfile *f, const void *data, size_t n);
/* Overwrite bytes already appended, at `offset` (offset + n <= f->offset). */
int sims_outfile_pwrite(sims_outfile *f, const void *data, size_t n, uint64_t offset);
/* Flush, fsync, rename over final_path, fsync the directory, release. */
int sims_outfile_commit(sims_outfile *f);
/* Close and unlink the temporary file; safe on a zeroed or released object. */
void sims_outfile_abort(sims_outfile *f);

/* A read-only mapping of a whole file. An empty file maps to data == NULL,
 * size == 0. */
typedef struct sims_map {
    const uint8_t *data;
    size_t size;
} sims_map;

int sims_map_open(const char *path, sims_map *m);
void sims_map_close(sims_map *m);
/* Ask for 2 MiB page-cache folios, mapped 2 MiB at a time, for the parts of
 * the file that come into the page cache through this mapping
 * (MADV_HUGEPAGE). A hint; never fails. */
void sims_map_advise_huge(const sims_map *m);

/* fsync the directory holding `path` (path itself when it is a directory). */
int sims_fsync_dir(const char *dir_path);
/* The directory holding `path` into dir[size] ("." for a bare name, "/"
 * for a name in the root; trailing slashes of path ignored);
 * SIMSTORE_EINVAL when it does not fit. */
int sims_parent_dir(char *dir, size_t size, const char *path);
/* fsync the parent directory of `path`. */
int sims_fsync_parent(const char *path);

/* "dir/name" into buf. Returns 0, or SIMSTORE_EINVAL (message set) when the
 * result would not fit: paths are never silently truncated. */
int sims_join_path(char *buf, size_t size, const char *dir, const char *name);

/* Remove a file or a directory tree (best effort: keeps going past errors).
 * Returns 0 when `path` no longer exists afterwards. */
int sims_remove_tree(const char *path);

/* The one rule for where scratch files go: `given` when it is set and not
 * empty (an options struct's tmp_dir), else $TMPDIR when set and not empty,
 * else /tmp. */
const char *sims_scratch_dir(const char *given);

/* Create an anonymous scratch file in `dir`: "<dir>/<stem>.tmp-XXXXXX",
 * unlinked at once so that nothing outlives the process, even a crash.
 * *fd_out receives the descriptor (O_CLOEXEC). */
int sims_tmpfile_unlinked(const char *dir, const char *stem, int *fd_out);

/* Read exactly `n` bytes at `offset`, retrying short reads and EINTR; a file
 * that ends first is an I/O error naming `what`. */
int sims_pread_all(int fd, void *buf, size_t n, uint64_t offset, const char *what);

/* Write all of `n` bytes to `fd`, retrying short writes and EINTR. */
int sims_write_all(int fd, const void *data, size_t n, const char *what);

/* ---- Fault injection (tests) --------------------------------------------
 * In builds with SIMS_FAULT_INJECTION=1 (CMake's SIMSTORE_FAULT_INJECTION,
 * on when the tests are built), the environment variable
 * SIMSTORE_FAULT="OP:N[:crash]" makes the N-th call (counting from 1 in this
 * process) of OP fail with EIO, or with ":crash" end the process at once with
 * _exit(86) as a power cut would. OP is one of write, fsync, rename,
 * mdb_commit (the N-th LMDB commit fails before it starts), mdb_committed
 * (the point just after the N-th LMDB commit returned: only ":crash" means
 * something there, a crash right after the commit point; without it the
 * call is only counted), remove (each file or directory sims_remove_tree()
 * removes, and a build directory's marker). Unset, the checks cost one load. In other builds
 * (an installed library) sims_fault_hit() is the constant 0 and nothing
 * reads SIMSTORE_FAULT. */
enum sims_fault_op {
    SIMS_FAULT_WRITE = 0,
    SIMS_FAULT_FSYNC,
    SIMS_FAULT_RENAME,
    SIMS_FAULT_MDB_COMMIT,
    SIMS_FAULT_MDB_COMMITTED,
    SIMS_FAULT_REMOVE,
    SIMS_FAULT_OP_COUNT
};
/* Nonzero when this call of `op` must fail (errno is set to EIO). */
#if SIMS_FAULT_INJECTION
int sims_fault_hit(enum sims_fault_op op);
#else
#define sims_fault_hit(op) ((void)(op), 0)
#endif

/* rename(2) and fsync(2) through the fault points. */
int sims_rename(const char *from, const char *to);
int sims_fsync(int fd);

#endif
