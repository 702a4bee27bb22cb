/* reader.c: the table reader: maps a file (or borrows a buffer), validates
 * header and footer before trusting any count or offset, and leaves the
 * index in the mapping, each chunk and top page checked on its first use.
 * Serves whole-block decodes, range cursors and the fused Hamming-distance
 * probe. */
#include "table/table.h"

#include "common/bits.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"
#include "table/format.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct table_reader {
    sims_map map; /* the mapping when opened from a path */
    const uint8_t *data;
    size_t size;
    unsigned flags;
    table_info info;
    uint64_t group_count;
    uint32_t group_blocks;   /* blocks per checksum group */
    uint32_t first_slot;     /* block b is in group (b + first_slot) / group_blocks */
    const uint8_t *blocks;   /* data + blocks_offset */
    char *name;              /* path, or "memory", for messages */
    codec_huff_decoder huff; /* read-only after open */
    /* One bit per group whose checksum has been verified: the file is
     * immutable, so a group is hashed before the first decode of one of its
     * blocks, not on every query. */
    _Atomic uint64_t *verified;
    uint64_t max_first, max_other; /* the most values block 0 / another block holds */
    /* The index stays in the mapping (format/table.md, "Block index"); a
     * chunk or top page is checked on first use and its byte set to 1 here,
     * so it is checked once. */
    const uint8_t *index; /* data + index_offset */
    uint64_t chunk_count, top_pages;
    uint64_t chunks_begin, top_at; /* from index_offset: chunk 0, top page 0 */
    _Atomic uint8_t *top_ok;
    /* Per chunk, once checked: its header's fields packed (shape_pack), so
     * that reads of a checked chunk go straight to the words they need; 0
     * while unchecked. */
    _Atomic uint64_t *chunk_shape;
    /* The last key and the end of each chunk, copied from its top page when
     * the page is checked (before top_ok is set), so that searches run over
     * RAM: 16 bytes per 256 blocks. */
    _Atomic uint64_t *chunk_last, *chunk_end;
};

/* Values decoded per step of a search; small enough for the stack. */
#define SEARCH_CHUNK 256

/* ---- open ------------------------------------------------------------------- */

static int is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static int parse_header(table_reader *r)
{
    const uint8_t *h = r->data;
    table_info *in = &r->info;
    if (r->size < TBL_HEADER_BYTES || memcmp(h + TBL_H_MAGIC, TBL_MAGIC, TBL_MAGIC_BYTES) != 0) {
        if (r->size >= TBL_MAGIC_BYTES && memcmp(h, TBL_MAGIC, TBL_MAGIC_BYTES) == 0)
            return SIMS_CORRUPT("truncated: %zu bytes, shorter than the %u-byte header", r->size,
                                TBL_HEADER_BYTES);
        return SIMS_CORRUPT("not a simstore table: bad header magic at byte offset 0");
    }
    in->format_version = le_load32(h + TBL_H_VERSION);
    /* The version is checked before the checksum: a later version may lay
     * out (and checksum) its header differently. */
    if (in->format_version != TABLE_FORMAT_VERSION)
        return sims_fail(SIMSTORE_EVERSION,
                         "table format version %" PRIu32 " unknown to this simstore (%s), which "
                         "reads version %u only: %s",
                         in->format_version, SIMSTORE_VERSION_STRING, TABLE_FORMAT_VERSION,
                         in->format_version < TABLE_FORMAT_VERSION
                             ? "written by a pre-release build: rebuild the store"
                             : "written by a newer version");
    in->header_checksum = le_load64(h + TBL_H_CHECKSUM);
    uint64_t want = sims_xxh3_64(h, TBL_H_CHECKSUM, TBL_SEED_HEADER);
    if (in->header_checksum != want)
        return SIMS_CORRUPT("header checksum mismatch at byte offset %u (stored %016" PRIx64
                            ", computed %016" PRIx64 ")",
                            TBL_H_CHECKSUM, in->header_checksum, want);
    if (le_load32(h + TBL_H_HEADER_BYTES) != TBL_HEADER_BYTES)
        return SIMS_CORRUPT("header size %" PRIu32 " at byte offset %u, must be %u",
                            le_load32(h + TBL_H_HEADER_BYTES), TBL_H_HEADER_BYTES,
                            TBL_HEADER_BYTES);
    if (!is_zero(h + TBL_H_RESERVED1, 3) || le_load32(h + TBL_H_FLAGS) != 0 ||
        !is_zero(h + TBL_H_RESERVED2, TBL_H_CHECKSUM - TBL_H_RESERVED2))
        return SIMS_CORRUPT("reserved header bytes (offsets 21..23, 36..39, 192..247) not zero");

    table_params *p = &in->params;
    p->block_bytes = le_load32(h + TBL_H_BLOCK_BYTES);
    if (!simstore_block_bytes_valid(p->block_bytes))
        return SIMS_CORRUPT("block size %" PRIu32 " at byte offset %u is not a power of two in "
                            "[%u, %u]",
                            p->block_bytes, TBL_H_BLOCK_BYTES, SIMSTORE_MIN_BLOCK_BYTES,
                            SIMSTORE_MAX_BLOCK_BYTES);
    p->prefix_bits = h[TBL_H_PREFIX_BITS];
    if (p->prefix_bits > 64)
        return SIMS_CORRUPT("prefix bits %u at byte offset %u exceed 64", p->prefix_bits,
                            TBL_H_PREFIX_BITS);
    p->store_tag = le_load64(h + TBL_H_STORE_TAG);
    p->table_index = le_load32(h + TBL_H_TABLE_INDEX);
    memcpy(p->perm, h + TBL_H_PERM, 64);
    uint64_t seen = 0;
    for (unsigned i = 0; i < 64; i++) {
        if (p->perm[i] > 63 || (seen >> p->perm[i] & 1))
            return SIMS_CORRUPT("permutation entry %u (byte offset %u) = %u: not a permutation "
                                "of 0..63",
                                i, TBL_H_PERM + i, p->perm[i]);
        seen |= (uint64_t)1 << p->perm[i];
    }
    in->fp_count = le_load64(h + TBL_H_FP_COUNT);
    in->block_count = le_load64(h + TBL_H_BLOCK_COUNT);
    in->blocks_offset = le_load64(h + TBL_H_BLOCKS_OFFSET);
    if (in->blocks_offset != tbl_blocks_offset(p->block_bytes))
        return SIMS_CORRUPT("blocks offset %" PRIu64 " at byte offset %u, must be %" PRIu64
                            " for %" PRIu32 "-byte blocks",
                            in->blocks_offset, TBL_H_BLOCKS_OFFSET,
                            tbl_blocks_offset(p->block_bytes), p->block_bytes);
    memcpy(in->code_lengths, h + TBL_H_CODE_LENGTHS, 64);
    int rc = sims_codec_huff_decoder_init(&r->huff, in->code_lengths);
    if (rc)
        return sims_fail_context(rc, "code lengths at byte offset %u", TBL_H_CODE_LENGTHS);
    in->header_bytes = TBL_HEADER_BYTES;
    return SIMSTORE_OK;
}

