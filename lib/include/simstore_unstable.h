/* simstore_unstable.h: the library's functions for simstore's own clients
 * (simstore-mpi, the simstore command's ingestion, tests and benchmarks):
 * the pieces a program needs to spread the library's work over processes
 * or threads itself. Installed beside simstore.h, but WITHOUT the stability
 * promise of simstore.h: anything here may change or go in any release,
 * minor ones included. Include simstore.h first. */
#ifndef SIMSTORE_UNSTABLE_H
#define SIMSTORE_UNSTABLE_H

#include "simstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Store internals for measurement --------------------------------------- */

/* Pages of the store's data.mdb this process has checked so far (by the
 * walk at open, by the lazy checks of each read, or both: the measure
 * tests and benchmarks use to see that an open does not read the file in
 * proportion to its size). 0 for NULL. */
SIMSTORE_API uint64_t simstore_lmdb_pages_checked(const simstore *s);

/* ---- Merging answers held elsewhere (shards) ---------------------------------- */

/* The order of simstore_query_paragraphs' answers, as a qsort comparator
 * of two simstore_paragraph_match: shared (larger first; the answers to one
 * query have the same `of`, so this is fraction), then id bytes, a prefix
 * first. For merging answers from several stores (shards) into one's. */
SIMSTORE_API int simstore_paragraph_match_cmp(const void *a, const void *b);

/* Sort matches[0..n) into the order simstore_query_fp() answers in: by
 * distance, then id bytes (a prefix first), then fingerprint. For merging
 * the answers of shards held elsewhere (the MPI driver). */
SIMSTORE_API void simstore_sort_matches(simstore_match *matches, size_t n);

/* ---- The join spread over processes ----------------------------------------
 * The pieces of simstore_join_fingerprints() for a program that spreads it
 * over several processes (simstore-mpi pairs and clusters): every process
 * makes the same plan from the same k and n; for each table t it permutes
 * its fingerprints with simstore_join_plan_permute(), sends each value to
 * the process owning its prefix (the top simstore_join_plan_prefix_bits()
 * bits: a process must hold whole prefix groups), sorts what it received
 * and joins it with simstore_join_plan_table(). A pair within k is emitted
 * only by the first table whose prefix its differing bits avoid, so the
 * union of every process's pairs over every table has each pair exactly
 * once: the pairs of simstore_join_fingerprints() over all the values. */
typedef struct simstore_join_plan simstore_join_plan;

/* The design simstore_join_fingerprints() joins n fingerprints at k
 * (1..SIMSTORE_MAX_K) under, the same on every call with the same
 * arguments.
 *   out  receives the plan, owned by the caller, released with
 *        simstore_join_plan_free(); NULL on failure.
 * Errors: SIMSTORE_EINVAL (k out of range, out NULL), SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_join_plan_new(unsigned k, uint64_t n, simstore_join_plan **out);

/* Release a plan; NULL is allowed. */
SIMSTORE_API void simstore_join_plan_free(simstore_join_plan *p);

/* The plan's number of permuted tables (0 for NULL). */
SIMSTORE_API unsigned simstore_join_plan_tables(const simstore_join_plan *p);

/* Table t's prefix width in bits, 1..64 (0 for a NULL plan or t out of
 * range): values of t sharing their top that many bits form a prefix group. */
SIMSTORE_API unsigned simstore_join_plan_prefix_bits(const simstore_join_plan *p, unsigned t);

/* fp permuted for table t (fp itself for a NULL plan or t out of range). */
SIMSTORE_API uint64_t simstore_join_plan_permute(const simstore_join_plan *p, unsigned t,
                                                 uint64_t fp);

/* Sort permuted[0..n), values permuted for table t, into the order
 * simstore_join_plan_table() takes (increasing: a radix sort of the table's
 * prefixes, then of each prefix group, n * 8 bytes of scratch). Errors: SIMSTORE_EINVAL (NULL arguments, t out of range),
 * SIMSTORE_ENOMEM. */
SIMSTORE_API int simstore_join_plan_sort(const simstore_join_plan *p, unsigned t,
                                         uint64_t *permuted, size_t n);

