/* table.h: one permuted table file (format/table.md): a writer that streams
 * sorted distinct fingerprints into fixed-size Huffman-delta blocks and
 * publishes the file atomically, and a reader that maps a file (or borrows a
 * buffer), validates it, and answers range scans and fused Hamming-distance
 * probes. The index stays in the mapping and each chunk of it is checked
 * on first use, so an open costs the same whatever the table's size. One
 * format version, 3, is read and written; a file of any other version is
 * refused with SIMSTORE_EVERSION.
 *
 * The table layer knows nothing about LMDB, documents or what the
 * permutation and prefix bits mean: it stores them for the caller.
 *
 * Errors: SIMSTORE_OK (0) or a negative SIMSTORE_E* code; the detail is in
 * simstore_last_error(). Every rejection of file bytes is SIMSTORE_ECORRUPT
 * (SIMSTORE_EVERSION for an unknown format version) with a message naming
 * what is wrong and where (block number, byte offset).
 *
 * Threads: a reader is immutable after open; any number of threads may use
 * it at once (cursors and searches keep their state on the caller's side).
 * A writer is used by one thread at a time. */
#ifndef SIMS_TABLE_TABLE_H
#define SIMS_TABLE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "codec/block.h"

/* The format version this code reads and writes (the only one). */
#define TABLE_FORMAT_VERSION 3u

/* What the caller supplies and the reader returns unchanged. */
typedef struct table_params {
    uint32_t block_bytes; /* simstore_block_bytes_valid() */
    uint8_t prefix_bits;  /* <= 64; opaque to this layer */
    uint8_t perm[64];     /* a permutation of 0..63; opaque to this layer */
    uint64_t store_tag;   /* identifies the store the file belongs to */
    uint32_t table_index; /* which of the store's tables this is */
} table_params;

/* ---- histogram ------------------------------------------------------------ */

/* Add the leading-bit positions of consecutive differences of fps[0..n) to
 * hist (hist[j] counts differences whose leading 1-bit is j). Call it on
 * successive chunks of one sorted stream: *prev and *have_prev carry the last
 * value across calls (start with *have_prev = 0). The result does not depend
 * on how the stream is chunked or where blocks will end. Pairs that are not
 * strictly increasing are skipped (the writer rejects them later). */
void sims_table_histogram_add(uint64_t hist[64], uint64_t *prev, int *have_prev,
                              const uint64_t *fps, size_t n);

/* ---- writer --------------------------------------------------------------- */

typedef struct table_writer table_writer;

/* Start writing a table to `path` (published only by sims_table_writer_finish;
 * until then the data goes to a temporary file beside it). `hist` fixes the
 * Huffman code (sims_table_histogram_add over exactly the fingerprints to come is
 * the optimal choice; any histogram that counts every difference that will
 * occur works). *out receives the writer.
 * Returns SIMSTORE_OK; SIMSTORE_EINVAL for bad params (block size, prefix
 * bits > 64, perm not a permutation); SIMSTORE_ENOMEM; SIMSTORE_EIO (create). */
int sims_table_writer_open(const char *path, const table_params *p, const uint64_t hist[64],
                           table_writer **out);

/* Append fps[0..n): strictly increasing, also across calls. Returns
 * SIMSTORE_OK; SIMSTORE_EINVAL for a value not greater than its predecessor
 * or a difference whose symbol had count 0 in the histogram; SIMSTORE_EIO or
 * SIMSTORE_EFULL from writing. After an error the writer only accepts
 * sims_table_writer_abort() (finish then fails with the same code and aborts). */
/* How many index values (per column: keys, entries) the writer keeps in
 * memory before moving them to an unlinked file beside the output; default
 * 2^18 (2 MiB per column). Only before the first block; for tests. */
void sims_table_writer_index_buffer(table_writer *w, size_t values);

int sims_table_writer_add(table_writer *w, const uint64_t *fps, size_t n);

/* Complete the file (last block, index, header counts, footer), fsync it,
 * rename it over `path` and fsync the directory. Always frees w: on any
 * failure the temporary file is removed and `path` is untouched.
 * Returns SIMSTORE_OK or the error (SIMSTORE_EIO, SIMSTORE_EFULL, or the
 * error an earlier call hit). */
