/* recsort.c: the spilling (key, value) record sorter. A run is an arena of
 * records plus an index of (8-byte key prefix, offset) pairs sorted with
 * qsort_r; spilled runs are unlinked temporary files holding the records in
 * order, merged through a binary heap. Run files hold native-endian headers
 * and are never part of a store. */
#include "sort/recsort.h"
#include "sort/merge.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC_HEADER_BYTES 16u /* key_len u32, val_len u32, seq u64 */
#define MIN_BUDGET (1u << 20)
#define WRITE_BUF_BYTES (1u << 20)

typedef struct rec_index {
    uint64_t prefix; /* first 8 key bytes, big-endian, zero padded */
    uint64_t offset; /* of the record header in the arena */
} rec_index;

typedef struct rec_source {
    int fd; /* -1: the in-memory run */
    uint64_t file_size;
    uint64_t file_pos;
    uint8_t *buf;
    size_t buf_cap;
    size_t buf_len;
    size_t buf_pos;
    size_t mem_pos; /* in-memory run: next index entry */
    sims_rec head;
} rec_source;

struct sims_recsort {
    uint8_t *arena;
    size_t arena_cap;
    size_t arena_used;
    rec_index *index;
    size_t index_len;
    size_t index_cap;
    size_t budget;
    uint64_t count;
    char *tmp_dir;
    rec_source *sources;
    unsigned nsources;
    unsigned spilled;
    unsigned *heap;
    unsigned heap_len;
    int finished;
    int primed; /* the heap's top was already handed out and must advance */
};

static uint64_t key_prefix(const uint8_t *k, uint32_t n)
{
    uint8_t b[8] = {0};
    memcpy(b, k, n < 8 ? n : 8);
    return be_load64(b);
}

static void rec_at(const uint8_t *p, sims_rec *r)
{
    uint32_t kl, vl;
    uint64_t seq;
    memcpy(&kl, p, 4);
    memcpy(&vl, p + 4, 4);
    memcpy(&seq, p + 8, 8);
    r->key_len = kl;
    r->val_len = vl;
    r->seq = seq;
    r->key = p + REC_HEADER_BYTES;
    r->val = r->key + kl;
}

