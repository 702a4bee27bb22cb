/* store.c: opening and closing stores, the writer lock, cleaning leftovers of
 * interrupted writers, snapshots of the committed segments, and stats; the
 * build options' defaults and the memory budget rules writers share. */
#include "store/store_internal.h"
#include "simstore_unstable.h"

#include "common/error.h"
#include "common/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void simstore_build_options_init(simstore_build_options *o)
{
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->k = 3;
    o->block_bytes = SIMSTORE_DEFAULT_BLOCK_BYTES;
    o->memory_bytes = (uint64_t)1 << 30;
}

/* Kept back of a builder's budget for what is not sorting: 1/8 of it, at
 * most 64 MiB (README, "Building at scale"). */
#define MEMORY_RESERVE_SHARE 8u
#define MEMORY_RESERVE_MAX_BYTES ((uint64_t)64 << 20)

uint64_t sims_memory_budget(uint64_t memory_bytes)
{
    return memory_bytes < SIMSTORE_MIN_MEMORY_BYTES ? SIMSTORE_MIN_MEMORY_BYTES : memory_bytes;
}

uint64_t sims_sorting_budget(uint64_t memory_bytes)
{
    uint64_t budget = sims_memory_budget(memory_bytes);
    uint64_t reserve = budget / MEMORY_RESERVE_SHARE;
    if (reserve > MEMORY_RESERVE_MAX_BYTES)
        reserve = MEMORY_RESERVE_MAX_BYTES;
    return budget - reserve;
}

uint64_t sims_now_unix(void)
{
    time_t t = time(NULL);
    return t < 0 ? 0 : (uint64_t)t;
}

int sims_table_path(char *buf, size_t size, const char *dir, uint64_t segment, unsigned table)
{
    char name[40];
    snprintf(name, sizeof name, "s%010" PRIu64 "-t%03u.tbl", segment, table);
    return sims_join_path(buf, size, dir, name);
}

int sims_docfile_path(char *buf, size_t size, const char *dir, uint64_t segment)
{
    char name[40];
    snprintf(name, sizeof name, "s%010" PRIu64 ".doc", segment);
    return sims_join_path(buf, size, dir, name);
}

int sims_segment_file_name(const char *name, uint64_t *segment, unsigned *table)
{
    unsigned long long seg;
    unsigned t;
    int end = 0;
    size_t len = strlen(name);
    if (len == 20 && sscanf(name, "s%10llu-t%3u.tbl%n", &seg, &t, &end) == 2 && end == 20) {
        *segment = seg;
        *table = t;
        return SIMS_SEGMENT_TABLE_FILE;
    }
    end = 0;
    if (len == 15 && name[0] == 's' && sscanf(name, "s%10llu.doc%n", &seg, &end) == 1 &&
        end == 15) {
        *segment = seg;
        *table = 0;
        return SIMS_SEGMENT_DOC_FILE;
    }
    return 0;
}

/* ---- segments and snapshots ---------------------------------------------- */

void sims_segment_release(sims_segment *seg)
{
    if (!seg || atomic_fetch_sub(&seg->refs, 1) != 1)
        return;
    for (uint32_t t = 0; t < seg->table_count; t++)
        sims_table_reader_close(seg->tables[t]);
    sims_docfile_close(seg->docs);
    free(seg->tables);
    free(seg);
}

