/* lmdbwalk.c: the LMDB data-file validator of lmdbwalk.h. The layout below is
 * LMDB 0.9's (mdb.c: MDB_page, MDB_node, MDB_db, MDB_meta) on 64-bit
 * little-endian hosts; it is read through le_load* helpers, never by casting
 * structs over the file. */
#include "lmdb/lmdbwalk.h"

#include "common/bytes.h"
#include "common/error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- LMDB 0.9 layout ------------------------------------------------------- */

#define PAGE_HEADER 16u /* pgno u64, pad u16, flags u16, lower u16, upper u16 */
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define P_OVERFLOW 0x04u
#define P_META 0x08u
#define P_DIRTY 0x10u
#define P_LEAF2 0x20u
#define P_SUBP 0x40u

#define NODE_HEADER 8u /* lo u16, hi u16, flags u16, ksize u16 */
#define F_BIGDATA 0x01u
#define F_SUBDATA 0x02u
#define F_DUPDATA 0x04u

#define DB_RECORD_BYTES 48u /* pad u32, flags u16, depth u16, 4 x u64, root u64 */
#define DB_FLAG_DUPSORT 0x04u
#define DB_FLAG_INTEGERKEY 0x08u

#define META_MAGIC 0xBEEFC0DEu
#define META_VERSION 1u
#define META_AT PAGE_HEADER     /* MDB_meta after the page header */
#define META_DBS (META_AT + 24) /* magic, version, address, mapsize */
#define META_LAST_PG (META_DBS + 2 * DB_RECORD_BYTES)
#define META_TXNID (META_LAST_PG + 8)
#define META_END (META_TXNID + 8)

#define P_INVALID UINT64_MAX
#define MAX_DEPTH 32u      /* LMDB's CURSOR_STACK */
#define MAX_KEY_BYTES 511u /* LMDB's default MDB_MAXKEYSIZE */
#define EVEN(n) (((n) + 1u) & ~(uint64_t)1u)

/* ---- the walker -------------------------------------------------------------- */

typedef enum kind { K_FREE, K_MAIN, K_META, K_DOCS, K_FPS, K_DUP, K_HEADER } kind;
static const char *const kind_names[] = {"free", "main", "meta", "docs", "fps", "fps", NULL};
static const char *const kind_prefix[] = {"free list: ",
                                          "main database: ",
                                          "meta database: ",
                                          "docs database: ",
                                          "fps database: ",
                                          "fps database, duplicate sub-database: ",
                                          ""};
/* The named databases (SIMS_LMDB_META on) by their keys in the main
 * database, and the kind of tree each is; pfps follows the rules of fps. */
static const char *const db_names[SIMS_LMDB_DB_COUNT] = {NULL, NULL, "meta", "docs", "fps", "pfps"};
static const kind db_kinds[SIMS_LMDB_DB_COUNT] = {K_FREE, K_MAIN, K_META, K_DOCS, K_FPS, K_FPS};

typedef struct tree {
    kind k;
    uint64_t depth;                                 /* from the record */
    uint64_t branch, leaf, overflow, entries, keys; /* walked */
} tree;

typedef struct meta_view {
    uint64_t pgno;
    uint32_t page_bytes;
    uint16_t env_flags;
    const uint8_t *dbs; /* two 48-byte records: free, main (in `copy`) */
    uint64_t last_pg;
    uint64_t txnid;
    int valid; /* header checks passed */
    /* The fields a commit rewrites (records, last page, transaction id),
     * copied: LMDB rewrites a meta page in place (commit t + 2 reuses commit
     * t's page) while others read the file, so the walk must not read them
     * through the mapping twice (test_concurrency). */
    uint8_t copy[META_END - META_DBS];
    int unstable; /* the page changed while it was copied */
} meta_view;

/* A named database's record as the main database holds it. */
typedef struct named_db {
    int present;
    uint8_t rec[DB_RECORD_BYTES]; /* copied from the main database's leaf */
    uint64_t pgno, off, index;    /* where: page, byte offset, node */
} named_db;

typedef struct walker {
    const uint8_t *data;
    uint64_t size;
    uint32_t psize;
    uint64_t file_pages;
    uint64_t last_pg;
    uint64_t txnid;
    uint64_t meta_pgno; /* the meta page whose snapshot is walked */
    uint64_t nbits;     /* bitmap size: last_pg + 1 */
    uint8_t *used;      /* pages reached from the trees */
    uint8_t *freed;     /* pages listed in the free list */
    int light;          /* walking the other meta's free list: findings are warnings */
    uint64_t max_free_key;
    int have_free_key;
    uint32_t *scratch; /* node extents of one page, for the tiling check */
    sims_lmdb_problem_fn fn;
    void *ctx;
    int stopped; /* the callback said stop, or the first error without fn */
    int stop_rc;
    uint64_t errors, warnings;
    char first_error[512];
    int seen_db[SIMS_LMDB_DB_COUNT];
    int fps_slot; /* the summary slot of the fps-like tree being walked:
                     SIMS_LMDB_FPS or SIMS_LMDB_PFPS (same rules) */
    sims_lmdb_summary *sum;
    uint64_t pages_seen; /* pages read (claimed), for the tests' counter */
    int shallow;         /* the main database only: record the named
                            databases' records instead of walking them */
    named_db named[SIMS_LMDB_DB_COUNT];
} walker;

SIMS_PRINTF(6, 7)
static void report(walker *w, int warning, kind k, uint64_t pgno, uint64_t in_page, const char *fmt,
                   ...)
{
    if (w->stopped)
        return;
    if (w->light)
        warning = 1;
    char what[384], msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    uint64_t offset = SIMS_LMDB_NONE;
    if (pgno != SIMS_LMDB_NONE) {
        offset = pgno * w->psize + (in_page == SIMS_LMDB_NONE ? 0 : in_page);
        snprintf(msg, sizeof msg, "data.mdb page %" PRIu64 " (byte offset %" PRIu64 "): %s%s%s",
                 pgno, offset, w->light ? "older snapshot: " : "", kind_prefix[k], what);
    } else {
        snprintf(msg, sizeof msg, "data.mdb: %s%s", w->light ? "older snapshot: " : "", what);
    }
    if (warning)
        w->warnings++;
    else {
        if (!w->errors)
            snprintf(w->first_error, sizeof w->first_error, "%s", msg);
        w->errors++;
    }
    if (w->fn) {
        sims_lmdb_problem p = {warning, pgno, offset, kind_names[k], msg};
        int rc = w->fn(w->ctx, &p);
        if (rc) {
            w->stopped = 1;
            w->stop_rc = rc;
        }
    } else if (!warning) {
        w->stopped = 1;
    }
}

static int bit_get(const uint8_t *map, uint64_t i)
{
    return (map[i >> 3] >> (i & 7)) & 1;
}

