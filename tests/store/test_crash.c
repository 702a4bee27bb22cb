/* test_crash.c: crash safety of build, build --replace, add, delete and
 * compact (documents and fingerprint-only stores).
 *
 * Each operation runs in a child process (tests/store/crash_op.c) and is
 * interrupted:
 *   - by injected faults: for each fault point (write, fsync, rename,
 *     mdb_commit, and mdb_committed just past the commit point) and
 *     N = 1, 2, ... until the operation completes without reaching the N-th
 *     call, SIMSTORE_FAULT=OP:N:crash (the process ends there, as in a power
 *     cut) and SIMSTORE_FAULT=OP:N (the call fails with EIO); with
 *     SIMSTORE_SAMPLED, the sanitizer pass, crashes at every fourth N and
 *     errors at every seventh (the first and last calls and the named points
 *     always);
 *   - by SIGKILL at seeded random moments on stores where the operation takes
 *     tens of milliseconds (sampled: four moments an operation).
 * After each interruption the store must open read-only and hold exactly one
 * committed state: the one before the operation or the one after it (for
 * operations that compact on their own, also the state between the commit
 * and the compaction), checked by querying every fingerprint of the universe
 * at k = 0 and comparing stats, and simstore_verify() must find no error; an
 * operation that reported failure must have left the state before it. A
 * writer open must then succeed and leave exactly the files of that state
 * (no *.tmp-*, no unreferenced *.tbl); the next
 * writer (the operation again, or the next build of the path) must succeed
 * and leave no STORE.tmp-* directory. The paragraph scenarios do the same on
 * stores with a paragraph index (format/store.md, "Paragraphs"), whose
 * paragraph counts must match the state too (and verify checks the index
 * against the records and the paragraph tables). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "simstore.h"
#include "testutil.h"

#include "crash_docs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CRASH_OP
#error "CRASH_OP must name the crash_op helper program"
#endif

#define MAX_STATES 3
#define FAULT_CRASH_STATUS 86

/* ---- scenarios -------------------------------------------------------------- */

enum op_kind { OP_BUILD, OP_ADD, OP_DELETE, OP_COMPACT };
static const char *const op_names[] = {"build", "add", "delete", "compact"};

typedef struct op {
    enum op_kind kind;
    uint64_t first, count, step;
    int replace;
    int no_auto;
} op;

typedef struct scenario {
    const char *name;
    int fp_only;
    uint64_t universe; /* documents 0 .. universe-1 may appear */
    op setup[12];      /* builds the store the action starts from (none: no store) */
    size_t nsetup;
    op action;
    /* The sweep must see a trial whose interruption left leftovers that the
     * next writer removed (files of a dead writer, an old store beside the
     * path). */
    int expect_leftovers;
    /* Windows the sweep must reach, with what they leave (see point). */
    struct point {
        const char *fault; /* a fault op */
        unsigned n;        /* its N-th call; 0: the last call */
        const char *state; /* "before", "mid" or "after" */
        unsigned left;     /* LEFT_* bits found before the next writer */
    } points[4];
    int paragraphs; /* the store has a paragraph index */
} scenario;

/* What an interrupted writer left for the next one. */
#define LEFT_TMPFILE 1u /* a *.tmp-* file in the store */
#define LEFT_TBL 2u     /* a table file its state does not name */
#define LEFT_TMPDIR 4u  /* a STORE.tmp-* directory beside the store */
#define LEFT_OTHER 8u   /* anything else (never expected) */

#define BUILD(f, n)                                                                                \
    {                                                                                              \
        OP_BUILD, f, n, 1, 0, 1                                                                    \
    }
#define ADD(f, n)                                                                                  \
    {                                                                                              \
        OP_ADD, f, n, 1, 0, 1                                                                      \
    }
#define ADD_AUTO(f, n)                                                                             \
    {                                                                                              \
        OP_ADD, f, n, 1, 0, 0                                                                      \
    }
#define DEL(f, n, k)                                                                               \
    {                                                                                              \
        OP_DELETE, f, n, k, 0, 1                                                                   \
    }
#define DEL_AUTO(f, n, k)                                                                          \
    {                                                                                              \
        OP_DELETE, f, n, k, 0, 0                                                                   \
    }
#define COMPACT                                                                                    \
    {                                                                                              \
        OP_COMPACT, 0, 0, 1, 0, 1                                                                  \
    }
#define REPLACE(f, n)                                                                              \
    {                                                                                              \
        OP_BUILD, f, n, 1, 1, 1                                                                    \
    }

/* ---- the model ------------------------------------------------------------------ */

static void model_apply(const scenario *sc, const op *o, uint8_t *live)
{
    switch (o->kind) {
    case OP_BUILD:
        memset(live, 0, sc->universe);
        /* fall through */
    case OP_ADD:
        for (uint64_t i = o->first; i < o->first + o->count; i++)
            live[i] = 1;
        break;
    case OP_DELETE:
        for (uint64_t j = 0; j < o->count; j++)
            live[o->first + j * o->step] = 0;
        break;
    case OP_COMPACT: break;
    }
}

/* ---- files ------------------------------------------------------------------------ */

typedef struct names {
    char **v;
    size_t n;
} names;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* The entries of dir, sorted (an empty list when dir does not exist). */
static names list_dir(const char *dir)
{
    names l = {NULL, 0};
    DIR *d = opendir(dir);
    if (!d)
        return l;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (l.n == cap) {
            cap = cap ? cap * 2 : 16;
            l.v = realloc(l.v, cap * sizeof *l.v);
            assert_non_null(l.v);
        }
        l.v[l.n++] = strdup(e->d_name);
    }
    closedir(d);
    if (l.n)
        qsort(l.v, l.n, sizeof *l.v, cmp_str);
    return l;
}

static int names_equal(const names *a, const names *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]))
            return 0;
    return 1;
}

static void names_print(const char *what, const names *l)
{
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < l->n; i++)
        fprintf(stderr, " %s", l->v[i]);
    fprintf(stderr, "\n");
}

