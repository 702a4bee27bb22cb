/* boilerplate.h: line keys and the removal of boilerplate lines
 * (format/fingerprint.md, "Boilerplate"): what a fingerprinter carrying a
 * set (simstore_fingerprinter_set_boilerplate) keeps beside its own
 * tokenizer, so that a line is keyed by exactly the tokens the fingerprint
 * would see. */
#ifndef SIMS_TEXT_BOILERPLATE_H
#define SIMS_TEXT_BOILERPLATE_H

#include "simstore.h"

#include <stddef.h>
#include <stdint.h>

/* XXH3-64 seed of a line key: ASCII "SIMSLINE". */
#define SIMS_LINE_KEY_SEED 0x53494D534C494E45ULL

/* fraction in (0, 1) as millionths in 1..999999: 0, or SIMSTORE_EINVAL
 * (with the detail) when it is out of range or rounds outside. */
int sims_boilerplate_millionths(double fraction, uint32_t *out);

typedef struct sims_boiler sims_boiler;

/* A keyer for fingerprint version `version` (1, 2 or 3) and the resolved Han
 * segmenter `cjk` (SIMSTORE_CJK_FRISO or SIMSTORE_CJK_BIGRAM); no set yet.
 * Errors: SIMSTORE_ENOMEM. */
int sims_boiler_new(unsigned version, simstore_cjk_mode cjk, sims_boiler **out);
void sims_boiler_free(sims_boiler *b);

/* The set removed by sims_boiler_strip (borrowed; NULL: none). */
void sims_boiler_set(sims_boiler *b, const simstore_boilerplate *set);
const simstore_boilerplate *sims_boiler_get(const sims_boiler *b);

/* The distinct keys of text's lines, increasing, in b's buffer (valid until
 * the next call). Returns 0 or SIMSTORE_ENOMEM. */
int sims_boiler_line_keys(sims_boiler *b, const uint8_t *text, size_t len, const uint64_t **keys,
                          size_t *count);

/* text[0..len) without its boilerplate lines (each with its LF): *out is
 * text itself when none was removed (always without a set, or with an
 * empty one), else b's buffer, valid until the next call. *removed is 1
 * when some line was removed. *invalid_utf8 is set to 1 when a line keyed
 * held ill-formed UTF-8 (left alone otherwise). Returns 0 or
 * SIMSTORE_ENOMEM. */
int sims_boiler_strip(sims_boiler *b, const uint8_t *text, size_t len, const uint8_t **out,
                      size_t *out_len, int *removed, int *invalid_utf8);

/* After a strip that removed lines: the offset in the original text of
 * byte `offset` of the stripped text (offset < the stripped length). */
size_t sims_boiler_original_offset(const sims_boiler *b, size_t offset);

#endif
