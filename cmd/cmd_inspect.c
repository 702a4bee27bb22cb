/* cmd_inspect.c: `simstore inspect`: what a store (or one table file) holds
 * and how it is coded: counts, segments, the design table by table, sizes
 * beside the information-theoretic floor, the Huffman code lengths and the
 * leading-bit histogram drawn as a text chart; --json for scripts; --plot
 * draws the histograms and code lengths as a PNG chart (gnuplot). */
#include "cli.h"
#include "commands.h"
#include "boilerplate.h"
#include "parts.h"
#include "plot.h"
#include "textopts.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const CMD = "inspect";

/* Tables with more blocks than this get a sampled histogram by default. */
#define DEFAULT_SAMPLE_BLOCKS 4096u
#define BAR_WIDTH 40
/* The most tables one chart draws (the first ones inspect prints). */
#define PLOT_MAX_SERIES 16

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore inspect STORE|FILE [--json] [--brief] [--exact | --sample N]\n"
            "                                   [--plot FILE.png]\n"
            "\n"
            "Describe a store without trusting it (a sharded store: its manifest, then\n"
            "each shard): documents, distinct fingerprints,\n"
            "segments, how its texts are fingerprinted (fingerprint version, text\n"
            "options, the sketch each document keeps and its bytes per document,\n"
            "boilerplate lines), the design (per table: permutation, prefix bits,\n"
            "blocks, bytes, bits per fingerprint beside the floor\n"
            "64 - log2 N + 1.443, block keys in RAM), LMDB and table sizes, and for\n"
            "every table its Huffman code lengths and the histogram of the\n"
            "leading-bit position j of consecutive differences, drawn as a chart.\n"
            "FILE (a regular file) inspects one table file alone, without LMDB.\n"
            "\n"
            "      --json           one JSON object instead of text\n"
            "      --brief          no code or histogram per table\n"
            "      --exact          decode every block for the histogram (slow for large\n"
            "                       tables; by default tables of more than %u blocks are\n"
            "                       sampled: %u blocks spread evenly)\n"
            "      --sample N       sample N blocks per table\n"
            "      --plot FILE.png  also draw the leading-bit histogram (share of\n"
            "                       differences per j) and the code length per j of\n"
            "                       each table (the first %u) as a PNG chart, with\n"
            "                       gnuplot (Debian package gnuplot-nox)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Exit status: 0 success, 1 failure (the message names the file and, for\n"
            "damage, the block and byte offset), 2 usage error.\n",
            DEFAULT_SAMPLE_BLOCKS, DEFAULT_SAMPLE_BLOCKS, PLOT_MAX_SERIES);
}

typedef struct options {
    int json;
    int brief;
    uint64_t sample;  /* 0: exact */
    const char *plot; /* --plot: the PNG to draw, or NULL */
} options;

/* ---- the chart (--plot) -------------------------------------------------------- */

/* The tables drawn so far: their data in one file (a gnuplot data block
 * per table, two blank lines apart: j, share in percent, code bits) and
 * their titles. */
static struct {
    FILE *data;
    char path[4096];
    unsigned series;
    char titles[PLOT_MAX_SERIES][128];
} chart;

static void chart_add(const char *title, const simstore_table_info *in, const simstore_histogram *h)
{
    if (!chart.data || chart.series == PLOT_MAX_SERIES)
        return;
    snprintf(chart.titles[chart.series], sizeof chart.titles[0], "%s", title);
    if (chart.series)
        fputs("\n\n", chart.data);
    for (unsigned j = 0; j < 64; j++) {
        if (!h->count[j] && !in->code_lengths[j])
            continue;
        double share = h->differences ? 100.0 * (double)h->count[j] / (double)h->differences : 0;
        fprintf(chart.data, "%u %.6f %u\n", j, share, in->code_lengths[j]);
    }
    chart.series++;
}

