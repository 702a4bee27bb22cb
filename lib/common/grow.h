/* grow.h: the one growth rule of the library's buffers that only grow:
 * capacity doubles from `first` until it holds `need` elements; the
 * NUL-terminated byte arena of answers; and the one comparison and search
 * of sorted u64 arrays. */
#ifndef SIMS_COMMON_GROW_H
#define SIMS_COMMON_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Make *p (of *cap elements of elem bytes) hold at least need elements.
 * Returns 0, or -1 when realloc fails or the size would overflow (*p and
 * *cap unchanged). */
static inline int sims_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    if (need > SIZE_MAX / 2 / (elem ? elem : 1))
        return -1;
    size_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    void *g = realloc(*p, c * elem);
    if (!g)
        return -1;
    *p = g;
    *cap = c;
    return 0;
}

/* sims_grow from 16 elements: the buffers of a query's answer. */
static inline int sims_grow16(void **p, size_t *cap, size_t need, size_t elem)
{
    return sims_grow(p, cap, need, elem, 16);
}

/* Append a copy of data[0..n) and a NUL to the arena *a (*len bytes used
 * of *cap); *off gets where the copy starts. Returns 0, or -1 when out of
 * memory (nothing changed). */
static inline int sims_arena_put(char **a, size_t *cap, size_t *len, const void *data, size_t n,
                                 size_t *off)
{
    if (sims_grow((void **)a, cap, *len + n + 1, 1, 16))
        return -1;
    memcpy(*a + *len, data, n);
    (*a)[*len + n] = '\0';
    *off = *len;
    *len += n + 1;
    return 0;
}

/* Make room in a byte buffer holding `used` bytes for `extra` more. */
static inline int sims_grow_bytes(uint8_t **p, size_t *cap, size_t used, size_t extra, size_t first)
{
    if (extra <= *cap - used) /* the hot case first: room already */
        return 0;
    if (extra > SIZE_MAX / 4 - used)
        return -1;
    return sims_grow((void **)p, cap, used + extra, 1, first);
}

/* qsort's comparison of uint64_t values, ascending. */
static inline int sims_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The first index of sorted v[0..n) whose value is >= x (n when none). */
static inline size_t sims_lower_bound_u64(const uint64_t *v, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
