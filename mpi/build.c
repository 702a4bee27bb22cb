/* build.c: `simstore-mpi build OUT INPUT...`: the sharded store OUT of R
 * shards, rank r building shard r. Its phases in order (cmd_mpi_build):
 * the options, checked as `simstore build` checks them (cmd/optcheck.h);
 * OUT prepared by rank 0; every rank's shard builder started; the inputs
 * split across the ranks (split.c); with --boilerplate auto the set of the
 * whole input first (boilerplate.c); rounds in lockstep of reading,
 * fingerprinting and sending each record to its shard's rank
 * (records.c, exchange.c); the records added in input order and each
 * shard finished; the manifest published by rank 0 last, when every rank
 * succeeded, and nothing otherwise. */
#include "mpi_internal.h"

#include "boilerplate.h"
#include "cli.h"
#include "ingest.h"
#include "optcheck.h"
#include "progress.h"
#include "textopts.h"

#include <mpi.h>

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage_build(FILE *out)
{
    fprintf(out,
            "Usage: mpirun -np R simstore-mpi build OUT [OPTIONS] INPUT...\n"
            "\n"
            "Build the sharded store OUT of R shards (format/shards.md), rank r building\n"
            "shard r: every rank reads its share of the INPUT files (below),\n"
            "fingerprints it and sends each record to the rank of its\n"
            "shard, XXH3-64(id) mod R, in all-to-all rounds of at most --chunk bytes a\n"
            "rank, which keeps them in an unlinked scratch file in OUT until every rank\n"
            "has read its share; then each rank adds them in input order, numbering\n"
            "every document by its place in the whole input as one store would (for\n"
            "clusters --keep first), and builds its shard within --memory; rank 0\n"
            "publishes OUT/MANIFEST when every rank succeeded. A failure on any rank\n"
            "publishes nothing, names the rank, and exits 1; a rerun reuses OUT.\n"
            "\n"
            "Input: .tsv (id<TAB>hex16), .fp (hex16<TAB>id), .jsonl ({\"id\", \"text\"[,\n"
            "\"meta\"]}), .hex (hex16 per line) and .u64 (raw little-endian 64-bit\n"
            "values) with --fingerprint-only, each maybe gzip or zstd compressed (.gz,\n"
            ".zst, .zstd; told by the magic bytes, as `simstore build` tells it), or '-'\n"
            "(standard input, with --format). A plain file is split among the ranks at\n"
            "line (.u64: 8-byte) boundaries; a compressed file cannot be, so each is\n"
            "read whole, streaming, by one rank (the largest first, each to the rank\n"
            "with the fewest compressed bytes so far), and standard input by rank 0.\n"
            "Documents are numbered in input order whichever rank read them.\n"
            "      --format tsv|fp|jsonl|hex|u64\n"
            "      --k K            the largest distance queries may ask, 0..7 (3)\n"
            "      --tables auto|T  table count of every shard (auto)\n"
            "      --block-bytes B  table block size (%u)\n"
            "      --sketch KIND    none or minhash16..minhash256 (minhash256 when every\n"
            "                       input is JSON Lines, none otherwise)\n"
            "      --memory SIZE    each rank's memory budget for sorting (1G)\n"
            "      --chunk SIZE     bytes of records a rank sends per round (4M)\n"
            "      --threads N      worker threads per rank (all cores)\n"
            "      --replace        replace a published sharded store at OUT\n"
            "      --progress       rank 0 reports each step on stderr, with the ranks'\n"
            "                       totals (besides its own progress on a terminal)\n"
            "      --fingerprint-only\n"
            "                       keep the distinct fingerprints of .hex lines or .u64\n"
            "                       values only (no ids, metadata or sketches), each in\n"
            "                       shard simstore_shard_of_fp(fp, R), as `simstore\n"
            "                       build --fingerprint-only --shards R` keeps them\n",
            SIMSTORE_DEFAULT_BLOCK_BYTES);
    fprintf(out,
            "\n"
            "JSON Lines records and their fingerprints, as `simstore build` takes "
            "them:\n" INPUT_FIELD_HELP TEXTOPT_HELP "\n"
            "      --paragraphs     also index the fingerprint of every paragraph of each\n"
            "                       JSON Lines text, as `simstore build --paragraphs`\n"
            "      --paragraph-min-words N\n"
            "                       index only paragraphs of at least N words (%u)\n" BOILER_HELP
            "                       With auto each rank counts the line keys of its\n"
            "                       share in --memory (spilling), and the counts of the\n"
            "                       keys that pass on some rank's share are summed over\n"
            "                       the ranks: the set of the whole input, which every\n"
            "                       shard records\n"
            "  -q, --quiet          no summary line\n"
            "  -h, --help           show this help\n",
            SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT);
}

