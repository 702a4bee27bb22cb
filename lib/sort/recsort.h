/* recsort.h: sorting variable-length (key, value) records in bounded memory,
 * by key bytes in LMDB's default order (memcmp, then the shorter key first),
 * ties in push order. Sorted runs spill to unlinked temporary files and are
 * merged back as one stream. The build uses it to load LMDB with sorted
 * appends: documents by id, then (fingerprint, id) pairs. */
#ifndef SIMS_STORE_RECSORT_H
#define SIMS_STORE_RECSORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct sims_recsort sims_recsort;

/* A record as read back; pointers borrow the sorter's buffers until the next
 * call. seq is the record's push order (0, 1, ...), or the seq it was pushed
 * with (sims_recsort_push_seq). */
typedef struct sims_rec {
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *val;
    uint32_t val_len;
    uint64_t seq;
} sims_rec;

/* budget_bytes: memory for buffered records and their index before a run is
 * spilled (at least 1 MiB is used) to tmp_dir (NULL or "": sims_scratch_dir). */
int sims_recsort_new(size_t budget_bytes, const char *tmp_dir, sims_recsort **out);
int sims_recsort_push(sims_recsort *s, const void *key, uint32_t key_len, const void *val,
                      uint32_t val_len);
/* sims_recsort_push with the record's seq given: records of equal keys come
 * back in seq order (the caller's order of precedence, e.g. a document's
 * position in a build's whole input); equal seqs in no set order. */
int sims_recsort_push_seq(sims_recsort *s, const void *key, uint32_t key_len, const void *val,
                          uint32_t val_len, uint64_t seq);
/* End of input; then read the sorted stream with sims_recsort_next().
 * keep_bytes bounds what the sorter holds from now on: the last run stays in
 * memory only if it fits, and the merge buffers share the same allowance
 * (each at least 64 KiB). */
int sims_recsort_finish(sims_recsort *s, size_t keep_bytes);
/* Restart the sorted stream from its beginning (after finish). */
int sims_recsort_rewind(sims_recsort *s);
/* 1 = a record is in *rec, 0 = end, negative = error code. */
int sims_recsort_next(sims_recsort *s, sims_rec *rec);
uint64_t sims_recsort_count(const sims_recsort *s);
unsigned sims_recsort_spilled_runs(const sims_recsort *s);
void sims_recsort_free(sims_recsort *s);

#endif
