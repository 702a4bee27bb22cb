/* test_corruption.c: the whole-store corruption sweep. A small store (two
 * segments, a few hundred documents, duplicate fingerprints in LMDB sub-pages
 * and a sub-database, metadata on an overflow page) is damaged one way at a
 * time: each sampled byte of each file flipped (XOR 0xFF and XOR 0x01),
 * each file truncated at sampled lengths. After each damage a child process
 * (one runs CASES_PER_CHILD cases in turn, damaging and restoring the files
 * itself; the case that kills or hangs it is blamed, and a new child goes
 * on after it) runs verify, inspect and every query; the parent requires,
 * for every case:
 *  - no crash and no hang (a child that dies of a signal or outlives its
 *    timeout fails the case);
 *  - every query answer equal to the undamaged store's, or an error;
 *  - inspect's facts equal to the undamaged store's, or an error;
 *  - verify reporting a problem, or the store behaving exactly as the
 *    undamaged one (verify found nothing => every query answered correctly);
 *  - verify reporting a problem for any damage to a table file (every byte
 *    of a table is covered by a checksum).
 *
 * SIMSTORE_SWEEP=full samples densely (every byte of every table file and of
 * LMDB page headers, more of page bodies); SIMSTORE_SWEEP=report prints a
 * per-file outcome table without failing (to study LMDB's own behaviour).
 * The default sample keeps the test within a minute; SIMSTORE_SAMPLED (the
 * sanitizer pass of tests/run.sh) takes a sparser one.
 *
 * The second case sweeps a store with a paragraph index (format/store.md,
 * "Paragraphs": pfps, paragraph segments, paragraph lists in the records),
 * whose answers also include paragraph queries; its table and document
 * files, read by the code the first case sweeps, at a quarter of the
 * density. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#ifndef UNDER_SANITIZER
#define UNDER_SANITIZER 0
#endif

#define CHILD_TIMEOUT_MS 20000

/* ---- the store and its expected answers ----------------------------------- */

typedef struct doc {
    char id[32];
    uint64_t fp;
    uint64_t paras[3]; /* the paragraph sweep's paragraph fingerprints */
    size_t npara;
} doc;

typedef struct answer {
    size_t count;
    char **ids; /* "id\tfp\tdistance" lines, in answer order */
} answer;

typedef struct file_image {
    char name[256];
    uint8_t *data;
    size_t size;
    struct timespec mtime; /* the file's as this image was last written */
} file_image;

typedef struct sweep {
    char *dir; /* the store under test */
    doc *docs;
    size_t ndocs;
    uint64_t *queries;
    size_t nqueries;
    int paragraphs;     /* the store has a paragraph index: the answers also
                            hold one paragraph query per PARA_QUERY_EVERY
                            documents (their own paragraph lists) */
    answer *want;       /* per query, from the undamaged store (the
                            paragraph queries' after the others') */
    char *inspect_want; /* canonical inspect summary of the undamaged store */
    file_image *files;
    size_t nfiles;
    int report;
    int full;
    int query_path; /* the query-path sweep: children run only the queries,
                       with lazy checks and with the walk at open */
} sweep;

static uint64_t at_distance(test_rng *r, uint64_t x, unsigned d)
{
    uint64_t mask = 0;
    while ((unsigned)__builtin_popcountll(mask) < d)
        mask |= 1ULL << test_rng_below(r, 64);
    return x ^ mask;
}

static int add_docs(simstore_builder *b, const doc *docs, size_t from, size_t to)
{
    static char big_meta[6000];
    if (!big_meta[0]) {
        memset(big_meta, 'x', sizeof big_meta);
        memcpy(big_meta, "{\"pad\":\"", 8);
        memcpy(big_meta + sizeof big_meta - 2, "\"}", 2);
    }
    for (size_t i = from; i < to; i++) {
        char meta[64];
        const char *m = NULL;
        size_t mlen = 0;
        if (i == 7) {
            m = big_meta; /* on an LMDB overflow page */
            mlen = sizeof big_meta;
        } else if (i % 5 == 0) {
            mlen = (size_t)snprintf(meta, sizeof meta, "{\"n\":%zu}", i);
            m = meta;
        }
        simstore_doc d = {docs[i].id, strlen(docs[i].id), docs[i].fp, m, mlen, i};
        d.paragraphs = docs[i].paras;
        d.n_paragraphs = docs[i].npara;
        int rc = simstore_builder_add(b, &d);
        if (rc)
            return rc;
    }
    return 0;
}

/* 300 documents in the first segment, 100 in the second: clustered near
 * duplicates, 120 documents sharing one fingerprint (an LMDB dup sub-DB),
 * pairs and triples sharing fingerprints (dup sub-pages), and second-segment
 * documents that repeat first-segment fingerprints. */
