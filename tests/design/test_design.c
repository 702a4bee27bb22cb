/* test_design.c: lib/store design and permute: coverage proofs (exhaustive
 * for k <= 4, block-level proof plus sampling above), end-to-end exactness
 * on small sets, permutations against a naive loop, the cost model's
 * choices, the --tables override, and the design record (round trips, the
 * golden example in format/design.md, every corruption and truncation). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "design/design.h"
#include "design/permute.h"
#include "testutil.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------- */

/* Designs are ~100 KiB; the tests keep them on the heap. */
static sims_design *design_new(void)
{
    sims_design *d = malloc(sizeof *d);
    assert_non_null(d);
    return d;
}

static size_t all_candidates(unsigned k, sims_design_candidate *out)
{
    size_t n = 0;
    assert_int_equal(sims_design_candidates(k, out, SIMS_DESIGN_MAX_CANDIDATES, &n), SIMSTORE_OK);
    assert_true(n >= 1 && n <= SIMS_DESIGN_MAX_CANDIDATES);
    return n;
}

/* The trivially correct reference the compiled permutation must match. */
static uint64_t naive_permute(const uint8_t perm[64], uint64_t x)
{
    uint64_t y = 0;
    for (unsigned i = 0; i < 64; i++)
        y |= (x >> perm[i] & 1) << i;
    return y;
}

static uint64_t naive_unpermute(const uint8_t perm[64], uint64_t y)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 64; i++)
        x |= (y >> i & 1) << perm[i];
    return x;
}

/* The bits of x at the positions of mask, in descending order, packed at the
 * low end (what BMI2's pext does). */
static uint64_t naive_extract(uint64_t x, uint64_t mask)
{
    uint64_t out = 0;
    for (unsigned src = 64; src-- > 0;)
        if (mask >> src & 1)
            out = out << 1 | (x >> src & 1);
    return out;
}

/* C(n, r), saturating at UINT64_MAX. */
static uint64_t binom64(unsigned n, unsigned r)
{
    if (r > n)
        return 0;
    if (r > n - r)
        r = n - r;
    uint64_t c = 1;
    for (unsigned i = 1; i <= r; i++) {
        if (c > UINT64_MAX / (n - r + i))
            return UINT64_MAX;
        c = c * (n - r + i) / i;
    }
    return c;
}

static unsigned split_size(unsigned n, unsigned m, unsigned j)
{
    return n / m + (j < n % m);
}

static uint64_t random_k_set(test_rng *rng, unsigned k)
{
    uint64_t set = 0;
    while ((unsigned)__builtin_popcountll(set) < k)
        set |= UINT64_C(1) << test_rng_below(rng, 64);
    return set;
}

/* ---- coverage ----------------------------------------------------------- */

/* Visit every set of exactly `left` more positions below `below` added to
 * `set`; count the ones no table's prefix avoids. */
static uint64_t count_uncovered(const uint64_t *masks, uint32_t n_masks, uint64_t set,
                                unsigned below, unsigned left)
{
    if (left == 0) {
        for (uint32_t t = 0; t < n_masks; t++)
            if (!(masks[t] & set))
                return 0;
        return 1;
    }
    uint64_t uncovered = 0;
    for (unsigned pos = below; pos-- >= left;)
        uncovered += count_uncovered(masks, n_masks, set | UINT64_C(1) << pos, pos, left - 1);
    return uncovered;
}

static uint64_t exhaustive_uncovered(const sims_design *d, unsigned k)
{
    uint64_t masks[SIMS_DESIGN_MAX_TABLES];
    for (uint32_t t = 0; t < d->n_tables; t++)
        masks[t] = d->tables[t].prefix_mask;
    return count_uncovered(masks, d->n_tables, 0, 64, k);
}

/* Every set of exactly k flipped positions (sets of fewer are subsets of
 * one) leaves some table's whole prefix clean, for every candidate design
 * of every k <= 4. */
static void test_design_coverage__exhaustive_k_up_to_4(void **state)
{
    (void)state;
    sims_design *d = design_new();
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    for (unsigned k = 0; k <= 4; k++) {
        size_t n = all_candidates(k, c);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sims_design_build(&c[i].params, d), SIMSTORE_OK);
            uint64_t bad = exhaustive_uncovered(d, k);
            if (bad)
                fprintf(stderr, "k=%u, %u tables: %" PRIu64 " uncovered sets\n", k,
                        (unsigned)d->n_tables, bad);
            assert_true(bad == 0);
        }
        fprintf(stderr, "k=%u: %zu designs x %" PRIu64 " flip sets all covered\n", k, n,
                binom64(64, k));
    }
    free(d);
}

/* The check has teeth: dropping any one table of a design, or asking for
 * one more flip than it was built for, leaves flip sets uncovered. */
static void test_design_coverage__exhaustive_check_detects_gaps(void **state)
{
    (void)state;
    sims_design *d = design_new();
    for (unsigned k = 1; k <= 3; k++) {
        sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
        all_candidates(k, c);
        assert_int_equal(sims_design_build(&c[0].params, d), SIMSTORE_OK);
        assert_true(exhaustive_uncovered(d, k + 1) > 0);
        /* Remove the last table: the sets touching every other table's
         * prefix are now uncovered. */
        d->n_tables--;
        assert_true(exhaustive_uncovered(d, k) > 0);
    }
    free(d);
}

/* Recompute a table's prefix from the block rule, independently of
 * design.c, so that block-level coverage implies bit-level coverage. */
static void check_table_blocks(const sims_design *d, uint32_t t, uint64_t l1_mask[64],
                               uint64_t l2_mask[64])
{
    const sims_design_params *p = &d->params;
    unsigned m1 = (unsigned)p->k + p->r1, m2 = (unsigned)p->k + p->r2;
    const sims_design_table *tab = &d->tables[t];
    unsigned top = 64;
    for (unsigned j = 0; j < m1; j++) {
        unsigned s = split_size(64, m1, j);
        top -= s;
        l1_mask[j] = (s == 64 ? UINT64_MAX : ((UINT64_C(1) << s) - 1)) << top;
    }
    uint64_t mask1 = 0;
    assert_int_equal(__builtin_popcountll(tab->blocks1), p->r1);
    for (unsigned j = 0; j < m1; j++)
        if (tab->blocks1 >> j & 1)
            mask1 |= l1_mask[j];
    uint64_t mask = mask1;
    if (p->levels == 2) {
        unsigned n_rest = 64 - (unsigned)__builtin_popcountll(mask1), at = 0;
        unsigned rest[64], n = 0;
        for (unsigned b = 64; b-- > 0;)
            if (!(mask1 >> b & 1))
                rest[n++] = b;
        assert_int_equal(n, n_rest);
        for (unsigned j = 0; j < m2; j++) {
            l2_mask[j] = 0;
            for (unsigned s = split_size(n_rest, m2, j); s > 0; s--)
                l2_mask[j] |= UINT64_C(1) << rest[at++];
        }
        assert_int_equal(__builtin_popcountll(tab->blocks2), p->r2);
        for (unsigned j = 0; j < m2; j++)
            if (tab->blocks2 >> j & 1)
                mask |= l2_mask[j];
    } else {
        assert_true(tab->blocks2 == 0);
    }
    assert_true(mask == tab->prefix_mask);
    assert_int_equal(tab->prefix_bits, __builtin_popcountll(mask));
}

