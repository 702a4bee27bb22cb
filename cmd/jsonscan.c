/* jsonscan.c: the common JSON Lines record read in one pass, without a
 * document tree (jsonscan.h). What it accepts is a subset of what jansson
 * 2.14 accepts under JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, and it gives
 * the same values: the rules below follow jansson's lexer, parser and
 * dumper (reals in the metadata printed as its jsonp_dtostr prints them),
 * and tests/text/test_input.c holds every line of its generated
 * and mutated corpus to both readers (as does fuzz_jsonl_scan). */
#include "jsonscan.h"

#include "cli.h"

#include <langinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64      /* jansson allows 2048 */
#define MAX_MEMBERS 32    /* duplicate names are looked for pairwise */
#define MAX_INT_DIGITS 18 /* below 2^63: jansson refuses what overflows */
#define MAX_REAL_BYTES 40 /* with at most 2 exponent digits: far from */
#define MAX_EXP_DIGITS 2  /* overflowing a double, which jansson refuses */

enum { V_STRING = 1, V_INTEGER, V_REAL, V_LITERAL, V_CONTAINER };

typedef struct cur {
    const unsigned char *p, *end;
    unsigned char *w; /* where the next string is decoded */
} cur;

static void skip_ws(cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int is_digit(unsigned ch)
{
    return ch - '0' < 10;
}

/* Nonzero when some byte of x is '"', '\\', below 0x20 or above 0x7F
 * (never zero when one is; sometimes nonzero when none is). */
static uint64_t special_bytes(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    return (x | ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
}

static int hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned ch = p[i], lower = ch | 0x20, d;
        if (is_digit(ch))
            d = ch - '0';
        else if (lower >= 'a' && lower <= 'f')
            d = lower - 'a' + 10;
        else
            return 0;
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

static unsigned char *put_utf8(unsigned char *w, unsigned cp)
{
    if (cp < 0x80) {
        *w++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *w++ = (unsigned char)(0xC0 | cp >> 6);
        *w++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *w++ = (unsigned char)(0xE0 | cp >> 12);
        *w++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        *w++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *w++ = (unsigned char)(0xF0 | cp >> 18);
        *w++ = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        *w++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        *w++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    return w;
}

/* The escape at p ('\\' first, p < end): its code point (a surrogate pair
 * joined) and length in *n; 0 for what jansson refuses (an unknown escape,
 * bad hex, a lone or reversed surrogate). \u0000 is a NUL byte, as
 * JSON_ALLOW_NUL has it. */
static int escape_at(const unsigned char *p, const unsigned char *end, unsigned *cp, size_t *n)
{
    if (end - p < 2)
        return 0;
    static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
    for (size_t i = 0; i < sizeof simple - 1; i += 2) {
        if (p[1] == (unsigned char)simple[i]) {
            *cp = (unsigned char)simple[i + 1];
            *n = 2;
            return 1;
        }
    }
    unsigned hi, lo;
    if (p[1] != 'u' || end - p < 6 || !hex4(p + 2, &hi) || (hi >= 0xDC00 && hi <= 0xDFFF))
        return 0;
    if (hi < 0xD800 || hi > 0xDBFF) {
        *cp = hi;
        *n = 6;
        return 1;
    }
    if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || !hex4(p + 8, &lo) || lo < 0xDC00 ||
        lo > 0xDFFF)
        return 0;
    *cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
    *n = 12;
    return 1;
}

/* The string whose opening quote is just behind c->p, decoded to c->w
 * (which stays where it is: the caller keeps the string by moving it). Its
 * decoded length goes to *len, whether it held an escape to *escaped. 0 for
 * what jansson refuses: no closing quote, a control character, bytes that
 * are not UTF-8, a bad escape. Decoding never outgrows the raw bytes. */
static int scan_string(cur *c, size_t *len, int *escaped)
{
    const unsigned char *p = c->p, *end = c->end;
    unsigned char *w = c->w;
    int esc = 0;
    for (;;) {
        while (end - p >= 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            if (special_bytes(x))
                break;
            memcpy(w, &x, 8);
            p += 8;
            w += 8;
        }
        if (p == end)
            return 0;
        unsigned ch = *p;
        if (ch == '"') {
            p++;
            break;
        }
        if (ch < 0x20)
            return 0;
        if (ch >= 0x80) {
            size_t n = cli_utf8_sequence(p, (size_t)(end - p));
            if (n == 0)
                return 0;
            memcpy(w, p, n);
            w += n;
            p += n;
        } else if (ch != '\\') {
            *w++ = (unsigned char)ch;
            p++;
        } else {
            unsigned cp;
            size_t n;
            if (!escape_at(p, end, &cp, &n))
                return 0;
            w = put_utf8(w, cp);
            p += n;
            esc = 1;
        }
    }
    *len = (size_t)(w - c->w);
    *escaped = esc;
    c->p = p;
    return 1;
}

/* A number at c->p by the JSON grammar, *kind V_INTEGER or V_REAL; 0 for
 * what jansson refuses (leading zeros, a bare sign, point or exponent) and
 * for what this reader leaves to it: integers of more than 18 digits,
 * reals of more than 40 bytes or 2 exponent digits. */
static int scan_number(cur *c, int *kind)
{
    const unsigned char *p = c->p, *end = c->end, *start = p;
    if (p < end && *p == '-')
        p++;
    const unsigned char *digits = p;
    if (p == end)
        return 0;
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p))
            return 0;
    } else if (is_digit(*p)) {
        while (p < end && is_digit(*p))
            p++;
    } else {
        return 0;
    }
    size_t int_digits = (size_t)(p - digits);
    int real = 0;
    if (p < end && *p == '.') {
        real = 1;
        p++;
        if (p == end || !is_digit(*p))
            return 0;
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        real = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const unsigned char *exp = p;
        while (p < end && is_digit(*p))
            p++;
        if (p == exp || p - exp > MAX_EXP_DIGITS)
            return 0;
    }
    if (real ? (size_t)(p - start) > MAX_REAL_BYTES : int_digits > MAX_INT_DIGITS)
        return 0;
    *kind = real ? V_REAL : V_INTEGER;
    c->p = p;
    return 1;
}