/* Draw the chart of the tables added into png. Returns an exit code. */
static int chart_draw(const char *what, const char *png)
{
    char script[16384], q[512], msg[512];
    size_t n = 0;
    if (fclose(chart.data) != 0) {
        chart.data = NULL;
        return cli_error(CMD, "%s: %s", chart.path, strerror(errno));
    }
    chart.data = NULL;
    if (chart.series == 0)
        return cli_error(CMD, "%s: no table to draw", what);
    if (plot_quote(what, q, sizeof q))
        snprintf(q, sizeof q, "'simstore inspect'");
    n += (size_t)snprintf(script + n, sizeof script - n,
                          "set multiplot layout 1,2 title %s\n"
                          "set grid\nset key top left\nset xrange [-1:64]\n"
                          "set xlabel 'j: leading bit of the difference of consecutive "
                          "fingerprints'\n"
                          "set title 'leading-bit histogram'\n"
                          "set ylabel 'share of differences (%%)'\nplot",
                          q);
    for (int pass = 0; pass < 2 && n < sizeof script; pass++) {
        for (unsigned i = 0; i < chart.series && n < sizeof script; i++) {
            if (plot_quote(chart.titles[i], q, sizeof q))
                snprintf(q, sizeof q, "'table'");
            n += (size_t)snprintf(script + n, sizeof script - n,
                                  "%s data index %u using 1:%u with %s title %s", i ? "," : "", i,
                                  pass ? 3u : 2u, pass ? "steps" : "linespoints pointsize 0.6", q);
        }
        if (pass == 0 && n < sizeof script)
            n += (size_t)snprintf(script + n, sizeof script - n,
                                  "\nset title 'Huffman code length'\nset ylabel 'bits'\n"
                                  "set yrange [0:*]\nset offsets 0, 0, 1, 0\nplot");
    }
    if (n < sizeof script)
        n += (size_t)snprintf(script + n, sizeof script - n, "\nunset multiplot\n");
    if (n >= sizeof script)
        return cli_error(CMD, "%s: the chart's script is too long", png);
    if (plot_png(script, chart.path, png, 1400, 560, msg, sizeof msg) != 0)
        return cli_error(CMD, "--plot: %s", msg);
    return CLI_EXIT_OK;
}

