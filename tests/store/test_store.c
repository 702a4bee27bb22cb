/* test_store.c: stores through the public API: exact answers for k = 0..7
 * against a brute-force scan on uniform, clustered, duplicate-heavy,
 * prefix-sharing and adversarial sets; every candidate design; read-only
 * reopen; new segments; bad input; fingerprint-only stores. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "design/design.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "lmdb/records.h"
#include "testutil.h"

#include <lmdb.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct doc {
    char id[32];
    uint64_t fp;
} doc;

typedef struct corpus {
    doc *docs;
    size_t n;
} corpus;

enum shape { UNIFORM, CLUSTERED, DUPLICATES, PREFIX_SHARING, ADVERSARIAL, SHAPE_COUNT };
static const char *const shape_names[] = {"uniform", "clustered", "duplicates", "prefix",
                                          "adversarial"};

/* A fingerprint at exactly distance d from x. */
static uint64_t at_distance(test_rng *r, uint64_t x, unsigned d)
{
    uint64_t mask = 0;
    while ((unsigned)__builtin_popcountll(mask) < d)
        mask |= 1ULL << test_rng_below(r, 64);
    return x ^ mask;
}

static corpus make_corpus(test_rng *r, enum shape shape, size_t n, unsigned k)
{
    corpus c = {calloc(n, sizeof(doc)), n};
    uint64_t base = test_rng_next(r);
    for (size_t i = 0; i < n; i++) {
        uint64_t fp;
        switch (shape) {
        case UNIFORM: fp = test_rng_next(r); break;
        case CLUSTERED:
            /* Centres with neighbours planted at every distance 0..k+2. */
            if (i % (k + 4) == 0 || i == 0)
                base = test_rng_next(r);
            fp = at_distance(r, base,
                             (unsigned)(i % (k + 4)) > k + 2 ? k + 2 : (unsigned)(i % (k + 4)));
            break;
        case DUPLICATES:
            fp = (i % 7 == 0) ? test_rng_next(r) : c.docs[test_rng_below(r, i ? i : 1)].fp;
            break;
        case PREFIX_SHARING:
            fp = (base & 0xFFFFFFFF00000000ULL) | (test_rng_next(r) & 0xFFFF) << 8;
            break;
        default:
            /* Adversarial: the extremes and fingerprints a few bits from them,
             * concentrated in a handful of prefixes. */
            switch (i % 4) {
            case 0: fp = at_distance(r, 0, (unsigned)test_rng_below(r, k + 3)); break;
            case 1: fp = at_distance(r, UINT64_MAX, (unsigned)test_rng_below(r, k + 3)); break;
            case 2:
                fp = at_distance(r, 0xAAAAAAAAAAAAAAAAULL, (unsigned)test_rng_below(r, k + 3));
                break;
            default: fp = at_distance(r, base, (unsigned)test_rng_below(r, 64)); break;
            }
        }
        c.docs[i].fp = fp;
        snprintf(c.docs[i].id, sizeof c.docs[i].id, "%s-%zu", shape_names[shape], i);
    }
    return c;
}

static int build_store(const char *path, const corpus *c, unsigned k, unsigned tables,
                       unsigned block_bytes)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.tables = tables;
    o.block_bytes = block_bytes;
    o.memory_bytes = 16u << 20;
    o.threads = 2;
    simstore_builder *b;
    int rc = simstore_build_begin(path, &o, &b);
    if (rc)
        return rc;
    for (size_t i = 0; i < c->n; i++) {
        simstore_doc d = {c->docs[i].id, strlen(c->docs[i].id), c->docs[i].fp, NULL, 0, i};
        rc = simstore_builder_add(b, &d);
        if (rc) {
            simstore_builder_abort(b);
            return rc;
        }
    }
    return simstore_builder_finish(b);
}

typedef struct expect {
    const char *id;
    unsigned distance;
} expect;

