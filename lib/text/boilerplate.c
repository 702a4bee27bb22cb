/* boilerplate.c: boilerplate sets and line keys (format/fingerprint.md,
 * "Boilerplate"): the immutable set of a corpus's boilerplate line keys
 * (simstore_boilerplate), and the keyer a fingerprinter carries to key a
 * text's lines with its own tokenizer and to remove those in the set. */
#include "text/boilerplate.h"

#include "common/checksum.h"
#include "common/error.h"
#include "common/fpversion.h"
#include "common/grow.h"
#include "text/normalize.h"
#include "text/segment.h"
#include "text/tokenize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- sets ------------------------------------------------------------------ */

struct simstore_boilerplate {
    uint64_t *keys; /* strictly increasing */
    simstore_boilerplate_info info;
};

int sims_boilerplate_millionths(double fraction, uint32_t *out)
{
    double m = fraction * 1e6;
    if (!(fraction > 0 && fraction < 1) || !(m >= 0.5 && m < 999999.5))
        return sims_fail(SIMSTORE_EINVAL,
                         "boilerplate fraction %g: not above 0 and below 1 in millionths",
                         fraction);
    *out = (uint32_t)llround(m);
    return SIMSTORE_OK;
}

void simstore_boilerplate_options_init(simstore_boilerplate_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->fraction = SIMSTORE_BOILERPLATE_FRACTION_DEFAULT;
    o->min_documents = SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT;
    o->memory_bytes = (uint64_t)64 << 20;
}

/* Sort v[0..n) and drop repeats; returns the count left. */
static size_t sort_unique(uint64_t *v, size_t n)
{
    int sorted = 1;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = v[i - 1] < v[i];
    if (sorted)
        return n;
    qsort(v, n, sizeof *v, sims_cmp_u64);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || v[i] != v[w - 1])
            v[w++] = v[i];
    return w;
}

int simstore_boilerplate_new(const uint64_t *keys, size_t n, const simstore_boilerplate_info *info,
                             simstore_boilerplate **out)
{
    if (!out || (!keys && n))
        return sims_fail(SIMSTORE_EINVAL, "simstore_boilerplate_new: NULL argument");
    *out = NULL;
    uint32_t ppm = 0;
    int rc = sims_boilerplate_millionths(
        info ? info->fraction : SIMSTORE_BOILERPLATE_FRACTION_DEFAULT, &ppm);
    if (rc)
        return rc;
    simstore_boilerplate *bp = calloc(1, sizeof *bp);
    if (!bp || (n && !(bp->keys = malloc(n * sizeof *bp->keys)))) {
        free(bp);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a boilerplate set of %zu lines", n);
    }
    if (n)
        memcpy(bp->keys, keys, n * sizeof *keys);
    bp->info.lines = sort_unique(bp->keys, n);
    bp->info.fraction_millionths = ppm;
    bp->info.fraction = ppm / 1e6;
    bp->info.min_documents =
        info ? info->min_documents : SIMSTORE_BOILERPLATE_MIN_DOCUMENTS_DEFAULT;
    bp->info.documents = info ? info->documents : 0;
    *out = bp;
    return SIMSTORE_OK;
}

void simstore_boilerplate_free(simstore_boilerplate *bp)
{
    if (!bp)
        return;
    free(bp->keys);
    free(bp);
}

void simstore_boilerplate_get_info(const simstore_boilerplate *bp, simstore_boilerplate_info *out)
{
    *out = bp->info;
}

const uint64_t *simstore_boilerplate_keys(const simstore_boilerplate *bp)
{
    return bp->keys;
}

int simstore_boilerplate_contains(const simstore_boilerplate *bp, uint64_t key)
{
    if (!bp)
        return 0;
    size_t lo = sims_lower_bound_u64(bp->keys, (size_t)bp->info.lines, key);
    return lo < bp->info.lines && bp->keys[lo] == key;
}

/* ---- the keyer ------------------------------------------------------------- */

