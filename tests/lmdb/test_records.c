/* test_records.c: the store's own LMDB records (format/store.md) against the
 * golden files in format/golden/: each decodes to the values the spec lists,
 * the encoder reproduces it byte for byte, and every flipped byte and every
 * truncation is rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "design/design.h"
#include "lmdb/records.h"
#include "common/sketch.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *golden(const char *name, size_t *size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/format/golden/%s", test_source_dir(), name);
    uint8_t *b = test_read_file(path, size);
    if (!b)
        fprintf(stderr, "cannot read %s\n", path);
    assert_non_null(b);
    return b;
}

typedef int (*decode_fn)(const uint8_t *buf, size_t len);

/* Every single-byte change and every truncation must fail to decode. */
static void reject_damage(const uint8_t *good, size_t n, decode_fn decode)
{
    uint8_t *b = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        for (unsigned x = 1; x < 256; x <<= 1) {
            memcpy(b, good, n);
            b[i] ^= (uint8_t)x;
            int rc = decode(b, n);
            if (rc != SIMSTORE_ECORRUPT && rc != SIMSTORE_EVERSION)
                fprintf(stderr, "byte %zu ^ %u decoded (%d)\n", i, x, rc);
            assert_true(rc == SIMSTORE_ECORRUPT || rc == SIMSTORE_EVERSION);
        }
    }
    for (size_t len = 0; len < n; len++)
        assert_int_equal(decode(good, len), SIMSTORE_ECORRUPT);
    memcpy(b, good, n);
    b[n] = 0;
    assert_int_equal(decode(b, n + 1), SIMSTORE_ECORRUPT);
    free(b);
}

static int decode_store(const uint8_t *buf, size_t len)
{
    sims_store_record r;
    int rc = sims_store_record_decode(buf, len, &r);
    if (rc == SIMSTORE_OK) {
        /* The envelope may hold a design the design decoder rejects. */
        sims_design *d = malloc(sizeof *d);
        rc = sims_design_decode(r.design, r.design_len, d);
        free(d);
    }
    return rc;
}

static int decode_state(const uint8_t *buf, size_t len)
{
    sims_state_record r;
    int rc = sims_state_record_decode(buf, len, 4, &r);
    sims_state_record_release(&r);
    return rc;
}

static int decode_text(const uint8_t *buf, size_t len)
{
    sims_text_record r;
    return sims_text_record_decode(buf, len, &r);
}

static int decode_doc42(const uint8_t *buf, size_t len)
{
    sims_doc_record r;
    return sims_doc_record_decode((const uint8_t *)"doc-42", 6, buf, len, &r);
}

static int decode_doc7(const uint8_t *buf, size_t len)
{
    sims_doc_record r;
    return sims_doc_record_decode((const uint8_t *)"doc-7", 5, buf, len, &r);
}

static int decode_doc9(const uint8_t *buf, size_t len)
{
    sims_doc_record r;
    return sims_doc_record_decode((const uint8_t *)"doc-9", 5, buf, len, &r);
}

static void test_records_golden__store_record(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("store-record.bin", &n);
    sims_store_record r;
    assert_int_equal(sims_store_record_decode(b, n, &r), 0);
    assert_int_equal(r.format_version, 2);
    assert_int_equal(r.flags, 0);
    assert_true(r.incompat_features == 0 && r.compat_features == 0);
    assert_true(r.store_tag == 0x0123456789abcdefULL);
    assert_int_equal(r.block_bytes, 512);
    assert_true(r.created_unix == 1700000000ULL);
    sims_design *d = malloc(sizeof *d), *want = malloc(sizeof *want);
    assert_int_equal(sims_design_decode(r.design, r.design_len, d), 0);
    assert_int_equal(sims_design_with_tables(3, 4, want), 0);
    assert_true(sims_design_equal(d, want));
    /* The encoder writes the same bytes. */
    uint8_t again[4096];
    assert_int_equal(sims_store_record_encode(&r, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_store);
    free(d);
    free(want);
    free(b);
}

/* Feature words and versions (format/store.md, "Versions and features"):
 * a version this build does not know and an unknown incompatible feature
 * are SIMSTORE_EVERSION naming them, never corruption; an unknown
 * compatible feature is ignored. */
static void test_records_store__versions_and_features(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("store-record.bin", &n);
    sims_store_record r, got;
    assert_int_equal(sims_store_record_decode(b, n, &r), 0);
    uint8_t buf[4096];

    sims_store_record x = r;
    x.compat_features = UINT64_C(0x8000000000000010);
    size_t m = sims_store_record_encode(&x, buf, sizeof buf);
    assert_int_equal(m, n);
    assert_int_equal(sims_store_record_decode(buf, m, &got), 0);
    assert_true(got.compat_features == x.compat_features);
    assert_int_equal(decode_store(buf, m), 0);

    x = r;
    x.incompat_features = 0x4;
    m = sims_store_record_encode(&x, buf, sizeof buf);
    assert_int_equal(sims_store_record_decode(buf, m, &got), SIMSTORE_EVERSION);
    assert_non_null(strstr(simstore_last_error(), "incompatible features 0x4 unknown"));
    assert_non_null(strstr(simstore_last_error(), "written by a newer version"));
    /* format/golden/store-record-incompatible-4.bin is this record. */
    size_t gn;
    uint8_t *g = golden("store-record-incompatible-4.bin", &gn);
    assert_int_equal(gn, m);
    assert_memory_equal(g, buf, m);
    free(g);
    /* Damage is still damage: the checksum is checked before the features. */
    buf[40] ^= 0x01;
    assert_int_equal(sims_store_record_decode(buf, m, &got), SIMSTORE_ECORRUPT);

    x = r;
    x.incompat_features = 0x4;
    x.compat_features = 0x1;
    m = sims_store_record_encode(&x, buf, sizeof buf);
    assert_int_equal(sims_store_record_decode(buf, m, &got), SIMSTORE_EVERSION);

    static const struct {
        uint32_t version;
        const char *says;
    } versions[] = {{1, "store format 1 from a pre-release build"},
                    {0, "store format 0 from a pre-release build"},
                    {3, "store format 3 unknown to this simstore"},
                    {UINT32_MAX, "written by a newer version"}};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        x = r;
        x.format_version = versions[i].version;
        m = sims_store_record_encode(&x, buf, sizeof buf);
        assert_int_equal(sims_store_record_decode(buf, m, &got), SIMSTORE_EVERSION);
        assert_non_null(strstr(simstore_last_error(), versions[i].says));
    }
    /* A version-1 record as pre-release builds wrote it (no feature words,
     * 16 bytes shorter): refused for its version, not its length. */
    uint8_t v1[4096];
    memcpy(v1, b, 40);
    le_store32(v1 + 8, 1);
    memcpy(v1 + 40, b + 56, n - 56);
    assert_int_equal(sims_store_record_decode(v1, n - 16, &got), SIMSTORE_EVERSION);
    assert_non_null(strstr(simstore_last_error(), "rebuild the store"));
    free(b);
}

