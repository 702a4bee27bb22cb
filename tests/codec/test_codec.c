/* test_codec.c: lib/codec: LSB-first bit I/O, the canonical length-limited
 * Huffman code (optimality against plain Huffman, Kraft sums, degenerate
 * histograms, the reader's validity rule), and block encode/decode round
 * trips, resumable decoding and rejection of damaged blocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/bitio.h"
#include "codec/block.h"
#include "codec/huffman.h"
#include "simstore.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------ */

static uint32_t kraft_sum(const uint8_t lengths[64]) /* units of 2^-11 */
{
    uint32_t k = 0;
    for (unsigned s = 0; s < 64; s++)
        if (lengths[s])
            k += 1u << (CODEC_HUFF_MAX_BITS - lengths[s]);
    return k;
}

static uint64_t code_cost(const uint64_t hist[64], const uint8_t lengths[64])
{
    uint64_t c = 0;
    for (unsigned s = 0; s < 64; s++)
        c += hist[s] * lengths[s];
    return c;
}

/* Plain (unlimited) Huffman cost by repeated merging of the two lightest:
 * the cost of an optimal prefix code, the oracle for package-merge. */
static uint64_t huffman_cost(const uint64_t hist[64], unsigned *max_depth)
{
    uint64_t w[64];
    unsigned depth[64];
    unsigned n = 0;
    for (unsigned s = 0; s < 64; s++)
        if (hist[s]) {
            w[n] = hist[s];
            depth[n] = 0;
            n++;
        }
    if (max_depth)
        *max_depth = n == 1 ? 1 : 0;
    if (n <= 1)
        return n ? w[0] : 0; /* one symbol: code length 1 */
    uint64_t cost = 0;
    while (n > 1) {
        unsigned a = 0, b = 1;
        if (w[b] < w[a]) {
            a = 1;
            b = 0;
        }
        for (unsigned i = 2; i < n; i++) {
            if (w[i] < w[a]) {
                b = a;
                a = i;
            } else if (w[i] < w[b]) {
                b = i;
            }
        }
        cost += w[a] + w[b];
        unsigned d = (depth[a] > depth[b] ? depth[a] : depth[b]) + 1;
        w[a] += w[b];
        depth[a] = d;
        w[b] = w[n - 1];
        depth[b] = depth[n - 1];
        n--;
        if (max_depth && d > *max_depth)
            *max_depth = d;
    }
    return cost;
}

/* ---- bit I/O ------------------------------------------------------------------ */

static void test_codec_bitio__lsb_first_layout(void **state)
{
    (void)state;
    uint8_t buf[16 + BITIO_WRITER_SLACK] = {0};
    bitio_writer w;
    bitio_writer_init(&w, buf, 16);
    bitio_put(&w, 1, 1);
    bitio_put(&w, 0, 1);
    bitio_put(&w, 1, 1);
    bitio_put(&w, 0x1F, 5); /* fills byte 0 */
    bitio_put(&w, 0xABCD, 16);
    assert_int_equal(buf[0], 0xFD);
    assert_int_equal(buf[1], 0xCD);
    assert_int_equal(buf[2], 0xAB);
    assert_true(w.pos == 24);
    assert_true(bitio_peek_fast(buf, 3) == (le_load64(buf) >> 3));
    assert_true((bitio_peek_fast(buf, 8) & 0xFFFF) == 0xABCD);
}

static void test_codec_bitio__random_round_trip(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "bitio round trip", 101);
    enum { BYTES = 4096, MAXN = 2000 };
    uint8_t *buf = calloc(BYTES + BITIO_WRITER_SLACK, 1);
    uint64_t vals[MAXN];
    unsigned lens[MAXN];
    bitio_writer w;
    bitio_writer_init(&w, buf, BYTES);
    size_t n = 0;
    while (n < MAXN) {
        unsigned len = (unsigned)test_rng_below(&rng, 65);
        if (w.pos + len > (uint64_t)BYTES * 8)
            break;
        vals[n] = test_rng_next(&rng) & bitio_mask(len);
        lens[n] = len;
        uint64_t garbage = len < 64 ? test_rng_next(&rng) << len : 0;
        bitio_put(&w, garbage | vals[n], len); /* bits above len are ignored */
        n++;
    }
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(bitio_read_safe(buf, BYTES, pos, lens[i]) == vals[i]);
        if (lens[i] <= BITIO_PEEK_BITS && pos / 8 + 8 <= BYTES)
            assert_true((bitio_peek_fast(buf, pos) & bitio_mask(lens[i])) == vals[i]);
        pos += lens[i];
    }
    assert_true(pos == w.pos);
    free(buf);
}

static void test_codec_bitio__safe_peek_zero_fills(void **state)
{
    (void)state;
    uint8_t buf[10];
    memset(buf, 0xFF, sizeof buf);
    assert_true(bitio_peek_safe(buf, 10, 0) == ~(uint64_t)0);
    assert_true(bitio_peek_safe(buf, 10, 8 * 8) == 0xFFFF);
    assert_true(bitio_peek_safe(buf, 10, 79) == 1);
    assert_true(bitio_peek_safe(buf, 10, 80) == 0);
    assert_true(bitio_peek_safe(buf, 10, 1u << 30) == 0);
    assert_true(bitio_read_safe(buf, 10, 60, 64) == 0xFFFFF);
}

