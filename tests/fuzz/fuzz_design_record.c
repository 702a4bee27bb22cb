/* fuzz_design_record.c: libFuzzer target for the design record decoder
 * (lib/store/design.c, format/design.md). Each input is decoded twice: as
 * given, and with its checksum recomputed so that mutations reach the field
 * checks behind it. Whatever the bytes, decoding must return OK, CORRUPT or
 * VERSION without touching memory out of bounds; a record that decodes must
 * re-encode to the same bytes (the encoding is canonical) and be exact:
 * permutations invert, and sample flip sets of up to k bits leave some
 * table's prefix clean. Corpus: tests/fuzz/corpus/design_record/. */
#include "common/bytes.h"
#include "common/checksum.h"
#include "design/design.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Static: a design is ~100 KiB, and libFuzzer runs one input at a time. */
static sims_design design;
static uint8_t copy[SIMS_DESIGN_RECORD_MAX_BYTES + 64];
static uint8_t again[SIMS_DESIGN_RECORD_MAX_BYTES];

static void check_decoded(const uint8_t *rec, size_t size)
{
    size_t len = 0;
    if (sims_design_encode(&design, again, sizeof again, &len) != SIMSTORE_OK || len != size ||
        memcmp(again, rec, size) != 0)
        abort();
    uint64_t x = size >= 8 ? le_load64(rec) : 0;
    for (uint32_t t = 0; t < design.n_tables; t++) {
        const sims_permuter *p = &design.tables[t].permuter;
        if (sims_unpermute(p, sims_permute(p, x)) != x)
            abort();
        uint64_t lo, hi;
        sims_design_probe(&design, t, x, &lo, &hi);
        uint64_t px = sims_permute(p, x);
        if (px < lo || px > hi)
            abort();
    }
    /* A few flip sets of exactly k bits taken from the record's bytes. */
    for (size_t i = 0; i + 8 <= size && i < 64 * 8; i += 8) {
        uint64_t flips = 0;
        uint64_t bits = le_load64(rec + i);
        for (unsigned j = 0; j < design.params.k; j++)
            flips |= UINT64_C(1) << ((bits >> (6 * j)) & 63);
        if (sims_design_covering_table(&design, flips) < 0)
            abort();
    }
}

static void run(const uint8_t *rec, size_t size)
{
    int rc = sims_design_decode(rec, size, &design);
    if (rc == SIMSTORE_OK)
        check_decoded(rec, size);
    else if (rc != SIMSTORE_ECORRUPT && rc != SIMSTORE_EVERSION)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size);
    if (size >= SIMS_DESIGN_RECORD_HEADER_BYTES + SIMS_DESIGN_RECORD_TRAILER_BYTES &&
        size <= sizeof copy) {
        memcpy(copy, data, size);
        le_store64(copy + size - 8, sims_xxh3_64(copy, size - 8, SIMS_DESIGN_RECORD_SEED));
        run(copy, size);
    }
    return 0;
}
