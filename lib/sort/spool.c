/* spool.c: memory-then-file value spool. The file holds native-endian values
 * and is unlinked at creation: it never outlives the process. */
#include "sort/spool.h"

#include "common/error.h"
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPOOL_WRITE_VALUES (1u << 16)

struct sims_spool {
    uint64_t *mem;
    size_t mem_cap;   /* the limit */
    size_t mem_alloc; /* allocated so far (grows geometrically) */
    size_t mem_len;
    int fd;
    uint64_t file_values;
    uint64_t *wbuf;
    size_t wlen;
    char *tmp_dir;
    int sealed;
};

int sims_spool_new(size_t mem_values, const char *tmp_dir, sims_spool **out)
{
    *out = NULL;
    sims_spool *s = calloc(1, sizeof *s);
    if (!s)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a spool");
    s->fd = -1;
    s->mem_cap = mem_values;
    s->tmp_dir = strdup(sims_scratch_dir(tmp_dir));
    if (!s->tmp_dir) {
        free(s);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a spool");
    }
    *out = s;
    return SIMSTORE_OK;
}

static int spool_flush(sims_spool *s)
{
    if (s->wlen == 0)
        return SIMSTORE_OK;
    int rc = sims_write_all(s->fd, s->wbuf, s->wlen * sizeof *s->wbuf, "spool");
    s->file_values += s->wlen;
    s->wlen = 0;
    return rc;
}

static int spool_open_file(sims_spool *s)
{
    s->wbuf = malloc(SPOOL_WRITE_VALUES * sizeof *s->wbuf);
    if (!s->wbuf)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a spool");
    return sims_tmpfile_unlinked(s->tmp_dir, "spool", &s->fd);
}

int sims_spool_append(sims_spool *s, const uint64_t *v, size_t n)
{
    if (s->sealed)
        return sims_fail(SIMSTORE_EINVAL, "append to a sealed spool");
    while (n > 0 && s->mem_len < s->mem_cap) {
        if (s->mem_len == s->mem_alloc) {
            size_t want = s->mem_alloc ? s->mem_alloc * 2 : 4096;
            if (want > s->mem_cap)
                want = s->mem_cap;
            uint64_t *g = realloc(s->mem, want * sizeof *g);
            if (!g)
                return sims_fail(SIMSTORE_ENOMEM, "out of memory growing a spool");
            s->mem = g;
            s->mem_alloc = want;
        }
        size_t take = s->mem_alloc - s->mem_len;
        if (take > n)
            take = n;
        memcpy(s->mem + s->mem_len, v, take * sizeof *v);
        s->mem_len += take;
        v += take;
        n -= take;
    }
    if (n == 0)
        return SIMSTORE_OK;
    if (s->fd < 0) {
        int rc = spool_open_file(s);
        if (rc)
            return rc;
    }
    while (n > 0) {
        size_t take = SPOOL_WRITE_VALUES - s->wlen;
        if (take > n)
            take = n;
        memcpy(s->wbuf + s->wlen, v, take * sizeof *v);
        s->wlen += take;
        v += take;
        n -= take;
        if (s->wlen == SPOOL_WRITE_VALUES) {
            int rc = spool_flush(s);
            if (rc)
                return rc;
        }
    }
    return SIMSTORE_OK;
}

int sims_spool_seal(sims_spool *s)
{
    if (s->sealed)
        return SIMSTORE_OK;
    s->sealed = 1;
    int rc = s->fd >= 0 ? spool_flush(s) : SIMSTORE_OK;
    free(s->wbuf);
    s->wbuf = NULL;
    return rc;
}

uint64_t sims_spool_count(const sims_spool *s)
{
    return s->mem_len + s->file_values + s->wlen;
}

void sims_spool_free(sims_spool *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    free(s->mem);
    free(s->wbuf);
    free(s->tmp_dir);
    free(s);
}

void sims_spool_reader_init(sims_spool_reader *r, const sims_spool *s)
{
    r->spool = s;
    r->pos = 0;
}

int sims_spool_read(sims_spool_reader *r, uint64_t *out, size_t cap, size_t *n)
{
    const sims_spool *s = r->spool;
    *n = 0;
    if (!s->sealed)
        return sims_fail(SIMSTORE_EINVAL, "read from an unsealed spool");
    uint64_t total = s->mem_len + s->file_values;
    if (r->pos >= total || cap == 0)
        return SIMSTORE_OK;
    if (r->pos < s->mem_len) {
        size_t take = s->mem_len - (size_t)r->pos;
        if (take > cap)
            take = cap;
        memcpy(out, s->mem + r->pos, take * sizeof *out);
        r->pos += take;
        *n = take;
        return SIMSTORE_OK;
    }
    uint64_t fpos = r->pos - s->mem_len;
    uint64_t left = s->file_values - fpos;
    size_t take = left < cap ? (size_t)left : cap;
    int rc = sims_pread_all(s->fd, out, take * sizeof *out, fpos * sizeof *out, "spool");
    if (rc)
        return rc;
    r->pos += take;
    *n = take;
    return SIMSTORE_OK;
}
