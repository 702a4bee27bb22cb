/* maintain.c: changing a store after its build: deleting documents (gone
 * from answers at the commit; their fingerprints stay in the table files,
 * dead, until a compaction), compacting segments into one without the dead
 * fingerprints, and the automatic policy that keeps the number of segments
 * and the share of dead fingerprints bounded. */
#include "store/store_internal.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"
#include "sort/u64sort.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define READ_CHUNK 4096

static int need_writer(const simstore *s)
{
    if (!(s->open_flags & SIMSTORE_OPEN_WRITE))
        return sims_fail(SIMSTORE_EREADONLY, "%s is open read-only", s->path);
    return SIMSTORE_OK;
}

/* ---- delete ----------------------------------------------------------------- */

typedef struct delete_ctx {
    simstore *s;
    const char *const *ids;
    const size_t *lens;
    size_t n;
    uint8_t *missing; /* per id: 1 when not stored (recomputed on replay) */
    uint64_t deleted;
} delete_ctx;

/* Remove a document's entries from the paragraph index: one per distinct
 * paragraph fingerprint its record lists (format/store.md, "Paragraphs").
 * The list is copied first: it borrows a page of docs. */
static int delete_paragraphs(simstore *s, MDB_txn *txn, const sims_doc_record *rec, const char *id,
                             size_t len)
{
    uint64_t *fps = malloc((size_t)rec->para_count * sizeof *fps);
    if (!fps)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < rec->para_count; i++)
        fps[i] = le_load64(rec->paras + 8 * (size_t)i);
    qsort(fps, rec->para_count, sizeof *fps, sims_cmp_u64);
    int rc = SIMSTORE_OK;
    for (uint32_t i = 0; i < rec->para_count && rc == SIMSTORE_OK; i++) {
        if (i && fps[i] == fps[i - 1])
            continue;
        uint8_t kb[8];
        be_store64(kb, fps[i]);
        MDB_val k = {8, kb}, v = {len, (void *)id};
        int m = mdb_del(txn, s->env.pfps, &k, &v);
        if (m == MDB_NOTFOUND)
            rc = SIMS_CORRUPT("%s: document '%.*s' is missing from the paragraph index under "
                              "%016llx",
                              s->path, (int)len, id, (unsigned long long)fps[i]);
        else if (m)
            rc = sims_mdb_write_status(m, "delete a paragraph");
    }
    free(fps);
    return rc;
}

/* A deleted document's paragraph list out of the paragraph index. */
static int forget_paragraphs(simstore *s, MDB_txn *txn, const sims_doc_record *rec, const char *id,
                             size_t len)
{
    if (rec->para_count == 0)
        return SIMSTORE_OK;
    if (!s->env.pfps)
        return SIMS_CORRUPT("%s: document '%.*s' lists paragraphs, but the store has no "
                            "paragraph index",
                            s->path, (int)len, id);
    return delete_paragraphs(s, txn, rec, id, len);
}

/* Delete document `id` of a store with a document file: docs's document
 * (replaced by a tombstone when the file also has the id, whose document it
 * had replaced), or the file's (a tombstone). 1 when deleted, 0 when not
 * stored; *fp its fingerprint. */
