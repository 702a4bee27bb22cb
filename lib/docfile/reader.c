/* reader.c: reads a document file (format/docfile.md) without trusting it:
 * the header and section sizes checked at open, then every piece a lookup
 * reads (directory page, block-table page, id-entry page, record block)
 * checked against its checksum and bounded before use; sims_docfile_verify reads
 * and cross-checks everything. */
#include "docfile/docfile.h"

#include "codec/bitio.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"
#include "docfile/layout.h"
#include "sort/recsort.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Pieces checked once per reader (the file is immutable once published, as
 * a table file is): one bit each, in one array, by kind. */
enum { OK_BLOCK, OK_TABLE, OK_FDIR, OK_IDENT, OK_IDIR, OK_KINDS };

struct docfile_reader {
    sims_map map; /* when opened from a file */
    const uint8_t *data;
    uint64_t size;
    char *name;
    uint64_t n, nb;
    unsigned sketch_bytes, bf, bi, ob, w;
    uint64_t bt, fd, ie, di;
    _Atomic uint64_t *ok;       /* the checked bits */
    uint64_t ok_base[OK_KINDS]; /* each kind's first bit */
};

static int is_checked(const docfile_reader *r, int kind, uint64_t i)
{
    uint64_t bit = r->ok_base[kind] + i;
    return (int)(atomic_load_explicit(&r->ok[bit / 64], memory_order_acquire) >> (bit % 64) & 1);
}

static void set_checked(const docfile_reader *r, int kind, uint64_t i)
{
    uint64_t bit = r->ok_base[kind] + i;
    atomic_fetch_or_explicit(&r->ok[bit / 64], (uint64_t)1 << (bit % 64), memory_order_release);
}

/* The bits, zeroed (calloc: pages of a large array are not touched until a
 * piece of theirs is checked, so an open stays constant-time). */
static int alloc_checked(docfile_reader *r)
{
    uint64_t counts[OK_KINDS] = {
        r->nb,
        (r->nb + DF_TABLE_PAGE - 1) / DF_TABLE_PAGE,
        (df_dir_entries(r->bf) + DF_DIR_PAGE - 1) / DF_DIR_PAGE,
        (r->n + DF_IDENT_PAGE - 1) / DF_IDENT_PAGE,
        (df_dir_entries(r->bi) + DF_DIR_PAGE - 1) / DF_DIR_PAGE,
    };
    uint64_t bits = 0;
    for (int k = 0; k < OK_KINDS; k++) {
        r->ok_base[k] = bits;
        bits += counts[k];
    }
    r->ok = calloc((size_t)(bits / 64 + 1), sizeof *r->ok);
    return r->ok ? SIMSTORE_OK : sims_fail(SIMSTORE_ENOMEM, "out of memory opening %s", r->name);
}

/* ---- open ---------------------------------------------------------------------- */

static int open_bytes(docfile_reader *r)
{
    const uint8_t *h = r->data;
    if (r->size < DOCFILE_HEADER_BYTES)
        return SIMS_CORRUPT("%s: %llu bytes, shorter than a document file's header", r->name,
                            (unsigned long long)r->size);
    if (memcmp(h, DF_MAGIC, 8) != 0)
        return SIMS_CORRUPT("%s: not a document file (bad magic)", r->name);
    /* The version before the checksum: another version may lay out (and
     * checksum) its header otherwise. */
    if (le_load16(h + 8) != DOCFILE_VERSION)
        return sims_fail(SIMSTORE_EVERSION,
                         "%s: document file version %u unknown to this simstore (%s), which "
                         "reads version %u",
                         r->name, le_load16(h + 8), SIMSTORE_VERSION_STRING, DOCFILE_VERSION);
    if (le_load64(h + DF_H_CHECKSUM) != sims_xxh3_64(h, DF_H_CHECKSUM, DF_SEED_HEADER))
        return SIMS_CORRUPT("%s: header checksum mismatch", r->name);
    r->sketch_bytes = le_load16(h + DF_H_SKETCH);
    r->n = le_load64(h + DF_H_COUNT);
    r->bt = le_load64(h + DF_H_BT);
    unsigned s = r->sketch_bytes;
    if (s != 0 && s != 16 && s != 32 && s != 64 && s != 128 && s != 256)
        return SIMS_CORRUPT("%s: header: sketch size %u", r->name, s);
    if (r->n >= DOCFILE_MAX_DOCS)
        return SIMS_CORRUPT("%s: header: %llu documents (at most 2^40 - 1)", r->name,
                            (unsigned long long)r->n);
    if (h[15])
        return SIMS_CORRUPT("%s: header: reserved byte 15 set", r->name);
    for (unsigned i = 32; i < DF_H_CHECKSUM; i++)
        if (h[i])
            return SIMS_CORRUPT("%s: header: reserved byte %u set", r->name, i);
    r->nb = df_block_count(r->n);
    r->bf = h[DF_H_BF];
    r->bi = h[DF_H_BI];
    r->ob = h[DF_H_OB];
    if (r->bf != df_bf(r->n) || r->bi != df_bi(r->n) || r->ob != df_ob(r->n))
        return SIMS_CORRUPT("%s: header: directory bits %u/%u/%u are not those of %llu documents",
                            r->name, r->bf, r->bi, r->ob, (unsigned long long)r->n);
    r->w = r->ob + DF_TAG_BITS;
    /* Each block is at least its header, one id byte a document and its
     * check, so the blocks bound n before any size below is computed. */
    if (r->bt < DOCFILE_HEADER_BYTES || r->bt > r->size ||
        (r->bt - DOCFILE_HEADER_BYTES) / (DF_BLOCK_HEAD + 4 + 1) < r->nb ||
        (r->n == 0 && r->bt != DOCFILE_HEADER_BYTES))
        return SIMS_CORRUPT("%s: header: blocks end at %llu, not possible for %llu documents in "
                            "%llu bytes",
                            r->name, (unsigned long long)r->bt, (unsigned long long)r->n,
                            (unsigned long long)r->size);
    r->fd = r->bt + df_table_bytes(r->nb);
    r->ie = r->fd + df_dir_bytes(r->bf);
    r->di = r->ie + df_ident_bytes(r->n, r->w);
    uint64_t end = r->di + df_dir_bytes(r->bi);
    if (end != r->size)
        return SIMS_CORRUPT("%s: %llu bytes where the header makes %llu", r->name,
                            (unsigned long long)r->size, (unsigned long long)end);
    return alloc_checked(r);
}

