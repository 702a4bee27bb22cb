/* test_text.c: the text layer: UTF-8 decoding, tokens (Latin folding, friso,
 * bigrams, ill-formed input), the golden vectors of format/fingerprint.md,
 * agreement with a naive re-implementation, simhash properties, LENGTH
 * weighting, paragraphs, very long lines and concurrent fingerprinters. */
#include "testutil.h"

#include "simstore.h"
#include "text/features.h"
#include "text/normalize.h"
#include "text/segment.h"
#include "text/tokenize.h"
#include "text/unicode.h"

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

/* ---- helpers -------------------------------------------------------------- */

static int friso_available(void)
{
    return simstore_cjk_segmenter(NULL) == SIMSTORE_CJK_FRISO;
}

typedef struct token_list {
    char *joined; /* "a|b|c" */
    size_t len, cap;
    size_t count;
    uint32_t codepoints[64];
} token_list;

static int collect(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints, int cjk)
{
    token_list *t = ctx;
    (void)cjk;
    if (t->len + len + 2 > t->cap) {
        t->cap = (t->len + len + 2) * 2;
        t->joined = realloc(t->joined, t->cap);
        assert_non_null(t->joined);
    }
    if (t->count)
        t->joined[t->len++] = '|';
    memcpy(t->joined + t->len, bytes, len);
    t->len += len;
    t->joined[t->len] = '\0';
    if (t->count < 64)
        t->codepoints[t->count] = codepoints;
    t->count++;
    return 0;
}

/* The tokens of text as "a|b|c"; friso when use_friso, else bigrams. */
static char *tokens_n(const char *text, size_t len, int use_friso, int *invalid, token_list *info)
{
    sims_friso_task *task = NULL;
    if (use_friso)
        assert_int_equal(sims_friso_task_new(&task), 0);
    sims_tokenizer tok;
    sims_tokenizer_init(&tok, task);
    token_list list;
    memset(&list, 0, sizeof list);
    int bad = 0;
    assert_int_equal(sims_tokenize(&tok, (const uint8_t *)text, len, collect, &list, &bad), 0);
    sims_tokenizer_release(&tok);
    sims_friso_task_free(task);
    if (invalid)
        *invalid = bad;
    if (!list.joined)
        list.joined = strdup("");
    if (info)
        *info = list;
    return list.joined;
}

static void assert_tokens(const char *text, int use_friso, const char *expected)
{
    char *got = tokens_n(text, strlen(text), use_friso, NULL, NULL);
    if (strcmp(got, expected) != 0)
        fail_msg("tokens of \"%s\":\n  got      %s\n  expected %s", text, got, expected);
    free(got);
}

/* A version 1 fingerprinter (the tests written for version 1 use it). */
static simstore_fingerprinter *make_fpr(unsigned w, simstore_weighting weighting, double lambda,
                                        simstore_cjk_mode cjk)
{
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.version = 1;
    o.shingle_words = w;
    o.weighting = weighting;
    o.lambda = lambda;
    o.cjk = cjk;
    simstore_fingerprinter *f = NULL;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), 0);
    return f;
}

static uint64_t fp_n(simstore_fingerprinter *f, const char *text, size_t len, unsigned *flags)
{
    uint64_t fp = 0;
    unsigned fl = 0;
    assert_int_equal(simstore_fingerprint_text(f, text, len, &fp, &fl), 0);
    if (flags)
        *flags = fl;
    return fp;
}

static uint64_t fp_s(simstore_fingerprinter *f, const char *text)
{
    return fp_n(f, text, strlen(text), NULL);
}

static uint64_t xxh(const char *s)
{
    return XXH3_64bits_withSeed(s, strlen(s), 0);
}

/* ---- UTF-8 decoding ------------------------------------------------------- */

/* Decode to a compact trace: each scalar as itself, each replacement as
 * U+FFFD, so the maximal-subpart rule can be compared with the Unicode
 * standard's own examples. */
static size_t decode_trace(const char *bytes, size_t len, uint32_t *out, size_t cap)
{
    const uint8_t *p = (const uint8_t *)bytes, *end = p + len;
    size_t n = 0;
    while (p < end) {
        size_t step;
        uint32_t cp = sims_utf8_decode(p, end, &step);
        assert_true(step >= 1 && step <= 4 && step <= (size_t)(end - p));
        assert_true(n < cap);
        out[n++] = cp == SIMS_UTF8_INVALID ? 0xFFFD : cp;
        p += step;
    }
    return n;
}

static void assert_decodes(const char *bytes, size_t len, const uint32_t *want, size_t count)
{
    uint32_t got[64];
    size_t n = decode_trace(bytes, len, got, 64);
    assert_int_equal(n, count);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            fail_msg("code point %zu: got U+%04X, expected U+%04X", i, got[i], want[i]);
}

#define R 0xFFFD
/* Unicode 14.0, section 3.9, Tables 3-8 to 3-11. */
static void test_text_utf8__unicode_tables(void **state)
{
    (void)state;
    static const uint32_t t38[] = {R, R, R, R, R, R, R, R, 0x41};
    assert_decodes("\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41", 9, t38, 9);
    static const uint32_t t39[] = {R, R, R, R, R, R, R, R, 0x41};
    assert_decodes("\xED\xA0\x80\xED\xBF\xBF\xED\xAF\x41", 9, t39, 9);
    static const uint32_t t310[] = {R, R, R, R, R, 0x41, R, R, 0x42};
    assert_decodes("\xF4\x91\x92\x93\xFF\x41\x80\xBF\x42", 9, t310, 9);
    static const uint32_t t311[] = {R, R, R, R, 0x41};
    assert_decodes("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41", 9, t311, 5);
}

static void test_text_utf8__every_scalar_round_trips(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF)
            continue;
        uint8_t buf[4];
        size_t n = sims_utf8_encode(cp, buf), got;
        assert_int_equal(sims_utf8_decode(buf, buf + n, &got), cp);
        assert_int_equal(got, n);
        /* Every proper prefix is one maximal subpart, never a code point. */
        for (size_t cut = 1; cut < n; cut++) {
            assert_int_equal(sims_utf8_decode(buf, buf + cut, &got), SIMS_UTF8_INVALID);
            assert_int_equal(got, cut);
        }
    }
}

static void test_text_utf8__truncated(void **state)
{
    (void)state;
    int invalid = 0;
    char *t = tokens_n("ab\xE4\xB8"
                       "cd",
                       6, 0, &invalid, NULL);
    assert_string_equal(t, "ab|cd");
    assert_int_equal(invalid, 1);
    free(t);
    t = tokens_n("tail \xF0\x9F\x98", 8, 0, &invalid, NULL);
    assert_string_equal(t, "tail");
    free(t);
}

static void test_text_utf8__overlong(void **state)
{
    (void)state;
    int invalid = 0;
    /* C0 AF is an overlong '/'; E0 80 AF and F0 80 80 AF likewise. */
    char *t = tokens_n("a\xC0\xAF"
                       "b\xE0\x80\xAF"
                       "c\xF0\x80\x80\xAF"
                       "d",
                       13, 0, &invalid, NULL);
    assert_string_equal(t, "a|b|c|d");
    assert_int_equal(invalid, 1);
    free(t);
    /* An overlong encoding of a letter does not become that letter. */
    t = tokens_n("x\xC1\x81y", 4, 0, &invalid, NULL);
    assert_string_equal(t, "x|y");
    free(t);
}

static void test_text_utf8__surrogates(void **state)
{
    (void)state;
    int invalid = 0;
    char *t = tokens_n("hi\xED\xA0\x80there\xED\xBF\xBFok", 15, 0, &invalid, NULL);
    assert_string_equal(t, "hi|there|ok");
    assert_int_equal(invalid, 1);
    free(t);
}

static void test_text_utf8__above_max(void **state)
{
    (void)state;
    int invalid = 0;
    char *t = tokens_n("a\xF4\x90\x80\x80"
                       "b\xF5\x80"
                       "c\xFF"
                       "d\xF8\x88\x80\x80\x80"
                       "e",
                       17, 0, &invalid, NULL);
    assert_string_equal(t, "a|b|c|d|e");
    assert_int_equal(invalid, 1);
    free(t);
}

static void test_text_utf8__lone_continuation(void **state)
{
    (void)state;
    int invalid = 0;
    char *t = tokens_n("\x80one\xBFtwo\x80\x80\x80three\xA0", 16, 0, &invalid, NULL);
    assert_string_equal(t, "one|two|three");
    assert_int_equal(invalid, 1);
    free(t);
}

static void test_text_utf8__random_bytes(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "utf8 random bytes", 7);
    simstore_fingerprinter *f = make_fpr(3, SIMSTORE_WEIGHT_LENGTH, 2.0, SIMSTORE_CJK_AUTO);
    char buf[512];
    for (int trial = 0; trial < 3000; trial++) {
        size_t len = (size_t)test_rng_below(&rng, sizeof buf);
        for (size_t i = 0; i < len; i++) {
            /* Favour the bytes that matter: leads, continuations, ASCII. */
            uint64_t r = test_rng_next(&rng);
            buf[i] = (char)(r % 4 == 0   ? 0x80 + (r >> 8) % 0x40
                            : r % 4 == 1 ? 0xC0 + (r >> 8) % 0x40
                            : r % 4 == 2 ? 'a' + (r >> 8) % 26
                                         : (r >> 8) & 0xFF);
        }
        uint32_t trace[512];
        decode_trace(buf, len, trace, 512);
        unsigned flags;
        uint64_t a = fp_n(f, buf, len, &flags);
        /* Tokens are always well-formed UTF-8. */
        char *t = tokens_n(buf, len, friso_available(), NULL, NULL);
        size_t tlen = strlen(t);
        for (const uint8_t *p = (const uint8_t *)t; p < (const uint8_t *)t + tlen;) {
            size_t step;
            assert_int_not_equal(sims_utf8_decode(p, (const uint8_t *)t + tlen, &step),
                                 SIMS_UTF8_INVALID);
            p += step;
        }
        free(t);
        assert_int_equal(fp_n(f, buf, len, NULL), a);
    }
    simstore_fingerprinter_free(f);
}

/* ---- tokens ----------------------------------------------------------------- */

static void test_text_tokenize__english(void **state)
{
    (void)state;
    assert_tokens("Hello, World! It's 2024 -- e-mail me@example.com.", 0,
                  "hello|world|it|s|2024|e|mail|me|example|com");
    assert_tokens("The quick brown fox jumps over the lazy dog.", 0,
                  "the|quick|brown|fox|jumps|over|the|lazy|dog");
    assert_tokens("  \t\r\n  ", 0, "");
    assert_tokens("", 0, "");
}

static void test_text_tokenize__accented_folding(void **state)
{
    (void)state;
    assert_tokens("Ærø CAFÉ naïve Straße ŒUVRE Ĳssel ŸES Łódź", 0,
                  "ærø|café|naïve|straße|œuvre|ĳssel|ÿes|łódź");
    /* Final sigma folds to sigma: upper and lower case Greek agree. */
    assert_tokens("ΣΊΣΥΦΟΣ σίσυφος", 0, "σίσυφοσ|σίσυφοσ");
    /* Simple folding only: ß stays, İ keeps its dot, ſ is s, µ is μ. */
    assert_tokens("STRASSE straße İstanbul ſun µm", 0, "strasse|straße|İstanbul|sun|μm");
    /* Cyrillic and Armenian fold too. */
    assert_tokens("МОСКВА Москва ԱՐԵՎ", 0, "москва|москва|արեվ");
}

