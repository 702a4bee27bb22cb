/* env.c: the LMDB environment of a store. */
#include "lmdb/env.h"

#include "lmdb/lmdbwalk.h"

#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAP_BYTES ((size_t)1 << 40) /* 1 TiB of address space */
#define MIN_MAP_BYTES ((size_t)1 << 30)
#define MAX_MAP_BYTES ((size_t)1 << 46)
#define MAX_READERS 1022
/* The size LMDB 0.9 gives lock.mdb on x86-64 and the other 64-bit Linux
 * targets: a 192-byte header (three cache lines: the transaction info and
 * two mutexes) holding the first reader slot, then MAX_READERS - 1 more
 * slots of one 64-byte cache line each. */
#define LOCK_FILE_BYTES ((off_t)(MAX_READERS - 1) * 64 + 192)
/* A write LMDB could not finish while the file system had less room than
 * this is taken for a full disk (LMDB reports a short write as EIO). */
#define FULL_BELOW_BYTES ((uint64_t)1 << 20)

int sims_mdb_fail(int rc, const char *what)
{
    int code;
    switch (rc) {
    case MDB_NOTFOUND: code = SIMSTORE_ENOTFOUND; break;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID: code = SIMSTORE_ECORRUPT; break;
    case MDB_VERSION_MISMATCH: code = SIMSTORE_EVERSION; break;
    case MDB_MAP_FULL:
    case MDB_READERS_FULL:
    case MDB_TXN_FULL:
    case MDB_DBS_FULL: code = SIMSTORE_EFULL; break;
    case MDB_BAD_VALSIZE: code = SIMSTORE_EINVAL; break;
    case ENOMEM: code = SIMSTORE_ENOMEM; break;
    case ENOENT: code = SIMSTORE_ENOTFOUND; break;
    case EACCES:
    case EROFS: code = SIMSTORE_EREADONLY; break;
    case ENOSPC: code = SIMSTORE_EFULL; break;
    default: code = SIMSTORE_EIO; break;
    }
    return sims_fail(code, "%s: LMDB: %s", what, mdb_strerror(rc));
}

int sims_mdb_write_status(int rc, const char *what)
{
    if (rc == 0)
        return SIMSTORE_OK;
    if (rc == MDB_MAP_FULL)
        return SIMS_MAP_FULL_RETRY;
    return sims_mdb_fail(rc, what);
}

static int open_dbs(sims_env_shared *sh, MDB_env *env, unsigned flags, int rdonly);
static int env_walk(MDB_env *env, const char *dir, sims_lmdb_problem_fn fn, void *ctx,
                    sims_lmdb_summary *summary);

