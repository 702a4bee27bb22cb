/* simstore_mpi.c: simstore-mpi, the MPI driver of sharded stores
 * (format/shards.md), run as `mpirun -np R simstore-mpi COMMAND ...`: rank r
 * owns shard r. A client of the public API (and of cmd/'s input reader and
 * output helpers), nothing more.
 *
 *   build OUT INPUT...   every rank reads its share of the inputs (plain
 *                        files split at record boundaries; a compressed
 *                        file or standard input whole, by one rank),
 *                        fingerprints, sends each record to its shard's
 *                        rank (all-to-all in bounded chunks), which spools
 *                        it; once every part's record count is known
 *                        (MPI_Allgatherv) each rank adds what it received
 *                        in input order, each document at its position
 *                        in the whole input, and builds its shard with
 *                        the ordinary builder;
 *                        rank 0 publishes the manifest when every rank
 *                        succeeded, and nothing otherwise. Paragraph
 *                        fingerprints travel with their records
 *                        (--paragraphs); --boilerplate auto first counts
 *                        each share's line keys and sums the counts of
 *                        the keys some rank offers (find_boilerplate);
 *                        --fingerprint-only sends bare fingerprints to
 *                        their shard_of_fp.
 *   query OUT --queries FILE
 *                        every rank answers the batch against its shard
 *                        (documents, or with --paragraphs the documents
 *                        sharing paragraphs: each lives on one shard, so
 *                        its counts are complete there); rank 0 merges and
 *                        prints exactly what `simstore query` prints for
 *                        one store of the same documents.
 *
 * A rank that fails says so ("rank N: why") and the job exits 1 on every
 * rank, naming the failed ranks. */
#include "mpikit.h"

#include "boilerplate.h"
#include "cli.h"
#include "ingest.h"
#include "input.h"
#include "progress.h"
#include "stream.h"
#include "textopts.h"
#include "simstore.h"

#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int rank, nranks;
const char *cmd_name = "simstore-mpi";

/* A message of this rank on stderr: "simstore-mpi CMD: rank N: ...". */
void say(const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: rank %d: %s\n", cmd_name, rank, text);
}

int show_progress;

void progress(const char *fmt, ...)
{
    if (!show_progress || rank != 0)
        return;
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", cmd_name, text);
}

/* Every rank's status (0 ok): rank 0 names the failed ones. Returns 0 when
 * every rank succeeded, else 1 on every rank. */
int agree(int failed, const char *what)
{
    int *all = malloc((size_t)nranks * sizeof *all);
    if (!all)
        MPI_Abort(MPI_COMM_WORLD, 1);
    failed = failed != 0;
    MPI_Allgather(&failed, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int any = 0;
    char list[1024] = "";
    size_t used = 0;
    for (int i = 0; i < nranks; i++)
        if (all[i]) {
            any++;
            if (used < sizeof list - 16)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                                         any > 1 ? ", " : "", i);
        }
    free(all);
    if (any && rank == 0)
        fprintf(stderr, "%s: %s failed on %s %s\n", cmd_name, what, any > 1 ? "ranks" : "rank",
                list);
    return any ? 1 : 0;
}

/* ---- a growing byte buffer ------------------------------------------------ */

int buf_put(buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *g = realloc(b->data, cap);
        if (!g)
            return -1;
        b->data = g;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int buf_u64(buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    return buf_put(b, x, 8);
}

int buf_u32(buf *b, uint32_t v)
{
    uint8_t x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    return buf_put(b, x, 4);
}

uint64_t get_u64(const char **p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)(uint8_t)(*p)[i] << (8 * i);
    *p += 8;
    return v;
}

uint32_t get_u32(const char **p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)(uint8_t)(*p)[i] << (8 * i);
    *p += 4;
    return v;
}

/* ---- inputs: formats and names ---------------------------------------------- */

/* Bare fingerprints, for --fingerprint-only (cmd/input parses the others):
 * hex16 lines, and raw little-endian 64-bit values (.u64). */
#define INPUT_HEX_LINES 100
#define INPUT_U64_VALUES 101

/* cmd/ingest.c's format (as `simstore build` names them) as this file's. */
static int from_ingest_format(int f)
{
    switch (f) {
    case INGEST_TSV: return INPUT_ID_FP;
    case INGEST_FP: return INPUT_FP_ID;
    case INGEST_JSONL: return INPUT_JSONL;
    case INGEST_HEX: return INPUT_HEX_LINES;
    case INGEST_U64: return INPUT_U64_VALUES;
    default: return -1;
    }
}

/* The format of an input, as `simstore build` tells it
 * (ingest_format_of_name): from the name, a compressed file's by the name
 * under .gz, .zst or .zstd; standard input only from --format. */
static int format_of(const char *path, int given)
{
    if (given >= 0)
        return given;
    if (strcmp(path, "-") == 0)
        return -1;
    return from_ingest_format(ingest_format_of_name(path));
}

static int parse_format(const char *s)
{
    return from_ingest_format(ingest_format_parse(s));
}

/* An input's name in messages: standard input is "<stdin>", as `simstore
 * build` calls it. */
static const char *input_shown(const char *path)
{
    return strcmp(path, "-") == 0 ? "<stdin>" : path;
}

/* Source values: (input index << 40) | line. */
static void source_name(void *ctx, uint64_t source, char *out, size_t size)
{
    char **paths = (char **)ctx;
    snprintf(out, size, "%s:%llu", input_shown(paths[source >> 40]),
             (unsigned long long)(source & (((uint64_t)1 << 40) - 1)));
}

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

/* One parsed record, serialized for its shard's rank: flags (bit 0 integer
 * id, bit 1 sketch, bit 2 paragraphs), fp, source, local index (u64: the
 * record's place among the records of the sending rank's share), id length
 * (u32), meta length (u32), id, meta, sketch, then the paragraphs' count
 * (u32) and fingerprints (u64 each) of st->paras. */
static int send_record(build_state *st, const input_record *rec, uint64_t fp, const uint8_t *sketch,
                       uint64_t source, size_t nparas)
{
    unsigned dest = st->fp_only ? simstore_shard_of_fp(fp, (unsigned)nranks)
                                : simstore_shard_of(rec->id, rec->id_len, (unsigned)nranks);
    buf *b = &st->out[dest];
    size_t id_len = st->fp_only ? 0 : rec->id_len;
    size_t meta_len = rec->meta && !st->fp_only ? strlen(rec->meta) : 0;
    uint8_t flags = (uint8_t)((rec->id_is_integer ? 1 : 0) | (sketch ? 2 : 0) | (nparas ? 4 : 0));
    size_t before = b->len;
    if (buf_put(b, &flags, 1) || buf_u64(b, fp) || buf_u64(b, source) || buf_u64(b, st->sent) ||
        buf_u32(b, (uint32_t)id_len) || buf_u32(b, (uint32_t)meta_len) ||
        buf_put(b, rec->id, id_len) || buf_put(b, rec->meta, meta_len) ||
        (sketch && buf_put(b, sketch, st->sketch_bytes)) ||
        (nparas && buf_u32(b, (uint32_t)nparas)))
        return -1;
    for (size_t i = 0; i < nparas; i++)
        if (buf_u64(b, st->paras[i]))
            return -1;
    st->buffered += b->len - before;
    st->sent++;
    return 0;
}

/* Room for n paragraph fingerprints in st->paras. Returns 0, or -1 (no
 * memory). */
static int paras_reserve(build_state *st, size_t n)
{
    if (n <= st->paras_cap)
        return 0;
    uint64_t *g = realloc(st->paras, n * sizeof *g);
    if (!g)
        return -1;
    st->paras = g;
    st->paras_cap = n;
    return 0;
}

/* Add the record at *pp (advanced past it) to this rank's builder, at its
 * position in the whole input: it is the sender's record number `local`
 * (its place among the records the sender read), of a part whose records
 * the sender numbered from local_first and the whole input from
 * global_first. Returns 0, or -1 (said why). */
static int add_record(build_state *st, const char **pp, uint64_t local_first, uint64_t global_first)
{
    const char *p = *pp;
    uint8_t flags = (uint8_t)*p++;
    simstore_doc d;
    d.fp = get_u64(&p);
    d.source = get_u64(&p);
    uint64_t position = global_first + (get_u64(&p) - local_first);
    d.id_len = get_u32(&p);
    d.meta_len = get_u32(&p);
    d.id = p;
    p += d.id_len;
    d.meta = d.meta_len ? p : NULL;
    p += d.meta_len;
    const uint8_t *sketch = NULL;
    if (flags & 2) {
        sketch = (const uint8_t *)p;
        p += st->sketch_bytes;
    }
    size_t nparas = (flags & 4) ? get_u32(&p) : 0;
    if (paras_reserve(st, nparas)) {
        say("out of memory");
        return -1;
    }
    for (size_t i = 0; i < nparas; i++)
        st->paras[i] = get_u64(&p);
    *pp = p;
    int rc;
    if (st->fp_only)
        rc = simstore_builder_add_fp(st->b, d.fp);
    else if ((rc = simstore_builder_set_position(st->b, position)) == 0)
        rc = st->para_min_words
                 ? simstore_builder_add_paragraphs(st->b, &d,
                                                   (flags & 1) ? SIMSTORE_DOC_INTEGER_ID : 0,
                                                   sketch, st->paras, nparas)
                 : simstore_builder_add_sketch(st->b, &d, (flags & 1) ? SIMSTORE_DOC_INTEGER_ID : 0,
                                               sketch);
    if (rc) {
        say("adding a document: %s: %s", simstore_strerror(rc), simstore_last_error());
        return -1;
    }
    st->records++;
    return 0;
}

/* Write (writing) or read back n bytes at `offset` of the spool. Returns 0,
 * or -1 (said why). */
static int spool_io(const build_state *st, char *p, size_t n, uint64_t offset, int writing)
{
    for (size_t done = 0; done < n;) {
        ssize_t got = writing ? pwrite(st->spool_fd, p + done, n - done, (off_t)(offset + done))
                              : pread(st->spool_fd, p + done, n - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            say("%s the records received: %s", writing ? "spooling" : "reading back",
                got < 0 ? strerror(errno) : "short transfer");
            return -1;
        }
        done += (size_t)got;
    }
    return 0;
}

/* Keep one round's received bytes (recv[0..total), rank i's at offset
 * at[i], len[i] bytes) in the spool. Returns 0, or -1 (said why). */
static int spool_received(build_state *st, char *recv, size_t total, const int *at, const int *len)
{
    if (spool_io(st, recv, total, st->spool_len, 1))
        return -1;
    for (int i = 0; i < nranks; i++) {
        spool_list *l = &st->from[i];
        if (len[i] == 0)
            continue;
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 16;
            spooled *g = realloc(l->v, cap * sizeof *g);
            if (!g) {
                say("out of memory");
                return -1;
            }
            l->v = g;
            l->cap = cap;
        }
        l->v[l->n++] = (spooled){st->spool_len + (uint64_t)at[i], (uint64_t)len[i]};
    }
    st->spool_len += total;
    return 0;
}

