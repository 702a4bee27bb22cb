/* pairs.c: `simstore-mpi pairs OUT`: its options, the lines of document and fingerprint pairs.
 * The documents meet at their fingerprints' owners (owners.c), the
 * distinct fingerprints are joined (join.c), with the rule's bands the
 * band candidates beyond k added (bands.c), each pair's documents
 * are paired at the owner of one fingerprint (each_pair), and every line,
 * as `simstore pairs` prints it, is sorted across the ranks and printed by
 * rank 0 (output.c). --paragraphs: paragraphs.c. */
#include "scan_internal.h"

#include "cli.h"
#include "optcheck.h"
#include "simstore.h"

#include <mpi.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pairs_run {
    scan_opts o;
    int by_fp;
    simstore_sketch_kind sketch;
    lines l;
} pairs_run;

static void emit_doc_pair(void *ctx, const sdoc *x, const sdoc *y, unsigned d)
{
    pairs_run *p = (pairs_run *)ctx;
    double sim;
    if (!simstore_near_duplicate_sketches(&p->o.rule, p->sketch, d, x->sketch, y->sketch, &sim))
        return;
    if (id_cmp(x->id, x->id_len, y->id, y->id_len) > 0) {
        const sdoc *t = x;
        x = y;
        y = t;
    }
    lines *l = &p->l;
    l->key[l->key_len++] = (uint8_t)d;
    key_id(l, x->id, x->id_len);
    key_id(l, y->id, y->id_len);
    int json = p->o.json;
    fputs(json ? "{\"a\":" : "", l->f);
    print_id(l->f, x->id, x->id_len, x->flags, json);
    fputs(json ? ",\"b\":" : "\t", l->f);
    print_id(l->f, y->id, y->id_len, y->flags, json);
    fprintf(l->f, json ? ",\"distance\":%u" : "\t%u", d);
    if (p->o.similarity) {
        char s[32];
        cli_format_similarity(sim, json, s);
        fprintf(l->f, json ? ",\"similarity\":%s" : "\t%s", s);
    }
    fputs(json ? "}\n" : "\n", l->f);
    line_done(l);
}

static void emit_fp_pair(void *ctx, uint64_t a, uint64_t b, unsigned d, uint64_t ca, uint64_t cb)
{
    pairs_run *p = (pairs_run *)ctx;
    lines *l = &p->l;
    l->key[l->key_len++] = (uint8_t)d;
    key_u64(l, a);
    key_u64(l, b);
    char ha[17], hb[17];
    cli_format_hex64(a, ha);
    cli_format_hex64(b, hb);
    if (p->o.json)
        fprintf(l->f,
                "{\"a\":\"%s\",\"b\":\"%s\",\"distance\":%u,\"count_a\":%llu,\"count_b\":%llu", ha,
                hb, d, (unsigned long long)ca, (unsigned long long)cb);
    else
        fprintf(l->f, "%s\t%s\t%u\t%llu\t%llu", ha, hb, d, (unsigned long long)ca,
                (unsigned long long)cb);
    if (p->o.similarity) {
        char s[32];
        cli_format_similarity(SIMSTORE_SIMILARITY_UNKNOWN, p->o.json, s);
        fprintf(l->f, p->o.json ? ",\"similarity\":%s" : "\t%s", s);
    }
    fputs(p->o.json ? "}\n" : "\n", l->f);
    line_done(l);
}

static void usage_pairs(FILE *out)
{
    fprintf(
        out,
        "Usage: mpirun -np R simstore-mpi pairs OUT [--k K] [--by-fingerprint] [--json]\n"
        "                      [--similarity] [--min-similarity J] [--memory SIZE]\n"
        "                      [--chunk SIZE] [--progress]\n"
        "       mpirun -np R simstore-mpi pairs OUT --paragraphs [--min-fraction F] [--k K]\n"
        "                      [--json] [--memory SIZE] [--chunk SIZE] [--progress]\n"
        "\n"
        "Print every unordered pair of documents of the sharded store OUT of R\n"
        "shards within Hamming distance K, rank r reading shard r: exactly what\n"
        "`simstore pairs` prints for one store of the same documents,\n"
        "ID_A<TAB>ID_B<TAB>DISTANCE sorted by distance, ID_A, ID_B. The join is\n"
        "spread over the ranks table by table (each rank joins a range of each\n"
        "table's prefixes), the documents are paired at the ranks owning their\n"
        "fingerprints, and rank 0 prints the lines of every rank in order.\n"
        "\n"
        "      --by-fingerprint pairs of distinct fingerprints with their document\n"
        "                       counts, HEX_A<TAB>HEX_B<TAB>DISTANCE<TAB>COUNT_A<TAB>\n"
        "                       COUNT_B\n"
        "      --min-similarity J\n"
        "                       only the pairs whose estimated similarity is at\n"
        "                       least J, 0..1; needs a store that keeps sketches\n"
        "                       (default: 0.9 when --k is not given on a store that\n"
        "                       keeps sketches, the near-duplicate setting; else 0);\n"
        "                       from 0.5 up, documents whose sketches share a band\n"
        "                       are candidates beyond K too (format/sketch.md 6.2)\n" COMMON_HELP
        "\n"
        "With --paragraphs (a store built with --paragraphs), the lines of `simstore\n"
        "pairs --paragraphs`, ID_A<TAB>ID_B<TAB>SHARED_A<TAB>OF_A<TAB>SHARED_B<TAB>OF_B<TAB>\n"
        "FRACTION (--min-fraction, default 0.3): the distinct paragraphs go to the\n"
        "ranks owning them with their documents, are joined as fingerprints are, and\n"
        "each document pair's shared counts are added up at the rank owning it.\n"
        "\n"
        "A fingerprint-only store prints HEX_A<TAB>HEX_B<TAB>DISTANCE (its documents\n"
        "are its fingerprints), as `simstore pairs` does.\n"
        "\n"
        "Not yet: fingerprint lines without a store (--method).\n");
}

