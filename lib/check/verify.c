/* verify.c: simstore_verify(): a deep check of a store directory or of one
 * table file that reports every problem through a callback and keeps going
 * wherever that is safe. Order for a store: walk data.mdb's B-trees
 * ourselves (LMDB 0.9 trusts its pages); only if they are sound, open LMDB
 * and check the records; check every live table file (and, without usable
 * records, every table file in the directory on its own); compare the sets
 * of a segment's tables; cross-check docs, fps and the segments; compare the
 * state's counts; list files the store does not use. */
#include "check/inspect.h"
#include "lmdb/boilerplate_record.h"
#include "lmdb/lmdbwalk.h"
#include "store/store_internal.h"
#include "sort/u64sort.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Segments up to this many fingerprints have their tables' sets compared
 * exactly (8 bytes per fingerprint, twice); larger ones by digest. */
#define EXACT_SET_LIMIT ((uint64_t)1 << 22)
/* Problems listed per kind; the rest are counted. */
#define LIST_PER_KIND 100
/* Differences listed per table when sets differ. */
#define LIST_PER_SET 3
#define KIND_COUNT 16

typedef struct vctx {
    simstore_problem_fn fn;
    void *ctx;
    simstore_verify_summary *sum;
    unsigned flags;
    int stop_rc;
    char first_error[1024];
    uint64_t listed[KIND_COUNT];
    uint64_t unlisted[KIND_COUNT];
    uint64_t unlisted_errors[KIND_COUNT];
} vctx;

/* Give p to the caller's fn; its nonzero return stops the checks. */
static void emit(vctx *v, const simstore_problem *p)
{
    int rc = v->fn(v->ctx, p);
    if (rc)
        v->stop_rc = rc;
}

SIMS_PRINTF(7, 8)
static int problem(vctx *v, simstore_problem_kind kind, int warning, const char *file,
                   int64_t block, int64_t offset, const char *fmt, ...)
{
    if (v->stop_rc)
        return v->stop_rc;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (warning) {
        v->sum->warnings++;
    } else {
        if (!v->sum->errors)
            snprintf(v->first_error, sizeof v->first_error, "%s", msg);
        v->sum->errors++;
    }
    unsigned k = (unsigned)kind < KIND_COUNT ? (unsigned)kind : 0;
    if (v->listed[k] >= LIST_PER_KIND) {
        v->unlisted[k]++;
        if (!warning)
            v->unlisted_errors[k]++;
        return 0;
    }
    v->listed[k]++;
    if (v->fn) {
        simstore_problem p = {kind, warning, file, block, offset, msg};
        emit(v, &p);
    }
    return v->stop_rc;
}

/* The detail of the last failure, for a problem's message. */
static const char *detail(int rc)
{
    const char *d = simstore_last_error();
    return d && *d ? d : simstore_strerror(rc);
}

/* ---- fingerprint sets ------------------------------------------------------------ */

/* splitmix64's finalizer on x + a constant: a bijection, so different sets
 * give different (count, sum, xor) but by coincidence. */
