/* test_paragraphs.c: the paragraph index (format/store.md, "Paragraphs"):
 * planted partial copies and edited documents give their exact SHARED/OF,
 * also after an add, a delete and a compaction; paragraph queries against a
 * brute-force oracle over every stored paragraph (random and clustered
 * paragraph fingerprints, several segments); verify accepts each state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- texts ------------------------------------------------------------------ */

/* A paragraph of `words` words drawn from seed: distinct seeds give
 * unrelated paragraphs (their fingerprints ~32 bits apart). */
static void paragraph(char *out, size_t cap, uint64_t seed, unsigned words)
{
    /* Not a multiple of splitmix's step: seeds must not give the same
     * stream shifted by a word. */
    test_rng r = {(seed + 1) * 0xD1B54A32D192ED03ULL};
    size_t at = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < words && at + 16 < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%sw%llx", i ? " " : "",
                               (unsigned long long)(test_rng_next(&r) % 100000));
}

/* Paragraphs by seed, separated by blank lines; seed 0 is a short
 * paragraph (3 words: below the minimum of 8). */
static char *text_of(const uint64_t *seeds, size_t n)
{
    size_t cap = n * 400 + 1;
    char *t = malloc(cap);
    assert_non_null(t);
    size_t at = 0;
    t[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char p[380];
        paragraph(p, sizeof p, seeds[i], seeds[i] ? 30 : 3);
        at += (size_t)snprintf(t + at, cap - at, "%s%s", i ? "\n\n" : "", p);
    }
    return t;
}

typedef struct planted {
    const char *id;
    uint64_t seeds[12];
    size_t n;
} planted;

/* The article: paragraphs 1..10. The page copies 3 of them (2, 5, 8) among
 * 4 of its own and a short line. The edited document is the article's
 * first 8 paragraphs with 2 of them (3 and 6) rewritten. */
static const planted PLANTED[] = {
    {"article", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 10},
    {"page", {101, 2, 102, 0, 5, 103, 8, 104}, 8},
    {"edited", {1, 2, 203, 4, 5, 206, 7, 8}, 8},
    {"unrelated", {301, 302, 303, 304}, 4},
};
#define NPLANTED (sizeof PLANTED / sizeof PLANTED[0])

static simstore_fingerprinter *new_fpr(void)
{
    simstore_text_options t;
    simstore_text_options_init(&t);
    simstore_fingerprinter *f;
    assert_int_equal(simstore_fingerprinter_new(&t, &f), 0);
    return f;
}

/* The paragraph fingerprints of text, at least min_words words. */
static size_t paragraphs_of(simstore_fingerprinter *fpr, const char *text, unsigned min_words,
                            uint64_t *fps, size_t cap)
{
    size_t n;
    assert_int_equal(
        simstore_paragraph_fingerprints(fpr, text, strlen(text), min_words, fps, cap, &n), 0);
    assert_true(n <= cap);
    return n;
}

static void build_planted(const char *path, simstore_fingerprinter *fpr, const planted *docs,
                          size_t ndocs)
{
    simstore_text_options t;
    simstore_text_options_init(&t);
    t.paragraph_min_words = SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    o.threads = 1;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    for (size_t i = 0; i < ndocs; i++) {
        char *text = text_of(docs[i].seeds, docs[i].n);
        uint64_t fps[16];
        size_t n = paragraphs_of(fpr, text, t.paragraph_min_words, fps, 16);
        simstore_doc d = {docs[i].id, strlen(docs[i].id), 0, NULL, 0, i};
        assert_int_equal(simstore_fingerprint_text(fpr, text, strlen(text), &d.fp, NULL), 0);
        d.paragraphs = fps;
        d.n_paragraphs = n;
        assert_int_equal(simstore_builder_add(b, &d), 0);
        free(text);
    }
    assert_int_equal(simstore_builder_finish(b), 0);
}

