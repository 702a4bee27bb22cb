/* clusters.c: `simstore-mpi clusters OUT`: options, kept documents and stars, member lines.
 * The pairs are the edges of a graph whose nodes (fingerprints; documents
 * with a minimum similarity or --paragraphs) live at their owners;
 * components by label propagation (components.c); each component's kept
 * document, or its stars in keep order, are chosen at the owner of its
 * label, which receives that component's nodes (and for stars their
 * edges) only; each node's owner then makes its documents' lines, as
 * `simstore clusters` prints them. */
#include "scan_internal.h"

#include "cli.h"
#include "optcheck.h"
#include "simstore.h"

#include <mpi.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct clusters_run {
    scan_opts o;
    int singletons;
    int star;
    simstore_sketch_kind sketch;
    lines l;
    buf *edges; /* with a minimum similarity: document edges to their owners */
    uint64_t documents, clusters, largest;
    const para_run *para; /* --paragraphs: the graph of documents sharing them */
} clusters_run;

/* x is kept before y: keep order, then id. */
static int keeps_before(const sdoc *x, const sdoc *y)
{
    if (x->keep != y->keep)
        return x->keep < y->keep;
    return id_cmp(x->id, x->id_len, y->id, y->id_len) < 0;
}

/* --paragraphs: the fraction of the pair (d, kept) from d's edges at its
 * home, or -1 when they are no pair (linked through others). */
static double fraction_to_kept(const clusters_run *c, const sdoc *d, const sdoc *kept)
{
    para_edge key = {d->key, kept->key, 0};
    const para_edge *e =
        bsearch(&key, c->para->edges, c->para->nedges, sizeof *c->para->edges, para_edge_cmp);
    return e ? e->fraction : -1;
}

static void emit_member(clusters_run *c, const sdoc *d, const sdoc *kept)
{
    int is_kept = id_cmp(d->id, d->id_len, kept->id, kept->id_len) == 0;
    unsigned distance = simstore_distance(d->fp, kept->fp);
    double sim = simstore_sketch_similarity(c->sketch, d->sketch, kept->sketch);
    lines *l = &c->l;
    key_id(l, kept->id, kept->id_len);
    l->key[l->key_len++] = is_kept ? 0 : 1;
    key_id(l, d->id, d->id_len);
    int json = c->o.json;
    char s[32];
    cli_format_similarity(sim, json, s);
    if (c->para) { /* as `simstore clusters --paragraphs` prints its members */
        double f = is_kept ? 1.0 : fraction_to_kept(c, d, kept);
        if (f < 0)
            snprintf(s, sizeof s, json ? "null" : "-");
        else
            snprintf(s, sizeof s, "%.4f", f);
        if (json) {
            fputs("{\"cluster\":", l->f);
            print_id(l->f, kept->id, kept->id_len, kept->flags, 1);
            fputs(",\"id\":", l->f);
            print_id(l->f, d->id, d->id_len, d->flags, 1);
            fprintf(l->f, ",\"kept\":%s,\"fraction\":%s}\n", is_kept ? "true" : "false", s);
        } else {
            print_id(l->f, kept->id, kept->id_len, kept->flags, 0);
            fputc('\t', l->f);
            print_id(l->f, d->id, d->id_len, d->flags, 0);
            fprintf(l->f, "\t%d\t%s\n", is_kept, s);
        }
    } else if (json) {
        fputs("{\"cluster\":", l->f);
        print_id(l->f, kept->id, kept->id_len, kept->flags, 1);
        fputs(",\"id\":", l->f);
        print_id(l->f, d->id, d->id_len, d->flags, 1);
        fprintf(l->f, ",\"kept\":%s,\"distance\":%u", is_kept ? "true" : "false", distance);
        if (c->o.similarity)
            fprintf(l->f, ",\"similarity\":%s", s);
        fputs("}\n", l->f);
    } else {
        print_id(l->f, kept->id, kept->id_len, kept->flags, 0);
        fputc('\t', l->f);
        print_id(l->f, d->id, d->id_len, d->flags, 0);
        fprintf(l->f, "\t%d\t%u", is_kept, distance);
        if (c->o.similarity)
            fprintf(l->f, "\t%s", s);
        fputc('\n', l->f);
    }
    line_done(l);
    c->documents++;
}

