/* textopts.c: parsing of the shared text options. */
#include "textopts.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void textopt_init(textopt_state *t)
{
    memset(t, 0, sizeof *t);
    simstore_text_options_init(&t->opts);
}

int textopt_apply(const char *cmd, int opt, const char *arg, textopt_state *t)
{
    unsigned long long v;
    char *end;
    double d;
    if (opt >= TEXTOPT_SHINGLE && opt <= TEXTOPT_CJK_SHINGLE) {
        t->given = 1;
        t->given_set |= 1u << (opt - TEXTOPT_SHINGLE);
    }
    switch (opt) {
    case TEXTOPT_FP_VERSION:
        if (cli_parse_uint(arg, 1, SIMSTORE_FP_VERSION_LATEST, &v) != 0) {
            cli_usage_error(cmd, "--fp-version: '%s' is not 1, 2 or 3", arg);
            return 2;
        }
        t->opts.version = (unsigned)v;
        return 1;
    case TEXTOPT_CJK_SHINGLE:
        if (cli_parse_uint(arg, 1, SIMSTORE_SHINGLE_MAX, &v) != 0) {
            cli_usage_error(cmd, "--cjk-shingle: '%s' is not a number in 1..%d", arg,
                            SIMSTORE_SHINGLE_MAX);
            return 2;
        }
        t->opts.cjk_shingle = (unsigned)v;
        return 1;
    case TEXTOPT_SHINGLE:
        if (cli_parse_uint(arg, 1, SIMSTORE_SHINGLE_MAX, &v) != 0) {
            cli_usage_error(cmd, "--shingle: '%s' is not a number in 1..%d", arg,
                            SIMSTORE_SHINGLE_MAX);
            return 2;
        }
        t->opts.shingle_words = (unsigned)v;
        return 1;
    case TEXTOPT_WEIGHTS:
        if (strcmp(arg, "tf") == 0)
            t->opts.weighting = SIMSTORE_WEIGHT_TF;
        else if (strcmp(arg, "length") == 0)
            t->opts.weighting = SIMSTORE_WEIGHT_LENGTH;
        else if (strcmp(arg, "log") == 0)
            t->opts.weighting = SIMSTORE_WEIGHT_LOG;
        else {
            cli_usage_error(cmd, "--weights: '%s' is not tf, length or log", arg);
            return 2;
        }
        return 1;
    case TEXTOPT_LAMBDA:
        errno = 0;
        d = strtod(arg, &end);
        if (errno || end == arg || *end || !isfinite(d) || d < 0 || d > SIMSTORE_LAMBDA_MAX) {
            cli_usage_error(cmd, "--lambda: '%s' is not a number in 0..%g", arg,
                            SIMSTORE_LAMBDA_MAX);
            return 2;
        }
        t->opts.lambda = d;
        t->lambda_given = 1;
        return 1;
    case TEXTOPT_CJK:
        if (strcmp(arg, "auto") == 0)
            t->opts.cjk = SIMSTORE_CJK_AUTO;
        else if (strcmp(arg, "friso") == 0)
            t->opts.cjk = SIMSTORE_CJK_FRISO;
        else if (strcmp(arg, "bigram") == 0)
            t->opts.cjk = SIMSTORE_CJK_BIGRAM;
        else {
            cli_usage_error(cmd, "--cjk: '%s' is not auto, friso or bigram", arg);
            return 2;
        }
        return 1;
    default: return 0;
    }
}

int textopt_or_bad_option(const char *cmd, int opt, char **argv, int optind_now, textopt_state *t)
{
    int applied = textopt_apply(cmd, opt, optarg, t);
    if (applied == 2)
        return CLI_EXIT_USAGE;
    if (applied == 0)
        return cli_bad_option(cmd, '?', argv, optind_now);
    return -1;
}

int textopt_or_field_or_bad_option(const char *cmd, int opt, char **argv, int optind_now,
                                   textopt_state *t, input_fields *f, int *fields_given)
{
    int applied = input_fields_apply(cmd, opt, optarg, f);
    if (applied == 2)
        return CLI_EXIT_USAGE;
    if (applied == 1) {
        if (fields_given)
            *fields_given = 1;
        return -1;
    }
    if (!t)
        return cli_bad_option(cmd, opt, argv, optind_now);
    return textopt_or_bad_option(cmd, opt, argv, optind_now, t);
}

int textopt_finish(const char *cmd, const textopt_state *t)
{
    if (t->lambda_given && t->opts.weighting != SIMSTORE_WEIGHT_LENGTH) {
        cli_usage_error(cmd, "--lambda applies only with --weights length");
        return 2;
    }
    if (t->opts.version == 1 && t->opts.weighting == SIMSTORE_WEIGHT_LOG) {
        cli_usage_error(cmd, "--weights log needs --fp-version 2 or 3");
        return 2;
    }
    if (t->opts.version == 1 && (t->given_set & 1u << (TEXTOPT_CJK_SHINGLE - TEXTOPT_SHINGLE))) {
        cli_usage_error(cmd, "--cjk-shingle applies only with --fp-version 2 or 3");
        return 2;
    }
    return 0;
}

static int given(const textopt_state *t, int opt)
{
    return (t->given_set >> (opt - TEXTOPT_SHINGLE)) & 1;
}

