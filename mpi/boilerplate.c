/* boilerplate.c: `simstore-mpi build --boilerplate auto`: the set of the
 * whole input, found by a first pass over every rank's share: each rank
 * counts its share's line keys, offers those that pass the rule on it, and
 * the offered keys' counts are summed over the ranks. */
#include "mpi_internal.h"

#include "boilerplate.h"

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct candidates {
    uint64_t millionths, documents; /* this rank's */
    uint64_t *v;
    size_t n, cap;
    const uint64_t *keys; /* the second walk: the union, increasing */
    uint64_t *counts;
    size_t at, nkeys;
} candidates;

/* A key of the set is held by more than the fraction of the documents of
 * some rank's share (were it held by at most that on every rank, the sums
 * would be at most the fraction of all): each rank offers those of its own
 * (the rule without its minimums, which hold only for the sums). */
static int offer_key(void *ctx, uint64_t key, uint64_t df)
{
    __extension__ typedef unsigned __int128 u128;
    candidates *c = (candidates *)ctx;
    if (!((u128)df * 1000000u > (u128)c->millionths * c->documents))
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        uint64_t *g = realloc(c->v, cap * sizeof *g);
        if (!g)
            return SIMSTORE_ENOMEM;
        c->v = g;
        c->cap = cap;
    }
    c->v[c->n++] = key;
    return 0;
}

/* The second walk: this rank's count of each offered key (both increase). */
static int count_offered(void *ctx, uint64_t key, uint64_t df)
{
    candidates *c = (candidates *)ctx;
    while (c->at < c->nkeys && c->keys[c->at] < key)
        c->at++;
    if (c->at < c->nkeys && c->keys[c->at] == key)
        c->counts[c->at] = df;
    return 0;
}

static int cmp_key(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The first pass of --boilerplate auto over this rank's share (a reader
 * of its parts not yet read), and the set of the whole input: each rank
 * counts its share's line keys in bounded memory (the library's spilling
 * counter), offers the keys that pass the rule on its share, and the
 * offered keys' counts are summed over the ranks; the set is those whose
 * sums pass the rule for all the documents, the set `simstore build
 * --boilerplate auto` finds. Returns 0 with *out (on every rank), or 1 on
 * every rank (said). Collective. */
int find_boilerplate(build_state *st, reader *rd, const boiler_opts *bo,
                     const simstore_text_options *text, uint64_t memory_bytes,
                     simstore_boilerplate **out)
{
    *out = NULL;
    simstore_boilerplate_options o;
    simstore_boilerplate_options_init(&o);
    o.fraction = bo->fraction;
    o.min_documents = bo->min_docs;
    uint64_t kept = memory_bytes / 8 < ((uint64_t)64 << 20) ? memory_bytes / 8 : (uint64_t)64 << 20;
    o.memory_bytes = memory_bytes - kept;
    int failed = 0;
    int rc = simstore_boilerplate_counter_new(text, &o, &st->counter);
    if (rc) {
        say("boilerplate: %s", simstore_last_error());
        failed = 1;
    }
    if (!failed && fill(st, rd, UINT64_MAX))
        failed = 1;
    reader_close_part(rd);
    simstore_boilerplate_counter *counter = st->counter;
    st->counter = NULL;
    candidates c;
    memset(&c, 0, sizeof c);
    simstore_boilerplate_info info;
    memset(&info, 0, sizeof info);
    if (!failed) {
        simstore_boilerplate_counter_info(counter, &info);
        c.millionths = info.fraction_millionths;
        c.documents = info.documents;
        if ((rc = simstore_boilerplate_counter_each(counter, offer_key, &c)) != 0) {
            say("boilerplate: %s", rc == SIMSTORE_ENOMEM ? "out of memory" : simstore_last_error());
            failed = 1;
        }
    }
    if (agree(failed, "finding boilerplate")) {
        simstore_boilerplate_counter_free(counter);
        free(c.v);
        return 1;
    }
    /* Every rank's offers, as one increasing list. */
    int mine = (int)c.n, *counts = malloc((size_t)nranks * 2 * sizeof *counts);
    if (!counts)
        MPI_Abort(MPI_COMM_WORLD, 1);
    int *displs = counts + nranks;
    MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    size_t all = 0;
    for (int r = 0; r < nranks; r++) {
        displs[r] = (int)all;
        all += (size_t)counts[r];
    }
    uint64_t *keys = malloc((all ? all : 1) * sizeof *keys);
    uint64_t *sums = calloc(all ? all : 1, sizeof *sums);
    if (!keys || !sums)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Allgatherv(c.v, mine, MPI_UINT64_T, keys, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
    free(counts);
    free(c.v);
    sort_items(keys, all, sizeof *keys, cmp_key);
    size_t n = 0;
    for (size_t i = 0; i < all; i++)
        if (n == 0 || keys[i] != keys[n - 1])
            keys[n++] = keys[i];
    c.keys = keys;
    c.nkeys = n;
    c.counts = sums;
    rc = simstore_boilerplate_counter_each(counter, count_offered, &c);
    if (rc) {
        say("boilerplate: %s", simstore_last_error());
        failed = 1;
    }
    simstore_boilerplate_counter_free(counter);
    MPI_Allreduce(MPI_IN_PLACE, sums, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &info.documents, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    size_t lines = 0;
    for (size_t i = 0; i < n; i++)
        if (simstore_boilerplate_is_line(&info, sums[i]))
            keys[lines++] = keys[i];
    if (!failed && (rc = simstore_boilerplate_new(keys, lines, &info, out)) != 0) {
        say("boilerplate: %s", simstore_last_error());
        failed = 1;
    }
    free(keys);
    free(sums);
    if (agree(failed, "finding boilerplate")) {
        simstore_boilerplate_free(*out);
        *out = NULL;
        return 1;
    }
    if (rank == 0 && info.documents < info.min_documents)
        fprintf(stderr,
                "%s: warning: boilerplate: %llu %s, fewer than the %llu --boilerplate auto "
                "needs (--boilerplate-min-docs): no line is boilerplate\n",
                cmd_name, (unsigned long long)info.documents,
                info.documents == 1 ? "document" : "documents",
                (unsigned long long)info.min_documents);
    return 0;
}
