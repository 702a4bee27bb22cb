/* memindex.c: an exact in-memory near-duplicate index of 64-bit fingerprints
 * (simstore_memindex_*): the store's table designs (lib/design) over hash
 * chains instead of sorted files.
 *
 * Layout. Entries live in two parallel arrays, fps[] and values[] (16 bytes
 * an entry), numbered in insertion order. For each table t of the design,
 * heads[t][b] is the newest entry whose table-t prefix hashes to bucket b,
 * and next[t][i] the entry after i in that chain (uint32 numbers, NONE at
 * the end). So a slot of capacity costs 16 + 4 T bytes plus 2 T for the
 * heads (the bucket count is half the capacity): 40 bytes for the 4-table
 * k = 3 design, 40..80 bytes an entry with the room for growth.
 *
 * Queries. For query q and each table t, walk the chain of q's bucket and
 * keep the entries within distance k. An entry near q can sit in the chains
 * of several tables (every table whose prefix its difference to q avoids),
 * and a bucket may also hold entries of other prefixes; each answer is given
 * once, from the first table whose prefix avoids fp ^ q (the table the
 * design's proof names), so nothing is allocated to remove repeats.
 *
 * Above k. A query at a distance K above the index's k (up to
 * SIMSTORE_MAX_K) probes each table at every prefix within a few bits of
 * q's (format/design.md, "Beyond k"), or compares every entry when that
 * reads less; exact either way (query_beyond).
 *
 * Growth. When the entries fill the capacity, it doubles: the design is
 * chosen again for the new capacity (sims_design_choose with a cost model of
 * chains in RAM, below), and every chain is rebuilt. The design therefore
 * follows the count, whatever expected_count said; a rebuild costs
 * T x capacity permutations, amortized O(T) per add. */
#include "common/bits.h"
#include "common/error.h"
#include "design/design.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
/* Entry numbers are uint32, NONE excluded. */
#define MAX_ENTRIES ((uint64_t)UINT32_MAX - 1)
#define MIN_CAPACITY 64u
/* Buckets per table: capacity / 2^LOAD_SHIFT (mean chain of 1..2 entries of
 * a full prefix; longer when the prefix is shorter than the bucket bits). */
#define LOAD_SHIFT 1
/* At most this many tables (so at most ~16 + 10 x 16 bytes an entry): past
 * it, a design for a large k scans longer chains rather than growing. */
#define MEMINDEX_MAX_TABLES 16

/* An index asked for k above BEYOND_FROM_K is designed for BEYOND_DESIGN_K
 * and answers at k as above its k (query_beyond). Measured (200 000 to
 * 300 000 random entries, each queried then added): at k = 5, 6 and 7 the
 * k = 3 design probed from one bit of each 16-bit prefix answered in about
 * 2 to 3 µs a record, the designs for k itself in 6, 19 and 263 µs, whose
 * capped table counts leave 8-bit prefixes and chains of n / 256; at k = 4
 * the k = 4 design was faster (1.2 against 1.9 µs). */
#define BEYOND_FROM_K 4u
#define BEYOND_DESIGN_K 3u

/* A query above the index's k visits buckets rather than every entry only
 * when there are more than this many entries a bucket it would visit. */
#define BEYOND_PASS_RATIO 32

/* The cost model for chains in RAM: a probe hashes, permutes and misses the
 * cache once (~25 ns); each chain step misses on next[] and fps[] (~4 ns in
 * a warm index); a table costs ~8 bytes per entry, priced at 6 ns a byte so
 * that a design with more tables must save real work to be chosen. One
 * "fingerprint per block": a chain starts at its first entry. */
static const sims_cost_model MEMINDEX_MODEL = {25.0, 4.0, 12.0, MEMINDEX_MAX_TABLES};

struct simstore_memindex {
    unsigned k;
    uint64_t count, capacity; /* entries used, room in fps/values/next */
    unsigned bucket_bits;     /* buckets per table: 2^bucket_bits */
    uint64_t *fps;
    uint64_t *values;
    uint32_t *next;  /* tables x capacity */
    uint32_t *heads; /* tables x 2^bucket_bits */
    sims_design design;
};

