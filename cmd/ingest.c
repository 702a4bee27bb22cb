/* ingest.c: input files into a builder, in input order, on N threads.
 *
 * A reader thread opens each input (decompressed by its stream, on a thread
 * of its own) and cuts it into batches of whole lines (or of whole raw
 * values); the library's ordered pool (simstore_ordered) has N workers parse
 * and fingerprint whole batches and gives them back to the calling thread
 * strictly in the order they were read, and the calling thread hands them to
 * the builder. So the builder sees the same records in the same order, and
 * every message comes out the same, whatever the thread count. The reader
 * cycles through INGEST_RING_SLOTS(N) batch buffers with one fewer in flight
 * in the pool, so it never refills a buffer still being parsed or drained.
 *
 * A source value packs the input's index (high 20 bits) and line number (low
 * 44 bits). */
#include "ingest.h"
#include "simstore_unstable.h"

#include "cli.h"
#include "input.h"
#include "stream.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_BITS 44
#define MAX_INPUTS (1u << 20)
#define DEFAULT_MAX_ERRORS 20
#define MAX_THREADS 64
#define READ_CHUNK ((size_t)64 << 10)

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

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

int ingest_format_of_name(const char *path)
{
    size_t n = strlen(path);
    static const char *const compressed[] = {".gz", ".zst", ".zstd"};
    for (size_t i = 0; i < sizeof compressed / sizeof *compressed; i++)
        if (ends_with(path, n, compressed[i])) {
            n -= strlen(compressed[i]);
            break;
        }
    static const struct {
        const char *ext;
        int format;
    } names[] = {{".tsv", INGEST_TSV},
                 {".fp", INGEST_FP},
                 {".jsonl", INGEST_JSONL},
                 {".hex", INGEST_HEX},
                 {".u64", INGEST_U64}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (ends_with(path, n, names[i].ext))
            return names[i].format;
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

/* ---- batches ------------------------------------------------------------ */

enum rec_kind {
    REC_DOC,   /* a document: id, fingerprint, metadata */
    REC_FP,    /* a bare fingerprint */
    REC_BAD,   /* a malformed record: the message is at text_off */
    REC_FAILED /* parsing or fingerprinting failed (no memory, ...): rc */
};

/* One parsed record of a batch; strings live in the batch's `out` arena. */
typedef struct ingest_rec {
    unsigned long long line;
    uint64_t fp;
    size_t text_off, text_len; /* the id, or the message of REC_BAD */
    size_t meta_off, meta_len;
    size_t raw_off, raw_len; /* the line as read, in the batch's `in` */
    uint64_t note_value;
    size_t note_off, note_len;
    size_t sketch_off; /* of the sketch in `out`, + 1; 0: none */
    double note_number;
    unsigned note_flags;
    size_t keys_off, nkeys;   /* line keys (ingest_options.line_keys), in `out` */
    size_t paras_off, nparas; /* paragraph fingerprints (text's paragraph_min_words),
                                 8-aligned in `out` */
    int rc;
    unsigned char kind, has_meta, empty, id_integer, has_note_text, only_boilerplate;
} ingest_rec;

enum slot_failure {
    FAIL_NONE = 0,
    FAIL_OPEN, /* the input could not be opened: "FILE: why" */
    FAIL_READ, /* it broke while reading fail_line: "FILE:LINE: why" */
    FAIL_SIZE, /* raw values: the length is not a multiple of 8 */
    FAIL_LINES /* more lines than a source value can number */
};

typedef struct slot {
    unsigned file_index;
    int format;
    unsigned long long first_line; /* of in[0]; for raw values, the value number */
    size_t nlines;                 /* lines (or values) in `in` */
    char *in;                      /* whole lines, each ending in '\n'; or values */
    size_t in_len, in_cap;
    int failure; /* after the lines: enum slot_failure */
    unsigned long long fail_line;
    char fail_msg[300];
    ingest_rec *recs;
    size_t nrecs, recs_cap;
    char *out;
    size_t out_len, out_cap;
} slot;

typedef struct worker_state worker_state;

typedef struct pipeline {
    simstore_ordered *pool;
    slot *ring; /* nslots batch buffers, used in turn */
    unsigned nslots;
    worker_state *workers; /* one per pool worker, set up on first use */
    /* inputs */
    char **paths;
    const char **names; /* for messages */
    const int *formats;
    int npaths;
    char *const *read_paths;
    /* parsing */
    const simstore_text_options *text;
    const simstore_boilerplate *boilerplate;
    int line_keys;
    const input_fields *fields;
    ingest_note_fn note;
    void *note_ctx;
    pthread_t reader;
    int reader_started;
} pipeline;

/* Make room for `need` more bytes in the growable buffer (*buf, *len, *cap). */
static int reserve(char **buf, size_t len, size_t *cap, size_t need)
{
    if (need <= *cap - len)
        return 0;
    size_t c = *cap ? *cap : 4096;
    while (c - len < need) {
        if (c > SIZE_MAX / 2)
            return -1;
        c *= 2;
    }
    char *g = realloc(*buf, c);
    if (!g)
        return -1;
    *buf = g;
    *cap = c;
    return 0;
}

/* ---- the reader thread -------------------------------------------------- */

/* The buffer for batch `seq`. The pool keeps one fewer batch in flight than
 * there are buffers, so once batch seq - 1 was submitted, batch seq - nslots
 * (this buffer's last) has been drained. */
static slot *reader_acquire(pipeline *pl, uint64_t seq)
{
    slot *s = &pl->ring[seq % pl->nslots];
    s->nlines = 0;
    s->in_len = 0;
    s->failure = FAIL_NONE;
    s->fail_line = 0;
    s->fail_msg[0] = '\0';
    return s;
}

/* Hand a filled batch to the pool; nonzero when the work was stopped. */
static int reader_publish(pipeline *pl, slot *s)
{
    return simstore_ordered_submit(pl->pool, s) != SIMSTORE_OK;
}

typedef struct reader_state {
    pipeline *pl;
    uint64_t seq;
    slot *s;
    char *carry; /* a partial line moved from a full batch to the next */
    size_t carry_len, carry_cap;
} reader_state;

/* Start the next batch of input `index`, at line `first_line`. */
static void reader_next_slot(reader_state *rs, unsigned index, unsigned long long first_line)
{
    rs->s = reader_acquire(rs->pl, rs->seq++);
    rs->s->file_index = index;
    rs->s->format = rs->pl->formats[index];
    rs->s->first_line = first_line;
}

/* Publish the current batch; with `fail`, it ends the whole input. Returns
 * nonzero when the work was stopped (the batch then goes nowhere). */
static int reader_finish_slot(reader_state *rs, int fail, unsigned long long fail_line,
                              const char *msg)
{
    slot *s = rs->s;
    s->failure = fail;
    s->fail_line = fail_line;
    if (msg)
        snprintf(s->fail_msg, sizeof s->fail_msg, "%s", msg);
    rs->s = NULL;
    return reader_publish(rs->pl, s);
}

/* Raw little-endian values: batches of whole values. Returns 0 at the end of
 * the input, -1 when everything stops. */
static int read_values(reader_state *rs, unsigned index, cli_stream *st)
{
    unsigned long long first = 1;
    reader_next_slot(rs, index, first);
    for (;;) {
        slot *s = rs->s;
        if (reserve(&s->in, s->in_len, &s->in_cap, INGEST_BATCH_BYTES - s->in_len + 8)) {
            reader_finish_slot(rs, FAIL_READ, first + s->nlines, "out of memory");
            return -1;
        }
        ssize_t n = cli_stream_read(st, s->in + s->in_len, INGEST_BATCH_BYTES - s->in_len);
        if (n < 0) {
            s->nlines = s->in_len / 8;
            s->in_len = s->nlines * 8;
            reader_finish_slot(rs, FAIL_READ, first + s->nlines, cli_stream_error(st));
            return -1;
        }
        if (n == 0) {
            int odd = s->in_len % 8 != 0;
            s->nlines = s->in_len / 8;
            s->in_len = s->nlines * 8;
            if (reader_finish_slot(rs, odd ? FAIL_SIZE : FAIL_NONE, 0, NULL))
                return -1;
            return odd ? -1 : 0;
        }
        s->in_len += (size_t)n;
        if (s->in_len == INGEST_BATCH_BYTES) {
            s->nlines = s->in_len / 8;
            first += s->nlines;
            if (reader_finish_slot(rs, FAIL_NONE, 0, NULL))
                return -1;
            reader_next_slot(rs, index, first);
        }
    }
}

/* Lines: batches of whole lines, each ending in '\n' (one is added to a last
 * line without). Returns 0 at the end of the input, -1 when everything stops. */
static int read_lines(reader_state *rs, unsigned index, cli_stream *st)
{
    unsigned long long next_line = 1;
    reader_next_slot(rs, index, next_line);
    size_t scan = 0, cut = 0; /* newlines counted up to scan; whole lines end at cut */
    for (;;) {
        slot *s = rs->s;
        if (next_line + s->nlines >= (1ULL << LINE_BITS)) {
            s->in_len = cut;
            reader_finish_slot(rs, FAIL_LINES, next_line + s->nlines, NULL);
            return -1;
        }
        size_t want = READ_CHUNK;
        if (s->in_len < INGEST_BATCH_BYTES && INGEST_BATCH_BYTES - s->in_len < want)
            want = INGEST_BATCH_BYTES - s->in_len;
        if (reserve(&s->in, s->in_len, &s->in_cap, want + 1)) {
            s->in_len = cut;
            reader_finish_slot(rs, FAIL_READ, next_line + s->nlines, "out of memory");
            return -1;
        }
        ssize_t n = cli_stream_read(st, s->in + s->in_len, want);
        if (n < 0) {
            /* The lines read whole go first; the one being read broke. */
            s->in_len = cut;
            reader_finish_slot(rs, FAIL_READ, next_line + s->nlines, cli_stream_error(st));
            return -1;
        }
        if (n == 0) {
            if (s->in_len > cut) {
                s->in[s->in_len++] = '\n';
                s->nlines++;
            }
            return reader_finish_slot(rs, FAIL_NONE, 0, NULL) ? -1 : 0;
        }
        s->in_len += (size_t)n;
        while (scan < s->in_len && s->nlines < INGEST_BATCH_LINES) {
            const char *nl = memchr(s->in + scan, '\n', s->in_len - scan);
            if (!nl) {
                scan = s->in_len;
                break;
            }
            s->nlines++;
            scan = cut = (size_t)(nl - s->in) + 1;
        }
        if (s->nlines == INGEST_BATCH_LINES || (cut > 0 && s->in_len >= INGEST_BATCH_BYTES)) {
            /* Cut after the last whole line; the rest starts the next batch. */
            size_t rest = s->in_len - cut;
            if (reserve(&rs->carry, 0, &rs->carry_cap, rest + 1)) {
                s->in_len = cut;
                reader_finish_slot(rs, FAIL_READ, next_line + s->nlines, "out of memory");
                return -1;
            }
            memcpy(rs->carry, s->in + cut, rest);
            s->in_len = cut;
            next_line += s->nlines;
            if (reader_finish_slot(rs, FAIL_NONE, 0, NULL))
                return -1;
            reader_next_slot(rs, index, next_line);
            s = rs->s;
            if (reserve(&s->in, 0, &s->in_cap, rest + READ_CHUNK + 1)) {
                reader_finish_slot(rs, FAIL_READ, next_line, "out of memory");
                return -1;
            }
            memcpy(s->in, rs->carry, rest);
            s->in_len = rest;
            scan = cut = 0;
        }
    }
}

static void *reader_main(void *arg)
{
    pipeline *pl = (pipeline *)arg;
    reader_state rs = {pl, 0, NULL, NULL, 0, 0};
    for (int i = 0; i < pl->npaths; i++) {
        cli_stream *st = NULL;
        const char *path = pl->read_paths && pl->read_paths[i] ? pl->read_paths[i] : pl->paths[i];
        if (cli_stream_open(&st, path) != 0) {
            int err = errno;
            reader_next_slot(&rs, (unsigned)i, 1);
            reader_finish_slot(&rs, FAIL_OPEN, 0, strerror(err));
            break;
        }
        int rc = pl->formats[i] == INGEST_U64 ? read_values(&rs, (unsigned)i, st)
                                              : read_lines(&rs, (unsigned)i, st);
        cli_stream_close(st);
        if (rc)
            break;
    }
    free(rs.carry);
    simstore_ordered_finish(pl->pool);
    return NULL;
}

/* ---- the worker threads ------------------------------------------------- */

struct worker_state {
    int ready;
    simstore_fingerprinter *fpr;
    int fpr_rc;
    input_parser *parsers[INGEST_U64 + 1];
};

static ingest_rec *new_rec(slot *s, unsigned long long line)
{
    if (s->nrecs == s->recs_cap) {
        size_t cap = s->recs_cap ? s->recs_cap * 2 : 256;
        ingest_rec *g = realloc(s->recs, cap * sizeof *g);
        if (!g)
            return NULL;
        s->recs = g;
        s->recs_cap = cap;
    }
    ingest_rec *r = &s->recs[s->nrecs++];
    memset(r, 0, sizeof *r);
    r->line = line;
    return r;
}

/* Copy len bytes into the batch's out arena (NUL-terminated). */
static int out_copy(slot *s, const char *data, size_t len, size_t *off)
{
    if (reserve(&s->out, s->out_len, &s->out_cap, len + 1))
        return -1;
    *off = s->out_len;
    if (len)
        memcpy(s->out + s->out_len, data, len);
    s->out[s->out_len + len] = '\0';
    s->out_len += len + 1;
    return 0;
}

static void set_bad(slot *s, ingest_rec *r, const char *msg)
{
    r->kind = REC_BAD;
    if (out_copy(s, msg, strlen(msg), &r->text_off) != 0) {
        r->kind = REC_FAILED;
        r->rc = SIMSTORE_ENOMEM;
    } else {
        r->text_len = strlen(msg);
    }
}

static void parse_hex(slot *s, ingest_rec *r, const char *line, size_t len)
{
    char hex[17];
    if (len == 16) {
        memcpy(hex, line, 16);
        hex[16] = '\0';
        if (cli_parse_hex64(hex, &r->fp) == 0) {
            r->kind = REC_FP;
            return;
        }
    }
    char msg[120];
    char shown[44];
    size_t n = len < 40 ? len : 40;
    for (size_t i = 0; i < n; i++)
        shown[i] = (unsigned char)line[i] < 0x20 || line[i] == 0x7F ? '?' : line[i];
    shown[n] = '\0';
    snprintf(msg, sizeof msg, "expected 16 hex digits, got '%s'", shown);
    set_bad(s, r, msg);
}

/* The parts of a record's document after its source: flags, sketch and
 * paragraph fingerprints, from the slot's output buffer. */
static void rec_doc_parts(const slot *s, const ingest_rec *r, simstore_doc *d)
{
    d->flags = r->id_integer ? SIMSTORE_DOC_INTEGER_ID : 0;
    d->sketch = r->sketch_off ? (const uint8_t *)s->out + r->sketch_off - 1 : NULL;
    d->paragraphs = r->nparas ? (const uint64_t *)(const void *)(s->out + r->paras_off) : NULL;
    d->n_paragraphs = r->nparas;
}

/* Let the pipeline's note function look at a parsed document (on this
 * worker) and keep what it says with the record. */
static void note_record(pipeline *pl, unsigned worker, slot *s, ingest_rec *r,
                        const input_record *rec)
{
    simstore_doc d = {rec->id, rec->id_len, r->fp, rec->meta, rec->meta ? strlen(rec->meta) : 0,
                      r->line};
    rec_doc_parts(s, r, &d);
    ingest_note n = {0, 0, NULL, 0, 0};
    int e = pl->note(pl->note_ctx, worker, &d, &n);
    if (e) {
        r->kind = REC_FAILED;
        r->rc = e;
        return;
    }
    r->note_value = n.value;
    r->note_flags = n.flags;
    r->note_number = n.number;
    if (n.text) {
        if (out_copy(s, n.text, n.text_len, &r->note_off)) {
            r->kind = REC_FAILED;
            r->rc = SIMSTORE_ENOMEM;
            return;
        }
        r->note_len = n.text_len;
        r->has_note_text = 1;
    }
}

/* The first pass of boilerplate detection: the document's line keys, copied
 * into the batch (8-byte aligned: the arena is malloc'd). Nonzero when the
 * record failed. */
static int keep_line_keys(worker_state *w, slot *s, ingest_rec *r, const input_record *rec)
{
    const uint64_t *keys;
    size_t n;
    int e = w->fpr_rc
                ? w->fpr_rc
                : simstore_fingerprinter_line_keys(w->fpr, rec->text, rec->text_len, &keys, &n);
    size_t pad = (8 - s->out_len % 8) % 8;
    if (!e && (n > SIZE_MAX / 16 || reserve(&s->out, s->out_len, &s->out_cap, pad + n * 8)))
        e = SIMSTORE_ENOMEM;
    if (e) {
        r->kind = REC_FAILED;
        r->rc = e;
        return 1;
    }
    s->out_len += pad;
    r->keys_off = s->out_len;
    r->nkeys = n;
    if (n)
        memcpy(s->out + s->out_len, keys, n * 8);
    s->out_len += n * 8;
    return 0;
}

/* The paragraph fingerprints a store with a paragraph index keeps of the
 * text (simstore_paragraph_fingerprints), 8-aligned into the batch's `out`. */
static int keep_paragraphs(worker_state *w, slot *s, ingest_rec *r, const input_record *rec,
                           unsigned min_words)
{
    size_t n = 0;
    int e =
        simstore_paragraph_fingerprints(w->fpr, rec->text, rec->text_len, min_words, NULL, 0, &n);
    size_t pad = (8 - s->out_len % 8) % 8;
    if (!e && (n > SIZE_MAX / 16 || reserve(&s->out, s->out_len, &s->out_cap, pad + n * 8 + 8)))
        e = SIMSTORE_ENOMEM;
    if (!e) {
        s->out_len += pad;
        r->paras_off = s->out_len;
        r->nparas = n;
        size_t got = 0;
        e = simstore_paragraph_fingerprints(w->fpr, rec->text, rec->text_len, min_words,
                                            (uint64_t *)(void *)(s->out + s->out_len), n, &got);
        s->out_len += n * 8;
    }
    return e;
}

static void parse_record(pipeline *pl, worker_state *w, unsigned worker, slot *s, ingest_rec *r,
                         const char *line, size_t len)
{
    int fmt = s->format;
    if (fmt == INGEST_HEX) {
        parse_hex(s, r, line, len);
        return;
    }
    input_format in = fmt == INGEST_TSV  ? INPUT_ID_FP
                      : fmt == INGEST_FP ? INPUT_FP_ID
                                         : INPUT_JSONL;
    if (!w->parsers[fmt] && input_parser_new(&w->parsers[fmt], in, pl->fields) != 0) {
        r->kind = REC_FAILED;
        r->rc = SIMSTORE_ENOMEM;
        return;
    }
    input_record rec;
    int rc = input_parse_line(w->parsers[fmt], line, len, pl->names[s->file_index], r->line, &rec);
    if (rc != 1) {
        if (rc == -1) {
            set_bad(s, r, input_parser_error(w->parsers[fmt]));
        } else {
            r->kind = REC_FAILED;
            r->rc = SIMSTORE_ENOMEM;
        }
        return;
    }
    r->fp = rec.fingerprint;
    if (fmt == INGEST_JSONL && pl->line_keys) {
        /* The first pass: line keys (a record giving "fp" has no text). */
        if (!rec.has_fp && keep_line_keys(w, s, r, &rec))
            return;
    } else if (fmt == INGEST_JSONL && !rec.has_fp) {
        unsigned flags = 0;
        /* The sketch in the same pass, from the same features. */
        uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
        size_t sketch_len =
            simstore_sketch_bytes(pl->text ? pl->text->sketch : SIMSTORE_SKETCH_NONE);
        int e = w->fpr_rc ? w->fpr_rc
                : sketch_len
                    ? simstore_fingerprint_sketch(w->fpr, rec.text, rec.text_len, &r->fp, sketch,
                                                  &flags)
                    : simstore_fingerprint_text(w->fpr, rec.text, rec.text_len, &r->fp, &flags);
        if (e == 0 && sketch_len) {
            size_t off;
            if (out_copy(s, (const char *)sketch, sketch_len, &off))
                e = SIMSTORE_ENOMEM;
            else
                r->sketch_off = off + 1;
        }
        if (e == 0 && pl->text && pl->text->paragraph_min_words)
            e = keep_paragraphs(w, s, r, &rec, pl->text->paragraph_min_words);
        if (e) {
            r->kind = REC_FAILED;
            r->rc = e;
            return;
        }
        r->empty = (flags & SIMSTORE_FP_EMPTY) != 0;
        r->only_boilerplate = (flags & SIMSTORE_FP_ONLY_BOILERPLATE) != 0;
    }
    if (fmt == INGEST_JSONL && rec.has_fp && !pl->line_keys) {
        /* A fingerprint given with its sketch (export --json): the sketch
         * must be of the kind this run keeps. */
        size_t want = simstore_sketch_bytes(pl->text ? pl->text->sketch : SIMSTORE_SKETCH_NONE);
        if (rec.sketch && rec.sketch_len != want) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "\"sketch\" has %zu bytes, but this store keeps %s sketches (%zu bytes)",
                     rec.sketch_len,
                     simstore_sketch_name(pl->text ? pl->text->sketch : SIMSTORE_SKETCH_NONE),
                     want);
            set_bad(s, r, msg);
            return;
        }
        if (rec.sketch) {
            size_t off;
            if (out_copy(s, (const char *)rec.sketch, rec.sketch_len, &off)) {
                r->kind = REC_FAILED;
                r->rc = SIMSTORE_ENOMEM;
                return;
            }
            r->sketch_off = off + 1;
        }
    }
    r->kind = REC_DOC;
    r->id_integer = (unsigned char)rec.id_is_integer;
    size_t meta_len = rec.meta ? strlen(rec.meta) : 0;
    if (out_copy(s, rec.id, rec.id_len, &r->text_off) ||
        (rec.meta && out_copy(s, rec.meta, meta_len, &r->meta_off))) {
        r->kind = REC_FAILED;
        r->rc = SIMSTORE_ENOMEM;
        return;
    }
    r->text_len = rec.id_len;
    r->has_meta = rec.meta != NULL;
    r->meta_len = meta_len;
    if (pl->note)
        note_record(pl, worker, s, r, &rec);
}

