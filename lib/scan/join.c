/* join.c: the exact self-join of one permuted table (join.h): prefix
 * groups, then brute force, block splits or neighbour enumeration inside a
 * group, with one list of "the differing bits must meet this mask" rules
 * making every pair come out exactly once. */
#include "scan/join.h"

#include "common/bits.h"
#include "common/error.h"

#include <stdlib.h>
#include <string.h>

/* Groups of at most this many values compare all their pairs. More would
 * cost k = 3 joins: pairs of 2^23 documents (groups of 128 in a k = 3
 * store's tables) take 2.2 s comparing up to 256 values, 1.8 s splitting
 * above 48; joins above the store's k choose designs whose groups are
 * smaller than either (sims_scan_join_design). */
#define LEAF_VALUES 48
/* Values the source hands over per call. */
#define CHUNK_VALUES 4096
/* Masks: one per earlier table, then at most k per split level; a level
 * removes at least one free bit, so there are at most 64 levels. */
#define MAX_MASKS (SIMS_DESIGN_MAX_TABLES + 64 * SIMS_DESIGN_MAX_K)
#define MAX_DEPTH 65

struct scan_joiner {
    const sims_design *design;
    unsigned k;
    const sims_permuter *perm; /* of the table being joined */
    uint64_t masks[MAX_MASKS];
    unsigned nmasks;
    uint64_t *group;
    size_t group_len, group_cap;
    uint64_t chunk[CHUNK_VALUES];
    uint64_t *level[MAX_DEPTH]; /* a split's sorted copy, per depth */
    size_t level_cap[MAX_DEPTH];
    uint32_t *slots; /* enumeration's hash set: index + 1, 0 = empty */
    size_t slot_cap;
    uint8_t bitpos[64];
    uint64_t budget; /* bytes of scratch allowed (0: no limit) */
    uint64_t used;   /* bytes of scratch held */
    unsigned table;  /* the table being joined, for messages */
    scan_pair_fn emit;
    void *emit_ctx;
};

int sims_scan_joiner_new(const sims_design *d, unsigned k, uint64_t budget, scan_joiner **out)
{
    *out = NULL;
    if (k < 1 || k > d->params.k)
        return sims_fail(SIMSTORE_EINVAL, "join distance %u outside 1..%u", k, d->params.k);
    scan_joiner *j = calloc(1, sizeof *j);
    if (!j)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a join");
    j->design = d;
    j->k = k;
    j->budget = budget;
    *out = j;
    return SIMSTORE_OK;
}

void sims_scan_joiner_free(scan_joiner *j)
{
    if (!j)
        return;
    free(j->group);
    for (unsigned i = 0; i < MAX_DEPTH; i++)
        free(j->level[i]);
    free(j->slots);
    free(j);
}

/* Scratch growing from `had` to `want` bytes for a group of n values:
 * refused (SIMSTORE_EFULL) past the budget. */
static int charge(scan_joiner *j, size_t had, size_t want, size_t n)
{
    uint64_t used = j->used - had + want;
    if (j->budget && used > j->budget)
        return sims_fail(SIMSTORE_EFULL,
                         "a prefix group of %zu fingerprints in table %u needs more than the "
                         "join's share of the memory budget (%llu MiB a thread): give more "
                         "memory (--memory) or fewer threads",
                         n, j->table, (unsigned long long)(j->budget >> 20));
    j->used = used;
    return 0;
}

/* Room for `need` elements of `size` bytes in *v (*cap of them, doubled
 * from `first`) for a group of n values, charged to the budget. */
static int reserve_for(scan_joiner *j, void **v, size_t *cap, size_t need, size_t size,
                       size_t first, size_t n)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    int rc = charge(j, *cap * size, c * size, n);
    if (rc)
        return rc;
    void *g = realloc(*v, c * size);
    if (!g) {
        j->used -= (c - *cap) * size;
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a prefix group of %zu values", n);
    }
    *v = g;
    *cap = c;
    return 0;
}

