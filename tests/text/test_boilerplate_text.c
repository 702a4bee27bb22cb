/* test_boilerplate_text.c: boilerplate in the text layer (format/fingerprint.md,
 * "Boilerplate"): line keys as the spec defines them (the line's tokens
 * joined by spaces, XXH3-64 with seed "SIMSLINE"), sets, the bytes removed
 * before fingerprinting, texts that are only boilerplate, paragraphs, and
 * fingerprinters without a set (or with an empty one) unchanged. */
#include "testutil.h"

#include "simstore.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#define LINE_SEED 0x53494D534C494E45ULL /* "SIMSLINE" */

static uint64_t key_of_tokens(const char *joined)
{
    return XXH3_64bits_withSeed(joined, strlen(joined), LINE_SEED);
}

static simstore_fingerprinter *fingerprinter(unsigned version)
{
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.version = version;
    o.cjk = SIMSTORE_CJK_BIGRAM;
    simstore_fingerprinter *fpr;
    assert_int_equal(simstore_fingerprinter_new(&o, &fpr), 0);
    return fpr;
}

static uint64_t fp_of(simstore_fingerprinter *fpr, const char *text, unsigned *flags)
{
    uint64_t fp;
    unsigned f;
    assert_int_equal(simstore_fingerprint_text(fpr, text, strlen(text), &fp, &f), 0);
    if (flags)
        *flags = f;
    return fp;
}

/* The keys of text's lines, as a malloc'd copy. */
static uint64_t *keys_of(simstore_fingerprinter *fpr, const char *text, size_t *n)
{
    const uint64_t *keys;
    assert_int_equal(simstore_fingerprinter_line_keys(fpr, text, strlen(text), &keys, n), 0);
    uint64_t *copy = malloc((*n + 1) * sizeof *copy);
    memcpy(copy, keys, *n * sizeof *copy);
    return copy;
}

static simstore_boilerplate *set_of(const uint64_t *keys, size_t n)
{
    simstore_boilerplate *bp;
    assert_int_equal(simstore_boilerplate_new(keys, n, NULL, &bp), 0);
    return bp;
}

/* The set of the keys of every line of `lines`. */
static simstore_boilerplate *set_of_lines(simstore_fingerprinter *fpr, const char *lines)
{
    size_t n;
    uint64_t *keys = keys_of(fpr, lines, &n);
    simstore_boilerplate *bp = set_of(keys, n);
    free(keys);
    return bp;
}

/* ---- line keys --------------------------------------------------------------- */

