/* fuzz_docfile_open.c: libFuzzer target: arbitrary bytes through
 * sims_docfile_open_memory (format/docfile.md), then lookups by fingerprint, by
 * id and by ordinal, the walk in order and sims_docfile_verify, checking the
 * answers against each other.
 *
 * Input: one mode byte, then the file bytes.
 *   mode bit 0: repair every checksum (header, blocks, block-table pages,
 *               directory pages, id-entry pages) the bytes imply before
 *               opening, so mutations reach the checks behind them (a fuzzer
 *               cannot forge XXH3).
 * Invariants (abort on violation): when sims_docfile_verify passes, the walk
 * gives sims_docfile_count documents in (fingerprint, id) order, and each
 * document is found by its fingerprint, by its id and by its ordinal,
 * exactly as the walk gave it. Any lookup may fail; none may crash. */
#include "common/bytes.h"
#include "common/checksum.h"
#include "docfile/docfile.h"
#include "docfile/layout.h"
#include "simstore.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void repair_dir(uint8_t *b, size_t size, uint64_t base, unsigned bits, uint64_t seed)
{
    uint64_t entries = df_dir_entries(bits);
    for (uint64_t p0 = 0, pg = 0; p0 < entries; p0 += DF_DIR_PAGE, pg++) {
        uint64_t e = entries - p0 < DF_DIR_PAGE ? entries - p0 : DF_DIR_PAGE;
        uint64_t off = base + df_dir_entry_offset(p0);
        if (off > size || 4 * e + 8 > size - off)
            return;
        le_store64(b + off + 4 * e, sims_xxh3_64(b + off, 4 * e, seed + pg));
    }
}

/* Recompute every checksum the (untrusted) bytes imply, never touching
 * memory outside b[0, size). */
static void repair_checksums(uint8_t *b, size_t size)
{
    if (size < DOCFILE_HEADER_BYTES)
        return;
    le_store64(b + DF_H_CHECKSUM, sims_xxh3_64(b, DF_H_CHECKSUM, DF_SEED_HEADER));
    uint64_t n = le_load64(b + DF_H_COUNT), bt = le_load64(b + DF_H_BT);
    if (n >= DOCFILE_MAX_DOCS || bt > size || bt < DOCFILE_HEADER_BYTES)
        return;
    uint64_t nb = df_block_count(n);
    if (nb > size / 16)
        return;
    /* Blocks, from the block table's ends, then the table's pages. */
    uint64_t start = DOCFILE_HEADER_BYTES;
    for (uint64_t i = 0; i < nb; i++) {
        uint64_t at = bt + df_table_entry_offset(i);
        if (at > size || size - at < 16)
            return;
        uint64_t end = le_load64(b + at + 8);
        if (end > start && end - start >= 4 && end <= bt)
            le_store32(b + end - 4,
                       (uint32_t)sims_xxh3_64(b + start, end - start - 4, DF_SEED_BLOCK + i));
        start = end > start ? end : start;
    }
    for (uint64_t p0 = 0, pg = 0; p0 < nb; p0 += DF_TABLE_PAGE, pg++) {
        uint64_t e = nb - p0 < DF_TABLE_PAGE ? nb - p0 : DF_TABLE_PAGE;
        uint64_t off = bt + df_table_entry_offset(p0);
        if (off > size || 16 * e + 8 > size - off)
            return;
        le_store64(b + off + 16 * e, sims_xxh3_64(b + off, 16 * e, DF_SEED_TABLE + pg));
    }
    unsigned bf = df_bf(n), bi = df_bi(n), w = df_ob(n) + DF_TAG_BITS;
    uint64_t fd = bt + df_table_bytes(nb), ie = fd + df_dir_bytes(bf);
    uint64_t di = ie + df_ident_bytes(n, w);
    repair_dir(b, size, fd, bf, DF_SEED_FPDIR);
    for (uint64_t p0 = 0, pg = 0; p0 < n; p0 += DF_IDENT_PAGE, pg++) {
        uint64_t e = n - p0 < DF_IDENT_PAGE ? n - p0 : DF_IDENT_PAGE;
        uint64_t words = df_ident_words(e, w), off = ie + pg * df_ident_page_bytes(w);
        if (off > size || 8 * words + 8 > size - off)
            break;
        le_store64(b + off + 8 * words, sims_xxh3_64(b + off, 8 * words, DF_SEED_IDENT + pg));
    }
    repair_dir(b, size, di, bi, DF_SEED_IDDIR);
}