static int cmp_expect(const void *a, const void *b)
{
    const expect *x = (const expect *)a, *y = (const expect *)b;
    if (x->distance != y->distance)
        return x->distance < y->distance ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Query q at distance kq and compare with a brute-force scan of c. */
static void check_query(simstore_query *sq, const corpus *c, uint64_t q, unsigned kq)
{
    expect *want = malloc((c->n + 1) * sizeof *want);
    size_t nwant = 0;
    for (size_t i = 0; i < c->n; i++) {
        unsigned d = simstore_distance(c->docs[i].fp, q);
        if (d <= kq)
            want[nwant++] = (expect){c->docs[i].id, d};
    }
    qsort(want, nwant, sizeof *want, cmp_expect);
    const simstore_match *m;
    size_t n;
    int rc = simstore_query_fp(sq, q, kq, &m, &n);
    if (rc)
        fprintf(stderr, "query failed: %s\n", simstore_last_error());
    assert_int_equal(rc, 0);
    if (n != nwant)
        fprintf(stderr, "query %016llx k=%u: %zu matches, brute force %zu\n", (unsigned long long)q,
                kq, n, nwant);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(m[i].id, want[i].id);
        assert_int_equal(m[i].distance, want[i].distance);
        assert_int_equal(m[i].id_len, strlen(want[i].id));
        assert_true(simstore_distance(m[i].fp, q) == m[i].distance);
    }
    free(want);
}

static void check_store(const char *path, const corpus *c, unsigned k, test_rng *r,
                        unsigned queries)
{
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    simstore_query *sq;
    assert_int_equal(simstore_query_new(s, 0, &sq), 0);
    for (unsigned i = 0; i < queries; i++) {
        /* Half the queries near stored fingerprints, half random. */
        uint64_t q = (i & 1) ? test_rng_next(r)
                             : at_distance(r, c->docs[test_rng_below(r, c->n)].fp,
                                           (unsigned)test_rng_below(r, k + 3));
        unsigned kq = (unsigned)test_rng_below(r, k + 1);
        check_query(sq, c, q, i % 3 == 0 ? k : kq);
    }
    /* Beyond the design's k (format/design.md, "Beyond k"): exact answers
     * up to SIMSTORE_MAX_K, by probing each table at every prefix near the
     * query's; refused only when that would take more than 2^20 probes a
     * segment per query, or past SIMSTORE_MAX_K. */
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    sims_design *d = malloc(sizeof *d);
    assert_non_null(d);
    assert_int_equal(sims_design_with_tables(k, st.tables, d), 0);
    const simstore_match *m;
    size_t n;
    for (unsigned k2 = k + 1; k2 <= SIMSTORE_MAX_K; k2++) {
        uint64_t probes = sims_design_probes(d, k2);
        if (probes > (1u << 20)) {
            assert_int_equal(simstore_query_fp(sq, 0, k2, &m, &n), SIMSTORE_ERANGE);
            assert_non_null(strstr(simstore_last_error(), "would probe"));
            continue;
        }
        unsigned nq = probes <= 4096 ? 12 : probes <= 65536 ? 2 : 1;
        for (unsigned i = 0; i < nq; i++) {
            uint64_t q = (i & 1) ? test_rng_next(r)
                                 : at_distance(r, c->docs[test_rng_below(r, c->n)].fp,
                                               (unsigned)test_rng_below(r, k2 + 2));
            check_query(sq, c, q, k2);
        }
    }
    assert_int_equal(simstore_query_fp(sq, 0, SIMSTORE_MAX_K + 1, &m, &n), SIMSTORE_ERANGE);
    free(d);
    simstore_query_free(sq);
    simstore_close(s);
}

static void test_store_exact__every_k_every_shape(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "exact", 42);
    char *dir = test_tmpdir("store");
    for (unsigned k = 0; k <= SIMSTORE_MAX_K; k++) {
        for (int shape = 0; shape < SHAPE_COUNT; shape++) {
            corpus c = make_corpus(&r, (enum shape)shape, 3000, k);
            char name[64];
            snprintf(name, sizeof name, "k%u-%s", k, shape_names[shape]);
            char *path = test_path(dir, name);
            int rc = build_store(path, &c, k, 0, 256);
            if (rc)
                fprintf(stderr, "build: %s\n", simstore_last_error());
            assert_int_equal(rc, 0);
            check_store(path, &c, k, &r, 120);
            free(path);
            free(c.docs);
        }
    }
    test_rmtree(dir);
    free(dir);
}

