/* input.h: the record reader the simstore commands share: documents from plain
 * files or JSON Lines, and fingerprint lines, each record with the file name
 * and line it came from, and every malformed record reported as
 * "FILE:LINE: what" without stopping the reader. */
#ifndef SIMS_CMD_INPUT_H
#define SIMS_CMD_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef enum input_format {
    /* The whole file is one document; its id is the path as given ("-" for
     * stdin). */
    INPUT_PLAIN,
    /* One JSON object per line: {"id": string or integer, "text": string}
     * with an optional "meta" (any JSON value) and no other member. */
    INPUT_JSONL,
    /* "HEX16<TAB>id" per line, as `simstore fingerprint` prints. */
    INPUT_FP_ID,
    /* "id<TAB>HEX16" per line. */
    INPUT_ID_FP
} input_format;

/* Ids are 1..INPUT_MAX_ID_BYTES bytes of valid UTF-8 with no control
 * characters (C0, DEL, C1), so that they survive tab-separated and JSON
 * output (LMDB's key limit). */
#define INPUT_MAX_ID_BYTES 511

/* Which members of a JSON Lines record are the id, the text and the metadata.
 * Names may be nested, "a.b" (a member named "a.b" itself is tried first). */
typedef struct input_fields {
    const char *id_field;   /* "id" */
    const char *text_field; /* "text" */
    /* NULL: the member "meta", stored as it is. Otherwise a comma-separated
     * list of names: the metadata is an object holding those present, under
     * the names as written. */
    const char *meta_fields;
    int strict;       /* refuse members other than these (today's rule) */
    int id_from_line; /* a record without the id member gets "FILE:LINE" */
} input_fields;

/* The defaults above. */
void input_fields_init(input_fields *f);

/* getopt_long values and long options of the field options, for splicing
 * into the option table of a command that reads JSON Lines. */
enum {
    INPUTOPT_ID_FIELD = 0x1100,
    INPUTOPT_TEXT_FIELD,
    INPUTOPT_META_FIELDS,
    INPUTOPT_STRICT,
    INPUTOPT_ID_FROM_LINE
};
#define INPUT_FIELD_LONG_OPTIONS                                                                   \
    {"id-field", required_argument, NULL, INPUTOPT_ID_FIELD},                                      \
        {"text-field", required_argument, NULL, INPUTOPT_TEXT_FIELD},                              \
        {"meta-fields", required_argument, NULL, INPUTOPT_META_FIELDS},                            \
        {"strict", no_argument, NULL, INPUTOPT_STRICT},                                            \
    {                                                                                              \
        "id-from-line", no_argument, NULL, INPUTOPT_ID_FROM_LINE                                   \
    }
#define INPUT_FIELD_HELP                                                                           \
    "      --id-field NAME  JSON Lines: the member holding the id (default id;\n"                  \
    "                       nested names as a.b)\n"                                                \
    "      --text-field NAME\n"                                                                    \
    "                       the member holding the text (default text)\n"                          \
    "      --meta-fields A,B,...\n"                                                                \
    "                       keep these members as the metadata, an object\n"                       \
    "                       (default: the member meta, as it is)\n"                                \
    "      --id-from-line   a record without an id gets FILE:LINE as its id\n"                     \
    "      --strict         refuse records with other members (default: ignore)\n"

/* Apply field option `opt`. Returns 1 when applied, 0 when opt is not a
 * field option, 2 after printing a usage error. */
int input_fields_apply(const char *cmd, int opt, const char *arg, input_fields *f);

/* A parser of single lines of one format, for one thread at a time (each
 * worker of a parallel reader owns one). */
typedef struct input_parser input_parser;

/* One record. Pointers are borrowed from the reader and stay valid until the
 * next input_next() or input_close(). */
typedef struct input_record {
    const char *id; /* not NUL-terminated inside a line; use id_len */
    size_t id_len;
    const char *text; /* INPUT_PLAIN and INPUT_JSONL; may hold NUL bytes */
    size_t text_len;
    uint64_t fingerprint;    /* INPUT_FP_ID and INPUT_ID_FP */
    const char *meta;        /* compact JSON, NUL-terminated, or NULL */
    const char *file;        /* the name used in messages ("<stdin>" for "-") */
    unsigned long long line; /* 1-based; 0 for a whole plain file */
    int id_is_integer;       /* JSON Lines: the id was a JSON integer */
    int has_fp;              /* JSON Lines: "fp" given instead of the text */
    const uint8_t *sketch;   /* with has_fp: "sketch" (hex) decoded, or NULL */
    size_t sketch_len;
} input_record;

/* A parser for INPUT_JSONL, INPUT_FP_ID or INPUT_ID_FP lines; fields may be
 * NULL for the defaults (it is copied). Returns 0 or -1 (no memory). */
int input_parser_new(input_parser **out, input_format format, const input_fields *fields);

/* Parse one line (without its newline; a CR before it, a byte order mark and
 * blank lines are the caller's business). `file` and `line` are only used
 * for ids made by --id-from-line. Returns 1 with *rec filled (its pointers
 * borrowed from the parser until the next call), -1 for a malformed record
 * (input_parser_error() says what, without FILE:LINE), -2 for no memory. */
int input_parse_line(input_parser *p, const char *text, size_t len, const char *file,
                     unsigned long long line, input_record *rec);

/* The message of the last -1 or -2 from input_parse_line. */
const char *input_parser_error(const input_parser *p);

/* Read every JSON Lines record with jansson, never with the one-pass reader
 * (jsonscan.h) that otherwise takes the records it can: for tests, which
 * hold the two to the same records and messages. */
void input_parser_jansson_only(input_parser *p);

/* NULL allowed. */
void input_parser_free(input_parser *p);

/* Strip what is not part of a record from a line read from a file (its
 * newline and a CR before it already gone): a UTF-8 byte order mark when
 * `first_line`. Returns 1 when what remains is blank (spaces, tabs, CRs):
 * not a record. */
int input_trim_line(const char **text, size_t *len, int first_line);

typedef struct input_reader input_reader;

/* Open `path` ("-": standard input) for reading records of `format`.
 * Returns 0, or -1 with errno set (the file cannot be opened, or no memory);
 * *out is NULL then. */
int input_open(input_reader **out, input_format format, const char *path);

/* Choose the JSON Lines members (before the first input_next); fields is
 * copied. Returns 0 or -1 (no memory). */
int input_set_fields(input_reader *r, const input_fields *fields);

/* The next record:
 *   1   *rec holds a record;
 *   0   end of input;
 *  -1   a malformed record, skipped: input_error() says "FILE:LINE: what";
 *       call again for the next one;
 *  -2   the input cannot be read further (I/O error, no memory):
 *       input_error() says why; stop. */
int input_next(input_reader *r, input_record *rec);

/* The message of the last -1 or -2 from input_next(); valid until the next
 * call. */
const char *input_error(const input_reader *r);

/* The name used in messages for this input. */
const char *input_name(const input_reader *r);

/* Close and free; NULL is allowed. */
void input_close(input_reader *r);

/* Check an id against the rules above; returns NULL or what is wrong. */
const char *input_check_id(const char *id, size_t len);

/* Why a JSON member name (nested as a.b) is not valid, or NULL when it is. */
const char *input_field_name_problem(const char *name);

/* The number held by member `name` (nested as a.b; a member literally named
 * so first) of the JSON object text[0..len): 1 with *value for a JSON number
 * or a string holding a whole decimal number ("1.5e3"), 0 when the member is
 * absent or holds anything else, -1 when the text is not a JSON object. */
int input_json_number(const char *text, size_t len, const char *name, double *value);

#endif
