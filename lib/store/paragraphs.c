/* paragraphs.c: the paragraph query (format/store.md, "Paragraphs"): which
 * stored documents have paragraphs within distance k of a query document's
 * paragraphs, and how many of the query's paragraphs they cover. The
 * paragraph segments' tables are probed as the document tables are
 * (exact for k up to the design's), the candidates' documents come from
 * `pfps`, and every answer is checked against its document record, whose
 * paragraph list must hold the paragraph fingerprint `pfps` gave. */
#include "store/store_internal.h"
#include "simstore_unstable.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"

#include <stdlib.h>
#include <string.h>

/* One (document, query paragraph) pair found: the document's id (an arena
 * offset; `id` points at it only while the hits are sorted, as the arena
 * may move after), the distinct query fingerprint it covers and the stored
 * paragraph fingerprint that covers it. */
typedef struct hit {
    const char *id;
    size_t id_off;
    size_t id_len;
    uint32_t query; /* index into the distinct query fingerprints */
    uint64_t pfp;
} hit;

struct sims_para_buffers {
    uint64_t *qfps; /* the distinct query fingerprints, sorted */
    size_t *qmult;  /* how many query paragraphs each stands for */
    size_t q_cap, qmult_cap;
    uint64_t *cand;
    size_t cand_len, cand_cap;
    hit *hits;
    size_t hit_len, hit_cap;
    char *arena;
    size_t arena_len, arena_cap;
    simstore_paragraph_match *matches;
    size_t match_len, match_cap;
    sims_prober pr; /* the table being probed, its prefix masks */
};

void sims_para_buffers_free(sims_para_buffers *p)
{
    if (!p)
        return;
    free(p->qfps);
    free(p->qmult);
    free(p->cand);
    free(p->hits);
    free(p->arena);
    free(p->matches);
    free(p->pr.masks);
    free(p);
}

static int cmp_hit(const void *a, const void *b)
{
    const hit *x = (const hit *)a, *y = (const hit *)b;
    int c = sims_id_cmp(x->id, x->id_len, y->id, y->id_len);
    if (c)
        return c;
    if (x->query != y->query)
        return x->query < y->query ? -1 : 1;
    return (x->pfp > y->pfp) - (x->pfp < y->pfp);
}

int simstore_paragraph_match_cmp(const void *a, const void *b)
{
    const simstore_paragraph_match *x = a, *y = b;
    if (x->shared != y->shared)
        return x->shared > y->shared ? -1 : 1;
    return sims_id_cmp(x->id, x->id_len, y->id, y->id_len);
}

static int collect(void *ctx, uint64_t permuted)
{
    sims_para_buffers *p = (sims_para_buffers *)ctx;
    if (p->cand_len == p->cand_cap &&
        sims_grow16((void **)&p->cand, &p->cand_cap, p->cand_len + 1, sizeof *p->cand)) {
        p->pr.grow_failed = 1;
        return 1;
    }
    p->cand[p->cand_len++] = sims_unpermute(p->pr.permuter, permuted);
    return 0;
}

static int arena_put(sims_para_buffers *p, const void *data, size_t n, size_t *off)
{
    if (sims_arena_put(&p->arena, &p->arena_cap, &p->arena_len, data, n, off))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for paragraph results");
    return SIMSTORE_OK;
}

/* Whether the record's paragraph list holds fp. */
static int record_has_paragraph(const sims_doc_record *rec, uint64_t fp)
{
    for (uint32_t i = 0; i < rec->para_count; i++)
        if (le_load64(rec->paras + 8 * (size_t)i) == fp)
            return 1;
    return 0;
}

/* The live document of an id the paragraph index lists (its file's or
 * docs's): *found's record. */