/* The answer to the paragraphs of `seeds`, as "id shared/of;" text. */
static void answer(simstore_query *q, simstore_fingerprinter *fpr, const uint64_t *seeds, size_t n,
                   double min_fraction, test_text *out)
{
    char *text = text_of(seeds, n);
    uint64_t fps[32];
    size_t np = paragraphs_of(fpr, text, SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT, fps, 32);
    const simstore_paragraph_match *m;
    size_t count;
    assert_int_equal(simstore_query_paragraphs(q, fps, np, 3, min_fraction, &m, &count), 0);
    for (size_t i = 0; i < count; i++) {
        assert_true(m[i].of == np);
        assert_true(m[i].fraction == (double)m[i].shared / (double)m[i].of);
        test_text_add(out, "%.*s %zu/%zu;", (int)m[i].id_len, m[i].id, m[i].shared, m[i].of);
    }
    free(text);
}

static void expect(simstore_query *q, simstore_fingerprinter *fpr, const uint64_t *seeds, size_t n,
                   double min_fraction, const char *want, const char *what)
{
    test_text got = {0}, w = {0};
    answer(q, fpr, seeds, n, min_fraction, &got);
    test_text_add(&w, "%s", want);
    assert_true(test_text_same(&got, &w, what));
    free(got.buf);
    free(w.buf);
}

static void verify_ok(const char *path)
{
    simstore_verify_summary sum;
    int rc = simstore_verify(path, 0, NULL, NULL, &sum);
    if (rc)
        fprintf(stderr, "verify: %s\n", simstore_last_error());
    assert_int_equal(rc, 0);
    assert_int_equal(sum.errors, 0);
    assert_int_equal(sum.warnings, 0);
}

/* simstore_export hands each document's paragraph list as built. */
typedef struct para_export {
    simstore_fingerprinter *fpr;
    size_t docs;
} para_export;

static int check_exported_paragraphs(void *ctx, const simstore_document *d)
{
    para_export *x = (para_export *)ctx;
    for (size_t i = 0; i < NPLANTED; i++) {
        if (strlen(PLANTED[i].id) != d->id_len || memcmp(PLANTED[i].id, d->id, d->id_len) != 0)
            continue;
        char *text = text_of(PLANTED[i].seeds, PLANTED[i].n);
        uint64_t fps[16];
        size_t n = paragraphs_of(x->fpr, text, 8, fps, 16);
        free(text);
        assert_int_equal(d->paragraph_count, n);
        assert_true(n == 0 || d->paragraphs != NULL);
        for (size_t j = 0; j < n; j++) {
            uint64_t v = 0;
            for (int b = 0; b < 8; b++)
                v |= (uint64_t)d->paragraphs[8 * j + (size_t)b] << (8 * b);
            assert_true(v == fps[j]);
        }
        x->docs++;
    }
    return 0;
}

