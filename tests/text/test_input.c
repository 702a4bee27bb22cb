/* test_input.c: cmd/input.c, the record reader of the simstore commands:
 * JSON Lines, fingerprint lines and plain files, and the FILE:LINE message of
 * every malformed record; the one-pass JSON Lines reader (cmd/jsonscan.c)
 * against jansson on generated and mutated lines. */
#include "testutil.h"

#include "input.h"
#include "jsonscan.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char *tmpdir;

static int setup(void **state)
{
    (void)state;
    tmpdir = test_tmpdir("input");
    return tmpdir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    test_rmtree(tmpdir);
    free(tmpdir);
    return 0;
}

static char *write_tmp(const char *name, const char *data, size_t len)
{
    char *path = test_path(tmpdir, name);
    assert_int_equal(test_write_file(path, data, len), 0);
    return path;
}

/* Read every record of `data`; returns "id=...;" for good ones and
 * "!message;" for bad ones, concatenated. */
static char *read_all(input_format format, const char *data, size_t len)
{
    char *path = write_tmp("in", data, len);
    input_reader *r;
    assert_int_equal(input_open(&r, format, path), 0);
    size_t cap = 1 << 16, n = 0;
    char *out = calloc(1, cap);
    input_record rec;
    int got;
    while ((got = input_next(r, &rec)) != 0) {
        char item[2048];
        if (got == 1) {
            if (format == INPUT_FP_ID || format == INPUT_ID_FP)
                snprintf(item, sizeof item, "%.*s=%016llx@%llu;", (int)rec.id_len, rec.id,
                         (unsigned long long)rec.fingerprint, rec.line);
            else
                snprintf(item, sizeof item, "%.*s=%zu%s%s@%llu;", (int)rec.id_len, rec.id,
                         rec.text_len, rec.meta ? "+" : "", rec.meta ? rec.meta : "", rec.line);
        } else {
            const char *msg = input_error(r);
            /* Messages start with the path; show them from the ':' after it. */
            assert_memory_equal(msg, path, strlen(path));
            snprintf(item, sizeof item, "!%s;", msg + strlen(path));
            if (got == -2)
                break;
        }
        assert_true(n + strlen(item) < cap);
        memcpy(out + n, item, strlen(item) + 1);
        n += strlen(item);
    }
    input_close(r);
    free(path);
    return out;
}

static void expect(input_format format, const char *data, const char *want)
{
    char *got = read_all(format, data, strlen(data));
    if (strcmp(got, want) != 0)
        fail_msg("records:\n  got      %s\n  expected %s", got, want);
    free(got);
}

static void test_input_jsonl__good_records(void **state)
{
    (void)state;
    expect(
        INPUT_JSONL,
        "{\"id\": \"a\", \"text\": \"hello\"}\n"
        "{\"text\": \"x\\u0000y\", \"id\": 42}\n"
        "\n"
        "   \r\n"
        "{\"id\": -7, \"text\": \"\", \"meta\": {\"k\": [1, 2], \"s\": \"\\u00e9\"}}\r\n"
        "{\"id\": \"\\u4e2d\\u6587\", \"text\": \"\\u4e2d\", \"meta\": null}",
        "a=5@1;42=3@2;-7=0+{\"k\":[1,2],\"s\":\"\xC3\xA9\"}@5;\xE4\xB8\xAD\xE6\x96\x87=3+null@6;");
    /* A byte order mark before the first record is allowed. */
    expect(INPUT_JSONL, "\xEF\xBB\xBF{\"id\":\"b\",\"text\":\"t\"}\n", "b=1@1;");
    /* "fp" instead of the text (as `export --json` writes); the text wins
     * when both are given; a bad "fp" is refused. */
    expect(INPUT_JSONL,
           "{\"id\": \"f\", \"fp\": \"00000000000000ff\", \"meta\": 1}\n"
           "{\"id\": \"g\", \"fp\": \"00000000000000ff\", \"text\": \"abc\"}\n"
           "{\"id\": \"h\", \"fp\": \"ff\"}\n"
           "{\"id\": \"i\", \"fp\": 255}\n",
           "f=0+1@1;g=3@2;"
           "!:3: \"fp\" must be a string of 16 hex digits;"
           "!:4: \"fp\" must be a string of 16 hex digits;");
}

