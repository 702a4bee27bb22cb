/* bench_docfile.c: the document file of a segment (lib/docfile,
 * format/docfile.md, a draft no store writes yet) beside the document side
 * a store keeps today (LMDB's `docs` and `fps`), on the same documents.
 *
 * The documents are bench_query's: 2^N uniform random fingerprints
 * (splitmix64 from 0xB0BA0000 + N), document i with the 9-byte id
 * "d%08zx" of i and insertion number (1 << 40) | i, as a build gives them.
 * It builds a store of them (k = 3, as bench_query does; or uses --store
 * PATH, bench_query's store of the same N, checked to hold them), writes
 * their document file, and prints:
 *
 *   - bytes per document: the document file by part, beside the store's
 *     LMDB records (`docs`) and mapping (`fps`), and its tables;
 *   - lookups, one thread, page cache warm (each set run once before it is
 *     timed): the documents of a stored fingerprint (find_fp) and of an
 *     absent one, and a document by id (find_id), p50 / p99; beside the
 *     store's simstore_get of one id, and its k = 0 query of a stored
 *     fingerprint against an absent one (the difference is what reading the
 *     documents of a fingerprint from LMDB costs: `fps`, then `docs`);
 *   - k = 3 queries end to end, bench_query's mix (half a stored fingerprint
 *     with 0..3 bits flipped, half random): the store's simstore_query_fp,
 *     beside the query a store with document files would make: the same
 *     tables (a fingerprint-only store of the same fingerprints, built
 *     here or given with --fp-store) answering the fingerprints, then each
 *     match's documents from the document file.
 *
 * Usage: bench_docfile [--log2n 23] [--queries 200000] [--dir DIR]
 *                      [--store PATH] [--fp-store PATH] [--keep] */
#include "docfile/docfile.h"
#include "simstore.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void percentiles(double *v, size_t n, double *p50, double *p99)
{
    qsort(v, n, sizeof *v, cmp_double);
    *p50 = v[n / 2] * 1e6;
    *p99 = v[(size_t)((double)n * 0.99)] * 1e6;
}

typedef struct order {
    uint64_t fp;
    uint64_t i;
} order;

static int cmp_order(const void *a, const void *b)
{
    const order *x = a, *y = b;
    if (x->fp != y->fp)
        return x->fp < y->fp ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* "d%08zx": id order is i's */
}

static int count_doc(void *ctx, const docfile_doc *d)
{
    (void)d;
    ++*(size_t *)ctx;
    return 0;
}

static int count_document(void *ctx, const simstore_document *d)
{
    *(size_t *)ctx += !d->missing;
    return 0;
}

static uint64_t *make_queries(const uint64_t *fps, size_t n, size_t nq, unsigned k)
{
    uint64_t *q = malloc(nq * sizeof *q); /* bench_query's */
    uint64_t s = 0xC0FFEE;
    for (size_t i = 0; q && i < nq; i++) {
        if (i & 1) {
            q[i] = splitmix(&s);
        } else {
            uint64_t x = fps[splitmix(&s) % n];
            unsigned flips = (unsigned)(splitmix(&s) % (k + 1));
            for (unsigned f = 0; f < flips; f++)
                x ^= 1ULL << (splitmix(&s) % 64);
            q[i] = x;
        }
    }
    return q;
}

static int build_store(const char *path, const uint64_t *fps, size_t n, int fingerprint_only)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    o.fingerprint_only = fingerprint_only;
    o.memory_bytes = (uint64_t)4 << 30;
    simstore_builder *b;
    if (simstore_build_begin(path, &o, &b))
        return -1;
    char id[24];
    for (size_t i = 0; i < n; i++) {
        snprintf(id, sizeof id, "d%08zx", i);
        simstore_doc d = {id, 9, fps[i], NULL, 0, i};
        if (fingerprint_only ? simstore_builder_add_fp(b, fps[i]) : simstore_builder_add(b, &d)) {
            simstore_builder_abort(b);
            return -1;
        }
    }
    return simstore_builder_finish(b);
}

/* The store given (`given`), or one built in dir of the documents (of
 * their fingerprints alone with fingerprint_only); its path into path. */
