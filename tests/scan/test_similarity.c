/* test_similarity.c: estimated similarities through a store that keeps
 * sketches (format/sketch.md): single and batch queries, pairs and clusters
 * with and without a minimum similarity, against brute force over the
 * sketches the test stored (every estimate through the one public
 * simstore_sketch_similarity, so they compare exactly); stores of two
 * segments with deleted documents; pairs and clusters at distances above
 * the store's design; documents sharing a fingerprint with
 * different sketches; the rule's band candidates (format/sketch.md 6.2)
 * on grouped, far, duplicate-heavy and random corpora, before and after a
 * compaction; stores without sketches answering "unknown"; the builder's
 * rules; and damaged sketch bytes in a document record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lmdb.h>

#include "lmdb/records.h"
#include "simstore.h"
#include "testutil.h"

#define KIND SIMSTORE_SKETCH_MINHASH64
#define SKETCH_BYTES 64
#define K 6

typedef struct sdoc {
    char id[24];
    uint64_t fp;
    uint8_t sketch[SKETCH_BYTES];
    uint64_t rank; /* insertion number: (commit << 40) | position */
    int deleted;
} sdoc;

typedef struct corpus {
    sdoc *docs;
    size_t n;
} corpus;

static uint64_t flip_bits(test_rng *r, uint64_t fp, unsigned bits)
{
    for (unsigned i = 0; i < bits; i++)
        fp ^= UINT64_C(1) << test_rng_below(r, 64);
    return fp;
}

/* Groups of near-duplicates: fingerprints within a few bits of the group's
 * (some equal), sketches a random number of bits from the group's (0 up to
 * about 200 of 512: similarities from 1 down to about 0.25). */
