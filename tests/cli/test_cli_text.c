/* test_cli_text.c: cmd/cli.c's text helpers alone: cli_escape (what a
 * message may print of an id or a name read from input) and cli_plural. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli.h"

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
    assert_string_equal(ESC("\xc2\xa0"), "\xc2\xa0");     /* U+00A0: printable */
    assert_string_equal(ESC("\xc2\x9b" "1m"), "\\xC2\\x9B1m"); /* U+009B: CSI */
    assert_string_equal(ESC("\x9b"), "\\x9B");             /* a lone C1 byte */
    assert_string_equal(ESC("\xc0\xaf"), "\\xC0\\xAF");    /* overlong */
    assert_string_equal(ESC("\xed\xa0\x80"), "\\xED\\xA0\\x80"); /* surrogate */
    assert_string_equal(ESC("\xf4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80"); /* > U+10FFFF */
    assert_string_equal(ESC("\xe4\xb8"), "\\xE4\\xB8");    /* cut short */
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