static void test_boilerplate_keys__definition(void **state)
{
    (void)state;
    simstore_fingerprinter *fpr = fingerprinter(2);
    /* One key per line with tokens: its tokens joined by single spaces. */
    size_t n;
    uint64_t *k = keys_of(fpr, "  Home | About   Us  ", &n);
    assert_int_equal(n, 1);
    assert_true(k[0] == key_of_tokens("home about us"));
    free(k);
    /* Case, spacing, punctuation, a CR, white space around: the same key. */
    static const char *const same[] = {"home about us", "HOME -- About us!", "\thome\tabout us\r",
                                       "Home · About · Us",
                                       "home\xC2\xA0"
                                       "about\xE3\x80\x80us"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        k = keys_of(fpr, same[i], &n);
        assert_int_equal(n, 1);
        assert_true(k[0] == key_of_tokens("home about us"));
        free(k);
    }
    /* Lines without tokens have no key; repeated lines one; keys increase. */
    k = keys_of(fpr, "\n\n   \n* * *\n--\nb line\na line\nB LINE\n\n", &n);
    assert_int_equal(n, 2);
    uint64_t a = key_of_tokens("a line"), b = key_of_tokens("b line");
    assert_true(k[0] == (a < b ? a : b) && k[1] == (a < b ? b : a));
    free(k);
    k = keys_of(fpr, "", &n);
    assert_int_equal(n, 0);
    free(k);
    /* Version 2 keys normalized text (a ligature, decomposed letters). */
    k = keys_of(fpr, "\xEF\xAC\x81ne cafe\xCC\x81", &n);
    assert_int_equal(n, 1);
    assert_true(k[0] == key_of_tokens("fine caf\xC3\xA9"));
    free(k);
    simstore_fingerprinter_free(fpr);
    /* Version 1 does not normalize: the ligature stays a token of its own. */
    fpr = fingerprinter(1);
    k = keys_of(fpr, "\xEF\xAC\x81ne cafe\xCC\x81", &n);
    assert_int_equal(n, 1);
    assert_true(k[0] != key_of_tokens("fine caf\xC3\xA9"));
    free(k);
    k = keys_of(fpr, "HOME -- About us!", &n);
    assert_true(n == 1 && k[0] == key_of_tokens("home about us"));
    free(k);
    simstore_fingerprinter_free(fpr);
    /* Version 3 keys a line of spaced Han as the unspaced line (section 16:
     * line keys take the version's tokens); version 2 as separate runs. */
    fpr = fingerprinter(3);
    k = keys_of(fpr, "新 闻 中 心\n新闻中心\n新闻\xE3\x80\x80中心", &n);
    assert_true(n == 1 && k[0] == key_of_tokens("新闻 闻中 中心"));
    free(k);
    simstore_fingerprinter_free(fpr);
    fpr = fingerprinter(2);
    k = keys_of(fpr, "新 闻 中 心", &n);
    assert_true(n == 1 && k[0] == key_of_tokens("新 闻 中 心"));
    free(k);
    simstore_fingerprinter_free(fpr);
}

/* The test vectors of format/fingerprint.md, section 15.4. */
static void test_boilerplate_vectors__spec(void **state)
{
    (void)state;
    simstore_fingerprinter *plain = fingerprinter(2), *fpr = fingerprinter(2);
    static const struct {
        const char *line;
        uint64_t key; /* 0: no key */
    } keys[] = {
        {"  Home | About   Us  ", 0xf793daa32453040fULL},
        {"HOME -- About us!", 0xf793daa32453040fULL},
        {"Site Header", 0x5fb6e0d392104dbeULL},
        {"\xEF\xAC\x81ne cafe\xCC\x81", 0x043b7d322c09e3b4ULL},
        {"* * *", 0},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        size_t n;
        uint64_t *k = keys_of(plain, keys[i].line, &n);
        assert_int_equal(n, keys[i].key ? 1 : 0);
        if (n)
            assert_true(k[0] == keys[i].key);
        free(k);
    }
    uint64_t set_keys[] = {0xf793daa32453040fULL, 0x5fb6e0d392104dbeULL};
    simstore_boilerplate *bp = set_of(set_keys, 2);
    simstore_fingerprinter_set_boilerplate(fpr, bp);
    const char *page =
        "Site Header\nThe quick brown fox jumps over the lazy dog.\nHOME | About | Us\n";
    unsigned flags;
    assert_true(fp_of(fpr, page, &flags) == 0x5cc1c8efc0c9b905ULL);
    assert_int_equal(flags, 0);
    assert_true(fp_of(plain, page, NULL) == 0x9481884a88899015ULL);
    assert_true(fp_of(fpr, "Site Header\n\nHome about us", &flags) == 0x28c08fec06289658ULL);
    assert_int_equal(flags, SIMSTORE_FP_ONLY_BOILERPLATE);
    simstore_fingerprinter_free(fpr);
    simstore_fingerprinter_free(plain);
    simstore_boilerplate_free(bp);
}

/* ---- sets ---------------------------------------------------------------------- */

