/* test_memindex.c: lib/memindex/memindex.c (simstore_memindex_*) against a
 * brute-force scan: every query's answers equal the entries within k, each
 * once, on uniform, clustered, duplicate-heavy and adversarial sets for
 * k = 0..7, checked while the index grows past its resize thresholds, and
 * at every distance above the index's k up to 7; the
 * nearest entry and its tie rule; argument errors; memory per entry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET_SIZE 2500
#define QUERIES 120

enum set_kind { SET_UNIFORM, SET_CLUSTERED, SET_DUPLICATES, SET_ADVERSARIAL, SET_KINDS };
static const char *const SET_NAMES[SET_KINDS] = {"uniform", "clustered", "duplicate-heavy",
                                                 "adversarial"};

/* A fingerprint with `bits` distinct random positions of x flipped. */
static uint64_t flip_random(test_rng *r, uint64_t x, unsigned bits)
{
    uint64_t mask = 0;
    while ((unsigned)__builtin_popcountll(mask) < bits)
        mask |= UINT64_C(1) << test_rng_below(r, 64);
    return x ^ mask;
}

/* A contiguous run of `bits` flipped bits starting at a random position:
 * every flip inside one or two neighbouring design blocks, the case a
 * design's block cut must get right. */
static uint64_t flip_run(test_rng *r, uint64_t x, unsigned bits)
{
    if (bits == 0)
        return x;
    unsigned start = (unsigned)test_rng_below(r, 64 - bits + 1);
    uint64_t run = bits == 64 ? UINT64_MAX : ((UINT64_C(1) << bits) - 1);
    return x ^ (run << start);
}

static void make_set(test_rng *r, enum set_kind kind, unsigned k, uint64_t *fps, size_t n)
{
    uint64_t centers[16];
    for (size_t i = 0; i < 16; i++)
        centers[i] = test_rng_next(r);
    for (size_t i = 0; i < n; i++) {
        uint64_t c = centers[test_rng_below(r, 16)];
        switch (kind) {
        case SET_UNIFORM: fps[i] = test_rng_next(r); break;
        case SET_CLUSTERED:
            fps[i] = flip_random(r, c, (unsigned)test_rng_below(r, 2 * k + 3));
            break;
        case SET_DUPLICATES:
            fps[i] = i > 0 && test_rng_below(r, 4) ? fps[test_rng_below(r, i)] : test_rng_next(r);
            break;
        default:
            /* Distances k, k + 1 and k - 1 from a few centres, as runs and
             * as scattered bits, plus the all-zero and all-one words. */
            switch (test_rng_below(r, 5)) {
            case 0: fps[i] = flip_run(r, c, k); break;
            case 1: fps[i] = flip_run(r, c, k + 1); break;
            case 2: fps[i] = flip_random(r, c, k ? k - 1 : 0); break;
            case 3: fps[i] = flip_random(r, c, k + 1); break;
            default: fps[i] = test_rng_below(r, 2) ? 0 : UINT64_MAX; break;
            }
        }
    }
}

typedef struct collected {
    unsigned char *seen; /* by value */
    size_t n;
    int repeat;
    int wrong;
    const uint64_t *fps;
    uint64_t query;
} collected;

static int collect(void *ctx, uint64_t fp, uint64_t value, unsigned distance)
{
    collected *c = (collected *)ctx;
    if (value >= c->n || c->fps[value] != fp || simstore_distance(fp, c->query) != distance)
        c->wrong = 1;
    else if (c->seen[value]++)
        c->repeat = 1;
    return 0;
}

/* Every query at distance kq == the brute-force scan of fps[0..n). */
static void check_at(const simstore_memindex *ix, const uint64_t *fps, size_t n,
                     const uint64_t *queries, size_t nq, unsigned kq, const char *what)
{
    unsigned char *seen = malloc(n ? n : 1);
    assert_non_null(seen);
    for (size_t q = 0; q < nq; q++) {
        memset(seen, 0, n ? n : 1);
        collected c = {seen, n, 0, 0, fps, queries[q]};
        assert_int_equal(simstore_memindex_query(ix, queries[q], kq, collect, &c), 0);
        for (size_t i = 0; i < n; i++) {
            int want = simstore_distance(fps[i], queries[q]) <= kq;
            if (c.wrong || c.repeat || want != (seen[i] != 0)) {
                fprintf(stderr,
                        "%s: k=%u query %016llx: entry %zu (%016llx) %s (n=%zu, %u tables)\n", what,
                        kq, (unsigned long long)queries[q], i, (unsigned long long)fps[i],
                        c.wrong    ? "wrong answer"
                        : c.repeat ? "repeated"
                                   : "differs",
                        n, simstore_memindex_tables(ix));
                fail();
            }
        }
        /* nearest: smallest distance, then smallest value. */
        simstore_memindex_match m;
        int got = simstore_memindex_nearest(ix, queries[q], kq, &m);
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (simstore_distance(fps[i], queries[q]) <= kq &&
                (best == n ||
                 simstore_distance(fps[i], queries[q]) < simstore_distance(fps[best], queries[q])))
                best = i;
        assert_int_equal(got, best < n);
        if (best < n) {
            assert_int_equal(m.value, best);
            assert_int_equal(m.fp, fps[best]);
            assert_int_equal(m.distance, simstore_distance(fps[best], queries[q]));
        }
    }
    free(seen);
}

