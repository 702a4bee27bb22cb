/* bits.h: counting the set bits of a word, for the layers' bit-level code
 * (Elias-Fano select, joins, designs, sketches): simstore_distance's rule,
 * so a portable build never calls libgcc for it. */
#ifndef SIMS_COMMON_BITS_H
#define SIMS_COMMON_BITS_H

#include <stdint.h>

#include "simstore.h"

static inline unsigned sims_popcount64(uint64_t x)
{
    return simstore_distance(x, 0);
}

#endif
