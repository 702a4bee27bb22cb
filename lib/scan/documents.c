/* documents.c: documents by id: simstore_get (records and the segment that
 * holds each fingerprint) and simstore_export (every live document in id
 * or insertion order), each read from one committed state. */
#include "scan/clusters.h"
#include "scan/pairs.h"
#include "scan/state.h"

#include "common/bytes.h"
#include "common/error.h"
#include "lmdb/records.h"
#include "sort/recsort.h"
#include "table/table.h"

#include <stdlib.h>
#include <string.h>

/* Where a document's id and metadata are copied: grown as documents need,
 * not sized for the largest one a store could hold. */
typedef struct doc_buf {
    char *p;
    size_t cap;
} doc_buf;

static int record_document(const scan_state *st, const MDB_val *key, const sims_doc_record *r,
                           doc_buf *buf, simstore_document *d);

/* A record of docs as a simstore_document (id and meta copied into buf,
 * NUL-terminated). */
static int to_document(const scan_state *st, const MDB_val *key, const MDB_val *val, doc_buf *buf,
                       simstore_document *d)
{
    sims_doc_record rec;
    int rc = sims_doc_record_decode((const uint8_t *)key->mv_data, key->mv_size,
                                    (const uint8_t *)val->mv_data, val->mv_size, &rec);
    if (rc)
        return sims_fail_context(rc, "%s: document '%.*s'", st->s->path,
                                 (int)(key->mv_size > 64 ? 64 : key->mv_size),
                                 (const char *)key->mv_data);
    return record_document(st, key, &rec, buf, d);
}