/* Entries of dir whose names start with prefix. */
static size_t count_prefixed(const char *dir, const char *prefix)
{
    names l = list_dir(dir);
    size_t n = 0;
    for (size_t i = 0; i < l.n; i++)
        if (strncmp(l.v[i], prefix, strlen(prefix)) == 0)
            n++;
    names_free(&l);
    return n;
}

static void copy_file(const char *from, const char *to)
{
    size_t size;
    uint8_t *data = test_read_file(from, &size);
    assert_non_null(data);
    assert_int_equal(test_write_file(to, data, size), 0);
    free(data);
}

/* Copy the regular files of a store directory. */
static void copy_store(const char *from, const char *to)
{
    assert_int_equal(mkdir(to, 0755), 0);
    names l = list_dir(from);
    for (size_t i = 0; i < l.n; i++) {
        char *a = test_path(from, l.v[i]), *b = test_path(to, l.v[i]);
        copy_file(a, b);
        free(a);
        free(b);
    }
    names_free(&l);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- running the helper ------------------------------------------------------------ */

typedef struct ctx {
    uint64_t seed;    /* the universe's seed */
    unsigned threads; /* for the helper */
    unsigned tables;  /* for builds; 0: the automatic design */
    char *root;       /* per scenario: base/, work/ */
    char *base_dir, *base_store, *work_dir, *work_store, *log;
} ctx;

/* Start crash_op for `o` on `store`; fault (may be NULL) goes to
 * SIMSTORE_FAULT; when ready_rd is not NULL it receives a pipe end that
 * becomes readable when the operation starts. */
static pid_t spawn_op(const ctx *c, const scenario *sc, const op *o, const char *store,
                      const char *fault, int *ready_rd)
{
    char seed[32], first[32], count[32], step[32], threads[16], ready[16], tables[16];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
    snprintf(first, sizeof first, "%llu", (unsigned long long)o->first);
    snprintf(count, sizeof count, "%llu", (unsigned long long)o->count);
    snprintf(step, sizeof step, "%llu", (unsigned long long)o->step);
    snprintf(threads, sizeof threads, "%u", c->threads);
    snprintf(tables, sizeof tables, "%u", c->tables);
    int pfd[2] = {-1, -1};
    if (ready_rd)
        assert_int_equal(pipe(pfd), 0);
    snprintf(ready, sizeof ready, "%d", pfd[1]);
    const char *argv[24];
    int a = 0;
    argv[a++] = CRASH_OP;
    argv[a++] = op_names[o->kind];
    argv[a++] = store;
    argv[a++] = "--seed";
    argv[a++] = seed;
    argv[a++] = "--threads";
    argv[a++] = threads;
    if (o->kind == OP_BUILD || o->kind == OP_ADD || o->kind == OP_DELETE) {
        argv[a++] = "--first";
        argv[a++] = first;
        argv[a++] = "--count";
        argv[a++] = count;
        argv[a++] = "--step";
        argv[a++] = step;
    }
    if (o->kind == OP_BUILD && sc->fp_only)
        argv[a++] = "--fp-only";
    if (o->kind == OP_BUILD && sc->paragraphs)
        argv[a++] = "--paragraphs";
    if (o->kind == OP_BUILD) {
        argv[a++] = "--tables";
        argv[a++] = tables;
    }
    if (o->replace)
        argv[a++] = "--replace";
    if (o->no_auto)
        argv[a++] = "--no-auto";
    if (ready_rd) {
        argv[a++] = "--ready";
        argv[a++] = ready;
    }
    argv[a] = NULL;
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (fault)
            setenv("SIMSTORE_FAULT", fault, 1);
        else
            unsetenv("SIMSTORE_FAULT");
        int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (pfd[0] >= 0)
            close(pfd[0]);
        execv(CRASH_OP, (char *const *)argv);
        _exit(127);
    }
    if (ready_rd) {
        close(pfd[1]);
        *ready_rd = pfd[0];
    }
    return pid;
}

/* Exit status, or -signal when killed. */
static int wait_op(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        assert_int_equal(errno, EINTR);
    if (WIFSIGNALED(st))
        return -WTERMSIG(st);
    return WEXITSTATUS(st);
}

static void print_log(const ctx *c)
{
    size_t n;
    uint8_t *text = test_read_file(c->log, &n);
    if (text && n)
        fprintf(stderr, "  helper output: %.*s", (int)(n > 2000 ? 2000 : n), (const char *)text);
    free(text);
}

static void run_clean(const ctx *c, const scenario *sc, const op *o, const char *store)
{
    int status = wait_op(spawn_op(c, sc, o, store, NULL, NULL));
    if (status != 0) {
        fprintf(stderr, "%s: clean %s failed with status %d\n", sc->name, op_names[o->kind],
                status);
        print_log(c);
    }
    assert_int_equal(status, 0);
}

/* ---- observing a store ------------------------------------------------------------ */

typedef struct obs {
    int exists;
    simstore_stats st;
    uint8_t *live; /* documents: ids found; fingerprint-only: unused */
    uint64_t *fps; /* fingerprint-only: distinct fingerprints found, sorted */
    size_t nfps;
} obs;

static void obs_free(obs *o)
{
    free(o->live);
    free(o->fps);
    memset(o, 0, sizeof *o);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The distinct fingerprints of the universe's documents with live[i] (every
 * document when live is NULL), sorted. */
static uint64_t *universe_fps(const ctx *c, const scenario *sc, const uint8_t *live, size_t *n)
{
    uint64_t *v = malloc((sc->universe + 1) * sizeof *v);
    assert_non_null(v);
    size_t k = 0;
    for (uint64_t i = 0; i < sc->universe; i++)
        if (!live || live[i])
            v[k++] = cdoc_fp(c->seed, i);
    qsort(v, k, sizeof *v, cmp_u64);
    size_t w = 0;
    for (size_t i = 0; i < k; i++)
        if (w == 0 || v[i] != v[w - 1])
            v[w++] = v[i];
    *n = w;
    return v;
}

/* Open read-only, read stats, query every fingerprint of the universe at k=0.
 * Returns 0, or -1 with the reason in why. */
