/* test_verify.c: simstore_verify() and the inspection API on small stores:
 * a clean store verifies; each kind of damage (a flipped byte in a block, in
 * an index, in a document record, in an LMDB page; a missing table file; a
 * table from another store; a table whose set differs; an fps entry without
 * its document; a document without its fps entry; a fingerprint no segment
 * holds; a state count off by one; a rolled-back LMDB meta page) is reported
 * with its kind, file, block and byte offset; quick mode, leftovers, the
 * callback's stop; table handles (facts, blocks, permutations, histograms)
 * against the documents the store was built from. Damage is made by writing
 * table files and LMDB directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/bytes.h"
#include "simstore.h"
#include "changes_store.h"
#include "lmdb/lmdbwalk.h"
#include "lmdb/records.h"
#include "table/table.h"
#include "testutil.h"

#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NDOCS 400

typedef struct fixture {
    char *tmp;
    char *dir;
    uint64_t fps[NDOCS];
    char ids[NDOCS][16];
} fixture;

/* ---- building and damaging ------------------------------------------------------ */

static int build(const char *dir, fixture *f, unsigned from, unsigned to, int add, unsigned bb)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = 3;
    o.block_bytes = bb;
    o.threads = 1;
    o.memory_bytes = 8u << 20;
    simstore_builder *b;
    simstore *s = NULL;
    int rc = add ? simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s)
                 : test_changes_begin(dir, &o, &s, &b);
    if (rc == 0 && add)
        rc = simstore_add_begin(s, &o, &b);
    for (unsigned i = from; rc == 0 && i < to; i++) {
        char meta[32];
        int ml = snprintf(meta, sizeof meta, "{\"i\":%u}", i);
        simstore_doc d = {f->ids[i],           strlen(f->ids[i]),      f->fps[i],
                          i % 4 ? NULL : meta, i % 4 ? 0 : (size_t)ml, i};
        rc = simstore_builder_add(b, &d);
    }
    if (rc == 0)
        rc = simstore_builder_finish(b);
    simstore_close(s);
    return rc;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    test_rng r;
    test_rng_init(&r, "test_verify", 77);
    for (unsigned i = 0; i < NDOCS; i++) {
        f->fps[i] = i % 10 == 5 ? f->fps[i - 1] : test_rng_next(&r);
        snprintf(f->ids[i], sizeof f->ids[i], "d%04u", i);
    }
    f->tmp = test_tmpdir("verify");
    f->dir = test_path(f->tmp, "store");
    assert_int_equal(build(f->dir, f, 0, 300, 0, 256), 0);
    assert_int_equal(build(f->dir, f, 300, NDOCS, 1, 256), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    test_rmtree(f->tmp);
    free(f->tmp);
    free(f->dir);
    free(f);
    return 0;
}

/* A fresh copy of the fixture's store to damage. */
static char *copy_store(const fixture *f, const char *name)
{
    char *dst = test_path(f->tmp, name);
    test_rmtree(dst);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", f->dir, dst);
    assert_int_equal(system(cmd), 0);
    return dst;
}

static char *table_path(const char *dir, unsigned seg, unsigned t)
{
    char name[64];
    snprintf(name, sizeof name, "s%010u-t%03u.tbl", seg, t);
    return test_path(dir, name);
}

static void flip_byte(const char *path, size_t off)
{
    size_t n;
    uint8_t *d = test_read_file(path, &n);
    assert_non_null(d);
    assert_true(off < n);
    d[off] ^= 0x40;
    assert_int_equal(test_write_file(path, d, n), 0);
    free(d);
}

/* Raw LMDB access to a store (none of its handles may be open). */
typedef struct raw {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, docs, fps;
} raw;

static void raw_open(raw *r, const char *dir)
{
    assert_int_equal(mdb_env_create(&r->env), 0);
    mdb_env_set_maxdbs(r->env, 4);
    mdb_env_set_mapsize(r->env, (size_t)1 << 30);
    assert_int_equal(mdb_env_open(r->env, dir, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(r->env, NULL, 0, &r->txn), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "meta", 0, &r->meta), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "docs", 0, &r->docs), 0);
    assert_int_equal(mdb_dbi_open(r->txn, "fps", MDB_DUPSORT, &r->fps), 0);
}

static void raw_commit(raw *r)
{
    assert_int_equal(mdb_txn_commit(r->txn), 0);
    mdb_env_close(r->env);
}

/* ---- collecting problems ---------------------------------------------------------- */

typedef struct got {
    unsigned n;
    int kind[64];
    int warning[64];
    int64_t block[64];
    int64_t offset[64];
    char file[64][512];
    char msg[64][1024];
    int stop_after; /* return 99 after this many (0: never) */
} got;

static int collect(void *ctx, const simstore_problem *p)
{
    got *g = ctx;
    if (g->n < 64) {
        g->kind[g->n] = p->kind;
        g->warning[g->n] = p->warning;
        g->block[g->n] = p->block;
        g->offset[g->n] = p->offset;
        snprintf(g->file[g->n], sizeof g->file[0], "%s", p->file ? p->file : "");
        snprintf(g->msg[g->n], sizeof g->msg[0], "%s", p->message);
        fprintf(stderr, "  [%s %d] %s\n", p->warning ? "warning" : "error", p->kind, p->message);
    }
    g->n++;
    if (g->stop_after && g->n >= (unsigned)g->stop_after)
        return 99;
    return 0;
}