static void build_sweep_store(sweep *sw, test_rng *r)
{
    sw->ndocs = 400;
    sw->docs = calloc(sw->ndocs, sizeof *sw->docs);
    uint64_t base = test_rng_next(r), shared = test_rng_next(r);
    for (size_t i = 0; i < sw->ndocs; i++) {
        uint64_t fp;
        if (i >= 100 && i < 220)
            fp = shared;
        else if (i % 9 == 0)
            fp = sw->docs[i / 2].fp; /* a repeat of an earlier fingerprint */
        else if (i % 4 == 0)
            fp = at_distance(r, base, (unsigned)test_rng_below(r, 5));
        else
            fp = test_rng_next(r);
        if (i % 17 == 0)
            base = test_rng_next(r);
        sw->docs[i].fp = fp;
        snprintf(sw->docs[i].id, sizeof sw->docs[i].id, "doc-%03zu", i);
        /* Paragraphs: most documents have some, shared with others (near
         * copies of a few centres) or their own. */
        if (sw->paragraphs && i % 6 != 5) {
            sw->docs[i].npara = 1 + i % 3;
            for (size_t j = 0; j < sw->docs[i].npara; j++)
                sw->docs[i].paras[j] = test_rng_below(r, 2)
                                           ? test_rng_next(r)
                                           : at_distance(r, 0x0123456789abcdefULL * (1 + i % 7),
                                                         (unsigned)test_rng_below(r, 4));
        }
    }
    simstore_text_options t;
    simstore_text_options_init(&t);
    t.paragraph_min_words = sw->paragraphs ? 1 : 0;
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.text = &t;
    o.k = 3;
    o.block_bytes = 256;
    o.threads = 1;
    o.memory_bytes = 8u << 20;
    simstore_builder *b;
    assert_int_equal(simstore_build_begin(sw->dir, &o, &b), 0);
    assert_int_equal(add_docs(b, sw->docs, 0, 300), 0);
    assert_int_equal(simstore_builder_finish(b), 0);
    simstore *s;
    assert_int_equal(simstore_open(sw->dir, SIMSTORE_OPEN_WRITE, &s), 0);
    assert_int_equal(simstore_add_begin(s, &o, &b), 0);
    assert_int_equal(add_docs(b, sw->docs, 300, 400), 0);
    int rc = simstore_builder_finish(b);
    if (rc)
        fprintf(stderr, "add: %s\n", simstore_last_error());
    assert_int_equal(rc, 0);
    simstore_close(s);

    /* Queries: every stored fingerprint, near misses and random ones. */
    sw->nqueries = 0;
    sw->queries = calloc(sw->ndocs + 80, sizeof *sw->queries);
    for (size_t i = 0; i < sw->ndocs; i += 2)
        sw->queries[sw->nqueries++] = sw->docs[i].fp;
    for (size_t i = 0; i < 60; i++)
        sw->queries[sw->nqueries++] =
            at_distance(r, sw->docs[test_rng_below(r, sw->ndocs)].fp, 1 + (unsigned)(i % 4));
    for (size_t i = 0; i < 20; i++)
        sw->queries[sw->nqueries++] = test_rng_next(r);
}

/* ---- the operations a child runs -------------------------------------------- */

enum { RESULT_OK = 0, RESULT_ERROR = 1, RESULT_WRONG = 2 };

static char *format_answer(const simstore_match *m, size_t n)
{
    size_t cap = 64 + n * 64, len = 0;
    char *s = malloc(cap);
    s[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (len + m[i].id_len + 64 > cap) {
            cap = 2 * (cap + m[i].id_len + 64);
            s = realloc(s, cap);
        }
        len += (size_t)snprintf(s + len, cap - len, "%.*s\t%016" PRIx64 "\t%u\n",
                                (int)(m[i].id ? m[i].id_len : 1), m[i].id ? m[i].id : "-", m[i].fp,
                                m[i].distance);
    }
    return s;
}

#define PARA_QUERY_EVERY 7

static size_t para_queries(const sweep *sw)
{
    return sw->paragraphs ? (sw->ndocs + PARA_QUERY_EVERY - 1) / PARA_QUERY_EVERY : 0;
}

static char *format_paragraph_answer(const simstore_paragraph_match *m, size_t n)
{
    size_t cap = 64 + n * 64, len = 0;
    char *s = malloc(cap);
    s[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%.*s\t%zu/%zu\n", (int)m[i].id_len, m[i].id,
                                m[i].shared, m[i].of);
    return s;
}

/* Run every query; RESULT_OK when all answers equal `want` (or, when want is
 * NULL, fill *got). */
