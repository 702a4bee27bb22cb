/* input.c: records from plain files, JSON Lines (jansson) and fingerprint
 * lines, with FILE:LINE messages for everything malformed. */
#include "input.h"

#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct input_reader {
    input_format format;
    char *path;     /* as given */
    char *name;     /* for messages: "<stdin>", control characters shown as '?' */
    cli_lines lines; /* JSONL and fingerprint lines */
    int plain_done;
    char *plain_text; /* INPUT_PLAIN: the file */
    json_t *root;     /* the current JSON record, owning the strings */
    char *meta;       /* json_dumps of "meta" */
    char id_buf[32];  /* integer ids, formatted */
    char error[1024];
};

static int set_error(input_reader *r, int code, const char *fmt, ...) CLI_PRINTF(3, 4);

static int set_error(input_reader *r, int code, const char *fmt, ...)
{
    int n;
    if (r->format == INPUT_PLAIN || r->lines.lineno == 0)
        n = snprintf(r->error, sizeof r->error, "%s: ", r->name);
    else
        n = snprintf(r->error, sizeof r->error, "%s:%llu: ", r->name, r->lines.lineno);
    if (n < 0 || (size_t)n >= sizeof r->error)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error + n, sizeof r->error - (size_t)n, fmt, ap);
    va_end(ap);
    return code;
}

/* Up to 40 bytes of s for a message, control characters and quotes escaped. */
static const char *excerpt(const char *s, size_t len, char out[200])
{
    size_t n = 0;
    for (size_t i = 0; i < len && n < 180; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 40) {
            memcpy(out + n, "...", 3);
            n += 3;
            break;
        }
        if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\') {
            n += (size_t)snprintf(out + n, 8, "\\x%02x", c);
        } else if (c == 0xC2 && i + 1 < len && (unsigned char)s[i + 1] >= 0x80 &&
                   (unsigned char)s[i + 1] <= 0x9F) {
            /* A C1 control would act on the terminal showing the message. */
            n += (size_t)snprintf(out + n, 8, "\\u%04x", (unsigned char)s[i + 1]);
            i++;
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return out;
}

const char *input_check_id(const char *id, size_t len)
{
    if (len == 0)
        return "empty id";
    if (len > INPUT_MAX_ID_BYTES)
        return "id longer than 511 bytes";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c < 0x20 || c == 0x7F)
            return "id contains a control character (tab, newline, ...)";
        /* C1 controls, U+0080..U+009F, are C2 80..C2 9F in UTF-8. */
        if (c == 0xC2 && i + 1 < len && (unsigned char)id[i + 1] >= 0x80 &&
            (unsigned char)id[i + 1] <= 0x9F)
            return "id contains a control character (U+0080..U+009F)";
    }
    return NULL;
}

int input_open(input_reader **out, input_format format, const char *path)
{
    *out = NULL;
    input_reader *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    r->format = format;
    int is_stdin = strcmp(path, "-") == 0;
    r->path = strdup(path);
    r->name = strdup(is_stdin ? "<stdin>" : path);
    if (!r->path || !r->name) {
        input_close(r);
        errno = ENOMEM;
        return -1;
    }
    for (char *c = r->name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7F)
            *c = '?';
    if (format != INPUT_PLAIN) {
        if (cli_lines_open(&r->lines, path) != 0) {
            int saved = errno;
            input_close(r);
            errno = saved;
            return -1;
        }
    } else if (!is_stdin) {
        /* Fail at open, like the line formats, rather than at the first read;
         * a directory opens but cannot be read. */
        struct stat st;
        FILE *f = fopen(path, "rb");
        if (!f || (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode))) {
            int saved = f ? EISDIR : errno;
            if (f)
                fclose(f);
            input_close(r);
            errno = saved;
            return -1;
        }
        fclose(f);
    }
    *out = r;
    return 0;
}

const char *input_error(const input_reader *r)
{
    return r->error;
}

const char *input_name(const input_reader *r)
{
    return r->name;
}

static void release_record(input_reader *r)
{
    json_decref(r->root);
    r->root = NULL;
    free(r->meta);
    r->meta = NULL;
    free(r->plain_text);
    r->plain_text = NULL;
}

void input_close(input_reader *r)
{
    if (!r)
        return;
    release_record(r);
    if (r->lines.fp)
        cli_lines_close(&r->lines);
    free(r->path);
    free(r->name);
    free(r);
}

