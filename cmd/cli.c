/* cli.c: messages, option helpers, number parsing and line reading shared by
 * the simstore commands. */
#include "cli.h"
#include "input.h"
#include "optcheck.h"
#include "quantity.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

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

const char *cli_put_tsv_id(FILE *f, const char *id, size_t len, char *esc)
{
    const char *why = simstore_id_problem(id, len);
    if (!why) {
        fwrite(id, 1, len, f);
        return NULL;
    }
    cli_escape(id, len, esc, CLI_ESCAPED_ID_BYTES);
    fputs(esc, f);
    return why;
}

void cli_tsv_id(const char *cmd, const char *id, size_t len)
{
    static int warned;
    char esc[CLI_ESCAPED_ID_BYTES];
    const char *why = cli_put_tsv_id(stdout, id, len, esc);
    if (why && !warned) {
        warned = 1;
        cli_warn(cmd, CLI_ESCAPED_ID_WARNING, why, esc);
    }
}

const char *cli_scratch_dir(void)
{
    const char *dir = getenv("TMPDIR");
    return dir && *dir ? dir : "/tmp";
}

int cli_apply_server_log(const char *cmd, const char *path)
{
    simstore_live_recovery r;
    int rc = simstore_live_recover(path, &r);
    if (rc)
        return cli_api_error(cmd, rc, "%s: applying the changes its write-ahead log holds", path);
    if (r.torn_bytes)
        cli_warn(cmd,
                 "%s: the write-ahead log ended in a torn write of %llu bytes (%llu %s begun, "
                 "never acknowledged): cut from the log and kept in %s/%s",
                 path, (unsigned long long)r.torn_bytes, (unsigned long long)r.torn_records,
                 r.torn_records == 1 ? "record" : "records", path, r.torn_name);
    if (r.applied)
        fprintf(stderr,
                "simstore %s: %s: first applied %llu %s that a server acknowledged and left in "
                "its write-ahead log (live.wal) when it stopped\n",
                cmd, path, (unsigned long long)r.applied, r.applied == 1 ? "change" : "changes");
    return 0;
}

/* Does `text` name `what`: hold it bounded by the start, a space or a quote
 * before and the end, ':', a space, a quote or ',' after? */
static int names(const char *text, const char *what)
{
    size_t n = strlen(what);
    if (n == 0)
        return 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) {
        char before = p == text ? ' ' : p[-1];
        char after = p[n];
        if ((before == ' ' || before == '\'' || before == '"') &&
            (after == '\0' || after == ':' || after == ' ' || after == '\'' || after == '"' ||
             after == ','))
            return 1;
    }
    return 0;
}

int cli_api_error(const char *cmd, int rc, const char *fmt, ...)
{
    char raw[4096 + 64], what[4 * 1024 + 1], detail[4 * 1024 + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    cli_escape(raw, strlen(raw), what, sizeof what);
    const char *last = simstore_last_error();
    if (!last || !*last)
        last = simstore_strerror(rc);
    cli_escape(last, strlen(last), detail, sizeof detail);
    if (names(detail, what))
        return cli_error(cmd, "%s", detail);
    /* "S not created" and "S: why": the path once, "S not created: why". */
    const char *colon = strstr(detail, ": ");
    if (colon && colon > detail && (size_t)(colon - detail) < sizeof raw) {
        memcpy(raw, detail, (size_t)(colon - detail));
        raw[colon - detail] = '\0';
        if (names(what, raw))
            return cli_error(cmd, "%s: %s", what, colon + 2);
    }
    return cli_error(cmd, "%s: %s", what, detail);
}

size_t cli_utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return 0;
    size_t len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    /* The second byte's range excludes overlong forms, surrogates and code
     * points above U+10FFFF. */
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

void cli_json_string(FILE *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    putc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            putc('\\', out);
            putc(ch, out);
        } else if (ch < 0x20 || ch == 0x7f) {
            fprintf(out, "\\u00%c%c", hex[ch >> 4], hex[ch & 15]);
        } else if (ch >= 0x80) {
            /* Bytes that are not UTF-8 (a store made before ids were
             * checked) become U+FFFD, so the output stays JSON. */
            size_t len = cli_utf8_sequence((const unsigned char *)s + i, n - i);
            if (len == 0) {
                fputs("\\ufffd", out);
            } else {
                fwrite(s + i, 1, len, out);
                i += len - 1;
            }
        } else {
            putc(ch, out);
        }
    }
    putc('"', out);
}

