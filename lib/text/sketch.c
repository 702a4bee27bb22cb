/* sketch.c: densification and packing of a document's sketch
 * (format/sketch.md, "Densification"); the per-feature step is inline in
 * sketch.h. */
#include "text/sketch.h"

#include <pthread.h>
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

/* ---- candidate lists -----------------------------------------------------
 * Every empty bin takes its first nonempty candidate source in offer order
 * (round t, then source i increasing), and that order is the same for every
 * document. So the offers of the first CAND_ROUNDS rounds are listed once
 * per process, by target bin: bin j's sources in offer order. A document
 * with many nonempty bins then fills an empty bin by reading its list up
 * to the first nonempty source (about m / n reads for n nonempty bins)
 * instead of running rounds until the last bin is hit (about m ln m
 * offers); a bin whose listed sources are all empty goes on through the
 * rounds after CAND_ROUNDS (offers), which fill it as the rounds would
 * have. Both ways give the same bits.
 *
 * The lists are stored step-major: row s holds every bin's s-th candidate
 * (CAND_END past the end of its list), so that a pass over the empty bins
 * reads one row nearly in order. */
#define CAND_ROUNDS 64u
#define CAND_MIN_BITS 7u
#define CAND_PS (SIMS_SKETCH_MAX_BIN_BITS - CAND_MIN_BITS + 1u)
#define CAND_STEPS 128u /* rows; a list is Poisson(CAND_ROUNDS) long */
#define CAND_END 0xFFFFu
#define CAND_TOTAL (((size_t)1 << (SIMS_SKETCH_MAX_BIN_BITS + 1)) * CAND_STEPS)

static uint16_t cand_src[CAND_TOTAL]; /* p's rows, m entries each */
static size_t cand_base[CAND_PS];     /* where p's rows begin in cand_src */
static unsigned cand_rows[CAND_PS];   /* p's rows in use; 0: no lists for p */
static pthread_once_t cand_once = PTHREAD_ONCE_INIT;

/* The bin source i offers to in round t (1-based), format/sketch.md. */
static size_t offer_target(unsigned p, uint64_t t, size_t i)
{
    unsigned q = 64 / p;
    uint64_t b = (t - 1) / q, r = (t - 1) % q;
    uint64_t x = sims_sketch_mix((b << 32 | i) + SIMS_SKETCH_T_ADD);
    return (size_t)(x >> (p * r)) & (((size_t)1 << p) - 1);
}

static void cand_build(void)
{
    static uint16_t len[SIMS_SKETCH_MAX_BINS];
    size_t base = 0;
    for (unsigned p = CAND_MIN_BITS; p <= SIMS_SKETCH_MAX_BIN_BITS; p++) {
        size_t m = (size_t)1 << p;
        uint16_t *rows = cand_src + base;
        cand_base[p - CAND_MIN_BITS] = base;
        base += m * CAND_STEPS;
        memset(rows, 0xFF, m * CAND_STEPS * sizeof *rows);
        memset(len, 0, sizeof len);
        unsigned used = 0, fits = 1;
        for (uint64_t t = 1; t <= CAND_ROUNDS && fits; t++)
            for (size_t i = 0; i < m; i++) {
                size_t j = offer_target(p, t, i);
                if (len[j] == CAND_STEPS) {
                    fits = 0; /* never seen; then p keeps to the rounds */
                    break;
                }
                rows[(size_t)len[j]++ * m + j] = (uint16_t)i;
                if (len[j] > used)
                    used = len[j];
            }
        cand_rows[p - CAND_MIN_BITS] = fits ? used : 0;
    }
}

/* ---- densification ------------------------------------------------------ */

typedef struct densify {
    unsigned p;
    size_t m;
    uint8_t state[SIMS_SKETCH_MAX_BINS];  /* per bin: 0 while empty, else 2 | its bit */
    uint16_t src[SIMS_SKETCH_MAX_BINS];   /* the nonempty bins, increasing */
    uint8_t offer[SIMS_SKETCH_MAX_BINS];  /* their states */
    uint64_t block[SIMS_SKETCH_MAX_BINS]; /* their hashes for the rounds now */
    size_t nsrc;
} densify;

/* Rounds t = first..4m: each nonempty bin, in increasing order, offers its
 * bit to the bin its hash for t names; an empty bin takes the first offer.
 * `left` bins are empty on entry. One hash names a source's bins for
 * q = 64 / p rounds, p bits each. */
static size_t offer_rounds(densify *d, uint64_t first, size_t left)
{
    unsigned p = d->p, q = 64 / p;
    size_t m = d->m, nsrc = d->nsrc;
    uint64_t blocks = (first - 1) / q;
    unsigned r = (unsigned)((first - 1) % q);
    for (size_t k = 0; k < nsrc; k++)
        d->block[k] = sims_sketch_mix((blocks << 32 | d->src[k]) + SIMS_SKETCH_T_ADD);
    blocks++;
    for (uint64_t t = first; left > 0 && t <= 4 * (uint64_t)m; t++) {
        if (t > first && ++r == q) { /* r = (t - 1) mod q; a new block of q rounds */
            r = 0;
            for (size_t k = 0; k < nsrc; k++)
                d->block[k] = sims_sketch_mix((blocks << 32 | d->src[k]) + SIMS_SKETCH_T_ADD);
            blocks++;
        }
        /* A whole round even when the last empty bin fills in its middle:
         * the offers after it change nothing, and the loop stays free of
         * branches (whether a bin is still empty is a coin toss). */
        unsigned shift = p * r;
        for (size_t k = 0; k < nsrc; k++) {
            size_t j = (size_t)(d->block[k] >> shift) & (m - 1);
            unsigned st = d->state[j], empty = st == 0;
            d->state[j] = (uint8_t)(st | (d->offer[k] & (0u - empty)));
            left -= empty;
        }
    }
    return left;
}

