/* test_sketch.c: the sketches of format/sketch.md: the test vectors, the
 * kinds and their names, one pass giving the fingerprint and the sketch,
 * and the accuracy of the similarity estimate: unbiased for sets of every
 * size (the densification included), and within a stated multiple of its
 * standard error of the exact Jaccard similarity of generated texts' shingle
 * sets, computed here from the shingles themselves. */
#include "testutil.h"

#include "simstore.h"
#include "text/sketch.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- helpers -------------------------------------------------------------- */

static void to_hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static simstore_fingerprinter *new_fpr(simstore_sketch_kind kind, simstore_cjk_mode cjk,
                                       unsigned version)
{
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.sketch = kind;
    o.cjk = cjk;
    o.version = version;
    simstore_fingerprinter *f = NULL;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_OK);
    return f;
}

/* The standard error of the estimate for large sets (format/sketch.md,
 * "Accuracy"): sqrt((1 - J^2) / m). */
/* Every kind, minhash16 to minhash256. */
#define KINDS ((int)SIMSTORE_SKETCH_MINHASH256)

static double standard_error(double j, unsigned bins)
{
    return sqrt((1 - j * j) / bins);
}

/* ---- vectors and API ------------------------------------------------------- */

static void test_sketch_vectors__format(void **state)
{
    (void)state;
    /* format/sketch.md, "Test vectors" (fingerprint version 2, w = 3). */
    static const struct {
        const char *text;
        simstore_sketch_kind kind;
        simstore_cjk_mode cjk;
        const char *fp, *sketch;
    } v[] = {
        {"", SIMSTORE_SKETCH_MINHASH16, SIMSTORE_CJK_BIGRAM, "0000000000000000",
         "00000000000000000000000000000000"},
        {"Hello", SIMSTORE_SKETCH_MINHASH16, SIMSTORE_CJK_BIGRAM, "9555e8555c62dcfd",
         "ffffffffffffffffffffffffffffffff"},
        {"The quick brown fox jumps over the lazy dog.", SIMSTORE_SKETCH_MINHASH16,
         SIMSTORE_CJK_BIGRAM, "5cc1c8efc0c9b905", "affdf6effffceb9fbdef973fd39fdfcf"},
        {"The quick brown fox jumps over the lazy dog.", SIMSTORE_SKETCH_MINHASH32,
         SIMSTORE_CJK_BIGRAM, "5cc1c8efc0c9b905",
         "6fddc1c7dbd2fdfbceafd5b9c7ef98e7b77d7e5ecfbf77dfeaf3e3f7fcc267d5"},
        {"The quick brown fox jumps over the lazy dog.", SIMSTORE_SKETCH_MINHASH64,
         SIMSTORE_CJK_BIGRAM, "5cc1c8efc0c9b905",
         "fe37f7577f8f437973deefa7fd3db7f57ffe1a79a7bffffb63ee2fbbd1f7df7576da6afcfef78bf4"
         "dd3b7bb77ffbffe7ddbdd9eed75ef925af4f9f7eab373535"},
        {"THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!", SIMSTORE_SKETCH_MINHASH16,
         SIMSTORE_CJK_BIGRAM, "5cc1c8efc0c9b905", "affdf6effffceb9fbdef973fd39fdfcf"},
        {"The quick brown fox jumps over the lazy dog.", SIMSTORE_SKETCH_MINHASH128,
         SIMSTORE_CJK_BIGRAM, "5cc1c8efc0c9b905",
         "3447f4f3fbe9b7fdff7effcdeeb97b23f11fb7f9e717d1cfffae82e5d7d8d6bafdf5ab95fff6b69f"
         "5791feef3d59717ccebf3fdb756bff77dff2ff2de7fff37f9dbfccddf5dff5bfd7e783fcebf4ffff"
         "bbdeefe3ff7dffbf3ff77ff99fbaa2ff6deff9d275b5bff32d1d16674feafffbe7f7f5597efbffff"
         "7c8fac6bdfaec9f4"},
        {"The quick brown fox jumps over the lazy dog.", SIMSTORE_SKETCH_MINHASH256,
         SIMSTORE_CJK_BIGRAM, "5cc1c8efc0c9b905",
         "ddc4fbbb1dfd7bfeeff6fef8eb87fdeb532ddcae7b7b85ff35fa3d75ffee57ffbd7db02df37be9fb"
         "f7fee4efb6f57d7edefbaf725e1ff9f63b55d599cf9dff7f5e3dffb7bd5f1badf7dfdd3775de778b"
         "2fc2fbfb9d13ff4fd8e7f3e3dddffb9deafee3eafbfb1f3ccfdfe8abf9dfdf926e9cf7df6fd7fed6"
         "fd9fdde79d3dd7bf87eb6b77b1df7a3bc96dbfb7ff6f25f7a5ddecfaf5d6ffcfdfdfdbfb487fd1ee"
         "dff3ebdc8fab6fdfdf873f7dabfdfdfdaff7aef37eebff4df30fd31dcdebfc774fffa01f792a4b7e"
         "d7cfdab9eee7fcc4acbbd7ddaf9eefb9e2fffae9dedf3effc57f1c24f2770effbeefcde5bf5f0bbe"
         "637fb9f55df3fce6cbb9dbff787afeb9"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        simstore_fingerprinter *f = new_fpr(v[i].kind, v[i].cjk, 2);
        assert_int_equal(simstore_fingerprinter_sketch(f), v[i].kind);
        uint8_t sk[SIMSTORE_SKETCH_MAX_BYTES];
        uint64_t fp;
        unsigned flags;
        assert_int_equal(
            simstore_fingerprint_sketch(f, v[i].text, strlen(v[i].text), &fp, sk, &flags),
            SIMSTORE_OK);
        char hex[2 * SIMSTORE_SKETCH_MAX_BYTES + 1], fphex[17];
        snprintf(fphex, sizeof fphex, "%016llx", (unsigned long long)fp);
        to_hex(sk, simstore_sketch_bytes(v[i].kind), hex);
        if (strcmp(fphex, v[i].fp) != 0 || strcmp(hex, v[i].sketch) != 0)
            fail_msg("vector %zu: got %s %s, want %s %s", i + 1, fphex, hex, v[i].fp, v[i].sketch);
        assert_int_equal((flags & SIMSTORE_FP_EMPTY) != 0, v[i].text[0] == '\0');
        simstore_fingerprinter_free(f);
    }
}

static void test_sketch_api__kinds(void **state)
{
    (void)state;
    static const struct {
        simstore_sketch_kind kind;
        const char *name;
        size_t bytes;
    } k[] = {{SIMSTORE_SKETCH_NONE, "none", 0},
             {SIMSTORE_SKETCH_MINHASH16, "minhash16", 16},
             {SIMSTORE_SKETCH_MINHASH32, "minhash32", 32},
             {SIMSTORE_SKETCH_MINHASH64, "minhash64", 64},
             {SIMSTORE_SKETCH_MINHASH128, "minhash128", 128},
             {SIMSTORE_SKETCH_MINHASH256, "minhash256", 256}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        assert_int_equal(simstore_sketch_bytes(k[i].kind), k[i].bytes);
        assert_string_equal(simstore_sketch_name(k[i].kind), k[i].name);
        simstore_sketch_kind parsed = (simstore_sketch_kind)99;
        assert_int_equal(simstore_sketch_parse(k[i].name, &parsed), SIMSTORE_OK);
        assert_int_equal(parsed, k[i].kind);
    }
    assert_true(simstore_sketch_bytes(SIMSTORE_SKETCH_DEFAULT) <= SIMSTORE_SKETCH_MAX_BYTES);
    assert_true(simstore_sketch_bytes(SIMSTORE_SKETCH_MINHASH256) == SIMSTORE_SKETCH_MAX_BYTES);
    assert_int_equal(simstore_sketch_bytes((simstore_sketch_kind)6), 0);
    assert_null(simstore_sketch_name((simstore_sketch_kind)6));
    simstore_sketch_kind parsed;
    assert_int_equal(simstore_sketch_parse("minhash512", &parsed), SIMSTORE_EINVAL);
    assert_int_equal(simstore_sketch_parse(NULL, &parsed), SIMSTORE_EINVAL);

    /* The estimate: (m - 2 D) / m, at least 0; unknown for no sketch. */
    uint8_t a[64] = {0}, b[64] = {0};
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH64, a, b) == 1.0);
    b[0] = 0x0F; /* 4 of 512 bins differ */
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH64, a, b) == 504.0 / 512);
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH16, a, b) == 120.0 / 128);
    memset(b, 0xFF, sizeof b); /* every bin differs: 0, not -1 */
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH64, a, b) == 0.0);
    memset(b, 0x55, sizeof b); /* half of them: 0 */
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH32, a, b) == 0.0);
    /* Only the kind's bytes are read. */
    memset(b, 0, 16);
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH16, a, b) == 1.0);
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_NONE, a, b) ==
                SIMSTORE_SIMILARITY_UNKNOWN);
    assert_true(simstore_sketch_similarity((simstore_sketch_kind)7, a, b) ==
                SIMSTORE_SIMILARITY_UNKNOWN);
    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH64, NULL, b) ==
                SIMSTORE_SIMILARITY_UNKNOWN);
}