/* Fingerprint version 3 (format/store.md, "Versions and features"):
 * incompatible feature bit 0 in the store record, version 3 in the text
 * record, the one exactly with the other. */
static void test_records_golden__fingerprint_v3(void **state)
{
    (void)state;
    assert_true(SIMS_STORE_INCOMPAT_FP_V3 == 1);
    assert_true(SIMS_STORE_INCOMPAT_KNOWN == SIMS_STORE_INCOMPAT_FP_V3);
    size_t n, n0;
    uint8_t *b = golden("store-record-fp3.bin", &n);
    uint8_t *b0 = golden("store-record.bin", &n0);
    sims_store_record r, r0;
    assert_int_equal(sims_store_record_decode(b, n, &r), 0);
    assert_int_equal(sims_store_record_decode(b0, n0, &r0), 0);
    assert_true(r.incompat_features == SIMS_STORE_INCOMPAT_FP_V3 && r.compat_features == 0);
    /* As store-record.bin but for the feature word (and the checksum). */
    assert_int_equal(n, n0);
    assert_memory_equal(b, b0, 40);
    assert_memory_equal(b + 48, b0 + 48, n - 56);
    uint8_t again[4096];
    r0.incompat_features = SIMS_STORE_INCOMPAT_FP_V3;
    assert_int_equal(sims_store_record_encode(&r0, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_store);
    /* A bit beyond the known ones is still refused, named alone. */
    r0.incompat_features = SIMS_STORE_INCOMPAT_FP_V3 | 0x4;
    size_t m = sims_store_record_encode(&r0, again, sizeof again);
    sims_store_record got;
    assert_int_equal(sims_store_record_decode(again, m, &got), SIMSTORE_EVERSION);
    assert_non_null(strstr(simstore_last_error(), "incompatible features 0x4 unknown"));
    free(b);
    free(b0);

    b = golden("text-record-v3.bin", &n);
    sims_text_record t;
    assert_int_equal(sims_text_record_decode(b, n, &t), 0);
    assert_int_equal(t.version, 3);
    assert_int_equal(t.shingle_words, 3);
    assert_int_equal(t.cjk_shingle, 2);
    assert_int_equal(t.weighting, 0);
    assert_int_equal(t.cjk, 2);
    assert_int_equal(t.lambda_fixed, 65536);
    assert_int_equal(t.sketch, 0);
    assert_int_equal(t.paragraph_min_words, 0);
    uint8_t enc[SIMS_TEXT_RECORD_BYTES];
    sims_text_record_encode(&t, enc);
    assert_memory_equal(enc, b, n);
    reject_damage(b, n, decode_text);
    /* The feature bit goes with version 3 and only with it. */
    assert_int_equal(sims_store_incompat_check(SIMS_STORE_INCOMPAT_FP_V3, &t), 0);
    assert_int_equal(sims_store_incompat_check(0, &t), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "lacks"));
    for (uint32_t v = 1; v <= 2; v++) {
        t.version = v;
        assert_int_equal(sims_store_incompat_check(0, &t), 0);
        assert_int_equal(sims_store_incompat_check(SIMS_STORE_INCOMPAT_FP_V3, &t),
                         SIMSTORE_ECORRUPT);
        assert_true(sims_store_incompat_of_version(v) == 0);
    }
    assert_true(sims_store_incompat_of_version(3) == SIMS_STORE_INCOMPAT_FP_V3);
    free(b);
}

