/* spool.h: an append-only sequence of 64-bit values kept in memory up to a
 * limit and continued in an unlinked temporary file beyond it, then read back
 * by any number of independent readers (each table-building thread reads the
 * store's distinct fingerprints through its own reader). */
#ifndef SIMS_STORE_SPOOL_H
#define SIMS_STORE_SPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct sims_spool sims_spool;

/* mem_values: values kept in memory before the rest goes to a file in tmp_dir
 * (NULL or "": sims_scratch_dir). */
int sims_spool_new(size_t mem_values, const char *tmp_dir, sims_spool **out);
int sims_spool_append(sims_spool *s, const uint64_t *v, size_t n);
/* End of appends (flushes the file part). */
int sims_spool_seal(sims_spool *s);
uint64_t sims_spool_count(const sims_spool *s);
void sims_spool_free(sims_spool *s);

/* A reader: a position into a sealed spool, safe to use concurrently with
 * other readers of the same spool. */
typedef struct sims_spool_reader {
    const sims_spool *spool;
    uint64_t pos;
} sims_spool_reader;

void sims_spool_reader_init(sims_spool_reader *r, const sims_spool *s);
/* Up to cap values into out; *n == 0 at the end. */
int sims_spool_read(sims_spool_reader *r, uint64_t *out, size_t cap, size_t *n);

#endif
