/* input.c: records from plain files, JSON Lines (jsonscan.c for the common
 * record, jansson for the rest) and fingerprint lines, with FILE:LINE
 * messages for everything malformed. */
#include "input.h"

#include "cli.h"
#include "jsonscan.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct input_reader {
    input_format format;
    char *path;        /* as given */
    char *name;        /* for messages: "<stdin>", control characters shown as '?' */
    cli_lines lines;   /* JSONL and fingerprint lines */
    cli_stream *plain; /* INPUT_PLAIN: the file, opened once (a FIFO can be) */
    int plain_done;
    char *plain_text;     /* INPUT_PLAIN: the file's bytes */
    input_parser *parser; /* JSONL and fingerprint lines */
    input_fields fields;
    char error[1024];
};

struct input_parser {
    input_format format;
    input_fields fields;
    char *fields_buf; /* the copied names, NUL-separated */
    char *meta_list;  /* --meta-fields as given, for messages */
    char **meta_names;
    size_t meta_count;
    json_t *root;     /* the current JSON record, owning the strings */
    int scan;         /* JSON Lines: try jsonscan_read first */
    jsonscan scanner; /* its buffers, owning the strings when it read the line */
    char *meta;       /* the metadata, compact JSON */
    size_t meta_cap;
    char id_buf[1100];                             /* integer ids, formatted; FILE:LINE ids */
    uint8_t sketch_buf[SIMSTORE_SKETCH_MAX_BYTES]; /* "sketch" with "fp" */
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

/* Up to 40 bytes of s for a message, control characters, quotes and bytes
 * that are not UTF-8 escaped. */
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
        } else if (c >= 0x80) {
            size_t seq = cli_utf8_sequence((const unsigned char *)s + i, len - i);
            if (seq == 0) {
                n += (size_t)snprintf(out + n, 8, "\\x%02x", c);
            } else {
                memcpy(out + n, s + i, seq);
                n += seq;
                i += seq - 1;
            }
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = '\0';
    return out;
}

const char *input_check_id(const char *id, size_t len)
{
    return simstore_id_problem(id, len);
}

int input_open(input_reader **out, input_format format, const char *path)
{
    *out = NULL;
    input_reader *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    r->format = format;
    input_fields_init(&r->fields);
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
    /* Opened here, once, and kept: open fails for a missing file or a
     * directory (EISDIR), and a FIFO is never opened a second time. */
    int opened =
        format != INPUT_PLAIN ? cli_lines_open(&r->lines, path) : cli_stream_open(&r->plain, path);
    if (opened != 0) {
        int saved = errno;
        input_close(r);
        errno = saved;
        return -1;
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
    free(r->plain_text);
    r->plain_text = NULL;
}

void input_close(input_reader *r)
{
    if (!r)
        return;
    release_record(r);
    input_parser_free(r->parser);
    if (r->lines.stream)
        cli_lines_close(&r->lines);
    cli_stream_close(r->plain);
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
    unsigned long long line = 0;
    int got = cli_read_stream(r->plain, &r->plain_text, &len, &line);
    if (got == -1)
        return set_error(r, -2, "%s", strerror(errno));
    if (got == -2) {
        /* Name the line where the input broke: "FILE:LINE: what". */
        snprintf(r->error, sizeof r->error, "%s:%llu: %s", r->name, line,
                 cli_stream_error(r->plain));
        return -2;
    }
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

/* ---- field options ---------------------------------------------------- */

void input_fields_init(input_fields *f)
{
    memset(f, 0, sizeof *f);
    f->id_field = "id";
    f->text_field = "text";
}

/* A member name: non-empty, no empty component between dots. */
static const char *check_field_name(const char *name)
{
    if (!*name)
        return "is empty";
    if (name[0] == '.' || name[strlen(name) - 1] == '.' || strstr(name, ".."))
        return "has an empty component (nested names are a.b)";
    return NULL;
}

int input_fields_apply(const char *cmd, int opt, const char *arg, input_fields *f)
{
    const char *why;
    switch (opt) {
    case INPUTOPT_ID_FIELD:
    case INPUTOPT_TEXT_FIELD:
        if ((why = check_field_name(arg)) != NULL)
            return cli_usage_error(cmd, "--%s: the name '%s' %s",
                                   opt == INPUTOPT_ID_FIELD ? "id-field" : "text-field", arg, why);
        if (opt == INPUTOPT_ID_FIELD)
            f->id_field = arg;
        else
            f->text_field = arg;
        return 1;
    case INPUTOPT_META_FIELDS: {
        /* Every comma-separated name must be usable. */
        const char *p = arg;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            char name[256];
            if (n >= sizeof name)
                return cli_usage_error(cmd, "--meta-fields: a name is longer than 255 bytes");
            memcpy(name, p, n);
            name[n] = '\0';
            if ((why = check_field_name(name)) != NULL)
                return cli_usage_error(cmd, "--meta-fields: the name '%s' %s", name, why);
            if (!comma)
                break;
            p = comma + 1;
        }
        f->meta_fields = arg;
        return 1;
    }
    case INPUTOPT_STRICT: f->strict = 1; return 1;
    case INPUTOPT_ID_FROM_LINE: f->id_from_line = 1; return 1;
    default: return 0;
    }
}

/* ---- the line parser -------------------------------------------------- */

static int parser_error(input_parser *p, int code, const char *fmt, ...) CLI_PRINTF(3, 4);

static int parser_error(input_parser *p, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof p->error, fmt, ap);
    va_end(ap);
    return code;
}

