/* normalize.c: version 2 normalization (format/fingerprint.md, "Version 2:
 * normalization") by spans. A code point is inert when normalization leaves
 * it alone wherever it is: not ignorable, combining class 0, never the
 * second of a canonical composition, NFC(D(c)) = c. It is token-inert when it
 * is a separator that normalizes to separators which change no token
 * (full-width punctuation, U+3000). gen_unicode.py flags every other code
 * point SIMS_UC_NORM, and checks that the decomposition of an unflagged one
 * starts with a starter that composes with nothing before it, so text
 * between unflagged code points normalizes independently: only the spans of
 * flagged code points, each with the code point before it (which may
 * compose with the span), are decomposed, reordered and recomposed; all
 * other bytes are copied, and text without such spans is returned
 * untouched. Its tokens are those of the normalized text. */
#include "text/normalize.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"
#include "text/unicode.h"

#include <stdlib.h>
#include <string.h>

#define DECOMP_MAX 18 /* the longest D(c): U+FDFA */

/* Hangul syllables (Unicode 3.12, "Conjoining Jamo Behavior"). */
#define HANGUL_S 0xAC00u
#define HANGUL_L 0x1100u
#define HANGUL_V 0x1161u
#define HANGUL_T 0x11A7u
#define HANGUL_LCOUNT 19u
#define HANGUL_VCOUNT 21u
#define HANGUL_TCOUNT 28u
#define HANGUL_NCOUNT (HANGUL_VCOUNT * HANGUL_TCOUNT)
#define HANGUL_SCOUNT (HANGUL_LCOUNT * HANGUL_NCOUNT)

void sims_normalizer_init(sims_normalizer *n)
{
    memset(n, 0, sizeof *n);
}

void sims_normalizer_release(sims_normalizer *n)
{
    free(n->out);
    free(n->span);
    memset(n, 0, sizeof *n);
}

static unsigned combining_class(uint32_t cp)
{
    if (cp < 0x300)
        return 0;
    size_t lo = 0, hi = sims_uc_ccc_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((sims_uc_ccc[mid] >> 8) < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sims_uc_ccc_count && (sims_uc_ccc[lo] >> 8) == cp ? sims_uc_ccc[lo] & 255 : 0;
}

static const sims_uc_decomp *decomposition(uint32_t cp)
{
    size_t lo = 0, hi = sims_uc_decomp_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sims_uc_decomps[mid].cp < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sims_uc_decomp_count && sims_uc_decomps[lo].cp == cp ? &sims_uc_decomps[lo] : NULL;
}

/* D(cp) into out (room for DECOMP_MAX); returns its length. Ignorables
 * give nothing. */
static size_t decompose(uint32_t cp, uint32_t *out)
{
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    if (cp - HANGUL_S < HANGUL_SCOUNT) {
        uint32_t s = cp - HANGUL_S;
        out[0] = HANGUL_L + s / HANGUL_NCOUNT;
        out[1] = HANGUL_V + s % HANGUL_NCOUNT / HANGUL_TCOUNT;
        if (s % HANGUL_TCOUNT == 0)
            return 2;
        out[2] = HANGUL_T + s % HANGUL_TCOUNT;
        return 3;
    }
    if ((sims_uc_class(cp) & SIMS_UC_KIND) == SIMS_UC_IGNORE)
        return 0;
    const sims_uc_decomp *d = decomposition(cp);
    if (!d) {
        out[0] = cp;
        return 1;
    }
    size_t len = d->at & 31;
    memcpy(out, sims_uc_decomp_seq + (d->at >> 5), len * sizeof *out);
    return len;
}

/* The canonical composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a - HANGUL_L < HANGUL_LCOUNT && b - HANGUL_V < HANGUL_VCOUNT)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VCOUNT + (b - HANGUL_V)) * HANGUL_TCOUNT;
    if (a - HANGUL_S < HANGUL_SCOUNT && (a - HANGUL_S) % HANGUL_TCOUNT == 0 &&
        b - (HANGUL_T + 1) < HANGUL_TCOUNT - 1)
        return a + (b - HANGUL_T);
    uint64_t key = (uint64_t)a << 21 | b;
    size_t lo = 0, hi = sims_uc_composition_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sims_uc_compositions[mid].pair < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sims_uc_composition_count && sims_uc_compositions[lo].pair == key
               ? sims_uc_compositions[lo].composite
               : 0;
}

void sims_normalize_codepoints(const uint32_t *cp, size_t count, uint32_t *out, size_t *out_count)
{
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        n += decompose(cp[i], out + n);
    /* Canonical ordering: each run of non-starters sorted, stably, by
     * combining class. */
    for (size_t i = 1; i < n; i++) {
        uint32_t x = out[i];
        unsigned c = combining_class(x);
        if (c == 0)
            continue;
        size_t j = i;
        while (j > 0 && combining_class(out[j - 1]) > c) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = x;
    }
    /* Canonical composition (Unicode 3.11, D117): each character joins the
     * last starter when not blocked from it. */
    if (n == 0) {
        *out_count = 0;
        return;
    }
    size_t starter = 0, kept = 1;
    unsigned last = combining_class(out[0]) ? 256 : 0;
    for (size_t i = 1; i < n; i++) {
        uint32_t ch = out[i];
        unsigned c = combining_class(ch);
        uint32_t composite = last < c || last == 0 ? compose(out[starter], ch) : 0;
        if (composite) {
            out[starter] = composite;
            continue;
        }
        if (c == 0)
            starter = kept;
        last = c;
        out[kept++] = ch;
    }
    *out_count = kept;
}

