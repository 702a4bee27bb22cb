/* tokenize.c: the tokenizer of format/fingerprint.md, "Tokens": one pass over
 * the bytes with an ASCII fast path; words are folded as they are copied,
 * Han and kana runs are collected and segmented when they end. */
#include "text/tokenize.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/grow.h"
#include "text/unicode.h"

#include <stdlib.h>
#include <string.h>

/* ASCII letters and digits, folded; 0 for every other byte (bytes >= 0x80
 * are never ASCII word characters, which ends the fast path). */
static const uint8_t ascii_word[256] = {
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   48,  49,  50,  51,  52,  53,  54,  55,  56,
    57,  0,   0,   0,   0,   0,   0,   0,   97,  98,  99,  100, 101, 102, 103, 104, 105, 106, 107,
    108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 0,   0,   0,   0,
    0,   0,   97,  98,  99,  100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113,
    114, 115, 116, 117, 118, 119, 120, 121, 122, 0,   0,   0,   0,   0,
};

/* Eight bytes at a time: the bytes of x that are ASCII letters or digits
 * (0x80 in their byte of *word), and x with its letters lower-cased. Each
 * test is a range check per byte, v + (0x80 - lo) and v + (0x7F - hi), on
 * seven-bit values so that no sum carries into the next byte. */
static inline uint64_t ascii_words8(uint64_t x, uint64_t *folded)
{
    const uint64_t high = 0x8080808080808080ULL, ones = 0x0101010101010101ULL;
    uint64_t v = x & ~high;
    uint64_t digit = (v + ones * (0x80 - 0x30)) & ~(v + ones * (0x7F - 0x39));
    uint64_t lower = v | ones * 0x20;
    uint64_t alpha = (lower + ones * (0x80 - 0x61)) & ~(lower + ones * (0x7F - 0x7A));
    alpha &= ~x & high;
    *folded = x | alpha >> 2;
    return (digit | alpha) & ~x & high;
}

void sims_tokenizer_init(sims_tokenizer *t, sims_friso_task *friso)
{
    memset(t, 0, sizeof *t);
    t->friso = friso;
}

void sims_tokenizer_release(sims_tokenizer *t)
{
    free(t->word);
    free(t->run);
    memset(t, 0, sizeof *t);
}

static int end_word(sims_tokenizer *t, sims_token_fn emit, void *ctx)
{
    if (t->word_len == 0)
        return 0;
    /* Only "at least 4" matters downstream, so saturating is exact. */
    uint32_t codepoints =
        t->word_codepoints > UINT32_MAX ? UINT32_MAX : (uint32_t)t->word_codepoints;
    int rc = emit(ctx, t->word, t->word_len, codepoints, 0);
    t->word_len = 0;
    t->word_codepoints = 0;
    return rc;
}

