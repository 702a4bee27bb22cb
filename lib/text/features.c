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
 * When asked, every feature hash also goes into the document's sketch
 * (sketch.h), so a sketch describes exactly the fingerprint's features.
 */
#include "text/features.h"

#include "common/grow.h"

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
#define SP1(b)                                                                                     \
    ((uint64_t)((b)&1) | (uint64_t)((b) >> 1 & 1) << 8 | (uint64_t)((b) >> 2 & 1) << 16 |          \
     (uint64_t)((b) >> 3 & 1) << 24 | (uint64_t)((b) >> 4 & 1) << 32 |                             \
     (uint64_t)((b) >> 5 & 1) << 40 | (uint64_t)((b) >> 6 & 1) << 48 |                             \
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

void sims_features_init(sims_features *f, unsigned shingle_words, unsigned cjk_shingle,
                        int weighting, uint64_t lambda_q16)
{
    memset(f, 0, sizeof *f);
    f->shingle_words = shingle_words;
    f->cjk_shingle = cjk_shingle;
    f->widest = shingle_words > cjk_shingle ? shingle_words : cjk_shingle;
    f->weighting = weighting;
    f->lambda_q16 = lambda_q16;
}

void sims_features_set_sketch(sims_features *f, unsigned bin_bits)
{
    sims_sketcher_init(&f->sketch, bin_bits);
}

void sims_features_release(sims_features *f)
{
    free(f->text);
    free(f->set);
    free(f->set_order);
    memset(f, 0, sizeof *f);
}

void sims_features_begin(sims_features *f)
{
    f->text_len = 0;
    f->tokens = 0;
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
    if (f->sketch.bin_bits)
        sims_sketcher_begin(&f->sketch);
}

/* Find or add `h`: its slot, with *fresh = 1 when it was new in this
 * document; NULL when out of memory. */
static sims_feature_slot *set_insert(sims_features *f, uint64_t h, int *fresh)
{
    if (f->set_used + 1 > f->set_cap / 2) {
        size_t cap = f->set_cap ? f->set_cap * 2 : 1024;
        sims_feature_slot *grown = calloc(cap, sizeof *grown);
        size_t *order = f->weighting == SIMS_WEIGHT_LOG ? malloc(cap / 2 * sizeof *order) : NULL;
        if (!grown || (f->weighting == SIMS_WEIGHT_LOG && !order)) {
            free(grown);
            free(order);
            return NULL;
        }
        size_t placed = 0;
        for (size_t i = 0; i < f->set_cap; i++) {
            if (f->set[i].generation != f->generation)
                continue;
            size_t j = (size_t)f->set[i].hash & (cap - 1);
            while (grown[j].generation == f->generation)
                j = (j + 1) & (cap - 1);
            grown[j] = f->set[i];
            if (order)
                order[placed++] = j;
        }
        free(f->set);
        free(f->set_order);
        f->set = grown;
        f->set_order = order;
        f->set_cap = cap;
    }
    size_t mask = f->set_cap - 1, i = (size_t)h & mask;
    while (f->set[i].generation == f->generation) {
        if (f->set[i].hash == h) {
            *fresh = 0;
            return &f->set[i];
        }
        i = (i + 1) & mask;
    }
    f->set[i].hash = h;
    f->set[i].count = 0;
    f->set[i].generation = f->generation;
    if (f->set_order)
        f->set_order[f->set_used] = i;
    f->set_used++;
    *fresh = 1;
    return &f->set[i];
}

static inline void add_feature(sims_features *f, const uint8_t *bytes, size_t len,
                               uint32_t codepoints)
{
    uint64_t h = XXH3_64bits_withSeed(bytes, len, SIMS_FEATURE_SEED);
    int fresh;
    if (f->sketch.bin_bits)
        sims_sketcher_add(&f->sketch, h);
    if (f->weighting == SIMS_WEIGHT_LOG) {
        /* Counted per distinct feature; weighed at the end. */
        sims_feature_slot *slot = set_insert(f, h, &fresh);
        if (!slot)
            f->failed = 1;
        else
            slot->count++;
        f->occ_total++;
        return;
    }
    lanes_add(f->occ_acc, h);
    f->occ_total++;
    if (++f->occ_pending == LANE_LIMIT)
        lanes_spill(f->occ_acc, f->occ_count, &f->occ_pending);
    if (f->weighting == SIMS_WEIGHT_LENGTH && codepoints >= 4) {
        if (!set_insert(f, h, &fresh)) {
            f->failed = 1;
        } else if (fresh) {
            lanes_add(f->long_acc, h);
            f->long_total++;
            if (++f->long_pending == LANE_LIMIT)
                lanes_spill(f->long_acc, f->long_count, &f->long_pending);
        }
    }
}

/* The longest token of the `count` tokens from token number `first`. */
static uint32_t window_max(const sims_features *f, uint64_t first, unsigned count)
{
    uint32_t m = 0;
    for (unsigned i = 0; i < count; i++) {
        uint32_t c = f->window_codepoints[(first + i) % SIMS_WINDOW];
        if (c > m)
            m = c;
    }
    return m;
}

/* The feature of tokens first .. the last token added. */
static void add_shingle(sims_features *f, uint64_t first)
{
    size_t from = f->window_start[first % SIMS_WINDOW];
    uint32_t longest = 0;
    if (f->weighting == SIMS_WEIGHT_LENGTH)
        longest = window_max(f, first, (unsigned)(f->tokens - first));
    add_feature(f, f->text + from, f->text_len - from, longest);
}

static unsigned width_of(const sims_features *f, uint64_t token)
{
    return f->window_cjk[token % SIMS_WINDOW] ? f->cjk_shingle : f->shingle_words;
}

int sims_features_token(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints, int cjk)
{
    sims_features *f = ctx;
    if (f->failed)
        return SIMSTORE_ENOMEM;
    if (f->widest == 1) {
        add_feature(f, bytes, len, codepoints);
        f->tokens++;
        return f->failed ? SIMSTORE_ENOMEM : 0;
    }
    unsigned keep = f->widest - 1;
    if (f->text_len > COMPACT_BYTES && f->tokens >= keep) {
        /* Keep only the tokens the next shingles may still need. */
        uint64_t first = f->tokens - keep;
        size_t from = f->window_start[first % SIMS_WINDOW];
        memmove(f->text, f->text + from, f->text_len - from);
        f->text_len -= from;
        for (uint64_t t = first; t < f->tokens; t++)
            f->window_start[t % SIMS_WINDOW] -= from;
    }
    if (sims_grow_bytes(&f->text, &f->text_cap, f->text_len, len + 1, 4096)) {
        f->failed = 1;
        return SIMSTORE_ENOMEM;
    }
    if (f->tokens > 0)
        f->text[f->text_len++] = ' ';
    unsigned slot = (unsigned)(f->tokens % SIMS_WINDOW);
    f->window_start[slot] = f->text_len;
    f->window_codepoints[slot] = codepoints;
    f->window_cjk[slot] = (uint8_t)(cjk != 0);
    memcpy(f->text + f->text_len, bytes, len);
    f->text_len += len;
    f->tokens++;
    /* The shingles that end with this token: the one of width w starting
     * at a word, the one of width c starting at a CJK token (one shingle
     * when the widths are equal, whatever its first token). */
    unsigned w = f->shingle_words, c = f->cjk_shingle;
    if (w == c) {
        if (f->tokens >= w)
            add_shingle(f, f->tokens - w);
    } else {
        if (f->tokens >= w && !f->window_cjk[(f->tokens - w) % SIMS_WINDOW])
            add_shingle(f, f->tokens - w);
        if (f->tokens >= c && f->window_cjk[(f->tokens - c) % SIMS_WINDOW])
            add_shingle(f, f->tokens - c);
    }
    return f->failed ? SIMSTORE_ENOMEM : 0;
}

/* 1 + ln(tf), approximately: 65536 + floor(M(tf) * 45426 / 65536), where
 * M(tf) is log2(tf) in units of 2^-16, interpolated linearly between powers
 * of two, and 45426 = round(65536 ln 2). */
uint64_t sims_log_weight(uint64_t tf)
{
    unsigned k = 63u - (unsigned)__builtin_clzll(tf);
    uint64_t rest = tf - ((uint64_t)1 << k);
    uint64_t frac = k <= 16 ? rest << (16 - k) : rest >> (k - 16);
    uint64_t m = ((uint64_t)k << 16) + frac;
    return 65536 + (m * 45426 >> 16);
}

int sims_features_end(sims_features *f, uint64_t *fingerprint)
{
    *fingerprint = 0;
    if (f->failed)
        return SIMSTORE_ENOMEM;
    if (f->tokens == 0)
        return 0;
    if (f->widest > 1) {
        /* Tokens no whole shingle reaches: the first shingle that reaches
         * the last token, cut there, when it is not whole. */
        uint64_t n = f->tokens, first = n > f->widest ? n - f->widest : 0;
        while (first + width_of(f, first) < n)
            first++;
        if (first + width_of(f, first) > n) {
            add_shingle(f, first);
            if (f->failed)
                return SIMSTORE_ENOMEM;
        }
    }
    uint64_t fp = 0;
    if (f->weighting == SIMS_WEIGHT_LOG) {
        /* V_i = 2 (weights of the features with bit i) - (all weights);
         * a weight is below 2^22 and a document has fewer than 2^40
         * distinct features, so the sums fit. */
        uint64_t with[64] = {0}, total = 0;
        for (size_t d = 0; d < f->set_used; d++) {
            const sims_feature_slot *e = &f->set[f->set_order[d]];
            uint64_t weight = sims_log_weight(e->count);
            total += weight;
            for (unsigned i = 0; i < 64; i++)
                with[i] += (e->hash >> i & 1) * weight;
        }
        for (unsigned i = 0; i < 64; i++)
            fp |= (uint64_t)(2 * (sims_i128)with[i] > (sims_i128)total) << i;
        *fingerprint = fp;
        return 0;
    }
    lanes_spill(f->occ_acc, f->occ_count, &f->occ_pending);
    lanes_spill(f->long_acc, f->long_count, &f->long_pending);
    for (unsigned i = 0; i < 64; i++) {
        sims_i128 v = ((sims_i128)2 * f->occ_count[i] - f->occ_total) * 65536;
        if (f->weighting == SIMS_WEIGHT_LENGTH)
            v += ((sims_i128)2 * f->long_count[i] - f->long_total) * (sims_i128)f->lambda_q16;
        fp |= (uint64_t)(v > 0) << i;
    }
    *fingerprint = fp;
    return 0;
}

void sims_features_sketch(const sims_features *f, uint8_t *out)
{
    sims_sketcher_finish(&f->sketch, out);
}
