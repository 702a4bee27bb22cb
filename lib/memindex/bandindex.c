/* bandindex.c: an exact in-memory index of sketches by their LSH bands
 * (simstore_bandindex_*, format/sketch.md 6.2): which entries share at
 * least one band with a query sketch.
 *
 * Layout. Entries are numbered in insertion order; each keeps its value and
 * the sketch's banded bits (the first rows x count bits, whole bytes) in
 * two arrays. For each band b, heads[b][h] is the newest entry whose band-b
 * key hashes to bucket h, and next[i * count + b] the entry after i in that
 * chain (uint32 numbers, NONE at the end). The bucket count per band is
 * half the capacity, so a slot costs its bits, 8 bytes of value and 6 bytes
 * a band.
 *
 * Queries. For each band, walk the chain of the query key's bucket and
 * collect the entries whose own key equals it; the collected values are
 * sorted and repeats dropped, so fn sees each distinct value once, in
 * ascending order. Up to STACK_VALUES values live on the stack; more are
 * allocated for the query.
 *
 * Growth. When the entries fill the capacity it doubles and every chain is
 * rebuilt (next[] keeps its layout; the buckets change): amortized O(count)
 * per add. */
#include "common/error.h"
#include "common/sketch.h"

#include "simstore.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define MAX_ENTRIES ((uint64_t)UINT32_MAX - 1)
#define MIN_CAPACITY 64u
#define MAX_ROWS 32u    /* band keys are 32 bits (format/sketch.md 6.2) */
#define MAX_BITS 65536u /* rows x count: the largest sketch has 2048 bins */
#define STACK_VALUES 256

struct simstore_bandindex {
    unsigned rows, count;
    size_t band_bytes;    /* banded bits kept per entry, in whole bytes */
    uint64_t n, capacity; /* entries used, room in bits/values/next */
    unsigned bucket_bits; /* buckets per band: 2^bucket_bits */
    uint8_t *bits;        /* capacity x band_bytes */
    uint64_t *values;     /* capacity */
    uint32_t *next;       /* capacity x count */
    uint32_t *heads;      /* count x 2^bucket_bits */
};

static unsigned log2_floor(uint64_t v)
{
    unsigned b = 0;
    while (v >>= 1)
        b++;
    return b;
}

static inline uint64_t bucket_of(const simstore_bandindex *x, uint64_t key)
{
    return ((key + 1) * UINT64_C(0x9E3779B97F4A7C15)) >> (64u - x->bucket_bits);
}

static inline const uint8_t *entry_bits(const simstore_bandindex *x, uint32_t i)
{
    return x->bits + (size_t)i * x->band_bytes;
}

/* Link entry i into every band's chain (newest first). */
static void link_entry(simstore_bandindex *x, uint32_t i)
{
    const uint8_t *bits = entry_bits(x, i);
    for (unsigned b = 0; b < x->count; b++) {
        uint32_t *heads = x->heads + ((size_t)b << x->bucket_bits);
        uint64_t h = bucket_of(x, sims_sketch_band_key(bits, x->rows, b));
        x->next[(size_t)i * x->count + b] = heads[h];
        heads[h] = i;
    }
}

/* Room for `capacity` entries, every chain rebuilt. On failure the index is
 * unchanged (the arrays that grew keep their old contents). */
static int bandindex_resize(simstore_bandindex *x, uint64_t capacity)
{
    unsigned bucket_bits = log2_floor(capacity) - 1;
    size_t nheads = (size_t)x->count << bucket_bits;
    uint8_t *bits = realloc(x->bits, capacity * x->band_bytes);
    if (bits)
        x->bits = bits;
    uint64_t *values = bits ? realloc(x->values, capacity * sizeof *values) : NULL;
    if (values)
        x->values = values;
    uint32_t *next = values ? realloc(x->next, capacity * x->count * sizeof *next) : NULL;
    if (next)
        x->next = next;
    uint32_t *heads = next ? malloc(nheads * sizeof *heads) : NULL;
    if (!heads)
        return sims_fail(SIMSTORE_ENOMEM, "bandindex: no memory for %llu entries",
                         (unsigned long long)capacity);
    memset(heads, 0xFF, nheads * sizeof *heads);
    free(x->heads);
    x->heads = heads;
    x->capacity = capacity;
    x->bucket_bits = bucket_bits;
    for (uint64_t i = 0; i < x->n; i++)
        link_entry(x, (uint32_t)i);
    return SIMSTORE_OK;
}