static void test_boilerplate_set__api(void **state)
{
    (void)state;
    uint64_t keys[] = {9, 3, 7, 3, 1, 9};
    simstore_boilerplate_info info = {0};
    info.fraction = 0.25;
    info.min_documents = 10;
    info.documents = 40;
    simstore_boilerplate *bp;
    assert_int_equal(simstore_boilerplate_new(keys, 6, &info, &bp), 0);
    simstore_boilerplate_info got;
    simstore_boilerplate_get_info(bp, &got);
    assert_int_equal(got.lines, 4);
    assert_int_equal(got.fraction_millionths, 250000);
    assert_true(got.fraction == 0.25);
    assert_int_equal(got.min_documents, 10);
    assert_int_equal(got.documents, 40);
    const uint64_t *k = simstore_boilerplate_keys(bp);
    assert_true(k[0] == 1 && k[1] == 3 && k[2] == 7 && k[3] == 9);
    assert_int_equal(simstore_boilerplate_contains(bp, 7), 1);
    assert_int_equal(simstore_boilerplate_contains(bp, 8), 0);
    assert_int_equal(simstore_boilerplate_contains(bp, 0), 0);
    assert_int_equal(simstore_boilerplate_contains(bp, 10), 0);
    assert_int_equal(simstore_boilerplate_contains(NULL, 7), 0);
    simstore_boilerplate_free(bp);
    simstore_boilerplate_free(NULL);
    /* Defaults without info; an empty set. */
    assert_int_equal(simstore_boilerplate_new(NULL, 0, NULL, &bp), 0);
    simstore_boilerplate_get_info(bp, &got);
    assert_int_equal(got.lines, 0);
    assert_int_equal(got.fraction_millionths, 100000);
    assert_int_equal(got.min_documents, SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT);
    simstore_boilerplate_free(bp);
    /* Fractions outside (0, 1) in millionths. */
    static const double bad[] = {0, -0.5, 1, 1.5, 0.0000004, 0.9999996, 0.0 / 0.0};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        info.fraction = bad[i];
        assert_int_equal(simstore_boilerplate_new(keys, 6, &info, &bp), SIMSTORE_EINVAL);
        assert_null(bp);
    }
    info.fraction = 0.0000006; /* rounds to 1 millionth */
    assert_int_equal(simstore_boilerplate_new(keys, 6, &info, &bp), 0);
    simstore_boilerplate_get_info(bp, &got);
    assert_int_equal(got.fraction_millionths, 1);
    simstore_boilerplate_free(bp);
    assert_int_equal(simstore_boilerplate_new(NULL, 2, NULL, &bp), SIMSTORE_EINVAL);
    assert_int_equal(simstore_boilerplate_new(keys, 2, NULL, NULL), SIMSTORE_EINVAL);
}

/* ---- removal ------------------------------------------------------------------- */

