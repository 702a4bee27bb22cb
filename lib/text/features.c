/* features.c: shingles, XXH3-64 and the 64 weighted bit sums.
 *
 * Every occurrence of a feature adds +1 or -1 to each bit sum, so TF weighting
 * (Σ over distinct features of ±tf) needs no table of features: it is a count,
 * per bit, of the occurrences whose hash has that bit set. The counting adds
 * eight 8-bit lanes at a time from a byte-spreading table (no per-bit
 * branches) and spills the lanes into 64-bit counts every 255 features.
 * LENGTH weighting adds λ once per distinct long feature, so it counts those
 * in a second set of lanes, deduplicated through an open-addressing set of
 * hashes that is reused (by generation number) from one document to the next.
 */
#include "text/features.h"

#include "simstore.h"

#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL /* the short inputs here gain from inlining */
#include <xxhash.h>

#ifndef __SIZEOF_INT128__
#error "the LENGTH bit sums need a 128-bit integer type"
#endif
__extension__ typedef __int128 sims_i128;

/* Compact the token text once it grows past this and tokens can be dropped. */
#define COMPACT_BYTES (64u * 1024)
#define LANE_LIMIT 255u

/* spread[b] has byte k equal to bit k of b. */
#define SP1(b)                                                                           \
    ((uint64_t)((b) & 1) | (uint64_t)((b) >> 1 & 1) << 8 | (uint64_t)((b) >> 2 & 1) << 16 | \
     (uint64_t)((b) >> 3 & 1) << 24 | (uint64_t)((b) >> 4 & 1) << 32 |                     \
     (uint64_t)((b) >> 5 & 1) << 40 | (uint64_t)((b) >> 6 & 1) << 48 |                     \
     (uint64_t)((b) >> 7 & 1) << 56)
#define SP4(b) SP1(b), SP1((b) + 1), SP1((b) + 2), SP1((b) + 3)
#define SP16(b) SP4(b), SP4((b) + 4), SP4((b) + 8), SP4((b) + 12)
#define SP64(b) SP16(b), SP16((b) + 16), SP16((b) + 32), SP16((b) + 48)
static const uint64_t spread[256] = {SP64(0), SP64(64), SP64(128), SP64(192)};

static inline void lanes_add(uint64_t acc[8], uint64_t h)
{
    acc[0] += spread[h & 255];
    acc[1] += spread[h >> 8 & 255];
    acc[2] += spread[h >> 16 & 255];
    acc[3] += spread[h >> 24 & 255];
    acc[4] += spread[h >> 32 & 255];
    acc[5] += spread[h >> 40 & 255];
    acc[6] += spread[h >> 48 & 255];
    acc[7] += spread[h >> 56];
}

static void lanes_spill(uint64_t acc[8], uint64_t count[64], unsigned *pending)
{
    for (unsigned j = 0; j < 8; j++) {
        for (unsigned k = 0; k < 8; k++)
            count[8 * j + k] += acc[j] >> (8 * k) & 255;
        acc[j] = 0;
    }
    *pending = 0;
}

void sims_features_init(sims_features *f, unsigned shingle_words, int length_weighting,
                        uint64_t lambda_q16)
{
    memset(f, 0, sizeof *f);
    f->shingle_words = shingle_words;
    f->length_weighting = length_weighting;
    f->lambda_q16 = lambda_q16;
}

void sims_features_release(sims_features *f)
{
    free(f->text);
    free(f->set);
    memset(f, 0, sizeof *f);
}

void sims_features_begin(sims_features *f)
{
    f->text_len = 0;
    f->tokens = 0;
    f->slot = 0;
    memset(f->occ_acc, 0, sizeof f->occ_acc);
    memset(f->long_acc, 0, sizeof f->long_acc);
    memset(f->occ_count, 0, sizeof f->occ_count);
    memset(f->long_count, 0, sizeof f->long_count);
    f->occ_pending = f->long_pending = 0;
    f->occ_total = f->long_total = 0;
    f->set_used = 0;
    if (++f->generation == 0) {
        /* After 2^32 documents the stamps repeat: clear them once. */
        if (f->set)
            memset(f->set, 0, f->set_cap * sizeof *f->set);
        f->generation = 1;
    }
    f->failed = 0;
}

/* 1 if `h` was new in this document, 0 if seen, -1 out of memory. */
static int set_insert(sims_features *f, uint64_t h)
{
    if (f->set_used + 1 > f->set_cap / 2) {
        size_t cap = f->set_cap ? f->set_cap * 2 : 1024;
        sims_feature_slot *grown = calloc(cap, sizeof *grown);
        if (!grown)
            return -1;
        for (size_t i = 0; i < f->set_cap; i++) {
            if (f->set[i].generation != f->generation)
                continue;
            size_t j = (size_t)f->set[i].hash & (cap - 1);
            while (grown[j].generation == f->generation)
                j = (j + 1) & (cap - 1);
            grown[j] = f->set[i];
        }
        free(f->set);
        f->set = grown;
        f->set_cap = cap;
    }
    size_t mask = f->set_cap - 1, i = (size_t)h & mask;
    while (f->set[i].generation == f->generation) {
        if (f->set[i].hash == h)
            return 0;
        i = (i + 1) & mask;
    }
    f->set[i].hash = h;
    f->set[i].generation = f->generation;
    f->set_used++;
    return 1;
}