/* The spool of received records: an unlinked file in OUT, which holds the
 * shards being built. Returns 0, or -1 (said why). */
static int spool_open(build_state *st, const char *out)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.rank-%d.spool-XXXXXX", out, rank);
    st->spool_fd = mkstemp(path);
    if (st->spool_fd < 0) {
        say("%s: %s", path, strerror(errno));
        return -1;
    }
    unlink(path);
    st->from = calloc((size_t)nranks, sizeof *st->from);
    if (!st->from) {
        say("out of memory");
        return -1;
    }
    return 0;
}

static void spool_close(build_state *st)
{
    if (st->spool_fd >= 0)
        close(st->spool_fd);
    st->spool_fd = -1;
    for (int i = 0; st->from && i < nranks; i++)
        free(st->from[i].v);
    free(st->from);
    st->from = NULL;
}

/* One all-to-all round: every rank's buffered records to their ranks.
 * Returns 0, or -1 (this rank failed; the round still completed). */
static int exchange(build_state *st)
{
    int *sc = calloc((size_t)nranks * 4, sizeof *sc);
    if (!sc)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int *rc_ = sc + nranks, *sd = sc + 2 * nranks, *rd = sc + 3 * nranks;
    for (int i = 0; i < nranks; i++)
        sc[i] = (int)st->out[i].len;
    MPI_Alltoall(sc, 1, MPI_INT, rc_, 1, MPI_INT, MPI_COMM_WORLD);
    buf send = {NULL, 0, 0};
    size_t total = 0;
    for (int i = 0; i < nranks; i++) {
        sd[i] = (int)send.len;
        if (buf_put(&send, st->out[i].data, st->out[i].len))
            MPI_Abort(MPI_COMM_WORLD, 1);
        st->out[i].len = 0;
        rd[i] = (int)total;
        total += (size_t)rc_[i];
    }
    char *recv = malloc(total ? total : 1);
    if (!recv)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Alltoallv(send.data, sc, sd, MPI_BYTE, recv, rc_, rd, MPI_BYTE, MPI_COMM_WORLD);
    free(send.data);
    st->buffered = 0;
    int failed = st->b ? spool_received(st, recv, total, rd, rc_) : 0;
    free(recv);
    free(sc);
    return failed;
}

/* The part of input `index` whose records start in [lo, hi) of that file
 * (a plain regular file, split among the ranks), or all of it (whole: a
 * compressed file or standard input, which cannot be split at byte offsets
 * and is read as a stream by one rank). `records`: how many this rank read
 * and sent of it, for the numbering (add_spooled). */
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

static void reader_close_part(reader *rd)
{
    if (rd->data && rd->size)
        munmap((void *)rd->data, rd->size);
    rd->data = NULL;
    cli_stream_close(rd->stream);
    rd->stream = NULL;
    free(rd->buf);
    rd->buf = NULL;
    rd->len = rd->cap = rd->pos = 0;
    rd->eof = 0;
    input_parser_free(rd->p);
    rd->p = NULL;
    rd->open = 0;
}

/* Open a whole part: its stream, decompressing as `simstore build` does. */
static int reader_open_stream(reader *rd, const input_part *ip)
{
    if (cli_stream_open(&rd->stream, ip->path) != 0) {
        say("%s: %s", ip->name, strerror(errno));
        return -1;
    }
    rd->pos = rd->len = 0;
    rd->eof = 0;
    rd->line = 1;
    return 0;
}

/* Map a split part and find its first record. Returns 0 or -1. */
static int reader_map(reader *rd, const input_part *ip)
{
    int fd = open(ip->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say("%s: %s", ip->name, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        say("%s: not a regular file (simstore-mpi reads files, compressed or not, and "
            "standard input)",
            ip->name);
        close(fd);
        return -1;
    }
    rd->size = (size_t)sb.st_size;
    rd->data = rd->size ? mmap(NULL, rd->size, PROT_READ, MAP_PRIVATE, fd, 0) : "";
    close(fd);
    if (rd->data == MAP_FAILED) {
        rd->data = NULL;
        say("%s: %s", ip->name, strerror(errno));
        return -1;
    }
    if (ip->format == INPUT_U64_VALUES) {
        /* Values start at multiples of 8: ours are those starting in
         * [lo, hi); the rank holding the file's end says when it is not a
         * whole number of values, as `simstore build` would after them. */
        if (rd->size % 8 && ip->hi >= rd->size) {
            say("%s: length is not a multiple of 8 bytes", ip->name);
            return -1;
        }
        rd->pos = (size_t)((ip->lo + 7) / 8 * 8);
        rd->line = rd->pos / 8 + 1;
        return 0;
    }
    /* The first line of ours starts at lo when the byte before it ends a
     * line; else after the next newline. Line numbers count from the
     * file's start. */
    size_t pos = (size_t)ip->lo;
    if (pos > rd->size)
        pos = rd->size;
    if (pos > 0 && rd->data[pos - 1] != '\n') {
        const char *nl = memchr(rd->data + pos, '\n', rd->size - pos);
        pos = nl ? (size_t)(nl - rd->data) + 1 : rd->size;
    }
    rd->line = 1;
    for (size_t i = 0; i < pos;) {
        const char *nl = memchr(rd->data + i, '\n', pos - i);
        if (!nl)
            break;
        rd->line++;
        i = (size_t)(nl - rd->data) + 1;
    }
    rd->pos = pos;
    return 0;
}

/* Open the current part. Returns 0 or -1 (said why). */
static int reader_open_part(reader *rd)
{
    const input_part *ip = &rd->parts[rd->cur];
    if (ip->whole ? reader_open_stream(rd, ip) : reader_map(rd, ip))
        return -1;
    rd->open = 1;
    if (ip->format != INPUT_HEX_LINES && ip->format != INPUT_U64_VALUES &&
        input_parser_new(&rd->p, (input_format)ip->format, rd->fields) != 0) {
        say("out of memory");
        return -1;
    }
    return 0;
}

/* Read more of a whole part's stream into rd->buf (keeping buf[pos..len)).
 * Returns 0 (rd->eof set at the end), or -1 (said why, naming the line
 * being read). */
static int reader_more(reader *rd, const input_part *ip)
{
    if (rd->pos > 0) {
        memmove(rd->buf, rd->buf + rd->pos, rd->len - rd->pos);
        rd->len -= rd->pos;
        rd->pos = 0;
    }
    size_t want = (size_t)64 << 10;
    if (rd->cap - rd->len < want) {
        size_t cap = rd->cap ? rd->cap : want;
        while (cap - rd->len < want)
            cap *= 2;
        char *g = realloc(rd->buf, cap);
        if (!g) {
            say("out of memory");
            return -1;
        }
        rd->buf = g;
        rd->cap = cap;
    }
    ssize_t got = cli_stream_read(rd->stream, rd->buf + rd->len, want);
    if (got < 0) {
        say("%s:%llu: %s", ip->name, rd->line, cli_stream_error(rd->stream));
        return -1;
    }
    if (got == 0)
        rd->eof = 1;
    rd->len += (size_t)got;
    return 0;
}

/* The current part's next record: a line (without its '\n') or an 8-byte
 * value, at *text, *len bytes. Returns 1, 0 at the part's end, or -1
 * (said why). */
static int reader_next(reader *rd, const input_part *ip, const char **text, size_t *len)
{
    size_t need = ip->format == INPUT_U64_VALUES ? 8 : 0;
    if (!ip->whole) {
        if (rd->pos >= rd->size || rd->pos >= ip->hi || rd->size - rd->pos < need)
            return 0;
        *text = rd->data + rd->pos;
        if (need) {
            *len = need;
            rd->pos += need;
            return 1;
        }
        const char *nl = memchr(rd->data + rd->pos, '\n', rd->size - rd->pos);
        size_t end = nl ? (size_t)(nl - rd->data) : rd->size;
        *len = end - rd->pos;
        rd->pos = end + 1;
        return 1;
    }
    for (size_t scan = rd->pos;;) {
        if (need ? rd->len - rd->pos >= need : rd->len > scan) {
            const char *nl = need ? NULL : memchr(rd->buf + scan, '\n', rd->len - scan);
            if (need || nl) {
                size_t end = need ? rd->pos + need : (size_t)(nl - rd->buf);
                *text = rd->buf + rd->pos;
                *len = end - rd->pos;
                rd->pos = need ? end : end + 1;
                return 1;
            }
            scan = rd->len;
        }
        if (rd->eof) {
            if (rd->pos == rd->len)
                return 0;
            if (need) {
                say("%s: length is not a multiple of 8 bytes", ip->name);
                return -1;
            }
            /* A last line without its newline. */
            *text = rd->buf + rd->pos;
            *len = rd->len - rd->pos;
            rd->pos = rd->len;
            return 1;
        }
        size_t kept = scan - rd->pos;
        if (reader_more(rd, ip))
            return -1;
        scan = rd->pos + kept;
    }
}

/* The first pass of --boilerplate auto: a JSON Lines document's line keys
 * counted (one giving "fp" has no text: a document of no lines, as
 * `simstore build` counts it). Returns 0, or -1 (said why). */
static int count_line_keys(build_state *st, const input_record *rec)
{
    const uint64_t *keys = NULL;
    size_t n = 0;
    int rc = rec->has_fp
                 ? 0
                 : simstore_fingerprinter_line_keys(st->fpr, rec->text, rec->text_len, &keys, &n);
    if (rc == 0)
        rc = simstore_boilerplate_counter_add_keys(st->counter, keys, n);
    if (rc) {
        say("counting boilerplate: %s", simstore_last_error());
        return -1;
    }
    return 0;
}

/* The text's paragraph fingerprints (as `simstore build --paragraphs`
 * indexes them) into st->paras, *n of them. Returns 0 or an error code. */
static int text_paragraphs(build_state *st, const input_record *rec, size_t *n)
{
    int rc = simstore_paragraph_fingerprints(st->fpr, rec->text, rec->text_len, st->para_min_words,
                                             st->paras, st->paras_cap, n);
    if (rc == 0 && *n > st->paras_cap) {
        if (paras_reserve(st, *n))
            return SIMSTORE_ENOMEM;
        rc = simstore_paragraph_fingerprints(st->fpr, rec->text, rec->text_len, st->para_min_words,
                                             st->paras, st->paras_cap, n);
    }
    return rc;
}

/* One line: parsed, fingerprinted, sent to its shard. Returns 0, or -1
 * when this rank cannot go on. Bad records are reported and counted. */
static int take_line(build_state *st, reader *rd, const input_part *ip, const char *text,
                     size_t len)
{
    uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
    input_record rec;
    if (ip->format == INPUT_U64_VALUES) {
        /* As `simstore build --fingerprint-only` reads .u64 values. */
        memset(&rec, 0, sizeof rec);
        for (int i = 7; i >= 0; i--)
            rec.fingerprint = rec.fingerprint << 8 | (uint8_t)text[i];
        (void)len;
        return send_record(st, &rec, rec.fingerprint, NULL, 0, 0) ? (say("out of memory"), -1) : 0;
    }
    if (len && text[len - 1] == '\r')
        len--;
    if (input_trim_line(&text, &len, rd->line == 1))
        return 0;
    if (ip->format == INPUT_HEX_LINES) {
        /* As `simstore build --fingerprint-only` reads .hex lines. */
        char hex[17], shown[41];
        memset(&rec, 0, sizeof rec);
        if (len == 16) {
            memcpy(hex, text, 16);
            hex[16] = '\0';
            if (cli_parse_hex64(hex, &rec.fingerprint) == 0)
                return send_record(st, &rec, rec.fingerprint, NULL, 0, 0)
                           ? (say("out of memory"), -1)
                           : 0;
        }
        size_t n = len < 40 ? len : 40;
        for (size_t i = 0; i < n; i++)
            shown[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7F ? '?' : text[i];
        shown[n] = '\0';
        say("%s:%llu: expected 16 hex digits, got '%s'", ip->name, rd->line, shown);
        st->bad++;
        return 0;
    }
    int got = input_parse_line(rd->p, text, len, ip->name, rd->line, &rec);
    if (got == -2) {
        say("out of memory");
        return -1;
    }
    if (st->counter) /* the first pass: bad records are the second's to say */
        return got == -1 ? 0 : count_line_keys(st, &rec);
    if (got == -1) {
        say("%s:%llu: %s", ip->name, rd->line, input_parser_error(rd->p));
        st->bad++;
        return 0;
    }
    uint64_t fp = rec.fingerprint;
    size_t nparas = 0;
    const uint8_t *sk = NULL;
    int rc = 0;
    if (ip->format == INPUT_JSONL && !rec.has_fp) {
        unsigned fl = 0;
        if (st->sketch != SIMSTORE_SKETCH_NONE) {
            rc = simstore_fingerprint_sketch(st->fpr, rec.text, rec.text_len, &fp, sketch, &fl);
            sk = sketch;
        } else {
            rc = simstore_fingerprint_text(st->fpr, rec.text, rec.text_len, &fp, &fl);
        }
        if (rc == 0 && st->para_min_words)
            rc = text_paragraphs(st, &rec, &nparas);
        if (rc == 0 && (fl & SIMSTORE_FP_ONLY_BOILERPLATE)) {
            char esc[CLI_ESCAPED_ID_BYTES];
            st->only_boilerplate++;
            say("warning: %s:%llu: document id '%s' is only boilerplate: fingerprinted whole",
                ip->name, rd->line, cli_escape(rec.id, rec.id_len, esc, sizeof esc));
        }
    } else if (st->sketch != SIMSTORE_SKETCH_NONE) {
        if (!rec.has_fp || !rec.sketch || rec.sketch_len != st->sketch_bytes) {
            say("%s:%llu: the store keeps sketches, and this record has none (give --sketch "
                "none)",
                ip->name, rd->line);
            st->bad++;
            return 0;
        }
        sk = rec.sketch;
    }
    if (rc) {
        say("%s:%llu: %s", ip->name, rd->line, simstore_last_error());
        st->bad++;
        return 0;
    }
    if (send_record(st, &rec, fp, sk, ((uint64_t)ip->index << 40) | rd->line, nparas)) {
        say("out of memory");
        return -1;
    }
    return 0;
}

/* Read records until chunk_bytes are buffered or this rank's share ends
 * (rd->done), counting each part's records sent. Returns 0, or -1 when this
 * rank cannot go on. */
static int fill(build_state *st, reader *rd, uint64_t chunk_bytes)
{
    while (!rd->done && st->buffered < chunk_bytes) {
        if (rd->cur >= rd->nparts) {
            rd->done = 1;
            break;
        }
        if (!rd->open && reader_open_part(rd))
            return -1;
        input_part *ip = &rd->parts[rd->cur];
        const char *text;
        size_t len;
        int got = reader_next(rd, ip, &text, &len);
        if (got < 0)
            return -1;
        if (got == 0) {
            reader_close_part(rd);
            rd->cur++;
            continue;
        }
        uint64_t before = st->sent;
        if (take_line(st, rd, ip, text, len))
            return -1;
        ip->records += st->sent - before;
        rd->line++;
    }
    return 0;
}

/* --boilerplate auto reads every input twice, and standard input can be
 * read once: rank 0 copies it first, as it is (compressed or not), into an
 * unlinked scratch file in OUT, kept open as *fd; both passes read that.
 * Returns 0, or -1 (said why). */
static int copy_stdin(const char *out, int *fd)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/.rank-%d.stdin-XXXXXX", out, rank);
    *fd = mkostemp(path, O_CLOEXEC);
    if (*fd < 0) {
        say("%s: %s", path, strerror(errno));
        return -1;
    }
    unlink(path);
    static char bytes[1 << 16];
    for (;;) {
        ssize_t n = read(STDIN_FILENO, bytes, sizeof bytes);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            say("<stdin>: %s", strerror(errno));
            return -1;
        }
        if (n == 0)
            return 0;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(*fd, bytes + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                say("<stdin>: cannot copy it to %s to read it twice: %s", out, strerror(errno));
                return -1;
            }
            done += w;
        }
    }
}

