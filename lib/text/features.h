/* features.h: tokens to a simhash (format/fingerprint.md, "Features" to "Bits"):
 * overlapping shingles (w words, or c CJK tokens in version 2) hashed with
 * XXH3-64, weighted and counted into 64 bit sums. */
#ifndef SIMS_TEXT_FEATURES_H
#define SIMS_TEXT_FEATURES_H

#include "text/sketch.h"

#include <stddef.h>
#include <stdint.h>

#define SIMS_FEATURE_SEED 0 /* XXH3-64 seed of every feature hash */

/* Weightings (simstore_weighting's values). */
enum { SIMS_WEIGHT_TF = 0, SIMS_WEIGHT_LENGTH = 1, SIMS_WEIGHT_LOG = 2 };

/* One slot of the distinct-feature set LENGTH and LOG weighting keep. */
typedef struct sims_feature_slot {
    uint64_t hash;
    uint64_t count;      /* LOG: occurrences in the document */
    uint32_t generation; /* live when equal to the set's generation */
} sims_feature_slot;

#define SIMS_WINDOW 32 /* tokens kept for shingles: the widest shingle */

typedef struct sims_features {
    unsigned shingle_words; /* width of a shingle starting at a word */
    unsigned cjk_shingle;   /* width of one starting at a CJK token */
    unsigned widest;
    int weighting;       /* SIMS_WEIGHT_* */
    uint64_t lambda_q16; /* λ in units of 2^-16 */

    /* The tokens still needed, joined by single spaces. */
    uint8_t *text;
    size_t text_len, text_cap;
    size_t window_start[SIMS_WINDOW]; /* by token number mod SIMS_WINDOW */
    uint32_t window_codepoints[SIMS_WINDOW];
    uint8_t window_cjk[SIMS_WINDOW];
    uint64_t tokens; /* in the current document */

    /* Bit counts in 8-bit lanes (lane k of acc[j] counts bit 8j+k), spilled
     * into the 64-bit counts before a lane can overflow. */
    uint64_t occ_acc[8], long_acc[8];
    unsigned occ_pending, long_pending;
    uint64_t occ_count[64], long_count[64];
    uint64_t occ_total, long_total;

    sims_feature_slot *set;
    size_t set_cap, set_used;
    uint32_t generation;
    size_t *set_order; /* LOG: the live slots, in insertion order */

    int failed; /* out of memory since the document began */

    sims_sketcher sketch; /* the features' sketch, when sketch.bin_bits */
} sims_features;

/* shingle_words and cjk_shingle in 1..32 (equal in version 1); weighting a
 * SIMS_WEIGHT_*; lambda_q16 is used only with SIMS_WEIGHT_LENGTH. */
void sims_features_init(sims_features *f, unsigned shingle_words, unsigned cjk_shingle,
                        int weighting, uint64_t lambda_q16);
void sims_features_release(sims_features *f);
/* Also sketch every document's features in 2^bin_bits bins (7..9; 0: no
 * sketch, the default). Call before the first document. */
void sims_features_set_sketch(sims_features *f, unsigned bin_bits);

/* Start a document. */
void sims_features_begin(sims_features *f);
/* Add the next token (a sims_token_fn; ctx is the sims_features). */
int sims_features_token(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints, int cjk);
/* The LOG weight of a feature that occurs tf >= 1 times, in units of 2^-16
 * (format/fingerprint.md, "Weights"). */
uint64_t sims_log_weight(uint64_t tf);
/* End the document: the fingerprint (0 when it had no tokens). Returns 0 or
 * SIMSTORE_ENOMEM. */
int sims_features_end(sims_features *f, uint64_t *fingerprint);
/* After sims_features_end: the document's sketch (format/sketch.md), 2^p / 8
 * bytes. */
void sims_features_sketch(const sims_features *f, uint8_t *out);

#endif
