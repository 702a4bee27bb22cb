/* gen_golden.c: writes the table golden files of format/golden/: valid
 * tables with their expected decodes (table-NAME.tbl and .txt in format
 * version 2, table-v1-NAME in version 1, table-v3-NAME in version 3), and
 * golden error files (table-err-*.tbl damage version-1 tables,
 * table-err2-*.tbl version-2 ones, table-err3-*.tbl version-3 ones), each a valid table damaged in one specific way (checksums repaired
 * where needed so that exactly the intended check fires), listed with the
 * expected error in table-errors.txt. The version-1 files are the ones
 * version 1 of the format shipped, byte for byte.
 *
 *   table_golden_gen DIR     (re)writes the files into DIR
 *
 * The files are committed; tests/table checks that they decode as listed,
 * that the encoder still reproduces the valid ones byte for byte, and that
 * the error files fail as listed. Rerun only when the format version
 * changes. */
#include "common/bytes.h"
#include "common/checksum.h"
#include "simstore.h"
#include "table/format.h"
#include "table/keys.h"
#include "table/table.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *out_dir;
static FILE *errors_txt;
static uint32_t write_version; /* the format version params() asks for */

static void die(const char *what)
{
    fprintf(stderr, "table_golden_gen: %s: %s\n", what, simstore_last_error());
    exit(1);
}

static void write_file(const char *name, const uint8_t *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "table_golden_gen: cannot write %s\n", path);
        exit(1);
    }
}

/* splitmix64, fixed seeds: the goldens never change unless regenerated. */
static uint64_t rng_state;
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static size_t sort_unique(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1])
            v[m++] = v[i];
    return m;
}

static table_params params(uint32_t block_bytes, uint8_t prefix_bits, int perm_kind, uint64_t tag,
                           uint32_t index)
{
    table_params p;
    memset(&p, 0, sizeof p);
    p.block_bytes = block_bytes;
    p.prefix_bits = prefix_bits;
    for (unsigned i = 0; i < 64; i++)
        p.perm[i] = (uint8_t)(perm_kind == 0 ? i : perm_kind == 1 ? 63 - i : (i * 37 + 5) % 64);
    p.store_tag = tag;
    p.table_index = index;
    p.format_version = write_version;
    return p;
}

/* Write NAME.tbl and NAME.txt (the expected decode). `hist` may be NULL (the
 * optimal code for the values). Returns the encoded bytes (caller frees). */
