/* test_batch.c: simstore_query_batch() against simstore_query_fp() one by one
 * (itself checked against a brute-force scan by test_store): the same
 * answers, byte for byte (ids, fingerprints, distances, flags, metadata,
 * order), in input order, for k = 0..7 on uniform, clustered and
 * duplicate-heavy stores of several segments with deleted documents, on
 * fingerprint-only and empty stores, for small and large batches, chunked
 * by a small memory budget, on 1 and 2 threads, with every strategy; the
 * callback's stop; argument errors. SIMSTORE_DENSE=1 sweeps more. */
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

enum shape { UNIFORM, CLUSTERED, DUPLICATES, SHAPE_COUNT };
static const char *const shape_names[] = {"uniform", "clustered", "duplicates"};

static int dense(void)
{
    return test_dense();
}

static uint64_t flip_bits(test_rng *r, uint64_t x, unsigned d)
{
    for (unsigned i = 0; i < d; i++)
        x ^= 1ULL << test_rng_below(r, 64);
    return x;
}

/* n fingerprints of a shape: clustered ones share long prefixes (centres with
 * many neighbours a few bits away, in the low bits and anywhere). */
static uint64_t *make_fps(test_rng *r, enum shape shape, size_t n)
{
    uint64_t *v = malloc(n * sizeof *v);
    uint64_t centre = test_rng_next(r);
    for (size_t i = 0; i < n; i++) {
        switch (shape) {
        case UNIFORM: v[i] = test_rng_next(r); break;
        case CLUSTERED:
            if (i % 50 == 0)
                centre = test_rng_next(r);
            v[i] = (i & 1) ? flip_bits(r, centre, (unsigned)test_rng_below(r, 9))
                           : centre ^ (test_rng_next(r) & 0xFFFFF);
            break;
        default: v[i] = (i % 5 == 0 || i == 0) ? test_rng_next(r) : v[test_rng_below(r, i)]; break;
        }
    }
    return v;
}

/* Queries near the stored fingerprints (0..k+1 bits off), repeated ones and
 * random ones. */
static uint64_t *make_queries(test_rng *r, const uint64_t *fps, size_t nfps, size_t n, unsigned k)
{
    uint64_t *q = malloc((n ? n : 1) * sizeof *q);
    for (size_t i = 0; i < n; i++) {
        switch (i % 4) {
        case 0: q[i] = test_rng_next(r); break;
        case 1: q[i] = i >= 4 ? q[test_rng_below(r, i)] : test_rng_next(r); break;
        default:
            q[i] = nfps ? flip_bits(r, fps[test_rng_below(r, nfps)],
                                    (unsigned)test_rng_below(r, k + 2))
                        : test_rng_next(r);
        }
    }
    return q;
}

static void doc_id(char *buf, size_t size, enum shape shape, size_t i)
{
    if (i % 3 == 0)
        snprintf(buf, size, "%zu", i); /* given as an integer */
    else
        snprintf(buf, size, "%s-%zu", shape_names[shape], i);
}

static int add_docs(simstore_builder *b, enum shape shape, const uint64_t *fps, size_t from,
                    size_t to, int fp_only)
{
    for (size_t i = from; i < to; i++) {
        int rc;
        if (fp_only) {
            rc = simstore_builder_add_fp(b, fps[i]);
        } else {
            char id[48], meta[64];
            doc_id(id, sizeof id, shape, i);
            int ml = snprintf(meta, sizeof meta, "{\"n\":%zu}", i);
            simstore_doc d = {
                id, strlen(id), fps[i], i % 4 == 1 ? NULL : meta, i % 4 == 1 ? 0 : (size_t)ml, i};
            d.flags = i % 3 == 0 ? SIMSTORE_DOC_INTEGER_ID : 0;
            rc = simstore_builder_add(b, &d);
        }
        if (rc) {
            simstore_builder_abort(b);
            return rc;
        }
    }
    return simstore_builder_finish(b);
}

/* A store of n documents in three segments (build, then two adds), with
 * every 10th document of the first two deleted. */
