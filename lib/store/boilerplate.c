/* boilerplate.c: a corpus's boilerplate lines, counted exactly in bounded
 * memory (simstore_boilerplate_counter: every document's distinct line keys
 * go into a spilling sorter, whose sorted stream gives each key's document
 * count as the length of its run), and a store's boilerplate record: read at
 * open, encoded for the build that records it (format/store.md). */
#include "store/store_internal.h"

#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"
#include "lmdb/boilerplate_record.h"
#include "sort/u64sort.h"
#include "text/boilerplate.h"

#include <stdlib.h>
#include <string.h>

/* ---- the counter ----------------------------------------------------------- */

#define MIN_COUNTER_BYTES ((uint64_t)16 << 10)
#define READ_VALUES 4096

struct simstore_boilerplate_counter {
    simstore_fingerprinter *fpr; /* keys the texts of counter_add */
    uint32_t millionths;
    uint64_t min_documents;
    sims_u64sort *sort; /* every document's distinct keys */
    uint64_t documents;
    uint64_t *scratch; /* add_keys: a copy to sort when not increasing */
    size_t scratch_cap;
    int finished; /* the sorter is finished: no more documents */
    int made_set; /* counter_finish was called */
};

int simstore_boilerplate_counter_new(const simstore_text_options *text,
                                     const simstore_boilerplate_options *o,
                                     simstore_boilerplate_counter **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_boilerplate_counter_new: out is NULL");
    *out = NULL;
    if (SIMS_CHECK_OPTIONS(text, simstore_text_options) ||
        SIMS_CHECK_OPTIONS(o, simstore_boilerplate_options))
        return SIMSTORE_EINVAL;
    simstore_boilerplate_options defaults;
    if (!o) {
        simstore_boilerplate_options_init(&defaults);
        o = &defaults;
    }
    uint32_t millionths = 0;
    int rc = sims_boilerplate_millionths(o->fraction, &millionths);
    if (rc)
        return rc;
    simstore_boilerplate_counter *c = calloc(1, sizeof *c);
    if (!c)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a boilerplate counter");
    c->millionths = millionths;
    c->min_documents = o->min_documents;
    uint64_t memory = o->memory_bytes > MIN_COUNTER_BYTES ? o->memory_bytes : MIN_COUNTER_BYTES;
    uint64_t run_values = memory / 16; /* the run and its radix scratch */
    if (run_values > SIZE_MAX / 16)
        run_values = SIZE_MAX / 16;
    const char *tmp = sims_scratch_dir(o->tmp_dir);
    rc = simstore_fingerprinter_new(text, &c->fpr);
    if (rc == SIMSTORE_OK)
        rc = sims_u64sort_new((size_t)run_values, tmp, &c->sort);
    if (rc) {
        simstore_boilerplate_counter_free(c);
        return rc;
    }
    *out = c;
    return SIMSTORE_OK;
}

void simstore_boilerplate_counter_free(simstore_boilerplate_counter *c)
{
    if (!c)
        return;
    simstore_fingerprinter_free(c->fpr);
    sims_u64sort_free(c->sort);
    free(c->scratch);
    free(c);
}

unsigned sims_boilerplate_counter_spilled_runs(const simstore_boilerplate_counter *c)
{
    return sims_u64sort_spilled_runs(c->sort);
}

uint64_t simstore_boilerplate_counter_documents(const simstore_boilerplate_counter *c)
{
    return c ? c->documents : 0;
}

int simstore_boilerplate_counter_add_keys(simstore_boilerplate_counter *c, const uint64_t *keys,
                                          size_t n)
{
    if (!c || (!keys && n))
        return sims_fail(SIMSTORE_EINVAL, "simstore_boilerplate_counter_add_keys: NULL argument");
    if (c->finished)
        return sims_fail(SIMSTORE_EINVAL, "boilerplate counter: a document after finish");
    int increasing = 1;
    for (size_t i = 1; i < n && increasing; i++)
        increasing = keys[i - 1] < keys[i];
    if (!increasing) {
        /* Each key counts once per document. */
        if (sims_grow((void **)&c->scratch, &c->scratch_cap, n, sizeof *c->scratch, 256))
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for line keys");
        memcpy(c->scratch, keys, n * sizeof *keys);
        qsort(c->scratch, n, sizeof *c->scratch, sims_cmp_u64);
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
            if (w == 0 || c->scratch[i] != c->scratch[w - 1])
                c->scratch[w++] = c->scratch[i];
        n = w;
        keys = c->scratch;
    }
    int rc = sims_u64sort_push(c->sort, keys, n);
    if (rc)
        return rc;
    c->documents++;
    return SIMSTORE_OK;
}

int simstore_boilerplate_counter_add(simstore_boilerplate_counter *c, const char *text, size_t len)
{
    if (!c || (!text && len))
        return sims_fail(SIMSTORE_EINVAL, "simstore_boilerplate_counter_add: NULL argument");
    const uint64_t *keys;
    size_t n;
    int rc = simstore_fingerprinter_line_keys(c->fpr, text, len, &keys, &n);
    return rc ? rc : simstore_boilerplate_counter_add_keys(c, keys, n);
}

/* The rule of format/fingerprint.md: at least min_documents documents, and
 * a key held by at least 2 of them and by more than the fraction, exactly:
 * df * 10^6 > millionths * N in 128 bits. */
static int is_boilerplate(const simstore_boilerplate_counter *c, uint64_t df)
{
    simstore_boilerplate_info info;
    simstore_boilerplate_counter_info(c, &info);
    return simstore_boilerplate_is_line(&info, df);
}

