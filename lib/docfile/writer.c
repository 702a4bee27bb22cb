/* writer.c: writes a document file (format/docfile.md) from documents given
 * in order: blocks as they fill, then the block table, the two directories
 * and the id entries at commit, published atomically. */
#include "docfile/docfile.h"

#include "codec/bitio.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"
#include "docfile/layout.h"
#include "sort/recsort.h"
#include "sort/spool.h"

#include <stdlib.h>
#include <string.h>

struct docfile_writer {
    sims_outfile out;
    int opened;
    unsigned sketch_bytes;
    uint64_t n;
    /* the last document added, for the order check */
    uint64_t last_fp;
    uint8_t last_id[DOCFILE_ID_MAX];
    uint32_t last_id_len;
    /* the block being filled */
    uint32_t c;
    uint64_t fp[DOCFILE_BLOCK_DOCS], ins[DOCFILE_BLOCK_DOCS];
    uint32_t id_len[DOCFILE_BLOCK_DOCS], meta_len[DOCFILE_BLOCK_DOCS];
    uint32_t para_count[DOCFILE_BLOCK_DOCS];
    uint64_t int_mask;
    uint8_t *ids; /* 64 * 511 bytes */
    size_t ids_used;
    uint8_t *meta; /* grown */
    size_t meta_used, meta_cap;
    uint8_t *paras; /* the paragraph lists, grown */
    size_t paras_used, paras_cap;
    uint8_t *sketches; /* 64 * sketch_bytes */
    uint8_t *block;    /* the encoded block */
    size_t block_cap;
    /* what commit needs, in bounded memory: the block table (first
     * fingerprint, end: two values a block) and the id entries, (hash,
     * ordinal) as 13-byte big-endian keys, sorted */
    sims_spool *table;
    uint64_t blocks;
    uint64_t first_fp; /* of the block being filled */
    sims_recsort *idents;
    uint64_t offset; /* bytes written so far */
    uint64_t block_bytes;
};

/* A buffer grown by the library's one rule (common/grow.h). */
static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (sims_grow(p, cap, need, elem, 64))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory writing a document file");
    return SIMSTORE_OK;
}