static void bit_set(uint8_t *map, uint64_t i)
{
    map[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static const uint8_t *page_at(const walker *w, uint64_t pgno)
{
    return w->data + pgno * w->psize;
}

/* LMDB's default comparison (mdb_cmp_memn): bytes, then length; the sign
 * is what counts. Eight bytes at a time, inline: keys here are short (8-byte
 * fingerprints, ids of a few bytes) and a call to memcmp costs more than
 * comparing them. */
static int cmp_memn(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x = be_load64(a + i), y = be_load64(b + i);
        if (x != y)
            return x < y ? -1 : 1;
    }
    for (; i < n; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return alen < blen ? -1 : alen > blen;
}

/* The free list's keys are native size_t transaction ids (MDB_INTEGERKEY). */
static int cmp_keys(kind k, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    if (k == K_FREE && alen == 8 && blen == 8) {
        uint64_t x = le_load64(a), y = le_load64(b);
        return (x > y) - (x < y);
    }
    return cmp_memn(a, alen, b, blen);
}

/* A node's data size (lo | hi << 16), and where page's node i starts. */
static uint64_t node_dsize(const uint8_t *node)
{
    return (uint64_t)le_load16(node) | (uint64_t)le_load16(node + 2) << 16;
}

static uint16_t node_ptr(const uint8_t *page, uint64_t i)
{
    return le_load16(page + PAGE_HEADER + 2 * i);
}

/* Whether page pgno, named as `what` by page from_pgno, lies outside the
 * data pages: reported when it does. */
static int page_outside(walker *w, kind k, uint64_t pgno, uint64_t from_pgno, const char *what)
{
    if (pgno >= 2 && pgno < w->file_pages && pgno <= w->last_pg)
        return 0;
    report(w, 0, k, from_pgno, SIMS_LMDB_NONE,
           "%s page number %" PRIu64 " is outside the data pages (2..%" PRIu64 ")", what, pgno,
           (w->file_pages - 1 < w->last_pg ? w->file_pages - 1 : w->last_pg));
    return 1;
}

/* Claim page pgno for a tree: inside the file, not beyond the last page, not
 * reached before. Returns 0 when the page may be read. */
static int claim_page(walker *w, kind k, uint64_t pgno, uint64_t from_pgno, const char *what)
{
    if (page_outside(w, k, pgno, from_pgno, what))
        return -1;
    if (bit_get(w->used, pgno)) {
        report(w, 0, k, from_pgno, SIMS_LMDB_NONE,
               "%s page %" PRIu64 " is reached twice (a cycle or a shared page)", what, pgno);
        return -1;
    }
    bit_set(w->used, pgno);
    w->pages_seen++;
    return 0;
}

/* The first page of the overflow run at pgno holding dsize bytes: its own
 * number, its type, a run that fits the file. Returns the run's length in
 * pages, or 0 after reporting. */
static uint64_t check_overflow(walker *w, kind k, uint64_t pgno, uint64_t dsize)
{
    const uint8_t *p = page_at(w, pgno);
    uint64_t pages = le_load32(p + 12);
    uint64_t need = (PAGE_HEADER - 1 + dsize) / w->psize + 1;
    if (le_load64(p) != pgno) {
        report(w, 0, k, pgno, 0, "overflow page records page number %" PRIu64, le_load64(p));
        return 0;
    }
    if (le_load16(p + 10) != P_OVERFLOW) {
        report(w, 0, k, pgno, 10, "overflow page has flags 0x%x", le_load16(p + 10));
        return 0;
    }
    if (pages < need || pages > w->file_pages - pgno || pgno + pages - 1 > w->last_pg) {
        report(w, 0, k, pgno, 12,
               "overflow run of %" PRIu64 " pages (needs %" PRIu64 " for %" PRIu64
               " bytes) does not fit the file",
               pages, need, dsize);
        return 0;
    }
    return pages;
}

/* Overflow run of a F_BIGDATA node: returns its data, or NULL. */
static const uint8_t *overflow_data(walker *w, tree *t, uint64_t from_pgno, uint64_t pgno,
                                    uint64_t dsize)
{
    if (claim_page(w, t->k, pgno, from_pgno, "overflow"))
        return NULL;
    uint64_t pages = check_overflow(w, t->k, pgno, dsize);
    if (!pages)
        return NULL;
    for (uint64_t i = 1; i < pages; i++) {
        if (bit_get(w->used, pgno + i)) {
            report(w, 0, t->k, pgno, 12, "overflow run overlaps page %" PRIu64, pgno + i);
            return NULL;
        }
        bit_set(w->used, pgno + i);
        w->pages_seen++;
    }
    t->overflow += pages;
    return page_at(w, pgno) + PAGE_HEADER;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Sort a page's node extents ascending. LMDB places each node it adds
 * below the ones before, and rebuilds a page in key order when it splits
 * one, so the extents in node order are usually descending (or ascending):
 * such an array is reversed (or kept), the same order qsort would give,
 * in one pass; any other goes to qsort. */
static void sort_extents(uint32_t *x, size_t n)
{
    int ascending = 1, descending = 1;
    for (size_t i = 1; i < n; i++) {
        ascending &= x[i - 1] <= x[i];
        descending &= x[i - 1] >= x[i];
    }
    if (ascending)
        return;
    if (!descending) {
        qsort(x, n, sizeof *x, cmp_u32);
        return;
    }
    for (size_t i = 0, j = n - 1; i < j; i++, j--) {
        uint32_t t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

/* Geometry of the nodes of a (sub-)page occupying base[0, limit): bounds,
 * node extents, exact tiling of [upper, limit). leaf selects leaf node
 * sizes. Returns the node count, or -1 after reporting. */
static int64_t check_nodes(walker *w, kind k, uint64_t pgno, uint64_t base_off, const uint8_t *base,
                           uint64_t limit, int leaf, const char *what)
{
    uint16_t lower = le_load16(base + 12), upper = le_load16(base + 14);
    if (lower < PAGE_HEADER || lower > upper || upper > limit || (lower & 1)) {
        report(w, 0, k, pgno, base_off + 12,
               "%s: free-space bounds lower %u, upper %u outside %u..%" PRIu64, what, lower, upper,
               PAGE_HEADER, limit);
        return -1;
    }
    uint64_t n = (uint64_t)(lower - PAGE_HEADER) / 2;
    if (n == 0) {
        report(w, 0, k, pgno, base_off + 12, "%s holds no nodes", what);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint16_t ptr = node_ptr(base, i);
        if (ptr < upper || (ptr & 1) || (uint64_t)ptr + NODE_HEADER > limit) {
            report(w, 0, k, pgno, base_off + PAGE_HEADER + 2 * i,
                   "%s: node %" PRIu64 " at offset %u is outside the node area %u..%" PRIu64, what,
                   i, ptr, upper, limit);
            return -1;
        }
        const uint8_t *node = base + ptr;
        uint64_t ksize = le_load16(node + 6);
        uint64_t size = NODE_HEADER + ksize;
        if (leaf)
            size += (le_load16(node + 4) & F_BIGDATA) ? 8 : node_dsize(node);
        size = EVEN(size);
        if (size > limit - ptr) {
            report(w, 0, k, pgno, base_off + ptr,
                   "%s: node %" PRIu64 " of %" PRIu64 " bytes runs past the end (%" PRIu64 ")",
                   what, i, size, limit);
            return -1;
        }
        w->scratch[i] = (uint32_t)ptr << 16 | (uint32_t)(size - 1);
    }
    /* LMDB keeps nodes packed against the end (mdb_node_del moves the rest
     * up): the extents must tile [upper, limit) exactly. A dropped or extra
     * pointer, or a changed size, breaks the tiling. */
    sort_extents(w->scratch, (size_t)n);
    uint64_t at = upper;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t ptr = w->scratch[i] >> 16, size = (w->scratch[i] & 0xFFFF) + 1;
        if (ptr != at) {
            report(w, 0, k, pgno, base_off + (ptr < at ? ptr : at),
                   "%s: nodes do not tile the node area (%s at offset %" PRIu64 ")", what,
                   ptr < at ? "overlap" : "gap", ptr < at ? ptr : at);
            return -1;
        }
        at = ptr + size;
    }
    if (at != limit) {
        report(w, 0, k, pgno, base_off + at,
               "%s: nodes end at offset %" PRIu64 ", not at the end (%" PRIu64 ")", what, at,
               limit);
        return -1;
    }
    return (int64_t)n;
}

static int key_size_ok(kind k, uint64_t ksize)
{
    switch (k) {
    case K_FREE:
    case K_FPS: return ksize == 8;
    default: return ksize >= 1 && ksize <= MAX_KEY_BYTES;
    }
}

static void walk_tree(walker *w, kind k, const uint8_t *rec, uint64_t rec_pgno, uint64_t rec_off,
                      tree *out);

/* A duplicate sub-page (F_DUPDATA without F_SUBDATA) of `size` bytes at
 * node data `sp` (byte offset sp_off in page pgno). Returns its count. */
static uint64_t walk_subpage(walker *w, uint64_t pgno, uint64_t sp_off, const uint8_t *sp,
                             uint64_t size)
{
    if (size < PAGE_HEADER || size > w->psize) {
        report(w, 0, K_FPS, pgno, sp_off, "duplicate sub-page of %" PRIu64 " bytes", size);
        return 0;
    }
    uint16_t flags = le_load16(sp + 10);
    if ((flags & (uint16_t)~P_DIRTY) != (P_LEAF | P_SUBP)) {
        report(w, 0, K_FPS, pgno, sp_off + 10, "duplicate sub-page has flags 0x%x", flags);
        return 0;
    }
    int64_t n = check_nodes(w, K_FPS, pgno, sp_off, sp, size, 1, "duplicate sub-page");
    if (n < 0)
        return 0;
    const uint8_t *prev = NULL;
    uint64_t prev_len = 0;
    for (int64_t i = 0; i < n; i++) {
        uint16_t ptr = node_ptr(sp, (uint64_t)i);
        const uint8_t *node = sp + ptr;
        uint64_t ksize = le_load16(node + 6);
        if (le_load16(node + 4) != 0 || le_load16(node) != 0 || le_load16(node + 2) != 0) {
            report(w, 0, K_FPS, pgno, sp_off + ptr, "duplicate %" PRId64 " has flags or data", i);
            return 0;
        }
        if (!key_size_ok(K_DUP, ksize)) {
            report(w, 0, K_FPS, pgno, sp_off + ptr,
                   "duplicate %" PRId64 " is an id of %" PRIu64 " bytes", i, ksize);
            return 0;
        }
        if (prev && cmp_memn(prev, prev_len, node + NODE_HEADER, ksize) >= 0) {
            report(w, 0, K_FPS, pgno, sp_off + ptr, "duplicate ids out of order at %" PRId64, i);
            return 0;
        }
        prev = node + NODE_HEADER;
        prev_len = ksize;
    }
    return (uint64_t)n;
}

/* A free-list record: an IDL, count then page numbers. */
static void check_idl(walker *w, uint64_t pgno, uint64_t off, const uint8_t *v, uint64_t size,
                      uint64_t key)
{
    if (size < 8 || size % 8) {
        report(w, 0, K_FREE, pgno, off,
               "record %" PRIu64 " of %" PRIu64 " bytes is not a page list", key, size);
        return;
    }
    uint64_t count = le_load64(v);
    if (count > size / 8 - 1) {
        report(w, 0, K_FREE, pgno, off,
               "record %" PRIu64 " lists %" PRIu64 " pages in %" PRIu64 " slots", key, count,
               size / 8 - 1);
        return;
    }
    if (w->light)
        return; /* the older snapshot's list is not ours to account */
    for (uint64_t i = 1; i <= count; i++) {
        uint64_t fp = le_load64(v + 8 * i);
        if (fp < 2 || fp > w->last_pg) {
            report(w, 0, K_FREE, pgno, off,
                   "record %" PRIu64 " lists page %" PRIu64 " beyond the last page %" PRIu64, key,
                   fp, w->last_pg);
            return;
        }
        if (bit_get(w->freed, fp)) {
            report(w, 0, K_FREE, pgno, off, "page %" PRIu64 " is listed free twice", fp);
            return;
        }
        bit_set(w->freed, fp);
    }
}

/* The rules of leaf node i (at ptr of page pgno) of a tree of kind k that
 * need nothing outside the page: its flags for the database, an fps id's
 * size, a duplicate sub-page (walked here: *count gets its duplicates, else
 * 1), a duplicate sub-database record's size, a duplicate's empty data.
 * Overflow runs and duplicate sub-databases are the caller's to follow.
 * Returns -1 when the node is neither to be counted nor followed. */
static int leaf_rules(walker *w, kind k, uint64_t pgno, const uint8_t *page, uint16_t ptr,
                      int64_t i, uint64_t *count)
{
    const uint8_t *node = page + ptr;
    uint16_t flags = le_load16(node + 4);
    uint64_t ksize = le_load16(node + 6);
    uint64_t dsize = node_dsize(node);
    unsigned allowed;
    switch (k) {
    case K_FREE:
    case K_META:
    case K_DOCS: allowed = F_BIGDATA; break;
    case K_MAIN: allowed = F_SUBDATA; break;
    case K_FPS: allowed = F_DUPDATA | F_SUBDATA; break;
    default: allowed = 0; break;
    }
    *count = 1;
    if ((flags & ~allowed) || (k == K_MAIN && flags != F_SUBDATA) ||
        (k == K_FPS && flags == F_SUBDATA)) {
        report(w, 0, k, pgno, ptr + 4u, "node %" PRId64 " has flags 0x%x", i, flags);
        return -1;
    }
    if (k == K_FPS && !(flags & F_DUPDATA)) {
        if (dsize < 1 || dsize > MAX_KEY_BYTES)
            report(w, 0, K_FPS, pgno, ptr, "node %" PRId64 " holds an id of %" PRIu64 " bytes", i,
                   dsize);
    } else if (k == K_FPS && !(flags & F_SUBDATA)) {
        *count =
            walk_subpage(w, pgno, ptr + NODE_HEADER + ksize, node + NODE_HEADER + ksize, dsize);
    } else if (k == K_FPS && dsize != DB_RECORD_BYTES) {
        report(w, 0, K_FPS, pgno, ptr, "duplicate sub-database record of %" PRIu64 " bytes", dsize);
        return -1;
    } else if (k == K_DUP && dsize) {
        report(w, 0, k, pgno, ptr, "duplicate %" PRId64 " has flags or data", i);
    }
    return 0;
}

/* One leaf node of tree t. */
static void walk_leaf_node(walker *w, tree *t, uint64_t pgno, const uint8_t *page, uint16_t ptr,
                           int64_t i)
{
    const uint8_t *node = page + ptr;
    uint16_t flags = le_load16(node + 4);
    uint64_t ksize = le_load16(node + 6);
    uint64_t dsize = node_dsize(node);
    const uint8_t *key = node + NODE_HEADER;
    const uint8_t *val = key + ksize;
    uint64_t val_off = ptr + NODE_HEADER + ksize;
    uint64_t val_file_off = pgno * w->psize + val_off;
    uint64_t count;
    if (leaf_rules(w, t->k, pgno, page, ptr, i, &count))
        return;
    if (flags & F_BIGDATA) {
        uint64_t ov = le_load64(val);
        val = overflow_data(w, t, pgno, ov, dsize);
        if (!val)
            return;
        val_off = SIMS_LMDB_NONE;
        val_file_off = ov * w->psize + PAGE_HEADER;
    }
    switch (t->k) {
    case K_FREE: {
        uint64_t txn = le_load64(key);
        if (!w->light && txn > w->txnid)
            report(w, 0, K_FREE, pgno, ptr + NODE_HEADER,
                   "record of transaction %" PRIu64 " is newer than the snapshot's %" PRIu64, txn,
                   w->txnid);
        if (!w->have_free_key || txn > w->max_free_key)
            w->max_free_key = txn;
        w->have_free_key = 1;
        check_idl(w, pgno, ptr, val, dsize, txn);
        t->entries++;
        break;
    }
    case K_MAIN: {
        int which = -1;
        for (int d = SIMS_LMDB_META; d < SIMS_LMDB_DB_COUNT; d++)
            if (ksize == strlen(db_names[d]) && memcmp(key, db_names[d], ksize) == 0)
                which = d;
        if (which < 0) {
            report(w, 0, K_MAIN, pgno, ptr + NODE_HEADER, "unexpected database '%.*s'",
                   (int)(ksize < 64 ? ksize : 64), (const char *)key);
            return;
        }
        if (dsize != DB_RECORD_BYTES) {
            report(w, 0, K_MAIN, pgno, ptr, "record of database '%.*s' is %" PRIu64 " bytes",
                   (int)ksize, (const char *)key, dsize);
            return;
        }
        t->entries++;
        w->seen_db[which] = 1;
        w->fps_slot = which == SIMS_LMDB_PFPS ? SIMS_LMDB_PFPS : SIMS_LMDB_FPS;
        if (w->shallow) {
            w->named[which].present = 1;
            memcpy(w->named[which].rec, val, DB_RECORD_BYTES);
            w->named[which].pgno = pgno;
            w->named[which].off = val_off;
            w->named[which].index = (uint64_t)i;
            break;
        }
        tree sub;
        walk_tree(w, db_kinds[which], val, pgno, val_off, &sub);
        break;
    }
    case K_META:
        if (!w->light && ksize == 5 && memcmp(key, "store", 5) == 0)
            w->sum->store_record_offset = val_file_off;
        t->entries++;
        break;
    case K_FPS:
        if ((flags & (F_DUPDATA | F_SUBDATA)) == (F_DUPDATA | F_SUBDATA)) {
            tree sub;
            walk_tree(w, K_DUP, val, pgno, val_off, &sub);
            count = sub.entries;
        }
        t->entries += count;
        break;
    default: t->entries += count; break; /* docs, and a duplicate: one */
    }
}

/* Keys bounding a subtree: [lo, hi), NULL for no bound. */
typedef struct key_range {
    const uint8_t *lo, *hi;
    uint64_t lo_len, hi_len;
} key_range;

/* A tree page's header at `level` (1: the root) of a tree of the given
 * depth: its own number, its type for the level, its nodes (check_nodes).
 * Returns the node count, or -1 after reporting. */
static int64_t check_page_head(walker *w, kind k, uint64_t pgno, uint64_t level, uint64_t depth)
{
    const uint8_t *page = page_at(w, pgno);
    uint16_t flags = le_load16(page + 10);
    int leaf = level == depth;
    if (le_load64(page) != pgno) {
        report(w, 0, k, pgno, 0, "page records page number %" PRIu64, le_load64(page));
        return -1;
    }
    if (flags != (leaf ? P_LEAF : P_BRANCH)) {
        report(w, 0, k, pgno, 10, "%s page at depth %" PRIu64 " of %" PRIu64 " has flags 0x%x",
               leaf ? "leaf" : "branch", level, depth, flags);
        return -1;
    }
    return check_nodes(w, k, pgno, 0, page, w->psize, leaf, leaf ? "leaf" : "branch");
}

/* The n keys of page pgno: sizes, strictly increasing, inside r. A branch
 * page's first key is not used by LMDB (it may hold anything) and is
 * skipped. With `rules`, each leaf node's leaf_rules in the same pass.
 * Returns 0, or -1 after reporting. */
static int check_keys(walker *w, kind k, uint64_t pgno, int64_t n, int leaf, const key_range *r,
                      int rules)
{
    const uint8_t *page = page_at(w, pgno);
    const uint8_t *prev = NULL;
    uint64_t prev_len = 0;
    for (int64_t i = leaf ? 0 : 1; i < n; i++) {
        uint16_t ptr = node_ptr(page, (uint64_t)i);
        const uint8_t *key = page + ptr + NODE_HEADER;
        uint64_t ksize = le_load16(page + ptr + 6);
        if (!key_size_ok(k, ksize)) {
            report(w, 0, k, pgno, ptr + 6u, "key %" PRId64 " of %" PRIu64 " bytes", i, ksize);
            return -1;
        }
        if ((prev && cmp_keys(k, prev, prev_len, key, ksize) >= 0) ||
            (!prev && r->lo && cmp_keys(k, r->lo, r->lo_len, key, ksize) > 0) ||
            (r->hi && cmp_keys(k, key, ksize, r->hi, r->hi_len) >= 0)) {
            report(w, 0, k, pgno, ptr + NODE_HEADER, "key %" PRId64 " is out of order (against %s)",
                   i,
                   prev && cmp_keys(k, prev, prev_len, key, ksize) >= 0
                       ? "the key before it"
                       : "the parent page's separators");
            return -1;
        }
        if (rules && leaf) {
            uint64_t errors = w->errors, count;
            leaf_rules(w, k, pgno, page, ptr, i, &count);
            if (w->errors != errors)
                return -1;
        }
        prev = key;
        prev_len = ksize;
    }
    return 0;
}

/* Node i of a branch page of n nodes whose keys lie in r: its child's page
 * number, and the child's keys' range in *c. */
static uint64_t branch_child(const uint8_t *page, int64_t n, int64_t i, const key_range *r,
                             key_range *c)
{
    const uint8_t *node = page + node_ptr(page, (uint64_t)i);
    *c = *r;
    if (i > 0) {
        c->lo = node + NODE_HEADER;
        c->lo_len = le_load16(node + 6);
    }
    if (i + 1 < n) {
        const uint8_t *next = page + node_ptr(page, (uint64_t)i + 1);
        c->hi = next + NODE_HEADER;
        c->hi_len = le_load16(next + 6);
    }
    return node_dsize(node) | (uint64_t)le_load16(node + 4) << 32;
}

/* Walk the subtree at pgno (level 1 = root) with keys in r. */
static void walk_page(walker *w, tree *t, uint64_t pgno, uint64_t level, uint64_t from_pgno,
                      const key_range *r)
{
    if (w->stopped || claim_page(w, t->k, pgno, from_pgno, level == 1 ? "root" : "child"))
        return;
    int leaf = level == t->depth;
    int64_t n = check_page_head(w, t->k, pgno, level, t->depth);
    if (n < 0)
        return;
    if (leaf)
        t->leaf++;
    else
        t->branch++;
    if (check_keys(w, t->k, pgno, n, leaf, r, 0))
        return;
    const uint8_t *page = page_at(w, pgno);
    for (int64_t i = 0; i < n && !w->stopped; i++) {
        if (leaf) {
            walk_leaf_node(w, t, pgno, page, node_ptr(page, (uint64_t)i), i);
            t->keys++;
            continue;
        }
        if (level >= t->depth || level >= MAX_DEPTH)
            return;
        key_range c;
        uint64_t child = branch_child(page, n, i, r, &c);
        walk_page(w, t, child, level + 1, pgno, &c);
    }
}

/* The header of database record rec (at byte rec_off of page rec_pgno):
 * flags for kind k, an empty tree's zero counts, the depth. Returns 1 with
 * *root and *depth for a tree with pages, 0 for an empty one, -1 after
 * reporting. */
static int check_record(walker *w, kind k, const uint8_t *rec, uint64_t at, uint64_t off,
                        uint64_t *root, uint64_t *depth)
{
    uint32_t pad = le_load32(rec);
    uint16_t flags = le_load16(rec + 4);
    *depth = le_load16(rec + 6);
    *root = le_load64(rec + 40);
    uint16_t want_flags = k == K_FPS ? DB_FLAG_DUPSORT : 0;
    if (k != K_FREE && (pad != 0 || flags != want_flags)) {
        report(w, 0, k, at, off, "database record has flags 0x%x (expected 0x%x), pad %u", flags,
               want_flags, pad);
        return -1;
    }
    if (*root == P_INVALID) {
        uint64_t entries = le_load64(rec + 32);
        if (*depth || le_load64(rec + 8) || le_load64(rec + 16) || le_load64(rec + 24) || entries) {
            report(w, 0, k, at, off,
                   "empty database record with depth %" PRIu64 " and %" PRIu64 " entries", *depth,
                   entries);
            return -1;
        }
        return 0;
    }
    if (*depth < 1 || *depth > MAX_DEPTH) {
        report(w, 0, k, at, off, "database depth %" PRIu64 " outside 1..%u", *depth, MAX_DEPTH);
        return -1;
    }
    return 1;
}

/* Walk the tree of database record rec (48 bytes at byte rec_off of page
 * rec_pgno; rec_pgno SIMS_LMDB_NONE for the meta page's records) and check
 * the record's counts against what was found. */
static void walk_tree(walker *w, kind k, const uint8_t *rec, uint64_t rec_pgno, uint64_t rec_off,
                      tree *t)
{
    memset(t, 0, sizeof *t);
    t->k = k;
    uint64_t branch = le_load64(rec + 8), leafp = le_load64(rec + 16);
    uint64_t overflow = le_load64(rec + 24), entries = le_load64(rec + 32);
    uint64_t at = rec_pgno, off = rec_off;
    uint64_t root, depth;
    if (check_record(w, k, rec, at, off, &root, &depth) <= 0)
        return;
    t->depth = depth;
    uint64_t errors_before = w->errors;
    key_range all = {NULL, NULL, 0, 0};
    walk_page(w, t, root, 1, at == SIMS_LMDB_NONE ? w->meta_pgno : at, &all);
    if (w->stopped || w->errors != errors_before)
        return;
    if (t->branch != branch || t->leaf != leafp || t->overflow != overflow || t->entries != entries)
        report(w, 0, k, at, off,
               "database record counts %" PRIu64 " branch, %" PRIu64 " leaf, %" PRIu64
               " overflow pages and %" PRIu64 " entries; the tree has %" PRIu64 ", %" PRIu64
               ", %" PRIu64 " and %" PRIu64,
               branch, leafp, overflow, entries, t->branch, t->leaf, t->overflow, t->entries);
    if (w->sum && k != K_DUP) {
        int slot = k == K_FREE   ? SIMS_LMDB_FREE
                   : k == K_MAIN ? SIMS_LMDB_MAIN
                   : k == K_META ? SIMS_LMDB_META
                   : k == K_DOCS ? SIMS_LMDB_DOCS
                                 : w->fps_slot;
        if (!w->light) {
            sims_lmdb_db_summary *s = &w->sum->db[slot];
            s->depth = depth;
            s->branch_pages = t->branch;
            s->leaf_pages = t->leaf;
            s->overflow_pages = t->overflow;
            s->entries = t->entries;
            s->keys = t->keys;
        }
    }
}

/* ---- meta pages ---------------------------------------------------------------- */

static void read_meta(walker *w, uint64_t i, meta_view *m)
{
    memset(m, 0, sizeof *m);
    m->pgno = i;
    const uint8_t *p = w->data + i * w->psize;
    uint8_t again[sizeof m->copy];
    memcpy(m->copy, p + META_DBS, sizeof m->copy);
    memcpy(again, p + META_DBS, sizeof again);
    m->unstable = memcmp(m->copy, again, sizeof again) != 0;
    m->dbs = m->copy;
    m->page_bytes = le_load32(m->copy);
    m->env_flags = le_load16(m->copy + 4);
    m->last_pg = le_load64(m->copy + (META_LAST_PG - META_DBS));
    m->txnid = le_load64(m->copy + (META_TXNID - META_DBS));
    if (le_load64(p) != i) {
        report(w, 0, K_HEADER, i, 0, "meta page records page number %" PRIu64, le_load64(p));
    } else if (le_load16(p + 10) != P_META) {
        report(w, 0, K_HEADER, i, 10, "meta page has flags 0x%x", le_load16(p + 10));
    } else if (le_load32(p + META_AT) != META_MAGIC) {
        report(w, 0, K_HEADER, i, META_AT, "meta page has no LMDB magic");
    } else if (le_load32(p + META_AT + 4) != META_VERSION) {
        report(w, 0, K_HEADER, i, META_AT + 4, "meta page has data version %u (this build reads 1)",
               le_load32(p + META_AT + 4));
    } else if (m->page_bytes != w->psize) {
        report(w, 0, K_HEADER, i, META_DBS, "meta page says %u-byte pages, meta page 0 says %u",
               m->page_bytes, w->psize);
    } else if (m->env_flags != DB_FLAG_INTEGERKEY) {
        /* simstore opens its environments without persistent flags (no
         * MDB_FIXEDMAP: LMDB would map at the page's stored address). */
        report(w, 0, K_HEADER, i, META_DBS + 4, "meta page has environment flags 0x%x",
               m->env_flags);
    } else if (le_load32(p + META_DBS + DB_RECORD_BYTES) != 0 ||
               le_load16(p + META_DBS + DB_RECORD_BYTES + 4) != 0) {
        report(w, 0, K_HEADER, i, META_DBS + DB_RECORD_BYTES, "main database record has flags 0x%x",
               le_load16(p + META_DBS + DB_RECORD_BYTES + 4));
    } else if (m->last_pg < 1) {
        report(w, 0, K_HEADER, i, META_LAST_PG, "meta page's last page %" PRIu64, m->last_pg);
    } else if (m->txnid && (m->txnid & 1) != i) {
        /* LMDB writes transaction t's meta to page t % 2. */
        report(w, 0, K_HEADER, i, META_TXNID,
               "meta page %" PRIu64 " holds transaction %" PRIu64
               ", which belongs on page %" PRIu64,
               i, m->txnid, m->txnid & 1);
    } else {
        m->valid = 1;
    }
}

/* ---- entry ------------------------------------------------------------------------- */

/* What a phase of walk() says besides an error code (< 0): go on to the next
 * phase, or stop here (the problem that stops it is reported). */
#define WALK_ON 0
#define WALK_STOP 1

/* Phase 1: the page size (from meta page 0, as LMDB reads it) and both meta
 * pages, which must be sound and hold consecutive transactions.
 * SIMS_ERETRY when a writer rewrote one while it was read. */
static int walk_metas(walker *w, meta_view m[2])
{
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ ||                       \
    UINTPTR_MAX != UINT64_MAX
    report(w, 0, K_HEADER, SIMS_LMDB_NONE, SIMS_LMDB_NONE,
           "cannot check LMDB files on this platform (needs 64-bit little-endian)");
    return WALK_STOP;
#endif
    if (w->size < META_END) {
        report(w, 0, K_HEADER, SIMS_LMDB_NONE, SIMS_LMDB_NONE,
               "file of %" PRIu64 " bytes is too short for a meta page", w->size);
        return WALK_STOP;
    }
    w->psize = le_load32(w->data + META_DBS);
    if (w->psize < 512 || w->psize > 32768 || (w->psize & (w->psize - 1))) {
        w->psize = 4096; /* for the message's offsets */
        report(w, 0, K_HEADER, 0, META_DBS, "meta page says %u-byte pages",
               le_load32(w->data + META_DBS));
        return WALK_STOP;
    }
    w->file_pages = w->size / w->psize;
    w->sum->page_bytes = w->psize;
    w->sum->file_pages = w->file_pages;
    if (w->file_pages < 2) {
        report(w, 0, K_HEADER, SIMS_LMDB_NONE, SIMS_LMDB_NONE,
               "file of %" PRIu64 " bytes holds fewer than the two meta pages", w->size);
        return WALK_STOP;
    }
    read_meta(w, 0, &m[0]);
    read_meta(w, 1, &m[1]);
    if (!m[0].valid || !m[1].valid)
        return WALK_STOP;
    /* Consecutive commits write alternate pages: the ids differ by one
     * (both 0 in a fresh file, or 0 and 1 after its first commit). */
    uint64_t a = m[0].txnid, b = m[1].txnid;
    if (m[0].unstable || m[1].unstable) {
        /* A writer is committing: its meta page is half written. */
        return sims_retry_or_fail(
            sims_fail(SIMSTORE_ECORRUPT, "data.mdb: a meta page changed while it was read"));
    }
    if (a + 1 != b && b + 1 != a && !(a == 0 && b == 0)) {
        /* Commits went on between the two reads (a reader descheduled
         * there can see page 0 of one and page 1 of a later one): a writer
         * moved on, not damage, when either page holds another id now. */
        if (le_load64(w->data + META_TXNID) != a || le_load64(w->data + w->psize + META_TXNID) != b)
            return sims_retry_or_fail(sims_fail(
                SIMSTORE_ECORRUPT, "data.mdb: the meta pages changed while they were read"));
        report(w, 0, K_HEADER, a > b ? 0 : 1, META_TXNID,
               "meta pages hold transactions %" PRIu64 " and %" PRIu64 ", not consecutive", a, b);
        return WALK_STOP;
    }
    return WALK_ON;
}

/* sims_lmdb_check_metas' last step: what LMDB's open reads beyond the page
 * size (checked by walk_metas) is the last page of the meta it picks (the
 * newer), which sizes its map. */
static void check_newer_last_page(walker *w, const meta_view m[2])
{
    int newer = m[1].txnid > m[0].txnid;
    if (m[newer].last_pg >= 2 * w->file_pages + 4096)
        report(w, 0, K_HEADER, (uint64_t)newer, META_LAST_PG,
               "last page %" PRIu64 " is far beyond the file's %" PRIu64 " pages", m[newer].last_pg,
               w->file_pages);
}

/* The meta page to walk: transaction txnid's, or the newer one when txnid
 * is 0. SIMS_ERETRY when neither holds txnid (a writer moved on). */
static int pick_meta(const meta_view m[2], uint64_t txnid, int *pick)
{
    if (!txnid) {
        *pick = m[1].txnid > m[0].txnid;
        return WALK_ON;
    }
    *pick = (int)(txnid & 1);
    if (m[*pick].txnid != txnid)
        return sims_retry_or_fail(sims_fail(
            SIMSTORE_ECORRUPT, "data.mdb: no meta page holds transaction %" PRIu64, txnid));
    return WALK_ON;
}

/* Phase 2: the snapshot of meta page `cur`: its free list and main database
 * (and through it the store's databases), marking the pages reached. */
static int walk_snapshot(walker *w, const meta_view *cur)
{
    w->txnid = cur->txnid;
    w->meta_pgno = cur->pgno;
    w->last_pg = cur->last_pg;
    w->sum->txnid = w->txnid;
    w->sum->last_pgno = w->last_pg;
    /* Free pages past the end of the file are legal (LMDB never wrote them),
     * but not without bound: that is a damaged last page number. */
    if (w->last_pg >= 2 * w->file_pages + 4096) {
        report(w, 0, K_HEADER, cur->pgno, META_LAST_PG,
               "last page %" PRIu64 " is far beyond the file's %" PRIu64 " pages", w->last_pg,
               w->file_pages);
        return WALK_STOP;
    }
    w->nbits = w->last_pg + 1;
    w->used = calloc((size_t)(w->nbits + 7) / 8, 1);
    w->freed = calloc((size_t)(w->nbits + 7) / 8, 1);
    w->scratch = malloc(((size_t)w->psize / 2 + 1) * sizeof *w->scratch);
    if (!w->used || !w->freed || !w->scratch)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory checking data.mdb");
    bit_set(w->used, 0);
    bit_set(w->used, 1);

    tree t;
    walk_tree(w, K_FREE, cur->dbs, SIMS_LMDB_NONE, SIMS_LMDB_NONE, &t);
    /* The newest snapshot's newest free record is its own: every commit
     * frees the pages it copied. (The first commit of a file frees none.) */
    if (!w->stopped && w->txnid >= 2 && w->max_free_key != w->txnid && !w->errors)
        report(w, 0, K_FREE, cur->pgno, META_TXNID,
               "meta page says transaction %" PRIu64
               ", but its newest free-list record is %s%" PRIu64,
               w->txnid, w->have_free_key ? "" : "absent ", w->have_free_key ? w->max_free_key : 0);
    walk_tree(w, K_MAIN, cur->dbs + DB_RECORD_BYTES, SIMS_LMDB_NONE, SIMS_LMDB_NONE, &t);
    if (!w->stopped && !w->errors) {
        for (int d = SIMS_LMDB_META; d <= SIMS_LMDB_FPS; d++)
            if (!w->seen_db[d])
                report(w, 0, K_MAIN, SIMS_LMDB_NONE, SIMS_LMDB_NONE, "the database '%s' is missing",
                       db_names[d]);
    }
    return WALK_ON;
}

/* Phase 3: page accounting, only over a structurally sound walk: no page
 * both in use and free; pages neither are leaked (a warning). */
static void account_pages(walker *w)
{
    if (w->stopped || w->errors)
        return;
    uint64_t used = 0, freed = 0, leaked = 0, first_leak = 0;
    for (uint64_t p = 0; p < w->nbits; p++) {
        int u = bit_get(w->used, p), f = bit_get(w->freed, p);
        used += (uint64_t)u;
        freed += (uint64_t)f;
        if (u && f) {
            report(w, 0, K_FREE, p, SIMS_LMDB_NONE,
                   "page is in use and also listed free (a writer would overwrite it)");
            if (w->stopped)
                break;
        } else if (!u && !f) {
            if (!leaked)
                first_leak = p;
            leaked++;
        }
    }
    w->sum->used_pages = used;
    w->sum->free_pages = freed;
    w->sum->leaked_pages = leaked;
    if (leaked)
        report(w, 1, K_FREE, first_leak, SIMS_LMDB_NONE,
               "%" PRIu64 " page(s) up to the last page %" PRIu64
               " are neither in use nor free (first: page %" PRIu64 ")",
               leaked, w->last_pg, first_leak);
}

/* Phase 4: the other meta page. Its snapshot's free list must not hold
 * records newer than its own id, else its id was rewritten (and LMDB might
 * pick the wrong snapshot). Problems in that older snapshot's pages are only
 * warnings: LMDB reads the newest snapshot. */
static int walk_older_snapshot(walker *w, const meta_view *old)
{
    if (w->stopped || old->txnid < 1)
        return WALK_ON;
    if (old->last_pg >= 2 * w->file_pages + 4096) {
        report(w, 1, K_HEADER, old->pgno, META_LAST_PG,
               "older snapshot: last page %" PRIu64 " is far beyond the file's %" PRIu64
               " pages (LMDB reads the newer snapshot; the next commit rewrites this page)",
               old->last_pg, w->file_pages);
        return WALK_ON;
    }
    /* Its own page bitmap: that snapshot may reach pages past this one's
     * last page (it may be the newer one, its id damaged). */
    uint8_t *keep_used = w->used;
    uint64_t keep_nbits = w->nbits;
    w->nbits = old->last_pg + 1;
    w->used = calloc((size_t)(w->nbits + 7) / 8, 1);
    if (!w->used) {
        w->used = keep_used;
        w->nbits = keep_nbits;
        return sims_fail(SIMSTORE_ENOMEM, "out of memory checking data.mdb");
    }
    bit_set(w->used, 0);
    bit_set(w->used, 1);
    uint64_t keep_last = w->last_pg, keep_txnid = w->txnid;
    w->last_pg = old->last_pg;
    w->txnid = old->txnid;
    w->max_free_key = 0;
    w->have_free_key = 0;
    w->light = 1;
    w->meta_pgno = old->pgno;
    tree t;
    walk_tree(w, K_FREE, old->dbs, SIMS_LMDB_NONE, SIMS_LMDB_NONE, &t);
    w->light = 0;
    /* Unless a writer has rewritten that meta page meanwhile: no reader
     * pins the older snapshot, the next commit reuses its page, and
     * old->dbs reads the page as it is now (test_concurrency: a reader
     * opening while a writer commits got a false "damaged" error). */
    uint64_t live_txnid = le_load64(w->data + old->pgno * w->psize + META_TXNID);
    if (!w->stopped && w->have_free_key && w->max_free_key > old->txnid && live_txnid == old->txnid)
        report(w, 0, K_FREE, old->pgno, META_TXNID,
               "meta page says transaction %" PRIu64 ", but its free list holds a record of "
               "transaction %" PRIu64 ": a damaged transaction id",
               old->txnid, w->max_free_key);
    w->last_pg = keep_last;
    w->txnid = keep_txnid;
    free(w->used);
    w->used = keep_used;
    w->nbits = keep_nbits;
    return WALK_ON;
}

/* Free what the walk allocated and give its result: rc when an error ended
 * it, else the callback's stop value, else SIMSTORE_ECORRUPT (with the first
 * error's message) when an error was found. */
static int walk_result(walker *w, int rc)
{
    free(w->used);
    free(w->freed);
    free(w->scratch);
    w->sum->errors = w->errors;
    w->sum->warnings = w->warnings;
    if (rc)
        return rc;
    if (w->stop_rc)
        return w->stop_rc;
    if (w->errors)
        return sims_fail(SIMSTORE_ECORRUPT, "%s", w->first_error);
    return SIMSTORE_OK;
}

/* What a walk goes through: the meta pages only, everything, or what the
 * lazy checks load (no page accounting: they see a snapshot's pages only
 * as its reads reach them). */
enum { PHASES_METAS, PHASES_ALL, PHASES_LAZY };

/* The phases of a walk of transaction txnid's snapshot (0: the newest),
 * m[*pick] its meta page. WALK_STOP, WALK_ON or an error code. */
static int walk_phases(walker *w, uint64_t txnid, int phases, meta_view m[2], int *pick)
{
    memset(m, 0, 2 * sizeof *m);
    *pick = 0;
    int rc = walk_metas(w, m);
    if (rc == WALK_ON && phases == PHASES_METAS) {
        check_newer_last_page(w, m);
        rc = WALK_STOP;
    }
    if (rc == WALK_ON)
        rc = pick_meta(m, txnid, pick);
    if (rc == WALK_ON)
        rc = walk_snapshot(w, &m[*pick]);
    if (rc == WALK_ON && phases == PHASES_ALL)
        account_pages(w);
    if (rc == WALK_ON)
        rc = walk_older_snapshot(w, &m[*pick ^ 1]);
    return rc;
}

static int walk(const uint8_t *data, uint64_t size, uint64_t txnid, sims_lmdb_problem_fn fn,
                void *ctx, sims_lmdb_summary *summary, int phases)
{
    walker w;
    memset(&w, 0, sizeof w);
    w.data = data;
    w.size = size;
    w.fn = fn;
    w.ctx = ctx;
    sims_lmdb_summary local;
    w.sum = summary ? summary : &local;
    memset(w.sum, 0, sizeof *w.sum);
    w.sum->store_record_offset = SIMS_LMDB_NONE;
    meta_view m[2];
    int pick;
    int rc = walk_phases(&w, txnid, phases, m, &pick);
    return walk_result(&w, rc == WALK_STOP ? SIMSTORE_OK : rc);
}

int sims_lmdb_walk(const uint8_t *data, uint64_t size, uint64_t txnid, sims_lmdb_problem_fn fn,
                   void *ctx, sims_lmdb_summary *summary)
{
    return walk(data, size, txnid, fn, ctx, summary, PHASES_ALL);
}

int sims_lmdb_check_metas(const uint8_t *data, uint64_t size, sims_lmdb_problem_fn fn, void *ctx)
{
    return walk(data, size, 0, fn, ctx, NULL, PHASES_METAS);
}

/* ---- checking what LMDB will read (sims_lmdb_lazy) ------------------------------- */

/* The validated pages of one snapshot: the walker's `used` bitmap says a
 * page was checked (or belongs to the free list, the main database or an
 * overflow run), and this table says from where: the page and node index
 * naming it (owner = page << 16 | index). A page reached again from its
 * owner is not checked again; from anywhere else it is a page reached
 * twice, as in the full walk. */
struct sims_lmdb_lazy {
    walker w;
    sims_lmdb_summary sum;
    int ready;   /* a snapshot is loaded */
    int fail_rc; /* its first error (kept: later reads fail the same way) */
    char fail_msg[512];
    uint64_t txnid;
    uint64_t *hkey; /* pgno + 1; 0 is an empty slot */
    uint64_t *hval;
    size_t hcap, hlen;
    uint64_t pages_before; /* pages checked in earlier snapshots */
};

/* A page on a path, and the node the path takes there. */
typedef struct lz_level {
    uint64_t pgno;
    const uint8_t *page;
    int64_t n;      /* nodes */
    int64_t idx;    /* the node taken (leaf: the lower bound of the key) */
    key_range keys; /* the page's keys' bounds */
} lz_level;

typedef struct lz_path {
    kind k;
    uint64_t depth;
    lz_level lv[MAX_DEPTH];
    int exact; /* leaf: node idx holds the key */
} lz_path;

static uint64_t lz_hash(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static int lz_owner_get(const sims_lmdb_lazy *lz, uint64_t pgno, uint64_t *owner)
{
    if (!lz->hcap)
        return 0;
    for (size_t i = (size_t)lz_hash(pgno) & (lz->hcap - 1);; i = (i + 1) & (lz->hcap - 1)) {
        if (lz->hkey[i] == 0)
            return 0;
        if (lz->hkey[i] == pgno + 1) {
            *owner = lz->hval[i];
            return 1;
        }
    }
}

static int lz_owner_put(sims_lmdb_lazy *lz, uint64_t pgno, uint64_t owner)
{
    if (2 * (lz->hlen + 1) > lz->hcap) {
        size_t cap = lz->hcap ? 2 * lz->hcap : 256;
        uint64_t *k = calloc(cap, sizeof *k), *v = calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return sims_fail(SIMSTORE_ENOMEM, "out of memory checking data.mdb");
        }
        for (size_t i = 0; i < lz->hcap; i++) {
            if (!lz->hkey[i])
                continue;
            size_t j = (size_t)lz_hash(lz->hkey[i] - 1) & (cap - 1);
            while (k[j])
                j = (j + 1) & (cap - 1);
            k[j] = lz->hkey[i];
            v[j] = lz->hval[i];
        }
        free(lz->hkey);
        free(lz->hval);
        lz->hkey = k;
        lz->hval = v;
        lz->hcap = cap;
    }
    size_t i = (size_t)lz_hash(pgno) & (lz->hcap - 1);
    while (lz->hkey[i])
        i = (i + 1) & (lz->hcap - 1);
    lz->hkey[i] = pgno + 1;
    lz->hval[i] = owner;
    lz->hlen++;
    return SIMSTORE_OK;
}

/* The error that ended this snapshot's checks, again. */
static int lz_failed(sims_lmdb_lazy *lz)
{
    if (!lz->fail_rc && lz->w.errors) {
        lz->fail_rc = SIMSTORE_ECORRUPT;
        snprintf(lz->fail_msg, sizeof lz->fail_msg, "%s", lz->w.first_error);
    }
    if (!lz->fail_rc)
        return SIMSTORE_OK;
    return sims_fail(lz->fail_rc, "%s", lz->fail_msg);
}

/* Check page pgno, named by `owner`, at `level` (1: root) of a tree of
 * kind k and the given depth, keys in r: what walk_page checks of one page,
 * with each leaf node's leaf_rules (overflow runs and duplicate
 * sub-databases are checked when read), unless this snapshot has checked it
 * already from the same owner. Fills *out. */
static int lz_visit(sims_lmdb_lazy *lz, kind k, uint64_t depth, uint64_t pgno, uint64_t owner,
                    uint64_t level, const key_range *r, lz_level *out)
{
    walker *w = &lz->w;
    uint64_t from = owner >> 16;
    if (page_outside(w, k, pgno, from, level == 1 ? "root" : "child"))
        return -1;
    const uint8_t *page = page_at(w, pgno);
    /* A page of a path is usually cold: ask for its header while the
     * owner table is read. */
    __builtin_prefetch(page);
    memset(out, 0, sizeof *out);
    out->pgno = pgno;
    out->page = page;
    out->keys = *r;
    if (bit_get(w->used, pgno)) {
        uint64_t was;
        if (!lz_owner_get(lz, pgno, &was) || was != owner) {
            report(w, 0, k, from, SIMS_LMDB_NONE,
                   "%s page %" PRIu64 " is reached twice (a cycle or a shared page)",
                   level == 1 ? "root" : "child", pgno);
            return -1;
        }
        out->n = (int64_t)(le_load16(page + 12) - PAGE_HEADER) / 2;
        /* The search reads the node pointers next: all their cache lines
         * at once rather than one by one. */
        for (uint64_t off = 64; off < PAGE_HEADER + 2 * (uint64_t)out->n; off += 64)
            __builtin_prefetch(page + off);
        return 0;
    }
    if (bit_get(w->freed, pgno)) {
        report(w, 0, k, pgno, SIMS_LMDB_NONE,
               "page is in use and also listed free (a writer would overwrite it)");
        return -1;
    }
    int64_t n = check_page_head(w, k, pgno, level, depth);
    if (n < 0 || check_keys(w, k, pgno, n, level == depth, r, 1))
        return -1;
    int rc = lz_owner_put(lz, pgno, owner);
    if (rc)
        return rc;
    bit_set(w->used, pgno);
    w->pages_seen++;
    out->n = n;
    return 0;
}

static const uint8_t *lz_node(const lz_level *l, int64_t i)
{
    return l->page + node_ptr(l->page, (uint64_t)i);
}

/* The child of node idx of branch level lv[at], into lv[at + 1]. */
static int lz_child(sims_lmdb_lazy *lz, lz_path *p, uint64_t at)
{
    lz_level *l = &p->lv[at];
    key_range c;
    uint64_t child = branch_child(l->page, l->n, l->idx, &l->keys, &c);
    return lz_visit(lz, p->k, p->depth, child, l->pgno << 16 | (uint64_t)l->idx, at + 2, &c,
                    &p->lv[at + 1]);
}

/* The root of the tree of record rec (named by owner). 1: p->lv[0] holds
 * it; 0: the tree is empty; -1: reported. */
static int lz_root(sims_lmdb_lazy *lz, kind k, const uint8_t *rec, uint64_t rec_pgno,
                   uint64_t rec_off, uint64_t owner, lz_path *p)
{
    uint64_t root, depth;
    memset(p, 0, sizeof *p);
    p->k = k;
    int r = check_record(&lz->w, k, rec, rec_pgno, rec_off, &root, &depth);
    if (r <= 0)
        return r;
    p->depth = depth;
    key_range all = {NULL, NULL, 0, 0};
    return lz_visit(lz, k, depth, root, owner, 1, &all, &p->lv[0]) ? -1 : 1;
}

/* Down from the root to the leaf LMDB's search for key reaches: at a
 * branch the last node whose key is <= key (node 0's key is not used), at
 * the leaf the first node whose key is >= key (mdb_node_search). */
static int lz_descend(sims_lmdb_lazy *lz, lz_path *p, const uint8_t *key, uint64_t len)
{
    for (uint64_t at = 0;; at++) {
        lz_level *l = &p->lv[at];
        int leaf = at + 1 == p->depth;
        int64_t lo = leaf ? 0 : 1, hi = l->n; /* first node with key >= `key` */
        /* The search's first three steps read one of seven nodes each, at
         * fixed places: ask for all seven at once, not one after another
         * (a page of a path is usually cold). */
        for (int64_t j = 1; j < 8 && hi - lo >= 8; j++)
            __builtin_prefetch(lz_node(l, lo + (hi - lo) * j / 8));
        int near = 0;
        while (lo < hi) {
            /* Then the few nodes left, all at once: the steps after read
             * them one after another. */
            if (!near && hi - lo <= 24) {
                for (int64_t j = lo; j < hi; j++)
                    __builtin_prefetch(lz_node(l, j));
                near = 1;
            }
            int64_t mid = lo + (hi - lo) / 2;
            const uint8_t *node = lz_node(l, mid);
            if (cmp_memn(node + NODE_HEADER, le_load16(node + 6), key, len) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        int exact = 0;
        if (lo < l->n) {
            const uint8_t *node = lz_node(l, lo);
            exact = cmp_memn(node + NODE_HEADER, le_load16(node + 6), key, len) == 0;
        }
        if (leaf) {
            l->idx = lo;
            p->exact = exact;
            return 0;
        }
        l->idx = exact ? lo : lo - 1;
        if (lz_child(lz, p, at))
            return -1;
    }
}

/* Down the first (right = 0) or last node of every page below level at. */
static int lz_edge(sims_lmdb_lazy *lz, lz_path *p, uint64_t at, int right)
{
    for (;; at++) {
        lz_level *l = &p->lv[at];
        l->idx = right ? l->n - 1 : 0;
        if (at + 1 == p->depth)
            return 0;
        if (lz_child(lz, p, at))
            return -1;
    }
}

/* The leaf after (dir 1) or before (dir -1) the path's, as
 * mdb_cursor_sibling moves: up to the first page with a node that way,
 * then down its edge. 1: moved; 0: no such leaf; -1: reported. */
static int lz_sibling(sims_lmdb_lazy *lz, lz_path *p, int dir)
{
    for (uint64_t up = p->depth - 1; up-- > 0;) {
        lz_level *l = &p->lv[up];
        int64_t to = l->idx + dir;
        if (to < 0 || to >= l->n)
            continue;
        l->idx = to;
        if (lz_child(lz, p, up))
            return -1;
        return lz_edge(lz, p, up + 1, dir < 0) ? -1 : 1;
    }
    return 0;
}

/* Every page of the subtree below level at (whose idx is ignored). */
static int lz_whole(sims_lmdb_lazy *lz, lz_path *p, uint64_t at)
{
    if (at + 1 == p->depth)
        return 0;
    for (int64_t i = 0; i < p->lv[at].n; i++) {
        p->lv[at].idx = i;
        if (lz_child(lz, p, at) || lz_whole(lz, p, at + 1))
            return -1;
    }
    return 0;
}

/* The root of the duplicate sub-database of the leaf node at the path's
 * position (F_DUPDATA | F_SUBDATA) into *sub, named by that node: as
 * lz_root. */
static int lz_sub_root(sims_lmdb_lazy *lz, const lz_path *p, lz_path *sub)
{
    const lz_level *l = &p->lv[p->depth - 1];
    uint16_t ptr = node_ptr(l->page, (uint64_t)l->idx);
    uint64_t at = ptr + NODE_HEADER + le_load16(l->page + ptr + 6);
    return lz_root(lz, K_DUP, l->page + at, l->pgno, at, l->pgno << 16 | (uint64_t)l->idx, sub);
}

/* The duplicates of the fps-like leaf node at the path's position: nothing
 * more for one id or a sub-page (checked with the leaf); for a
 * sub-database, its first (which 0) or last (1) leaf's path, or all of it
 * (2). */
static int lz_dups(sims_lmdb_lazy *lz, const lz_path *p, int which)
{
    const lz_level *l = &p->lv[p->depth - 1];
    if ((le_load16(lz_node(l, l->idx) + 4) & (F_DUPDATA | F_SUBDATA)) != (F_DUPDATA | F_SUBDATA))
        return 0;
    lz_path sub;
    int r = lz_sub_root(lz, p, &sub);
    if (r <= 0)
        return r;
    return which == 2 ? lz_whole(lz, &sub, 0) : lz_edge(lz, &sub, 0, which);
}

/* The overflow run of the leaf node at the path's position, if it has one:
 * what overflow_data checks, its pages claimed for that node. */
static int lz_overflow(sims_lmdb_lazy *lz, const lz_path *p)
{
    walker *w = &lz->w;
    const lz_level *l = &p->lv[p->depth - 1];
    const uint8_t *node = lz_node(l, l->idx);
    if (!(le_load16(node + 4) & F_BIGDATA))
        return 0;
    uint64_t dsize = node_dsize(node);
    uint64_t pgno = le_load64(node + NODE_HEADER + le_load16(node + 6));
    uint64_t owner = l->pgno << 16 | (uint64_t)l->idx, was;
    if (pgno < 2 || pgno >= w->file_pages || pgno > w->last_pg) {
        report(w, 0, p->k, l->pgno, SIMS_LMDB_NONE,
               "overflow page number %" PRIu64 " is outside the data pages", pgno);
        return -1;
    }
    if (bit_get(w->used, pgno)) {
        if (lz_owner_get(lz, pgno, &was) && was == owner)
            return 0;
        report(w, 0, p->k, l->pgno, SIMS_LMDB_NONE,
               "overflow page %" PRIu64 " is reached twice (a cycle or a shared page)", pgno);
        return -1;
    }
    uint64_t pages = check_overflow(w, p->k, pgno, dsize);
    if (!pages)
        return -1;
    for (uint64_t i = 0; i < pages; i++) {
        if (bit_get(w->used, pgno + i) || bit_get(w->freed, pgno + i)) {
            report(w, 0, p->k, pgno, 12, "overflow run overlaps page %" PRIu64 ", %s", pgno + i,
                   bit_get(w->used, pgno + i) ? "in use elsewhere" : "listed free");
            return -1;
        }
    }
    for (uint64_t i = 0; i < pages; i++) {
        int rc = lz_owner_put(lz, pgno + i, owner);
        if (rc)
            return rc;
        bit_set(w->used, pgno + i);
    }
    w->pages_seen++;
    return 0;
}

/* An entry a cursor move returns: its first (which 0) or last (1)
 * duplicate, or its overflow run. */
static int lz_entry(sims_lmdb_lazy *lz, const lz_path *p, int which)
{
    return p->k == K_FPS ? lz_dups(lz, p, which) : lz_overflow(lz, p);
}

int sims_lmdb_lazy_new(sims_lmdb_lazy **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? SIMSTORE_OK : sims_fail(SIMSTORE_ENOMEM, "out of memory");
}

static void lz_reset(sims_lmdb_lazy *lz)
{
    lz->pages_before += lz->w.pages_seen;
    free(lz->w.used);
    free(lz->w.freed);
    free(lz->w.scratch);
    free(lz->hkey);
    free(lz->hval);
    memset(&lz->w, 0, sizeof lz->w);
    lz->hkey = lz->hval = NULL;
    lz->hcap = lz->hlen = 0;
    lz->ready = 0;
    lz->fail_rc = 0;
    lz->txnid = 0;
}

void sims_lmdb_lazy_free(sims_lmdb_lazy *lz)
{
    if (!lz)
        return;
    lz_reset(lz);
    free(lz);
}

uint64_t sims_lmdb_lazy_txnid(const sims_lmdb_lazy *lz)
{
    return lz->ready ? lz->txnid : 0;
}

uint64_t sims_lmdb_lazy_pages(const sims_lmdb_lazy *lz)
{
    return lz->pages_before + lz->w.pages_seen;
}

int sims_lmdb_lazy_snapshot(sims_lmdb_lazy *lz, const uint8_t *data, uint64_t size, uint64_t txnid)
{
    if (lz->ready && lz->txnid == txnid && lz->w.data == data && lz->w.size == size)
        return lz_failed(lz);
    lz_reset(lz);
    walker *w = &lz->w;
    w->data = data;
    w->size = size;
    w->sum = &lz->sum;
    memset(&lz->sum, 0, sizeof lz->sum);
    w->shallow = 1;
    meta_view m[2];
    int pick;
    int rc = walk_phases(w, txnid, PHASES_LAZY, m, &pick);
    if (rc < 0) {
        lz_reset(lz); /* a writer moved on, or no memory: load again next time */
        return rc;
    }
    lz->ready = 1;
    lz->txnid = m[pick].txnid;
    if (!w->errors && !w->stopped && w->stop_rc == 0 && rc == WALK_STOP)
        report(w, 0, K_HEADER, SIMS_LMDB_NONE, SIMS_LMDB_NONE, "cannot check this file");
    return lz_failed(lz);
}

/* A read that stopped without a report: out of memory. */
static int lz_stopped(sims_lmdb_lazy *lz)
{
    int rc = lz_failed(lz);
    return rc ? rc : sims_fail(SIMSTORE_ENOMEM, "out of memory checking data.mdb");
}

/* The value of the leaf node at the path's position, as mdb_get returns
 * it: its overflow run's bytes (lz_overflow has checked the run), or the
 * node's own data. */
static int lz_emit_value(sims_lmdb_lazy *lz, const lz_path *p, sims_lmdb_value_fn fn, void *ctx)
{
    const lz_level *l = &p->lv[p->depth - 1];
    const uint8_t *node = lz_node(l, l->idx);
    uint64_t dsize = node_dsize(node);
    const uint8_t *data = node + NODE_HEADER + le_load16(node + 6);
    if (le_load16(node + 4) & F_BIGDATA)
        data = page_at(&lz->w, le_load64(data)) + PAGE_HEADER;
    return fn(ctx, data, (size_t)dsize);
}

/* The keys of the nodes of a leaf (or duplicate sub-page) in order: the
 * duplicates MDB_NEXT_DUP returns. */
static int lz_emit_keys(const uint8_t *page, int64_t n, sims_lmdb_value_fn fn, void *ctx)
{
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *node = page + node_ptr(page, (uint64_t)i);
        int rc = fn(ctx, node + NODE_HEADER, le_load16(node + 6));
        if (rc)
            return rc;
    }
    return 0;
}

/* The duplicates of the fps-like leaf node at the path's position, in
 * MDB_NEXT_DUP's order, after lz_dups(..., 2) has checked them: one id, a
 * sub-page's keys, or a sub-database's leaves from the first to the last
 * (pages this snapshot has checked from the same owners: no new work). */
static int lz_emit_dups(sims_lmdb_lazy *lz, const lz_path *p, sims_lmdb_value_fn fn, void *ctx)
{
    const lz_level *l = &p->lv[p->depth - 1];
    const uint8_t *node = lz_node(l, l->idx);
    uint16_t flags = le_load16(node + 4);
    uint64_t ksize = le_load16(node + 6);
    uint64_t dsize = node_dsize(node);
    const uint8_t *data = node + NODE_HEADER + ksize;
    if (!(flags & F_DUPDATA))
        return fn(ctx, data, (size_t)dsize);
    if (!(flags & F_SUBDATA))
        return lz_emit_keys(data, (int64_t)(le_load16(data + 12) - PAGE_HEADER) / 2, fn, ctx);
    lz_path sub;
    int r = lz_sub_root(lz, p, &sub);
    if (r <= 0)
        return r < 0 ? lz_stopped(lz) : 0;
    if (lz_edge(lz, &sub, 0, 0))
        return lz_stopped(lz);
    for (;;) {
        const lz_level *leaf = &sub.lv[sub.depth - 1];
        int rc = lz_emit_keys(leaf->page, leaf->n, fn, ctx);
        if (rc)
            return rc;
        r = lz_sibling(lz, &sub, 1);
        if (r < 0)
            return lz_stopped(lz);
        if (r == 0)
            return 0;
    }
}

int sims_lmdb_lazy_check(sims_lmdb_lazy *lz, int db, const void *key, size_t key_len, int read)
{
    return sims_lmdb_lazy_read(lz, db, key, key_len, read, NULL, NULL, NULL);
}

int sims_lmdb_lazy_read(sims_lmdb_lazy *lz, int db, const void *key, size_t key_len, int read,
                        sims_lmdb_value_fn fn, void *ctx, int *found)
{
    if (found)
        *found = 0;
    if (!lz->ready)
        return sims_fail(SIMSTORE_EINVAL, "data.mdb: no snapshot loaded to check");
    if (lz->fail_rc || lz->w.errors)
        return lz_failed(lz);
    if (db < SIMS_LMDB_META || db >= SIMS_LMDB_DB_COUNT || !lz->w.named[db].present)
        return SIMSTORE_OK; /* LMDB finds no such database: nothing to read */
    kind k = db_kinds[db];
    const named_db *nd = &lz->w.named[db];
    lz_path p;
    int r = lz_root(lz, k, nd->rec, nd->pgno, nd->off, nd->pgno << 16 | nd->index, &p);
    if (r <= 0)
        return r < 0 ? lz_stopped(lz) : SIMSTORE_OK;
    if (lz_descend(lz, &p, (const uint8_t *)key, key_len))
        return lz_stopped(lz);
    lz_level *leaf = &p.lv[p.depth - 1];
    if (read == SIMS_LMDB_READ_GET) {
        r = p.exact ? lz_overflow(lz, &p) : 0;
    } else if (read == SIMS_LMDB_READ_DUPS) {
        r = p.exact ? lz_dups(lz, &p, 2) : 0;
    } else if (leaf->idx < leaf->n) {
        /* MDB_SET_RANGE stops here (its first duplicate); MDB_PREV_NODUP
         * then takes the node before, or the previous leaf's last. */
        int64_t at = leaf->idx;
        r = lz_entry(lz, &p, 0);
        if (!r && at > 0) {
            leaf->idx = at - 1;
            r = lz_entry(lz, &p, 1);
        } else if (!r) {
            r = lz_sibling(lz, &p, -1);
            r = r > 0 ? lz_entry(lz, &p, 1) : r;
        }
    } else {
        /* Past the leaf's last node: MDB_SET_RANGE moves to the next leaf's
         * first node, MDB_PREV_NODUP back to this leaf's last; with no next
         * leaf, MDB_LAST reads this path's last node. */
        lz_path next = p;
        r = lz_sibling(lz, &next, 1);
        if (r > 0)
            r = lz_entry(lz, &next, 0);
        if (r >= 0) {
            leaf->idx = leaf->n - 1;
            r = lz_entry(lz, &p, 1);
        }
    }
    /* A failure with no report is out of memory: never a page taken for
     * checked (lz_failed alone would say SIMSTORE_OK). */
    if (r < 0 || lz->w.errors)
        return lz_stopped(lz);
    if (!fn || !p.exact || read == SIMS_LMDB_READ_AROUND)
        return SIMSTORE_OK;
    *found = 1;
    return read == SIMS_LMDB_READ_GET ? lz_emit_value(lz, &p, fn, ctx)
                                      : lz_emit_dups(lz, &p, fn, ctx);
}

int sims_lmdb_meta_holds(const uint8_t *head, uint64_t psize, uint64_t id,
                         const sims_lmdb_db_counts dbs[2])
{
    const uint8_t *p = head + (id & 1) * psize;
    if (le_load64(p + META_TXNID) != id)
        return 0;
    atomic_thread_fence(memory_order_acquire);
    for (int i = 0; i < 2; i++) {
        const uint8_t *r = p + META_DBS + (size_t)i * DB_RECORD_BYTES;
        if (le_load16(r + 6) != dbs[i].depth || le_load64(r + 8) != dbs[i].branch_pages ||
            le_load64(r + 16) != dbs[i].leaf_pages || le_load64(r + 24) != dbs[i].overflow_pages ||
            le_load64(r + 32) != dbs[i].entries)
            return 0;
    }
    /* Again: a writer rewriting the page writes the id last. */
    atomic_thread_fence(memory_order_acquire);
    return le_load64(p + META_TXNID) == id;
}
