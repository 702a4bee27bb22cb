/* cmd_build.c: `simstore build`: create a store from documents (TSV
 * fingerprints or JSON Lines texts) or, for fingerprint-only stores, bare
 * fingerprints. All or nothing: a failed build leaves no store behind. */
#include "boilerplate.h"
#include "cli.h"
#include "commands.h"
#include "ingest.h"
#include "optcheck.h"
#include "progress.h"
#include "textopts.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CMD = "build";

/* The most shards one process builds at once (each an open builder with
 * its files): the library's larger limit is for stores built over MPI. */
#define BUILD_SHARDS_MAX 256u

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore build STORE [OPTIONS] INPUT...\n"
            "\n"
            "Create the store STORE (a new directory) from the INPUT files ('-' is\n"
            "standard input, which has no extension: give --format with it). Nothing\n"
            "appears at STORE unless the whole build succeeds. The documents go to a\n"
            "document file beside the tables (format/docfile.md); later adds and\n"
            "deletes go to LMDB until a compaction folds them into the next one.\n"
            "\n"
            "Input (format from the extension, or --format):\n"
            "  .tsv    id<TAB>hex16 per line: documents with their fingerprints\n"
            "  .fp     hex16<TAB>id per line, as `simstore fingerprint` prints\n"
            "  .jsonl  {\"id\": string or integer, \"text\": string[, \"meta\": any]} per\n"
            "          line: documents, fingerprinted on the way (a record with\n"
            "          \"fp\": hex16 and no text is stored under that fingerprint, as\n"
            "          `simstore export --json` writes it)\n"
            "  .hex    hex16 per line (fingerprint-only stores)\n"
            "  .u64    raw little-endian 64-bit values (fingerprint-only stores)\n"
            "      --format tsv|fp|jsonl|hex|u64\n"
            "\n"
            "Store:\n"
            "      --k K            the distance the tables answer fastest, 0..7 (default\n"
            "                       3); queries and scans may ask up to 7 (slower above K)\n"
            "      --tables auto|T  table count; auto picks by the cost model (default)\n"
            "      --expected N     plan the automatic design for N fingerprints\n"
            "                       (default: the fingerprints of this build); N as\n"
            "                       1000000, 1e6, 2^20 or 1M (K, M, G, T: powers of 1024)\n"
            "      --block-bytes B  table block size, a power of two %u..%u\n"
            "                       (default %u: smaller blocks decode less per query,\n"
            "                       larger ones keep fewer keys in RAM)\n"
            "      --fingerprint-only\n"
            "                       keep no documents: answers are fingerprints\n"
            "      --sketch none|minhash16|minhash32|minhash64|minhash128|minhash256\n"
            "                       keep a sketch of each document's shingle set\n"
            "                       (16 to 256 bytes a document), so that answers\n"
            "                       carry an estimated Jaccard similarity and\n"
            "                       --min-similarity can filter them (default: %s\n"
            "                       when every input is JSON Lines, none otherwise:\n"
            "                       TSV and fingerprint lines have no text to sketch)\n"
            "      --paragraphs     also index the fingerprint of every paragraph of\n"
            "                       each JSON Lines text (as `fingerprint --paragraphs`\n"
            "                       cuts them), for `query --paragraphs`: pages that\n"
            "                       copy part of a document, edited documents\n"
            "      --paragraph-min-words N\n"
            "                       index only paragraphs of at least N words, 1..%u\n"
            "                       (default %u; recorded in the store)\n"
            "      --replace        replace an existing STORE atomically (only a store:\n"
            "                       a file or any other directory is refused)\n"
            "      --shards R       make a sharded store of R shards, 1..%u (format/shards.md):\n"
            "                       documents go to shard XXH3-64(id) mod R, each shard is an\n"
            "                       ordinary store built with the same options (each\n"
            "                       document numbered by its place in the whole input, as\n"
            "                       one store numbers it), and the\n"
            "                       manifest STORE/MANIFEST is published last; --replace\n"
            "                       then replaces a sharded store (not atomically: readers\n"
            "                       are refused until the new manifest is published)\n"
            "\n",
            SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES, SIMSTORE_DEFAULT_BLOCK_BYTES,
            simstore_sketch_name(SIMSTORE_SKETCH_DEFAULT), SIMSTORE_PARAGRAPH_MIN_WORDS_MAX,
            SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT, BUILD_SHARDS_MAX);
    fprintf(out, "Resources:\n"
                 "      --memory SIZE    memory budget for sorting, e.g. 512M, 4GiB (default 1G;\n"
                 "                       K, M, G, T: powers of 1024); the process uses about\n"
                 "                       25 MiB more, plus about 3x the size of each JSON\n"
                 "                       Lines record being read (README: Building at scale)\n"
                 "      --threads N      worker threads (default: all cores)\n"
                 "  -q, --quiet          no progress on stderr\n"
                 "  -v, --verbose        report wall time and peak memory on stderr\n"
                 "\n");
    fprintf(out,
            "JSON Lines records (members other than these are ignored):\n" INPUT_FIELD_HELP "\n"
            "Fingerprints of JSON Lines texts:\n" TEXTOPT_HELP "\n"
            "Boilerplate (site templates: README, \"Boilerplate\"), recorded in the store\n"
            "and removed from the texts of later adds and text queries:\n" BOILER_HELP "\n"
            "  -h, --help           show this help\n"
            "\n"
            "Document ids are 1..511 bytes without control characters; an id given\n"
            "twice is an error. Bad records are reported as FILE:LINE: message and\n"
            "the build is abandoned. A document that is nothing but boilerplate is\n"
            "reported (FILE:LINE: document id 'ID' is only boilerplate) and stored with\n"
            "the fingerprint of its whole text. On success one summary line goes to\n"
            "stdout.\n"
            "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

enum {
    OPT_K = 1,
    OPT_TABLES,
    OPT_EXPECTED,
    OPT_BLOCK,
    OPT_FORMAT,
    OPT_FPONLY,
    OPT_REPLACE,
    OPT_MEMORY,
    OPT_THREADS
};
enum { OPT_SKETCH = OPT_THREADS + 1, OPT_PARAGRAPHS, OPT_PARA_MIN, OPT_SHARDS };

/* The default sketch: the measured choice for texts, when every input is
 * JSON Lines (by --format or by name); none when any input gives
 * fingerprints without texts, or is standard input without --format. */
static simstore_sketch_kind default_sketch(const ingest_options *io, char **paths, int n)
{
    for (int i = 0; i < n; i++) {
        int f = io->format != INGEST_BY_EXTENSION ? (int)io->format
                : strcmp(paths[i], "-") == 0      ? -1
                                                  : ingest_format_of_name(paths[i]);
        if (f != INGEST_JSONL)
            return SIMSTORE_SKETCH_NONE;
    }
    return SIMSTORE_SKETCH_DEFAULT;
}

static void human_bytes(uint64_t v, char *buf, size_t size)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 4) {
        d /= 1024;
        u++;
    }
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", d, unit[u]);
}