/* A table prefix hashed to a bucket. */
static inline uint64_t bucket_of_prefix(const simstore_memindex *ix, uint64_t prefix)
{
    return (prefix * UINT64_C(0x9E3779B97F4A7C15)) >> (64u - ix->bucket_bits);
}

/* The table-t prefix of fp, hashed to a bucket. */
static inline uint64_t bucket_of(const simstore_memindex *ix, unsigned t, uint64_t fp)
{
    const sims_design_table *tab = &ix->design.tables[t];
    return bucket_of_prefix(ix, sims_permute(&tab->permuter, fp) >> (64u - tab->prefix_bits));
}

static unsigned log2_floor(uint64_t v)
{
    unsigned b = 0;
    while (v >>= 1)
        b++;
    return b;
}

/* Link entry i into table t's chain (newest first). */
static inline void link_entry(simstore_memindex *ix, unsigned t, uint32_t i)
{
    uint32_t *heads = ix->heads + ((size_t)t << ix->bucket_bits);
    uint64_t b = bucket_of(ix, t, ix->fps[i]);
    ix->next[(size_t)t * ix->capacity + i] = heads[b];
    heads[b] = i;
}

/* Give the index room for `capacity` entries, choosing its design for that
 * many and rebuilding every chain. On failure the index is unchanged. */
static int memindex_resize(simstore_memindex *ix, uint64_t capacity)
{
    sims_design *d = malloc(sizeof *d);
    if (!d)
        return sims_fail(SIMSTORE_ENOMEM, "memindex: no memory for a design");
    int rc = sims_design_choose(ix->k, capacity, 1.0, &MEMINDEX_MODEL, d);
    if (rc) {
        free(d);
        return rc;
    }
    unsigned bucket_bits = log2_floor(capacity) - LOAD_SHIFT;
    size_t tables = d->n_tables;
    uint64_t *fps = realloc(ix->fps, capacity * sizeof *fps);
    if (fps)
        ix->fps = fps;
    uint64_t *values = fps ? realloc(ix->values, capacity * sizeof *values) : NULL;
    if (values)
        ix->values = values;
    uint32_t *next = malloc(tables * capacity * sizeof *next);
    uint32_t *heads = malloc((tables << bucket_bits) * sizeof *heads);
    if (!fps || !values || !next || !heads) {
        free(next);
        free(heads);
        free(d);
        return sims_fail(SIMSTORE_ENOMEM, "memindex: no memory for %llu entries",
                         (unsigned long long)capacity);
    }
    memset(heads, 0xFF, (tables << bucket_bits) * sizeof *heads);
    free(ix->next);
    free(ix->heads);
    ix->next = next;
    ix->heads = heads;
    ix->capacity = capacity;
    ix->bucket_bits = bucket_bits;
    ix->design = *d;
    free(d);
    for (unsigned t = 0; t < ix->design.n_tables; t++)
        for (uint64_t i = 0; i < ix->count; i++)
            link_entry(ix, t, (uint32_t)i);
    return SIMSTORE_OK;
}

int simstore_memindex_new(unsigned k, uint64_t expected_count, simstore_memindex **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "memindex: out is NULL");
    *out = NULL;
    if (k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_EINVAL, "memindex: k = %u is above %d", k, SIMSTORE_MAX_K);
    if (expected_count > MAX_ENTRIES)
        return sims_fail(SIMSTORE_EFULL, "memindex: expected_count %llu is above %llu",
                         (unsigned long long)expected_count, (unsigned long long)MAX_ENTRIES);
    simstore_memindex *ix = calloc(1, sizeof *ix);
    if (!ix)
        return sims_fail(SIMSTORE_ENOMEM, "memindex: no memory");
    ix->k = k > BEYOND_FROM_K ? BEYOND_DESIGN_K : k; /* the design's k */
    uint64_t capacity = MIN_CAPACITY;
    while (capacity < expected_count)
        capacity *= 2;
    int rc = memindex_resize(ix, capacity);
    if (rc) {
        simstore_memindex_free(ix);
        return rc;
    }
    *out = ix;
    return SIMSTORE_OK;
}