/* A document edge when the two are similar enough (an unknown similarity
 * is not), to the owners of both ends. */
static void add_doc_edge(void *ctx, const sdoc *x, const sdoc *y, unsigned distance)
{
    clusters_run *c = (clusters_run *)ctx;
    if (!simstore_near_duplicate_sketches(&c->o.rule, c->sketch, distance, x->sketch, y->sketch,
                                          NULL))
        return;
    int ox = (int)(x->key >> DOC_KEY_BITS), oy = (int)(y->key >> DOC_KEY_BITS);
    put64(&c->edges[ox], x->key);
    put64(&c->edges[ox], y->key);
    put64(&c->edges[oy], y->key);
    put64(&c->edges[oy], x->key);
}

/* A node as its component's owner sees it: the component's label, the
 * node's key, its document count and best document, and (stars) its
 * neighbours' keys. */
typedef struct comp_node {
    uint64_t label, key, count;
    sdoc best;
    const char *neighbours; /* degree u64 keys */
    uint64_t degree;
    size_t centre; /* stars: the index of the centre that took it */
} comp_node;

static int by_label_key(const void *x, const void *y)
{
    const comp_node *a = x, *b = y;
    if (a->label != b->label)
        return a->label < b->label ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

static const comp_node *g_order; /* qsort has no context argument */

static int by_keep(const void *x, const void *y)
{
    const comp_node *a = &g_order[*(const size_t *)x], *b = &g_order[*(const size_t *)y];
    return keeps_before(&a->best, &b->best) ? -1 : keeps_before(&b->best, &a->best) ? 1 : 0;
}

/* The nodes m[lo..hi) of one component (sorted by key): each one's centre,
 * in keep order each node not yet taken taking its neighbours not yet
 * taken (a star); or the component's best node for all (components). */
static void choose_centres(const clusters_run *c, comp_node *m, size_t lo, size_t hi)
{
    size_t best = lo;
    for (size_t i = lo; i < hi; i++) {
        m[i].centre = SIZE_MAX;
        if (keeps_before(&m[i].best, &m[best].best))
            best = i;
    }
    if (!c->star) {
        for (size_t i = lo; i < hi; i++)
            m[i].centre = best;
        return;
    }
    size_t n = hi - lo, *order = must(malloc(n * sizeof *order));
    for (size_t i = 0; i < n; i++)
        order[i] = lo + i;
    g_order = m;
    sort_items(order, n, sizeof *order, by_keep);
    for (size_t k = 0; k < n; k++) {
        comp_node *x = &m[order[k]];
        if (x->centre != SIZE_MAX)
            continue;
        x->centre = order[k];
        const char *q = x->neighbours;
        for (uint64_t e = 0; e < x->degree; e++) {
            uint64_t key = get_u64(&q);
            size_t a = lo, b = hi; /* the neighbour, in the same component */
            while (a < b) {
                size_t mid = a + (b - a) / 2;
                if (m[mid].key < key)
                    a = mid + 1;
                else
                    b = mid;
            }
            if (m[a].centre == SIZE_MAX)
                m[a].centre = order[k];
        }
    }
    free(order);
}

/* The graph's edges, to the owners of their ends (out): the pairs of
 * documents sharing paragraphs, the document pairs similar enough, or the
 * join's fingerprint pairs. Collective. */
static void send_edges(clusters_run *c, const graph *g, const owned *o, const pairs_acc *pairs,
                       buf *out)
{
    if (c->para) {
        for (size_t i = 0; i < c->para->nedges; i++)
            send_kv(g, out, c->para->edges[i].node, c->para->edges[i].other);
    } else if (g->of_docs) {
        c->edges = out;
        each_pair(o, pairs, add_doc_edge, NULL, c);
        c->edges = NULL;
    } else {
        for (size_t i = 0; i < pairs->n; i++) {
            send_kv(g, out, pairs->v[i].a, pairs->v[i].b);
            send_kv(g, out, pairs->v[i].b, pairs->v[i].a);
        }
    }
}

/* Each active node's count, best document and (stars) neighbours to the
 * owner of its label; what this rank received, sorted by (label, key):
 * *n nodes pointing into in. Collective. */
static comp_node *gather_components(const clusters_run *c, const graph *g, const uint64_t *label,
                                    buf *out, buf *in, size_t *n)
{
    const owned *o = g->o;
    for (size_t i = 0; i < g->n; i++) {
        if (!g->active[i])
            continue;
        size_t lo, hi;
        node_docs(g, i, &lo, &hi);
        size_t best = lo;
        for (size_t x = lo + 1; x < hi; x++)
            if (keeps_before(&o->docs[x], &o->docs[best]))
                best = x;
        buf *b = &out[key_owner(g, label[i])];
        put64(b, label[i]);
        put64(b, node_key(g, i));
        put64(b, hi - lo);
        put_doc(b, &o->docs[best]);
        uint64_t degree = c->star ? g->first_adj[i + 1] - g->first_adj[i] : 0;
        put64(b, degree);
        for (uint64_t k = 0; k < degree; k++)
            put64(b, g->adj[g->first_adj[i] + k].other);
    }
    exchange_bufs(out, in, chunk_bytes);
    size_t cap = 0;
    comp_node *m = NULL;
    *n = 0;
    for (int r = 0; r < nranks; r++)
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; (*n)++) {
            if (*n == cap) {
                cap = cap ? 2 * cap : 1024;
                m = must(realloc(m, cap * sizeof *m));
            }
            comp_node *x = &m[*n];
            x->label = get_u64(&q);
            x->key = get_u64(&q);
            x->count = get_u64(&q);
            get_doc(&q, &x->best);
            x->degree = get_u64(&q);
            x->neighbours = q;
            q += 8 * x->degree;
        }
    sort_items(m, *n, sizeof *m, by_label_key);
    return m;
}