int sims_table_writer_finish(table_writer *w);

/* Discard the writer and its temporary file. NULL is allowed. */
void sims_table_writer_abort(table_writer *w);

/* Encode a whole table of fps[0..n) (strictly increasing) into memory with
 * the optimal code for these values: *out receives a malloc'd buffer the
 * caller frees, *size its length. The bytes are exactly what the file writer
 * produces. For tests, fuzzing and golden files.
 * Returns SIMSTORE_OK, SIMSTORE_EINVAL or SIMSTORE_ENOMEM. */
int sims_table_encode_memory(const table_params *p, const uint64_t *fps, size_t n, uint8_t **out,
                             size_t *size);

/* As sims_table_encode_memory, with a caller-chosen histogram (e.g. to produce
 * files whose code contains unused symbols). */
int sims_table_encode_memory_hist(const table_params *p, const uint64_t hist[64],
                                  const uint64_t *fps, size_t n, uint8_t **out, size_t *size);

/* ---- reader --------------------------------------------------------------- */

typedef struct table_reader table_reader;

/* Facts about an open table; everything was validated at open. Byte offsets
 * are from the start of the file. */
typedef struct table_info {
    table_params params;
    uint32_t format_version;
    uint64_t fp_count;
    uint64_t block_count;
    uint8_t code_lengths[64]; /* Huffman code length per symbol; 0 = no code */
    uint64_t file_bytes;
    uint64_t header_bytes;  /* 256 */
    uint64_t blocks_offset; /* where block 0 starts */
    uint64_t blocks_bytes;  /* block_count * block_bytes */
    uint64_t index_offset;
    uint64_t index_bytes;  /* format/table.md, "Block index" */
    uint64_t footer_bytes; /* 64 */
    uint64_t header_checksum;
    uint64_t index_checksum; /* 0 (its chunks and top pages carry their own) */
    uint64_t key_ram_bytes;  /* what the reader keeps of the index in RAM: 24 bytes
                              * per chunk (its header's fields, last key and end)
                              * and a byte per top page */
} table_info;

/* Open flag: do not verify a block's checksum before decoding it (faster;
 * corruption inside blocks may then go unnoticed or give wrong values, but
 * never a crash or an out-of-bounds read). */
#define TABLE_SKIP_BLOCK_CHECKSUMS 1u

/* Map `path` read-only and validate header and footer (checksums, bounds);
 * blocks, and the index's chunks and top pages, are checked on first use.
 * *out receives the reader. Returns SIMSTORE_OK; SIMSTORE_ENOTFOUND (no
 * such file); SIMSTORE_ECORRUPT; SIMSTORE_EVERSION (format version not 3:
 * the message names the file and the version);
 * SIMSTORE_ENOMEM; SIMSTORE_EIO; SIMSTORE_EINVAL (unknown flag). */
int sims_table_reader_open(const char *path, unsigned flags, table_reader **out);
/* Ask for the file's pages in 2 MiB folios as they come into the page
 * cache (sims_map_advise_huge); nothing for a table in memory. */
void sims_table_reader_advise_huge(const table_reader *r);

/* As sims_table_reader_open on data[0, size), which the caller keeps valid and
 * unchanged until sims_table_reader_close (no copy is made except the keys). */
int sims_table_reader_open_memory(const uint8_t *data, size_t size, unsigned flags,
                                  table_reader **out);

/* Release the reader (and its mapping). NULL is allowed. */
void sims_table_reader_close(table_reader *r);

/* The table's facts; valid until sims_table_reader_close. */
const table_info *sims_table_reader_info(const table_reader *r);

/* The key of block `block` < block_count: its last (largest) fingerprint;
 * keys strictly increase. Constant time (the keys are kept in Elias-Fano
 * form). 0 when the index chunk holding it is damaged (every
 * decode of the block then fails with SIMSTORE_ECORRUPT). */
uint64_t sims_table_reader_key(const table_reader *r, uint64_t block);