static void test_sketch_api__fingerprinter(void **state)
{
    (void)state;
    simstore_text_options o;
    simstore_text_options_init(&o);
    assert_int_equal(o.sketch, SIMSTORE_SKETCH_NONE); /* the library's default */
    simstore_fingerprinter *f = NULL;
    o.sketch = (simstore_sketch_kind)6;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_EINVAL);
    assert_null(f);
    /* A fingerprinter without a kind makes no sketch. */
    f = new_fpr(SIMSTORE_SKETCH_NONE, SIMSTORE_CJK_BIGRAM, 2);
    uint8_t sk[SIMSTORE_SKETCH_MAX_BYTES];
    uint64_t fp;
    assert_int_equal(simstore_fingerprint_sketch(f, "a b c", 5, &fp, sk, NULL), SIMSTORE_EINVAL);
    simstore_fingerprinter_free(f);
    f = new_fpr(SIMSTORE_SKETCH_MINHASH32, SIMSTORE_CJK_BIGRAM, 2);
    assert_int_equal(simstore_fingerprint_sketch(f, NULL, 3, &fp, sk, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprint_sketch(f, "abc", 3, &fp, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprint_sketch(f, NULL, 0, &fp, sk, NULL), SIMSTORE_OK);
    simstore_fingerprinter_free(f);
}

/* One pass: the fingerprint and flags of simstore_fingerprint_text, for
 * text that takes the normalizing path too; the sketch does not depend on
 * what came before it in the same fingerprinter. */
static void test_sketch_fingerprint__same_pass(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "plain ascii words and more words here",
        "Ærø CAFÉ naïve Straße ΣΊΣΥΦΟΣ σίσυφος and \xEF\xAC\x81ne words",
        "我们是中国人，东京タワーに行きました iPhone手机２０２３年发布",
        "bad \xC0\xAF bytes \xED\xA0\x80 here",
        "",
        "!!! ---",
    };
    for (unsigned version = 1; version <= 3; version++) {
        simstore_fingerprinter *plain = new_fpr(SIMSTORE_SKETCH_NONE, SIMSTORE_CJK_BIGRAM, version);
        simstore_fingerprinter *sk =
            new_fpr(SIMSTORE_SKETCH_MINHASH64, SIMSTORE_CJK_BIGRAM, version);
        simstore_fingerprinter *fresh;
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            uint64_t a, b, c;
            unsigned fa, fb, fc;
            uint8_t s1[64], s2[64];
            size_t n = strlen(texts[i]);
            assert_int_equal(simstore_fingerprint_text(plain, texts[i], n, &a, &fa), 0);
            assert_int_equal(simstore_fingerprint_sketch(sk, texts[i], n, &b, s1, &fb), 0);
            assert_true(a == b);
            assert_int_equal(fa, fb);
            fresh = new_fpr(SIMSTORE_SKETCH_MINHASH64, SIMSTORE_CJK_BIGRAM, version);
            assert_int_equal(simstore_fingerprint_sketch(fresh, texts[i], n, &c, s2, &fc), 0);
            assert_memory_equal(s1, s2, 64);
            simstore_fingerprinter_free(fresh);
            assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH64, s1, s2) == 1.0);
            if (fa & SIMSTORE_FP_EMPTY) {
                static const uint8_t zero[64];
                assert_memory_equal(s1, zero, 64);
            }
        }
        simstore_fingerprinter_free(plain);
        simstore_fingerprinter_free(sk);
    }
}

