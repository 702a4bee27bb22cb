/* checksum.h: the one checksum simstore writes: XXH3-64 with a stated seed. */
#ifndef SIMS_COMMON_CHECKSUM_H
#define SIMS_COMMON_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* XXH3_64bits_withSeed(data, size, seed). */
uint64_t sims_xxh3_64(const void *data, size_t size, uint64_t seed);

/* The same checksum over data given in pieces: the digest equals
 * sims_xxh3_64 of the concatenation. */
typedef struct sims_xxh3_stream sims_xxh3_stream;
/* NULL when out of memory. */
sims_xxh3_stream *sims_xxh3_stream_new(uint64_t seed);
void sims_xxh3_stream_update(sims_xxh3_stream *s, const void *data, size_t size);
uint64_t sims_xxh3_stream_digest(const sims_xxh3_stream *s);
void sims_xxh3_stream_free(sims_xxh3_stream *s);

#endif