static int reader_new(const char *name, docfile_reader **out)
{
    docfile_reader *r = calloc(1, sizeof *r);
    if (!r)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    r->name = strdup(name ? name : "document file");
    if (!r->name) {
        free(r);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    *out = r;
    return SIMSTORE_OK;
}

/* A reader of the file at path, mapped, or (path NULL) of data[0..size). */
static int reader_open(const char *name, const char *path, const uint8_t *data, size_t size,
                       docfile_reader **out)
{
    *out = NULL;
    docfile_reader *r = NULL;
    int rc = reader_new(name, &r);
    if (rc)
        return rc;
    if (path) {
        rc = sims_map_open(path, &r->map);
        data = r->map.data;
        size = r->map.size;
    }
    if (!rc) {
        r->data = data;
        r->size = size;
        rc = open_bytes(r);
    }
    if (rc) {
        sims_docfile_close(r);
        return rc;
    }
    *out = r;
    return SIMSTORE_OK;
}

int sims_docfile_open(const char *path, docfile_reader **out)
{
    return reader_open(path, path, NULL, 0, out);
}

int sims_docfile_open_memory(const uint8_t *data, size_t size, const char *name,
                             docfile_reader **out)
{
    return reader_open(name, NULL, data, size, out);
}

void sims_docfile_advise_huge(const docfile_reader *r)
{
    sims_map_advise_huge(&r->map);
}

void sims_docfile_close(docfile_reader *r)
{
    if (!r)
        return;
    if (r->map.data)
        sims_map_close(&r->map);
    free((void *)r->ok);
    free(r->name);
    free(r);
}

uint64_t sims_docfile_count(const docfile_reader *r)
{
    return r->n;
}

unsigned sims_docfile_sketch_bytes(const docfile_reader *r)
{
    return r->sketch_bytes;
}

const docfile_reader *sims_docfile_empty(void)
{
    static const docfile_reader none = {.name = (char *)"no document file"};
    return &none;
}

void sims_docfile_sizes_of(const docfile_reader *r, docfile_sizes *out)
{
    if (r->size == 0) {
        memset(out, 0, sizeof *out);
        return;
    }
    out->total = r->size;
    out->blocks = r->bt - DOCFILE_HEADER_BYTES;
    out->block_table = r->fd - r->bt;
    out->fp_dir = r->ie - r->fd;
    out->id_entries = r->di - r->ie;
    out->id_dir = r->size - r->di;
}

/* ---- checked pieces ------------------------------------------------------------- */

/* The pages a lookup has checked, so that it checks each once. */
typedef struct seen {
    uint64_t table_page, fdir_page, ident_page, idir_page;
} seen;

#define NOT_SEEN UINT64_MAX

static void seen_init(seen *s)
{
    s->table_page = s->fdir_page = s->ident_page = s->idir_page = NOT_SEEN;
}

/* Block-table entry i: its first fingerprint and end. */
static int table_entry(const docfile_reader *r, seen *s, uint64_t i, uint64_t *first, uint64_t *end)
{
    uint64_t page = i / DF_TABLE_PAGE;
    const uint8_t *p = r->data + r->bt + df_table_entry_offset(page * DF_TABLE_PAGE);
    if (s->table_page != page && !is_checked(r, OK_TABLE, page)) {
        uint64_t e = r->nb - page * DF_TABLE_PAGE;
        e = e < DF_TABLE_PAGE ? e : DF_TABLE_PAGE;
        if (le_load64(p + 16 * e) != sims_xxh3_64(p, 16 * e, DF_SEED_TABLE + page))
            return SIMS_CORRUPT("%s: block table page %llu: checksum mismatch", r->name,
                                (unsigned long long)page);
        set_checked(r, OK_TABLE, page);
    }
    s->table_page = page;
    p += 16 * (i % DF_TABLE_PAGE);
    *first = le_load64(p);
    *end = le_load64(p + 8);
    if (*end <= DOCFILE_HEADER_BYTES || *end > r->bt || (i + 1 == r->nb && *end != r->bt))
        return SIMS_CORRUPT("%s: block table entry %llu: block end %llu outside the blocks",
                            r->name, (unsigned long long)i, (unsigned long long)*end);
    return SIMSTORE_OK;
}

/* One of the two directories: where it is, its width, its checksum seed,
 * its checked bits, its name, and the bound of its entries. */
typedef struct dir_desc {
    uint64_t base;
    unsigned bits;
    uint64_t seed;
    int kind;
    const char *what;
    uint64_t max;
} dir_desc;

static dir_desc fp_dir(const docfile_reader *r)
{
    return (dir_desc){r->fd, r->bf, DF_SEED_FPDIR, OK_FDIR, "fingerprint directory", r->nb};
}

static dir_desc id_dir(const docfile_reader *r)
{
    return (dir_desc){r->di, r->bi, DF_SEED_IDDIR, OK_IDIR, "id directory", r->n};
}

/* Entry x of directory dd. */
static int dir_entry(const docfile_reader *r, const dir_desc *dd, uint64_t *seen_page, uint64_t x,
                     uint64_t *out)
{
    uint64_t entries = df_dir_entries(dd->bits), page = x / DF_DIR_PAGE;
    const uint8_t *p = r->data + dd->base + df_dir_entry_offset(page * DF_DIR_PAGE);
    if (*seen_page != page && !is_checked(r, dd->kind, page)) {
        uint64_t e = entries - page * DF_DIR_PAGE;
        e = e < DF_DIR_PAGE ? e : DF_DIR_PAGE;
        if (le_load64(p + 4 * e) != sims_xxh3_64(p, 4 * e, dd->seed + page))
            return SIMS_CORRUPT("%s: %s page %llu: checksum mismatch", r->name, dd->what,
                                (unsigned long long)page);
        set_checked(r, dd->kind, page);
    }
    *seen_page = page;
    *out = le_load32(p + 4 * (x % DF_DIR_PAGE));
    if (*out > dd->max || (x == 0 && *out != 0) || (x + 1 == entries && *out != dd->max))
        return SIMS_CORRUPT("%s: %s entry %llu: %llu out of range", r->name, dd->what,
                            (unsigned long long)x, (unsigned long long)*out);
    return SIMSTORE_OK;
}

/* The two entries x and x + 1 of directory dd, in order. */
static int dir_range(const docfile_reader *r, const dir_desc *dd, uint64_t *seen_page, uint64_t x,
                     uint64_t *lo, uint64_t *hi)
{
    int rc = dir_entry(r, dd, seen_page, x, lo);
    if (!rc)
        rc = dir_entry(r, dd, seen_page, x + 1, hi);
    if (!rc && *lo > *hi)
        rc = SIMS_CORRUPT("%s: %s entries %llu and %llu decrease", r->name, dd->what,
                          (unsigned long long)x, (unsigned long long)x + 1);
    return rc;
}

/* Id entry e: its tag and ordinal. */
static int ident_entry(const docfile_reader *r, seen *s, uint64_t e, unsigned *tag,
                       uint64_t *ordinal)
{
    uint64_t page = e / DF_IDENT_PAGE;
    uint64_t cnt = r->n - page * DF_IDENT_PAGE;
    cnt = cnt < DF_IDENT_PAGE ? cnt : DF_IDENT_PAGE;
    size_t bytes = (size_t)(8 * df_ident_words(cnt, r->w));
    const uint8_t *p = r->data + r->ie + page * df_ident_page_bytes(r->w);
    if (s->ident_page != page && !is_checked(r, OK_IDENT, page)) {
        if (le_load64(p + bytes) != sims_xxh3_64(p, bytes, DF_SEED_IDENT + page))
            return SIMS_CORRUPT("%s: id entry page %llu: checksum mismatch", r->name,
                                (unsigned long long)page);
        set_checked(r, OK_IDENT, page);
    }
    s->ident_page = page;
    uint64_t v = bitio_read_safe(p, bytes, (e % DF_IDENT_PAGE) * r->w, r->w);
    *ordinal = v & bitio_mask(r->ob);
    *tag = (unsigned)(v >> r->ob) & 0xFF;
    if (*ordinal >= r->n)
        return SIMS_CORRUPT("%s: id entry %llu: ordinal %llu of %llu documents", r->name,
                            (unsigned long long)e, (unsigned long long)*ordinal,
                            (unsigned long long)r->n);
    return SIMSTORE_OK;
}

/* ---- blocks --------------------------------------------------------------------- */

typedef struct dblock {
    uint64_t index;
    uint32_t c;
    unsigned rice, wi, wl, wm, wp, lb;
    uint64_t ib, int_mask, meta_mask, para_mask;
    const uint8_t *fixed; /* the fixed fields */
    size_t fixed_bytes;
    const uint8_t *ids, *meta, *sketches, *paras, *gaps;
    size_t gaps_bytes;
    /* Fingerprints decoded so far (fp[0 .. decoded)), and where the next
     * gap starts. */
    uint64_t fp[DOCFILE_BLOCK_DOCS];
    uint32_t decoded;
    uint64_t gpos;
    /* With every field decoded (`full`): each document's id and metadata
     * offsets (from ids and meta). */
    int full;
    int id_offsets; /* id_off holds each id's offset (else every id is lb bytes) */
    uint32_t id_off[DOCFILE_BLOCK_DOCS + 1], meta_off[DOCFILE_BLOCK_DOCS + 1];
    uint32_t para_off[DOCFILE_BLOCK_DOCS + 1]; /* in paragraphs, of those with a list */
} dblock;

static int id_cmp(const uint8_t *a, uint32_t la, const uint8_t *b, uint32_t lb)
{
    int c = memcmp(a, b, la < lb ? la : lb);
    return c ? c : (la < lb ? -1 : la > lb);
}

#define BLOCK_BAD(...) block_bad(r, b, __VA_ARGS__)

static int block_bad(const docfile_reader *r, uint64_t b, const char *what)
{
    return SIMS_CORRUPT("%s: record block %llu: %s", r->name, (unsigned long long)b, what);
}

static uint64_t fixed_field(const dblock *d, uint64_t pos, unsigned bits)
{
    return bitio_read_safe(d->fixed, d->fixed_bytes, pos, bits);
}

static uint32_t id_len_at(const dblock *d, uint32_t j)
{
    return d->lb + (uint32_t)fixed_field(d, (uint64_t)d->c * d->wi + (uint64_t)j * d->wl, d->wl);
}

/* Metadata length of the m-th document with metadata. */
static uint64_t meta_len_at(const dblock *d, uint32_t m)
{
    return fixed_field(d, (uint64_t)d->c * (d->wi + d->wl) + (uint64_t)m * d->wm, d->wm);
}

/* Paragraph count of the i-th document with a list (after the m metadata
 * lengths). */
static uint64_t para_count_at(const dblock *d, unsigned m, uint32_t i)
{
    return fixed_field(
        d, (uint64_t)d->c * (d->wi + d->wl) + (uint64_t)m * d->wm + (uint64_t)i * d->wp, d->wp);
}

/* Document j's id in an open block. */
static const uint8_t *id_of(const dblock *d, uint32_t j, uint32_t *len)
{
    if (!d->id_offsets) { /* wl = 0: every id lb bytes */
        *len = d->lb;
        return d->ids + (size_t)j * d->lb;
    }
    *len = d->id_off[j + 1] - d->id_off[j];
    return d->ids + d->id_off[j];
}

/* Decode the gaps up to document `upto` (exclusive) or to the first
 * fingerprint above `stop`, whichever comes first. Bounded by the gap
 * bytes whether or not the block was checked. */
static int decode_gaps(const docfile_reader *r, dblock *d, uint32_t upto, uint64_t stop)
{
    uint64_t b = d->index, limit = (uint64_t)d->gaps_bytes * 8;
    while (d->decoded < upto && d->fp[d->decoded - 1] <= stop) {
        /* The quotient and the low bits: the usual gap from one unchecked
         * 57-bit window wholly inside the gaps, any other through bounded
         * reads. */
        uint64_t win = (d->gpos >> 3) + 8 <= d->gaps_bytes ? bitio_peek_fast(d->gaps, d->gpos) : 0;
        unsigned q = win == UINT64_MAX ? 64 : (unsigned)__builtin_ctzll(~win);
        uint64_t low;
        if (win && q + 1 + d->rice <= BITIO_PEEK_BITS) {
            low = (win >> (q + 1)) & bitio_mask(d->rice);
        } else {
            win = bitio_read_safe(d->gaps, d->gaps_bytes, d->gpos, 64);
            q = win == UINT64_MAX ? 64 : (unsigned)__builtin_ctzll(~win);
            if (q > DF_RICE_MAX_Q)
                return BLOCK_BAD("fingerprint gap quotient above 63");
            low = bitio_read_safe(d->gaps, d->gaps_bytes, d->gpos + q + 1, d->rice);
        }
        d->gpos += q + 1 + d->rice;
        if (d->gpos > limit)
            return BLOCK_BAD("fingerprint gaps past the block");
        if (d->rice && (uint64_t)q > (UINT64_MAX >> d->rice))
            return BLOCK_BAD("fingerprint gap past 64 bits");
        uint64_t g = ((uint64_t)q << d->rice) | low, prev = d->fp[d->decoded - 1];
        if (g > UINT64_MAX - prev)
            return BLOCK_BAD("fingerprint past 2^64 - 1");
        d->fp[d->decoded++] = prev + g;
    }
    return SIMSTORE_OK;
}

/* A block's mask at *at when `present`: 8 bytes, not all zero, no bit at or
 * past the block's count (`live`); 0 when absent. */
static int read_mask(const docfile_reader *r, uint64_t b, const uint8_t *p, uint64_t len,
                     uint64_t *at, unsigned present, uint64_t live, const char *what,
                     uint64_t *mask)
{
    *mask = 0;
    if (!present)
        return SIMSTORE_OK;
    if (len < *at + 8)
        return SIMS_CORRUPT("%s: record block %llu: truncated %s mask", r->name,
                            (unsigned long long)b, what);
    *mask = le_load64(p + *at);
    *at += 8;
    if (!*mask || (*mask & ~live))
        return SIMS_CORRUPT("%s: record block %llu: %s mask empty or past the count", r->name,
                            (unsigned long long)b, what);
    return SIMSTORE_OK;
}

/* Open block b: its header and masks, where its parts lie, its first
 * fingerprint. A block not yet checked by this reader is checked whole
 * (checksum, every field, sizes, padding, order) and left `full`, every
 * fingerprint decoded; a checked one is only located (`full` only when
 * `want_full`), its gaps decoded as lookups need them. */
static int open_block(const docfile_reader *r, seen *s, uint64_t b, int want_full, dblock *d)
{
    uint64_t first = 0, end = 0, start = DOCFILE_HEADER_BYTES, prev_first = 0;
    int rc = table_entry(r, s, b, &first, &end);
    if (rc)
        return rc;
    if (b) {
        rc = table_entry(r, s, b - 1, &prev_first, &start);
        if (!rc && prev_first > first)
            rc = BLOCK_BAD("first fingerprint below the previous block's");
        if (rc)
            return rc;
    }
    if (end <= start || end - start < DF_BLOCK_HEAD + 4)
        return BLOCK_BAD("shorter than its header and check");
    const uint8_t *p = r->data + start;
    uint64_t len = end - start;
#if defined(__GNUC__) || defined(__clang__)
    /* The block's lines at once, not one miss after another. */
    for (uint64_t off = 0; off < len; off += 64)
        __builtin_prefetch(p + off, 0, 3);
#endif
    int checked = is_checked(r, OK_BLOCK, b);
    if (!checked && le_load32(p + len - 4) != (uint32_t)sims_xxh3_64(p, len - 4, DF_SEED_BLOCK + b))
        return BLOCK_BAD("checksum mismatch");
    len -= 4;
    uint64_t want = r->n - b * DOCFILE_BLOCK_DOCS;
    d->index = b;
    d->c = p[0];
    d->rice = p[1];
    d->wi = p[2];
    d->wl = p[3];
    d->wm = p[4];
    unsigned flags = p[5];
    d->lb = le_load16(p + 6);
    d->ib = le_load64(p + 8);
    uint32_t c = d->c;
    if (c != (want < DOCFILE_BLOCK_DOCS ? want : DOCFILE_BLOCK_DOCS))
        return BLOCK_BAD("document count is not the one its place gives");
    if (d->rice > 63 || d->wi > 64 || d->wl > 9 || d->wm > 32 || (flags & ~7u) || d->lb < 1 ||
        d->lb > DOCFILE_ID_MAX || ((flags & 2) != 0) != (d->wm != 0))
        return BLOCK_BAD("header field out of range");
    uint64_t at = DF_BLOCK_HEAD, live = c == 64 ? UINT64_MAX : ((uint64_t)1 << c) - 1;
    d->wp = 0;
    if ((rc = read_mask(r, b, p, len, &at, flags & 1, live, "JSON-integer", &d->int_mask)) ||
        (rc = read_mask(r, b, p, len, &at, flags & 2, live, "metadata", &d->meta_mask)) ||
        (rc = read_mask(r, b, p, len, &at, flags & 4, live, "paragraph", &d->para_mask)))
        return rc;
    if (flags & 4) { /* the paragraph counts' width follows their mask */
        if (len < at + 1 || p[at] < 1 || p[at] > 21)
            return BLOCK_BAD("paragraph count width missing or out of range");
        d->wp = p[at++];
    }
    unsigned m = (unsigned)__builtin_popcountll(d->meta_mask);
    unsigned np = (unsigned)__builtin_popcountll(d->para_mask);
    uint64_t fixed_bits =
        (uint64_t)c * (d->wi + d->wl) + (uint64_t)m * d->wm + (uint64_t)np * d->wp;
    if ((fixed_bits + 7) / 8 > len - at)
        return BLOCK_BAD("fixed fields past the block");
    d->fixed = p + at;
    d->fixed_bytes = (size_t)((fixed_bits + 7) / 8);
    at += d->fixed_bytes;
    /* The sizes of the byte fields: the sums of the lengths. */
    uint64_t id_sum = 0, meta_sum = 0;
    d->full = want_full || !checked;
    d->id_offsets = d->wl != 0 || d->full;
    if (!d->id_offsets) {
        id_sum = (uint64_t)c * d->lb;
    } else {
        d->id_off[0] = 0;
        for (uint32_t j = 0; j < c; j++) {
            uint32_t l = id_len_at(d, j);
            if (l > DOCFILE_ID_MAX)
                return BLOCK_BAD("id longer than 511 bytes");
            id_sum += l;
            d->id_off[j + 1] = (uint32_t)id_sum;
        }
    }
    d->meta_off[0] = 0;
    for (uint32_t i = 0; i < m; i++) {
        uint64_t l = meta_len_at(d, i);
        if (l == 0)
            return BLOCK_BAD("metadata of 0 bytes");
        meta_sum += l;
        if (meta_sum > len)
            return BLOCK_BAD("metadata past the block");
        d->meta_off[i + 1] = (uint32_t)meta_sum;
    }
    uint64_t para_sum = 0; /* in paragraphs */
    d->para_off[0] = 0;
    for (uint32_t i = 0; i < np; i++) {
        uint64_t l = para_count_at(d, m, i);
        if (l == 0 || l > DOCFILE_PARAGRAPHS_MAX)
            return BLOCK_BAD("paragraph list of 0 or more than 2^20 paragraphs");
        para_sum += l;
        if (para_sum > len / 8)
            return BLOCK_BAD("paragraph lists past the block");
        d->para_off[i + 1] = (uint32_t)para_sum;
    }
    uint64_t bytes = id_sum + meta_sum + (uint64_t)c * r->sketch_bytes + 8 * para_sum;
    if (bytes > len - at)
        return BLOCK_BAD("ids, metadata, sketches and paragraph lists past the block");
    d->ids = p + at;
    d->meta = d->ids + id_sum;
    d->sketches = r->sketch_bytes ? d->meta + meta_sum : NULL;
    d->paras = d->meta + meta_sum + (uint64_t)c * r->sketch_bytes;
    at += bytes;
    d->gaps = p + at;
    d->gaps_bytes = (size_t)(len - at);
    d->fp[0] = first;
    d->decoded = 1;
    d->gpos = 0;
    if (!d->full)
        return SIMSTORE_OK;
    /* Every gap, and the rest of the checks. */
    if ((rc = decode_gaps(r, d, c, UINT64_MAX)))
        return rc;
    if ((d->gpos + 7) / 8 != d->gaps_bytes)
        return BLOCK_BAD("fingerprint gaps do not end the block");
    if ((fixed_bits & 7) && (d->fixed[fixed_bits / 8] >> (fixed_bits & 7)))
        return BLOCK_BAD("padding bits set");
    if ((d->gpos & 7) && (d->gaps[d->gpos / 8] >> (d->gpos & 7)))
        return BLOCK_BAD("padding bits set");
    for (uint32_t j = 0; j < c; j++)
        if (fixed_field(d, (uint64_t)j * d->wi, d->wi) > UINT64_MAX - d->ib)
            return BLOCK_BAD("insertion number past 2^64 - 1");
    for (uint32_t j = 1; j < c; j++)
        if (d->fp[j] == d->fp[j - 1]) {
            uint32_t la, lb;
            const uint8_t *ia = id_of(d, j - 1, &la), *ib = id_of(d, j, &lb);
            if (id_cmp(ia, la, ib, lb) >= 0)
                return BLOCK_BAD("documents out of order");
        }
    set_checked(r, OK_BLOCK, b);
    return SIMSTORE_OK;
}

/* Document j of an open block (its fingerprint decoded). */
static void doc_of(const docfile_reader *r, const dblock *d, uint32_t j, docfile_doc *out)
{
    out->ordinal = d->index * DOCFILE_BLOCK_DOCS + j;
    out->fingerprint = d->fp[j];
    out->insertion = d->ib + fixed_field(d, (uint64_t)j * d->wi, d->wi);
    out->id = id_of(d, j, &out->id_len);
    out->id_is_int = (int)(d->int_mask >> j & 1);
    out->meta = NULL;
    out->meta_len = 0;
    if (d->meta_mask >> j & 1) {
        unsigned m = (unsigned)__builtin_popcountll(d->meta_mask & (((uint64_t)1 << j) - 1));
        out->meta = d->meta + d->meta_off[m];
        out->meta_len = d->meta_off[m + 1] - d->meta_off[m];
    }
    out->sketch = d->sketches ? d->sketches + (size_t)j * r->sketch_bytes : NULL;
    out->paragraphs = NULL;
    out->paragraph_count = 0;
    if (d->para_mask >> j & 1) {
        unsigned i = (unsigned)__builtin_popcountll(d->para_mask & (((uint64_t)1 << j) - 1));
        out->paragraphs = d->paras + 8 * (size_t)d->para_off[i];
        out->paragraph_count = d->para_off[i + 1] - d->para_off[i];
    }
}

/* ---- lookups -------------------------------------------------------------------- */

void sims_docfile_prefetch_fp(const docfile_reader *r, uint64_t fp)
{
#if defined(__GNUC__) || defined(__clang__)
    if (r->n == 0)
        return;
    /* The directory lines sims_docfile_find_fp(fp) reads first: its entries x
     * and x + 1, or all of their page while it is unchecked. */
    uint64_t x = df_fp_bucket(fp, r->bf), page = x / DF_DIR_PAGE;
    const uint8_t *p = r->data + r->fd;
    if (is_checked(r, OK_FDIR, page)) {
        __builtin_prefetch(p + df_dir_entry_offset(x), 0, 3);
        __builtin_prefetch(p + df_dir_entry_offset(x + 1), 0, 3);
    } else {
        uint64_t from = r->fd + df_dir_entry_offset(page * DF_DIR_PAGE);
        for (uint64_t off = from; off < from + 4 * DF_DIR_PAGE + 8 && off < r->size; off += 64)
            __builtin_prefetch(r->data + off, 0, 3);
    }
#else
    (void)r;
    (void)fp;
#endif
}

void sims_docfile_prefetch_fp_table(const docfile_reader *r, uint64_t fp)
{
#if defined(__GNUC__) || defined(__clang__)
    if (r->n == 0)
        return;
    /* The directory's entries as they are (unchecked: they only choose
     * which lines to ask for, bounded to the block table), then the block
     * table lines of the blocks between them and the one before: all of
     * their page while it is unchecked. */
    uint64_t x = df_fp_bucket(fp, r->bf);
    uint64_t lo = le_load32(r->data + r->fd + df_dir_entry_offset(x));
    uint64_t hi = le_load32(r->data + r->fd + df_dir_entry_offset(x + 1));
    lo = lo ? lo - 1 : 0;
    hi = hi < r->nb ? hi : r->nb - 1;
    if (lo > hi || hi - lo > 4)
        hi = lo < r->nb ? lo : r->nb - 1;
    for (uint64_t page = lo / DF_TABLE_PAGE; page <= hi / DF_TABLE_PAGE; page++) {
        uint64_t from = r->bt + df_table_entry_offset(page * DF_TABLE_PAGE), to;
        if (is_checked(r, OK_TABLE, page)) {
            uint64_t a = lo > page * DF_TABLE_PAGE ? lo : page * DF_TABLE_PAGE;
            uint64_t b = hi < (page + 1) * DF_TABLE_PAGE - 1 ? hi : (page + 1) * DF_TABLE_PAGE - 1;
            from = r->bt + df_table_entry_offset(a);
            to = r->bt + df_table_entry_offset(b) + 16;
        } else {
            to = from + 16 * DF_TABLE_PAGE + 8;
        }
        for (uint64_t off = from & ~(uint64_t)63; off < to && off < r->size; off += 64)
            __builtin_prefetch(r->data + off, 0, 3);
    }
#else
    (void)r;
    (void)fp;
#endif
}

int sims_docfile_find_fp(const docfile_reader *r, uint64_t fp,
                         int (*each)(void *ctx, const docfile_doc *d), void *ctx)
{
    if (r->n == 0)
        return SIMSTORE_OK;
    seen s;
    seen_init(&s);
    uint64_t lo = 0, hi = 0, first = 0, end = 0;
    dir_desc fdir = fp_dir(r);
    int rc = dir_range(r, &fdir, &s.fdir_page, df_fp_bucket(fp, r->bf), &lo, &hi);
    if (rc)
        return rc;
    /* s = the blocks whose first fingerprint is below fp, in [lo, hi]. */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if ((rc = table_entry(r, &s, mid, &first, &end)))
            return rc;
        if (first < fp)
            lo = mid + 1;
        else
            hi = mid;
    }
    dblock d;
    for (uint64_t b = lo ? lo - 1 : 0; b < r->nb; b++) {
        if ((rc = table_entry(r, &s, b, &first, &end)))
            return rc;
        if (first > fp)
            break;
        if ((rc = open_block(r, &s, b, 0, &d)))
            return rc;
        for (uint32_t j = 0; j < d.c; j++) {
            if (j >= d.decoded && (rc = decode_gaps(r, &d, j + 1, fp)))
                return rc;
            if (j >= d.decoded || d.fp[j] > fp)
                return SIMSTORE_OK;
            if (d.fp[j] < fp)
                continue;
            docfile_doc doc;
            doc_of(r, &d, j, &doc);
            if ((rc = each(ctx, &doc)))
                return rc;
        }
    }
    return SIMSTORE_OK;
}

