/* test_pairs.c: simstore_pairs, simstore_join_fingerprints and
 * simstore_clusters against brute-force references: uniform, clustered,
 * duplicate-heavy and adversarial sets, k = 0..7, stores of two segments
 * with deleted documents, before and after a compaction, at 1 and 2
 * threads; fingerprint-only and empty stores; a big prefix group; the
 * join plan's tables (sorted, joined one by one) against the join; every
 * distance above the store's design (a join in memory) against the brute
 * force and a store built for it, and its memory budget. The
 * spilling path of components (forced through the test hook of
 * scan/clusters.h) against the same references and the in-memory path, on
 * all of those, on a chain of thousands of near-duplicates, and at the
 * 16 MiB floor with its sorters spilling to disk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scan/clusters.h" /* the spilling path's test hooks */
#include "simstore.h"
#include "simstore_unstable.h"
#include "testutil.h"

enum { UNIFORM, CLUSTERED, DUPLICATES, ADVERSARIAL, SHAPES };
static const char *const shape_names[SHAPES] = {"uniform", "clustered", "duplicates",
                                                "adversarial"};

typedef struct doc {
    char id[32];
    uint64_t fp;
    uint64_t rank; /* insertion order: (commit << 40) | position */
    double len;    /* the metadata's "len"; < 0: none */
    int deleted;
} doc;

typedef struct corpus {
    doc *docs;
    size_t n;
} corpus;

static uint64_t flip_bits(test_rng *r, uint64_t fp, unsigned bits)
{
    for (unsigned i = 0; i < bits; i++)
        fp ^= UINT64_C(1) << test_rng_below(r, 64);
    return fp;
}

static corpus make_corpus(test_rng *r, int shape, size_t n, unsigned k)
{
    corpus c = {calloc(n, sizeof(doc)), n};
    assert_non_null(c.docs);
    uint64_t base = test_rng_next(r);
    for (size_t i = 0; i < n; i++) {
        uint64_t fp;
        switch (shape) {
        case UNIFORM:
            fp = i % 5 == 0 && i ? flip_bits(r, c.docs[i - 1].fp, k) : test_rng_next(r);
            break;
        case CLUSTERED: /* one table prefix for most, near-duplicate chains */
            fp = (base & 0xFFFFFFFF00000000ULL) | (test_rng_next(r) >> 32);
            if (i % 3 == 0 && i)
                fp = flip_bits(r, c.docs[i - 1].fp, 1 + (unsigned)test_rng_below(r, k + 1));
            break;
        case DUPLICATES:
            fp = i % 4 ? c.docs[test_rng_below(r, i ? i : 1)].fp
                       : flip_bits(r, base, (unsigned)test_rng_below(r, 9));
            break;
        default:
            switch (i % 4) {
            case 0: fp = flip_bits(r, 0, (unsigned)test_rng_below(r, k + 3)); break;
            case 1: fp = flip_bits(r, UINT64_MAX, (unsigned)test_rng_below(r, k + 3)); break;
            case 2:
                fp = flip_bits(r, 0xAAAAAAAAAAAAAAAAULL, (unsigned)test_rng_below(r, k + 3));
                break;
            default: fp = flip_bits(r, base, (unsigned)test_rng_below(r, 12)); break;
            }
        }
        if (shape == DUPLICATES && i == 0)
            fp = base;
        c.docs[i].fp = fp;
        snprintf(c.docs[i].id, sizeof c.docs[i].id, "%s-%05zu", shape_names[shape],
                 (size_t)test_rng_below(r, 100000) * 0 + (i * 7919) % n);
        c.docs[i].len = i % 5 == 4 ? -1 : (double)test_rng_below(r, 50);
    }
    return c;
}

/* ---- stores ------------------------------------------------------------------- */

static void add_docs(simstore_builder *b, corpus *c, size_t from, size_t to, uint64_t commit)
{
    for (size_t i = from; i < to; i++) {
        char meta[48] = "";
        if (c->docs[i].len >= 0)
            snprintf(meta, sizeof meta, "{\"len\":%g}", c->docs[i].len);
        simstore_doc d = {c->docs[i].id,         strlen(c->docs[i].id), c->docs[i].fp,
                          meta[0] ? meta : NULL, strlen(meta),          i};
        assert_int_equal(simstore_builder_add(b, &d), 0);
        c->docs[i].rank = (commit << 40) | (i - from);
    }
}

/* Two segments (a build and an add), then every 7th document deleted
 * unless keep_all; tables: the design's table count (0: the cost model's
 * choice). */
static simstore *make_store_design(const char *path, corpus *c, unsigned k, unsigned tables,
                                   int keep_all)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.tables = tables;
    o.memory_bytes = 16u << 20;
    o.threads = 2;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    add_docs(b, c, 0, c->n / 2, 1);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    assert_int_equal(simstore_add_begin(s, &o, &b), 0);
    add_docs(b, c, c->n / 2, c->n, 2);
    assert_int_equal(simstore_builder_finish(b), 0);
    if (keep_all)
        return s;
    const char **ids = malloc(c->n * sizeof *ids);
    size_t *lens = malloc(c->n * sizeof *lens), nd = 0;
    for (size_t i = 3; i < c->n; i += 7) {
        ids[nd] = c->docs[i].id;
        lens[nd++] = strlen(c->docs[i].id);
        c->docs[i].deleted = 1;
    }
    uint64_t deleted = 0;
    assert_int_equal(simstore_delete(s, ids, lens, nd, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, nd);
    free(ids);
    free(lens);
    return s;
}

static simstore *make_store_ex(const char *path, corpus *c, unsigned k, int keep_all)
{
    return make_store_design(path, c, k, 0, keep_all);
}

static simstore *make_store(const char *path, corpus *c, unsigned k)
{
    return make_store_ex(path, c, k, 0);
}

/* ---- text of answers ------------------------------------------------------------- */

typedef test_text text;

static void text_equal(const text *a, const text *b, const char *what)
{
    if (!test_text_same(a, b, what))
        fail();
}

static int pair_line(void *ctx, const simstore_pair *p)
{
    text *t = (text *)ctx;
    if (p->id_a)
        test_text_add(t, "%s\t%s\t%u\n", p->id_a, p->id_b, p->distance);
    else
        test_text_add(t, "%016llx\t%016llx\t%u\t%llu\t%llu\n", (unsigned long long)p->fp_a,
                      (unsigned long long)p->fp_b, p->distance, (unsigned long long)p->count_a,
                      (unsigned long long)p->count_b);
    return 0;
}

static text store_pairs(simstore *s, unsigned k, unsigned threads, unsigned flags)
{
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.k = k;
    o.threads = threads;
    o.memory_bytes = 16u << 20;
    text t = {0};
    int rc = simstore_pairs(s, &o, flags, pair_line, &t);
    if (rc)
        fprintf(stderr, "simstore_pairs: %s\n", simstore_last_error());
    assert_int_equal(rc, 0);
    return t;
}

/* ---- brute force ------------------------------------------------------------------- */