static int delete_with_file(simstore *s, const docfile_reader *file, MDB_txn *txn, const char *id,
                            size_t len, uint64_t *fp)
{
    MDB_val key = {len, (void *)id}, val;
    int m = mdb_get(txn, s->env.docs, &key, &val);
    if (m && m != MDB_NOTFOUND)
        return sims_mdb_write_status(m, "read docs");
    docfile_doc fd;
    int in_file = sims_docfile_find_id(file, id, len, &fd);
    if (in_file < 0)
        return in_file;
    int rc;
    if (m == 0) {
        sims_doc_record rec;
        int tombstone;
        rc = sims_doc_entry_decode((const uint8_t *)id, len, (const uint8_t *)val.mv_data,
                                   val.mv_size, &rec, &tombstone);
        if (rc)
            return sims_fail_context(rc, "%s: document '%.*s'", s->path, (int)len, id);
        if (tombstone)
            return 0;
        if ((rc = forget_paragraphs(s, txn, &rec, id, len)))
            return rc;
        *fp = rec.fp;
        uint8_t fpkey[8];
        be_store64(fpkey, rec.fp);
        MDB_val fk = {8, fpkey}, fv = {len, (void *)id};
        m = mdb_del(txn, s->env.fps, &fk, &fv);
        if (m == MDB_NOTFOUND)
            return SIMS_CORRUPT("%s: document '%.*s' is missing from the fingerprint index",
                                s->path, (int)len, id);
        if (m)
            return sims_mdb_write_status(m, "delete a document");
        if (!in_file) {
            m = mdb_del(txn, s->env.docs, &key, NULL);
            return m ? sims_mdb_write_status(m, "delete a document") : 1;
        }
    } else if (!in_file) {
        return 0;
    } else {
        sims_doc_record rec;
        sims_docfile_record(s, &fd, &rec);
        if ((rc = forget_paragraphs(s, txn, &rec, id, len)))
            return rc;
        *fp = fd.fingerprint;
    }
    /* The file's document of id stays out of the store under a tombstone. */
    uint8_t t[SIMS_DOC_RECORD_OVERHEAD];
    sims_doc_tombstone_encode((const uint8_t *)id, len, fd.fingerprint, t, sizeof t);
    MDB_val tv = {sizeof t, t};
    m = mdb_put(txn, s->env.docs, &key, &tv, 0);
    return m ? sims_mdb_write_status(m, "write a tombstone") : 1;
}

static int delete_fn(MDB_txn *txn, void *arg)
{
    delete_ctx *c = (delete_ctx *)arg;
    simstore *s = c->s;
    sims_state_record st;
    int rc = sims_store_read_state(s, txn, &st);
    if (rc)
        return rc;
    /* The document file of the state this delete changes, opened here:
     * a snapshot is for read transactions (sims_store_snapshot). */
    docfile_reader *file = NULL;
    for (uint32_t i = 0; i < st.segment_count && rc == SIMSTORE_OK; i++)
        if (st.segments[i].flags & SIMS_SEGMENT_FLAG_DOCFILE) {
            char path[PATH_MAX];
            rc = sims_docfile_path(path, sizeof path, s->path, st.segments[i].id);
            if (rc == SIMSTORE_OK)
                rc = sims_docfile_open(path, &file);
        }
    if (rc) {
        sims_state_record_release(&st);
        return rc;
    }
    const docfile_reader *docs_file = file ? file : sims_docfile_empty();
    c->deleted = 0;
    memset(c->missing, 0, c->n);
    uint64_t fps_gone = 0;
    for (size_t i = 0; i < c->n && rc == SIMSTORE_OK; i++) {
        size_t len = c->lens[i];
        if (len == 0 || len > SIMSTORE_MAX_ID_BYTES) {
            c->missing[i] = 1;
            continue;
        }
        uint64_t fp = 0;
        int done = delete_with_file(s, docs_file, txn, c->ids[i], len, &fp);
        /* Whether a document still holds fp after the delete: docs may hold
         * this delete's tombstones already, so the file's are always looked
         * at (changed 1). */
        int held = done == 1 ? sims_store_holds_fp(s, docs_file, 1, txn, fp) : 0;
        if (done < 0 || held < 0) {
            rc = done < 0 ? done : held;
            break;
        }
        if (done == 0)
            c->missing[i] = 1;
        c->deleted += (uint64_t)done;
        fps_gone += (uint64_t)(done == 1 && !held);
    }
    if (rc == SIMSTORE_OK && c->deleted > 0) {
        if (st.doc_count < c->deleted || st.fp_count < fps_gone)
            rc = SIMS_CORRUPT("%s: the state's counts are below what was deleted", s->path);
        else {
            st.generation++;
            st.doc_count -= c->deleted;
            st.fp_count -= fps_gone;
            for (uint32_t i = 0; i < st.segment_count; i++)
                if (st.segments[i].flags & SIMS_SEGMENT_FLAG_DOCFILE)
                    st.segments[i].flags |= SIMS_SEGMENT_FLAG_CHANGED;
            rc = sims_put_state(txn, s->env.meta, &st);
        }
    }
    sims_docfile_close(file);
    sims_state_record_release(&st);
    return rc;
}