/* Each node's kept document (its centre's best) back to its owner (out),
 * when its cluster has two documents or more (or singletons), from the
 * components' nodes m[0..n) at this rank; the clusters counted. */
static void send_kept(clusters_run *c, const graph *g, comp_node *m, size_t n, buf *out)
{
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo; hi < n && m[hi].label == m[lo].label; hi++)
            ;
        choose_centres(c, m, lo, hi);
        for (size_t x = lo; x < hi; x++) {
            if (m[x].centre != x)
                continue;
            uint64_t size = 0;
            for (size_t y = lo; y < hi; y++)
                if (m[y].centre == x)
                    size += m[y].count;
            if (size < 2 && !c->singletons)
                continue;
            c->clusters++;
            if (size > c->largest)
                c->largest = size;
            for (size_t y = lo; y < hi; y++)
                if (m[y].centre == x) {
                    buf *b = &out[key_owner(g, m[y].key)];
                    put64(b, m[y].key);
                    put_doc(b, &m[x].best);
                }
        }
    }
}

/* The clusters' members as output records. Collective. */
static void make_clusters(clusters_run *c, const owned *o, const pairs_acc *pairs)
{
    graph g = {o, c->o.min_similarity > 0 || c->para, 0, NULL, NULL, 0, NULL};
    g.n = g.of_docs ? o->ndocs : o->nfps;
    buf *out = bufs_new(), *in = bufs_new();
    send_edges(c, &g, o, pairs, out);
    graph_build(&g, out, in, c->singletons);
    uint64_t *label = must(malloc((g.n ? g.n : 1) * sizeof *label));
    components(&g, label);
    size_t n;
    comp_node *m = gather_components(c, &g, label, out, in, &n);
    send_kept(c, &g, m, n, out);
    buf *kept_in = bufs_new();
    exchange_bufs(out, kept_in, chunk_bytes);
    free(m);
    for (int r = 0; r < nranks; r++)
        for (const char *q = kept_in[r].data, *end = q + kept_in[r].len; q < end;) {
            size_t i = key_node(&g, get_u64(&q)), lo, hi;
            sdoc kept;
            get_doc(&q, &kept);
            node_docs(&g, i, &lo, &hi);
            for (size_t x = lo; x < hi; x++)
                emit_member(c, &o->docs[x], &kept);
        }
    bufs_free(kept_in);
    bufs_free(out);
    bufs_free(in);
    graph_free(&g);
    free(label);
}