typedef struct bpair {
    const doc *a, *b;
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

static text brute_pairs(const corpus *c, unsigned k)
{
    size_t cap = 1024, n = 0;
    bpair *ps = malloc(cap * sizeof *ps);
    for (size_t i = 0; i < c->n; i++) {
        for (size_t j = i + 1; j < c->n; j++) {
            const doc *a = &c->docs[i], *b = &c->docs[j];
            unsigned d = simstore_distance(a->fp, b->fp);
            if (a->deleted || b->deleted || d > k)
                continue;
            if (n == cap)
                ps = realloc(ps, (cap *= 2) * sizeof *ps);
            if (strcmp(a->id, b->id) > 0) {
                const doc *t = a;
                a = b;
                b = t;
            }
            ps[n++] = (bpair){a, b, d};
        }
    }
    qsort(ps, n, sizeof *ps, cmp_bpair);
    text t = {0};
    for (size_t i = 0; i < n; i++)
        test_text_add(&t, "%s\t%s\t%u\n", ps[i].a->id, ps[i].b->id, ps[i].d);
    free(ps);
    return t;
}

typedef struct bfp {
    uint64_t fp;
    uint64_t count;
} bfp;

static int cmp_bfp(const void *x, const void *y)
{
    uint64_t a = ((const bfp *)x)->fp, b = ((const bfp *)y)->fp;
    return (a > b) - (a < b);
}

/* Distinct live fingerprints with counts; pairs by (d, a, b). */
static text brute_by_fingerprint(const corpus *c, unsigned k)
{
    bfp *f = malloc(c->n * sizeof *f);
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        if (!c->docs[i].deleted)
            f[n++] = (bfp){c->docs[i].fp, 1};
    qsort(f, n, sizeof *f, cmp_bfp);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w && f[w - 1].fp == f[i].fp)
            f[w - 1].count++;
        else
            f[w++] = f[i];
    }
    text t = {0};
    for (unsigned d = 0; d <= k; d++)
        for (size_t i = 0; i < w; i++)
            for (size_t j = d == 0 ? i : i + 1; j < w; j++)
                if (simstore_distance(f[i].fp, f[j].fp) == d && (d > 0 || f[i].count > 1))
                    test_text_add(&t, "%016llx\t%016llx\t%u\t%llu\t%llu\n",
                                  (unsigned long long)f[i].fp, (unsigned long long)f[j].fp, d,
                                  (unsigned long long)f[i].count, (unsigned long long)f[j].count);
    free(f);
    return t;
}

/* ---- clusters ------------------------------------------------------------------------ */

static int member_line(void *ctx, const simstore_cluster_member *m)
{
    text *t = (text *)ctx;
    if (m->id)
        test_text_add(t, "%s\t%s\t%d\t%u\n", m->cluster, m->id, m->kept, m->distance);
    else
        test_text_add(t, "%016llx\t%016llx\t%d\t%u\n", (unsigned long long)m->cluster_fp,
                      (unsigned long long)m->fp, m->kept, m->distance);
    return 0;
}

static int len_key(void *ctx, const char *meta, size_t len, double *key)
{
    (void)ctx;
    if (!meta)
        return 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)len, meta);
    return sscanf(buf, "{\"len\":%lf}", key) == 1;
}

static text store_clusters_in(simstore *s, unsigned k, unsigned threads, simstore_cluster_mode mode,
                              simstore_keep_rule keep, int singletons, uint64_t memory_bytes,
                              simstore_cluster_summary *sum)
{
    simstore_cluster_options o;
    simstore_cluster_options_init(&o);
    o.scan.k = k;
    o.scan.threads = threads;
    o.scan.memory_bytes = memory_bytes;
    o.mode = mode;
    o.keep = keep;
    o.key = len_key;
    o.singletons = singletons;
    text t = {0};
    int rc = simstore_clusters(s, &o, member_line, &t, sum);
    if (rc)
        fprintf(stderr, "simstore_clusters: %s\n", simstore_last_error());
    assert_int_equal(rc, 0);
    return t;
}

static text store_clusters(simstore *s, unsigned k, unsigned threads, simstore_cluster_mode mode,
                           simstore_keep_rule keep, int singletons, simstore_cluster_summary *sum)
{
    return store_clusters_in(s, k, threads, mode, keep, singletons, 64u << 20, sum);
}

/* Components in memory_bytes, through the spilling path when `spill`;
 * *stats: what spilling runs did (none when the graph fit in memory). */
static text components_in(simstore *s, unsigned k, unsigned threads, simstore_keep_rule keep,
                          int singletons, uint64_t memory_bytes, int spill,
                          simstore_cluster_summary *sum, scan_spill_stats *stats)
{
    memset(stats, 0, sizeof *stats);
    sims_scan_clusters_force_spill(spill);
    sims_scan_clusters_spill_stats(stats);
    text t = store_clusters_in(s, k, threads, SIMSTORE_CLUSTER_COMPONENTS, keep, singletons,
                               memory_bytes, sum);
    sims_scan_clusters_force_spill(0);
    sims_scan_clusters_spill_stats(NULL);
    return t;
}

static simstore_keep_rule g_keep;

