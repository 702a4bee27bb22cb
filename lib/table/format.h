/* format.h: constants of the table file format, version 3 (format/table.md
 * is the specification; every number here appears there). Internal to
 * lib/table: the writer and the reader share them. */
#ifndef SIMS_TABLE_FORMAT_H
#define SIMS_TABLE_FORMAT_H

#include <stdint.h>

/* "\x89SIMTBL\n" opens the file, "\x89SIMEND\n" closes it. The high first
 * byte and the newline catch text-mode transfers, as PNG's signature does. */
#define TBL_MAGIC "\x89SIMTBL\n"
#define TBL_FOOTER_MAGIC "\x89SIMEND\n"
#define TBL_MAGIC_BYTES 8u

#define TBL_HEADER_BYTES 256u
#define TBL_FOOTER_BYTES 64u
#define TBL_MAX_COUNT_BITS 32u
#define TBL_PAGE_BYTES 4096u

/* The index: the page-group checksums (u32 each, zero-padded to a
 * multiple of 8 bytes), then the block keys and counts in chunks of
 * TBL_V3_CHUNK_BLOCKS blocks, each checksummed on its own, then the top
 * entries (one per chunk: its last key, the fingerprints up to its end, the
 * byte offset of its end) in pages of TBL_V3_TOP_ENTRIES entries, each
 * followed by its checksum. A reader checks a chunk or a top page on first
 * use, so an open reads no part of the index. */
#define TBL_V3_CHUNK_BLOCKS 256u
#define TBL_V3_TOP_ENTRIES 128u
#define TBL_V3_TOP_ENTRY_BYTES 24u
#define TBL_V3_TOP_LAST_KEY 0 /* u64: the chunk's last block key */
#define TBL_V3_TOP_FP_END 8   /* u64: fingerprints in this chunk and all before */
#define TBL_V3_TOP_END 16     /* u64: the chunk's end, in bytes from index_offset */
#define TBL_C3_LOW_BITS 0     /* u8, 0..63 */
#define TBL_C3_COUNT_BITS 1   /* u8, 0..TBL_MAX_COUNT_BITS */
#define TBL_C3_RESERVED 2     /* u16, zero */
#define TBL_C3_COUNT_MIN 4    /* u32 */
#define TBL_C3_HIGH_WORDS 8   /* u32 */
#define TBL_C3_RESERVED2 12   /* u32, zero */
#define TBL_C3_HEADER_BYTES 16u
/* The smallest chunk: its header, one word of key high bits, its checksum. */
#define TBL_C3_MIN_BYTES 32u

/* Header field offsets. */
#define TBL_H_MAGIC 0
#define TBL_H_VERSION 8
#define TBL_H_HEADER_BYTES 12
#define TBL_H_BLOCK_BYTES 16
#define TBL_H_PREFIX_BITS 20
#define TBL_H_RESERVED1 21 /* 3 bytes, zero */
#define TBL_H_STORE_TAG 24
#define TBL_H_TABLE_INDEX 32
#define TBL_H_FLAGS 36 /* u32, zero */
#define TBL_H_FP_COUNT 40
#define TBL_H_BLOCK_COUNT 48
#define TBL_H_BLOCKS_OFFSET 56
#define TBL_H_CODE_LENGTHS 64 /* 64 bytes */
#define TBL_H_PERM 128        /* 64 bytes */
#define TBL_H_RESERVED2 192   /* 56 bytes, zero */
#define TBL_H_CHECKSUM 248    /* XXH3-64 of bytes [0, 248) */

/* Footer field offsets (from the footer's start, file size - 64). */
#define TBL_F_INDEX_OFFSET 0
#define TBL_F_INDEX_BYTES 8
#define TBL_F_BLOCK_COUNT 16
#define TBL_F_FP_COUNT 24
#define TBL_F_HEADER_CHECKSUM 32
#define TBL_F_INDEX_CHECKSUM 40
#define TBL_F_CHECKSUM 48 /* XXH3-64 of footer bytes [0, 48) */
#define TBL_F_MAGIC 56