/* The command line of build, checked. */
typedef struct build_args {
    simstore_build_options o;
    textopt_state ts;
    input_fields fields;
    boiler_opts bo;
    int quiet, format, sketch_given, replace, paragraphs;
    unsigned para_min_words;
    simstore_sketch_kind sketch;
    uint64_t chunk;
    const char *out;
    char **inputs;
    int ninputs;
    int all_jsonl; /* every input is JSON Lines */
} build_args;

/* The options into *a. Returns -1 to go on, else the exit status (the
 * usage error said by rank 0). */
static int parse_build_options(int argc, char **argv, build_args *a)
{
    enum {
        O_K = 1,
        O_TABLES,
        O_BLOCK,
        O_SKETCH,
        O_MEMORY,
        O_CHUNK,
        O_THREADS,
        O_REPLACE,
        O_FORMAT,
        O_FPONLY,
        O_PROGRESS,
        O_PARAGRAPHS,
        O_PARA_MIN
    };
    static const struct option longopts[] = {
        {"k", required_argument, NULL, O_K},
        {"tables", required_argument, NULL, O_TABLES},
        {"block-bytes", required_argument, NULL, O_BLOCK},
        {"sketch", required_argument, NULL, O_SKETCH},
        {"memory", required_argument, NULL, O_MEMORY},
        {"chunk", required_argument, NULL, O_CHUNK},
        {"threads", required_argument, NULL, O_THREADS},
        {"replace", no_argument, NULL, O_REPLACE},
        {"format", required_argument, NULL, O_FORMAT},
        {"fingerprint-only", no_argument, NULL, O_FPONLY},
        {"progress", no_argument, NULL, O_PROGRESS},
        {"paragraphs", no_argument, NULL, O_PARAGRAPHS},
        {"paragraph-min-words", required_argument, NULL, O_PARA_MIN},
        BOILER_LONG_OPTIONS,
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        TEXTOPT_LONG_OPTIONS,
        INPUT_FIELD_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    simstore_build_options_init(&a->o);
    textopt_init(&a->ts);
    input_fields_init(&a->fields);
    boiler_opts_init(&a->bo);
    a->format = -1;
    a->sketch = SIMSTORE_SKETCH_NONE;
    a->chunk = (uint64_t)4 << 20;
    unsigned long long v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &v))
                return usage_error(argc, argv);
            a->o.k = (unsigned)v;
            break;
        case O_TABLES:
            if (strcmp(optarg, "auto") == 0)
                a->o.tables = 0;
            else if (cli_parse_uint(optarg, 1, 256, &v))
                return usage_error(argc, argv);
            else
                a->o.tables = (unsigned)v;
            break;
        case O_BLOCK:
            if (cli_parse_uint(optarg, SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES, &v) ||
                !simstore_block_bytes_valid(v))
                return usage_error(argc, argv);
            a->o.block_bytes = (unsigned)v;
            break;
        case O_SKETCH:
            if (simstore_sketch_parse(optarg, &a->sketch))
                return usage_error(argc, argv);
            a->sketch_given = 1;
            break;
        case O_MEMORY:
            if (cli_parse_size(optarg, &v) || v < SIMSTORE_MIN_MEMORY_BYTES)
                return usage_error(argc, argv);
            a->o.memory_bytes = v;
            break;
        case O_CHUNK:
            if (cli_parse_size(optarg, &v) || v < 1024 || v > ((uint64_t)1 << 30))
                return usage_error(argc, argv);
            a->chunk = v;
            break;
        case O_THREADS:
            if (cli_parse_uint(optarg, 1, 1024, &v))
                return usage_error(argc, argv);
            a->o.threads = (unsigned)v;
            break;
        case O_REPLACE: a->replace = 1; break;
        case O_FPONLY: a->o.fingerprint_only = 1; break;
        case O_PROGRESS: show_progress = 1; break;
        case O_PARAGRAPHS: a->paragraphs = 1; break;
        case O_PARA_MIN:
            if (cli_paragraph_min_words_option(cmd_name, optarg, &a->para_min_words))
                return 2;
            break;
        case O_FORMAT:
            if ((a->format = parse_format(optarg)) < 0)
                return usage_error(argc, argv);
            break;
        case 'q': a->quiet = 1; break;
        case 'h':
            if (rank == 0)
                usage_build(stdout);
            return 0;
        case '?':
        case ':': return usage_error(argc, argv);
        default: {
            int b = boiler_apply("mpi build", c, optarg, &a->bo);
            if (b == 2)
                return 2;
            if (b == 1)
                break;
            int t = textopt_or_field_or_bad_option("mpi build", c, argv, optind, &a->ts, &a->fields,
                                                   NULL);
            if (t >= 0)
                return t;
        }
        }
    }
    if (textopt_finish("mpi build", &a->ts) || boiler_finish("mpi build", &a->bo))
        return 2;
    return -1;
}