static void test_input_jsonl__malformed_records(void **state)
{
    (void)state;
    expect(INPUT_JSONL,
           "{\"id\": \"a\", \"text\": \"ok\"}\n"
           "{\"id\": \"b\", \"text\": \"unterminated}\n"
           "[1, 2]\n"
           "{\"text\": \"no id\"}\n"
           "{\"id\": \"c\"}\n"
           "{\"id\": \"d\", \"text\": \"t\", \"extra\": 1}\n"
           "{\"id\": 1.5, \"text\": \"t\"}\n"
           "{\"id\": null, \"text\": \"t\"}\n"
           "{\"id\": \"e\", \"text\": 5}\n"
           "{\"id\": \"\", \"text\": \"t\"}\n"
           "{\"id\": \"tab\\there\", \"text\": \"t\"}\n"
           "{\"id\": \"nl\\nhere\", \"text\": \"t\"}\n"
           "{\"id\": \"c1\\u0085\", \"text\": \"t\"}\n"
           "{\"id\": \"f\", \"id\": \"g\", \"text\": \"t\"}\n"
           "{\"id\": \"h\", \"text\": \"bad \xFF byte\"}\n"
           "{\"id\": \"z\", \"text\": \"still read\"}\n",
           "a=2@1;"
           "!:2: invalid JSON (column 34): premature end of input near '\"unterminated}';"
           "!:3: expected a JSON object {\"id\": ..., \"text\": ...}, found an array;"
           "!:4: missing member \"id\" (--id-field NAME picks another member, --id-from-line "
           "makes ids FILE:LINE);"
           "!:5: missing member \"text\" (--text-field NAME picks another member, or \"fp\" "
           "gives a fingerprint);"
           "d=1@6;" /* other members are ignored unless --strict */
           "!:7: \"id\" must be a string or an integer, not a number with a fraction or exponent;"
           "!:8: \"id\" must be a string or an integer, not null;"
           "!:9: \"text\" must be a string, not an integer;"
           "!:10: empty id: '';"
           "!:11: id contains a control character (tab, newline, ...): 'tab\\x09here';"
           "!:12: id contains a control character (tab, newline, ...): 'nl\\x0ahere';"
           "!:13: id contains a control character (U+0080..U+009F): 'c1\\u0085';"
           "!:14: invalid JSON (column 16): duplicate object key near '\"id\"';"
           "!:15: invalid UTF-8 (column 25); JSON must be UTF-8;"
           "z=10@16;");
}

static void test_input_jsonl__id_length(void **state)
{
    (void)state;
    char line[1200];
    char id[513];
    memset(id, 'i', 512);
    id[512] = '\0';
    snprintf(line, sizeof line,
             "{\"id\":\"%.511s\",\"text\":\"t\"}\n{\"id\":\"%s\",\"text\":\"t\"}\n", id, id);
    char *got = read_all(INPUT_JSONL, line, strlen(line));
    char want[1200];
    snprintf(want, sizeof want, "%.511s=1@1;!:2: id longer than 511 bytes: '%.40s...';", id, id);
    assert_string_equal(got, want);
    free(got);
}

static void test_input_jsonl__ten_megabyte_line(void **state)
{
    (void)state;
    size_t text_len = 10u << 20;
    char *line = malloc(text_len + 64);
    size_t n = (size_t)sprintf(line, "{\"id\":\"big\",\"text\":\"");
    memset(line + n, 'w', text_len);
    for (size_t i = n + 7; i < n + text_len; i += 8)
        line[i] = ' ';
    n += text_len;
    n += (size_t)sprintf(line + n, "\"}\n");
    char *got = read_all(INPUT_JSONL, line, n);
    char want[64];
    snprintf(want, sizeof want, "big=%zu@1;", text_len);
    assert_string_equal(got, want);
    free(got);
    free(line);
}

