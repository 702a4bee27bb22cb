/* test_table.c: lib/table: writer and reader round trips over many shapes and
 * sizes (block boundaries included), range cursors and the fused probe
 * against a sorted array and a brute-force popcount scan, block lookup,
 * corruption sweeps (every byte flipped, every truncation), golden files and
 * golden error files, writer input validation and atomic publishing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/bytes.h"
#include "common/checksum.h"
#include "simstore.h"
#include "table/table.h"
#include "testutil.h"

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The block keys as an array (the reader keeps them in Elias-Fano form). */
static uint64_t *reader_keys(const table_reader *r)
{
    uint64_t nb = sims_table_reader_info(r)->block_count;
    uint64_t *keys = malloc((size_t)(nb + 1) * sizeof *keys);
    assert_non_null(keys);
    for (uint64_t b = 0; b < nb; b++)
        keys[b] = sims_table_reader_key(r, b);
    return keys;
}

static const char *self_exe; /* argv[0], re-executed by the fault test */

/* ---- data sets -------------------------------------------------------------------- */

enum shape { UNIFORM, CLUSTERED, DENSE, PREFIX_SHARING, EXTREMES, SHAPE_COUNT };
static const char *const shape_names[SHAPE_COUNT] = {"uniform", "clustered", "dense",
                                                     "prefix-sharing", "extremes"};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static size_t sort_unique(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    return m;
}

/* n sorted distinct values (returns how many; duplicates removed). */
static size_t make_set(test_rng *rng, enum shape shape, uint64_t *v, size_t n)
{
    uint64_t base = test_rng_next(rng);
    for (size_t i = 0; i < n; i++) {
        switch (shape) {
        case UNIFORM: v[i] = test_rng_next(rng); break;
        case CLUSTERED: /* a few dense clusters at random places */
            v[i] = ((test_rng_below(rng, 16) * 0x0F0F0F0F0F0F0F0FULL) ^ base) +
                   (test_rng_next(rng) >> (28 + test_rng_below(rng, 30)));
            break;
        case DENSE: v[i] = (base >> 1) + i; break;
        case PREFIX_SHARING: /* groups sharing their top 40 bits */
            v[i] = ((base + test_rng_below(rng, 1 + n / 64)) << 24) | (test_rng_next(rng) >> 40);
            break;
        case EXTREMES:
        default: {
            uint64_t r = test_rng_below(rng, 4);
            uint64_t off = test_rng_below(rng, n + 1);
            v[i] = r == 0   ? off
                   : r == 1 ? UINT64_MAX - off
                   : r == 2 ? test_rng_next(rng)
                            : (uint64_t)1 << 63 ^ off;
            break;
        }
        }
    }
    if (shape == EXTREMES && n >= 2) {
        v[0] = 0;
        v[1] = UINT64_MAX;
    }
    return sort_unique(v, n);
}

static table_params make_params(uint32_t block_bytes)
{
    table_params p;
    memset(&p, 0, sizeof p);
    p.block_bytes = block_bytes;
    p.prefix_bits = 17;
    for (unsigned i = 0; i < 64; i++)
        p.perm[i] = (uint8_t)((i * 5 + 3) % 64);
    p.store_tag = 0xA11CE5EED0000001ULL;
    p.table_index = 9;
    return p;
}

/* ---- scanning helpers ----------------------------------------------------------------- */

/* All values in [lo, hi] through a cursor with output chunks of `cap`;
 * returns the cursor's result, *n the count. */
static int scan_range(const table_reader *r, uint64_t lo, uint64_t hi, size_t cap, uint64_t *out,
                      size_t out_cap, size_t *n)
{
    table_cursor c;
    int rc = sims_table_cursor_init(&c, r, lo, hi);
    *n = 0;
    uint64_t *buf = malloc(cap * sizeof *buf);
    while (!rc) {
        size_t k;
        rc = sims_table_cursor_next(&c, buf, cap, &k);
        if (rc || k == 0)
            break;
        assert_true(k <= cap);
        assert_true(*n + k <= out_cap);
        memcpy(out + *n, buf, k * sizeof *buf);
        *n += k;
    }
    free(buf);
    return rc;
}

static size_t lower_bound(const uint64_t *v, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Open, check info, scan everything three ways, decode every block. */
static void check_table(const uint8_t *buf, size_t size, const table_params *p, const uint64_t *v,
                        size_t n)
{
    table_reader *r;
    assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &r), 0);
    const table_info *in = sims_table_reader_info(r);
    assert_true(in->fp_count == n);
    assert_int_equal(in->params.block_bytes, p->block_bytes);
    assert_int_equal(in->params.prefix_bits, p->prefix_bits);
    assert_memory_equal(in->params.perm, p->perm, 64);
    assert_true(in->params.store_tag == p->store_tag);
    assert_int_equal(in->params.table_index, p->table_index);
    assert_int_equal(in->format_version, TABLE_FORMAT_VERSION);
    assert_true(in->file_bytes == size);
    assert_true(in->index_offset == in->blocks_offset + in->block_count * p->block_bytes);
    /* What the reader keeps of the index in RAM: 24 bytes per chunk of 256
     * blocks and a byte per top page of 128 chunks. */
    assert_true(in->key_ram_bytes == 24 * ((in->block_count + 255) / 256) +
                                         (in->block_count + 256 * 128 - 1) / (256 * 128));

    uint64_t *out = malloc((n + 1) * sizeof *out);
    size_t got;
    assert_int_equal(scan_range(r, 0, UINT64_MAX, 4096, out, n + 1, &got), 0);
    assert_true(got == n);
    if (n)
        assert_memory_equal(out, v, n * sizeof *v);
    assert_int_equal(scan_range(r, 0, UINT64_MAX, 7, out, n + 1, &got), 0);
    assert_true(got == n);
    if (n)
        assert_memory_equal(out, v, n * sizeof *v);

    /* Whole blocks: counts, keys, concatenation. */
    uint64_t *keys = reader_keys(r);
    size_t pos = 0;
    uint64_t *blk = malloc(65536 * 8 * sizeof *blk);
    for (uint64_t b = 0; b < in->block_count; b++) {
        size_t k;
        assert_int_equal(sims_table_reader_block(r, b, blk, 65536 * 8, &k), 0);
        assert_true(k == sims_table_reader_block_count(r, b));
        assert_true(k >= 1);
        assert_true(keys[b] == blk[k - 1]);
        assert_memory_equal(blk, v + pos, k * sizeof *v);
        pos += k;
        assert_int_equal(sims_table_reader_check_block(r, b), 0);
        uint64_t bits;
        assert_int_equal(sims_table_reader_block_bits(r, b, &bits), 0);
        assert_true(bits <= 8ull * p->block_bytes);
    }
    assert_true(pos == n);
    assert_int_equal(sims_table_reader_block(r, in->block_count, blk, 8, &got), SIMSTORE_EINVAL);
    free(blk);
    free(out);
    free(keys);
    sims_table_reader_close(r);
}

/* ---- round trips ---------------------------------------------------------------------- */

