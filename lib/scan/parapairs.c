/* parapairs.c: pairs of documents that share near-duplicate paragraphs
 * (simstore_paragraph_pairs; format/store.md, "Paragraphs"): one paragraph
 * query per document that has paragraphs, through the paragraph tables,
 * then both directions of each pair joined. Held in memory: every
 * document's id and paragraph list, and each directed pair found. */
#include "store/store_internal.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"

#include <stdlib.h>
#include <string.h>

typedef struct pdoc {
    size_t id_off, id_len;
    unsigned flags;
    size_t para_off; /* into the paragraph array */
    uint32_t npara;
} pdoc;

/* A directed pair: of a's `of` paragraphs, `shared` have one of b's
 * within k. */
typedef struct dpair {
    uint32_t a, b;
    uint32_t shared, of;
} dpair;

typedef struct pp_state {
    char *ids;
    size_t ids_len, ids_cap;
    uint64_t *paras;
    size_t paras_len, paras_cap;
    pdoc *docs;
    size_t ndocs, docs_cap;
    dpair *pairs;
    size_t npairs, pairs_cap;
} pp_state;

static void pp_free(pp_state *p)
{
    free(p->ids);
    free(p->paras);
    free(p->docs);
    free(p->pairs);
    memset(p, 0, sizeof *p);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (sims_grow(p, cap, need, elem, 64))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for paragraph pairs");
    return SIMSTORE_OK;
}

static int read_generation(simstore *s, uint64_t *gen)
{
    sims_state_record st;
    int rc = sims_store_read_committed_state(s, &st);
    if (rc)
        return rc;
    *gen = st.generation;
    sims_state_record_release(&st);
    return SIMSTORE_OK;
}

static int add_document(void *ctx, const uint8_t *id, size_t len, const sims_doc_record *rec)
{
    pp_state *p = (pp_state *)ctx;
    int rc;
    if (rec->para_count == 0)
        return SIMSTORE_OK;
    if ((rc = grow((void **)&p->docs, &p->docs_cap, p->ndocs + 1, sizeof *p->docs)) ||
        (rc = grow((void **)&p->ids, &p->ids_cap, p->ids_len + len, 1)) ||
        (rc = grow((void **)&p->paras, &p->paras_cap, p->paras_len + rec->para_count,
                   sizeof *p->paras)))
        return rc;
    pdoc *d = &p->docs[p->ndocs++];
    d->id_off = p->ids_len;
    d->id_len = len;
    d->flags = (rec->flags & SIMS_DOC_FLAG_INTEGER_ID) ? SIMSTORE_MATCH_INTEGER_ID : 0;
    d->para_off = p->paras_len;
    d->npara = rec->para_count;
    memcpy(p->ids + p->ids_len, id, len);
    p->ids_len += len;
    for (uint32_t i = 0; i < rec->para_count; i++)
        p->paras[p->paras_len++] = le_load64(rec->paras + 8 * (size_t)i);
    return SIMSTORE_OK;
}

/* Every document that lists paragraphs, in id order. */
static int load_documents(simstore *s, pp_state *p)
{
    MDB_txn *txn;
    sims_snapshot *snap = NULL;
    int rc = sims_env_full_walk(&s->env); /* a scan of all of docs */
    if (rc)
        return rc;
    rc = sims_env_read_begin(&s->env, &txn);
    if (rc)
        return rc;
    rc = sims_store_snapshot(s, txn, &snap);
    if (rc == SIMSTORE_OK)
        rc = sims_docs_each_by_id(s, snap, txn, (uint64_t)256 << 20, add_document, p);
    sims_snapshot_release(snap);
    mdb_txn_abort(txn);
    return rc;
}

