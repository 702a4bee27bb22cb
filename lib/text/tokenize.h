/* tokenize.h: UTF-8 text to the token sequence of format/fingerprint.md:
 * folded words, friso words or bigrams of Han runs, bigrams of kana runs. */
#ifndef SIMS_TEXT_TOKENIZE_H
#define SIMS_TEXT_TOKENIZE_H

#include "text/segment.h"

#include <stddef.h>
#include <stdint.h>

/* Han and kana runs are cut after this many code points and each piece is
 * segmented on its own (bounds friso's 32-bit offsets; see the spec). */
#define SIMS_RUN_MAX_CODEPOINTS (1u << 24)

/* Receives each token in order: `len` bytes of UTF-8 (never containing a
 * space), `codepoints` its length in code points. The bytes are valid only
 * during the call. Returns 0, or nonzero to report out of memory. */
typedef int (*sims_token_fn)(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints);

typedef struct sims_tokenizer {
    sims_friso_task *friso; /* NULL: bigrams for Han runs */
    uint8_t *word;          /* the word being built, folded */
    size_t word_len, word_cap;
    size_t word_codepoints;
    uint8_t *run; /* the Han or kana run being collected, NUL-terminated for friso */
    size_t run_len, run_cap;
    uint32_t run_codepoints;
    unsigned run_kind; /* SIMS_UC_HAN, SIMS_UC_KANA or 0 */
} sims_tokenizer;

/* Set up with no buffers; `friso` (may be NULL) stays owned by the caller. */
void sims_tokenizer_init(sims_tokenizer *t, sims_friso_task *friso);
void sims_tokenizer_release(sims_tokenizer *t);

/* Tokenize text[0..len). *invalid_utf8 is set to 1 when an ill-formed
 * sequence was replaced (left unchanged otherwise). Returns 0, or
 * SIMSTORE_ENOMEM (a buffer could not grow, or `emit` said so). */
int sims_tokenize(sims_tokenizer *t, const uint8_t *text, size_t len, sims_token_fn emit,
                  void *ctx, int *invalid_utf8);

#endif
