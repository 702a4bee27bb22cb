/* test_docfile.c: the document file (lib/docfile, format/docfile.md): every
 * lookup against a brute-force reference on random, duplicate-heavy,
 * clustered and adversarial sets; writer input checks and atomic publish;
 * the golden file; and corruption sweeps (every byte flipped, every
 * truncation) where each lookup must fail or answer exactly. */
#include "common/error.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "docfile/docfile.h"
#include "docfile/layout.h"
#include "simstore.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- reference documents ------------------------------------------------------------ */

typedef struct rdoc {
    uint64_t fp, ins;
    uint8_t id[DOCFILE_ID_MAX];
    uint32_t id_len;
    int is_int;
    uint8_t *meta;
    uint32_t meta_len;
    uint8_t sketch[256];
    uint8_t *paras; /* paragraph_count * 8 bytes, or NULL */
    uint32_t para_count;
} rdoc;

typedef struct corpus {
    rdoc *d;
    size_t n;
    unsigned sketch_bytes;
} corpus;

static int rdoc_cmp(const void *a, const void *b)
{
    const rdoc *x = a, *y = b;
    if (x->fp != y->fp)
        return x->fp < y->fp ? -1 : 1;
    int c = memcmp(x->id, y->id, x->id_len < y->id_len ? x->id_len : y->id_len);
    return c ? c : (x->id_len < y->id_len ? -1 : x->id_len > y->id_len);
}

enum shape { RANDOM, DUPLICATES, CLUSTERED, ADVERSARIAL, RANDOM_FIXED_IDS, DUPLICATES_FIXED_IDS };

/* n documents of a shape, sorted, with distinct ids. */
static corpus make_corpus(test_rng *g, size_t n, enum shape shape, unsigned sketch_bytes)
{
    corpus c = {calloc(n ? n : 1, sizeof(rdoc)), n, sketch_bytes};
    assert_non_null(c.d);
    uint64_t base = test_rng_next(g);
    for (size_t i = 0; i < n; i++) {
        rdoc *d = &c.d[i];
        switch (shape) {
        case RANDOM:
        case RANDOM_FIXED_IDS: d->fp = test_rng_next(g); break;
        case DUPLICATES: /* a handful of values, long runs across blocks */
        case DUPLICATES_FIXED_IDS: d->fp = base + test_rng_below(g, 5) * 0x1000000000ULL; break;
        case CLUSTERED: d->fp = base + test_rng_below(g, 3 * n + 1); break;
        case ADVERSARIAL: { /* the ends of the range, huge gaps, runs */
            uint64_t pick = test_rng_below(g, 6);
            d->fp = pick == 0   ? 0
                    : pick == 1 ? UINT64_MAX
                    : pick == 2 ? (uint64_t)1 << 63
                    : pick == 3 ? UINT64_MAX - test_rng_below(g, 3)
                                : test_rng_next(g);
            break;
        }
        }
        /* Ids: decimal (some marked JSON integers), shared prefixes, binary,
         * and some of the longest length. */
        uint64_t kind = test_rng_below(g, 8);
        if (shape == RANDOM_FIXED_IDS || shape == DUPLICATES_FIXED_IDS) {
            /* Every id 9 bytes (bench_query's): no id length field. */
            d->id_len = (uint32_t)snprintf((char *)d->id, sizeof d->id, "d%08zx", i);
        } else if (kind == 0) {
            d->id_len = DOCFILE_ID_MAX - (uint32_t)test_rng_below(g, 3);
            memset(d->id, 'x', d->id_len);
            snprintf((char *)d->id, 24, "%zu", i);
            d->id[strlen((char *)d->id)] = 'x';
        } else if (kind <= 2) {
            d->id_len = (uint32_t)snprintf((char *)d->id, sizeof d->id, "%zu", i);
            d->is_int = 1;
        } else if (kind <= 4) {
            d->id_len = (uint32_t)snprintf((char *)d->id, sizeof d->id, "doc/%zu", i);
        } else {
            d->id_len = 9 + (uint32_t)test_rng_below(g, 8);
            for (uint32_t k = 0; k < d->id_len; k++)
                d->id[k] = (uint8_t)test_rng_next(g);
            d->id[0] = 0xFF; /* never equal to the decimal ids */
            uint64_t u = i;
            memcpy(d->id + 1, &u, 8); /* distinct */
        }
        d->ins = test_rng_below(g, 4) == 0 ? test_rng_next(g) : ((uint64_t)1 << 40) | i;
        if (test_rng_below(g, 4) == 0) {
            d->meta_len = 1 + (uint32_t)test_rng_below(g, 300);
            d->meta = malloc(d->meta_len);
            for (uint32_t k = 0; k < d->meta_len; k++)
                d->meta[k] = (uint8_t)('a' + test_rng_below(g, 26));
        }
        for (unsigned k = 0; k < sketch_bytes; k++)
            d->sketch[k] = (uint8_t)test_rng_next(g);
        /* Paragraph lists: most documents none, some short, a few long. */
        uint64_t pk = test_rng_below(g, 10);
        if (pk >= 7) {
            d->para_count =
                pk == 9 ? 1 + (uint32_t)test_rng_below(g, 300) : 1 + (uint32_t)test_rng_below(g, 6);
            d->paras = malloc((size_t)d->para_count * 8);
            for (uint32_t k = 0; k < d->para_count; k++) {
                uint64_t v = test_rng_below(g, 3) == 0 && k ? 0x5555 : test_rng_next(g);
                memcpy(d->paras + 8 * (size_t)k, &v, 8); /* repeats kept */
            }
        }
    }
    qsort(c.d, n, sizeof *c.d, rdoc_cmp);
    return c;
}