static void test_input_fingerprints__both_orders(void **state)
{
    (void)state;
    expect(INPUT_FP_ID,
           "0123456789abcdef\tdoc one\n"
           "FFFFFFFFFFFFFFFF\tcaps\n"
           "\n"
           "0123456789abcde\tshort\n"
           "0123456789abcdef0\tlong\n"
           "0123456789abcdeg\tnot hex\n"
           "no tab at all\n"
           "0123456789abcdef\t\n"
           "0123456789abcdef\tid\textra\n"
           "0x23456789abcdef\tprefix\n"
           "0000000000000001\tlast\r\n",
           "doc one=0123456789abcdef@1;caps=ffffffffffffffff@2;"
           "!:4: bad fingerprint '0123456789abcde': expected 16 hex digits;"
           "!:5: bad fingerprint '0123456789abcdef0': expected 16 hex digits;"
           "!:6: bad fingerprint '0123456789abcdeg': expected 16 hex digits;"
           "!:7: expected HEX16<TAB>id, found no tab: 'no tab at all';"
           "!:8: empty id: '';"
           "!:9: more than two tab-separated fields;"
           "!:10: bad fingerprint '0x23456789abcdef': expected 16 hex digits;"
           "last=0000000000000001@11;");
    expect(INPUT_ID_FP,
           "doc\t00000000000000ff\n"
           "00000000000000ff\tdoc\n",
           "doc=00000000000000ff@1;"
           "!:2: bad fingerprint 'doc': expected 16 hex digits;");
}

static void test_input_plain__whole_file(void **state)
{
    (void)state;
    char *got = read_all(INPUT_PLAIN, "line one\n\nline three\0with nul", 30);
    char *path = test_path(tmpdir, "in");
    char want[512];
    snprintf(want, sizeof want, "%s=30@0;", path);
    assert_string_equal(got, want);
    free(got);
    free(path);
    input_reader *r = (input_reader *)&want;
    errno = 0;
    assert_int_equal(input_open(&r, INPUT_PLAIN, "/nonexistent/simstore/file"), -1);
    assert_int_equal(errno, ENOENT);
    assert_null(r);
    assert_int_equal(input_open(&r, INPUT_JSONL, "/nonexistent/simstore/file"), -1);
    input_close(NULL);
}

static void test_input_ids__rules(void **state)
{
    (void)state;
    assert_null(input_check_id("doc-1", 5));
    assert_null(input_check_id("caf\xC3\xA9 \xE4\xB8\xAD", 9));
    assert_non_null(input_check_id("", 0));
    assert_non_null(input_check_id("a\tb", 3));
    assert_non_null(input_check_id("a\x7f", 2));
    assert_non_null(input_check_id("\xC2\x9F", 2));
    assert_null(input_check_id("\xC2\xA0", 2));
    assert_null(input_check_id("\xF0\x9F\x98\x80", 4));
    /* Not UTF-8: a stray continuation byte, a truncated sequence, an
     * overlong form, a surrogate, a value above U+10FFFF, Latin-1. */
    assert_string_equal(input_check_id("a\x80", 2), "id is not valid UTF-8");
    assert_non_null(input_check_id("\xE4\xB8", 2));
    assert_non_null(input_check_id("\xC0\xAF", 2));
    assert_non_null(input_check_id("\xED\xA0\x80", 3));
    assert_non_null(input_check_id("\xF4\x90\x80\x80", 4));
    assert_non_null(input_check_id("caf\xE9", 4));
}

