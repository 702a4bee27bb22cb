/* test_wal.c: the write-ahead log (lib/wal/wal.h, format/wal.md): records
 * round-trip in order; concurrent appenders share fsyncs and lose nothing; a
 * torn tail is kept aside, reported and dropped, and a damaged record with a
 * valid later record behind it is an error that leaves the file as it is,
 * never a wrong or a lost record; failed writes and fsyncs, and the log
 * taking appends again after one; the read-only reader; kill -9 during a
 * stream of appends loses no acknowledged record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/bytes.h"
#include "common/error.h"
#include "wal/wal.h"
#include "simstore.h"
#include "testutil.h"

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TAG 0x1234567890ABCDEFull

static char *wal_tmpdir(void);
static char self_path[4096]; /* this executable, for the children */

/* A record's payload, made from its key: `len` bytes of a byte stream seeded
 * by key, then the key itself in the first 8 bytes (when they fit). */
static size_t make_payload(uint64_t key, uint8_t *buf, size_t cap)
{
    uint64_t x = key * 0x9E3779B97F4A7C15ull + 1;
    size_t len = (size_t)(x % 200);
    if (len > cap)
        len = cap;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    if (len >= 8)
        le_store64(buf, key);
    return len;
}

typedef struct collected {
    uint64_t n;
    uint64_t *seq;
    unsigned *type;
    uint8_t **payload;
    size_t *len;
    size_t cap;
} collected;

static int collect(void *ctx, uint64_t seq, unsigned type, const uint8_t *payload, size_t len)
{
    collected *c = ctx;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->seq = realloc(c->seq, c->cap * sizeof *c->seq);
        c->type = realloc(c->type, c->cap * sizeof *c->type);
        c->payload = realloc(c->payload, c->cap * sizeof *c->payload);
        c->len = realloc(c->len, c->cap * sizeof *c->len);
        assert_non_null(c->seq);
        assert_non_null(c->type);
        assert_non_null(c->payload);
        assert_non_null(c->len);
    }
    c->seq[c->n] = seq;
    c->type[c->n] = type;
    c->payload[c->n] = malloc(len ? len : 1);
    assert_non_null(c->payload[c->n]);
    memcpy(c->payload[c->n], payload, len);
    c->len[c->n] = len;
    c->n++;
    return 0;
}

static void collected_free(collected *c)
{
    for (uint64_t i = 0; i < c->n; i++)
        free(c->payload[i]);
    free(c->seq);
    free(c->type);
    free(c->payload);
    free(c->len);
    memset(c, 0, sizeof *c);
}

static int open_log(const char *path, size_t group, collected *c, sims_wal **w)
{
    sims_wal_options o = {TAG, group};
    return sims_wal_open(path, &o, c ? collect : NULL, c, w);
}

/* Append records with keys first..first+n-1 (type 1 + key % 3). */
static void append_keys(sims_wal *w, uint64_t first, uint64_t n)
{
    uint8_t buf[256];
    for (uint64_t k = first; k < first + n; k++) {
        size_t len = make_payload(k, buf, sizeof buf);
        uint64_t seq;
        assert_int_equal(sims_wal_append(w, 1 + (unsigned)(k % 3), buf, len, &seq), SIMSTORE_OK);
        assert_int_equal(seq, k);
    }
}

/* c holds exactly the records with keys (= seqs) first..first+n-1. */
static void expect_keys(const collected *c, uint64_t first, uint64_t n)
{
    uint8_t buf[256];
    assert_int_equal(c->n, n);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = first + i;
        size_t len = make_payload(k, buf, sizeof buf);
        assert_int_equal(c->seq[i], k);
        assert_int_equal(c->type[i], 1 + (unsigned)(k % 3));
        assert_int_equal(c->len[i], len);
        assert_memory_equal(c->payload[i], buf, len);
    }
}

static uint64_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

