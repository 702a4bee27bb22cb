/* records.c: the store, state and document records of format/store.md. */
#include "lmdb/records.h"

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/sketch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define STORE_MAGIC "SIMSTORE"
#define STATE_MAGIC "SIMSTATE"
#define STORE_FIXED_BYTES 60u
#define STATE_FIXED_BYTES 48u
#define SEGMENT_ENTRY_BYTES 32u

/* ---- store record -------------------------------------------------------- */

size_t sims_store_record_size(const sims_store_record *r)
{
    return STORE_FIXED_BYTES + (size_t)r->design_len + 8;
}

size_t sims_store_record_encode(const sims_store_record *r, uint8_t *buf, size_t cap)
{
    size_t n = sims_store_record_size(r);
    if (cap < n)
        return 0;
    memset(buf, 0, STORE_FIXED_BYTES);
    memcpy(buf, STORE_MAGIC, 8);
    le_store32(buf + 8, r->format_version);
    le_store32(buf + 12, r->flags);
    le_store64(buf + 16, r->store_tag);
    le_store32(buf + 24, r->block_bytes);
    le_store64(buf + 32, r->created_unix);
    le_store64(buf + 40, r->incompat_features);
    le_store64(buf + 48, r->compat_features);
    le_store32(buf + 56, r->design_len);
    if (r->design_len)
        memcpy(buf + STORE_FIXED_BYTES, r->design, r->design_len);
    le_store64(buf + n - 8, sims_xxh3_64(buf, n - 8, SIMS_STORE_RECORD_SEED));
    return n;
}

int sims_store_record_decode(const uint8_t *buf, size_t len, sims_store_record *out)
{
    sims_cursor c;
    const uint8_t *magic;
    uint32_t version, flags, block_bytes, reserved, design_len;
    uint64_t tag, created, incompat, compat;
    cursor_init(&c, buf, len);
    if (cursor_bytes(&c, 8, &magic) || memcmp(magic, STORE_MAGIC, 8) != 0)
        return SIMS_CORRUPT("store record: bad magic");
    /* The version first: another version may lay the record out otherwise. */
    if (cursor_u32(&c, &version))
        return SIMS_CORRUPT("store record: truncated (%zu bytes)", len);
    if (version < SIMS_STORE_FORMAT_VERSION)
        return sims_fail(SIMSTORE_EVERSION,
                         "store format %u from a pre-release build, unknown to this simstore "
                         "(%s), which reads format %u: rebuild the store",
                         version, SIMSTORE_VERSION_STRING, SIMS_STORE_FORMAT_VERSION);
    if (version > SIMS_STORE_FORMAT_VERSION)
        return sims_fail(SIMSTORE_EVERSION,
                         "store format %u unknown to this simstore (%s), which reads format %u: "
                         "written by a newer version",
                         version, SIMSTORE_VERSION_STRING, SIMS_STORE_FORMAT_VERSION);
    if (cursor_u32(&c, &flags) || cursor_u64(&c, &tag) || cursor_u32(&c, &block_bytes) ||
        cursor_u32(&c, &reserved) || cursor_u64(&c, &created) || cursor_u64(&c, &incompat) ||
        cursor_u64(&c, &compat) || cursor_u32(&c, &design_len) || cursor_remaining(&c) < 8)
        return SIMS_CORRUPT("store record: truncated (%zu bytes)", len);
    /* The checksum is the last 8 bytes whatever features a newer writer
     * used, so damage is told from a newer store before the features are
     * read. */
    uint64_t want = sims_xxh3_64(buf, len - 8, SIMS_STORE_RECORD_SEED);
    if (le_load64(buf + len - 8) != want)
        return SIMS_CORRUPT("store record: checksum mismatch");
    if (incompat & ~SIMS_STORE_INCOMPAT_KNOWN)
        return sims_fail(SIMSTORE_EVERSION,
                         "incompatible features 0x%" PRIx64 " unknown to this simstore (%s): "
                         "written by a newer version",
                         incompat & ~SIMS_STORE_INCOMPAT_KNOWN, SIMSTORE_VERSION_STRING);
    /* Unknown compatible features are ignored: a reader that does not know
     * them reads the store correctly. */
    if (design_len > cursor_remaining(&c) || cursor_remaining(&c) - design_len != 8)
        return SIMS_CORRUPT("store record: length %zu does not match design length %u", len,
                            design_len);
    if (flags & ~SIMS_STORE_FLAG_FP_ONLY)
        return SIMS_CORRUPT("store record: unknown flags 0x%x", flags);
    if (reserved != 0)
        return SIMS_CORRUPT("store record: reserved field is not zero");
    if (!simstore_block_bytes_valid(block_bytes))
        return SIMS_CORRUPT("store record: invalid block size %u", block_bytes);
    out->format_version = version;
    out->flags = flags;
    out->store_tag = tag;
    out->block_bytes = block_bytes;
    out->created_unix = created;
    out->incompat_features = incompat;
    out->compat_features = compat;
    out->design = buf + STORE_FIXED_BYTES;
    out->design_len = design_len;
    return SIMSTORE_OK;
}