/* XXH3-64 seeds: the ASCII of their names read as big-endian numbers. */
#define TBL_SEED_HEADER UINT64_C(0x53494D5354484452) /* "SIMSTHDR" */
#define TBL_SEED_FOOTER UINT64_C(0x53494D5354465452) /* "SIMSTFTR" */
#define TBL_SEED_GROUP UINT64_C(0x53494D5354475250)  /* "SIMSTGRP" + group number */
#define TBL_SEED_CHUNK UINT64_C(0x53494D535443484B)  /* "SIMSTCHK" + chunk number */
#define TBL_SEED_TOP UINT64_C(0x53494D5354544F50)    /* "SIMSTTOP" + top page number */

/* Blocks start at max(256, min(block_bytes, 4096)): right after the header
 * for 256-byte blocks, else aligned to the block size up to a page, so no
 * block of <= 4 KiB straddles a page of the mapping. */
static inline uint64_t tbl_blocks_offset(uint64_t block_bytes)
{
    uint64_t a = block_bytes < 4096 ? block_bytes : 4096;
    return a > TBL_HEADER_BYTES ? a : TBL_HEADER_BYTES;
}

/* Blocks are checksummed by page group, the blocks that lie in one 4 KiB
 * page of the file (block 0 shares page 0 with the header): block b is in
 * group (b + first_slot) / group_blocks. */
static inline uint32_t tbl_group_blocks(uint64_t block_bytes)
{
    return block_bytes < TBL_PAGE_BYTES ? (uint32_t)(TBL_PAGE_BYTES / block_bytes) : 1u;
}

static inline uint32_t tbl_group_first_slot(uint64_t block_bytes)
{
    return tbl_group_blocks(block_bytes) > 1 ? 1u : 0u;
}

static inline uint64_t tbl_group_count(uint64_t block_count, uint64_t block_bytes)
{
    return block_count ? (block_count - 1 + tbl_group_first_slot(block_bytes)) /
                                 tbl_group_blocks(block_bytes) +
                             1
                       : 0;
}

/* The index's layout, from the block count. */
static inline uint64_t tbl_v3_chunk_count(uint64_t block_count)
{
    return (block_count + TBL_V3_CHUNK_BLOCKS - 1) / TBL_V3_CHUNK_BLOCKS;
}

static inline uint64_t tbl_v3_top_pages(uint64_t chunks)
{
    return (chunks + TBL_V3_TOP_ENTRIES - 1) / TBL_V3_TOP_ENTRIES;
}

/* The bytes of the top entries and their page checksums. */
static inline uint64_t tbl_v3_top_bytes(uint64_t chunks)
{
    return chunks * TBL_V3_TOP_ENTRY_BYTES + 8 * tbl_v3_top_pages(chunks);
}

/* The bytes of the group checksums with their padding: where chunk 0 starts. */
static inline uint64_t tbl_v3_groups_bytes(uint64_t groups)
{
    return (4 * groups + 7) / 8 * 8;
}

/* A chunk's block keys in Elias-Fano form (format/table.md, "Block keys"):
 * key i - base is (high_i << low_bits) | low_i, the low parts packed
 * low_bits each, the high parts a bit vector with a 1 at high_i + i. The
 * writer picks the low_bits (0..63) that make the chunk smallest:
 * n * low_bits + n + (max_key >> low_bits) bits, the smallest on ties. */
static inline unsigned tbl_key_low_bits(uint64_t n, uint64_t max_key)
{
    unsigned best = 0;
    double best_bits = 0;
    for (unsigned l = 0; l < 64; l++) {
        double bits = (double)n * (double)l + (double)n + (double)(max_key >> l);
        if (l == 0 || bits < best_bits) {
            best = l;
            best_bits = bits;
        }
    }
    return best;
}

/* Words of the packed low parts and of the high bit vector. */
static inline uint64_t tbl_key_low_words(uint64_t n, unsigned low_bits)
{
    return (n * low_bits + 63) / 64;
}

static inline uint64_t tbl_key_high_words(uint64_t n, unsigned low_bits, uint64_t max_key)
{
    return n ? ((max_key >> low_bits) + n - 1) / 64 + 1 : 0;
}

#endif