static void test_wal_records__round_trip(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    sims_wal *w;
    assert_int_equal(open_log(path, 0, NULL, &w), SIMSTORE_OK);
    sims_wal_stats st;
    sims_wal_get_stats(w, &st);
    assert_int_equal(st.first_seq, 1);
    assert_int_equal(st.next_seq, 1);
    assert_int_equal(st.file_bytes, SIMS_WAL_HEADER_BYTES);
    append_keys(w, 1, 500);
    sims_wal_get_stats(w, &st);
    assert_int_equal(st.durable_seq, 500);
    assert_int_equal(st.records, 500);
    assert_int_equal(st.file_bytes, file_size(path));
    sims_wal_close(w);

    collected c = {0};
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_OK);
    expect_keys(&c, 1, 500);
    sims_wal_get_stats(w, &st);
    assert_int_equal(st.next_seq, 501);
    assert_int_equal(st.tail.bytes, 0);
    /* Appends go on after the replayed records. */
    append_keys(w, 501, 10);
    sims_wal_close(w);
    collected_free(&c);
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_OK);
    expect_keys(&c, 1, 510);
    sims_wal_close(w);
    collected_free(&c);

    /* Bad arguments change nothing. */
    assert_int_equal(open_log(path, 0, NULL, &w), SIMSTORE_OK);
    uint8_t big[300] = {0};
    assert_int_equal(sims_wal_append(w, 0, big, 1, NULL), SIMSTORE_EINVAL);
    assert_int_equal(sims_wal_append(w, 256, big, 1, NULL), SIMSTORE_EINVAL);
    assert_int_equal(sims_wal_append(w, 1, NULL, SIMS_WAL_MAX_PAYLOAD + 1, NULL), SIMSTORE_EINVAL);
    sims_wal_close(w);
    assert_int_equal(open_log(path, 128, NULL, &w), SIMSTORE_OK);
    assert_int_equal(sims_wal_append(w, 1, big, 200, NULL), SIMSTORE_EINVAL); /* > group */
    sims_wal_close(w);
    assert_int_equal(open_log(path, 16, NULL, &w), SIMSTORE_EINVAL);
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_OK);
    expect_keys(&c, 1, 510);
    sims_wal_close(w);
    collected_free(&c);

    /* Another store's tag. */
    sims_wal_options other = {TAG + 1, 0};
    assert_int_equal(sims_wal_open(path, &other, NULL, NULL, &w), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "another store"));
    free(path);
    test_rmtree(dir);
    free(dir);
}

static void test_wal_records__reset(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    sims_wal *w;
    assert_int_equal(open_log(path, 0, NULL, &w), SIMSTORE_OK);
    append_keys(w, 1, 10);
    assert_int_equal(sims_wal_reset(w, 5), SIMSTORE_EINVAL); /* numbers never go back */
    assert_int_equal(sims_wal_reset(w, 11), SIMSTORE_OK);
    assert_int_equal(file_size(path), SIMS_WAL_HEADER_BYTES);
    append_keys(w, 11, 5);
    sims_wal_close(w);
    collected c = {0};
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_OK);
    expect_keys(&c, 11, 5);
    assert_int_equal(sims_wal_reset(w, 100), SIMSTORE_OK);
    sims_wal_close(w);
    collected_free(&c);
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_OK);
    assert_int_equal(c.n, 0);
    sims_wal_stats st;
    sims_wal_get_stats(w, &st);
    assert_int_equal(st.next_seq, 100);
    assert_int_equal(st.first_seq, 100);
    sims_wal_close(w);
    /* No temporary file is left beside the log. */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int others = 0;
    while ((e = readdir(d)) != NULL)
        others +=
            strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "live.wal");
    closedir(d);
    assert_int_equal(others, 0);
    collected_free(&c);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* Trimming keeps the records after the applied one (format/wal.md,
 * "Trimming"); enqueued records not yet written go to the new file. */
