/* huffman.c: length-limited code lengths by package-merge, the reader's
 * validity rule for stored lengths, canonical code assignment and the
 * encode/decode tables. */
#include "codec/huffman.h"

#include "codec/bitio.h"
#include "common/error.h"

#include <string.h>

/* ---- package-merge -------------------------------------------------------- */

/* A coin or package: its weight and how many coins of each symbol it holds.
 * With at most 64 symbols and 11 levels a list never exceeds 2 * 64 entries
 * and a symbol count never exceeds 11, so everything fits on the stack. */
typedef struct pm_node {
    uint64_t weight;
    uint8_t coins[CODEC_SYMBOLS];
} pm_node;

#define PM_LIST_MAX (2 * CODEC_SYMBOLS)

/* Weights are scaled so the largest is at most 2^44: a package at any level
 * sums at most 2 * 64 * 11 weights, far below 2^64. */
#define PM_WEIGHT_BITS 44

int sims_codec_huff_lengths(const uint64_t hist[CODEC_SYMBOLS], unsigned max_bits,
                            uint8_t lengths[CODEC_SYMBOLS])
{
    memset(lengths, 0, CODEC_SYMBOLS);
    if (max_bits < 1 || max_bits > CODEC_HUFF_MAX_BITS)
        return sims_fail(SIMSTORE_EINVAL, "Huffman length limit %u outside 1..%u", max_bits,
                         CODEC_HUFF_MAX_BITS);

    unsigned n = 0;
    uint64_t max_weight = 0;
    uint8_t order[CODEC_SYMBOLS];
    for (unsigned s = 0; s < CODEC_SYMBOLS; s++) {
        if (hist[s]) {
            order[n++] = (uint8_t)s;
            if (hist[s] > max_weight)
                max_weight = hist[s];
        }
    }
    if (n == 0)
        return SIMSTORE_OK;
    if (n == 1) {
        lengths[order[0]] = 1;
        return SIMSTORE_OK;
    }
    if (n > (1u << max_bits))
        return sims_fail(SIMSTORE_EINVAL, "%u symbols cannot have codes of at most %u bits", n,
                         max_bits);

    unsigned shift = 0;
    if (max_weight >> PM_WEIGHT_BITS)
        shift = bitio_msb(max_weight) + 1 - PM_WEIGHT_BITS;
    uint64_t w[CODEC_SYMBOLS];
    for (unsigned s = 0; s < CODEC_SYMBOLS; s++) {
        w[s] = hist[s] >> shift;
        if (hist[s] && !w[s])
            w[s] = 1;
    }

    /* Sort used symbols by (weight, symbol): insertion sort, n <= 64. */
    for (unsigned i = 1; i < n; i++) {
        uint8_t s = order[i];
        unsigned k = i;
        while (k > 0 && w[order[k - 1]] > w[s]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = s;
    }

    static const pm_node zero_node;
    pm_node items[CODEC_SYMBOLS];
    for (unsigned i = 0; i < n; i++) {
        items[i] = zero_node;
        items[i].weight = w[order[i]];
        items[i].coins[order[i]] = 1;
    }

    pm_node lists[2][PM_LIST_MAX];
    pm_node packages[PM_LIST_MAX / 2];
    pm_node *list = lists[0];
    unsigned list_len = n;
    memcpy(list, items, n * sizeof items[0]);

    for (unsigned level = max_bits; level >= 2; level--) {
        unsigned npk = list_len / 2;
        for (unsigned i = 0; i < npk; i++) {
            packages[i].weight = list[2 * i].weight + list[2 * i + 1].weight;
            for (unsigned s = 0; s < CODEC_SYMBOLS; s++)
                packages[i].coins[s] = (uint8_t)(list[2 * i].coins[s] + list[2 * i + 1].coins[s]);
        }
        /* Merge items and packages; on equal weight the item comes first,
         * which keeps the result deterministic. */
        pm_node *next = (list == lists[0]) ? lists[1] : lists[0];
        unsigned a = 0, b = 0, m = 0;
        while (a < n || b < npk) {
            if (b >= npk || (a < n && items[a].weight <= packages[b].weight))
                next[m++] = items[a++];
            else
                next[m++] = packages[b++];
        }
        list = next;
        list_len = m;
    }

    /* The 2n - 2 cheapest nodes at denomination 1/2 define the code: a
     * symbol's length is the number of its coins among them. */
    for (unsigned i = 0; i < 2 * n - 2; i++)
        for (unsigned s = 0; s < CODEC_SYMBOLS; s++)
            lengths[s] = (uint8_t)(lengths[s] + list[i].coins[s]);
    return SIMSTORE_OK;
}

/* ---- validity and canonical codes ------------------------------------------ */

int sims_codec_huff_check_lengths(const uint8_t lengths[CODEC_SYMBOLS])
{
    unsigned used = 0;
    uint32_t kraft = 0; /* in units of 2^-CODEC_HUFF_MAX_BITS */
    for (unsigned s = 0; s < CODEC_SYMBOLS; s++) {
        if (lengths[s] > CODEC_HUFF_MAX_BITS)
            return SIMS_CORRUPT("Huffman code length %u of symbol %u exceeds %u", lengths[s], s,
                                CODEC_HUFF_MAX_BITS);
        if (lengths[s]) {
            used++;
            kraft += 1u << (CODEC_HUFF_MAX_BITS - lengths[s]);
        }
    }
    if (used == 1 && kraft != CODEC_HUFF_TABLE_SIZE / 2)
        return SIMS_CORRUPT("Huffman code with a single symbol must have length 1");
    if (used >= 2 && kraft != CODEC_HUFF_TABLE_SIZE)
        return SIMS_CORRUPT("Huffman code lengths are %s (Kraft sum %u/%u, must be exactly 1)",
                            kraft > CODEC_HUFF_TABLE_SIZE ? "over-subscribed" : "incomplete", kraft,
                            CODEC_HUFF_TABLE_SIZE);
    return SIMSTORE_OK;
}

void sims_codec_huff_canonical(const uint8_t lengths[CODEC_SYMBOLS], uint16_t codes[CODEC_SYMBOLS])
{
    unsigned count[CODEC_HUFF_MAX_BITS + 1] = {0};
    unsigned next[CODEC_HUFF_MAX_BITS + 1] = {0};
    for (unsigned s = 0; s < CODEC_SYMBOLS; s++)
        if (lengths[s] && lengths[s] <= CODEC_HUFF_MAX_BITS)
            count[lengths[s]]++;
    unsigned code = 0;
    for (unsigned len = 1; len <= CODEC_HUFF_MAX_BITS; len++) {
        code = (code + count[len - 1]) << 1;
        next[len] = code;
    }
    for (unsigned s = 0; s < CODEC_SYMBOLS; s++) {
        unsigned len = lengths[s];
        if (len && len <= CODEC_HUFF_MAX_BITS)
            codes[s] = (uint16_t)bitio_reverse(next[len]++, len);
        else
            codes[s] = 0;
    }
}

int sims_codec_huff_encoder_init(codec_huff_encoder *e, const uint8_t lengths[CODEC_SYMBOLS])
{
    int rc = sims_codec_huff_check_lengths(lengths);
    if (rc)
        return rc;
    sims_codec_huff_canonical(lengths, e->code);
    memcpy(e->len, lengths, CODEC_SYMBOLS);
    return SIMSTORE_OK;
}

int sims_codec_huff_decoder_init(codec_huff_decoder *d, const uint8_t lengths[CODEC_SYMBOLS])
{
    int rc = sims_codec_huff_check_lengths(lengths);
    if (rc)
        return rc;
    uint16_t codes[CODEC_SYMBOLS];
    sims_codec_huff_canonical(lengths, codes);
    for (unsigned i = 0; i < CODEC_HUFF_TABLE_SIZE; i++)
        d->table[i] = CODEC_ENTRY_INVALID;
    memcpy(d->lengths, lengths, CODEC_SYMBOLS);
    d->used_symbols = 0;
    d->min_len = 0;
    for (unsigned s = 0; s < CODEC_SYMBOLS; s++) {
        unsigned len = lengths[s];
        if (!len)
            continue;
        d->used_symbols++;
        if (!d->min_len || len < d->min_len)
            d->min_len = (uint8_t)len;
        codec_huff_entry e = (codec_huff_entry)(len + s) | (codec_huff_entry)len << 8 |
                             (codec_huff_entry)s << 16 | (codec_huff_entry)(63 - s) << 24;
        /* Every table index whose low `len` bits are this code decodes to s. */
        for (unsigned k = codes[s]; k < CODEC_HUFF_TABLE_SIZE; k += 1u << len)
            d->table[k] = e;
    }
    return SIMSTORE_OK;
}
