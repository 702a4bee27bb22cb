/* keys.h: a table's block keys in Elias-Fano form (format/table.md, "Block
 * keys"), as the version-2 index stores them and as every reader keeps them
 * in RAM: key i is (high_i << low_bits) | low_i, the low parts packed
 * low_bits each, the high parts as a bit vector with a 1 at position
 * high_i + i. Sampled positions of every 64th one and zero make a key and
 * the search for the first key >= v constant time. Internal to lib/table;
 * pure (no I/O). */
#ifndef SIMS_TABLE_KEYS_H
#define SIMS_TABLE_KEYS_H

#include <stddef.h>
#include <stdint.h>

typedef struct table_keys {
    uint64_t n;           /* number of keys */
    unsigned low_bits;    /* 0..63 */
    uint64_t *low;        /* low_words + 1 (a zero word for unaligned reads) */
    uint64_t low_words;   /* ceil(n * low_bits / 64) */
    uint64_t *high;       /* high_words + 1 (a zero word) */
    uint64_t high_words;  /* the bit vector's words: its last holds the last 1 */
    uint64_t *ones;       /* ones[s]: position of the (64 s)-th 1 */
    uint64_t *zeros;      /* zeros[s]: position of the (64 s)-th 0 before the last 1 */
    uint64_t first, last; /* key 0 and key n-1 (when n > 0) */
} table_keys;

/* The low_bits (0..63) that make n strictly increasing keys whose largest
 * is max_key smallest: n * low_bits + n + (max_key >> low_bits), the
 * smallest such on ties. */
unsigned table_keys_choose_low_bits(uint64_t n, uint64_t max_key);

/* Words of the packed low parts and of the high bit vector for these keys. */
uint64_t table_keys_low_words(uint64_t n, unsigned low_bits);
uint64_t table_keys_high_words(uint64_t n, unsigned low_bits, uint64_t max_key);

/* Allocate k's arrays for n keys (zeroed): low_words and high_words as
 * given. Returns SIMSTORE_OK or SIMSTORE_ENOMEM (k then owns what it got:
 * table_keys_free it). */
int table_keys_alloc(table_keys *k, uint64_t n, unsigned low_bits, uint64_t high_words);

/* Code keys[0..n) (strictly increasing) into k, whose arrays
 * table_keys_alloc made for these keys, then table_keys_index it. */
int table_keys_encode(table_keys *k, const uint64_t *keys);

/* Check k's words (filled from a file) and build the samples: exactly n
 * ones, the last one in the last word, no bits after the n low parts,
 * strictly increasing keys that fit 64 bits. Returns SIMSTORE_OK,
 * SIMSTORE_ECORRUPT (message without location: the caller adds it) or
 * SIMSTORE_ENOMEM. */
int table_keys_index(table_keys *k);

void table_keys_free(table_keys *k);

/* Bytes of RAM k holds. */
uint64_t table_keys_ram_bytes(const table_keys *k);

/* Key i < n. */
uint64_t table_keys_get(const table_keys *k, uint64_t i);

/* Keys i - 1 (0 when i = 0) and i < n, for about the cost of one. */
void table_keys_pair(const table_keys *k, uint64_t i, uint64_t *prev, uint64_t *key);

/* The first i with key i >= v, n when there is none. */
uint64_t table_keys_find(const table_keys *k, uint64_t v);

/* As table_keys_find, and when i < n also key i - 1 (0 when i = 0) and key
 * i, read on the way. */
uint64_t table_keys_find_keys(const table_keys *k, uint64_t v, uint64_t *prev, uint64_t *key);

/* Hint that table_keys_pair(k, i) follows: prefetch the sample it reads. */
void table_keys_prefetch_pair(const table_keys *k, uint64_t i);

/* Sequential walk over the keys: init at key 0, then next() returns the
 * keys in order (call it at most n times). */
typedef struct table_keys_walk {
    const table_keys *k;
    uint64_t i, word, bits;
} table_keys_walk;

void table_keys_walk_init(table_keys_walk *w, const table_keys *k);
uint64_t table_keys_walk_next(table_keys_walk *w);

/* Bit field helpers over u64 word arrays, LSB-first (the index's bit
 * order): the n <= 64 bits at bit pos; words must have a word after the
 * last one the field touches (or the field ends inside the last word). */
static inline uint64_t table_bits_get(const uint64_t *words, uint64_t pos, unsigned n)
{
    if (n == 0)
        return 0;
    uint64_t w = pos >> 6;
    unsigned off = (unsigned)(pos & 63);
    uint64_t v = words[w] >> off;
    if (off + n > 64)
        v |= words[w + 1] << (64 - off);
    return n == 64 ? v : v & (((uint64_t)1 << n) - 1);
}

/* Set the n bits at pos to v (the bits there are zero). */
static inline void table_bits_put(uint64_t *words, uint64_t pos, unsigned n, uint64_t v)
{
    if (n == 0)
        return;
    if (n < 64)
        v &= ((uint64_t)1 << n) - 1;
    uint64_t w = pos >> 6;
    unsigned off = (unsigned)(pos & 63);
    words[w] |= v << off;
    if (off + n > 64)
        words[w + 1] |= v >> (64 - off);
}

#endif