void simstore_memindex_free(simstore_memindex *ix)
{
    if (!ix)
        return;
    free(ix->fps);
    free(ix->values);
    free(ix->next);
    free(ix->heads);
    free(ix);
}

int simstore_memindex_add(simstore_memindex *ix, uint64_t fp, uint64_t value)
{
    if (!ix)
        return sims_fail(SIMSTORE_EINVAL, "memindex: NULL index");
    if (ix->count == ix->capacity) {
        if (ix->count >= MAX_ENTRIES)
            return sims_fail(SIMSTORE_EFULL, "memindex: holds %llu entries, the most it can",
                             (unsigned long long)ix->count);
        uint64_t capacity = ix->capacity * 2 <= MAX_ENTRIES ? ix->capacity * 2 : MAX_ENTRIES;
        int rc = memindex_resize(ix, capacity);
        if (rc)
            return rc;
    }
    uint32_t i = (uint32_t)ix->count++;
    ix->fps[i] = fp;
    ix->values[i] = value;
    for (unsigned t = 0; t < ix->design.n_tables; t++)
        link_entry(ix, t, i);
    return SIMSTORE_OK;
}

/* The first table whose prefix avoids every bit of `diff`. */
static inline unsigned first_clean_table(const sims_design *d, uint64_t diff)
{
    unsigned t = 0;
    while (d->tables[t].prefix_mask & diff)
        t++;
    return t;
}

/* A query above the index's k (format/design.md, "Beyond k"): some table's
 * prefix holds at most `flips` of the differing bits, so each table is
 * probed at the bucket of every prefix within `flips` bits of the query's.
 * An entry is given from the first table whose prefix holds at most `flips`
 * of its differing bits, at the one mask equal to its prefix's difference:
 * once, however many masks share a bucket. */
typedef struct beyond_query {
    const simstore_memindex *ix;
    uint64_t fp;
    unsigned k, flips, t, prefix_bits;
    uint64_t qprefix; /* the query's table-t prefix */
    simstore_memindex_fn fn;
    void *ctx;
} beyond_query;

static unsigned first_table_within(const sims_design *d, uint64_t diff, unsigned flips)
{
    unsigned t = 0;
    while ((unsigned)sims_popcount64(d->tables[t].prefix_mask & diff) > flips)
        t++;
    return t;
}

static int beyond_chain(const beyond_query *b, uint64_t mask)
{
    const simstore_memindex *ix = b->ix;
    const sims_design_table *tab = &ix->design.tables[b->t];
    uint64_t bucket = bucket_of_prefix(ix, b->qprefix ^ mask);
    const uint32_t *next = ix->next + (size_t)b->t * ix->capacity;
    uint32_t i = ix->heads[((size_t)b->t << ix->bucket_bits) + bucket];
    for (; i != NONE; i = next[i]) {
        uint64_t diff = ix->fps[i] ^ b->fp;
        unsigned dist = sims_distance(ix->fps[i], b->fp);
        if (dist > b->k)
            continue;
        uint64_t dprefix = sims_permute(&tab->permuter, diff) >> (64u - b->prefix_bits);
        if (dprefix != mask || first_table_within(&ix->design, diff, b->flips) != b->t)
            continue;
        int stop = b->fn(b->ctx, ix->fps[i], ix->values[i], dist);
        if (stop)
            return stop;
    }
    return 0;
}

/* Every mask of at most `left` more bits below bit `below` added to mask
 * (as sims_design_prefix_masks orders them), each probed. */
static int beyond_masks(const beyond_query *b, uint64_t mask, unsigned below, unsigned left)
{
    int stop = beyond_chain(b, mask);
    for (unsigned bit = 0; !stop && left > 0 && bit < below; bit++)
        stop = beyond_masks(b, mask | (uint64_t)1 << bit, bit, left - 1);
    return stop;
}