/* Index of the first problem of `kind` (and, when not NULL, whose message
 * contains `needle`), or -1. */
static int find(const got *g, int kind, const char *needle)
{
    for (unsigned i = 0; i < g->n && i < 64; i++)
        if (g->kind[i] == kind && (!needle || strstr(g->msg[i], needle)))
            return (int)i;
    return -1;
}

static int verify(const char *path, unsigned flags, got *g, simstore_verify_summary *sum)
{
    memset(g, 0, sizeof *g);
    return simstore_verify(path, flags, collect, g, sum);
}

/* ---- verify ------------------------------------------------------------------------ */

static void test_verify__clean_store(void **state)
{
    fixture *f = *state;
    got g;
    simstore_verify_summary sum;
    assert_int_equal(verify(f->dir, 0, &g, &sum), SIMSTORE_OK);
    assert_int_equal(g.n, 0);
    assert_int_equal(sum.store, 1);
    assert_int_equal(sum.errors, 0);
    assert_int_equal(sum.documents, NDOCS);
    assert_int_equal(sum.fps_entries, NDOCS);
    assert_true(sum.table_files >= 2);
    assert_true(sum.blocks > sum.table_files);
    assert_true(sum.lmdb_pages > 2);
    assert_int_equal(sum.sets_by_digest, 0);
    assert_int_equal(sum.dead_fingerprints, 0);
    /* Quick mode decodes nothing. */
    assert_int_equal(verify(f->dir, SIMSTORE_VERIFY_QUICK, &g, &sum), SIMSTORE_OK);
    assert_int_equal(sum.blocks, 0);
    assert_int_equal(sum.documents, 0);
}

static void test_verify__bad_arguments(void **state)
{
    fixture *f = *state;
    got g;
    assert_int_equal(simstore_verify(NULL, 0, NULL, NULL, NULL), SIMSTORE_EINVAL);
    assert_int_equal(simstore_verify(f->dir, 0x80, NULL, NULL, NULL), SIMSTORE_EINVAL);
    char *nothing = test_path(f->tmp, "no-such-store");
    assert_int_equal(verify(nothing, 0, &g, NULL), SIMSTORE_ENOTFOUND);
    free(nothing);
    /* A directory that is no store. */
    char *empty = test_path(f->tmp, "empty-dir");
    mkdir(empty, 0755);
    assert_int_equal(verify(empty, 0, &g, NULL), SIMSTORE_ENOTFOUND);
    assert_non_null(strstr(simstore_last_error(), "not a store"));
    free(empty);
}