/* A kept run of the original text and where it went in the stripped one. */
typedef struct kept_piece {
    size_t from; /* offset in the original text */
    size_t at;   /* offset in the stripped text */
    size_t len;
} kept_piece;

struct sims_boiler {
    const simstore_boilerplate *set;
    sims_friso_task *friso;
    sims_tokenizer tokenizer;
    sims_normalizer normalizer;
    int version2;
    /* The tokens of the line being keyed, joined by single spaces. */
    uint8_t *line;
    size_t line_len, line_cap;
    uint64_t line_tokens;
    uint64_t *keys; /* sims_boiler_line_keys */
    size_t keys_cap;
    uint8_t *out; /* the stripped text */
    size_t out_cap;
    kept_piece *pieces;
    size_t npieces, pieces_cap;
};

int sims_boiler_new(unsigned version, simstore_cjk_mode cjk, sims_boiler **out)
{
    *out = NULL;
    sims_boiler *b = calloc(1, sizeof *b);
    if (!b)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a line keyer");
    if (cjk == SIMSTORE_CJK_FRISO) {
        int rc = sims_friso_task_new(&b->friso);
        if (rc) {
            free(b);
            return rc;
        }
    }
    /* The fingerprinter's own settings (simstore_fingerprinter_new). */
    b->version2 = sims_fp_version(version) >= 2;
    sims_tokenizer_init(&b->tokenizer, b->friso);
    b->tokenizer.join_lines = b->version2;
    b->tokenizer.join_spaces = sims_fp_version(version) >= 3;
    b->tokenizer.inert_only = b->version2;
    sims_normalizer_init(&b->normalizer);
    *out = b;
    return SIMSTORE_OK;
}

void sims_boiler_free(sims_boiler *b)
{
    if (!b)
        return;
    sims_tokenizer_release(&b->tokenizer);
    sims_normalizer_release(&b->normalizer);
    sims_friso_task_free(b->friso);
    free(b->line);
    free(b->keys);
    free(b->out);
    free(b->pieces);
    free(b);
}

void sims_boiler_set(sims_boiler *b, const simstore_boilerplate *set)
{
    b->set = set;
}

const simstore_boilerplate *sims_boiler_get(const sims_boiler *b)
{
    return b->set;
}

/* A sims_token_fn: append the token to the line's key bytes. */
static int collect_token(void *ctx, const uint8_t *bytes, size_t len, uint32_t codepoints, int cjk)
{
    (void)codepoints;
    (void)cjk;
    sims_boiler *b = (sims_boiler *)ctx;
    if (sims_grow((void **)&b->line, &b->line_cap, b->line_len + len + 1, 1, 256))
        return -1;
    if (b->line_tokens++)
        b->line[b->line_len++] = ' ';
    memcpy(b->line + b->line_len, bytes, len);
    b->line_len += len;
    return 0;
}

/* The key of line[0..len): 1 with *key, 0 when it has no tokens, or
 * SIMSTORE_ENOMEM. Tokenized exactly as the fingerprinter tokenizes a text
 * (fingerprint.c, fingerprint_range): version 2 text is tokenized as it is
 * until a code point normalization may change, then normalized and
 * tokenized again. */
static int line_key(sims_boiler *b, const uint8_t *line, size_t len, uint64_t *key, int *invalid)
{
    b->line_len = 0;
    b->line_tokens = 0;
    int rc = sims_tokenize(&b->tokenizer, line, len, collect_token, b, invalid);
    if (rc == SIMS_TOKENIZE_NOT_INERT) {
        b->line_len = 0;
        b->line_tokens = 0;
        const uint8_t *normalized;
        size_t n;
        rc = sims_normalize(&b->normalizer, line, len, &normalized, &n);
        b->tokenizer.inert_only = 0;
        if (rc == 0)
            rc = sims_tokenize(&b->tokenizer, normalized, n, collect_token, b, invalid);
        b->tokenizer.inert_only = 1;
    }
    if (rc == SIMSTORE_ENOTFOUND)
        return rc; /* friso's dictionary, loaded at the first Han run, did not load */
    if (rc)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory while keying lines");
    if (b->line_tokens == 0)
        return 0;
    *key = sims_xxh3_64(b->line, b->line_len, SIMS_LINE_KEY_SEED);
    return 1;
}