static void test_boilerplate_strip__bytes_removed(void **state)
{
    (void)state;
    simstore_fingerprinter *plain = fingerprinter(2), *fpr = fingerprinter(2);
    simstore_boilerplate *bp =
        set_of_lines(plain, "Site Header\nhome about contact\n(c) 2024 Site");
    assert_int_equal(simstore_fingerprinter_set_boilerplate(fpr, bp), 0);
    assert_ptr_equal(simstore_fingerprinter_boilerplate(fpr), bp);
    /* Each boilerplate line goes with its LF; everything else stays, byte
     * for byte (blank lines and lines without tokens included). */
    static const struct {
        const char *text, *left;
    } cases[] = {
        {"site header\nthe body text here\nHOME | ABOUT | CONTACT\nmore body\n(c) 2024 site\n",
         "the body text here\nmore body\n"},
        {"the body\n  site   header  \r\n\n* * *\nend of body", "the body\n\n* * *\nend of body"},
        {"the body\n(c) 2024 site", "the body\n"},
        {"SITE HEADER\n\nthe body", "\nthe body"},
        {"the body\nsite header and more words\n", "the body\nsite header and more words\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned flags, plain_flags;
        uint64_t got = fp_of(fpr, cases[i].text, &flags);
        uint64_t want = fp_of(plain, cases[i].left, &plain_flags);
        if (got != want)
            fprintf(stderr, "case %zu: %016llx, want %016llx\n", i, (unsigned long long)got,
                    (unsigned long long)want);
        assert_true(got == want);
        assert_int_equal(flags, plain_flags);
    }
    /* Version 2 joins Han across the one line break a removed line leaves. */
    simstore_boilerplate_free(bp);
    bp = set_of_lines(plain, "nav line");
    assert_int_equal(simstore_fingerprinter_set_boilerplate(fpr, bp), 0);
    assert_true(fp_of(fpr, "\xE4\xB8\xAD\xE5\x9B\xBD\nnav line\n\xE4\xBA\xBA\xE6\xB0\x91", NULL) ==
                fp_of(plain, "\xE4\xB8\xAD\xE5\x9B\xBD\n\xE4\xBA\xBA\xE6\xB0\x91", NULL));
    /* Ill-formed bytes in a removed line are still reported. */
    unsigned flags;
    fp_of(fpr, "the body\nnav \xC0 line\n", &flags);
    assert_int_equal(flags, SIMSTORE_FP_INVALID_UTF8);
    /* NULL stops removing. */
    assert_int_equal(simstore_fingerprinter_set_boilerplate(fpr, NULL), 0);
    assert_null(simstore_fingerprinter_boilerplate(fpr));
    assert_true(fp_of(fpr, "the body\nnav line\n", NULL) ==
                fp_of(plain, "the body\nnav line\n", NULL));
    assert_int_equal(simstore_fingerprinter_set_boilerplate(NULL, bp), SIMSTORE_EINVAL);
    simstore_fingerprinter_free(fpr);
    simstore_fingerprinter_free(plain);
    simstore_boilerplate_free(bp);
}

static void test_boilerplate_strip__only_boilerplate(void **state)
{
    (void)state;
    simstore_fingerprinter *plain = fingerprinter(2), *fpr = fingerprinter(2);
    simstore_boilerplate *bp = set_of_lines(plain, "site header\nhome about contact");
    simstore_fingerprinter_set_boilerplate(fpr, bp);
    /* Nothing left with tokens: the whole text, flagged. */
    const char *only = "Site Header\n\n* * *\nhome, about, contact\n";
    unsigned flags;
    uint64_t fp = fp_of(fpr, only, &flags);
    assert_int_equal(flags, SIMSTORE_FP_ONLY_BOILERPLATE);
    assert_true(fp == fp_of(plain, only, NULL));
    assert_true(fp != 0);
    /* Empty and token-less texts are empty, not boilerplate. */
    fp_of(fpr, "", &flags);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY);
    assert_true(fp_of(fpr, "* * *\n--\n", &flags) == 0);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY);
    /* One word of its own is enough not to be boilerplate. */
    fp_of(fpr, "site header\nword\n", &flags);
    assert_int_equal(flags, 0);
    simstore_fingerprinter_free(fpr);
    simstore_fingerprinter_free(plain);
    simstore_boilerplate_free(bp);
}

/* Without a set, with NULL, or with an empty set: the fingerprints of
 * before, on generated texts. */
