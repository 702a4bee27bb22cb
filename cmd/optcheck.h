/* optcheck.h: the option checks `simstore` and `simstore-mpi` share. Each
 * parses a value or tells what is wrong with a command line: a message
 * without the command's name (NULL when nothing is), which `simstore` says
 * with cli_usage_error or cli_error and simstore-mpi from rank 0 alone, so
 * that both refuse the same things in the same words. */
#ifndef SIMS_CMD_OPTCHECK_H
#define SIMS_CMD_OPTCHECK_H

#include "simstore.h"

#include <stddef.h>

/* A number from 0 to 1 (--min-similarity, --min-fraction). Returns 0 with
 * *out set, or -1. */
int cli_parse_unit(const char *arg, double *out);

/* --min-similarity J and --min-fraction F: cli_parse_unit into *out, or
 * what is wrong with arg, written to why[0..size). */
const char *cli_min_similarity_problem(const char *arg, double *out, char *why, size_t size);
const char *cli_min_fraction_problem(const char *arg, double *out, char *why, size_t size);

/* --bands on|off: 1 or 0 into *out, or what is wrong with arg, written to
 * why[0..size). */
const char *cli_bands_problem(const char *arg, int *out, char *why, size_t size);
/* pairs, clusters, dedup: --bands (bands: SIMSTORE_NEAR_DEFAULT_BANDS when
 * not given, else 0 or 1) with --paragraphs or --by-fingerprint, or --bands
 * on with a rule that has no minimum similarity of 0.5 or more to derive
 * them from (--min-similarity below 0.5, or --k without --min-similarity:
 * SIMSTORE_NEAR_DEFAULT_SIMILARITY when not given). */
const char *cli_bands_rule_problem(int bands, int k_given, double min_similarity, int paragraphs,
                                   int by_fingerprint);

/* build: --paragraph-min-words without --paragraphs, or --paragraphs on a
 * fingerprint-only store. */
const char *cli_build_paragraphs_problem(int paragraphs, unsigned para_min_words,
                                         int fingerprint_only);
/* build: --boilerplate auto on a fingerprint-only store. */
const char *cli_build_boilerplate_problem(int boilerplate_auto, int fingerprint_only);
/* build: a sketch given to a fingerprint-only store (written to why). */
const char *cli_build_sketch_problem(int fingerprint_only, int sketch_given,
                                     simstore_sketch_kind sketch, char *why, size_t size);

/* query: --meta without --json, --min-fraction without --paragraphs,
 * --paragraphs with a query by --fp (by_fp) or with the similarity
 * options, in that order. */
const char *cli_query_options_problem(int meta, int json, int min_fraction_given, int paragraphs,
                                      int by_fp, int similarity, double min_similarity);
/* query: --min-similarity or --paragraphs with queries that have no texts
 * (texts: the queries are JSON Lines). */
const char *cli_query_format_problem(int texts, double min_similarity, int paragraphs);

/* pairs: --min-fraction without --paragraphs, --paragraphs with
 * --by-fingerprint or the similarity options. */
const char *cli_pairs_options_problem(int min_fraction_given, int paragraphs, int by_fingerprint,
                                      int similarity, double min_similarity);
/* clusters: --min-fraction without --paragraphs, --paragraphs with --mode
 * star, --singletons or the similarity options. */
const char *cli_clusters_options_problem(int min_fraction_given, int paragraphs, int star,
                                         int singletons, int similarity, double min_similarity);

/* What a store of stats st cannot answer: --min-similarity (above 0)
 * without sketches, --paragraphs without a paragraph index. The message
 * follows the store's path: "PATH keeps no sketches ...". */
const char *cli_store_problem(const simstore_stats *st, double min_similarity, int paragraphs);

#endif