static int reserve(scan_joiner *j, uint64_t **v, size_t *cap, size_t n)
{
    return reserve_for(j, (void **)v, cap, n, sizeof **v, 256, n);
}

/* The differing bits e meet every mask: the pair belongs here. */
static inline int masks_met(const scan_joiner *j, uint64_t e)
{
    for (unsigned i = 0; i < j->nmasks; i++)
        if (!(e & j->masks[i]))
            return 0;
    return 1;
}

static inline int emit_pair(scan_joiner *j, uint64_t x, uint64_t y, uint64_t e)
{
    uint64_t a = sims_unpermute(j->perm, x), b = sims_unpermute(j->perm, y);
    if (a > b) {
        uint64_t t = a;
        a = b;
        b = t;
    }
    return j->emit(j->emit_ctx, a, b, (unsigned)sims_popcount64(e));
}

static int join_brute(scan_joiner *j, const uint64_t *s, size_t n)
{
    for (size_t a = 0; a + 1 < n; a++) {
        uint64_t x = s[a];
        for (size_t b = a + 1; b < n; b++) {
            uint64_t e = x ^ s[b];
            if ((unsigned)sims_popcount64(e) <= j->k && masks_met(j, e)) {
                int rc = emit_pair(j, x, s[b], e);
                if (rc)
                    return rc;
            }
        }
    }
    return 0;
}

/* ---- enumeration: each value's neighbours looked up in a hash set ----- */

static inline size_t slot_of(uint64_t v, size_t mask)
{
    return (size_t)((v * UINT64_C(0x9E3779B97F4A7C15)) >> 32) & mask;
}

/* The hash set of s[0..n), in the first *cap_out slots (a power of two). */
static int hash_build(scan_joiner *j, const uint64_t *s, size_t n, size_t *cap_out)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    *cap_out = cap;
    int rc = reserve_for(j, (void **)&j->slots, &j->slot_cap, cap, sizeof *j->slots, 16, n);
    if (rc)
        return rc;
    memset(j->slots, 0, cap * sizeof *j->slots);
    for (size_t i = 0; i < n; i++) {
        size_t h = slot_of(s[i], cap - 1);
        while (j->slots[h])
            h = (h + 1) & (cap - 1);
        j->slots[h] = (uint32_t)(i + 1);
    }
    return 0;
}

static inline int hash_has(const scan_joiner *j, const uint64_t *s, size_t cap, uint64_t v)
{
    for (size_t h = slot_of(v, cap - 1); j->slots[h]; h = (h + 1) & (cap - 1))
        if (s[j->slots[h] - 1] == v)
            return 1;
    return 0;
}

typedef struct enum_state {
    const uint64_t *s;
    size_t cap;
    unsigned nbits;
    uint64_t x;
} enum_state;