static void test_boilerplate_strip__no_set_unchanged(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "boilerplate unchanged", 1313);
    simstore_fingerprinter *plain = fingerprinter(2), *nulled = fingerprinter(2),
                           *empty = fingerprinter(2), *absent = fingerprinter(2);
    simstore_boilerplate *none = set_of(NULL, 0);
    uint64_t far_keys[] = {1, 2, 3};
    simstore_boilerplate *far = set_of(far_keys, 3);
    simstore_fingerprinter_set_boilerplate(nulled, far);
    simstore_fingerprinter_set_boilerplate(nulled, NULL);
    simstore_fingerprinter_set_boilerplate(empty, none);
    simstore_fingerprinter_set_boilerplate(absent, far);
    static const char *const words[] = {
        "alpha",       "Beta", "\xE4\xB8\xAD\xE5\x9B\xBD", "x", "\n", "\n\n", " ", ", ",
        "caf\xC3\xA9", "\xC0"};
    char text[4096];
    for (int round = 0; round < 200; round++) {
        size_t len = 0, nwords = (size_t)test_rng_below(&rng, 300);
        for (size_t i = 0; i < nwords; i++) {
            const char *w = words[test_rng_below(&rng, sizeof words / sizeof *words)];
            size_t wl = strlen(w);
            if (len + wl + 1 >= sizeof text)
                break;
            memcpy(text + len, w, wl);
            len += wl;
            text[len++] = ' ';
        }
        text[len] = '\0';
        unsigned f0, f1, f2, f3;
        uint64_t want = fp_of(plain, text, &f0);
        assert_true(fp_of(nulled, text, &f1) == want && f1 == f0);
        assert_true(fp_of(empty, text, &f2) == want && f2 == f0);
        assert_true(fp_of(absent, text, &f3) == want && f3 == f0);
    }
    simstore_fingerprinter_free(plain);
    simstore_fingerprinter_free(nulled);
    simstore_fingerprinter_free(empty);
    simstore_fingerprinter_free(absent);
    simstore_boilerplate_free(none);
    simstore_boilerplate_free(far);
}

/* ---- paragraphs ------------------------------------------------------------------ */

typedef struct para_list {
    size_t n;
    simstore_paragraph p[16];
} para_list;

static int keep_para(void *ctx, const simstore_paragraph *para)
{
    para_list *l = ctx;
    if (l->n < 16)
        l->p[l->n++] = *para;
    return 0;
}

static void test_boilerplate_paragraphs__around_removed_lines(void **state)
{
    (void)state;
    simstore_fingerprinter *plain = fingerprinter(2), *fpr = fingerprinter(2);
    simstore_boilerplate *bp = set_of_lines(plain, "nav line");
    simstore_fingerprinter_set_boilerplate(fpr, bp);
    /* A removed line inside a paragraph joins what surrounds it; a
     * paragraph of boilerplate alone is no paragraph. */
    const char *text = "nav line\n\nfirst para words\nNAV LINE\nfirst para again\n\nnav line\n\n"
                       "last para";
    para_list l = {0};
    unsigned long count;
    unsigned flags;
    assert_int_equal(
        simstore_fingerprint_paragraphs(fpr, text, strlen(text), keep_para, &l, &count, &flags), 0);
    assert_int_equal(count, 2);
    assert_int_equal(flags, 0);
    const char *first = strstr(text, "first para words");
    assert_int_equal(l.p[0].number, 1);
    assert_int_equal(l.p[0].offset, (size_t)(first - text));
    assert_int_equal(l.p[0].length, strlen("first para words\nNAV LINE\nfirst para again"));
    assert_true(l.p[0].fingerprint == fp_of(plain, "first para words\nfirst para again", NULL));
    assert_int_equal(l.p[1].offset, (size_t)(strstr(text, "last para") - text));
    assert_int_equal(l.p[1].length, strlen("last para"));
    assert_true(l.p[1].fingerprint == fp_of(plain, "last para", NULL));
    /* Only boilerplate: no paragraph, flagged. */
    l.n = 0;
    const char *only = "nav line\n\nNav Line\n";
    assert_int_equal(
        simstore_fingerprint_paragraphs(fpr, only, strlen(only), keep_para, &l, &count, &flags), 0);
    assert_int_equal(count, 0);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY | SIMSTORE_FP_ONLY_BOILERPLATE);
    simstore_fingerprinter_free(fpr);
    simstore_fingerprinter_free(plain);
    simstore_boilerplate_free(bp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boilerplate_keys__definition),
        cmocka_unit_test(test_boilerplate_vectors__spec),
        cmocka_unit_test(test_boilerplate_set__api),
        cmocka_unit_test(test_boilerplate_strip__bytes_removed),
        cmocka_unit_test(test_boilerplate_strip__only_boilerplate),
        cmocka_unit_test(test_boilerplate_strip__no_set_unchanged),
        cmocka_unit_test(test_boilerplate_paragraphs__around_removed_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