/* Dead fingerprints: held by tables, used by no document. */
static int dead_share(simstore *s, double *share, uint32_t *segments)
{
    sims_state_record st;
    int rc = sims_store_read_committed_state(s, &st);
    if (rc)
        return rc;
    uint64_t held = 0;
    for (uint32_t i = 0; i < st.segment_count; i++)
        held += st.segments[i].fp_count;
    *share = held ? (double)(held - (st.fp_count < held ? st.fp_count : held)) / (double)held : 0;
    /* Paragraph segments count too: an add whose documents bring only
     * fingerprints the store has still writes one. */
    *segments = st.segment_count > st.para_segment_count ? st.segment_count : st.para_segment_count;
    sims_state_record_release(&st);
    return SIMSTORE_OK;
}

int simstore_delete(simstore *s, const char *const *ids, const size_t *id_lens, size_t n,
                    uint64_t *deleted, simstore_missing_fn missing, void *ctx)
{
    if (deleted)
        *deleted = 0;
    int rc = need_writer(s);
    if (rc)
        return rc;
    if (s->store_flags & SIMS_STORE_FLAG_FP_ONLY)
        return sims_fail(SIMSTORE_EINVAL, "%s is a fingerprint-only store: it has no documents",
                         s->path);
    delete_ctx c = {s, ids, id_lens, n, calloc(n ? n : 1, 1), 0};
    if (!c.missing)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    pthread_mutex_lock(&s->write_mu); /* one change at a time per handle */
    rc = sims_env_write(&s->env, delete_fn, &c);
    if (rc == SIMSTORE_OK) {
        if (deleted)
            *deleted = c.deleted;
        for (size_t i = 0; missing && i < n; i++)
            if (c.missing[i])
                missing(ctx, ids[i], id_lens[i]);
    }
    free(c.missing);
    if (rc == SIMSTORE_OK && c.deleted > 0 && !(s->open_flags & SIMSTORE_OPEN_NO_AUTO_COMPACT)) {
        /* The delete is committed, so it has succeeded whatever happens
         * next: a failed automatic compaction leaves a valid store with dead
         * fingerprints (the next add or delete checks the policy again), and
         * must not report the committed delete as failed (test_crash
         * delete-autocompact). */
        if (simstore_maybe_compact_dead(s, &s->maintenance) != SIMSTORE_OK)
            sims_error_clear();
    }
    pthread_mutex_unlock(&s->write_mu);
    return rc;
}

/* ---- compact ---------------------------------------------------------------- */

typedef struct compact_ctx {
    simstore *s;
    uint64_t old_generation;
    uint64_t segment_id;
    uint64_t fp_count;
    uint32_t table_count;
    /* The paragraph index's one segment after compaction (its live
     * paragraph fingerprints: the keys of pfps), id segment_id + 1. */
    uint64_t para_fp_count;
    /* The new segment's documents went to its document file (format/store.md,
     * "Document files"): docs and fps are emptied by the commit. */
    int docfile;
    uint64_t docfile_docs;
} compact_ctx;

