/* join.c: the join of the distinct fingerprints, table by table over sample-chosen prefix ranges.
 * For each table of the plan (simstore_join_plan_*): every rank permutes
 * its distinct fingerprints, the ranks agree on prefix ranges from a
 * sample of the permuted values, each value goes to the rank owning its
 * prefix (point-to-point, in rounds of at most --chunk bytes to each
 * rank), and each rank joins its range; a pair comes out of the first
 * table covering it only, on one rank. */
#include "scan_internal.h"

#include "cli.h"
#include "simstore.h"

#include <mpi.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int take_pair(void *ctx, uint64_t a, uint64_t b, unsigned distance)
{
    pairs_acc *p = (pairs_acc *)ctx;
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 1024;
        p->v = must(realloc(p->v, p->cap * sizeof *p->v));
    }
    p->v[p->n++] = (fpair){a, b, distance};
    return 0;
}

int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

#define SAMPLES 64 /* permuted values a rank offers per table */

/* The rank whose prefix range holds prefix: the first split above it. */
static int range_owner(const uint64_t *split, uint64_t prefix)
{
    int lo = 0, hi = nranks - 1;
    while (lo < hi) {
        int m = (lo + hi) / 2;
        if (split[m] <= prefix)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* What the join's exchange reuses from table to table: the values ordered by
 * destination, the values received, the counts and the requests. */
typedef struct join_xchg {
    int *dest;      /* nfps: the rank each value goes to */
    uint64_t *send; /* nfps values, grouped by destination rank */
    uint64_t *mine; /* the values this rank joins */
    size_t mine_cap;
    uint64_t *count;  /* 5 * nranks: sent to, received from, their starts, a cursor */
    MPI_Request *req; /* 2 * nranks */
} join_xchg;

/* Each rank's count of values for every rank: to[d] goes to rank d, and
 * from[s] is what rank s sent this one (one u64 each way, through the one
 * all-to-all exchange). Collective. */
static void exchange_counts(const uint64_t *to, uint64_t *from)
{
    const char **data = must(malloc((size_t)nranks * sizeof *data));
    size_t *len = must(malloc((size_t)nranks * 3 * sizeof *len));
    size_t *at = len + nranks, *got = len + 2 * nranks, total;
    uint8_t *bytes = must(malloc((size_t)nranks * 8));
    for (int d = 0; d < nranks; d++) {
        for (int i = 0; i < 8; i++)
            bytes[8 * d + i] = (uint8_t)(to[d] >> (8 * i));
        data[d] = (const char *)bytes + 8 * d;
        len[d] = 8;
    }
    char *recv = exchange_round(data, len, at, got, &total);
    for (int s = 0; s < nranks; s++) {
        const char *p = recv + at[s];
        from[s] = get_u64(&p);
    }
    free(recv);
    free(bytes);
    free(len);
    free(data);
}

/* One table's exchange: each of this rank's nfps permuted values v to the
 * rank whose prefix range holds it (split, shift), straight from x->send
 * into x->mine by point-to-point messages (so no count or offset needs to
 * fit an int), in rounds of at most chunk_bytes to each rank: both sides
 * know each round's sizes from the totals. Returns the number of values
 * received. Collective. */
static size_t join_exchange(join_xchg *x, const uint64_t *v, size_t nfps, unsigned shift,
                            const uint64_t *split)
{
    uint64_t *sent_to = x->count, *from = sent_to + nranks, *sstart = from + nranks,
             *rstart = sstart + nranks, *cursor = rstart + nranks;
    memset(sent_to, 0, (size_t)nranks * sizeof *sent_to);
    for (size_t i = 0; i < nfps; i++)
        sent_to[x->dest[i] = range_owner(split, v[i] >> shift)]++;
    exchange_counts(sent_to, from);
    uint64_t ns = 0, nr = 0;
    for (int r = 0; r < nranks; r++) {
        sstart[r] = ns;
        ns += sent_to[r];
        rstart[r] = nr;
        nr += from[r];
    }
    if (nr > x->mine_cap) {
        free(x->mine);
        x->mine = must(malloc((size_t)nr * sizeof *x->mine));
        x->mine_cap = (size_t)nr;
    }
    memcpy(cursor, sstart, (size_t)nranks * sizeof *cursor);
    for (size_t i = 0; i < nfps; i++)
        x->send[cursor[x->dest[i]]++] = v[i];
    uint64_t per_round = chunk_bytes / sizeof(uint64_t) ? chunk_bytes / sizeof(uint64_t) : 1;
    if (per_round > INT_MAX)
        per_round = INT_MAX;
    uint64_t rounds = 0;
    for (int r = 0; r < nranks; r++) {
        uint64_t most = sent_to[r] > from[r] ? sent_to[r] : from[r];
        uint64_t need = (most + per_round - 1) / per_round;
        rounds = need > rounds ? need : rounds;
    }
    MPI_Allreduce(MPI_IN_PLACE, &rounds, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    for (uint64_t round = 0, done = 0; round < rounds; round++, done += per_round) {
        int nreq = 0;
        for (int r = 0; r < nranks; r++) {
            if (from[r] > done) {
                uint64_t left = from[r] - done;
                MPI_Irecv(x->mine + rstart[r] + done, (int)(left < per_round ? left : per_round),
                          MPI_UINT64_T, r, 0, MPI_COMM_WORLD, &x->req[nreq++]);
            }
        }
        for (int r = 0; r < nranks; r++) {
            if (sent_to[r] > done) {
                uint64_t left = sent_to[r] - done;
                MPI_Isend(x->send + sstart[r] + done, (int)(left < per_round ? left : per_round),
                          MPI_UINT64_T, r, 0, MPI_COMM_WORLD, &x->req[nreq++]);
            }
        }
        MPI_Waitall(nreq, x->req, MPI_STATUSES_IGNORE);
    }
    return (size_t)nr;
}

/* Prefix ranges from a sample of one table's permuted values v[0..nfps)
 * of every rank: rank r owns the prefixes (v >> shift) in [split[r - 1],
 * split[r]). Every ns-th value, each standing for as many of this rank's:
 * the ranges need not be exact, only even (which rank joins a prefix
 * changes no answer). all: room for nranks * SAMPLES values; counts: 2 *
 * nranks. Collective. */
static void sample_splits(const uint64_t *v, size_t nfps, unsigned shift, uint64_t *all,
                          uint64_t *split, int *counts)
{
    int *displs = counts + nranks;
    uint64_t sample[SAMPLES];
    int ns = nfps < SAMPLES ? (int)nfps : SAMPLES;
    for (int i = 0; i < ns; i++)
        sample[i] = v[((size_t)2 * (size_t)i + 1) * nfps / (2 * (size_t)ns)];
    MPI_Allgather(&ns, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    int nall = 0;
    for (int r = 0; r < nranks; r++) {
        displs[r] = nall;
        nall += counts[r];
    }
    MPI_Allgatherv(sample, ns, MPI_UINT64_T, all, counts, displs, MPI_UINT64_T, MPI_COMM_WORLD);
    sort_items(all, (size_t)nall, sizeof *all, cmp_u64);
    for (int r = 0; r + 1 < nranks; r++)
        split[r] = nall ? all[(size_t)(r + 1) * (size_t)nall / (size_t)nranks] >> shift : 0;
}

int join_distinct(const uint64_t *fps, size_t nfps, unsigned k, uint64_t memory, pairs_acc *pairs)
{
    uint64_t total = nfps;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    simstore_join_plan *plan = NULL;
    int rc = simstore_join_plan_new(k, total, &plan);
    if (rc) { /* the same arguments on every rank: the same answer */
        say("planning the join: %s", simstore_last_error());
        return agree(1, "joining");
    }
    unsigned tables = simstore_join_plan_tables(plan);
    uint64_t *v = must(malloc((nfps ? nfps : 1) * sizeof *v));
    uint64_t *all = must(malloc((size_t)nranks * SAMPLES * sizeof *all));
    uint64_t *split = must(malloc((size_t)nranks * sizeof *split));
    int *counts = must(malloc((size_t)nranks * 2 * sizeof *counts));
    join_xchg x = {must(malloc((nfps ? nfps : 1) * sizeof *x.dest)),
                   must(malloc((nfps ? nfps : 1) * sizeof *x.send)),
                   NULL,
                   0,
                   must(malloc((size_t)nranks * 5 * sizeof *x.count)),
                   must(malloc((size_t)nranks * 2 * sizeof *x.req))};
    int failed = 0;
    for (unsigned t = 0; t < tables; t++) {
        unsigned shift = 64 - simstore_join_plan_prefix_bits(plan, t);
        for (size_t i = 0; i < nfps; i++)
            v[i] = simstore_join_plan_permute(plan, t, fps[i]);
        sample_splits(v, nfps, shift, all, split, counts);
        size_t n = join_exchange(&x, v, nfps, shift, split);
        if (!failed) {
            rc = simstore_join_plan_sort(plan, t, x.mine, n);
            if (rc == SIMSTORE_OK)
                rc = simstore_join_plan_table(plan, t, x.mine, n, memory, take_pair, pairs);
            if (rc) {
                say("joining table %u: %s", t, simstore_last_error());
                failed = 1;
            }
        }
        if (show_progress) {
            uint64_t found = sum_ranks(pairs->n);
            progress("join: table %u of %u done, %llu fingerprint %s so far", t + 1, tables,
                     (unsigned long long)found, CLI_NOUN(found, "pair"));
        }
    }
    free(x.dest);
    free(x.send);
    free(x.mine);
    free(x.count);
    free(x.req);
    free(counts);
    free(split);
    free(all);
    free(v);
    simstore_join_plan_free(plan);
    return agree(failed, "joining");
}

int join_owned(const owned *o, unsigned k, uint64_t memory, pairs_acc *pairs)
{
    return join_distinct(o->fps, o->nfps, k, memory, pairs);
}