/* Parse one line with the given fields; "id=...[+meta][#int]" or "!message". */
static void expect_line(const input_fields *f, const char *line, const char *want)
{
    input_parser *p;
    assert_int_equal(input_parser_new(&p, INPUT_JSONL, f), 0);
    input_record rec;
    char got[1200];
    int rc = input_parse_line(p, line, strlen(line), "in.jsonl", 7, &rec);
    if (rc == 1)
        snprintf(got, sizeof got, "%.*s=%.*s%s%s%s", (int)rec.id_len, rec.id, (int)rec.text_len,
                 rec.text, rec.meta ? "+" : "", rec.meta ? rec.meta : "",
                 rec.id_is_integer ? "#int" : "");
    else
        snprintf(got, sizeof got, "!%s", input_parser_error(p));
    input_parser_free(p);
    if (strcmp(got, want) != 0)
        fail_msg("line %s:\n  got      %s\n  expected %s", line, got, want);
}

static void test_input_jsonl__fields(void **state)
{
    (void)state;
    input_fields f;
    input_fields_init(&f);
    /* Defaults: id, text, meta; C4-style extra members ignored. */
    expect_line(&f, "{\"id\": \"a\", \"text\": \"t\", \"url\": \"u\", \"timestamp\": 1}", "a=t");
    expect_line(&f, "{\"id\": 12, \"text\": \"t\"}", "12=t#int");
    expect_line(&f, "{\"id\": -5, \"text\": \"t\", \"meta\": [1]}", "-5=t+[1]#int");
    f.strict = 1;
    expect_line(&f, "{\"id\": \"a\", \"text\": \"t\", \"url\": \"u\"}",
                "!unexpected member 'url' (--strict allows only id, text and meta)");
    expect_line(&f, "{\"id\": \"a\", \"text\": \"t\", \"meta\": 1}", "a=t+1");
    /* Other names, nested names, and metadata picked from members. */
    input_fields_init(&f);
    f.id_field = "doc_id";
    f.text_field = "content";
    f.meta_fields = "url,source.name,missing";
    expect_line(&f,
                "{\"doc_id\": \"d\", \"content\": \"c\", \"url\": \"u\", "
                "\"source\": {\"name\": \"cc\", \"x\": 1}, \"meta\": 5}",
                "d=c+{\"url\":\"u\",\"source.name\":\"cc\"}");
    expect_line(&f, "{\"doc_id\": \"d\", \"content\": \"c\"}", "d=c");
    f.strict = 1;
    expect_line(&f, "{\"doc_id\": \"d\", \"content\": \"c\", \"source\": {}, \"url\": 1}",
                "d=c+{\"url\":1}");
    expect_line(&f, "{\"doc_id\": \"d\", \"content\": \"c\", \"meta\": 1}",
                "!unexpected member 'meta' (--strict allows only doc_id, content, "
                "url,source.name,missing)");
    input_fields_init(&f);
    f.id_field = "a.b";
    expect_line(&f, "{\"a\": {\"b\": \"nested\"}, \"text\": \"t\"}", "nested=t");
    expect_line(&f, "{\"a.b\": \"literal\", \"a\": {\"b\": \"nested\"}, \"text\": \"t\"}",
                "literal=t");
    expect_line(&f, "{\"a\": 3, \"text\": \"t\"}",
                "!missing member \"a.b\" (--id-field NAME picks another member, --id-from-line "
                "makes ids FILE:LINE)");
    /* Records without ids. */
    input_fields_init(&f);
    f.id_from_line = 1;
    expect_line(&f, "{\"text\": \"t\"}", "in.jsonl:7=t");
    expect_line(&f, "{\"id\": \"own\", \"text\": \"t\"}", "own=t");
    input_fields_init(&f);
    f.text_field = "body";
    expect_line(&f, "{\"id\": \"a\", \"text\": \"t\"}", "!missing member \"body\"");
}

/* ---- the one-pass reader against jansson -------------------------------- */

typedef struct gen {
    uint64_t s;
    char *b;
    size_t n, cap;
    int wild; /* also what jansson refuses and what the reader leaves to it */
} gen;