/* The sketch's features are the fingerprint's: two texts that differ only
 * by White_Space between Han (or kana) characters have one fingerprint and
 * one sketch in version 3, and different ones in version 2, where the space
 * splits the run (format/fingerprint.md, "Version 3"). */
static void test_sketch_fingerprint__spaced_cjk(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"研究生命起源是一个古老的问题，我们是中国人。",
         "研究 生命 起源 是 一个 古老 的 问题，我们 是 中国人。"},
        {"東京タワーに行きました", "東京 タワー に\t行き ました"},
        {"一心一意地学习汉语言文学", "一 心 一 意 地\xE3\x80\x80学 习 汉 语 言 文 学"},
    };
    static const simstore_cjk_mode modes[] = {SIMSTORE_CJK_BIGRAM, SIMSTORE_CJK_FRISO};
    for (int m = 0; m < 2; m++) {
        if (modes[m] == SIMSTORE_CJK_FRISO && simstore_cjk_segmenter(NULL) != SIMSTORE_CJK_FRISO)
            continue;
        for (unsigned version = 2; version <= 3; version++) {
            simstore_fingerprinter *f = new_fpr(SIMSTORE_SKETCH_MINHASH64, modes[m], version);
            for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
                uint64_t a, b;
                uint8_t sa[64], sb[64];
                assert_int_equal(
                    simstore_fingerprint_sketch(f, pairs[i][0], strlen(pairs[i][0]), &a, sa, NULL),
                    0);
                assert_int_equal(
                    simstore_fingerprint_sketch(f, pairs[i][1], strlen(pairs[i][1]), &b, sb, NULL),
                    0);
                if (version == 3) {
                    assert_true(a == b);
                    assert_memory_equal(sa, sb, 64);
                } else if (modes[m] == SIMSTORE_CJK_BIGRAM || i == 2) {
                    /* (friso may cut a run where the space was anyway) */
                    assert_true(a != b);
                    assert_memory_not_equal(sa, sb, 64);
                    assert_true(simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH64, sa, sb) <
                                1.0);
                }
            }
            simstore_fingerprinter_free(f);
        }
    }
}