static int parse_footer(table_reader *r)
{
    table_info *in = &r->info;
    uint64_t size = r->size;
    if (size < TBL_HEADER_BYTES + TBL_FOOTER_BYTES)
        return SIMS_CORRUPT("truncated: %" PRIu64 " bytes, no room for the footer", size);
    uint64_t foff = size - TBL_FOOTER_BYTES;
    const uint8_t *f = r->data + foff;
    if (memcmp(f + TBL_F_MAGIC, TBL_FOOTER_MAGIC, TBL_MAGIC_BYTES) != 0)
        return SIMS_CORRUPT("truncated or damaged: no footer magic at byte offset %" PRIu64,
                            foff + TBL_F_MAGIC);
    uint64_t stored = le_load64(f + TBL_F_CHECKSUM);
    uint64_t want = sims_xxh3_64(f, TBL_F_CHECKSUM, TBL_SEED_FOOTER);
    if (stored != want)
        return SIMS_CORRUPT("footer checksum mismatch at byte offset %" PRIu64,
                            foff + TBL_F_CHECKSUM);
    if (le_load64(f + TBL_F_HEADER_CHECKSUM) != in->header_checksum)
        return SIMS_CORRUPT("footer (byte offset %" PRIu64 ") belongs to another header", foff);
    if (le_load64(f + TBL_F_BLOCK_COUNT) != in->block_count ||
        le_load64(f + TBL_F_FP_COUNT) != in->fp_count)
        return SIMS_CORRUPT("footer counts differ from the header's");
    in->index_offset = le_load64(f + TBL_F_INDEX_OFFSET);
    in->index_bytes = le_load64(f + TBL_F_INDEX_BYTES);
    in->index_checksum = le_load64(f + TBL_F_INDEX_CHECKSUM);
    in->footer_bytes = TBL_FOOTER_BYTES;

    /* Every offset is derived from the counts and checked against the file
     * size without overflow: block_count is bounded by the bytes there are. */
    uint64_t bb = in->params.block_bytes;
    uint64_t nb = in->block_count;
    if (foff < in->blocks_offset || nb > (foff - in->blocks_offset) / bb)
        return SIMS_CORRUPT("block count %" PRIu64 " does not fit in a %" PRIu64 "-byte file", nb,
                            size);
    in->blocks_bytes = nb * bb;
    uint64_t index_offset = in->blocks_offset + in->blocks_bytes;
    if (in->index_offset != index_offset)
        return SIMS_CORRUPT("index offset %" PRIu64 " in the footer, expected %" PRIu64,
                            in->index_offset, index_offset);
    if (foff - index_offset != in->index_bytes)
        return SIMS_CORRUPT("file size %" PRIu64 " does not match its layout (expected %" PRIu64
                            "): truncated or extended",
                            size, index_offset + in->index_bytes + TBL_FOOTER_BYTES);
    if ((nb == 0) != (in->fp_count == 0))
        return SIMS_CORRUPT("%" PRIu64 " fingerprints in %" PRIu64 " blocks", in->fp_count, nb);
    in->file_bytes = size;
    return SIMSTORE_OK;
}

/* ---- the index in the mapping, checked piece by piece ------------------------- */

/* Prefix the current message with the table and the index byte offset. */
static int index_fail(const table_reader *r, uint64_t at, int rc)
{
    return sims_fail_context(rc, "table %s: index (byte offset %" PRIu64 ")", r->name,
                             r->info.index_offset + at);
}

static uint64_t chunk_blocks(const table_reader *r, uint64_t c)
{
    uint64_t left = r->info.block_count - c * TBL_V3_CHUNK_BLOCKS;
    return left < TBL_V3_CHUNK_BLOCKS ? left : TBL_V3_CHUNK_BLOCKS;
}

/* Top entry c, from index_offset. */
static uint64_t top_entry_at(const table_reader *r, uint64_t c)
{
    return r->top_at + c * TBL_V3_TOP_ENTRY_BYTES + 8 * (c / TBL_V3_TOP_ENTRIES);
}

static uint64_t top_field(const table_reader *r, uint64_t c, unsigned field)
{
    return le_load64(r->index + top_entry_at(r, c) + field);
}

/* Whether top page pg's checksum holds; *at receives its offset. */
static int top_sum_ok(const table_reader *r, uint64_t pg, uint64_t *at)
{
    uint64_t first = pg * TBL_V3_TOP_ENTRIES;
    uint64_t n =
        r->chunk_count - first < TBL_V3_TOP_ENTRIES ? r->chunk_count - first : TBL_V3_TOP_ENTRIES;
    size_t bytes = (size_t)(n * TBL_V3_TOP_ENTRY_BYTES);
    *at = top_entry_at(r, first);
    return le_load64(r->index + *at + bytes) ==
           sims_xxh3_64(r->index + *at, bytes, TBL_SEED_TOP + pg);
}

/* Check top page pg (once): its checksum, then each entry against the one
 * before (the last of page pg - 1, whose checksum is checked too). */
static int top_check(const table_reader *r, uint64_t pg)
{
    if (atomic_load_explicit(&r->top_ok[pg], memory_order_acquire))
        return SIMSTORE_OK;
    uint64_t at, prev_at;
    if (!top_sum_ok(r, pg, &at))
        return index_fail(r, at, SIMS_CORRUPT("top page %" PRIu64 ": checksum mismatch", pg));
    uint64_t first = pg * TBL_V3_TOP_ENTRIES;
    uint64_t end =
        first + TBL_V3_TOP_ENTRIES < r->chunk_count ? first + TBL_V3_TOP_ENTRIES : r->chunk_count;
    if (pg && !top_sum_ok(r, pg - 1, &prev_at))
        return index_fail(r, prev_at,
                          SIMS_CORRUPT("top page %" PRIu64 ": checksum mismatch", pg - 1));
    uint64_t chunks_end = r->top_at;
    uint64_t last = 0, fp_end = 0, byte_end = r->chunks_begin;
    if (first) {
        last = top_field(r, first - 1, TBL_V3_TOP_LAST_KEY);
        fp_end = top_field(r, first - 1, TBL_V3_TOP_FP_END);
        byte_end = top_field(r, first - 1, TBL_V3_TOP_END);
    }
    for (uint64_t c = first; c < end; c++) {
        uint64_t k = top_field(r, c, TBL_V3_TOP_LAST_KEY);
        uint64_t f = top_field(r, c, TBL_V3_TOP_FP_END);
        uint64_t e = top_field(r, c, TBL_V3_TOP_END);
        uint64_t nb = chunk_blocks(r, c);
        uint64_t most = nb * r->max_other + (c ? 0 : r->max_first - r->max_other);
        uint64_t at_c = top_entry_at(r, c);
        if (c && k <= last)
            return index_fail(r, at_c,
                              SIMS_CORRUPT("chunk %" PRIu64 ": last key %016" PRIx64
                                           " not above the previous chunk's %016" PRIx64,
                                           c, k, last));
        if (f < fp_end || f - fp_end < nb || f - fp_end > most)
            return index_fail(r, at_c + TBL_V3_TOP_FP_END,
                              SIMS_CORRUPT("chunk %" PRIu64 ": fingerprint count %" PRIu64
                                           " after %" PRIu64 " cannot fill %" PRIu64 " blocks",
                                           c, f, fp_end, nb));
        if (e < byte_end || e - byte_end < TBL_C3_MIN_BYTES || (e - byte_end) % 8 || e > chunks_end)
            return index_fail(r, at_c + TBL_V3_TOP_END,
                              SIMS_CORRUPT("chunk %" PRIu64 ": end %" PRIu64 " after %" PRIu64
                                           " outside the chunks (%" PRIu64 "..%" PRIu64 ")",
                                           c, e, byte_end, r->chunks_begin, chunks_end));
        if (c + 1 == r->chunk_count && (f != r->info.fp_count || e != chunks_end))
            return index_fail(r, at_c,
                              SIMS_CORRUPT("last chunk ends at %" PRIu64 " fingerprints and byte "
                                           "%" PRIu64 ", the table has %" PRIu64 " and its "
                                           "chunks end at byte %" PRIu64,
                                           f, e, r->info.fp_count, chunks_end));
        last = k;
        fp_end = f;
        byte_end = e;
    }
    for (uint64_t c = first; c < end; c++) {
        atomic_store_explicit(&r->chunk_last[c], top_field(r, c, TBL_V3_TOP_LAST_KEY),
                              memory_order_relaxed);
        atomic_store_explicit(&r->chunk_end[c], top_field(r, c, TBL_V3_TOP_END),
                              memory_order_relaxed);
    }
    atomic_store_explicit(&r->top_ok[pg], 1, memory_order_release);
    return SIMSTORE_OK;
}

/* A chunk's keys and counts, read in place. */
typedef struct chunk_view {
    const uint8_t *low, *high, *counts;
    uint64_t high_words;
    unsigned low_bits, count_bits;
    uint32_t count_min;
    uint64_t base;     /* key i = base + (((select1(i) - i) << low_bits) | low i) */
    uint64_t prev_key; /* the key before the chunk's first (0 for chunk 0) */
    uint64_t last_key;
    uint64_t first, n; /* its blocks [first, first + n) */
} chunk_view;

static inline uint64_t sec_word(const uint8_t *sec, uint64_t w)
{
    return le_load64(sec + 8 * w);
}

