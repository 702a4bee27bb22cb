/* fuzz_table_open.c: libFuzzer target: arbitrary bytes through
 * sims_table_reader_open_memory, then a full scan, whole-block decodes and range
 * probes, checking the answers against each other.
 *
 * Input: one mode byte, then the file bytes.
 *   mode bit 0: repair every checksum (header, footer, the page groups of
 *               blocks, the index's chunks and top pages) before opening, so mutations reach the checks behind the checksums
 *               (a fuzzer cannot forge XXH3);
 *   mode bit 1: open with TABLE_SKIP_BLOCK_CHECKSUMS, so damaged blocks reach
 *               the decoder.
 * Invariants checked (abort on violation): a full scan that succeeds returns
 * fp_count strictly increasing values, every probe then returns exactly
 * the matching subset of them, and the whole index then checks clean (the
 * scan used every part of it). */
#include "codec/block.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "simstore.h"
#include "table/format.h"
#include "table/table.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Recompute every checksum whose location the (untrusted) bytes imply, never
 * touching memory outside buf[0, size). */
static void repair_checksums(uint8_t *b, size_t size)
{
    if (size < TBL_HEADER_BYTES + TBL_FOOTER_BYTES)
        return;
    uint64_t foff = size - TBL_FOOTER_BYTES;
    uint8_t *f = b + foff;
    uint64_t hc = sims_xxh3_64(b, TBL_H_CHECKSUM, TBL_SEED_HEADER);
    le_store64(b + TBL_H_CHECKSUM, hc);
    le_store64(f + TBL_F_HEADER_CHECKSUM, hc);
    uint64_t bb = le_load32(b + TBL_H_BLOCK_BYTES);
    uint64_t boff = le_load64(b + TBL_H_BLOCKS_OFFSET);
    uint64_t nb = le_load64(b + TBL_H_BLOCK_COUNT);
    uint64_t ioff = le_load64(f + TBL_F_INDEX_OFFSET);
    uint64_t ilen = le_load64(f + TBL_F_INDEX_BYTES);
    if (ioff <= foff && ilen <= foff - ioff && simstore_block_bytes_valid(bb) && boff <= foff &&
        nb <= (foff - boff) / bb) {
        /* Group checksums first in the index, then each chunk's
         * (its end from its top entry), then each top page's. */
        uint64_t groups = tbl_group_count(nb, bb);
        uint64_t gb = tbl_group_blocks(bb), slot = tbl_group_first_slot(bb);
        for (uint64_t g = 0; 4 * groups <= ilen && g < groups; g++) {
            uint64_t first = g * gb > slot ? g * gb - slot : 0, end = (g + 1) * gb - slot;
            end = end < nb ? end : nb;
            uint32_t c = (uint32_t)sims_xxh3_64(b + boff + first * bb, (size_t)((end - first) * bb),
                                                TBL_SEED_GROUP + g);
            le_store32(b + ioff + 4 * g, c);
        }
        uint64_t chunks = tbl_v3_chunk_count(nb), tb = tbl_v3_top_bytes(chunks);
        if (tb <= ilen) {
            uint64_t top = ilen - tb, begin = tbl_v3_groups_bytes(groups);
            for (uint64_t c = 0; c < chunks; c++) {
                uint64_t at = top + c * TBL_V3_TOP_ENTRY_BYTES + 8 * (c / TBL_V3_TOP_ENTRIES);
                uint64_t end = le_load64(b + ioff + at + TBL_V3_TOP_END);
                if (end < begin || end - begin < 8 || end > top)
                    break;
                le_store64(
                    b + ioff + end - 8,
                    sims_xxh3_64(b + ioff + begin, (size_t)(end - begin - 8), TBL_SEED_CHUNK + c));
                begin = end;
            }
            for (uint64_t pg = 0; pg < tbl_v3_top_pages(chunks); pg++) {
                uint64_t first = pg * TBL_V3_TOP_ENTRIES;
                uint64_t n =
                    chunks - first < TBL_V3_TOP_ENTRIES ? chunks - first : TBL_V3_TOP_ENTRIES;
                uint64_t at = top + first * TBL_V3_TOP_ENTRY_BYTES + 8 * pg;
                size_t bytes = (size_t)(n * TBL_V3_TOP_ENTRY_BYTES);
                le_store64(b + ioff + at + bytes,
                           sims_xxh3_64(b + ioff + at, bytes, TBL_SEED_TOP + pg));
            }
        }
    }
    le_store64(f + TBL_F_INDEX_CHECKSUM, 0);
    le_store64(f + TBL_F_CHECKSUM, sims_xxh3_64(f, TBL_F_CHECKSUM, TBL_SEED_FOOTER));
}