int sims_segment_open(const simstore *s, const char *dir, const sims_segment_entry *e,
                      sims_segment **out)
{
    *out = NULL;
    sims_segment *seg = calloc(1, sizeof *seg);
    if (!seg)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory opening a segment");
    atomic_init(&seg->refs, 1);
    seg->id = e->id;
    seg->fp_count = e->fp_count;
    seg->created_unix = e->created_unix;
    seg->flags = e->flags;
    seg->tables = calloc(e->table_count ? e->table_count : 1, sizeof *seg->tables);
    if (!seg->tables) {
        free(seg);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory opening a segment");
    }
    unsigned flags =
        (s->open_flags & SIMSTORE_OPEN_SKIP_BLOCK_CHECKSUMS) ? TABLE_SKIP_BLOCK_CHECKSUMS : 0;
    char path[PATH_MAX];
    int rc = SIMSTORE_OK;
    for (uint32_t t = 0; t < e->table_count && rc == SIMSTORE_OK; t++) {
        rc = sims_table_path(path, sizeof path, dir, e->id, t);
        if (rc == SIMSTORE_OK)
            rc = sims_table_reader_open(path, flags, &seg->tables[t]);
        if (rc) {
            rc = sims_fail_context(rc, "%s", path);
            break;
        }
        seg->table_count = t + 1;
        const table_info *info = sims_table_reader_info(seg->tables[t]);
        const sims_design_table *dt = &s->design->tables[t];
        if (info->params.store_tag != s->store_tag)
            rc = SIMS_CORRUPT("%s: belongs to another store (tag %016" PRIx64 ", store %016" PRIx64
                              ")",
                              path, info->params.store_tag, s->store_tag);
        else if (info->params.table_index != t)
            rc = SIMS_CORRUPT("%s: holds table %u, expected table %u", path,
                              info->params.table_index, t);
        else if (info->params.block_bytes != s->block_bytes)
            rc = SIMS_CORRUPT("%s: block size %u, the store uses %u", path,
                              info->params.block_bytes, s->block_bytes);
        else if (info->params.prefix_bits != dt->prefix_bits ||
                 memcmp(info->params.perm, dt->perm, 64) != 0)
            rc = SIMS_CORRUPT("%s: permutation differs from the store's design", path);
        else if (info->fp_count != e->fp_count)
            rc = SIMS_CORRUPT("%s: holds %" PRIu64 " fingerprints, the state says %" PRIu64, path,
                              info->fp_count, e->fp_count);
    }
    if (rc == SIMSTORE_OK && (e->flags & SIMS_SEGMENT_FLAG_DOCFILE)) {
        if (s->store_flags & SIMS_STORE_FLAG_FP_ONLY)
            rc = SIMS_CORRUPT("%s: segment %" PRIu64 " of a fingerprint-only store names a "
                              "document file",
                              dir, e->id);
        if (rc == SIMSTORE_OK)
            rc = sims_docfile_path(path, sizeof path, dir, e->id);
        if (rc == SIMSTORE_OK)
            rc = sims_docfile_open(path, &seg->docs);
        if (rc == SIMSTORE_OK &&
            sims_docfile_sketch_bytes(seg->docs) != simstore_sketch_bytes(s->text.sketch))
            rc = SIMS_CORRUPT("%s: keeps sketches of %u bytes, the store's kind takes %zu", path,
                              sims_docfile_sketch_bytes(seg->docs),
                              simstore_sketch_bytes(s->text.sketch));
    }
    if (rc) {
        sims_segment_release(seg);
        return rc;
    }
    if (s->open_flags & SIMSTORE_OPEN_HUGE_PAGES) {
        for (uint32_t t = 0; t < seg->table_count; t++)
            sims_table_reader_advise_huge(seg->tables[t]);
        if (seg->docs)
            sims_docfile_advise_huge(seg->docs);
    }
    *out = seg;
    return SIMSTORE_OK;
}

void sims_snapshot_release(sims_snapshot *snap)
{
    if (!snap || atomic_fetch_sub(&snap->refs, 1) != 1)
        return;
    for (uint32_t i = 0; i < snap->segment_count; i++)
        sims_segment_release(snap->segments[i]);
    for (uint32_t i = 0; i < snap->para_segment_count; i++)
        sims_segment_release(snap->para_segments[i]);
    free(snap->segments);
    free(snap->para_segments);
    free(snap);
}

int sims_store_get_record(const simstore *s, MDB_txn *txn, const char *name, MDB_val *val)
{
    MDB_val key = {strlen(name), (void *)name};
    int rc =
        sims_env_check(&s->env, txn, s->env.meta, key.mv_data, key.mv_size, SIMS_LMDB_READ_GET);
    if (rc)
        return rc;
    rc = mdb_get(txn, s->env.meta, &key, val);
    if (rc == MDB_NOTFOUND)
        return 1;
    if (rc == 0)
        return SIMSTORE_OK;
    char what[64];
    snprintf(what, sizeof what, "read the %s record", name);
    return sims_mdb_fail(rc, what);
}

