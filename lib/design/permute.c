/* permute.c: compiling a 64-bit permutation into rotate-and-mask moves. */
#include "design/permute.h"

#include "common/error.h"

#include <string.h>

int sims_permuter_init(sims_permuter *p, const uint8_t perm[64])
{
    memset(p, 0, sizeof *p);

    uint64_t seen = 0;
    for (unsigned i = 0; i < 64; i++) {
        if (perm[i] > 63)
            return sims_fail(SIMSTORE_EINVAL,
                             "permutation: output bit %u takes source bit %u (> 63)", i,
                             (unsigned)perm[i]);
        seen |= UINT64_C(1) << perm[i];
    }
    if (seen != UINT64_MAX)
        return sims_fail(SIMSTORE_EINVAL, "permutation: a source bit is used twice");

    /* Output bit i comes from source bit perm[i]: a left rotation by
     * (i - perm[i]) mod 64 puts it in place. Bits sharing a rotation form
     * one move; collecting them by rotation keeps moves in a fixed order
     * (ascending rotation) so equal permutations compile identically. */
    uint64_t by_rot[64] = {0};
    for (unsigned i = 0; i < 64; i++)
        by_rot[(i - perm[i]) & 63u] |= UINT64_C(1) << i;

    uint32_t n = 0;
    for (uint32_t rot = 0; rot < 64; rot++) {
        if (!by_rot[rot])
            continue;
        if (n == SIMS_PERMUTER_MAX_MOVES) {
            memset(p, 0, sizeof *p);
            return sims_fail(SIMSTORE_EINVAL,
                             "permutation needs more than %d distinct bit displacements",
                             SIMS_PERMUTER_MAX_MOVES);
        }
        p->fwd_rot[n] = (uint8_t)rot;
        p->fwd_mask[n] = by_rot[rot];
        /* The inverse moves the same bits back: rotate the other way, and
         * keep them at their source positions. */
        p->inv_rot[n] = (uint8_t)((64u - rot) & 63u);
        p->inv_mask[n] = sims_rotl64(by_rot[rot], (64u - rot) & 63u);
        n++;
    }
    p->n_moves = n;
    return SIMSTORE_OK;
}