/* Every letter of Latin-1 and Latin Extended-A folds to its lowercase
 * partner (CaseFolding.txt C + S). */
static void test_text_tokenize__latin_fold_table(void **state)
{
    (void)state;
    for (uint32_t cp = 0x41; cp <= 0x17F; cp++) {
        uint32_t want = cp;
        if (cp == 0x130)
            want = 0x130; /* İ: no simple folding (only full and Turkic) */
        else if ((cp >= 0x41 && cp <= 0x5A) || (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7))
            want = cp + 0x20;
        else if (cp >= 0x100 && cp <= 0x137 && cp % 2 == 0)
            want = cp + 1;
        else if (cp >= 0x139 && cp <= 0x148 && cp % 2 == 1)
            want = cp + 1;
        else if (cp >= 0x14A && cp <= 0x177 && cp % 2 == 0)
            want = cp + 1;
        else if (cp >= 0x179 && cp <= 0x17E && cp % 2 == 1)
            want = cp + 1;
        else if (cp == 0x178)
            want = 0xFF;
        else if (cp == 0x17F)
            want = 's';
        else if (cp == 0xB5)
            want = 0x3BC;
        uint8_t in[4], out[4];
        size_t n = sims_utf8_encode(cp, in);
        unsigned cls = sims_uc_class(cp);
        if ((cls & SIMS_UC_KIND) != SIMS_UC_WORD)
            continue;
        char *t = tokens_n((const char *)in, n, 0, NULL, NULL);
        size_t m = sims_utf8_encode(want, out);
        if (strlen(t) != m || memcmp(t, out, m) != 0)
            fail_msg("U+%04X folds to '%s', expected U+%04X", cp, t, want);
        free(t);
    }
}

static void test_text_tokenize__fullwidth(void **state)
{
    (void)state;
    assert_tokens("ＡＢＣ ａｂｃ ０１２３", 0, "abc|abc|0123");
}

static void test_text_tokenize__chinese_friso(void **state)
{
    (void)state;
    const char *why = NULL;
    int mode = simstore_cjk_segmenter(&why);
    if (access("/usr/share/friso/dict/UTF-8/friso.lex.ini", R_OK) == 0 &&
        !getenv("SIMSTORE_FRISO_INI"))
        /* The dictionary is installed: the fallback must not be in use. */
        if (mode != SIMSTORE_CJK_FRISO)
            fail_msg("friso dictionary installed but not in use: %s", why);
    if (mode != SIMSTORE_CJK_FRISO) {
        print_message("friso unavailable (%s): friso token checks skipped\n", why);
        return;
    }
    assert_non_null(strstr(why, "friso 1.6.4"));
    assert_tokens("我们是中国人", 1, "我们|是|中国人");
    assert_tokens("一心一意地学习汉语言文学", 1, "一心一意|地|学习|汉语|言|文学");
    assert_tokens("研究生命起源，南京市长江大桥。", 1, "研究|生命|起源|南京市|长江大桥");
    /* Characters outside the dictionary are words of one character. */
    assert_tokens("𠀀中国㐀人", 1, "𠀀|中国|㐀|人");
    token_list info;
    char *t = tokens_n("一心一意", strlen("一心一意"), 1, NULL, &info);
    assert_int_equal(info.count, 1);
    assert_int_equal(info.codepoints[0], 4);
    free(t);
}

static void test_text_tokenize__chinese_bigram(void **state)
{
    (void)state;
    assert_tokens("我们是中国人", 0, "我们|们是|是中|中国|国人");
    assert_tokens("人", 0, "人");
    assert_tokens("人 口", 0, "人|口");
    assert_tokens("中国，人民", 0, "中国|人民");
    /* Planes 2 and 3 are Han too. */
    assert_tokens("𠀀𠀁", 0, "𠀀𠀁");
}

static void test_text_tokenize__kana_and_hangul(void **state)
{
    (void)state;
    /* Kana runs are bigrams in every mode; kanji are Han runs. */
    assert_tokens("ひらがな", 1, "ひら|らが|がな");
    assert_tokens("東京タワーに行きました", 0, "東京|タワ|ワー|ーに|行|きま|まし|した");
    /* Hangul is written with spaces between words: ordinary words. */
    assert_tokens("안녕하세요 세계, 반갑습니다", 1, "안녕하세요|세계|반갑습니다");
}

static void test_text_tokenize__mixed_scripts(void **state)
{
    (void)state;
    assert_tokens("iPhone手机２０２３年发布", 0, "iphone|手机|2023|年发|发布");
    if (friso_available())
        assert_tokens("iPhone手机２０２３年发布", 1, "iphone|手机|2023|年|发布");
    assert_tokens("Москва и Paris, Αθήνα και 北京", 0, "москва|и|paris|αθήνα|και|北京");
    assert_tokens("مرحبا بالعالم שלום עולם नमस्ते दुनिया", 0, "مرحبا|بالعالم|שלום|עולם|नमस्ते|दुनिया");
}

static void test_text_tokenize__emoji(void **state)
{
    (void)state;
    assert_tokens("I \xE2\x9D\xA4\xEF\xB8\x8F pizza \xF0\x9F\x8D\x95 and pasta\xF0\x9F\x8D\x9D!", 0,
                  "i|pizza|and|pasta");
    /* Skin tones and ZWJ sequences are not letters either. */
    assert_tokens(
        "ok\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBDgo \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x92\xBB", 0,
        "ok|go");
}

static void test_text_tokenize__ignorables(void **state)
{
    (void)state;
    /* Soft hyphen, ZWJ, ZWNJ, word joiner, BOM and variation selectors join. */
    assert_tokens("soft\xC2\xADhyphen zero\xE2\x80\x8Dwidth \xEF\xBB\xBF"
                  "bom wo\xE2\x81\xA0rd",
                  0, "softhyphen|zerowidth|bom|word");
    assert_tokens("中\xEF\xB8\x80国", 0, "中国");
}

static void test_text_tokenize__codepoint_lengths(void **state)
{
    (void)state;
    token_list info;
    char *t = tokens_n("café straße 中国人", strlen("café straße 中国人"), 0, NULL, &info);
    assert_string_equal(t, "café|straße|中国|国人");
    assert_int_equal(info.codepoints[0], 4);
    assert_int_equal(info.codepoints[1], 6);
    assert_int_equal(info.codepoints[2], 2);
    free(t);
}

/* ---- golden vectors (format/fingerprint.md, "Test vectors") ------------- */

typedef struct vector {
    const char *text;
    size_t len; /* 0: strlen */
    unsigned w;
    simstore_weighting weighting;
    double lambda;
    simstore_cjk_mode cjk;
    uint64_t fp;
    unsigned flags;
} vector;

#define TF SIMSTORE_WEIGHT_TF
#define LEN SIMSTORE_WEIGHT_LENGTH
#define FRISO SIMSTORE_CJK_FRISO
#define BIGRAM SIMSTORE_CJK_BIGRAM
static const vector vectors[] = {
    {"", 0, 3, TF, 1, BIGRAM, 0x0000000000000000ULL, SIMSTORE_FP_EMPTY},
    {"!!! --- ... ??? \xF0\x9F\x98\x80", 0, 3, TF, 1, BIGRAM, 0x0000000000000000ULL,
     SIMSTORE_FP_EMPTY},
    {"Hello", 0, 3, TF, 1, BIGRAM, 0x9555e8555c62dcfdULL, 0},
    {"The quick brown fox jumps over the lazy dog.", 0, 3, TF, 1, BIGRAM, 0x5cc1c8efc0c9b905ULL, 0},
    {"The quick brown fox jumps over the lazy dog.", 0, 1, TF, 1, BIGRAM, 0x8212868318d29267ULL, 0},
    {"The quick brown fox jumps over the lazy dog.", 0, 1, LEN, 0.5, BIGRAM, 0x8612868318d29263ULL,
     0},
    {"Ærø CAFÉ naïve Straße ΣΊΣΥΦΟΣ σίσυφος", 0, 3, TF, 1, BIGRAM, 0x2a2d252a33101405ULL, 0},
    {"Ærø CAFÉ naïve Straße ΣΊΣΥΦΟΣ σίσυφος", 0, 1, LEN, 0.5, BIGRAM, 0xc4829d00d2053808ULL, 0},
    {"我们是中国人", 0, 3, TF, 1, FRISO, 0xbaa4ca39912ecf47ULL, 0},
    {"我们是中国人", 0, 3, TF, 1, BIGRAM, 0xe607871d2ad8e16aULL, 0},
    {"東京タワーに行きました", 0, 3, TF, 1, FRISO, 0x73fe621488cfff5fULL, 0},
    {"東京タワーに行きました", 0, 3, TF, 1, BIGRAM, 0x32824004404eae5dULL, 0},
    {"iPhone手机２０２３年发布", 0, 3, TF, 1, FRISO, 0x340730985883a8ecULL, 0},
    {"iPhone手机２０２３年发布", 0, 3, TF, 1, BIGRAM, 0xdeffe149c38f00baULL, 0},
    {"iPhone手机２０２３年发布", 0, 1, LEN, 0.5, FRISO, 0x947e8d4b8e009076ULL, 0},
    {"bad \xC0\xAF bytes \xED\xA0\x80 here \xF4\x90\x80\x80 and \xE4\xB8", 0, 3, TF, 1, BIGRAM,
     0xa3818a0214402810ULL, SIMSTORE_FP_INVALID_UTF8},
    {"soft\xC2\xADhyphen zero\xE2\x80\x8Dwidth joiner", 0, 3, TF, 1, BIGRAM, 0xfb37cedc998fcc24ULL,
     0},
    {"안녕하세요 세계, 반갑습니다", 0, 3, TF, 1, BIGRAM, 0x5a446926b2df8e4eULL, 0},
    {"I \xE2\x9D\xA4\xEF\xB8\x8F pizza \xF0\x9F\x8D\x95 and pasta \xF0\x9F\x8D\x9D!", 0, 3, TF, 1,
     BIGRAM, 0x10838000c840da1dULL, 0},
    {"the extraordinary cat saw the extraordinary dog", 0, 1, TF, 1, BIGRAM, 0xc22283c29cf334f6ULL,
     0},
    {"the extraordinary cat saw the extraordinary dog", 0, 1, LEN, 3, BIGRAM, 0xe222b4ccdce3a4d2ULL,
     0},
};

static void test_text_golden__vectors(void **state)
{
    (void)state;
    int friso = friso_available(), skipped = 0;
    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        const vector *v = &vectors[i];
        if (v->cjk == FRISO && !friso) {
            skipped++;
            continue;
        }
        simstore_fingerprinter *f = make_fpr(v->w, v->weighting, v->lambda, v->cjk);
        unsigned flags;
        uint64_t fp = fp_n(f, v->text, v->len ? v->len : strlen(v->text), &flags);
        if (fp != v->fp || flags != v->flags)
            fail_msg("vector %zu: got %016llx flags %u, expected %016llx flags %u", i,
                     (unsigned long long)fp, flags, (unsigned long long)v->fp, v->flags);
        simstore_fingerprinter_free(f);
    }
    if (skipped)
        print_message("%d friso vectors skipped: friso unavailable\n", skipped);
}

/* ---- exact consequences of the definition ---------------------------------- */

