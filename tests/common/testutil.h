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

/* The source tree root ($SIMSTORE_SOURCE_DIR, set by CTest). */
const char *test_source_dir(void);

#endif
