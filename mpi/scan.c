/* scan.c: `simstore-mpi pairs OUT` and `simstore-mpi clusters OUT` over
 * a sharded store, rank r reading shard r, printing what `simstore pairs`
 * and `simstore clusters` print for one store of the same documents.
 *
 * 1. Documents go to the rank owning their fingerprint (a hash of it):
 *    that rank then holds every document of each fingerprint it owns, and
 *    the owned fingerprints of all ranks are the distinct fingerprints.
 * 2. The join, table by table (simstore_join_plan_*): every rank permutes
 *    its owned fingerprints, ranks agree on prefix ranges from a sample of
 *    the permuted values, send each value to the rank owning its prefix
 *    (all-to-all in rounds of at most --chunk bytes), and each joins its
 *    range; a pair comes out of the first table covering it only.
 * 3. pairs: a fingerprint pair goes to the owner of a, which attaches a's
 *    documents and sends them on to the owner of b, which makes the
 *    document pairs. clusters: the pairs are the edges of a graph whose
 *    nodes (fingerprints; documents with a minimum similarity) live at
 *    their owners; components by label propagation with hooking and
 *    pointer jumping (every label only decreases, each node's label stays
 *    in its component; the labels stop changing when each component has
 *    one), no rank holding more than its nodes' edges; each component's
 *    kept document, or its stars in keep order, are chosen at the owner of
 *    its label, which receives that component's nodes (and for stars their
 *    edges) only.
 * 4. Output lines carry a byte key of the single-node order; a sample sort
 *    spreads them over the ranks in order, and rank 0 prints its own, then
 *    each rank's in turn, a chunk at a time.
 * A fingerprint-only store's documents are its fingerprints (ids: their
 * hex). --paragraphs joins the distinct paragraphs instead and adds up
 * each document pair's shared counts at the rank owning the pair
 * (paragraph_pairs); clusters then takes those pairs as edges between the
 * documents at their own ranks. */
#include "mpi_internal.h"

#include "cli.h"
#include "optcheck.h"
#include "simstore.h"
#include "simstore_unstable.h"

#include <mpi.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t chunk_bytes = (uint64_t)4 << 20;

/* The rank owning fingerprint fp's documents and node. */
static int owner_of(uint64_t fp)
{
    uint64_t h = fp * UINT64_C(0x9E3779B97F4A7C15);
    h ^= h >> 31;
    return (int)(h % (uint64_t)nranks);
}

/* ---- documents at the owners of their fingerprints ------------------------ */

/* A document as it travels: fp u64, key u64, keep u64, flags u8, id length u32,
 * sketch length u32, id, sketch. */
typedef struct sdoc {
    uint64_t fp;
    uint64_t key;  /* at the owners: rank << 40 | index in its docs */
    uint64_t keep; /* keep order: smaller first; ties by id */
    const char *id;
    const uint8_t *sketch; /* NULL: none */
    uint32_t id_len, sketch_len;
    uint8_t flags;
} sdoc;

static void put_doc(buf *b, const sdoc *d)
{
    put64(b, d->fp);
    put64(b, d->key);
    put64(b, d->keep);
    put(b, &d->flags, 1);
    put32(b, d->id_len);
    put32(b, d->sketch ? d->sketch_len : 0);
    put(b, d->id, d->id_len);
    if (d->sketch)
        put(b, d->sketch, d->sketch_len);
}

static void get_doc(const char **p, sdoc *d)
{
    d->fp = get_u64(p);
    d->key = get_u64(p);
    d->keep = get_u64(p);
    d->flags = (uint8_t) * (*p)++;
    d->id_len = get_u32(p);
    d->sketch_len = get_u32(p);
    d->id = *p;
    *p += d->id_len;
    d->sketch = d->sketch_len ? (const uint8_t *)*p : NULL;
    *p += d->sketch_len;
}

static int id_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen > blen) - (alen < blen);
}

/* x is kept before y: keep order, then id. */
static int keeps_before(const sdoc *x, const sdoc *y)
{
    if (x->keep != y->keep)
        return x->keep < y->keep;
    return id_cmp(x->id, x->id_len, y->id, y->id_len) < 0;
}

static int by_fp_id(const void *x, const void *y)
{
    const sdoc *a = x, *b = y;
    if (a->fp != b->fp)
        return a->fp < b->fp ? -1 : 1;
    return id_cmp(a->id, a->id_len, b->id, b->id_len);
}

typedef struct export_ctx {
    buf *out;
    const simstore_cluster_options *keep;
    int fp_only;
} export_ctx;

/* A fingerprint-only store's documents are its fingerprints: each travels
 * as a document whose id is its 16 hex digits (whose byte order is the
 * fingerprints' order, the single-node commands' order of them) and whose
 * keep order is 0 (so the smallest is kept, as they keep it). */
static int export_doc(void *ctx, const simstore_document *doc)
{
    export_ctx *x = (export_ctx *)ctx;
    char hex[17];
    sdoc d = {doc->fp,
              0,
              simstore_keep_order(x->keep, doc),
              doc->id,
              doc->sketch,
              (uint32_t)doc->id_len,
              (uint32_t)doc->sketch_bytes,
              (uint8_t)doc->flags};
    if (x->fp_only) {
        cli_format_hex64(doc->fp, hex);
        d.keep = 0;
        d.id = hex;
        d.id_len = 16;
        d.sketch = NULL;
        d.sketch_len = 0;
        d.flags = 0;
    }
    put_doc(&x->out[owner_of(doc->fp)], &d);
    return 0;
}

/* A document's key at its owner: the owner's rank above DOC_KEY_BITS. */
#define DOC_KEY_BITS 40

/* The documents of the fingerprints this rank owns, sorted by (fp, id),
 * and the distinct fingerprints (nodes) with their runs. */
typedef struct owned {
    buf *in; /* the received bytes the documents point into */
    sdoc *docs;
    size_t ndocs;
    uint64_t *fps; /* distinct, increasing */
    size_t *first; /* nfps + 1: fps[i]'s documents are docs[first[i]..first[i+1]) */
    size_t nfps;
} owned;

static void owned_free(owned *o)
{
    bufs_free(o->in);
    free(o->docs);
    free(o->fps);
    free(o->first);
    memset(o, 0, sizeof *o);
}

/* fp's node, or SIZE_MAX. */
static size_t node_of(const owned *o, uint64_t fp)
{
    size_t lo = 0, hi = o->nfps;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (o->fps[m] < fp)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < o->nfps && o->fps[lo] == fp ? lo : SIZE_MAX;
}

/* Every rank exports its shard; the documents meet at their owners.
 * Returns 0, or -1 (said) when this rank's export failed. Collective. */
static int gather_owned(simstore *s, const simstore_cluster_options *keep, int fp_only, owned *o)
{
    memset(o, 0, sizeof *o);
    buf *out = bufs_new();
    export_ctx x = {out, keep, fp_only};
    int failed = 0;
    int rc = simstore_export(s, NULL, 0, export_doc, &x);
    if (rc) {
        say("reading the documents: %s", simstore_last_error());
        failed = 1;
        for (int i = 0; i < nranks; i++)
            out[i].len = 0;
    }
    o->in = bufs_new();
    exchange_bufs(out, o->in, chunk_bytes);
    bufs_free(out);
    size_t n = 0;
    for (int r = 0; r < nranks; r++)
        for (const char *p = o->in[r].data, *end = p + o->in[r].len; p < end; n++) {
            sdoc d;
            get_doc(&p, &d);
        }
    o->docs = must(malloc((n ? n : 1) * sizeof *o->docs));
    for (int r = 0; r < nranks; r++)
        for (const char *p = o->in[r].data, *end = p + o->in[r].len; p < end;)
            get_doc(&p, &o->docs[o->ndocs++]);
    sort_items(o->docs, o->ndocs, sizeof *o->docs, by_fp_id);
    for (size_t i = 0; i < n; i++)
        o->docs[i].key = (uint64_t)rank << DOC_KEY_BITS | i;
    o->fps = must(malloc((n ? n : 1) * sizeof *o->fps));
    o->first = must(malloc((n + 1) * sizeof *o->first));
    for (size_t i = 0; i < n; i++)
        if (i == 0 || o->docs[i].fp != o->docs[i - 1].fp) {
            o->first[o->nfps] = i;
            o->fps[o->nfps++] = o->docs[i].fp;
        }
    o->first[o->nfps] = n;
    if (show_progress) {
        uint64_t docs = sum_ranks(o->ndocs), fps = sum_ranks(o->nfps);
        progress("read %llu %s with %llu distinct %s from %d %s", (unsigned long long)docs,
                 CLI_NOUN(docs, "document"), (unsigned long long)fps, CLI_NOUN(fps, "fingerprint"),
                 nranks, nranks == 1 ? "shard" : "shards");
    }
    return failed ? -1 : 0;
}

/* ---- the join, table by table ------------------------------------------- */

typedef struct fpair {
    uint64_t a, b;
    unsigned distance;
} fpair;

typedef struct pairs_acc {
    fpair *v;
    size_t n, cap;
} pairs_acc;

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

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

#define SAMPLES 64 /* permuted values a rank offers per table */

/* The join at distance k over the distinct fingerprints fps[0..nfps) of
 * every rank (each fingerprint on one rank only): this rank's share of the
 * pairs (each pair on exactly one rank). Returns 0, or -1 (said) when this
 * rank failed; agreed on every rank. Collective. */
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

static int join_distinct(const uint64_t *fps, size_t nfps, unsigned k, uint64_t memory,
                         pairs_acc *pairs)
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
    int *counts = must(malloc((size_t)nranks * 2 * sizeof *counts)), *displs = counts + nranks;
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
        /* Prefix ranges from a sample: rank r owns the prefixes in
         * [split[r - 1], split[r]). Every ns-th value, each standing for as
         * many of this rank's: the ranges need not be exact, only even
         * (which rank joins a prefix changes no answer). */
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