static void free_corpus(corpus *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->d[i].meta);
        free(c->d[i].paras);
    }
    free(c->d);
}

static int write_corpus_in(const corpus *c, const char *path, docfile_sizes *sizes,
                           size_t memory_bytes, const char *tmp_dir)
{
    docfile_writer *w;
    int rc = sims_docfile_writer_open(path, c->sketch_bytes, memory_bytes, tmp_dir, &w);
    if (rc)
        return rc;
    for (size_t i = 0; i < c->n; i++) {
        const rdoc *r = &c->d[i];
        docfile_doc d = {0,        r->fp,        r->ins,
                         r->id,    r->id_len,    r->is_int,
                         r->meta,  r->meta_len,  c->sketch_bytes ? r->sketch : NULL,
                         r->paras, r->para_count};
        rc = sims_docfile_writer_add(w, &d);
        if (rc) {
            sims_docfile_writer_abort(w);
            return rc;
        }
    }
    return sims_docfile_writer_commit(w, sizes);
}

static int write_corpus(const corpus *c, const char *path, docfile_sizes *sizes)
{
    return write_corpus_in(c, path, sizes, 0, NULL);
}

/* Whether a document the reader returned is the reference's document i. */
static int same_doc(const corpus *c, size_t i, const docfile_doc *d)
{
    const rdoc *r = &c->d[i];
    return d->ordinal == i && d->fingerprint == r->fp && d->insertion == r->ins &&
           d->id_len == r->id_len && memcmp(d->id, r->id, r->id_len) == 0 &&
           d->id_is_int == r->is_int && d->meta_len == r->meta_len &&
           (r->meta_len == 0 ? d->meta == NULL : memcmp(d->meta, r->meta, r->meta_len) == 0) &&
           (c->sketch_bytes ? d->sketch && memcmp(d->sketch, r->sketch, c->sketch_bytes) == 0
                            : d->sketch == NULL) &&
           d->paragraph_count == r->para_count &&
           (r->para_count == 0 ? d->paragraphs == NULL
                               : memcmp(d->paragraphs, r->paras, 8 * (size_t)r->para_count) == 0);
}

typedef struct collect {
    uint64_t ord[4096];
    size_t n;
    const corpus *c;
    int wrong;
} collect;

static int collect_doc(void *ctx, const docfile_doc *d)
{
    collect *k = ctx;
    if (k->n < 4096)
        k->ord[k->n] = d->ordinal;
    if (d->ordinal >= k->c->n || !same_doc(k->c, (size_t)d->ordinal, d))
        k->wrong = 1;
    k->n++;
    return 0;
}