static void test_codec_bitio__helpers(void **state)
{
    (void)state;
    assert_true(bitio_mask(0) == 0);
    assert_true(bitio_mask(64) == ~(uint64_t)0);
    assert_true(bitio_reverse(0x1, 3) == 0x4);
    assert_true(bitio_reverse(0x6, 4) == 0x6);
    assert_true(bitio_reverse(0x1, 11) == 0x400);
    assert_int_equal(bitio_msb(1), 0);
    assert_int_equal(bitio_msb(~(uint64_t)0), 63);
    assert_int_equal(bitio_msb((uint64_t)1 << 40 | 5), 40);
}

/* ---- Huffman ------------------------------------------------------------------- */

static void test_codec_huffman__empty_histogram(void **state)
{
    (void)state;
    uint64_t hist[64] = {0};
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    for (unsigned s = 0; s < 64; s++)
        assert_int_equal(len[s], 0);
    assert_int_equal(sims_codec_huff_check_lengths(len), 0);
    codec_huff_decoder d;
    assert_int_equal(sims_codec_huff_decoder_init(&d, len), 0);
    assert_int_equal(d.min_len, 0);
    for (unsigned i = 0; i < CODEC_HUFF_TABLE_SIZE; i++)
        assert_int_equal(CODEC_ENTRY_TOTAL(d.table[i]), CODEC_ENTRY_INVALID);
}

static void test_codec_huffman__one_symbol(void **state)
{
    (void)state;
    for (unsigned sym = 0; sym < 64; sym += 9) {
        uint64_t hist[64] = {0};
        hist[sym] = 12345;
        uint8_t len[64];
        assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
        for (unsigned s = 0; s < 64; s++)
            assert_int_equal(len[s], s == sym ? 1 : 0);
        /* Kraft sum 1/2: the one allowed incomplete code. */
        assert_int_equal(kraft_sum(len), CODEC_HUFF_TABLE_SIZE / 2);
        codec_huff_decoder d;
        assert_int_equal(sims_codec_huff_decoder_init(&d, len), 0);
        /* Code "0": even indexes decode, odd ones are invalid. */
        assert_int_equal(CODEC_ENTRY_SYM(d.table[0]), sym);
        assert_int_equal(CODEC_ENTRY_LEN(d.table[2]), 1);
        assert_int_equal(CODEC_ENTRY_LEN(d.table[1]), 0);
        assert_int_equal(CODEC_ENTRY_TOTAL(d.table[1]), CODEC_ENTRY_INVALID);
    }
}

static void test_codec_huffman__two_symbols(void **state)
{
    (void)state;
    uint64_t hist[64] = {0};
    hist[3] = 1;
    hist[60] = 1000000;
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    assert_int_equal(len[3], 1);
    assert_int_equal(len[60], 1);
    assert_int_equal(kraft_sum(len), CODEC_HUFF_TABLE_SIZE);
    uint16_t codes[64];
    sims_codec_huff_canonical(len, codes);
    assert_int_equal(codes[3], 0); /* lower symbol gets the lower code */
    assert_int_equal(codes[60], 1);
}

static void test_codec_huffman__all_64_symbols(void **state)
{
    (void)state;
    uint64_t hist[64];
    uint8_t len[64];
    for (unsigned s = 0; s < 64; s++)
        hist[s] = 7;
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    for (unsigned s = 0; s < 64; s++)
        assert_int_equal(len[s], 6);
    /* Exactly 2^6 symbols also fit a 6-bit limit, but not a 5-bit one. */
    assert_int_equal(sims_codec_huff_lengths(hist, 6, len), 0);
    assert_int_equal(kraft_sum(len), CODEC_HUFF_TABLE_SIZE);
    assert_int_equal(sims_codec_huff_lengths(hist, 5, len), SIMSTORE_EINVAL);
    assert_int_equal(sims_codec_huff_lengths(hist, 0, len), SIMSTORE_EINVAL);
    assert_int_equal(sims_codec_huff_lengths(hist, 12, len), SIMSTORE_EINVAL);
    /* Geometric weights want lengths up to 63: the limit caps them. */
    for (unsigned s = 0; s < 64; s++)
        hist[s] = (uint64_t)1 << (s < 63 ? s : 62);
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    for (unsigned s = 0; s < 64; s++) {
        assert_true(len[s] >= 1 && len[s] <= 11);
    }
    assert_int_equal(kraft_sum(len), CODEC_HUFF_TABLE_SIZE);
    assert_int_equal(sims_codec_huff_check_lengths(len), 0);
}

static void test_codec_huffman__length_limited_is_optimal(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "huffman optimality", 202);
    for (int iter = 0; iter < 3000; iter++) {
        uint64_t hist[64] = {0};
        unsigned used = 1 + (unsigned)test_rng_below(&rng, 64);
        int shape = (int)test_rng_below(&rng, 4);
        for (unsigned i = 0; i < used; i++) {
            unsigned s = (unsigned)test_rng_below(&rng, 64);
            uint64_t w;
            if (shape == 0)
                w = 1 + test_rng_below(&rng, 1000);
            else if (shape == 1) /* skewed: forces long codes */
                w = (uint64_t)1 << test_rng_below(&rng, 40);
            else if (shape == 2) /* Fibonacci-like */
                w = 1 + (test_rng_next(&rng) >> (20 + test_rng_below(&rng, 44)));
            else
                w = test_rng_next(&rng) >> 24;
            hist[s] += w ? w : 1;
        }
        unsigned limit = 6 + (unsigned)test_rng_below(&rng, 6);
        unsigned nsym = 0;
        for (unsigned s = 0; s < 64; s++)
            nsym += hist[s] != 0;
        uint8_t len[64];
        int rc = sims_codec_huff_lengths(hist, limit, len);
        if (nsym > (1u << limit)) {
            assert_int_equal(rc, SIMSTORE_EINVAL);
            continue;
        }
        assert_int_equal(rc, 0);
        unsigned max_depth;
        uint64_t best = huffman_cost(hist, &max_depth);
        uint64_t got = code_cost(hist, len);
        for (unsigned s = 0; s < 64; s++) {
            assert_true(len[s] <= limit);
            assert_true((len[s] != 0) == (hist[s] != 0));
        }
        if (nsym >= 2) {
            assert_int_equal(kraft_sum(len), CODEC_HUFF_TABLE_SIZE);
            assert_true(got >= best);
            /* Unconstrained optimum within the limit: package-merge finds it. */
            if (max_depth <= limit)
                assert_true(got == best);
        }
        assert_int_equal(sims_codec_huff_check_lengths(len), 0);
    }
}

