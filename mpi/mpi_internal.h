/* mpikit.h: what simstore-mpi's commands share (simstore_mpi.c): this
 * rank and the job's size, messages naming the rank, the agreement on
 * failures, a growing byte buffer with little-endian fields. */
#ifndef SIMSTORE_MPIKIT_H
#define SIMSTORE_MPIKIT_H

#include "simstore.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

extern int rank, nranks;
extern const char *cmd_name; /* "simstore-mpi COMMAND", for messages */

/* A message of this rank on stderr: "simstore-mpi CMD: rank N: ...". */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Every rank's status (0 ok): rank 0 names the failed ones ("WHAT failed
 * on rank N"). Collective. Returns 0 when every rank succeeded, else 1 on
 * every rank. */
int agree(int failed, const char *what);

/* --progress: every rank knows it (the same arguments); rank 0 alone says.
 * Plain lines, one a step, since mpirun hands stderr on through a pipe. */
extern int show_progress;

/* A progress line of rank 0 on stderr ("simstore-mpi CMD: ..."), with
 * --progress; nothing otherwise. Not collective: totals are the caller's. */
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* qsort(3) of n items, also when base is NULL with n 0 (an empty rank's
 * arrays), which qsort itself must not be given. */
static inline void sort_items(void *base, size_t n, size_t size,
                              int (*cmp)(const void *, const void *))
{
    if (n > 1)
        qsort(base, n, size, cmp);
}

typedef struct buf {
    char *data;
    size_t len, cap;
} buf;

/* Append n bytes (or a little-endian u64, u32). Returns 0, or -1 out of
 * memory. */
int buf_put(buf *b, const void *p, size_t n);
int buf_u64(buf *b, uint64_t v);
int buf_u32(buf *b, uint32_t v);

/* Read a little-endian u64 (u32) at *p and advance it. */
uint64_t get_u64(const char **p);
uint32_t get_u32(const char **p);

/* Rank 0 checks the sharded store OUT as a whole (its manifest, every
 * shard's agreement with it, R shards for R ranks); then every rank opens
 * its shard read-only: *s (closed with simstore_close), its stats *st, its
 * path in shard[0..size). Returns 0, or 1 on every rank after the failed
 * ranks said why (*s NULL). Collective. */
int open_my_shard(const char *out, simstore **s, simstore_stats *st, char *shard, size_t size);

/* `simstore-mpi pairs` and `simstore-mpi clusters` (mpi_scan.c). */
int cmd_mpi_pairs(int argc, char **argv);
int cmd_mpi_clusters(int argc, char **argv);

#endif