static void test_records_golden__state_record(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("state-record.bin", &n);
    sims_state_record r;
    assert_int_equal(sims_state_record_decode(b, n, 4, &r), 0);
    assert_int_equal(r.generation, 7);
    assert_int_equal(r.next_segment_id, 4);
    assert_int_equal(r.doc_count, 1020);
    assert_int_equal(r.fp_count, 1017);
    assert_int_equal(r.segment_count, 2);
    assert_int_equal(r.segments[0].id, 1);
    assert_int_equal(r.segments[0].fp_count, 1000);
    assert_true(r.segments[0].created_unix == 1700000001ULL);
    assert_int_equal(r.segments[1].id, 3);
    assert_int_equal(r.segments[1].fp_count, 25);
    assert_int_equal(r.segments[1].table_count, 4);
    uint8_t again[256];
    assert_int_equal(sims_state_record_encode(&r, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    /* The table count is checked against the store's design. */
    sims_state_record other;
    assert_int_equal(sims_state_record_decode(b, n, 10, &other), SIMSTORE_ECORRUPT);
    sims_state_record_release(&r);
    reject_damage(b, n, decode_state);
    free(b);
}

/* The applied WAL sequence number (format/store.md, "The state record"): 8
 * bytes before the checksum, present only when not 0, so records without it
 * are the records written before it existed. */
static void test_records_golden__state_record_wal(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("state-record-wal.bin", &n);
    assert_int_equal(n, 128);
    sims_state_record r;
    assert_int_equal(sims_state_record_decode(b, n, 4, &r), 0);
    assert_int_equal(r.generation, 12);
    assert_int_equal(r.next_segment_id, 4);
    assert_int_equal(r.doc_count, 1020);
    assert_int_equal(r.fp_count, 1017);
    assert_int_equal(r.segment_count, 2);
    assert_int_equal(r.segments[1].id, 3);
    assert_int_equal(r.segments[1].fp_count, 25);
    assert_int_equal(r.para_segment_count, 0);
    assert_true(r.wal_applied == 4242);
    assert_int_equal(sims_state_record_bytes(&r), n);
    uint8_t again[256];
    assert_int_equal(sims_state_record_encode(&r, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    /* Without the number: the old record, byte for byte. */
    uint8_t *old = golden("state-record.bin", &n);
    r.generation = 7;
    r.wal_applied = 0;
    assert_int_equal(sims_state_record_encode(&r, again, sizeof again), n);
    assert_memory_equal(again, old, n);
    free(old);
    /* Present but 0 is not canonical: corrupt. */
    r.wal_applied = 1;
    n = sims_state_record_encode(&r, again, sizeof again);
    assert_int_equal(n, 128);
    memset(again + 112, 0, 8);
    le_store64(again + 120, sims_xxh3_64(again, 120, SIMS_STATE_RECORD_SEED));
    assert_int_equal(decode_state(again, n), SIMSTORE_ECORRUPT);
    /* With paragraph segments too: the number follows their entries. */
    sims_segment_entry para = {5, 40, 1700000200, 4, 0};
    r.para_segments = &para;
    r.para_segment_count = 1;
    r.next_segment_id = 6;
    r.wal_applied = 99;
    n = sims_state_record_encode(&r, again, sizeof again);
    assert_int_equal(n, 56 + 3 * 32 + 8);
    r.para_segments = NULL;
    r.para_segment_count = 0;
    sims_state_record_release(&r);
    assert_int_equal(sims_state_record_decode(again, n, 4, &r), 0);
    assert_true(r.wal_applied == 99);
    assert_int_equal(r.para_segment_count, 1);
    assert_int_equal(r.para_segments[0].id, 5);
    sims_state_record_release(&r);
    free(b);
    b = golden("state-record-wal.bin", &n);
    reject_damage(b, n, decode_state);
    free(b);
}

static void test_records_golden__text_record(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("text-record.bin", &n);
    sims_text_record r;
    assert_int_equal(sims_text_record_decode(b, n, &r), 0);
    assert_int_equal(r.shingle_words, 3);
    assert_int_equal(r.weighting, 1);
    assert_int_equal(r.cjk, 1);
    assert_int_equal(r.lambda_fixed, 32768); /* lambda 0.5 */
    /* Written before fingerprint versions: version 1, no CJK shingle. */
    assert_int_equal(r.version, 1);
    assert_int_equal(r.cjk_shingle, 0);
    uint8_t again[SIMS_TEXT_RECORD_BYTES];
    sims_text_record_encode(&r, again);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_text);
    free(b);
}

static void test_records_golden__text_record_v2(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("text-record-v2.bin", &n);
    sims_text_record r;
    assert_int_equal(sims_text_record_decode(b, n, &r), 0);
    assert_int_equal(r.version, 2);
    assert_int_equal(r.shingle_words, 3);
    assert_int_equal(r.cjk_shingle, 2);
    assert_int_equal(r.weighting, 2); /* log */
    assert_int_equal(r.cjk, 2);       /* bigrams */
    assert_int_equal(r.lambda_fixed, 65536);
    uint8_t again[SIMS_TEXT_RECORD_BYTES];
    sims_text_record_encode(&r, again);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_text);
    /* Values the format forbids, each with a valid checksum: log weighting
     * or a CJK shingle with version 1, version 2 or 3 without a CJK shingle
     * or with one above 32, versions 4 and 255 (version 3 is known since
     * fingerprint version 3: text-record-v3.bin). */
    static const struct {
        uint32_t version, cjk_shingle, weighting;
    } bad[] = {{1, 0, 2}, {1, 2, 0},  {2, 0, 0}, {2, 33, 0},
               {3, 0, 0}, {3, 33, 0}, {4, 2, 0}, {255, 2, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sims_text_record w = r;
        w.version = bad[i].version;
        w.cjk_shingle = bad[i].cjk_shingle;
        w.weighting = bad[i].weighting;
        uint8_t enc[SIMS_TEXT_RECORD_BYTES];
        sims_text_record_encode(&w, enc);
        if (bad[i].version == 1)
            enc[21] = (uint8_t)bad[i].cjk_shingle; /* the encoder writes 0 */
        le_store64(enc + 32, sims_xxh3_64(enc, 32, SIMS_TEXT_RECORD_SEED));
        assert_int_equal(sims_text_record_decode(enc, sizeof enc, &w), SIMSTORE_ECORRUPT);
    }
    /* Version 1 is written as 0, byte for byte the record of before. */
    sims_text_record v1 = r;
    v1.version = 1;
    v1.weighting = 0;
    sims_text_record_encode(&v1, again);
    assert_int_equal(again[20], 0);
    assert_int_equal(again[21], 0);
    free(b);
}

static void test_records_golden__document_records(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("doc-record-doc-42.bin", &n);
    const char *meta = "{\"url\":\"http://example.org/\"}";
    sims_doc_record r;
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"doc-42", 6, b, n, &r), 0);
    assert_true(r.fp == 0xfedcba9876543210ULL);
    assert_int_equal(r.meta_len, strlen(meta));
    assert_memory_equal(r.meta, meta, strlen(meta));
    /* The id is part of the check: the record does not decode under another. */
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"doc-43", 6, b, n, &r),
                     SIMSTORE_ECORRUPT);
    uint8_t again[128];
    assert_int_equal(r.flags, 0);
    assert_int_equal(r.insertion, 0); /* written before insertion numbers */
    assert_int_equal(sims_doc_record_encode((const uint8_t *)"doc-42", 6, 0xfedcba9876543210ULL, 0,
                                            0, (const uint8_t *)meta, strlen(meta), again,
                                            sizeof again),
                     n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_doc42);
    free(b);

    b = golden("doc-record-x.bin", &n);
    assert_int_equal(n, SIMS_DOC_RECORD_OVERHEAD);
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"x", 1, b, n, &r), 0);
    assert_true(r.fp == 0);
    assert_null(r.meta);
    assert_int_equal(r.insertion, 0);
    free(b);

    /* Flag bit 1: the id "1234567" was a JSON integer. */
    b = golden("doc-record-int-1234567.bin", &n);
    assert_int_equal(n, SIMS_DOC_RECORD_OVERHEAD);
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"1234567", 7, b, n, &r), 0);
    assert_true(r.fp == 0x0123456789abcdefULL);
    assert_int_equal(r.flags, SIMS_DOC_FLAG_INTEGER_ID);
    assert_null(r.meta);
    assert_int_equal(sims_doc_record_encode((const uint8_t *)"1234567", 7, 0x0123456789abcdefULL,
                                            SIMS_DOC_FLAG_INTEGER_ID, 0, NULL, 0, again,
                                            sizeof again),
                     n);
    assert_memory_equal(again, b, n);
    free(b);
    /* Bits 5..7 stay reserved; bit 2 (bits 3..4) on a record without room
     * for the insertion number (the sketch) is corrupt too. */
    uint8_t bad[SIMS_DOC_RECORD_OVERHEAD];
    for (unsigned bit = 2; bit < 8; bit++) {
        sims_doc_record_encode((const uint8_t *)"x", 1, 7, 0, 0, NULL, 0, bad, sizeof bad);
        bad[1] = (uint8_t)(1u << bit);
        /* Re-seal the check so only the flag is wrong. */
        uint64_t seed = sims_xxh3_64("x", 1, SIMS_DOC_RECORD_SEED);
        le_store32(bad + 10, (uint32_t)sims_xxh3_64(bad, 10, seed));
        assert_int_equal(sims_doc_record_decode((const uint8_t *)"x", 1, bad, sizeof bad, &r),
                         SIMSTORE_ECORRUPT);
    }
}

