/* test_manifest.c: sharded stores (format/shards.md). The manifest against
 * its golden file (decode, encode byte for byte, every flipped byte and every
 * truncation rejected); the assignment's test vectors; sharded stores of
 * R = 1, 2, 3, 5 answering every probe exactly as one store of the same
 * documents (same matches, same order) on random, duplicate-heavy and
 * clustered fingerprints; and the refusals: a missing shard, a shard that
 * disagrees with the manifest, a directory of shards without a manifest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "shard/manifest.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void golden_manifest(sims_manifest *m, sims_shard_entry e[3])
{
    memset(m, 0, sizeof *m);
    m->shards = 3;
    m->assignment = SIMS_ASSIGN_XXH3_MOD;
    m->shared.k = 3;
    m->shared.block_bytes = 1024;
    m->shared.fp_version = 2;
    m->shared.shingle_words = 3;
    m->shared.cjk_shingle = 2;
    m->shared.weighting = 0;
    m->shared.cjk = 1;
    m->shared.sketch = 3;
    m->shared.lambda_fixed = 65536;
    const uint64_t docs[3] = {34, 30, 28}, fps[3] = {31, 28, 28};
    for (int i = 0; i < 3; i++) {
        memset(&e[i], 0, sizeof e[i]);
        e[i].documents = docs[i];
        e[i].fingerprints = fps[i];
        e[i].tables = 4;
        snprintf(e[i].name, sizeof e[i].name, "shard-%04d", i);
        m->documents += docs[i];
        m->fingerprints += fps[i];
    }
    m->entry = e;
}

static uint8_t *golden(const char *name, size_t *size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/format/golden/%s", test_source_dir(), name);
    uint8_t *b = test_read_file(path, size);
    if (!b)
        fprintf(stderr, "cannot read %s\n", path);
    assert_non_null(b);
    return b;
}

static void test_manifest_golden__encode(void **state)
{
    (void)state;
    sims_manifest m;
    sims_shard_entry e[3];
    golden_manifest(&m, e);
    uint8_t *bytes;
    size_t n;
    assert_int_equal(sims_manifest_encode(&m, &bytes, &n), SIMSTORE_OK);
    const char *out = getenv("SIMSTORE_WRITE_GOLDEN");
    if (out) /* regenerate: SIMSTORE_WRITE_GOLDEN=path test_manifest */
        assert_int_equal(test_write_file(out, bytes, n), 0);
    size_t gn;
    uint8_t *g = golden("manifest-3.bin", &gn);
    assert_int_equal(n, gn);
    assert_memory_equal(bytes, g, n);
    free(bytes);
    free(g);
}

static void test_manifest_golden__decode(void **state)
{
    (void)state;
    size_t n;
    uint8_t *g = golden("manifest-3.bin", &n);
    sims_manifest m;
    assert_int_equal(sims_manifest_decode(g, n, &m), SIMSTORE_OK);
    assert_int_equal(m.shards, 3);
    assert_int_equal(m.assignment, 1);
    assert_int_equal(m.shared.k, 3);
    assert_int_equal(m.shared.fingerprint_only, 0);
    assert_int_equal(m.shared.block_bytes, 1024);
    assert_int_equal(m.shared.fp_version, 2);
    assert_int_equal(m.shared.shingle_words, 3);
    assert_int_equal(m.shared.cjk_shingle, 2);
    assert_int_equal(m.shared.cjk, 1);
    assert_int_equal(m.shared.sketch, 3);
    assert_int_equal(m.shared.lambda_fixed, 65536);
    assert_int_equal(m.shared.boilerplate_lines, 0);
    assert_int_equal(m.documents, 92);
    assert_int_equal(m.fingerprints, 87);
    assert_string_equal(m.entry[0].name, "shard-0000");
    assert_string_equal(m.entry[2].name, "shard-0002");
    assert_int_equal(m.entry[1].documents, 30);
    assert_int_equal(m.entry[1].fingerprints, 28);
    assert_int_equal(m.entry[2].tables, 4);
    sims_manifest_free(&m);
    free(g);
}