/* The member names of one object, to refuse a repeated one as jansson does
 * (JSON_REJECT_DUPLICATES). Names hold no escapes here, so equal bytes are
 * equal names. */
typedef struct names {
    const unsigned char *at[MAX_MEMBERS];
    size_t len[MAX_MEMBERS];
    size_t n;
} names;

/* A member name at c->p and the colon after it; 0 for a name with an
 * escape, a repeated name, or more than MAX_MEMBERS. */
static int scan_name(cur *c, names *seen, const unsigned char **name, size_t *len)
{
    if (c->p == c->end || *c->p != '"')
        return 0;
    c->p++;
    const unsigned char *at = c->p;
    int escaped;
    if (!scan_string(c, len, &escaped) || escaped || seen->n == MAX_MEMBERS)
        return 0;
    for (size_t i = 0; i < seen->n; i++)
        if (seen->len[i] == *len && memcmp(seen->at[i], at, *len) == 0)
            return 0;
    seen->at[seen->n] = at;
    seen->len[seen->n++] = *len;
    *name = at;
    skip_ws(c);
    if (c->p == c->end || *c->p != ':')
        return 0;
    c->p++;
    skip_ws(c);
    return 1;
}

static int scan_value(cur *c, int depth, int *kind, size_t *slen);

/* The object or array at c->p, every value in it checked. */
static int scan_container(cur *c, int depth, int *kind)
{
    int object = *c->p == '{';
    unsigned char close = object ? '}' : ']';
    names seen;
    seen.n = 0;
    *kind = V_CONTAINER;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 1;
    }
    for (;;) {
        const unsigned char *name;
        size_t name_len, slen;
        int k;
        if (object && !scan_name(c, &seen, &name, &name_len))
            return 0;
        if (!scan_value(c, depth, &k, &slen))
            return 0;
        skip_ws(c);
        if (c->p == c->end)
            return 0;
        if (*c->p == close) {
            c->p++;
            return 1;
        }
        if (*c->p != ',')
            return 0;
        c->p++;
        skip_ws(c);
    }
}