/* Every e = flips of `left` more positions from bitpos[start..): x ^ e. */
static int enum_flips(scan_joiner *j, const enum_state *st, uint64_t e, unsigned start,
                      unsigned left)
{
    for (unsigned i = start; i < st->nbits; i++) {
        uint64_t e2 = e | (UINT64_C(1) << j->bitpos[i]);
        uint64_t y = st->x ^ e2;
        if (y > st->x && hash_has(j, st->s, st->cap, y) && masks_met(j, e2)) {
            int rc = emit_pair(j, st->x, y, e2);
            if (rc)
                return rc;
        }
        if (left > 1) {
            int rc = enum_flips(j, st, e2, i + 1, left - 1);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int join_enumerate(scan_joiner *j, const uint64_t *s, size_t n, uint64_t free_bits)
{
    if (n > UINT32_MAX - 1)
        return sims_fail(SIMSTORE_EFULL, "a prefix group of %zu values", n);
    enum_state st = {s, 0, 0, 0};
    int rc = hash_build(j, s, n, &st.cap);
    if (rc)
        return rc;
    for (unsigned b = 0; b < 64; b++)
        if (free_bits >> b & 1)
            j->bitpos[st.nbits++] = (uint8_t)b;
    for (size_t i = 0; i < n; i++) {
        st.x = s[i];
        rc = enum_flips(j, &st, 0, 0, j->k);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- splitting a group by blocks of its free bits ---------------------- */

/* Sort v[0..n) by v & mask (3-way quicksort: tight groups repeat keys). */
static void sort_masked(uint64_t *v, size_t n, uint64_t mask)
{
    while (n > 16) {
        uint64_t a = v[0] & mask, b = v[n / 2] & mask, c = v[n - 1] & mask;
        uint64_t piv = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t lt = 0, i = 0, gt = n;
        while (i < gt) {
            uint64_t key = v[i] & mask;
            if (key < piv) {
                uint64_t t = v[lt];
                v[lt++] = v[i];
                v[i++] = t;
            } else if (key > piv) {
                uint64_t t = v[--gt];
                v[gt] = v[i];
                v[i] = t;
            } else {
                i++;
            }
        }
        /* Recurse into the smaller side, loop on the larger. */
        if (lt < n - gt) {
            sort_masked(v, lt, mask);
            v += gt;
            n -= gt;
        } else {
            sort_masked(v + gt, n - gt, mask);
            n = lt;
        }
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i], key = x & mask;
        size_t p = i;
        for (; p > 0 && (v[p - 1] & mask) > key; p--)
            v[p] = v[p - 1];
        v[p] = x;
    }
}

/* Cut the set bits of F (from the most significant) into m blocks whose
 * sizes differ by at most one, the larger first. */
static void cut_blocks(uint64_t free_bits, unsigned m, uint64_t *blocks)
{
    unsigned f = (unsigned)sims_popcount64(free_bits), bit = 64;
    for (unsigned b = 0; b < m; b++) {
        unsigned size = f / m + (b < f % m ? 1u : 0u);
        blocks[b] = 0;
        while (size > 0) {
            bit--;
            if (free_bits >> bit & 1) {
                blocks[b] |= UINT64_C(1) << bit;
                size--;
            }
        }
    }
}

/* Values within k of a value over f free bits: sum of C(f, i), i = 1..k. */
static double neighbourhood(unsigned f, unsigned k)
{
    double c = 1, sum = 0;
    for (unsigned i = 1; i <= k && i <= f; i++) {
        c = c * (f - i + 1) / i;
        sum += c;
    }
    return sum;
}

static int join_group(scan_joiner *j, const uint64_t *s, size_t n, uint64_t free_bits,
                      unsigned depth);

/* The longest run of v[0..n) (sorted by v & mask) agreeing on mask. */
static size_t largest_run(const uint64_t *v, size_t n, uint64_t mask)
{
    size_t largest = 0;
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && ((v[hi] ^ v[lo]) & mask) == 0; hi++)
            ;
        if (hi - lo > largest)
            largest = hi - lo;
    }
    return largest;
}

/* Split: for each block b, join the runs that agree on it, asking of their
 * pairs that they differ on every earlier block. */
static int join_split(scan_joiner *j, const uint64_t *s, size_t n, uint64_t free_bits,
                      unsigned depth)
{
    uint64_t blocks[SIMS_DESIGN_MAX_K + 1];
    unsigned m = j->k + 1;
    cut_blocks(free_bits, m, blocks);
    int rc = reserve(j, &j->level[depth], &j->level_cap[depth], n);
    if (rc)
        return rc;
    uint64_t *v = j->level[depth];
    unsigned saved = j->nmasks;
    for (unsigned b = 0; b < m && rc == 0; b++) {
        memcpy(v, s, n * sizeof *v);
        sort_masked(v, n, blocks[b]);
        if (b == 0 && largest_run(v, n, blocks[b]) > n / 2) {
            /* A tight group: splitting would not shrink it, and n is below
             * 4 V(f, k), so all pairs cost less than 2 n V. */
            return join_brute(j, s, n);
        }
        for (size_t lo = 0, hi; lo < n && rc == 0; lo = hi) {
            for (hi = lo + 1; hi < n && ((v[hi] ^ v[lo]) & blocks[b]) == 0; hi++)
                ;
            if (hi - lo > 1)
                rc = join_group(j, v + lo, hi - lo, free_bits & ~blocks[b], depth + 1);
        }
        j->masks[j->nmasks++] = blocks[b];
    }
    j->nmasks = saved;
    return rc;
}

/* Every pair of s[0..n) (values agreeing outside free_bits) within k that
 * meets the masks. */
static int join_group(scan_joiner *j, const uint64_t *s, size_t n, uint64_t free_bits,
                      unsigned depth)
{
    if (n < 2)
        return 0;
    unsigned f = (unsigned)sims_popcount64(free_bits);
    if (n <= LEAF_VALUES || f <= j->k || depth + 1 >= MAX_DEPTH)
        return join_brute(j, s, n);
    if ((double)n >= 4.0 * neighbourhood(f, j->k))
        return join_enumerate(j, s, n, free_bits);
    return join_split(j, s, n, free_bits, depth);
}

/* ---- a table ------------------------------------------------------------ */

int sims_scan_join_table(scan_joiner *j, unsigned t, scan_source_fn src, void *src_ctx,
                         scan_pair_fn emit, void *emit_ctx)
{
    const sims_design *d = j->design;
    const sims_design_table *tab = &d->tables[t];
    j->perm = &tab->permuter;
    j->table = t;
    j->emit = emit;
    j->emit_ctx = emit_ctx;
    /* A pair belongs to the first table whose prefix its flips avoid: here
     * only if they meet the prefix of every earlier table. */
    j->nmasks = 0;
    for (unsigned u = 0; u < t; u++)
        j->masks[j->nmasks++] = sims_permute(j->perm, d->tables[u].prefix_mask);
    uint64_t free_bits = tab->prefix_bits >= 64 ? 0 : UINT64_MAX >> tab->prefix_bits;
    j->group_len = 0;
    int rc = 0;
    for (;;) {
        size_t got = 0;
        rc = src(src_ctx, j->chunk, CHUNK_VALUES, &got);
        if (rc || got == 0)
            break;
        for (size_t i = 0; i < got && rc == 0; i++) {
            uint64_t v = j->chunk[i];
            if (j->group_len > 0) {
                uint64_t first = j->group[0];
                if (v == j->group[j->group_len - 1])
                    continue; /* a dead fingerprint left in two segments */
                if ((v ^ first) & ~free_bits) {
                    if (j->group_len > 1)
                        rc = join_group(j, j->group, j->group_len, free_bits, 0);
                    j->group_len = 0;
                }
            }
            if (rc == 0 && (rc = reserve(j, &j->group, &j->group_cap, j->group_len + 1)) == 0)
                j->group[j->group_len++] = v;
        }
        if (rc)
            break;
    }
    if (rc == 0 && j->group_len > 1)
        rc = join_group(j, j->group, j->group_len, free_bits, 0);
    j->group_len = 0;
    return rc;
}

unsigned sims_scan_parts_for(const sims_design *d, unsigned threads)
{
    unsigned bits = 0, limit = d->min_prefix_bits < 12 ? d->min_prefix_bits : 12;
    while (bits < limit && (1u << bits) < 8u * (threads ? threads : 1))
        bits++;
    return 1u << bits;
}

void sims_scan_part_range(const sims_design *d, unsigned part, unsigned parts, uint64_t *lo,
                          uint64_t *hi)
{
    (void)d;
    unsigned bits = 0;
    while ((1u << bits) < parts)
        bits++;
    if (bits == 0) {
        *lo = 0;
        *hi = UINT64_MAX;
        return;
    }
    *lo = (uint64_t)part << (64 - bits);
    *hi = *lo | (UINT64_MAX >> bits);
}