static uint64_t mix64(uint64_t x)
{
    uint64_t z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

typedef struct set_digest {
    uint64_t count, sum, xor;
} set_digest;

static void digest_add(set_digest *d, uint64_t fp)
{
    uint64_t m = mix64(fp);
    d->count++;
    d->sum += m;
    d->xor ^= m;
}

/* The distinct values of a run in order, counted as they pass. */
typedef struct distinct_run {
    uint64_t n, last;
    int have;
} distinct_run;

/* Count x when it differs from the value before it; 1 when it did. */
static int distinct_add(distinct_run *d, uint64_t x)
{
    int fresh = !d->have || x != d->last;
    d->n += (uint64_t)fresh;
    d->last = x;
    d->have = 1;
    return fresh;
}

/* One table of a segment, as checked. */
typedef struct table_result {
    char path[PATH_MAX];
    table_reader *reader; /* kept open for table 0 (the membership merge) */
    int opened;
    int blocks_ok;     /* every block decoded */
    int identity;      /* its permutation is the identity */
    set_digest digest; /* of the original (unpermuted) fingerprints */
    uint64_t *values;  /* exact mode: sorted original fingerprints */
    size_t nvalues;
} table_result;

/* ---- one table file ---------------------------------------------------------- */

typedef struct table_expect {
    uint64_t store_tag;
    uint32_t block_bytes;
    unsigned table_index;
    const sims_design_table *design; /* prefix and permutation */
    uint64_t fp_count;
} table_expect;

static int open_table(vctx *v, const char *path, table_reader **out)
{
    sims_error_clear();
    int rc = sims_table_reader_open(path, 0, out);
    /* Version 3 leaves its index to first use: verify checks all of it
     * here, as a version-2 open does. */
    if (rc == SIMSTORE_OK && (rc = sims_table_reader_check_index(*out)) != SIMSTORE_OK) {
        sims_table_reader_close(*out);
        *out = NULL;
    }
    if (rc == SIMSTORE_OK) {
        v->sum->table_files++;
        return SIMSTORE_OK;
    }
    simstore_problem_kind kind = rc == SIMSTORE_ENOTFOUND ? SIMSTORE_PROBLEM_MISSING
                                 : rc == SIMSTORE_ECORRUPT || rc == SIMSTORE_EVERSION
                                     ? SIMSTORE_PROBLEM_TABLE
                                     : SIMSTORE_PROBLEM_IO;
    if (rc == SIMSTORE_ENOTFOUND)
        problem(v, kind, 0, path, -1, -1, "%s: table file missing", path);
    else
        problem(v, kind, 0, path, -1, -1, "%s", detail(rc));
    return rc;
}

/* The header against what the store says: one problem per disagreement. */
static void check_against_store(vctx *v, const char *path, const table_reader *r,
                                const table_expect *e)
{
    const table_info *in = sims_table_reader_info(r);
    if (in->params.store_tag != e->store_tag)
        problem(v, SIMSTORE_PROBLEM_TABLE_STORE, 0, path, -1, 24,
                "%s (byte offset 24): belongs to another store (tag %016" PRIx64
                ", this store's is %016" PRIx64 ")",
                path, in->params.store_tag, e->store_tag);
    if (in->params.table_index != e->table_index)
        problem(v, SIMSTORE_PROBLEM_TABLE_STORE, 0, path, -1, 32,
                "%s (byte offset 32): holds table %u, its name says table %u", path,
                in->params.table_index, e->table_index);
    if (in->params.block_bytes != e->block_bytes)
        problem(v, SIMSTORE_PROBLEM_TABLE_STORE, 0, path, -1, 16,
                "%s (byte offset 16): %u-byte blocks, the store uses %u", path,
                in->params.block_bytes, e->block_bytes);
    if (e->design && in->params.prefix_bits != e->design->prefix_bits)
        problem(v, SIMSTORE_PROBLEM_TABLE_STORE, 0, path, -1, 20,
                "%s (byte offset 20): prefix of %u bits, the design's table %u has %u", path,
                in->params.prefix_bits, e->table_index, e->design->prefix_bits);
    if (e->design && memcmp(in->params.perm, e->design->perm, 64) != 0)
        problem(v, SIMSTORE_PROBLEM_TABLE_STORE, 0, path, -1, 128,
                "%s (byte offset 128): permutation differs from the design's table %u", path,
                e->table_index);
    if (in->fp_count != e->fp_count)
        problem(v, SIMSTORE_PROBLEM_TABLE_STORE, 0, path, -1, 40,
                "%s (byte offset 40): holds %" PRIu64 " fingerprints, the state says %" PRIu64,
                path, in->fp_count, e->fp_count);
}

/* Decode every block (unless quick): checksums, codes, order, counts, keys,
 * padding. Fills the digest, and the sorted values when `exact`. */
static void check_blocks(vctx *v, table_result *t, const sims_permuter *permuter, int exact)
{
    const table_reader *r = t->reader;
    const table_info *in = sims_table_reader_info(r);
    uint64_t nb = in->block_count, max = 0;
    for (uint64_t b = 0; b < nb; b++)
        if (sims_table_reader_block_count(r, b) > max)
            max = sims_table_reader_block_count(r, b);
    uint64_t *buf = malloc((max ? max : 1) * sizeof *buf);
    if (exact && in->fp_count)
        t->values = malloc((size_t)in->fp_count * sizeof *t->values);
    if (!buf || (exact && in->fp_count && !t->values)) {
        free(buf);
        free(t->values);
        t->values = NULL;
        problem(v, SIMSTORE_PROBLEM_IO, 0, t->path, -1, -1,
                "%s: out of memory decoding it (%" PRIu64 " fingerprints)", t->path, in->fp_count);
        return;
    }
    t->blocks_ok = 1;
    uint64_t group_end = 0;
    for (uint64_t b = 0; b < nb && !v->stop_rc; b++) {
        size_t n = 0;
        sims_error_clear();
        if (b == group_end) {
            /* A page group's checksum covers several blocks (format 2):
             * a mismatch is one problem, at the group's first block. */
            uint64_t first;
            int rc = sims_table_reader_check_group(r, b, &first, &group_end);
            if (rc) {
                t->blocks_ok = 0;
                problem(v, SIMSTORE_PROBLEM_BLOCK, 0, t->path, (int64_t)b,
                        (int64_t)(in->blocks_offset + b * in->params.block_bytes), "%s",
                        detail(rc));
                b = group_end - 1;
                continue;
            }
        }
        int rc = sims_table_reader_block(r, b, buf, (size_t)max, &n);
        if (rc) {
            t->blocks_ok = 0;
            problem(v, SIMSTORE_PROBLEM_BLOCK, 0, t->path, (int64_t)b,
                    (int64_t)(in->blocks_offset + b * in->params.block_bytes), "%s", detail(rc));
            continue;
        }
        v->sum->blocks++;
        v->sum->fingerprints += n;
        for (size_t i = 0; i < n; i++) {
            uint64_t fp = permuter ? sims_unpermute(permuter, buf[i])
                                   : sims_unpermute_naive(in->params.perm, buf[i]);
            digest_add(&t->digest, fp);
            if (t->values && t->nvalues < in->fp_count)
                t->values[t->nvalues++] = fp;
        }
    }
    free(buf);
    if (!t->blocks_ok || !t->values) {
        free(t->values);
        t->values = NULL;
        t->nvalues = 0;
        return;
    }
    if (!t->identity) {
        uint64_t *tmp = malloc(t->nvalues * sizeof *tmp + 1);
        if (!tmp) {
            free(t->values);
            t->values = NULL;
            t->nvalues = 0;
            return;
        }
        sims_radix_sort_u64(t->values, tmp, t->nvalues);
        free(tmp);
    }
}

/* Check one table file; with e (a store's table), against the store too. */
static void check_table(vctx *v, table_result *t, const table_expect *e, int exact)
{
    if (open_table(v, t->path, &t->reader))
        return;
    t->opened = 1;
    const table_info *in = sims_table_reader_info(t->reader);
    t->identity = 1;
    for (unsigned i = 0; i < 64; i++)
        t->identity &= in->params.perm[i] == i;
    if (e)
        check_against_store(v, t->path, t->reader, e);
    if (v->flags & SIMSTORE_VERIFY_QUICK)
        return;
    const sims_permuter *permuter = NULL;
    if (e && e->design && memcmp(in->params.perm, e->design->perm, 64) == 0)
        permuter = &e->design->permuter;
    check_blocks(v, t, permuter, exact);
}

/* ---- a segment: its tables' sets ----------------------------------------------- */

typedef struct segment_result {
    uint64_t id;
    unsigned ntables;
    table_result *tables;
    int usable;       /* a stream of its fingerprints in order exists (below) */
    int stream_table; /* which table streams (identity), or -1 for `values` */
    uint64_t *values; /* sorted fingerprints, when no identity table streams */
    size_t nvalues;
} segment_result;

static void release_table(table_result *t)
{
    sims_table_reader_close(t->reader);
    t->reader = NULL;
    free(t->values);
    t->values = NULL;
}

/* Report how table `o` differs from the reference `r` (both sorted). */
static void report_set_difference(vctx *v, uint64_t seg, const table_result *ref, unsigned rt,
                                  const table_result *o, unsigned ot)
{
    size_t i = 0, j = 0;
    uint64_t missing = 0, extra = 0;
    while (i < ref->nvalues || j < o->nvalues) {
        if (j == o->nvalues || (i < ref->nvalues && ref->values[i] < o->values[j])) {
            if (missing++ < LIST_PER_SET)
                problem(v, SIMSTORE_PROBLEM_TABLE_SET, 0, o->path, -1, -1,
                        "%s: segment %" PRIu64 " table %u lacks fingerprint %016" PRIx64
                        ", which its table %u holds",
                        o->path, seg, ot, ref->values[i], rt);
            i++;
        } else if (i == ref->nvalues || o->values[j] < ref->values[i]) {
            if (extra++ < LIST_PER_SET)
                problem(v, SIMSTORE_PROBLEM_TABLE_SET, 0, o->path, -1, -1,
                        "%s: segment %" PRIu64 " table %u holds fingerprint %016" PRIx64
                        ", which its table %u lacks",
                        o->path, seg, ot, o->values[j], rt);
            j++;
        } else {
            i++;
            j++;
        }
    }
    if (missing + extra > 2 * LIST_PER_SET)
        problem(v, SIMSTORE_PROBLEM_TABLE_SET, 0, o->path, -1, -1,
                "%s: in all, segment %" PRIu64 " table %u lacks %" PRIu64 " and adds %" PRIu64
                " fingerprints against table %u",
                o->path, seg, ot, missing, extra, rt);
}

/* Compare the tables that decoded completely; choose how the segment's
 * fingerprints will be streamed in order for the membership merge. */
static void compare_sets(vctx *v, segment_result *s, int exact)
{
    int ref = -1;
    for (unsigned t = 0; t < s->ntables; t++)
        if (s->tables[t].opened && s->tables[t].blocks_ok) {
            ref = (int)t;
            break;
        }
    if (ref < 0)
        return;
    table_result *r = &s->tables[ref];
    if (!exact)
        v->sum->sets_by_digest = 1;
    for (unsigned t = (unsigned)ref + 1; t < s->ntables && !v->stop_rc; t++) {
        table_result *o = &s->tables[t];
        if (!o->opened || !o->blocks_ok)
            continue;
        if (r->values && o->values) {
            if (r->nvalues != o->nvalues || memcmp(r->values, o->values, r->nvalues * 8) != 0)
                report_set_difference(v, s->id, r, (unsigned)ref, o, t);
        } else if (memcmp(&r->digest, &o->digest, sizeof r->digest) != 0) {
            problem(v, SIMSTORE_PROBLEM_TABLE_SET, 0, o->path, -1, -1,
                    "%s: segment %" PRIu64 " table %u holds a different fingerprint set from "
                    "table %u (%" PRIu64 " and %" PRIu64 " fingerprints; set digests differ)",
                    o->path, s->id, t, (unsigned)ref, o->digest.count, r->digest.count);
        }
    }
    /* The merge reads the segment in numeric order: an identity table that
     * decoded streams it; else the reference's sorted values serve. */
    for (unsigned t = 0; t < s->ntables; t++) {
        if (s->tables[t].opened && s->tables[t].blocks_ok && s->tables[t].identity) {
            s->usable = 1;
            s->stream_table = (int)t;
            break;
        }
    }
    if (!s->usable && r->values) {
        s->usable = 1;
        s->stream_table = -1;
        s->values = r->values;
        s->nvalues = r->nvalues;
        r->values = NULL;
    }
    for (unsigned t = 0; t < s->ntables; t++)
        if ((int)t != s->stream_table)
            release_table(&s->tables[t]);
        else {
            free(s->tables[t].values);
            s->tables[t].values = NULL;
        }
}

/* ---- streams of a segment's fingerprints in numeric order ----------------------- */

typedef struct seg_stream {
    segment_result *seg;
    table_cursor cursor;
    uint64_t buf[256];
    size_t len, pos;
    size_t array_pos;
    int done;
    uint64_t head; /* valid unless done */
} seg_stream;

static void stream_advance(vctx *v, seg_stream *st)
{
    segment_result *s = st->seg;
    if (s->stream_table < 0) {
        if (st->array_pos < s->nvalues)
            st->head = s->values[st->array_pos++];
        else
            st->done = 1;
        return;
    }
    if (st->pos == st->len) {
        size_t n = 0;
        int rc = sims_table_cursor_next(&st->cursor, st->buf, 256, &n);
        if (rc) {
            /* Decoded cleanly a moment ago: only a file changed under us. */
            problem(v, SIMSTORE_PROBLEM_BLOCK, 0, s->tables[s->stream_table].path, -1, -1, "%s",
                    detail(rc));
            n = 0;
        }
        st->len = n;
        st->pos = 0;
        if (n == 0) {
            st->done = 1;
            return;
        }
    }
    st->head = st->buf[st->pos++];
}

/* ---- the store ------------------------------------------------------------------ */

/* Problems held back: an attempt's (only the last attempt's reach the
 * caller), and an LMDB walk's. */
typedef struct held_problem {
    simstore_problem_kind kind;
    int warning;
    char *file;
    int64_t block, offset;
    char *message;
} held_problem;

typedef struct held_problems {
    held_problem *v;
    size_t n, cap;
} held_problems;

static int hold_problem(void *ctx, const simstore_problem *p)
{
    held_problems *h = (held_problems *)ctx;
    if (sims_grow((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v, 64))
        return SIMSTORE_ENOMEM;
    held_problem *q = &h->v[h->n];
    q->kind = p->kind;
    q->warning = p->warning;
    q->block = p->block;
    q->offset = p->offset;
    q->file = p->file ? strdup(p->file) : NULL;
    q->message = strdup(p->message ? p->message : "");
    if ((p->file && !q->file) || !q->message) {
        free(q->file);
        free(q->message);
        return SIMSTORE_ENOMEM;
    }
    h->n++;
    return 0;
}

static void held_free(held_problems *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->v[i].file);
        free(h->v[i].message);
    }
    free(h->v);
    memset(h, 0, sizeof *h);
}

/* The newest transaction id on the meta pages, or 0. Plain reads, which
 * leave the thread's error message alone (a caller may be returning one). */
static uint64_t newest_txnid(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    uint8_t first[160], second[8];
    uint64_t id = 0;
    if (pread(fd, first, sizeof first, 0) == (ssize_t)sizeof first) {
        uint32_t psize = le_load32(first + 16 + 24);
        /* MDB_meta.mm_txnid: page header 16 + 24 + two 48-byte records
         * + mm_last_pg 8 = byte 144 of the page. */
        if (psize >= 512 && psize <= 32768 &&
            pread(fd, second, sizeof second, (off_t)psize + 144) == (ssize_t)sizeof second) {
            uint64_t a = le_load64(first + 144), b = le_load64(second);
            id = a > b ? a : b;
        }
    }
    close(fd);
    return id;
}

typedef struct lmdb_walk_ctx {
    const char *mdb_path;
    sims_lmdb_summary *sum;
    held_problems f; /* the last walk's findings */
    int map_failed;  /* the file could not be mapped: the result says why */
} lmdb_walk_ctx;

/* A finding of the LMDB walk, held as a problem of data.mdb. */
static int collect_lmdb(void *ctx, const sims_lmdb_problem *p)
{
    lmdb_walk_ctx *w = (lmdb_walk_ctx *)ctx;
    simstore_problem q = {SIMSTORE_PROBLEM_LMDB,
                          p->warning,
                          w->mdb_path,
                          p->pgno == SIMS_LMDB_NONE ? -1 : (int64_t)p->pgno,
                          p->offset == SIMS_LMDB_NONE ? -1 : (int64_t)p->offset,
                          p->message};
    return hold_problem(&w->f, &q);
}

/* One walk of data.mdb's newest snapshot. A writer committing during the
 * walk can make pages we read inconsistent: a walk that finds errors while
 * the newest transaction moves is walked again (SIMS_ERETRY), and the last
 * walk's findings stand if it keeps moving. */