static int op_query_flags(const sweep *sw, char ***got, unsigned open_flags)
{
    simstore *s;
    if (simstore_open(sw->dir, SIMSTORE_OPEN_READONLY | open_flags, &s))
        return RESULT_ERROR;
    simstore_query *q;
    if (simstore_query_new(s, 0, &q)) {
        simstore_close(s);
        return RESULT_ERROR;
    }
    int result = RESULT_OK;
    for (size_t i = 0; i < sw->nqueries && result == RESULT_OK; i++) {
        const simstore_match *m;
        size_t n;
        if (simstore_query_fp(q, sw->queries[i], 3, &m, &n)) {
            result = RESULT_ERROR;
            break;
        }
        char *text = format_answer(m, n);
        if (!got && strcmp(text, sw->want[i].ids[0]) == 0 && i + 1 == sw->nqueries) {
            /* The paragraph queries, after the last fingerprint query. */
            for (size_t j = 0; j < para_queries(sw) && result == RESULT_OK; j++) {
                const doc *d = &sw->docs[j * PARA_QUERY_EVERY];
                const simstore_paragraph_match *pm;
                size_t pn;
                if (simstore_query_paragraphs(q, d->paras, d->npara, 3, 0, &pm, &pn)) {
                    result = RESULT_ERROR;
                    break;
                }
                char *pt = format_paragraph_answer(pm, pn);
                if (strcmp(pt, sw->want[sw->nqueries + j].ids[0]) != 0) {
                    if (sw->report)
                        fprintf(stderr, "  wrong answer to paragraph query %zu:\n%s  want:\n%s", j,
                                pt, sw->want[sw->nqueries + j].ids[0]);
                    result = RESULT_WRONG;
                }
                free(pt);
            }
        }
        if (got) {
            (*got)[i] = text;
        } else {
            if (strcmp(text, sw->want[i].ids[0]) != 0) {
                if (sw->report)
                    fprintf(stderr, "  wrong answer to query %zu (%016" PRIx64 "):\n%s  want:\n%s",
                            i, sw->queries[i], text, sw->want[i].ids[0]);
                result = RESULT_WRONG;
            }
            free(text);
        }
    }
    for (size_t j = 0; got && result == RESULT_OK && j < para_queries(sw); j++) {
        const doc *d = &sw->docs[j * PARA_QUERY_EVERY];
        const simstore_paragraph_match *pm;
        size_t pn;
        if (simstore_query_paragraphs(q, d->paras, d->npara, 3, 0, &pm, &pn))
            result = RESULT_ERROR;
        else
            (*got)[sw->nqueries + j] = format_paragraph_answer(pm, pn);
    }
    simstore_query_free(q);
    simstore_close(s);
    return result;
}

static int op_query(const sweep *sw, char ***got)
{
    return op_query_flags(sw, got, 0);
}

/* Inspection as `simstore inspect` does it (stats, every segment, every
 * table's facts and exact histogram), reduced to a canonical text. Sizes of
 * data.mdb are left out: a truncation that removes nothing the store uses
 * changes only those. */
static int inspect_summary(const char *dir, char **out)
{
    simstore *s;
    if (simstore_open(dir, SIMSTORE_OPEN_READONLY, &s))
        return RESULT_ERROR;
    simstore_stats st;
    int rc = simstore_get_stats(s, &st);
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    text[0] = '\0';
    if (!rc)
        len += (size_t)snprintf(
            text + len, cap - len,
            "k=%u tables=%u docs=%" PRIu64 " fps=%" PRIu64 " segs=%" PRIu64 " gen=%" PRIu64
            " tfps=%" PRIu64 " tbytes=%" PRIu64 " keys=%" PRIu64 " %s\n",
            st.k, st.tables, st.documents, st.fingerprints, st.segments, st.generation,
            st.table_fps, st.table_bytes, st.block_key_bytes, st.design);
    for (uint64_t i = 0; !rc && i < st.segments; i++) {
        simstore_segment_info seg;
        rc = simstore_get_segment(s, i, &seg);
        for (unsigned t = 0; !rc && t < seg.tables; t++) {
            simstore_table *tab;
            rc = simstore_open_segment_table(s, i, t, &tab);
            if (rc)
                break;
            simstore_table_info in;
            simstore_table_get_info(tab, &in);
            simstore_histogram h;
            rc = simstore_table_histogram(tab, 0, &h);
            if (!rc && len + 512 < cap) {
                len += (size_t)snprintf(text + len, cap - len,
                                        "seg %" PRIu64 " t%u n=%" PRIu64 " b=%" PRIu64
                                        " %s d=%" PRIu64 " bits=%" PRIu64 " h=",
                                        seg.id, t, in.fingerprints, in.blocks, in.permutation,
                                        h.differences, h.payload_bits);
                for (unsigned j = 0; j < 64; j++)
                    if (h.count[j])
                        len += (size_t)snprintf(text + len, cap - len, "%u:%" PRIu64 "/%u ", j,
                                                h.count[j], in.code_lengths[j]);
                len += (size_t)snprintf(text + len, cap - len, "\n");
            }
            simstore_table_close(tab);
        }
    }
    simstore_close(s);
    if (rc) {
        free(text);
        return RESULT_ERROR;
    }
    *out = text;
    return RESULT_OK;
}