/* Flag bit 2: the insertion number follows the fingerprint. */
static void test_records_golden__document_record_insertion(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("doc-record-seq-doc-7.bin", &n);
    const char *meta = "{\"n\":7}";
    assert_int_equal(n, SIMS_DOC_RECORD_OVERHEAD + 8 + strlen(meta));
    sims_doc_record r;
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"doc-7", 5, b, n, &r), 0);
    assert_true(r.fp == 0x0123456789abcdefULL);
    assert_int_equal(r.flags, SIMS_DOC_FLAG_INSERTION);
    assert_true(r.insertion == ((uint64_t)3 << 40 | 5)); /* generation 3, position 5 */
    assert_int_equal(r.meta_len, strlen(meta));
    assert_memory_equal(r.meta, meta, strlen(meta));
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"doc-8", 5, b, n, &r),
                     SIMSTORE_ECORRUPT);
    uint8_t again[64];
    assert_int_equal(sims_doc_record_size(strlen(meta), SIMS_DOC_FLAG_INSERTION), n);
    assert_int_equal(sims_doc_record_encode((const uint8_t *)"doc-7", 5, 0x0123456789abcdefULL,
                                            SIMS_DOC_FLAG_INSERTION, (uint64_t)3 << 40 | 5,
                                            (const uint8_t *)meta, strlen(meta), again,
                                            sizeof again),
                     n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_doc7);
    free(b);

    /* Round trips: each flag combination, with and without metadata; the
     * insertion number is written only with its flag. */
    static const uint64_t values[] = {0, 1, (uint64_t)1 << 40, UINT64_MAX};
    for (unsigned flags = 0; flags < 4; flags++) {
        unsigned f =
            (flags & 1 ? SIMS_DOC_FLAG_INTEGER_ID : 0) | (flags & 2 ? SIMS_DOC_FLAG_INSERTION : 0);
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            for (size_t ml = 0; ml <= strlen(meta); ml += strlen(meta)) {
                size_t len = sims_doc_record_encode((const uint8_t *)"id", 2, 42, f, values[v],
                                                    (const uint8_t *)meta, ml, again, sizeof again);
                assert_int_equal(len, sims_doc_record_size(ml, f));
                assert_int_equal(sims_doc_record_decode((const uint8_t *)"id", 2, again, len, &r),
                                 0);
                assert_int_equal(r.flags, f);
                assert_true(r.fp == 42);
                assert_true(r.insertion == ((f & SIMS_DOC_FLAG_INSERTION) ? values[v] : 0));
                assert_int_equal(r.meta_len, ml);
                if (ml)
                    assert_memory_equal(r.meta, meta, ml);
                else
                    assert_null(r.meta);
            }
        }
    }
    /* Too small a buffer writes nothing. */
    assert_int_equal(sims_doc_record_encode((const uint8_t *)"id", 2, 42, SIMS_DOC_FLAG_INSERTION,
                                            1, NULL, 0, again, SIMS_DOC_RECORD_OVERHEAD + 7),
                     0);
}