/* The n <= 64 bits at bit pos of a section (LSB-first). */
static inline uint64_t sec_bits(const uint8_t *sec, uint64_t pos, unsigned n)
{
    if (n == 0)
        return 0;
    uint64_t w = pos >> 6;
    unsigned off = (unsigned)(pos & 63);
    uint64_t v = sec_word(sec, w) >> off;
    if (off + n > 64)
        v |= sec_word(sec, w + 1) << (64 - off);
    return n == 64 ? v : v & (((uint64_t)1 << n) - 1);
}

/* The position of the i-th (from 0) set bit of x, which has more than i. */
static inline unsigned select_in_word(uint64_t x, unsigned i)
{
    unsigned s = 0;
    for (;;) {
        unsigned pc = (unsigned)sims_popcount64(x & 0xFF);
        if (i < pc)
            break;
        i -= pc;
        x >>= 8;
        s += 8;
    }
    while (i--)
        x &= x - 1;
    return s + (unsigned)__builtin_ctzll(x);
}

/* The key whose high-bit one is at pos, as key i. */
static inline uint64_t chunk_key_at(const chunk_view *v, uint64_t i, uint64_t pos)
{
    return v->base + (((pos - i) << v->low_bits) | sec_bits(v->low, i * v->low_bits, v->low_bits));
}

/* Position of the i-th one of the key high bits (i < n). */
static uint64_t chunk_select1(const chunk_view *v, uint64_t i)
{
    for (uint64_t w = 0;; w++) {
        uint64_t x = sec_word(v->high, w);
        unsigned pc = (unsigned)sims_popcount64(x);
        if (i < pc)
            return 64 * w + select_in_word(x, (unsigned)i);
        i -= pc;
    }
}

/* The first one at position >= pos (one exists there). */
static uint64_t chunk_next_one(const chunk_view *v, uint64_t pos)
{
    uint64_t w = pos >> 6;
    uint64_t x = sec_word(v->high, w) & (~(uint64_t)0 << (pos & 63));
    while (!x)
        x = sec_word(v->high, ++w);
    return 64 * w + (unsigned)__builtin_ctzll(x);
}

static uint32_t chunk_count_of(const chunk_view *v, uint64_t i)
{
    return v->count_min + (uint32_t)sec_bits(v->counts, i * v->count_bits, v->count_bits);
}

/* Keys i - 1 (the previous chunk's last for i = 0) and i. */
static void chunk_pair(const chunk_view *v, uint64_t i, uint64_t *prev, uint64_t *key)
{
    if (i == 0) {
        *prev = v->prev_key;
        *key = chunk_key_at(v, 0, chunk_select1(v, 0));
        return;
    }
    uint64_t p = chunk_select1(v, i - 1);
    *prev = chunk_key_at(v, i - 1, p);
    *key = chunk_key_at(v, i, chunk_next_one(v, p + 1));
}

/* The first i with key i >= x (x <= the chunk's last key), with keys i - 1
 * and i: the zero that ends the high parts below x's, then forward. */
static uint64_t chunk_find(const chunk_view *v, uint64_t x, uint64_t *prev, uint64_t *key,
                           uint64_t *at)
{
    uint64_t rel = x < v->base ? 0 : x - v->base;
    uint64_t h = rel >> v->low_bits;
    uint64_t pos = 0, i = 0;
    if (h) {
        /* The zero numbered h - 1 ends the keys of high part h - 1. */
        uint64_t want = h - 1;
        for (uint64_t w = 0;; w++) {
            uint64_t z = ~sec_word(v->high, w);
            unsigned pc = (unsigned)sims_popcount64(z);
            if (want < pc) {
                pos = 64 * w + select_in_word(z, (unsigned)want) + 1;
                break;
            }
            want -= pc;
        }
        i = pos - h;
    }
    uint64_t before = i ? chunk_key_at(v, i - 1, chunk_select1(v, i - 1)) : v->prev_key;
    for (;; i++) {
        uint64_t q = chunk_next_one(v, pos);
        uint64_t k = chunk_key_at(v, i, q);
        if (k >= x || i + 1 == v->n) {
            *prev = before;
            *key = k;
            *at = q;
            return i;
        }
        before = k;
        pos = q + 1;
    }
}

/* Check chunk c completely: checksum, header, sections, keys and counts
 * against each other and against its top entries. */
static int chunk_check(const table_reader *r, uint64_t c, const chunk_view *v, uint64_t begin,
                       uint64_t end, uint64_t fps)
{
    const uint8_t *p = r->index + begin;
    size_t size = (size_t)(end - begin);
    if (le_load64(p + size - 8) != sims_xxh3_64(p, size - 8, TBL_SEED_CHUNK + c))
        return index_fail(r, begin, SIMS_CORRUPT("chunk %" PRIu64 ": checksum mismatch", c));
    uint64_t n = v->n;
    uint64_t used = n * v->low_bits;
    if (used % 64 && sec_word(v->low, used / 64) >> (used % 64))
        return index_fail(r, begin,
                          SIMS_CORRUPT("chunk %" PRIu64 ": nonzero bits after the last key low "
                                       "part",
                                       c));
    used = n * v->count_bits;
    if (used % 64 && sec_word(v->counts, used / 64) >> (used % 64))
        return index_fail(r, begin,
                          SIMS_CORRUPT("chunk %" PRIu64 ": nonzero bits after the last count", c));
    uint64_t ones = 0;
    for (uint64_t w = 0; w < v->high_words; w++)
        ones += (uint64_t)sims_popcount64(sec_word(v->high, w));
    if (ones != n || sec_word(v->high, v->high_words - 1) == 0)
        return index_fail(r, begin,
                          SIMS_CORRUPT("chunk %" PRIu64 ": %" PRIu64
                                       " key high bits set in %" PRIu64 " words, expected %" PRIu64
                                       " ending in the last word",
                                       c, ones, v->high_words, n));
    uint64_t prev = v->prev_key, total = 0, pos = 0, key = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t b = v->first + i;
        pos = chunk_next_one(v, pos);
        uint64_t hp = pos - i;
        pos++;
        if (hp > (UINT64_MAX >> v->low_bits) ||
            ((hp << v->low_bits) | sec_bits(v->low, i * v->low_bits, v->low_bits)) >
                UINT64_MAX - v->base)
            return index_fail(r, begin, SIMS_CORRUPT("block %" PRIu64 ": key past 2^64 - 1", b));
        key = chunk_key_at(v, i, pos - 1);
        uint64_t count = chunk_count_of(v, i);
        if (count == 0 || count > (b ? r->max_other : r->max_first))
            return index_fail(r, begin,
                              SIMS_CORRUPT("block %" PRIu64 ": count %" PRIu64
                                           " outside 1..%" PRIu64,
                                           b, count, b ? r->max_other : r->max_first));
        if ((b ? key <= prev || key - prev < count : key < count - 1))
            return index_fail(r, begin,
                              SIMS_CORRUPT("block %" PRIu64 ": key %016" PRIx64
                                           " cannot follow the previous key with %" PRIu64
                                           " values",
                                           b, key, count));
        prev = key;
        total += count;
    }
    if (key != v->last_key || total != fps)
        return index_fail(r, begin,
                          SIMS_CORRUPT("chunk %" PRIu64 ": last key %016" PRIx64 " and %" PRIu64
                                       " fingerprints, its top entry says %016" PRIx64
                                       " and %" PRIu64,
                                       c, key, total, v->last_key, fps));
    return SIMSTORE_OK;
}

/* The last key and end of chunk c, whose top page is checked. */
static uint64_t last_of(const table_reader *r, uint64_t c)
{
    return atomic_load_explicit(&r->chunk_last[c], memory_order_relaxed);
}

static uint64_t end_of(const table_reader *r, uint64_t c)
{
    return atomic_load_explicit(&r->chunk_end[c], memory_order_relaxed);
}

/* Open chunk c for reading (checking it, and the top entries it needs,
 * on first use). */
