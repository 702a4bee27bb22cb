/* components.c: simstore_clusters' connected components in bounded memory,
 * for graphs whose in-memory form (clusters.c) does not fit memory_bytes.
 * Every step is a pass over a spilling record sorter (sort/recsort.h):
 *
 *  1. the live edges, both ways, keyed (source, target);
 *  2. rounds of large-star then small-star (Kiveris, Lattanzi, Mirrokni,
 *     Rastogi, Vassilvitskii, "Connected Components in MapReduce and
 *     Beyond", SoCC 2014), each a linear pass over every node's sorted
 *     neighbourhood pushing the next sorter, until a round changes no edge:
 *     each component is then a star around its smallest fingerprint, its
 *     root. O(log^2 n) rounds whatever the diameter (label propagation
 *     would take one round per hop along a chain of near-duplicates);
 *  3. the nodes in fingerprint order, merged with the fingerprints shared by
 *     several documents (a component of their own when in no edge): each
 *     document of a node keyed (root, keep rank, id), so that a component's
 *     documents come together in keep order, its kept document first;
 *  4. each member keyed (kept document's id, kept first, id), with the
 *     singletons keyed (id, kept, id), and delivered in that order: the
 *     order of clusters.c's in-memory path, byte for byte.
 *
 * Sorters buffer memory_bytes / 4 each before they spill; at most three are
 * alive at once (the components being read, the documents and the members
 * being pushed). A fingerprint's documents are read one at a time. */
#include "scan/clusters.h"
#include "scan/pairs.h"
#include "scan/state.h"

#include "common/bytes.h"
#include "common/error.h"
#include "lmdb/records.h"
#include "sort/recsort.h"

#include <stdlib.h>
#include <string.h>

#define SORTER_SHARE 4u                            /* each sorter: memory_bytes / 4 */
#define ID_KEY_MAX (2 * SIMSTORE_MAX_ID_BYTES + 2) /* an escaped id */
#define DOC_KEY_MAX (16 + ID_KEY_MAX)              /* root, rank, id */
#define MEMBER_KEY_MAX (2 * ID_KEY_MAX + 1)        /* kept id, mark, id */
#define MEMBER_VAL_BYTES 27u /* MEMBER, fp, kept fp, flags, kept flags, similarity */
#define DOC_VAL_MIN 10u      /* fp, flags, sketch bytes (0 or the store's), sketch */
#define SINGLE_VAL_BYTES 9u  /* SINGLE, fp */

/* The kinds of member records. */
enum { MEMBER = 1, SINGLE = 2 /* a singleton whose flags are read at delivery */ };

/* An edge stream: a finished sorter of (x, y) keys read back without its
 * repeats. */
typedef struct edge_in {
    sims_recsort *s;
    int have; /* (x, y) holds the current edge; 0 at the end */
    uint64_t x, y;
} edge_in;

struct scan_spill {
    scan_state *st;
    const simstore_cluster_options *o;
    const simstore_scan_options *so;
    int with_meta;
    sims_recsort *edges;   /* the next large star's input: edges both ways */
    sims_recsort *docs;    /* (root, rank, id) -> (fp, flags, sketch) */
    sims_recsort *members; /* (kept id, mark, id) -> a member record */
    edge_in labels;        /* the final stars, read node by node */
    int have_label;
    uint64_t label_node, label_root;
    uint64_t root;  /* of the node whose documents are being read */
    uint64_t nodes; /* attached so far */
    scan_docs doc;
    scan_spill_stats stats;
    uint8_t key[MEMBER_KEY_MAX];
    uint8_t kept_key[ID_KEY_MAX];                   /* group_members: the kept document */
    uint8_t kept_sketch[SIMSTORE_SKETCH_MAX_BYTES]; /* and its sketch */
    char id[MEMBER_KEY_MAX], kept_id[MEMBER_KEY_MAX];
};

