/* cmd_fingerprint.c: `simstore fingerprint`: documents (plain files or JSON
 * Lines) to "HEX16<TAB>id" lines, whole or per paragraph, and with --sketch
 * each document's sketch as a third column. */
#include "cli.h"
#include "commands.h"
#include "input.h"
#include "textopts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const CMD = "fingerprint";

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: simstore fingerprint [OPTIONS] [FILE...]\n"
            "\n"
            "Print the 64-bit simhash of each document as HEX16<TAB>ID (16 lowercase hex\n"
            "digits), computed as format/fingerprint.md specifies. Reads standard input\n"
            "when no FILE is given or FILE is '-'.\n"
            "\n"
            "Input:\n"
            "      --jsonl          one record per line: {\"id\": string or integer,\n"
            "                       \"text\": string[, \"meta\": any]}; without it each FILE\n"
            "                       is one document whose id is its path ('-' for stdin);\n"
            "                       other members are ignored, and:\n" INPUT_FIELD_HELP
            "      --paragraphs     one line per paragraph (lines separated by blank\n"
            "                       lines), id ID#N, N counting paragraphs with words\n"
            "\n"
            "Fingerprint:\n"
            "      --fp-version 1|2|3\n"
            "                       fingerprint algorithm (default %d: as 2, and Han/kana\n"
            "                       also joined across spaces; 2: NFKC with case folding,\n"
            "                       Han/kana joined across line breaks, CJK shingles of\n"
            "                       their own width; 1: as before)\n"
            "      --shingle W      words per feature, 1..%d (default %d)\n"
            "      --cjk-shingle C  versions 2, 3: tokens per feature starting at a Han or\n"
            "                       kana token, 1..%d (default %d)\n"
            "      --weights tf|length|log\n"
            "                       term frequency (default), Yu, Hu & Zhang's\n"
            "                       tf + lambda*[length >= 4], or (2, 3) 1 + ln(tf)\n"
            "      --lambda X       lambda for --weights length, 0..%g (default %g)\n"
            "      --cjk auto|friso|bigram\n"
            "                       Han text: friso words (auto: when its dictionary\n"
            "                       loads) or character bigrams\n"
            "      --store STORE    as STORE's documents are: its text options (those\n"
            "                       given replace only themselves) and without its\n"
            "                       boilerplate lines (build --boilerplate auto); for\n"
            "                       fingerprints to add to it as .fp or .tsv\n"
            "      --sketch none|minhash16|minhash32|minhash64|minhash128|minhash256\n"
            "                       also print each document's sketch of its shingle\n"
            "                       set (format/sketch.md) as a third column, its bytes\n"
            "                       in hex (default none; not with --paragraphs)\n"
            "\n"
            "  -v, --verbose        report the options, the CJK segmenter and totals on\n"
            "                       stderr\n"
            "  -h, --help           show this help\n"
            "\n"
            "A malformed record is reported as FILE:LINE: message and skipped; a\n"
            "document without words gets fingerprint 0000000000000000 and a warning;\n"
            "one that is only STORE's boilerplate, its whole text's, and a warning.\n"
            "Exit status: 0 success, 1 some input failed, 2 usage error.\n",
            SIMSTORE_FP_VERSION_DEFAULT, SIMSTORE_SHINGLE_MAX, SIMSTORE_SHINGLE_DEFAULT,
            SIMSTORE_SHINGLE_MAX, SIMSTORE_CJK_SHINGLE_DEFAULT, SIMSTORE_LAMBDA_MAX,
            SIMSTORE_LAMBDA_DEFAULT);
}

typedef struct run_state {
    simstore_fingerprinter *fpr;
    size_t sketch_bytes; /* --sketch: its bytes; 0: none */
    int paragraphs;
    int failed;
    unsigned long long documents, printed, bytes;
    const input_record *rec; /* the document whose paragraphs are printed */
} run_state;

/* "FILE:LINE" or "FILE" for messages about a record. */
static const char *where(const input_record *rec, char buf[1100])
{
    if (rec->line)
        snprintf(buf, 1100, "%s:%llu", rec->file, rec->line);
    else
        snprintf(buf, 1100, "%s", rec->file);
    return buf;
}

static void print_line(uint64_t fp, const input_record *rec, unsigned long paragraph,
                       const uint8_t *sketch, size_t sketch_bytes)
{
    char hex[17];
    cli_format_hex64(fp, hex);
    fputs(hex, stdout);
    putchar('\t');
    fwrite(rec->id, 1, rec->id_len, stdout);
    if (paragraph)
        printf("#%lu", paragraph);
    if (sketch_bytes) {
        putchar('\t');
        for (size_t i = 0; i < sketch_bytes; i++)
            printf("%02x", sketch[i]);
    }
    putchar('\n');
}