static void test_table_roundtrip__shapes_and_block_boundaries(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table shapes", 1001);
    static const uint32_t sizes[] = {256, 1024, 4096};
    enum { BASE = 12000 };
    uint64_t *v = malloc(BASE * sizeof *v);
    for (int shape = 0; shape < SHAPE_COUNT; shape++) {
        for (size_t si = 0; si < 3; si++) {
            table_params p = make_params(sizes[si]);
            size_t n = make_set(&rng, (enum shape)shape, v, BASE);
            /* Fix the code with the whole set's histogram: then a prefix of
             * the set has the same block boundaries as the whole. */
            uint64_t hist[64] = {0}, prev = 0;
            int have = 0;
            sims_table_histogram_add(hist, &prev, &have, v, n);
            uint8_t *buf;
            size_t size;
            assert_int_equal(sims_table_encode_memory_hist(&p, hist, v, n, &buf, &size), 0);
            table_reader *r;
            assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &r), 0);
            uint64_t nb = sims_table_reader_info(r)->block_count;
            size_t b0 = sims_table_reader_block_count(r, 0);
            size_t b1 = nb > 1 ? b0 + sims_table_reader_block_count(r, 1) : b0;
            sims_table_reader_close(r);
            check_table(buf, size, &p, v, n);
            free(buf);

            size_t cuts[] = {0, 1, 2, b0 - 1, b0, b0 + 1, b1 - 1, b1, b1 + 1};
            for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
                size_t m = cuts[c] <= n ? cuts[c] : n;
                assert_int_equal(sims_table_encode_memory_hist(&p, hist, v, m, &buf, &size), 0);
                check_table(buf, size, &p, v, m);
                table_reader *rr;
                assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &rr), 0);
                const table_info *in = sims_table_reader_info(rr);
                /* Boundaries: b0 values fill exactly one block. */
                if (m == b0 && m)
                    assert_true(in->block_count == 1);
                if (m == b0 + 1 && m <= n && nb > 1)
                    assert_true(in->block_count == 2);
                sims_table_reader_close(rr);
                free(buf);
            }
            (void)shape_names;
        }
    }
    free(v);
}

static void test_table_roundtrip__empty_and_one(void **state)
{
    (void)state;
    table_params p = make_params(1024);
    uint8_t *buf;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&p, NULL, 0, &buf, &size), 0);
    /* header + gap, no blocks, an empty index (version 3), footer */
    assert_true(size == 1024 + 0 + 64);
    check_table(buf, size, &p, NULL, 0);
    table_reader *r;
    assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &r), 0);
    assert_true(sims_table_reader_find_block(r, 0) == 0);
    assert_int_equal(sims_table_reader_search(r, 0, UINT64_MAX, 0, 64, NULL, NULL), 0);
    sims_table_reader_close(r);
    free(buf);

    uint64_t extremes[] = {0, UINT64_MAX};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sims_table_encode_memory(&p, &extremes[i], 1, &buf, &size), 0);
        check_table(buf, size, &p, &extremes[i], 1);
        free(buf);
    }
    assert_int_equal(sims_table_encode_memory(&p, extremes, 2, &buf, &size), 0);
    check_table(buf, size, &p, extremes, 2);
    free(buf);
}

static void test_table_roundtrip__million_through_files(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table million", 1002);
    enum { N = 1000000 };
    uint64_t *v = malloc(N * sizeof *v);
    char *dir = test_tmpdir("table");
    assert_non_null(dir);
    for (int shape = 0; shape < SHAPE_COUNT; shape++) {
        size_t n = make_set(&rng, (enum shape)shape, v, N);
        table_params p = make_params(shape == UNIFORM ? 1024 : 4096);
        uint64_t hist[64] = {0}, prev = 0;
        int have = 0;
        /* Histogram and writer both fed in uneven chunks, as a stream. */
        for (size_t i = 0; i < n;) {
            size_t k = 1 + (size_t)test_rng_below(&rng, 50000);
            k = k < n - i ? k : n - i;
            sims_table_histogram_add(hist, &prev, &have, v + i, k);
            i += k;
        }
        char *path = test_path(dir, "t.tbl");
        table_writer *w;
        assert_int_equal(sims_table_writer_open(path, &p, hist, &w), 0);
        /* Every other shape spills its index through a tiny buffer: the file
         * must come out the same. */
        if (shape % 2)
            sims_table_writer_index_buffer(w, 7);
        for (size_t i = 0; i < n;) {
            size_t k = (size_t)test_rng_below(&rng, 70000);
            k = k < n - i ? k : n - i;
            assert_int_equal(sims_table_writer_add(w, v + i, k), 0);
            i += k;
        }
        assert_int_equal(sims_table_writer_finish(w), 0);

        /* The file equals the in-memory encoding byte for byte. */
        size_t fsize;
        uint8_t *file = test_read_file(path, &fsize);
        assert_non_null(file);
        uint8_t *mem;
        size_t msize;
        assert_int_equal(sims_table_encode_memory(&p, v, n, &mem, &msize), 0);
        assert_true(fsize == msize);
        assert_memory_equal(file, mem, msize);
        free(mem);
        free(file);

        table_reader *r;
        assert_int_equal(sims_table_reader_open(path, 0, &r), 0);
        uint64_t *out = malloc((n + 1) * sizeof *out);
        size_t got;
        assert_int_equal(scan_range(r, 0, UINT64_MAX, 100000, out, n + 1, &got), 0);
        assert_true(got == n);
        assert_memory_equal(out, v, n * sizeof *v);
        free(out);
        sims_table_reader_close(r);
        unlink(path);
        free(path);
        /* Spill files are unlinked at creation: nothing is left behind. */
        char cmd[512];
        snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
        assert_int_equal(system(cmd), 0);
    }
    test_rmtree(dir);
    free(dir);
    free(v);
}

/* ---- ranges and search --------------------------------------------------------------- */

struct collect {
    uint64_t *v;
    size_t n, cap;
    size_t stop_after; /* return 7 after this many (0: never) */
};

static int collect_emit(void *ctx, uint64_t value)
{
    struct collect *c = ctx;
    assert_true(c->n < c->cap);
    c->v[c->n++] = value;
    return c->stop_after && c->n == c->stop_after ? 7 : 0;
}

