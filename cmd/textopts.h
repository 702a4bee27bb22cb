/* textopts.h: the text options every command that fingerprints documents
 * accepts (--shingle, --weights, --lambda, --cjk), parsed and checked one
 * way. */
#ifndef SIMS_CMD_TEXTOPTS_H
#define SIMS_CMD_TEXTOPTS_H

#include "input.h"
#include "simstore.h"

#include <getopt.h>

/* getopt_long values of the text options. */
enum {
    TEXTOPT_SHINGLE = 0x1000,
    TEXTOPT_WEIGHTS,
    TEXTOPT_LAMBDA,
    TEXTOPT_CJK
};

/* The long options, for splicing into a command's option table. */
#define TEXTOPT_LONG_OPTIONS                                        \
    {"shingle", required_argument, NULL, TEXTOPT_SHINGLE},          \
        {"weights", required_argument, NULL, TEXTOPT_WEIGHTS},      \
        {"lambda", required_argument, NULL, TEXTOPT_LAMBDA},        \
        {"cjk", required_argument, NULL, TEXTOPT_CJK}

/* The help lines describing them. */
#define TEXTOPT_HELP                                                              \
    "      --shingle W      words per feature, 1..32 (default 3)\n"                 \
    "      --weights tf|length\n"                                                   \
    "                       term frequency (default), or Yu, Hu & Zhang's\n"        \
    "                       tf + lambda*[length >= 4]\n"                            \
    "      --lambda X       lambda for --weights length, 0..1000 (default 1)\n"     \
    "      --cjk auto|friso|bigram\n"                                               \
    "                       Han text: friso words (auto: when its dictionary\n"     \
    "                       loads) or character bigrams\n"

typedef struct textopt_state {
    simstore_text_options opts;
    int lambda_given;
    int given; /* any text option was on the command line */
} textopt_state;

void textopt_init(textopt_state *t);

/* Apply option `opt` with argument `arg`. Returns 1 when opt is a text
 * option and was applied, 0 when opt is not one, or 2 after printing a usage
 * error for a bad value (the command then exits 2). */
int textopt_apply(const char *cmd, int opt, const char *arg, textopt_state *t);

/* The `default:` case of a command's getopt loop: applies a text option, or
 * reports an unknown one. Returns -1 to go on parsing, else the exit code. */
int textopt_or_bad_option(const char *cmd, int opt, char **argv, int optind_now,
                          textopt_state *t);

/* The `default:` case of a command that reads JSON Lines records: applies a
 * field option (input.h; *fields_given, when not NULL, is set to 1), else a
 * text option (t may be NULL: the command takes none), else reports an
 * unknown option. Returns -1 to go on parsing, else the exit code. */
int textopt_or_field_or_bad_option(const char *cmd, int opt, char **argv, int optind_now,
                                   textopt_state *t, input_fields *f, int *fields_given);

/* After parsing: 0, or 2 after printing a usage error for a combination
 * that makes no sense (--lambda without --weights length). */
int textopt_finish(const char *cmd, const textopt_state *t);

#endif
