/* u64sort.c: LSD radix sort of 64-bit values and a spilling run sorter with a
 * heap merge. Run files are unlinked as soon as they are created, so a crash
 * leaves nothing behind; they hold raw native-endian values and are never part
 * of a store. */
#include "sort/u64sort.h"
#include "sort/merge.h"

#include "common/error.h"
#include "common/grow.h"
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RADIX_BITS 11
#define RADIX_SIZE (1u << RADIX_BITS)

/* Sort v[0..n) by bits low..63 by insertion: for a few values. */
static void insertion_from(uint64_t *v, size_t n, unsigned low)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] >> low > x >> low; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Sort v[0..n) by bits low..63 (the digits from bit `low` up), tmp as
 * scratch (LSD radix); values equal in those bits in no particular order. */
static void radix_from(uint64_t *v, uint64_t *tmp, size_t n, unsigned low)
{
    if (n < 2)
        return;
    if (n <= 64) {
        insertion_from(v, n, low);
        return;
    }
    /* One counting pass for all digits. The counters are 96 KiB: too much
     * for small thread stacks, negligible beside a run's allocation. */
    unsigned passes = (64 - low + RADIX_BITS - 1) / RADIX_BITS;
    size_t(*count)[RADIX_SIZE] = calloc(passes, sizeof *count);
    if (!count) {
        qsort(v, n, sizeof *v, sims_cmp_u64); /* sorted whole: also by bits low..63 */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t x = v[i];
        for (unsigned p = 0; p < passes; p++)
            count[p][(x >> (low + p * RADIX_BITS)) & (RADIX_SIZE - 1)]++;
    }
    uint64_t *src = v, *dst = tmp;
    for (unsigned p = 0; p < passes; p++) {
        size_t *c = count[p];
        unsigned shift = low + p * RADIX_BITS;
        /* Skip a pass when every value has the same digit. */
        if (c[(src[0] >> shift) & (RADIX_SIZE - 1)] == n)
            continue;
        size_t sum = 0;
        for (unsigned d = 0; d < RADIX_SIZE; d++) {
            size_t t = c[d];
            c[d] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++) {
            uint64_t x = src[i];
            dst[c[(x >> shift) & (RADIX_SIZE - 1)]++] = x;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
    free(count);
}

void sims_radix_sort_u64(uint64_t *v, uint64_t *tmp, size_t n)
{
    radix_from(v, tmp, n, 0);
}

void sims_radix_sort_u64_top(uint64_t *v, uint64_t *tmp, size_t n, unsigned bits)
{
    if (bits == 0)
        return;
    radix_from(v, tmp, n, bits >= 64 ? 0 : 64 - bits);
}

/* Groups of at most SMALL_GROUP values sharing their top bits are sorted by
 * insertion (a few moves a value), of at most MID_GROUP by qsort (a radix
 * sort would zero its 96 KiB of counters for each), larger ones by the
 * whole radix sort. */
#define SMALL_GROUP 32
#define MID_GROUP 4096

void sims_radix_sort_u64_grouped(uint64_t *v, uint64_t *tmp, size_t n, unsigned bits)
{
    if (bits == 0 || bits >= 64 || n <= 64) {
        radix_from(v, tmp, n, 0);
        return;
    }
    unsigned low = 64 - bits;
    radix_from(v, tmp, n, low);
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        uint64_t top = v[lo] >> low;
        for (hi = lo + 1; hi < n && v[hi] >> low == top; hi++)
            ;
        size_t m = hi - lo;
        if (m > MID_GROUP) {
            radix_from(v + lo, tmp + lo, m, 0);
            continue;
        }
        if (m > SMALL_GROUP) {
            qsort(v + lo, m, sizeof *v, sims_cmp_u64);
            continue;
        }
        insertion_from(v + lo, m, 0);
    }
}

/* ---- spilling sorter ----------------------------------------------------- */

typedef struct run_source {
    int fd;          /* -1 for the in-memory run */
    uint64_t length; /* values in the run */
    uint64_t next;   /* index of the next value to load into buf */
    const uint64_t *mem;
    uint64_t *buf; /* read buffer (file runs) */
    size_t buf_cap;
    size_t buf_len;
    size_t buf_pos;
    uint64_t head; /* current smallest unread value */
} run_source;

struct sims_u64sort {
    uint64_t *run;
    uint64_t *tmp;
    size_t run_cap; /* values run and tmp hold now */
    size_t run_max; /* values a run may reach before it spills */
    size_t run_len;
    char *tmp_dir;
    run_source *sources;
    unsigned nsources;
    unsigned spilled;
    int finished;
    int unique;
    /* merge state */
    unsigned *heap; /* indexes into sources, ordered by head */
    unsigned heap_len;
    int have_last;
    uint64_t last;
    /* in-memory state (no spills) */
    size_t mem_pos;
};

/* Values a new sorter's run holds before it first grows. */
#define RUN_START ((size_t)1 << 16)

int sims_u64sort_new(size_t run_values, const char *tmp_dir, sims_u64sort **out)
{
    *out = NULL;
    if (run_values < 1024)
        run_values = 1024;
    sims_u64sort *s = calloc(1, sizeof *s);
    if (!s)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a sorter");
    /* The run starts small and doubles up to run_values as values come:
     * a table of a few hundred values (a live store's flush) costs kilobytes,
     * not the build's whole sort budget. */
    s->run_max = run_values;
    s->run_cap = run_values < RUN_START ? run_values : RUN_START;
    s->run = malloc(s->run_cap * sizeof *s->run);
    s->tmp = malloc(s->run_cap * sizeof *s->tmp);
    s->tmp_dir = strdup(sims_scratch_dir(tmp_dir));
    if (!s->run || !s->tmp || !s->tmp_dir) {
        sims_u64sort_free(s);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a sort run of %zu values", run_values);
    }
    *out = s;
    return SIMSTORE_OK;
}

/* Doubles the run (up to run_max); 1 when it grew. Where memory is short it
 * stays as it is and the caller spills a smaller run, which is still
 * correct. */
static int grow_run(sims_u64sort *s)
{
    if (s->run_cap >= s->run_max)
        return 0;
    size_t cap = s->run_cap > s->run_max / 2 ? s->run_max : 2 * s->run_cap;
    uint64_t *run = realloc(s->run, cap * sizeof *run);
    if (!run)
        return 0;
    s->run = run;
    uint64_t *tmp = malloc(cap * sizeof *tmp);
    if (!tmp)
        return 0; /* run has room to spare; run_cap stays what tmp holds */
    free(s->tmp);
    s->tmp = tmp;
    s->run_cap = cap;
    return 1;
}

static int spill_run(sims_u64sort *s)
{
    sims_radix_sort_u64(s->run, s->tmp, s->run_len);
    int fd;
    int rc = sims_tmpfile_unlinked(s->tmp_dir, "sortrun", &fd);
    if (rc)
        return rc;
    rc = sims_write_all(fd, s->run, s->run_len * sizeof *s->run, "sort run");
    if (rc == SIMSTORE_OK) {
        run_source src = {.fd = fd, .length = s->run_len};
        rc = sims_merge_add_run((void **)&s->sources, &s->nsources, &src, sizeof src);
    }
    if (rc != SIMSTORE_OK) {
        close(fd);
        return rc;
    }
    s->spilled++;
    s->run_len = 0;
    return SIMSTORE_OK;
}

int sims_u64sort_push(sims_u64sort *s, const uint64_t *v, size_t n)
{
    if (s->finished)
        return sims_fail(SIMSTORE_EINVAL, "push after finish");
    while (n > 0) {
        size_t take = s->run_cap - s->run_len;
        if (take > n)
            take = n;
        memcpy(s->run + s->run_len, v, take * sizeof *v);
        s->run_len += take;
        v += take;
        n -= take;
        if (s->run_len == s->run_cap && !grow_run(s)) {
            int rc = spill_run(s);
            if (rc)
                return rc;
        }
    }
    return SIMSTORE_OK;
}

static size_t dedupe(uint64_t *v, size_t n)
{
    if (n == 0)
        return 0;
    size_t w = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[w - 1])
            v[w++] = v[i];
    return w;
}