static void test_verify__flipped_block_byte(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "flip-block");
    char *t1 = table_path(dir, 1, 1);
    simstore_table *t;
    assert_int_equal(simstore_table_open(t1, &t), 0);
    simstore_table_info in;
    simstore_table_get_info(t, &in);
    simstore_table_close(t);
    assert_true(in.blocks >= 3);
    uint64_t block = 2, off = in.blocks_offset + block * in.block_bytes + 5;
    flip_byte(t1, (size_t)off);
    got g;
    simstore_verify_summary sum;
    assert_int_equal(verify(dir, 0, &g, &sum), SIMSTORE_ECORRUPT);
    int i = find(&g, SIMSTORE_PROBLEM_BLOCK, NULL);
    assert_true(i >= 0);
    assert_string_equal(g.file[i], t1);
    /* Formats 2 and 3 checksum the blocks of a 4 KiB page together: block
     * 2 is in group 0 with blocks 0..4096/B - 2 (block 0 shares page 0 with
     * the header), reported once, at block 0. */
    assert_int_equal(in.format_version, 3);
    assert_true(in.block_bytes <= 1024);
    uint64_t group_last = 4096 / in.block_bytes - 2;
    if (group_last > in.blocks - 1)
        group_last = in.blocks - 1;
    char want[64];
    snprintf(want, sizeof want, "group 0 (blocks 0..%d", (int)group_last);
    assert_int_equal(g.block[i], 0);
    assert_int_equal(g.offset[i], (int64_t)in.blocks_offset);
    assert_non_null(strstr(g.msg[i], want));
    assert_non_null(strstr(g.msg[i], "byte offset"));
    assert_non_null(strstr(g.msg[i], "s0000000001-t001.tbl"));
    assert_int_equal(sum.errors, 1);
    /* Quick mode reads no block: it passes. */
    assert_int_equal(verify(dir, SIMSTORE_VERIFY_QUICK, &g, &sum), SIMSTORE_OK);
    /* The table file alone. */
    assert_int_equal(verify(t1, 0, &g, &sum), SIMSTORE_ECORRUPT);
    assert_int_equal(sum.store, 0);
    assert_true(find(&g, SIMSTORE_PROBLEM_BLOCK, want) >= 0);
    free(t1);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__flipped_index_byte(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "flip-index");
    char *t0 = table_path(dir, 2, 0);
    simstore_table *t;
    assert_int_equal(simstore_table_open(t0, &t), 0);
    simstore_table_info in;
    simstore_table_get_info(t, &in);
    simstore_table_close(t);
    /* Format 3: the last top page's checksum, just before the footer.
     * Quick mode reads no block but checks the whole index. */
    flip_byte(t0, (size_t)in.footer_offset - 3);
    got g;
    simstore_verify_summary sum;
    assert_int_equal(verify(dir, SIMSTORE_VERIFY_QUICK, &g, &sum), SIMSTORE_ECORRUPT);
    int i = find(&g, SIMSTORE_PROBLEM_TABLE, "checksum mismatch");
    assert_true(i >= 0);
    assert_string_equal(g.file[i], t0);
    assert_non_null(strstr(g.msg[i], "top page"));
    assert_non_null(strstr(g.msg[i], "byte offset"));
    flip_byte(t0, (size_t)in.footer_offset - 3);
    assert_int_equal(verify(dir, 0, &g, &sum), SIMSTORE_OK);
    /* A page group's checksum, first in the index: a block problem, found
     * when the blocks are read (not in quick mode, as for block damage). */
    flip_byte(t0, (size_t)in.index_offset + 3);
    assert_int_equal(verify(dir, 0, &g, &sum), SIMSTORE_ECORRUPT);
    i = find(&g, SIMSTORE_PROBLEM_BLOCK, "block checksum mismatch");
    assert_true(i >= 0);
    assert_string_equal(g.file[i], t0);
    free(t0);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__missing_and_foreign_tables(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "missing");
    char *t0 = table_path(dir, 1, 0);
    unlink(t0);
    /* A table file of another store with the same design, in its place. */
    char *other = test_path(f->tmp, "other-store");
    test_rmtree(other);
    assert_int_equal(build(other, f, 0, 300, 0, 256), 0);
    char *theirs = table_path(other, 1, 1), *ours = table_path(dir, 1, 1);
    size_t n;
    uint8_t *d = test_read_file(theirs, &n);
    assert_int_equal(test_write_file(ours, d, n), 0);
    free(d);
    got g;
    assert_int_equal(verify(dir, 0, &g, NULL), SIMSTORE_ECORRUPT);
    int i = find(&g, SIMSTORE_PROBLEM_MISSING, NULL);
    assert_true(i >= 0);
    assert_string_equal(g.file[i], t0);
    i = find(&g, SIMSTORE_PROBLEM_TABLE_STORE, "belongs to another store");
    assert_true(i >= 0);
    assert_string_equal(g.file[i], ours);
    assert_int_equal(g.offset[i], 24);
    /* Opening the store for queries refuses it too. */
    simstore *s;
    simstore_query *q;
    const simstore_match *m;
    size_t cnt;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_READONLY, &s), 0);
    assert_int_equal(simstore_query_new(s, 0, &q), 0);
    assert_int_not_equal(simstore_query_fp(q, f->fps[0], 3, &m, &cnt), 0);
    simstore_query_free(q);
    simstore_close(s);
    free(t0);
    free(theirs);
    free(ours);
    test_rmtree(other);
    free(other);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__table_set_differs(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "set");
    /* Rewrite table 1 of segment 1 with one fingerprint replaced: every
     * checksum valid, same count, a different set. */
    char *t1 = table_path(dir, 1, 1);
    simstore_table *t;
    assert_int_equal(simstore_table_open(t1, &t), 0);
    simstore_table_info in;
    simstore_table_get_info(t, &in);
    uint64_t *v = malloc(in.fingerprints * sizeof *v);
    size_t got_n = 0;
    for (uint64_t b = 0; b < in.blocks; b++) {
        size_t n;
        assert_int_equal(
            simstore_table_read_block(t, b, NULL, v + got_n, (size_t)(in.fingerprints - got_n), &n),
            0);
        got_n += n;
    }
    assert_int_equal(got_n, in.fingerprints);
    v[got_n / 2] = v[got_n / 2 - 1] + 1; /* still strictly increasing */
    assert_true(v[got_n / 2] < v[got_n / 2 + 1]);
    uint64_t changed = simstore_table_unpermute(t, v[got_n / 2]);
    simstore_table_close(t);
    table_params p;
    memset(&p, 0, sizeof p);
    p.block_bytes = in.block_bytes;
    p.prefix_bits = (uint8_t)in.prefix_bits;
    memcpy(p.perm, in.perm, 64);
    p.store_tag = in.store_tag;
    p.table_index = in.table_index;
    uint8_t *bytes;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&p, v, got_n, &bytes, &size), 0);
    assert_int_equal(test_write_file(t1, bytes, size), 0);
    free(bytes);
    free(v);
    got g;
    assert_int_equal(verify(dir, 0, &g, NULL), SIMSTORE_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "holds fingerprint %016" PRIx64, changed);
    int i = find(&g, SIMSTORE_PROBLEM_TABLE_SET, want);
    assert_true(i >= 0);
    assert_string_equal(g.file[i], t1);
    assert_true(find(&g, SIMSTORE_PROBLEM_TABLE_SET, "lacks fingerprint") >= 0);
    free(t1);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__document_damage(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "docs");
    raw r;
    raw_open(&r, dir);
    /* 1. A flipped byte inside d0007's record. */
    MDB_val key = {5, (void *)"d0007"}, val;
    assert_int_equal(mdb_get(r.txn, r.docs, &key, &val), 0);
    uint8_t rec[256];
    memcpy(rec, val.mv_data, val.mv_size);
    rec[3] ^= 1;
    MDB_val nv = {val.mv_size, rec};
    assert_int_equal(mdb_put(r.txn, r.docs, &key, &nv, 0), 0);
    /* 2. An fps entry without a document. */
    uint8_t fk[8];
    be_store64(fk, f->fps[20]);
    MDB_val k2 = {8, fk}, ghost = {5, (void *)"ghost"};
    assert_int_equal(mdb_put(r.txn, r.fps, &k2, &ghost, 0), 0);
    /* 3. A document without its fps entry: remove (fps[30], d0030). */
    be_store64(fk, f->fps[30]);
    MDB_val k3 = {8, fk}, id30 = {5, (void *)"d0030"};
    assert_int_equal(mdb_del(r.txn, r.fps, &k3, &id30), 0);
    raw_commit(&r);

    got g;
    simstore_verify_summary sum;
    assert_int_equal(verify(dir, 0, &g, &sum), SIMSTORE_ECORRUPT);
    int i = find(&g, SIMSTORE_PROBLEM_DOC, "d0007");
    assert_true(i >= 0);
    assert_true(g.offset[i] > 0);
    assert_non_null(strstr(g.msg[i], "data.mdb"));
    assert_non_null(strstr(g.msg[i], "byte offset"));
    assert_non_null(strstr(g.msg[i], "check mismatch"));
    i = find(&g, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, "ghost");
    assert_true(i >= 0);
    assert_true(g.offset[i] > 0);
    i = find(&g, SIMSTORE_PROBLEM_DOC_WITHOUT_FPS, "d0030");
    assert_true(i >= 0);
    /* d0030's fingerprint was its own: fps lost a key (ghost's is shared). */
    assert_true(find(&g, SIMSTORE_PROBLEM_COUNTS, "distinct fingerprints") >= 0);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__counts_and_unheld_fingerprint(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "counts");
    raw r;
    raw_open(&r, dir);
    /* The state says one document more than docs holds. */
    MDB_val key = {5, (void *)"state"}, val;
    assert_int_equal(mdb_get(r.txn, r.meta, &key, &val), 0);
    sims_state_record st;
    assert_int_equal(sims_state_record_decode(val.mv_data, val.mv_size,
                                              le_load32((const uint8_t *)val.mv_data + 48 + 24),
                                              &st),
                     0);
    st.doc_count += 2; /* the stray document below adds one */
    size_t n = sims_state_record_size(st.segment_count);
    uint8_t *buf = malloc(n);
    assert_int_equal(sims_state_record_encode(&st, buf, n), n);
    sims_state_record_release(&st);
    MDB_val nv = {n, buf};
    assert_int_equal(mdb_put(r.txn, r.meta, &key, &nv, 0), 0);
    free(buf);
    /* A document whose fingerprint no segment holds (fps and docs agree). */
    uint64_t stray = 0x0123456789abcdefULL;
    uint8_t rec[32], fk[8];
    size_t rl =
        sims_doc_record_encode((const uint8_t *)"stray", 5, stray, 0, 0, NULL, 0, rec, sizeof rec);
    MDB_val dk = {5, (void *)"stray"}, dv = {rl, rec};
    assert_int_equal(mdb_put(r.txn, r.docs, &dk, &dv, 0), 0);
    be_store64(fk, stray);
    MDB_val fkv = {8, fk};
    assert_int_equal(mdb_put(r.txn, r.fps, &fkv, &dk, 0), 0);
    raw_commit(&r);

    got g;
    assert_int_equal(verify(dir, 0, &g, NULL), SIMSTORE_ECORRUPT);
    assert_true(find(&g, SIMSTORE_PROBLEM_COUNTS, "documents") >= 0);
    assert_true(find(&g, SIMSTORE_PROBLEM_FPS_WITHOUT_TABLE, "0123456789abcdef") >= 0);
    /* Quick mode still compares the counts. */
    assert_int_equal(verify(dir, SIMSTORE_VERIFY_QUICK, &g, NULL), SIMSTORE_ECORRUPT);
    assert_true(find(&g, SIMSTORE_PROBLEM_COUNTS, NULL) >= 0);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__lmdb_damage(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "lmdb");
    char *mdb = test_path(dir, "data.mdb");
    /* Navigate as LMDB does: newest meta page, main database root, the
     * "docs" record, its leftmost leaf. */
    size_t size;
    uint8_t *d = test_read_file(mdb, &size);
    const uint8_t *meta = d + (le_load64(d + 144) > le_load64(d + 4096 + 144) ? 0 : 4096);
    uint64_t main_root = le_load64(meta + 16 + 24 + 48 + 40);
    const uint8_t *mp = d + main_root * 4096;
    size_t page = 0;
    unsigned nkeys = (le_load16(mp + 12) - 16u) / 2;
    for (unsigned i = 0; i < nkeys; i++) {
        const uint8_t *node = mp + le_load16(mp + 16 + 2 * i);
        if (le_load16(node + 6) == 4 && memcmp(node + 8, "docs", 4) == 0) {
            const uint8_t *rec = node + 12;
            uint64_t depth = le_load16(rec + 6), pg = le_load64(rec + 40);
            for (uint64_t lvl = 1; lvl < depth; lvl++) {
                const uint8_t *bp = d + pg * 4096;
                const uint8_t *n0 = bp + le_load16(bp + 16);
                pg = (uint64_t)le_load16(n0) | (uint64_t)le_load16(n0 + 2) << 16 |
                     (uint64_t)le_load16(n0 + 4) << 32;
            }
            page = (size_t)pg;
        }
    }
    assert_true(page >= 2);
    d[page * 4096 + 12] -= 2; /* one node pointer fewer: a node goes unreferenced */
    assert_int_equal(test_write_file(mdb, d, size), 0);
    /* The leaf's first id, to read it below. */
    const uint8_t *n0 = d + page * 4096 + le_load16(d + page * 4096 + 16);
    char first_id[64];
    size_t first_len = le_load16(n0 + 6);
    assert_true(first_len > 0 && first_len < sizeof first_id);
    memcpy(first_id, n0 + 8, first_len);
    free(d);
    got g;
    assert_int_equal(verify(dir, 0, &g, NULL), SIMSTORE_ECORRUPT);
    int i = find(&g, SIMSTORE_PROBLEM_LMDB, "tile");
    assert_true(i >= 0);
    assert_int_equal(g.block[i], (int64_t)page);
    assert_true(g.offset[i] >= (int64_t)(page * 4096) &&
                g.offset[i] < (int64_t)((page + 1) * 4096));
    char want[64];
    snprintf(want, sizeof want, "page %zu", page);
    assert_non_null(strstr(g.msg[i], want));
    /* The tables are still checked, on their own. */
    assert_true(find(&g, SIMSTORE_PROBLEM_RECORD, "on their own") >= 0);
    /* Opening the store with the walk of all of data.mdb refuses it, naming
     * the page. */
    simstore *s;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_READONLY | SIMSTORE_OPEN_FULL_WALK, &s),
                     SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), want));
    /* A read-only open checks pages as it reads them: it opens, and the
     * first read of that leaf fails, naming the page. */
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    simstore_query *q;
    assert_int_equal(simstore_query_new(s, 0, &q), SIMSTORE_OK);
    assert_int_equal(simstore_query_has_id(q, first_id, first_len, NULL), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), want));
    simstore_query_free(q);
    simstore_close(s);
    free(mdb);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__lmdb_meta_rollback(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "rollback");
    char *mdb = test_path(dir, "data.mdb");
    size_t size;
    uint8_t *d = test_read_file(mdb, &size);
    /* Meta pages: txnid at page offset 144. Make the newer one claim two
     * transactions less: same parity, and one below the other meta, so LMDB
     * would pick the older snapshot. */
    uint64_t a = le_load64(d + 144), b = le_load64(d + 4096 + 144);
    size_t newer = a > b ? 0 : 4096;
    uint64_t t = a > b ? a : b;
    assert_true(t >= 3);
    le_store64(d + newer + 144, t - 2);
    assert_int_equal(test_write_file(mdb, d, size), 0);
    free(d);
    got g;
    assert_int_equal(verify(dir, 0, &g, NULL), SIMSTORE_ECORRUPT);
    assert_true(find(&g, SIMSTORE_PROBLEM_LMDB, "transaction") >= 0);
    simstore *s;
    assert_int_not_equal(simstore_open(dir, SIMSTORE_OPEN_READONLY, &s), SIMSTORE_OK);
    free(mdb);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__leftovers_and_stop(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "leftover");
    char *junk = test_path(dir, "s0000000001-t000.tbl.tmp-AbC123");
    char *stale = test_path(dir, "s0000000099-t000.tbl");
    assert_int_equal(test_write_file(junk, "x", 1), 0);
    assert_int_equal(test_write_file(stale, "y", 1), 0);
    got g;
    simstore_verify_summary sum;
    assert_int_equal(verify(dir, 0, &g, &sum), SIMSTORE_OK);
    assert_int_equal(sum.errors, 0);
    assert_int_equal(sum.warnings, 2);
    int i = find(&g, SIMSTORE_PROBLEM_LEFTOVER, "temporary");
    assert_true(i >= 0 && g.warning[i]);
    i = find(&g, SIMSTORE_PROBLEM_LEFTOVER, "segment 99");
    assert_true(i >= 0 && g.warning[i]);
    assert_string_equal(g.file[i], stale);
    /* A callback that says stop stops verify. */
    memset(&g, 0, sizeof g);
    g.stop_after = 1;
    assert_int_equal(simstore_verify(dir, 0, collect, &g, NULL), 99);
    assert_int_equal(g.n, 1);
    free(junk);
    free(stale);
    test_rmtree(dir);
    free(dir);
}