static void usage_clusters(FILE *out)
{
    fprintf(
        out,
        "Usage: mpirun -np R simstore-mpi clusters OUT [--keep RULE] [--k K]\n"
        "                      [--mode components|star] [--singletons] [--json]\n"
        "                      [--similarity] [--min-similarity J] [--memory SIZE]\n"
        "                      [--chunk SIZE] [--progress]\n"
        "       mpirun -np R simstore-mpi clusters OUT --paragraphs [--min-fraction F]\n"
        "                      [--k K] [--keep RULE] [--json]\n"
        "\n"
        "Group the documents of the sharded store OUT of R shards into clusters of\n"
        "near-duplicates, rank r reading shard r: exactly what `simstore clusters`\n"
        "prints for one store of the same documents,\n"
        "CLUSTER<TAB>DOC_ID<TAB>KEPT<TAB>DISTANCE_TO_KEPT[<TAB>SIMILARITY_TO_KEPT],\n"
        "and its summary on stderr. The join is spread over the ranks; components\n"
        "are found by label propagation with pointer jumping among the ranks that\n"
        "own the fingerprints (no rank holds the whole graph); a component's kept\n"
        "document (and its stars) are chosen at the rank owning its label; rank 0\n"
        "prints.\n"
        "\n"
        "      --mode components  connected components of the within-K graph (default)\n"
        "      --mode star      in keep order, each document not yet taken becomes a\n"
        "                       centre and takes every document not yet taken within K\n"
        "      --keep first     keep the document given first (default): the smallest\n"
        "                       insertion number, which a sharded store built by\n"
        "                       `simstore build --shards` or `simstore-mpi build` gives\n"
        "                       as one store of the same input would\n"
        "      --keep min-id    keep the smallest id\n"
        "      --keep max-meta FIELD, --keep min-meta FIELD\n"
        "                       keep the largest (smallest) number in FIELD of the\n"
        "                       metadata; documents without one come last; ties by id\n"
        "      --singletons     also print each document near no other\n"
        "      --min-similarity J\n"
        "                       two documents are near only when within K and their\n"
        "                       estimated similarity is at least J (a graph over\n"
        "                       documents); needs a store that keeps sketches\n"
        "                       (default: 0.9 when --k is not given on a store that\n"
        "                       keeps sketches, the near-duplicate setting; else 0);\n"
        "                       from 0.5 up, documents whose sketches share a band\n"
        "                       are candidates beyond K too (format/sketch.md 6.2)\n" COMMON_HELP
        "\n"
        "With --paragraphs (a store built with --paragraphs), the connected\n"
        "components of the pairs of `pairs --paragraphs` with FRACTION >= F\n"
        "(--min-fraction, default 0.3), as `simstore clusters --paragraphs` prints\n"
        "them (the pair's FRACTION with the kept document instead of a distance,\n"
        "'-' when linked only through others); components over the documents at\n"
        "their ranks, as above. Components only; not with --singletons or the\n"
        "similarity options.\n");
}

/* The options into *c and *keep. Returns -1 to go on, else the exit
 * status (the usage error said by rank 0). */
static int parse_clusters_options(int argc, char **argv, clusters_run *c,
                                  simstore_cluster_options *keep)
{
    static const struct option longopts[] = {
        COMMON_LONG_OPTIONS,
        {"mode", required_argument, NULL, O_MODE},
        {"keep", required_argument, NULL, O_KEEP},
        {"singletons", no_argument, NULL, O_SINGLETONS},
        {"paragraphs", no_argument, NULL, O_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, O_MIN_FRACTION},
        {NULL, 0, NULL, 0},
    };
    c->o.memory = (uint64_t)1 << 30;
    simstore_cluster_options_init(keep);
    const char *field = NULL;
    c->o.min_fraction = SIMSTORE_NEAR_FRACTION;
    int ch, li = 0, mode_given = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, &li)) != -1) {
        if (ch == 'h') {
            if (rank == 0)
                usage_clusters(stdout);
            return 0;
        } else if (ch == O_MODE) {
            if (strcmp(optarg, "star") != 0 && strcmp(optarg, "components") != 0)
                return usage_error(argc, argv);
            c->star = strcmp(optarg, "star") == 0;
            mode_given = c->star;
        } else if (ch == O_KEEP) {
            char why[256];
            if (cli_parse_keep(optarg, argv, argc, &optind, &keep->keep, &field, why, sizeof why)) {
                if (rank == 0)
                    fprintf(stderr, "%s: %s\n", cmd_name, why);
                return 2;
            }
        } else if (ch == O_SINGLETONS) {
            c->singletons = 1;
        } else if (common_option(ch, optarg, &c->o)) {
            return usage_error(argc, argv);
        }
    }
    int bad = check_options(argc, argv,
                            cli_clusters_options_problem(c->o.min_fraction_given, c->o.paragraphs,
                                                         mode_given, c->singletons, c->o.similarity,
                                                         c->o.min_similarity));
    if (bad)
        return bad;
    keep->key = cli_meta_key;
    keep->key_ctx = (void *)field;
    return -1;
}

