/* cmd_clusters.c: `simstore clusters`: the store's near-duplicate clusters,
 * each with the one document it keeps (simstore_clusters). */
#include "cli.h"
#include "optcheck.h"
#include "commands.h"
#include "paraclusters.h"
#include "progress.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const CMD = "clusters";

static void usage(FILE *out)
{
    fprintf(out, "Usage: simstore clusters STORE [--k K] [--mode components|star] [--keep RULE]\n"
                 "                        [--singletons] [--json] [--threads N] [--memory SIZE]\n"
                 "                        [--similarity] [--min-similarity J] [--bands on|off]\n"
                 "       simstore clusters STORE --paragraphs [--min-fraction F] [--k K]\n"
                 "                        [--keep RULE] [--json]\n"
                 "\n"
                 "Group the store's documents into clusters of near-duplicates (within\n"
                 "Hamming distance K, and by default of estimated Jaccard similarity at\n"
                 "least 0.9 where the store keeps sketches) and choose the one document\n"
                 "each cluster keeps. Prints one line per clustered document:\n"
                 "  CLUSTER<TAB>DOC_ID<TAB>KEPT<TAB>DISTANCE_TO_KEPT[<TAB>SIMILARITY_TO_KEPT]\n"
                 "CLUSTER is the kept document's id, KEPT is 1 for it and 0 for the documents\n"
                 "to drop. Clusters come in the byte order of their CLUSTER, the kept\n"
                 "document first, then the others by id. In a fingerprint-only store the\n"
                 "documents are the fingerprints (16 hex digits). The same store gives the\n"
                 "same bytes on every run and thread count. A summary goes to stderr.\n"
                 "\n"
                 "      --k K            distance, 0..7 (default: 7 with the similarity\n"
                 "                       filter below, else the store's k); above the\n"
                 "                       store's k its fingerprints are joined in memory, 8\n"
                 "                       bytes each plus 16 a thread, when that fits in half\n"
                 "                       of --memory, else through sorted runs in $TMPDIR\n"
                 "                       (--paragraphs probes more)\n"
                 "      --mode components  connected components of the within-K graph: a chain\n"
                 "                       of near-duplicates is one cluster (default)\n"
                 "      --mode star      in keep order, each document not yet taken becomes a\n"
                 "                       centre and takes every document not yet taken within\n"
                 "                       K of it: nobody is farther than K from what it keeps\n"
                 "      --keep first     keep the document inserted first (default)\n"
                 "      --keep min-id    keep the smallest id\n"
                 "      --keep max-meta FIELD, --keep min-meta FIELD\n"
                 "                       keep the largest (smallest) number in the member FIELD\n"
                 "                       of the document's metadata (nested as a.b; a string\n"
                 "                       holding a decimal number counts); documents without\n"
                 "                       one come last. Ties are broken by id\n"
                 "      --singletons     also print each document near no other, as a cluster\n"
                 "                       of its own\n"
                 "      --min-similarity J\n"
                 "                       two documents are near only when within K and their\n"
                 "                       estimated Jaccard similarity (format/sketch.md) is at\n"
                 "                       least J, 0..1 (0: K alone): the graph is then over\n"
                 "                       documents, so two sharing a fingerprint may part.\n"
                 "                       Needs a store that keeps sketches. Default: 0.9\n"
                 "                       with bands and the store's k (with --bands off,\n"
                 "                       --k 7) on a store that keeps sketches when --k is\n"
                 "                       not given (the near-duplicate setting: README,\n"
                 "                       \"Similarity\"), else 0\n"
                 "      --bands on|off   candidates also from the sketches' LSH bands\n"
                 "                       (format/sketch.md 6.2): two documents whose sketches\n"
                 "                       agree on every bit of one band are near when their\n"
                 "                       similarity is at least J, at any distance; the\n"
                 "                       bands' shape derives from J. Default: on when J is\n"
                 "                       0.5 or more; off: within K alone\n"
                 "\n");
    fprintf(out,
            "      --similarity     add each document's estimated similarity to its kept\n"
            "                       document (1 for the kept one; '-', null, unknown)\n"
            "      --json           JSON Lines {\"cluster\", \"id\", \"kept\", \"distance\"[,\n"
            "                       \"similarity\"]}\n"
            "      --threads N      threads (default: every core)\n"
            "      --memory SIZE    memory for the sorted pairs and the clusters (default\n"
            "                       1G); pairs and components beyond it spill to $TMPDIR,\n"
            "                       stars and --min-similarity must fit\n"
            "      --paragraphs     cluster by shared paragraphs (a store built with\n"
            "                       --paragraphs): the connected components of the pairs\n"
            "                       of `pairs --paragraphs` with FRACTION >= F\n"
            "                       (--min-fraction, default 0.3); each line ends in the\n"
            "                       pair's FRACTION with the kept document instead of a\n"
            "                       distance ('-' when linked only through others; JSON\n"
            "                       \"fraction\", null). Components only; not with\n"
            "                       --singletons or the similarity options\n"
            "      --progress       report progress on stderr\n"
            "  -h, --help           show this help\n"
            "\n"
            "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

enum {
    OPT_K = 1,
    OPT_MODE,
    OPT_KEEP,
    OPT_SINGLETONS,
    OPT_JSON,
    OPT_THREADS,
    OPT_MEMORY,
    OPT_PROGRESS
};
enum { OPT_SIMILARITY = OPT_PROGRESS + 1, OPT_MIN_SIMILARITY, OPT_PARAGRAPHS, OPT_MIN_FRACTION };
enum { OPT_BANDS = OPT_MIN_FRACTION + 1 };

typedef struct clusters_out {
    int json;
    int fp_only;
    int similarity; /* --similarity */
} clusters_out;

static void print_id(const clusters_out *o, const char *id, size_t len, unsigned flags, uint64_t fp)
{
    char hex[17];
    if (!id) {
        cli_format_hex64(fp, hex);
        if (o->json)
            printf("\"%s\"", hex);
        else
            fputs(hex, stdout);
    } else if (o->json && !(flags & SIMSTORE_MATCH_INTEGER_ID)) {
        cli_json_string(stdout, id, len);
    } else if (o->json) {
        fwrite(id, 1, len, stdout);
    } else {
        cli_tsv_id(CMD, id, len);
    }
}

static int print_member(void *ctx, const simstore_cluster_member *m)
{
    const clusters_out *o = (const clusters_out *)ctx;
    char sim[32];
    cli_format_similarity(m->similarity, o->json, sim);
    if (o->json) {
        fputs("{\"cluster\":", stdout);
        print_id(o, m->cluster, m->cluster_len, m->cluster_flags, m->cluster_fp);
        fputs(",\"id\":", stdout);
        print_id(o, m->id, m->id_len, m->flags, m->fp);
        printf(",\"kept\":%s,\"distance\":%u", m->kept ? "true" : "false", m->distance);
        if (o->similarity)
            printf(",\"similarity\":%s", sim);
        fputs("}\n", stdout);
    } else {
        print_id(o, m->cluster, m->cluster_len, m->cluster_flags, m->cluster_fp);
        putchar('\t');
        print_id(o, m->id, m->id_len, m->flags, m->fp);
        printf("\t%d\t%u", m->kept, m->distance);
        if (o->similarity)
            printf("\t%s", sim);
        putchar('\n');
    }
    return ferror(stdout) ? SIMSTORE_EIO : 0;
}

int cmd_clusters(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"k", required_argument, NULL, OPT_K},
        {"mode", required_argument, NULL, OPT_MODE},
        {"keep", required_argument, NULL, OPT_KEEP},
        {"singletons", no_argument, NULL, OPT_SINGLETONS},
        {"json", no_argument, NULL, OPT_JSON},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"similarity", no_argument, NULL, OPT_SIMILARITY},
        {"min-similarity", required_argument, NULL, OPT_MIN_SIMILARITY},
        {"bands", required_argument, NULL, OPT_BANDS},
        {"paragraphs", no_argument, NULL, OPT_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, OPT_MIN_FRACTION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    simstore_cluster_options o;
    simstore_cluster_options_init(&o);
    clusters_out out = {0, 0, 0};
    const char *field = NULL;
    int progress = 0, c, rc;
    unsigned long long k = 0;
    int have_k = 0, paragraphs = 0, min_fraction_given = 0, mode_given = 0;
    double min_fraction = SIMSTORE_NEAR_FRACTION;
    char why[256];
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &k) != 0)
                return cli_usage_error(CMD, "--k: '%s' is not a distance in 0..%d", optarg,
                                       SIMSTORE_MAX_K);
            have_k = 1;
            break;
        case OPT_MODE:
            if (strcmp(optarg, "components") == 0)
                o.mode = SIMSTORE_CLUSTER_COMPONENTS;
            else if (strcmp(optarg, "star") == 0)
                o.mode = SIMSTORE_CLUSTER_STAR;
            else
                return cli_usage_error(CMD, "--mode: '%s' is not components or star", optarg);
            mode_given = o.mode == SIMSTORE_CLUSTER_STAR;
            break;
        case OPT_KEEP:
            if (cli_parse_keep(optarg, argv, argc, &optind, &o.keep, &field, why, sizeof why))
                return cli_usage_error(CMD, "%s", why);
            break;
        case OPT_SINGLETONS: o.singletons = 1; break;
        case OPT_JSON: out.json = 1; break;
        case OPT_THREADS:
            if ((rc = cli_threads_option(CMD, optarg, &o.scan.threads)) != 0)
                return rc;
            break;
        case OPT_MEMORY:
            if ((rc = cli_memory_option(CMD, optarg, &o.scan.memory_bytes)) != 0)
                return rc;
            break;
        case OPT_PROGRESS: progress = 1; break;
        case OPT_SIMILARITY: out.similarity = 1; break;
        case OPT_MIN_SIMILARITY:
            if ((rc = cli_min_similarity_option(CMD, optarg, &o.scan.min_similarity)) != 0)
                return rc;
            break;
        case OPT_BANDS:
            if ((rc = cli_bands_option(CMD, optarg, &o.scan.bands)) != 0)
                return rc;
            break;
        case OPT_PARAGRAPHS: paragraphs = 1; break;
        case OPT_MIN_FRACTION:
            if ((rc = cli_min_fraction_option(CMD, optarg, &min_fraction)) != 0)
                return rc;
            min_fraction_given = 1;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    const char *refused =
        cli_clusters_options_problem(min_fraction_given, paragraphs, mode_given, o.singletons,
                                     out.similarity, o.scan.min_similarity);
    if (!refused)
        refused =
            cli_bands_rule_problem(o.scan.bands, have_k, o.scan.min_similarity, paragraphs, 0);
    if (refused)
        return cli_usage_error(CMD, "%s", refused);
    if (optind != argc - 1)
        return cli_usage_error(CMD, optind >= argc ? "missing STORE" : "one STORE only");
    const char *path = cli_store_path(argv[optind]);
    simstore *s;
    rc = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    simstore_stats st;
    rc = simstore_get_stats(s, &st);
    /* The near-duplicate rule (--k, --min-similarity, --bands) is resolved and
     * checked by the library, as for every client. */
    const char *lacks = rc == 0 ? cli_store_problem(&st, 0, paragraphs) : NULL;
    if (lacks) {
        simstore_close(s);
        return cli_error(CMD, "%s %s", path, lacks);
    }
    out.fp_only = st.fingerprint_only;
    o.scan.k = have_k ? (unsigned)k : SIMSTORE_NEAR_DEFAULT_K;
    o.key = cli_meta_key;
    o.key_ctx = (void *)field;
    cli_progress prog;
    cli_progress_init(&prog, CMD, progress);
    o.scan.progress = cli_progress_update;
    o.scan.progress_ctx = &prog;
    simstore_cluster_summary sum;
    if (rc == 0 && paragraphs)
        rc = paragraph_clusters(CMD, s, o.scan.k, min_fraction, (int)o.keep, field, out.json, &sum);
    else if (rc == 0)
        rc = simstore_clusters(s, &o, print_member, &out, &sum);
    cli_progress_done(&prog);
    simstore_close(s);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(CMD, "writing standard output: %s", strerror(errno ? errno : EIO));
        return CLI_EXIT_FAIL;
    }
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    fprintf(stderr, "clusters: %llu %s in %llu %s, %llu to drop, largest cluster %llu %s\n",
            (unsigned long long)sum.documents, CLI_NOUN(sum.documents, "document"),
            (unsigned long long)sum.clusters, CLI_NOUN(sum.clusters, "cluster"),
            (unsigned long long)sum.dropped, (unsigned long long)sum.largest,
            CLI_NOUN(sum.largest, "document"));
    return CLI_EXIT_OK;
}
