/* clusters.c: simstore_clusters: the live pairs of the join as a graph
 * over distinct fingerprints, documents attached after; connected
 * components (union-find) or stars (centres in keep order); one kept
 * document per cluster by the keep rule; members reported in order. The
 * graph and the clustered documents are held in memory while they fit
 * memory_bytes; components beyond it go on by spilling (components.c, the
 * same output in bounded memory), stars stop with SIMSTORE_EFULL. With a
 * minimum similarity the graph is over documents instead: an edge joins two
 * documents within k (through their fingerprints' pair, or sharing one)
 * whose sketches' similarity is at least the minimum; it is held in memory
 * (SIMSTORE_EFULL beyond it). */
#include "scan/clusters.h"
#include "simstore_unstable.h"
#include "scan/joinall.h"
#include "scan/pairs.h"
#include "scan/state.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"
#include "sort/u64sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cdoc {
    uint64_t rank; /* keep order: smaller first; ties by id */
    size_t id_off;
    uint32_t id_len;
    uint32_t node;
    uint32_t flags;
    uint32_t cluster;  /* the kept document's index */
    size_t sketch_off; /* of its sketch in sketches, + 1; 0: none */
} cdoc;

typedef struct crun {
    scan_state *st;
    const simstore_cluster_options *o;
    simstore_scan_options so;
    simstore_near_rule rule; /* so's k and minimum similarity */
    uint64_t *edges;         /* live pairs (a, b) */
    size_t nedges, edge_cap;
    uint64_t *nodes; /* distinct fingerprints in pairs or shared, sorted */
    size_t nnodes, node_cap;
    cdoc *docs;
    size_t ndocs, doc_cap;
    char *ids;
    size_t ids_len, ids_cap;
    uint32_t *first_doc; /* per node: its documents are first_doc[i].. */
    uint32_t *best;      /* per node: its best document */
    scan_docs tmp;
    scan_spill *spill; /* components that did not fit: the spilling run */
    uint8_t *sketches; /* the clustered documents' sketches */
    size_t sketches_len, sketches_cap, sketch_bytes;
    uint32_t *doc_edges; /* with a minimum similarity: pairs of documents */
    size_t ndoc_edges, doc_edge_cap;
    uint64_t last_a, count_a; /* collect_edge: the last pair's a, its documents */
    int have_a;
} crun;

static int g_force_spill;               /* sims_scan_clusters_force_spill */
static scan_spill_stats *g_spill_stats; /* sims_scan_clusters_spill_stats */

void sims_scan_clusters_force_spill(int on)
{
    g_force_spill = on;
}

void sims_scan_clusters_spill_stats(scan_spill_stats *stats)
{
    g_spill_stats = stats;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (sims_grow(p, cap, need, elem, 1024) != 0)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for clusters");
    return 0;
}

static uint64_t memory_used(const crun *r)
{
    return (uint64_t)r->nedges * 16 + (uint64_t)r->nnodes * 16 + (uint64_t)r->ndocs * sizeof(cdoc) +
           r->ids_len + r->sketches_len + (uint64_t)r->ndoc_edges * 4;
}

/* Components by fingerprint can go on by spilling; stars and graphs over
 * documents (a minimum similarity) cannot. */
static int can_spill(const crun *r)
{
    return r->o->mode == SIMSTORE_CLUSTER_COMPONENTS && !(r->so.min_similarity > 0);
}

/* Components that do not fit: hand the live edges collected so far to the
 * spilling path and drop the in-memory state (the nodes and documents
 * first, so that only the edges are held beside the new sorter); the run
 * goes on there. */
static int start_spill(crun *r)
{
    free(r->nodes);
    free(r->docs);
    free(r->ids);
    free(r->first_doc);
    free(r->best);
    r->nodes = NULL;
    r->docs = NULL;
    r->ids = NULL;
    r->first_doc = r->best = NULL;
    r->nnodes = r->node_cap = r->ndocs = r->doc_cap = r->ids_len = r->ids_cap = 0;
    int rc = sims_scan_spill_new(r->st, r->o, &r->so, &r->spill);
    for (size_t e = 0; rc == 0 && e < r->nedges; e += 2)
        rc = sims_scan_spill_edge(r->spill, r->edges[e], r->edges[e + 1]);
    free(r->edges);
    r->edges = NULL;
    r->nedges = r->edge_cap = 0;
    return rc;
}