static int join_owned(const owned *o, unsigned k, uint64_t memory, pairs_acc *pairs)
{
    return join_distinct(o->fps, o->nfps, k, memory, pairs);
}

/* ---- output: keyed lines, sorted across the ranks, printed by rank 0 -------- */

/* Output records: key length u32, line length u32, key, line. Keys compare
 * as bytes (a shorter key that is a prefix first). */
typedef struct orec {
    const char *key, *line;
    uint32_t key_len, line_len;
} orec;

typedef struct lines {
    buf recs;
    FILE *f; /* lines are written here, then copied into recs */
    char *text;
    size_t text_len;
    uint8_t key[1 + 2 * (2 * SIMSTORE_MAX_ID_BYTES + 2) + 16];
    size_t key_len;
} lines;

static int lines_open(lines *l)
{
    memset(l, 0, sizeof *l);
    l->f = open_memstream(&l->text, &l->text_len);
    return l->f ? 0 : -1;
}

static void lines_close(lines *l)
{
    if (l->f)
        fclose(l->f);
    free(l->text);
    free(l->recs.data);
    memset(l, 0, sizeof *l);
}

/* Key pieces: an id escaped so that byte order of keys is the byte order of
 * ids (0 as 0 1, the end as 0 0), a byte, a big-endian u64. */
static void key_id(lines *l, const char *id, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        l->key[l->key_len++] = (uint8_t)id[i];
        if (id[i] == 0)
            l->key[l->key_len++] = 1;
    }
    l->key[l->key_len++] = 0;
    l->key[l->key_len++] = 0;
}

static void key_u64(lines *l, uint64_t v)
{
    for (int i = 7; i >= 0; i--)
        l->key[l->key_len++] = (uint8_t)(v >> (8 * i));
}

/* The line written to l->f since the last one, with l->key, as a record. */
static void line_done(lines *l)
{
    fflush(l->f);
    put32(&l->recs, (uint32_t)l->key_len);
    put32(&l->recs, (uint32_t)l->text_len);
    put(&l->recs, l->key, l->key_len);
    put(&l->recs, l->text, l->text_len);
    rewind(l->f);
    l->key_len = 0;
}

static int orec_cmp(const void *x, const void *y)
{
    const orec *a = x, *b = y;
    return id_cmp(a->key, a->key_len, b->key, b->key_len);
}

static orec *parse_recs(const buf *b, size_t extra, size_t *n)
{
    size_t count = 0;
    for (const char *p = b->data, *end = p + b->len; p < end; count++) {
        uint32_t kl = get_u32(&p), ll = get_u32(&p);
        p += kl + ll;
    }
    orec *v = must(malloc((count + extra + 1) * sizeof *v));
    count = 0;
    for (const char *p = b->data, *end = p + b->len; p < end; count++) {
        v[count].key_len = get_u32(&p);
        v[count].line_len = get_u32(&p);
        v[count].key = p;
        p += v[count].key_len;
        v[count].line = p;
        p += v[count].line_len;
    }
    *n = count;
    return v;
}

#define OUT_SAMPLES 32
#define TAG_LINES 71

/* Sort every rank's records into one order and print their lines on rank
 * 0 in it. Returns 0, or 1 on every rank when writing failed. Collective. */
static int print_sorted(lines *l)
{
    size_t n;
    orec *v = parse_recs(&l->recs, 0, &n);
    sort_items(v, n, sizeof *v, orec_cmp);
    if (show_progress) {
        uint64_t all_lines = sum_ranks(n);
        progress("sorting %llu output %s across the ranks", (unsigned long long)all_lines,
                 CLI_NOUN(all_lines, "line"));
    }
    /* Splitters from a sample of every rank's keys. */
    buf sample = {NULL, 0, 0};
    size_t ns = n < OUT_SAMPLES ? n : OUT_SAMPLES;
    for (size_t i = 0; i < ns; i++) {
        const orec *r = &v[(2 * i + 1) * n / (2 * ns)];
        put32(&sample, r->key_len);
        put32(&sample, 0);
        put(&sample, r->key, r->key_len);
    }
    int len = (int)sample.len;
    int *counts = must(malloc((size_t)nranks * 2 * sizeof *counts)), *displs = counts + nranks;
    MPI_Allgather(&len, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    size_t total = 0;
    for (int r = 0; r < nranks; r++) {
        displs[r] = (int)total;
        total += (size_t)counts[r];
    }
    buf all = {must(malloc(total ? total : 1)), total, total};
    MPI_Allgatherv(sample.data, len, MPI_BYTE, all.data, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    free(sample.data);
    size_t nall;
    orec *sv = parse_recs(&all, 0, &nall);
    sort_items(sv, nall, sizeof *sv, orec_cmp);
    orec *split = must(malloc((size_t)nranks * sizeof *split));
    for (int r = 0; r + 1 < nranks; r++)
        split[r] = nall ? sv[(size_t)(r + 1) * nall / (size_t)nranks] : (orec){"", NULL, 0, 0};
    buf *out = bufs_new(), *in = bufs_new();
    for (size_t i = 0; i < n; i++) {
        int lo = 0, hi = nranks - 1;
        while (lo < hi) {
            int m = (lo + hi) / 2;
            if (orec_cmp(&split[m], &v[i]) <= 0)
                lo = m + 1;
            else
                hi = m;
        }
        put32(&out[lo], v[i].key_len);
        put32(&out[lo], v[i].line_len);
        put(&out[lo], v[i].key, v[i].key_len);
        put(&out[lo], v[i].line, v[i].line_len);
    }
    free(v);
    free(split);
    free(sv);
    free(all.data);
    free(l->recs.data);
    l->recs.data = NULL;
    l->recs.len = l->recs.cap = 0;
    exchange_bufs(out, in, chunk_bytes);
    bufs_free(out);
    buf mine = {NULL, 0, 0};
    for (int r = 0; r < nranks; r++)
        put(&mine, in[r].data, in[r].len);
    bufs_free(in);
    v = parse_recs(&mine, 0, &n);
    sort_items(v, n, sizeof *v, orec_cmp);
    /* Rank 0 prints its lines, then each rank's in turn, a chunk at a time. */
    int failed = 0;
    buf text = {NULL, 0, 0};
    for (int r = 0; r < nranks; r++) {
        if (rank == r) {
            for (size_t i = 0; i <= n; i++) {
                if (i == n || text.len + v[i].line_len > chunk_bytes) {
                    if (rank == 0 && text.len)
                        fwrite(text.data, 1, text.len, stdout);
                    else if (text.len)
                        MPI_Send(text.data, (int)text.len, MPI_BYTE, 0, TAG_LINES, MPI_COMM_WORLD);
                    text.len = 0;
                }
                if (i < n)
                    put(&text, v[i].line, v[i].line_len);
            }
            if (rank != 0)
                MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_LINES, MPI_COMM_WORLD);
            else
                progress("printed the lines of rank 0 (ranks 0..%d)", nranks - 1);
        } else if (rank == 0) {
            for (;;) {
                MPI_Status st;
                int got;
                MPI_Probe(r, TAG_LINES, MPI_COMM_WORLD, &st);
                MPI_Get_count(&st, MPI_BYTE, &got);
                if ((size_t)got > text.cap) {
                    text.data = must(realloc(text.data, (size_t)got));
                    text.cap = (size_t)got;
                }
                MPI_Recv(text.data, got, MPI_BYTE, r, TAG_LINES, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (got == 0)
                    break;
                fwrite(text.data, 1, (size_t)got, stdout);
            }
            progress("printed the lines of rank %d (ranks 0..%d)", r, nranks - 1);
            text.len = 0;
        }
    }
    if (rank == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        say("writing standard output failed");
        failed = 1;
    }
    free(text.data);
    free(v);
    free(mine.data);
    free(counts);
    return agree(failed, "printing");
}

/* ---- common to both commands ------------------------------------------------- */

typedef struct scan_opts {
    unsigned k;
    int have_k;
    int json;
    int similarity;        /* --similarity */
    double min_similarity; /* --min-similarity */
    int min_similarity_given;
    int distance_only;   /* pairs by fingerprint: no similarity by default */
    uint64_t memory;     /* --memory (1G) */
    int paragraphs;      /* --paragraphs */
    double min_fraction; /* --min-fraction */
    int min_fraction_given;
    simstore_near_rule rule; /* k and min_similarity once resolved (open_shard) */
} scan_opts;

/* Rank 0 checks the whole store (manifest, shards, R), then every rank
 * opens its shard. Returns 0, 1 (said, on
 * every rank) or 2 (a usage error, said by rank 0). Collective. */
static int open_shard(const char *out, scan_opts *o, simstore **s, simstore_stats *st)
{
    char shard[PATH_MAX];
    if (open_my_shard(out, s, st, shard, sizeof shard))
        return 1;
    /* k and the similarity filter by the library's near-duplicate rule
     * (simstore.h), resolved and checked as `simstore pairs` and
     * `clusters` resolve them; the shards agree on k and text options (the
     * manifest): rank 0 says what it refuses. */
    simstore_scan_options so;
    simstore_scan_options_init(&so);
    if (o->have_k)
        so.k = o->k;
    if (o->min_similarity_given || o->paragraphs || o->distance_only)
        so.min_similarity = o->min_similarity; /* 0 for those two: the store's k */
    int rc = simstore_scan_resolve(*s, &so, &o->k, &o->min_similarity);
    if (rc) {
        if (rank == 0)
            fprintf(stderr, "%s: %s: %s\n", cmd_name, out, simstore_last_error());
        simstore_close(*s);
        *s = NULL;
        return 1;
    }
    simstore_near_rule_init(&o->rule);
    o->rule.k = o->k;
    o->rule.min_similarity = o->min_similarity;
    o->rule.min_fraction = o->min_fraction;
    return 0;
}

static void print_id(FILE *f, const char *id, size_t len, unsigned flags, int json)
{
    if (json && !(flags & SIMSTORE_MATCH_INTEGER_ID))
        cli_json_string(f, id, len);
    else
        fwrite(id, 1, len, f);
}

/* The options of both commands (O_UNSUPPORTED: not supported yet). */
enum {
    O_K = 1,
    O_JSON,
    O_SIMILARITY,
    O_MIN_SIMILARITY,
    O_THREADS,
    O_MEMORY,
    O_CHUNK,
    O_BY_FP,
    O_MODE,
    O_KEEP,
    O_SINGLETONS,
    O_PROGRESS,
    O_PARAGRAPHS,
    O_MIN_FRACTION,
    O_UNSUPPORTED
};

/* Apply option c shared by both commands. Returns 0, or 2 for a bad
 * value or an option of neither (the caller says so). */
static int common_option(int c, const char *arg, scan_opts *o)
{
    unsigned long long v;
    switch (c) {
    case O_K:
        if (cli_parse_uint(arg, 0, SIMSTORE_MAX_K, &v))
            return 2;
        o->k = (unsigned)v;
        o->have_k = 1;
        return 0;
    case O_JSON: o->json = 1; return 0;
    case O_PROGRESS: show_progress = 1; return 0;
    case O_SIMILARITY: o->similarity = 1; return 0;
    case O_MIN_SIMILARITY:
        if (cli_parse_unit(arg, &o->min_similarity))
            return 2;
        o->min_similarity_given = 1;
        return 0;
    case O_THREADS: return cli_parse_uint(arg, 1, 1024, &v) ? 2 : 0;
    case O_MEMORY:
        if (cli_parse_size(arg, &v) || v < SIMSTORE_MIN_MEMORY_BYTES)
            return 2;
        o->memory = v;
        return 0;
    case O_CHUNK:
        if (cli_parse_size(arg, &v) || v < 1024 || v > ((uint64_t)1 << 30) ||
            v * 2 * (uint64_t)nranks > (uint64_t)INT_MAX)
            return 2;
        chunk_bytes = v;
        return 0;
    case O_PARAGRAPHS: o->paragraphs = 1; return 0;
    case O_MIN_FRACTION:
        if (cli_parse_unit(arg, &o->min_fraction))
            return 2;
        o->min_fraction_given = 1;
        return 0;
    default: return 2;
    }
}

#define COMMON_LONG_OPTIONS                                                                        \
    {"k", required_argument, NULL, O_K}, {"json", no_argument, NULL, O_JSON},                      \
        {"similarity", no_argument, NULL, O_SIMILARITY},                                           \
        {"min-similarity", required_argument, NULL, O_MIN_SIMILARITY},                             \
        {"threads", required_argument, NULL, O_THREADS},                                           \
        {"memory", required_argument, NULL, O_MEMORY},                                             \
        {"chunk", required_argument, NULL, O_CHUNK}, {"progress", no_argument, NULL, O_PROGRESS},  \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }

#define COMMON_HELP                                                                                \
    "      --k K            largest distance, 0..7 (default: 7 on a store that keeps\n"            \
    "                       sketches when --min-similarity is not 0, else the\n"                   \
    "                       store's k; as `simstore pairs` and `clusters`)\n"                      \
    "      --json           JSON Lines\n"                                                          \
    "      --similarity     add the estimated Jaccard similarity (format/sketch.md)\n"             \
    "      --memory SIZE    each rank's scratch for one prefix group of the join (1G)\n"           \
    "      --chunk SIZE     bytes a rank sends another per all-to-all round (4M)\n"                \
    "      --threads N      accepted for `simstore`'s sake: each rank joins on one thread\n"       \
    "      --progress       rank 0 reports each step on stderr, with the ranks' totals\n"          \
    "  -h, --help           show this help\n"

/* After the options of either command: one operand, and `refused` (NULL:
 * nothing, else what cmd/optcheck.h's check of the command said). Returns
 * 0 or 2 (said by rank 0). */
static int check_options(int argc, char **argv, const char *refused)
{
    if (argc - optind != 1)
        return usage_error(argc, argv);
    if (refused)
        rank0_says("%s", refused);
    return refused ? 2 : 0;
}

/* --paragraphs on a store without a paragraph index: 1 (said by rank 0,
 * the shard closed), else 0. */
static int lacks_paragraph_index(simstore *s, const simstore_stats *st, const char *out)
{
    const char *refused = cli_store_problem(st, 0, 1);
    if (!refused)
        return 0;
    rank0_says("%s %s", out, refused);
    simstore_close(s);
    return 1;
}

/* Exit 2 for an option not supported yet; why: NULL or a hint. */
static int unsupported(const char *what, const char *why)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s is not supported yet%s%s\n", cmd_name, what, why ? ": " : "",
                why ? why : "");
    return 2;
}

