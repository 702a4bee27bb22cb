/* paraclusters.c: `simstore clusters --paragraphs`: the connected components
 * of the graph of documents sharing paragraphs (the pairs of
 * simstore_paragraph_pairs with fraction >= F), each with the document it
 * keeps. */
#include "paraclusters.h"

#include "cli.h"
#include "input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pnode {
    size_t id_off, id_len;
    unsigned flags;
    uint32_t parent;
    uint64_t insertion;
    int have_key;
    double key;
} pnode;

typedef struct pedge {
    uint32_t a, b;
    double fraction;
} pedge;

typedef struct pgraph {
    char *ids;
    size_t ids_len, ids_cap;
    pnode *nodes;
    size_t nnodes, nodes_cap;
    pedge *edges;
    size_t nedges, edges_cap;
    /* the nodes in id order, for lookups while the pairs come */
    uint32_t *by_id;
    const char *key_field;
    int keep; /* simstore_keep_rule */
    int failed;
} pgraph;

static int node_cmp_id(const pgraph *g, uint32_t x, const char *id, size_t len)
{
    const pnode *n = &g->nodes[x];
    size_t m = n->id_len < len ? n->id_len : len;
    int c = memcmp(g->ids + n->id_off, id, m);
    return c ? c : (n->id_len > len) - (n->id_len < len);
}

/* The node of an id, made on first sight: a sorted index of the ids
 * (insertion moves the tail; the graph is small next to the paragraph
 * queries that made its pairs). */