static int read_record(simstore *s, const sims_snapshot *snap, MDB_txn *txn, const void *id,
                       size_t id_len, sims_doc_found *found)
{
    int rc = sims_doc_lookup(s, snap, txn, 0, id, id_len, found);
    if (rc == SIMSTORE_OK && found->where != SIMS_DOC_IN_DOCS && found->where != SIMS_DOC_IN_FILE)
        rc = SIMS_CORRUPT("%s: the paragraph index lists document '%.*s', which the store "
                          "does not hold",
                          s->path, (int)id_len, (const char *)id);
    return rc;
}

/* The state a pfps lookup reads (check_neighbour's context). */
typedef struct pfps_read {
    simstore *s;
    const sims_snapshot *snap;
    MDB_txn *txn;
} pfps_read;

/* A pfps entry next to a paragraph fingerprint the tables hold but pfps
 * does not (format/store.md, "Trusting LMDB", as for fps): its document
 * must list its key, or the key was damaged. */
static int check_neighbour(void *ctx, int rc, const MDB_val *key, const MDB_val *val)
{
    const pfps_read *r = (const pfps_read *)ctx;
    simstore *s = r->s;
    if (rc == MDB_NOTFOUND)
        return SIMSTORE_OK;
    if (rc)
        return sims_mdb_fail(rc, "read pfps");
    if (key->mv_size != 8 || val->mv_size == 0 || val->mv_size > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("%s: pfps entry of a %zu-byte key and a %zu-byte id", s->path,
                            key->mv_size, val->mv_size);
    sims_doc_found found;
    rc = read_record(s, r->snap, r->txn, val->mv_data, val->mv_size, &found);
    if (rc)
        return rc;
    uint64_t kfp = be_load64(key->mv_data);
    if (!record_has_paragraph(&found.rec, kfp))
        return SIMS_CORRUPT("%s: pfps key %016llx lists document '%.*s', which has no such "
                            "paragraph (a damaged pfps entry)",
                            s->path, (unsigned long long)kfp, (int)val->mv_size,
                            (const char *)val->mv_data);
    return SIMSTORE_OK;
}

/* The documents holding paragraph fingerprint pfp, as hits of query j. */
static int lookup(simstore *s, const sims_snapshot *snap, MDB_txn *txn, MDB_cursor *cur,
                  sims_para_buffers *p, uint64_t pfp, uint32_t j)
{
    uint8_t kb[8];
    be_store64(kb, pfp);
    MDB_val key = {8, kb}, val;
    int rc = sims_env_check(&s->env, txn, s->env.pfps, kb, 8, SIMS_LMDB_READ_DUPS);
    if (rc)
        return rc;
    rc = mdb_cursor_get(cur, &key, &val, MDB_SET_KEY);
    if (rc == MDB_NOTFOUND) {
        /* Dead (its documents deleted), unless a damaged key. */
        pfps_read r = {s, snap, txn};
        return sims_check_fp_absent(s, txn, s->env.pfps, cur, "pfps", pfp, check_neighbour, &r);
    }
    while (rc == 0) {
        if (val.mv_size == 0 || val.mv_size > SIMSTORE_MAX_ID_BYTES)
            return SIMS_CORRUPT("%s: pfps entry %016llx holds an id of %zu bytes", s->path,
                                (unsigned long long)pfp, val.mv_size);
        if (sims_grow16((void **)&p->hits, &p->hit_cap, p->hit_len + 1, sizeof *p->hits))
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for paragraph results");
        hit *h = &p->hits[p->hit_len];
        int e = arena_put(p, val.mv_data, val.mv_size, &h->id_off);
        if (e)
            return e;
        h->id_len = val.mv_size;
        h->query = j;
        h->pfp = pfp;
        p->hit_len++;
        rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT_DUP);
    }
    return rc == MDB_NOTFOUND ? SIMSTORE_OK : sims_mdb_fail(rc, "read pfps");
}

typedef struct para_attempt {
    simstore_query *q;
    sims_para_buffers *p;
    size_t nq; /* distinct query fingerprints */
    size_t of;
    unsigned k;
    double min_fraction;
    int with_meta;
} para_attempt;

