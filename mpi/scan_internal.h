/* scan_internal.h: what the files of `simstore-mpi pairs` and `clusters` share.
 * The options both take and the shard they open (scan.c); documents at
 * their fingerprint's owner and the document pairs made there (owners.c);
 * the distributed join (join.c); the rule's band candidates beyond k
 * (bands.c); output lines, sorted across the ranks and
 * printed by rank 0 (output.c); pairs of documents sharing paragraphs
 * (paragraphs.c); components by label propagation (components.c). The
 * commands: pairs.c, clusters.c. */
#ifndef SIMSTORE_MPI_SCAN_INTERNAL_H
#define SIMSTORE_MPI_SCAN_INTERNAL_H

#include "mpi_internal.h"

#include "simstore.h"

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- scan.c: the options of both commands, the shard ---------------------- */

/* --chunk: the bytes a rank sends another per all-to-all round. */
extern uint64_t chunk_bytes;

typedef struct scan_opts {
    unsigned k;
    int have_k;
    int json;
    int similarity;        /* --similarity */
    double min_similarity; /* --min-similarity */
    int min_similarity_given;
    int distance_only;   /* pairs by fingerprint: no similarity by default */
    uint64_t memory;     /* --memory (1G) */
    int paragraphs;      /* --paragraphs */
    double min_fraction; /* --min-fraction */
    int min_fraction_given;
    simstore_near_rule rule; /* k, min_similarity and the bands once resolved
                                (open_shard) */
} scan_opts;

/* The options of both commands (O_UNSUPPORTED: not supported yet). */
enum {
    O_K = 1,
    O_JSON,
    O_SIMILARITY,
    O_MIN_SIMILARITY,
    O_THREADS,
    O_MEMORY,
    O_CHUNK,
    O_BY_FP,
    O_MODE,
    O_KEEP,
    O_SINGLETONS,
    O_PROGRESS,
    O_PARAGRAPHS,
    O_MIN_FRACTION,
    O_UNSUPPORTED
};

#define COMMON_LONG_OPTIONS                                                                        \
    {"k", required_argument, NULL, O_K}, {"json", no_argument, NULL, O_JSON},                      \
        {"similarity", no_argument, NULL, O_SIMILARITY},                                           \
        {"min-similarity", required_argument, NULL, O_MIN_SIMILARITY},                             \
        {"threads", required_argument, NULL, O_THREADS},                                           \
        {"memory", required_argument, NULL, O_MEMORY},                                             \
        {"chunk", required_argument, NULL, O_CHUNK}, {"progress", no_argument, NULL, O_PROGRESS},  \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }

#define COMMON_HELP                                                                                \
    "      --k K            largest distance, 0..7 (default: 7 on a store that keeps\n"            \
    "                       sketches when --min-similarity is not 0, else the\n"                   \
    "                       store's k; as `simstore pairs` and `clusters`)\n"                      \
    "      --json           JSON Lines\n"                                                          \
    "      --similarity     add the estimated Jaccard similarity (format/sketch.md)\n"             \
    "      --memory SIZE    each rank's scratch for one prefix group of the join (1G)\n"           \
    "      --chunk SIZE     bytes a rank sends another per all-to-all round (4M)\n"                \
    "      --threads N      accepted for `simstore`'s sake: each rank joins on one thread\n"       \
    "      --progress       rank 0 reports each step on stderr, with the ranks' totals\n"          \
    "  -h, --help           show this help\n"

/* Apply option c shared by both commands. Returns 0, or 2 for a bad
 * value or an option of neither (the caller says so). */
int common_option(int c, const char *arg, scan_opts *o);

/* After the options of either command: one operand, and `refused` (NULL:
 * nothing, else what cmd/optcheck.h's check of the command said). Returns
 * 0 or 2 (said by rank 0). */
int check_options(int argc, char **argv, const char *refused);

/* Rank 0 checks the whole store (manifest, shards, R), then every rank
 * opens its shard; k and the near-duplicate rule resolved into *o.
 * Returns 0, 1 (said, on every rank) or 2 (a usage error, said by rank
 * 0). Collective. */
int open_shard(const char *out, scan_opts *o, simstore **s, simstore_stats *st);

/* --paragraphs on a store without a paragraph index: 1 (said by rank 0,
 * the shard closed), else 0. */
int lacks_paragraph_index(simstore *s, const simstore_stats *st, const char *out);

/* Exit 2 for an option not supported yet; why: NULL or a hint. */
int unsupported(const char *what, const char *why);

/* ---- owners.c: documents at the owners of their fingerprints ------------- */

