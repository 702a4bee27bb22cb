/* manifest.h: the manifest of a sharded store (format/shards.md): its
 * fields, its bytes (encode and decode, pure: no I/O), and reading and
 * publishing the file (atomic: temp, fsync, rename, fsync the directory). */
#ifndef SIMS_SHARD_MANIFEST_H
#define SIMS_SHARD_MANIFEST_H

#include "simstore.h"

#include <stddef.h>
#include <stdint.h>

#define SIMS_MANIFEST_MAGIC "SIMSHARD"
#define SIMS_MANIFEST_VERSION 1u
/* Version 2 is version 1's layout, written exactly for shards of fingerprint
 * version 3, so that a reader knowing only version 1 (and fingerprint
 * versions 1 and 2) refuses it with SIMSTORE_EVERSION rather than calling an
 * option out of range (format/shards.md). */
#define SIMS_MANIFEST_VERSION_FP3 2u
static inline uint32_t sims_manifest_version_of(unsigned fp_version)
{
    return fp_version >= 3 ? SIMS_MANIFEST_VERSION_FP3 : SIMS_MANIFEST_VERSION;
}
/* The one assignment rule of version 1: shard = XXH3-64(seed 0, id bytes)
 * mod R (fingerprint-only stores: of the fingerprint's 8 little-endian
 * bytes). */
#define SIMS_ASSIGN_XXH3_MOD 1u
#define SIMS_MANIFEST_HEADER_BYTES 80u
#define SIMS_MANIFEST_NAME_MAX 255u

/* What every shard shares: the facts that decide answers and fingerprints. */
typedef struct sims_shard_shared {
    unsigned k;
    int fingerprint_only;
    unsigned block_bytes;
    unsigned fp_version;
    unsigned shingle_words;
    unsigned cjk_shingle;
    unsigned weighting;
    unsigned cjk; /* resolved: 1 friso, 2 bigram (0 as recorded) */
    unsigned sketch;
    unsigned paragraph_min_words;
    uint32_t lambda_fixed;      /* round(lambda * 65536) */
    uint64_t boilerplate_lines; /* keys in the shared set (0: none)   */
    uint64_t boilerplate_hash;  /* XXH3-64(0, the keys, LE u64 each)  */
} sims_shard_shared;

typedef struct sims_shard_entry {
    uint64_t documents;
    uint64_t fingerprints;
    unsigned tables;
    char name[SIMS_MANIFEST_NAME_MAX + 1];
} sims_shard_entry;

typedef struct sims_manifest {
    unsigned shards; /* R: 1..SIMSTORE_SHARDS_MAX */
    unsigned assignment;
    sims_shard_shared shared;
    uint64_t documents;      /* the sum over the shards */
    uint64_t fingerprints;   /* the sum of each shard's distinct ones */
    sims_shard_entry *entry; /* shards of them */
} sims_manifest;

/* The manifest's bytes into *out (malloc'd, *len bytes). Errors:
 * SIMSTORE_EINVAL (a field out of range), SIMSTORE_ENOMEM. */
int sims_manifest_encode(const sims_manifest *m, uint8_t **out, size_t *len);

/* Parse data[0..len) into *m (m->entry malloc'd: sims_manifest_free).
 * Errors: SIMSTORE_ECORRUPT (any check of format/shards.md, "What a reader
 * checks"), SIMSTORE_EVERSION, SIMSTORE_ENOMEM. */
int sims_manifest_decode(const uint8_t *data, size_t len, sims_manifest *m);

void sims_manifest_free(sims_manifest *m);

/* Whether a shard name is acceptable: 1..255 bytes of [A-Za-z0-9._-],
 * neither "." nor "..". */
int sims_shard_name_valid(const char *name, size_t len);

/* Read and decode dir/MANIFEST; errors name the file. SIMSTORE_ENOTFOUND
 * when there is none. */
int sims_manifest_read(const char *dir, sims_manifest *m);

/* Publish dir/MANIFEST atomically. */
int sims_manifest_write(const char *dir, const sims_manifest *m);

#endif