/* verify: RESULT_OK when it found nothing wrong, RESULT_ERROR otherwise. */
static int op_verify(const sweep *sw)
{
    simstore_verify_summary sum;
    int rc = simstore_verify(sw->dir, 0, NULL, NULL, &sum);
    return rc == SIMSTORE_OK ? RESULT_OK : RESULT_ERROR;
}

static int op_inspect(const sweep *sw)
{
    char *text;
    if (inspect_summary(sw->dir, &text) != RESULT_OK)
        return RESULT_ERROR;
    int same = strcmp(text, sw->inspect_want) == 0;
    if (!same && sw->report)
        fprintf(stderr, "  inspect differs:\n  %s\n  want %s\n", text, sw->inspect_want);
    free(text);
    return same ? RESULT_OK : RESULT_WRONG;
}

/* One case's operations in a child, in order, telling the parent over `fd`
 * which one it starts ('v', 'i', 'q', 'f') and how each ended ('0' +
 * result). */
static void child_ops(const sweep *sw, int fd)
{
    char msg[2];
    if (sw->query_path) {
        msg[0] = 'q';
        (void)!write(fd, msg, 1);
        msg[0] = (char)('0' + op_query(sw, NULL));
        (void)!write(fd, msg, 1);
        msg[0] = 'f';
        (void)!write(fd, msg, 1);
        msg[0] = (char)('0' + op_query_flags(sw, NULL, SIMSTORE_OPEN_FULL_WALK));
        (void)!write(fd, msg, 1);
        return;
    }
    msg[0] = 'v';
    (void)!write(fd, msg, 1);
    msg[0] = (char)('0' + op_verify(sw));
    (void)!write(fd, msg, 1);
    msg[0] = 'i';
    (void)!write(fd, msg, 1);
    msg[0] = (char)('0' + op_inspect(sw));
    (void)!write(fd, msg, 1);
    msg[0] = 'q';
    (void)!write(fd, msg, 1);
    msg[0] = (char)('0' + op_query(sw, NULL));
    (void)!write(fd, msg, 1);
}

/* ---- cases -------------------------------------------------------------------- */

enum { OP_VERIFY, OP_INSPECT, OP_QUERY, OP_QUERY_WALKED, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"verify", "inspect", "query",
                                               "query after the walk"};
enum { OUT_OK, OUT_ERROR, OUT_WRONG, OUT_CRASH, OUT_HANG, OUT_NOTRUN, OUT_COUNT };
static const char *const out_names[OUT_COUNT] = {"ok", "error", "WRONG", "CRASH", "HANG", "-"};

typedef struct tally {
    unsigned long cases;
    unsigned long n[OP_COUNT][OUT_COUNT];
} tally;