int sims_u64sort_finish(sims_u64sort *s, int unique)
{
    if (s->finished)
        return SIMSTORE_OK;
    s->finished = 1;
    s->unique = unique;
    sims_radix_sort_u64(s->run, s->tmp, s->run_len);
    if (s->nsources == 0) {
        if (unique)
            s->run_len = dedupe(s->run, s->run_len);
        free(s->tmp);
        s->tmp = NULL;
        return sims_u64sort_rewind(s);
    }
    /* The last run stays in memory as one more merge source; the scratch
     * array becomes the file runs' read buffers. */
    if (s->run_len > 0) {
        run_source src = {.fd = -1, .length = s->run_len, .mem = s->run};
        int rc = sims_merge_add_run((void **)&s->sources, &s->nsources, &src, sizeof src);
        if (rc)
            return rc;
    }
    size_t per = s->run_cap / (s->nsources ? s->nsources : 1);
    if (per < 512) {
        /* Too many runs for the scratch space: give each a small buffer. */
        per = 512;
        free(s->tmp);
        s->tmp = malloc((size_t)s->nsources * per * sizeof *s->tmp);
        if (!s->tmp)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for merge buffers");
    }
    for (unsigned i = 0; i < s->nsources; i++) {
        s->sources[i].buf = s->tmp + (size_t)i * per;
        s->sources[i].buf_cap = per;
    }
    s->heap = malloc(s->nsources * sizeof *s->heap);
    if (!s->heap)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for the merge heap");
    return sims_u64sort_rewind(s);
}

