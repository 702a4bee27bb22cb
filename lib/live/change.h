/* change.h: the payloads a live store writes to its write-ahead log, one per
 * acknowledged change (format/wal.md, "Live store records"): an insert
 * (id, fingerprint, flags, sketch, metadata) or a delete (id). Pure
 * functions over byte buffers: no I/O, fuzzable. */
#ifndef SIMS_LIVE_CHANGE_H
#define SIMS_LIVE_CHANGE_H

#include <stddef.h>
#include <stdint.h>

#define SIMS_CHANGE_INSERT 1u /* WAL record types */
#define SIMS_CHANGE_DELETE 2u
#define SIMS_CHANGE_INSERT_FIXED 16u
#define SIMS_CHANGE_FLAG_INTEGER_ID 1u /* = SIMSTORE_DOC_INTEGER_ID */

/* One change. Pointers are borrowed (from the caller when encoding, from
 * the payload when decoded). A delete uses type, id and id_len only. */
typedef struct sims_change {
    unsigned type;
    const char *id;
    size_t id_len;
    uint64_t fp;
    unsigned flags;       /* SIMS_CHANGE_FLAG_INTEGER_ID or 0 */
    unsigned sketch_kind; /* 0: none; else a simstore_sketch_kind */
    const uint8_t *sketch;
    const char *meta; /* NULL or meta_len bytes (0: none) */
    size_t meta_len;
} sims_change;

/* Bytes of c's payload. */
size_t sims_change_size(const sims_change *c);
/* Write c's payload (sims_change_size(c) bytes) to buf. */
void sims_change_encode(const sims_change *c, uint8_t *buf);
/* Decode a payload of WAL record type `type`. SIMSTORE_ECORRUPT for an
 * unknown type, a bad length, flag, sketch kind, id or metadata size. */
int sims_change_decode(unsigned type, const uint8_t *p, size_t len, sims_change *out);

#endif