static void test_table_range__matches_sorted_array(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table ranges", 1003);
    enum { N = 30000 };
    uint64_t *v = malloc(N * sizeof *v);
    uint64_t *out = malloc((N + 1) * sizeof *out);
    for (int shape = 0; shape < SHAPE_COUNT; shape++) {
        size_t n = make_set(&rng, (enum shape)shape, v, N);
        table_params p = make_params(256u << (shape % 3));
        uint8_t *buf;
        size_t size;
        assert_int_equal(sims_table_encode_memory(&p, v, n, &buf, &size), 0);
        table_reader *r;
        assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &r), 0);
        uint64_t *keys = reader_keys(r);
        uint64_t nb = sims_table_reader_info(r)->block_count;
        for (int q = 0; q < 400; q++) {
            uint64_t lo, hi;
            switch (q % 5) {
            case 0: /* around a stored value */
                lo = v[test_rng_below(&rng, n)];
                hi = lo + test_rng_below(&rng, 1000);
                if (test_rng_below(&rng, 2) && lo > 0)
                    lo--;
                break;
            case 1: /* a block key, exactly */ lo = hi = keys[test_rng_below(&rng, nb)]; break;
            case 2: { /* a prefix range, as the store asks */
                unsigned bits = 1 + (unsigned)test_rng_below(&rng, 30);
                lo = v[test_rng_below(&rng, n)] & ~(UINT64_MAX >> bits);
                hi = lo | (UINT64_MAX >> bits);
                break;
            }
            case 3: /* arbitrary */
                lo = test_rng_next(&rng);
                hi = lo + (test_rng_next(&rng) >> test_rng_below(&rng, 64));
                if (hi < lo)
                    hi = UINT64_MAX;
                break;
            default: /* empty or inverted */
                lo = test_rng_next(&rng);
                hi = lo - 1 - test_rng_below(&rng, 10);
                if (lo < 20)
                    lo = hi = 0;
                break;
            }
            size_t a = lower_bound(v, n, lo);
            size_t want = 0;
            if (lo <= hi) {
                size_t b = hi == UINT64_MAX ? n : lower_bound(v, n, hi + 1);
                want = b > a ? b - a : 0;
            }
            size_t got;
            size_t cap = 1 + (size_t)test_rng_below(&rng, q % 2 ? 5 : 3000);
            assert_int_equal(scan_range(r, lo, hi, cap, out, N + 1, &got), 0);
            assert_true(got == want);
            if (want)
                assert_memory_equal(out, v + a, want * sizeof *v);

            /* The probe with k = 64 emits the same values. */
            struct collect c = {out, 0, N + 1, 0};
            assert_int_equal(
                sims_table_reader_search(r, lo, hi, test_rng_next(&rng), 64, collect_emit, &c), 0);
            assert_true(c.n == want);
            if (want)
                assert_memory_equal(out, v + a, want * sizeof *v);
        }
        free(keys);
        sims_table_reader_close(r);
        free(buf);
    }
    free(v);
    free(out);
}

static void test_table_search__matches_brute_force(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table search", 1004);
    enum { N = 50000 };
    uint64_t *v = malloc(N * sizeof *v);
    uint64_t *want = malloc(N * sizeof *want);
    uint64_t *got = malloc(N * sizeof *got);
    for (int shape = 0; shape < SHAPE_COUNT; shape++) {
        size_t n = make_set(&rng, (enum shape)shape, v, N);
        table_params p = make_params(1024);
        uint8_t *buf;
        size_t size;
        assert_int_equal(sims_table_encode_memory(&p, v, n, &buf, &size), 0);
        table_reader *r;
        assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &r), 0);
        for (int t = 0; t < 300; t++) {
            /* Queries near stored values (so matches exist), or random. */
            uint64_t q = v[test_rng_below(&rng, n)];
            unsigned flips = (unsigned)test_rng_below(&rng, 6);
            for (unsigned f = 0; f < flips; f++)
                q ^= (uint64_t)1 << test_rng_below(&rng, 64);
            if (t % 7 == 0)
                q = test_rng_next(&rng);
            unsigned k = (unsigned)test_rng_below(&rng, 7);
            unsigned prefix = (unsigned)test_rng_below(&rng, 24);
            uint64_t lo = prefix ? q & ~(UINT64_MAX >> prefix) : 0;
            uint64_t hi = prefix ? lo | (UINT64_MAX >> prefix) : UINT64_MAX;
            size_t nw = 0;
            for (size_t i = 0; i < n; i++)
                if (v[i] >= lo && v[i] <= hi && simstore_distance(v[i], q) <= k)
                    want[nw++] = v[i];
            struct collect c = {got, 0, N, 0};
            assert_int_equal(sims_table_reader_search(r, lo, hi, q, k, collect_emit, &c), 0);
            assert_true(c.n == nw);
            if (nw)
                assert_memory_equal(got, want, nw * sizeof *want);
            /* emit's nonzero result stops the scan and comes back. */
            if (nw >= 2) {
                struct collect s = {got, 0, N, 2};
                assert_int_equal(sims_table_reader_search(r, lo, hi, q, k, collect_emit, &s), 7);
                assert_true(s.n == 2);
            }
        }
        sims_table_reader_close(r);
        free(buf);
    }
    free(v);
    free(want);
    free(got);
}

/* Where a search of [lo, hi] starts: as a query finds it
 * (sims_table_reader_prefetch, the first block's keys carried to the search), or
 * the first block alone. */
static table_start start_of(const table_reader *r, uint64_t lo, uint64_t hi, unsigned prefetch)
{
    table_start at = {sims_table_reader_find_block(r, lo), 0, 0, 0, 0, 0, UINT64_MAX};
    if (prefetch) {
        /* Twice in three: the index hint first, as a query gives it. */
        if (prefetch % 3)
            sims_table_reader_prefetch_index(r, lo, &at);
        sims_table_reader_prefetch(r, lo, hi, &at);
        if (lo <= hi)
            assert_true(at.first == sims_table_reader_find_block(r, lo));
    }
    return at;
}