/* Flag bits 3..4: a sketch of that kind follows the insertion number. */
static void test_records_golden__document_record_sketch(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("doc-record-sketch-doc-9.bin", &n);
    const char *meta = "{\"n\":9}";
    /* The sketch of "The quick brown fox jumps over the lazy dog." (minhash16,
     * format/sketch.md). */
    static const uint8_t sketch[16] = {0xaf, 0xfd, 0xf6, 0xef, 0xff, 0xfc, 0xeb, 0x9f,
                                       0xbd, 0xef, 0x97, 0x3f, 0xd3, 0x9f, 0xdf, 0xcf};
    unsigned flags = SIMS_DOC_FLAG_INSERTION | SIMS_DOC_FLAG_SKETCH(SIMSTORE_SKETCH_MINHASH16);
    assert_int_equal(n, SIMS_DOC_RECORD_OVERHEAD + 8 + 16 + strlen(meta));
    assert_int_equal(sims_doc_record_size(strlen(meta), flags), n);
    sims_doc_record r;
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"doc-9", 5, b, n, &r), 0);
    assert_true(r.fp == 0x0123456789abcdefULL);
    assert_int_equal(r.flags, SIMS_DOC_FLAG_INSERTION);
    assert_true(r.insertion == ((uint64_t)1 << 40 | 9));
    assert_int_equal(r.sketch_kind, SIMSTORE_SKETCH_MINHASH16);
    assert_non_null(r.sketch);
    assert_memory_equal(r.sketch, sketch, 16);
    assert_int_equal(r.meta_len, strlen(meta));
    assert_memory_equal(r.meta, meta, strlen(meta));
    uint8_t again[SIMS_DOC_RECORD_OVERHEAD + 8 + SIMSTORE_SKETCH_MAX_BYTES + 64];
    assert_int_equal(
        sims_doc_record_encode_sketch((const uint8_t *)"doc-9", 5, 0x0123456789abcdefULL, flags,
                                      (uint64_t)1 << 40 | 9, sketch, (const uint8_t *)meta,
                                      strlen(meta), again, sizeof again),
        n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_doc9);
    free(b);

    /* Every kind, with and without metadata, round trips; the plain encoder
     * writes no sketch whatever the flags say. */
    uint8_t big[SIMSTORE_SKETCH_MAX_BYTES];
    for (unsigned i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 37 + 1);
    for (unsigned kind = 0; kind <= SIMS_SKETCH_KIND_MAX; kind++) {
        size_t sk = simstore_sketch_bytes((simstore_sketch_kind)kind);
        for (size_t ml = 0; ml <= strlen(meta); ml += strlen(meta)) {
            unsigned f = SIMS_DOC_FLAG_INSERTION | SIMS_DOC_FLAG_SKETCH(kind);
            size_t len =
                sims_doc_record_encode_sketch((const uint8_t *)"id", 2, 5, f, 77, big,
                                              (const uint8_t *)meta, ml, again, sizeof again);
            assert_int_equal(len, SIMS_DOC_RECORD_OVERHEAD + 8 + sk + ml);
            assert_int_equal(sims_doc_record_decode((const uint8_t *)"id", 2, again, len, &r), 0);
            assert_int_equal(r.sketch_kind, kind);
            if (sk)
                assert_memory_equal(r.sketch, big, sk);
            else
                assert_null(r.sketch);
            assert_int_equal(r.meta_len, ml);
            assert_true(r.insertion == 77);
        }
        size_t plain =
            sims_doc_record_encode((const uint8_t *)"id", 2, 5, SIMS_DOC_FLAG_SKETCH(kind), 0, NULL,
                                   0, again, sizeof again);
        assert_int_equal(plain, SIMS_DOC_RECORD_OVERHEAD);
        /* A sketch flag without a sketch: none written. */
        assert_int_equal(sims_doc_record_encode_sketch((const uint8_t *)"id", 2, 5,
                                                       SIMS_DOC_FLAG_SKETCH(kind), 0, NULL, NULL, 0,
                                                       again, sizeof again),
                         SIMS_DOC_RECORD_OVERHEAD);
    }
    /* Kinds 4 and 5 set flag bit 6; bit 6 with bits 3..4 = 2 or 3 (kinds 6
     * and 7) names no kind: corrupt. */
    assert_int_equal(SIMS_DOC_FLAG_SKETCH(4), 0x40u);
    assert_int_equal(SIMS_DOC_FLAG_SKETCH(5), 0x48u);
    for (unsigned kind = 6; kind <= 7; kind++) {
        unsigned f = SIMS_DOC_FLAG_INSERTION | SIMS_DOC_FLAG_SKETCH(kind);
        size_t len = SIMS_DOC_RECORD_OVERHEAD + 8;
        memset(again, 0, len);
        again[0] = 1;
        again[1] = (uint8_t)f;
        uint64_t seed6 = sims_xxh3_64("id", 2, SIMS_DOC_RECORD_SEED);
        le_store32(again + len - 4, (uint32_t)sims_xxh3_64(again, len - 4, seed6));
        assert_int_equal(sims_doc_record_decode((const uint8_t *)"id", 2, again, len, &r),
                         SIMSTORE_ECORRUPT);
    }
    /* The length must fit the kind exactly: a minhash64 record cut by one
     * byte reads as too short, with its check re-sealed. */
    size_t len = sims_doc_record_encode_sketch((const uint8_t *)"id", 2, 5, SIMS_DOC_FLAG_SKETCH(3),
                                               0, big, NULL, 0, again, sizeof again);
    assert_int_equal(len, SIMS_DOC_RECORD_OVERHEAD + 64);
    uint64_t seed = sims_xxh3_64("id", 2, SIMS_DOC_RECORD_SEED);
    le_store32(again + len - 5, (uint32_t)sims_xxh3_64(again, len - 5, seed));
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"id", 2, again, len - 1, &r),
                     SIMSTORE_ECORRUPT);
}