/* The rank owning fingerprint fp's documents and node. */
static inline int owner_of(uint64_t fp)
{
    uint64_t h = fp * UINT64_C(0x9E3779B97F4A7C15);
    h ^= h >> 31;
    return (int)(h % (uint64_t)nranks);
}

/* Ids in byte order (a shorter id that is a prefix first). */
static inline int id_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* A document as it travels: fp u64, key u64, keep u64, flags u8, id length u32,
 * sketch length u32, id, sketch. */
typedef struct sdoc {
    uint64_t fp;
    uint64_t key;  /* at the owners: rank << 40 | index in its docs */
    uint64_t keep; /* keep order: smaller first; ties by id */
    const char *id;
    const uint8_t *sketch; /* NULL: none */
    uint32_t id_len, sketch_len;
    uint8_t flags;
} sdoc;

void put_doc(buf *b, const sdoc *d);
void get_doc(const char **p, sdoc *d);

/* A document's key at its owner: the owner's rank above DOC_KEY_BITS. */
#define DOC_KEY_BITS 40

/* The documents of the fingerprints this rank owns, sorted by (fp, id),
 * and the distinct fingerprints (nodes) with their runs. */
typedef struct owned {
    buf *in; /* the received bytes the documents point into */
    sdoc *docs;
    size_t ndocs;
    uint64_t *fps; /* distinct, increasing */
    size_t *first; /* nfps + 1: fps[i]'s documents are docs[first[i]..first[i+1]) */
    size_t nfps;
} owned;

void owned_free(owned *o);

/* fp's node, or SIZE_MAX. */
size_t node_of(const owned *o, uint64_t fp);

/* Every rank exports its shard; the documents meet at their owners.
 * Returns 0, or -1 (said) when this rank's export failed. Collective. */
int gather_owned(simstore *s, const simstore_cluster_options *keep, int fp_only, owned *o);

/* ---- join.c: the join, table by table ------------------------------------ */

typedef struct fpair {
    uint64_t a, b;
    unsigned distance;
} fpair;

typedef struct pairs_acc {
    fpair *v;
    size_t n, cap;
} pairs_acc;

/* qsort(3) order of uint64_t values. */
int cmp_u64(const void *x, const void *y);

/* The join at distance k over the distinct fingerprints fps[0..nfps) of
 * every rank (each fingerprint on one rank only): this rank's share of the
 * pairs (each pair on exactly one rank). Returns 0, or -1 (said) when this
 * rank failed; agreed on every rank. Collective. */
int join_distinct(const uint64_t *fps, size_t nfps, unsigned k, uint64_t memory, pairs_acc *pairs);

/* join_distinct over the fingerprints this rank owns. */
int join_owned(const owned *o, unsigned k, uint64_t memory, pairs_acc *pairs);

/* ---- bands.c: the rule's band candidates beyond k ------------------------ */

/* With the resolved rule's bands (rule->bands, band_rows, band_count),
 * every pair of distinct fingerprints more than rule->k apart of which a
 * document of each has a sketch agreeing with the other's on one band
 * (format/sketch.md 6.2), added to pairs once, at the owner of a (a < b):
 * with the join's pairs (all within k), the candidates each_pair makes
 * document pairs of. Without bands, nothing. Memory: the bands go in
 * passes, each within `memory` on every rank (as far as the hash spreads
 * the keys evenly); the candidates as the join's pairs. Collective. */
void band_pairs(const owned *o, const simstore_near_rule *rule, uint64_t memory, pairs_acc *pairs);

/* ---- owners.c: the document pairs of the join's pairs --------------------- */

/* Receives a pair of documents within distance (x's and y's pointers
 * valid during the call), or a pair of fingerprints with their document
 * counts. */
typedef void (*doc_pair_fn)(void *ctx, const sdoc *x, const sdoc *y, unsigned distance);
typedef void (*fp_pair_fn)(void *ctx, uint64_t a, uint64_t b, unsigned distance, uint64_t ca,
                           uint64_t cb);

/* Every pair of candidate documents, at the owner of one of their
 * fingerprints: those sharing a fingerprint, and those of the pairs
 * (the join's, and band_pairs' beyond k: a's documents travel to the owner
 * of b), for fn to judge by the rule. With fpfn instead,
 * the pairs of fingerprints (a shared one paired with itself at 0) with
 * their counts. Collective. */
void each_pair(const owned *o, const pairs_acc *pairs, doc_pair_fn fn, fp_pair_fn fpfn, void *ctx);

/* ---- output.c: keyed lines, sorted across the ranks, printed by rank 0 --- */

/* This rank's output lines, each with a byte key of the single-node order:
 * a line is written to f, its key built in key[0..key_len), and line_done
 * makes them a record of recs. */