/* ---- the estimator over synthetic sets ------------------------------------- */

/* sims_sketcher_finish fills documents with many nonempty bins from
 * candidate lists, others by rounds of offers: both ways must give the bits
 * the rounds alone give (sims_sketcher_finish_by_offers, format/sketch.md
 * as written), for every kind and for sets on both sides of the switch
 * (m / 6 nonempty bins), sets whose lists run out for some bins (the rounds
 * after the listed ones finish them), one-bin and empty sets. */
static void test_sketch_densify__lists_equal_offers(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "sketch densify", 0xD3E5);
    sims_sketcher *s = malloc(sizeof *s);
    assert_non_null(s);
    size_t compared = 0, with_lists = 0;
    for (unsigned bits = 7; bits <= 11; bits++) {
        size_t m = (size_t)1 << bits;
        sims_sketcher_init(s, bits);
        /* m ln(6/5), about 0.18 m features, fill about m / 6 bins. */
        size_t sizes[] = {
            0,     1,     2, m / 16, m / 8, 17 * m / 100, 18 * m / 100, 19 * m / 100, 20 * m / 100,
            m / 4, m / 2, m, 3 * m,  10 * m};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
            for (unsigned trial = 0; trial < 40; trial++) {
                sims_sketcher_begin(s);
                for (size_t i = 0; i < sizes[si]; i++)
                    sims_sketcher_add(s, test_rng_next(&rng));
                size_t n = 0;
                for (size_t w = 0; w < m / 64 + (m < 64); w++)
                    n += (size_t)__builtin_popcountll(s->full[w]);
                with_lists += n * 6 >= m;
                uint8_t got[SIMSTORE_SKETCH_MAX_BYTES], want[SIMSTORE_SKETCH_MAX_BYTES];
                memset(got, 0xA5, sizeof got);
                memset(want, 0x5A, sizeof want);
                sims_sketcher_finish(s, got);
                sims_sketcher_finish_by_offers(s, want);
                if (memcmp(got, want, m / 8) != 0)
                    fail_msg("bins %zu, %zu features (%zu nonempty bins), trial %u: the "
                             "sketches differ",
                             m, sizes[si], n, trial);
                compared++;
            }
    }
    /* Bins whose listed sources are all empty: sets above the switch that
     * avoid every source offering to a chosen bin in the first 64 rounds
     * (its whole list), so that only the later rounds fill it. */
    for (unsigned bits = 7; bits <= 11; bits++) {
        size_t m = (size_t)1 << bits;
        unsigned q = 64 / bits, targets = bits == 7 ? 1 : 3;
        sims_sketcher_init(s, bits);
        for (unsigned trial = 0; trial < 20; trial++) {
            uint8_t banned[SIMS_SKETCH_MAX_BINS] = {0};
            for (unsigned k = 0; k < targets; k++) {
                size_t target = (size_t)(test_rng_next(&rng) & (m - 1));
                banned[target] = 1;
                for (uint64_t t = 1; t <= 64; t++)
                    for (size_t i = 0; i < m; i++) {
                        uint64_t b = (t - 1) / q, r = (t - 1) % q;
                        uint64_t x = sims_sketch_mix((b << 32 | i) + SIMS_SKETCH_T_ADD);
                        if (((size_t)(x >> (bits * r)) & (m - 1)) == target)
                            banned[i] = 1;
                    }
            }
            sims_sketcher_begin(s);
            size_t n = 0, allowed = 0;
            for (size_t j = 0; j < m; j++)
                allowed += !banned[j];
            assert_true(allowed >= m / 6 + 2);
            while (n < m / 6 + 1) {
                uint64_t h = test_rng_next(&rng);
                uint64_t g = sims_sketch_mix(h + SIMS_SKETCH_G_ADD);
                size_t bin = (size_t)(g >> (64 - bits));
                if (banned[bin] || (s->full[bin >> 6] >> (bin & 63) & 1))
                    continue;
                sims_sketcher_add(s, h);
                n++;
            }
            uint8_t got[SIMSTORE_SKETCH_MAX_BYTES], want[SIMSTORE_SKETCH_MAX_BYTES];
            sims_sketcher_finish(s, got);
            sims_sketcher_finish_by_offers(s, want);
            if (memcmp(got, want, m / 8) != 0)
                fail_msg("bins %zu, a set avoiding a bin's listed sources, trial %u: the "
                         "sketches differ",
                         m, trial);
            compared++;
            with_lists++;
        }
    }
    assert_true(with_lists > compared / 3);
    free(s);
}