static uint8_t *golden(const char *name, const char *description, const table_params *p,
                       const uint64_t *hist, const uint64_t *v, size_t n, size_t *size)
{
    uint8_t *buf;
    int rc = hist ? table_encode_memory_hist(p, hist, v, n, &buf, size)
                  : table_encode_memory(p, v, n, &buf, size);
    if (rc)
        die(name);
    char fname[256];
    snprintf(fname, sizeof fname, "%s.tbl", name);
    write_file(fname, buf, *size);

    table_reader *r;
    if (table_reader_open_memory(buf, *size, 0, &r))
        die("reopen");
    const table_info *in = table_reader_info(r);
    snprintf(fname, sizeof fname, "%s/%s.txt", out_dir, name);
    FILE *f = fopen(fname, "w");
    if (!f)
        die(fname);
    fprintf(f, "# %s.tbl: %s\n", name, description);
    fprintf(f, "# Expected decode (format/table.md). Lines: a field and its value(s);\n");
    fprintf(f, "# after 'fingerprints N', N values in hex, in file order.\n");
    fprintf(f, "format_version %" PRIu32 "\n", in->format_version);
    fprintf(f, "file_bytes %" PRIu64 "\n", in->file_bytes);
    fprintf(f, "block_bytes %" PRIu32 "\n", p->block_bytes);
    fprintf(f, "block_count %" PRIu64 "\n", in->block_count);
    fprintf(f, "prefix_bits %u\n", p->prefix_bits);
    fprintf(f, "store_tag 0x%016" PRIx64 "\n", p->store_tag);
    fprintf(f, "table_index %" PRIu32 "\n", p->table_index);
    fprintf(f, "perm");
    for (unsigned i = 0; i < 64; i++)
        fprintf(f, " %u", p->perm[i]);
    fprintf(f, "\ncode_lengths");
    for (unsigned i = 0; i < 64; i++)
        fprintf(f, " %u", in->code_lengths[i]);
    fprintf(f, "\n");
    if (hist) {
        fprintf(f, "histogram");
        for (unsigned i = 0; i < 64; i++)
            fprintf(f, " %" PRIu64, hist[i]);
        fprintf(f, "\n");
    }
    fprintf(f, "block_counts");
    for (uint64_t b = 0; b < in->block_count; b++)
        fprintf(f, " %" PRIu32, table_reader_block_count(r, b));
    fprintf(f, "\nfingerprints %zu\n", n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%016" PRIx64 "\n", v[i]);
    fclose(f);
    table_reader_close(r);
    return buf;
}

/* ---- checksum repair (so one specific check fires) ----------------------------- */

static uint64_t footer_off(size_t size)
{
    return size - TBL_FOOTER_BYTES;
}

static void fix_footer(uint8_t *b, size_t size)
{
    uint8_t *f = b + footer_off(size);
    le_store64(f + TBL_F_CHECKSUM, sims_xxh3_64(f, TBL_F_CHECKSUM, TBL_SEED_FOOTER));
}

static void fix_header(uint8_t *b, size_t size)
{
    uint64_t c = sims_xxh3_64(b, TBL_H_CHECKSUM, TBL_SEED_HEADER);
    le_store64(b + TBL_H_CHECKSUM, c);
    le_store64(b + footer_off(size) + TBL_F_HEADER_CHECKSUM, c);
    fix_footer(b, size);
}

static void fix_index(uint8_t *b, size_t size)
{
    uint8_t *f = b + footer_off(size);
    uint64_t off = le_load64(f + TBL_F_INDEX_OFFSET), len = le_load64(f + TBL_F_INDEX_BYTES);
    le_store64(f + TBL_F_INDEX_CHECKSUM, sims_xxh3_64(b + off, (size_t)len, TBL_SEED_INDEX));
    fix_footer(b, size);
}

static uint64_t block_count_of(const uint8_t *b)
{
    return le_load64(b + TBL_H_BLOCK_COUNT);
}

static uint8_t *index_entry(uint8_t *b, size_t size, uint64_t block)
{
    uint64_t off = le_load64(b + footer_off(size) + TBL_F_INDEX_OFFSET);
    return b + off + 8 * block_count_of(b) + 8 * block;
}

static uint8_t *index_key(uint8_t *b, size_t size, uint64_t block)
{
    return b + le_load64(b + footer_off(size) + TBL_F_INDEX_OFFSET) + 8 * block;
}

static uint8_t *block_at(uint8_t *b, uint64_t block)
{
    return b + le_load64(b + TBL_H_BLOCKS_OFFSET) + block * le_load32(b + TBL_H_BLOCK_BYTES);
}

static void fix_block(uint8_t *b, size_t size, uint64_t block)
{
    uint32_t bb = le_load32(b + TBL_H_BLOCK_BYTES);
    uint32_t c = (uint32_t)sims_xxh3_64(block_at(b, block), bb, tbl_block_seed(block));
    le_store32(index_entry(b, size, block) + 4, c);
    fix_index(b, size);
}

/* Write a damaged copy and its line in table-errors.txt. */
static void error_file(const char *name, const uint8_t *data, size_t size, const char *phase,
                       const char *code, const char *message, const char *why)
{
    char fname[256];
    snprintf(fname, sizeof fname, "%s.tbl", name);
    write_file(fname, data, size);
    fprintf(errors_txt, "%-34s %-5s %-18s %s\n", fname, phase, code, message);
    fprintf(stderr, "  %s: %s\n", fname, why);
}

static uint8_t *copy(const uint8_t *b, size_t size)
{
    uint8_t *c = malloc(size + 1);
    if (!c)
        die("malloc");
    memcpy(c, b, size);
    return c;
}

/* The tables both versions' error files start from. */
typedef struct base_tables {
    uint8_t *uniform, *dense_tbl, *clustered;
    size_t sz_uni, sz_dense, sz_clu;
    uint64_t *uni, *dense, *clu;
} base_tables;

static char *name_of(const char *prefix, const char *name)
{
    static char buf[8][128];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "table-%s%s", prefix, name);
    return b;
}