/* ---- the records received, added in input order ------------------------ */

/* One part of some rank's share, as every rank learns it: its place in the
 * input (index, lo), the rank that read it and its records, numbered from
 * local_first among that rank's and from global_first in the whole input. */
typedef struct part_count {
    uint64_t index, lo, records, rank, local_first, global_first;
} part_count;

static int cmp_part(const void *x, const void *y)
{
    const part_count *a = x, *b = y;
    if (a->index != b->index)
        return (a->index > b->index) - (a->index < b->index);
    return (a->lo > b->lo) - (a->lo < b->lo);
}

/* Where this rank stands in the chunks one rank sent it. */
typedef struct cursor {
    size_t chunk;
    char *data;
    size_t len, at;
} cursor;

/* The next record from rank `from` (cur->data + cur->at), its number among
 * that rank's in *local. Returns 1, 0 when it sent no more, -1 (said why). */
static int cursor_peek(build_state *st, int from, cursor *cur, uint64_t *local)
{
    while (cur->at >= cur->len) {
        free(cur->data);
        cur->data = NULL;
        cur->len = cur->at = 0;
        if (cur->chunk >= st->from[from].n)
            return 0;
        const spooled *sp = &st->from[from].v[cur->chunk++];
        if (!(cur->data = malloc(sp->len ? (size_t)sp->len : 1))) {
            say("out of memory");
            return -1;
        }
        cur->len = (size_t)sp->len;
        if (spool_io(st, cur->data, cur->len, sp->offset, 0))
            return -1;
    }
    const char *p = cur->data + cur->at + 17; /* flags, fp, source */
    *local = get_u64(&p);
    return 1;
}

/* Every rank has read its share: every part's records counted in input
 * order (the parts of split files in rank order, a whole file where it
 * is), so each record's position in the whole input is known; then the
 * spooled records are added in input order, part by part (each rank read
 * its parts in input order, so a part's records are the next ones from
 * its rank). Collective. Returns 0, or -1 (said why). */
static int add_spooled(build_state *st, const input_part *parts, int nparts)
{
    int failed = 0;
    int *counts = malloc((size_t)nranks * 2 * sizeof *counts);
    if (!counts)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int *displs = counts + nranks, mine = 3 * nparts;
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    size_t all = 0;
    for (int r = 0; r < nranks; r++) {
        displs[r] = (int)all;
        all += (size_t)counts[r];
    }
    uint64_t *mine_v = malloc((size_t)(mine ? mine : 1) * sizeof *mine_v);
    uint64_t *all_v = malloc((all ? all : 1) * sizeof *all_v);
    part_count *pc = malloc((all / 3 ? all / 3 : 1) * sizeof *pc);
    cursor *cur = calloc((size_t)nranks, sizeof *cur);
    if (!mine_v || !all_v || !pc || !cur)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < nparts; i++) {
        mine_v[3 * i] = (uint64_t)parts[i].index;
        mine_v[3 * i + 1] = parts[i].lo;
        mine_v[3 * i + 2] = parts[i].records;
    }
    MPI_Allgatherv(mine_v, mine, MPI_UINT64_T, all_v, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
    size_t n = 0;
    for (int r = 0; r < nranks; r++) {
        uint64_t local = 0;
        for (int i = displs[r]; i < displs[r] + counts[r]; i += 3, n++) {
            pc[n] = (part_count){all_v[i], all_v[i + 1], all_v[i + 2], (uint64_t)r, local, 0};
            local += all_v[i + 2];
        }
    }
    sort_items(pc, n, sizeof *pc, cmp_part);
    uint64_t global = 0;
    for (size_t i = 0; i < n; i++) {
        pc[i].global_first = global;
        global += pc[i].records;
    }
    for (size_t i = 0; i < n && !failed; i++) {
        int from = (int)pc[i].rank;
        uint64_t local;
        int got;
        while ((got = cursor_peek(st, from, &cur[from], &local)) == 1 &&
               local < pc[i].local_first + pc[i].records) {
            const char *p = cur[from].data + cur[from].at;
            if (add_record(st, &p, pc[i].local_first, pc[i].global_first)) {
                failed = 1;
                break;
            }
            cur[from].at = (size_t)(p - cur[from].data);
        }
        if (got < 0)
            failed = 1;
    }
    for (int r = 0; r < nranks; r++)
        free(cur[r].data);
    free(cur);
    free(pc);
    free(all_v);
    free(mine_v);
    free(counts);
    return failed ? -1 : 0;
}

/* ---- --boilerplate auto: the counts of every rank ----------------------- */

typedef struct candidates {
    uint64_t millionths, documents; /* this rank's */
    uint64_t *v;
    size_t n, cap;
    const uint64_t *keys; /* the second walk: the union, increasing */
    uint64_t *counts;
    size_t at, nkeys;
} candidates;

/* A key of the set is held by more than the fraction of the documents of
 * some rank's share (were it held by at most that on every rank, the sums
 * would be at most the fraction of all): each rank offers those of its own
 * (the rule without its minimums, which hold only for the sums). */
static int offer_key(void *ctx, uint64_t key, uint64_t df)
{
    __extension__ typedef unsigned __int128 u128;
    candidates *c = (candidates *)ctx;
    if (!((u128)df * 1000000u > (u128)c->millionths * c->documents))
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        uint64_t *g = realloc(c->v, cap * sizeof *g);
        if (!g)
            return SIMSTORE_ENOMEM;
        c->v = g;
        c->cap = cap;
    }
    c->v[c->n++] = key;
    return 0;
}

