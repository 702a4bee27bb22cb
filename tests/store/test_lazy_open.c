/* test_lazy_open.c: read-only opens check LMDB's pages as queries read them
 * (format/store.md, "Trusting LMDB"): the pages an open and a query check
 * do not grow with the store (counted through simstore_lmdb_pages_checked,
 * not timed), the answers equal those after the walk of all of data.mdb at
 * open, the tables' block indexes are not held in RAM (table format 3),
 * and writers and whole-store scans still walk the whole file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "simstore_unstable.h"
#include "changes_store.h"
#include "testutil.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define QUERIES 200

typedef struct store_case {
    char *dir;
    size_t ndocs;
    uint64_t *fps;
    uint64_t mdb_pages; /* whole 4 KiB pages in data.mdb */
} store_case;

static void build(store_case *c, const char *tmp, const char *name, size_t ndocs, test_rng *r)
{
    c->dir = test_path(tmp, name);
    c->ndocs = ndocs;
    c->fps = calloc(ndocs, sizeof *c->fps);
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    o.threads = 1;
    simstore_builder *b;
    simstore *s;
    assert_int_equal(test_changes_begin(c->dir, &o, &s, &b), 0);
    for (size_t i = 0; i < ndocs; i++) {
        char id[32];
        char meta[32];
        /* Every 50th fingerprint repeats an earlier one (duplicates). */
        c->fps[i] = i % 50 == 49 ? c->fps[i / 2] : test_rng_next(r);
        int idlen = snprintf(id, sizeof id, "document-%07zu", i);
        int mlen = snprintf(meta, sizeof meta, "{\"n\":%zu}", i);
        simstore_doc d = {id, (size_t)idlen, c->fps[i], meta, (size_t)mlen, i};
        assert_int_equal(simstore_builder_add(b, &d), 0);
    }
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore_close(s);
    char *mdb = test_path(c->dir, "data.mdb");
    struct stat st;
    assert_int_equal(stat(mdb, &st), 0);
    c->mdb_pages = (uint64_t)st.st_size / 4096;
    free(mdb);
}

static void answers(const store_case *c, unsigned open_flags, test_rng *r, char **out,
                    uint64_t *open_pages, uint64_t *query_pages)
{
    simstore *s;
    assert_int_equal(simstore_open(c->dir, SIMSTORE_OPEN_READONLY | open_flags, &s), 0);
    *open_pages = simstore_lmdb_pages_checked(s);
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, SIMSTORE_QUERY_WITH_META, &q), 0);
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap);
    text[0] = '\0';
    for (size_t i = 0; i < QUERIES; i++) {
        /* Stored fingerprints, near ones and random ones. */
        uint64_t fp = c->fps[test_rng_below(r, c->ndocs)];
        if (i % 3 == 1)
            fp ^= 1ull << test_rng_below(r, 64);
        else if (i % 3 == 2)
            fp = test_rng_next(r);
        const simstore_match *m;
        size_t n;
        assert_int_equal(simstore_query_fp(q, fp, 3, &m, &n), 0);
        for (size_t j = 0; j < n && len + 256 < cap; j++)
            len += (size_t)snprintf(text + len, cap - len, "%zu %.*s %016" PRIx64 " %u %.*s\n", i,
                                    (int)m[j].id_len, m[j].id, m[j].fp, m[j].distance,
                                    (int)m[j].meta_len, m[j].meta ? m[j].meta : "");
    }
    *query_pages = simstore_lmdb_pages_checked(s) - *open_pages;
    simstore_query_free(q);
    simstore_close(s);
    *out = text;
}

