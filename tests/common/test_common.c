/* test_common.c: lib/common: error messages, little-endian helpers, the
 * bounded cursor, counting bits, atomic output files and mappings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/bits.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/fileio.h"
#include "testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void test_common_error__codes_have_names(void **state)
{
    (void)state;
    int codes[] = {SIMSTORE_OK,     SIMSTORE_ENOTFOUND, SIMSTORE_ECORRUPT, SIMSTORE_EVERSION,
                   SIMSTORE_ENOMEM, SIMSTORE_EIO,       SIMSTORE_EFULL,    SIMSTORE_EINVAL,
                   SIMSTORE_EBUSY,  SIMSTORE_ERANGE,    SIMSTORE_EEXIST,   SIMSTORE_EREADONLY};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = simstore_strerror(codes[i]);
        assert_non_null(s);
        assert_string_not_equal(s, "unknown error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(s, simstore_strerror(codes[j]));
    }
    assert_string_equal(simstore_strerror(12345), "unknown error");
}

static void test_common_error__detail_and_context(void **state)
{
    (void)state;
    sims_error_clear();
    assert_string_equal(simstore_last_error(), "");
    assert_int_equal(sims_fail(SIMSTORE_EINVAL, "bad %s at %d", "thing", 7), SIMSTORE_EINVAL);
    assert_string_equal(simstore_last_error(), "bad thing at 7");
    assert_int_equal(sims_fail_context(SIMSTORE_EINVAL, "file %s", "x.tsv"), SIMSTORE_EINVAL);
    assert_string_equal(simstore_last_error(), "file x.tsv: bad thing at 7");
    assert_int_equal(SIMS_CORRUPT("block %u", 3u), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "block 3"));
}

/* An attempt that finds its view stale every time, in the state `stamps`
 * gives (0: says nothing, 1: always the same, 2: a new one each time), and
 * succeeds at attempt `ok_at` (0: never). */
typedef struct stale_reader {
    int stamps;
    unsigned ok_at;
    unsigned calls;
} stale_reader;

static int stale_attempt(void *ctx)
{
    stale_reader *r = (stale_reader *)ctx;
    r->calls++;
    if (r->ok_at && r->calls == r->ok_at)
        return SIMSTORE_OK;
    if (r->stamps == 1)
        sims_retry_saw(42);
    else if (r->stamps == 2)
        sims_retry_saw(r->calls);
    return sims_retry_or_fail(sims_fail(SIMSTORE_ECORRUPT, "torn"));
}

/* sims_retry: a view that stays the same and still looks torn is damage,
 * reported after SIMS_READ_ATTEMPTS attempts; a store that keeps moving is
 * read again past them, until an attempt succeeds. */
static void test_common_error__retry_goes_on_only_while_the_store_moves(void **state)
{
    (void)state;
    stale_reader quiet = {0, 0, 0};
    assert_int_equal(sims_retry(stale_attempt, &quiet), SIMSTORE_ECORRUPT);
    assert_int_equal(quiet.calls, SIMS_READ_ATTEMPTS);

    stale_reader damaged = {1, 0, 0};
    assert_int_equal(sims_retry(stale_attempt, &damaged), SIMSTORE_ECORRUPT);
    assert_int_equal(damaged.calls, SIMS_READ_ATTEMPTS);
    assert_non_null(strstr(simstore_last_error(), "torn"));

    stale_reader busy = {2, 3 * SIMS_READ_ATTEMPTS, 0};
    assert_int_equal(sims_retry(stale_attempt, &busy), SIMSTORE_OK);
    assert_int_equal(busy.calls, 3 * SIMS_READ_ATTEMPTS);

    /* The minimum holds whatever the stamps say. */
    stale_reader late = {1, SIMS_READ_ATTEMPTS, 0};
    assert_int_equal(sims_retry(stale_attempt, &late), SIMSTORE_OK);
    assert_int_equal(late.calls, SIMS_READ_ATTEMPTS);
}

static void test_common_bytes__little_and_big_endian(void **state)
{
    (void)state;
    uint8_t b[8];
    le_store64(b, 0x0102030405060708ULL);
    assert_int_equal(b[0], 0x08);
    assert_int_equal(b[7], 0x01);
    assert_true(le_load64(b) == 0x0102030405060708ULL);
    assert_int_equal(le_load32(b), 0x05060708u);
    assert_int_equal(le_load16(b), 0x0708u);
    be_store64(b, 0x0102030405060708ULL);
    assert_int_equal(b[0], 0x01);
    assert_true(be_load64(b) == 0x0102030405060708ULL);
}

