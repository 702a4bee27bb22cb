/* test_hostile.c: what a build may remove, and readers of a replaced store
 * (issue 10, item 6).
 *
 *  - replace__refuses_non_stores: build --replace over a regular file, an
 *    ordinary directory, an empty directory, a directory with a data.mdb that
 *    is not LMDB's, and a symbolic link fails with SIMSTORE_EEXIST and leaves
 *    each exactly as it was; over a store it works.
 *  - replace__refuses_what_appeared_during_the_build: the check is made again
 *    when the new store is swapped in.
 *  - temporaries__only_marked_ones_go: a build of STORE removes only the
 *    STORE.tmp-XXXXXX directories of dead builds (format/store.md, "Temporary
 *    build directories": the name, the marker, an unlocked writer.lock), never
 *    a user's STORE.tmp-mine, an unmarked STORE.tmp-abc123 or a file.
 *  - paths__trailing_slash: "S/" names the store S for builds and opens.
 *  - replaced__reports_a_swap: simstore_replaced() tells a handle's path now
 *    names another store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARKER "build.tmp-marker"

static int build_store(const char *path, int replace, uint64_t first_fp, int n)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.replace = replace;
    o.memory_bytes = 16u << 20;
    o.threads = 1;
    simstore_builder *b;
    int rc = simstore_build_begin(path, &o, &b);
    if (rc)
        return rc;
    for (int i = 0; i < n && rc == SIMSTORE_OK; i++) {
        char id[32];
        snprintf(id, sizeof id, "doc-%d", i);
        simstore_doc d = {0};
        d.id = id;
        d.id_len = strlen(id);
        d.fp = first_fp + (uint64_t)i * 0x0101010101010101ULL;
        rc = simstore_builder_add(b, &d);
    }
    if (rc) {
        simstore_builder_abort(b);
        return rc;
    }
    return simstore_builder_finish(b);
}

static uint64_t store_documents(const char *path)
{
    simstore *s;
    simstore_stats st;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    assert_int_equal(simstore_get_stats(s, &st), SIMSTORE_OK);
    simstore_close(s);
    return st.documents;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void make_dir(const char *path)
{
    assert_int_equal(mkdir(path, 0755), 0);
}

static void put_file(const char *dir, const char *name, const char *text)
{
    char *p = test_path(dir, name);
    assert_int_equal(test_write_file(p, text, strlen(text)), 0);
    free(p);
}

/* The file's bytes equal text. */
static void assert_file(const char *dir, const char *name, const char *text)
{
    char *p = name ? test_path(dir, name) : strdup(dir);
    size_t n = 0;
    uint8_t *data = test_read_file(p, &n);
    if (!data || n != strlen(text) || memcmp(data, text, n) != 0)
        fail_msg("%s: changed or gone", p);
    free(data);
    free(p);
}

static void replace__refuses_non_stores(void **state)
{
    (void)state;
    char *dir = test_tmpdir("hostile-replace");

    /* A regular file. */
    char *file = test_path(dir, "notes.txt");
    assert_int_equal(test_write_file(file, "my notes\n", 9), 0);
    assert_int_equal(build_store(file, 1, 1, 3), SIMSTORE_EEXIST);
    assert_non_null(strstr(simstore_last_error(), "not a simstore store"));
    assert_file(file, NULL, "my notes\n");

    /* An ordinary directory. */
    char *plain = test_path(dir, "photos");
    make_dir(plain);
    put_file(plain, "a.jpg", "jpeg");
    assert_int_equal(build_store(plain, 1, 1, 3), SIMSTORE_EEXIST);
    assert_file(plain, "a.jpg", "jpeg");

    /* An empty directory. */
    char *empty = test_path(dir, "empty");
    make_dir(empty);
    assert_int_equal(build_store(empty, 1, 1, 3), SIMSTORE_EEXIST);
    assert_true(exists(empty));

    /* Store-like names, but data.mdb is not LMDB's. */
    char *fake = test_path(dir, "fake");
    make_dir(fake);
    put_file(fake, "data.mdb", "this is not an LMDB file, just text long enough");
    put_file(fake, "writer.lock", "");
    assert_int_equal(build_store(fake, 1, 1, 3), SIMSTORE_EEXIST);
    assert_file(fake, "data.mdb", "this is not an LMDB file, just text long enough");

    /* A store, plus a file of the user's inside it. */
    char *store = test_path(dir, "store");
    assert_int_equal(build_store(store, 0, 1, 3), SIMSTORE_OK);
    put_file(store, "README", "mine");
    assert_int_equal(build_store(store, 1, 7, 5), SIMSTORE_EEXIST);
    assert_file(store, "README", "mine");
    assert_int_equal(store_documents(store), 3);
    char *readme = test_path(store, "README");
    unlink(readme);
    free(readme);

    /* A symbolic link to the store: the link is not a store. */
    char *link = test_path(dir, "link");
    assert_int_equal(symlink(store, link), 0);
    assert_int_equal(build_store(link, 1, 7, 5), SIMSTORE_EEXIST);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(store_documents(store), 3);

    /* A store is replaced. */
    assert_int_equal(build_store(store, 1, 7, 5), SIMSTORE_OK);
    assert_int_equal(store_documents(store), 5);
    char *marker = test_path(store, MARKER);
    assert_false(exists(marker));

    free(marker);
    free(link);
    free(store);
    free(fake);
    free(empty);
    free(plain);
    free(file);
    test_rmtree(dir);
    free(dir);
}