static int intern(pgraph *g, const char *id, size_t len, unsigned flags, uint32_t *out)
{
    size_t lo = 0, hi = g->nnodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = node_cmp_id(g, g->by_id[mid], id, len);
        if (c == 0) {
            *out = g->by_id[mid];
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (cli_grow((void **)&g->nodes, &g->nodes_cap, g->nnodes + 1, sizeof *g->nodes, 256) ||
        cli_grow((void **)&g->ids, &g->ids_cap, g->ids_len + len, 1, 4096))
        return -1;
    uint32_t *by = realloc(g->by_id, (g->nnodes + 1) * sizeof *by);
    if (!by)
        return -1;
    g->by_id = by;
    uint32_t x = (uint32_t)g->nnodes++;
    pnode *n = &g->nodes[x];
    memset(n, 0, sizeof *n);
    n->id_off = g->ids_len;
    n->id_len = len;
    n->flags = flags;
    n->parent = x;
    memcpy(g->ids + g->ids_len, id, len);
    g->ids_len += len;
    memmove(g->by_id + lo + 1, g->by_id + lo, (g->nnodes - 1 - lo) * sizeof *g->by_id);
    g->by_id[lo] = x;
    *out = x;
    return 0;
}

static int on_pair(void *ctx, const simstore_paragraph_pair *p)
{
    pgraph *g = (pgraph *)ctx;
    uint32_t a, b;
    if (intern(g, p->id_a, p->id_a_len, p->flags_a, &a) ||
        intern(g, p->id_b, p->id_b_len, p->flags_b, &b) ||
        cli_grow((void **)&g->edges, &g->edges_cap, g->nedges + 1, sizeof *g->edges, 256)) {
        g->failed = 1;
        return SIMSTORE_ENOMEM;
    }
    g->edges[g->nedges++] = (pedge){a, b, p->fraction};
    return 0;
}

static uint32_t find(pgraph *g, uint32_t x)
{
    while (g->nodes[x].parent != x) {
        g->nodes[x].parent = g->nodes[g->nodes[x].parent].parent;
        x = g->nodes[x].parent;
    }
    return x;
}

static int on_document(void *ctx, const simstore_document *d)
{
    pgraph *g = (pgraph *)ctx;
    uint32_t x;
    if (d->missing || intern(g, d->id, d->id_len, d->flags, &x))
        return 0; /* deleted since the pairs were read: keeps no key */
    g->nodes[x].insertion = d->insertion;
    if (g->key_field && d->meta &&
        input_json_number(d->meta, d->meta_len, g->key_field, &g->nodes[x].key) == 1)
        g->nodes[x].have_key = 1;
    return 0;
}

/* Whether x is kept over y under the rule (ties: the smaller id). */
static int keeps_over(const pgraph *g, uint32_t x, uint32_t y)
{
    const pnode *a = &g->nodes[x], *b = &g->nodes[y];
    switch (g->keep) {
    case SIMSTORE_KEEP_FIRST:
        if (a->insertion != b->insertion)
            return a->insertion < b->insertion;
        break;
    case SIMSTORE_KEEP_MAX_KEY:
    case SIMSTORE_KEEP_MIN_KEY:
        if (a->have_key != b->have_key)
            return a->have_key;
        if (a->have_key && a->key != b->key)
            return g->keep == SIMSTORE_KEEP_MAX_KEY ? a->key > b->key : a->key < b->key;
        break;
    default: break;
    }
    return node_cmp_id(g, y, g->ids + a->id_off, a->id_len) > 0;
}

static const pgraph *g_sort; /* for qsort: members by (cluster id, not kept, id) */

typedef struct member {
    uint32_t node, kept;
} member;

static int cmp_member(const void *x, const void *y)
{
    const member *a = x, *b = y;
    const pgraph *g = g_sort;
    const pnode *ka = &g->nodes[a->kept];
    int c = node_cmp_id(g, b->kept, g->ids + ka->id_off, ka->id_len);
    if (c)
        return -c;
    int ak = a->node == a->kept, bk = b->node == b->kept;
    if (ak != bk)
        return ak ? -1 : 1;
    const pnode *na = &g->nodes[a->node];
    return -node_cmp_id(g, b->node, g->ids + na->id_off, na->id_len);
}

static void print_id(const pgraph *g, uint32_t x, int json)
{
    const pnode *n = &g->nodes[x];
    if (json && !(n->flags & SIMSTORE_MATCH_INTEGER_ID))
        cli_json_string(stdout, g->ids + n->id_off, n->id_len);
    else if (json)
        fwrite(g->ids + n->id_off, 1, n->id_len, stdout);
    else
        cli_tsv_id("clusters", g->ids + n->id_off, n->id_len);
}

static int cmp_edge(const void *x, const void *y)
{
    const pedge *a = x, *b = y;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* The fraction of the pair (x, kept), or -1 when they are not a pair (a
 * component links them through others). Edges are sorted, a < b. */
static double fraction_to(const pgraph *g, uint32_t x, uint32_t kept)
{
    if (x == kept)
        return 1.0;
    pedge key = {x < kept ? x : kept, x < kept ? kept : x, 0};
    const pedge *e = bsearch(&key, g->edges, g->nedges, sizeof *g->edges, cmp_edge);
    return e ? e->fraction : -1;
}

int paragraph_clusters(const char *cmd, simstore *s, unsigned k, double min_fraction, int keep,
                       const char *key_field, int json, simstore_cluster_summary *sum)
{
    pgraph g;
    memset(&g, 0, sizeof g);
    g.keep = keep;
    g.key_field = key_field;
    memset(sum, 0, sizeof *sum);
    int rc = simstore_paragraph_pairs(s, k, min_fraction, on_pair, &g);
    /* Keys: insertion numbers and metadata, from the documents. */
    const char **ids = NULL;
    size_t *lens = NULL;
    if (rc == SIMSTORE_OK && g.nnodes) {
        ids = malloc(g.nnodes * sizeof *ids);
        lens = malloc(g.nnodes * sizeof *lens);
        if (!ids || !lens)
            rc = SIMSTORE_ENOMEM;
        for (size_t i = 0; rc == SIMSTORE_OK && i < g.nnodes; i++) {
            ids[i] = g.ids + g.nodes[i].id_off;
            lens[i] = g.nodes[i].id_len;
        }
        size_t n = g.nnodes;
        if (rc == SIMSTORE_OK)
            rc = simstore_get(s, ids, lens, n, on_document, &g);
    }
    free(ids);
    free(lens);
    member *m = NULL;
    if (rc == SIMSTORE_OK && g.nnodes) {
        for (size_t i = 0; i < g.nedges; i++) {
            pedge *e = &g.edges[i];
            if (e->a > e->b) {
                uint32_t t = e->a;
                e->a = e->b;
                e->b = t;
            }
            uint32_t a = find(&g, e->a), b = find(&g, e->b);
            if (a != b)
                g.nodes[a].parent = b;
        }
        if (g.nedges > 1)
            qsort(g.edges, g.nedges, sizeof *g.edges, cmp_edge);
        /* Each component's kept document. */
        uint32_t *kept = malloc(g.nnodes * sizeof *kept);
        m = malloc(g.nnodes * sizeof *m);
        if (!kept || !m) {
            free(kept);
            rc = SIMSTORE_ENOMEM;
        } else {
            for (uint32_t i = 0; i < g.nnodes; i++)
                kept[i] = UINT32_MAX;
            for (uint32_t i = 0; i < g.nnodes; i++) {
                uint32_t r = find(&g, i);
                if (kept[r] == UINT32_MAX || keeps_over(&g, i, kept[r]))
                    kept[r] = i;
            }
            for (uint32_t i = 0; i < g.nnodes; i++) {
                uint32_t r = find(&g, i);
                m[i] = (member){i, kept[r]};
                if (kept[r] == i) {
                    sum->clusters++;
                } else {
                    sum->dropped++;
                }
            }
            free(kept);
            g_sort = &g;
            qsort(m, g.nnodes, sizeof *m, cmp_member);
            uint64_t run = 0;
            for (size_t i = 0; i < g.nnodes; i++) {
                run = i && m[i].kept == m[i - 1].kept ? run + 1 : 1;
                if (run > sum->largest)
                    sum->largest = run;
                double f = fraction_to(&g, m[i].node, m[i].kept);
                char frac[32];
                if (f < 0)
                    snprintf(frac, sizeof frac, json ? "null" : "-");
                else
                    snprintf(frac, sizeof frac, "%.4f", f);
                int is_kept = m[i].node == m[i].kept;
                if (json) {
                    fputs("{\"cluster\":", stdout);
                    print_id(&g, m[i].kept, 1);
                    fputs(",\"id\":", stdout);
                    print_id(&g, m[i].node, 1);
                    printf(",\"kept\":%s,\"fraction\":%s}\n", is_kept ? "true" : "false", frac);
                } else {
                    print_id(&g, m[i].kept, 0);
                    putchar('\t');
                    print_id(&g, m[i].node, 0);
                    printf("\t%d\t%s\n", is_kept, frac);
                }
            }
            sum->documents = g.nnodes;
        }
    }
    free(m);
    free(g.ids);
    free(g.nodes);
    free(g.edges);
    free(g.by_id);
    (void)cmd;
    return rc;
}
