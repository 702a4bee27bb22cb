/* main.c: simstore-mpi, the MPI driver of sharded stores (format/shards.md),
 * run as `mpirun -np R simstore-mpi COMMAND ...`, rank r owning shard r: the
 * job's start and the commands' dispatch, and what every phase shares (this
 * rank's messages, the agreement on failures, progress, usage errors).
 *
 *   build OUT INPUT...   build.c: the inputs split across the ranks
 *                        (split.c), each record sent to its shard's rank
 *                        (exchange.c), each shard built, the manifest
 *                        published by rank 0 last;
 *   query OUT --queries FILE
 *                        query.c: every rank answers the batch against
 *                        its shard, rank 0 merges and prints what
 *                        `simstore query` prints for one store;
 *   pairs OUT, clusters OUT
 *                        pairs.c, clusters.c (scan.c and its phases,
 *                        scan_internal.h): the join spread over the
 *                        ranks, output sorted across them and printed by
 *                        rank 0.
 *
 * A client of the public API and of cmd/'s helpers (simstore_cmdkit),
 * whose option checks it shares. A rank that fails says so ("rank N:
 * why") and the job exits 1 on every rank, naming the failed ranks. */
#include "mpi_internal.h"

#include "cli.h"

#include <mpi.h>

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int rank, nranks;
const char *cmd_name = "simstore-mpi";

/* A message on stderr, "simstore-mpi CMD: ...", naming this rank when
 * with_rank ("simstore-mpi CMD: rank N: ..."). */
__attribute__((format(printf, 2, 0))) static void message(int with_rank, const char *fmt,
                                                          va_list ap)
{
    char text[2048];
    vsnprintf(text, sizeof text, fmt, ap);
    if (with_rank)
        fprintf(stderr, "%s: rank %d: %s\n", cmd_name, rank, text);
    else
        fprintf(stderr, "%s: %s\n", cmd_name, text);
}

/* A message of this rank on stderr: "simstore-mpi CMD: rank N: ...". */
void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    message(1, fmt, ap);
    va_end(ap);
}

int show_progress;

void progress(const char *fmt, ...)
{
    if (!show_progress || rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    message(0, fmt, ap);
    va_end(ap);
}

/* Every rank's status (0 ok): rank 0 names the failed ones. Returns 0 when
 * every rank succeeded, else 1 on every rank. */
int agree(int failed, const char *what)
{
    int *all = malloc((size_t)nranks * sizeof *all);
    if (!all)
        MPI_Abort(MPI_COMM_WORLD, 1);
    failed = failed != 0;
    MPI_Allgather(&failed, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int any = 0;
    char list[1024] = "";
    size_t used = 0;
    for (int i = 0; i < nranks; i++)
        if (all[i]) {
            any++;
            if (used < sizeof list - 16)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%d",
                                         any > 1 ? ", " : "", i);
        }
    free(all);
    if (any && rank == 0)
        fprintf(stderr, "%s: %s failed on %s %s\n", cmd_name, what, any > 1 ? "ranks" : "rank",
                list);
    return any ? 1 : 0;
}

void rank0_says(const char *fmt, ...)
{
    if (rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    message(0, fmt, ap);
    va_end(ap);
}

int usage_error(int argc, char **argv)
{
    if (rank == 0)
        fprintf(stderr, "%s: bad usage at '%s' (see --help)\n", cmd_name,
                optind > 0 && optind <= argc ? argv[optind - 1] : "");
    return 2;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int status;
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (rank == 0)
            fprintf(argc < 2 ? stderr : stdout,
                    "Usage: mpirun -np R simstore-mpi COMMAND ...\n"
                    "Commands: build OUT INPUT..., query OUT --queries FILE, pairs OUT,\n"
                    "clusters OUT [--keep RULE] (COMMAND --help for each)\n");
        status = argc < 2 ? 2 : 0;
    } else if (strcmp(argv[1], "build") == 0) {
        status = cmd_mpi_build(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "query") == 0) {
        status = cmd_mpi_query(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "pairs") == 0) {
        status = cmd_mpi_pairs(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "clusters") == 0) {
        status = cmd_mpi_clusters(argc - 1, argv + 1);
    } else {
        if (rank == 0)
            fprintf(stderr, "simstore-mpi: unknown command '%s'\n", argv[1]);
        status = 2;
    }
    if (fflush(stdout) != 0 && status == 0)
        status = 1;
    MPI_Finalize();
    return status;
}