static void restore_file(file_image *f, const char *path)
{
    assert_int_equal(test_write_file(path, f->data, f->size), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    f->mtime = st.st_mtim;
}

/* Undo a case: the damaged file, lock.mdb (every LMDB open writes its
 * reader table), and any other file a child wrote (its size or time
 * changed): rewriting every file each case cost more than the case. */
static void restore_files(sweep *sw, const file_image *damaged)
{
    for (size_t i = 0; i < sw->nfiles; i++) {
        file_image *f = &sw->files[i];
        char *p = test_path(sw->dir, f->name);
        struct stat st;
        if (f == damaged || strcmp(f->name, "lock.mdb") == 0 || stat(p, &st) != 0 ||
            (size_t)st.st_size != f->size || st.st_mtim.tv_sec != f->mtime.tv_sec ||
            st.st_mtim.tv_nsec != f->mtime.tv_nsec)
            restore_file(f, p);
        free(p);
    }
}

/* One way of damaging the store: a byte of file `file` XORed with `mask`, or
 * (truncate) the file cut to `at` bytes; none for the undamaged store. */
typedef struct damage {
    size_t file;
    size_t at;
    uint8_t mask;
    uint8_t truncate;
    uint8_t none;
} damage;

static int write_damaged(const sweep *sw, const damage *c)
{
    const file_image *f = &sw->files[c->file];
    char *p = test_path(sw->dir, f->name);
    int rc;
    if (c->truncate) {
        rc = test_write_file(p, f->data, c->at);
    } else {
        uint8_t *copy = malloc(f->size);
        memcpy(copy, f->data, f->size);
        copy[c->at] ^= c->mask;
        rc = test_write_file(p, copy, f->size);
        free(copy);
    }
    free(p);
    return rc;
}

/* Cases a child runs before it exits: forking (and, under a sanitizer,
 * tearing down) a process per case cost more than the case. Each case's
 * files are restored before the next, as the parent would. */
#define CASES_PER_CHILD 64

/* A child: cases [from, to), each marked 'c', damaged, its operations run
 * (child_ops), undone, and marked 'e'. */
static void child_cases(sweep *sw, const damage *cases, size_t from, size_t to, int fd)
{
    for (size_t i = from; i < to; i++) {
        alarm(CHILD_TIMEOUT_MS / 1000 + 5); /* belt and braces */
        (void)!write(fd, "c", 1);
        if (!cases[i].none && write_damaged(sw, &cases[i]) != 0)
            _exit(3);
        child_ops(sw, fd);
        restore_files(sw, cases[i].none ? NULL : &sw->files[cases[i].file]);
        (void)!write(fd, "e", 1);
    }
    _exit(0);
}

/* Run n cases, in children of CASES_PER_CHILD; fill out[case][op]. A case
 * whose child dies or outlives CHILD_TIMEOUT_MS is that case's CRASH or
 * HANG; its files are restored and a new child goes on after it. */
static void run_cases(sweep *sw, const damage *cases, size_t n, int (*out)[OP_COUNT])
{
    for (size_t i = 0; i < n; i++)
        for (int op = 0; op < OP_COUNT; op++)
            out[i][op] = OUT_NOTRUN;
    size_t next = 0;
    while (next < n) {
        size_t to = n - next < CASES_PER_CHILD ? n : next + CASES_PER_CHILD;
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child_cases(sw, cases, next, to, fds[1]);
        }
        close(fds[1]);
        size_t cur = next; /* the case under way */
        int started = 0, current = -1, last = -1, hung = 0;
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
            struct pollfd p = {fds[0], POLLIN, 0};
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            long elapsed = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
            if (elapsed >= CHILD_TIMEOUT_MS) {
                hung = 1;
                kill(pid, SIGKILL);
                break;
            }
            int pr = poll(&p, 1, (int)(CHILD_TIMEOUT_MS - elapsed));
            if (pr <= 0)
                continue;
            char buf[256];
            ssize_t got = read(fds[0], buf, sizeof buf);
            if (got <= 0)
                break;
            for (ssize_t i = 0; i < got; i++) {
                char c = buf[i];
                if (c == 'c') {
                    started = 1;
                    current = last = -1;
                    clock_gettime(CLOCK_MONOTONIC, &t0); /* each case its own time */
                } else if (c == 'e') {
                    started = 0;
                    cur++;
                } else if (c == 'v' || c == 'i' || c == 'q' || c == 'f') {
                    current = last = c == 'v'   ? OP_VERIFY
                                     : c == 'i' ? OP_INSPECT
                                     : c == 'q' ? OP_QUERY
                                                : OP_QUERY_WALKED;
                } else if (current >= 0 && cur < n) {
                    out[cur][current] = c - '0';
                    current = -1;
                }
            }
        }
        close(fds[0]);
        int status;
        waitpid(pid, &status, 0);
        int crashed = !hung && !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (cur < to && (started || hung || crashed)) {
            /* The case under way ended the child: blame the operation it
             * was in, or, between operations, the last one that began (the
             * first of the case when none had). */
            int op = current >= 0     ? current
                     : last >= 0      ? last
                     : sw->query_path ? OP_QUERY
                                      : OP_VERIFY;
            out[cur][op] = hung ? OUT_HANG : OUT_CRASH;
            restore_files(sw, cases[cur].none ? NULL : &sw->files[cases[cur].file]);
            cur++;
        }
        next = cur;
    }
}

/* Run the undamaged store as a case. */
static void run_undamaged(sweep *sw, int out[OP_COUNT])
{
    damage none = {0, 0, 0, 0, 1};
    run_cases(sw, &none, 1, (int(*)[OP_COUNT])out);
}