static void make_store(const char *path, enum shape shape, const uint64_t *fps, size_t n,
                       unsigned k, int fp_only)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.fingerprint_only = fp_only;
    o.memory_bytes = 16u << 20;
    o.threads = 2;
    o.block_bytes = 256;
    o.expected_fps = n;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    assert_int_equal(add_docs(b, shape, fps, 0, n / 2, fp_only), 0);
    simstore *w;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &w),
                     0);
    for (int seg = 0; seg < 2; seg++) {
        assert_int_equal(simstore_add_begin(w, &o, &b), 0);
        size_t from = n / 2 + (size_t)seg * (n / 4), to = seg ? n : n / 2 + n / 4;
        assert_int_equal(add_docs(b, shape, fps, from, to, fp_only), 0);
    }
    if (!fp_only) {
        size_t nd = 0, cap = n / 10 + 1;
        char **ids = malloc(cap * sizeof *ids);
        size_t *lens = malloc(cap * sizeof *lens);
        for (size_t i = 0; i < n / 2 + n / 4 && nd < cap; i += 10) {
            ids[nd] = malloc(48);
            doc_id(ids[nd], 48, shape, i);
            lens[nd] = strlen(ids[nd]);
            nd++;
        }
        uint64_t deleted = 0;
        assert_int_equal(
            simstore_delete(w, (const char *const *)ids, lens, nd, &deleted, NULL, NULL), 0);
        assert_int_equal(deleted, nd);
        for (size_t i = 0; i < nd; i++)
            free(ids[i]);
        free(ids);
        free(lens);
    }
    simstore_close(w);
}

/* Answers as bytes, one record per query, to compare exactly. */
typedef struct answers {
    char *buf;
    size_t len, cap;
    size_t *start; /* n + 1 offsets */
    size_t n, next;
    const uint64_t *queries;
    int mismatch;
} answers;

static void put(answers *a, const void *p, size_t n)
{
    if (a->len + n > a->cap) {
        a->cap = (a->len + n) * 2 + 1024;
        a->buf = realloc(a->buf, a->cap);
        assert_non_null(a->buf);
    }
    memcpy(a->buf + a->len, p, n);
    a->len += n;
}

static void put_matches(answers *a, const simstore_match *m, size_t count)
{
    put(a, &count, sizeof count);
    for (size_t i = 0; i < count; i++) {
        int has_id = m[i].id != NULL, has_meta = m[i].meta != NULL;
        put(a, &has_id, sizeof has_id);
        put(a, &m[i].id_len, sizeof m[i].id_len);
        if (has_id)
            put(a, m[i].id, m[i].id_len);
        put(a, &m[i].fp, sizeof m[i].fp);
        put(a, &m[i].distance, sizeof m[i].distance);
        put(a, &m[i].flags, sizeof m[i].flags);
        put(a, &has_meta, sizeof has_meta);
        put(a, &m[i].meta_len, sizeof m[i].meta_len);
        if (has_meta)
            put(a, m[i].meta, m[i].meta_len);
    }
}

/* The reference: simstore_query_fp() for each query. */
static answers one_by_one(simstore *s, const uint64_t *q, size_t n, unsigned k, unsigned flags)
{
    answers a = {0};
    a.start = malloc((n + 1) * sizeof *a.start);
    simstore_query *sq;
    assert_int_equal(simstore_query_new(s, flags, &sq), 0);
    for (size_t i = 0; i < n; i++) {
        const simstore_match *m;
        size_t count;
        a.start[i] = a.len;
        assert_int_equal(simstore_query_fp(sq, q[i], k, &m, &count), 0);
        put_matches(&a, m, count);
    }
    a.start[n] = a.len;
    a.n = n;
    simstore_query_free(sq);
    return a;
}

typedef struct compare_ctx {
    const answers *want;
    answers got;
    size_t next;
    const uint64_t *queries;
    size_t bad_index;
} compare_ctx;

static int compare_answer(void *ctx, size_t index, uint64_t fp, const simstore_match *m,
                          size_t count)
{
    compare_ctx *c = (compare_ctx *)ctx;
    if (index != c->next || fp != c->queries[index]) {
        c->bad_index = index;
        return 1000;
    }
    c->next++;
    c->got.len = 0;
    put_matches(&c->got, m, count);
    const answers *w = c->want;
    size_t wl = w->start[index + 1] - w->start[index];
    if (wl != c->got.len || memcmp(w->buf + w->start[index], c->got.buf, wl) != 0) {
        c->bad_index = index;
        return 1001;
    }
    return 0;
}