/* The second walk: this rank's count of each offered key (both increase). */
static int count_offered(void *ctx, uint64_t key, uint64_t df)
{
    candidates *c = (candidates *)ctx;
    while (c->at < c->nkeys && c->keys[c->at] < key)
        c->at++;
    if (c->at < c->nkeys && c->keys[c->at] == key)
        c->counts[c->at] = df;
    return 0;
}

static int cmp_key(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The first pass of --boilerplate auto over this rank's share (a reader
 * of its parts not yet read), and the set of the whole input: each rank
 * counts its share's line keys in bounded memory (the library's spilling
 * counter), offers the keys that pass the rule on its share, and the
 * offered keys' counts are summed over the ranks; the set is those whose
 * sums pass the rule for all the documents, the set `simstore build
 * --boilerplate auto` finds. Returns 0 with *out (on every rank), or 1 on
 * every rank (said). Collective. */
static int find_boilerplate(build_state *st, reader *rd, const boiler_opts *bo,
                            const simstore_text_options *text, uint64_t memory_bytes,
                            simstore_boilerplate **out)
{
    *out = NULL;
    simstore_boilerplate_options o;
    simstore_boilerplate_options_init(&o);
    o.fraction = bo->fraction;
    o.min_documents = bo->min_docs;
    uint64_t kept = memory_bytes / 8 < ((uint64_t)64 << 20) ? memory_bytes / 8 : (uint64_t)64 << 20;
    o.memory_bytes = memory_bytes - kept;
    int failed = 0;
    int rc = simstore_boilerplate_counter_new(text, &o, &st->counter);
    if (rc) {
        say("boilerplate: %s", simstore_last_error());
        failed = 1;
    }
    if (!failed && fill(st, rd, UINT64_MAX))
        failed = 1;
    reader_close_part(rd);
    simstore_boilerplate_counter *counter = st->counter;
    st->counter = NULL;
    candidates c;
    memset(&c, 0, sizeof c);
    simstore_boilerplate_info info;
    memset(&info, 0, sizeof info);
    if (!failed) {
        simstore_boilerplate_counter_info(counter, &info);
        c.millionths = info.fraction_millionths;
        c.documents = info.documents;
        if ((rc = simstore_boilerplate_counter_each(counter, offer_key, &c)) != 0) {
            say("boilerplate: %s", rc == SIMSTORE_ENOMEM ? "out of memory" : simstore_last_error());
            failed = 1;
        }
    }
    if (agree(failed, "finding boilerplate")) {
        simstore_boilerplate_counter_free(counter);
        free(c.v);
        return 1;
    }
    /* Every rank's offers, as one increasing list. */
    int mine = (int)c.n, *counts = malloc((size_t)nranks * 2 * sizeof *counts);
    if (!counts)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int *displs = counts + nranks;
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    size_t all = 0;
    for (int r = 0; r < nranks; r++) {
        displs[r] = (int)all;
        all += (size_t)counts[r];
    }
    uint64_t *keys = malloc((all ? all : 1) * sizeof *keys);
    uint64_t *sums = calloc(all ? all : 1, sizeof *sums);
    if (!keys || !sums)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Allgatherv(c.v, mine, MPI_UINT64_T, keys, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
    free(counts);
    free(c.v);
    sort_items(keys, all, sizeof *keys, cmp_key);
    size_t n = 0;
    for (size_t i = 0; i < all; i++)
        if (n == 0 || keys[i] != keys[n - 1])
            keys[n++] = keys[i];
    c.keys = keys;
    c.nkeys = n;
    c.counts = sums;
    rc = simstore_boilerplate_counter_each(counter, count_offered, &c);
    if (rc) {
        say("boilerplate: %s", simstore_last_error());
        failed = 1;
    }
    simstore_boilerplate_counter_free(counter);
    MPI_Allreduce(MPI_IN_PLACE, sums, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &info.documents, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        if (simstore_boilerplate_is_line(&info, sums[i]))
            keys[lines++] = keys[i];
    if (!failed && (rc = simstore_boilerplate_new(keys, lines, &info, out)) != 0) {
        say("boilerplate: %s", simstore_last_error());
        failed = 1;
    }
    free(keys);
    free(sums);
    if (agree(failed, "finding boilerplate")) {
        simstore_boilerplate_free(*out);
        *out = NULL;
        return 1;
    }
    if (rank == 0 && info.documents < info.min_documents)
        fprintf(stderr,
                "%s: warning: boilerplate: %llu %s, fewer than the %llu --boilerplate auto "
                "needs (--boilerplate-min-docs): no line is boilerplate\n",
                cmd_name, (unsigned long long)info.documents,
                info.documents == 1 ? "document" : "documents",
                (unsigned long long)info.min_documents);
    return 0;
}

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

static int cmd_build(int argc, char **argv)
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
    cmd_name = "simstore-mpi build";
    simstore_build_options o;
    simstore_build_options_init(&o);
    textopt_state ts;
    textopt_init(&ts);
    input_fields fields;
    input_fields_init(&fields);
    int quiet = 0, c, format = -1, sketch_given = 0, replace = 0, paragraphs = 0;
    unsigned para_min_words = 0;
    boiler_opts bo;
    boiler_opts_init(&bo);
    simstore_sketch_kind sketch = SIMSTORE_SKETCH_NONE;
    uint64_t chunk = (uint64_t)4 << 20;
    unsigned long long v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":qh", longopts, NULL)) != -1) {
        switch (c) {
        case O_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &v))
                goto usage;
            o.k = (unsigned)v;
            break;
        case O_TABLES:
            if (strcmp(optarg, "auto") == 0)
                o.tables = 0;
            else if (cli_parse_uint(optarg, 1, 256, &v))
                goto usage;
            else
                o.tables = (unsigned)v;
            break;
        case O_BLOCK:
            if (cli_parse_uint(optarg, SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES, &v) ||
                !simstore_block_bytes_valid(v))
                goto usage;
            o.block_bytes = (unsigned)v;
            break;
        case O_SKETCH:
            if (simstore_sketch_parse(optarg, &sketch))
                goto usage;
            sketch_given = 1;
            break;
        case O_MEMORY:
            if (cli_parse_size(optarg, &v) || v < SIMSTORE_MIN_MEMORY_BYTES)
                goto usage;
            o.memory_bytes = v;
            break;
        case O_CHUNK:
            if (cli_parse_size(optarg, &v) || v < 1024 || v > ((uint64_t)1 << 30))
                goto usage;
            chunk = v;
            break;
        case O_THREADS:
            if (cli_parse_uint(optarg, 1, 1024, &v))
                goto usage;
            o.threads = (unsigned)v;
            break;
        case O_REPLACE: replace = 1; break;
        case O_FPONLY: o.fingerprint_only = 1; break;
        case O_PROGRESS: show_progress = 1; break;
        case O_PARAGRAPHS: paragraphs = 1; break;
        case O_PARA_MIN:
            if (cli_paragraph_min_words_option(cmd_name, optarg, &para_min_words))
                return 2;
            break;
        case O_FORMAT:
            if ((format = parse_format(optarg)) < 0)
                goto usage;
            break;
        case 'q': quiet = 1; break;
        case 'h':
            if (rank == 0)
                usage_build(stdout);
            return 0;
        case '?':
        case ':': goto usage;
        default: {
            int b = boiler_apply("mpi build", c, optarg, &bo);
            if (b == 2)
                return 2;
            if (b == 1)
                break;
            int t =
                textopt_or_field_or_bad_option("mpi build", c, argv, optind, &ts, &fields, NULL);
            if (t >= 0)
                return t;
        }
        }
    }
    if (textopt_finish("mpi build", &ts) || boiler_finish("mpi build", &bo))
        return 2;
    const char *refused = NULL;
    if (para_min_words && !paragraphs)
        refused = "--paragraph-min-words goes with --paragraphs";
    else if (paragraphs && o.fingerprint_only)
        refused = "--fingerprint-only keeps no documents, so no paragraphs: not with --paragraphs";
    else if (bo.automatic && o.fingerprint_only)
        refused = "--boilerplate auto needs texts: a fingerprint-only store has none";
    if (refused) {
        if (rank == 0)
            fprintf(stderr, "%s: %s\n", cmd_name, refused);
        return 2;
    }
    if (argc - optind < 2)
        goto usage;
    /* A round's bytes to one rank from all of them are counted in an int. */
    if (chunk * 2 * (uint64_t)nranks > (uint64_t)INT_MAX) {
        if (rank == 0)
            fprintf(stderr, "%s: --chunk %llu is too large for %d ranks (at most %llu)\n", cmd_name,
                    (unsigned long long)chunk, nranks,
                    (unsigned long long)((uint64_t)INT_MAX / 2 / (uint64_t)nranks));
        return 2;
    }
    const char *out = argv[optind++];
    char **inputs = argv + optind;
    int ninputs = argc - optind;
    int all_jsonl = 1;
    for (int i = 0; i < ninputs; i++) {
        int f = format_of(inputs[i], format);
        if (f < 0) {
            if (rank == 0)
                fprintf(stderr,
                        strcmp(inputs[i], "-") == 0
                            ? "%s: %s: cannot tell the format of standard input; use --format\n"
                            : "%s: %s: cannot tell the format from the name; use --format\n",
                        cmd_name, input_shown(inputs[i]));
            return 2;
        }
        all_jsonl &= f == INPUT_JSONL;
        if ((f == INPUT_HEX_LINES || f == INPUT_U64_VALUES) != (o.fingerprint_only != 0)) {
            if (rank == 0)
                fprintf(stderr,
                        o.fingerprint_only
                            ? "%s: %s: a fingerprint-only store reads --format hex or u64 (.hex, "
                              ".u64: bare fingerprints)\n"
                            : "%s: %s: bare fingerprints (hex, u64) make a fingerprint-only "
                              "store: add --fingerprint-only\n",
                        cmd_name, input_shown(inputs[i]));
            return 2;
        }
    }
    if (o.fingerprint_only && sketch_given && sketch != SIMSTORE_SKETCH_NONE) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: --fingerprint-only keeps no documents, so no sketches: not with "
                    "--sketch %s\n",
                    cmd_name, simstore_sketch_name(sketch));
        return 2;
    }
    if (bo.automatic && !all_jsonl) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: --boilerplate auto reads the texts of JSON Lines documents; an input "
                    "holds fingerprints\n",
                    cmd_name);
        return 1;
    }
    if (!sketch_given)
        sketch = all_jsonl && !o.fingerprint_only ? SIMSTORE_SKETCH_DEFAULT : SIMSTORE_SKETCH_NONE;
    ts.opts.sketch = sketch;
    if (paragraphs)
        ts.opts.paragraph_min_words =
            para_min_words ? para_min_words : SIMSTORE_PARAGRAPH_MIN_WORDS_DEFAULT;
    o.text = &ts.opts;
    o.source_name = source_name;
    o.source_ctx = inputs;
    o.replace = 1; /* of a shard: the directory was prepared by rank 0 */
    /* Progress from rank 0 alone (its share of the reading, its shard's
     * build), on a terminal and without --quiet. */
    cli_progress prog;
    cli_progress_init(&prog, "mpi build", rank == 0 && !quiet);
    if (rank == 0) {
        o.progress = cli_progress_update;
        o.progress_ctx = &prog;
    }

    /* Rank 0 prepares OUT (a published store needs --replace). */
    int failed = 0;
    if (rank == 0) {
        int rc = simstore_sharded_prepare(out, (unsigned)nranks, replace);
        if (rc == SIMSTORE_EEXIST)
            say("%s already exists; use --replace to replace it", out);
        else if (rc)
            say("%s: %s", out, simstore_last_error());
        failed = rc != 0;
    }
    if (agree(failed, "preparing the output"))
        return 1;

    build_state st;
    memset(&st, 0, sizeof st);
    st.spool_fd = -1;
    st.fp_only = o.fingerprint_only != 0;
    st.para_min_words = ts.opts.paragraph_min_words;
    st.sketch = sketch;
    st.sketch_bytes = simstore_sketch_bytes(sketch);
    st.out = calloc((size_t)nranks, sizeof *st.out);
    char shard[PATH_MAX], name[16];
    simstore_shard_name((unsigned)rank, name, sizeof name);
    snprintf(shard, sizeof shard, "%s/%s", out, name);
    int rc = st.out ? simstore_build_begin(shard, &o, &st.b) : SIMSTORE_ENOMEM;
    if (rc == SIMSTORE_OK && all_jsonl)
        rc = simstore_fingerprinter_new(&ts.opts, &st.fpr);
    else if (rc == SIMSTORE_OK)
        for (int i = 0; i < ninputs && rc == SIMSTORE_OK; i++)
            if (format_of(inputs[i], format) == INPUT_JSONL)
                rc = simstore_fingerprinter_new(&ts.opts, &st.fpr);
    if (rc) {
        say("%s: %s", shard, simstore_last_error());
        failed = 1;
    }
    if (!failed && spool_open(&st, out))
        failed = 1;
    if (agree(failed, "starting the shards' builds")) {
        simstore_builder_abort(st.b);
        spool_close(&st);
        return 1;
    }

    /* How each input is read, told by rank 0 as `simstore build` would open
     * it and followed by every rank: a plain regular file is split among
     * the ranks at record boundaries; a compressed one (by its magic
     * bytes), standard input and anything else (a FIFO) is read whole, as
     * a stream, by one rank. Per input: its size, and whether whole. */
    uint64_t *plan = calloc((size_t)ninputs * 2, sizeof *plan);
    int *owner = calloc((size_t)ninputs, sizeof *owner);
    uint64_t *load = calloc((size_t)nranks, sizeof *load);
    if (!plan || !owner || !load)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < ninputs && rank == 0; i++) {
        struct stat sb;
        plan[2 * i + 1] = 1;
        if (strcmp(inputs[i], "-") == 0 || stat(inputs[i], &sb) != 0)
            continue; /* a missing file: every rank says so below */
        plan[2 * i] = (uint64_t)sb.st_size;
        cli_stream *cs;
        if (S_ISREG(sb.st_mode) && cli_stream_open(&cs, inputs[i]) == 0) {
            plan[2 * i + 1] = cli_stream_get_kind(cs) != CLI_STREAM_PLAIN;
            cli_stream_close(cs);
        }
    }
    MPI_Bcast(plan, ninputs * 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    /* The whole inputs, largest first, each to the rank with the fewest
     * compressed bytes so far (standard input is rank 0's): the split
     * files' bytes are shared evenly anyway. */
    for (;;) {
        int next = -1;
        for (int i = 0; i < ninputs; i++)
            if (plan[2 * i + 1] == 1 && (next < 0 || plan[2 * i] > plan[2 * next]))
                next = i;
        if (next < 0)
            break;
        int least = 0;
        for (int r = 1; r < nranks && strcmp(inputs[next], "-") != 0; r++)
            if (load[r] < load[least])
                least = r;
        owner[next] = least;
        load[least] += plan[2 * next];
        plan[2 * next + 1] = 2; /* placed */
    }
    free(load);
    /* This rank's share of the split files: the records starting in
     * [T r / R, T (r + 1) / R) of their concatenation (T bytes). */
    uint64_t total = 0, input_bytes = 0; /* split; all (compressed as they are) */
    for (int i = 0; i < ninputs; i++) {
        if (!plan[2 * i + 1])
            total += plan[2 * i];
        input_bytes += plan[2 * i];
    }
    uint64_t lo = total * (uint64_t)rank / (uint64_t)nranks;
    uint64_t hi = total * (uint64_t)(rank + 1) / (uint64_t)nranks;
    uint64_t at = 0;
    reader rd;
    memset(&rd, 0, sizeof rd);
    rd.fields = &fields;
    rd.parts = calloc((size_t)ninputs, sizeof *rd.parts);
    if (!rd.parts) {
        say("out of memory");
        failed = 1;
    }
    /* Standard input, read twice with --boilerplate auto: its copy, through
     * a path of its own (the first "-" only; later ones are at its end). */
    int stdin_copy = -1, stdin_taken = 0;
    char stdin_path[64] = "";
    if (bo.automatic && rank == 0 && !failed)
        for (int i = 0; i < ninputs; i++)
            if (strcmp(inputs[i], "-") == 0) {
                if (copy_stdin(out, &stdin_copy))
                    failed = 1;
                else
                    snprintf(stdin_path, sizeof stdin_path, "/proc/self/fd/%d", stdin_copy);
                break;
            }
    for (int i = 0; i < ninputs && !failed; i++) {
        int whole = plan[2 * i + 1] != 0;
        if (strcmp(inputs[i], "-") != 0 && access(inputs[i], R_OK) != 0) {
            say("%s: %s", inputs[i], strerror(errno));
            failed = 1;
        }
        input_part ip = {inputs[i],   input_shown(inputs[i]),
                         i,           format_of(inputs[i], format),
                         whole,       0,
                         plan[2 * i], 0};
        if (whole) {
            if (stdin_copy >= 0 && !stdin_taken && strcmp(inputs[i], "-") == 0) {
                ip.path = stdin_path;
                stdin_taken = 1;
            }
            if (owner[i] == rank)
                rd.parts[rd.nparts++] = ip;
            continue;
        }
        uint64_t flo = at, fhi = at + plan[2 * i];
        at = fhi;
        if (fhi <= lo || flo >= hi)
            continue;
        ip.lo = (lo > flo ? lo : flo) - flo;
        ip.hi = (hi < fhi ? hi : fhi) - flo;
        rd.parts[rd.nparts++] = ip;
    }
    free(plan);
    free(owner);
    /* --boilerplate auto: the set of the whole input first (a pass over
     * this rank's share with a reader of its own), given to this rank's
     * shard and fingerprinter. */
    simstore_boilerplate *set = NULL;
    int someone = failed;
    MPI_Allreduce(MPI_IN_PLACE, &someone, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!someone && bo.automatic) {
        reader first = rd;
        if (find_boilerplate(&st, &first, &bo, &ts.opts, o.memory_bytes, &set)) {
            failed = 1;
        } else if ((rc = simstore_builder_set_boilerplate(st.b, set)) != 0 ||
                   (rc = simstore_fingerprinter_set_boilerplate(st.fpr, set)) != 0) {
            say("%s: %s", shard, simstore_last_error());
            failed = 1;
        }
        if (show_progress && set) {
            char desc[160];
            boiler_describe(set, desc, sizeof desc);
            progress("boilerplate: %s", desc);
        }
    }
    /* Rounds in lockstep: each rank reads up to a chunk, all exchange, and
     * they go on while any rank has more to read and none has failed (a
     * failed rank stops the others at the next round). */
    uint64_t share = 0; /* bytes, a whole part's compressed */
    for (int i = 0; i < rd.nparts; i++)
        share += rd.parts[i].hi - rd.parts[i].lo;
    for (;;) {
        if (!failed && fill(&st, &rd, chunk))
            failed = 1;
        if (rank == 0) {
            uint64_t done = 0;
            for (int i = 0; i < rd.cur && i < rd.nparts; i++)
                done += rd.parts[i].hi - rd.parts[i].lo;
            if (rd.cur < rd.nparts && !rd.parts[rd.cur].whole && rd.pos > rd.parts[rd.cur].lo)
                done += rd.pos - rd.parts[rd.cur].lo;
            cli_progress_update(&prog, "reading (rank 0's share)", done < share ? done : share,
                                share);
        }
        if (failed)
            for (int i = 0; i < nranks; i++)
                st.out[i].len = 0;
        if (exchange(&st))
            failed = 1;
        int state[2] = {!rd.done && !failed, failed};
        MPI_Allreduce(MPI_IN_PLACE, state, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (state[1] || !state[0])
            break;
    }
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
    /* Everybody sent everything: add what this rank received in input
     * order and finish its shard, unless some rank already failed (then
     * nothing is published anyway). */
    someone = failed;
    MPI_Allreduce(MPI_IN_PLACE, &someone, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!someone && add_spooled(&st, rd.parts, rd.nparts))
        failed = 1;
    free(rd.parts);
    spool_close(&st);
    if (!someone && !failed) {
        rc = simstore_builder_finish(st.b);
        st.b = NULL;
        if (rc) {
            say("%s: %s", shard, simstore_last_error());
            failed = 1;
        }
    }
    simstore_builder_abort(st.b);
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
        if (rank == 0)
            fprintf(stderr, "%s: %s not published\n", cmd_name, out);
        return 1;
    }
    /* Every shard is built: the manifest, last. */
    failed = 0;
    if (rank == 0) {
        rc = simstore_sharded_publish(out, (unsigned)nranks);
        if (rc) {
            say("%s: %s", out, simstore_last_error());
            failed = 1;
        }
    }
    if (agree(failed, "publishing the manifest"))
        return 1;
    if (rank == 0 && !quiet) {
        simstore_sharded *sh;
        simstore_stats s;
        rc = simstore_sharded_open(out, SIMSTORE_OPEN_READONLY, &sh);
        if (rc == SIMSTORE_OK)
            rc = simstore_sharded_get_stats(sh, &s);
        simstore_sharded_close(sh);
        if (rc) {
            say("%s was built, but cannot be read back: %s", out, simstore_last_error());
            return 1;
        }
        printf("built %s: %llu %s, %llu distinct %s; %s%s%s\n", out,
               (unsigned long long)s.documents, s.documents == 1 ? "document" : "documents",
               (unsigned long long)s.fingerprints,
               s.fingerprints == 1 ? "fingerprint" : "fingerprints", s.design,
               *boiler_desc ? "; boilerplate " : "", boiler_desc);
    }
    return 0;
usage:
    if (rank == 0)
        fprintf(stderr, "%s: bad usage at '%s' (see --help)\n", cmd_name,
                optind > 0 && optind <= argc ? argv[optind - 1] : "");
    return 2;
}