/* Join table t over permuted[0..n): values permuted for t, in increasing
 * order (repeats allowed and skipped), holding every value of each prefix
 * group they touch. fn receives each pair of distinct fingerprints within
 * the plan's k (original bits, a < b) that t is the first table to cover,
 * in no particular order. memory_bytes: scratch allowed for one prefix
 * group (0: no limit). Errors: SIMSTORE_EINVAL (NULL arguments, t out of
 * range, values out of order), SIMSTORE_EFULL (a prefix group past
 * memory_bytes), SIMSTORE_ENOMEM, or fn's nonzero value. */
SIMSTORE_API int simstore_join_plan_table(const simstore_join_plan *p, unsigned t,
                                          const uint64_t *permuted, size_t n, uint64_t memory_bytes,
                                          simstore_fp_pair_fn fn, void *ctx);

/* ---- Keeping documents outside the library -------------------------------- */

/* The number simstore_clusters() orders documents by to choose the one a
 * cluster keeps (smaller kept first; ties by id), for a program that
 * clusters documents outside the library (simstore-mpi clusters): doc's
 * insertion number for SIMSTORE_KEEP_FIRST, 0 for SIMSTORE_KEEP_MIN_ID,
 * and for the key rules o->key's key of doc's metadata in an order where
 * smaller comes first (larger keys first for SIMSTORE_KEEP_MAX_KEY),
 * UINT64_MAX for a document without a key (or with no key callback).
 * UINT64_MAX for NULL arguments. */
SIMSTORE_API uint64_t simstore_keep_order(const simstore_cluster_options *o,
                                          const simstore_document *doc);

/* ---- Ordered parallel work ---------------------------------------------
 * A pool of threads that processes work items and hands them back in the
 * order they were submitted, with a bounded number in flight: what ingestion
 * uses to parse and fingerprint documents on every core while the store still
 * receives them in input order. One thread submits, one (possibly another)
 * takes items back; the items are the caller's (typically a ring of batch
 * buffers), the pool only orders them. */

typedef struct simstore_ordered simstore_ordered;

/* Process one item on worker thread `worker` (0..threads-1). Called once per
 * item, on one thread, never concurrently for the same item. */
typedef void (*simstore_work_fn)(void *ctx, void *item, unsigned worker);

/* Start `threads` workers (0: simstore_default_threads(); at most 256) that
 * run fn(ctx, item, worker) on each item submitted. At most `max_in_flight`
 * items (1..65536) are in flight: from their submission until the call of
 * simstore_ordered_next() that follows the one that returned them. So a
 * producer that cycles through max_in_flight + 1 buffers never refills one
 * still in use. Errors: SIMSTORE_EINVAL (fn or out NULL, a count out of
 * range), SIMSTORE_ENOMEM, SIMSTORE_EIO (no thread could be started). */
SIMSTORE_API int simstore_ordered_new(unsigned threads, unsigned max_in_flight, simstore_work_fn fn,
                                      void *ctx, simstore_ordered **out);

/* The number of worker threads started. */
SIMSTORE_API unsigned simstore_ordered_threads(const simstore_ordered *p);

/* Submit an item; blocks while max_in_flight items are in flight. Returns
 * SIMSTORE_OK, or SIMSTORE_EINVAL after simstore_ordered_finish() or
 * simstore_ordered_stop() (the item is then not processed). */
SIMSTORE_API int simstore_ordered_submit(simstore_ordered *p, void *item);

/* No more items will be submitted (the producer's last call). */
SIMSTORE_API void simstore_ordered_finish(simstore_ordered *p);

/* Take back the oldest item, once processed; blocks until it is. Returns 1
 * with *item set; 0 when the producer has finished and every item was taken
 * back, or after simstore_ordered_stop(). Calling it again releases the item
 * it returned before (it leaves the count in flight). */
SIMSTORE_API int simstore_ordered_next(simstore_ordered *p, void **item);

/* Abandon the work: a blocked submit returns SIMSTORE_EINVAL, next returns 0,
 * items not yet started are not processed. Safe from any thread. */
SIMSTORE_API void simstore_ordered_stop(simstore_ordered *p);

/* Stop, wait for the workers and free. Items are the caller's. NULL allowed. */
SIMSTORE_API void simstore_ordered_free(simstore_ordered *p);

#ifdef __cplusplus
}
#endif

#endif
