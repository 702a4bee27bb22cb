/* reqjson.h: a request body's JSON held to bounds before it is parsed. A
 * scan of the bytes, which allocates nothing, refuses what no request may
 * be (a body that is not an object, nesting deeper than REQJSON_MAX_DEPTH,
 * a batch array longer than the batch limit) as soon as it sees it, and
 * bounds the memory jansson's parse of the body will take at its peak, so
 * that a body whose values would cost too much is refused, and the rest
 * reserve what they will take, before jansson allocates anything. (jansson
 * cannot be stopped mid-parse: its lexer does not survive a failed
 * allocation.) */
#ifndef SIMS_SERVER_REQJSON_H
#define SIMS_SERVER_REQJSON_H

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>

/* Deepest nesting of arrays and objects a request may have (the body's
 * object is level 1). */
#define REQJSON_MAX_DEPTH 64

/* A budget shared by threads: bytes taken and given back. */
typedef struct reqjson_budget {
    atomic_size_t used;
    size_t limit; /* 0: no limit */
} reqjson_budget;

/* Take bytes from b: 0, or -1 (nothing taken) when that would pass its
 * limit. Thread-safe. */
int reqjson_budget_take(reqjson_budget *b, size_t bytes);
void reqjson_budget_give(reqjson_budget *b, size_t bytes);

typedef enum reqjson_problem {
    REQJSON_FINE,          /* nothing the scan refuses (jansson may still) */
    REQJSON_NOT_OBJECT,    /* the body is not a JSON object                */
    REQJSON_TOO_DEEP,      /* nested deeper than REQJSON_MAX_DEPTH         */
    REQJSON_BATCH_TOO_LONG /* the batch array has more than max_batch      */
} reqjson_problem;

/* Scan s[0..n): the first value must be an object, no array or object may
 * lie deeper than REQJSON_MAX_DEPTH, and the array that is the value of
 * the object's member named batch_key (NULL: none) may have at most
 * max_batch elements. Stops at the first problem, at the end of the
 * object, or at a syntax error (left to jansson to report). With
 * REQJSON_FINE, *parse_bytes receives a bound on the bytes reqjson_load()
 * of s[0..n) holds at its peak (malloc's usable sizes and headers; for a
 * body jansson refuses, the bytes it holds until it stops). */
reqjson_problem reqjson_scan(const char *s, size_t n, const char *batch_key, size_t max_batch,
                             size_t *parse_bytes);

/* The parse the scan bounds: json_loadb(s, n, JSON_REJECT_DUPLICATES). */
json_t *reqjson_load(const char *s, size_t n, json_error_t *err);

#endif
