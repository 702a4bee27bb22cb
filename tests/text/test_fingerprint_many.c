/* test_fingerprint_many.c: simstore_fingerprint_many gives, for every
 * document, exactly what simstore_fingerprint_text gives, in input order, at
 * thread counts 1, 2, 3 and 8 and at counts around its chunk size (256). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void make_texts(size_t n, char ***texts, size_t **lens)
{
    *texts = calloc(n ? n : 1, sizeof **texts);
    *lens = calloc(n ? n : 1, sizeof **lens);
    static const char *words[] = {"alpha", "beta",  "gamma", "delta", "epsilon", "zeta",
                                  "eta",   "theta", "iota",  "kappa", "中文",    "文本"};
    for (size_t i = 0; i < n; i++) {
        char buf[2048];
        size_t len = 0, count = 3 + (i * 7) % 40;
        for (size_t w = 0; w < count; w++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s ",
                                    words[(i * 31 + w * 17 + w * w) % 12]);
        if (i % 97 == 0)
            len = 0; /* some documents without words */
        (*texts)[i] = malloc(len + 1);
        memcpy((*texts)[i], buf, len);
        (*texts)[i][len] = '\0';
        (*lens)[i] = len;
    }
}

static void test_fingerprint_many__same_as_one_by_one(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 255, 256, 257, 512, 2049};
    static const unsigned threads[] = {1, 2, 3, 8, 0};
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.cjk = SIMSTORE_CJK_BIGRAM; /* no dictionary needed */
    simstore_fingerprinter *fpr;
    assert_int_equal(simstore_fingerprinter_new(&o, &fpr), SIMSTORE_OK);
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        size_t n = counts[c];
        char **texts;
        size_t *lens;
        make_texts(n, &texts, &lens);
        uint64_t *want = calloc(n + 1, sizeof *want);
        unsigned *want_flags = calloc(n + 1, sizeof *want_flags);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(
                simstore_fingerprint_text(fpr, texts[i], lens[i], &want[i], &want_flags[i]),
                SIMSTORE_OK);
        for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
            uint64_t *got = calloc(n + 1, sizeof *got);
            unsigned *got_flags = calloc(n + 1, sizeof *got_flags);
            assert_int_equal(simstore_fingerprint_many(&o, threads[t], (const char *const *)texts,
                                                       lens, n, got, got_flags),
                             SIMSTORE_OK);
            for (size_t i = 0; i < n; i++)
                if (got[i] != want[i] || got_flags[i] != want_flags[i])
                    fail_msg("n %zu, threads %u: document %zu differs", n, threads[t], i);
            /* flags may be NULL. */
            memset(got, 0, (n + 1) * sizeof *got);
            assert_int_equal(simstore_fingerprint_many(&o, threads[t], (const char *const *)texts,
                                                       lens, n, got, NULL),
                             SIMSTORE_OK);
            assert_memory_equal(got, want, n * sizeof *got);
            free(got);
            free(got_flags);
        }
        for (size_t i = 0; i < n; i++)
            free(texts[i]);
        free(texts);
        free(lens);
        free(want);
        free(want_flags);
    }
    simstore_fingerprinter_free(fpr);
}

static void test_fingerprint_many__bad_arguments(void **state)
{
    (void)state;
    uint64_t fp;
    size_t len = 1;
    const char *text = "x";
    assert_int_equal(simstore_fingerprint_many(NULL, 1, NULL, &len, 1, &fp, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprint_many(NULL, 1, &text, NULL, 1, &fp, NULL),
                     SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprint_many(NULL, 1, &text, &len, 1, NULL, NULL),
                     SIMSTORE_EINVAL);
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.shingle_words = 0; /* out of range */
    assert_int_equal(simstore_fingerprint_many(&o, 1, &text, &len, 1, &fp, NULL), SIMSTORE_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fingerprint_many__same_as_one_by_one),
        cmocka_unit_test(test_fingerprint_many__bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