/* Next subset of {0..m-1} of the same size as set (Gosper's hack), or 0. */
static uint64_t next_subset(uint64_t set, unsigned m)
{
    uint64_t c = set & -set, r = set + c;
    uint64_t next = (((r ^ set) >> 2) / c) | r;
    return (m < 64 && next >> m) ? 0 : next;
}

/* The proof by construction, checked: every table's prefix is the union of
 * its chosen blocks under the splitting rule, and for every set of k
 * touched level-1 blocks some table chooses only untouched ones, and (two
 * levels) for that choice and every k touched level-2 blocks of its rest,
 * some table chooses only untouched level-2 blocks. Since k flips touch at
 * most k blocks at each level, this proves exactness. */
static void check_block_proof(const sims_design *d)
{
    const sims_design_params *p = &d->params;
    unsigned k = p->k, m1 = k + p->r1, m2 = k + p->r2;
    uint64_t l1[64], l2[64];
    for (uint32_t t = 0; t < d->n_tables; t++)
        check_table_blocks(d, t, l1, l2);
    if (k == 0)
        return;
    for (uint64_t touched1 = (UINT64_C(1) << k) - 1; touched1;
         touched1 = next_subset(touched1, m1)) {
        int found = 0;
        for (uint32_t t = 0; t < d->n_tables && !found; t++) {
            if (d->tables[t].blocks1 & touched1)
                continue;
            if (p->levels == 1) {
                found = 1;
                break;
            }
            /* All level-2 touch patterns for this level-1 choice. */
            uint64_t chosen1 = d->tables[t].blocks1;
            int all2 = 1;
            for (uint64_t touched2 = (UINT64_C(1) << k) - 1; touched2 && all2;
                 touched2 = next_subset(touched2, m2)) {
                int found2 = 0;
                for (uint32_t u = 0; u < d->n_tables; u++)
                    if (d->tables[u].blocks1 == chosen1 && !(d->tables[u].blocks2 & touched2))
                        found2 = 1;
                all2 = found2;
            }
            found = all2;
        }
        assert_true(found);
    }
}

/* k = 5..7 by construction (the block-level proof above) plus random flip
 * sets: uniform, and spread one per level-1 block (the worst case). */
static void test_design_coverage__k5_to_7_by_construction_and_sampling(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "test_design_coverage__k5_to_7", 0x5eed0507);
    sims_design *d = design_new();
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    for (unsigned k = 5; k <= 7; k++) {
        size_t n = all_candidates(k, c);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sims_design_build(&c[i].params, d), SIMSTORE_OK);
            check_block_proof(d);
            unsigned m1 = k + d->params.r1;
            uint64_t l1[64], l2[64];
            check_table_blocks(d, 0, l1, l2);
            for (unsigned s = 0; s < 20000; s++) {
                assert_true(sims_design_covering_table(d, random_k_set(&rng, k)) >= 0);
                /* k distinct level-1 blocks, one random bit in each. */
                uint64_t blocks = 0, flips = 0;
                while ((unsigned)__builtin_popcountll(blocks) < k)
                    blocks |= UINT64_C(1) << test_rng_below(&rng, m1);
                for (unsigned j = 0; j < m1; j++) {
                    if (!(blocks >> j & 1))
                        continue;
                    uint64_t bm = l1[j];
                    unsigned pick =
                        (unsigned)test_rng_below(&rng, (uint64_t)__builtin_popcountll(bm));
                    while (pick--)
                        bm &= bm - 1;
                    flips |= bm & -bm;
                }
                assert_true(sims_design_covering_table(d, flips) >= 0);
            }
        }
    }
    free(d);
}

/* ---- beyond k ------------------------------------------------------------ */

/* The fewest prefix bits any table of d has in `flips`. */
static unsigned best_prefix_flips(const sims_design *d, uint64_t flips)
{
    unsigned best = 64;
    for (uint32_t t = 0; t < d->n_tables; t++) {
        unsigned f = (unsigned)__builtin_popcountll(flips & d->tables[t].prefix_mask);
        best = f < best ? f : best;
    }
    return best;
}

/* Every set of exactly `left` more positions below `below` added to set:
 * the largest best_prefix_flips among them. */
static unsigned worst_best_flips(const sims_design *d, uint64_t set, unsigned below, unsigned left)
{
    if (left == 0)
        return best_prefix_flips(d, set);
    unsigned worst = 0;
    for (unsigned b = left - 1; b < below; b++) {
        unsigned w = worst_best_flips(d, set | UINT64_C(1) << b, b, left - 1);
        worst = w > worst ? w : worst;
    }
    return worst;
}

/* k2 flips spread as evenly as they go over the level-1 blocks (one random
 * bit of each block per round, blocks in random order): the adversary the
 * bound is computed for. */
static uint64_t spread_flips(test_rng *rng, const sims_design *d, unsigned k2)
{
    uint64_t l1[64], l2[64];
    check_table_blocks(d, 0, l1, l2);
    unsigned m1 = d->blocks1_count;
    uint64_t set = 0, used[64] = {0};
    unsigned order[64];
    for (unsigned j = 0; j < m1; j++)
        order[j] = j;
    for (unsigned j = m1; j > 1; j--) {
        unsigned x = (unsigned)test_rng_below(rng, j), t = order[j - 1];
        order[j - 1] = order[x];
        order[x] = t;
    }
    for (unsigned i = 0; i < k2; i++) {
        unsigned j = order[i % m1];
        uint64_t free_bits = l1[j] & ~used[j];
        if (!free_bits)
            continue;
        unsigned pick = (unsigned)test_rng_below(rng, (uint64_t)__builtin_popcountll(free_bits));
        while (pick--)
            free_bits &= free_bits - 1;
        used[j] |= free_bits & -free_bits;
        set |= free_bits & -free_bits;
    }
    return set;
}

/* A query at distance k2 above the design's k finds every fingerprint when
 * each table is probed at every prefix within sims_design_prefix_flips bits
 * (format/design.md, "Beyond k"): so for every set of k2 flipped positions
 * some table's prefix holds at most that many. Exhaustively for the k = 3
 * reference designs up to k2 = 5, by sampling (random and evenly spread
 * sets) for every candidate of every k; for one-level designs the even
 * spread meets the bound, so it is not looser than it need be there. */
