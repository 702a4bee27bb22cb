/* sketch.h: the sketch of a document's feature set (format/sketch.md):
 * 1-bit one-permutation MinHash. Each distinct feature hash goes to one bin
 * by a mixed copy of it; a bin keeps the smallest mixed value; bins left
 * empty take a nonempty bin's value (densification); the sketch is the
 * lowest bit of every bin's value. */
#ifndef SIMS_TEXT_SKETCH_H
#define SIMS_TEXT_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#define SIMS_SKETCH_MAX_BIN_BITS 11
#define SIMS_SKETCH_MAX_BINS (1u << SIMS_SKETCH_MAX_BIN_BITS)

/* The additive constants of format/sketch.md: g(h) = mix(h + G_ADD); in
 * the densification, source bin i offers in round t (1, 2, ...) to bin
 * (x >> (p r)) mod 2^p, where x = mix(((t - 1) / q << 32 | i) + T_ADD),
 * q = 64 / p and r = (t - 1) mod q. */
#define SIMS_SKETCH_G_ADD 0x9E3779B97F4A7C15ULL
#define SIMS_SKETCH_T_ADD 0xD1B54A32D192ED03ULL

/* The SplitMix64 finalizer (a bijection of 64-bit values). */
static inline uint64_t sims_sketch_mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

typedef struct sims_sketcher {
    unsigned bin_bits;                        /* p: 2^p bins; 0 = no sketch */
    uint64_t full[SIMS_SKETCH_MAX_BINS / 64]; /* bins that hold a feature */
    uint64_t min[SIMS_SKETCH_MAX_BINS];       /* their smallest g (UINT64_MAX: empty) */
} sims_sketcher;

/* bin_bits: 0 (no sketch) or 7..SIMS_SKETCH_MAX_BIN_BITS. */
void sims_sketcher_init(sims_sketcher *s, unsigned bin_bits);
/* Start a document: every bin empty. */
void sims_sketcher_begin(sims_sketcher *s);

/* Add a feature's hash h (a repeat changes nothing). Branch-free: whether
 * g is a bin's new smallest is a coin toss the branch predictor would lose.
 * Empty bins hold UINT64_MAX; `full` tells them apart from a bin whose
 * smallest g is UINT64_MAX. */
static inline void sims_sketcher_add(sims_sketcher *s, uint64_t h)
{
    uint64_t g = sims_sketch_mix(h + SIMS_SKETCH_G_ADD);
    size_t bin = (size_t)(g >> (64 - s->bin_bits));
    uint64_t cur = s->min[bin];
    s->min[bin] = g < cur ? g : cur;
    s->full[bin >> 6] |= (uint64_t)1 << (bin & 63);
}

/* The sketch of the features added since begin: 2^p / 8 bytes, bin j in
 * bit j % 8 of byte j / 8 (all zero for a document without features). */
void sims_sketcher_finish(const sims_sketcher *s, uint8_t *out);

/* The same sketch by the rounds of offers alone, as format/sketch.md
 * states them (sims_sketcher_finish uses them for documents with few
 * nonempty bins, and candidate lists for the others); for tests. */
void sims_sketcher_finish_by_offers(const sims_sketcher *s, uint8_t *out);

#endif