/* A NUL-terminated string as JSON (cli_json_string). */
static void json_string(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

static void format_time(uint64_t unix_seconds, char *buf, size_t size)
{
    time_t t = (time_t)unix_seconds;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(buf, size, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(buf, size, "%" PRIu64, unix_seconds);
}

/* ---- one table -------------------------------------------------------------- */

static int table_histogram(simstore_table *t, const simstore_table_info *in, const options *o,
                           simstore_histogram *h)
{
    uint64_t max = o->sample;
    if (max && in->blocks <= max)
        max = 0;
    int rc = simstore_table_histogram(t, max, h);
    if (rc)
        return cli_api_error(CMD, rc, "%s", in->path);
    return 0;
}

static void print_chart(const simstore_table_info *in, const simstore_histogram *h)
{
    uint64_t top = 0;
    for (unsigned j = 0; j < 64; j++)
        if (h->count[j] > top)
            top = h->count[j];
    printf("      leading-bit histogram: %s, %" PRIu64 " %s in %" PRIu64 " of %" PRIu64 " %s\n",
           h->exact ? "exact" : "sampled", h->differences, CLI_NOUN(h->differences, "difference"),
           h->blocks_decoded, in->blocks, CLI_NOUN(in->blocks, "block"));
    printf("         j  %12s  share   code bits  2^-bits  chart\n", h->exact ? "count" : "sampled");
    for (unsigned j = 0; j < 64; j++) {
        if (!h->count[j] && !in->code_lengths[j])
            continue;
        double share = h->differences ? 100.0 * (double)h->count[j] / (double)h->differences : 0;
        double code_share = in->code_lengths[j] ? 100.0 * ldexp(1.0, -in->code_lengths[j]) : 0;
        int bar = top ? (int)((h->count[j] * BAR_WIDTH + top - 1) / top) : 0;
        char bars[BAR_WIDTH + 1];
        memset(bars, '#', (size_t)bar);
        bars[bar] = '\0';
        if (in->code_lengths[j])
            printf("        %2u  %12" PRIu64 "  %5.1f%%  %9u  %6.1f%%  %s\n", j, h->count[j], share,
                   in->code_lengths[j], code_share, bars);
        else
            printf("        %2u  %12" PRIu64 "  %5.1f%%  %9s  %7s  %s\n", j, h->count[j], share,
                   "-", "-", bars);
    }
    if (h->blocks_decoded && in->block_bytes)
        printf(
            "      block fill: %.1f%% of block bits hold values (%.2f bits per "
            "fingerprint of payload)\n",
            100.0 * (double)h->payload_bits / ((double)h->blocks_decoded * 8.0 * in->block_bytes),
            h->differences ? (double)h->payload_bits / (double)(h->differences + h->blocks_decoded)
                           : 0.0);
}

static void print_table_text(const simstore_table_info *in, const char *design_line, int indent)
{
    const char *pad = indent ? "    " : "";
    if (design_line)
        printf("%s%s\n", pad, design_line);
    printf("%s  file: %s\n", pad, in->path);
    printf("%s  permutation: %s\n", pad, in->permutation);
    printf("%s  prefix bits: %u\n", pad, in->prefix_bits);
    printf("%s  fingerprints: %" PRIu64 "\n", pad, in->fingerprints);
    printf("%s  blocks: %" PRIu64 " of %u bytes (at most %" PRIu64 " %s in one)\n", pad, in->blocks,
           in->block_bytes, in->max_block_fingerprints,
           CLI_NOUN(in->max_block_fingerprints, "fingerprint"));
    printf("%s  bytes: %" PRIu64 " (blocks from byte offset %" PRIu64 ", index at %" PRIu64
           ", footer at %" PRIu64 ")\n",
           pad, in->file_bytes, in->blocks_offset, in->index_offset, in->footer_offset);
    if (in->fingerprints) {
        double blocks_bits = 8.0 * (double)in->blocks * in->block_bytes / (double)in->fingerprints;
        printf("%s  bits per fingerprint: %.2f in the file, %.2f in its blocks; floor 64 - log2 N "
               "+ 1.443 = %.2f\n",
               pad, in->bits_per_fp, blocks_bits, in->floor_bits_per_fp);
    }
    uint64_t index_bytes = in->footer_offset - in->index_offset;
    printf("%s  index: %" PRIu64 " bytes", pad, index_bytes);
    if (in->fingerprints)
        printf(", %.3f bits per fingerprint", 8.0 * (double)index_bytes / (double)in->fingerprints);
    printf("; in RAM: %" PRIu64 " bytes (24 per index chunk of 256 blocks, 1 per top "
           "page: the index stays in the file, each chunk checked on first use)\n",
           in->key_ram_bytes);
    printf("%s  store tag: %016" PRIx64 ", table index %u, format version %u\n", pad, in->store_tag,
           in->table_index, in->format_version);
}

static void print_table_json(const simstore_table_info *in, const char *description,
                             const simstore_histogram *h)
{
    printf("{\"file\":");
    json_string(in->path);
    if (description) {
        printf(",\"description\":");
        json_string(description);
    }
    printf(",\"permutation\":");
    json_string(in->permutation);
    printf(",\"table_index\":%u,\"store_tag\":\"%016" PRIx64 "\",\"format_version\":%u,"
           "\"prefix_bits\":%u,\"fingerprints\":%" PRIu64 ",\"blocks\":%" PRIu64
           ",\"block_bytes\":%u,\"max_block_fingerprints\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"blocks_offset\":%" PRIu64 ",\"index_offset\":%" PRIu64 ",\"footer_offset\":%" PRIu64
           ",\"index_bytes\":%" PRIu64 ",\"bits_per_fp\":%.4f,\"floor_bits_per_fp\":%.4f,"
           "\"key_ram_bytes\":%" PRIu64,
           in->table_index, in->store_tag, in->format_version, in->prefix_bits, in->fingerprints,
           in->blocks, in->block_bytes, in->max_block_fingerprints, in->file_bytes,
           in->blocks_offset, in->index_offset, in->footer_offset,
           in->footer_offset - in->index_offset, in->bits_per_fp, in->floor_bits_per_fp,
           in->key_ram_bytes);
    printf(",\"perm\":[");
    for (unsigned i = 0; i < 64; i++)
        printf("%s%u", i ? "," : "", in->perm[i]);
    printf("],\"code_lengths\":[");
    for (unsigned i = 0; i < 64; i++)
        printf("%s%u", i ? "," : "", in->code_lengths[i]);
    printf("]");
    if (h) {
        printf(",\"histogram\":{\"exact\":%s,\"blocks_decoded\":%" PRIu64
               ",\"differences\":%" PRIu64 ",\"payload_bits\":%" PRIu64 ",\"count\":[",
               h->exact ? "true" : "false", h->blocks_decoded, h->differences, h->payload_bits);
        for (unsigned i = 0; i < 64; i++)
            printf("%s%" PRIu64, i ? "," : "", h->count[i]);
        printf("]}");
    }
    printf("}");
}

/* Inspect one open table: text or JSON. Returns an exit code. */
static int inspect_table(simstore_table *t, const char *description, const char *plot_title,
                         const options *o, int indent, int first)
{
    simstore_table_info in;
    simstore_table_get_info(t, &in);
    simstore_histogram h;
    int want_hist = !o->brief;
    if ((want_hist || o->plot) && table_histogram(t, &in, o, &h))
        return CLI_EXIT_FAIL;
    if (o->plot)
        chart_add(plot_title, &in, &h);
    if (o->json) {
        if (!first)
            putchar(',');
        print_table_json(&in, description, want_hist ? &h : NULL);
        return CLI_EXIT_OK;
    }
    print_table_text(&in, description, indent);
    if (want_hist) {
        print_chart(&in, &h);
    }
    return CLI_EXIT_OK;
}

static int inspect_file(const char *path, const options *o)
{
    simstore_table *t;
    int rc = simstore_table_open(path, &t);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    if (o->json)
        printf("{\"kind\":\"table\",\"table\":");
    else
        printf("table file: %s\n", path);
    const char *base = strrchr(path, '/');
    int status = inspect_table(t, NULL, base ? base + 1 : path, o, 0, 1);
    if (o->json && status == CLI_EXIT_OK)
        printf("}\n");
    simstore_table_close(t);
    return status;
}

/* ---- a store ------------------------------------------------------------------ */

static int inspect_store(const char *path, const options *o)
{
    simstore *s;
    int rc = simstore_open(path, SIMSTORE_OPEN_READONLY, &s);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    simstore_stats st;
    rc = simstore_get_stats(s, &st);
    if (rc) {
        simstore_close(s);
        return cli_api_error(CMD, rc, "%s", path);
    }
    simstore_text_options text;
    simstore_get_text_options(s, &text);
    char text_desc[256];
    textopt_describe(&text, text_desc, sizeof text_desc);
    double floor_bits = st.table_fps ? 64.0 - log2((double)st.table_fps) + 1.4426950408889634 : 0;
    double bits = st.table_fps && st.tables
                      ? 8.0 * (double)st.table_bytes / (double)st.table_fps / st.tables
                      : 0;
    if (o->json) {
        printf("{\"kind\":\"store\",\"path\":");
        json_string(path);
        printf(",\"k\":%u,\"tables\":%u,\"design\":", st.k, st.tables);
        json_string(st.design);
        printf(",\"block_bytes\":%u,\"fingerprint_only\":%s,\"documents\":%" PRIu64
               ",\"fingerprints\":%" PRIu64 ",\"segment_count\":%" PRIu64 ",\"generation\":%" PRIu64
               ",\"table_fingerprints\":%" PRIu64 ",\"table_bytes\":%" PRIu64
               ",\"bits_per_fp_per_table\":%.4f,\"floor_bits_per_fp\":%.4f,\"lmdb_bytes\":%" PRIu64
               ",\"block_key_bytes\":%" PRIu64 ",\"fingerprint_version\":%u,\"text_options\":{",
               st.block_bytes, st.fingerprint_only ? "true" : "false", st.documents,
               st.fingerprints, st.segments, st.generation, st.table_fps, st.table_bytes, bits,
               floor_bits, st.lmdb_bytes, st.block_key_bytes, text.version);
        textopt_json(stdout, &text);
        printf("},");
        textopt_json_sketch(stdout, text.sketch);
        putchar(',');
        textopt_json_paragraphs(stdout, &st);
        printf(",\"boilerplate\":");
        boiler_json(stdout, simstore_get_boilerplate(s));
        printf(",");
        parts_json(stdout, &st);
        printf(",\"segments\":[");
    } else {
        printf("store: %s\n", path);
        printf("kind: %s\n", st.fingerprint_only ? "fingerprint-only" : "documents");
        printf("documents: %" PRIu64 "\n", st.documents);
        printf("distinct fingerprints: %" PRIu64 "%s\n", st.fingerprints,
               st.fingerprint_only ? "" : " (with documents)");
        printf("fingerprints in tables: %" PRIu64 " per table (%" PRIu64 " dead)\n", st.table_fps,
               st.fingerprint_only || st.table_fps < st.fingerprints
                   ? 0
                   : st.table_fps - st.fingerprints);
        printf("segments: %" PRIu64 "\n", st.segments);
        printf("generation: %" PRIu64 "\n", st.generation);
        printf("fingerprint version: %u\n", text.version);
        printf("text options: %s\n", text_desc);
        textopt_describe_sketch(text.sketch, text_desc, sizeof text_desc);
        printf("sketch: %s\n", text_desc);
        char boiler_desc[160];
        boiler_describe(simstore_get_boilerplate(s), boiler_desc, sizeof boiler_desc);
        printf("boilerplate: %s\n", boiler_desc);
        textopt_describe_paragraphs(&st, text_desc, sizeof text_desc);
        printf("paragraph index: %s\n", text_desc);
        printf("design: %s\n", st.design);
        printf("block bytes: %u\n", st.block_bytes);
        printf("table bytes: %" PRIu64 " (%.2f bits per fingerprint per table; floor %.2f)\n",
               st.table_bytes, bits, floor_bits);
        printf("block keys in RAM: %" PRIu64 " bytes\n", st.block_key_bytes);
        printf("lmdb bytes: %" PRIu64 "\n", st.lmdb_bytes);
        parts_text(stdout, &st);
    }
    int status = CLI_EXIT_OK;
    for (uint64_t i = 0; i < st.segments + st.paragraph_segments && status == CLI_EXIT_OK; i++) {
        simstore_segment_info seg;
        rc = simstore_get_segment(s, i, &seg);
        if (rc) {
            status = cli_api_error(CMD, rc, "%s", path);
            break;
        }
        char when[64];
        format_time(seg.created_unix, when, sizeof when);
        if (o->json) {
            printf("%s{\"id\":%" PRIu64 ",\"fingerprints\":%" PRIu64 ",\"created_unix\":%" PRIu64
                   "%s",
                   i ? "," : "", seg.id, seg.fingerprints, seg.created_unix,
                   seg.paragraphs ? ",\"paragraphs\":true" : "");
            if (seg.docfile_bytes)
                printf(",\"document_file\":{\"documents\":%" PRIu64 ",\"bytes\":%" PRIu64
                       ",\"block_bytes\":%" PRIu64 ",\"index_bytes\":%" PRIu64 "}",
                       seg.docfile_documents, seg.docfile_bytes, seg.docfile_block_bytes,
                       seg.docfile_index_bytes);
            printf(",\"tables\":[");
        } else {
            printf("\n%ssegment %" PRIu64 ": %" PRIu64 " %s%s, created %s\n",
                   seg.paragraphs ? "paragraph " : "", seg.id, seg.fingerprints,
                   seg.paragraphs ? "paragraph " : "", CLI_NOUN(seg.fingerprints, "fingerprint"),
                   when);
            if (seg.docfile_bytes) {
                double d = seg.docfile_documents ? (double)seg.docfile_documents : 1.0;
                printf("    document file: s%010" PRIu64 ".doc, %" PRIu64 " %s, %" PRIu64
                       " bytes (%.2f a document: blocks %.2f, indexes %.2f)\n",
                       seg.id, seg.docfile_documents, CLI_NOUN(seg.docfile_documents, "document"),
                       seg.docfile_bytes, (double)seg.docfile_bytes / d,
                       (double)seg.docfile_block_bytes / d, (double)seg.docfile_index_bytes / d);
            }
        }
        for (unsigned t = 0; t < seg.tables && status == CLI_EXIT_OK; t++) {
            char desc[160], line[192];
            simstore_describe_table(s, t, desc, sizeof desc);
            snprintf(line, sizeof line, "table %u: %s", t, desc);
            simstore_table *tab;
            rc = simstore_open_segment_table(s, i, t, &tab);
            if (rc) {
                status =
                    cli_api_error(CMD, rc, "%s: segment %" PRIu64 " table %u", path, seg.id, t);
                break;
            }
            char title[64];
            snprintf(title, sizeof title, "%ssegment %" PRIu64 " table %u",
                     seg.paragraphs ? "paragraph " : "", seg.id, t);
            status = inspect_table(tab, o->json ? desc : line, title, o, 1, t == 0);
            simstore_table_close(tab);
        }
        if (o->json && status == CLI_EXIT_OK)
            printf("]}");
    }
    if (o->json && status == CLI_EXIT_OK)
        printf("]}\n");
    simstore_close(s);
    return status;
}

/* A sharded store (format/shards.md): the whole (manifest checked, counts
 * summed), then every shard as a store. JSON: one object per line, the
 * whole first ("kind": "sharded"), then each shard's. */
static int inspect_sharded(const char *path, const options *o)
{
    simstore_sharded *sh;
    int rc = simstore_sharded_open(path, SIMSTORE_OPEN_READONLY, &sh);
    if (rc)
        return cli_api_error(CMD, rc, "%s", path);
    simstore_stats st;
    rc = simstore_sharded_get_stats(sh, &st);
    if (rc) {
        simstore_sharded_close(sh);
        return cli_api_error(CMD, rc, "%s", path);
    }
    unsigned r = simstore_sharded_count(sh);
    if (o->json) {
        printf("{\"kind\":\"sharded\",\"path\":");
        json_string(path);
        printf(",\"shards\":%u,\"assignment\":\"xxh3-64(id) mod %u\",\"k\":%u,"
               "\"documents\":%llu,\"fingerprints\":%llu,\"table_bytes\":%llu,"
               "\"lmdb_bytes\":%llu,\"shard_paths\":[",
               r, r, st.k, (unsigned long long)st.documents, (unsigned long long)st.fingerprints,
               (unsigned long long)st.table_bytes, (unsigned long long)st.lmdb_bytes);
        for (unsigned i = 0; i < r; i++) {
            if (i)
                putchar(',');
            json_string(simstore_sharded_shard_path(sh, i));
        }
        printf("]}\n");
    } else {
        printf("sharded store: %s\n", path);
        printf("manifest: %s/%s: %u %s, document on shard XXH3-64(id) mod %u\n", path,
               SIMSTORE_MANIFEST_NAME, r, r == 1 ? "shard" : "shards", r);
        printf("documents: %llu\n", (unsigned long long)st.documents);
        printf("fingerprints: %llu (each shard's distinct ones, summed)\n",
               (unsigned long long)st.fingerprints);
    }
    int status = CLI_EXIT_OK;
    for (unsigned i = 0; i < r && status == CLI_EXIT_OK; i++) {
        if (!o->json)
            printf("\n== shard %u of %u ==\n", i, r);
        status = inspect_store(simstore_sharded_shard_path(sh, i), o);
    }
    simstore_sharded_close(sh);
    return status;
}

int cmd_inspect(int argc, char **argv)
{
    enum { OPT_JSON = 1, OPT_EXACT, OPT_SAMPLE, OPT_BRIEF, OPT_PLOT };
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"exact", no_argument, NULL, OPT_EXACT},
        {"sample", required_argument, NULL, OPT_SAMPLE},
        {"brief", no_argument, NULL, OPT_BRIEF},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    options o = {0, 0, DEFAULT_SAMPLE_BLOCKS, NULL};
    int exact = 0, sampled = 0, c;
    unsigned long long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSON: o.json = 1; break;
        case OPT_BRIEF: o.brief = 1; break;
        case OPT_PLOT:
            if (!*optarg)
                return cli_usage_error(CMD, "--plot takes a file name");
            o.plot = optarg;
            break;
        case OPT_EXACT: exact = 1; break;
        case OPT_SAMPLE:
            if (cli_parse_uint(optarg, 1, UINT64_MAX, &v))
                return cli_usage_error(CMD, "--sample takes a block count >= 1, not '%s'", optarg);
            o.sample = v;
            sampled = 1;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_bad_option(CMD, c, argv, optind);
        }
    }
    if (exact && sampled)
        return cli_usage_error(CMD, "give --exact or --sample, not both");
    if (exact)
        o.sample = 0;
    if (optind >= argc)
        return cli_usage_error(CMD, "missing STORE or FILE");
    const char *path = cli_store_path(argv[optind++]);
    if (optind < argc)
        return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    struct stat st;
    if (stat(path, &st) != 0)
        return cli_error(CMD, "%s: no such store or table file", path);
    if (o.plot && !(chart.data = plot_data_file(chart.path, sizeof chart.path)))
        return cli_error(CMD, "--plot: cannot create a temporary file: %s", strerror(errno));
    int status = !S_ISDIR(st.st_mode)        ? inspect_file(path, &o)
                 : simstore_is_sharded(path) ? inspect_sharded(path, &o)
                                             : inspect_store(path, &o);
    if (o.plot) {
        if (status == CLI_EXIT_OK)
            status = chart_draw(path, o.plot);
        else
            fclose(chart.data);
        unlink(chart.path);
    }
    if (fflush(stdout) != 0 && status == CLI_EXIT_OK)
        status = cli_error(CMD, "cannot write standard output: %s", strerror(errno));
    return status;
}
