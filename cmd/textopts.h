/* textopts.h: the text options every command that fingerprints documents
 * accepts (--fp-version, --shingle, --cjk-shingle, --weights, --lambda,
 * --cjk), parsed and checked one way, and shown one way; and how a store's
 * sketch kind is shown. */
#ifndef SIMS_CMD_TEXTOPTS_H
#define SIMS_CMD_TEXTOPTS_H

#include "input.h"
#include "simstore.h"

#include <getopt.h>
#include <stdio.h>

/* getopt_long values of the text options. */
enum {
    TEXTOPT_SHINGLE = 0x1000,
    TEXTOPT_WEIGHTS,
    TEXTOPT_LAMBDA,
    TEXTOPT_CJK,
    TEXTOPT_FP_VERSION,
    TEXTOPT_CJK_SHINGLE
};

/* The long options, for splicing into a command's option table. */
#define TEXTOPT_LONG_OPTIONS                                                                       \
    {"shingle", required_argument, NULL, TEXTOPT_SHINGLE},                                         \
        {"weights", required_argument, NULL, TEXTOPT_WEIGHTS},                                     \
        {"lambda", required_argument, NULL, TEXTOPT_LAMBDA},                                       \
        {"cjk", required_argument, NULL, TEXTOPT_CJK},                                             \
        {"fp-version", required_argument, NULL, TEXTOPT_FP_VERSION},                               \
    {                                                                                              \
        "cjk-shingle", required_argument, NULL, TEXTOPT_CJK_SHINGLE                                \
    }

/* The help lines describing them. */
#define TEXTOPT_HELP                                                                               \
    "      --fp-version 1|2|3\n"                                                                   \
    "                       fingerprint algorithm (default 3: as 2, and Han/kana\n"                \
    "                       also joined across spaces; 2: NFKC with case folding,\n"               \
    "                       Han/kana joined across line breaks, CJK shingles of\n"                 \
    "                       their own width; 1: as before)\n"                                      \
    "      --shingle W      words per feature, 1..32 (default 3)\n"                                \
    "      --cjk-shingle C  versions 2, 3: tokens per feature starting at a Han or\n"              \
    "                       kana token, 1..32 (default 2)\n"                                       \
    "      --weights tf|length|log\n"                                                              \
    "                       term frequency (default), Yu, Hu & Zhang's\n"                          \
    "                       tf + lambda*[length >= 4], or (2, 3) 1 + ln(tf)\n"                     \
    "      --lambda X       lambda for --weights length, 0..1000 (default 1)\n"                    \
    "      --cjk auto|friso|bigram\n"                                                              \
    "                       Han text: character bigrams (default) or friso\n"                      \
    "                       words (auto: when its dictionary loads)\n"

typedef struct textopt_state {
    simstore_text_options opts;
    int lambda_given;
    int given;          /* any text option was on the command line */
    unsigned given_set; /* which: bit (opt - TEXTOPT_SHINGLE) */
} textopt_state;

void textopt_init(textopt_state *t);

/* Apply option `opt` with argument `arg`. Returns 1 when opt is a text
 * option and was applied, 0 when opt is not one, or 2 after printing a usage
 * error for a bad value (the command then exits 2). */
int textopt_apply(const char *cmd, int opt, const char *arg, textopt_state *t);

/* The `default:` case of a command's getopt loop: applies a text option, or
 * reports an unknown one. Returns -1 to go on parsing, else the exit code. */
int textopt_or_bad_option(const char *cmd, int opt, char **argv, int optind_now, textopt_state *t);

/* The `default:` case of a command that reads JSON Lines records: applies a
 * field option (input.h; *fields_given, when not NULL, is set to 1), else a
 * text option (t may be NULL: the command takes none), else reports an
 * unknown option. Returns -1 to go on parsing, else the exit code. */
int textopt_or_field_or_bad_option(const char *cmd, int opt, char **argv, int optind_now,
                                   textopt_state *t, input_fields *f, int *fields_given);

/* After parsing: 0, or 2 after printing a usage error for a combination
 * that makes no sense (--lambda without --weights length, --weights log or
 * --cjk-shingle with --fp-version 1). */
int textopt_finish(const char *cmd, const textopt_state *t);

/* The options given on the command line applied over *base (a store's
 * recorded options), so that a query changes only what it names. */
void textopt_over(const textopt_state *t, simstore_text_options *base);

/* The options as the command line that gives them, e.g. "--fp-version 3
 * --shingle 3 --cjk-shingle 2 --weights tf --cjk friso" (lambda only with
 * length weighting, the CJK shingle only with versions 2 and 3). */
void textopt_describe(const simstore_text_options *o, char *buf, size_t size);

/* A store's sketch kind in words, e.g. "minhash64 (1-bit one-permutation
 * MinHash, 512 bins: 64 bytes per document)", or "none". */
void textopt_describe_sketch(simstore_sketch_kind kind, char *buf, size_t size);

/* The sketch as members of a JSON object, without braces:
 * "sketch":"minhash64","sketch_bytes_per_document":64 ("none" and 0). */
void textopt_json_sketch(FILE *out, simstore_sketch_kind kind);

/* A store's paragraph index in words, e.g. "paragraphs of at least 8 words:
 * 29 entries, 20 distinct fingerprints; 1 segment, 20 fingerprints per
 * table (0 dead), 4416 table bytes", or "none". */
void textopt_describe_paragraphs(const simstore_stats *st, char *buf, size_t size);

/* The paragraph index as a JSON member, without braces: "paragraphs":null, or
 * "paragraphs":{"min_words":8,"entries":29,"fingerprints":20,"segments":1,
 * "table_fingerprints":20,"table_bytes":4416}. */
void textopt_json_paragraphs(FILE *out, const simstore_stats *st);

/* The options as the members of a JSON object, without braces:
 * "fp_version":2,"shingle":3,"cjk_shingle":2,"weights":"tf","lambda":null,
 * "cjk":"friso" (null where an option does not apply). */
void textopt_json(FILE *out, const simstore_text_options *o);

#endif