/* Judge one case; returns 0 when it passes. */
static int judge(const sweep *sw, const char *what, const int out[OP_COUNT], int table_file)
{
    char why[128] = "";
    for (int op = 0; op < OP_COUNT; op++)
        if (out[op] == OUT_WRONG || out[op] == OUT_CRASH || out[op] == OUT_HANG)
            snprintf(why, sizeof why, "%s: %s", op_names[op], out_names[out[op]]);
    if (!why[0] && out[OP_VERIFY] == OUT_OK &&
        (out[OP_QUERY] != OUT_OK || out[OP_INSPECT] != OUT_OK))
        snprintf(why, sizeof why, "verify found nothing, but %s",
                 out[OP_QUERY] != OUT_OK ? "query failed" : "inspect failed");
    if (!why[0] && table_file && out[OP_VERIFY] == OUT_OK)
        snprintf(why, sizeof why, "verify missed damage to a table file");
    /* Lazy checks read a subset of what the walk at open reads, with the
     * same rules: where the walk finds nothing, they find nothing either. */
    if (!why[0] && sw->query_path && out[OP_QUERY_WALKED] == OUT_OK && out[OP_QUERY] != OUT_OK)
        snprintf(why, sizeof why, "the query failed with lazy checks, not after the walk");
    if (!why[0])
        return 0;
    fprintf(stderr, "FAIL %s: %s\n", what, why);
    return 1;
}

static void count(tally *t, const int out[OP_COUNT])
{
    t->cases++;
    for (int op = 0; op < OP_COUNT; op++)
        t->n[op][out[op]]++;
}

/* Run the cases, count them into t and judge each (table_file: damage to a
 * table file must be found by verify, unless the file is empty); returns
 * the failures. */
static int run_and_judge(sweep *sw, const damage *cases, size_t nc, int table_file, tally *t)
{
    int(*outs)[OP_COUNT] = calloc(nc ? nc : 1, sizeof *outs);
    assert_non_null(outs);
    run_cases(sw, cases, nc, outs);
    int failures = 0;
    for (size_t i = 0; i < nc; i++) {
        const file_image *f = &sw->files[cases[i].file];
        count(t, outs[i]);
        char what[320];
        if (cases[i].truncate)
            snprintf(what, sizeof what, "%s truncated to %zu bytes", f->name, cases[i].at);
        else
            snprintf(what, sizeof what, "%s byte %zu ^ 0x%02x", f->name, cases[i].at,
                     cases[i].mask);
        failures += judge(sw, what, outs[i], table_file && (!cases[i].truncate || f->size > 0));
    }
    free(outs);
    return failures;
}

static void print_tally(const char *name, const tally *t)
{
    fprintf(stderr, "%-24s %6lu cases", name, t->cases);
    for (int op = 0; op < OP_COUNT; op++) {
        fprintf(stderr, " | %s", op_names[op]);
        for (int o = 0; o < OUT_COUNT; o++)
            if (t->n[op][o])
                fprintf(stderr, " %s %lu", out_names[o], t->n[op][o]);
    }
    fputc('\n', stderr);
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The offsets to damage in a file of `size` bytes. LMDB files get their page
 * headers (first 64 bytes of each 4 KiB page) densely and their bodies
 * sparsely; small files get every byte in full mode. */
static size_t *pick_offsets(const sweep *sw, test_rng *r, const char *name, size_t size, size_t *n)
{
    size_t cap = size + 8192, k = 0;
    size_t *v = malloc(cap * sizeof *v);
    int lmdb = strcmp(name, "data.mdb") == 0 || strcmp(name, "lock.mdb") == 0;
    size_t density = sw->full ? 1 : test_sampled() ? 64 : UNDER_SANITIZER ? 16 : 6;
    if (lmdb) {
        size_t page = 4096;
        /* Every byte LMDB's open reads itself: the two meta pages' headers
         * and MDB_meta (page size, flags, roots, last page, txnid). */
        for (size_t p = 0; p < 2 * page && strcmp(name, "data.mdb") == 0; p += page)
            for (size_t o = 0; o < 160 && p + o < size; o++)
                v[k++] = p + o;
        for (size_t p = 0; p < size; p += page) {
            for (size_t o = 0; o < 64 && p + o < size; o += (sw->full ? 1 : density / 2 + 1))
                v[k++] = p + o;
            size_t body = sw->full ? 96 : 48 / density + 2;
            for (size_t j = 0; j < body && p + 64 < size; j++) {
                size_t lim = size - (p + 64) < page - 64 ? size - (p + 64) : page - 64;
                v[k++] = p + 64 + test_rng_below(r, lim);
            }
        }
    } else {
        /* The paragraph sweep is for the paragraph index (in data.mdb and its
         * own segments): tables and document files, the formats the first
         * sweep covers at full density, at a quarter of it there. */
        if (sw->paragraphs && !sw->full)
            density *= 4;
        for (size_t o = 0; o < size; o += density)
            v[k++] = o;
        /* The footer and index matter most: every byte there, of the table
         * files in each segment's table 0 (the others' are read by the same
         * code: every third byte, sampled every eighth; in full mode every
         * byte of every file). */
        int other_table = strstr(name, ".tbl") && !strstr(name, "-t000.");
        size_t tail = sw->full || !other_table ? 1 : test_sampled() ? 8 : 3;
        for (size_t o = size > 96 ? size - 96 : 0; o < size; o += tail)
            v[k++] = o;
    }
    qsort(v, k, sizeof *v, cmp_size);
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (w == 0 || v[i] != v[w - 1])
            v[w++] = v[i];
    *n = w;
    return v;
}

static void load_files(sweep *sw)
{
    DIR *d = opendir(sw->dir);
    assert_non_null(d);
    struct dirent *e;
    sw->files = calloc(64, sizeof *sw->files);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        assert_true(sw->nfiles < 64);
        file_image *f = &sw->files[sw->nfiles++];
        snprintf(f->name, sizeof f->name, "%s", e->d_name);
        char *p = test_path(sw->dir, e->d_name);
        f->data = test_read_file(p, &f->size);
        if (!f->data && f->size == 0)
            f->data = malloc(1);
        assert_non_null(f->data);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        f->mtime = st.st_mtim;
        free(p);
    }
    closedir(d);
}