static void test_design_beyond__prefix_flips_bound_holds(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "test_design_beyond", 0xbe7011d);
    sims_design *d = design_new();
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        size_t n = all_candidates(k, c);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sims_design_build(&c[i].params, d), SIMSTORE_OK);
            for (unsigned k2 = 0; k2 <= k; k2++) {
                assert_int_equal(sims_design_prefix_flips(d, k2), 0);
                assert_true(sims_design_probes(d, k2) == d->n_tables);
            }
            for (unsigned k2 = k + 1; k2 <= SIMS_DESIGN_MAX_K; k2++) {
                unsigned bound = sims_design_prefix_flips(d, k2);
                assert_true(bound >= 1 && bound <= k2);
                unsigned seen = 0;
                for (unsigned s = 0; s < 600; s++) {
                    uint64_t set = (s & 1) ? random_k_set(&rng, k2) : spread_flips(&rng, d, k2);
                    unsigned f = best_prefix_flips(d, set);
                    if (f > bound)
                        fprintf(stderr, "k=%u tables=%u k2=%u: %016llx leaves %u > %u\n", k,
                                d->n_tables, k2, (unsigned long long)set, f, bound);
                    assert_true(f <= bound);
                    seen = f > seen ? f : seen;
                }
                if (d->params.levels == 1)
                    assert_int_equal(seen, bound);
                /* Probes: the prefixes within the bound, summed over tables. */
                uint64_t want = 0;
                for (uint32_t t = 0; t < d->n_tables; t++) {
                    uint64_t cnk = 1;
                    for (unsigned f = 0; f <= bound; f++) {
                        want += cnk;
                        cnk = cnk * (d->tables[t].prefix_bits - f) / (f + 1);
                    }
                }
                assert_true(sims_design_probes(d, k2) == want);
            }
        }
    }
    /* Exhaustive: every set of 4 and of 5 positions, both k = 3 reference
     * designs of one level (4 and 10 tables). */
    unsigned tables[] = {4, 10};
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(sims_design_with_tables(3, tables[i], d), SIMSTORE_OK);
        for (unsigned k2 = 4; k2 <= 5; k2++)
            assert_int_equal(worst_best_flips(d, 0, 64, k2), sims_design_prefix_flips(d, k2));
    }
    free(d);
}

/* Every construction the limits allow (not only the candidates) builds,
 * matches its own block proof, and compiles into at most 13 moves, so a
 * decoder never rejects a valid record for want of permuter room. */
static void test_design_build__every_valid_parameter_set(void **state)
{
    (void)state;
    sims_design *d = design_new();
    unsigned built = 0, max_moves = 0;
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        for (unsigned levels = 1; levels <= 2; levels++) {
            for (unsigned r1 = 1; k + r1 <= 64; r1++) {
                for (unsigned r2 = levels == 1 ? 0 : 1; r2 <= (levels == 1 ? 0u : 64u); r2++) {
                    sims_design_params p = {(uint8_t)k, (uint8_t)levels, (uint8_t)r1, (uint8_t)r2};
                    uint64_t t1 = binom64(k + r1, r1);
                    uint64_t t2 = levels == 2 ? binom64(k + r2, r2) : 1;
                    unsigned p1_max = 0;
                    for (unsigned j = 0; j < r1; j++)
                        p1_max += split_size(64, k + r1, j);
                    int valid = t1 <= SIMS_DESIGN_MAX_TABLES && t2 <= SIMS_DESIGN_MAX_TABLES &&
                                t1 * t2 <= SIMS_DESIGN_MAX_TABLES &&
                                (levels == 1 || k + r2 <= 64 - p1_max);
                    uint64_t t = valid ? t1 * t2 : 0;
                    int rc = sims_design_build(&p, d);
                    if (!valid) {
                        assert_int_equal(rc, SIMSTORE_EINVAL);
                        continue;
                    }
                    assert_int_equal(rc, SIMSTORE_OK);
                    assert_int_equal(d->n_tables, t);
                    for (uint32_t i = 0; i < d->n_tables; i++)
                        if (d->tables[i].permuter.n_moves > max_moves)
                            max_moves = d->tables[i].permuter.n_moves;
                    if (t <= 64)
                        check_block_proof(d);
                    built++;
                }
            }
        }
    }
    fprintf(stderr, "%u valid constructions, at most %u moves per table\n", built, max_moves);
    assert_true(max_moves <= 13);
    free(d);
}

static void test_design_build__rejects_invalid_parameters(void **state)
{
    (void)state;
    sims_design *d = design_new();
    static const struct {
        sims_design_params p;
        const char *word;
    } bad[] = {
        {{8, 1, 1, 0}, "k = 8"},          {{3, 0, 1, 0}, "levels"},  {{3, 3, 1, 1}, "levels"},
        {{3, 1, 0, 0}, "r1 = 0"},         {{3, 1, 1, 1}, "r2 = 1"},  {{3, 2, 1, 0}, "r2 = 0"},
        {{3, 1, 62, 0}, "blocks exceed"}, {{3, 1, 10, 0}, "tables"}, {{0, 2, 1, 1}, "level 2"},
        {{7, 2, 2, 1}, "tables"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(sims_design_build(&bad[i].p, d), SIMSTORE_EINVAL);
        if (!strstr(simstore_last_error(), bad[i].word))
            fprintf(stderr, "case %zu: message \"%s\" lacks \"%s\"\n", i, simstore_last_error(),
                    bad[i].word);
        assert_non_null(strstr(simstore_last_error(), bad[i].word));
    }
    free(d);
}

/* ---- candidates ----------------------------------------------------------- */

static void test_design_candidates__k3_reference_designs(void **state)
{
    (void)state;
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    size_t n = all_candidates(3, c);
    /* Manku et al.'s k = 3 designs, in order. */
    static const unsigned want[][3] = {{4, 16, 16}, {10, 25, 26}, {16, 28, 28}, {20, 31, 33}};
    assert_true(n >= 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(c[i].n_tables, want[i][0]);
        assert_int_equal(c[i].min_prefix_bits, want[i][1]);
        assert_int_equal(c[i].max_prefix_bits, want[i][2]);
    }
    assert_int_equal(c[2].params.levels, 2);
    assert_int_equal(c[2].params.r1, 1);
    assert_int_equal(c[2].params.r2, 1);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "k=3 candidate: %u tables, levels %u, r1 %u, r2 %u, p %u..%u\n",
                (unsigned)c[i].n_tables, c[i].params.levels, c[i].params.r1, c[i].params.r2,
                c[i].min_prefix_bits, c[i].max_prefix_bits);
}

static void test_design_candidates__sorted_pareto_and_consistent(void **state)
{
    (void)state;
    sims_design *d = design_new();
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        size_t n = all_candidates(k, c);
        fprintf(stderr, "k=%u:", k);
        for (size_t i = 0; i < n; i++) {
            fprintf(stderr, " %u(p%u..%u)", (unsigned)c[i].n_tables, c[i].min_prefix_bits,
                    c[i].max_prefix_bits);
            if (i > 0) {
                assert_true(c[i].n_tables > c[i - 1].n_tables);
                assert_true(c[i].range_fraction < c[i - 1].range_fraction);
            }
            assert_true(c[i].n_tables <= SIMS_DESIGN_MAX_TABLES);
            assert_true(k == 0 || c[i].min_prefix_bits <= SIMS_DESIGN_USEFUL_PREFIX_BITS);
            assert_int_equal(sims_design_build(&c[i].params, d), SIMSTORE_OK);
            assert_int_equal(d->n_tables, c[i].n_tables);
            assert_int_equal(d->min_prefix_bits, c[i].min_prefix_bits);
            assert_int_equal(d->max_prefix_bits, c[i].max_prefix_bits);
            double rf = 0;
            for (uint32_t t = 0; t < d->n_tables; t++)
                rf += ldexp(1.0, -d->tables[t].prefix_bits);
            assert_true(rf == c[i].range_fraction);
        }
        fprintf(stderr, "\n");
    }
    /* k = 0: one identity table with p = 64. */
    size_t n = all_candidates(0, c);
    assert_int_equal(n, 1);
    assert_int_equal(sims_design_build(&c[0].params, d), SIMSTORE_OK);
    assert_int_equal(d->n_tables, 1);
    assert_int_equal(d->tables[0].prefix_bits, 64);
    for (unsigned i = 0; i < 64; i++)
        assert_int_equal(d->tables[0].perm[i], i);
    free(d);
}