int sims_store_read_state(const simstore *s, MDB_txn *txn, sims_state_record *out)
{
    MDB_val val;
    int rc = sims_store_get_record(s, txn, "state", &val);
    if (rc == 1)
        return SIMS_CORRUPT("%s: the state record is missing", s->path);
    if (rc)
        return rc;
    rc = sims_state_record_decode((const uint8_t *)val.mv_data, val.mv_size, s->design->n_tables,
                                  out);
    return rc ? sims_fail_context(rc, "%s", s->path) : SIMSTORE_OK;
}

/* Whether `path` now names another directory than the one this handle
 * opened (build --replace swapped a new store in). */
static int store_replaced(const simstore *s)
{
    struct stat st;
    return stat(s->path, &st) != 0 || st.st_dev != s->dir_dev || st.st_ino != s->dir_ino;
}

int simstore_replaced(const simstore *s)
{
    return s && store_replaced(s);
}

/* Whether a writer has committed since txn began: then files of the state
 * txn sees may be gone (a compaction removes the segments it replaced once
 * it has committed). */
static int store_moved_on(const simstore *s, MDB_txn *txn)
{
    MDB_envinfo info;
    return mdb_env_info(s->env.env, &info) == 0 &&
           (uint64_t)info.me_last_txnid > (uint64_t)mdb_txn_id(txn);
}

static sims_segment *find_segment(sims_snapshot *snap, uint64_t id)
{
    if (!snap)
        return NULL;
    for (uint32_t i = 0; i < snap->segment_count; i++)
        if (snap->segments[i]->id == id)
            return snap->segments[i];
    for (uint32_t i = 0; i < snap->para_segment_count; i++)
        if (snap->para_segments[i]->id == id)
            return snap->para_segments[i];
    return NULL;
}

