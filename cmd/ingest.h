/* ingest.h: feeding input files into a store builder, for `build` and `add`:
 * documents from TSV (id<TAB>hex16), fingerprint lines (hex16<TAB>id, what
 * `simstore fingerprint` prints) or JSON Lines (fingerprinted, and sketched
 * when the store keeps sketches, on the way),
 * or bare fingerprints for fingerprint-only stores (hex lines or raw
 * little-endian 64-bit values), plain or compressed (gzip, zstd), parsed and
 * fingerprinted on N threads of the library's ordered pool (simstore_ordered)
 * and handed to the builder in input order, in bounded memory. Every malformed record is reported as
 * "FILE:LINE: what"; the caller then abandons the build, so nothing is
 * committed from input that had errors. */
#ifndef SIMS_CMD_INGEST_H
#define SIMS_CMD_INGEST_H

#include "input.h"
#include "simstore.h"

#include <stdint.h>

typedef enum ingest_format {
    INGEST_BY_EXTENSION = 0, /* .tsv, .fp, .jsonl, .hex, .u64 */
    INGEST_TSV,              /* id<TAB>hex16 */
    INGEST_FP,               /* hex16<TAB>id, as `simstore fingerprint` prints */
    INGEST_JSONL,            /* {"id": ..., "text": ...[, "meta": ...]} */
    INGEST_HEX,              /* hex16 per line (fingerprint-only stores) */
    INGEST_U64               /* raw little-endian u64s (fingerprint-only stores) */
} ingest_format;

/* "tsv", "fp", "jsonl", "hex", "u64" -> format; -1 for anything else. */
int ingest_format_parse(const char *name);

/* The pipeline's sizes, for tests that probe their edges: a batch holds up
 * to INGEST_BATCH_LINES lines (or INGEST_BATCH_VALUES raw values) and is cut
 * once it holds INGEST_BATCH_BYTES bytes (a longer line makes its batch
 * grow to fit it); INGEST_RING_SLOTS(threads) batches are in flight at most. */
#define INGEST_BATCH_LINES 4096
#define INGEST_BATCH_BYTES ((size_t)256 << 10)
#define INGEST_BATCH_VALUES (INGEST_BATCH_BYTES / 8)
#define INGEST_RING_SLOTS(threads) (2 * (threads) + 2)

/* The format a path names: its extension, after a compression suffix (.gz,
 * .zst, .zstd) is dropped; -1 when it names none. */
int ingest_format_of_name(const char *path);

/* What a worker may attach to a document (ingest_options.note): a number,
 * flags and a string (copied into the batch), handed back with the record
 * to ingest_sink.record on the consuming thread. */
typedef struct ingest_note {
    uint64_t value;
    unsigned flags;
    const char *text; /* NULL or text_len bytes, valid during the call */
    size_t text_len;
    double number;
} ingest_note;

/* Called on worker thread `worker` (0..threads-1, each with its own state)
 * for every document parsed, before it is handed on: lookups that may run
 * in parallel (`dedup` asks its store there). doc is as ingest_record.doc.
 * Returns 0, or a simstore error code that fails the ingest at this
 * record. */
typedef int (*ingest_note_fn)(void *ctx, unsigned worker, const simstore_doc *doc,
                              ingest_note *out);

typedef struct ingest_options {
    const char *cmd;                   /* for messages */
    ingest_format format;              /* INGEST_BY_EXTENSION: decide per file */
    const simstore_text_options *text; /* for JSON Lines documents; with a
                                       sketch kind, every document is
                                       sketched too, and inputs without
                                       texts (TSV, fingerprint lines) are
                                       refused */
    const input_fields *fields;        /* JSON Lines members; NULL: the defaults */
    int fingerprint_only;              /* the store takes bare fingerprints */
    unsigned max_errors;               /* stop reading after this many bad records */
    unsigned threads;                  /* parsing and fingerprinting threads
                                       (0: every core) */
    simstore_progress_fn progress;
    void *progress_ctx;
    ingest_note_fn note; /* NULL: none */
    void *note_ctx;
    /* Boilerplate (README, "Boilerplate"): JSON Lines texts are
     * fingerprinted without the lines of this set (NULL: none); a document
     * that is only boilerplate is warned about and counted. */
    const simstore_boilerplate *boilerplate;
    /* The first pass of boilerplate detection: JSON Lines documents are not
     * fingerprinted; their line keys go to sink.record instead. */
    int line_keys;
    /* Malformed records are skipped without a word and not counted (a first
     * pass: the second reports them). */
    int silent_bad;
    /* NULL, or per input a path to read instead of paths[i] (a spooled
     * copy of standard input or a pipe; messages still name paths[i]). */
    char *const *read_paths;
    const char *phase; /* progress phase; NULL: "reading" */
} ingest_options;