static void test_design_candidates__cap_and_errors(void **state)
{
    (void)state;
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    size_t n = 99;
    assert_int_equal(sims_design_candidates(3, NULL, 0, &n), SIMSTORE_EFULL);
    assert_int_equal(n, 10);
    memset(c, 0, sizeof c);
    assert_int_equal(sims_design_candidates(3, c, 2, &n), SIMSTORE_EFULL);
    assert_int_equal(n, 10);
    assert_int_equal(c[1].n_tables, 10);
    assert_int_equal(c[2].n_tables, 0); /* untouched beyond cap */
    assert_int_equal(sims_design_candidates(8, c, SIMS_DESIGN_MAX_CANDIDATES, &n), SIMSTORE_EINVAL);
    assert_int_equal(n, 0);
}

/* ---- permutations --------------------------------------------------------- */

static void check_permuter(const sims_permuter *pm, const uint8_t perm[64], test_rng *rng)
{
    static const uint64_t special[] = {0,
                                       UINT64_MAX,
                                       1,
                                       UINT64_C(1) << 63,
                                       UINT64_C(0x0123456789ABCDEF),
                                       UINT64_C(0xAAAAAAAAAAAAAAAA)};
    for (unsigned i = 0; i < 64 + 6; i++) {
        uint64_t x = i < 6 ? special[i] : test_rng_next(rng);
        uint64_t y = sims_permute(pm, x);
        assert_true(y == naive_permute(perm, x));
        assert_true(sims_unpermute(pm, y) == x);
        assert_true(sims_unpermute(pm, x) == naive_unpermute(perm, x));
        assert_true(sims_permute(pm, sims_unpermute(pm, x)) == x);
    }
    /* Each single bit goes where perm says. */
    for (unsigned i = 0; i < 64; i++)
        assert_true(sims_permute(pm, UINT64_C(1) << perm[i]) == UINT64_C(1) << i);
}

static void test_design_permute__matches_naive_for_every_table(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "test_design_permute__matches_naive", 0x9e3779b9);
    sims_design *d = design_new();
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    unsigned tables = 0;
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        size_t n = all_candidates(k, c);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sims_design_build(&c[i].params, d), SIMSTORE_OK);
            for (uint32_t t = 0; t < d->n_tables; t++) {
                const sims_design_table *tab = &d->tables[t];
                check_permuter(&tab->permuter, tab->perm, &rng);
                assert_true(tab->permuter.n_moves <= 9);
                /* The prefix is the mask's bits in original order, then the
                 * rest in original order: a stable partition. */
                unsigned p = tab->prefix_bits;
                for (unsigned s = 0; s < 16; s++) {
                    uint64_t x = test_rng_next(&rng);
                    uint64_t y = sims_permute(&tab->permuter, x);
                    uint64_t top = p == 64 ? y : y >> (64 - p);
                    assert_true(top == naive_extract(x, tab->prefix_mask));
                    uint64_t low = p == 64 ? 0 : y & (UINT64_MAX >> p);
                    assert_true(low == naive_extract(x, ~tab->prefix_mask));
                }
                tables++;
            }
        }
    }
    fprintf(stderr, "%u tables checked against the naive permutation\n", tables);
    free(d);
}

/* Random block permutations (cut into up to 8 blocks, shuffled) compile and
 * agree with the naive loop; non-permutations and permutations needing too
 * many moves are refused. */
static void test_design_permute__arbitrary_block_permutations(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "test_design_permute__arbitrary", 0xb10c);
    for (unsigned round = 0; round < 2000; round++) {
        unsigned n_blocks = 1 + (unsigned)test_rng_below(&rng, 8);
        unsigned cut[9] = {0};
        /* Distinct cut points 0 < c1 < ... < 64. */
        uint64_t cuts = 0;
        while ((unsigned)__builtin_popcountll(cuts) < n_blocks - 1)
            cuts |= UINT64_C(1) << (1 + test_rng_below(&rng, 63));
        unsigned nc = 0;
        for (unsigned b = 1; b < 64; b++)
            if (cuts >> b & 1)
                cut[++nc] = b;
        cut[++nc] = 64;
        unsigned order[8];
        for (unsigned i = 0; i < n_blocks; i++)
            order[i] = i;
        for (unsigned i = n_blocks; i > 1; i--) {
            unsigned j = (unsigned)test_rng_below(&rng, i);
            unsigned tmp = order[i - 1];
            order[i - 1] = order[j];
            order[j] = tmp;
        }
        uint8_t perm[64];
        unsigned out = 0;
        for (unsigned i = 0; i < n_blocks; i++)
            for (unsigned b = cut[order[i]]; b < cut[order[i] + 1]; b++)
                perm[out++] = (uint8_t)b;
        sims_permuter pm;
        assert_int_equal(sims_permuter_init(&pm, perm), SIMSTORE_OK);
        assert_true(pm.n_moves <= n_blocks);
        check_permuter(&pm, perm, &rng);
    }

    uint8_t perm[64];
    sims_permuter pm;
    for (unsigned i = 0; i < 64; i++)
        perm[i] = (uint8_t)(63 - i); /* bit reversal: 64 distinct displacements */
    assert_int_equal(sims_permuter_init(&pm, perm), SIMSTORE_EINVAL);
    assert_int_equal(pm.n_moves, 0);
    for (unsigned i = 0; i < 64; i++)
        perm[i] = (uint8_t)i;
    perm[5] = 6;
    assert_int_equal(sims_permuter_init(&pm, perm), SIMSTORE_EINVAL);
    perm[5] = 64;
    assert_int_equal(sims_permuter_init(&pm, perm), SIMSTORE_EINVAL);
    perm[5] = 5;
    assert_int_equal(sims_permuter_init(&pm, perm), SIMSTORE_OK);
    assert_int_equal(pm.n_moves, 1);
}

static void test_design_probe__range_and_examples(void **state)
{
    (void)state;
    sims_design *d = design_new();
    uint64_t lo, hi;
    assert_int_equal(sims_design_with_tables(3, 4, d), SIMSTORE_OK);
    /* The example in format/design.md. */
    assert_true(sims_permute(&d->tables[3].permuter, UINT64_C(0x0123456789ABCDEF)) ==
                UINT64_C(0xCDEF0123456789AB));
    sims_design_probe(d, 3, UINT64_C(0x0123456789ABCDEF), &lo, &hi);
    assert_true(lo == UINT64_C(0xCDEF000000000000));
    assert_true(hi == UINT64_C(0xCDEFFFFFFFFFFFFF));
    sims_design_probe(d, 0, UINT64_C(0x0123456789ABCDEF), &lo, &hi);
    assert_true(lo == UINT64_C(0x0123000000000000));
    assert_true(hi == UINT64_C(0x0123FFFFFFFFFFFF));

    /* k = 0: p = 64, the probe is the query itself. */
    assert_int_equal(sims_design_with_tables(0, 1, d), SIMSTORE_OK);
    sims_design_probe(d, 0, UINT64_C(0xFEEDFACECAFEBEEF), &lo, &hi);
    assert_true(lo == UINT64_C(0xFEEDFACECAFEBEEF) && hi == lo);

    /* For every table: lo and hi share P(q)'s prefix, low bits clear/set. */
    test_rng rng;
    test_rng_init(&rng, "test_design_probe", 77);
    assert_int_equal(sims_design_with_tables(3, 16, d), SIMSTORE_OK);
    for (uint32_t t = 0; t < d->n_tables; t++) {
        uint64_t q = test_rng_next(&rng);
        uint64_t pq = sims_permute(&d->tables[t].permuter, q);
        sims_design_probe(d, t, q, &lo, &hi);
        assert_true(lo <= pq && pq <= hi);
        assert_true(hi - lo == (UINT64_MAX >> 28));
        assert_true(lo >> 36 == pq >> 36);
    }
    free(d);
}