static void test_paragraphs_planted__partial_copies(void **state)
{
    (void)state;
    char *dir = test_tmpdir("paragraphs");
    char *path = test_path(dir, "st");
    simstore_fingerprinter *fpr = new_fpr();
    build_planted(path, fpr, PLANTED, NPLANTED);
    verify_ok(path);

    simstore *s;
    simstore_query *q;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    para_export x = {fpr, 0};
    assert_int_equal(simstore_export(s, NULL, 0, check_exported_paragraphs, &x), 0);
    assert_int_equal(
        simstore_export(s, NULL, SIMSTORE_EXPORT_BY_INSERTION, check_exported_paragraphs, &x), 0);
    assert_int_equal(x.docs, 2 * NPLANTED);
    simstore_close(s);
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.paragraph_min_words, 8);
    /* 10 + 4 + 2 + 4 distinct paragraphs; the short one is not indexed. */
    assert_int_equal(st.paragraph_fps, 20);
    assert_int_equal(st.paragraph_entries, 10 + 7 + 8 + 4);
    assert_int_equal(st.paragraph_segments, 1);
    assert_int_equal(simstore_query_new(s, SIMSTORE_QUERY_WITH_META, &q), 0);

    /* The page's side: 3 of its 7 counted paragraphs are the article's;
     * the edited document holds the same 3. Fraction, then id. */
    expect(q, fpr, PLANTED[1].seeds, PLANTED[1].n, 0.3, "page 7/7;article 3/7;edited 3/7;", "page");
    /* The edited document: 6 of its 8 paragraphs untouched. */
    expect(q, fpr, PLANTED[2].seeds, PLANTED[2].n, 0.3, "edited 8/8;article 6/8;page 3/8;",
           "edited");
    /* The article's side: the page holds 3 of its 10 (exactly 0.3). */
    expect(q, fpr, PLANTED[0].seeds, PLANTED[0].n, 0.3, "article 10/10;edited 6/10;page 3/10;",
           "article");
    expect(q, fpr, PLANTED[0].seeds, PLANTED[0].n, 0.31, "article 10/10;edited 6/10;",
           "article, 0.31");
    /* A query repeating a copied paragraph counts it each time: 2, 2, 5, 999. */
    static const uint64_t repeats[] = {2, 2, 5, 999};
    expect(q, fpr, repeats, 4, 0, "article 3/4;edited 3/4;page 3/4;", "repeats");
    /* Nothing shared: no answer; a query without long paragraphs: none. */
    static const uint64_t fresh[] = {777, 778};
    expect(q, fpr, fresh, 2, 0, "", "fresh");
    static const uint64_t shortonly[] = {0};
    expect(q, fpr, shortonly, 1, 0, "", "short only");
    /* Errors: a fraction outside 0..1, k above SIMSTORE_MAX_K. */
    const simstore_paragraph_match *m;
    size_t count;
    uint64_t one = 1;
    assert_int_equal(simstore_query_paragraphs(q, &one, 1, 3, 1.5, &m, &count), SIMSTORE_EINVAL);
    assert_int_equal(simstore_query_paragraphs(q, &one, 1, SIMSTORE_MAX_K + 1, 0.3, &m, &count),
                     SIMSTORE_ERANGE);

    /* An add: a second copy of the page, in segments of its own. */
    simstore_builder *b;
    assert_int_equal(simstore_add_begin(s, NULL, &b), 0);
    {
        char *text = text_of(PLANTED[1].seeds, PLANTED[1].n);
        uint64_t fps[16];
        size_t n = paragraphs_of(fpr, text, 8, fps, 16);
        simstore_doc d = {"page2", 5, 0, "{\"copy\":true}", 13, 0};
        assert_int_equal(simstore_fingerprint_text(fpr, text, strlen(text), &d.fp, NULL), 0);
        d.paragraphs = fps;
        d.n_paragraphs = n;
        assert_int_equal(simstore_builder_add(b, &d), 0);
        free(text);
    }
    assert_int_equal(simstore_builder_finish(b), 0);
    verify_ok(path);
    expect(q, fpr, PLANTED[1].seeds, PLANTED[1].n, 0.3,
           "page 7/7;page2 7/7;article 3/7;edited 3/7;", "page after add");
    /* Metadata comes with WITH_META. */
    {
        char *text = text_of(PLANTED[1].seeds, PLANTED[1].n);
        uint64_t fps[16];
        size_t n = paragraphs_of(fpr, text, 8, fps, 16);
        assert_int_equal(simstore_query_paragraphs(q, fps, n, 3, 0.9, &m, &count), 0);
        assert_int_equal(count, 2);
        assert_null(m[0].meta);
        assert_int_equal(m[1].meta_len, 13);
        assert_memory_equal(m[1].meta, "{\"copy\":true}", 13);
        free(text);
    }

    /* Delete the article: its matches vanish, the others stay. */
    const char *ids[] = {"article"};
    size_t lens[] = {7};
    uint64_t deleted;
    assert_int_equal(simstore_delete(s, ids, lens, 1, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, 1);
    verify_ok(path);
    expect(q, fpr, PLANTED[1].seeds, PLANTED[1].n, 0.3, "page 7/7;page2 7/7;edited 3/7;",
           "page after delete");
    expect(q, fpr, PLANTED[0].seeds, PLANTED[0].n, 0.3, "edited 6/10;page 3/10;page2 3/10;",
           "article after delete");

    /* Compact: one document segment, one paragraph segment, the same
     * answers, and the dead paragraphs (the article's own: 3, 6, 9, 10)
     * gone. */
    assert_int_equal(simstore_compact(s, NULL), 0);
    verify_ok(path);
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.paragraph_segments, 1);
    assert_int_equal(st.paragraph_fps, 16);
    assert_int_equal(st.paragraph_table_fps, 16);
    expect(q, fpr, PLANTED[1].seeds, PLANTED[1].n, 0.3, "page 7/7;page2 7/7;edited 3/7;",
           "page after compact");
    expect(q, fpr, PLANTED[0].seeds, PLANTED[0].n, 0.3, "edited 6/10;page 3/10;page2 3/10;",
           "article after compact");
    simstore_query_free(q);
    simstore_close(s);

    /* Reopened read-only: the same. */
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    expect(q, fpr, PLANTED[2].seeds, PLANTED[2].n, 0.3, "edited 8/8;page 3/8;page2 3/8;",
           "edited, reopened");
    simstore_query_free(q);
    simstore_close(s);
    simstore_fingerprinter_free(fpr);
    test_rmtree(dir);
    free(path);
    free(dir);
}