static void sweep_store(int paragraphs)
{
    sweep sw;
    memset(&sw, 0, sizeof sw);
    sw.paragraphs = paragraphs;
    const char *mode = getenv("SIMSTORE_SWEEP");
    sw.report = mode && strcmp(mode, "report") == 0;
    sw.full = mode && (strcmp(mode, "full") == 0 || sw.report);
    test_rng r;
    test_rng_init(&r, paragraphs ? "paragraph corruption sweep" : "corruption sweep",
                  paragraphs ? 20261124 : 20240611);
    char *tmp = test_tmpdir("sweep");
    sw.dir = test_path(tmp, "store");
    build_sweep_store(&sw, &r);

    /* The undamaged answers. */
    size_t nwant = sw.nqueries + para_queries(&sw);
    sw.want = calloc(nwant, sizeof *sw.want);
    char **texts = calloc(nwant, sizeof *texts);
    assert_int_equal(op_query(&sw, &texts), RESULT_OK);
    size_t nonempty = 0;
    for (size_t i = 0; i < nwant; i++) {
        sw.want[i].ids = calloc(1, sizeof(char *));
        sw.want[i].ids[0] = texts[i];
        nonempty += texts[i][0] != '\0';
    }
    free(texts);
    assert_true(nonempty > sw.nqueries / 2);
    assert_int_equal(inspect_summary(sw.dir, &sw.inspect_want), RESULT_OK);
    load_files(&sw);

    /* The undamaged store passes every operation. */
    int out[OP_COUNT];
    run_undamaged(&sw, out);
    for (int op = 0; op < OP_COUNT; op++)
        assert_true(out[op] == OUT_OK || out[op] == OUT_NOTRUN);

    int failures = 0;
    tally total;
    memset(&total, 0, sizeof total);
    for (size_t fi = 0; fi < sw.nfiles; fi++) {
        const file_image *f = &sw.files[fi];
        int table_file = strstr(f->name, ".tbl") != NULL;
        tally t;
        memset(&t, 0, sizeof t);
        size_t n;
        size_t *offs = pick_offsets(&sw, &r, f->name, f->size, &n);
        /* Flips, then truncations: every length in full mode for small
         * files; sampled otherwise, always including 0, 1 and around every
         * page. */
        size_t step = sw.full ? (f->size > 20000 ? 509 : 7) : (f->size > 20000 ? 4093 : 97);
        size_t cap = 2 * n + f->size / (step < 16 ? step : 1) + 64, nc = 0;
        damage *cases = calloc(cap, sizeof *cases);
        assert_non_null(cases);
        for (size_t i = 0; i < n; i++)
            for (int pass = 0; pass < 2; pass++)
                if (sw.full || pass == 0 || !(i & 1))
                    cases[nc++] = (damage){fi, offs[i], pass ? 0x01 : 0xFF, 0, 0};
        for (size_t len = 0; len < f->size; len += (len < 16 ? 1 : step)) {
            assert_true(nc < cap);
            cases[nc++] = (damage){fi, len, 0, 1, 0};
        }
        free(offs);
        failures += run_and_judge(&sw, cases, nc, table_file, &t);
        free(cases);
        print_tally(f->name, &t);
        total.cases += t.cases;
        for (int op = 0; op < OP_COUNT; op++)
            for (int o = 0; o < OUT_COUNT; o++)
                total.n[op][o] += t.n[op][o];
    }
    print_tally("all files", &total);
    test_rmtree(tmp);
    free(tmp);
    for (size_t i = 0; i < nwant; i++) {
        free(sw.want[i].ids[0]);
        free(sw.want[i].ids);
    }
    for (size_t i = 0; i < sw.nfiles; i++)
        free(sw.files[i].data);
    free(sw.files);
    free(sw.want);
    free(sw.queries);
    free(sw.docs);
    free(sw.inspect_want);
    free(sw.dir);
    if (!sw.report)
        assert_int_equal(failures, 0);
}