static int compact_fn(MDB_txn *txn, void *arg)
{
    compact_ctx *c = (compact_ctx *)arg;
    sims_state_record st;
    int rc = sims_store_read_state(c->s, txn, &st);
    if (rc)
        return rc;
    if (st.generation != c->old_generation) {
        sims_state_record_release(&st);
        return sims_fail(SIMSTORE_EBUSY, "the store changed during compaction");
    }
    sims_segment_entry e = {c->segment_id, c->fp_count, sims_now_unix(), c->table_count,
                            c->docfile && c->fp_count ? SIMS_SEGMENT_FLAG_DOCFILE : 0};
    sims_segment_entry pe = {c->segment_id + 1, c->para_fp_count, e.created_unix, c->table_count,
                             0};
    sims_state_record next = st;
    next.generation = st.generation + 1;
    next.next_segment_id = c->para_fp_count ? c->segment_id + 2
                           : c->fp_count    ? c->segment_id + 1
                                            : st.next_segment_id;
    next.segment_count = c->fp_count ? 1 : 0;
    next.segments = &e;
    next.para_segment_count = c->para_fp_count ? 1 : 0;
    next.para_segments = &pe;
    if (!(c->s->store_flags & SIMS_STORE_FLAG_FP_ONLY) && next.fp_count != c->fp_count)
        rc = SIMS_CORRUPT("%s: the state counts %" PRIu64 " fingerprints, the index holds %" PRIu64,
                          c->s->path, st.fp_count, c->fp_count);
    else if (c->docfile && c->docfile_docs != st.doc_count)
        rc = SIMS_CORRUPT("%s: the state counts %" PRIu64 " documents, the store gave %" PRIu64,
                          c->s->path, st.doc_count, c->docfile_docs);
    else {
        int m = 0;
        if (c->docfile && ((m = mdb_drop(txn, c->s->env.docs, 0)) != 0 ||
                           (m = mdb_drop(txn, c->s->env.fps, 0)) != 0))
            rc = sims_mdb_write_status(m, "empty docs and fps");
        next.fp_count = c->fp_count;
        if (rc == SIMSTORE_OK)
            rc = sims_put_state(txn, c->s->env.meta, &next);
    }
    sims_state_record_release(&st);
    return rc;
}

/* The distinct keys of an fps-like database (8 bytes, big-endian), in
 * order, into `out`. */
static int collect_keys(simstore *s, MDB_txn *txn, MDB_dbi dbi, sims_spool *out)
{
    uint64_t buf[READ_CHUNK];
    size_t n = 0;
    int rc = SIMSTORE_OK;
    {
        MDB_cursor *cur;
        int m = mdb_cursor_open(txn, dbi, &cur);
        if (m)
            return sims_mdb_fail(m, "open a cursor");
        MDB_val key, val;
        m = mdb_cursor_get(cur, &key, &val, MDB_FIRST);
        while (m == 0 && rc == SIMSTORE_OK) {
            if (key.mv_size != 8) {
                rc = SIMS_CORRUPT("%s: an fps key of %zu bytes", s->path, key.mv_size);
                break;
            }
            buf[n++] = be_load64(key.mv_data);
            if (n == READ_CHUNK) {
                rc = sims_spool_append(out, buf, n);
                n = 0;
            }
            m = mdb_cursor_get(cur, &key, &val, MDB_NEXT_NODUP);
        }
        mdb_cursor_close(cur);
        if (rc == SIMSTORE_OK && m != MDB_NOTFOUND)
            rc = sims_mdb_fail(m, "read fps");
        return rc ? rc : sims_spool_append(out, buf, n);
    }
}

/* The live fingerprints of a store with a document file (collect_live). */
typedef struct live_out {
    uint64_t buf[READ_CHUNK];
    size_t n;
    sims_spool *out;
} live_out;

static int push_live(void *ctx, uint64_t fp, uint64_t count, const uint8_t *id, size_t len)
{
    (void)count;
    (void)id;
    (void)len;
    live_out *lo = (live_out *)ctx;
    lo->buf[lo->n++] = fp;
    if (lo->n < READ_CHUNK)
        return SIMSTORE_OK;
    lo->n = 0;
    return sims_spool_append(lo->out, lo->buf, READ_CHUNK);
}

/* ---- a compaction's document file ------------------------------------------- */

typedef struct compact_docs {
    simstore *s;
    const sims_snapshot *snap;
    MDB_txn *txn;
    docfile_writer *w;
    docfile_doc *file; /* the file's live documents of one fingerprint */
    size_t nfile, cap;
    uint64_t written;
} compact_docs;

