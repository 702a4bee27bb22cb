/* huffman.h: the canonical, length-limited Huffman code over the 64
 * leading-bit positions of fingerprint differences: optimal code lengths from a
 * histogram (package-merge), the validity rule a reader applies to stored
 * lengths, and the encode and decode tables. Pure: no I/O, no allocation. */
#ifndef SIMS_CODEC_HUFFMAN_H
#define SIMS_CODEC_HUFFMAN_H

#include <stddef.h>
#include <stdint.h>

/* Symbols: j = position of the leading 1-bit of a difference, 0..63. */
#define CODEC_SYMBOLS 64u
/* Longest code of format version 1. It keeps the decode table at 2^11
 * four-byte entries (8 KiB), well inside L1. */
#define CODEC_HUFF_MAX_BITS 11u
#define CODEC_HUFF_TABLE_SIZE (1u << CODEC_HUFF_MAX_BITS)

/* Optimal prefix-code lengths for `hist` (hist[j] = how often symbol j occurs)
 * with no code longer than max_bits (1 <= max_bits <= CODEC_HUFF_MAX_BITS),
 * by package-merge. Symbols with count 0 get length 0 (no code). One used
 * symbol gets length 1; two or more get a complete code (Kraft sum exactly 1).
 * Ties are broken by symbol number, so the result is deterministic. Counts
 * above 2^44 are scaled down first (nonzero counts stay nonzero).
 * Returns SIMSTORE_OK, or SIMSTORE_EINVAL when more than 2^max_bits symbols
 * are used or max_bits is out of range. */
int sims_codec_huff_lengths(const uint64_t hist[CODEC_SYMBOLS], unsigned max_bits,
                            uint8_t lengths[CODEC_SYMBOLS]);

/* Check stored code lengths the way a reader must (format/table.md, "Huffman
 * code lengths"): every length <= CODEC_HUFF_MAX_BITS; no used symbol, or
 * exactly one with length 1, or a complete code (Kraft sum exactly 1).
 * Returns SIMSTORE_OK or SIMSTORE_ECORRUPT (SIMS_CORRUPT, naming the symbol or
 * the Kraft sum). */
int sims_codec_huff_check_lengths(const uint8_t lengths[CODEC_SYMBOLS]);

/* The canonical code for valid lengths: symbols sorted by (length, symbol)
 * get consecutive code values, as in DEFLATE. codes[j] holds the code of
 * symbol j already bit-reversed, i.e. ready to append LSB-first so that its
 * most significant bit enters the stream first. Symbols without code get 0. */
void sims_codec_huff_canonical(const uint8_t lengths[CODEC_SYMBOLS], uint16_t codes[CODEC_SYMBOLS]);

/* Encoder table: the stream bits and length of each symbol's code. */
typedef struct codec_huff_encoder {
    uint16_t code[CODEC_SYMBOLS]; /* bit-reversed canonical code */
    uint8_t len[CODEC_SYMBOLS];   /* 0: symbol has no code */
} codec_huff_encoder;

/* Build the encoder for lengths that passed sims_codec_huff_check_lengths (or came
 * from sims_codec_huff_lengths). Returns SIMSTORE_OK or SIMSTORE_ECORRUPT. */
int sims_codec_huff_encoder_init(codec_huff_encoder *e, const uint8_t lengths[CODEC_SYMBOLS]);

/* Decoder table entry for the next CODEC_HUFF_MAX_BITS stream bits:
 *   bits 0..7   total bits the fingerprint occupies (code + mantissa), or
 *               CODEC_ENTRY_INVALID for a bit pattern no code starts with;
 *   bits 8..15  code length;
 *   bits 16..23 symbol j (= mantissa length);
 *   bits 24..31 63 - j (the shift that isolates the mantissa and its
 *               leading 1-bit; see sims_codec_block_decoder_run).
 * The invalid marker is larger than any real total, so one comparison
 * (total <= BITIO_PEEK_BITS) selects the fast path and excludes bad codes. */
typedef uint32_t codec_huff_entry;
#define CODEC_ENTRY_INVALID 0xFFu
#define CODEC_ENTRY_TOTAL(e) ((unsigned)((e)&0xFFu))
#define CODEC_ENTRY_LEN(e) ((unsigned)(((e) >> 8) & 0xFFu))
#define CODEC_ENTRY_SYM(e) ((unsigned)(((e) >> 16) & 0xFFu))
#define CODEC_ENTRY_SHIFT(e) ((unsigned)((e) >> 24))

typedef struct codec_huff_decoder {
    codec_huff_entry table[CODEC_HUFF_TABLE_SIZE];
    uint8_t lengths[CODEC_SYMBOLS];
    uint8_t used_symbols; /* symbols with a code */
    uint8_t min_len;      /* shortest code length; 0 when no symbol is used */
} codec_huff_decoder;

/* Validate `lengths` (as sims_codec_huff_check_lengths) and build the lookup
 * table. Returns SIMSTORE_OK or SIMSTORE_ECORRUPT. */
int sims_codec_huff_decoder_init(codec_huff_decoder *d, const uint8_t lengths[CODEC_SYMBOLS]);

#endif
