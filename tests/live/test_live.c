/* test_live.c: live stores (simstore_live_*, lib/live/live.c): answers
 * against a brute-force reference and against a store changed the same way
 * with add and delete, for k = 0..7 on random and clustered sets, across
 * flushes, deletes and compactions; threads inserting and querying at once;
 * the insert-if-new race (exactly one of near-duplicates posted together is
 * inserted); batches (simstore_live_apply_batch) answering as their changes
 * one by one, with one log commit, and a torn batch replaying a prefix of
 * it; kill -9 and injected crashes (also between a flush's commit
 * and the log's trim) lose no acknowledged change and apply none twice;
 * the CLI's writers refused (EBUSY, naming the server) while read-only
 * commands keep working; after a server stopped, writers refuse its log's
 * changes until simstore_live_recover() applies them, and stats, verify,
 * shrink and build --replace see them; a failed write of the log (a full
 * disk) fails its changes with the reason and the log takes changes again
 * right after; a torn tail kept aside and reported; the id rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "simstore.h"
#include "shard/manifest.h"
#include "store/store_internal.h"
#include "testutil.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char self_path[4096];

/* ---- helpers ---------------------------------------------------------------- */

/* Where stores go: /dev/shm when there is one (fsync there is cheap, and
 * what the crash tests kill is the process, whose written bytes the kernel
 * keeps), else $TMPDIR. */
static char *live_tmpdir(void)
{
    if (access("/dev/shm", W_OK) != 0)
        return test_tmpdir("live");
    char *dir = strdup("/dev/shm/simstore-live-XXXXXX");
    assert_non_null(dir);
    assert_non_null(mkdtemp(dir));
    return dir;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* fp with `bits` random bits flipped. */
static uint64_t flip(test_rng *r, uint64_t fp, unsigned bits)
{
    for (unsigned i = 0; i < bits; i++)
        fp ^= 1ull << test_rng_below(r, 64);
    return fp;
}

/* The near-duplicate rule by distance alone, within k bits (k given
 * alone: simstore_near_rule_resolve() asks no similarity). */
#define WITHIN(k)                                                                                  \
    (&(simstore_near_rule){sizeof(simstore_near_rule), (k), 0.0, SIMSTORE_NEAR_DEFAULT_FRACTION})

#define MAX_DOCS 4096

/* What the store should hold: documents by number (id "dNNNNN"). */
typedef struct model {
    uint8_t present[MAX_DOCS];
    uint64_t fp[MAX_DOCS];
    uint8_t has_meta[MAX_DOCS];
    uint8_t integer[MAX_DOCS];
} model;

static void doc_id(unsigned n, char id[16])
{
    snprintf(id, 16, "d%05u", n);
}

static void doc_meta(unsigned n, char meta[32])
{
    snprintf(meta, 32, "{\"n\":%u}", n);
}

/* Build a store at path (design k) from the present documents of m. */
static void build_store(const char *path, unsigned k, const model *m)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    o.threads = 1;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), SIMSTORE_OK);
    for (unsigned n = 0; n < MAX_DOCS; n++) {
        if (!m->present[n])
            continue;
        char id[16], meta[32];
        doc_id(n, id);
        doc_meta(n, meta);
        simstore_doc d = {id,
                          strlen(id),
                          m->fp[n],
                          m->has_meta[n] ? meta : NULL,
                          m->has_meta[n] ? strlen(meta) : 0,
                          n};
        d.flags = m->integer[n] ? SIMSTORE_DOC_INTEGER_ID : 0;
        assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
    }
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);
}

static simstore_live_options small_options(uint64_t memtable_bytes, int background)
{
    simstore_live_options o;
    simstore_live_options_init(&o);
    o.memtable_bytes = memtable_bytes;
    o.background_flush = background;
    o.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    o.threads = 1;
    return o;
}

/* The brute-force answer of m for (fp, k), as matches ordered by distance,
 * then id (ids are fixed-width: byte order is number order). */
static size_t brute(const model *m, uint64_t fp, unsigned k, unsigned *nums, unsigned *dists)
{
    size_t n = 0;
    for (unsigned d = 0; d <= k; d++)
        for (unsigned i = 0; i < MAX_DOCS; i++)
            if (m->present[i] && simstore_distance(m->fp[i], fp) == d) {
                nums[n] = i;
                dists[n++] = d;
            }
    return n;
}

static void expect_brute(const model *m, const simstore_match *got, size_t count, uint64_t fp,
                         unsigned k, int with_meta)
{
    static unsigned nums[MAX_DOCS], dists[MAX_DOCS];
    size_t n = brute(m, fp, k, nums, dists);
    if (count != n)
        fprintf(stderr, "query %016" PRIx64 " k=%u: %zu matches, the reference has %zu\n", fp, k,
                count, n);
    assert_int_equal(count, n);
    for (size_t i = 0; i < n; i++) {
        char id[16], meta[32];
        doc_id(nums[i], id);
        doc_meta(nums[i], meta);
        assert_int_equal(got[i].id_len, strlen(id));
        assert_memory_equal(got[i].id, id, strlen(id));
        assert_true(got[i].fp == m->fp[nums[i]]);
        assert_int_equal(got[i].distance, dists[i]);
        assert_int_equal(got[i].flags, m->integer[nums[i]] ? SIMSTORE_MATCH_INTEGER_ID : 0);
        if (with_meta && m->has_meta[nums[i]]) {
            assert_non_null(got[i].meta);
            assert_int_equal(got[i].meta_len, strlen(meta));
            assert_memory_equal(got[i].meta, meta, strlen(meta));
        } else {
            assert_null(got[i].meta);
        }
    }
}

/* The same answer but for insertion numbers (a document still in memory has
 * none yet). */
static void expect_same(const simstore_match *a, size_t an, const simstore_match *b, size_t bn)
{
    assert_int_equal(an, bn);
    for (size_t i = 0; i < an; i++) {
        assert_int_equal(a[i].id_len, b[i].id_len);
        assert_memory_equal(a[i].id, b[i].id, a[i].id_len);
        assert_true(a[i].fp == b[i].fp);
        assert_int_equal(a[i].distance, b[i].distance);
        assert_int_equal(a[i].flags, b[i].flags);
        assert_int_equal(a[i].meta_len, b[i].meta_len);
        assert_int_equal(a[i].meta != NULL, b[i].meta != NULL);
        if (a[i].meta)
            assert_memory_equal(a[i].meta, b[i].meta, a[i].meta_len);
        assert_true(a[i].similarity == b[i].similarity);
    }
}

/* ---- exactness ---------------------------------------------------------------- */

/* Apply one insert to the reference store through the add path. */
static void ref_insert(simstore *ref, const model *m, unsigned n)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    o.threads = 1;
    simstore_builder *b;
    assert_int_equal(simstore_add_begin(ref, &o, &b), SIMSTORE_OK);
    char id[16], meta[32];
    doc_id(n, id);
    doc_meta(n, meta);
    simstore_doc d = {
        id, strlen(id), m->fp[n], m->has_meta[n] ? meta : NULL, m->has_meta[n] ? strlen(meta) : 0,
        n};
    d.flags = m->integer[n] ? SIMSTORE_DOC_INTEGER_ID : 0;
    assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);
}

