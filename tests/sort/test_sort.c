/* test_sort.c: lib/sort's radix sort (of whole values, and of their top
 * bits only) and the spilling value and record sorters, checked against qsort on random, duplicate-heavy and skewed input,
 * in memory and with budgets small enough to force many spilled runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sort/recsort.h"
#include "sort/u64sort.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void fill(test_rng *r, uint64_t *v, size_t n, int shape)
{
    for (size_t i = 0; i < n; i++) {
        switch (shape) {
        case 0: v[i] = test_rng_next(r); break;      /* uniform */
        case 1: v[i] = test_rng_below(r, 50); break; /* duplicates */
        case 2:
            v[i] = 0xABCD000000000000ULL | test_rng_below(r, 1u << 20);
            break;                                           /* shared prefix */
        default: v[i] = (i & 1) ? UINT64_MAX - i : i; break; /* extremes */
        }
    }
}

static void test_sort_radix__matches_qsort(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "radix", 11);
    size_t sizes[] = {0, 1, 2, 63, 64, 65, 1000, 100000};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (int shape = 0; shape < 4; shape++) {
            size_t n = sizes[si];
            uint64_t *v = malloc((n + 1) * sizeof *v), *w = malloc((n + 1) * sizeof *w);
            uint64_t *tmp = malloc((n + 1) * sizeof *tmp);
            fill(&r, v, n, shape);
            memcpy(w, v, n * sizeof *v);
            sims_radix_sort_u64(v, tmp, n);
            qsort(w, n, sizeof *w, cmp_u64);
            assert_memory_equal(v, w, n * sizeof *v);
            free(v);
            free(w);
            free(tmp);
        }
    }
}

/* Sorting by the top bits only: the same values (a permutation of the
 * input), in order of their top `bits` bits; checked against qsort of the
 * whole values, whose top bits come out in the same order. Sorting by the
 * top bits, then each group: qsort's order exactly (groups of one value,
 * of a few, and of many: the shapes with repeats and a shared prefix). */
static void test_sort_radix__top_bits(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "radix top", 13);
    size_t sizes[] = {0, 1, 2, 64, 65, 1000, 100000};
    unsigned bits[] = {0, 1, 10, 11, 12, 21, 22, 23, 33, 63, 64};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t bi = 0; bi < sizeof bits / sizeof bits[0]; bi++)
            for (int shape = 0; shape < 4; shape++) {
                size_t n = sizes[si];
                unsigned b = bits[bi];
                uint64_t *v = malloc((n + 1) * sizeof *v), *w = malloc((n + 1) * sizeof *w);
                uint64_t *tmp = malloc((n + 1) * sizeof *tmp);
                fill(&r, v, n, shape);
                memcpy(w, v, n * sizeof *v);
                uint64_t *g = malloc((n + 1) * sizeof *g);
                memcpy(g, v, n * sizeof *v);
                sims_radix_sort_u64_top(v, tmp, n, b);
                for (size_t i = 1; i < n && b > 0; i++)
                    assert_true(v[i - 1] >> (64 - b) <= v[i] >> (64 - b));
                /* Grouped: sorted whole, whatever the groups. */
                sims_radix_sort_u64_grouped(g, tmp, n, b);
                /* A permutation of the input: sorted whole, they are equal. */
                qsort(w, n, sizeof *w, cmp_u64);
                if (b == 64) /* every bit: the order is the whole order */
                    assert_memory_equal(v, w, n * sizeof *v);
                assert_memory_equal(g, w, n * sizeof *g);
                free(g);
                qsort(v, n, sizeof *v, cmp_u64);
                assert_memory_equal(v, w, n * sizeof *v);
                free(v);
                free(w);
                free(tmp);
            }
}

static void check_u64sort(size_t n, size_t run_values, int shape, int unique, const char *dir)
{
    test_rng r;
    test_rng_init(&r, "u64sort", 1000 + n + (uint64_t)shape);
    uint64_t *v = malloc((n + 1) * sizeof *v);
    fill(&r, v, n, shape);
    sims_u64sort *s;
    assert_int_equal(sims_u64sort_new(run_values, dir, &s), 0);
    /* Push in uneven pieces. */
    for (size_t i = 0; i < n;) {
        size_t k = 1 + test_rng_below(&r, 5000);
        if (k > n - i)
            k = n - i;
        assert_int_equal(sims_u64sort_push(s, v + i, k), 0);
        i += k;
    }
    assert_int_equal(sims_u64sort_finish(s, unique), 0);
    qsort(v, n, sizeof *v, cmp_u64);
    size_t m = n;
    if (unique && n) {
        m = 1;
        for (size_t i = 1; i < n; i++)
            if (v[i] != v[m - 1])
                v[m++] = v[i];
    }
    uint64_t *got = malloc((m + 1) * sizeof *got);
    for (int pass = 0; pass < 2; pass++) { /* the stream can be read twice */
        size_t total = 0, k;
        uint64_t buf[777];
        do {
            assert_int_equal(sims_u64sort_read(s, buf, 777, &k), 0);
            assert_true(total + k <= m);
            memcpy(got + total, buf, k * sizeof *buf);
            total += k;
        } while (k);
        assert_int_equal(total, m);
        assert_memory_equal(got, v, m * sizeof *v);
        assert_int_equal(sims_u64sort_rewind(s), 0);
    }
    if (n > run_values)
        assert_true(sims_u64sort_spilled_runs(s) >= n / run_values);
    if (n < run_values) /* the run grew as it filled, and never spilled */
        assert_int_equal(sims_u64sort_spilled_runs(s), 0);
    sims_u64sort_free(s);
    free(got);
    free(v);
}