static int walk_lmdb_once(void *ctx)
{
    lmdb_walk_ctx *w = (lmdb_walk_ctx *)ctx;
    held_free(&w->f);
    uint64_t before = newest_txnid(w->mdb_path);
    sims_map map;
    int rc = sims_map_open(w->mdb_path, &map);
    if (rc) {
        w->map_failed = 1;
        return rc;
    }
    rc = sims_lmdb_walk(map.data, map.size, 0, collect_lmdb, w, w->sum);
    sims_map_close(&map);
    if (rc == SIMSTORE_ENOMEM)
        return rc;
    uint64_t after = newest_txnid(w->mdb_path);
    if (w->sum->errors != 0 && after != before) {
        sims_retry_saw(after);
        return sims_retry_or_fail(SIMSTORE_OK);
    }
    return SIMSTORE_OK;
}

/* Walk data.mdb (again while a writer moves it on: sims_retry). Returns 1
 * when the B-trees are sound. */
static int walk_lmdb(vctx *v, char *mdb_path, sims_lmdb_summary *sum)
{
    lmdb_walk_ctx w;
    memset(&w, 0, sizeof w);
    w.mdb_path = mdb_path;
    w.sum = sum;
    int rc = sims_retry(walk_lmdb_once, &w);
    if (w.map_failed) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, mdb_path, -1, -1, "%s", detail(rc));
        return 0;
    }
    for (size_t i = 0; i < w.f.n; i++)
        problem(v, w.f.v[i].kind, w.f.v[i].warning, w.f.v[i].file, w.f.v[i].block, w.f.v[i].offset,
                "%s", w.f.v[i].message);
    held_free(&w.f);
    if (rc == SIMSTORE_ENOMEM) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, mdb_path, -1, -1, "%s: out of memory walking it",
                mdb_path);
        return 0;
    }
    v->sum->lmdb_pages = sum->used_pages + sum->free_pages;
    return sum->errors == 0;
}

typedef struct store_ctx {
    const char *dir;
    char mdb_path[PATH_MAX];
    sims_env env;
    int env_open;
    MDB_txn *txn;
    const uint8_t *map_base; /* LMDB's map, derived from the store record */
    uint64_t map_size;
    int fp_only;
    uint64_t store_tag;
    uint32_t block_bytes;
    sims_design *design;
    sims_state_record state;
    int have_state;
    unsigned sketch;      /* the text record's sketch kind (0: none, or no record) */
    segment_result *segs; /* the document segments, then the paragraph ones */
    uint32_t nsegs;
    uint32_t ndoc_segs;      /* of nsegs, the document segments */
    unsigned para_min_words; /* the text record's (0: no paragraph index) */
    int docfile;             /* a segment's entry names a document file */
    int docfile_changed;     /* ... and docs holds changes to it */
    docfile_reader *dreader; /* it, open (checked) while the documents are */
    char dpath[PATH_MAX];
    uint64_t tombstones; /* docs's tombstones of the file's documents */
    uint64_t superseded; /* docs's documents whose id the file also has */
} store_ctx;

/* data.mdb byte offset of a value LMDB returned, or -1. */
static int64_t mdb_offset(const store_ctx *c, const void *p)
{
    const uint8_t *q = (const uint8_t *)p;
    if (!c->map_base || q < c->map_base || (uint64_t)(q - c->map_base) >= c->map_size)
        return -1;
    return (int64_t)(q - c->map_base);
}

/* The boilerplate record, when the store has one: it must decode. Nothing
 * else depends on it, so verify goes on either way. */
static void check_boilerplate_record(vctx *v, store_ctx *c)
{
    MDB_val key = {sizeof SIMS_BOILERPLATE_RECORD_KEY - 1, (void *)SIMS_BOILERPLATE_RECORD_KEY};
    MDB_val val;
    int mrc = mdb_get(c->txn, c->env.meta, &key, &val);
    if (mrc == MDB_NOTFOUND)
        return;
    if (mrc) {
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, -1,
                "%s: reading the boilerplate record: %s", c->mdb_path, mdb_strerror(mrc));
        return;
    }
    sims_boilerplate_record r;
    sims_error_clear();
    int rc = sims_boilerplate_record_decode((const uint8_t *)val.mv_data, val.mv_size, &r);
    if (rc) {
        int64_t at = mdb_offset(c, val.mv_data);
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, at,
                "%s (byte offset %" PRId64 "): %s", c->mdb_path, at, detail(rc));
    }
}

/* Read the records; 1 when store record, design and state are usable. */
static int check_records(vctx *v, store_ctx *c, const sims_lmdb_summary *walk)
{
    MDB_val key = {5, (void *)"store"}, val;
    int mrc = mdb_get(c->txn, c->env.meta, &key, &val);
    if (mrc) {
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, -1,
                mrc == MDB_NOTFOUND ? "%s: the store record is missing"
                                    : "%s: reading the store "
                                      "record failed",
                c->mdb_path);
        return 0;
    }
    if (walk->store_record_offset != SIMS_LMDB_NONE &&
        (uint64_t)(uintptr_t)val.mv_data >= walk->store_record_offset) {
        c->map_base = (const uint8_t *)val.mv_data - walk->store_record_offset;
        struct stat st;
        c->map_size = stat(c->mdb_path, &st) == 0 ? (uint64_t)st.st_size : 0;
    }
    int64_t at = mdb_offset(c, val.mv_data);
    sims_store_record rec;
    sims_error_clear();
    int rc = sims_store_record_decode((const uint8_t *)val.mv_data, val.mv_size, &rec);
    if (rc) {
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, at,
                "%s (byte offset %" PRId64 "): %s", c->mdb_path, at, detail(rc));
        return 0;
    }
    c->fp_only = (rec.flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    c->store_tag = rec.store_tag;
    c->block_bytes = rec.block_bytes;
    c->design = malloc(sizeof *c->design);
    if (!c->design) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "out of memory");
        return 0;
    }
    sims_error_clear();
    rc = sims_design_decode(rec.design, rec.design_len, c->design);
    if (rc) {
        int64_t dat = at < 0 ? -1 : at + 60;
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, dat,
                "%s (byte offset %" PRId64 "): design record: %s", c->mdb_path, dat, detail(rc));
        free(c->design);
        c->design = NULL;
        return 0;
    }
    MDB_val tkey = {4, (void *)"text"}, tval;
    mrc = mdb_get(c->txn, c->env.meta, &tkey, &tval);
    if (mrc == 0) {
        sims_text_record tr;
        sims_error_clear();
        rc = sims_text_record_decode((const uint8_t *)tval.mv_data, tval.mv_size, &tr);
        int64_t tat = mdb_offset(c, tval.mv_data);
        if (rc == SIMSTORE_OK)
            rc = sims_store_incompat_check(rec.incompat_features, &tr);
        if (rc)
            problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, tat,
                    "%s (byte offset %" PRId64 "): %s", c->mdb_path, tat, detail(rc));
        else if (tr.sketch && c->fp_only)
            problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, tat,
                    "%s (byte offset %" PRId64 "): the text record of a fingerprint-only store "
                    "names sketch kind %u",
                    c->mdb_path, tat, (unsigned)tr.sketch);
        else
            c->sketch = tr.sketch;
        if (rc == SIMSTORE_OK)
            c->para_min_words = tr.paragraph_min_words;
        if (rc == SIMSTORE_OK && (tr.paragraph_min_words != 0) != (c->env.pfps != 0))
            problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, tat,
                    "%s (byte offset %" PRId64 "): the text record says %s paragraph index, but "
                    "the paragraph database is %s",
                    c->mdb_path, tat, tr.paragraph_min_words ? "a" : "no",
                    c->env.pfps ? "there" : "missing");
    } else if (mrc != MDB_NOTFOUND) {
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, -1,
                "%s: reading the text record: "
                "%s",
                c->mdb_path, mdb_strerror(mrc));
    }
    check_boilerplate_record(v, c);
    MDB_val skey = {5, (void *)"state"}, sval;
    mrc = mdb_get(c->txn, c->env.meta, &skey, &sval);
    if (mrc) {
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, -1, "%s: the state record is %s",
                c->mdb_path, mrc == MDB_NOTFOUND ? "missing" : "unreadable");
        return 0;
    }
    sims_error_clear();
    rc = sims_state_record_decode((const uint8_t *)sval.mv_data, sval.mv_size, c->design->n_tables,
                                  &c->state);
    if (rc) {
        int64_t sat = mdb_offset(c, sval.mv_data);
        problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, sat,
                "%s (byte offset %" PRId64 "): %s", c->mdb_path, sat, detail(rc));
        return 0;
    }
    c->have_state = 1;
    return 1;
}

/* The generation committed now, or 0: a writer that committed since verify
 * read the state may have removed the files of segments it compacted. */
static uint64_t current_generation(store_ctx *c)
{
    MDB_txn *txn;
    if (sims_env_read_begin(&c->env, &txn) != SIMSTORE_OK)
        return 0;
    uint64_t gen = 0;
    MDB_val key = {5, (void *)"state"}, val;
    if (mdb_get(txn, c->env.meta, &key, &val) == 0 && val.mv_size >= 16)
        gen = le_load64((const uint8_t *)val.mv_data + 8);
    mdb_txn_abort(txn);
    return gen;
}

/* Check the segments the state lists (or, without a usable state, the
 * table files found in the directory). */