int sims_docfile_get(const docfile_reader *r, uint64_t ordinal, docfile_doc *out)
{
    if (ordinal >= r->n)
        return sims_fail(SIMSTORE_EINVAL, "%s: ordinal %llu of %llu documents", r->name,
                         (unsigned long long)ordinal, (unsigned long long)r->n);
    seen s;
    seen_init(&s);
    dblock d;
    uint32_t j = (uint32_t)(ordinal % DOCFILE_BLOCK_DOCS);
    int rc = open_block(r, &s, ordinal / DOCFILE_BLOCK_DOCS, 0, &d);
    if (!rc)
        rc = decode_gaps(r, &d, j + 1, UINT64_MAX);
    if (rc)
        return rc;
    doc_of(r, &d, j, out);
    return SIMSTORE_OK;
}

int sims_docfile_find_id(const docfile_reader *r, const void *id, size_t len, docfile_doc *out)
{
    if (r->n == 0 || len == 0 || len > DOCFILE_ID_MAX)
        return 0;
    uint64_t h = sims_docfile_id_hash(id, len), lo, hi;
    unsigned want = (unsigned)df_tag(h, r->bi);
    seen s;
    seen_init(&s);
    dir_desc idir = id_dir(r);
    int rc = dir_range(r, &idir, &s.idir_page, df_bucket(h, r->bi), &lo, &hi);
    if (rc)
        return rc;
    dblock d;
    d.index = UINT64_MAX;
    for (uint64_t e = lo; e < hi; e++) {
        unsigned tag = 0;
        uint64_t ord = 0;
        if ((rc = ident_entry(r, &s, e, &tag, &ord)))
            return rc;
        if (tag != want)
            continue;
        uint64_t b = ord / DOCFILE_BLOCK_DOCS;
        if (d.index != b && (rc = open_block(r, &s, b, 0, &d)))
            return rc;
        uint32_t j = (uint32_t)(ord % DOCFILE_BLOCK_DOCS), got_len;
        const uint8_t *got = id_of(&d, j, &got_len);
        if (got_len == len && memcmp(got, id, len) == 0) {
            if ((rc = decode_gaps(r, &d, j + 1, UINT64_MAX)))
                return rc;
            doc_of(r, &d, j, out);
            return 1;
        }
    }
    return 0;
}

