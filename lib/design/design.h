/* design.h: table designs for exact Hamming-distance-k queries over 64-bit
 * fingerprints (Manku, Jain & Das Sarma, WWW 2007): which bits lead each
 * permuted table, how a design is chosen from the store's size with a cost
 * model, the permuted probe range of a query, and the design's compact
 * binary record (format/design.md). Pure: no I/O, no allocation.
 *
 * Conventions: f = 64; bit 63 is the most significant. A table's prefix is
 * the top prefix_bits bits of the permuted value, so a table sorted
 * numerically groups equal prefixes, and the probe for query q is the range
 * [P(q) with the low 64 - p bits cleared, P(q) with them set].
 *
 * Construction (format/design.md states it byte-exactly):
 *  - Level 1 cuts the 64 bits into m1 = k + r1 contiguous blocks, block 0 at
 *    the most significant end; sizes differ by at most one bit and the
 *    first (64 mod m1) blocks get the extra bit. Every r1-subset of blocks,
 *    in lexicographic order, is a table.
 *  - Level 2 (optional) takes the 64 - p1 bits not in the level-1 choice, in
 *    their original order, cuts that sequence into m2 = k + r2 blocks by the
 *    same rule, and every r2-subset extends the prefix: C(m1,r1)*C(m2,r2)
 *    tables, level-1 subset major.
 *  - A table's prefix is the union of its chosen blocks. Its canonical
 *    permutation lists the prefix bits, then all other bits, each group in
 *    original (descending) order: a stable partition, so each contiguous
 *    run of bits moves as one unit (permute.h).
 * Exactness: k flipped bits touch at most k of the k + r1 level-1 blocks,
 * leaving r1 clean; of the level-2 blocks cut from those clean blocks'
 * complement, at most k are touched, leaving r2 clean. So some table's whole
 * prefix is untouched, and that table's probe finds the fingerprint. */
#ifndef SIMS_STORE_DESIGN_H
#define SIMS_STORE_DESIGN_H

#include "simstore.h" /* SIMSTORE_E* codes */
#include "design/permute.h"

#include <stddef.h>
#include <stdint.h>

#define SIMS_DESIGN_MAX_K 7
/* The largest table count a design may have (candidates stop here). */
#define SIMS_DESIGN_MAX_TABLES 256
/* Candidates whose shortest table prefix is longer than this are not
 * generated: N / 2^48 < 1/256 for any N up to 2^40, so more or longer
 * prefixes only add tables. (k = 0 is exempt: its one table has p = 64.) */
#define SIMS_DESIGN_USEFUL_PREFIX_BITS 48
/* At least as many candidates as any k has (k = 3 has the most, 10);
 * sizes caller arrays for sims_design_candidates. */
#define SIMS_DESIGN_MAX_CANDIDATES 64
/* Bytes of the encoded record: header, tables, checksum. */
#define SIMS_DESIGN_RECORD_HEADER_BYTES 16
#define SIMS_DESIGN_RECORD_TABLE_BYTES 66
#define SIMS_DESIGN_RECORD_TRAILER_BYTES 8
#define SIMS_DESIGN_RECORD_MAX_BYTES                                                               \
    (SIMS_DESIGN_RECORD_HEADER_BYTES + SIMS_DESIGN_MAX_TABLES * SIMS_DESIGN_RECORD_TABLE_BYTES +   \
     SIMS_DESIGN_RECORD_TRAILER_BYTES)
#define SIMS_DESIGN_RECORD_VERSION 1
/* XXH3-64 seed of the record's checksum: ASCII "SIMDESGN" read as a
 * big-endian number (the convention of format/store.md's seeds). */
#define SIMS_DESIGN_RECORD_SEED UINT64_C(0x53494D444553474E)

/* What determines a design; everything else is derived from these. */
typedef struct sims_design_params {
    uint8_t k;      /* distance the design is exact for, 0..7 */
    uint8_t levels; /* 1 or 2 */
    uint8_t r1;     /* level 1: k + r1 blocks, choose r1 (r1 >= 1) */
    uint8_t r2;     /* level 2: k + r2 blocks, choose r2; 0 when levels == 1 */
} sims_design_params;

typedef struct sims_design_table {
    uint64_t prefix_mask;   /* original bit positions the prefix covers */
    uint64_t blocks1;       /* chosen level-1 blocks (bit b = block b) */
    uint64_t blocks2;       /* chosen level-2 blocks of this table's rest; 0 at one level */
    uint8_t prefix_bits;    /* p = popcount(prefix_mask), 1..64 */
    uint8_t perm[64];       /* perm[i] = source bit landing at output bit i */
    sims_permuter permuter; /* compiled perm, both directions */
} sims_design_table;

/* A design is a plain value (no pointers, no free function): copy it,
 * compare it with sims_design_equal, keep it as long as you like. It is
 * large (about 100 KiB: room for SIMS_DESIGN_MAX_TABLES tables), so keep it
 * in a long-lived object or on the heap rather than in deep recursion. */
