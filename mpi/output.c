/* output.c: output lines and their keys, sample-sorted across the ranks, printed by rank 0.
 * Every command's line carries a byte key of the single-node command's
 * order; a sample sort spreads the lines over the ranks in that order, and
 * rank 0 prints its own, then each rank's in turn, a chunk at a time. */
#include "scan_internal.h"

#include "cli.h"
#include "simstore.h"

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Output records: key length u32, line length u32, key, line. Keys compare
 * as bytes (a shorter key that is a prefix first). */
typedef struct orec {
    const char *key, *line;
    uint32_t key_len, line_len;
} orec;

int lines_open(lines *l)
{
    memset(l, 0, sizeof *l);
    l->f = open_memstream(&l->text, &l->text_len);
    return l->f ? 0 : -1;
}

void lines_close(lines *l)
{
    if (l->f)
        fclose(l->f);
    free(l->text);
    free(l->recs.data);
    memset(l, 0, sizeof *l);
}

void key_id(lines *l, const char *id, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        l->key[l->key_len++] = (uint8_t)id[i];
        if (id[i] == 0)
            l->key[l->key_len++] = 1;
    }
    l->key[l->key_len++] = 0;
    l->key[l->key_len++] = 0;
}

void key_u64(lines *l, uint64_t v)
{
    for (int i = 7; i >= 0; i--)
        l->key[l->key_len++] = (uint8_t)(v >> (8 * i));
}

void line_done(lines *l)
{
    fflush(l->f);
    put32(&l->recs, (uint32_t)l->key_len);
    put32(&l->recs, (uint32_t)l->text_len);
    put(&l->recs, l->key, l->key_len);
    put(&l->recs, l->text, l->text_len);
    rewind(l->f);
    l->key_len = 0;
}

void print_tsv_id(FILE *f, const char *id, size_t len)
{
    static int warned;
    char esc[CLI_ESCAPED_ID_BYTES];
    const char *why = cli_put_tsv_id(f, id, len, esc);
    if (why && !warned) {
        warned = 1;
        say("warning: " CLI_ESCAPED_ID_WARNING, why, esc);
    }
}

void print_id(FILE *f, const char *id, size_t len, unsigned flags, int json)
{
    if (!json)
        print_tsv_id(f, id, len);
    else if (!(flags & SIMSTORE_MATCH_INTEGER_ID))
        cli_json_string(f, id, len);
    else
        fwrite(id, 1, len, f);
}

static int orec_cmp(const void *x, const void *y)
{
    const orec *a = x, *b = y;
    return id_cmp(a->key, a->key_len, b->key, b->key_len);
}

/* The records of b, pointing into it: *n of them. */
static orec *parse_recs(const buf *b, size_t *n)
{
    size_t count = 0;
    for (const char *p = b->data, *end = p + b->len; p < end; count++) {
        uint32_t kl = get_u32(&p), ll = get_u32(&p);
        p += kl + ll;
    }
    orec *v = must(malloc((count + 1) * sizeof *v));
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

/* The splitters of the sample sort of every rank's records (v[0..n) on
 * this one, sorted): nranks - 1 keys from a sample of every rank's, rank r
 * taking the records from split[r - 1] up to split[r]. The splitters'
 * keys point into *all and *sv, which the caller frees with them.
 * Collective. */
static orec *splitters(const orec *v, size_t n, buf *all, orec **sv)
{
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
    *all = (buf){must(malloc(total ? total : 1)), total, total};
    MPI_Allgatherv(sample.data, len, MPI_BYTE, all->data, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    free(sample.data);
    free(counts);
    size_t nall;
    *sv = parse_recs(all, &nall);
    sort_items(*sv, nall, sizeof **sv, orec_cmp);
    orec *split = must(malloc((size_t)nranks * sizeof *split));
    for (int r = 0; r + 1 < nranks; r++)
        split[r] = nall ? (*sv)[(size_t)(r + 1) * nall / (size_t)nranks] : (orec){"", NULL, 0, 0};
    return split;
}

/* Rank 0 prints its lines v[0..n) (sorted), then each rank's in turn, a
 * chunk at a time. Returns 0, or 1 when writing failed (rank 0).
 * Collective. */
static int print_in_turn(const orec *v, size_t n)
{
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
    return failed;
}

int print_sorted(lines *l)
{
    size_t n;
    orec *v = parse_recs(&l->recs, &n);
    sort_items(v, n, sizeof *v, orec_cmp);
    if (show_progress) {
        uint64_t all_lines = sum_ranks(n);
        progress("sorting %llu output %s across the ranks", (unsigned long long)all_lines,
                 CLI_NOUN(all_lines, "line"));
    }
    buf all;
    orec *sv;
    orec *split = splitters(v, n, &all, &sv);
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
    v = parse_recs(&mine, &n);
    sort_items(v, n, sizeof *v, orec_cmp);
    int failed = print_in_turn(v, n);
    free(v);
    free(mine.data);
    return agree(failed, "printing");
}