static int rec_cmp(const sims_rec *a, const sims_rec *b)
{
    uint32_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = n ? memcmp(a->key, b->key, n) : 0;
    if (c)
        return c;
    if (a->key_len != b->key_len)
        return a->key_len < b->key_len ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

static int index_cmp(const void *x, const void *y, void *arena)
{
    const rec_index *a = (const rec_index *)x, *b = (const rec_index *)y;
    if (a->prefix != b->prefix)
        return a->prefix < b->prefix ? -1 : 1;
    sims_rec ra, rb;
    rec_at((const uint8_t *)arena + a->offset, &ra);
    rec_at((const uint8_t *)arena + b->offset, &rb);
    return rec_cmp(&ra, &rb);
}

int sims_recsort_new(size_t budget_bytes, const char *tmp_dir, sims_recsort **out)
{
    *out = NULL;
    sims_recsort *s = calloc(1, sizeof *s);
    if (!s)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a sorter");
    s->budget = budget_bytes < MIN_BUDGET ? MIN_BUDGET : budget_bytes;
    s->tmp_dir = strdup(sims_scratch_dir(tmp_dir));
    s->arena_cap = 1u << 16;
    s->arena = malloc(s->arena_cap);
    if (!s->tmp_dir || !s->arena) {
        sims_recsort_free(s);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a sorter");
    }
    *out = s;
    return SIMSTORE_OK;
}

static void sort_run(sims_recsort *s)
{
    if (s->index_len > 1)
        qsort_r(s->index, s->index_len, sizeof *s->index, index_cmp, s->arena);
}

static int spill_run(sims_recsort *s)
{
    sort_run(s);
    uint8_t *wbuf = malloc(WRITE_BUF_BYTES);
    int fd = -1, rc = SIMSTORE_OK;
    if (!wbuf) {
        rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
        goto done;
    }
    rc = sims_tmpfile_unlinked(s->tmp_dir, "recrun", &fd);
    if (rc)
        goto done;
    size_t used = 0;
    uint64_t size = 0;
    for (size_t i = 0; i < s->index_len && rc == SIMSTORE_OK; i++) {
        const uint8_t *p = s->arena + s->index[i].offset;
        sims_rec r;
        rec_at(p, &r);
        size_t len = REC_HEADER_BYTES + r.key_len + r.val_len;
        if (len > WRITE_BUF_BYTES - used) {
            rc = sims_write_all(fd, wbuf, used, "sort run");
            used = 0;
        }
        if (rc == SIMSTORE_OK && len > WRITE_BUF_BYTES)
            rc = sims_write_all(fd, p, len, "sort run");
        else if (rc == SIMSTORE_OK) {
            memcpy(wbuf + used, p, len);
            used += len;
        }
        size += len;
    }
    if (rc == SIMSTORE_OK && used)
        rc = sims_write_all(fd, wbuf, used, "sort run");
    if (rc == SIMSTORE_OK) {
        rec_source src = {.fd = fd, .file_size = size};
        rc = sims_merge_add_run((void **)&s->sources, &s->nsources, &src, sizeof src);
    }
    if (rc == SIMSTORE_OK) {
        fd = -1;
        s->spilled++;
        s->arena_used = 0;
        s->index_len = 0;
    }
done:
    if (fd >= 0)
        close(fd);
    free(wbuf);
    return rc;
}

int sims_recsort_push(sims_recsort *s, const void *key, uint32_t key_len, const void *val,
                      uint32_t val_len)
{
    return sims_recsort_push_seq(s, key, key_len, val, val_len, s->count);
}

int sims_recsort_push_seq(sims_recsort *s, const void *key, uint32_t key_len, const void *val,
                          uint32_t val_len, uint64_t seq)
{
    if (s->finished)
        return sims_fail(SIMSTORE_EINVAL, "push after finish");
    size_t len = REC_HEADER_BYTES + (size_t)key_len + val_len;
    size_t in_use = s->arena_used + s->index_len * sizeof *s->index;
    if (s->index_len > 0 && in_use + len + sizeof *s->index > s->budget) {
        int rc = spill_run(s);
        if (rc)
            return rc;
    }
    if (sims_grow_bytes(&s->arena, &s->arena_cap, s->arena_used, len, 1u << 16) ||
        sims_grow((void **)&s->index, &s->index_cap, s->index_len + 1, sizeof *s->index, 4096))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory buffering records");
    uint8_t *p = s->arena + s->arena_used;
    s->count++;
    memcpy(p, &key_len, 4);
    memcpy(p + 4, &val_len, 4);
    memcpy(p + 8, &seq, 8);
    if (key_len)
        memcpy(p + REC_HEADER_BYTES, key, key_len);
    if (val_len)
        memcpy(p + REC_HEADER_BYTES + key_len, val, val_len);
    s->index[s->index_len].prefix = key_prefix((const uint8_t *)key, key_len);
    s->index[s->index_len].offset = s->arena_used;
    s->index_len++;
    s->arena_used += len;
    return SIMSTORE_OK;
}

/* Load the next record of a source into its head; 0 ok, 1 exhausted, <0 error. */
static int source_advance(sims_recsort *s, rec_source *r)
{
    if (r->fd < 0) {
        if (r->mem_pos >= s->index_len)
            return 1;
        rec_at(s->arena + s->index[r->mem_pos++].offset, &r->head);
        return 0;
    }
    for (;;) {
        size_t have = r->buf_len - r->buf_pos;
        if (have >= REC_HEADER_BYTES) {
            sims_rec h;
            rec_at(r->buf + r->buf_pos, &h);
            size_t len = REC_HEADER_BYTES + (size_t)h.key_len + h.val_len;
            if (have >= len) {
                r->head = h;
                r->buf_pos += len;
                return 0;
            }
            if (len > r->buf_cap) {
                uint8_t *g = realloc(r->buf, len);
                if (!g)
                    return sims_fail(SIMSTORE_ENOMEM, "out of memory merging records");
                r->buf = g;
                r->buf_cap = len;
            }
        }
        if (r->file_pos >= r->file_size) {
            if (have)
                return sims_fail(SIMSTORE_EIO, "sort run ends inside a record");
            return 1;
        }
        memmove(r->buf, r->buf + r->buf_pos, have);
        r->buf_len = have;
        r->buf_pos = 0;
        size_t want = r->buf_cap - have;
        if (want > r->file_size - r->file_pos)
            want = (size_t)(r->file_size - r->file_pos);
        ssize_t k = pread(r->fd, r->buf + have, want, (off_t)r->file_pos);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? sims_fail_errno("read sort run")
                         : sims_fail(SIMSTORE_EIO, "sort run shorter than written");
        r->file_pos += (uint64_t)k;
        r->buf_len += (size_t)k;
    }
}

/* The merge order: run a's head before run b's (merge.h). */
static int run_less(const void *ctx, unsigned a, unsigned b)
{
    const sims_recsort *s = (const sims_recsort *)ctx;
    return rec_cmp(&s->sources[a].head, &s->sources[b].head) < 0;
}

int sims_recsort_finish(sims_recsort *s, size_t keep_bytes)
{
    if (s->finished)
        return SIMSTORE_OK;
    size_t in_memory = s->arena_used + s->index_len * sizeof *s->index;
    if (s->index_len > 0 && s->spilled > 0 && in_memory > keep_bytes / 2) {
        /* Too big to keep beside the merge: the last run goes to disk too. */
        int rc = spill_run(s);
        if (rc)
            return rc;
    }
    s->finished = 1;
    sort_run(s);
    if (s->index_len > 0) {
        rec_source src = {.fd = -1};
        int rc = sims_merge_add_run((void **)&s->sources, &s->nsources, &src, sizeof src);
        if (rc)
            return rc;
    } else {
        free(s->arena);
        free(s->index);
        s->arena = NULL;
        s->index = NULL;
        s->arena_cap = s->index_cap = 0;
    }
    size_t per = s->spilled ? keep_bytes / 2 / s->spilled : 0;
    if (per < (64u << 10))
        per = 64u << 10;
    for (unsigned i = 0; i < s->nsources; i++) {
        rec_source *r = &s->sources[i];
        if (r->fd < 0)
            continue;
        r->buf = malloc(per);
        if (!r->buf)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for merge buffers");
        r->buf_cap = per;
    }
    s->heap = malloc((s->nsources ? s->nsources : 1) * sizeof *s->heap);
    if (!s->heap)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for the merge heap");
    return sims_recsort_rewind(s);
}

int sims_recsort_rewind(sims_recsort *s)
{
    if (!s->finished)
        return sims_fail(SIMSTORE_EINVAL, "rewind before finish");
    s->heap_len = 0;
    s->primed = 0;
    for (unsigned i = 0; i < s->nsources; i++) {
        rec_source *r = &s->sources[i];
        r->file_pos = 0;
        r->buf_len = r->buf_pos = 0;
        r->mem_pos = 0;
        int rc = source_advance(s, r);
        if (rc < 0)
            return rc;
        if (rc == 0)
            s->heap[s->heap_len++] = i;
    }
    sims_merge_heapify(s->heap, s->heap_len, run_less, s);
    return SIMSTORE_OK;
}

int sims_recsort_next(sims_recsort *s, sims_rec *rec)
{
    if (!s->finished)
        return sims_fail(SIMSTORE_EINVAL, "read before finish");
    /* The record handed out last time lives in its source's buffer: advance
     * that source only now, so the borrowed pointers stayed valid. */
    if (s->primed) {
        s->primed = 0;
        int rc = source_advance(s, &s->sources[s->heap[0]]);
        if (rc < 0)
            return rc;
        s->heap_len = sims_merge_next(s->heap, s->heap_len, rc == 1, run_less, s);
    }
    if (s->heap_len == 0)
        return 0;
    *rec = s->sources[s->heap[0]].head;
    s->primed = 1;
    return 1;
}

uint64_t sims_recsort_count(const sims_recsort *s)
{
    return s->count;
}

unsigned sims_recsort_spilled_runs(const sims_recsort *s)
{
    return s->spilled;
}

void sims_recsort_free(sims_recsort *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < s->nsources; i++) {
        if (s->sources[i].fd >= 0)
            close(s->sources[i].fd);
        free(s->sources[i].buf);
    }
    free(s->sources);
    free(s->heap);
    free(s->arena);
    free(s->index);
    free(s->tmp_dir);
    free(s);
}
