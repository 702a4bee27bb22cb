/* test_cli_text.c: cmd/cli.c's text helpers alone: cli_escape (what a
 * message may print of an id or a name read from input) and cli_plural. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *esc(const char *s, size_t len, size_t size)
{
    static char buf[256];
    assert_true(size <= sizeof buf);
    memset(buf, 'Z', sizeof buf);
    const char *r = cli_escape(s, len, buf, size);
    assert_ptr_equal(r, buf);
    assert_true(strlen(buf) < size);
    return buf;
}

#define ESC(lit) esc(lit, sizeof lit - 1, 256)

static void test_cli_escape__controls_become_hex(void **state)
{
    (void)state;
    assert_string_equal(ESC("plain id-1"), "plain id-1");
    assert_string_equal(ESC("a\tb\nc\rd"), "a\\x09b\\x0Ac\\x0Dd");
    assert_string_equal(ESC("\033[31mred\033[0m"), "\\x1B[31mred\\x1B[0m");
    assert_string_equal(ESC("del\x7f"), "del\\x7F");
    assert_string_equal(esc("a\0b", 3, 256), "a\\x00b");
    /* Backslashes stay: escaping twice changes nothing. */
    assert_string_equal(ESC("C:\\dir"), "C:\\dir");
    assert_string_equal(ESC("\\x1B"), "\\x1B");
}

static void test_cli_escape__utf8_kept_c1_and_invalid_escaped(void **state)
{
    (void)state;
    assert_string_equal(ESC("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80"),
                        "caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80");
    assert_string_equal(ESC("\xc2\xa0"), "\xc2\xa0"); /* U+00A0: printable */
    assert_string_equal(ESC("\xc2\x9b"
                            "1m"),
                        "\\xC2\\x9B1m");                                  /* U+009B: CSI */
    assert_string_equal(ESC("\x9b"), "\\x9B");                            /* a lone C1 byte */
    assert_string_equal(ESC("\xc0\xaf"), "\\xC0\\xAF");                   /* overlong */
    assert_string_equal(ESC("\xed\xa0\x80"), "\\xED\\xA0\\x80");          /* surrogate */
    assert_string_equal(ESC("\xf4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80"); /* > U+10FFFF */
    assert_string_equal(ESC("\xe4\xb8"), "\\xE4\\xB8");                   /* cut short */
}

static void test_cli_escape__truncates_whole_pieces(void **state)
{
    (void)state;
    assert_string_equal(esc("abcdef", 6, 7), "abcdef");
    assert_string_equal(esc("abcdefg", 7, 7), "abc...");
    assert_string_equal(esc("\033\033\033", 3, 12), "\\x1B\\x1B...");
    assert_string_equal(esc("\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad", 9, 9), "\xe4\xb8\xad...");
    assert_string_equal(esc("abc", 3, 3), ".."); /* no room for more */
    assert_string_equal(esc("abc", 3, 2), ".");
    assert_string_equal(esc("abc", 3, 1), "");
    char big[SIMSTORE_MAX_ID_BYTES], out[CLI_ESCAPED_ID_BYTES];
    memset(big, 0x1b, sizeof big);
    cli_escape(big, sizeof big, out, sizeof out);
    assert_int_equal(strlen(out), 4 * SIMSTORE_MAX_ID_BYTES); /* any id fits whole */
}

/* cli_json_string of n bytes, as a C string. */
static char *json_of(const char *s, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    cli_json_string(f, s, n);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_cli_json_string__valid_json_whatever_the_bytes(void **state)
{
    (void)state;
    char *j = json_of("a\"b\\c\td\x01\x7f", 9);
    assert_string_equal(j, "\"a\\\"b\\\\c\\u0009d\\u0001\\u007f\"");
    free(j);
    /* UTF-8 of every length as it is; a NUL inside; non-UTF-8 bytes, an
     * overlong form, a surrogate and a truncated sequence as U+FFFD. */
    j = json_of("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 9);
    assert_string_equal(j, "\"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\"");
    free(j);
    j = json_of("x\0y", 3);
    assert_string_equal(j, "\"x\\u0000y\"");
    free(j);
    j = json_of("caf\xe9|\xc0\xaf|\xed\xa0\x80|\xe4\xb8", 14);
    assert_string_equal(j, "\"caf\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\"");
    free(j);
}

static void test_cli_utf8_sequence__the_one_rule(void **state)
{
    (void)state;
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"a", 1), 1);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\xc2\x80", 2), 2);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\xef\xbf\xbd", 3), 3);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\xf4\x8f\xbf\xbf", 4), 4);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\xf4\x90\x80\x80", 4), 0);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\xe0\x80\x80", 3), 0);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\xed\xa0\x80", 3), 0);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\xc3", 1), 0);
    assert_int_equal(cli_utf8_sequence((const unsigned char *)"\x80", 1), 0);
}

static void test_cli_plural__singular_only_for_one(void **state)
{
    (void)state;
    assert_string_equal(CLI_NOUN(0, "document"), "documents");
    assert_string_equal(CLI_NOUN(1, "document"), "document");
    assert_string_equal(CLI_NOUN(2, "table file"), "table files");
    assert_string_equal(cli_plural(1, "fps entry", "fps entries"), "fps entry");
    assert_string_equal(cli_plural(7, "fps entry", "fps entries"), "fps entries");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_escape__controls_become_hex),
        cmocka_unit_test(test_cli_escape__utf8_kept_c1_and_invalid_escaped),
        cmocka_unit_test(test_cli_escape__truncates_whole_pieces),
        cmocka_unit_test(test_cli_plural__singular_only_for_one),
        cmocka_unit_test(test_cli_json_string__valid_json_whatever_the_bytes),
        cmocka_unit_test(test_cli_utf8_sequence__the_one_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