/* A store without a paragraph index refuses paragraphs, and paragraph
 * queries; its records are those of before (no pfps database). */
static void test_paragraphs_errors__no_index(void **state)
{
    (void)state;
    char *dir = test_tmpdir("paragraphs-none");
    char *path = test_path(dir, "st");
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, NULL, &b), 0);
    simstore_doc d = {"a", 1, 42, NULL, 0, 0};
    uint64_t p = 7;
    d.paragraphs = &p;
    d.n_paragraphs = 1;
    assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_EINVAL);
    d.n_paragraphs = 0;
    assert_int_equal(simstore_builder_add(b, &d), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    simstore_query *q;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    const simstore_paragraph_match *m;
    size_t count;
    assert_int_equal(simstore_query_paragraphs(q, &p, 1, 3, 0.3, &m, &count), SIMSTORE_EINVAL);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.paragraph_min_words, 0);
    simstore_query_free(q);
    simstore_close(s);
    verify_ok(path);
    /* A fingerprint-only store cannot have one; a minimum above 255 is refused. */
    simstore_text_options t;
    simstore_text_options_init(&t);
    t.paragraph_min_words = 8;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    o.fingerprint_only = 1;
    char *p2 = test_path(dir, "fp");
    assert_int_equal(simstore_build_begin(p2, &o, &b), SIMSTORE_EINVAL);
    o.fingerprint_only = 0;
    t.paragraph_min_words = 256;
    assert_int_equal(simstore_build_begin(p2, &o, &b), SIMSTORE_EINVAL);
    free(p2);
    test_rmtree(dir);
    free(path);
    free(dir);
}

/* Adds whose documents bring no new fingerprint still write a paragraph
 * segment each; the automatic compaction bounds them as it bounds document
 * segments, and the answers stay those of the documents. */