void textopt_over(const textopt_state *t, simstore_text_options *base)
{
    if (given(t, TEXTOPT_FP_VERSION)) {
        if (base->version != t->opts.version)
            base->cjk_shingle = 0; /* the new version's default, unless given */
        base->version = t->opts.version;
    }
    if (given(t, TEXTOPT_SHINGLE))
        base->shingle_words = t->opts.shingle_words;
    if (given(t, TEXTOPT_CJK_SHINGLE))
        base->cjk_shingle = t->opts.cjk_shingle;
    if (given(t, TEXTOPT_WEIGHTS))
        base->weighting = t->opts.weighting;
    if (given(t, TEXTOPT_LAMBDA))
        base->lambda = t->opts.lambda;
    if (given(t, TEXTOPT_CJK))
        base->cjk = t->opts.cjk;
}

static const char *weights_name(simstore_weighting w)
{
    return w == SIMSTORE_WEIGHT_LENGTH ? "length" : w == SIMSTORE_WEIGHT_LOG ? "log" : "tf";
}

static const char *cjk_name(simstore_cjk_mode m)
{
    return m == SIMSTORE_CJK_FRISO ? "friso" : m == SIMSTORE_CJK_BIGRAM ? "bigram" : "auto";
}

/* 0 is the current default version (simstore.h), never version 1. */
static unsigned version_of(const simstore_text_options *o)
{
    return o->version ? o->version : SIMSTORE_FP_VERSION_DEFAULT;
}

static unsigned cjk_shingle_of(const simstore_text_options *o)
{
    return o->cjk_shingle ? o->cjk_shingle : SIMSTORE_CJK_SHINGLE_DEFAULT;
}

void textopt_describe(const simstore_text_options *o, char *buf, size_t size)
{
    int n = snprintf(buf, size, "--fp-version %u --shingle %u", version_of(o), o->shingle_words);
    if (n >= 0 && (size_t)n < size && version_of(o) >= 2)
        n += snprintf(buf + n, size - (size_t)n, " --cjk-shingle %u", cjk_shingle_of(o));
    if (n >= 0 && (size_t)n < size)
        n += snprintf(buf + n, size - (size_t)n, " --weights %s", weights_name(o->weighting));
    if (n >= 0 && (size_t)n < size && o->weighting == SIMSTORE_WEIGHT_LENGTH)
        n += snprintf(buf + n, size - (size_t)n, " --lambda %g", o->lambda);
    if (n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " --cjk %s", cjk_name(o->cjk));
}

void textopt_json(FILE *out, const simstore_text_options *o)
{
    fprintf(out, "\"fp_version\":%u,\"shingle\":%u,", version_of(o), o->shingle_words);
    if (version_of(o) >= 2)
        fprintf(out, "\"cjk_shingle\":%u,", cjk_shingle_of(o));
    else
        fprintf(out, "\"cjk_shingle\":null,");
    fprintf(out, "\"weights\":\"%s\",", weights_name(o->weighting));
    if (o->weighting == SIMSTORE_WEIGHT_LENGTH)
        fprintf(out, "\"lambda\":%.17g,", o->lambda);
    else
        fprintf(out, "\"lambda\":null,");
    fprintf(out, "\"cjk\":\"%s\"", cjk_name(o->cjk));
}

void textopt_describe_sketch(simstore_sketch_kind kind, char *buf, size_t size)
{
    size_t bytes = simstore_sketch_bytes(kind);
    if (bytes == 0)
        snprintf(buf, size, "none");
    else
        snprintf(buf, size, "%s (1-bit one-permutation MinHash, %zu bins: %zu bytes per document)",
                 simstore_sketch_name(kind), bytes * 8, bytes);
}

void textopt_json_sketch(FILE *out, simstore_sketch_kind kind)
{
    const char *name = simstore_sketch_name(kind);
    fprintf(out, "\"sketch\":\"%s\",\"sketch_bytes_per_document\":%zu", name ? name : "none",
            simstore_sketch_bytes(kind));
}

void textopt_describe_paragraphs(const simstore_stats *st, char *buf, size_t size)
{
    if (!st->paragraph_min_words) {
        snprintf(buf, size, "none");
        return;
    }
    uint64_t dead = st->paragraph_table_fps > st->paragraph_fps
                        ? st->paragraph_table_fps - st->paragraph_fps
                        : 0;
    snprintf(buf, size,
             "paragraphs of at least %u words: %llu entries, %llu distinct fingerprints; %llu "
             "segment%s, %llu fingerprints per table (%llu dead%s), %llu table bytes",
             st->paragraph_min_words, (unsigned long long)st->paragraph_entries,
             (unsigned long long)st->paragraph_fps, (unsigned long long)st->paragraph_segments,
             st->paragraph_segments == 1 ? "" : "s", (unsigned long long)st->paragraph_table_fps,
             (unsigned long long)dead, st->paragraph_segments > 1 ? " or repeated" : "",
             (unsigned long long)st->paragraph_table_bytes);
}

void textopt_json_paragraphs(FILE *out, const simstore_stats *st)
{
    if (!st->paragraph_min_words) {
        fputs("\"paragraphs\":null", out);
        return;
    }
    fprintf(out,
            "\"paragraphs\":{\"min_words\":%u,\"entries\":%llu,\"fingerprints\":%llu,"
            "\"segments\":%llu,\"table_fingerprints\":%llu,\"table_bytes\":%llu}",
            st->paragraph_min_words, (unsigned long long)st->paragraph_entries,
            (unsigned long long)st->paragraph_fps, (unsigned long long)st->paragraph_segments,
            (unsigned long long)st->paragraph_table_fps,
            (unsigned long long)st->paragraph_table_bytes);
}