/* Parse (and fingerprint) every record of a batch. */
static void parse_batch(pipeline *pl, worker_state *w, unsigned worker, slot *s)
{
    s->nrecs = 0;
    s->out_len = 0;
    if (s->format == INGEST_U64)
        return; /* the values are read as they are */
    const char *p = s->in, *end = s->in + s->in_len;
    unsigned long long line = s->first_line;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        const char *text = p;
        size_t n = len;
        if (n > 0 && text[n - 1] == '\r')
            n--;
        if (!input_trim_line(&text, &n, line == 1)) {
            ingest_rec *r = new_rec(s, line);
            if (!r) {
                /* Report it on the last record there is room for. */
                if (s->nrecs > 0) {
                    s->recs[s->nrecs - 1].kind = REC_FAILED;
                    s->recs[s->nrecs - 1].rc = SIMSTORE_ENOMEM;
                }
                return;
            }
            r->raw_off = (size_t)(text - s->in);
            r->raw_len = (size_t)(p + len + 1 - text);
            parse_record(pl, w, worker, s, r, text, n);
        }
        p += len + 1;
        line++;
    }
}

/* The pool's work function: parse one batch on worker `index`, whose parsers
 * and fingerprinter are made on its first batch. */
static void work_batch(void *ctx, void *item, unsigned index)
{
    pipeline *pl = (pipeline *)ctx;
    worker_state *w = &pl->workers[index];
    if (!w->ready) {
        w->ready = 1;
        int any_jsonl = 0;
        for (int i = 0; i < pl->npaths; i++)
            any_jsonl |= pl->formats[i] == INGEST_JSONL;
        if (any_jsonl)
            w->fpr_rc = simstore_fingerprinter_new(pl->text, &w->fpr);
        if (any_jsonl && w->fpr_rc == 0 && pl->boilerplate)
            w->fpr_rc = simstore_fingerprinter_set_boilerplate(w->fpr, pl->boilerplate);
    }
    parse_batch(pl, w, index, (slot *)item);
}

