/* fuzz_jsonl_scan.c: libFuzzer target for the one-pass JSON Lines reader
 * (cmd/jsonscan.c). Each input is one line given to the record parser twice:
 * as the commands use it (the one-pass reader first, jansson for what it
 * leaves) and with jansson only. Both must give the same answer: the same
 * id, text and metadata, or the same message; and the one-pass reader must
 * never read outside the line (a heap copy of exactly its bytes).
 * Corpus: tests/fuzz/corpus/jsonl_scan/. */
#include "input.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static input_parser *scan, *jansson;
    if (!scan) {
        if (input_parser_new(&scan, INPUT_JSONL, NULL) ||
            input_parser_new(&jansson, INPUT_JSONL, NULL))
            abort();
        input_parser_jansson_only(jansson);
    }
    char *line = malloc(size ? size : 1);
    if (!line)
        abort();
    if (size)
        memcpy(line, data, size);
    input_record a, b;
    int ra = input_parse_line(scan, line, size, "f", 1, &a);
    int rb = input_parse_line(jansson, line, size, "f", 1, &b);
    if (ra != rb)
        abort();
    if (ra == 1) {
        if (a.id_len != b.id_len || memcmp(a.id, b.id, a.id_len) != 0 ||
            a.id_is_integer != b.id_is_integer || a.text_len != b.text_len ||
            (a.text_len && memcmp(a.text, b.text, a.text_len) != 0) || !a.meta != !b.meta ||
            (a.meta && strcmp(a.meta, b.meta) != 0) || a.has_fp != b.has_fp)
            abort();
    } else if (strcmp(input_parser_error(scan), input_parser_error(jansson)) != 0) {
        abort();
    }
    free(line);
    return 0;
}
