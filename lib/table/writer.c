/* writer.c: the table writer: streams strictly increasing fingerprints into
 * fixed-size blocks, then writes the block index, the header's counts and the
 * footer, and publishes the file atomically (or fills a memory buffer). Its
 * memory does not grow with the table: the index entries collect in fixed
 * buffers that spill to unlinked temporary files beside the output. */
#include "table/table.h"

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"
#include "table/format.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Index values kept in memory per column before the oldest go to a file. */
#define INDEX_MEM_VALUES ((size_t)1 << 18)

/* One column of the index (keys, or entries): values in append order, the
 * oldest in an unlinked file once the buffer has filled. */
typedef struct index_column {
    uint64_t *mem;
    size_t len, cap;
    int fd;
    uint64_t file_values;
} index_column;

struct table_writer {
    table_params params;
    uint64_t blocks_offset;

    /* Output: a file published atomically, or a growing memory buffer. */
    int to_memory;
    sims_outfile file;
    uint8_t *mem;
    size_t mem_size, mem_cap;

    codec_huff_encoder huff;
    uint8_t code_lengths[64];
    uint8_t *block; /* block_bytes + BITIO_WRITER_SLACK */
    codec_block_encoder enc;
    int block_open;

    uint64_t fp_count;
    uint64_t last; /* last fingerprint added, valid when fp_count > 0 */

    /* Per block: the key, and count | checksum << 32 (the index entry). */
    index_column keys;
    index_column entries;
    uint64_t last_key; /* the key of the last block written */
    size_t index_mem_values; /* per column, before spilling */
    uint64_t block_count;

    int error; /* sticky: the first error; later calls return it */
};

void table_histogram_add(uint64_t hist[64], uint64_t *prev, int *have_prev, const uint64_t *fps,
                         size_t n)
{
    size_t i = 0;
    uint64_t p = *prev;
    if (!*have_prev && n) {
        p = fps[0];
        i = 1;
        *have_prev = 1;
    }
    for (; i < n; i++) {
        if (fps[i] > p)
            hist[bitio_msb(fps[i] - p)]++;
        p = fps[i];
    }
    *prev = p;
}

/* ---- parameters ----------------------------------------------------------- */

static int params_check(const table_params *p)
{
    if (!simstore_block_bytes_valid(p->block_bytes))
        return sims_fail(SIMSTORE_EINVAL, "block size %" PRIu32 " is not a power of two in [%u, %u]",
                         p->block_bytes, SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES);
    if (p->prefix_bits > 64)
        return sims_fail(SIMSTORE_EINVAL, "prefix bits %u exceed 64", p->prefix_bits);
    uint64_t seen = 0;
    for (unsigned i = 0; i < 64; i++) {
        if (p->perm[i] > 63 || (seen >> p->perm[i] & 1))
            return sims_fail(SIMSTORE_EINVAL, "perm is not a permutation of 0..63 (entry %u = %u)",
                             i, p->perm[i]);
        seen |= (uint64_t)1 << p->perm[i];
    }
    return SIMSTORE_OK;
}

/* ---- output sink ------------------------------------------------------------ */

static int sink_write(table_writer *w, const void *data, size_t n)
{
    if (!w->to_memory)
        return sims_outfile_write(&w->file, data, n);
    if (n > w->mem_cap - w->mem_size) {
        size_t cap = w->mem_cap ? w->mem_cap : 4096;
        while (cap - w->mem_size < n) {
            if (cap > SIZE_MAX / 2)
                return sims_fail(SIMSTORE_ENOMEM, "table too large for memory");
            cap *= 2;
        }
        uint8_t *m = realloc(w->mem, cap);
        if (!m)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory encoding a table");
        w->mem = m;
        w->mem_cap = cap;
    }
    memcpy(w->mem + w->mem_size, data, n);
    w->mem_size += n;
    return SIMSTORE_OK;
}

static uint64_t sink_offset(const table_writer *w)
{
    return w->to_memory ? w->mem_size : w->file.offset;
}

static int sink_pwrite(table_writer *w, const void *data, size_t n, uint64_t offset)
{
    if (!w->to_memory)
        return sims_outfile_pwrite(&w->file, data, n, offset);
    memcpy(w->mem + offset, data, n); /* only rewrites the header, written first */
    return SIMSTORE_OK;
}

/* ---- lifecycle -------------------------------------------------------------- */

static void column_free(index_column *c)
{
    free(c->mem);
    if (c->fd >= 0)
        close(c->fd);
}