typedef struct tail_line {
    int seen, warning;
    unsigned errors_reported;
} tail_line;

static int note_tail(void *ctx, const simstore_problem *p)
{
    tail_line *t = ctx;
    if (!p->warning)
        t->errors_reported++;
    if (strstr(p->message, "more problems of this kind")) {
        t->seen = 1;
        t->warning = p->warning;
    }
    return 0;
}

static void test_verify__many_warnings_stay_warnings(void **state)
{
    /* More problems of one kind than are listed: the closing "N more" line
     * is a warning when all it stands for are warnings. */
    fixture *f = *state;
    char *dir = copy_store(f, "many-leftovers");
    for (int i = 0; i < 150; i++) {
        char name[64];
        snprintf(name, sizeof name, "junk%03d.tmp-XXXXXX", i);
        char *p = test_path(dir, name);
        assert_int_equal(test_write_file(p, "x", 1), 0);
        free(p);
    }
    tail_line t = {0, 0, 0};
    simstore_verify_summary sum;
    assert_int_equal(simstore_verify(dir, 0, note_tail, &t, &sum), SIMSTORE_OK);
    assert_int_equal(sum.errors, 0);
    assert_int_equal(sum.warnings, 150);
    assert_true(t.seen);
    assert_true(t.warning);
    assert_int_equal(t.errors_reported, 0);
    test_rmtree(dir);
    free(dir);
}