static int chunk_open(const table_reader *r, uint64_t c, chunk_view *v)
{
    int rc = top_check(r, c / TBL_V3_TOP_ENTRIES);
    if (!rc && c && (c - 1) / TBL_V3_TOP_ENTRIES != c / TBL_V3_TOP_ENTRIES)
        rc = top_check(r, (c - 1) / TBL_V3_TOP_ENTRIES);
    if (rc)
        return rc;
    uint64_t begin = c ? end_of(r, c - 1) : r->chunks_begin;
    uint64_t end = end_of(r, c);
    const uint8_t *p = r->index + begin;
    v->first = c * TBL_V3_CHUNK_BLOCKS;
    v->n = chunk_blocks(r, c);
    v->prev_key = c ? last_of(r, c - 1) : 0;
    v->base = c ? v->prev_key + 1 : 0;
    v->last_key = last_of(r, c);
    uint64_t shape = atomic_load_explicit(&r->chunk_shape[c], memory_order_relaxed);
    int checked = shape != 0;
    if (checked) {
        v->low_bits = (unsigned)(shape & 63);
        v->count_bits = (unsigned)(shape >> 6 & 63);
        v->count_min = (uint32_t)(shape >> 12 & 0xFFFFF);
        v->high_words = shape >> 32 & 0x7FFFFFFF;
    } else {
        v->low_bits = p[TBL_C3_LOW_BITS];
        v->count_bits = p[TBL_C3_COUNT_BITS];
        v->count_min = le_load32(p + TBL_C3_COUNT_MIN);
        v->high_words = le_load32(p + TBL_C3_HIGH_WORDS);
    }
    if (!checked) {
        /* The sizes first: everything after reads inside [begin, end). */
        uint64_t words = (end - begin - TBL_C3_HEADER_BYTES - 8) / 8;
        uint64_t lw = tbl_key_low_words(v->n, v->low_bits > 63 ? 63 : v->low_bits);
        uint64_t cw = (v->n * v->count_bits + 63) / 64;
        if (v->low_bits > 63 || v->count_bits > TBL_MAX_COUNT_BITS ||
            (p[TBL_C3_RESERVED] | p[TBL_C3_RESERVED + 1]) != 0 ||
            le_load32(p + TBL_C3_RESERVED2) != 0 || v->high_words == 0 || v->high_words > words ||
            lw + cw != words - v->high_words)
            return index_fail(
                r, begin,
                SIMS_CORRUPT("chunk %" PRIu64 ": header (key low bits %u, count "
                             "bits %u, %" PRIu64 " key high words, reserved "
                             "fields) does not fit its %" PRIu64 " bytes and %" PRIu64 " blocks",
                             c, v->low_bits, v->count_bits, v->high_words, end - begin, v->n));
    }
    v->low = p + TBL_C3_HEADER_BYTES;
    v->high = v->low + 8 * tbl_key_low_words(v->n, v->low_bits);
    v->counts = v->high + 8 * v->high_words;
    if (!checked) {
        uint64_t fps_before = c ? top_field(r, c - 1, TBL_V3_TOP_FP_END) : 0;
        rc = chunk_check(r, c, v, begin, end, top_field(r, c, TBL_V3_TOP_FP_END) - fps_before);
        if (rc)
            return rc;
        /* Fields too wide to pack (no writer makes them) leave the chunk
         * to be checked again at each use: correct, slower. */
        if (v->count_min < (1u << 20) && v->high_words < (1ull << 31))
            atomic_store_explicit(&r->chunk_shape[c],
                                  (uint64_t)v->low_bits | (uint64_t)v->count_bits << 6 |
                                      (uint64_t)v->count_min << 12 | v->high_words << 32 |
                                      (uint64_t)1 << 63,
                                  memory_order_relaxed);
    }
    return SIMSTORE_OK;
}

static int top_ok(const table_reader *r, uint64_t page)
{
    return atomic_load_explicit(&r->top_ok[page], memory_order_acquire) != 0;
}

/* First block with key >= x (block_count if none), keys before and at it,
 * its chunk open in *v and its key's position there in *at. `hint`: a
 * chunk that may be the one (UINT64_MAX: none), taken when its top entries
 * (checked) say it is: its last key >= x, the previous chunk's below. */