/* ---- pairs ---------------------------------------------------------------------- */

typedef struct pairs_run {
    scan_opts o;
    int by_fp;
    simstore_sketch_kind sketch;
    lines l;
} pairs_run;

static void emit_doc_pair(void *ctx, const sdoc *x, const sdoc *y, unsigned d)
{
    pairs_run *p = (pairs_run *)ctx;
    double sim = simstore_sketch_similarity(p->sketch, x->sketch, y->sketch);
    if (!simstore_near_duplicate(&p->o.rule, d, sim))
        return;
    if (id_cmp(x->id, x->id_len, y->id, y->id_len) > 0) {
        const sdoc *t = x;
        x = y;
        y = t;
    }
    lines *l = &p->l;
    l->key[l->key_len++] = (uint8_t)d;
    key_id(l, x->id, x->id_len);
    key_id(l, y->id, y->id_len);
    int json = p->o.json;
    fputs(json ? "{\"a\":" : "", l->f);
    print_id(l->f, x->id, x->id_len, x->flags, json);
    fputs(json ? ",\"b\":" : "\t", l->f);
    print_id(l->f, y->id, y->id_len, y->flags, json);
    fprintf(l->f, json ? ",\"distance\":%u" : "\t%u", d);
    if (p->o.similarity) {
        char s[32];
        cli_format_similarity(sim, json, s);
        fprintf(l->f, json ? ",\"similarity\":%s" : "\t%s", s);
    }
    fputs(json ? "}\n" : "\n", l->f);
    line_done(l);
}

static void emit_fp_pair(void *ctx, uint64_t a, uint64_t b, unsigned d, uint64_t ca, uint64_t cb)
{
    pairs_run *p = (pairs_run *)ctx;
    lines *l = &p->l;
    l->key[l->key_len++] = (uint8_t)d;
    key_u64(l, a);
    key_u64(l, b);
    char ha[17], hb[17];
    cli_format_hex64(a, ha);
    cli_format_hex64(b, hb);
    if (p->o.json)
        fprintf(l->f,
                "{\"a\":\"%s\",\"b\":\"%s\",\"distance\":%u,\"count_a\":%llu,\"count_b\":%llu", ha,
                hb, d, (unsigned long long)ca, (unsigned long long)cb);
    else
        fprintf(l->f, "%s\t%s\t%u\t%llu\t%llu", ha, hb, d, (unsigned long long)ca,
                (unsigned long long)cb);
    if (p->o.similarity) {
        char s[32];
        cli_format_similarity(SIMSTORE_SIMILARITY_UNKNOWN, p->o.json, s);
        fprintf(l->f, p->o.json ? ",\"similarity\":%s" : "\t%s", s);
    }
    fputs(p->o.json ? "}\n" : "\n", l->f);
    line_done(l);
}

/* Receives a pair of documents within distance (x's and y's pointers
 * valid during the call), or a pair of fingerprints with their document
 * counts. */
typedef void (*doc_pair_fn)(void *ctx, const sdoc *x, const sdoc *y, unsigned distance);
typedef void (*fp_pair_fn)(void *ctx, uint64_t a, uint64_t b, unsigned distance, uint64_t ca,
                           uint64_t cb);

/* Every pair of documents within the join's distance, at the owner of one
 * of their fingerprints: those sharing a fingerprint, and those of the
 * join's pairs (a's documents travel to the owner of b). With fpfn instead,
 * the pairs of fingerprints (a shared one paired with itself at 0) with
 * their counts. Collective. */
static void each_pair(const owned *o, const pairs_acc *pairs, doc_pair_fn fn, fp_pair_fn fpfn,
                      void *ctx)
{
    for (size_t i = 0; i < o->nfps; i++) {
        size_t lo = o->first[i], hi = o->first[i + 1];
        if (hi - lo < 2)
            continue;
        if (fpfn)
            fpfn(ctx, o->fps[i], o->fps[i], 0, hi - lo, hi - lo);
        else
            for (size_t x = lo; x < hi; x++)
                for (size_t y = x + 1; y < hi; y++)
                    fn(ctx, &o->docs[x], &o->docs[y], 0);
    }
    /* (a, b, d) to the owner of a. */
    buf *out = bufs_new(), *in = bufs_new();
    for (size_t i = 0; i < pairs->n; i++) {
        const fpair *f = &pairs->v[i];
        buf *b = &out[owner_of(f->a)];
        put64(b, f->a);
        put64(b, f->b);
        put32(b, f->distance);
    }
    exchange_bufs(out, in, chunk_bytes);
    /* The owner of a sends on (b, d, a, a's document count, then a's
     * documents unless by fingerprint) to the owner of b. */
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t a = get_u64(&q), b = get_u64(&q);
            uint32_t d = get_u32(&q);
            size_t ia = node_of(o, a);
            size_t lo = o->first[ia], hi = o->first[ia + 1];
            buf *to = &out[owner_of(b)];
            put64(to, b);
            put32(to, d);
            put64(to, a);
            put64(to, hi - lo);
            if (!fpfn)
                for (size_t x = lo; x < hi; x++)
                    put_doc(to, &o->docs[x]);
        }
        in[r].len = 0;
    }
    exchange_bufs(out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t b = get_u64(&q);
            uint32_t d = get_u32(&q);
            uint64_t a = get_u64(&q), ca = get_u64(&q);
            size_t ib = node_of(o, b);
            size_t lo = o->first[ib], hi = o->first[ib + 1];
            if (fpfn) {
                fpfn(ctx, a, b, d, ca, hi - lo);
                continue;
            }
            for (uint64_t i = 0; i < ca; i++) {
                sdoc x;
                get_doc(&q, &x);
                for (size_t y = lo; y < hi; y++)
                    fn(ctx, &x, &o->docs[y], d);
            }
        }
    }
    bufs_free(out);
    bufs_free(in);
}