/* After the options: the operands OUT INPUT... and what `simstore build`
 * refuses of them, then the defaults that follow from the inputs (the
 * sketch, the paragraphs' minimum). Returns -1 to go on, else the exit
 * status (said by rank 0). */
static int check_build_args(int argc, char **argv, build_args *a)
{
    const char *refused =
        cli_build_paragraphs_problem(a->paragraphs, a->para_min_words, a->o.fingerprint_only);
    if (!refused)
        refused = cli_build_boilerplate_problem(a->bo.automatic, a->o.fingerprint_only);
    if (refused) {
        rank0_says("%s", refused);
        return 2;
    }
    if (argc - optind < 2)
        return usage_error(argc, argv);
    /* A round's bytes to one rank from all of them are counted in an int. */
    if (a->chunk * 2 * (uint64_t)nranks > (uint64_t)INT_MAX) {
        rank0_says("--chunk %llu is too large for %d ranks (at most %llu)",
                   (unsigned long long)a->chunk, nranks,
                   (unsigned long long)((uint64_t)INT_MAX / 2 / (uint64_t)nranks));
        return 2;
    }
    a->out = argv[optind++];
    a->inputs = argv + optind;
    a->ninputs = argc - optind;
    a->all_jsonl = 1;
    for (int i = 0; i < a->ninputs; i++) {
        const char *in = a->inputs[i];
        int f = format_of(in, a->format);
        if (f < 0) {
            rank0_says(strcmp(in, "-") == 0
                           ? "%s: cannot tell the format of standard input; use --format"
                           : "%s: cannot tell the format from the name; use --format",
                       input_shown(in));
            return 2;
        }
        a->all_jsonl &= f == INPUT_JSONL;
        if ((f == INPUT_HEX_LINES || f == INPUT_U64_VALUES) != (a->o.fingerprint_only != 0)) {
            rank0_says(a->o.fingerprint_only
                           ? "%s: a fingerprint-only store reads --format hex or u64 (.hex, "
                             ".u64: bare fingerprints)"
                           : "%s: bare fingerprints (hex, u64) make a fingerprint-only "
                             "store: add --fingerprint-only",
                       input_shown(in));
            return 2;
        }
    }
    char why[256];
    if (cli_build_sketch_problem(a->o.fingerprint_only, a->sketch_given, a->sketch, why,
                                 sizeof why)) {
        rank0_says("%s", why);
        return 2;
    }
    if (a->bo.automatic && !a->all_jsonl) {
        rank0_says("--boilerplate auto reads the texts of JSON Lines documents; an input "
                   "holds fingerprints");
        return 1;
    }
    if (!a->sketch_given)
        a->sketch =
            a->all_jsonl && !a->o.fingerprint_only ? SIMSTORE_SKETCH_DEFAULT : SIMSTORE_SKETCH_NONE;
    a->ts.opts.sketch = a->sketch;
    if (a->paragraphs)
        a->ts.opts.paragraph_min_words =
            a->para_min_words ? a->para_min_words : SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT;
    a->o.text = &a->ts.opts;
    a->o.source_name = source_name;
    a->o.source_ctx = a->inputs;
    a->o.replace = 1; /* of a shard: the directory was prepared by rank 0 */
    return -1;
}

/* Rank 0 prepares OUT (a published store needs --replace). Returns 0, or 1
 * on every rank (said). Collective. */
static int prepare_output(const build_args *a)
{
    int failed = 0;
    if (rank == 0) {
        int rc = simstore_sharded_prepare(a->out, (unsigned)nranks, a->replace);
        if (rc == SIMSTORE_EEXIST)
            say("%s already exists; use --replace to replace it", a->out);
        else if (rc)
            say("%s: %s", a->out, simstore_last_error());
        failed = rc != 0;
    }
    return agree(failed, "preparing the output");
}

/* This rank's shard builder at shard (OUT/its name), its fingerprinter
 * when an input holds texts, its spool. Returns 0, or 1 on every rank
 * (said; nothing left open). Collective. */
