/* grow.h: the one growth rule of the library's buffers that only grow:
 * capacity doubles from `first` until it holds `need` elements. */
#ifndef SIMS_COMMON_GROW_H
#define SIMS_COMMON_GROW_H

#include <stddef.h>
#include <stdlib.h>

/* Make *p (of *cap elements of elem bytes) hold at least need elements.
 * Returns 0, or -1 when realloc fails (*p and *cap unchanged). */
static inline int sims_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
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

#endif
