/* normalize.h: the normalization of fingerprint version 2
 * (format/fingerprint.md, "Version 2: normalization"): ignorables removed,
 * then NFC of the concatenated D(c), where D is NFKD with full case folding
 * to a fixed point. Only the spans around code points that are not inert are
 * rewritten; text without them is returned as it is. */
#ifndef SIMS_TEXT_NORMALIZE_H
#define SIMS_TEXT_NORMALIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sims_normalizer {
    uint8_t *out; /* the rewritten text, when some span changed */
    size_t out_cap;
    uint32_t *span; /* code points of the span being normalized */
    size_t span_cap;
} sims_normalizer;

void sims_normalizer_init(sims_normalizer *n);
void sims_normalizer_release(sims_normalizer *n);

/* Normalize text[0..len): *out is text itself when nothing needs rewriting
 * (all ASCII, or only inert code points), else the normalizer's buffer,
 * valid until the next call. Ill-formed bytes are copied as they are (the
 * tokenizer replaces them); ASCII letters keep their case (the tokenizer
 * folds them, so the tokens are those of the normalized text). Returns 0 or
 * SIMSTORE_ENOMEM. */
int sims_normalize(sims_normalizer *n, const uint8_t *text, size_t len, const uint8_t **out,
                   size_t *out_len);

/* The normalization of the code points cp[0..count) in place into
 * out[0..*out_count) (out needs room for 18 code points per input code
 * point): exposed for the tests. Returns 0. */
void sims_normalize_codepoints(const uint32_t *cp, size_t count, uint32_t *out, size_t *out_count);

#endif