/* --paragraphs: the graph of documents sharing paragraphs: its nodes the
 * documents at their homes (*h, as o's documents), its edges the pairs of
 * pairs --paragraphs at both ends (pr's). Returns 0, or 1 on every rank
 * (said). Collective. */
static int paragraph_graph(simstore *s, clusters_run *c, const simstore_cluster_options *keep,
                           para_run *pr, homes *h, owned *o)
{
    pr->rule = &c->o.rule;
    pr->want_edges = 1;
    h->keep_rule = keep;
    int status = paragraph_pairs(s, c->o.k, c->o.memory / 4, pr, h);
    o->docs = must(malloc((h->n ? h->n : 1) * sizeof *o->docs));
    for (size_t i = 0; i < h->n; i++)
        o->docs[i] =
            (sdoc){0,    (uint64_t)rank << DOC_KEY_BITS | i,  h->keep[i], h->ids.data + h->at[i],
                   NULL, (uint32_t)(h->at[i + 1] - h->at[i]), 0,          h->flags[i]};
    o->ndocs = h->n;
    c->para = pr;
    return status;
}

/* The summary on stderr, the ranks' counts summed: by rank 0 unless
 * status (failed). Collective. */
static void print_summary(const clusters_run *c, int status)
{
    uint64_t sum[2] = {c->documents, c->clusters}, largest = c->largest;
    MPI_Allreduce(MPI_IN_PLACE, sum, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (!status && rank == 0)
        fprintf(stderr, "clusters: %llu %s in %llu %s, %llu to drop, largest cluster %llu %s\n",
                (unsigned long long)sum[0], CLI_NOUN(sum[0], "document"),
                (unsigned long long)sum[1], CLI_NOUN(sum[1], "cluster"),
                (unsigned long long)(sum[0] - sum[1]), (unsigned long long)largest,
                CLI_NOUN(largest, "document"));
}

int cmd_mpi_clusters(int argc, char **argv)
{
    cmd_name = "simstore-mpi clusters";
    clusters_run c;
    memset(&c, 0, sizeof c);
    simstore_cluster_options keep;
    int status = parse_clusters_options(argc, argv, &c, &keep);
    if (status >= 0)
        return status;
    simstore *s;
    simstore_stats st;
    status = open_shard(argv[optind], &c.o, &s, &st);
    if (status)
        return status;
    c.sketch = st.sketch;
    if (c.o.paragraphs && lacks_paragraph_index(s, &st, argv[optind]))
        return 1;
    owned o;
    memset(&o, 0, sizeof o);
    pairs_acc pairs = {NULL, 0, 0};
    para_run pr;
    memset(&pr, 0, sizeof pr);
    homes h;
    memset(&h, 0, sizeof h);
    if (c.o.paragraphs)
        status = paragraph_graph(s, &c, &keep, &pr, &h, &o);
    else
        status =
            agree(gather_owned(s, &keep, st.fingerprint_only, &o) != 0, "reading the documents");
    if (!status && c.o.k > 0 && !c.o.paragraphs)
        status = join_owned(&o, c.o.k, c.o.memory / 4, &pairs);
    if (!status && !c.o.paragraphs && !st.fingerprint_only)
        band_pairs(&o, &c.o.rule, c.o.memory / 4, &pairs);
    if (!status && lines_open(&c.l) != 0) {
        say("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!status) {
        make_clusters(&c, &o, &pairs);
        free(pairs.v);
        pairs.v = NULL;
        status = print_sorted(&c.l);
    }
    print_summary(&c, status);
    lines_close(&c.l);
    free(pairs.v);
    owned_free(&o);
    homes_free(&h);
    free(pr.edges);
    simstore_close(s);
    return status;
}