static void test_codec_huffman__huge_counts(void **state)
{
    (void)state;
    uint64_t hist[64] = {0};
    hist[0] = UINT64_MAX;
    hist[1] = UINT64_MAX - 1;
    hist[2] = 1;
    hist[40] = (uint64_t)1 << 63;
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    assert_true(len[2] > 0);
    assert_int_equal(kraft_sum(len), CODEC_HUFF_TABLE_SIZE);
}

static void test_codec_huffman__deterministic(void **state)
{
    (void)state;
    uint64_t hist[64];
    for (unsigned s = 0; s < 64; s++)
        hist[s] = 100 + (s % 3); /* many ties */
    uint8_t a[64], b[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, a), 0);
    assert_int_equal(sims_codec_huff_lengths(hist, 11, b), 0);
    assert_memory_equal(a, b, 64);
}

static void test_codec_huffman__canonical_codes(void **state)
{
    (void)state;
    /* RFC 1951 section 3.2.2's example: lengths (3,3,3,3,3,2,4,4) give
     * codes 010 011 100 101 110 00 1110 1111. */
    uint8_t len[64] = {3, 3, 3, 3, 3, 2, 4, 4};
    static const unsigned want[8] = {2, 3, 4, 5, 6, 0, 14, 15};
    uint16_t codes[64];
    sims_codec_huff_canonical(len, codes);
    for (unsigned s = 0; s < 8; s++)
        assert_int_equal(bitio_reverse(codes[s], len[s]), want[s]);
    assert_int_equal(sims_codec_huff_check_lengths(len), 0);
}

static void test_codec_huffman__decoder_table(void **state)
{
    (void)state;
    uint64_t hist[64];
    for (unsigned s = 0; s < 64; s++)
        hist[s] = 1 + s * s * s;
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    codec_huff_encoder e;
    static codec_huff_decoder d;
    assert_int_equal(sims_codec_huff_encoder_init(&e, len), 0);
    assert_int_equal(sims_codec_huff_decoder_init(&d, len), 0);
    for (unsigned s = 0; s < 64; s++) {
        for (unsigned hi = 0; hi < (1u << (11 - len[s])); hi++) {
            codec_huff_entry x = d.table[e.code[s] | hi << len[s]];
            assert_int_equal(CODEC_ENTRY_SYM(x), s);
            assert_int_equal(CODEC_ENTRY_LEN(x), len[s]);
            assert_int_equal(CODEC_ENTRY_TOTAL(x), len[s] + s);
        }
    }
    /* A complete code leaves no invalid entry. */
    for (unsigned i = 0; i < CODEC_HUFF_TABLE_SIZE; i++)
        assert_true(CODEC_ENTRY_LEN(d.table[i]) != 0);
}

static void test_codec_huffman__reader_rejects_bad_lengths(void **state)
{
    (void)state;
    uint8_t len[64] = {0};
    codec_huff_decoder d;
    len[5] = 12; /* too long */
    assert_int_equal(sims_codec_huff_check_lengths(len), SIMSTORE_ECORRUPT);
    assert_int_equal(sims_codec_huff_decoder_init(&d, len), SIMSTORE_ECORRUPT);
    memset(len, 0, sizeof len);
    len[0] = 2; /* single symbol, but not length 1 */
    assert_int_equal(sims_codec_huff_check_lengths(len), SIMSTORE_ECORRUPT);
    len[0] = 1;
    assert_int_equal(sims_codec_huff_check_lengths(len), 0);
    len[1] = 1;
    len[2] = 2; /* Kraft 5/4: over-subscribed */
    assert_int_equal(sims_codec_huff_check_lengths(len), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "over-subscribed"));
    len[1] = 2; /* 1/2 + 1/4 + 1/4 = 1 */
    assert_int_equal(sims_codec_huff_check_lengths(len), 0);
    len[2] = 3; /* 7/8: incomplete */
    assert_int_equal(sims_codec_huff_check_lengths(len), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "incomplete"));
    /* 64 symbols of length 6: complete. */
    memset(len, 6, sizeof len);
    assert_int_equal(sims_codec_huff_check_lengths(len), 0);
    len[63] = 11;
    assert_int_equal(sims_codec_huff_check_lengths(len), SIMSTORE_ECORRUPT);
}

/* ---- blocks ---------------------------------------------------------------------- */

/* Sorted distinct values of a chosen shape; returns how many (fewer than n
 * when the values reach 2^64 - 1). */