static void run_exactness(int clustered, uint64_t seed)
{
    test_rng rng;
    test_rng_init(&rng, clustered ? "live exactness, clustered" : "live exactness, random", seed);
    char *dir = live_tmpdir();
    char *path = test_path(dir, "live");
    char *ref_path = test_path(dir, "ref");
    static model m;
    memset(&m, 0, sizeof m);
    unsigned next = 0;
    uint64_t centers[8];
    for (int c = 0; c < 8; c++)
        centers[c] = test_rng_next(&rng);
    for (; next < 150; next++) {
        m.present[next] = 1;
        m.fp[next] = clustered ? flip(&rng, centers[test_rng_below(&rng, 8)],
                                      (unsigned)test_rng_below(&rng, 9))
                               : test_rng_next(&rng);
        m.has_meta[next] = next % 3 != 0;
        m.integer[next] = next % 7 == 0;
    }
    build_store(path, 7, &m);
    build_store(ref_path, 7, &m);
    simstore *ref;
    assert_int_equal(simstore_open(ref_path, SIMSTORE_OPEN_WRITE, &ref), SIMSTORE_OK);
    simstore_query *rq;
    assert_int_equal(simstore_query_new(ref, SIMSTORE_QUERY_WITH_META, &rq), SIMSTORE_OK);

    simstore_live_options o = small_options(6000, 0);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    simstore_live_query *lq;
    assert_int_equal(simstore_live_query_new(live, SIMSTORE_QUERY_WITH_META, &lq), SIMSTORE_OK);
    simstore_live_query *plain;
    assert_int_equal(simstore_live_query_new(live, 0, &plain), SIMSTORE_OK);

    for (int step = 0; step < 160; step++) {
        unsigned what = (unsigned)test_rng_below(&rng, 10);
        if (what < 6 && next < MAX_DOCS) { /* insert */
            unsigned n = next++;
            m.fp[n] = clustered ? flip(&rng, centers[test_rng_below(&rng, 8)],
                                       (unsigned)test_rng_below(&rng, 9))
                                : test_rng_next(&rng);
            m.has_meta[n] = n % 3 != 0;
            m.integer[n] = n % 7 == 0;
            char id[16], meta[32];
            doc_id(n, id);
            doc_meta(n, meta);
            simstore_doc d = {id,
                              strlen(id),
                              m.fp[n],
                              m.has_meta[n] ? meta : NULL,
                              m.has_meta[n] ? strlen(meta) : 0,
                              0,
                              m.integer[n] ? SIMSTORE_DOC_INTEGER_ID : 0,
                              NULL};
            assert_int_equal(simstore_live_insert(live, &d), SIMSTORE_OK);
            assert_int_equal(simstore_live_insert(live, &d), SIMSTORE_EEXIST);
            m.present[n] = 1;
            ref_insert(ref, &m, n);
        } else if (what < 9) { /* delete, sometimes a document of the build */
            unsigned n = (unsigned)test_rng_below(&rng, next);
            char id[16];
            doc_id(n, id);
            const char *ids[1] = {id};
            size_t lens[1] = {strlen(id)};
            int rc = simstore_live_delete(live, id, strlen(id));
            if (m.present[n]) {
                assert_int_equal(rc, SIMSTORE_OK);
                assert_int_equal(simstore_delete(ref, ids, lens, 1, NULL, NULL, NULL), SIMSTORE_OK);
                m.present[n] = 0;
                /* Deleted ids may come back, with another fingerprint. */
                if (test_rng_below(&rng, 3) == 0) {
                    m.fp[n] = flip(&rng, m.fp[n], 2);
                    simstore_doc d = {id, strlen(id), m.fp[n], NULL, 0, 0, 0, NULL};
                    m.has_meta[n] = 0;
                    m.integer[n] = 0;
                    assert_int_equal(simstore_live_insert(live, &d), SIMSTORE_OK);
                    m.present[n] = 1;
                    ref_insert(ref, &m, n);
                }
            } else {
                assert_int_equal(rc, SIMSTORE_ENOTFOUND);
            }
        } else if (test_rng_below(&rng, 2)) {
            assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);
        } else {
            assert_int_equal(simstore_live_compact(live, 1), SIMSTORE_OK);
        }
        /* The in-memory table passes its limit now and then: flush as the
         * background thread would. */
        simstore_live_stats st;
        simstore_live_get_stats(live, &st);
        if (st.memtable_bytes >= o.memtable_bytes)
            assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);
        if (step % 20 != 19)
            continue;
        for (int qi = 0; qi < 12; qi++) {
            uint64_t fp = qi < 6 ? test_rng_next(&rng)
                                 : flip(&rng, m.fp[test_rng_below(&rng, next)],
                                        (unsigned)test_rng_below(&rng, 5));
            for (unsigned k = 0; k <= 7; k++) {
                const simstore_match *a, *b;
                size_t an, bn;
                assert_int_equal(simstore_live_query_fp(lq, fp, NULL, k, &a, &an), SIMSTORE_OK);
                expect_brute(&m, a, an, fp, k, 1);
                assert_int_equal(simstore_query_fp(rq, fp, k, &b, &bn), SIMSTORE_OK);
                expect_same(a, an, b, bn);
                assert_int_equal(simstore_live_query_fp(plain, fp, NULL, k, &a, &an), SIMSTORE_OK);
                expect_brute(&m, a, an, fp, k, 0);
            }
        }
        /* Documents by id. */
        for (unsigned n = 0; n < next; n++) {
            char id[16];
            doc_id(n, id);
            simstore_document doc;
            int got = simstore_live_get(lq, id, strlen(id), &doc);
            assert_int_equal(got, m.present[n]);
            if (got) {
                assert_true(doc.fp == m.fp[n]);
                assert_int_equal(doc.id_len, strlen(id));
                assert_int_equal(doc.meta != NULL, m.has_meta[n]);
            }
        }
    }
    const simstore_match *a;
    size_t an;
    assert_int_equal(simstore_live_query_fp(lq, 0, NULL, 8, &a, &an), SIMSTORE_ERANGE);
    simstore_live_stats st;
    simstore_live_get_stats(live, &st);
    assert_true(st.flushes > 0);
    /* Everything into the store: the log is empty, the store verifies, and
     * a reopen replays nothing and answers the same. */
    assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);
    simstore_live_get_stats(live, &st);
    assert_int_equal(st.memtable_changes, 0);
    assert_int_equal(st.wal_records, 0);
    assert_true(st.wal_applied_seq == st.wal_last_seq);
    simstore_live_query_free(lq);
    simstore_live_query_free(plain);
    simstore_live_close(live);
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, NULL), SIMSTORE_OK);
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    simstore_live_get_stats(live, &st);
    assert_int_equal(st.replayed, 0);
    assert_int_equal(simstore_live_query_new(live, SIMSTORE_QUERY_WITH_META, &lq), SIMSTORE_OK);
    for (int qi = 0; qi < 20; qi++) {
        uint64_t fp = flip(&rng, m.fp[test_rng_below(&rng, next)], 2);
        assert_int_equal(simstore_live_query_fp(lq, fp, NULL, 7, &a, &an), SIMSTORE_OK);
        expect_brute(&m, a, an, fp, 7, 1);
    }
    simstore_live_query_free(lq);
    simstore_live_close(live);
    simstore_query_free(rq);
    simstore_close(ref);
    free(path);
    free(ref_path);
    test_rmtree(dir);
    free(dir);
}

static void test_live_exact__random(void **state)
{
    (void)state;
    run_exactness(0, 101);
}

static void test_live_exact__clustered(void **state)
{
    (void)state;
    run_exactness(1, 202);
}

/* Sketches: a store that keeps them wants one with every insert, and the
 * answers carry the similarities simstore_query_fp_sketch() would give. */
static void test_live_exact__sketches(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    char *path = test_path(dir, "s");
    simstore_text_options t;
    simstore_text_options_init(&t);
    t.sketch = SIMSTORE_SKETCH_MINHASH16;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    o.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    simstore_fingerprinter *fpr;
    assert_int_equal(simstore_fingerprinter_new(&t, &fpr), SIMSTORE_OK);
    const char *texts[] = {"the quick brown fox jumps over the lazy dog again and again",
                           "the quick brown fox jumps over the lazy dog again and once more",
                           "an entirely different sentence about storing fingerprints"};
    uint64_t fps[3];
    uint8_t sk[3][16];
    for (int i = 0; i < 3; i++)
        assert_int_equal(
            simstore_fingerprint_sketch(fpr, texts[i], strlen(texts[i]), &fps[i], sk[i], NULL),
            SIMSTORE_OK);
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &o, &b), SIMSTORE_OK);
    simstore_doc d0 = {"a", 1, fps[0], NULL, 0, 0};
    d0.sketch = sk[0];
    assert_int_equal(simstore_builder_add(b, &d0), SIMSTORE_OK);
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);

    simstore_live_options lo = small_options(1 << 20, 0);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &lo, &live), SIMSTORE_OK);
    simstore_doc nos = {"b", 1, fps[1], NULL, 0, 0, 0, NULL};
    assert_int_equal(simstore_live_insert(live, &nos), SIMSTORE_EINVAL);
    simstore_doc with = {"b", 1, fps[1], NULL, 0, 0, 0, sk[1]};
    assert_int_equal(simstore_live_insert(live, &with), SIMSTORE_OK);
    simstore_live_query *lq;
    assert_int_equal(simstore_live_query_new(live, 0, &lq), SIMSTORE_OK);
    const simstore_match *m;
    size_t n;
    unsigned k = simstore_distance(fps[0], fps[1]) <= 3 ? 3 : 0;
    assert_int_equal(simstore_live_query_fp(lq, fps[0], sk[0], 3, &m, &n), SIMSTORE_OK);
    double before[2] = {-2, -2};
    for (size_t i = 0; i < n; i++) {
        assert_non_null(m[i].sketch);
        before[m[i].id[0] - 'a'] = m[i].similarity;
    }
    assert_true(before[0] == 1.0);
    if (k)
        assert_true(before[1] ==
                    simstore_sketch_similarity(SIMSTORE_SKETCH_MINHASH16, sk[0], sk[1]));
    assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);
    assert_int_equal(simstore_live_query_fp(lq, fps[0], sk[0], 3, &m, &n), SIMSTORE_OK);
    for (size_t i = 0; i < n; i++)
        assert_true(m[i].similarity == before[m[i].id[0] - 'a']);
    simstore_document doc;
    assert_int_equal(simstore_live_get(lq, "b", 1, &doc), 1);
    assert_non_null(doc.sketch);
    assert_memory_equal(doc.sketch, sk[1], 16);
    simstore_live_query_free(lq);
    simstore_live_close(live);
    simstore_fingerprinter_free(fpr);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- threads -------------------------------------------------------------------- */

#define WRITERS 4
#define PER_WRITER 150

typedef struct conc {
    simstore_live *live;
    atomic_int errors;
    atomic_int writers_done;
    atomic_uint acked[WRITERS]; /* documents of each writer acknowledged */
} conc;

typedef struct worker {
    conc *c;
    unsigned index;
} worker;

static uint64_t writer_fp(unsigned w, unsigned i)
{
    return mix((uint64_t)w << 32 | i);
}

static void *writer_main(void *arg)
{
    worker *wk = (worker *)arg;
    conc *c = wk->c;
    simstore_live_query *q;
    if (simstore_live_query_new(c->live, 0, &q) != SIMSTORE_OK) {
        atomic_fetch_add(&c->errors, 1);
        return NULL;
    }
    for (unsigned i = 0; i < PER_WRITER; i++) {
        char id[32];
        snprintf(id, sizeof id, "w%u-%04u", wk->index, i);
        simstore_doc d = {id, strlen(id), writer_fp(wk->index, i), NULL, 0, 0, 0, NULL};
        if (simstore_live_insert(c->live, &d) != SIMSTORE_OK) {
            atomic_fetch_add(&c->errors, 1);
            continue;
        }
        atomic_store(&c->acked[wk->index], i + 1);
        /* Read your writes: an acknowledged insert answers at once. */
        const simstore_match *m;
        size_t n;
        int found = 0;
        if (simstore_live_query_fp(q, d.fp, NULL, 0, &m, &n) == SIMSTORE_OK)
            for (size_t j = 0; j < n; j++)
                found |= m[j].id_len == d.id_len && memcmp(m[j].id, id, d.id_len) == 0;
        if (!found)
            atomic_fetch_add(&c->errors, 1);
        /* Every fourth is deleted again, then its id taken anew. */
        if (i % 4 == 3) {
            if (simstore_live_delete(c->live, id, strlen(id)) != SIMSTORE_OK ||
                simstore_live_insert(c->live, &d) != SIMSTORE_OK)
                atomic_fetch_add(&c->errors, 1);
        }
    }
    simstore_live_query_free(q);
    atomic_fetch_add(&c->writers_done, 1);
    return NULL;
}

