/* ingest.c: input files into a builder: record formats, per-record checks and
 * messages, fingerprinting of JSON Lines documents. A source value packs the
 * input's index (high 20 bits) and line number (low 44 bits). */
#include "ingest.h"

#include "cli.h"
#include "input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_BITS 44
#define DEFAULT_MAX_ERRORS 20

int ingest_format_parse(const char *name)
{
    if (strcmp(name, "tsv") == 0)
        return INGEST_TSV;
    if (strcmp(name, "fp") == 0)
        return INGEST_FP;
    if (strcmp(name, "jsonl") == 0)
        return INGEST_JSONL;
    if (strcmp(name, "hex") == 0)
        return INGEST_HEX;
    if (strcmp(name, "u64") == 0)
        return INGEST_U64;
    return -1;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int format_for(const char *path, ingest_format f)
{
    if (f != INGEST_BY_EXTENSION)
        return f;
    if (ends_with(path, ".tsv"))
        return INGEST_TSV;
    if (ends_with(path, ".fp"))
        return INGEST_FP;
    if (ends_with(path, ".jsonl"))
        return INGEST_JSONL;
    if (ends_with(path, ".hex"))
        return INGEST_HEX;
    if (ends_with(path, ".u64"))
        return INGEST_U64;
    return -1;
}

void ingest_source_name(void *ctx, uint64_t source, char *buf, size_t size)
{
    char **paths = (char **)ctx;
    uint64_t file = source >> LINE_BITS;
    uint64_t line = source & ((1ULL << LINE_BITS) - 1);
    const char *name = strcmp(paths[file], "-") == 0 ? "<stdin>" : paths[file];
    snprintf(buf, size, "%s:%llu", name, (unsigned long long)line);
}

typedef struct ingest_state {
    simstore_builder *b;
    const ingest_options *o;
    ingest_result *res;
    simstore_fingerprinter *fpr;
    unsigned max_errors;
    int fatal;
} ingest_state;

/* Report a bad record; returns nonzero when reading should stop. */
static int bad_record(ingest_state *st, const char *message)
{
    st->res->bad++;
    fprintf(stderr, "simstore %s: %s\n", st->o->cmd, message);
    if (st->res->bad >= st->max_errors) {
        fprintf(stderr, "simstore %s: stopping after %u bad records\n", st->o->cmd,
                st->max_errors);
        return 1;
    }
    return 0;
}

static int builder_failed(ingest_state *st, int rc, const char *file, unsigned long long line)
{
    fprintf(stderr, "simstore %s: %s:%llu: %s\n", st->o->cmd, file, line,
            *simstore_last_error() ? simstore_last_error() : simstore_strerror(rc));
    st->fatal = 1;
    return 1;
}

/* Documents from TSV or JSON Lines. Returns nonzero to stop. */
static int ingest_documents(ingest_state *st, const char *path, unsigned index, int fmt)
{
    input_reader *r;
    input_format in = fmt == INGEST_TSV ? INPUT_ID_FP : fmt == INGEST_FP ? INPUT_FP_ID : INPUT_JSONL;
    if (input_open(&r, in, path) != 0) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, path, strerror(errno));
        st->fatal = 1;
        return 1;
    }
    input_record rec;
    int rc;
    while ((rc = input_next(r, &rec)) != 0) {
        if (rc == -2) {
            fprintf(stderr, "simstore %s: %s\n", st->o->cmd, input_error(r));
            st->fatal = 1;
            break;
        }
        if (rc == -1) {
            if (bad_record(st, input_error(r)))
                break;
            continue;
        }
        if (rec.line >= (1ULL << LINE_BITS)) {
            fprintf(stderr, "simstore %s: %s: too many lines\n", st->o->cmd, rec.file);
            st->fatal = 1;
            break;
        }
        uint64_t fp = rec.fingerprint;
        if (fmt == INGEST_JSONL) {
            unsigned flags = 0;
            int e = simstore_fingerprint_text(st->fpr, rec.text, rec.text_len, &fp, &flags);
            if (e) {
                builder_failed(st, e, rec.file, rec.line);
                break;
            }
            if (flags & SIMSTORE_FP_EMPTY) {
                st->res->empty_docs++;
                fprintf(stderr, "simstore %s: warning: %s:%llu: document '%.*s' has no words\n",
                        st->o->cmd, rec.file, rec.line, (int)rec.id_len, rec.id);
            }
        }
        simstore_doc d = {rec.id, rec.id_len, fp, rec.meta, rec.meta ? strlen(rec.meta) : 0,
                          (uint64_t)index << LINE_BITS | rec.line};
        int e = simstore_builder_add(st->b, &d);
        if (e) {
            builder_failed(st, e, rec.file, rec.line);
            break;
        }
        if (++st->res->records % 65536 == 0 && st->o->progress)
            st->o->progress(st->o->progress_ctx, "reading", st->res->records, 0);
    }
    input_close(r);
    return st->fatal || st->res->bad >= st->max_errors;
}

