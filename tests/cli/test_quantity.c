/* test_quantity.c: cmd/quantity.c, the one parser of counts and sizes that
 * the simstore command (--memory, --expected) and gen_fingerprints (--count)
 * share: every accepted form, and what it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "quantity.h"

#include <stdio.h>

static void accepts(const char *s, uint64_t want)
{
    uint64_t got = 0;
    if (quantity_parse(s, &got) != 0)
        fail_msg("'%s' refused", s);
    if (got != want)
        fail_msg("'%s' = %llu, expected %llu", s, (unsigned long long)got,
                 (unsigned long long)want);
}

static void refuses(const char *s)
{
    uint64_t got = 12345;
    if (quantity_parse(s, &got) == 0)
        fail_msg("'%s' accepted as %llu", s, (unsigned long long)got);
    assert_int_equal(got, 12345);
}

static void test_quantity__plain_and_powers(void **state)
{
    (void)state;
    accepts("0", 0);
    accepts("1", 1);
    accepts("1073741824", 1073741824);
    accepts("18446744073709551615", UINT64_MAX);
    accepts("2^0", 1);
    accepts("2^30", 1ULL << 30);
    accepts("2^63", 1ULL << 63);
    accepts("1e9", 1000000000);
    accepts("1E9", 1000000000);
    accepts("1e+9", 1000000000);
    accepts("2.5e6", 2500000);
    accepts("1.048576e6", 1048576);
    accepts("1e19", 10000000000000000000ULL);
    accepts("20", 20);
}

static void test_quantity__suffixes(void **state)
{
    (void)state;
    const char *const mib[] = {"64M",   "64m",   "64Mi", "64mi", "64MiB",
                               "64mib", "64MIB", "64MB", "64mb", "64Mb"};
    for (size_t i = 0; i < sizeof mib / sizeof mib[0]; i++)
        accepts(mib[i], 64ULL << 20);
    accepts("4k", 4096);
    accepts("4K", 4096);
    accepts("4KB", 4096);
    accepts("4KiB", 4096);
    accepts("4Ki", 4096);
    accepts("4kib", 4096);
    accepts("2G", 2ULL << 30);
    accepts("2GiB", 2ULL << 30);
    accepts("3T", 3ULL << 40);
    accepts("3tib", 3ULL << 40);
    accepts("1.5G", 3ULL << 29);
    accepts("0.5K", 512);
    accepts("512B", 512);
    accepts("512b", 512);
    accepts("1e3K", 1000 * 1024);
    accepts("16777215T", 16777215ULL << 40);
}

static void test_quantity__refused(void **state)
{
    (void)state;
    const char *const bad[] = {"",
                               "-1",
                               "+1",
                               " 1",
                               "1 ",
                               "M",
                               "1Q",
                               "1MiBB",
                               "1iM",
                               "1Bi",
                               "1MM",
                               "1KM",
                               "0.5",
                               "1.3K",
                               "1.",
                               ".5",
                               "1e",
                               "1e-3",
                               "1e20",
                               "2^",
                               "2^64",
                               "2^-1",
                               "2^3K",
                               "3^2",
                               "18446744073709551616",
                               "16777216T",
                               "1e19K",
                               "0x10",
                               "1,000",
                               "1_000",
                               "1.0000000000000000000001",
                               NULL};
    for (size_t i = 0; bad[i]; i++)
        refuses(bad[i]);
    uint64_t v;
    assert_int_equal(quantity_parse(NULL, &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantity__plain_and_powers),
        cmocka_unit_test(test_quantity__suffixes),
        cmocka_unit_test(test_quantity__refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