/* Hand every key's document count (the length of its run in the sorted
 * stream) to fn, keys increasing: the sorter finished on the first walk,
 * rewound on the next. */
static int walk_counts(simstore_boilerplate_counter *c, simstore_line_count_fn fn, void *ctx)
{
    int rc = c->finished ? sims_u64sort_rewind(c->sort) : sims_u64sort_finish(c->sort, 0);
    c->finished = 1;
    uint64_t *buf = malloc(READ_VALUES * sizeof *buf);
    if (!buf && rc == SIMSTORE_OK)
        rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
    uint64_t key = 0, df = 0;
    while (rc == SIMSTORE_OK) {
        size_t n = 0;
        rc = sims_u64sort_read(c->sort, buf, READ_VALUES, &n);
        for (size_t i = 0; i < n && rc == SIMSTORE_OK; i++) {
            if (df > 0 && buf[i] == key) {
                df++;
                continue;
            }
            if (df > 0)
                rc = fn(ctx, key, df);
            key = buf[i];
            df = 1;
        }
        if (rc == SIMSTORE_OK && n == 0) {
            if (df > 0)
                rc = fn(ctx, key, df);
            break;
        }
    }
    free(buf);
    return rc;
}

void simstore_boilerplate_counter_info(const simstore_boilerplate_counter *c,
                                       simstore_boilerplate_info *out)
{
    memset(out, 0, sizeof *out);
    out->fraction_millionths = c->millionths;
    out->fraction = c->millionths / 1e6;
    out->min_documents = c->min_documents;
    out->documents = c->documents;
}

int simstore_boilerplate_is_line(const simstore_boilerplate_info *info, uint64_t df)
{
    __extension__ typedef unsigned __int128 u128;
    return info->documents >= info->min_documents && df >= 2 &&
           (u128)df * 1000000u > (u128)info->fraction_millionths * info->documents;
}

int simstore_boilerplate_counter_each(simstore_boilerplate_counter *c, simstore_line_count_fn fn,
                                      void *ctx)
{
    if (!c || !fn)
        return sims_fail(SIMSTORE_EINVAL, "simstore_boilerplate_counter_each: NULL argument");
    return walk_counts(c, fn, ctx);
}

typedef struct found_keys {
    const simstore_boilerplate_counter *c;
    uint64_t *v;
    size_t n, cap;
} found_keys;

static int keep_boilerplate(void *ctx, uint64_t key, uint64_t df)
{
    found_keys *f = (found_keys *)ctx;
    if (!is_boilerplate(f->c, df))
        return SIMSTORE_OK;
    if (sims_grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v, 64))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for boilerplate lines");
    f->v[f->n++] = key;
    return SIMSTORE_OK;
}

int simstore_boilerplate_counter_finish(simstore_boilerplate_counter *c, simstore_boilerplate **out)
{
    if (!c || !out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_boilerplate_counter_finish: NULL argument");
    *out = NULL;
    if (c->made_set)
        return sims_fail(SIMSTORE_EINVAL, "boilerplate counter: finished twice");
    c->made_set = 1;
    found_keys f = {c, NULL, 0, 0};
    int rc = walk_counts(c, keep_boilerplate, &f);
    if (rc == SIMSTORE_OK) {
        simstore_boilerplate_info info = {0};
        info.fraction = c->millionths / 1e6;
        info.min_documents = c->min_documents;
        info.documents = c->documents;
        rc = simstore_boilerplate_new(f.v, f.n, &info, out);
    }
    free(f.v);
    return rc;
}

/* ---- the store's record ---------------------------------------------------- */

int sims_store_load_boilerplate(simstore *s, MDB_txn *txn)
{
    s->boilerplate = NULL;
    MDB_val val;
    int rc = sims_store_get_record(s, txn, SIMS_BOILERPLATE_RECORD_KEY, &val);
    if (rc)
        return rc == 1 ? SIMSTORE_OK : rc;
    sims_boilerplate_record r;
    rc = sims_boilerplate_record_decode((const uint8_t *)val.mv_data, val.mv_size, &r);
    if (rc)
        return sims_fail_context(rc, "%s", s->path);
    uint64_t *keys = NULL;
    if (r.line_count && !(keys = malloc((size_t)r.line_count * sizeof *keys)))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for %llu boilerplate lines",
                         (unsigned long long)r.line_count);
    for (uint64_t i = 0; i < r.line_count; i++)
        keys[i] = sims_boilerplate_record_key(&r, i);
    simstore_boilerplate_info info = {0};
    info.fraction = r.fraction_millionths / 1e6;
    info.min_documents = r.min_documents;
    info.documents = r.documents;
    rc = simstore_boilerplate_new(keys, (size_t)r.line_count, &info, &s->boilerplate);
    free(keys);
    return rc;
}

const simstore_boilerplate *simstore_get_boilerplate(const simstore *s)
{
    return s ? s->boilerplate : NULL;
}

int sims_boilerplate_encode(const simstore_boilerplate *bp, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    simstore_boilerplate_info info;
    simstore_boilerplate_get_info(bp, &info);
    sims_boilerplate_record r = {
        .version = SIMS_BOILERPLATE_RECORD_VERSION,
        .fraction_millionths = info.fraction_millionths,
        .min_documents = info.min_documents,
        .documents = info.documents,
        .line_count = info.lines,
    };
    size_t n = sims_boilerplate_record_size(info.lines);
    uint8_t *buf = n ? malloc(n) : NULL;
    if (!buf)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for the boilerplate record");
    sims_boilerplate_record_encode(&r, simstore_boilerplate_keys(bp), buf, n);
    *out = buf;
    *len = n;
    return SIMSTORE_OK;
}