static void test_table_search_two__matches_brute_force(void **state)
{
    (void)state;
    /* Two tables of different shapes and block sizes searched at once: each
     * probe emits exactly its own matches, in order; an emit's nonzero
     * result stops its probe and comes back (the first probe's first). */
    test_rng rng;
    test_rng_init(&rng, "table search two", 1010);
    enum { N = 30000 };
    uint64_t *v[2], *want[2], *got[2];
    for (int j = 0; j < 2; j++) {
        v[j] = malloc(N * sizeof(uint64_t));
        want[j] = malloc(N * sizeof(uint64_t));
        got[j] = malloc(N * sizeof(uint64_t));
    }
    static const uint32_t sizes[] = {256, 512, 1024, 4096};
    for (int round = 0; round < 2 * SHAPE_COUNT; round++) {
        size_t n[2];
        table_reader *r[2];
        uint8_t *buf[2];
        for (int j = 0; j < 2; j++) {
            n[j] = make_set(&rng, (enum shape)((round + 2 * j) % SHAPE_COUNT), v[j], N);
            table_params p = make_params(sizes[test_rng_below(&rng, 4)]);
            size_t size;
            assert_int_equal(sims_table_encode_memory(&p, v[j], n[j], &buf[j], &size), 0);
            assert_int_equal(sims_table_reader_open_memory(buf[j], size, 0, &r[j]), 0);
        }
        for (int t = 0; t < 300; t++) {
            struct collect c[2];
            table_probe tp[2];
            size_t nw[2];
            for (int j = 0; j < 2; j++) {
                uint64_t q = n[j] ? v[j][test_rng_below(&rng, n[j])] : 0;
                unsigned flips = (unsigned)test_rng_below(&rng, 6);
                for (unsigned f = 0; f < flips; f++)
                    q ^= (uint64_t)1 << test_rng_below(&rng, 64);
                if (t % 7 == j)
                    q = test_rng_next(&rng);
                unsigned k = (unsigned)test_rng_below(&rng, 7);
                unsigned prefix = (unsigned)test_rng_below(&rng, 24);
                uint64_t lo = prefix ? q & ~(UINT64_MAX >> prefix) : 0;
                uint64_t hi = prefix ? lo | (UINT64_MAX >> prefix) : UINT64_MAX;
                if (t % 11 == 0 && j == 1)
                    lo = hi + (hi < UINT64_MAX), hi = lo - 1 + (lo == 0); /* empty range */
                nw[j] = 0;
                for (size_t i = 0; i < n[j]; i++)
                    if (v[j][i] >= lo && v[j][i] <= hi && simstore_distance(v[j][i], q) <= k)
                        want[j][nw[j]++] = v[j][i];
                c[j] = (struct collect){got[j], 0, N, 0};
                tp[j] = (table_probe){
                    r[j], start_of(r[j], lo, hi, (unsigned)(t + j) % 4), lo, hi, q, k, collect_emit,
                    &c[j]};
            }
            assert_int_equal(sims_table_reader_search_two(&tp[0], &tp[1]), 0);
            for (int j = 0; j < 2; j++) {
                assert_true(c[j].n == nw[j]);
                if (nw[j])
                    assert_memory_equal(got[j], want[j], nw[j] * sizeof(uint64_t));
            }
            /* Stops: the second probe's result when the first ends well;
             * the first's when both stop. */
            for (int j = 0; j < 2; j++)
                c[j] = (struct collect){got[j], 0, N, 0};
            if (nw[1] >= 2) {
                c[1].stop_after = 2;
                assert_int_equal(sims_table_reader_search_two(&tp[0], &tp[1]), 7);
                assert_true(c[0].n == nw[0] && c[1].n == 2);
                if (nw[0] >= 1) {
                    c[0] = (struct collect){got[0], 0, N, 1};
                    c[1] = (struct collect){got[1], 0, N, 2};
                    assert_int_equal(sims_table_reader_search_two(&tp[0], &tp[1]), 7);
                    assert_true(c[0].n == 1);
                }
            }
        }
        for (int j = 0; j < 2; j++) {
            sims_table_reader_close(r[j]);
            free(buf[j]);
        }
    }
    for (int j = 0; j < 2; j++) {
        free(v[j]);
        free(want[j]);
        free(got[j]);
    }
}

static void test_table_find_block__matches_linear_search(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table find_block", 1005);
    enum { N = 40000 };
    uint64_t *v = malloc(N * sizeof *v);
    for (int shape = 0; shape < SHAPE_COUNT; shape++) {
        size_t n = make_set(&rng, (enum shape)shape, v, N);
        table_params p = make_params(256);
        uint8_t *buf;
        size_t size;
        assert_int_equal(sims_table_encode_memory(&p, v, n, &buf, &size), 0);
        table_reader *r;
        assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &r), 0);
        uint64_t *keys = reader_keys(r);
        uint64_t nb = sims_table_reader_info(r)->block_count;
        for (int t = 0; t < 3000; t++) {
            uint64_t x;
            switch (t % 4) {
            case 0: x = test_rng_next(&rng); break;
            case 1: x = keys[test_rng_below(&rng, nb)]; break;
            case 2: x = keys[test_rng_below(&rng, nb)] + 1; break;
            default: x = v[test_rng_below(&rng, n)]; break;
            }
            uint64_t want = 0;
            while (want < nb && keys[want] < x)
                want++;
            assert_true(sims_table_reader_find_block(r, x) == want);
        }
        assert_true(sims_table_reader_find_block(r, 0) == 0);
        assert_true(sims_table_reader_find_block(r, UINT64_MAX) ==
                    (keys[nb - 1] == UINT64_MAX ? nb - 1 : nb));
        free(keys);
        sims_table_reader_close(r);
        free(buf);
    }
    free(v);
}

/* ---- corruption ------------------------------------------------------------------------- */

/* Everything a reader can be asked, as one fingerprint of the answers: the
 * full scan, a few ranges and probes. Returns 0 with *digest set, or the
 * first error. */
static int answer_digest(const uint8_t *buf, size_t size, unsigned flags, const uint64_t *probes,
                         size_t np, uint64_t *digest)
{
    table_reader *r;
    int rc = sims_table_reader_open_memory(buf, size, flags, &r);
    if (rc)
        return rc;
    uint64_t h = 1469598103934665603ULL;
    table_cursor c;
    sims_table_cursor_init(&c, r, 0, UINT64_MAX);
    uint64_t out[64];
    size_t k;
    while (!(rc = sims_table_cursor_next(&c, out, 64, &k)) && k)
        for (size_t i = 0; i < k; i++)
            h = (h ^ out[i]) * 1099511628211ULL;
    for (size_t i = 0; !rc && i < np; i++) {
        uint64_t lo = probes[i] & ~(UINT64_MAX >> 6), hi = lo | (UINT64_MAX >> 6);
        uint64_t got[4096];
        struct collect col = {got, 0, 4096, 0};
        rc = sims_table_reader_search(r, lo, hi, probes[i], 20, collect_emit, &col);
        for (size_t j = 0; j < col.n; j++)
            h = (h ^ got[j]) * 1099511628211ULL;
        h = (h ^ col.n) * 1099511628211ULL;
    }
    /* Two probes at once give what each gives alone, the error included. */
    for (size_t i = 0; !rc && i + 1 < np; i += 2) {
        static uint64_t got[2][2][4096];
        struct collect one[2], two[2];
        table_probe tp[2];
        int single[2];
        for (int j = 0; j < 2; j++) {
            uint64_t q = probes[i + j], lo = q & ~(UINT64_MAX >> 6), hi = lo | (UINT64_MAX >> 6);
            one[j] = (struct collect){got[0][j], 0, 4096, 0};
            two[j] = (struct collect){got[1][j], 0, 4096, 0};
            single[j] = sims_table_reader_search(r, lo, hi, q, 20, collect_emit, &one[j]);
            tp[j] = (table_probe){
                r, start_of(r, lo, hi, j == 0 ? 1 : 3), lo, hi, q, 20, collect_emit, &two[j]};
        }
        int both = sims_table_reader_search_two(&tp[0], &tp[1]);
        assert_int_equal(both, single[0] ? single[0] : single[1]);
        for (int j = 0; !both && j < 2; j++) {
            assert_true(one[j].n == two[j].n);
            if (one[j].n)
                assert_memory_equal(one[j].v, two[j].v, one[j].n * sizeof(uint64_t));
        }
        rc = both;
    }
    const table_info *in = sims_table_reader_info(r);
    h = (h ^ in->params.store_tag ^ in->params.table_index ^ in->params.prefix_bits) * 31;
    for (unsigned i = 0; i < 64; i++)
        h = (h ^ in->params.perm[i]) * 31;
    sims_table_reader_close(r);
    *digest = h;
    return rc;
}