static void test_text_fingerprint__definition_cases(void **state)
{
    (void)state;
    simstore_fingerprinter *w1 = make_fpr(1, TF, 1, BIGRAM);
    simstore_fingerprinter *w3 = make_fpr(3, TF, 1, BIGRAM);
    /* One feature: every bit is that feature's bit. */
    assert_int_equal(fp_s(w1, "Hello"), xxh("hello"));
    assert_int_equal(fp_s(w3, "Hello"), xxh("hello"));
    /* Shorter than w: one shingle of all its tokens, joined by spaces. */
    assert_int_equal(fp_s(w3, "One, two!"), xxh("one two"));
    /* Two features of weight 1: equal bits survive, ties are 0. */
    assert_int_equal(fp_s(w1, "ab cd"), xxh("ab") & xxh("cd"));
    assert_int_equal(fp_s(w3, "a b c d"), xxh("a b c") & xxh("b c d"));
    /* Three occurrences outvote one. */
    assert_int_equal(fp_s(w1, "ab ab ab cd"), xxh("ab"));
    /* Bigram tokens join with spaces like words. */
    assert_int_equal(fp_s(w3, "中国人"), xxh("中国 国人"));
    simstore_fingerprinter_free(w1);
    simstore_fingerprinter_free(w3);
}

static void test_text_fingerprint__empty_and_flags(void **state)
{
    (void)state;
    simstore_fingerprinter *f = make_fpr(3, TF, 1, BIGRAM);
    unsigned flags = 99;
    assert_int_equal(fp_n(f, NULL, 0, &flags), 0);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY);
    assert_int_equal(fp_n(f, " \n\t,;:!?\xE2\x80\x94", 12, &flags), 0);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY);
    assert_int_equal(fp_n(f, "\xFF\xFE", 2, &flags), 0);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY | SIMSTORE_FP_INVALID_UTF8);
    fp_n(f, "ok \xFF", 4, &flags);
    assert_int_equal(flags, SIMSTORE_FP_INVALID_UTF8);
    /* NUL bytes are separators, not terminators. */
    assert_int_equal(fp_n(f, "one\0two", 7, NULL), fp_s(f, "one two"));
    simstore_fingerprinter_free(f);
}

/* ---- agreement with a naive implementation ------------------------------------
 * Tokens from the tokenizer (tested above); shingles joined by spaces, hashed,
 * and summed per bit with per-distinct-feature weights, the slow obvious way. */

typedef struct naive_tokens {
    char **tok;
    uint32_t *cps;
    char *cjk;
    size_t n, cap;
} naive_tokens;

static int naive_collect(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints, int cjk)
{
    naive_tokens *t = ctx;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->tok = realloc(t->tok, t->cap * sizeof *t->tok);
        t->cps = realloc(t->cps, t->cap * sizeof *t->cps);
        t->cjk = realloc(t->cjk, t->cap);
    }
    t->tok[t->n] = strndup((const char *)bytes, len);
    t->cps[t->n] = codepoints;
    t->cjk[t->n] = (char)cjk;
    t->n++;
    return 0;
}

typedef struct naive_feature {
    uint64_t h;
    uint32_t len;
} naive_feature;

static int feature_cmp(const void *a, const void *b)
{
    const naive_feature *x = a, *y = b;
    return x->h < y->h ? -1 : x->h > y->h;
}

static uint64_t naive_fp(const char *text, size_t len, unsigned w, int length, double lambda)
{
    naive_tokens t;
    memset(&t, 0, sizeof t);
    sims_tokenizer tok;
    sims_tokenizer_init(&tok, NULL);
    int invalid = 0;
    assert_int_equal(sims_tokenize(&tok, (const uint8_t *)text, len, naive_collect, &t, &invalid),
                     0);
    sims_tokenizer_release(&tok);
    uint64_t fp = 0;
    if (t.n) {
        size_t nf = t.n < w ? 1 : t.n - w + 1, per = t.n < w ? t.n : w;
        naive_feature *feat = calloc(nf, sizeof *feat);
        for (size_t i = 0; i < nf; i++) {
            size_t bytes = 0;
            for (size_t j = 0; j < per; j++)
                bytes += strlen(t.tok[i + j]) + 1;
            char *s = calloc(1, bytes);
            for (size_t j = 0; j < per; j++) {
                if (j)
                    strcat(s, " ");
                strcat(s, t.tok[i + j]);
                if (t.cps[i + j] > feat[i].len)
                    feat[i].len = t.cps[i + j];
            }
            feat[i].h = xxh(s);
            free(s);
        }
        /* Stable by hash; the first occurrence's length wins (qsort is not
         * stable, but equal hashes here are equal shingles, equal lengths). */
        qsort(feat, nf, sizeof *feat, feature_cmp);
        long double sums[64] = {0};
        uint64_t lambda_q16 = (uint64_t)(lambda * 65536 + 0.5);
        for (size_t i = 0; i < nf;) {
            size_t j = i;
            while (j < nf && feat[j].h == feat[i].h)
                j++;
            long double score = (long double)(j - i) * 65536;
            if (length && feat[i].len >= 4)
                score += (long double)lambda_q16;
            for (int b = 0; b < 64; b++)
                sums[b] += (feat[i].h >> b & 1) ? score : -score;
            i = j;
        }
        for (int b = 0; b < 64; b++)
            if (sums[b] > 0)
                fp |= 1ULL << b;
        free(feat);
    }
    for (size_t i = 0; i < t.n; i++)
        free(t.tok[i]);
    free(t.tok);
    free(t.cps);
    free(t.cjk);
    return fp;
}

/* Random text over a seeded vocabulary: Latin words (some accented, some
 * capitalised), Han and kana runs, punctuation, newlines. */
static size_t random_text(test_rng *rng, char *out, size_t words, unsigned vocab)
{
    static const char *const syll[] = {"ka", "to", "re", "mi", "sa", "lo", "ne", "vu",
                                       "di", "pe", "qu", "ra", "st", "xe", "bo", "é",
                                       "ß",  "ø",  "中", "国", "人", "の", "カ"};
    static const char *const seps[] = {" ", " ", " ", " ", ", ", ". ", "\n", " - ", "; "};
    size_t n = 0;
    for (size_t i = 0; i < words; i++) {
        uint64_t id = test_rng_below(rng, vocab);
        /* A word is a fixed function of its vocabulary id. */
        uint64_t h = id * 0x9E3779B97F4A7C15ULL + 12345;
        unsigned sylls = 1 + (unsigned)(h % 4);
        for (unsigned s = 0; s < sylls; s++) {
            h = h * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *sy = syll[(h >> 33) % (sizeof syll / sizeof syll[0])];
            size_t l = strlen(sy);
            memcpy(out + n, sy, l);
            n += l;
        }
        const char *sep = seps[test_rng_below(rng, sizeof seps / sizeof seps[0])];
        memcpy(out + n, sep, strlen(sep));
        n += strlen(sep);
    }
    out[n] = '\0';
    return n;
}

static void test_text_fingerprint__matches_naive(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "naive agreement", 11);
    static const unsigned ws[] = {1, 2, 3, 5, 32};
    size_t cap = 200000 * 16;
    char *text = malloc(cap);
    simstore_fingerprinter *f[5][2];
    for (int i = 0; i < 5; i++) {
        f[i][0] = make_fpr(ws[i], TF, 1, BIGRAM);
        f[i][1] = make_fpr(ws[i], LEN, 2.5, BIGRAM);
    }
    for (int trial = 0; trial < 40; trial++) {
        /* Some documents exceed the 64 KiB token buffer, so compaction runs. */
        size_t words =
            trial % 8 == 7 ? 30000 + test_rng_below(&rng, 20000) : test_rng_below(&rng, 600);
        size_t len = random_text(&rng, text, words, 50 + (unsigned)test_rng_below(&rng, 3000));
        for (int i = 0; i < 5; i++)
            for (int l = 0; l < 2; l++) {
                uint64_t got = fp_n(f[i][l], text, len, NULL);
                uint64_t want = naive_fp(text, len, ws[i], l, 2.5);
                if (got != want)
                    fail_msg("trial %d (%zu words), w=%u %s: got %016llx, naive %016llx", trial,
                             words, ws[i], l ? "length" : "tf", (unsigned long long)got,
                             (unsigned long long)want);
            }
    }
    for (int i = 0; i < 5; i++) {
        simstore_fingerprinter_free(f[i][0]);
        simstore_fingerprinter_free(f[i][1]);
    }
    free(text);
}

/* ---- properties ------------------------------------------------------------ */

static void test_text_properties__identical_and_reused(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "identical", 3);
    char *a = malloc(100000), *b = malloc(100000);
    simstore_fingerprinter *shared = make_fpr(3, LEN, 1, SIMSTORE_CJK_AUTO);
    for (int trial = 0; trial < 50; trial++) {
        size_t la = random_text(&rng, a, test_rng_below(&rng, 2000), 500);
        size_t lb = random_text(&rng, b, test_rng_below(&rng, 2000), 500);
        uint64_t first = fp_n(shared, a, la, NULL);
        fp_n(shared, b, lb, NULL);
        /* The same text, after other documents and in a fresh fingerprinter. */
        simstore_fingerprinter *fresh = make_fpr(3, LEN, 1, SIMSTORE_CJK_AUTO);
        assert_int_equal(fp_n(shared, a, la, NULL), first);
        assert_int_equal(fp_n(fresh, a, la, NULL), first);
        simstore_fingerprinter_free(fresh);
    }
    simstore_fingerprinter_free(shared);
    free(a);
    free(b);
}

static void test_text_properties__layout_and_case_do_not_matter(void **state)
{
    (void)state;
    simstore_fingerprinter *f = make_fpr(3, TF, 1, SIMSTORE_CJK_AUTO);
    uint64_t a = fp_s(f, "The lighthouse at Carrow Point was lit again on Saturday.");
    assert_int_equal(fp_s(f, "THE LIGHTHOUSE\nat  Carrow-Point\n\n  was lit AGAIN, on Saturday!!"),
                     a);
    assert_int_not_equal(fp_s(f, "The lighthouse at Carrow Point was lit again on Sunday."), a);
    simstore_fingerprinter_free(f);
}

/* Build a text of `count` words from word ids. */
static size_t words_text(const unsigned *ids, size_t count, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        n += (size_t)sprintf(out + n, "%sw%ux%u", i ? " " : "", ids[i] * 7919u % 10007u, ids[i]);
    return n;
}

static void test_text_properties__one_word_edit(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "one-word edit", 5);
    simstore_fingerprinter *f = make_fpr(3, TF, 1, SIMSTORE_CJK_AUTO);
    unsigned ids[500];
    char *a = malloc(500 * 24), *b = malloc(500 * 24);
    unsigned total = 0, worst = 0, trials = 200;
    for (unsigned t = 0; t < trials; t++) {
        for (int i = 0; i < 500; i++)
            ids[i] = (unsigned)test_rng_below(&rng, 5000);
        size_t la = words_text(ids, 500, a);
        ids[test_rng_below(&rng, 500)] = 5000 + t; /* a word not in the text */
        size_t lb = words_text(ids, 500, b);
        unsigned d = simstore_distance(fp_n(f, a, la, NULL), fp_n(f, b, lb, NULL));
        total += d;
        if (d > worst)
            worst = d;
    }
    double mean = (double)total / trials;
    print_message("one-word edit of 500 words: mean %.2f bits, worst %u\n", mean, worst);
    assert_true(mean <= 10.0);
    simstore_fingerprinter_free(f);
    free(a);
    free(b);
}

