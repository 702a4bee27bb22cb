/* manifest.c: the manifest of a sharded store, byte for byte as
 * format/shards.md gives it: encode, decode (every length, count and range
 * bounded before use, the checksum before any field past the version), read
 * and atomic publication. */
#include "shard/manifest.h"

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ENTRY_FIXED_BYTES 22u /* documents, fingerprints, tables, name length */
#define CHECKSUM_BYTES 8u
/* Header, R entries with 255-byte names, checksum. */
#define MANIFEST_MAX_BYTES                                                                         \
    ((long long)SIMS_MANIFEST_HEADER_BYTES +                                                       \
     (long long)SIMSTORE_SHARDS_MAX * (ENTRY_FIXED_BYTES + SIMS_MANIFEST_NAME_MAX) +               \
     CHECKSUM_BYTES)

int sims_shard_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > SIMS_MANIFEST_NAME_MAX)
        return 0;
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int shared_valid(const sims_shard_shared *s)
{
    return s->k <= SIMSTORE_MAX_K && simstore_block_bytes_valid(s->block_bytes) &&
           s->fp_version >= 1 && s->fp_version <= SIMSTORE_FP_VERSION_LATEST &&
           s->shingle_words >= 1 && s->shingle_words <= SIMSTORE_SHINGLE_MAX &&
           s->cjk_shingle <= SIMSTORE_SHINGLE_MAX && s->weighting <= 2 && s->cjk <= 2 &&
           s->sketch <= SIMSTORE_SKETCH_MINHASH256 &&
           s->paragraph_min_words <= SIMSTORE_PARAGRAPH_MIN_WORDS_MAX &&
           s->lambda_fixed <= 1000u * 65536u && (s->boilerplate_lines || !s->boilerplate_hash);
}

int sims_manifest_encode(const sims_manifest *m, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (m->shards < 1 || m->shards > SIMSTORE_SHARDS_MAX || m->assignment != SIMS_ASSIGN_XXH3_MOD ||
        !shared_valid(&m->shared))
        return sims_fail(SIMSTORE_EINVAL, "manifest: a field is out of range");
    size_t n = SIMS_MANIFEST_HEADER_BYTES + CHECKSUM_BYTES;
    for (unsigned i = 0; i < m->shards; i++) {
        size_t nl = strlen(m->entry[i].name);
        if (!sims_shard_name_valid(m->entry[i].name, nl))
            return sims_fail(SIMSTORE_EINVAL, "manifest: bad shard name '%s'", m->entry[i].name);
        n += ENTRY_FIXED_BYTES + nl;
    }
    uint8_t *b = calloc(1, n);
    if (!b)
        return sims_fail(SIMSTORE_ENOMEM, "manifest: out of memory");
    const sims_shard_shared *s = &m->shared;
    memcpy(b, SIMS_MANIFEST_MAGIC, 8);
    le_store32(b + 8, sims_manifest_version_of(s->fp_version));
    le_store32(b + 12, m->shards);
    le_store32(b + 16, m->assignment);
    b[20] = (uint8_t)s->k;
    b[21] = s->fingerprint_only ? 1 : 0;
    le_store32(b + 24, s->block_bytes);
    b[28] = (uint8_t)s->fp_version;
    b[29] = (uint8_t)s->shingle_words;
    b[30] = (uint8_t)s->cjk_shingle;
    b[31] = (uint8_t)s->weighting;
    b[32] = (uint8_t)s->cjk;
    b[33] = (uint8_t)s->sketch;
    b[34] = (uint8_t)s->paragraph_min_words;
    le_store32(b + 36, s->lambda_fixed);
    le_store64(b + 40, s->boilerplate_lines);
    le_store64(b + 48, s->boilerplate_hash);
    le_store64(b + 56, m->documents);
    le_store64(b + 64, m->fingerprints);
    size_t off = SIMS_MANIFEST_HEADER_BYTES;
    for (unsigned i = 0; i < m->shards; i++) {
        const sims_shard_entry *e = &m->entry[i];
        size_t nl = strlen(e->name);
        le_store64(b + off, e->documents);
        le_store64(b + off + 8, e->fingerprints);
        le_store32(b + off + 16, e->tables);
        le_store16(b + off + 20, (uint16_t)nl);
        memcpy(b + off + ENTRY_FIXED_BYTES, e->name, nl);
        off += ENTRY_FIXED_BYTES + nl;
    }
    le_store64(b + off, sims_xxh3_64(b, off, 0));
    *out = b;
    *len = n;
    return SIMSTORE_OK;
}

