/* test_insertion.c: documents' insertion numbers (format/store.md, "The
 * document record") through queries: a build numbers its documents in the
 * order given, each later add after every earlier commit, deletes and
 * compactions keep them; a record written without the number (as stores
 * before it hold) still decodes, verifies and answers, as 0; commits past the
 * generation limit are refused with SIMSTORE_EFULL and change nothing.
 * Positions given with simstore_builder_set_position are honoured (misuse
 * refused, the builder unchanged; the first of ids given twice is the one at
 * the smallest position; the 2^40 limit as before), and shards built with
 * their documents' positions in the whole input number them as one store
 * of that input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/bytes.h"
#include "lmdb/records.h"
#include "simstore.h"
#include "changes_store.h"
#include "testutil.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CENTRE 0x5a5a0123456789a5ULL
#define MAX_DOCS 256
#define INSERTION(gen, pos) ((uint64_t)(gen) << 40 | (uint64_t)(pos))

/* Every document of these tests lies within distance 1 of CENTRE, so one
 * query returns them all. */
static uint64_t fp_of(unsigned i)
{
    return i % 2 ? CENTRE : CENTRE ^ (1ULL << (i % 64));
}

/* What the store should hold: id -> insertion number. */
typedef struct expected {
    char id[MAX_DOCS][32];
    uint64_t insertion[MAX_DOCS];
    unsigned n;
} expected;

static void expect_doc(expected *e, const char *id, uint64_t insertion)
{
    assert_true(e->n < MAX_DOCS);
    snprintf(e->id[e->n], sizeof e->id[0], "%s", id);
    e->insertion[e->n++] = insertion;
}

static void forget_doc(expected *e, const char *id)
{
    for (unsigned i = 0; i < e->n; i++)
        if (strcmp(e->id[i], id) == 0) {
            e->id[i][0] = '\0';
            return;
        }
    fail_msg("%s was not expected", id);
}

static simstore_build_options options(void)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    o.block_bytes = 256;
    o.threads = 1;
    o.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    return o;
}

/* Give documents ids[0..n) in that order; fps by `first + i`. */
static int give(simstore_builder *b, const char *const *ids, unsigned n, unsigned first)
{
    for (unsigned i = 0; i < n; i++) {
        char meta[32];
        int ml = snprintf(meta, sizeof meta, "{\"i\":%u}", first + i);
        simstore_doc d = {
            ids[i],   strlen(ids[i]), fp_of(first + i), i % 3 ? NULL : meta, i % 3 ? 0 : (size_t)ml,
            first + i};
        int numeric = ids[i][0] >= '0' && ids[i][0] <= '9';
        d.flags = numeric ? SIMSTORE_DOC_INTEGER_ID : 0;
        int rc = simstore_builder_add(b, &d);
        if (rc)
            return rc;
    }
    return SIMSTORE_OK;
}

static int add(const char *dir, const char *const *ids, unsigned n, unsigned first,
               int skip_existing)
{
    simstore *s;
    simstore_builder *b;
    simstore_build_options o = options();
    o.skip_existing = skip_existing;
    int rc = simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s);
    if (rc)
        return rc;
    rc = simstore_add_begin(s, &o, &b);
    if (rc == SIMSTORE_OK) {
        rc = give(b, ids, n, first);
        if (rc)
            simstore_builder_abort(b);
        else
            rc = simstore_builder_finish(b);
    }
    simstore_close(s);
    return rc;
}

static uint64_t generation(const char *dir)
{
    simstore *s;
    simstore_stats st;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_get_stats(s, &st), 0);
    simstore_close(s);
    return st.generation;
}

static int by_insertion(const void *a, const void *b)
{
    const simstore_match *x = a, *y = b;
    return (x->insertion > y->insertion) - (x->insertion < y->insertion);
}

/* The store answers exactly the expected documents with their numbers, the
 * metadata intact, and verifies clean. Returns the matches sorted by
 * insertion number, ids copied to `order`. */