/* Keep order of two documents: the rule, then id. */
static int keep_cmp(const doc *a, const doc *b)
{
    if (g_keep == SIMSTORE_KEEP_FIRST && a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (g_keep == SIMSTORE_KEEP_MIN_KEY || g_keep == SIMSTORE_KEEP_MAX_KEY) {
        int ma = a->len < 0, mb = b->len < 0;
        if (ma != mb)
            return ma ? 1 : -1;
        if (!ma && a->len != b->len)
            return (a->len < b->len) == (g_keep == SIMSTORE_KEEP_MIN_KEY) ? -1 : 1;
    }
    return strcmp(a->id, b->id);
}

typedef struct bmember {
    const doc *d, *kept;
} bmember;

static int cmp_bmember(const void *x, const void *y)
{
    const bmember *p = (const bmember *)x, *q = (const bmember *)y;
    int c = strcmp(p->kept->id, q->kept->id);
    if (c)
        return c;
    int kp = p->d == p->kept, kq = q->d == q->kept;
    if (kp != kq)
        return kp ? -1 : 1;
    return strcmp(p->d->id, q->d->id);
}

static size_t find_root(size_t *parent, size_t x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

static const doc **g_docs;

static int cmp_keep_ptr(const void *x, const void *y)
{
    return keep_cmp(*(const doc *const *)x, *(const doc *const *)y);
}

static text brute_clusters(const corpus *c, unsigned k, simstore_cluster_mode mode, int singletons)
{
    size_t n = 0;
    const doc **live = malloc(c->n * sizeof *live);
    for (size_t i = 0; i < c->n; i++)
        if (!c->docs[i].deleted)
            live[n++] = &c->docs[i];
    qsort(live, n, sizeof *live, cmp_keep_ptr); /* keep order */
    g_docs = live;
    const doc **kept = calloc(n, sizeof *kept);
    size_t *size = calloc(n, sizeof *size);
    if (mode == SIMSTORE_CLUSTER_STAR) {
        for (size_t i = 0; i < n; i++) {
            if (kept[i])
                continue;
            for (size_t j = i; j < n; j++)
                if (!kept[j] && simstore_distance(live[i]->fp, live[j]->fp) <= k)
                    kept[j] = live[i];
        }
    } else {
        size_t *parent = malloc(n * sizeof *parent);
        for (size_t i = 0; i < n; i++)
            parent[i] = i;
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (simstore_distance(live[i]->fp, live[j]->fp) <= k) {
                    size_t x = find_root(parent, i), y = find_root(parent, j);
                    if (x != y)
                        parent[x > y ? x : y] = x < y ? x : y; /* the root: first in keep order */
                }
        for (size_t i = 0; i < n; i++)
            kept[i] = live[find_root(parent, i)];
        free(parent);
    }
    bmember *m = malloc((n ? n : 1) * sizeof *m);
    size_t nm = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (live[j] == kept[i])
                size[j]++;
    for (size_t i = 0; i < n; i++) {
        size_t ki = 0;
        while (live[ki] != kept[i])
            ki++;
        if (size[ki] > 1 || singletons)
            m[nm++] = (bmember){live[i], kept[i]};
    }
    qsort(m, nm, sizeof *m, cmp_bmember);
    text t = {0};
    for (size_t i = 0; i < nm; i++)
        test_text_add(&t, "%s\t%s\t%d\t%u\n", m[i].kept->id, m[i].d->id, m[i].d == m[i].kept,
                      simstore_distance(m[i].d->fp, m[i].kept->fp));
    free(m);
    free(kept);
    free(size);
    free(live);
    return t;
}

/* ---- the tests ------------------------------------------------------------------------ */

static void check_store(simstore *s, const corpus *c, unsigned k, const char *what)
{
    for (unsigned q = 0; q <= k; q++) {
        text want = brute_pairs(c, q), one = store_pairs(s, q, 1, 0), two = store_pairs(s, q, 2, 0);
        text_equal(&one, &want, what);
        text_equal(&two, &want, what);
        free(one.buf);
        free(two.buf);
        free(want.buf);
    }
    text want = brute_by_fingerprint(c, k),
         got = store_pairs(s, k, 2, SIMSTORE_PAIRS_BY_FINGERPRINT);
    text_equal(&got, &want, "by fingerprint");
    free(want.buf);
    free(got.buf);
    for (int mode = 0; mode < 2; mode++) {
        for (int keep = 0; keep < 4; keep++) {
            g_keep = (simstore_keep_rule)keep;
            text bw = brute_clusters(c, k, (simstore_cluster_mode)mode, keep == 1);
            simstore_cluster_summary s1, s2;
            text c1 = store_clusters(s, k, 1, (simstore_cluster_mode)mode, (simstore_keep_rule)keep,
                                     keep == 1, &s1);
            text c2 = store_clusters(s, k, 2, (simstore_cluster_mode)mode, (simstore_keep_rule)keep,
                                     keep == 1, &s2);
            fprintf(stderr, "  %s k=%u mode %d keep %d: %llu documents, %llu clusters\n", what, k,
                    mode, keep, (unsigned long long)s1.documents, (unsigned long long)s1.clusters);
            text_equal(&c1, &bw, "clusters");
            text_equal(&c2, &bw, "clusters at 2 threads");
            assert_memory_equal(&s1, &s2, sizeof s1);
            free(bw.buf);
            free(c1.buf);
            free(c2.buf);
        }
    }
}

/* Components through the spilling path against the brute force and the
 * in-memory path, every keep rule, with and without singletons. */
static void check_spilled(simstore *s, const corpus *c, unsigned k, const char *what)
{
    for (int keep = 0; keep < 4; keep++) {
        for (int singletons = 0; singletons < 2; singletons++) {
            g_keep = (simstore_keep_rule)keep;
            text want = brute_clusters(c, k, SIMSTORE_CLUSTER_COMPONENTS, singletons);
            simstore_cluster_summary in_memory, spilled;
            scan_spill_stats stats;
            text mem = components_in(s, k, 2, (simstore_keep_rule)keep, singletons, 64u << 20, 0,
                                     &in_memory, &stats);
            assert_int_equal(stats.runs, 0); /* it fits: no spilling */
            text got = components_in(s, k, 1 + (unsigned)singletons, (simstore_keep_rule)keep,
                                     singletons, 16u << 20, 1, &spilled, &stats);
            assert_int_equal(stats.runs, 1);
            char name[160];
            snprintf(name, sizeof name, "%s k=%u keep %d singletons %d: spilled components", what,
                     k, keep, singletons);
            text_equal(&got, &want, name);
            text_equal(&mem, &want, "components in memory");
            assert_memory_equal(&spilled, &in_memory, sizeof spilled);
            free(want.buf);
            free(mem.buf);
            free(got.buf);
        }
    }
}

static void sweep(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "pairs sweep", 12);
    char *dir = test_tmpdir("pairs");
    size_t n = test_dense() ? 3000 : test_sampled() ? 250 : 600;
    for (unsigned k = 0; k <= 7; k++) {
        for (int shape = 0; shape < SHAPES; shape++) {
            corpus c = make_corpus(&r, shape, n, k);
            char name[64];
            snprintf(name, sizeof name, "%s-k%u", shape_names[shape], k);
            char *path = test_path(dir, name);
            simstore *s = make_store(path, &c, k);
            check_store(s, &c, k, name);
            check_spilled(s, &c, k, name);
            /* The same answers after a compaction. */
            assert_int_equal(simstore_compact(s, NULL), 0);
            text want = brute_pairs(&c, k), got = store_pairs(s, k, 2, 0);
            text_equal(&got, &want, "after compaction");
            free(want.buf);
            free(got.buf);
            simstore_close(s);
            test_rmtree(path);
            free(path);
            free(c.docs);
        }
    }
    test_rmtree(dir);
    free(dir);
}

/* ---- distances above the store's design ------------------------------------------------ */

/* Stores built for k = 0, 1, 3 and a two-level design for 3 (16 tables),
 * each of two segments with deleted documents (so some fingerprints are
 * dead, some in both segments), asked for every K from their k + 1 to 7:
 * pairs by document and by fingerprint, at 1 and 2 threads, clusters
 * (both modes, in memory and spilled), all equal to the brute force and to
 * the answers of a store built for K from the same documents. */
static void test_pairs_beyond_design__sweep(void **state)
{
    (void)state;
    static const struct {
        unsigned k, tables;
    } designs[] = {{0, 0}, {1, 0}, {3, 0}, {3, 16}};
    enum { NDESIGNS = sizeof designs / sizeof designs[0] };
    test_rng r;
    test_rng_init(&r, "pairs beyond design", 71);
    char *dir = test_tmpdir("beyond");
    size_t n = test_sampled() ? 200 : 400;
    /* Uniform fingerprints have few pairs within 7 to compare: only with
     * SIMSTORE_DENSE. */
    for (int shape = test_dense() ? 0 : 1; shape < SHAPES; shape++) {
        corpus c = make_corpus(&r, shape, n, SIMSTORE_MAX_K);
        simstore *built_for[SIMSTORE_MAX_K + 1] = {NULL};
        char *paths[SIMSTORE_MAX_K + 1 + NDESIGNS] = {NULL};
        char name[64];
        for (unsigned k = 1; k <= SIMSTORE_MAX_K; k++) {
            snprintf(name, sizeof name, "%s-built-k%u", shape_names[shape], k);
            paths[k] = test_path(dir, name);
            built_for[k] = make_store(paths[k], &c, k);
        }
        for (unsigned i = 0; i < NDESIGNS; i++) {
            snprintf(name, sizeof name, "%s-k%u-t%u", shape_names[shape], designs[i].k,
                     designs[i].tables);
            char *path = paths[SIMSTORE_MAX_K + 1 + i] = test_path(dir, name);
            simstore *s = make_store_design(path, &c, designs[i].k, designs[i].tables, 0);
            simstore_stats st;
            assert_int_equal(simstore_get_stats(s, &st), 0);
            assert_int_equal(st.k, designs[i].k);
            if (designs[i].tables)
                assert_int_equal(st.tables, designs[i].tables);
            for (unsigned k = designs[i].k + 1; k <= SIMSTORE_MAX_K; k++) {
                char what[128];
                snprintf(what, sizeof what, "%s at K = %u", name, k);
                fprintf(stderr, "  %s\n", what);
                text want = brute_pairs(&c, k), one = store_pairs(s, k, 1, 0),
                     two = store_pairs(s, k, 2, 0), ref = store_pairs(built_for[k], k, 2, 0);
                text_equal(&ref, &want, "a store built for K");
                text_equal(&one, &want, what);
                text_equal(&two, &want, what);
                free(want.buf);
                free(one.buf);
                free(two.buf);
                free(ref.buf);
                want = brute_by_fingerprint(&c, k);
                text got = store_pairs(s, k, 2, SIMSTORE_PAIRS_BY_FINGERPRINT);
                ref = store_pairs(built_for[k], k, 1, SIMSTORE_PAIRS_BY_FINGERPRINT);
                text_equal(&ref, &want, "by fingerprint, a store built for K");
                text_equal(&got, &want, "by fingerprint");
                free(want.buf);
                free(got.buf);
                free(ref.buf);
                for (int mode = 0; mode < 2; mode++) {
                    int keep = (int)(k + i + (unsigned)mode) % 4, singletons = (int)(k % 2);
                    g_keep = (simstore_keep_rule)keep;
                    simstore_cluster_summary s1, s2;
                    want = brute_clusters(&c, k, (simstore_cluster_mode)mode, singletons);
                    got = store_clusters(s, k, 2, (simstore_cluster_mode)mode,
                                         (simstore_keep_rule)keep, singletons, &s1);
                    ref = store_clusters(built_for[k], k, 1, (simstore_cluster_mode)mode,
                                         (simstore_keep_rule)keep, singletons, &s2);
                    text_equal(&ref, &want, "clusters of a store built for K");
                    text_equal(&got, &want, "clusters");
                    assert_memory_equal(&s1, &s2, sizeof s1);
                    free(want.buf);
                    free(got.buf);
                    free(ref.buf);
                }
                /* Components by spilling take the same joined pairs. */
                simstore_cluster_summary in_memory, spilled;
                scan_spill_stats stats;
                g_keep = SIMSTORE_KEEP_MIN_ID;
                want = brute_clusters(&c, k, SIMSTORE_CLUSTER_COMPONENTS, 1);
                text mem = components_in(s, k, 2, SIMSTORE_KEEP_MIN_ID, 1, 64u << 20, 0, &in_memory,
                                         &stats);
                assert_int_equal(stats.runs, 0);
                got =
                    components_in(s, k, 2, SIMSTORE_KEEP_MIN_ID, 1, 16u << 20, 1, &spilled, &stats);
                assert_int_equal(stats.runs, 1);
                text_equal(&mem, &want, "components in memory");
                text_equal(&got, &want, "components spilled");
                assert_memory_equal(&spilled, &in_memory, sizeof spilled);
                free(want.buf);
                free(mem.buf);
                free(got.buf);
            }
            simstore_close(s);
        }
        for (unsigned k = 1; k <= SIMSTORE_MAX_K; k++)
            simstore_close(built_for[k]);
        for (unsigned i = 0; i < SIMSTORE_MAX_K + 1 + NDESIGNS; i++) {
            if (paths[i]) {
                test_rmtree(paths[i]);
                free(paths[i]);
            }
        }
        free(c.docs);
    }
    test_rmtree(dir);
    free(dir);
}

/* Above the design the fingerprints are joined under a design for the
 * distance: in memory when 8 bytes each plus 16 a join thread fit in half
 * of memory_bytes, else through each thread's spilling sorter. Both give
 * what a store built for that distance gives. */
static void test_pairs_beyond_design__in_memory_or_spilled(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "pairs beyond design memory", 72);
    char *dir = test_tmpdir("beyond-mem");
    corpus c = make_corpus(&r, UNIFORM, 80000, 5);
    simstore *s[2];
    char *paths[2];
    for (int i = 0; i < 2; i++) {
        paths[i] = test_path(dir, i ? "k7" : "k3");
        simstore_build_options o;
        simstore_build_options_init(&o);
        o.k = i ? 7 : 3;
        o.fingerprint_only = 1;
        o.memory_bytes = 16u << 20;
        simstore_builder *b;
        assert_int_equal(simstore_build_begin(paths[i], &o, &b), 0);
        for (size_t j = 0; j < c.n; j++)
            assert_int_equal(simstore_builder_add_fp(b, c.docs[j].fp), 0);
        assert_int_equal(simstore_builder_finish(b), 0);
        assert_int_equal(simstore_open(paths[i], 0, &s[i]), 0);
    }
    /* 80,000 fingerprints on 8 threads need about 13 MiB in memory, more
     * than half of the 16 MiB floor: each thread sorts its tables through
     * sorted runs on disk instead, with the same answer, pairs and
     * clusters alike. */
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.k = 7;
    o.threads = 8;
    o.memory_bytes = 1; /* raised to the 16 MiB floor */
    text got = {0}, want = {0};
    assert_int_equal(simstore_pairs(s[0], &o, 0, pair_line, &got), 0);
    simstore_scan_options ob = o;
    ob.threads = 2;
    ob.memory_bytes = (uint64_t)1 << 30;
    assert_int_equal(simstore_pairs(s[1], &ob, 0, pair_line, &want), 0);
    assert_true(want.len > 0);
    text_equal(&got, &want, "pairs at 7 of a store built for 3, through sorted runs");
    free(got.buf);
    free(want.buf);
    memset(&got, 0, sizeof got);
    memset(&want, 0, sizeof want);
    simstore_cluster_options co;
    simstore_cluster_options_init(&co);
    co.scan = o;
    assert_int_equal(simstore_clusters(s[0], &co, member_line, &got, NULL), 0);
    co.scan = ob;
    assert_int_equal(simstore_clusters(s[1], &co, member_line, &want, NULL), 0);
    text_equal(&got, &want, "clusters at 7 of a store built for 3, through sorted runs");
    free(got.buf);
    free(want.buf);
    memset(&got, 0, sizeof got);
    memset(&want, 0, sizeof want);
    /* One thread with room for the array: in memory, the same answer. */
    o.threads = 1;
    o.memory_bytes = (uint64_t)64 << 20;
    assert_int_equal(simstore_pairs(s[0], &o, 0, pair_line, &got), 0);
    assert_int_equal(simstore_pairs(s[1], &ob, 0, pair_line, &want), 0);
    text_equal(&got, &want, "pairs at 7 of a store built for 3, in memory");
    free(got.buf);
    free(want.buf);
    for (int i = 0; i < 2; i++) {
        simstore_close(s[i]);
        test_rmtree(paths[i]);
        free(paths[i]);
    }
    free(c.docs);
    test_rmtree(dir);
    free(dir);
}

