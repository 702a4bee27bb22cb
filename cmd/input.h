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

/* Ids are 1..INPUT_MAX_ID_BYTES bytes with no control characters (C0, DEL,
 * C1), so that they survive tab-separated output (LMDB's key limit). */
#define INPUT_MAX_ID_BYTES 511

/* One record. Pointers are borrowed from the reader and stay valid until the
 * next input_next() or input_close(). */
typedef struct input_record {
    const char *id; /* not NUL-terminated inside a line; use id_len */
    size_t id_len;
    const char *text; /* INPUT_PLAIN and INPUT_JSONL; may hold NUL bytes */
    size_t text_len;
    uint64_t fingerprint; /* INPUT_FP_ID and INPUT_ID_FP */
    const char *meta;     /* compact JSON, NUL-terminated, or NULL */
    const char *file;     /* the name used in messages ("<stdin>" for "-") */
    unsigned long long line; /* 1-based; 0 for a whole plain file */
} input_record;

typedef struct input_reader input_reader;

/* Open `path` ("-": standard input) for reading records of `format`.
 * Returns 0, or -1 with errno set (the file cannot be opened, or no memory);
 * *out is NULL then. */
int input_open(input_reader **out, input_format format, const char *path);

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

#endif
