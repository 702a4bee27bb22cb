/* block.h: one block of a table: exactly block_bytes bytes of LSB-first
 * bitstream holding strictly increasing fingerprints, each coded as its
 * difference d >= 1 to its predecessor: the Huffman code of j = position of
 * d's leading 1-bit, then the j bits of d below it (least significant first).
 * Block 0 starts with its first fingerprint as 64 raw bits; every other block
 * codes its first fingerprint against the previous block's key. Unused bits
 * at the end are zero. There is no per-block header: the count, key and
 * checksum live in the table's index (format/table.md).
 *
 * The encoder appends one fingerprint at a time and says when the block is
 * full; the decoder is resumable (decode a few values, stop, go on) so a
 * range scan can stop early without heap allocation. Pure: no I/O. */
#ifndef SIMS_CODEC_BLOCK_H
#define SIMS_CODEC_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "simstore.h"
#include "codec/bitio.h"
#include "codec/huffman.h"

/* Block sizes: the ones simstore_block_bytes_valid() (simstore.h) allows,
 * SIMSTORE_MIN_BLOCK_BYTES to SIMSTORE_MAX_BLOCK_BYTES, powers of two. */

/* The symbol (leading-bit position) of a difference d >= 1. */
static inline unsigned codec_delta_symbol(uint64_t d)
{
    return bitio_msb(d);
}

/* Bits the difference d >= 1 occupies under `h`, or 0 when its symbol has no
 * code (such a difference cannot be written). */
static inline unsigned codec_delta_bits(const codec_huff_encoder *h, uint64_t d)
{
    unsigned j = codec_delta_symbol(d);
    return h->len[j] ? h->len[j] + j : 0;
}

/* The most fingerprints one block can hold under a code whose shortest code
 * length is min_len (0: no code; then only block 0's raw value fits). Readers
 * bound the counts stored in the index with it. */
uint64_t sims_codec_block_max_count(size_t block_bytes, unsigned min_len, int raw_first);

/* ---- encoder --------------------------------------------------------------- */

typedef struct codec_block_encoder {
    const codec_huff_encoder *huff;
    bitio_writer bits;
    uint64_t prev;     /* last value written (valid once count > 0 or after start) */
    uint64_t last_pos; /* bit position where the last value written starts */
    uint32_t count;    /* fingerprints in the block so far */
    int raw_first;     /* the next value is written as 64 raw bits */
} codec_block_encoder;

/* Start a block in buf, which must hold block_bytes + BITIO_WRITER_SLACK
 * bytes; this zeroes all of it. With raw_first (block 0) the first value is
 * written as 64 raw bits and `prev` is ignored; otherwise `prev` is the
 * predecessor of the first value (the previous block's key). The encoder
 * borrows `h` and `buf` until the block is done. */
void sims_codec_block_encoder_start(codec_block_encoder *e, const codec_huff_encoder *h,
                                    uint8_t *buf, size_t block_bytes, int raw_first, uint64_t prev);

/* Append fingerprint v, which must exceed the previous one (the caller
 * checks). Returns 1 when written, 0 when it does not fit (the block is then
 * complete and unchanged), or SIMSTORE_EINVAL when the difference's symbol has
 * no code. */
int sims_codec_block_encoder_put(codec_block_encoder *e, uint64_t v);

/* Make v, which must exceed the previous value, the block's last value
 * without coding it (table format 2: the index holds it as the block's key);
 * the block is then complete. */
void sims_codec_block_encoder_put_implicit(codec_block_encoder *e, uint64_t v);

/* Erase the bits of the last value written (count >= 1), which stays the
 * block's last value, now implicit; the block is then complete. */
void sims_codec_block_encoder_drop_last(codec_block_encoder *e);

/* Bits written so far (the rest of the block is zero padding). */
static inline uint64_t codec_block_encoder_bits(const codec_block_encoder *e)
{
    return e->bits.pos;
}

/* Encode as many of fps[0..n) as fit into one block (see
 * sims_codec_block_encoder_start for buf, raw_first and prev); *used receives how
 * many. Returns SIMSTORE_OK, or SIMSTORE_EINVAL for input that is not strictly
 * increasing (also against prev) or a difference without code. */
int sims_codec_block_encode(const codec_huff_encoder *h, uint8_t *buf, size_t block_bytes,
                            int raw_first, uint64_t prev, const uint64_t *fps, size_t n,
                            size_t *used);

