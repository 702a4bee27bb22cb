/* test_boilerplate.c: boilerplate through the public API: the counter's
 * sets exactly as a brute-force count gives them (in memory and spilling at
 * a tiny budget, at the threshold's edges), a generated templated corpus
 * (pages of two sites: the templates' lines found; with them removed, pages
 * of one body under either template fingerprint alike and different bodies
 * far apart; without, the template dominates), and stores that record a
 * set: reopened, applied to text queries, refused to adds, and a damaged
 * record failing the open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/checksum.h"
#include "simstore.h"
#include "store/store_internal.h"
#include "testutil.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_SEED 0x53494D534C494E45ULL /* "SIMSLINE" */

static simstore_text_options text_options(void)
{
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.cjk = SIMSTORE_CJK_BIGRAM;
    return o;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* ---- the counter against a brute-force count --------------------------------- */

#define LINES 400
#define MAX_PER_DOC 24

static uint64_t line_key(unsigned id)
{
    char buf[64];
    int n = snprintf(buf, sizeof buf, "line %u text", id);
    return sims_xxh3_64(buf, (size_t)n, LINE_SEED);
}

typedef struct line_corpus {
    unsigned ndocs;
    unsigned nlines[2000];
    unsigned line[2000][MAX_PER_DOC];
} line_corpus;

/* Documents of skewed lines (a few in most documents, most in few), with
 * repeats inside documents, and lines planted in exactly `edge` and
 * `edge` + 1 documents. */
static void make_line_corpus(test_rng *rng, line_corpus *c, unsigned ndocs, unsigned edge)
{
    c->ndocs = ndocs;
    for (unsigned d = 0; d < ndocs; d++) {
        unsigned n = 0, want = 4 + (unsigned)test_rng_below(rng, MAX_PER_DOC - 6);
        while (n < want) {
            uint64_t r = test_rng_below(rng, 1000);
            unsigned id = r < 300   ? (unsigned)(r % 6)                     /* popular */
                          : r < 500 ? 6 + (unsigned)test_rng_below(rng, 30) /* middling */
                                    : 36 + (unsigned)test_rng_below(rng, LINES - 40);
            c->line[d][n++] = id;
            if (test_rng_below(rng, 10) == 0 && n < want)
                c->line[d][n++] = id; /* the same line twice in a document */
        }
        if (d < edge)
            c->line[d][n++] = LINES - 2; /* in exactly `edge` documents */
        if (d <= edge)
            c->line[d][n++] = LINES - 1; /* in `edge` + 1 */
        c->nlines[d] = n;
    }
}

/* The set the rule gives: N >= min, df >= 2, df * 10^6 > millionths * N. */
static size_t brute_force(const line_corpus *c, uint32_t millionths, uint64_t min_docs,
                          uint64_t *out)
{
    unsigned df[LINES] = {0};
    for (unsigned d = 0; d < c->ndocs; d++) {
        unsigned char seen[LINES] = {0};
        for (unsigned i = 0; i < c->nlines[d]; i++)
            if (!seen[c->line[d][i]]++)
                df[c->line[d][i]]++;
    }
    size_t n = 0;
    for (unsigned id = 0; id < LINES; id++)
        if (c->ndocs >= min_docs && df[id] >= 2 &&
            (uint64_t)df[id] * 1000000u > (uint64_t)millionths * c->ndocs)
            out[n++] = line_key(id);
    qsort(out, n, sizeof *out, cmp_u64);
    return n;
}

/* What simstore_boilerplate_counter_each hands on: the keys passing the
 * rule (simstore_boilerplate_is_line), strictly increasing. */
typedef struct walked {
    simstore_boilerplate_info info;
    uint64_t keys[LINES];
    size_t n, seen;
    uint64_t last;
} walked;

static int walk_key(void *ctx, uint64_t key, uint64_t df)
{
    walked *w = (walked *)ctx;
    assert_true(w->seen == 0 || key > w->last);
    assert_true(df >= 1);
    w->last = key;
    w->seen++;
    if (simstore_boilerplate_is_line(&w->info, df)) {
        assert_true(w->n < LINES);
        w->keys[w->n++] = key;
    }
    return 0;
}

/* Count c: even documents as texts (with a blank line and a line without
 * tokens), odd ones as keys in a shuffled order with repeats. */
static simstore_boilerplate *count(const line_corpus *c, double fraction, uint64_t min_docs,
                                   uint64_t memory_bytes, unsigned *spilled)
{
    simstore_text_options t = text_options();
    simstore_boilerplate_options o;
    simstore_boilerplate_options_init(&o);
    o.fraction = fraction;
    o.min_documents = min_docs;
    o.memory_bytes = memory_bytes;
    simstore_boilerplate_counter *counter;
    assert_int_equal(simstore_boilerplate_counter_new(&t, &o, &counter), 0);
    char text[MAX_PER_DOC * 32 + 64];
    uint64_t keys[MAX_PER_DOC];
    for (unsigned d = 0; d < c->ndocs; d++) {
        if (d % 2 == 0) {
            size_t len = 0;
            for (unsigned i = 0; i < c->nlines[d]; i++)
                len += (size_t)snprintf(text + len, sizeof text - len, "%sLine %u, TEXT.\n",
                                        i == 1 ? "\n  * * *\n" : "", c->line[d][i]);
            assert_int_equal(simstore_boilerplate_counter_add(counter, text, len), 0);
        } else {
            unsigned n = c->nlines[d];
            for (unsigned i = 0; i < n; i++)
                keys[n - 1 - i] = line_key(c->line[d][i]);
            assert_int_equal(simstore_boilerplate_counter_add_keys(counter, keys, n), 0);
        }
    }
    assert_int_equal(simstore_boilerplate_counter_documents(counter), c->ndocs);
    /* The counts walked twice (the second rereads the runs) give the set
     * finish makes. */
    walked *w = calloc(2, sizeof *w);
    assert_non_null(w);
    for (int k = 0; k < 2; k++) {
        simstore_boilerplate_counter_info(counter, &w[k].info);
        assert_int_equal(w[k].info.documents, c->ndocs);
        assert_int_equal(simstore_boilerplate_counter_each(counter, walk_key, &w[k]), 0);
    }
    assert_int_equal(w[0].seen, w[1].seen);
    assert_int_equal(w[0].n, w[1].n);
    assert_int_equal(simstore_boilerplate_counter_add_keys(counter, keys, 1), SIMSTORE_EINVAL);
    simstore_boilerplate *bp;
    assert_int_equal(simstore_boilerplate_counter_finish(counter, &bp), 0);
    simstore_boilerplate_info made;
    simstore_boilerplate_get_info(bp, &made);
    assert_int_equal(made.lines, w[0].n);
    if (w[0].n)
        assert_memory_equal(simstore_boilerplate_keys(bp), w[0].keys, w[0].n * sizeof *w[0].keys);
    free(w);
    *spilled = sims_boilerplate_counter_spilled_runs(counter);
    simstore_boilerplate *again;
    assert_int_equal(simstore_boilerplate_counter_finish(counter, &again), SIMSTORE_EINVAL);
    assert_null(again);
    assert_int_equal(simstore_boilerplate_counter_add_keys(counter, keys, 1), SIMSTORE_EINVAL);
    simstore_boilerplate_counter_free(counter);
    assert_non_null(bp);
    return bp;
}

static void test_boilerplate_counter__exact_against_brute_force(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "boilerplate counter", 2024);
    line_corpus *c = malloc(sizeof *c);
    static const struct {
        unsigned ndocs;
        double fraction;
        uint64_t min_docs;
    } cases[] = {
        {200, 0.1, 100},    /* edge lines in 20 and 21 of 200: only 21 is more */
        {2000, 0.1, 100},   /* spills at the tiny budget */
        {2000, 0.01, 100},  /* a lower threshold */
        {500, 0.5, 0},      /* a higher one, no minimum */
        {300, 0.000001, 0}, /* df >= 2 is the whole rule */
        {99, 0.1, 100},     /* too few documents: nothing */
        {100, 0.1, 100},    /* just enough */
    };
    uint64_t want[LINES], *got;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned edge = (unsigned)(cases[i].fraction * cases[i].ndocs);
        make_line_corpus(&rng, c, cases[i].ndocs, edge < cases[i].ndocs ? edge : 0);
        uint32_t millionths = (uint32_t)(cases[i].fraction * 1e6 + 0.5);
        size_t nwant = brute_force(c, millionths, cases[i].min_docs, want);
        for (int tiny = 0; tiny < 2; tiny++) {
            unsigned spilled;
            simstore_boilerplate *bp = count(c, cases[i].fraction, cases[i].min_docs,
                                             tiny ? 16 << 10 : 64 << 20, &spilled);
            simstore_boilerplate_info info;
            simstore_boilerplate_get_info(bp, &info);
            got = (uint64_t *)simstore_boilerplate_keys(bp);
            if (info.lines != nwant || (nwant && memcmp(got, want, nwant * sizeof *want) != 0))
                fprintf(stderr, "case %zu (tiny %d): %llu lines, brute force %zu\n", i, tiny,
                        (unsigned long long)info.lines, nwant);
            assert_int_equal(info.lines, nwant);
            if (nwant)
                assert_memory_equal(got, want, nwant * sizeof *want);
            assert_int_equal(info.documents, cases[i].ndocs);
            assert_int_equal(info.min_documents, cases[i].min_docs);
            assert_int_equal(info.fraction_millionths, millionths);
            if (!tiny)
                assert_int_equal(spilled, 0);
            else if (cases[i].ndocs >= 2000)
                assert_true(spilled > 4);
            /* The edge: a line in exactly fraction * N documents is not
             * boilerplate, one in one more is. */
            if (cases[i].ndocs >= cases[i].min_docs && edge >= 2 && edge < cases[i].ndocs &&
                (double)edge == cases[i].fraction * cases[i].ndocs) {
                assert_false(simstore_boilerplate_contains(bp, line_key(LINES - 2)));
                assert_true(simstore_boilerplate_contains(bp, line_key(LINES - 1)));
            }
            simstore_boilerplate_free(bp);
        }
    }
    free(c);
}