/* Every single-byte change and every truncation is refused, never read. */
static void test_manifest_golden__damage(void **state)
{
    (void)state;
    size_t n;
    uint8_t *g = golden("manifest-3.bin", &n);
    uint8_t *b = malloc(n);
    sims_manifest m;
    for (size_t i = 0; i < n; i++) {
        for (unsigned x = 1; x < 256; x <<= 1) {
            memcpy(b, g, n);
            b[i] ^= (uint8_t)x;
            int rc = sims_manifest_decode(b, n, &m);
            if (rc == SIMSTORE_OK)
                fail_msg("byte %zu ^ 0x%02x accepted", i, x);
        }
    }
    for (size_t len = 0; len < n; len++) {
        int rc = sims_manifest_decode(g, len, &m);
        if (rc == SIMSTORE_OK)
            fail_msg("truncation to %zu bytes accepted", len);
    }
    /* A later version is a version error, not corruption. */
    memcpy(b, g, n);
    b[8] = 3;
    assert_int_equal(sims_manifest_decode(b, n, &m), SIMSTORE_EVERSION);
    /* Version 2 is version 1's layout for shards of fingerprint version 3
     * (format/shards.md), which a reader of version 1 alone refuses as a
     * version: the two go together, each without the other is corrupt. */
    static const struct {
        uint8_t version, fp_version;
        int rc;
    } pairs[] = {{2, 3, SIMSTORE_OK},       {2, 2, SIMSTORE_ECORRUPT}, {2, 1, SIMSTORE_ECORRUPT},
                 {1, 3, SIMSTORE_ECORRUPT}, {1, 4, SIMSTORE_ECORRUPT}, {2, 4, SIMSTORE_ECORRUPT}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        memcpy(b, g, n);
        b[8] = pairs[i].version;
        b[28] = pairs[i].fp_version;
        le_store64(b + n - 8, sims_xxh3_64(b, n - 8, 0));
        assert_int_equal(sims_manifest_decode(b, n, &m), pairs[i].rc);
        if (pairs[i].rc == SIMSTORE_OK) {
            assert_int_equal(m.shared.fp_version, 3);
            uint8_t *again;
            size_t again_len;
            assert_int_equal(sims_manifest_encode(&m, &again, &again_len), SIMSTORE_OK);
            assert_int_equal(again_len, n);
            assert_memory_equal(again, b, n);
            free(again);
            sims_manifest_free(&m);
        }
    }
    free(b);
    free(g);
}

/* format/shards.md, "Assignment": the test vectors. */
static void test_manifest_assign__vectors(void **state)
{
    (void)state;
    assert_int_equal(simstore_shard_of("doc-42", 6, 1), 0);
    assert_int_equal(simstore_shard_of("doc-42", 6, 3), 2);
    assert_int_equal(simstore_shard_of("doc-42", 6, 5), 3);
    assert_int_equal(simstore_shard_of("alder-valley-flood-plan", 23, 3), 0);
    assert_int_equal(simstore_shard_of_fp(0x0123456789abcdefULL, 3), 1);
    char name[16];
    simstore_shard_name(7, name, sizeof name);
    assert_string_equal(name, "shard-0007");
}

/* ---- sharded stores against one store ----------------------------------- */

enum { KIND_RANDOM, KIND_DUPLICATES, KIND_CLUSTERED };

static uint64_t make_fp(test_rng *r, int kind, const uint64_t *centers, unsigned ncenters)
{
    if (kind == KIND_RANDOM)
        return test_rng_next(r);
    uint64_t c = centers[test_rng_below(r, ncenters)];
    if (kind == KIND_DUPLICATES)
        return c;
    unsigned flips = (unsigned)test_rng_below(r, 5);
    for (unsigned i = 0; i < flips; i++)
        c ^= 1ULL << test_rng_below(r, 64);
    return c;
}

static void build_all(const char *dir, unsigned shards, const uint64_t *fps, size_t n)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    o.threads = 1;
    o.replace = 1;
    char path[1024];
    simstore_builder **b = calloc(shards, sizeof *b);
    for (unsigned i = 0; i < shards; i++) {
        char name[16];
        simstore_shard_name(i, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        assert_int_equal(simstore_build_begin(path, &o, &b[i]), SIMSTORE_OK);
    }
    for (size_t j = 0; j < n; j++) {
        char id[32];
        int len = snprintf(id, sizeof id, "d%zu", j * 7919 % (n + 13));
        simstore_doc d = {id, (size_t)len, fps[j], NULL, 0, j};
        assert_int_equal(simstore_builder_add(b[simstore_shard_of(id, (size_t)len, shards)], &d),
                         SIMSTORE_OK);
    }
    for (unsigned i = 0; i < shards; i++)
        assert_int_equal(simstore_builder_finish(b[i]), SIMSTORE_OK);
    free(b);
}