static void test_verify__dead_duplicate_after_delete(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "dead");
    simstore *s;
    assert_int_equal(simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s),
                     0);
    const char *ids[] = {f->ids[12]};
    size_t lens[] = {strlen(f->ids[12])};
    uint64_t deleted = 0;
    assert_int_equal(simstore_delete(s, ids, lens, 1, &deleted, NULL, NULL), 0);
    assert_int_equal(deleted, 1);
    simstore_close(s);
    got g;
    simstore_verify_summary sum;
    assert_int_equal(verify(dir, 0, &g, &sum), SIMSTORE_OK);
    assert_int_equal(sum.dead_fingerprints, 1);
    /* Added again: a new segment holds it while its dead copy stays. */
    assert_int_equal(build(dir, f, 12, 13, 1, 256), 0);
    assert_int_equal(verify(dir, 0, &g, &sum), SIMSTORE_OK);
    int i = find(&g, SIMSTORE_PROBLEM_SEGMENT_OVERLAP, NULL);
    if (i >= 0)
        assert_true(g.warning[i]);
    test_rmtree(dir);
    free(dir);
}

/* Insertion numbers: one repeated by a second document, one naming a
 * generation not committed yet; the clean fixture has neither. */
static void test_verify__insertion_numbers(void **state)
{
    fixture *f = *state;
    char *dir = copy_store(f, "insertion");
    got g;
    assert_int_equal(verify(dir, 0, &g, NULL), SIMSTORE_OK);
    assert_int_equal(find(&g, SIMSTORE_PROBLEM_DOC, "insertion"), -1);
    raw r;
    raw_open(&r, dir);
    MDB_cursor *cur;
    assert_int_equal(mdb_cursor_open(r.txn, r.docs, &cur), 0);
    MDB_val key, val;
    char ids[3][64];
    size_t lens[3];
    sims_doc_record recs[3];
    uint8_t metas[3][512];
    int op = MDB_FIRST;
    for (int i = 0; i < 3; i++, op = MDB_NEXT) {
        assert_int_equal(mdb_cursor_get(cur, &key, &val, op), 0);
        assert_true(key.mv_size < sizeof ids[0]);
        memcpy(ids[i], key.mv_data, key.mv_size);
        lens[i] = key.mv_size;
        assert_int_equal(
            sims_doc_record_decode(key.mv_data, key.mv_size, val.mv_data, val.mv_size, &recs[i]),
            0);
        assert_true(recs[i].flags & SIMS_DOC_FLAG_INSERTION);
        assert_true(recs[i].meta_len <= sizeof metas[0]);
        if (recs[i].meta_len)
            memcpy(metas[i], recs[i].meta, recs[i].meta_len);
        recs[i].meta = recs[i].meta_len ? metas[i] : NULL;
    }
    mdb_cursor_close(cur);
    /* Document 1 takes document 0's number; document 2 one of generation 999. */
    uint64_t number[2] = {recs[0].insertion, (UINT64_C(999) << 40) | 7};
    for (int i = 1; i < 3; i++) {
        uint8_t buf[600];
        size_t n =
            sims_doc_record_encode((const uint8_t *)ids[i], lens[i], recs[i].fp, recs[i].flags,
                                   number[i - 1], recs[i].meta, recs[i].meta_len, buf, sizeof buf);
        assert_true(n > 0);
        MDB_val k = {lens[i], ids[i]}, v = {n, buf};
        assert_int_equal(mdb_put(r.txn, r.docs, &k, &v, 0), 0);
    }
    raw_commit(&r);
    assert_int_equal(verify(dir, 0, &g, NULL), SIMSTORE_ECORRUPT);
    assert_true(find(&g, SIMSTORE_PROBLEM_DOC, "repeat an earlier document's insertion") >= 0);
    assert_true(find(&g, SIMSTORE_PROBLEM_DOC, "of generation 999, outside") >= 0);
    test_rmtree(dir);
    free(dir);
}