static void corruption_sweep(const uint64_t *v, size_t n, uint32_t block_bytes)
{
    table_params p = make_params(block_bytes);
    uint8_t *buf;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&p, v, n, &buf, &size), 0);
    uint64_t probes[4] = {n ? v[0] : 1, n ? v[n / 2] ^ 5 : 2, n ? v[n - 1] : 3,
                          0x8000000000000000ULL};
    uint64_t good;
    assert_int_equal(answer_digest(buf, size, 0, probes, 4, &good), 0);

    static const uint8_t masks[] = {0x01, 0x80, 0xFF, 0x10};
    size_t detected = 0, same = 0, trials = 0, skip_errors = 0;
    uint8_t *copy = malloc(size);
    for (size_t off = 0; off < size; off++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(copy, buf, size);
            copy[off] ^= masks[m];
            uint64_t d;
            int rc = answer_digest(copy, size, 0, probes, 4, &d);
            trials++;
            if (rc) {
                assert_true(rc == SIMSTORE_ECORRUPT || rc == SIMSTORE_EVERSION);
                detected++;
            } else {
                /* An undetected change must not change any answer. */
                assert_true(d == good);
                same++;
            }
            /* Without block checksums: any outcome but a crash (ASan/UBSan
             * watch the decoder). */
            if (answer_digest(copy, size, TABLE_SKIP_BLOCK_CHECKSUMS, probes, 4, &d))
                skip_errors++;
        }
    }
    fprintf(stderr,
            "corruption sweep: %zu bytes (%zu values, %u-byte blocks), %zu "
            "flips: %zu detected, %zu undetected (same answer); without block checksums "
            "%zu detected\n",
            size, n, block_bytes, trials, detected, same, skip_errors);
    /* Every byte is covered by a checksum or a must-be-zero rule. */
    assert_true(same == 0);

    /* Every truncation, and an extension, fails at open. */
    for (size_t len = 0; len < size; len++) {
        table_reader *r;
        memcpy(copy, buf, len);
        int rc = sims_table_reader_open_memory(copy, len, 0, &r);
        assert_int_equal(rc, SIMSTORE_ECORRUPT);
    }
    uint8_t *longer = malloc(size + 1);
    memcpy(longer, buf, size);
    longer[size] = 0;
    table_reader *r;
    assert_int_equal(sims_table_reader_open_memory(longer, size + 1, 0, &r), SIMSTORE_ECORRUPT);
    free(longer);
    free(copy);
    free(buf);
}

static void test_table_corruption__every_byte_and_truncation(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table corruption", 1006);
    uint64_t v[200];
    size_t n = make_set(&rng, UNIFORM, v, 200); /* ~6 blocks of 256 bytes */
    corruption_sweep(v, n, 256);
    n = make_set(&rng, DENSE, v, 200);
    corruption_sweep(v, n, 256);
    corruption_sweep(v, 1, 256);
    corruption_sweep(v, 0, 256);
}

static void test_table_corruption__skip_checksums_flag(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table skip checksums", 1007);
    uint64_t v[3000];
    size_t n = make_set(&rng, UNIFORM, v, 3000);
    table_params p = make_params(256);
    uint8_t *buf;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&p, v, n, &buf, &size), 0);
    table_reader *r;
    /* Random damage inside blocks: checked readers fail, unchecked readers
     * may return anything but must not crash or loop. */
    for (int t = 0; t < 2000; t++) {
        uint8_t *copy = malloc(size);
        memcpy(copy, buf, size);
        size_t nb = (size - 256 - 64) / (256 + 16);
        size_t flips = 1 + (size_t)test_rng_below(&rng, 20);
        for (size_t f = 0; f < flips; f++)
            copy[256 + test_rng_below(&rng, nb * 256)] ^= (uint8_t)(1 + test_rng_below(&rng, 255));
        uint64_t d, probes[2] = {v[test_rng_below(&rng, n)], test_rng_next(&rng)};
        assert_int_equal(answer_digest(copy, size, 0, probes, 2, &d), SIMSTORE_ECORRUPT);
        int rc = answer_digest(copy, size, TABLE_SKIP_BLOCK_CHECKSUMS, probes, 2, &d);
        assert_true(rc == 0 || rc == SIMSTORE_ECORRUPT);
        free(copy);
    }
    assert_int_equal(sims_table_reader_open_memory(buf, size, 0x80, &r), SIMSTORE_EINVAL);
    free(buf);
}

/* ---- golden files ------------------------------------------------------------------------ */

static char *golden_path(const char *name)
{
    char *dir = test_path(test_source_dir(), "format/golden");
    char *p = test_path(dir, name);
    free(dir);
    return p;
}

/* Parse a golden .txt: fields into p / info values; returns the values. */
static uint64_t *parse_golden_txt(const char *path, table_params *p, uint8_t code_lengths[64],
                                  uint64_t hist[64], int *has_hist, size_t *n,
                                  uint64_t *block_count, uint64_t *file_bytes)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    uint64_t *v = NULL;
    size_t got = 0;
    *has_hist = 0;
    *n = 0;
    memset(p, 0, sizeof *p);
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char key[64];
        int used;
        if (sscanf(line, "%63s%n", key, &used) != 1)
            continue;
        char *rest = line + used;
        if (!strcmp(key, "format_version"))
            assert_int_equal(strtoul(rest, NULL, 0), TABLE_FORMAT_VERSION);
        else if (!strcmp(key, "block_bytes"))
            p->block_bytes = (uint32_t)strtoul(rest, NULL, 0);
        else if (!strcmp(key, "prefix_bits"))
            p->prefix_bits = (uint8_t)strtoul(rest, NULL, 0);
        else if (!strcmp(key, "store_tag"))
            p->store_tag = strtoull(rest, NULL, 0);
        else if (!strcmp(key, "table_index"))
            p->table_index = (uint32_t)strtoul(rest, NULL, 0);
        else if (!strcmp(key, "block_count"))
            *block_count = strtoull(rest, NULL, 0);
        else if (!strcmp(key, "file_bytes"))
            *file_bytes = strtoull(rest, NULL, 0);
        else if (!strcmp(key, "perm") || !strcmp(key, "code_lengths") ||
                 !strcmp(key, "histogram")) {
            char *s = rest;
            for (unsigned i = 0; i < 64; i++) {
                uint64_t x = strtoull(s, &s, 0);
                if (key[0] == 'p')
                    p->perm[i] = (uint8_t)x;
                else if (key[0] == 'c')
                    code_lengths[i] = (uint8_t)x;
                else
                    hist[i] = x;
            }
            if (key[0] == 'h')
                *has_hist = 1;
        } else if (!strcmp(key, "fingerprints")) {
            *n = strtoull(rest, NULL, 0);
            v = malloc((*n + 1) * sizeof *v);
        } else if (v && got < *n) {
            v[got++] = strtoull(key, NULL, 16);
        }
    }
    fclose(f);
    assert_true(got == *n);
    return v;
}