/* Queries at 0, 1, k - 1 and k (a few of the distances up to the index's). */
static void check_queries(const simstore_memindex *ix, const uint64_t *fps, size_t n,
                          const uint64_t *queries, size_t nq, unsigned k, const char *what)
{
    for (unsigned kq = 0; kq <= k; kq += (k > 2 ? k - 1 : 1))
        check_at(ix, fps, n, queries, nq, kq, what);
}

/* Checkpoints: just before, at and after each doubling of the capacity. */
static int is_power_of_two(size_t n)
{
    return n && (n & (n - 1)) == 0;
}

static void test_memindex_exact__all_sets_all_k(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "test_memindex", 12);
    uint64_t *fps = malloc(SET_SIZE * sizeof *fps);
    uint64_t queries[QUERIES];
    assert_non_null(fps);
    for (unsigned k = 0; k <= SIMSTORE_MAX_K; k++)
        for (int kind = 0; kind < SET_KINDS; kind++) {
            char what[64];
            snprintf(what, sizeof what, "%s k=%u", SET_NAMES[kind], k);
            make_set(&r, (enum set_kind)kind, k, fps, SET_SIZE);
            /* Queries near entries (at distances around k) and at random. */
            for (size_t q = 0; q < QUERIES; q++)
                queries[q] = q % 4 == 3 ? test_rng_next(&r)
                                        : flip_random(&r, fps[test_rng_below(&r, SET_SIZE)],
                                                      (unsigned)test_rng_below(&r, k + 2));
            simstore_memindex *ix = NULL;
            /* Start small so the adds cross several resizes (64, 128, ...). */
            assert_int_equal(simstore_memindex_new(k, 0, &ix), SIMSTORE_OK);
            for (size_t i = 0; i < SET_SIZE; i++) {
                assert_int_equal(simstore_memindex_add(ix, fps[i], i), SIMSTORE_OK);
                size_t n = i + 1;
                if (is_power_of_two(n - 1) || is_power_of_two(n) || is_power_of_two(n + 1) ||
                    n == SET_SIZE) {
                    assert_int_equal(simstore_memindex_count(ix), n);
                    check_queries(ix, fps, n, queries, n < 64 ? 16 : QUERIES, k, what);
                }
            }
            simstore_memindex_free(ix);
        }
    free(fps);
}

/* Distances above the index's k (up to SIMSTORE_MAX_K) are answered
 * exactly too: every set kind, indexes for k = 0..4, each query at every K
 * from k + 1 to 7. The small sets are answered by comparing every entry;
 * the large ones (k = 1..4, 24,000 entries: a few hundred buckets or fewer
 * a query against 750 = 24,000 / 32) by the chains at every prefix within a
 * few bits of the query's, checked again after growth. */
static void test_memindex_exact__beyond_k(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "test_memindex beyond", 3);
    enum { BIG = 24000, NQ = 40 };
    uint64_t *fps = malloc(BIG * sizeof *fps);
    uint64_t queries[NQ];
    assert_non_null(fps);
    for (unsigned k = 0; k <= 4; k++)
        for (int kind = 0; kind < SET_KINDS; kind++) {
            size_t sizes[2] = {700, BIG};
            for (int si = 0; si < 2; si++) {
                size_t n = sizes[si];
                if (n == BIG && k == 0)
                    continue; /* k = 0: one table of 64 bits, too many prefixes to visit */
                char what[80];
                snprintf(what, sizeof what, "beyond: %s index k=%u, %zu entries", SET_NAMES[kind],
                         k, n);
                make_set(&r, (enum set_kind)kind, SIMSTORE_MAX_K, fps, n);
                for (size_t q = 0; q < NQ; q++)
                    queries[q] = q % 4 == 3 ? test_rng_next(&r)
                                            : flip_random(&r, fps[test_rng_below(&r, n)],
                                                          (unsigned)test_rng_below(&r, 9));
                simstore_memindex *ix = NULL;
                assert_int_equal(simstore_memindex_new(k, 0, &ix), SIMSTORE_OK);
                for (size_t i = 0; i < n; i++)
                    assert_int_equal(simstore_memindex_add(ix, fps[i], i), SIMSTORE_OK);
                for (unsigned kq = k + 1; kq <= SIMSTORE_MAX_K; kq++)
                    check_at(ix, fps, n, queries, NQ, kq, what);
                simstore_memindex_free(ix);
            }
        }
    free(fps);
}

