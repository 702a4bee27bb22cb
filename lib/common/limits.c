/* limits.c: format rules that several layers check, given one owner here (the
 * layer below all of them): the table block sizes (simstore_block_bytes_valid,
 * simstore.h), which the codec, table files, store records, builds and the
 * tool's --block-bytes all go through; the document id rule
 * (simstore_id_problem), which every writer of documents applies. */
#include "common/error.h"
#include "simstore.h"

#include <stdio.h>
#include <string.h>

int simstore_block_bytes_valid(uint64_t block_bytes)
{
    return block_bytes >= SIMSTORE_MIN_BLOCK_BYTES && block_bytes <= SIMSTORE_MAX_BLOCK_BYTES &&
           (block_bytes & (block_bytes - 1)) == 0;
}

/* The length of the well-formed UTF-8 sequence at s[0, n), or 0 (Unicode's
 * Table 3-7: the second byte's range excludes overlong forms, surrogates and
 * code points above U+10FFFF). */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return 0;
    size_t len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
    unsigned hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

const char *simstore_id_problem(const char *id, size_t len)
{
    if (!id || len == 0)
        return "empty id";
    if (len > SIMSTORE_MAX_ID_BYTES)
        return "id longer than 511 bytes";
    const unsigned char *s = (const unsigned char *)id;
    for (size_t i = 0; i < len;) {
        size_t step = utf8_sequence(s + i, len - i);
        if (step == 0)
            return "id is not valid UTF-8";
        i += step;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < 0x20 || s[i] == 0x7F)
            return "id contains a control character (tab, newline, ...)";
        /* C1 controls, U+0080..U+009F, are C2 80..C2 9F in UTF-8. */
        if (s[i] == 0xC2 && i + 1 < len && s[i + 1] <= 0x9F)
            return "id contains a control character (U+0080..U+009F)";
    }
    return NULL;
}

sims_excerpt_buf sims_excerpt(const void *bytes, size_t len)
{
    sims_excerpt_buf out;
    const unsigned char *s = (const unsigned char *)bytes;
    size_t n = 0;
    for (size_t i = 0; s && i < len && n < 180; i++) {
        unsigned char c = s[i];
        if (i == 40) {
            memcpy(out.text + n, "...", 3);
            n += 3;
            break;
        }
        if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\' || c == '"') {
            n += (size_t)snprintf(out.text + n, 8, "\\x%02x", c);
        } else if (c == 0xC2 && i + 1 < len && s[i + 1] >= 0x80 && s[i + 1] <= 0x9F) {
            /* A C1 control would act on the terminal showing the message. */
            n += (size_t)snprintf(out.text + n, 8, "\\u%04x", s[i + 1]);
            i++;
        } else if (c >= 0x80) {
            size_t seq = utf8_sequence(s + i, len - i);
            if (seq == 0) {
                n += (size_t)snprintf(out.text + n, 8, "\\x%02x", c);
            } else {
                memcpy(out.text + n, s + i, seq);
                n += seq;
                i += seq - 1;
            }
        } else {
            out.text[n++] = (char)c;
        }
    }
    out.text[n] = '\0';
    return out;
}