/* The options into *p. Returns -1 to go on, else the exit status (the
 * usage error said by rank 0). */
static int parse_pairs_options(int argc, char **argv, pairs_run *p)
{
    static const struct option longopts[] = {
        COMMON_LONG_OPTIONS,
        {"by-fingerprint", no_argument, NULL, O_BY_FP},
        {"paragraphs", no_argument, NULL, O_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, O_MIN_FRACTION},
        {"method", required_argument, NULL, O_UNSUPPORTED},
        {NULL, 0, NULL, 0},
    };
    p->o.memory = (uint64_t)1 << 30;
    p->o.min_fraction = SIMSTORE_NEAR_FRACTION;
    int c, li = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, &li)) != -1) {
        if (c == 'h') {
            if (rank == 0)
                usage_pairs(stdout);
            return 0;
        } else if (c == O_BY_FP) {
            p->by_fp = 1;
        } else if (c == O_UNSUPPORTED) {
            char what[64];
            snprintf(what, sizeof what, "--%s", longopts[li].name);
            return unsupported(what, NULL);
        } else if (common_option(c, optarg, &p->o)) {
            return usage_error(argc, argv);
        }
    }
    int bad =
        check_options(argc, argv,
                      cli_pairs_options_problem(p->o.min_fraction_given, p->o.paragraphs, p->by_fp,
                                                p->o.similarity, p->o.min_similarity));
    if (bad)
        return bad;
    if (p->by_fp && p->o.min_similarity > 0) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: pairs by fingerprint have no similarity: --min-similarity "
                    "needs pairs of documents\n",
                    cmd_name);
        return 2;
    }
    p->o.distance_only = p->by_fp;
    return -1;
}

/* --paragraphs: the lines of `simstore pairs --paragraphs` (paragraphs.c),
 * printed by rank 0. Returns the exit status. Collective. */
static int pairs_of_paragraphs(simstore *s, pairs_run *p)
{
    para_run pr;
    memset(&pr, 0, sizeof pr);
    pr.json = p->o.json;
    pr.rule = &p->o.rule;
    if (lines_open(&pr.l) != 0) {
        say("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    homes h;
    memset(&h, 0, sizeof h);
    int status = paragraph_pairs(s, p->o.k, p->o.memory / 4, &pr, &h);
    homes_free(&h);
    if (!status)
        status = print_sorted(&pr.l);
    lines_close(&pr.l);
    return status;
}

int cmd_mpi_pairs(int argc, char **argv)
{
    cmd_name = "simstore-mpi pairs";
    pairs_run p;
    memset(&p, 0, sizeof p);
    int status = parse_pairs_options(argc, argv, &p);
    if (status >= 0)
        return status;
    simstore *s;
    simstore_stats st;
    status = open_shard(argv[optind], &p.o, &s, &st);
    if (status)
        return status;
    p.sketch = st.sketch;
    if (p.o.paragraphs) {
        if (lacks_paragraph_index(s, &st, argv[optind]))
            return 1;
        status = pairs_of_paragraphs(s, &p);
        simstore_close(s);
        return status;
    }
    simstore_cluster_options keep; /* pairs keep nothing: min-id reads no metadata */
    simstore_cluster_options_init(&keep);
    keep.keep = SIMSTORE_KEEP_MIN_ID;
    owned o;
    pairs_acc pairs = {NULL, 0, 0};
    status = agree(gather_owned(s, &keep, st.fingerprint_only, &o) != 0, "reading the documents");
    if (!status && p.o.k > 0)
        status = join_owned(&o, p.o.k, p.o.memory / 4, &pairs);
    if (!status && !st.fingerprint_only)
        band_pairs(&o, &p.o.rule, p.o.memory / 4, &pairs);
    if (!status && lines_open(&p.l) != 0) {
        say("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!status) {
        each_pair(&o, &pairs, emit_doc_pair, p.by_fp ? emit_fp_pair : NULL, &p);
        status = print_sorted(&p.l);
    }
    lines_close(&p.l);
    free(pairs.v);
    owned_free(&o);
    simstore_close(s);
    return status;
}