static uint64_t gen_next(gen *g)
{
    g->s ^= g->s << 13;
    g->s ^= g->s >> 7;
    g->s ^= g->s << 17;
    return g->s;
}

static unsigned below(gen *g, unsigned n)
{
    return (unsigned)(gen_next(g) % n);
}

static void put(gen *g, const char *p, size_t n)
{
    if (g->n + n + 1 > g->cap) {
        g->cap = (g->n + n + 1) * 2;
        g->b = realloc(g->b, g->cap);
        assert_non_null(g->b);
    }
    memcpy(g->b + g->n, p, n);
    g->n += n;
    g->b[g->n] = '\0';
}

static void puts_(gen *g, const char *p)
{
    put(g, p, strlen(p));
}

static void ws(gen *g)
{
    static const char *const spaces[] = {"", "", "", " ", "  ", "\t", "\r", "\n "};
    puts_(g, spaces[below(g, 8)]);
}

/* Rarely, one of the things jansson refuses inside a string. */
static void bad_in_string(gen *g)
{
    static const char *const bad[] = {
        "\\uD800",          "\\uDC00\\uD800", "\\uD83D\\u0041", "\\x",
        "\\u12G4",          "\\u00",          "\x01",           "\x1f",
        "\xC0\xAF",         "\xFF",           "\xE0\x80\x80",   "\xED\xA0\x80",
        "\xF4\x90\x80\x80", "\xE4\xB8",       "\xC3",           "\\",
    };
    puts_(g, bad[below(g, sizeof bad / sizeof bad[0])]);
}

static void gen_string(gen *g, int long_ok)
{
    static const char *const pieces[] = {
        "a",
        "Z",
        " ",
        "0",
        "/",
        "'",
        "~",
        "\x7F",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u0000",
        "\\u001f",
        "\\u001F",
        "\\u007f",
        "\\u00e9",
        "\\u00E9",
        "\\u2028",
        "\\uFFFF",
        "\\ud83d\\ude00",
        "\\uD83D\\uDE00",
        "\\u0022",
        "\\u005c",
        "\\u002F",
        "\xC3\xA9",
        "\xE4\xB8\xAD",
        "\xF0\x9F\x98\x80",
        "\xEF\xBF\xBF",
        "\xC2\x85",
    };
    puts_(g, "\"");
    unsigned n = long_ok && below(g, 4) == 0 ? below(g, 300) : below(g, 10);
    for (unsigned i = 0; i < n; i++) {
        if (g->wild && below(g, 400) == 0)
            bad_in_string(g);
        else if (below(g, 2))
            put(g, "abcdefghij klmnopqrstuvwxyz.,;:-" + below(g, 30), 1 + below(g, 3));
        else
            puts_(g, pieces[below(g, sizeof pieces / sizeof pieces[0])]);
    }
    puts_(g, "\"");
}

static void gen_number(gen *g)
{
    static const char *const numbers[] = {
        "0",
        "-0",
        "7",
        "-7",
        "42",
        "123456789012345678",
        "-123456789012345678",
        "1234567890123456789",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "1.5",
        "-0.0",
        "0.1",
        "1e5",
        "1E+2",
        "2.5e-3",
        "1e400",
        "-1e400",
        "1e-400",
        "1.e5",
        ".5",
        "1e",
        "01",
        "-",
        "+1",
        "1.0e+308",
        "12345678901234567890.5",
    };
    if (below(g, 3) == 0) {
        /* A random real: sign, digits, fraction, exponent. */
        char num[64];
        size_t k = 0;
        if (below(g, 3) == 0)
            num[k++] = '-';
        unsigned digits = 1 + below(g, 12);
        for (unsigned i = 0; i < digits; i++)
            num[k++] = (char)('0' + (i == 0 && digits > 1 ? 1 + below(g, 9) : below(g, 10)));
        int frac = below(g, 3) != 0, expo = below(g, 2);
        if (frac || !expo) {
            num[k++] = '.';
            for (unsigned i = 0, f = 1 + below(g, 18); i < f; i++)
                num[k++] = (char)('0' + below(g, 10));
        }
        if (expo) {
            num[k++] = below(g, 2) ? 'e' : 'E';
            if (below(g, 2))
                num[k++] = below(g, 2) ? '-' : '+';
            for (unsigned i = 0, e = 1 + below(g, g->wild ? 3 : 2); i < e; i++)
                num[k++] = (char)('0' + below(g, 10));
        }
        put(g, num, k);
        return;
    }
    /* The first 7 but -0 are integers the reader takes. */
    unsigned n = g->wild ? (unsigned)(sizeof numbers / sizeof numbers[0]) : 7;
    unsigned i;
    do
        i = below(g, n);
    while (!g->wild && i == 1);
    puts_(g, numbers[i]);
}

