/* fuzz_store_records.c: libFuzzer target for the records simstore keeps in
 * LMDB (lib/store/records.c, format/store.md): the store record (and the
 * design record inside it), the state record, the text record and document
 * records.
 *
 * Input: one selector byte, then the record.
 *   selector & 3:  0 store record, 1 state record, 2 text record,
 *                  3 document record (then: one id-length byte L, L id
 *                  bytes, the record);
 *   selector >> 2: the table count the state decoder expects (state only).
 * Each record is decoded twice: as given, and with its checksum recomputed
 * (a fuzzer cannot forge XXH3), so that mutations reach the field checks.
 * Invariants (abort on violation): decoding returns OK, CORRUPT, VERSION or
 * NOMEM; a record that decodes re-encodes to exactly its bytes (the encoding
 * is canonical), a store record's design bytes lie inside the record, and a
 * state record holds an applied WAL sequence number (never 0) exactly when
 * it is 8 bytes longer than its segments make it.
 * Corpus: tests/fuzz/corpus/store_records/ (seeds from gen_record_seeds.c). */
#include "common/bytes.h"
#include "common/checksum.h"
#include "simstore.h"
#include "design/design.h"
#include "lmdb/records.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sims_design design; /* ~100 KiB: static, one input at a time */

static void expect_decode_rc(int rc)
{
    if (rc != SIMSTORE_OK && rc != SIMSTORE_ECORRUPT && rc != SIMSTORE_EVERSION &&
        rc != SIMSTORE_ENOMEM)
        abort();
}

static void run_store(const uint8_t *rec, size_t size)
{
    sims_store_record r;
    int rc = sims_store_record_decode(rec, size, &r);
    expect_decode_rc(rc);
    if (rc)
        return;
    if (r.design < rec || r.design + r.design_len > rec + size)
        abort();
    size_t n = sims_store_record_size(&r);
    uint8_t *again = malloc(n ? n : 1);
    if (!again || sims_store_record_encode(&r, again, n) != n || n != size ||
        memcmp(again, rec, n) != 0)
        abort();
    free(again);
    rc = sims_design_decode(r.design, r.design_len, &design);
    if (rc != SIMSTORE_OK && rc != SIMSTORE_ECORRUPT && rc != SIMSTORE_EVERSION)
        abort();
}

static void run_state(const uint8_t *rec, size_t size, uint32_t tables)
{
    sims_state_record r;
    int rc = sims_state_record_decode(rec, size, tables, &r);
    expect_decode_rc(rc);
    if (rc)
        return;
    size_t n = sims_state_record_bytes(&r);
    size_t plain = sims_state_record_size2(r.segment_count, r.para_segment_count);
    if (size != (r.wal_applied ? plain + 8 : plain))
        abort();
    uint8_t *again = malloc(n);
    if (!again || sims_state_record_encode(&r, again, n) != n || n != size ||
        memcmp(again, rec, n) != 0)
        abort();
    for (uint32_t i = 0; i < r.segment_count; i++)
        if (r.segments[i].table_count != tables || r.segments[i].id == 0 ||
            r.segments[i].id >= r.next_segment_id ||
            (i && r.segments[i].id <= r.segments[i - 1].id))
            abort();
    for (uint32_t i = 0; i < r.para_segment_count; i++)
        if (r.para_segments[i].table_count != tables || r.para_segments[i].id == 0 ||
            r.para_segments[i].id >= r.next_segment_id ||
            (i && r.para_segments[i].id <= r.para_segments[i - 1].id))
            abort();
    free(again);
    sims_state_record_release(&r);
}

static void run_text(const uint8_t *rec, size_t size)
{
    sims_text_record r;
    int rc = sims_text_record_decode(rec, size, &r);
    expect_decode_rc(rc);
    if (rc)
        return;
    uint8_t again[SIMS_TEXT_RECORD_BYTES];
    sims_text_record_encode(&r, again);
    if (size != SIMS_TEXT_RECORD_BYTES || memcmp(again, rec, size) != 0)
        abort();
}