/* ---- query ------------------------------------------------------------------ */

int open_my_shard(const char *out, simstore **s, simstore_stats *st, char *shard, size_t size)
{
    *s = NULL;
    /* Rank 0 checks the whole (manifest, every shard's agreement, R). */
    int failed = 0;
    if (rank == 0) {
        simstore_sharded *sh;
        int rc = simstore_sharded_open(out, SIMSTORE_OPEN_READONLY, &sh);
        if (rc) {
            say("%s", simstore_last_error());
            failed = 1;
        } else if (simstore_sharded_count(sh) != (unsigned)nranks) {
            say("%s has %u shards: run it with -np %u", out, simstore_sharded_count(sh),
                simstore_sharded_count(sh));
            failed = 1;
        }
        simstore_sharded_close(sh);
    }
    if (agree(failed, "opening the store"))
        return 1;
    char name[16];
    simstore_shard_name((unsigned)rank, name, sizeof name);
    snprintf(shard, size, "%s/%s", out, name);
    int rc = simstore_open(shard, SIMSTORE_OPEN_READONLY, s);
    if (rc == SIMSTORE_OK)
        rc = simstore_get_stats(*s, st);
    if (rc)
        say("%s: %s", shard, simstore_last_error());
    if (agree(rc != SIMSTORE_OK, "opening the shards")) {
        simstore_close(*s);
        *s = NULL;
        return 1;
    }
    return 0;
}