/* ---- pairs --paragraphs: documents sharing near-duplicate paragraphs ---------- */

/* As `simstore pairs --paragraphs` counts them: of A's paragraphs (its list,
 * repeats counted each), shared(A, B) have a paragraph of B within k. So a
 * distinct paragraph p held m times by A adds m to shared(A, B) for every
 * other document B holding a paragraph within k of p, once whatever the
 * number of B's such paragraphs.
 * 1. Every rank reads its shard's documents with paragraphs (their homes:
 *    a document's key is its home rank and index there) and sends each
 *    distinct paragraph of each to the rank owning that paragraph, with the
 *    document's key, its paragraph count and the paragraph's multiplicity.
 * 2. The join of the distinct paragraphs, table by table (join_distinct).
 * 3. A joined pair (p, q) sends p's holders to q's owner and q's to p's:
 *    there each paragraph's near documents are its holders and those
 *    received, without repeats; each holder A of p and each near B other
 *    than A make (A, B, m), sent to the rank owning the pair {A, B}.
 * 4. That rank adds up shared(A, B) and shared(B, A), keeps the pairs whose
 *    fraction passes, and sends each on to A's home, which attaches A's id,
 *    then to B's, which makes the line. */

/* A paragraph's holder: paragraph fp u64, document key u64, the document's
 * paragraph count u32, the paragraph's multiplicity in it u32. */
typedef struct holder {
    uint64_t p, key;
    uint32_t of, times;
} holder;

/* The holders received (24 bytes each) appended to v[0..*n), which grows;
 * in emptied. */
static holder *take_holders(buf *in, holder *v, size_t *n)
{
    size_t more = 0;
    for (int r = 0; r < nranks; r++)
        more += in[r].len / 24;
    v = must(realloc(v, (*n + more ? *n + more : 1) * sizeof *v));
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; (*n)++) {
            v[*n].p = get_u64(&q);
            v[*n].key = get_u64(&q);
            v[*n].of = get_u32(&q);
            v[*n].times = get_u32(&q);
        }
        in[r].len = 0;
    }
    return v;
}

static int holder_by_p_key(const void *x, const void *y)
{
    const holder *a = x, *b = y;
    if (a->p != b->p)
        return a->p < b->p ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

/* The documents of this rank's shard that list paragraphs: their ids. */
typedef struct homes {
    buf ids;    /* id bytes */
    size_t *at; /* n + 1 offsets into ids */
    uint8_t *flags;
    uint64_t *keep; /* clusters: each one's keep order (simstore_keep_order) */
    const simstore_cluster_options *keep_rule; /* clusters; NULL for pairs */
    size_t n, cap;
    buf *out;    /* step 1's messages */
    uint64_t *v; /* one document's paragraphs */
    size_t vcap;
} homes;

static int send_paragraphs(void *ctx, const simstore_document *doc)
{
    homes *h = (homes *)ctx;
    size_t n = doc->paragraph_count;
    if (n == 0)
        return 0;
    if (h->n + 1 >= h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->at = must(realloc(h->at, (h->cap + 1) * sizeof *h->at));
        h->flags = must(realloc(h->flags, h->cap));
        h->keep = must(realloc(h->keep, h->cap * sizeof *h->keep));
    }
    h->keep[h->n] = h->keep_rule ? simstore_keep_order(h->keep_rule, doc) : 0;
    if (h->n == 0)
        h->at[0] = 0;
    put(&h->ids, doc->id, doc->id_len);
    h->flags[h->n] = (uint8_t)doc->flags;
    h->at[h->n + 1] = h->ids.len;
    uint64_t key = (uint64_t)rank << DOC_KEY_BITS | h->n;
    h->n++;
    if (n > h->vcap) {
        h->v = must(realloc(h->v, n * sizeof *h->v));
        h->vcap = n;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t v = 0;
        for (int b = 0; b < 8; b++)
            v |= (uint64_t)doc->paragraphs[8 * i + (size_t)b] << (8 * b);
        h->v[i] = v;
    }
    sort_items(h->v, n, sizeof *h->v, cmp_u64);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i; j < n && h->v[j] == h->v[i]; j++)
            ;
        buf *b = &h->out[owner_of(h->v[i])];
        put64(b, h->v[i]);
        put64(b, key);
        put32(b, (uint32_t)n);
        put32(b, (uint32_t)(j - i));
    }
    return 0;
}

/* A directed count on its way to the pair's rank: A, B, m, of(A), of(B). */
typedef struct dcount {
    uint64_t a, b;
    uint32_t times, of_a, of_b;
} dcount;

static int dcount_cmp(const void *x, const void *y)
{
    const dcount *p = x, *q = y;
    uint64_t p0 = p->a < p->b ? p->a : p->b, p1 = p->a < p->b ? p->b : p->a;
    uint64_t q0 = q->a < q->b ? q->a : q->b, q1 = q->a < q->b ? q->b : q->a;
    if (p0 != q0)
        return p0 < q0 ? -1 : 1;
    if (p1 != q1)
        return p1 < q1 ? -1 : 1;
    return (p->a > q->a) - (p->a < q->a);
}

static int pair_owner(uint64_t x, uint64_t y)
{
    uint64_t lo = x < y ? x : y, hi = x < y ? y : x;
    return owner_of(lo * UINT64_C(0xD6E8FEB86659FD93) + hi);
}

/* clusters --paragraphs: a pair at the home of one of its documents. */
typedef struct para_edge {
    uint64_t node, other; /* document keys: node's home is this rank */
    double fraction;
} para_edge;

static int para_edge_cmp(const void *x, const void *y)
{
    const para_edge *a = x, *b = y;
    if (a->node != b->node)
        return a->node < b->node ? -1 : 1;
    return (a->other > b->other) - (a->other < b->other);
}

typedef struct para_run {
    int json;
    const simstore_near_rule *rule; /* its minimum fraction */
    lines l;
    int want_edges; /* clusters: the pairs as edges at both homes, no lines */
    para_edge *edges;
    size_t nedges;
} para_run;

/* The line of a pair, made at the home of its second document. */
static void emit_para_pair(para_run *pr, const char *x, uint32_t xl, uint8_t xf, uint32_t sx,
                           uint32_t ox, const char *y, uint32_t yl, uint8_t yf, uint32_t sy,
                           uint32_t oy)
{
    if (id_cmp(x, xl, y, yl) > 0) {
        const char *t = x;
        x = y;
        y = t;
        uint32_t u = xl;
        xl = yl;
        yl = u;
        uint8_t f = xf;
        xf = yf;
        yf = f;
        u = sx, sx = sy, sy = u;
        u = ox, ox = oy, oy = u;
    }
    double fa = (double)sx / (double)ox, fb = (double)sy / (double)oy;
    double fraction = fa > fb ? fa : fb;
    uint64_t bits;
    memcpy(&bits, &fraction, sizeof bits); /* fraction >= 0: the bits order it */
    lines *l = &pr->l;
    key_u64(l, ~bits);
    key_id(l, x, xl);
    key_id(l, y, yl);
    int json = pr->json;
    fputs(json ? "{\"a\":" : "", l->f);
    print_id(l->f, x, xl, xf, json);
    fputs(json ? ",\"b\":" : "\t", l->f);
    print_id(l->f, y, yl, yf, json);
    fprintf(l->f,
            json ? ",\"shared_a\":%u,\"of_a\":%u,\"shared_b\":%u,\"of_b\":%u,\"fraction\":%.4f}\n"
                 : "\t%u\t%u\t%u\t%u\t%.4f\n",
            (unsigned)sx, (unsigned)ox, (unsigned)sy, (unsigned)oy, fraction);
    line_done(l);
}

/* The pairs' lines of this rank (steps 1 to 4). Returns 0, or 1 on every
 * rank (said). Collective. */
