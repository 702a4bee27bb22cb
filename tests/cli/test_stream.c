/* test_stream.c: cmd/stream.c (cli_stream) on inputs made here with zlib and
 * libzstd: round trips at sizes around the decompressor's chunk boundaries,
 * many members and frames, truncation at every length, every single-byte
 * corruption, and close stopping the producer early, even on a silent FIFO. */
#include "stream.h"

#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>
#include <zstd.h>

#define CHUNK ((size_t)256 << 10) /* stream.c's chunk size */

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = test_tmpdir("stream");
    return dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    test_rmtree(dir);
    free(dir);
    return 0;
}

/* Compressible text: words from a small vocabulary, seeded. */
static unsigned char *make_text(size_t n, uint64_t seed)
{
    static const char *const words[] = {"alpha ", "beta ", "gamma\n", "delta ", "x ", "\0 "};
    unsigned char *b = malloc(n ? n : 1);
    assert_non_null(b);
    test_rng r = {seed};
    size_t i = 0;
    while (i < n) {
        const char *w = words[test_rng_below(&r, 6)];
        size_t len = w[0] ? strlen(w) : 2;
        for (size_t j = 0; j < len && i < n; j++)
            b[i++] = (unsigned char)w[j];
    }
    return b;
}

static unsigned char *gzip_bytes(const unsigned char *in, size_t n, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    unsigned char *out = malloc(cap);
    assert_non_null(out);
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static unsigned char *zstd_bytes(const unsigned char *in, size_t n, size_t *out_len)
{
    size_t cap = ZSTD_compressBound(n);
    unsigned char *out = malloc(cap);
    assert_non_null(out);
    ZSTD_CCtx *c = ZSTD_createCCtx();
    assert_non_null(c);
    /* A checksum, as the zstd tool writes by default, so corruption is seen. */
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
    size_t got = ZSTD_compress2(c, out, cap, in, n);
    assert_false(ZSTD_isError(got));
    ZSTD_freeCCtx(c);
    *out_len = got;
    return out;
}

typedef unsigned char *(*compress_fn)(const unsigned char *, size_t, size_t *);

static char *write_input(const char *name, const void *data, size_t n)
{
    char *path = test_path(dir, name);
    assert_int_equal(test_write_file(path, data, n), 0);
    return path;
}

/* Read the whole stream with reads of `step` bytes. Returns the last
 * cli_stream_read result (0 or -1); the bytes in *out (malloc'd). */
static int read_all(cli_stream *s, size_t step, unsigned char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    assert_non_null(b);
    ssize_t got;
    for (;;) {
        if (cap - n < step) {
            cap = cap * 2 + step;
            b = realloc(b, cap);
            assert_non_null(b);
        }
        got = cli_stream_read(s, b + n, step);
        if (got <= 0)
            break;
        assert_true((size_t)got <= step);
        n += (size_t)got;
    }
    /* Sticky: the same answer again. */
    unsigned char extra[8];
    assert_int_equal(cli_stream_read(s, extra, sizeof extra), got);
    *out = b;
    *len = n;
    return (int)got;
}

static void test_stream_roundtrip__sizes(void **state)
{
    (void)state;
    const size_t sizes[] = {0,
                            1,
                            2,
                            3,
                            4,
                            5,
                            4095,
                            CHUNK - 1,
                            CHUNK,
                            CHUNK + 1,
                            4 * CHUNK - 1,
                            4 * CHUNK,
                            4 * CHUNK + 1,
                            5 * CHUNK + 7,
                            3 * 1000 * 1000};
    const size_t steps[] = {1, 7, 4096, CHUNK + 3};
    const compress_fn fns[] = {NULL, gzip_bytes, zstd_bytes};
    const cli_stream_kind kinds[] = {CLI_STREAM_PLAIN, CLI_STREAM_GZIP, CLI_STREAM_ZSTD};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        unsigned char *text = make_text(n, 1000 + si);
        for (size_t k = 0; k < 3; k++) {
            if (k == 0 && n >= 1 && (text[0] == 0x1f || text[0] == 0x28))
                continue; /* cannot happen with this vocabulary; be safe */
            size_t clen = n;
            unsigned char *comp = fns[k] ? fns[k](text, n, &clen) : NULL;
            char *path = write_input("rt", comp ? comp : text, clen);
            for (size_t st = 0; st < sizeof steps / sizeof *steps; st++) {
                if (steps[st] == 1 && n > 5 * CHUNK)
                    continue;
                cli_stream *s;
                assert_int_equal(cli_stream_open(&s, path), 0);
                assert_int_equal(cli_stream_get_kind(s), kinds[k]);
                assert_int_equal(cli_stream_plain_size(s), k == 0 ? n : 0);
                unsigned char *got;
                size_t len;
                int rc = read_all(s, steps[st], &got, &len);
                if (rc != 0)
                    fail_msg("%s, %zu bytes, reads of %zu: %s", cli_stream_kind_name(kinds[k]), n,
                             steps[st], cli_stream_error(s));
                assert_int_equal(len, n);
                assert_memory_equal(got, text, n);
                assert_string_equal(cli_stream_error(s), "");
                free(got);
                cli_stream_close(s);
            }
            free(path);
            free(comp);
        }
        free(text);
    }
}

