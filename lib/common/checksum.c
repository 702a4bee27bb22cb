/* checksum.c: XXH3-64 from the system's libxxhash. */
#include "common/checksum.h"

#include <xxhash.h>

uint64_t sims_xxh3_64(const void *data, size_t size, uint64_t seed)
{
    return (uint64_t)XXH3_64bits_withSeed(data, size, (XXH64_hash_t)seed);
}