static int paragraph_pairs(simstore *s, unsigned k, uint64_t memory, para_run *pr, homes *hp)
{
    homes h = *hp;
    h.out = bufs_new();
    buf *in = bufs_new();
    int failed = 0;
    if (simstore_export(s, NULL, 0, send_paragraphs, &h)) {
        say("reading the documents: %s", simstore_last_error());
        failed = 1;
        for (int r = 0; r < nranks; r++)
            h.out[r].len = 0;
    }
    exchange_bufs(h.out, in, chunk_bytes);
    free(h.v);
    /* Step 1's holders, by paragraph; the distinct paragraphs. */
    size_t nh = 0;
    holder *hv = take_holders(in, NULL, &nh);
    sort_items(hv, nh, sizeof *hv, holder_by_p_key);
    uint64_t *fps = must(malloc((nh ? nh : 1) * sizeof *fps));
    size_t *first = must(malloc((nh + 1) * sizeof *first)), nfps = 0;
    for (size_t i = 0; i < nh; i++)
        if (i == 0 || hv[i].p != hv[i - 1].p) {
            first[nfps] = i;
            fps[nfps++] = hv[i].p;
        }
    first[nfps] = nh;
    if (show_progress) {
        uint64_t docs = sum_ranks(h.n), paras = sum_ranks(nfps);
        progress("read %llu %s with paragraphs, %llu distinct %s", (unsigned long long)docs,
                 CLI_NOUN(docs, "document"), (unsigned long long)paras,
                 CLI_NOUN(paras, "paragraph"));
    }
    pairs_acc pairs = {NULL, 0, 0};
    if (agree(failed, "reading the documents") ||
        (k > 0 && join_distinct(fps, nfps, k, memory, &pairs))) {
        failed = 1;
        goto done;
    }
    /* Step 3: each joined pair to the owners of both paragraphs, which send
     * their holders to the other's. */
    for (size_t i = 0; i < pairs.n; i++) {
        put64(&h.out[owner_of(pairs.v[i].a)], pairs.v[i].a);
        put64(&h.out[owner_of(pairs.v[i].a)], pairs.v[i].b);
        put64(&h.out[owner_of(pairs.v[i].b)], pairs.v[i].b);
        put64(&h.out[owner_of(pairs.v[i].b)], pairs.v[i].a);
    }
    free(pairs.v);
    pairs.v = NULL;
    exchange_bufs(h.out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t p = get_u64(&q), other = get_u64(&q);
            size_t lo = 0, hi = nfps; /* p's holders */
            while (lo < hi) {
                size_t m = lo + (hi - lo) / 2;
                if (fps[m] < p)
                    lo = m + 1;
                else
                    hi = m;
            }
            for (size_t x = first[lo]; x < first[lo + 1]; x++) {
                buf *b = &h.out[owner_of(other)];
                put64(b, other);
                put64(b, hv[x].key);
                put32(b, hv[x].of);
                put32(b, 0);
            }
        }
        in[r].len = 0;
    }
    exchange_bufs(h.out, in, chunk_bytes);
    /* Each paragraph's near documents: its holders and those received. */
    size_t nn = nh;
    holder *near = must(malloc((nh ? nh : 1) * sizeof *near));
    if (nh)
        memcpy(near, hv, nh * sizeof *near);
    near = take_holders(in, near, &nn);
    sort_items(near, nn, sizeof *near, holder_by_p_key);
    size_t w = 0;
    for (size_t i = 0; i < nn; i++)
        if (w == 0 || near[i].p != near[w - 1].p || near[i].key != near[w - 1].key)
            near[w++] = near[i];
    nn = w;
    /* (A, B, m) for each holder A of a paragraph and each other near B. */
    for (size_t i = 0, j = 0; i < nfps; i++) {
        while (j < nn && near[j].p < fps[i])
            j++;
        size_t end = j;
        while (end < nn && near[end].p == fps[i])
            end++;
        for (size_t x = first[i]; x < first[i + 1]; x++)
            for (size_t y = j; y < end; y++) {
                if (near[y].key == hv[x].key)
                    continue;
                buf *b = &h.out[pair_owner(hv[x].key, near[y].key)];
                put64(b, hv[x].key);
                put64(b, near[y].key);
                put32(b, hv[x].times);
                put32(b, hv[x].of);
                put32(b, near[y].of);
            }
        j = end;
    }
    free(near);
    exchange_bufs(h.out, in, chunk_bytes);
    /* Step 4: the sums of both directions of each pair. */
    size_t nd = 0;
    for (int r = 0; r < nranks; r++)
        nd += in[r].len / 28;
    dcount *dv = must(malloc((nd ? nd : 1) * sizeof *dv));
    nd = 0;
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; nd++) {
            dv[nd].a = get_u64(&q);
            dv[nd].b = get_u64(&q);
            dv[nd].times = get_u32(&q);
            dv[nd].of_a = get_u32(&q);
            dv[nd].of_b = get_u32(&q);
        }
        in[r].len = 0;
    }
    sort_items(dv, nd, sizeof *dv, dcount_cmp);
    for (size_t i = 0; i < nd;) {
        uint64_t lo = dv[i].a < dv[i].b ? dv[i].a : dv[i].b;
        uint64_t hi = dv[i].a < dv[i].b ? dv[i].b : dv[i].a;
        uint32_t shared_lo = 0, shared_hi = 0, of_lo = 0, of_hi = 0;
        for (; i < nd && (dv[i].a == lo || dv[i].a == hi) && (dv[i].b == lo || dv[i].b == hi);
             i++) {
            if (dv[i].a == lo) {
                shared_lo += dv[i].times;
                of_lo = dv[i].of_a;
                of_hi = dv[i].of_b;
            } else {
                shared_hi += dv[i].times;
                of_hi = dv[i].of_a;
                of_lo = dv[i].of_b;
            }
        }
        /* The near-duplicate rule by paragraphs, from either side. */
        if (!simstore_near_duplicate_paragraphs(pr->rule, shared_lo, of_lo) &&
            !simstore_near_duplicate_paragraphs(pr->rule, shared_hi, of_hi))
            continue;
        double fa = (double)shared_lo / (double)of_lo, fb = (double)shared_hi / (double)of_hi;
        double fraction = fa > fb ? fa : fb;
        if (pr->want_edges) { /* to both homes */
            uint64_t bits;
            memcpy(&bits, &fraction, sizeof bits);
            for (int end = 0; end < 2; end++) {
                buf *b = &h.out[(int)((end ? hi : lo) >> DOC_KEY_BITS)];
                put64(b, end ? hi : lo);
                put64(b, end ? lo : hi);
                put64(b, bits);
            }
            continue;
        }
        buf *b = &h.out[(int)(lo >> DOC_KEY_BITS)];
        put64(b, lo);
        put64(b, hi);
        put32(b, shared_lo);
        put32(b, of_lo);
        put32(b, shared_hi);
        put32(b, of_hi);
    }
    free(dv);
    exchange_bufs(h.out, in, chunk_bytes);
    if (pr->want_edges) {
        size_t ne = 0;
        for (int r = 0; r < nranks; r++)
            ne += in[r].len / 24;
        pr->edges = must(malloc((ne ? ne : 1) * sizeof *pr->edges));
        for (int r = 0; r < nranks; r++)
            for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
                para_edge *e = &pr->edges[pr->nedges++];
                e->node = get_u64(&q);
                e->other = get_u64(&q);
                uint64_t bits = get_u64(&q);
                memcpy(&e->fraction, &bits, sizeof bits);
            }
        sort_items(pr->edges, pr->nedges, sizeof *pr->edges, para_edge_cmp);
        goto done;
    }
    /* At lo's home: its id attached, on to hi's home. */
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t lo = get_u64(&q), hi = get_u64(&q);
            size_t i = (size_t)(lo & ((UINT64_C(1) << DOC_KEY_BITS) - 1));
            buf *b = &h.out[(int)(hi >> DOC_KEY_BITS)];
            put64(b, hi);
            put(b, q, 16);
            q += 16;
            put(b, &h.flags[i], 1);
            put32(b, (uint32_t)(h.at[i + 1] - h.at[i]));
            put(b, h.ids.data + h.at[i], h.at[i + 1] - h.at[i]);
        }
        in[r].len = 0;
    }
    exchange_bufs(h.out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++)
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            uint64_t hi = get_u64(&q);
            uint32_t s_lo = get_u32(&q), o_lo = get_u32(&q), s_hi = get_u32(&q), o_hi = get_u32(&q);
            uint8_t f_lo = (uint8_t)*q++;
            uint32_t l_lo = get_u32(&q);
            const char *id_lo = q;
            q += l_lo;
            size_t i = (size_t)(hi & ((UINT64_C(1) << DOC_KEY_BITS) - 1));
            emit_para_pair(pr, id_lo, l_lo, f_lo, s_lo, o_lo, h.ids.data + h.at[i],
                           (uint32_t)(h.at[i + 1] - h.at[i]), h.flags[i], s_hi, o_hi);
        }
done:
    free(hv);
    free(fps);
    free(first);
    bufs_free(in);
    bufs_free(h.out);
    h.out = NULL;
    *hp = h;
    return failed;
}

static void homes_free(homes *h)
{
    free(h->ids.data);
    free(h->at);
    free(h->flags);
    free(h->keep);
    memset(h, 0, sizeof *h);
}

static void usage_pairs(FILE *out)
{
    fprintf(
        out,
        "Usage: mpirun -np R simstore-mpi pairs OUT [--k K] [--by-fingerprint] [--json]\n"
        "                      [--similarity] [--min-similarity J] [--memory SIZE]\n"
        "                      [--chunk SIZE] [--progress]\n"
        "       mpirun -np R simstore-mpi pairs OUT --paragraphs [--min-fraction F] [--k K]\n"
        "                      [--json] [--memory SIZE] [--chunk SIZE] [--progress]\n"
        "\n"
        "Print every unordered pair of documents of the sharded store OUT of R\n"
        "shards within Hamming distance K, rank r reading shard r: exactly what\n"
        "`simstore pairs` prints for one store of the same documents,\n"
        "ID_A<TAB>ID_B<TAB>DISTANCE sorted by distance, ID_A, ID_B. The join is\n"
        "spread over the ranks table by table (each rank joins a range of each\n"
        "table's prefixes), the documents are paired at the ranks owning their\n"
        "fingerprints, and rank 0 prints the lines of every rank in order.\n"
        "\n"
        "      --by-fingerprint pairs of distinct fingerprints with their document\n"
        "                       counts, HEX_A<TAB>HEX_B<TAB>DISTANCE<TAB>COUNT_A<TAB>\n"
        "                       COUNT_B\n"
        "      --min-similarity J\n"
        "                       only the pairs whose estimated similarity is at\n"
        "                       least J, 0..1; needs a store that keeps sketches\n"
        "                       (default: 0.9 when --k is not given on a store that\n"
        "                       keeps sketches, the near-duplicate setting; else 0)\n" COMMON_HELP
        "\n"
        "With --paragraphs (a store built with --paragraphs), the lines of `simstore\n"
        "pairs --paragraphs`, ID_A<TAB>ID_B<TAB>SHARED_A<TAB>OF_A<TAB>SHARED_B<TAB>OF_B<TAB>\n"
        "FRACTION (--min-fraction, default 0.3): the distinct paragraphs go to the\n"
        "ranks owning them with their documents, are joined as fingerprints are, and\n"
        "each document pair's shared counts are added up at the rank owning it.\n"
        "\n"
        "A fingerprint-only store prints HEX_A<TAB>HEX_B<TAB>DISTANCE (its documents\n"
        "are its fingerprints), as `simstore pairs` does.\n"
        "\n"
        "Not yet: fingerprint lines without a store (--method).\n");
}