typedef struct sims_design {
    sims_design_params params;
    uint8_t blocks1_count;   /* m1 = k + r1 */
    uint8_t blocks2_count;   /* m2 = k + r2, 0 at one level */
    uint8_t min_prefix_bits; /* over tables */
    uint8_t max_prefix_bits;
    uint32_t n_tables;
    sims_design_table tables[SIMS_DESIGN_MAX_TABLES];
} sims_design;

/* A candidate design in summary, as the cost model sees it. */
typedef struct sims_design_candidate {
    sims_design_params params;
    uint32_t n_tables;
    uint8_t min_prefix_bits;
    uint8_t max_prefix_bits;
    /* sum over tables of 2^-prefix_bits: expected candidates per query
     * (over all tables) is N times this. */
    double range_fraction;
} sims_design_candidate;

/* The cost model: expected ns per query for a design with T tables over N
 * fingerprints, F fingerprints per block:
 *   sum over tables of [probe_ns + decode_ns * (min(F, N)/2 + N / 2^p_t)]
 *   + space_ns_per_byte * T * bits_per_fp(N) / 8
 * A probe binary-searches the in-RAM block keys (probe_ns), then decodes on
 * average half a block before the range starts plus the ~N/2^p fingerprints
 * inside it (decode_ns each). The space term prices table bytes: set it to
 * the query ns you would trade for one byte per fingerprint on disk. */
typedef struct sims_cost_model {
    double probe_ns;          /* per table probe: key search, block fetch */
    double decode_ns;         /* per fingerprint decoded and compared */
    double space_ns_per_byte; /* per byte per fingerprint of table space */
    uint32_t max_tables;      /* hard limit on T; 0 = SIMS_DESIGN_MAX_TABLES */
} sims_cost_model;

/* The default model, calibrated with bench_query on this project's machine
 * (AMD EPYC, N = 2^23): 300 ns per probe (the key search and the first,
 * cache-missing touches of a block), 3.2 ns per decoded fingerprint; no
 * space term. */
#define SIMS_COST_MODEL_DEFAULT                                                                    \
    {                                                                                              \
        300.0, 3.2, 0.0, 0                                                                         \
    }

/* ---- Building designs ----------------------------------------------------- */

/* Build the design `params` describe into *out.
 * Errors: SIMSTORE_EINVAL (message names the field) when k > 7, levels is
 * not 1 or 2, r1 == 0, k + r1 > 64, r2 is not 0 at one level or 0 at two,
 * a level-2 cut would need more blocks than the bits left, or the table
 * count exceeds SIMS_DESIGN_MAX_TABLES. *out is unspecified on failure. */
int sims_design_build(const sims_design_params *params, sims_design *out);

/* The candidate designs for distance k, by ascending table count: one-level
 * (r1 = 1, 2, ...) and two-level (r1, r2 >= 1) constructions with at most
 * SIMS_DESIGN_MAX_TABLES tables and shortest prefix at most
 * SIMS_DESIGN_USEFUL_PREFIX_BITS; of those with equal table count, the one
 * with the smallest range_fraction (ties: fewer levels, then smaller r1);
 * then any candidate whose range_fraction is not below that of every
 * candidate with fewer tables is dropped (it is worse for every N and F).
 * Writes up to `cap` candidates to out (which may be NULL when cap is 0) and
 * the number available to *n.
 * Errors: SIMSTORE_EINVAL for k > 7; SIMSTORE_EFULL when cap < *n (the
 * first cap are written). */
int sims_design_candidates(unsigned k, sims_design_candidate *out, size_t cap, size_t *n);

/* Information-theoretic bits per fingerprint of a sorted set of N, plus the
 * codec's overhead: 64 - log2(N) + 1.5 (N < 1 counts as 1). */
double sims_design_bits_per_fp(uint64_t expected_n);

/* Fingerprints per block of block_bytes: block_bytes * 8 / bits_per_fp(N). */
double sims_design_fps_per_block(uint64_t expected_n, size_t block_bytes);

/* Modelled ns per query of candidate c (NULL model = default). */
double sims_design_cost(const sims_design_candidate *c, uint64_t expected_n, double fps_per_block,
                        const sims_cost_model *model);

/* Choose the candidate of least modelled cost for distance k (ties go to
 * fewer tables), among those with at most model->max_tables tables, and
 * build it into *out. model may be NULL for SIMS_COST_MODEL_DEFAULT.
 * fps_per_block must be finite and > 0 (see sims_design_fps_per_block).
 * Errors: SIMSTORE_EINVAL for k > 7, a bad fps_per_block or model (negative
 * or non-finite constants), or a max_tables below every candidate (the
 * message lists the available counts). */
int sims_design_choose(unsigned k, uint64_t expected_n, double fps_per_block,
                       const sims_cost_model *model, sims_design *out);