static int v3_find(const table_reader *r, uint64_t x, uint64_t hint, uint64_t *first,
                   uint64_t *prev, uint64_t *key, chunk_view *v, uint64_t *at)
{
    *first = r->info.block_count;
    *prev = *key = 0;
    if (hint < r->chunk_count && top_ok(r, hint / TBL_V3_TOP_ENTRIES) &&
        (hint == 0 || top_ok(r, (hint - 1) / TBL_V3_TOP_ENTRIES)) && last_of(r, hint) >= x &&
        (hint == 0 || last_of(r, hint - 1) < x)) {
        int rc = chunk_open(r, hint, v);
        if (rc)
            return rc;
        *first = v->first + chunk_find(v, x, prev, key, at);
        return SIMSTORE_OK;
    }
    uint64_t lo = 0, hi = r->top_pages;
    while (lo < hi) { /* the first page whose last key >= x */
        uint64_t mid = lo + (hi - lo) / 2;
        int rc = top_check(r, mid);
        if (rc)
            return rc;
        uint64_t last = (mid + 1) * TBL_V3_TOP_ENTRIES;
        last = (last < r->chunk_count ? last : r->chunk_count) - 1;
        if (last_of(r, last) < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == r->top_pages)
        return SIMSTORE_OK;
    uint64_t clo = lo * TBL_V3_TOP_ENTRIES, chi = clo + TBL_V3_TOP_ENTRIES;
    chi = chi < r->chunk_count ? chi : r->chunk_count;
    while (clo < chi) { /* the first chunk whose last key >= x */
        uint64_t mid = clo + (chi - clo) / 2;
        if (last_of(r, mid) < x)
            clo = mid + 1;
        else
            chi = mid;
    }
    int rc = chunk_open(r, clo, v);
    if (rc)
        return rc;
    *first = v->first + chunk_find(v, x, prev, key, at);
    return SIMSTORE_OK;
}

/* The index at open: the layout from the counts; nothing of it is read but
 * the padding after the group checksums. */
static int parse_index_layout(table_reader *r)
{
    table_info *in = &r->info;
    uint64_t nb = in->block_count;
    uint64_t groups = tbl_group_count(nb, in->params.block_bytes);
    uint64_t chunks = tbl_v3_chunk_count(nb);
    uint64_t gbytes = tbl_v3_groups_bytes(groups), tbytes = tbl_v3_top_bytes(chunks);
    if (in->index_checksum != 0)
        return SIMS_CORRUPT("index checksum %016" PRIx64 " in the footer (byte offset %" PRIu64
                            "): the writer writes 0",
                            in->index_checksum,
                            in->file_bytes - TBL_FOOTER_BYTES + TBL_F_INDEX_CHECKSUM);
    /* nb is bounded by the file's size, so none of these overflow. */
    if (in->index_bytes < gbytes + tbytes ||
        in->index_bytes - gbytes - tbytes < chunks * TBL_C3_MIN_BYTES ||
        (chunks == 0 && in->index_bytes != 0))
        return SIMS_CORRUPT("index size %" PRIu64 " in the footer is too small for %" PRIu64
                            " blocks",
                            in->index_bytes, nb);
    r->index = r->data + in->index_offset;
    if (!is_zero(r->index + 4 * groups, (size_t)(gbytes - 4 * groups)))
        return SIMS_CORRUPT("padding after the group checksums (byte offset %" PRIu64 ") not zero",
                            in->index_offset + 4 * groups);
    r->chunk_count = chunks;
    r->top_pages = tbl_v3_top_pages(chunks);
    r->chunks_begin = gbytes;
    r->top_at = in->index_bytes - tbytes;
    r->chunk_shape = calloc((size_t)(chunks ? chunks : 1), sizeof *r->chunk_shape);
    r->top_ok = calloc((size_t)(r->top_pages ? r->top_pages : 1), 1);
    r->chunk_last = calloc((size_t)(chunks ? chunks : 1), sizeof *r->chunk_last);
    r->chunk_end = calloc((size_t)(chunks ? chunks : 1), sizeof *r->chunk_end);
    if (!r->chunk_shape || !r->top_ok || !r->chunk_last || !r->chunk_end)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for %" PRIu64 " index chunks", chunks);
    r->group_count = groups;
    r->group_blocks = tbl_group_blocks(in->params.block_bytes);
    r->first_slot = tbl_group_first_slot(in->params.block_bytes);
    in->key_ram_bytes = 24 * chunks + r->top_pages;
    return SIMSTORE_OK;
}

/* ---- keys and counts of blocks ------------------------------------------------ */

static uint32_t count_of(const table_reader *r, uint64_t b)
{
    chunk_view v;
    return chunk_open(r, b / TBL_V3_CHUNK_BLOCKS, &v) ? 0
                                                      : chunk_count_of(&v, b % TBL_V3_CHUNK_BLOCKS);
}

/* Keys b - 1 (any value for b = 0) and b, and count b (b < block_count). */
static int index_block(const table_reader *r, uint64_t b, uint64_t *prev, uint64_t *key,
                       uint32_t *count)
{
    chunk_view v;
    int rc = chunk_open(r, b / TBL_V3_CHUNK_BLOCKS, &v);
    if (rc)
        return rc;
    chunk_pair(&v, b % TBL_V3_CHUNK_BLOCKS, prev, key);
    *count = chunk_count_of(&v, b % TBL_V3_CHUNK_BLOCKS);
    return SIMSTORE_OK;
}

/* Keys and counts of consecutive blocks: the walk keeps the chunk open
 * and steps to the next one-bit of its key high bits, instead of a select
 * per block. */
typedef struct key_walk {
    chunk_view v;
    uint64_t chunk; /* the open chunk, or UINT64_MAX */
    uint64_t pos;   /* the high-bit one of the last key */
    uint64_t key;   /* the last key */
} key_walk;

/* Keys b - 1 and b and count b, for b = the last block asked + 1, or any
 * block the first time (w->chunk = UINT64_MAX). */
static int walk_block(const table_reader *r, key_walk *w, uint64_t b, uint64_t *prev, uint64_t *key,
                      uint32_t *count)
{
    uint64_t c = b / TBL_V3_CHUNK_BLOCKS, i = b % TBL_V3_CHUNK_BLOCKS;
    if (c == w->chunk) {
        *prev = w->key;
        w->pos = chunk_next_one(&w->v, w->pos + 1);
    } else {
        int rc = chunk_open(r, c, &w->v);
        if (rc)
            return rc;
        w->chunk = c;
        if (i == 0) {
            *prev = w->v.prev_key;
            w->pos = chunk_select1(&w->v, 0);
        } else {
            uint64_t p = chunk_select1(&w->v, i - 1);
            *prev = chunk_key_at(&w->v, i - 1, p);
            w->pos = chunk_next_one(&w->v, p + 1);
        }
    }
    *key = w->key = chunk_key_at(&w->v, i, w->pos);
    *count = chunk_count_of(&w->v, i);
    return SIMSTORE_OK;
}

/* Key b (b < block_count); 0 when its chunk is damaged. */
static uint64_t index_key(const table_reader *r, uint64_t b)
{
    uint64_t prev, key;
    uint32_t count;
    return index_block(r, b, &prev, &key, &count) ? 0 : key;
}

/* sims_table_reader_find_block with the keys before and at the block found.
 * On damage: block 0 (format/table.md: a scan from there meets
 * the damage before it could pass x). */
static uint64_t index_find(const table_reader *r, uint64_t x, uint64_t *prev, uint64_t *key)
{
    uint64_t first, at;
    chunk_view v;
    if (v3_find(r, x, UINT64_MAX, &first, prev, key, &v, &at))
        return *prev = *key = 0;
    return first;
}

static uint32_t group_sum(const table_reader *r, uint64_t g)
{
    return le_load32(r->index + 4 * g);
}

int sims_table_reader_check_index(const table_reader *r)
{
    for (uint64_t pg = 0; pg < r->top_pages; pg++) {
        int rc = top_check(r, pg);
        if (rc)
            return rc;
    }
    for (uint64_t c = 0; c < r->chunk_count; c++) {
        chunk_view v;
        int rc = chunk_open(r, c, &v);
        if (rc)
            return rc;
    }
    return SIMSTORE_OK;
}

static int parse_index(table_reader *r)
{
    table_info *in = &r->info;
    if (!is_zero(r->data + TBL_HEADER_BYTES, (size_t)(in->blocks_offset - TBL_HEADER_BYTES)))
        return SIMS_CORRUPT("padding between header and blocks (bytes %u..%" PRIu64 ") not zero",
                            TBL_HEADER_BYTES, in->blocks_offset - 1);
    r->blocks = r->data + in->blocks_offset;
    size_t bb = in->params.block_bytes;
    /* A block's last value is its key, which the index holds, not coded:
     * one more value fits than the code alone would hold. */
    r->max_first = sims_codec_block_max_count(bb, r->huff.min_len, 1) + 1;
    r->max_other = sims_codec_block_max_count(bb, r->huff.min_len, 0) + 1;
    return parse_index_layout(r);
}

static int reader_open(table_reader *r, unsigned flags)
{
    if (flags & ~TABLE_SKIP_BLOCK_CHECKSUMS)
        return sims_fail(SIMSTORE_EINVAL, "unknown table open flags %#x", flags);
    r->flags = flags;
    int rc = parse_header(r);
    if (!rc)
        rc = parse_footer(r);
    if (!rc)
        rc = parse_index(r);
    if (!rc && !(flags & TABLE_SKIP_BLOCK_CHECKSUMS)) {
        size_t words = (size_t)(r->group_count + 63) / 64;
        r->verified = calloc(words ? words : 1, sizeof *r->verified);
        if (!r->verified)
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory for a table's block bitmap");
    }
    return rc;
}

void sims_table_reader_advise_huge(const table_reader *r)
{
    sims_map_advise_huge(&r->map);
}

void sims_table_reader_close(table_reader *r)
{
    if (!r)
        return;
    sims_map_close(&r->map);
    free((void *)r->verified);
    free((void *)r->chunk_shape);
    free((void *)r->top_ok);
    free((void *)r->chunk_last);
    free((void *)r->chunk_end);
    free(r->name);
    free(r);
}

static table_reader *reader_alloc(const char *name)
{
    table_reader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->name = strdup(name);
    if (!r->name) {
        free(r);
        return NULL;
    }
    return r;
}

int sims_table_reader_open_memory(const uint8_t *data, size_t size, unsigned flags,
                                  table_reader **out)
{
    *out = NULL;
    table_reader *r = reader_alloc("memory");
    if (!r)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory opening a table");
    r->data = data;
    r->size = size;
    int rc = reader_open(r, flags);
    if (rc) {
        sims_table_reader_close(r);
        return sims_fail_context(rc, "table in memory");
    }
    *out = r;
    return SIMSTORE_OK;
}

int sims_table_reader_open(const char *path, unsigned flags, table_reader **out)
{
    *out = NULL;
    table_reader *r = reader_alloc(path);
    if (!r)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory opening %s", path);
    int rc = sims_map_open(path, &r->map);
    if (!rc) {
        r->data = r->map.data;
        r->size = r->map.size;
        rc = reader_open(r, flags);
        if (rc)
            rc = sims_fail_context(rc, "table %s", path);
    }
    if (rc) {
        sims_table_reader_close(r);
        return rc;
    }
    *out = r;
    return SIMSTORE_OK;
}

const table_info *sims_table_reader_info(const table_reader *r)
{
    return &r->info;
}

uint64_t sims_table_reader_key(const table_reader *r, uint64_t block)
{
    return block < r->info.block_count ? index_key(r, block) : 0;
}

/* ---- finding blocks ----------------------------------------------------------- */

/* First b with key[b] >= v: the top pages name the chunk, then the
 * Elias-Fano search inside it: the zero that ends the high parts below v's,
 * then the few keys with v's high part. */
uint64_t sims_table_reader_find_block(const table_reader *r, uint64_t v)
{
    uint64_t prev, key;
    return index_find(r, v, &prev, &key);
}

/* ---- blocks ------------------------------------------------------------------- */

static uint64_t block_offset(const table_reader *r, uint64_t b)
{
    return r->info.blocks_offset + b * r->info.params.block_bytes;
}

/* Prefix the current message with the table and the block's location. */
static int block_fail(const table_reader *r, uint64_t b, int rc)
{
    return sims_fail_context(rc, "table %s: block %" PRIu64 " (byte offset %" PRIu64 ")", r->name,
                             b, block_offset(r, b));
}

uint32_t sims_table_reader_block_count(const table_reader *r, uint64_t block)
{
    return block < r->info.block_count ? count_of(r, block) : 0;
}

static uint64_t group_of(const table_reader *r, uint64_t b)
{
    return (b + r->first_slot) / r->group_blocks;
}

uint32_t sims_table_reader_block_checksum(const table_reader *r, uint64_t block)
{
    return block < r->info.block_count ? group_sum(r, group_of(r, block)) : 0;
}

/* How block_begin treats checksums. */
enum { VERIFY_NEVER = 0, VERIFY_ALWAYS = 1, VERIFY_ONCE = 2 };

/* The blocks [*first, *end) of block b's checksum group. */
static void group_range(const table_reader *r, uint64_t b, uint64_t *first, uint64_t *end)
{
    uint64_t g = group_of(r, b);
    uint64_t f = g * r->group_blocks, e = f + r->group_blocks;
    *first = f > r->first_slot ? f - r->first_slot : 0;
    e -= r->first_slot;
    *end = e < r->info.block_count ? e : r->info.block_count;
}

/* Verify the checksum of block b's group: its blocks' bytes, which lie in
 * one page of the file (blocks of 4 KiB and more: the block alone). */
static int group_verify(const table_reader *r, uint64_t b)
{
    uint64_t g = group_of(r, b), first, end;
    group_range(r, b, &first, &end);
    size_t bb = r->info.params.block_bytes;
    uint32_t stored = group_sum(r, g);
    uint32_t computed = (uint32_t)sims_xxh3_64(r->blocks + first * bb, (size_t)(end - first) * bb,
                                               TBL_SEED_GROUP + g);
    if (stored != computed) {
        if (r->group_blocks == 1)
            return block_fail(r, b,
                              SIMS_CORRUPT("block checksum mismatch (stored %08" PRIx32
                                           ", computed %08" PRIx32 ")",
                                           stored, computed));
        return block_fail(r, b,
                          SIMS_CORRUPT("block checksum mismatch: group %" PRIu64 " (blocks %" PRIu64
                                       "..%" PRIu64 ", stored %08" PRIx32 ", computed %08" PRIx32
                                       ")",
                                       g, first, end - 1, stored, computed));
    }
    return SIMSTORE_OK;
}

int sims_table_reader_check_group(const table_reader *r, uint64_t block, uint64_t *first,
                                  uint64_t *end)
{
    if (block >= r->info.block_count)
        return sims_fail(SIMSTORE_EINVAL, "block %" PRIu64 " out of range (%" PRIu64 " blocks)",
                         block, r->info.block_count);
    group_range(r, block, first, end);
    int rc = group_verify(r, *first);
    if (!rc && r->verified) {
        uint64_t g = group_of(r, block);
        atomic_fetch_or_explicit(&r->verified[g >> 6], 1ULL << (g & 63), memory_order_relaxed);
    }
    return rc;
}

/* Verify block b's group (always, or unless already verified once) and
 * start a decoder on it; prev is key[b-1] (any value for b = 0), key is
 * key[b] and count its count, from index_block. */
static int block_begin_keys(const table_reader *r, uint64_t b, int verify, uint64_t prev,
                            uint64_t key, uint32_t count, codec_block_decoder *dec)
{
    size_t bb = r->info.params.block_bytes;
    const uint8_t *data = r->blocks + b * bb;
    if (verify) {
        uint64_t g = group_of(r, b);
        uint64_t bit = 1ULL << (g & 63);
        if (verify == VERIFY_ONCE && r->verified &&
            (atomic_load_explicit(&r->verified[g >> 6], memory_order_relaxed) & bit))
            verify = VERIFY_NEVER;
        if (verify) {
            int rc = group_verify(r, b);
            if (rc)
                return rc;
            if (r->verified)
                atomic_fetch_or_explicit(&r->verified[g >> 6], bit, memory_order_relaxed);
        }
    }
    sims_codec_block_decoder_init(dec, &r->huff, data, bb, b == 0, b ? prev : 0, count);
    sims_codec_block_decoder_set_last(dec, key);
    return SIMSTORE_OK;
}

static int block_begin(const table_reader *r, uint64_t b, int verify, codec_block_decoder *dec)
{
    uint64_t prev, key;
    uint32_t count;
    int rc = index_block(r, b, &prev, &key, &count);
    return rc ? rc : block_begin_keys(r, b, verify, prev, key, count, dec);
}

/* The key a finished decode must end at: the index gave it to the decoder
 * (the block's implicit last value). */
static uint64_t finish_key(const codec_block_decoder *dec)
{
    return dec->key;
}

/* Verify each group before the first decode of one of its blocks only. */
static int verify_blocks_once(const table_reader *r)
{
    return (r->flags & TABLE_SKIP_BLOCK_CHECKSUMS) ? VERIFY_NEVER : VERIFY_ONCE;
}

static int block_decode(const table_reader *r, uint64_t block, int verify, uint64_t *out,
                        size_t cap, size_t *n, uint64_t *used_bits)
{
    *n = 0;
    if (block >= r->info.block_count)
        return sims_fail(SIMSTORE_EINVAL, "block %" PRIu64 " out of range (%" PRIu64 " blocks)",
                         block, r->info.block_count);
    uint64_t prev, key;
    uint32_t count;
    int rc = index_block(r, block, &prev, &key, &count);
    if (rc)
        return rc;
    if (cap < count)
        return sims_fail(SIMSTORE_EINVAL,
                         "block %" PRIu64 " holds %" PRIu32 " values, room for %zu", block, count,
                         cap);
    codec_block_decoder dec;
    rc = block_begin_keys(r, block, verify, prev, key, count, &dec);
    if (rc)
        return rc;
    size_t got = 0, k;
    /* One run normally decodes the whole block (cap >= count). */
    while (got < count) {
        rc = sims_codec_block_decoder_run(&dec, out + got, cap - got, &k);
        if (rc)
            return block_fail(r, block, rc);
        if (k == 0)
            break;
        got += k;
    }
    rc = sims_codec_block_decoder_finish(&dec, key);
    if (rc)
        return block_fail(r, block, rc);
    if (used_bits)
        *used_bits = dec.pos;
    *n = got;
    return SIMSTORE_OK;
}

int sims_table_reader_block(const table_reader *r, uint64_t block, uint64_t *out, size_t cap,
                            size_t *n)
{
    return block_decode(r, block, verify_blocks_once(r), out, cap, n, NULL);
}

int sims_table_reader_block_start(const table_reader *r, uint64_t block, codec_block_decoder *dec)
{
    if (block >= r->info.block_count)
        return sims_fail(SIMSTORE_EINVAL, "block %" PRIu64 " out of range (%" PRIu64 " blocks)",
                         block, r->info.block_count);
    return block_begin(r, block, verify_blocks_once(r), dec);
}

int sims_table_reader_block_next(const table_reader *r, uint64_t block, codec_block_decoder *dec,
                                 uint64_t *out, size_t cap, size_t *n)
{
    int rc = sims_codec_block_decoder_run(dec, out, cap, n);
    if (rc)
        return block_fail(r, block, rc);
    if (dec->remaining == 0) {
        rc = sims_codec_block_decoder_finish(dec, finish_key(dec));
        if (rc)
            return block_fail(r, block, rc);
    }
    return SIMSTORE_OK;
}

int sims_table_reader_block_bits(const table_reader *r, uint64_t block, uint64_t *used_bits)
{
    uint64_t buf[SEARCH_CHUNK];
    if (block >= r->info.block_count)
        return sims_fail(SIMSTORE_EINVAL, "block %" PRIu64 " out of range (%" PRIu64 " blocks)",
                         block, r->info.block_count);
    codec_block_decoder dec;
    int rc = block_begin(r, block, verify_blocks_once(r) ? VERIFY_ONCE : VERIFY_ALWAYS, &dec);
    if (rc)
        return rc;
    size_t k;
    do {
        rc = sims_codec_block_decoder_run(&dec, buf, SEARCH_CHUNK, &k);
        if (rc)
            return block_fail(r, block, rc);
    } while (k);
    rc = sims_codec_block_decoder_finish(&dec, finish_key(&dec));
    if (rc)
        return block_fail(r, block, rc);
    if (used_bits)
        *used_bits = dec.pos;
    return SIMSTORE_OK;
}

int sims_table_reader_check_block(const table_reader *r, uint64_t block)
{
    return sims_table_reader_block_bits(r, block, NULL);
}

/* ---- cursor ------------------------------------------------------------------- */

enum { CURSOR_START = 0, CURSOR_INSIDE = 1, CURSOR_DONE = 2 };

int sims_table_cursor_init(table_cursor *c, const table_reader *r, uint64_t lo, uint64_t hi)
{
    memset(c, 0, sizeof *c);
    c->reader = r;
    c->lo = lo;
    c->hi = hi;
    c->state = lo > hi ? CURSOR_DONE : CURSOR_START;
    c->block = c->first_block = lo > hi ? 0 : sims_table_reader_find_block(r, lo);
    return SIMSTORE_OK;
}

int sims_table_cursor_next(table_cursor *c, uint64_t *out, size_t cap, size_t *n)
{
    const table_reader *r = c->reader;
    size_t got = 0;
    int rc = SIMSTORE_OK;
    *n = 0;
    while (got < cap && c->state != CURSOR_DONE) {
        if (c->state == CURSOR_START) {
            uint64_t b = c->block;
            /* Block b holds values above key[b-1]: none in range once
             * key[b-1] >= hi. */
            if (b >= r->info.block_count || (b > c->first_block && finish_key(&c->dec) >= c->hi)) {
                c->state = CURSOR_DONE;
                break;
            }
            rc = block_begin(r, b, verify_blocks_once(r), &c->dec);
            if (rc)
                goto fail;
            c->state = CURSOR_INSIDE;
        }
        uint64_t *p = out + got;
        size_t k;
        rc = sims_codec_block_decoder_run(&c->dec, p, cap - got, &k);
        if (rc) {
            rc = block_fail(r, c->block, rc);
            goto fail;
        }
        if (k == 0) {
            rc = sims_codec_block_decoder_finish(&c->dec, finish_key(&c->dec));
            if (rc) {
                rc = block_fail(r, c->block, rc);
                goto fail;
            }
            c->block++;
            c->state = CURSOR_START;
            continue;
        }
        /* Decoded values ascend: drop those below lo (first block only),
         * stop at the first above hi. */
        size_t skip = 0, end = k;
        if (p[0] < c->lo) {
            if (p[k - 1] < c->lo)
                continue;
            while (p[skip] < c->lo)
                skip++;
        }
        if (p[k - 1] > c->hi) {
            end = skip;
            while (end < k && p[end] <= c->hi)
                end++;
            c->state = CURSOR_DONE;
        }
        if (skip)
            memmove(p, p + skip, (end - skip) * sizeof *p);
        got += end - skip;
    }
    *n = got;
    return SIMSTORE_OK;
fail:
    c->state = CURSOR_DONE;
    return rc;
}

/* ---- prefetch ------------------------------------------------------------------ */

#define PREFETCH_MAX_BYTES 8192

/* Where a search of values from lo starts (at->chunk: a hint or
 * UINT64_MAX), and its first block's key. w holds the chunk found, open, for the blocks after the first (w->chunk = UINT64_MAX
 * otherwise), and *at the first block's keys and count for the search. */
static void start_find(const table_reader *r, uint64_t lo, table_start *at, key_walk *w,
                       uint64_t *key)
{
    uint64_t prev = 0, first, hint = at->chunk;
    *key = 0;
    w->chunk = UINT64_MAX;
    at->have = 0;
    if (v3_find(r, lo, hint, &first, &prev, key, &w->v, &w->pos)) {
        first = 0; /* as index_find on damage */
        *key = 0;
    } else if (first < r->info.block_count) {
        w->chunk = first / TBL_V3_CHUNK_BLOCKS;
        w->key = *key;
        *at = (table_start){
            first, prev, *key, w->pos, chunk_count_of(&w->v, first % TBL_V3_CHUNK_BLOCKS), 1, hint};
    }
    at->first = first;
}

void sims_table_reader_prefetch(const table_reader *r, uint64_t lo, uint64_t hi, table_start *at)
{
    uint64_t nb = r->info.block_count, key;
    key_walk w;
    start_find(r, lo, at, &w, &key);
    uint64_t first = at->first;
    if (lo > hi || first >= nb)
        return;
    /* The blocks the search will decode: up to the first whose key >= hi. */
    uint64_t last = first;
    size_t bb = r->info.params.block_bytes;
    while (last + 1 < nb && (last + 1 - first) * bb < PREFETCH_MAX_BYTES && key < hi) {
        uint64_t before;
        uint32_t count;
        if (w.chunk == UINT64_MAX)
            key = index_key(r, ++last);
        else if (walk_block(r, &w, ++last, &before, &key, &count))
            break;
    }
    const uint8_t *p = r->blocks + first * bb;
    size_t bytes = (size_t)(last - first + 1) * bb;
    if (bytes > PREFETCH_MAX_BYTES)
        bytes = PREFETCH_MAX_BYTES;
#if defined(__GNUC__) || defined(__clang__)
    for (size_t off = 0; off < bytes; off += 64)
        __builtin_prefetch(p + off, 0, 3);
#else
    (void)p;
#endif
}

void sims_table_reader_prefetch_index(const table_reader *r, uint64_t lo, table_start *at)
{
    at->chunk = UINT64_MAX;
    if (r->chunk_count == 0)
        return;
    uint64_t plo = 0, phi = r->top_pages;
    while (plo < phi) { /* as v3_find, over checked pages only */
        uint64_t mid = plo + (phi - plo) / 2;
        if (!atomic_load_explicit(&r->top_ok[mid], memory_order_acquire))
            return;
        uint64_t last = (mid + 1) * TBL_V3_TOP_ENTRIES;
        last = (last < r->chunk_count ? last : r->chunk_count) - 1;
        if (last_of(r, last) < lo)
            plo = mid + 1;
        else
            phi = mid;
    }
    if (plo == r->top_pages || !atomic_load_explicit(&r->top_ok[plo], memory_order_acquire) ||
        (plo && !atomic_load_explicit(&r->top_ok[plo - 1], memory_order_acquire)))
        return;
    uint64_t clo = plo * TBL_V3_TOP_ENTRIES, chi = clo + TBL_V3_TOP_ENTRIES;
    chi = chi < r->chunk_count ? chi : r->chunk_count;
    while (clo < chi) {
        uint64_t mid = clo + (chi - clo) / 2;
        if (last_of(r, mid) < lo)
            clo = mid + 1;
        else
            chi = mid;
    }
    at->chunk = clo;
    uint64_t begin = clo ? end_of(r, clo - 1) : r->chunks_begin, end = end_of(r, clo);
    uint64_t shape = atomic_load_explicit(&r->chunk_shape[clo], memory_order_relaxed);
#if defined(__GNUC__) || defined(__clang__)
    if (shape) {
        /* A checked chunk: the words the search will read, where keys
         * spread evenly would put lo (uniform fingerprints do): its low
         * part, its high bits and its count, a line before and after. */
        uint64_t n = chunk_blocks(r, clo), base = clo ? last_of(r, clo - 1) + 1 : 0;
        unsigned low_bits = (unsigned)(shape & 63), count_bits = (unsigned)(shape >> 6 & 63);
        uint64_t span = last_of(r, clo) - base;
        uint64_t i =
            lo <= base ? 0 : (uint64_t)((double)(lo - base) / ((double)span + 1) * (double)n);
        i = i < n ? i : n - 1;
        uint64_t lw = tbl_key_low_words(n, low_bits), hw = shape >> 32 & 0x7FFFFFFF;
        uint64_t word[3] = {begin + TBL_C3_HEADER_BYTES + i * low_bits / 8,
                            begin + TBL_C3_HEADER_BYTES + 8 * lw +
                                (i + ((lo - (lo <= base ? lo : base)) >> low_bits)) / 8,
                            begin + TBL_C3_HEADER_BYTES + 8 * (lw + hw) + i * count_bits / 8};
        for (int j = 0; j < 3; j++)
            for (uint64_t off = (word[j] & ~(uint64_t)63) - (word[j] >= begin + 64 ? 64 : 0);
                 off <= word[j] + 64 && off < end; off += 64)
                __builtin_prefetch(r->index + off, 0, 3);
        return;
    }
    if (end > begin + PREFETCH_MAX_BYTES)
        end = begin + PREFETCH_MAX_BYTES;
    for (uint64_t off = begin & ~(uint64_t)63; off < end; off += 64)
        __builtin_prefetch(r->index + off, 0, 3);
#else
    (void)shape;
    (void)end;
#endif
}

/* ---- fused probe -------------------------------------------------------------- */

/* One search in progress: the block it decodes and what it looks for. */
typedef struct search_state {
    const table_reader *r;
    uint64_t first, b, prev, key, lo, hi, q;
    unsigned k;
    int verify;
    int open;              /* dec holds block b, not yet decoded to its end */
    const table_start *at; /* where it starts: block first's keys when at->have */
    int (*emit)(void *ctx, uint64_t value);
    void *ctx;
    key_walk walk;
    codec_block_decoder dec;
    uint64_t buf[SEARCH_CHUNK];
} search_state;

static void search_init(search_state *s, const table_reader *r, const table_start *at, uint64_t lo,
                        uint64_t hi, uint64_t q, unsigned k, int (*emit)(void *ctx, uint64_t value),
                        void *ctx)
{
    s->r = r;
    s->first = at->first;
    s->b = at->first;
    s->prev = 0;
    s->at = at;
    s->key = 0;
    s->lo = lo;
    s->hi = hi;
    s->q = q;
    s->k = k;
    s->verify = verify_blocks_once(r);
    s->open = 0;
    s->emit = emit;
    s->ctx = ctx;
    s->walk.chunk = UINT64_MAX;
}

/* Open the search's next block: 1 when it has one, 0 when the search is
 * over (no block left, or the last one reached hi), or an error. */
static int search_open(search_state *s)
{
    const table_reader *r = s->r;
    if (s->b >= r->info.block_count || (s->b > s->first && s->prev >= s->hi))
        return 0;
    uint32_t count;
    int rc;
    const table_start *at = s->at;
    if (at->have && s->b == at->first) {
        /* The keys sims_table_reader_prefetch found; the walk on from there. */
        uint64_t c = s->b / TBL_V3_CHUNK_BLOCKS;
        rc = chunk_open(r, c, &s->walk.v);
        s->walk.chunk = c;
        s->walk.pos = at->pos;
        s->walk.key = s->key = at->key;
        s->prev = at->prev;
        count = at->count;
    } else {
        rc = walk_block(r, &s->walk, s->b, &s->prev, &s->key, &count);
    }
    if (rc == SIMSTORE_OK)
        rc = block_begin_keys(r, s->b, s->verify, s->prev, s->key, count, &s->dec);
    if (rc)
        return rc;
    s->prev = s->key;
    s->open = 1;
    return 1;
}

/* The end of the open block's values (m == 0 from the decoder): check it
 * and move to the next block. */
static int search_close(search_state *s)
{
    int rc = sims_codec_block_decoder_finish(&s->dec, s->key);
    if (rc)
        return block_fail(s->r, s->b, rc);
    s->open = 0;
    s->b++;
    return SIMSTORE_OK;
}

/* Emit the matches among the m values just decoded into s->buf; *over is
 * set when a value passed hi (the search is then over). Returns 0 or emit's
 * nonzero result. */
static int search_take(search_state *s, size_t m, int *over)
{
    const uint64_t *buf = s->buf;
    const uint64_t lo = s->lo, hi = s->hi, q = s->q;
    const unsigned k = s->k;
    if (buf[m - 1] < lo)
        return 0;
    /* Counted without branches (the loops vectorize where the target
     * allows): the values below lo, those up to hi, and the matches among
     * the values between; most chunks have no match at all. */
    size_t from = 0, end = 0, hits = 0;
    for (size_t i = 0; i < m; i++) {
        from += buf[i] < lo;
        end += buf[i] <= hi;
    }
    for (size_t i = from; i < end; i++)
        hits += sims_distance(buf[i], q) <= k;
    for (size_t i = from; hits && i < end; i++) {
        if (sims_distance(buf[i], q) <= k) {
            hits--;
            int rc = s->emit(s->ctx, buf[i]);
            if (rc)
                return rc;
        }
    }
    *over = end < m;
    return 0;
}

/* After a decode of m values (rc its result): the matches emitted, or the
 * block closed at its end; *over is set when the search is over. Returns 0,
 * an error, or emit's nonzero result. */
static int search_step(search_state *s, int rc, size_t m, int *over)
{
    if (rc)
        return block_fail(s->r, s->b, rc);
    if (m == 0)
        return search_close(s);
    return search_take(s, m, over);
}

/* The search on its own to its end (from any point of it). */
static int search_run(search_state *s)
{
    for (;;) {
        if (!s->open) {
            int rc = search_open(s);
            if (rc <= 0)
                return rc;
        }
        size_t m;
        int over = 0;
        int rc = sims_codec_block_decoder_run_to(&s->dec, s->buf, SEARCH_CHUNK, s->hi, &m);
        rc = search_step(s, rc, m, &over);
        if (rc || over)
            return rc;
    }
}

int sims_table_reader_search_from(const table_reader *r, const table_start *at, uint64_t lo,
                                  uint64_t hi, uint64_t q, unsigned k,
                                  int (*emit)(void *ctx, uint64_t value), void *ctx)
{
    if (lo > hi)
        return SIMSTORE_OK;
    search_state s;
    search_init(&s, r, at, lo, hi, q, k, emit, ctx);
    return search_run(&s);
}

int sims_table_reader_search(const table_reader *r, uint64_t lo, uint64_t hi, uint64_t q,
                             unsigned k, int (*emit)(void *ctx, uint64_t value), void *ctx)
{
    if (lo > hi)
        return SIMSTORE_OK;
    table_start at;
    key_walk w;
    uint64_t key;
    at.chunk = UINT64_MAX;
    start_find(r, lo, &at, &w, &key);
    return sims_table_reader_search_from(r, &at, lo, hi, q, k, emit, ctx);
}

static int note_found(void *ctx, uint64_t value)
{
    (void)value;
    *(int *)ctx = 1;
    return 1;
}

int sims_table_reader_holds(const table_reader *r, uint64_t v)
{
    int found = 0;
    int rc = sims_table_reader_search(r, v, v, v, 0, note_found, &found);
    return rc < 0 ? rc : found;
}

int sims_table_reader_search_two(const table_probe *x, const table_probe *y)
{
    search_state a, b;
    search_init(&a, x->r, &x->at, x->lo, x->hi, x->q, x->k, x->emit, x->ctx);
    search_init(&b, y->r, &y->at, y->lo, y->hi, y->q, y->k, y->emit, y->ctx);
    int live_a = x->lo <= x->hi, live_b = y->lo <= y->hi, rc_b = SIMSTORE_OK;
    /* Both in turn while both go on; a's result first, as if a ran to its
     * end before b began (the caller discards what b emitted when a fails). */
    while (live_a && live_b) {
        int rc;
        if (!a.open && (rc = search_open(&a)) <= 0) {
            if (rc)
                return rc;
            live_a = 0;
            break;
        }
        if (!b.open && (rc = search_open(&b)) <= 0) {
            rc_b = rc;
            live_b = 0;
            break;
        }
        codec_block_run ra = {&a.dec, a.buf, SEARCH_CHUNK, a.hi, 0, 0};
        codec_block_run rb = {&b.dec, b.buf, SEARCH_CHUNK, b.hi, 0, 0};
        sims_codec_block_decoder_run_two(&ra, &rb);
        int over = 0;
        rc = search_step(&a, ra.rc, ra.n, &over);
        if (rc)
            return rc;
        live_a = !over;
        over = 0;
        rc_b = search_step(&b, rb.rc, rb.n, &over);
        live_b = !rc_b && !over;
    }
    if (live_a) {
        int rc = search_run(&a);
        if (rc)
            return rc;
    }
    return live_b ? search_run(&b) : rc_b;
}
