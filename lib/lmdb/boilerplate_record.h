/* boilerplate_record.h: the boilerplate record (format/store.md, `meta` key
 * `boilerplate`): the set of boilerplate line keys a store's texts are
 * fingerprinted without. Pure functions over byte buffers, like records.h. */
#ifndef SIMS_DOCS_BOILERPLATE_RECORD_H
#define SIMS_DOCS_BOILERPLATE_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define SIMS_BOILERPLATE_RECORD_KEY "boilerplate"
#define SIMS_BOILERPLATE_RECORD_SEED 0x53494D53424F494CULL /* "SIMSBOIL" */
#define SIMS_BOILERPLATE_RECORD_VERSION 1u
#define SIMS_BOILERPLATE_RECORD_FIXED 40u /* before the keys */

typedef struct sims_boilerplate_record {
    uint32_t version;             /* SIMS_BOILERPLATE_RECORD_VERSION */
    uint32_t fraction_millionths; /* 1..999999 */
    uint64_t min_documents;
    uint64_t documents;
    uint64_t line_count;
    /* line_count little-endian keys, strictly increasing: borrowed from the
     * decoded buffer (unused when encoding) */
    const uint8_t *keys;
} sims_boilerplate_record;

/* Bytes of a record of line_count keys; 0 when that overflows. */
size_t sims_boilerplate_record_size(uint64_t line_count);

/* Encode r with keys[0..r->line_count) (strictly increasing) into buf.
 * Returns the size written, or 0 when cap is too small. */
size_t sims_boilerplate_record_encode(const sims_boilerplate_record *r, const uint64_t *keys,
                                      uint8_t *buf, size_t cap);

/* Parse and check: magic, length (exactly 48 + 8 * line count, the count
 * bounded by the bytes held before anything uses it), checksum, then the
 * version (SIMSTORE_EVERSION for another one), the fraction and the keys'
 * order. SIMSTORE_ECORRUPT for the rest. */
int sims_boilerplate_record_decode(const uint8_t *buf, size_t len, sims_boilerplate_record *out);

/* Key i (< line_count) of a decoded record. */
uint64_t sims_boilerplate_record_key(const sims_boilerplate_record *r, uint64_t i);

#endif