static void test_common_bytes__cursor_never_overruns(void **state)
{
    (void)state;
    uint8_t buf[11] = {1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0};
    sims_cursor c;
    cursor_init(&c, buf, sizeof buf);
    uint16_t a;
    uint32_t b;
    uint64_t d;
    const uint8_t *p;
    assert_int_equal(cursor_u16(&c, &a), 0);
    assert_int_equal(a, 1);
    assert_int_equal(cursor_u32(&c, &b), 0);
    assert_int_equal(b, 2);
    assert_int_equal(cursor_remaining(&c), 5);
    assert_int_equal(cursor_u64(&c, &d), -1);
    assert_true(c.overrun);
    assert_int_equal(cursor_remaining(&c), 5);
    assert_int_equal(cursor_bytes(&c, 6, &p), -1);
    assert_int_equal(cursor_bytes(&c, 5, &p), 0);
    assert_int_equal(p[0], 3);
    assert_int_equal(cursor_skip(&c, 1), -1);
    assert_int_equal(cursor_skip(&c, 0), 0);
    /* A count larger than the buffer must not wrap around. */
    cursor_init(&c, buf, sizeof buf);
    assert_int_equal(cursor_skip(&c, SIZE_MAX), -1);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Appended bytes reach the file in whole 2 MiB pieces at multiples of 2 MiB
 * (so that the page cache can hold it in 2 MiB folios): after each append
 * the file holds exactly the pieces completed so far, the bytes appended
 * direct or buffered, small or large; a pwrite writes out what is buffered,
 * and the pieces after it end at multiples of 2 MiB again. The published
 * file holds every byte. */
static void test_common_fileio__writes_whole_aligned_pieces(void **state)
{
    (void)state;
    const size_t piece = (size_t)2 << 20;
    test_rng rng;
    test_rng_init(&rng, "fileio_pieces", 0x2F011E);
    char *dir = test_tmpdir("common");
    assert_non_null(dir);
    char *path = test_path(dir, "pieces.bin");
    size_t total = 9 * piece + 12345;
    uint8_t *want = malloc(total);
    assert_non_null(want);
    for (size_t i = 0; i < total; i++)
        want[i] = (uint8_t)test_rng_next(&rng);
    sims_outfile f;
    assert_int_equal(sims_outfile_open(&f, path), 0);
    size_t at = 0, flushed = 0, round = 0;
    while (at < total) {
        /* Sizes from a byte to over two pieces, some landing on a boundary. */
        size_t n;
        switch (round++ % 5) {
        case 0: n = 1 + (size_t)test_rng_below(&rng, 4096); break;
        case 1: n = 1 + (size_t)test_rng_below(&rng, piece); break;
        case 2: n = piece - at % piece; break;
        case 3: n = piece + (size_t)test_rng_below(&rng, 2 * piece); break;
        default: n = 2 * piece; break;
        }
        n = n < total - at ? n : total - at;
        assert_int_equal(sims_outfile_write(&f, want + at, n), 0);
        at += n;
        assert_int_equal(f.offset, at);
        size_t whole = at - at % piece;
        flushed = whole > flushed ? whole : flushed;
        struct stat st;
        assert_int_equal(fstat(f.fd, &st), 0);
        assert_int_equal((size_t)st.st_size, flushed);
        if (round == 4) { /* the buffered bytes go out, the rest realigns */
            want[1] ^= 0xFF;
            assert_int_equal(sims_outfile_pwrite(&f, want + 1, 1, 1), 0);
            flushed = at;
            assert_int_equal(fstat(f.fd, &st), 0);
            assert_int_equal((size_t)st.st_size, flushed);
        }
    }
    assert_int_equal(sims_outfile_commit(&f), 0);
    sims_map m;
    assert_int_equal(sims_map_open(path, &m), 0);
    assert_int_equal(m.size, total);
    assert_memory_equal(m.data, want, total);
    sims_map_close(&m);
    free(want);
    free(path);
    test_rmtree(dir);
    free(dir);
}

static void test_common_fileio__commit_publishes_abort_leaves_nothing(void **state)
{
    (void)state;
    char *dir = test_tmpdir("common");
    assert_non_null(dir);
    char *path = test_path(dir, "out.bin");

    sims_outfile f;
    assert_int_equal(sims_outfile_open(&f, path), 0);
    assert_int_equal(sims_outfile_write(&f, "hello, ", 7), 0);
    assert_int_equal(sims_outfile_write(&f, "world", 5), 0);
    assert_int_equal(sims_outfile_pwrite(&f, "H", 1, 0), 0);
    assert_int_equal(sims_outfile_pwrite(&f, "xx", 2, 11), SIMSTORE_EINVAL);
    struct stat st;
    assert_int_equal(stat(path, &st), -1); /* not visible before commit */
    assert_int_equal(sims_outfile_commit(&f), 0);

    sims_map m;
    assert_int_equal(sims_map_open(path, &m), 0);
    assert_int_equal(m.size, 12);
    assert_memory_equal(m.data, "Hello, world", 12);
    sims_map_close(&m);
    assert_int_equal(count_entries(dir), 1);

    assert_int_equal(sims_outfile_open(&f, path), 0);
    assert_int_equal(sims_outfile_write(&f, "zzz", 3), 0);
    sims_outfile_abort(&f);
    assert_int_equal(count_entries(dir), 1);
    assert_int_equal(sims_map_open(path, &m), 0);
    assert_int_equal(m.size, 12); /* the published file is untouched */
    sims_map_close(&m);

    char *missing = test_path(dir, "missing");
    assert_int_equal(sims_map_open(missing, &m), SIMSTORE_ENOTFOUND);
    free(missing);
    test_rmtree(dir);
    free(path);
    free(dir);
}

/* One bit at a time: the reference the word-wide counts must equal. */
static unsigned bits_one_by_one(uint64_t x)
{
    unsigned n = 0;
    for (unsigned b = 0; b < 64; b++)
        n += (unsigned)(x >> b & 1);
    return n;
}

/* sims_popcount64 (the instruction where the running CPU has it, a portable
 * build choosing at run time) and simstore_distance (the header's
 * compile-time rule: the branch-free count in a portable build) against the
 * reference, on every weight from 0 to 64 and on random words. */
static void test_common_bits__counts_equal_one_by_one(void **state)
{
    (void)state;
    uint64_t rng = 0x9E3779B97F4A7C15u;
    for (unsigned w = 0; w <= 64; w++) {
        for (unsigned rep = 0; rep < 64; rep++) {
            /* w distinct random bits set */
            uint64_t x = 0;
            while (bits_one_by_one(x) < w) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                x |= (uint64_t)1 << (rng & 63);
            }
            uint64_t y = rng * 0xD6E8FEB86659FD93u;
            assert_int_equal(sims_popcount64(x), w);
            assert_int_equal(simstore_distance(x, 0), w);
            assert_int_equal(sims_distance(x ^ y, y), w);
            assert_int_equal(sims_distance(x, y), bits_one_by_one(x ^ y));
            assert_int_equal(simstore_distance(x, y), bits_one_by_one(x ^ y));
        }
    }
    assert_int_equal(sims_popcount64(~(uint64_t)0), 64);
    assert_int_equal(sims_popcount64((uint64_t)1 << 63), 1);
    assert_int_equal(sims_distance(0, ~(uint64_t)0), 64);
}