/* One value at c->p: a string's decoded length in *slen. */
static int scan_value(cur *c, int depth, int *kind, size_t *slen)
{
    if (c->p == c->end)
        return 0;
    unsigned ch = *c->p;
    if (ch == '"') {
        int escaped;
        c->p++;
        *kind = V_STRING;
        return scan_string(c, slen, &escaped);
    }
    if (ch == '{' || ch == '[')
        return depth < MAX_DEPTH && scan_container(c, depth + 1, kind);
    static const char *const literals[] = {"true", "false", "null"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(literals[i]);
        if (ch == (unsigned char)literals[i][0]) {
            if ((size_t)(c->end - c->p) < n || memcmp(c->p, literals[i], n) != 0)
                return 0;
            c->p += n;
            *kind = V_LITERAL;
            return 1;
        }
    }
    return scan_number(c, kind);
}

/* ---- the metadata, dumped as json_dumpb(JSON_COMPACT | JSON_ENCODE_ANY) -- */

/* The string at c->p (already checked), as jansson's dump writes it:
 * '"' and '\\' escaped, control characters as \b \f \n \r \t or \u00XX,
 * everything else as UTF-8. */
static void dump_string(cur *c, unsigned char **o)
{
    unsigned char *w = *o;
    *w++ = '"';
    c->p++;
    for (;;) {
        unsigned ch = *c->p;
        if (ch == '"')
            break;
        if (ch != '\\') {
            *w++ = (unsigned char)ch;
            c->p++;
            continue;
        }
        unsigned cp;
        size_t n;
        escape_at(c->p, c->end, &cp, &n);
        c->p += n;
        if (cp == '"' || cp == '\\') {
            *w++ = '\\';
            *w++ = (unsigned char)cp;
        } else if (cp < 0x20) {
            static const char named[] = "\bb\ff\nn\rr\tt";
            const char *e = cp ? memchr(named, (int)cp, sizeof named - 1) : NULL;
            *w++ = '\\';
            if (e && (e - named) % 2 == 0) {
                *w++ = (unsigned char)e[1];
            } else {
                static const char hex[] = "0123456789ABCDEF";
                memcpy(w, "u00", 3);
                w[3] = (unsigned char)hex[cp >> 4];
                w[4] = (unsigned char)hex[cp & 15];
                w += 5;
            }
        } else {
            w = put_utf8(w, cp);
        }
    }
    c->p++;
    *w++ = '"';
    *o = w;
}

/* The real number of n bytes at p (checked: at most MAX_REAL_BYTES) as
 * jansson's dump writes it (jsonp_dtostr): strtod, "%.17g", ".0" appended
 * when neither a point nor an exponent shows, the exponent without '+' or
 * leading zeros. Returns the length written to out (at least 48 bytes), 0
 * when the locale's decimal point is not '.' (jansson then translates). */
static size_t dump_real(const unsigned char *p, size_t n, unsigned char *out)
{
    /* nl_langinfo, unlike localeconv, is safe beside other threads. */
    const char *point = nl_langinfo(RADIXCHAR);
    if (!point || strcmp(point, ".") != 0)
        return 0;
    char text[MAX_REAL_BYTES + 1], buf[48];
    memcpy(text, p, n);
    text[n] = '\0';
    int len = snprintf(buf, sizeof buf, "%.17g", strtod(text, NULL));
    if (len <= 0 || (size_t)len + 3 > sizeof buf)
        return 0;
    if (!strchr(buf, '.') && !strchr(buf, 'e')) {
        memcpy(buf + len, ".0", 3);
        len += 2;
    }
    char *e = strchr(buf, 'e');
    if (e) {
        char *start = e + 1, *end = e + 2;
        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        if (end != start) {
            memmove(start, end, (size_t)len - (size_t)(end - buf) + 1);
            len -= (int)(end - start);
        }
    }
    memcpy(out, buf, (size_t)len);
    return (size_t)len;
}

/* The value at c->p (already checked) into *o without white space; 0 for
 * -0 (printed as 0), which this reader leaves to jansson, and for a real
 * dump_real does not write. */
