/* fuzz_block_decode.c: libFuzzer target for the pure codec: arbitrary code
 * lengths and block bytes through the Huffman table builder and the block
 * decoder (resumable, in chunks), and an encode/decode round trip of values
 * taken from the input.
 *
 * Input layout (missing bytes read as zero):
 *   [0]       mode: bits 0-1 op (0: code lengths taken raw, 1: lengths built
 *             from 64 byte-sized weights, 2 or 3: round trip), bit 2
 *             raw_first, bit 3 implicit last value (table format 2: the
 *             last of `count` values is `key`, not coded), bits 4-5 block
 *             size 256 << x
 *   [1, 65)   code lengths (op 0) or weights (op 1)
 *   [65, 73)  predecessor (u64 LE)      [73, 77) count (u32 LE)
 *   [77, 85)  key (u64 LE)              [85]     decode chunk size - 1
 *   [86, ...) block bytes (op 0, 1; zero-padded to the block size) or, for
 *             the round trip, u64 LE words each giving one difference.
 * Invariants (abort on violation): the decoder produces at most the values
 * asked for, never reads outside the block (ASan), and a round trip returns
 * exactly the values encoded. */
#include "codec/bitio.h"
#include "codec/block.h"
#include "codec/huffman.h"
#include "common/bytes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR 86

static uint8_t in_byte(const uint8_t *data, size_t size, size_t i)
{
    return i < size ? data[i] : 0;
}

static uint64_t in_u64(const uint8_t *data, size_t size, size_t i)
{
    uint8_t b[8];
    for (int k = 0; k < 8; k++)
        b[k] = in_byte(data, size, i + (size_t)k);
    return le_load64(b);
}

static void decode_arbitrary(const uint8_t *data, size_t size, unsigned op, int raw_first,
                             int implicit, size_t bytes)
{
    uint8_t lengths[64];
    if (op == 0) {
        for (unsigned s = 0; s < 64; s++)
            lengths[s] = in_byte(data, size, 1 + s);
    } else {
        uint64_t hist[64];
        for (unsigned s = 0; s < 64; s++)
            hist[s] = in_byte(data, size, 1 + s);
        if (sims_codec_huff_lengths(hist, CODEC_HUFF_MAX_BITS, lengths))
            abort(); /* at most 64 symbols always fit 11 bits */
        if (sims_codec_huff_check_lengths(lengths))
            abort(); /* the builder's output must pass the reader's rule */
    }
    codec_huff_decoder *dec = malloc(sizeof *dec);
    if (!dec)
        return;
    if (sims_codec_huff_decoder_init(dec, lengths) == 0) {
        uint64_t prev = in_u64(data, size, 65);
        uint64_t max = sims_codec_block_max_count(bytes, dec->min_len, raw_first);
        uint64_t count = (in_u64(data, size, 73) & 0xFFFFFFFFu) % (max + 2); /* may exceed max */
        uint64_t key = in_u64(data, size, 77);
        size_t chunk = (size_t)in_byte(data, size, 85) + 1;
        /* The block in an exact-size buffer. */
        uint8_t *block = calloc(1, bytes);
        uint64_t *out = malloc((size_t)(count + 1) * sizeof *out);
        if (block && out) {
            if (size > HDR)
                memcpy(block, data + HDR, size - HDR < bytes ? size - HDR : bytes);
            codec_block_decoder s;
            sims_codec_block_decoder_init(&s, dec, block, bytes, raw_first, prev, count);
            if (implicit)
                sims_codec_block_decoder_set_last(&s, key);
            size_t got = 0, k;
            int rc;
            /* An odd chunk size decodes with a limit (run_to): a call that
             * stops short with values left has just put out a value above
             * it. */
            uint64_t limit = prev + (key - prev) / 2;
            int limited = (int)(chunk & 1);
            for (;;) {
                rc = limited ? sims_codec_block_decoder_run_to(&s, out + got, chunk, limit, &k)
                             : sims_codec_block_decoder_run(&s, out + got, chunk, &k);
                if (rc || !k)
                    break;
                if (limited && k < chunk && s.remaining > 0 && out[got + k - 1] <= limit)
                    abort();
                got += k;
                if (k > chunk || got > count)
                    abort();
            }
            if (!rc) {
                if (got != count)
                    abort();
                (void)sims_codec_block_decoder_finish(&s, key);
                if (implicit && got && out[got - 1] != key)
                    abort();
                /* Values ascend strictly (no wrap went unreported). */
                for (size_t i = 1; i < got; i++)
                    if (out[i] <= out[i - 1])
                        abort();
                if (got && !raw_first && out[0] <= prev)
                    abort();
            }
        }
        free(block);
        free(out);
    }
    free(dec);
}