int sims_docfile_each(const docfile_reader *r, int (*each)(void *ctx, const docfile_doc *d),
                      void *ctx)
{
    seen s;
    seen_init(&s);
    dblock d;
    for (uint64_t b = 0; b < r->nb; b++) {
        int rc = open_block(r, &s, b, 1, &d);
        if (!rc)
            rc = decode_gaps(r, &d, d.c, UINT64_MAX);
        if (rc)
            return rc;
        for (uint32_t j = 0; j < d.c; j++) {
            docfile_doc doc;
            doc_of(r, &d, j, &doc);
            if ((rc = each(ctx, &doc)))
                return rc;
        }
    }
    return SIMSTORE_OK;
}

/* ---- verify --------------------------------------------------------------------- */

/* The ids' (hash, ordinal) keys, sorted in bounded memory as the writer
 * sorts them, are what the id entries and directory must be. */
#define VERIFY_MEMORY ((size_t)64 << 20)

typedef struct vstate {
    const docfile_reader *r;
    sims_recsort *keys;
    int have_last;
    uint64_t last_fp;
    uint8_t last_id[DOCFILE_ID_MAX];
    uint32_t last_len;
} vstate;

static int verify_doc(void *ctx, const docfile_doc *d)
{
    vstate *s = ctx;
    if (s->have_last &&
        (d->fingerprint < s->last_fp ||
         (d->fingerprint == s->last_fp && id_cmp(s->last_id, s->last_len, d->id, d->id_len) >= 0)))
        return SIMS_CORRUPT("%s: document %llu out of order", s->r->name,
                            (unsigned long long)d->ordinal);
    s->have_last = 1;
    s->last_fp = d->fingerprint;
    memcpy(s->last_id, d->id, d->id_len);
    s->last_len = d->id_len;
    uint8_t key[13];
    be_store64(key, sims_docfile_id_hash(d->id, d->id_len));
    for (int b = 0; b < 5; b++)
        key[8 + b] = (uint8_t)(d->ordinal >> (8 * (4 - b)));
    return sims_recsort_push(s->keys, key, sizeof key, NULL, 0);
}