static void *reader_main(void *arg)
{
    worker *wk = (worker *)arg;
    conc *c = wk->c;
    simstore_live_query *q;
    if (simstore_live_query_new(c->live, 0, &q) != SIMSTORE_OK) {
        atomic_fetch_add(&c->errors, 1);
        return NULL;
    }
    test_rng rng = {wk->index * 7919 + 1};
    while (atomic_load(&c->writers_done) < WRITERS) {
        unsigned w = (unsigned)test_rng_below(&rng, WRITERS);
        unsigned acked = atomic_load(&c->acked[w]);
        if (acked == 0)
            continue;
        unsigned i = (unsigned)test_rng_below(&rng, acked);
        uint64_t fp = writer_fp(w, i);
        const simstore_match *m;
        size_t n;
        if (simstore_live_query_fp(q, fp ^ 1, NULL, 3, &m, &n) != SIMSTORE_OK) {
            atomic_fetch_add(&c->errors, 1);
            continue;
        }
        /* Present (a deleted one comes back at once, by the same thread,
         * but may be away while a query runs: only others are sure). */
        char id[32];
        snprintf(id, sizeof id, "w%u-%04u", w, i);
        int found = 0;
        for (size_t j = 0; j < n; j++) {
            if (simstore_distance(m[j].fp, fp ^ 1) != m[j].distance || m[j].distance > 3)
                atomic_fetch_add(&c->errors, 1);
            if (j && m[j].distance < m[j - 1].distance)
                atomic_fetch_add(&c->errors, 1);
            found |= m[j].id_len == strlen(id) && memcmp(m[j].id, id, strlen(id)) == 0;
        }
        if (!found && i % 4 != 3)
            atomic_fetch_add(&c->errors, 1);
    }
    simstore_live_query_free(q);
    return NULL;
}

/* Flushes and compactions while the writers and readers run (besides the
 * background flushes the memtable limit starts), at least one of each
 * whatever the scheduling. */
static void *compactor_main(void *arg)
{
    conc *c = (conc *)arg;
    do {
        if (simstore_live_flush(c->live) != SIMSTORE_OK ||
            simstore_live_compact(c->live, 0) != SIMSTORE_OK)
            atomic_fetch_add(&c->errors, 1);
    } while (atomic_load(&c->writers_done) < WRITERS);
    return NULL;
}

static void test_live_threads__insert_and_query(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    char *path = test_path(dir, "c");
    static model m;
    memset(&m, 0, sizeof m);
    for (unsigned n = 0; n < 50; n++) {
        m.present[n] = 1;
        m.fp[n] = mix(n + 1000000);
    }
    build_store(path, 3, &m);
    simstore_live_options o = small_options(16 << 10, 1);
    conc c;
    memset(&c, 0, sizeof c);
    assert_int_equal(simstore_live_open(path, &o, &c.live), SIMSTORE_OK);
    pthread_t th[WRITERS + 3];
    worker wk[WRITERS + 2];
    for (unsigned i = 0; i < WRITERS + 2; i++) {
        wk[i].c = &c;
        wk[i].index = i < WRITERS ? i : i - WRITERS;
        assert_int_equal(
            pthread_create(&th[i], NULL, i < WRITERS ? writer_main : reader_main, &wk[i]), 0);
    }
    assert_int_equal(pthread_create(&th[WRITERS + 2], NULL, compactor_main, &c), 0);
    for (unsigned i = 0; i < WRITERS + 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&c.errors), 0);
    /* A last flush: the memtable's rest goes to the store too. */
    assert_int_equal(simstore_live_flush(c.live), SIMSTORE_OK);
    simstore_live_stats st;
    simstore_live_get_stats(c.live, &st);
    assert_true(st.flushes > 0);
    assert_int_equal(st.memtable_docs, 0);
    assert_int_equal(st.inserts, WRITERS * (PER_WRITER + PER_WRITER / 4));
    assert_int_equal(st.deletes, WRITERS * (PER_WRITER / 4));
    /* Every document there, once. */
    simstore_live_query *q;
    assert_int_equal(simstore_live_query_new(c.live, 0, &q), SIMSTORE_OK);
    for (unsigned w = 0; w < WRITERS; w++)
        for (unsigned i = 0; i < PER_WRITER; i++) {
            char id[32];
            snprintf(id, sizeof id, "w%u-%04u", w, i);
            simstore_document doc;
            assert_int_equal(simstore_live_get(q, id, strlen(id), &doc), 1);
            assert_true(doc.fp == writer_fp(w, i));
            const simstore_match *mm;
            size_t n;
            assert_int_equal(simstore_live_query_fp(q, doc.fp, NULL, 0, &mm, &n), SIMSTORE_OK);
            assert_int_equal(n, 1);
        }
    simstore_live_query_free(q);
    assert_int_equal(simstore_live_flush(c.live), SIMSTORE_OK);
    simstore_live_close(c.live);
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, NULL), SIMSTORE_OK);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    simstore_stats ss;
    assert_int_equal(simstore_get_stats(s, &ss), SIMSTORE_OK);
    assert_int_equal(ss.documents, 50 + WRITERS * PER_WRITER);
    simstore_close(s);
    free(path);
    test_rmtree(dir);
    free(dir);
}

#define RACERS 8

typedef struct race {
    simstore_live *live;
    pthread_barrier_t go;
    uint64_t base;
    unsigned round;
    int inserted[RACERS];
    size_t matches[RACERS];
    int rc[RACERS];
} race;

typedef struct racer {
    race *r;
    unsigned index;
    simstore_live_query *q;
} racer;

static void *racer_main(void *arg)
{
    racer *me = (racer *)arg;
    race *r = me->r;
    char id[32];
    snprintf(id, sizeof id, "r%u-%u", r->round, me->index);
    /* Near-duplicates: each pair within distance 2. */
    simstore_doc d = {id, strlen(id), r->base ^ (1ull << me->index), NULL, 0, 0, 0, NULL};
    const simstore_match *m;
    size_t n;
    pthread_barrier_wait(&r->go);
    r->rc[me->index] =
        simstore_live_insert_if_new(me->q, &d, WITHIN(3), &r->inserted[me->index], &m, &n);
    r->matches[me->index] = n;
    return NULL;
}