static void round_trip(const uint8_t *data, size_t size, int raw_first, int implicit, size_t bytes)
{
    size_t words = size > HDR ? (size - HDR) / 8 : 0;
    if (words == 0)
        return;
    uint64_t *v = malloc(words * sizeof *v);
    uint64_t *out = malloc((words + 1) * sizeof *out);
    uint8_t *block = malloc(bytes + BITIO_WRITER_SLACK);
    codec_huff_decoder *dec = malloc(sizeof *dec);
    if (!v || !out || !block || !dec)
        goto done;
    /* Differences: a word w gives (w >> (w & 63)) | 1, so every leading-bit
     * position occurs; values stop before passing 2^64. */
    uint64_t prev = in_u64(data, size, 65), x = prev;
    size_t n = 0;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = le_load64(data + HDR + 8 * i);
        uint64_t d = (w >> (w & 63)) | 1;
        if (i == 0 && raw_first) {
            x = w;
        } else {
            if (UINT64_MAX - x < d)
                break;
            x += d;
        }
        v[n++] = x;
    }
    if (n == 0)
        goto done;
    uint64_t hist[64] = {0};
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && raw_first)
            continue;
        hist[bitio_msb(v[i] - (i ? v[i - 1] : prev))]++;
    }
    uint8_t lengths[64];
    codec_huff_encoder enc;
    if (sims_codec_huff_lengths(hist, CODEC_HUFF_MAX_BITS, lengths) ||
        sims_codec_huff_encoder_init(&enc, lengths) || sims_codec_huff_decoder_init(dec, lengths))
        abort();
    size_t used;
    if (implicit) {
        /* As the version-2 writer: put while the values fit; the first that
         * does not is the implicit last, else the last put is dropped. */
        codec_block_encoder e;
        sims_codec_block_encoder_start(&e, &enc, block, bytes, raw_first, prev);
        used = 0;
        while (used < n) {
            int rc = sims_codec_block_encoder_put(&e, v[used]);
            if (rc < 0)
                abort();
            if (rc == 0) {
                sims_codec_block_encoder_put_implicit(&e, v[used]);
                used++;
                break;
            }
            used++;
            if (used == n)
                sims_codec_block_encoder_drop_last(&e);
        }
        if (used == 0 || used > sims_codec_block_max_count(bytes, dec->min_len, raw_first) + 1)
            abort();
        if (sims_codec_block_decode_implicit(dec, block, bytes, raw_first, prev, used, v[used - 1],
                                             out))
            abort();
    } else {
        if (sims_codec_block_encode(&enc, block, bytes, raw_first, prev, v, n, &used))
            abort();
        if (used == 0 || used > sims_codec_block_max_count(bytes, dec->min_len, raw_first))
            abort();
        if (sims_codec_block_decode(dec, block, bytes, raw_first, prev, used, v[used - 1], out))
            abort();
    }
    if (memcmp(out, v, used * sizeof *v) != 0)
        abort();
done:
    free(v);
    free(out);
    free(block);
    free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned mode = in_byte(data, size, 0);
    unsigned op = mode & 3;
    int raw_first = (mode >> 2) & 1;
    int implicit = (mode >> 3) & 1;
    size_t bytes = (size_t)SIMSTORE_MIN_BLOCK_BYTES << ((mode >> 4) & 3);
    if (op <= 1)
        decode_arbitrary(data, size, op, raw_first, implicit, bytes);
    else
        round_trip(data, size, raw_first, implicit, bytes);
    return 0;
}