/* One document's hits [from, to) (sorted, one id): checked against its
 * record, counted, and kept as a match when it reaches the fraction. */
static int make_match(para_attempt *a, const sims_snapshot *snap, MDB_txn *txn, size_t from,
                      size_t to)
{
    simstore *s = sims_query_store(a->q);
    sims_para_buffers *p = a->p;
    const hit *h0 = &p->hits[from];
    const char *id = p->arena + h0->id_off;
    sims_doc_found found;
    int rc = read_record(s, snap, txn, id, h0->id_len, &found);
    if (rc)
        return rc;
    const sims_doc_record rec = found.rec;
    size_t shared = 0;
    for (size_t i = from; i < to; i++) {
        if (!record_has_paragraph(&rec, p->hits[i].pfp))
            return SIMS_CORRUPT("%s: pfps lists paragraph %016llx under document '%.*s', whose "
                                "record does not hold it",
                                s->path, (unsigned long long)p->hits[i].pfp, (int)h0->id_len, id);
        if (i == from || p->hits[i].query != p->hits[i - 1].query)
            shared += p->qmult[p->hits[i].query];
    }
    if ((double)shared / (double)a->of < a->min_fraction)
        return SIMSTORE_OK;
    if (sims_grow16((void **)&p->matches, &p->match_cap, p->match_len + 1, sizeof *p->matches))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for paragraph results");
    simstore_paragraph_match *m = &p->matches[p->match_len++];
    memset(m, 0, sizeof *m);
    m->id = (const char *)(uintptr_t)(h0->id_off + 1); /* a pointer once final */
    m->id_len = h0->id_len;
    m->flags = (rec.flags & SIMS_DOC_FLAG_INTEGER_ID) ? SIMSTORE_MATCH_INTEGER_ID : 0;
    m->shared = shared;
    m->of = a->of;
    m->fraction = (double)shared / (double)a->of;
    m->fp = rec.fp;
    if (a->with_meta && rec.meta) {
        /* Metadata goes to a second arena pass: offsets now, pointers later. */
        size_t off = 0;
        rc = arena_put(p, rec.meta, rec.meta_len, &off);
        if (rc)
            return rc;
        m->meta = (const char *)(uintptr_t)(off + 1);
        m->meta_len = rec.meta_len;
    }
    return SIMSTORE_OK;
}

static int para_once(void *ctx)
{
    para_attempt *a = (para_attempt *)ctx;
    simstore *s = sims_query_store(a->q);
    sims_para_buffers *p = a->p;
    const sims_design *d = s->design;
    p->hit_len = 0;
    p->arena_len = 0;
    p->match_len = 0;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    sims_snapshot *snap = NULL;
    int rc = sims_env_read_begin(&s->env, &txn);
    if (rc)
        return rc;
    rc = sims_store_snapshot(s, txn, &snap);
    if (rc == SIMSTORE_OK) {
        int m = mdb_cursor_open(txn, s->env.pfps, &cur);
        if (m)
            rc = sims_mdb_fail(m, "open a cursor");
    }
    /* Above the design's k, every prefix within `flips` bits of the
     * query's (format/design.md, "Beyond k"). */
    unsigned flips = sims_design_prefix_flips(d, a->k);
    for (size_t j = 0; j < a->nq && rc == SIMSTORE_OK; j++) {
        uint64_t fp = p->qfps[j];
        p->cand_len = 0;
        p->pr.grow_failed = 0;
        rc = sims_probe_near(&p->pr, d, snap->para_segments, snap->para_segment_count, fp, a->k,
                             flips, collect, p, "paragraph");
        if (rc)
            break;
        /* Found by several tables, and by several segments: once each. */
        if (p->cand_len > 1)
            qsort(p->cand, p->cand_len, sizeof *p->cand, sims_cmp_u64);
        for (size_t i = 0; i < p->cand_len && rc == SIMSTORE_OK; i++)
            if (i == 0 || p->cand[i] != p->cand[i - 1])
                rc = lookup(s, snap, txn, cur, p, p->cand[i], (uint32_t)j);
    }
    if (rc == SIMSTORE_OK) {
        /* Group the hits by document (the arena holds only ids now). */
        for (size_t i = 0; i < p->hit_len; i++)
            p->hits[i].id = p->arena + p->hits[i].id_off;
        if (p->hit_len > 1)
            qsort(p->hits, p->hit_len, sizeof *p->hits, cmp_hit);
        for (size_t from = 0; from < p->hit_len && rc == SIMSTORE_OK;) {
            size_t to = from + 1;
            const char *id = p->arena + p->hits[from].id_off;
            while (to < p->hit_len && p->hits[to].id_len == p->hits[from].id_len &&
                   memcmp(p->arena + p->hits[to].id_off, id, p->hits[from].id_len) == 0)
                to++;
            rc = make_match(a, snap, txn, from, to); /* may move the arena */
            from = to;
        }
    }
    if (cur)
        mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    sims_snapshot_release(snap);
    return rc;
}