const char *cli_escape(const char *s, size_t len, char *buf, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    size_t o = 0;
    size_t cut = 0; /* the length after the last whole piece that leaves room for "..." */
    if (size == 0)
        return buf;
    while (p < end) {
        /* How many bytes to copy as they are (0: escape one byte). */
        size_t keep = 0;
        unsigned c = p[0];
        if (c >= 0x20 && c < 0x7f) {
            keep = 1;
        } else if (c >= 0x80) {
            size_t n = cli_utf8_sequence(p, (size_t)(end - p));
            /* U+0080..U+009F, the C1 controls, are C2 80..C2 9F. */
            if (n && !(c == 0xc2 && p[1] < 0xa0))
                keep = n;
        }
        size_t need = keep ? keep : 4;
        if (o + need + 1 > size) {
            o = cut;
            size_t dots = size - 1 - o < 3 ? size - 1 - o : 3;
            memcpy(buf + o, "...", dots);
            o += dots;
            break;
        }
        if (keep) {
            memcpy(buf + o, p, keep);
            p += keep;
        } else {
            buf[o] = '\\';
            buf[o + 1] = 'x';
            buf[o + 2] = hex[c >> 4];
            buf[o + 3] = hex[c & 15];
            p++;
        }
        o += need;
        if (o + 4 <= size)
            cut = o;
    }
    buf[o] = '\0';
    return buf;
}

const char *cli_plural(unsigned long long n, const char *singular, const char *plural)
{
    return n == 1 ? singular : plural;
}

void cli_clash_report(void *ctx, const simstore_clash *clash)
{
    cli_clashes *r = (cli_clashes *)ctx;
    unsigned long long seen = r->stored + r->repeated;
    if (clash->repeated)
        r->repeated++;
    else
        r->stored++;
    if (r->skipping || seen >= CLI_CLASH_LINES)
        return;
    if (seen == 0 && r->before_print)
        r->before_print(r->before_ctx);
    char where[512], first[512], id[CLI_ESCAPED_ID_BYTES];
    snprintf(where, sizeof where, "document #%llu", (unsigned long long)clash->source + 1);
    if (r->source_name)
        r->source_name(r->source_ctx, clash->source, where, sizeof where);
    cli_escape(clash->id, clash->id_len, id, sizeof id);
    if (!clash->repeated) {
        cli_error(r->cmd, "%s: document id '%s' is already in the store", where, id);
        return;
    }
    snprintf(first, sizeof first, "document #%llu", (unsigned long long)clash->first_source + 1);
    if (r->source_name)
        r->source_name(r->source_ctx, clash->first_source, first, sizeof first);
    cli_error(r->cmd, "%s: duplicate document id '%s' (first at %s)", where, id, first);
}

void cli_clashes_finish(const cli_clashes *r, const char *hint)
{
    unsigned long long all = r->stored + r->repeated;
    unsigned long long unlisted = r->skipping || all <= CLI_CLASH_LINES ? 0 : all - CLI_CLASH_LINES;
    if (unlisted)
        cli_error(r->cmd, "%llu more clashing %s not listed%s%s", unlisted,
                  CLI_NOUN(unlisted, "id"), hint ? "; " : "", hint ? hint : "");
    else if (hint && all)
        cli_error(r->cmd, "%s", hint);
}

void cli_note_compaction(void *ctx, const simstore_compaction *c)
{
    cli_compaction *seen = (cli_compaction *)ctx;
    seen->happened = 1;
    seen->what = *c;
}