static void check_store(const char *dir, const expected *e, char order[][32], unsigned *count)
{
    simstore *s;
    simstore_query *q;
    const simstore_match *m;
    size_t n;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, SIMSTORE_QUERY_WITH_META, &q), 0);
    assert_int_equal(simstore_query_fp(q, CENTRE, 1, &m, &n), 0);
    unsigned live = 0;
    for (unsigned i = 0; i < e->n; i++)
        live += e->id[i][0] != '\0';
    assert_int_equal(n, live);
    simstore_match *sorted = malloc(n * sizeof *sorted);
    memcpy(sorted, m, n * sizeof *sorted);
    for (size_t i = 0; i < n; i++) {
        unsigned j = 0;
        while (j < e->n &&
               (strlen(e->id[j]) != m[i].id_len || memcmp(e->id[j], m[i].id, m[i].id_len) != 0))
            j++;
        if (j == e->n)
            fail_msg("unexpected answer %.*s", (int)m[i].id_len, m[i].id);
        if (m[i].insertion != e->insertion[j])
            fail_msg("%s: insertion %016llx, expected %016llx", e->id[j],
                     (unsigned long long)m[i].insertion, (unsigned long long)e->insertion[j]);
        /* The fields around the number in the record are read right. */
        assert_int_equal(m[i].flags,
                         m[i].id[0] >= '0' && m[i].id[0] <= '9' ? SIMSTORE_MATCH_INTEGER_ID : 0);
        assert_true(simstore_distance(m[i].fp, CENTRE) <= 1);
        if (m[i].meta)
            assert_true(m[i].meta_len > 4 && memcmp(m[i].meta, "{\"i\":", 5) == 0);
    }
    /* Without metadata the records are read all the same. */
    simstore_query *bare;
    const simstore_match *m2;
    size_t n2;
    assert_int_equal(simstore_query_new(s, 0, &bare), 0);
    assert_int_equal(simstore_query_fp(bare, CENTRE, 1, &m2, &n2), 0);
    assert_int_equal(n2, n);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(m2[i].id_len, sorted[i].id_len);
        assert_memory_equal(m2[i].id, sorted[i].id, sorted[i].id_len);
        assert_true(m2[i].insertion == sorted[i].insertion);
        assert_null(m2[i].meta);
    }
    simstore_query_free(bare);
    qsort(sorted, n, sizeof *sorted, by_insertion);
    for (size_t i = 0; i < n; i++)
        snprintf(order[i], 32, "%.*s", (int)sorted[i].id_len, sorted[i].id);
    *count = (unsigned)n;
    free(sorted);
    simstore_query_free(q);
    simstore_close(s);
    simstore_verify_summary sum;
    assert_int_equal(simstore_verify(dir, 0, NULL, NULL, &sum), 0);
    assert_int_equal(sum.errors, 0);
}

static void test_insertion__orders_build_and_adds(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("insertion");
    char *dir = test_path(tmp, "store");
    expected *e = calloc(1, sizeof *e);
    char(*order)[32] = calloc(MAX_DOCS, 32);
    unsigned n;

    /* Build: ids given against their sort order (so the LMDB order is not
     * the insertion order); generation 1, positions as given. */
    static const char *const built[] = {"m", "z", "b", "y", "a", "x", "c", "1234", "w", "d"};
    unsigned nb = sizeof built / sizeof built[0];
    simstore_build_options o = options();
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(dir, &o, &b), 0);
    assert_int_equal(give(b, built, nb, 0), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    for (unsigned i = 0; i < nb; i++)
        expect_doc(e, built[i], INSERTION(1, i));
    check_store(dir, e, order, &n);
    for (unsigned i = 0; i < n; i++)
        assert_string_equal(order[i], built[i]);
    assert_int_equal(generation(dir), 1);

    /* Add 1 (generation 2), skipping clashes: "m" is stored already and
     * "k" is given twice; both still take positions, the first "k" is kept. */
    static const char *const add1[] = {"m", "q", "k", "e", "k", "f"};
    assert_int_equal(add(dir, add1, 6, 100, 1), 0);
    expect_doc(e, "q", INSERTION(2, 1));
    expect_doc(e, "k", INSERTION(2, 2));
    expect_doc(e, "e", INSERTION(2, 3));
    expect_doc(e, "f", INSERTION(2, 5));
    check_store(dir, e, order, &n);
    static const char *const after1[] = {"m",    "z", "b", "y", "a", "x", "c",
                                         "1234", "w", "d", "q", "k", "e", "f"};
    assert_int_equal(n, 14);
    for (unsigned i = 0; i < n; i++)
        assert_string_equal(order[i], after1[i]);

    /* A delete (generation 3) changes no number; the next add is generation 4. */
    simstore *s;
    const char *gone[] = {"b", "k"};
    size_t lens[] = {1, 1};
    uint64_t deleted;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    assert_int_equal(simstore_delete(s, gone, lens, 2, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, 2);
    simstore_close(s);
    forget_doc(e, "b");
    forget_doc(e, "k");
    static const char *const add2[] = {"k", "0", "b"};
    assert_int_equal(add(dir, add2, 3, 200, 0), 0);
    assert_int_equal(generation(dir), 4);
    expect_doc(e, "k", INSERTION(4, 0));
    expect_doc(e, "0", INSERTION(4, 1));
    expect_doc(e, "b", INSERTION(4, 2));
    check_store(dir, e, order, &n);
    static const char *const after2[] = {"m", "z", "y", "a", "x", "c", "1234", "w",
                                         "d", "q", "e", "f", "k", "0", "b"};
    assert_int_equal(n, 15);
    for (unsigned i = 0; i < n; i++)
        assert_string_equal(order[i], after2[i]);

    /* A compaction rewrites tables, not documents: the numbers stay. */
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_WRITE, &s), 0);
    assert_int_equal(simstore_compact(s, NULL), 0);
    simstore_close(s);
    check_store(dir, e, order, &n);
    for (unsigned i = 0; i < n; i++)
        assert_string_equal(order[i], after2[i]);

    free(order);
    free(e);
    test_rmtree(tmp);
    free(dir);
    free(tmp);
}