static void writer_free(table_writer *w)
{
    free(w->block);
    column_free(&w->keys);
    column_free(&w->entries);
    free(w->mem);
    free(w);
}

/* The directory of the output file, for spill files. */
static int spill_dir(const table_writer *w, char *dir, size_t size)
{
    const char *path = w->file.final_path;
    const char *slash = strrchr(path, '/');
    int n = slash ? snprintf(dir, size, "%.*s", (int)(slash - path), path) : snprintf(dir, size, ".");
    if (slash == path)
        n = snprintf(dir, size, "/");
    return n < 0 || (size_t)n >= size ? sims_fail(SIMSTORE_EINVAL, "path too long: %s", path)
                                      : SIMSTORE_OK;
}

static int column_push(table_writer *w, index_column *c, uint64_t v)
{
    if (c->len == c->cap) {
        if (c->cap >= w->index_mem_values && !w->to_memory) {
            /* Full: move the buffer to the spill file. */
            if (c->fd < 0) {
                char dir[PATH_MAX];
                int rc = spill_dir(w, dir, sizeof dir);
                if (rc == SIMSTORE_OK)
                    rc = sims_tmpfile_unlinked(dir, "index", &c->fd);
                if (rc)
                    return rc;
            }
            int rc = sims_write_all(c->fd, c->mem, c->len * sizeof *c->mem, "index spill");
            if (rc)
                return rc;
            c->file_values += c->len;
            c->len = 0;
        } else {
            size_t cap = c->cap ? c->cap * 2 : 64;
            if (!w->to_memory && cap > w->index_mem_values)
                cap = w->index_mem_values;
            if (cap > SIZE_MAX / 16)
                return sims_fail(SIMSTORE_ENOMEM, "too many blocks");
            uint64_t *g = realloc(c->mem, cap * sizeof *g);
            if (!g)
                return sims_fail(SIMSTORE_ENOMEM, "out of memory for the block index");
            c->mem = g;
            c->cap = cap;
        }
    }
    c->mem[c->len++] = v;
    return SIMSTORE_OK;
}

/* Append a column to the output as little-endian values, hashing them. */
static int column_write(table_writer *w, const index_column *c, sims_xxh3_stream *hash)
{
    uint8_t buf[8192];
    uint64_t vals[sizeof buf / 8];
    for (uint64_t done = 0; done < c->file_values;) {
        uint64_t want = c->file_values - done;
        if (want > sizeof vals / 8)
            want = sizeof vals / 8;
        size_t bytes = (size_t)want * 8;
        int rc = sims_pread_all(c->fd, vals, bytes, done * 8, "index spill");
        if (rc)
            return rc;
        for (size_t i = 0; i < want; i++)
            le_store64(buf + 8 * i, vals[i]);
        sims_xxh3_stream_update(hash, buf, bytes);
        rc = sink_write(w, buf, bytes);
        if (rc)
            return rc;
        done += want;
    }
    for (size_t i = 0; i < c->len;) {
        size_t n = c->len - i < sizeof buf / 8 ? c->len - i : sizeof buf / 8;
        for (size_t j = 0; j < n; j++)
            le_store64(buf + 8 * j, c->mem[i + j]);
        sims_xxh3_stream_update(hash, buf, n * 8);
        int rc = sink_write(w, buf, n * 8);
        if (rc)
            return rc;
        i += n;
    }
    return SIMSTORE_OK;
}

static int writer_create(const table_params *p, const uint64_t hist[64], table_writer **out)
{
    *out = NULL;
    int rc = params_check(p);
    if (rc)
        return rc;
    table_writer *w = calloc(1, sizeof *w);
    if (!w)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory creating a table writer");
    w->file.fd = -1;
    w->keys.fd = w->entries.fd = -1;
    w->index_mem_values = INDEX_MEM_VALUES;
    w->params = *p;
    w->blocks_offset = tbl_blocks_offset(p->block_bytes);
    rc = codec_huff_lengths(hist, CODEC_HUFF_MAX_BITS, w->code_lengths);
    if (!rc)
        rc = codec_huff_encoder_init(&w->huff, w->code_lengths);
    if (rc) {
        writer_free(w);
        return rc;
    }
    w->block = malloc((size_t)p->block_bytes + BITIO_WRITER_SLACK);
    if (!w->block) {
        writer_free(w);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory creating a table writer");
    }
    *out = w;
    return SIMSTORE_OK;
}