/* Concatenated members / frames, empty ones among them, are one input. */
static void test_stream_roundtrip__members(void **state)
{
    (void)state;
    const size_t parts[] = {1000, 0, CHUNK + 5, 1, 0, 70000};
    const compress_fn fns[] = {gzip_bytes, zstd_bytes};
    for (size_t k = 0; k < 2; k++) {
        size_t total = 0, clen = 0;
        unsigned char *text = NULL, *comp = NULL;
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
            unsigned char *t = make_text(parts[i], 50 + i);
            size_t l;
            unsigned char *c = fns[k](t, parts[i], &l);
            text = realloc(text, total + parts[i] + 1);
            comp = realloc(comp, clen + l + 16);
            memcpy(text + total, t, parts[i]);
            memcpy(comp + clen, c, l);
            total += parts[i];
            clen += l;
            if (k == 1 && i == 2) { /* a skippable frame, between frames */
                static const unsigned char skip[12] = {0x50, 0x2a, 0x4d, 0x18, 4, 0,
                                                       0,    0,    1,    2,    3, 4};
                comp = realloc(comp, clen + sizeof skip);
                memcpy(comp + clen, skip, sizeof skip);
                clen += sizeof skip;
            }
            free(t);
            free(c);
        }
        char *path = write_input("members", comp, clen);
        cli_stream *s;
        assert_int_equal(cli_stream_open(&s, path), 0);
        unsigned char *got;
        size_t len;
        assert_int_equal(read_all(s, 5000, &got, &len), 0);
        assert_int_equal(len, total);
        assert_memory_equal(got, text, total);
        free(got);
        cli_stream_close(s);

        /* Then garbage after the last member: an error after all the data. */
        static const unsigned char junk[] = "junk after the data";
        comp = realloc(comp, clen + sizeof junk);
        memcpy(comp + clen, junk, sizeof junk);
        free(path);
        path = write_input("members-junk", comp, clen + sizeof junk);
        assert_int_equal(cli_stream_open(&s, path), 0);
        assert_int_equal(read_all(s, 5000, &got, &len), -1);
        assert_int_equal(len, total);
        assert_memory_equal(got, text, total);
        assert_non_null(strstr(cli_stream_error(s),
                               k == 0 ? "gzip data is corrupt: " : "zstd data is corrupt: "));
        free(got);
        cli_stream_close(s);
        free(path);
        free(text);
        free(comp);
    }
}

/* Every strict prefix of a compressed input: "truncated", never a crash, and
 * what was served is a prefix of the data. Prefixes too short to hold the
 * magic are plain inputs and read back as they are. */
static void test_stream_truncation__every_length(void **state)
{
    (void)state;
    const compress_fn fns[] = {gzip_bytes, zstd_bytes};
    const size_t magic[] = {2, 4};
    const char *const want[] = {"gzip data is truncated", "zstd data is truncated"};
    for (size_t k = 0; k < 2; k++) {
        size_t n = 3000, clen;
        unsigned char *text = make_text(n, 77);
        unsigned char *comp = fns[k](text, n, &clen);
        char *path = test_path(dir, "trunc");
        for (size_t cut = 0; cut < clen; cut++) {
            assert_int_equal(test_write_file(path, comp, cut), 0);
            cli_stream *s;
            assert_int_equal(cli_stream_open(&s, path), 0);
            unsigned char *got;
            size_t len;
            int rc = read_all(s, 1000, &got, &len);
            if (cut < magic[k]) {
                assert_int_equal(cli_stream_get_kind(s), CLI_STREAM_PLAIN);
                assert_int_equal(rc, 0);
                assert_int_equal(len, cut);
            } else {
                if (rc != -1)
                    fail_msg("cut at %zu of %zu: not an error", cut, clen);
                assert_string_equal(cli_stream_error(s), want[k]);
                assert_true(len <= n);
                assert_memory_equal(got, text, len);
            }
            free(got);
            cli_stream_close(s);
        }
        free(path);
        free(comp);
        free(text);
    }
}

/* Every byte of a small compressed input replaced by a few values: never a
 * crash or a hang; success only with the right data (both formats carry a
 * checksum), an error always with a message. */
static void test_stream_corruption__every_byte(void **state)
{
    (void)state;
    const compress_fn fns[] = {gzip_bytes, zstd_bytes};
    const unsigned char masks[] = {0xff, 0x01, 0x80};
    for (size_t k = 0; k < 2; k++) {
        size_t n = 2000, clen;
        unsigned char *text = make_text(n, 99);
        unsigned char *comp = fns[k](text, n, &clen);
        unsigned char *bad = malloc(clen);
        char *path = test_path(dir, "corrupt");
        size_t errors = 0;
        for (size_t at = 0; at < clen; at++) {
            for (size_t m = 0; m < sizeof masks; m++) {
                memcpy(bad, comp, clen);
                bad[at] ^= masks[m];
                assert_int_equal(test_write_file(path, bad, clen), 0);
                cli_stream *s;
                assert_int_equal(cli_stream_open(&s, path), 0);
                unsigned char *got;
                size_t len;
                int rc = read_all(s, 700, &got, &len);
                if (cli_stream_get_kind(s) == CLI_STREAM_PLAIN) {
                    assert_int_equal(rc, 0); /* the magic is gone: plain bytes */
                    assert_int_equal(len, clen);
                } else if (rc == 0) {
                    if (len != n || memcmp(got, text, n) != 0)
                        fail_msg("byte %zu ^ 0x%02x: wrong data without an error", at, masks[m]);
                } else {
                    errors++;
                    assert_true(strlen(cli_stream_error(s)) > 0);
                }
                free(got);
                cli_stream_close(s);
            }
        }
        assert_true(errors > clen); /* most changes are caught */
        free(path);
        free(bad);
        free(comp);
        free(text);
    }
}

