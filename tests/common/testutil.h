/* testutil.h: helpers shared by the unit tests: seeded random numbers (the seed
 * is printed so a failure can be replayed), temporary directories, and a few
 * file utilities. */
#ifndef SIMS_TESTUTIL_H
#define SIMS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64 state; deterministic for a given seed. */
typedef struct test_rng {
    uint64_t state;
} test_rng;

/* Seed from $SIMSTORE_TEST_SEED when set, else from `default_seed`; prints
 * "seed: N (replay with SIMSTORE_TEST_SEED=N)" to stderr. */
void test_rng_init(test_rng *r, const char *what, uint64_t default_seed);
uint64_t test_rng_next(test_rng *r);
/* Uniform in [0, bound), bound > 0. */
uint64_t test_rng_below(test_rng *r, uint64_t bound);

/* Create a fresh directory under $TMPDIR (or /tmp); returns a malloc'd path. */
char *test_tmpdir(const char *tag);
/* Remove a directory tree (best effort). */
void test_rmtree(const char *path);
/* malloc'd "dir/name". */
char *test_path(const char *dir, const char *name);

/* Read a whole file; returns malloc'd bytes (NULL on failure). */
uint8_t *test_read_file(const char *path, size_t *size);
/* Write bytes to a file (truncating); returns 0 on success. */
int test_write_file(const char *path, const void *data, size_t size);

/* Text built up line by line (answers printed as the CLI would), compared
 * whole. */
typedef struct test_text {
    char *buf;
    size_t len, cap;
} test_text;
/* Append a printf-formatted piece of at most 1199 bytes (aborts when out
 * of memory). */
void test_text_add(test_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when a and b hold the same bytes; else prints both under `what` and
 * returns 0. */
int test_text_same(const test_text *got, const test_text *want, const char *what);

/* The source tree root ($SIMSTORE_SOURCE_DIR, set by CTest). */
const char *test_source_dir(void);

/* How much of its space a sweep covers. test_dense(): SIMSTORE_DENSE is set
 * (and not "0"): sweep everything the test knows how to. test_sampled():
 * SIMSTORE_SAMPLED is set and SIMSTORE_DENSE is not: the sanitizer pass of
 * tests/run.sh, where each case costs ten to fifty times as much, takes a
 * fixed, seeded sample of the cases (every kind of case still met). Neither:
 * the default size. */
int test_dense(void);
int test_sampled(void);
/* The cmocka pattern of the cases a sampled run keeps
 * ($SIMSTORE_SAMPLED_CASES, e.g. "test_text_threads__*"), or NULL: all.
 * NULL unless test_sampled(). The ThreadSanitizer build sets it for the tests
 * whose threads are in a few of their cases (tests/CMakeLists.txt); a
 * test's main passes it to cmocka_set_test_filter(). */
const char *test_sampled_cases(void);

#endif