static int next_plain(input_reader *r, input_record *rec)
{
    if (r->plain_done)
        return 0;
    r->plain_done = 1;
    size_t len;
    if (cli_read_file(r->path, &r->plain_text, &len) != 0)
        return set_error(r, -2, "%s", strerror(errno));
    const char *why = input_check_id(r->path, strlen(r->path));
    if (why)
        return set_error(r, -1, "the path cannot be a document id: %s", why);
    rec->id = r->path;
    rec->id_len = strlen(r->path);
    rec->text = r->plain_text;
    rec->text_len = len;
    return 1;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number with a fraction or exponent";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

static int parse_jsonl(input_reader *r, const char *line, size_t len, input_record *rec)
{
    char shown[200];
    json_error_t jerr;
    r->root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!r->root) {
        if (json_error_code(&jerr) == json_error_invalid_utf8)
            return set_error(r, -1, "invalid UTF-8 (column %d); JSON must be UTF-8",
                             jerr.column);
        return set_error(r, -1, "invalid JSON (column %d): %s", jerr.column, jerr.text);
    }
    if (!json_is_object(r->root))
        return set_error(r, -1, "expected a JSON object {\"id\": ..., \"text\": ...}, found %s",
                         json_type_name(r->root));
    const char *key;
    json_t *value;
    json_object_foreach(r->root, key, value)
    {
        if (strcmp(key, "id") != 0 && strcmp(key, "text") != 0 && strcmp(key, "meta") != 0)
            return set_error(r, -1, "unexpected member '%s' (allowed: id, text, meta)",
                             excerpt(key, strlen(key), shown));
    }
    json_t *id = json_object_get(r->root, "id");
    json_t *text = json_object_get(r->root, "text");
    json_t *meta = json_object_get(r->root, "meta");
    if (!id)
        return set_error(r, -1, "missing member \"id\"");
    if (!text)
        return set_error(r, -1, "missing member \"text\"");
    if (json_is_string(id)) {
        rec->id = json_string_value(id);
        rec->id_len = json_string_length(id);
    } else if (json_is_integer(id)) {
        int n = snprintf(r->id_buf, sizeof r->id_buf, "%" JSON_INTEGER_FORMAT,
                         json_integer_value(id));
        rec->id = r->id_buf;
        rec->id_len = (size_t)n;
    } else {
        return set_error(r, -1, "\"id\" must be a string or an integer, not %s",
                         json_type_name(id));
    }
    const char *why = input_check_id(rec->id, rec->id_len);
    if (why)
        return set_error(r, -1, "%s: '%s'", why, excerpt(rec->id, rec->id_len, shown));
    if (!json_is_string(text))
        return set_error(r, -1, "\"text\" must be a string, not %s", json_type_name(text));
    rec->text = json_string_value(text);
    rec->text_len = json_string_length(text);
    if (meta) {
        r->meta = json_dumps(meta, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!r->meta)
            return set_error(r, -2, "out of memory");
        rec->meta = r->meta;
    }
    return 1;
}

static int parse_fp_line(input_reader *r, const char *line, size_t len, input_record *rec)
{
    char shown[200];
    const char *tab = memchr(line, '\t', len);
    if (!tab)
        return set_error(r, -1, "expected %s, found no tab: '%s'",
                         r->format == INPUT_FP_ID ? "HEX16<TAB>id" : "id<TAB>HEX16",
                         excerpt(line, len, shown));
    const char *hex, *id;
    size_t hex_len, id_len;
    if (r->format == INPUT_FP_ID) {
        hex = line;
        hex_len = (size_t)(tab - line);
        id = tab + 1;
        id_len = len - hex_len - 1;
    } else {
        id = line;
        id_len = (size_t)(tab - line);
        hex = tab + 1;
        hex_len = len - id_len - 1;
    }
    if (memchr(tab + 1, '\t', len - (size_t)(tab - line) - 1))
        return set_error(r, -1, "more than two tab-separated fields");
    char hexz[17];
    uint64_t fp = 0;
    int hex_ok = hex_len == 16;
    if (hex_ok) {
        memcpy(hexz, hex, 16);
        hexz[16] = '\0';
        hex_ok = cli_parse_hex64(hexz, &fp) == 0;
    }
    if (!hex_ok)
        return set_error(r, -1, "bad fingerprint '%s': expected 16 hex digits",
                         excerpt(hex, hex_len, shown));
    const char *why = input_check_id(id, id_len);
    if (why)
        return set_error(r, -1, "%s: '%s'", why, excerpt(id, id_len, shown));
    rec->id = id;
    rec->id_len = id_len;
    rec->fingerprint = fp;
    return 1;
}

static int is_blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

int input_next(input_reader *r, input_record *rec)
{
    release_record(r);
    r->error[0] = '\0';
    memset(rec, 0, sizeof *rec);
    rec->file = r->name;
    if (r->format == INPUT_PLAIN)
        return next_plain(r, rec);
    for (;;) {
        size_t len;
        int got = cli_lines_next(&r->lines, &len);
        if (got < 0)
            return set_error(r, -2, "read error: %s", strerror(errno ? errno : EIO));
        if (got == 0)
            return 0;
        const char *line = r->lines.line;
        if (r->lines.lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0) {
            line += 3; /* a byte order mark before the first record */
            len -= 3;
        }
        /* Blank lines (such as a trailing one) are not records. */
        if (is_blank(line, len))
            continue;
        rec->line = r->lines.lineno;
        if (r->format == INPUT_JSONL)
            return parse_jsonl(r, line, len, rec);
        return parse_fp_line(r, line, len, rec);
    }
}
