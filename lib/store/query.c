/* query.c: answering "which documents are within distance k of this
 * fingerprint": probe every table of every segment, unpermute and dedupe the
 * candidates, then look up their documents in LMDB. A query object keeps its
 * read transaction (reset between queries) and buffers that only grow. The
 * batch queries of lib/scan share its document lookup, cross-checks and
 * match order through the sims_query_* functions at the end. */
#include "store/store_internal.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"

#include <stdlib.h>
#include <string.h>

typedef struct probe {
    uint64_t lo, hi;
    table_start at; /* where its search starts */
    simstore_query *q;
    const sims_permuter *permuter; /* of the probe's table */
    const docfile_reader *docfile; /* the snapshot's (sims_docfile_empty() when none) */
} probe;

struct simstore_query {
    simstore *store;
    probe *probes; /* one per table per segment */
    size_t probe_cap;
    unsigned flags;
    MDB_txn *txn; /* reset between queries */
    MDB_cursor *fps_cursor;
    uint64_t *cand;
    size_t cand_len;
    size_t cand_cap;
    simstore_match *matches;
    size_t match_len;
    size_t match_cap;
    char *arena;
    size_t arena_len;
    size_t arena_cap;
    sims_prober pr;     /* the table being probed, its prefix masks */
    uint8_t *from_file; /* per match: 1 when read (and attached) from a document file */
    size_t from_file_cap;
    const uint8_t *query_sketch; /* of the query being answered, or NULL */
    uint8_t query_sketch_buf[SIMSTORE_SKETCH_MAX_BYTES];
    sims_para_buffers *para;   /* paragraph queries' (paragraphs.c), or NULL */
    const sims_snapshot *snap; /* the state being answered from, while it is */
};

simstore *sims_query_store(const simstore_query *q)
{
    return q->store;
}

unsigned sims_query_flags(const simstore_query *q)
{
    return q->flags;
}

sims_para_buffers **sims_query_para_buffers(simstore_query *q)
{
    return &q->para;
}

int simstore_query_new(simstore *s, unsigned flags, simstore_query **out)
{
    *out = NULL;
    simstore_query *q = calloc(1, sizeof *q);
    if (!q)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a query");
    q->store = s;
    q->flags = flags;
    int rc = sims_env_read_begin(&s->env, &q->txn);
    if (rc == SIMSTORE_OK) {
        int mrc = mdb_cursor_open(q->txn, s->env.fps, &q->fps_cursor);
        if (mrc)
            rc = sims_mdb_fail(mrc, "open a cursor");
    }
    if (rc) {
        simstore_query_free(q);
        return rc;
    }
    mdb_txn_reset(q->txn);
    q->cand_cap = 256;
    q->match_cap = 64;
    q->arena_cap = 4096;
    q->cand = malloc(q->cand_cap * sizeof *q->cand);
    q->matches = malloc(q->match_cap * sizeof *q->matches);
    q->arena = malloc(q->arena_cap);
    if (!q->cand || !q->matches || !q->arena) {
        simstore_query_free(q);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a query");
    }
    *out = q;
    return SIMSTORE_OK;
}

void simstore_query_free(simstore_query *q)
{
    if (!q)
        return;
    if (q->fps_cursor)
        mdb_cursor_close(q->fps_cursor);
    if (q->txn)
        mdb_txn_abort(q->txn);
    sims_para_buffers_free(q->para);
    free(q->probes);
    free(q->pr.masks);
    free(q->from_file);
    free(q->cand);
    free(q->matches);
    free(q->arena);
    free(q);
}

static int add_candidate(simstore_query *q, const sims_permuter *permuter, uint64_t permuted)
{
    if (q->cand_len == q->cand_cap &&
        sims_grow16((void **)&q->cand, &q->cand_cap, q->cand_len + 1, sizeof *q->cand)) {
        q->pr.grow_failed = 1;
        return 1;
    }
    q->cand[q->cand_len++] = sims_unpermute(permuter, permuted);
    return 0;
}

static int collect_candidate(void *ctx, uint64_t permuted)
{
    simstore_query *q = (simstore_query *)ctx;
    return add_candidate(q, q->pr.permuter, permuted);
}

/* collect_candidate for one probe of probe_design (ctx: the probe). */
static int collect_probed(void *ctx, uint64_t permuted)
{
    const probe *p = (const probe *)ctx;
    int rc = add_candidate(p->q, p->permuter, permuted);
    /* Its documents' lookup will start there: let the line come meanwhile. */
    if (rc == 0)
        sims_docfile_prefetch_fp(p->docfile, p->q->cand[p->q->cand_len - 1]);
    return rc;
}

int sims_match_cmp(const void *a, const void *b)
{
    const simstore_match *x = (const simstore_match *)a, *y = (const simstore_match *)b;
    if (x->distance != y->distance)
        return x->distance < y->distance ? -1 : 1;
    int c = x->id && y->id ? sims_id_cmp(x->id, x->id_len, y->id, y->id_len) : 0;
    if (c)
        return c;
    return (x->fp > y->fp) - (x->fp < y->fp);
}