/* What shapes `simstore query`'s answer, the same on every rank. */
typedef struct query_opts {
    int json, meta, similarity, skip_self, end_marker, paragraphs;
    double min_similarity; /* 0: every match */
    double min_fraction;   /* --paragraphs */
} query_opts;

/* One line of the queries file, kept by rank 0 for printing: a query (its
 * id) or a bad line (its message, which --end-marker prints again). */
typedef struct query_item {
    char *text; /* the id or the message, NUL-terminated */
    size_t len;
    int qid_integer;
    int bad;
} query_item;

static int item_set(query_item *it, const char *text, size_t len, int qid_integer, int bad)
{
    it->text = malloc(len + 1);
    if (!it->text)
        return -1;
    memcpy(it->text, text, len);
    it->text[len] = '\0';
    it->len = len;
    it->qid_integer = qid_integer;
    it->bad = bad;
    return 0;
}

/* Doubles travel as their bits: the similarity and fraction printed by rank
 * 0 are the very values its shard's rank computed. */
static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bits_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* The answer buffer of one rank, per query: u32 count; per match of a
 * document query: distance u8, flags u8, fp u64, similarity (bits) u64, id
 * length u32, meta length u32 (UINT32_MAX: none), id, meta. */
static int collect(void *ctx, size_t index, uint64_t fp, const simstore_match *m, size_t n)
{
    (void)index;
    (void)fp;
    buf *b = (buf *)ctx;
    if (buf_u32(b, (uint32_t)n))
        return 1;
    for (size_t i = 0; i < n; i++) {
        uint8_t d = (uint8_t)m[i].distance, f = (uint8_t)m[i].flags;
        uint32_t id_len = m[i].id ? (uint32_t)m[i].id_len : UINT32_MAX;
        uint32_t meta_len = m[i].meta ? (uint32_t)m[i].meta_len : UINT32_MAX;
        if (buf_put(b, &d, 1) || buf_put(b, &f, 1) || buf_u64(b, m[i].fp) ||
            buf_u64(b, double_bits(m[i].similarity)) || buf_u32(b, id_len) ||
            buf_u32(b, meta_len) || (m[i].id && buf_put(b, m[i].id, m[i].id_len)) ||
            (m[i].meta && buf_put(b, m[i].meta, m[i].meta_len)))
            return 1;
    }
    return 0;
}

/* --paragraphs, per query: u32 count; per match: flags u8, shared u64, of
 * u64, fraction (bits) u64, fp u64, id length u32, meta length u32
 * (UINT32_MAX: none), id, meta. A document lives on one shard, so its
 * SHARED of OF, and whether it reaches --min-fraction, are complete here. */
static int collect_paragraphs(buf *b, const simstore_paragraph_match *m, size_t n)
{
    if (buf_u32(b, (uint32_t)n))
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint8_t f = (uint8_t)m[i].flags;
        uint32_t meta_len = m[i].meta ? (uint32_t)m[i].meta_len : UINT32_MAX;
        if (buf_put(b, &f, 1) || buf_u64(b, m[i].shared) || buf_u64(b, m[i].of) ||
            buf_u64(b, double_bits(m[i].fraction)) || buf_u64(b, m[i].fp) ||
            buf_u32(b, (uint32_t)m[i].id_len) || buf_u32(b, meta_len) ||
            buf_put(b, m[i].id, m[i].id_len) || (m[i].meta && buf_put(b, m[i].meta, m[i].meta_len)))
            return -1;
    }
    return 0;
}

static void json_query_id(const query_item *q)
{
    if (q->qid_integer)
        fwrite(q->text, 1, q->len, stdout);
    else
        cli_json_string(stdout, q->text, q->len);
}

/* The start of one JSON match up to its "id" value (null without an id):
 * an element of the per-query array (--end-marker), or a line of its own
 * naming the query; as cmd/cmd_query.c writes it. */
static void json_match_start(const query_item *q, int per_query, int *listed, const char *id,
                             size_t id_len, unsigned flags)
{
    if (per_query) {
        fputs((*listed)++ ? ",{\"id\":" : "{\"id\":", stdout);
    } else {
        fputs("{\"query\":", stdout);
        json_query_id(q);
        fputs(",\"id\":", stdout);
    }
    if (id && (flags & SIMSTORE_MATCH_INTEGER_ID))
        fwrite(id, 1, id_len, stdout);
    else if (id)
        cli_json_string(stdout, id, id_len);
    else
        fputs("null", stdout);
}

static void answer_start(const query_opts *o, const query_item *q)
{
    if (o->json && o->end_marker) {
        fputs("{\"query\":", stdout);
        json_query_id(q);
        fputs(",\"matches\":[", stdout);
    }
}

static void answer_end(const query_opts *o)
{
    if (o->json && o->end_marker)
        fputs("]}\n", stdout);
    else if (o->end_marker)
        fputs(".\n", stdout);
}

/* An answer record's id and metadata (each u32 length, UINT32_MAX for none,
 * then the bytes) from *cur, advanced past them. */
static void get_id_meta(const char **cur, const char **id, size_t *id_len, const char **meta,
                        size_t *meta_len)
{
    uint32_t il = get_u32(cur), ml = get_u32(cur);
    if (il != UINT32_MAX) {
        *id = *cur;
        *id_len = il;
        *cur += il;
    }
    if (ml != UINT32_MAX) {
        *meta = *cur;
        *meta_len = ml;
        *cur += ml;
    }
}

/* With --json: a match's ',"meta":...' when it has metadata. */
static void print_json_meta(const char *meta, size_t meta_len)
{
    if (meta) {
        fputs(",\"meta\":", stdout);
        fwrite(meta, 1, meta_len, stdout);
    }
}

static int is_self(const query_opts *o, const query_item *q, const char *id, size_t id_len)
{
    return o->skip_self && id && id_len == q->len && memcmp(id, q->text, id_len) == 0;
}

/* Rank 0: one query's matches from every rank's answer buffer (cursors
 * advanced), merged into one store's order, printed as `simstore query`
 * prints them. Returns 0, or -1 out of memory. */
static int print_merged(const query_opts *o, const query_item *q, const char **cur,
                        simstore_match **m, size_t *cap)
{
    size_t n = 0;
    for (int r = 0; r < nranks; r++) {
        uint32_t count = get_u32(&cur[r]);
        for (uint32_t i = 0; i < count; i++) {
            if (cli_grow((void **)m, cap, n + 1, sizeof **m, 64))
                return -1;
            simstore_match *x = &(*m)[n++];
            memset(x, 0, sizeof *x);
            x->distance = (uint8_t)*cur[r]++;
            x->flags = (uint8_t)*cur[r]++;
            x->fp = get_u64(&cur[r]);
            x->similarity = bits_double(get_u64(&cur[r]));
            get_id_meta(&cur[r], &x->id, &x->id_len, &x->meta, &x->meta_len);
        }
    }
    simstore_sort_matches(*m, n);
    int per_query = o->json && o->end_marker, listed = 0;
    char hex[17], sim[32];
    answer_start(o, q);
    for (size_t i = 0; i < n; i++) {
        const simstore_match *x = &(*m)[i];
        if (is_self(o, q, x->id, x->id_len))
            continue;
        /* An unknown similarity (-1) passes no minimum. */
        if (o->min_similarity > 0 && !(x->similarity >= o->min_similarity))
            continue;
        cli_format_hex64(x->fp, hex);
        cli_format_similarity(x->similarity, o->json, sim);
        if (o->json) {
            json_match_start(q, per_query, &listed, x->id, x->id_len, x->flags);
            printf(",\"fp\":\"%s\",\"distance\":%u", hex, x->distance);
            if (o->similarity)
                printf(",\"similarity\":%s", sim);
            print_json_meta(x->meta, x->meta_len);
            fputs(per_query ? "}" : "}\n", stdout);
        } else {
            fwrite(q->text, 1, q->len, stdout);
            putchar('\t');
            if (x->id)
                fwrite(x->id, 1, x->id_len, stdout);
            else
                putchar('-');
            printf("\t%s\t%u", hex, x->distance);
            if (o->similarity)
                printf("\t%s", sim);
            putchar('\n');
        }
    }
    answer_end(o);
    return 0;
}

/* Rank 0, --paragraphs: print_merged for the documents sharing paragraphs
 * with one query. */
static int print_merged_paragraphs(const query_opts *o, const query_item *q, const char **cur,
                                   simstore_paragraph_match **m, size_t *cap)
{
    size_t n = 0;
    for (int r = 0; r < nranks; r++) {
        uint32_t count = get_u32(&cur[r]);
        for (uint32_t i = 0; i < count; i++) {
            if (cli_grow((void **)m, cap, n + 1, sizeof **m, 64))
                return -1;
            simstore_paragraph_match *x = &(*m)[n++];
            memset(x, 0, sizeof *x);
            x->flags = (uint8_t)*cur[r]++;
            x->shared = (size_t)get_u64(&cur[r]);
            x->of = (size_t)get_u64(&cur[r]);
            x->fraction = bits_double(get_u64(&cur[r]));
            x->fp = get_u64(&cur[r]);
            get_id_meta(&cur[r], &x->id, &x->id_len, &x->meta, &x->meta_len);
        }
    }
    sort_items(*m, n, sizeof **m, simstore_paragraph_match_cmp);
    int per_query = o->json && o->end_marker, listed = 0;
    answer_start(o, q);
    for (size_t i = 0; i < n; i++) {
        const simstore_paragraph_match *x = &(*m)[i];
        if (is_self(o, q, x->id, x->id_len))
            continue;
        if (o->json) {
            json_match_start(q, per_query, &listed, x->id, x->id_len, x->flags);
            printf(",\"shared\":%zu,\"of\":%zu,\"fraction\":%.4f", x->shared, x->of, x->fraction);
            print_json_meta(x->meta, x->meta_len);
            fputs(per_query ? "}" : "}\n", stdout);
        } else {
            fwrite(q->text, 1, q->len, stdout);
            putchar('\t');
            fwrite(x->id, 1, x->id_len, stdout);
            printf("\t%zu\t%zu\t%.4f\n", x->shared, x->of, x->fraction);
        }
    }
    answer_end(o);
    return 0;
}