/* An index sized up front answers the same as one grown from nothing. */
static void test_memindex_exact__presized(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "test_memindex presized", 5);
    enum { N = 20000 };
    uint64_t *fps = malloc(N * sizeof *fps);
    uint64_t queries[64];
    assert_non_null(fps);
    make_set(&r, SET_CLUSTERED, 3, fps, N);
    for (size_t q = 0; q < 64; q++)
        queries[q] = flip_random(&r, fps[test_rng_below(&r, N)], (unsigned)test_rng_below(&r, 5));
    simstore_memindex *ix = NULL;
    assert_int_equal(simstore_memindex_new(3, N, &ix), SIMSTORE_OK);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(simstore_memindex_add(ix, fps[i], i), SIMSTORE_OK);
    check_queries(ix, fps, N, queries, 64, 3, "presized k=3");
    simstore_memindex_free(ix);
    free(fps);
}

/* Memory stays within the documented bound: 16 + 16 bytes per table per
 * entry at most (room for growth included), plus the fixed part. */
static void test_memindex_bytes__per_entry(void **state)
{
    (void)state;
    simstore_memindex *ix = NULL;
    assert_int_equal(simstore_memindex_new(3, 0, &ix), SIMSTORE_OK);
    uint64_t fixed = simstore_memindex_bytes(ix);
    test_rng r;
    test_rng_init(&r, "test_memindex bytes", 7);
    enum { N = 300000 };
    for (size_t i = 0; i < N; i++)
        assert_int_equal(simstore_memindex_add(ix, test_rng_next(&r), i), SIMSTORE_OK);
    uint64_t bytes = simstore_memindex_bytes(ix);
    unsigned tables = simstore_memindex_tables(ix);
    fprintf(stderr, "k=3, %d entries: %u tables, %.1f bytes per entry\n", N, tables,
            (double)bytes / N);
    assert_true(bytes - fixed <= (uint64_t)N * 2 * (16 + 12 * tables));
    assert_true(tables <= 10);
    simstore_memindex_free(ix);
}

static void test_memindex_errors__arguments(void **state)
{
    (void)state;
    simstore_memindex *ix = NULL;
    assert_int_equal(simstore_memindex_new(8, 0, &ix), SIMSTORE_EINVAL);
    assert_null(ix);
    assert_int_equal(simstore_memindex_new(3, 0, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_memindex_new(3, UINT64_C(1) << 40, &ix), SIMSTORE_EFULL);
    assert_int_equal(simstore_memindex_new(2, 10, &ix), SIMSTORE_OK);
    simstore_memindex_match m;
    /* Above the index's k is answered (test_memindex_exact__beyond_k);
     * above SIMSTORE_MAX_K is not. */
    assert_int_equal(simstore_memindex_nearest(ix, 1, SIMSTORE_MAX_K + 1, &m), SIMSTORE_ERANGE);
    assert_int_equal(simstore_memindex_query(ix, 1, SIMSTORE_MAX_K + 1, collect, NULL),
                     SIMSTORE_ERANGE);
    assert_int_equal(simstore_memindex_nearest(ix, 1, 3, &m), 0);
    assert_int_equal(simstore_memindex_nearest(ix, 1, 2, &m), 0);
    assert_int_equal(simstore_memindex_query(ix, 1, 2, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_memindex_add(NULL, 1, 1), SIMSTORE_EINVAL);
    /* Equal fingerprints are separate entries; the tie goes to the smaller
     * value. */
    assert_int_equal(simstore_memindex_add(ix, 7, 9), SIMSTORE_OK);
    assert_int_equal(simstore_memindex_add(ix, 7, 4), SIMSTORE_OK);
    assert_int_equal(simstore_memindex_nearest(ix, 6, 2, &m), 1);
    assert_int_equal(m.value, 4);
    assert_int_equal(m.distance, 1);
    assert_int_equal(simstore_memindex_count(ix), 2);
    simstore_memindex_free(ix);
    simstore_memindex_free(NULL);
    assert_int_equal(simstore_memindex_count(NULL), 0);
    assert_int_equal(simstore_memindex_bytes(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memindex_exact__all_sets_all_k),
        cmocka_unit_test(test_memindex_exact__presized),
        cmocka_unit_test(test_memindex_exact__beyond_k),
        cmocka_unit_test(test_memindex_bytes__per_entry),
        cmocka_unit_test(test_memindex_errors__arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
