/* cli.h: what every simstore command shares: exit codes, messages, option
 * parsing helpers, and a line reader that knows its file name and line number.
 * cmd/ is a client of the public header only. */
#ifndef SIMS_CMD_CLI_H
#define SIMS_CMD_CLI_H

#include "simstore.h"
#include "stream.h"

#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CLI_PRINTF(f, a)
#endif

/* One subcommand: argv[0] is the command's name. Returns an exit code. */
typedef int (*cli_command_fn)(int argc, char **argv);

/* Print "simstore CMD: message" and a hint to use --help; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* Print "simstore CMD: message"; returns 1. */
int cli_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);
/* Print "simstore CMD: what: <simstore_last_error() or strerror(rc)>",
 * naming a path once: only the detail when it already names `what` (the
 * library's details start with the path they are about), and without the
 * detail's leading "PATH: " when `what` names PATH. Control characters are
 * escaped (cli_escape). Returns 1. */
int cli_api_error(const char *cmd, int rc, const char *fmt, ...) CLI_PRINTF(3, 4);
/* Print "simstore CMD: warning: message". */
void cli_warn(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* A document id as one TSV field: as it is when it follows the id rule
 * (simstore_id_problem()), else escaped as cli_escape() does (an id an older
 * version stored with a tab, newline or other control character, or bytes
 * that are not UTF-8), so that no id can forge a line or a field, or reach
 * a terminal with control sequences; the first such id of the process is
 * also told on stderr (as `cmd`'s warning). */
void cli_tsv_id(const char *cmd, const char *id, size_t len);
/* cli_tsv_id's field written to f, without the warning: returns NULL when
 * the id was written as it is, else the id rule's complaint, with the
 * escaped id left in esc (CLI_ESCAPED_ID_BYTES) for the caller to tell. */
const char *cli_put_tsv_id(FILE *f, const char *id, size_t len, char *esc);
/* The warning told once for such ids: printf(CLI_ESCAPED_ID_WARNING, why, esc). */
#define CLI_ESCAPED_ID_WARNING                                                                     \
    "the store holds a document id that the id rule refuses (%s; stored by an older version): "    \
    "printed escaped, as '%s'"

/* Before a command changes the store at `path`: apply the changes a server
 * that stopped (crashed, killed) acknowledged and left in its write-ahead
 * log (simstore_live_recover()), saying on stderr what was applied and any
 * torn tail kept aside, so that the command acts on the whole store and the
 * next serve replays nothing over it. Returns 0, or an exit code after the
 * error (a server holds the store, the log is damaged). */
int cli_apply_server_log(const char *cmd, const char *path);

/* Where the command's own scratch files go: $TMPDIR when set and not empty,
 * else /tmp (the library's rule for its spills, sims_scratch_dir). */
const char *cli_scratch_dir(void);

/* s[0..len) made safe to print in a message: C0 control characters, DEL,
 * C1 control characters and bytes that are not UTF-8 become \xHH, so that an
 * id or a name read from input cannot drive a terminal; everything else
 * (backslashes too) is copied. Writes a NUL-terminated string to buf, ending
 * in "..." when it does not fit; returns buf. CLI_ESCAPED_ID_BYTES holds any
 * document id. */
#define CLI_ESCAPED_ID_BYTES (4 * SIMSTORE_MAX_ID_BYTES + 1)
const char *cli_escape(const char *s, size_t len, char *buf, size_t size);

/* The noun for a count: singular when n is 1, else plural, as in
 * printf("%llu %s", n, CLI_NOUN(n, "document")). cli_plural takes irregular
 * plurals ("entry", "entries"). */
const char *cli_plural(unsigned long long n, const char *singular, const char *plural);
#define CLI_NOUN(n, word) cli_plural((unsigned long long)(n), word, word "s")

/* Clashing document ids of a build or add (simstore_build_options.clash,
 * with a cli_clashes as ctx): each is counted and, unless skipping, the
 * first CLI_CLASH_LINES are reported on stderr, "simstore CMD: FILE:LINE:
 * document id 'ID' is already in the store" or "...: duplicate document id
 * 'ID' (first at FILE:LINE)". before_print (may be NULL) runs before the
 * first line (to end a progress line). After a failed finish,
 * cli_clashes_finish() says how many were not listed, followed by `hint`
 * (may be NULL), on one line, when there were clashes. */
#define CLI_CLASH_LINES 20
typedef struct cli_clashes {
    const char *cmd;
    int skipping;
    simstore_source_fn source_name;
    void *source_ctx;
    void (*before_print)(void *ctx);
    void *before_ctx;
    unsigned long long stored;   /* ids already in the store */
    unsigned long long repeated; /* ids given again after their first time */
} cli_clashes;
void cli_clash_report(void *ctx, const simstore_clash *clash);
void cli_clashes_finish(const cli_clashes *r, const char *hint);

/* The automatic compaction a change made, if any (simstore_build_options
 * .compacted, with a cli_compaction as ctx); cli_print_compaction() adds
 * "; compacted S segments -> T, D dead fingerprints dropped" to a summary
 * line on stdout when there was one. */
typedef struct cli_compaction {
    int happened;
    simstore_compaction what;
} cli_compaction;
void cli_note_compaction(void *ctx, const simstore_compaction *c);
void cli_print_compaction(const cli_compaction *c);

/* Report an unknown option or a missing argument the way every command does,
 * from getopt_long's optopt / argv state; returns 2. Call it on '?' or ':'. */
int cli_bad_option(const char *cmd, int opt, char **argv, int optind_now);

/* The commands' one growth rule for buffers that only grow: make *p (of
 * *cap elements of elem bytes) hold at least need, capacity doubling from
 * first. 0, or -1 out of memory or on overflow (*p, *cap unchanged). */
int cli_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first);

/* Parse a 16-digit hexadecimal fingerprint (exactly 16 hex digits, either
 * case, no prefix). Returns 0 or -1. */
int cli_parse_hex64(const char *s, uint64_t *out);

/* The length of the valid UTF-8 sequence at s (n > 0 bytes available), or 0
 * when it is not one (overlong forms, surrogates, above U+10FFFF): the one
 * UTF-8 rule of the commands (ids, escaping, JSON output). */
size_t cli_utf8_sequence(const unsigned char *s, size_t n);

/* Write n bytes of s to out as a JSON string: quotes, backslashes and
 * control characters escaped, bytes that are not UTF-8 as U+FFFD. The one
 * JSON string writer of the commands. */
void cli_json_string(FILE *out, const char *s, size_t n);

/* query --end-marker: the end of the answer to a query line that was bad
 * (reported on stderr), so that a reader waiting for each answer goes on:
 * '.', or with json {"query": null, "matches": [], "error": WHY}. */
void cli_print_bad_query_end(int json, const char *why, size_t why_len);
/* Format a fingerprint as 16 lowercase hex digits plus NUL into buf[17]. */
void cli_format_hex64(uint64_t fp, char buf[17]);
/* Format an estimated similarity (simstore_sketch_similarity) exactly: its
 * shortest decimal form ("1", "0.90234375": a sketch's estimates are
 * fractions with a power of two below), or, when unknown (negative), "-"
 * (json: "null"). */
void cli_format_similarity(double similarity, int json, char buf[32]);
/* --min-similarity J: a number from 0 to 1 (0: no filter) into *out;
 * otherwise prints a usage error and returns 2 (the exit code). */
int cli_min_similarity_option(const char *cmd, const char *arg, double *out);
/* --bands on|off: 1 or 0 into *out; otherwise prints a usage error and
 * returns 2 (the exit code). */
int cli_bands_option(const char *cmd, const char *arg, int *out);
/* A resolved rule's bands as the commands report them: "on (B bands of R
 * bits)" or "off". */
void cli_format_bands(const simstore_near_rule *rule, char buf[64]);
/* --sketch KIND: none, minhash16 .. minhash256 into *out; a usage error
 * (said, CLI_EXIT_USAGE) otherwise. */
int cli_sketch_option(const char *cmd, const char *arg, simstore_sketch_kind *out);

/* --keep RULE [FIELD] as `clusters` takes it: first, min-id, max-meta FIELD
 * or min-meta FIELD, FIELD after a space or '=' in arg, else the argument
 * argv[*next] (which it takes: *next advances). Sets *rule, and *field for
 * the meta rules. Returns 0, or -1 with what is wrong in why[0..why_size). */
int cli_parse_keep(const char *arg, char **argv, int argc, int *next, simstore_keep_rule *rule,
                   const char **field, char *why, size_t why_size);

/* The meta rules' key (simstore_doc_key_fn): the number in the member
 * named ctx (a field name, nested as a.b) of the metadata, a string
 * holding a decimal number counting. */
int cli_meta_key(void *ctx, const char *meta, size_t len, double *key);
/* --min-fraction F (paragraphs): a number from 0 to 1 into *out; otherwise
 * prints a usage error and returns 2 (the exit code). */
int cli_min_fraction_option(const char *cmd, const char *arg, double *out);
/* --paragraph-min-words N: 1..SIMSTORE_PARAGRAPH_MIN_WORDS_MAX into *out;
 * otherwise prints a usage error and returns 2 (the exit code). */
int cli_paragraph_min_words_option(const char *cmd, const char *arg, unsigned *out);
/* Parse a decimal unsigned integer in [min, max]. Returns 0 or -1. */
int cli_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out);
/* Parse a size or count (quantity.h): 1024, 512M, 4GiB, 64mb, 1.5G, 1e9,
 * 2^30; suffixes K, M, G, T are powers of 1024, optionally followed by i
 * and/or B, in either case. Returns 0 or -1. */