static int start_shard(build_args *a, build_state *st, char *shard, size_t size)
{
    memset(st, 0, sizeof *st);
    st->spool_fd = -1;
    st->fp_only = a->o.fingerprint_only != 0;
    st->para_min_words = a->ts.opts.paragraph_min_words;
    st->sketch = a->sketch;
    st->sketch_bytes = simstore_sketch_bytes(a->sketch);
    st->out = calloc((size_t)nranks, sizeof *st->out);
    char name[16];
    simstore_shard_name((unsigned)rank, name, sizeof name);
    snprintf(shard, size, "%s/%s", a->out, name);
    int failed = 0;
    int rc = st->out ? simstore_build_begin(shard, &a->o, &st->b) : SIMSTORE_ENOMEM;
    if (rc == SIMSTORE_OK && a->all_jsonl)
        rc = simstore_fingerprinter_new(&a->ts.opts, &st->fpr);
    else if (rc == SIMSTORE_OK)
        for (int i = 0; i < a->ninputs && rc == SIMSTORE_OK; i++)
            if (format_of(a->inputs[i], a->format) == INPUT_JSONL)
                rc = simstore_fingerprinter_new(&a->ts.opts, &st->fpr);
    if (rc) {
        say("%s: %s", shard, simstore_last_error());
        failed = 1;
    }
    if (!failed && spool_open(st, a->out))
        failed = 1;
    if (agree(failed, "starting the shards' builds")) {
        simstore_builder_abort(st->b);
        spool_close(st);
        return 1;
    }
    return 0;
}

/* --boilerplate auto: the set of the whole input first (a pass over this
 * rank's share with a reader of its own), given to this rank's shard and
 * fingerprinter. Returns 0, or 1 when this rank failed (said). */
static int boilerplate_first(build_args *a, build_state *st, const reader *rd, const char *shard,
                             simstore_boilerplate **set)
{
    int failed = 0, rc;
    reader first = *rd;
    if (find_boilerplate(st, &first, &a->bo, &a->ts.opts, a->o.memory_bytes, set)) {
        failed = 1;
    } else if ((rc = simstore_builder_set_boilerplate(st->b, *set)) != 0 ||
               (rc = simstore_fingerprinter_set_boilerplate(st->fpr, *set)) != 0) {
        say("%s: %s", shard, simstore_last_error());
        failed = 1;
    }
    if (show_progress && *set) {
        char desc[160];
        boiler_describe(*set, desc, sizeof desc);
        progress("boilerplate: %s", desc);
    }
    return failed;
}

/* Rounds in lockstep: each rank reads up to a chunk, all exchange, and
 * they go on while any rank has more to read and none has failed (a
 * failed rank stops the others at the next round). Returns 1 when this
 * rank failed (said), else 0. Collective. */
