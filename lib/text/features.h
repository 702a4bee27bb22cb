/* features.h: tokens to a simhash (format/fingerprint.md, "Features" to "Bits"):
 * overlapping w-shingles hashed with XXH3-64, counted into 64 bit sums. */
#ifndef SIMS_TEXT_FEATURES_H
#define SIMS_TEXT_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#define SIMS_FEATURE_SEED 0 /* XXH3-64 seed of every feature hash */

/* One slot of the distinct-feature set LENGTH weighting keeps. */
typedef struct sims_feature_slot {
    uint64_t hash;
    uint32_t generation; /* live when equal to the set's generation */
} sims_feature_slot;

typedef struct sims_features {
    unsigned shingle_words;
    int length_weighting;
    uint64_t lambda_q16; /* λ in units of 2^-16 */

    /* The tokens still needed, joined by single spaces. */
    uint8_t *text;
    size_t text_len, text_cap;
    size_t window_start[32]; /* by token number mod shingle_words */
    uint32_t window_codepoints[32];
    uint64_t tokens; /* in the current document */
    unsigned slot;   /* tokens mod shingle_words, kept without dividing */

    /* Bit counts in 8-bit lanes (lane k of acc[j] counts bit 8j+k), spilled
     * into the 64-bit counts before a lane can overflow. */
    uint64_t occ_acc[8], long_acc[8];
    unsigned occ_pending, long_pending;
    uint64_t occ_count[64], long_count[64];
    uint64_t occ_total, long_total;

    sims_feature_slot *set;
    size_t set_cap, set_used;
    uint32_t generation;

    int failed; /* out of memory since the document began */
} sims_features;

/* shingle_words in 1..32; lambda_q16 is used only with length_weighting. */
void sims_features_init(sims_features *f, unsigned shingle_words, int length_weighting,
                        uint64_t lambda_q16);
void sims_features_release(sims_features *f);

/* Start a document. */
void sims_features_begin(sims_features *f);
/* Add the next token (a sims_token_fn; ctx is the sims_features). */
int sims_features_token(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints);
/* End the document: the fingerprint (0 when it had no tokens). Returns 0 or
 * SIMSTORE_ENOMEM. */
int sims_features_end(sims_features *f, uint64_t *fingerprint);

#endif
