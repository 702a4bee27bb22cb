/* test_bandindex.c: lib/memindex/bandindex.c (simstore_bandindex_*) against
 * a brute-force comparison of every band of every entry: each query's
 * answers are exactly the distinct values of the entries sharing a band
 * with it, once each, in ascending order, for several band shapes (the
 * near-duplicate rule's for minhash256 among them) on random, clustered and
 * duplicate-heavy sketches and repeated values, checked while the index
 * grows past its resizes; answers beyond the stack's room; stopping;
 * argument errors; memory. */
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

#define SET_SIZE 1100
#define QUERIES 40

enum set_kind { SET_RANDOM, SET_CLUSTERED, SET_DUPLICATES, SET_KINDS };
static const char *const SET_NAMES[SET_KINDS] = {"random", "clustered", "duplicate-heavy"};

/* Bit j of a sketch, read the plain way (format/sketch.md, section 4). */
static unsigned bit_of(const uint8_t *s, size_t j)
{
    return (s[j / 8] >> (j % 8)) & 1u;
}

/* Whether a and b agree on every bit of one of `count` bands of `rows`. */
static int share_band(const uint8_t *a, const uint8_t *b, unsigned rows, unsigned count)
{
    for (unsigned band = 0; band < count; band++) {
        unsigned j = 0;
        while (j < rows && bit_of(a, (size_t)band * rows + j) == bit_of(b, (size_t)band * rows + j))
            j++;
        if (j == rows)
            return 1;
    }
    return 0;
}

static void random_sketch(test_rng *r, uint8_t *s, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        s[i] = (uint8_t)test_rng_next(r);
}

/* s = centre with `flips` random bits of its first `bits` flipped. */
static void near_sketch(test_rng *r, const uint8_t *centre, uint8_t *s, size_t bytes, size_t bits,
                        unsigned flips)
{
    memcpy(s, centre, bytes);
    for (unsigned f = 0; f < flips; f++) {
        size_t j = (size_t)test_rng_below(r, bits);
        s[j / 8] ^= (uint8_t)(1u << (j % 8));
    }
}

typedef struct shape {
    unsigned rows, count;
} shape;

typedef struct answers {
    uint64_t *got;
    size_t n, cap;
    int stop_after; /* stop (returning 7) after this many; 0: never */
} answers;

static int collect(void *ctx, uint64_t value)
{
    answers *a = (answers *)ctx;
    assert_true(a->n < a->cap);
    a->got[a->n++] = value;
    return a->stop_after && a->n == (size_t)a->stop_after ? 7 : 0;
}

/* The distinct values of entries 0..n-1 sharing a band with q, ascending. */
static size_t brute(const uint8_t *sketches, size_t bytes, const uint64_t *values, size_t n,
                    const uint8_t *q, shape sh, uint64_t *want)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (share_band(sketches + i * bytes, q, sh.rows, sh.count)) {
            size_t at = m;
            while (at > 0 && want[at - 1] > values[i])
                at--;
            if (at > 0 && want[at - 1] == values[i])
                continue;
            memmove(want + at + 1, want + at, (m - at) * sizeof *want);
            want[at] = values[i];
            m++;
        }
    return m;
}

/* Queries with answers and without, to show the sets test both. */
static size_t answered, unanswered;

static void check_queries(const simstore_bandindex *x, const uint8_t *sketches, size_t bytes,
                          const uint64_t *values, size_t n, const uint8_t *queries, size_t nq,
                          shape sh, const char *what)
{
    uint64_t *want = malloc((n + 1) * sizeof *want);
    answers a = {malloc((n + 1) * sizeof *a.got), 0, n + 1, 0};
    assert_non_null(want);
    assert_non_null(a.got);
    for (size_t q = 0; q < nq; q++) {
        a.n = 0;
        assert_int_equal(simstore_bandindex_query(x, queries + q * bytes, collect, &a), 0);
        size_t m = brute(sketches, bytes, values, n, queries + q * bytes, sh, want);
        if (m)
            answered++;
        else
            unanswered++;
        if (a.n != m || (m && memcmp(a.got, want, m * sizeof *want) != 0)) {
            fprintf(stderr, "%s: %u bands of %u: query %zu of %zu entries: %zu answers, want %zu\n",
                    what, sh.count, sh.rows, q, n, a.n, m);
            fail();
        }
    }
    free(want);
    free(a.got);
}