int sims_docfile_writer_open(const char *path, unsigned sketch_bytes, size_t memory_bytes,
                             const char *tmp_dir, docfile_writer **out)
{
    *out = NULL;
    if (sketch_bytes != 0 && sketch_bytes != 16 && sketch_bytes != 32 && sketch_bytes != 64 &&
        sketch_bytes != 128 && sketch_bytes != 256)
        return sims_fail(SIMSTORE_EINVAL,
                         "document file: sketch size %u is not 0, 16, 32, 64, 128 or 256",
                         sketch_bytes);
    docfile_writer *w = calloc(1, sizeof *w);
    if (!w)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    w->sketch_bytes = sketch_bytes;
    if (!memory_bytes)
        memory_bytes = (size_t)64 << 20;
    int rc = sims_spool_new(memory_bytes / 8 / 8, tmp_dir, &w->table);
    if (!rc)
        rc = sims_recsort_new(memory_bytes - memory_bytes / 8, tmp_dir, &w->idents);
    if (rc) {
        sims_docfile_writer_abort(w);
        return rc;
    }
    w->ids = malloc(DOCFILE_BLOCK_DOCS * DOCFILE_ID_MAX);
    w->sketches = malloc(DOCFILE_BLOCK_DOCS * (sketch_bytes ? sketch_bytes : 1));
    if (!w->ids || !w->sketches) {
        sims_docfile_writer_abort(w);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    rc = sims_outfile_open(&w->out, path);
    if (rc) {
        sims_docfile_writer_abort(w);
        return rc;
    }
    w->opened = 1;
    uint8_t zero[DOCFILE_HEADER_BYTES] = {0};
    rc = sims_outfile_write(&w->out, zero, sizeof zero);
    if (rc) {
        sims_docfile_writer_abort(w);
        return rc;
    }
    w->offset = DOCFILE_HEADER_BYTES;
    *out = w;
    return SIMSTORE_OK;
}

/* The Rice parameter with the fewest bits whose quotients stay <= 63. */
static unsigned choose_rice(const uint64_t *fp, uint32_t c)
{
    unsigned best = 63;
    uint64_t best_bits = UINT64_MAX;
    for (unsigned r = 0; r < 64; r++) {
        uint64_t bits = 0;
        int ok = 1;
        for (uint32_t j = 1; j < c && ok; j++) {
            uint64_t q = (fp[j] - fp[j - 1]) >> r;
            if (q > DF_RICE_MAX_Q)
                ok = 0;
            bits += q + 1 + r;
        }
        if (ok && bits < best_bits) {
            best_bits = bits;
            best = r;
        }
    }
    return best;
}

static int flush_block(docfile_writer *w)
{
    uint32_t c = w->c;
    if (c == 0)
        return SIMSTORE_OK;
    uint64_t ins_min = UINT64_MAX, ins_max = 0;
    uint32_t len_min = DOCFILE_ID_MAX, len_max = 0, meta_max = 0, para_max = 0;
    uint64_t meta_mask = 0, para_mask = 0;
    for (uint32_t j = 0; j < c; j++) {
        ins_min = w->ins[j] < ins_min ? w->ins[j] : ins_min;
        ins_max = w->ins[j] > ins_max ? w->ins[j] : ins_max;
        len_min = w->id_len[j] < len_min ? w->id_len[j] : len_min;
        len_max = w->id_len[j] > len_max ? w->id_len[j] : len_max;
        if (w->meta_len[j]) {
            meta_mask |= (uint64_t)1 << j;
            meta_max = w->meta_len[j] > meta_max ? w->meta_len[j] : meta_max;
        }
        if (w->para_count[j]) {
            para_mask |= (uint64_t)1 << j;
            para_max = w->para_count[j] > para_max ? w->para_count[j] : para_max;
        }
    }
    unsigned r = choose_rice(w->fp, c);
    unsigned wi = df_bits(ins_max - ins_min), wl = df_bits(len_max - len_min);
    unsigned wm = df_bits(meta_max), wp = df_bits(para_max);
    /* Bits: gaps <= 127 each, then c * (64 + 9 + 32 + 21) at most. */
    size_t bit_bytes = ((size_t)(c - 1) * 127 + (size_t)c * (64 + 9 + 32 + 21) + 7) / 8;
    size_t need = DF_BLOCK_HEAD + 25 + bit_bytes + BITIO_WRITER_SLACK + w->ids_used + w->meta_used +
                  w->paras_used + (size_t)c * w->sketch_bytes + 4;
    int rc = grow((void **)&w->block, &w->block_cap, need, 1);
    if (rc)
        return rc;
    uint8_t *b = w->block;
    memset(b, 0, need);
    b[0] = (uint8_t)c;
    b[1] = (uint8_t)r;
    b[2] = (uint8_t)wi;
    b[3] = (uint8_t)wl;
    b[4] = (uint8_t)wm;
    b[5] = (uint8_t)((w->int_mask ? 1 : 0) | (meta_mask ? 2 : 0) | (para_mask ? 4 : 0));
    le_store16(b + 6, (uint16_t)len_min);
    le_store64(b + 8, ins_min);
    size_t at = DF_BLOCK_HEAD;
    if (w->int_mask) {
        le_store64(b + at, w->int_mask);
        at += 8;
    }
    if (meta_mask) {
        le_store64(b + at, meta_mask);
        at += 8;
    }
    if (para_mask) {
        le_store64(b + at, para_mask);
        b[at + 8] = (uint8_t)wp;
        at += 9;
    }
    /* The fixed fields, then the bytes, then the gaps (format/docfile.md). */
    bitio_writer bw;
    bitio_writer_init(&bw, b + at, bit_bytes);
    for (uint32_t j = 0; j < c; j++)
        bitio_put(&bw, w->ins[j] - ins_min, wi);
    for (uint32_t j = 0; j < c; j++)
        bitio_put(&bw, w->id_len[j] - len_min, wl);
    for (uint32_t j = 0; j < c; j++)
        if (w->meta_len[j])
            bitio_put(&bw, w->meta_len[j], wm);
    for (uint32_t j = 0; j < c; j++)
        if (w->para_count[j])
            bitio_put(&bw, w->para_count[j], wp);
    at += (size_t)((bw.pos + 7) / 8);
    memset(b + at, 0, need - at); /* the slack the bit writer may have touched */
    memcpy(b + at, w->ids, w->ids_used);
    at += w->ids_used;
    if (w->meta_used)
        memcpy(b + at, w->meta, w->meta_used);
    at += w->meta_used;
    if (w->sketch_bytes)
        memcpy(b + at, w->sketches, (size_t)c * w->sketch_bytes);
    at += (size_t)c * w->sketch_bytes;
    if (w->paras_used)
        memcpy(b + at, w->paras, w->paras_used);
    at += w->paras_used;
    bitio_writer_init(&bw, b + at, bit_bytes);
    for (uint32_t j = 1; j < c; j++) {
        uint64_t g = w->fp[j] - w->fp[j - 1], q = g >> r;
        bitio_put(&bw, ((uint64_t)1 << q) - 1, (unsigned)q + 1); /* q ones, a zero */
        bitio_put(&bw, g, r);
    }
    at += (size_t)((bw.pos + 7) / 8);
    memset(b + at, 0, need - at);
    uint64_t index = w->blocks;
    le_store32(b + at, (uint32_t)sims_xxh3_64(b, at, DF_SEED_BLOCK + index));
    at += 4;
    rc = sims_outfile_write(&w->out, b, at);
    if (rc)
        return rc;
    w->offset += at;
    w->block_bytes += at;
    uint64_t entry[2] = {w->fp[0], w->offset};
    rc = sims_spool_append(w->table, entry, 2);
    if (rc)
        return rc;
    w->blocks++;
    w->c = 0;
    w->ids_used = 0;
    w->meta_used = 0;
    w->paras_used = 0;
    w->int_mask = 0;
    return SIMSTORE_OK;
}

static int id_order(uint64_t fp_a, const uint8_t *a, uint32_t la, uint64_t fp_b, const uint8_t *b,
                    uint32_t lb)
{
    if (fp_a != fp_b)
        return fp_a < fp_b ? -1 : 1;
    int c = memcmp(a, b, la < lb ? la : lb);
    if (c)
        return c;
    return la < lb ? -1 : la > lb;
}

int sims_docfile_writer_add(docfile_writer *w, const docfile_doc *d)
{
    if (d->id_len == 0 || d->id_len > DOCFILE_ID_MAX || !d->id)
        return sims_fail(SIMSTORE_EINVAL, "document file: id of %u bytes (1..%u)", d->id_len,
                         DOCFILE_ID_MAX);
    if ((d->meta == NULL) != (d->meta_len == 0))
        return sims_fail(SIMSTORE_EINVAL, "document file: metadata of %u bytes", d->meta_len);
    if ((d->paragraphs == NULL) != (d->paragraph_count == 0) ||
        d->paragraph_count > DOCFILE_PARAGRAPHS_MAX)
        return sims_fail(SIMSTORE_EINVAL, "document file: a paragraph list of %u (1..2^20)",
                         d->paragraph_count);
    if (w->sketch_bytes && !d->sketch)
        return sims_fail(SIMSTORE_EINVAL, "document file: a document without a sketch");
    if (w->n + 1 >= DOCFILE_MAX_DOCS)
        return sims_fail(SIMSTORE_EFULL, "document file: 2^40 documents");
    if (w->n &&
        id_order(w->last_fp, w->last_id, w->last_id_len, d->fingerprint, d->id, d->id_len) >= 0)
        return sims_fail(SIMSTORE_EINVAL,
                         "document file: documents out of order (fingerprint, then id) at %llu",
                         (unsigned long long)w->n);
    int rc;
    if (d->meta_len) {
        rc = grow((void **)&w->meta, &w->meta_cap, w->meta_used + d->meta_len, 1);
        if (rc)
            return rc;
        memcpy(w->meta + w->meta_used, d->meta, d->meta_len);
        w->meta_used += d->meta_len;
    }
    if (d->paragraph_count) {
        size_t bytes = (size_t)d->paragraph_count * 8;
        rc = grow((void **)&w->paras, &w->paras_cap, w->paras_used + bytes, 1);
        if (rc)
            return rc;
        memcpy(w->paras + w->paras_used, d->paragraphs, bytes);
        w->paras_used += bytes;
    }
    uint32_t j = w->c;
    w->fp[j] = d->fingerprint;
    w->ins[j] = d->insertion;
    w->id_len[j] = d->id_len;
    w->meta_len[j] = d->meta_len;
    w->para_count[j] = d->paragraph_count;
    if (d->id_is_int)
        w->int_mask |= (uint64_t)1 << j;
    memcpy(w->ids + w->ids_used, d->id, d->id_len);
    w->ids_used += d->id_len;
    if (w->sketch_bytes)
        memcpy(w->sketches + (size_t)j * w->sketch_bytes, d->sketch, w->sketch_bytes);
    uint8_t key[13];
    be_store64(key, sims_docfile_id_hash(d->id, d->id_len));
    for (int b = 0; b < 5; b++)
        key[8 + b] = (uint8_t)(w->n >> (8 * (4 - b)));
    if ((rc = sims_recsort_push(w->idents, key, sizeof key, NULL, 0)))
        return rc;
    w->last_fp = d->fingerprint;
    memcpy(w->last_id, d->id, d->id_len);
    w->last_id_len = d->id_len;
    w->n++;
    if (++w->c == DOCFILE_BLOCK_DOCS)
        return flush_block(w);
    return SIMSTORE_OK;
}

/* A source of sorted values' buckets: the next one, or 0 at the end. */
typedef int (*bucket_fn)(void *ctx, uint64_t *bucket);

/* A directory (format/docfile.md): entry x = how many of the sorted values
 * have their bucket below x. */
static int write_dir(docfile_writer *w, unsigned bits, uint64_t seed, bucket_fn next, void *ctx)
{
    uint64_t entries = df_dir_entries(bits), i = 0, cur = 0;
    int more = next(ctx, &cur);
    if (more < 0)
        return more;
    uint8_t page[4 * DF_DIR_PAGE + 8];
    for (uint64_t p0 = 0, pg = 0; p0 < entries; p0 += DF_DIR_PAGE, pg++) {
        uint64_t e = entries - p0 < DF_DIR_PAGE ? entries - p0 : DF_DIR_PAGE;
        for (uint64_t k = 0; k < e; k++) {
            while (more && cur < p0 + k) {
                i++;
                if ((more = next(ctx, &cur)) < 0)
                    return more;
            }
            le_store32(page + 4 * k, (uint32_t)i);
        }
        le_store64(page + 4 * e, sims_xxh3_64(page, 4 * e, seed + pg));
        int rc = sims_outfile_write(&w->out, page, 4 * e + 8);
        if (rc)
            return rc;
    }
    return SIMSTORE_OK;
}

/* The block table read back: (first fingerprint, end) a block. */
typedef struct table_walk {
    sims_spool_reader rd;
    unsigned bf;
} table_walk;

static int table_next(table_walk *t, uint64_t *first, uint64_t *end)
{
    uint64_t v[2];
    size_t got = 0;
    int rc = sims_spool_read(&t->rd, v, 2, &got);
    if (rc)
        return rc;
    if (got == 0)
        return 0;
    if (got != 2)
        return sims_fail(SIMSTORE_EIO, "document file: block table spool cut short");
    *first = v[0];
    *end = v[1];
    return 1;
}

static int fp_bucket_next(void *ctx, uint64_t *bucket)
{
    table_walk *t = ctx;
    uint64_t first = 0, end = 0;
    int rc = table_next(t, &first, &end);
    if (rc == 1)
        *bucket = df_fp_bucket(first, t->bf);
    return rc;
}

/* The id entries read back: hash and ordinal of each, in (hash, ordinal)
 * order. */
static int ident_next(sims_recsort *s, uint64_t *h, uint64_t *ordinal)
{
    sims_rec rec;
    int rc = sims_recsort_next(s, &rec);
    if (rc != 1)
        return rc;
    if (rec.key_len != 13)
        return sims_fail(SIMSTORE_EIO, "document file: id entry of %u bytes", rec.key_len);
    *h = be_load64(rec.key);
    *ordinal = 0;
    for (int b = 0; b < 5; b++)
        *ordinal = *ordinal << 8 | rec.key[8 + b];
    return 1;
}

typedef struct id_walk {
    sims_recsort *s;
    unsigned bi;
} id_walk;

static int id_bucket_next(void *ctx, uint64_t *bucket)
{
    id_walk *iw = ctx;
    uint64_t h = 0, ord = 0;
    int rc = ident_next(iw->s, &h, &ord);
    if (rc == 1)
        *bucket = df_bucket(h, iw->bi);
    return rc;
}

int sims_docfile_writer_commit(docfile_writer *w, docfile_sizes *sizes)
{
    int rc = flush_block(w);
    if (!rc)
        rc = sims_spool_seal(w->table);
    if (!rc)
        rc = sims_recsort_finish(w->idents, (size_t)8 << 20);
    if (rc)
        goto fail;
    uint64_t n = w->n, nb = df_block_count(n);
    unsigned bf = df_bf(n), bi = df_bi(n), ob = df_ob(n), wbits = ob + DF_TAG_BITS;
    uint64_t bt = w->offset;
    /* Block table. */
    table_walk tw;
    tw.bf = bf;
    sims_spool_reader_init(&tw.rd, w->table);
    uint8_t tpage[16 * DF_TABLE_PAGE + 8];
    for (uint64_t p0 = 0, pg = 0; p0 < nb; p0 += DF_TABLE_PAGE, pg++) {
        uint64_t e = nb - p0 < DF_TABLE_PAGE ? nb - p0 : DF_TABLE_PAGE;
        for (uint64_t k = 0; k < e; k++) {
            uint64_t first = 0, end = 0;
            if ((rc = table_next(&tw, &first, &end)) != 1) {
                rc = rc ? rc : sims_fail(SIMSTORE_EIO, "document file: block table cut short");
                goto fail;
            }
            le_store64(tpage + 16 * k, first);
            le_store64(tpage + 16 * k + 8, end);
        }
        le_store64(tpage + 16 * e, sims_xxh3_64(tpage, 16 * e, DF_SEED_TABLE + pg));
        if ((rc = sims_outfile_write(&w->out, tpage, 16 * e + 8)))
            goto fail;
    }
    /* Fingerprint directory. */
    sims_spool_reader_init(&tw.rd, w->table);
    if ((rc = write_dir(w, bf, DF_SEED_FPDIR, fp_bucket_next, &tw)))
        goto fail;
    /* Id entries, in (hash, ordinal) order: the tag and the ordinal of each. */
    uint8_t ipage[8 * 48 + 8 + BITIO_WRITER_SLACK];
    for (uint64_t p0 = 0, pg = 0; p0 < n; p0 += DF_IDENT_PAGE, pg++) {
        uint64_t e = n - p0 < DF_IDENT_PAGE ? n - p0 : DF_IDENT_PAGE;
        size_t words = (size_t)df_ident_words(e, wbits);
        memset(ipage, 0, sizeof ipage);
        bitio_writer bw;
        bitio_writer_init(&bw, ipage, 8 * words);
        for (uint64_t k = 0; k < e; k++) {
            uint64_t h = 0, ord = 0;
            if ((rc = ident_next(w->idents, &h, &ord)) != 1) {
                rc = rc ? rc : sims_fail(SIMSTORE_EIO, "document file: id entries cut short");
                goto fail;
            }
            bitio_put(&bw, df_tag(h, bi) << ob | ord, wbits);
        }
        le_store64(ipage + 8 * words, sims_xxh3_64(ipage, 8 * words, DF_SEED_IDENT + pg));
        if ((rc = sims_outfile_write(&w->out, ipage, 8 * words + 8)))
            goto fail;
    }
    /* Id directory. */
    id_walk iw = {w->idents, bi};
    if ((rc = sims_recsort_rewind(w->idents)) ||
        (rc = write_dir(w, bi, DF_SEED_IDDIR, id_bucket_next, &iw)))
        goto fail;
    /* Header. */
    uint8_t h[DOCFILE_HEADER_BYTES] = {0};
    memcpy(h, DF_MAGIC, 8);
    le_store16(h + 8, DOCFILE_VERSION);
    le_store16(h + DF_H_SKETCH, (uint16_t)w->sketch_bytes);
    h[DF_H_BF] = (uint8_t)bf;
    h[DF_H_BI] = (uint8_t)bi;
    h[DF_H_OB] = (uint8_t)ob;
    le_store64(h + DF_H_COUNT, n);
    le_store64(h + DF_H_BT, bt);
    le_store64(h + DF_H_CHECKSUM, sims_xxh3_64(h, DF_H_CHECKSUM, DF_SEED_HEADER));
    if ((rc = sims_outfile_pwrite(&w->out, h, sizeof h, 0)))
        goto fail;
    if (sizes) {
        memset(sizes, 0, sizeof *sizes);
        sizes->blocks = w->block_bytes;
        sizes->block_table = df_table_bytes(nb);
        sizes->fp_dir = df_dir_bytes(bf);
        sizes->id_entries = df_ident_bytes(n, wbits);
        sizes->id_dir = df_dir_bytes(bi);
        sizes->total = DOCFILE_HEADER_BYTES + sizes->blocks + sizes->block_table + sizes->fp_dir +
                       sizes->id_entries + sizes->id_dir;
    }
    rc = sims_outfile_commit(&w->out);
    if (rc)
        goto fail;
    sims_docfile_writer_abort(w);
    return SIMSTORE_OK;
fail:
    sims_docfile_writer_abort(w);
    return rc;
}

void sims_docfile_writer_abort(docfile_writer *w)
{
    if (!w)
        return;
    if (w->opened)
        sims_outfile_abort(&w->out); /* a no-op once committed */
    free(w->ids);
    free(w->meta);
    free(w->paras);
    free(w->sketches);
    free(w->block);
    sims_spool_free(w->table);
    sims_recsort_free(w->idents);
    free(w);
}

uint64_t sims_docfile_id_hash(const void *id, size_t len)
{
    return sims_xxh3_64(id, len, DF_SEED_IDHASH);
}
