/* split.c: the inputs of `simstore-mpi build` split across the ranks: their
 * formats and names, how each is read (a plain file split at record
 * boundaries, a compressed one or standard input whole by one rank), this
 * rank's parts, read a record at a time, and standard input copied to be
 * read twice. */
#include "mpi_internal.h"

#include "cli.h"
#include "ingest.h"

#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
int format_of(const char *path, int given)
{
    if (given >= 0)
        return given;
    if (strcmp(path, "-") == 0)
        return -1;
    return from_ingest_format(ingest_format_of_name(path));
}

int parse_format(const char *s)
{
    return from_ingest_format(ingest_format_parse(s));
}

/* An input's name in messages: standard input is "<stdin>", as `simstore
 * build` calls it. */
const char *input_shown(const char *path)
{
    return strcmp(path, "-") == 0 ? "<stdin>" : path;
}

/* Source values: (input index << 40) | line. */
void source_name(void *ctx, uint64_t source, char *out, size_t size)
{
    char **paths = (char **)ctx;
    snprintf(out, size, "%s:%llu", input_shown(paths[source >> 40]),
             (unsigned long long)(source & (((uint64_t)1 << 40) - 1)));
}

void reader_close_part(reader *rd)
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
int reader_open_part(reader *rd)
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
int reader_next(reader *rd, const input_part *ip, const char **text, size_t *len)
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

int copy_stdin(const char *out, int *fd)
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

/* How each input is read, told by rank 0 as `simstore build` would open it
 * and followed by every rank: a plain regular file is split among the
 * ranks at record boundaries; a compressed one (by its magic bytes),
 * standard input and anything else (a FIFO) is read whole, as a stream, by
 * one rank. Per input i: its size plan[2 i], whether whole plan[2 i + 1],
 * and for a whole one the rank reading it, owner[i]. Collective. */
static void plan_inputs(char **inputs, int ninputs, uint64_t *plan, int *owner)
{
    uint64_t *load = calloc((size_t)nranks, sizeof *load);
    if (!load)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < ninputs && rank == 0; i++) {
        struct stat sb;
        plan[2 * i + 1] = 1;
        if (strcmp(inputs[i], "-") == 0 || stat(inputs[i], &sb) != 0)
            continue; /* a missing file: every rank says so (split_inputs) */
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
}

int split_inputs(char **inputs, int ninputs, int format, const char *stdin_path, int failed,
                 reader *rd, uint64_t *input_bytes)
{
    uint64_t *plan = calloc((size_t)ninputs * 2, sizeof *plan);
    int *owner = calloc((size_t)ninputs, sizeof *owner);
    if (!plan || !owner)
        MPI_Abort(MPI_COMM_WORLD, 1);
    plan_inputs(inputs, ninputs, plan, owner);
    /* This rank's share of the split files: the records starting in
     * [T r / R, T (r + 1) / R) of their concatenation (T bytes). */
    uint64_t total = 0; /* split */
    *input_bytes = 0;   /* all (compressed as they are) */
    for (int i = 0; i < ninputs; i++) {
        if (!plan[2 * i + 1])
            total += plan[2 * i];
        *input_bytes += plan[2 * i];
    }
    uint64_t lo = total * (uint64_t)rank / (uint64_t)nranks;
    uint64_t hi = total * (uint64_t)(rank + 1) / (uint64_t)nranks;
    uint64_t at = 0;
    rd->parts = calloc((size_t)ninputs, sizeof *rd->parts);
    if (!rd->parts) {
        say("out of memory");
        failed = 1;
    }
    int stdin_taken = 0;
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
            /* Standard input's copy, through a path of its own (the first
             * "-" only; later ones are at its end). */
            if (stdin_path && !stdin_taken && strcmp(inputs[i], "-") == 0) {
                ip.path = stdin_path;
                stdin_taken = 1;
            }
            if (owner[i] == rank)
                rd->parts[rd->nparts++] = ip;
            continue;
        }
        uint64_t flo = at, fhi = at + plan[2 * i];
        at = fhi;
        if (fhi <= lo || flo >= hi)
            continue;
        ip.lo = (lo > flo ? lo : flo) - flo;
        ip.hi = (hi < fhi ? hi : fhi) - flo;
        rd->parts[rd->nparts++] = ip;
    }
    free(plan);
    free(owner);
    return failed;
}

void reader_progress(const reader *rd, uint64_t *done, uint64_t *share)
{
    *share = 0;
    for (int i = 0; i < rd->nparts; i++)
        *share += rd->parts[i].hi - rd->parts[i].lo;
    *done = 0;
    for (int i = 0; i < rd->cur && i < rd->nparts; i++)
        *done += rd->parts[i].hi - rd->parts[i].lo;
    if (rd->cur < rd->nparts && !rd->parts[rd->cur].whole && rd->pos > rd->parts[rd->cur].lo)
        *done += rd->pos - rd->parts[rd->cur].lo;
}