/* ---- inspection ------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_inspect__tables_hold_the_documents(void **state)
{
    fixture *f = *state;
    uint64_t want[NDOCS];
    memcpy(want, f->fps, sizeof want);
    qsort(want, NDOCS, sizeof *want, cmp_u64);
    size_t nwant = 0;
    for (size_t i = 0; i < NDOCS; i++)
        if (!nwant || want[i] != want[nwant - 1])
            want[nwant++] = want[i];

    simstore *s;
    assert_int_equal(simstore_open(f->dir, SIMSTORE_OPEN_READONLY, &s), 0);
    simstore_stats st;
    assert_int_equal(simstore_get_stats(s, &st), 0);
    assert_int_equal(st.segments, 2);
    simstore_segment_info seg;
    assert_int_equal(simstore_get_segment(s, 2, &seg), SIMSTORE_ENOTFOUND);
    simstore_table *bad;
    assert_int_equal(simstore_open_segment_table(s, 0, st.tables, &bad), SIMSTORE_EINVAL);
    assert_null(bad);
    for (unsigned t = 0; t < st.tables; t++) {
        uint64_t all[NDOCS];
        size_t nall = 0;
        for (uint64_t i = 0; i < st.segments; i++) {
            assert_int_equal(simstore_get_segment(s, i, &seg), 0);
            assert_int_equal(seg.id, i + 1);
            simstore_table *tab;
            assert_int_equal(simstore_open_segment_table(s, i, t, &tab), 0);
            simstore_table_info in;
            simstore_table_get_info(tab, &in);
            assert_int_equal(in.fingerprints, seg.fingerprints);
            assert_int_equal(in.table_index, t);
            assert_int_equal(in.block_bytes, 256);
            assert_true(in.floor_bits_per_fp > 0 && in.bits_per_fp > in.floor_bits_per_fp);
            char desc[160];
            assert_true(simstore_describe_table(s, t, desc, sizeof desc) > 0);
            if (t == 0)
                assert_non_null(strstr(in.permutation, "identity"));
            uint64_t prev_key = 0;
            for (uint64_t b = 0; b < in.blocks; b++) {
                simstore_block_info bi;
                uint64_t v[1024];
                size_t n;
                assert_int_equal(simstore_table_read_block(tab, b, &bi, v, 1024, &n), 0);
                assert_int_equal(n, bi.fingerprints);
                assert_int_equal(bi.first, v[0]);
                assert_int_equal(bi.key, v[n - 1]);
                assert_true(b == 0 || bi.first > prev_key);
                assert_true(bi.used_bits > 0 && bi.used_bits <= 8u * in.block_bytes);
                assert_int_equal(bi.offset, in.blocks_offset + b * in.block_bytes);
                assert_int_equal(simstore_table_find_block(tab, bi.key), b);
                prev_key = bi.key;
                for (size_t j = 0; j < n; j++) {
                    uint64_t fp = simstore_table_unpermute(tab, v[j]);
                    assert_int_equal(simstore_table_permute(tab, fp), v[j]);
                    all[nall++] = fp;
                }
                /* Info only, without values. */
                simstore_block_info bj;
                assert_int_equal(simstore_table_read_block(tab, b, &bj, NULL, 0, NULL), 0);
                assert_memory_equal(&bi, &bj, sizeof bi);
            }
            assert_int_equal(simstore_table_read_block(tab, in.blocks, NULL, NULL, 0, NULL),
                             SIMSTORE_EINVAL);
            simstore_histogram h;
            assert_int_equal(simstore_table_histogram(tab, 0, &h), 0);
            assert_true(h.exact);
            assert_int_equal(h.differences, in.fingerprints - 1);
            assert_int_equal(h.blocks_decoded, in.blocks);
            uint64_t total = 0;
            for (unsigned j = 0; j < 64; j++) {
                total += h.count[j];
                if (h.count[j])
                    assert_true(in.code_lengths[j] > 0);
            }
            assert_int_equal(total, h.differences);
            simstore_histogram hs;
            assert_int_equal(simstore_table_histogram(tab, 2, &hs), 0);
            assert_false(hs.exact);
            assert_int_equal(hs.blocks_decoded, 2);
            simstore_table_close(tab);
        }
        /* Every table, over the segments, holds exactly the distinct fps. */
        qsort(all, nall, sizeof *all, cmp_u64);
        assert_int_equal(nall, nwant);
        assert_memory_equal(all, want, nwant * sizeof *want);
    }
    /* A handle outlives its store. */
    simstore_table *tab;
    assert_int_equal(simstore_open_segment_table(s, 1, 0, &tab), 0);
    simstore_close(s);
    simstore_block_info bi;
    assert_int_equal(simstore_table_read_block(tab, 0, &bi, NULL, 0, NULL), 0);
    simstore_table_close(tab);
}