static void test_text_properties__unrelated_texts(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "unrelated", 9);
    simstore_fingerprinter *f = make_fpr(3, TF, 1, SIMSTORE_CJK_AUTO);
    char *a = malloc(300 * 40), *b = malloc(300 * 40);
    unsigned total = 0, pairs = 200;
    for (unsigned t = 0; t < pairs; t++) {
        size_t la = random_text(&rng, a, 300, 2000);
        size_t lb = random_text(&rng, b, 300, 2000);
        total += simstore_distance(fp_n(f, a, la, NULL), fp_n(f, b, lb, NULL));
    }
    double mean = (double)total / pairs;
    print_message("unrelated 300-word texts: mean distance %.2f bits\n", mean);
    assert_true(mean >= 28.0 && mean <= 36.0);
    simstore_fingerprinter_free(f);
    free(a);
    free(b);
}

/* ---- LENGTH weighting ----------------------------------------------------------- */

static void test_text_length__lambda_zero_is_tf(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "lambda zero", 13);
    char *text = malloc(2000 * 16);
    simstore_fingerprinter *tf = make_fpr(2, TF, 1, BIGRAM), *l0 = make_fpr(2, LEN, 0, BIGRAM);
    for (int t = 0; t < 100; t++) {
        size_t len = random_text(&rng, text, test_rng_below(&rng, 2000), 300);
        assert_int_equal(fp_n(tf, text, len, NULL), fp_n(l0, text, len, NULL));
    }
    simstore_fingerprinter_free(tf);
    simstore_fingerprinter_free(l0);
    free(text);
}

static void test_text_length__long_feature_outweighs(void **state)
{
    (void)state;
    /* "ab" occurs 3 times (score 3); "longer" once, long: 1 + λ. */
    simstore_fingerprinter *tf = make_fpr(1, TF, 1, BIGRAM);
    simstore_fingerprinter *l1 = make_fpr(1, LEN, 1, BIGRAM);
    simstore_fingerprinter *l5 = make_fpr(1, LEN, 5, BIGRAM);
    simstore_fingerprinter *l2 = make_fpr(1, LEN, 2, BIGRAM);
    const char *text = "ab ab ab longer";
    uint64_t ab = xxh("ab"), lo = xxh("longer");
    assert_int_equal(fp_s(tf, text), ab);      /* 3 vs 1 */
    assert_int_equal(fp_s(l1, text), ab);      /* 3 vs 2 */
    assert_int_equal(fp_s(l2, text), ab & lo); /* 3 vs 3: ties are 0 */
    assert_int_equal(fp_s(l5, text), lo);      /* 3 vs 6 */
    /* λ is added once per distinct feature, however often it occurs. */
    assert_int_equal(fp_s(l5, "ab ab ab ab ab ab ab ab longer longer"), ab);   /* 8 vs 2+5 */
    assert_int_equal(fp_s(l5, "ab ab ab ab ab ab ab longer longer"), ab & lo); /* 7 vs 7 */
    assert_int_equal(fp_s(l5, "ab ab ab ab ab ab longer longer"), lo);         /* 6 vs 7 */
    /* Length counts code points, not bytes: "éééé" is long, "中国" is not. */
    assert_int_equal(fp_s(l5, "ab ab ab éééé"), xxh("éééé"));
    assert_int_equal(fp_s(l5, "ab ab ab abc"), ab);
    /* A shingle's length is that of its longest token. */
    simstore_fingerprinter *s2 = make_fpr(2, LEN, 5, BIGRAM);
    assert_int_equal(fp_s(s2, "a b c longer"), xxh("c longer")); /* 6 vs 1 + 1 */
    simstore_fingerprinter_free(tf);
    simstore_fingerprinter_free(l1);
    simstore_fingerprinter_free(l2);
    simstore_fingerprinter_free(l5);
    simstore_fingerprinter_free(s2);
}

/* ---- paragraphs ----------------------------------------------------------------- */

typedef struct para_log {
    int count;
    simstore_paragraph p[16];
    int stop_after;
} para_log;

static int log_para(void *ctx, const simstore_paragraph *para)
{
    para_log *l = ctx;
    l->p[l->count++] = *para;
    return l->count == l->stop_after ? 42 : 0;
}

static void test_text_paragraphs__rules(void **state)
{
    (void)state;
    static const char text[] = "First paragraph,\nstill the first.\n"
                               "\n"
                               " \t \r\n"
                               "Second one.\n"
                               "\xC2\xA0\xE3\x80\x80\n" /* NBSP and U+3000: blank */
                               "* * *\n"                /* no tokens: skipped */
                               "\n"
                               "Third,\r\nwith CRLF.\r\n"
                               "\xFF\n" /* ill-formed: not blank */
                               "\n\n";
    simstore_fingerprinter *f = make_fpr(3, TF, 1, BIGRAM);
    para_log log;
    memset(&log, 0, sizeof log);
    unsigned long count = 0;
    unsigned flags = 0;
    assert_int_equal(
        simstore_fingerprint_paragraphs(f, text, sizeof text - 1, log_para, &log, &count, &flags),
        0);
    assert_int_equal(log.count, 3);
    assert_int_equal(count, 3);
    assert_int_equal(flags, SIMSTORE_FP_INVALID_UTF8);
    static const char *const expect[] = {"First paragraph,\nstill the first.", "Second one.",
                                         "Third,\r\nwith CRLF.\r\n\xFF"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(log.p[i].number, (unsigned long)i + 1);
        assert_int_equal(log.p[i].length, strlen(expect[i]));
        assert_memory_equal(text + log.p[i].offset, expect[i], strlen(expect[i]));
        assert_int_equal(log.p[i].fingerprint, fp_s(f, expect[i]));
        assert_int_equal(log.p[i].flags, i == 2 ? SIMSTORE_FP_INVALID_UTF8 : 0u);
    }
    simstore_fingerprinter_free(f);
}

static void test_text_paragraphs__edges(void **state)
{
    (void)state;
    simstore_fingerprinter *f = make_fpr(3, TF, 1, BIGRAM);
    para_log log;
    unsigned long count = 7;
    unsigned flags = 0;
    /* Nothing but blank lines and punctuation: no paragraphs, EMPTY. */
    memset(&log, 0, sizeof log);
    assert_int_equal(
        simstore_fingerprint_paragraphs(f, "\n \n--\n\n", 7, log_para, &log, &count, &flags), 0);
    assert_int_equal(count, 0);
    assert_int_equal(log.count, 0);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY);
    assert_int_equal(simstore_fingerprint_paragraphs(f, NULL, 0, log_para, &log, &count, &flags),
                     0);
    assert_int_equal(flags, SIMSTORE_FP_EMPTY);
    /* One paragraph without a final newline equals the whole document. */
    memset(&log, 0, sizeof log);
    const char *one = "just one paragraph of a few words";
    assert_int_equal(
        simstore_fingerprint_paragraphs(f, one, strlen(one), log_para, &log, &count, &flags), 0);
    assert_int_equal(count, 1);
    assert_int_equal(log.p[0].fingerprint, fp_s(f, one));
    /* The callback's nonzero return stops and is returned. */
    memset(&log, 0, sizeof log);
    log.stop_after = 2;
    const char *three = "a b c\n\nd e f\n\ng h i\n";
    assert_int_equal(
        simstore_fingerprint_paragraphs(f, three, strlen(three), log_para, &log, &count, &flags),
        42);
    assert_int_equal(log.count, 2);
    assert_int_equal(count, 2);
    simstore_fingerprinter_free(f);
}

/* ---- very long input ------------------------------------------------------------ */

static void test_text_big__ten_megabyte_line(void **state)
{
    (void)state;
    size_t len = 10u << 20;
    char *text = malloc(len);
    test_rng rng;
    test_rng_init(&rng, "10 MB line", 17);
    /* Words of 1..8 letters, single spaces, no newline anywhere. */
    for (size_t i = 0; i < len;) {
        size_t wl = 1 + (size_t)test_rng_below(&rng, 8);
        for (size_t j = 0; j < wl && i < len; j++)
            text[i++] = (char)('a' + test_rng_below(&rng, 26));
        if (i < len)
            text[i++] = ' ';
    }
    simstore_fingerprinter *f = make_fpr(3, LEN, 1, SIMSTORE_CJK_AUTO);
    unsigned flags;
    uint64_t whole = fp_n(f, text, len, &flags);
    assert_int_equal(flags, 0);
    assert_int_equal(fp_n(f, text, len, NULL), whole);
    para_log log;
    memset(&log, 0, sizeof log);
    unsigned long count;
    assert_int_equal(simstore_fingerprint_paragraphs(f, text, len, log_para, &log, &count, NULL),
                     0);
    assert_int_equal(count, 1);
    assert_int_equal(log.p[0].fingerprint, whole);
    /* One 10 MB word is one token, one feature. */
    memset(text, 'x', len);
    assert_int_equal(fp_n(f, text, len, NULL), XXH3_64bits_withSeed(text, len, 0));
    /* A long Han line: 1 MB through friso (or bigrams). */
    size_t han = 0;
    static const char *const hz[] = {"中国", "人民", "研究", "生命", "起源", "的", "是", "大学"};
    while (han + 8 < (1u << 20)) {
        const char *s = hz[test_rng_below(&rng, 8)];
        memcpy(text + han, s, strlen(s));
        han += strlen(s);
    }
    uint64_t a = fp_n(f, text, han, &flags);
    assert_int_equal(flags, 0);
    assert_int_equal(fp_n(f, text, han, NULL), a);
    simstore_fingerprinter_free(f);
    free(text);
}

/* ---- version 2 (format/fingerprint.md, "Version 2") ------------------------------ */

static simstore_fingerprinter *make_fpr2_lambda(unsigned w, unsigned c,
                                                simstore_weighting weighting, double lambda,
                                                simstore_cjk_mode cjk)
{
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.version = 2; /* named: the default is version 3 since it was published */
    o.shingle_words = w;
    o.cjk_shingle = c;
    o.weighting = weighting;
    o.lambda = lambda;
    o.cjk = cjk;
    simstore_fingerprinter *f = NULL;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), 0);
    return f;
}

static simstore_fingerprinter *make_fpr2(unsigned w, unsigned c, simstore_weighting weighting,
                                         simstore_cjk_mode cjk)
{
    return make_fpr2_lambda(w, c, weighting, 1.0, cjk);
}

#define LOG SIMSTORE_WEIGHT_LOG
typedef struct vector2 {
    const char *text;
    unsigned w, c;
    simstore_weighting weighting;
    simstore_cjk_mode cjk;
    uint64_t fp;
} vector2;

/* format/fingerprint.md, "Test vectors of version 2". */
static const vector2 vectors2[] = {
    {"The quick brown fox jumps over the lazy dog.", 3, 2, TF, BIGRAM, 0x5cc1c8efc0c9b905ULL},
    {"Ærø CAFÉ naïve Straße ΣΊΣΥΦΟΣ σίσυφος", 3, 2, TF, BIGRAM, 0xd02702a0db0251d7ULL},
    {"\xEF\xAC\x81"
     "ne Ｃａｆｅ\xCC\x81 ＡＢＣ ① Ⅻ ½",
     1, 2, TF, BIGRAM, 0x648707928f1df358ULL},
    {"我们是中国人", 3, 2, TF, FRISO, 0x60783d10123e8464ULL},
    {"我们是中国人", 3, 2, TF, BIGRAM, 0xc059a641416449f8ULL},
    {"我们是\n中国人", 3, 2, TF, BIGRAM, 0xc059a641416449f8ULL},
    {"東京タワーに行きました", 3, 2, TF, FRISO, 0x20b3100819086150ULL},
    {"東京タワーに行きました", 3, 2, TF, BIGRAM, 0x21b354085b1a6552ULL},
    {"iPhone手机２０２３年发布", 3, 2, TF, FRISO, 0x3804108810c15064ULL},
    {"iPhone手机２０２３年发布", 3, 2, TF, BIGRAM, 0x3e0ce588c3834094ULL},
    {"iPhone手机２０２３年发布", 3, 1, TF, BIGRAM, 0xb67fecda9b8e88f4ULL},
    {"the extraordinary cat saw the extraordinary dog", 1, 2, LOG, BIGRAM, 0xc22283c29cf334f6ULL},
    {"ab ab ab ab ab ab ab ab longer", 1, 2, LOG, BIGRAM, 0xa873719c24d5735cULL},
    {"안녕하세요 세계, 반갑습니다", 3, 2, TF, BIGRAM, 0x5a446926b2df8e4eULL},
};