/* Every lookup against the reference. Returns 0 when every answer is
 * exact, 1 when a lookup failed with an error (allowed only when
 * allow_errors), and aborts the test on a wrong answer. */
static int check_all(const docfile_reader *r, const corpus *c, test_rng *g, int allow_errors)
{
    int errors = 0;
    if (sims_docfile_count(r) != c->n) {
        assert_true(allow_errors);
        return 1;
    }
    /* By fingerprint: each distinct stored value, and values beside them. */
    for (size_t i = 0; i < c->n; i++) {
        if (i && c->d[i].fp == c->d[i - 1].fp)
            continue;
        size_t j = i;
        while (j < c->n && c->d[j].fp == c->d[i].fp)
            j++;
        collect k = {.c = c};
        int rc = sims_docfile_find_fp(r, c->d[i].fp, collect_doc, &k);
        if (rc) {
            assert_true(allow_errors);
            errors = 1;
            continue;
        }
        assert_false(k.wrong);
        assert_int_equal(k.n, j - i);
        for (size_t m = 0; m < k.n && m < 4096; m++)
            assert_int_equal(k.ord[m], i + m);
        uint64_t beside[2] = {c->d[i].fp - 1, c->d[i].fp + 1};
        for (int s = 0; s < 2; s++) {
            size_t lo = 0, hi = c->n; /* the reference's count for beside[s] */
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (c->d[mid].fp < beside[s])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            size_t cnt = 0;
            while (lo + cnt < c->n && c->d[lo + cnt].fp == beside[s])
                cnt++;
            collect b = {.c = c};
            rc = sims_docfile_find_fp(r, beside[s], collect_doc, &b);
            if (rc) {
                assert_true(allow_errors);
                errors = 1;
                continue;
            }
            assert_false(b.wrong);
            assert_int_equal(b.n, cnt);
        }
    }
    for (int t = 0; t < (allow_errors ? 8 : 200); t++) {
        uint64_t fp = test_rng_next(g);
        size_t cnt = 0;
        for (size_t i = 0; i < c->n; i++)
            cnt += c->d[i].fp == fp;
        collect k = {.c = c};
        int rc = sims_docfile_find_fp(r, fp, collect_doc, &k);
        if (rc) {
            assert_true(allow_errors);
            errors = 1;
            continue;
        }
        assert_false(k.wrong);
        assert_int_equal(k.n, cnt);
    }
    /* By id, and by ordinal. */
    for (size_t i = 0; i < c->n; i++) {
        docfile_doc d;
        int rc = sims_docfile_find_id(r, c->d[i].id, c->d[i].id_len, &d);
        if (rc < 0) {
            assert_true(allow_errors);
            errors = 1;
        } else {
            assert_int_equal(rc, 1);
            assert_true(same_doc(c, i, &d));
        }
        rc = sims_docfile_get(r, i, &d);
        if (rc) {
            assert_true(allow_errors);
            errors = 1;
        } else {
            assert_true(same_doc(c, i, &d));
        }
    }
    for (int t = 0; t < (allow_errors ? 8 : 100); t++) {
        char absent[40];
        int len = snprintf(absent, sizeof absent, "absent-%d", t);
        docfile_doc d;
        int rc = sims_docfile_find_id(r, absent, (size_t)len, &d);
        if (rc < 0) {
            assert_true(allow_errors);
            errors = 1;
        } else {
            assert_int_equal(rc, 0);
        }
    }
    /* In order. */
    collect all = {.c = c};
    int rc = sims_docfile_each(r, collect_doc, &all);
    if (rc) {
        assert_true(allow_errors);
        errors = 1;
    } else {
        assert_false(all.wrong);
        assert_int_equal(all.n, c->n);
    }
    return errors;
}