/* Load the document's bins into *d; returns the nonempty count. */
static size_t densify_load(densify *d, const sims_sketcher *s)
{
    d->p = s->bin_bits;
    d->m = (size_t)1 << d->p;
    d->nsrc = 0;
    for (size_t j = 0; j < d->m; j++) {
        unsigned full = (unsigned)(s->full[j >> 6] >> (j & 63) & 1);
        d->state[j] = (uint8_t)((2u | (unsigned)(s->min[j] & 1)) & (0u - full));
        d->offer[d->nsrc] = d->state[j];
        d->src[d->nsrc] = (uint16_t)j;
        d->nsrc += full;
    }
    return d->nsrc;
}

/* Bins no round reached (rare: fewer than m e^-8 of them for a document of
 * two features): the bit of the next nonempty bin, going up, wrapping;
 * found in one pass down from the last nonempty bin. Then pack. */
static void densify_finish(densify *d, const sims_sketcher *s, size_t left, uint8_t *out)
{
    if (left > 0) {
        uint8_t next = d->offer[0]; /* after the last nonempty bin: the first */
        for (size_t j = d->m; j-- > 0;) {
            int nonempty = (int)(s->full[j >> 6] >> (j & 63) & 1);
            if (nonempty)
                next = d->state[j];
            else if (d->state[j] == 0)
                d->state[j] = next;
        }
    }
    memset(out, 0, d->m / 8);
    for (size_t j = 0; j < d->m; j++)
        out[j >> 3] |= (uint8_t)((d->state[j] & 1u) << (j & 7));
}

/* Documents without features, or with one nonempty bin: every bin has the
 * one value (0 without features). Returns 1 when it wrote *out. */
static int densify_trivial(const densify *d, uint8_t *out)
{
    if (d->nsrc > 1)
        return 0;
    memset(out, d->nsrc == 1 && (d->offer[0] & 1) ? 0xFF : 0, d->m / 8);
    return 1;
}

void sims_sketcher_finish_by_offers(const sims_sketcher *s, uint8_t *out)
{
    densify d;
    densify_load(&d, s);
    if (densify_trivial(&d, out))
        return;
    densify_finish(&d, s, offer_rounds(&d, 1, d.m - d.nsrc), out);
}

void sims_sketcher_finish(const sims_sketcher *s, uint8_t *out)
{
    densify d;
    size_t n = densify_load(&d, s);
    if (densify_trivial(&d, out))
        return;
    size_t m = d.m, left = m - n;
    /* Lists cost about (m - n) m / n reads, rounds about m ln m offers
     * (each about twice as fast as a read): lists from n >= m / 6, where
     * they measured faster for minhash256. */
    if (n * 6 < m || d.p < CAND_MIN_BITS) {
        densify_finish(&d, s, offer_rounds(&d, 1, left), out);
        return;
    }
    pthread_once(&cand_once, cand_build);
    unsigned rows = cand_rows[d.p - CAND_MIN_BITS];
    if (rows == 0) {
        densify_finish(&d, s, offer_rounds(&d, 1, left), out);
        return;
    }
    const uint16_t *cand = cand_src + cand_base[d.p - CAND_MIN_BITS];
    /* All empty bins step through their lists together, one candidate a
     * pass (one row), so that no branch waits on whether a source is
     * nonempty (a coin toss): a pass keeps, in order, the bins it did not
     * fill. A bin whose list ends is left empty for the rounds after the
     * listed ones. */
    uint16_t *pend = d.src + n; /* the empty bins: d.src has room for m */
    size_t np = 0, unfilled = 0;
    for (size_t j = 0; j < m; j++) {
        pend[np] = (uint16_t)j;
        np += d.state[j] == 0;
    }
    for (unsigned step = 0; np > 0 && step < rows; step++, cand += m) {
        size_t kept = 0;
        for (size_t e = 0; e < np; e++) {
            size_t j = pend[e];
            size_t c = cand[j];
            unsigned has = c != CAND_END;
            c &= m - 1; /* in range either way; a hit needs `has` */
            unsigned hit = has & (unsigned)(s->full[c >> 6] >> (c & 63) & 1);
            d.state[j] = (uint8_t)(d.state[c] & (0u - hit));
            pend[kept] = (uint16_t)j;
            kept += has & !hit;
            unfilled += !has;
        }
        np = kept;
    }
    unfilled += np; /* lists as long as the longest, all empty */
    if (unfilled > 0)
        unfilled = offer_rounds(&d, CAND_ROUNDS + 1, unfilled);
    densify_finish(&d, s, unfilled, out);
}