static int damaged(void)
{
    return sims_fail(SIMSTORE_EIO, "a spill file of clusters holds a damaged record");
}

/* ---- sorters -------------------------------------------------------------------- */

static int sorter_new(scan_spill *sp, sims_recsort **out)
{
    return sims_scan_sorter_new(sp->so, SORTER_SHARE, out);
}

static int sorter_finish(scan_spill *sp, sims_recsort *s)
{
    return sims_recsort_finish(s, (size_t)(sp->so->memory_bytes / SORTER_SHARE));
}

static void sorter_drop(scan_spill *sp, sims_recsort **s)
{
    if (*s) {
        sp->stats.spilled_runs += sims_recsort_spilled_runs(*s);
        sims_recsort_free(*s);
        *s = NULL;
    }
}

static int push_edge(sims_recsort *s, uint64_t x, uint64_t y)
{
    uint8_t key[16];
    be_store64(key, x);
    be_store64(key + 8, y);
    return sims_recsort_push(s, key, sizeof key, NULL, 0);
}

static int push_both(sims_recsort *s, uint64_t x, uint64_t y)
{
    int rc = push_edge(s, x, y);
    return rc ? rc : push_edge(s, y, x);
}

/* The next distinct edge into (x, y). */
static int edge_next(edge_in *e)
{
    sims_rec rec;
    int got;
    while ((got = sims_recsort_next(e->s, &rec)) == 1) {
        if (rec.key_len != 16)
            return damaged();
        uint64_t x = be_load64(rec.key), y = be_load64(rec.key + 8);
        if (e->have && x == e->x && y == e->y)
            continue;
        e->x = x;
        e->y = y;
        e->have = 1;
        return 0;
    }
    e->have = 0;
    return got;
}

static int edge_start(edge_in *e, sims_recsort *s)
{
    e->s = s;
    e->have = 0;
    return edge_next(e);
}

/* ---- connected components ------------------------------------------------------------ */

/* Large star: every node u links each neighbour larger than u to m(u), the
 * smallest of u and its neighbours (the first of its sorted neighbourhood).
 * An edge is unchanged when its smaller end u is m(u). In: both ways,
 * keyed (u, neighbour); out: keyed (larger, smaller), the small star's
 * input. */
static int large_star(edge_in *in, sims_recsort *out, uint64_t *changes)
{
    int rc = 0;
    while (rc == 0 && in->have) {
        uint64_t u = in->x, m = in->y < u ? in->y : u;
        while (rc == 0 && in->have && in->x == u) {
            if (in->y > u) {
                rc = push_edge(out, in->y, m);
                *changes += m < u;
            }
            if (rc == 0)
                rc = edge_next(in);
        }
    }
    return rc;
}

/* Small star: every node u links itself and its neighbours smaller than u
 * to m(u), the smallest of them (the first of its sorted group). Edges are
 * unchanged when u has one smaller neighbour. In: keyed (larger, smaller);
 * out: both ways, the next large star's input. */
static int small_star(edge_in *in, sims_recsort *out, uint64_t *changes)
{
    int rc = 0;
    while (rc == 0 && in->have) {
        uint64_t u = in->x, m = in->y, smaller = 0;
        while (rc == 0 && in->have && in->x == u) {
            if (in->y != m)
                rc = push_both(out, in->y, m);
            smaller++;
            if (rc == 0)
                rc = edge_next(in);
        }
        if (rc == 0)
            rc = push_both(out, u, m);
        *changes += smaller > 1;
    }
    return rc;
}

/* Rounds of both stars until one changes nothing. Neither changes an edge
 * only when every node with a larger neighbour is smaller than all of its
 * neighbours and every node has at most one smaller neighbour: each
 * component is then a star around its smallest node. The edges are left
 * finished in sp->edges. */