static void test_store_exact__every_design_k3(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "designs", 7);
    char *dir = test_tmpdir("designs");
    for (unsigned k = 1; k <= 4; k++) {
        sims_design_candidate cand[SIMS_DESIGN_MAX_CANDIDATES];
        size_t ncand;
        assert_int_equal(sims_design_candidates(k, cand, SIMS_DESIGN_MAX_CANDIDATES, &ncand), 0);
        for (size_t i = 0; i < ncand && cand[i].n_tables <= 64; i++) {
            corpus c = make_corpus(&r, CLUSTERED, 1500, k);
            char name[64];
            snprintf(name, sizeof name, "k%u-t%u", k, cand[i].n_tables);
            char *path = test_path(dir, name);
            assert_int_equal(build_store(path, &c, k, cand[i].n_tables, 512), 0);
            simstore *s;
            simstore_stats st;
            assert_int_equal(simstore_open(path, 0, &s), 0);
            assert_int_equal(simstore_get_stats(s, &st), 0);
            assert_int_equal(st.tables, cand[i].n_tables);
            simstore_close(s);
            check_store(path, &c, k, &r, 60);
            free(path);
            free(c.docs);
        }
    }
    test_rmtree(dir);
    free(dir);
}

static void test_store_build__refuses_duplicates_and_leaves_nothing(void **state)
{
    (void)state;
    char *dir = test_tmpdir("dup");
    char *path = test_path(dir, "s");
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, NULL, &b), 0);
    simstore_doc d1 = {"a", 1, 1, NULL, 0, 0}, d2 = {"b", 1, 2, NULL, 0, 1},
                 d3 = {"a", 1, 3, NULL, 0, 2};
    assert_int_equal(simstore_builder_add(b, &d1), 0);
    assert_int_equal(simstore_builder_add(b, &d2), 0);
    assert_int_equal(simstore_builder_add(b, &d3), 0);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "duplicate document id 'a'"));
    assert_non_null(strstr(simstore_last_error(), "#3"));
    assert_non_null(strstr(simstore_last_error(), "#1"));
    struct stat st;
    assert_int_equal(stat(path, &st), -1); /* no store appeared */
    /* Nor anything beside it. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    assert_int_equal(system(cmd), 0);

    /* Oversized and empty ids are refused at add. */
    assert_int_equal(simstore_build_begin(path, NULL, &b), 0);
    char big[SIMSTORE_MAX_ID_BYTES + 2];
    memset(big, 'x', sizeof big);
    simstore_doc d4 = {big, SIMSTORE_MAX_ID_BYTES + 1, 1, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d4), SIMSTORE_EINVAL);
    simstore_doc d5 = {big, 0, 1, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d5), SIMSTORE_EINVAL);
    simstore_doc d6 = {big, SIMSTORE_MAX_ID_BYTES, 1, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d6), 0);
    assert_int_equal(simstore_builder_add_fp(b, 5), SIMSTORE_EINVAL);
    simstore_builder_abort(b);
    assert_int_equal(stat(path, &st), -1);

    /* An existing path is refused unless replacing. */
    corpus c = {calloc(1, sizeof(doc)), 1};
    strcpy(c.docs[0].id, "only");
    c.docs[0].fp = 42;
    assert_int_equal(build_store(path, &c, 3, 0, 1024), 0);
    assert_int_equal(build_store(path, &c, 3, 0, 1024), SIMSTORE_EEXIST);
    free(c.docs);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_store_build__options_are_checked(void **state)
{
    (void)state;
    char *dir = test_tmpdir("opts");
    char *path = test_path(dir, "s");
    simstore_build_options o;
    simstore_builder *b;
    simstore_build_options_init(&o);
    o.k = 8;
    assert_int_equal(simstore_build_begin(path, &o, &b), SIMSTORE_EINVAL);
    simstore_build_options_init(&o);
    o.block_bytes = 1000;
    assert_int_equal(simstore_build_begin(path, &o, &b), SIMSTORE_EINVAL);
    simstore_build_options_init(&o);
    o.block_bytes = 128;
    assert_int_equal(simstore_build_begin(path, &o, &b), SIMSTORE_EINVAL);
    /* A table count no design has fails at finish with the counts listed. */
    simstore_build_options_init(&o);
    o.tables = 3;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    simstore_doc d = {"x", 1, 9, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d), 0);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "4"));
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_store_open__errors(void **state)
{
    (void)state;
    char *dir = test_tmpdir("open");
    simstore *s;
    char *missing = test_path(dir, "missing");
    assert_int_equal(simstore_open(missing, 0, &s), SIMSTORE_ENOTFOUND);
    assert_int_equal(simstore_open(dir, 0, &s), SIMSTORE_ENOTFOUND); /* no data.mdb */
    char *file = test_path(dir, "file");
    assert_int_equal(test_write_file(file, "x", 1), 0);
    assert_int_equal(simstore_open(file, 0, &s), SIMSTORE_ENOTFOUND);
    test_rmtree(dir);
    free(missing);
    free(file);
    free(dir);
}

