/* checksum.h: the one checksum simstore writes: XXH3-64 with a stated seed. */
#ifndef SIMS_COMMON_CHECKSUM_H
#define SIMS_COMMON_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* XXH3_64bits_withSeed(data, size, seed). */
uint64_t sims_xxh3_64(const void *data, size_t size, uint64_t seed);

#endif