/* ---- state record -------------------------------------------------------- */

size_t sims_state_record_size2(uint32_t segment_count, uint32_t para_segment_count)
{
    return STATE_FIXED_BYTES + ((size_t)segment_count + para_segment_count) * SEGMENT_ENTRY_BYTES +
           8;
}

size_t sims_state_record_size(uint32_t segment_count)
{
    return sims_state_record_size2(segment_count, 0);
}

size_t sims_state_record_bytes(const sims_state_record *r)
{
    return sims_state_record_size2(r->segment_count, r->para_segment_count) +
           (r->wal_applied ? 8 : 0);
}

static uint8_t *put_segments(uint8_t *p, const sims_segment_entry *e, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++, p += SEGMENT_ENTRY_BYTES) {
        le_store64(p, e[i].id);
        le_store64(p + 8, e[i].fp_count);
        le_store64(p + 16, e[i].created_unix);
        le_store32(p + 24, e[i].table_count);
        le_store32(p + 28, e[i].flags);
    }
    return p;
}

size_t sims_state_record_encode(const sims_state_record *r, uint8_t *buf, size_t cap)
{
    size_t n = sims_state_record_bytes(r);
    if (cap < n)
        return 0;
    memset(buf, 0, n);
    memcpy(buf, STATE_MAGIC, 8);
    le_store64(buf + 8, r->generation);
    le_store64(buf + 16, r->next_segment_id);
    le_store64(buf + 24, r->doc_count);
    le_store64(buf + 32, r->fp_count);
    le_store32(buf + 40, r->segment_count);
    le_store32(buf + 44, r->para_segment_count);
    uint8_t *p = put_segments(buf + STATE_FIXED_BYTES, r->segments, r->segment_count);
    p = put_segments(p, r->para_segments, r->para_segment_count);
    /* Written only when set, so a store no live store flushed into keeps
     * the record it had before the field existed. */
    if (r->wal_applied)
        le_store64(p, r->wal_applied);
    le_store64(buf + n - 8, sims_xxh3_64(buf, n - 8, SIMS_STATE_RECORD_SEED));
    return n;
}

/* Decode n entries at p, checking each list's order and range. */
static int get_segments(const uint8_t *p, uint32_t n, uint64_t next_id, uint32_t expect_table_count,
                        uint32_t allowed_flags, const char *what, sims_segment_entry *out)
{
    uint64_t prev_id = 0;
    for (uint32_t i = 0; i < n; i++, p += SEGMENT_ENTRY_BYTES) {
        sims_segment_entry *e = &out[i];
        e->id = le_load64(p);
        e->fp_count = le_load64(p + 8);
        e->created_unix = le_load64(p + 16);
        e->table_count = le_load32(p + 24);
        if (e->id <= prev_id || e->id >= next_id)
            return SIMS_CORRUPT("state record: %s %u has id %llu out of order or range", what, i,
                                (unsigned long long)e->id);
        if (e->table_count != expect_table_count)
            return SIMS_CORRUPT("state record: %s %llu has %u tables, the design has %u", what,
                                (unsigned long long)e->id, e->table_count, expect_table_count);
        e->flags = le_load32(p + 28);
        if ((e->flags & ~allowed_flags) ||
            ((e->flags & SIMS_SEGMENT_FLAG_CHANGED) && !(e->flags & SIMS_SEGMENT_FLAG_DOCFILE)))
            return SIMS_CORRUPT("state record: %s %llu has flags 0x%x (reserved bits set)", what,
                                (unsigned long long)e->id, e->flags);
        prev_id = e->id;
    }
    return SIMSTORE_OK;
}

