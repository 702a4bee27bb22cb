/* sketch.c: the sketch kinds (bins, bytes, names) and the similarity
 * estimate of two sketches (format/sketch.md, "Similarity"): the public
 * simstore_sketch_* functions that need no text. */
#include "common/sketch.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/error.h"

#include <string.h>

static const char *const names[] = {"none",      "minhash16",  "minhash32",
                                    "minhash64", "minhash128", "minhash256"};

unsigned sims_sketch_bin_bits(unsigned kind)
{
    return sims_sketch_kind_valid(kind) ? 6 + kind : 0;
}

size_t simstore_sketch_bytes(simstore_sketch_kind kind)
{
    unsigned bits = sims_sketch_bin_bits((unsigned)kind);
    return bits ? ((size_t)1 << bits) / 8 : 0;
}

const char *simstore_sketch_name(simstore_sketch_kind kind)
{
    return (unsigned)kind <= SIMS_SKETCH_KIND_MAX ? names[kind] : NULL;
}

int simstore_sketch_parse(const char *name, simstore_sketch_kind *kind)
{
    if (!name || !kind)
        return sims_fail(SIMSTORE_EINVAL, "simstore_sketch_parse: NULL argument");
    for (unsigned i = 0; i <= SIMS_SKETCH_KIND_MAX; i++)
        if (strcmp(name, names[i]) == 0) {
            *kind = (simstore_sketch_kind)i;
            return SIMSTORE_OK;
        }
    return sims_fail(SIMSTORE_EINVAL,
                     "unknown sketch kind '%s' (none, minhash16, minhash32, "
                     "minhash64, minhash128, minhash256)",
                     name);
}

double simstore_sketch_similarity(simstore_sketch_kind kind, const uint8_t *a, const uint8_t *b)
{
    unsigned bits = sims_sketch_bin_bits((unsigned)kind);
    if (!bits || !a || !b)
        return SIMSTORE_SIMILARITY_UNKNOWN;
    size_t bins = (size_t)1 << bits, differ = 0;
    for (size_t i = 0; i < bins / 8; i += 8)
        differ += (size_t)sims_popcount64(le_load64(a + i) ^ le_load64(b + i));
    /* A bin agrees by chance half the time when the sets' elements there
     * differ: P(agree) = (1 + J) / 2, so J = 2 P - 1 = (m - 2 D) / m. The
     * integer form makes the value the same on every machine. */
    return 2 * differ >= bins ? 0.0 : (double)(bins - 2 * differ) / (double)bins;
}