static int query_beyond(const simstore_memindex *ix, uint64_t fp, unsigned k,
                        simstore_memindex_fn fn, void *ctx)
{
    const sims_design *d = &ix->design;
    unsigned flips = sims_design_prefix_flips(d, k);
    /* Buckets to visit, each a cache miss or two (~25 ns, MEMINDEX_MODEL),
     * against one pass comparing every entry (under 1 ns each): the pass
     * when it costs less. Both are exact. */
    uint64_t probes = sims_design_probes(d, k);
    if (probes >= ix->count / BEYOND_PASS_RATIO) {
        for (uint64_t i = 0; i < ix->count; i++) {
            unsigned dist = sims_distance(ix->fps[i], fp);
            if (dist > k)
                continue;
            int stop = fn(ctx, ix->fps[i], ix->values[i], dist);
            if (stop)
                return stop;
        }
        return SIMSTORE_OK;
    }
    beyond_query b = {ix, fp, k, flips, 0, 0, 0, fn, ctx};
    for (unsigned t = 0; t < d->n_tables; t++) {
        const sims_design_table *tab = &d->tables[t];
        b.t = t;
        b.prefix_bits = tab->prefix_bits;
        b.qprefix = sims_permute(&tab->permuter, fp) >> (64u - tab->prefix_bits);
        int stop = beyond_masks(&b, 0, tab->prefix_bits, flips);
        if (stop)
            return stop;
    }
    return SIMSTORE_OK;
}

int simstore_memindex_query(const simstore_memindex *ix, uint64_t fp, unsigned k,
                            simstore_memindex_fn fn, void *ctx)
{
    if (!ix || !fn)
        return sims_fail(SIMSTORE_EINVAL, "memindex: NULL index or callback");
    if (k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_ERANGE, "memindex: k = %u is above %d, the largest there is", k,
                         SIMSTORE_MAX_K);
    if (k > ix->k)
        return query_beyond(ix, fp, k, fn, ctx);
    const sims_design *d = &ix->design;
    for (unsigned t = 0; t < d->n_tables; t++) {
        const uint32_t *next = ix->next + (size_t)t * ix->capacity;
        uint32_t i = ix->heads[((size_t)t << ix->bucket_bits) + bucket_of(ix, t, fp)];
        for (; i != NONE; i = next[i]) {
            uint64_t diff = ix->fps[i] ^ fp;
            unsigned dist = sims_distance(ix->fps[i], fp);
            /* Within k, the design's proof gives a clean table at or before
             * t' for some t' (this one, when its prefix is clean). */
            if (dist > k || first_clean_table(d, diff) != t)
                continue;
            int stop = fn(ctx, ix->fps[i], ix->values[i], dist);
            if (stop)
                return stop;
        }
    }
    return SIMSTORE_OK;
}

typedef struct nearest_state {
    int found;
    simstore_memindex_match best;
} nearest_state;

static int keep_nearest(void *ctx, uint64_t fp, uint64_t value, unsigned distance)
{
    nearest_state *st = (nearest_state *)ctx;
    if (!st->found || distance < st->best.distance ||
        (distance == st->best.distance && value < st->best.value)) {
        st->found = 1;
        st->best.fp = fp;
        st->best.value = value;
        st->best.distance = distance;
    }
    return 0;
}

int simstore_memindex_nearest(const simstore_memindex *ix, uint64_t fp, unsigned k,
                              simstore_memindex_match *out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "memindex: out is NULL");
    nearest_state st = {0, {0, 0, 0}};
    int rc = simstore_memindex_query(ix, fp, k, keep_nearest, &st);
    if (rc)
        return rc;
    if (st.found)
        *out = st.best;
    return st.found;
}

uint64_t simstore_memindex_count(const simstore_memindex *ix)
{
    return ix ? ix->count : 0;
}

unsigned simstore_memindex_tables(const simstore_memindex *ix)
{
    return ix ? ix->design.n_tables : 0;
}

uint64_t simstore_memindex_bytes(const simstore_memindex *ix)
{
    if (!ix)
        return 0;
    uint64_t tables = ix->design.n_tables;
    return sizeof *ix + ix->capacity * (sizeof *ix->fps + sizeof *ix->values) +
           tables * ix->capacity * sizeof *ix->next +
           (tables << ix->bucket_bits) * sizeof *ix->heads;
}