static void round_trip(const char *what, size_t n, enum shape shape, unsigned sketch_bytes)
{
    test_rng g;
    test_rng_init(&g, what, 0xD0CF11E + n + shape);
    corpus c = make_corpus(&g, n, shape, sketch_bytes);
    char *dir = test_tmpdir("docfile");
    char *path = test_path(dir, "s.doc");
    docfile_sizes ws;
    assert_int_equal(write_corpus(&c, path, &ws), SIMSTORE_OK);
    docfile_reader *r;
    assert_int_equal(sims_docfile_open(path, &r), SIMSTORE_OK);
    docfile_sizes rs;
    sims_docfile_sizes_of(r, &rs);
    assert_memory_equal(&ws, &rs, sizeof ws);
    assert_int_equal(sims_docfile_sketch_bytes(r), sketch_bytes);
    int vrc = sims_docfile_verify(r);
    if (vrc)
        fprintf(stderr, "%s\n", simstore_last_error());
    assert_int_equal(vrc, SIMSTORE_OK);
    assert_int_equal(check_all(r, &c, &g, 0), 0);
    sims_docfile_close(r);
    free_corpus(&c);
    free(path);
    test_rmtree(dir);
    free(dir);
}

static void test_docfile__random(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 2, 63, 64, 65, 127, 129, 1000, 20000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        round_trip("docfile random", sizes[i], RANDOM, 0);
}

/* Ids of one length, so blocks code no id lengths (wl = 0): the path a
 * lookup takes without offsets. */
static void test_docfile__fixed_length_ids(void **state)
{
    (void)state;
    size_t sizes[] = {1, 64, 100, 5000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        round_trip("docfile fixed ids", sizes[i], RANDOM_FIXED_IDS, 0);
        round_trip("docfile fixed ids, duplicates", sizes[i], DUPLICATES_FIXED_IDS, 16);
    }
}

static void test_docfile__duplicates(void **state)
{
    (void)state;
    size_t sizes[] = {1, 64, 65, 300, 5000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        round_trip("docfile duplicates", sizes[i], DUPLICATES, 0);
}

static void test_docfile__clustered_with_sketches(void **state)
{
    (void)state;
    unsigned kinds[] = {16, 32, 64, 128, 256};
    for (size_t i = 0; i < 5; i++)
        round_trip("docfile clustered", 700 + i, CLUSTERED, kinds[i]);
}

static void test_docfile__adversarial(void **state)
{
    (void)state;
    size_t sizes[] = {2, 64, 200, 3000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        round_trip("docfile adversarial", sizes[i], ADVERSARIAL, 0);
}

/* A writer short of memory spills its block table and id entries to files
 * and writes the same bytes. */
static void test_docfile__bounded_memory_same_bytes(void **state)
{
    (void)state;
    test_rng g;
    test_rng_init(&g, "docfile spill", 31);
    corpus c = make_corpus(&g, 100000, RANDOM, 0);
    char *dir = test_tmpdir("docfile");
    char *a = test_path(dir, "a.doc"), *b = test_path(dir, "b.doc");
    assert_int_equal(write_corpus_in(&c, a, NULL, 0, NULL), SIMSTORE_OK);
    assert_int_equal(write_corpus_in(&c, b, NULL, 64 << 10, dir), SIMSTORE_OK);
    size_t na, nb;
    uint8_t *ba = test_read_file(a, &na), *bb = test_read_file(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ba, bb, na);
    docfile_reader *r;
    assert_int_equal(sims_docfile_open(b, &r), SIMSTORE_OK);
    assert_int_equal(sims_docfile_verify(r), SIMSTORE_OK);
    sims_docfile_close(r);
    free(ba);
    free(bb);
    free(a);
    free(b);
    test_rmtree(dir);
    free(dir);
    free_corpus(&c);
}

/* ---- the writer's checks and publish ---------------------------------------------- */

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_docfile__writer_rejects_bad_input(void **state)
{
    (void)state;
    char *dir = test_tmpdir("docfile");
    char *path = test_path(dir, "w.doc");
    docfile_writer *w;
    assert_int_equal(sims_docfile_writer_open(path, 24, 0, NULL, &w), SIMSTORE_EINVAL);
    assert_int_equal(sims_docfile_writer_open(path, 16, 0, NULL, &w), SIMSTORE_OK);
    uint8_t sk[16] = {0}, long_id[DOCFILE_ID_MAX + 1];
    memset(long_id, 'a', sizeof long_id);
    docfile_doc d = {0, 10, 1, (const uint8_t *)"b", 1, 0, NULL, 0, sk, NULL, 0};
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_OK);
    d.id = (const uint8_t *)"a"; /* same fingerprint, smaller id */
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.id = (const uint8_t *)"b"; /* the same document again */
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.fingerprint = 9;
    d.id = (const uint8_t *)"c";
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.fingerprint = 11;
    d.id = long_id;
    d.id_len = DOCFILE_ID_MAX + 1;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.id_len = 0;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.id_len = DOCFILE_ID_MAX;
    d.sketch = NULL;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.sketch = sk;
    d.paragraphs = sk; /* a list of 2^20 + 1, and a count without a list */
    d.paragraph_count = DOCFILE_PARAGRAPHS_MAX + 1;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.paragraphs = NULL;
    d.paragraph_count = 2;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL);
    d.paragraph_count = 0;
    d.meta = (const uint8_t *)"{}";
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_EINVAL); /* length 0 */
    d.meta_len = 2;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_OK);
    /* Nothing at the final path before the commit; abort leaves nothing. */
    assert_int_equal(access(path, F_OK), -1);
    sims_docfile_writer_abort(w);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_files(dir), 0); /* no temporary file left */
    /* Committed: there, and readable. */
    assert_int_equal(sims_docfile_writer_open(path, 0, 0, NULL, &w), SIMSTORE_OK);
    d.sketch = NULL;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_OK);
    assert_int_equal(sims_docfile_writer_commit(w, NULL), SIMSTORE_OK);
    docfile_reader *r;
    assert_int_equal(sims_docfile_open(path, &r), SIMSTORE_OK);
    assert_int_equal(sims_docfile_count(r), 1);
    docfile_doc got;
    assert_int_equal(sims_docfile_find_id(r, long_id, DOCFILE_ID_MAX, &got), 1);
    assert_int_equal(got.meta_len, 2);
    assert_memory_equal(got.meta, "{}", 2);
    sims_docfile_close(r);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* Opening reads the header alone: the file's bytes after its first page
 * are made unreadable (PROT_NONE), and the open still succeeds; a lookup
 * then needs them (it would fault), so the protection is lifted first. */