/* ---- end-to-end exactness -------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t flip_random_bits(test_rng *rng, uint64_t x, unsigned n)
{
    return x ^ random_k_set(rng, n);
}

/* A small store simulated with sorted arrays: for random queries with planted
 * neighbours at distances 0..k+2 (and fingerprints sharing a table prefix
 * with the query but far away), every stored x within k is found through
 * some table's probe range, and the probe-and-filter answer equals a
 * brute-force scan. */
static void test_design_exact__end_to_end_small_sets(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "test_design_exact__end_to_end", 0xe2e);
    enum { N_QUERIES = 24, PER_QUERY = 14, N_RANDOM = 200 };
    enum { N_MAX = N_QUERIES * PER_QUERY + N_RANDOM };
    sims_design *d = design_new();
    uint64_t *stored = malloc(N_MAX * sizeof *stored);
    uint64_t *sorted = malloc((size_t)SIMS_DESIGN_MAX_TABLES * N_MAX * sizeof *sorted);
    uint64_t *found = malloc((size_t)SIMS_DESIGN_MAX_TABLES * N_MAX * sizeof *found);
    assert_non_null(stored);
    assert_non_null(sorted);
    assert_non_null(found);
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    unsigned checked = 0;
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        size_t n_cand = all_candidates(k, c);
        for (size_t ci = 0; ci < n_cand; ci++) {
            assert_int_equal(sims_design_build(&c[ci].params, d), SIMSTORE_OK);
            uint64_t queries[N_QUERIES];
            size_t n = 0;
            for (unsigned qi = 0; qi < N_QUERIES; qi++) {
                uint64_t q = test_rng_next(&rng);
                queries[qi] = q;
                for (unsigned j = 0; j < PER_QUERY - 2; j++)
                    stored[n++] = flip_random_bits(&rng, q, j % (k + 3));
                /* Same prefix as q in a random table, random elsewhere. */
                const sims_design_table *tab = &d->tables[test_rng_below(&rng, d->n_tables)];
                uint64_t far = (q & tab->prefix_mask) | (test_rng_next(&rng) & ~tab->prefix_mask);
                stored[n++] = far;
                stored[n++] = q ^ UINT64_MAX;
            }
            for (unsigned j = 0; j < N_RANDOM; j++)
                stored[n++] = test_rng_next(&rng);
            for (uint32_t t = 0; t < d->n_tables; t++) {
                uint64_t *col = sorted + (size_t)t * N_MAX;
                for (size_t i = 0; i < n; i++)
                    col[i] = sims_permute(&d->tables[t].permuter, stored[i]);
                qsort(col, n, sizeof *col, cmp_u64);
            }
            for (unsigned qi = 0; qi < N_QUERIES; qi++) {
                uint64_t q = queries[qi];
                /* Every near x lies in some table's probe range. */
                for (size_t i = 0; i < n; i++) {
                    if (simstore_distance(q, stored[i]) > k)
                        continue;
                    int in_some = 0;
                    for (uint32_t t = 0; t < d->n_tables && !in_some; t++) {
                        uint64_t lo, hi, px = sims_permute(&d->tables[t].permuter, stored[i]);
                        sims_design_probe(d, t, q, &lo, &hi);
                        in_some = lo <= px && px <= hi;
                    }
                    assert_true(in_some);
                }
                /* Probe, unpermute, filter, dedupe == brute force. A near x
                 * may be found once per table. */
                uint64_t expect[N_MAX];
                size_t n_found = 0, n_expect = 0;
                for (uint32_t t = 0; t < d->n_tables; t++) {
                    const uint64_t *col = sorted + (size_t)t * N_MAX;
                    uint64_t lo, hi;
                    sims_design_probe(d, t, q, &lo, &hi);
                    size_t a = 0, b = n;
                    while (a < b) {
                        size_t mid = a + (b - a) / 2;
                        if (col[mid] < lo)
                            a = mid + 1;
                        else
                            b = mid;
                    }
                    for (; a < n && col[a] <= hi; a++) {
                        uint64_t x = sims_unpermute(&d->tables[t].permuter, col[a]);
                        if (simstore_distance(q, x) <= k)
                            found[n_found++] = x;
                    }
                }
                for (size_t i = 0; i < n; i++)
                    if (simstore_distance(q, stored[i]) <= k)
                        expect[n_expect++] = stored[i];
                qsort(found, n_found, sizeof *found, cmp_u64);
                qsort(expect, n_expect, sizeof *expect, cmp_u64);
                size_t u = 0, v = 0;
                for (size_t i = 0; i < n_found; i++)
                    if (i == 0 || found[i] != found[i - 1])
                        found[u++] = found[i];
                for (size_t i = 0; i < n_expect; i++)
                    if (i == 0 || expect[i] != expect[i - 1])
                        expect[v++] = expect[i];
                assert_int_equal(u, v);
                assert_memory_equal(found, expect, u * sizeof *found);
                assert_true(v >= 1); /* q itself was planted (distance 0) */
                checked++;
            }
        }
    }
    fprintf(stderr, "%u queries answered exactly across all candidate designs\n", checked);
    free(found);
    free(sorted);
    free(stored);
    free(d);
}

/* ---- the cost model -------------------------------------------------------- */

static unsigned chosen_tables(unsigned k, uint64_t n, size_t block_bytes, const sims_cost_model *m,
                              sims_design *d)
{
    assert_int_equal(sims_design_choose(k, n, sims_design_fps_per_block(n, block_bytes), m, d),
                     SIMSTORE_OK);
    return d->n_tables;
}