static void test_text_v2__vectors(void **state)
{
    (void)state;
    int friso = friso_available(), skipped = 0, print = getenv("SIMSTORE_PRINT_VECTORS") != NULL;
    for (size_t i = 0; i < sizeof vectors2 / sizeof vectors2[0]; i++) {
        const vector2 *v = &vectors2[i];
        if (v->cjk == FRISO && !friso) {
            skipped++;
            continue;
        }
        simstore_fingerprinter *f = make_fpr2(v->w, v->c, v->weighting, v->cjk);
        uint64_t fp = fp_s(f, v->text);
        if (print)
            print_message("v2 vector %zu: %016llx\n", i + 1, (unsigned long long)fp);
        else if (fp != v->fp)
            fail_msg("v2 vector %zu: got %016llx, expected %016llx", i + 1, (unsigned long long)fp,
                     (unsigned long long)v->fp);
        simstore_fingerprinter_free(f);
    }
    if (skipped)
        print_message("%d friso vectors skipped: friso unavailable\n", skipped);
}

/* The normalized text of s, as UTF-8, through the span normalizer. */
static char *normalized(const char *s, size_t len, size_t *out_len)
{
    sims_normalizer n;
    sims_normalizer_init(&n);
    const uint8_t *out;
    assert_int_equal(sims_normalize(&n, (const uint8_t *)s, len, &out, out_len), 0);
    char *copy = malloc(*out_len + 1);
    if (*out_len) /* out may be NULL for an empty result */
        memcpy(copy, out, *out_len);
    copy[*out_len] = '\0';
    sims_normalizer_release(&n);
    return copy;
}

static void assert_normalizes(const char *in, const char *want)
{
    size_t n;
    char *got = normalized(in, strlen(in), &n);
    /* Spans leave ASCII letters' case to the tokenizer. */
    for (size_t i = 0; i < n; i++)
        if (got[i] >= 'A' && got[i] <= 'Z')
            got[i] = (char)(got[i] + 32);
    if (strcmp(got, want) != 0)
        fail_msg("normalization of \"%s\": got \"%s\", expected \"%s\"", in, got, want);
    free(got);
}

static void test_text_v2__normalization(void **state)
{
    (void)state;
    assert_normalizes("plain ascii", "plain ascii");
    assert_normalizes("Cafe\xCC\x81", "café");         /* NFD -> NFC */
    assert_normalizes("\xEF\xAC\x81nance", "finance"); /* ligature */
    assert_normalizes("ＡＢＣ１２３", "abc123");       /* full width */
    assert_normalizes("Straße ẞ", "strasse ss");       /* full folding */
    assert_normalizes("\xE2\x84\xAB", "å");            /* Angstrom sign */
    assert_normalizes("ΣΊΣΥΦΟΣ", "σίσυφοσ");
    assert_normalizes("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB", "한"); /* jamo compose */
    assert_normalizes("a\xCC\x82\xCC\xA3", "ậ"); /* marks reordered, then composed */
    assert_normalizes("soft\xC2\xADhy\xEF\xB8\x8Fphen", "softhyphen"); /* ignorables go */
    assert_normalizes("ｶﾀｶﾅ ﾊﾟ", "カタカナ パ");                       /* half-width kana */
    assert_normalizes("㊥ ⼀ 豈", "中 一 豈");                         /* ideographs */
    assert_normalizes("中文，（标点）", "中文，（标点）");             /* token-inert: left as is */
    assert_normalizes("bad \xC0 byte", "bad \xC0 byte");               /* ill-formed: copied */
}

/* The span normalizer (text) against normalizing all code points at once. */
static void test_text_v2__spans_match_whole(void **state)
{
    (void)state;
    static const uint32_t alphabet[] = {
        'a',    'E',    'o',    ' ',    0xE9,   0x301,  0x323,  0x302,  0x308,  0x327,  0x345,
        0x399,  0x1F00, 0x1100, 0x1161, 0x11A8, 0xAC00, 0xD55C, 0xFB01, 0xFF21, 0xFF41, 0x2460,
        0x212B, 0x1E9E, 0xDF,   0xAD,   0x200D, 0xFE0F, 0x4E2D, 0x3099, 0x304B, 0xFF76, 0xFF9E,
        0x0CC6, 0x0CD5, 0x0B47, 0x0B3E, 0x3000, 0xFF0C, 0x2126, 0x1E0A, 0x0307, 0x0F73, 0x0344};
    test_rng rng;
    test_rng_init(&rng, "normalizer spans", 29);
    uint32_t cps[64], whole[64 * 19];
    uint8_t text[64 * 4];
    for (int trial = 0; trial < 20000; trial++) {
        size_t count = 1 + test_rng_below(&rng, 40), len = 0;
        for (size_t i = 0; i < count; i++) {
            cps[i] = alphabet[test_rng_below(&rng, sizeof alphabet / sizeof alphabet[0])];
            len += sims_utf8_encode(cps[i], text + len);
        }
        size_t whole_count;
        sims_normalize_codepoints(cps, count, whole, &whole_count);
        char want[64 * 19 * 4 + 1];
        size_t want_len = 0;
        for (size_t i = 0; i < whole_count; i++)
            want_len += sims_utf8_encode(whole[i], (uint8_t *)want + want_len);
        want[want_len] = '\0';
        size_t got_len;
        char *got = normalized((const char *)text, len, &got_len);
        for (size_t i = 0; i < got_len; i++)
            if (got[i] >= 'A' && got[i] <= 'Z')
                got[i] = (char)(got[i] + 32);
        /* Token-inert separators (U+3000, U+FF0C) are left as they are;
         * compare with them normalized too. */
        size_t again_len;
        char *again = normalized(got, got_len, &again_len);
        int same = strcmp(got, want) == 0;
        if (!same) {
            uint32_t gcp[64 * 19];
            size_t gn = 0;
            for (const uint8_t *p = (const uint8_t *)got; p < (const uint8_t *)got + got_len;) {
                size_t k;
                uint32_t cp = sims_utf8_decode(p, (const uint8_t *)got + got_len, &k);
                gcp[gn++] = cp == 0x3000 ? ' ' : cp == 0xFF0C ? ',' : cp;
                p += k;
            }
            size_t m = 0;
            char fixed[64 * 19 * 4 + 1];
            for (size_t i = 0; i < gn; i++)
                m += sims_utf8_encode(gcp[i], (uint8_t *)fixed + m);
            fixed[m] = '\0';
            same = strcmp(fixed, want) == 0;
        }
        if (!same)
            fail_msg("trial %d: spans give \"%s\", the whole text \"%s\"", trial, got, want);
        free(got);
        free(again);
    }
}

/* NFC, NFD, ligatures, full-width Latin and case fingerprint identically in
 * version 2 (and, documented, not in version 1). */
static void test_text_v2__variants_identical(void **state)
{
    (void)state;
    static const char *const variants[][5] = {
        {"The caf\xC3\xA9 served cr\xC3\xA8me br\xC3\xBBl\xC3\xA9"
         "e with a fine ch\xC3\xA2teau wine",
         "The cafe\xCC\x81 served cre\xCC\x80me bru\xCC\x82le\xCC\x81"
         "e with a fine cha\xCC\x82teau wine",
         "The caf\xC3\xA9 served cr\xC3\xA8me br\xC3\xBBl\xC3\xA9"
         "e with a \xEF\xAC\x81ne ch\xC3\xA2teau wine",
         "Ｔｈｅ ｃａｆé ｓｅｒｖｅｄ ｃｒèｍｅ ｂｒûｌéｅ ｗｉｔｈ ａ ｆｉｎｅ ｃｈâｔｅａｕ "
         "ｗｉｎｅ",
         "THE CAFÉ SERVED CRÈME BRÛLÉE WITH A FINE CHÂTEAU WINE"},
        {"Straße und Maß", "STRASSE UND MASS",
         "Stra\xE1\xBA\x9E"
         "e und Ma\xC3\x9F",
         "ＳＴＲＡＳＳＥ ｕｎｄ ｍａß", "strasse und mass"},
    };
    for (size_t set = 0; set < sizeof variants / sizeof variants[0]; set++) {
        simstore_fingerprinter *v2 = make_fpr2(3, 2, TF, BIGRAM), *v1 = make_fpr(3, TF, 1, BIGRAM);
        uint64_t want = fp_s(v2, variants[set][0]);
        unsigned v1_differs = 0;
        for (int i = 1; i < 5; i++) {
            if (fp_s(v2, variants[set][i]) != want)
                fail_msg("set %zu variant %d differs under version 2", set, i);
            v1_differs += fp_s(v1, variants[set][i]) != fp_s(v1, variants[set][0]);
        }
        /* Version 1 folds case and full-width letters but does not normalize. */
        assert_true(v1_differs >= 2);
        simstore_fingerprinter_free(v2);
        simstore_fingerprinter_free(v1);
    }
}

/* A Chinese text hard-wrapped anywhere, with or without spaces around the
 * line breaks, fingerprints like the unwrapped text in version 2. */
static void test_text_v2__wrapped_chinese(void **state)
{
    (void)state;
    static const char text[] =
        "研究生命起源是一个古老的问题。我们是中国人，一心一意地学习汉语言文学。"
        "东京タワーに行きました。这座城市的历史非常悠久，吸引了许多游客前来参观访问。";
    static const char *const breaks[] = {
        "\n", " \n", "\n  ", "\r\n", "\t\r\n ", "\xE3\x80\x80\n", "\xE2\x80\xA8"};
    test_rng rng;
    test_rng_init(&rng, "wrapped chinese", 31);
    static const simstore_cjk_mode modes[] = {BIGRAM, FRISO};
    for (int m = 0; m < 2; m++) {
        if (modes[m] == FRISO && !friso_available())
            continue;
        simstore_fingerprinter *v2 = make_fpr2(3, 2, TF, modes[m]);
        simstore_fingerprinter *v1 = make_fpr(3, TF, 1, modes[m]);
        uint64_t want = fp_s(v2, text);
        unsigned v1_same = 0, trials = 200;
        for (unsigned t = 0; t < trials; t++) {
            char wrapped[4096];
            size_t n = 0, since = 0;
            for (const char *p = text; *p;) {
                size_t k = ((unsigned char)*p >= 0xF0) ? 4 : ((unsigned char)*p >= 0xE0) ? 3 : 1;
                memcpy(wrapped + n, p, k);
                n += k;
                p += k;
                /* A break after 3..20 characters, never at the end. */
                if (*p && ++since >= 3 && test_rng_below(&rng, 18) == 0) {
                    const char *b = breaks[test_rng_below(&rng, 7)];
                    memcpy(wrapped + n, b, strlen(b));
                    n += strlen(b);
                    since = 0;
                }
            }
            wrapped[n] = '\0';
            uint64_t got = fp_s(v2, wrapped);
            if (got != want)
                fail_msg("cjk %d: wrapped text differs: %016llx, unwrapped %016llx\n%s",
                         (int)modes[m], (unsigned long long)got, (unsigned long long)want, wrapped);
            v1_same += fp_s(v1, wrapped) == fp_s(v1, text);
        }
        print_message("cjk %d: version 1 fingerprints %u of %u wrapped copies like the "
                      "unwrapped text\n",
                      (int)modes[m], v1_same, trials);
        assert_true(v1_same < trials / 2);
        simstore_fingerprinter_free(v2);
        simstore_fingerprinter_free(v1);
    }
    /* A blank line (two line breaks) still separates; so does a space alone,
     * and a break between Han and Latin is the separator it always was. */
    simstore_fingerprinter *b = make_fpr2(1, 1, TF, BIGRAM);
    assert_int_equal(fp_s(b, "中国\n人"), fp_s(b, "中国人"));
    assert_int_not_equal(fp_s(b, "中国\n\n人"), fp_s(b, "中国人"));
    assert_int_not_equal(fp_s(b, "中国\n \n人"), fp_s(b, "中国人"));
    assert_int_not_equal(fp_s(b, "中国 人"), fp_s(b, "中国人"));
    assert_int_equal(fp_s(b, "中国\n人"), xxh("中国") & xxh("国人"));
    assert_int_equal(fp_s(b, "ab\ncd"), fp_s(b, "ab cd"));
    simstore_fingerprinter_free(b);
}