typedef struct ingest_result {
    uint64_t records;          /* given to the builder */
    uint64_t bad;              /* malformed records reported */
    uint64_t empty_docs;       /* documents without words (fingerprint 0, warned) */
    uint64_t integer_ids;      /* documents whose JSON id was an integer */
    uint64_t only_boilerplate; /* documents that were only boilerplate (warned) */
} ingest_result;

/* Where ingested records go, in input order, on the calling thread. Each
 * function returns 0 or a simstore error code (with simstore_last_error()
 * set, or not), which stops the ingest. doc->id and doc->meta are valid only
 * during the call. */
/* One document as `dedup` sees it: the record, its line as read and what
 * the worker noted. Everything is valid only during the call. */
typedef struct ingest_record {
    /* The document, with its flags (SIMSTORE_DOC_INTEGER_ID), its sketch
     * (with ingest_options.text's sketch kind, else NULL) and, with
     * ingest_options.text's paragraph_min_words, its paragraph
     * fingerprints in text order (simstore_paragraph_fingerprints). */
    simstore_doc doc;
    int empty;        /* no words (fingerprint 0; warned about) */
    const char *line; /* the record's line as read: from its first byte
                               (after a UTF-8 byte order mark on line 1) to its
                               '\n' inclusive (a CR before it kept; a last line
                               without one gets one) */
    size_t line_len;
    const char *file; /* the input's name for messages */
    unsigned long long line_number;
    ingest_note note;          /* zeros without ingest_options.note */
    int only_boilerplate;      /* only boilerplate: fingerprinted whole (warned) */
    const uint64_t *line_keys; /* ingest_options.line_keys: the document's
                                  distinct line keys, increasing */
    size_t line_key_count;
} ingest_record;

typedef struct ingest_sink {
    /* Documents, as ingest_record.doc. */
    int (*doc)(void *ctx, const simstore_doc *doc);
    int (*fp)(void *ctx, uint64_t fp); /* bare fingerprints (.hex, .u64) */
    void *ctx;
    /* When set, documents go here instead of to doc. */
    int (*record)(void *ctx, const ingest_record *rec);
} ingest_sink;

/* Read, parse and fingerprint every path ("-" is standard input) on
 * o->threads threads and hand the records to sink. Returns as
 * ingest_inputs() does. */
int ingest_run(const ingest_sink *sink, char **paths, int npaths, const ingest_options *o,
               ingest_result *res);

/* Feed every path ("-" is standard input) into b. Returns 0 when every record
 * was good, 1 when some were malformed (reported on stderr; stop after
 * max_errors), 2 when an input could not be read or the builder failed
 * (reported). */
int ingest_inputs(simstore_builder *b, char **paths, int npaths, const ingest_options *o,
                  ingest_result *res);

/* Feed the paths into b, then finish it (commit) or, when any input failed,
 * abandon it. progress_done (may be NULL) is called with progress_ctx before
 * anything is printed. On failure prints "simstore CMD: <failed>: why" and
 * returns 1 (the builder is gone either way); 0 on success. */
int ingest_and_finish(simstore_builder *b, char **paths, int npaths, const ingest_options *o,
                      ingest_result *res, void (*progress_done)(void *ctx), const char *failed);

/* The builder's simstore_source_fn for sources made by ingest_inputs: ctx is
 * the same `paths` array. Writes "FILE:LINE". */
void ingest_source_name(void *ctx, uint64_t source, char *buf, size_t size);

#endif