static int observe(const ctx *c, const scenario *sc, const char *store, obs *ob, char *why,
                   size_t whysz)
{
    memset(ob, 0, sizeof *ob);
    if (!exists(store))
        return 0;
    ob->exists = 1;
    simstore *s;
    int rc = simstore_open(store, SIMSTORE_OPEN_READONLY, &s);
    if (rc) {
        snprintf(why, whysz, "read-only open failed: %s", simstore_last_error());
        return -1;
    }
    simstore_query *q = NULL;
    rc = simstore_get_stats(s, &ob->st);
    if (rc == SIMSTORE_OK)
        rc = simstore_query_new(s, 0, &q);
    if (rc) {
        snprintf(why, whysz, "stats/query_new failed: %s", simstore_last_error());
        simstore_close(s);
        return -1;
    }
    ob->live = calloc(sc->universe, 1);
    ob->fps = malloc((sc->universe + 1) * sizeof *ob->fps);
    assert_true(ob->live && ob->fps);
    size_t nprobe;
    uint64_t *probes = universe_fps(c, sc, NULL, &nprobe);
    int bad = 0;
    for (size_t p = 0; p < nprobe && !bad; p++) {
        const simstore_match *m;
        size_t n;
        rc = simstore_query_fp(q, probes[p], 0, &m, &n);
        if (rc) {
            snprintf(why, whysz, "query %016llx failed: %s", (unsigned long long)probes[p],
                     simstore_last_error());
            bad = 1;
            break;
        }
        for (size_t i = 0; i < n; i++) {
            if (m[i].fp != probes[p] || m[i].distance != 0) {
                snprintf(why, whysz, "query %016llx answered %016llx at %u",
                         (unsigned long long)probes[p], (unsigned long long)m[i].fp, m[i].distance);
                bad = 1;
                break;
            }
            if (sc->fp_only) {
                if (m[i].id) {
                    snprintf(why, whysz, "a fingerprint-only store answered an id");
                    bad = 1;
                    break;
                }
                ob->fps[ob->nfps++] = m[i].fp;
                continue;
            }
            long long idx = m[i].id ? cdoc_parse_id(m[i].id, m[i].id_len) : -1;
            if (idx < 0 || (uint64_t)idx >= sc->universe ||
                cdoc_fp(c->seed, (uint64_t)idx) != m[i].fp) {
                snprintf(why, whysz, "query %016llx answered an unknown document '%.*s'",
                         (unsigned long long)probes[p], (int)m[i].id_len,
                         m[i].id ? m[i].id : "(null)");
                bad = 1;
                break;
            }
            ob->live[idx] = 1;
        }
    }
    free(probes);
    simstore_query_free(q);
    simstore_close(s);
    return bad ? -1 : 0;
}

/* ---- expected states ------------------------------------------------------------------ */

typedef struct xstate {
    const char *label;
    int exists;
    uint8_t *live;
    simstore_stats st;
    names files; /* the store directory's entries */
} xstate;

static int obs_matches(const ctx *c, const scenario *sc, const obs *ob, const xstate *x)
{
    if (ob->exists != x->exists)
        return 0;
    if (!x->exists)
        return 1;
    if (ob->st.documents != x->st.documents || ob->st.fingerprints != x->st.fingerprints ||
        ob->st.segments != x->st.segments || ob->st.table_fps != x->st.table_fps)
        return 0;
    if (!sc->fp_only)
        return memcmp(ob->live, x->live, sc->universe) == 0;
    size_t n;
    uint64_t *want = universe_fps(c, sc, x->live, &n);
    int same = n == ob->nfps && (n == 0 || memcmp(want, ob->fps, n * sizeof *want) == 0);
    free(want);
    return same;
}

static void describe_obs(const obs *ob)
{
    if (!ob->exists) {
        fprintf(stderr, "  observed: no store\n");
        return;
    }
    fprintf(stderr,
            "  observed: %llu documents, %llu fingerprints, %llu segments, %llu in tables\n",
            (unsigned long long)ob->st.documents, (unsigned long long)ob->st.fingerprints,
            (unsigned long long)ob->st.segments, (unsigned long long)ob->st.table_fps);
}

static void describe_state(const xstate *x)
{
    if (!x->exists) {
        fprintf(stderr, "  %s: no store\n", x->label);
        return;
    }
    fprintf(stderr, "  %s: %llu documents, %llu fingerprints, %llu segments, %llu in tables\n",
            x->label, (unsigned long long)x->st.documents, (unsigned long long)x->st.fingerprints,
            (unsigned long long)x->st.segments, (unsigned long long)x->st.table_fps);
}

/* Record the state of a store made by clean operations, after checking it
 * holds what the model says. */
static void capture(const ctx *c, const scenario *sc, const char *store, const uint8_t *model,
                    const char *label, xstate *x)
{
    memset(x, 0, sizeof *x);
    x->label = label;
    x->live = malloc(sc->universe ? sc->universe : 1);
    assert_non_null(x->live);
    memcpy(x->live, model, sc->universe);
    obs ob;
    char why[512] = "";
    if (observe(c, sc, store, &ob, why, sizeof why)) {
        fprintf(stderr, "%s: %s state: %s\n", sc->name, label, why);
        fail();
    }
    x->exists = ob.exists;
    x->st = ob.st;
    x->files = list_dir(store);
    if (!obs_matches(c, sc, &ob, x)) {
        fprintf(stderr, "%s: the %s state differs from the model\n", sc->name, label);
        describe_obs(&ob);
        fail();
    }
    obs_free(&ob);
}

static void xstate_free(xstate *x)
{
    free(x->live);
    names_free(&x->files);
}

typedef struct states {
    xstate s[MAX_STATES]; /* before, [mid,] after */
    size_t n;
    size_t after; /* index of "after" */
    int has_mid;
} states;

static void reset_work(const ctx *c, int with_store)
{
    test_rmtree(c->work_dir);
    assert_int_equal(mkdir(c->work_dir, 0755), 0);
    if (with_store)
        copy_store(c->base_store, c->work_store);
}

