/* cli.c: messages, option helpers, number parsing and line reading shared by
 * the simstore commands. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

CLI_PRINTF(3, 0)
static void vmessage(const char *cmd, const char *kind, const char *fmt, va_list ap)
{
    fflush(stdout);
    if (cmd)
        fprintf(stderr, "simstore %s: %s", cmd, kind);
    else
        fprintf(stderr, "simstore: %s", kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, "", fmt, ap);
    va_end(ap);
    if (cmd)
        fprintf(stderr, "Try 'simstore %s --help'.\n", cmd);
    else
        fprintf(stderr, "Try 'simstore --help'.\n");
    return CLI_EXIT_USAGE;
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, "", fmt, ap);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

void cli_warn(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, "warning: ", fmt, ap);
    va_end(ap);
}

int cli_api_error(const char *cmd, int rc, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *detail = simstore_last_error();
    if (!detail || !*detail)
        detail = simstore_strerror(rc);
    return cli_error(cmd, "%s: %s", what, detail);
}

int cli_bad_option(const char *cmd, int opt, char **argv, int optind_now)
{
    const char *arg = optind_now > 0 ? argv[optind_now - 1] : "";
    if (opt == ':')
        return cli_usage_error(cmd, "option '%s' needs a value", arg);
    return cli_usage_error(cmd, "unknown option '%s'", arg);
}

static int hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int cli_parse_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        int d = hex_digit((unsigned char)s[i]);
        if (d < 0)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    if (s[16] != '\0')
        return -1;
    *out = v;
    return 0;
}

void cli_format_hex64(uint64_t fp, char buf[17])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 15; i >= 0; i--) {
        buf[i] = digits[fp & 15];
        fp >>= 4;
    }
    buf[16] = '\0';
}

int cli_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_size(const char *s, unsigned long long *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: return -1;
    }
    if (*end && end[1] != '\0' && !((end[1] == 'B' || end[1] == 'b' || end[1] == 'i') && end[2] == '\0'))
        return -1;
    if (shift && v > (~0ULL >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

int cli_memory_option(const char *cmd, const char *arg, uint64_t *memory_bytes)
{
    unsigned long long v;
    if (cli_parse_size(arg, &v) || v < (16ULL << 20))
        return cli_usage_error(cmd, "--memory takes a size of at least 16M, not '%s'", arg);
    *memory_bytes = v;
    return 0;
}

int cli_threads_option(const char *cmd, const char *arg, unsigned *threads)
{
    unsigned long long v;
    if (cli_parse_uint(arg, 1, 64, &v))
        return cli_usage_error(cmd, "--threads takes 1..64, not '%s'", arg);
    *threads = (unsigned)v;
    return 0;
}

int cli_lines_open(cli_lines *r, const char *path)
{
    memset(r, 0, sizeof *r);
    if (strcmp(path, "-") == 0) {
        r->fp = stdin;
        r->name = "<stdin>";
        r->is_stdin = 1;
        return 0;
    }
    r->name = path;
    r->fp = fopen(path, "rb");
    return r->fp ? 0 : -1;
}

int cli_lines_next(cli_lines *r, size_t *len)
{
    errno = 0;
    ssize_t n = getline(&r->line, &r->cap, r->fp);
    if (n < 0)
        return ferror(r->fp) ? -1 : 0;
    r->lineno++;
    if (n > 0 && r->line[n - 1] == '\n')
        r->line[--n] = '\0';
    if (n > 0 && r->line[n - 1] == '\r')
        r->line[--n] = '\0';
    *len = (size_t)n;
    return 1;
}

void cli_lines_close(cli_lines *r)
{
    if (r->fp && !r->is_stdin)
        fclose(r->fp);
    free(r->line);
    memset(r, 0, sizeof *r);
}

int cli_read_file(const char *path, char **data, size_t *len)
{
    int is_stdin = strcmp(path, "-") == 0;
    FILE *fp = is_stdin ? stdin : fopen(path, "rb");
    if (!fp)
        return -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        if (cap - n < 2) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, fp);
        n += got;
        if (got == 0) {
            if (ferror(fp)) {
                free(buf);
                buf = NULL;
                errno = EIO;
            }
            break;
        }
    }
    if (!is_stdin)
        fclose(fp);
    if (!buf)
        rc = -1;
    else {
        buf[n] = '\0';
        *data = buf;
        *len = n;
    }
    return rc;
}