struct sims_env_shared {
    sims_env_shared *next;
    dev_t dev; /* the directory */
    ino_t ino;
    dev_t mdb_dev; /* its data.mdb, which the environment holds open */
    ino_t mdb_ino;
    pid_t pid; /* the process that opened it: LMDB's environments do not
                  cross a fork, so a child opens its own */
    unsigned refs;
    MDB_env *env;
    MDB_dbi meta, docs, fps, pfps;
    int rdonly_env; /* opened MDB_RDONLY: nobody in this process may write */
    int nolock;
    size_t map_bytes;
    pthread_mutex_t resize_mu;
    /* How LMDB's pages are checked (format/store.md, "Trusting LMDB"):
     * lazy: before each read of the query path, the pages it touches;
     * walked: the whole file was walked at open (or never needs to be:
     * created here, or trusted), and nothing more is checked. */
    int lazy;
    int walked;
    pthread_mutex_t lazy_mu; /* the fields below */
    sims_lmdb_lazy *lz;
    sims_map map; /* data.mdb, for the lazy checks */
    /* data.mdb's two meta pages, mapped read-only (NULL when they could not
     * be): read transactions are checked against them (settle). */
    const uint8_t *metas;
    uint64_t psize;
    char dir[PATH_MAX];
    uint64_t walked_pages; /* pages the full walk read */
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static sims_env_shared *registry;

/* Map data.mdb's meta pages (best effort: without them, settle checks
 * nothing, as LMDB itself does not). */
static void metas_map(sims_env_shared *sh)
{
    MDB_stat st;
    mdb_filehandle_t fd;
    if (mdb_env_stat(sh->env, &st) != 0 || st.ms_psize == 0 || mdb_env_get_fd(sh->env, &fd) != 0)
        return;
    void *p = mmap(NULL, 2 * (size_t)st.ms_psize, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return;
    sh->metas = (const uint8_t *)p;
    sh->psize = st.ms_psize;
}

static void metas_unmap(sims_env_shared *sh)
{
    if (sh->metas)
        munmap((void *)sh->metas, 2 * (size_t)sh->psize);
    sh->metas = NULL;
}

/* Whether read transaction txn holds the records of the commit its id
 * names (sims_lmdb_meta_holds). */
static int view_matches(const sims_env_shared *sh, MDB_txn *txn)
{
    MDB_stat st[2];
    if (!sh->metas || mdb_stat(txn, 0, &st[0]) != 0 || mdb_stat(txn, 1, &st[1]) != 0)
        return 1;
    sims_lmdb_db_counts c[2];
    for (int i = 0; i < 2; i++)
        c[i] = (sims_lmdb_db_counts){st[i].ms_depth, st[i].ms_branch_pages, st[i].ms_leaf_pages,
                                     st[i].ms_overflow_pages, st[i].ms_entries};
    return sims_lmdb_meta_holds(sh->metas, sh->psize, (uint64_t)mdb_txn_id(txn), c);
}

/* mdb_txn_renew, once more after adopting a map another process grew. */
static int renew_txn(MDB_env *env, MDB_txn *txn)
{
    int mrc = mdb_txn_renew(txn);
    if (mrc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(env, 0);
        mrc = mdb_txn_renew(txn);
    }
    return mrc;
}

/* How often a read transaction begins again before settle gives up: each
 * miss needs writers to commit twice within a few instructions of LMDB's. */
#define SETTLE_ATTEMPTS 1000

/* A read transaction that just began (or was renewed), made to hold the
 * commit its id names. LMDB 0.9 can hand out a newer commit's state under an
 * older id (sims_lmdb_meta_holds); simstore ties what it loads to ids (the
 * store's snapshots, the lazy checks), so it begins again until the two
 * agree. On failure txn is reset. */
static int settle(sims_env_shared *sh, MDB_txn *txn)
{
    for (unsigned attempt = 0;; attempt++) {
        if (view_matches(sh, txn))
            return SIMSTORE_OK;
        mdb_txn_reset(txn);
        if (attempt == SETTLE_ATTEMPTS)
            return sims_fail(SIMSTORE_EBUSY,
                             "%s: data.mdb kept changing while a read transaction began "
                             "(%u attempts)",
                             sh->dir, attempt + 1);
        if (attempt)
            sched_yield();
        int mrc = renew_txn(sh->env, txn);
        if (mrc)
            return sims_mdb_fail(mrc, "renew read transaction");
    }
}

static int lazy_enter(sims_env_shared *sh, MDB_txn **txn, int renew);

static int open_dbs(sims_env_shared *sh, MDB_env *env, unsigned flags, int rdonly)
{
    MDB_txn *txn;
    unsigned create = (flags & SIMS_ENV_CREATE) ? MDB_CREATE : 0;
    /* A lazily checked opener reads the main database in a read
     * transaction whose snapshot it has checked first. */
    int rc = mdb_txn_begin(env, NULL, rdonly || sh->lazy ? MDB_RDONLY : 0, &txn);
    if (rc)
        return sims_mdb_fail(rc, "begin transaction");
    if ((rdonly || sh->lazy) && (rc = settle(sh, txn)) != SIMSTORE_OK) {
        mdb_txn_abort(txn);
        return rc;
    }
    if (sh->lazy && (rc = lazy_enter(sh, &txn, 0)) != SIMSTORE_OK)
        return rc;
    if ((rc = mdb_dbi_open(txn, "meta", create, &sh->meta)) ||
        (rc = mdb_dbi_open(txn, "docs", create, &sh->docs)) ||
        (rc = mdb_dbi_open(txn, "fps", create | MDB_DUPSORT, &sh->fps))) {
        mdb_txn_abort(txn);
        if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE)
            return sims_fail(SIMSTORE_ECORRUPT, "not a simstore store (LMDB databases missing)");
        return sims_mdb_fail(rc, "open databases");
    }
    /* The paragraph index exists only in stores built with one. */
    unsigned pcreate = (flags & SIMS_ENV_CREATE) && (flags & SIMS_ENV_PARAGRAPHS) ? MDB_CREATE : 0;
    rc = mdb_dbi_open(txn, "pfps", pcreate | MDB_DUPSORT, &sh->pfps);
    if (rc == MDB_NOTFOUND) {
        sh->pfps = 0;
    } else if (rc) {
        mdb_txn_abort(txn);
        if (rc == MDB_INCOMPATIBLE)
            return sims_fail(SIMSTORE_ECORRUPT, "the paragraph database has the wrong flags");
        return sims_mdb_fail(rc, "open databases");
    }
    rc = mdb_txn_commit(txn);
    if (rc)
        return sims_mdb_fail(rc, "open databases");
    return SIMSTORE_OK;
}

/* Open a new MDB_env: >0 is an errno-style LMDB failure of mdb_env_open (the
 * caller may retry another way), <0 a SIMSTORE code. */
static int check_metas_once(void *path)
{
    sims_map map;
    if (sims_map_open((const char *)path, &map) != SIMSTORE_OK)
        return SIMSTORE_OK; /* no file yet, or unreadable: LMDB says which */
    int rc = sims_lmdb_check_metas(map.data, map.size, NULL, NULL);
    /* A meta page a writer is rewriting can look damaged: look again, for
     * as long as the bytes change (the meta pages lie within the first
     * 128 KiB at any page size). */
    if (rc != SIMSTORE_OK) {
        size_t head = map.size < (size_t)128 << 10 ? map.size : (size_t)128 << 10;
        sims_retry_saw(sims_xxh3_64(map.data, head, 0));
        if (rc != SIMS_ERETRY)
            rc = sims_retry_or_fail(rc);
    }
    sims_map_close(&map);
    return rc;
}

/* The meta pages, before mdb_env_open reads them (lmdbwalk.h): LMDB adopts
 * the newer meta page's page size and last page without question, and a
 * damaged one sends its first reads outside the file. A writer's commit can
 * be mid-write while we read: a failure is looked at again (sims_retry). */
static int check_metas(const char *dir)
{
    char path[PATH_MAX];
    int rc = sims_join_path(path, sizeof path, dir, "data.mdb");
    if (rc)
        return rc;
    return sims_retry(check_metas_once, path);
}

/* LMDB maps lock.mdb shared and writable and keeps its reader table there,
 * but only ftruncates the file to size: on a full file system the first
 * store to a page not yet allocated is SIGBUS, in a writer or in any reader
 * that takes a slot there. Allocate the whole file for real (posix_fallocate
 * allocates only what is missing) so that a full disk is an error here
 * instead. A lock file this process cannot write is LMDB's business: it
 * falls back to a read-only open or says why. */
static int allocate_lock_file(const char *dir)
{
    char path[PATH_MAX];
    int rc = sims_join_path(path, sizeof path, dir, "lock.mdb");
    if (rc)
        return rc;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return SIMSTORE_OK;
    struct stat st;
    off_t bytes = LOCK_FILE_BYTES;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > bytes)
        bytes = st.st_size;
    int err = posix_fallocate(fd, 0, bytes);
    close(fd);
    if (err == ENOSPC || err == EDQUOT)
        return sims_fail(SIMSTORE_EFULL,
                         "%s: cannot allocate lock.mdb, LMDB's lock file (%lld bytes): %s", dir,
                         (long long)bytes, strerror(err));
    return SIMSTORE_OK; /* other failures (no support): LMDB works as before */
}