/* Append text[from..start) as it is, then the normalization of the
 * well-formed span [start, stop). */
static int rewrite(sims_normalizer *n, size_t *used, const uint8_t *from, const uint8_t *start,
                   const uint8_t *stop)
{
    size_t plain = (size_t)(start - from);
    if (sims_grow_bytes(&n->out, &n->out_cap, *used, plain, 4096))
        return SIMSTORE_ENOMEM;
    if (plain) /* n->out is NULL until the first bytes go in */
        memcpy(n->out + *used, from, plain);
    *used += plain;
    /* At most one code point per byte in, DECOMP_MAX out for each. */
    size_t bytes = (size_t)(stop - start);
    if (bytes > SIZE_MAX / sizeof(uint32_t) / (DECOMP_MAX + 1))
        return SIMSTORE_ENOMEM;
    size_t need = bytes * (DECOMP_MAX + 1);
    if (need > n->span_cap) {
        uint32_t *grown = realloc(n->span, need * sizeof *grown);
        if (!grown)
            return SIMSTORE_ENOMEM;
        n->span = grown;
        n->span_cap = need;
    }
    size_t count = 0;
    for (const uint8_t *p = start; p < stop;) {
        size_t k;
        n->span[count++] = sims_utf8_decode(p, stop, &k);
        p += k;
    }
    uint32_t *normal = n->span + count;
    size_t normal_count;
    sims_normalize_codepoints(n->span, count, normal, &normal_count);
    if (sims_grow_bytes(&n->out, &n->out_cap, *used, normal_count * 4, 4096))
        return SIMSTORE_ENOMEM;
    for (size_t i = 0; i < normal_count; i++)
        *used += sims_utf8_encode(normal[i], n->out + *used);
    return 0;
}

int sims_normalize(sims_normalizer *n, const uint8_t *text, size_t len, const uint8_t **out,
                   size_t *out_len)
{
    const uint8_t *p = text, *end = text + len;
    const uint8_t *copied = text; /* bytes before it are in n->out */
    const uint8_t *prev = NULL;   /* the previous code point, when well-formed */
    size_t used = 0;
    int rewritten = 0;
    *out = text;
    *out_len = len;
    while (p < end) {
        if (*p < 0x80) {
            /* ASCII is inert here: its letters' case is the tokenizer's. */
            while (end - p >= 8 && (le_load64(p) & 0x8080808080808080ULL) == 0)
                p += 8;
            while (p < end && *p < 0x80)
                p++;
            prev = p - 1;
            continue;
        }
        size_t k;
        uint32_t cp = sims_utf8_decode(p, end, &k);
        if (cp == SIMS_UTF8_INVALID || !(sims_uc_class(cp) & SIMS_UC_NORM)) {
            prev = cp == SIMS_UTF8_INVALID ? NULL : p;
            p += k;
            continue;
        }
        /* A span: the code point before (it may compose with what follows)
         * to the next inert code point, ASCII or ill-formed byte. */
        const uint8_t *start = prev ? prev : p, *stop = p + k;
        while (stop < end && *stop >= 0x80) {
            uint32_t next = sims_utf8_decode(stop, end, &k);
            if (next == SIMS_UTF8_INVALID || !(sims_uc_class(next) & SIMS_UC_NORM))
                break;
            stop += k;
        }
        if (rewrite(n, &used, copied, start, stop) != 0)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory while normalizing");
        rewritten = 1;
        copied = p = stop;
        prev = NULL;
    }
    if (!rewritten)
        return 0;
    size_t rest = (size_t)(end - copied);
    if (sims_grow_bytes(&n->out, &n->out_cap, used, rest, 4096))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory while normalizing");
    if (rest)
        memcpy(n->out + used, copied, rest);
    *out = n->out;
    *out_len = used + rest;
    return 0;
}