/* The summary line's start: "built STORE: counts; design; sizes". */
static void print_built(const char *path, const simstore_stats *st)
{
    char tb[32], lb[32], db[32];
    human_bytes(st->table_bytes, tb, sizeof tb);
    human_bytes(st->lmdb_bytes, lb, sizeof lb);
    human_bytes(st->document_file_bytes, db, sizeof db);
    if (st->fingerprint_only)
        printf("built %s: %llu distinct %s; %s; tables %s", path,
               (unsigned long long)st->fingerprints, CLI_NOUN(st->fingerprints, "fingerprint"),
               st->design, tb);
    else
        printf("built %s: %llu %s, %llu distinct %s; %s; tables %s, %s%s%sLMDB %s", path,
               (unsigned long long)st->documents, CLI_NOUN(st->documents, "document"),
               (unsigned long long)st->fingerprints, CLI_NOUN(st->fingerprints, "fingerprint"),
               st->design, tb, st->document_file_bytes ? "document file " : "",
               st->document_file_bytes ? db : "", st->document_file_bytes ? ", " : "", lb);
}

/* ---- build --shards R ------------------------------------------------------ */

typedef struct shard_sink {
    simstore_builder **b;
    unsigned shards;
    uint64_t position; /* the next document's in the whole input */
} shard_sink;