/* The header and the zero padding up to block 0 go first; the counts in the
 * header are filled in by finish. */
static int write_leading_space(table_writer *w)
{
    uint8_t zero[4096] = {0};
    return sink_write(w, zero, (size_t)w->blocks_offset);
}

int table_writer_open(const char *path, const table_params *p, const uint64_t hist[64],
                      table_writer **out)
{
    table_writer *w;
    int rc = writer_create(p, hist, &w);
    if (rc)
        return rc;
    rc = sims_outfile_open(&w->file, path);
    if (rc) {
        writer_free(w);
        return rc;
    }
    rc = write_leading_space(w);
    if (rc) {
        table_writer_abort(w);
        return rc;
    }
    *out = w;
    return SIMSTORE_OK;
}

void table_writer_index_buffer(table_writer *w, size_t values)
{
    if (w->block_count == 0 && values > 0)
        w->index_mem_values = values;
}

void table_writer_abort(table_writer *w)
{
    if (!w)
        return;
    if (!w->to_memory)
        sims_outfile_abort(&w->file);
    writer_free(w);
}

/* ---- blocks ----------------------------------------------------------------- */

static int flush_block(table_writer *w)
{
    uint64_t b = w->block_count;
    uint32_t checksum = (uint32_t)sims_xxh3_64(w->block, w->params.block_bytes, tbl_block_seed(b));
    int rc = column_push(w, &w->keys, w->enc.prev);
    if (rc == SIMSTORE_OK)
        rc = column_push(w, &w->entries, (uint64_t)w->enc.count | (uint64_t)checksum << 32);
    if (rc)
        return rc;
    w->last_key = w->enc.prev;
    w->block_count = b + 1;
    w->block_open = 0;
    return sink_write(w, w->block, w->params.block_bytes);
}

static void start_block(table_writer *w)
{
    int first = w->block_count == 0;
    codec_block_encoder_start(&w->enc, &w->huff, w->block, w->params.block_bytes, first,
                              first ? 0 : w->last_key);
    w->block_open = 1;
}

int table_writer_add(table_writer *w, const uint64_t *fps, size_t n)
{
    if (w->error)
        return w->error;
    int rc = SIMSTORE_OK;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = fps[i];
        if (w->fp_count && v <= w->last) {
            rc = sims_fail(SIMSTORE_EINVAL,
                           "fingerprints not strictly increasing: %016" PRIx64 " after %016" PRIx64
                           " (input %" PRIu64 ")",
                           v, w->last, w->fp_count);
            goto fail;
        }
        if (!w->block_open)
            start_block(w);
        int put = codec_block_encoder_put(&w->enc, v);
        if (put == 0) {
            /* Full: the difference to the previous block's key is the same
             * difference, so the code does not depend on the boundary. An
             * empty block always has room for one value (<= 74 bits). */
            rc = flush_block(w);
            if (rc)
                goto fail;
            start_block(w);
            put = codec_block_encoder_put(&w->enc, v);
        }
        if (put < 0) {
            rc = put;
            goto fail;
        }
        w->last = v;
        w->fp_count++;
    }
    return SIMSTORE_OK;
fail:
    w->error = rc;
    return rc;
}

/* ---- finish ----------------------------------------------------------------- */

static void encode_header(const table_writer *w, uint8_t h[TBL_HEADER_BYTES])
{
    memset(h, 0, TBL_HEADER_BYTES);
    memcpy(h + TBL_H_MAGIC, TBL_MAGIC, TBL_MAGIC_BYTES);
    le_store32(h + TBL_H_VERSION, TABLE_FORMAT_VERSION);
    le_store32(h + TBL_H_HEADER_BYTES, TBL_HEADER_BYTES);
    le_store32(h + TBL_H_BLOCK_BYTES, w->params.block_bytes);
    h[TBL_H_PREFIX_BITS] = w->params.prefix_bits;
    le_store64(h + TBL_H_STORE_TAG, w->params.store_tag);
    le_store32(h + TBL_H_TABLE_INDEX, w->params.table_index);
    le_store64(h + TBL_H_FP_COUNT, w->fp_count);
    le_store64(h + TBL_H_BLOCK_COUNT, w->block_count);
    le_store64(h + TBL_H_BLOCKS_OFFSET, w->blocks_offset);
    memcpy(h + TBL_H_CODE_LENGTHS, w->code_lengths, 64);
    memcpy(h + TBL_H_PERM, w->params.perm, 64);
    le_store64(h + TBL_H_CHECKSUM, sims_xxh3_64(h, TBL_H_CHECKSUM, TBL_SEED_HEADER));
}