int sims_store_snapshot(simstore *s, MDB_txn *txn, sims_snapshot **out)
{
    *out = NULL;
    /* Cheapest: no write transaction committed since the current snapshot
     * was taken (LMDB read transactions carry the last committed id). */
    uint64_t txn_id = (uint64_t)mdb_txn_id(txn);
    pthread_mutex_lock(&s->mu);
    sims_snapshot *fast = s->current;
    if (fast && fast->txn_id == txn_id) {
        atomic_fetch_add(&fast->refs, 1);
        pthread_mutex_unlock(&s->mu);
        *out = fast;
        return SIMSTORE_OK;
    }
    pthread_mutex_unlock(&s->mu);
    MDB_val val;
    int rc = sims_store_get_record(s, txn, "state", &val);
    if (rc < 0)
        return rc;
    if (rc == 0 && val.mv_size >= 16) {
        /* The common case: nothing committed since the last query. */
        uint64_t gen;
        memcpy(&gen, (const uint8_t *)val.mv_data + 8, 8);
        pthread_mutex_lock(&s->mu);
        sims_snapshot *cur = s->current;
        if (cur && cur->generation == gen) {
            /* Commits that changed only documents: same segments. */
            if (txn_id > cur->txn_id)
                cur->txn_id = txn_id;
            atomic_fetch_add(&cur->refs, 1);
            pthread_mutex_unlock(&s->mu);
            *out = cur;
            return SIMSTORE_OK;
        }
        pthread_mutex_unlock(&s->mu);
    }
    sims_state_record st;
    rc = sims_store_read_state(s, txn, &st);
    if (rc)
        return rc;
    sims_snapshot *snap = calloc(1, sizeof *snap);
    if (snap) {
        snap->segments = calloc(st.segment_count ? st.segment_count : 1, sizeof *snap->segments);
        snap->para_segments =
            calloc(st.para_segment_count ? st.para_segment_count : 1, sizeof *snap->para_segments);
    }
    if (!snap || !snap->segments || !snap->para_segments) {
        if (snap) {
            free(snap->segments);
            free(snap->para_segments);
        }
        free(snap);
        sims_state_record_release(&st);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory loading segments");
    }
    atomic_init(&snap->refs, 1);
    snap->generation = st.generation;
    snap->txn_id = txn_id;
    snap->doc_count = st.doc_count;
    snap->fp_count = st.fp_count;
    /* Share the segments the current snapshot already has open. */
    pthread_mutex_lock(&s->mu);
    sims_snapshot *cur = s->current;
    if (cur)
        atomic_fetch_add(&cur->refs, 1);
    pthread_mutex_unlock(&s->mu);
    /* The document segments, then the paragraph segments. */
    for (uint32_t i = 0; i < st.segment_count + st.para_segment_count && rc == SIMSTORE_OK; i++) {
        int para = i >= st.segment_count;
        const sims_segment_entry *e =
            para ? &st.para_segments[i - st.segment_count] : &st.segments[i];
        sims_segment *seg = find_segment(cur, e->id);
        if (seg)
            atomic_fetch_add(&seg->refs, 1);
        else
            rc = sims_segment_open(s, s->path, e, &seg);
        /* The files are opened by path: say so when the path has moved on
         * to another store, rather than report its files as missing. */
        if (rc && store_replaced(s))
            rc = sims_fail(SIMSTORE_ENOTFOUND,
                           "%s: the store this handle opened was replaced by another "
                           "(build --replace) after a change this handle had not loaded; "
                           "open it again",
                           s->path);
        else if (rc == SIMSTORE_ENOTFOUND && store_moved_on(s, txn)) {
            /* Not damage: a newer state replaced this one's files. */
            sims_retry_saw(txn_id);
            rc = sims_retry_or_fail(rc);
        }
        if (rc == SIMSTORE_OK && para)
            snap->para_segments[snap->para_segment_count++] = seg;
        else if (rc == SIMSTORE_OK)
            snap->segments[snap->segment_count++] = seg;
        /* One document file a store (format/store.md, "Document files"),
         * holding every document unless docs holds changes. */
        if (rc == SIMSTORE_OK && !para && seg->docs) {
            snap->docfile_changed = (e->flags & SIMS_SEGMENT_FLAG_CHANGED) != 0;
            if (snap->docfile)
                rc = sims_fail(SIMSTORE_EVERSION,
                               "%s: segments %" PRIu64 " and %" PRIu64 " both have a document "
                               "file, which this version does not read",
                               s->path, snap->docfile_segment, seg->id);
            else if (!snap->docfile_changed && sims_docfile_count(seg->docs) != st.doc_count)
                rc = SIMS_CORRUPT("%s: the document file of segment %" PRIu64 " holds %" PRIu64
                                  " documents, the state says %" PRIu64,
                                  s->path, seg->id, sims_docfile_count(seg->docs), st.doc_count);
            snap->docfile = seg->docs;
            snap->docfile_segment = seg->id;
        }
    }
    /* No document file (a store built empty, or fingerprint-only): docs
     * holds every document, as changes to a file of none. */
    if (rc == SIMSTORE_OK && !snap->docfile) {
        snap->docfile = sims_docfile_empty();
        snap->docfile_changed = 1;
    }
    sims_snapshot_release(cur);
    sims_state_record_release(&st);
    if (rc) {
        sims_snapshot_release(snap);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    if (!s->current || s->current->generation < snap->generation) {
        sims_snapshot *old = s->current;
        atomic_fetch_add(&snap->refs, 1);
        s->current = snap;
        pthread_mutex_unlock(&s->mu);
        sims_snapshot_release(old);
    } else {
        pthread_mutex_unlock(&s->mu);
    }
    *out = snap;
    return SIMSTORE_OK;
}

typedef struct read_snapshot_ctx {
    simstore *s;
    sims_snapshot **out;
} read_snapshot_ctx;

static int read_snapshot_once(void *ctx)
{
    read_snapshot_ctx *r = (read_snapshot_ctx *)ctx;
    MDB_txn *txn;
    int rc = sims_env_read_begin(&r->s->env, &txn);
    if (rc)
        return rc;
    rc = sims_store_snapshot(r->s, txn, r->out);
    mdb_txn_abort(txn);
    return rc;
}

int sims_read_snapshot(simstore *s, sims_snapshot **out)
{
    read_snapshot_ctx r = {s, out};
    *out = NULL;
    return sims_retry(read_snapshot_once, &r);
}

/* ---- leftovers ------------------------------------------------------------ */

int sims_store_read_committed_state(simstore *s, sims_state_record *out)
{
    MDB_txn *txn;
    int rc = sims_env_read_begin(&s->env, &txn);
    if (rc)
        return rc;
    rc = sims_store_read_state(s, txn, out);
    mdb_txn_abort(txn);
    return rc;
}

int sims_store_clean(simstore *s)
{
    sims_state_record st;
    int rc = sims_store_read_committed_state(s, &st);
    if (rc)
        return rc;
    DIR *d = opendir(s->path);
    if (!d) {
        sims_state_record_release(&st);
        return sims_fail_errno("open directory %s", s->path);
    }
    struct dirent *ent;
    char path[PATH_MAX];
    int removed = 0;
    while ((ent = readdir(d)) != NULL) {
        const char *name = ent->d_name;
        uint64_t seg;
        int stale = strstr(name, ".tmp-") != NULL;
        unsigned t;
        int kind = stale ? 0 : sims_segment_file_name(name, &seg, &t);
        if (kind) {
            /* A document file only of a segment whose entry names one. */
            int table = kind == SIMS_SEGMENT_TABLE_FILE;
            stale = 1;
            for (uint32_t i = 0; i < st.segment_count; i++)
                if (st.segments[i].id == seg &&
                    (table || (st.segments[i].flags & SIMS_SEGMENT_FLAG_DOCFILE)))
                    stale = 0;
            for (uint32_t i = 0; i < st.para_segment_count; i++)
                if (st.para_segments[i].id == seg && table)
                    stale = 0;
        }
        if (stale) {
            if (sims_join_path(path, sizeof path, s->path, name) == SIMSTORE_OK &&
                unlink(path) == 0)
                removed = 1;
        }
    }
    closedir(d);
    sims_state_record_release(&st);
    return removed ? sims_fsync_dir(s->path) : SIMSTORE_OK;
}

/* ---- open / close ---------------------------------------------------------- */

/* writer.lock's contents (format/store.md, "Directory layout"): empty, or
 * "server PID\n" while a live store (a server) holds the lock. Only read
 * when the lock is held by someone else, so a note a killed server left is
 * never believed: the next writer that takes the lock empties the file. */
#define HOLDER_NOTE_MAX 64

int sims_store_busy(const char *dir, int fd)
{
    char note[HOLDER_NOTE_MAX];
    ssize_t n = pread(fd, note, sizeof note - 1, 0);
    char role[16];
    long pid = 0;
    if (n > 0) {
        note[n] = '\0';
        if (sscanf(note, "%15s %ld", role, &pid) == 2 && strcmp(role, "server") == 0 && pid > 0)
            return sims_fail(SIMSTORE_EBUSY,
                             "%s: the store is held by a server (pid %ld): no other command "
                             "may change or replace it while the server runs (queries keep "
                             "working); stop the server first",
                             dir, pid);
    }
    return sims_fail(SIMSTORE_EBUSY, "%s: another writer holds the store", dir);
}

int sims_store_note_holder(simstore *s, const char *role)
{
    if (s->lock_fd < 0 || !role || strlen(role) > 15)
        return sims_fail(SIMSTORE_EINVAL, "%s: only a writer can note who holds the store",
                         s->path);
    char note[HOLDER_NOTE_MAX];
    int n = snprintf(note, sizeof note, "%s %ld\n", role, (long)getpid());
    if (ftruncate(s->lock_fd, 0) != 0 || pwrite(s->lock_fd, note, (size_t)n, 0) != n)
        return sims_fail_errno("%s: write writer.lock", s->path);
    return SIMSTORE_OK;
}

uint64_t sims_store_tag(const simstore *s)
{
    return s->store_tag;
}

int sims_store_wal_applied(simstore *s, uint64_t *seq)
{
    *seq = 0;
    sims_state_record st;
    int rc = sims_store_read_committed_state(s, &st);
    if (rc)
        return rc;
    *seq = st.wal_applied;
    sims_state_record_release(&st);
    return SIMSTORE_OK;
}

static int take_writer_lock(const char *dir, int *fd_out)
{
    char path[PATH_MAX];
    int rc0 = sims_join_path(path, sizeof path, dir, "writer.lock");
    if (rc0)
        return rc0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (errno == EPERM)
            return sims_fail(SIMSTORE_EREADONLY,
                             "%s: the store cannot be changed: %s is immutable or append-only "
                             "(see lsattr; as root, chattr -i -a clears it)",
                             dir, path);
        if (errno == EACCES || errno == EROFS)
            return sims_fail(SIMSTORE_EREADONLY, "%s: the store cannot be written here (%s: %s)",
                             dir, path, strerror(errno));
        return sims_fail_errno("open %s", path);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        int rc = busy ? sims_store_busy(dir, fd) : sims_fail_errno("lock %s", path);
        close(fd);
        return rc;
    }
    /* A note a killed server left is no longer true. */
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && ftruncate(fd, 0) != 0) {
        int rc = sims_fail_errno("truncate %s", path);
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return SIMSTORE_OK;
}

