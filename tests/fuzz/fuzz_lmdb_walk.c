/* fuzz_lmdb_walk.c: libFuzzer target for lib/store/lmdbwalk.c, simstore's
 * own validator of a store's LMDB data file (the parser that must hold
 * whatever data.mdb contains, since it runs before LMDB reads anything).
 *
 * Input: the bytes of a data.mdb (run with -max_len=65536 or more: the seeds
 * are real stores of 4 KiB pages). The walk runs twice: collecting every
 * finding, and stopping at the first error as an opener does.
 * Invariants (abort on violation): the result is OK, CORRUPT or NOMEM;
 * OK has no error in its summary and CORRUPT at least one; both runs agree on
 * whether the file is sound; the page accounting never claims more pages
 * than the last page number allows; a file the walk accepts passes the
 * meta-page check an opener runs before LMDB (sims_lmdb_check_metas). Then
 * the lazy checks of a read-only opener (sims_lmdb_lazy_*) load the newest
 * snapshot and check every kind of read of a few keys in every database
 * (fixed ones and 8-byte keys taken from the input): each result is OK,
 * CORRUPT or NOMEM, and on a file the walk accepts, every one is OK (the
 * lazy checks read a subset of its pages, by the same rules).
 * Corpus: tests/fuzz/corpus/lmdb_walk/ (data.mdb files of small stores
 * written by gen_record_seeds.c). */
#include "simstore.h"
#include "common/error.h"
#include "lmdb/lmdbwalk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_problem(void *ctx, const sims_lmdb_problem *p)
{
    uint64_t *n = (uint64_t *)ctx;
    if (!p->message || !p->message[0])
        abort();
    (*n)++;
    return 0;
}

static void lazy_result(int rc, int must_pass)
{
    if (rc != SIMSTORE_OK && rc != SIMSTORE_ECORRUPT && rc != SIMSTORE_ENOMEM)
        abort();
    if (must_pass && rc == SIMSTORE_ECORRUPT)
        abort();
}

/* The lazy checks of the snapshot of transaction txnid (0: the newest). */
static void check_lazily(const uint8_t *data, size_t size, uint64_t txnid, int walk_passed)
{
    sims_lmdb_lazy *lz;
    if (sims_lmdb_lazy_new(&lz))
        return;
    int rc = sims_lmdb_lazy_snapshot(lz, data, size, txnid);
    if (rc == SIMS_ERETRY && txnid == 0) {
        sims_lmdb_lazy_free(lz);
        return; /* no transaction to name: the metas were unusable */
    }
    lazy_result(rc, walk_passed);
    if (rc == SIMSTORE_OK) {
        static const char *const fixed[] = {"store",       "state",     "text",
                                            "boilerplate", "d00000000", "doc-000"};
        uint8_t keys[4][8];
        memset(keys[0], 0, 8);
        memset(keys[1], 0xFF, 8);
        for (int i = 2; i < 4; i++)
            memcpy(keys[i], data + (size >= 8 ? (size - 8) / (size_t)i : 0), size >= 8 ? 8 : 0);
        for (int db = SIMS_LMDB_META; db < SIMS_LMDB_DB_COUNT; db++) {
            for (int read = SIMS_LMDB_READ_GET; read <= SIMS_LMDB_READ_AROUND; read++) {
                for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
                    lazy_result(sims_lmdb_lazy_check(lz, db, fixed[i], strlen(fixed[i]), read),
                                walk_passed);
                for (int i = 0; i < 4; i++)
                    lazy_result(sims_lmdb_lazy_check(lz, db, keys[i], 8, read), walk_passed);
            }
        }
    }
    sims_lmdb_lazy_free(lz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    uint64_t seen = 0;
    sims_lmdb_summary sum;
    int rc = sims_lmdb_walk(copy, size, 0, count_problem, &seen, &sum);
    if (rc != SIMSTORE_OK && rc != SIMSTORE_ECORRUPT && rc != SIMSTORE_ENOMEM)
        abort();
    if (rc == SIMSTORE_OK && sum.errors)
        abort();
    if (rc == SIMSTORE_ECORRUPT && !sum.errors)
        abort();
    if (seen != sum.errors + sum.warnings)
        abort();
    if (rc == SIMSTORE_OK &&
        sum.used_pages + sum.free_pages + sum.leaked_pages != sum.last_pgno + 1)
        abort();
    sims_lmdb_summary first;
    int rc2 = sims_lmdb_walk(copy, size, 0, NULL, NULL, &first);
    if (rc != SIMSTORE_ENOMEM && rc2 != SIMSTORE_ENOMEM &&
        (rc == SIMSTORE_OK) != (rc2 == SIMSTORE_OK))
        abort();
    /* The meta-page check an opener runs before LMDB is a subset of the walk. */
    int rc3 = sims_lmdb_check_metas(copy, size, NULL, NULL);
    if (rc3 != SIMSTORE_OK && rc3 != SIMSTORE_ECORRUPT)
        abort();
    if (rc == SIMSTORE_OK && rc3 != SIMSTORE_OK)
        abort();
    check_lazily(copy, size, rc == SIMSTORE_OK ? first.txnid : 0, rc == SIMSTORE_OK);
    free(copy);
    return 0;
}