/* Rewrite the store record of the store at dir: its format version and
 * feature words (format/store.md, "Versions and features"). */
static void set_store_record(const char *dir, uint32_t version, uint64_t incompat, uint64_t compat)
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
    MDB_val key = {5, (void *)"store"}, val;
    assert_int_equal(mdb_get(txn, meta, &key, &val), 0);
    uint8_t *rec = malloc(val.mv_size);
    memcpy(rec, val.mv_data, val.mv_size);
    size_t len = val.mv_size;
    le_store32(rec + 8, version);
    le_store64(rec + 40, incompat);
    le_store64(rec + 48, compat);
    le_store64(rec + len - 8, sims_xxh3_64(rec, len - 8, SIMS_STORE_RECORD_SEED));
    MDB_val nv = {len, rec};
    assert_int_equal(mdb_put(txn, meta, &key, &nv, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    free(rec);
}

/* A store whose record carries an unknown incompatible feature, or a format
 * version this build does not read, is SIMSTORE_EVERSION naming the store
 * and the feature bits, never corruption; unknown compatible features are
 * ignored: the store opens and answers. */
static void test_store_open__versions_and_features(void **state)
{
    (void)state;
    char *dir = test_tmpdir("features");
    char *path = test_path(dir, "s");
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, NULL, &b), 0);
    simstore_doc d = {"a", 1, 0x1234, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    const simstore_match *m;
    size_t n;
    /* Built with the default options: fingerprint version 3, whose feature
     * bit the store record carries (the one incompatible feature this build
     * knows); clearing it leaves a version 3 text record without it. */
    const uint64_t known = SIMS_STORE_INCOMPAT_FP_V3;
    assert_int_equal(SIMSTORE_FP_VERSION_DEFAULT, 3);

    set_store_record(path, SIMS_STORE_FORMAT_VERSION, 0, 0);
    assert_int_equal(simstore_open(path, 0, &s), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "fingerprint version 3"));

    set_store_record(path, SIMS_STORE_FORMAT_VERSION, known, UINT64_C(0x8000000000000001));
    assert_int_equal(simstore_open(path, 0, &s), 0);
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    assert_int_equal(simstore_query_fp(q, 0x1235, 1, &m, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(m[0].id, "a");
    simstore_query_free(q);
    simstore_close(s);

    char want[4096];
    set_store_record(path, SIMS_STORE_FORMAT_VERSION, known | 0x4, 0x1);
    assert_int_equal(simstore_open(path, 0, &s), SIMSTORE_EVERSION);
    snprintf(want, sizeof want,
             "store %s: incompatible features 0x4 unknown to this simstore (%s): "
             "written by a newer version",
             path, SIMSTORE_VERSION_STRING);
    assert_non_null(strstr(simstore_last_error(), want));
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), SIMSTORE_EVERSION);

    set_store_record(path, 1, 0, 0);
    assert_int_equal(simstore_open(path, 0, &s), SIMSTORE_EVERSION);
    assert_non_null(strstr(simstore_last_error(), "store format 1 from a pre-release build"));
    set_store_record(path, 3, 0, 0);
    assert_int_equal(simstore_open(path, 0, &s), SIMSTORE_EVERSION);
    assert_non_null(strstr(simstore_last_error(), "store format 3 unknown to this simstore"));

    set_store_record(path, SIMS_STORE_FORMAT_VERSION, known, 0);
    assert_int_equal(simstore_open(path, 0, &s), 0);
    simstore_close(s);
    test_rmtree(dir);
    free(path);
    free(dir);
}

/* This process's mappings of the table and document files under dir:
 * how many, and how many carry the huge-page advice ("hg" in VmFlags). */