/* The largest map of MAP_BYTES, MAP_BYTES / 4, ... MIN_MAP_BYTES that the
 * address space has room for now, probed before mdb_env_open rather than
 * learnt from its failure: a first opener whose mdb_env_open fails after it
 * has set up lock.mdb leaves the transaction id there at 0, and a process
 * that opened the store meanwhile does not set it again. Its reads would then
 * never settle, and a writer there would commit under an old transaction id
 * (seen under ThreadSanitizer, whose address space has little room for a
 * 1 TiB map; a limit on address space, ulimit -v, does the same). */
static size_t map_bytes_room(void)
{
    size_t bytes = MAP_BYTES;
    for (; bytes > MIN_MAP_BYTES; bytes /= 4) {
        void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            munmap(p, bytes);
            break;
        }
    }
    return bytes;
}

static int env_try_open(sims_env_shared *sh, const char *dir, unsigned flags, unsigned mdb_flags)
{
    if (!(flags & (SIMS_ENV_CREATE | SIMS_ENV_TRUST))) {
        int crc = check_metas(dir);
        if (crc)
            return sims_fail_context(crc, "%s", dir);
    }
    if (!(mdb_flags & MDB_NOLOCK)) {
        int arc = allocate_lock_file(dir);
        if (arc)
            return arc;
    }
    int rc;
    /* Address space only; fall back to smaller maps where it is limited. */
    for (sh->map_bytes = map_bytes_room();; sh->map_bytes /= 4) {
        if ((rc = mdb_env_create(&sh->env)) != 0)
            return sims_mdb_fail(rc, "create LMDB environment");
        mdb_env_set_maxdbs(sh->env, 4);
        mdb_env_set_maxreaders(sh->env, MAX_READERS);
        mdb_env_set_mapsize(sh->env, sh->map_bytes);
        rc = mdb_env_open(sh->env, dir, mdb_flags, 0644);
        if (rc != ENOMEM || sh->map_bytes <= MIN_MAP_BYTES)
            break;
        mdb_env_close(sh->env);
    }
    if (rc) {
        mdb_env_close(sh->env);
        sh->env = NULL;
        return rc;
    }
    MDB_envinfo info;
    if (mdb_env_info(sh->env, &info) == 0 && info.me_mapsize > sh->map_bytes)
        sh->map_bytes = info.me_mapsize;
    metas_unmap(sh);
    metas_map(sh);
    /* Reader slots of processes that died holding read transactions (one
     * per open simstore_query) stay taken until every process has closed the
     * environment: free them, or enough killed readers fill the table and
     * every new reader gets MDB_READERS_FULL (test_concurrency
     * readers__killed_leave_no_slots). */
    if (!(mdb_flags & MDB_NOLOCK)) {
        int dead;
        (void)mdb_reader_check(sh->env, &dead);
    }
    /* LMDB has read only its meta pages so far: check the B-trees it will
     * read before open_dbs touches them (lmdbwalk.h): all of them now, or
     * each read's pages before it (lazy; open_dbs checks the first). */
    sh->lazy = (flags & SIMS_ENV_LAZY) && !(flags & (SIMS_ENV_CREATE | SIMS_ENV_TRUST));
    sh->walked = !sh->lazy;
    snprintf(sh->dir, sizeof sh->dir, "%s", dir);
    if (sh->lazy && !sh->lz && (rc = sims_lmdb_lazy_new(&sh->lz)) != SIMSTORE_OK) {
        mdb_env_close(sh->env);
        sh->env = NULL;
        return rc;
    }
    if (!sh->lazy && !(flags & (SIMS_ENV_CREATE | SIMS_ENV_TRUST))) {
        sims_lmdb_summary sum;
        memset(&sum, 0, sizeof sum);
        rc = env_walk(sh->env, dir, NULL, NULL, &sum);
        sh->walked_pages += sum.used_pages ? sum.used_pages : sum.file_pages;
        if (rc) {
            rc = sims_fail_context(rc, "%s", dir);
            mdb_env_close(sh->env);
            sh->env = NULL;
            return rc;
        }
    }
    rc = open_dbs(sh, sh->env, flags, (mdb_flags & MDB_RDONLY) != 0);
    if (rc) {
        mdb_env_close(sh->env);
        sh->env = NULL;
    }
    return rc;
}