static corpus make_corpus(test_rng *r, size_t n)
{
    corpus c = {calloc(n, sizeof(sdoc)), n};
    assert_non_null(c.docs);
    uint64_t base_fp = 0;
    uint8_t base_sketch[SKETCH_BYTES];
    for (size_t i = 0; i < n; i++) {
        sdoc *d = &c.docs[i];
        if (i % 12 == 0) {
            base_fp = test_rng_next(r);
            for (size_t b = 0; b < SKETCH_BYTES; b++)
                base_sketch[b] = (uint8_t)test_rng_next(r);
        }
        unsigned bits = (unsigned)test_rng_below(r, K + 3);
        d->fp = i % 6 == 5 ? c.docs[i - 1].fp : flip_bits(r, base_fp, bits);
        memcpy(d->sketch, base_sketch, SKETCH_BYTES);
        unsigned flips = (unsigned)test_rng_below(r, 4) == 0 ? 0 : (unsigned)test_rng_below(r, 200);
        for (unsigned f = 0; f < flips; f++) {
            unsigned bit = (unsigned)test_rng_below(r, SKETCH_BYTES * 8);
            d->sketch[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        snprintf(d->id, sizeof d->id, "d%04zu", (i * 7919) % n);
    }
    return c;
}

static double sim(const sdoc *a, const sdoc *b)
{
    return simstore_sketch_similarity(KIND, a->sketch, b->sketch);
}

/* The rule a second time (format/sketch.md 6.2): candidates within k or,
 * with bands (g_bands, for a minimum of 0.5 or more), sketches agreeing on
 * one band of simstore_sketch_bands()' shape, the band's bits read one by
 * one here; then a similarity of at least j (0: none asked). */
static int g_bands = 1;

static int sketch_bit(const uint8_t *s, size_t bit)
{
    return (s[bit / 8] >> (bit % 8)) & 1;
}

static int share_band(const uint8_t *a, const uint8_t *b, double j)
{
    static double shape_of = -1;
    static unsigned rows, count;
    if (j != shape_of) {
        simstore_sketch_bands(KIND, j, &rows, &count);
        shape_of = j;
    }
    for (unsigned band = 0; band < count; band++) {
        unsigned same = 0;
        while (same < rows && sketch_bit(a, (size_t)band * rows + same) ==
                                  sketch_bit(b, (size_t)band * rows + same))
            same++;
        if (same == rows)
            return 1;
    }
    return 0;
}

static int near_docs(const sdoc *a, const sdoc *b, unsigned k, double j)
{
    int candidate = simstore_distance(a->fp, b->fp) <= k ||
                    (g_bands && j >= 0.5 && share_band(a->sketch, b->sketch, j));
    return candidate && (j <= 0 || sim(a, b) >= j);
}

static simstore_build_options build_options(simstore_text_options *text, simstore_sketch_kind kind)
{
    simstore_text_options_init(text);
    text->sketch = kind;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = K;
    o.memory_bytes = 16u << 20;
    o.threads = 2;
    o.text = text;
    return o;
}

static void add_docs(simstore_builder *b, corpus *c, size_t from, size_t to, uint64_t commit)
{
    for (size_t i = from; i < to; i++) {
        simstore_doc d = {c->docs[i].id, strlen(c->docs[i].id), c->docs[i].fp, NULL, 0, i};
        d.sketch = c->docs[i].sketch;
        assert_int_equal(simstore_builder_add(b, &d), 0);
        c->docs[i].rank = (commit << 40) | (i - from);
    }
}

/* Two segments (a build and an add) of a store built for k, then every
 * 7th document deleted. */
static simstore *make_store_k(const char *path, corpus *c, unsigned k)
{
    simstore_text_options topts;
    simstore_build_options o = build_options(&topts, KIND);
    o.k = k;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    add_docs(b, c, 0, c->n / 2, 1);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    /* An add takes the store's kind, whatever its options say. */
    simstore_build_options plain;
    simstore_build_options_init(&plain);
    plain.memory_bytes = 16u << 20;
    assert_int_equal(simstore_add_begin(s, &plain, &b), 0);
    add_docs(b, c, c->n / 2, c->n, 2);
    assert_int_equal(simstore_builder_finish(b), 0);
    const char *ids[64];
    size_t lens[64], nd = 0;
    for (size_t i = 3; i < c->n && nd < 64; i += 7) {
        ids[nd] = c->docs[i].id;
        lens[nd++] = strlen(c->docs[i].id);
        c->docs[i].deleted = 1;
    }
    assert_int_equal(simstore_delete(s, ids, lens, nd, NULL, NULL, NULL), 0);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.sketch, KIND);
    assert_int_equal(st.sketch_bytes, SKETCH_BYTES);
    return s;
}

static simstore *make_store(const char *path, corpus *c)
{
    return make_store_k(path, c, K);
}

static const sdoc *find_doc(const corpus *c, const char *id, size_t len)
{
    for (size_t i = 0; i < c->n; i++)
        if (strlen(c->docs[i].id) == len && memcmp(c->docs[i].id, id, len) == 0)
            return &c->docs[i];
    fail_msg("no document '%.*s'", (int)len, id);
    return NULL;
}

/* ---- text of answers ----------------------------------------------------------- */

typedef test_text text;

static void text_equal(const text *a, const text *b, const char *what)
{
    if (!test_text_same(a, b, what))
        fail();
}

/* ---- queries --------------------------------------------------------------------- */

static void test_similarity_query__brute_force(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity query", 1301);
    corpus c = make_corpus(&r, 240);
    char *tmp = test_tmpdir("sim-query");
    char *path = test_path(tmp, "s");
    simstore *s = make_store(path, &c);
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    for (size_t i = 0; i < c.n; i += 3) {
        const sdoc *qd = &c.docs[i];
        const simstore_match *m;
        size_t n, want = 0;
        for (size_t j = 0; j < c.n; j++)
            want += !c.docs[j].deleted && simstore_distance(c.docs[j].fp, qd->fp) <= K;
        assert_int_equal(simstore_query_fp_sketch(q, qd->fp, qd->sketch, K, &m, &n), 0);
        assert_int_equal(n, want);
        for (size_t j = 0; j < n; j++) {
            const sdoc *d = find_doc(&c, m[j].id, m[j].id_len);
            assert_non_null(m[j].sketch);
            assert_memory_equal(m[j].sketch, d->sketch, SKETCH_BYTES);
            assert_true(m[j].similarity == sim(qd, d));
            if (d == qd)
                assert_true(m[j].similarity == 1.0);
        }
        /* By fingerprint: the same matches, similarity unknown, the
         * documents' sketches still there. */
        assert_int_equal(simstore_query_fp(q, qd->fp, K, &m, &n), 0);
        assert_int_equal(n, want);
        for (size_t j = 0; j < n; j++) {
            assert_true(m[j].similarity == SIMSTORE_SIMILARITY_UNKNOWN);
            assert_non_null(m[j].sketch);
        }
    }
    simstore_query_free(q);
    simstore_close(s);
    test_rmtree(tmp);
    free(tmp);
    free(path);
    free(c.docs);
}

typedef struct batch_ctx {
    text *t;
} batch_ctx;

static void match_lines(text *t, size_t index, const simstore_match *m, size_t n)
{
    for (size_t j = 0; j < n; j++)
        test_text_add(t, "%zu\t%s\t%u\t%.17g\n", index, m[j].id, m[j].distance, m[j].similarity);
}

static int batch_line(void *ctx, size_t index, uint64_t fp, const simstore_match *m, size_t n)
{
    (void)fp;
    match_lines(((batch_ctx *)ctx)->t, index, m, n);
    return 0;
}

/* A batch with sketches answers as the queries one by one, similarities
 * included; without them, every similarity is unknown. */
static void test_similarity_batch__as_single_queries(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity batch", 1302);
    corpus c = make_corpus(&r, 240);
    char *tmp = test_tmpdir("sim-batch");
    char *path = test_path(tmp, "s");
    simstore *s = make_store(path, &c);
    uint64_t *fps = malloc(c.n * sizeof *fps);
    uint8_t *sketches = malloc(c.n * SKETCH_BYTES);
    for (size_t i = 0; i < c.n; i++) {
        fps[i] = c.docs[i].fp;
        memcpy(sketches + i * SKETCH_BYTES, c.docs[i].sketch, SKETCH_BYTES);
    }
    text want = {0}, unknown = {0};
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    for (size_t i = 0; i < c.n; i++) {
        const simstore_match *m;
        size_t n;
        assert_int_equal(
            simstore_query_fp_sketch(q, fps[i], sketches + i * SKETCH_BYTES, K, &m, &n), 0);
        match_lines(&want, i, m, n);
        assert_int_equal(simstore_query_fp(q, fps[i], K, &m, &n), 0);
        match_lines(&unknown, i, m, n);
    }
    simstore_query_free(q);
    for (int strategy = SIMSTORE_BATCH_AUTO; strategy <= SIMSTORE_BATCH_SCAN; strategy++) {
        simstore_batch_options o;
        simstore_batch_options_init(&o);
        o.threads = 2;
        o.strategy = (simstore_batch_strategy)strategy;
        text got = {0}, got_unknown = {0};
        batch_ctx ctx = {&got};
        assert_int_equal(
            simstore_query_batch_sketches(s, fps, sketches, c.n, K, &o, batch_line, &ctx), 0);
        text_equal(&got, &want, "batch with sketches");
        ctx.t = &got_unknown;
        assert_int_equal(simstore_query_batch(s, fps, c.n, K, &o, batch_line, &ctx), 0);
        text_equal(&got_unknown, &unknown, "batch without sketches");
        free(got.buf);
        free(got_unknown.buf);
    }
    free(want.buf);
    free(unknown.buf);
    free(fps);
    free(sketches);
    simstore_close(s);
    test_rmtree(tmp);
    free(tmp);
    free(path);
    free(c.docs);
}

/* ---- pairs ----------------------------------------------------------------------- */

static int pair_line(void *ctx, const simstore_pair *p)
{
    test_text_add((text *)ctx, "%u\t%s\t%s\t%.17g\n", p->distance, p->id_a, p->id_b, p->similarity);
    return 0;
}

typedef struct bpair {
    const sdoc *a, *b;
    unsigned d;
} bpair;

static int cmp_bpair(const void *x, const void *y)
{
    const bpair *p = (const bpair *)x, *q = (const bpair *)y;
    if (p->d != q->d)
        return p->d < q->d ? -1 : 1;
    int c = strcmp(p->a->id, q->a->id);
    return c ? c : strcmp(p->b->id, q->b->id);
}

/* Live pairs by the rule (near_docs: within k or sharing a band, with a
 * similarity of at least j; 0: all within k). */
static text brute_pairs(const corpus *c, unsigned k, double j)
{
    bpair *v = malloc(c->n * c->n / 2 * sizeof *v + sizeof *v);
    size_t n = 0;
    for (size_t x = 0; x < c->n; x++)
        for (size_t y = x + 1; y < c->n; y++) {
            const sdoc *a = &c->docs[x], *b = &c->docs[y];
            unsigned d = simstore_distance(a->fp, b->fp);
            if (a->deleted || b->deleted || !near_docs(a, b, k, j))
                continue;
            if (strcmp(a->id, b->id) > 0) {
                const sdoc *t = a;
                a = b;
                b = t;
            }
            v[n++] = (bpair){a, b, d};
        }
    qsort(v, n, sizeof *v, cmp_bpair);
    text t = {0};
    for (size_t i = 0; i < n; i++)
        test_text_add(&t, "%u\t%s\t%s\t%.17g\n", v[i].d, v[i].a->id, v[i].b->id,
                      sim(v[i].a, v[i].b));
    free(v);
    return t;
}

static void test_similarity_pairs__min_similarity(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity pairs", 1303);
    corpus c = make_corpus(&r, 300);
    char *tmp = test_tmpdir("sim-pairs");
    char *path = test_path(tmp, "s");
    simstore *s = make_store(path, &c);
    static const double minimums[] = {0, 0.5, 0.8, 0.9, 0.953125, 1};
    for (size_t i = 0; i < sizeof minimums / sizeof minimums[0]; i++) {
        for (unsigned k = 3; k <= K; k += 3) {
            simstore_scan_options o;
            simstore_scan_options_init(&o);
            o.k = k;
            o.threads = 1 + (unsigned)(i % 2);
            o.memory_bytes = 16u << 20;
            o.min_similarity = minimums[i];
            text got = {0};
            assert_int_equal(simstore_pairs(s, &o, 0, pair_line, &got), 0);
            text want = brute_pairs(&c, k, minimums[i]);
            char what[64];
            snprintf(what, sizeof what, "pairs at k %u, minimum %g", k, minimums[i]);
            text_equal(&got, &want, what);
            if (minimums[i] == 0.8)
                assert_true(got.len > 0);
            free(got.buf);
            free(want.buf);
        }
    }
    simstore_close(s);
    test_rmtree(tmp);
    free(tmp);
    free(path);
    free(c.docs);
}

/* ---- clusters ---------------------------------------------------------------------- */

static int member_line(void *ctx, const simstore_cluster_member *m)
{
    test_text_add((text *)ctx, "%s\t%s\t%d\t%u\t%.17g\n", m->cluster, m->id, m->kept, m->distance,
                  m->similarity);
    return 0;
}

static const corpus *g_corpus;

static int keeps_before(const sdoc *a, const sdoc *b)
{
    return a->rank != b->rank ? a->rank < b->rank : strcmp(a->id, b->id) < 0;
}

static int by_keep(const void *x, const void *y)
{
    const sdoc *a = &g_corpus->docs[*(const size_t *)x], *b = &g_corpus->docs[*(const size_t *)y];
    return keeps_before(a, b) ? -1 : keeps_before(b, a) ? 1 : 0;
}

static size_t *g_cluster;

/* Members by (kept document's id, kept first, id). */
static int by_member(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    const sdoc *d = g_corpus->docs;
    int c = strcmp(d[g_cluster[a]].id, d[g_cluster[b]].id);
    if (c)
        return c;
    int ka = g_cluster[a] == a, kb = g_cluster[b] == b;
    if (ka != kb)
        return ka ? -1 : 1;
    return strcmp(d[a].id, d[b].id);
}

static size_t root(size_t *parent, size_t x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

/* The clusters over live documents, an edge for each pair of the rule
 * (near_docs); kept: first inserted. */
static text brute_clusters(const corpus *c, unsigned k, double j, int star, int singletons)
{
    size_t n = c->n;
    size_t *cluster = malloc(n * sizeof *cluster), *order = malloc(n * sizeof *order);
    size_t *size = calloc(n, sizeof *size);
    int *near = calloc(n * n, sizeof *near);
    for (size_t x = 0; x < n; x++)
        for (size_t y = 0; y < n; y++)
            near[x * n + y] = x != y && !c->docs[x].deleted && !c->docs[y].deleted &&
                              near_docs(&c->docs[x], &c->docs[y], k, j);
    size_t live = 0;
    for (size_t x = 0; x < n; x++)
        if (!c->docs[x].deleted)
            order[live++] = x;
    g_corpus = c;
    qsort(order, live, sizeof *order, by_keep);
    if (star) {
        for (size_t x = 0; x < n; x++)
            cluster[x] = SIZE_MAX;
        for (size_t i = 0; i < live; i++) {
            size_t centre = order[i];
            if (cluster[centre] != SIZE_MAX)
                continue;
            cluster[centre] = centre;
            for (size_t y = 0; y < n; y++)
                if (near[centre * n + y] && cluster[y] == SIZE_MAX)
                    cluster[y] = centre;
        }
    } else {
        size_t *parent = malloc(n * sizeof *parent), *kept = malloc(n * sizeof *kept);
        for (size_t x = 0; x < n; x++) {
            parent[x] = x;
            kept[x] = SIZE_MAX;
        }
        for (size_t x = 0; x < n; x++)
            for (size_t y = x + 1; y < n; y++)
                if (near[x * n + y])
                    parent[root(parent, y)] = root(parent, x);
        /* In keep order, the first member of each component is kept. */
        for (size_t i = 0; i < live; i++) {
            size_t x = order[i], rt = root(parent, x);
            if (kept[rt] == SIZE_MAX)
                kept[rt] = x;
            cluster[x] = kept[rt];
        }
        free(parent);
        free(kept);
    }
    for (size_t i = 0; i < live; i++)
        size[cluster[order[i]]]++;
    size_t m = 0;
    for (size_t i = 0; i < live; i++)
        if (singletons || size[cluster[order[i]]] > 1)
            order[m++] = order[i];
    g_cluster = cluster;
    qsort(order, m, sizeof *order, by_member);
    text t = {0};
    for (size_t i = 0; i < m; i++) {
        const sdoc *d = &c->docs[order[i]], *kd = &c->docs[cluster[order[i]]];
        test_text_add(&t, "%s\t%s\t%d\t%u\t%.17g\n", kd->id, d->id, kd == d,
                      simstore_distance(d->fp, kd->fp), sim(d, kd));
    }
    free(cluster);
    free(order);
    free(size);
    free(near);
    return t;
}

static void test_similarity_clusters__min_similarity(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity clusters", 1304);
    corpus c = make_corpus(&r, 240);
    char *tmp = test_tmpdir("sim-clusters");
    char *path = test_path(tmp, "s");
    simstore *s = make_store(path, &c);
    static const double minimums[] = {0.5, 0.8, 0.9, 1};
    for (size_t i = 0; i < sizeof minimums / sizeof minimums[0]; i++)
        for (int star = 0; star <= 1; star++)
            for (int singletons = 0; singletons <= 1; singletons++) {
                simstore_cluster_options o;
                simstore_cluster_options_init(&o);
                o.scan.k = K;
                o.scan.threads = 2;
                o.scan.memory_bytes = 16u << 20;
                o.scan.min_similarity = minimums[i];
                o.mode = star ? SIMSTORE_CLUSTER_STAR : SIMSTORE_CLUSTER_COMPONENTS;
                o.singletons = singletons;
                text got = {0};
                simstore_cluster_summary sum;
                assert_int_equal(simstore_clusters(s, &o, member_line, &got, &sum), 0);
                text want = brute_clusters(&c, K, minimums[i], star, singletons);
                char what[96];
                snprintf(what, sizeof what, "clusters (%s%s), minimum %g",
                         star ? "star" : "components", singletons ? ", singletons" : "",
                         minimums[i]);
                text_equal(&got, &want, what);
                free(got.buf);
                free(want.buf);
            }
    /* Without a minimum, documents sharing a fingerprint stay together and
     * each member carries its similarity to the kept one. */
    simstore_cluster_options o;
    simstore_cluster_options_init(&o);
    o.scan.k = 0;
    o.scan.threads = 1;
    text got = {0};
    assert_int_equal(simstore_clusters(s, &o, member_line, &got, NULL), 0);
    assert_true(got.len > 0);
    char *line = got.buf;
    while (line && *line) {
        char kept[24], id[24];
        int is_kept;
        unsigned d;
        double v;
        assert_int_equal(sscanf(line, "%23s\t%23s\t%d\t%u\t%lf", kept, id, &is_kept, &d, &v), 5);
        assert_int_equal(d, 0);
        assert_true(v == sim(find_doc(&c, kept, strlen(kept)), find_doc(&c, id, strlen(id))));
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    free(got.buf);
    simstore_close(s);
    test_rmtree(tmp);
    free(tmp);
    free(path);
    free(c.docs);
}

/* A store built for k = 2 asked for 3..K (a join in memory): pairs and
 * clusters with a minimum similarity equal the brute force and a store
 * built for K. */
static void test_similarity_scan__above_design(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity above design", 1305);
    corpus c = make_corpus(&r, 240);
    char *tmp = test_tmpdir("sim-above");
    char *low_path = test_path(tmp, "k2"), *high_path = test_path(tmp, "k6");
    simstore *low = make_store_k(low_path, &c, 2), *high = make_store(high_path, &c);
    static const double minimums[] = {0, 0.8};
    for (size_t i = 0; i < 2; i++) {
        for (unsigned k = 3; k <= K; k++) {
            simstore_scan_options o;
            simstore_scan_options_init(&o);
            o.k = k;
            o.threads = 2;
            o.memory_bytes = 16u << 20;
            o.min_similarity = minimums[i];
            text got = {0}, ref = {0};
            assert_int_equal(simstore_pairs(low, &o, 0, pair_line, &got), 0);
            assert_int_equal(simstore_pairs(high, &o, 0, pair_line, &ref), 0);
            text want = brute_pairs(&c, k, minimums[i]);
            char what[64];
            snprintf(what, sizeof what, "pairs at k %u above 2, minimum %g", k, minimums[i]);
            text_equal(&ref, &want, "pairs of a store built for K");
            text_equal(&got, &want, what);
            assert_true(got.len > 0);
            free(got.buf);
            free(ref.buf);
            free(want.buf);
        }
        for (int star = 0; star <= 1; star++) {
            simstore_cluster_options o;
            simstore_cluster_options_init(&o);
            o.scan.k = K;
            o.scan.threads = 1 + (unsigned)star;
            o.scan.memory_bytes = 16u << 20;
            o.scan.min_similarity = minimums[i];
            o.mode = star ? SIMSTORE_CLUSTER_STAR : SIMSTORE_CLUSTER_COMPONENTS;
            text got = {0}, ref = {0};
            simstore_cluster_summary s1, s2;
            assert_int_equal(simstore_clusters(low, &o, member_line, &got, &s1), 0);
            assert_int_equal(simstore_clusters(high, &o, member_line, &ref, &s2), 0);
            text want = brute_clusters(&c, K, minimums[i], star, 0);
            text_equal(&ref, &want, "clusters of a store built for K");
            text_equal(&got, &want, "clusters above the design");
            assert_memory_equal(&s1, &s2, sizeof s1);
            free(got.buf);
            free(ref.buf);
            free(want.buf);
        }
    }
    simstore_close(low);
    simstore_close(high);
    test_rmtree(tmp);
    free(tmp);
    free(low_path);
    free(high_path);
    free(c.docs);
}

/* ---- bands (format/sketch.md 6.2) ---------------------------------------------- */

/* Documents whose sketches are close and fingerprints far: copies of a few
 * sketches with a few bits changed (or none: duplicate-heavy) under random
 * fingerprints, beside random documents (adversarial for the join: nothing
 * within k) . */
static corpus make_far_corpus(test_rng *r, size_t n, unsigned max_flips)
{
    corpus c = {calloc(n, sizeof(sdoc)), n};
    assert_non_null(c.docs);
    uint8_t base[SKETCH_BYTES];
    for (size_t i = 0; i < n; i++) {
        sdoc *d = &c.docs[i];
        d->fp = test_rng_next(r);
        if (i % 10 == 0)
            for (size_t b = 0; b < SKETCH_BYTES; b++)
                base[b] = (uint8_t)test_rng_next(r);
        memcpy(d->sketch, base, SKETCH_BYTES);
        unsigned flips = max_flips ? (unsigned)test_rng_below(r, max_flips + 1) : 0;
        if (i % 10 == 9) /* a random document */
            for (size_t b = 0; b < SKETCH_BYTES; b++)
                d->sketch[b] = (uint8_t)test_rng_next(r);
        for (unsigned f = 0; f < flips; f++) {
            unsigned bit = (unsigned)test_rng_below(r, SKETCH_BYTES * 8);
            d->sketch[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        }
        snprintf(d->id, sizeof d->id, "f%04zu", (i * 7919) % n);
    }
    return c;
}

/* Whether some line of a pairs text is more than k bits apart. */
static int has_pair_beyond(const text *t, unsigned k)
{
    for (const char *line = t->buf; line && *line;) {
        if ((unsigned)strtoul(line, NULL, 10) > k)
            return 1;
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return 0;
}

/* Pairs and clusters with bands equal the brute force of the rule for
 * thresholds 0.5..0.95, bands on and off, on one and two threads, on
 * grouped, far (close sketches, random fingerprints), duplicate-heavy
 * and random corpora; the same after the store is compacted. */
static void test_similarity_bands__brute_force(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity bands", 1311);
    static const double minimums[] = {0.5, 0.6, 0.7, 0.8, 0.9, 0.95};
    for (int kind = 0; kind < 3; kind++) {
        corpus c = kind == 0   ? make_corpus(&r, 240)
                   : kind == 1 ? make_far_corpus(&r, 200, 40)
                               : make_far_corpus(&r, 120, 0); /* duplicate-heavy */
        char *tmp = test_tmpdir("sim-bands");
        char *path = test_path(tmp, "s");
        simstore *s = make_store(path, &c);
        int beyond = 0;
        for (int compacted = 0; compacted <= 1; compacted++) {
            if (compacted)
                assert_int_equal(simstore_compact(s, NULL), 0);
            for (size_t i = 0; i < sizeof minimums / sizeof minimums[0]; i++)
                for (int bands = 0; bands <= 1; bands++) {
                    /* Sampled (the sanitizer pass): bands on, every other
                     * threshold. */
                    if (test_sampled() && (!bands || i % 2))
                        continue;
                    g_bands = bands;
                    text want = brute_pairs(&c, 3, minimums[i]);
                    text want_clusters = brute_clusters(&c, 3, minimums[i], 0, 0);
                    beyond |= has_pair_beyond(&want, 3);
                    for (unsigned threads = 1; threads <= 2; threads++) {
                        simstore_scan_options o;
                        simstore_scan_options_init(&o);
                        o.k = 3;
                        o.threads = threads;
                        o.memory_bytes = 16u << 20;
                        o.min_similarity = minimums[i];
                        o.bands = bands;
                        text got = {0};
                        assert_int_equal(simstore_pairs(s, &o, 0, pair_line, &got), 0);
                        char what[96];
                        snprintf(what, sizeof what, "corpus %d pairs at %g, bands %d, %u threads%s",
                                 kind, minimums[i], bands, threads, compacted ? ", compacted" : "");
                        text_equal(&got, &want, what);
                        free(got.buf);
                        simstore_cluster_options co;
                        simstore_cluster_options_init(&co);
                        co.scan = o;
                        got = (text){0};
                        assert_int_equal(simstore_clusters(s, &co, member_line, &got, NULL), 0);
                        text_equal(&got, &want_clusters, what);
                        free(got.buf);
                    }
                    free(want.buf);
                    free(want_clusters.buf);
                }
        }
        g_bands = 1;
        assert_true(beyond); /* bands found pairs the join within k cannot */
        simstore_close(s);
        test_rmtree(tmp);
        free(tmp);
        free(path);
        free(c.docs);
    }
}

/* The band shapes of format/sketch.md 6.2's table, and the rule's parts. */
static void test_similarity_bands__shape_and_rule(void **state)
{
    (void)state;
    static const struct {
        double t;
        unsigned rows, count;
    } table[] = {{0.5, 12, 144}, {0.6, 15, 129}, {0.7, 19, 99}, {0.75, 22, 85},
                 {0.8, 26, 69},  {0.85, 32, 54}, {0.9, 32, 22}, {0.95, 32, 8}};
    const simstore_sketch_kind SK = SIMSTORE_SKETCH_MINHASH256;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        unsigned rows = 0, count = 0;
        simstore_sketch_bands(SK, table[i].t, &rows, &count);
        assert_int_equal(rows, table[i].rows);
        assert_int_equal(count, table[i].count);
        assert_true(rows * count <= 2048);
    }
    unsigned rows = 1, count = 1;
    simstore_sketch_bands(SK, 0.49, &rows, &count);
    assert_true(rows == 0 && count == 0);
    simstore_sketch_bands(SIMSTORE_SKETCH_NONE, 0.9, &rows, &count);
    assert_true(rows == 0 && count == 0);
    simstore_sketch_bands(SIMSTORE_SKETCH_MINHASH16, 0.9, &rows, &count);
    assert_true(rows > 0 && rows * count <= 128);
    /* Resolved: on by default from 0.5, off below, off without bands. */
    simstore_near_rule rule;
    simstore_near_rule_init(&rule);
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, 0), SIMSTORE_OK);
    assert_true(rule.bands == 1 && rule.band_rows == 32 && rule.band_count == 22);
    simstore_near_rule_init(&rule);
    rule.min_similarity = 0.3;
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, 0), SIMSTORE_OK);
    assert_true(rule.bands == 0 && rule.band_count == 0);
    rule.bands = 1; /* asked below 0.5: refused */
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, 0), SIMSTORE_EINVAL);
    simstore_near_rule_init(&rule);
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, SIMSTORE_NEAR_WITHOUT_BANDS),
                     SIMSTORE_OK);
    assert_true(rule.bands == 0 && rule.band_count == 0);
    rule.bands = 1;
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, SIMSTORE_NEAR_WITHOUT_BANDS),
                     SIMSTORE_EINVAL);
    simstore_near_rule_init(&rule);
    rule.bands = 2;
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, 0), SIMSTORE_EINVAL);
    /* The answer: identical sketches 20 bits apart are near with bands. */
    uint8_t a[256], b[256];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = b[i] = (uint8_t)(i * 37);
    simstore_near_rule_init(&rule);
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, 0), SIMSTORE_OK);
    double j = 0;
    assert_true(simstore_near_duplicate_sketches(&rule, SK, 20, a, b, &j));
    assert_true(j == 1.0);
    assert_false(simstore_near_duplicate_sketches(&rule, SK, 20, a, NULL, &j));
    for (size_t band = 0; band < 22; band++) /* one bit off in every band */
        b[band * 32 / 8] ^= 1;
    assert_false(simstore_near_duplicate_sketches(&rule, SK, 20, a, b, &j));
    assert_true(simstore_near_duplicate_sketches(&rule, SK, 3, a, b, &j)); /* within k */
    rule.bands = 0;
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SK, 0), SIMSTORE_OK);
    memcpy(b, a, sizeof b);
    assert_false(simstore_near_duplicate_sketches(&rule, SK, 20, a, b, &j));
}