/* The checked record of document `key` as a simstore_document. */
static int record_document(const scan_state *st, const MDB_val *key, const sims_doc_record *r,
                           doc_buf *db, simstore_document *d)
{
    sims_doc_record rec = *r;
    if (key->mv_size == 0 || key->mv_size > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("%s: a document id of %zu bytes", st->s->path, key->mv_size);
    size_t need = key->mv_size + 1 + (rec.meta ? rec.meta_len + 1 : 0);
    if (need > db->cap) {
        size_t cap = need < 1024 ? 1024 : need;
        char *p = realloc(db->p, cap);
        if (!p)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for a document of %zu bytes", need);
        db->p = p;
        db->cap = cap;
    }
    char *buf = db->p;
    memset(d, 0, sizeof *d);
    memcpy(buf, key->mv_data, key->mv_size);
    buf[key->mv_size] = '\0';
    d->id = buf;
    d->id_len = key->mv_size;
    d->flags = (rec.flags & SIMS_DOC_FLAG_INTEGER_ID) ? SIMSTORE_MATCH_INTEGER_ID : 0;
    d->fp = rec.fp;
    d->insertion = rec.insertion;
    if (rec.sketch) {
        d->sketch = rec.sketch; /* inside the record, valid as long as val */
        d->sketch_bytes = simstore_sketch_bytes((simstore_sketch_kind)rec.sketch_kind);
    }
    if (rec.para_count) {
        d->paragraphs = rec.paras; /* inside the record, as the sketch */
        d->paragraph_count = rec.para_count;
    }
    if (rec.meta) {
        char *m = buf + key->mv_size + 1;
        memcpy(m, rec.meta, rec.meta_len);
        m[rec.meta_len] = '\0';
        d->meta = m;
        d->meta_len = rec.meta_len;
    }
    return SIMSTORE_OK;
}

/* ---- get ------------------------------------------------------------------ */

static int note_found(void *ctx, uint64_t value)
{
    (void)value;
    *(int *)ctx = 1;
    return 1; /* one is enough */
}

/* The newest live segment whose table 0 holds fp (0: none). */
static int segment_of(const scan_state *st, uint64_t fp, uint64_t *segment)
{
    const sims_permuter *pm = &st->s->design->tables[0].permuter;
    uint64_t p = sims_permute(pm, fp);
    *segment = 0;
    for (uint32_t i = st->snap->segment_count; i-- > 0;) {
        int found = 0;
        int rc = sims_table_reader_search(st->snap->segments[i]->tables[0], p, p, p, 0, note_found,
                                          &found);
        if (rc < 0)
            return rc;
        if (found) {
            *segment = st->snap->segments[i]->id;
            return SIMSTORE_OK;
        }
    }
    return SIMSTORE_OK;
}

/* A document the store does not hold: its id (copied into buf), missing. */
static void missing_document(const char *id, size_t len, char *buf, simstore_document *d)
{
    memset(d, 0, sizeof *d);
    memcpy(buf, id, len);
    buf[len] = '\0';
    d->id = buf;
    d->id_len = len;
    d->missing = 1;
}

int simstore_get(simstore *s, const char *const *ids, const size_t *lens, size_t n,
                 simstore_document_fn fn, void *ctx)
{
    if (!s || !fn || (n && (!ids || !lens)))
        return sims_fail(SIMSTORE_EINVAL, "simstore_get: NULL store, ids or callback");
    if (s->store_flags & SIMS_STORE_FLAG_FP_ONLY)
        return sims_fail(SIMSTORE_EINVAL,
                         "%s holds fingerprints only: there are no documents to get by id",
                         s->path);
    for (size_t i = 0; i < n; i++)
        if (!ids[i] || lens[i] == 0 || lens[i] > SIMSTORE_MAX_ID_BYTES)
            return sims_fail(SIMSTORE_EINVAL,
                             "simstore_get: id %zu is empty or longer than %d "
                             "bytes",
                             i, SIMSTORE_MAX_ID_BYTES);
    scan_state st;
    int rc = sims_scan_state_begin_lookups(s, &st);
    if (rc)
        return rc;
    doc_buf buf = {NULL, 0};
    char idbuf[SIMSTORE_MAX_ID_BYTES + 1];
    for (size_t i = 0; i < n && rc == 0; i++) {
        sims_doc_found f;
        simstore_document d;
        rc = sims_doc_lookup(s, st.snap, st.txn, 0, ids[i], lens[i], &f);
        if (rc)
            break;
        if (f.where == SIMS_DOC_IN_DOCS || f.where == SIMS_DOC_IN_FILE) {
            MDB_val key = {lens[i], (void *)ids[i]};
            rc = record_document(&st, &key, &f.rec, &buf, &d);
            if (rc == 0)
                rc = segment_of(&st, d.fp, &d.segment);
            if (rc == 0 && d.segment == 0)
                rc = SIMS_CORRUPT("%s: document '%s' has fingerprint %016llx, which no live "
                                  "segment holds",
                                  s->path, d.id, (unsigned long long)d.fp);
        } else {
            missing_document(ids[i], lens[i], idbuf, &d);
        }
        if (rc == 0)
            rc = fn(ctx, &d);
    }
    free(buf.p);
    sims_scan_state_end(&st);
    /* A view that went stale after documents went out. */
    return sims_retry_final(rc);
}

/* ---- export ----------------------------------------------------------------- */

typedef struct exporter {
    scan_state *st;
    simstore_document_fn fn;
    void *ctx;
    doc_buf buf;
    sims_recsort *order; /* SIMSTORE_EXPORT_BY_INSERTION */
} exporter;

/* One fingerprint of a fingerprint-only store, in order: a document. */
static int export_fp(void *ctx, uint64_t fp)
{
    exporter *e = (exporter *)ctx;
    simstore_document d;
    memset(&d, 0, sizeof d);
    d.fp = fp;
    return e->fn(e->ctx, &d);
}

/* By insertion: key = insertion number (big-endian) then the escaped id,
 * value = the docs record as stored (decoded and checked again on the way
 * out). */
static int push_by_insertion(exporter *e, const MDB_val *key, const MDB_val *val,
                             const simstore_document *d)
{
    uint8_t k[8 + 2 * SIMSTORE_MAX_ID_BYTES + 2];
    be_store64(k, d->insertion);
    size_t len = 8 + sims_scan_key_put_id(k + 8, key->mv_data, key->mv_size);
    if (val->mv_size > UINT32_MAX)
        return SIMS_CORRUPT("%s: a document record of %zu bytes", e->st->s->path, val->mv_size);
    return sims_recsort_push(e->order, k, (uint32_t)len, val->mv_data, (uint32_t)val->mv_size);
}

static int deliver_by_insertion(exporter *e, size_t keep_bytes)
{
    int rc = sims_recsort_finish(e->order, keep_bytes);
    sims_rec r;
    int got = 0;
    char id[SIMSTORE_MAX_ID_BYTES + 1];
    while (rc == 0 && (got = sims_recsort_next(e->order, &r)) == 1) {
        size_t pos = 8;
        size_t len = sims_scan_key_get_id(r.key, r.key_len, &pos, id);
        MDB_val key = {len, id}, val = {r.val_len, (void *)r.val};
        simstore_document d;
        rc = to_document(e->st, &key, &val, &e->buf, &d);
        if (rc == 0)
            rc = e->fn(e->ctx, &d);
    }
    return rc ? rc : got < 0 ? got : 0;
}

/* One live document of a store with a document file, in id order: to fn,
 * or to the insertion-order sorter (its record encoded as docs would hold
 * it, so that deliver_by_insertion reads both kinds of store alike). */
static int export_file_doc(void *ctx, const uint8_t *id, size_t len, const sims_doc_record *rec)
{
    exporter *e = (exporter *)ctx;
    MDB_val key = {len, (void *)id};
    if (e->order) {
        size_t need =
            sims_doc_record_size(rec->meta_len, SIMS_DOC_FLAG_INSERTION |
                                                    SIMS_DOC_FLAG_SKETCH(rec->sketch_kind) |
                                                    SIMS_DOC_FLAG_PARAGRAPHS) +
            (size_t)rec->para_count * 8;
        uint8_t *v = malloc(need);
        if (!v)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory");
        size_t n = sims_doc_record_encode_full(
            id, len, rec->fp, rec->flags | SIMS_DOC_FLAG_SKETCH(rec->sketch_kind), rec->insertion,
            rec->sketch, rec->paras, rec->para_count, rec->meta, rec->meta_len, v, need);
        simstore_document d;
        memset(&d, 0, sizeof d);
        d.insertion = rec->insertion;
        MDB_val val = {n, v};
        int rc = n ? push_by_insertion(e, &key, &val, &d)
                   : sims_fail(SIMSTORE_EIO, "internal: a record of %zu bytes", need);
        free(v);
        return rc;
    }
    simstore_document d;
    int rc = record_document(e->st, &key, rec, &e->buf, &d);
    return rc ? rc : e->fn(e->ctx, &d);
}

int simstore_export(simstore *s, const simstore_scan_options *opts, unsigned flags,
                    simstore_document_fn fn, void *ctx)
{
    if (!s || !fn)
        return sims_fail(SIMSTORE_EINVAL, "simstore_export: NULL store or callback");
    if (flags & ~SIMSTORE_EXPORT_BY_INSERTION)
        return sims_fail(SIMSTORE_EINVAL, "simstore_export: unknown flags %#x", flags);
    int fp_only = (s->store_flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    if (fp_only && (flags & SIMSTORE_EXPORT_BY_INSERTION))
        return sims_fail(SIMSTORE_EINVAL,
                         "%s holds fingerprints only: they have no insertion order", s->path);
    if (SIMS_CHECK_OPTIONS(opts, simstore_scan_options))
        return SIMSTORE_EINVAL;
    simstore_scan_options o;
    if (opts)
        o = *opts;
    else
        simstore_scan_options_init(&o);
    if (o.memory_bytes == 0)
        o.memory_bytes = (uint64_t)1 << 30;
    if (o.memory_bytes < ((uint64_t)16 << 20))
        o.memory_bytes = (uint64_t)16 << 20;
    scan_state st;
    int rc = sims_scan_state_begin(s, &st);
    if (rc)
        return rc;
    exporter e = {&st, fn, ctx, {NULL, 0}, NULL};
    if (rc == 0 && fp_only) {
        rc = sims_scan_each_stored_fp(&st, &o, (size_t)(o.memory_bytes / 16), export_fp, &e, NULL);
        goto done;
    }
    if (rc == 0 && (flags & SIMSTORE_EXPORT_BY_INSERTION))
        rc = sims_scan_sorter_new(&o, 2, &e.order);
    if (rc == 0)
        rc = sims_docs_each_by_id(s, st.snap, st.txn, o.memory_bytes / 2, export_file_doc, &e);
    if (rc == 0 && e.order)
        rc = deliver_by_insertion(&e, (size_t)(o.memory_bytes / 2));
done:
    sims_recsort_free(e.order);
    free(e.buf.p);
    sims_scan_state_end(&st);
    return rc;
}