static void test_design_cost__k3_choices(void **state)
{
    (void)state;
    sims_design *d = design_new();
    static const unsigned log2n[] = {10, 20, 23, 26, 30};
    unsigned got[5];
    char *text = malloc(8192);
    assert_non_null(text);
    for (unsigned i = 0; i < 5; i++) {
        uint64_t n = UINT64_C(1) << log2n[i];
        double f = sims_design_fps_per_block(n, 1024);
        int len = sims_design_explain(3, n, f, NULL, text, 8192);
        assert_true(len > 0 && len < 8192);
        assert_non_null(strstr(text, "<- chosen"));
        printf("--- N = 2^%u\n%s", log2n[i], text);
        got[i] = chosen_tables(3, n, 1024, NULL, d);
        char desc[160];
        sims_design_describe(d, desc, sizeof desc);
        printf("k=3 N=2^%u: chose %s\n", log2n[i], desc);
    }
    assert_int_equal(got[2], 4);               /* 2^23: Manku's 4 tables, p = 16 */
    assert_true(got[3] > got[2]);              /* more tables at 2^26 ... */
    assert_true(got[3] >= 10 && got[3] <= 20); /* ... around 10 */
    assert_int_equal(got[0], 4);
    for (unsigned i = 1; i < 5; i++)
        assert_true(got[i] >= got[i - 1]);
    /* At 2^23 the choice is 4 tables of p = 16. */
    chosen_tables(3, UINT64_C(1) << 23, 1024, NULL, d);
    assert_int_equal(d->min_prefix_bits, 16);
    assert_int_equal(d->max_prefix_bits, 16);

    /* explain follows snprintf: a short buffer is terminated and the full
     * length is still reported. */
    char small[16];
    int full = sims_design_explain(3, 1000, 100.0, NULL, NULL, 0);
    assert_int_equal(sims_design_explain(3, 1000, 100.0, NULL, small, sizeof small), full);
    assert_int_equal(strlen(small), sizeof small - 1);
    free(text);
    free(d);
}

/* Never more tables at smaller N: for every k and block size, the chosen
 * table count is non-decreasing in N. */
static void test_design_cost__monotone_in_n(void **state)
{
    (void)state;
    sims_design *d = design_new();
    static const size_t block_bytes[] = {256, 1024, 4096};
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        for (size_t b = 0; b < 3; b++) {
            unsigned last = 0;
            fprintf(stderr, "k=%u B=%zu:", k, block_bytes[b]);
            for (unsigned e = 0; e <= 40; e++) {
                unsigned t = chosen_tables(k, UINT64_C(1) << e, block_bytes[b], NULL, d);
                if (t != last)
                    fprintf(stderr, " 2^%u->%u", e, t);
                assert_true(t >= last);
                last = t;
            }
            fprintf(stderr, "\n");
        }
    }
    free(d);
}

static void test_design_cost__model_parameters(void **state)
{
    (void)state;
    sims_design *d = design_new();
    uint64_t n = UINT64_C(1) << 30;
    double f = sims_design_fps_per_block(n, 1024);
    /* A table budget is honoured. */
    sims_cost_model m = SIMS_COST_MODEL_DEFAULT;
    m.max_tables = 4;
    assert_int_equal(sims_design_choose(3, n, f, &m, d), SIMSTORE_OK);
    assert_int_equal(d->n_tables, 4);
    m.max_tables = 3;
    assert_int_equal(sims_design_choose(3, n, f, &m, d), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "4, 10, 16"));
    /* Pricing space heavily moves the choice to fewer tables. */
    sims_cost_model space = SIMS_COST_MODEL_DEFAULT;
    unsigned base = chosen_tables(3, n, 1024, NULL, d);
    space.space_ns_per_byte = 1e6;
    assert_true(chosen_tables(3, n, 1024, &space, d) < base);
    /* Free decoding: the probe count alone decides, so the fewest tables. */
    sims_cost_model probe_only = {100.0, 0.0, 0.0, 0};
    assert_int_equal(chosen_tables(3, n, 1024, &probe_only, d), 4);
    /* Expensive decoding favours more tables. */
    sims_cost_model decode_heavy = {0.0, 100.0, 0.0, 0};
    assert_true(chosen_tables(3, UINT64_C(1) << 34, 1024, &decode_heavy, d) > base);
    /* Argument checks. */
    assert_int_equal(sims_design_choose(3, n, 0.0, NULL, d), SIMSTORE_EINVAL);
    assert_int_equal(sims_design_choose(3, n, -1.0, NULL, d), SIMSTORE_EINVAL);
    assert_int_equal(sims_design_choose(3, n, NAN, NULL, d), SIMSTORE_EINVAL);
    assert_int_equal(sims_design_choose(3, n, INFINITY, NULL, d), SIMSTORE_EINVAL);
    assert_int_equal(sims_design_choose(8, n, f, NULL, d), SIMSTORE_EINVAL);
    sims_cost_model neg = {-1.0, 4.0, 0.0, 0};
    assert_int_equal(sims_design_choose(3, n, f, &neg, d), SIMSTORE_EINVAL);
    assert_true(sims_design_explain(3, n, 0.0, NULL, NULL, 0) == SIMSTORE_EINVAL);
    /* N = 0 and N below one block are fine. */
    assert_int_equal(chosen_tables(3, 0, 1024, NULL, d), 4);
    assert_int_equal(chosen_tables(7, 5, 1024, NULL, d), 8);
    /* The fill estimate: 1 KiB blocks at N = 2^23 hold ~193 fingerprints. */
    assert_true(fabs(sims_design_fps_per_block(UINT64_C(1) << 23, 1024) - 8192.0 / 42.5) < 1e-9);
    free(d);
}

/* ---- the --tables override -------------------------------------------------- */

static void test_design_tables__override_and_error(void **state)
{
    (void)state;
    sims_design *d = design_new();
    assert_int_equal(sims_design_with_tables(3, 16, d), SIMSTORE_OK);
    assert_int_equal(d->n_tables, 16);
    assert_int_equal(d->params.levels, 2);
    assert_int_equal(d->min_prefix_bits, 28);
    assert_int_equal(d->max_prefix_bits, 28);
    assert_int_equal(sims_design_with_tables(3, 10, d), SIMSTORE_OK);
    assert_int_equal(d->min_prefix_bits, 25);
    assert_int_equal(d->max_prefix_bits, 26);
    assert_int_equal(sims_design_with_tables(0, 1, d), SIMSTORE_OK);

    assert_int_equal(sims_design_with_tables(3, 12, d), SIMSTORE_EINVAL);
    fprintf(stderr, "override error: %s\n", simstore_last_error());
    assert_non_null(strstr(simstore_last_error(), "12 tables"));
    assert_non_null(strstr(simstore_last_error(), "4, 10, 16, 20, 35, 56, 84, 120, 165, 220"));
    assert_int_equal(sims_design_with_tables(3, 0, d), SIMSTORE_EINVAL);
    assert_int_equal(sims_design_with_tables(0, 2, d), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "available table counts: 1"));
    assert_int_equal(sims_design_with_tables(8, 4, d), SIMSTORE_EINVAL);
    /* A successful search leaves no stale message behind (it probes
     * invalid constructions internally). */
    sims_error_clear();
    assert_int_equal(sims_design_with_tables(1, 4, d), SIMSTORE_OK);
    assert_string_equal(simstore_last_error(), "");
    /* Every listed count builds. */
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        size_t n = all_candidates(k, c);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sims_design_with_tables(k, c[i].n_tables, d), SIMSTORE_OK);
            assert_int_equal(d->n_tables, c[i].n_tables);
        }
    }
    free(d);
}

/* ---- descriptions ----------------------------------------------------------- */

