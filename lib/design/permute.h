/* permute.h: a bit permutation of 64-bit fingerprints compiled into a short
 * list of rotate-and-mask moves, applied in either direction without a loop
 * over the 64 bits.
 *
 * Why moves and not byte-wise lookup tables: every table of a design moves
 * whole contiguous runs of bits (its prefix blocks up front, the rest after),
 * so all bits of a run share one displacement. Grouping output bits by their
 * displacement gives one (rotation, mask) pair per distinct displacement:
 * at most 13 for any design, 1 to 9 for the candidate designs; each costs
 * three ALU operations (rol, and, or) and one 8-byte mask load. Eight
 * 256-entry byte tables would take 16 KiB per table and direction, and a
 * query touching 4 to 20 tables would pull 64 cache lines per table through
 * L1, evicting the block keys the probe needs. bench/bench_permute.c
 * measures both against a naive loop.
 *
 * Conventions: bit 63 is the most significant; perm[i] is the source bit
 * that lands at output bit i, so permute(x) has bit i equal to bit perm[i]
 * of x. */
#ifndef SIMS_STORE_PERMUTE_H
#define SIMS_STORE_PERMUTE_H

#include "simstore.h" /* SIMSTORE_E* codes */

#include <stdint.h>

/* At most this many distinct displacements per permutation. A design table
 * needs at most one per run of prefix or non-prefix bits, and no valid
 * design has more than 13 runs (format/design.md, "Permutation"); the margin
 * admits other block permutations in tests and benchmarks. */
#define SIMS_PERMUTER_MAX_MOVES 16

/* A compiled permutation and its inverse: move i rotates the input left by
 * rot[i] (0..63) and keeps the bits of mask[i] (output positions). Masks
 * and rotations sit in separate arrays so a design's 256 tables stay small.
 * A plain value: copy it freely. */
typedef struct sims_permuter {
    uint64_t fwd_mask[SIMS_PERMUTER_MAX_MOVES];
    uint64_t inv_mask[SIMS_PERMUTER_MAX_MOVES];
    uint8_t fwd_rot[SIMS_PERMUTER_MAX_MOVES];
    uint8_t inv_rot[SIMS_PERMUTER_MAX_MOVES];
    uint32_t n_moves; /* the same count in both directions */
} sims_permuter;

/* Compile perm[64] (perm[i] = source bit of output bit i).
 * Returns 0, or SIMSTORE_EINVAL (message set) when perm is not a permutation
 * of 0..63 or needs more than SIMS_PERMUTER_MAX_MOVES distinct
 * displacements. On failure *p is zeroed (permuting then yields 0). */
int sims_permuter_init(sims_permuter *p, const uint8_t perm[64]);

/* Left rotation; compiles to one instruction. rot in 0..63 (the & 63 keeps
 * rot = 0 defined). */
static inline uint64_t sims_rotl64(uint64_t x, uint32_t rot)
{
    return (x << rot) | (x >> ((64u - rot) & 63u));
}

/* Apply the permutation: bit i of the result is bit perm[i] of x. */
static inline uint64_t sims_permute(const sims_permuter *p, uint64_t x)
{
    uint64_t out = 0;
    for (uint32_t i = 0; i < p->n_moves; i++)
        out |= sims_rotl64(x, p->fwd_rot[i]) & p->fwd_mask[i];
    return out;
}

/* Apply the inverse: sims_unpermute(p, sims_permute(p, x)) == x. */
static inline uint64_t sims_unpermute(const sims_permuter *p, uint64_t y)
{
    uint64_t out = 0;
    for (uint32_t i = 0; i < p->n_moves; i++)
        out |= sims_rotl64(y, p->inv_rot[i]) & p->inv_mask[i];
    return out;
}

#endif
