/* writer.c: the table writer: streams strictly increasing fingerprints into
 * fixed-size blocks, then writes the block index, the header's counts and the
 * footer, and publishes the file atomically (or fills a memory buffer). Its
 * memory does not grow with the table: the index entries collect in spools
 * (sort/spool.h) that continue in unlinked temporary files beside the
 * output. */
#include "table/table.h"

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"
#include "sort/spool.h"
#include "table/format.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Index values kept in memory per column before the rest go to a file. */
#define INDEX_MEM_VALUES ((size_t)1 << 18)

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

    /* The index's columns, in append order (made at their first value):
     * per block, the key and the count; per page group, its checksum. */
    sims_spool *keys;
    sims_spool *entries;
    sims_spool *groups;
    uint32_t count_min, count_max;
    uint8_t *group;          /* the current page group's blocks */
    size_t group_len;        /* bytes in `group` */
    uint64_t last_key;       /* the key of the last block written */
    size_t index_mem_values; /* per column, before spilling */
    uint64_t block_count;

    int error; /* sticky: the first error; later calls return it */
};

void sims_table_histogram_add(uint64_t hist[64], uint64_t *prev, int *have_prev,
                              const uint64_t *fps, size_t n)
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
        return sims_fail(SIMSTORE_EINVAL,
                         "block size %" PRIu32 " is not a power of two in [%u, %u]", p->block_bytes,
                         SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES);
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
    if (sims_grow_bytes(&w->mem, &w->mem_cap, w->mem_size, n, 4096))
        return sims_fail(SIMSTORE_ENOMEM, "%s",
                         n > SIZE_MAX / 4 - w->mem_size ? "table too large for memory"
                                                        : "out of memory encoding a table");
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

static void writer_free(table_writer *w)
{
    free(w->block);
    free(w->group);
    sims_spool_free(w->keys);
    sims_spool_free(w->entries);
    sims_spool_free(w->groups);
    free(w->mem);
    free(w);
}

/* The directory of the output file, for spill files. */
static int spill_dir(const table_writer *w, char *dir, size_t size)
{
    const char *path = w->file.final_path;
    const char *slash = strrchr(path, '/');
    int n =
        slash ? snprintf(dir, size, "%.*s", (int)(slash - path), path) : snprintf(dir, size, ".");
    if (slash == path)
        n = snprintf(dir, size, "/");
    return n < 0 || (size_t)n >= size ? sims_fail(SIMSTORE_EINVAL, "path too long: %s", path)
                                      : SIMSTORE_OK;
}

/* Append v to the column *c, made at its first value: in memory up to
 * index_mem_values (without limit for a table encoded in memory), then in
 * an unlinked file in the output's directory. */
static int column_push(table_writer *w, sims_spool **c, uint64_t v)
{
    if (!*c) {
        char dir[PATH_MAX];
        int rc = w->to_memory ? sims_spool_new(SIZE_MAX, NULL, c) : spill_dir(w, dir, sizeof dir);
        if (rc == SIMSTORE_OK && !w->to_memory)
            rc = sims_spool_new(w->index_mem_values, dir, c);
        if (rc)
            return rc;
    }
    return sims_spool_append(*c, &v, 1);
}

static uint64_t column_count(const sims_spool *c)
{
    return c ? sims_spool_count(c) : 0;
}

/* The next n values of a sealed column into out. */
static int column_read(sims_spool_reader *r, uint64_t *out, size_t n)
{
    for (size_t got = 0; n > 0; out += got, n -= got) {
        int rc = sims_spool_read(r, out, n, &got);
        if (rc == SIMSTORE_OK && got == 0)
            rc = sims_fail(SIMSTORE_EIO, "the block index's spool ended early");
        if (rc)
            return rc;
    }
    return SIMSTORE_OK;
}

/* The group checksums, written through a buffer. */
typedef struct byte_sink {
    table_writer *w;
    uint8_t buf[4096];
    size_t len;
} byte_sink;