static void test_design_describe__strings(void **state)
{
    (void)state;
    sims_design *d = design_new();
    char buf[200];
    assert_int_equal(sims_design_with_tables(3, 4, d), SIMSTORE_OK);
    sims_design_describe(d, buf, sizeof buf);
    assert_string_equal(buf, "k=3: 1 level (4 blocks choose 1), 4 tables, prefix 16 bits");
    sims_design_describe_table(d, 1, buf, sizeof buf);
    assert_string_equal(buf, "blocks 1: bits 47..32 (p=16)");
    assert_int_equal(sims_design_with_tables(3, 16, d), SIMSTORE_OK);
    sims_design_describe(d, buf, sizeof buf);
    assert_string_equal(
        buf, "k=3: 2 levels (4 blocks choose 1, then 4 choose 1), 16 tables, prefix 28 bits");
    sims_design_describe_table(d, 1, buf, sizeof buf);
    assert_string_equal(buf, "blocks 0 | 1: bits 63..48 35..24 (p=28)");
    sims_design_describe_table(d, 5, buf, sizeof buf);
    assert_string_equal(buf, "blocks 1 | 1: bits 51..24 (p=28)");
    assert_int_equal(sims_design_with_tables(3, 10, d), SIMSTORE_OK);
    sims_design_describe(d, buf, sizeof buf);
    assert_string_equal(buf, "k=3: 1 level (5 blocks choose 2), 10 tables, prefix 25..26 bits");
    sims_design_describe_table(d, 1, buf, sizeof buf);
    assert_string_equal(buf, "blocks 0,2: bits 63..51 37..25 (p=26)");
    assert_int_equal(sims_design_with_tables(0, 1, d), SIMSTORE_OK);
    sims_design_describe(d, buf, sizeof buf);
    assert_string_equal(buf, "k=0: 1 level (1 block choose 1), 1 table, prefix 64 bits");
    sims_design_describe_table(d, 0, buf, sizeof buf);
    assert_string_equal(buf, "blocks 0: bits 63..0 (p=64)");
    /* snprintf conventions. */
    char tiny[8];
    int need = sims_design_describe_table(d, 0, NULL, 0);
    assert_int_equal(sims_design_describe_table(d, 0, tiny, sizeof tiny), need);
    assert_string_equal(tiny, "blocks ");
    sims_design_describe_table(d, 7, buf, sizeof buf);
    assert_string_equal(buf, "no table 7");
    free(d);
}

/* ---- the record -------------------------------------------------------------- */

static size_t encode(const sims_design *d, uint8_t *buf)
{
    size_t len = 0;
    assert_int_equal(sims_design_encode(d, buf, SIMS_DESIGN_RECORD_MAX_BYTES, &len), SIMSTORE_OK);
    assert_int_equal(len, sims_design_record_bytes(d));
    return len;
}

static void test_design_record__round_trip_every_candidate(void **state)
{
    (void)state;
    sims_design *d = design_new(), *e = design_new();
    uint8_t *buf = malloc(SIMS_DESIGN_RECORD_MAX_BYTES),
            *again = malloc(SIMS_DESIGN_RECORD_MAX_BYTES);
    assert_non_null(buf);
    assert_non_null(again);
    sims_design_candidate c[SIMS_DESIGN_MAX_CANDIDATES];
    for (unsigned k = 0; k <= SIMS_DESIGN_MAX_K; k++) {
        size_t n = all_candidates(k, c);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sims_design_build(&c[i].params, d), SIMSTORE_OK);
            size_t len = encode(d, buf);
            assert_int_equal(len, 16 + 66 * (size_t)d->n_tables + 8);
            memset(e, 0xA5, sizeof *e);
            assert_int_equal(sims_design_decode(buf, len, e), SIMSTORE_OK);
            assert_true(sims_design_equal(d, e));
            /* The decoded design works: same permuters. */
            for (uint32_t t = 0; t < e->n_tables; t++)
                assert_true(sims_permute(&e->tables[t].permuter, UINT64_C(0x0123456789ABCDEF)) ==
                            sims_permute(&d->tables[t].permuter, UINT64_C(0x0123456789ABCDEF)));
            assert_int_equal(encode(e, again), len);
            assert_memory_equal(buf, again, len);
        }
    }
    /* Too little room. */
    size_t len = 0;
    assert_int_equal(sims_design_with_tables(3, 4, d), SIMSTORE_OK);
    assert_int_equal(sims_design_encode(d, buf, 287, &len), SIMSTORE_EFULL);
    assert_int_equal(sims_design_encode(d, buf, 288, &len), SIMSTORE_OK);
    free(buf);
    free(again);
    free(d);
    free(e);
}

/* The hex dump under "<!-- golden-record" in format/design.md. */
static size_t golden_from_doc(uint8_t *out, size_t cap)
{
    char *path = test_path(test_source_dir(), "format/design.md");
    assert_non_null(path);
    size_t size = 0;
    uint8_t *doc = test_read_file(path, &size);
    if (!doc)
        fprintf(stderr, "cannot read %s (set SIMSTORE_SOURCE_DIR)\n", path);
    assert_non_null(doc);
    free(path);
    char *text = malloc(size + 1);
    assert_non_null(text);
    memcpy(text, doc, size);
    text[size] = '\0';
    free(doc);
    char *at = strstr(text, "<!-- golden-record");
    assert_non_null(at);
    at = strstr(at, "```\n");
    assert_non_null(at);
    at += 4;
    char *end = strstr(at, "```");
    assert_non_null(end);
    size_t n = 0;
    while (at < end) {
        char *line_end = strchr(at, '\n');
        assert_non_null(line_end);
        char *colon = strchr(at, ':');
        assert_true(colon && colon < line_end);
        unsigned long offset = strtoul(at, NULL, 16);
        assert_int_equal(offset, n);
        char *p = colon + 1;
        while (p < line_end) {
            while (p < line_end && *p == ' ')
                p++;
            if (p >= line_end)
                break;
            char hex[3] = {p[0], p[1], 0};
            char *stop;
            unsigned long v = strtoul(hex, &stop, 16);
            assert_true(stop == hex + 2);
            assert_true(n < cap);
            out[n++] = (uint8_t)v;
            p += 2;
        }
        at = line_end + 1;
    }
    free(text);
    return n;
}

static void test_design_record__golden_example(void **state)
{
    (void)state;
    uint8_t golden[512], buf[512];
    size_t n = golden_from_doc(golden, sizeof golden);
    assert_int_equal(n, 288);
    sims_design *d = design_new(), *e = design_new();
    assert_int_equal(sims_design_choose(3, UINT64_C(1) << 23,
                                        sims_design_fps_per_block(UINT64_C(1) << 23, 1024), NULL,
                                        d),
                     SIMSTORE_OK);
    size_t len = 0;
    assert_int_equal(sims_design_encode(d, buf, sizeof buf, &len), SIMSTORE_OK);
    assert_int_equal(len, n);
    assert_memory_equal(buf, golden, n);
    assert_int_equal(sims_design_decode(golden, n, e), SIMSTORE_OK);
    assert_true(sims_design_equal(d, e));
    /* The checksum the document states. */
    assert_true(le_load64(golden + 280) == UINT64_C(0x63EDC41C40F5DA70));
    assert_true(sims_xxh3_64(golden, 280, UINT64_C(0x53494D444553474E)) ==
                UINT64_C(0x63EDC41C40F5DA70));
    free(d);
    free(e);
}

static void fix_checksum(uint8_t *buf, size_t len)
{
    le_store64(buf + len - 8, sims_xxh3_64(buf, len - 8, SIMS_DESIGN_RECORD_SEED));
}