/* The candidate with exactly `tables` tables for distance k (the --tables
 * override), built into *out.
 * Errors: SIMSTORE_EINVAL for k > 7, or when no candidate has that count;
 * the message then lists the available counts for k. */
int sims_design_with_tables(unsigned k, unsigned tables, sims_design *out);

/* Explain a choice: write to buf (NUL-terminated, truncated to size) one
 * line per candidate with its table count, construction, prefix bits,
 * expected candidates per query and modelled cost, marking the one
 * sims_design_choose would pick. Returns the length the full text needs
 * (as snprintf does), or a negative SIMSTORE_E* code for the same argument
 * errors as sims_design_choose. */
int sims_design_explain(unsigned k, uint64_t expected_n, double fps_per_block,
                        const sims_cost_model *model, char *buf, size_t size);

/* ---- Using designs -------------------------------------------------------- */

/* The permuted probe range of query q in table t (t < d->n_tables): every
 * stored x whose prefix bits in this table equal q's permutes into
 * [*lo, *hi]. */
static inline void sims_design_probe(const sims_design *d, unsigned t, uint64_t q, uint64_t *lo,
                                     uint64_t *hi)
{
    const sims_design_table *tab = &d->tables[t];
    uint64_t pq = sims_permute(&tab->permuter, q);
    /* The low 64 - p bits; p is 1..64, and splitting the shift keeps
     * p == 64 (an exact-match probe) defined without a branch. */
    uint64_t low = (UINT64_MAX >> 1) >> (tab->prefix_bits - 1u);
    *lo = pq & ~low;
    *hi = pq | low;
}

/* The first table whose prefix avoids every position of `flips` (a set of
 * flipped bits), or -1 when every table's prefix is touched. A design for k
 * returns >= 0 for every flips with popcount <= k. */
int sims_design_covering_table(const sims_design *d, uint64_t flips);

/* Queries beyond the design's k (format/design.md, "Beyond k"): the most
 * prefix bits of the best table that a fingerprint differing from the query
 * in at most k2 positions can have flipped, so that probing every table at
 * each prefix within that many bits of the query's finds every fingerprint
 * within k2. 0 for k2 <= the design's k; for k2 above it, an upper bound
 * from the blocks: the adversary spreads the k2 flips as evenly as it can
 * over the level-1 blocks, and then over the level-2 blocks of the best
 * level-1 choice. */
unsigned sims_design_prefix_flips(const sims_design *d, unsigned k2);

/* The masks a table of prefix_bits bits is probed with beyond k: every set
 * of at most `flips` of its prefix bits (the top prefix_bits of a permuted
 * value), the empty set first. Writes them to out[0..cap) when they fit and
 * returns how many there are (sum of C(prefix_bits, i), i <= flips). */
size_t sims_design_prefix_masks(unsigned prefix_bits, unsigned flips, uint64_t *out, size_t cap);

/* Probes per segment that answering distance k2 takes: the sum over tables
 * of the prefixes within sims_design_prefix_flips(d, k2) bits of one
 * (saturating at UINT64_MAX). The design's own k takes n_tables. */
uint64_t sims_design_probes(const sims_design *d, unsigned k2);

/* Nonzero when a and b describe the same tables (parameters, prefixes and
 * permutations; the compiled permuters follow from those). */
int sims_design_equal(const sims_design *a, const sims_design *b);

/* One line for the design, e.g. "k=3: 2 levels (4 blocks choose 1, then 4
 * choose 1), 16 tables, prefix 28 bits". snprintf conventions. */
int sims_design_describe(const sims_design *d, char *buf, size_t size);

/* One line for table t, e.g. "blocks 0 | 1: bits 63..48 47..36 (p=28)":
 * the chosen level-1 block indices, after "|" the chosen level-2 block
 * indices (numbered within this table's rest), and the original bit ranges
 * of the prefix in prefix order. snprintf conventions. */
int sims_design_describe_table(const sims_design *d, unsigned t, char *buf, size_t size);

/* ---- The record (format/design.md) ---------------------------------------- */

/* Bytes sims_design_encode writes for d: 16 + 66 * n_tables + 8. */
size_t sims_design_record_bytes(const sims_design *d);

/* Encode d into buf[0..cap). Writes *len bytes on success.
 * Errors: SIMSTORE_EFULL when cap < sims_design_record_bytes(d). */
int sims_design_encode(const sims_design *d, uint8_t *buf, size_t cap, size_t *len);

/* Decode a record of exactly len bytes into *out. The decoder bounds every
 * field, verifies the checksum, rebuilds the design from its construction
 * parameters and requires the stored tables to equal the rebuilt ones, so a
 * decoded design is always exact.
 * Errors: SIMSTORE_ECORRUPT (message names the field) for any malformed
 * record, including a wrong length or checksum; SIMSTORE_EVERSION for a
 * record with an intact checksum but a format version this build does not
 * read. *out is unspecified on failure. */
int sims_design_decode(const uint8_t *buf, size_t len, sims_design *out);

#endif