static int gather_file(void *ctx, const docfile_doc *d)
{
    compact_docs *cd = (compact_docs *)ctx;
    int live = sims_docfile_doc_live(cd->s, cd->snap->docfile_changed, cd->txn, 1, d);
    if (live <= 0)
        return live;
    if (sims_grow((void **)&cd->file, &cd->cap, cd->nfile + 1, sizeof *cd->file, 16))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    cd->file[cd->nfile++] = *d;
    return SIMSTORE_OK;
}

static int write_doc(compact_docs *cd, const docfile_doc *d)
{
    if (simstore_sketch_bytes(cd->s->text.sketch) && !d->sketch)
        return SIMS_CORRUPT("%s: document '%.*s' has no sketch, which a document file of this "
                            "store needs (rebuild the store from its documents)",
                            cd->s->path, (int)d->id_len, (const char *)d->id);
    cd->written++;
    return sims_docfile_writer_add(cd->w, d);
}

/* docs's document `id` of fingerprint fp, to the file. */
static int write_lmdb_doc(compact_docs *cd, uint64_t fp, const MDB_val *id)
{
    simstore *s = cd->s;
    MDB_val key = *id, val;
    int m = mdb_get(cd->txn, s->env.docs, &key, &val);
    if (m == MDB_NOTFOUND)
        return SIMS_CORRUPT("%s: document '%.*s' is in fps but not in docs", s->path,
                            (int)id->mv_size, (const char *)id->mv_data);
    if (m)
        return sims_mdb_fail(m, "read docs");
    sims_doc_record rec;
    int rc = sims_doc_record_decode((const uint8_t *)id->mv_data, id->mv_size,
                                    (const uint8_t *)val.mv_data, val.mv_size, &rec);
    if (rc)
        return sims_fail_context(rc, "%s: document '%.*s'", s->path, (int)id->mv_size,
                                 (const char *)id->mv_data);
    if (rec.fp != fp)
        return SIMS_CORRUPT("%s: document '%.*s' has fingerprint %016" PRIx64
                            " in docs, %016" PRIx64 " in fps",
                            s->path, (int)id->mv_size, (const char *)id->mv_data, rec.fp, fp);
    if ((rc = sims_check_doc_sketch(s, &rec, (const char *)id->mv_data, id->mv_size)))
        return rc;
    docfile_doc d = {0,
                     fp,
                     rec.insertion,
                     (const uint8_t *)id->mv_data,
                     (uint32_t)id->mv_size,
                     (rec.flags & SIMS_DOC_FLAG_INTEGER_ID) != 0,
                     rec.meta,
                     (uint32_t)rec.meta_len,
                     rec.sketch,
                     rec.paras,
                     rec.para_count};
    return write_doc(cd, &d);
}

/* Every live document of the store, in (fingerprint, id) order, into a new
 * document file at `path`: for each live fingerprint, the file's live
 * documents merged with fps's. *count: the documents written. */