int cli_parse_size(const char *s, unsigned long long *out);

/* A STORE argument without its trailing slashes ("S/" is S; "/" stays),
 * taken before anything else, so that every message and every path made
 * from it names the store once. Edits arg in place and returns it. */
char *cli_store_path(char *arg);

/* The resource options of the commands that sort (build, add, compact,
 * delete): --memory SIZE (at least SIMSTORE_MIN_MEMORY_BYTES, 16M; at most
 * the machine's RAM plus swap) and --threads N (1..64). Each
 * returns 0, or 2 after printing the usage error. */
int cli_memory_option(const char *cmd, const char *arg, uint64_t *memory_bytes);
int cli_threads_option(const char *cmd, const char *arg, unsigned *threads);

/* Reads lines of any length from a named file or stdin ("-"), plain or
 * compressed (cli_stream, stream.h: opened once, gzip or zstd told by the
 * magic bytes), counting them. The returned line excludes the newline (and a
 * CR before it), is NUL-terminated, may hold NUL bytes (use the length), and
 * stays valid until the next call. A last line without a newline counts. */
typedef struct cli_lines {
    cli_stream *stream;
    const char *name;          /* as given; "<stdin>" for "-" */
    char *line;                /* the current line: into buf, or into joined */
    unsigned long long lineno; /* lines returned; after -1, the line that broke */
    int is_stdin;
    /* Private to cli.c. */
    char *buf; /* bytes read from the stream */
    size_t buf_len, buf_pos;
    char *joined; /* a line that spans reads of buf */
    size_t cap;   /* of joined */
    int state;    /* 0 reading, 1 at the end, -1 broken */
    const char *error;
} cli_lines;

