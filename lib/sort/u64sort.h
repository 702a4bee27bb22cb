/* u64sort.h: sorting 64-bit values in bounded memory: an in-place-friendly LSD
 * radix sort, and a spilling sorter that cuts its input into sorted runs of a
 * given size, writes them to temporary files, and merges them back as one
 * sorted stream (optionally dropping duplicates). Used by the build for every
 * permuted table. */
#ifndef SIMS_STORE_U64SORT_H
#define SIMS_STORE_U64SORT_H

#include <stddef.h>
#include <stdint.h>

/* Sort v[0..n) ascending using tmp[0..n) as scratch. 11-bit digits, six
 * passes at most; passes where every value shares the digit are skipped. */
void sims_radix_sort_u64(uint64_t *v, uint64_t *tmp, size_t n);

/* Sort v[0..n) by their top `bits` bits only (0..64), tmp as scratch, in
 * ceil(bits / 11) passes: values that share them come out together, in no
 * particular order (what grouping by a prefix needs). */
void sims_radix_sort_u64_top(uint64_t *v, uint64_t *tmp, size_t n, unsigned bits);

/* Sort v[0..n) ascending, as sims_radix_sort_u64, by their top `bits` bits
 * first (ceil(bits / 11) radix passes), then each group sharing them: by
 * insertion when it is small, as it is for values spread evenly over
 * 2^bits prefixes that outnumber them (a join's tables), so fewer passes
 * over the whole input than the six of sims_radix_sort_u64. */
void sims_radix_sort_u64_grouped(uint64_t *v, uint64_t *tmp, size_t n, unsigned bits);

/* A spilling sorter. Values are pushed in any order; sims_u64sort_finish()
 * sorts what is buffered; sims_u64sort_read() then yields the sorted stream.
 * The stream can be rewound and read again (the table writer reads it twice:
 * once for the code histogram, once to encode). */
typedef struct sims_u64sort sims_u64sort;

/* run_values: values per in-memory run (memory used is at most 16 bytes per
 * value: the run and its radix scratch, which start at 64Ki values and double
 * as values come). tmp_dir: where run files go (NULL or "": sims_scratch_dir;
 * removed by sims_u64sort_free). */
int sims_u64sort_new(size_t run_values, const char *tmp_dir, sims_u64sort **out);
int sims_u64sort_push(sims_u64sort *s, const uint64_t *v, size_t n);
/* End of input: sort the last run. `unique` drops repeated values from the
 * merged stream. */
int sims_u64sort_finish(sims_u64sort *s, int unique);
/* Start (or restart) reading the sorted stream from its beginning. */
int sims_u64sort_rewind(sims_u64sort *s);
/* Up to cap values into out; *n == 0 at the end. */
int sims_u64sort_read(sims_u64sort *s, uint64_t *out, size_t cap, size_t *n);
/* Number of runs spilled to disk (0 when everything stayed in memory). */
unsigned sims_u64sort_spilled_runs(const sims_u64sort *s);
void sims_u64sort_free(sims_u64sort *s);

#endif