/* Write index, header and footer. */
static int write_trailer(table_writer *w)
{
    int rc;
    if (w->block_open) {
        rc = flush_block(w);
        if (rc)
            return rc;
    }
    uint64_t nb = w->block_count;
    uint64_t index_offset = sink_offset(w);
    size_t index_bytes = (size_t)nb * TBL_INDEX_ENTRY_BYTES;

    /* The index is keys then entries, little-endian, streamed from the
     * columns (and their spill files) with the checksum computed on the way. */
    sims_xxh3_stream *hash = sims_xxh3_stream_new(TBL_SEED_INDEX);
    if (!hash)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for the index checksum");
    rc = column_write(w, &w->keys, hash);
    if (rc == SIMSTORE_OK)
        rc = column_write(w, &w->entries, hash);
    uint64_t index_checksum = sims_xxh3_stream_digest(hash);
    sims_xxh3_stream_free(hash);
    if (rc)
        return rc;

    uint8_t header[TBL_HEADER_BYTES];
    encode_header(w, header);
    rc = sink_pwrite(w, header, sizeof header, 0);
    if (rc)
        return rc;

    uint8_t f[TBL_FOOTER_BYTES];
    le_store64(f + TBL_F_INDEX_OFFSET, index_offset);
    le_store64(f + TBL_F_INDEX_BYTES, index_bytes);
    le_store64(f + TBL_F_BLOCK_COUNT, nb);
    le_store64(f + TBL_F_FP_COUNT, w->fp_count);
    le_store64(f + TBL_F_HEADER_CHECKSUM, le_load64(header + TBL_H_CHECKSUM));
    le_store64(f + TBL_F_INDEX_CHECKSUM, index_checksum);
    le_store64(f + TBL_F_CHECKSUM, sims_xxh3_64(f, TBL_F_CHECKSUM, TBL_SEED_FOOTER));
    memcpy(f + TBL_F_MAGIC, TBL_FOOTER_MAGIC, TBL_MAGIC_BYTES);
    return sink_write(w, f, sizeof f);
}

int table_writer_finish(table_writer *w)
{
    int rc = w->error;
    if (!rc)
        rc = write_trailer(w);
    if (!rc && !w->to_memory) {
        rc = sims_outfile_commit(&w->file); /* releases the outfile either way */
        writer_free(w);
        return rc;
    }
    table_writer_abort(w);
    return rc;
}

/* ---- memory encoding -------------------------------------------------------- */

int table_encode_memory_hist(const table_params *p, const uint64_t hist[64], const uint64_t *fps,
                             size_t n, uint8_t **out, size_t *size)
{
    *out = NULL;
    *size = 0;
    table_writer *w;
    int rc = writer_create(p, hist, &w);
    if (rc)
        return rc;
    w->to_memory = 1;
    /* Reserve about the final size: the code's exact bit count plus a
     * margin for block tails and the index, so the buffer rarely regrows. */
    uint64_t bits = 64;
    for (unsigned j = 0; j < 64; j++)
        bits += hist[j] * (uint64_t)(w->code_lengths[j] ? w->code_lengths[j] + j : 0);
    uint64_t est_blocks = bits / 8 / p->block_bytes * 21 / 20 + 2;
    uint64_t est = w->blocks_offset + est_blocks * (p->block_bytes + TBL_INDEX_ENTRY_BYTES) +
                   TBL_FOOTER_BYTES;
    if (est < SIZE_MAX / 2 && (w->mem = malloc((size_t)est)) != NULL)
        w->mem_cap = (size_t)est;
    rc = write_leading_space(w);
    if (!rc)
        rc = table_writer_add(w, fps, n);
    if (!rc)
        rc = write_trailer(w);
    if (!rc) {
        *out = w->mem;
        *size = w->mem_size;
        w->mem = NULL;
    }
    writer_free(w);
    return rc;
}

int table_encode_memory(const table_params *p, const uint64_t *fps, size_t n, uint8_t **out,
                        size_t *size)
{
    uint64_t hist[64] = {0};
    uint64_t prev = 0;
    int have_prev = 0;
    table_histogram_add(hist, &prev, &have_prev, fps, n);
    return table_encode_memory_hist(p, hist, fps, n, out, size);
}