/* Exact consequences of the CJK shingle width (format/fingerprint.md,
 * "Version 2: shingles"). */
static void test_text_v2__cjk_shingles(void **state)
{
    (void)state;
    simstore_fingerprinter *f = make_fpr2(3, 2, TF, BIGRAM);
    /* Only CJK tokens: shingles of 2. */
    assert_int_equal(fp_s(f, "中国人"), xxh("中国 国人"));
    assert_int_equal(fp_s(f, "中国人民"), xxh("中国 国人") & xxh("国人 人民"));
    /* A word starts a shingle of 3, a CJK token one of 2; the first shingle
     * that reaches the last token is kept, cut there. */
    uint64_t a = xxh("ab 中国 国人"), b = xxh("中国 国人"), c = xxh("国人 cd");
    uint64_t want = 0;
    for (int i = 0; i < 64; i++) {
        int ones = (int)(a >> i & 1) + (int)(b >> i & 1) + (int)(c >> i & 1);
        want |= (uint64_t)(ones >= 2) << i;
    }
    assert_int_equal(fp_s(f, "ab 中国人 cd"), want);
    /* Words alone: version 1's shingles. */
    simstore_fingerprinter *v1 = make_fpr(3, TF, 1, BIGRAM);
    assert_int_equal(fp_s(f, "one two three four"), fp_s(v1, "one two three four"));
    assert_int_equal(fp_s(f, "one, two!"), xxh("one two"));
    simstore_fingerprinter_free(f);
    simstore_fingerprinter_free(v1);
}

/* Pure ASCII Latin text has the same fingerprint in both versions. */
static void test_text_v2__ascii_latin_as_v1(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "ascii as v1", 37);
    unsigned ids[300];
    char *text = malloc(300 * 24);
    for (unsigned w = 1; w <= 5; w += 2) {
        simstore_fingerprinter *v1 = make_fpr(w, LEN, 1.5, BIGRAM);
        simstore_fingerprinter *v2 = make_fpr2_lambda(w, 2, LEN, 1.5, BIGRAM);
        for (int t = 0; t < 50; t++) {
            size_t count = test_rng_below(&rng, 300);
            for (size_t i = 0; i < count; i++)
                ids[i] = (unsigned)test_rng_below(&rng, 2000);
            size_t len = words_text(ids, count, text);
            assert_int_equal(fp_n(v2, text, len, NULL), fp_n(v1, text, len, NULL));
        }
        simstore_fingerprinter_free(v1);
        simstore_fingerprinter_free(v2);
    }
    free(text);
}

/* Version 2 against a naive implementation: normalized text, tokens with
 * their kinds, every shingle listed, weights per distinct feature. */
static uint64_t naive_fp2(const char *text, size_t len, unsigned w, unsigned c, int weighting,
                          double lambda)
{
    size_t nlen;
    char *norm = normalized(text, len, &nlen);
    naive_tokens t;
    memset(&t, 0, sizeof t);
    sims_tokenizer tok;
    sims_tokenizer_init(&tok, NULL);
    tok.join_lines = 1;
    int invalid = 0;
    assert_int_equal(sims_tokenize(&tok, (const uint8_t *)norm, nlen, naive_collect, &t, &invalid),
                     0);
    sims_tokenizer_release(&tok);
    free(norm);
    uint64_t fp = 0;
    if (t.n) {
        naive_feature *feat = calloc(t.n, sizeof *feat);
        size_t nf = 0;
        int tail_done = 0;
        for (size_t i = 0; i < t.n; i++) {
            /* Every whole shingle; of those cut by the end, only the first
             * shingle to reach the last token, when it is cut. */
            size_t width = t.cjk[i] ? c : w, end = i + width;
            if (end > t.n) {
                if (tail_done)
                    continue;
                end = t.n;
            }
            if (end == t.n)
                tail_done = 1;
            size_t bytes = 1;
            for (size_t j = i; j < end; j++)
                bytes += strlen(t.tok[j]) + 1;
            char *s = calloc(1, bytes);
            for (size_t j = i; j < end; j++) {
                if (j > i)
                    strcat(s, " ");
                strcat(s, t.tok[j]);
                if (t.cps[j] > feat[nf].len)
                    feat[nf].len = t.cps[j];
            }
            feat[nf++].h = xxh(s);
            free(s);
        }
        qsort(feat, nf, sizeof *feat, feature_cmp);
        long double sums[64] = {0};
        uint64_t lambda_q16 = (uint64_t)(lambda * 65536 + 0.5);
        for (size_t i = 0; i < nf;) {
            size_t j = i;
            while (j < nf && feat[j].h == feat[i].h)
                j++;
            long double score = (long double)(j - i) * 65536;
            if (weighting == LEN && feat[i].len >= 4)
                score += (long double)lambda_q16;
            if (weighting == LOG)
                score = (long double)sims_log_weight(j - i);
            for (int b = 0; b < 64; b++)
                sums[b] += (feat[i].h >> b & 1) ? score : -score;
            i = j;
        }
        for (int b = 0; b < 64; b++)
            if (sums[b] > 0)
                fp |= 1ULL << b;
        free(feat);
    }
    for (size_t i = 0; i < t.n; i++)
        free(t.tok[i]);
    free(t.tok);
    free(t.cps);
    free(t.cjk);
    return fp;
}

static void test_text_v2__matches_naive(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "naive agreement v2", 41);
    static const unsigned widths[][2] = {{3, 2}, {1, 2}, {2, 5}, {4, 1}, {3, 3}, {32, 7}};
    static const int weightings[] = {TF, LEN, LOG};
    size_t cap = 60000 * 16;
    char *text = malloc(cap);
    for (int trial = 0; trial < 30; trial++) {
        size_t words =
            trial % 10 == 9 ? 30000 + test_rng_below(&rng, 20000) : test_rng_below(&rng, 600);
        size_t len = random_text(&rng, text, words, 50 + (unsigned)test_rng_below(&rng, 3000));
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++)
            for (int l = 0; l < 3; l++) {
                simstore_fingerprinter *f =
                    make_fpr2_lambda(widths[wi][0], widths[wi][1], weightings[l], 2.5, BIGRAM);
                uint64_t got = fp_n(f, text, len, NULL);
                uint64_t want =
                    naive_fp2(text, len, widths[wi][0], widths[wi][1], weightings[l], 2.5);
                if (got != want)
                    fail_msg("trial %d (%zu words), w=%u c=%u weighting %d: got %016llx, "
                             "naive %016llx",
                             trial, words, widths[wi][0], widths[wi][1], weightings[l],
                             (unsigned long long)got, (unsigned long long)want);
                simstore_fingerprinter_free(f);
            }
    }
    free(text);
}

/* ---- version 3 (format/fingerprint.md, "Version 3") ------------------------------ */

static simstore_fingerprinter *make_fpr_v(unsigned version, unsigned w, unsigned c,
                                          simstore_weighting weighting, simstore_cjk_mode cjk)
{
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.version = version;
    o.shingle_words = w;
    o.cjk_shingle = c;
    o.weighting = weighting;
    o.cjk = cjk;
    simstore_fingerprinter *f = NULL;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), 0);
    return f;
}

typedef struct vector3 {
    const char *text;
    uint64_t v2, v3;
} vector3;

/* format/fingerprint.md, "Test vectors of version 3" (bigram mode, w = 3,
 * c = 2, TF), with each text's version 2 fingerprint. */
static const vector3 vectors3[] = {
    {"我 们 是 中 国 人", 0x880c0218d0edfd75ULL, 0xc059a641416449f8ULL},
    {"ひ ら が な", 0xb6fe0e7b83e3d536ULL, 0x024004c441ca0b42ULL},
    {"中国 abc 人民", 0x2002040400096909ULL, 0x2002040400096909ULL},
    {"我们是\n\n中国人", 0x9419b64985c5c9c1ULL, 0x9419b64985c5c9c1ULL},
    {"我们是 \n \n中国人", 0x9419b64985c5c9c1ULL, 0x9419b64985c5c9c1ULL},
    {"我们是\xE3\x80\x80中国人", 0x9419b64985c5c9c1ULL, 0xc059a641416449f8ULL},
    {"我们是\t \t中国人", 0x9419b64985c5c9c1ULL, 0xc059a641416449f8ULL},
    {"我们是 \r\n 中国人", 0xc059a641416449f8ULL, 0xc059a641416449f8ULL},
    {"東京 タワー に\n行き ました", 0x2873fc04c6b0e172ULL, 0x21b354085b1a6552ULL},
    {"我们是\xE2\x80\x8B中国人", 0x9419b64985c5c9c1ULL, 0x9419b64985c5c9c1ULL},
    {"我们是 \xC2\xAD 中国人", 0x9419b64985c5c9c1ULL, 0xc059a641416449f8ULL},
    {"我们是 , 中国人", 0x9419b64985c5c9c1ULL, 0x9419b64985c5c9c1ULL},
    {"我们是\xC2\xA0\xE2\x80\x83中国人", 0x9419b64985c5c9c1ULL, 0xc059a641416449f8ULL},
};

