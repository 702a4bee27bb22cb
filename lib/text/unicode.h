/* unicode.h: UTF-8 decoding with maximal-subpart replacement, and the code
 * point classes and case folding of format/fingerprint.md (tables generated
 * by gen_unicode.py into unicode_data.c). */
#ifndef SIMS_TEXT_UNICODE_H
#define SIMS_TEXT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* A code point's class: the low three bits are the kind, then flags. */
enum {
    SIMS_UC_SEP = 0,    /* separates tokens                               */
    SIMS_UC_WORD = 1,   /* letter, mark or digit: part of a word           */
    SIMS_UC_HAN = 2,    /* ideograph: friso words or bigrams               */
    SIMS_UC_KANA = 3,   /* hiragana / katakana: bigrams                    */
    SIMS_UC_IGNORE = 4, /* dropped as if absent (soft hyphen, ZWJ, VS...)  */
    SIMS_UC_KIND = 7,
    SIMS_UC_SPACE = 8,  /* White_Space (a SEP): blank-line detection       */
    SIMS_UC_FOLDS = 16  /* WORD with a folding entry in sims_uc_folds      */
};

typedef struct sims_uc_fold_pair {
    uint32_t from;
    uint32_t to;
} sims_uc_fold_pair;

extern const uint16_t sims_uc_stage1[0x110000 / 256];
extern const uint8_t sims_uc_stage2[];
extern const sims_uc_fold_pair sims_uc_folds[];
extern const size_t sims_uc_fold_count;

/* Class of a scalar value (cp < 0x110000). */
static inline unsigned sims_uc_class(uint32_t cp)
{
    return sims_uc_stage2[(size_t)sims_uc_stage1[cp >> 8] * 256 + (cp & 255)];
}

/* The folded form of a code point whose class has SIMS_UC_FOLDS. */
static inline uint32_t sims_uc_fold(uint32_t cp)
{
    size_t lo = 0, hi = sims_uc_fold_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sims_uc_folds[mid].from < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < sims_uc_fold_count && sims_uc_folds[lo].from == cp) ? sims_uc_folds[lo].to : cp;
}

/* Returned by sims_utf8_decode for an ill-formed subsequence. */
#define SIMS_UTF8_INVALID 0xFFFFFFFFu

/* Decode the code point at p (p < end). On success returns it and sets *len
 * to its 1..4 bytes. On an ill-formed sequence returns SIMS_UTF8_INVALID and
 * sets *len to the length of its maximal subpart (Unicode 14.0 §3.9, "U+FFFD
 * substitution of maximal subparts"), at least 1, so a caller always makes
 * progress. Never reads at or past end. */
static inline uint32_t sims_utf8_decode(const uint8_t *p, const uint8_t *end, size_t *len)
{
    uint32_t b0 = p[0];
    if (b0 < 0x80) {
        *len = 1;
        return b0;
    }
    unsigned need;
    uint32_t lo = 0x80, hi = 0xBF, cp;
    if (b0 < 0xC2) {
        *len = 1; /* continuation byte or overlong 2-byte lead */
        return SIMS_UTF8_INVALID;
    } else if (b0 < 0xE0) {
        need = 1;
        cp = b0 & 0x1F;
    } else if (b0 < 0xF0) {
        need = 2;
        cp = b0 & 0x0F;
        if (b0 == 0xE0)
            lo = 0xA0; /* overlong */
        else if (b0 == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (b0 < 0xF5) {
        need = 3;
        cp = b0 & 0x07;
        if (b0 == 0xF0)
            lo = 0x90; /* overlong */
        else if (b0 == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        *len = 1;
        return SIMS_UTF8_INVALID;
    }
    if (end - p < 2 || p[1] < lo || p[1] > hi) {
        *len = 1;
        return SIMS_UTF8_INVALID;
    }
    cp = cp << 6 | (p[1] & 0x3Fu);
    for (unsigned k = 2; k <= need; k++) {
        if ((size_t)(end - p) <= k || (p[k] & 0xC0) != 0x80) {
            *len = k;
            return SIMS_UTF8_INVALID;
        }
        cp = cp << 6 | (p[k] & 0x3Fu);
    }
    *len = need + 1;
    return cp;
}

/* Write cp (a scalar value) as UTF-8 to out[0..3]; returns its length. */
static inline size_t sims_utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6);
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12);
        out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18);
    out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

#endif