static void fingerprint_only_and_empty(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "pairs fp-only", 5);
    char *dir = test_tmpdir("pairs-fp");
    char *path = test_path(dir, "fp");
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    o.fingerprint_only = 1;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    corpus c = make_corpus(&r, CLUSTERED, 500, 3);
    for (size_t i = 0; i < c.n; i++)
        assert_int_equal(simstore_builder_add_fp(b, c.docs[i].fp), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, 0, &s), 0);
    /* Fingerprints once each; distance 0 never (a fingerprint is stored once). */
    text want = brute_by_fingerprint(&c, 3);
    text got = {0};
    {
        /* Remove the counts (1 each in a fingerprint-only store, so the
         * brute force's "count > 1" distance-0 lines do not occur). */
        simstore_scan_options so;
        simstore_scan_options_init(&so);
        assert_int_equal(simstore_pairs(s, &so, SIMSTORE_PAIRS_BY_FINGERPRINT, pair_line, &got), 0);
    }
    /* Brute force counts repeated fingerprints; dedupe the corpus first. */
    free(want.buf);
    for (size_t i = 0; i < c.n; i++)
        for (size_t j = 0; j < i; j++)
            if (c.docs[j].fp == c.docs[i].fp && !c.docs[j].deleted)
                c.docs[i].deleted = 1;
    want = brute_by_fingerprint(&c, 3);
    text_equal(&got, &want, "fingerprint-only pairs");
    free(got.buf);
    free(want.buf);
    simstore_cluster_summary sum;
    g_keep = SIMSTORE_KEEP_MIN_ID;
    text cl = store_clusters(s, 3, 2, SIMSTORE_CLUSTER_COMPONENTS, SIMSTORE_KEEP_MIN_ID, 1, &sum);
    size_t distinct = 0;
    for (size_t i = 0; i < c.n; i++)
        distinct += !c.docs[i].deleted;
    assert_int_equal(sum.documents, distinct); /* every fingerprint, singletons too */
    free(cl.buf);
    /* The spilling path: documents are fingerprints, ids their hex (which
     * sorts as they do); every rank is 0, so keep first is keep min-id. */
    for (size_t i = 0; i < c.n; i++)
        snprintf(c.docs[i].id, sizeof c.docs[i].id, "%016llx", (unsigned long long)c.docs[i].fp);
    for (int keep = 0; keep < 2; keep++) {
        for (int singletons = 0; singletons < 2; singletons++) {
            g_keep = (simstore_keep_rule)keep;
            text cwant = brute_clusters(&c, 3, SIMSTORE_CLUSTER_COMPONENTS, singletons);
            simstore_cluster_summary in_memory, spilled;
            scan_spill_stats stats;
            text mem = components_in(s, 3, 2, (simstore_keep_rule)keep, singletons, 0, 0,
                                     &in_memory, &stats);
            text cgot = components_in(s, 3, 2, (simstore_keep_rule)keep, singletons, 0, 1, &spilled,
                                      &stats);
            assert_int_equal(stats.runs, 1);
            text_equal(&mem, &cwant, "fingerprint-only components in memory");
            text_equal(&cgot, &cwant, "fingerprint-only components, spilled");
            assert_memory_equal(&spilled, &in_memory, sizeof spilled);
            free(cwant.buf);
            free(mem.buf);
            free(cgot.buf);
        }
    }
    simstore_close(s);

    /* An empty store: no pairs, no clusters. */
    char *empty = test_path(dir, "empty");
    assert_int_equal(simstore_build_begin(empty, NULL, &b), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(simstore_open(empty, 0, &s), 0);
    text e = store_pairs(s, 3, 2, 0);
    assert_int_equal(e.len, 0);
    text ec = store_clusters(s, 3, 2, SIMSTORE_CLUSTER_STAR, SIMSTORE_KEEP_FIRST, 1, &sum);
    assert_int_equal(ec.len, 0);
    assert_int_equal(sum.documents, 0);
    for (int singletons = 0; singletons < 2; singletons++) {
        scan_spill_stats stats;
        sum.documents = 1;
        text sc = components_in(s, 3, 2, SIMSTORE_KEEP_FIRST, singletons, 0, 1, &sum, &stats);
        assert_int_equal(stats.runs, 1);
        assert_int_equal(sc.len, 0);
        assert_int_equal(sum.documents + sum.clusters + sum.dropped + sum.largest, 0);
    }
    /* k above the design: no pairs, none read; above SIMSTORE_MAX_K: refused. */
    simstore_scan_options so;
    simstore_scan_options_init(&so);
    so.k = 4;
    assert_int_equal(simstore_pairs(s, &so, 0, pair_line, &e), 0);
    assert_int_equal(e.len, 0);
    so.k = SIMSTORE_MAX_K + 1;
    assert_int_equal(simstore_pairs(s, &so, 0, pair_line, &e), SIMSTORE_ERANGE);
    simstore_cluster_options co;
    simstore_cluster_options_init(&co);
    co.scan.k = SIMSTORE_MAX_K + 1;
    assert_int_equal(simstore_clusters(s, &co, member_line, &e, NULL), SIMSTORE_ERANGE);
    simstore_close(s);
    free(c.docs);
    free(path);
    free(empty);
    test_rmtree(dir);
    free(dir);
}