/* ---- decoder --------------------------------------------------------------- */

/* Resumable decoder state; plain data, safe to copy and keep on the stack. */
typedef struct codec_block_decoder {
    const codec_huff_decoder *huff;
    const uint8_t *data;
    size_t block_bytes;
    uint64_t pos;       /* next bit to read */
    uint64_t prev;      /* last value produced (the predecessor at first) */
    uint64_t remaining; /* values still to decode (the implicit last included) */
    uint64_t key;       /* the implicit last value, when implicit_last */
    int raw_first;      /* the next value is 64 raw bits (block 0's first) */
    int implicit_last;  /* the last of the values is `key`, not in the bits */
} codec_block_decoder;

/* Prepare to decode `count` values from data[0, block_bytes) (block_bytes
 * >= SIMSTORE_MIN_BLOCK_BYTES); see sims_codec_block_encoder_start for raw_first and
 * prev. Borrows h and data while decoding. */
void sims_codec_block_decoder_init(codec_block_decoder *s, const codec_huff_decoder *h,
                                   const uint8_t *data, size_t block_bytes, int raw_first,
                                   uint64_t prev, uint64_t count);

/* Table format 2: the last of the `count` values is `key` and is not coded
 * in the bits (count - 1 values are). Call right after init. The decoder
 * checks that key exceeds the value before it. */
void sims_codec_block_decoder_set_last(codec_block_decoder *s, uint64_t key);

/* Decode up to `cap` further values into out[0..*n); *n == 0 once all
 * `count` values are out. Never reads outside the block, whatever its bytes.
 * Returns SIMSTORE_OK, or SIMSTORE_ECORRUPT (with the bit offset) when the
 * bits hold no valid code, a value runs past the block's end, or a value
 * overflows 2^64; the state is then unusable and out's contents undefined. */
int sims_codec_block_decoder_run(codec_block_decoder *s, uint64_t *out, size_t cap, size_t *n);

/* As sims_codec_block_decoder_run, but it may stop early, once the last value it
 * put out exceeds `limit` (a range search needs nothing after that value);
 * the state stays resumable. */
int sims_codec_block_decoder_run_to(codec_block_decoder *s, uint64_t *out, size_t cap,
                                    uint64_t limit, size_t *n);

/* One decode of sims_codec_block_decoder_run_two: the arguments of a
 * sims_codec_block_decoder_run_to call (dec, out, cap, limit) and its results
 * (n, rc). */
typedef struct codec_block_run {
    codec_block_decoder *dec;
    uint64_t *out;
    size_t cap;
    uint64_t limit;
    size_t n; /* values put out */
    int rc;   /* SIMSTORE_OK or SIMSTORE_ECORRUPT, as the single call */
} codec_block_run;

/* Two independent decodes at once (x's and y's decoders must differ), each
 * as its own sims_codec_block_decoder_run_to call: the same values from the same
 * bits, the same errors, the state resumable after; like that call, each
 * may stop early once its last value exceeds its limit (not always at the
 * same value). While both streams are inside their blocks, one loop decodes
 * a value of each in turn, so that the core overlaps the two chains of table
 * look-ups that bound a single stream's speed. */
void sims_codec_block_decoder_run_two(codec_block_run *x, codec_block_run *y);

/* After all values are decoded: check that the last one equals `key` and that
 * every bit after it is zero. Returns SIMSTORE_OK or SIMSTORE_ECORRUPT. */
int sims_codec_block_decoder_finish(const codec_block_decoder *s, uint64_t key);

/* Decode a whole block of `count` values into out[0..count) and check it
 * against `key` (run + finish); with implicit_last, the last value is key
 * and not coded (sims_codec_block_decoder_set_last). Returns SIMSTORE_OK or
 * SIMSTORE_ECORRUPT. */
int sims_codec_block_decode(const codec_huff_decoder *h, const uint8_t *data, size_t block_bytes,
                            int raw_first, uint64_t prev, uint64_t count, uint64_t key,
                            uint64_t *out);
int sims_codec_block_decode_implicit(const codec_huff_decoder *h, const uint8_t *data,
                                     size_t block_bytes, int raw_first, uint64_t prev,
                                     uint64_t count, uint64_t key, uint64_t *out);

#endif