typedef struct lines {
    buf recs;
    FILE *f; /* lines are written here, then copied into recs */
    char *text;
    size_t text_len;
    uint8_t key[1 + 2 * (2 * SIMSTORE_MAX_ID_BYTES + 2) + 16];
    size_t key_len;
} lines;

/* Returns 0, or -1 out of memory. */
int lines_open(lines *l);
void lines_close(lines *l);

/* Key pieces: an id escaped so that byte order of keys is the byte order of
 * ids (0 as 0 1, the end as 0 0), a big-endian u64. */
void key_id(lines *l, const char *id, size_t len);
void key_u64(lines *l, uint64_t v);

/* The line written to l->f since the last one, with l->key, as a record. */
void line_done(lines *l);

/* An id in a line: a TSV field (print_tsv_id), or with json a JSON string
 * unless an integer id (SIMSTORE_MATCH_INTEGER_ID in flags). */
void print_id(FILE *f, const char *id, size_t len, unsigned flags, int json);

/* Sort every rank's records into one order and print their lines on rank
 * 0 in it. Returns 0, or 1 on every rank when writing failed. Collective. */
int print_sorted(lines *l);

/* ---- paragraphs.c: documents sharing near-duplicate paragraphs ----------- */

/* The documents of this rank's shard that list paragraphs: their ids. */
typedef struct homes {
    buf ids;    /* id bytes */
    size_t *at; /* n + 1 offsets into ids */
    uint8_t *flags;
    uint64_t *keep; /* clusters: each one's keep order (simstore_keep_order) */
    const simstore_cluster_options *keep_rule; /* clusters; NULL for pairs */
    size_t n, cap;
    buf *out;    /* step 1's messages */
    uint64_t *v; /* one document's paragraphs */
    size_t vcap;
} homes;

void homes_free(homes *h);

/* clusters --paragraphs: a pair at the home of one of its documents. */
typedef struct para_edge {
    uint64_t node, other; /* document keys: node's home is this rank */
    double fraction;
} para_edge;

/* para_edge by node, then other. */
int para_edge_cmp(const void *x, const void *y);

typedef struct para_run {
    int json;
    const simstore_near_rule *rule; /* its minimum fraction */
    lines l;
    int want_edges; /* clusters: the pairs as edges at both homes, no lines */
    para_edge *edges;
    size_t nedges;
} para_run;

/* The pairs of documents sharing paragraphs within k, as `simstore pairs
 * --paragraphs` counts them: this rank's lines in pr->l, or with
 * pr->want_edges the pairs as edges at both homes (pr->edges, sorted);
 * *hp this rank's documents with paragraphs. Returns 0, or 1 on every
 * rank (said). Collective. */
int paragraph_pairs(simstore *s, unsigned k, uint64_t memory, para_run *pr, homes *hp);

/* ---- components.c: components over the ranks ----------------------------- */

/* The graph a rank holds part of: its nodes are the fingerprints it owns,
 * or (with a minimum similarity) the documents it holds, keyed by
 * fingerprint or by document key; an edge is an adjacency at each end's
 * owner. */
typedef struct graph {
    const owned *o;
    int of_docs;
    size_t n;
    unsigned char *active; /* per node: in the graph (or a singleton) */
    struct adjacency *adj; /* sorted by node */
    size_t nadj;
    size_t *first_adj; /* n + 1 */
} graph;

typedef struct adjacency {
    size_t node;
    uint64_t other;
} adjacency;

/* A node's key, the rank owning a key, the node of a key at its owner. */
uint64_t node_key(const graph *g, size_t i);
int key_owner(const graph *g, uint64_t key);
size_t key_node(const graph *g, uint64_t key);

/* Node i's documents: [*lo, *hi) of o->docs. */
void node_docs(const graph *g, size_t i, size_t *lo, size_t *hi);

/* A message (key u64, value u64) for the owner of key, in out. */
void send_kv(const graph *g, buf *out, uint64_t key, uint64_t value);

/* g's adjacencies (key u64, other u64), put in out by send_kv at both
 * ends of each edge: exchanged, and those this rank received taken as
 * g->adj, by node (g->o, of_docs and n set before); every node with one active,
 * and every node when singletons, else those of two documents or more.
 * out and in are emptied. Collective. */
void graph_build(graph *g, buf *out, buf *in, int singletons);

/* What graph_build allocated. */
void graph_free(graph *g);

/* Label propagation with hooking and pointer jumping: label[i] ends as the
 * key of one node of i's component, the same for all of it. Collective. */
void components(const graph *g, uint64_t *label);

#endif