int cmd_mpi_pairs(int argc, char **argv)
{
    static const struct option longopts[] = {
        COMMON_LONG_OPTIONS,
        {"by-fingerprint", no_argument, NULL, O_BY_FP},
        {"paragraphs", no_argument, NULL, O_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, O_MIN_FRACTION},
        {"method", required_argument, NULL, O_UNSUPPORTED},
        {NULL, 0, NULL, 0},
    };
    cmd_name = "simstore-mpi pairs";
    pairs_run p;
    memset(&p, 0, sizeof p);
    p.o.memory = (uint64_t)1 << 30;
    p.o.min_fraction = SIMSTORE_NEAR_FRACTION;
    int c, li = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, &li)) != -1) {
        if (c == 'h') {
            if (rank == 0)
                usage_pairs(stdout);
            return 0;
        } else if (c == O_BY_FP) {
            p.by_fp = 1;
        } else if (c == O_UNSUPPORTED) {
            char what[64];
            snprintf(what, sizeof what, "--%s", longopts[li].name);
            return unsupported(what, NULL);
        } else if (common_option(c, optarg, &p.o)) {
            return usage_error(argc, argv);
        }
    }
    int bad = check_options(argc, argv,
                            cli_pairs_options_problem(p.o.min_fraction_given, p.o.paragraphs,
                                                      p.by_fp, p.o.similarity, p.o.min_similarity));
    if (bad)
        return bad;
    if (p.by_fp && p.o.min_similarity > 0) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: pairs by fingerprint have no similarity: --min-similarity "
                    "needs pairs of documents\n",
                    cmd_name);
        return 2;
    }
    p.o.distance_only = p.by_fp;
    simstore *s;
    simstore_stats st;
    int status = open_shard(argv[optind], &p.o, &s, &st);
    if (status)
        return status;
    p.sketch = st.sketch;
    if (p.o.paragraphs) {
        if (lacks_paragraph_index(s, &st, argv[optind]))
            return 1;
        para_run pr;
        memset(&pr, 0, sizeof pr);
        pr.json = p.o.json;
        pr.rule = &p.o.rule;
        if (lines_open(&pr.l) != 0) {
            say("out of memory");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        homes h;
        memset(&h, 0, sizeof h);
        status = paragraph_pairs(s, p.o.k, p.o.memory / 4, &pr, &h);
        homes_free(&h);
        if (!status)
            status = print_sorted(&pr.l);
        lines_close(&pr.l);
        simstore_close(s);
        return status;
    }
    simstore_cluster_options keep; /* pairs keep nothing: min-id reads no metadata */
    simstore_cluster_options_init(&keep);
    keep.keep = SIMSTORE_KEEP_MIN_ID;
    owned o;
    pairs_acc pairs = {NULL, 0, 0};
    status = agree(gather_owned(s, &keep, st.fingerprint_only, &o) != 0, "reading the documents");
    if (!status && p.o.k > 0)
        status = join_owned(&o, p.o.k, p.o.memory / 4, &pairs);
    if (!status && lines_open(&p.l) != 0) {
        say("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!status) {
        each_pair(&o, &pairs, emit_doc_pair, p.by_fp ? emit_fp_pair : NULL, &p);
        status = print_sorted(&p.l);
    }
    lines_close(&p.l);
    free(pairs.v);
    owned_free(&o);
    simstore_close(s);
    return status;
}

/* ---- clusters: components over the ranks ------------------------------------------ */

/* The graph a rank holds part of: its nodes are the fingerprints it owns,
 * or (with a minimum similarity) the documents it holds, keyed by
 * fingerprint or by document key; an edge is an adjacency at each end's
 * owner. */
typedef struct graph {
    const owned *o;
    int of_docs;
    size_t n;
    unsigned char *active; /* per node: in the graph (or a singleton) */
    struct adjacency *adj; /* sorted by node */
    size_t nadj;
    size_t *first_adj; /* n + 1 */
} graph;

typedef struct adjacency {
    size_t node;
    uint64_t other;
} adjacency;

static uint64_t node_key(const graph *g, size_t i)
{
    return g->of_docs ? g->o->docs[i].key : g->o->fps[i];
}

static int key_owner(const graph *g, uint64_t key)
{
    return g->of_docs ? (int)(key >> DOC_KEY_BITS) : owner_of(key);
}

static size_t key_node(const graph *g, uint64_t key)
{
    return g->of_docs ? (size_t)(key & ((UINT64_C(1) << DOC_KEY_BITS) - 1)) : node_of(g->o, key);
}

/* Node i's documents: [*lo, *hi) of o->docs. */
static void node_docs(const graph *g, size_t i, size_t *lo, size_t *hi)
{
    *lo = g->of_docs ? i : g->o->first[i];
    *hi = g->of_docs ? i + 1 : g->o->first[i + 1];
}

/* Send the rounds' messages (key u64, value u64) and apply each received
 * one to the node it names with fn. Collective. */
typedef void (*kv_fn)(void *ctx, size_t node, uint64_t value);

static void deliver_kv(const graph *g, buf *out, buf *in, kv_fn fn, void *ctx)
{
    exchange_bufs(out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end;) {
            size_t i = key_node(g, get_u64(&q));
            fn(ctx, i, get_u64(&q));
        }
        in[r].len = 0;
    }
}

static void send_kv(const graph *g, buf *out, uint64_t key, uint64_t value)
{
    buf *b = &out[key_owner(g, key)];
    put64(b, key);
    put64(b, value);
}

typedef struct labels {
    const graph *g;
    uint64_t *label, *low;
    buf *out;
    int changed;
} labels;

static void take_low(void *ctx, size_t i, uint64_t v)
{
    labels *l = (labels *)ctx;
    if (v < l->low[i])
        l->low[i] = v;
}

static void take_label(void *ctx, size_t i, uint64_t v)
{
    labels *l = (labels *)ctx;
    if (v < l->label[i]) {
        l->label[i] = v;
        l->changed = 1;
    }
}

static void answer_label(void *ctx, size_t i, uint64_t asker)
{
    labels *l = (labels *)ctx;
    send_kv(l->g, l->out, asker, l->label[i]);
}

/* Label propagation with hooking and pointer jumping: label[i] ends as the
 * key of one node of i's component, the same for all of it. Every label
 * only decreases and is always a node of the same component, so the
 * rounds end; they end when no label changes, and then neighbours agree
 * (each took the least of its neighbours') and every label is its own
 * node's label (pointer jumping changed nothing). Collective. */