static size_t gen_sorted(test_rng *rng, int shape, uint64_t *v, size_t n)
{
    uint64_t x = shape == 3 ? UINT64_MAX - 4 * n : 1 + test_rng_below(rng, 1000);
    for (size_t i = 0; i < n; i++) {
        uint64_t step;
        switch (shape) {
        case 0: step = 1; break;                                          /* dense */
        case 1: step = 1 + test_rng_below(rng, (uint64_t)1 << 40); break; /* 2^24-ish table */
        case 2: step = 1 + (test_rng_next(rng) >> (1 + test_rng_below(rng, 63))); break; /* mixed */
        case 3: step = 1 + test_rng_below(rng, 3); break;
        default: step = 1 + (test_rng_next(rng) >> 8); break; /* long mantissas */
        }
        if (i && UINT64_MAX - x < step) {
            if (x == UINT64_MAX)
                return i;
            step = UINT64_MAX - x;
        }
        x = i ? x + step : x;
        v[i] = x;
    }
    return n;
}

static void histogram(const uint64_t *v, size_t n, uint64_t prev, int have_prev, uint64_t hist[64])
{
    memset(hist, 0, 64 * sizeof hist[0]);
    for (size_t i = 0; i < n; i++) {
        if (i || have_prev)
            hist[bitio_msb(v[i] - (i ? v[i - 1] : prev))]++;
    }
}

static void test_codec_block__round_trip(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "block round trip", 303);
    static const size_t sizes[] = {256, 512, 1024, 4096, 65536};
    enum { N = 70000 };
    uint64_t *v = malloc(N * sizeof *v);
    uint64_t *out = malloc((N + 1) * sizeof *out);
    uint8_t *buf = malloc(65536 + BITIO_WRITER_SLACK);
    static codec_huff_decoder dec;
    for (int iter = 0; iter < 60; iter++) {
        int shape = iter % 5;
        size_t bytes = sizes[test_rng_below(&rng, 5)];
        int raw_first = (int)test_rng_below(&rng, 2);
        size_t n = 1 + (size_t)test_rng_below(&rng, N);
        n = gen_sorted(&rng, shape, v, n);
        /* v[0] >= 1, so a predecessor below it exists. */
        uint64_t prev = raw_first ? 0 : v[0] - 1 - test_rng_below(&rng, v[0]);
        uint64_t hist[64];
        histogram(v, n, prev, !raw_first, hist);
        uint8_t len[64];
        assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
        codec_huff_encoder enc;
        assert_int_equal(sims_codec_huff_encoder_init(&enc, len), 0);
        assert_int_equal(sims_codec_huff_decoder_init(&dec, len), 0);
        size_t used;
        assert_int_equal(sims_codec_block_encode(&enc, buf, bytes, raw_first, prev, v, n, &used),
                         0);
        assert_true(used >= 1);
        assert_true(used <= sims_codec_block_max_count(bytes, dec.min_len, raw_first));
        /* Greedy: the next value, if any, would not have fit. */
        uint64_t bits = raw_first ? 64 : 0;
        for (size_t i = raw_first ? 1 : 0; i < used; i++)
            bits += codec_delta_bits(&enc, v[i] - (i ? v[i - 1] : prev));
        assert_true(bits <= bytes * 8);
        if (used < n)
            assert_true(bits + codec_delta_bits(&enc, v[used] - v[used - 1]) > bytes * 8);
        memset(out, 0xA5, (used + 1) * sizeof *out);
        assert_int_equal(
            sims_codec_block_decode(&dec, buf, bytes, raw_first, prev, used, v[used - 1], out), 0);
        assert_memory_equal(out, v, used * sizeof *v);
        assert_true(out[used] == 0xA5A5A5A5A5A5A5A5ULL); /* wrote exactly `used` */

        /* Resumable: random chunk sizes give the same values. */
        codec_block_decoder s;
        sims_codec_block_decoder_init(&s, &dec, buf, bytes, raw_first, prev, used);
        size_t got = 0, k;
        do {
            size_t cap = 1 + (size_t)test_rng_below(&rng, 300);
            assert_int_equal(sims_codec_block_decoder_run(&s, out + got, cap, &k), 0);
            assert_true(k <= cap);
            got += k;
        } while (k);
        assert_true(got == used);
        assert_memory_equal(out, v, used * sizeof *v);
        assert_int_equal(sims_codec_block_decoder_finish(&s, v[used - 1]), 0);
        assert_true(s.pos == bits);

        /* Stopping early (run_to): a call that stops short of its cap with
         * values left has just put out a value above its limit, and going on
         * gives the same values. */
        sims_codec_block_decoder_init(&s, &dec, buf, bytes, raw_first, prev, used);
        got = 0;
        do {
            size_t cap = 1 + (size_t)test_rng_below(&rng, 300);
            uint64_t limit = test_rng_below(&rng, 4) == 0
                                 ? UINT64_MAX
                                 : v[test_rng_below(&rng, used)] - test_rng_below(&rng, 2);
            assert_int_equal(sims_codec_block_decoder_run_to(&s, out + got, cap, limit, &k), 0);
            assert_true(k <= cap);
            if (k > 0 && k < cap && s.remaining > 0)
                assert_true(out[got + k - 1] > limit);
            if (limit == UINT64_MAX)
                assert_true(k == cap || s.remaining == 0);
            got += k;
        } while (k);
        assert_true(got == used);
        assert_memory_equal(out, v, used * sizeof *v);
        assert_int_equal(sims_codec_block_decoder_finish(&s, v[used - 1]), 0);
        assert_true(s.pos == bits);
    }
    free(v);
    free(out);
    free(buf);
}