/* ---- the pipeline ------------------------------------------------------- */

static void pipeline_free(pipeline *pl)
{
    if (pl->pool)
        simstore_ordered_stop(pl->pool);
    if (pl->reader_started)
        pthread_join(pl->reader, NULL);
    unsigned nworkers = pl->pool ? simstore_ordered_threads(pl->pool) : 0;
    simstore_ordered_free(pl->pool);
    for (unsigned i = 0; pl->workers && i < nworkers; i++) {
        for (size_t k = 0; k < sizeof pl->workers[i].parsers / sizeof *pl->workers[i].parsers; k++)
            input_parser_free(pl->workers[i].parsers[k]);
        simstore_fingerprinter_free(pl->workers[i].fpr);
    }
    free(pl->workers);
    for (unsigned i = 0; pl->ring && i < pl->nslots; i++) {
        free(pl->ring[i].in);
        free(pl->ring[i].recs);
        free(pl->ring[i].out);
    }
    free(pl->ring);
}

static int pipeline_start(pipeline *pl, unsigned threads)
{
    pl->nslots = INGEST_RING_SLOTS(threads);
    pl->ring = calloc(pl->nslots, sizeof *pl->ring);
    pl->workers = calloc(threads, sizeof *pl->workers);
    if (!pl->ring || !pl->workers)
        return -1;
    /* jansson seeds its hash tables on first use; do it before the threads. */
    json_object_seed(0);
    if (simstore_ordered_new(threads, pl->nslots - 1, work_batch, pl, &pl->pool) != SIMSTORE_OK)
        return -1;
    if (pthread_create(&pl->reader, NULL, reader_main, pl) != 0)
        return -1;
    pl->reader_started = 1;
    return 0;
}