static void test_docfile__open_reads_only_the_header(void **state)
{
    (void)state;
    test_rng g;
    test_rng_init(&g, "docfile open", 9);
    corpus c = make_corpus(&g, 20000, RANDOM, 0);
    char *dir = test_tmpdir("docfile");
    char *path = test_path(dir, "o.doc");
    assert_int_equal(write_corpus(&c, path, NULL), SIMSTORE_OK);
    size_t size;
    uint8_t *bytes = test_read_file(path, &size);
    long page = sysconf(_SC_PAGESIZE);
    assert_true(size > 4 * (size_t)page);
    size_t len = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
    uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    memcpy(m, bytes, size);
    assert_int_equal(mprotect(m + page, len - (size_t)page, PROT_NONE), 0);
    docfile_reader *r;
    assert_int_equal(sims_docfile_open_memory(m, size, "protected", &r), SIMSTORE_OK);
    assert_int_equal(sims_docfile_count(r), c.n);
    assert_int_equal(mprotect(m, len, PROT_READ), 0);
    assert_int_equal(check_all(r, &c, &g, 0), 0);
    sims_docfile_close(r);
    munmap(m, len);
    free(bytes);
    free(path);
    test_rmtree(dir);
    free(dir);
    free_corpus(&c);
}

/* ---- golden file -------------------------------------------------------------------- */

/* The example of format/docfile.md's golden file: five documents, two of one
 * fingerprint, one with metadata, one with a JSON-integer id, sketches of
 * 16 bytes. */