int input_parser_new(input_parser **out, input_format format, const input_fields *fields)
{
    *out = NULL;
    input_parser *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->format = format;
    if (fields)
        p->fields = *fields;
    else
        input_fields_init(&p->fields);
    /* Own copies of the names, so the caller's strings may go. */
    const char *idf = p->fields.id_field, *textf = p->fields.text_field;
    const char *metaf = p->fields.meta_fields ? p->fields.meta_fields : "";
    size_t need = strlen(idf) + strlen(textf) + strlen(metaf) + 3;
    p->fields_buf = malloc(need);
    size_t commas = 1;
    for (const char *c = metaf; *c; c++)
        commas += *c == ',';
    p->meta_names = calloc(commas, sizeof *p->meta_names);
    p->meta_list = strdup(metaf);
    if (!p->fields_buf || !p->meta_names || !p->meta_list) {
        input_parser_free(p);
        return -1;
    }
    char *w = p->fields_buf;
    p->fields.id_field = strcpy(w, idf);
    w += strlen(idf) + 1;
    p->fields.text_field = strcpy(w, textf);
    w += strlen(textf) + 1;
    if (p->fields.meta_fields) {
        strcpy(w, metaf);
        p->fields.meta_fields = w;
        for (char *name = w;;) {
            char *comma = strchr(name, ',');
            if (comma)
                *comma = '\0';
            p->meta_names[p->meta_count++] = name;
            if (!comma)
                break;
            name = comma + 1;
        }
    }
    /* The one-pass reader takes the default shape of a record: plain names,
     * the metadata as "meta", other members allowed. */
    const char *idn = p->fields.id_field, *textn = p->fields.text_field;
    p->scan = format == INPUT_JSONL && !p->fields.meta_fields && !p->fields.strict &&
              !strchr(idn, '.') && !strchr(textn, '.') && strcmp(idn, textn) != 0 &&
              strcmp(idn, "meta") != 0 && strcmp(textn, "meta") != 0;
    *out = p;
    return 0;
}

void input_parser_jansson_only(input_parser *p)
{
    p->scan = 0;
}

void input_parser_free(input_parser *p)
{
    if (!p)
        return;
    jsonscan_free(&p->scanner);
    json_decref(p->root);
    free(p->meta);
    free(p->meta_names);
    free(p->meta_list);
    free(p->fields_buf);
    free(p);
}

const char *input_parser_error(const input_parser *p)
{
    return p->error;
}

/* The member `name` of obj: the member of that exact name, else the nested
 * member a.b.c. NULL when absent. */