typedef struct batch_check {
    simstore_query *q;
    unsigned k;
    size_t answered, wrong;
} batch_check;

/* Each answer of the sharded batch against one store's query. */
static int check_batch_answer(void *ctx, size_t index, uint64_t fp, const simstore_match *m,
                              size_t n)
{
    batch_check *bc = (batch_check *)ctx;
    const simstore_match *w;
    size_t wn;
    if (index != bc->answered++ || simstore_query_fp(bc->q, fp, bc->k, &w, &wn) != SIMSTORE_OK ||
        wn != n) {
        bc->wrong++;
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (w[i].fp != m[i].fp || w[i].distance != m[i].distance || w[i].id_len != m[i].id_len ||
            memcmp(w[i].id, m[i].id, m[i].id_len) != 0)
            bc->wrong++;
    return 0;
}

static void test_manifest_sharded__same_answers(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("shard");
    test_rng r;
    test_rng_init(&r, "test_manifest_sharded__same_answers", 16);
    const unsigned rs[] = {1, 2, 3, 5};
    for (int kind = KIND_RANDOM; kind <= KIND_CLUSTERED; kind++) {
        size_t n = 3000;
        uint64_t centers[40];
        for (unsigned i = 0; i < 40; i++)
            centers[i] = test_rng_next(&r);
        uint64_t *fps = malloc(n * sizeof *fps);
        for (size_t j = 0; j < n; j++)
            fps[j] = make_fp(&r, kind, centers, 40);
        /* One store: the oracle. */
        char *one = test_path(tmp, "one");
        simstore_build_options o;
        simstore_build_options_init(&o);
        o.k = 3;
        o.threads = 1;
        o.replace = 1;
        simstore_builder *b;
        assert_int_equal(simstore_build_begin(one, &o, &b), SIMSTORE_OK);
        for (size_t j = 0; j < n; j++) {
            char id[32];
            int len = snprintf(id, sizeof id, "d%zu", j * 7919 % (n + 13));
            simstore_doc d = {id, (size_t)len, fps[j], NULL, 0, j};
            assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
        }
        assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);
        simstore *s;
        simstore_query *q;
        assert_int_equal(simstore_open(one, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
        assert_int_equal(simstore_query_new(s, 0, &q), SIMSTORE_OK);
        for (size_t ri = 0; ri < sizeof rs / sizeof rs[0]; ri++) {
            char name[32];
            snprintf(name, sizeof name, "sh%u", rs[ri]);
            char *dir = test_path(tmp, name);
            assert_int_equal(simstore_sharded_prepare(dir, rs[ri], 1), SIMSTORE_OK);
            build_all(dir, rs[ri], fps, n);
            assert_int_equal(simstore_is_sharded(dir), 2); /* not yet published */
            assert_int_equal(simstore_sharded_publish(dir, rs[ri]), SIMSTORE_OK);
            assert_int_equal(simstore_is_sharded(dir), 1);
            simstore_sharded *sh;
            simstore_sharded_query *sq;
            assert_int_equal(simstore_sharded_open(dir, SIMSTORE_OPEN_READONLY, &sh), SIMSTORE_OK);
            assert_int_equal(simstore_sharded_count(sh), rs[ri]);
            simstore_stats a, c;
            assert_int_equal(simstore_get_stats(s, &a), SIMSTORE_OK);
            assert_int_equal(simstore_sharded_get_stats(sh, &c), SIMSTORE_OK);
            assert_int_equal(a.documents, c.documents);
            assert_int_equal(simstore_sharded_query_new(sh, 0, &sq), SIMSTORE_OK);
            for (int probe = 0; probe < 400; probe++) {
                uint64_t fp =
                    probe % 2 ? fps[test_rng_below(&r, n)] : make_fp(&r, kind, centers, 40);
                for (unsigned k = 0; k <= 3; k++) {
                    const simstore_match *m1, *m2;
                    size_t n1, n2;
                    assert_int_equal(simstore_query_fp(q, fp, k, &m1, &n1), SIMSTORE_OK);
                    assert_int_equal(simstore_sharded_query_fp(sq, fp, NULL, k, &m2, &n2),
                                     SIMSTORE_OK);
                    if (n1 != n2)
                        fail_msg("kind %d R %u fp %016llx k %u: %zu matches, sharded %zu", kind,
                                 rs[ri], (unsigned long long)fp, k, n1, n2);
                    for (size_t i = 0; i < n1; i++) {
                        assert_int_equal(m1[i].fp, m2[i].fp);
                        assert_int_equal(m1[i].distance, m2[i].distance);
                        assert_int_equal(m1[i].id_len, m2[i].id_len);
                        assert_memory_equal(m1[i].id, m2[i].id, m1[i].id_len);
                    }
                }
            }
            /* The batch over the shards: the same answers, in input order. */
            batch_check bc = {q, 3, 0, 0};
            assert_int_equal(
                simstore_sharded_query_batch(sh, fps, NULL, 500, 3, NULL, check_batch_answer, &bc),
                SIMSTORE_OK);
            assert_int_equal(bc.answered, 500);
            assert_int_equal(bc.wrong, 0);
            simstore_sharded_query_free(sq);
            simstore_sharded_close(sh);
            free(dir);
        }
        simstore_query_free(q);
        simstore_close(s);
        free(one);
        free(fps);
    }
    test_rmtree(tmp);
    free(tmp);
}

static void test_manifest_sharded__refusals(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("shard-bad");
    char *dir = test_path(tmp, "sh");
    uint64_t fps[50];
    test_rng r;
    test_rng_init(&r, "test_manifest_sharded__refusals", 7);
    for (int i = 0; i < 50; i++)
        fps[i] = test_rng_next(&r);
    assert_int_equal(simstore_sharded_prepare(dir, 3, 0), SIMSTORE_OK);
    build_all(dir, 3, fps, 50);
    simstore_sharded *sh = NULL;
    /* Before the manifest: not a sharded store. */
    assert_int_equal(simstore_sharded_open(dir, 0, &sh), SIMSTORE_ENOTFOUND);
    assert_non_null(strstr(simstore_last_error(), "did not finish"));
    assert_int_equal(simstore_sharded_publish(dir, 3), SIMSTORE_OK);
    /* Published: preparing again needs replace. */
    assert_int_equal(simstore_sharded_prepare(dir, 3, 0), SIMSTORE_EEXIST);
    /* A write open is refused. */
    assert_int_equal(simstore_sharded_open(dir, SIMSTORE_OPEN_WRITE, &sh), SIMSTORE_EINVAL);
    /* A missing shard. */
    char *s1 = test_path(dir, "shard-0001"), *moved = test_path(tmp, "moved");
    assert_int_equal(rename(s1, moved), 0);
    assert_int_equal(simstore_sharded_open(dir, 0, &sh), SIMSTORE_ENOTFOUND);
    assert_non_null(strstr(simstore_last_error(), "shard-0001"));
    assert_int_equal(simstore_sharded_publish(dir, 3), SIMSTORE_ENOTFOUND);
    /* A shard of another k. */
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 2;
    o.threads = 1;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(s1, &o, &b), SIMSTORE_OK);
    simstore_doc d = {"x", 1, 1, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);
    assert_int_equal(simstore_sharded_open(dir, 0, &sh), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "shard-0001"));
    assert_int_equal(simstore_sharded_publish(dir, 3), SIMSTORE_EINVAL);
    /* A directory holding other things is not prepared over. */
    char *other = test_path(tmp, "other"), *f = test_path(other, "notes.txt");
    assert_int_equal(mkdir(other, 0755), 0);
    assert_int_equal(test_write_file(f, "x", 1), 0);
    assert_int_equal(simstore_sharded_prepare(other, 2, 1), SIMSTORE_EINVAL);
    assert_int_equal(simstore_is_sharded(other), 0);
    free(s1);
    free(moved);
    free(other);
    free(f);
    free(dir);
    test_rmtree(tmp);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_manifest_golden__encode),
        cmocka_unit_test(test_manifest_golden__decode),
        cmocka_unit_test(test_manifest_golden__damage),
        cmocka_unit_test(test_manifest_assign__vectors),
        cmocka_unit_test(test_manifest_sharded__same_answers),
        cmocka_unit_test(test_manifest_sharded__refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
