/* docsource.c: the documents of a store with a document file (format/store.md,
 * "Document files"): the file's, less those docs has a key of (a document
 * added again or a tombstone), plus docs's and fps's. Here is the one
 * owner of that rule: a document as its record, whether a file document is
 * live, the document of an id, every document in id order (the file's ids
 * sorted through the spilling record sorter, in bounded memory) and every
 * live fingerprint in order. */
#include "store/store_internal.h"

#include "common/bytes.h"
#include "common/error.h"
#include "sort/recsort.h"

#include <string.h>

void sims_docfile_record(const simstore *s, const docfile_doc *d, sims_doc_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->fp = d->fingerprint;
    rec->flags = SIMS_DOC_FLAG_INSERTION | (d->id_is_int ? SIMS_DOC_FLAG_INTEGER_ID : 0);
    rec->insertion = d->insertion;
    if (d->sketch && s) {
        rec->sketch_kind = (unsigned)s->text.sketch;
        rec->sketch = d->sketch;
    }
    rec->meta = d->meta;
    rec->meta_len = d->meta ? d->meta_len : 0;
    rec->para_count = d->paragraph_count;
    rec->paras = d->paragraphs;
}

typedef struct by_id {
    sims_recsort *sorter;
} by_id;

static int push_id(void *ctx, const docfile_doc *d)
{
    by_id *b = (by_id *)ctx;
    uint8_t ord[8];
    le_store64(ord, d->ordinal);
    return sims_recsort_push(b->sorter, d->id, d->id_len, ord, 8);
}

/* ---- a store with a document file and changes in docs -------------------- */

/* docs's value under id (checked first on the lazy path; an absent key
 * checked against its neighbours unless the file was walked): 1 and *val,
 * 0 when absent, or an error. */
static int docs_get(simstore *s, MDB_txn *txn, int walked, const void *id, size_t len, MDB_val *val)
{
    MDB_val key = {len, (void *)id};
    int rc = walked ? SIMSTORE_OK
                    : sims_env_check(&s->env, txn, s->env.docs, id, len, SIMS_LMDB_READ_GET);
    if (rc)
        return rc;
    int m = mdb_get(txn, s->env.docs, &key, val);
    if (m == MDB_NOTFOUND)
        return walked ? 0 : sims_check_doc_absent(s, txn, id, len);
    return m ? sims_mdb_fail(m, "read docs") : 1;
}

static int entry_decode(const simstore *s, const void *id, size_t len, const MDB_val *val,
                        sims_doc_record *rec, int *tombstone)
{
    int rc = sims_doc_entry_decode((const uint8_t *)id, len, (const uint8_t *)val->mv_data,
                                   val->mv_size, rec, tombstone);
    if (rc)
        return sims_fail_context(rc, "%s: document '%.*s'", s->path, (int)len, (const char *)id);
    return *tombstone ? SIMSTORE_OK : sims_check_doc_sketch(s, rec, (const char *)id, len);
}

int sims_docfile_doc_live(simstore *s, int changed, MDB_txn *txn, int walked, const docfile_doc *d)
{
    if (!changed)
        return 1;
    MDB_val val;
    int rc = docs_get(s, txn, walked, d->id, d->id_len, &val);
    if (rc <= 0)
        return rc < 0 ? rc : 1;
    /* docs's entry (a document or a tombstone) takes the file's place. */
    sims_doc_record rec;
    int tombstone;
    rc = entry_decode(s, d->id, d->id_len, &val, &rec, &tombstone);
    return rc ? rc : 0;
}

/* sims_store_holds_fp: stops at the first live document. */
typedef struct holds_probe {
    simstore *s;
    int changed;
    MDB_txn *txn;
} holds_probe;

static int note_live(void *ctx, const docfile_doc *d)
{
    holds_probe *p = (holds_probe *)ctx;
    int live = sims_docfile_doc_live(p->s, p->changed, p->txn, 1, d);
    return live < 0 ? live : live ? 1 : 0;
}