static void components(const graph *g, uint64_t *label)
{
    labels l = {g, label, must(malloc((g->n ? g->n : 1) * sizeof *l.low)), bufs_new(), 0};
    buf *in = bufs_new();
    for (size_t i = 0; i < g->n; i++)
        label[i] = node_key(g, i);
    unsigned round = 0;
    for (;;) {
        l.changed = 0;
        /* Each node's least neighbouring label. */
        for (size_t i = 0; i < g->n; i++)
            l.low[i] = UINT64_MAX;
        for (size_t e = 0; e < g->nadj; e++)
            send_kv(g, l.out, g->adj[e].other, label[g->adj[e].node]);
        deliver_kv(g, l.out, in, take_low, &l);
        /* Hooking: a node takes it, and so does its label's node. */
        for (size_t i = 0; i < g->n; i++)
            if (g->active[i] && l.low[i] < label[i]) {
                send_kv(g, l.out, label[i], l.low[i]);
                label[i] = l.low[i];
                l.changed = 1;
            }
        deliver_kv(g, l.out, in, take_label, &l);
        /* Pointer jumping: a node asks its label's node for its label. */
        for (size_t i = 0; i < g->n; i++)
            if (g->active[i] && label[i] != node_key(g, i))
                send_kv(g, l.out, label[i], node_key(g, i));
        deliver_kv(g, l.out, in, answer_label, &l);
        deliver_kv(g, l.out, in, take_label, &l);
        MPI_Allreduce(MPI_IN_PLACE, &l.changed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        progress("components: round %u of label propagation%s", ++round,
                 l.changed ? "" : ", the last (no label changed)");
        if (!l.changed)
            break;
    }
    bufs_free(l.out);
    bufs_free(in);
    free(l.low);
}

typedef struct clusters_run {
    scan_opts o;
    int singletons;
    int star;
    simstore_sketch_kind sketch;
    lines l;
    buf *edges; /* with a minimum similarity: document edges to their owners */
    uint64_t documents, clusters, largest;
    const para_run *para; /* --paragraphs: the graph of documents sharing them */
} clusters_run;

/* --paragraphs: the fraction of the pair (d, kept) from d's edges at its
 * home, or -1 when they are no pair (linked through others). */
static double fraction_to_kept(const clusters_run *c, const sdoc *d, const sdoc *kept)
{
    para_edge key = {d->key, kept->key, 0};
    const para_edge *e =
        bsearch(&key, c->para->edges, c->para->nedges, sizeof *c->para->edges, para_edge_cmp);
    return e ? e->fraction : -1;
}

static void emit_member(clusters_run *c, const sdoc *d, const sdoc *kept)
{
    int is_kept = id_cmp(d->id, d->id_len, kept->id, kept->id_len) == 0;
    unsigned distance = simstore_distance(d->fp, kept->fp);
    double sim = simstore_sketch_similarity(c->sketch, d->sketch, kept->sketch);
    lines *l = &c->l;
    key_id(l, kept->id, kept->id_len);
    l->key[l->key_len++] = is_kept ? 0 : 1;
    key_id(l, d->id, d->id_len);
    int json = c->o.json;
    char s[32];
    cli_format_similarity(sim, json, s);
    if (c->para) { /* as `simstore clusters --paragraphs` prints its members */
        double f = is_kept ? 1.0 : fraction_to_kept(c, d, kept);
        if (f < 0)
            snprintf(s, sizeof s, json ? "null" : "-");
        else
            snprintf(s, sizeof s, "%.4f", f);
        if (json) {
            fputs("{\"cluster\":", l->f);
            print_id(l->f, kept->id, kept->id_len, kept->flags, 1);
            fputs(",\"id\":", l->f);
            print_id(l->f, d->id, d->id_len, d->flags, 1);
            fprintf(l->f, ",\"kept\":%s,\"fraction\":%s}\n", is_kept ? "true" : "false", s);
        } else {
            print_id(l->f, kept->id, kept->id_len, kept->flags, 0);
            fputc('\t', l->f);
            print_id(l->f, d->id, d->id_len, d->flags, 0);
            fprintf(l->f, "\t%d\t%s\n", is_kept, s);
        }
    } else if (json) {
        fputs("{\"cluster\":", l->f);
        print_id(l->f, kept->id, kept->id_len, kept->flags, 1);
        fputs(",\"id\":", l->f);
        print_id(l->f, d->id, d->id_len, d->flags, 1);
        fprintf(l->f, ",\"kept\":%s,\"distance\":%u", is_kept ? "true" : "false", distance);
        if (c->o.similarity)
            fprintf(l->f, ",\"similarity\":%s", s);
        fputs("}\n", l->f);
    } else {
        print_id(l->f, kept->id, kept->id_len, kept->flags, 0);
        fputc('\t', l->f);
        print_id(l->f, d->id, d->id_len, d->flags, 0);
        fprintf(l->f, "\t%d\t%u", is_kept, distance);
        if (c->o.similarity)
            fprintf(l->f, "\t%s", s);
        fputc('\n', l->f);
    }
    line_done(l);
    c->documents++;
}

/* A document edge when the two are similar enough (an unknown similarity
 * is not), to the owners of both ends. */
static void add_doc_edge(void *ctx, const sdoc *x, const sdoc *y, unsigned distance)
{
    clusters_run *c = (clusters_run *)ctx;
    if (!simstore_near_duplicate(&c->o.rule, distance,
                                 simstore_sketch_similarity(c->sketch, x->sketch, y->sketch)))
        return;
    int ox = (int)(x->key >> DOC_KEY_BITS), oy = (int)(y->key >> DOC_KEY_BITS);
    put64(&c->edges[ox], x->key);
    put64(&c->edges[ox], y->key);
    put64(&c->edges[oy], y->key);
    put64(&c->edges[oy], x->key);
}

/* A node as its component's owner sees it: the component's label, the
 * node's key, its document count and best document, and (stars) its
 * neighbours' keys. */
typedef struct comp_node {
    uint64_t label, key, count;
    sdoc best;
    const char *neighbours; /* degree u64 keys */
    uint64_t degree;
    size_t centre; /* stars: the index of the centre that took it */
} comp_node;

static int by_label_key(const void *x, const void *y)
{
    const comp_node *a = x, *b = y;
    if (a->label != b->label)
        return a->label < b->label ? -1 : 1;
    return (a->key > b->key) - (a->key < b->key);
}

static const comp_node *g_order; /* qsort has no context argument */

static int by_keep(const void *x, const void *y)
{
    const comp_node *a = &g_order[*(const size_t *)x], *b = &g_order[*(const size_t *)y];
    return keeps_before(&a->best, &b->best) ? -1 : keeps_before(&b->best, &a->best) ? 1 : 0;
}

/* The nodes m[lo..hi) of one component (sorted by key): each one's centre,
 * in keep order each node not yet taken taking its neighbours not yet
 * taken (a star); or the component's best node for all (components). */
static void choose_centres(const clusters_run *c, comp_node *m, size_t lo, size_t hi)
{
    size_t best = lo;
    for (size_t i = lo; i < hi; i++) {
        m[i].centre = SIZE_MAX;
        if (keeps_before(&m[i].best, &m[best].best))
            best = i;
    }
    if (!c->star) {
        for (size_t i = lo; i < hi; i++)
            m[i].centre = best;
        return;
    }
    size_t n = hi - lo, *order = must(malloc(n * sizeof *order));
    for (size_t i = 0; i < n; i++)
        order[i] = lo + i;
    g_order = m;
    sort_items(order, n, sizeof *order, by_keep);
    for (size_t k = 0; k < n; k++) {
        comp_node *x = &m[order[k]];
        if (x->centre != SIZE_MAX)
            continue;
        x->centre = order[k];
        const char *q = x->neighbours;
        for (uint64_t e = 0; e < x->degree; e++) {
            uint64_t key = get_u64(&q);
            size_t a = lo, b = hi; /* the neighbour, in the same component */
            while (a < b) {
                size_t mid = a + (b - a) / 2;
                if (m[mid].key < key)
                    a = mid + 1;
                else
                    b = mid;
            }
            if (m[a].centre == SIZE_MAX)
                m[a].centre = order[k];
        }
    }
    free(order);
}

/* The clusters' members as output records. Collective. */
static void make_clusters(clusters_run *c, const owned *o, const pairs_acc *pairs)
{
    graph g = {o, c->o.min_similarity > 0 || c->para, 0, NULL, NULL, 0, NULL};
    g.n = g.of_docs ? o->ndocs : o->nfps;
    buf *out = bufs_new(), *in = bufs_new();
    if (c->para) {
        for (size_t i = 0; i < c->para->nedges; i++)
            send_kv(&g, out, c->para->edges[i].node, c->para->edges[i].other);
    } else if (g.of_docs) {
        c->edges = out;
        each_pair(o, pairs, add_doc_edge, NULL, c);
        c->edges = NULL;
    } else {
        for (size_t i = 0; i < pairs->n; i++) {
            send_kv(&g, out, pairs->v[i].a, pairs->v[i].b);
            send_kv(&g, out, pairs->v[i].b, pairs->v[i].a);
        }
    }
    exchange_bufs(out, in, chunk_bytes);
    for (int r = 0; r < nranks; r++)
        g.nadj += in[r].len / 16;
    g.adj = must(malloc((g.nadj ? g.nadj : 1) * sizeof *g.adj));
    g.first_adj = must(calloc(g.n + 1, sizeof *g.first_adj));
    g.active = must(calloc(g.n ? g.n : 1, 1));
    uint64_t *label = must(malloc((g.n ? g.n : 1) * sizeof *label));
    size_t e = 0;
    for (int r = 0; r < nranks; r++) {
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; e++) {
            g.adj[e].node = key_node(&g, get_u64(&q));
            g.adj[e].other = get_u64(&q);
            g.active[g.adj[e].node] = 1;
            g.first_adj[g.adj[e].node + 1]++;
        }
        in[r].len = 0;
    }
    /* The adjacencies by node (counting sort). */
    for (size_t i = 0; i < g.n; i++)
        g.first_adj[i + 1] += g.first_adj[i];
    adjacency *sorted = must(malloc((g.nadj ? g.nadj : 1) * sizeof *sorted));
    size_t *at = must(malloc((g.n ? g.n : 1) * sizeof *at));
    if (g.n)
        memcpy(at, g.first_adj, g.n * sizeof *at);
    for (e = 0; e < g.nadj; e++)
        sorted[at[g.adj[e].node]++] = g.adj[e];
    free(at);
    free(g.adj);
    g.adj = sorted;
    for (size_t i = 0; i < g.n; i++) {
        size_t lo, hi;
        node_docs(&g, i, &lo, &hi);
        if (c->singletons || hi - lo > 1)
            g.active[i] = 1;
    }
    if (show_progress) {
        uint64_t nodes = sum_ranks(g.n), edges = sum_ranks(g.nadj) / 2;
        progress("components of a graph of %llu %s and %llu %s", (unsigned long long)nodes,
                 CLI_NOUN(nodes, "node"), (unsigned long long)edges, CLI_NOUN(edges, "edge"));
    }
    components(&g, label);
    /* Each node's count, best document and (stars) neighbours to the owner
     * of its label. */
    for (size_t i = 0; i < g.n; i++) {
        if (!g.active[i])
            continue;
        size_t lo, hi;
        node_docs(&g, i, &lo, &hi);
        size_t best = lo;
        for (size_t x = lo + 1; x < hi; x++)
            if (keeps_before(&o->docs[x], &o->docs[best]))
                best = x;
        buf *b = &out[key_owner(&g, label[i])];
        put64(b, label[i]);
        put64(b, node_key(&g, i));
        put64(b, hi - lo);
        put_doc(b, &o->docs[best]);
        uint64_t degree = c->star ? g.first_adj[i + 1] - g.first_adj[i] : 0;
        put64(b, degree);
        for (uint64_t k = 0; k < degree; k++)
            put64(b, g.adj[g.first_adj[i] + k].other);
    }
    exchange_bufs(out, in, chunk_bytes);
    size_t n = 0, cap = 0;
    comp_node *m = NULL;
    for (int r = 0; r < nranks; r++)
        for (const char *q = in[r].data, *end = q + in[r].len; q < end; n++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                m = must(realloc(m, cap * sizeof *m));
            }
            m[n].label = get_u64(&q);
            m[n].key = get_u64(&q);
            m[n].count = get_u64(&q);
            get_doc(&q, &m[n].best);
            m[n].degree = get_u64(&q);
            m[n].neighbours = q;
            q += 8 * m[n].degree;
        }
    sort_items(m, n, sizeof *m, by_label_key);
    /* Each node's kept document (its centre's best) back to its owner,
     * when its cluster has two documents or more (or singletons). */
    for (size_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo; hi < n && m[hi].label == m[lo].label; hi++)
            ;
        choose_centres(c, m, lo, hi);
        for (size_t x = lo; x < hi; x++) {
            if (m[x].centre != x)
                continue;
            uint64_t size = 0;
            for (size_t y = lo; y < hi; y++)
                if (m[y].centre == x)
                    size += m[y].count;
            if (size < 2 && !c->singletons)
                continue;
            c->clusters++;
            if (size > c->largest)
                c->largest = size;
            for (size_t y = lo; y < hi; y++)
                if (m[y].centre == x) {
                    buf *b = &out[key_owner(&g, m[y].key)];
                    put64(b, m[y].key);
                    put_doc(b, &m[x].best);
                }
        }
    }
    buf *kept_in = bufs_new();
    exchange_bufs(out, kept_in, chunk_bytes);
    free(m);
    for (int r = 0; r < nranks; r++)
        for (const char *q = kept_in[r].data, *end = q + kept_in[r].len; q < end;) {
            size_t i = key_node(&g, get_u64(&q)), lo, hi;
            sdoc kept;
            get_doc(&q, &kept);
            node_docs(&g, i, &lo, &hi);
            for (size_t x = lo; x < hi; x++)
                emit_member(c, &o->docs[x], &kept);
        }
    bufs_free(kept_in);
    bufs_free(out);
    bufs_free(in);
    free(g.adj);
    free(g.first_adj);
    free(g.active);
    free(label);
}

