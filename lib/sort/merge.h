/* merge.h: the k-way merge the spilling sorters share (u64sort.c, recsort.c):
 * the array of runs, and a binary min-heap of run indexes, ordered by each
 * run's current head and compared through `less`. Header-inline, so a
 * sorter that passes a static comparison gets it inlined in its merge loop. Run files themselves go
 * through lib/common's scratch-file helpers (sims_tmpfile_unlinked,
 * sims_write_all, sims_pread_all). */
#ifndef SIMS_SORT_MERGE_H
#define SIMS_SORT_MERGE_H

#include "common/error.h"

#include <stdlib.h>
#include <string.h>

/* Append the run *src (elem bytes) to the array *runs of *n. */
static inline int sims_merge_add_run(void **runs, unsigned *n, const void *src, size_t elem)
{
    char *g = (char *)realloc(*runs, (*n + 1) * elem);
    if (!g)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for sort runs");
    memcpy(g + *n * elem, src, elem);
    *runs = g;
    ++*n;
    return SIMSTORE_OK;
}

/* Nonzero when run a's head sorts before run b's. */
typedef int (*sims_merge_less_fn)(const void *ctx, unsigned a, unsigned b);

/* Restore the heap order below position i of heap[0..n). */
static inline void sims_merge_sift_down(unsigned *heap, unsigned n, unsigned i,
                                        sims_merge_less_fn less, const void *ctx)
{
    for (;;) {
        unsigned l = 2 * i + 1, m = i;
        if (l < n && less(ctx, heap[l], heap[m]))
            m = l;
        if (l + 1 < n && less(ctx, heap[l + 1], heap[m]))
            m = l + 1;
        if (m == i)
            return;
        unsigned t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/* Order heap[0..n) (the runs that still have a head). */
static inline void sims_merge_heapify(unsigned *heap, unsigned n, sims_merge_less_fn less,
                                      const void *ctx)
{
    for (unsigned i = n / 2; i-- > 0;)
        sims_merge_sift_down(heap, n, i, less, ctx);
}

/* After the top run gave its head and advanced: drop it when it is
 * `exhausted`, then restore the order. Returns the new heap size. */
static inline unsigned sims_merge_next(unsigned *heap, unsigned n, int exhausted,
                                       sims_merge_less_fn less, const void *ctx)
{
    if (exhausted)
        heap[0] = heap[--n];
    sims_merge_sift_down(heap, n, 0, less, ctx);
    return n;
}

#endif