static int compact_documents(simstore *s, const sims_snapshot *snap, MDB_txn *txn,
                             const sims_spool *live, const char *path, uint64_t memory,
                             uint64_t *count)
{
    compact_docs cd = {s, snap, txn, NULL, NULL, 0, 0, 0};
    MDB_cursor *cur = NULL;
    int rc = sims_docfile_writer_open(path, (unsigned)simstore_sketch_bytes(s->text.sketch),
                                      (size_t)(memory / 4), s->path, &cd.w);
    int m = rc ? 0 : mdb_cursor_open(txn, s->env.fps, &cur);
    if (m)
        rc = sims_mdb_fail(m, "open a cursor on fps");
    uint64_t buf[READ_CHUNK];
    size_t n;
    sims_spool_reader r;
    sims_spool_reader_init(&r, live);
    while (rc == SIMSTORE_OK && (rc = sims_spool_read(&r, buf, READ_CHUNK, &n)) == 0 && n > 0) {
        for (size_t i = 0; i < n && rc == SIMSTORE_OK; i++) {
            uint64_t fp = buf[i];
            cd.nfile = 0;
            rc = sims_docfile_find_fp(snap->docfile, fp, gather_file, &cd);
            uint8_t kb[8];
            be_store64(kb, fp);
            MDB_val key = {8, kb}, val;
            m = rc ? MDB_NOTFOUND : mdb_cursor_get(cur, &key, &val, MDB_SET_KEY);
            size_t j = 0;
            while (rc == SIMSTORE_OK && (j < cd.nfile || m == 0)) {
                const docfile_doc *fd = j < cd.nfile ? &cd.file[j] : NULL;
                if (fd &&
                    (m != 0 || sims_id_cmp(fd->id, fd->id_len, val.mv_data, val.mv_size) < 0)) {
                    rc = write_doc(&cd, fd);
                    j++;
                    continue;
                }
                rc = write_lmdb_doc(&cd, fp, &val);
                if (rc == SIMSTORE_OK)
                    m = mdb_cursor_get(cur, &key, &val, MDB_NEXT_DUP);
            }
            if (rc == SIMSTORE_OK && m != 0 && m != MDB_NOTFOUND)
                rc = sims_mdb_fail(m, "read fps");
        }
    }
    if (cur)
        mdb_cursor_close(cur);
    free(cd.file);
    if (rc) {
        sims_docfile_writer_abort(cd.w);
        return rc;
    }
    *count = cd.written;
    return sims_docfile_writer_commit(cd.w, NULL);
}

/* The live fingerprints, sorted and distinct, into `out`: those of the
 * live documents for a store of documents (its document file's and fps's); the
 * union of every segment's table 0 for a fingerprint-only store. */
static int collect_live(simstore *s, MDB_txn *txn, const sims_snapshot *snap, uint64_t memory,
                        sims_spool *out)
{
    uint64_t buf[READ_CHUNK];
    size_t n = 0;
    int rc = SIMSTORE_OK;
    if (!(s->store_flags & SIMS_STORE_FLAG_FP_ONLY)) {
        live_out *lo = malloc(sizeof *lo);
        if (!lo)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory");
        lo->n = 0;
        lo->out = out;
        rc = sims_docs_each_fp(s, snap, txn, 1, push_live, lo);
        if (rc == SIMSTORE_OK)
            rc = sims_spool_append(out, lo->buf, lo->n);
        free(lo);
        return rc;
    }
    /* Fingerprint-only: decode table 0 of every segment, unpermute, sort. */
    const sims_permuter *perm = &s->design->tables[0].permuter;
    sims_u64sort *sorter;
    rc = sims_u64sort_new((size_t)(memory / 16), s->path, &sorter);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < snap->segment_count && rc == SIMSTORE_OK; i++) {
        table_cursor cur;
        rc = sims_table_cursor_init(&cur, snap->segments[i]->tables[0], 0, UINT64_MAX);
        while (rc == SIMSTORE_OK && (rc = sims_table_cursor_next(&cur, buf, READ_CHUNK, &n)) == 0 &&
               n > 0) {
            for (size_t j = 0; j < n; j++)
                buf[j] = sims_unpermute(perm, buf[j]);
            rc = sims_u64sort_push(sorter, buf, n);
        }
    }
    if (rc == SIMSTORE_OK)
        rc = sims_u64sort_finish(sorter, 1);
    while (rc == SIMSTORE_OK && (rc = sims_u64sort_read(sorter, buf, READ_CHUNK, &n)) == 0 && n > 0)
        rc = sims_spool_append(out, buf, n);
    sims_u64sort_free(sorter);
    return rc;
}