static int read_and_send(const build_args *a, build_state *st, reader *rd, cli_progress *prog,
                         int failed)
{
    for (;;) {
        if (!failed && fill(st, rd, a->chunk))
            failed = 1;
        if (rank == 0) {
            uint64_t done, share; /* bytes, a whole part's compressed */
            reader_progress(rd, &done, &share);
            cli_progress_update(prog, "reading (rank 0's share)", done < share ? done : share,
                                share);
        }
        if (failed)
            for (int i = 0; i < nranks; i++)
                st->out[i].len = 0;
        if (exchange_records(st))
            failed = 1;
        int state[2] = {!rd->done && !failed, failed};
        MPI_Allreduce(MPI_IN_PLACE, state, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (state[1] || !state[0])
            break;
    }
    return failed;
}

/* Every rank sent everything: add what this rank received in input order
 * and finish its shard, unless some rank already failed (then nothing is
 * published anyway). Returns 1 when this rank failed (said), else 0.
 * Collective. */
static int finish_shard(build_state *st, const reader *rd, const char *shard, int failed)
{
    int someone = failed;
    MPI_Allreduce(MPI_IN_PLACE, &someone, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!someone && add_spooled(st, rd->parts, rd->nparts))
        failed = 1;
    spool_close(st);
    if (!someone && !failed) {
        int rc = simstore_builder_finish(st->b);
        st->b = NULL;
        if (rc) {
            say("%s: %s", shard, simstore_last_error());
            failed = 1;
        }
    }
    simstore_builder_abort(st->b);
    st->b = NULL;
    return failed;
}

/* Every shard is built: rank 0 publishes the manifest, last, and prints
 * the summary line (boiler_desc: the set's description, or ""). Returns
 * the exit status. Collective. */
static int publish(const build_args *a, const char *boiler_desc)
{
    int failed = 0, rc;
    if (rank == 0) {
        rc = simstore_sharded_publish(a->out, (unsigned)nranks);
        if (rc) {
            say("%s: %s", a->out, simstore_last_error());
            failed = 1;
        }
    }
    if (agree(failed, "publishing the manifest"))
        return 1;
    if (rank == 0 && !a->quiet) {
        simstore_sharded *sh;
        simstore_stats s;
        rc = simstore_sharded_open(a->out, SIMSTORE_OPEN_READONLY, &sh);
        if (rc == SIMSTORE_OK)
            rc = simstore_sharded_get_stats(sh, &s);
        simstore_sharded_close(sh);
        if (rc) {
            say("%s was built, but cannot be read back: %s", a->out, simstore_last_error());
            return 1;
        }
        printf("built %s: %llu %s, %llu distinct %s; %s%s%s\n", a->out,
               (unsigned long long)s.documents, s.documents == 1 ? "document" : "documents",
               (unsigned long long)s.fingerprints,
               s.fingerprints == 1 ? "fingerprint" : "fingerprints", s.design,
               *boiler_desc ? "; boilerplate " : "", boiler_desc);
    }
    return 0;
}

int cmd_mpi_build(int argc, char **argv)
{
    cmd_name = "simstore-mpi build";
    build_args a;
    memset(&a, 0, sizeof a);
    int status = parse_build_options(argc, argv, &a);
    if (status < 0)
        status = check_build_args(argc, argv, &a);
    if (status >= 0)
        return status;
    /* Progress from rank 0 alone (its share of the reading, its shard's
     * build), on a terminal and without --quiet. */
    cli_progress prog;
    cli_progress_init(&prog, "mpi build", rank == 0 && !a.quiet);
    if (rank == 0) {
        a.o.progress = cli_progress_update;
        a.o.progress_ctx = &prog;
    }
    build_state st;
    char shard[PATH_MAX];
    if (prepare_output(&a) || start_shard(&a, &st, shard, sizeof shard))
        return 1;
    /* Standard input, read twice with --boilerplate auto: rank 0's copy. */
    int failed = 0, stdin_copy = -1;
    char stdin_path[64] = "";
    if (a.bo.automatic && rank == 0)
        for (int i = 0; i < a.ninputs; i++)
            if (strcmp(a.inputs[i], "-") == 0) {
                if (copy_stdin(a.out, &stdin_copy))
                    failed = 1;
                else
                    snprintf(stdin_path, sizeof stdin_path, "/proc/self/fd/%d", stdin_copy);
                break;
            }
    reader rd;
    memset(&rd, 0, sizeof rd);
    rd.fields = &a.fields;
    uint64_t input_bytes;
    failed = split_inputs(a.inputs, a.ninputs, a.format, stdin_copy >= 0 ? stdin_path : NULL,
                          failed, &rd, &input_bytes);
    simstore_boilerplate *set = NULL;
    int someone = failed;
    MPI_Allreduce(MPI_IN_PLACE, &someone, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!someone && a.bo.automatic && boilerplate_first(&a, &st, &rd, shard, &set))
        failed = 1;
    failed = read_and_send(&a, &st, &rd, &prog, failed);
    reader_close_part(&rd);
    if (stdin_copy >= 0)
        close(stdin_copy);
    if (show_progress) {
        uint64_t t[2] = {st.sent, st.spool_len};
        MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        progress("read %llu %s of %llu input bytes; %llu bytes sent to the shards' ranks",
                 (unsigned long long)t[0], t[0] == 1 ? "record" : "records",
                 (unsigned long long)input_bytes, (unsigned long long)t[1]);
    }
    if (st.bad) {
        say("%llu bad %s", (unsigned long long)st.bad, st.bad == 1 ? "record" : "records");
        failed = 1;
    }
    for (int i = 0; i < nranks; i++)
        free(st.out[i].data);
    free(st.out);
    simstore_fingerprinter_free(st.fpr);
    failed = finish_shard(&st, &rd, shard, failed);
    free(rd.parts);
    char boiler_desc[160] = "";
    if (set)
        boiler_describe(set, boiler_desc, sizeof boiler_desc);
    simstore_boilerplate_free(set); /* the builder and fingerprinter are done with it */
    free(st.paras);
    cli_progress_done(&prog);
    if (show_progress) {
        uint64_t added = st.records;
        MPI_Allreduce(MPI_IN_PLACE, &added, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        progress("built %d %s of %llu %s", nranks, nranks == 1 ? "shard" : "shards",
                 (unsigned long long)added, added == 1 ? "record" : "records");
    }
    if (agree(failed, "building")) {
        rank0_says("%s not published", a.out);
        return 1;
    }
    return publish(&a, boiler_desc);
}
