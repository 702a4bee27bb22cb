/* gen_record_seeds.c: writes the seed inputs of fuzz_store_records and
 * fuzz_lmdb_walk: the store, state, text and document records of small real
 * stores, read raw from their LMDB, and the stores' data.mdb files. Not a
 * test; run by hand to refresh the seeds:
 *   gen_record_seeds <source>/tests/fuzz/corpus
 * (writes corpus/store_records/seed-* and corpus/lmdb_walk/seed-*). */
#include "simstore.h"
#include "lmdb/env.h"
#include "lmdb/records.h"

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_file(const char *dir, const char *name, const void *a, size_t alen, const void *b,
                      size_t blen)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(a, 1, alen, f);
    if (blen)
        fwrite(b, 1, blen, f);
    return fclose(f);
}

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A store of n documents (dups and metadata included); add > 0 adds a second
 * segment of that many; fp_only builds from bare fingerprints. */
static int make_store(const char *path, unsigned n, unsigned add, int fp_only, unsigned k)
{
    simstore_build_options o;
    simstore_build_options_init(&o);
    o.k = k;
    o.block_bytes = 256;
    o.threads = 1;
    o.fingerprint_only = fp_only;
    o.memory_bytes = 8u << 20;
    simstore_builder *b;
    simstore *s = NULL;
    if (simstore_build_begin(path, &o, &b))
        return -1;
    /* Documents as changes in LMDB (docs and fps; format/store.md,
     * "Document files"): built empty, then added. */
    if (!fp_only && (simstore_builder_finish(b) ||
                     simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s) ||
                     simstore_add_begin(s, &o, &b)))
        return -1;
    uint64_t shared = next();
    for (unsigned i = 0; i < n; i++) {
        uint64_t fp = i % 7 == 3 ? shared : next();
        if (fp_only) {
            if (simstore_builder_add_fp(b, fp))
                return -1;
            continue;
        }
        char id[32], meta[32];
        snprintf(id, sizeof id, "doc-%u", i);
        int ml = snprintf(meta, sizeof meta, "{\"i\":%u}", i);
        simstore_doc d = {id, strlen(id), fp, i % 3 ? NULL : meta, i % 3 ? 0 : (size_t)ml, i};
        if (simstore_builder_add(b, &d))
            return -1;
    }
    if (simstore_builder_finish(b))
        return -1;
    simstore_close(s);
    s = NULL;
    if (!add)
        return 0;
    if (simstore_open(path, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, &s) ||
        simstore_add_begin(s, &o, &b))
        return -1;
    for (unsigned i = 0; i < add; i++) {
        char id[32];
        snprintf(id, sizeof id, "add-%u", i);
        simstore_doc d = {id, strlen(id), i % 5 ? next() : shared, NULL, 0, i};
        if (fp_only ? simstore_builder_add_fp(b, d.fp) : simstore_builder_add(b, &d))
            return -1;
    }
    int rc = simstore_builder_finish(b);
    simstore_close(s);
    return rc;
}

static int dump_records(const char *store, const char *out, const char *tag)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta, docs;
    if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 4) ||
        mdb_env_open(env, store, MDB_RDONLY, 0644) || mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) ||
        mdb_dbi_open(txn, "meta", 0, &meta) || mdb_dbi_open(txn, "docs", 0, &docs))
        return -1;
    static const char *const names[] = {"store", "state", "text"};
    for (int i = 0; i < 3; i++) {
        MDB_val key = {strlen(names[i]), (void *)names[i]}, val;
        if (mdb_get(txn, meta, &key, &val))
            continue;
        uint8_t sel = (uint8_t)i;
        if (i == 1) {
            /* The state decoder wants the design's table count: from the
             * first segment entry (offset 48 + 24), when there is one. */
            uint32_t tables = val.mv_size >= 80 ? *((const uint8_t *)val.mv_data + 72) : 0;
            sel = (uint8_t)(1 | (tables << 2));
        }
        char name[64];
        snprintf(name, sizeof name, "seed-%s-%s", tag, names[i]);
        if (write_file(out, name, &sel, 1, val.mv_data, val.mv_size))
            return -1;
    }
    MDB_cursor *c;
    if (mdb_cursor_open(txn, docs, &c))
        return -1;
    MDB_val key, val;
    int j = 0;
    for (int rc = mdb_cursor_get(c, &key, &val, MDB_FIRST); rc == 0 && j < 4;
         rc = mdb_cursor_get(c, &key, &val, MDB_NEXT), j++) {
        uint8_t head[2 + 255];
        head[0] = 3;
        head[1] = (uint8_t)key.mv_size;
        memcpy(head + 2, key.mv_data, key.mv_size);
        char name[64];
        snprintf(name, sizeof name, "seed-%s-doc%d", tag, j);
        if (write_file(out, name, head, 2 + key.mv_size, val.mv_data, val.mv_size))
            return -1;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return 0;
}

static int copy_data_file(const char *store, const char *out, const char *tag)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/data.mdb", store);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    char name[64];
    snprintf(name, sizeof name, "seed-%s", tag);
    return write_file(out, name, buf, n, NULL, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    /* The seeds are LMDB's records and pages: stores whose documents are
     * changes in LMDB (make_store). */
    char tmp[] = "/tmp/simstore-seeds-XXXXXX";
    if (!mkdtemp(tmp))
        return 1;
    char recs[2048], walk[2048];
    snprintf(recs, sizeof recs, "%s/store_records", argv[1]);
    snprintf(walk, sizeof walk, "%s/lmdb_walk", argv[1]);
    mkdir(recs, 0755);
    mkdir(walk, 0755);
    struct {
        const char *tag;
        unsigned n, add, k;
        int fp_only;
    } stores[] = {
        {"docs", 60, 0, 3, 0},    {"two-segments", 80, 30, 3, 0},
        {"fponly", 50, 10, 2, 1}, {"k0", 10, 0, 0, 0},
        {"k7", 20, 0, 7, 0},
    };
    for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", tmp, stores[i].tag);
        if (make_store(path, stores[i].n, stores[i].add, stores[i].fp_only, stores[i].k) ||
            dump_records(path, recs, stores[i].tag)) {
            fprintf(stderr, "%s: %s\n", stores[i].tag, simstore_last_error());
            return 1;
        }
        if (i < 3 && copy_data_file(path, walk, stores[i].tag))
            return 1;
    }
    /* A tombstone, the docs value of a deleted document of a document file. */
    static const char tid[] = "doc-7";
    uint8_t head[2 + sizeof tid - 1] = {3, (uint8_t)(sizeof tid - 1)};
    memcpy(head + 2, tid, sizeof tid - 1);
    uint8_t t[SIMS_DOC_RECORD_OVERHEAD];
    sims_doc_tombstone_encode((const uint8_t *)tid, sizeof tid - 1, 0x0123456789abcdefULL, t,
                              sizeof t);
    if (write_file(recs, "seed-tombstone", head, sizeof head, t, sizeof t))
        return 1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : 1;
}