/* Past the memory budget (or the 32-bit indexes): components spill, stars
 * and graphs over documents stop. */
static int budget_check(crun *r)
{
    uint64_t used = memory_used(r);
    if (used <= r->so.memory_bytes && r->ndocs < UINT32_MAX)
        return 0;
    if (can_spill(r))
        return start_spill(r);
    return sims_fail(SIMSTORE_EFULL,
                     "clusters need %llu MiB for %zu pairs and %zu documents, above the "
                     "memory budget of %llu MiB (give more memory)",
                     (unsigned long long)(used >> 20), r->nedges / 2, r->ndocs,
                     (unsigned long long)(r->so.memory_bytes >> 20));
}

/* ---- the graph -------------------------------------------------------------- */

static int add_node(crun *r, uint64_t fp)
{
    int rc = grow((void **)&r->nodes, &r->node_cap, r->nnodes + 1, sizeof *r->nodes);
    if (rc == 0)
        r->nodes[r->nnodes++] = fp;
    return rc;
}

/* note_shared's value when the run began spilling: the walk stops (the
 * spilling path walks the shared fingerprints itself). */
#define STOP_SPILLING 1

static int note_shared(void *ctx, uint64_t fp, uint64_t count)
{
    crun *r = (crun *)ctx;
    (void)count;
    int rc = add_node(r, fp);
    if (rc == 0 && (r->nnodes & 0xFFFFF) == 0)
        rc = budget_check(r);
    return rc == 0 && r->spill ? STOP_SPILLING : rc;
}

/* The live pairs of the join into edges, their ends into nodes: one pair
 * (sims_scan_pairs_each), skipped when either end has no document. */
static int collect_edge(void *ctx, uint64_t a, uint64_t b, unsigned d)
{
    crun *r = (crun *)ctx;
    uint64_t cb = 1;
    int rc = 0;
    (void)d;
    if (!r->st->fp_only) {
        if (!r->have_a || a != r->last_a) {
            if ((rc = sims_scan_fp_count(r->st, a, &r->count_a)))
                return rc;
            r->last_a = a;
            r->have_a = 1;
        }
        if (r->count_a == 0 || (rc = sims_scan_fp_count(r->st, b, &cb)) || cb == 0)
            return rc;
    }
    if (r->spill)
        return sims_scan_spill_edge(r->spill, a, b);
    if ((rc = grow((void **)&r->edges, &r->edge_cap, r->nedges + 2, sizeof *r->edges)))
        return rc;
    r->edges[r->nedges++] = a;
    r->edges[r->nedges++] = b;
    if ((rc = add_node(r, a)) || (rc = add_node(r, b)))
        return rc;
    return (r->nedges & 0xFFFFF) == 0 ? budget_check(r) : 0;
}

static void sort_unique_nodes(crun *r)
{
    uint64_t *tmp = malloc((r->nnodes ? r->nnodes : 1) * sizeof *tmp);
    if (tmp) {
        sims_radix_sort_u64(r->nodes, tmp, r->nnodes);
        free(tmp);
    } else { /* out of memory: in place */
        qsort(r->nodes, r->nnodes, sizeof *r->nodes, sims_cmp_u64);
    }
    size_t w = 0;
    for (size_t i = 0; i < r->nnodes; i++)
        if (w == 0 || r->nodes[i] != r->nodes[w - 1])
            r->nodes[w++] = r->nodes[i];
    r->nnodes = w;
}

static uint32_t node_of(const crun *r, uint64_t fp)
{
    return (uint32_t)sims_lower_bound_u64(r->nodes, r->nnodes, fp);
}

/* ---- documents and the keep rule ------------------------------------------ */

/* A double as a u64 that sorts like it (NaN: none). */
static uint64_t sortable(double x)
{
    if (x == 0)
        x = 0; /* -0 as +0 */
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (bits >> 63) ? ~bits : bits | (UINT64_C(1) << 63);
}

static uint64_t keep_rank(const simstore_cluster_options *o, uint64_t insertion, const char *meta,
                          size_t meta_len)
{
    double key;
    switch (o->keep) {
    case SIMSTORE_KEEP_FIRST: return insertion;
    case SIMSTORE_KEEP_MIN_ID: return 0;
    default: break;
    }
    if (!o->key || !o->key(o->key_ctx, meta, meta_len, &key) || isnan(key))
        return UINT64_MAX; /* no key: last */
    uint64_t v = sortable(o->keep == SIMSTORE_KEEP_MAX_KEY ? -key : key);
    return v == UINT64_MAX ? UINT64_MAX - 1 : v;
}

