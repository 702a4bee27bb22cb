/* gen_golden.c: writes the table golden files of format/golden/: valid
 * tables with their expected decodes (table-NAME.tbl and .txt, format
 * version 3), and golden error files (table-err-*.tbl), each a valid table
 * damaged in one specific way (checksums repaired where needed so that
 * exactly the intended check fires), listed with the expected error in
 * table-errors.txt.
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
#include "table/table.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *out_dir;
static FILE *errors_txt;

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
    return p;
}

/* Write NAME.tbl and NAME.txt (the expected decode). `hist` may be NULL (the
 * optimal code for the values). Returns the encoded bytes (caller frees). */
static uint8_t *golden(const char *name, const char *description, const table_params *p,
                       const uint64_t *hist, const uint64_t *v, size_t n, size_t *size)
{
    uint8_t *buf;
    int rc = hist ? sims_table_encode_memory_hist(p, hist, v, n, &buf, size)
                  : sims_table_encode_memory(p, v, n, &buf, size);
    if (rc)
        die(name);
    char fname[256];
    snprintf(fname, sizeof fname, "%s.tbl", name);
    write_file(fname, buf, *size);

    table_reader *r;
    if (sims_table_reader_open_memory(buf, *size, 0, &r))
        die("reopen");
    const table_info *in = sims_table_reader_info(r);
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
        fprintf(f, " %" PRIu32, sims_table_reader_block_count(r, b));
    fprintf(f, "\nfingerprints %zu\n", n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%016" PRIx64 "\n", v[i]);
    fclose(f);
    sims_table_reader_close(r);
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

static uint64_t block_count_of(const uint8_t *b)
{
    return le_load64(b + TBL_H_BLOCK_COUNT);
}

static uint8_t *block_at(uint8_t *b, uint64_t block)
{
    return b + le_load64(b + TBL_H_BLOCKS_OFFSET) + block * le_load32(b + TBL_H_BLOCK_BYTES);
}

static uint8_t *index_of(uint8_t *b, size_t size)
{
    return b + le_load64(b + footer_off(size) + TBL_F_INDEX_OFFSET);
}

/* Repair the checksum of the page group holding `block` (the group
 * checksums open the index). */
static void fix_group(uint8_t *b, size_t size, uint64_t block)
{
    uint32_t bb = le_load32(b + TBL_H_BLOCK_BYTES);
    uint64_t nb = block_count_of(b), gb = tbl_group_blocks(bb), slot = tbl_group_first_slot(bb);
    uint64_t g = (block + slot) / gb;
    uint64_t first = g * gb > slot ? g * gb - slot : 0, end = (g + 1) * gb - slot;
    end = end < nb ? end : nb;
    uint32_t c = (uint32_t)sims_xxh3_64(block_at(b, first), (size_t)((end - first) * bb),
                                        TBL_SEED_GROUP + g);
    le_store32(index_of(b, size) + 4 * g, c);
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

/* The tables the error files start from. */
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

/* The valid tables, named table-PREFIXNAME. */
static void valid_tables(const char *prefix, base_tables *bt)
{
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
    sims_table_histogram_add(hist_unused, &prev, &have_prev, uni, 300);
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

/* Damage to the header, the footer and the blocks. */
static void error_files(const base_tables *bt)
{
    const uint8_t *uniform = bt->uniform, *dense_tbl = bt->dense_tbl, *clustered = bt->clustered;
    size_t sz_dense = bt->sz_dense, sz_clu = bt->sz_clu;
    char path[4096];
    snprintf(path, sizeof path, "%s/table-errors.txt", out_dir);
    errors_txt = fopen(path, "w");
    if (!errors_txt)
        die(path);
    fprintf(
        errors_txt,
        "# Golden error files: FILE PHASE CODE MESSAGE\n"
        "# PHASE open: sims_table_reader_open must fail; scan: it opens, and a full range scan\n"
        "# (sims_table_cursor_next over [0, 2^64-1], checksums on) must fail. CODE is the\n"
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
    error_file("table-err-version", b, s, "open", "SIMSTORE_EVERSION",
               "table format version 4 unknown to this simstore",
               "format version 4, checksums repaired");
    free(b);

    /* A version a pre-release build wrote: refused as unknown, not corrupt. */
    b = copy(uniform, s);
    le_store32(b + TBL_H_VERSION, 2);
    fix_header(b, s);
    error_file("table-err-version-2", b, s, "open", "SIMSTORE_EVERSION",
               "table format version 2 unknown to this simstore",
               "format version 2, checksums repaired");
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
    error_file("table-err-fp-count", b, s, "scan", "SIMSTORE_ECORRUPT", "last chunk ends at",
               "fingerprint count one too many in header and footer, checksums repaired");
    free(b);

    b = copy(clustered, sz_clu);
    b[300] = 1;
    error_file("table-err-header-padding", b, sz_clu, "open", "SIMSTORE_ECORRUPT",
               "padding between header and blocks", "a byte of the zero gap before block 0 set");
    free(b);

    b = copy(uniform, s);
    block_at(b, 1)[100] ^= 0x10;
    error_file("table-err-block-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "block 0 (byte offset 256): block checksum mismatch: group 0 (blocks 0..14",
               "one bit of block 1 flipped");
    free(b);

    /* Nonzero padding: the dense table's last block is mostly padding. */
    b = copy(dense_tbl, sz_dense);
    {
        uint64_t last = block_count_of(b) - 1;
        block_at(b, last)[255] = 0x80;
        fix_group(b, sz_dense, last);
    }
    error_file("table-err-block-padding", b, sz_dense, "scan", "SIMSTORE_ECORRUPT",
               "nonzero padding", "last bit of the last block set, checksums repaired");
    free(b);

    b = copy(dense_tbl, sz_dense);
    block_at(b, 0)[9] |= 0x04; /* bit 74: "1" starts no code of a one-symbol code */
    fix_group(b, sz_dense, 0);
    error_file("table-err-bad-code", b, sz_dense, "scan", "SIMSTORE_ECORRUPT",
               "no Huffman code matches the bits at bit offset 74",
               "an invalid code in block 0, checksums repaired");
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
        uint8_t *ck = index_of(b, s), c1[4];
        memcpy(c1, ck + 4, 4);
        memcpy(ck + 4, ck + 8, 4);
        memcpy(ck + 8, c1, 4);
    }
    error_file("table-err-groups-swapped", b, s, "scan", "SIMSTORE_ECORRUPT",
               "block checksum mismatch: group 1", "groups 1 and 2 swapped with their checksums");
    free(b);
}

/* ---- the index ------------------------------------------------------------------ */

/* The index's layout, from the block count. */
typedef struct index_layout {
    uint8_t *index;
    uint64_t groups, chunks, chunks_begin, top_at;
} index_layout;

static index_layout layout_of(uint8_t *b, size_t size)
{
    index_layout l;
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
    index_layout l = layout_of(b, size);
    uint64_t begin =
        c ? le_load64(l.index + l.top_at + 24 * (c - 1) + TBL_V3_TOP_END) : l.chunks_begin;
    uint64_t end = le_load64(l.index + l.top_at + 24 * c + TBL_V3_TOP_END);
    le_store64(l.index + end - 8,
               sims_xxh3_64(l.index + begin, (size_t)(end - begin - 8), TBL_SEED_CHUNK + c));
}

/* Repair top page 0's checksum (the table has one top page). */
static void fix_top(uint8_t *b, size_t size)
{
    index_layout l = layout_of(b, size);
    size_t bytes = (size_t)(24 * l.chunks);
    le_store64(l.index + l.top_at + bytes, sims_xxh3_64(l.index + l.top_at, bytes, TBL_SEED_TOP));
}

/* Damage to the index: its chunks, top pages and padding. */
static void index_error_files(const base_tables *bt)
{
    const uint8_t *uniform = bt->uniform;
    size_t s = bt->sz_uni;
    uint8_t *b;

    b = copy(uniform, s);
    le_store64(b + footer_off(s) + TBL_F_INDEX_CHECKSUM, 1);
    fix_footer(b, s);
    error_file("table-err-index-checksum", b, s, "open", "SIMSTORE_ECORRUPT", "the writer writes 0",
               "the footer's index checksum 1, footer checksum repaired");
    free(b);

    {
        /* The first base table with an odd group count has padding. */
        const uint8_t *t[3] = {uniform, bt->dense_tbl, bt->clustered};
        size_t ts[3] = {s, bt->sz_dense, bt->sz_clu};
        int i = 0;
        while (i < 3 && layout_of((uint8_t *)t[i], ts[i]).groups % 2 == 0)
            i++;
        if (i == 3)
            die("no base table with an odd group count");
        b = copy(t[i], ts[i]);
        index_layout l = layout_of(b, ts[i]);
        l.index[4 * l.groups] = 1;
        error_file("table-err-padding", b, ts[i], "open", "SIMSTORE_ECORRUPT",
                   "padding after the group checksums", "a padding byte after the group checksums");
        free(b);
    }

    b = copy(uniform, s);
    {
        index_layout l = layout_of(b, s);
        l.index[l.chunks_begin + TBL_C3_HEADER_BYTES + 3] ^= 0x04;
    }
    error_file("table-err-chunk-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "chunk 0: checksum mismatch", "one bit of chunk 0's key low parts flipped");
    free(b);

    b = copy(uniform, s);
    {
        index_layout l = layout_of(b, s);
        l.index[l.chunks_begin + TBL_C3_LOW_BITS] = 64;
        fix_chunk(b, s, 0);
    }
    error_file("table-err-chunk-header", b, s, "scan", "SIMSTORE_ECORRUPT",
               "chunk 0: header (key low bits 64",
               "chunk 0's key low bits 64, chunk checksum repaired");
    free(b);

    b = copy(uniform, s);
    {
        index_layout l = layout_of(b, s);
        le_store32(l.index + l.chunks_begin + TBL_C3_COUNT_MIN, 0);
        fix_chunk(b, s, 0);
    }
    error_file("table-err-count-zero", b, s, "scan", "SIMSTORE_ECORRUPT", "count 0",
               "chunk 0's count_min 0 (the smallest count becomes 0), chunk checksum repaired");
    free(b);

    b = copy(bt->dense_tbl, bt->sz_dense);
    {
        index_layout l = layout_of(b, bt->sz_dense);
        le_store32(l.index + l.chunks_begin + TBL_C3_COUNT_MIN, 1987);
        fix_chunk(b, bt->sz_dense, 0);
    }
    error_file("table-err-count-too-big", b, bt->sz_dense, "scan", "SIMSTORE_ECORRUPT",
               "block 0: count 2959 outside 1..1986",
               "chunk 0's count_min 1987: block 0's count above what 256 bytes hold, chunk "
               "checksum repaired");
    free(b);

    b = copy(uniform, s);
    {
        index_layout l = layout_of(b, s);
        l.index[l.top_at + TBL_V3_TOP_FP_END] ^= 0x01;
    }
    error_file("table-err-top-checksum", b, s, "scan", "SIMSTORE_ECORRUPT",
               "top page 0: checksum mismatch",
               "one bit of top entry 0's fingerprint count flipped");
    free(b);

    b = copy(uniform, s);
    {
        index_layout l = layout_of(b, s);
        uint8_t *e = l.index + l.top_at + TBL_V3_TOP_FP_END;
        le_store64(e, le_load64(e) + 1);
        fix_top(b, s);
    }
    error_file("table-err-top-count", b, s, "scan", "SIMSTORE_ECORRUPT", "last chunk ends at",
               "top entry 0's fingerprint count one too many, page repaired");
    free(b);

    b = copy(uniform, s);
    {
        index_layout l = layout_of(b, s);
        uint8_t *e = l.index + l.top_at + TBL_V3_TOP_LAST_KEY;
        le_store64(e, le_load64(e) - 1);
        fix_top(b, s);
    }
    error_file("table-err-top-key", b, s, "scan", "SIMSTORE_ECORRUPT", "its top entry says",
               "top entry 0's last key one too small, page repaired");
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
    base_tables bt;
    valid_tables("", &bt);
    error_files(&bt);
    index_error_files(&bt);
    fclose(errors_txt);
    free_base(&bt);
    return 0;
}