static void env_copy(sims_env *e, sims_env_shared *sh, int readonly)
{
    e->shared = sh;
    e->env = sh->env;
    e->meta = sh->meta;
    e->docs = sh->docs;
    e->fps = sh->fps;
    e->pfps = sh->pfps;
    e->readonly = readonly || sh->rdonly_env;
    e->nolock = sh->nolock;
}

/* A writer could not open the environment for writing (EACCES, EPERM,
 * EROFS): name the file that refuses and say what would allow writes. */
static int explain_unwritable(const char *dir, int mdb_rc)
{
    static const char *const names[] = {"data.mdb", "lock.mdb"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[PATH_MAX];
        if (sims_join_path(path, sizeof path, dir, names[i]) != SIMSTORE_OK)
            break;
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            continue;
        }
        if (errno == EPERM)
            return sims_fail(SIMSTORE_EREADONLY,
                             "%s is immutable or append-only (see lsattr), so the store "
                             "cannot be changed; queries still work. To change it, clear the "
                             "attribute as root: chattr -i -a %s",
                             path, path);
        if (errno == EACCES)
            return sims_fail(SIMSTORE_EREADONLY,
                             "%s is read-only for this user, so the store cannot be changed; "
                             "queries still work. To change it, make it writable (chmod u+w %s) "
                             "or run as its owner",
                             path, path);
        if (errno == EROFS)
            return sims_fail(SIMSTORE_EREADONLY,
                             "%s is on a read-only file system, so the store cannot be "
                             "changed; queries still work. Copy it to a writable place to "
                             "change it",
                             path);
    }
    return sims_mdb_fail(mdb_rc, dir);
}

/* Free what a shared environment holds besides its LMDB environment. */
static void shared_free(sims_env_shared *sh)
{
    pthread_mutex_destroy(&sh->resize_mu);
    pthread_mutex_destroy(&sh->lazy_mu);
    sims_lmdb_lazy_free(sh->lz);
    sims_map_close(&sh->map);
    metas_unmap(sh);
    free(sh);
}

