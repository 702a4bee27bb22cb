/* exchange.c: byte buffers with little-endian fields, and the one
 * all-to-all exchange every phase of simstore-mpi sends its records, pairs
 * and lines through (exchange_round; exchange_bufs in bounded rounds). */
#include "mpi_internal.h"

#include "cli.h"

#include <mpi.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int buf_put(buf *b, const void *p, size_t n)
{
    if (cli_grow((void **)&b->data, &b->cap, b->len + n, 1, 4096))
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int buf_u64(buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    return buf_put(b, x, 8);
}

int buf_u32(buf *b, uint32_t v)
{
    uint8_t x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    return buf_put(b, x, 4);
}

uint64_t get_u64(const char **p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)(uint8_t)(*p)[i] << (8 * i);
    *p += 8;
    return v;
}

uint32_t get_u32(const char **p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)(uint8_t)(*p)[i] << (8 * i);
    *p += 4;
    return v;
}

void *must(void *p)
{
    if (!p) {
        say("out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

void put(buf *b, const void *p, size_t n)
{
    if (buf_put(b, p, n))
        must(NULL);
}

void put64(buf *b, uint64_t v)
{
    if (buf_u64(b, v))
        must(NULL);
}

void put32(buf *b, uint32_t v)
{
    if (buf_u32(b, v))
        must(NULL);
}

buf *bufs_new(void)
{
    return must(calloc((size_t)nranks, sizeof(buf)));
}

void bufs_free(buf *b)
{
    if (!b)
        return;
    for (int i = 0; i < nranks; i++)
        free(b[i].data);
    free(b);
}

uint64_t sum_ranks(uint64_t v)
{
    MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return v;
}

char *exchange_round(const char *const *data, const size_t *len, size_t *at, size_t *got,
                     size_t *total)
{
    int *sc = must(calloc((size_t)nranks * 4, sizeof *sc));
    int *rc = sc + nranks, *sd = sc + 2 * nranks, *rd = sc + 3 * nranks;
    buf send = {NULL, 0, 0};
    for (int d = 0; d < nranks; d++) {
        sc[d] = (int)len[d];
        sd[d] = (int)send.len;
        put(&send, data[d], len[d]);
    }
    MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
    *total = 0;
    for (int s = 0; s < nranks; s++) {
        rd[s] = (int)*total;
        at[s] = *total;
        got[s] = (size_t)rc[s];
        *total += (size_t)rc[s];
    }
    char *recv = must(malloc(*total ? *total : 1));
    MPI_Alltoallv(send.data, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
    free(send.data);
    free(sc);
    return recv;
}

void exchange_bufs(buf *out, buf *in, uint64_t chunk_bytes)
{
    const char **data = must(calloc((size_t)nranks, sizeof *data));
    size_t *len = must(calloc((size_t)nranks * 4, sizeof *len));
    size_t *sent = len + nranks, *at = len + 2 * nranks, *got = len + 3 * nranks;
    for (;;) {
        int more = 0;
        for (int d = 0; d < nranks; d++) {
            size_t left = out[d].len - sent[d];
            len[d] = left < chunk_bytes ? left : (size_t)chunk_bytes;
            more |= left > len[d];
            data[d] = out[d].data + sent[d];
            sent[d] += len[d];
        }
        size_t total;
        char *recv = exchange_round(data, len, at, got, &total);
        for (int s = 0; s < nranks; s++)
            put(&in[s], recv + at[s], got[s]);
        free(recv);
        MPI_Allreduce(MPI_IN_PLACE, &more, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!more)
            break;
    }
    for (int d = 0; d < nranks; d++) {
        free(out[d].data);
        out[d].data = NULL;
        out[d].len = out[d].cap = 0;
    }
    free(len);
    free(data);
}