/* Every single-byte change (all 255 other values at every offset) is
 * rejected as corrupt; and with the checksum recomputed, still rejected
 * (the encoding is canonical, so the fields alone catch it), as
 * SIMSTORE_EVERSION only for the version byte. */
static void corruption_sweep(const sims_design *d)
{
    uint8_t *rec = malloc(SIMS_DESIGN_RECORD_MAX_BYTES),
            *bad = malloc(SIMS_DESIGN_RECORD_MAX_BYTES);
    assert_non_null(rec);
    assert_non_null(bad);
    sims_design *out = design_new();
    size_t len = encode(d, rec);
    unsigned rejected = 0;
    for (size_t off = 0; off < len; off++) {
        for (unsigned v = 0; v < 256; v++) {
            if (v == rec[off])
                continue;
            memcpy(bad, rec, len);
            bad[off] = (uint8_t)v;
            int rc = sims_design_decode(bad, len, out);
            if (rc != SIMSTORE_ECORRUPT)
                fprintf(stderr, "offset %zu value %u: rc %d\n", off, v, rc);
            assert_int_equal(rc, SIMSTORE_ECORRUPT);
            if (off < len - 8 && off >= 4) {
                fix_checksum(bad, len);
                rc = sims_design_decode(bad, len, out);
                if (rc != (off == 4 ? SIMSTORE_EVERSION : SIMSTORE_ECORRUPT))
                    fprintf(stderr, "offset %zu value %u (checksum fixed): rc %d\n", off, v, rc);
                assert_int_equal(rc, off == 4 ? SIMSTORE_EVERSION : SIMSTORE_ECORRUPT);
            }
            rejected++;
        }
    }
    fprintf(stderr, "%u tables: %u single-byte corruptions rejected\n", (unsigned)d->n_tables,
            rejected);
    /* Every truncation, and one extra byte. */
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(sims_design_decode(rec, cut, out), SIMSTORE_ECORRUPT);
    memcpy(bad, rec, len);
    bad[len] = 0;
    assert_int_equal(sims_design_decode(bad, len + 1, out), SIMSTORE_ECORRUPT);
    fix_checksum(bad, len + 1);
    assert_int_equal(sims_design_decode(bad, len + 1, out), SIMSTORE_ECORRUPT);
    assert_int_equal(sims_design_decode(rec, len, out), SIMSTORE_OK);
    free(out);
    free(rec);
    free(bad);
}

static void test_design_record__every_corruption_and_truncation(void **state)
{
    (void)state;
    sims_design *d = design_new();
    static const unsigned cases[][2] = {{3, 4}, {3, 16}, {0, 1}, {7, 8}, {2, 9}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(sims_design_with_tables(cases[i][0], cases[i][1], d), SIMSTORE_OK);
        corruption_sweep(d);
    }
    free(d);
}

/* Specific rejections name what is wrong. */
static void test_design_record__messages_name_the_field(void **state)
{
    (void)state;
    sims_design *d = design_new(), *out = design_new();
    uint8_t rec[512], bad[512];
    assert_int_equal(sims_design_with_tables(3, 4, d), SIMSTORE_OK);
    size_t len = encode(d, rec);
    static const struct {
        size_t off;
        uint8_t value;
        int fix;
        int rc;
        const char *word;
    } cases[] = {
        {0, 'X', 0, SIMSTORE_ECORRUPT, "magic"},
        {100, 0x77, 0, SIMSTORE_ECORRUPT, "checksum"},
        {4, 2, 1, SIMSTORE_EVERSION, "version 2"},
        {5, 32, 1, SIMSTORE_ECORRUPT, "fingerprint bits"},
        {6, 9, 1, SIMSTORE_ECORRUPT, "k = 9"},
        {7, 3, 1, SIMSTORE_ECORRUPT, "levels"},
        {8, 5, 1, SIMSTORE_ECORRUPT, "level-1"},
        {10, 4, 1, SIMSTORE_ECORRUPT, "level-2"},
        {12, 5, 1, SIMSTORE_ECORRUPT, "expected"},
        {12, 0, 1, SIMSTORE_ECORRUPT, "table count"},
        {14, 1, 1, SIMSTORE_ECORRUPT, "reserved"},
        {16, 17, 1, SIMSTORE_ECORRUPT, "table 0 prefix"},
        {17 + 66, 1, 1, SIMSTORE_ECORRUPT, "table 1 reserved"},
        {18 + 66 * 2 + 5, 6, 1, SIMSTORE_ECORRUPT, "table 2 permutation"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, rec, len);
        bad[cases[i].off] = cases[i].value;
        if (cases[i].fix)
            fix_checksum(bad, len);
        assert_int_equal(sims_design_decode(bad, len, out), cases[i].rc);
        if (!strstr(simstore_last_error(), cases[i].word))
            fprintf(stderr, "case %zu: \"%s\" lacks \"%s\"\n", i, simstore_last_error(),
                    cases[i].word);
        assert_non_null(strstr(simstore_last_error(), cases[i].word));
    }
    /* Consistent but different parameters (r1 = 2, m1 = 5) with a fixed
     * checksum: they name 10 tables, the record holds 4. */
    memcpy(bad, rec, len);
    bad[8] = 5;
    bad[9] = 2;
    fix_checksum(bad, len);
    assert_int_equal(sims_design_decode(bad, len, out), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "the parameters give 10"));
    /* Parameters outside the limits with a plausible length. */
    memcpy(bad, rec, len);
    bad[8] = 3 + 62;
    bad[9] = 62;
    fix_checksum(bad, len);
    assert_int_equal(sims_design_decode(bad, len, out), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "construction parameters"));
    free(d);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_design_coverage__exhaustive_k_up_to_4),
        cmocka_unit_test(test_design_coverage__exhaustive_check_detects_gaps),
        cmocka_unit_test(test_design_coverage__k5_to_7_by_construction_and_sampling),
        cmocka_unit_test(test_design_beyond__prefix_flips_bound_holds),
        cmocka_unit_test(test_design_build__every_valid_parameter_set),
        cmocka_unit_test(test_design_build__rejects_invalid_parameters),
        cmocka_unit_test(test_design_candidates__k3_reference_designs),
        cmocka_unit_test(test_design_candidates__sorted_pareto_and_consistent),
        cmocka_unit_test(test_design_candidates__cap_and_errors),
        cmocka_unit_test(test_design_permute__matches_naive_for_every_table),
        cmocka_unit_test(test_design_permute__arbitrary_block_permutations),
        cmocka_unit_test(test_design_probe__range_and_examples),
        cmocka_unit_test(test_design_exact__end_to_end_small_sets),
        cmocka_unit_test(test_design_cost__k3_choices),
        cmocka_unit_test(test_design_cost__monotone_in_n),
        cmocka_unit_test(test_design_cost__model_parameters),
        cmocka_unit_test(test_design_tables__override_and_error),
        cmocka_unit_test(test_design_describe__strings),
        cmocka_unit_test(test_design_record__round_trip_every_candidate),
        cmocka_unit_test(test_design_record__golden_example),
        cmocka_unit_test(test_design_record__every_corruption_and_truncation),
        cmocka_unit_test(test_design_record__messages_name_the_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