/* The next parsed batch, in read order; NULL when the input is exhausted.
 * The batch before it goes back to the reader. */
static slot *pipeline_next(pipeline *pl)
{
    void *item;
    return simstore_ordered_next(pl->pool, &item) ? (slot *)item : NULL;
}

/* A huge record made its batch grow: give the memory back. */
static void pipeline_trim(slot *s)
{
    if (s->in_cap > 4 * INGEST_BATCH_BYTES) {
        free(s->in);
        s->in = NULL;
        s->in_cap = 0;
    }
    if (s->out_cap > 4 * INGEST_BATCH_BYTES) {
        free(s->out);
        s->out = NULL;
        s->out_cap = 0;
    }
}

/* ---- the consumer: records into the builder, in order ------------------- */

typedef struct ingest_state {
    const ingest_sink *sink;
    const ingest_options *o;
    ingest_result *res;
    pipeline *pl;
    unsigned max_errors;
    int fatal;
} ingest_state;

/* Report a bad record; returns nonzero when reading should stop. */
static int bad_record(ingest_state *st, const char *file, unsigned long long line, const char *what)
{
    st->res->bad++;
    if (line)
        fprintf(stderr, "simstore %s: %s:%llu: %s\n", st->o->cmd, file, line, what);
    else
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, file, what);
    if (st->res->bad >= st->max_errors) {
        fprintf(stderr, "simstore %s: stopping after %u bad record%s\n", st->o->cmd, st->max_errors,
                st->max_errors == 1 ? "" : "s");
        return 1;
    }
    return 0;
}