static int fp_pair_line(void *ctx, uint64_t a, uint64_t b, unsigned d)
{
    test_text_add((text *)ctx, "%016llx %016llx %u\n", (unsigned long long)a, (unsigned long long)b,
                  d);
    return 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* A tight cluster sharing every table prefix (the join's enumeration), a
 * wide one sharing a 32-bit prefix (its splits), and uniform values. */
static void big_prefix_group(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "pairs big group", 9);
    size_t n = 12000;
    uint64_t *fps = malloc(n * sizeof *fps);
    uint64_t centre = test_rng_next(&r);
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 0)
            fps[i] = flip_bits(&r, centre, 1 + (unsigned)test_rng_below(&r, 4));
        else if (i % 3 == 1)
            fps[i] = (centre & 0xFFFFFFFF00000000ULL) | (test_rng_next(&r) >> 32);
        else
            fps[i] = test_rng_next(&r);
    }
    for (unsigned k = 1; k <= 7; k += 2) {
        text got = {0}, got1 = {0}, want = {0};
        simstore_scan_options o;
        simstore_scan_options_init(&o);
        o.threads = 2;
        assert_int_equal(simstore_join_fingerprints(fps, n, k, &o, fp_pair_line, &got), 0);
        o.threads = 1;
        assert_int_equal(simstore_join_fingerprints(fps, n, k, &o, fp_pair_line, &got1), 0);
        uint64_t *u = malloc(n * sizeof *u);
        memcpy(u, fps, n * sizeof *u);
        qsort(u, n, sizeof *u, cmp_u64);
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (!w || u[w - 1] != u[i])
                u[w++] = u[i];
        for (size_t i = 0; i < w; i++)
            for (size_t j = i + 1; j < w; j++) {
                unsigned d = simstore_distance(u[i], u[j]);
                if (d <= k)
                    test_text_add(&want, "%016llx %016llx %u\n", (unsigned long long)u[i],
                                  (unsigned long long)u[j], d);
            }
        text_equal(&got, &want, "join of an array");
        text_equal(&got1, &want, "join of an array, 1 thread");
        free(u);
        free(got.buf);
        free(got1.buf);
        free(want.buf);
    }
    free(fps);
}

typedef struct fp_pairs {
    uint64_t (*v)[3];
    size_t n, cap;
} fp_pairs;

static int keep_fp_pair(void *ctx, uint64_t a, uint64_t b, unsigned d)
{
    fp_pairs *p = (fp_pairs *)ctx;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->v = realloc(p->v, p->cap * sizeof *p->v);
        assert_non_null(p->v);
    }
    p->v[p->n][0] = a;
    p->v[p->n][1] = b;
    p->v[p->n][2] = d;
    p->n++;
    return 0;
}

static int cmp_fp_pair(const void *x, const void *y)
{
    const uint64_t *a = (const uint64_t *)x, *b = (const uint64_t *)y;
    return a[0] != b[0] ? (a[0] > b[0]) - (a[0] < b[0]) : (a[1] > b[1]) - (a[1] < b[1]);
}

/* The join spread over processes, in one: every table of a plan permuted,
 * sorted by simstore_join_plan_sort and joined by simstore_join_plan_table
 * gives, over all tables, the pairs of simstore_join_fingerprints, each
 * once; values out of order and a table out of range are refused. */