/* ---- stores without sketches, and the rules -------------------------------------- */

static int count_pair(void *ctx, const simstore_pair *p)
{
    assert_true(p->similarity == SIMSTORE_SIMILARITY_UNKNOWN);
    (*(size_t *)ctx)++;
    return 0;
}

static int unknown_member(void *ctx, const simstore_cluster_member *m)
{
    (void)ctx;
    assert_true(m->similarity == SIMSTORE_SIMILARITY_UNKNOWN);
    return 0;
}

static void test_similarity_options__stores_without_sketches(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity without", 1305);
    corpus c = make_corpus(&r, 60);
    char *tmp = test_tmpdir("sim-none");
    char *path = test_path(tmp, "s");
    simstore_text_options topts;
    simstore_build_options o = build_options(&topts, SIMSTORE_SKETCH_NONE);
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    /* A store without sketches takes none. */
    simstore_doc d0 = {c.docs[0].id, strlen(c.docs[0].id), c.docs[0].fp, NULL, 0, 0};
    d0.sketch = c.docs[0].sketch;
    assert_int_equal(simstore_builder_add(b, &d0), SIMSTORE_EINVAL);
    for (size_t i = 0; i < c.n; i++) {
        simstore_doc d = {c.docs[i].id, strlen(c.docs[i].id), c.docs[i].fp, NULL, 0, i};
        assert_int_equal(simstore_builder_add(b, &d), 0);
    }
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.sketch, SIMSTORE_SKETCH_NONE);
    assert_int_equal(st.sketch_bytes, 0);
    simstore_text_options got_text;
    simstore_get_text_options(s, &got_text);
    assert_int_equal(got_text.sketch, SIMSTORE_SKETCH_NONE);
    /* A query with a sketch: unknown similarities, no documents' sketches. */
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    const simstore_match *m;
    size_t n;
    assert_int_equal(simstore_query_fp_sketch(q, c.docs[0].fp, c.docs[0].sketch, K, &m, &n), 0);
    assert_true(n >= 1);
    for (size_t i = 0; i < n; i++) {
        assert_true(m[i].similarity == SIMSTORE_SIMILARITY_UNKNOWN);
        assert_null(m[i].sketch);
    }
    /* A text query with a sketching fingerprinter: unknown too. */
    simstore_text_options fo;
    simstore_text_options_init(&fo);
    fo.sketch = KIND;
    simstore_fingerprinter *fpr;
    assert_int_equal(simstore_fingerprinter_new(&fo, &fpr), 0);
    assert_int_equal(simstore_query_text(q, fpr, "some words here", 15, K, NULL, &m, &n), 0);
    for (size_t i = 0; i < n; i++)
        assert_true(m[i].similarity == SIMSTORE_SIMILARITY_UNKNOWN);
    simstore_fingerprinter_free(fpr);
    simstore_query_free(q);
    /* Pairs and clusters: unknown similarities; a minimum is refused. */
    simstore_scan_options so;
    simstore_scan_options_init(&so);
    so.memory_bytes = 16u << 20;
    unsigned rk = 0;
    double rj = -2;
    assert_int_equal(simstore_scan_resolve(s, &so, &rk, &rj), 0);
    assert_int_equal(rk, K); /* the defaults: the store's k, no filter */
    assert_true(rj == 0);
    size_t pairs = 0;
    assert_int_equal(simstore_pairs(s, &so, 0, count_pair, &pairs), 0);
    assert_true(pairs > 0);
    simstore_cluster_options co;
    simstore_cluster_options_init(&co);
    co.singletons = 1;
    assert_int_equal(simstore_clusters(s, &co, unknown_member, NULL, NULL), 0);
    so.min_similarity = 0.5;
    assert_int_equal(simstore_pairs(s, &so, 0, count_pair, &pairs), SIMSTORE_EINVAL);
    co.scan.min_similarity = 0.5;
    assert_int_equal(simstore_clusters(s, &co, unknown_member, NULL, NULL), SIMSTORE_EINVAL);
    simstore_close(s);

    /* The minimum's range, pairs by fingerprint, a join of an array. */
    char *path2 = test_path(tmp, "s2");
    corpus c2 = make_corpus(&r, 30);
    simstore *s2 = make_store(path2, &c2);
    simstore_scan_options_init(&so);
    static const double bad[] = {-0.5, 1.5, 0.0 / 0.0};
    for (size_t i = 0; i < 3; i++) {
        so.min_similarity = bad[i];
        assert_int_equal(simstore_pairs(s2, &so, 0, count_pair, &pairs), SIMSTORE_EINVAL);
    }
    so.min_similarity = 0.9;
    assert_int_equal(simstore_pairs(s2, &so, SIMSTORE_PAIRS_BY_FINGERPRINT, count_pair, &pairs),
                     SIMSTORE_EINVAL);
    uint64_t fps[3] = {1, 3, 7};
    assert_int_equal(simstore_join_fingerprints(fps, 3, 2, &so, NULL, NULL), SIMSTORE_EINVAL);
    simstore_close(s2);

    /* The builder's rules: every document of a sketch store has one, and
     * a fingerprint-only store has none. */
    char *path3 = test_path(tmp, "s3");
    o = build_options(&topts, KIND);
    assert_int_equal(simstore_build_begin(path3, &o, &b), 0);
    d0.sketch = NULL; /* a store that keeps sketches takes no document without one */
    assert_int_equal(simstore_builder_add(b, &d0), SIMSTORE_EINVAL);
    d0.sketch = c.docs[0].sketch;
    assert_int_equal(simstore_builder_add(b, &d0), 0);
    simstore_builder_abort(b);
    o.fingerprint_only = 1;
    assert_int_equal(simstore_build_begin(path3, &o, &b), SIMSTORE_EINVAL);
    topts.sketch = (simstore_sketch_kind)9;
    o.fingerprint_only = 0;
    assert_int_equal(simstore_build_begin(path3, &o, &b), SIMSTORE_EINVAL);
    test_rmtree(tmp);
    free(tmp);
    free(path);
    free(path2);
    free(path3);
    free(c.docs);
    free(c2.docs);
}