static void check_segments(vctx *v, store_ctx *c, int with_store, uint64_t *ids, unsigned *tcounts,
                           const uint64_t *fp_counts, uint32_t nsegs)
{
    c->segs = calloc(nsegs ? nsegs : 1, sizeof *c->segs);
    if (!c->segs) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->dir, -1, -1, "out of memory");
        return;
    }
    c->nsegs = nsegs;
    for (uint32_t i = 0; i < nsegs && !v->stop_rc; i++) {
        segment_result *s = &c->segs[i];
        s->id = ids[i];
        s->ntables = tcounts[i];
        s->stream_table = -1;
        s->tables = calloc(s->ntables ? s->ntables : 1, sizeof *s->tables);
        if (!s->tables) {
            problem(v, SIMSTORE_PROBLEM_IO, 0, c->dir, -1, -1, "out of memory");
            return;
        }
        uint64_t fp_count = with_store ? fp_counts[i] : 0;
        int exact = !with_store || fp_count <= EXACT_SET_LIMIT;
        for (unsigned t = 0; t < s->ntables && !v->stop_rc; t++) {
            table_result *tr = &s->tables[t];
            if (sims_table_path(tr->path, sizeof tr->path, c->dir, s->id, t) != SIMSTORE_OK)
                continue;
            struct stat st;
            if (!with_store && stat(tr->path, &st) != 0)
                continue; /* standalone: only the files that exist */
            if (with_store && stat(tr->path, &st) != 0 && c->env_open) {
                uint64_t now = current_generation(c);
                if (now && now != c->state.generation) {
                    problem(v, SIMSTORE_PROBLEM_MISSING, 1, tr->path, -1, -1,
                            "%s: removed by a writer that committed generation %" PRIu64
                            " after verify read generation %" PRIu64 " (not checked)",
                            tr->path, now, c->state.generation);
                    continue;
                }
            }
            table_expect e = {c->store_tag, c->block_bytes, t,
                              c->design && t < c->design->n_tables ? &c->design->tables[t] : NULL,
                              fp_count};
            /* Without a store, exact is 1: the comparison is sized by the
             * file itself (below). */
            check_table(v, tr, with_store ? &e : NULL, exact);
            if (!with_store && tr->reader &&
                sims_table_reader_info(tr->reader)->fp_count > EXACT_SET_LIMIT) {
                free(tr->values);
                tr->values = NULL;
            }
        }
        if (!(v->flags & SIMSTORE_VERIFY_QUICK))
            compare_sets(v, s, exact);
        else
            for (unsigned t = 0; t < s->ntables; t++)
                release_table(&s->tables[t]);
    }
}

static void free_segments(store_ctx *c)
{
    for (uint32_t i = 0; i < c->nsegs; i++) {
        segment_result *s = &c->segs[i];
        if (s->tables)
            for (unsigned t = 0; t < s->ntables; t++)
                release_table(&s->tables[t]);
        free(s->tables);
        free(s->values);
    }
    free(c->segs);
    c->segs = NULL;
    c->nsegs = 0;
}

/* Insertion numbers (format/store.md): each names a commit no later than
 * the state's generation, and no two documents share one. They are sorted
 * in bounded memory (spilled to $TMPDIR or /tmp) and read back in order. */
static void check_insertion_repeats(vctx *v, store_ctx *c, sims_u64sort *ins)
{
    if (!ins || v->stop_rc)
        return;
    if (sims_u64sort_finish(ins, 0) != SIMSTORE_OK) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1,
                "%s: insertion numbers not checked: %s", c->mdb_path, simstore_last_error());
        return;
    }
    uint64_t buf[1024], last = 0, repeats = 0, first_repeat = 0;
    int have = 0;
    size_t n;
    while (sims_u64sort_read(ins, buf, 1024, &n) == SIMSTORE_OK && n) {
        for (size_t i = 0; i < n; i++) {
            if (have && buf[i] == last && repeats++ == 0)
                first_repeat = last;
            last = buf[i];
            have = 1;
        }
    }
    if (repeats)
        problem(v, SIMSTORE_PROBLEM_DOC, 0, c->mdb_path, -1, -1,
                "%s: %" PRIu64 " documents repeat an earlier document's insertion number "
                "(the first: generation %" PRIu64 ", position %" PRIu64 ")",
                c->mdb_path, repeats, first_repeat >> 40, first_repeat & ((UINT64_C(1) << 40) - 1));
}

static sims_u64sort *insertion_sorter(void)
{
    sims_u64sort *s = NULL;
    if (sims_u64sort_new((size_t)1 << 20, NULL, &s) != SIMSTORE_OK)
        return NULL;
    return s;
}

/* docs -> fps and fps -> docs. */
/* The document an fps or pfps entry lists (fingerprint fp, id val, at byte
 * offset at of data.mdb), decoded into *rec: 0, or -1 when there is none to
 * compare (a missing document or an I/O error, reported here; a record that
 * does not decode is reported with docs). */
static int entry_document(vctx *v, store_ctx *c, const char *db, uint64_t fp, const MDB_val *val,
                          int64_t at, sims_doc_record *rec)
{
    int idl = val->mv_size > 64 ? 64 : (int)val->mv_size;
    MDB_val dk = *val, dv;
    int g = mdb_get(c->txn, c->env.docs, &dk, &dv);
    if (g == MDB_NOTFOUND && c->dreader) {
        /* The document file's, which docs has no entry for. */
        docfile_doc fd;
        int f = sims_docfile_find_id(c->dreader, val->mv_data, val->mv_size, &fd);
        if (f == 1) {
            sims_docfile_record(NULL, &fd, rec);
            return 0;
        }
        if (f < 0) {
            problem(v, SIMSTORE_PROBLEM_DOC, 0, c->dpath, -1, -1, "%s", simstore_last_error());
            return -1;
        }
    }
    if (g == MDB_NOTFOUND) {
        problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, 0, c->mdb_path, -1, at,
                "%s (byte offset %" PRId64 "): %s entry %016" PRIx64
                " lists document '%.*s', which docs lacks",
                c->mdb_path, at, db, fp, idl, (const char *)val->mv_data);
        return -1;
    }
    if (g) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: %s", c->mdb_path,
                mdb_strerror(g));
        return -1;
    }
    int tombstone = 0;
    if (sims_doc_entry_decode((const uint8_t *)dk.mv_data, dk.mv_size, (const uint8_t *)dv.mv_data,
                              dv.mv_size, rec, &tombstone) != SIMSTORE_OK)
        return -1;
    if (tombstone)
        problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, 0, c->mdb_path, -1, at,
                "%s (byte offset %" PRId64 "): %s entry %016" PRIx64
                " lists document '%.*s', which was deleted (docs holds its tombstone)",
                c->mdb_path, at, db, fp, idl, (const char *)val->mv_data);
    return tombstone ? -1 : 0;
}

static void check_documents(vctx *v, store_ctx *c, uint64_t *docs_seen, uint64_t *fps_keys)
{
    MDB_cursor *dc = NULL, *fc = NULL;
    sims_u64sort *ins = c->fp_only ? NULL : insertion_sorter();
    if (!c->fp_only && !ins)
        problem(v, SIMSTORE_PROBLEM_IO, 1, c->mdb_path, -1, -1,
                "%s: insertion numbers not checked for repeats: %s", c->mdb_path,
                simstore_last_error());
    int mrc = mdb_cursor_open(c->txn, c->env.docs, &dc);
    if (!mrc)
        mrc = mdb_cursor_open(c->txn, c->env.fps, &fc);
    if (mrc) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: %s", c->mdb_path,
                mdb_strerror(mrc));
        goto done;
    }
    MDB_val key, val;
    for (mrc = mdb_cursor_get(dc, &key, &val, MDB_FIRST); mrc == 0 && !v->stop_rc;
         mrc = mdb_cursor_get(dc, &key, &val, MDB_NEXT)) {
        (*docs_seen)++;
        v->sum->documents++;
        int64_t at = mdb_offset(c, val.mv_data);
        int idl = key.mv_size > 64 ? 64 : (int)key.mv_size;
        if (c->fp_only) {
            problem(v, SIMSTORE_PROBLEM_DOC, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): document '%.*s' in a fingerprint-only store",
                    c->mdb_path, at, idl, (const char *)key.mv_data);
            continue;
        }
        sims_doc_record rec;
        sims_error_clear();
        int tombstone = 0;
        int rc =
            c->docfile
                ? sims_doc_entry_decode((const uint8_t *)key.mv_data, key.mv_size,
                                        (const uint8_t *)val.mv_data, val.mv_size, &rec, &tombstone)
                : sims_doc_record_decode((const uint8_t *)key.mv_data, key.mv_size,
                                         (const uint8_t *)val.mv_data, val.mv_size, &rec);
        if (rc) {
            problem(v, SIMSTORE_PROBLEM_DOC, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): document '%.*s': %s", c->mdb_path, at, idl,
                    (const char *)key.mv_data, detail(rc));
            continue;
        }
        /* Beside a document file: a tombstone takes the file's document of
         * its id out (it must be there, of the same fingerprint), a
         * document may take its place. */
        docfile_doc fd;
        int in_file =
            c->dreader ? sims_docfile_find_id(c->dreader, key.mv_data, key.mv_size, &fd) : 0;
        if (in_file < 0) {
            problem(v, SIMSTORE_PROBLEM_DOC, 0, c->dpath, -1, -1, "%s", simstore_last_error());
            continue;
        }
        if (tombstone) {
            c->tombstones++;
            /* Without the file (its problem told once) there is nothing to
             * hold a tombstone against. */
            if (c->dreader && (!in_file || fd.fingerprint != rec.fp))
                problem(v, SIMSTORE_PROBLEM_DOC, 0, c->mdb_path, -1, at,
                        "%s (byte offset %" PRId64 "): tombstone of document '%.*s' "
                        "(fingerprint %016" PRIx64 "), which the document file %s",
                        c->mdb_path, at, idl, (const char *)key.mv_data, rec.fp,
                        in_file ? "holds under another fingerprint" : "does not hold");
            continue;
        }
        c->superseded += (uint64_t)(in_file == 1);
        if (rec.sketch_kind != c->sketch)
            /* Another kind cannot be compared with the store's; none
             * leaves the document's similarities unknown. */
            problem(
                v, SIMSTORE_PROBLEM_DOC, rec.sketch_kind == 0, c->mdb_path, -1, at,
                "%s (byte offset %" PRId64 "): document '%.*s' %s%s%s, the store keeps %s",
                c->mdb_path, at, idl, (const char *)key.mv_data,
                rec.sketch_kind ? "holds a " : "has no sketch",
                rec.sketch_kind ? simstore_sketch_name((simstore_sketch_kind)rec.sketch_kind) : "",
                rec.sketch_kind ? " sketch" : "",
                c->sketch ? simstore_sketch_name((simstore_sketch_kind)c->sketch) : "no sketches");
        if (rec.flags & SIMS_DOC_FLAG_INSERTION) {
            uint64_t gen = rec.insertion >> 40;
            if (c->have_state && (gen == 0 || gen > c->state.generation))
                problem(v, SIMSTORE_PROBLEM_DOC, 0, c->mdb_path, -1, at,
                        "%s (byte offset %" PRId64 "): document '%.*s' has insertion number "
                        "%" PRIu64 " of generation %" PRIu64 ", outside the committed "
                        "generations 1..%" PRIu64,
                        c->mdb_path, at, idl, (const char *)key.mv_data, rec.insertion, gen,
                        c->state.generation);
            if (ins && sims_u64sort_push(ins, &rec.insertion, 1) != SIMSTORE_OK) {
                sims_u64sort_free(ins);
                ins = NULL;
            }
        }
        uint8_t fk[8];
        be_store64(fk, rec.fp);
        MDB_val k2 = {8, fk}, v2 = key;
        int g = mdb_cursor_get(fc, &k2, &v2, MDB_GET_BOTH);
        if (g == MDB_NOTFOUND)
            problem(v, SIMSTORE_PROBLEM_DOC_WITHOUT_FPS, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): document '%.*s' (fingerprint %016" PRIx64
                    ") has no fps entry",
                    c->mdb_path, at, idl, (const char *)key.mv_data, rec.fp);
        else if (g)
            problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: %s", c->mdb_path,
                    mdb_strerror(g));
    }
    if (mrc && mrc != MDB_NOTFOUND)
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: reading docs: %s", c->mdb_path,
                mdb_strerror(mrc));
    check_insertion_repeats(v, c, ins);
    sims_u64sort_free(ins);
    ins = NULL;
    distinct_run keys = {0, 0, 0};
    for (mrc = mdb_cursor_get(fc, &key, &val, MDB_FIRST); mrc == 0 && !v->stop_rc;
         mrc = mdb_cursor_get(fc, &key, &val, MDB_NEXT)) {
        v->sum->fps_entries++;
        int64_t at = mdb_offset(c, val.mv_data);
        if (key.mv_size != 8 || val.mv_size == 0 || val.mv_size > SIMSTORE_MAX_ID_BYTES) {
            problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): fps entry of a %zu-byte key and a %zu-byte id",
                    c->mdb_path, at, key.mv_size, val.mv_size);
            continue;
        }
        uint64_t fp = be_load64(key.mv_data);
        *fps_keys += (uint64_t)distinct_add(&keys, fp);
        int idl = val.mv_size > 64 ? 64 : (int)val.mv_size;
        if (c->fp_only) {
            problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): fps entry %016" PRIx64
                    " in a fingerprint-only store",
                    c->mdb_path, at, fp);
            continue;
        }
        sims_doc_record rec;
        if (entry_document(v, c, "fps", fp, &val, at, &rec))
            continue;
        if (rec.fp != fp)
            problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): fps entry %016" PRIx64
                    " lists document '%.*s', whose fingerprint is %016" PRIx64,
                    c->mdb_path, at, fp, idl, (const char *)val.mv_data, rec.fp);
    }
    if (mrc && mrc != MDB_NOTFOUND)
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: reading fps: %s", c->mdb_path,
                mdb_strerror(mrc));
