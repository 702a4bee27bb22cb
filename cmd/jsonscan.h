/* jsonscan.h: the common JSON Lines record read in one pass over its bytes,
 * without a document tree: the id, the text and the "meta" member of a line
 * that jansson would accept, with exactly the values jansson would give
 * (strings decoded, the metadata dumped compactly as json_dumpb does).
 * Anything it is not sure of, it leaves to jansson (input.c), which then
 * accepts the line with the same values or says what is wrong with it. */
#ifndef SIMS_CMD_JSONSCAN_H
#define SIMS_CMD_JSONSCAN_H

#include <stddef.h>

/* Buffers kept from line to line; zero-initialised before first use. */
typedef struct jsonscan {
    char *buf; /* the decoded strings of the current line */
    size_t cap;
    char *meta; /* the metadata, compact JSON, NUL-terminated */
    size_t meta_cap;
} jsonscan;

typedef struct jsonscan_record {
    const char *id; /* NULL when absent; not NUL-terminated */
    size_t id_len;
    int id_is_integer; /* the id was a JSON integer: id is its decimal form */
    const char *text;  /* NULL when absent; may hold NUL bytes */
    size_t text_len;
    const char *meta; /* NULL when absent; NUL-terminated */
} jsonscan_record;

/* Read one line: a JSON object (UTF-8) whose members id_name and text_name
 * (plain names, different from each other and from "meta") are a string or
 * an integer, and a string. Returns 1 with *rec filled (pointers into s,
 * valid until the next call): jansson, given the line with
 * JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, would accept it and give the
 * same id, text and compact "meta". Returns 0 when the line is anything
 * else or holds what this reader leaves to jansson (a member name with an
 * escape, integers of 19 digits or more, reals of more than 40 bytes or 2
 * exponent digits, -0 as the id or in the metadata, nesting deeper than 64,
 * an object of more than 32 members, a missing id or text, ...); -1 when
 * out of memory. */
int jsonscan_read(jsonscan *s, const char *line, size_t len, const char *id_name,
                  const char *text_name, jsonscan_record *rec);

void jsonscan_free(jsonscan *s);

#endif