static int fatal_error(ingest_state *st, const char *file, unsigned long long line,
                       const char *what)
{
    if (line)
        fprintf(stderr, "simstore %s: %s:%llu: %s\n", st->o->cmd, file, line, what);
    else
        fprintf(stderr, "simstore %s: %s: %s\n", st->o->cmd, file, what);
    st->fatal = 1;
    return 1;
}

static int builder_failed(ingest_state *st, int rc, const char *file, unsigned long long line)
{
    return fatal_error(st, file, line,
                       *simstore_last_error() ? simstore_last_error() : simstore_strerror(rc));
}

static void count_record(ingest_state *st, uint64_t step)
{
    uint64_t before = st->res->records;
    st->res->records += step;
    if (st->o->progress && (before >> 16) != (st->res->records >> 16))
        st->o->progress(st->o->progress_ctx, st->o->phase ? st->o->phase : "reading",
                        st->res->records, 0);
}

/* Hand one parsed batch to the builder. Returns nonzero to stop. */
static int drain_batch(ingest_state *st, const slot *s)
{
    const char *file = st->pl->names[s->file_index];
    uint64_t source_file = (uint64_t)s->file_index << LINE_BITS;
    if (s->format == INGEST_U64) {
        const unsigned char *v = (const unsigned char *)s->in;
        for (size_t i = 0; i < s->nlines; i++, v += 8) {
            uint64_t fp = 0;
            for (int j = 7; j >= 0; j--)
                fp = fp << 8 | v[j];
            int e = st->sink->fp(st->sink->ctx, fp);
            if (e)
                return builder_failed(st, e, file, s->first_line + i);
        }
        count_record(st, s->nlines);
    }
    for (size_t i = 0; i < s->nrecs; i++) {
        const ingest_rec *r = &s->recs[i];
        int e = 0;
        switch (r->kind) {
        case REC_BAD:
            if (st->o->silent_bad)
                continue;
            if (bad_record(st, file, r->line, s->out + r->text_off))
                return 1;
            continue;
        case REC_FAILED: return builder_failed(st, r->rc, file, r->line);
        case REC_FP: e = st->sink->fp(st->sink->ctx, r->fp); break;
        default: {
            const char *id = s->out + r->text_off;
            if (r->empty) {
                st->res->empty_docs++;
                fprintf(stderr, "simstore %s: warning: %s:%llu: document '%.*s' has no words\n",
                        st->o->cmd, file, r->line, (int)r->text_len, id);
            }
            if (r->only_boilerplate) {
                st->res->only_boilerplate++;
                char esc[CLI_ESCAPED_ID_BYTES];
                fprintf(stderr,
                        "simstore %s: warning: %s:%llu: document id '%s' is only boilerplate: "
                        "fingerprinted whole\n",
                        st->o->cmd, file, r->line, cli_escape(id, r->text_len, esc, sizeof esc));
            }
            st->res->integer_ids += r->id_integer;
            simstore_doc d = {id,          r->text_len,
                              r->fp,       r->has_meta ? s->out + r->meta_off : NULL,
                              r->meta_len, source_file | r->line};
            rec_doc_parts(s, r, &d);
            if (st->sink->record) {
                ingest_record ir = {d,
                                    r->empty,
                                    s->in + r->raw_off,
                                    r->raw_len,
                                    file,
                                    r->line,
                                    {r->note_value, r->note_flags,
                                     r->has_note_text ? s->out + r->note_off : NULL, r->note_len,
                                     r->note_number},
                                    r->only_boilerplate,
                                    (const uint64_t *)(const void *)(s->out + r->keys_off),
                                    r->nkeys};
                e = st->sink->record(st->sink->ctx, &ir);
                break;
            }
            e = st->sink->doc(st->sink->ctx, &d);
            break;
        }
        }
        if (e)
            return builder_failed(st, e, file, r->line);
        count_record(st, 1);
    }
    switch (s->failure) {
    case FAIL_OPEN: return fatal_error(st, file, 0, s->fail_msg);
    case FAIL_READ: return fatal_error(st, file, s->fail_line, s->fail_msg);
    case FAIL_SIZE: return fatal_error(st, file, 0, "length is not a multiple of 8 bytes");
    case FAIL_LINES: return fatal_error(st, file, 0, "too many lines");
    default: return 0;
    }
}

