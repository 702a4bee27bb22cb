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
 * space), `codepoints` its length in code points, `cjk` 1 for a token of a
 * Han or kana run (a friso word, a bigram or a lone character), 0 for a
 * word. The bytes are valid only during the call. Returns 0, or nonzero to
 * report out of memory. */
typedef int (*sims_token_fn)(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints,
                             int cjk);

typedef struct sims_tokenizer {
    sims_friso_task *friso; /* NULL: bigrams for Han runs */
    uint8_t *word;          /* the word being built, folded */
    size_t word_len, word_cap;
    size_t word_codepoints;
    uint8_t *run; /* the Han or kana run being collected, NUL-terminated for friso */
    size_t run_len, run_cap;
    uint32_t run_codepoints;
    unsigned run_kind; /* SIMS_UC_HAN, SIMS_UC_KANA or 0 */
    int join_lines;    /* version 2: a line break between Han or kana joins */
    int join_spaces;   /* version 3 (with join_lines): so does White_Space
                          holding no line break */
    int inert_only;    /* stop at the first code point normalization may
                          change (SIMS_TOKENIZE_NOT_INERT) */
} sims_tokenizer;

/* sims_tokenize() with inert_only met a code point that is not inert: the
 * tokens so far are void; normalize the text and tokenize it again. */
#define SIMS_TOKENIZE_NOT_INERT 1

/* Set up with no buffers; `friso` (may be NULL) stays owned by the caller.
 * Version 1 tokens; set join_lines for version 2's line joining, and also
 * join_spaces for version 3's. */
void sims_tokenizer_init(sims_tokenizer *t, sims_friso_task *friso);
void sims_tokenizer_release(sims_tokenizer *t);

/* Tokenize text[0..len). *invalid_utf8 is set to 1 when an ill-formed
 * sequence was replaced (left unchanged otherwise). Returns 0,
 * SIMS_TOKENIZE_NOT_INERT (only with inert_only), or SIMSTORE_ENOMEM (a
 * buffer could not grow, or `emit` said so). */
int sims_tokenize(sims_tokenizer *t, const uint8_t *text, size_t len, sims_token_fn emit, void *ctx,
                  int *invalid_utf8);

#endif