static json_t *get_field(json_t *obj, const char *name)
{
    json_t *v = json_object_get(obj, name);
    if (v || !strchr(name, '.'))
        return v;
    const char *p = name;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!json_is_object(obj))
            return NULL;
        v = json_object_getn(obj, p, n);
        if (!v || !dot)
            return v;
        obj = v;
        p = dot + 1;
    }
}

const char *input_field_name_problem(const char *name)
{
    return check_field_name(name);
}

int input_json_number(const char *text, size_t len, const char *name, double *value)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, &jerr);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return -1;
    }
    json_t *v = get_field(root, name);
    int got = 0;
    if (json_is_number(v)) {
        *value = json_number_value(v);
        got = 1;
    } else if (json_is_string(v)) {
        const char *str = json_string_value(v);
        char *end;
        errno = 0;
        double d = strtod(str, &end);
        if (end != str && *end == '\0' && errno == 0) {
            *value = d;
            got = 1;
        }
    }
    json_decref(root);
    return got;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Is `key` (a top-level member) one of the fields in use? */
static int is_known_member(const input_parser *p, const char *key)
{
    const char *names[3] = {p->fields.id_field, p->fields.text_field,
                            p->fields.meta_fields ? NULL : "meta"};
    if (strcmp(key, "fp") == 0 || strcmp(key, "sketch") == 0)
        return 1; /* a fingerprint (and its sketch) given instead of the text */
    size_t klen = strlen(key);
    for (size_t i = 0; i < 3 + p->meta_count; i++) {
        const char *n = i < 3 ? names[i] : p->meta_names[i - 3];
        if (!n)
            continue;
        /* The member itself, or the top of a nested name. */
        if (strcmp(n, key) == 0 || (strncmp(n, key, klen) == 0 && n[klen] == '.'))
            return 1;
    }
    return 0;
}

/* Serialise v compactly into p->meta. */
static int dump_meta(input_parser *p, const json_t *v)
{
    size_t need = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    if (need == 0)
        return parser_error(p, -2, "out of memory");
    if (need + 1 > p->meta_cap) {
        char *g = realloc(p->meta, need + 1);
        if (!g)
            return parser_error(p, -2, "out of memory");
        p->meta = g;
        p->meta_cap = need + 1;
    }
    json_dumpb(v, p->meta, need, JSON_COMPACT | JSON_ENCODE_ANY);
    p->meta[need] = '\0';
    return 0;
}

