/* mpi_internal.h: what simstore-mpi's files share: this rank and the job's
 * size, messages naming the rank, the agreement on failures (main.c); byte
 * buffers and the one all-to-all exchange (exchange.c); the inputs split
 * across the ranks (split.c); the commands (build.c, query.c, pairs.c,
 * clusters.c: scan_internal.h). */
#ifndef SIMSTORE_MPI_INTERNAL_H
#define SIMSTORE_MPI_INTERNAL_H

#include "boilerplate.h"
#include "input.h"
#include "simstore.h"
#include "simstore_unstable.h"
#include "stream.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- main.c: the job, messages, agreement --------------------------------- */

extern int rank, nranks;
extern const char *cmd_name; /* "simstore-mpi COMMAND", for messages */

/* A message of this rank on stderr: "simstore-mpi CMD: rank N: ...". */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A document id as one TSV field, as simstore prints it (cli_tsv_id): as it
 * is, or escaped when it breaks the id rule, the first such id of the rank
 * told on stderr (output.c). */
void print_tsv_id(FILE *f, const char *id, size_t len);

/* A message of rank 0 on stderr, "simstore-mpi CMD: ...", and nothing on
 * the other ranks (which decided alike): a usage error or a refusal. */
void rank0_says(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Every rank's status (0 ok): rank 0 names the failed ones ("WHAT failed
 * on rank N"). Collective. Returns 0 when every rank succeeded, else 1 on
 * every rank. */
int agree(int failed, const char *what);

/* --progress: every rank knows it (the same arguments); rank 0 alone says.
 * Plain lines, one a step, since mpirun hands stderr on through a pipe. */
extern int show_progress;

/* A progress line of rank 0 on stderr ("simstore-mpi CMD: ..."), with
 * --progress; nothing otherwise. Not collective: totals are the caller's. */
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "simstore-mpi CMD: bad usage at 'ARG' (see --help)" from rank 0, ARG the
 * argument getopt_long last took. Returns 2. */
int usage_error(int argc, char **argv);

/* qsort(3) of n items, also when base is NULL with n 0 (an empty rank's
 * arrays), which qsort itself must not be given. */
static inline void sort_items(void *base, size_t n, size_t size,
                              int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

/* ---- exchange.c: byte buffers, the all-to-all exchange ------------------- */

typedef struct buf {
    char *data;
    size_t len, cap;
} buf;

/* Append n bytes (or a little-endian u64, u32). Returns 0, or -1 out of
 * memory. */
int buf_put(buf *b, const void *p, size_t n);
int buf_u64(buf *b, uint64_t v);
int buf_u32(buf *b, uint32_t v);

/* Read a little-endian u64 (u32) at *p and advance it. */
uint64_t get_u64(const char **p);
uint32_t get_u32(const char **p);

/* p, or when it is NULL (out of memory in an exchange's bookkeeping) the
 * job ends: the rank says so and aborts it. */
void *must(void *p);

/* buf_put, buf_u64, buf_u32 that end the job out of memory (must). */
void put(buf *b, const void *p, size_t n);
void put64(buf *b, uint64_t v);
void put32(buf *b, uint32_t v);

/* nranks empty buffers, one per rank (must); bufs_free frees them (NULL
 * too). */
buf *bufs_new(void);
void bufs_free(buf *b);

/* The sum of v over the ranks. Collective. */
uint64_t sum_ranks(uint64_t v);

/* The one all-to-all exchange of simstore-mpi: len[d] bytes at data[d] go
 * to rank d, for every rank d (data[d] may be NULL when len[d] is 0; each
 * len and their sum fit an int: callers bound their rounds). Returns what
 * this rank received (malloc'd, never NULL, the caller frees it): rank s's
 * got[s] bytes at offset at[s], *total in all. Collective; out of memory
 * ends the job (must). */
char *exchange_round(const char *const *data, const size_t *len, size_t *at, size_t *got,
                     size_t *total);

/* out[d] to rank d for every d, in exchange_round rounds of at most
 * chunk_bytes to each rank; what rank s sent is appended to in[s].
 * Collective; out is emptied. */
void exchange_bufs(buf *out, buf *in, uint64_t chunk_bytes);

/* ---- split.c: the inputs, split across the ranks -------------------------- */

/* Bare fingerprints, for --fingerprint-only (cmd/input parses the others):
 * hex16 lines, and raw little-endian 64-bit values (.u64). */
#define INPUT_HEX_LINES 100
#define INPUT_U64_VALUES 101

/* --format NAME as the input formats above (build's names); -1 for none. */
int parse_format(const char *s);

/* The format of an input, as `simstore build` tells it
 * (ingest_format_of_name): given >= 0 (--format), else from the name, a
 * compressed file's by the name under .gz, .zst or .zstd; -1 when the name
 * does not tell (standard input only from --format). */
int format_of(const char *path, int given);

/* An input's name in messages: standard input is "<stdin>", as `simstore
 * build` calls it. */
const char *input_shown(const char *path);

/* simstore_source_fn over the inputs (ctx: their paths): source values
 * are (input index << 40) | line. */
void source_name(void *ctx, uint64_t source, char *out, size_t size);

/* The part of input `index` whose records start in [lo, hi) of that file
 * (a plain regular file, split among the ranks), or all of it (whole: a
 * compressed file or standard input, which cannot be split at byte offsets
 * and is read as a stream by one rank). `records`: how many this rank read
 * and sent of it, for the numbering (build.c, add_spooled). */
typedef struct input_part {
    const char *path;
    const char *name; /* in messages */
    int index;
    int format;
    int whole;
    uint64_t lo, hi;
    uint64_t records;
} input_part;

/* This rank's parts, in input order, read a record at a time (resumable
 * between rounds). */
typedef struct reader {
    input_part *parts;
    int nparts, cur;
    int open;
    const char *data; /* a split part's file, mapped */
    size_t size, pos;
    cli_stream *stream; /* a whole part's; its bytes in buf[pos..len) */
    char *buf;
    size_t len, cap;
    int eof;
    unsigned long long line;
    input_parser *p;
    const input_fields *fields;
    int done;
} reader;

/* This rank's share of the inputs (formats by format_of(path, format)):
 * rank 0 tells how each is read, as `simstore build` would open it, and
 * every rank follows: a plain regular file is split among the ranks at
 * record boundaries, a compressed one, standard input and anything else (a
 * FIFO) read whole by one rank. With stdin_path (not NULL), the first "-"
 * is read from that path instead (rank 0's copy of standard input). Sets
 * rd->parts, rd->nparts (rd->fields is the caller's; each part checked
 * readable unless `failed`) and *input_bytes, the inputs' bytes as they
 * are. Returns 1 when failed or this rank failed (said why), else 0.
 * Collective. */
int split_inputs(char **inputs, int ninputs, int format, const char *stdin_path, int failed,
                 reader *rd, uint64_t *input_bytes);

/* Open the current part rd->parts[rd->cur]. Returns 0 or -1 (said why). */
int reader_open_part(reader *rd);

/* The current part's next record: a line (without its '\n') or an 8-byte
 * value, at *text, *len bytes. Returns 1, 0 at the part's end, or -1
 * (said why). */
int reader_next(reader *rd, const input_part *ip, const char **text, size_t *len);

/* Close the current part (a reader with none open too). */
void reader_close_part(reader *rd);

/* The bytes of rd's parts read so far, and in all (a whole part's as they
 * are, compressed), for progress. */
void reader_progress(const reader *rd, uint64_t *done, uint64_t *share);

/* --boilerplate auto reads every input twice, and standard input can be
 * read once: this rank copies it first, as it is (compressed or not), into
 * an unlinked scratch file in OUT, kept open as *fd; both passes read
 * that. Returns 0, or -1 (said why). */
int copy_stdin(const char *out, int *fd);

/* ---- build: records.c, boilerplate.c ------------------------------------- */

/* Where the records one rank sent this rank in one round lie in the spool. */
typedef struct spooled {
    uint64_t offset, len;
} spooled;

/* The chunks received from one rank, in the order received. */
typedef struct spool_list {
    spooled *v;
    size_t n, cap;
} spool_list;

typedef struct build_state {
    simstore_builder *b;
    simstore_fingerprinter *fpr;
    simstore_sketch_kind sketch;
    size_t sketch_bytes;
    int fp_only;             /* --fingerprint-only: fingerprints travel alone, to shard_of_fp */
    unsigned para_min_words; /* --paragraphs: texts' paragraphs travel too */
    uint64_t *paras;         /* one text's paragraph fingerprints (aligned) */
    size_t paras_cap;
    /* --boilerplate auto's first pass: every JSON Lines document's line
     * keys counted here, nothing sent. */
    simstore_boilerplate_counter *counter;
    uint64_t only_boilerplate;
    buf *out; /* one per rank */
    size_t buffered;
    uint64_t bad, records;
    uint64_t sent; /* records this rank read and sent: the next one's local index */
    /* The records received, kept until every rank's offset in the input is
     * known: an unlinked scratch file in OUT, and per sending rank where its
     * chunks lie in it. */
    int spool_fd;
    uint64_t spool_len;
    spool_list *from; /* one per rank */
} build_state;

/* Read records until chunk_bytes are buffered or this rank's share ends
 * (rd->done), counting each part's records sent; with st->counter (the
 * first pass of --boilerplate auto) only their line keys counted. Returns
 * 0, or -1 when this rank cannot go on (said why). */
int fill(build_state *st, reader *rd, uint64_t chunk_bytes);

/* One all-to-all round: every rank's buffered records (st->out) to their
 * ranks, which spool them. Returns 0, or -1 (this rank failed; the round
 * still completed). Collective. */
int exchange_records(build_state *st);

/* The spool of received records: an unlinked file in OUT, which holds the
 * shards being built. spool_open returns 0, or -1 (said why); spool_close
 * closes it (one never opened too). */
int spool_open(build_state *st, const char *out);
void spool_close(build_state *st);

/* Every rank has read its share (parts[0..nparts)): every part's records
 * counted in input order, so each record's position in the whole input is
 * known; then the spooled records are added to st->b in input order.
 * Returns 0, or -1 (said why). Collective. */
int add_spooled(build_state *st, const input_part *parts, int nparts);

/* --boilerplate auto: the set of the whole input (boilerplate.c), from a
 * first pass over this rank's share (rd: a reader of its parts not yet
 * read, left closed) in memory_bytes. Returns 0 with *out (on every rank),
 * or 1 on every rank (said). Collective. */
int find_boilerplate(build_state *st, reader *rd, const boiler_opts *bo,
                     const simstore_text_options *text, uint64_t memory_bytes,
                     simstore_boilerplate **out);

/* ---- the commands -------------------------------------------------------- */

/* `simstore-mpi build` (build.c), `query` (query.c), `pairs` (pairs.c)
 * and `clusters` (clusters.c). Each returns the exit status, the same on
 * every rank. */
int cmd_mpi_build(int argc, char **argv);
int cmd_mpi_query(int argc, char **argv);
int cmd_mpi_pairs(int argc, char **argv);
int cmd_mpi_clusters(int argc, char **argv);

/* Rank 0 checks the sharded store OUT as a whole (its manifest, every
 * shard's agreement with it, R shards for R ranks); then every rank opens
 * its shard read-only: *s (closed with simstore_close), its stats *st, its
 * path in shard[0..size). Returns 0, or 1 on every rank after the failed
 * ranks said why (*s NULL). Collective (query.c). */
int open_my_shard(const char *out, simstore **s, simstore_stats *st, char *shard, size_t size);

#endif