uint64_t sims_scan_keep_rank(const simstore_cluster_options *o, const scan_docs *d,
                             const scan_doc *doc)
{
    return keep_rank(o, doc->insertion, doc->meta_len ? d->ids + doc->meta_off : NULL,
                     doc->meta_len);
}

uint64_t simstore_keep_order(const simstore_cluster_options *o, const simstore_document *doc)
{
    if (!o || !doc)
        return UINT64_MAX;
    return keep_rank(o, doc->insertion, doc->meta_len ? doc->meta : NULL, doc->meta_len);
}

static int add_doc(crun *r, uint32_t node, uint64_t rank, const char *id, size_t len,
                   unsigned flags, const uint8_t *sketch)
{
    int rc = grow((void **)&r->docs, &r->doc_cap, r->ndocs + 1, sizeof *r->docs);
    if (rc == 0)
        rc = grow((void **)&r->ids, &r->ids_cap, r->ids_len + len + 1, 1);
    if (rc == 0 && sketch)
        rc = grow((void **)&r->sketches, &r->sketches_cap, r->sketches_len + r->sketch_bytes, 1);
    if (rc)
        return rc;
    cdoc *c = &r->docs[r->ndocs++];
    c->rank = rank;
    c->id_off = r->ids_len;
    c->id_len = (uint32_t)len;
    c->node = node;
    c->flags = flags;
    c->cluster = 0;
    c->sketch_off = 0;
    memcpy(r->ids + r->ids_len, id, len);
    r->ids_len += len;
    if (sketch) {
        memcpy(r->sketches + r->sketches_len, sketch, r->sketch_bytes);
        c->sketch_off = r->sketches_len + 1;
        r->sketches_len += r->sketch_bytes;
    }
    return 0;
}

static const uint8_t *doc_sketch(const crun *r, uint32_t d)
{
    size_t off = r->docs[d].sketch_off;
    return off ? r->sketches + off - 1 : NULL;
}

/* The estimated similarity of documents x and y (-1: unknown). */
static double doc_similarity(const crun *r, uint32_t x, uint32_t y)
{
    return simstore_sketch_similarity(r->st->s->text.sketch, doc_sketch(r, x), doc_sketch(r, y));
}

/* Nonzero when document x is kept before document y. */
static int keeps_before(const crun *r, uint32_t x, uint32_t y)
{
    const cdoc *a = &r->docs[x], *b = &r->docs[y];
    if (a->rank != b->rank)
        return a->rank < b->rank;
    if (r->st->fp_only)
        return r->nodes[a->node] < r->nodes[b->node];
    return sims_id_cmp(r->ids + a->id_off, a->id_len, r->ids + b->id_off, b->id_len) < 0;
}

static int load_documents(crun *r)
{
    int with_meta = r->o->keep == SIMSTORE_KEEP_MIN_KEY || r->o->keep == SIMSTORE_KEEP_MAX_KEY;
    r->first_doc = malloc((r->nnodes + 1) * sizeof *r->first_doc);
    r->best = malloc((r->nnodes ? r->nnodes : 1) * sizeof *r->best);
    if (!r->first_doc || !r->best)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for clusters");
    int rc = 0;
    size_t checked = 0; /* documents at the last budget check */
    for (size_t i = 0; i < r->nnodes && rc == 0; i++) {
        r->first_doc[i] = (uint32_t)r->ndocs;
        if (r->st->fp_only) {
            rc = add_doc(r, (uint32_t)i, 0, "", 0, 0, NULL);
        } else {
            rc = sims_scan_docs_load(r->st, r->nodes[i], with_meta, &r->tmp);
            for (size_t j = 0; rc == 0 && j < r->tmp.count; j++) {
                const scan_doc *d = &r->tmp.docs[j];
                rc = add_doc(r, (uint32_t)i, sims_scan_keep_rank(r->o, &r->tmp, d),
                             r->tmp.ids + d->off, d->len, d->flags, scan_doc_sketch(&r->tmp, j));
            }
        }
        if (rc == 0 && r->ndocs == r->first_doc[i])
            rc = SIMS_CORRUPT("%s: fingerprint %016llx lost its documents during the scan",
                              r->st->s->path, (unsigned long long)r->nodes[i]);
        if (rc == 0) {
            uint32_t b = r->first_doc[i];
            for (uint32_t d = b + 1; d < r->ndocs; d++)
                if (keeps_before(r, d, b))
                    b = d;
            r->best[i] = b;
        }
        if (rc == 0 && ((i & 0xFFFF) == 0 || r->ndocs - checked >= 0x10000)) {
            checked = r->ndocs;
            if ((rc = budget_check(r)) || r->spill)
                return rc;
        }
    }
    r->first_doc[r->nnodes] = (uint32_t)r->ndocs;
    return rc;
}