static void test_live_threads__insert_if_new_race(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    char *path = test_path(dir, "r");
    static model m;
    memset(&m, 0, sizeof m);
    m.present[0] = 1;
    m.fp[0] = 0x0123456789ABCDEFull;
    build_store(path, 3, &m);
    /* A tiny table: flushes run during the races. */
    simstore_live_options o = small_options(2048, 1);
    race r;
    memset(&r, 0, sizeof r);
    assert_int_equal(simstore_live_open(path, &o, &r.live), SIMSTORE_OK);
    racer rs[RACERS];
    for (unsigned i = 0; i < RACERS; i++) {
        rs[i].r = &r;
        rs[i].index = i;
        assert_int_equal(simstore_live_query_new(r.live, 0, &rs[i].q), SIMSTORE_OK);
    }
    test_rng rng;
    test_rng_init(&rng, "live race", 303);
    for (unsigned round = 0; round < 40; round++) {
        r.round = round;
        r.base = test_rng_next(&rng);
        assert_int_equal(pthread_barrier_init(&r.go, NULL, RACERS), 0);
        pthread_t th[RACERS];
        for (unsigned i = 0; i < RACERS; i++)
            assert_int_equal(pthread_create(&th[i], NULL, racer_main, &rs[i]), 0);
        for (unsigned i = 0; i < RACERS; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&r.go);
        unsigned winners = 0;
        for (unsigned i = 0; i < RACERS; i++) {
            assert_int_equal(r.rc[i], SIMSTORE_OK);
            winners += r.inserted[i] != 0;
            /* A loser saw the winner (and nothing else of this round). */
            assert_int_equal(r.matches[i], r.inserted[i] ? 0 : 1);
        }
        assert_int_equal(winners, 1);
        if (round % 10 == 9)
            assert_int_equal(simstore_live_flush(r.live), SIMSTORE_OK);
    }
    /* Exactly one document per round, through flushes. */
    const simstore_match *mm;
    size_t n;
    for (unsigned i = 0; i < RACERS; i++)
        simstore_live_query_free(rs[i].q);
    simstore_live_query *q;
    assert_int_equal(simstore_live_query_new(r.live, 0, &q), SIMSTORE_OK);
    test_rng_init(&rng, "live race", 303);
    for (unsigned round = 0; round < 40; round++) {
        uint64_t base = test_rng_next(&rng);
        assert_int_equal(simstore_live_query_fp(q, base, NULL, 1, &mm, &n), SIMSTORE_OK);
        assert_int_equal(n, 1);
    }
    /* Not new: a near-duplicate of a stored document. */
    simstore_doc dup = {"dup", 3, m.fp[0] ^ 6, NULL, 0, 0, 0, NULL};
    int inserted;
    assert_int_equal(simstore_live_insert_if_new(q, &dup, WITHIN(3), &inserted, &mm, &n),
                     SIMSTORE_OK);
    assert_int_equal(inserted, 0);
    assert_int_equal(n, 1);
    assert_int_equal(mm[0].distance, 2);
    /* New but its id is taken. */
    simstore_doc taken = {"d00000", 6, ~m.fp[0], NULL, 0, 0, 0, NULL};
    assert_int_equal(simstore_live_insert_if_new(q, &taken, WITHIN(3), &inserted, &mm, &n),
                     SIMSTORE_EEXIST);
    simstore_live_query_free(q);
    simstore_live_close(r.live);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- batches ----------------------------------------------------------------- */

#define BATCH_CHANGES 900

/* A random change: inserts of new ids (sometimes an id that exists),
 * insert-if-new of a fingerprint near a document of the build or of an
 * earlier change (the batch's own included), deletes of ids that may or may
 * not exist. */
static void random_change(test_rng *rng, unsigned i, const uint64_t *fps, unsigned nfps,
                          simstore_live_change *c, char id[16], char meta[32])
{
    unsigned what = (unsigned)test_rng_below(rng, 10);
    unsigned n = 1000 + i;
    if (what >= 8 || (what >= 6 && test_rng_below(rng, 3) == 0))
        n = (unsigned)test_rng_below(rng, 1000 + i); /* an id that may exist */
    doc_id(n, id);
    doc_meta(n, meta);
    memset(c, 0, sizeof *c);
    c->op = what < 3   ? SIMSTORE_LIVE_INSERT
            : what < 8 ? SIMSTORE_LIVE_INSERT_IF_NEW
                       : SIMSTORE_LIVE_DELETE;
    c->doc.id = id;
    c->doc.id_len = strlen(id);
    c->doc.fp = flip(rng, fps[test_rng_below(rng, nfps)], (unsigned)test_rng_below(rng, 6));
    if (n % 2) {
        c->doc.meta = meta;
        c->doc.meta_len = strlen(meta);
    }
    c->doc.flags = n % 5 == 0 ? SIMSTORE_DOC_INTEGER_ID : 0;
}

/* The single call of change c on (live, q): its result, as a batch gives it. */
static void apply_one(simstore_live *live, simstore_live_query *q, const simstore_live_change *c,
                      unsigned k, simstore_live_result *r)
{
    memset(r, 0, sizeof *r);
    if (c->op == SIMSTORE_LIVE_INSERT) {
        r->rc = simstore_live_insert(live, &c->doc);
        r->applied = r->rc == SIMSTORE_OK;
    } else if (c->op == SIMSTORE_LIVE_DELETE) {
        r->rc = simstore_live_delete(live, c->doc.id, c->doc.id_len);
        r->applied = r->rc == SIMSTORE_OK;
    } else {
        r->rc =
            simstore_live_insert_if_new(q, &c->doc, WITHIN(k), &r->applied, &r->matches, &r->count);
    }
}

static void test_live_batch__same_as_one_by_one(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "live batch", 505);
    char *dir = live_tmpdir();
    char *path_a = test_path(dir, "a"), *path_b = test_path(dir, "b");
    static model m;
    memset(&m, 0, sizeof m);
    static uint64_t fps[1000 + BATCH_CHANGES];
    uint64_t centers[6];
    for (int c = 0; c < 6; c++)
        centers[c] = test_rng_next(&rng);
    for (unsigned n = 0; n < 300; n++) {
        m.present[n] = 1;
        m.fp[n] = flip(&rng, centers[test_rng_below(&rng, 6)], (unsigned)test_rng_below(&rng, 12));
        m.has_meta[n] = n % 2;
        fps[n] = m.fp[n];
    }
    build_store(path_a, 3, &m);
    build_store(path_b, 3, &m);
    simstore_live_options o = small_options(64 << 20, 0);
    simstore_live *a, *b;
    assert_int_equal(simstore_live_open(path_a, &o, &a), SIMSTORE_OK);
    assert_int_equal(simstore_live_open(path_b, &o, &b), SIMSTORE_OK);
    simstore_live_query *qa, *qb;
    assert_int_equal(simstore_live_query_new(a, SIMSTORE_QUERY_WITH_META, &qa), SIMSTORE_OK);
    assert_int_equal(simstore_live_query_new(b, SIMSTORE_QUERY_WITH_META, &qb), SIMSTORE_OK);

    static simstore_live_change changes[BATCH_CHANGES];
    static simstore_live_result results[BATCH_CHANGES];
    static char ids[BATCH_CHANGES][16], metas[BATCH_CHANGES][32];
    /* Batches of 1, 2, 7, 500 and the rest, a flush of both between two. */
    const unsigned sizes[] = {1, 2, 7, 500, BATCH_CHANGES - 510};
    unsigned next = 0, nfps = 300, refused = 0, near = 0;
    for (unsigned bi = 0; bi < sizeof sizes / sizeof *sizes; bi++) {
        unsigned size = sizes[bi];
        for (unsigned i = 0; i < size; i++) {
            random_change(&rng, next + i, fps, nfps, &changes[i], ids[i], metas[i]);
            fps[nfps++] = changes[i].doc.fp;
        }
        simstore_live_stats before, after;
        simstore_live_get_stats(a, &before);
        assert_int_equal(simstore_live_apply_batch(qa, changes, size, WITHIN(3), results),
                         SIMSTORE_OK);
        simstore_live_get_stats(a, &after);
        /* One commit for the batch (the group bound is 16 MiB). */
        assert_true(after.wal_syncs - before.wal_syncs <= 1);
        for (unsigned i = 0; i < size; i++) {
            simstore_live_result one;
            apply_one(b, qb, &changes[i], 3, &one);
            if (one.rc != results[i].rc || one.applied != results[i].applied)
                fprintf(stderr, "batch %u change %u (op %d, %s): batch %d/%d, alone %d/%d\n", bi, i,
                        (int)changes[i].op, ids[i], results[i].rc, results[i].applied, one.rc,
                        one.applied);
            assert_int_equal(one.rc, results[i].rc);
            assert_int_equal(one.applied, results[i].applied);
            expect_same(results[i].matches, results[i].count, one.matches, one.count);
            refused += one.rc != SIMSTORE_OK;
            near += changes[i].op == SIMSTORE_LIVE_INSERT_IF_NEW && one.count > 0;
        }
        next += size;
        if (bi == 2) {
            assert_int_equal(simstore_live_flush(a), SIMSTORE_OK);
            assert_int_equal(simstore_live_flush(b), SIMSTORE_OK);
        }
    }
    /* The mix exercised every answer. */
    assert_true(refused > 50);
    assert_true(near > 50);
    /* The same documents at the end, before and after a reopen. */
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < nfps; i += 3) {
            const simstore_match *ma, *mb;
            size_t na, nb;
            assert_int_equal(simstore_live_query_fp(qa, fps[i], NULL, 3, &ma, &na), SIMSTORE_OK);
            assert_int_equal(simstore_live_query_fp(qb, fps[i], NULL, 3, &mb, &nb), SIMSTORE_OK);
            expect_same(ma, na, mb, nb);
        }
        simstore_live_query_free(qa);
        simstore_live_close(a);
        assert_int_equal(simstore_live_open(path_a, &o, &a), SIMSTORE_OK);
        assert_int_equal(simstore_live_query_new(a, SIMSTORE_QUERY_WITH_META, &qa), SIMSTORE_OK);
    }
    /* Per-change refusals and batch-wide errors. */
    simstore_live_change bad[2];
    memset(bad, 0, sizeof bad);
    bad[0].op = (simstore_live_op)9;
    bad[0].doc.id = "x";
    bad[0].doc.id_len = 1;
    bad[1].op = SIMSTORE_LIVE_INSERT;
    bad[1].doc.id = "y";
    bad[1].doc.id_len = 0;
    assert_int_equal(simstore_live_apply_batch(qa, bad, 2, WITHIN(3), results), SIMSTORE_OK);
    assert_int_equal(results[0].rc, SIMSTORE_EINVAL);
    assert_int_equal(results[1].rc, SIMSTORE_EINVAL);
    bad[1].op = SIMSTORE_LIVE_INSERT_IF_NEW;
    bad[1].doc.id_len = 1;
    bad[0].op = SIMSTORE_LIVE_INSERT;
    bad[0].doc.fp = 42;
    /* A near-duplicate rule refused stops the batch before its first
     * change. */
    assert_int_equal(simstore_live_apply_batch(qa, bad, 2, WITHIN(8), results), SIMSTORE_ERANGE);
    assert_int_equal(results[0].rc, SIMSTORE_ERANGE);
    assert_int_equal(results[0].applied, 0);
    assert_int_equal(results[1].rc, SIMSTORE_ERANGE);
    assert_int_equal(simstore_live_apply_batch(qa, NULL, 0, WITHIN(3), NULL), SIMSTORE_OK);
    simstore_live_query_free(qa);
    simstore_live_query_free(qb);
    simstore_live_close(a);
    simstore_live_close(b);
    free(path_a);
    free(path_b);
    test_rmtree(dir);
    free(dir);
}

#define ROOM_LIMIT (256u << 10)
#define ROOM_BATCH 10000u
#define ROOM_BATCHES 3u

/* Writers wait for room: batches far larger than the in-memory limit,
 * with the flush thread on, never leave the two tables (the one filling,
 * the one being written) above about twice the limit (each may pass it by
 * one change and the growth of its arrays: 4x, plus twice an empty
 * table's size), and every change is there at the end. Without the wait a
 * batch filled one table with all of its changes (1.5 MB here). */