static void test_table_golden__valid_files_decode(void **state)
{
    (void)state;
    char *dir = test_path(test_source_dir(), "format/golden");
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "table-", 6) || strncmp(e->d_name, "table-err", 9) == 0 || len < 5 ||
            strcmp(e->d_name + len - 4, ".tbl"))
            continue;
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(len - 4), e->d_name);
        char txt[300];
        snprintf(txt, sizeof txt, "%s.txt", base);
        char *tbl_path = golden_path(e->d_name), *txt_path = golden_path(txt);
        table_params p;
        uint8_t code_lengths[64];
        uint64_t hist[64], block_count = 0, file_bytes = 0;
        int has_hist;
        size_t n;
        uint64_t *v = parse_golden_txt(txt_path, &p, code_lengths, hist, &has_hist, &n,
                                       &block_count, &file_bytes);
        size_t size;
        uint8_t *buf = test_read_file(tbl_path, &size);
        assert_non_null(buf);
        assert_true(size == file_bytes);
        check_table(buf, size, &p, v, n);
        table_reader *r;
        assert_int_equal(sims_table_reader_open(tbl_path, 0, &r), 0);
        assert_memory_equal(sims_table_reader_info(r)->code_lengths, code_lengths, 64);
        assert_true(sims_table_reader_info(r)->block_count == block_count);
        sims_table_reader_close(r);
        /* The encoder still produces these exact bytes: the format is frozen. */
        uint8_t *again;
        size_t again_size;
        if (has_hist)
            assert_int_equal(sims_table_encode_memory_hist(&p, hist, v, n, &again, &again_size), 0);
        else
            assert_int_equal(sims_table_encode_memory(&p, v, n, &again, &again_size), 0);
        assert_true(again_size == size);
        assert_memory_equal(again, buf, size);
        free(again);
        free(buf);
        free(v);
        free(tbl_path);
        free(txt_path);
        files++;
    }
    closedir(d);
    free(dir);
    fprintf(stderr, "golden: %d valid table files decoded\n", files);
    assert_true(files >= 8);
}

static void test_table_golden__error_files_fail(void **state)
{
    (void)state;
    char *list = golden_path("table-errors.txt");
    FILE *f = fopen(list, "r");
    assert_non_null(f);
    char line[1024];
    int files = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char name[256], phase[16], code[64];
        int used;
        assert_int_equal(sscanf(line, "%255s %15s %63s %n", name, phase, code, &used), 3);
        char *msg = line + used;
        msg[strcspn(msg, "\n")] = '\0';
        int want = !strcmp(code, "SIMSTORE_EVERSION") ? SIMSTORE_EVERSION : SIMSTORE_ECORRUPT;
        assert_true(!strcmp(code, "SIMSTORE_EVERSION") || !strcmp(code, "SIMSTORE_ECORRUPT"));
        char *path = golden_path(name);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        table_reader *r = NULL;
        int rc = sims_table_reader_open(path, 0, &r);
        if (!strcmp(phase, "scan")) {
            assert_int_equal(rc, 0);
            uint64_t out[1024];
            size_t k;
            table_cursor c;
            sims_table_cursor_init(&c, r, 0, UINT64_MAX);
            while (!(rc = sims_table_cursor_next(&c, out, 1024, &k)) && k)
                ;
            sims_table_reader_close(r);
        } else {
            assert_null(r);
        }
        if (rc != want || !strstr(simstore_last_error(), msg))
            fprintf(stderr, "%s: got %d \"%s\", want %s \"%s\"\n", name, rc, simstore_last_error(),
                    code, msg);
        assert_int_equal(rc, want);
        assert_non_null(strstr(simstore_last_error(), msg));
        /* Messages name the file. */
        assert_non_null(strstr(simstore_last_error(), name));
        free(path);
        files++;
    }
    fclose(f);
    free(list);
    fprintf(stderr, "golden: %d error files fail as listed\n", files);
    assert_true(files >= 20);
}