/* Bare fingerprints, one hex16 per line. */
static int ingest_hex(ingest_state *st, const char *path)
{
    cli_lines lines;
    if (cli_lines_open(&lines, path) != 0) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, path, strerror(errno));
        st->fatal = 1;
        return 1;
    }
    size_t len;
    int got;
    char msg[1200];
    while ((got = cli_lines_next(&lines, &len)) == 1) {
        if (len == 0)
            continue;
        uint64_t fp;
        if (cli_parse_hex64(lines.line, &fp) != 0) {
            snprintf(msg, sizeof msg, "%s:%llu: expected 16 hex digits, got '%.40s'", lines.name,
                     lines.lineno, lines.line);
            if (bad_record(st, msg))
                break;
            continue;
        }
        int e = simstore_builder_add_fp(st->b, fp);
        if (e) {
            builder_failed(st, e, lines.name, lines.lineno);
            break;
        }
        if (++st->res->records % (1u << 20) == 0 && st->o->progress)
            st->o->progress(st->o->progress_ctx, "reading", st->res->records, 0);
    }
    if (got < 0) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, lines.name, strerror(errno));
        st->fatal = 1;
    }
    cli_lines_close(&lines);
    return st->fatal || st->res->bad >= st->max_errors;
}

/* Bare fingerprints as raw little-endian 64-bit values. */
static int ingest_u64(ingest_state *st, const char *path)
{
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, path, strerror(errno));
        st->fatal = 1;
        return 1;
    }
    enum { CHUNK = 1 << 16 };
    uint8_t *buf = malloc(CHUNK * 8);
    uint64_t offset = 0;
    size_t got;
    while (buf && (got = fread(buf, 1, CHUNK * 8, f)) > 0) {
        if (got % 8) {
            /* A short read mid-file is legal: top up to whole values. */
            size_t more = fread(buf + got, 1, 8 - got % 8, f);
            got += more;
            if (got % 8) {
                fprintf(stderr, "simstore %s: %s: length is not a multiple of 8 bytes\n",
                        st->o->cmd, name);
                st->fatal = 1;
                break;
            }
        }
        for (size_t i = 0; i < got; i += 8) {
            uint64_t v = 0;
            for (int j = 7; j >= 0; j--)
                v = v << 8 | buf[i + (size_t)j];
            int e = simstore_builder_add_fp(st->b, v);
            if (e) {
                builder_failed(st, e, name, (offset + i) / 8 + 1);
                break;
            }
        }
        if (st->fatal)
            break;
        offset += got;
        st->res->records += got / 8;
        if (st->o->progress)
            st->o->progress(st->o->progress_ctx, "reading", st->res->records, 0);
    }
    if (!buf || ferror(f)) {
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, name, buf ? "read error" : "out of memory");
        st->fatal = 1;
    }
    free(buf);
    if (!is_stdin)
        fclose(f);
    return st->fatal;
}

int ingest_inputs(simstore_builder *b, char **paths, int npaths, const ingest_options *o,
                  ingest_result *res)
{
    memset(res, 0, sizeof *res);
    ingest_state st = {b, o, res, NULL, o->max_errors ? o->max_errors : DEFAULT_MAX_ERRORS, 0};
    for (int i = 0; i < npaths && !st.fatal; i++) {
        int fmt = format_for(paths[i], o->format);
        if (fmt < 0) {
            fprintf(stderr,
                    "simstore %s: %s: cannot tell the format from the name; use --format "
                    "tsv|fp|jsonl%s\n",
                    o->cmd, paths[i], o->fingerprint_only ? "|hex|u64" : "");
            st.fatal = 1;
            break;
        }
        int fp_format = fmt == INGEST_HEX || fmt == INGEST_U64;
        if (fp_format != (o->fingerprint_only != 0)) {
            fprintf(stderr, "simstore %s: %s: %s\n", o->cmd, paths[i],
                    o->fingerprint_only
                        ? "a fingerprint-only store reads --format hex or u64"
                        : "bare fingerprints (hex, u64) need a fingerprint-only store");
            st.fatal = 1;
            break;
        }
        if (fmt == INGEST_JSONL && !st.fpr) {
            int e = simstore_fingerprinter_new(o->text, &st.fpr);
            if (e) {
                fprintf(stderr, "simstore %s: %s\n", o->cmd, simstore_last_error());
                st.fatal = 1;
                break;
            }
        }
        int stop = fmt == INGEST_HEX   ? ingest_hex(&st, paths[i])
                   : fmt == INGEST_U64 ? ingest_u64(&st, paths[i])
                                       : ingest_documents(&st, paths[i], (unsigned)i, fmt);
        if (stop)
            break;
    }
    simstore_fingerprinter_free(st.fpr);
    if (st.fatal)
        return 2;
    return res->bad ? 1 : 0;
}