static int find_components(scan_spill *sp)
{
    int rc = sorter_finish(sp, sp->edges);
    if (rc || sp->stats.edges == 0)
        return rc;
    for (;;) {
        sims_recsort *stars = NULL;
        uint64_t changes = 0;
        edge_in in;
        rc = sorter_new(sp, &stars);
        if (rc == 0)
            rc = edge_start(&in, sp->edges);
        if (rc == 0)
            rc = large_star(&in, stars, &changes);
        sorter_drop(sp, &sp->edges);
        if (rc == 0)
            rc = sorter_finish(sp, stars);
        if (rc == 0)
            rc = sorter_new(sp, &sp->edges);
        if (rc == 0)
            rc = edge_start(&in, stars);
        if (rc == 0)
            rc = small_star(&in, sp->edges, &changes);
        sorter_drop(sp, &stars);
        if (rc == 0)
            rc = sorter_finish(sp, sp->edges);
        if (rc)
            return rc;
        sp->stats.rounds++;
        if (sp->so->progress)
            sp->so->progress(sp->so->progress_ctx, "components by spilling: round",
                             sp->stats.rounds, 0);
        if (changes == 0)
            return 0;
    }
}

/* The next node of the final stars with its root: the smallest of the node
 * and its neighbours (itself for a root, its one neighbour for a leaf). */
static int label_next(scan_spill *sp)
{
    edge_in *in = &sp->labels;
    sp->have_label = in->have;
    if (!in->have)
        return 0;
    uint64_t u = in->x;
    sp->label_node = u;
    sp->label_root = in->y < u ? in->y : u;
    int rc = 0;
    while (rc == 0 && in->have && in->x == u)
        rc = edge_next(in);
    return rc;
}

/* ---- documents ------------------------------------------------------------------------- */

/* An id's place in a key: escaped (sims_scan_key_put_id), or the fingerprint in
 * a fingerprint-only store. */
static size_t put_id_key(uint8_t *out, const char *id, size_t len, uint64_t fp)
{
    if (!id) {
        be_store64(out, fp);
        return 8;
    }
    return sims_scan_key_put_id(out, id, len);
}

static int push_doc(scan_spill *sp, uint64_t rank, const char *id, size_t len, uint64_t fp,
                    unsigned flags, const uint8_t *sketch)
{
    uint8_t val[DOC_VAL_MIN + SIMSTORE_SKETCH_MAX_BYTES];
    size_t sketch_bytes = sketch ? simstore_sketch_bytes(sp->st->s->text.sketch) : 0;
    be_store64(sp->key, sp->root);
    be_store64(sp->key + 8, rank);
    size_t n = 16 + put_id_key(sp->key + 16, id, len, fp);
    be_store64(val, fp);
    val[8] = (uint8_t)flags;
    val[9] = (uint8_t)sketch_bytes;
    if (sketch_bytes)
        memcpy(val + DOC_VAL_MIN, sketch, sketch_bytes);
    return sims_recsort_push(sp->docs, sp->key, (uint32_t)n, val,
                             (uint32_t)(DOC_VAL_MIN + sketch_bytes));
}

static int on_doc(void *ctx, const scan_docs *d, const scan_doc *doc)
{
    scan_spill *sp = (scan_spill *)ctx;
    return push_doc(sp, sims_scan_keep_rank(sp->o, d, doc), d->ids + doc->off, doc->len, d->fp,
                    doc->flags, scan_doc_sketch(d, (size_t)(doc - d->docs)));
}

/* The documents of node fp, in the component of `root`. */
static int attach(scan_spill *sp, uint64_t fp, uint64_t root)
{
    sp->root = root;
    if ((++sp->nodes & 0xFFFF) == 0 && sp->so->progress)
        sp->so->progress(sp->so->progress_ctx, "reading documents", sp->nodes, 0);
    if (sp->st->fp_only)
        return push_doc(sp, 0, NULL, 0, fp, 0, NULL);
    uint64_t n = 0;
    int rc = sims_scan_docs_each(sp->st, fp, sp->with_meta, &sp->doc, on_doc, sp, &n);
    if (rc == 0 && n == 0)
        rc = SIMS_CORRUPT("%s: fingerprint %016llx lost its documents during the scan",
                          sp->st->s->path, (unsigned long long)fp);
    return rc;
}