static void test_paragraphs_segments__bounded_by_compaction(void **state)
{
    (void)state;
    char *dir = test_tmpdir("paragraphs-segments");
    char *path = test_path(dir, "st");
    simstore_text_options t;
    simstore_text_options_init(&t);
    t.paragraph_min_words = 1;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    uint64_t p0 = 0x1111;
    simstore_doc d = {"d00", 3, 42, NULL, 0, 0};
    d.paragraphs = &p0;
    d.n_paragraphs = 1;
    assert_int_equal(simstore_builder_add(b, &d), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), 0);
    for (unsigned i = 1; i <= 3 * SIMSTORE_MAX_SEGMENTS; i++) {
        char id[8];
        snprintf(id, sizeof id, "d%02u", i);
        uint64_t p[2] = {0x1111, 0x5555000000000000ULL * i + i};
        simstore_doc e = {id, 3, 42, NULL, 0, i};
        assert_int_equal(simstore_add_begin(s, NULL, &b), 0);
        e.paragraphs = p;
        e.n_paragraphs = 2;
        assert_int_equal(simstore_builder_add(b, &e), 0);
        assert_int_equal(simstore_builder_finish(b), 0);
        simstore_stats st;
        assert_int_equal(simstore_get_stats(s, &st), 0);
        assert_true(st.paragraph_segments <= SIMSTORE_MAX_SEGMENTS + 1);
        assert_int_equal(st.documents, i + 1);
    }
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    const simstore_paragraph_match *m;
    size_t count;
    assert_int_equal(simstore_query_paragraphs(q, &p0, 1, 3, 0, &m, &count), 0);
    assert_int_equal(count, 3 * SIMSTORE_MAX_SEGMENTS + 1);
    simstore_query_free(q);
    simstore_close(s);
    verify_ok(path);
    test_rmtree(dir);
    free(path);
    free(dir);
}

/* ---- the oracle --------------------------------------------------------------- */

typedef struct odoc {
    char id[16];
    uint64_t paras[12];
    size_t n;
    int live;
} odoc;

static uint64_t near(test_rng *r, uint64_t x, unsigned max_bits)
{
    unsigned d = (unsigned)test_rng_below(r, max_bits + 1);
    for (unsigned i = 0; i < d; i++)
        x ^= 1ULL << test_rng_below(r, 64);
    return x;
}

/* shared of each document for the query fps[0..n) at k, by brute force. */
static void oracle(const odoc *docs, size_t ndocs, const uint64_t *fps, size_t n, unsigned k,
                   test_text *out)
{
    for (size_t d = 0; d < ndocs; d++) {
        if (!docs[d].live)
            continue;
        size_t shared = 0;
        for (size_t i = 0; i < n; i++) {
            int hit = 0;
            for (size_t j = 0; j < docs[d].n && !hit; j++)
                hit = simstore_distance(fps[i], docs[d].paras[j]) <= k;
            shared += (size_t)hit;
        }
        if (shared)
            test_text_add(out, "%s %zu/%zu;", docs[d].id, shared, n);
    }
}

/* The store's answer in id order (the oracle's), all fractions. */
static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void store_answer(simstore_query *q, const uint64_t *fps, size_t n, unsigned k,
                         test_text *out)
{
    const simstore_paragraph_match *m;
    size_t count;
    assert_int_equal(simstore_query_paragraphs(q, fps, n, k, 0, &m, &count), 0);
    char **lines = calloc(count + 1, sizeof *lines);
    for (size_t i = 0; i < count; i++) {
        lines[i] = malloc(64);
        snprintf(lines[i], 64, "%.*s %zu/%zu;", (int)m[i].id_len, m[i].id, m[i].shared, m[i].of);
        /* Sorted by fraction (descending), then id. */
        if (i)
            assert_true(m[i - 1].shared > m[i].shared ||
                        (m[i - 1].shared == m[i].shared && strncmp(m[i - 1].id, m[i].id, 16) < 0));
    }
    /* Ids are "dNNN": byte order is the oracle's order. */
    qsort(lines, count, sizeof *lines, cmp_line);
    for (size_t i = 0; i < count; i++) {
        test_text_add(out, "%s", lines[i]);
        free(lines[i]);
    }
    free(lines);
}