static int parse_jsonl(input_parser *p, const char *line, size_t len, const char *file,
                       unsigned long long lineno, input_record *rec)
{
    char shown[200];
    const input_fields *f = &p->fields;
    if (p->scan) {
        jsonscan_record r;
        int got = jsonscan_read(&p->scanner, line, len, f->id_field, f->text_field, &r);
        if (got < 0)
            return parser_error(p, -2, "out of memory");
        if (got > 0) {
            /* What jansson would give, checked as below. */
            rec->id = r.id;
            rec->id_len = r.id_len;
            rec->id_is_integer = r.id_is_integer;
            const char *why = input_check_id(rec->id, rec->id_len);
            if (why)
                return parser_error(p, -1, "%s: '%s'", why, excerpt(rec->id, rec->id_len, shown));
            rec->text = r.text;
            rec->text_len = r.text_len;
            rec->meta = r.meta;
            return 1;
        }
    }
    json_error_t jerr;
    p->root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!p->root) {
        if (json_error_code(&jerr) == json_error_invalid_utf8)
            return parser_error(p, -1, "invalid UTF-8 (column %d); JSON must be UTF-8",
                                jerr.column);
        if (json_error_code(&jerr) == json_error_out_of_memory)
            return parser_error(p, -2, "out of memory");
        return parser_error(p, -1, "invalid JSON (column %d): %s", jerr.column, jerr.text);
    }
    if (!json_is_object(p->root))
        return parser_error(p, -1, "expected a JSON object {\"%s\": ..., \"%s\": ...}, found %s",
                            f->id_field, f->text_field, json_type_name(p->root));
    if (f->strict) {
        const char *key;
        json_t *value;
        json_object_foreach(p->root, key, value)
        {
            if (!is_known_member(p, key))
                return parser_error(
                    p, -1, "unexpected member '%s' (--strict allows only %s, %s%s%s)",
                    excerpt(key, strlen(key), shown), f->id_field, f->text_field,
                    f->meta_fields ? ", " : " and ", f->meta_fields ? p->meta_list : "meta");
        }
    }
    json_t *id = get_field(p->root, f->id_field);
    json_t *text = get_field(p->root, f->text_field);
    if (!id && f->id_from_line) {
        int n = snprintf(p->id_buf, sizeof p->id_buf, "%s:%llu", file, lineno);
        if (n < 0 || (size_t)n >= sizeof p->id_buf)
            n = INPUT_MAX_ID_BYTES + 1; /* rejected by the check below */
        rec->id = p->id_buf;
        rec->id_len = (size_t)n;
    } else if (!id) {
        return parser_error(p, -1,
                            "missing member \"%s\" (--id-field NAME picks another member, "
                            "--id-from-line makes ids FILE:LINE)",
                            f->id_field);
    } else if (json_is_string(id)) {
        rec->id = json_string_value(id);
        rec->id_len = json_string_length(id);
    } else if (json_is_integer(id)) {
        int n =
            snprintf(p->id_buf, sizeof p->id_buf, "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        rec->id = p->id_buf;
        rec->id_len = (size_t)n;
        rec->id_is_integer = 1;
    } else {
        return parser_error(p, -1, "\"%s\" must be a string or an integer, not %s", f->id_field,
                            json_type_name(id));
    }
    const char *why = input_check_id(rec->id, rec->id_len);
    if (why)
        return parser_error(p, -1, "%s: '%s'", why, excerpt(rec->id, rec->id_len, shown));
    json_t *fp = text ? NULL : json_object_get(p->root, "fp");
    if (fp) {
        /* No text, a fingerprint: stored as given (what `export --json`
         * writes). */
        if (!json_is_string(fp) || json_string_length(fp) != 16 ||
            cli_parse_hex64(json_string_value(fp), &rec->fingerprint) != 0)
            return parser_error(p, -1, "\"fp\" must be a string of 16 hex digits");
        rec->has_fp = 1;
        json_t *sk = json_object_get(p->root, "sketch");
        if (sk) {
            const char *hex = json_is_string(sk) ? json_string_value(sk) : NULL;
            size_t n = hex ? json_string_length(sk) : 0;
            if (!hex || n == 0 || n % 2 || n / 2 > sizeof p->sketch_buf)
                return parser_error(p, -1, "\"sketch\" must be a string of 2 to %u hex digits",
                                    2 * SIMSTORE_SKETCH_MAX_BYTES);
            for (size_t i = 0; i < n / 2; i++) {
                int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
                if (hi < 0 || lo < 0)
                    return parser_error(p, -1, "\"sketch\" must be hex digits");
                p->sketch_buf[i] = (uint8_t)(hi << 4 | lo);
            }
            rec->sketch = p->sketch_buf;
            rec->sketch_len = n / 2;
        }
    } else if (!text) {
        return parser_error(p, -1, "missing member \"%s\"%s", f->text_field,
                            strcmp(f->text_field, "text") == 0
                                ? " (--text-field NAME picks another member, or \"fp\" "
                                  "gives a fingerprint)"
                                : "");
    } else if (!json_is_string(text)) {
        return parser_error(p, -1, "\"%s\" must be a string, not %s", f->text_field,
                            json_type_name(text));
    } else {
        rec->text = json_string_value(text);
        rec->text_len = json_string_length(text);
    }
    if (!f->meta_fields) {
        json_t *meta = json_object_get(p->root, "meta");
        if (meta) {
            if (dump_meta(p, meta))
                return -2;
            rec->meta = p->meta;
        }
        return 1;
    }
    json_t *obj = json_object();
    if (!obj)
        return parser_error(p, -2, "out of memory");
    for (size_t i = 0; i < p->meta_count; i++) {
        json_t *v = get_field(p->root, p->meta_names[i]);
        if (v && json_object_set(obj, p->meta_names[i], v) != 0) {
            json_decref(obj);
            return parser_error(p, -2, "out of memory");
        }
    }
    int rc = json_object_size(obj) ? dump_meta(p, obj) : 0;
    if (rc == 0 && json_object_size(obj))
        rec->meta = p->meta;
    json_decref(obj);
    return rc ? -2 : 1;
}