static void join_plan_tables_equal_the_join(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "join plan", 10);
    size_t n = 4000;
    uint64_t *fps = malloc(n * sizeof *fps), *perm = malloc(n * sizeof *perm);
    uint64_t centre = test_rng_next(&r);
    for (size_t i = 0; i < n; i++)
        fps[i] = i % 3 == 0   ? flip_bits(&r, centre, 1 + (unsigned)test_rng_below(&r, 4))
                 : i % 3 == 1 ? (centre & 0xFFFFFFFF00000000ULL) | (test_rng_next(&r) >> 32)
                              : test_rng_next(&r);
    fps[7] = fps[8]; /* a repeat: skipped */
    for (unsigned k = 1; k <= 7; k += 3) {
        text want = {0}, got = {0};
        simstore_scan_options o;
        simstore_scan_options_init(&o);
        assert_int_equal(simstore_join_fingerprints(fps, n, k, &o, fp_pair_line, &want), 0);
        simstore_join_plan *plan;
        assert_int_equal(simstore_join_plan_new(k, n, &plan), 0);
        unsigned tables = simstore_join_plan_tables(plan);
        assert_true(tables >= 1);
        fp_pairs pairs = {0};
        for (unsigned t = 0; t < tables; t++) {
            for (size_t i = 0; i < n; i++)
                perm[i] = simstore_join_plan_permute(plan, t, fps[i]);
            assert_int_equal(simstore_join_plan_sort(plan, t, perm, n), 0);
            for (size_t i = 1; i < n; i++)
                assert_true(perm[i - 1] <= perm[i]);
            assert_int_equal(simstore_join_plan_table(plan, t, perm, n, 0, keep_fp_pair, &pairs),
                             0);
        }
        qsort(pairs.v, pairs.n, sizeof *pairs.v, cmp_fp_pair);
        for (size_t i = 0; i < pairs.n; i++)
            test_text_add(&got, "%016llx %016llx %u\n", (unsigned long long)pairs.v[i][0],
                          (unsigned long long)pairs.v[i][1], (unsigned)pairs.v[i][2]);
        text_equal(&got, &want, "the plan's tables against the join");
        /* Out of order, and no such table. */
        perm[0] = UINT64_MAX;
        assert_int_equal(simstore_join_plan_table(plan, 0, perm, n, 0, keep_fp_pair, &pairs),
                         SIMSTORE_EINVAL);
        assert_int_equal(simstore_join_plan_sort(plan, tables, perm, n), SIMSTORE_EINVAL);
        assert_int_equal(simstore_join_plan_sort(plan, 0, NULL, 1), SIMSTORE_EINVAL);
        simstore_join_plan_free(plan);
        free(pairs.v);
        free(want.buf);
        free(got.buf);
    }
    free(perm);
    free(fps);
}

static int count_fp_pair(void *ctx, uint64_t a, uint64_t b, unsigned d)
{
    assert_int_equal(d, simstore_distance(a, b));
    ++*(uint64_t *)ctx;
    return 0;
}

/* A prefix group bigger than the join's share of the memory budget: a clear
 * SIMSTORE_EFULL naming the group, not an allocation past the budget; with
 * more memory the same join gives every pair. 2^19 values that differ only
 * in their low 19 bits: each has 19 neighbours at distance 1. */
static void group_past_memory_budget(void **state)
{
    (void)state;
    size_t n = (size_t)1 << 19;
    uint64_t *fps = malloc(n * sizeof *fps);
    for (size_t i = 0; i < n; i++)
        fps[i] = UINT64_C(0x5DEECE66D0000000) ^ (uint64_t)i;
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.threads = 2;
    o.memory_bytes = (uint64_t)16 << 20;
    uint64_t count = 0;
    assert_int_equal(simstore_join_fingerprints(fps, n, 1, &o, count_fp_pair, &count),
                     SIMSTORE_EFULL);
    assert_non_null(strstr(simstore_last_error(), "prefix group of"));
    assert_non_null(strstr(simstore_last_error(), "--memory"));
    o.memory_bytes = (uint64_t)256 << 20;
    count = 0;
    assert_int_equal(simstore_join_fingerprints(fps, n, 1, &o, count_fp_pair, &count), 0);
    assert_int_equal(count, (uint64_t)n * 19 / 2);
    free(fps);
}

/* ---- components by spilling at scale -------------------------------------------------------- */

static size_t uf_root(size_t *parent, size_t x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

typedef struct labels {
    uint64_t *node, *root;
    size_t n, cap;
} labels;

static int note_label(void *ctx, uint64_t node, uint64_t root)
{
    labels *l = (labels *)ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->node = realloc(l->node, l->cap * sizeof *l->node);
        l->root = realloc(l->root, l->cap * sizeof *l->root);
        assert_true(l->node && l->root);
    }
    l->node[l->n] = node;
    l->root[l->n++] = root;
    return 0;
}

/* The rounds of the spilling path on the graph of edges[0..2n) against
 * union-find: every node once, in order, with its component's smallest
 * node. Returns the rounds. */
static uint64_t check_components(const char *what, const uint64_t *edges, size_t n,
                                 unsigned *spilled)
{
    uint64_t *nodes = malloc((2 * n + 1) * sizeof *nodes);
    size_t *parent = malloc((2 * n + 1) * sizeof *parent);
    assert_true(nodes && parent);
    memcpy(nodes, edges, 2 * n * sizeof *nodes);
    qsort(nodes, 2 * n, sizeof *nodes, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < 2 * n; i++)
        if (m == 0 || nodes[m - 1] != nodes[i])
            nodes[m++] = nodes[i];
    for (size_t i = 0; i < m; i++)
        parent[i] = i;
    for (size_t e = 0; e < n; e++) {
        size_t a =
            (size_t)((uint64_t *)bsearch(&edges[2 * e], nodes, m, sizeof *nodes, cmp_u64) - nodes);
        size_t b =
            (size_t)((uint64_t *)bsearch(&edges[2 * e + 1], nodes, m, sizeof *nodes, cmp_u64) -
                     nodes);
        size_t x = uf_root(parent, a), y = uf_root(parent, b);
        if (x != y)
            parent[x > y ? x : y] = x < y ? x : y; /* the root: the smallest node */
    }
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.memory_bytes = 16u << 20;
    labels got = {0};
    scan_spill_stats stats = {0};
    assert_int_equal(sims_scan_spill_components(edges, n, &o, note_label, &got, &stats), 0);
    fprintf(stderr, "  %s: %zu nodes, %zu edges, %llu rounds, %llu runs spilled\n", what, m, n,
            (unsigned long long)stats.rounds, (unsigned long long)stats.spilled_runs);
    assert_int_equal(got.n, m);
    for (size_t i = 0; i < m; i++) {
        if (got.node[i] != nodes[i] || got.root[i] != nodes[uf_root(parent, i)])
            fprintf(stderr, "%s: node %zu: got %llu in %llu, want %llu in %llu\n", what, i,
                    (unsigned long long)got.node[i], (unsigned long long)got.root[i],
                    (unsigned long long)nodes[i], (unsigned long long)nodes[uf_root(parent, i)]);
        assert_true(got.node[i] == nodes[i] && got.root[i] == nodes[uf_root(parent, i)]);
    }
    if (spilled)
        *spilled = (unsigned)stats.spilled_runs;
    free(got.node);
    free(got.root);
    free(nodes);
    free(parent);
    return stats.rounds;
}

/* Graphs whose labels are hard on the rounds, straight through the
 * spilling path's component finding: a zigzag (every edge joins a local
 * minimum to a larger node, so the first large star changes nothing and
 * only the small star goes on), paths labelled in order, alternately, at
 * random, stars around their largest and smallest node, many random
 * components with repeated and reversed edges, and a random graph big
 * enough to spill at the 16 MiB floor. */