static void store_mappings(const char *dir, unsigned *maps, unsigned *advised)
{
    char full[PATH_MAX], line[PATH_MAX + 256];
    assert_non_null(realpath(dir, full));
    size_t len = strlen(full);
    *maps = *advised = 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    int mine = 0;
    unsigned long from, to;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &from, &to) == 2) {
            char *path = strchr(line, '/');
            size_t pl = path ? strcspn(path, "\n") : 0;
            mine = path && strncmp(path, full, len) == 0 && path[len] == '/' && pl > 4 &&
                   (memcmp(path + pl - 4, ".tbl", 4) == 0 || memcmp(path + pl - 4, ".doc", 4) == 0);
            *maps += (unsigned)mine;
        } else if (mine && strncmp(line, "VmFlags:", 8) == 0) {
            *advised += strstr(line, " hg") != NULL;
        }
    }
    fclose(f);
}

/* SIMSTORE_OPEN_HUGE_PAGES: the same answers, and every table and document
 * file mapping carries the huge-page advice (without the flag, none does). */
static void test_store_open__huge_pages_advice(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "store_huge_pages", 0x4D47E5);
    char *dir = test_tmpdir("huge");
    char *path = test_path(dir, "s");
    corpus c = make_corpus(&r, CLUSTERED, 3000, 3);
    assert_int_equal(build_store(path, &c, 3, 0, 512), 0);
    struct stat st;
    int thp = stat("/sys/kernel/mm/transparent_hugepage", &st) == 0;
    for (int huge = 0; huge < 2; huge++) {
        simstore *s;
        assert_int_equal(
            simstore_open(path, SIMSTORE_OPEN_READONLY | (huge ? SIMSTORE_OPEN_HUGE_PAGES : 0), &s),
            0);
        simstore_query *sq;
        assert_int_equal(simstore_query_new(s, 0, &sq), 0);
        for (unsigned i = 0; i < 40; i++) {
            uint64_t q = (i & 1) ? test_rng_next(&r)
                                 : at_distance(&r, c.docs[test_rng_below(&r, c.n)].fp,
                                               (unsigned)test_rng_below(&r, 5));
            check_query(sq, &c, q, 3);
        }
        unsigned maps, advised;
        store_mappings(path, &maps, &advised);
        assert_true(maps >= 2); /* the tables and the document file */
        assert_int_equal(advised, huge && thp ? maps : 0);
        simstore_query_free(sq);
        simstore_close(s);
    }
    free(c.docs);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_store_meta__round_trip(void **state)
{
    (void)state;
    char *dir = test_tmpdir("meta");
    char *path = test_path(dir, "s");
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, NULL, &b), 0);
    const char *meta = "{\"url\":\"http://example.org/\"}";
    simstore_doc d1 = {"with", 4, 0x1234, meta, strlen(meta), 0};
    simstore_doc d2 = {"without", 7, 0x1235, NULL, 0, 1};
    assert_int_equal(simstore_builder_add(b, &d1), 0);
    assert_int_equal(simstore_builder_add(b, &d2), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    simstore_query *q;
    assert_int_equal(simstore_open(path, 0, &s), 0);
    assert_int_equal(simstore_query_new(s, SIMSTORE_QUERY_WITH_META, &q), 0);
    const simstore_match *m;
    size_t n;
    assert_int_equal(simstore_query_fp(q, 0x1234, 1, &m, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(m[0].id, "with");
    assert_int_equal(m[0].distance, 0);
    assert_int_equal(m[0].meta_len, strlen(meta));
    assert_memory_equal(m[0].meta, meta, strlen(meta));
    assert_string_equal(m[1].id, "without");
    assert_null(m[1].meta);
    simstore_query_free(q);
    simstore_close(s);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_store_fponly__answers_fingerprints(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "fponly", 3);
    char *dir = test_tmpdir("fponly");
    char *path = test_path(dir, "s");
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.fingerprint_only = 1;
    o.memory_bytes = 16u << 20;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    corpus c = make_corpus(&r, CLUSTERED, 5000, 3);
    for (size_t i = 0; i < c.n; i++)
        assert_int_equal(simstore_builder_add_fp(b, c.docs[i].fp), 0);
    simstore_doc d = {"x", 1, 1, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_EINVAL);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    simstore_query *q;
    assert_int_equal(simstore_open(path, 0, &s), 0);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_true(st.fingerprint_only);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    for (int i = 0; i < 200; i++) {
        uint64_t qf =
            at_distance(&r, c.docs[test_rng_below(&r, c.n)].fp, (unsigned)test_rng_below(&r, 5));
        /* Brute force over distinct fingerprints. */
        size_t want = 0;
        for (size_t j = 0; j < c.n; j++) {
            int dup = 0;
            for (size_t t = 0; t < j && !dup; t++)
                dup = c.docs[t].fp == c.docs[j].fp;
            if (!dup && simstore_distance(c.docs[j].fp, qf) <= 3)
                want++;
        }
        const simstore_match *m;
        size_t n;
        assert_int_equal(simstore_query_fp(q, qf, 3, &m, &n), 0);
        assert_int_equal(n, want);
        for (size_t j = 0; j < n; j++) {
            assert_null(m[j].id);
            assert_true(m[j].distance <= 3);
            if (j)
                assert_true(m[j - 1].distance < m[j].distance ||
                            (m[j - 1].distance == m[j].distance && m[j - 1].fp < m[j].fp));
        }
    }
    simstore_query_free(q);
    simstore_close(s);
    free(c.docs);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_store_segments__add_is_visible_and_exact(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "segments", 9);
    char *dir = test_tmpdir("seg");
    char *path = test_path(dir, "s");
    corpus all = make_corpus(&r, CLUSTERED, 4000, 3);
    corpus first = {all.docs, 1000};
    assert_int_equal(build_store(path, &first, 3, 0, 512), 0);
    /* A reader opened before the adds sees them after each commit. */
    simstore *reader;
    simstore_query *rq;
    assert_int_equal(simstore_open(path, 0, &reader), 0);
    assert_int_equal(simstore_query_new(reader, 0, &rq), 0);
    for (size_t from = 1000; from < all.n; from += 1000) {
        simstore *w;
        assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &w), 0);
        simstore *w2;
        assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &w2), SIMSTORE_EBUSY);
        simstore_builder *b;
        assert_int_equal(simstore_add_begin(w, NULL, &b), 0);
        for (size_t i = from; i < from + 1000; i++) {
            simstore_doc d = {all.docs[i].id, strlen(all.docs[i].id), all.docs[i].fp, NULL, 0, i};
            assert_int_equal(simstore_builder_add(b, &d), 0);
        }
        assert_int_equal(simstore_builder_finish(b), 0);
        simstore_close(w);
        corpus sofar = {all.docs, from + 1000};
        for (int i = 0; i < 50; i++) {
            uint64_t q = at_distance(&r, sofar.docs[test_rng_below(&r, sofar.n)].fp,
                                     (unsigned)test_rng_below(&r, 4));
            check_query(rq, &sofar, q, 3);
        }
    }
    simstore_stats st;
    assert_int_equal(simstore_get_stats(reader, &st), 0);
    assert_int_equal(st.documents, all.n);
    assert_true(st.segments >= 2);
    /* Adding an id that is already stored fails and changes nothing. */
    simstore *w;
    simstore_builder *b;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &w), 0);
    assert_int_equal(simstore_add_begin(w, NULL, &b), 0);
    simstore_doc d = {all.docs[5].id, strlen(all.docs[5].id), 77, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d), 0);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "already in the store"));
    simstore_close(w);
    simstore_stats st2;
    assert_int_equal(simstore_get_stats(reader, &st2), 0);
    assert_int_equal(st2.documents, st.documents);
    assert_int_equal(st2.generation, st.generation);
    simstore_query_free(rq);
    simstore_close(reader);
    free(all.docs);
    test_rmtree(dir);
    free(path);
    free(dir);
}