void cli_print_compaction(const cli_compaction *c)
{
    if (!c->happened)
        return;
    unsigned long long before = c->what.segments_before, after = c->what.segments_after;
    unsigned long long dropped = c->what.fingerprints_dropped;
    printf("; compacted %llu %s -> %llu, %llu dead %s dropped", before, CLI_NOUN(before, "segment"),
           after, dropped, CLI_NOUN(dropped, "fingerprint"));
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

int cli_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return 0;
    if (need > SIZE_MAX / 2 / (elem ? elem : 1))
        return -1;
    size_t c = *cap ? *cap : first;
    while (c < need)
        c *= 2;
    void *g = realloc(*p, c * elem);
    if (!g)
        return -1;
    *p = g;
    *cap = c;
    return 0;
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

void cli_format_similarity(double similarity, int json, char buf[32])
{
    if (!(similarity >= 0))
        snprintf(buf, 32, "%s", json ? "null" : "-");
    else
        snprintf(buf, 32, "%.17g", similarity);
}

int cli_min_similarity_option(const char *cmd, const char *arg, double *out)
{
    char why[256];
    if (cli_min_similarity_problem(arg, out, why, sizeof why))
        return cli_usage_error(cmd, "%s", why);
    return 0;
}

int cli_bands_option(const char *cmd, const char *arg, int *out)
{
    char why[256];
    if (cli_bands_problem(arg, out, why, sizeof why))
        return cli_usage_error(cmd, "%s", why);
    return 0;
}

void cli_format_bands(const simstore_near_rule *rule, char buf[64])
{
    if (rule->bands && rule->band_count)
        snprintf(buf, 64, "on (%u bands of %u bits)", rule->band_count, rule->band_rows);
    else
        snprintf(buf, 64, "off");
}

int cli_sketch_option(const char *cmd, const char *arg, simstore_sketch_kind *out)
{
    if (simstore_sketch_parse(arg, out))
        return cli_usage_error(cmd,
                               "--sketch takes none, minhash16, minhash32, minhash64, "
                               "minhash128 or minhash256, not '%s'",
                               arg);
    return 0;
}

int cli_paragraph_min_words_option(const char *cmd, const char *arg, unsigned *out)
{
    unsigned long long v;
    if (cli_parse_uint(arg, 1, SIMSTORE_PARAGRAPH_MIN_WORDS_MAX, &v))
        return cli_usage_error(cmd, "--paragraph-min-words takes 1..%u, not '%s'",
                               SIMSTORE_PARAGRAPH_MIN_WORDS_MAX, arg);
    *out = (unsigned)v;
    return 0;
}

int cli_min_fraction_option(const char *cmd, const char *arg, double *out)
{
    char why[256];
    if (cli_min_fraction_problem(arg, out, why, sizeof why))
        return cli_usage_error(cmd, "%s", why);
    return 0;
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
    uint64_t v;
    if (quantity_parse(s, &v))
        return -1;
    *out = v;
    return 0;
}

char *cli_store_path(char *arg)
{
    size_t n = strlen(arg);
    while (n > 1 && arg[n - 1] == '/')
        arg[--n] = '\0';
    return arg;
}

/* RAM plus swap, in bytes: the most memory this machine can give a process;
 * 0 when unknown. */
static uint64_t machine_memory_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    uint64_t bytes = (uint64_t)pages * (uint64_t)page;
    struct sysinfo si;
    if (sysinfo(&si) == 0)
        bytes += (uint64_t)si.totalswap * (si.mem_unit ? si.mem_unit : 1);
    return bytes;
}

int cli_memory_option(const char *cmd, const char *arg, uint64_t *memory_bytes)
{
    unsigned long long v;
    if (cli_parse_size(arg, &v) || v < SIMSTORE_MIN_MEMORY_BYTES)
        return cli_usage_error(cmd,
                               "--memory takes a size of at least %lluM (K, M, G, T: "
                               "powers of 1024; 512M, 4GiB), not '%s'",
                               (unsigned long long)(SIMSTORE_MIN_MEMORY_BYTES >> 20), arg);
    uint64_t machine = machine_memory_bytes();
    if (machine && v > machine)
        return cli_usage_error(cmd,
                               "--memory %s is more than this machine has (%.1f GiB of RAM "
                               "and swap)",
                               arg, (double)machine / (double)(1ULL << 30));
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

#define LINE_BUF_BYTES ((size_t)64 << 10)

int cli_lines_open(cli_lines *r, const char *path)
{
    memset(r, 0, sizeof *r);
    r->is_stdin = strcmp(path, "-") == 0;
    r->name = r->is_stdin ? "<stdin>" : path;
    r->buf = malloc(LINE_BUF_BYTES);
    if (!r->buf) {
        errno = ENOMEM;
        return -1;
    }
    if (cli_stream_open(&r->stream, path) != 0) {
        int saved = errno;
        free(r->buf);
        memset(r, 0, sizeof *r);
        errno = saved;
        return -1;
    }
    r->error = "";
    return 0;
}

/* Append buf[from, to) to the joined line, keeping room for a NUL. */
static int join(cli_lines *r, size_t *joined_len, size_t from, size_t to)
{
    size_t n = to - from;
    if (*joined_len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < *joined_len + n + 1)
            cap *= 2;
        char *grown = realloc(r->joined, cap);
        if (!grown)
            return -1;
        r->joined = grown;
        r->cap = cap;
    }
    memcpy(r->joined + *joined_len, r->buf + from, n);
    *joined_len += n;
    return 0;
}

static int lines_broken(cli_lines *r, const char *why)
{
    r->state = -1;
    r->error = why;
    r->lineno++; /* the line being read */
    r->line = NULL;
    return -1;
}

