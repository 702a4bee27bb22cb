/* joinall.h: running the self-join (join.h) over every table of a design
 * on N threads, the work cut into (table, part) items, the pairs collected
 * in a spilling sorter in fingerprint order; and the two inputs it runs on:
 * an open store's segments, or an array of fingerprints in memory. */
#ifndef SIMS_SCAN_JOINALL_H
#define SIMS_SCAN_JOINALL_H

#include "scan/join.h"
#include "sort/recsort.h"
#include "sort/spool.h"
#include "store/store_internal.h"

#include <pthread.h>

/* Where the values of one table come from. */
typedef struct scan_join_input {
    /* Open the values of table t in [lo, hi] as a source for next(). */
    int (*open)(void *ctx, unsigned t, uint64_t lo, uint64_t hi, void **src);
    scan_source_fn next;
    void (*close)(void *src);
    void *ctx;
    unsigned parts; /* parts per table (sims_scan_parts_for), 1 for none */
} scan_join_input;

/* The design a self-join of n distinct fingerprints at distance k uses
 * (pairs and clusters above the store's k, simstore_join_fingerprints,
 * the join plan of simstore-mpi): the one minimising a join's cost, not a
 * query's (JOIN_MODEL in joinall.c). */
int sims_scan_join_design(unsigned k, uint64_t n, sims_design *d);

/* Join every table of d at distance k (1..d's k) on `threads` threads (0:
 * every core) and push each pair once into `out` as a pair record (below):
 * the sorted stream is then every pair of distinct values within k, by
 * (a, b), whatever the thread count. memory: the bytes the threads' prefix
 * groups may hold together (0: no limit; join.h, budget). */
int sims_scan_join_all(const sims_design *d, unsigned k, unsigned threads, uint64_t memory,
                       const scan_join_input *in, sims_recsort *out);

/* The pair record: key = a, b (8 bytes each, big-endian: byte order is
 * numeric order), value = the distance (1 byte). Read back from a finished
 * sorter of them in order, each pair handed to fn: fn's nonzero value
 * stops and is returned, else the sorter's error or 0. A pair pushed more
 * than once (band candidates, bands.h) is handed over once. */
int sims_scan_pairs_each(sims_recsort *joined, scan_pair_fn fn, void *ctx);

/* The input of a store snapshot: table t of every segment, merged. */
void sims_scan_store_input(scan_join_input *in, const simstore *s, const sims_snapshot *snap,
                           unsigned threads);

/* The distinct fingerprints of a snapshot: table 0 of every segment merged
 * (dead ones included, as the tables hold them), repeats dropped, in no
 * particular order, into out[0..*n); cap: at least the segments' fp_count
 * summed. Errors: those of the table cursors, SIMSTORE_ECORRUPT (more
 * values than cap). */
int sims_scan_store_distinct_fps(const simstore *s, const sims_snapshot *snap, uint64_t *out,
                                 size_t cap, size_t *n);

/* The same fingerprints appended to a spool (sealed by the caller). */
int sims_scan_store_distinct_spool(const simstore *s, const sims_snapshot *snap, sims_spool *out);

/* The input of a spool of fingerprints (any order, no repeats), permuted
 * and sorted per table by the thread that joins it through a spilling
 * sorter of run_values values (16 bytes each in memory; the runs beyond
 * it in tmp_dir): the array input's answers in bounded memory. */
typedef struct scan_spool_ctx {
    const sims_design *d;
    const sims_spool *fps;
    size_t run_values;
    const char *tmp_dir;
} scan_spool_ctx;
void sims_scan_spool_input(scan_join_input *in, scan_spool_ctx *ctx);

/* The input of fps[0..n) (any order; repeats allowed unless `distinct`),
 * permuted and sorted per table by the thread that joins it (n * 16 bytes
 * each: the copy and the sort's scratch, reused from table to table rather
 * than given back to the system and faulted in again). Values known
 * distinct are sorted by the table's prefix only (the join needs its
 * groups, not their order; a full sort puts repeats side by side, where
 * the join drops them). */
#define SCAN_ARRAY_SPARE 16
typedef struct scan_array_ctx {
    const sims_design *d;
    const uint64_t *fps;
    size_t n;
    int distinct;
    pthread_mutex_t mu; /* guards the spares */
    uint64_t *spare[SCAN_ARRAY_SPARE];
    unsigned nspare;
} scan_array_ctx;
void sims_scan_array_init(scan_array_ctx *a, const sims_design *d, const uint64_t *fps, size_t n,
                          int distinct);
/* Free the spare copies (after sims_scan_join_all). */
void sims_scan_array_release(scan_array_ctx *a);
void sims_scan_array_input(scan_join_input *in, scan_array_ctx *ctx);

/* A source (scan_source_fn) of sorted values in memory: v[pos..n), handed
 * over in order. */
typedef struct scan_values {
    const uint64_t *v;
    size_t n, pos;
} scan_values;
int sims_scan_values_next(void *src, uint64_t *out, size_t cap, size_t *n);

#endif
