/* components.c: connected components over the ranks by label propagation, pointer jumping.
 * The graph's nodes (fingerprints, or documents with a minimum similarity
 * or --paragraphs) live at their owners, an edge as an adjacency at the
 * owner of each end: no rank holds more than its nodes' edges. Every label
 * only decreases and each node's label stays in its component; the labels
 * stop changing when each component has one. */
#include "scan_internal.h"

#include "cli.h"

#include <mpi.h>

#include <stdlib.h>
#include <string.h>

uint64_t node_key(const graph *g, size_t i)
{
    return g->of_docs ? g->o->docs[i].key : g->o->fps[i];
}

int key_owner(const graph *g, uint64_t key)
{
    return g->of_docs ? (int)(key >> DOC_KEY_BITS) : owner_of(key);
}

size_t key_node(const graph *g, uint64_t key)
{
    return g->of_docs ? (size_t)(key & ((UINT64_C(1) << DOC_KEY_BITS) - 1)) : node_of(g->o, key);
}

void node_docs(const graph *g, size_t i, size_t *lo, size_t *hi)
{
    *lo = g->of_docs ? i : g->o->first[i];
    *hi = g->of_docs ? i + 1 : g->o->first[i + 1];
}

/* Send the rounds' messages (key u64, value u64) and apply each received
 * one to the node it names with fn. Collective. */
typedef void (*kv_fn)(void *ctx, size_t node, uint64_t value);

static void deliver_kv(const graph *g, buf *out, buf *in, kv_fn fn, void *ctx)
{
    exchange_bufs(out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            size_t i = key_node(g, get_u64(&q));
            fn(ctx, i, get_u64(&q));
        }
        in[r].len = 0;
    }
}

void send_kv(const graph *g, buf *out, uint64_t key, uint64_t value)
{
    buf *b = &out[key_owner(g, key)];
    put64(b, key);
    put64(b, value);
}

void graph_build(graph *g, buf *out, buf *in, int singletons)
{
    exchange_bufs(out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++)
        g->nadj += in[r].len / 16;
    g->adj = must(malloc((g->nadj ? g->nadj : 1) * sizeof *g->adj));
    g->first_adj = must(calloc(g->n + 1, sizeof *g->first_adj));
    g->active = must(calloc(g->n ? g->n : 1, 1));
    size_t e = 0;
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; e++) {
            g->adj[e].node = key_node(g, get_u64(&q));
            g->adj[e].other = get_u64(&q);
            g->active[g->adj[e].node] = 1;
            g->first_adj[g->adj[e].node + 1]++;
        }
        in[r].len = 0;
    }
    /* The adjacencies by node (counting sort). */
    for (size_t i = 0; i < g->n; i++)
        g->first_adj[i + 1] += g->first_adj[i];
    adjacency *sorted = must(malloc((g->nadj ? g->nadj : 1) * sizeof *sorted));
    size_t *at = must(malloc((g->n ? g->n : 1) * sizeof *at));
    if (g->n)
        memcpy(at, g->first_adj, g->n * sizeof *at);
    for (e = 0; e < g->nadj; e++)
        sorted[at[g->adj[e].node]++] = g->adj[e];
    free(at);
    free(g->adj);
    g->adj = sorted;
    for (size_t i = 0; i < g->n; i++) {
        size_t lo, hi;
        node_docs(g, i, &lo, &hi);
        if (singletons || hi - lo > 1)
            g->active[i] = 1;
    }
    if (show_progress) {
        uint64_t nodes = sum_ranks(g->n), edges = sum_ranks(g->nadj) / 2;
        progress("components of a graph of %llu %s and %llu %s", (unsigned long long)nodes,
                 CLI_NOUN(nodes, "node"), (unsigned long long)edges, CLI_NOUN(edges, "edge"));
    }
}

void graph_free(graph *g)
{
    free(g->adj);
    free(g->first_adj);
    free(g->active);
}

typedef struct labels {
    const graph *g;
    uint64_t *label, *low;
    buf *out;
    int changed;
} labels;

static void take_low(void *ctx, size_t i, uint64_t v)
{
    labels *l = (labels *)ctx;
    if (v < l->low[i])
        l->low[i] = v;
}

static void take_label(void *ctx, size_t i, uint64_t v)
{
    labels *l = (labels *)ctx;
    if (v < l->label[i]) {
        l->label[i] = v;
        l->changed = 1;
    }
}

static void answer_label(void *ctx, size_t i, uint64_t asker)
{
    labels *l = (labels *)ctx;
    send_kv(l->g, l->out, asker, l->label[i]);
}

/* Label propagation with hooking and pointer jumping: label[i] ends as the
 * key of one node of i's component, the same for all of it. Every label
 * only decreases and is always a node of the same component, so the
 * rounds end; they end when no label changes, and then neighbours agree
 * (each took the least of its neighbours') and every label is its own
 * node's label (pointer jumping changed nothing). Collective. */
void components(const graph *g, uint64_t *label)
{
    labels l = {g, label, must(malloc((g->n ? g->n : 1) * sizeof *l.low)), bufs_new(), 0};
    buf *in = bufs_new();
    for (size_t i = 0; i < g->n; i++)
        label[i] = node_key(g, i);
    unsigned round = 0;
    for (;;) {
        l.changed = 0;
        /* Each node's least neighbouring label. */
        for (size_t i = 0; i < g->n; i++)
            l.low[i] = UINT64_MAX;
        for (size_t e = 0; e < g->nadj; e++)
            send_kv(g, l.out, g->adj[e].other, label[g->adj[e].node]);
        deliver_kv(g, l.out, in, take_low, &l);
        /* Hooking: a node takes it, and so does its label's node. */
        for (size_t i = 0; i < g->n; i++)
            if (g->active[i] && l.low[i] < label[i]) {
                send_kv(g, l.out, label[i], l.low[i]);
                label[i] = l.low[i];
                l.changed = 1;
            }
        deliver_kv(g, l.out, in, take_label, &l);
        /* Pointer jumping: a node asks its label's node for its label. */
        for (size_t i = 0; i < g->n; i++)
            if (g->active[i] && label[i] != node_key(g, i))
                send_kv(g, l.out, label[i], node_key(g, i));
        deliver_kv(g, l.out, in, answer_label, &l);
        deliver_kv(g, l.out, in, take_label, &l);
        MPI_Allreduce(MPI_IN_PLACE, &l.changed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        progress("components: round %u of label propagation%s", ++round,
                 l.changed ? "" : ", the last (no label changed)");
        if (!l.changed)
            break;
    }
    bufs_free(l.out);
    bufs_free(in);
    free(l.low);
}