/* Raw LMDB access to a store (none of its handles may be open). */
typedef struct raw {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, docs;
} raw;

static void raw_open(raw *r, const char *dir)
{
    assert_int_equal(mdb_env_create(&r->env), 0);
    mdb_env_set_maxdbs(r->env, 4);
    mdb_env_set_mapsize(r->env, (size_t)1 << 30);
    assert_int_equal(mdb_env_open(r->env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(r->env, NULL, 0, &r->txn), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "meta", 0, &r->meta), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "docs", 0, &r->docs), 0);
}

static void raw_commit(raw *r)
{
    assert_int_equal(mdb_txn_commit(r->txn), 0);
    mdb_env_close(r->env);
}

/* Rewrite document `id`'s record as a store written before insertion
 * numbers holds it: the same fields, flag bit 2 clear, no number. */
static void strip_insertion(const char *dir, const char *id)
{
    raw r;
    raw_open(&r, dir);
    MDB_val key = {strlen(id), (void *)id}, val;
    assert_int_equal(mdb_get(r.txn, r.docs, &key, &val), 0);
    sims_doc_record rec;
    assert_int_equal(
        sims_doc_record_decode((const uint8_t *)id, strlen(id), val.mv_data, val.mv_size, &rec), 0);
    assert_true(rec.flags & SIMS_DOC_FLAG_INSERTION);
    uint8_t buf[512];
    unsigned flags = rec.flags & ~SIMS_DOC_FLAG_INSERTION;
    size_t n = sims_doc_record_encode((const uint8_t *)id, strlen(id), rec.fp, flags, 0, rec.meta,
                                      rec.meta_len, buf, sizeof buf);
    assert_int_equal(n, sims_doc_record_size(rec.meta_len, flags));
    assert_int_equal(n, val.mv_size - SIMS_DOC_INSERTION_BYTES);
    assert_int_equal(buf[1] & SIMS_DOC_FLAG_INSERTION, 0);
    MDB_val nv = {n, buf};
    assert_int_equal(mdb_put(r.txn, r.docs, &key, &nv, 0), 0);
    raw_commit(&r);
}

