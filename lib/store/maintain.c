/* maintain.c: changing a store after its build: deleting documents (gone
 * from answers at the commit; their fingerprints stay in the table files,
 * dead, until a compaction), compacting segments into one without the dead
 * fingerprints, and the automatic policy that keeps the number of segments
 * and the share of dead fingerprints bounded. */
#include "store/store_internal.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/fileio.h"
#include "sort/u64sort.h"

#include <inttypes.h>
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

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

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
    qsort(fps, rec->para_count, sizeof *fps, cmp_u64);
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

static int delete_fn(MDB_txn *txn, void *arg)
{
    delete_ctx *c = (delete_ctx *)arg;
    simstore *s = c->s;
    sims_state_record st;
    int rc = sims_store_read_state(s, txn, &st);
    if (rc)
        return rc;
    c->deleted = 0;
    memset(c->missing, 0, c->n);
    uint64_t fps_gone = 0;
    for (size_t i = 0; i < c->n && rc == SIMSTORE_OK; i++) {
        size_t len = c->lens[i];
        if (len == 0 || len > SIMSTORE_MAX_ID_BYTES) {
            c->missing[i] = 1;
            continue;
        }
        MDB_val key = {len, (void *)c->ids[i]}, val;
        int m = mdb_get(txn, s->env.docs, &key, &val);
        if (m == MDB_NOTFOUND) {
            c->missing[i] = 1;
            continue;
        }
        if (m) {
            rc = sims_mdb_write_status(m, "read docs");
            break;
        }
        sims_doc_record rec;
        rc = sims_doc_record_decode((const uint8_t *)key.mv_data, key.mv_size,
                                    (const uint8_t *)val.mv_data, val.mv_size, &rec);
        if (rc) {
            rc = sims_fail_context(rc, "%s: document '%.*s'", s->path, (int)len, c->ids[i]);
            break;
        }
        if (rec.para_count && s->env.pfps) {
            rc = delete_paragraphs(s, txn, &rec, c->ids[i], len);
            if (rc)
                break;
        } else if (rec.para_count) {
            rc = SIMS_CORRUPT("%s: document '%.*s' lists paragraphs, but the store has no "
                              "paragraph index",
                              s->path, (int)len, c->ids[i]);
            break;
        }
        uint8_t fpkey[8];
        be_store64(fpkey, rec.fp);
        MDB_val fk = {8, fpkey}, fv = {len, (void *)c->ids[i]};
        if ((m = mdb_del(txn, s->env.docs, &key, NULL)) != 0 ||
            ((m = mdb_del(txn, s->env.fps, &fk, &fv)) != 0 && m != MDB_NOTFOUND)) {
            rc = sims_mdb_write_status(m, "delete a document");
            break;
        }
        if (m == MDB_NOTFOUND) {
            rc = SIMS_CORRUPT("%s: document '%.*s' is missing from the fingerprint index", s->path,
                              (int)len, c->ids[i]);
            break;
        }
        MDB_val probe_val;
        m = mdb_get(txn, s->env.fps, &fk, &probe_val);
        if (m == MDB_NOTFOUND)
            fps_gone++;
        else if (m) {
            rc = sims_mdb_write_status(m, "read fps");
            break;
        }
        c->deleted++;
    }
    if (rc == SIMSTORE_OK && c->deleted > 0) {
        if (st.doc_count < c->deleted || st.fp_count < fps_gone)
            rc = SIMS_CORRUPT("%s: the state's counts are below what was deleted", s->path);
        else {
            st.generation++;
            st.doc_count -= c->deleted;
            st.fp_count -= fps_gone;
            rc = sims_put_state(txn, s->env.meta, &st);
        }
    }
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
    if ((rc = sims_refuse_document_files(s, "delete")))
        return rc;
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
    sims_segment_entry e = {c->segment_id, c->fp_count, sims_now_unix(), c->table_count, 0};
    sims_segment_entry pe = {c->segment_id + 1, c->para_fp_count, e.created_unix, c->table_count, 0};
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
    else {
        next.fp_count = c->fp_count;
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

/* The live fingerprints, sorted and distinct, into `out`: the keys of `fps`
 * for a store of documents; the union of every segment's table 0 for a
 * fingerprint-only store. */
static int collect_live(simstore *s, MDB_txn *txn, const sims_snapshot *snap, uint64_t memory,
                        sims_spool *out)
{
    uint64_t buf[READ_CHUNK];
    size_t n = 0;
    int rc = SIMSTORE_OK;
    if (!(s->store_flags & SIMS_STORE_FLAG_FP_ONLY))
        return collect_keys(s, txn, s->env.fps, out);
    /* Fingerprint-only: decode table 0 of every segment, unpermute, sort. */
    const sims_permuter *perm = &s->design->tables[0].permuter;
    sims_u64sort *sorter;
    rc = sims_u64sort_new((size_t)(memory / 16), s->path, &sorter);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < snap->segment_count && rc == SIMSTORE_OK; i++) {
        table_cursor cur;
        rc = table_cursor_init(&cur, snap->segments[i]->tables[0], 0, UINT64_MAX);
        while (rc == SIMSTORE_OK && (rc = table_cursor_next(&cur, buf, READ_CHUNK, &n)) == 0 &&
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
    int rc = need_writer(s);
    if (rc == SIMSTORE_OK)
        rc = sims_refuse_document_files(s, "compact");
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
    compact_ctx c = {s, 0, 0, 0, s->design->n_tables, 0};

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
        if ((held == old.fp_count && !para_due) || (s->store_flags & SIMS_STORE_FLAG_FP_ONLY))
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
    c.segment_id = old.next_segment_id;
    c.fp_count = sims_spool_count(live);
    if (c.fp_count > 0) {
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
        written = 1;
        rc = sims_segment_write(&job);
        if (rc)
            goto done;
    }
    c.para_fp_count = plive ? sims_spool_count(plive) : 0;
    if (c.para_fp_count > 0) {
        sims_segment_job job = {
            .design = s->design,
            .store_tag = s->store_tag,
            .block_bytes = s->block_bytes,
            .dir = s->path,
            .segment_id = c.segment_id + 1,
            .distinct = plive,
            .threads = threads,
            .memory_bytes = opt.memory_bytes / 2,
            .progress = opt.progress,
            .progress_ctx = opt.progress_ctx,
        };
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