/* Random code lengths and random block bytes in an exactly sized heap
 * buffer (partly zero half the time), with a count the block could hold:
 * what a decoder must survive. */
static uint8_t *garbage_block(test_rng *rng, codec_huff_decoder *dec, size_t *bytes, int *raw_first,
                              uint64_t *count)
{
    uint64_t hist[64] = {0};
    unsigned used_syms = 1 + (unsigned)test_rng_below(rng, 64);
    for (unsigned i = 0; i < used_syms; i++)
        hist[test_rng_below(rng, 64)] += 1 + test_rng_below(rng, 1000);
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    assert_int_equal(sims_codec_huff_decoder_init(dec, len), 0);
    *bytes = (size_t)256 << test_rng_below(rng, 3);
    uint8_t *buf = malloc(*bytes);
    for (size_t i = 0; i < *bytes; i++)
        buf[i] = (uint8_t)test_rng_next(rng);
    if (test_rng_below(rng, 2))
        memset(buf + test_rng_below(rng, *bytes / 2), 0, *bytes / 2); /* partly zero */
    *raw_first = (int)test_rng_below(rng, 2);
    *count = 1 + test_rng_below(rng, sims_codec_block_max_count(*bytes, dec->min_len, *raw_first));
    return buf;
}

/* One random block for the two-stream tests: values v[0..*used), coded into
 * buf (bytes + slack) under a code of their own; *raw_first, *prev and
 * *implicit as a decoder needs them. */
typedef struct two_block {
    uint64_t *v;
    uint8_t *buf;
    size_t bytes, used;
    uint64_t prev;
    int raw_first, implicit;
    codec_huff_decoder dec;
} two_block;

static void two_block_make(test_rng *rng, two_block *b, int shape)
{
    static const size_t sizes[] = {256, 512, 1024, 4096};
    enum { N = 20000 };
    b->bytes = sizes[test_rng_below(rng, 4)];
    b->raw_first = (int)test_rng_below(rng, 2);
    b->implicit = (int)test_rng_below(rng, 2);
    size_t n = gen_sorted(rng, shape, b->v, 1 + (size_t)test_rng_below(rng, N));
    b->prev = b->raw_first ? 0 : b->v[0] - 1 - test_rng_below(rng, b->v[0]);
    uint64_t hist[64];
    histogram(b->v, n, b->prev, !b->raw_first, hist);
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    codec_huff_encoder enc;
    assert_int_equal(sims_codec_huff_encoder_init(&enc, len), 0);
    assert_int_equal(sims_codec_huff_decoder_init(&b->dec, len), 0);
    codec_block_encoder e;
    sims_codec_block_encoder_start(&e, &enc, b->buf, b->bytes, b->raw_first, b->prev);
    size_t used = 0;
    while (used < n && sims_codec_block_encoder_put(&e, b->v[used]) == 1)
        used++;
    assert_true(used >= 1);
    /* Table format 2 and 3: the last value is the key, not coded. */
    if (b->implicit && (used > 1 || !b->raw_first))
        sims_codec_block_encoder_drop_last(&e);
    else
        b->implicit = 0;
    b->used = used;
}

static void two_block_start(const two_block *b, codec_block_decoder *s)
{
    sims_codec_block_decoder_init(s, &b->dec, b->buf, b->bytes, b->raw_first, b->prev, b->used);
    if (b->implicit)
        sims_codec_block_decoder_set_last(s, b->v[b->used - 1]);
}

static void test_codec_block__run_two(void **state)
{
    (void)state;
    /* Two blocks decoded at once, in random chunks with random limits, give
     * each block's values exactly, stop early only past a limit, and leave
     * each decoder where the single decoder would (finish passes). */
    test_rng rng;
    test_rng_init(&rng, "block run two", 505);
    two_block blk[2];
    uint64_t *out[2];
    for (int j = 0; j < 2; j++) {
        blk[j].v = malloc(20000 * sizeof(uint64_t));
        blk[j].buf = malloc(4096 + BITIO_WRITER_SLACK);
        out[j] = malloc(20001 * sizeof(uint64_t));
    }
    for (int iter = 0; iter < 400; iter++) {
        codec_block_decoder s[2];
        size_t got[2] = {0, 0};
        for (int j = 0; j < 2; j++) {
            two_block_make(&rng, &blk[j], (int)test_rng_below(&rng, 5));
            two_block_start(&blk[j], &s[j]);
        }
        for (;;) {
            codec_block_run r[2];
            for (int j = 0; j < 2; j++) {
                size_t cap = 1 + (size_t)test_rng_below(&rng, iter % 2 ? 300 : 20000);
                uint64_t limit =
                    test_rng_below(&rng, 3) == 0
                        ? UINT64_MAX
                        : blk[j].v[test_rng_below(&rng, blk[j].used)] - test_rng_below(&rng, 2);
                r[j] = (codec_block_run){&s[j], out[j] + got[j], cap, limit, 0, -1};
            }
            sims_codec_block_decoder_run_two(&r[0], &r[1]);
            for (int j = 0; j < 2; j++) {
                assert_int_equal(r[j].rc, 0);
                assert_true(r[j].n <= r[j].cap);
                if (r[j].n > 0 && r[j].n < r[j].cap && s[j].remaining > 0)
                    assert_true(out[j][got[j] + r[j].n - 1] > r[j].limit);
                if (r[j].limit == UINT64_MAX)
                    assert_true(r[j].n == r[j].cap || s[j].remaining == 0);
                got[j] += r[j].n;
            }
            if (r[0].n == 0 && r[1].n == 0)
                break;
        }
        for (int j = 0; j < 2; j++) {
            assert_true(got[j] == blk[j].used);
            assert_memory_equal(out[j], blk[j].v, blk[j].used * sizeof(uint64_t));
            assert_int_equal(sims_codec_block_decoder_finish(&s[j], blk[j].v[blk[j].used - 1]), 0);
        }
    }
    for (int j = 0; j < 2; j++) {
        free(blk[j].v);
        free(blk[j].buf);
        free(out[j]);
    }
}

