/* test_options.c: the options structs' sizes (simstore.h, "Options
 * structs"): every call that takes an options struct refuses one its _init
 * did not fill (size 0, or a size another header would give) with
 * SIMSTORE_EINVAL and a message naming the struct and its _init, changing
 * nothing; the same struct filled by its _init is taken. */
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

/* rc is SIMSTORE_EINVAL and the message names `type` and its _init. */
static void assert_refused(int rc, const char *type)
{
    assert_int_equal(rc, SIMSTORE_EINVAL);
    const char *msg = simstore_last_error();
    if (!strstr(msg, type))
        fail_msg("expected a message naming %s, got: %s", type, msg);
    char init[96];
    snprintf(init, sizeof init, "%s_init()", type);
    assert_non_null(strstr(msg, init));
}

/* A small store of three documents with sketches, built with its options
 * filled by their _init. */
static void build_small(const char *path)
{
    simstore_text_options t;
    simstore_text_options_init(&t);
    t.sketch = SIMSTORE_SKETCH_DEFAULT;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    simstore_fingerprinter *f;
    assert_int_equal(simstore_fingerprinter_new(&t, &f), SIMSTORE_OK);
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), SIMSTORE_OK);
    const char *texts[] = {"the quick brown fox jumps over the lazy dog",
                           "the quick brown fox jumps over the lazy cat",
                           "an entirely different sentence about stores"};
    uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf(id, sizeof id, "d%d", i);
        simstore_doc d = {.id = id, .id_len = strlen(id), .sketch = sketch};
        assert_int_equal(
            simstore_fingerprint_sketch(f, texts[i], strlen(texts[i]), &d.fp, sketch, NULL),
            SIMSTORE_OK);
        assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
    }
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);
    simstore_fingerprinter_free(f);
}

static void test_options__text_and_build(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("options");
    char *path = test_path(tmp, "s");
    simstore_text_options zero_text;
    memset(&zero_text, 0, sizeof zero_text);
    simstore_fingerprinter *f = NULL;
    assert_refused(simstore_fingerprinter_new(&zero_text, &f), "simstore_text_options");
    assert_null(f);
    const char *texts[] = {"a text"};
    size_t lens[] = {6};
    uint64_t fps[1];
    assert_refused(simstore_fingerprint_many(&zero_text, 1, texts, lens, 1, fps, NULL),
                   "simstore_text_options");

    simstore_build_options zero_build;
    memset(&zero_build, 0, sizeof zero_build);
    simstore_builder *b = NULL;
    assert_refused(simstore_build_begin(path, &zero_build, &b), "simstore_build_options");
    assert_null(b);
    /* A struct of another size: as a newer or older header would make it. */
    simstore_build_options other;
    simstore_build_options_init(&other);
    other.size = sizeof other + 8;
    assert_refused(simstore_build_begin(path, &other, &b), "simstore_build_options");
    /* Filled build options pointing at unfilled text options. */
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &zero_text;
    assert_refused(simstore_build_begin(path, &o, &b), "simstore_text_options");
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0); /* nothing made */

    simstore_boilerplate_options zero_bp;
    memset(&zero_bp, 0, sizeof zero_bp);
    simstore_boilerplate_counter *c = NULL;
    assert_refused(simstore_boilerplate_counter_new(NULL, &zero_bp, &c),
                   "simstore_boilerplate_options");
    assert_refused(simstore_boilerplate_counter_new(&zero_text, NULL, &c), "simstore_text_options");
    assert_null(c);
    simstore_boilerplate_options bp;
    simstore_boilerplate_options_init(&bp);
    assert_int_equal(simstore_boilerplate_counter_new(NULL, &bp, &c), SIMSTORE_OK);
    simstore_boilerplate_counter_free(c);

    /* Filled by their _init, the same calls work. */
    build_small(path);
    test_rmtree(tmp);
    free(path);
    free(tmp);
}

static int on_batch(void *ctx, size_t index, uint64_t fp, const simstore_match *m, size_t n)
{
    (void)ctx, (void)index, (void)fp, (void)m, (void)n;
    return 0;
}

static int on_pair(void *ctx, const simstore_pair *p)
{
    (void)ctx, (void)p;
    return 0;
}

static int on_member(void *ctx, const simstore_cluster_member *m)
{
    (void)ctx, (void)m;
    return 0;
}

