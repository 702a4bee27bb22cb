/* join.h: the exact self-join at distance k over a table design: every
 * unordered pair of distinct fingerprints within k, each found exactly once,
 * by scanning each permuted table's values in sorted order.
 *
 * Method (issue 12). In table t, two fingerprints can only be compared when
 * they share t's prefix, so the sorted values of t fall into prefix groups
 * and only pairs inside a group are examined. A pair within k is emitted
 * only by the first table of the design whose prefix its differing bits
 * avoid (sims_design_covering_table): every other table that sees it is a
 * later one, which rejects it, so no global de-duplication is needed. Inside
 * a group the differing bits lie in the group's free bits F (those after
 * the prefix); a group too big to compare all pairs is split the way the
 * design's levels split the bits: F is cut into k + 1 blocks, a pair within
 * k agrees on at least one, and it is looked for only among the values that
 * agree on the first block it agrees on (a rule carried down as "differs on
 * blocks 0..j-1"). A group whose values agree on most bits (a tight cluster,
 * where splitting cannot shrink it) is joined by enumerating, for each
 * value, the V(|F|, k) values within k and looking them up: work
 * proportional to the group, never to its square unless the output is.
 *
 * All the rules ("not in an earlier table", "differs on an earlier block")
 * are one test: the differing bits must meet every mask of a list. */
#ifndef SIMS_SCAN_JOIN_H
#define SIMS_SCAN_JOIN_H

#include "design/design.h"

#include <stddef.h>
#include <stdint.h>

/* Receives a pair of distinct fingerprints (original bits, a < b) within
 * the distance; nonzero stops the join and is returned. */
typedef int (*scan_pair_fn)(void *ctx, uint64_t a, uint64_t b, unsigned distance);

/* Gives the next values of one table, in increasing permuted order
 * (repeats allowed: they are skipped), into out[0..*n) with *n <= cap;
 * *n == 0 at the end. Returns SIMSTORE_OK or an error code. */
typedef int (*scan_source_fn)(void *ctx, uint64_t *out, size_t cap, size_t *n);

/* One thread's joiner: the design, k and scratch that only grows. */
typedef struct scan_joiner scan_joiner;

/* k: 1..design's k (k = 0 has no pairs of distinct fingerprints: callers
 * skip the join). budget: the bytes of scratch the joiner may hold (0: no
 * limit); a prefix group needs about 8 bytes a value per split level plus
 * a hash set of 8..16 bytes a value, and a group past the budget fails
 * with SIMSTORE_EFULL naming its size. Errors: SIMSTORE_EINVAL,
 * SIMSTORE_ENOMEM. */
int sims_scan_joiner_new(const sims_design *d, unsigned k, uint64_t budget, scan_joiner **out);
void sims_scan_joiner_free(scan_joiner *j);

/* Join table t over the values src gives (all of t's values in one part of
 * its range: a part must hold whole prefix groups). Returns SIMSTORE_OK,
 * the source's error, emit's nonzero value, SIMSTORE_EFULL (a group past
 * the budget) or SIMSTORE_ENOMEM. */
int sims_scan_join_table(scan_joiner *j, unsigned t, scan_source_fn src, void *src_ctx,
                         scan_pair_fn emit, void *emit_ctx);

/* Part `part` of `parts` (a power of two, at most 2^min prefix bits) of a
 * table's permuted range: [*lo, *hi], aligned so that no prefix group of
 * any table of the design straddles two parts. */
void sims_scan_part_range(const sims_design *d, unsigned part, unsigned parts, uint64_t *lo,
                          uint64_t *hi);

/* The number of parts to cut every table into for `threads` threads: a
 * power of two giving each thread several, within the shortest prefix. */
unsigned sims_scan_parts_for(const sims_design *d, unsigned threads);

#endif
