/* segment.c: writing a segment's table files from its distinct fingerprints
 * (each table permuted, sorted in bounded memory, histogrammed, encoded; tables
 * in parallel threads), removing them, and writing the state record. Shared by
 * builds, adds and compactions. */
#include "store/store_internal.h"

#include "common/error.h"
#include "sort/u64sort.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK 4096

typedef struct table_job {
    const sims_segment_job *seg;
    uint64_t *written; /* per table: fingerprints written */
    /* Progress over every table: each input value is read, then merged twice
     * (histogram, encode), so the whole job is 3 * N * tables units. */
    atomic_uint_fast64_t units_done;
    uint64_t units_total;
    unsigned threads;
    pthread_mutex_t mu;
    unsigned next_table;
    int rc;
    char message[1024];
} table_job;

#define PROGRESS_UNITS ((uint64_t)1 << 22)

/* Count n units of work and report every PROGRESS_UNITS. */
static void table_progress(table_job *tj, size_t n)
{
    const sims_segment_job *job = tj->seg;
    if (!job->progress)
        return;
    uint64_t before = atomic_fetch_add(&tj->units_done, n);
    if ((before + n) / PROGRESS_UNITS != before / PROGRESS_UNITS)
        job->progress(job->progress_ctx, "writing tables", before + n, tj->units_total);
}

static int write_one_table(table_job *tj, unsigned t, size_t run_values, uint64_t *written)
{
    const sims_segment_job *job = tj->seg;
    const sims_design_table *dt = &job->design->tables[t];
    char path[PATH_MAX];
    int rc = sims_table_path(path, sizeof path, job->dir, job->segment_id, t);
    if (rc)
        return rc;
    sims_u64sort *sorter = NULL;
    table_writer *w = NULL;
    uint64_t *buf = malloc(READ_CHUNK * sizeof *buf);
    rc = buf ? sims_u64sort_new(run_values, job->dir, &sorter)
             : sims_fail(SIMSTORE_ENOMEM, "out of memory");
    sims_spool_reader r;
    sims_spool_reader_init(&r, job->distinct);
    size_t n;
    while (rc == SIMSTORE_OK && (rc = sims_spool_read(&r, buf, READ_CHUNK, &n)) == 0 && n > 0) {
        for (size_t i = 0; i < n; i++)
            buf[i] = sims_permute(&dt->permuter, buf[i]);
        rc = sims_u64sort_push(sorter, buf, n);
        table_progress(tj, n);
    }
    /* The input may repeat fingerprints (a fingerprint-only build reads them
     * as given); the permutation is a bijection, so dropping repeats after
     * permuting drops exactly the repeated fingerprints. */
    if (rc == SIMSTORE_OK)
        rc = sims_u64sort_finish(sorter, 1);
    /* First pass: the histogram the table's Huffman code is built from. */
    uint64_t hist[64] = {0}, prev = 0, count = 0;
    int have_prev = 0;
    while (rc == SIMSTORE_OK && (rc = sims_u64sort_read(sorter, buf, READ_CHUNK, &n)) == 0 &&
           n > 0) {
        sims_table_histogram_add(hist, &prev, &have_prev, buf, n);
        count += n;
        table_progress(tj, n);
    }
    *written = count;
    if (rc == SIMSTORE_OK)
        rc = sims_u64sort_rewind(sorter);
    table_params params;
    memset(&params, 0, sizeof params);
    params.block_bytes = job->block_bytes;
    params.prefix_bits = dt->prefix_bits;
    memcpy(params.perm, dt->perm, 64);
    params.store_tag = job->store_tag;
    params.table_index = t;
    if (rc == SIMSTORE_OK)
        rc = sims_table_writer_open(path, &params, hist, &w);
    /* Second pass: encode. */
    while (rc == SIMSTORE_OK && (rc = sims_u64sort_read(sorter, buf, READ_CHUNK, &n)) == 0 &&
           n > 0) {
        rc = sims_table_writer_add(w, buf, n);
        table_progress(tj, n);
    }
    if (rc == SIMSTORE_OK) {
        rc = sims_table_writer_finish(w);
        w = NULL;
    }
    if (rc)
        rc = sims_fail_context(rc, "table %u", t);
    sims_table_writer_abort(w);
    sims_u64sort_free(sorter);
    free(buf);
    return rc;
}

