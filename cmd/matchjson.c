/* matchjson.c: a query's answer as `simstore query` writes it in JSON (matchjson.h). */
#include "matchjson.h"

#include "cli.h"

#include <stdio.h>

static void json_query_id(const cli_answer *a)
{
    if (a->qid_integer)
        fwrite(a->qid, 1, a->qid_len, stdout);
    else
        cli_json_string(stdout, a->qid, a->qid_len);
}

/* --json --end-marker: one record per query, its matches in an array. */
static int per_query(const cli_answer *a)
{
    return a->json && a->end_marker;
}

void cli_answer_start(cli_answer *a)
{
    a->listed = 0;
    if (per_query(a)) {
        fputs("{\"query\":", stdout);
        json_query_id(a);
        fputs(",\"matches\":[", stdout);
    }
}

/* The start of one JSON match up to its "id" value (null without an id):
 * an element of the per-query array, or a line of its own naming the
 * query. */
static void json_match_start(cli_answer *a, const char *id, size_t id_len, unsigned flags)
{
    if (per_query(a)) {
        fputs(a->listed++ ? ",{\"id\":" : "{\"id\":", stdout);
    } else {
        fputs("{\"query\":", stdout);
        json_query_id(a);
        fputs(",\"id\":", stdout);
    }
    if (id && (flags & SIMSTORE_MATCH_INTEGER_ID))
        fwrite(id, 1, id_len, stdout);
    else if (id)
        cli_json_string(stdout, id, id_len);
    else
        fputs("null", stdout);
}

/* A match's ',"meta":...' when it has metadata, and its end. */
static void json_match_end(const cli_answer *a, const char *meta, size_t meta_len)
{
    if (meta) {
        fputs(",\"meta\":", stdout);
        fwrite(meta, 1, meta_len, stdout);
    }
    fputs(per_query(a) ? "}" : "}\n", stdout);
}

void cli_answer_json_match(cli_answer *a, const simstore_match *m, int similarity)
{
    char hex[17], sim[32];
    cli_format_hex64(m->fp, hex);
    json_match_start(a, m->id, m->id_len, m->flags);
    printf(",\"fp\":\"%s\",\"distance\":%u", hex, m->distance);
    if (similarity) {
        cli_format_similarity(m->similarity, 1, sim);
        printf(",\"similarity\":%s", sim);
    }
    json_match_end(a, m->meta, m->meta_len);
}

void cli_answer_json_paragraph_match(cli_answer *a, const simstore_paragraph_match *m)
{
    json_match_start(a, m->id, m->id_len, m->flags);
    printf(",\"shared\":%zu,\"of\":%zu,\"fraction\":%.4f", m->shared, m->of, m->fraction);
    json_match_end(a, m->meta, m->meta_len);
}

void cli_answer_end(const cli_answer *a)
{
    if (per_query(a))
        fputs("]}\n", stdout);
    else if (a->end_marker)
        fputs(".\n", stdout);
}