typedef struct walk {
    const docfile_reader *r;
    uint64_t count;
    int have_last;
    uint64_t last_fp;
    uint8_t last_id[DOCFILE_ID_MAX];
    uint32_t last_len;
} walk;

typedef struct find {
    const docfile_doc *want;
    int seen;
} find;

static int same(const docfile_doc *a, const docfile_doc *b)
{
    return a->ordinal == b->ordinal && a->fingerprint == b->fingerprint &&
           a->insertion == b->insertion && a->id == b->id && a->id_len == b->id_len &&
           a->id_is_int == b->id_is_int && a->meta == b->meta && a->meta_len == b->meta_len &&
           a->sketch == b->sketch && a->paragraphs == b->paragraphs &&
           a->paragraph_count == b->paragraph_count;
}

static int find_one(void *ctx, const docfile_doc *d)
{
    find *f = ctx;
    if (d->fingerprint != f->want->fingerprint)
        abort();
    if (d->ordinal == f->want->ordinal) {
        if (!same(d, f->want))
            abort();
        f->seen = 1;
    }
    return 0;
}

static int walk_one(void *ctx, const docfile_doc *d)
{
    walk *w = ctx;
    if (d->ordinal != w->count)
        abort();
    if (w->have_last) {
        int c = memcmp(w->last_id, d->id, w->last_len < d->id_len ? w->last_len : d->id_len);
        int order = d->fingerprint != w->last_fp ? (d->fingerprint > w->last_fp ? 1 : -1)
                    : c                          ? -c
                                                 : (d->id_len > w->last_len ? 1 : -1);
        if (order <= 0)
            abort();
    }
    w->have_last = 1;
    w->last_fp = d->fingerprint;
    memcpy(w->last_id, d->id, d->id_len);
    w->last_len = d->id_len;
    w->count++;
    /* Found every other way, the same. */
    find f = {d, 0};
    if (sims_docfile_find_fp(w->r, d->fingerprint, find_one, &f) || !f.seen)
        abort();
    docfile_doc got;
    if (sims_docfile_find_id(w->r, d->id, d->id_len, &got) != 1 || !same(&got, d))
        abort();
    if (sims_docfile_get(w->r, d->ordinal, &got) || !same(&got, d))
        abort();
    return 0;
}

static int count_any(void *ctx, const docfile_doc *d)
{
    (void)d;
    ++*(uint64_t *)ctx;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    size--;
    uint8_t *b = malloc(size ? size : 1);
    if (!b)
        return 0;
    memcpy(b, data + 1, size);
    if (mode & 1)
        repair_checksums(b, size);
    docfile_reader *r;
    if (sims_docfile_open_memory(b, size, "fuzz", &r) == SIMSTORE_OK) {
        /* Lookups before anything is checked, then the whole. */
        uint64_t n = sims_docfile_count(r), c = 0;
        sims_docfile_find_fp(r, size >= 16 ? le_load64(b + 8) : 0, count_any, &c);
        docfile_doc d;
        sims_docfile_find_id(r, b, size < 12 ? size : 12, &d);
        if (n)
            sims_docfile_get(r, n / 2, &d);
        if (sims_docfile_verify(r) == SIMSTORE_OK) {
            walk w = {r, 0, 0, 0, {0}, 0};
            if (sims_docfile_each(r, walk_one, &w) || w.count != n)
                abort();
        }
        sims_docfile_close(r);
    }
    free(b);
    return 0;
}