static int on_paragraph(void *ctx, const simstore_paragraph *para)
{
    run_state *st = ctx;
    print_line(para->fingerprint, st->rec, para->number, NULL, 0);
    st->printed++;
    return 0;
}

static void fingerprint_record(run_state *st, const input_record *rec)
{
    char loc[1100];
    unsigned flags = 0;
    uint64_t fp = 0;
    int rc;
    st->documents++;
    st->bytes += rec->text_len;
    if (rec->has_fp && !st->paragraphs && !st->sketch_bytes) {
        /* A record with "fp" and no text: its fingerprint as given. */
        print_line(rec->fingerprint, rec, 0, NULL, 0);
        st->printed++;
        return;
    }
    if (rec->has_fp) {
        char id[CLI_ESCAPED_ID_BYTES];
        cli_error(CMD, "%s: '%s' gives a fingerprint, not a text: no %s", where(rec, loc),
                  cli_escape(rec->id, rec->id_len, id, sizeof id),
                  st->paragraphs ? "paragraphs" : "sketch");
        st->failed = 1;
        return;
    }
    if (st->paragraphs) {
        st->rec = rec;
        rc = simstore_fingerprint_paragraphs(st->fpr, rec->text, rec->text_len, on_paragraph, st,
                                             NULL, &flags);
    } else {
        uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
        rc = st->sketch_bytes
                 ? simstore_fingerprint_sketch(st->fpr, rec->text, rec->text_len, &fp, sketch,
                                               &flags)
                 : simstore_fingerprint_text(st->fpr, rec->text, rec->text_len, &fp, &flags);
        if (rc == 0) {
            print_line(fp, rec, 0, sketch, st->sketch_bytes);
            st->printed++;
        }
    }
    if (rc) {
        char id[CLI_ESCAPED_ID_BYTES];
        cli_api_error(CMD, rc, "%s: '%s'", where(rec, loc),
                      cli_escape(rec->id, rec->id_len, id, sizeof id));
        st->failed = 1;
        return;
    }
    if (flags & SIMSTORE_FP_INVALID_UTF8)
        cli_warn(CMD, "%s: document '%.*s': invalid UTF-8 read as U+FFFD (a separator)",
                 where(rec, loc), (int)rec->id_len, rec->id);
    if (flags & SIMSTORE_FP_ONLY_BOILERPLATE)
        cli_warn(CMD, "%s: document '%.*s' is only boilerplate: %s", where(rec, loc),
                 (int)rec->id_len, rec->id,
                 st->paragraphs ? "no paragraphs printed" : "fingerprinted whole");
    else if (flags & SIMSTORE_FP_EMPTY)
        cli_warn(CMD, "%s: document '%.*s' has no words: %s", where(rec, loc), (int)rec->id_len,
                 rec->id,
                 st->paragraphs ? "no paragraphs printed" : "fingerprint 0000000000000000");
}

static void run_input(run_state *st, input_format format, const input_fields *fields,
                      const char *path)
{
    input_reader *r;
    if (input_open(&r, format, path) != 0 || input_set_fields(r, fields) != 0) {
        cli_error(CMD, "%s: %s", path, strerror(errno));
        st->failed = 1;
        return;
    }
    input_record rec;
    int got;
    while ((got = input_next(r, &rec)) != 0) {
        if (got == 1) {
            fingerprint_record(st, &rec);
            if (ferror(stdout))
                break; /* stdout is broken: reported once, after the inputs */
            continue;
        }
        cli_error(CMD, "%s", input_error(r));
        st->failed = 1;
        if (got == -2)
            break;
    }
    input_close(r);
}

