/* keys.c: block keys in Elias-Fano form: coding, checking words read from a
 * file, and the constant-time key look-up and search the reader uses. */
#include "table/keys.h"

#include "common/bits.h"
#include "common/error.h"

#include <inttypes.h>
#include <stdlib.h>
#if defined(__BMI2__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif
#include <string.h>

/* Every SAMPLE-th one (and zero) has its position stored. */
#define SAMPLE_SHIFT 6u

static inline unsigned ctz64(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned c = 0;
    while (!(x & 1)) {
        x >>= 1;
        c++;
    }
    return c;
#endif
}

static inline unsigned msb64(uint64_t x) /* x != 0 */
{
#if defined(__GNUC__) || defined(__clang__)
    return 63u - (unsigned)__builtin_clzll(x);
#else
    unsigned c = 0;
    while (x >>= 1)
        c++;
    return c;
#endif
}

/* Position of the r-th (0-based) set bit of x; x has more than r set bits. */
static inline unsigned select_in_word(uint64_t x, unsigned r)
{
#if defined(__BMI2__) && (defined(__GNUC__) || defined(__clang__))
    /* One instruction where the target has it (-march=native builds). */
    return ctz64(_pdep_u64((uint64_t)1 << r, x));
#else
    /* Broadword: the bytes' popcounts, their prefix sums (byte i: bits in
     * bytes 0..i), the number of bytes whose prefix sum is <= r is the byte
     * holding the bit; then at most 7 steps inside it. */
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    uint64_t c = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    c = (c & UINT64_C(0x3333333333333333)) + ((c >> 2) & UINT64_C(0x3333333333333333));
    c = (c + (c >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    uint64_t prefix = c * ones;
    unsigned byte = sims_popcount64((((uint64_t)r * ones | highs) - prefix) & highs);
    unsigned left = r - (byte ? (unsigned)(prefix >> (8 * byte - 8)) & 0xFF : 0);
    uint64_t in = (x >> (8 * byte)) & 0xFF;
    for (; left; left--)
        in &= in - 1;
    return 8 * byte + ctz64(in);
#endif
}

unsigned table_keys_choose_low_bits(uint64_t n, uint64_t max_key)
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

uint64_t table_keys_low_words(uint64_t n, unsigned low_bits)
{
    /* n <= 2^58 (blocks are at least 256 bytes), so n * 63 fits. */
    return (n * low_bits + 63) / 64;
}

uint64_t table_keys_high_words(uint64_t n, unsigned low_bits, uint64_t max_key)
{
    return n ? ((max_key >> low_bits) + n - 1) / 64 + 1 : 0;
}

int table_keys_alloc(table_keys *k, uint64_t n, unsigned low_bits, uint64_t high_words)
{
    memset(k, 0, sizeof *k);
    k->n = n;
    k->low_bits = low_bits;
    k->low_words = table_keys_low_words(n, low_bits);
    k->high_words = high_words;
    if (k->low_words >= SIZE_MAX / 8 || high_words >= SIZE_MAX / 8)
        return sims_fail(SIMSTORE_ENOMEM, "too many block keys");
    k->low = calloc((size_t)k->low_words + 1, 8);
    k->high = calloc((size_t)high_words + 1, 8);
    if (!k->low || !k->high)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for %" PRIu64 " block keys", n);
    return SIMSTORE_OK;
}

void table_keys_free(table_keys *k)
{
    free(k->low);
    free(k->high);
    free(k->ones);
    free(k->zeros);
    memset(k, 0, sizeof *k);
}

uint64_t table_keys_ram_bytes(const table_keys *k)
{
    uint64_t samples = (k->n >> SAMPLE_SHIFT) + 1;
    uint64_t zero_samples = ((k->n ? k->last >> k->low_bits : 0) >> SAMPLE_SHIFT) + 1;
    return 8 * (k->low_words + 1 + k->high_words + 1 + samples + zero_samples);
}

int table_keys_encode(table_keys *k, const uint64_t *keys)
{
    unsigned l = k->low_bits;
    for (uint64_t i = 0; i < k->n; i++) {
        table_bits_put(k->low, i * l, l, keys[i]);
        uint64_t pos = (l ? keys[i] >> l : keys[i]) + i;
        k->high[pos >> 6] |= (uint64_t)1 << (pos & 63);
    }
    return table_keys_index(k);
}

int table_keys_index(table_keys *k)
{
    uint64_t n = k->n;
    unsigned l = k->low_bits;
    if (l > 63)
        return SIMS_CORRUPT("key low bits %u exceed 63", l);
    if (n == 0) {
        if (k->high_words)
            return SIMS_CORRUPT("%" PRIu64 " key high words for no keys", k->high_words);
        return SIMSTORE_OK;
    }
    /* No bits after the n low parts. */
    uint64_t used = n * l;
    if (used % 64 && (k->low[k->low_words - 1] >> (used % 64)) != 0)
        return SIMS_CORRUPT("nonzero bits after the last key's low part");
    if (k->high_words == 0 || k->high[k->high_words - 1] == 0)
        return SIMS_CORRUPT("the key high bits do not end in their last word");
    uint64_t ones = 0;
    for (uint64_t w = 0; w < k->high_words; w++)
        ones += sims_popcount64(k->high[w]);
    if (ones != n)
        return SIMS_CORRUPT("%" PRIu64 " keys in the key high bits, the index has %" PRIu64, ones,
                            n);
    /* The largest high part must fit 64 - l bits: the high bit vector's
     * length bounds it, so check the last key's. */
    uint64_t last_pos = (k->high_words - 1) * 64 + msb64(k->high[k->high_words - 1]);
    uint64_t last_high = last_pos - (n - 1);
    if (l && (last_high >> (64 - l)) != 0)
        return SIMS_CORRUPT("the last key's high part %" PRIu64 " exceeds %u bits", last_high,
                            64 - l);

    /* Samples; keys strictly increase (equal high parts: low parts increase). */
    uint64_t nsamples = ((n - 1) >> SAMPLE_SHIFT) + 1;
    uint64_t nzero_samples = (last_high >> SAMPLE_SHIFT) + 1;
    k->ones = calloc((size_t)nsamples, 8);
    k->zeros = calloc((size_t)nzero_samples, 8);
    if (!k->ones || !k->zeros)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for the block key samples");
    uint64_t i = 0, z = 0, prev = 0;
    for (uint64_t w = 0; w < k->high_words; w++) {
        uint64_t bits = k->high[w];
        uint64_t zbits = ~bits;
        /* Zeros below the last one only. */
        if (w == last_pos >> 6)
            zbits &= last_pos % 64 == 63 ? ~(uint64_t)0 : ((uint64_t)1 << (last_pos % 64 + 1)) - 1;
        else if (w > last_pos >> 6)
            zbits = 0;
        unsigned zc = sims_popcount64(zbits);
        uint64_t next_z =
            (z + ((uint64_t)1 << SAMPLE_SHIFT) - 1) & ~(((uint64_t)1 << SAMPLE_SHIFT) - 1);
        while (next_z < z + zc) {
            k->zeros[next_z >> SAMPLE_SHIFT] =
                w * 64 + select_in_word(zbits, (unsigned)(next_z - z));
            next_z += (uint64_t)1 << SAMPLE_SHIFT;
        }
        z += zc;
        for (; bits; bits &= bits - 1, i++) {
            uint64_t pos = w * 64 + ctz64(bits);
            if ((i & (((uint64_t)1 << SAMPLE_SHIFT) - 1)) == 0)
                k->ones[i >> SAMPLE_SHIFT] = pos;
            uint64_t key = ((pos - i) << l) | table_bits_get(k->low, i * l, l);
            if (i && key <= prev)
                return SIMS_CORRUPT("block key %" PRIu64 " (%016" PRIx64
                                    ") does not exceed the one before (%016" PRIx64 ")",
                                    i, key, prev);
            if (i == 0)
                k->first = key;
            prev = key;
        }
    }
    k->last = prev;
    return SIMSTORE_OK;
}

/* Position of the r-th one (r < n). */
static inline uint64_t select1(const table_keys *k, uint64_t r)
{
    uint64_t pos = k->ones[r >> SAMPLE_SHIFT];
    uint64_t left = r & (((uint64_t)1 << SAMPLE_SHIFT) - 1);
    uint64_t w = pos >> 6;
    uint64_t x = k->high[w] & (~(uint64_t)0 << (pos & 63));
    for (;;) {
        unsigned c = sims_popcount64(x);
        if (left < c)
            return w * 64 + select_in_word(x, (unsigned)left);
        left -= c;
        x = k->high[++w];
    }
}

/* Position of the r-th zero (r < number of zeros before the last one). */
static inline uint64_t select0(const table_keys *k, uint64_t r)
{
    uint64_t pos = k->zeros[r >> SAMPLE_SHIFT];
    uint64_t left = r & (((uint64_t)1 << SAMPLE_SHIFT) - 1);
    uint64_t w = pos >> 6;
    uint64_t x = ~k->high[w] & (~(uint64_t)0 << (pos & 63));
    for (;;) {
        unsigned c = sims_popcount64(x);
        if (left < c)
            return w * 64 + select_in_word(x, (unsigned)left);
        left -= c;
        x = ~k->high[++w];
    }
}

uint64_t table_keys_get(const table_keys *k, uint64_t i)
{
    unsigned l = k->low_bits;
    return ((select1(k, i) - i) << l) | table_bits_get(k->low, i * l, l);
}

void table_keys_pair(const table_keys *k, uint64_t i, uint64_t *prev, uint64_t *key)
{
    unsigned l = k->low_bits;
    if (i == 0) {
        *prev = 0;
        *key = table_keys_get(k, 0);
        return;
    }
    /* Key i's one is the first one after key i-1's: usually in its word. */
    uint64_t p = select1(k, i - 1);
    *prev = ((p - (i - 1)) << l) | table_bits_get(k->low, (i - 1) * l, l);
    uint64_t w = p >> 6;
    uint64_t x = (p & 63) == 63 ? 0 : k->high[w] & (~(uint64_t)1 << (p & 63));
    while (!x)
        x = k->high[++w];
    uint64_t q = w * 64 + ctz64(x);
    *key = ((q - i) << l) | table_bits_get(k->low, i * l, l);
}

uint64_t table_keys_find(const table_keys *k, uint64_t v)
{
    if (k->n == 0 || v <= k->first)
        return 0;
    if (v > k->last)
        return k->n;
    unsigned l = k->low_bits;
    uint64_t h = l ? v >> l : v;
    /* Keys with high part < h end at the h-th zero; v <= last keeps h at
     * most the last key's high part, so that zero exists. */
    uint64_t pos = h ? select0(k, h - 1) + 1 : 0;
    uint64_t i = pos - h;
    uint64_t low_v = l ? v & (((uint64_t)1 << l) - 1) : 0;
    /* Keys with high part h: compare their low parts. */
    while (i < k->n && (k->high[pos >> 6] >> (pos & 63) & 1)) {
        if (table_bits_get(k->low, i * l, l) >= low_v)
            return i;
        i++;
        pos++;
    }
    return i;
}

uint64_t table_keys_find_keys(const table_keys *k, uint64_t v, uint64_t *prev, uint64_t *key)
{
    if (k->n == 0)
        return 0;
    if (v <= k->first) {
        *prev = 0;
        *key = k->first;
        return 0;
    }
    if (v > k->last)
        return k->n;
    unsigned l = k->low_bits;
    uint64_t h = l ? v >> l : v;
    uint64_t pos = h ? select0(k, h - 1) + 1 : 0;
    uint64_t i = pos - h;
    uint64_t low_v = l ? v & (((uint64_t)1 << l) - 1) : 0;
    uint64_t before = 0;
    int have_before = 0;
    /* As table_keys_find, keeping the keys met on the way. */
    while (k->high[pos >> 6] >> (pos & 63) & 1) {
        uint64_t low = table_bits_get(k->low, i * l, l);
        uint64_t here = (h << l) | low;
        if (low >= low_v) {
            *key = here;
            goto found;
        }
        before = here;
        have_before = 1;
        i++;
        pos++;
    }
    {
        /* Key i has a higher high part: its one is the next after pos. */
        uint64_t w = pos >> 6;
        uint64_t x = k->high[w] & (~(uint64_t)0 << (pos & 63));
        while (!x)
            x = k->high[++w];
        *key = ((w * 64 + ctz64(x) - i) << l) | table_bits_get(k->low, i * l, l);
    }
found:
    if (have_before) {
        *prev = before;
    } else {
        /* Key i - 1 (i >= 1: v > first) has the last one before pos. */
        uint64_t w = (pos - 1) >> 6;
        unsigned top = (unsigned)((pos - 1) & 63);
        uint64_t x = k->high[w] & (top == 63 ? ~(uint64_t)0 : ((uint64_t)1 << (top + 1)) - 1);
        while (!x)
            x = k->high[--w];
        *prev = ((w * 64 + msb64(x) - (i - 1)) << l) | table_bits_get(k->low, (i - 1) * l, l);
    }
    return i;
}

void table_keys_prefetch_pair(const table_keys *k, uint64_t i)
{
#if defined(__GNUC__) || defined(__clang__)
    if (i > 0 && i <= k->n)
        __builtin_prefetch(&k->ones[(i - 1) >> SAMPLE_SHIFT], 0, 3);
#else
    (void)k;
    (void)i;
#endif
}

void table_keys_walk_init(table_keys_walk *w, const table_keys *k)
{
    w->k = k;
    w->i = 0;
    w->word = 0;
    w->bits = k->high_words ? k->high[0] : 0;
}

uint64_t table_keys_walk_next(table_keys_walk *w)
{
    const table_keys *k = w->k;
    while (!w->bits)
        w->bits = k->high[++w->word];
    uint64_t pos = w->word * 64 + ctz64(w->bits);
    w->bits &= w->bits - 1;
    uint64_t i = w->i++;
    unsigned l = k->low_bits;
    return ((pos - i) << l) | table_bits_get(k->low, i * l, l);
}
