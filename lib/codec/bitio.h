/* bitio.h: LSB-first bit I/O over fixed byte buffers, 64 bits at a time.
 *
 * Bit i of a stream is bit (i mod 8) of byte i/8, so one little-endian 64-bit
 * load at byte pos/8 shifted right by pos%8 yields the next 57..64 bits. The
 * writer ORs bits into a zeroed buffer; the reader has a fast unchecked peek
 * (caller guarantees 8 readable bytes) and a bounded peek that reads bits past
 * the end of the buffer as zero. Pure functions, no allocation, no I/O. */
#ifndef SIMS_CODEC_BITIO_H
#define SIMS_CODEC_BITIO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/bytes.h"

/* Bits a single peek is guaranteed to deliver: 64 minus the worst bit offset. */
#define BITIO_PEEK_BITS 57u

/* Bytes a bit writer's buffer must have beyond its logical size: its 64-bit
 * read-modify-write may touch up to 7 bytes past the last byte it fills. */
#define BITIO_WRITER_SLACK 8u

/* Mask of the low n bits, 0 <= n <= 64 (no undefined shift at 64). */
static inline uint64_t bitio_mask(unsigned n)
{
    return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

/* Reverse the low n bits of v (n <= 16); canonical Huffman codes are defined
 * first-bit-most-significant but the stream is LSB-first. */
static inline uint32_t bitio_reverse(uint32_t v, unsigned n)
{
    uint32_t r = 0;
    for (unsigned i = 0; i < n; i++)
        r |= ((v >> i) & 1u) << (n - 1 - i);
    return r;
}

/* Position of the leading 1-bit of x (x != 0), 0..63. */
static inline unsigned bitio_msb(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return 63u - (unsigned)__builtin_clzll(x);
#else
    unsigned n = 0;
    while (x >>= 1)
        n++;
    return n;
#endif
}

/* ---- writer -------------------------------------------------------------- */

/* Writes into buf[0, size) which the caller zeroed and which has
 * BITIO_WRITER_SLACK further bytes (also zero). `pos` counts bits. */
typedef struct bitio_writer {
    uint8_t *buf;
    size_t size;
    uint64_t pos;
} bitio_writer;

static inline void bitio_writer_init(bitio_writer *w, uint8_t *buf, size_t size)
{
    w->buf = buf;
    w->size = size;
    w->pos = 0;
}

/* Append the low n bits of v (n <= 57, no bits of v above n set). The caller
 * has checked that pos + n <= 8 * size. */
static inline void bitio_put57(bitio_writer *w, uint64_t v, unsigned n)
{
    uint8_t *p = w->buf + (w->pos >> 3);
    le_store64(p, le_load64(p) | v << (w->pos & 7));
    w->pos += n;
}

/* Append the low n bits of v, n <= 64 (bits above n are ignored). */
static inline void bitio_put(bitio_writer *w, uint64_t v, unsigned n)
{
    v &= bitio_mask(n);
    if (n <= 32) {
        bitio_put57(w, v, n);
    } else {
        bitio_put57(w, v & 0xFFFFFFFFu, 32);
        bitio_put57(w, v >> 32, n - 32);
    }
}

/* ---- reader -------------------------------------------------------------- */

/* The bits from position pos on, of which the low 64 - pos%8 (>= 57) are
 * valid. Requires pos/8 + 8 <= size of the buffer. */
static inline uint64_t bitio_peek_fast(const uint8_t *buf, uint64_t pos)
{
    return le_load64(buf + (pos >> 3)) >> (pos & 7);
}

/* Like bitio_peek_fast but never reads outside buf[0, size): bits at or past
 * 8 * size read as zero (any pos is allowed). */
static inline uint64_t bitio_peek_safe(const uint8_t *buf, size_t size, uint64_t pos)
{
    uint64_t byte = pos >> 3;
    if (byte < size && size - byte >= 8)
        return le_load64(buf + byte) >> (pos & 7);
    uint8_t tmp[8] = {0};
    if (byte < size)
        memcpy(tmp, buf + byte, (size_t)(size - byte));
    return le_load64(tmp) >> (pos & 7);
}

/* n bits (n <= 64) starting at bit pos, bounded like bitio_peek_safe. */
static inline uint64_t bitio_read_safe(const uint8_t *buf, size_t size, uint64_t pos, unsigned n)
{
    if (n <= 32)
        return bitio_peek_safe(buf, size, pos) & bitio_mask(n);
    uint64_t lo = bitio_peek_safe(buf, size, pos) & 0xFFFFFFFFu;
    uint64_t hi = bitio_peek_safe(buf, size, pos + 32) & bitio_mask(n - 32);
    return lo | hi << 32;
}

#endif