/* Closing after a partial read stops the producer, wherever it waits: on a
 * full ring, or in a read of a FIFO whose writer is silent. */
static void test_stream_close__early(void **state)
{
    (void)state;
    size_t n = 6 * CHUNK, clen;
    unsigned char *text = make_text(n, 5);
    unsigned char *comp = gzip_bytes(text, n, &clen);
    char *path = write_input("early.gz", comp, clen);
    for (int reads = 0; reads < 3; reads++) {
        cli_stream *s;
        assert_int_equal(cli_stream_open(&s, path), 0);
        unsigned char buf[100];
        for (int i = 0; i < reads; i++)
            assert_int_equal(cli_stream_read(s, buf, sizeof buf), (ssize_t)sizeof buf);
        if (reads)
            usleep(20000); /* let the producer fill the ring and wait */
        cli_stream_close(s);
    }

    /* A FIFO: the writer (this thread, through O_RDWR) sends half, then
     * keeps the FIFO open without writing. */
    char *fifo = test_path(dir, "fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    int wfd = open(fifo, O_RDWR);
    assert_true(wfd >= 0);
    size_t half = clen / 2 < 60000 ? clen / 2 : 60000; /* fits the pipe buffer */
    assert_int_equal(write(wfd, comp, half), (ssize_t)half);
    alarm(30); /* a hang here is a failure */
    cli_stream *s;
    assert_int_equal(cli_stream_open(&s, fifo), 0);
    assert_int_equal(cli_stream_get_kind(s), CLI_STREAM_GZIP);
    unsigned char buf[100];
    assert_int_equal(cli_stream_read(s, buf, sizeof buf), (ssize_t)sizeof buf);
    assert_memory_equal(buf, text, sizeof buf);
    cli_stream_close(s);
    alarm(0);
    close(wfd);
    free(fifo);
    free(path);
    free(comp);
    free(text);
}

static void test_stream_open__errors(void **state)
{
    (void)state;
    cli_stream *s = (cli_stream *)1;
    errno = 0;
    assert_int_equal(cli_stream_open(&s, dir), -1);
    assert_int_equal(errno, EISDIR);
    assert_null(s);
    char *missing = test_path(dir, "missing");
    assert_int_equal(cli_stream_open(&s, missing), -1);
    assert_int_equal(errno, ENOENT);
    free(missing);
    assert_string_equal(cli_stream_kind_name(CLI_STREAM_PLAIN), "plain");
    assert_string_equal(cli_stream_kind_name(CLI_STREAM_GZIP), "gzip");
    assert_string_equal(cli_stream_kind_name(CLI_STREAM_ZSTD), "zstd");
    cli_stream_close(NULL);
}

/* A gzip header with an unknown method and a zstd frame header with its
 * reserved bit set are named precisely. */
static void test_stream_corruption__messages(void **state)
{
    (void)state;
    static const unsigned char bad_method[] = {0x1f, 0x8b, 0x07, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3};
    char *path = write_input("bad-method.gz", bad_method, sizeof bad_method);
    cli_stream *s;
    assert_int_equal(cli_stream_open(&s, path), 0);
    unsigned char buf[16];
    assert_int_equal(cli_stream_read(s, buf, sizeof buf), -1);
    assert_string_equal(cli_stream_error(s), "gzip data is corrupt: unknown compression method");
    cli_stream_close(s);
    free(path);
    /* A frame header descriptor with its reserved bit set. */
    static const unsigned char bad_zstd[20] = {0x28, 0xb5, 0x2f, 0xfd, 0x08};
    path = write_input("bad.zst", bad_zstd, sizeof bad_zstd);
    assert_int_equal(cli_stream_open(&s, path), 0);
    assert_int_equal(cli_stream_read(s, buf, sizeof buf), -1);
    assert_string_equal(cli_stream_error(s), "zstd data is corrupt: Unsupported frame parameter");
    cli_stream_close(s);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_open__errors),
        cmocka_unit_test(test_stream_roundtrip__sizes),
        cmocka_unit_test(test_stream_roundtrip__members),
        cmocka_unit_test(test_stream_truncation__every_length),
        cmocka_unit_test(test_stream_corruption__every_byte),
        cmocka_unit_test(test_stream_corruption__messages),
        cmocka_unit_test(test_stream_close__early),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