static void test_live_memory__bounded_under_batches(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "live room", 707);
    char *dir = live_tmpdir();
    char *path = test_path(dir, "room");
    static model m;
    memset(&m, 0, sizeof m);
    for (unsigned n = 0; n < 300; n++) {
        m.present[n] = 1;
        m.fp[n] = test_rng_next(&rng);
    }
    build_store(path, 3, &m);
    simstore_live_options o = small_options(ROOM_LIMIT, 1);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    simstore_live_query *q;
    assert_int_equal(simstore_live_query_new(live, 0, &q), SIMSTORE_OK);
    simstore_live_stats st;
    simstore_live_get_stats(live, &st);
    uint64_t empty = st.memtable_bytes, most = 0;
    static simstore_live_change changes[ROOM_BATCH];
    static simstore_live_result results[ROOM_BATCH];
    static char ids[ROOM_BATCH][16];
    static uint64_t fps[ROOM_BATCH * ROOM_BATCHES];
    for (unsigned b = 0; b < ROOM_BATCHES; b++) {
        memset(changes, 0, sizeof changes);
        for (unsigned i = 0; i < ROOM_BATCH; i++) {
            unsigned n = b * ROOM_BATCH + i;
            snprintf(ids[i], sizeof ids[i], "r%06u", n);
            fps[n] = test_rng_next(&rng);
            changes[i].op = SIMSTORE_LIVE_INSERT;
            changes[i].doc.id = ids[i];
            changes[i].doc.id_len = strlen(ids[i]);
            changes[i].doc.fp = fps[n];
        }
        assert_int_equal(simstore_live_apply_batch(q, changes, ROOM_BATCH, WITHIN(0), results),
                         SIMSTORE_OK);
        for (unsigned i = 0; i < ROOM_BATCH; i++)
            assert_int_equal(results[i].rc, SIMSTORE_OK);
        simstore_live_get_stats(live, &st);
        if (st.memtable_bytes > most)
            most = st.memtable_bytes;
        if (st.memtable_bytes > 4 * (uint64_t)ROOM_LIMIT + 2 * empty)
            fail_msg("batch %u: the in-memory tables hold %" PRIu64 " bytes, limit %u, "
                     "an empty table %" PRIu64 ", %" PRIu64 " flushes",
                     b, st.memtable_bytes, ROOM_LIMIT, empty, st.flushes);
    }
    fprintf(stderr, "in memory at most %" PRIu64 " bytes after a batch (limit %u, %u flushes)\n",
            most, ROOM_LIMIT, (unsigned)st.flushes);
    /* 30,000 changes of 80 bytes or more cannot stay within two tables. */
    assert_true(st.flushes >= 5);
    /* Every change is there, after a flush and a reopen too. */
    assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned n = 0; n < ROOM_BATCH * ROOM_BATCHES; n += 7) {
            const simstore_match *mt;
            size_t count;
            assert_int_equal(simstore_live_query_fp(q, fps[n], NULL, 0, &mt, &count), SIMSTORE_OK);
            char id[16];
            snprintf(id, sizeof id, "r%06u", n);
            int found = 0;
            for (size_t i = 0; i < count; i++)
                found |= mt[i].id_len == strlen(id) && memcmp(mt[i].id, id, mt[i].id_len) == 0;
            assert_true(found);
        }
        simstore_live_query_free(q);
        simstore_live_close(live);
        assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
        assert_int_equal(simstore_live_query_new(live, 0, &q), SIMSTORE_OK);
    }
    simstore_live_query_free(q);
    simstore_live_close(live);
    test_rmtree(dir);
    free(path);
    free(dir);
}

/* A batch whose group was torn anywhere (the log cut at any byte of it, as
 * a crash during its write leaves it) replays a prefix of the batch: the
 * records wholly written, and nothing of the rest. */
static void test_live_batch__torn_group(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    char *path = test_path(dir, "t");
    static model m;
    memset(&m, 0, sizeof m);
    m.present[0] = 1;
    m.fp[0] = 1;
    build_store(path, 3, &m);
    simstore_live_options o = small_options(64 << 20, 0);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    simstore_live_query *q;
    assert_int_equal(simstore_live_query_new(live, 0, &q), SIMSTORE_OK);
    enum { N = 120 };
    static simstore_live_change changes[N];
    static simstore_live_result results[N];
    static char ids[N][16];
    memset(changes, 0, sizeof changes);
    for (unsigned i = 0; i < N; i++) {
        doc_id(100 + i, ids[i]);
        changes[i].op = i % 2 ? SIMSTORE_LIVE_INSERT : SIMSTORE_LIVE_INSERT_IF_NEW;
        changes[i].doc.id = ids[i];
        changes[i].doc.id_len = strlen(ids[i]);
        changes[i].doc.fp = mix(i);
    }
    assert_int_equal(simstore_live_apply_batch(q, changes, N, WITHIN(3), results), SIMSTORE_OK);
    for (unsigned i = 0; i < N; i++)
        assert_int_equal(results[i].applied, 1);
    simstore_live_query_free(q);
    simstore_live_close(live); /* the records stay in the log */
    char *wal = test_path(path, "live.wal");
    struct stat st;
    assert_int_equal(stat(wal, &st), 0);
    /* Records of equal size: 24 bytes of framing, 16 of fields, the id. */
    const off_t record = 24 + 16 + 6, header = 64;
    assert_int_equal(st.st_size, header + N * record);
    size_t log_len;
    uint8_t *log = test_read_file(wal, &log_len);
    assert_non_null(log);
    /* Cut at record boundaries and inside records. */
    for (int j = N; j >= 0; j -= 7) {
        const off_t cuts[] = {record - 1, record / 2, 1, 0};
        for (unsigned c = 0; c < 4; c++) {
            off_t len = header + (off_t)j * record + cuts[c];
            if (len > header + N * record || (j == N && cuts[c]))
                continue;
            assert_int_equal(test_write_file(wal, log, (size_t)len), 0);
            assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
            assert_int_equal(simstore_live_query_new(live, 0, &q), SIMSTORE_OK);
            for (unsigned i = 0; i < N; i++) {
                simstore_document doc;
                int got = simstore_live_get(q, ids[i], strlen(ids[i]), &doc);
                if (got != (i < (unsigned)j))
                    fprintf(stderr, "log cut at %lld bytes: document %u %s\n", (long long)len, i,
                            got ? "replayed" : "missing");
                assert_int_equal(got, i < (unsigned)j);
            }
            simstore_live_query_free(q);
            simstore_live_close(live);
        }
    }
    free(log);
    free(wal);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- crashes ------------------------------------------------------------------ */

/* The child's changes, in order: op i inserts document i, except that
 * every op i with i % 4 == 3 deletes document i - 2. */
static int op_is_delete(unsigned i)
{
    return i % 4 == 3;
}

static uint64_t op_fp(unsigned n)
{
    return mix(n * 31 + 7);
}

/* Document n's presence after the first j ops. */
static int present_after(unsigned n, unsigned j)
{
    if (n >= j || op_is_delete(n))
        return 0;
    return !(n % 4 == 1 && n + 2 < j);
}

#define CHILD_OPS 3000

/* Change i of the child's sequence, in c (id and meta in the buffers). */
static void child_change(unsigned i, simstore_live_change *c, char id[16], char meta[32])
{
    memset(c, 0, sizeof *c);
    if (op_is_delete(i)) {
        doc_id(i - 2, id);
        c->op = SIMSTORE_LIVE_DELETE;
    } else {
        doc_id(i, id);
        doc_meta(i, meta);
        c->op = SIMSTORE_LIVE_INSERT;
        c->doc.fp = op_fp(i);
        c->doc.meta = meta;
        c->doc.meta_len = strlen(meta);
    }
    c->doc.id = id;
    c->doc.id_len = strlen(id);
}

#define CHILD_MAX_BATCH 64

/* The child: CHILD_OPS changes, acknowledging each on fd (with batch > 1,
 * in simstore_live_apply_batch() calls of `batch` changes, acknowledging
 * the last of each). With every_flush, it flushes itself every so many
 * changes (a schedule of commits, renames and fsyncs the same on every
 * machine, for the injected faults); else the background thread flushes
 * past 4 KiB. */
static void run_child(const char *path, int fd, unsigned every_flush, unsigned batch)
{
    simstore_live_options o = small_options(4096, every_flush == 0);
    simstore_live *live;
    simstore_live_query *q = NULL;
    if (simstore_live_open(path, &o, &live) != SIMSTORE_OK ||
        simstore_live_query_new(live, 0, &q) != SIMSTORE_OK) {
        fprintf(stderr, "child: %s\n", simstore_last_error());
        _exit(3);
    }
    if (batch < 1 || batch > CHILD_MAX_BATCH)
        batch = 1;
    for (unsigned i = 0; i < CHILD_OPS; i += batch) {
        unsigned n = CHILD_OPS - i < batch ? CHILD_OPS - i : batch;
        simstore_live_change c[CHILD_MAX_BATCH];
        simstore_live_result res[CHILD_MAX_BATCH];
        char ids[CHILD_MAX_BATCH][16], metas[CHILD_MAX_BATCH][32];
        for (unsigned j = 0; j < n; j++)
            child_change(i + j, &c[j], ids[j], metas[j]);
        int rc;
        if (batch == 1)
            rc = c[0].op == SIMSTORE_LIVE_DELETE
                     ? simstore_live_delete(live, c[0].doc.id, c[0].doc.id_len)
                     : simstore_live_insert(live, &c[0].doc);
        else
            rc = simstore_live_apply_batch(q, c, n, WITHIN(0), res);
        for (unsigned j = 0; rc == SIMSTORE_OK && batch > 1 && j < n; j++)
            rc = res[j].rc;
        if (rc != SIMSTORE_OK) {
            fprintf(stderr, "child: ops %u..%u: %s\n", i, i + n - 1, simstore_last_error());
            _exit(1);
        }
        if (every_flush && (i + n) / every_flush != i / every_flush &&
            simstore_live_flush(live) != SIMSTORE_OK) {
            fprintf(stderr, "child: flush after op %u: %s\n", i + n - 1, simstore_last_error());
            _exit(1);
        }
        uint32_t ack = i + n;
        if (write(fd, &ack, sizeof ack) != (ssize_t)sizeof ack)
            _exit(4);
    }
    simstore_live_query_free(q);
    simstore_live_close(live);
    _exit(0);
}

/* Start the child on path (with SIMSTORE_FAULT = fault when not NULL), read
 * acknowledgements until `want` (0: all), kill it when kill_it; returns the
 * last op acknowledged (count). */
static unsigned stream_child(const char *path, const char *fault, unsigned batch, unsigned want,
                             int kill_it, int *status)
{
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        char fd_arg[16];
        snprintf(fd_arg, sizeof fd_arg, "%d", pfd[1]);
        if (fault)
            setenv("SIMSTORE_FAULT", fault, 1);
        char batch_arg[16];
        snprintf(batch_arg, sizeof batch_arg, "%u", batch);
        execl(self_path, self_path, "--live-child", path, fd_arg, fault ? "50" : "0", batch_arg,
              (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    unsigned acked = 0;
    uint32_t ack;
    while (want == 0 || acked < want) {
        ssize_t r = read(pfd[0], &ack, sizeof ack);
        if (r != (ssize_t)sizeof ack)
            break;
        assert_int_equal(ack, acked + 1 + (batch > 1 ? (ack - 1) % batch : 0));
        acked = ack;
    }
    if (kill_it)
        kill(pid, SIGKILL);
    close(pfd[0]);
    assert_int_equal(waitpid(pid, status, 0), pid);
    return acked;
}

/* The store holds the documents of the first j ops for some j >= acked
 * (the child may have gone on after the last acknowledgement read, and the
 * op in flight may have reached the disk): every acknowledged change,
 * exactly once, and nothing that was not asked for. */
static void check_after_crash(const char *path, unsigned acked)
{
    simstore_live_options o = small_options(4096, 0);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    simstore_live_query *q;
    assert_int_equal(simstore_live_query_new(live, SIMSTORE_QUERY_WITH_META, &q), SIMSTORE_OK);
    static uint8_t got[CHILD_OPS];
    unsigned fits_first = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned n = 0; n < CHILD_OPS; n++) {
            char id[16];
            doc_id(n, id);
            simstore_document doc;
            int rc = simstore_live_get(q, id, strlen(id), &doc);
            assert_true(rc >= 0);
            got[n] = (uint8_t)rc;
            if (rc) {
                assert_true(doc.fp == op_fp(n));
                char meta[32];
                doc_meta(n, meta);
                assert_int_equal(doc.meta_len, strlen(meta));
                /* Once: one document under its fingerprint. */
                const simstore_match *m;
                size_t k;
                assert_int_equal(simstore_live_query_fp(q, doc.fp, NULL, 0, &m, &k), SIMSTORE_OK);
                assert_int_equal(k, 1);
            }
        }
        unsigned fits = 0;
        int found = 0;
        for (unsigned j = acked; j <= CHILD_OPS && !found; j++) {
            unsigned n = 0;
            while (n < CHILD_OPS && got[n] == present_after(n, j))
                n++;
            if (n == CHILD_OPS) {
                fits = j;
                found = 1;
            }
        }
        if (!found)
            fprintf(stderr, "after %u acknowledged changes: the store holds no prefix of them\n",
                    acked);
        assert_true(found);
        if (pass == 1) {
            /* The flush changed nothing. */
            assert_int_equal(fits, fits_first);
            break;
        }
        fits_first = fits;
        /* Flushing the replayed changes changes nothing either. */
        assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);
    }
    simstore_live_query_free(q);
    simstore_live_close(live);
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, NULL), SIMSTORE_OK);
}