/* Every node of the stars before fp (all: every one left). */
static int attach_nodes_before(scan_spill *sp, uint64_t fp, int all)
{
    int rc = 0;
    while (rc == 0 && sp->have_label && (all || sp->label_node < fp)) {
        rc = attach(sp, sp->label_node, sp->label_root);
        if (rc == 0)
            rc = label_next(sp);
    }
    return rc;
}

/* A member record: keyed (kept id, mark: 0 for the kept document, 1 for the
 * others, id). */
static int push_member(scan_spill *sp, const uint8_t *kept, size_t kept_len, unsigned mark,
                       const uint8_t *id, size_t id_len, uint64_t fp, uint64_t kept_fp,
                       unsigned flags, unsigned kept_flags, double similarity)
{
    uint8_t val[MEMBER_VAL_BYTES];
    uint64_t bits;
    memcpy(&bits, &similarity, sizeof bits);
    be_store64(val + 19, bits);
    memcpy(sp->key, kept, kept_len);
    sp->key[kept_len] = (uint8_t)mark;
    memcpy(sp->key + kept_len + 1, id, id_len);
    val[0] = MEMBER;
    be_store64(val + 1, fp);
    be_store64(val + 9, kept_fp);
    val[17] = (uint8_t)flags;
    val[18] = (uint8_t)kept_flags;
    return sims_recsort_push(sp->members, sp->key, (uint32_t)(kept_len + 1 + id_len), val,
                             sizeof val);
}

/* A document whose fingerprint is in no component (with o->singletons): a
 * cluster of its own, keyed as its own kept document. A stored document's
 * flags are read when it is delivered, in id order. */
static int push_singleton(scan_spill *sp, uint64_t fp, const char *id, size_t len)
{
    uint8_t idk[ID_KEY_MAX];
    size_t n = put_id_key(idk, id, len, fp);
    if (!id)
        return push_member(sp, idk, n, 0, idk, n, fp, fp, 0, 0, SIMSTORE_SIMILARITY_UNKNOWN);
    uint8_t val[SINGLE_VAL_BYTES];
    memcpy(sp->key, idk, n);
    sp->key[n] = 0;
    memcpy(sp->key + n + 1, idk, n);
    val[0] = SINGLE;
    be_store64(val + 1, fp);
    return sims_recsort_push(sp->members, sp->key, (uint32_t)(2 * n + 1), val, sizeof val);
}

/* A stored fingerprint, in increasing order, held by `count` documents
 * (`id` the first): a node of the stars, a shared fingerprint in no edge (a
 * component of its own), or a singleton's. */
static int visit_fp(scan_spill *sp, uint64_t fp, uint64_t count, const char *id, size_t len)
{
    int rc = attach_nodes_before(sp, fp, 0);
    if (rc)
        return rc;
    if (sp->have_label && sp->label_node == fp) {
        rc = attach(sp, fp, sp->label_root);
        return rc ? rc : label_next(sp);
    }
    if (count >= 2)
        return attach(sp, fp, fp);
    return sp->o->singletons ? push_singleton(sp, fp, id, len) : 0;
}

static int visit_shared(void *ctx, uint64_t fp, uint64_t count)
{
    return visit_fp((scan_spill *)ctx, fp, count, NULL, 0);
}

/* One live fingerprint of a store with a document file (visit_every_fp). */
static int visit_live_fp(void *ctx, uint64_t fp, uint64_t count, const uint8_t *id, size_t len)
{
    return visit_fp((scan_spill *)ctx, fp, count, (const char *)id, len);
}

/* Every fingerprint of fps with its first document (for the singletons). */
static int visit_every_fp(scan_spill *sp)
{
    scan_state *st = sp->st;
    return sims_docs_each_fp(st->s, st->snap, st->txn, st->walked, visit_live_fp, sp);
}