/* The query-path sweep (format/store.md, "Trusting LMDB"): every byte of
 * data.mdb's pages (SIMSTORE_SWEEP=full: both flips of each; by default,
 * within ctest's time, every byte of each page's first 64 bytes, where the
 * headers and node pointers lie, and every 37th byte after), each
 * damaged copy queried by a child with lazy checks and again with the walk
 * at open. Both must answer correctly or fail; where the walk finds nothing
 * wrong, the lazy checks must not fail either. */
static void test_corruption__query_path(void **state)
{
    (void)state;
    sweep sw;
    memset(&sw, 0, sizeof sw);
    const char *mode = getenv("SIMSTORE_SWEEP");
    sw.report = mode && strcmp(mode, "report") == 0;
    sw.full = mode && (strcmp(mode, "full") == 0 || sw.report);
    sw.query_path = 1;
    test_rng r;
    test_rng_init(&r, "query path sweep", 20261125);
    char *tmp = test_tmpdir("qsweep");
    sw.dir = test_path(tmp, "store");
    build_sweep_store(&sw, &r);
    sw.want = calloc(sw.nqueries, sizeof *sw.want);
    char **texts = calloc(sw.nqueries, sizeof *texts);
    assert_int_equal(op_query(&sw, &texts), RESULT_OK);
    for (size_t i = 0; i < sw.nqueries; i++) {
        sw.want[i].ids = calloc(1, sizeof(char *));
        sw.want[i].ids[0] = texts[i];
    }
    free(texts);
    load_files(&sw);
    int out[OP_COUNT];
    run_undamaged(&sw, out);
    assert_int_equal(out[OP_QUERY], OUT_OK);
    assert_int_equal(out[OP_QUERY_WALKED], OUT_OK);
    const file_image *f = NULL;
    size_t fi = 0;
    for (size_t i = 0; i < sw.nfiles; i++)
        if (strcmp(sw.files[i].name, "data.mdb") == 0)
            f = &sw.files[fi = i];
    assert_non_null(f);
    int failures = 0;
    tally t;
    memset(&t, 0, sizeof t);
    /* Page headers, node pointers and the first nodes densely; the rest of
     * each page (nodes: keys, ids, records) at a stride. */
    size_t head = test_sampled() ? 16 : UNDER_SANITIZER ? 32 : 64;
    size_t stride = sw.full ? 1 : test_sampled() ? 257 : UNDER_SANITIZER ? 127 : 37;
    damage *cases = calloc(2 * f->size + 1, sizeof *cases);
    assert_non_null(cases);
    size_t nc = 0;
    for (size_t off = 0; off < f->size; off += (sw.full || off % 4096 < head) ? 1 : stride)
        for (int pass = 0; pass < 2; pass++)
            if (sw.full || pass == 0 || !(off & 1))
                cases[nc++] = (damage){fi, off, pass ? 0x01 : 0xFF, 0, 0};
    failures += run_and_judge(&sw, cases, nc, 0, &t);
    free(cases);
    print_tally("data.mdb, query path", &t);
    test_rmtree(tmp);
    free(tmp);
    for (size_t i = 0; i < sw.nqueries; i++) {
        free(sw.want[i].ids[0]);
        free(sw.want[i].ids);
    }
    for (size_t i = 0; i < sw.nfiles; i++)
        free(sw.files[i].data);
    free(sw.files);
    free(sw.want);
    free(sw.queries);
    free(sw.docs);
    free(sw.dir);
    if (!sw.report)
        assert_int_equal(failures, 0);
}

static void test_corruption__sweep(void **state)
{
    (void)state;
    sweep_store(0);
}

static void test_corruption__sweep_paragraphs(void **state)
{
    (void)state;
    sweep_store(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corruption__sweep),
        cmocka_unit_test(test_corruption__sweep_paragraphs),
        cmocka_unit_test(test_corruption__query_path),
    };
    /* SIMSTORE_TEST_FILTER=test_corruption__query_path runs one sweep. */
    const char *filter = getenv("SIMSTORE_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