static void check_queries(simstore_query *q, test_rng *r, const odoc *docs, size_t ndocs,
                          unsigned k, const char *what)
{
    for (int t = 0; t < 60; t++) {
        uint64_t fps[10];
        size_t n = 1 + (size_t)test_rng_below(r, 10);
        for (size_t i = 0; i < n; i++) {
            if (test_rng_below(r, 4) == 0) {
                fps[i] = test_rng_next(r);
            } else {
                const odoc *d = &docs[test_rng_below(r, ndocs)];
                fps[i] = near(r, d->paras[test_rng_below(r, d->n)], k + 2);
            }
            if (i && test_rng_below(r, 8) == 0)
                fps[i] = fps[i - 1]; /* a repeated paragraph */
        }
        test_text got = {0}, want = {0};
        store_answer(q, fps, n, k, &got);
        oracle(docs, ndocs, fps, n, k, &want);
        char label[96];
        snprintf(label, sizeof label, "%s, k=%u, query %d", what, k, t);
        assert_true(test_text_same(&got, &want, label));
        free(got.buf);
        free(want.buf);
    }
}

/* ---- pairs against the oracle ---- */

static size_t shared_of(const odoc *a, const odoc *b, unsigned k)
{
    size_t shared = 0;
    for (size_t i = 0; i < a->n; i++) {
        int hit = 0;
        for (size_t j = 0; j < b->n && !hit; j++)
            hit = simstore_distance(a->paras[i], b->paras[j]) <= k;
        shared += (size_t)hit;
    }
    return shared;
}

typedef struct opair {
    size_t a, b, sa, sb;
    double f;
} opair;

static const odoc *g_docs; /* for the comparator: ids */

static int cmp_opair(const void *x, const void *y)
{
    const opair *p = x, *q = y;
    if (p->f != q->f)
        return p->f > q->f ? -1 : 1;
    int c = strcmp(g_docs[p->a].id, g_docs[q->a].id);
    return c ? c : strcmp(g_docs[p->b].id, g_docs[q->b].id);
}

static int collect_pair(void *ctx, const simstore_paragraph_pair *p)
{
    test_text_add((test_text *)ctx, "%.*s %.*s %zu/%zu %zu/%zu %.6f;", (int)p->id_a_len, p->id_a,
                  (int)p->id_b_len, p->id_b, p->shared_a, p->of_a, p->shared_b, p->of_b,
                  p->fraction);
    return 0;
}

static void check_pairs(simstore *s, const odoc *docs, size_t ndocs, unsigned k, double min,
                        const char *what)
{
    opair *all = calloc(ndocs * ndocs / 2 + 1, sizeof *all);
    size_t n = 0;
    for (size_t a = 0; a < ndocs; a++)
        for (size_t b = a + 1; b < ndocs; b++) {
            if (!docs[a].live || !docs[b].live)
                continue;
            size_t sa = shared_of(&docs[a], &docs[b], k), sb = shared_of(&docs[b], &docs[a], k);
            assert_true((sa == 0) == (sb == 0));
            double fa = (double)sa / (double)docs[a].n, fb = (double)sb / (double)docs[b].n;
            double f = fa > fb ? fa : fb;
            if (sa && f >= min)
                all[n++] = (opair){a, b, sa, sb, f};
        }
    g_docs = docs;
    qsort(all, n, sizeof *all, cmp_opair);
    test_text want = {0}, got = {0};
    for (size_t i = 0; i < n; i++)
        test_text_add(&want, "%s %s %zu/%zu %zu/%zu %.6f;", docs[all[i].a].id, docs[all[i].b].id,
                      all[i].sa, docs[all[i].a].n, all[i].sb, docs[all[i].b].n, all[i].f);
    assert_int_equal(simstore_paragraph_pairs(s, k, min, collect_pair, &got), 0);
    /* The clusters make pairs at every minimum used here. */
    assert_true(n > 0);
    char label[96];
    snprintf(label, sizeof label, "pairs %s, k=%u, min %.2f (%zu pairs)", what, k, min, n);
    assert_true(test_text_same(&got, &want, label));
    free(got.buf);
    free(want.buf);
    free(all);
}