int sims_boiler_line_keys(sims_boiler *b, const uint8_t *text, size_t len, const uint64_t **keys,
                          size_t *count)
{
    *keys = b->keys;
    *count = 0;
    if (len == 0)
        return SIMSTORE_OK;
    const uint8_t *p = text, *end = text + len;
    size_t n = 0;
    int invalid = 0;
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *line_end = nl ? nl : end;
        uint64_t key = 0;
        int got = line_key(b, p, (size_t)(line_end - p), &key, &invalid);
        if (got < 0)
            return got;
        if (got) {
            if (sims_grow((void **)&b->keys, &b->keys_cap, n + 1, sizeof *b->keys, 64))
                return sims_fail(SIMSTORE_ENOMEM, "out of memory for line keys");
            b->keys[n++] = key;
        }
        p = nl ? nl + 1 : end;
    }
    *keys = b->keys;
    *count = sort_unique(b->keys, n);
    return SIMSTORE_OK;
}

static int add_piece(sims_boiler *b, size_t from, size_t len)
{
    if (len == 0)
        return SIMSTORE_OK;
    if (sims_grow((void **)&b->pieces, &b->pieces_cap, b->npieces + 1, sizeof *b->pieces, 16))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory while removing boilerplate");
    b->pieces[b->npieces].from = from;
    b->pieces[b->npieces].len = len;
    b->npieces++;
    return SIMSTORE_OK;
}

int sims_boiler_strip(sims_boiler *b, const uint8_t *text, size_t len, const uint8_t **out,
                      size_t *out_len, int *removed, int *invalid_utf8)
{
    *out = text;
    *out_len = len;
    *removed = 0;
    b->npieces = 0;
    if (!b->set || b->set->info.lines == 0 || len == 0)
        return SIMSTORE_OK;
    const uint8_t *p = text, *end = text + len;
    size_t kept_from = 0; /* the kept piece that ends at the next removed line */
    int any = 0;
    while (p < end) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *next = nl ? nl + 1 : end;
        uint64_t key = 0;
        int got = line_key(b, p, (size_t)((nl ? nl : end) - p), &key, invalid_utf8);
        if (got < 0)
            return got;
        if (got && simstore_boilerplate_contains(b->set, key)) {
            /* The line goes with its LF. */
            int rc = add_piece(b, kept_from, (size_t)(p - text) - kept_from);
            if (rc)
                return rc;
            kept_from = (size_t)(next - text);
            any = 1;
        }
        p = next;
    }
    if (!any) {
        b->npieces = 0;
        return SIMSTORE_OK;
    }
    int rc = add_piece(b, kept_from, len - kept_from);
    if (rc)
        return rc;
    size_t total = 0;
    for (size_t i = 0; i < b->npieces; i++)
        total += b->pieces[i].len;
    if (sims_grow((void **)&b->out, &b->out_cap, total ? total : 1, 1, 4096))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory while removing boilerplate");
    size_t at = 0;
    for (size_t i = 0; i < b->npieces; i++) {
        b->pieces[i].at = at;
        memcpy(b->out + at, text + b->pieces[i].from, b->pieces[i].len);
        at += b->pieces[i].len;
    }
    *out = b->out;
    *out_len = total;
    *removed = 1;
    return SIMSTORE_OK;
}

size_t sims_boiler_original_offset(const sims_boiler *b, size_t offset)
{
    /* The last piece that starts at or before offset. */
    size_t lo = 0, hi = b->npieces;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->pieces[mid].at <= offset)
            lo = mid;
        else
            hi = mid;
    }
    return b->npieces ? b->pieces[lo].from + (offset - b->pieces[lo].at) : offset;
}