/* Two sets of n random hashes sharing `common` of them: the exact Jaccard is
 * common / (2 n - common). Over many pairs of every size, including sets far
 * smaller than the bins (most bins densified), the mean error is within 4
 * standard errors of the mean: the estimate is unbiased. */
static void test_sketch_estimator__unbiased(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "sketch estimator", 0x5EEDC0DE);
    static const size_t sizes[] = {1, 3, 10, 40, 200, 1000, 6000};
    static const double targets[] = {0.5, 0.8, 0.9, 0.95};
    const unsigned trials = 600;
    sims_sketcher *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    uint64_t *ha = malloc(6000 * sizeof *ha), *hb = malloc(6000 * sizeof *hb);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(ha);
    assert_non_null(hb);
    for (unsigned bits = 7; bits <= 11; bits++) {
        simstore_sketch_kind kind = (simstore_sketch_kind)(bits - 6);
        unsigned m = 1u << bits;
        sims_sketcher_init(a, bits);
        sims_sketcher_init(b, bits);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            for (size_t ti = 0; ti < sizeof targets / sizeof targets[0]; ti++) {
                size_t common = (size_t)llround(2.0 * (double)n * targets[ti] / (1 + targets[ti]));
                double j = (double)common / (double)(2 * n - common);
                double sum = 0, sum2 = 0;
                for (unsigned t = 0; t < trials; t++) {
                    sims_sketcher_begin(a);
                    sims_sketcher_begin(b);
                    for (size_t i = 0; i < n; i++) {
                        ha[i] = test_rng_next(&rng);
                        hb[i] = i < common ? ha[i] : test_rng_next(&rng);
                        sims_sketcher_add(a, ha[i]);
                        sims_sketcher_add(b, hb[i]);
                    }
                    uint8_t sa[SIMSTORE_SKETCH_MAX_BYTES], sb[SIMSTORE_SKETCH_MAX_BYTES];
                    sims_sketcher_finish(a, sa);
                    sims_sketcher_finish(b, sb);
                    double e = simstore_sketch_similarity(kind, sa, sb) - j;
                    sum += e;
                    sum2 += e * e;
                }
                double mean = sum / trials, sd = sqrt(sum2 / trials - mean * mean);
                /* Estimates of 0 are clamped (their true value may be
                 * negative): only far below J = 0.5, never here. */
                if (fabs(mean) > 4 * sd / sqrt(trials) + 1e-12)
                    fail_msg("bins %u, n %zu, J %.3f: mean error %+.4f, sd %.4f", m, n, j, mean,
                             sd);
                /* Sets of m / 4 features or more: about the standard
                 * error of independent bins. Smaller sets lean on the
                 * densification (a few features copied to many bins): up
                 * to 2 times at 10 features in 512 bins, where the set
                 * itself is that coarse. */
                if (getenv("SIMSTORE_SKETCH_VERBOSE"))
                    fprintf(stderr, "bins %u n %zu J %.3f: mean %+.5f sd %.4f (%.2f se)\n", m, n, j,
                            mean, sd, sd / standard_error(j, m));
                if (sd > 1.25 * standard_error(j, m) + 1e-12 && 4 * n >= m)
                    fail_msg("bins %u, n %zu, J %.3f: sd %.4f, standard error %.4f", m, n, j, sd,
                             standard_error(j, m));
            }
        }
    }
    free(a);
    free(b);
    free(ha);
    free(hb);
}