int cmd_fingerprint(int argc, char **argv)
{
    enum { OPT_JSONL = 256, OPT_PARAGRAPHS, OPT_STORE, OPT_SKETCH };
    static const struct option longopts[] = {
        {"jsonl", no_argument, NULL, OPT_JSONL},
        {"paragraphs", no_argument, NULL, OPT_PARAGRAPHS},
        {"store", required_argument, NULL, OPT_STORE},
        {"sketch", required_argument, NULL, OPT_SKETCH},
        TEXTOPT_LONG_OPTIONS,
        INPUT_FIELD_LONG_OPTIONS,
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    textopt_state text;
    textopt_init(&text);
    input_fields fields;
    input_fields_init(&fields);
    int fields_given = 0;
    int jsonl = 0, paragraphs = 0, verbose = 0, c;
    const char *store_path = NULL;
    simstore_sketch_kind sketch = SIMSTORE_SKETCH_NONE;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_JSONL: jsonl = 1; break;
        case OPT_PARAGRAPHS: paragraphs = 1; break;
        case OPT_STORE: store_path = cli_store_path(optarg); break;
        case OPT_SKETCH:
            if (cli_sketch_option(CMD, optarg, &sketch))
                return CLI_EXIT_USAGE;
            break;
        case 'v': verbose = 1; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case '?':
        case ':': return cli_bad_option(CMD, c, argv, optind);
        default: {
            int t =
                textopt_or_field_or_bad_option(CMD, c, argv, optind, &text, &fields, &fields_given);
            if (t >= 0)
                return t;
        }
        }
    }
    if (textopt_finish(CMD, &text))
        return CLI_EXIT_USAGE;
    if (fields_given && !jsonl)
        return cli_usage_error(CMD, "--id-field, --text-field, --meta-fields, --strict and "
                                    "--id-from-line need --jsonl");
    if (paragraphs && sketch != SIMSTORE_SKETCH_NONE)
        return cli_usage_error(CMD, "--sketch sketches whole documents: not with --paragraphs");
    /* With --store: its options, those given over them, and its set. */
    simstore *store = NULL;
    if (store_path) {
        int rc = simstore_open(store_path, SIMSTORE_OPEN_READONLY, &store);
        if (rc)
            return cli_api_error(CMD, rc, "%s", store_path);
        simstore_text_options stored;
        simstore_get_text_options(store, &stored);
        textopt_over(&text, &stored);
        text.opts = stored;
    }
    simstore_text_options opts = text.opts;
    opts.sketch = sketch;

    /* Which segmenter --cjk auto picks (for the warning below) and the
     * description --verbose prints load friso's dictionary (~0.08 s); a
     * --cjk friso fingerprinter (as --store's options name it) loads it only
     * at its first Han text. */
    const char *segmenter = opts.cjk == SIMSTORE_CJK_BIGRAM ? "character bigrams (--cjk bigram)"
                                                            : "friso (--cjk friso)";
    int auto_mode = SIMSTORE_CJK_BIGRAM;
    if (opts.cjk == SIMSTORE_CJK_AUTO || (opts.cjk == SIMSTORE_CJK_FRISO && verbose))
        auto_mode = simstore_cjk_segmenter(&segmenter);
    run_state st;
    memset(&st, 0, sizeof st);
    st.paragraphs = paragraphs;
    st.sketch_bytes = simstore_sketch_bytes(sketch);
    int rc = simstore_fingerprinter_new(&opts, &st.fpr);
    if (rc == SIMSTORE_OK && store)
        rc = simstore_fingerprinter_set_boilerplate(st.fpr, simstore_get_boilerplate(store));
    if (rc) {
        simstore_fingerprinter_free(st.fpr);
        simstore_close(store);
        return cli_api_error(CMD, rc, "cannot fingerprint with these options");
    }
    if (opts.cjk == SIMSTORE_CJK_AUTO && auto_mode != SIMSTORE_CJK_FRISO)
        /* Han text then hashes differently from a machine with friso: say so. */
        cli_warn(CMD, "Han text is segmented into %s", segmenter);
    if (verbose) {
        char desc[256];
        textopt_describe(&opts, desc, sizeof desc);
        fprintf(stderr, "simstore %s: options: %s\n", CMD, desc);
        fprintf(stderr, "simstore %s: CJK segmenter: %s\n", CMD, segmenter);
    }

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    input_format format = jsonl ? INPUT_JSONL : INPUT_PLAIN;
    if (optind >= argc)
        run_input(&st, format, &fields, "-");
    for (int i = optind; i < argc && !ferror(stdout); i++)
        run_input(&st, format, &fields, argv[i]);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    simstore_fingerprinter_free(st.fpr);
    simstore_close(store);

    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error(CMD, "writing standard output: %s", strerror(errno ? errno : EIO));
        return CLI_EXIT_FAIL;
    }
    if (verbose) {
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        fprintf(stderr,
                "simstore %s: %llu %s, %llu %s printed, %llu %s of text, %.3f s (%.1f MB/s)%s\n",
                CMD, st.documents, CLI_NOUN(st.documents, "document"), st.printed,
                CLI_NOUN(st.printed, "line"), st.bytes, CLI_NOUN(st.bytes, "byte"), secs,
                secs > 0 ? (double)st.bytes / 1e6 / secs : 0.0, st.failed ? ", with errors" : "");
    }
    return st.failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}
