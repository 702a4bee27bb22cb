/* test_clash.c: clashing document ids (given twice, or already stored) in
 * builds and adds: the first clash fails the finish, every clash reported to
 * the callback, or every clash skipped (skip_existing) with the first
 * document given kept; and the compaction reports (compacted callback) of
 * simstore_compact and of the automatic compactions after adds and deletes. */
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
#include <sys/stat.h>

typedef struct clash_log {
    size_t n;
    char ids[16][16];
    int repeated[16];
    uint64_t source[16], first_source[16];
} clash_log;

static void log_clash(void *ctx, const simstore_clash *c)
{
    clash_log *l = (clash_log *)ctx;
    if (l->n < 16) {
        assert_true(c->id_len < sizeof l->ids[0]);
        memcpy(l->ids[l->n], c->id, c->id_len);
        l->ids[l->n][c->id_len] = '\0';
        l->repeated[l->n] = c->repeated;
        l->source[l->n] = c->source;
        l->first_source[l->n] = c->first_source;
    }
    l->n++;
}

typedef struct compaction_log {
    size_t n;
    simstore_compaction last;
} compaction_log;

static void log_compaction(void *ctx, const simstore_compaction *c)
{
    compaction_log *l = (compaction_log *)ctx;
    l->n++;
    l->last = *c;
}

static void add_doc(simstore_builder *b, const char *id, uint64_t fp, const char *meta,
                    uint64_t source)
{
    simstore_doc d = {id, strlen(id), fp, meta, meta ? strlen(meta) : 0, source};
    assert_int_equal(simstore_builder_add(b, &d), 0);
}

/* The fingerprint and metadata stored for id; 0 when it is not stored. */
static int lookup(simstore *s, const char *id, uint64_t fp, char *meta, size_t meta_size)
{
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, SIMSTORE_QUERY_WITH_META, &q), 0);
    const simstore_match *m;
    size_t n;
    assert_int_equal(simstore_query_fp(q, fp, 0, &m, &n), 0);
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].id_len == strlen(id) && memcmp(m[i].id, id, m[i].id_len) == 0) {
            found = 1;
            snprintf(meta, meta_size, "%.*s", (int)m[i].meta_len, m[i].meta ? m[i].meta : "");
        }
    }
    simstore_query_free(q);
    return found;
}

static void test_clash_build__every_clash_reported_then_fails(void **state)
{
    (void)state;
    char *dir = test_tmpdir("clash-build");
    char *path = test_path(dir, "s");
    clash_log log = {0};
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.clash = log_clash;
    o.clash_ctx = &log;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    add_doc(b, "b", 1, NULL, 0);
    add_doc(b, "a", 2, NULL, 1);
    add_doc(b, "b", 3, NULL, 2);
    add_doc(b, "c", 4, NULL, 3);
    add_doc(b, "a", 5, NULL, 4);
    add_doc(b, "b", 6, NULL, 5);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "3 document ids given twice"));
    /* In id order; for one id, in the order given; first_source is the first. */
    assert_int_equal(log.n, 3);
    assert_string_equal(log.ids[0], "a");
    assert_int_equal(log.source[0], 4);
    assert_int_equal(log.first_source[0], 1);
    assert_string_equal(log.ids[1], "b");
    assert_int_equal(log.source[1], 2);
    assert_int_equal(log.first_source[1], 0);
    assert_string_equal(log.ids[2], "b");
    assert_int_equal(log.source[2], 5);
    assert_int_equal(log.first_source[2], 0);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(log.repeated[i], 1);
    struct stat st;
    assert_int_equal(stat(path, &st), -1);

    /* skip_existing: the first document given with an id is kept. */
    memset(&log, 0, sizeof log);
    o.skip_existing = 1;
    assert_int_equal(simstore_build_begin(path, &o, &b), 0);
    add_doc(b, "b", 1, "{\"n\":1}", 0);
    add_doc(b, "a", 2, NULL, 1);
    add_doc(b, "b", 3, "{\"n\":2}", 2);
    add_doc(b, "c", 4, NULL, 3);
    add_doc(b, "b", 1, "{\"n\":3}", 4);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(log.n, 2);
    simstore *s;
    simstore_stats stats;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_get_stats(s, &stats), 0);
    assert_int_equal(stats.documents, 3);
    assert_int_equal(stats.fingerprints, 3); /* 3 (b's second) never stored */
    char meta[64];
    assert_true(lookup(s, "b", 1, meta, sizeof meta));
    assert_string_equal(meta, "{\"n\":1}");
    assert_false(lookup(s, "b", 3, meta, sizeof meta));
    simstore_close(s);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_clash_add__stored_ids_reported_skipped_or_refused(void **state)
{
    (void)state;
    char *dir = test_tmpdir("clash-add");
    char *path = test_path(dir, "s");
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, NULL, &b), 0);
    add_doc(b, "x", 10, NULL, 0);
    add_doc(b, "y", 11, NULL, 1);
    assert_int_equal(simstore_builder_finish(b), 0);

    simstore *w;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &w), 0);
    /* Without a callback: the first clash, named. */
    assert_int_equal(simstore_add_begin(w, NULL, &b), 0);
    add_doc(b, "z", 12, NULL, 0);
    add_doc(b, "y", 13, NULL, 1);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "document id 'y' is already in the store"));

    /* With one: every clash, then the failure; nothing added. */
    clash_log log = {0};
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.clash = log_clash;
    o.clash_ctx = &log;
    assert_int_equal(simstore_add_begin(w, &o, &b), 0);
    add_doc(b, "y", 20, NULL, 0);
    add_doc(b, "z", 21, NULL, 1);
    add_doc(b, "x", 22, NULL, 2);
    add_doc(b, "z", 23, NULL, 3);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "3 document ids given twice or already in"));
    assert_int_equal(log.n, 3);
    assert_string_equal(log.ids[0], "x");
    assert_int_equal(log.repeated[0], 0);
    assert_string_equal(log.ids[1], "y");
    assert_int_equal(log.repeated[1], 0);
    assert_string_equal(log.ids[2], "z");
    assert_int_equal(log.repeated[2], 1);
    assert_int_equal(log.first_source[2], 1);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(w, &st), 0);
    assert_int_equal(st.documents, 2);
    assert_int_equal(st.segments, 1);

    /* skip_existing: the new ids go in (z once, as first given), the
     * stored ones keep their fingerprints. */
    memset(&log, 0, sizeof log);
    o.skip_existing = 1;
    assert_int_equal(simstore_add_begin(w, &o, &b), 0);
    add_doc(b, "y", 20, NULL, 0);
    add_doc(b, "z", 21, NULL, 1);
    add_doc(b, "x", 22, NULL, 2);
    add_doc(b, "z", 23, NULL, 3);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(log.n, 3);
    assert_int_equal(simstore_get_stats(w, &st), 0);
    assert_int_equal(st.documents, 3);
    assert_int_equal(st.fingerprints, 3);
    char meta[8];
    assert_true(lookup(w, "z", 21, meta, sizeof meta));
    assert_false(lookup(w, "z", 23, meta, sizeof meta));
    assert_true(lookup(w, "y", 11, meta, sizeof meta));
    assert_false(lookup(w, "y", 20, meta, sizeof meta));

    /* Only clashes: a commit without a segment. */
    memset(&log, 0, sizeof log);
    assert_int_equal(simstore_add_begin(w, &o, &b), 0);
    add_doc(b, "x", 30, NULL, 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(log.n, 1);
    assert_int_equal(simstore_get_stats(w, &st), 0);
    assert_int_equal(st.documents, 3);
    assert_int_equal(st.segments, 2);
    simstore_close(w);

    simstore_verify_summary sum;
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, &sum), 0);
    assert_int_equal(sum.errors, 0);
    test_rmtree(dir);
    free(path);
    free(dir);
}