/* Flag bit 6: the sketch kind's third bit (kinds 4 and 5). */
static void test_records_golden__document_record_sketch256(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("doc-record-sketch256-doc-9.bin", &n);
    const char *meta = "{\"n\":9}";
    unsigned flags = SIMS_DOC_FLAG_INSERTION | SIMS_DOC_FLAG_SKETCH(SIMSTORE_SKETCH_MINHASH256);
    assert_int_equal(n, SIMS_DOC_RECORD_OVERHEAD + 8 + 256 + strlen(meta));
    assert_int_equal(b[1], 0x4d); /* metadata, insertion number, kind 5 = bits 3 and 6 */
    sims_doc_record r;
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"doc-9", 5, b, n, &r), 0);
    assert_int_equal(r.sketch_kind, SIMSTORE_SKETCH_MINHASH256);
    assert_true(r.fp == 0x0123456789abcdefULL);
    assert_true(r.insertion == ((uint64_t)1 << 40 | 9));
    /* The sketch of vector 8 of format/sketch.md begins ddc4fbbb, ends afeb9. */
    assert_int_equal(r.sketch[0], 0xdd);
    assert_int_equal(r.sketch[3], 0xbb);
    assert_int_equal(r.sketch[255], 0xb9);
    assert_int_equal(r.meta_len, strlen(meta));
    uint8_t again[SIMS_DOC_RECORD_OVERHEAD + 8 + SIMSTORE_SKETCH_MAX_BYTES + 64];
    assert_int_equal(
        sims_doc_record_encode_sketch((const uint8_t *)"doc-9", 5, 0x0123456789abcdefULL, flags,
                                      (uint64_t)1 << 40 | 9, r.sketch, (const uint8_t *)meta,
                                      strlen(meta), again, sizeof again),
        n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_doc9);
    free(b);
}

static void test_records_golden__text_record_sketch(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = golden("text-record-sketch.bin", &n);
    sims_text_record r;
    assert_int_equal(sims_text_record_decode(b, n, &r), 0);
    assert_int_equal(r.version, 2);
    assert_int_equal(r.shingle_words, 3);
    assert_int_equal(r.cjk_shingle, 2);
    assert_int_equal(r.weighting, 0); /* tf */
    assert_int_equal(r.cjk, 1);       /* friso */
    assert_int_equal(r.lambda_fixed, 65536);
    assert_int_equal(r.sketch, SIMSTORE_SKETCH_MINHASH64);
    uint8_t again[SIMS_TEXT_RECORD_BYTES];
    sims_text_record_encode(&r, again);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_text);
    /* Records without a sketch (all written before) read as none. */
    free(b);
    b = golden("text-record-v2.bin", &n);
    assert_int_equal(sims_text_record_decode(b, n, &r), 0);
    assert_int_equal(r.sketch, 0);
    free(b);
    b = golden("text-record.bin", &n);
    assert_int_equal(sims_text_record_decode(b, n, &r), 0);
    assert_int_equal(r.sketch, 0);
    /* Kinds past the last are corrupt; byte 23 is the paragraph minimum
     * (any value: 0 none). */
    for (unsigned v = 1; v <= SIMS_SKETCH_KIND_MAX; v++) {
        uint8_t w[SIMS_TEXT_RECORD_BYTES];
        memcpy(w, b, sizeof w);
        w[22] = (uint8_t)v;
        le_store64(w + 32, sims_xxh3_64(w, 32, SIMS_TEXT_RECORD_SEED));
        assert_int_equal(sims_text_record_decode(w, sizeof w, &r), 0);
        assert_int_equal(r.sketch, v);
    }
    for (unsigned v = SIMS_SKETCH_KIND_MAX + 1; v < 256; v += 17) {
        uint8_t w[SIMS_TEXT_RECORD_BYTES];
        memcpy(w, b, sizeof w);
        w[22] = (uint8_t)v;
        le_store64(w + 32, sims_xxh3_64(w, 32, SIMS_TEXT_RECORD_SEED));
        assert_int_equal(sims_text_record_decode(w, sizeof w, &r), SIMSTORE_ECORRUPT);
        memcpy(w, b, sizeof w);
        w[23] = (uint8_t)v;
        le_store64(w + 32, sims_xxh3_64(w, 32, SIMS_TEXT_RECORD_SEED));
        assert_int_equal(sims_text_record_decode(w, sizeof w, &r), 0);
        assert_int_equal(r.paragraph_min_words, v);
    }
    free(b);
}