/* The first block whose key is >= v (block_count when there is none): the
 * only block that can hold v. When the index it reads is damaged: a block at or before the damage, so that a scan from it meets
 * the damage (a decode fails with SIMSTORE_ECORRUPT) before it could pass
 * v: callers need no error path of their own. */
uint64_t sims_table_reader_find_block(const table_reader *r, uint64_t v);

/* Check the whole index now (every chunk and top page, as their first use
 * would).
 * Returns SIMSTORE_OK or SIMSTORE_ECORRUPT naming the first damage. For
 * verify and inspection tools. */
int sims_table_reader_check_index(const table_reader *r);

/* Decode block `block` whole into out[0..*n) (cap >= its count, at most
 * sims_codec_block_max_count; sims_table_reader_block_count gives it), verifying its
 * checksum first unless the reader skips checksums, and its count, last
 * value and padding after. Returns SIMSTORE_OK; SIMSTORE_EINVAL (block out of
 * range or cap too small); SIMSTORE_ECORRUPT. */
int sims_table_reader_block(const table_reader *r, uint64_t block, uint64_t *out, size_t cap,
                            size_t *n);

/* Decoding one block a piece at a time (batch scans that need only its
 * values up to some bound): start verifies the checksum before the block's
 * first decode by this reader (as searches do) and initialises dec; next
 * decodes up to cap further values into out[0..*n) and, once the block's
 * last value is out (dec->remaining == 0), checks its count, key and
 * padding. Errors: SIMSTORE_EINVAL (block out of range), SIMSTORE_ECORRUPT
 * (the detail names the file, block and byte offset). */
int sims_table_reader_block_start(const table_reader *r, uint64_t block, codec_block_decoder *dec);
int sims_table_reader_block_next(const table_reader *r, uint64_t block, codec_block_decoder *dec,
                                 uint64_t *out, size_t cap, size_t *n);

/* Number of fingerprints in block `block` (from the validated index), or 0
 * when block is out of range or its index chunk damaged. */
uint32_t sims_table_reader_block_count(const table_reader *r, uint64_t block);

/* The checksum covering block `block` as the index stores it (not verified
 * here): its page group's. 0 when block is out of range; for inspection
 * tools. */
uint32_t sims_table_reader_block_checksum(const table_reader *r, uint64_t block);

/* The blocks [*first, *end) that share block `block`'s checksum (its 4 KiB
 * page group; the block alone for blocks of 4 KiB and more), and whether their
 * checksum holds, whatever the open flags (a group found good is not hashed
 * again by searches). Returns SIMSTORE_OK, SIMSTORE_EINVAL (block out of
 * range) or SIMSTORE_ECORRUPT (the message names the group and its blocks);
 * *first and *end are set in every case but EINVAL. */
int sims_table_reader_check_group(const table_reader *r, uint64_t block, uint64_t *first,
                                  uint64_t *end);

/* Check one block completely, whatever the open flags: checksum, decode,
 * count, last value = key, zero padding. Returns SIMSTORE_OK, SIMSTORE_EINVAL
 * (block out of range) or SIMSTORE_ECORRUPT. */
int sims_table_reader_check_block(const table_reader *r, uint64_t block);

/* As sims_table_reader_check_block, and *used_bits receives how many bits of the
 * block its values occupy (the rest is padding); for inspection tools. */
int sims_table_reader_block_bits(const table_reader *r, uint64_t block, uint64_t *used_bits);

/* ---- range iteration -------------------------------------------------------- */

/* A cursor over the stored values in [lo, hi], in increasing order. Plain
 * data the caller allocates (on the stack is fine); the fields are private.
 * Valid while its reader is open. */
typedef struct table_cursor {
    const table_reader *reader;
    uint64_t lo, hi;
    uint64_t block; /* block being decoded, or next to start */
    uint64_t first_block;
    int state; /* 0: start `block`; 1: inside it; 2: done */
    codec_block_decoder dec;
} table_cursor;

/* Position c before the first value >= lo. lo > hi gives an empty range.
 * Returns SIMSTORE_OK (nothing can fail yet). */
int sims_table_cursor_init(table_cursor *c, const table_reader *r, uint64_t lo, uint64_t hi);