static void test_wal_records__trim(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    sims_wal *w;
    assert_int_equal(open_log(path, 0, NULL, &w), SIMSTORE_OK);
    append_keys(w, 1, 40);
    assert_int_equal(sims_wal_trim(w, 41), SIMSTORE_EINVAL); /* not durable: never given */
    assert_int_equal(sims_wal_trim(w, 0), SIMSTORE_OK);      /* nothing to drop */
    /* Two records enqueued, not yet waited for, when the trim runs. */
    uint8_t buf[256];
    uint64_t seq41, seq42;
    size_t len = make_payload(41, buf, sizeof buf);
    assert_int_equal(sims_wal_enqueue(w, 1 + 41 % 3, buf, len, &seq41), SIMSTORE_OK);
    assert_int_equal(seq41, 41);
    assert_int_equal(sims_wal_last_seq(w), 41);
    assert_int_equal(sims_wal_trim(w, 41), SIMSTORE_EINVAL); /* enqueued, not durable */
    assert_int_equal(sims_wal_trim(w, 25), SIMSTORE_OK);
    len = make_payload(42, buf, sizeof buf);
    assert_int_equal(sims_wal_enqueue(w, 1 + 42 % 3, buf, len, &seq42), SIMSTORE_OK);
    assert_int_equal(sims_wal_wait(w, seq42), SIMSTORE_OK);
    assert_int_equal(sims_wal_wait(w, seq41), SIMSTORE_OK);
    assert_int_equal(sims_wal_wait(w, 43), SIMSTORE_EINVAL);
    sims_wal_stats st;
    sims_wal_get_stats(w, &st);
    assert_int_equal(st.first_seq, 26);
    assert_int_equal(st.records, 17);
    assert_int_equal(st.file_bytes, file_size(path));
    append_keys(w, 43, 3);
    assert_int_equal(sims_wal_trim(w, 20), SIMSTORE_OK); /* before its start: nothing */
    sims_wal_close(w);
    collected c = {0};
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_OK);
    expect_keys(&c, 26, 20);
    /* Everything applied: an empty log that goes on numbering. */
    assert_int_equal(sims_wal_trim(w, 45), SIMSTORE_OK);
    assert_int_equal(file_size(path), SIMS_WAL_HEADER_BYTES);
    append_keys(w, 46, 2);
    sims_wal_close(w);
    collected_free(&c);
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_OK);
    expect_keys(&c, 46, 2);
    sims_wal_close(w);
    collected_free(&c);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* format/golden/wal-v1.bin (format/wal.md, "Golden file"): the writer makes
 * exactly its bytes, and a reader replays exactly its records. */
static void test_wal_records__golden(void **state)
{
    (void)state;
    char *golden = test_path(test_source_dir(), "format/golden/wal-v1.bin");
    size_t want_size;
    uint8_t *want = test_read_file(golden, &want_size);
    assert_non_null(want);
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    sims_wal_options o = {0x0123456789ABCDEFull, 0};
    sims_wal *w;
    assert_int_equal(sims_wal_open(path, &o, NULL, NULL, &w), SIMSTORE_OK);
    const uint8_t three[3] = {0, 1, 2};
    assert_int_equal(sims_wal_append(w, 1, "hello", 5, NULL), SIMSTORE_OK);
    assert_int_equal(sims_wal_append(w, 2, NULL, 0, NULL), SIMSTORE_OK);
    assert_int_equal(sims_wal_append(w, 255, three, 3, NULL), SIMSTORE_OK);
    sims_wal_close(w);
    size_t got_size;
    uint8_t *got = test_read_file(path, &got_size);
    assert_non_null(got);
    assert_int_equal(got_size, want_size);
    assert_memory_equal(got, want, want_size);
    collected c = {0};
    assert_int_equal(sims_wal_open(golden, &o, collect, &c, &w), SIMSTORE_OK);
    sims_wal_close(w);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.type[0], 1);
    assert_int_equal(c.len[0], 5);
    assert_memory_equal(c.payload[0], "hello", 5);
    assert_int_equal(c.type[1], 2);
    assert_int_equal(c.len[1], 0);
    assert_int_equal(c.type[2], 255);
    assert_int_equal(c.len[2], 3);
    assert_memory_equal(c.payload[2], three, 3);
    collected_free(&c);
    free(got);
    free(want);
    free(golden);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- concurrency ---------------------------------------------------------- */

#define THREADS 4
#define PER_THREAD 1500

typedef struct appender {
    sims_wal *w;
    unsigned id;
    uint64_t seqs[PER_THREAD];
} appender;

static void *append_thread(void *arg)
{
    appender *a = arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        uint8_t p[8];
        le_store32(p, a->id);
        le_store32(p + 4, i);
        if (sims_wal_append(a->w, 7, p, sizeof p, &a->seqs[i]) != SIMSTORE_OK)
            a->seqs[i] = 0;
    }
    return NULL;
}