/* The valid tables, in format version `version`, named table-PREFIXNAME. */
static void valid_tables(uint32_t version, const char *prefix, base_tables *bt)
{
    write_version = version;
    size_t sz_empty, sz_one, sz_ex, sz_extreme, sz_uni, sz_dense, sz_clu, sz_unused;
    table_params p;

    p = params(1024, 0, 0, 0, 0);
    free(golden(name_of(prefix, "empty"), "no fingerprints, 1 KiB blocks (blocks start at 1024)",
                &p, NULL, NULL, 0, &sz_empty));

    uint64_t one = 0x0123456789abcdefULL;
    p = params(256, 16, 0, 0x1111111111111111ULL, 1);
    free(golden(name_of(prefix, "one"), "one fingerprint: block 0 holds it as 64 raw bits, no code",
                &p, NULL, &one, 1, &sz_one));

    uint64_t example[] = {5, 6, 8};
    p = params(256, 8, 0, 0x00000000000000ffULL, 0);
    free(golden(name_of(prefix, "example"), "the worked example of format/table.md", &p, NULL,
                example, 3, &sz_ex));

    uint64_t extremes[] = {0,
                           1,
                           2,
                           3,
                           0x00000000ffffffffULL,
                           0x7fffffffffffffffULL,
                           0x8000000000000000ULL,
                           0x8000000000000001ULL,
                           0xfffffffffffffffdULL,
                           0xfffffffffffffffeULL,
                           0xffffffffffffffffULL};
    p = params(256, 64, 1, 0xfedcba9876543210ULL, 0xffffffffu);
    free(golden(name_of(prefix, "extremes"), "0, 2^64-1 and 63-bit differences", &p, NULL, extremes,
                sizeof extremes / sizeof extremes[0], &sz_extreme));

    enum { NU = 2000 };
    uint64_t *uni = malloc(NU * sizeof *uni);
    rng_state = 2024;
    for (size_t i = 0; i < NU; i++)
        uni[i] = rng_next();
    size_t nu = sort_unique(uni, NU);
    p = params(256, 20, 2, 0x5ee05ee05ee05ee0ULL, 7);
    uint8_t *uniform =
        golden(name_of(prefix, "uniform"), "2000 uniform random fingerprints, 256-byte blocks", &p,
               NULL, uni, nu, &sz_uni);

    enum { ND = 3000 };
    uint64_t *dense = malloc(ND * sizeof *dense);
    for (size_t i = 0; i < ND; i++)
        dense[i] = 0x1000 + i;
    p = params(256, 0, 0, 42, 2);
    uint8_t *dense_tbl =
        golden(name_of(prefix, "dense"), "3000 consecutive values: a one-symbol code (\"0\")", &p,
               NULL, dense, ND, &sz_dense);

    enum { NC = 3000 };
    uint64_t *clu = malloc(NC * sizeof *clu);
    rng_state = 77;
    for (size_t i = 0; i < NC; i++) {
        uint64_t center = (rng_next() % 8) << 58;
        clu[i] = center + (rng_next() >> (20 + rng_next() % 24));
    }
    size_t nc = sort_unique(clu, NC);
    p = params(1024, 12, 1, 0x0c0c0c0c0c0c0c0cULL, 11);
    uint8_t *clustered = golden(name_of(prefix, "clustered"), "eight clusters, 1 KiB blocks", &p,
                                NULL, clu, nc, &sz_clu);

    uint64_t hist_unused[64] = {0};
    uint64_t prev = 0;
    int have_prev = 0;
    table_histogram_add(hist_unused, &prev, &have_prev, uni, 300);
    for (unsigned j = 0; j < 64; j += 3)
        hist_unused[j] += 1; /* symbols that never occur still get codes */
    p = params(512, 24, 0, 3, 3);
    free(golden(name_of(prefix, "unused-symbols"),
                "code built from a histogram with unused symbols", &p, hist_unused, uni, 300,
                &sz_unused));

    bt->uniform = uniform;
    bt->dense_tbl = dense_tbl;
    bt->clustered = clustered;
    bt->sz_uni = sz_uni;
    bt->sz_dense = sz_dense;
    bt->sz_clu = sz_clu;
    bt->uni = uni;
    bt->dense = dense;
    bt->clu = clu;
    (void)sz_unused;
    (void)sz_extreme;
    (void)sz_ex;
    (void)sz_one;
    (void)sz_empty;
}