static void replace__refuses_what_appeared_during_the_build(void **state)
{
    (void)state;
    char *dir = test_tmpdir("hostile-swap");
    char *store = test_path(dir, "store");
    char *aside = test_path(dir, "store-aside");
    assert_int_equal(build_store(store, 0, 1, 3), SIMSTORE_OK);

    simstore_build_options o;
    simstore_build_options_init(&o);
    o.replace = 1;
    o.threads = 1;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(store, &o, &b), SIMSTORE_OK);
    simstore_doc d = {0};
    d.id = "x";
    d.id_len = 1;
    d.fp = 42;
    assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
    /* The user moves the store away and puts a directory of theirs there. */
    assert_int_equal(rename(store, aside), 0);
    make_dir(store);
    put_file(store, "letter.txt", "dear");
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_EEXIST);
    assert_file(store, "letter.txt", "dear");
    assert_int_equal(store_documents(aside), 3);

    free(aside);
    free(store);
    test_rmtree(dir);
    free(dir);
}

static void temporaries__only_marked_ones_go(void **state)
{
    (void)state;
    char *dir = test_tmpdir("hostile-tmp");
    char *store = test_path(dir, "S");

    char *mine = test_path(dir, "S.tmp-mine"); /* not mkdtemp's shape */
    make_dir(mine);
    put_file(mine, "thesis.tex", "chapter 1");
    char *unmarked = test_path(dir, "S.tmp-abc123"); /* the shape, no marker */
    make_dir(unmarked);
    put_file(unmarked, "data.mdb", "keep");
    char *file = test_path(dir, "S.tmp-abc124"); /* a file */
    assert_int_equal(test_write_file(file, "f", 1), 0);
    char *stale = test_path(dir, "S.tmp-Zz9Yy8"); /* a dead build's */
    make_dir(stale);
    put_file(stale, MARKER, "");
    put_file(stale, "writer.lock", "");
    put_file(stale, "s0000000001-t000.tbl.tmp-q1w2e3", "partial");
    char *empty = test_path(dir, "S.tmp-EMPTY0"); /* died just after mkdtemp */
    make_dir(empty);
    char *longer = test_path(dir, "S.tmp-abc1234"); /* seven characters */
    make_dir(longer);
    put_file(longer, MARKER, "");

    assert_int_equal(build_store(store, 0, 1, 3), SIMSTORE_OK);
    assert_file(mine, "thesis.tex", "chapter 1");
    assert_file(unmarked, "data.mdb", "keep");
    assert_file(file, NULL, "f");
    assert_false(exists(stale));
    assert_false(exists(empty));
    assert_true(exists(longer));
    char *marker = test_path(store, MARKER);
    assert_false(exists(marker));

    /* Replacing does the same. */
    make_dir(stale);
    put_file(stale, MARKER, "");
    assert_int_equal(build_store(store, 1, 9, 4), SIMSTORE_OK);
    assert_false(exists(stale));
    assert_file(mine, "thesis.tex", "chapter 1");
    assert_file(unmarked, "data.mdb", "keep");
    assert_false(exists(marker));

    free(marker);
    free(longer);
    free(empty);
    free(stale);
    free(file);
    free(unmarked);
    free(mine);
    free(store);
    test_rmtree(dir);
    free(dir);
}

static void paths__trailing_slash(void **state)
{
    (void)state;
    char *dir = test_tmpdir("hostile-slash");
    char *store = test_path(dir, "S");
    char slashed[4096];
    snprintf(slashed, sizeof slashed, "%s//", store);
    assert_int_equal(build_store(slashed, 0, 1, 3), SIMSTORE_OK);
    struct stat st;
    assert_int_equal(stat(store, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(store_documents(slashed), 3);
    assert_int_equal(build_store(slashed, 1, 5, 6), SIMSTORE_OK);
    assert_int_equal(store_documents(store), 6);
    /* Nothing was made inside the store or beside it. */
    char *inside = test_path(store, ".tmp-");
    assert_false(exists(inside));
    free(inside);
    free(store);
    test_rmtree(dir);
    free(dir);
}

static void replaced__reports_a_swap(void **state)
{
    (void)state;
    char *dir = test_tmpdir("hostile-replaced");
    char *store = test_path(dir, "S");
    assert_int_equal(build_store(store, 0, 1, 3), SIMSTORE_OK);
    simstore *s;
    assert_int_equal(simstore_open(store, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    assert_int_equal(simstore_replaced(s), 0);
    assert_int_equal(simstore_replaced(NULL), 0);
    assert_int_equal(build_store(store, 1, 5, 6), SIMSTORE_OK);
    assert_int_equal(simstore_replaced(s), 1);
    simstore_close(s);
    assert_int_equal(simstore_open(store, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    assert_int_equal(simstore_replaced(s), 0);
    simstore_close(s);
    test_rmtree(store);
    assert_int_equal(simstore_open(store, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_ENOTFOUND);
    free(store);
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(replace__refuses_non_stores),
        cmocka_unit_test(replace__refuses_what_appeared_during_the_build),
        cmocka_unit_test(temporaries__only_marked_ones_go),
        cmocka_unit_test(paths__trailing_slash),
        cmocka_unit_test(replaced__reports_a_swap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