static char *crash_store(const char *dir, unsigned trial)
{
    char name[32];
    snprintf(name, sizeof name, "k%u", trial);
    char *path = test_path(dir, name);
    static model m;
    memset(&m, 0, sizeof m);
    /* A base of documents numbered past the child's, with fingerprints no
     * change of the child makes (mix is a bijection; the child's are
     * mix(31 n + 7)): check_after_crash counts the documents under each
     * change's fingerprint, and mix(n) gave base document 3014 the
     * fingerprint of change 97. */
    for (unsigned n = CHILD_OPS; n < CHILD_OPS + 20; n++) {
        m.present[n] = 1;
        m.fp[n] = mix(31 * (uint64_t)n + 8);
    }
    build_store(path, 3, &m);
    return path;
}

/* Kill the child (its changes in calls of `batch`) after 1..most
 * acknowledged changes, `trials` times on fresh stores (named from
 * first_store on), and check what each store holds. */
static void kill_trials(const char *dir, test_rng *rng, unsigned batch, unsigned trials,
                        unsigned most, unsigned first_store)
{
    for (unsigned trial = 0; trial < trials; trial++) {
        char *path = crash_store(dir, first_store + trial);
        unsigned want = 1 + (unsigned)test_rng_below(rng, most);
        int status;
        unsigned acked = stream_child(path, NULL, batch, want, 1, &status);
        assert_true(acked >= want && acked < want + batch);
        check_after_crash(path, acked);
        free(path);
    }
}

/* Crash the child (its changes in calls of `batch`) at each fault, on fresh
 * stores, and check what each store holds. */
static void fault_trials(const char *dir, unsigned batch, const char *const *faults, size_t count,
                         unsigned first_store)
{
    for (size_t f = 0; f < count; f++) {
        char *path = crash_store(dir, first_store + (unsigned)f);
        int status;
        unsigned acked = stream_child(path, faults[f], batch, 0, 0, &status);
        assert_true(WIFEXITED(status));
        fprintf(stderr, "fault %s (changes in calls of %u): %u acknowledged, exit %d\n", faults[f],
                batch, acked, WEXITSTATUS(status));
        assert_int_equal(WEXITSTATUS(status), 86);
        check_after_crash(path, acked);
        free(path);
    }
}

static void test_live_crash__kill_during_changes(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "live kill", 404);
    char *dir = live_tmpdir();
    kill_trials(dir, &rng, 1, 6, 600, 0);
    test_rmtree(dir);
    free(dir);
}

static void test_live_crash__faults(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    /* Crashes right after a commit (a flush's delete or its add: between
     * the add's commit and the log's trim), at a rename (table files, the
     * trimmed log), at an fsync (log groups, tables). */
    const char *const faults[] = {"mdb_committed:1:crash",  "mdb_committed:2:crash",
                                  "mdb_committed:5:crash",  "mdb_committed:8:crash",
                                  "mdb_committed:41:crash", "rename:3:crash",
                                  "rename:20:crash",        "rename:57:crash",
                                  "fsync:30:crash",         "fsync:200:crash"};
    fault_trials(dir, 1, faults, sizeof faults / sizeof *faults, 100);
    test_rmtree(dir);
    free(dir);
}

/* The same in batches of 37 changes (a delete in a batch of the insert
 * two changes before it, often): killed, or crashed at a write or an fsync
 * of the log's groups or at a flush's commit, the store holds every
 * acknowledged batch and a prefix of the changes after. */
static void test_live_crash__batches(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "live kill batches", 606);
    char *dir = live_tmpdir();
    kill_trials(dir, &rng, 37, 4, 1500, 200);
    const char *const faults[] = {"write:2:crash",  "write:45:crash",        "fsync:3:crash",
                                  "fsync:31:crash", "mdb_committed:4:crash", "rename:9:crash"};
    fault_trials(dir, 37, faults, sizeof faults / sizeof *faults, 300);
    test_rmtree(dir);
    free(dir);
}

/* ---- the CLI while a live store holds the store ------------------------------------ */

static int run_cli(const char *args, const char *err_path)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>'%s'", SIMSTORE_CLI, args, err_path);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_live_lock__cli_writers_refused(void **state)
{
    (void)state;
    char *dir = test_tmpdir("live-cli");
    char *path = test_path(dir, "s");
    char *err = test_path(dir, "err");
    char *tsv = test_path(dir, "add.tsv");
    static model m;
    memset(&m, 0, sizeof m);
    m.present[1] = 1;
    m.fp[1] = 0xffffffffffffffffull;
    build_store(path, 3, &m);
    assert_int_equal(test_write_file(tsv, "x\t0000000000000007\n", 19), 0);
    simstore_live_options o = small_options(1 << 20, 1);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    /* A second live store, in this process or another, is refused too. */
    simstore_live *other;
    assert_int_equal(simstore_live_open(path, &o, &other), SIMSTORE_EBUSY);
    char want[128];
    snprintf(want, sizeof want, "held by a server (pid %ld)", (long)getpid());
    assert_non_null(strstr(simstore_last_error(), want));
    simstore_doc d = {"y", 1, 0x0f, NULL, 0, 0, 0, NULL};
    assert_int_equal(simstore_live_insert(live, &d), SIMSTORE_OK);
    assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);

    char args[4096];
    for (int i = 0; i < 3; i++) {
        if (i == 0)
            snprintf(args, sizeof args, "add '%s' '%s'", path, tsv);
        else
            snprintf(args, sizeof args, i == 1 ? "delete '%s' d00001" : "compact '%s'", path);
        assert_int_not_equal(run_cli(args, err), 0);
        size_t n;
        char *msg = (char *)test_read_file(err, &n);
        assert_non_null(msg);
        msg = realloc(msg, n + 1);
        msg[n] = '\0';
        if (!strstr(msg, want))
            fprintf(stderr, "%s: %s", args, msg);
        assert_non_null(strstr(msg, want));
        free(msg);
    }
    /* Read-only commands work, and see the flushed insert. */
    snprintf(args, sizeof args, "query '%s' --fp 000000000000000f", path);
    assert_int_equal(run_cli(args, err), 0);
    snprintf(args, sizeof args, "stats '%s'", path);
    assert_int_equal(run_cli(args, err), 0);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    simstore_close(s);
    simstore_live_close(live);
    /* Closed: the CLI writes again (and the note is gone). */
    snprintf(args, sizeof args, "add '%s' '%s'", path, tsv);
    assert_int_equal(run_cli(args, err), 0);
    snprintf(args, sizeof args, "delete '%s' x", path);
    assert_int_equal(run_cli(args, err), 0);
    /* A delete from the CLI after a live store flushed keeps the applied
     * sequence number: reopening replays nothing twice. */
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    simstore_live_stats st;
    simstore_live_get_stats(live, &st);
    assert_int_equal(st.replayed, 0);
    assert_true(st.wal_applied_seq >= 1);
    simstore_live_close(live);
    free(tsv);
    free(err);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- the log after a server stopped ------------------------------------------ */

static int live_get_fp(simstore_live *live, const char *id, uint64_t *fp)
{
    simstore_live_query *q;
    assert_int_equal(simstore_live_query_new(live, 0, &q), SIMSTORE_OK);
    simstore_document doc;
    int rc = simstore_live_get(q, id, strlen(id), &doc);
    if (rc == 1)
        *fp = doc.fp;
    simstore_live_query_free(q);
    return rc;
}

static void live_put(simstore_live *live, const char *id, uint64_t fp)
{
    simstore_doc d = {id, strlen(id), fp, NULL, 0, 0, 0, NULL};
    assert_int_equal(simstore_live_insert(live, &d), SIMSTORE_OK);
}

/* A live store closed without a flush leaves its changes in the log, as a
 * killed server does. Every writer refuses the store until they are
 * applied (naming the log and how); readers' stats and verify report them;
 * simstore_live_recover() applies them as the next open would, and a
 * writer's later changes then stand after the next open. */