static int parse_fp_line(input_parser *p, const char *line, size_t len, input_record *rec)
{
    char shown[200];
    const char *tab = memchr(line, '\t', len);
    if (!tab)
        return parser_error(p, -1, "expected %s, found no tab: '%s'",
                            p->format == INPUT_FP_ID ? "HEX16<TAB>id" : "id<TAB>HEX16",
                            excerpt(line, len, shown));
    const char *hex, *id;
    size_t hex_len, id_len;
    if (p->format == INPUT_FP_ID) {
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
        return parser_error(p, -1, "more than two tab-separated fields");
    char hexz[17];
    uint64_t fp = 0;
    int hex_ok = hex_len == 16;
    if (hex_ok) {
        memcpy(hexz, hex, 16);
        hexz[16] = '\0';
        hex_ok = cli_parse_hex64(hexz, &fp) == 0;
    }
    if (!hex_ok)
        return parser_error(p, -1, "bad fingerprint '%s': expected 16 hex digits",
                            excerpt(hex, hex_len, shown));
    const char *why = input_check_id(id, id_len);
    if (why)
        return parser_error(p, -1, "%s: '%s'", why, excerpt(id, id_len, shown));
    rec->id = id;
    rec->id_len = id_len;
    rec->fingerprint = fp;
    return 1;
}

int input_parse_line(input_parser *p, const char *text, size_t len, const char *file,
                     unsigned long long line, input_record *rec)
{
    json_decref(p->root);
    p->root = NULL;
    p->error[0] = '\0';
    memset(rec, 0, sizeof *rec);
    rec->file = file;
    rec->line = line;
    if (p->format == INPUT_JSONL)
        return parse_jsonl(p, text, len, file, line, rec);
    return parse_fp_line(p, text, len, rec);
}

int input_trim_line(const char **text, size_t *len, int first_line)
{
    if (first_line && *len >= 3 && memcmp(*text, "\xEF\xBB\xBF", 3) == 0) {
        *text += 3;
        *len -= 3;
    }
    for (size_t i = 0; i < *len; i++)
        if ((*text)[i] != ' ' && (*text)[i] != '\t' && (*text)[i] != '\r')
            return 0;
    return 1;
}

/* ---- the reader ------------------------------------------------------- */

int input_set_fields(input_reader *r, const input_fields *fields)
{
    r->fields = *fields;
    return 0;
}

int input_next(input_reader *r, input_record *rec)
{
    release_record(r);
    r->error[0] = '\0';
    memset(rec, 0, sizeof *rec);
    rec->file = r->name;
    if (r->format == INPUT_PLAIN)
        return next_plain(r, rec);
    if (!r->parser && input_parser_new(&r->parser, r->format, &r->fields) != 0)
        return set_error(r, -2, "out of memory");
    for (;;) {
        size_t len;
        int got = cli_lines_next(&r->lines, &len);
        if (got < 0) /* lineno is the line that was being read */
            return set_error(r, -2, "%s", cli_lines_error(&r->lines));
        if (got == 0)
            return 0;
        const char *line = r->lines.line;
        /* Blank lines (such as a trailing one) are not records. */
        if (input_trim_line(&line, &len, r->lines.lineno == 1))
            continue;
        int rc = input_parse_line(r->parser, line, len, r->name, r->lines.lineno, rec);
        if (rc != 1)
            return set_error(r, rc, "%s", input_parser_error(r->parser));
        return 1;
    }
}