static int next_key(const docfile_reader *r, sims_recsort *keys, uint64_t *h, uint64_t *ord)
{
    sims_rec rec;
    int rc = sims_recsort_next(keys, &rec);
    if (rc == 0)
        return SIMS_CORRUPT("%s: fewer ids than documents", r->name);
    if (rc < 0)
        return rc;
    *h = be_load64(rec.key);
    *ord = 0;
    for (int b = 0; b < 5; b++)
        *ord = *ord << 8 | rec.key[8 + b];
    return SIMSTORE_OK;
}

/* The id entries against the sorted keys; equal hashes' ids compared, so
 * that no id is stored twice. */
static int verify_ids(const docfile_reader *r, seen *s, sims_recsort *keys)
{
    uint64_t run_h = 0, *run = NULL;
    size_t run_len = 0, run_cap = 0;
    int rc = SIMSTORE_OK;
    for (uint64_t e = 0; !rc && e < r->n; e++) {
        uint64_t h = 0, ord = 0, got_ord = 0;
        unsigned tag = 0;
        if ((rc = next_key(r, keys, &h, &ord)) || (rc = ident_entry(r, s, e, &tag, &got_ord)))
            break;
        if (got_ord != ord || tag != df_tag(h, r->bi)) {
            rc = SIMS_CORRUPT("%s: id entry %llu is not the one the ids give", r->name,
                              (unsigned long long)e);
            break;
        }
        if (e == 0 || h != run_h)
            run_len = 0;
        run_h = h;
        docfile_doc a, b;
        for (size_t i = 0; !rc && i < run_len; i++) {
            rc = sims_docfile_get(r, run[i], &a);
            if (!rc)
                rc = sims_docfile_get(r, ord, &b);
            if (!rc && id_cmp(a.id, a.id_len, b.id, b.id_len) == 0)
                rc = SIMS_CORRUPT("%s: documents %llu and %llu have one id", r->name,
                                  (unsigned long long)a.ordinal, (unsigned long long)b.ordinal);
        }
        if (!rc && sims_grow((void **)&run, &run_cap, run_len + 1, sizeof *run, 4))
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory verifying %s", r->name);
        if (!rc)
            run[run_len++] = ord;
    }
    free(run);
    /* Unused bits of the last id page. */
    uint64_t rem = r->n % DF_IDENT_PAGE;
    if (!rc && rem) {
        const uint8_t *p = r->data + r->ie + (r->n / DF_IDENT_PAGE) * df_ident_page_bytes(r->w);
        uint64_t used = rem * r->w, words = df_ident_words(rem, r->w);
        for (uint64_t bit = used; !rc && bit < 64 * words; bit++)
            if (p[bit / 8] >> (bit % 8) & 1)
                rc = SIMS_CORRUPT("%s: id entries: unused bits set", r->name);
    }
    /* The id directory against the keys' buckets. */
    if (!rc)
        rc = sims_recsort_rewind(keys);
    uint64_t e = 0, h = 0, ord = 0, got = 0;
    dir_desc idir = id_dir(r);
    int more = r->n > 0;
    if (!rc && more)
        rc = next_key(r, keys, &h, &ord);
    for (uint64_t x = 0; !rc && x < df_dir_entries(r->bi); x++) {
        while (!rc && more && df_bucket(h, r->bi) < x) {
            e++;
            more = e < r->n;
            if (more)
                rc = next_key(r, keys, &h, &ord);
        }
        if (!rc)
            rc = dir_entry(r, &idir, &s->idir_page, x, &got);
        if (!rc && got != e)
            rc =
                SIMS_CORRUPT("%s: id directory entry %llu is %llu, the ids give %llu", r->name,
                             (unsigned long long)x, (unsigned long long)got, (unsigned long long)e);
    }
    return rc;
}