static void test_codec_block__run_two_garbage(void **state)
{
    (void)state;
    /* A random block (exactly sized on the heap: ASan sees any read outside
     * it) beside a valid one: each stream's result is the single decoder's,
     * the error included, and the valid stream is never disturbed. */
    test_rng rng;
    test_rng_init(&rng, "block run two garbage", 606);
    two_block good;
    good.v = malloc(20000 * sizeof(uint64_t));
    good.buf = malloc(4096 + BITIO_WRITER_SLACK);
    uint64_t *want = malloc(65536 * sizeof *want), *out = malloc(65536 * sizeof *out);
    uint64_t *gout = malloc(20001 * sizeof *gout);
    static codec_huff_decoder dec;
    int bad = 0;
    for (int iter = 0; iter < 400; iter++) {
        two_block_make(&rng, &good, (int)test_rng_below(&rng, 5));
        size_t bytes;
        int raw_first;
        uint64_t count;
        uint8_t *buf = garbage_block(&rng, &dec, &bytes, &raw_first, &count);
        uint64_t prev = test_rng_next(&rng) >> (8 * test_rng_below(&rng, 2));
        /* The single decoder, the whole block in one call. */
        codec_block_decoder a;
        sims_codec_block_decoder_init(&a, &dec, buf, bytes, raw_first, prev, count);
        size_t n1 = 0;
        int rc1 = sims_codec_block_decoder_run(&a, want, (size_t)count, &n1);
        /* The same beside the good block. */
        codec_block_decoder b, g;
        sims_codec_block_decoder_init(&b, &dec, buf, bytes, raw_first, prev, count);
        two_block_start(&good, &g);
        codec_block_run rb = {&b, out, (size_t)count, UINT64_MAX, 0, -1};
        codec_block_run rg = {&g, gout, good.used, UINT64_MAX, 0, -1};
        if (iter % 2)
            sims_codec_block_decoder_run_two(&rb, &rg);
        else
            sims_codec_block_decoder_run_two(&rg, &rb);
        assert_int_equal(rb.rc, rc1);
        if (rc1 == 0) {
            assert_true(rb.n == n1);
            assert_memory_equal(out, want, n1 * sizeof *out);
            assert_true(b.pos == a.pos && b.prev == a.prev && b.remaining == a.remaining);
        } else {
            bad++;
        }
        assert_int_equal(rg.rc, 0);
        assert_true(rg.n == good.used);
        assert_memory_equal(gout, good.v, good.used * sizeof *gout);
        assert_int_equal(sims_codec_block_decoder_finish(&g, good.v[good.used - 1]), 0);
        free(buf);
    }
    assert_true(bad > 0);

    /* A valid block decoded from a predecessor so large that its values
     * pass 2^64 midway (inside the two-stream loop, both streams' bits being
     * valid codes): an overflow error for it alone, in either place. */
    two_block other;
    other.v = malloc(20000 * sizeof(uint64_t));
    other.buf = malloc(4096 + BITIO_WRITER_SLACK);
    int wraps = 0;
    for (int iter = 0; iter < 200; iter++) {
        two_block_make(&rng, &good, 1);
        two_block_make(&rng, &other, 1);
        if (good.raw_first || other.raw_first || good.used < 8 || other.used < 8)
            continue;
        uint64_t span = other.v[other.used / 2] - other.prev;
        uint64_t prev = UINT64_MAX - span + 1; /* value used/2 lands on 2^64 */
        codec_block_decoder b, g;
        sims_codec_block_decoder_init(&b, &other.dec, other.buf, other.bytes, 0, prev, other.used);
        two_block_start(&good, &g);
        codec_block_run rb = {&b, out, other.used, UINT64_MAX, 0, -1};
        codec_block_run rg = {&g, gout, good.used, UINT64_MAX, 0, -1};
        if (iter % 2)
            sims_codec_block_decoder_run_two(&rb, &rg);
        else
            sims_codec_block_decoder_run_two(&rg, &rb);
        assert_int_equal(rb.rc, SIMSTORE_ECORRUPT);
        assert_non_null(strstr(simstore_last_error(), "overflow"));
        assert_int_equal(rg.rc, 0);
        assert_true(rg.n == good.used);
        assert_memory_equal(gout, good.v, good.used * sizeof *gout);
        wraps++;
    }
    assert_true(wraps > 20);
    free(other.v);
    free(other.buf);
    free(good.v);
    free(good.buf);
    free(want);
    free(out);
    free(gout);
}