int simstore_compact(simstore *s, const simstore_build_options *o)
{
    int rc = SIMS_CHECK_OPTIONS(o, simstore_build_options);
    if (rc == SIMSTORE_OK)
        rc = need_writer(s);
    if (rc)
        return rc;
    simstore_build_options opt;
    if (o)
        opt = *o;
    else
        simstore_build_options_init(&opt);
    opt.memory_bytes = sims_memory_budget(opt.memory_bytes);
    unsigned threads = opt.threads ? opt.threads : simstore_default_threads();

    MDB_txn *txn = NULL;
    sims_snapshot *snap = NULL;
    sims_spool *live = NULL, *plive = NULL;
    sims_state_record old;
    memset(&old, 0, sizeof old);
    int have_old = 0, written = 0, para_written = 0;
    compact_ctx c = {s, 0, 0, 0, s->design->n_tables, 0, 0, 0};

    pthread_mutex_lock(&s->write_mu); /* one change at a time per handle */
    rc = sims_env_read_begin(&s->env, &txn);
    if (rc == SIMSTORE_OK)
        rc = sims_store_read_state(s, txn, &old);
    if (rc)
        goto done;
    have_old = 1;
    if (old.segment_count <= 1) {
        /* One segment: compacting only pays when it holds dead fingerprints
         * (or dead paragraph fingerprints, or several paragraph segments). */
        uint64_t held = old.segment_count ? old.segments[0].fp_count : 0;
        int para_due = 0;
        if (s->env.pfps && old.para_segment_count > 1)
            para_due = 1;
        else if (s->env.pfps && old.para_segment_count == 1) {
            MDB_cursor *cur;
            MDB_val k, v;
            uint64_t keys = 0;
            int m = mdb_cursor_open(txn, s->env.pfps, &cur);
            if (m) {
                rc = sims_mdb_fail(m, "open a cursor");
                goto done;
            }
            for (m = mdb_cursor_get(cur, &k, &v, MDB_FIRST); m == 0;
                 m = mdb_cursor_get(cur, &k, &v, MDB_NEXT_NODUP))
                keys++;
            mdb_cursor_close(cur);
            para_due = keys != old.para_segments[0].fp_count;
        }
        /* A document file with changes in docs: they go into a new file;
         * documents in LMDB move into one (format/store.md, "Document
         * files"). */
        int changed = old.segment_count && (old.segments[0].flags & SIMS_SEGMENT_FLAG_CHANGED);
        int convert = old.segment_count && !(old.segments[0].flags & SIMS_SEGMENT_FLAG_DOCFILE) &&
                      old.doc_count > 0;
        if ((held == old.fp_count && !para_due && !changed && !convert) ||
            (s->store_flags & SIMS_STORE_FLAG_FP_ONLY))
            goto done;
    }
    rc = sims_store_snapshot(s, txn, &snap);
    if (rc == SIMSTORE_OK)
        rc = sims_spool_new((size_t)(opt.memory_bytes / 4 / 8), s->path, &live);
    if (opt.progress)
        opt.progress(opt.progress_ctx, "collecting fingerprints", 0, old.fp_count);
    if (rc == SIMSTORE_OK)
        rc = collect_live(s, txn, snap, opt.memory_bytes / 4, live);
    if (rc == SIMSTORE_OK)
        rc = sims_spool_seal(live);
    /* The new segment's documents in its document file (format/store.md,
     * "Document files"). */
    c.docfile = !(s->store_flags & SIMS_STORE_FLAG_FP_ONLY);
    c.segment_id = old.next_segment_id;
    if (rc == SIMSTORE_OK && c.docfile && sims_spool_count(live) > 0) {
        char path[PATH_MAX];
        written = 1; /* sims_segment_remove takes the file too */
        rc = sims_docfile_path(path, sizeof path, s->path, c.segment_id);
        if (opt.progress)
            opt.progress(opt.progress_ctx, "writing documents", 0, old.doc_count);
        if (rc == SIMSTORE_OK)
            rc = compact_documents(s, snap, txn, live, path, opt.memory_bytes, &c.docfile_docs);
    }
    if (rc == SIMSTORE_OK && s->env.pfps) {
        rc = sims_spool_new((size_t)(opt.memory_bytes / 8 / 8), s->path, &plive);
        if (rc == SIMSTORE_OK)
            rc = collect_keys(s, txn, s->env.pfps, plive);
        if (rc == SIMSTORE_OK)
            rc = sims_spool_seal(plive);
    }
    mdb_txn_abort(txn);
    txn = NULL;
    if (rc)
        goto done;
    c.old_generation = old.generation;
    c.fp_count = sims_spool_count(live);
    sims_segment_job job = {
        .design = s->design,
        .store_tag = s->store_tag,
        .block_bytes = s->block_bytes,
        .dir = s->path,
        .segment_id = c.segment_id,
        .distinct = live,
        .threads = threads,
        .memory_bytes = opt.memory_bytes / 2,
        .progress = opt.progress,
        .progress_ctx = opt.progress_ctx,
    };
    if (c.fp_count > 0) {
        written = 1;
        rc = sims_segment_write(&job);
        if (rc)
            goto done;
    }
    c.para_fp_count = plive ? sims_spool_count(plive) : 0;
    if (c.para_fp_count > 0) {
        job.segment_id = c.segment_id + 1; /* the paragraph segment */
        job.distinct = plive;
        para_written = 1;
        rc = sims_segment_write(&job);
        if (rc)
            goto done;
    }
    if (opt.progress)
        opt.progress(opt.progress_ctx, "committing", 0, 0);
    rc = sims_env_write(&s->env, compact_fn, &c);
    if (rc)
        goto done;
    written = 0; /* committed: the new segments are the store's now */
    para_written = 0;
    for (uint32_t i = 0; i < old.para_segment_count; i++)
        sims_segment_remove(s->path, old.para_segments[i].id, old.para_segments[i].table_count);
    /* The old segments' files are garbage from here on; readers that still
     * have them open keep their mappings. */
    uint64_t held = 0;
    for (uint32_t i = 0; i < old.segment_count; i++) {
        sims_segment_remove(s->path, old.segments[i].id, old.segments[i].table_count);
        held += old.segments[i].fp_count;
    }
    sims_fsync_dir(s->path);
    if (opt.compacted) {
        simstore_compaction done_info = {old.segment_count, c.fp_count ? 1 : 0,
                                         held > c.fp_count ? held - c.fp_count : 0};
        opt.compacted(opt.compacted_ctx, &done_info);
    }
done:
    if (txn)
        mdb_txn_abort(txn);
    if (written)
        sims_segment_remove(s->path, c.segment_id, c.table_count);
    if (para_written)
        sims_segment_remove(s->path, c.segment_id + 1, c.table_count);
    sims_spool_free(plive);
    sims_snapshot_release(snap);
    sims_spool_free(live);
    if (have_old)
        sims_state_record_release(&old);
    pthread_mutex_unlock(&s->write_mu);
    return rc;
}

/* The automatic policy, in one place: compact when more than
 * SIMSTORE_COMPACT_DEAD_SHARE of the tables' fingerprints are dead, or (with
 * count_segments: after an add) when more than SIMSTORE_MAX_SEGMENTS
 * segments are live. */
static int compact_if_due(simstore *s, const simstore_build_options *o, int count_segments)
{
    if (SIMS_CHECK_OPTIONS(o, simstore_build_options))
        return SIMSTORE_EINVAL;
    double share;
    uint32_t segments;
    pthread_mutex_lock(&s->write_mu); /* the policy reads the state it acts on */
    int rc = dead_share(s, &share, &segments);
    if (rc == SIMSTORE_OK && ((count_segments && segments > SIMSTORE_MAX_SEGMENTS) ||
                              share > SIMSTORE_COMPACT_DEAD_SHARE))
        rc = simstore_compact(s, o);
    pthread_mutex_unlock(&s->write_mu);
    return rc;
}

int simstore_maybe_compact(simstore *s, const simstore_build_options *o)
{
    return compact_if_due(s, o, 1);
}

int simstore_maybe_compact_dead(simstore *s, const simstore_build_options *o)
{
    return compact_if_due(s, o, 0);
}
