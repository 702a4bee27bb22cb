/* fingerprint.c: the public fingerprinting API: options, fingerprinters
 * (tokenizer + feature scratch, reused across documents), whole documents
 * (with their sketch, when asked) and paragraphs. */
#include "simstore.h"

#include "common/error.h"
#include "text/boilerplate.h"
#include "common/fpversion.h"
#include "common/sketch.h"
#include "text/features.h"
#include "text/normalize.h"
#include "text/segment.h"
#include "text/tokenize.h"
#include "text/unicode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct simstore_fingerprinter {
    simstore_text_options opts;
    simstore_cjk_mode cjk; /* resolved: FRISO or BIGRAM */
    sims_friso_task *friso;
    sims_tokenizer tokenizer;
    sims_features features;
    sims_normalizer normalizer; /* version 2 */
    sims_boiler *boiler;        /* line keys and boilerplate removal, once used */
};

void simstore_text_options_init(simstore_text_options *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->size = sizeof *opts;
    opts->shingle_words = SIMSTORE_SHINGLE_DEFAULT;
    opts->weighting = SIMSTORE_WEIGHT_TF;
    opts->lambda = SIMSTORE_LAMBDA_DEFAULT;
    opts->cjk = SIMSTORE_CJK_BIGRAM;
    opts->version = SIMSTORE_FP_VERSION_DEFAULT;
    opts->cjk_shingle = SIMSTORE_CJK_SHINGLE_DEFAULT;
}

int simstore_cjk_segmenter(const char **description)
{
    return (int)sims_cjk_auto(description);
}

int simstore_fingerprinter_new(const simstore_text_options *opts, simstore_fingerprinter **out)
{
    simstore_text_options defaults;
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_fingerprinter_new: out is NULL");
    *out = NULL;
    if (SIMS_CHECK_OPTIONS(opts, simstore_text_options))
        return SIMSTORE_EINVAL;
    if (!opts) {
        simstore_text_options_init(&defaults);
        opts = &defaults;
    }
    if (opts->shingle_words < 1 || opts->shingle_words > SIMSTORE_SHINGLE_MAX)
        return sims_fail(SIMSTORE_EINVAL, "shingle size %u is outside 1..%u", opts->shingle_words,
                         SIMSTORE_SHINGLE_MAX);
    unsigned version = sims_fp_version(opts->version);
    if (version > SIMSTORE_FP_VERSION_LATEST)
        return sims_fail(SIMSTORE_EINVAL, "unknown fingerprint version %u (this build knows 1..%u)",
                         version, SIMSTORE_FP_VERSION_LATEST);
    unsigned cjk_shingle = version == 1        ? opts->shingle_words
                           : opts->cjk_shingle ? opts->cjk_shingle
                                               : SIMSTORE_CJK_SHINGLE_DEFAULT;
    if (cjk_shingle > SIMSTORE_SHINGLE_MAX)
        return sims_fail(SIMSTORE_EINVAL, "CJK shingle size %u is outside 1..%u", cjk_shingle,
                         SIMSTORE_SHINGLE_MAX);
    if (opts->weighting != SIMSTORE_WEIGHT_TF && opts->weighting != SIMSTORE_WEIGHT_LENGTH &&
        opts->weighting != SIMSTORE_WEIGHT_LOG)
        return sims_fail(SIMSTORE_EINVAL, "unknown weighting %d", (int)opts->weighting);
    if (opts->weighting == SIMSTORE_WEIGHT_LOG && version == 1)
        return sims_fail(SIMSTORE_EINVAL, "log weighting needs fingerprint version 2");
    if (opts->weighting == SIMSTORE_WEIGHT_LENGTH &&
        !(opts->lambda >= 0 && opts->lambda <= SIMSTORE_LAMBDA_MAX))
        return sims_fail(SIMSTORE_EINVAL, "lambda %g is outside 0..%g", opts->lambda,
                         SIMSTORE_LAMBDA_MAX);
    if (opts->cjk != SIMSTORE_CJK_AUTO && opts->cjk != SIMSTORE_CJK_FRISO &&
        opts->cjk != SIMSTORE_CJK_BIGRAM)
        return sims_fail(SIMSTORE_EINVAL, "unknown CJK mode %d", (int)opts->cjk);
    if (opts->sketch != SIMSTORE_SKETCH_NONE && !sims_sketch_kind_valid((unsigned)opts->sketch))
        return sims_fail(SIMSTORE_EINVAL, "unknown sketch kind %d", (int)opts->sketch);

    simstore_fingerprinter *fpr = calloc(1, sizeof *fpr);
    if (!fpr)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a fingerprinter");
    fpr->opts = *opts;
    fpr->opts.version = version;
    fpr->opts.cjk_shingle = version == 1 ? 0 : cjk_shingle;
    fpr->cjk = opts->cjk == SIMSTORE_CJK_AUTO ? sims_cjk_auto(NULL) : opts->cjk;
    if (fpr->cjk == SIMSTORE_CJK_FRISO) {
        int rc = sims_friso_task_new(&fpr->friso);
        if (rc) {
            free(fpr);
            return rc;
        }
    }
    sims_tokenizer_init(&fpr->tokenizer, fpr->friso);
    fpr->tokenizer.join_lines = version >= 2;
    fpr->tokenizer.join_spaces = version >= 3;
    fpr->tokenizer.inert_only = version >= 2;
    sims_normalizer_init(&fpr->normalizer);
    uint64_t lambda_q16 = (uint64_t)llround(opts->lambda * 65536.0);
    sims_features_init(&fpr->features, opts->shingle_words, cjk_shingle, (int)opts->weighting,
                       lambda_q16);
    sims_features_set_sketch(&fpr->features, sims_sketch_bin_bits((unsigned)opts->sketch));
    *out = fpr;
    return 0;
}