static void test_clusters_spill__components(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "clusters components", 44);
    size_t cap = 400000, n;
    uint64_t *e = malloc(2 * cap * sizeof *e);
    assert_non_null(e);
    const size_t len = 5000;
    uint64_t *perm = malloc(len * sizeof *perm);
    assert_non_null(perm);

    n = 0;
    for (size_t i = 0; i + 1 < len / 2; i++) { /* L_i = i + 1 < H_i > L_(i+1) */
        e[2 * n] = i + 1;
        e[2 * n++ + 1] = 1000000 + i;
        e[2 * n] = 1000000 + i;
        e[2 * n++ + 1] = i + 2;
    }
    assert_true(check_components("zigzag", e, n, NULL) <= 40);

    for (int order = 0; order < 3; order++) {
        for (size_t i = 0; i < len; i++)
            perm[i] = order == 0 ? i + 1 : order == 1 ? (i % 2 ? len - i / 2 : i / 2 + 1) : 0;
        if (order == 2) {
            for (size_t i = 0; i < len; i++)
                perm[i] = i + 1;
            for (size_t i = len - 1; i > 0; i--) {
                size_t j = (size_t)test_rng_below(&r, i + 1);
                uint64_t t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
        }
        n = 0;
        for (size_t i = 0; i + 1 < len; i++) {
            e[2 * n] = perm[i];
            e[2 * n++ + 1] = perm[i + 1];
        }
        const char *names[3] = {"path in order", "path alternating", "path at random"};
        /* Rounds grow with log n, not with the path's length. */
        assert_true(check_components(names[order], e, n, NULL) <= 40);
    }

    for (int big = 0; big < 2; big++) {
        n = 0;
        for (size_t i = 0; i + 1 < len; i++) {
            e[2 * n] = big ? len : 1;
            e[2 * n++ + 1] = big ? i + 1 : i + 2;
        }
        check_components(big ? "star around the largest" : "star around the smallest", e, n, NULL);
    }

    /* Many components: random edges among few nodes of random labels,
     * some repeated, some reversed. */
    size_t nodes = 20000;
    uint64_t *label = malloc(nodes * sizeof *label);
    assert_non_null(label);
    for (size_t i = 0; i < nodes; i++)
        label[i] = test_rng_next(&r);
    n = 0;
    while (n < 14000) {
        size_t a = (size_t)test_rng_below(&r, nodes), b = (size_t)test_rng_below(&r, nodes);
        if (a == b)
            continue;
        e[2 * n] = label[a];
        e[2 * n++ + 1] = label[b];
        if (n % 50 == 0) {
            e[2 * n] = label[b];
            e[2 * n++ + 1] = label[a];
        }
    }
    check_components("many components", e, n, NULL);

    /* Spilling: 400000 random edges over 200000 nodes. */
    label = realloc(label, 200000 * sizeof *label);
    assert_non_null(label);
    for (size_t i = 0; i < 200000; i++)
        label[i] = test_rng_next(&r);
    n = 0;
    while (n < cap) {
        size_t a = (size_t)test_rng_below(&r, 200000), b = (size_t)test_rng_below(&r, 200000);
        if (a != b) {
            e[2 * n] = label[a];
            e[2 * n++ + 1] = label[b];
        }
    }
    unsigned spilled = 0;
    check_components("random, spilled", e, n, &spilled);
    assert_true(spilled > 0);

    /* No edges: no nodes. */
    check_components("empty", e, 0, NULL);
    free(label);
    free(perm);
    free(e);
}

/* A chain a0 - a1 - a2 - ...: each fingerprint one bit from the previous
 * (never the bit flipped just before), so that its component's diameter is
 * about n / k; ids scrambled against the chain's order. */
static corpus make_chain(test_rng *r, size_t n)
{
    corpus c = {calloc(n, sizeof(doc)), n};
    assert_non_null(c.docs);
    uint64_t fp = test_rng_next(r);
    unsigned last = 64;
    for (size_t i = 0; i < n; i++) {
        unsigned bit;
        do
            bit = (unsigned)test_rng_below(r, 64);
        while (bit == last);
        if (i)
            fp ^= UINT64_C(1) << bit;
        last = bit;
        c.docs[i].fp = fp;
        snprintf(c.docs[i].id, sizeof c.docs[i].id, "chain-%05zu", (i * 7919) % n);
        c.docs[i].len = i % 5 == 4 ? -1 : (double)test_rng_below(r, 50);
    }
    return c;
}

static int stop_at_five(void *ctx, const simstore_cluster_member *m)
{
    (void)m;
    return ++*(int *)ctx == 5 ? 77 : 0;
}

/* The adversarial case for label propagation: one component of thousands
 * of documents along a chain, in a store of one piece (k = 1, where one
 * deleted document would cut it) and of two segments with every 7th
 * document deleted (k = 3, which keeps it whole). */
static void test_clusters_spill__chain(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "clusters chain", 21);
    char *dir = test_tmpdir("chain");
    size_t n = 4000;
    corpus c = make_chain(&r, n);
    for (unsigned k = 1; k <= 3; k += 2) {
        char name[32];
        snprintf(name, sizeof name, "chain-k%u", k);
        char *path = test_path(dir, name);
        for (size_t i = 0; i < n; i++)
            c.docs[i].deleted = 0;
        simstore *s = make_store_ex(path, &c, k, k == 1);
        uint64_t live = 0;
        for (size_t i = 0; i < n; i++)
            live += !c.docs[i].deleted;
        for (int keep = 0; keep < 4; keep += 3) {
            for (int singletons = 0; singletons < 2; singletons++) {
                g_keep = (simstore_keep_rule)keep;
                text want = brute_clusters(&c, k, SIMSTORE_CLUSTER_COMPONENTS, singletons);
                simstore_cluster_summary in_memory, spilled;
                scan_spill_stats stats;
                text mem = components_in(s, k, 2, (simstore_keep_rule)keep, singletons, 0, 0,
                                         &in_memory, &stats);
                text got = components_in(s, k, 2, (simstore_keep_rule)keep, singletons, 0, 1,
                                         &spilled, &stats);
                fprintf(stderr, "  %s keep %d singletons %d: %llu edges, %llu rounds\n", name, keep,
                        singletons, (unsigned long long)stats.edges,
                        (unsigned long long)stats.rounds);
                assert_int_equal(stats.runs, 1);
                /* Rounds grow with log n, not with the diameter (~n / k). */
                assert_true(stats.rounds <= 40);
                text_equal(&got, &want, "spilled components of a chain");
                text_equal(&mem, &want, "components of a chain in memory");
                assert_memory_equal(&spilled, &in_memory, sizeof spilled);
                assert_int_equal(spilled.clusters, 1);
                assert_int_equal(spilled.documents, live);
                assert_int_equal(spilled.largest, live);
                free(want.buf);
                free(mem.buf);
                free(got.buf);
            }
        }
        /* The callback's nonzero value stops the spilling run. */
        simstore_cluster_options o;
        simstore_cluster_options_init(&o);
        o.scan.k = k;
        int seen = 0;
        sims_scan_clusters_force_spill(1);
        int rc = simstore_clusters(s, &o, stop_at_five, &seen, NULL);
        sims_scan_clusters_force_spill(0);
        assert_int_equal(rc, 77);
        assert_int_equal(seen, 5);
        simstore_close(s);
        test_rmtree(path);
        free(path);
    }
    free(c.docs);
    test_rmtree(dir);
    free(dir);
}

/* n documents in groups of `group`: a random centre and group - 1
 * fingerprints one bit from it (so within 2 of each other), but every 5th
 * group random (singletons); ids "big-NNNNNNN", scrambled against
 * insertion order. */
static corpus make_groups(test_rng *r, size_t n, size_t group)
{
    corpus c = {calloc(n, sizeof(doc)), n};
    assert_non_null(c.docs);
    uint64_t centre = 0;
    for (size_t i = 0; i < n; i++) {
        if (i % group == 0)
            centre = test_rng_next(r);
        c.docs[i].fp = i % group ? flip_bits(r, centre, 1) : centre;
        if (i / group % 5 == 4)
            c.docs[i].fp = test_rng_next(r);
        snprintf(c.docs[i].id, sizeof c.docs[i].id, "big-%07zu", (i * 7919) % n);
        c.docs[i].len = i % 5 == 4 ? -1 : (double)test_rng_below(r, 50);
    }
    return c;
}

typedef struct union_find {
    const corpus *c;
    size_t *parent;
    size_t *index_of; /* corpus index of id "big-N" */
} union_find;