/* Build the base store and the states before, (mid,) after the action. */
static void prepare(const ctx *c, const scenario *sc, states *ss)
{
    memset(ss, 0, sizeof *ss);
    test_rmtree(c->base_dir);
    assert_int_equal(mkdir(c->base_dir, 0755), 0);
    uint8_t *model = calloc(sc->universe, 1);
    assert_non_null(model);
    for (size_t i = 0; i < sc->nsetup; i++) {
        run_clean(c, sc, &sc->setup[i], c->base_store);
        model_apply(sc, &sc->setup[i], model);
    }
    capture(c, sc, c->base_store, model, "before", &ss->s[ss->n++]);
    model_apply(sc, &sc->action, model);
    int may_compact =
        (sc->action.kind == OP_ADD || sc->action.kind == OP_DELETE) && !sc->action.no_auto;
    xstate mid;
    if (may_compact) {
        reset_work(c, 1);
        op o = sc->action;
        o.no_auto = 1;
        run_clean(c, sc, &o, c->work_store);
        capture(c, sc, c->work_store, model, "mid", &mid);
    }
    reset_work(c, sc->nsetup > 0);
    run_clean(c, sc, &sc->action, c->work_store);
    xstate after;
    capture(c, sc, c->work_store, model, "after", &after);
    if (may_compact) {
        if (mid.st.segments != after.st.segments || mid.st.table_fps != after.st.table_fps) {
            ss->s[ss->n++] = mid;
            ss->has_mid = 1;
        } else {
            xstate_free(&mid);
        }
    }
    ss->after = ss->n;
    ss->s[ss->n++] = after;
    free(model);
}

static void states_free(states *ss)
{
    for (size_t i = 0; i < ss->n; i++)
        xstate_free(&ss->s[i]);
}

/* ---- checking one interrupted run ------------------------------------------------------ */

enum { ALLOW_BEFORE = 1, ALLOW_MID = 2, ALLOW_AFTER = 4 };

typedef struct tally {
    unsigned runs;
    unsigned in_state[MAX_STATES];
    unsigned leftovers; /* runs that left files the next writer had to remove */
} tally;

static size_t state_bit(const states *ss, size_t i)
{
    if (i == 0)
        return ALLOW_BEFORE;
    return i == ss->after ? ALLOW_AFTER : ALLOW_MID;
}

static int find_state(const ctx *c, const scenario *sc, const states *ss, unsigned allowed,
                      const char *where, const char *trial)
{
    obs ob;
    char why[512] = "";
    if (observe(c, sc, c->work_store, &ob, why, sizeof why)) {
        fprintf(stderr, "%s %s: %s: %s\n", sc->name, trial, where, why);
        print_log(c);
        fail();
    }
    for (size_t i = 0; i < ss->n; i++) {
        if ((state_bit(ss, i) & allowed) && obs_matches(c, sc, &ob, &ss->s[i])) {
            obs_free(&ob);
            return (int)i;
        }
    }
    fprintf(stderr, "%s %s: %s: the store is in no allowed committed state (allowed:%s%s%s)\n",
            sc->name, trial, where, (allowed & ALLOW_BEFORE) ? " before" : "",
            (allowed & ALLOW_MID) ? " mid" : "", (allowed & ALLOW_AFTER) ? " after" : "");
    describe_obs(&ob);
    for (size_t i = 0; i < ss->n; i++)
        describe_state(&ss->s[i]);
    print_log(c);
    obs_free(&ob);
    fail();
    return -1;
}

static void check_files(const scenario *sc, const xstate *x, const char *store, const char *where,
                        const char *trial)
{
    names now = list_dir(store);
    if (!names_equal(&now, &x->files)) {
        fprintf(stderr, "%s %s: %s: the store directory holds other files than its state (%s)\n",
                sc->name, trial, where, x->label);
        names_print("found", &now);
        names_print("expected", &x->files);
        fail();
    }
    names_free(&now);
}

/* simstore_verify() over the store: no error (a dead writer's leftovers are
 * warnings until the next writer removes them). */
typedef struct verify_count {
    unsigned errors, leftovers;
    char first[512];
} verify_count;

static int count_problem(void *arg, const simstore_problem *p)
{
    verify_count *v = (verify_count *)arg;
    if (!p->warning && v->errors++ == 0)
        snprintf(v->first, sizeof v->first, "%s", p->message);
    if (p->warning && p->kind == SIMSTORE_PROBLEM_LEFTOVER && v->leftovers++ == 0 && !v->errors)
        snprintf(v->first, sizeof v->first, "%s", p->message);
    return 0;
}

static void verify_store(const scenario *sc, const char *store, const char *where,
                         const char *trial)
{
    verify_count v = {0, 0, ""};
    simstore_verify_summary sum;
    int rc = simstore_verify(store, 0, count_problem, &v, &sum);
    /* Errors by the return code and the summary: they count every problem,
     * listed or not. */
    if (rc != SIMSTORE_OK || sum.errors) {
        fprintf(stderr, "%s %s: %s: verify: %s, %llu errors, %u leftovers; first: %s\n", sc->name,
                trial, where, simstore_strerror(rc), (unsigned long long)sum.errors, v.leftovers,
                v.first);
        fail();
    }
}

/* The cheaper check once the state is known: the store opens, loads every
 * table file of its state, and counts what that state counts. */
static void check_stats(const scenario *sc, const xstate *x, const char *store, const char *where,
                        const char *trial)
{
    simstore *s;
    simstore_stats st;
    int rc = simstore_open(store, SIMSTORE_OPEN_READONLY, &s);
    if (rc == SIMSTORE_OK) {
        rc = simstore_get_stats(s, &st);
        simstore_close(s);
    }
    if (rc) {
        fprintf(stderr, "%s %s: %s: %s\n", sc->name, trial, where, simstore_last_error());
        fail();
    }
    if (st.documents != x->st.documents || st.fingerprints != x->st.fingerprints ||
        st.segments != x->st.segments || st.table_fps != x->st.table_fps ||
        st.paragraph_min_words != x->st.paragraph_min_words ||
        st.paragraph_entries != x->st.paragraph_entries ||
        st.paragraph_fps != x->st.paragraph_fps ||
        st.paragraph_segments != x->st.paragraph_segments ||
        st.paragraph_table_fps != x->st.paragraph_table_fps) {
        fprintf(stderr, "%s %s: %s: the stats differ from the %s state\n", sc->name, trial, where,
                x->label);
        describe_state(x);
        fail();
    }
}