static void test_live_log__pending_changes_after_a_stop(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    char *path = test_path(dir, "s");
    static model m;
    memset(&m, 0, sizeof m);
    m.present[1] = 1;
    m.fp[1] = 0x0123456789abcdefull;
    build_store(path, 3, &m);
    simstore_live_options o = small_options(1 << 20, 0);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    live_put(live, "X", 0xaaaaaaaaaaaaaaaaull);
    live_put(live, "Y", 0xbbbbbbbbbbbbbbbbull);
    assert_int_equal(simstore_live_delete(live, "d00001", 6), SIMSTORE_OK);
    simstore_live_close(live);

    /* Readers see the pending changes. */
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), SIMSTORE_OK);
    assert_int_equal(st.wal_pending_records, 3);
    assert_true(st.wal_bytes > 64);
    assert_int_equal(st.wal_damaged, 0);
    assert_int_equal(st.documents, 1);
    simstore_close(s);
    simstore_verify_summary vs;
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, &vs), SIMSTORE_OK);
    assert_int_equal(vs.log_records, 3);
    assert_int_equal(vs.log_pending, 3);
    assert_true(vs.warnings >= 1);

    /* Writers refuse, saying why and what to do; nothing changes. */
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), SIMSTORE_EBUSY);
    assert_non_null(strstr(simstore_last_error(), "live.wal) holds 3 changes"));
    assert_non_null(strstr(simstore_last_error(), "simstore_live_recover"));
    assert_int_equal(simstore_shrink(path, NULL, NULL), SIMSTORE_EBUSY);
    simstore_build_options bo;
    simstore_build_options_init(&bo);
    bo.replace = 1;
    bo.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(path, &bo, &b), SIMSTORE_EBUSY);
    assert_non_null(strstr(simstore_last_error(), "replacing the store is refused"));

    /* Applied, as the next serve would; a second call finds nothing. */
    simstore_live_recovery r;
    assert_int_equal(simstore_live_recover(path, &r), SIMSTORE_OK);
    assert_int_equal(r.applied, 3);
    assert_int_equal(r.torn_bytes, 0);
    assert_int_equal(simstore_live_recover(path, &r), SIMSTORE_OK);
    assert_int_equal(r.applied, 0);

    /* A writer's changes now, on top of the server's. */
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), SIMSTORE_OK);
    assert_int_equal(simstore_get_stats(s, &st), SIMSTORE_OK);
    assert_int_equal(st.documents, 2);
    assert_int_equal(st.wal_pending_records, 0);
    const char *ids[1] = {"Y"};
    size_t lens[1] = {1};
    assert_int_equal(simstore_delete(s, ids, lens, 1, NULL, NULL, NULL), SIMSTORE_OK);
    simstore_close(s);
    m.present[1] = 0;
    assert_int_equal(simstore_shrink(path, NULL, NULL), SIMSTORE_OK);
    struct stat fst;
    char *wal = test_path(dir, "s/live.wal");
    assert_int_equal(stat(wal, &fst), 0); /* carried over */

    /* The next open replays nothing: Y stays deleted, X is the server's. */
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    simstore_live_stats ls;
    simstore_live_get_stats(live, &ls);
    assert_int_equal(ls.replayed, 0);
    assert_int_equal(ls.failing, 0);
    uint64_t fp = 0;
    assert_int_equal(live_get_fp(live, "X", &fp), 1);
    assert_true(fp == 0xaaaaaaaaaaaaaaaaull);
    assert_int_equal(live_get_fp(live, "Y", &fp), 0);
    assert_int_equal(live_get_fp(live, "d00001", &fp), 0);
    /* Numbering goes on after the applied changes. */
    live_put(live, "Z", 0x1111111111111111ull);
    simstore_live_get_stats(live, &ls);
    assert_int_equal(ls.wal_last_seq, 4);
    simstore_live_close(live);
    assert_int_equal(simstore_live_recover(path, &r), SIMSTORE_OK);
    assert_int_equal(r.applied, 1);
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, &vs), SIMSTORE_OK);
    assert_int_equal(vs.log_pending, 0);
    free(wal);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* A torn tail: bytes of a group whose fsync never returned (here: half a
 * record) are kept aside in live.wal.torn-*, reported by the open, and
 * cut; verify warns of both the tail and the file kept aside. */
static void test_live_log__torn_tail_kept_aside(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    char *path = test_path(dir, "s");
    static model m;
    memset(&m, 0, sizeof m);
    build_store(path, 3, &m);
    simstore_live_options o = small_options(1 << 20, 0);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    live_put(live, "a", 1);
    live_put(live, "b", 2);
    simstore_live_close(live);
    char *wal = test_path(dir, "s/live.wal");
    size_t n;
    uint8_t *bytes = test_read_file(wal, &n);
    assert_non_null(bytes);
    /* Append the first 30 bytes of record 2 again, numbered 3. */
    size_t rec2 = 64 + 24 + (size_t)(bytes[64] | bytes[65] << 8);
    uint8_t *torn = malloc(n + 30);
    assert_non_null(torn);
    memcpy(torn, bytes, n);
    memcpy(torn + n, bytes + rec2, 30);
    torn[n + 8] = 3;
    assert_int_equal(test_write_file(wal, torn, n + 30), 0);
    simstore_verify_summary vs;
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, &vs), SIMSTORE_OK);
    assert_int_equal(vs.log_pending, 2);
    simstore_live_recovery r;
    assert_int_equal(simstore_live_recover(path, &r), SIMSTORE_OK);
    assert_int_equal(r.applied, 2);
    assert_int_equal(r.torn_bytes, 30);
    assert_int_equal(r.torn_records, 1);
    assert_non_null(strstr(r.torn_name, "live.wal.torn-3-"));
    char aside[128];
    snprintf(aside, sizeof aside, "s/%s", r.torn_name);
    char *aside_path = test_path(dir, aside);
    size_t an;
    uint8_t *kept = test_read_file(aside_path, &an);
    assert_non_null(kept);
    assert_int_equal(an, 30);
    assert_memory_equal(kept, torn + n, 30);
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, &vs), SIMSTORE_OK);
    assert_true(vs.warnings >= 1); /* the file kept aside */
    free(kept);
    free(aside_path);
    free(torn);
    free(bytes);
    free(wal);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* In a child with SIMSTORE_FAULT making one write or fsync of the log fail
 * (as a full disk does): the change of the failed group fails with the
 * reason and is not kept; the live store reports it failing meanwhile and
 * takes changes again right after; every acknowledged change is there
 * after a reopen. Exit 0 when all of that held. */
static int run_fail_child(const char *path)
{
    simstore_live_options o = small_options(1 << 20, 0);
    simstore_live *live;
    if (simstore_live_open(path, &o, &live) != SIMSTORE_OK)
        return 3;
    int failed_at = -1;
    for (int i = 0; i < 40; i++) {
        char id[16];
        doc_id((unsigned)i, id);
        simstore_doc d = {id, strlen(id), mix((uint64_t)i), NULL, 0, 0, 0, NULL};
        int rc = simstore_live_insert(live, &d);
        simstore_live_stats st;
        simstore_live_get_stats(live, &st);
        if (rc == SIMSTORE_OK) {
            /* A write that works ends the failure. */
            if (st.failing || st.failure[0])
                return 5;
            continue;
        }
        if (rc != SIMSTORE_EIO || failed_at >= 0 ||
            !strstr(simstore_last_error(), "Input/output error"))
            return 4;
        failed_at = i;
        /* Reported until a write works again. */
        if (!st.failing || !strstr(st.failure, "Input/output error"))
            return 9;
    }
    if (failed_at < 0)
        return 6;
    simstore_live_close(live);
    simstore_live_options o2 = small_options(1 << 20, 0);
    if (simstore_live_open(path, &o2, &live) != SIMSTORE_OK)
        return 7;
    for (int i = 0; i < 40; i++) {
        char id[16];
        doc_id((unsigned)i, id);
        uint64_t fp = 0;
        int got = live_get_fp(live, id, &fp);
        if (got != (i != failed_at) || (got && fp != mix((uint64_t)i)))
            return 8;
    }
    simstore_live_close(live);
    return 0;
}

static void test_live_log__write_failure_recovers(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    const char *faults[] = {"write:3", "fsync:9"};
    for (size_t f = 0; f < 2; f++) {
        char name[16];
        snprintf(name, sizeof name, "f%zu", f);
        char *path = test_path(dir, name);
        static model m;
        memset(&m, 0, sizeof m);
        build_store(path, 3, &m);
        /* The log exists before the child: its faults count its changes. */
        simstore_live_options o = small_options(1 << 20, 0);
        simstore_live *live;
        assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
        simstore_live_close(live);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            setenv("SIMSTORE_FAULT", faults[f], 1);
            execl(self_path, self_path, "--fail-child", path, (char *)NULL);
            _exit(127);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status))
            fprintf(stderr, "fault %s: child exit %d\n", faults[f], WEXITSTATUS(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(simstore_verify(path, 0, NULL, NULL, NULL), SIMSTORE_OK);
        free(path);
    }
    test_rmtree(dir);
    free(dir);
}

/* The id rule: inserts refuse what the CLI refuses; deletes and gets take
 * any id of 1..511 bytes. A small memtable still holds many changes (its
 * empty table's bytes are not counted). */