static corpus golden_corpus(void)
{
    static const struct {
        uint64_t fp, ins;
        const char *id;
        int is_int;
        const char *meta;
    } g[] = {
        {0x0000000000000005ULL, (1ULL << 40) | 2, "b", 0, NULL},
        {0x0000000000000005ULL, (1ULL << 40) | 0, "c", 0, "{\"lang\":\"en\"}"},
        {0x00000000000000FFULL, (1ULL << 40) | 1, "42", 1, NULL},
        {0x8000000000000000ULL, (2ULL << 40) | 0, "doc-4", 0, NULL},
        {0xFFFFFFFFFFFFFFFFULL, (2ULL << 40) | 1, "a", 0, NULL},
    };
    corpus c = {calloc(5, sizeof(rdoc)), 5, 16};
    for (size_t i = 0; i < 5; i++) {
        rdoc *d = &c.d[i];
        d->fp = g[i].fp;
        d->ins = g[i].ins;
        d->id_len = (uint32_t)strlen(g[i].id);
        memcpy(d->id, g[i].id, d->id_len);
        d->is_int = g[i].is_int;
        if (g[i].meta) {
            d->meta_len = (uint32_t)strlen(g[i].meta);
            d->meta = malloc(d->meta_len);
            memcpy(d->meta, g[i].meta, d->meta_len);
        }
        for (unsigned k = 0; k < 16; k++)
            d->sketch[k] = (uint8_t)(16 * i + k);
    }
    return c;
}

static void test_docfile__golden(void **state)
{
    (void)state;
    corpus c = golden_corpus();
    char *dir = test_tmpdir("docfile");
    char *path = test_path(dir, "golden.doc");
    assert_int_equal(write_corpus(&c, path, NULL), SIMSTORE_OK);
    size_t n_got, n_want;
    uint8_t *got = test_read_file(path, &n_got);
    char *gdir = test_path(test_source_dir(), "format/golden");
    char *gpath = test_path(gdir, "docfile-example.doc");
    const char *regen = getenv("SIMSTORE_REGEN_GOLDEN");
    if (regen && strcmp(regen, "1") == 0)
        assert_int_equal(test_write_file(gpath, got, n_got), 0);
    uint8_t *want = test_read_file(gpath, &n_want);
    assert_non_null(want);
    assert_int_equal(n_got, n_want);
    assert_memory_equal(got, want, n_want);
    /* And it reads back as the example. */
    docfile_reader *r;
    assert_int_equal(sims_docfile_open(gpath, &r), SIMSTORE_OK);
    assert_int_equal(sims_docfile_verify(r), SIMSTORE_OK);
    test_rng g;
    test_rng_init(&g, "docfile golden", 5);
    assert_int_equal(check_all(r, &c, &g, 0), 0);
    sims_docfile_close(r);
    /* A version this reader does not know, whatever its header's checksum
     * (another version may lay it out otherwise): SIMSTORE_EVERSION naming
     * the file, never corruption. */
    for (uint16_t v = 0; v < 4; v++) {
        if (v == 1)
            continue;
        got[8] = (uint8_t)v;
        assert_int_equal(test_write_file(path, got, n_got), 0);
        assert_int_equal(sims_docfile_open(path, &r), SIMSTORE_EVERSION);
        assert_non_null(strstr(simstore_last_error(), "document file version"));
        assert_non_null(strstr(simstore_last_error(), "unknown to this simstore"));
        assert_non_null(strstr(simstore_last_error(), path));
    }
    free(got);
    free(want);
    free(gpath);
    free(gdir);
    free(path);
    test_rmtree(dir);
    free(dir);
    free_corpus(&c);
}

/* What checksums cannot show, verify does: one id given twice (the writer
 * leaves distinct ids to its caller), and a directory entry changed with
 * its page's checksum made again. */