done:
    sims_u64sort_free(ins);
    mdb_cursor_close(dc);
    mdb_cursor_close(fc);
}

/* A live document's listed paragraphs each have their pfps entry. */
static void check_listed(vctx *v, store_ctx *c, MDB_cursor *pc, const MDB_val *key,
                         const sims_doc_record *rec, const char *path, int64_t at)
{
    int idl = key->mv_size > 64 ? 64 : (int)key->mv_size;
    for (uint32_t i = 0; i < rec->para_count && !v->stop_rc; i++) {
        uint8_t fk[8];
        be_store64(fk, le_load64(rec->paras + 8 * (size_t)i));
        MDB_val k2 = {8, fk}, v2 = *key;
        int g = mdb_cursor_get(pc, &k2, &v2, MDB_GET_BOTH);
        char where[48] = "";
        if (at >= 0)
            snprintf(where, sizeof where, " (byte offset %" PRId64 ")", at);
        if (g == MDB_NOTFOUND)
            problem(v, SIMSTORE_PROBLEM_DOC_WITHOUT_FPS, 0, path, -1, at,
                    "%s%s: document '%.*s' lists paragraph %016" PRIx64
                    ", which the paragraph index lacks",
                    path, where, idl, (const char *)key->mv_data,
                    le_load64(rec->paras + 8 * (size_t)i));
        else if (g)
            problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: %s", c->mdb_path,
                    mdb_strerror(g));
    }
}

typedef struct para_walk {
    vctx *v;
    store_ctx *c;
    MDB_cursor *pc, *dc;
} para_walk;

static int listed_in_file(void *ctx, const docfile_doc *d)
{
    para_walk *w = (para_walk *)ctx;
    if (d->paragraph_count == 0 || w->v->stop_rc)
        return 0;
    MDB_val key = {d->id_len, (void *)d->id}, val;
    int g = mdb_cursor_get(w->dc, &key, &val, MDB_SET);
    if (g == 0)
        return 0; /* docs's entry takes its place */
    if (g != MDB_NOTFOUND) {
        problem(w->v, SIMSTORE_PROBLEM_IO, 0, w->c->mdb_path, -1, -1, "%s: %s", w->c->mdb_path,
                mdb_strerror(g));
        return 0;
    }
    sims_doc_record rec;
    sims_docfile_record(NULL, d, &rec);
    key.mv_size = d->id_len;
    key.mv_data = (void *)d->id;
    check_listed(w->v, w->c, w->pc, &key, &rec, w->c->dpath, -1);
    return 0;
}

/* The paragraph index (format/store.md, "Paragraphs"): every document's
 * listed paragraphs have their pfps entry, every pfps entry names a document
 * that lists it, and every pfps key is in a paragraph segment's tables. */
static void check_paragraphs(vctx *v, store_ctx *c)
{
    MDB_cursor *dc = NULL, *pc = NULL;
    table_reader **t0 = calloc(c->state.para_segment_count + 1u, sizeof *t0);
    int mrc = t0 ? mdb_cursor_open(c->txn, c->env.docs, &dc) : ENOMEM;
    if (!mrc)
        mrc = mdb_cursor_open(c->txn, c->env.pfps, &pc);
    if (mrc) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: %s", c->mdb_path,
                mdb_strerror(mrc));
        goto done;
    }
    MDB_val key, val;
    for (mrc = mdb_cursor_get(dc, &key, &val, MDB_FIRST); mrc == 0 && !v->stop_rc;
         mrc = mdb_cursor_get(dc, &key, &val, MDB_NEXT)) {
        sims_doc_record rec;
        int tombstone = 0;
        if (sims_doc_entry_decode((const uint8_t *)key.mv_data, key.mv_size,
                                  (const uint8_t *)val.mv_data, val.mv_size, &rec,
                                  &tombstone) != SIMSTORE_OK ||
            tombstone)
            continue; /* reported with the documents; a tombstone lists none */
        check_listed(v, c, pc, &key, &rec, c->mdb_path, mdb_offset(c, val.mv_data));
    }
    if (c->dreader && !v->stop_rc) {
        /* The document file's live documents (docs has no entry of their id). */
        para_walk w = {v, c, pc, dc};
        if (sims_docfile_each(c->dreader, listed_in_file, &w) != SIMSTORE_OK)
            problem(v, SIMSTORE_PROBLEM_DOC, 0, c->dpath, -1, -1, "%s", simstore_last_error());
    }
    for (uint32_t i = 0; i < c->state.para_segment_count; i++) {
        char path[PATH_MAX];
        if (sims_table_path(path, sizeof path, c->dir, c->state.para_segments[i].id, 0) ==
                SIMSTORE_OK &&
            sims_table_reader_open(path, 0, &t0[i]) != SIMSTORE_OK)
            t0[i] = NULL; /* reported with the segments */
    }
    const sims_permuter *perm = c->design ? &c->design->tables[0].permuter : NULL;
    distinct_run keys = {0, 0, 0};
    for (mrc = mdb_cursor_get(pc, &key, &val, MDB_FIRST); mrc == 0 && !v->stop_rc;
         mrc = mdb_cursor_get(pc, &key, &val, MDB_NEXT)) {
        v->sum->paragraph_entries++;
        int64_t at = mdb_offset(c, val.mv_data);
        if (key.mv_size != 8 || val.mv_size == 0 || val.mv_size > SIMSTORE_MAX_ID_BYTES) {
            problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): pfps entry of a %zu-byte key and a %zu-byte "
                    "id",
                    c->mdb_path, at, key.mv_size, val.mv_size);
            continue;
        }
        uint64_t fp = be_load64(key.mv_data);
        int idl = val.mv_size > 64 ? 64 : (int)val.mv_size;
        if (distinct_add(&keys, fp) && perm) {
            /* A live paragraph fingerprint must be in some paragraph segment. */
            int found = 0, all_open = 1;
            uint64_t pq = sims_permute(perm, fp);
            for (uint32_t i = 0; i < c->state.para_segment_count && !found; i++) {
                if (!t0[i]) {
                    all_open = 0;
                    continue;
                }
                found = sims_table_reader_holds(t0[i], pq) > 0;
            }
            if (!found && all_open)
                problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_TABLE, 0, c->mdb_path, -1, at,
                        "%s (byte offset %" PRId64 "): paragraph fingerprint %016" PRIx64
                        " is in no paragraph segment's tables: paragraph queries cannot find it",
                        c->mdb_path, at, fp);
        }
        sims_doc_record rec;
        if (entry_document(v, c, "pfps", fp, &val, at, &rec))
            continue;
        int listed = 0;
        for (uint32_t i = 0; i < rec.para_count && !listed; i++)
            listed = le_load64(rec.paras + 8 * (size_t)i) == fp;
        if (!listed)
            problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_DOC, 0, c->mdb_path, -1, at,
                    "%s (byte offset %" PRId64 "): pfps entry %016" PRIx64
                    " lists document '%.*s', which has no such paragraph",
                    c->mdb_path, at, fp, idl, (const char *)val.mv_data);
    }
    if (mrc && mrc != MDB_NOTFOUND)
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->mdb_path, -1, -1, "%s: reading pfps: %s", c->mdb_path,
                mdb_strerror(mrc));
