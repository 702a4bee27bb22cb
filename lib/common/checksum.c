/* checksum.c: XXH3-64 from the system's libxxhash. */
#include "common/checksum.h"

#include <stdlib.h>
#include <xxhash.h>

uint64_t sims_xxh3_64(const void *data, size_t size, uint64_t seed)
{
    return (uint64_t)XXH3_64bits_withSeed(data, size, (XXH64_hash_t)seed);
}

struct sims_xxh3_stream {
    XXH3_state_t *state;
};

sims_xxh3_stream *sims_xxh3_stream_new(uint64_t seed)
{
    sims_xxh3_stream *s = malloc(sizeof *s);
    if (!s)
        return NULL;
    s->state = XXH3_createState();
    if (!s->state) {
        free(s);
        return NULL;
    }
    XXH3_64bits_reset_withSeed(s->state, (XXH64_hash_t)seed);
    return s;
}

void sims_xxh3_stream_update(sims_xxh3_stream *s, const void *data, size_t size)
{
    XXH3_64bits_update(s->state, data, size);
}

uint64_t sims_xxh3_stream_digest(const sims_xxh3_stream *s)
{
    return (uint64_t)XXH3_64bits_digest(s->state);
}

void sims_xxh3_stream_free(sims_xxh3_stream *s)
{
    if (s) {
        XXH3_freeState(s->state);
        free(s);
    }
}