int sims_store_holds_fp(simstore *s, const docfile_reader *file, int changed, MDB_txn *txn,
                        uint64_t fp)
{
    uint8_t k[8];
    be_store64(k, fp);
    MDB_val key = {8, k}, val;
    int m = mdb_get(txn, s->env.fps, &key, &val);
    if (m == 0)
        return 1;
    if (m != MDB_NOTFOUND)
        return sims_mdb_write_status(m, "read fps");
    holds_probe p = {s, changed, txn};
    int rc = sims_docfile_find_fp(file, fp, note_live, &p);
    return rc < 0 ? rc : rc == 1;
}

int sims_doc_lookup(simstore *s, const sims_snapshot *snap, MDB_txn *txn, int walked,
                    const void *id, size_t len, sims_doc_found *out)
{
    memset(out, 0, sizeof *out);
    if (snap->docfile_changed) {
        MDB_val val;
        int rc = docs_get(s, txn, walked, id, len, &val);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            int tombstone;
            rc = entry_decode(s, id, len, &val, &out->rec, &tombstone);
            if (rc)
                return rc;
            out->where = tombstone ? SIMS_DOC_GONE : SIMS_DOC_IN_DOCS;
            return SIMSTORE_OK;
        }
    }
    int found = sims_docfile_find_id(snap->docfile, id, len, &out->file);
    if (found < 0)
        return found;
    if (found) {
        out->where = SIMS_DOC_IN_FILE;
        sims_docfile_record(s, &out->file, &out->rec);
    }
    return SIMSTORE_OK;
}

/* One entry of docs handed to fn when it is a document (a tombstone only
 * hides the file's). */