static void check_batch(simstore *s, const uint64_t *q, size_t n, unsigned k, const answers *want,
                        simstore_batch_strategy strategy, unsigned threads, uint64_t memory,
                        unsigned flags, const char *what)
{
    simstore_batch_options o;
    simstore_batch_options_init(&o);
    o.strategy = strategy;
    o.threads = threads;
    if (memory)
        o.memory_bytes = memory;
    o.flags = flags;
    compare_ctx c = {want, {0}, 0, q, 0};
    int rc = simstore_query_batch(s, q, n, k, &o, compare_answer, &c);
    if (rc != 0 || c.next != n)
        fail_msg("%s: k=%u strategy %d threads %u memory %llu: rc %d (%s) after %zu of %zu "
                 "answers (query %zu: %016llx)",
                 what, k, (int)strategy, threads, (unsigned long long)memory, rc,
                 simstore_last_error(), c.next, n, c.bad_index,
                 (unsigned long long)(c.bad_index < n ? q[c.bad_index] : 0));
    free(c.got.buf);
}

static void free_answers(answers *a)
{
    free(a->buf);
    free(a->start);
}

/* Every strategy, 1 and 2 threads, whole and chunked by a small budget. */
static void check_all_ways(simstore *s, const uint64_t *q, size_t n, unsigned k, unsigned flags,
                           const char *what)
{
    answers want = one_by_one(s, q, n, k, flags);
    static const simstore_batch_strategy strategies[] = {SIMSTORE_BATCH_AUTO, SIMSTORE_BATCH_PROBE,
                                                         SIMSTORE_BATCH_SCAN};
    for (int st = 0; st < 3; st++) {
        for (unsigned threads = 1; threads <= 2; threads++) {
            check_batch(s, q, n, k, &want, strategies[st], threads, 0, flags, what);
            if (dense() || threads == 2)
                check_batch(s, q, n, k, &want, strategies[st], threads, 4096, flags, what);
        }
    }
    free_answers(&want);
}