static void test_lazy_open__cost_does_not_grow(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "lazy open", 20261125);
    char *tmp = test_tmpdir("lazy");
    store_case small, large;
    build(&small, tmp, "small", 2000, &r);
    build(&large, tmp, "large", 60000, &r);
    assert_true(large.mdb_pages > 10 * small.mdb_pages);

    uint64_t open_small, open_large, q_small, q_large, walk_small, walk_large, wq_small, wq_large;
    char *lazy_small, *lazy_large, *full_small, *full_large;
    uint64_t seed = test_rng_next(&r);
    test_rng a, b;
    test_rng_init(&a, "lazy open queries", seed);
    test_rng_init(&b, "lazy open queries", seed);
    answers(&small, 0, &a, &lazy_small, &open_small, &q_small);
    answers(&small, SIMSTORE_OPEN_FULL_WALK, &b, &full_small, &walk_small, &wq_small);
    test_rng_init(&a, "lazy open queries", seed + 1);
    test_rng_init(&b, "lazy open queries", seed + 1);
    answers(&large, 0, &a, &lazy_large, &open_large, &q_large);
    answers(&large, SIMSTORE_OPEN_FULL_WALK, &b, &full_large, &walk_large, &wq_large);
    fprintf(stderr,
            "data.mdb pages: %" PRIu64 " and %" PRIu64 "; checked at open: lazy %" PRIu64
            " and %" PRIu64 ", walk %" PRIu64 " and %" PRIu64 "; by %d queries: lazy %" PRIu64
            " and %" PRIu64 "\n",
            small.mdb_pages, large.mdb_pages, open_small, open_large, walk_small, walk_large,
            QUERIES, q_small, q_large);

    /* The same answers either way. */
    assert_string_equal(lazy_small, full_small);
    assert_string_equal(lazy_large, full_large);
    assert_true(strlen(lazy_large) > 1000);
    /* The lazy open reads the meta pages, the free list and the main
     * database: a handful of pages, the same for both stores. */
    assert_true(open_small <= 8);
    assert_true(open_large <= open_small + 2);
    /* The walk reads the whole file, and checks nothing after. */
    assert_true(walk_large >= large.mdb_pages * 9 / 10);
    assert_true(wq_small == 0 && wq_large == 0);
    /* A query reads a path per lookup: one more level at most in the
     * larger store (30 times the documents), whose tree is deeper. */
    assert_true(q_small <= (uint64_t)QUERIES * 8);
    assert_true(q_large <= (uint64_t)QUERIES * 12);
    assert_true(q_large < large.mdb_pages / 2);

    /* The tables' side of an open: their block indexes stay in the files
     * (table format 3), so a reader keeps 24 bytes per index chunk of 256
     * blocks (at least one chunk a table): under 1/200 of the tables' bytes
     * even for the small store, where format 2 kept every block key (about
     * 8 bytes a 512-byte block: 1/64). */
    for (int i = 0; i < 2; i++) {
        simstore *ro;
        assert_int_equal(simstore_open(i ? large.dir : small.dir, SIMSTORE_OPEN_READONLY, &ro), 0);
        simstore_stats st;
        assert_int_equal(simstore_get_stats(ro, &st), 0);
        fprintf(stderr, "%s: table bytes %" PRIu64 ", block index bytes in RAM %" PRIu64 "\n",
                i ? "large" : "small", st.table_bytes, st.block_key_bytes);
        assert_true(st.block_key_bytes > 0);
        assert_true(st.block_key_bytes * 200 < st.table_bytes);
        simstore_close(ro);
    }

    /* Writers walk the whole file at open, as before. */
    simstore *s;
    assert_int_equal(simstore_open(large.dir, SIMSTORE_OPEN_WRITE, &s), 0);
    assert_true(simstore_lmdb_pages_checked(s) >= large.mdb_pages * 9 / 10);
    simstore_close(s);
    /* So does a reader's whole-store scan, once, after a lazy open. */
    assert_int_equal(simstore_open(large.dir, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_true(simstore_lmdb_pages_checked(s) <= open_large);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.documents, large.ndocs);
    assert_true(simstore_lmdb_pages_checked(s) <= open_large);
    simstore_close(s);

    free(lazy_small);
    free(lazy_large);
    free(full_small);
    free(full_large);
    free(small.fps);
    free(large.fps);
    free(small.dir);
    free(large.dir);
    test_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    /* The checks of data.mdb's pages are the subject: the stores keep their
     * documents as changes in LMDB (test_changes_begin; a document file's
     * open is test_docfile's). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lazy_open__cost_does_not_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