static void test_sort_u64sort__in_memory_and_spilled(void **state)
{
    (void)state;
    char *dir = test_tmpdir("sort");
    for (int shape = 0; shape < 4; shape++)
        for (int unique = 0; unique < 2; unique++) {
            check_u64sort(0, 1024, shape, unique, dir);
            check_u64sort(1000, 4096, shape, unique, dir);   /* one run, no spill */
            check_u64sort(50000, 1024, shape, unique, dir);  /* ~49 runs */
            check_u64sort(20000, 20000, shape, unique, dir); /* exactly one full run */
            /* Runs that start at 64Ki values and double: to 2^18 without a
             * spill, and to a cap that is no power of two before spilling. */
            check_u64sort(150000, (size_t)1 << 20, shape, unique, dir);
            check_u64sort(300000, 200000, shape, unique, dir);
        }
    test_rmtree(dir);
    free(dir);
}

static void test_sort_recsort__orders_by_key_then_push_order(void **state)
{
    (void)state;
    char *dir = test_tmpdir("recsort");
    test_rng r;
    test_rng_init(&r, "recsort", 5);
    for (int budget_mib = 1; budget_mib <= 64; budget_mib *= 64) {
        size_t n = 40000;
        sims_recsort *s;
        assert_int_equal(sims_recsort_new((size_t)budget_mib << 20, dir, &s), 0);
        /* Keys: short strings with many shared prefixes and repeats; the value
         * records the push index so the order of ties can be checked. */
        char key[64];
        for (size_t i = 0; i < n; i++) {
            unsigned len = (unsigned)snprintf(key, sizeof key, "doc-%llu",
                                              (unsigned long long)test_rng_below(&r, 30000));
            if (i % 7 == 0)
                len = (unsigned)test_rng_below(&r, 4); /* prefixes, empty key */
            char val[600];
            size_t vlen = 8 + test_rng_below(&r, 40);
            if (i % 1000 == 0)
                vlen = 590; /* occasional big record */
            memset(val, 'v', vlen);
            uint64_t idx = i;
            memcpy(val, &idx, 8);
            assert_int_equal(sims_recsort_push(s, key, len, val, (uint32_t)vlen), 0);
        }
        assert_int_equal(sims_recsort_finish(s, (size_t)budget_mib << 19), 0);
        if (budget_mib == 1)
            assert_true(sims_recsort_spilled_runs(s) > 0);
        sims_rec prev, rec;
        uint8_t prev_key[64];
        size_t seen = 0;
        int rc;
        while ((rc = sims_recsort_next(s, &rec)) == 1) {
            uint64_t idx;
            memcpy(&idx, rec.val, 8);
            assert_int_equal(idx, rec.seq);
            if (seen) {
                size_t m = prev.key_len < rec.key_len ? prev.key_len : rec.key_len;
                int c = m ? memcmp(prev_key, rec.key, m) : 0;
                if (c == 0)
                    c = (prev.key_len > rec.key_len) - (prev.key_len < rec.key_len);
                assert_true(c <= 0);
                if (c == 0)
                    assert_true(prev.seq < rec.seq);
            }
            memcpy(prev_key, rec.key, rec.key_len);
            prev = rec;
            seen++;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(seen, n);
        /* A rewound stream yields the same records again, in order. */
        assert_int_equal(sims_recsort_rewind(s), 0);
        uint64_t first_seq = UINT64_MAX, count = 0;
        while ((rc = sims_recsort_next(s, &rec)) == 1) {
            if (count++ == 0)
                first_seq = rec.seq;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(count, n);
        assert_true(first_seq != UINT64_MAX);
        sims_recsort_free(s);
    }
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_radix__matches_qsort),
        cmocka_unit_test(test_sort_radix__top_bits),
        cmocka_unit_test(test_sort_u64sort__in_memory_and_spilled),
        cmocka_unit_test(test_sort_recsort__orders_by_key_then_push_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
