/* fuzz_shard_manifest.c: libFuzzer target for the sharded store's manifest
 * decoder (lib/shard/manifest.c, format/shards.md). Each input is decoded
 * twice: as given, and with its checksum recomputed over its bytes so that
 * mutations reach the field checks behind it. Whatever the bytes, decoding
 * must return OK, CORRUPT or VERSION without touching memory out of bounds;
 * a manifest that decodes must re-encode to the same bytes (the encoding is
 * canonical). Corpus: tests/fuzz/corpus/shard_manifest/. */
#include "common/bytes.h"
#include "common/checksum.h"
#include "shard/manifest.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *b, size_t n)
{
    sims_manifest m;
    int rc = sims_manifest_decode(b, n, &m);
    if (rc == SIMSTORE_OK) {
        uint8_t *again;
        size_t len;
        if (sims_manifest_encode(&m, &again, &len) != SIMSTORE_OK || len != n ||
            memcmp(again, b, n) != 0)
            abort();
        free(again);
        sims_manifest_free(&m);
    } else if (rc != SIMSTORE_ECORRUPT && rc != SIMSTORE_EVERSION && rc != SIMSTORE_ENOMEM) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > ((size_t)1 << 20))
        return 0;
    check(data, size);
    if (size >= 16) {
        uint8_t *copy = malloc(size);
        if (!copy)
            return 0;
        memcpy(copy, data, size);
        le_store64(copy + size - 8, sims_xxh3_64(copy, size - 8, 0));
        check(copy, size);
        free(copy);
    }
    return 0;
}