int sims_state_record_decode(const uint8_t *buf, size_t len, uint32_t expect_table_count,
                             sims_state_record *out)
{
    memset(out, 0, sizeof *out);
    if (len < STATE_FIXED_BYTES + 8 || memcmp(buf, STATE_MAGIC, 8) != 0)
        return SIMS_CORRUPT("state record: bad magic or too short (%zu bytes)", len);
    uint32_t count = le_load32(buf + 40), para_count = le_load32(buf + 44);
    if (count > SIMS_MAX_SEGMENTS || para_count > SIMS_MAX_SEGMENTS)
        return SIMS_CORRUPT("state record: %u + %u segments exceeds the limit %u", count,
                            para_count, SIMS_MAX_SEGMENTS);
    /* The applied WAL sequence number is there exactly when the record is
     * 8 bytes longer than its segments make it (32-byte entries: never
     * ambiguous). */
    size_t plain = sims_state_record_size2(count, para_count);
    if (len != plain && len != plain + 8)
        return SIMS_CORRUPT("state record: length %zu does not match %u + %u segments", len, count,
                            para_count);
    if (le_load64(buf + len - 8) != sims_xxh3_64(buf, len - 8, SIMS_STATE_RECORD_SEED))
        return SIMS_CORRUPT("state record: checksum mismatch");
    sims_state_record r;
    memset(&r, 0, sizeof r);
    r.generation = le_load64(buf + 8);
    r.next_segment_id = le_load64(buf + 16);
    r.doc_count = le_load64(buf + 24);
    r.fp_count = le_load64(buf + 32);
    r.segment_count = count;
    r.para_segment_count = para_count;
    if (len == plain + 8) {
        r.wal_applied = le_load64(buf + plain - 8);
        if (r.wal_applied == 0)
            return SIMS_CORRUPT("state record: applied WAL sequence number present but 0");
    }
    if (count + para_count) {
        r.segments = calloc((size_t)count + para_count, sizeof *r.segments);
        if (!r.segments)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory reading the state record");
        r.para_segments = para_count ? r.segments + count : NULL;
    }
    const uint8_t *p = buf + STATE_FIXED_BYTES;
    int bad =
        get_segments(p, count, r.next_segment_id, expect_table_count,
                     SIMS_SEGMENT_FLAG_DOCFILE | SIMS_SEGMENT_FLAG_CHANGED, "segment", r.segments);
    if (!bad)
        bad = get_segments(p + (size_t)count * SEGMENT_ENTRY_BYTES, para_count, r.next_segment_id,
                           expect_table_count, 0, "paragraph segment", r.para_segments);
    /* Both lists draw ids from one counter, so their files never share names. */
    for (uint32_t i = 0, j = 0; !bad && i < count && j < para_count;) {
        if (r.segments[i].id == r.para_segments[j].id)
            bad = SIMS_CORRUPT("state record: segment id %llu is listed twice",
                               (unsigned long long)r.segments[i].id);
        else if (r.segments[i].id < r.para_segments[j].id)
            i++;
        else
            j++;
    }
    if (bad) {
        free(r.segments);
        return bad;
    }
    *out = r;
    return SIMSTORE_OK;
}

void sims_state_record_release(sims_state_record *r)
{
    if (r) {
        free(r->segments);
        r->segments = NULL;
        r->segment_count = 0;
        r->para_segments = NULL;
        r->para_segment_count = 0;
    }
}

/* ---- document record ----------------------------------------------------- */

int sims_doc_insertion_number(uint64_t generation, uint64_t position, uint64_t *out)
{
    if (generation >= SIMS_DOC_GENERATION_LIMIT)
        return sims_fail(SIMSTORE_EFULL,
                         "generation %llu: documents can be inserted only below generation "
                         "%llu (rebuild the store)",
                         (unsigned long long)generation,
                         (unsigned long long)SIMS_DOC_GENERATION_LIMIT);
    if (position >= SIMS_DOC_POSITION_LIMIT)
        return sims_fail(SIMSTORE_EFULL, "one commit takes at most %llu documents",
                         (unsigned long long)SIMS_DOC_POSITION_LIMIT);
    *out = generation << SIMS_DOC_POSITION_BITS | position;
    return SIMSTORE_OK;
}

