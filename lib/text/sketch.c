/* sketch.c: densification and packing of a document's sketch
 * (format/sketch.md, "Densification"); the per-feature step is inline in
 * sketch.h. */
#include "text/sketch.h"

#include <string.h>

void sims_sketcher_init(sims_sketcher *s, unsigned bin_bits)
{
    memset(s, 0, sizeof *s);
    s->bin_bits = bin_bits;
}

void sims_sketcher_begin(sims_sketcher *s)
{
    memset(s->full, 0, sizeof s->full);
    memset(s->min, 0xFF, ((size_t)1 << s->bin_bits) * sizeof *s->min);
}

void sims_sketcher_finish(const sims_sketcher *s, uint8_t *out)
{
    unsigned p = s->bin_bits;
    size_t m = (size_t)1 << p;
    /* Per bin: 0 while empty, else 2 | its bit. */
    uint8_t state[SIMS_SKETCH_MAX_BINS];
    /* Per nonempty bin, in increasing order: its number, its state, and its
     * hash for the rounds now. */
    uint16_t src[SIMS_SKETCH_MAX_BINS];
    uint8_t offer[SIMS_SKETCH_MAX_BINS];
    uint64_t block[SIMS_SKETCH_MAX_BINS];
    size_t nsrc = 0;
    memset(out, 0, m / 8);
    for (size_t j = 0; j < m; j++) {
        unsigned full = (unsigned)(s->full[j >> 6] >> (j & 63) & 1);
        state[j] = (uint8_t)(full ? 2u | (unsigned)(s->min[j] & 1) : 0u);
        if (full) {
            offer[nsrc] = state[j];
            src[nsrc++] = (uint16_t)j;
        }
    }
    if (nsrc == 0)
        return; /* no features: all zero */
    if (nsrc == 1) {
        /* Every offer and every wrap-around finds the one nonempty bin. */
        memset(out, offer[0] & 1 ? 0xFF : 0, m / 8);
        return;
    }
    /* Rounds t = 1..4m: each nonempty bin, in increasing order, offers its
     * bit to the bin its hash for t names; an empty bin takes the first
     * offer. Every empty bin thus has a fixed sequence of candidate sources
     * (the same for every document) and takes the first nonempty one: the
     * estimate stays unbiased, and the sources are spread at random. The
     * expected work is about m ln m offers whatever the document; one hash
     * names a source's bins for q = 64 / p rounds, p bits each. */
    size_t left = m - nsrc;
    unsigned q = 64 / p, r = q - 1;
    uint64_t blocks = 0;
    for (uint64_t t = 1; left > 0 && t <= 4 * (uint64_t)m; t++) {
        if (++r == q) { /* r = (t - 1) mod q; a new block of q rounds */
            r = 0;
            for (size_t k = 0; k < nsrc; k++)
                block[k] = sims_sketch_mix((blocks << 32 | src[k]) + SIMS_SKETCH_T_ADD);
            blocks++;
        }
        /* A whole round even when the last empty bin fills in its middle:
         * the offers after it change nothing, and the loop stays free of
         * branches (whether a bin is still empty is a coin toss). */
        unsigned shift = p * r;
        for (size_t k = 0; k < nsrc; k++) {
            size_t j = (size_t)(block[k] >> shift) & (m - 1);
            unsigned st = state[j], empty = st == 0;
            state[j] = (uint8_t)(st | (offer[k] & (0u - empty)));
            left -= empty;
        }
    }
    /* Bins no round reached (rare: fewer than m e^-8 of them for a document
     * of two features): the bit of the next nonempty bin, going up,
     * wrapping; found in one pass down from the last nonempty bin. */
    if (left > 0) {
        uint8_t next = offer[0]; /* after the last nonempty bin: the first */
        for (size_t j = m; j-- > 0;) {
            int nonempty = (int)(s->full[j >> 6] >> (j & 63) & 1);
            if (nonempty)
                next = state[j];
            else if (state[j] == 0)
                state[j] = next;
        }
    }
    for (size_t j = 0; j < m; j++)
        out[j >> 3] |= (uint8_t)((state[j] & 1u) << (j & 7));
}