static int is_power_of_two(size_t n)
{
    return n && (n & (n - 1)) == 0;
}

static void test_bandindex_exact__shapes_and_sets(void **state)
{
    (void)state;
    unsigned rows_near, count_near;
    simstore_sketch_bands(SIMSTORE_SKETCH_MINHASH256, SIMSTORE_NEAR_SIMILARITY, &rows_near,
                          &count_near);
    assert_true(rows_near > 0 && count_near > 0);
    const shape shapes[] = {{1, 6}, {3, 5}, {7, 9}, {13, 3}, {32, 4}, {rows_near, count_near}};
    test_rng r;
    test_rng_init(&r, "test_bandindex", 5);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        shape sh = shapes[s];
        size_t bits = (size_t)sh.rows * sh.count;
        /* Two bytes past the bands: bits that must not count. */
        size_t bytes = (bits + 7) / 8 + 2;
        uint8_t *sketches = malloc(SET_SIZE * bytes), *queries = malloc(QUERIES * bytes);
        uint8_t *centres = malloc(8 * bytes);
        uint64_t *values = malloc(SET_SIZE * sizeof *values);
        assert_true(sketches && queries && centres && values);
        for (int kind = 0; kind < SET_KINDS; kind++) {
            char what[64];
            snprintf(what, sizeof what, "%s", SET_NAMES[kind]);
            random_sketch(&r, centres, 8 * bytes);
            /* A band of b bits survives f random flips of the `bits` with
             * probability about (1 - b / bits)^f: a few flips per band keep
             * some bands and lose others. */
            unsigned most = 2 * sh.count + 2;
            for (size_t i = 0; i < SET_SIZE; i++) {
                uint8_t *sk = sketches + i * bytes;
                const uint8_t *c = centres + test_rng_below(&r, 8) * bytes;
                switch (kind) {
                case SET_RANDOM: random_sketch(&r, sk, bytes); break;
                case SET_CLUSTERED:
                    near_sketch(&r, c, sk, bytes, bits, (unsigned)test_rng_below(&r, most));
                    break;
                default:
                    if (i > 0 && test_rng_below(&r, 3))
                        memcpy(sk, sketches + test_rng_below(&r, i) * bytes, bytes);
                    else
                        near_sketch(&r, c, sk, bytes, bits, (unsigned)test_rng_below(&r, most));
                    /* Bits past the bands differ between equal bands. */
                    sk[bytes - 1] = (uint8_t)test_rng_next(&r);
                    break;
                }
                /* Values repeat now and then, and are not insertion order. */
                values[i] = test_rng_below(&r, 5) == 0 && i > 0 ? values[test_rng_below(&r, i)]
                                                                : test_rng_next(&r) >> 8;
            }
            for (size_t q = 0; q < QUERIES; q++) {
                uint8_t *qs = queries + q * bytes;
                if (q % 4 == 3)
                    random_sketch(&r, qs, bytes);
                else
                    near_sketch(&r, sketches + test_rng_below(&r, SET_SIZE) * bytes, qs, bytes,
                                bits, (unsigned)test_rng_below(&r, most));
            }
            simstore_bandindex *x = NULL;
            answered = unanswered = 0;
            assert_int_equal(simstore_bandindex_new(sh.rows, sh.count, &x), SIMSTORE_OK);
            for (size_t i = 0; i < SET_SIZE; i++) {
                assert_int_equal(simstore_bandindex_add(x, sketches + i * bytes, values[i]),
                                 SIMSTORE_OK);
                size_t n = i + 1;
                if (is_power_of_two(n - 1) || is_power_of_two(n) || is_power_of_two(n + 1) ||
                    n == SET_SIZE) {
                    assert_int_equal(simstore_bandindex_count(x), n);
                    check_queries(x, sketches, bytes, values, n, queries, n < 64 ? 8 : QUERIES, sh,
                                  what);
                }
            }
            /* The entries themselves answer, each at least with its value. */
            check_queries(x, sketches, bytes, values, SET_SIZE, sketches, 50, sh, what);
            if (sh.rows >= 7) /* short bands are shared by nearly every pair */
                assert_true(answered > 0 && unanswered > 0);
            simstore_bandindex_free(x);
        }
        free(sketches);
        free(queries);
        free(centres);
        free(values);
    }
}