static void test_boilerplate_counter__api_errors(void **state)
{
    (void)state;
    simstore_boilerplate_counter *c;
    simstore_boilerplate_options o;
    simstore_boilerplate_options_init(&o);
    assert_true(o.fraction == SIMSTORE_BOILERPLATE_FRACTION_DEFAULT);
    assert_int_equal(o.min_documents, SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT);
    o.fraction = 1;
    assert_int_equal(simstore_boilerplate_counter_new(NULL, &o, &c), SIMSTORE_EINVAL);
    assert_null(c);
    simstore_text_options t = text_options();
    t.shingle_words = 0;
    assert_int_equal(simstore_boilerplate_counter_new(&t, NULL, &c), SIMSTORE_EINVAL);
    assert_int_equal(simstore_boilerplate_counter_new(NULL, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_boilerplate_counter_new(NULL, NULL, &c), 0);
    assert_int_equal(simstore_boilerplate_counter_add(c, NULL, 3), SIMSTORE_EINVAL);
    assert_int_equal(simstore_boilerplate_counter_add_keys(c, NULL, 3), SIMSTORE_EINVAL);
    assert_int_equal(simstore_boilerplate_counter_each(NULL, walk_key, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_boilerplate_counter_each(c, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_boilerplate_counter_add(c, "", 0), 0);
    assert_int_equal(simstore_boilerplate_counter_documents(c), 1);
    simstore_boilerplate *bp;
    assert_int_equal(simstore_boilerplate_counter_finish(c, &bp), 0);
    simstore_boilerplate_info info;
    simstore_boilerplate_get_info(bp, &info);
    assert_int_equal(info.lines, 0);
    assert_int_equal(info.documents, 1);
    simstore_boilerplate_free(bp);
    simstore_boilerplate_counter_free(c);
    simstore_boilerplate_counter_free(NULL);
    assert_int_equal(simstore_boilerplate_counter_documents(NULL), 0);
}

/* ---- a templated corpus -------------------------------------------------------- */

static const char *const template_a[] = {
    "Acme Widgets Online Store",
    "Home | Products | Services | Blog | About | Contact | Careers",
    "Sign in  Register  Cart  Checkout  Help",
    "Free shipping on orders over fifty dollars this month only",
    "Copyright 2024 Acme Widgets Inc. All rights reserved.",
    "Privacy policy - Terms of service - Cookie settings - Accessibility",
    "Follow us on social media for news and special offers",
    "Acme Widgets, 123 Main Street, Springfield",
};
static const char *const template_b[] = {
    "THE DAILY GAZETTE",
    "News · Sport · Business · Culture · Opinion · Weather",
    "Subscribe today and read without limits from any device",
    "Most read stories of the week chosen by our editors",
    "(c) The Daily Gazette Media Group, registered in England",
    "Advertise with us | Contact the newsroom | Corrections",
    "Download our app for breaking news alerts on your phone",
    "Sign up for the morning briefing newsletter",
};
#define TEMPLATE_LINES 8
#define BODY_LINES 2
#define BODY_WORDS 9

static const char *const vocabulary[] = {
    "river",   "stone",   "market", "engine", "violet", "harbor", "signal",  "meadow",  "copper",
    "lantern", "orbit",   "cedar",  "falcon", "quartz", "tundra", "velvet",  "walnut",  "zephyr",
    "anchor",  "basalt",  "cobalt", "dune",   "ember",  "fjord",  "glacier", "hollow",  "island",
    "jasper",  "kettle",  "lagoon", "mosaic", "nectar", "oasis",  "pepper",  "quiver",  "ripple",
    "saffron", "thistle", "umber",  "vortex", "willow", "yarrow", "acorn",   "bramble", "canyon",
    "delta",   "estuary", "fennel", "garnet", "heron",  "indigo", "juniper", "kelp",    "lichen"};
#define VOCABULARY (sizeof vocabulary / sizeof *vocabulary)

typedef struct body {
    char text[BODY_LINES * BODY_WORDS * 12];
} body;

static void make_body(test_rng *rng, body *b)
{
    size_t len = 0;
    for (unsigned l = 0; l < BODY_LINES; l++) {
        for (unsigned w = 0; w < BODY_WORDS; w++)
            len += (size_t)snprintf(b->text + len, sizeof b->text - len, "%s%s", w ? " " : "",
                                    vocabulary[test_rng_below(rng, VOCABULARY)]);
        len += (size_t)snprintf(b->text + len, sizeof b->text - len, ".\n");
    }
}

/* A page: the template's first three lines, the body, the other five. */
static size_t make_page(const char *const *tmpl, const body *b, char *out, size_t cap)
{
    size_t len = 0;
    for (unsigned i = 0; i < 3; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s\n", tmpl[i]);
    len += (size_t)snprintf(out + len, cap - len, "\n%s\n", b->text);
    for (unsigned i = 3; i < TEMPLATE_LINES; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s\n", tmpl[i]);
    return len;
}

#define SITE_A_PAGES 200
#define SITE_B_PAGES 100
#define PAGES (SITE_A_PAGES + SITE_B_PAGES)

typedef struct site_corpus {
    body bodies[PAGES];
    simstore_boilerplate *set;
} site_corpus;

static void make_site_corpus(site_corpus *sc)
{
    test_rng rng;
    test_rng_init(&rng, "templated corpus", 4711);
    for (unsigned i = 0; i < PAGES; i++)
        make_body(&rng, &sc->bodies[i]);
    simstore_text_options t = text_options();
    simstore_boilerplate_counter *c;
    assert_int_equal(simstore_boilerplate_counter_new(&t, NULL, &c), 0);
    char page[4096];
    for (unsigned i = 0; i < PAGES; i++) {
        size_t len = make_page(i < SITE_A_PAGES ? template_a : template_b, &sc->bodies[i], page,
                               sizeof page);
        assert_int_equal(simstore_boilerplate_counter_add(c, page, len), 0);
    }
    assert_int_equal(simstore_boilerplate_counter_finish(c, &sc->set), 0);
    simstore_boilerplate_counter_free(c);
}

static uint64_t page_fp(simstore_fingerprinter *fpr, const char *const *tmpl, const body *b,
                        unsigned *flags)
{
    char page[4096];
    size_t len = make_page(tmpl, b, page, sizeof page);
    uint64_t fp;
    unsigned f;
    assert_int_equal(simstore_fingerprint_text(fpr, page, len, &fp, &f), 0);
    if (flags)
        *flags = f;
    return fp;
}

static void test_boilerplate_corpus__templates_found_and_removed(void **state)
{
    (void)state;
    site_corpus *sc = malloc(sizeof *sc);
    make_site_corpus(sc);
    /* Exactly the sixteen template lines (each in 200 or 100 of 300
     * pages, above 30); no body line (each in one page). */
    simstore_boilerplate_info info;
    simstore_boilerplate_get_info(sc->set, &info);
    assert_int_equal(info.lines, 2 * TEMPLATE_LINES);
    assert_int_equal(info.documents, PAGES);
    simstore_text_options t = text_options();
    simstore_fingerprinter *plain, *fpr;
    assert_int_equal(simstore_fingerprinter_new(&t, &plain), 0);
    assert_int_equal(simstore_fingerprinter_new(&t, &fpr), 0);
    for (unsigned i = 0; i < TEMPLATE_LINES; i++) {
        const uint64_t *k;
        size_t n;
        assert_int_equal(
            simstore_fingerprinter_line_keys(plain, template_a[i], strlen(template_a[i]), &k, &n),
            0);
        assert_true(n == 1 && simstore_boilerplate_contains(sc->set, k[0]));
        assert_int_equal(
            simstore_fingerprinter_line_keys(plain, template_b[i], strlen(template_b[i]), &k, &n),
            0);
        assert_true(n == 1 && simstore_boilerplate_contains(sc->set, k[0]));
    }
    assert_int_equal(simstore_fingerprinter_set_boilerplate(fpr, sc->set), 0);

    /* Same body under either template: the same fingerprint with the
     * templates removed (the body's own fingerprint), far apart without. */
    unsigned same_plain = 0, same_plain_min = 64, far_min = 64;
    double far_removed = 0, far_plain = 0;
    unsigned pairs = 0;
    for (unsigned i = 0; i < 40; i++) {
        const body *x = &sc->bodies[i], *y = &sc->bodies[i + 1];
        unsigned flags;
        uint64_t ax = page_fp(fpr, template_a, x, &flags);
        assert_int_equal(flags, 0);
        uint64_t bx = page_fp(fpr, template_b, x, NULL);
        uint64_t ay = page_fp(fpr, template_a, y, NULL);
        uint64_t body_fp;
        assert_int_equal(simstore_fingerprint_text(plain, x->text, strlen(x->text), &body_fp, NULL),
                         0);
        assert_true(ax == bx);
        assert_true(ax == body_fp);
        unsigned d_plain = simstore_distance(page_fp(plain, template_a, x, NULL),
                                             page_fp(plain, template_b, x, NULL));
        same_plain += d_plain;
        if (d_plain < same_plain_min)
            same_plain_min = d_plain;
        unsigned d_far = simstore_distance(ax, ay);
        if (d_far < far_min)
            far_min = d_far;
        far_removed += d_far;
        far_plain += simstore_distance(page_fp(plain, template_a, x, NULL),
                                       page_fp(plain, template_a, y, NULL));
        pairs++;
    }
    fprintf(stderr,
            "same body, other template: distance 0 with removal, %.1f on average (min %u) "
            "without; different bodies, one template: %.1f with removal, %.1f without\n",
            same_plain / (double)pairs, same_plain_min, far_removed / pairs, far_plain / pairs);
    /* Without removal the template dominates: a body under another template
     * is beyond any useful k, and other bodies under one template come
     * close; with removal, different bodies are far apart. */
    assert_true(same_plain_min > 7);
    assert_true(far_min > 7);
    assert_true(far_plain / pairs < far_removed / pairs - 8);

    /* A page of its template alone is only boilerplate: fingerprinted whole,
     * as its template's other bare pages are. */
    body empty;
    empty.text[0] = '\0';
    unsigned flags;
    uint64_t bare = page_fp(fpr, template_a, &empty, &flags);
    assert_int_equal(flags, SIMSTORE_FP_ONLY_BOILERPLATE);
    assert_true(bare == page_fp(plain, template_a, &empty, NULL));
    simstore_fingerprinter_free(plain);
    simstore_fingerprinter_free(fpr);
    simstore_boilerplate_free(sc->set);
    free(sc);
}

/* ---- stores that record a set --------------------------------------------------- */

static void flip_boilerplate_record(const char *dir, size_t byte)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta;
    assert_int_equal(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 4);
    mdb_env_set_mapsize(env, (size_t)1 << 30);
    assert_int_equal(mdb_env_open(env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    MDB_val key = {11, (void *)"boilerplate"}, val;
    assert_int_equal(mdb_get(txn, meta, &key, &val), 0);
    uint8_t *copy = malloc(val.mv_size);
    memcpy(copy, val.mv_data, val.mv_size);
    copy[byte % val.mv_size] ^= 0x10;
    MDB_val nv = {val.mv_size, copy};
    assert_int_equal(mdb_put(txn, meta, &key, &nv, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    free(copy);
}

static void test_boilerplate_store__recorded_and_applied(void **state)
{
    (void)state;
    site_corpus *sc = malloc(sizeof *sc);
    make_site_corpus(sc);
    char *dir = test_tmpdir("boilerplate-store");
    char *path = test_path(dir, "s");
    char *plain_path = test_path(dir, "plain");
    simstore_text_options t = text_options();
    simstore_fingerprinter *fpr;
    assert_int_equal(simstore_fingerprinter_new(&t, &fpr), 0);
    assert_int_equal(simstore_fingerprinter_set_boilerplate(fpr, sc->set), 0);

    /* Build: every page fingerprinted without the templates, the set recorded. */
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    assert_int_equal(simstore_builder_set_boilerplate(b, sc->set), 0);
    assert_int_equal(simstore_builder_set_boilerplate(b, NULL), SIMSTORE_EINVAL);
    for (unsigned i = 0; i < PAGES; i++) {
        char id[32];
        snprintf(id, sizeof id, "page-%u", i);
        simstore_doc d = {id, strlen(id), 0, NULL, 0, i};
        d.fp = page_fp(fpr, i < SITE_A_PAGES ? template_a : template_b, &sc->bodies[i], NULL);
        assert_int_equal(simstore_builder_add(b, &d), 0);
    }
    assert_int_equal(simstore_builder_finish(b), 0);

    /* Reopened: the same set. */
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    const simstore_boilerplate *stored = simstore_get_boilerplate(s);
    assert_non_null(stored);
    simstore_boilerplate_info want, got;
    simstore_boilerplate_get_info(sc->set, &want);
    simstore_boilerplate_get_info(stored, &got);
    assert_int_equal(got.lines, want.lines);
    assert_int_equal(got.documents, want.documents);
    assert_int_equal(got.min_documents, want.min_documents);
    assert_int_equal(got.fraction_millionths, want.fraction_millionths);
    assert_memory_equal(simstore_boilerplate_keys(stored), simstore_boilerplate_keys(sc->set),
                        (size_t)want.lines * sizeof(uint64_t));

    /* A text query applies the store's set, whatever the fingerprinter
     * carries: page 5's body under the other site's template finds page 5. */
    simstore_fingerprinter *bare;
    simstore_text_options st;
    simstore_get_text_options(s, &st);
    assert_int_equal(simstore_fingerprinter_new(&st, &bare), 0);
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    char page[4096];
    size_t len = make_page(template_b, &sc->bodies[5], page, sizeof page);
    const simstore_match *m;
    size_t n;
    uint64_t fp;
    assert_int_equal(simstore_query_text(q, bare, page, len, 0, &fp, &m, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].id, "page-5");
    assert_null(simstore_fingerprinter_boilerplate(bare)); /* left as it was */
    uint64_t plain_fp;
    assert_int_equal(simstore_fingerprint_text(bare, page, len, &plain_fp, NULL), 0);
    assert_true(plain_fp != fp);
    /* A fingerprinter with another set gets it back after the query. */
    simstore_boilerplate *other;
    uint64_t one = 1;
    assert_int_equal(simstore_boilerplate_new(&one, 1, NULL, &other), 0);
    simstore_fingerprinter_set_boilerplate(bare, other);
    assert_int_equal(simstore_query_text(q, bare, page, len, 0, NULL, &m, &n), 0);
    assert_int_equal(n, 1);
    assert_ptr_equal(simstore_fingerprinter_boilerplate(bare), other);
    simstore_fingerprinter_free(bare);
    simstore_boilerplate_free(other);
    simstore_query_free(q);
    simstore_close(s);

    /* Adds apply the recorded set; they take no other. */
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), 0);
    assert_int_equal(simstore_add_begin(s, NULL, &b), 0);
    assert_int_equal(simstore_builder_set_boilerplate(b, sc->set), SIMSTORE_EINVAL);
    simstore_builder_abort(b);
    simstore_close(s);

    /* A store built without a set has none; fingerprint-only builders take
     * none. */
    assert_int_equal(simstore_build_begin(plain_path, &o, &b), 0);
    simstore_doc d = {"x", 1, 42, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(simstore_open(plain_path, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_null(simstore_get_boilerplate(s));
    simstore_close(s);
    test_rmtree(plain_path);
    o.fingerprint_only = 1;
    assert_int_equal(simstore_build_begin(plain_path, &o, &b), 0);
    assert_int_equal(simstore_builder_set_boilerplate(b, sc->set), SIMSTORE_EINVAL);
    simstore_builder_abort(b);

    /* A damaged record fails the open and verify. */
    for (size_t byte = 0; byte < 200; byte += 37) {
        flip_boilerplate_record(path, byte);
        s = NULL;
        assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_ECORRUPT);
        assert_null(s);
        assert_non_null(strstr(simstore_last_error(), "boilerplate record"));
        simstore_verify_summary sum;
        assert_int_equal(simstore_verify(path, 0, NULL, NULL, &sum), SIMSTORE_ECORRUPT);
        assert_true(sum.errors >= 1);
        flip_boilerplate_record(path, byte); /* back */
        assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
        simstore_close(s);
    }
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, NULL), 0);
    simstore_fingerprinter_free(fpr);
    simstore_boilerplate_free(sc->set);
    free(sc);
    test_rmtree(dir);
    free(plain_path);
    free(path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boilerplate_counter__exact_against_brute_force),
        cmocka_unit_test(test_boilerplate_counter__api_errors),
        cmocka_unit_test(test_boilerplate_corpus__templates_found_and_removed),
        cmocka_unit_test(test_boilerplate_store__recorded_and_applied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