/* One fingerprint of a fingerprint-only store (visit_every_stored_fp). */
static int visit_stored_fp(void *ctx, uint64_t fp)
{
    return visit_fp((scan_spill *)ctx, fp, 1, NULL, 0);
}

/* Every fingerprint of a fingerprint-only store (for the singletons). */
static int visit_every_stored_fp(scan_spill *sp)
{
    return sims_scan_each_stored_fp(sp->st, sp->so, (size_t)(sp->so->memory_bytes / 128),
                                    visit_stored_fp, sp, &sp->stats.spilled_runs);
}

/* The nodes in fingerprint order, merged with the store's fingerprints
 * that can make a cluster too: their documents into sp->docs, the
 * singletons into sp->members. */
static int attach_documents(scan_spill *sp)
{
    if (sp->so->progress)
        sp->so->progress(sp->so->progress_ctx, "reading documents", 0, 0);
    int rc = edge_start(&sp->labels, sp->edges);
    if (rc == 0)
        rc = label_next(sp);
    if (rc == 0) {
        if (sp->st->fp_only)
            rc = sp->o->singletons ? visit_every_stored_fp(sp) : 0;
        else
            rc = sp->o->singletons ? visit_every_fp(sp)
                                   : sims_scan_each_shared_fp(sp->st, visit_shared, sp);
    }
    return rc ? rc : attach_nodes_before(sp, 0, 1);
}

/* ---- members ------------------------------------------------------------------------------ */

/* The documents, component by component in keep order, into member records
 * keyed by their kept document, the first of its component. A component of
 * one document is a cluster only with singletons (components mode never
 * makes one: a node has a document and a neighbour with another, or two). */
static int group_members(scan_spill *sp)
{
    sims_rec rec;
    int got = 0, rc = 0, in_group = 0, kept_pending = 0;
    uint64_t root = 0, kept_fp = 0;
    unsigned kept_flags = 0;
    size_t kept_len = 0, kept_sketch_bytes = 0;
    simstore_sketch_kind kind = sp->st->s->text.sketch;
    size_t store_sketch_bytes = simstore_sketch_bytes(kind);
    /* The kept document's similarity to itself: 1 when it has a sketch. */
#define KEPT_SIMILARITY (kept_sketch_bytes ? 1.0 : SIMSTORE_SIMILARITY_UNKNOWN)
    while (rc == 0 && (got = sims_recsort_next(sp->docs, &rec)) == 1) {
        if (rec.key_len <= 16 || rec.key_len > DOC_KEY_MAX || rec.val_len < DOC_VAL_MIN)
            return damaged();
        size_t sketch_bytes = rec.val[9];
        if ((sketch_bytes != 0 && sketch_bytes != store_sketch_bytes) ||
            rec.val_len != DOC_VAL_MIN + sketch_bytes)
            return damaged();
        const uint8_t *sketch = sketch_bytes ? rec.val + DOC_VAL_MIN : NULL;
        uint64_t r = be_load64(rec.key), fp = be_load64(rec.val);
        unsigned flags = rec.val[8];
        const uint8_t *idk = rec.key + 16;
        size_t idk_len = rec.key_len - 16;
        if (in_group && r == root) {
            if (kept_pending)
                rc = push_member(sp, sp->kept_key, kept_len, 0, sp->kept_key, kept_len, kept_fp,
                                 kept_fp, kept_flags, kept_flags, KEPT_SIMILARITY);
            kept_pending = 0;
            double sim = sketch && kept_sketch_bytes
                             ? simstore_sketch_similarity(kind, sketch, sp->kept_sketch)
                             : SIMSTORE_SIMILARITY_UNKNOWN;
            if (rc == 0)
                rc = push_member(sp, sp->kept_key, kept_len, 1, idk, idk_len, fp, kept_fp, flags,
                                 kept_flags, sim);
            continue;
        }
        if (kept_pending && sp->o->singletons)
            rc = push_member(sp, sp->kept_key, kept_len, 0, sp->kept_key, kept_len, kept_fp,
                             kept_fp, kept_flags, kept_flags, KEPT_SIMILARITY);
        in_group = kept_pending = 1;
        root = r;
        memcpy(sp->kept_key, idk, idk_len);
        kept_len = idk_len;
        kept_fp = fp;
        kept_flags = flags;
        kept_sketch_bytes = sketch_bytes;
        if (sketch_bytes)
            memcpy(sp->kept_sketch, sketch, sketch_bytes);
    }
    if (rc == 0 && got < 0)
        rc = got;
    if (rc == 0 && kept_pending && sp->o->singletons)
        rc = push_member(sp, sp->kept_key, kept_len, 0, sp->kept_key, kept_len, kept_fp, kept_fp,
                         kept_flags, kept_flags, KEPT_SIMILARITY);
#undef KEPT_SIMILARITY
    return rc;
}