/* More answers than the query's stack room (256), and a stop. */
static void test_bandindex_many_answers_and_stop(void **state)
{
    (void)state;
    enum { N = 1000 };
    uint8_t sk[8] = {1, 2, 3, 4, 5, 6, 7, 8}, other[8];
    memcpy(other, sk, sizeof other);
    other[0] ^= 1; /* band 0 differs, band 1 agrees */
    simstore_bandindex *x = NULL;
    assert_int_equal(simstore_bandindex_new(8, 2, &x), SIMSTORE_OK);
    for (uint64_t i = 0; i < N; i++)
        assert_int_equal(simstore_bandindex_add(x, i % 2 ? sk : other, N - 1 - i), SIMSTORE_OK);
    answers a = {malloc(N * sizeof(uint64_t)), 0, N, 0};
    assert_non_null(a.got);
    assert_int_equal(simstore_bandindex_query(x, sk, collect, &a), 0);
    assert_int_equal(a.n, N);
    for (size_t i = 0; i < N; i++)
        assert_int_equal(a.got[i], i);
    a.n = 0;
    a.stop_after = 3;
    assert_int_equal(simstore_bandindex_query(x, sk, collect, &a), 7);
    assert_int_equal(a.n, 3);
    /* Neither band: nothing. */
    uint8_t far[8] = {0xFE, 0, 0, 0, 0, 0, 0, 0};
    a.n = 0;
    a.stop_after = 0;
    assert_int_equal(simstore_bandindex_query(x, far, collect, &a), 0);
    assert_int_equal(a.n, 0);
    free(a.got);
    simstore_bandindex_free(x);
}

static void test_bandindex_errors_and_bytes(void **state)
{
    (void)state;
    simstore_bandindex *x = (simstore_bandindex *)&x;
    assert_int_equal(simstore_bandindex_new(0, 4, &x), SIMSTORE_EINVAL);
    assert_null(x);
    assert_int_equal(simstore_bandindex_new(33, 4, &x), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_new(8, 0, &x), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_new(32, 2049, &x), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_new(8, 4, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_new(32, 2048, &x), SIMSTORE_OK);
    simstore_bandindex_free(x);
    assert_int_equal(simstore_bandindex_new(8, 4, &x), SIMSTORE_OK);
    uint8_t sk[4] = {0};
    assert_int_equal(simstore_bandindex_add(NULL, sk, 1), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_add(x, NULL, 1), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_query(x, sk, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_query(x, NULL, collect, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_bandindex_query(NULL, sk, collect, NULL), SIMSTORE_EINVAL);
    /* Memory: what the header says a slot costs, and it grows with the
     * entries. */
    uint64_t empty = simstore_bandindex_bytes(x);
    assert_true(empty >= 64 * (4 + 8 + 6 * 4));
    for (uint64_t i = 0; i < 1000; i++) {
        sk[0] = (uint8_t)i;
        assert_int_equal(simstore_bandindex_add(x, sk, i), SIMSTORE_OK);
    }
    uint64_t full = simstore_bandindex_bytes(x);
    assert_true(full >= 1000 * (4 + 8 + 6 * 4) && full <= 2 * 1024 * (4 + 8 + 6 * 4) + 4096);
    assert_int_equal(simstore_bandindex_count(x), 1000);
    simstore_bandindex_free(x);
    simstore_bandindex_free(NULL);
    assert_int_equal(simstore_bandindex_count(NULL), 0);
    assert_int_equal(simstore_bandindex_bytes(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bandindex_exact__shapes_and_sets),
        cmocka_unit_test(test_bandindex_many_answers_and_stop),
        cmocka_unit_test(test_bandindex_errors_and_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
