/* test_input.c: cmd/input.c, the record reader of the simstore commands:
 * JSON Lines, fingerprint lines and plain files, and the FILE:LINE message of
 * every malformed record. */
#include "testutil.h"

#include "input.h"

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
    expect(INPUT_JSONL,
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
    snprintf(line, sizeof line, "{\"id\":\"%.511s\",\"text\":\"t\"}\n{\"id\":\"%s\",\"text\":\"t\"}\n",
             id, id);
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
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