static void test_text_v3__vectors(void **state)
{
    (void)state;
    int print = getenv("SIMSTORE_PRINT_VECTORS") != NULL;
    simstore_fingerprinter *f2 = make_fpr_v(2, 3, 2, TF, BIGRAM);
    simstore_fingerprinter *f3 = make_fpr_v(3, 3, 2, TF, BIGRAM);
    for (size_t i = 0; i < sizeof vectors3 / sizeof vectors3[0]; i++) {
        const vector3 *v = &vectors3[i];
        uint64_t got2 = fp_s(f2, v->text), got3 = fp_s(f3, v->text);
        if (print)
            print_message("v3 vector %zu: %016llx (version 2: %016llx)\n", i + 1,
                          (unsigned long long)got3, (unsigned long long)got2);
        else if (got2 != v->v2 || got3 != v->v3)
            fail_msg("v3 vector %zu: got %016llx (version 2: %016llx), expected %016llx "
                     "(version 2: %016llx)",
                     i + 1, (unsigned long long)got3, (unsigned long long)got2,
                     (unsigned long long)v->v3, (unsigned long long)v->v2);
    }
    /* Version 3's own vectors equal to their unspaced texts' (section 14:
     * vectors 5 and 8). */
    assert_int_equal(fp_s(f3, "我 们 是 中 国 人"), fp_s(f3, "我们是中国人"));
    assert_int_equal(fp_s(f3, "ひ ら が な"), fp_s(f3, "ひらがな"));
    simstore_fingerprinter_free(f2);
    simstore_fingerprinter_free(f3);
    /* Every vector of version 2 has no White_Space between two Han or kana
     * characters outside a single line break: version 3 gives it the same
     * fingerprint. */
    int friso = friso_available();
    for (size_t i = 0; i < sizeof vectors2 / sizeof vectors2[0]; i++) {
        const vector2 *v = &vectors2[i];
        if (v->cjk == FRISO && !friso)
            continue;
        simstore_fingerprinter *f = make_fpr_v(3, v->w, v->c, v->weighting, v->cjk);
        if (fp_s(f, v->text) != v->fp)
            fail_msg("v2 vector %zu under version 3: got %016llx, expected %016llx", i + 1,
                     (unsigned long long)fp_s(f, v->text), (unsigned long long)v->fp);
        simstore_fingerprinter_free(f);
    }
}

/* The tokens of already normalized text with version 3's joining. */
static void assert_tokens_v3(const char *text, const char *expected)
{
    sims_tokenizer tok;
    sims_tokenizer_init(&tok, NULL);
    tok.join_lines = 1;
    tok.join_spaces = 1;
    token_list list;
    memset(&list, 0, sizeof list);
    int bad = 0;
    assert_int_equal(sims_tokenize(&tok, (const uint8_t *)text, strlen(text), collect, &list, &bad),
                     0);
    sims_tokenizer_release(&tok);
    const char *got = list.joined ? list.joined : "";
    if (strcmp(got, expected) != 0)
        fail_msg("version 3 tokens of \"%s\":\n  got      %s\n  expected %s", text, got, expected);
    free(list.joined);
}

static void test_text_v3__tokens(void **state)
{
    (void)state;
    assert_tokens_v3("中 国 人", "中国|国人");
    assert_tokens_v3("中     国\t\t人", "中国|国人");
    assert_tokens_v3("中\xE3\x80\x80国 \n 人", "中国|国人");   /* U+3000; one break */
    assert_tokens_v3("中 \r\n 国\xE2\x80\xA8人", "中国|国人"); /* CR LF; U+2028 */
    assert_tokens_v3("中\n\n国", "中|国");
    assert_tokens_v3("中 \n \r\n 国", "中|国");
    assert_tokens_v3("中 a 国", "中|a|国");
    assert_tokens_v3("中 , 国", "中|国");
    assert_tokens_v3("中\xE2\x80\x8B国", "中|国"); /* ZWSP: not White_Space */
    assert_tokens_v3("ひ ら", "ひら");
    assert_tokens_v3("中 ひ", "中|ひ"); /* joined, then a change of class */
    assert_tokens_v3(" 中 国 ", "中国");
    /* Version 2's tokenizer keeps the space a separator. */
    assert_tokens("中 国", 0, "中|国");
}

/* A Chinese or Japanese text with White_Space between its characters (HTML
 * renderings) fingerprints like the text without it in version 3, in both
 * segmenters; version 2 does not. A blank line and a word still separate. */
static void test_text_v3__spaced_chinese(void **state)
{
    (void)state;
    static const char text[] =
        "研究生命起源是一个古老的问题。我们是中国人，一心一意地学习汉语言文学。"
        "东京タワーに行きました。这座城市的历史非常悠久，吸引了许多游客前来参观访问。";
    static const char *const gaps[] = {" ",         "  ",
                                       "\t",        "\xE3\x80\x80",
                                       "\xC2\xA0",  " \t\xE3\x80\x80 ",
                                       "\n",        " \n ",
                                       "\r\n",      "\xE2\x80\x83\xE2\x80\xAF",
                                       " \xC2\xAD "};
    const unsigned ngaps = sizeof gaps / sizeof gaps[0];
    test_rng rng;
    test_rng_init(&rng, "spaced chinese", 37);
    static const simstore_cjk_mode modes[] = {BIGRAM, FRISO};
    for (int m = 0; m < 2; m++) {
        if (modes[m] == FRISO && !friso_available())
            continue;
        simstore_fingerprinter *v3 = make_fpr_v(3, 3, 2, TF, modes[m]);
        simstore_fingerprinter *v2 = make_fpr_v(2, 3, 2, TF, modes[m]);
        uint64_t want = fp_s(v3, text);
        assert_int_equal(want, fp_s(v2, text)); /* no White_Space: as version 2 */
        unsigned v2_same = 0, trials = 200;
        for (unsigned t = 0; t < trials; t++) {
            char spaced[8192];
            size_t n = 0;
            unsigned every = 1 + (unsigned)test_rng_below(&rng, 6);
            for (const char *p = text; *p;) {
                size_t k = ((unsigned char)*p >= 0xF0) ? 4 : ((unsigned char)*p >= 0xE0) ? 3 : 1;
                memcpy(spaced + n, p, k);
                n += k;
                p += k;
                if (*p && test_rng_below(&rng, every) == 0) {
                    const char *g = gaps[test_rng_below(&rng, ngaps)];
                    memcpy(spaced + n, g, strlen(g));
                    n += strlen(g);
                }
            }
            spaced[n] = '\0';
            uint64_t got = fp_s(v3, spaced);
            if (got != want)
                fail_msg("cjk %d: spaced text differs: %016llx, unspaced %016llx\n%s",
                         (int)modes[m], (unsigned long long)got, (unsigned long long)want, spaced);
            v2_same += fp_s(v2, spaced) == want;
        }
        print_message("cjk %d: version 2 fingerprints %u of %u spaced copies like the "
                      "unspaced text\n",
                      (int)modes[m], v2_same, trials);
        assert_true(v2_same < trials / 2);
        simstore_fingerprinter_free(v3);
        simstore_fingerprinter_free(v2);
    }
    simstore_fingerprinter *b = make_fpr_v(3, 1, 1, TF, BIGRAM);
    assert_int_equal(fp_s(b, "中国 人"), fp_s(b, "中国人"));
    assert_int_equal(fp_s(b, "中国 人"), xxh("中国") & xxh("国人"));
    assert_int_not_equal(fp_s(b, "中国\n\n人"), fp_s(b, "中国人"));
    assert_int_not_equal(fp_s(b, "中国 \n\t\n 人"), fp_s(b, "中国人"));
    assert_int_equal(fp_s(b, "中国 x 人"), fp_s(b, "中国x人"));
    assert_int_equal(fp_s(b, "ab cd"), fp_s(b, "ab\ncd"));
    simstore_fingerprinter_free(b);
}

/* ---- LOG weighting --------------------------------------------------------------- */

static void test_text_log__weights(void **state)
{
    (void)state;
    /* format/fingerprint.md: 65536 + floor(M(tf) * 45426 / 65536). */
    assert_int_equal(sims_log_weight(1), 65536);
    assert_int_equal(sims_log_weight(2), 65536 + 45426);
    assert_int_equal(sims_log_weight(3), 65536 + (98304ULL * 45426 >> 16));
    assert_int_equal(sims_log_weight(50), 318218); /* 1 + ln 50 = 4.912; 318218 / 65536 = 4.856 */
    assert_int_equal(sims_log_weight(UINT64_MAX), 65536 + (((63ULL << 16) + 65535) * 45426 >> 16));
    uint64_t last = 0;
    for (uint64_t tf = 1; tf < 100000; tf++) {
        uint64_t wgt = sims_log_weight(tf);
        assert_true(wgt > last || tf > 65536); /* strictly increasing while it resolves */
        assert_true(wgt >= last);
        long double ideal = 65536.0L * (1.0L + logl((long double)tf));
        assert_true(fabsl((long double)wgt - ideal) < 0.07L * 65536);
        last = wgt;
    }
}

/* Two unrelated documents that share one phrase repeated 50 times: the
 * phrase's features dominate under term frequency, far less under log. */
static void test_text_log__repeated_phrase(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "repeated phrase", 43);
    simstore_fingerprinter *tf = make_fpr2(3, 2, TF, BIGRAM), *lg = make_fpr2(3, 2, LOG, BIGRAM);
    char *a = malloc(200000), *b = malloc(200000);
    const char *phrase = " click here to subscribe to our newsletter today.";
    unsigned tf_total = 0, log_total = 0, trials = 40;
    for (unsigned t = 0; t < trials; t++) {
        size_t la = random_text(&rng, a, 400, 3000), lb = random_text(&rng, b, 400, 3000);
        for (int r = 0; r < 50; r++) {
            memcpy(a + la, phrase, strlen(phrase));
            la += strlen(phrase);
            memcpy(b + lb, phrase, strlen(phrase));
            lb += strlen(phrase);
        }
        unsigned dtf = simstore_distance(fp_n(tf, a, la, NULL), fp_n(tf, b, lb, NULL));
        unsigned dlog = simstore_distance(fp_n(lg, a, la, NULL), fp_n(lg, b, lb, NULL));
        tf_total += dtf;
        log_total += dlog;
    }
    print_message("phrase repeated 50 times in two unrelated documents: mean distance %.1f "
                  "bits under tf, %.1f under log\n",
                  (double)tf_total / trials, (double)log_total / trials);
    assert_true(log_total > tf_total);
    assert_true((double)log_total / trials >= 16.0);
    simstore_fingerprinter_free(tf);
    simstore_fingerprinter_free(lg);
    free(a);
    free(b);
}

/* ---- API contract ----------------------------------------------------------------- */