int sims_docfile_verify(const docfile_reader *r)
{
    vstate st;
    memset(&st, 0, sizeof st);
    st.r = r;
    int rc = sims_recsort_new(VERIFY_MEMORY, NULL, &st.keys);
    if (rc)
        return rc;
    rc = sims_docfile_each(r, verify_doc, &st);
    seen s;
    seen_init(&s);
    /* The fingerprint directory against the blocks' first fingerprints. */
    uint64_t blk = 0, first = 0, end = 0, got = 0;
    dir_desc fdir = fp_dir(r);
    for (uint64_t x = 0; !rc && x < df_dir_entries(r->bf); x++) {
        while (blk < r->nb && !(rc = table_entry(r, &s, blk, &first, &end)) &&
               df_fp_bucket(first, r->bf) < x)
            blk++;
        if (!rc)
            rc = dir_entry(r, &fdir, &s.fdir_page, x, &got);
        if (!rc && got != blk)
            rc = SIMS_CORRUPT("%s: fingerprint directory entry %llu is %llu, the blocks give %llu",
                              r->name, (unsigned long long)x, (unsigned long long)got,
                              (unsigned long long)blk);
    }
    if (!rc)
        rc = sims_recsort_finish(st.keys, (size_t)8 << 20);
    if (!rc)
        rc = verify_ids(r, &s, st.keys);
    sims_recsort_free(st.keys);
    return rc;
}