static int load_text_record(simstore *s, MDB_txn *txn, uint64_t incompat)
{
    /* Every store of format 2 has the record (written with the store
     * record): none is a damaged store, not one of some default version. */
    simstore_text_options_init(&s->text);
    MDB_val val;
    int rc = sims_store_get_record(s, txn, "text", &val);
    if (rc == 1)
        return SIMS_CORRUPT("%s: no text record", s->path);
    if (rc)
        return rc;
    sims_text_record tr;
    rc = sims_text_record_decode((const uint8_t *)val.mv_data, val.mv_size, &tr);
    if (rc == SIMSTORE_OK)
        rc = sims_store_incompat_check(incompat, &tr);
    if (rc)
        return sims_fail_context(rc, "%s", s->path);
    s->text.shingle_words = tr.shingle_words;
    s->text.weighting = (simstore_weighting)tr.weighting;
    s->text.version = tr.version;
    s->text.cjk_shingle = tr.cjk_shingle;
    s->text.sketch = (simstore_sketch_kind)tr.sketch;
    s->text.cjk = tr.cjk == 1 ? SIMSTORE_CJK_FRISO : SIMSTORE_CJK_BIGRAM;
    s->text.lambda = (double)tr.lambda_fixed / 65536.0;
    s->text.paragraph_min_words = tr.paragraph_min_words;
    /* The text record and the paragraph database come and go together. */
    if ((tr.paragraph_min_words != 0) != (s->env.pfps != 0))
        return SIMS_CORRUPT("%s: the text record says %s paragraph index, but the paragraph "
                            "database is %s",
                            s->path, tr.paragraph_min_words ? "a" : "no",
                            s->env.pfps ? "there" : "missing");
    return SIMSTORE_OK;
}