/* Join the components of a pair's documents under the one first in keep
 * order. */
static int union_pair(void *ctx, const simstore_pair *p)
{
    union_find *u = (union_find *)ctx;
    size_t a = u->index_of[strtoul(p->id_a + 4, NULL, 10)];
    size_t b = u->index_of[strtoul(p->id_b + 4, NULL, 10)];
    size_t x = uf_root(u->parent, a), y = uf_root(u->parent, b);
    if (x != y) {
        if (keep_cmp(&u->c->docs[x], &u->c->docs[y]) < 0)
            u->parent[y] = x;
        else
            u->parent[x] = y;
    }
    return 0;
}

/* The reference where the brute force is too slow: union-find over the
 * store's pairs (simstore_pairs, itself checked against the brute force by
 * `sweep`), members ordered as simstore_clusters orders them. */
static text pairs_clusters(simstore *s, const corpus *c, unsigned k, int singletons)
{
    size_t n = c->n;
    union_find u = {c, malloc(n * sizeof(size_t)), malloc(n * sizeof(size_t))};
    size_t *size = calloc(n, sizeof *size);
    bmember *m = malloc(n * sizeof *m);
    assert_true(u.parent && u.index_of && size && m);
    for (size_t i = 0; i < n; i++) {
        u.parent[i] = i;
        u.index_of[(i * 7919) % n] = i;
    }
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    o.k = k;
    assert_int_equal(simstore_pairs(s, &o, 0, union_pair, &u), 0);
    for (size_t i = 0; i < n; i++)
        if (!c->docs[i].deleted)
            size[uf_root(u.parent, i)]++;
    size_t nm = 0;
    for (size_t i = 0; i < n; i++) {
        size_t root = uf_root(u.parent, i);
        if (!c->docs[i].deleted && (size[root] > 1 || singletons))
            m[nm++] = (bmember){&c->docs[i], &c->docs[root]};
    }
    qsort(m, nm, sizeof *m, cmp_bmember);
    text t = {0};
    for (size_t i = 0; i < nm; i++)
        test_text_add(&t, "%s\t%s\t%d\t%u\n", m[i].kept->id, m[i].d->id, m[i].d == m[i].kept,
                      simstore_distance(m[i].d->fp, m[i].kept->fp));
    free(u.parent);
    free(u.index_of);
    free(size);
    free(m);
    return t;
}

/* At the 16 MiB floor, stores whose graph does not fit it: the spilling
 * path, forced or chosen because the in-memory graph outgrew the budget
 * (while collecting the edges of the first store, while reading the
 * documents of the second), with its sorters spilled to disk, gives the
 * reference's bytes and the in-memory path's summary; and so it does on a
 * fingerprint-only store of the first store's fingerprints. */
static void test_clusters_spill__tiny_budget(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "clusters tiny budget", 33);
    char *dir = test_tmpdir("tiny");
    const size_t sizes[2] = {300000, 240000};
    for (int shape = 0; shape < 2; shape++) {
        corpus c = make_groups(&r, sizes[shape], 8);
        char *path = test_path(dir, shape ? "docs" : "edges");
        simstore *s = make_store(path, &c, 3);
        int keep = shape ? SIMSTORE_KEEP_MAX_KEY : SIMSTORE_KEEP_FIRST;
        g_keep = (simstore_keep_rule)keep;
        for (int singletons = 0; singletons < 2; singletons++) {
            /* Sampled (the sanitizer pass): one of the two a store. */
            if (test_sampled() && singletons != shape)
                continue;
            text want = pairs_clusters(s, &c, 3, singletons);
            simstore_cluster_summary in_memory, forced, chosen;
            scan_spill_stats stats;
            text mem = components_in(s, 3, 2, (simstore_keep_rule)keep, singletons, 1u << 30, 0,
                                     &in_memory, &stats);
            assert_int_equal(stats.runs, 0);
            text_equal(&mem, &want, "components in memory");
            text got = components_in(s, 3, 2, (simstore_keep_rule)keep, singletons, 16u << 20, 1,
                                     &forced, &stats);
            fprintf(stderr,
                    "  %s keep %d singletons %d: %llu documents, %llu edges, "
                    "%llu rounds, %llu runs spilled\n",
                    shape ? "docs" : "edges", keep, singletons,
                    (unsigned long long)forced.documents, (unsigned long long)stats.edges,
                    (unsigned long long)stats.rounds, (unsigned long long)stats.spilled_runs);
            assert_int_equal(stats.runs, 1);
            assert_true(stats.spilled_runs > 0);
            text_equal(&got, &want, "spilled components at 16 MiB");
            assert_memory_equal(&forced, &in_memory, sizeof forced);
            free(got.buf);
            got = components_in(s, 3, 2, (simstore_keep_rule)keep, singletons, 16u << 20, 0,
                                &chosen, &stats);
            assert_int_equal(stats.runs, 1); /* it did not fit */
            assert_true(stats.spilled_runs > 0);
            text_equal(&got, &want, "components at 16 MiB");
            assert_memory_equal(&chosen, &in_memory, sizeof chosen);
            free(got.buf);
            free(want.buf);
            free(mem.buf);
        }
        simstore_close(s);
        test_rmtree(path);
        free(path);
        if (shape == 0) {
            /* The same fingerprints in a fingerprint-only store (whose
             * singletons come from a sort of every stored fingerprint):
             * the spilling path against the in-memory one. */
            char *fpath = test_path(dir, "fp");
            simstore_build_options o;
            simstore_build_options_init(&o);
            o.k = 3;
            o.fingerprint_only = 1;
            o.memory_bytes = 16u << 20;
            simstore_builder *b;
            assert_int_equal(simstore_build_begin(fpath, &o, &b), 0);
            for (size_t i = 0; i < c.n; i++)
                assert_int_equal(simstore_builder_add_fp(b, c.docs[i].fp), 0);
            assert_int_equal(simstore_builder_finish(b), 0);
            assert_int_equal(simstore_open(fpath, 0, &s), 0);
            for (int singletons = 0; singletons < 2; singletons++) {
                simstore_cluster_summary in_memory, spilled;
                scan_spill_stats stats;
                text want = components_in(s, 3, 2, SIMSTORE_KEEP_FIRST, singletons, 1u << 30, 0,
                                          &in_memory, &stats);
                assert_int_equal(stats.runs, 0);
                text got = components_in(s, 3, 2, SIMSTORE_KEEP_FIRST, singletons, 16u << 20, 1,
                                         &spilled, &stats);
                assert_int_equal(stats.runs, 1);
                assert_true(stats.spilled_runs > 0);
                text_equal(&got, &want, "fingerprint-only components spilled at 16 MiB");
                assert_memory_equal(&spilled, &in_memory, sizeof spilled);
                free(got.buf);
                free(want.buf);
            }
            simstore_close(s);
            test_rmtree(fpath);
            free(fpath);
        }
        free(c.docs);
    }
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(big_prefix_group),
        cmocka_unit_test(group_past_memory_budget),
        cmocka_unit_test(join_plan_tables_equal_the_join),
        cmocka_unit_test(fingerprint_only_and_empty),
        cmocka_unit_test(sweep),
        cmocka_unit_test(test_pairs_beyond_design__sweep),
        cmocka_unit_test(test_pairs_beyond_design__in_memory_or_spilled),
        cmocka_unit_test(test_clusters_spill__components),
        cmocka_unit_test(test_clusters_spill__chain),
        cmocka_unit_test(test_clusters_spill__tiny_budget),
    };
    /* Sampled (the ThreadSanitizer pass): the cases tests/CMakeLists.txt names. */
    const char *cases = test_sampled_cases();
    if (cases)
        cmocka_set_test_filter(cases);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