/* Each document keeps its position in the whole input, as one store of it
 * would number it (simstore_builder_set_position): insertion numbers, and
 * `clusters --keep first`, agree with that store's. */
static int shard_doc(void *ctx, const simstore_doc *doc)
{
    shard_sink *s = (shard_sink *)ctx;
    simstore_builder *b = s->b[simstore_shard_of(doc->id, doc->id_len, s->shards)];
    int rc = simstore_builder_set_position(b, s->position);
    if (rc == 0)
        rc = simstore_builder_add(b, doc);
    if (rc == 0)
        s->position++;
    return rc;
}

static int shard_fp(void *ctx, uint64_t fp)
{
    shard_sink *s = (shard_sink *)ctx;
    return simstore_builder_add_fp(s->b[simstore_shard_of_fp(fp, s->shards)], fp);
}

/* A sharded store (format/shards.md): the directory prepared, one builder
 * per shard (the same options for each: the same k, tables and block size),
 * every record routed to its shard, the shards finished one by one, the
 * manifest published last. A failure publishes nothing: the directory holds
 * no manifest, which every reader refuses and a rerun replaces. */
static int build_sharded(const char *path, unsigned shards, simstore_build_options *o,
                         ingest_options *io, const boiler_opts *bo, char **inputs, int ninputs,
                         cli_progress *prog, int verbose, double started)
{
    char failed[PATH_MAX + 64];
    snprintf(failed, sizeof failed, "%s not published", path);
    int rc = simstore_sharded_prepare(path, shards, o->replace);
    if (rc == SIMSTORE_EEXIST)
        return cli_error(CMD, "%s already exists; use --replace to replace it", path);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    simstore_builder **b = calloc(shards, sizeof *b);
    if (!b)
        return cli_error(CMD, "out of memory");
    /* The shards build side by side within the one budget. */
    simstore_build_options so = *o;
    so.replace = 1; /* a shard of an unfinished build may be there */
    so.memory_bytes = o->memory_bytes / shards;
    if (so.memory_bytes < SIMSTORE_MIN_MEMORY_BYTES)
        so.memory_bytes = SIMSTORE_MIN_MEMORY_BYTES;
    int status = CLI_EXIT_OK;
    char shard_path[PATH_MAX];
    for (unsigned i = 0; i < shards && status == CLI_EXIT_OK; i++) {
        char name[16];
        simstore_shard_name(i, name, sizeof name);
        snprintf(shard_path, sizeof shard_path, "%s/%s", path, name);
        if ((rc = simstore_build_begin(shard_path, &so, &b[i])) != 0)
            status = cli_api_error(CMD, rc, "%s", shard_path);
    }
    simstore_boilerplate *set = NULL;
    boiler_spool spool = {NULL, NULL, 0};
    if (status == CLI_EXIT_OK && bo->automatic) {
        /* One set for the whole corpus, recorded in every shard, so that a
         * text is fingerprinted alike whichever shard holds it. */
        uint64_t mem = o->memory_bytes;
        uint64_t kept = mem / 8 < ((uint64_t)64 << 20) ? mem / 8 : (uint64_t)64 << 20;
        rc = boiler_first_pass(CMD, inputs, ninputs, io, bo, mem - kept, &spool, &set);
        for (unsigned i = 0; rc == 0 && i < shards; i++)
            if ((rc = simstore_builder_set_boilerplate(b[i], set)) != 0)
                rc = cli_api_error(CMD, rc, "%s", path);
        if (rc)
            status = CLI_EXIT_FAIL;
        io->boilerplate = set;
    }
    ingest_result res;
    memset(&res, 0, sizeof res);
    if (status == CLI_EXIT_OK) {
        shard_sink ss = {b, shards, 0};
        ingest_sink sink = {shard_doc, shard_fp, &ss, NULL};
        int got = ingest_run(&sink, inputs, ninputs, io, &res);
        if (got) {
            cli_progress_done(prog);
            status =
                cli_error(CMD, "%s: %s", failed,
                          got == 1 ? "the input has bad records" : "the input could not be read");
        }
    }
    boiler_spool_free(&spool);
    for (unsigned i = 0; i < shards && status == CLI_EXIT_OK; i++) {
        rc = simstore_builder_finish(b[i]);
        b[i] = NULL;
        if (rc) {
            cli_progress_done(prog);
            cli_api_error(CMD, rc, "%s", failed);
            status = CLI_EXIT_FAIL;
        }
    }
    for (unsigned i = 0; i < shards; i++)
        simstore_builder_abort(b[i]);
    free(b);
    cli_progress_done(prog);
    if (status == CLI_EXIT_OK && (rc = simstore_sharded_publish(path, shards)) != 0)
        status = cli_api_error(CMD, rc, "%s", failed);
    if (status != CLI_EXIT_OK) {
        simstore_boilerplate_free(set);
        cli_clashes_finish((const cli_clashes *)o->clash_ctx, NULL);
        return status;
    }
    if (verbose)
        cli_report_resources(CMD, started);
    simstore_sharded *sh;
    simstore_stats st;
    rc = simstore_sharded_open(path, SIMSTORE_OPEN_READONLY, &sh);
    if (rc == SIMSTORE_OK)
        rc = simstore_sharded_get_stats(sh, &st);
    simstore_sharded_close(sh);
    if (rc) {
        simstore_boilerplate_free(set);
        cli_error(CMD, "%s was built, but cannot be read back:", path);
        return cli_api_error(CMD, rc, "%s", path);
    }
    print_built(path, &st);
    if (set) {
        char desc[160];
        boiler_describe(set, desc, sizeof desc);
        printf("; boilerplate %s", desc);
        simstore_boilerplate_free(set);
    }
    putchar('\n');
    return CLI_EXIT_OK;
}