/* ---- texts, end to end --------------------------------------------------------------- */

/* The near-duplicate rule alone (simstore.h, "The near-duplicate rule"):
 * its defaults from the store's facts, its refusals, its answer. */
static simstore_near_rule rule_of(unsigned k, double j)
{
    simstore_near_rule r;
    simstore_near_rule_init(&r);
    r.k = k;
    r.min_similarity = j;
    return r;
}

static void test_similarity_rule__defaults_and_answer(void **state)
{
    (void)state;
    const unsigned DK = SIMSTORE_NEAR_DEFAULT_K;
    const double DJ = SIMSTORE_NEAR_DEFAULT_SIMILARITY;
    const simstore_sketch_kind SK = SIMSTORE_SKETCH_MINHASH256, NONE = SIMSTORE_SKETCH_NONE;
    simstore_near_rule r = rule_of(DK, DJ);
    /* With bands (the default): the store's k at 0.9 or more. */
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_int_equal(r.k, 3);
    assert_true(r.bands == 1);
    assert_true(r.min_similarity == SIMSTORE_NEAR_SIMILARITY);
    assert_true(r.min_fraction == SIMSTORE_NEAR_FRACTION);
    /* Without them: within 7 at 0.9 or more; an unknown similarity is
     * below it. */
    r = rule_of(DK, DJ);
    r.bands = 0;
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_int_equal(r.k, SIMSTORE_NEAR_K);
    assert_true(simstore_near_duplicate(&r, 7, 0.9));
    assert_false(simstore_near_duplicate(&r, 8, 1.0));
    assert_false(simstore_near_duplicate(&r, 0, 0.89));
    assert_false(simstore_near_duplicate(&r, 0, SIMSTORE_SIMILARITY_UNKNOWN));
    r = rule_of(DK, DJ); /* no sketches: the store's k, distance alone */
    assert_int_equal(simstore_near_rule_resolve(&r, 4, NONE, 0), SIMSTORE_OK);
    assert_int_equal(r.k, 4);
    assert_true(r.min_similarity == 0);
    assert_true(simstore_near_duplicate(&r, 4, SIMSTORE_SIMILARITY_UNKNOWN));
    r = rule_of(2, DJ); /* k alone: distance alone */
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_true(r.k == 2 && r.min_similarity == 0);
    r = rule_of(DK, 0.8); /* a similarity alone: the store's k and bands */
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_true(r.k == 3 && r.min_similarity == 0.8 && r.bands == 1);
    r = rule_of(DK, 0.4); /* below the bands: candidates within 7 */
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_true(r.k == SIMSTORE_NEAR_K && r.min_similarity == 0.4 && r.bands == 0);
    r = rule_of(DK, 0); /* a minimum of 0: the store's k */
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_true(r.k == 3 && r.min_similarity == 0);
    r = rule_of(SIMSTORE_NEAR_STORE_K, DJ);
    assert_int_equal(simstore_near_rule_resolve(&r, 5, SK, 0), SIMSTORE_OK);
    assert_true(r.k == 5 && r.min_similarity == 0);
    r = rule_of(DK, DJ); /* by paragraphs: the store's k and 0.3 of them */
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, SIMSTORE_NEAR_BY_PARAGRAPHS),
                     SIMSTORE_OK);
    assert_true(r.k == 3 && r.min_similarity == 0);
    assert_true(simstore_near_duplicate_paragraphs(&r, 3, 10));
    assert_false(simstore_near_duplicate_paragraphs(&r, 2, 10));
    assert_false(simstore_near_duplicate_paragraphs(&r, 0, 10));
    /* Bands: on by default in the near-duplicate setting, with the shape of
     * simstore_sketch_bands(); one document at a time against a store
     * (SIMSTORE_NEAR_WITHOUT_BANDS) the same k and minimum without them,
     * and asking for them there is refused. */
    unsigned rows, count;
    simstore_sketch_bands(SK, SIMSTORE_NEAR_SIMILARITY, &rows, &count);
    r = rule_of(DK, DJ);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_true(r.bands == 1 && r.band_rows == rows && r.band_count == count && count > 0);
    r = rule_of(DK, DJ);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, SIMSTORE_NEAR_WITHOUT_BANDS),
                     SIMSTORE_OK);
    assert_int_equal(r.k, SIMSTORE_NEAR_K);
    assert_true(r.min_similarity == SIMSTORE_NEAR_SIMILARITY);
    assert_true(r.bands == 0 && r.band_rows == 0 && r.band_count == 0);
    r = rule_of(DK, DJ);
    r.bands = 1;
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, SIMSTORE_NEAR_WITHOUT_BANDS),
                     SIMSTORE_EINVAL);
    r = rule_of(DK, DJ);
    r.bands = 0;
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_OK);
    assert_true(r.bands == 0 && r.band_count == 0 && r.min_similarity == SIMSTORE_NEAR_SIMILARITY);
    /* Refusals. */
    r = rule_of(SIMSTORE_MAX_K + 1, DJ);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_ERANGE);
    r = rule_of(DK, 1.5);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_EINVAL);
    r = rule_of(DK, 0.9);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, NONE, 0), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "keeps no sketches"));
    r = rule_of(DK, 0.9);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, SIMSTORE_NEAR_BY_FINGERPRINT),
                     SIMSTORE_EINVAL);
    r = rule_of(DK, 0.9);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, SIMSTORE_NEAR_BY_PARAGRAPHS),
                     SIMSTORE_EINVAL);
    r = rule_of(DK, DJ);
    r.min_fraction = 2;
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 0), SIMSTORE_EINVAL);
    assert_int_equal(simstore_near_rule_resolve(&r, 3, SK, 8), SIMSTORE_EINVAL);
    assert_int_equal(simstore_near_rule_resolve(NULL, 3, SK, 0), SIMSTORE_EINVAL);
}