static void test_inspect__lone_files(void **state)
{
    fixture *f = *state;
    simstore_table *t = NULL;
    assert_int_equal(simstore_table_open(NULL, &t), SIMSTORE_EINVAL);
    char *missing = test_path(f->tmp, "nope.tbl");
    assert_int_equal(simstore_table_open(missing, &t), SIMSTORE_ENOTFOUND);
    assert_null(t);
    assert_int_equal(test_write_file(missing, "not a table at all", 18), 0);
    assert_int_equal(simstore_table_open(missing, &t), SIMSTORE_ECORRUPT);
    assert_non_null(strstr(simstore_last_error(), "byte offset"));
    unlink(missing);
    free(missing);
    simstore_table_close(NULL);
    /* A non-design permutation (a lone file may hold any): permute and
     * unpermute still invert. */
    table_params p;
    memset(&p, 0, sizeof p);
    p.block_bytes = 256;
    p.prefix_bits = 9;
    for (unsigned i = 0; i < 64; i++)
        p.perm[i] = (uint8_t)((i * 37 + 11) % 64);
    uint64_t v[100];
    for (unsigned i = 0; i < 100; i++)
        v[i] = (uint64_t)i * 0x0123456789ULL + 7;
    uint8_t *bytes;
    size_t size;
    assert_int_equal(sims_table_encode_memory(&p, v, 100, &bytes, &size), 0);
    char *path = test_path(f->tmp, "odd.tbl");
    assert_int_equal(test_write_file(path, bytes, size), 0);
    free(bytes);
    assert_int_equal(simstore_table_open(path, &t), 0);
    simstore_table_info in;
    simstore_table_get_info(t, &in);
    assert_int_equal(in.fingerprints, 100);
    assert_int_equal(in.prefix_bits, 9);
    assert_null(strstr(in.permutation, "identity"));
    for (unsigned i = 0; i < 100; i++) {
        uint64_t x = v[i] * 0x9E3779B97F4A7C15ULL;
        assert_int_equal(simstore_table_unpermute(t, simstore_table_permute(t, x)), x);
        /* Bit i of the permuted value is bit perm[i] of the fingerprint. */
        uint64_t y = simstore_table_permute(t, x);
        for (unsigned b = 0; b < 64; b++)
            assert_int_equal((y >> b) & 1, (x >> p.perm[b]) & 1);
    }
    simstore_table_close(t);
    simstore_verify_summary sum;
    assert_int_equal(simstore_verify(path, 0, NULL, NULL, &sum), SIMSTORE_OK);
    assert_int_equal(sum.fingerprints, 100);
    free(path);
}