static void check_store_shape(enum shape shape, int fp_only, size_t n, unsigned design_k)
{
    test_rng r;
    test_rng_init(&r, shape_names[shape], 0xBA7C0 + shape + 16 * fp_only);
    char *dir = test_tmpdir("batch");
    char *path = test_path(dir, "store");
    uint64_t *fps = make_fps(&r, shape, n);
    make_store(path, shape, fps, n, design_k, fp_only);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_true(st.segments == 3);
    size_t nq = dense() ? 5000 : test_sampled() ? 200 : 600;
    for (unsigned k = 0; k <= design_k; k++) {
        uint64_t *q = make_queries(&r, fps, n, nq, k);
        char what[96];
        snprintf(what, sizeof what, "%s%s", shape_names[shape], fp_only ? " (fingerprints)" : "");
        check_all_ways(s, q, nq, k, 0, what);
        if (!fp_only)
            check_all_ways(s, q, nq, k, SIMSTORE_QUERY_WITH_META, what);
        /* Small batches: one query, seven. */
        check_all_ways(s, q, 1, k, 0, what);
        check_all_ways(s, q + 1, 7, k, 0, what);
        free(q);
    }
    simstore_close(s);
    free(fps);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_batch_query__uniform_k0_to_7(void **state)
{
    (void)state;
    check_store_shape(UNIFORM, 0, 6000, 7);
}

static void test_batch_query__clustered_k0_to_7(void **state)
{
    (void)state;
    check_store_shape(CLUSTERED, 0, 6000, 7);
}

static void test_batch_query__duplicates_k0_to_7(void **state)
{
    (void)state;
    check_store_shape(DUPLICATES, 0, 6000, 7);
}

static void test_batch_query__clustered_k3_design(void **state)
{
    (void)state;
    check_store_shape(CLUSTERED, 0, 6000, 3);
}

static void test_batch_query__fingerprint_only(void **state)
{
    (void)state;
    check_store_shape(UNIFORM, 1, 6000, 4);
    check_store_shape(CLUSTERED, 1, 6000, 2);
}

/* A batch of 10^5 queries (several chunks under a 1 MiB budget). */
static void test_batch_query__large_batch(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "large", 0x1A46E);
    char *dir = test_tmpdir("batch");
    char *path = test_path(dir, "store");
    size_t n = 40000, nq = 100000;
    uint64_t *fps = make_fps(&r, CLUSTERED, n);
    make_store(path, CLUSTERED, fps, n, 3, 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    uint64_t *q = make_queries(&r, fps, n, nq, 3);
    answers want = one_by_one(s, q, nq, 3, SIMSTORE_QUERY_WITH_META);
    check_batch(s, q, nq, 3, &want, SIMSTORE_BATCH_AUTO, 2, 0, SIMSTORE_QUERY_WITH_META, "large");
    check_batch(s, q, nq, 3, &want, SIMSTORE_BATCH_SCAN, 2, 1u << 20, SIMSTORE_QUERY_WITH_META,
                "large");
    check_batch(s, q, nq, 3, &want, SIMSTORE_BATCH_PROBE, 1, 0, SIMSTORE_QUERY_WITH_META, "large");
    free_answers(&want);
    free(q);
    simstore_close(s);
    free(fps);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static int count_answers(void *ctx, size_t index, uint64_t fp, const simstore_match *m,
                         size_t count)
{
    (void)index;
    (void)fp;
    (void)m;
    size_t *seen = (size_t *)ctx;
    assert_int_equal(count, 0);
    seen[0]++;
    return 0;
}

/* A store whose every document was deleted, and one built without any. */
static void test_batch_query__empty_store(void **state)
{
    (void)state;
    char *dir = test_tmpdir("batch");
    char *path = test_path(dir, "store");
    simstore_build_options o;
    simstore_build_options_init(&o);
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    uint64_t q[5] = {0, 1, UINT64_MAX, 0x1234, 0x1234};
    size_t seen = 0;
    for (int st = SIMSTORE_BATCH_AUTO; st <= SIMSTORE_BATCH_SCAN; st++) {
        simstore_batch_options bo;
        simstore_batch_options_init(&bo);
        bo.strategy = (simstore_batch_strategy)st;
        seen = 0;
        assert_int_equal(simstore_query_batch(s, q, 5, 3, &bo, count_answers, &seen), 0);
        assert_int_equal(seen, 5);
    }
    seen = 0;
    assert_int_equal(simstore_query_batch(s, NULL, 0, 3, NULL, count_answers, &seen), 0);
    assert_int_equal(seen, 0);
    simstore_close(s);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static int stop_at_five(void *ctx, size_t index, uint64_t fp, const simstore_match *m, size_t count)
{
    (void)fp;
    (void)m;
    (void)count;
    size_t *seen = (size_t *)ctx;
    assert_int_equal(index, *seen);
    (*seen)++;
    return index == 5 ? 42 : 0;
}

static int never_called(void *ctx, size_t index, uint64_t fp, const simstore_match *m, size_t count)
{
    (void)ctx;
    (void)index;
    (void)fp;
    (void)m;
    (void)count;
    fail_msg("the callback was called");
    return 0;
}

/* Above the design's k (format/design.md, "Beyond k"): every query has a
 * probe range per prefix mask of each table, and every strategy, thread
 * count and chunking answers exactly as simstore_query_fp() does, on a
 * clustered store where fingerprints lie at every distance around the
 * queries (so a range's flipped bits left out of a distance would show). */
static void test_batch_query__beyond_the_design_k(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "beyond", 0xB3);
    char *dir = test_tmpdir("batch");
    for (unsigned design_k = 1; design_k <= 3; design_k += 2) {
        char name[32];
        snprintf(name, sizeof name, "k%u", design_k);
        char *path = test_path(dir, name);
        uint64_t *fps = make_fps(&r, CLUSTERED, 3000);
        make_store(path, CLUSTERED, fps, 3000, design_k, 0);
        simstore *s;
        assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
        size_t nq = dense() ? 400 : 100;
        uint64_t *q = make_queries(&r, fps, 3000, nq, 9);
        check_all_ways(s, q, nq, design_k + 1, 0, "beyond k");
        check_all_ways(s, q, nq, SIMSTORE_MAX_K, SIMSTORE_QUERY_WITH_META, "beyond k, meta");
        free(q);
        simstore_close(s);
        free(fps);
        free(path);
    }
    test_rmtree(dir);
    free(dir);
}

/* The callback's stop, past SIMSTORE_MAX_K (refused), bad arguments. */
static void test_batch_query__stop_and_errors(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "errors", 0xE77);
    char *dir = test_tmpdir("batch");
    char *path = test_path(dir, "store");
    uint64_t *fps = make_fps(&r, UNIFORM, 2000);
    make_store(path, UNIFORM, fps, 2000, 3, 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    uint64_t *q = make_queries(&r, fps, 2000, 100, 3);
    simstore_batch_options o;
    simstore_batch_options_init(&o);
    size_t seen = 0;
    assert_int_equal(simstore_query_batch(s, q, 100, 3, &o, stop_at_five, &seen), 42);
    assert_int_equal(seen, 6);
    o.memory_bytes = 1; /* one query a chunk */
    seen = 0;
    assert_int_equal(simstore_query_batch(s, q, 100, 3, &o, stop_at_five, &seen), 42);
    assert_int_equal(seen, 6);
    simstore_batch_options_init(&o);
    /* Above the design's k (here 3) the callback still stops it; past
     * SIMSTORE_MAX_K it is refused. */
    seen = 0;
    assert_int_equal(simstore_query_batch(s, q, 100, 6, &o, stop_at_five, &seen), 42);
    assert_int_equal(seen, 6);
    assert_int_equal(simstore_query_batch(s, q, 100, SIMSTORE_MAX_K + 1, &o, never_called, NULL),
                     SIMSTORE_ERANGE);
    assert_int_equal(simstore_query_batch(s, q, 100, 3, &o, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_query_batch(s, NULL, 3, 3, &o, never_called, NULL), SIMSTORE_EINVAL);
    o.strategy = (simstore_batch_strategy)7;
    assert_int_equal(simstore_query_batch(s, q, 100, 3, &o, never_called, NULL), SIMSTORE_EINVAL);
    simstore_batch_options_init(&o);
    o.flags = 0x80;
    assert_int_equal(simstore_query_batch(s, q, 100, 3, &o, never_called, NULL), SIMSTORE_EINVAL);
    free(q);
    simstore_close(s);
    free(fps);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static int ignore_answer(void *ctx, size_t index, uint64_t fp, const simstore_match *m,
                         size_t count)
{
    (void)ctx;
    (void)index;
    (void)fp;
    (void)m;
    (void)count;
    return 0;
}

/* A damaged table block is an error for every strategy, never an answer. */
static void test_batch_query__damaged_block_is_an_error(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "damaged", 0xDA3A6E);
    char *dir = test_tmpdir("batch");
    char *path = test_path(dir, "store");
    uint64_t *fps = make_fps(&r, UNIFORM, 3000);
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.fingerprint_only = 1;
    o.block_bytes = 256;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    assert_int_equal(add_docs(b, UNIFORM, fps, 0, 3000, 1), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    simstore_table *t;
    assert_int_equal(simstore_open_segment_table(s, 0, 0, &t), 0);
    simstore_table_info info;
    simstore_table_get_info(t, &info);
    char *file = strdup(info.path);
    uint64_t offset = info.blocks_offset + info.block_bytes * (info.blocks / 2) + 40;
    simstore_table_close(t);
    simstore_close(s);
    size_t size;
    uint8_t *bytes = test_read_file(file, &size);
    assert_non_null(bytes);
    assert_true(offset < size);
    bytes[offset] ^= 0x10;
    assert_int_equal(test_write_file(file, bytes, size), 0);
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    for (int st = SIMSTORE_BATCH_AUTO; st <= SIMSTORE_BATCH_SCAN; st++) {
        simstore_batch_options bo;
        simstore_batch_options_init(&bo);
        bo.strategy = (simstore_batch_strategy)st;
        assert_int_equal(simstore_query_batch(s, fps, 3000, 0, &bo, ignore_answer, NULL),
                         SIMSTORE_ECORRUPT);
        assert_non_null(strstr(simstore_last_error(), "block"));
    }
    simstore_close(s);
    free(bytes);
    free(file);
    free(fps);
    test_rmtree(dir);
    free(path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_query__uniform_k0_to_7),
        cmocka_unit_test(test_batch_query__clustered_k0_to_7),
        cmocka_unit_test(test_batch_query__duplicates_k0_to_7),
        cmocka_unit_test(test_batch_query__clustered_k3_design),
        cmocka_unit_test(test_batch_query__fingerprint_only),
        cmocka_unit_test(test_batch_query__large_batch),
        cmocka_unit_test(test_batch_query__empty_store),
        cmocka_unit_test(test_batch_query__beyond_the_design_k),
        cmocka_unit_test(test_batch_query__stop_and_errors),
        cmocka_unit_test(test_batch_query__damaged_block_is_an_error),
    };
    /* Sampled (the ThreadSanitizer pass): the cases tests/CMakeLists.txt names. */
    const char *cases = test_sampled_cases();
    if (cases)
        cmocka_set_test_filter(cases);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