done:
    if (t0)
        for (uint32_t i = 0; i < c->state.para_segment_count; i++)
            sims_table_reader_close(t0[i]);
    free(t0);
    mdb_cursor_close(dc);
    mdb_cursor_close(pc);
}

/* Merge fps keys (numeric order) with every segment's fingerprints:
 * overlaps, fps keys no segment holds, dead fingerprints; returns the number
 * of distinct fingerprints the segments hold. */
/* The document file of a store whose documents are all in one
 * (format/store.md, "Document files"): sims_docfile_verify, its counts against
 * the state's, docs and fps empty, and its distinct fingerprints exactly
 * its segment's (each found in table 0, as many as the segment holds). */
typedef struct docfile_walk {
    vctx *v;
    store_ctx *c;
    const char *path;
    const table_reader *t0;
    distinct_run fps;
    uint64_t missing;
} docfile_walk;

static int walk_docfile_doc(void *ctx, const docfile_doc *d)
{
    docfile_walk *w = (docfile_walk *)ctx;
    w->v->sum->documents++;
    if (!distinct_add(&w->fps, d->fingerprint))
        return 0;
    if (!w->t0)
        return 0;
    int found = sims_table_reader_holds(
        w->t0, sims_permute(&w->c->design->tables[0].permuter, d->fingerprint));
    if (found < 0)
        return found;
    if (!found && w->missing++ == 0)
        problem(w->v, SIMSTORE_PROBLEM_FPS_WITHOUT_TABLE, 0, w->path, -1, -1,
                "%s: fingerprint %016" PRIx64 " of document '%.*s' is not in its segment's "
                "tables: queries cannot find it",
                w->path, d->fingerprint, (int)d->id_len, (const char *)d->id);
    return 0;
}

static void check_docfile(vctx *v, store_ctx *c)
{
    uint32_t n = c->state.segment_count, which = n;
    for (uint32_t i = 0; i < n; i++)
        if (c->state.segments[i].flags & SIMS_SEGMENT_FLAG_DOCFILE) {
            if (which < n) {
                problem(v, SIMSTORE_PROBLEM_RECORD, 0, c->mdb_path, -1, -1,
                        "%s: segments %" PRIu64 " and %" PRIu64 " both name a document file",
                        c->mdb_path, c->state.segments[which].id, c->state.segments[i].id);
                return;
            }
            which = i;
        }
    const sims_segment_entry *e = &c->state.segments[which];
    c->docfile_changed = (e->flags & SIMS_SEGMENT_FLAG_CHANGED) != 0;
    const char *path = c->dpath;
    docfile_reader *r = NULL;
    if (sims_docfile_path(c->dpath, sizeof c->dpath, c->dir, e->id) != SIMSTORE_OK)
        return;
    int rc = sims_docfile_open(path, &r);
    if (rc == SIMSTORE_OK)
        rc = sims_docfile_verify(r);
    if (rc) {
        problem(v, rc == SIMSTORE_ENOTFOUND ? SIMSTORE_PROBLEM_MISSING : SIMSTORE_PROBLEM_DOC, 0,
                path, -1, -1, "%s", simstore_last_error());
        sims_docfile_close(r);
        return;
    }
    if (sims_docfile_sketch_bytes(r) != simstore_sketch_bytes((simstore_sketch_kind)c->sketch))
        problem(v, SIMSTORE_PROBLEM_DOC, 0, path, -1, -1,
                "%s: keeps sketches of %u bytes, the store's kind takes %zu", path,
                sims_docfile_sketch_bytes(r),
                simstore_sketch_bytes((simstore_sketch_kind)c->sketch));
    MDB_stat ds, fs;
    if (!c->docfile_changed && sims_docfile_count(r) != c->state.doc_count)
        problem(v, SIMSTORE_PROBLEM_COUNTS, 0, path, -1, -1,
                "%s: holds %" PRIu64 " documents, the state records %" PRIu64, path,
                sims_docfile_count(r), c->state.doc_count);
    if (!c->docfile_changed && mdb_stat(c->txn, c->env.docs, &ds) == 0 &&
        mdb_stat(c->txn, c->env.fps, &fs) == 0 && (ds.ms_entries || fs.ms_entries))
        problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c->mdb_path, -1, -1,
                "%s: the documents are in a document file, yet docs holds %zu and fps %zu "
                "entries (the state says nothing changed since the file was written)",
                c->mdb_path, ds.ms_entries, fs.ms_entries);
    const table_reader *t0 = NULL;
    for (uint32_t i = 0; i < c->nsegs; i++)
        if (c->segs[i].id == e->id && c->segs[i].ntables && c->segs[i].tables[0].reader)
            t0 = c->segs[i].tables[0].reader;
    docfile_walk w = {v, c, path, t0, {0, 0, 0}, 0};
    rc = sims_docfile_each(r, walk_docfile_doc, &w);
    if (rc)
        problem(v, SIMSTORE_PROBLEM_DOC, 0, path, -1, -1, "%s", simstore_last_error());
    else if (w.fps.n != e->fp_count || (!c->docfile_changed && w.fps.n != c->state.fp_count))
        problem(v, SIMSTORE_PROBLEM_COUNTS, 0, path, -1, -1,
                "%s: holds %" PRIu64 " distinct fingerprints, the segment's tables hold %" PRIu64
                "%s",
                path, w.fps.n, e->fp_count,
                c->docfile_changed ? "" : " (the state records them all live)");
    c->dreader = r;
}

/* The store's live documents and fingerprints, beside a document file with
 * changes in docs: the file's documents less those docs takes the place of,
 * plus docs's; its live fingerprints merged with fps's keys. */
typedef struct live_walk {
    store_ctx *c;
    MDB_cursor *fc;
    int frc;
    MDB_val key, val;
    distinct_run fps;
    int failed;
} live_walk;

static void live_fps_before(live_walk *w, uint64_t fp, int all)
{
    while (w->frc == 0 && w->key.mv_size == 8 && (all || be_load64(w->key.mv_data) < fp)) {
        distinct_add(&w->fps, be_load64(w->key.mv_data));
        w->frc = mdb_cursor_get(w->fc, &w->key, &w->val, MDB_NEXT_NODUP);
    }
}

static int live_doc(void *ctx, const docfile_doc *d)
{
    live_walk *w = (live_walk *)ctx;
    MDB_val k = {d->id_len, (void *)d->id}, val;
    int g = mdb_get(w->c->txn, w->c->env.docs, &k, &val);
    if (g == 0)
        return 0; /* docs's entry takes its place */
    if (g != MDB_NOTFOUND) {
        w->failed = 1;
        return 1;
    }
    live_fps_before(w, d->fingerprint, 0);
    distinct_add(&w->fps, d->fingerprint);
    return 0;
}

static void check_docfile_changes(vctx *v, store_ctx *c, uint64_t docs_seen)
{
    uint64_t held = sims_docfile_count(c->dreader);
    uint64_t records = docs_seen - c->tombstones;
    uint64_t live = held - c->tombstones - c->superseded + records;
    if (c->tombstones + c->superseded > held || live != c->state.doc_count)
        problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c->mdb_path, -1, -1,
                "%s: the state records %" PRIu64 " documents; the document file holds %" PRIu64
                ", docs %" PRIu64 " tombstones and %" PRIu64 " documents (%" PRIu64
                " of them in place of the file's)",
                c->mdb_path, c->state.doc_count, held, c->tombstones, records, c->superseded);
    live_walk w;
    memset(&w, 0, sizeof w);
    w.c = c;
    w.frc = mdb_cursor_open(c->txn, c->env.fps, &w.fc);
    if (w.frc == 0)
        w.frc = mdb_cursor_get(w.fc, &w.key, &w.val, MDB_FIRST);
    int rc = w.fc ? sims_docfile_each(c->dreader, live_doc, &w) : SIMSTORE_OK;
    if (w.fc)
        live_fps_before(&w, 0, 1);
    if (w.fc)
        mdb_cursor_close(w.fc);
    if (rc || w.failed)
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->dpath, -1, -1, "%s: reading the live documents",
                c->dpath);
    else if (w.fps.n != c->state.fp_count)
        problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c->mdb_path, -1, -1,
                "%s: the state records %" PRIu64 " distinct fingerprints, the store's live "
                "documents hold %" PRIu64,
                c->mdb_path, c->state.fp_count, w.fps.n);
}