int simstore_query_paragraphs(simstore_query *q, const uint64_t *fps, size_t n, unsigned k,
                              double min_fraction, const simstore_paragraph_match **matches,
                              size_t *count)
{
    if (!q || !matches || !count || (n && !fps))
        return sims_fail(SIMSTORE_EINVAL, "simstore_query_paragraphs: NULL argument");
    *matches = NULL;
    *count = 0;
    simstore *s = sims_query_store(q);
    if (!s->env.pfps)
        return sims_fail(SIMSTORE_EINVAL,
                         "%s has no paragraph index (build it with paragraphs to query them)",
                         s->path);
    if (!(min_fraction >= 0 && min_fraction <= 1))
        return sims_fail(SIMSTORE_EINVAL, "minimum fraction %g is outside 0..1", min_fraction);
    int rc = sims_query_check_k(s, k);
    if (rc)
        return rc;
    if (n == 0)
        return SIMSTORE_OK;
    sims_para_buffers **slot = sims_query_para_buffers(q);
    if (!*slot && !(*slot = calloc(1, sizeof **slot)))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a paragraph query");
    sims_para_buffers *p = *slot;
    /* Repeated query paragraphs are probed once and counted each. */
    if (sims_grow16((void **)&p->qfps, &p->q_cap, n, sizeof *p->qfps))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a paragraph query");
    if (sims_grow16((void **)&p->qmult, &p->qmult_cap, n, sizeof *p->qmult))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a paragraph query");
    memcpy(p->qfps, fps, n * sizeof *fps);
    qsort(p->qfps, n, sizeof *p->qfps, sims_cmp_u64);
    size_t nq = 0;
    for (size_t i = 0; i < n; i++) {
        if (nq && p->qfps[nq - 1] == p->qfps[i]) {
            p->qmult[nq - 1]++;
        } else {
            p->qfps[nq] = p->qfps[i];
            p->qmult[nq++] = 1;
        }
    }
    para_attempt a = {
        q, p, nq, n, k, min_fraction, (sims_query_flags(q) & SIMSTORE_QUERY_WITH_META) != 0};
    rc = sims_retry(para_once, &a);
    if (rc)
        return rc;
    /* The arena is final: ids and metadata from offsets to pointers. */
    for (size_t i = 0; i < p->match_len; i++) {
        simstore_paragraph_match *m = &p->matches[i];
        m->id = p->arena + ((uintptr_t)m->id - 1);
        if (m->meta)
            m->meta = p->arena + ((uintptr_t)m->meta - 1);
    }
    if (p->match_len > 1)
        qsort(p->matches, p->match_len, sizeof *p->matches, simstore_paragraph_match_cmp);
    *matches = p->matches;
    *count = p->match_len;
    return SIMSTORE_OK;
}
