/* clusters.h: what clusters.c (simstore_clusters, its in-memory graph)
 * shares with components.c (connected components in bounded memory, by
 * spilling): a document's keep rank, the reporter that hands members to the
 * caller and counts the summary, the sorted fingerprints of a
 * fingerprint-only store, the spilling run, and its hooks for tests. */
#ifndef SIMS_SCAN_CLUSTERS_H
#define SIMS_SCAN_CLUSTERS_H

#include "scan/state.h"

#include <stddef.h>
#include <stdint.h>

/* A document's place in keep order under o->keep: smaller first, ties by
 * id (by fingerprint in a fingerprint-only store, where every rank is 0).
 * Calls o->key for the key rules (d must hold the metadata). */
uint64_t sims_scan_keep_rank(const simstore_cluster_options *o, const scan_docs *d,
                             const scan_doc *doc);

/* The caller's callback and the summary of what it was handed. */
typedef struct scan_reporter {
    simstore_cluster_fn fn;
    void *ctx;
    simstore_cluster_summary sum;
    uint64_t current; /* members of the cluster being reported */
} scan_reporter;

/* Count m (members come cluster by cluster, each kept document first) and
 * hand it to fn; returns fn's value. */
int sims_scan_report(scan_reporter *p, const simstore_cluster_member *m);

/* Every fingerprint in the segments of a fingerprint-only store, once
 * each, in increasing order, handed to fn (its nonzero value stops and is
 * returned); sorted in runs of run_values values (16 bytes each) spilled to
 * sims_scan_tmp_dir(so), their number added to *spilled_runs when not NULL. */
typedef int (*scan_fp_fn)(void *ctx, uint64_t fp);
int sims_scan_each_stored_fp(scan_state *st, const simstore_scan_options *so, size_t run_values,
                             scan_fp_fn fn, void *ctx, uint64_t *spilled_runs);

/* ---- components by spilling (components.c) --------------------------------
 * The connected components of the live edges in bounded memory: every step
 * goes through sorters (sort/recsort.h) of memory_bytes / 4 each, at most
 * three alive at once, spilling to sims_scan_tmp_dir(so). The output is the
 * in-memory path's, byte for byte. */
typedef struct scan_spill scan_spill;

/* What spilling runs did, for tests. */
typedef struct scan_spill_stats {
    uint64_t runs;         /* spilling runs of simstore_clusters        */
    uint64_t edges;        /* live edges they were given               */
    uint64_t rounds;       /* large-star + small-star rounds            */
    uint64_t spilled_runs; /* sorted runs their sorters wrote to files */
} scan_spill_stats;

/* A run over st with the options o (resolved scan options so; both must
 * outlive the run). Errors: SIMSTORE_ENOMEM. */
int sims_scan_spill_new(scan_state *st, const simstore_cluster_options *o,
                        const simstore_scan_options *so, scan_spill **out);
/* One live edge: distinct fingerprints, each held by a document (both
 * documents alive), in any order, repeats allowed. Errors: those of
 * sims_recsort_push (SIMSTORE_ENOMEM, SIMSTORE_EIO). */
int sims_scan_spill_edge(scan_spill *sp, uint64_t a, uint64_t b);
/* After the last edge: the components, their documents (the fingerprints
 * shared by several documents in no edge are components of their own; with
 * o->singletons, every other document is a cluster of one), each member
 * handed to p in simstore_clusters' order. Adds to *stats when not NULL.
 * Errors: SIMSTORE_ECORRUPT, SIMSTORE_EIO, SIMSTORE_ENOMEM, or p's
 * callback's nonzero value. */
int sims_scan_spill_report(scan_spill *sp, scan_reporter *p, scan_spill_stats *stats);
void sims_scan_spill_free(scan_spill *sp);

/* For tests: the same rounds over the graph of the n edges (edges[2i],
 * edges[2i + 1]) (distinct ends; any order, repeats allowed), with the
 * sorters of so (memory_bytes, tmp_dir): fn(node, root) for every node in
 * increasing order, root the smallest node of its component; fn's nonzero
 * value stops. Adds to *stats when not NULL. Errors: SIMSTORE_ENOMEM,
 * SIMSTORE_EIO, or fn's value. */
typedef int (*scan_component_fn)(void *ctx, uint64_t node, uint64_t root);
int sims_scan_spill_components(const uint64_t *edges, size_t n, const simstore_scan_options *so,
                               scan_component_fn fn, void *ctx, scan_spill_stats *stats);

/* For tests only; not thread-safe (set them while no scan runs). Nonzero
 * `on` makes components mode spill whether or not the in-memory graph
 * fits; a non-NULL stats receives the figures of every spilling run from
 * then on (NULL stops). */
void sims_scan_clusters_force_spill(int on);
void sims_scan_clusters_spill_stats(scan_spill_stats *stats);

#endif