/* The document of an answer's id (the documents are in id order). */
static int find_doc(const pp_state *p, const char *id, size_t len, uint32_t *out)
{
    size_t lo = 0, hi = p->ndocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pdoc *d = &p->docs[mid];
        int c = sims_id_cmp(p->ids + d->id_off, d->id_len, id, len);
        if (c == 0) {
            *out = (uint32_t)mid;
            return 1;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

static int cmp_dpair(const void *x, const void *y)
{
    const dpair *a = x, *b = y;
    uint32_t a0 = a->a < a->b ? a->a : a->b, a1 = a->a < a->b ? a->b : a->a;
    uint32_t b0 = b->a < b->b ? b->a : b->b, b1 = b->a < b->b ? b->b : b->a;
    if (a0 != b0)
        return a0 < b0 ? -1 : 1;
    if (a1 != b1)
        return a1 < b1 ? -1 : 1;
    return (a->a > b->a) - (a->a < b->a);
}

/* The pairs as emitted: fraction (larger first), then a, then b (indices
 * in id order). */
typedef struct upair {
    uint32_t a, b;
    uint32_t shared_a, of_a, shared_b, of_b;
    double fraction;
} upair;

static int cmp_upair(const void *x, const void *y)
{
    const upair *a = x, *b = y;
    if (a->fraction != b->fraction)
        return a->fraction > b->fraction ? -1 : 1;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

static int pairs_once(simstore *s, const simstore_near_rule *rule, pp_state *p, upair **out,
                      size_t *nout)
{
    *out = NULL;
    *nout = 0;
    uint64_t gen_before, gen_after;
    int rc = read_generation(s, &gen_before);
    if (rc == SIMSTORE_OK)
        rc = load_documents(s, p);
    simstore_query *q = NULL;
    if (rc == SIMSTORE_OK)
        rc = simstore_query_new(s, 0, &q);
    for (uint32_t i = 0; i < p->ndocs && rc == SIMSTORE_OK; i++) {
        const pdoc *d = &p->docs[i];
        const simstore_paragraph_match *m;
        size_t count;
        rc = simstore_query_paragraphs(q, p->paras + d->para_off, d->npara, rule->k, 0, &m, &count);
        for (size_t j = 0; j < count && rc == SIMSTORE_OK; j++) {
            uint32_t b;
            if (!find_doc(p, m[j].id, m[j].id_len, &b))
                rc = sims_retry_or_fail(sims_fail(
                    SIMSTORE_EBUSY, "%s kept changing during the paragraph pairs", s->path));
            else if (b != i && (rc = grow((void **)&p->pairs, &p->pairs_cap, p->npairs + 1,
                                          sizeof *p->pairs)) == SIMSTORE_OK)
                p->pairs[p->npairs++] = (dpair){i, b, (uint32_t)m[j].shared, (uint32_t)m[j].of};
        }
    }
    simstore_query_free(q);
    /* One state throughout, or read everything again. */
    if (rc == SIMSTORE_OK && (rc = read_generation(s, &gen_after)) == SIMSTORE_OK &&
        gen_after != gen_before) {
        sims_retry_saw(gen_after);
        rc = sims_retry_or_fail(
            sims_fail(SIMSTORE_EBUSY, "%s kept changing during the paragraph pairs", s->path));
    }
    if (rc)
        return rc;
    /* Both directions of a pair side by side (a before b's own). */
    if (p->npairs > 1)
        qsort(p->pairs, p->npairs, sizeof *p->pairs, cmp_dpair);
    upair *u = malloc((p->npairs / 2 + 1) * sizeof *u);
    if (!u)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for paragraph pairs");
    size_t n = 0;
    for (size_t i = 0; i < p->npairs;) {
        const dpair *x = &p->pairs[i];
        const dpair *y = i + 1 < p->npairs ? &p->pairs[i + 1] : NULL;
        uint32_t lo = x->a < x->b ? x->a : x->b, hi = x->a < x->b ? x->b : x->a;
        /* Near is symmetric: a has a paragraph near one of b's exactly when
         * b has one near a's; both directions are found. */
        if (!y || y->a != x->b || y->b != x->a || x->a != lo) {
            free(u);
            return SIMS_CORRUPT("%s: the paragraph index finds documents %u and %u near in one "
                                "direction only",
                                s->path, (unsigned)lo, (unsigned)hi);
        }
        upair *e = &u[n];
        e->a = lo;
        e->b = hi;
        e->shared_a = x->shared;
        e->of_a = x->of;
        e->shared_b = y->shared;
        e->of_b = y->of;
        double fa = (double)x->shared / (double)x->of, fb = (double)y->shared / (double)y->of;
        e->fraction = fa > fb ? fa : fb;
        if (simstore_near_duplicate_paragraphs(rule, x->shared, x->of) ||
            simstore_near_duplicate_paragraphs(rule, y->shared, y->of))
            n++;
        i += 2;
    }
    if (n > 1)
        qsort(u, n, sizeof *u, cmp_upair);
    *out = u;
    *nout = n;
    return SIMSTORE_OK;
}

typedef struct pp_attempt {
    simstore *s;
    simstore_near_rule rule;
    pp_state p;
    upair *pairs;
    size_t npairs;
} pp_attempt;

static int pp_once(void *ctx)
{
    pp_attempt *a = (pp_attempt *)ctx;
    pp_free(&a->p);
    free(a->pairs);
    a->pairs = NULL;
    return pairs_once(a->s, &a->rule, &a->p, &a->pairs, &a->npairs);
}

int simstore_paragraph_pairs(simstore *s, unsigned k, double min_fraction,
                             simstore_paragraph_pair_fn fn, void *ctx)
{
    if (!s || !fn)
        return sims_fail(SIMSTORE_EINVAL, "simstore_paragraph_pairs: NULL store or callback");
    if (!s->env.pfps)
        return sims_fail(SIMSTORE_EINVAL,
                         "%s has no paragraph index (build it with paragraphs to pair them)",
                         s->path);
    /* The near-duplicate rule by paragraphs: k, the minimum fraction. */
    simstore_near_rule rule;
    simstore_near_rule_init(&rule);
    rule.k = k;
    rule.min_fraction = min_fraction;
    int rrc = simstore_near_rule_resolve(&rule, s->design->params.k, s->text.sketch,
                                         SIMSTORE_NEAR_BY_PARAGRAPHS);
    if (rrc)
        return rrc;
    k = rule.k;
    /* Each paragraph is a query of the paragraph tables: above the
     * design's k, one probing every prefix near it (format/design.md,
     * "Beyond k"). */
    int krc = sims_query_check_k(s, k);
    if (krc)
        return krc;
    pp_attempt a;
    memset(&a, 0, sizeof a);
    a.s = s;
    a.rule = rule;
    int rc = sims_retry(pp_once, &a);
    for (size_t i = 0; i < a.npairs && rc == SIMSTORE_OK; i++) {
        const upair *u = &a.pairs[i];
        const pdoc *x = &a.p.docs[u->a], *y = &a.p.docs[u->b];
        simstore_paragraph_pair pr = {
            a.p.ids + x->id_off, x->id_len, a.p.ids + y->id_off, y->id_len, x->flags,   y->flags,
            u->shared_a,         u->of_a,   u->shared_b,         u->of_b,   u->fraction};
        rc = fn(ctx, &pr);
    }
    free(a.pairs);
    pp_free(&a.p);
    return rc;
}