static void add_docs(simstore_builder *b, odoc *docs, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        simstore_doc d = {docs[i].id, strlen(docs[i].id), docs[i].paras[0] ^ 0x5555, NULL, 0, i};
        d.paragraphs = docs[i].paras;
        d.n_paragraphs = docs[i].n;
        assert_int_equal(simstore_builder_add(b, &d), 0);
        docs[i].live = 1;
    }
}

static void test_paragraphs_oracle__random_and_clustered(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "paragraphs oracle", 1513);
    enum { NDOCS = 240 };
    odoc *docs = calloc(NDOCS, sizeof *docs);
    /* Half the paragraphs random, half in clusters (a centre and
     * neighbours at 0..5 bits), shared among documents. */
    uint64_t centres[24];
    for (size_t i = 0; i < 24; i++)
        centres[i] = test_rng_next(&r);
    for (size_t i = 0; i < NDOCS; i++) {
        snprintf(docs[i].id, sizeof docs[i].id, "d%03zu", i);
        docs[i].n = 1 + (size_t)test_rng_below(&r, 12);
        for (size_t j = 0; j < docs[i].n; j++)
            docs[i].paras[j] = test_rng_below(&r, 2) ? test_rng_next(&r)
                                                     : near(&r, centres[test_rng_below(&r, 24)], 5);
    }
    char *dir = test_tmpdir("paragraphs-oracle");
    char *path = test_path(dir, "st");
    simstore_text_options t;
    simstore_text_options_init(&t);
    t.paragraph_min_words = 1;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    o.threads = 2;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    add_docs(b, docs, 0, NDOCS / 2);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    simstore_query *q;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    for (unsigned k = 0; k <= 3; k++)
        check_queries(q, &r, docs, NDOCS, k, "one segment");
    /* Above the store's k (3): every prefix near the query's is probed. */
    check_queries(q, &r, docs, NDOCS, 5, "one segment, beyond k");
    check_queries(q, &r, docs, NDOCS, 7, "one segment, beyond k");
    check_pairs(s, docs, NDOCS, 3, 0, "one segment");
    check_pairs(s, docs, NDOCS, 1, 0.3, "one segment");
    /* A second segment, then deletes, then a compaction. */
    assert_int_equal(simstore_add_begin(s, NULL, &b), 0);
    add_docs(b, docs, NDOCS / 2, NDOCS);
    assert_int_equal(simstore_builder_finish(b), 0);
    check_queries(q, &r, docs, NDOCS, 3, "two segments");
    const char *ids[NDOCS / 3];
    size_t lens[NDOCS / 3];
    for (size_t i = 0; i < NDOCS / 3; i++) {
        odoc *d = &docs[i * 3];
        ids[i] = d->id;
        lens[i] = strlen(d->id);
        d->live = 0;
    }
    uint64_t deleted;
    assert_int_equal(simstore_delete(s, ids, lens, NDOCS / 3, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, NDOCS / 3);
    check_queries(q, &r, docs, NDOCS, 3, "after delete");
    check_queries(q, &r, docs, NDOCS, 2, "after delete");
    check_queries(q, &r, docs, NDOCS, 6, "after delete, beyond k");
    check_pairs(s, docs, NDOCS, 3, 0.3, "after delete");
    verify_ok(path);
    assert_int_equal(simstore_compact(s, NULL), 0);
    check_queries(q, &r, docs, NDOCS, 3, "after compact");
    check_pairs(s, docs, NDOCS, 3, 0, "after compact");
    check_pairs(s, docs, NDOCS, 2, 0.5, "after compact");
    verify_ok(path);
    simstore_query_free(q);
    simstore_close(s);
    test_rmtree(dir);
    free(path);
    free(dir);
    free(docs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paragraphs_planted__partial_copies),
        cmocka_unit_test(test_paragraphs_errors__no_index),
        cmocka_unit_test(test_paragraphs_segments__bounded_by_compaction),
        cmocka_unit_test(test_paragraphs_oracle__random_and_clustered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