void simstore_fingerprinter_free(simstore_fingerprinter *fpr)
{
    if (!fpr)
        return;
    sims_tokenizer_release(&fpr->tokenizer);
    sims_features_release(&fpr->features);
    sims_normalizer_release(&fpr->normalizer);
    sims_boiler_free(fpr->boiler);
    sims_friso_task_free(fpr->friso);
    free(fpr);
}

simstore_cjk_mode simstore_fingerprinter_cjk(const simstore_fingerprinter *fpr)
{
    return fpr->cjk;
}

simstore_sketch_kind simstore_fingerprinter_sketch(const simstore_fingerprinter *fpr)
{
    return fpr->opts.sketch;
}

/* One document (or paragraph) through tokenizer and features. */
static int fingerprint_range(simstore_fingerprinter *fpr, const uint8_t *text, size_t len,
                             uint64_t *fp, uint64_t *tokens, int *invalid)
{
    /* Defined outputs on every path, the failing one included. */
    *fp = 0;
    *tokens = 0;
    sims_features_begin(&fpr->features);
    /* Version 2: most text is inert under normalization (ASCII, precomposed
     * letters, ideographs), so it is tokenized as it is, and normalized and
     * tokenized again only when the tokenizer meets a code point that is
     * not inert. */
    int rc =
        sims_tokenize(&fpr->tokenizer, text, len, sims_features_token, &fpr->features, invalid);
    if (rc == SIMS_TOKENIZE_NOT_INERT) {
        sims_features_begin(&fpr->features);
        rc = sims_normalize(&fpr->normalizer, text, len, &text, &len);
        fpr->tokenizer.inert_only = 0;
        if (rc == 0)
            rc = sims_tokenize(&fpr->tokenizer, text, len, sims_features_token, &fpr->features,
                               invalid);
        fpr->tokenizer.inert_only = 1;
    }
    if (rc == 0)
        rc = sims_features_end(&fpr->features, fp);
    if (rc == SIMSTORE_ENOTFOUND)
        return rc; /* friso's dictionary, loaded at the first Han run, did not load */
    if (rc)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory while fingerprinting");
    *tokens = fpr->features.tokens;
    return 0;
}