static void test_insertion__records_without_it_still_answer(void **state)
{
    (void)state;
    /* Records rewritten in docs without insertion numbers: documents added
     * (changes in LMDB, test_changes_begin). */
    char *tmp = test_tmpdir("insertion-old");
    char *dir = test_path(tmp, "store");
    expected *e = calloc(1, sizeof *e);
    char(*order)[32] = calloc(MAX_DOCS, 32);
    unsigned n;
    static const char *const built[] = {"p", "o", "n", "m"};
    simstore_build_options o = options();
    simstore_builder *b;
    simstore *w;
    assert_int_equal(test_changes_begin(dir, &o, &w, &b), 0);
    assert_int_equal(give(b, built, 4, 0), 0); /* "p" has metadata */
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore_close(w);
    strip_insertion(dir, "p");
    strip_insertion(dir, "n");
    expect_doc(e, "p", 0);
    expect_doc(e, "o", INSERTION(2, 1)); /* generation 2: the empty build was 1 */
    expect_doc(e, "n", 0);
    expect_doc(e, "m", INSERTION(2, 3));
    /* Decodes (query cross-check), verifies (in check_store), answers as 0:
     * before every numbered document, the two tied. */
    check_store(dir, e, order, &n);
    assert_int_equal(n, 4);
    assert_true((strcmp(order[0], "n") == 0 && strcmp(order[1], "p") == 0) ||
                (strcmp(order[0], "p") == 0 && strcmp(order[1], "n") == 0));
    assert_string_equal(order[2], "o");
    assert_string_equal(order[3], "m");
    /* Such a store takes adds (numbered after everything) and deletes. */
    static const char *const more[] = {"a"};
    assert_int_equal(add(dir, more, 1, 50, 0), 0);
    expect_doc(e, "a", INSERTION(3, 0));
    check_store(dir, e, order, &n);
    assert_string_equal(order[n - 1], "a");
    simstore *s;
    const char *gone[] = {"p"};
    size_t lens[] = {1};
    uint64_t deleted;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    assert_int_equal(simstore_delete(s, gone, lens, 1, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, 1);
    simstore_close(s);
    forget_doc(e, "p");
    check_store(dir, e, order, &n);
    assert_int_equal(n, 4);
    free(order);
    free(e);
    test_rmtree(tmp);
    free(dir);
    free(tmp);
}

/* Set the state record's generation (its checksum resealed). */
static void set_generation(const char *dir, uint64_t gen)
{
    raw r;
    raw_open(&r, dir);
    MDB_val key = {5, (void *)"state"}, val;
    assert_int_equal(mdb_get(r.txn, r.meta, &key, &val), 0);
    uint32_t tables = val.mv_size >= 80 ? le_load32((const uint8_t *)val.mv_data + 48 + 24) : 0;
    sims_state_record st;
    assert_int_equal(sims_state_record_decode(val.mv_data, val.mv_size, tables, &st), 0);
    st.generation = gen;
    size_t n = sims_state_record_size(st.segment_count);
    uint8_t *buf = malloc(n);
    assert_int_equal(sims_state_record_encode(&st, buf, n), n);
    sims_state_record_release(&st);
    MDB_val nv = {n, buf};
    assert_int_equal(mdb_put(r.txn, r.meta, &key, &nv, 0), 0);
    raw_commit(&r);
    free(buf);
}

static unsigned count_files(const char *dir)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    unsigned n = 0;
    assert_non_null(p);
    assert_int_equal(fscanf(p, "%u", &n), 1);
    pclose(p);
    return n;
}

static void test_insertion__generation_limit_refuses_adds(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("insertion-limit");
    char *dir = test_path(tmp, "store");
    expected *e = calloc(1, sizeof *e);
    char(*order)[32] = calloc(MAX_DOCS, 32);
    unsigned n;
    static const char *const built[] = {"a", "b"};
    simstore_build_options o = options();
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(dir, &o, &b), 0);
    assert_int_equal(give(b, built, 2, 0), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    expect_doc(e, "a", INSERTION(1, 0));
    expect_doc(e, "b", INSERTION(1, 1));

    /* One generation below the limit: the last add that numbers documents. */
    uint64_t last = SIMS_DOC_GENERATION_LIMIT - 1;
    set_generation(dir, last - 1);
    static const char *const c[] = {"c"};
    assert_int_equal(add(dir, c, 1, 10, 0), 0);
    expect_doc(e, "c", INSERTION(last, 0));
    assert_true(e->insertion[2] == (UINT64_MAX & ~(((uint64_t)1 << 40) - 1)));
    check_store(dir, e, order, &n);
    assert_string_equal(order[2], "c");

    /* At the limit: refused, nothing written. */
    assert_int_equal(generation(dir), last);
    unsigned files = count_files(dir);
    static const char *const d[] = {"d"};
    assert_int_equal(add(dir, d, 1, 11, 0), SIMSTORE_EFULL);
    assert_non_null(strstr(simstore_last_error(), "generation"));
    assert_int_equal(generation(dir), last);
    assert_int_equal(count_files(dir), files);
    check_store(dir, e, order, &n);
    /* Commits without documents go on: a delete, an empty add. */
    simstore *s;
    const char *gone[] = {"a"};
    size_t lens[] = {1};
    uint64_t deleted;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    assert_int_equal(simstore_delete(s, gone, lens, 1, &deleted, NULL, NULL), 0);
    simstore_close(s);
    forget_doc(e, "a");
    assert_int_equal(add(dir, NULL, 0, 0, 0), 0);
    assert_int_equal(generation(dir), last + 2);
    assert_int_equal(add(dir, d, 1, 11, 0), SIMSTORE_EFULL);
    check_store(dir, e, order, &n);
    free(order);
    free(e);
    test_rmtree(tmp);
    free(dir);
    free(tmp);
}