/* After an interrupted action (status: its exit status or -signal), check
 * the store and recover it as the next writer would. */
typedef struct outcome {
    int state;     /* index into the states */
    unsigned left; /* LEFT_* */
} outcome;

/* The LEFT_* bits of the entries of `now` that the state's listing lacks. */
static unsigned classify_left(const names *now, const names *want)
{
    unsigned left = 0;
    for (size_t i = 0; i < now->n; i++) {
        int known = 0;
        for (size_t j = 0; j < want->n && !known; j++)
            known = strcmp(now->v[i], want->v[j]) == 0;
        if (known)
            continue;
        size_t len = strlen(now->v[i]);
        if (strstr(now->v[i], ".tmp-"))
            left |= LEFT_TMPFILE;
        else if (len > 4 && (strcmp(now->v[i] + len - 4, ".tbl") == 0 ||
                             strcmp(now->v[i] + len - 4, ".doc") == 0))
            left |= LEFT_TBL; /* a segment's file: a table or its document file */
        else
            left |= LEFT_OTHER;
    }
    return left;
}

static outcome check_outcome(const ctx *c, const scenario *sc, const states *ss, int status,
                             unsigned allowed, const char *trial, tally *t)
{
    outcome out = {0, 0};
    int is_build = sc->action.kind == OP_BUILD;
    size_t stale_builds = count_prefixed(c->work_dir, "store.tmp-");
    if (status == 1 && is_build && stale_builds != 0) {
        fprintf(stderr, "%s %s: a failed build left a store.tmp-* directory\n", sc->name, trial);
        fail();
    }
    int si = find_state(c, sc, ss, allowed, "after the interruption", trial);
    const xstate *x = &ss->s[si];
    t->runs++;
    t->in_state[si]++;
    out.state = si;
    out.left = stale_builds ? LEFT_TMPDIR : 0;
    if (x->exists) {
        /* What the interrupted writer left, before anyone cleans. */
        names now = list_dir(c->work_store);
        out.left |= classify_left(&now, &x->files);
        names_free(&now);
        verify_store(sc, c->work_store, "after the interruption", trial);
        /* A writer open removes what dead writers left. */
        simstore *s;
        int rc = simstore_open(c->work_store, SIMSTORE_OPEN_WRITE, &s);
        if (rc) {
            fprintf(stderr, "%s %s: writer open failed: %s\n", sc->name, trial,
                    simstore_last_error());
            fail();
        }
        simstore_close(s);
        check_files(sc, x, c->work_store, "after a writer open", trial);
        check_stats(sc, x, c->work_store, "after a writer open", trial);
    }
    int leftovers = out.left != 0;
    t->leftovers += leftovers;
    if (out.left & LEFT_OTHER) {
        fprintf(stderr, "%s %s: unexpected files in the store\n", sc->name, trial);
        fail();
    }
    if (status == 1) {
        /* A writer that reports a failure removes what it wrote: nothing is
         * left for the next one (which test_crash's clean runs cover). */
        if (leftovers) {
            fprintf(stderr, "%s %s: a failed operation left files behind\n", sc->name, trial);
            fail();
        }
        return out;
    }
    /* The next writer. */
    const xstate *after = &ss->s[ss->after];
    if (is_build) {
        op o = sc->action;
        o.replace = exists(c->work_store);
        run_clean(c, sc, &o, c->work_store);
        if (count_prefixed(c->work_dir, "store.tmp-") != 0) {
            fprintf(stderr, "%s %s: a store.tmp-* directory remains after the next build\n",
                    sc->name, trial);
            fail();
        }
    } else if ((unsigned)si != ss->after) {
        op o = sc->action;
        if (state_bit(ss, (size_t)si) == ALLOW_MID)
            o = (op)COMPACT;
        run_clean(c, sc, &o, c->work_store);
    }
    check_stats(sc, after, c->work_store, "after the next writer", trial);
    check_files(sc, after, c->work_store, "after the next writer", trial);
    return out;
}

/* ---- injected faults ------------------------------------------------------------------ */

static const char *const fault_ops[] = {"write",      "fsync",         "rename",
                                        "mdb_commit", "mdb_committed", "remove"};
#define N_FAULT_OPS 6
#define FAULT_MDB_COMMITTED 4 /* a point, not a call that can fail */
#define MAX_CALLS 5000

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Whether the scenario names fault op f's n-th call among its points. */
static int names_call(const scenario *sc, int f, unsigned n)
{
    for (size_t p = 0; p < sizeof sc->points / sizeof *sc->points && sc->points[p].fault; p++)
        if (sc->points[p].n == n && strcmp(sc->points[p].fault, fault_ops[f]) == 0)
            return 1;
    return 0;
}

/* The operation with a crash at fault op f's n-th call, its outcome checked
 * into *seen: 1 if it crashed there, 0 if it completed without reaching it. */
static int crash_at(ctx *c, const scenario *sc, const states *ss, int f, unsigned n, int has_store,
                    outcome *seen, tally *total)
{
    char fault[64], trial[96];
    snprintf(fault, sizeof fault, "%s:%u:crash", fault_ops[f], n);
    snprintf(trial, sizeof trial, "SIMSTORE_FAULT=%s", fault);
    reset_work(c, has_store);
    int status = wait_op(spawn_op(c, sc, &sc->action, c->work_store, fault, NULL));
    if (status != FAULT_CRASH_STATUS && status != 0) {
        fprintf(stderr, "\n%s %s: exit status %d\n", sc->name, trial, status);
        print_log(c);
        fail();
    }
    *seen = check_outcome(c, sc, ss, status,
                          status == 0 ? ALLOW_AFTER : ALLOW_BEFORE | ALLOW_MID | ALLOW_AFTER, trial,
                          total);
    return status != 0;
}