int sims_manifest_decode(const uint8_t *data, size_t len, sims_manifest *m)
{
    memset(m, 0, sizeof *m);
    if (len < 12)
        return SIMS_CORRUPT("manifest truncated: %zu bytes", len);
    if (memcmp(data, SIMS_MANIFEST_MAGIC, 8) != 0)
        return SIMS_CORRUPT("not a sharded store manifest (bad magic)");
    uint32_t version = le_load32(data + 8);
    if (version != SIMS_MANIFEST_VERSION && version != SIMS_MANIFEST_VERSION_FP3)
        return sims_fail(SIMSTORE_EVERSION,
                         "manifest version %u unknown to this simstore (%s), which reads "
                         "versions %u and %u",
                         (unsigned)version, SIMSTORE_VERSION_STRING, SIMS_MANIFEST_VERSION,
                         SIMS_MANIFEST_VERSION_FP3);
    if (len < SIMS_MANIFEST_HEADER_BYTES + CHECKSUM_BYTES)
        return SIMS_CORRUPT("manifest truncated: %zu bytes", len);
    if (le_load64(data + len - CHECKSUM_BYTES) != sims_xxh3_64(data, len - CHECKSUM_BYTES, 0))
        return SIMS_CORRUPT("manifest checksum mismatch");
    sims_cursor c;
    cursor_init(&c, data, len - CHECKSUM_BYTES);
    uint32_t shards = 0, assignment = 0, u32 = 0;
    uint8_t u8 = 0;
    cursor_skip(&c, 12);
    cursor_u32(&c, &shards);
    cursor_u32(&c, &assignment);
    if (shards < 1 || shards > SIMSTORE_SHARDS_MAX)
        return SIMS_CORRUPT("manifest: shard count %u outside 1..%u", (unsigned)shards,
                            SIMSTORE_SHARDS_MAX);
    if (assignment != SIMS_ASSIGN_XXH3_MOD)
        return SIMS_CORRUPT("manifest: unknown assignment rule %u", (unsigned)assignment);
    sims_shard_shared *s = &m->shared;
    uint16_t reserved16 = 0;
    cursor_u8(&c, &u8);
    s->k = u8;
    cursor_u8(&c, &u8);
    if (u8 > 1)
        return SIMS_CORRUPT("manifest: reserved flag bits set (0x%02x)", u8);
    s->fingerprint_only = u8;
    cursor_u16(&c, &reserved16);
    cursor_u32(&c, &u32);
    s->block_bytes = u32;
    uint8_t t[8] = {0};
    for (int i = 0; i < 8; i++)
        cursor_u8(&c, &t[i]);
    s->fp_version = t[0];
    s->shingle_words = t[1];
    s->cjk_shingle = t[2];
    s->weighting = t[3];
    s->cjk = t[4];
    s->sketch = t[5];
    s->paragraph_min_words = t[6];
    cursor_u32(&c, &s->lambda_fixed);
    cursor_u64(&c, &s->boilerplate_lines);
    cursor_u64(&c, &s->boilerplate_hash);
    uint64_t reserved64 = 0;
    cursor_u64(&c, &m->documents);
    cursor_u64(&c, &m->fingerprints);
    cursor_u64(&c, &reserved64);
    if (reserved16 || t[7] || reserved64)
        return SIMS_CORRUPT("manifest: reserved field not zero");
    if (!shared_valid(s))
        return SIMS_CORRUPT("manifest: a store option is out of range");
    if (version != sims_manifest_version_of(s->fp_version))
        return SIMS_CORRUPT("manifest: version %u with fingerprint version %u", (unsigned)version,
                            (unsigned)s->fp_version);
    /* Each entry takes at least ENTRY_FIXED_BYTES + 1: bound R by the bytes
     * before allocating. */
    if ((uint64_t)shards * (ENTRY_FIXED_BYTES + 1) > cursor_remaining(&c))
        return SIMS_CORRUPT("manifest: %u shards do not fit in %zu bytes", (unsigned)shards, len);
    m->entry = calloc(shards, sizeof *m->entry);
    if (!m->entry)
        return sims_fail(SIMSTORE_ENOMEM, "manifest: out of memory");
    m->shards = shards;
    m->assignment = assignment;
    uint64_t docs = 0, fps = 0;
    int rc = SIMSTORE_OK;
    for (uint32_t i = 0; i < shards && rc == SIMSTORE_OK; i++) {
        sims_shard_entry *e = &m->entry[i];
        uint16_t nl = 0;
        const uint8_t *name = NULL;
        if (cursor_u64(&c, &e->documents) || cursor_u64(&c, &e->fingerprints) ||
            cursor_u32(&c, &u32) || cursor_u16(&c, &nl) || cursor_bytes(&c, nl, &name)) {
            rc = SIMS_CORRUPT("manifest: shard entry %u runs past the end", (unsigned)i);
            break;
        }
        e->tables = u32;
        if (!sims_shard_name_valid((const char *)name, nl)) {
            rc = SIMS_CORRUPT("manifest: shard entry %u has an invalid name", (unsigned)i);
            break;
        }
        memcpy(e->name, name, nl);
        e->name[nl] = '\0';
        if (e->tables < 1 || e->tables > 256) {
            rc = SIMS_CORRUPT("manifest: shard '%s' has %u tables", e->name, e->tables);
            break;
        }
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(m->entry[j].name, e->name) == 0) {
                rc = SIMS_CORRUPT("manifest: shard name '%s' given twice", e->name);
                break;
            }
        if (docs + e->documents < docs || fps + e->fingerprints < fps) {
            rc = SIMS_CORRUPT("manifest: counts overflow");
            break;
        }
        docs += e->documents;
        fps += e->fingerprints;
    }
    if (rc == SIMSTORE_OK && cursor_remaining(&c) != 0)
        rc = SIMS_CORRUPT("manifest: %zu bytes after the last shard entry", cursor_remaining(&c));
    if (rc == SIMSTORE_OK && (docs != m->documents || fps != m->fingerprints))
        rc = SIMS_CORRUPT("manifest: totals do not match the shard entries");
    if (rc)
        sims_manifest_free(m);
    return rc;
}