static size_t utf8_seq_len(uint8_t lead)
{
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

/* Overlapping character bigrams; a one-character run is its own token. */
static int emit_bigrams(const uint8_t *run, size_t len, uint32_t codepoints, sims_token_fn emit,
                        void *ctx)
{
    if (codepoints == 1)
        return emit(ctx, run, len, 1, 1);
    size_t first = 0, second = utf8_seq_len(run[0]);
    while (second < len) {
        size_t after = second + utf8_seq_len(run[second]);
        int rc = emit(ctx, run + first, after - first, 2, 1);
        if (rc)
            return rc;
        first = second;
        second = after;
    }
    return 0;
}

static int emit_friso(sims_tokenizer *t, sims_token_fn emit, void *ctx)
{
    size_t offset, len;
    t->run[t->run_len] = '\0';
    int rc = sims_friso_begin(t->friso, (char *)t->run, t->run_len);
    if (rc)
        return rc;
    while (sims_friso_next(t->friso, &offset, &len)) {
        uint32_t codepoints = 0;
        for (size_t i = 0; i < len; i++)
            codepoints += (t->run[offset + i] & 0xC0) != 0x80;
        rc = emit(ctx, t->run + offset, len, codepoints, 1);
        if (rc)
            return rc;
    }
    return 0;
}

static int end_run(sims_tokenizer *t, sims_token_fn emit, void *ctx)
{
    if (t->run_kind == 0)
        return 0;
    int rc;
    if (t->run_kind == SIMS_UC_HAN && t->friso)
        rc = emit_friso(t, emit, ctx);
    else
        rc = emit_bigrams(t->run, t->run_len, t->run_codepoints, emit, ctx);
    t->run_kind = 0;
    t->run_len = 0;
    t->run_codepoints = 0;
    return rc;
}

/* Joining across White_Space: p starts White_Space after a Han or kana code
 * point. When that White_Space holds exactly one line break (LF, CR, CR LF,
 * NEL, LS or PS; version 2), or at most one (spaces: version 3, `spaces`
 * set), and a Han or kana code point follows it, returns where that code
 * point starts (the White_Space is removed); otherwise NULL. */
static const uint8_t *join_across_space(const uint8_t *p, const uint8_t *end, int spaces)
{
    unsigned breaks = 0;
    while (p < end) {
        size_t n = 1;
        uint32_t cp = *p;
        if (cp >= 0x80) {
            cp = sims_utf8_decode(p, end, &n);
            if (cp == SIMS_UTF8_INVALID)
                return NULL;
        }
        unsigned cls = sims_uc_class(cp);
        if (!(cls & SIMS_UC_SPACE)) {
            unsigned kind = cls & SIMS_UC_KIND;
            return (breaks == 1 || (spaces && breaks == 0)) &&
                           (kind == SIMS_UC_HAN || kind == SIMS_UC_KANA)
                       ? p
                       : NULL;
        }
        if (cp == '\r' && end - p > 1 && p[1] == '\n')
            n = 2;
        if (cp == '\n' || cp == '\r' || cp == 0x85 || cp == 0x2028 || cp == 0x2029)
            if (++breaks > 1)
                return NULL;
        p += n;
    }
    return NULL;
}

int sims_tokenize(sims_tokenizer *t, const uint8_t *text, size_t len, sims_token_fn emit, void *ctx,
                  int *invalid_utf8)
{
    const uint8_t *p = text, *end = text + len;
    int rc = 0;
    t->word_len = 0;
    t->word_codepoints = 0;
    t->run_kind = 0;
    t->run_len = 0;
    t->run_codepoints = 0;
    while (p < end) {
        if (ascii_word[*p]) {
            if (t->run_kind && (rc = end_run(t, emit, ctx)) != 0)
                break;
            /* Copy folded letters and digits eight at a time (writing up
             * to 8 bytes past the word, inside the reserved space) until a
             * byte of another kind; finish the last few bytes one by one. */
            size_t before = t->word_len;
            for (;;) {
                if (sims_grow_bytes(&t->word, &t->word_cap, t->word_len, 8, 256)) {
                    rc = SIMSTORE_ENOMEM;
                    break;
                }
                if (end - p < 8) {
                    while (p < end && ascii_word[*p])
                        t->word[t->word_len++] = ascii_word[*p++];
                    break;
                }
                uint64_t folded, word = ascii_words8(le_load64(p), &folded);
                le_store64(t->word + t->word_len, folded);
                uint64_t other = ~word & 0x8080808080808080ULL;
                if (other == 0) {
                    t->word_len += 8;
                    p += 8;
                    continue;
                }
                size_t k = (size_t)__builtin_ctzll(other) >> 3;
                t->word_len += k;
                p += k;
                break;
            }
            if (rc)
                break;
            t->word_codepoints += t->word_len - before;
            continue;
        }
        if (*p < 0x80) {
            /* ASCII separator: spaces, punctuation, controls. */
            if (t->run_kind && t->join_lines && (sims_uc_class(*p) & SIMS_UC_SPACE)) {
                const uint8_t *joined = join_across_space(p, end, t->join_spaces);
                if (joined) {
                    p = joined;
                    continue;
                }
            }
            if ((rc = end_word(t, emit, ctx)) != 0 || (rc = end_run(t, emit, ctx)) != 0)
                break;
            p++;
            continue;
        }
        size_t n;
        uint32_t cp = sims_utf8_decode(p, end, &n);
        if (cp == SIMS_UTF8_INVALID) {
            /* U+FFFD, a separator. */
            *invalid_utf8 = 1;
            if ((rc = end_word(t, emit, ctx)) != 0 || (rc = end_run(t, emit, ctx)) != 0)
                break;
            p += n;
            continue;
        }
        unsigned cls = sims_uc_class(cp);
        if ((cls & SIMS_UC_NORM) && t->inert_only)
            return SIMS_TOKENIZE_NOT_INERT;
        switch (cls & SIMS_UC_KIND) {
        case SIMS_UC_WORD:
            if (t->run_kind && (rc = end_run(t, emit, ctx)) != 0)
                break;
            if (cls & SIMS_UC_FOLDS)
                cp = sims_uc_fold(cp);
            if (sims_grow_bytes(&t->word, &t->word_cap, t->word_len, 4, 256)) {
                rc = SIMSTORE_ENOMEM;
                break;
            }
            t->word_len += sims_utf8_encode(cp, t->word + t->word_len);
            t->word_codepoints++;
            break;
        case SIMS_UC_HAN:
        case SIMS_UC_KANA:
            if ((rc = end_word(t, emit, ctx)) != 0)
                break;
            if (t->run_kind != (cls & SIMS_UC_KIND) && (rc = end_run(t, emit, ctx)) != 0)
                break;
            if (sims_grow_bytes(&t->run, &t->run_cap, t->run_len, n + 1, 256)) {
                rc = SIMSTORE_ENOMEM;
                break;
            }
            memcpy(t->run + t->run_len, p, n);
            t->run_len += n;
            t->run_kind = cls & SIMS_UC_KIND;
            if (++t->run_codepoints == SIMS_RUN_MAX_CODEPOINTS)
                rc = end_run(t, emit, ctx);
            break;
        case SIMS_UC_IGNORE: break;
        default:
            if (t->run_kind && t->join_lines && (cls & SIMS_UC_SPACE)) {
                const uint8_t *joined = join_across_space(p, end, t->join_spaces);
                if (joined) {
                    n = (size_t)(joined - p);
                    break;
                }
            }
            if ((rc = end_word(t, emit, ctx)) == 0)
                rc = end_run(t, emit, ctx);
            break;
        }
        if (rc)
            break;
        p += n;
    }
    if (rc == 0 && (rc = end_word(t, emit, ctx)) == 0)
        rc = end_run(t, emit, ctx);
    if (rc == SIMSTORE_ENOTFOUND)
        return rc; /* friso's dictionary, loaded at the first Han run, did not load */
    if (rc)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory while tokenizing");
    return 0;
}