static int decode_doc5(const uint8_t *buf, size_t len)
{
    sims_doc_record r;
    return sims_doc_record_decode((const uint8_t *)"doc-5", 5, buf, len, &r);
}

/* The paragraph index (format/store.md, "Paragraphs"): the text record's
 * byte 23, the state record's paragraph segments, the document record's
 * paragraph list (flag bit 5). Records without them are unchanged. */
static void test_records_golden__paragraphs(void **state)
{
    (void)state;
    size_t n;
    sims_text_record t;
    uint8_t *b = golden("text-record-paragraphs.bin", &n);
    assert_int_equal(sims_text_record_decode(b, n, &t), 0);
    assert_int_equal(t.paragraph_min_words, 8);
    assert_int_equal(t.version, 2);
    assert_int_equal(t.sketch, 0);
    uint8_t again[256];
    sims_text_record_encode(&t, again);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_text);
    free(b);
    b = golden("text-record-v2.bin", &n);
    assert_int_equal(sims_text_record_decode(b, n, &t), 0);
    assert_int_equal(t.paragraph_min_words, 0);
    free(b);

    b = golden("state-record-paragraphs.bin", &n);
    sims_state_record st;
    assert_int_equal(n, 184);
    assert_int_equal(sims_state_record_decode(b, n, 4, &st), 0);
    assert_int_equal(st.generation, 9);
    assert_int_equal(st.next_segment_id, 6);
    assert_int_equal(st.segment_count, 2);
    assert_int_equal(st.segments[0].id, 1);
    assert_int_equal(st.segments[1].id, 3);
    assert_int_equal(st.para_segment_count, 2);
    assert_int_equal(st.para_segments[0].id, 2);
    assert_int_equal(st.para_segments[0].fp_count, 9000);
    assert_int_equal(st.para_segments[1].id, 5);
    assert_int_equal(st.para_segments[1].fp_count, 40);
    assert_true(st.para_segments[1].created_unix == 1700000200ULL);
    assert_int_equal(st.para_segments[1].table_count, 4);
    assert_int_equal(sims_state_record_encode(&st, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    /* An id in both lists is corrupt (their files would share names). */
    st.para_segments[0].id = 3;
    assert_int_equal(sims_state_record_encode(&st, again, sizeof again), n);
    assert_int_equal(decode_state(again, n), SIMSTORE_ECORRUPT);
    sims_state_record_release(&st);
    reject_damage(b, n, decode_state);
    free(b);
    /* A state without paragraph segments is the record written before. */
    b = golden("state-record.bin", &n);
    assert_int_equal(sims_state_record_decode(b, n, 4, &st), 0);
    assert_int_equal(st.para_segment_count, 0);
    assert_null(st.para_segments);
    assert_int_equal(sims_state_record_encode(&st, again, sizeof again), n);
    assert_memory_equal(again, b, n);
    sims_state_record_release(&st);
    free(b);

    b = golden("doc-record-paragraphs-doc-5.bin", &n);
    const char *meta = "{\"n\":5}";
    assert_int_equal(n, SIMS_DOC_RECORD_OVERHEAD + 8 + 4 + 3 * 8 + strlen(meta));
    sims_doc_record r;
    assert_int_equal(sims_doc_record_decode((const uint8_t *)"doc-5", 5, b, n, &r), 0);
    assert_true(r.fp == 0x0123456789abcdefULL);
    assert_true(r.insertion == ((uint64_t)2 << 40 | 5));
    assert_int_equal(r.para_count, 3);
    assert_true(le_load64(r.paras) == 0x1111111111111111ULL);
    assert_true(le_load64(r.paras + 8) == 0x2222222222222222ULL);
    assert_true(le_load64(r.paras + 16) == 0x1111111111111111ULL);
    assert_int_equal(r.meta_len, strlen(meta));
    assert_memory_equal(r.meta, meta, strlen(meta));
    assert_int_equal(sims_doc_record_encode_full((const uint8_t *)"doc-5", 5, r.fp,
                                                 SIMS_DOC_FLAG_INSERTION, r.insertion, NULL,
                                                 r.paras, 3, (const uint8_t *)meta, strlen(meta),
                                                 again, sizeof again),
                     n);
    assert_memory_equal(again, b, n);
    reject_damage(b, n, decode_doc5);
    /* A count that the record cannot hold, or 0, with the check re-sealed. */
    uint64_t seed = sims_xxh3_64("doc-5", 5, SIMS_DOC_RECORD_SEED);
    for (uint32_t bad = 0; bad < 8; bad += 4) {
        memcpy(again, b, n);
        le_store32(again + 18, bad ? bad : 0);
        le_store32(again + n - 4, (uint32_t)sims_xxh3_64(again, n - 4, seed));
        assert_int_equal(decode_doc5(again, n), SIMSTORE_ECORRUPT);
    }
    free(b);
    /* Without paragraphs the full encoder writes the record of before. */
    size_t plain = sims_doc_record_encode_full((const uint8_t *)"x", 1, 0, 0, 0, NULL, NULL, 0,
                                               NULL, 0, again, sizeof again);
    assert_int_equal(plain, SIMS_DOC_RECORD_OVERHEAD);
    b = golden("doc-record-x.bin", &n);
    assert_memory_equal(again, b, n);
    free(b);
}

/* Insertion numbers: (generation << 40) | position, refused past either limit. */
/* Segment entry flags (format/store.md, "Document files"): bit 0 names a
 * document file, on a document segment only; every other bit is reserved. */
static void test_records_state_record__segment_flags(void **state)
{
    (void)state;
    sims_segment_entry segs[2] = {{1, 1000, 1700000001, 4, SIMS_SEGMENT_FLAG_DOCFILE},
                                  {3, 25, 1700000002, 4, 0}};
    sims_state_record r = {
        .generation = 2,
        .next_segment_id = 4,
        .doc_count = 1100,
        .fp_count = 1025,
        .segment_count = 2,
        .segments = segs,
    };
    uint8_t buf[256];
    size_t n = sims_state_record_encode(&r, buf, sizeof buf);
    assert_int_equal(n, sims_state_record_size(2));
    assert_int_equal(le_load32(buf + 48 + 28), SIMS_SEGMENT_FLAG_DOCFILE);
    sims_state_record back;
    assert_int_equal(sims_state_record_decode(buf, n, 4, &back), SIMSTORE_OK);
    assert_int_equal(back.segments[0].flags, SIMS_SEGMENT_FLAG_DOCFILE);
    assert_int_equal(back.segments[1].flags, 0);
    sims_state_record_release(&back);
    /* A reserved bit, or the flag on a paragraph segment: corrupt. */
    segs[1].flags = 2;
    n = sims_state_record_encode(&r, buf, sizeof buf);
    assert_int_equal(sims_state_record_decode(buf, n, 4, &back), SIMSTORE_ECORRUPT);
    segs[1].flags = 0;
    r.segment_count = 1;
    r.para_segments = &segs[1];
    r.para_segment_count = 1;
    segs[1].flags = SIMS_SEGMENT_FLAG_DOCFILE;
    n = sims_state_record_encode(&r, buf, sizeof buf);
    assert_int_equal(sims_state_record_decode(buf, n, 4, &back), SIMSTORE_ECORRUPT);
    segs[1].flags = 0;
    n = sims_state_record_encode(&r, buf, sizeof buf);
    assert_int_equal(sims_state_record_decode(buf, n, 4, &back), SIMSTORE_OK);
    sims_state_record_release(&back);
}

static void test_records_insertion__limits(void **state)
{
    (void)state;
    uint64_t x = 99;
    assert_int_equal(sims_doc_insertion_number(1, 0, &x), 0);
    assert_true(x == (uint64_t)1 << 40);
    assert_int_equal(sims_doc_insertion_number(2, 7, &x), 0);
    assert_true(x == ((uint64_t)2 << 40 | 7));
    assert_int_equal(sims_doc_insertion_number((1u << 24) - 1, ((uint64_t)1 << 40) - 1, &x), 0);
    assert_true(x == UINT64_MAX);
    x = 99;
    assert_int_equal(sims_doc_insertion_number(1u << 24, 0, &x), SIMSTORE_EFULL);
    assert_int_equal(sims_doc_insertion_number(1, (uint64_t)1 << 40, &x), SIMSTORE_EFULL);
    assert_int_equal(sims_doc_insertion_number(UINT64_MAX, UINT64_MAX, &x), SIMSTORE_EFULL);
    assert_true(x == 99);
    /* A later generation orders after every position of an earlier one. */
    uint64_t a, c;
    assert_int_equal(sims_doc_insertion_number(5, ((uint64_t)1 << 40) - 1, &a), 0);
    assert_int_equal(sims_doc_insertion_number(6, 0, &c), 0);
    assert_true(a < c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_golden__store_record),
        cmocka_unit_test(test_records_store__versions_and_features),
        cmocka_unit_test(test_records_golden__fingerprint_v3),
        cmocka_unit_test(test_records_golden__state_record),
        cmocka_unit_test(test_records_golden__text_record),
        cmocka_unit_test(test_records_golden__text_record_v2),
        cmocka_unit_test(test_records_golden__document_records),
        cmocka_unit_test(test_records_golden__document_record_insertion),
        cmocka_unit_test(test_records_golden__document_record_sketch),
        cmocka_unit_test(test_records_golden__document_record_sketch256),
        cmocka_unit_test(test_records_golden__text_record_sketch),
        cmocka_unit_test(test_records_golden__paragraphs),
        cmocka_unit_test(test_records_golden__state_record_wal),
        cmocka_unit_test(test_records_insertion__limits),
        cmocka_unit_test(test_records_state_record__segment_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
