/* testutil.c: seeded randomness, temporary directories and file helpers for
 * the unit tests. */
#include "testutil.h"

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void test_rng_init(test_rng *r, const char *what, uint64_t default_seed)
{
    uint64_t seed = default_seed;
    const char *env = getenv("SIMSTORE_TEST_SEED");
    if (env && *env)
        seed = strtoull(env, NULL, 0);
    r->state = seed;
    fprintf(stderr, "%s: seed %" PRIu64 " (replay with SIMSTORE_TEST_SEED=%" PRIu64 ")\n", what,
            seed, seed);
}

uint64_t test_rng_next(test_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

uint64_t test_rng_below(test_rng *r, uint64_t bound)
{
    /* Rejection sampling keeps the result exactly uniform. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do
        x = test_rng_next(r);
    while (x >= limit);
    return x % bound;
}

char *test_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *path = malloc(n);
    if (!path)
        return NULL;
    snprintf(path, n, "%s/simstore-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) {
        free(path);
        return NULL;
    }
    return path;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void test_rmtree(const char *path)
{
    if (path)
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *test_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

uint8_t *test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *g = realloc(buf, cap);
            if (!g) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = g;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *size = n;
    return buf;
}

int test_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = size ? fwrite(data, 1, size, f) : 0;
    int rc = fclose(f);
    return (w == size && rc == 0) ? 0 : -1;
}

const char *test_source_dir(void)
{
    const char *s = getenv("SIMSTORE_SOURCE_DIR");
    return (s && *s) ? s : ".";
}

static int env_on(const char *name)
{
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

int test_dense(void)
{
    return env_on("SIMSTORE_DENSE");
}

int test_sampled(void)
{
    return env_on("SIMSTORE_SAMPLED") && !test_dense();
}

const char *test_sampled_cases(void)
{
    const char *cases = getenv("SIMSTORE_SAMPLED_CASES");
    return test_sampled() && cases && *cases ? cases : NULL;
}

void test_text_add(test_text *t, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        abort();
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->buf = realloc(t->buf, t->cap);
        if (!t->buf)
            abort();
    }
    memcpy(t->buf + t->len, line, (size_t)n + 1);
    t->len += (size_t)n;
}

int test_text_same(const test_text *a, const test_text *b, const char *what)
{
    if (a->len == b->len && (a->len == 0 || memcmp(a->buf, b->buf, a->len) == 0))
        return 1;
    fprintf(stderr, "%s differs:\n--- got (%zu bytes)\n%.3000s\n--- want (%zu bytes)\n%.3000s\n",
            what, a->len, a->buf ? a->buf : "", b->len, b->buf ? b->buf : "");
    return 0;
}