/* Whether dir is still the directory st describes. */
static int same_dir(const char *dir, const struct stat *st)
{
    struct stat now;
    return stat(dir, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino;
}

int sims_env_open(sims_env *e, const char *dir, unsigned flags)
{
    memset(e, 0, sizeof *e);
    int readonly = (flags & SIMS_ENV_READONLY) != 0;
    unsigned replaced = 0;
again:;
    struct stat st;
    if (stat(dir, &st) != 0)
        return sims_fail_errno("%s", dir);
    /* The same store: the same directory and the same data.mdb. The
     * directory alone is not enough: one removed (a store replaced by
     * build --replace) frees its inode number for the next, while an
     * environment of the old one may still be open here; its data.mdb,
     * held open, keeps its number. */
    char mdb_path[PATH_MAX];
    struct stat ms;
    int have_mdb = snprintf(mdb_path, sizeof mdb_path, "%s/data.mdb", dir) < (int)sizeof mdb_path &&
                   stat(mdb_path, &ms) == 0;
    pthread_mutex_lock(&registry_mu);
    for (sims_env_shared *sh = registry; sh; sh = sh->next) {
        if (sh->dev == st.st_dev && sh->ino == st.st_ino && have_mdb && sh->mdb_dev == ms.st_dev &&
            sh->mdb_ino == ms.st_ino && sh->pid == getpid()) {
            int rc = SIMSTORE_OK;
            if (!readonly && sh->rdonly_env)
                rc = sims_fail(SIMSTORE_EREADONLY,
                               "%s: already open read-only in this process (read-only files)", dir);
            else
                sh->refs++;
            pthread_mutex_unlock(&registry_mu);
            if (rc == SIMSTORE_OK)
                env_copy(e, sh, readonly);
            /* An environment opened with lazy checks, shared by an opener
             * that wants the whole file walked (a writer). */
            if (rc == SIMSTORE_OK && !(flags & (SIMS_ENV_LAZY | SIMS_ENV_TRUST)) &&
                (rc = sims_env_full_walk(e)) != SIMSTORE_OK)
                sims_env_close(e);
            return rc;
        }
    }
    sims_env_shared *sh = calloc(1, sizeof *sh);
    if (!sh) {
        pthread_mutex_unlock(&registry_mu);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    sh->dev = st.st_dev;
    sh->ino = st.st_ino;
    sh->refs = 1;
    pthread_mutex_init(&sh->resize_mu, NULL);
    pthread_mutex_init(&sh->lazy_mu, NULL);
    /* Open read-write even for readers, so that a writer later in this
     * process can share the environment. MDB_NOTLS: read transactions belong
     * to query objects, not threads. */
    int rc = env_try_open(sh, dir, flags, MDB_NOTLS);
    if (rc > 0 && readonly && (rc == EACCES || rc == EROFS || rc == EPERM)) {
        /* EPERM: an immutable data.mdb (chattr +i), readable as it is. */
        sh->rdonly_env = 1;
        rc = env_try_open(sh, dir, flags, MDB_NOTLS | MDB_RDONLY);
        if (rc > 0 && (rc == EACCES || rc == EROFS || rc == EPERM)) {
            /* A read-only copy of a store: no writer can exist, so LMDB's
             * lock table is not needed. */
            sh->nolock = 1;
            rc = env_try_open(sh, dir, flags, MDB_NOTLS | MDB_RDONLY | MDB_NOLOCK);
        }
    }
    /* The store was swapped in while LMDB opened it (build --replace, a
     * shrink): its lock file and data.mdb may be of two stores. Their reads
     * never settle; or, where no other process had the old store's lock
     * file open and LMDB set it up from the new data.mdb, they settle and
     * never see a writer's commit. Open it again. */
    if (!same_dir(dir, &st) && replaced++ < 8) {
        pthread_mutex_unlock(&registry_mu);
        if (sh->env)
            mdb_env_close(sh->env);
        shared_free(sh);
        sims_error_clear();
        goto again;
    }
    if (rc > 0 && !readonly && (rc == EACCES || rc == EROFS || rc == EPERM))
        rc = explain_unwritable(dir, rc);
    else if (rc > 0)
        rc = sims_mdb_fail(rc, dir);
    if (rc) {
        pthread_mutex_unlock(&registry_mu);
        shared_free(sh);
        return rc;
    }
    mdb_filehandle_t fd;
    struct stat fs;
    if (mdb_env_get_fd(sh->env, &fd) == 0 && fstat(fd, &fs) == 0) {
        sh->mdb_dev = fs.st_dev;
        sh->mdb_ino = fs.st_ino;
    }
    sh->pid = getpid();
    sh->next = registry;
    registry = sh;
    pthread_mutex_unlock(&registry_mu);
    env_copy(e, sh, readonly);
    return SIMSTORE_OK;
}

void sims_env_close(sims_env *e)
{
    sims_env_shared *sh = e->shared;
    e->shared = NULL;
    e->env = NULL;
    if (!sh)
        return;
    pthread_mutex_lock(&registry_mu);
    if (--sh->refs == 0) {
        for (sims_env_shared **p = &registry; *p; p = &(*p)->next) {
            if (*p == sh) {
                *p = sh->next;
                break;
            }
        }
        mdb_env_close(sh->env);
        shared_free(sh);
    }
    pthread_mutex_unlock(&registry_mu);
}

/* Whether the file system holding `dir` is (all but) full, for the user we
 * run as (root may use the blocks reserved for it). */
static int file_system_full(const char *dir)
{
    struct statvfs vfs;
    if (statvfs(dir, &vfs) != 0)
        return 0;
    uint64_t blocks = geteuid() == 0 ? (uint64_t)vfs.f_bfree : (uint64_t)vfs.f_bavail;
    return blocks * (uint64_t)vfs.f_frsize < FULL_BELOW_BYTES;
}

/* A write transaction failed with `code` (message set): name the store, and
 * when its file system is full say so. LMDB turns a write that the full disk
 * cut short into EIO (mdb_page_flush), which alone would read as a failing
 * disk. */
static int write_failed(sims_env *e, int code)
{
    const char *dir = NULL;
    if (code != SIMSTORE_EIO && code != SIMSTORE_EFULL)
        return code;
    if (mdb_env_get_path(e->env, &dir) != 0 || !dir)
        return code;
    if (file_system_full(dir)) {
        char said[256];
        snprintf(said, sizeof said, "%s", simstore_last_error());
        return sims_fail(SIMSTORE_EFULL, "%s: data.mdb: %s (%s)", dir, strerror(ENOSPC), said);
    }
    return sims_fail_context(code, "%s", dir);
}

int sims_env_write(sims_env *e, sims_write_fn fn, void *ctx)
{
    if (e->readonly)
        return sims_fail(SIMSTORE_EREADONLY, "store opened read-only");
    for (;;) {
        MDB_txn *txn;
        int rc = mdb_txn_begin(e->env, NULL, 0, &txn);
        if (rc)
            return write_failed(e, sims_mdb_fail(rc, "begin write transaction"));
        rc = fn(txn, ctx);
        if (rc == SIMSTORE_OK) {
            if (sims_fault_hit(SIMS_FAULT_MDB_COMMIT)) {
                mdb_txn_abort(txn);
                return sims_fail(SIMSTORE_EIO, "commit: injected failure");
            }
            int mrc = mdb_txn_commit(txn);
            if (mrc == 0) {
                /* Tests: SIMSTORE_FAULT=mdb_committed:N:crash dies here, just
                 * past the commit point (a failure here is not injected: the
                 * commit has happened). */
                (void)sims_fault_hit(SIMS_FAULT_MDB_COMMITTED);
                return SIMSTORE_OK;
            }
            if (mrc != MDB_MAP_FULL)
                return write_failed(e, sims_mdb_fail(mrc, "commit"));
            rc = SIMS_MAP_FULL_RETRY;
        } else {
            mdb_txn_abort(txn);
        }
        if (rc != SIMS_MAP_FULL_RETRY)
            return write_failed(e, rc);
        /* Only reached past 1 TiB: growing remaps, which is only safe with no
         * read transaction of this process in flight. */
        sims_env_shared *sh = e->shared;
        if (sh->map_bytes >= MAX_MAP_BYTES)
            return sims_fail(SIMSTORE_EFULL, "LMDB map reached %zu bytes", sh->map_bytes);
        sh->map_bytes *= 2;
        int mrc = mdb_env_set_mapsize(e->env, sh->map_bytes);
        if (mrc)
            return sims_mdb_fail(mrc, "grow the LMDB map");
    }
}

typedef struct env_walk_ctx {
    MDB_env *env;
    const char *path; /* data.mdb */
    sims_lmdb_problem_fn fn;
    void *ctx;
    sims_lmdb_summary *summary;
} env_walk_ctx;

/* One walk of the snapshot a new read transaction pins: a writer cannot
 * recycle its pages while the walk reads them, but a writer committing twice
 * meanwhile overwrites its meta page (SIMS_ERETRY from the walk). */
static int env_walk_once(void *arg)
{
    env_walk_ctx *w = (env_walk_ctx *)arg;
    MDB_txn *txn;
    int mrc = mdb_txn_begin(w->env, NULL, MDB_RDONLY, &txn);
    if (mrc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(w->env, 0);
        mrc = mdb_txn_begin(w->env, NULL, MDB_RDONLY, &txn);
    }
    if (mrc)
        return sims_mdb_fail(mrc, "begin read transaction");
    sims_map map;
    int rc = sims_map_open(w->path, &map);
    if (rc == SIMSTORE_OK) {
        rc = sims_lmdb_walk(map.data, map.size, (uint64_t)mdb_txn_id(txn), w->fn, w->ctx,
                            w->summary);
        sims_map_close(&map);
    }
    if (rc == SIMS_ERETRY)
        sims_retry_saw((uint64_t)mdb_txn_id(txn));
    mdb_txn_abort(txn);
    return rc;
}

/* The name of the data.mdb that env has open: /proc/self/fd/N, so that the
 * checks read LMDB's file even when another store has been swapped in at
 * dir since (build --replace, a shrink); dir/data.mdb without /proc. */
static int env_data_path(MDB_env *env, const char *dir, char path[PATH_MAX])
{
    mdb_filehandle_t fd;
    if (mdb_env_get_fd(env, &fd) == 0 && snprintf(path, PATH_MAX, "/proc/self/fd/%d", fd) > 0 &&
        access(path, R_OK) == 0)
        return SIMSTORE_OK;
    return sims_join_path(path, PATH_MAX, dir, "data.mdb");
}

/* Walk data.mdb from a new transaction, again while writers overwrite the
 * meta page the walk pinned (sims_retry). */
static int env_walk(MDB_env *env, const char *dir, sims_lmdb_problem_fn fn, void *ctx,
                    sims_lmdb_summary *summary)
{
    char path[PATH_MAX];
    int rc = env_data_path(env, dir, path);
    if (rc)
        return rc;
    env_walk_ctx w = {env, path, fn, ctx, summary};
    return sims_retry(env_walk_once, &w);
}

/* Load txn's snapshot into the lazy checks (lazy_mu held): map data.mdb
 * again first when it has grown. */
static int lazy_load_locked(sims_env_shared *sh, MDB_txn *txn)
{
    uint64_t id = (uint64_t)mdb_txn_id(txn);
    if (sims_lmdb_lazy_txnid(sh->lz) != id || !sh->map.data) {
        mdb_filehandle_t fd;
        struct stat st;
        if (!sh->map.data || (mdb_env_get_fd(sh->env, &fd) == 0 && fstat(fd, &st) == 0 &&
                              (uint64_t)st.st_size != (uint64_t)sh->map.size)) {
            char path[PATH_MAX];
            int rc = env_data_path(sh->env, sh->dir, path);
            sims_map_close(&sh->map);
            memset(&sh->map, 0, sizeof sh->map);
            if (rc == SIMSTORE_OK)
                rc = sims_map_open(path, &sh->map);
            if (rc)
                return rc;
        }
    }
    int rc = sims_lmdb_lazy_snapshot(sh->lz, sh->map.data, sh->map.size, id);
    if (rc && rc != SIMS_ERETRY)
        rc = sims_fail_context(rc, "%s", sh->dir);
    return rc;
}

/* How often, at the least, a reader begins its transaction again when
 * writers commit twice while it checks the snapshot (after yielding the
 * CPU, then sleeping: sims_retry_pause), before it gives up with
 * SIMSTORE_EBUSY; past them it goes on while writers commit, for up to
 * SIMS_RETRY_SECONDS in all. A loaded
 * machine with busy writers needs a few dozen; under AddressSanitizer a
 * check can outlast several commits, and the reader waits for a pause. */
#define LAZY_ENTER_ATTEMPTS 64

/* After a read transaction began (or was renewed): check its snapshot's
 * meta pages, free list and main database before LMDB reads a tree (it
 * reads the main database for the first cursor on a named database). A
 * writer that committed twice since the transaction began has overwritten
 * its meta page: begin again. On failure the transaction is aborted (or,
 * renew, reset). */
static int lazy_enter(sims_env_shared *sh, MDB_txn **txn, int renew)
{
    int rc = SIMSTORE_OK;
    double start = sims_retry_clock();
    uint64_t last = 0;
    unsigned attempt = 0;
    for (;; attempt++) {
        uint64_t id = (uint64_t)mdb_txn_id(*txn);
        pthread_mutex_lock(&sh->lazy_mu);
        rc = sh->walked ? SIMSTORE_OK : lazy_load_locked(sh, *txn);
        pthread_mutex_unlock(&sh->lazy_mu);
        /* Past the first attempts, only while writers commit: a snapshot
         * that stays put and still fails the check is damaged. */
        int moved = attempt > 0 && id != last;
        last = id;
        if (rc != SIMS_ERETRY || !sims_retry_more(attempt + 1, LAZY_ENTER_ATTEMPTS, start, moved))
            break;
        /* Begin again on a fresh time slice (later and later while writers
         * commit): the check failed because writers committed twice while
         * it ran. */
        if (moved)
            sims_retry_pause(attempt + 1);
        else
            sched_yield();
        mdb_txn_reset(*txn);
        int mrc = renew_txn(sh->env, *txn);
        if (mrc) {
            rc = sims_mdb_fail(mrc, "renew read transaction");
            break;
        }
        if ((rc = settle(sh, *txn)) != SIMSTORE_OK)
            break;
    }
    if (rc == SIMS_ERETRY)
        rc = sims_fail_context(SIMSTORE_EBUSY,
                               "%s: data.mdb kept changing while it was checked (%u attempts "
                               "in %.3f s)",
                               sh->dir, attempt + 1, sims_retry_clock() - start);
    if (rc) {
        if (renew) {
            mdb_txn_reset(*txn);
        } else {
            mdb_txn_abort(*txn);
            *txn = NULL;
        }
    }
    return rc;
}

static int db_index(const sims_env_shared *sh, MDB_dbi dbi)
{
    if (dbi == sh->meta)
        return SIMS_LMDB_META;
    if (dbi == sh->docs)
        return SIMS_LMDB_DOCS;
    if (dbi == sh->fps)
        return SIMS_LMDB_FPS;
    if (sh->pfps && dbi == sh->pfps)
        return SIMS_LMDB_PFPS;
    return -1;
}

/* sims_env_check_read's fn, and its failure told apart from the checks'. */
typedef struct env_value_call {
    sims_lmdb_value_fn fn;
    void *ctx;
    int rc;
} env_value_call;

static int env_value(void *ctx, const uint8_t *value, size_t len)
{
    env_value_call *c = (env_value_call *)ctx;
    c->rc = c->fn(c->ctx, value, len);
    return c->rc ? 1 : 0;
}

/* The one frame of a lazy check, under the checks' lock: the snapshot
 * loaded, then the check alone (fn NULL) or the check and the read. */
static int env_lazy(const sims_env *e, MDB_txn *txn, MDB_dbi dbi, const void *key, size_t key_len,
                    int read, sims_lmdb_value_fn fn, void *ctx, int *done, int *found)
{
    sims_env_shared *sh = e->shared;
    if (!sh || !sh->lazy)
        return SIMSTORE_OK;
    int db = db_index(sh, dbi);
    if (db < 0)
        return sims_fail(SIMSTORE_EINVAL, "no lazy checks for LMDB database %u", (unsigned)dbi);
    pthread_mutex_lock(&sh->lazy_mu);
    int rc = SIMSTORE_OK;
    if (!sh->walked) {
        /* Another thread may have loaded its own snapshot meanwhile. */
        rc = lazy_load_locked(sh, txn);
        env_value_call call = {fn, ctx, SIMSTORE_OK};
        if (rc == SIMSTORE_OK)
            rc = fn ? sims_lmdb_lazy_read(sh->lz, db, key, key_len, read, env_value, &call, found)
                    : sims_lmdb_lazy_check(sh->lz, db, key, key_len, read);
        if (call.rc) /* fn's failure, its message set */
            rc = call.rc;
        else if (rc && rc != SIMS_ERETRY)
            rc = sims_fail_context(rc, "%s", sh->dir);
        if (done)
            *done = rc == SIMSTORE_OK || call.rc;
    }
    pthread_mutex_unlock(&sh->lazy_mu);
    if (rc == SIMS_ERETRY) {
        sims_retry_saw((uint64_t)mdb_txn_id(txn));
        rc = sims_retry_or_fail(
            sims_fail(SIMSTORE_EBUSY, "%s: data.mdb kept changing while it was checked", sh->dir));
    }
    return rc;
}

int sims_env_check(const sims_env *e, MDB_txn *txn, MDB_dbi dbi, const void *key, size_t key_len,
                   int read)
{
    return env_lazy(e, txn, dbi, key, key_len, read, NULL, NULL, NULL, NULL);
}

int sims_env_check_read(const sims_env *e, MDB_txn *txn, MDB_dbi dbi, const void *key,
                        size_t key_len, int read, sims_lmdb_value_fn fn, void *ctx, int *done,
                        int *found)
{
    *done = 0;
    *found = 0;
    return env_lazy(e, txn, dbi, key, key_len, read, fn, ctx, done, found);
}

int sims_env_full_walk(sims_env *e)
{
    sims_env_shared *sh = e->shared;
    if (!sh || !sh->lazy)
        return SIMSTORE_OK;
    pthread_mutex_lock(&sh->lazy_mu);
    int rc = SIMSTORE_OK;
    if (!sh->walked) {
        sims_lmdb_summary sum;
        memset(&sum, 0, sizeof sum);
        rc = env_walk(sh->env, sh->dir, NULL, NULL, &sum);
        sh->walked_pages += sum.used_pages ? sum.used_pages : sum.file_pages;
        if (rc == SIMSTORE_OK)
            sh->walked = 1;
        else
            rc = sims_fail_context(rc, "%s", sh->dir);
    }
    pthread_mutex_unlock(&sh->lazy_mu);
    return rc;
}

uint64_t sims_env_pages_checked(const sims_env *e)
{
    sims_env_shared *sh = e->shared;
    if (!sh)
        return 0;
    pthread_mutex_lock(&sh->lazy_mu);
    uint64_t n = sh->walked_pages + (sh->lz ? sims_lmdb_lazy_pages(sh->lz) : 0);
    pthread_mutex_unlock(&sh->lazy_mu);
    return n;
}

int sims_env_read_begin(sims_env *e, MDB_txn **txn)
{
    int rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, txn);
    if (rc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(e->env, 0);
        rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, txn);
    }
    if (rc == MDB_READERS_FULL && !e->nolock) {
        /* Slots of readers that died since this environment was opened. */
        int dead = 0;
        if (mdb_reader_check(e->env, &dead) == 0 && dead > 0)
            rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, txn);
    }
    if (rc)
        return sims_mdb_fail(rc, "begin read transaction");
    if (e->shared && (rc = settle(e->shared, *txn)) != SIMSTORE_OK) {
        mdb_txn_abort(*txn);
        *txn = NULL;
        return rc;
    }
    return e->shared && e->shared->lazy ? lazy_enter(e->shared, txn, 0) : SIMSTORE_OK;
}