/* ---- the estimator against exact Jaccard of generated texts ---------------- */

typedef struct words {
    char (*vocab)[12];
    size_t nvocab;
} words;

static void make_vocab(words *w, test_rng *rng, size_t n)
{
    w->vocab = malloc(n * sizeof *w->vocab);
    assert_non_null(w->vocab);
    w->nvocab = n;
    for (size_t i = 0; i < n; i++) {
        size_t len = 3 + (size_t)test_rng_below(rng, 7);
        for (size_t c = 0; c < len; c++)
            w->vocab[i][c] = (char)('a' + test_rng_below(rng, 26));
        w->vocab[i][len] = '\0';
    }
}

/* A text of word indices as "w1 w2 w3 ...". */
static char *render(const words *w, const uint32_t *idx, size_t n, size_t *len)
{
    char *s = malloc(n * 12 + 1);
    assert_non_null(s);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            s[at++] = ' ';
        size_t l = strlen(w->vocab[idx[i]]);
        memcpy(s + at, w->vocab[idx[i]], l);
        at += l;
    }
    s[at] = '\0';
    *len = at;
    return s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The distinct 3-word shingles of a text of n >= 3 words (the features of
 * lowercase ASCII words at w = 3, format/fingerprint.md section 5), sorted. */
static char **shingles(const words *w, const uint32_t *idx, size_t n, size_t *count)
{
    char **out = malloc((n - 2) * sizeof *out);
    assert_non_null(out);
    for (size_t i = 0; i + 2 < n; i++) {
        out[i] = malloc(40);
        assert_non_null(out[i]);
        snprintf(out[i], 40, "%s %s %s", w->vocab[idx[i]], w->vocab[idx[i + 1]],
                 w->vocab[idx[i + 2]]);
    }
    size_t k = n - 2, u = 0;
    qsort(out, k, sizeof *out, cmp_str);
    for (size_t i = 0; i < k; i++) {
        if (u > 0 && strcmp(out[i], out[u - 1]) == 0) {
            free(out[i]);
            continue;
        }
        out[u++] = out[i];
    }
    *count = u;
    return out;
}