/* Copy the next values of the range into out[0..*n), at most cap (cap >= 1);
 * *n == 0 means the range is exhausted. Each block is checksum-verified (as
 * the reader's flags say) before its first value is returned, and a block
 * decoded to its end is checked against its count and key. Returns
 * SIMSTORE_OK or SIMSTORE_ECORRUPT (then the cursor stays at its end). */
int sims_table_cursor_next(table_cursor *c, uint64_t *out, size_t cap, size_t *n);

/* ---- fused probe ------------------------------------------------------------ */

/* Where a search of [lo, hi] starts, as sims_table_reader_prefetch() finds it:
 * the first block it reads (sims_table_reader_find_block(r, lo)) and, when
 * `have`, that block's keys and count and where its key lies in its index
 * chunk, so that the search does not look them up again. */
typedef struct table_start {
    uint64_t first, prev, key, pos;
    uint32_t count;
    int have;
    uint64_t chunk; /* set by sims_table_reader_prefetch_index: its chunk, or UINT64_MAX */
} table_start;

/* Hint that a search of [lo, hi] follows soon: issue prefetches for the block
 * bytes (at most 8 KiB) and the index words that search will read, so that the
 * probes of several tables wait on memory in parallel, not one after
 * another, and set *at to where the search starts, to hand to
 * sims_table_reader_search_from() (at->chunk: as sims_table_reader_prefetch_index()
 * left it, or UINT64_MAX). Reads only what it checks or is bounded to;
 * never fails (on a damaged index, *at is block 0 without keys: the search
 * from there meets the damage). */
void sims_table_reader_prefetch(const table_reader *r, uint64_t lo, uint64_t hi, table_start *at);

/* Hint that sims_table_reader_prefetch(r, lo, ..., at) follows: when the top
 * pages the search for lo needs are already checked, issue
 * prefetches for the index chunk it will read, from the keys in RAM,
 * without waiting on the file, and note the chunk in at->chunk (which
 * sims_table_reader_prefetch then takes instead of searching again; UINT64_MAX
 * otherwise). Call it for every table of a query first, so that their
 * index reads overlap too. Never fails. */
void sims_table_reader_prefetch_index(const table_reader *r, uint64_t lo, table_start *at);

/* Call emit(ctx, v) for every stored v in [lo, hi] with popcount(v ^ q) <= k,
 * in increasing order. emit returning nonzero stops the scan and that value
 * is returned. Returns SIMSTORE_OK, the nonzero emit result, or
 * SIMSTORE_ECORRUPT (values emitted before a corrupt block was found were
 * correct; the caller should discard the partial answer). */
int sims_table_reader_search(const table_reader *r, uint64_t lo, uint64_t hi, uint64_t q,
                             unsigned k, int (*emit)(void *ctx, uint64_t value), void *ctx);

/* Whether the table stores the (permuted) value v: 1, 0, or a negative
 * error (a search of [v, v]). */
int sims_table_reader_holds(const table_reader *r, uint64_t v);

/* sims_table_reader_search() starting at *at, which sims_table_reader_prefetch(r, lo,
 * hi, at) set (or at->first = sims_table_reader_find_block(r, lo), at->have = 0). */
int sims_table_reader_search_from(const table_reader *r, const table_start *at, uint64_t lo,
                                  uint64_t hi, uint64_t q, unsigned k,
                                  int (*emit)(void *ctx, uint64_t value), void *ctx);

/* The arguments of one sims_table_reader_search_from() call. */
typedef struct table_probe {
    const table_reader *r;
    table_start at;
    uint64_t lo, hi, q;
    unsigned k;
    int (*emit)(void *ctx, uint64_t value);
    void *ctx;
} table_probe;

/* Two searches at once (of two tables, or two ranges of one), with the
 * results of sims_table_reader_search_from(x) followed by
 * sims_table_reader_search_from(y): every value emitted once by its own search,
 * in increasing order within it (x's and y's emits interleave), and x's
 * nonzero result if it has one, else y's. Their blocks are decoded in one
 * loop (sims_codec_block_decoder_run_two), so that the core overlaps the two
 * decodes (a store's query searches its tables two by two). */
int sims_table_reader_search_two(const table_probe *x, const table_probe *y);

#endif