static void test_table_golden__spec_example_bytes(void **state)
{
    (void)state;
    /* format/table.md walks through this file byte by byte. */
    char *path = golden_path("table-example.tbl");
    size_t size;
    uint8_t *buf = test_read_file(path, &size);
    assert_non_null(buf);
    assert_true(size == 256 + 256 + 80 + 64);
    assert_int_equal(buf[8], 3); /* format version */
    /* Block 0: the raw 5, then code "0" (d = 1); 8 is the key, not coded. */
    assert_int_equal(buf[256], 0x05);
    for (size_t i = 257; i < 512; i++)
        assert_int_equal(buf[i], 0);
    assert_int_equal(buf[64 + 0], 1); /* code length of j = 0 */
    assert_int_equal(buf[64 + 1], 1); /* code length of j = 1 */
    /* The group checksum: low 32 bits of XXH3-64(block 0, "SIMSTGRP" + 0),
     * then 4 bytes of padding. */
    assert_true(le_load32(buf + 512) ==
                (uint32_t)sims_xxh3_64(buf + 256, 256, UINT64_C(0x53494D5354475250)));
    assert_true(le_load32(buf + 516) == 0);
    /* Chunk 0: low bits 2, count bits 0, count_min 3, one high word; low
     * parts 0 (8 & 3), high bits 0b100 (8 >> 2 = 2, plus key number 0),
     * then its checksum ("SIMSTCHK" + 0). */
    static const uint8_t chunk[32] = {2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                                      0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(buf + 520, chunk, sizeof chunk);
    assert_true(le_load64(buf + 552) == sims_xxh3_64(buf + 520, 32, UINT64_C(0x53494D535443484B)));
    /* The top page: chunk 0's last key 8, 3 fingerprints, its end at index
     * byte 48, then the page's checksum ("SIMSTTOP" + 0). */
    assert_true(le_load64(buf + 560) == 8 && le_load64(buf + 568) == 3 &&
                le_load64(buf + 576) == 48);
    assert_true(le_load64(buf + 584) == sims_xxh3_64(buf + 560, 24, UINT64_C(0x53494D5354544F50)));
    free(buf);
    free(path);
}

/* ---- writer ------------------------------------------------------------------------------ */

static size_t dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void test_table_writer__rejects_bad_input(void **state)
{
    (void)state;
    char *dir = test_tmpdir("tablew");
    char *path = test_path(dir, "x.tbl");
    table_params p = make_params(1024);
    uint64_t hist[64] = {0};
    hist[3] = 1;
    table_writer *w;

    /* Unsorted, duplicate: EINVAL, sticky; finish fails and publishes nothing. */
    uint64_t bad[][3] = {{10, 18, 12}, {10, 18, 18}};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sims_table_writer_open(path, &p, hist, &w), 0);
        assert_int_equal(sims_table_writer_add(w, bad[i], 2), 0);
        assert_int_equal(sims_table_writer_add(w, bad[i] + 2, 1), SIMSTORE_EINVAL);
        assert_non_null(strstr(simstore_last_error(), "not strictly increasing"));
        assert_int_equal(sims_table_writer_add(w, bad[i], 0), SIMSTORE_EINVAL);
        assert_int_equal(sims_table_writer_finish(w), SIMSTORE_EINVAL);
        assert_int_equal(dir_entries(dir), 0);
    }
    /* A difference whose symbol had count 0: 18 - 10 = 8 has symbol 3, but
     * 19 - 18 = 1 has symbol 0, which the histogram lacks. */
    assert_int_equal(sims_table_writer_open(path, &p, hist, &w), 0);
    uint64_t nocode[] = {10, 18, 19};
    assert_int_equal(sims_table_writer_add(w, nocode, 3), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "no Huffman code"));
    sims_table_writer_abort(w);
    assert_int_equal(dir_entries(dir), 0);

    /* Bad parameters. */
    table_params q = p;
    q.block_bytes = 128;
    assert_int_equal(sims_table_writer_open(path, &q, hist, &w), SIMSTORE_EINVAL);
    q.block_bytes = 3000;
    assert_int_equal(sims_table_writer_open(path, &q, hist, &w), SIMSTORE_EINVAL);
    q.block_bytes = 131072;
    assert_int_equal(sims_table_writer_open(path, &q, hist, &w), SIMSTORE_EINVAL);
    q = p;
    q.prefix_bits = 65;
    assert_int_equal(sims_table_writer_open(path, &q, hist, &w), SIMSTORE_EINVAL);
    q = p;
    q.perm[5] = q.perm[6];
    assert_int_equal(sims_table_writer_open(path, &q, hist, &w), SIMSTORE_EINVAL);
    q.perm[5] = 64;
    assert_int_equal(sims_table_writer_open(path, &q, hist, &w), SIMSTORE_EINVAL);
    uint8_t *buf;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&q, nocode, 3, &buf, &size), SIMSTORE_EINVAL);
    assert_int_equal(sims_table_encode_memory(&p, bad[1], 3, &buf, &size), SIMSTORE_EINVAL);
    assert_int_equal(dir_entries(dir), 0);

    /* Missing directory: the error names the path. */
    char *nodir = test_path(dir, "no/such/dir.tbl");
    assert_int_not_equal(sims_table_writer_open(nodir, &p, hist, &w), 0);
    free(nodir);
    sims_table_writer_abort(NULL);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_table_writer__atomic_publish(void **state)
{
    (void)state;
    char *dir = test_tmpdir("tablea");
    char *path = test_path(dir, "t.tbl");
    table_params p = make_params(256);
    uint64_t v[5000];
    for (size_t i = 0; i < 5000; i++)
        v[i] = i * 0x9E3779B97F4AULL;
    uint64_t hist[64] = {0}, prev = 0;
    int have = 0;
    sims_table_histogram_add(hist, &prev, &have, v, 5000);

    /* Abort midway: nothing visible, no temporary left. */
    table_writer *w;
    assert_int_equal(sims_table_writer_open(path, &p, hist, &w), 0);
    assert_int_equal(sims_table_writer_add(w, v, 2500), 0);
    assert_int_equal(dir_entries(dir), 1); /* the temporary file */
    sims_table_writer_abort(w);
    assert_int_equal(dir_entries(dir), 0);

    /* Finish: exactly the final file. */
    assert_int_equal(sims_table_writer_open(path, &p, hist, &w), 0);
    assert_int_equal(sims_table_writer_add(w, v, 5000), 0);
    assert_int_equal(sims_table_writer_finish(w), 0);
    assert_int_equal(dir_entries(dir), 1);
    table_reader *r;
    assert_int_equal(sims_table_reader_open(path, 0, &r), 0);
    assert_true(sims_table_reader_info(r)->fp_count == 5000);
    sims_table_reader_close(r);

    /* A failed finish (injected fsync/rename failure, in a child process so
     * the fault point starts fresh) leaves the old file untouched and no
     * temporary behind. */
    static const char *faults[] = {"fsync:1", "rename:1", "write:3"};
    for (size_t i = 0; i < 3; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            setenv("SIMSTORE_FAULT", faults[i], 1);
            execl(self_exe, self_exe, "--fault-child", path, (char *)NULL);
            _exit(99);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0); /* the child saw its finish fail */
        assert_int_equal(dir_entries(dir), 1);
        assert_int_equal(sims_table_reader_open(path, 0, &r), 0);
        assert_true(sims_table_reader_info(r)->fp_count == 5000);
        sims_table_reader_close(r);
    }
    sims_table_reader_open(path, 0, &r);
    sims_table_reader_close(r);
    test_rmtree(dir);
    free(path);
    free(dir);
}

/* The child of the atomic-publish test: write a different table over PATH
 * with a fault armed; exit 0 when the writer reported the failure. */
static int fault_child(const char *path)
{
    table_params p = make_params(256);
    uint64_t v[100];
    for (size_t i = 0; i < 100; i++)
        v[i] = i;
    uint64_t hist[64] = {0}, prev = 0;
    int have = 0;
    sims_table_histogram_add(hist, &prev, &have, v, 100);
    table_writer *w;
    int rc = sims_table_writer_open(path, &p, hist, &w);
    if (rc == 0)
        rc = sims_table_writer_add(w, v, 100);
    if (rc == 0)
        rc = sims_table_writer_finish(w);
    else
        sims_table_writer_abort(w);
    return rc != 0 ? 0 : 1;
}

/* ---- reader -------------------------------------------------------------------------------- */

static void test_table_reader__open_errors(void **state)
{
    (void)state;
    char *dir = test_tmpdir("tabler");
    char *path = test_path(dir, "missing.tbl");
    table_reader *r = (table_reader *)1;
    assert_int_equal(sims_table_reader_open(path, 0, &r), SIMSTORE_ENOTFOUND);
    assert_null(r);
    assert_int_equal(test_write_file(path, "", 0), 0);
    assert_int_equal(sims_table_reader_open(path, 0, &r), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), path));
    assert_int_equal(sims_table_reader_open(dir, 0, &r), SIMSTORE_EINVAL); /* a directory */
    sims_table_reader_close(NULL);
    test_rmtree(dir);
    free(path);
    free(dir);
}

struct thread_arg {
    const table_reader *r;
    const uint64_t *v;
    size_t n;
    uint64_t seed;
    int failures;
};

static void *search_thread(void *arg)
{
    struct thread_arg *a = arg;
    test_rng rng = {a->seed};
    uint64_t got[512];
    for (int t = 0; t < 2000; t++) {
        uint64_t q = a->v[test_rng_below(&rng, a->n)] ^ ((uint64_t)1 << test_rng_below(&rng, 64));
        uint64_t lo = q & ~(UINT64_MAX >> 12), hi = lo | (UINT64_MAX >> 12);
        size_t want = 0;
        for (size_t i = 0; i < a->n; i++)
            want += a->v[i] >= lo && a->v[i] <= hi && simstore_distance(a->v[i], q) <= 3;
        struct collect c = {got, 0, 512, 0};
        if (sims_table_reader_search(a->r, lo, hi, q, 3, collect_emit, &c) || c.n != want)
            a->failures++;
    }
    return NULL;
}

/* ---- version 3: the index in chunks and top pages ------------------------------- */

/* Version 3 across chunk and top-page boundaries: 2^21 uniform values in
 * 256-byte blocks make about 46 000 blocks, 180 chunks of 256 blocks and
 * two top pages of 128 chunks. Decodes, lookups and searches match the
 * values; the open reads no byte of the blocks or the index (they are
 * mapped PROT_NONE while it runs); any damaged byte of the index is found
 * by sims_table_reader_check_index, and a search over damage fails or answers
 * right. */