/* The scans' defaults (simstore.h, the near-duplicate setting): on a store
 * that keeps sketches, options left at their defaults are similarity 0.9
 * with bands, within the store's k (K here); without bands, k 7; a k given
 * alone is a distance alone; a similarity given alone (0.5 or more) takes
 * the store's k and bands; a similarity of 0 is the store's k unfiltered;
 * pairs by fingerprint ask no similarity. simstore_scan_resolve tells what
 * a scan will use. */
static void test_similarity_defaults__near_duplicate_setting(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "similarity defaults", 1309);
    corpus c = make_corpus(&r, 300);
    char *tmp = test_tmpdir("sim-defaults");
    char *path = test_path(tmp, "s");
    simstore *s = make_store(path, &c);
    unsigned k = 0;
    double j = -2;
    assert_int_equal(simstore_scan_resolve(s, NULL, &k, &j), 0);
    assert_int_equal(k, K);
    assert_true(j == SIMSTORE_NEAR_SIMILARITY);
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.memory_bytes = 16u << 20;
    assert_int_equal(simstore_scan_resolve(s, &o, &k, &j), 0);
    assert_int_equal(k, K);
    assert_true(j == 0.9);
    text got = {0}, want = brute_pairs(&c, K, 0.9), k_alone = brute_pairs(&c, 3, 0);
    assert_int_equal(simstore_pairs(s, &o, 0, pair_line, &got), 0);
    text_equal(&got, &want, "pairs with the default options");
    /* Without bands: within 7 at 0.9, as before bands. */
    o.bands = 0;
    assert_int_equal(simstore_scan_resolve(s, &o, &k, &j), 0);
    assert_int_equal(k, SIMSTORE_NEAR_K);
    g_bands = 0;
    text without = {0}, want_without = brute_pairs(&c, SIMSTORE_NEAR_K, 0.9);
    g_bands = 1;
    assert_int_equal(simstore_pairs(s, &o, 0, pair_line, &without), 0);
    text_equal(&without, &want_without, "pairs with the defaults without bands");
    free(without.buf);
    free(want_without.buf);
    o.bands = SIMSTORE_NEAR_DEFAULT_BANDS;
    /* The setting is not k 3 alone on this corpus, or the test proves little. */
    assert_true(got.len > 0 && (got.len != k_alone.len || memcmp(got.buf, k_alone.buf, got.len)));
    free(got.buf);
    got = (text){0};
    assert_int_equal(simstore_pairs(s, NULL, 0, pair_line, &got), 0);
    text_equal(&got, &want, "pairs with no options");
    free(got.buf);
    free(want.buf);
    /* k alone: a distance alone. */
    o.k = 3;
    assert_int_equal(simstore_scan_resolve(s, &o, &k, &j), 0);
    assert_int_equal(k, 3);
    assert_true(j == 0);
    got = (text){0};
    assert_int_equal(simstore_pairs(s, &o, 0, pair_line, &got), 0);
    text_equal(&got, &k_alone, "pairs at k 3 alone");
    free(got.buf);
    free(k_alone.buf);
    /* A similarity alone: the store's k and bands; 0: the store's k. */
    o.k = SIMSTORE_NEAR_DEFAULT_K;
    o.min_similarity = 0.5;
    assert_int_equal(simstore_scan_resolve(s, &o, &k, &j), 0);
    assert_int_equal(k, K);
    assert_true(j == 0.5);
    got = (text){0};
    want = brute_pairs(&c, K, 0.5);
    assert_int_equal(simstore_pairs(s, &o, 0, pair_line, &got), 0);
    text_equal(&got, &want, "pairs at similarity 0.5 alone");
    free(got.buf);
    free(want.buf);
    o.min_similarity = 0;
    assert_int_equal(simstore_scan_resolve(s, &o, &k, &j), 0);
    assert_int_equal(k, K);
    assert_true(j == 0);
    o.k = SIMSTORE_NEAR_STORE_K;
    o.min_similarity = SIMSTORE_NEAR_DEFAULT_SIMILARITY;
    assert_int_equal(simstore_scan_resolve(s, &o, &k, &j), 0);
    assert_int_equal(k, K);
    assert_true(j == 0);
    /* Pairs by fingerprint with the defaults: no similarity asked. */
    simstore_scan_options_init(&o);
    o.memory_bytes = 16u << 20;
    size_t pairs = 0;
    assert_int_equal(simstore_pairs(s, &o, SIMSTORE_PAIRS_BY_FINGERPRINT, count_pair, &pairs), 0);
    assert_true(pairs > 0);
    /* Clusters with the defaults are those at the store's k, 0.9 and bands. */
    simstore_cluster_options co, explicit_co;
    simstore_cluster_options_init(&co);
    co.scan.memory_bytes = 16u << 20;
    explicit_co = co;
    explicit_co.scan.k = K;
    explicit_co.scan.min_similarity = 0.9;
    explicit_co.scan.bands = 1;
    text a = {0}, b = {0};
    assert_int_equal(simstore_clusters(s, &co, member_line, &a, NULL), 0);
    assert_int_equal(simstore_clusters(s, &explicit_co, member_line, &b, NULL), 0);
    text_equal(&a, &b, "clusters with the default options");
    free(a.buf);
    free(b.buf);
    simstore_close(s);
    test_rmtree(tmp);
    free(tmp);
    free(path);
    free(c.docs);
}

