/* reqjson.c: the scan of a request body's JSON (reqjson.h). Small JSON
 * values cost jansson a hundred times their bytes ("{}" is an object with
 * a hash table), so a 16 MiB body parsed whole could take gigabytes: the
 * scan refuses the shapes no request has, and prices the rest, before
 * anything is allocated. */
#include "reqjson.h"

#include <stdint.h>
#include <string.h>

int reqjson_budget_take(reqjson_budget *b, size_t bytes)
{
    if (!b)
        return 0;
    size_t used = atomic_load_explicit(&b->used, memory_order_relaxed);
    do {
        if (b->limit && (bytes > b->limit || used > b->limit - bytes))
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(&b->used, &used, used + bytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    return 0;
}

void reqjson_budget_give(reqjson_budget *b, size_t bytes)
{
    if (b && bytes)
        atomic_fetch_sub_explicit(&b->used, bytes, memory_order_relaxed);
}

/* What jansson 2.x holds for each part of a document, malloc's headers
 * and rounding included, at the worst moment of its growth (tables and
 * hash tables double: the old one and the new one at once). Measured on
 * jansson 2.14 (64-bit glibc) as 234 bytes an empty object, 138 an empty
 * array, 43 an integer or real, 91 an empty string and 84 a member with
 * its hash table's share, each with its array slot; the figures below hold
 * a margin over those, and tests/fuzz/fuzz_serve_request.c checks that
 * every parse stays within the bound. */
#define COST_OBJECT 256u
#define COST_ARRAY 160u
#define COST_SCALAR 48u  /* a number, true, false or null */
#define COST_STRING 96u  /* and its raw bytes (its value is no longer) */
#define COST_MEMBER 128u /* and its name's raw bytes */
#define COST_ELEMENT 24u /* an array's slot, doubled, with the old table */
/* Allocations of mmap'ed size are rounded to pages; a few of them, and the
 * parser's own. */
#define COST_SLACK (256u << 10)

/* The lexer's buffer: it keeps each token's raw bytes, growing from 16
 * bytes by doubling, and keeps its largest size to the end of the parse.
 * The bytes it holds for a longest token of raw_bytes. */
static uint64_t lexer_bytes(uint64_t raw_bytes)
{
    uint64_t capacity = 16;
    while (capacity <= raw_bytes)
        capacity *= 2;
    return capacity;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A byte that ends a number or literal token. */
static int ends_token(char c)
{
    return is_space(c) || c == ',' || c == ':' || c == '[' || c == ']' || c == '{' || c == '}' ||
           c == '"';
}

reqjson_problem reqjson_scan(const char *s, size_t n, const char *batch_key, size_t max_batch,
                             size_t *parse_bytes)
{
    size_t i = 0, key_len = batch_key ? strlen(batch_key) : 0;
    uint64_t cost = COST_SLACK;
    uint64_t longest_string = 0; /* the longest string token's raw bytes */
    uint64_t longest_scalar = 0; /* ... number or literal token's */
    uint64_t arrays = 0;         /* bit d - 1: the container at depth d is an array */
    unsigned depth = 0;
    int key_next = 0;        /* in an object: the next string is a member's name */
    int member_is_batch = 0; /* depth 1: the member being read is batch_key */
    int in_batch = 0;        /* the array at depth 2 is the batch */
    size_t elements = 0;
    *parse_bytes = 0;
    while (i < n && is_space(s[i]))
        i++;
    if (i < n && s[i] != '{')
        return REQJSON_NOT_OBJECT;
    while (i < n) {
        char c = s[i];
        int in_array = depth > 0 && ((arrays >> (depth - 1)) & 1);
        if (is_space(c)) {
            i++;
            continue;
        }
        if (c == ':' || c == ',') {
            key_next = c == ',' && depth > 0 && !in_array;
            if (c == ',' && depth == 1)
                member_is_batch = 0;
            i++;
            continue;
        }
        if (c == '}' || c == ']') {
            if (depth == 0)
                break; /* unbalanced: jansson says so */
            if (depth == 2)
                in_batch = 0;
            depth--;
            key_next = 0;
            i++;
            if (depth == 0)
                break; /* the end of the body's object: jansson reads no further */
            continue;
        }
        if (c == '"') {
            size_t start = i++;
            while (i < n && s[i] != '"')
                i += s[i] == '\\' ? 2 : 1;
            size_t raw = (i < n ? i + 1 : n) - start; /* with its quotes */
            if (raw > longest_string)
                longest_string = raw;
            if (i >= n) {
                /* Unterminated: jansson reads it to the end and says so. */
                cost += COST_STRING + raw;
                break;
            }
            i++;
            if (key_next) {
                key_next = 0;
                cost += COST_MEMBER + raw;
                if (depth == 1)
                    member_is_batch = batch_key && raw - 2 == key_len &&
                                      memcmp(s + start + 1, batch_key, key_len) == 0;
                continue;
            }
            cost += COST_STRING + raw;
        } else if (c == '{' || c == '[') {
            cost += c == '{' ? COST_OBJECT : COST_ARRAY;
        } else {
            size_t start = i;
            while (i < n && !ends_token(s[i]))
                i++;
            if (i - start > longest_scalar)
                longest_scalar = i - start;
            cost += COST_SCALAR;
            key_next = 0;
        }
        /* A value began (at s[i] for a container, before i otherwise). */
        if (in_array) {
            cost += COST_ELEMENT;
            if (in_batch && depth == 2 && ++elements > max_batch)
                return REQJSON_BATCH_TOO_LONG;
        }
        if (c == '{' || c == '[') {
            if (++depth > REQJSON_MAX_DEPTH)
                return REQJSON_TOO_DEEP;
            if (c == '[')
                arrays |= (uint64_t)1 << (depth - 1);
            else
                arrays &= ~((uint64_t)1 << (depth - 1));
            key_next = c == '{';
            if (depth == 2 && c == '[' && member_is_batch)
                in_batch = 1;
            i++;
        }
    }
    /* The lexer's buffer, at the size of the longest token: a string's
     * raw bytes are in its cost already (its value is made while the
     * buffer holds them, the doubling before that takes no more); a
     * number's are not. */
    uint64_t lexer = lexer_bytes(longest_string);
    uint64_t scalar_lexer = lexer_bytes(longest_scalar) + longest_scalar;
    cost += lexer > scalar_lexer ? lexer : scalar_lexer;
    *parse_bytes = cost > SIZE_MAX ? SIZE_MAX : (size_t)cost;
    return REQJSON_FINE;
}

json_t *reqjson_load(const char *s, size_t n, json_error_t *err)
{
    return json_loadb(s, n, JSON_REJECT_DUPLICATES, err);
}