static int sink_bytes(byte_sink *s, const uint8_t *p, size_t n)
{
    if (s->len + n > sizeof s->buf) {
        int rc = sink_write(s->w, s->buf, s->len);
        s->len = 0;
        if (rc)
            return rc;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    return SIMSTORE_OK;
}

static int sink_flush(byte_sink *s)
{
    int rc = sink_write(s->w, s->buf, s->len);
    s->len = 0;
    return rc;
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
    w->count_min = UINT32_MAX;
    w->index_mem_values = INDEX_MEM_VALUES;
    w->params = *p;
    w->blocks_offset = tbl_blocks_offset(p->block_bytes);
    rc = sims_codec_huff_lengths(hist, CODEC_HUFF_MAX_BITS, w->code_lengths);
    if (!rc)
        rc = sims_codec_huff_encoder_init(&w->huff, w->code_lengths);
    if (rc) {
        writer_free(w);
        return rc;
    }
    w->block = malloc((size_t)p->block_bytes + BITIO_WRITER_SLACK);
    w->group = malloc((size_t)p->block_bytes * tbl_group_blocks(p->block_bytes));
    if (!w->block || !w->group) {
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

int sims_table_writer_open(const char *path, const table_params *p, const uint64_t hist[64],
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
        sims_table_writer_abort(w);
        return rc;
    }
    *out = w;
    return SIMSTORE_OK;
}

void sims_table_writer_index_buffer(table_writer *w, size_t values)
{
    if (w->block_count == 0 && values > 0)
        w->index_mem_values = values;
}

void sims_table_writer_abort(table_writer *w)
{
    if (!w)
        return;
    if (!w->to_memory)
        sims_outfile_abort(&w->file);
    writer_free(w);
}

/* ---- blocks ----------------------------------------------------------------- */

/* The checksum of the page group collected so far. */
static int flush_group(table_writer *w)
{
    uint64_t g = column_count(w->groups);
    uint32_t checksum = (uint32_t)sims_xxh3_64(w->group, w->group_len, TBL_SEED_GROUP + g);
    w->group_len = 0;
    return column_push(w, &w->groups, checksum);
}

static int flush_block(table_writer *w)
{
    uint64_t b = w->block_count;
    size_t bb = w->params.block_bytes;
    int rc = SIMSTORE_OK;
    memcpy(w->group + w->group_len, w->block, bb);
    w->group_len += bb;
    if ((b + tbl_group_first_slot(bb) + 1) % tbl_group_blocks(bb) == 0)
        rc = flush_group(w);
    if (rc == SIMSTORE_OK)
        rc = column_push(w, &w->keys, w->enc.prev);
    if (rc == SIMSTORE_OK)
        rc = column_push(w, &w->entries, w->enc.count);
    if (rc)
        return rc;
    if (w->enc.count < w->count_min)
        w->count_min = w->enc.count;
    if (w->enc.count > w->count_max)
        w->count_max = w->enc.count;
    w->last_key = w->enc.prev;
    w->block_count = b + 1;
    w->block_open = 0;
    return sink_write(w, w->block, w->params.block_bytes);
}

static void start_block(table_writer *w)
{
    int first = w->block_count == 0;
    sims_codec_block_encoder_start(&w->enc, &w->huff, w->block, w->params.block_bytes, first,
                                   first ? 0 : w->last_key);
    w->block_open = 1;
}

int sims_table_writer_add(table_writer *w, const uint64_t *fps, size_t n)
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
        int put = sims_codec_block_encoder_put(&w->enc, v);
        if (put == 0) {
            /* The value that does not fit ends the block as its key, which
             * the index holds, uncoded. */
            sims_codec_block_encoder_put_implicit(&w->enc, v);
            rc = flush_block(w);
            if (rc)
                goto fail;
            put = 1;
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

/* ---- the index ---------------------------------------------------------------- */

/* Set the n <= 64 bits at bit pos of words (LSB-first; they are zero) to v. */
static void bits_put(uint64_t *words, uint64_t pos, unsigned n, uint64_t v)
{
    if (n == 0)
        return;
    if (n < 64)
        v &= ((uint64_t)1 << n) - 1;
    uint64_t w = pos >> 6;
    unsigned off = (unsigned)(pos & 63);
    words[w] |= v << off;
    if (off + n > 64)
        words[w + 1] |= v >> (64 - off);
}

/* A chunk of the index in memory: header, sections, checksum. */
static int encode_chunk(uint64_t c, const uint64_t *keys, const uint64_t *entries, size_t n,
                        uint64_t base, uint8_t **buf, size_t *cap, size_t *size)
{
    uint64_t rel_last = keys[n - 1] - base;
    unsigned low_bits = tbl_key_low_bits(n, rel_last);
    uint64_t high_words = tbl_key_high_words(n, low_bits, rel_last);
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t k = (uint32_t)entries[i];
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    unsigned count_bits = hi > lo ? bitio_msb(hi - lo) + 1 : 0;
    uint64_t low_words = tbl_key_low_words(n, low_bits);
    uint64_t count_words = ((uint64_t)n * count_bits + 63) / 64;
    uint64_t words = low_words + high_words + count_words;
    size_t bytes = (size_t)(TBL_C3_HEADER_BYTES + 8 * words + 8);
    if (bytes > *cap) {
        uint8_t *g = realloc(*buf, bytes);
        if (!g)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory writing the index");
        *buf = g;
        *cap = bytes;
    }
    uint64_t *w = calloc((size_t)words + 1, sizeof *w);
    if (!w)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory writing the index");
    uint64_t *low = w, *high = w + low_words, *counts = high + high_words;
    for (size_t i = 0; i < n; i++) {
        uint64_t rel = keys[i] - base;
        bits_put(low, (uint64_t)i * low_bits, low_bits, rel);
        uint64_t pos = (low_bits < 64 ? rel >> low_bits : 0) + i;
        high[pos >> 6] |= (uint64_t)1 << (pos & 63);
        bits_put(counts, (uint64_t)i * count_bits, count_bits, (uint32_t)entries[i] - lo);
    }
    uint8_t *p = *buf;
    memset(p, 0, TBL_C3_HEADER_BYTES);
    p[TBL_C3_LOW_BITS] = (uint8_t)low_bits;
    p[TBL_C3_COUNT_BITS] = (uint8_t)count_bits;
    le_store32(p + TBL_C3_COUNT_MIN, lo);
    le_store32(p + TBL_C3_HIGH_WORDS, (uint32_t)high_words);
    for (uint64_t i = 0; i < words; i++)
        le_store64(p + TBL_C3_HEADER_BYTES + 8 * i, w[i]);
    free(w);
    le_store64(p + bytes - 8, sims_xxh3_64(p, bytes - 8, TBL_SEED_CHUNK + c));
    *size = bytes;
    return SIMSTORE_OK;
}

/* The index (format/table.md, "Block index"): the group checksums, the
 * chunks, the top pages; *index_bytes receives its size. */
static int write_index(table_writer *w, uint64_t *index_bytes)
{
    uint64_t nb = w->block_count;
    uint64_t chunks = tbl_v3_chunk_count(nb);
    uint64_t start = sink_offset(w);
    uint8_t *top = malloc((size_t)(tbl_v3_top_bytes(chunks) + 8));
    uint64_t *keys = malloc(TBL_V3_CHUNK_BLOCKS * sizeof *keys);
    uint64_t *entries = malloc(TBL_V3_CHUNK_BLOCKS * sizeof *entries);
    uint8_t *buf = NULL;
    size_t cap = 0;
    byte_sink *s = calloc(1, sizeof *s);
    int rc = top && keys && entries && s
                 ? SIMSTORE_OK
                 : sims_fail(SIMSTORE_ENOMEM, "out of memory writing the index");
    sims_spool *cols[3] = {w->groups, w->keys, w->entries};
    sims_spool_reader rd[3] = {{0}};
    for (unsigned i = 0; i < 3; i++)
        if (!rc && cols[i] && (rc = sims_spool_seal(cols[i])) == SIMSTORE_OK)
            sims_spool_reader_init(&rd[i], cols[i]);
    if (s)
        s->w = w;
    uint64_t groups = column_count(w->groups);
    for (uint64_t done = 0; !rc && done < groups;) {
        size_t n =
            (size_t)(groups - done < TBL_V3_CHUNK_BLOCKS ? groups - done : TBL_V3_CHUNK_BLOCKS);
        rc = column_read(&rd[0], keys, n);
        for (size_t i = 0; !rc && i < n; i++) {
            uint8_t b[4];
            le_store32(b, (uint32_t)keys[i]);
            rc = sink_bytes(s, b, 4);
        }
        done += n;
    }
    if (!rc && groups % 2) {
        static const uint8_t pad[4];
        rc = sink_bytes(s, pad, sizeof pad);
    }
    if (!rc)
        rc = sink_flush(s);
    uint64_t fp_end = 0, base = 0;
    for (uint64_t c = 0; !rc && c < chunks; c++) {
        size_t n = (size_t)(nb - c * TBL_V3_CHUNK_BLOCKS < TBL_V3_CHUNK_BLOCKS
                                ? nb - c * TBL_V3_CHUNK_BLOCKS
                                : TBL_V3_CHUNK_BLOCKS);
        size_t size = 0;
        rc = column_read(&rd[1], keys, n);
        if (!rc)
            rc = column_read(&rd[2], entries, n);
        if (!rc)
            rc = encode_chunk(c, keys, entries, n, base, &buf, &cap, &size);
        if (!rc)
            rc = sink_write(w, buf, size);
        for (size_t i = 0; i < n; i++)
            fp_end += (uint32_t)entries[i];
        uint8_t *e = top + c * TBL_V3_TOP_ENTRY_BYTES + 8 * (c / TBL_V3_TOP_ENTRIES);
        le_store64(e + TBL_V3_TOP_LAST_KEY, keys[n - 1]);
        le_store64(e + TBL_V3_TOP_FP_END, fp_end);
        le_store64(e + TBL_V3_TOP_END, sink_offset(w) - start);
        base = keys[n - 1] + 1;
    }
    /* The top pages, each followed by the checksum of its entries. */
    for (uint64_t pg = 0; !rc && pg < tbl_v3_top_pages(chunks); pg++) {
        uint64_t first = pg * TBL_V3_TOP_ENTRIES;
        uint64_t n = chunks - first < TBL_V3_TOP_ENTRIES ? chunks - first : TBL_V3_TOP_ENTRIES;
        uint8_t *page = top + first * TBL_V3_TOP_ENTRY_BYTES + 8 * pg;
        size_t bytes = (size_t)(n * TBL_V3_TOP_ENTRY_BYTES);
        le_store64(page + bytes, sims_xxh3_64(page, bytes, TBL_SEED_TOP + pg));
    }
    if (!rc)
        rc = sink_write(w, top, (size_t)tbl_v3_top_bytes(chunks));
    *index_bytes = sink_offset(w) - start;
    free(s);
    free(buf);
    free(entries);
    free(keys);
    free(top);
    return rc;
}

/* Write index, header and footer. */
static int write_trailer(table_writer *w)
{
    int rc;
    if (w->block_open) {
        /* The last value is the block's key, not coded. */
        sims_codec_block_encoder_drop_last(&w->enc);
        rc = flush_block(w);
        if (rc)
            return rc;
    }
    if (w->group_len) {
        rc = flush_group(w);
        if (rc)
            return rc;
    }
    uint64_t nb = w->block_count;
    uint64_t index_offset = sink_offset(w);
    uint64_t index_bytes = 0;
    rc = write_index(w, &index_bytes);
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
    /* The index's chunks and top pages carry their own checksums: the
     * footer's field is zero. */
    le_store64(f + TBL_F_INDEX_CHECKSUM, 0);
    le_store64(f + TBL_F_CHECKSUM, sims_xxh3_64(f, TBL_F_CHECKSUM, TBL_SEED_FOOTER));
    memcpy(f + TBL_F_MAGIC, TBL_FOOTER_MAGIC, TBL_MAGIC_BYTES);
    return sink_write(w, f, sizeof f);
}

int sims_table_writer_finish(table_writer *w)
{
    int rc = w->error;
    if (!rc)
        rc = write_trailer(w);
    if (!rc && !w->to_memory) {
        rc = sims_outfile_commit(&w->file); /* releases the outfile either way */
        writer_free(w);
        return rc;
    }
    sims_table_writer_abort(w);
    return rc;
}

/* ---- memory encoding -------------------------------------------------------- */

int sims_table_encode_memory_hist(const table_params *p, const uint64_t hist[64],
                                  const uint64_t *fps, size_t n, uint8_t **out, size_t *size)
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
    uint64_t est = w->blocks_offset + est_blocks * (p->block_bytes + 16) + TBL_FOOTER_BYTES;
    if (est < SIZE_MAX / 2 && (w->mem = malloc((size_t)est)) != NULL)
        w->mem_cap = (size_t)est;
    rc = write_leading_space(w);
    if (!rc)
        rc = sims_table_writer_add(w, fps, n);
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

int sims_table_encode_memory(const table_params *p, const uint64_t *fps, size_t n, uint8_t **out,
                             size_t *size)
{
    uint64_t hist[64] = {0};
    uint64_t prev = 0;
    int have_prev = 0;
    sims_table_histogram_add(hist, &prev, &have_prev, fps, n);
    return sims_table_encode_memory_hist(p, hist, fps, n, out, size);
}