/* A singleton's flags and fingerprint from its record in docs. */
static int read_single(scan_spill *sp, const char *id, size_t len, unsigned *flags, uint64_t *fp,
                       double *similarity)
{
    scan_state *st = sp->st;
    sims_doc_found d;
    int rc = sims_doc_lookup(st->s, st->snap, st->txn, st->walked, id, len, &d);
    if (rc)
        return rc;
    if (d.where != SIMS_DOC_IN_DOCS && d.where != SIMS_DOC_IN_FILE)
        return SIMS_CORRUPT("%s: document '%.*s' of a fingerprint's documents is not stored",
                            st->s->path, (int)len, id);
    *flags = (d.rec.flags & SIMS_DOC_FLAG_INTEGER_ID) ? SIMSTORE_MATCH_INTEGER_ID : 0;
    *fp = d.rec.fp;
    *similarity = d.rec.sketch ? 1.0 : SIMSTORE_SIMILARITY_UNKNOWN;
    return 0;
}

/* The member records in order, as clusters.c reports them. */
static int deliver(scan_spill *sp, scan_reporter *p)
{
    sims_rec rec;
    int got = 0, rc = 0;
    while (rc == 0 && (got = sims_recsort_next(sp->members, &rec)) == 1) {
        simstore_cluster_member m;
        memset(&m, 0, sizeof m);
        unsigned kind = rec.val_len ? rec.val[0] : 0;
        if (!(kind == MEMBER && rec.val_len == MEMBER_VAL_BYTES) &&
            !(kind == SINGLE && rec.val_len == SINGLE_VAL_BYTES && !sp->st->fp_only))
            return damaged();
        size_t pos = 0, n = rec.key_len;
        if (sp->st->fp_only) {
            if (n != 17)
                return damaged();
            pos = 8;
        } else {
            m.cluster_len = sims_scan_key_get_id(rec.key, n, &pos, sp->kept_id);
            sp->kept_id[m.cluster_len] = '\0';
        }
        if (pos >= n)
            return damaged();
        m.kept = rec.key[pos++] == 0;
        if (!sp->st->fp_only) {
            m.id_len = sims_scan_key_get_id(rec.key, n, &pos, sp->id);
            sp->id[m.id_len] = '\0';
            if (m.id_len == 0 || m.id_len > SIMSTORE_MAX_ID_BYTES || m.cluster_len == 0 ||
                m.cluster_len > SIMSTORE_MAX_ID_BYTES)
                return damaged();
            m.id = sp->id;
            m.cluster = sp->kept_id;
        }
        if (kind == SINGLE) {
            rc = read_single(sp, sp->id, m.id_len, &m.flags, &m.fp, &m.similarity);
            m.cluster_flags = m.flags;
            m.cluster_fp = m.fp;
        } else {
            m.fp = be_load64(rec.val + 1);
            m.cluster_fp = be_load64(rec.val + 9);
            if (!sp->st->fp_only) {
                m.flags = rec.val[17];
                m.cluster_flags = rec.val[18];
            }
            uint64_t bits = be_load64(rec.val + 19);
            memcpy(&m.similarity, &bits, sizeof bits);
        }
        m.distance = simstore_distance(m.fp, m.cluster_fp);
        if (rc == 0)
            rc = sims_scan_report(p, &m);
    }
    return rc == 0 && got < 0 ? got : rc;
}