/* Load the next value of a source into head; 0 = has a value, 1 = exhausted. */
static int source_advance(run_source *r, int *err)
{
    if (r->fd < 0) {
        if (r->next >= r->length)
            return 1;
        r->head = r->mem[r->next++];
        return 0;
    }
    if (r->buf_pos == r->buf_len) {
        if (r->next >= r->length)
            return 1;
        uint64_t want = r->length - r->next;
        if (want > r->buf_cap)
            want = r->buf_cap;
        int rc = sims_pread_all(r->fd, r->buf, (size_t)want * sizeof(uint64_t),
                                r->next * sizeof(uint64_t), "sort run");
        if (rc) {
            *err = rc;
            return 1;
        }
        r->next += want;
        r->buf_len = (size_t)want;
        r->buf_pos = 0;
    }
    r->head = r->buf[r->buf_pos++];
    return 0;
}

/* The merge order: run a's head before run b's (merge.h). */
static int run_less(const void *ctx, unsigned a, unsigned b)
{
    const sims_u64sort *s = (const sims_u64sort *)ctx;
    return s->sources[a].head < s->sources[b].head;
}

int sims_u64sort_rewind(sims_u64sort *s)
{
    if (!s->finished)
        return sims_fail(SIMSTORE_EINVAL, "rewind before finish");
    s->mem_pos = 0;
    s->have_last = 0;
    if (s->nsources == 0)
        return SIMSTORE_OK;
    s->heap_len = 0;
    int err = SIMSTORE_OK;
    for (unsigned i = 0; i < s->nsources; i++) {
        run_source *r = &s->sources[i];
        r->next = 0;
        r->buf_len = r->buf_pos = 0;
        if (source_advance(r, &err) == 0)
            s->heap[s->heap_len++] = i;
        if (err)
            return err;
    }
    sims_merge_heapify(s->heap, s->heap_len, run_less, s);
    return SIMSTORE_OK;
}

int sims_u64sort_read(sims_u64sort *s, uint64_t *out, size_t cap, size_t *n)
{
    *n = 0;
    if (!s->finished)
        return sims_fail(SIMSTORE_EINVAL, "read before finish");
    if (s->nsources == 0) {
        size_t left = s->run_len - s->mem_pos;
        size_t take = left < cap ? left : cap;
        memcpy(out, s->run + s->mem_pos, take * sizeof *out);
        s->mem_pos += take;
        *n = take;
        return SIMSTORE_OK;
    }
    size_t w = 0;
    int err = SIMSTORE_OK;
    while (w < cap && s->heap_len > 0) {
        run_source *r = &s->sources[s->heap[0]];
        uint64_t v = r->head;
        if (!(s->unique && s->have_last && v == s->last)) {
            out[w++] = v;
            s->last = v;
            s->have_last = 1;
        }
        int exhausted = source_advance(r, &err);
        if (err)
            return err;
        s->heap_len = sims_merge_next(s->heap, s->heap_len, exhausted, run_less, s);
    }
    *n = w;
    return SIMSTORE_OK;
}

unsigned sims_u64sort_spilled_runs(const sims_u64sort *s)
{
    return s->spilled;
}

void sims_u64sort_free(sims_u64sort *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->nsources; i++)
        if (s->sources[i].fd >= 0)
            close(s->sources[i].fd);
    free(s->sources);
    free(s->heap);
    free(s->run);
    free(s->tmp);
    free(s->tmp_dir);
    free(s);
}