static uint64_t check_membership(vctx *v, store_ctx *c, int *complete)
{
    *complete = 1;
    seg_stream *st = calloc(c->ndoc_segs ? c->ndoc_segs : 1, sizeof *st);
    if (!st) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->dir, -1, -1, "out of memory");
        *complete = 0;
        return 0;
    }
    uint32_t live = 0;
    for (uint32_t i = 0; i < c->ndoc_segs; i++) {
        segment_result *s = &c->segs[i];
        st[i].seg = s;
        if (!s->usable) {
            st[i].done = 1;
            *complete = 0;
            continue;
        }
        if (s->stream_table >= 0)
            sims_table_cursor_init(&st[i].cursor, s->tables[s->stream_table].reader, 0, UINT64_MAX);
        stream_advance(v, &st[i]);
        live++;
    }
    MDB_cursor *fc = NULL;
    MDB_val key, val;
    int frc = MDB_NOTFOUND;
    if (!c->fp_only && mdb_cursor_open(c->txn, c->env.fps, &fc) == 0)
        frc = mdb_cursor_get(fc, &key, &val, MDB_FIRST);
    uint64_t distinct = 0;
    for (;;) {
        if (v->stop_rc)
            break;
        int have_fps = frc == 0 && key.mv_size == 8;
        uint64_t fk = have_fps ? be_load64(key.mv_data) : 0;
        int have = have_fps;
        uint64_t m = fk;
        for (uint32_t i = 0; i < c->ndoc_segs; i++)
            if (!st[i].done && (!have || st[i].head < m)) {
                m = st[i].head;
                have = 1;
            }
        if (!have)
            break;
        uint32_t holders = 0;
        uint64_t first_id = 0, second_id = 0;
        for (uint32_t i = 0; i < c->ndoc_segs; i++) {
            if (!st[i].done && st[i].head == m) {
                if (holders == 0)
                    first_id = st[i].seg->id;
                else if (holders == 1)
                    second_id = st[i].seg->id;
                holders++;
                stream_advance(v, &st[i]);
            }
        }
        if (holders)
            distinct++;
        if (holders > 1)
            /* Harmless to answers (queries drop repeats); in a store with
             * documents a fingerprint deleted and added again lands in a new
             * segment while its dead copy stays until compaction. */
            problem(v, SIMSTORE_PROBLEM_SEGMENT_OVERLAP, !c->fp_only, c->dir, -1, -1,
                    "%s: fingerprint %016" PRIx64 " is held by segments %" PRIu64 " and %" PRIu64
                    "%s",
                    c->dir, m, first_id, second_id,
                    c->fp_only ? "" : " (a dead copy; compaction removes it)");
        if (have_fps && fk == m) {
            if (holders == 0 && *complete)
                problem(v, SIMSTORE_PROBLEM_FPS_WITHOUT_TABLE, 0, c->mdb_path, -1,
                        mdb_offset(c, key.mv_data),
                        "%s (byte offset %" PRId64 "): fps fingerprint %016" PRIx64
                        " is in no segment's tables: queries cannot find its documents",
                        c->mdb_path, mdb_offset(c, key.mv_data), fk);
            frc = mdb_cursor_get(fc, &key, &val, MDB_NEXT_NODUP);
        } else if (!c->fp_only && !c->docfile) {
            v->sum->dead_fingerprints++;
        }
    }
    mdb_cursor_close(fc);
    free(st);
    return distinct;
}

/* The write-ahead log (format/wal.md): every record checked as a replay
 * checks it, without changing the file. Damage is an error (no writer or
 * server will open the store); changes a server acknowledged and the
 * store's files do not hold yet, and bytes after the last whole record, are
 * reported as warnings (a server holds them, or the next open applies or
 * sets them aside). */
static void check_log(vctx *v, store_ctx *c, int records_ok)
{
    char path[PATH_MAX];
    struct stat st;
    if (sims_join_path(path, sizeof path, c->dir, SIMS_STORE_WAL_NAME) != SIMSTORE_OK ||
        lstat(path, &st) != 0)
        return;
    if (!records_ok || !c->have_state) {
        problem(v, SIMSTORE_PROBLEM_RECORD, 1, path, -1, -1,
                "%s: not checked: the store's records are not usable", path);
        return;
    }
    sims_store_log log;
    int rc = sims_log_read(path, c->store_tag, c->state.wal_applied, &log);
    v->sum->log_records = log.records;
    v->sum->log_pending = log.pending;
    if (rc) {
        problem(v, SIMSTORE_PROBLEM_LOG, 0, path, -1, -1, "%s", detail(rc));
        return;
    }
    if (log.pending)
        problem(v, SIMSTORE_PROBLEM_LOG, 1, path, -1, -1,
                "%s: %" PRIu64 " change%s (records %" PRIu64 "..%" PRIu64 ") a server "
                "acknowledged that the store's files do not hold yet: a running server holds "
                "them in memory; after one stopped, the next serve, add, delete or compact "
                "applies them",
                path, log.pending, log.pending == 1 ? "" : "s", log.first_pending_seq,
                log.last_pending_seq);
    if (log.torn_bytes)
        problem(v, SIMSTORE_PROBLEM_LOG, 1, path, -1, (int64_t)log.torn_offset,
                "%s (byte offset %" PRIu64 "): %" PRIu64 " bytes after the last whole record: a "
                "write in flight, or the torn tail of one a crash cut short (never "
                "acknowledged: the next open keeps it aside)",
                path, log.torn_offset, log.torn_bytes);
}

static void check_leftovers(vctx *v, store_ctx *c)
{
    DIR *d = opendir(c->dir);
    if (!d) {
        problem(v, SIMSTORE_PROBLEM_IO, 0, c->dir, -1, -1, "%s: cannot list: %s", c->dir,
                strerror(errno));
        return;
    }
    struct dirent *e;
    char path[PATH_MAX];
    while ((e = readdir(d)) && !v->stop_rc) {
        const char *name = e->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "data.mdb") ||
            !strcmp(name, "lock.mdb") || !strcmp(name, "writer.lock") ||
            !strcmp(name, SIMS_STORE_WAL_NAME)) /* a live store's log (format/wal.md) */
            continue;
        if (!strncmp(name, SIMS_STORE_WAL_NAME ".torn-", strlen(SIMS_STORE_WAL_NAME ".torn-"))) {
            if (sims_join_path(path, sizeof path, c->dir, name) == SIMSTORE_OK)
                problem(v, SIMSTORE_PROBLEM_LEFTOVER, 1, path, -1, -1,
                        "%s: the torn tail of the write-ahead log, kept aside when it was cut "
                        "from the log (bytes of a write that was never acknowledged; remove it "
                        "once looked at)",
                        path);
            continue;
        }
        if (sims_join_path(path, sizeof path, c->dir, name) != SIMSTORE_OK)
            continue;
        uint64_t seg;
        unsigned t;
        int kind = sims_segment_file_name(name, &seg, &t);
        if (kind == SIMS_SEGMENT_DOC_FILE) {
            int known = 0;
            for (uint32_t i = 0; c->have_state && i < c->state.segment_count; i++)
                if (c->state.segments[i].id == seg &&
                    (c->state.segments[i].flags & SIMS_SEGMENT_FLAG_DOCFILE))
                    known = 1;
            if (!known)
                problem(v, SIMSTORE_PROBLEM_LEFTOVER, 1, path, -1, -1,
                        "%s: document file of segment %" PRIu64 ", which the committed state "
                        "does not name (left by an interrupted writer; the next writer removes "
                        "it)",
                        path, seg);
        } else if (kind == SIMS_SEGMENT_TABLE_FILE) {
            int known = 0;
            for (uint32_t i = 0; i < c->nsegs; i++)
                if (c->segs[i].id == seg && t < c->segs[i].ntables)
                    known = 1;
            if (!known)
                problem(v, SIMSTORE_PROBLEM_LEFTOVER, 1, path, -1, -1,
                        "%s: table file of segment %" PRIu64 ", which the committed state does "
                        "not list (left by an interrupted writer, or written by one at work; "
                        "the next writer removes it)",
                        path, seg);
        } else if (strstr(name, ".tmp-")) {
            problem(v, SIMSTORE_PROBLEM_LEFTOVER, 1, path, -1, -1,
                    "%s: temporary file of an interrupted (or working) writer", path);
        } else {
            problem(v, SIMSTORE_PROBLEM_LEFTOVER, 1, path, -1, -1,
                    "%s: a file that is not part of a store", path);
        }
    }
    closedir(d);
}

/* The table files in `dir`, grouped into segments by name: their ids and
 * table counts (one past the highest table), into *ids and *counts (the
 * caller frees them). Returns how many segments; *any says whether there
 * is a table file at all. */
static uint32_t table_segments(const char *dir, uint64_t **ids, unsigned **counts, int *any)
{
    *ids = NULL;
    *counts = NULL;
    *any = 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint32_t n = 0;
    size_t icap = 0, ccap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t seg;
        unsigned t;
        if (sims_segment_file_name(e->d_name, &seg, &t) != SIMS_SEGMENT_TABLE_FILE)
            continue;
        *any = 1;
        uint32_t i = 0;
        while (i < n && (*ids)[i] != seg)
            i++;
        if (i == n) {
            if (sims_grow((void **)ids, &icap, n + 1, sizeof **ids, 8) ||
                sims_grow((void **)counts, &ccap, n + 1, sizeof **counts, 8))
                break;
            (*ids)[n] = seg;
            (*counts)[n] = 0;
            n++;
        }
        if (t + 1 > (*counts)[i])
            (*counts)[i] = t + 1;
    }
    closedir(d);
    return n;
}

/* Without usable records: every table file in the directory on its own,
 * grouped into segments by name. */
static void check_tables_standalone(vctx *v, store_ctx *c)
{
    uint64_t *ids;
    unsigned *counts;
    int any;
    uint32_t n = table_segments(c->dir, &ids, &counts, &any);
    if (n)
        problem(v, SIMSTORE_PROBLEM_RECORD, 1, c->mdb_path, -1, -1,
                "%s: the store's records are not usable: checking the %u segment(s) of table "
                "files in %s on their own, without the store's design and counts",
                c->mdb_path, n, c->dir);
    check_segments(v, c, 0, ids, counts, NULL, n);
    c->ndoc_segs = c->nsegs;
    free(ids);
    free(counts);
}

