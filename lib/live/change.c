/* change.c: the live store's WAL payloads of change.h (format/wal.md, "Live
 * store records"). */
#include "live/change.h"

#include "common/bytes.h"
#include "common/error.h"
#include "simstore.h"

#include <string.h>

size_t sims_change_size(const sims_change *c)
{
    if (c->type == SIMS_CHANGE_DELETE)
        return c->id_len;
    return SIMS_CHANGE_INSERT_FIXED + c->id_len +
           simstore_sketch_bytes((simstore_sketch_kind)c->sketch_kind) + c->meta_len;
}

void sims_change_encode(const sims_change *c, uint8_t *buf)
{
    if (c->type == SIMS_CHANGE_DELETE) {
        memcpy(buf, c->id, c->id_len);
        return;
    }
    size_t sketch_len = simstore_sketch_bytes((simstore_sketch_kind)c->sketch_kind);
    le_store64(buf, c->fp);
    buf[8] = (uint8_t)c->flags;
    buf[9] = (uint8_t)c->sketch_kind;
    buf[10] = (uint8_t)(c->id_len & 0xFF);
    buf[11] = (uint8_t)(c->id_len >> 8);
    le_store32(buf + 12, (uint32_t)c->meta_len);
    uint8_t *p = buf + SIMS_CHANGE_INSERT_FIXED;
    memcpy(p, c->id, c->id_len);
    p += c->id_len;
    if (sketch_len)
        memcpy(p, c->sketch, sketch_len);
    p += sketch_len;
    if (c->meta_len)
        memcpy(p, c->meta, c->meta_len);
}

int sims_change_decode(unsigned type, const uint8_t *p, size_t len, sims_change *out)
{
    memset(out, 0, sizeof *out);
    out->type = type;
    if (type == SIMS_CHANGE_DELETE) {
        if (len == 0 || len > SIMSTORE_MAX_ID_BYTES)
            return SIMS_CORRUPT("live delete record: an id of %zu bytes", len);
        out->id = (const char *)p;
        out->id_len = len;
        return SIMSTORE_OK;
    }
    if (type != SIMS_CHANGE_INSERT)
        return SIMS_CORRUPT("live record of unknown type %u", type);
    if (len < SIMS_CHANGE_INSERT_FIXED)
        return SIMS_CORRUPT("live insert record of %zu bytes", len);
    out->fp = le_load64(p);
    out->flags = p[8];
    out->sketch_kind = p[9];
    out->id_len = (size_t)p[10] | (size_t)p[11] << 8;
    out->meta_len = le_load32(p + 12);
    if (out->flags & ~SIMS_CHANGE_FLAG_INTEGER_ID)
        return SIMS_CORRUPT("live insert record with flags 0x%x", out->flags);
    size_t sketch_len = simstore_sketch_bytes((simstore_sketch_kind)out->sketch_kind);
    if (out->sketch_kind && !sketch_len)
        return SIMS_CORRUPT("live insert record with sketch kind %u", out->sketch_kind);
    if (out->id_len == 0 || out->id_len > SIMSTORE_MAX_ID_BYTES)
        return SIMS_CORRUPT("live insert record with an id of %zu bytes", out->id_len);
    if (out->meta_len > SIMSTORE_MAX_META_BYTES)
        return SIMS_CORRUPT("live insert record with %zu bytes of metadata", out->meta_len);
    if (len != SIMS_CHANGE_INSERT_FIXED + out->id_len + sketch_len + out->meta_len)
        return SIMS_CORRUPT("live insert record of %zu bytes, its fields make %zu", len,
                            SIMS_CHANGE_INSERT_FIXED + out->id_len + sketch_len + out->meta_len);
    const uint8_t *q = p + SIMS_CHANGE_INSERT_FIXED;
    out->id = (const char *)q;
    q += out->id_len;
    out->sketch = sketch_len ? q : NULL;
    q += sketch_len;
    out->meta = out->meta_len ? (const char *)q : NULL;
    return SIMSTORE_OK;
}