static void clash_seen(void *ctx, const simstore_clash *c)
{
    simstore_clash *seen = ctx;
    *seen = *c;
    seen->id = NULL;
}

static int fp_seen(void *ctx, const simstore_document *doc)
{
    *(uint64_t *)ctx = doc->fp;
    return 0;
}

static void test_insertion__positions_given(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("insertion-positions");
    char *dir = test_path(tmp, "store");
    expected *e = calloc(1, sizeof *e);
    char(*order)[32] = calloc(MAX_DOCS, 32);
    unsigned n;
    simstore_build_options o = options();
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(dir, &o, &b), 0);
    static const char *const first[] = {"m", "z"};
    assert_int_equal(simstore_builder_set_position(b, 5), SIMSTORE_OK);
    assert_int_equal(give(b, first, 2, 0), 0);
    /* Positions only increase: 6 is taken, 7 is the next anyway. */
    assert_int_equal(simstore_builder_set_position(b, 6), SIMSTORE_EINVAL);
    assert_int_equal(simstore_builder_set_position(b, 0), SIMSTORE_EINVAL);
    assert_int_equal(simstore_builder_set_position(b, 7), SIMSTORE_OK);
    static const char *const second[] = {"b"};
    assert_int_equal(give(b, second, 1, 2), 0);
    assert_int_equal(simstore_builder_set_position(b, 40), SIMSTORE_OK);
    /* Refusals leave the builder as it was: the next document takes 40. */
    assert_int_equal(simstore_builder_set_position(b, (uint64_t)1 << 40), SIMSTORE_EFULL);
    assert_int_equal(simstore_builder_set_position(b, UINT64_MAX), SIMSTORE_EFULL);
    assert_int_equal(simstore_builder_set_position(b, 39), SIMSTORE_EINVAL);
    static const char *const third[] = {"y", "1234"};
    assert_int_equal(give(b, third, 2, 3), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    expect_doc(e, "m", INSERTION(1, 5));
    expect_doc(e, "z", INSERTION(1, 6));
    expect_doc(e, "b", INSERTION(1, 7));
    expect_doc(e, "y", INSERTION(1, 40));
    expect_doc(e, "1234", INSERTION(1, 41));
    check_store(dir, e, order, &n);

    /* An add with skip_existing: the copy of "k" at the smallest position
     * is kept (its fingerprint, fp_of(100), differs from the other's) and
     * the clash names it first. */
    simstore *s;
    simstore_clash seen;
    memset(&seen, 0, sizeof seen);
    o.skip_existing = 1;
    o.clash = clash_seen;
    o.clash_ctx = &seen;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    assert_int_equal(simstore_add_begin(s, &o, &b), 0);
    static const char *const k1[] = {"k"}, *const k2[] = {"q", "k"};
    assert_int_equal(simstore_builder_set_position(b, 3), 0);
    assert_int_equal(give(b, k1, 1, 100), 0);
    assert_int_equal(simstore_builder_set_position(b, 10), 0);
    assert_int_equal(give(b, k2, 2, 110), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_true(seen.repeated);
    assert_int_equal(seen.first_source, 100);
    assert_int_equal(seen.source, 111);
    const char *k[] = {"k"};
    size_t klen[] = {1};
    uint64_t kfp = 0;
    assert_int_equal(simstore_get(s, k, klen, 1, fp_seen, &kfp), 0);
    assert_true(kfp == fp_of(100));
    simstore_close(s);
    expect_doc(e, "k", INSERTION(2, 3));
    expect_doc(e, "q", INSERTION(2, 10));
    check_store(dir, e, order, &n);

    /* A fingerprint-only builder numbers no documents. */
    char *fponly = test_path(tmp, "fponly");
    simstore_build_options fo = options();
    fo.fingerprint_only = 1;
    assert_int_equal(simstore_build_begin(fponly, &fo, &b), 0);
    assert_int_equal(simstore_builder_set_position(b, 0), SIMSTORE_EINVAL);
    simstore_builder_abort(b);

    /* The limit: the last position is 2^40 - 1; one past it fails the
     * finish as 2^40 documents do (and creates nothing). */
    char *full = test_path(tmp, "full");
    static const char *const two[] = {"a", "b"};
    o = options();
    for (unsigned count = 2; count >= 1; count--) {
        assert_int_equal(simstore_build_begin(full, &o, &b), 0);
        assert_int_equal(simstore_builder_set_position(b, ((uint64_t)1 << 40) - 1), 0);
        assert_int_equal(give(b, two, count, 0), 0);
        assert_int_equal(simstore_builder_finish(b), count == 1 ? SIMSTORE_OK : SIMSTORE_EFULL);
    }
    expected *fe = calloc(1, sizeof *fe);
    expect_doc(fe, "a", INSERTION(1, ((uint64_t)1 << 40) - 1));
    check_store(full, fe, order, &n);
    free(fe);
    free(full);
    free(fponly);
    free(order);
    free(e);
    test_rmtree(tmp);
    free(dir);
    free(tmp);
}

/* Shards whose builders are given each document's position in the whole
 * input (as `simstore build --shards` does) answer with the insertion
 * numbers of one store of that input. */
static void test_insertion__shards_number_as_one_store(void **state)
{
    (void)state;
    char *tmp = test_tmpdir("insertion-shards");
    char *one = test_path(tmp, "one"), *sharded = test_path(tmp, "sharded");
    enum { SHARDS = 3, DOCS = 40 };
    char ids[DOCS][16];
    const char *idp[DOCS];
    for (unsigned i = 0; i < DOCS; i++) {
        snprintf(ids[i], sizeof ids[i], "doc-%u", (i * 7) % DOCS);
        idp[i] = ids[i];
    }
    simstore_build_options o = options();
    simstore_builder *b, *sb[SHARDS];
    assert_int_equal(simstore_build_begin(one, &o, &b), 0);
    assert_int_equal(give(b, idp, DOCS, 0), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    assert_int_equal(simstore_sharded_prepare(sharded, SHARDS, 0), 0);
    for (unsigned i = 0; i < SHARDS; i++) {
        char name[16], path[1024];
        simstore_shard_name(i, name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", sharded, name);
        assert_int_equal(simstore_build_begin(path, &o, &sb[i]), 0);
    }
    for (unsigned i = 0; i < DOCS; i++) {
        simstore_builder *to = sb[simstore_shard_of(idp[i], strlen(idp[i]), SHARDS)];
        assert_int_equal(simstore_builder_set_position(to, i), 0);
        assert_int_equal(give(to, idp + i, 1, i), 0);
    }
    for (unsigned i = 0; i < SHARDS; i++)
        assert_int_equal(simstore_builder_finish(sb[i]), 0);
    assert_int_equal(simstore_sharded_publish(sharded, SHARDS), 0);

    simstore *s;
    simstore_query *q;
    const simstore_match *m;
    size_t n, ns;
    assert_int_equal(simstore_open(one, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    assert_int_equal(simstore_query_fp(q, CENTRE, 1, &m, &n), 0);
    assert_int_equal(n, DOCS);
    simstore_sharded *sh;
    simstore_sharded_query *sq;
    const simstore_match *ms;
    assert_int_equal(simstore_sharded_open(sharded, SIMSTORE_OPEN_READONLY, &sh), 0);
    assert_int_equal(simstore_sharded_query_new(sh, 0, &sq), 0);
    assert_int_equal(simstore_sharded_query_fp(sq, CENTRE, NULL, 1, &ms, &ns), 0);
    assert_int_equal(ns, n);
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < ns && (ms[j].id_len != m[i].id_len || memcmp(ms[j].id, m[i].id, m[i].id_len)))
            j++;
        assert_true(j < ns);
        if (ms[j].insertion != m[i].insertion)
            fail_msg("%.*s: insertion %016llx in the shards, %016llx in one store",
                     (int)m[i].id_len, m[i].id, (unsigned long long)ms[j].insertion,
                     (unsigned long long)m[i].insertion);
    }
    simstore_sharded_query_free(sq);
    simstore_sharded_close(sh);
    simstore_query_free(q);
    simstore_close(s);
    test_rmtree(tmp);
    free(one);
    free(sharded);
    free(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_insertion__orders_build_and_adds),
        cmocka_unit_test(test_insertion__records_without_it_still_answer),
        cmocka_unit_test(test_insertion__generation_limit_refuses_adds),
        cmocka_unit_test(test_insertion__positions_given),
        cmocka_unit_test(test_insertion__shards_number_as_one_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