static void fault_sweep(ctx *c, const scenario *sc)
{
    uint64_t started = now_ns();
    states ss;
    prepare(c, sc, &ss);
    int has_store = sc->nsetup > 0;
    tally total = {0};
    fprintf(stderr, "%s (%s %s):", sc->name, sc->fp_only ? "fingerprint-only" : "documents",
            op_names[sc->action.kind]);
    outcome *seen = calloc(MAX_CALLS + 1, sizeof *seen);
    assert_non_null(seen);
    unsigned points_met = 0;
    for (int f = 0; f < N_FAULT_OPS; f++) {
        unsigned calls = 0;
        char fault[64], trial[96];
        /* As a crash, until the operation completes without reaching it.
         * Sampled (the sanitizer pass): the first call, every fourth, the
         * calls the scenario names, and the last, found by stepping back
         * from the first sampled N the operation completed at. */
        unsigned done_at = 0;
        for (unsigned n = 1; !done_at; n++) {
            assert_true(n < MAX_CALLS);
            if (test_sampled() && n > 1 && n % 4 != (unsigned)f % 4 && !names_call(sc, f, n))
                continue;
            if (crash_at(c, sc, &ss, f, n, has_store, &seen[n], &total))
                calls = n;
            else
                done_at = n;
        }
        for (unsigned n = done_at - 1; n > calls; n--) {
            if (crash_at(c, sc, &ss, f, n, has_store, &seen[n], &total)) {
                calls = n;
                break;
            }
        }
        /* The windows this scenario names were reached, with the leftovers
         * they must leave (and the next writer removed, as checked above). */
        for (size_t p = 0; p < sizeof sc->points / sizeof *sc->points && sc->points[p].fault; p++) {
            const struct point *pt = &sc->points[p];
            if (strcmp(pt->fault, fault_ops[f]) != 0)
                continue;
            unsigned n = pt->n ? pt->n : calls;
            assert_true(n >= 1 && n <= calls);
            const char *label = ss.s[seen[n].state].label;
            if (strcmp(label, pt->state) != 0 || seen[n].left != pt->left) {
                fprintf(stderr, "\n%s %s:%u:crash: state %s, leftovers %#x; expected %s, %#x\n",
                        sc->name, pt->fault, n, label, seen[n].left, pt->state, pt->left);
                fail();
            }
            points_met++;
        }
        /* As an I/O error at each of those calls: a failure must leave the
         * state before; a success (an automatic compaction's failure is not
         * the operation's) the state after its commit. Sampled (the
         * sanitizer pass): the first and last calls and every seventh one,
         * starting from a different call in each fault kind. */
        unsigned errors = 0;
        for (unsigned n = 1; f != FAULT_MDB_COMMITTED && n <= calls; n++) {
            if (test_sampled() && n > 1 && n < calls && n % 7 != (unsigned)f % 7)
                continue;
            snprintf(fault, sizeof fault, "%s:%u", fault_ops[f], n);
            snprintf(trial, sizeof trial, "SIMSTORE_FAULT=%s", fault);
            reset_work(c, has_store);
            int status = wait_op(spawn_op(c, sc, &sc->action, c->work_store, fault, NULL));
            if (status != 0 && status != 1) {
                fprintf(stderr, "\n%s %s: exit status %d\n", sc->name, trial, status);
                print_log(c);
                fail();
            }
            errors += status == 1;
            check_outcome(c, sc, &ss, status, status == 1 ? ALLOW_BEFORE : ALLOW_MID | ALLOW_AFTER,
                          trial, &total);
        }
        fprintf(stderr, " %s %u (%u failed)", fault_ops[f], calls, errors);
    }
    fprintf(stderr, "\n  %u runs:", total.runs);
    for (size_t i = 0; i < ss.n; i++)
        fprintf(stderr, " %s %u", ss.s[i].label, total.in_state[i]);
    fprintf(stderr, "; %u left files for the next writer; %.1f s\n", total.leftovers,
            (double)(now_ns() - started) / 1e9);
    /* Both outcomes were reached, and the interesting windows were hit. */
    assert_true(total.in_state[0] > 0);
    assert_true(total.in_state[ss.after] > 0);
    if (ss.has_mid)
        assert_true(total.in_state[1] > 0);
    if (sc->expect_leftovers)
        assert_true(total.leftovers > 0);
    size_t npoints = 0;
    while (npoints < sizeof sc->points / sizeof *sc->points && sc->points[npoints].fault)
        npoints++;
    assert_int_equal(points_met, npoints);
    free(seen);
    states_free(&ss);
}

/* The fault sweeps run hundreds of short operations whose cost is mostly
 * fsync: they run on tmpfs (/dev/shm) when $TMPDIR is not set, which changes
 * no code path (a process crash keeps the page cache either way). The SIGKILL
 * trials stay on $TMPDIR or /tmp, where the operations take longer. */
static char *tmpdir_for(const char *tag, int prefer_tmpfs)
{
    const char *env = getenv("TMPDIR");
    struct stat st;
    if (prefer_tmpfs && (!env || !*env) && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
        access("/dev/shm", W_OK) == 0) {
        char *p = test_path("/dev/shm", "simstore-");
        size_t n = strlen(p) + strlen(tag) + 8;
        char *path = malloc(n);
        assert_non_null(path);
        snprintf(path, n, "%s%s-XXXXXX", p, tag);
        free(p);
        if (mkdtemp(path))
            return path;
        free(path);
    }
    return test_tmpdir(tag);
}

static void ctx_init(ctx *c, const char *tag, test_rng *r, int prefer_tmpfs)
{
    memset(c, 0, sizeof *c);
    c->seed = test_rng_next(r);
    c->threads = 1;
    c->root = tmpdir_for(tag, prefer_tmpfs);
    fprintf(stderr, "working in %s\n", c->root ? c->root : "(none)");
    assert_non_null(c->root);
    c->base_dir = test_path(c->root, "base");
    c->base_store = test_path(c->base_dir, "store");
    c->work_dir = test_path(c->root, "work");
    c->work_store = test_path(c->work_dir, "store");
    c->log = test_path(c->root, "op.log");
}