int sims_check_doc_sketch(const simstore *s, const sims_doc_record *rec, const char *id,
                          size_t id_len)
{
    if (rec->sketch_kind == 0 || rec->sketch_kind == (unsigned)s->text.sketch)
        return SIMSTORE_OK;
    return SIMS_CORRUPT("%s: document '%.*s' holds a %s sketch, but the store keeps %s", s->path,
                        (int)id_len, id,
                        simstore_sketch_name((simstore_sketch_kind)rec->sketch_kind),
                        s->text.sketch ? simstore_sketch_name(s->text.sketch) : "no sketches");
}

void simstore_get_text_options(const simstore *s, simstore_text_options *out)
{
    *out = s->text;
}

/* One read of the store's records (store, text, boilerplate) from one
 * snapshot; again from a new one when a writer moved on meanwhile
 * (load_store_record). */
static int load_store_record_once(void *ctx)
{
    simstore *s = (simstore *)ctx;
    free(s->design);
    s->design = NULL;
    simstore_boilerplate_free(s->boilerplate);
    s->boilerplate = NULL;
    MDB_txn *txn;
    int rc = sims_env_read_begin(&s->env, &txn);
    if (rc)
        return rc;
    MDB_val val;
    uint64_t incompat = 0;
    rc = sims_store_get_record(s, txn, "store", &val);
    if (rc == 1) {
        rc = sims_fail(SIMSTORE_ECORRUPT, "%s: not a simstore store (no store record)", s->path);
    } else if (rc == SIMSTORE_OK) {
        sims_store_record rec;
        rc = sims_store_record_decode((const uint8_t *)val.mv_data, val.mv_size, &rec);
        if (rc == SIMSTORE_OK) {
            s->store_flags = rec.flags;
            s->store_tag = rec.store_tag;
            s->block_bytes = rec.block_bytes;
            s->created_unix = rec.created_unix;
            incompat = rec.incompat_features;
            s->design = malloc(sizeof *s->design);
            if (!s->design)
                rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
            else
                rc = sims_design_decode(rec.design, rec.design_len, s->design);
        }
        if (rc)
            rc = sims_fail_context(rc, "store %s", s->path);
    }
    if (rc == SIMSTORE_OK)
        rc = load_text_record(s, txn, incompat);
    if (rc == SIMSTORE_OK)
        rc = sims_store_load_boilerplate(s, txn);
    mdb_txn_abort(txn);
    return rc;
}