static size_t sketch_bytes_of(unsigned flags)
{
    return simstore_sketch_bytes((simstore_sketch_kind)SIMS_DOC_SKETCH_KIND(flags));
}

size_t sims_doc_record_size(size_t meta_len, unsigned flags)
{
    size_t insertion_bytes = (flags & SIMS_DOC_FLAG_INSERTION) ? SIMS_DOC_INSERTION_BYTES : 0;
    size_t para_bytes = (flags & SIMS_DOC_FLAG_PARAGRAPHS) ? 4 : 0;
    return SIMS_DOC_RECORD_OVERHEAD + insertion_bytes + sketch_bytes_of(flags) + para_bytes +
           meta_len;
}

static uint32_t doc_check(const uint8_t *id, size_t id_len, const uint8_t *rec, size_t n)
{
    uint64_t seed = sims_xxh3_64(id, id_len, SIMS_DOC_RECORD_SEED);
    return (uint32_t)sims_xxh3_64(rec, n, seed);
}

size_t sims_doc_record_encode(const uint8_t *id, size_t id_len, uint64_t fp, unsigned flags,
                              uint64_t insertion, const uint8_t *meta, size_t meta_len,
                              uint8_t *buf, size_t cap)
{
    return sims_doc_record_encode_sketch(id, id_len, fp, flags & ~SIMS_DOC_SKETCH_MASK, insertion,
                                         NULL, meta, meta_len, buf, cap);
}

size_t sims_doc_record_encode_sketch(const uint8_t *id, size_t id_len, uint64_t fp, unsigned flags,
                                     uint64_t insertion, const uint8_t *sketch, const uint8_t *meta,
                                     size_t meta_len, uint8_t *buf, size_t cap)
{
    return sims_doc_record_encode_full(id, id_len, fp, flags, insertion, sketch, NULL, 0, meta,
                                       meta_len, buf, cap);
}

size_t sims_doc_record_encode_full(const uint8_t *id, size_t id_len, uint64_t fp, unsigned flags,
                                   uint64_t insertion, const uint8_t *sketch, const uint8_t *paras,
                                   uint32_t para_count, const uint8_t *meta, size_t meta_len,
                                   uint8_t *buf, size_t cap)
{
    if (!meta)
        meta_len = 0;
    flags &= SIMS_DOC_FLAG_INTEGER_ID | SIMS_DOC_FLAG_INSERTION | SIMS_DOC_SKETCH_MASK;
    size_t sketch_len = sketch_bytes_of(flags);
    if (!sketch) {
        flags &= ~SIMS_DOC_SKETCH_MASK;
        sketch_len = 0;
    }
    if (!paras || para_count > SIMS_DOC_MAX_PARAGRAPHS)
        para_count = 0;
    if (para_count)
        flags |= SIMS_DOC_FLAG_PARAGRAPHS;
    size_t n = sims_doc_record_size(meta_len, flags) + (size_t)para_count * 8;
    if (cap < n)
        return 0;
    buf[0] = 1;
    buf[1] = (uint8_t)((meta_len ? SIMS_DOC_FLAG_META : 0) | flags);
    le_store64(buf + 2, fp);
    size_t at = 10;
    if (flags & SIMS_DOC_FLAG_INSERTION) {
        le_store64(buf + at, insertion);
        at += SIMS_DOC_INSERTION_BYTES;
    }
    if (sketch_len) {
        memcpy(buf + at, sketch, sketch_len);
        at += sketch_len;
    }
    if (para_count) {
        le_store32(buf + at, para_count);
        memcpy(buf + at + 4, paras, (size_t)para_count * 8);
        at += 4 + (size_t)para_count * 8;
    }
    if (meta_len)
        memcpy(buf + at, meta, meta_len);
    le_store32(buf + at + meta_len, doc_check(id, id_len, buf, at + meta_len));
    return n;
}