static void test_options__store_calls(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("options");
    char *path = test_path(tmp, "s");
    build_small(path);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), SIMSTORE_OK);

    simstore_build_options zero_build;
    memset(&zero_build, 0, sizeof zero_build);
    simstore_builder *b = NULL;
    assert_refused(simstore_add_begin(s, &zero_build, &b), "simstore_build_options");
    assert_refused(simstore_set_maintenance_options(s, &zero_build), "simstore_build_options");
    assert_refused(simstore_compact(s, &zero_build), "simstore_build_options");
    assert_refused(simstore_maybe_compact(s, &zero_build), "simstore_build_options");
    /* The refused add left no builder open: another begins. */
    assert_int_equal(simstore_add_begin(s, NULL, &b), SIMSTORE_OK);
    simstore_builder_abort(b);

    simstore_batch_options zero_batch;
    memset(&zero_batch, 0, sizeof zero_batch);
    uint64_t fp = 0;
    assert_refused(simstore_query_batch(s, &fp, 1, 3, &zero_batch, on_batch, NULL),
                   "simstore_batch_options");

    simstore_scan_options zero_scan;
    memset(&zero_scan, 0, sizeof zero_scan);
    assert_refused(simstore_pairs(s, &zero_scan, 0, on_pair, NULL), "simstore_scan_options");
    unsigned k;
    double sim;
    assert_refused(simstore_scan_resolve(s, &zero_scan, &k, &sim), "simstore_scan_options");
    simstore_cluster_options zero_cluster;
    memset(&zero_cluster, 0, sizeof zero_cluster);
    assert_refused(simstore_clusters(s, &zero_cluster, on_member, NULL, NULL),
                   "simstore_cluster_options");
    /* Filled cluster options around unfilled scan options. */
    simstore_cluster_options co;
    simstore_cluster_options_init(&co);
    co.scan.size = 0;
    assert_refused(simstore_clusters(s, &co, on_member, NULL, NULL), "simstore_scan_options");

    simstore_scan_options so;
    simstore_scan_options_init(&so);
    assert_int_equal(simstore_scan_resolve(s, &so, &k, &sim), SIMSTORE_OK);
    assert_int_equal(k, 3); /* the store's (the build's default), with the rule's bands */

    simstore_near_rule zero_rule;
    memset(&zero_rule, 0, sizeof zero_rule);
    assert_refused(simstore_near_rule_resolve(&zero_rule, 3, SIMSTORE_SKETCH_NONE, 0),
                   "simstore_near_rule");
    simstore_near_rule rule;
    simstore_near_rule_init(&rule);
    assert_int_equal(simstore_near_rule_resolve(&rule, 3, SIMSTORE_SKETCH_NONE, 0), SIMSTORE_OK);
    assert_int_equal(rule.k, 3);
    simstore_close(s);

    /* The store is as built: three documents. */
    simstore_stats stats;
    assert_int_equal(simstore_open(path, 0, &s), SIMSTORE_OK);
    assert_int_equal(simstore_get_stats(s, &stats), SIMSTORE_OK);
    assert_int_equal(stats.documents, 3);
    simstore_close(s);

    simstore_live_options zero_live;
    memset(&zero_live, 0, sizeof zero_live);
    simstore_live *live = NULL;
    assert_refused(simstore_live_open(path, &zero_live, &live), "simstore_live_options");
    assert_null(live);
    simstore_live_options lo;
    simstore_live_options_init(&lo);
    lo.background_flush = 0;
    assert_int_equal(simstore_live_open(path, &lo, &live), SIMSTORE_OK);
    simstore_live_query *q;
    assert_int_equal(simstore_live_query_new(live, 0, &q), SIMSTORE_OK);
    simstore_doc d = {"n", 1, 1, NULL, 0, 0, 0, NULL};
    int inserted = 0;
    const simstore_match *m;
    size_t n;
    assert_refused(simstore_live_insert_if_new(q, &d, &zero_rule, &inserted, &m, &n),
                   "simstore_near_rule");
    assert_int_equal(inserted, 0);
    simstore_live_query_free(q);
    simstore_live_close(live);

    test_rmtree(tmp);
    free(path);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options__text_and_build),
        cmocka_unit_test(test_options__store_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