static void gen_value(gen *g, int depth);

static void gen_name(gen *g, unsigned i)
{
    if (!g->wild) {
        char name[16];
        snprintf(name, sizeof name, "\"n%u\"", i);
        puts_(g, name);
        return;
    }
    static const char *const names[] = {
        "\"id\"", "\"text\"",     "\"meta\"",    "\"url\"",         "\"a\"",   "\"b\"",
        "\"\"",   "\"i\\u0064\"", "\"\\u0000\"", "\"caf\xC3\xA9\"", "\"a b\"",
    };
    puts_(g, names[below(g, sizeof names / sizeof names[0])]);
}

static void gen_container(gen *g, int depth, int object)
{
    puts_(g, object ? "{" : "[");
    ws(g);
    unsigned n = below(g, 5);
    if (below(g, 50) == 0)
        n = 30 + below(g, 10); /* around the 32 members the reader looks over */
    for (unsigned i = 0; i < n; i++) {
        if (i) {
            ws(g);
            puts_(g, ",");
            ws(g);
        }
        if (object) {
            if (n > 8) {
                char name[16];
                snprintf(name, sizeof name, "\"m%u\"", i);
                puts_(g, name);
            } else {
                gen_name(g, i);
            }
            ws(g);
            puts_(g, ":");
            ws(g);
        }
        gen_value(g, depth + 1);
    }
    ws(g);
    puts_(g, object ? "}" : "]");
}

static void gen_value(gen *g, int depth)
{
    unsigned k = below(g, depth > 4 ? 6 : 8);
    if (k < 2)
        gen_string(g, 0);
    else if (k < 4)
        gen_number(g);
    else if (k < 6)
        puts_(g, (const char *const[]){"true", "false", "null", "nul",
                                       "truex"}[below(g, g->wild ? 5 : 3)]);
    else
        gen_container(g, depth, k == 6);
}

