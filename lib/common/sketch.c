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

/* ---- bands (format/sketch.md 6.2) ----------------------------------------- */

/* The fewest bands of `rows` bins that make a pair whose bins agree with
 * probability p share one with probability >= 0.99: products in plain
 * double arithmetic (no pow or log), so every machine derives the same. */
static unsigned fewest_bands(double p, unsigned rows, unsigned limit)
{
    double all = 1; /* p^rows: a band agrees */
    for (unsigned i = 0; i < rows; i++)
        all *= p;
    double miss = 1 - all, none = miss; /* (1 - p^rows)^b: no band agrees */
    unsigned b = 1;
    while (none > 0.01 && b <= limit) {
        none *= miss;
        b++;
    }
    return b;
}

void simstore_sketch_bands(simstore_sketch_kind kind, double min_similarity, unsigned *rows,
                           unsigned *count)
{
    unsigned r = 0, b = 0, bins_bits = sims_sketch_bin_bits((unsigned)kind);
    if (bins_bits && min_similarity >= SIMSTORE_NEAR_BANDS_MIN_SIMILARITY && min_similarity <= 1) {
        unsigned bins = 1u << bins_bits;
        double p = (1 + min_similarity) / 2; /* a bin agrees at J = t (section 5) */
        for (unsigned cand = 1; cand <= 32 && cand <= bins; cand++) {
            unsigned need = fewest_bands(p, cand, bins);
            if ((uint64_t)need * cand <= bins) {
                r = cand;
                b = need;
            }
        }
    }
    if (rows)
        *rows = r;
    if (count)
        *count = b;
}

uint32_t sims_sketch_band_key(const uint8_t *sketch, unsigned rows, unsigned band)
{
    size_t first = (size_t)band * rows; /* bit (bin) number */
    uint32_t key = 0;
    unsigned got = 0;
    while (got < rows) {
        size_t bit = first + got;
        unsigned shift = (unsigned)(bit & 7), take = 8 - shift;
        if (take > rows - got)
            take = rows - got;
        uint32_t piece = (uint32_t)(sketch[bit >> 3] >> shift) & ((1u << take) - 1);
        key |= piece << got;
        got += take;
    }
    return key;
}

int sims_sketch_share_band(const uint8_t *a, const uint8_t *b, unsigned rows, unsigned count)
{
    for (unsigned i = 0; i < count; i++)
        if (sims_sketch_band_key(a, rows, i) == sims_sketch_band_key(b, rows, i))
            return 1;
    return 0;
}