int simstore_fingerprint_text(simstore_fingerprinter *fpr, const char *text, size_t len,
                              uint64_t *fp, unsigned *flags)
{
    if (!fpr || !fp || (!text && len))
        return sims_fail(SIMSTORE_EINVAL, "simstore_fingerprint_text: NULL argument");
    int invalid = 0, removed = 0;
    uint64_t tokens = 0;
    *fp = 0;
    /* Boilerplate lines go first (format/fingerprint.md, "Boilerplate"). */
    const uint8_t *kept = (const uint8_t *)text;
    size_t kept_len = len;
    int rc = fpr->boiler
                 ? sims_boiler_strip(fpr->boiler, kept, len, &kept, &kept_len, &removed, &invalid)
                 : 0;
    if (rc == 0)
        rc = fingerprint_range(fpr, kept, kept_len, fp, &tokens, &invalid);
    /* Nothing left but boilerplate: the whole text, flagged. */
    int only_boilerplate = rc == 0 && removed && tokens == 0;
    if (only_boilerplate)
        rc = fingerprint_range(fpr, (const uint8_t *)text, len, fp, &tokens, &invalid);
    if (rc)
        return rc;
    if (flags)
        *flags = (tokens == 0 ? SIMSTORE_FP_EMPTY : 0u) |
                 (invalid ? SIMSTORE_FP_INVALID_UTF8 : 0u) |
                 (only_boilerplate ? SIMSTORE_FP_ONLY_BOILERPLATE : 0u);
    return 0;
}

int simstore_fingerprint_sketch(simstore_fingerprinter *fpr, const char *text, size_t len,
                                uint64_t *fp, uint8_t *sketch, unsigned *flags)
{
    if (!fpr || !fp || !sketch || (!text && len))
        return sims_fail(SIMSTORE_EINVAL, "simstore_fingerprint_sketch: NULL argument");
    size_t bytes = simstore_sketch_bytes(fpr->opts.sketch);
    if (bytes == 0)
        return sims_fail(SIMSTORE_EINVAL, "simstore_fingerprint_sketch: the fingerprinter was "
                                          "made without a sketch kind");
    int rc = simstore_fingerprint_text(fpr, text, len, fp, flags);
    if (rc) {
        memset(sketch, 0, bytes);
        return rc;
    }
    sims_features_sketch(&fpr->features, sketch);
    return 0;
}

/* A line is blank when it holds only White_Space code points. Ill-formed
 * bytes are not white space. */
static int line_is_blank(const uint8_t *p, const uint8_t *end)
{
    while (p < end) {
        if (*p < 0x80) {
            if (*p != ' ' && (*p < 0x09 || *p > 0x0D))
                return 0;
            p++;
            continue;
        }
        size_t n;
        uint32_t cp = sims_utf8_decode(p, end, &n);
        if (cp == SIMS_UTF8_INVALID || !(sims_uc_class(cp) & SIMS_UC_SPACE))
            return 0;
        p += n;
    }
    return 1;
}