static void v1_error_files(const base_tables *bt)
{
    const uint8_t *uniform = bt->uniform, *dense_tbl = bt->dense_tbl, *clustered = bt->clustered;
    size_t sz_dense = bt->sz_dense, sz_clu = bt->sz_clu;
    char path[4096];
    snprintf(path, sizeof path, "%s/table-errors.txt", out_dir);
    errors_txt = fopen(path, "w");
    if (!errors_txt)
        die(path);
    fprintf(errors_txt,
            "# Golden error files: FILE PHASE CODE MESSAGE\n"
            "# PHASE open: table_reader_open must fail; scan: it opens, and a full range scan\n"
            "# (table_cursor_next over [0, 2^64-1], checksums on) must fail. CODE is the\n"
            "# return code; MESSAGE a substring of simstore_last_error().\n");

    uint8_t *b;
    size_t s = bt->sz_uni;

    error_file("table-err-empty", uniform, 0, "open", "SIMSTORE_ECORRUPT", "bad header magic",
               "zero bytes");

    b = copy(uniform, s);
    b[1] = 'X';
    error_file("table-err-bad-magic", b, s, "open", "SIMSTORE_ECORRUPT", "bad header magic",
               "header magic altered");
    free(b);

    b = copy(uniform, s);
    le_store32(b + TBL_H_VERSION, 4);
    fix_header(b, s);
    error_file("table-err-version", b, s, "open", "SIMSTORE_EVERSION", "version 4",
               "format version 4, checksums repaired");
    free(b);

    b = copy(uniform, s);
    b[TBL_H_STORE_TAG] ^= 0x01;
    error_file("table-err-header-checksum", b, s, "open", "SIMSTORE_ECORRUPT", "header checksum",
               "one bit of the store tag flipped");
    free(b);

    b = copy(uniform, s);
    b[TBL_H_RESERVED2 + 8] = 1;
    fix_header(b, s);
    error_file("table-err-reserved", b, s, "open", "SIMSTORE_ECORRUPT", "reserved header bytes",
               "reserved byte 200 set, checksums repaired");
    free(b);

    b = copy(uniform, s);
    le_store32(b + TBL_H_FLAGS, 1);
    fix_header(b, s);
    error_file("table-err-flags", b, s, "open", "SIMSTORE_ECORRUPT", "reserved header bytes",
               "flags field nonzero, checksums repaired");
    free(b);

    b = copy(uniform, s);
    le_store32(b + TBL_H_HEADER_BYTES, 512);
    fix_header(b, s);
    error_file("table-err-header-size", b, s, "open", "SIMSTORE_ECORRUPT", "header size 512",
               "header size field 512, checksums repaired");
    free(b);

    b = copy(uniform, s);
    le_store32(b + TBL_H_BLOCK_BYTES, 384);
    fix_header(b, s);
    error_file("table-err-block-size", b, s, "open", "SIMSTORE_ECORRUPT", "block size 384",
               "block size not a power of two, checksums repaired");
    free(b);

    b = copy(uniform, s);
    b[TBL_H_PREFIX_BITS] = 65;
    fix_header(b, s);
    error_file("table-err-prefix-bits", b, s, "open", "SIMSTORE_ECORRUPT", "prefix bits 65",
               "prefix bits 65, checksums repaired");
    free(b);

    b = copy(uniform, s);
    b[TBL_H_PERM + 1] = b[TBL_H_PERM];
    fix_header(b, s);
    error_file("table-err-perm", b, s, "open", "SIMSTORE_ECORRUPT", "not a permutation",
               "a repeated permutation entry, checksums repaired");
    free(b);

    b = copy(uniform, s);
    le_store64(b + TBL_H_BLOCKS_OFFSET, 512);
    fix_header(b, s);
    error_file("table-err-blocks-offset", b, s, "open", "SIMSTORE_ECORRUPT", "blocks offset 512",
               "blocks offset not the one the block size implies, checksums repaired");
    free(b);

    /* Code-length damage: find the longest and the shortest used code. */
    {
        const uint8_t *len = uniform + TBL_H_CODE_LENGTHS;
        unsigned longest = 0, shortest = 0;
        for (unsigned j = 0; j < 64; j++) {
            if (!len[j])
                continue;
            if (!len[longest] || len[j] > len[longest])
                longest = j;
            if (!len[shortest] || len[j] < len[shortest])
                shortest = j;
        }
        b = copy(uniform, s);
        b[TBL_H_CODE_LENGTHS + longest] = 12;
        fix_header(b, s);
        error_file("table-err-code-too-long", b, s, "open", "SIMSTORE_ECORRUPT", "exceeds 11",
                   "a code length of 12, checksums repaired");
        free(b);

        b = copy(uniform, s);
        b[TBL_H_CODE_LENGTHS + shortest] -= 1;
        fix_header(b, s);
        error_file("table-err-code-oversubscribed", b, s, "open", "SIMSTORE_ECORRUPT",
                   "over-subscribed", "shortest code one bit shorter, checksums repaired");
        free(b);

        b = copy(uniform, s);
        b[TBL_H_CODE_LENGTHS + shortest] += 1;
        fix_header(b, s);
        error_file("table-err-code-incomplete", b, s, "open", "SIMSTORE_ECORRUPT", "incomplete",
                   "shortest code one bit longer, checksums repaired");
        free(b);

        b = copy(dense_tbl, sz_dense);
        b[TBL_H_CODE_LENGTHS + 0] = 2;
        fix_header(b, sz_dense);
        error_file("table-err-code-single", b, sz_dense, "open", "SIMSTORE_ECORRUPT",
                   "single symbol must have length 1",
                   "one-symbol code of length 2, checksums repaired");
        free(b);
    }

    error_file("table-err-truncated-header", uniform, 100, "open", "SIMSTORE_ECORRUPT", "truncated",
               "the first 100 bytes");
    error_file("table-err-truncated", uniform, s - 1, "open", "SIMSTORE_ECORRUPT",
               "no footer magic", "the last byte missing");
    error_file("table-err-truncated-blocks", uniform, 256 + 3 * 256 + 17, "open",
               "SIMSTORE_ECORRUPT", "no footer magic", "cut inside block 3");
    b = copy(uniform, s);
    b[s] = 0;
    error_file("table-err-extended", b, s + 1, "open", "SIMSTORE_ECORRUPT", "no footer magic",
               "one byte appended");
    free(b);

    b = copy(uniform, s);
    b[footer_off(s) + TBL_F_INDEX_OFFSET] ^= 0x40;
    error_file("table-err-footer-checksum", b, s, "open", "SIMSTORE_ECORRUPT", "footer checksum",
               "a bit of the footer's index offset flipped");
    free(b);

    b = copy(uniform, s);
    b[footer_off(s) + TBL_F_HEADER_CHECKSUM] ^= 0x01;
    fix_footer(b, s);
    error_file("table-err-footer-foreign", b, s, "open", "SIMSTORE_ECORRUPT",
               "belongs to another header",
               "footer's copy of the header checksum differs, footer checksum repaired");
    free(b);

    b = copy(uniform, s);
    le_store64(b + footer_off(s) + TBL_F_INDEX_OFFSET,
               le_load64(b + footer_off(s) + TBL_F_INDEX_OFFSET) + 16);
    fix_footer(b, s);
    error_file("table-err-index-offset", b, s, "open", "SIMSTORE_ECORRUPT", "index offset",
               "index offset 16 too far, footer checksum repaired");
    free(b);

    b = copy(uniform, s);
    le_store64(b + TBL_H_BLOCK_COUNT, block_count_of(b) + 1000000);
    le_store64(b + footer_off(s) + TBL_F_BLOCK_COUNT, block_count_of(b));
    fix_header(b, s);
    error_file("table-err-block-count", b, s, "open", "SIMSTORE_ECORRUPT", "does not fit",
               "block count far beyond the file, header and footer agree, checksums repaired");
    free(b);

    b = copy(uniform, s);
    le_store64(b + TBL_H_FP_COUNT, le_load64(b + TBL_H_FP_COUNT) + 1);
    le_store64(b + footer_off(s) + TBL_F_FP_COUNT, le_load64(b + TBL_H_FP_COUNT));
    fix_header(b, s);
    error_file("table-err-fp-count", b, s, "open", "SIMSTORE_ECORRUPT", "block counts sum to",
               "fingerprint count one too many in header and footer, checksums repaired");
    free(b);

    b = copy(uniform, s);
    index_key(b, s, 2)[0] ^= 0x01;
    error_file("table-err-index-checksum", b, s, "open", "SIMSTORE_ECORRUPT", "index checksum",
               "one bit of key 2 flipped");
    free(b);

    b = copy(uniform, s);
    le_store32(index_entry(b, s, 1), 0);
    fix_index(b, s);
    error_file("table-err-count-zero", b, s, "open", "SIMSTORE_ECORRUPT", "count 0",
               "block 1's count 0, index checksum repaired");
    free(b);

    b = copy(dense_tbl, sz_dense);
    le_store32(index_entry(b, sz_dense, 0), 1 + (256 * 8 - 64) + 1);
    fix_index(b, sz_dense);
    error_file("table-err-count-too-big", b, sz_dense, "open", "SIMSTORE_ECORRUPT", "count 1986",
               "block 0's count above what 256 bytes can hold, index repaired");
    free(b);

    b = copy(uniform, s);
    memcpy(index_key(b, s, 1), index_key(b, s, 0), 8);
    fix_index(b, s);
    error_file("table-err-key-order", b, s, "open", "SIMSTORE_ECORRUPT", "cannot follow",
               "key 1 equal to key 0, index checksum repaired");
    free(b);

    b = copy(clustered, sz_clu);
    b[300] = 1;
    error_file("table-err-header-padding", b, sz_clu, "open", "SIMSTORE_ECORRUPT",
               "padding between header and blocks", "a byte of the zero gap before block 0 set");
    free(b);

    b = copy(uniform, s);
    block_at(b, 1)[100] ^= 0x10;
    error_file("table-err-block-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "block 1 (byte offset 512): block checksum mismatch", "one bit of block 1 flipped");
    free(b);

    {
        /* The last key may grow without breaking the key order. */
        b = copy(uniform, s);
        uint64_t last = block_count_of(b) - 1;
        le_store64(index_key(b, s, last), le_load64(index_key(b, s, last)) + 1);
        fix_index(b, s);
        error_file("table-err-key-mismatch", b, s, "scan", "SIMSTORE_ECORRUPT",
                   "differs from the block key",
                   "last block key one higher than its last value, index checksum repaired");
        free(b);
    }

    /* Nonzero padding: the dense table's last block is mostly padding. */
    b = copy(dense_tbl, sz_dense);
    {
        uint64_t last = block_count_of(b) - 1;
        block_at(b, last)[255] = 0x80;
        fix_block(b, sz_dense, last);
    }
    error_file("table-err-block-padding", b, sz_dense, "scan", "SIMSTORE_ECORRUPT",
               "nonzero padding", "last bit of the last block set, checksums repaired");
    free(b);

    b = copy(dense_tbl, sz_dense);
    block_at(b, 0)[9] |= 0x04; /* bit 74: "1" starts no code of a one-symbol code */
    fix_block(b, sz_dense, 0);
    error_file("table-err-bad-code", b, sz_dense, "scan", "SIMSTORE_ECORRUPT",
               "no Huffman code matches the bits at bit offset 74",
               "an invalid code in block 0, checksums repaired");
    free(b);

    b = copy(uniform, s);
    {
        /* Move block 1's bytes to block 2 and back: each block checksum
         * matches its bytes only at its own block number. */
        uint32_t bb = 256;
        uint8_t tmp[256];
        memcpy(tmp, block_at(b, 1), bb);
        memcpy(block_at(b, 1), block_at(b, 2), bb);
        memcpy(block_at(b, 2), tmp, bb);
        uint8_t e1[8], e2[8];
        memcpy(e1, index_entry(b, s, 1), 8);
        memcpy(e2, index_entry(b, s, 2), 8);
        memcpy(index_entry(b, s, 1) + 4, e2 + 4, 4); /* checksums follow the bytes */
        memcpy(index_entry(b, s, 2) + 4, e1 + 4, 4);
        fix_index(b, s);
    }
    error_file("table-err-blocks-swapped", b, s, "scan", "SIMSTORE_ECORRUPT",
               "block 1 (byte offset 512): block checksum mismatch",
               "blocks 1 and 2 swapped with their checksums, index repaired");
    free(b);
}

/* ---- version 2 ------------------------------------------------------------------ */

static uint8_t *index_of(uint8_t *b, size_t size)
{
    return b + le_load64(b + footer_off(size) + TBL_F_INDEX_OFFSET);
}

/* Re-code the keys of a version-2 table with its own key low bits (the high
 * bit vector must keep its length) and repair the index checksum. */
static void rewrite_keys(uint8_t *b, size_t size, const uint64_t *keys)
{
    uint8_t *ix = index_of(b, size);
    uint64_t nb = block_count_of(b);
    table_keys k;
    if (table_keys_alloc(&k, nb, ix[TBL_I2_LOW_BITS], le_load64(ix + TBL_I2_HIGH_WORDS)) ||
        table_keys_encode(&k, keys))
        die("rewrite_keys");
    uint8_t *p = ix + TBL_I2_HEADER_BYTES;
    for (uint64_t w = 0; w < k.low_words; w++, p += 8)
        le_store64(p, k.low[w]);
    for (uint64_t w = 0; w < k.high_words; w++, p += 8)
        le_store64(p, k.high[w]);
    table_keys_free(&k);
    fix_index(b, size);
}

static uint64_t *keys_of(const uint8_t *b, size_t size)
{
    table_reader *r;
    if (table_reader_open_memory(b, size, 0, &r))
        die("keys_of");
    uint64_t nb = table_reader_info(r)->block_count;
    uint64_t *keys = malloc((size_t)nb * sizeof *keys);
    for (uint64_t i = 0; i < nb; i++)
        keys[i] = table_reader_key(r, i);
    table_reader_close(r);
    return keys;
}

static void v2_error_files(const base_tables *bt)
{
    const uint8_t *uniform = bt->uniform;
    size_t s = bt->sz_uni;
    uint64_t nb = block_count_of(uniform);
    uint8_t *b;

    b = copy(uniform, s);
    index_of(b, s)[TBL_I2_LOW_BITS] = 64;
    fix_index(b, s);
    error_file("table-err2-low-bits", b, s, "open", "SIMSTORE_ECORRUPT", "key low bits 64",
               "key low bits 64, index checksum repaired");
    free(b);

    b = copy(uniform, s);
    {
        uint8_t *ix = index_of(b, s);
        le_store64(ix + TBL_I2_HIGH_WORDS, le_load64(ix + TBL_I2_HIGH_WORDS) + 1);
    }
    fix_index(b, s);
    error_file("table-err2-index-size", b, s, "open", "SIMSTORE_ECORRUPT", "does not match",
               "one key high word too many, index checksum repaired");
    free(b);

    b = copy(uniform, s);
    {
        uint8_t *ix = index_of(b, s);
        uint64_t low_words = table_keys_low_words(nb, ix[TBL_I2_LOW_BITS]);
        /* A one bit more in the first word of the key high bits. */
        uint8_t *hw = ix + TBL_I2_HEADER_BYTES + 8 * low_words;
        uint64_t w = le_load64(hw);
        le_store64(hw, w | ((w + 1) & ~w));
    }
    fix_index(b, s);
    error_file("table-err2-key-high-bits", b, s, "open", "SIMSTORE_ECORRUPT",
               "keys in the key high bits", "an extra 1 in the key high bits, index repaired");
    free(b);

    b = copy(uniform, s);
    le_store32(index_of(b, s) + TBL_I2_COUNT_MIN, 0);
    fix_index(b, s);
    error_file("table-err2-count-zero", b, s, "open", "SIMSTORE_ECORRUPT", "count 0",
               "count_min 0 (the smallest count becomes 0), index checksum repaired");
    free(b);

    b = copy(uniform, s);
    {
        /* Key 2 one above key 1 while block 2 holds more than one value. */
        uint64_t *keys = keys_of(b, s);
        keys[2] = keys[1] + 1;
        rewrite_keys(b, s, keys);
        free(keys);
    }
    error_file("table-err2-key-order", b, s, "open", "SIMSTORE_ECORRUPT", "cannot follow",
               "key 2 = key 1 + 1 with more values in block 2, index repaired");
    free(b);

    b = copy(uniform, s);
    {
        /* The last block's key lowered to just above the key before plus
         * its count: the open checks pass, but it no longer exceeds the
         * block's coded values. */
        uint64_t *keys = keys_of(b, s);
        table_reader *r;
        if (table_reader_open_memory(uniform, s, 0, &r))
            die("open");
        keys[nb - 1] = keys[nb - 2] + table_reader_block_count(r, nb - 1);
        table_reader_close(r);
        rewrite_keys(b, s, keys);
        free(keys);
    }
    error_file("table-err2-key-below-values", b, s, "scan", "SIMSTORE_ECORRUPT",
               "does not exceed the value",
               "the last block key below its block's coded values, index repaired");
    free(b);

    b = copy(uniform, s);
    block_at(b, 1)[100] ^= 0x10;
    error_file("table-err2-group-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "block 0 (byte offset 256): block checksum mismatch: group 0 (blocks 0..14",
               "one bit of block 1 flipped");
    free(b);

    b = copy(uniform, s);
    {
        /* Groups 1 and 2 (blocks 15..30 and 31..46 of 256 bytes: the second
         * and third 4 KiB pages) swapped with their checksums: each group
         * checksum matches its bytes only at its own group number. */
        size_t gb = 16 * 256;
        uint8_t *tmp = malloc(gb);
        memcpy(tmp, block_at(b, 15), gb);
        memcpy(block_at(b, 15), block_at(b, 31), gb);
        memcpy(block_at(b, 31), tmp, gb);
        free(tmp);
        uint8_t *ix = index_of(b, s);
        uint64_t groups = tbl_group_count(nb, 256);
        uint8_t *ck = ix + le_load64(b + footer_off(s) + TBL_F_INDEX_BYTES) - 4 * groups;
        uint8_t c1[4];
        memcpy(c1, ck + 4, 4);
        memcpy(ck + 4, ck + 8, 4);
        memcpy(ck + 8, c1, 4);
        fix_index(b, s);
    }
    error_file("table-err2-groups-swapped", b, s, "scan", "SIMSTORE_ECORRUPT",
               "block checksum mismatch: group 1",
               "groups 1 and 2 swapped with their checksums, index repaired");
    free(b);

    b = copy(bt->dense_tbl, bt->sz_dense);
    {
        uint64_t last = block_count_of(b) - 1;
        block_at(b, last)[255] = 0x80;
        /* Repair the group checksum of the last block. */
        uint64_t g = (last + 1) / 16;
        uint64_t first = g ? g * 16 - 1 : 0;
        uint32_t c = (uint32_t)sims_xxh3_64(block_at(b, first), (size_t)(last - first + 1) * 256,
                                            TBL_SEED_GROUP + g);
        uint8_t *ix = index_of(b, bt->sz_dense);
        le_store32(ix + le_load64(b + footer_off(bt->sz_dense) + TBL_F_INDEX_BYTES) - 4, c);
        fix_index(b, bt->sz_dense);
    }
    error_file("table-err2-block-padding", b, bt->sz_dense, "scan", "SIMSTORE_ECORRUPT",
               "nonzero padding", "last bit of the last block set, checksums repaired");
    free(b);
}

/* ---- version 3 ------------------------------------------------------------------ */

/* Version 3's index layout, from the block count. */
typedef struct v3_layout {
    uint8_t *index;
    uint64_t groups, chunks, chunks_begin, top_at;
} v3_layout;

static v3_layout layout_v3(uint8_t *b, size_t size)
{
    v3_layout l;
    uint64_t nb = block_count_of(b);
    l.index = index_of(b, size);
    l.groups = tbl_group_count(nb, le_load32(b + TBL_H_BLOCK_BYTES));
    l.chunks = tbl_v3_chunk_count(nb);
    l.chunks_begin = tbl_v3_groups_bytes(l.groups);
    l.top_at = le_load64(b + footer_off(size) + TBL_F_INDEX_BYTES) - tbl_v3_top_bytes(l.chunks);
    return l;
}

/* Repair chunk c's checksum (its end from its top entry). */
static void fix_chunk(uint8_t *b, size_t size, uint64_t c)
{
    v3_layout l = layout_v3(b, size);
    uint64_t begin =
        c ? le_load64(l.index + l.top_at + 24 * (c - 1) + TBL_V3_TOP_END) : l.chunks_begin;
    uint64_t end = le_load64(l.index + l.top_at + 24 * c + TBL_V3_TOP_END);
    le_store64(l.index + end - 8,
               sims_xxh3_64(l.index + begin, (size_t)(end - begin - 8), TBL_SEED_CHUNK + c));
}

/* Repair top page 0's checksum (the table has one top page). */
static void fix_top(uint8_t *b, size_t size)
{
    v3_layout l = layout_v3(b, size);
    size_t bytes = (size_t)(24 * l.chunks);
    le_store64(l.index + l.top_at + bytes, sims_xxh3_64(l.index + l.top_at, bytes, TBL_SEED_TOP));
}

static void v3_error_files(const base_tables *bt)
{
    const uint8_t *uniform = bt->uniform;
    size_t s = bt->sz_uni;
    uint8_t *b;

    b = copy(uniform, s);
    le_store64(b + footer_off(s) + TBL_F_INDEX_CHECKSUM, 1);
    fix_footer(b, s);
    error_file("table-err3-index-checksum", b, s, "open", "SIMSTORE_ECORRUPT", "version 3 writes 0",
               "the footer's index checksum 1, footer checksum repaired");
    free(b);

    {
        /* The first base table with an odd group count has padding. */
        const uint8_t *t[3] = {uniform, bt->dense_tbl, bt->clustered};
        size_t ts[3] = {s, bt->sz_dense, bt->sz_clu};
        int i = 0;
        while (i < 3 && layout_v3((uint8_t *)t[i], ts[i]).groups % 2 == 0)
            i++;
        if (i == 3)
            die("no base table with an odd group count");
        b = copy(t[i], ts[i]);
        v3_layout l = layout_v3(b, ts[i]);
        l.index[4 * l.groups] = 1;
        error_file("table-err3-padding", b, ts[i], "open", "SIMSTORE_ECORRUPT",
                   "padding after the group checksums", "a padding byte after the group checksums");
        free(b);
    }

    b = copy(uniform, s);
    {
        v3_layout l = layout_v3(b, s);
        l.index[l.chunks_begin + TBL_C3_HEADER_BYTES + 3] ^= 0x04;
    }
    error_file("table-err3-chunk-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "chunk 0: checksum mismatch", "one bit of chunk 0's key low parts flipped");
    free(b);

    b = copy(uniform, s);
    {
        v3_layout l = layout_v3(b, s);
        l.index[l.chunks_begin + TBL_C3_LOW_BITS] = 64;
        fix_chunk(b, s, 0);
    }
    error_file("table-err3-chunk-header", b, s, "scan", "SIMSTORE_ECORRUPT",
               "chunk 0: header (key low bits 64",
               "chunk 0's key low bits 64, chunk checksum repaired");
    free(b);

    b = copy(uniform, s);
    {
        v3_layout l = layout_v3(b, s);
        le_store32(l.index + l.chunks_begin + TBL_C3_COUNT_MIN, 0);
        fix_chunk(b, s, 0);
    }
    error_file("table-err3-count-zero", b, s, "scan", "SIMSTORE_ECORRUPT", "count 0",
               "chunk 0's count_min 0 (the smallest count becomes 0), chunk checksum repaired");
    free(b);

    b = copy(uniform, s);
    {
        v3_layout l = layout_v3(b, s);
        l.index[l.top_at + TBL_V3_TOP_FP_END] ^= 0x01;
    }
    error_file("table-err3-top-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "top page 0: checksum mismatch",
               "one bit of top entry 0's fingerprint count flipped");
    free(b);

    b = copy(uniform, s);
    {
        v3_layout l = layout_v3(b, s);
        uint8_t *e = l.index + l.top_at + TBL_V3_TOP_FP_END;
        le_store64(e, le_load64(e) + 1);
        fix_top(b, s);
    }
    error_file("table-err3-top-count", b, s, "scan", "SIMSTORE_ECORRUPT", "last chunk ends at",
               "top entry 0's fingerprint count one too many, page repaired");
    free(b);

    b = copy(uniform, s);
    {
        v3_layout l = layout_v3(b, s);
        uint8_t *e = l.index + l.top_at + TBL_V3_TOP_LAST_KEY;
        le_store64(e, le_load64(e) - 1);
        fix_top(b, s);
    }
    error_file("table-err3-top-key", b, s, "scan", "SIMSTORE_ECORRUPT", "its top entry says",
               "top entry 0's last key one too small, page repaired");
    free(b);

    b = copy(uniform, s);
    block_at(b, 1)[100] ^= 0x10;
    error_file("table-err3-group-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "block 0 (byte offset 256): block checksum mismatch: group 0 (blocks 0..14",
               "one bit of block 1 flipped");
    free(b);
}

static void free_base(base_tables *bt)
{
    free(bt->uniform);
    free(bt->dense_tbl);
    free(bt->clustered);
    free(bt->uni);
    free(bt->dense);
    free(bt->clu);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: table_golden_gen DIR\n");
        return 2;
    }
    out_dir = argv[1];
    base_tables v1, v2, v3;
    valid_tables(1, "v1-", &v1);
    valid_tables(2, "", &v2);
    valid_tables(3, "v3-", &v3);
    v1_error_files(&v1);
    v2_error_files(&v2);
    v3_error_files(&v3);
    fclose(errors_txt);
    free_base(&v1);
    free_base(&v2);
    free_base(&v3);
    return 0;
}
