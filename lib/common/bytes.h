/* bytes.h: little-endian loads and stores, and a bounds-checked read cursor
 * for parsing bytes that came from disk (never cast a struct over them). */
#ifndef SIMS_COMMON_BYTES_H
#define SIMS_COMMON_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* memcpy-based loads compile to single unaligned moves on x86-64 and arm64. */
static inline uint16_t le_load16(const void *p)
{
    const uint8_t *b = (const uint8_t *)p;
    return (uint16_t)(b[0] | (uint16_t)b[1] << 8);
}

static inline uint32_t le_load32(const void *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    const uint8_t *b = (const uint8_t *)p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
#endif
}

static inline uint64_t le_load64(const void *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    const uint8_t *b = (const uint8_t *)p;
    return (uint64_t)le_load32(b) | (uint64_t)le_load32(b + 4) << 32;
#endif
}

static inline void le_store16(void *p, uint16_t v)
{
    uint8_t *b = (uint8_t *)p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
}

static inline void le_store32(void *p, uint32_t v)
{
    uint8_t *b = (uint8_t *)p;
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

static inline void le_store64(void *p, uint64_t v)
{
    le_store32(p, (uint32_t)v);
    le_store32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}

/* Big-endian 64-bit, for LMDB keys whose byte order must be numeric order. */
static inline void be_store64(void *p, uint64_t v)
{
    uint8_t *b = (uint8_t *)p;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (56 - 8 * i));
}

static inline void be_store32(void *p, uint32_t v)
{
    uint8_t *b = (uint8_t *)p;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (24 - 8 * i));
}

static inline uint64_t be_load64(const void *p)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && defined(__GNUC__)
    return __builtin_bswap64(le_load64(p)); /* a load and a bswap, not 8 loads */
#else
    const uint8_t *b = (const uint8_t *)p;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
#endif
}

/* A read cursor over [data, data + size). Every read checks the remaining
 * length first; a failed read returns -1, leaves the cursor unchanged, and
 * sets `overrun` so a parser may check once at the end. */
typedef struct sims_cursor {
    const uint8_t *data;
    size_t size;
    size_t pos;
    int overrun;
} sims_cursor;

static inline void cursor_init(sims_cursor *c, const void *data, size_t size)
{
    c->data = (const uint8_t *)data;
    c->size = size;
    c->pos = 0;
    c->overrun = 0;
}

static inline size_t cursor_remaining(const sims_cursor *c)
{
    return c->size - c->pos;
}

static inline int cursor_need(sims_cursor *c, size_t n)
{
    if (n > c->size - c->pos) {
        c->overrun = 1;
        return -1;
    }
    return 0;
}

static inline int cursor_u8(sims_cursor *c, uint8_t *v)
{
    if (cursor_need(c, 1))
        return -1;
    *v = c->data[c->pos++];
    return 0;
}

static inline int cursor_u16(sims_cursor *c, uint16_t *v)
{
    if (cursor_need(c, 2))
        return -1;
    *v = le_load16(c->data + c->pos);
    c->pos += 2;
    return 0;
}

static inline int cursor_u32(sims_cursor *c, uint32_t *v)
{
    if (cursor_need(c, 4))
        return -1;
    *v = le_load32(c->data + c->pos);
    c->pos += 4;
    return 0;
}

static inline int cursor_u64(sims_cursor *c, uint64_t *v)
{
    if (cursor_need(c, 8))
        return -1;
    *v = le_load64(c->data + c->pos);
    c->pos += 8;
    return 0;
}

/* Borrow `n` bytes in place; *out points into the cursor's buffer. */
static inline int cursor_bytes(sims_cursor *c, size_t n, const uint8_t **out)
{
    if (cursor_need(c, n))
        return -1;
    *out = c->data + c->pos;
    c->pos += n;
    return 0;
}

static inline int cursor_skip(sims_cursor *c, size_t n)
{
    if (cursor_need(c, n))
        return -1;
    c->pos += n;
    return 0;
}

#endif