static void *table_worker(void *arg)
{
    table_job *tj = (table_job *)arg;
    const sims_segment_job *job = tj->seg;
    size_t run_values = (size_t)(job->memory_bytes / tj->threads / 16);
    for (;;) {
        pthread_mutex_lock(&tj->mu);
        unsigned t = tj->next_table++;
        int stop = tj->rc != SIMSTORE_OK || t >= job->design->n_tables;
        pthread_mutex_unlock(&tj->mu);
        if (stop)
            break;
        int rc = write_one_table(tj, t, run_values, &tj->written[t]);
        if (rc) {
            pthread_mutex_lock(&tj->mu);
            if (tj->rc == SIMSTORE_OK) {
                tj->rc = rc;
                snprintf(tj->message, sizeof tj->message, "%s", simstore_last_error());
            }
            pthread_mutex_unlock(&tj->mu);
        }
    }
    return NULL;
}

int sims_segment_write(const sims_segment_job *job)
{
    table_job tj;
    memset(&tj, 0, sizeof tj);
    tj.seg = job;
    unsigned threads = job->threads ? job->threads : 1;
    if (threads > job->design->n_tables)
        threads = job->design->n_tables;
    if (threads > 64)
        threads = 64;
    tj.threads = threads;
    atomic_init(&tj.units_done, 0);
    tj.units_total = 3 * sims_spool_count(job->distinct) * job->design->n_tables;
    tj.written = calloc(job->design->n_tables, sizeof *tj.written);
    if (!tj.written)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    pthread_mutex_init(&tj.mu, NULL);
    pthread_t tids[64];
    unsigned started = 0;
    for (unsigned i = 1; i < threads; i++)
        if (pthread_create(&tids[started], NULL, table_worker, &tj) == 0)
            started++;
    table_worker(&tj);
    for (unsigned i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&tj.mu);
    for (unsigned t = 1; tj.rc == SIMSTORE_OK && t < job->design->n_tables; t++)
        if (tj.written[t] != tj.written[0]) {
            tj.rc = SIMSTORE_EIO;
            snprintf(tj.message, sizeof tj.message,
                     "internal: table %u holds %llu fingerprints, table 0 %llu", t,
                     (unsigned long long)tj.written[t], (unsigned long long)tj.written[0]);
        }
    uint64_t count = tj.written[0];
    free(tj.written);
    if (tj.rc) {
        sims_segment_remove(job->dir, job->segment_id, job->design->n_tables);
        return sims_fail(tj.rc, "%s", tj.message);
    }
    if (job->fp_count)
        *job->fp_count = count;
    if (job->progress)
        job->progress(job->progress_ctx, "writing tables", tj.units_total, tj.units_total);
    return SIMSTORE_OK;
}

void sims_segment_remove(const char *dir, uint64_t segment_id, unsigned tables)
{
    char path[PATH_MAX];
    for (unsigned t = 0; t < tables; t++)
        if (sims_table_path(path, sizeof path, dir, segment_id, t) == SIMSTORE_OK)
            unlink(path);
    if (sims_docfile_path(path, sizeof path, dir, segment_id) == SIMSTORE_OK)
        unlink(path);
}

int sims_put_state(MDB_txn *txn, MDB_dbi meta, const sims_state_record *st)
{
    size_t n = sims_state_record_bytes(st);
    uint8_t *buf = malloc(n);
    if (!buf)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    sims_state_record_encode(st, buf, n);
    MDB_val key = {5, (void *)"state"}, val = {n, buf};
    int rc = mdb_put(txn, meta, &key, &val, 0);
    free(buf);
    return sims_mdb_write_status(rc, "write the state record");
}