/* Append a copy of bytes (NUL-terminated) to the arena; returns its offset. */
static int arena_put(simstore_query *q, const void *data, size_t n, size_t *off)
{
    *off = q->arena_len; /* set on failure too: callers' offsets are never undefined */
    if (sims_arena_put(&q->arena, &q->arena_cap, &q->arena_len, data, n, off))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for query results");
    return SIMSTORE_OK;
}

static int push_match(simstore_query *q, size_t id_off, size_t id_len, int has_id, uint64_t fp,
                      unsigned distance)
{
    if (sims_grow16((void **)&q->matches, &q->match_cap, q->match_len + 1, sizeof *q->matches) ||
        sims_grow16((void **)&q->from_file, &q->from_file_cap, q->match_len + 1, 1))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for query results");
    q->from_file[q->match_len] = 0;
    simstore_match *m = &q->matches[q->match_len++];
    memset(m, 0, sizeof *m);
    /* Offsets now, pointers once the arena stops moving
     * (sims_matches_point_into; the metadata and the sketch too). */
    m->id = has_id ? (const char *)(uintptr_t)(id_off + 1) : NULL;
    m->id_len = id_len;
    m->fp = fp;
    m->distance = distance;
    m->similarity = SIMSTORE_SIMILARITY_UNKNOWN;
    return SIMSTORE_OK;
}

/* LMDB answer cross-check (issue 6; format/store.md, "Trusting LMDB").
 * A table holds fp but fps does not: its documents were deleted, or a
 * damaged byte changed fp's key in fps (LMDB 0.9 keeps no page checksums).
 * The walk at open (lmdbwalk.h) has checked that fps keys are in order, so a
 * damaged key still sits where fp would be: the first key after fp or the
 * last one before it. A key whose document records another fingerprint
 * gives it away; a deletion leaves both neighbours consistent. */
