/* layout.h: the numbers of format/docfile.md that the writer and the reader
 * share: seeds, page shapes, and the sizes every section takes, as
 * functions of the header's fields. */
#ifndef SIMS_DOCFILE_LAYOUT_H
#define SIMS_DOCFILE_LAYOUT_H

#include <stdint.h>

#define DF_MAGIC "SIMSDOCF"
#define DF_SEED_HEADER 0x53494D53444F4348ULL /* "SIMSDOCH" */
#define DF_SEED_BLOCK 0x53494D53444F4342ULL  /* "SIMSDOCB" + block */
#define DF_SEED_TABLE 0x53494D53444F4354ULL  /* "SIMSDOCT" + page */
#define DF_SEED_FPDIR 0x53494D53444F4346ULL  /* "SIMSDOCF" + page */
#define DF_SEED_IDENT 0x53494D53444F4349ULL  /* "SIMSDOCI" + page */
#define DF_SEED_IDDIR 0x53494D53444F4344ULL  /* "SIMSDOCD" + page */
#define DF_SEED_IDHASH 0x53494D5344494458ULL /* "SIMSDIDX" */

#define DF_H_SKETCH 10u
#define DF_H_BF 12u
#define DF_H_BI 13u
#define DF_H_OB 14u
#define DF_H_COUNT 16u
#define DF_H_BT 24u
#define DF_H_CHECKSUM 56u

#define DF_BLOCK_HEAD 16u /* block header before the masks */
#define DF_TABLE_PAGE 32u /* block-table entries a page */
#define DF_DIR_PAGE 64u   /* directory entries a page */
#define DF_IDENT_PAGE 64u /* id entries a page */
#define DF_TAG_BITS 8u
#define DF_RICE_MAX_Q 63u

static inline unsigned df_bits(uint64_t x)
{
    return x ? 64u - (unsigned)__builtin_clzll(x) : 0u;
}

static inline uint64_t df_block_count(uint64_t n)
{
    return (n + 63) / 64;
}

static inline unsigned df_bf(uint64_t n)
{
    unsigned b = df_bits(df_block_count(n));
    return b < 32 ? b : 32;
}

static inline unsigned df_bi(uint64_t n)
{
    unsigned b = df_bits(n);
    b = b > 4 ? b - 4 : 0;
    return b < 32 ? b : 32;
}

static inline unsigned df_ob(uint64_t n)
{
    return n > 1 ? df_bits(n - 1) : 0;
}

static inline uint64_t df_table_bytes(uint64_t nb)
{
    return 16 * nb + 8 * ((nb + DF_TABLE_PAGE - 1) / DF_TABLE_PAGE);
}

static inline uint64_t df_table_entry_offset(uint64_t i)
{
    return 16 * i + 8 * (i / DF_TABLE_PAGE);
}

static inline uint64_t df_dir_entries(unsigned b)
{
    return ((uint64_t)1 << b) + 1;
}

static inline uint64_t df_dir_bytes(unsigned b)
{
    uint64_t e = df_dir_entries(b);
    return 4 * e + 8 * ((e + DF_DIR_PAGE - 1) / DF_DIR_PAGE);
}

static inline uint64_t df_dir_entry_offset(uint64_t x)
{
    return 4 * x + 8 * (x / DF_DIR_PAGE);
}

/* Words of an id-entry page of e entries of w bits. */
static inline uint64_t df_ident_words(uint64_t e, unsigned w)
{
    return (e * w + 63) / 64;
}

static inline uint64_t df_ident_page_bytes(unsigned w)
{
    return 8 * (uint64_t)w + 8;
}

static inline uint64_t df_ident_bytes(uint64_t n, unsigned w)
{
    uint64_t rem = n % DF_IDENT_PAGE;
    return (n / DF_IDENT_PAGE) * df_ident_page_bytes(w) +
           (rem ? 8 * df_ident_words(rem, w) + 8 : 0);
}

/* The bucket and the tag of an id hash. */
static inline uint64_t df_bucket(uint64_t h, unsigned bi)
{
    return bi ? h >> (64 - bi) : 0;
}

static inline uint64_t df_tag(uint64_t h, unsigned bi)
{
    return (h >> (56 - bi)) & 0xFF;
}

static inline uint64_t df_fp_bucket(uint64_t fp, unsigned bf)
{
    return bf ? fp >> (64 - bf) : 0;
}

#endif
