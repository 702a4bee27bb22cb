/* test_shrink.c: simstore_shrink, data.mdb rewritten without its free pages
 * and swapped in with the table files:
 *  - after deletes and an add the file gets smaller, and every answer (and
 *    the counts) stay what they were, through a handle opened before the
 *    rewrite and through a new one;
 *  - nothing is left beside the store, and the store takes writes after;
 *  - a writer holding the store makes it SIMSTORE_EBUSY, changing nothing;
 *    a missing store is SIMSTORE_ENOTFOUND. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DOCS 6000
#define ADDED 600
#define QUERIES 400

static uint64_t fps[DOCS + ADDED + 1];

static void doc_id(char *buf, size_t size, int i)
{
    snprintf(buf, size, "doc-%06d", i);
}

static void add_docs(simstore_builder *b, int from, int to)
{
    char id[32];
    for (int i = from; i < to; i++) {
        doc_id(id, sizeof id, i);
        simstore_doc d = {id, strlen(id), fps[i], NULL, 0, (uint64_t)i};
        assert_int_equal(simstore_builder_add(b, &d), 0);
    }
}

/* Every answer of the queries (stored fingerprints and near ones), and the
 * counts, as text. */
static void answers(simstore *s, test_text *out)
{
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    for (int i = 0; i < QUERIES; i++) {
        uint64_t fp = fps[(i * 37) % (DOCS + ADDED)] ^ (i % 3 ? 1ULL << (i % 64) : 0);
        const simstore_match *m;
        size_t n;
        assert_int_equal(simstore_query_fp(q, fp, 3, &m, &n), 0);
        for (size_t j = 0; j < n; j++)
            test_text_add(out, "%d %.*s %016llx %u\n", i, (int)m[j].id_len, m[j].id,
                          (unsigned long long)m[j].fp, m[j].distance);
    }
    simstore_query_free(q);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    test_text_add(out, "documents %llu fingerprints %llu segments %llu\n",
                  (unsigned long long)st.documents, (unsigned long long)st.fingerprints,
                  (unsigned long long)st.segments);
}

static int leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

static uint64_t file_size(const char *dir, const char *name)
{
    char *p = test_path(dir, name);
    struct stat st;
    uint64_t n = stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
    free(p);
    return n;
}

static void test_shrink__smaller_same_answers(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "shrink", 0x5A1A);
    for (int i = 0; i <= DOCS + ADDED; i++)
        fps[i] = test_rng_next(&r);
    char *dir = test_tmpdir("shrink");
    char *path = test_path(dir, "s");
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    add_docs(b, 0, DOCS);
    assert_int_equal(simstore_builder_finish(b), 0);

    /* Delete two in three documents, add some: data.mdb keeps their pages. */
    simstore *w;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &w),
                     0);
    static char idbuf[DOCS][16];
    static const char *ids[DOCS];
    static size_t lens[DOCS];
    size_t n = 0;
    for (int i = 0; i < DOCS; i++)
        if (i % 3) {
            doc_id(idbuf[n], sizeof idbuf[n], i);
            ids[n] = idbuf[n];
            lens[n] = strlen(idbuf[n]);
            n++;
        }
    uint64_t deleted = 0;
    assert_int_equal(simstore_delete(w, ids, lens, n, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, n);
    assert_int_equal(simstore_add_begin(w, &o, &b), 0);
    add_docs(b, DOCS, DOCS + ADDED);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(simstore_compact(w, &o), 0);

    /* A writer holds the store: busy, and nothing changes. */
    uint64_t before = file_size(path, "data.mdb"), after = 0, b0 = 0;
    assert_int_equal(simstore_shrink(path, &b0, &after), SIMSTORE_EBUSY);
    assert_int_equal(file_size(path, "data.mdb"), before);
    assert_int_equal(leftovers(dir), 0);
    simstore_close(w);

    test_text want = {0}, got_old = {0}, got_new = {0};
    simstore *old;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &old), 0);
    answers(old, &want);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(old, &st), 0);
    assert_true(st.lmdb_free_bytes > 0);

    assert_int_equal(simstore_shrink(path, &b0, &after), 0);
    assert_int_equal(b0, before);
    assert_true(after < before);
    assert_int_equal(file_size(path, "data.mdb"), after);
    assert_int_equal(leftovers(dir), 0);

    /* The handle opened before answers as before; a new one the same. */
    answers(old, &got_old);
    assert_true(test_text_same(&got_old, &want, "answers of a handle opened before"));
    simstore_close(old);
    simstore *fresh;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY | SIMSTORE_OPEN_FULL_WALK, &fresh),
                     0);
    answers(fresh, &got_new);
    assert_true(test_text_same(&got_new, &want, "answers after the rewrite"));
    assert_int_equal(simstore_get_stats(fresh, &st), 0);
    assert_true(st.lmdb_free_bytes * 16 < st.lmdb_bytes);
    simstore_close(fresh);

    /* The store takes writes after: the deleted ids come back. */
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &w), 0);
    assert_int_equal(simstore_add_begin(w, &o, &b), 0);
    add_docs(b, 1, 2); /* doc-000001 was deleted */
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore_query *q;
    const simstore_match *m;
    size_t count;
    assert_int_equal(simstore_query_new(w, 0, &q), 0);
    assert_int_equal(simstore_query_fp(q, fps[1], 0, &m, &count), 0);
    assert_int_equal(count, 1);
    assert_memory_equal(m[0].id, "doc-000001", 10);
    simstore_query_free(q);
    simstore_close(w);

    /* A missing store. */
    char *missing = test_path(dir, "nothing");
    assert_int_equal(simstore_shrink(missing, NULL, NULL), SIMSTORE_ENOTFOUND);
    free(missing);

    free(want.buf);
    free(got_old.buf);
    free(got_new.buf);
    test_rmtree(dir);
    free(path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shrink__smaller_same_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