static void test_docfile__verify_sees_past_checksums(void **state)
{
    (void)state;
    char *dir = test_tmpdir("docfile");
    char *path = test_path(dir, "v.doc");
    docfile_writer *w;
    assert_int_equal(sims_docfile_writer_open(path, 0, 0, NULL, &w), SIMSTORE_OK);
    docfile_doc d = {0, 1, 0, (const uint8_t *)"a", 1, 0, NULL, 0, NULL, NULL, 0};
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_OK);
    d.fingerprint = 2;
    assert_int_equal(sims_docfile_writer_add(w, &d), SIMSTORE_OK);
    assert_int_equal(sims_docfile_writer_commit(w, NULL), SIMSTORE_OK);
    docfile_reader *r;
    assert_int_equal(sims_docfile_open(path, &r), SIMSTORE_OK);
    assert_int_equal(sims_docfile_verify(r), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "have one id"));
    sims_docfile_close(r);

    /* A fingerprint directory entry moved, its page checksum forged. */
    test_rng g;
    test_rng_init(&g, "docfile forged", 3);
    corpus c = make_corpus(&g, 3000, RANDOM, 0);
    assert_int_equal(write_corpus(&c, path, NULL), SIMSTORE_OK);
    size_t size;
    uint8_t *b = test_read_file(path, &size);
    uint64_t n = le_load64(b + DF_H_COUNT), bt = le_load64(b + DF_H_BT), nb = df_block_count(n);
    uint64_t fd = bt + df_table_bytes(nb), x = 5;
    uint8_t *page = b + fd; /* page 0 holds entries 0..63 */
    uint64_t entries = df_dir_entries(df_bf(n));
    uint64_t e = entries < DF_DIR_PAGE ? entries : DF_DIR_PAGE;
    le_store32(page + 4 * x, le_load32(page + 4 * x) + 1);
    le_store64(page + 4 * e, sims_xxh3_64(page, 4 * e, DF_SEED_FPDIR));
    assert_int_equal(sims_docfile_open_memory(b, size, "forged", &r), SIMSTORE_OK);
    assert_int_equal(sims_docfile_verify(r), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "fingerprint directory entry 5"));
    sims_docfile_close(r);
    free(b);
    free_corpus(&c);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- corruption ------------------------------------------------------------------- */

/* Every byte of a small file flipped (two ways), and every truncation:
 * open fails, or every lookup fails or answers exactly, and verify fails
 * unless nothing changed that a reader uses. */
static void test_docfile__corruption_sweep(void **state)
{
    (void)state;
    test_rng g;
    test_rng_init(&g, "docfile corruption", 77);
    corpus c = make_corpus(&g, 150, DUPLICATES, 16);
    /* Some documents of their own fingerprints too. */
    for (size_t i = 0; i < c.n; i += 7)
        c.d[i].fp ^= test_rng_next(&g);
    qsort(c.d, c.n, sizeof *c.d, rdoc_cmp);
    char *dir = test_tmpdir("docfile");
    char *path = test_path(dir, "c.doc");
    assert_int_equal(write_corpus(&c, path, NULL), SIMSTORE_OK);
    size_t size;
    uint8_t *orig = test_read_file(path, &size);
    uint8_t *buf = malloc(size);
    const char *full = getenv("SIMSTORE_SWEEP");
    size_t step = full && strcmp(full, "full") == 0 ? 1 : 3;
    size_t opened = 0, failed_lookups = 0, verify_passed = 0;
    for (size_t at = 0; at < size; at += step) {
        for (int flip = 0; flip < 2; flip++) {
            memcpy(buf, orig, size);
            buf[at] ^= flip ? 0x80 : 0x01;
            docfile_reader *r;
            if (sims_docfile_open_memory(buf, size, "swept", &r) != SIMSTORE_OK)
                continue;
            opened++;
            failed_lookups += (size_t)check_all(r, &c, &g, 1);
            if (sims_docfile_verify(r) == SIMSTORE_OK)
                verify_passed++;
            sims_docfile_close(r);
        }
    }
    /* Every byte is covered by a checksum: verify finds every flip. */
    assert_int_equal(verify_passed, 0);
    assert_true(opened > 0);
    assert_true(failed_lookups > 0);
    for (size_t len = 0; len < size; len++) {
        docfile_reader *r;
        int rc = sims_docfile_open_memory(orig, len, "truncated", &r);
        assert_int_equal(rc, SIMSTORE_ECORRUPT);
    }
    free(buf);
    free(orig);
    free(path);
    test_rmtree(dir);
    free(dir);
    free_corpus(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docfile__random),
        cmocka_unit_test(test_docfile__duplicates),
        cmocka_unit_test(test_docfile__fixed_length_ids),
        cmocka_unit_test(test_docfile__clustered_with_sketches),
        cmocka_unit_test(test_docfile__adversarial),
        cmocka_unit_test(test_docfile__bounded_memory_same_bytes),
        cmocka_unit_test(test_docfile__writer_rejects_bad_input),
        cmocka_unit_test(test_docfile__open_reads_only_the_header),
        cmocka_unit_test(test_docfile__golden),
        cmocka_unit_test(test_docfile__verify_sees_past_checksums),
        cmocka_unit_test(test_docfile__corruption_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