static void test_live_ids__rule_and_small_memtable(void **state)
{
    (void)state;
    char *dir = live_tmpdir();
    char *path = test_path(dir, "s");
    static model m;
    memset(&m, 0, sizeof m);
    build_store(path, 3, &m);
    simstore_live_options o = small_options(4096, 1);
    simstore_live *live;
    assert_int_equal(simstore_live_open(path, &o, &live), SIMSTORE_OK);
    const char *bad[] = {"a\tb",
                         "x\nforged",
                         "esc\x1b[2J",
                         "e\xff"
                         "f",
                         "c1\xc2\x85",
                         "del\x7f"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        simstore_doc d = {bad[i], strlen(bad[i]), 5, NULL, 0, 0, 0, NULL};
        assert_int_equal(simstore_live_insert(live, &d), SIMSTORE_EINVAL);
        assert_non_null(strstr(simstore_last_error(), "document id"));
        assert_int_equal(simstore_live_delete(live, bad[i], strlen(bad[i])), SIMSTORE_ENOTFOUND);
    }
    simstore_doc nul = {"n\0ul", 4, 5, NULL, 0, 0, 0, NULL};
    assert_int_equal(simstore_live_insert(live, &nul), SIMSTORE_EINVAL);
    /* The live store's log keeps no paragraphs: a document that brings
     * some is refused, not stored without them. */
    const uint64_t para = 7;
    simstore_doc with_para = {"para", 4, 5, NULL, 0, 0, 0, NULL, &para, 1};
    assert_int_equal(simstore_live_insert(live, &with_para), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "paragraphs"));
    for (unsigned i = 0; i < 200; i++) {
        char id[16];
        doc_id(i, id);
        live_put(live, id, mix(i));
    }
    assert_int_equal(simstore_live_flush(live), SIMSTORE_OK);
    simstore_live_stats st;
    simstore_live_get_stats(live, &st);
    fprintf(stderr, "200 inserts under a 4 KiB memtable: %llu flushes\n",
            (unsigned long long)st.flushes);
    assert_true(st.flushes >= 2 && st.flushes <= 50);
    simstore_live_close(live);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* The standard output of `PROGRAM ARGS` (NUL-terminated; PROGRAM a shell
 * command), and its exit status in *status. */
static char *run_output(const char *program, const char *args, const char *out_path, int *status)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s >'%s' 2>/dev/null", program, args, out_path);
    int st = system(cmd);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    size_t n;
    char *out = (char *)test_read_file(out_path, &n);
    assert_non_null(out);
    out = realloc(out, n + 1);
    assert_non_null(out);
    out[n] = '\0';
    return out;
}

#ifdef SIMSTORE_MPI_CLI
/* simstore-mpi's TSV output escapes such ids as simstore's does: a
 * one-shard store (simstore build --shards 1) whose shard is given the odd
 * ids through the logged-ids path, its manifest's counts updated to match. */
static void mpi_output_escapes_old_ids(const char *dir, const char *const *odd,
                                       const char *out_path)
{
    char *input = test_path(dir, "in.tsv");
    char *sharded = test_path(dir, "sharded");
    char *queries = test_path(dir, "q.tsv");
    FILE *f = fopen(input, "w");
    assert_non_null(f);
    fputs("d1\t0123456789abcdef\n", f);
    fclose(f);
    f = fopen(queries, "w");
    assert_non_null(f);
    fputs("q1\t0123456789abcdef\n", f);
    fclose(f);
    char args[4200];
    int status;
    snprintf(args, sizeof args, "build --shards 1 --k 3 -q '%s' '%s'", sharded, input);
    free(run_output("'" SIMSTORE_CLI "'", args, out_path, &status));
    assert_int_equal(status, 0);
    sims_manifest m;
    assert_int_equal(sims_manifest_read(sharded, &m), SIMSTORE_OK);
    char *shard = test_path(sharded, m.entry[0].name);
    simstore *s;
    assert_int_equal(simstore_open(shard, SIMSTORE_OPEN_WRITE, &s), SIMSTORE_OK);
    simstore_build_options o;
    simstore_build_options_init(&o);
    simstore_builder *b;
    assert_int_equal(simstore_add_begin(s, &o, &b), SIMSTORE_OK);
    sims_builder_take_logged_ids(b);
    for (unsigned i = 0; i < 3; i++) {
        simstore_doc d = {odd[i], strlen(odd[i]), 0x0123456789abcdefull, NULL, 0, 10 + i};
        assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
    }
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);
    simstore_close(s);
    m.entry[0].documents += 3;
    m.documents += 3;
    assert_int_equal(sims_manifest_write(sharded, &m), SIMSTORE_OK);
    sims_manifest_free(&m);
    const char *cmds[] = {"query", "pairs", "clusters"};
    for (unsigned c = 0; c < 3; c++) {
        snprintf(args, sizeof args, "%s '%s' --k 0%s%s%s", cmds[c], sharded,
                 c == 0 ? " --queries '" : "", c == 0 ? queries : "", c == 0 ? "'" : "");
        /* Open MPI's own allocations stay until exit: LeakSanitizer is
         * off for it, as in tests/mpi (an ASan build; no effect otherwise). */
        char *out = run_output("ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 " SIMSTORE_MPIEXEC
                               " --allow-run-as-root --oversubscribe -np 1 '" SIMSTORE_MPI_CLI "'",
                               args, out_path, &status);
        assert_int_equal(status, 0);
        assert_null(strstr(out, "\nforged"));
        assert_null(strchr(out, '\x1b'));
        assert_null(strstr(out, "\xff"));
        assert_non_null(strstr(out, "x\\x0Aforged\\x090000000000000000"));
        assert_non_null(strstr(out, "esc\\x1B[2J"));
        assert_non_null(strstr(out, "e\\xFFf"));
        free(out);
    }
    free(shard);
    free(queries);
    free(sharded);
    free(input);
}
#endif

/* An older version stored ids the id rule refuses (as a server's log still
 * may hold them: builders take them only from a log). TSV output prints
 * them escaped, one line each, so none forges a line or a field. */
static void test_live_ids__tsv_output_escapes_old_ids(void **state)
{
    (void)state;
    char *dir = test_tmpdir("live-ids");
    char *path = test_path(dir, "s");
    char *out_path = test_path(dir, "out");
    static model m;
    memset(&m, 0, sizeof m);
    m.present[1] = 1;
    m.fp[1] = 0x0123456789abcdefull;
    build_store(path, 3, &m);
    simstore *s;
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), SIMSTORE_OK);
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    simstore_builder *b;
    assert_int_equal(simstore_add_begin(s, &o, &b), SIMSTORE_OK);
    sims_builder_take_logged_ids(b);
    const char *odd[] = {"x\nforged\t0000000000000000", "esc\x1b[2J",
                         "e\xff"
                         "f"};
    for (unsigned i = 0; i < 3; i++) {
        simstore_doc d = {odd[i], strlen(odd[i]), 0x0123456789abcdefull, NULL, 0, 10 + i};
        assert_int_equal(simstore_builder_add(b, &d), SIMSTORE_OK);
    }
    assert_int_equal(simstore_builder_finish(b), SIMSTORE_OK);
    simstore_close(s);
    /* Without the logged-ids path the builder refuses them. */
    assert_int_equal(simstore_open(path, SIMSTORE_OPEN_WRITE, &s), SIMSTORE_OK);
    assert_int_equal(simstore_add_begin(s, &o, &b), SIMSTORE_OK);
    simstore_doc bad = {odd[0], strlen(odd[0]), 1, NULL, 0, 0};
    assert_int_equal(simstore_builder_add(b, &bad), SIMSTORE_EINVAL);
    assert_non_null(strstr(simstore_last_error(), "control character"));
    simstore_builder_abort(b);
    simstore_close(s);

    const char *cmds[] = {"export", "query", "get", "clusters"};
    const char *tails[] = {"", " --fp 0123456789abcdef --k 0", " d00001", " --k 0"};
    for (unsigned c = 0; c < 4; c++) {
        char args[4200];
        snprintf(args, sizeof args, "%s '%s'%s", cmds[c], path, tails[c]);
        int status;
        char *out = run_output("'" SIMSTORE_CLI "'", args, out_path, &status);
        /* Lines are whole records: the forged line and ESC never appear. */
        assert_null(strstr(out, "\nforged"));
        assert_null(strchr(out, '\x1b'));
        assert_null(strstr(out, "\xff"));
        if (c < 2) {
            assert_int_equal(status, 0);
            assert_non_null(strstr(out, "x\\x0Aforged\\x090000000000000000"));
            assert_non_null(strstr(out, "esc\\x1B[2J"));
            assert_non_null(strstr(out, "e\\xFFf"));
            unsigned lines = 0;
            for (const char *p = out; *p; p++)
                lines += *p == '\n';
            assert_int_equal(lines, 4);
        }
        free(out);
    }
#ifdef SIMSTORE_MPI_CLI
    mpi_output_escapes_old_ids(dir, odd, out_path);
#endif
    free(out_path);
    free(path);
    test_rmtree(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--fail-child") == 0)
        return run_fail_child(argv[2]);
    if (argc == 6 && strcmp(argv[1], "--live-child") == 0) {
        run_child(argv[2], atoi(argv[3]), (unsigned)atoi(argv[4]), (unsigned)atoi(argv[5]));
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return 1;
    self_path[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_live_exact__random),
        cmocka_unit_test(test_live_exact__clustered),
        cmocka_unit_test(test_live_exact__sketches),
        cmocka_unit_test(test_live_threads__insert_and_query),
        cmocka_unit_test(test_live_threads__insert_if_new_race),
        cmocka_unit_test(test_live_batch__same_as_one_by_one),
        cmocka_unit_test(test_live_batch__torn_group),
        cmocka_unit_test(test_live_memory__bounded_under_batches),
        cmocka_unit_test(test_live_crash__kill_during_changes),
        cmocka_unit_test(test_live_crash__faults),
        cmocka_unit_test(test_live_crash__batches),
        cmocka_unit_test(test_live_lock__cli_writers_refused),
        cmocka_unit_test(test_live_log__pending_changes_after_a_stop),
        cmocka_unit_test(test_live_log__torn_tail_kept_aside),
        cmocka_unit_test(test_live_log__write_failure_recovers),
        cmocka_unit_test(test_live_ids__rule_and_small_memtable),
        cmocka_unit_test(test_live_ids__tsv_output_escapes_old_ids),
    };
    /* Sampled (the ThreadSanitizer pass): the cases tests/CMakeLists.txt names. */
    const char *cases = test_sampled_cases();
    if (cases)
        cmocka_set_test_filter(cases);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