static int docs_entry_each(const simstore *s, const MDB_val *key, const MDB_val *val,
                           sims_doc_fn fn, void *ctx)
{
    if (key->mv_size == 0 || key->mv_size > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("%s: a document id of %zu bytes", s->path, key->mv_size);
    sims_doc_record dr;
    int tombstone;
    int rc = entry_decode(s, key->mv_data, key->mv_size, val, &dr, &tombstone);
    return rc || tombstone ? rc : fn(ctx, (const uint8_t *)key->mv_data, key->mv_size, &dr);
}

/* ---- every document in id order ---------------------------------------- */

int sims_id_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

int sims_docs_each_by_id(simstore *s, const sims_snapshot *snap, MDB_txn *txn,
                         uint64_t memory_bytes, sims_doc_fn fn, void *ctx)
{
    const docfile_reader *r = snap->docfile;
    by_id b = {NULL};
    size_t budget = (size_t)(memory_bytes / 2);
    MDB_cursor *cur = NULL;
    int rc = sims_recsort_new(budget, NULL, &b.sorter);
    if (rc == SIMSTORE_OK)
        rc = sims_docfile_each(r, push_id, &b);
    if (rc == SIMSTORE_OK)
        rc = sims_recsort_finish(b.sorter, budget / 2);
    int m = MDB_NOTFOUND;
    MDB_val key, val;
    if (rc == SIMSTORE_OK && snap->docfile_changed) {
        m = mdb_cursor_open(txn, s->env.docs, &cur);
        if (m)
            rc = sims_mdb_fail(m, "open a cursor on docs");
        else
            m = mdb_cursor_get(cur, &key, &val, MDB_FIRST);
    }
    sims_rec rec;
    int more = rc == SIMSTORE_OK ? sims_recsort_next(b.sorter, &rec) : 0;
    while (rc == SIMSTORE_OK && (more == 1 || m == 0)) {
        int c = more != 1 ? 1
                : m != 0  ? -1
                          : sims_id_cmp(rec.key, rec.key_len, key.mv_data, key.mv_size);
        sims_doc_record dr;
        if (c < 0) { /* the file's, not in docs: live */
            docfile_doc d;
            rc = rec.val_len == 8 ? sims_docfile_get(r, le_load64(rec.val), &d)
                                  : sims_fail(SIMSTORE_EIO, "internal: an id record of %u bytes",
                                              (unsigned)rec.val_len);
            if (rc == SIMSTORE_OK &&
                (d.id_len != rec.key_len || memcmp(d.id, rec.key, d.id_len) != 0))
                rc = SIMS_CORRUPT("%s: the document file changed while read", s->path);
            if (rc == SIMSTORE_OK) {
                sims_docfile_record(s, &d, &dr);
                rc = fn(ctx, d.id, d.id_len, &dr);
            }
            if (rc == SIMSTORE_OK)
                more = sims_recsort_next(b.sorter, &rec);
            continue;
        }
        /* docs's entry: a document, or a tombstone of the file's. */
        rc = docs_entry_each(s, &key, &val, fn, ctx);
        if (rc == SIMSTORE_OK && c == 0)
            more = sims_recsort_next(b.sorter, &rec);
        if (rc == SIMSTORE_OK)
            m = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
    }
    if (rc == SIMSTORE_OK && more < 0)
        rc = more;
    if (rc == SIMSTORE_OK && m != 0 && m != MDB_NOTFOUND)
        rc = sims_mdb_fail(m, "read docs");
    if (cur)
        mdb_cursor_close(cur);
    sims_recsort_free(b.sorter);
    return rc;
}

/* ---- every live document, in no particular order ------------------------ */

typedef struct each_live {
    simstore *s;
    const sims_snapshot *snap;
    MDB_txn *txn;
    int walked;
    sims_doc_fn fn;
    void *ctx;
} each_live;

static int file_doc_live(void *ctx, const docfile_doc *d)
{
    each_live *e = (each_live *)ctx;
    int live = sims_docfile_doc_live(e->s, e->snap->docfile_changed, e->txn, e->walked, d);
    if (live <= 0)
        return live;
    sims_doc_record rec;
    sims_docfile_record(e->s, d, &rec);
    return e->fn(e->ctx, d->id, d->id_len, &rec);
}

int sims_docs_each_live(simstore *s, const sims_snapshot *snap, MDB_txn *txn, int walked,
                        sims_doc_fn fn, void *ctx)
{
    each_live e = {s, snap, txn, walked, fn, ctx};
    int rc = sims_docfile_each(snap->docfile, file_doc_live, &e);
    if (rc || !snap->docfile_changed)
        return rc;
    /* docs's documents (its tombstones only hide the file's). */
    MDB_cursor *cur = NULL;
    int m = mdb_cursor_open(txn, s->env.docs, &cur);
    if (m)
        return sims_mdb_fail(m, "open a cursor on docs");
    MDB_val key, val;
    for (m = mdb_cursor_get(cur, &key, &val, MDB_FIRST); rc == SIMSTORE_OK && m == 0;
         m = mdb_cursor_get(cur, &key, &val, MDB_NEXT))
        rc = docs_entry_each(s, &key, &val, fn, ctx);
    if (rc == SIMSTORE_OK && m != 0 && m != MDB_NOTFOUND)
        rc = sims_mdb_fail(m, "read docs");
    mdb_cursor_close(cur);
    return rc;
}

/* ---- every live fingerprint in order ----------------------------------- */

typedef struct fp_merge {
    simstore *s;
    const sims_snapshot *snap;
    MDB_txn *txn;
    int walked;
    sims_fp_fn fn;
    void *ctx;
    MDB_cursor *cur; /* fps, or NULL */
    int m;           /* the cursor's last return: 0 on an entry */
    MDB_val key, val;
    size_t kcount;
    int have_run;
    uint64_t rfp, rcount;
    const uint8_t *rid;
    size_t rlen;
} fp_merge;

/* fps's current key (its first id in val, its count in kcount). */
static int fps_at(fp_merge *f, MDB_cursor_op op)
{
    f->m = mdb_cursor_get(f->cur, &f->key, &f->val, op);
    if (f->m == MDB_NOTFOUND)
        return SIMSTORE_OK;
    if (f->m)
        return sims_mdb_fail(f->m, "read fps");
    if (f->key.mv_size != 8 || f->val.mv_size == 0 || f->val.mv_size > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("%s: fps entry of a %zu-byte key and a %zu-byte id", f->s->path,
                            f->key.mv_size, f->val.mv_size);
    int m = mdb_cursor_count(f->cur, &f->kcount);
    return m ? sims_mdb_fail(m, "count fps entries") : SIMSTORE_OK;
}

/* Hand over every fps key below fp (all of them: fp UINT64_MAX and last),
 * then fp itself, with fps's documents of it added. */
static int flush_run(fp_merge *f, int last)
{
    int rc = SIMSTORE_OK;
    while (rc == SIMSTORE_OK && f->cur && f->m == 0 &&
           (last || be_load64(f->key.mv_data) < f->rfp)) {
        uint64_t kfp = be_load64(f->key.mv_data);
        if (f->have_run && kfp == f->rfp)
            break;
        rc = f->fn(f->ctx, kfp, f->kcount, (const uint8_t *)f->val.mv_data, f->val.mv_size);
        if (rc == SIMSTORE_OK)
            rc = fps_at(f, MDB_NEXT_NODUP);
    }
    if (rc || !f->have_run)
        return rc;
    uint64_t count = f->rcount;
    const uint8_t *id = f->rid;
    size_t len = f->rlen;
    int both = f->cur && f->m == 0 && be_load64(f->key.mv_data) == f->rfp;
    if (both) {
        count += f->kcount;
        if (!id || sims_id_cmp(f->val.mv_data, f->val.mv_size, id, len) < 0) {
            id = (const uint8_t *)f->val.mv_data;
            len = f->val.mv_size;
        }
    }
    if (count)
        rc = f->fn(f->ctx, f->rfp, count, id, len);
    if (rc == SIMSTORE_OK && both)
        rc = fps_at(f, MDB_NEXT_NODUP);
    f->have_run = 0;
    return rc;
}

static int merge_doc(void *ctx, const docfile_doc *d)
{
    fp_merge *f = (fp_merge *)ctx;
    int rc;
    if (!f->have_run || d->fingerprint != f->rfp) {
        if (f->have_run && (rc = flush_run(f, 0)) != SIMSTORE_OK)
            return rc;
        f->have_run = 1;
        f->rfp = d->fingerprint;
        f->rcount = 0;
        f->rid = NULL;
        f->rlen = 0;
    }
    int live = sims_docfile_doc_live(f->s, f->snap->docfile_changed, f->txn, f->walked, d);
    if (live < 0)
        return live;
    if (live) {
        if (!f->rid) {
            f->rid = d->id;
            f->rlen = d->id_len;
        }
        f->rcount++;
    }
    return SIMSTORE_OK;
}

int sims_docs_each_fp(simstore *s, const sims_snapshot *snap, MDB_txn *txn, int walked,
                      sims_fp_fn fn, void *ctx)
{
    fp_merge f;
    memset(&f, 0, sizeof f);
    f.s = s;
    f.snap = snap;
    f.txn = txn;
    f.walked = walked;
    f.fn = fn;
    f.ctx = ctx;
    f.m = MDB_NOTFOUND;
    int rc = SIMSTORE_OK;
    if (snap->docfile_changed) {
        int m = mdb_cursor_open(txn, s->env.fps, &f.cur);
        rc = m ? sims_mdb_fail(m, "open a cursor on fps") : fps_at(&f, MDB_FIRST);
    }
    if (rc == SIMSTORE_OK)
        rc = sims_docfile_each(snap->docfile, merge_doc, &f);
    if (rc == SIMSTORE_OK && f.have_run)
        rc = flush_run(&f, 0);
    f.have_run = 0;
    if (rc == SIMSTORE_OK)
        rc = flush_run(&f, 1);
    if (f.cur)
        mdb_cursor_close(f.cur);
    return rc;
}