static void test_codec_block__extreme_values(void **state)
{
    (void)state;
    /* 0, 2^64-1 and differences with 63-bit mantissas (careful path). */
    uint64_t v[] = {0,         1, 2, (uint64_t)1 << 62, ((uint64_t)1 << 63) + 5, UINT64_MAX - 1,
                    UINT64_MAX};
    size_t n = sizeof v / sizeof v[0];
    uint64_t hist[64];
    histogram(v, n, 0, 0, hist);
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    codec_huff_encoder enc;
    static codec_huff_decoder dec;
    assert_int_equal(sims_codec_huff_encoder_init(&enc, len), 0);
    assert_int_equal(sims_codec_huff_decoder_init(&dec, len), 0);
    uint8_t buf[256 + BITIO_WRITER_SLACK];
    size_t used;
    assert_int_equal(sims_codec_block_encode(&enc, buf, 256, 1, 0, v, n, &used), 0);
    assert_int_equal(used, n);
    uint64_t out[8];
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, n, UINT64_MAX, out), 0);
    assert_memory_equal(out, v, sizeof v);
}

/* Format 2: a block's last value is its key and is not coded. */
static void test_codec_block__implicit_last(void **state)
{
    (void)state;
    uint64_t v[] = {7, 9, 20, 21, 1000, 1001};
    size_t n = sizeof v / sizeof v[0];
    uint64_t hist[64];
    histogram(v, n, 3, 1, hist);
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    codec_huff_encoder enc;
    static codec_huff_decoder dec;
    assert_int_equal(sims_codec_huff_encoder_init(&enc, len), 0);
    assert_int_equal(sims_codec_huff_decoder_init(&dec, len), 0);
    for (int raw_first = 0; raw_first <= 1; raw_first++) {
        uint8_t buf[256 + BITIO_WRITER_SLACK], full[256 + BITIO_WRITER_SLACK];
        size_t used;
        /* The same values with the last one coded, for comparison. */
        assert_int_equal(sims_codec_block_encode(&enc, full, 256, raw_first, 3, v, n, &used), 0);
        codec_block_encoder e;
        sims_codec_block_encoder_start(&e, &enc, buf, 256, raw_first, 3);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(sims_codec_block_encoder_put(&e, v[i]), 1);
        uint64_t with_last = codec_block_encoder_bits(&e);
        sims_codec_block_encoder_drop_last(&e);
        assert_true(codec_block_encoder_bits(&e) < with_last);
        /* Dropping the last value leaves exactly the others' bits. */
        assert_memory_equal(buf, full, (size_t)(codec_block_encoder_bits(&e) / 8));
        for (size_t i = (size_t)((codec_block_encoder_bits(&e) + 7) / 8); i < 256; i++)
            assert_int_equal(buf[i], 0);
        uint64_t out[8];
        assert_int_equal(
            sims_codec_block_decode_implicit(&dec, buf, 256, raw_first, 3, n, 1001, out), 0);
        assert_memory_equal(out, v, sizeof v);
        /* In chunks of one. */
        codec_block_decoder s;
        sims_codec_block_decoder_init(&s, &dec, buf, 256, raw_first, 3, n);
        sims_codec_block_decoder_set_last(&s, 1001);
        size_t got = 0, k;
        while (!sims_codec_block_decoder_run(&s, out + got, 1, &k) && k)
            got += k;
        assert_true(got == n);
        assert_memory_equal(out, v, sizeof v);
        assert_int_equal(sims_codec_block_decoder_finish(&s, 1001), 0);
        /* A key not above the last coded value is corrupt. */
        assert_int_equal(
            sims_codec_block_decode_implicit(&dec, buf, 256, raw_first, 3, n, 1000, out),
            SIMSTORE_ECORRUPT);
    }
    /* Block 0 holding one value: nothing is coded at all. */
    uint8_t zero[256] = {0};
    uint64_t out[1];
    assert_int_equal(sims_codec_block_decode_implicit(&dec, zero, 256, 1, 0, 1, 42, out), 0);
    assert_true(out[0] == 42);
}

static void test_codec_block__encoder_rejects(void **state)
{
    (void)state;
    uint64_t hist[64] = {0};
    hist[0] = 1;
    hist[5] = 1;
    uint8_t len[64];
    assert_int_equal(sims_codec_huff_lengths(hist, 11, len), 0);
    codec_huff_encoder enc;
    assert_int_equal(sims_codec_huff_encoder_init(&enc, len), 0);
    uint8_t buf[256 + BITIO_WRITER_SLACK];
    size_t used;
    uint64_t unsorted[] = {10, 11, 11};
    assert_int_equal(sims_codec_block_encode(&enc, buf, 256, 1, 0, unsorted, 3, &used),
                     SIMSTORE_EINVAL);
    uint64_t nocode[] = {10, 11, 15}; /* difference 4 has symbol 2: no code */
    assert_int_equal(sims_codec_block_encode(&enc, buf, 256, 1, 0, nocode, 3, &used),
                     SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "no Huffman code"));
    uint64_t below[] = {5};
    assert_int_equal(sims_codec_block_encode(&enc, buf, 256, 0, 5, below, 1, &used),
                     SIMSTORE_EINVAL);
}

/* One block of dense values (single symbol: code "0"), for damage tests. */
static size_t dense_block(uint8_t *buf, codec_huff_decoder *dec, uint64_t *key)
{
    uint64_t v[100];
    for (size_t i = 0; i < 100; i++)
        v[i] = 1000 + i;
    uint64_t hist[64] = {0};
    hist[0] = 99;
    uint8_t len[64];
    sims_codec_huff_lengths(hist, 11, len);
    codec_huff_encoder enc;
    sims_codec_huff_encoder_init(&enc, len);
    sims_codec_huff_decoder_init(dec, len);
    size_t used;
    sims_codec_block_encode(&enc, buf, 256, 1, 0, v, 100, &used);
    *key = v[used - 1];
    return used;
}