/* ---- clustering --------------------------------------------------------------- */

static uint32_t uf_find(uint32_t *parent, uint32_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* ---- with a minimum similarity: a graph over documents ------------------------ */

static int add_doc_edge(crun *r, uint32_t x, uint32_t y, unsigned distance)
{
    if (!simstore_near_duplicate_sketches(&r->rule, r->st->s->text.sketch, distance,
                                          doc_sketch(r, x), doc_sketch(r, y), NULL))
        return 0; /* an unknown similarity (-1) too */
    int rc =
        grow((void **)&r->doc_edges, &r->doc_edge_cap, r->ndoc_edges + 2, sizeof *r->doc_edges);
    if (rc)
        return rc;
    r->doc_edges[r->ndoc_edges++] = x;
    r->doc_edges[r->ndoc_edges++] = y;
    return (r->ndoc_edges & 0xFFFFF) == 0 ? budget_check(r) : 0;
}

/* The edges between documents: of every pair of fingerprints within k,
 * and inside every fingerprint shared by several documents. */
static int collect_doc_edges(crun *r)
{
    int rc = 0;
    for (size_t e = 0; rc == 0 && e < r->nedges; e += 2) {
        uint32_t a = node_of(r, r->edges[e]), b = node_of(r, r->edges[e + 1]);
        unsigned d = sims_distance(r->edges[e], r->edges[e + 1]);
        for (uint32_t x = r->first_doc[a]; rc == 0 && x < r->first_doc[a + 1]; x++)
            for (uint32_t y = r->first_doc[b]; rc == 0 && y < r->first_doc[b + 1]; y++)
                rc = add_doc_edge(r, x, y, d);
    }
    for (size_t i = 0; rc == 0 && i < r->nnodes; i++)
        for (uint32_t x = r->first_doc[i]; rc == 0 && x < r->first_doc[i + 1]; x++)
            for (uint32_t y = x + 1; rc == 0 && y < r->first_doc[i + 1]; y++)
                rc = add_doc_edge(r, x, y, 0);
    return rc;
}

/* The graph a clustering runs on: the fingerprints (nodes, r->edges), or
 * with a minimum similarity the documents (r->doc_edges). */
typedef struct cgraph {
    const crun *r;
    int docs;     /* the vertices are documents */
    size_t n;     /* vertices */
    size_t nends; /* edge ends: two an edge */
} cgraph;

/* The vertex at edge end e. */
static uint32_t end_at(const cgraph *g, size_t e)
{
    return g->docs ? g->r->doc_edges[e] : node_of(g->r, g->r->edges[e]);
}

/* The document a vertex would keep: itself, or its fingerprint's best. */
static uint32_t kept_of(const cgraph *g, uint32_t v)
{
    return g->docs ? v : g->r->best[v];
}

/* cluster_of[vertex] = the kept document of its connected component. */
static int cluster_components(const cgraph *g, uint32_t *cluster_of)
{
    const crun *r = g->r;
    uint32_t *parent = malloc((g->n ? g->n : 1) * sizeof *parent);
    if (!parent)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for clusters");
    for (size_t i = 0; i < g->n; i++) {
        parent[i] = (uint32_t)i;
        cluster_of[i] = UINT32_MAX;
    }
    for (size_t e = 0; e < g->nends; e += 2) {
        uint32_t x = uf_find(parent, end_at(g, e));
        uint32_t y = uf_find(parent, end_at(g, e + 1));
        if (x != y)
            parent[x > y ? x : y] = x < y ? x : y;
    }
    /* Each root's kept document: the best over its vertices. */
    for (size_t i = 0; i < g->n; i++) {
        uint32_t root = uf_find(parent, (uint32_t)i), k = kept_of(g, (uint32_t)i);
        if (cluster_of[root] == UINT32_MAX || keeps_before(r, k, cluster_of[root]))
            cluster_of[root] = k;
    }
    for (size_t i = 0; i < g->n; i++)
        cluster_of[i] = cluster_of[uf_find(parent, (uint32_t)i)];
    free(parent);
    return 0;
}

static const cgraph *g_order_graph; /* qsort has no context argument */

static int by_kept(const void *x, const void *y)
{
    uint32_t a = kept_of(g_order_graph, *(const uint32_t *)x),
             b = kept_of(g_order_graph, *(const uint32_t *)y);
    const crun *r = g_order_graph->r;
    return keeps_before(r, a, b) ? -1 : keeps_before(r, b, a) ? 1 : 0;
}

/* cluster_of[vertex] = the kept document of its star: vertices in keeping
 * order each take their unclaimed neighbours. */
static int cluster_stars(const cgraph *g, uint32_t *cluster_of)
{
    size_t n = g->n;
    uint32_t *deg = calloc(n + 1, sizeof *deg);
    uint32_t *adj = malloc((g->nends ? g->nends : 1) * sizeof *adj);
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!deg || !adj || !order) {
        free(deg);
        free(adj);
        free(order);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for clusters");
    }
    for (size_t e = 0; e < g->nends; e++)
        deg[end_at(g, e) + 1]++;
    for (size_t i = 0; i < n; i++)
        deg[i + 1] += deg[i];
    for (size_t e = 0; e < g->nends; e += 2) {
        uint32_t a = end_at(g, e), b = end_at(g, e + 1);
        adj[deg[a]++] = b;
        adj[deg[b]++] = a;
    }
    for (size_t i = n; i > 0; i--) /* deg[i] is now where vertex i's list ends */
        deg[i] = deg[i - 1];
    deg[0] = 0;
    for (size_t i = 0; i < n; i++) {
        order[i] = (uint32_t)i;
        cluster_of[i] = UINT32_MAX;
    }
    g_order_graph = g;
    qsort(order, n, sizeof *order, by_kept);
    for (size_t k = 0; k < n; k++) {
        uint32_t c = order[k];
        if (cluster_of[c] != UINT32_MAX)
            continue;
        cluster_of[c] = kept_of(g, c);
        for (uint32_t e = deg[c]; e < deg[c + 1]; e++)
            if (cluster_of[adj[e]] == UINT32_MAX)
                cluster_of[adj[e]] = kept_of(g, c);
    }
    free(deg);
    free(adj);
    free(order);
    return 0;
}