static void test_text_api__options_and_errors(void **state)
{
    (void)state;
    simstore_text_options o;
    simstore_text_options_init(&o);
    assert_int_equal(o.shingle_words, 3);
    assert_int_equal(o.weighting, SIMSTORE_WEIGHT_TF);
    assert_true(o.lambda == 1.0);
    assert_int_equal(o.cjk, SIMSTORE_CJK_BIGRAM);
    assert_int_equal(o.version, 3);
    assert_int_equal(SIMSTORE_FP_VERSION_DEFAULT, 3);
    assert_int_equal(SIMSTORE_FP_VERSION_LATEST, 3);
    assert_int_equal(o.cjk_shingle, 2);
    {
        /* Versions and the options only versions 2 and 3 have. */
        simstore_text_options v = o;
        simstore_fingerprinter *g = NULL;
        v.version = 4;
        assert_int_equal(simstore_fingerprinter_new(&v, &g), SIMSTORE_EINVAL);
        v.version = 3;
        v.weighting = SIMSTORE_WEIGHT_LOG;
        assert_int_equal(simstore_fingerprinter_new(&v, &g), 0);
        simstore_fingerprinter_free(g);
        g = NULL;
        v.version = 1;
        v.weighting = SIMSTORE_WEIGHT_LOG;
        assert_int_equal(simstore_fingerprinter_new(&v, &g), SIMSTORE_EINVAL);
        v.version = 2;
        v.cjk_shingle = SIMSTORE_SHINGLE_MAX + 1;
        assert_int_equal(simstore_fingerprinter_new(&v, &g), SIMSTORE_EINVAL);
        assert_null(g);
        /* Version 0 (a struct filled without the init function) is the
         * current default, 3, never 1 silently: CJK shingle 0 is then 2,
         * and Han joins across a space. */
        v = o;
        v.cjk = SIMSTORE_CJK_BIGRAM;
        v.version = 0;
        v.cjk_shingle = 0;
        assert_int_equal(simstore_fingerprinter_new(&v, &g), 0);
        assert_int_equal(fp_s(g, "中国人"), xxh("中国 国人"));
        assert_int_equal(fp_s(g, "中 国人"), xxh("中国 国人"));
        simstore_fingerprinter_free(g);
        /* Version 1, asked for by name, ignores the CJK shingle. */
        v.version = 1;
        v.cjk_shingle = 7;
        assert_int_equal(simstore_fingerprinter_new(&v, &g), 0);
        assert_int_equal(fp_s(g, "我们是中国人"), 0xe607871d2ad8e16aULL);
        simstore_fingerprinter_free(g);
        /* Version 2 with CJK shingle 0 takes the default, 2; a space
         * still separates Han there. */
        v.version = 2;
        v.cjk_shingle = 0;
        assert_int_equal(simstore_fingerprinter_new(&v, &g), 0);
        assert_int_equal(fp_s(g, "中国人"), xxh("中国 国人"));
        assert_int_equal(fp_s(g, "中 国人"), xxh("中 国人"));
        simstore_fingerprinter_free(g);
    }
    simstore_fingerprinter *f = (simstore_fingerprinter *)&o;
    o.shingle_words = 0;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_EINVAL);
    assert_null(f);
    o.shingle_words = SIMSTORE_SHINGLE_MAX + 1;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_EINVAL);
    o.shingle_words = SIMSTORE_SHINGLE_MAX;
    o.weighting = SIMSTORE_WEIGHT_LENGTH;
    o.lambda = -0.5;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_EINVAL);
    o.lambda = 1001;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_EINVAL);
    o.lambda = 0.0 / 0.0;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_EINVAL);
    o.lambda = 1000;
    o.cjk = (simstore_cjk_mode)7;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprinter_new(&o, NULL), SIMSTORE_EINVAL);
    o.cjk = SIMSTORE_CJK_BIGRAM;
    assert_int_equal(simstore_fingerprinter_new(&o, &f), 0);
    assert_int_equal(simstore_fingerprinter_cjk(f), SIMSTORE_CJK_BIGRAM);
    uint64_t fp;
    assert_int_equal(simstore_fingerprint_text(f, NULL, 3, &fp, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprint_text(f, "x", 1, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprint_text(NULL, "x", 1, &fp, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_fingerprint_paragraphs(f, "x", 1, NULL, NULL, NULL, NULL),
                     SIMSTORE_EINVAL);
    assert_true(strlen(simstore_last_error()) > 0);
    simstore_fingerprinter_free(f);
    simstore_fingerprinter_free(NULL);
    /* NULL options are the defaults. */
    assert_int_equal(simstore_fingerprinter_new(NULL, &f), 0);
    simstore_fingerprinter_free(f);
    const char *why = NULL;
    int mode = simstore_cjk_segmenter(&why);
    assert_true(mode == SIMSTORE_CJK_FRISO || mode == SIMSTORE_CJK_BIGRAM);
    assert_non_null(why);
    assert_non_null(strstr(why, mode == SIMSTORE_CJK_FRISO ? "friso" : "bigrams"));
}

/* ---- allocation ----------------------------------------------------------------------
 * tests.cmake links this test with -Wl,--wrap=malloc,realloc,calloc, so every
 * allocation made by the objects linked into it (simstore's static layers and
 * this file, not shared libraries such as friso) passes through here. */

static unsigned long allocations;
void *__real_malloc(size_t size);
void *__real_realloc(void *ptr, size_t size);
void *__real_calloc(size_t count, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void *__wrap_calloc(size_t count, size_t size);

void *__wrap_malloc(size_t size)
{
    __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __real_malloc(size);
}

void *__wrap_realloc(void *ptr, size_t size)
{
    __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __real_realloc(ptr, size);
}

void *__wrap_calloc(size_t count, size_t size)
{
    __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __real_calloc(count, size);
}

/* Once its buffers have grown to the largest document, a fingerprinter
 * allocates nothing more (friso's own allocations are not counted). */
static void test_text_alloc__steady_state(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "allocation", 23);
    enum { DOCS = 20 };
    char *docs[DOCS];
    size_t lens[DOCS], biggest = 0;
    for (int i = 0; i < DOCS; i++) {
        docs[i] = malloc(3000 * 16);
        lens[i] = random_text(&rng, docs[i], 100 + test_rng_below(&rng, 2900), 5000);
        if (lens[i] > lens[biggest])
            biggest = (size_t)i;
    }
    static const simstore_cjk_mode modes[] = {SIMSTORE_CJK_BIGRAM, SIMSTORE_CJK_AUTO};
    for (int m = 0; m < 2; m++)
        for (unsigned w = 1; w <= 3; w += 2)
            for (int l = 0; l < 2; l++) {
                unsigned long at_start = allocations;
                simstore_fingerprinter *f = make_fpr(w, l ? LEN : TF, 1, modes[m]);
                fp_n(f, docs[biggest], lens[biggest], NULL);
                assert_true(allocations > at_start); /* the counting works */
                para_log log;
                memset(&log, 0, sizeof log);
                unsigned long before = allocations;
                for (int i = 0; i < DOCS; i++) {
                    fp_n(f, docs[i], lens[i], NULL);
                    simstore_fingerprint_paragraphs(f, docs[i], lens[i], log_para, &log, NULL,
                                                    NULL);
                    log.count = 0;
                }
                unsigned long made = allocations - before;
                if (made)
                    fail_msg("w=%u %s cjk %d: %lu allocations after warm-up", w,
                             l ? "length" : "tf", (int)modes[m], made);
                simstore_fingerprinter_free(f);
            }
    /* Version 2, normalizing (the documents hold é, ß, ø) and with each
     * weighting. */
    static const simstore_weighting weightings[] = {SIMSTORE_WEIGHT_TF, SIMSTORE_WEIGHT_LENGTH,
                                                    SIMSTORE_WEIGHT_LOG};
    for (int l = 0; l < 3; l++) {
        simstore_fingerprinter *f = make_fpr2(3, 2, weightings[l], SIMSTORE_CJK_BIGRAM);
        /* Warm up on every document: the longest span to normalize need
         * not be in the longest document. */
        for (int i = 0; i < DOCS; i++)
            fp_n(f, docs[i], lens[i], NULL);
        unsigned long before = allocations;
        for (int i = 0; i < DOCS; i++)
            fp_n(f, docs[i], lens[i], NULL);
        unsigned long made = allocations - before;
        if (made)
            fail_msg("version 2 weighting %d: %lu allocations after warm-up", l, made);
        simstore_fingerprinter_free(f);
    }
    for (int i = 0; i < DOCS; i++)
        free(docs[i]);
}

/* ---- threads ------------------------------------------------------------------------ */

#define THREAD_DOCS 60
static char *thread_docs[THREAD_DOCS];
static size_t thread_lens[THREAD_DOCS];
static uint64_t thread_expect[THREAD_DOCS];

static void *thread_main(void *arg)
{
    (void)arg;
    simstore_fingerprinter *f = NULL;
    if (simstore_fingerprinter_new(NULL, &f) != 0)
        return (void *)1;
    intptr_t bad = 0;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < THREAD_DOCS; i++) {
            uint64_t fp;
            if (simstore_fingerprint_text(f, thread_docs[i], thread_lens[i], &fp, NULL) != 0 ||
                fp != thread_expect[i])
                bad = 1;
        }
    simstore_fingerprinter_free(f);
    return (void *)bad;
}

/* Fingerprinters in several threads share the friso dictionary. */
static void test_text_threads__shared_dictionary(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "threads", 19);
    simstore_fingerprinter *f = NULL; /* the defaults, as in thread_main() */
    assert_int_equal(simstore_fingerprinter_new(NULL, &f), 0);
    for (int i = 0; i < THREAD_DOCS; i++) {
        thread_docs[i] = malloc(4000 * 16);
        thread_lens[i] = random_text(&rng, thread_docs[i], 4000, 400);
        thread_expect[i] = fp_n(f, thread_docs[i], thread_lens[i], NULL);
    }
    simstore_fingerprinter_free(f);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *ret;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
    for (int i = 0; i < THREAD_DOCS; i++)
        free(thread_docs[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_utf8__unicode_tables),
        cmocka_unit_test(test_text_utf8__every_scalar_round_trips),
        cmocka_unit_test(test_text_utf8__truncated),
        cmocka_unit_test(test_text_utf8__overlong),
        cmocka_unit_test(test_text_utf8__surrogates),
        cmocka_unit_test(test_text_utf8__above_max),
        cmocka_unit_test(test_text_utf8__lone_continuation),
        cmocka_unit_test(test_text_utf8__random_bytes),
        cmocka_unit_test(test_text_tokenize__english),
        cmocka_unit_test(test_text_tokenize__accented_folding),
        cmocka_unit_test(test_text_tokenize__latin_fold_table),
        cmocka_unit_test(test_text_tokenize__fullwidth),
        cmocka_unit_test(test_text_tokenize__chinese_friso),
        cmocka_unit_test(test_text_tokenize__chinese_bigram),
        cmocka_unit_test(test_text_tokenize__kana_and_hangul),
        cmocka_unit_test(test_text_tokenize__mixed_scripts),
        cmocka_unit_test(test_text_tokenize__emoji),
        cmocka_unit_test(test_text_tokenize__ignorables),
        cmocka_unit_test(test_text_tokenize__codepoint_lengths),
        cmocka_unit_test(test_text_golden__vectors),
        cmocka_unit_test(test_text_fingerprint__definition_cases),
        cmocka_unit_test(test_text_fingerprint__empty_and_flags),
        cmocka_unit_test(test_text_fingerprint__matches_naive),
        cmocka_unit_test(test_text_properties__identical_and_reused),
        cmocka_unit_test(test_text_properties__layout_and_case_do_not_matter),
        cmocka_unit_test(test_text_properties__one_word_edit),
        cmocka_unit_test(test_text_properties__unrelated_texts),
        cmocka_unit_test(test_text_length__lambda_zero_is_tf),
        cmocka_unit_test(test_text_length__long_feature_outweighs),
        cmocka_unit_test(test_text_paragraphs__rules),
        cmocka_unit_test(test_text_paragraphs__edges),
        cmocka_unit_test(test_text_big__ten_megabyte_line),
        cmocka_unit_test(test_text_v2__vectors),
        cmocka_unit_test(test_text_v2__normalization),
        cmocka_unit_test(test_text_v2__spans_match_whole),
        cmocka_unit_test(test_text_v2__variants_identical),
        cmocka_unit_test(test_text_v2__wrapped_chinese),
        cmocka_unit_test(test_text_v2__cjk_shingles),
        cmocka_unit_test(test_text_v2__ascii_latin_as_v1),
        cmocka_unit_test(test_text_v2__matches_naive),
        cmocka_unit_test(test_text_v3__vectors),
        cmocka_unit_test(test_text_v3__tokens),
        cmocka_unit_test(test_text_v3__spaced_chinese),
        cmocka_unit_test(test_text_log__weights),
        cmocka_unit_test(test_text_log__repeated_phrase),
        cmocka_unit_test(test_text_api__options_and_errors),
        cmocka_unit_test(test_text_alloc__steady_state),
        cmocka_unit_test(test_text_threads__shared_dictionary),
    };
    /* Sampled (the ThreadSanitizer pass): the cases tests/CMakeLists.txt names. */
    const char *cases = test_sampled_cases();
    if (cases)
        cmocka_set_test_filter(cases);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