/* A store built from texts with sketches: a text query made with the
 * store's own text options is sketched in the same pass, and its
 * similarities are those of the texts' sketches. */
static void test_similarity_text__end_to_end(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "the river rose through the night and the town woke to water in every street",
        "the river rose through the night and the town woke to water in the streets",
        "the river rose in the night and the old town woke to water in every street",
        "a quiet day at the market with bread and cheese and apples for sale",
    };
    enum { N = sizeof texts / sizeof texts[0] };
    char *tmp = test_tmpdir("sim-text");
    char *path = test_path(tmp, "s");
    simstore_text_options topts;
    simstore_build_options o = build_options(&topts, SIMSTORE_SKETCH_MINHASH32);
    o.k = 7;
    simstore_fingerprinter *fpr;
    assert_int_equal(simstore_fingerprinter_new(&topts, &fpr), 0);
    uint8_t sketches[N][32];
    uint64_t fps[N];
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    for (size_t i = 0; i < N; i++) {
        char id[8];
        snprintf(id, sizeof id, "t%zu", i);
        assert_int_equal(simstore_fingerprint_sketch(fpr, texts[i], strlen(texts[i]), &fps[i],
                                                     sketches[i], NULL),
                         0);
        simstore_doc d = {id, strlen(id), fps[i], NULL, 0, i};
        d.sketch = sketches[i];
        assert_int_equal(simstore_builder_add(b, &d), 0);
    }
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore_fingerprinter_free(fpr);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    simstore_text_options stored;
    simstore_get_text_options(s, &stored);
    assert_int_equal(stored.sketch, SIMSTORE_SKETCH_MINHASH32);
    assert_int_equal(simstore_fingerprinter_new(&stored, &fpr), 0);
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    for (size_t i = 0; i < N; i++) {
        const simstore_match *m;
        size_t n;
        uint64_t fp;
        assert_int_equal(simstore_query_text(q, fpr, texts[i], strlen(texts[i]), 7, &fp, &m, &n),
                         0);
        assert_true(fp == fps[i]);
        int self = 0;
        for (size_t j = 0; j < n; j++) {
            size_t t = (size_t)(m[j].id[1] - '0');
            assert_true(m[j].similarity == simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH32,
                                                                      sketches[i], sketches[t]));
            if (t == i) {
                self = 1;
                assert_true(m[j].similarity == 1.0);
            }
        }
        assert_true(self);
    }
    /* A fingerprinter of another kind: the fingerprint alone. */
    simstore_fingerprinter_free(fpr);
    stored.sketch = SIMSTORE_SKETCH_MINHASH64;
    assert_int_equal(simstore_fingerprinter_new(&stored, &fpr), 0);
    const simstore_match *m;
    size_t n;
    assert_int_equal(simstore_query_text(q, fpr, texts[0], strlen(texts[0]), 7, NULL, &m, &n), 0);
    assert_true(n >= 1);
    for (size_t j = 0; j < n; j++)
        assert_true(m[j].similarity == SIMSTORE_SIMILARITY_UNKNOWN);
    simstore_fingerprinter_free(fpr);
    simstore_query_free(q);
    simstore_close(s);
    test_rmtree(tmp);
    free(tmp);
    free(path);
}

