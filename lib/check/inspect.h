/* inspect.h: helpers shared by inspect.c and verify.c: permutations in words
 * and applied bit by bit (for any permutation a lone table file may carry). */
#ifndef SIMS_STORE_INSPECT_H
#define SIMS_STORE_INSPECT_H

#include "simstore.h"

#include <stddef.h>
#include <stdint.h>

/* "prefix bits 63..48 (16), then 47..0 (identity)": the original bits of
 * the prefix (the top prefix_bits output bits) and of the rest, as runs.
 * Truncated to size (NUL-terminated when size > 0). */
void sims_describe_permutation(const uint8_t perm[64], unsigned prefix_bits, char *buf,
                               size_t size);

/* Bit i of the result is bit perm[i] of x, and the inverse; one bit at a
 * time (sims_permute() is the fast path for design permutations). */
uint64_t sims_permute_naive(const uint8_t perm[64], uint64_t x);
uint64_t sims_unpermute_naive(const uint8_t perm[64], uint64_t y);

#endif