int cli_lines_next(cli_lines *r, size_t *len)
{
    if (r->state != 0)
        return r->state > 0 ? 0 : -1;
    size_t n = 0, joined_len = 0;
    int joining = 0;
    for (;;) {
        char *start = r->buf + r->buf_pos;
        char *nl = memchr(start, '\n', r->buf_len - r->buf_pos);
        if (nl && !joining) {
            /* The common case: the whole line is in buf. */
            *nl = '\0';
            r->line = start;
            n = (size_t)(nl - start);
            r->buf_pos += n + 1;
            break;
        }
        size_t end = nl ? (size_t)(nl - r->buf) : r->buf_len;
        if (join(r, &joined_len, r->buf_pos, end) != 0)
            return lines_broken(r, "out of memory");
        joining = 1;
        if (nl) {
            r->buf_pos = end + 1;
            break;
        }
        ssize_t got = cli_stream_read(r->stream, r->buf, LINE_BUF_BYTES);
        if (got < 0)
            return lines_broken(r, cli_stream_error(r->stream));
        r->buf_pos = 0;
        r->buf_len = got > 0 ? (size_t)got : 0;
        if (got == 0) {
            if (joined_len == 0) {
                r->state = 1;
                r->line = NULL;
                return 0;
            }
            break; /* a last line without a newline */
        }
    }
    if (joining) {
        r->joined[joined_len] = '\0';
        r->line = r->joined;
        n = joined_len;
    }
    if (n > 0 && r->line[n - 1] == '\r')
        r->line[--n] = '\0';
    r->lineno++;
    *len = n;
    return 1;
}

const char *cli_lines_error(const cli_lines *r)
{
    return r->state < 0 && r->error ? r->error : "";
}

void cli_lines_close(cli_lines *r)
{
    cli_stream_close(r->stream);
    free(r->buf);
    free(r->joined);
    memset(r, 0, sizeof *r);
}

int cli_read_stream(cli_stream *s, char **data, size_t *len, unsigned long long *line)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        goto no_memory;
    for (;;) {
        if (cap - n < 2) {
            char *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!grown)
                goto no_memory;
            buf = grown;
            cap *= 2;
        }
        ssize_t got = cli_stream_read(s, buf + n, cap - n - 1);
        if (got == 0)
            break;
        if (got < 0) {
            if (line) {
                unsigned long long newlines = 0;
                for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + n - p))); p++)
                    newlines++;
                *line = newlines + 1;
            }
            free(buf);
            return -2;
        }
        n += (size_t)got;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
no_memory:
    free(buf);
    errno = ENOMEM;
    return -1;
}

int cli_read_file(const char *path, char **data, size_t *len, char *why, size_t why_size)
{
    const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
    cli_stream *s;
    if (cli_stream_open(&s, path) != 0) {
        snprintf(why, why_size, "%s: %s", name, strerror(errno));
        return -1;
    }
    unsigned long long line = 0;
    int rc = cli_read_stream(s, data, len, &line);
    if (rc == -1)
        snprintf(why, why_size, "%s: %s", name, strerror(errno));
    else if (rc == -2)
        snprintf(why, why_size, "%s:%llu: %s", name, line, cli_stream_error(s));
    cli_stream_close(s);
    return rc == 0 ? 0 : -1;
}

int cli_parse_keep(const char *arg, char **argv, int argc, int *next, simstore_keep_rule *rule,
                   const char **field, char *why, size_t why_size)
{
    const char *rest = NULL;
    size_t n = strcspn(arg, " =");
    if (arg[n])
        rest = arg + n + 1;
    if (n == 5 && strncmp(arg, "first", n) == 0 && !rest) {
        *rule = SIMSTORE_KEEP_FIRST;
    } else if (n == 6 && strncmp(arg, "min-id", n) == 0 && !rest) {
        *rule = SIMSTORE_KEEP_MIN_ID;
    } else if (n == 8 && (strncmp(arg, "max-meta", n) == 0 || strncmp(arg, "min-meta", n) == 0)) {
        if (!rest) {
            if (*next >= argc) {
                snprintf(why, why_size, "--keep %s needs a FIELD", arg);
                return -1;
            }
            rest = argv[(*next)++];
        }
        const char *problem = input_field_name_problem(rest);
        if (problem) {
            snprintf(why, why_size, "--keep %.*s: the field name '%s' %s", (int)n, arg, rest,
                     problem);
            return -1;
        }
        *rule = arg[1] == 'a' ? SIMSTORE_KEEP_MAX_KEY : SIMSTORE_KEEP_MIN_KEY;
        *field = rest;
    } else {
        snprintf(why, why_size,
                 "--keep: '%s' is not first, min-id, max-meta FIELD or min-meta FIELD", arg);
        return -1;
    }
    return 0;
}

int cli_meta_key(void *ctx, const char *meta, size_t len, double *key)
{
    return meta && input_json_number(meta, len, (const char *)ctx, key) == 1;
}

void cli_print_bad_query_end(int json, const char *why, size_t why_len)
{
    if (json) {
        fputs("{\"query\":null,\"matches\":[],\"error\":", stdout);
        cli_json_string(stdout, why, why_len);
        fputs("}\n", stdout);
    } else {
        fputs(".\n", stdout);
    }
}