static void test_clash_compacted__reported_by_compact_add_and_delete(void **state)
{
    (void)state;
    char *dir = test_tmpdir("compacted");
    char *path = test_path(dir, "s");
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, NULL, &b), 0);
    add_doc(b, "d0", 0x100, NULL, 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    compaction_log log = {0};
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.compacted = log_compaction;
    o.compacted_ctx = &log;
    simstore *w;
    char id[16];
    /* Adds without the policy, then one with it: 9 segments -> 1. */
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &w),
                     0);
    for (int i = 1; i < SIMSTORE_MAX_SEGMENTS; i++) {
        assert_int_equal(simstore_add_begin(w, &o, &b), 0);
        snprintf(id, sizeof id, "d%d", i);
        add_doc(b, id, 0x100 + (uint64_t)i, NULL, 0);
        assert_int_equal(simstore_builder_finish(b), 0);
    }
    simstore_close(w);
    assert_int_equal(log.n, 0);
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &w), 0);
    assert_int_equal(simstore_add_begin(w, &o, &b), 0);
    add_doc(b, "d9", 0x109, NULL, 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(log.n, 1);
    assert_int_equal(log.last.segments_before, SIMSTORE_MAX_SEGMENTS + 1);
    assert_int_equal(log.last.segments_after, 1);
    assert_int_equal(log.last.fingerprints_dropped, 0);

    /* A delete of most documents: compacted through the maintenance options. */
    assert_int_equal(simstore_set_maintenance_options(w, &o), SIMSTORE_OK);
    const char *ids[] = {"d0", "d1", "d2", "d3", "d4", "d5"};
    size_t lens[] = {2, 2, 2, 2, 2, 2};
    uint64_t deleted;
    assert_int_equal(simstore_delete(w, ids, lens, 6, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, 6);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.last.segments_before, 1);
    assert_int_equal(log.last.segments_after, 1);
    assert_int_equal(log.last.fingerprints_dropped, 6);

    /* simstore_compact: told when it rewrites, not when it leaves the store. */
    assert_int_equal(simstore_compact(w, &o), 0);
    assert_int_equal(log.n, 2);
    simstore_close(w);
    test_rmtree(dir);
    free(path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clash_build__every_clash_reported_then_fails),
        cmocka_unit_test(test_clash_add__stored_ids_reported_skipped_or_refused),
        cmocka_unit_test(test_clash_compacted__reported_by_compact_add_and_delete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