static int check_neighbour(void *ctx, int rc, const MDB_val *key, const MDB_val *val)
{
    simstore_query *q = (simstore_query *)ctx;
    simstore *s = q->store;
    if (rc == MDB_NOTFOUND)
        return SIMSTORE_OK;
    if (rc)
        return sims_mdb_fail(rc, "read fps");
    if (key->mv_size != 8 || val->mv_size == 0 || val->mv_size > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("%s: fps entry of a %zu-byte key and a %zu-byte id", s->path,
                            key->mv_size, val->mv_size);
    uint64_t kfp = be_load64(key->mv_data);
    MDB_val id = *val, rec_val;
    rc = sims_env_check(&s->env, q->txn, s->env.docs, id.mv_data, id.mv_size, SIMS_LMDB_READ_GET);
    if (rc)
        return rc;
    rc = mdb_get(q->txn, s->env.docs, &id, &rec_val);
    if (rc == MDB_NOTFOUND)
        return SIMS_CORRUPT("%s: fps entry %016llx lists document '%.*s', which docs lacks",
                            s->path, (unsigned long long)kfp, (int)id.mv_size,
                            (const char *)id.mv_data);
    if (rc)
        return sims_mdb_fail(rc, "read docs");
    sims_doc_record rec;
    rc = sims_doc_record_decode((const uint8_t *)id.mv_data, id.mv_size,
                                (const uint8_t *)rec_val.mv_data, rec_val.mv_size, &rec);
    if (rc)
        return sims_fail_context(rc, "%s: document '%.*s'", s->path, (int)id.mv_size,
                                 (const char *)id.mv_data);
    if (rec.fp != kfp)
        return SIMS_CORRUPT("%s: fps key %016llx lists document '%.*s', whose fingerprint is "
                            "%016llx (a damaged fps key)",
                            s->path, (unsigned long long)kfp, (int)id.mv_size,
                            (const char *)id.mv_data, (unsigned long long)rec.fp);
    return SIMSTORE_OK;
}

/* The neighbours must also lie on either side of fp: a key at or past fp
 * from MDB_PREV_NODUP, or at or before it from MDB_SET_RANGE, means the
 * search for fp was sent down the wrong branch (a damaged separator the
 * lazy checks of one path cannot see: format/store.md, "Trusting LMDB"). */
static int check_side(const simstore *s, const char *name, int rc, const MDB_val *key, uint64_t fp,
                      int after)
{
    if (rc || key->mv_size != 8)
        return SIMSTORE_OK;
    uint64_t kfp = be_load64(key->mv_data);
    if (after ? kfp > fp : kfp < fp)
        return SIMSTORE_OK;
    return SIMS_CORRUPT("%s: %s has no key %016llx, but its key %s it is %016llx (a damaged "
                        "branch page)",
                        s->path, name, (unsigned long long)fp, after ? "after" : "before",
                        (unsigned long long)kfp);
}

int sims_check_fp_absent(simstore *s, MDB_txn *txn, MDB_dbi dbi, MDB_cursor *cur, const char *name,
                         uint64_t fp, sims_neighbour_fn neighbour, void *ctx)
{
    uint8_t keybuf[8];
    be_store64(keybuf, fp);
    int rc = sims_env_check(&s->env, txn, dbi, keybuf, 8, SIMS_LMDB_READ_AROUND);
    if (rc)
        return rc;
    MDB_val key = {8, keybuf}, val;
    int after = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
    rc = neighbour(ctx, after, &key, &val);
    if (rc == SIMSTORE_OK)
        rc = check_side(s, name, after, &key, fp, 1);
    if (rc)
        return rc;
    int before = mdb_cursor_get(cur, &key, &val, after == MDB_NOTFOUND ? MDB_LAST : MDB_PREV_NODUP);
    rc = neighbour(ctx, before, &key, &val);
    return rc ? rc : check_side(s, name, before, &key, fp, 0);
}

/* One document id of fingerprint fp, as fps lists it: a match. */
typedef struct id_sink {
    simstore_query *q;
    uint64_t fp;
    unsigned distance;
} id_sink;

static int put_id(void *ctx, const uint8_t *id, size_t len)
{
    id_sink *k = (id_sink *)ctx;
    simstore_query *q = k->q;
    size_t off;
    if (len == 0 || len > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("%s: fps entry %016llx holds an id of %zu bytes", q->store->path,
                            (unsigned long long)k->fp, len);
    int rc = arena_put(q, id, len, &off);
    return rc ? rc : push_match(q, off, len, 1, k->fp, k->distance);
}

static int lookup_documents(simstore_query *q, uint64_t fp, unsigned distance)
{
    simstore *s = q->store;
    uint8_t keybuf[8];
    be_store64(keybuf, fp);
    MDB_val key = {8, keybuf}, val;
    id_sink sink = {q, fp, distance};
    int done, found;
    /* With lazy checks, the ids come from the pages just checked. */
    int rc = sims_env_check_read(&s->env, q->txn, s->env.fps, keybuf, 8, SIMS_LMDB_READ_DUPS,
                                 put_id, &sink, &done, &found);
    if (rc || (done && found))
        return rc;
    rc = done ? MDB_NOTFOUND : mdb_cursor_get(q->fps_cursor, &key, &val, MDB_SET_KEY);
    if (rc == MDB_NOTFOUND)
        return sims_check_fp_absent(s, q->txn, s->env.fps, q->fps_cursor, "fps", fp,
                                    check_neighbour, q); /* deleted, unless a damaged key */
    while (rc == 0) {
        int e = put_id(&sink, (const uint8_t *)val.mv_data, val.mv_size);
        if (e)
            return e;
        rc = mdb_cursor_get(q->fps_cursor, &key, &val, MDB_NEXT_DUP);
    }
    return rc == MDB_NOTFOUND ? SIMSTORE_OK : sims_mdb_fail(rc, "read fps");
}

/* Where attach_record puts what it reads of a match's record. */
typedef struct record_sink {
    simstore_query *q;
    simstore_match *m;
    int with_meta;
} record_sink;

static int attach_record(void *ctx, const uint8_t *value, size_t len);

/* A document's fields onto match m, from its record in docs (attach_record)
 * or its document file (put_docfile_doc): its flags and insertion number;
 * its sketch (when it has one) copied out, its arena offset + 1 in
 * m->sketch, and its similarity to the query's estimated; its metadata
 * (when meta is not NULL: q's flags ask for it) copied out the same way
 * (sims_matches_point_into makes both pointers). */
static int attach_fields(simstore_query *q, simstore_match *m, int int_id, uint64_t insertion,
                         const uint8_t *sketch, const uint8_t *meta, size_t meta_len)
{
    simstore *s = q->store;
    size_t off;
    m->flags = int_id ? SIMSTORE_MATCH_INTEGER_ID : 0;
    m->insertion = insertion;
    if (sketch) {
        m->similarity = q->query_sketch
                            ? simstore_sketch_similarity(s->text.sketch, q->query_sketch, sketch)
                            : SIMSTORE_SIMILARITY_UNKNOWN;
        /* A record borrows LMDB's page, which the arena cannot move. */
        int rc = arena_put(q, sketch, simstore_sketch_bytes(s->text.sketch), &off);
        if (rc)
            return rc;
        m->sketch = (const uint8_t *)(uintptr_t)(off + 1);
    }
    if (meta) {
        /* Copied out before the arena moves (match m's id key points into it). */
        int rc = arena_put(q, meta, meta_len, &off);
        if (rc)
            return rc;
        m->meta_len = meta_len;
        m->meta = (const char *)(uintptr_t)(off + 1);
    }
    return SIMSTORE_OK;
}

/* Check match m against its document record: its fingerprint, and its
 * sketch's kind against the store's; copy the sketch out (its arena offset
 * + 1 in m->sketch) and estimate the similarity to the query's; with
 * with_meta, also copy the metadata out (m->meta, the same way). */
static int attach_meta(simstore_query *q, simstore_match *m, int with_meta)
{
    simstore *s = q->store;
    MDB_val key = {m->id_len, (void *)(q->arena + (uintptr_t)m->id - 1)}, val;
    record_sink sink = {q, m, with_meta};
    int done, found;
    /* With lazy checks, the record comes from the pages just checked. */
    int rc = sims_env_check_read(&s->env, q->txn, s->env.docs, key.mv_data, key.mv_size,
                                 SIMS_LMDB_READ_GET, attach_record, &sink, &done, &found);
    if (rc || (done && found))
        return rc;
    rc = done ? MDB_NOTFOUND : mdb_get(q->txn, s->env.docs, &key, &val);
    if (rc == MDB_NOTFOUND)
        return SIMS_CORRUPT("%s: document '%.*s' is in fps but not in docs", s->path,
                            (int)m->id_len, (const char *)key.mv_data);
    if (rc)
        return sims_mdb_fail(rc, "read docs");
    return attach_record(&sink, (const uint8_t *)val.mv_data, val.mv_size);
}

/* The record of match m's document (value[0, len), borrowed from data.mdb)
 * checked and attached to m (attach_meta). */
static int attach_record(void *ctx, const uint8_t *value, size_t len)
{
    record_sink *sink = (record_sink *)ctx;
    simstore_query *q = sink->q;
    simstore_match *m = sink->m;
    const char *id = q->arena + (uintptr_t)m->id - 1;
    sims_doc_record rec;
    int rc = sims_doc_record_of_fp(q->store, id, m->id_len, value, len, m->fp, &rec);
    return rc ? rc
              : attach_fields(q, m, rec.flags & SIMS_DOC_FLAG_INTEGER_ID, rec.insertion, rec.sketch,
                              sink->with_meta ? rec.meta : NULL, rec.meta_len);
}

int sims_doc_record_of_fp(const simstore *s, const void *id, size_t id_len, const void *value,
                          size_t len, uint64_t fp, sims_doc_record *rec)
{
    int rc = sims_doc_record_decode((const uint8_t *)id, id_len, (const uint8_t *)value, len, rec);
    if (rc)
        return sims_fail_context(rc, "%s: document '%.*s'", s->path, (int)id_len, (const char *)id);
    if (rec->fp != fp)
        return SIMS_CORRUPT("%s: document '%.*s' has fingerprint %016llx in docs, %016llx in fps",
                            s->path, (int)id_len, (const char *)id, (unsigned long long)rec->fp,
                            (unsigned long long)fp);
    return sims_check_doc_sketch(s, rec, (const char *)id, id_len);
}

/* Sort small arrays by insertion (the usual case: a handful of candidates
 * and matches), larger ones with qsort. */
static void sort_small(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 16) {
        qsort(base, n, size, cmp);
        return;
    }
    unsigned char *a = (unsigned char *)base, tmp[sizeof(simstore_match)];
    for (size_t i = 1; i < n; i++) {
        memcpy(tmp, a + i * size, size);
        size_t j = i;
        for (; j > 0 && cmp(a + (j - 1) * size, tmp) > 0; j--)
            memcpy(a + j * size, a + (j - 1) * size, size);
        memcpy(a + j * size, tmp, size);
    }
}

int sims_probe_near(sims_prober *pr, const sims_design *d, sims_segment *const *segs, uint32_t n,
                    uint64_t fp, unsigned k, unsigned flips, int (*emit)(void *ctx, uint64_t value),
                    void *ctx, const char *what)
{
    /* Above the design's k (format/design.md, "Beyond k"): some table's
     * prefix has at most `flips` bits flipped, so every prefix within that
     * many bits of the query's is probed in every table. */
    for (uint32_t t = 0; t < d->n_tables; t++) {
        unsigned p = d->tables[t].prefix_bits;
        size_t nm = sims_design_prefix_masks(p, flips, pr->masks, pr->mask_cap);
        if (nm > pr->mask_cap) {
            if (sims_grow16((void **)&pr->masks, &pr->mask_cap, nm, sizeof *pr->masks))
                return sims_fail(SIMSTORE_ENOMEM, "out of memory for %s probes", what);
            sims_design_prefix_masks(p, flips, pr->masks, pr->mask_cap);
        }
        uint64_t lo, hi;
        sims_design_probe(d, t, fp, &lo, &hi);
        pr->permuter = &d->tables[t].permuter;
        uint64_t pq = sims_permute(pr->permuter, fp);
        for (uint32_t i = 0; i < n; i++) {
            const table_reader *r = segs[i]->tables[t];
            for (size_t j = 0; j < nm; j++) {
                int rc = sims_table_reader_search(r, lo ^ pr->masks[j], hi ^ pr->masks[j], pq, k,
                                                  emit, ctx);
                if (pr->grow_failed)
                    return sims_fail(SIMSTORE_ENOMEM, "out of memory for %s candidates", what);
                if (rc)
                    return rc;
            }
        }
    }
    return SIMSTORE_OK;
}

/* Phase 1 within the design's k: one probe a table and segment. */
static int probe_design(simstore_query *q, const sims_snapshot *snap, uint64_t fp, unsigned k)
{
    const sims_design *d = q->store->design;
    size_t need = (size_t)snap->segment_count * d->n_tables;
    if (sims_grow16((void **)&q->probes, &q->probe_cap, need ? need : 1, sizeof *q->probes))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for query probes");
    /* Every probe's index chunk and blocks are cold in a large store: ask
     * for all the chunks, then (finding each probe's first block in its
     * chunk) for all the blocks, so that the tables' memory reads overlap,
     * then search. */
    uint32_t nprobe = 0;
    for (uint32_t i = 0; i < snap->segment_count; i++) {
        const sims_segment *seg = snap->segments[i];
        for (uint32_t t = 0; t < seg->table_count; t++, nprobe++) {
            probe *p = &q->probes[nprobe];
            sims_design_probe(d, t, fp, &p->lo, &p->hi);
            sims_table_reader_prefetch_index(seg->tables[t], p->lo, &p->at);
        }
    }
    nprobe = 0;
    for (uint32_t i = 0; i < snap->segment_count; i++) {
        const sims_segment *seg = snap->segments[i];
        for (uint32_t t = 0; t < seg->table_count; t++, nprobe++) {
            probe *p = &q->probes[nprobe];
            sims_table_reader_prefetch(seg->tables[t], p->lo, p->hi, &p->at);
        }
    }
    /* Then the searches two at a time, their blocks decoded in one loop. */
    table_probe tp[2];
    int held = 0;
    size_t hinted = 0; /* candidates whose block table lines are asked for */
    nprobe = 0;
    for (uint32_t i = 0; i < snap->segment_count; i++) {
        const sims_segment *seg = snap->segments[i];
        for (uint32_t t = 0; t < seg->table_count; t++, nprobe++) {
            probe *p = &q->probes[nprobe];
            p->q = q;
            p->permuter = &d->tables[t].permuter;
            p->docfile = snap->docfile;
            tp[held++] =
                (table_probe){seg->tables[t], p->at, p->lo, p->hi, sims_permute(p->permuter, fp), k,
                              collect_probed, p};
            int last = i + 1 == snap->segment_count && t + 1 == seg->table_count;
            if (held < 2 && !last)
                continue;
            int rc = held == 2
                         ? sims_table_reader_search_two(&tp[0], &tp[1])
                         : sims_table_reader_search_from(tp[0].r, &tp[0].at, tp[0].lo, tp[0].hi,
                                                         tp[0].q, k, collect_probed, tp[0].ctx);
            held = 0;
            if (q->pr.grow_failed)
                return sims_fail(SIMSTORE_ENOMEM, "out of memory for query candidates");
            if (rc)
                return rc;
            /* The candidates so far will want their document file's block
             * table next: its lines come while the next tables are searched
             * (their directory lines were asked for as each was found). */
            for (; !last && hinted < q->cand_len; hinted++)
                sims_docfile_prefetch_fp_table(snap->docfile, q->cand[hinted]);
        }
    }
    return SIMSTORE_OK;
}

/* Phase 1, no LMDB: every stored fingerprint of the snapshot's tables within
 * distance k of fp, once each, into q->cand. */
static int probe_candidates(simstore_query *q, const sims_snapshot *snap, uint64_t fp, unsigned k)
{
    q->cand_len = 0;
    q->match_len = 0;
    q->arena_len = 0;
    q->pr.grow_failed = 0;
    const sims_design *d = q->store->design;
    unsigned flips = sims_design_prefix_flips(d, k);
    int rc = flips ? sims_probe_near(&q->pr, d, snap->segments, snap->segment_count, fp, k, flips,
                                     collect_candidate, q, "query")
                   : probe_design(q, snap, fp, k);
    if (rc)
        return rc;
    /* A fingerprint is found by every table whose prefix it shares with the
     * query: keep one of each. */
    if (q->cand_len > 1) {
        sort_small(q->cand, q->cand_len, sizeof *q->cand, sims_cmp_u64);
        size_t w = 1;
        for (size_t i = 1; i < q->cand_len; i++)
            if (q->cand[i] != q->cand[w - 1])
                q->cand[w++] = q->cand[i];
        q->cand_len = w;
    }
    return SIMSTORE_OK;
}

/* Phase 2: the candidates' documents (inside q->txn for a store of
 * documents), checked, sorted; then the answer's pointers. */

/* One document of a candidate from the document file: a match, with its
 * record's fields attached as attach_record attaches docs' (the file's
 * pieces are checked before a lookup reads them). */
typedef struct docfile_sink {
    simstore_query *q;
    uint64_t fp;
    unsigned distance;
    int with_meta;
} docfile_sink;

static int put_docfile_doc(void *ctx, const docfile_doc *d)
{
    docfile_sink *k = (docfile_sink *)ctx;
    simstore_query *q = k->q;
    simstore *s = q->store;
    int live = sims_docfile_doc_live(s, q->snap->docfile_changed, q->txn, 0, d);
    if (live <= 0)
        return live;
    size_t off;
    int rc = arena_put(q, d->id, d->id_len, &off);
    if (rc == SIMSTORE_OK)
        rc = push_match(q, off, d->id_len, 1, k->fp, k->distance);
    if (rc)
        return rc;
    q->from_file[q->match_len - 1] = 1;
    return attach_fields(q, &q->matches[q->match_len - 1], d->id_is_int, d->insertion, d->sketch,
                         k->with_meta ? d->meta : NULL, d->meta_len);
}

/* The candidates' documents from the store's document file (those docs
 * has no entry for), and, when docs holds changes, from fps and docs as in
 * a store without a file. A fingerprint of an unchanged store's tables has
 * documents in its file: none is damage. */
static int lookup_docfile(simstore_query *q, uint64_t fp, int with_meta)
{
    const sims_snapshot *snap = q->snap;
    for (size_t i = 0; i < q->cand_len; i++) {
        unsigned dist = sims_distance(q->cand[i], fp);
        docfile_sink sink = {q, q->cand[i], dist, with_meta};
        size_t before = q->match_len;
        int rc = sims_docfile_find_fp(snap->docfile, q->cand[i], put_docfile_doc, &sink);
        if (rc == SIMSTORE_OK && snap->docfile_changed)
            rc = lookup_documents(q, q->cand[i], dist);
        if (rc)
            return rc;
        if (q->match_len == before && !snap->docfile_changed)
            return SIMS_CORRUPT("%s: segment %llu's tables hold fingerprint %016llx, its document "
                                "file no document of it",
                                q->store->path, (unsigned long long)snap->docfile_segment,
                                (unsigned long long)q->cand[i]);
    }
    return SIMSTORE_OK;
}

static int resolve_candidates(simstore_query *q, uint64_t fp)
{
    simstore *s = q->store;
    int fp_only = (s->store_flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    int with_meta = (q->flags & SIMSTORE_QUERY_WITH_META) && !fp_only;
    int rc = fp_only ? SIMSTORE_OK : lookup_docfile(q, fp, with_meta);
    for (size_t i = 0; i < q->cand_len && fp_only && rc == SIMSTORE_OK; i++)
        rc = push_match(q, 0, 0, 0, q->cand[i], sims_distance(q->cand[i], fp));
    if (rc)
        return rc;
    /* LMDB answer cross-check (issue 6): every answer is checked against its
     * checksummed document record, whose fingerprint must match, so that a
     * damaged id in fps (LMDB keeps no checksums) is an error, never a wrong
     * answer. One lookup per match; matches are rare. */
    for (size_t i = 0; i < q->match_len && !fp_only; i++) {
        if (q->from_file[i])
            continue; /* attached as it was read */
        rc = attach_meta(q, &q->matches[i], with_meta);
        if (rc)
            return rc;
    }
    /* The arena is final: offsets become pointers; the matches are sorted. */
    sims_matches_point_into(q->matches, q->match_len, q->arena);
    sort_small(q->matches, q->match_len, sizeof *q->matches, sims_match_cmp);
    return SIMSTORE_OK;
}

/* The current snapshot, when no write transaction has committed since it was
 * taken: then the answer needs no LMDB transaction unless the tables give
 * candidates. NULL otherwise. */
static sims_snapshot *fresh_snapshot(simstore *s)
{
    MDB_envinfo info;
    if (mdb_env_info(s->env.env, &info) != 0)
        return NULL;
    pthread_mutex_lock(&s->mu);
    sims_snapshot *cur = s->current;
    if (cur && cur->txn_id == (uint64_t)info.me_last_txnid)
        atomic_fetch_add(&cur->refs, 1);
    else
        cur = NULL;
    pthread_mutex_unlock(&s->mu);
    return cur;
}

static int begin_txn(simstore_query *q)
{
    int rc = sims_env_read_renew(&q->store->env, q->txn);
    if (rc)
        return rc;
    int mrc = mdb_cursor_renew(q->txn, q->fps_cursor);
    if (mrc) {
        mdb_txn_reset(q->txn);
        return sims_mdb_fail(mrc, "renew a cursor");
    }
    return SIMSTORE_OK;
}

typedef struct query_attempt {
    simstore_query *q;
    uint64_t fp;
    unsigned k;
} query_attempt;

/* Answer from one committed state; SIMS_ERETRY (sims_retry) when a writer
 * moved the store on under it. Never an answer from no state: a store
 * changing faster than it can be read is an error the caller may retry. */
static int answer_once(void *ctx)
{
    query_attempt *a = (query_attempt *)ctx;
    simstore_query *q = a->q;
    simstore *s = q->store;
    int fp_only = (s->store_flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    int in_txn = 0;
    sims_snapshot *snap = fresh_snapshot(s);
    if (!snap) {
        int rc = begin_txn(q);
        if (rc)
            return rc;
        rc = sims_store_snapshot(s, q->txn, &snap);
        if (rc) {
            mdb_txn_reset(q->txn);
            return rc;
        }
        in_txn = 1;
    }
    int rc = probe_candidates(q, snap, a->fp, a->k);
    /* A document file is part of the snapshot: no LMDB read. */
    if (rc == SIMSTORE_OK && q->cand_len > 0 && !fp_only && !in_txn && snap->docfile_changed) {
        /* The documents must come from the state the tables were probed
         * in: if a commit came in between, probe again. */
        rc = begin_txn(q);
        if (rc == SIMSTORE_OK) {
            in_txn = 1;
            if ((uint64_t)mdb_txn_id(q->txn) != snap->txn_id) {
                sims_retry_saw((uint64_t)mdb_txn_id(q->txn));
                rc = sims_retry_or_fail(
                    sims_fail(SIMSTORE_EBUSY, "%s kept changing during the query", s->path));
            }
        }
    }
    if (rc == SIMSTORE_OK) {
        q->snap = snap;
        rc = resolve_candidates(q, a->fp);
        q->snap = NULL;
    }
    sims_snapshot_release(snap);
    if (in_txn)
        mdb_txn_reset(q->txn);
    return rc;
}

int sims_query_check_k(const simstore *s, unsigned k)
{
    const sims_design *d = s->design;
    if (k <= d->params.k)
        return SIMSTORE_OK;
    if (k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_ERANGE, "distance %u is above %u, the largest there is", k,
                         SIMSTORE_MAX_K);
    uint64_t probes = sims_design_probes(d, k);
    if (probes > SIMS_QUERY_MAX_PROBES)
        return sims_fail(SIMSTORE_ERANGE,
                         "distance %u from a store built for k <= %u would probe %llu prefixes "
                         "a segment per query (at most %u): build the store for k = %u",
                         k, d->params.k, (unsigned long long)probes, SIMS_QUERY_MAX_PROBES, k);
    return SIMSTORE_OK;
}

int simstore_query_fp(simstore_query *q, uint64_t fp, unsigned k, const simstore_match **matches,
                      size_t *count)
{
    return simstore_query_fp_sketch(q, fp, NULL, k, matches, count);
}

int simstore_query_fp_sketch(simstore_query *q, uint64_t fp, const uint8_t *sketch, unsigned k,
                             const simstore_match **matches, size_t *count)
{
    simstore *s = q->store;
    *matches = NULL;
    *count = 0;
    /* A copy: the caller's buffer may be one of this query's answers. */
    q->query_sketch = NULL;
    if (sketch && s->text.sketch != SIMSTORE_SKETCH_NONE) {
        memcpy(q->query_sketch_buf, sketch, simstore_sketch_bytes(s->text.sketch));
        q->query_sketch = q->query_sketch_buf;
    }
    int rc = sims_query_check_k(s, k);
    if (rc)
        return rc;
    query_attempt a = {q, fp, k};
    rc = sims_retry(answer_once, &a);
    if (rc)
        return rc;
    *matches = q->matches;
    *count = q->match_len;
    return SIMSTORE_OK;
}

int simstore_query_text(simstore_query *q, simstore_fingerprinter *fpr, const char *text,
                        size_t len, unsigned k, uint64_t *fp, const simstore_match **matches,
                        size_t *count)
{
    uint64_t f;
    unsigned flags;
    *matches = NULL;
    *count = 0;
    /* Texts of a store with a boilerplate set go without its lines, as its
     * documents did; fpr's own set comes back after. Sketched in the same
     * pass when the fingerprinter makes the store's kind of sketch (a store
     * without sketches has none to compare). */
    const simstore_boilerplate *own = simstore_fingerprinter_boilerplate(fpr);
    const simstore_boilerplate *store_set = q->store->boilerplate;
    uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
    simstore_sketch_kind kind = simstore_fingerprinter_sketch(fpr);
    int sketched = kind != SIMSTORE_SKETCH_NONE && kind == q->store->text.sketch;
    int rc = store_set && store_set != own ? simstore_fingerprinter_set_boilerplate(fpr, store_set)
                                           : SIMSTORE_OK;
    if (rc == SIMSTORE_OK)
        rc = sketched ? simstore_fingerprint_sketch(fpr, text, len, &f, sketch, &flags)
                      : simstore_fingerprint_text(fpr, text, len, &f, &flags);
    if (store_set && store_set != own)
        simstore_fingerprinter_set_boilerplate(fpr, own);
    if (rc)
        return rc;
    if (fp)
        *fp = f;
    return simstore_query_fp_sketch(q, f, sketched ? sketch : NULL, k, matches, count);
}

/* One neighbour of an absent id (sims_check_doc_absent). */
static int check_doc_side(simstore *s, int mrc, const MDB_val *key, const MDB_val *val,
                          const void *id, size_t id_len, int after)
{
    if (mrc == MDB_NOTFOUND)
        return SIMSTORE_OK;
    if (mrc)
        return sims_mdb_fail(mrc, "read docs");
    int c = sims_id_cmp(key->mv_data, key->mv_size, id, id_len);
    if (after ? c <= 0 : c >= 0)
        return SIMS_CORRUPT("%s: docs has no document '%.*s', but its key %s it is '%.*s' (a "
                            "damaged branch page)",
                            s->path, (int)id_len, (const char *)id, after ? "after" : "before",
                            (int)key->mv_size, (const char *)key->mv_data);
    /* A neighbour may be a tombstone (format/store.md, "Document files"):
     * its check mixes in its id as a record's does. */
    sims_doc_record rec;
    int tombstone;
    int rc = sims_doc_entry_decode((const uint8_t *)key->mv_data, key->mv_size,
                                   (const uint8_t *)val->mv_data, val->mv_size, &rec, &tombstone);
    return rc ? sims_fail_context(rc, "%s: document '%.*s'", s->path, (int)key->mv_size,
                                  (const char *)key->mv_data)
              : SIMSTORE_OK;
}

int sims_check_doc_absent(simstore *s, MDB_txn *txn, const void *id, size_t id_len)
{
    int rc = sims_env_check(&s->env, txn, s->env.docs, id, id_len, SIMS_LMDB_READ_AROUND);
    if (rc)
        return rc;
    MDB_cursor *cur;
    int mrc = mdb_cursor_open(txn, s->env.docs, &cur);
    if (mrc)
        return sims_mdb_fail(mrc, "open a cursor on docs");
    MDB_val key = {id_len, (void *)id}, val;
    int after = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
    rc = check_doc_side(s, after, &key, &val, id, id_len, 1);
    if (rc == SIMSTORE_OK) {
        int before = mdb_cursor_get(cur, &key, &val, after == MDB_NOTFOUND ? MDB_LAST : MDB_PREV);
        rc = check_doc_side(s, before, &key, &val, id, id_len, 0);
    }
    mdb_cursor_close(cur);
    return rc;
}

typedef struct has_id_ctx {
    simstore_query *q;
    const char *id;
    size_t id_len;
    uint64_t *fp;
} has_id_ctx;

/* One look-up of simstore_query_has_id from one read transaction. */
static int has_id_once(void *arg)
{
    has_id_ctx *h = (has_id_ctx *)arg;
    simstore_query *q = h->q;
    const char *id = h->id;
    size_t id_len = h->id_len;
    uint64_t *fp = h->fp;
    simstore *s = q->store;
    int rc = begin_txn(q);
    if (rc)
        return rc;
    sims_snapshot *snap = fresh_snapshot(s);
    if (!snap && (rc = sims_store_snapshot(s, q->txn, &snap)) != SIMSTORE_OK) {
        mdb_txn_reset(q->txn);
        return rc;
    }
    sims_doc_found d;
    rc = sims_doc_lookup(s, snap, q->txn, 0, id, id_len, &d);
    if (rc == SIMSTORE_OK && (d.where == SIMS_DOC_IN_DOCS || d.where == SIMS_DOC_IN_FILE)) {
        if (fp)
            *fp = d.rec.fp;
        rc = 1;
    }
    sims_snapshot_release(snap);
    mdb_txn_reset(q->txn);
    return rc;
}

int simstore_query_has_id(simstore_query *q, const char *id, size_t id_len, uint64_t *fp)
{
    if (!q || !id || id_len == 0 || id_len > SIMSTORE_MAX_ID_BYTES)
        return sims_fail(SIMSTORE_EINVAL, "has_id: a NULL query or an id of %zu bytes", id_len);
    has_id_ctx h = {q, id, id_len, fp};
    return sims_retry(has_id_once, &h);
}

/* ---- Batch support (lib/scan; store_internal.h) ------------------------- */

void sims_sort_matches(simstore_match *m, size_t n)
{
    sort_small(m, n, sizeof *m, sims_match_cmp);
}

void sims_matches_point_into(simstore_match *m, size_t n, const char *arena)
{
    for (size_t i = 0; i < n; i++) {
        if (m[i].id)
            m[i].id = arena + ((uintptr_t)m[i].id - 1);
        if (m[i].meta)
            m[i].meta = arena + ((uintptr_t)m[i].meta - 1);
        if (m[i].sketch)
            m[i].sketch = (const uint8_t *)arena + ((uintptr_t)m[i].sketch - 1);
    }
}

int sims_query_begin_state(simstore_query *q, sims_snapshot **snap)
{
    *snap = NULL;
    int rc = begin_txn(q);
    if (rc)
        return rc;
    rc = sims_store_snapshot(q->store, q->txn, snap);
    if (rc)
        mdb_txn_reset(q->txn);
    else
        q->snap = *snap;
    return rc;
}

int sims_query_join_state(simstore_query *q, const sims_snapshot *snap)
{
    int rc = begin_txn(q);
    if (rc)
        return rc;
    if ((uint64_t)mdb_txn_id(q->txn) != snap->txn_id) {
        sims_retry_saw((uint64_t)mdb_txn_id(q->txn));
        mdb_txn_reset(q->txn);
        return sims_retry_or_fail(
            sims_fail(SIMSTORE_EBUSY, "%s kept changing during the query", q->store->path));
    }
    q->snap = snap;
    return SIMSTORE_OK;
}

void sims_query_end_state(simstore_query *q)
{
    q->snap = NULL;
    mdb_txn_reset(q->txn);
}

int sims_query_fp_documents(simstore_query *q, uint64_t fp, const simstore_match **docs,
                            size_t *count)
{
    *docs = NULL;
    *count = 0;
    q->match_len = 0;
    q->arena_len = 0;
    q->cand_len = 0;
    if (sims_grow16((void **)&q->cand, &q->cand_cap, 1, sizeof *q->cand))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for query candidates");
    q->cand[q->cand_len++] = fp;
    q->query_sketch = NULL;
    int rc = resolve_candidates(q, fp);
    if (rc)
        return rc;
    *docs = q->matches;
    *count = q->match_len;
    return SIMSTORE_OK;
}