/* ---- damaged sketches ---------------------------------------------------------------- */

typedef struct raw {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi docs;
} raw;

/* Replace document id's record by the one `edit` makes of it (its bytes,
 * editable, and the decoded record). */
static void edit_record(const char *dir, const char *id,
                        size_t (*edit)(uint8_t *buf, size_t len, const sims_doc_record *rec,
                                       const char *id))
{
    raw r;
    assert_int_equal(mdb_env_create(&r.env), 0);
    mdb_env_set_maxdbs(r.env, 4);
    mdb_env_set_mapsize(r.env, (size_t)1 << 30);
    assert_int_equal(mdb_env_open(r.env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(r.env, NULL, 0, &r.txn), 0);
    assert_int_equal(mdb_dbi_open(r.txn, "docs", 0, &r.docs), 0);
    MDB_val key = {strlen(id), (void *)id}, val;
    assert_int_equal(mdb_get(r.txn, r.docs, &key, &val), 0);
    uint8_t buf[512];
    memcpy(buf, val.mv_data, val.mv_size);
    sims_doc_record rec;
    assert_int_equal(
        sims_doc_record_decode((const uint8_t *)id, strlen(id), buf, val.mv_size, &rec), 0);
    size_t n = edit(buf, val.mv_size, &rec, id);
    MDB_val nv = {n, buf};
    assert_int_equal(mdb_put(r.txn, r.docs, &key, &nv, 0), 0);
    assert_int_equal(mdb_txn_commit(r.txn), 0);
    mdb_env_close(r.env);
}

static size_t flip_sketch_byte(uint8_t *buf, size_t len, const sims_doc_record *rec, const char *id)
{
    (void)id;
    buf[rec->sketch - buf + 5] ^= 0x10; /* the check no longer holds */
    return len;
}

static size_t other_kind(uint8_t *buf, size_t len, const sims_doc_record *rec, const char *id)
{
    (void)len;
    uint8_t copy[64];
    memcpy(copy, rec->sketch, 16);
    unsigned flags = rec->flags | SIMS_DOC_FLAG_SKETCH(SIMSTORE_SKETCH_MINHASH16);
    uint8_t out[512];
    size_t n = sims_doc_record_encode_sketch((const uint8_t *)id, strlen(id), rec->fp, flags,
                                             rec->insertion, copy, NULL, 0, out, sizeof out);
    memcpy(buf, out, n);
    return n;
}

static size_t no_sketch(uint8_t *buf, size_t len, const sims_doc_record *rec, const char *id)
{
    (void)len;
    uint8_t out[512];
    size_t n = sims_doc_record_encode((const uint8_t *)id, strlen(id), rec->fp, rec->flags,
                                      rec->insertion, NULL, 0, out, sizeof out);
    memcpy(buf, out, n);
    return n;
}

static int count_problems(void *ctx, const simstore_problem *p)
{
    size_t *counts = (size_t *)ctx;
    if (p->kind == SIMSTORE_PROBLEM_DOC)
        counts[p->warning ? 1 : 0]++;
    return 0;
}

static void test_similarity_corrupt__sketch_bytes(void **state)
{
    (void)state;
    /* Sketch bytes damaged in docs's records: a document added (a change
     * in LMDB; the first half is in the document file). */
    test_rng r;
    test_rng_init(&r, "similarity corrupt", 1306);
    corpus c = make_corpus(&r, 36);
    char *tmp = test_tmpdir("sim-corrupt");
    char *path = test_path(tmp, "s");
    simstore_close(make_store(path, &c));
    const sdoc *victim = &c.docs[c.n / 2];
    assert_false(victim->deleted);
    simstore_scan_options so;
    simstore_scan_options_init(&so);
    so.memory_bytes = 16u << 20;
    size_t pairs = 0, problems[2] = {0, 0};

    /* A flipped sketch byte: the record's check fails. */
    edit_record(path, victim->id, flip_sketch_byte);
    simstore *s;
    simstore_query *q;
    const simstore_match *m;
    size_t n;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    assert_int_equal(simstore_query_fp_sketch(q, victim->fp, victim->sketch, K, &m, &n),
                     SIMSTORE_ECORRUPT);
    assert_int_equal(simstore_pairs(s, &so, 0, count_pair, &pairs), SIMSTORE_ECORRUPT);
    simstore_query_free(q);
    simstore_close(s);
    assert_int_equal(simstore_verify(path, 0, count_problems, problems, NULL), SIMSTORE_ECORRUPT);
    assert_true(problems[0] >= 1);

    /* A sealed record holding another kind of sketch than the store's. */
    char *path2 = test_path(tmp, "s2");
    simstore_close(make_store(path2, &c));
    edit_record(path2, victim->id, other_kind);
    assert_int_equal(simstore_open(path2, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    assert_int_equal(simstore_query_fp(q, victim->fp, K, &m, &n), SIMSTORE_ECORRUPT);
    assert_true(strstr(simstore_last_error(), "minhash16") != NULL);
    so.min_similarity = 0.5;
    assert_int_equal(simstore_pairs(s, &so, 0, count_pair, &pairs), SIMSTORE_ECORRUPT);
    so.min_similarity = 0;
    simstore_query_free(q);
    simstore_close(s);
    problems[0] = problems[1] = 0;
    assert_int_equal(simstore_verify(path2, 0, count_problems, problems, NULL), SIMSTORE_ECORRUPT);
    assert_int_equal(problems[0], 1);

    /* A sealed record without a sketch in a store that keeps them: its
     * similarities are unknown; verify warns. */
    char *path3 = test_path(tmp, "s3");
    simstore_close(make_store(path3, &c));
    edit_record(path3, victim->id, no_sketch);
    assert_int_equal(simstore_open(path3, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    assert_int_equal(simstore_query_fp_sketch(q, victim->fp, victim->sketch, 0, &m, &n), 0);
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].id, victim->id) == 0) {
            seen = 1;
            assert_true(m[i].similarity == SIMSTORE_SIMILARITY_UNKNOWN);
            assert_null(m[i].sketch);
        }
    assert_true(seen);
    simstore_query_free(q);
    simstore_close(s);
    problems[0] = problems[1] = 0;
    assert_int_equal(simstore_verify(path3, 0, count_problems, problems, NULL), SIMSTORE_OK);
    assert_int_equal(problems[0], 0);
    assert_int_equal(problems[1], 1);
    test_rmtree(tmp);
    free(tmp);
    free(path);
    free(path2);
    free(path3);
    free(c.docs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_similarity_query__brute_force),
        cmocka_unit_test(test_similarity_batch__as_single_queries),
        cmocka_unit_test(test_similarity_pairs__min_similarity),
        cmocka_unit_test(test_similarity_clusters__min_similarity),
        cmocka_unit_test(test_similarity_scan__above_design),
        cmocka_unit_test(test_similarity_bands__brute_force),
        cmocka_unit_test(test_similarity_bands__shape_and_rule),
        cmocka_unit_test(test_similarity_options__stores_without_sketches),
        cmocka_unit_test(test_similarity_defaults__near_duplicate_setting),
        cmocka_unit_test(test_similarity_rule__defaults_and_answer),
        cmocka_unit_test(test_similarity_text__end_to_end),
        cmocka_unit_test(test_similarity_corrupt__sketch_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