int simstore_bandindex_new(unsigned rows, unsigned count, simstore_bandindex **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "bandindex: out is NULL");
    *out = NULL;
    if (rows < 1 || rows > MAX_ROWS || count < 1 || (uint64_t)rows * count > MAX_BITS)
        return sims_fail(SIMSTORE_EINVAL,
                         "bandindex: %u bands of %u bits (rows 1..%u, count 1.., at most %u "
                         "bits in all)",
                         count, rows, MAX_ROWS, MAX_BITS);
    simstore_bandindex *x = calloc(1, sizeof *x);
    if (!x)
        return sims_fail(SIMSTORE_ENOMEM, "bandindex: no memory");
    x->rows = rows;
    x->count = count;
    x->band_bytes = ((size_t)rows * count + 7) / 8;
    int rc = bandindex_resize(x, MIN_CAPACITY);
    if (rc) {
        simstore_bandindex_free(x);
        return rc;
    }
    *out = x;
    return SIMSTORE_OK;
}

void simstore_bandindex_free(simstore_bandindex *x)
{
    if (!x)
        return;
    free(x->bits);
    free(x->values);
    free(x->next);
    free(x->heads);
    free(x);
}

int simstore_bandindex_add(simstore_bandindex *x, const uint8_t *sketch, uint64_t value)
{
    if (!x || !sketch)
        return sims_fail(SIMSTORE_EINVAL, "bandindex: NULL index or sketch");
    if (x->n == x->capacity) {
        if (x->n >= MAX_ENTRIES)
            return sims_fail(SIMSTORE_EFULL, "bandindex: holds %llu entries, the most it can",
                             (unsigned long long)x->n);
        uint64_t capacity = x->capacity * 2 <= MAX_ENTRIES ? x->capacity * 2 : MAX_ENTRIES;
        int rc = bandindex_resize(x, capacity);
        if (rc)
            return rc;
    }
    uint32_t i = (uint32_t)x->n++;
    memcpy(x->bits + (size_t)i * x->band_bytes, sketch, x->band_bytes);
    x->values[i] = value;
    link_entry(x, i);
    return SIMSTORE_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int simstore_bandindex_query(const simstore_bandindex *x, const uint8_t *sketch,
                             simstore_bandindex_fn fn, void *ctx)
{
    if (!x || !sketch || !fn)
        return sims_fail(SIMSTORE_EINVAL, "bandindex: NULL index, sketch or callback");
    uint64_t stack[STACK_VALUES], *found = stack;
    size_t n = 0, cap = STACK_VALUES;
    int rc = SIMSTORE_OK;
    for (unsigned b = 0; b < x->count && rc == 0; b++) {
        uint64_t key = sims_sketch_band_key(sketch, x->rows, b);
        uint32_t i = x->heads[((size_t)b << x->bucket_bits) + bucket_of(x, key)];
        for (; i != NONE; i = x->next[(size_t)i * x->count + b]) {
            if (sims_sketch_band_key(entry_bits(x, i), x->rows, b) != key)
                continue;
            if (n == cap) {
                uint64_t *grown = malloc(2 * cap * sizeof *grown);
                if (!grown) {
                    rc = sims_fail(SIMSTORE_ENOMEM, "bandindex: no memory for a query's "
                                                    "answers");
                    break;
                }
                memcpy(grown, found, n * sizeof *found);
                if (found != stack)
                    free(found);
                found = grown;
                cap *= 2;
            }
            found[n++] = x->values[i];
        }
    }
    if (rc == 0 && n > 1)
        qsort(found, n, sizeof *found, cmp_u64);
    for (size_t j = 0; rc == 0 && j < n; j++)
        if (j == 0 || found[j] != found[j - 1])
            rc = fn(ctx, found[j]);
    if (found != stack)
        free(found);
    return rc;
}

uint64_t simstore_bandindex_count(const simstore_bandindex *x)
{
    return x ? x->n : 0;
}

uint64_t simstore_bandindex_bytes(const simstore_bandindex *x)
{
    if (!x)
        return 0;
    return sizeof *x +
           x->capacity * (x->band_bytes + sizeof *x->values + x->count * sizeof *x->next) +
           ((uint64_t)x->count << x->bucket_bits) * sizeof *x->heads;
}
