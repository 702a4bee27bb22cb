/* test_boilerplate_record.c: the boilerplate record (format/store.md, `meta`
 * key `boilerplate`) against its golden files: each decodes to the values the
 * spec lists, the encoder reproduces it byte for byte, every flipped bit and
 * every truncation or extension is rejected, and values the format forbids
 * are rejected under a valid checksum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/bytes.h"
#include "common/checksum.h"
#include "lmdb/boilerplate_record.h"
#include "simstore.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *golden(const char *name, size_t *size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/format/golden/%s", test_source_dir(), name);
    uint8_t *b = test_read_file(path, size);
    if (!b)
        fprintf(stderr, "cannot read %s\n", path);
    assert_non_null(b);
    return b;
}

static int decode(const uint8_t *buf, size_t len)
{
    sims_boilerplate_record r;
    return sims_boilerplate_record_decode(buf, len, &r);
}

/* Every single-bit change, every truncation and a byte more must fail. */
static void reject_damage(const uint8_t *good, size_t n)
{
    uint8_t *b = malloc(n + 8);
    for (size_t i = 0; i < n; i++)
        for (unsigned x = 1; x < 256; x <<= 1) {
            memcpy(b, good, n);
            b[i] ^= (uint8_t)x;
            int rc = decode(b, n);
            if (rc != SIMSTORE_ECORRUPT)
                fprintf(stderr, "byte %zu ^ %u gave %d\n", i, x, rc);
            assert_int_equal(rc, SIMSTORE_ECORRUPT);
        }
    for (size_t len = 0; len < n; len++)
        assert_int_equal(decode(good, len), SIMSTORE_ECORRUPT);
    memcpy(b, good, n);
    memset(b + n, 0, 8);
    assert_int_equal(decode(b, n + 1), SIMSTORE_ECORRUPT);
    assert_int_equal(decode(b, n + 8), SIMSTORE_ECORRUPT);
    free(b);
}

/* Rewrite the checksum of a record changed on purpose. */
static void reseal(uint8_t *b, size_t n)
{
    le_store64(b + n - 8, sims_xxh3_64(b, n - 8, SIMS_BOILERPLATE_RECORD_SEED));
}

static void test_boilerplate_record_golden__three_lines(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("boilerplate-record.bin", &n);
    assert_int_equal(n, 72);
    sims_boilerplate_record r;
    assert_int_equal(sims_boilerplate_record_decode(b, n, &r), 0);
    assert_int_equal(r.version, 1);
    assert_int_equal(r.fraction_millionths, 100000);
    assert_int_equal(r.min_documents, 100);
    assert_int_equal(r.documents, 1000);
    assert_int_equal(r.line_count, 3);
    /* The keys of "home about contact", "site header", "c 2024 example
     * org", in increasing order. */
    uint64_t keys[3];
    for (unsigned i = 0; i < 3; i++)
        keys[i] = sims_boilerplate_record_key(&r, i);
    assert_true(keys[0] == 0x40d680a2d161fcfbULL);
    assert_true(keys[1] == 0x5fb6e0d392104dbeULL);
    assert_true(keys[2] == 0xaf865edb32a2146cULL);
    static const char *const lines[] = {"home about contact", "site header", "c 2024 example org"};
    for (unsigned i = 0; i < 3; i++) {
        uint64_t k = sims_xxh3_64(lines[i], strlen(lines[i]), 0x53494D534C494E45ULL);
        assert_true(k == keys[0] || k == keys[1] || k == keys[2]);
    }
    uint8_t again[128];
    assert_int_equal(sims_boilerplate_record_size(3), n);
    assert_int_equal(sims_boilerplate_record_encode(&r, keys, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    assert_int_equal(sims_boilerplate_record_encode(&r, keys, again, n - 1), 0);
    reject_damage(b, n);

    /* Values the format forbids, each under a valid checksum: keys out of
     * order or repeated, a fraction of 0 or of 10^6 millionths. */
    uint8_t w[72];
    memcpy(w, b, n);
    le_store64(w + 40, keys[1]);
    le_store64(w + 48, keys[0]);
    reseal(w, n);
    assert_int_equal(decode(w, n), SIMSTORE_ECORRUPT);
    memcpy(w, b, n);
    le_store64(w + 48, keys[0]);
    reseal(w, n);
    assert_int_equal(decode(w, n), SIMSTORE_ECORRUPT);
    static const uint32_t bad_fractions[] = {0, 1000000, 0xFFFFFFFFu};
    for (size_t i = 0; i < 3; i++) {
        memcpy(w, b, n);
        le_store32(w + 12, bad_fractions[i]);
        reseal(w, n);
        assert_int_equal(decode(w, n), SIMSTORE_ECORRUPT);
    }
    /* A count the bytes do not hold, sealed: corrupt, never read past. */
    static const uint64_t bad_counts[] = {2, 4, 0x2000000000000003ULL, UINT64_MAX};
    for (size_t i = 0; i < 4; i++) {
        memcpy(w, b, n);
        le_store64(w + 32, bad_counts[i]);
        reseal(w, n);
        assert_int_equal(decode(w, n), SIMSTORE_ECORRUPT);
    }
    /* Another version, sealed: a version error, not corruption. */
    memcpy(w, b, n);
    le_store32(w + 8, 2);
    reseal(w, n);
    assert_int_equal(decode(w, n), SIMSTORE_EVERSION);
    free(b);
}

static void test_boilerplate_record_golden__empty_set(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("boilerplate-record-empty.bin", &n);
    assert_int_equal(n, 48);
    sims_boilerplate_record r;
    assert_int_equal(sims_boilerplate_record_decode(b, n, &r), 0);
    assert_int_equal(r.fraction_millionths, 250000);
    assert_int_equal(r.min_documents, 100);
    assert_int_equal(r.documents, 42);
    assert_int_equal(r.line_count, 0);
    uint8_t again[48];
    assert_int_equal(sims_boilerplate_record_encode(&r, NULL, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n);
    free(b);
}

/* Encode, decode and compare generated sets of every size up to 300. */
static void test_boilerplate_record_roundtrip__generated(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "boilerplate record", 77);
    uint64_t keys[300];
    for (unsigned count = 0; count <= 300; count += 1 + count / 7) {
        uint64_t k = test_rng_next(&rng) >> 20;
        for (unsigned i = 0; i < count; i++) {
            keys[i] = k;
            k += 1 + test_rng_below(&rng, 1ULL << 30);
        }
        sims_boilerplate_record r = {
            .version = 1,
            .fraction_millionths = 1 + (uint32_t)test_rng_below(&rng, 999999),
            .min_documents = test_rng_next(&rng),
            .documents = test_rng_next(&rng),
            .line_count = count,
        };
        size_t n = sims_boilerplate_record_size(count);
        uint8_t *buf = malloc(n);
        assert_int_equal(sims_boilerplate_record_encode(&r, keys, buf, n), n);
        sims_boilerplate_record back;
        assert_int_equal(sims_boilerplate_record_decode(buf, n, &back), 0);
        assert_int_equal(back.fraction_millionths, r.fraction_millionths);
        assert_true(back.min_documents == r.min_documents && back.documents == r.documents);
        assert_int_equal(back.line_count, count);
        for (unsigned i = 0; i < count; i++)
            assert_true(sims_boilerplate_record_key(&back, i) == keys[i]);
        free(buf);
    }
    assert_int_equal(sims_boilerplate_record_size(UINT64_MAX / 4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boilerplate_record_golden__three_lines),
        cmocka_unit_test(test_boilerplate_record_golden__empty_set),
        cmocka_unit_test(test_boilerplate_record_roundtrip__generated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
