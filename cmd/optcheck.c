/* optcheck.c: the option checks `simstore` and `simstore-mpi` share
 * (optcheck.h): values parsed and command lines refused in one place. */
#include "optcheck.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

int cli_parse_unit(const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno || !(v >= 0 && v <= 1))
        return -1;
    *out = v;
    return 0;
}

const char *cli_min_similarity_problem(const char *arg, double *out, char *why, size_t size)
{
    if (cli_parse_unit(arg, out) == 0)
        return NULL;
    snprintf(why, size, "--min-similarity takes a number from 0 to 1 (0: no filter), not '%s'",
             arg);
    return why;
}

const char *cli_bands_problem(const char *arg, int *out, char *why, size_t size)
{
    if (strcmp(arg, "on") == 0 || strcmp(arg, "off") == 0) {
        *out = arg[1] == 'n';
        return NULL;
    }
    snprintf(why, size, "--bands takes on or off, not '%s'", arg);
    return why;
}

const char *cli_bands_rule_problem(int bands, int k_given, double min_similarity, int paragraphs,
                                   int by_fingerprint)
{
    if (bands == SIMSTORE_NEAR_DEFAULT_BANDS)
        return NULL;
    if (paragraphs)
        return "--bands: judged by their paragraphs, documents have no bands: not with "
               "--paragraphs";
    if (by_fingerprint)
        return "--bands compares documents' sketches: not with --by-fingerprint";
    if (bands != 1)
        return NULL;
    if (min_similarity != SIMSTORE_NEAR_DEFAULT_SIMILARITY &&
        !(min_similarity >= SIMSTORE_NEAR_BANDS_MIN_SIMILARITY))
        return "--bands on needs a minimum similarity of at least 0.5 (the bands are derived "
               "from it): give --min-similarity 0.5 or more";
    if (min_similarity == SIMSTORE_NEAR_DEFAULT_SIMILARITY && k_given)
        return "--bands on: --k without --min-similarity is a distance alone; give "
               "--min-similarity J (0.5 or more) for the bands to derive from";
    return NULL;
}

const char *cli_min_fraction_problem(const char *arg, double *out, char *why, size_t size)
{
    if (cli_parse_unit(arg, out) == 0)
        return NULL;
    snprintf(why, size, "--min-fraction takes a number from 0 to 1, not '%s'", arg);
    return why;
}

const char *cli_build_paragraphs_problem(int paragraphs, unsigned para_min_words,
                                         int fingerprint_only)
{
    if (para_min_words && !paragraphs)
        return "--paragraph-min-words goes with --paragraphs";
    if (paragraphs && fingerprint_only)
        return "--fingerprint-only keeps no documents, so no paragraphs: not with --paragraphs";
    return NULL;
}

const char *cli_build_boilerplate_problem(int boilerplate_auto, int fingerprint_only)
{
    if (boilerplate_auto && fingerprint_only)
        return "--boilerplate auto needs texts: a fingerprint-only store has none";
    return NULL;
}

const char *cli_build_sketch_problem(int fingerprint_only, int sketch_given,
                                     simstore_sketch_kind sketch, char *why, size_t size)
{
    if (!fingerprint_only || !sketch_given || sketch == SIMSTORE_SKETCH_NONE)
        return NULL;
    snprintf(why, size,
             "--fingerprint-only keeps no documents, so no sketches: not with --sketch %s",
             simstore_sketch_name(sketch));
    return why;
}

const char *cli_query_options_problem(int meta, int json, int min_fraction_given, int paragraphs,
                                      int by_fp, int similarity, double min_similarity)
{
    if (meta && !json)
        return "--meta needs --json";
    if (min_fraction_given && !paragraphs)
        return "--min-fraction goes with --paragraphs";
    if (paragraphs && by_fp)
        return "--paragraphs needs the query's text: a fingerprint has no paragraphs (give "
               "--text, --file or JSON Lines --queries)";
    if (paragraphs && (similarity || min_similarity > 0))
        return "--similarity and --min-similarity are for documents, not with --paragraphs";
    return NULL;
}

const char *cli_query_format_problem(int texts, double min_similarity, int paragraphs)
{
    if (texts)
        return NULL;
    if (min_similarity > 0)
        return "--min-similarity needs the queries' texts: TSV and fingerprint-line queries "
               "have none (give JSON Lines)";
    if (paragraphs)
        return "--paragraphs needs the queries' texts: TSV and fingerprint-line queries have "
               "none (give JSON Lines)";
    return NULL;
}

const char *cli_pairs_options_problem(int min_fraction_given, int paragraphs, int by_fingerprint,
                                      int similarity, double min_similarity)
{
    if (min_fraction_given && !paragraphs)
        return "--min-fraction goes with --paragraphs";
    if (paragraphs && (by_fingerprint || similarity || min_similarity > 0))
        return "--paragraphs pairs documents by their paragraphs: not with --by-fingerprint, "
               "--similarity or --min-similarity";
    return NULL;
}

const char *cli_clusters_options_problem(int min_fraction_given, int paragraphs, int star,
                                         int singletons, int similarity, double min_similarity)
{
    if (min_fraction_given && !paragraphs)
        return "--min-fraction goes with --paragraphs";
    if (paragraphs && (star || singletons || similarity || min_similarity > 0))
        return "--paragraphs clusters connected components of documents sharing paragraphs: "
               "not with --mode star, --singletons, --similarity or --min-similarity";
    return NULL;
}

const char *cli_store_problem(const simstore_stats *st, double min_similarity, int paragraphs)
{
    if (min_similarity > 0 && st->sketch == SIMSTORE_SKETCH_NONE)
        return "keeps no sketches (built with --sketch none, from fingerprints, or before "
               "sketches): --min-similarity needs them";
    if (paragraphs && st->paragraph_min_words == 0)
        return "has no paragraph index (build it with --paragraphs): --paragraphs needs one";
    return NULL;
}