size_t sims_doc_tombstone_encode(const uint8_t *id, size_t id_len, uint64_t fp, uint8_t *buf,
                                 size_t cap)
{
    if (cap < SIMS_DOC_RECORD_OVERHEAD)
        return 0;
    buf[0] = 1;
    buf[1] = SIMS_DOC_FLAG_TOMBSTONE;
    le_store64(buf + 2, fp);
    le_store32(buf + 10, doc_check(id, id_len, buf, 10));
    return SIMS_DOC_RECORD_OVERHEAD;
}

int sims_doc_entry_decode(const uint8_t *id, size_t id_len, const uint8_t *buf, size_t len,
                          sims_doc_record *out, int *tombstone)
{
    *tombstone = 0;
    if (len < 2 || buf[1] != SIMS_DOC_FLAG_TOMBSTONE)
        return sims_doc_record_decode(id, id_len, buf, len, out);
    if (len != SIMS_DOC_RECORD_OVERHEAD || buf[0] != 1)
        return SIMS_CORRUPT("tombstone record: %zu bytes of version %u", len, buf[0]);
    if (le_load32(buf + 10) != doc_check(id, id_len, buf, 10))
        return SIMS_CORRUPT("tombstone record: check mismatch");
    memset(out, 0, sizeof *out);
    out->fp = le_load64(buf + 2);
    *tombstone = 1;
    return SIMSTORE_OK;
}

int sims_doc_record_decode(const uint8_t *id, size_t id_len, const uint8_t *buf, size_t len,
                           sims_doc_record *out)
{
    if (len < SIMS_DOC_RECORD_OVERHEAD)
        return SIMS_CORRUPT("document record: %zu bytes is too short", len);
    if (buf[0] != 1)
        return SIMS_CORRUPT("document record: unknown version %u", buf[0]);
    unsigned flags = buf[1];
    if (flags & ~(SIMS_DOC_FLAG_META | SIMS_DOC_FLAG_INTEGER_ID | SIMS_DOC_FLAG_INSERTION |
                  SIMS_DOC_SKETCH_MASK | SIMS_DOC_FLAG_PARAGRAPHS))
        return SIMS_CORRUPT("document record: unknown flags 0x%x", flags);
    unsigned sketch_kind = SIMS_DOC_SKETCH_KIND(flags);
    if (sketch_kind && !sims_sketch_kind_valid(sketch_kind))
        return SIMS_CORRUPT("document record: unknown sketch kind %u", sketch_kind);
    size_t fixed = sims_doc_record_size(0, flags);
    if (len < fixed)
        return SIMS_CORRUPT("document record: %zu bytes is too short for its flags 0x%x", len,
                            flags);
    size_t meta_len = len - fixed;
    if (le_load32(buf + len - 4) != doc_check(id, id_len, buf, len - 4))
        return SIMS_CORRUPT("document record: check mismatch");
    /* The paragraph list sits after the sketch; its count is bounded by the
     * bytes left before the check. */
    size_t para_at = fixed - 4 - ((flags & SIMS_DOC_FLAG_PARAGRAPHS) ? 4 : 0);
    uint32_t para_count = 0;
    if (flags & SIMS_DOC_FLAG_PARAGRAPHS) {
        para_count = le_load32(buf + para_at);
        if (para_count == 0 || para_count > SIMS_DOC_MAX_PARAGRAPHS ||
            (size_t)para_count * 8 > meta_len)
            return SIMS_CORRUPT("document record: %u paragraphs do not fit its %zu bytes",
                                para_count, len);
        meta_len -= (size_t)para_count * 8;
    }
    if (((flags & SIMS_DOC_FLAG_META) != 0) != (meta_len != 0))
        return SIMS_CORRUPT("document record: metadata flag disagrees with its length");
    size_t at = 10;
    out->fp = le_load64(buf + 2);
    out->flags = flags & (SIMS_DOC_FLAG_INTEGER_ID | SIMS_DOC_FLAG_INSERTION);
    out->insertion = 0;
    if (flags & SIMS_DOC_FLAG_INSERTION) {
        out->insertion = le_load64(buf + at);
        at += SIMS_DOC_INSERTION_BYTES;
    }
    out->sketch_kind = sketch_kind;
    out->sketch = sketch_kind ? buf + at : NULL;
    at += sketch_bytes_of(flags);
    out->para_count = para_count;
    out->paras = para_count ? buf + at + 4 : NULL;
    if (flags & SIMS_DOC_FLAG_PARAGRAPHS)
        at += 4 + (size_t)para_count * 8;
    out->meta = meta_len ? buf + at : NULL;
    out->meta_len = meta_len;
    return SIMSTORE_OK;
}

