/* stream.h: every input the simstore commands read, as a byte stream: a file,
 * a FIFO or standard input, plain or compressed (gzip or zstd, told by the
 * magic bytes, never by the name), each opened exactly once. A compressed
 * input is decompressed on a thread of its own, a bounded number of chunks
 * ahead of the reader. */
#ifndef SIMS_CMD_STREAM_H
#define SIMS_CMD_STREAM_H

#include <stddef.h>
#include <sys/types.h>

typedef struct cli_stream cli_stream;

typedef enum cli_stream_kind {
    CLI_STREAM_PLAIN = 0,
    CLI_STREAM_GZIP,
    CLI_STREAM_ZSTD
} cli_stream_kind;

/* Open `path` ("-": standard input). Reads up to the first 4 bytes to tell the
 * kind (they are served again by cli_stream_read). Returns 0, or -1 with errno
 * set (ENOENT, EISDIR for a directory, ENOMEM, ...); *out is NULL then. */
int cli_stream_open(cli_stream **out, const char *path);

/* Read up to n decompressed bytes into buf. Returns the count (> 0), 0 at the
 * end of the input, or -1 when the input cannot be read further: a read error,
 * or compressed data that is corrupt or ends early; cli_stream_error() says
 * which in words ("gzip data is truncated", "zstd data is corrupt: ...",
 * "read error: ..."), without the file name. Once -1 or 0 is returned, every
 * later call returns the same. */
ssize_t cli_stream_read(cli_stream *s, void *buf, size_t n);

/* The message of the last -1 from cli_stream_read; "" otherwise. */
const char *cli_stream_error(const cli_stream *s);

/* The kind told from the magic bytes. */
cli_stream_kind cli_stream_get_kind(const cli_stream *s);

/* "plain", "gzip" or "zstd". */
const char *cli_stream_kind_name(cli_stream_kind kind);

/* The size of a plain regular file (for progress totals), or 0 when unknown
 * (compressed, a pipe, standard input). */
unsigned long long cli_stream_plain_size(const cli_stream *s);

/* Close and free; stops and joins the decompression thread. NULL allowed. */
void cli_stream_close(cli_stream *s);

#endif