void sims_manifest_free(sims_manifest *m)
{
    if (!m)
        return;
    free(m->entry);
    m->entry = NULL;
    m->shards = 0;
}

int sims_manifest_read(const char *dir, sims_manifest *m)
{
    memset(m, 0, sizeof *m);
    char path[PATH_MAX];
    int rc = sims_join_path(path, sizeof path, dir, SIMSTORE_MANIFEST_NAME);
    if (rc)
        return rc;
    /* Read, not mapped: a file truncated under us is a short read, never a
     * SIGBUS. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? sims_fail(SIMSTORE_ENOTFOUND, "%s: no such file", path)
                               : sims_fail_errno("open %s", path);
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) != 0) {
        rc = sims_fail_errno("stat %s", path);
    } else if (!S_ISREG(st.st_mode)) {
        rc = SIMS_CORRUPT("%s: not a regular file", path);
    } else if (st.st_size > MANIFEST_MAX_BYTES) {
        rc = SIMS_CORRUPT("%s: %lld bytes, larger than a manifest of %u shards can be", path,
                          (long long)st.st_size, SIMSTORE_SHARDS_MAX);
    } else if (!(buf = malloc((size_t)st.st_size + 1))) {
        rc = sims_fail(SIMSTORE_ENOMEM, "%s: out of memory", path);
    } else if ((rc = sims_pread_all(fd, buf, (size_t)st.st_size, 0, path)) == SIMSTORE_OK) {
        rc = sims_manifest_decode(buf, (size_t)st.st_size, m);
        if (rc)
            rc = sims_fail_context(rc, "%s", path);
    }
    free(buf);
    close(fd);
    return rc;
}

int sims_manifest_write(const char *dir, const sims_manifest *m)
{
    char path[PATH_MAX];
    int rc = sims_join_path(path, sizeof path, dir, SIMSTORE_MANIFEST_NAME);
    if (rc)
        return rc;
    uint8_t *bytes;
    size_t n;
    if ((rc = sims_manifest_encode(m, &bytes, &n)) != 0)
        return rc;
    sims_outfile f;
    memset(&f, 0, sizeof f);
    rc = sims_outfile_open(&f, path);
    if (rc == SIMSTORE_OK)
        rc = sims_outfile_write(&f, bytes, n);
    if (rc == SIMSTORE_OK)
        rc = sims_outfile_commit(&f);
    else
        sims_outfile_abort(&f);
    free(bytes);
    return rc ? sims_fail_context(rc, "%s", path) : SIMSTORE_OK;
}