/* Check every input before reading any: a known format of the right kind
 * for the store, and a path that exists and is not a directory (opening is
 * the reader's: a FIFO is opened once, when its turn comes). */
static int check_inputs(const ingest_options *o, char **paths, int npaths, int *formats)
{
    if ((unsigned)npaths > MAX_INPUTS) {
        fprintf(stderr, "simstore %s: at most %u inputs\n", o->cmd, MAX_INPUTS);
        return -1;
    }
    for (int i = 0; i < npaths; i++) {
        int is_stdin = strcmp(paths[i], "-") == 0;
        int fmt = o->format != INGEST_BY_EXTENSION ? (int)o->format
                  : is_stdin                       ? -1
                                                   : ingest_format_of_name(paths[i]);
        if (fmt < 0) {
            fprintf(stderr,
                    is_stdin ? "simstore %s: %s: cannot tell the format of standard input; "
                               "use --format %s\n"
                             : "simstore %s: %s: cannot tell the format from the name; use "
                               "--format %s\n",
                    o->cmd, is_stdin ? "<stdin>" : paths[i],
                    o->fingerprint_only ? "hex|u64" : "tsv|fp|jsonl");
            return -1;
        }
        if ((fmt == INGEST_TSV || fmt == INGEST_FP) && o->text &&
            o->text->sketch != SIMSTORE_SKETCH_NONE) {
            fprintf(stderr,
                    "simstore %s: %s: %s gives fingerprints without their texts, but every "
                    "document of this store keeps a sketch (%s) made from its text: give JSON "
                    "Lines%s\n",
                    o->cmd, is_stdin ? "<stdin>" : paths[i],
                    fmt == INGEST_TSV ? "TSV" : "a fingerprint-lines file",
                    simstore_sketch_name(o->text->sketch),
                    strcmp(o->cmd, "build") == 0 ? ", or build with --sketch none" : "");
            return -1;
        }
        int fp_format = fmt == INGEST_HEX || fmt == INGEST_U64;
        if (fp_format != (o->fingerprint_only != 0)) {
            if (o->fingerprint_only)
                fprintf(stderr,
                        "simstore %s: %s: a fingerprint-only store reads --format hex or u64 "
                        "(.hex, .u64: bare fingerprints)\n",
                        o->cmd, paths[i]);
            else if (strcmp(o->cmd, "build") == 0)
                fprintf(stderr,
                        "simstore %s: %s: bare fingerprints (hex, u64) make a fingerprint-only "
                        "store: add --fingerprint-only\n",
                        o->cmd, paths[i]);
            else
                fprintf(stderr,
                        "simstore %s: %s: bare fingerprints (hex, u64) need a fingerprint-only "
                        "store (one built with --fingerprint-only); this store keeps documents\n",
                        o->cmd, paths[i]);
            return -1;
        }
        struct stat sb;
        if (!is_stdin && stat(paths[i], &sb) != 0) {
            fprintf(stderr, "simstore %s: %s: %s\n", o->cmd, paths[i], strerror(errno));
            return -1;
        }
        if (!is_stdin && S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "simstore %s: %s: is a directory, not an input file\n", o->cmd,
                    paths[i]);
            return -1;
        }
        formats[i] = fmt;
    }
    return 0;
}