int cmd_build(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"k", required_argument, NULL, OPT_K},
        {"tables", required_argument, NULL, OPT_TABLES},
        {"expected", required_argument, NULL, OPT_EXPECTED},
        {"block-bytes", required_argument, NULL, OPT_BLOCK},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"fingerprint-only", no_argument, NULL, OPT_FPONLY},
        {"replace", no_argument, NULL, OPT_REPLACE},
        {"memory", required_argument, NULL, OPT_MEMORY},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"sketch", required_argument, NULL, OPT_SKETCH},
        {"paragraphs", no_argument, NULL, OPT_PARAGRAPHS},
        {"paragraph-min-words", required_argument, NULL, OPT_PARA_MIN},
        {"shards", required_argument, NULL, OPT_SHARDS},
        {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        TEXTOPT_LONG_OPTIONS,
        INPUT_FIELD_LONG_OPTIONS,
        BOILER_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    boiler_opts bo;
    boiler_opts_init(&bo);
    simstore_build_options o;
    simstore_build_options_init(&o);
    textopt_state text;
    textopt_init(&text);
    input_fields fields;
    input_fields_init(&fields);
    ingest_options io;
    memset(&io, 0, sizeof io);
    io.fields = &fields;
    io.cmd = CMD;
    io.text = &text.opts;
    o.text = &text.opts;
    int quiet = 0, verbose = 0, sketch_given = 0, paragraphs = 0, c;
    unsigned para_min_words = 0, shards = 0;
    simstore_sketch_kind sketch = SIMSTORE_SKETCH_NONE;
    double started = cli_now();
    unsigned long long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qvh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &v))
                return cli_usage_error(CMD, "--k takes 0..%d, not '%s'", SIMSTORE_MAX_K, optarg);
            o.k = (unsigned)v;
            break;
        case OPT_TABLES:
            if (strcmp(optarg, "auto") == 0)
                o.tables = 0;
            else if (cli_parse_uint(optarg, 1, 256, &v))
                return cli_usage_error(CMD, "--tables takes auto or 1..256, not '%s'", optarg);
            else
                o.tables = (unsigned)v;
            break;
        case OPT_EXPECTED:
            if (cli_parse_size(optarg, &v) || v == 0)
                return cli_usage_error(CMD,
                                       "--expected takes a positive count (1000000, 1e6, "
                                       "2^20, 1M), not '%s'",
                                       optarg);
            o.expected_fps = v;
            break;
        case OPT_BLOCK:
            if (cli_parse_uint(optarg, SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES, &v) ||
                !simstore_block_bytes_valid(v))
                return cli_usage_error(CMD,
                                       "--block-bytes takes a power of two from %u to %u, "
                                       "not '%s'",
                                       SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES, optarg);
            o.block_bytes = (unsigned)v;
            break;
        case OPT_FORMAT: {
            int f = ingest_format_parse(optarg);
            if (f < 0)
                return cli_usage_error(CMD, "--format takes tsv, fp, jsonl, hex or u64, not '%s'",
                                       optarg);
            io.format = (ingest_format)f;
            break;
        }
        case OPT_FPONLY: o.fingerprint_only = 1; break;
        case OPT_REPLACE: o.replace = 1; break;
        case OPT_MEMORY:
            if (cli_memory_option(CMD, optarg, &o.memory_bytes))
                return CLI_EXIT_USAGE;
            break;
        case OPT_THREADS:
            if (cli_threads_option(CMD, optarg, &o.threads))
                return CLI_EXIT_USAGE;
            break;
        case OPT_SKETCH:
            if (cli_sketch_option(CMD, optarg, &sketch))
                return CLI_EXIT_USAGE;
            sketch_given = 1;
            break;
        case OPT_PARAGRAPHS: paragraphs = 1; break;
        case OPT_PARA_MIN:
            if (cli_paragraph_min_words_option(CMD, optarg, &para_min_words))
                return CLI_EXIT_USAGE;
            break;
        case OPT_SHARDS:
            if (cli_parse_uint(optarg, 1, BUILD_SHARDS_MAX, &v))
                return cli_usage_error(CMD, "--shards takes 1..%u, not '%s'", BUILD_SHARDS_MAX,
                                       optarg);
            shards = (unsigned)v;
            break;
        case 'q': quiet = 1; break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case '?':
        case ':': return cli_bad_option(CMD, c, argv, optind);
        default: {
            int b = boiler_apply(CMD, c, optarg, &bo);
            if (b == 2)
                return CLI_EXIT_USAGE;
            if (b == 1)
                break;
            int t = textopt_or_field_or_bad_option(CMD, c, argv, optind, &text, &fields, NULL);
            if (t >= 0)
                return t;
        }
        }
    }
    if (textopt_finish(CMD, &text) || boiler_finish(CMD, &bo))
        return CLI_EXIT_USAGE;
    const char *refused = cli_build_boilerplate_problem(bo.automatic, o.fingerprint_only);
    if (refused)
        return cli_usage_error(CMD, "%s", refused);
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind >= argc)
        return cli_usage_error(CMD, "missing INPUT (use '-' for standard input)");
    io.fingerprint_only = o.fingerprint_only;
    io.threads = o.threads;
    char why[256];
    if (cli_build_sketch_problem(o.fingerprint_only, sketch_given, sketch, why, sizeof why))
        return cli_usage_error(CMD, "%s", why);
    if (!sketch_given)
        sketch = o.fingerprint_only ? SIMSTORE_SKETCH_NONE
                                    : default_sketch(&io, argv + optind, argc - optind);
    text.opts.sketch = sketch;
    if ((refused = cli_build_paragraphs_problem(paragraphs, para_min_words, o.fingerprint_only)) !=
        NULL)
        return cli_usage_error(CMD, "%s", refused);
    if (paragraphs)
        text.opts.paragraph_min_words =
            para_min_words ? para_min_words : SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT;

    cli_progress prog;
    cli_progress_init(&prog, CMD, !quiet);
    o.progress = cli_progress_update;
    o.progress_ctx = &prog;
    o.source_name = ingest_source_name;
    o.source_ctx = argv + optind;
    io.progress = cli_progress_update;
    io.progress_ctx = &prog;
    cli_clashes clashes = {CMD, 0, ingest_source_name, argv + optind, cli_progress_done_cb, &prog,
                           0,   0};
    o.clash = cli_clash_report;
    o.clash_ctx = &clashes;

    if (shards)
        return build_sharded(path, shards, &o, &io, &bo, argv + optind, argc - optind, &prog,
                             verbose, started);
    simstore_builder *b;
    int rc = simstore_build_begin(path, &o, &b);
    if (rc == SIMSTORE_EEXIST && !o.replace)
        return cli_error(CMD, "%s already exists; use --replace to replace it", path);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    ingest_result res;
    char failed[PATH_MAX + 32];
    snprintf(failed, sizeof failed, "%s not created", path);
    /* Boilerplate: a first pass over the inputs finds the set, recorded in
     * the store and removed from every text of the second. The first pass
     * runs before the builder sorts anything, in the same budget. */
    simstore_boilerplate *set = NULL;
    boiler_spool spool = {NULL, NULL, 0};
    if (bo.automatic) {
        uint64_t mem = o.memory_bytes;
        uint64_t kept = mem / 8 < ((uint64_t)64 << 20) ? mem / 8 : (uint64_t)64 << 20;
        rc = boiler_first_pass(CMD, argv + optind, argc - optind, &io, &bo, mem - kept, &spool,
                               &set);
        if (rc == 0 && (rc = simstore_builder_set_boilerplate(b, set)) != 0)
            rc = cli_api_error(CMD, rc, "%s", path);
        if (rc) {
            cli_progress_done(&prog);
            simstore_builder_abort(b);
            boiler_spool_free(&spool);
            simstore_boilerplate_free(set);
            return cli_error(CMD, "%s", failed);
        }
        io.boilerplate = set;
    }
    int ingest_failed =
        ingest_and_finish(b, argv + optind, argc - optind, &io, &res, cli_progress_done_cb, failed);
    boiler_spool_free(&spool);
    if (ingest_failed) {
        simstore_boilerplate_free(set);
        cli_clashes_finish(&clashes, NULL);
        return CLI_EXIT_FAIL;
    }
    if (verbose)
        cli_report_resources(CMD, started);

    simstore *s;
    simstore_stats st;
    rc = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
    if (rc == SIMSTORE_OK)
        rc = simstore_get_stats(s, &st);
    simstore_close(s);
    if (rc) {
        simstore_boilerplate_free(set);
        cli_error(CMD, "%s was built, but cannot be read back:", path);
        return cli_api_error(CMD, rc, "%s", path);
    }
    print_built(path, &st);
    if (st.paragraph_min_words)
        printf("; paragraph index: %llu distinct %s of at least %u words",
               (unsigned long long)st.paragraph_fps, CLI_NOUN(st.paragraph_fps, "fingerprint"),
               st.paragraph_min_words);
    if (set) {
        char desc[160];
        boiler_describe(set, desc, sizeof desc);
        printf("; boilerplate %s", desc);
        if (res.only_boilerplate)
            printf(", %llu %s only boilerplate", (unsigned long long)res.only_boilerplate,
                   CLI_NOUN(res.only_boilerplate, "document"));
        simstore_boilerplate_free(set);
    }
    putchar('\n');
    return CLI_EXIT_OK;
}