/* One rule for scratch files: the given directory, else $TMPDIR, else /tmp
 * (an empty string counts as unset in both). */
static void test_common_fileio__scratch_dir_rule(void **state)
{
    (void)state;
    const char *was = getenv("TMPDIR");
    char *saved = was ? strdup(was) : NULL;
    setenv("TMPDIR", "/from/env", 1);
    assert_string_equal(sims_scratch_dir("/given"), "/given");
    assert_string_equal(sims_scratch_dir(NULL), "/from/env");
    assert_string_equal(sims_scratch_dir(""), "/from/env");
    setenv("TMPDIR", "", 1);
    assert_string_equal(sims_scratch_dir(NULL), "/tmp");
    unsetenv("TMPDIR");
    assert_string_equal(sims_scratch_dir(""), "/tmp");
    assert_string_equal(sims_scratch_dir("/given"), "/given");
    if (saved)
        setenv("TMPDIR", saved, 1);
    free(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common_fileio__scratch_dir_rule),
        cmocka_unit_test(test_common_error__codes_have_names),
        cmocka_unit_test(test_common_error__detail_and_context),
        cmocka_unit_test(test_common_error__retry_goes_on_only_while_the_store_moves),
        cmocka_unit_test(test_common_bytes__little_and_big_endian),
        cmocka_unit_test(test_common_bytes__cursor_never_overruns),
        cmocka_unit_test(test_common_bits__counts_equal_one_by_one),
        cmocka_unit_test(test_common_fileio__commit_publishes_abort_leaves_nothing),
        cmocka_unit_test(test_common_fileio__writes_whole_aligned_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