static inline void add_feature(sims_features *f, const uint8_t *bytes, size_t len,
                               uint32_t codepoints)
{
    uint64_t h = XXH3_64bits_withSeed(bytes, len, SIMS_FEATURE_SEED);
    lanes_add(f->occ_acc, h);
    f->occ_total++;
    if (++f->occ_pending == LANE_LIMIT)
        lanes_spill(f->occ_acc, f->occ_count, &f->occ_pending);
    if (f->length_weighting && codepoints >= 4) {
        int fresh = set_insert(f, h);
        if (fresh < 0) {
            f->failed = 1;
        } else if (fresh) {
            lanes_add(f->long_acc, h);
            f->long_total++;
            if (++f->long_pending == LANE_LIMIT)
                lanes_spill(f->long_acc, f->long_count, &f->long_pending);
        }
    }
}

static uint32_t window_max(const sims_features *f, unsigned n)
{
    uint32_t m = 0;
    for (unsigned i = 0; i < n; i++)
        if (f->window_codepoints[i] > m)
            m = f->window_codepoints[i];
    return m;
}

int sims_features_token(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints)
{
    sims_features *f = ctx;
    unsigned w = f->shingle_words;
    if (f->failed)
        return SIMSTORE_ENOMEM;
    if (w == 1) {
        add_feature(f, bytes, len, codepoints);
        f->tokens++;
        return f->failed ? SIMSTORE_ENOMEM : 0;
    }
    unsigned slot = f->slot, next = slot + 1 == w ? 0 : slot + 1;
    if (f->text_len > COMPACT_BYTES && f->tokens >= w) {
        /* Keep only the w-1 tokens the next shingles still need. */
        size_t from = f->window_start[next];
        memmove(f->text, f->text + from, f->text_len - from);
        f->text_len -= from;
        for (unsigned i = 0; i < w; i++)
            if (i != slot)
                f->window_start[i] -= from;
    }
    if (len + 1 > f->text_cap - f->text_len) {
        size_t cap = f->text_cap ? f->text_cap : 4096;
        while (cap - f->text_len < len + 1) {
            if (cap > SIZE_MAX / 2) {
                f->failed = 1;
                return SIMSTORE_ENOMEM;
            }
            cap *= 2;
        }
        uint8_t *grown = realloc(f->text, cap);
        if (!grown) {
            f->failed = 1;
            return SIMSTORE_ENOMEM;
        }
        f->text = grown;
        f->text_cap = cap;
    }
    if (f->tokens > 0)
        f->text[f->text_len++] = ' ';
    f->window_start[slot] = f->text_len;
    f->window_codepoints[slot] = codepoints;
    memcpy(f->text + f->text_len, bytes, len);
    f->text_len += len;
    f->tokens++;
    f->slot = next;
    if (f->tokens >= w) {
        size_t from = f->window_start[next];
        add_feature(f, f->text + from, f->text_len - from,
                    f->length_weighting ? window_max(f, w) : 0);
    }
    return f->failed ? SIMSTORE_ENOMEM : 0;
}

int sims_features_end(sims_features *f, uint64_t *fingerprint)
{
    *fingerprint = 0;
    if (f->failed)
        return SIMSTORE_ENOMEM;
    if (f->tokens == 0)
        return 0;
    if (f->tokens < f->shingle_words) {
        /* Shorter than one shingle: one feature of all its tokens. */
        unsigned n = (unsigned)f->tokens;
        add_feature(f, f->text + f->window_start[0], f->text_len - f->window_start[0],
                    f->length_weighting ? window_max(f, n) : 0);
        if (f->failed)
            return SIMSTORE_ENOMEM;
    }
    lanes_spill(f->occ_acc, f->occ_count, &f->occ_pending);
    lanes_spill(f->long_acc, f->long_count, &f->long_pending);
    uint64_t fp = 0;
    for (unsigned i = 0; i < 64; i++) {
        sims_i128 v = ((sims_i128)2 * f->occ_count[i] - f->occ_total) * 65536;
        if (f->length_weighting)
            v += ((sims_i128)2 * f->long_count[i] - f->long_total) * (sims_i128)f->lambda_q16;
        fp |= (uint64_t)(v > 0) << i;
    }
    *fingerprint = fp;
    return 0;
}