static void test_table_v3__chunks_top_pages_and_lazy_checks(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table v3 chunks", 1009);
    enum { N = 1 << 21 };
    uint64_t *v = malloc(N * sizeof *v);
    size_t n = make_set(&rng, UNIFORM, v, N);
    table_params p = make_params(256);
    uint8_t *buf;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&p, v, n, &buf, &size), 0);

    /* The open, with everything between the first page and the footer's
     * unreadable but the 4 bytes of padding after the group checksums. */
    long pg = sysconf(_SC_PAGESIZE);
    size_t mapped = (size + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    uint8_t *m = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    memcpy(m, buf, size);
    uint64_t index_offset = le_load64(buf + size - 64);
    uint64_t nb = le_load64(buf + 48);
    uint64_t groups = (nb - 1 + 1) / 16 + 1;
    size_t pad_page = (size_t)(index_offset + 4 * groups) / (size_t)pg;
    size_t footer_page = (size - 64) / (size_t)pg;
    assert_true(footer_page > pad_page + 8);
    assert_int_equal(mprotect(m + pg, (pad_page - 1) * (size_t)pg, PROT_NONE), 0);
    assert_int_equal(mprotect(m + (pad_page + 1) * (size_t)pg,
                              (footer_page - pad_page - 1) * (size_t)pg, PROT_NONE),
                     0);
    table_reader *r;
    assert_int_equal(sims_table_reader_open_memory(m, size, 0, &r), 0);
    const table_info *in = sims_table_reader_info(r);
    assert_true(in->format_version == 3);
    assert_true(in->block_count == nb && nb > 128 * 256); /* two top pages */
    /* In RAM: 24 bytes per chunk (its header's fields once checked, its
     * last key and end once its top page is) and a byte per top page. */
    assert_true(in->key_ram_bytes == 24 * ((nb + 255) / 256) + 2);
    assert_int_equal(mprotect(m, mapped, PROT_READ), 0);

    check_table(m, size, &p, v, n);
    assert_int_equal(sims_table_reader_check_index(r), 0);
    uint64_t *keys = reader_keys(r);
    for (int t = 0; t < 20000; t++) {
        uint64_t x = t % 3 == 0   ? test_rng_next(&rng)
                     : t % 3 == 1 ? keys[test_rng_below(&rng, nb)]
                                  : keys[test_rng_below(&rng, nb)] + 1;
        assert_true(sims_table_reader_find_block(r, x) == lower_bound(keys, (size_t)nb, x));
    }
    /* Every chunk boundary's keys, and searches straddling them. */
    for (uint64_t b = 255; b + 1 < nb; b += 256) {
        assert_true(sims_table_reader_key(r, b) == keys[b]);
        uint64_t lo = keys[b] - 3, hi = keys[b + 1] + 3, q = keys[b];
        uint64_t got[64];
        struct collect col = {got, 0, 64, 0};
        assert_int_equal(sims_table_reader_search(r, lo, hi, q, 64, collect_emit, &col), 0);
        size_t want = 0;
        for (size_t i = 0; i < n; i++)
            want += v[i] >= lo && v[i] <= hi;
        if (b % 4096 == 255) /* the full count, on a sample of boundaries */
            assert_true(col.n == want);
        assert_true(col.n >= 2);
    }
    sims_table_reader_close(r);

    /* Damage: every byte of the top pages and chunk 0's header and
     * checksum, and a sample of the rest of the index. */
    uint64_t index_bytes = le_load64(buf + size - 56);
    uint64_t top_bytes = (nb + 255) / 256 * 24 + 8 * 2;
    size_t tried = 0;
    uint64_t good;
    uint64_t probes[3] = {v[0], v[n / 2] ^ 3, v[n - 1]};
    assert_int_equal(answer_digest(buf, size, 0, probes, 3, &good), 0);
    for (uint64_t off = 4 * groups; off < index_bytes; off++) {
        int dense = off >= index_bytes - top_bytes || off < 4 * groups + 24;
        if (!dense && test_rng_below(&rng, 400))
            continue;
        uint8_t keep = buf[index_offset + off];
        buf[index_offset + off] ^= (uint8_t)(1u << test_rng_below(&rng, 8));
        table_reader *d;
        int rc = sims_table_reader_open_memory(buf, size, 0, &d);
        if (rc == 0) {
            assert_int_equal(sims_table_reader_check_index(d), SIMSTORE_ECORRUPT);
            sims_table_reader_close(d);
            if (tried % 64 == 0) {
                uint64_t dg;
                rc = answer_digest(buf, size, 0, probes, 3, &dg);
                assert_true(rc == SIMSTORE_ECORRUPT || (rc == 0 && dg == good));
            }
        } else {
            assert_int_equal(rc, SIMSTORE_ECORRUPT);
        }
        buf[index_offset + off] = keep;
        tried++;
    }
    fprintf(stderr,
            "version 3: %" PRIu64 " blocks, %" PRIu64 " chunks; %zu index bytes damaged "
            "one at a time, each found\n",
            nb, (nb + 255) / 256, tried);
    assert_true(tried > 4000);
    free(keys);
    munmap(m, mapped);
    free(buf);
    free(v);
}

static void test_table_reader__concurrent_searches(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "table threads", 1008);
    enum { N = 20000 };
    uint64_t *v = malloc(N * sizeof *v);
    size_t n = make_set(&rng, UNIFORM, v, N);
    table_params p = make_params(1024);
    uint8_t *buf;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&p, v, n, &buf, &size), 0);
    table_reader *r;
    assert_int_equal(sims_table_reader_open_memory(buf, size, 0, &r), 0);
    pthread_t th[4];
    struct thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (struct thread_arg){r, v, n, 77 + (uint64_t)i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, search_thread, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    sims_table_reader_close(r);
    free(buf);
    free(v);
}

int main(int argc, char **argv)
{
    self_exe = argv[0];
    if (argc == 3 && !strcmp(argv[1], "--fault-child"))
        return fault_child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_roundtrip__shapes_and_block_boundaries),
        cmocka_unit_test(test_table_roundtrip__empty_and_one),
        cmocka_unit_test(test_table_roundtrip__million_through_files),
        cmocka_unit_test(test_table_range__matches_sorted_array),
        cmocka_unit_test(test_table_search__matches_brute_force),
        cmocka_unit_test(test_table_search_two__matches_brute_force),
        cmocka_unit_test(test_table_find_block__matches_linear_search),
        cmocka_unit_test(test_table_corruption__every_byte_and_truncation),
        cmocka_unit_test(test_table_corruption__skip_checksums_flag),
        cmocka_unit_test(test_table_golden__valid_files_decode),
        cmocka_unit_test(test_table_golden__error_files_fail),
        cmocka_unit_test(test_table_golden__spec_example_bytes),
        cmocka_unit_test(test_table_writer__rejects_bad_input),
        cmocka_unit_test(test_table_writer__atomic_publish),
        cmocka_unit_test(test_table_reader__open_errors),
        cmocka_unit_test(test_table_reader__concurrent_searches),
        cmocka_unit_test(test_table_v3__chunks_top_pages_and_lazy_checks),
    };
    /* Sampled (the ThreadSanitizer pass): the cases tests/CMakeLists.txt names. */
    const char *cases = test_sampled_cases();
    if (cases)
        cmocka_set_test_filter(cases);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
