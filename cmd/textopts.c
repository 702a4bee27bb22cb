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
    if (opt >= TEXTOPT_SHINGLE && opt <= TEXTOPT_CJK)
        t->given = 1;
    switch (opt) {
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
        else {
            cli_usage_error(cmd, "--weights: '%s' is not tf or length", arg);
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
    default:
        return 0;
    }
}

int textopt_or_bad_option(const char *cmd, int opt, char **argv, int optind_now,
                          textopt_state *t)
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
    return 0;
}