/* ---- reporting ------------------------------------------------------------------ */

static const crun *g_member_run;

/* Members by (kept document's id, kept first, id); in a fingerprint-only
 * store ids are the fingerprints. */
static int id_cmp(const crun *r, uint32_t x, uint32_t y)
{
    const cdoc *a = &r->docs[x], *b = &r->docs[y];
    if (r->st->fp_only) {
        uint64_t fa = r->nodes[a->node], fb = r->nodes[b->node];
        return (fa > fb) - (fa < fb);
    }
    return sims_id_cmp(r->ids + a->id_off, a->id_len, r->ids + b->id_off, b->id_len);
}

static int by_member(const void *x, const void *y)
{
    const crun *r = g_member_run;
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    int c = id_cmp(r, r->docs[a].cluster, r->docs[b].cluster);
    if (c)
        return c;
    int ka = r->docs[a].cluster == a, kb = r->docs[b].cluster == b;
    if (ka != kb)
        return ka ? -1 : 1;
    return id_cmp(r, a, b);
}

int sims_scan_report(scan_reporter *p, const simstore_cluster_member *m)
{
    p->sum.documents++;
    if (m->kept) {
        p->sum.clusters++;
        p->current = 0;
    } else {
        p->sum.dropped++;
    }
    if (++p->current > p->sum.largest)
        p->sum.largest = p->current;
    return p->fn(p->ctx, m);
}

typedef struct reporter {
    crun *r;
    scan_reporter out;
} reporter;

static int report(reporter *p, const simstore_cluster_member *m)
{
    return sims_scan_report(&p->out, m);
}