/* ---- the run --------------------------------------------------------------------------------- */

int sims_scan_spill_new(scan_state *st, const simstore_cluster_options *o,
                        const simstore_scan_options *so, scan_spill **out)
{
    *out = NULL;
    scan_spill *sp = calloc(1, sizeof *sp);
    if (!sp)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for clusters");
    sp->st = st;
    sp->o = o;
    sp->so = so;
    sp->with_meta = o->keep == SIMSTORE_KEEP_MIN_KEY || o->keep == SIMSTORE_KEEP_MAX_KEY;
    sp->stats.runs = 1;
    int rc = sorter_new(sp, &sp->edges);
    if (rc) {
        sims_scan_spill_free(sp);
        return rc;
    }
    *out = sp;
    return 0;
}

int sims_scan_spill_edge(scan_spill *sp, uint64_t a, uint64_t b)
{
    sp->stats.edges++;
    return push_both(sp->edges, a, b);
}

static void add_stats(const scan_spill *sp, scan_spill_stats *stats)
{
    if (stats) {
        stats->runs += sp->stats.runs;
        stats->edges += sp->stats.edges;
        stats->rounds += sp->stats.rounds;
        stats->spilled_runs += sp->stats.spilled_runs;
    }
}

int sims_scan_spill_components(const uint64_t *edges, size_t n, const simstore_scan_options *so,
                               scan_component_fn fn, void *ctx, scan_spill_stats *stats)
{
    scan_spill *sp = calloc(1, sizeof *sp);
    if (!sp)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for components");
    sp->so = so;
    sp->stats.runs = 1;
    int rc = sorter_new(sp, &sp->edges);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = sims_scan_spill_edge(sp, edges[2 * i], edges[2 * i + 1]);
    if (rc == 0)
        rc = find_components(sp);
    if (rc == 0)
        rc = edge_start(&sp->labels, sp->edges);
    if (rc == 0)
        rc = label_next(sp);
    while (rc == 0 && sp->have_label) {
        rc = fn(ctx, sp->label_node, sp->label_root);
        if (rc == 0)
            rc = label_next(sp);
    }
    sorter_drop(sp, &sp->edges);
    add_stats(sp, stats);
    sims_scan_spill_free(sp);
    return rc;
}

int sims_scan_spill_report(scan_spill *sp, scan_reporter *p, scan_spill_stats *stats)
{
    int rc = find_components(sp);
    if (rc == 0)
        rc = sorter_new(sp, &sp->docs);
    if (rc == 0 && sp->o->singletons)
        rc = sorter_new(sp, &sp->members);
    if (rc == 0)
        rc = attach_documents(sp);
    sorter_drop(sp, &sp->edges);
    if (rc == 0)
        rc = sorter_finish(sp, sp->docs);
    if (rc == 0 && !sp->members)
        rc = sorter_new(sp, &sp->members);
    if (rc == 0)
        rc = group_members(sp);
    sorter_drop(sp, &sp->docs);
    if (rc == 0)
        rc = sorter_finish(sp, sp->members);
    if (rc == 0)
        rc = deliver(sp, p);
    sorter_drop(sp, &sp->members);
    add_stats(sp, stats);
    return rc;
}

void sims_scan_spill_free(scan_spill *sp)
{
    if (!sp)
        return;
    sims_recsort_free(sp->edges);
    sims_recsort_free(sp->docs);
    sims_recsort_free(sp->members);
    sims_scan_docs_free(&sp->doc);
    free(sp);
}