/* --paragraphs: this rank's answer to one text query, from its shard, into
 * ans. Returns 0, or -1 (said why). */
static int answer_paragraphs(simstore_query *q, simstore_fingerprinter *fpr, const char *text,
                             size_t len, unsigned min_words, unsigned k, double min_fraction,
                             uint64_t **paras, size_t *paras_cap, buf *ans)
{
    size_t n = 0;
    int rc;
    for (;;) {
        rc = simstore_paragraph_fingerprints(fpr, text, len, min_words, *paras, *paras_cap, &n);
        if (rc || n <= *paras_cap)
            break;
        if (cli_grow((void **)paras, paras_cap, n, sizeof **paras, 64)) {
            say("out of memory");
            return -1;
        }
    }
    const simstore_paragraph_match *m = NULL;
    size_t count = 0;
    if (rc == SIMSTORE_OK)
        rc = simstore_query_paragraphs(q, *paras, n, k, min_fraction, &m, &count);
    if (rc) {
        say("query: %s", simstore_last_error());
        return -1;
    }
    if (collect_paragraphs(ans, m, count)) {
        say("out of memory");
        return -1;
    }
    return 0;
}

static void usage_query(FILE *out)
{
    fprintf(out,
            "Usage: mpirun -np R simstore-mpi query OUT --queries FILE [OPTIONS]\n"
            "\n"
            "Answer the queries of FILE against the sharded store OUT of R shards, rank r\n"
            "asking shard r, rank 0 merging: it prints exactly what `simstore query OUT\n"
            "--queries FILE` prints with the same options, one line per match,\n"
            "  QUERY_ID<TAB>DOC_ID<TAB>HEX16<TAB>DISTANCE[<TAB>SIMILARITY]\n"
            "sorted by distance then document id, or JSON Lines with --json. With\n"
            "--paragraphs, one line per document sharing near-duplicate paragraphs with\n"
            "the query's text, sorted by FRACTION (larger first) then document id:\n"
            "  QUERY_ID<TAB>DOC_ID<TAB>SHARED<TAB>OF<TAB>FRACTION\n"
            "(each rank answers for the documents of its shard: a document lives on one).\n"
            "\n"
            "      --queries FILE   .tsv (id<TAB>hex16), .fp (hex16<TAB>id) or .jsonl\n"
            "                       ({\"id\", \"text\"}: fingerprinted with the store's\n"
            "                       text options); a regular file\n"
            "      --format tsv|fp|jsonl\n"
            "      --id-field NAME  JSON Lines: the member holding the id (default id;\n"
            "                       nested names as a.b)\n"
            "      --text-field NAME\n"
            "                       the member holding the text (default text)\n"
            "      --id-from-line   a record without an id gets FILE:LINE as its id\n"
            "      --strict         refuse records with other members (default: ignore)\n"
            "      --k K            distance (default: the store's k)\n"
            "      --json           JSON Lines {\"query\", \"id\", \"fp\", \"distance\"[,\n"
            "                       \"similarity\"][, \"meta\"]}\n"
            "      --meta           with --json: each document's metadata\n"
            "      --similarity     each match's estimated Jaccard similarity to the\n"
            "                       query: a fifth column, or the member \"similarity\";\n"
            "                       '-' (null) when unknown (queries by fingerprint, a\n"
            "                       store without sketches)\n"
            "      --min-similarity J\n"
            "                       only matches whose estimated similarity is at least\n"
            "                       J, 0..1 (0: all): needs a store that keeps sketches\n"
            "                       and JSON Lines text queries\n"
            "      --paragraphs     answer by shared paragraphs (above): a store built\n"
            "                       with --paragraphs and JSON Lines text queries\n"
            "      --min-fraction F with --paragraphs, only documents with FRACTION >= F,\n"
            "                       0..1 (default 0.3); JSON members \"shared\", \"of\",\n"
            "                       \"fraction\" replace \"fp\" and \"distance\"\n"
            "      --skip-self      omit a match whose document id equals the query id\n"
            "      --end-marker     end each query's answer, even an empty one or a bad\n"
            "                       line's, with a line '.'; with --json, one record per\n"
            "                       query instead, {\"query\", \"matches\": [...]} (a bad\n"
            "                       line: {\"query\": null, \"matches\": [], \"error\": MESSAGE})\n"
            "      --batch N        queries answered per round (4096)\n"
            "      --threads N      worker threads per rank (all cores)\n"
            "  -h, --help           show this help\n"
            "\n"
            "Exit status: 0 success, 1 failure (a bad query line is reported as\n"
            "FILE:LINE: message and skipped), 2 usage error.\n");
}

/* A usage error said by rank 0 ("simstore-mpi query: why"). Returns 2. */
static int query_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int query_usage(const char *fmt, ...)
{
    if (rank == 0) {
        char text[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s: %s\n", cmd_name, text);
    }
    return 2;
}

/* A number from 0 to 1 (--min-similarity, --min-fraction). Returns 0 or -1. */
static int parse_unit(const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || errno || !(v >= 0 && v <= 1))
        return -1;
    *out = v;
    return 0;
}

