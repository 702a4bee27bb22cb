/* test_lmdb_meta.c: sims_lmdb_meta_holds, the check that a read transaction
 * holds the commit its id names (LMDB 0.9 can begin one with a newer
 * commit's records under an older id; env.c begins it again then). On a
 * real data.mdb: the meta page of the transaction's parity holds its id and
 * the counts mdb_stat gives; another id, a changed count, or the page
 * rewritten by a later commit (the race itself, made by hand) do not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lmdb/lmdbwalk.h"
#include "common/bytes.h"
#include "testutil.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Offsets in a meta page (LMDB 0.9, 64-bit): page header, then magic,
 * version, address, map size, the free list's and the main database's
 * records (48 bytes each; entries at 32), last page, transaction id. */
#define META_DBS 40
#define META_TXNID (META_DBS + 96 + 8)

static void put(MDB_env *env, MDB_dbi dbi, int i)
{
    MDB_txn *txn;
    char k[16], v[64];
    snprintf(k, sizeof k, "k%06d", i);
    memset(v, 'a' + i % 26, sizeof v);
    MDB_val key = {strlen(k), k}, val = {sizeof v, v};
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_put(txn, dbi, &key, &val, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
}

static void counts_of(MDB_txn *txn, sims_lmdb_db_counts c[2])
{
    for (MDB_dbi d = 0; d < 2; d++) {
        MDB_stat st;
        assert_int_equal(mdb_stat(txn, d, &st), 0);
        c[d] = (sims_lmdb_db_counts){st.ms_depth, st.ms_branch_pages, st.ms_leaf_pages,
                                     st.ms_overflow_pages, st.ms_entries};
    }
}

static uint8_t *read_head(const char *dir, size_t psize)
{
    char *path = test_path(dir, "data.mdb");
    size_t n;
    uint8_t *b = test_read_file(path, &n);
    free(path);
    assert_non_null(b);
    assert_true(n >= 2 * psize);
    return b;
}

static void test_lmdb_meta__holds_its_commit_only(void **state)
{
    (void)state;
    char *dir = test_tmpdir("lmdbmeta");
    MDB_env *env;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_open(env, dir, MDB_NOTLS, 0644), 0);
    MDB_stat est;
    assert_int_equal(mdb_env_stat(env, &est), 0);
    size_t psize = est.ms_psize;
    MDB_txn *txn;
    MDB_dbi dbi;
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    /* Enough commits that the free list has records and the tree a depth. */
    for (int i = 0; i < 300; i++)
        put(env, dbi, i);

    MDB_txn *r;
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &r), 0);
    uint64_t id = (uint64_t)mdb_txn_id(r);
    sims_lmdb_db_counts c[2];
    counts_of(r, c);
    assert_true(c[1].entries >= 300 && c[1].depth >= 2 && c[0].entries > 0);
    uint8_t *head = read_head(dir, psize);
    assert_int_equal(le_load64(head + (id & 1) * psize + META_TXNID), id);
    assert_int_equal(sims_lmdb_meta_holds(head, psize, id, c), 1);

    /* Another id: the other page holds id - 1, and no page holds id + 2. */
    assert_int_equal(sims_lmdb_meta_holds(head, psize, id - 1, c), 0);
    assert_int_equal(sims_lmdb_meta_holds(head, psize, id + 2, c), 0);
    /* Each count, changed by one, in either record. */
    for (int d = 0; d < 2; d++)
        for (int f = 0; f < 5; f++) {
            sims_lmdb_db_counts w[2] = {c[0], c[1]};
            uint64_t *field = f == 0   ? &w[d].depth
                              : f == 1 ? &w[d].branch_pages
                              : f == 2 ? &w[d].leaf_pages
                              : f == 3 ? &w[d].overflow_pages
                                       : &w[d].entries;
            (*field)++;
            assert_int_equal(sims_lmdb_meta_holds(head, psize, id, w), 0);
        }

    /* The race, by hand: two more commits rewrite the page of id's parity.
     * The transaction begun before them keeps id and its counts, and the
     * page no longer holds them; a transaction begun now holds its own. */
    put(env, dbi, 1000);
    put(env, dbi, 1001);
    free(head);
    head = read_head(dir, psize);
    assert_int_equal(le_load64(head + (id & 1) * psize + META_TXNID), id + 2);
    assert_int_equal(sims_lmdb_meta_holds(head, psize, id, c), 0);
    /* The newer commit's records under the older id (what LMDB hands out
     * in the race): the id does not match the page. */
    MDB_txn *r2;
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &r2), 0);
    sims_lmdb_db_counts c2[2];
    counts_of(r2, c2);
    assert_int_equal((uint64_t)mdb_txn_id(r2), id + 2);
    assert_int_equal(sims_lmdb_meta_holds(head, psize, id + 2, c2), 1);
    assert_int_equal(sims_lmdb_meta_holds(head, psize, id, c2), 0);
    mdb_txn_abort(r2);
    mdb_txn_abort(r);
    free(head);
    mdb_env_close(env);
    test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lmdb_meta__holds_its_commit_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
