/* scan.c: what `simstore-mpi pairs` and `clusters` share: their common options and the shard.
 * Over a sharded store, rank r reading shard r, they print what `simstore
 * pairs` and `simstore clusters` print for one store of the same
 * documents, in phases, a file each:
 * 1. owners.c: documents go to the rank owning their fingerprint (a hash
 *    of it): that rank then holds every document of each fingerprint it
 *    owns, and the owned fingerprints of all ranks are the distinct
 *    fingerprints.
 * 2. join.c: the join, table by table (simstore_join_plan_*): every rank
 *    permutes its owned fingerprints, ranks agree on prefix ranges from a
 *    sample of the permuted values, send each value to the rank owning its
 *    prefix (in rounds of at most --chunk bytes), and each joins its
 *    range; a pair comes out of the first table covering it only.
 *    bands.c: with the rule's bands, each owner sends every distinct
 *    (band, key, fingerprint) of its documents' sketches to the rank of a
 *    hash of (band, key), which pairs the distinct fingerprints of each
 *    (band, key) more than k apart; those pairs, once each, join the
 *    join's at the owner of a.
 * 3. pairs.c: a fingerprint pair goes to the owner of a, which attaches
 *    a's documents and sends them on to the owner of b, which makes the
 *    document pairs (owners.c, each_pair). clusters.c: the pairs are the
 *    edges of a graph whose nodes (fingerprints; documents with a minimum
 *    similarity) live at their owners; components.c: components by label
 *    propagation with hooking and pointer jumping (every label only
 *    decreases, each node's label stays in its component; the labels stop
 *    changing when each component has one), no rank holding more than its
 *    nodes' edges; each component's kept document, or its stars in keep
 *    order, are chosen at the owner of its label, which receives that
 *    component's nodes (and for stars their edges) only.
 * 4. output.c: output lines carry a byte key of the single-node order; a
 *    sample sort spreads them over the ranks in order, and rank 0 prints
 *    its own, then each rank's in turn, a chunk at a time.
 * A fingerprint-only store's documents are its fingerprints (ids: their
 * hex). --paragraphs (paragraphs.c) joins the distinct paragraphs instead
 * and adds up each document pair's shared counts at the rank owning the
 * pair; clusters then takes those pairs as edges between the documents at
 * their own ranks. */
#include "scan_internal.h"

#include "cli.h"
#include "optcheck.h"
#include "simstore.h"

#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

uint64_t chunk_bytes = (uint64_t)4 << 20;

int open_shard(const char *out, scan_opts *o, simstore **s, simstore_stats *st)
{
    char shard[PATH_MAX];
    if (open_my_shard(out, s, st, shard, sizeof shard))
        return 1;
    /* k and the similarity filter by the library's near-duplicate rule
     * (simstore.h), resolved and checked as `simstore pairs` and
     * `clusters` resolve them; the shards agree on k and text options (the
     * manifest): rank 0 says what it refuses. */
    simstore_scan_options so;
    simstore_scan_options_init(&so);
    if (o->have_k)
        so.k = o->k;
    if (o->min_similarity_given || o->paragraphs || o->distance_only)
        so.min_similarity = o->min_similarity; /* 0 for those two: the store's k */
    int rc = simstore_scan_resolve(*s, &so, &o->k, &o->min_similarity);
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "%s: %s: %s\n", cmd_name, out, simstore_last_error());
        simstore_close(*s);
        *s = NULL;
        return 1;
    }
    /* The rule's bands as the scan resolves them (its default, from the
     * minimum similarity and the sketch kind): k and the minimum given. */
    simstore_near_rule_init(&o->rule);
    o->rule.k = o->k;
    o->rule.min_similarity = o->min_similarity;
    o->rule.min_fraction = o->min_fraction;
    rc = simstore_near_rule_resolve(&o->rule, st->k, st->sketch, 0);
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "%s: %s: %s\n", cmd_name, out, simstore_last_error());
        simstore_close(*s);
        *s = NULL;
        return 1;
    }
    return 0;
}

int common_option(int c, const char *arg, scan_opts *o)
{
    unsigned long long v;
    switch (c) {
    case O_K:
        if (cli_parse_uint(arg, 0, SIMSTORE_MAX_K, &v))
            return 2;
        o->k = (unsigned)v;
        o->have_k = 1;
        return 0;
    case O_JSON: o->json = 1; return 0;
    case O_PROGRESS: show_progress = 1; return 0;
    case O_SIMILARITY: o->similarity = 1; return 0;
    case O_MIN_SIMILARITY:
        if (cli_parse_unit(arg, &o->min_similarity))
            return 2;
        o->min_similarity_given = 1;
        return 0;
    case O_THREADS: return cli_parse_uint(arg, 1, 1024, &v) ? 2 : 0;
    case O_MEMORY:
        if (cli_parse_size(arg, &v) || v < SIMSTORE_MIN_MEMORY_BYTES)
            return 2;
        o->memory = v;
        return 0;
    case O_CHUNK:
        if (cli_parse_size(arg, &v) || v < 1024 || v > ((uint64_t)1 << 30) ||
            v * 2 * (uint64_t)nranks > (uint64_t)INT_MAX)
            return 2;
        chunk_bytes = v;
        return 0;
    case O_PARAGRAPHS: o->paragraphs = 1; return 0;
    case O_MIN_FRACTION:
        if (cli_parse_unit(arg, &o->min_fraction))
            return 2;
        o->min_fraction_given = 1;
        return 0;
    default: return 2;
    }
}

int check_options(int argc, char **argv, const char *refused)
{
    if (argc - optind != 1)
        return usage_error(argc, argv);
    if (refused)
        rank0_says("%s", refused);
    return refused ? 2 : 0;
}

int lacks_paragraph_index(simstore *s, const simstore_stats *st, const char *out)
{
    const char *refused = cli_store_problem(st, 0, 1);
    if (!refused)
        return 0;
    rank0_says("%s %s", out, refused);
    simstore_close(s);
    return 1;
}

int unsupported(const char *what, const char *why)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s is not supported yet%s%s\n", cmd_name, what, why ? ": " : "",
                why ? why : "");
    return 2;
}