static void usage_clusters(FILE *out)
{
    fprintf(
        out,
        "Usage: mpirun -np R simstore-mpi clusters OUT [--keep RULE] [--k K]\n"
        "                      [--mode components|star] [--singletons] [--json]\n"
        "                      [--similarity] [--min-similarity J] [--memory SIZE]\n"
        "                      [--chunk SIZE] [--progress]\n"
        "       mpirun -np R simstore-mpi clusters OUT --paragraphs [--min-fraction F]\n"
        "                      [--k K] [--keep RULE] [--json]\n"
        "\n"
        "Group the documents of the sharded store OUT of R shards into clusters of\n"
        "near-duplicates, rank r reading shard r: exactly what `simstore clusters`\n"
        "prints for one store of the same documents,\n"
        "CLUSTER<TAB>DOC_ID<TAB>KEPT<TAB>DISTANCE_TO_KEPT[<TAB>SIMILARITY_TO_KEPT],\n"
        "and its summary on stderr. The join is spread over the ranks; components\n"
        "are found by label propagation with pointer jumping among the ranks that\n"
        "own the fingerprints (no rank holds the whole graph); a component's kept\n"
        "document (and its stars) are chosen at the rank owning its label; rank 0\n"
        "prints.\n"
        "\n"
        "      --mode components  connected components of the within-K graph (default)\n"
        "      --mode star      in keep order, each document not yet taken becomes a\n"
        "                       centre and takes every document not yet taken within K\n"
        "      --keep first     keep the document given first (default): the smallest\n"
        "                       insertion number, which a sharded store built by\n"
        "                       `simstore build --shards` or `simstore-mpi build` gives\n"
        "                       as one store of the same input would\n"
        "      --keep min-id    keep the smallest id\n"
        "      --keep max-meta FIELD, --keep min-meta FIELD\n"
        "                       keep the largest (smallest) number in FIELD of the\n"
        "                       metadata; documents without one come last; ties by id\n"
        "      --singletons     also print each document near no other\n"
        "      --min-similarity J\n"
        "                       two documents are near only when within K and their\n"
        "                       estimated similarity is at least J (a graph over\n"
        "                       documents); needs a store that keeps sketches\n"
        "                       (default: 0.9 when --k is not given on a store that\n"
        "                       keeps sketches, the near-duplicate setting; else 0)\n" COMMON_HELP
        "\n"
        "With --paragraphs (a store built with --paragraphs), the connected\n"
        "components of the pairs of `pairs --paragraphs` with FRACTION >= F\n"
        "(--min-fraction, default 0.3), as `simstore clusters --paragraphs` prints\n"
        "them (the pair's FRACTION with the kept document instead of a distance,\n"
        "'-' when linked only through others); components over the documents at\n"
        "their ranks, as above. Components only; not with --singletons or the\n"
        "similarity options.\n");
}

int cmd_mpi_clusters(int argc, char **argv)
{
    static const struct option longopts[] = {
        COMMON_LONG_OPTIONS,
        {"mode", required_argument, NULL, O_MODE},
        {"keep", required_argument, NULL, O_KEEP},
        {"singletons", no_argument, NULL, O_SINGLETONS},
        {"paragraphs", no_argument, NULL, O_PARAGRAPHS},
        {"min-fraction", required_argument, NULL, O_MIN_FRACTION},
        {NULL, 0, NULL, 0},
    };
    cmd_name = "simstore-mpi clusters";
    clusters_run c;
    memset(&c, 0, sizeof c);
    c.o.memory = (uint64_t)1 << 30;
    simstore_cluster_options keep;
    simstore_cluster_options_init(&keep);
    const char *field = NULL;
    c.o.min_fraction = SIMSTORE_NEAR_FRACTION;
    int ch, li = 0, mode_given = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, &li)) != -1) {
        if (ch == 'h') {
            if (rank == 0)
                usage_clusters(stdout);
            return 0;
        } else if (ch == O_MODE) {
            if (strcmp(optarg, "star") != 0 && strcmp(optarg, "components") != 0)
                return usage_error(argc, argv);
            c.star = strcmp(optarg, "star") == 0;
            mode_given = c.star;
        } else if (ch == O_KEEP) {
            char why[256];
            if (cli_parse_keep(optarg, argv, argc, &optind, &keep.keep, &field, why, sizeof why)) {
                if (rank == 0)
                    fprintf(stderr, "%s: %s\n", cmd_name, why);
                return 2;
            }
        } else if (ch == O_SINGLETONS) {
            c.singletons = 1;
        } else if (common_option(ch, optarg, &c.o)) {
            return usage_error(argc, argv);
        }
    }
    int bad = check_options(argc, argv,
                            cli_clusters_options_problem(c.o.min_fraction_given, c.o.paragraphs,
                                                         mode_given, c.singletons, c.o.similarity,
                                                         c.o.min_similarity));
    if (bad)
        return bad;
    keep.key = cli_meta_key;
    keep.key_ctx = (void *)field;
    simstore *s;
    simstore_stats st;
    int status = open_shard(argv[optind], &c.o, &s, &st);
    if (status)
        return status;
    c.sketch = st.sketch;
    if (c.o.paragraphs && lacks_paragraph_index(s, &st, argv[optind]))
        return 1;
    owned o;
    memset(&o, 0, sizeof o);
    pairs_acc pairs = {NULL, 0, 0};
    para_run pr;
    memset(&pr, 0, sizeof pr);
    homes h;
    memset(&h, 0, sizeof h);
    if (c.o.paragraphs) {
        /* The graph of documents sharing paragraphs: its nodes the
         * documents at their homes, its edges the pairs of pairs
         * --paragraphs at both ends. */
        pr.rule = &c.o.rule;
        pr.want_edges = 1;
        h.keep_rule = &keep;
        status = paragraph_pairs(s, c.o.k, c.o.memory / 4, &pr, &h);
        o.docs = must(malloc((h.n ? h.n : 1) * sizeof *o.docs));
        for (size_t i = 0; i < h.n; i++)
            o.docs[i] =
                (sdoc){0,    (uint64_t)rank << DOC_KEY_BITS | i, h.keep[i], h.ids.data + h.at[i],
                       NULL, (uint32_t)(h.at[i + 1] - h.at[i]),  0,         h.flags[i]};
        o.ndocs = h.n;
        c.para = &pr;
    } else {
        status =
            agree(gather_owned(s, &keep, st.fingerprint_only, &o) != 0, "reading the documents");
    }
    if (!status && c.o.k > 0 && !c.o.paragraphs)
        status = join_owned(&o, c.o.k, c.o.memory / 4, &pairs);
    if (!status && lines_open(&c.l) != 0) {
        say("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (!status) {
        make_clusters(&c, &o, &pairs);
        free(pairs.v);
        pairs.v = NULL;
        status = print_sorted(&c.l);
    }
    uint64_t sum[2] = {c.documents, c.clusters}, largest = c.largest;
    MPI_Allreduce(MPI_IN_PLACE, sum, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (!status && rank == 0)
        fprintf(stderr, "clusters: %llu %s in %llu %s, %llu to drop, largest cluster %llu %s\n",
                (unsigned long long)sum[0], CLI_NOUN(sum[0], "document"),
                (unsigned long long)sum[1], CLI_NOUN(sum[1], "cluster"),
                (unsigned long long)(sum[0] - sum[1]), (unsigned long long)largest,
                CLI_NOUN(largest, "document"));
    lines_close(&c.l);
    free(pairs.v);
    owned_free(&o);
    homes_free(&h);
    free(pr.edges);
    simstore_close(s);
    return status;
}
