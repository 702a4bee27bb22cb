/* crash_op.c: the helper program of the crash tests (test_crash). It runs one
 * store operation on the deterministic documents of crash_docs.h, in a process
 * of its own so that SIMSTORE_FAULT (read once per process) arms a fresh fault
 * point and so that the test can kill it at any instant:
 *
 *   crash_op build   STORE --first I --count N [--fp-only] [--replace] [--tables T]
 *                    [--paragraphs]
 *   crash_op add     STORE --first I --count N [--no-auto]
 *   crash_op delete  STORE --first I --count N [--step K] [--no-auto]
 *   crash_op compact STORE
 *
 * Common options: --seed S (the universe's seed), --threads T (1),
 * --ready FD (write one byte to FD just before the operation starts).
 * Exit status: 0 the operation succeeded, 1 it failed (the error is printed),
 * 2 usage; an armed ":crash" fault ends it with 86. */
#include "simstore.h"

#include "crash_docs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct args {
    const char *op;
    const char *store;
    uint64_t seed;
    uint64_t first;
    uint64_t count;
    uint64_t step;
    unsigned threads;
    unsigned tables;
    int fp_only;
    int replace;
    int no_auto;
    int paragraphs; /* build: with a paragraph index */
    int ready_fd;
} args;

static int fail(const char *what, int rc)
{
    fprintf(stderr, "crash_op: %s: %s: %s\n", what, simstore_strerror(rc), simstore_last_error());
    return 1;
}

static int feed(simstore_builder *b, const args *a, int fp_only, int paragraphs)
{
    char id[32];
    for (uint64_t i = a->first; i < a->first + a->count; i++) {
        int rc;
        if (fp_only) {
            rc = simstore_builder_add_fp(b, cdoc_fp(a->seed, i));
        } else {
            cdoc_id(i, id, sizeof id);
            simstore_doc d = {id, strlen(id), cdoc_fp(a->seed, i), NULL, 0, i};
            uint64_t paras[CDOC_PARAGRAPHS];
            cdoc_paragraphs(a->seed, i, paras);
            if (paragraphs) {
                d.paragraphs = paras;
                d.n_paragraphs = CDOC_PARAGRAPHS;
            }
            rc = simstore_builder_add(b, &d);
        }
        if (rc) {
            simstore_builder_abort(b);
            return fail("add", rc);
        }
    }
    int rc = simstore_builder_finish(b);
    return rc ? fail("finish", rc) : 0;
}

static int run(const args *a)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    o.block_bytes = 256;
    o.memory_bytes = 16u << 20;
    o.threads = a->threads;
    o.tables = a->tables;
    o.fingerprint_only = a->fp_only;
    o.replace = a->replace;
    /* The documents carry no text; naming the CJK segmenter spares each new
     * store the friso dictionary load (~0.1 s) that resolving AUTO costs. */
    simstore_text_options text;
    simstore_text_options_init(&text);
    text.cjk = SIMSTORE_CJK_BIGRAM;
    text.paragraph_min_words = a->paragraphs ? 1 : 0;
    o.text = &text;
    if (strcmp(a->op, "build") == 0) {
        simstore_builder *b;
        int rc = simstore_build_begin(a->store, &o, &b);
        return rc ? fail("build", rc) : feed(b, a, a->fp_only, a->paragraphs);
    }
    unsigned flags = SIMSTORE_OPEN_WRITE | (a->no_auto ? SIMSTORE_OPEN_NO_AUTO_COMPACT : 0);
    simstore *s;
    int rc = simstore_open(a->store, flags, &s);
    if (rc)
        return fail("open", rc);
    int status = 0;
    if (strcmp(a->op, "add") == 0) {
        simstore_stats st;
        simstore_builder *b;
        rc = simstore_get_stats(s, &st);
        if (rc == SIMSTORE_OK)
            rc = simstore_add_begin(s, &o, &b);
        status =
            rc ? fail("add", rc) : feed(b, a, st.fingerprint_only, st.paragraph_min_words != 0);
    } else if (strcmp(a->op, "delete") == 0) {
        size_t n = (size_t)a->count;
        char **ids = calloc(n ? n : 1, sizeof *ids);
        size_t *lens = calloc(n ? n : 1, sizeof *lens);
        for (size_t j = 0; ids && lens && j < n; j++) {
            ids[j] = malloc(32);
            if (ids[j]) {
                cdoc_id(a->first + j * a->step, ids[j], 32);
                lens[j] = strlen(ids[j]);
            }
        }
        uint64_t deleted = 0;
        rc = ids && lens
                 ? simstore_delete(s, (const char *const *)ids, lens, n, &deleted, NULL, NULL)
                 : SIMSTORE_ENOMEM;
        if (rc)
            status = fail("delete", rc);
        for (size_t j = 0; ids && j < n; j++)
            free(ids[j]);
        free(ids);
        free(lens);
    } else {
        rc = simstore_compact(s, &o);
        if (rc)
            status = fail("compact", rc);
    }
    simstore_close(s);
    return status;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"seed", required_argument, NULL, 's'},    {"first", required_argument, NULL, 'f'},
        {"count", required_argument, NULL, 'n'},   {"step", required_argument, NULL, 'k'},
        {"threads", required_argument, NULL, 't'}, {"tables", required_argument, NULL, 'T'},
        {"ready", required_argument, NULL, 'r'},   {"fp-only", no_argument, NULL, 'F'},
        {"replace", no_argument, NULL, 'R'},       {"no-auto", no_argument, NULL, 'A'},
        {"paragraphs", no_argument, NULL, 'P'},    {NULL, 0, NULL, 0},
    };
    args a = {.seed = 1, .step = 1, .threads = 1, .ready_fd = -1};
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 's': a.seed = strtoull(optarg, NULL, 0); break;
        case 'f': a.first = strtoull(optarg, NULL, 0); break;
        case 'n': a.count = strtoull(optarg, NULL, 0); break;
        case 'k': a.step = strtoull(optarg, NULL, 0); break;
        case 't': a.threads = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'T': a.tables = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'r': a.ready_fd = atoi(optarg); break;
        case 'F': a.fp_only = 1; break;
        case 'R': a.replace = 1; break;
        case 'A': a.no_auto = 1; break;
        case 'P': a.paragraphs = 1; break;
        default: return 2;
        }
    }
    if (argc - optind != 2)
        return 2;
    a.op = argv[optind];
    a.store = argv[optind + 1];
    if (strcmp(a.op, "build") && strcmp(a.op, "add") && strcmp(a.op, "delete") &&
        strcmp(a.op, "compact"))
        return 2;
    if (a.ready_fd >= 0) {
        char byte = 'r';
        if (write(a.ready_fd, &byte, 1) != 1)
            return 2;
        close(a.ready_fd);
    }
    return run(&a);
}