static void ctx_free(ctx *c)
{
    test_rmtree(c->root);
    free(c->root);
    free(c->base_dir);
    free(c->base_store);
    free(c->work_dir);
    free(c->work_store);
    free(c->log);
}

/* The windows named in each scenario: where a power cut leaves leftovers
 * (a publish's temporary file, a new segment's files no state names yet, a
 * compaction's old files after its commit, a build's work directory, the
 * old store after build --replace swapped it out) or just passes the commit
 * point. */
static const scenario fault_scenarios[] = {
    /* Documents. */
    {"build",
     0,
     300,
     {{0}},
     0,
     BUILD(0, 300),
     1,
     {{"rename", 0, "before", LEFT_TMPDIR}, /* at the rename into place */
      {"mdb_committed", 1, "before", LEFT_TMPDIR},
      {"fsync", 0, "after", 0}},
     0}, /* the directory fsync after the rename */
    {"build-replace",
     0,
     1250,
     {BUILD(0, 300)},
     1,
     REPLACE(1000, 250),
     1,
     /* At the RENAME_EXCHANGE: the work directory, and the old store holds
      * the marker put there so that, once swapped out, it is recognisably
      * a build directory (format/store.md, "Temporary build directories");
      * in a store it is a temporary file its next writer removes. */
     {{"rename", 0, "before", LEFT_TMPDIR | LEFT_TMPFILE}, {"fsync", 0, "after", LEFT_TMPDIR}},
     0}, /* swapped, old store not removed */
    {"add",
     0,
     450,
     {BUILD(0, 300)},
     1,
     ADD(300, 150),
     1,
     {{"rename", 1, "before", LEFT_TMPFILE}, /* a table file being published */
      {"mdb_commit", 1, "before", LEFT_TBL}, /* published, not referenced */
      {"mdb_committed", 1, "after", 0}},
     0},
    {"add-autocompact",
     0,
     380,
     {BUILD(0, 200), ADD(200, 20), ADD(220, 20), ADD(240, 20), ADD(260, 20), ADD(280, 20),
      ADD(300, 20), ADD(320, 20)},
     8,
     ADD_AUTO(340, 40),
     1,
     {{"mdb_committed", 1, "mid", 0},
      {"mdb_commit", 2, "mid", LEFT_TBL},
      {"mdb_committed", 2, "after", LEFT_TBL}},
     0}, /* old segments not removed */
    {"delete",
     0,
     400,
     {BUILD(0, 300), ADD(300, 100)},
     2,
     DEL(0, 100, 3),
     0,
     {{"mdb_commit", 1, "before", 0}, {"mdb_committed", 1, "after", 0}},
     0},
    {"delete-autocompact",
     0,
     300,
     {BUILD(0, 300)},
     1,
     DEL_AUTO(0, 200, 1),
     1,
     {{"mdb_committed", 1, "mid", 0}, {"mdb_committed", 2, "after", LEFT_TBL}},
     0},
    {"compact",
     0,
     350,
     {BUILD(0, 200), ADD(200, 100), DEL(0, 60, 2), ADD(300, 50)},
     4,
     COMPACT,
     1,
     {{"mdb_commit", 1, "before", LEFT_TBL},
      {"mdb_committed", 1, "after", LEFT_TBL}, /* old segments not removed */
      {"fsync", 0, "after", 0}},
     0}, /* removed, directory not yet synced */
    /* With a paragraph index: its segments and pfps entries go with every
     * commit. */
    {"para-build",
     0,
     300,
     {{0}},
     0,
     BUILD(0, 300),
     1,
     {{"rename", 0, "before", LEFT_TMPDIR}, {"fsync", 0, "after", 0}},
     1},
    {"para-add",
     0,
     450,
     {BUILD(0, 300)},
     1,
     ADD(300, 150),
     1,
     {{"rename", 1, "before", LEFT_TMPFILE},
      {"mdb_commit", 1, "before", LEFT_TBL},
      {"mdb_committed", 1, "after", 0}},
     1},
    {"para-delete",
     0,
     400,
     {BUILD(0, 300), ADD(300, 100)},
     2,
     DEL(0, 100, 3),
     0,
     {{"mdb_commit", 1, "before", 0}, {"mdb_committed", 1, "after", 0}},
     1},
    {"para-compact",
     0,
     350,
     {BUILD(0, 200), ADD(200, 100), DEL(0, 60, 2), ADD(300, 50)},
     4,
     COMPACT,
     1,
     {{"mdb_commit", 1, "before", LEFT_TBL},
      {"mdb_committed", 1, "after", LEFT_TBL},
      {"fsync", 0, "after", 0}},
     1},
    /* Fingerprint-only. */
    {"fp-build", 1, 300, {{0}}, 0, BUILD(0, 300), 1, {{"rename", 0, "before", LEFT_TMPDIR}}, 0},
    {"fp-add",
     1,
     400,
     {BUILD(0, 300)},
     1,
     ADD(150, 250),
     1,
     {{"mdb_commit", 1, "before", LEFT_TBL}, {"mdb_committed", 1, "after", 0}},
     0},
    {"fp-compact",
     1,
     400,
     {BUILD(0, 200), ADD(100, 150), ADD(300, 100)},
     3,
     COMPACT,
     1,
     {{"mdb_committed", 1, "after", LEFT_TBL}},
     0},
};

static void test_crash_faults__documents(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "crash faults (documents)", 0xC4A5);
    ctx c;
    ctx_init(&c, "crash", &r, 1);
    c.tables = 4;
    for (size_t i = 0; i < sizeof fault_scenarios / sizeof *fault_scenarios; i++)
        if (!fault_scenarios[i].fp_only)
            fault_sweep(&c, &fault_scenarios[i]);
    ctx_free(&c);
}