static int dump_value(cur *c, unsigned char **o)
{
    unsigned ch = *c->p;
    if (ch == '"') {
        dump_string(c, o);
        return 1;
    }
    if (ch == '{' || ch == '[') {
        unsigned char close = ch == '{' ? '}' : ']';
        *(*o)++ = (unsigned char)ch;
        c->p++;
        skip_ws(c);
        for (int first = 1;; first = 0) {
            if (*c->p == close) {
                c->p++;
                *(*o)++ = close;
                return 1;
            }
            if (!first) {
                *(*o)++ = ',';
                c->p++;
                skip_ws(c);
            }
            if (ch == '{') {
                dump_string(c, o);
                skip_ws(c);
                c->p++;
                *(*o)++ = ':';
                skip_ws(c);
            }
            if (!dump_value(c, o))
                return 0;
            skip_ws(c);
        }
    }
    const unsigned char *start = c->p;
    int kind = V_LITERAL;
    if (ch == 't' || ch == 'n')
        c->p += 4;
    else if (ch == 'f')
        c->p += 5;
    else
        scan_number(c, &kind);
    size_t n = (size_t)(c->p - start);
    if (kind == V_REAL) {
        size_t w = dump_real(start, n, *o);
        *o += w;
        return w > 0;
    }
    if (n == 2 && start[0] == '-' && start[1] == '0')
        return 0;
    memcpy(*o, start, n);
    *o += n;
    return 1;
}

/* ---- the record ------------------------------------------------------------ */

static int is_name(const unsigned char *at, size_t len, const char *name)
{
    return strlen(name) == len && memcmp(at, name, len) == 0;
}

int jsonscan_read(jsonscan *s, const char *line, size_t len, const char *id_name,
                  const char *text_name, jsonscan_record *rec)
{
    memset(rec, 0, sizeof *rec);
    if (cli_grow((void **)&s->buf, &s->cap, len + 1, 1, 4096))
        return -1;
    cur c = {(const unsigned char *)line, (const unsigned char *)line + len,
             (unsigned char *)s->buf};
    const unsigned char *meta = NULL, *meta_end = NULL;
    names seen;
    seen.n = 0;
    skip_ws(&c);
    if (c.p == c.end || *c.p != '{')
        return 0;
    c.p++;
    skip_ws(&c);
    for (;;) {
        const unsigned char *name;
        size_t name_len, slen = 0;
        int kind;
        if (!scan_name(&c, &seen, &name, &name_len))
            return 0;
        const unsigned char *value = c.p;
        unsigned char *decoded = c.w;
        if (!scan_value(&c, 1, &kind, &slen))
            return 0;
        if (is_name(name, name_len, id_name)) {
            if (kind == V_INTEGER) {
                slen = (size_t)(c.p - value);
                if (slen == 2 && value[0] == '-' && value[1] == '0')
                    return 0; /* -0: jansson's id is "0" */
                memcpy(decoded, value, slen);
                rec->id_is_integer = 1;
            } else if (kind != V_STRING) {
                return 0;
            }
            rec->id = (const char *)decoded;
            rec->id_len = slen;
            c.w = decoded + slen;
        } else if (is_name(name, name_len, text_name)) {
            if (kind != V_STRING)
                return 0;
            rec->text = (const char *)decoded;
            rec->text_len = slen;
            c.w = decoded + slen;
        } else if (is_name(name, name_len, "meta")) {
            meta = value;
            meta_end = c.p;
        }
        skip_ws(&c);
        if (c.p == c.end)
            return 0;
        if (*c.p == '}')
            break;
        if (*c.p != ',')
            return 0;
        c.p++;
        skip_ws(&c);
    }
    c.p++;
    skip_ws(&c);
    if (c.p != c.end || !rec->id || !rec->text)
        return 0;
    if (meta) {
        /* Compact output is never longer than the checked input, but for
         * reals: at most 24 bytes each ("%.17g": a sign, 17 digits, a point
         * and an exponent), from at least 3 bytes of input ("1e5", "0.1"). */
        if (cli_grow((void **)&s->meta, &s->meta_cap, (size_t)(meta_end - meta) * 8 + 48, 1, 4096))
            return -1;
        cur m = {meta, meta_end, NULL};
        unsigned char *o = (unsigned char *)s->meta;
        if (!dump_value(&m, &o))
            return 0;
        *o = '\0';
        rec->meta = s->meta;
    }
    return 1;
}

void jsonscan_free(jsonscan *s)
{
    free(s->buf);
    free(s->meta);
    s->buf = s->meta = NULL;
    s->cap = s->meta_cap = 0;
}