/* Open `path` ("-": standard input). Returns 0, or -1 with errno set (ENOENT,
 * EISDIR, ENOMEM, ...); r needs no close then. */
int cli_lines_open(cli_lines *r, const char *path);
/* 1 = a line is in r->line with length *len, 0 = end of input, -1 = the
 * input cannot be read further (a read error, corrupt or truncated compressed
 * data, no memory): cli_lines_error() says why and r->lineno is the number of
 * the line that was being read. 0 and -1 are sticky. */
int cli_lines_next(cli_lines *r, size_t *len);
/* The message of the last -1 from cli_lines_next ("gzip data is truncated",
 * "read error: ...", "out of memory"), without the file name; "" otherwise. */
const char *cli_lines_error(const cli_lines *r);
/* Close the stream and free the buffers; r may be all zeros. */
void cli_lines_close(cli_lines *r);

/* Read the rest of s into a NUL-terminated buffer *data (the caller frees it)
 * of *len bytes (the NUL not counted; NUL bytes inside are kept). Returns 0;
 * -1 out of memory (errno ENOMEM); -2 the stream broke: cli_stream_error(s)
 * says why and *line (if not NULL) gets the 1-based line being read when it
 * broke. Nothing is returned in *data on failure. */
int cli_read_stream(cli_stream *s, char **data, size_t *len, unsigned long long *line);

/* Read a whole file (or stdin for "-"), plain or compressed, like
 * cli_read_stream. Returns 0, or -1 with a message in why[why_size] ready to
 * follow "simstore CMD: ": "FILE: strerror" when it cannot be opened or
 * memory runs out, "FILE:LINE: gzip data is truncated" (and the like) when
 * the input broke. */
int cli_read_file(const char *path, char **data, size_t *len, char *why, size_t why_size);

#endif