int ingest_run(const ingest_sink *sink, char **paths, int npaths, const ingest_options *o,
               ingest_result *res)
{
    memset(res, 0, sizeof *res);
    int *formats = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof *formats);
    const char **names = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof *names);
    char **owned = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof *owned);
    if (!formats || !names || !owned) {
        free(formats);
        free(names);
        free(owned);
        fprintf(stderr, "simstore %s: out of memory\n", o->cmd);
        return 2;
    }
    int rc = 2;
    pipeline pl;
    memset(&pl, 0, sizeof pl);
    ingest_state st = {sink, o, res, &pl, o->max_errors ? o->max_errors : DEFAULT_MAX_ERRORS, 0};
    if (check_inputs(o, paths, npaths, formats) != 0)
        goto out;
    /* Names for messages: "<stdin>", control characters shown as '?'. */
    for (int i = 0; i < npaths; i++) {
        owned[i] = strdup(strcmp(paths[i], "-") == 0 ? "<stdin>" : paths[i]);
        if (!owned[i]) {
            fprintf(stderr, "simstore %s: out of memory\n", o->cmd);
            goto out;
        }
        for (char *c = owned[i]; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7F)
                *c = '?';
        names[i] = owned[i];
    }
    for (int i = 0; i < npaths; i++)
        if (formats[i] == INGEST_JSONL) {
            /* Check the options and load the dictionary once, up front, so a
             * bad option is one message, not one per thread. */
            simstore_fingerprinter *fpr = NULL;
            int e = simstore_fingerprinter_new(o->text, &fpr);
            simstore_fingerprinter_free(fpr);
            if (e) {
                fprintf(stderr, "simstore %s: %s\n", o->cmd, simstore_last_error());
                goto out;
            }
            break;
        }
    pl.paths = paths;
    pl.names = names;
    pl.formats = formats;
    pl.npaths = npaths;
    pl.read_paths = o->read_paths;
    pl.text = o->text;
    pl.boilerplate = o->boilerplate;
    pl.line_keys = o->line_keys;
    pl.fields = o->fields;
    pl.note = o->note;
    pl.note_ctx = o->note_ctx;
    unsigned threads = o->threads ? o->threads : simstore_default_threads();
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (pipeline_start(&pl, threads) != 0) {
        fprintf(stderr, "simstore %s: cannot start the reading threads\n", o->cmd);
        goto out;
    }
    for (;;) {
        slot *s = pipeline_next(&pl);
        if (!s)
            break;
        int stop = drain_batch(&st, s);
        pipeline_trim(s);
        if (stop)
            break;
    }
    rc = st.fatal ? 2 : res->bad ? 1 : 0;