static int report_doc(reporter *p, uint32_t d)
{
    const crun *r = p->r;
    const cdoc *doc = &r->docs[d], *kept = &r->docs[doc->cluster];
    simstore_cluster_member m;
    memset(&m, 0, sizeof m);
    char id[SIMSTORE_MAX_ID_BYTES + 1], cid[SIMSTORE_MAX_ID_BYTES + 1];
    m.fp = r->nodes[doc->node];
    m.cluster_fp = r->nodes[kept->node];
    m.kept = doc->cluster == d;
    m.distance = simstore_distance(m.fp, m.cluster_fp);
    m.similarity = doc_similarity(r, d, doc->cluster);
    if (!r->st->fp_only) {
        memcpy(id, r->ids + doc->id_off, doc->id_len);
        id[doc->id_len] = '\0';
        memcpy(cid, r->ids + kept->id_off, kept->id_len);
        cid[kept->id_len] = '\0';
        m.id = id;
        m.id_len = doc->id_len;
        m.flags = doc->flags;
        m.cluster = cid;
        m.cluster_len = kept->id_len;
        m.cluster_flags = kept->flags;
    }
    return report(p, &m);
}

static int report_single(reporter *p, const char *id, size_t len, unsigned flags, uint64_t fp,
                         int has_sketch)
{
    simstore_cluster_member m;
    memset(&m, 0, sizeof m);
    m.similarity = has_sketch ? 1.0 : SIMSTORE_SIMILARITY_UNKNOWN;
    char copy[SIMSTORE_MAX_ID_BYTES + 1];
    if (id) {
        if (len > SIMSTORE_MAX_ID_BYTES)
            return SIMS_CORRUPT("%s: a document id of %zu bytes", p->r->st->s->path, len);
        memcpy(copy, id, len);
        copy[len] = '\0';
        id = copy;
    }
    m.id = id;
    m.id_len = len;
    m.flags = flags;
    m.cluster = id;
    m.cluster_len = len;
    m.cluster_flags = flags;
    m.fp = m.cluster_fp = fp;
    m.kept = 1;
    return report(p, &m);
}

/* The singletons: documents whose fingerprint is in no pair, in id order
 * (the docs database's order), and clusters of one (a star's centre whose
 * neighbours were taken), interleaved with the clusters by id. */
typedef struct merged {
    reporter *p;
    const uint32_t *members;
    size_t nmembers, next;
    int singletons;
} merged;

static int emit_members_before(merged *m, const char *id, size_t len, uint64_t fp, int all)
{
    crun *r = m->p->r;
    while (m->next < m->nmembers) {
        uint32_t d = m->members[m->next];
        const cdoc *kept = &r->docs[r->docs[d].cluster];
        if (!all) {
            int c;
            if (r->st->fp_only) {
                uint64_t kf = r->nodes[kept->node];
                c = (kf > fp) - (kf < fp);
            } else {
                c = sims_id_cmp(r->ids + kept->id_off, kept->id_len, id, len);
            }
            if (c >= 0)
                break;
        }
        m->next++;
        /* A cluster of one is a singleton. */
        size_t size = 1;
        if (r->docs[d].cluster == d) {
            size = 0;
            for (size_t k = m->next - 1; k < m->nmembers && r->docs[m->members[k]].cluster == d;
                 k++)
                size++;
        }
        if (size == 1 && r->docs[d].cluster == d && !m->singletons)
            continue;
        int rc = report_doc(m->p, d);
        if (rc)
            return rc;
    }
    return 0;
}

int sims_scan_each_stored_fp(scan_state *st, const simstore_scan_options *so, size_t run_values,
                             scan_fp_fn fn, void *ctx, uint64_t *spilled_runs)
{
    sims_u64sort *all = NULL;
    int rc = sims_u64sort_new(run_values, sims_scan_tmp_dir(so), &all);
    uint64_t buf[1024];
    size_t n = 0;
    for (uint32_t i = 0; rc == 0 && i < st->snap->segment_count; i++) {
        const table_reader *t = st->snap->segments[i]->tables[0];
        const sims_permuter *pm = &st->s->design->tables[0].permuter;
        table_cursor c;
        sims_table_cursor_init(&c, t, 0, UINT64_MAX);
        while (rc == 0 && (rc = sims_table_cursor_next(&c, buf, 1024, &n)) == 0 && n) {
            for (size_t k = 0; k < n; k++)
                buf[k] = sims_unpermute(pm, buf[k]);
            rc = sims_u64sort_push(all, buf, n);
        }
    }
    if (rc == 0)
        rc = sims_u64sort_finish(all, 1);
    while (rc == 0 && (rc = sims_u64sort_read(all, buf, 1024, &n)) == 0 && n)
        for (size_t k = 0; rc == 0 && k < n; k++)
            rc = fn(ctx, buf[k]);
    if (all && spilled_runs)
        *spilled_runs += sims_u64sort_spilled_runs(all);
    sims_u64sort_free(all);
    return rc;
}