static int cmd_query(int argc, char **argv)
{
    enum {
        O_K = 1,
        O_QUERIES,
        O_FORMAT,
        O_JSON,
        O_META,
        O_BATCH,
        O_THREADS,
        O_SIMILARITY,
        O_MIN_SIMILARITY,
        O_PARAGRAPHS,
        O_MIN_FRACTION,
        O_SKIP_SELF,
        O_END_MARKER
    };
    static const struct option longopts[] = {
        {"k", required_argument, NULL, O_K},
        {"queries", required_argument, NULL, O_QUERIES},
        {"format", required_argument, NULL, O_FORMAT},
        {"json", no_argument, NULL, O_JSON},
        {"meta", no_argument, NULL, O_META},
        {"batch", required_argument, NULL, O_BATCH},
        {"threads", required_argument, NULL, O_THREADS},
        {"similarity", no_argument, NULL, O_SIMILARITY},
        {"min-similarity", required_argument, NULL, O_MIN_SIMILARITY},
        {"paragraphs", no_argument, NULL, O_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, O_MIN_FRACTION},
        {"skip-self", no_argument, NULL, O_SKIP_SELF},
        {"end-marker", no_argument, NULL, O_END_MARKER},
        {"id-field", required_argument, NULL, INPUTOPT_ID_FIELD},
        {"text-field", required_argument, NULL, INPUTOPT_TEXT_FIELD},
        {"strict", no_argument, NULL, INPUTOPT_STRICT},
        {"id-from-line", no_argument, NULL, INPUTOPT_ID_FROM_LINE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    cmd_name = "simstore-mpi query";
    const char *queries = NULL;
    query_opts o;
    memset(&o, 0, sizeof o);
    o.min_fraction = SIMSTORE_NEAR_FRACTION;
    input_fields fields;
    input_fields_init(&fields);
    int format = -1, have_k = 0, min_fraction_given = 0, c;
    unsigned k = 0, threads = 0;
    unsigned long long v, batch = 4096;
    const char *why;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_K:
            if (cli_parse_uint(optarg, 0, SIMSTORE_MAX_K, &v))
                goto usage;
            k = (unsigned)v;
            have_k = 1;
            break;
        case O_QUERIES: queries = optarg; break;
        case O_FORMAT:
            if ((format = parse_format(optarg)) < 0 || format == INPUT_HEX_LINES)
                goto usage;
            break;
        case O_JSON: o.json = 1; break;
        case O_META: o.meta = 1; break;
        case O_BATCH:
            if (cli_parse_uint(optarg, 1, 1u << 22, &batch))
                goto usage;
            break;
        case O_THREADS:
            if (cli_parse_uint(optarg, 1, 1024, &v))
                goto usage;
            threads = (unsigned)v;
            break;
        case O_SIMILARITY: o.similarity = 1; break;
        case O_MIN_SIMILARITY:
            if (parse_unit(optarg, &o.min_similarity))
                return query_usage("--min-similarity takes a number from 0 to 1 (0: no filter), "
                                   "not '%s'",
                                   optarg);
            break;
        case O_PARAGRAPHS: o.paragraphs = 1; break;
        case O_MIN_FRACTION:
            if (parse_unit(optarg, &o.min_fraction))
                return query_usage("--min-fraction takes a number from 0 to 1, not '%s'", optarg);
            min_fraction_given = 1;
            break;
        case O_SKIP_SELF: o.skip_self = 1; break;
        case O_END_MARKER: o.end_marker = 1; break;
        case INPUTOPT_ID_FIELD:
        case INPUTOPT_TEXT_FIELD:
            /* Checked here so that rank 0 alone says what is wrong. */
            if ((why = input_field_name_problem(optarg)) != NULL)
                return query_usage("--%s: the name '%s' %s",
                                   c == INPUTOPT_ID_FIELD ? "id-field" : "text-field", optarg, why);
            input_fields_apply(cmd_name, c, optarg, &fields);
            break;
        case INPUTOPT_STRICT:
        case INPUTOPT_ID_FROM_LINE: input_fields_apply(cmd_name, c, optarg, &fields); break;
        case 'h':
            if (rank == 0)
                usage_query(stdout);
            return 0;
        default: goto usage;
        }
    }
    if (argc - optind != 1 || !queries)
        goto usage;
    /* The checks of `simstore query`, in its order and words. */
    if (o.meta && !o.json)
        return query_usage("--meta needs --json");
    if (min_fraction_given && !o.paragraphs)
        return query_usage("--min-fraction goes with --paragraphs");
    if (o.paragraphs && (o.similarity || o.min_similarity > 0))
        return query_usage("--similarity and --min-similarity are for documents, not with "
                           "--paragraphs");
    const char *out = argv[optind];
    char shard[PATH_MAX];
    simstore *s;
    simstore_stats st;
    if (open_my_shard(out, &s, &st, shard, sizeof shard))
        return 1;
    /* The shards agree on k, sketches and the paragraph index (the
     * manifest): every rank decides alike, rank 0 says. */
    const char *refused = NULL;
    if (o.min_similarity > 0 && st.sketch == SIMSTORE_SKETCH_NONE)
        refused = "keeps no sketches (built with --sketch none, from fingerprints, or before "
                  "sketches): --min-similarity needs them";
    else if (o.paragraphs && st.paragraph_min_words == 0)
        refused = "has no paragraph index (build it with --paragraphs): --paragraphs needs one";
    if (refused) {
        if (rank == 0)
            fprintf(stderr, "%s: %s %s\n", cmd_name, out, refused);
        simstore_close(s);
        return 1;
    }
    if (!have_k)
        k = st.k;
    format = format_of(queries, format);
    const char *bad_format = NULL;
    if (format < 0 || format == INPUT_HEX_LINES)
        bad_format = "cannot tell the format from the name; use --format tsv|fp|jsonl";
    else if (o.min_similarity > 0 && format != INPUT_JSONL)
        bad_format = "--min-similarity needs the queries' texts: TSV and fingerprint-line "
                     "queries have none (give JSON Lines)";
    else if (o.paragraphs && format != INPUT_JSONL)
        bad_format = "--paragraphs needs the queries' texts: TSV and fingerprint-line queries "
                     "have none (give JSON Lines)";
    if (bad_format) {
        if (rank == 0)
            fprintf(stderr, "%s: %s%s%s\n", cmd_name, format < 0 ? queries : "",
                    format < 0 ? ": " : "", bad_format);
        simstore_close(s);
        return 2;
    }
    /* Texts are sketched (the store's kind) only when similarities are
     * asked for, as `simstore query` does. */
    size_t sketch_bytes = format == INPUT_JSONL && (o.similarity || o.min_similarity > 0)
                              ? simstore_sketch_bytes(st.sketch)
                              : 0;
    int failed = 0, rc = SIMSTORE_OK;
    simstore_fingerprinter *fpr = NULL;
    simstore_query *pq = NULL; /* --paragraphs */
    if (format == INPUT_JSONL) {
        simstore_text_options text;
        simstore_get_text_options(s, &text);
        if (!sketch_bytes)
            text.sketch = SIMSTORE_SKETCH_NONE;
        rc = simstore_fingerprinter_new(&text, &fpr);
        if (rc == SIMSTORE_OK)
            rc = simstore_fingerprinter_set_boilerplate(fpr, simstore_get_boilerplate(s));
    }
    if (rc == SIMSTORE_OK && o.paragraphs)
        rc = simstore_query_new(s, o.meta ? SIMSTORE_QUERY_WITH_META : 0, &pq);
    if (rc) {
        say("%s: %s", shard, simstore_last_error());
        failed = 1;
    }
    if (agree(failed, "opening the shards")) {
        simstore_query_free(pq);
        simstore_fingerprinter_free(fpr);
        simstore_close(s);
        return 1;
    }
    /* Every rank reads the queries (the same fingerprints, in order); rank
     * 0 keeps their ids and reports bad lines. */
    input_reader *in = NULL;
    if (input_open(&in, (input_format)format, queries) != 0 || input_set_fields(in, &fields) != 0) {
        say("%s: %s", queries, strerror(errno));
        failed = 1;
    }
    int status = 0;
    uint64_t *fps = malloc(batch * sizeof *fps);
    uint8_t *sketches = sketch_bytes ? malloc(batch * sketch_bytes) : NULL;
    query_item *items = calloc(batch, sizeof *items);
    simstore_match *merged = NULL;
    simstore_paragraph_match *para_merged = NULL;
    size_t merged_cap = 0, para_merged_cap = 0, paras_cap = 0;
    uint64_t *paras = NULL;
    simstore_batch_options bo;
    simstore_batch_options_init(&bo);
    bo.threads = threads;
    bo.flags = o.meta ? SIMSTORE_QUERY_WITH_META : 0;
    if (!fps || !items || (sketch_bytes && !sketches))
        failed = 1;
    int eof = failed;
    for (;;) {
        size_t n = 0, nq = 0; /* lines kept (queries and bad lines), queries */
        buf ans = {NULL, 0, 0};
        while (!eof && !failed && n < batch) {
            input_record rec;
            int got = input_next(in, &rec);
            if (got == 0) {
                eof = 1;
                break;
            }
            if (got == -2) {
                say("%s", input_error(in));
                failed = 1;
                eof = 1;
                break;
            }
            char why_fp[1024];
            const char *bad = NULL;
            if (got == -1) {
                bad = input_error(in);
            } else if (format == INPUT_JSONL && rec.has_fp && sketch_bytes) {
                snprintf(why_fp, sizeof why_fp,
                         "%s:%llu: a record giving \"fp\" has no text to sketch (similarities "
                         "need texts)",
                         rec.file, rec.line);
                bad = why_fp;
            } else if (o.paragraphs && rec.has_fp) {
                /* `simstore query` stops at such a line, after answering
                 * those before it. */
                if (rank == 0) {
                    char esc[CLI_ESCAPED_ID_BYTES];
                    fprintf(stderr,
                            "simstore query: %s:%llu: query '%s' has no text: --paragraphs "
                            "needs texts\nsimstore query: (at %s:%llu)\n",
                            rec.file, rec.line, cli_escape(rec.id, rec.id_len, esc, sizeof esc),
                            rec.file, rec.line);
                }
                status = 1;
                eof = 1;
                break;
            }
            if (bad) {
                /* Reported as `simstore query` reports it, and skipped. */
                if (rank == 0) {
                    fprintf(stderr, "simstore query: %s\n", bad);
                    if (item_set(&items[n], bad, strlen(bad), 0, 1))
                        failed = 1;
                }
                status = 1;
                n++;
                continue;
            }
            uint64_t fp = rec.fingerprint;
            if (o.paragraphs) {
                if (answer_paragraphs(pq, fpr, rec.text, rec.text_len, st.paragraph_min_words, k,
                                      o.min_fraction, &paras, &paras_cap, &ans))
                    failed = 1;
            } else if (format == INPUT_JSONL && !rec.has_fp) {
                unsigned fl = 0;
                rc = sketch_bytes
                         ? simstore_fingerprint_sketch(fpr, rec.text, rec.text_len, &fp,
                                                       sketches + nq * sketch_bytes, &fl)
                         : simstore_fingerprint_text(fpr, rec.text, rec.text_len, &fp, &fl);
                if (rc) {
                    say("%s:%llu: %s", rec.file, rec.line, simstore_last_error());
                    failed = 1;
                } else if (rank == 0 && (fl & SIMSTORE_FP_ONLY_BOILERPLATE)) {
                    char esc[CLI_ESCAPED_ID_BYTES];
                    fprintf(stderr,
                            "simstore query: warning: %s:%llu: query id '%s' is only "
                            "boilerplate: fingerprinted whole\n",
                            rec.file, rec.line, cli_escape(rec.id, rec.id_len, esc, sizeof esc));
                }
            }
            if (failed)
                break;
            fps[nq++] = fp;
            if (rank == 0 && item_set(&items[n], rec.id, rec.id_len, rec.id_is_integer, 0))
                failed = 1;
            n++;
        }
        if (!failed && nq && !o.paragraphs) {
            rc = simstore_query_batch_sketches(s, fps, sketches, nq, k, &bo, collect, &ans);
            if (rc) {
                say("%s: %s", shard, simstore_last_error());
                failed = 1;
            }
        }
        if (!failed && ans.len > (size_t)INT_MAX / (size_t)nranks) {
            say("the answers of %zu queries take %zu bytes: give a smaller --batch", nq, ans.len);
            failed = 1;
        }
        if (failed)
            ans.len = 0;
        /* Rank 0 gathers every rank's answers to this round's queries. */
        int len = (int)ans.len, *lens = NULL, *displs = NULL;
        char *all = NULL;
        if (rank == 0) {
            lens = calloc((size_t)nranks, sizeof *lens);
            displs = calloc((size_t)nranks, sizeof *displs);
            if (!lens || !displs)
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            size_t total = 0;
            for (int r = 0; r < nranks; r++) {
                displs[r] = (int)total;
                total += (size_t)lens[r];
            }
            all = malloc(total ? total : 1);
            if (!all)
                MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Gatherv(ans.data, len, MPI_BYTE, all, lens, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
        free(ans.data);
        int round_failed = agree(failed, "answering");
        if (rank == 0 && !round_failed) {
            const char **cur = malloc((size_t)nranks * sizeof *cur);
            if (!cur)
                MPI_Abort(MPI_COMM_WORLD, 1);
            for (int r = 0; r < nranks; r++)
                cur[r] = all + displs[r];
            for (size_t i = 0; i < n && !failed; i++) {
                if (items[i].bad) {
                    if (o.end_marker)
                        cli_print_bad_query_end(o.json, items[i].text, items[i].len);
                } else if (o.paragraphs ? print_merged_paragraphs(&o, &items[i], cur, &para_merged,
                                                                  &para_merged_cap)
                                        : print_merged(&o, &items[i], cur, &merged, &merged_cap)) {
                    say("out of memory");
                    failed = 1;
                }
            }
            free(cur);
            if (ferror(stdout)) {
                say("writing the answers: %s", strerror(errno ? errno : EIO));
                failed = 1;
            }
        }
        if (rank == 0)
            for (size_t i = 0; i < n; i++) {
                free(items[i].text);
                items[i].text = NULL;
            }
        free(all);
        free(lens);
        free(displs);
        int more = !eof && !failed;
        MPI_Allreduce(MPI_IN_PLACE, &more, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (round_failed) {
            status = 1;
            break;
        }
        if (!more)
            break;
    }
    if (failed)
        status = 1;
    fflush(stdout);
    free(merged);
    free(para_merged);
    free(paras);
    free(fps);
    free(sketches);
    free(items);
    input_close(in);
    simstore_query_free(pq);
    simstore_fingerprinter_free(fpr);
    simstore_close(s);
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return status;
usage:
    if (rank == 0)
        fprintf(stderr, "%s: bad usage at '%s' (see --help)\n", cmd_name,
                optind > 0 && optind <= argc ? argv[optind - 1] : "");
    return 2;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int status;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (rank == 0)
            fprintf(argc < 2 ? stderr : stdout,
                    "Usage: mpirun -np R simstore-mpi COMMAND ...\n"
                    "Commands: build OUT INPUT..., query OUT --queries FILE, pairs OUT,\n"
                    "clusters OUT [--keep RULE] (COMMAND --help for each)\n");
        status = argc < 2 ? 2 : 0;
    } else if (strcmp(argv[1], "build") == 0) {
        status = cmd_build(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "query") == 0) {
        status = cmd_query(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "pairs") == 0) {
        status = cmd_mpi_pairs(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "clusters") == 0) {
        status = cmd_mpi_clusters(argc - 1, argv + 1);
    } else {
        if (rank == 0)
            fprintf(stderr, "simstore-mpi: unknown command '%s'\n", argv[1]);
        status = 2;
    }
    if (fflush(stdout) != 0 && status == 0)
        status = 1;
    MPI_Finalize();
    return status;
}