struct collect {
    uint64_t *v;
    size_t n, cap;
};

static int collect(void *ctx, uint64_t value)
{
    struct collect *c = ctx;
    if (c->n >= c->cap)
        abort();
    c->v[c->n++] = value;
    return 0;
}

static void exercise(const table_reader *r)
{
    const table_info *in = sims_table_reader_info(r);
    uint64_t n = in->fp_count;
    uint64_t *all = malloc((size_t)(n + 1) * sizeof *all);
    if (!all)
        return;
    table_cursor c;
    sims_table_cursor_init(&c, r, 0, UINT64_MAX);
    size_t got = 0, k;
    uint64_t chunk[97];
    int rc;
    while (!(rc = sims_table_cursor_next(&c, chunk, 97, &k)) && k) {
        if (got + k > n)
            abort(); /* more values than the header promises */
        memcpy(all + got, chunk, k * sizeof *chunk);
        got += k;
    }
    int scan_ok = rc == 0;
    if (scan_ok) {
        if (got != n)
            abort();
        for (size_t i = 1; i < got; i++)
            if (all[i] <= all[i - 1])
                abort();
    }

    /* Probes: ranges and queries derived from the keys and values. */
    uint64_t nb = in->block_count;
    uint64_t *hits = malloc((size_t)(n + 1) * sizeof *hits);
    for (int t = 0; hits && t < 6; t++) {
        uint64_t q =
            nb ? sims_table_reader_key(r, (uint64_t)t * 7919 % nb) ^ ((uint64_t)1 << (t * 11 % 64))
               : (uint64_t)t;
        if (got && t % 2)
            q = all[(size_t)t * 104729 % got] ^ 3;
        unsigned prefix = (unsigned)(t * 5 % 20);
        uint64_t lo = prefix ? q & ~(UINT64_MAX >> prefix) : 0;
        uint64_t hi = prefix ? lo | (UINT64_MAX >> prefix) : UINT64_MAX;
        unsigned kd = (unsigned)(t % 5) * 3;
        struct collect col = {hits, 0, (size_t)n + 1};
        rc = sims_table_reader_search(r, lo, hi, q, kd, collect, &col);
        if (scan_ok) {
            /* Everything decoded fine once, so the probe must agree. */
            if (rc)
                abort();
            size_t m = 0;
            for (size_t i = 0; i < got; i++) {
                if (all[i] >= lo && all[i] <= hi && simstore_distance(all[i], q) <= kd) {
                    if (m >= col.n || hits[m] != all[i])
                        abort();
                    m++;
                }
            }
            if (m != col.n)
                abort();
        }
    }
    free(hits);

    /* Whole blocks and block checks, for the first few blocks (buffers of
     * exactly the block's count: the decoder must not write past it). */
    for (uint64_t b = 0; b < nb && b < 8; b++) {
        size_t cnt = sims_table_reader_block_count(r, b), m;
        uint64_t *blk = malloc(cnt * sizeof *blk);
        if (!blk)
            break;
        rc = sims_table_reader_block(r, b, blk, cnt, &m);
        if (!rc && m != cnt)
            abort();
        free(blk);
        uint64_t bits;
        sims_table_reader_block_bits(r, b, &bits);
    }
    sims_table_reader_find_block(r, 0);
    sims_table_reader_find_block(r, UINT64_MAX);
    if (sims_table_reader_check_index(r) && scan_ok)
        abort(); /* the scan read every chunk and top page and found them good */
    free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    size--;
    /* An exact-size copy: ASan sees any read past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size);
    if (mode & 1)
        repair_checksums(buf, size);
    table_reader *r;
    if (sims_table_reader_open_memory(buf, size, (mode & 2) ? TABLE_SKIP_BLOCK_CHECKSUMS : 0, &r) ==
        0) {
        exercise(r);
        sims_table_reader_close(r);
    }
    free(buf);
    return 0;
}