int simstore_fingerprint_paragraphs(simstore_fingerprinter *fpr, const char *text, size_t len,
                                    simstore_paragraph_fn fn, void *ctx, unsigned long *count,
                                    unsigned *flags)
{
    if (count)
        *count = 0;
    if (flags)
        *flags = SIMSTORE_FP_EMPTY;
    if (!fpr || !fn || (!text && len))
        return sims_fail(SIMSTORE_EINVAL, "simstore_fingerprint_paragraphs: NULL argument");
    /* Paragraphs of the text without its boilerplate lines, reported at
     * their place in the text given. */
    int removed = 0, any_invalid = 0;
    const uint8_t *base = (const uint8_t *)text;
    if (fpr->boiler) {
        int rc = sims_boiler_strip(fpr->boiler, base, len, &base, &len, &removed, &any_invalid);
        if (rc)
            return rc;
    }
    const uint8_t *end = base + len, *p = base;
    const uint8_t *para = NULL, *para_end = NULL;
    unsigned long number = 0;
    for (;;) {
        const uint8_t *line_end = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        if (!line_end)
            line_end = end;
        int blank = p >= end || line_is_blank(p, line_end);
        if (!blank) {
            if (!para)
                para = p;
            para_end = line_end;
        }
        if ((blank || line_end >= end) && para) {
            uint64_t fp, tokens;
            int invalid = 0;
            int rc =
                fingerprint_range(fpr, para, (size_t)(para_end - para), &fp, &tokens, &invalid);
            if (rc)
                return rc;
            any_invalid |= invalid;
            if (tokens > 0) {
                simstore_paragraph info;
                info.number = ++number;
                info.offset = (size_t)(para - base);
                info.length = (size_t)(para_end - para);
                if (removed) {
                    size_t last =
                        sims_boiler_original_offset(fpr->boiler, info.offset + info.length - 1);
                    info.offset = sims_boiler_original_offset(fpr->boiler, info.offset);
                    info.length = last + 1 - info.offset;
                }
                info.fingerprint = fp;
                info.flags = invalid ? SIMSTORE_FP_INVALID_UTF8 : 0u;
                info.words = tokens;
                if (count)
                    *count = number;
                if (flags)
                    *flags = any_invalid ? SIMSTORE_FP_INVALID_UTF8 : 0u;
                rc = fn(ctx, &info);
                if (rc)
                    return rc;
            }
            para = NULL;
        }
        if (line_end >= end)
            break;
        p = line_end + 1;
    }
    if (flags)
        *flags = (number == 0 ? SIMSTORE_FP_EMPTY : 0u) |
                 (any_invalid ? SIMSTORE_FP_INVALID_UTF8 : 0u) |
                 (number == 0 && removed ? SIMSTORE_FP_ONLY_BOILERPLATE : 0u);
    return 0;
}

/* ---- boilerplate (text/boilerplate.c) -------------------------------------- */

/* The keyer, made with this fingerprinter's version and segmenter. */
static int need_boiler(simstore_fingerprinter *fpr)
{
    return fpr->boiler ? 0 : sims_boiler_new(fpr->opts.version, fpr->cjk, &fpr->boiler);
}

int simstore_fingerprinter_line_keys(simstore_fingerprinter *fpr, const char *text, size_t len,
                                     const uint64_t **keys, size_t *count)
{
    if (!fpr || !keys || !count || (!text && len))
        return sims_fail(SIMSTORE_EINVAL, "simstore_fingerprinter_line_keys: NULL argument");
    *keys = NULL;
    *count = 0;
    int rc = need_boiler(fpr);
    return rc ? rc : sims_boiler_line_keys(fpr->boiler, (const uint8_t *)text, len, keys, count);
}

int simstore_fingerprinter_set_boilerplate(simstore_fingerprinter *fpr,
                                           const simstore_boilerplate *bp)
{
    if (!fpr)
        return sims_fail(SIMSTORE_EINVAL, "simstore_fingerprinter_set_boilerplate: NULL argument");
    if (!bp && !fpr->boiler)
        return SIMSTORE_OK;
    int rc = need_boiler(fpr);
    if (rc == 0)
        sims_boiler_set(fpr->boiler, bp);
    return rc;
}

const simstore_boilerplate *simstore_fingerprinter_boilerplate(const simstore_fingerprinter *fpr)
{
    return fpr && fpr->boiler ? sims_boiler_get(fpr->boiler) : NULL;
}

typedef struct para_list {
    unsigned min_words;
    uint64_t *fps;
    size_t cap, n;
} para_list;

static int keep_paragraph(void *ctx, const simstore_paragraph *para)
{
    para_list *l = (para_list *)ctx;
    if (para->words < l->min_words)
        return 0;
    if (l->n < l->cap)
        l->fps[l->n] = para->fingerprint;
    l->n++;
    return 0;
}

int simstore_paragraph_fingerprints(simstore_fingerprinter *fpr, const char *text, size_t len,
                                    unsigned min_words, uint64_t *fps, size_t cap, size_t *n)
{
    if (!n || (!fps && cap))
        return sims_fail(SIMSTORE_EINVAL, "simstore_paragraph_fingerprints: NULL argument");
    *n = 0;
    para_list l = {min_words, fps, cap, 0};
    int rc = simstore_fingerprint_paragraphs(fpr, text, len, keep_paragraph, &l, NULL, NULL);
    if (rc)
        return rc;
    *n = l.n;
    return SIMSTORE_OK;
}