static void test_crash_faults__fingerprint_only(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "crash faults (fingerprint-only)", 0xF9C4);
    ctx c;
    ctx_init(&c, "crashfp", &r, 1);
    c.tables = 4;
    for (size_t i = 0; i < sizeof fault_scenarios / sizeof *fault_scenarios; i++)
        if (fault_scenarios[i].fp_only)
            fault_sweep(&c, &fault_scenarios[i]);
    ctx_free(&c);
}

/* ---- SIGKILL at random moments -------------------------------------------------------- */

static void read_ready(int fd)
{
    char byte;
    ssize_t n;
    while ((n = read(fd, &byte, 1)) < 0 && errno == EINTR)
        ;
    close(fd);
}

static void kill_sweep(ctx *c, const scenario *sc, test_rng *r, unsigned trials)
{
    uint64_t started = now_ns();
    states ss;
    prepare(c, sc, &ss);
    int has_store = sc->nsetup > 0;
    /* How long the action takes here, from its start (the ready byte): the
     * median of three runs. */
    int rd;
    pid_t pid;
    uint64_t spans[3];
    for (int i = 0; i < 3; i++) {
        reset_work(c, has_store);
        pid = spawn_op(c, sc, &sc->action, c->work_store, NULL, &rd);
        read_ready(rd);
        uint64_t t0 = now_ns();
        assert_int_equal(wait_op(pid), 0);
        spans[i] = now_ns() - t0;
    }
    qsort(spans, 3, sizeof *spans, cmp_u64);
    uint64_t span = spans[1];
    tally total = {0};
    unsigned killed = 0;
    for (unsigned i = 0; i < trials; i++) {
        /* Stratified over the whole operation and a little past its usual
         * end (runs vary): trial i lands at a random moment of the i-th of
         * `trials` equal slices. */
        uint64_t slice = (span + span / 2) / trials + 1;
        uint64_t delay = slice * i + test_rng_below(r, slice);
        char trial[96];
        snprintf(trial, sizeof trial, "SIGKILL after %.3f ms (trial %u)", (double)delay / 1e6, i);
        reset_work(c, has_store);
        pid = spawn_op(c, sc, &sc->action, c->work_store, NULL, &rd);
        read_ready(rd);
        struct timespec ts = {(time_t)(delay / 1000000000u), (long)(delay % 1000000000u)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        kill(pid, SIGKILL);
        int status = wait_op(pid);
        if (status != -SIGKILL && status != 0) {
            fprintf(stderr, "%s %s: exit status %d\n", sc->name, trial, status);
            print_log(c);
            fail();
        }
        killed += status == -SIGKILL;
        check_outcome(c, sc, &ss, status,
                      status == 0 ? ALLOW_AFTER : ALLOW_BEFORE | ALLOW_MID | ALLOW_AFTER, trial,
                      &total);
    }
    fprintf(stderr, "%s (%s %s, ~%.1f ms): %u trials, %u killed:", sc->name,
            sc->fp_only ? "fingerprint-only" : "documents", op_names[sc->action.kind],
            (double)span / 1e6, total.runs, killed);
    for (size_t i = 0; i < ss.n; i++)
        fprintf(stderr, " %s %u", ss.s[i].label, total.in_state[i]);
    fprintf(stderr, "; %u left files for the next writer; %.1f s\n", total.leftovers,
            (double)(now_ns() - started) / 1e9);
    states_free(&ss);
}

static const scenario kill_scenarios[] = {
    {"kill-build", 0, 40000, {{0}}, 0, BUILD(0, 40000), 0, {{0}}, 0},
    {"kill-build-replace", 0, 60000, {BUILD(0, 30000)}, 1, REPLACE(30000, 30000), 0, {{0}}, 0},
    {"kill-add", 0, 50000, {BUILD(0, 25000)}, 1, ADD(25000, 25000), 0, {{0}}, 0},
    {"kill-delete-autocompact", 0, 40000, {BUILD(0, 40000)}, 1, DEL_AUTO(0, 30000, 1), 0, {{0}}, 0},
    {"kill-compact",
     0,
     45000,
     {BUILD(0, 25000), ADD(25000, 12000), DEL(0, 10000, 2), ADD(37000, 8000)},
     4,
     COMPACT,
     0,
     {{0}},
     0},
    {"kill-fp-add", 1, 80000, {BUILD(0, 40000)}, 1, ADD(20000, 60000), 0, {{0}}, 0},
    {"kill-para-compact",
     0,
     30000,
     {BUILD(0, 15000), ADD(15000, 8000), DEL(0, 6000, 2), ADD(23000, 7000)},
     4,
     COMPACT,
     0,
     {{0}},
     1},
};

/* Sanitized builds run the operations several times slower: halve the
 * stores so that the trials take about as long as in a normal build. */
#if defined(__SANITIZE_ADDRESS__)
#define KILL_SCALE 2
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILL_SCALE 2
#endif
#endif
#ifndef KILL_SCALE
#define KILL_SCALE 1
#endif

static scenario scaled(const scenario *sc)
{
    scenario s = *sc;
    s.universe /= KILL_SCALE;
    for (size_t i = 0; i <= s.nsetup; i++) {
        op *o = i < s.nsetup ? &s.setup[i] : &s.action;
        o->first /= KILL_SCALE;
        o->count /= KILL_SCALE;
    }
    return s;
}

static void test_crash_kill__random_moments(void **state)
{
    (void)state;
    test_rng r;
    test_rng_init(&r, "crash kill", 0x51C7);
    ctx c;
    ctx_init(&c, "crashkill", &r, 0);
    c.threads = 2;
    for (size_t i = 0; i < sizeof kill_scenarios / sizeof *kill_scenarios; i++) {
        scenario sc = scaled(&kill_scenarios[i]);
        kill_sweep(&c, &sc, &r, test_sampled() ? 4 : 10 / KILL_SCALE + 2);
    }
    ctx_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crash_faults__documents),
        cmocka_unit_test(test_crash_faults__fingerprint_only),
        cmocka_unit_test(test_crash_kill__random_moments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
