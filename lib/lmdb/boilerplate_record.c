/* boilerplate_record.c: the boilerplate record of format/store.md. */
#include "lmdb/boilerplate_record.h"

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"

#include <string.h>

#define BOILERPLATE_MAGIC "SIMSBOIL"

size_t sims_boilerplate_record_size(uint64_t line_count)
{
    if (line_count > (SIZE_MAX - SIMS_BOILERPLATE_RECORD_FIXED - 8) / 8)
        return 0;
    return SIMS_BOILERPLATE_RECORD_FIXED + (size_t)line_count * 8 + 8;
}

size_t sims_boilerplate_record_encode(const sims_boilerplate_record *r, const uint64_t *keys,
                                      uint8_t *buf, size_t cap)
{
    size_t n = sims_boilerplate_record_size(r->line_count);
    if (n == 0 || cap < n)
        return 0;
    memcpy(buf, BOILERPLATE_MAGIC, 8);
    le_store32(buf + 8, r->version);
    le_store32(buf + 12, r->fraction_millionths);
    le_store64(buf + 16, r->min_documents);
    le_store64(buf + 24, r->documents);
    le_store64(buf + 32, r->line_count);
    for (uint64_t i = 0; i < r->line_count; i++)
        le_store64(buf + SIMS_BOILERPLATE_RECORD_FIXED + 8 * i, keys[i]);
    le_store64(buf + n - 8, sims_xxh3_64(buf, n - 8, SIMS_BOILERPLATE_RECORD_SEED));
    return n;
}

int sims_boilerplate_record_decode(const uint8_t *buf, size_t len, sims_boilerplate_record *out)
{
    sims_cursor c;
    const uint8_t *magic;
    sims_boilerplate_record r;
    cursor_init(&c, buf, len);
    if (cursor_bytes(&c, 8, &magic) || memcmp(magic, BOILERPLATE_MAGIC, 8) != 0)
        return SIMS_CORRUPT("boilerplate record: bad magic");
    if (cursor_u32(&c, &r.version) || cursor_u32(&c, &r.fraction_millionths) ||
        cursor_u64(&c, &r.min_documents) || cursor_u64(&c, &r.documents) ||
        cursor_u64(&c, &r.line_count))
        return SIMS_CORRUPT("boilerplate record: truncated (%zu bytes)", len);
    /* The count is bounded by the bytes there are before it is used. */
    if (cursor_remaining(&c) < 8 || (cursor_remaining(&c) - 8) / 8 != r.line_count ||
        (cursor_remaining(&c) - 8) % 8 != 0)
        return SIMS_CORRUPT("boilerplate record: %zu bytes do not hold %llu line keys", len,
                            (unsigned long long)r.line_count);
    if (le_load64(buf + len - 8) != sims_xxh3_64(buf, len - 8, SIMS_BOILERPLATE_RECORD_SEED))
        return SIMS_CORRUPT("boilerplate record: checksum mismatch");
    if (r.version != SIMS_BOILERPLATE_RECORD_VERSION)
        return sims_fail(SIMSTORE_EVERSION,
                         "boilerplate record version %u; this build reads version %u", r.version,
                         SIMS_BOILERPLATE_RECORD_VERSION);
    if (r.fraction_millionths < 1 || r.fraction_millionths > 999999)
        return SIMS_CORRUPT("boilerplate record: fraction of %u millionths", r.fraction_millionths);
    r.keys = buf + SIMS_BOILERPLATE_RECORD_FIXED;
    for (uint64_t i = 1; i < r.line_count; i++)
        if (le_load64(r.keys + 8 * (i - 1)) >= le_load64(r.keys + 8 * i))
            return SIMS_CORRUPT("boilerplate record: line keys %llu and %llu out of order",
                                (unsigned long long)i - 1, (unsigned long long)i);
    *out = r;
    return SIMSTORE_OK;
}

uint64_t sims_boilerplate_record_key(const sims_boilerplate_record *r, uint64_t i)
{
    return le_load64(r->keys + 8 * i);
}