static int load_store_record(simstore *s)
{
    return sims_retry(load_store_record_once, s);
}

int simstore_open(const char *path, unsigned flags, simstore **out)
{
    *out = NULL;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return sims_fail(SIMSTORE_ENOTFOUND, "%s: no such store", path);
        return sims_fail_errno("%s", path);
    }
    if (!S_ISDIR(st.st_mode))
        return sims_fail(SIMSTORE_ENOTFOUND, "%s: not a store (not a directory)", path);
    char probe[PATH_MAX];
    if (sims_join_path(probe, sizeof probe, path, "data.mdb") != SIMSTORE_OK)
        return SIMSTORE_EINVAL;
    if (access(probe, F_OK) != 0)
        return sims_fail(SIMSTORE_ENOTFOUND, "%s: not a store (no data.mdb)", path);

    /* "S/" is S: messages and the files' paths name it once. */
    size_t path_len = strlen(path);
    while (path_len > 1 && path[path_len - 1] == '/')
        path_len--;
    simstore *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strndup(path, path_len))) {
        free(s);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    path = s->path;
    s->open_flags = flags;
    s->dir_dev = st.st_dev;
    s->dir_ino = st.st_ino;
    s->lock_fd = -1;
    simstore_build_options_init(&s->maintenance);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&s->write_mu, &recursive);
    pthread_mutexattr_destroy(&recursive);
    int rc = SIMSTORE_OK;
    int writing = (flags & SIMSTORE_OPEN_WRITE) != 0;
    if (writing)
        rc = take_writer_lock(path, &s->lock_fd);
    if (rc == SIMSTORE_OK)
        rc = sims_env_open(&s->env, path,
                           (writing ? 0 : SIMS_ENV_READONLY) |
                               ((flags & SIMSTORE_OPEN_TRUST_LMDB) ? SIMS_ENV_TRUST : 0) |
                               (writing || (flags & SIMSTORE_OPEN_FULL_WALK) ? 0 : SIMS_ENV_LAZY));
    if (rc == SIMSTORE_OK)
        rc = load_store_record(s);
    if (rc == SIMSTORE_OK && writing)
        rc = sims_store_clean(s);
    /* A server's acknowledged changes still in its log come first: a writer
     * acting on the files alone would be overridden by their replay. */
    if (rc == SIMSTORE_OK && writing && !(flags & SIMS_OPEN_LIVE))
        rc = sims_store_refuse_pending_log(s, "writing to the store", NULL);
    if (rc) {
        simstore_close(s);
        return rc;
    }
    /* Map the committed segments now rather than at the first query: the
     * handle then keeps answering from the store it opened even when build
     * --replace swaps another store in at its path and removes this one
     * (test_concurrency replace__open_readers). Best effort: a failure here
     * is reported by the first query or stats instead. */
    MDB_txn *txn;
    if (sims_env_read_begin(&s->env, &txn) == SIMSTORE_OK) {
        sims_snapshot *snap;
        if (sims_store_snapshot(s, txn, &snap) == SIMSTORE_OK)
            sims_snapshot_release(snap);
        mdb_txn_abort(txn);
    }
    sims_error_clear();
    *out = s;
    return SIMSTORE_OK;
}

int simstore_set_maintenance_options(simstore *s, const simstore_build_options *o)
{
    if (SIMS_CHECK_OPTIONS(o, simstore_build_options))
        return SIMSTORE_EINVAL;
    if (o)
        s->maintenance = *o;
    else
        simstore_build_options_init(&s->maintenance);
    return SIMSTORE_OK;
}

uint64_t simstore_lmdb_pages_checked(const simstore *s)
{
    return s ? sims_env_pages_checked(&s->env) : 0;
}

void simstore_close(simstore *s)
{
    if (!s)
        return;
    sims_snapshot_release(s->current);
    sims_env_close(&s->env);
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the flock */
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->write_mu);
    free(s->design);
    simstore_boilerplate_free(s->boilerplate);
    free(s->path);
    free(s);
}

/* ---- stats ----------------------------------------------------------------- */