static void gen_record(gen *g)
{
    g->n = 0;
    put(g, "", 0);
    g->wild = below(g, 2);
    if (below(g, 200) == 0) {
        int deep = 60 + (int)below(g, 10); /* around the reader's 64 levels */
        puts_(g, "{\"id\":\"d\",\"text\":\"t\",\"meta\":");
        for (int i = 0; i < deep; i++)
            puts_(g, "[");
        for (int i = 0; i < deep; i++)
            puts_(g, "]");
        puts_(g, "}");
        return;
    }
    ws(g);
    if (g->wild && below(g, 100) == 0) {
        gen_value(g, 0);
        return;
    }
    puts_(g, "{");
    ws(g);
    /* The usual members in some order, maybe missing or repeated, plus
     * others. */
    unsigned order[6] = {0, 1, 2, 3, 4, 5};
    for (unsigned i = 5; i > 0; i--) {
        unsigned j = below(g, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int first = 1;
    for (unsigned i = 0; i < 6; i++) {
        unsigned m = order[i];
        if (g->wild && below(g, 8) == 0 && m < 3)
            continue; /* missing */
        if (m == 5 && (!g->wild || below(g, 4)))
            continue;
        if (!first) {
            ws(g);
            puts_(g, ",");
            ws(g);
        }
        first = 0;
        switch (m) {
        case 0:
            puts_(g, "\"id\"");
            ws(g);
            puts_(g, ":");
            ws(g);
            if (below(g, 3))
                gen_string(g, 0);
            else if (!g->wild || below(g, 4))
                gen_number(g);
            else
                gen_value(g, 1);
            break;
        case 1:
            puts_(g, "\"text\"");
            ws(g);
            puts_(g, ":");
            ws(g);
            if (!g->wild || below(g, 10))
                gen_string(g, 1);
            else
                gen_value(g, 1);
            break;
        case 2:
            puts_(g, "\"meta\":");
            gen_value(g, 1);
            break;
        case 3:
        case 4:
            gen_name(g, m);
            puts_(g, ":");
            ws(g);
            gen_value(g, 1);
            break;
        default:
            puts_(g, "\"id\":\"again\""); /* a repeated member */
            break;
        }
    }
    ws(g);
    puts_(g, "}");
    ws(g);
    if (g->wild && below(g, 100) == 0)
        puts_(g, below(g, 2) ? "x" : "{}");
}

/* Damage a few bytes of the line. */
static void mutate(gen *g)
{
    static const char bytes[] = {'"', '\\', ',', '}', '{', ':', ' ', 0, '\x80', 'x', '1', 'u'};
    unsigned times = 1 + below(g, 3);
    for (unsigned t = 0; t < times && g->n > 0; t++) {
        size_t at = below(g, (unsigned)g->n);
        switch (below(g, 4)) {
        case 0: g->b[at] = bytes[below(g, sizeof bytes)]; break;
        case 1:
            memmove(g->b + at, g->b + at + 1, g->n - at - 1);
            g->n--;
            break;
        case 2:
            put(g, " ", 1);
            memmove(g->b + at + 1, g->b + at, g->n - at - 1);
            g->b[at] = bytes[below(g, sizeof bytes)];
            break;
        default: g->n = at; break;
        }
    }
}

/* Both parsers must give the same answer for the line: the same record, or
 * the same message. Returns 1 when the one-pass reader took the line. */
static int same_answer(input_parser *scan, input_parser *jansson, jsonscan *js, const char *line,
                       size_t len)
{
    input_record a, b;
    int ra = input_parse_line(scan, line, len, "f", 1, &a);
    int rb = input_parse_line(jansson, line, len, "f", 1, &b);
    if (ra != rb)
        fail_msg("line '%.*s': %d with the one-pass reader (%s), %d with jansson (%s)", (int)len,
                 line, ra, input_parser_error(scan), rb, input_parser_error(jansson));
    if (ra == 1) {
        int same = a.id_len == b.id_len && memcmp(a.id, b.id, a.id_len) == 0 &&
                   a.id_is_integer == b.id_is_integer && a.text_len == b.text_len &&
                   (!a.text_len || memcmp(a.text, b.text, a.text_len) == 0) && !a.meta == !b.meta &&
                   (!a.meta || strcmp(a.meta, b.meta) == 0) && a.has_fp == b.has_fp;
        if (!same)
            fail_msg("line '%.*s': one-pass id '%.*s' text %zu meta %s, jansson id '%.*s' text %zu "
                     "meta %s",
                     (int)len, line, (int)a.id_len, a.id, a.text_len, a.meta ? a.meta : "-",
                     (int)b.id_len, b.id, b.text_len, b.meta ? b.meta : "-");
    } else if (strcmp(input_parser_error(scan), input_parser_error(jansson)) != 0) {
        fail_msg("line '%.*s': '%s' against jansson's '%s'", (int)len, line,
                 input_parser_error(scan), input_parser_error(jansson));
    }
    jsonscan_record r;
    return jsonscan_read(js, line, len, "id", "text", &r) == 1;
}

static void test_input_jsonl__one_pass_reader_equals_jansson(void **state)
{
    (void)state;
    input_parser *scan, *jansson;
    assert_int_equal(input_parser_new(&scan, INPUT_JSONL, NULL), 0);
    assert_int_equal(input_parser_new(&jansson, INPUT_JSONL, NULL), 0);
    input_parser_jansson_only(jansson);
    jsonscan js = {0};
    gen g = {0x9E3779B97F4A7C15u, NULL, 0, 0, 0};
    /* Lines that pin each rule. */
    static const char *const fixed[] = {
        "{\"id\":\"a\",\"text\":\"t\"}",
        "{\"id\":-0,\"text\":\"t\"}",
        "{\"id\":-5,\"text\":\"t\",\"meta\":-0}",
        "{\"id\":1,\"text\":\"t\",\"meta\":{\"x\":-1,\"y\":[true,false,null,\"\\u0001\\/\"]}}",
        "{\"id\":1,\"text\":\"t\",\"meta\":1.5}",
        "{\"id\":1,\"text\":\"t\",\"meta\":[1E5,0.1,-0.0,1e-5,2.5e+20,1e99,123456789.123456789]}",
        "{\"id\":1.5,\"text\":\"t\"}",
        "{\"id\":\"a\",\"text\":\"t\",\"id\":\"b\"}",
        "{\"id\":\"a\",\"text\":\"t\",\"m\":{\"k\":1,\"k\":2}}",
        "{\"id\":\"a\",\"text\":\"t\",\"m\":{\"k\":1,\"\\u006b\":2}}",
        "{\"id\":\"\",\"text\":\"t\"}",
        "{\"id\":\"a\\u0001\",\"text\":\"t\"}",
        "{\"id\":\"a\",\"text\":\"x\\u0000y\"}",
        "{\"id\":\"a\",\"text\":\"t\"} x",
        "{\"id\":\"a\",\"text\":\"t\"}  \t",
        "[{\"id\":\"a\",\"text\":\"t\"}]",
        "{\"id\":\"a\",\"text\":7}",
        "{\"id\":\"a\"}",
        "{\"id\":\"a\",\"fp\":\"00000000000000ff\"}",
        "{\"id\":\"a\",\"text\":\"t\",\"meta\":\"\\u00e9\\ud83d\\ude00\\u007f\\u001F\\b\"}",
        "",
        "{}",
        "{\"id\":\"a\",\"text\":\"t\",}",
        "{\"id\":\"a\",\"text\":\"t\",\"meta\":[1,]}",
        "{\"id\":\"a\" \"text\":\"t\"}",
    };
    size_t took = 0, lines = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++, lines++)
        took += (size_t)same_answer(scan, jansson, &js, fixed[i], strlen(fixed[i]));
    /* Generated records, a third of them damaged. */
    for (unsigned i = 0; i < 200000; i++, lines++) {
        gen_record(&g);
        if (below(&g, 4) == 0)
            mutate(&g);
        took += (size_t)same_answer(scan, jansson, &js, g.b, g.n);
    }
    /* The test means something only if the one-pass reader took many. */
    printf("one-pass reader took %zu of %zu lines\n", took, lines);
    assert_true(took > lines / 5);
    assert_true(took < lines);
    free(g.b);
    jsonscan_free(&js);
    input_parser_free(scan);
    input_parser_free(jansson);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_input_jsonl__good_records),
        cmocka_unit_test(test_input_jsonl__malformed_records),
        cmocka_unit_test(test_input_jsonl__id_length),
        cmocka_unit_test(test_input_jsonl__ten_megabyte_line),
        cmocka_unit_test(test_input_fingerprints__both_orders),
        cmocka_unit_test(test_input_plain__whole_file),
        cmocka_unit_test(test_input_ids__rules),
        cmocka_unit_test(test_input_jsonl__fields),
        cmocka_unit_test(test_input_jsonl__one_pass_reader_equals_jansson),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
