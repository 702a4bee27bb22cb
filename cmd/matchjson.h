/* matchjson.h: a query's answer as `simstore query` writes it in JSON, shared with simstore-mpi.
 * A match is a JSON Lines record naming its query, or with --end-marker an
 * element of the one record of the query ({"query": ID, "matches": [...]});
 * without --json, the answer's end alone (a '.' line with --end-marker):
 * the TSV lines are the callers'. Everything goes to standard output. */
#ifndef SIMSTORE_CMD_MATCHJSON_H
#define SIMSTORE_CMD_MATCHJSON_H

#include "simstore.h"

#include <stddef.h>

/* One query's answer being written. */
typedef struct cli_answer {
    const char *qid; /* the query's id */
    size_t qid_len;
    int qid_integer; /* it was a JSON integer: written as it is */
    int json;        /* --json */
    int end_marker;  /* --end-marker */
    int listed;      /* matches written so far in the query's record */
} cli_answer;

/* The start of the answer: with json and end_marker, the query's record
 * up to its array of matches. */
void cli_answer_start(cli_answer *a);

/* One match in JSON (a->json): "id" (null without one), "fp", "distance",
 * with similarity its "similarity" (null when unknown), and its "meta"
 * when it has metadata. */
void cli_answer_json_match(cli_answer *a, const simstore_match *m, int similarity);

/* One paragraph match in JSON (a->json): "id", "shared", "of",
 * "fraction", and its "meta" when it has metadata. */
void cli_answer_json_paragraph_match(cli_answer *a, const simstore_paragraph_match *m);

/* The end of the answer: with end_marker, the end of the query's record
 * (json) or a '.' line; nothing otherwise. */
void cli_answer_end(const cli_answer *a);

#endif