static void run_doc(const uint8_t *id, size_t id_len, const uint8_t *rec, size_t size)
{
    sims_doc_record r;
    /* A docs value of a store with a document file: a tombstone (exactly
     * what its encoder writes, which the record decoder refuses) or a
     * record (as the record decoder reads it). */
    int tombstone = 0;
    int erc = sims_doc_entry_decode(id, id_len, rec, size, &r, &tombstone);
    expect_decode_rc(erc);
    if (erc == SIMSTORE_OK && tombstone) {
        uint8_t t[SIMS_DOC_RECORD_OVERHEAD];
        if (sims_doc_tombstone_encode(id, id_len, r.fp, t, sizeof t) != size ||
            memcmp(t, rec, size) != 0 ||
            sims_doc_record_decode(id, id_len, rec, size, &r) == SIMSTORE_OK)
            abort();
        return;
    }
    int rc = sims_doc_record_decode(id, id_len, rec, size, &r);
    expect_decode_rc(rc);
    if (rc != erc)
        abort();
    if (rc)
        return;
    if (r.meta && (r.meta < rec || r.meta + r.meta_len > rec + size))
        abort();
    if (!(r.flags & SIMS_DOC_FLAG_INSERTION) && r.insertion != 0)
        abort();
    size_t sketch_len = simstore_sketch_bytes((simstore_sketch_kind)r.sketch_kind);
    if ((r.sketch != NULL) != (sketch_len != 0) ||
        (r.sketch && (r.sketch < rec || r.sketch + sketch_len > rec + size)))
        abort();
    if ((r.paras != NULL) != (r.para_count != 0) ||
        (r.paras && (r.paras < rec || r.paras + 8 * (size_t)r.para_count > rec + size)))
        abort();
    unsigned flags = r.flags | SIMS_DOC_FLAG_SKETCH(r.sketch_kind);
    size_t n =
        sims_doc_record_size(r.meta_len, flags | (r.para_count ? SIMS_DOC_FLAG_PARAGRAPHS : 0)) +
        8 * (size_t)r.para_count;
    uint8_t *again = malloc(n);
    if (!again ||
        sims_doc_record_encode_full(id, id_len, r.fp, flags & ~SIMS_DOC_FLAG_PARAGRAPHS,
                                    r.insertion, r.sketch, r.paras, r.para_count, r.meta,
                                    r.meta_len, again, n) != n ||
        n != size || memcmp(again, rec, n) != 0)
        abort();
    free(again);
}

/* The record with its checksum recomputed as format/store.md places it. */
static void repair(int which, const uint8_t *id, size_t id_len, uint8_t *rec, size_t size)
{
    switch (which) {
    case 0:
        if (size >= 8)
            le_store64(rec + size - 8, sims_xxh3_64(rec, size - 8, SIMS_STORE_RECORD_SEED));
        if (size >= 52) {
            /* And the design record inside, when its length fits. */
            uint32_t dlen = le_load32(rec + 40);
            if (dlen >= 8 && (uint64_t)dlen + 52 <= size) {
                le_store64(rec + 44 + dlen - 8,
                           sims_xxh3_64(rec + 44, dlen - 8, SIMS_DESIGN_RECORD_SEED));
                le_store64(rec + size - 8, sims_xxh3_64(rec, size - 8, SIMS_STORE_RECORD_SEED));
            }
        }
        break;
    case 1:
        if (size >= 8)
            le_store64(rec + size - 8, sims_xxh3_64(rec, size - 8, SIMS_STATE_RECORD_SEED));
        break;
    case 2:
        if (size == SIMS_TEXT_RECORD_BYTES)
            le_store64(rec + 32, sims_xxh3_64(rec, 32, SIMS_TEXT_RECORD_SEED));
        break;
    default:
        if (size >= 4) {
            uint64_t seed = sims_xxh3_64(id, id_len, SIMS_DOC_RECORD_SEED);
            le_store32(rec + size - 4, (uint32_t)sims_xxh3_64(rec, size - 4, seed));
        }
        break;
    }
}

static void run(int which, uint32_t tables, const uint8_t *id, size_t id_len, const uint8_t *rec,
                size_t size)
{
    switch (which) {
    case 0: run_store(rec, size); break;
    case 1: run_state(rec, size, tables); break;
    case 2: run_text(rec, size); break;
    default: run_doc(id, id_len, rec, size); break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int which = data[0] & 3;
    uint32_t tables = data[0] >> 2;
    const uint8_t *id = NULL;
    size_t id_len = 0;
    data++;
    size--;
    if (which == 3) {
        if (size < 1)
            return 0;
        id_len = data[0];
        if (id_len > size - 1)
            return 0;
        id = data + 1;
        data += 1 + id_len;
        size -= 1 + id_len;
    }
    /* Exact-size copies, so ASan sees any read past the record's end. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    run(which, tables, id, id_len, copy, size);
    repair(which, id, id_len, copy, size);
    run(which, tables, id, id_len, copy, size);
    free(copy);
    return 0;
}