typedef struct missing_log {
    int count;
    char last[64];
} missing_log;

static void note_missing(void *ctx, const char *id, size_t len)
{
    missing_log *m = (missing_log *)ctx;
    m->count++;
    snprintf(m->last, sizeof m->last, "%.*s", (int)len, id);
}

/* Remove docs[i] for the indexes where keep[i] == 0 (a corpus view). */
static corpus surviving(const corpus *c, const unsigned char *keep)
{
    corpus out = {calloc(c->n + 1, sizeof(doc)), 0};
    for (size_t i = 0; i < c->n; i++)
        if (keep[i])
            out.docs[out.n++] = c->docs[i];
    return out;
}

static void test_store_delete__gone_at_once_then_compacted(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "delete", 21);
    char *dir = test_tmpdir("del");
    char *path = test_path(dir, "s");
    corpus c = make_corpus(&r, CLUSTERED, 2000, 3);
    assert_int_equal(build_store(path, &c, 3, 0, 512), 0);
    unsigned char *keep = malloc(c.n);
    memset(keep, 1, c.n);
    const char *ids[503];
    size_t lens[503];
    size_t n = 0;
    for (size_t i = 0; i < c.n; i += 4) {
        keep[i] = 0;
        ids[n] = c.docs[i].id;
        lens[n++] = strlen(c.docs[i].id);
    }
    ids[n] = "no-such-doc";
    lens[n++] = 11;
    ids[n] = "uniform-1"; /* another shape's id: absent here */
    lens[n++] = 9;
    ids[n] = "";
    lens[n++] = 0;

    simstore *ro;
    assert_int_equal(simstore_open(path, 0, &ro), 0);
    uint64_t deleted = 99;
    assert_int_equal(simstore_delete(ro, ids, lens, n, &deleted, NULL, NULL), SIMSTORE_EREADONLY);
    simstore_query *rq;
    assert_int_equal(simstore_query_new(ro, 0, &rq), 0);

    simstore *w;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &w),
                     0);
    missing_log ml = {0, ""};
    assert_int_equal(simstore_delete(w, ids, lens, n, &deleted, note_missing, &ml), 0);
    assert_int_equal(deleted, 500);
    assert_int_equal(ml.count, 3);
    /* Deleting again finds nothing and changes nothing. */
    simstore_stats before, after;
    assert_int_equal(simstore_get_stats(w, &before), 0);
    assert_int_equal(simstore_delete(w, ids, lens, 10, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, 0);
    assert_int_equal(simstore_get_stats(w, &after), 0);
    assert_int_equal(after.generation, before.generation);

    corpus left = surviving(&c, keep);
    /* The reader opened before the delete answers without the deleted. */
    for (int i = 0; i < 100; i++) {
        uint64_t q =
            at_distance(&r, c.docs[test_rng_below(&r, c.n)].fp, (unsigned)test_rng_below(&r, 4));
        check_query(rq, &left, q, 3);
    }
    assert_int_equal(before.documents, 1500);
    assert_true(before.table_fps > before.fingerprints); /* dead fingerprints remain */

    assert_int_equal(simstore_compact(w, NULL), 0);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(w, &st), 0);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.table_fps, st.fingerprints);
    assert_int_equal(st.documents, 1500);
    assert_true(st.generation > before.generation);
    for (int i = 0; i < 100; i++) {
        uint64_t q =
            at_distance(&r, c.docs[test_rng_below(&r, c.n)].fp, (unsigned)test_rng_below(&r, 4));
        check_query(rq, &left, q, 3);
    }
    /* Compacting a compact store changes nothing. */
    assert_int_equal(simstore_compact(w, NULL), 0);
    assert_int_equal(simstore_get_stats(w, &after), 0);
    assert_int_equal(after.generation, st.generation);
    /* Only the live segment's files remain. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test $(ls '%s' | grep -c '\\.tbl$') -eq %u", path, st.tables);
    assert_int_equal(system(cmd), 0);
    simstore_close(w);
    simstore_query_free(rq);
    simstore_close(ro);
    free(left.docs);
    free(keep);
    free(c.docs);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void add_range(const char *path, const corpus *c, size_t from, size_t to, unsigned flags)
{
    simstore *w;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | flags, &w), 0);
    simstore_builder *b;
    assert_int_equal(simstore_add_begin(w, NULL, &b), 0);
    for (size_t i = from; i < to; i++) {
        simstore_doc d = {c->docs[i].id, strlen(c->docs[i].id), c->docs[i].fp, NULL, 0, i};
        assert_int_equal(simstore_builder_add(b, &d), 0);
    }
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore_close(w);
}

static void test_store_policy__segments_and_dead_stay_bounded(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "policy", 33);
    char *dir = test_tmpdir("policy");
    char *path = test_path(dir, "s");
    corpus c = make_corpus(&r, UNIFORM, 1200, 3);
    corpus first = {c.docs, 100};
    assert_int_equal(build_store(path, &first, 3, 0, 256), 0);
    /* Without the policy, every add is a segment. */
    for (size_t k = 1; k < 10; k++)
        add_range(path, &c, k * 100, k * 100 + 100, SIMSTORE_OPEN_NO_AUTO_COMPACT);
    simstore *s;
    simstore_stats st;
    assert_int_equal(simstore_open(path, 0, &s), 0);
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.segments, 10);
    simstore_close(s);
    /* With it, the next add brings the count back within the bound. */
    add_range(path, &c, 1000, 1100, 0);
    assert_int_equal(simstore_open(path, 0, &s), 0);
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_true(st.segments <= SIMSTORE_MAX_SEGMENTS);
    assert_int_equal(st.documents, 1100);
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    corpus sofar = {c.docs, 1100};
    for (int i = 0; i < 100; i++)
        check_query(
            q, &sofar,
            at_distance(&r, c.docs[test_rng_below(&r, 1100)].fp, (unsigned)test_rng_below(&r, 4)),
            3);
    simstore_query_free(q);
    simstore_close(s);
    /* Deleting most documents compacts on its own. */
    simstore *w;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &w), 0);
    const char *ids[800];
    size_t lens[800];
    for (size_t i = 0; i < 800; i++) {
        ids[i] = c.docs[i].id;
        lens[i] = strlen(c.docs[i].id);
    }
    uint64_t deleted;
    assert_int_equal(simstore_delete(w, ids, lens, 800, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, 800);
    assert_int_equal(simstore_get_stats(w, &st), 0);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.table_fps, st.fingerprints);
    assert_int_equal(st.documents, 300);
    simstore_close(w);
    free(c.docs);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_store_fponly__segments_compact_exactly(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "fponly-compact", 44);
    char *dir = test_tmpdir("fpc");
    char *path = test_path(dir, "s");
    corpus c = make_corpus(&r, DUPLICATES, 3000, 3);
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.fingerprint_only = 1;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(simstore_builder_add_fp(b, c.docs[i].fp), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *w;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &w),
                     0);
    for (size_t part = 1; part < 3; part++) {
        assert_int_equal(simstore_add_begin(w, NULL, &b), 0);
        /* Overlapping ranges: fingerprints already stored are not stored again. */
        for (size_t i = part * 1000 - 200; i < part * 1000 + 1000; i++)
            assert_int_equal(simstore_builder_add_fp(b, c.docs[i].fp), 0);
        assert_int_equal(simstore_builder_finish(b), 0);
    }
    const char *id = "x";
    size_t len = 1;
    assert_int_equal(simstore_delete(w, &id, &len, 1, NULL, NULL, NULL), SIMSTORE_EINVAL);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(w, &st), 0);
    assert_int_equal(st.segments, 3);
    uint64_t distinct = st.fingerprints;
    assert_int_equal(st.table_fps, distinct); /* segments are disjoint */
    assert_int_equal(simstore_compact(w, NULL), 0);
    assert_int_equal(simstore_get_stats(w, &st), 0);
    assert_int_equal(st.segments, 1);
    assert_int_equal(st.fingerprints, distinct);
    simstore_query *q;
    assert_int_equal(simstore_query_new(w, 0, &q), 0);
    for (int i = 0; i < 200; i++) {
        uint64_t qf =
            at_distance(&r, c.docs[test_rng_below(&r, c.n)].fp, (unsigned)test_rng_below(&r, 4));
        size_t want = 0;
        for (size_t j = 0; j < c.n; j++) {
            int dup = 0;
            for (size_t t = 0; t < j && !dup; t++)
                dup = c.docs[t].fp == c.docs[j].fp;
            if (!dup && simstore_distance(c.docs[j].fp, qf) <= 3)
                want++;
        }
        const simstore_match *m;
        size_t n;
        assert_int_equal(simstore_query_fp(q, qf, 3, &m, &n), 0);
        assert_int_equal(n, want);
    }
    simstore_query_free(q);
    simstore_close(w);
    free(c.docs);
    test_rmtree(dir);
    free(path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_exact__every_k_every_shape),
        cmocka_unit_test(test_store_exact__every_design_k3),
        cmocka_unit_test(test_store_build__refuses_duplicates_and_leaves_nothing),
        cmocka_unit_test(test_store_build__options_are_checked),
        cmocka_unit_test(test_store_open__errors),
        cmocka_unit_test(test_store_open__versions_and_features),
        cmocka_unit_test(test_store_open__huge_pages_advice),
        cmocka_unit_test(test_store_meta__round_trip),
        cmocka_unit_test(test_store_fponly__answers_fingerprints),
        cmocka_unit_test(test_store_segments__add_is_visible_and_exact),
        cmocka_unit_test(test_store_delete__gone_at_once_then_compacted),
        cmocka_unit_test(test_store_policy__segments_and_dead_stay_bounded),
        cmocka_unit_test(test_store_fponly__segments_compact_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