static double exact_jaccard(char **a, size_t na, char **b, size_t nb)
{
    size_t i = 0, j = 0, both = 0;
    while (i < na && j < nb) {
        int c = strcmp(a[i], b[j]);
        if (c == 0) {
            both++;
            i++;
            j++;
        } else if (c < 0) {
            i++;
        } else {
            j++;
        }
    }
    return (double)both / (double)(na + nb - both);
}

static void free_shingles(char **s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

/* Pairs of generated texts (100..1500 words from a vocabulary of 5000; the
 * second an edit of the first: words replaced, dropped and inserted at a
 * random rate) spread over J = 0.5..1. For each kind the error of every
 * estimate is within 5 standard errors sqrt((1 - J^2) / m), inflated by
 * 1.25 for the densification of texts with fewer shingles than about
 * m ln m; and per band of J the mean error is within 4 standard errors of a
 * mean, the root mean square within 1.25 standard errors. Identical texts
 * have similarity exactly 1. The measured figures go to stderr (the README
 * quotes them). */
static void test_sketch_accuracy__generated_pairs(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "sketch accuracy", 20240613);
    words w;
    make_vocab(&w, &rng, 5000);
    enum { PAIRS = 1500, BANDS = 6 };
    uint32_t *a = malloc(1600 * sizeof *a), *b = malloc(3300 * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    simstore_fingerprinter *fpr[KINDS];
    for (int k = 0; k < KINDS; k++)
        fpr[k] = new_fpr((simstore_sketch_kind)(k + 1), SIMSTORE_CJK_BIGRAM, 2);
    double band_sum[KINDS][BANDS] = {{0}}, band_sum2[KINDS][BANDS] = {{0}},
           band_z2[KINDS][BANDS] = {{0}};
    unsigned band_n[BANDS] = {0};
    for (unsigned p = 0; p < PAIRS; p++) {
        size_t n = 100 + (size_t)test_rng_below(&rng, 1401);
        for (size_t i = 0; i < n; i++)
            a[i] = (uint32_t)test_rng_below(&rng, w.nvocab);
        /* Edit rate 0..0.15 reaches J of about 0.45; one pair in 10 is
         * identical. */
        double rate = p % 10 == 0 ? 0 : 0.15 * (double)test_rng_below(&rng, 10001) / 10000;
        size_t nb = 0;
        for (size_t i = 0; i < n; i++) {
            double u = (double)test_rng_below(&rng, 1000000) / 1e6;
            if (u < rate / 3)
                continue; /* dropped */
            if (u < 2 * rate / 3)
                b[nb++] = (uint32_t)test_rng_below(&rng, w.nvocab); /* replaced */
            else
                b[nb++] = a[i];
            if (u > 1 - rate / 3)
                b[nb++] = (uint32_t)test_rng_below(&rng, w.nvocab); /* inserted */
        }
        if (nb < 3)
            continue;
        size_t sa_n, sb_n, la, lb;
        char **sa = shingles(&w, a, n, &sa_n), **sb = shingles(&w, b, nb, &sb_n);
        double j = exact_jaccard(sa, sa_n, sb, sb_n);
        free_shingles(sa, sa_n);
        free_shingles(sb, sb_n);
        if (j < 0.5)
            continue;
        int band = j >= 1 ? BANDS - 1 : (int)((j - 0.5) * 10);
        band_n[band]++;
        char *ta = render(&w, a, n, &la), *tb = render(&w, b, nb, &lb);
        for (int k = 0; k < KINDS; k++) {
            unsigned m = 128u << k;
            uint8_t ka[SIMSTORE_SKETCH_MAX_BYTES], kb[SIMSTORE_SKETCH_MAX_BYTES];
            uint64_t fa, fb;
            assert_int_equal(simstore_fingerprint_sketch(fpr[k], ta, la, &fa, ka, NULL), 0);
            assert_int_equal(simstore_fingerprint_sketch(fpr[k], tb, lb, &fb, kb, NULL), 0);
            double est = simstore_sketch_similarity((simstore_sketch_kind)(k + 1), ka, kb);
            double se = standard_error(j, m), err = est - j;
            if (j == 1 && est != 1)
                fail_msg("pair %u: identical shingle sets, similarity %f", p, est);
            if (fabs(err) > 5 * 1.25 * se + 1e-12)
                fail_msg("pair %u (%zu and %zu words), %u bins: J %.4f, estimate %.4f (%.1f "
                         "standard errors)",
                         p, n, nb, m, j, est, err / se);
            band_sum[k][band] += err;
            band_sum2[k][band] += err * err;
            band_z2[k][band] += j < 1 ? err * err / (se * se) : 0;
        }
        free(ta);
        free(tb);
    }
    for (int k = 0; k < KINDS; k++) {
        unsigned m = 128u << k;
        for (int band = 0; band < BANDS; band++) {
            unsigned nb = band_n[band];
            assert_true(nb >= 20); /* every band is populated */
            double jmid = band == BANDS - 1 ? 1.0 : 0.55 + 0.1 * band;
            double mean = band_sum[k][band] / nb, rms = sqrt(band_sum2[k][band] / nb);
            double rms_z = sqrt(band_z2[k][band] / nb);
            char label[32];
            if (band == BANDS - 1)
                snprintf(label, sizeof label, "1 (identical sets)");
            else
                snprintf(label, sizeof label, "%.1f..%.1f", 0.5 + 0.1 * band, 0.6 + 0.1 * band);
            fprintf(stderr,
                    "sketch %u bins, J %s: %u pairs, mean error %+.4f, rms error %.4f, "
                    "rms/standard error %.2f\n",
                    m, label, nb, mean, rms, rms_z);
            if (band == BANDS - 1) {
                assert_true(rms == 0);
                continue;
            }
            double se_hi = standard_error(jmid - 0.05, m);
            if (fabs(mean) > 4 * 1.25 * se_hi / sqrt(nb))
                fail_msg("%u bins, J band %.2f: mean error %+.4f over %u pairs", m, jmid, mean, nb);
            if (rms_z > 1.25)
                fail_msg("%u bins, J band %.2f: rms error %.2f standard errors", m, jmid, rms_z);
        }
    }
    for (int k = 0; k < KINDS; k++)
        simstore_fingerprinter_free(fpr[k]);
    free(a);
    free(b);
    free(w.vocab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sketch_vectors__format),
        cmocka_unit_test(test_sketch_api__kinds),
        cmocka_unit_test(test_sketch_api__fingerprinter),
        cmocka_unit_test(test_sketch_fingerprint__spaced_cjk),
        cmocka_unit_test(test_sketch_fingerprint__same_pass),
        cmocka_unit_test(test_sketch_densify__lists_equal_offers),
        cmocka_unit_test(test_sketch_estimator__unbiased),
        cmocka_unit_test(test_sketch_accuracy__generated_pairs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