static void test_wal_concurrency__appenders_share_fsyncs(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    sims_wal *w;
    assert_int_equal(open_log(path, 4096, NULL, &w), SIMSTORE_OK);
    static appender a[THREADS];
    pthread_t t[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        a[i].w = w;
        a[i].id = i;
        assert_int_equal(pthread_create(&t[i], NULL, append_thread, &a[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    sims_wal_stats st;
    sims_wal_get_stats(w, &st);
    fprintf(stderr, "%u appends in %" PRIu64 " groups (fsyncs)\n", THREADS * PER_THREAD, st.groups);
    assert_int_equal(st.durable_seq, THREADS * PER_THREAD);
    sims_wal_close(w);
    collected c = {0};
    assert_int_equal(open_log(path, 4096, &c, &w), SIMSTORE_OK);
    assert_int_equal(c.n, THREADS * PER_THREAD);
    /* Every append's record is the one its sequence number names, and each
     * thread's records are in its order. */
    for (unsigned i = 0; i < THREADS; i++) {
        uint64_t prev = 0;
        for (unsigned j = 0; j < PER_THREAD; j++) {
            uint64_t s = a[i].seqs[j];
            assert_true(s > prev && s <= c.n);
            prev = s;
            assert_int_equal(c.seq[s - 1], s);
            assert_int_equal(c.len[s - 1], 8);
            assert_int_equal(le_load32(c.payload[s - 1]), i);
            assert_int_equal(le_load32(c.payload[s - 1] + 4), j);
        }
    }
    sims_wal_close(w);
    collected_free(&c);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- torn tails and damage ------------------------------------------------- */

/* The files beside path whose names begin with path's name and ".torn-":
 * exactly one when want is not NULL, holding want[0, want_len) (then
 * removed), else none. */
static void expect_aside(const char *dir, const char *torn_name, const uint8_t *want,
                         size_t want_len)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    unsigned found = 0;
    while ((e = readdir(d)) != NULL) {
        if (!strstr(e->d_name, ".torn-"))
            continue;
        found++;
        assert_non_null(want);
        assert_string_equal(e->d_name, torn_name);
        char *p = test_path(dir, e->d_name);
        size_t n;
        uint8_t *got = test_read_file(p, &n);
        assert_non_null(got);
        assert_int_equal(n, want_len);
        assert_memory_equal(got, want, want_len);
        free(got);
        assert_int_equal(unlink(p), 0);
        free(p);
    }
    closedir(d);
    assert_int_equal(found, want ? 1 : 0);
}

static void test_wal_damage__torn_tail_every_length(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    char *cut_path = test_path(dir, "cut.wal");
    sims_wal *w;
    assert_int_equal(open_log(path, 0, NULL, &w), SIMSTORE_OK);
    append_keys(w, 1, 20);
    sims_wal_close(w);
    size_t size;
    uint8_t *bytes = test_read_file(path, &size);
    assert_non_null(bytes);
    /* Where each record ends. */
    size_t ends[21];
    ends[0] = SIMS_WAL_HEADER_BYTES;
    for (int i = 1; i <= 20; i++)
        ends[i] = ends[i - 1] + SIMS_WAL_RECORD_OVERHEAD + le_load32(bytes + ends[i - 1]);
    assert_int_equal(ends[20], size);
    for (size_t cut = size; cut >= SIMS_WAL_HEADER_BYTES; cut--) {
        assert_int_equal(test_write_file(cut_path, bytes, cut), 0);
        uint64_t whole = 0;
        while (whole < 20 && ends[whole + 1] <= cut)
            whole++;
        collected c = {0};
        /* The reader that changes nothing sees the same records and tail. */
        sims_wal_summary sum;
        assert_int_equal(sims_wal_read(cut_path, TAG, 0, NULL, NULL, &sum), SIMSTORE_OK);
        assert_int_equal(sum.records, whole);
        assert_int_equal(sum.tail.end, ends[whole]);
        assert_int_equal(sum.tail.bytes, cut - ends[whole]);
        assert_int_equal(file_size(cut_path), cut);
        assert_int_equal(open_log(cut_path, 0, &c, &w), SIMSTORE_OK);
        expect_keys(&c, 1, whole);
        /* The torn bytes are gone, kept aside and reported, and the log
         * goes on from there. */
        assert_int_equal(file_size(cut_path), ends[whole]);
        sims_wal_stats st;
        sims_wal_get_stats(w, &st);
        assert_int_equal(st.tail.bytes, cut - ends[whole]);
        assert_int_equal(st.tail.records, cut > ends[whole] + 15 ? 1 : 0);
        expect_aside(dir, st.tail.aside_name, cut > ends[whole] ? bytes + ends[whole] : NULL,
                     cut - ends[whole]);
        append_keys(w, whole + 1, 1);
        sims_wal_close(w);
        collected_free(&c);
        assert_int_equal(open_log(cut_path, 0, &c, &w), SIMSTORE_OK);
        expect_keys(&c, 1, whole + 1);
        sims_wal_close(w);
        collected_free(&c);
    }
    /* Shorter than a header: damaged. */
    assert_int_equal(test_write_file(cut_path, bytes, 10), 0);
    assert_int_equal(open_log(cut_path, 0, NULL, &w), SIMSTORE_ECORRUPT);
    free(bytes);
    free(cut_path);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* Every byte flipped in a log written with a 256-byte group bound: an error
 * (the file left as it is) wherever a valid record follows the flip; in the
 * last record, the 39 records before it with their exact bytes, the torn
 * last one kept aside. */
static void test_wal_damage__every_byte(void **state)
{
    (void)state;
    enum { GROUP = 256 };
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    char *bad_path = test_path(dir, "bad.wal");
    sims_wal *w;
    assert_int_equal(open_log(path, GROUP, NULL, &w), SIMSTORE_OK);
    uint8_t p[16];
    for (uint64_t k = 1; k <= 40; k++) {
        memset(p, (int)k, sizeof p);
        assert_int_equal(sims_wal_append(w, 2, p, sizeof p, NULL), SIMSTORE_OK);
    }
    sims_wal_close(w);
    size_t size;
    uint8_t *bytes = test_read_file(path, &size);
    assert_non_null(bytes);
    unsigned errors = 0, truncated = 0;
    size_t last_record = size - (SIMS_WAL_RECORD_OVERHEAD + sizeof p);
    for (size_t i = 0; i < size; i++) {
        bytes[i] ^= 0x20;
        assert_int_equal(test_write_file(bad_path, bytes, size), 0);
        collected c = {0};
        int rc = open_log(bad_path, GROUP, &c, &w);
        if (rc == SIMSTORE_OK) {
            sims_wal_stats st;
            sims_wal_get_stats(w, &st);
            sims_wal_close(w);
            assert_true(i >= last_record); /* nothing acknowledged is dropped */
            assert_int_equal(c.n, 39);
            assert_int_equal(file_size(bad_path), last_record);
            expect_aside(dir, st.tail.aside_name, bytes + last_record, size - last_record);
            for (uint64_t r = 0; r < c.n; r++) {
                assert_int_equal(c.seq[r], r + 1);
                assert_int_equal(c.len[r], sizeof p);
                memset(p, (int)(r + 1), sizeof p);
                assert_memory_equal(c.payload[r], p, sizeof p);
            }
            truncated++;
        } else {
            assert_true(i < last_record);
            assert_true(rc == SIMSTORE_ECORRUPT || rc == SIMSTORE_EVERSION);
            /* The file is left as it is. */
            size_t n;
            uint8_t *after = test_read_file(bad_path, &n);
            assert_non_null(after);
            assert_int_equal(n, size);
            assert_memory_equal(after, bytes, size);
            free(after);
            expect_aside(dir, NULL, NULL, 0);
            errors++;
        }
        bytes[i] ^= 0x20;
        collected_free(&c);
    }
    fprintf(stderr, "%zu flips: %u errors, %u torn tails dropped\n", size, errors, truncated);
    assert_true(errors > 0 && truncated > 0);
    /* A version this build does not know, whatever the header's check:
     * SIMSTORE_EVERSION naming the file, never corruption (the file left as
     * it is). */
    for (uint32_t v = 0; v < 4; v++) {
        if (v == SIMS_WAL_VERSION)
            continue;
        le_store32(bytes + 8, v);
        assert_int_equal(test_write_file(bad_path, bytes, size), 0);
        collected c = {0};
        assert_int_equal(open_log(bad_path, GROUP, &c, &w), SIMSTORE_EVERSION);
        assert_non_null(strstr(simstore_last_error(), "unknown to this simstore"));
        assert_non_null(strstr(simstore_last_error(), bad_path));
        assert_int_equal(file_size(bad_path), size);
        collected_free(&c);
    }
    le_store32(bytes + 8, SIMS_WAL_VERSION);
    free(bytes);
    free(bad_path);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* The defect of the reliability trial: one flipped bit in the fourth
 * record of a 100-record log, far less than a group from its end. The open
 * and the reader both refuse it naming the file and the record's offset;
 * nothing is replayed, truncated or set aside. */
static void test_wal_damage__flip_before_acknowledged_records(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    sims_wal *w;
    assert_int_equal(open_log(path, 0, NULL, &w), SIMSTORE_OK);
    append_keys(w, 1, 100);
    sims_wal_close(w);
    size_t size;
    uint8_t *bytes = test_read_file(path, &size);
    assert_non_null(bytes);
    size_t at = SIMS_WAL_HEADER_BYTES;
    for (int r = 0; r < 3; r++)
        at += SIMS_WAL_RECORD_OVERHEAD + le_load32(bytes + at);
    bytes[at + 17] ^= 1; /* the fourth record's payload */
    assert_int_equal(test_write_file(path, bytes, size), 0);
    collected c = {0};
    assert_int_equal(open_log(path, 0, &c, &w), SIMSTORE_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "byte %zu (sequence number 4)", at);
    assert_non_null(strstr(simstore_last_error(), want));
    assert_non_null(strstr(simstore_last_error(), path));
    sims_wal_summary sum;
    assert_int_equal(sims_wal_read(path, TAG, 0, NULL, NULL, &sum), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), want));
    size_t n;
    uint8_t *after = test_read_file(path, &n);
    assert_non_null(after);
    assert_int_equal(n, size);
    assert_memory_equal(after, bytes, size);
    expect_aside(dir, NULL, NULL, 0);
    free(after);
    collected_free(&c);
    free(bytes);
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* ---- failures and crashes ---------------------------------------------------- */

/* In a child (SIMSTORE_FAULT set): append 10 records, then appends until
 * the injected failure; after it, every append fails until
 * sims_wal_recover(), which cuts the file back to the durable records;
 * then 10 more records, numbered on from the last durable one. Exits 0
 * when all of that held. */
static int run_recover_child(const char *path)
{
    sims_wal *w;
    if (open_log(path, 0, NULL, &w) != SIMSTORE_OK)
        return 3;
    uint8_t p[32];
    memset(p, 7, sizeof p);
    uint64_t seq = 0, acked = 0;
    int rc = SIMSTORE_OK;
    while (rc == SIMSTORE_OK && acked < 1000) {
        rc = sims_wal_append(w, 1, p, sizeof p, &seq);
        if (rc == SIMSTORE_OK)
            acked = seq;
    }
    if (rc != SIMSTORE_EIO || !strstr(simstore_last_error(), "Input/output error"))
        return 4;
    sims_wal_stats st;
    sims_wal_get_stats(w, &st);
    if (!st.failed || !strstr(st.failure, "Input/output error"))
        return 5;
    if (sims_wal_append(w, 1, p, sizeof p, &seq) != SIMSTORE_EIO)
        return 6; /* refused until recovered */
    if (sims_wal_recover(w) != SIMSTORE_OK)
        return 7;
    sims_wal_get_stats(w, &st);
    if (st.failed || st.next_seq != acked + 1 || st.file_bytes != file_size(path))
        return 8;
    for (int i = 0; i < 10; i++)
        if (sims_wal_append(w, 1, p, sizeof p, &seq) != SIMSTORE_OK ||
            seq != acked + 1 + (uint64_t)i)
            return 9;
    sims_wal_close(w);
    /* Reopened: the acknowledged records and the ten, nothing torn. */
    collected c = {0};
    if (open_log(path, 0, &c, &w) != SIMSTORE_OK)
        return 10;
    sims_wal_get_stats(w, &st);
    sims_wal_close(w);
    int ok = c.n == acked + 10 && st.tail.bytes == 0;
    for (uint64_t r = 0; ok && r < c.n; r++)
        ok = c.seq[r] == r + 1;
    collected_free(&c);
    return ok ? 0 : 11;
}

/* A failed write or fsync (a full disk) fails its group's appends with the
 * reason, and the log takes appends again once recovered. */
static void test_wal_failures__recover_after_failed_group(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    const char *faults[] = {"write:1", "write:12", "fsync:1", "fsync:7"};
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++) {
        /* The log exists before the child starts: its faults count its
         * appends only. */
        sims_wal *w;
        assert_int_equal(open_log(path, 0, NULL, &w), SIMSTORE_OK);
        sims_wal_close(w);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            setenv("SIMSTORE_FAULT", faults[f], 1);
            execl(self_path, self_path, "--wal-recover-child", path, (char *)NULL);
            _exit(127);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) != 0)
            fprintf(stderr, "fault %s: child exit %d\n", faults[f], WEXITSTATUS(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        unlink(path);
    }
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* In a child: open the log, append from two threads, write each
 * acknowledged (seq, thread, counter) to fd; exit 0 when done, 1 after an
 * append fails. */
typedef struct child_appender {
    sims_wal *w;
    unsigned id;
    int fd;
    int failed;
} child_appender;

static pthread_mutex_t ack_mu = PTHREAD_MUTEX_INITIALIZER;

static void *child_thread(void *arg)
{
    child_appender *a = arg;
    for (uint32_t i = 0; i < 100000; i++) {
        uint8_t p[64];
        memset(p, (int)(a->id * 31 + i), sizeof p);
        le_store32(p, a->id);
        le_store32(p + 4, i);
        uint64_t seq;
        if (sims_wal_append(a->w, 3, p, 8 + i % 56, &seq) != SIMSTORE_OK) {
            a->failed = 1;
            return NULL;
        }
        uint8_t ack[16];
        le_store64(ack, seq);
        le_store32(ack + 8, a->id);
        le_store32(ack + 12, i);
        pthread_mutex_lock(&ack_mu);
        ssize_t n = write(a->fd, ack, sizeof ack);
        pthread_mutex_unlock(&ack_mu);
        if (n != (ssize_t)sizeof ack)
            return NULL; /* the parent stopped listening */
    }
    return NULL;
}

static void run_child(const char *path, int fd)
{
    sims_wal *w;
    if (open_log(path, 4096, NULL, &w) != SIMSTORE_OK)
        _exit(3);
    child_appender a[2] = {{w, 0, fd, 0}, {w, 1, fd, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, child_thread, &a[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    _exit(a[0].failed || a[1].failed ? 1 : 0);
}

/* Every acknowledged record is in the log with its bytes. */
static void check_acks(const char *path, const uint8_t *acks, size_t n_acks)
{
    collected c = {0};
    sims_wal *w;
    assert_int_equal(open_log(path, 4096, &c, &w), SIMSTORE_OK);
    sims_wal_close(w);
    for (size_t i = 0; i < n_acks; i++) {
        uint64_t seq = le_load64(acks + 16 * i);
        uint32_t id = le_load32(acks + 16 * i + 8), k = le_load32(acks + 16 * i + 12);
        assert_true(seq >= 1 && seq <= c.n);
        assert_int_equal(c.seq[seq - 1], seq);
        assert_int_equal(c.len[seq - 1], 8 + k % 56);
        assert_int_equal(le_load32(c.payload[seq - 1]), id);
        assert_int_equal(le_load32(c.payload[seq - 1] + 4), k);
    }
    for (uint64_t r = 0; r < c.n; r++)
        assert_int_equal(c.seq[r], r + 1);
    collected_free(&c);
}

/* Start a child appending to path; read `want` acknowledgements (all of them
 * when want is 0), then kill it (when kill_it) and reap it. Returns the
 * acknowledgements read (malloc'd, 16 bytes each) and the child's status. */
static uint8_t *stream_child(const char *path, const char *fault, size_t want, int kill_it,
                             size_t *n_acks, int *status)
{
    /* The log exists before the child starts, so the faults it injects
     * count its appends' writes and fsyncs only. */
    sims_wal *w;
    assert_int_equal(open_log(path, 4096, NULL, &w), SIMSTORE_OK);
    sims_wal_close(w);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* A new process image: the fault points read SIMSTORE_FAULT once per
         * process, and this one has read it already. */
        close(pfd[0]);
        char fd_arg[16];
        snprintf(fd_arg, sizeof fd_arg, "%d", pfd[1]);
        if (fault)
            setenv("SIMSTORE_FAULT", fault, 1);
        execl(self_path, self_path, "--wal-child", path, fd_arg, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t cap = 1024, n = 0;
    uint8_t *acks = malloc(cap * 16);
    assert_non_null(acks);
    uint8_t buf[16];
    size_t have = 0;
    while (want == 0 || n < want) {
        ssize_t r = read(pfd[0], buf + have, sizeof buf - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        if (have < sizeof buf)
            continue;
        if (n == cap) {
            cap *= 2;
            acks = realloc(acks, cap * 16);
            assert_non_null(acks);
        }
        memcpy(acks + 16 * n++, buf, 16);
        have = 0;
    }
    if (kill_it)
        kill(pid, SIGKILL);
    close(pfd[0]);
    assert_int_equal(waitpid(pid, status, 0), pid);
    *n_acks = n;
    return acks;
}

static void test_wal_crash__kill_during_appends(void **state)
{
    (void)state;
    test_rng rng;
    test_rng_init(&rng, "wal kill", 4242);
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    for (int trial = 0; trial < 8; trial++) {
        size_t want = 1 + (size_t)test_rng_below(&rng, 800);
        size_t n;
        int status;
        uint8_t *acks = stream_child(path, NULL, want, 1, &n, &status);
        assert_int_equal(n, want);
        check_acks(path, acks, n);
        free(acks);
        unlink(path);
    }
    free(path);
    test_rmtree(dir);
    free(dir);
}

static void test_wal_crash__faults(void **state)
{
    (void)state;
    char *dir = wal_tmpdir();
    char *path = test_path(dir, "live.wal");
    const char *faults[] = {"fsync:1", "fsync:5",  "fsync:40:crash",
                            "write:1", "write:17", "write:9:crash"};
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++) {
        size_t n;
        int status;
        uint8_t *acks = stream_child(path, faults[f], 0, 0, &n, &status);
        assert_true(WIFEXITED(status));
        int code = WEXITSTATUS(status);
        /* An injected failure ends the child's appends with an error (1), a
         * crash point with 86. */
        assert_int_equal(code, strstr(faults[f], "crash") ? 86 : 1);
        fprintf(stderr, "fault %s: %zu acknowledged, exit %d\n", faults[f], n, code);
        check_acks(path, acks, n);
        free(acks);
        unlink(path);
    }
    free(path);
    test_rmtree(dir);
    free(dir);
}

/* Where the logs go: /dev/shm when there is one (fsync there is cheap, and
 * what these tests kill is the process, whose written bytes the kernel
 * keeps), else $TMPDIR. */
static char *wal_tmpdir(void)
{
    if (access("/dev/shm", W_OK) != 0)
        return test_tmpdir("wal");
    char *dir = strdup("/dev/shm/simstore-wal-XXXXXX");
    assert_non_null(dir);
    assert_non_null(mkdtemp(dir));
    return dir;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--wal-child") == 0) {
        run_child(argv[2], atoi(argv[3]));
        return 2;
    }
    if (argc == 3 && strcmp(argv[1], "--wal-recover-child") == 0)
        return run_recover_child(argv[2]);
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0)
        return 1;
    self_path[n] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wal_records__round_trip),
        cmocka_unit_test(test_wal_records__reset),
        cmocka_unit_test(test_wal_records__trim),
        cmocka_unit_test(test_wal_records__golden),
        cmocka_unit_test(test_wal_concurrency__appenders_share_fsyncs),
        cmocka_unit_test(test_wal_damage__torn_tail_every_length),
        cmocka_unit_test(test_wal_damage__every_byte),
        cmocka_unit_test(test_wal_damage__flip_before_acknowledged_records),
        cmocka_unit_test(test_wal_failures__recover_after_failed_group),
        cmocka_unit_test(test_wal_crash__kill_during_appends),
        cmocka_unit_test(test_wal_crash__faults),
    };
    /* Sampled (the ThreadSanitizer pass): the cases tests/CMakeLists.txt names. */
    const char *cases = test_sampled_cases();
    if (cases)
        cmocka_set_test_filter(cases);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
