/* bench_permute.c: permuting fingerprints into a design's tables, four ways:
 * the compiled rotate-and-mask moves (lib/store/permute.h), byte-wise lookup
 * tables (8 x 256 entries per table and direction), BMI2 pext/pdep where the
 * build targets it, and the naive loop over 64 bits as the same-run
 * baseline. Prints ns per permutation and per inverse, and the ratio to the
 * naive loop. Usage: bench_permute [k] [tables] [count]. */
#include "design/design.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__BMI2__)
#include <immintrin.h>
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t naive_permute(const uint8_t perm[64], uint64_t x)
{
    uint64_t y = 0;
    for (unsigned i = 0; i < 64; i++)
        y |= (x >> perm[i] & 1) << i;
    return y;
}

static uint64_t naive_unpermute(const uint8_t perm[64], uint64_t y)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 64; i++)
        x |= (y >> i & 1) << perm[i];
    return x;
}

/* lut[b][v]: the output bits contributed by byte b of the input having
 * value v. */
typedef struct byte_lut {
    uint64_t fwd[8][256];
    uint64_t inv[8][256];
} byte_lut;

static void lut_init(byte_lut *l, const uint8_t perm[64])
{
    for (unsigned b = 0; b < 8; b++)
        for (unsigned v = 0; v < 256; v++) {
            uint64_t x = (uint64_t)v << (8 * b);
            l->fwd[b][v] = naive_permute(perm, x);
            l->inv[b][v] = naive_unpermute(perm, x);
        }
}

static uint64_t lut_apply(const uint64_t t[8][256], uint64_t x)
{
    return t[0][x & 255] | t[1][x >> 8 & 255] | t[2][x >> 16 & 255] | t[3][x >> 24 & 255] |
           t[4][x >> 32 & 255] | t[5][x >> 40 & 255] | t[6][x >> 48 & 255] | t[7][x >> 56];
}

enum { METHOD_NAIVE, METHOD_MOVES, METHOD_LUT, METHOD_PEXT, METHOD_COUNT };
static const char *const method_names[METHOD_COUNT] = {"naive loop", "block moves", "byte LUT",
                                                       "pext/pdep"};

static uint64_t run(int method, int inverse, const sims_design *d, const byte_lut *luts,
                    const uint64_t *xs, size_t n)
{
    uint64_t acc = 0;
    for (uint32_t t = 0; t < d->n_tables; t++) {
        const sims_design_table *tab = &d->tables[t];
        for (size_t i = 0; i < n; i++) {
            uint64_t x = xs[i], y = 0;
            switch (method) {
            case METHOD_NAIVE:
                y = inverse ? naive_unpermute(tab->perm, x) : naive_permute(tab->perm, x);
                break;
            case METHOD_MOVES:
                y = inverse ? sims_unpermute(&tab->permuter, x) : sims_permute(&tab->permuter, x);
                break;
            case METHOD_LUT: y = lut_apply(inverse ? luts[t].inv : luts[t].fwd, x); break;
#if defined(__BMI2__)
            case METHOD_PEXT: {
                /* The canonical permutation is a stable partition by the
                 * prefix mask, so two pexts (or pdeps) implement it. */
                unsigned p = tab->prefix_bits;
                uint64_t m = tab->prefix_mask;
                if (!inverse)
                    y = p == 64 ? x : _pext_u64(x, m) << (64 - p) | _pext_u64(x, ~m);
                else
                    y = p == 64 ? x : _pdep_u64(x >> (64 - p), m) | _pdep_u64(x, ~m);
                break;
            }
#endif
            default: break;
            }
            acc += y;
        }
    }
    return acc;
}

int main(int argc, char **argv)
{
    unsigned k = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
    unsigned tables = argc > 2 ? (unsigned)atoi(argv[2]) : 16;
    size_t n = argc > 3 ? (size_t)strtoull(argv[3], NULL, 10) : (size_t)1 << 20;
    sims_design *d = malloc(sizeof *d);
    byte_lut *luts = NULL;
    uint64_t *xs = malloc(n * sizeof *xs);
    if (!d || !xs || sims_design_with_tables(k, tables, d) != SIMSTORE_OK) {
        fprintf(stderr, "bench_permute: %s\n", simstore_last_error());
        return 1;
    }
    luts = malloc(d->n_tables * sizeof *luts);
    if (!luts)
        return 1;
    for (uint32_t t = 0; t < d->n_tables; t++)
        lut_init(&luts[t], d->tables[t].perm);
    uint64_t seed = 42;
    for (size_t i = 0; i < n; i++)
        xs[i] = splitmix(&seed);

    char desc[160];
    sims_design_describe(d, desc, sizeof desc);
    unsigned max_moves = 0;
    for (uint32_t t = 0; t < d->n_tables; t++)
        if (d->tables[t].permuter.n_moves > max_moves)
            max_moves = d->tables[t].permuter.n_moves;
    printf("design %s; up to %u moves per table; %zu values per table\n", desc, max_moves, n);
    printf("%-12s %14s %14s %10s %10s\n", "method", "permute ns", "unpermute ns", "x naive",
           "x naive inv");

    double base[2] = {0, 0};
    uint64_t check[2] = {0, 0};
    for (int method = 0; method < METHOD_COUNT; method++) {
#if !defined(__BMI2__)
        if (method == METHOD_PEXT) {
            printf("%-12s (not built: the target lacks BMI2)\n", method_names[method]);
            continue;
        }
#endif
        double ns[2];
        for (int inverse = 0; inverse < 2; inverse++) {
            run(method, inverse, d, luts, xs, n < 4096 ? n : 4096); /* warm up */
            double t0 = now_ns();
            uint64_t acc = run(method, inverse, d, luts, xs, n);
            ns[inverse] = (now_ns() - t0) / ((double)n * d->n_tables);
            if (method == METHOD_NAIVE) {
                base[inverse] = ns[inverse];
                check[inverse] = acc;
            } else if (acc != check[inverse]) {
                fprintf(stderr, "bench_permute: %s disagrees with the naive loop\n",
                        method_names[method]);
                return 1;
            }
        }
        printf("%-12s %14.2f %14.2f %10.1f %10.1f\n", method_names[method], ns[0], ns[1],
               base[0] / ns[0], base[1] / ns[1]);
    }
    free(luts);
    free(xs);
    free(d);
    return 0;
}