out:
    pipeline_free(&pl);
    for (int i = 0; i < npaths; i++)
        free(owned[i]);
    free(owned);
    free(names);
    free(formats);
    return rc;
}

static int builder_doc(void *ctx, const simstore_doc *doc)
{
    return simstore_builder_add((simstore_builder *)ctx, doc);
}

static int builder_fp(void *ctx, uint64_t fp)
{
    return simstore_builder_add_fp((simstore_builder *)ctx, fp);
}

int ingest_inputs(simstore_builder *b, char **paths, int npaths, const ingest_options *o,
                  ingest_result *res)
{
    ingest_sink sink = {builder_doc, builder_fp, b, NULL};
    return ingest_run(&sink, paths, npaths, o, res);
}

int ingest_and_finish(simstore_builder *b, char **paths, int npaths, const ingest_options *o,
                      ingest_result *res, void (*progress_done)(void *ctx), const char *failed)
{
    int got = ingest_inputs(b, paths, npaths, o, res);
    if (got != 0) {
        if (progress_done)
            progress_done(o->progress_ctx);
        simstore_builder_abort(b);
        fprintf(stderr, "simstore %s: %s: %s\n", o->cmd, failed,
                got == 1 ? "the input has bad records" : "the input could not be read");
        return CLI_EXIT_FAIL;
    }
    int rc = simstore_builder_finish(b);
    if (progress_done)
        progress_done(o->progress_ctx);
    if (rc)
        return cli_api_error(o->cmd, rc, "%s", failed);
    return CLI_EXIT_OK;
}