static int verify_store(vctx *v, const char *dir)
{
    store_ctx c;
    memset(&c, 0, sizeof c);
    c.dir = dir;
    v->sum->store = 1;
    if (sims_join_path(c.mdb_path, sizeof c.mdb_path, dir, "data.mdb") != SIMSTORE_OK)
        return SIMSTORE_EINVAL;
    struct stat st;
    if (stat(c.mdb_path, &st) != 0) {
        /* Not a store at all, unless table files say it was one. */
        uint64_t *ids;
        unsigned *counts;
        int tables;
        table_segments(dir, &ids, &counts, &tables);
        free(ids);
        free(counts);
        if (!tables)
            return sims_fail(SIMSTORE_ENOTFOUND, "%s: not a store (no data.mdb)", dir);
        problem(v, SIMSTORE_PROBLEM_MISSING, 0, c.mdb_path, -1, -1, "%s: missing", c.mdb_path);
        check_tables_standalone(v, &c);
        free_segments(&c);
        return SIMSTORE_OK;
    }

    sims_lmdb_summary walk;
    int lmdb_ok = walk_lmdb(v, c.mdb_path, &walk);
    int records_ok = 0;
    if (lmdb_ok && !v->stop_rc) {
        sims_error_clear();
        int rc = sims_env_open(&c.env, dir, SIMS_ENV_READONLY | SIMS_ENV_TRUST);
        if (rc) {
            problem(v, rc == SIMSTORE_ECORRUPT ? SIMSTORE_PROBLEM_LMDB : SIMSTORE_PROBLEM_IO, 0,
                    c.mdb_path, -1, -1, "%s: %s", c.mdb_path, detail(rc));
        } else {
            c.env_open = 1;
            rc = sims_env_read_begin(&c.env, &c.txn);
            if (rc)
                problem(v, SIMSTORE_PROBLEM_IO, 0, c.mdb_path, -1, -1, "%s: %s", c.mdb_path,
                        detail(rc));
            else
                records_ok = check_records(v, &c, &walk);
        }
    }

    if (records_ok && !v->stop_rc) {
        /* The document segments, then the paragraph segments. */
        uint32_t n = c.state.segment_count, np = c.state.para_segment_count;
        uint64_t *ids = calloc(n + np ? n + np : 1, sizeof *ids);
        uint64_t *fpc = calloc(n + np ? n + np : 1, sizeof *fpc);
        unsigned *counts = calloc(n + np ? n + np : 1, sizeof *counts);
        if (!ids || !counts || !fpc) {
            problem(v, SIMSTORE_PROBLEM_IO, 0, dir, -1, -1, "out of memory");
        } else {
            for (uint32_t i = 0; i < n + np; i++) {
                const sims_segment_entry *e =
                    i < n ? &c.state.segments[i] : &c.state.para_segments[i - n];
                ids[i] = e->id;
                counts[i] = e->table_count;
                fpc[i] = e->fp_count;
            }
            check_segments(v, &c, 1, ids, counts, fpc, n + np);
            c.ndoc_segs = c.nsegs < n ? c.nsegs : n;
        }
        free(ids);
        free(fpc);
        free(counts);

        /* Counts (cheap: LMDB's own entry counts) and cross-checks. */
        MDB_stat ds, fs;
        uint64_t held = 0;
        for (uint32_t i = 0; i < n; i++) {
            held += c.state.segments[i].fp_count;
            if (c.state.segments[i].flags & SIMS_SEGMENT_FLAG_DOCFILE)
                c.docfile = 1;
        }
        if (c.docfile && !v->stop_rc)
            check_docfile(v, &c);
        if (!c.docfile && !v->stop_rc && mdb_stat(c.txn, c.env.docs, &ds) == 0 &&
            mdb_stat(c.txn, c.env.fps, &fs) == 0) {
            if (c.state.doc_count != ds.ms_entries)
                problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c.mdb_path, -1, -1,
                        "%s: the state records %" PRIu64 " documents, docs holds %zu", c.mdb_path,
                        c.state.doc_count, ds.ms_entries);
            if (fs.ms_entries != ds.ms_entries)
                problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c.mdb_path, -1, -1,
                        "%s: docs holds %zu documents, fps %zu (fingerprint, id) entries",
                        c.mdb_path, ds.ms_entries, fs.ms_entries);
            if (!c.fp_only && c.state.fp_count > held)
                problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c.mdb_path, -1, -1,
                        "%s: the state records %" PRIu64 " live fingerprints, its segments hold "
                        "only %" PRIu64,
                        c.mdb_path, c.state.fp_count, held);
        }
        if (!(v->flags & SIMSTORE_VERIFY_QUICK) && !v->stop_rc) {
            uint64_t docs_seen = 0, fps_keys = 0;
            check_documents(v, &c, &docs_seen, &fps_keys);
            if (c.env.pfps && !v->stop_rc)
                check_paragraphs(v, &c);
            int complete;
            uint64_t distinct = check_membership(v, &c, &complete);
            if (c.dreader && c.docfile_changed && !v->stop_rc)
                check_docfile_changes(v, &c, docs_seen);
            if (!c.fp_only && !c.docfile && fps_keys != c.state.fp_count && !v->stop_rc)
                problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c.mdb_path, -1, -1,
                        "%s: the state records %" PRIu64
                        " distinct fingerprints, fps holds %" PRIu64,
                        c.mdb_path, c.state.fp_count, fps_keys);
            if (c.fp_only && complete && distinct != c.state.fp_count && !v->stop_rc)
                problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c.mdb_path, -1, -1,
                        "%s: the state records %" PRIu64
                        " fingerprints, the segments hold %" PRIu64,
                        c.mdb_path, c.state.fp_count, distinct);
        } else if (c.fp_only && c.state.fp_count != held && !v->stop_rc) {
            problem(v, SIMSTORE_PROBLEM_COUNTS, 0, c.mdb_path, -1, -1,
                    "%s: the state records %" PRIu64 " fingerprints, its segments %" PRIu64,
                    c.mdb_path, c.state.fp_count, held);
        }
    } else if (!v->stop_rc) {
        check_tables_standalone(v, &c);
    }
    if (!v->stop_rc)
        check_log(v, &c, records_ok);
    if (!v->stop_rc)
        check_leftovers(v, &c);

    free_segments(&c);
    sims_docfile_close(c.dreader);
    if (c.txn)
        mdb_txn_abort(c.txn);
    if (c.env_open)
        sims_env_close(&c.env);
    if (c.have_state)
        sims_state_record_release(&c.state);
    free(c.design);
    return SIMSTORE_OK;
}

static int verify_table_file(vctx *v, const char *path)
{
    table_result t;
    memset(&t, 0, sizeof t);
    snprintf(t.path, sizeof t.path, "%s", path);
    check_table(v, &t, NULL, 0);
    release_table(&t);
    return SIMSTORE_OK;
}

/* Verify the store `dir` into v: again, from a new snapshot, while an
 * attempt finds errors and a writer committed during it (a compaction
 * removes the files of the state it replaced once it has committed: not
 * damage). The last attempt's problems go to v->fn. */
static int verify_store_settled(vctx *v, const char *dir)
{
    char mdb[PATH_MAX];
    int rc = sims_join_path(mdb, sizeof mdb, dir, "data.mdb");
    if (rc)
        return rc;
    simstore_verify_summary *out = v->sum;
    double start = sims_retry_clock();
    for (unsigned attempt = 0;; attempt++) {
        /* A writer committed during the attempt when the newest
         * transaction on the meta pages changed across it (damaged meta
         * pages of a store no writer touches read the same twice). */
        uint64_t before = newest_txnid(mdb);
        held_problems held = {NULL, 0, 0};
        vctx a;
        memset(&a, 0, sizeof a);
        simstore_verify_summary sum;
        memset(&sum, 0, sizeof sum);
        a.fn = hold_problem;
        a.ctx = &held;
        a.sum = &sum;
        a.flags = v->flags;
        rc = verify_store(&a, dir);
        int moved = newest_txnid(mdb) != before;
        if (rc == SIMSTORE_OK && a.stop_rc == 0 && sum.errors && moved &&
            sims_retry_more(attempt + 1, SIMS_READ_ATTEMPTS, start, 1)) {
            held_free(&held);
            sims_retry_pause(attempt + 1);
            continue;
        }
        if (rc == SIMSTORE_OK && a.stop_rc)
            rc = a.stop_rc; /* out of memory holding the problems */
        /* The last attempt stands: its counts, and its problems to fn. */
        *out = sum;
        out->attempts = attempt + 1;
        memcpy(v->first_error, a.first_error, sizeof v->first_error);
        memcpy(v->listed, a.listed, sizeof v->listed);
        memcpy(v->unlisted, a.unlisted, sizeof v->unlisted);
        memcpy(v->unlisted_errors, a.unlisted_errors, sizeof v->unlisted_errors);
        for (size_t i = 0; rc == SIMSTORE_OK && i < held.n && !v->stop_rc && v->fn; i++) {
            const held_problem *q = &held.v[i];
            simstore_problem p = {q->kind, q->warning, q->file, q->block, q->offset, q->message};
            emit(v, &p);
        }
        held_free(&held);
        return rc;
    }
}

int simstore_verify(const char *path, unsigned flags, simstore_problem_fn fn, void *ctx,
                    simstore_verify_summary *summary)
{
    simstore_verify_summary local;
    vctx v;
    memset(&v, 0, sizeof v);
    v.sum = summary ? summary : &local;
    memset(v.sum, 0, sizeof *v.sum);
    v.sum->attempts = 1;
    v.fn = fn;
    v.ctx = ctx;
    v.flags = flags;
    if (!path)
        return sims_fail(SIMSTORE_EINVAL, "simstore_verify: path is NULL");
    if (flags & ~SIMSTORE_VERIFY_QUICK)
        return sims_fail(SIMSTORE_EINVAL, "simstore_verify: unknown flags %#x", flags);
    if (strlen(path) >= PATH_MAX - 32)
        return sims_fail(SIMSTORE_EINVAL, "%s: path too long", path);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return sims_fail(SIMSTORE_ENOTFOUND, "%s: no such store or table file", path);
        return sims_fail_errno("%s", path);
    }
    int rc;
    if (S_ISDIR(st.st_mode))
        rc = verify_store_settled(&v, path);
    else if (S_ISREG(st.st_mode))
        rc = verify_table_file(&v, path);
    else
        return sims_fail(SIMSTORE_ENOTFOUND, "%s: neither a store directory nor a table file",
                         path);
    if (rc)
        return rc;
    for (unsigned k = 0; k < KIND_COUNT && !v.stop_rc; k++)
        if (v.unlisted[k] && v.fn) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "%s: %" PRIu64 " more problems of this kind (%" PRIu64 " errors), not listed",
                     path, v.unlisted[k], v.unlisted_errors[k]);
            /* A warning when every problem it stands for was one. */
            simstore_problem p = {
                (simstore_problem_kind)k, v.unlisted_errors[k] == 0, path, -1, -1, msg};
            emit(&v, &p);
        }
    if (v.stop_rc)
        return v.stop_rc;
    if (v.sum->errors)
        return sims_fail(SIMSTORE_ECORRUPT, "%s", v.first_error);
    sims_error_clear();
    return SIMSTORE_OK;
}