/* One stored fingerprint of a fingerprint-only store, in order
 * (report_with_singletons). */
static int single_stored_fp(void *ctx, uint64_t fp)
{
    merged *m = (merged *)ctx;
    crun *r = m->p->r;
    int rc = emit_members_before(m, NULL, 0, fp, 0);
    if (rc)
        return rc;
    uint32_t node = node_of(r, fp);
    if (node < r->nnodes && r->nodes[node] == fp)
        return 0;
    return report_single(m->p, NULL, 0, 0, fp, 0);
}

/* One live document of a store with a document file, in id order
 * (report_with_singletons). */
static int single_from_file(void *ctx, const uint8_t *id, size_t len, const sims_doc_record *rec)
{
    merged *m = (merged *)ctx;
    crun *r = m->p->r;
    int rc = emit_members_before(m, (const char *)id, len, 0, 0);
    if (rc)
        return rc;
    uint32_t node = node_of(r, rec->fp);
    if (node < r->nnodes && r->nodes[node] == rec->fp)
        return 0;
    return report_single(m->p, (const char *)id, len,
                         (rec->flags & SIMS_DOC_FLAG_INTEGER_ID) ? SIMSTORE_MATCH_INTEGER_ID : 0,
                         rec->fp, rec->sketch != NULL);
}

static int report_with_singletons(merged *m)
{
    crun *r = m->p->r;
    scan_state *st = r->st;
    int rc = 0;
    if (st->fp_only) /* every stored fingerprint, in order */
        rc = sims_scan_each_stored_fp(st, &r->so, (size_t)(r->so.memory_bytes / 32),
                                      single_stored_fp, m, NULL);
    else
        rc = sims_docs_each_by_id(st->s, st->snap, st->txn, r->so.memory_bytes / 4,
                                  single_from_file, m);
    return rc ? rc : emit_members_before(m, NULL, 0, 0, 1);
}

static int report_all(crun *r, simstore_cluster_fn fn, void *ctx, simstore_cluster_summary *summary)
{
    uint32_t *members = malloc((r->ndocs ? r->ndocs : 1) * sizeof *members);
    if (!members)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for clusters");
    for (size_t i = 0; i < r->ndocs; i++)
        members[i] = (uint32_t)i;
    g_member_run = r;
    qsort(members, r->ndocs, sizeof *members, by_member);
    reporter p = {r, {fn, ctx, {0, 0, 0, 0}, 0}};
    merged m = {&p, members, r->ndocs, 0, r->o->singletons};
    int rc = r->o->singletons ? report_with_singletons(&m) : emit_members_before(&m, NULL, 0, 0, 1);
    free(members);
    if (summary)
        *summary = p.out.sum;
    return rc;
}

static int report_spilled(crun *r, simstore_cluster_fn fn, void *ctx,
                          simstore_cluster_summary *summary)
{
    scan_reporter p = {fn, ctx, {0, 0, 0, 0}, 0};
    int rc = sims_scan_spill_report(r->spill, &p, g_spill_stats);
    if (summary)
        *summary = p.sum;
    return rc;
}