int sims_env_read_renew(sims_env *e, MDB_txn *txn)
{
    int rc = renew_txn(e->env, txn);
    if (rc)
        return sims_mdb_fail(rc, "renew read transaction");
    if (e->shared && (rc = settle(e->shared, txn)) != SIMSTORE_OK)
        return rc;
    return e->shared && e->shared->lazy ? lazy_enter(e->shared, &txn, 1) : SIMSTORE_OK;
}

/* Pages are counted from LMDB's database records (mdb_stat: O(1) each) and
 * the free list (one record per committed transaction that freed pages);
 * `fps` gets the remainder up to the last page, which is exact when every
 * page is in a tree or free, as the walk checks: its duplicate
 * sub-databases are not in its record's counts. */
int sims_env_usage(sims_env *e, MDB_txn *txn, sims_env_usage_info *out)
{
    memset(out, 0, sizeof *out);
    MDB_envinfo info;
    MDB_stat st[4];
    MDB_dbi dbis[4] = {0 /* free list */, 1 /* main */, e->meta, e->docs};
    int rc = mdb_env_info(e->env, &info);
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = mdb_stat(txn, dbis[i], &st[i]);
    if (rc)
        return sims_mdb_fail(rc, "read the database statistics");
    out->page_bytes = st[0].ms_psize;
    mdb_filehandle_t fd;
    struct stat fst;
    if (mdb_env_get_fd(e->env, &fd) == 0 && fstat(fd, &fst) == 0)
        out->file_pages = (uint64_t)fst.st_size / out->page_bytes;
    uint64_t in_file = (uint64_t)info.me_last_pgno + 1;
    if (in_file > out->file_pages)
        in_file = out->file_pages;
    out->tail_pages = out->file_pages - in_file;
    /* The free list: each value is LMDB's IDL, a count then page numbers. */
    MDB_cursor *cur;
    rc = mdb_cursor_open(txn, 0, &cur);
    if (rc)
        return sims_mdb_fail(rc, "open a cursor on the free list");
    MDB_val key, val;
    rc = mdb_cursor_get(cur, &key, &val, MDB_FIRST);
    while (rc == 0) {
        size_t count = 0;
        if (val.mv_size >= sizeof count)
            memcpy(&count, val.mv_data, sizeof count);
        if (count > val.mv_size / sizeof count - 1)
            count = val.mv_size / sizeof count - 1;
        out->free_pages += count;
        rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND)
        return sims_mdb_fail(rc, "read the free list");
    out->docs_pages = st[3].ms_branch_pages + st[3].ms_leaf_pages + st[3].ms_overflow_pages;
    out->other_pages = 2; /* the meta pages */
    for (int i = 0; i < 3; i++)
        out->other_pages += st[i].ms_branch_pages + st[i].ms_leaf_pages + st[i].ms_overflow_pages;
    if (e->pfps) { /* the paragraph index counts as other (its duplicate
                      sub-databases, like fps's, fall in the remainder) */
        MDB_stat ps;
        rc = mdb_stat(txn, e->pfps, &ps);
        if (rc)
            return sims_mdb_fail(rc, "read the database statistics");
        out->other_pages += ps.ms_branch_pages + ps.ms_leaf_pages + ps.ms_overflow_pages;
    }
    uint64_t named = out->docs_pages + out->other_pages + out->free_pages;
    out->fps_pages = in_file > named ? in_file - named : 0;
    return SIMSTORE_OK;
}

int sims_env_copy_compact(sims_env *e, const char *dir)
{
    int m = mdb_env_copy2(e->env, dir, MDB_CP_COMPACT);
    if (m == ENOSPC)
        return sims_fail(SIMSTORE_EFULL, "%s: copy data.mdb: %s", dir, strerror(m));
    if (m)
        return sims_mdb_fail(m, "copy data.mdb");
    char path[PATH_MAX];
    int rc = sims_join_path(path, sizeof path, dir, "data.mdb");
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sims_fail_errno("%s", path);
    if (sims_fsync(fd) != 0) {
        rc = sims_fail_errno("fsync %s", path);
        close(fd);
        return rc;
    }
    close(fd);
    return sims_fsync_dir(dir);
}
