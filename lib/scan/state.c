/* state.c: the committed state a store-wide scan reads, the documents of a
 * fingerprint, and ids inside sort keys (state.h). */
#include "scan/state.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"
#include "lmdb/records.h"

#include <stdlib.h>
#include <string.h>

static int state_attempt(void *ctx)
{
    scan_state *st = (scan_state *)ctx;
    int rc = sims_env_read_begin(&st->s->env, &st->txn);
    if (rc)
        return rc;
    rc = sims_store_snapshot(st->s, st->txn, &st->snap);
    if (rc) {
        mdb_txn_abort(st->txn);
        st->txn = NULL;
        st->snap = NULL;
    }
    return rc;
}

int sims_scan_state_begin(simstore *s, scan_state *st)
{
    /* Scans read whole databases: walk all of data.mdb first, unless the
     * open did (format/store.md, "Trusting LMDB"). */
    memset(st, 0, sizeof *st);
    int rc = sims_env_full_walk(&s->env);
    if (rc == SIMSTORE_OK)
        rc = sims_scan_state_begin_lookups(s, st);
    if (rc == SIMSTORE_OK)
        st->walked = 1;
    return rc;
}

int sims_scan_state_begin_lookups(simstore *s, scan_state *st)
{
    memset(st, 0, sizeof *st);
    st->s = s;
    st->fp_only = (s->store_flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    int rc = sims_retry(state_attempt, st);
    if (rc == 0 && !st->fp_only) {
        int mrc = mdb_cursor_open(st->txn, s->env.fps, &st->fps);
        if (mrc)
            rc = sims_mdb_fail(mrc, "open a cursor on fps");
    }
    if (rc)
        sims_scan_state_end(st);
    return rc;
}

void sims_scan_state_end(scan_state *st)
{
    if (st->fps)
        mdb_cursor_close(st->fps);
    if (st->txn)
        mdb_txn_abort(st->txn);
    if (st->snap)
        sims_snapshot_release(st->snap);
    st->fps = NULL;
    st->txn = NULL;
    st->snap = NULL;
}

int sims_scan_options_resolve(const simstore *s, const simstore_scan_options *in, unsigned flags,
                              simstore_scan_options *out)
{
    if (SIMS_CHECK_OPTIONS(in, simstore_scan_options))
        return SIMSTORE_EINVAL;
    if (in)
        *out = *in;
    else
        simstore_scan_options_init(out);
    /* The near-duplicate rule's k and minimum similarity (simstore.h):
     * resolved where every client's are. Above design_k the scan joins the
     * fingerprints in memory under a design for k (pairs.c,
     * join_beyond_design): designs go up to SIMSTORE_MAX_K. */
    simstore_near_rule rule;
    simstore_near_rule_init(&rule);
    rule.k = out->k;
    rule.min_similarity = out->min_similarity;
    rule.bands = out->bands;
    int rc = simstore_near_rule_resolve(&rule, s->design->params.k, s->text.sketch, flags);
    if (rc)
        return rc;
    out->k = rule.k;
    out->min_similarity = rule.min_similarity;
    out->bands = rule.bands;
    if (out->threads == 0)
        out->threads = simstore_default_threads();
    if (out->memory_bytes == 0)
        out->memory_bytes = (uint64_t)1 << 30;
    if (out->memory_bytes < ((uint64_t)16 << 20))
        out->memory_bytes = (uint64_t)16 << 20;
    return SIMSTORE_OK;
}

void sims_scan_near_rule(const simstore_scan_options *o, simstore_sketch_kind sketch,
                         simstore_near_rule *rule)
{
    simstore_near_rule_init(rule);
    rule->k = o->k;
    rule->min_similarity = o->min_similarity;
    rule->bands = o->bands;
    rule->band_rows = rule->band_count = 0;
    if (rule->bands)
        simstore_sketch_bands(sketch, rule->min_similarity, &rule->band_rows, &rule->band_count);
}

void simstore_scan_options_init(simstore_scan_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    simstore_near_rule rule;
    simstore_near_rule_init(&rule);
    o->k = rule.k;
    o->min_similarity = rule.min_similarity;
    o->bands = rule.bands;
}

int simstore_scan_resolve(const simstore *s, const simstore_scan_options *o, unsigned *k,
                          double *min_similarity)
{
    if (!s)
        return sims_fail(SIMSTORE_EINVAL, "simstore_scan_resolve: NULL store");
    simstore_scan_options r;
    int rc = sims_scan_options_resolve(s, o, 0, &r);
    if (rc)
        return rc;
    if (k)
        *k = r.k;
    if (min_similarity)
        *min_similarity = r.min_similarity;
    return SIMSTORE_OK;
}

/* ---- documents of a fingerprint ----------------------------------------- */

static int docs_grow(scan_docs *d, size_t id_bytes)
{
    if (sims_grow((void **)&d->docs, &d->cap, d->count + 1, sizeof *d->docs, 16) ||
        sims_grow_bytes((uint8_t **)&d->ids, &d->ids_cap, d->ids_len, id_bytes, 4096))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for documents");
    return 0;
}

static int docs_append(scan_state *st, const MDB_val *id, const sims_doc_record *rec, int with_meta,
                       scan_docs *d);

/* Append document `id` with its record, checked to hold fp. */
static int docs_add(scan_state *st, uint64_t fp, const MDB_val *id, int with_meta, scan_docs *d)
{
    const char *path = st->s->path;
    if (id->mv_size == 0 || id->mv_size > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("%s: fps entry %016llx holds an id of %zu bytes", path,
                            (unsigned long long)fp, id->mv_size);
    MDB_val key = *id, val;
    int rc = mdb_get(st->txn, st->s->env.docs, &key, &val);
    if (rc == MDB_NOTFOUND)
        return SIMS_CORRUPT("%s: document '%.*s' is in fps but not in docs", path, (int)id->mv_size,
                            (const char *)id->mv_data);
    if (rc)
        return sims_mdb_fail(rc, "read docs");
    sims_doc_record rec;
    rc = sims_doc_record_of_fp(st->s, id->mv_data, id->mv_size, val.mv_data, val.mv_size, fp, &rec);
    return rc ? rc : docs_append(st, id, &rec, with_meta, d);
}

/* Append document `id` with its checked record. */
static int docs_append(scan_state *st, const MDB_val *id, const sims_doc_record *r, int with_meta,
                       scan_docs *d)
{
    sims_doc_record rec = *r;
    size_t meta = with_meta && rec.meta ? rec.meta_len : 0;
    size_t sketch = rec.sketch ? simstore_sketch_bytes(st->s->text.sketch) : 0;
    int rc = docs_grow(d, id->mv_size + meta + sketch);
    if (rc)
        return rc;
    scan_doc *doc = &d->docs[d->count++];
    doc->off = d->ids_len;
    doc->len = (uint32_t)id->mv_size;
    doc->flags = (rec.flags & SIMS_DOC_FLAG_INTEGER_ID) ? SIMSTORE_MATCH_INTEGER_ID : 0;
    doc->insertion = SCAN_RECORD_INSERTION(rec);
    memcpy(d->ids + d->ids_len, id->mv_data, id->mv_size);
    d->ids_len += id->mv_size;
    doc->meta_off = d->ids_len;
    doc->meta_len = meta;
    if (meta) {
        memcpy(d->ids + d->ids_len, rec.meta, meta);
        d->ids_len += meta;
    }
    doc->sketch_off = sketch ? d->ids_len + 1 : 0;
    if (sketch) {
        memcpy(d->ids + d->ids_len, rec.sketch, sketch);
        d->ids_len += sketch;
    }
    return 0;
}

/* fp's documents in a store with a document file (docs_read): the file's
 * live ones merged in id order with fps's (when docs holds changes). */
typedef struct file_read {
    scan_state *st;
    uint64_t fp;
    scan_docs *d;
    int with_meta;
    scan_doc_fn fn;
    void *ctx;
    uint64_t n;
    int m; /* the fps cursor's last return: 0 on an entry of fp */
    MDB_val key, val;
} file_read;

/* One document to d, or to fn (then dropped). */
static int hand_over(file_read *f, int e)
{
    if (e == 0 && f->fn) {
        e = f->fn(f->ctx, f->d, &f->d->docs[0]);
        f->d->count = 0;
        f->d->ids_len = 0;
    }
    f->n++;
    return e;
}

/* fps's documents of fp before id (all of them: id NULL). */
static int fps_docs_before(file_read *f, const uint8_t *id, size_t len)
{
    while (f->m == 0) {
        if (id && sims_id_cmp(f->val.mv_data, f->val.mv_size, id, len) >= 0)
            break;
        int e = hand_over(f, docs_add(f->st, f->fp, &f->val, f->with_meta, f->d));
        if (e)
            return e;
        f->m = mdb_cursor_get(f->st->fps, &f->key, &f->val, MDB_NEXT_DUP);
    }
    return f->m == 0 || f->m == MDB_NOTFOUND ? 0 : sims_mdb_fail(f->m, "read fps");
}

static int file_doc(void *ctx, const docfile_doc *fd)
{
    file_read *f = (file_read *)ctx;
    int live = sims_docfile_doc_live(f->st->s, f->st->snap->docfile_changed, f->st->txn,
                                     f->st->walked, fd);
    if (live <= 0)
        return live;
    int e = fps_docs_before(f, fd->id, fd->id_len);
    if (e)
        return e;
    sims_doc_record rec;
    sims_docfile_record(f->st->s, fd, &rec);
    MDB_val id = {fd->id_len, (void *)fd->id};
    return hand_over(f, docs_append(f->st, &id, &rec, f->with_meta, f->d));
}

/* Read fp's documents into d: all of them (fn NULL), or one at a time,
 * each handed to fn and then dropped. */
static int docs_read(scan_state *st, uint64_t fp, int with_meta, scan_docs *d, scan_doc_fn fn,
                     void *ctx, uint64_t *visited)
{
    d->fp = fp;
    d->valid = 0;
    d->count = 0;
    d->ids_len = 0;
    file_read f = {st, fp, d, with_meta, fn, ctx, 0, MDB_NOTFOUND, {0, NULL}, {0, NULL}};
    uint8_t kb[8];
    be_store64(kb, fp);
    if (st->snap->docfile_changed) {
        f.key.mv_size = 8;
        f.key.mv_data = kb;
        f.m = mdb_cursor_get(st->fps, &f.key, &f.val, MDB_SET_KEY);
        if (f.m && f.m != MDB_NOTFOUND)
            return sims_mdb_fail(f.m, "read fps");
    }
    int e = sims_docfile_find_fp(st->snap->docfile, fp, file_doc, &f);
    if (e == 0)
        e = fps_docs_before(&f, NULL, 0);
    if (e)
        return e;
    if (visited)
        *visited = f.n;
    d->valid = fn == NULL;
    return 0;
}

int sims_scan_docs_load(scan_state *st, uint64_t fp, int with_meta, scan_docs *d)
{
    return docs_read(st, fp, with_meta, d, NULL, NULL, NULL);
}

int sims_scan_docs_each(scan_state *st, uint64_t fp, int with_meta, scan_docs *scratch,
                        scan_doc_fn fn, void *ctx, uint64_t *visited)
{
    *visited = 0;
    return docs_read(st, fp, with_meta, scratch, fn, ctx, visited);
}

void sims_scan_docs_free(scan_docs *d)
{
    free(d->docs);
    free(d->ids);
    memset(d, 0, sizeof *d);
}

typedef struct live_count {
    scan_state *st;
    uint64_t n;
} live_count;

static int count_doc(void *ctx, const docfile_doc *d)
{
    live_count *c = (live_count *)ctx;
    int live =
        sims_docfile_doc_live(c->st->s, c->st->snap->docfile_changed, c->st->txn, c->st->walked, d);
    if (live < 0)
        return live;
    c->n += (uint64_t)live;
    return 0;
}

int sims_scan_fp_count(scan_state *st, uint64_t fp, uint64_t *count)
{
    *count = 0;
    live_count c = {st, 0};
    int e = sims_docfile_find_fp(st->snap->docfile, fp, count_doc, &c);
    *count = c.n; /* and fps's, below */
    if (e || !st->snap->docfile_changed)
        return e;
    uint8_t kb[8];
    be_store64(kb, fp);
    MDB_val key = {8, kb}, val;
    int rc = mdb_cursor_get(st->fps, &key, &val, MDB_SET_KEY);
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc)
        return sims_mdb_fail(rc, "read fps");
    size_t n = 0;
    rc = mdb_cursor_count(st->fps, &n);
    if (rc)
        return sims_mdb_fail(rc, "count fps entries");
    *count += (uint64_t)n;
    return 0;
}

/* Fingerprints with two documents or more (sims_scan_each_shared_fp). */
typedef struct shared_walk {
    scan_shared_fn fn;
    void *ctx;
} shared_walk;

static int shared_fp(void *ctx, uint64_t fp, uint64_t count, const uint8_t *id, size_t len)
{
    (void)id;
    (void)len;
    shared_walk *w = (shared_walk *)ctx;
    return count >= 2 ? w->fn(w->ctx, fp, count) : 0;
}

int sims_scan_each_shared_fp(scan_state *st, scan_shared_fn fn, void *ctx)
{
    /* Documents outnumber fingerprints only when some are shared. */
    if (st->snap->doc_count <= st->snap->fp_count)
        return 0;
    shared_walk w = {fn, ctx};
    return sims_docs_each_fp(st->s, st->snap, st->txn, st->walked, shared_fp, &w);
}

/* ---- ids in sort keys ----------------------------------------------------- */

size_t sims_scan_key_put_id(uint8_t *out, const char *id, size_t len)
{
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        out[w++] = (uint8_t)id[i];
        if (id[i] == 0)
            out[w++] = 1;
    }
    out[w++] = 0;
    out[w++] = 0;
    return w;
}

size_t sims_scan_key_get_id(const uint8_t *key, size_t n, size_t *pos, char *out)
{
    size_t p = *pos, len = 0;
    while (p < n) {
        if (key[p] == 0) {
            if (p + 1 < n && key[p + 1] == 1) {
                out[len++] = 0;
                p += 2;
                continue;
            }
            p += 2; /* the end mark */
            break;
        }
        out[len++] = (char)key[p++];
    }
    *pos = p;
    return len;
}
