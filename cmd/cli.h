/* cli.h: what every simstore command shares: exit codes, messages, option
 * parsing helpers, and a line reader that knows its file name and line number.
 * cmd/ is a client of the public header only. */
#ifndef SIMS_CMD_CLI_H
#define SIMS_CMD_CLI_H

#include "simstore.h"

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
/* Print "simstore CMD: what: <simstore_last_error() or strerror(rc)>"; returns 1. */
int cli_api_error(const char *cmd, int rc, const char *fmt, ...) CLI_PRINTF(3, 4);
/* Print "simstore CMD: warning: message". */
void cli_warn(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Report an unknown option or a missing argument the way every command does,
 * from getopt_long's optopt / argv state; returns 2. Call it on '?' or ':'. */
int cli_bad_option(const char *cmd, int opt, char **argv, int optind_now);

/* Parse a 16-digit hexadecimal fingerprint (exactly 16 hex digits, either
 * case, no prefix). Returns 0 or -1. */
int cli_parse_hex64(const char *s, uint64_t *out);
/* Format a fingerprint as 16 lowercase hex digits plus NUL into buf[17]. */
void cli_format_hex64(uint64_t fp, char buf[17]);
/* Parse a decimal unsigned integer in [min, max]. Returns 0 or -1. */
int cli_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out);
/* Parse a size such as 512M, 4G, 1024 (suffixes K, M, G, T; powers of 1024). */
int cli_parse_size(const char *s, unsigned long long *out);

/* The resource options of the commands that sort (build, add, compact,
 * delete): --memory SIZE (at least 16M) and --threads N (1..64). Each
 * returns 0, or 2 after printing the usage error. */
int cli_memory_option(const char *cmd, const char *arg, uint64_t *memory_bytes);
int cli_threads_option(const char *cmd, const char *arg, unsigned *threads);

/* Reads lines of any length from a named file or stdin ("-"), counting them.
 * The returned line excludes the newline (and a CR before it) and stays valid
 * until the next call. */
typedef struct cli_lines {
    FILE *fp;
    const char *name; /* as given; "<stdin>" for "-" */
    char *line;
    size_t cap;
    unsigned long long lineno;
    int is_stdin;
} cli_lines;

int cli_lines_open(cli_lines *r, const char *path);
/* 1 = a line is in r->line with length *len, 0 = end of input, -1 = read error. */
int cli_lines_next(cli_lines *r, size_t *len);
void cli_lines_close(cli_lines *r);

/* Read a whole file (or stdin for "-") into a NUL-terminated buffer. Returns 0
 * or -1 with errno set. */
int cli_read_file(const char *path, char **data, size_t *len);

#endif