/* ---- text record ---------------------------------------------------------- */

#define TEXT_MAGIC "SIMSTEXT"

void sims_text_record_encode(const sims_text_record *r, uint8_t buf[SIMS_TEXT_RECORD_BYTES])
{
    memset(buf, 0, SIMS_TEXT_RECORD_BYTES);
    memcpy(buf, TEXT_MAGIC, 8);
    le_store32(buf + 8, r->shingle_words);
    le_store32(buf + 12, r->weighting);
    le_store32(buf + 16, r->cjk);
    /* Version 1 is stored as 0, so that its records are those written
     * before the field existed, which older readers accept. */
    buf[20] = (uint8_t)(r->version == 1 ? 0 : r->version);
    buf[21] = (uint8_t)(r->version == 1 ? 0 : r->cjk_shingle);
    buf[22] = (uint8_t)r->sketch;
    buf[23] = (uint8_t)r->paragraph_min_words;
    le_store64(buf + 24, r->lambda_fixed);
    le_store64(buf + 32, sims_xxh3_64(buf, 32, SIMS_TEXT_RECORD_SEED));
}

int sims_text_record_decode(const uint8_t *buf, size_t len, sims_text_record *out)
{
    if (len != SIMS_TEXT_RECORD_BYTES || memcmp(buf, TEXT_MAGIC, 8) != 0)
        return SIMS_CORRUPT("text record: bad magic or length (%zu bytes)", len);
    if (le_load64(buf + 32) != sims_xxh3_64(buf, 32, SIMS_TEXT_RECORD_SEED))
        return SIMS_CORRUPT("text record: checksum mismatch");
    sims_text_record r;
    r.shingle_words = le_load32(buf + 8);
    r.weighting = le_load32(buf + 12);
    r.cjk = le_load32(buf + 16);
    r.lambda_fixed = le_load64(buf + 24);
    r.version = buf[20] == 0 ? 1 : buf[20];
    r.cjk_shingle = buf[21];
    r.sketch = buf[22];
    r.paragraph_min_words = buf[23];
    if (r.sketch != 0 && !sims_sketch_kind_valid(r.sketch))
        return SIMS_CORRUPT("text record: unknown sketch kind %u", (unsigned)r.sketch);
    if (buf[20] != 0 && buf[20] != 2 && buf[20] != 3) /* version 1 is only ever 0 */
        return SIMS_CORRUPT("text record: unknown fingerprint version %u", (unsigned)buf[20]);
    if (r.version == 1 ? r.cjk_shingle != 0 : r.cjk_shingle < 1 || r.cjk_shingle > 32)
        return SIMS_CORRUPT("text record: CJK shingle %u with fingerprint version %u",
                            (unsigned)r.cjk_shingle, (unsigned)r.version);
    if (r.shingle_words < 1 || r.shingle_words > 32 || r.weighting > 2 ||
        (r.weighting == 2 && r.version == 1) || r.cjk < 1 || r.cjk > 2 ||
        r.lambda_fixed > 1000ULL * 65536)
        return SIMS_CORRUPT("text record: value out of range");
    *out = r;
    return SIMSTORE_OK;
}

int sims_store_incompat_check(uint64_t incompat, const sims_text_record *text)
{
    if ((incompat & SIMS_STORE_INCOMPAT_FP_V3) == sims_store_incompat_of_version(text->version))
        return SIMSTORE_OK;
    return SIMS_CORRUPT("the text record says fingerprint version %u, but the store record %s "
                        "incompatible feature 0x1 (fingerprint version 3)",
                        (unsigned)text->version,
                        incompat & SIMS_STORE_INCOMPAT_FP_V3 ? "carries" : "lacks");
}