int simstore_get_stats(simstore *s, simstore_stats *out)
{
    memset(out, 0, sizeof *out);
    sims_snapshot *snap;
    int rc = sims_read_snapshot(s, &snap);
    if (rc)
        return rc;
    out->k = s->design->params.k;
    out->tables = s->design->n_tables;
    out->block_bytes = s->block_bytes;
    out->fingerprint_only = (s->store_flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    out->documents = snap->doc_count;
    out->fingerprints = snap->fp_count;
    out->segments = snap->segment_count;
    out->generation = snap->generation;
    for (uint32_t i = 0; i < snap->segment_count; i++) {
        const sims_segment *seg = snap->segments[i];
        out->table_fps += seg->fp_count;
        for (uint32_t t = 0; t < seg->table_count; t++) {
            const table_info *info = sims_table_reader_info(seg->tables[t]);
            out->table_bytes += info->file_bytes;
            out->block_key_bytes += info->key_ram_bytes;
        }
        if (seg->docs) {
            docfile_sizes z;
            sims_docfile_sizes_of(seg->docs, &z);
            out->document_file_bytes += z.total;
        }
    }
    sims_design_describe(s->design, out->design, sizeof out->design);
    out->sketch = s->text.sketch;
    out->sketch_bytes = (unsigned)simstore_sketch_bytes(s->text.sketch);
    out->paragraph_min_words = s->text.paragraph_min_words;
    out->paragraph_segments = snap->para_segment_count;
    for (uint32_t i = 0; i < snap->para_segment_count; i++) {
        const sims_segment *seg = snap->para_segments[i];
        out->paragraph_table_fps += seg->fp_count;
        for (uint32_t t = 0; t < seg->table_count; t++)
            out->paragraph_table_bytes += sims_table_reader_info(seg->tables[t])->file_bytes;
    }
    if (s->env.pfps) {
        MDB_txn *txn;
        MDB_stat ms;
        /* Counting pfps's keys reads all of it. */
        rc = sims_env_full_walk(&s->env);
        if (rc == SIMSTORE_OK)
            rc = sims_env_read_begin(&s->env, &txn);
        if (rc == SIMSTORE_OK) {
            int m = mdb_stat(txn, s->env.pfps, &ms);
            if (m == 0)
                out->paragraph_entries = ms.ms_entries;
            else
                rc = sims_mdb_fail(m, "read the paragraph database");
            MDB_cursor *cur;
            if (rc == SIMSTORE_OK && (m = mdb_cursor_open(txn, s->env.pfps, &cur)) == 0) {
                MDB_val k, v;
                for (m = mdb_cursor_get(cur, &k, &v, MDB_FIRST); m == 0;
                     m = mdb_cursor_get(cur, &k, &v, MDB_NEXT_NODUP))
                    out->paragraph_fps++;
                mdb_cursor_close(cur);
            }
            mdb_txn_abort(txn);
        }
        if (rc) {
            sims_snapshot_release(snap);
            return rc;
        }
    }
    char path[PATH_MAX];
    struct stat st;
    if (sims_join_path(path, sizeof path, s->path, "data.mdb") == SIMSTORE_OK &&
        stat(path, &st) == 0)
        out->lmdb_bytes = (uint64_t)st.st_size;
    sims_snapshot_release(snap);
    MDB_txn *txn;
    sims_env_usage_info u;
    rc = sims_env_read_begin(&s->env, &txn);
    if (rc)
        return rc;
    rc = sims_env_usage(&s->env, txn, &u);
    mdb_txn_abort(txn);
    if (rc)
        return rc;
    out->lmdb_records_bytes = u.docs_pages * u.page_bytes;
    out->lmdb_mapping_bytes = u.fps_pages * u.page_bytes;
    out->lmdb_other_bytes = u.other_pages * u.page_bytes;
    out->lmdb_free_bytes = u.free_pages * u.page_bytes;
    out->lmdb_tail_bytes = u.tail_pages * u.page_bytes;
    /* The write-ahead log, read as it is now; damage in it is verify's to
     * name, the counts only say so. */
    sims_store_log log;
    if (sims_store_read_log(s, &log) == SIMSTORE_OK) {
        out->wal_bytes = log.file_bytes;
        out->wal_pending_records = log.pending;
        out->wal_torn_bytes = log.torn_bytes;
    } else {
        out->wal_bytes = log.file_bytes;
        out->wal_damaged = 1;
        sims_error_clear();
    }
    return SIMSTORE_OK;
}