static void test_codec_block__rejects_damage(void **state)
{
    (void)state;
    uint8_t buf[256 + BITIO_WRITER_SLACK];
    static codec_huff_decoder dec;
    uint64_t key, out[4096];
    size_t n = dense_block(buf, &dec, &key);
    assert_int_equal(n, 100);
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, n, key, out), 0);

    /* Bit 64 + 10 set: "1" starts no code of a one-symbol code. */
    buf[9] |= 1u << 2;
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, n, key, out), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "no Huffman code"));
    assert_non_null(strstr(simstore_last_error(), "bit offset 74"));
    buf[9] &= (uint8_t) ~(1u << 2);

    /* Wrong key, and a count too short for the key. */
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, n, key + 1, out),
                     SIMSTORE_ECORRUPT);
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, n - 1, key, out),
                     SIMSTORE_ECORRUPT);

    /* Nonzero padding after the last value. */
    buf[255] = 0x80;
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, n, key, out), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "padding"));
    buf[255] = 0;
    buf[(64 + 99) / 8] |= (uint8_t)(1u << ((64 + 99) % 8)); /* first padding bit */
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, n, key, out), SIMSTORE_ECORRUPT);
    buf[(64 + 99) / 8] &= (uint8_t) ~(1u << ((64 + 99) % 8));

    /* More values than the block holds: runs past the end (all-zero bits
     * decode as "0" = +1 until the bits run out). */
    size_t max = (size_t)sims_codec_block_max_count(256, dec.min_len, 1);
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, max, key, out),
                     SIMSTORE_ECORRUPT);
    assert_int_equal(sims_codec_block_decode(&dec, buf, 256, 1, 0, max + 1, key, out),
                     SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "past the end"));
}

static void test_codec_block__rejects_wrap(void **state)
{
    (void)state;
    uint64_t hist[64] = {0};
    hist[61] = 1;
    hist[0] = 1;
    uint8_t len[64];
    sims_codec_huff_lengths(hist, 11, len);
    codec_huff_encoder enc;
    static codec_huff_decoder dec;
    sims_codec_huff_encoder_init(&enc, len);
    sims_codec_huff_decoder_init(&dec, len);
    uint8_t buf[256 + BITIO_WRITER_SLACK];
    uint64_t v[] = {(uint64_t)3 << 62, ((uint64_t)3 << 62) + ((uint64_t)1 << 62) - 1};
    size_t used;
    assert_int_equal(
        sims_codec_block_encode(&enc, buf, 256, 0, ((uint64_t)3 << 62) - 1, v, 2, &used), 0);
    assert_int_equal(used, 2);
    uint64_t out[2];
    assert_int_equal(
        sims_codec_block_decode(&dec, buf, 256, 0, ((uint64_t)3 << 62) - 1, 2, v[1], out), 0);
    /* Same bits, a larger predecessor: the second value passes 2^64. */
    assert_int_equal(
        sims_codec_block_decode(&dec, buf, 256, 0, ((uint64_t)3 << 62) + 1, 2, v[1], out),
        SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "overflow"));
}

static void test_codec_block__garbage_is_bounded(void **state)
{
    (void)state;
    /* Random code lengths and random block bytes in an exactly sized heap
     * buffer (ASan catches any read outside it): decoding returns a value
     * or an error, never more values than asked. */
    test_rng rng;
    test_rng_init(&rng, "block garbage", 404);
    static codec_huff_decoder dec;
    uint64_t *out = malloc(65536 * 8 * sizeof *out);
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 400; iter++) {
        size_t bytes;
        int raw_first;
        uint64_t count;
        uint8_t *buf = garbage_block(&rng, &dec, &bytes, &raw_first, &count);
        int rc = sims_codec_block_decode(&dec, buf, bytes, raw_first, test_rng_next(&rng) >> 8,
                                         count, test_rng_next(&rng), out);
        assert_true(rc == 0 || rc == SIMSTORE_ECORRUPT);
        if (rc)
            bad++;
        else
            ok++;
        free(buf);
    }
    assert_true(bad > 0);
    (void)ok;
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_bitio__lsb_first_layout),
        cmocka_unit_test(test_codec_bitio__random_round_trip),
        cmocka_unit_test(test_codec_bitio__safe_peek_zero_fills),
        cmocka_unit_test(test_codec_bitio__helpers),
        cmocka_unit_test(test_codec_huffman__empty_histogram),
        cmocka_unit_test(test_codec_huffman__one_symbol),
        cmocka_unit_test(test_codec_huffman__two_symbols),
        cmocka_unit_test(test_codec_huffman__all_64_symbols),
        cmocka_unit_test(test_codec_huffman__length_limited_is_optimal),
        cmocka_unit_test(test_codec_huffman__huge_counts),
        cmocka_unit_test(test_codec_huffman__deterministic),
        cmocka_unit_test(test_codec_huffman__canonical_codes),
        cmocka_unit_test(test_codec_huffman__decoder_table),
        cmocka_unit_test(test_codec_huffman__reader_rejects_bad_lengths),
        cmocka_unit_test(test_codec_block__round_trip),
        cmocka_unit_test(test_codec_block__extreme_values),
        cmocka_unit_test(test_codec_block__encoder_rejects),
        cmocka_unit_test(test_codec_block__rejects_damage),
        cmocka_unit_test(test_codec_block__implicit_last),
        cmocka_unit_test(test_codec_block__rejects_wrap),
        cmocka_unit_test(test_codec_block__garbage_is_bounded),
        cmocka_unit_test(test_codec_block__run_two),
        cmocka_unit_test(test_codec_block__run_two_garbage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