static int prepare_store(const char *given, const char *dir, unsigned log2n, const uint64_t *fps,
                         size_t n, int fingerprint_only, char *path, size_t size)
{
    if (given) {
        snprintf(path, size, "%s", given);
        return 0;
    }
    char cmd[4200];
    snprintf(path, size, "%s/n%u.%s", dir, log2n, fingerprint_only ? "fp-store" : "store");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        return -1;
    double t = now();
    if (build_store(path, fps, n, fingerprint_only)) {
        fprintf(stderr, "build %s: %s\n", path, simstore_last_error());
        return -1;
    }
    printf("built %s of 2^%u documents in %.1f s\n",
           fingerprint_only ? "the fingerprint-only store" : "the store", log2n, now() - t);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned log2n = 23;
    size_t nq = 200000;
    const char *dir = "/tmp/simstore-bench-docfile", *store_arg = NULL, *fp_store_arg = NULL;
    int keep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--log2n") == 0 && i + 1 < argc)
            log2n = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--queries") == 0 && i + 1 < argc)
            nq = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc)
            store_arg = argv[++i];
        else if (strcmp(argv[i], "--fp-store") == 0 && i + 1 < argc)
            fp_store_arg = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else {
            fprintf(stderr, "usage: bench_docfile [--log2n 23] [--queries 200000] [--dir DIR] "
                            "[--store PATH] [--fp-store PATH] [--keep]\n");
            return 2;
        }
    }
    if (log2n < 10 || log2n > 30 || nq == 0) {
        fprintf(stderr, "bench_docfile: --log2n 10..30 and --queries >= 1\n");
        return 2;
    }
    size_t n = (size_t)1 << log2n;
    uint64_t *fps = malloc(n * sizeof *fps);
    order *ord = malloc(n * sizeof *ord);
    if (!fps || !ord)
        return 1;
    uint64_t seed = 0xB0BA0000 + log2n;
    for (size_t i = 0; i < n; i++) {
        fps[i] = splitmix(&seed);
        ord[i].fp = fps[i];
        ord[i].i = i;
    }
    char cmd[4200], store_path[4096], doc_path[4096], fp_path[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0)
        return 1;
    snprintf(doc_path, sizeof doc_path, "%s/n%u.doc", dir, log2n);
    if (prepare_store(store_arg, dir, log2n, fps, n, 0, store_path, sizeof store_path) ||
        prepare_store(fp_store_arg, dir, log2n, fps, n, 1, fp_path, sizeof fp_path))
        return 1;

    /* The document file. */
    double t = now();
    qsort(ord, n, sizeof *ord, cmp_order);
    docfile_writer *w;
    if (sims_docfile_writer_open(doc_path, 0, 0, NULL, &w)) {
        fprintf(stderr, "%s\n", simstore_last_error());
        return 1;
    }
    char id[24];
    for (size_t j = 0; j < n; j++) {
        snprintf(id, sizeof id, "d%08zx", (size_t)ord[j].i);
        docfile_doc d = {0,
                         ord[j].fp,
                         ((uint64_t)1 << 40) | ord[j].i,
                         (const uint8_t *)id,
                         9,
                         0,
                         NULL,
                         0,
                         NULL,
                         NULL,
                         0};
        if (sims_docfile_writer_add(w, &d)) {
            fprintf(stderr, "%s\n", simstore_last_error());
            sims_docfile_writer_abort(w);
            return 1;
        }
    }
    docfile_sizes sz;
    if (sims_docfile_writer_commit(w, &sz)) {
        fprintf(stderr, "%s\n", simstore_last_error());
        return 1;
    }
    double t_write = now() - t;
    free(ord);

    /* Open both. */
    t = now();
    docfile_reader *r;
    if (sims_docfile_open(doc_path, &r)) {
        fprintf(stderr, "%s\n", simstore_last_error());
        return 1;
    }
    double t_open = now() - t;
    simstore *s;
    if (simstore_open(store_path, SIMSTORE_OPEN_READONLY, &s)) {
        fprintf(stderr, "open %s: %s\n", store_path, simstore_last_error());
        return 1;
    }
    simstore_stats st;
    simstore_get_stats(s, &st);
    if (st.documents != n) {
        fprintf(stderr, "%s holds %" PRIu64 " documents, not bench_query's 2^%u\n", store_path,
                st.documents, log2n);
        return 1;
    }
    double dn = (double)n;
    printf("bench_docfile: 2^%u documents (uniform fingerprints, 9-byte ids, no metadata), %zu "
           "lookups a kind, 1 thread, page cache warm\n",
           log2n, nq);
    printf("  document file written in %.1f s (sorted in memory), opened in %.3f ms\n", t_write,
           t_open * 1e3);
    printf("  bytes per document: document file %.2f (blocks %.2f, block table %.2f, "
           "fingerprint directory %.3f, id entries %.2f, id directory %.3f)\n",
           (double)sz.total / dn, (double)sz.blocks / dn, (double)sz.block_table / dn,
           (double)sz.fp_dir / dn, (double)sz.id_entries / dn, (double)sz.id_dir / dn);
    printf("    today's LMDB: %.2f (records %.2f, mapping %.2f, the rest %.2f); tables %.2f\n",
           (double)st.lmdb_bytes / dn, (double)st.lmdb_records_bytes / dn,
           (double)st.lmdb_mapping_bytes / dn,
           (double)(st.lmdb_bytes - st.lmdb_records_bytes - st.lmdb_mapping_bytes) / dn,
           (double)st.table_bytes / dn);
    printf("    a store whose documents were in document files: tables + document file = %.2f "
           "(today: tables + LMDB = %.2f)\n",
           (double)(st.table_bytes + sz.total) / dn, (double)(st.table_bytes + st.lmdb_bytes) / dn);

    /* Lookups. */
    uint64_t qs = 0xD0C5;
    size_t *pick = malloc(nq * sizeof *pick);
    uint64_t *absent = malloc(nq * sizeof *absent);
    double *lat = malloc(nq * sizeof *lat);
    for (size_t i = 0; i < nq; i++) {
        pick[i] = (size_t)(splitmix(&qs) % n);
        absent[i] = splitmix(&qs);
    }
    simstore_query *q;
    if (simstore_query_new(s, 0, &q))
        return 1;
    const simstore_match *m;
    size_t got;
    double p50[8], p99[8];
    size_t found = 0;
    for (int kind = 0; kind < 6; kind++) {
        for (int pass = 0; pass < 2; pass++) { /* the first warms */
            for (size_t i = 0; i < nq; i++) {
                size_t c = 0;
                double a = now();
                switch (kind) {
                case 0: /* document file: a stored fingerprint */
                    sims_docfile_find_fp(r, fps[pick[i]], count_doc, &c);
                    break;
                case 1: /* document file: an absent one */
                    sims_docfile_find_fp(r, absent[i], count_doc, &c);
                    break;
                case 2: { /* document file: by id */
                    docfile_doc d;
                    snprintf(id, sizeof id, "d%08zx", pick[i]);
                    c = sims_docfile_find_id(r, id, 9, &d) == 1;
                    break;
                }
                case 3: { /* store: simstore_get of one id */
                    snprintf(id, sizeof id, "d%08zx", pick[i]);
                    const char *ids[1] = {id};
                    size_t lens[1] = {9};
                    simstore_get(s, ids, lens, 1, count_document, &c);
                    break;
                }
                case 4: /* store: k = 0 query of a stored fingerprint */
                    simstore_query_fp(q, fps[pick[i]], 0, &m, &got);
                    c = got;
                    break;
                case 5: /* store: k = 0 query of an absent one */
                    simstore_query_fp(q, absent[i], 0, &m, &got);
                    c = got;
                    break;
                }
                lat[i] = now() - a;
                if (pass == 1 && (kind == 0 || kind == 2 || kind == 3 || kind == 4))
                    found += c;
            }
        }
        percentiles(lat, nq, &p50[kind], &p99[kind]);
    }
    if (found != 4 * nq) {
        fprintf(stderr, "bench_docfile: %zu of %zu lookups found their document\n", found, 4 * nq);
        return 1;
    }
    printf("  the documents of a stored fingerprint: document file p50 %.2f us, p99 %.2f us "
           "(absent: %.2f / %.2f)\n",
           p50[0], p99[0], p50[1], p99[1]);
    printf("    today, a k = 0 query of it: p50 %.2f us, p99 %.2f us (absent: %.2f / %.2f): "
           "its documents from LMDB cost %.2f us at p50\n",
           p50[4], p99[4], p50[5], p99[5], p50[4] - p50[5]);
    printf("  a document by id: document file p50 %.2f us, p99 %.2f us; today, simstore_get: "
           "p50 %.2f us, p99 %.2f us\n",
           p50[2], p99[2], p50[3], p99[3]);

    /* Queries end to end. */
    simstore *fs;
    if (simstore_open(fp_path, SIMSTORE_OPEN_READONLY, &fs)) {
        fprintf(stderr, "open %s: %s\n", fp_path, simstore_last_error());
        return 1;
    }
    simstore_stats fst;
    simstore_get_stats(fs, &fst);
    if (!fst.fingerprint_only || fst.fingerprints != n || fst.tables != st.tables) {
        fprintf(stderr,
                "%s is not a fingerprint-only store of the same %zu fingerprints and "
                "%u tables\n",
                fp_path, n, st.tables);
        return 1;
    }
    simstore_query *fq;
    if (simstore_query_new(fs, 0, &fq))
        return 1;
    uint64_t *qs3 = make_queries(fps, n, nq, 3);
    double *lat_docs = malloc(nq * sizeof *lat_docs);
    unsigned char *hit = malloc(nq);
    size_t matches_today = 0, matches_files = 0;
    for (int way = 0; way < 2; way++) {
        for (int pass = 0; pass < 2; pass++) { /* the first warms */
            for (size_t i = 0; i < nq; i++) {
                double a = now();
                size_t c = 0;
                if (way == 0) {
                    simstore_query_fp(q, qs3[i], 3, &m, &got);
                    c = got;
                } else {
                    simstore_query_fp(fq, qs3[i], 3, &m, &got);
                    for (size_t j = 0; j < got; j++)
                        sims_docfile_find_fp(r, m[j].fp, count_doc, &c);
                }
                double t1 = now() - a;
                if (pass == 1) {
                    if (way == 0) {
                        lat[i] = t1;
                        hit[i] = c > 0;
                        matches_today += c;
                    } else {
                        lat_docs[i] = t1;
                        matches_files += c;
                    }
                }
            }
        }
    }
    if (matches_today != matches_files) {
        fprintf(stderr,
                "bench_docfile: %zu matches from the store, %zu through the document "
                "file\n",
                matches_today, matches_files);
        return 1;
    }
    double e50[2][3], e99[2][3]; /* [way][all, without, with] */
    double *part = malloc(nq * sizeof *part);
    for (int way = 0; way < 2; way++) {
        double *v = way ? lat_docs : lat;
        for (int kind = 0; kind < 3; kind++) {
            size_t np = 0;
            for (size_t i = 0; i < nq; i++)
                if (kind == 0 || (kind == 2) == (hit[i] != 0))
                    part[np++] = v[i];
            percentiles(part, np ? np : 1, &e50[way][kind], &e99[way][kind]);
        }
    }
    printf("  k = 3 queries, bench_query's mix, %.3f matches a query: with document files (the "
           "tables, then each match's documents from the file) p50 %.2f us, p99 %.2f us "
           "(without matches %.2f, with %.2f)\n",
           (double)matches_files / (double)nq, e50[1][0], e99[1][0], e50[1][1], e50[1][2]);
    printf("    today, the store's simstore_query_fp: p50 %.2f us, p99 %.2f us (without matches "
           "%.2f, with %.2f)\n",
           e50[0][0], e99[0][0], e50[0][1], e50[0][2]);
    free(part);
    free(qs3);
    free(lat_docs);
    free(hit);
    simstore_query_free(fq);
    simstore_close(fs);

    simstore_query_free(q);
    simstore_close(s);
    sims_docfile_close(r);
    free(pick);
    free(absent);
    free(lat);
    free(fps);
    if (!keep) {
        remove(doc_path);
        if (!store_arg) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", store_path);
            if (system(cmd) != 0)
                return 1;
        }
        if (!fp_store_arg) {
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", fp_path);
            if (system(cmd) != 0)
                return 1;
        }
    }
    return 0;
}