static int clusters_in_state(crun *r, simstore_cluster_fn fn, void *ctx,
                             simstore_cluster_summary *summary)
{
    sims_recsort *joined = NULL;
    int rc = sims_scan_join_store(r->st, &r->so, &joined);
    if (rc == 0 && can_spill(r) && g_force_spill)
        rc = start_spill(r);
    if (rc == 0)
        rc = sims_scan_pairs_each(joined, collect_edge, r);
    sims_recsort_free(joined);
    if (rc == 0 && !r->spill && !r->st->fp_only) {
        rc = sims_scan_each_shared_fp(r->st, note_shared, r);
        if (rc == STOP_SPILLING && r->spill)
            rc = 0;
    }
    if (rc == 0 && !r->spill) {
        sort_unique_nodes(r);
        if (r->nnodes >= UINT32_MAX)
            rc = can_spill(r) ? start_spill(r)
                              : sims_fail(SIMSTORE_EFULL, "more than 2^32 clustered fingerprints");
    }
    if (rc == 0 && !r->spill) {
        if (r->so.progress)
            r->so.progress(r->so.progress_ctx, "reading documents", 0, r->nnodes);
        rc = load_documents(r);
    }
    if (rc)
        return rc;
    if (r->spill)
        return report_spilled(r, fn, ctx, summary);
    /* With a minimum similarity documents, not fingerprints, are the nodes. */
    int docs = r->so.min_similarity > 0;
    if (docs)
        rc = collect_doc_edges(r);
    cgraph g = {r, docs, docs ? r->ndocs : r->nnodes, docs ? r->ndoc_edges : r->nedges};
    uint32_t *cluster_of = NULL;
    if (rc == 0) {
        cluster_of = malloc((g.n ? g.n : 1) * sizeof *cluster_of);
        rc = cluster_of ? 0 : sims_fail(SIMSTORE_ENOMEM, "out of memory for clusters");
    }
    if (rc == 0)
        rc = r->o->mode == SIMSTORE_CLUSTER_STAR ? cluster_stars(&g, cluster_of)
                                                 : cluster_components(&g, cluster_of);
    if (rc == 0) {
        for (size_t i = 0; i < r->ndocs; i++)
            r->docs[i].cluster = cluster_of[docs ? i : r->docs[i].node];
        rc = report_all(r, fn, ctx, summary);
    }
    free(cluster_of);
    return rc;
}

void simstore_cluster_options_init(simstore_cluster_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    simstore_scan_options_init(&o->scan);
    o->mode = SIMSTORE_CLUSTER_COMPONENTS;
    o->keep = SIMSTORE_KEEP_FIRST;
}

int simstore_clusters(simstore *s, const simstore_cluster_options *o, simstore_cluster_fn fn,
                      void *ctx, simstore_cluster_summary *summary)
{
    if (summary)
        memset(summary, 0, sizeof *summary);
    if (!s || !fn)
        return sims_fail(SIMSTORE_EINVAL, "simstore_clusters: NULL store or callback");
    if (SIMS_CHECK_OPTIONS(o, simstore_cluster_options) ||
        SIMS_CHECK_OPTIONS(o ? &o->scan : NULL, simstore_scan_options))
        return SIMSTORE_EINVAL;
    simstore_cluster_options dflt;
    if (!o) {
        simstore_cluster_options_init(&dflt);
        o = &dflt;
    }
    if (o->mode != SIMSTORE_CLUSTER_COMPONENTS && o->mode != SIMSTORE_CLUSTER_STAR)
        return sims_fail(SIMSTORE_EINVAL, "unknown cluster mode %d", (int)o->mode);
    int key_rule = o->keep == SIMSTORE_KEEP_MIN_KEY || o->keep == SIMSTORE_KEEP_MAX_KEY;
    if (!key_rule && o->keep != SIMSTORE_KEEP_FIRST && o->keep != SIMSTORE_KEEP_MIN_ID)
        return sims_fail(SIMSTORE_EINVAL, "unknown keep rule %d", (int)o->keep);
    if (key_rule && !o->key)
        return sims_fail(SIMSTORE_EINVAL, "a keep rule by key needs a key callback");
    if (key_rule && (s->store_flags & SIMS_STORE_FLAG_FP_ONLY))
        return sims_fail(SIMSTORE_EINVAL,
                         "%s holds fingerprints only: no metadata to keep documents by", s->path);
    crun r;
    memset(&r, 0, sizeof r);
    r.o = o;
    int rc = sims_scan_options_resolve(s, &o->scan, 0, &r.so);
    if (rc)
        return rc;
    sims_scan_near_rule(&r.so, s->text.sketch, &r.rule);
    scan_state st;
    rc = sims_scan_state_begin(s, &st);
    if (rc)
        return rc;
    r.st = &st;
    r.sketch_bytes = simstore_sketch_bytes(s->text.sketch);
    rc = clusters_in_state(&r, fn, ctx, summary);
    sims_scan_state_end(&st);
    free(r.edges);
    free(r.nodes);
    free(r.docs);
    free(r.ids);
    free(r.first_doc);
    free(r.best);
    free(r.sketches);
    free(r.doc_edges);
    sims_scan_docs_free(&r.tmp);
    sims_scan_spill_free(r.spill);
    return rc;
}