/* The walker's counts agree with LMDB's own statistics on a real store. */
static void test_lmdbwalk__agrees_with_lmdb(void **state)
{
    fixture *f = *state;
    char *mdb = test_path(f->dir, "data.mdb");
    size_t size;
    uint8_t *d = test_read_file(mdb, &size);
    sims_lmdb_summary sum;
    assert_int_equal(sims_lmdb_walk(d, size, 0, NULL, NULL, &sum), 0);
    raw r;
    raw_open(&r, f->dir);
    MDB_stat ms;
    assert_int_equal(mdb_stat(r.txn, r.docs, &ms), 0);
    assert_int_equal(sum.db[SIMS_LMDB_DOCS].entries, ms.ms_entries);
    assert_int_equal(sum.db[SIMS_LMDB_DOCS].depth, ms.ms_depth);
    assert_int_equal(sum.db[SIMS_LMDB_DOCS].leaf_pages, ms.ms_leaf_pages);
    assert_int_equal(mdb_stat(r.txn, r.fps, &ms), 0);
    assert_int_equal(sum.db[SIMS_LMDB_FPS].entries, ms.ms_entries);
    assert_int_equal(sum.db[SIMS_LMDB_FPS].entries, NDOCS);
    mdb_txn_abort(r.txn);
    mdb_env_close(r.env);
    assert_int_equal(sum.leaked_pages, 0);
    assert_int_equal(sum.used_pages + sum.free_pages, sum.last_pgno + 1);
    /* A truncated file: the pages past the end are reported, never read. */
    assert_int_equal(sims_lmdb_walk(d, size / 2, 0, NULL, NULL, &sum), SIMSTORE_ECORRUPT);
    assert_int_equal(sims_lmdb_walk(d, 100, 0, NULL, NULL, &sum), SIMSTORE_ECORRUPT);
    free(d);
    free(mdb);
}

int main(void)
{
    /* These stores keep their documents as changes in LMDB, whose records
     * and pages the tests damage and count (test_changes_begin; stores
     * with a document file: tests/cli/docfile_store.sh, test_docfile). */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify__clean_store),
        cmocka_unit_test(test_verify__many_warnings_stay_warnings),
        cmocka_unit_test(test_verify__bad_arguments),
        cmocka_unit_test(test_verify__flipped_block_byte),
        cmocka_unit_test(test_verify__flipped_index_byte),
        cmocka_unit_test(test_verify__missing_and_foreign_tables),
        cmocka_unit_test(test_verify__table_set_differs),
        cmocka_unit_test(test_verify__document_damage),
        cmocka_unit_test(test_verify__counts_and_unheld_fingerprint),
        cmocka_unit_test(test_verify__lmdb_damage),
        cmocka_unit_test(test_verify__lmdb_meta_rollback),
        cmocka_unit_test(test_verify__leftovers_and_stop),
        cmocka_unit_test(test_verify__dead_duplicate_after_delete),
        cmocka_unit_test(test_verify__insertion_numbers),
        cmocka_unit_test(test_inspect__tables_hold_the_documents),
        cmocka_unit_test(test_inspect__lone_files),
        cmocka_unit_test(test_lmdbwalk__agrees_with_lmdb),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
