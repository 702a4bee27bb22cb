/* live.c: live stores (simstore_live_*): a store held for online writes,
 * its write-ahead log and the in-memory tables in front of it.
 *
 * Locks, outermost first:
 *  - maint_mu: one flush or compaction at a time;
 *  - write_mu: the decisions of changes. Each change checks the store and
 *    the tables, enqueues its log record and applies it to the active table
 *    under it, so records are numbered, and replayed, in decision order; it
 *    waits for the disk after releasing it (writers share fsyncs);
 *  - mem_lock (rwlock): the tables. Readers hold it to search them;
 *    writers to apply a change; flushes to swap tables (pointer swaps).
 *
 * Visibility. A change applied but not yet durable is seen by writers'
 * decisions (so two near-duplicates cannot both be inserted) but not by
 * readers: they see the changes up to visible_seq, which a writer raises
 * once its record is durable.
 *
 * Consistency of answers. The store changes only by flushes (compactions
 * change no answer). A reader queries the store, then searches the tables
 * and lets them override the store per id (newest first: active, frozen).
 * flush_commits counts flushes committed; a table is dropped only after its
 * flush committed and the count rose, under mem_lock. An answer is kept
 * only when no flush committed between the reader's first look at the count
 * and its search of the tables, else it is made again: so the store state
 * it read and the tables it searched always cover every change once. */
#include "live/change.h"
#include "live/memtable.h"
#include "wal/wal.h"

#include "common/error.h"
#include "common/grow.h"
#include "store/store_internal.h"
#include "simstore.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define WAL_NAME SIMS_STORE_WAL_NAME
#define ALL_CHANGES UINT64_MAX

struct simstore_live {
    simstore *s;
    simstore_live_options opt;
    unsigned k;
    simstore_sketch_kind sketch;
    sims_wal *wal;
    pthread_mutex_t maint_mu;
    pthread_mutex_t write_mu;
    pthread_rwlock_t mem_lock;
    /* Under mem_lock. */
    sims_memtable *active; /* takes the changes                          */
    sims_memtable *frozen; /* being flushed (or left by a failed flush)  */
    uint64_t flush_commits;
    /* Atomics. */
    _Atomic uint64_t visible_seq;
    atomic_int broken; /* a change was logged but could not be applied */
    /* The log's failures (fail_mu): a group the log could not write is
     * recovered at once (recover_log): the log cut back to its durable
     * records, the tables made again from them, and the sequence numbers
     * after them given again. log_epoch counts recoveries; a writer keeps
     * the epoch it decided in beside the number it waits for, and
     * lost_from[e] is the first number recovery e + 1 gave again, so a
     * waiter of epoch e whose number is at or past it lost its change. */
    pthread_mutex_t fail_mu;
    _Atomic uint64_t log_epoch;
    uint64_t *lost_from;
    size_t lost_cap;
    int write_failing; /* the last group the log wrote failed   */
    char failure[256]; /* why, or why the last flush failed     */
    _Atomic uint64_t flushes, compactions, inserts, deletes;
    _Atomic uint64_t applied_seq; /* the store's applied WAL sequence number */
    uint64_t replayed;
    /* Store lookups of writers: a pool of query objects. */
    pthread_mutex_t pool_mu;
    simstore_query **pool;
    size_t pool_len, pool_cap;
    /* The flush thread. */
    pthread_mutex_t flush_mu;
    pthread_cond_t flush_cv;
    /* Under flush_mu: writers waiting for room (wait_for_room) wait on
     * room_cv, which the flush thread broadcasts after each flush;
     * flush_failed tells them its last flush failed. */
    pthread_cond_t room_cv;
    int flush_failed;
    char flush_failure[256];
    int flush_stop;
    int flush_started;
    pthread_t flush_thread;
};

struct simstore_live_query {
    simstore_live *live;
    unsigned flags;
    simstore_query *sq;
    simstore_match *matches;
    size_t match_len, match_cap;
    /* Per match: offsets + 1 into arena of the id, metadata and sketch of
     * a document from memory (0: not from the arena). */
    size_t (*offs)[3];
    size_t offs_cap;
    char *arena;
    size_t arena_len, arena_cap;
    /* simstore_live_apply_batch(): the answers of earlier changes of the
     * batch (matches and arena bytes below these) are kept, and matches
     * from the store are copied into the arena (the next store query
     * reuses the store's buffers). 0 outside a batch. */
    size_t keep_matches, keep_arena;
    int copy_store;
    /* simstore_live_get's document from the store. */
    int got;
    simstore_document doc;
};

void simstore_live_options_init(simstore_live_options *o)
{
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    o->memtable_bytes = (uint64_t)64 << 20;
    o->background_flush = 1;
    o->memory_bytes = (uint64_t)256 << 20;
}

simstore *simstore_live_store(simstore_live *live)
{
    return live->s;
}

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t read_commits(simstore_live *live)
{
    pthread_rwlock_rdlock(&live->mem_lock);
    uint64_t c = live->flush_commits;
    pthread_rwlock_unlock(&live->mem_lock);
    return c;
}

/* The newest change of id in the tables (active first) with a sequence
 * number <= visible, or NULL. mem_lock held. */
static const sims_mt_doc *find_change(const simstore_live *live, const char *id, size_t len,
                                      uint64_t visible)
{
    const sims_mt_doc *d = sims_memtable_find(live->active, id, len, visible);
    if (!d && live->frozen)
        d = sims_memtable_find(live->frozen, id, len, visible);
    return d;
}

static void raise_visible(simstore_live *live, uint64_t seq)
{
    uint64_t v = atomic_load(&live->visible_seq);
    while (v < seq && !atomic_compare_exchange_weak(&live->visible_seq, &v, seq))
        ;
}

static int pool_take(simstore_live *live, simstore_query **out)
{
    pthread_mutex_lock(&live->pool_mu);
    simstore_query *q = live->pool_len ? live->pool[--live->pool_len] : NULL;
    pthread_mutex_unlock(&live->pool_mu);
    *out = q;
    return q ? SIMSTORE_OK : simstore_query_new(live->s, 0, out);
}

static void pool_give(simstore_live *live, simstore_query *q)
{
    pthread_mutex_lock(&live->pool_mu);
    if (sims_grow((void **)&live->pool, &live->pool_cap, live->pool_len + 1, sizeof *live->pool,
                  8)) {
        pthread_mutex_unlock(&live->pool_mu);
        simstore_query_free(q);
        return;
    }
    live->pool[live->pool_len++] = q;
    pthread_mutex_unlock(&live->pool_mu);
}

/* An id to look up or delete: any of 1..511 bytes (an older version may
 * have stored it). */
static int check_id(const char *id, size_t len)
{
    if (!id || len == 0 || len > SIMSTORE_MAX_ID_BYTES)
        return sims_fail(SIMSTORE_EINVAL, "a document id of %zu bytes (1 to %u allowed)", len,
                         SIMSTORE_MAX_ID_BYTES);
    return SIMSTORE_OK;
}

/* An id to insert: the id rule. */
static int check_new_id(const char *id, size_t len)
{
    int rc = check_id(id, len);
    const char *why = rc ? NULL : simstore_id_problem(id, len);
    if (why)
        return sims_fail(SIMSTORE_EINVAL, "document id '%s': %s", sims_excerpt(id, len).text, why);
    return rc;
}

/* The change of inserting doc, checked as an add's builder checks it. */
static int doc_change(const simstore_live *live, const simstore_doc *doc, sims_change *c)
{
    if (!doc)
        return sims_fail(SIMSTORE_EINVAL, "no document");
    int rc = check_new_id(doc->id, doc->id_len);
    if (rc)
        return rc;
    size_t meta_len = doc->meta ? doc->meta_len : 0;
    if (meta_len > SIMSTORE_MAX_META_BYTES)
        return sims_fail(SIMSTORE_EINVAL, "metadata of %zu bytes (at most %u allowed)", meta_len,
                         SIMSTORE_MAX_META_BYTES);
    if (doc->flags & ~SIMSTORE_DOC_INTEGER_ID)
        return sims_fail(SIMSTORE_EINVAL, "unknown document flags 0x%x", doc->flags);
    if (doc->n_paragraphs)
        return sims_fail(SIMSTORE_EINVAL, "document '%.*s' has paragraphs: a live store takes none",
                         (int)doc->id_len, doc->id);
    if (live->sketch != SIMSTORE_SKETCH_NONE && !doc->sketch)
        return sims_fail(SIMSTORE_EINVAL,
                         "document '%.*s' has no sketch: this store keeps a %s sketch of every "
                         "document",
                         (int)doc->id_len, doc->id, simstore_sketch_name(live->sketch));
    if (live->sketch == SIMSTORE_SKETCH_NONE && doc->sketch)
        return sims_fail(SIMSTORE_EINVAL,
                         "document '%.*s' comes with a sketch: this store keeps none",
                         (int)doc->id_len, doc->id);
    memset(c, 0, sizeof *c);
    c->type = SIMS_CHANGE_INSERT;
    c->id = doc->id;
    c->id_len = doc->id_len;
    c->fp = doc->fp;
    c->flags = doc->flags & SIMSTORE_DOC_INTEGER_ID ? SIMS_CHANGE_FLAG_INTEGER_ID : 0;
    c->sketch_kind = (unsigned)live->sketch;
    c->sketch = doc->sketch;
    c->meta = meta_len ? doc->meta : NULL;
    c->meta_len = meta_len;
    return SIMSTORE_OK;
}

static void wake_flusher(simstore_live *live)
{
    if (!live->flush_started)
        return;
    pthread_mutex_lock(&live->flush_mu);
    pthread_cond_signal(&live->flush_cv);
    pthread_mutex_unlock(&live->flush_mu);
}

/* Whether the active table is past its limit (with a flush thread; a
 * caller that flushes itself decides when). */
static int memory_full(simstore_live *live)
{
    if (!live->flush_started)
        return 0;
    pthread_rwlock_rdlock(&live->mem_lock);
    /* An empty table is never full: the flush thread has nothing to freeze. */
    int full = sims_memtable_count(live->active) > 0 &&
               sims_memtable_fill_bytes(live->active) >= live->opt.memtable_bytes;
    pthread_rwlock_unlock(&live->mem_lock);
    return full;
}

/* Before a change (no lock held): while the active table is past its limit,
 * wait for the flush thread to freeze it (at once, unless the frozen table
 * before it is still being written), so that the two tables hold at most
 * about twice memtable_bytes. SIMSTORE_EFULL when the flush thread's last
 * flush failed (it tries again a second later) or it has stopped. */
static int wait_for_room(simstore_live *live)
{
    if (!memory_full(live))
        return SIMSTORE_OK;
    int rc = SIMSTORE_OK;
    pthread_mutex_lock(&live->flush_mu);
    while (rc == SIMSTORE_OK && memory_full(live)) {
        if (live->flush_stop || live->flush_failed)
            rc = sims_fail(SIMSTORE_EFULL,
                           "the in-memory tables are full (%" PRIu64 " bytes each) and %s",
                           live->opt.memtable_bytes,
                           live->flush_stop ? "the live store is closing"
                                            : "the last flush failed (it is tried again each "
                                              "second)");
        else
            pthread_cond_wait(&live->room_cv, &live->flush_mu);
    }
    pthread_mutex_unlock(&live->flush_mu);
    return rc;
}

/* Wake the writers waiting for room (flush_mu not held). */
static void room_made(simstore_live *live)
{
    pthread_mutex_lock(&live->flush_mu);
    pthread_cond_broadcast(&live->room_cv);
    pthread_mutex_unlock(&live->flush_mu);
}

/* What a writer waits for before it answers: the sequence number of the
 * record its answer rests on (0: none), in the log's epoch it was decided
 * in (see log_epoch). */
typedef struct live_ticket {
    uint64_t seq;
    uint64_t epoch;
} live_ticket;

/* The ticket of seq, decided now (write_mu held). */
static live_ticket ticket_of(simstore_live *live, uint64_t seq)
{
    live_ticket t = {seq, atomic_load(&live->log_epoch)};
    return t;
}

/* With write_mu held: log change c and apply it to the active table. *t
 * receives its ticket (to wait for, after write_mu). */
static int log_and_apply(simstore_live *live, const sims_change *c, live_ticket *t)
{
    *t = ticket_of(live, 0);
    if (atomic_load(&live->broken))
        return sims_fail(SIMSTORE_EIO, "an earlier change was logged but could not be applied; "
                                       "open the live store again");
    uint64_t seq = 0;
    size_t n = sims_change_size(c);
    uint8_t small[1024];
    uint8_t *payload = n <= sizeof small ? small : malloc(n);
    if (!payload)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a change");
    sims_change_encode(c, payload);
    /* Room first, so that a change logged is a change applied. */
    pthread_rwlock_wrlock(&live->mem_lock);
    int rc = sims_memtable_reserve(live->active);
    pthread_rwlock_unlock(&live->mem_lock);
    if (rc == SIMSTORE_OK)
        rc = sims_wal_enqueue(live->wal, c->type, payload, n, &seq);
    if (payload != small)
        free(payload);
    if (rc)
        return rc; /* a failed log refuses changes until recover_log() */
    *t = ticket_of(live, seq);
    pthread_rwlock_wrlock(&live->mem_lock);
    rc = sims_memtable_apply(live->active, c, seq);
    uint64_t bytes = sims_memtable_fill_bytes(live->active);
    pthread_rwlock_unlock(&live->mem_lock);
    if (rc) {
        /* Logged, not applied: the tables no longer tell the log's story.
         * Refuse changes until an open replays the log. */
        atomic_store(&live->broken, 1);
        return rc;
    }
    if (bytes >= live->opt.memtable_bytes)
        wake_flusher(live);
    return SIMSTORE_OK;
}

/* Whether the change of ticket t was lost: a recovery since it was decided
 * gave its sequence number again. */
static int ticket_lost(simstore_live *live, live_ticket t)
{
    if (atomic_load(&live->log_epoch) == t.epoch)
        return 0;
    pthread_mutex_lock(&live->fail_mu);
    int lost = t.seq >= live->lost_from[t.epoch];
    pthread_mutex_unlock(&live->fail_mu);
    return lost;
}

/* Note the outcome of a wait for the log: a failure's reason, or that the
 * log writes again. */
static void note_log_write(simstore_live *live, int rc)
{
    pthread_mutex_lock(&live->fail_mu);
    if (rc) {
        live->write_failing = 1;
        snprintf(live->failure, sizeof live->failure, "%s", simstore_last_error());
    } else if (live->write_failing) {
        live->write_failing = 0;
        live->failure[0] = '\0';
    }
    pthread_mutex_unlock(&live->fail_mu);
}

/* Wait (write_mu released) for t's record to be durable, then make it
 * visible. A failed log answers SIMSTORE_EIO with the system's reason; the
 * caller, holding no lock, then calls recover_log(). */
static int wait_durable(simstore_live *live, live_ticket t)
{
    if (t.seq == 0)
        return SIMSTORE_OK;
    int rc = sims_wal_wait(live->wal, t.seq);
    if (ticket_lost(live, t))
        rc = sims_fail(SIMSTORE_EIO, "the change was not logged: %s",
                       rc ? simstore_last_error() : "the log failed meanwhile");
    if (rc) {
        note_log_write(live, rc);
        return rc;
    }
    note_log_write(live, SIMSTORE_OK);
    raise_visible(live, t.seq);
    return SIMSTORE_OK;
}

static void recover_log(simstore_live *live);

/* ---- answers ---------------------------------------------------------------- */

/* Copy bytes into q's arena: offset + 1 to *off. */
static int arena_put(simstore_live_query *q, const void *data, size_t len, size_t *off)
{
    if (sims_arena_put(&q->arena, &q->arena_cap, &q->arena_len, data, len, off))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for an answer");
    ++*off;
    return SIMSTORE_OK;
}

static simstore_match *push_match(simstore_live_query *q)
{
    if (sims_grow16((void **)&q->matches, &q->match_cap, q->match_len + 1, sizeof *q->matches) ||
        sims_grow16((void **)&q->offs, &q->offs_cap, q->match_len + 1, sizeof *q->offs))
        return NULL;
    memset(q->offs[q->match_len], 0, sizeof q->offs[0]);
    simstore_match *m = &q->matches[q->match_len++];
    memset(m, 0, sizeof *m);
    return m;
}

typedef struct answer_ctx {
    simstore_live_query *q;
    const sims_memtable *table;
    const sims_memtable *newer; /* a table whose changes override this one's */
    uint64_t visible;
    const uint8_t *sketch; /* the query's */
} answer_ctx;

static int add_memory_match(void *ctx, const sims_mt_doc *d, unsigned distance)
{
    answer_ctx *a = (answer_ctx *)ctx;
    simstore_live_query *q = a->q;
    const char *id = sims_mt_doc_id(d);
    if (d->seq > a->visible || sims_memtable_find(a->table, id, d->id_len, a->visible) != d)
        return 0; /* not seen yet, or superseded here */
    if (a->newer && sims_memtable_find(a->newer, id, d->id_len, a->visible))
        return 0; /* superseded by the newer table */
    simstore_match *m = push_match(q);
    if (!m)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for an answer");
    size_t *offs = q->offs[q->match_len - 1];
    int rc = arena_put(q, id, d->id_len, &offs[0]);
    m->id_len = d->id_len;
    m->fp = d->fp;
    m->distance = distance;
    m->flags = d->flags & SIMS_CHANGE_FLAG_INTEGER_ID ? SIMSTORE_MATCH_INTEGER_ID : 0;
    m->insertion = 0;
    m->similarity = SIMSTORE_SIMILARITY_UNKNOWN;
    const char *meta = sims_mt_doc_meta(d);
    if (rc == SIMSTORE_OK && meta && (q->flags & SIMSTORE_QUERY_WITH_META)) {
        rc = arena_put(q, meta, d->meta_len, &offs[1]);
        m->meta_len = d->meta_len;
    }
    const uint8_t *sketch = sims_mt_doc_sketch(d);
    if (rc == SIMSTORE_OK && sketch) {
        rc = arena_put(q, sketch, d->sketch_len, &offs[2]);
        if (a->sketch)
            m->similarity =
                simstore_sketch_similarity((simstore_sketch_kind)d->sketch_kind, a->sketch, sketch);
    }
    return rc;
}

/* Point the matches at their bytes in the arena (which may have moved). */
static void point_into_arena(simstore_live_query *q)
{
    for (size_t i = 0; i < q->match_len; i++) {
        simstore_match *m = &q->matches[i];
        if (q->offs[i][0])
            m->id = q->arena + q->offs[i][0] - 1;
        if (q->offs[i][1])
            m->meta = q->arena + q->offs[i][1] - 1;
        if (q->offs[i][2])
            m->sketch = (const uint8_t *)q->arena + q->offs[i][2] - 1;
    }
}

/* Copy the bytes of m, the last match, a store's, into the arena. */
static int copy_store_match(simstore_live_query *q, const simstore_match *m)
{
    size_t *offs = q->offs[q->match_len - 1];
    int rc = arena_put(q, m->id, m->id_len, &offs[0]);
    if (rc == SIMSTORE_OK && m->meta)
        rc = arena_put(q, m->meta, m->meta_len, &offs[1]);
    if (rc == SIMSTORE_OK && m->sketch)
        rc = arena_put(q, m->sketch, simstore_sketch_bytes(q->live->sketch), &offs[2]);
    return rc;
}

/* With mem_lock held: the answer from the store's matches (sm, sn) and the
 * tables, in q->matches. */
static int make_answer(simstore_live_query *q, const simstore_match *sm, size_t sn, uint64_t fp,
                       const uint8_t *sketch, unsigned k, uint64_t visible)
{
    simstore_live *live = q->live;
    q->match_len = q->keep_matches;
    q->arena_len = q->keep_arena;
    for (size_t i = 0; i < sn; i++) {
        if (find_change(live, sm[i].id, sm[i].id_len, visible))
            continue; /* changed since: the tables tell */
        simstore_match *m = push_match(q);
        if (!m)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory for an answer");
        *m = sm[i];
        if (q->copy_store) {
            int rc = copy_store_match(q, m);
            if (rc)
                return rc;
        }
    }
    answer_ctx a = {q, live->active, NULL, visible, sketch};
    int rc = sims_memtable_query(live->active, fp, k, add_memory_match, &a);
    if (rc == SIMSTORE_OK && live->frozen) {
        a.table = live->frozen;
        a.newer = live->active;
        rc = sims_memtable_query(live->frozen, fp, k, add_memory_match, &a);
    }
    if (rc)
        return rc;
    point_into_arena(q);
    if (q->match_len > q->keep_matches) /* q->matches may be NULL: no NULL + 0 */
        sims_sort_matches(q->matches + q->keep_matches, q->match_len - q->keep_matches);
    if (q->copy_store) /* every byte is in the arena: the offsets follow the sort */
        for (size_t i = q->keep_matches; i < q->match_len; i++) {
            const simstore_match *m = &q->matches[i];
            q->offs[i][0] = (size_t)(m->id - q->arena) + 1;
            q->offs[i][1] = m->meta ? (size_t)(m->meta - q->arena) + 1 : 0;
            q->offs[i][2] = m->sketch ? (size_t)((const char *)m->sketch - q->arena) + 1 : 0;
        }
    return SIMSTORE_OK;
}

int simstore_live_query_new(simstore_live *live, unsigned flags, simstore_live_query **out)
{
    *out = NULL;
    simstore_live_query *q = calloc(1, sizeof *q);
    if (!q)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    q->live = live;
    q->flags = flags;
    int rc = simstore_query_new(live->s, flags, &q->sq);
    if (rc) {
        free(q);
        return rc;
    }
    *out = q;
    return SIMSTORE_OK;
}

void simstore_live_query_free(simstore_live_query *q)
{
    if (!q)
        return;
    simstore_query_free(q->sq);
    free(q->matches);
    free(q->offs);
    free(q->arena);
    free(q);
}

int simstore_live_query_fp(simstore_live_query *q, uint64_t fp, const uint8_t *sketch, unsigned k,
                           const simstore_match **matches, size_t *count)
{
    *matches = NULL;
    *count = 0;
    simstore_live *live = q->live;
    if (live->sketch == SIMSTORE_SKETCH_NONE)
        sketch = NULL;
    for (;;) {
        uint64_t commits = read_commits(live);
        const simstore_match *sm;
        size_t sn;
        int rc = simstore_query_fp_sketch(q->sq, fp, sketch, k, &sm, &sn);
        if (rc)
            return rc;
        pthread_rwlock_rdlock(&live->mem_lock);
        if (live->flush_commits != commits) {
            pthread_rwlock_unlock(&live->mem_lock);
            continue; /* a flush committed meanwhile: ask again */
        }
        rc = make_answer(q, sm, sn, fp, sketch, k, atomic_load(&live->visible_seq));
        pthread_rwlock_unlock(&live->mem_lock);
        if (rc)
            return rc;
        *matches = q->matches;
        *count = q->match_len;
        return SIMSTORE_OK;
    }
}

/* ---- changes ---------------------------------------------------------------- */

/* With write_mu and mem_lock held: whether a document has the id, from the
 * tables (every change, durable or not) or else the store's answer
 * (in_store). *seq gets the sequence number of the change that says so (0:
 * the store). */
static int id_exists(const simstore_live *live, const char *id, size_t len, int in_store,
                     uint64_t *seq)
{
    const sims_mt_doc *d = find_change(live, id, len, ALL_CHANGES);
    *seq = d ? d->seq : 0;
    return d ? !d->is_delete : in_store;
}

/* Decide c, an insert (the id must not exist) or a delete (it must), on
 * the id's existence in the store (looked up through sq) and in every
 * change, the two read from one committed state (retried when a flush
 * commits between), and log and apply it when the rule holds. *wait gets
 * the sequence number the answer rests on: the change's own record, or the
 * change that says the id exists or not (0: the store says so); the answer
 * may be given once it is durable. Returns SIMSTORE_OK (logged and
 * applied), SIMSTORE_EEXIST or SIMSTORE_ENOTFOUND (the rule fails: nothing
 * logged), or an error. */
static int decide_change(simstore_live *live, simstore_query *sq, const sims_change *c,
                         live_ticket *wait)
{
    int must_exist = c->type == SIMS_CHANGE_DELETE;
    *wait = ticket_of(live, 0);
    for (;;) {
        uint64_t commits = read_commits(live);
        int in_store = simstore_query_has_id(sq, c->id, c->id_len, NULL);
        if (in_store < 0)
            return in_store;
        pthread_mutex_lock(&live->write_mu);
        pthread_rwlock_rdlock(&live->mem_lock);
        if (live->flush_commits != commits) {
            pthread_rwlock_unlock(&live->mem_lock);
            pthread_mutex_unlock(&live->write_mu);
            continue;
        }
        uint64_t id_seq = 0;
        int exists = id_exists(live, c->id, c->id_len, in_store, &id_seq);
        *wait = ticket_of(live, id_seq);
        pthread_rwlock_unlock(&live->mem_lock);
        if (exists != must_exist) {
            pthread_mutex_unlock(&live->write_mu);
            return must_exist ? sims_fail(SIMSTORE_ENOTFOUND, "no document has id '%.*s'",
                                          (int)c->id_len, c->id)
                              : sims_fail(SIMSTORE_EEXIST, "a document with id '%.*s' exists",
                                          (int)c->id_len, c->id);
        }
        int rc = log_and_apply(live, c, wait);
        pthread_mutex_unlock(&live->write_mu);
        return rc;
    }
}

/* decide_change() through a pooled store query, answered once durable. */
static int change_if(simstore_live *live, const sims_change *c)
{
    int rc = wait_for_room(live);
    if (rc != SIMSTORE_OK)
        return rc;
    simstore_query *sq;
    rc = pool_take(live, &sq);
    if (rc != SIMSTORE_OK)
        return rc;
    live_ticket wait;
    rc = decide_change(live, sq, c, &wait);
    pool_give(live, sq);
    int durable = wait_durable(live, wait);
    if (durable)
        recover_log(live);
    return durable ? durable : rc;
}

int simstore_live_insert(simstore_live *live, const simstore_doc *doc)
{
    sims_change c;
    int rc = doc_change(live, doc, &c);
    if (rc == SIMSTORE_OK && (rc = change_if(live, &c)) == SIMSTORE_OK)
        atomic_fetch_add(&live->inserts, 1);
    return rc;
}

/* The change of deleting id. */
static int delete_change(const char *id, size_t id_len, sims_change *c)
{
    memset(c, 0, sizeof *c);
    c->type = SIMS_CHANGE_DELETE;
    c->id = id;
    c->id_len = id_len;
    return check_id(id, id_len);
}

int simstore_live_delete(simstore_live *live, const char *id, size_t id_len)
{
    sims_change c;
    int rc = delete_change(id, id_len, &c);
    if (rc == SIMSTORE_OK && (rc = change_if(live, &c)) == SIMSTORE_OK)
        atomic_fetch_add(&live->deletes, 1);
    return rc;
}

/* Keep only the matches of q's answer (from q->keep_matches on) that the
 * near-duplicate rule calls near-duplicates: the query found every
 * document within the rule's k, the rule may ask a similarity too. */
static void keep_near_duplicates(simstore_live_query *q, const simstore_near_rule *rule)
{
    size_t w = q->keep_matches;
    for (size_t i = q->keep_matches; i < q->match_len; i++) {
        if (!simstore_near_duplicate(rule, q->matches[i].distance, q->matches[i].similarity))
            continue;
        if (w != i) {
            q->matches[w] = q->matches[i];
            memcpy(q->offs[w], q->offs[i], sizeof q->offs[0]);
        }
        w++;
    }
    q->match_len = w;
}

/* Decide the insert c only if nothing is a near-duplicate of it by the
 * resolved rule, on every change (durable or not) and the store, read
 * from one committed state; log and apply it when so (*inserted 1). Else
 * the near-duplicates are q's answer (matches from q->keep_matches on).
 * *wait: the sequence number the answer rests on (the insert's record, or
 * the last change decided before a refusal). Returns SIMSTORE_OK,
 * SIMSTORE_EEXIST (nothing near, but the id exists: nothing logged), or an
 * error. */
static int decide_if_new(simstore_live_query *q, const sims_change *c,
                         const simstore_near_rule *rule, int *inserted, live_ticket *wait)
{
    unsigned k = rule->k;
    simstore_live *live = q->live;
    *inserted = 0;
    *wait = ticket_of(live, 0);
    for (;;) {
        uint64_t commits = read_commits(live);
        const simstore_match *sm;
        size_t sn;
        int rc = simstore_query_fp_sketch(q->sq, c->fp, c->sketch, k, &sm, &sn);
        if (rc)
            return rc;
        /* The store's matches stay valid: has_id uses q->sq's transaction
         * only, not its answer buffers. */
        int in_store = simstore_query_has_id(q->sq, c->id, c->id_len, NULL);
        if (in_store < 0)
            return in_store;
        pthread_mutex_lock(&live->write_mu);
        pthread_rwlock_rdlock(&live->mem_lock);
        if (live->flush_commits != commits) {
            pthread_rwlock_unlock(&live->mem_lock);
            pthread_mutex_unlock(&live->write_mu);
            continue;
        }
        /* Decide on every change, durable or not (ALL_CHANGES): a
         * near-duplicate still on its way to the disk counts. */
        rc = make_answer(q, sm, sn, c->fp, c->sketch, k, ALL_CHANGES);
        if (rc == SIMSTORE_OK)
            keep_near_duplicates(q, rule);
        uint64_t id_seq = 0;
        int exists = rc == SIMSTORE_OK && id_exists(live, c->id, c->id_len, in_store, &id_seq);
        pthread_rwlock_unlock(&live->mem_lock);
        if (rc || q->match_len > q->keep_matches || exists) {
            /* No change: the answer rests on every change decided before
             * it, so it is given once they are durable. */
            *wait = ticket_of(live, rc ? 0 : sims_wal_last_seq(live->wal));
            pthread_mutex_unlock(&live->write_mu);
            if (rc == SIMSTORE_OK && q->match_len == q->keep_matches)
                rc = sims_fail(SIMSTORE_EEXIST, "a document with id '%.*s' exists", (int)c->id_len,
                               c->id);
            return rc;
        }
        rc = log_and_apply(live, c, wait);
        pthread_mutex_unlock(&live->write_mu);
        *inserted = rc == SIMSTORE_OK;
        return rc;
    }
}

/* The near-duplicate rule of live's insert-if-new: *in (NULL: the
 * defaults) resolved for the store, its k and sketches. */
static int live_near_rule(const simstore_live *live, const simstore_near_rule *in,
                          simstore_near_rule *out)
{
    if (in)
        *out = *in;
    else
        simstore_near_rule_init(out);
    return simstore_near_rule_resolve(out, live->k, live->sketch, SIMSTORE_NEAR_WITHOUT_BANDS);
}

int simstore_live_insert_if_new(simstore_live_query *q, const simstore_doc *doc,
                                const simstore_near_rule *near, int *inserted,
                                const simstore_match **matches, size_t *count)
{
    *inserted = 0;
    *matches = NULL;
    *count = 0;
    simstore_live *live = q->live;
    simstore_near_rule rule;
    int rc = live_near_rule(live, near, &rule);
    if (rc)
        return rc;
    sims_change c;
    rc = doc_change(live, doc, &c);
    if (rc)
        return rc;
    if ((rc = wait_for_room(live)) != SIMSTORE_OK)
        return rc;
    live_ticket wait;
    int made = 0;
    rc = decide_if_new(q, &c, &rule, &made, &wait);
    int durable = wait_durable(live, wait);
    if (durable) {
        recover_log(live);
        return durable;
    }
    if (rc)
        return rc;
    if (made)
        atomic_fetch_add(&live->inserts, 1);
    *inserted = made;
    *matches = q->matches;
    *count = q->match_len;
    return SIMSTORE_OK;
}

/* A change's own refusal, which ends no batch. */
static int refuses_change(int rc)
{
    return rc == SIMSTORE_EEXIST || rc == SIMSTORE_ENOTFOUND || rc == SIMSTORE_EINVAL;
}

/* One change of a batch: decided, logged and applied, not yet durable. */
static int batch_change(simstore_live_query *q, const simstore_live_change *ch,
                        const simstore_near_rule *rule, simstore_live_result *res,
                        live_ticket *wait)
{
    simstore_live *live = q->live;
    sims_change c;
    *wait = ticket_of(live, 0);
    int rc = wait_for_room(live);
    if (rc != SIMSTORE_OK)
        return rc;
    switch (ch->op) {
    case SIMSTORE_LIVE_INSERT:
        rc = doc_change(live, &ch->doc, &c);
        if (rc == SIMSTORE_OK)
            rc = decide_change(live, q->sq, &c, wait);
        res->applied = rc == SIMSTORE_OK;
        return rc;
    case SIMSTORE_LIVE_DELETE:
        rc = delete_change(ch->doc.id, ch->doc.id_len, &c);
        if (rc == SIMSTORE_OK)
            rc = decide_change(live, q->sq, &c, wait);
        res->applied = rc == SIMSTORE_OK;
        return rc;
    case SIMSTORE_LIVE_INSERT_IF_NEW:
        rc = doc_change(live, &ch->doc, &c);
        if (rc == SIMSTORE_OK)
            rc = decide_if_new(q, &c, rule, &res->applied, wait);
        if (rc == SIMSTORE_OK)
            res->count = q->match_len - q->keep_matches;
        return rc;
    }
    return sims_fail(SIMSTORE_EINVAL, "unknown live change %d", (int)ch->op);
}

int simstore_live_apply_batch(simstore_live_query *q, const simstore_live_change *changes,
                              size_t count, const simstore_near_rule *near,
                              simstore_live_result *results)
{
    simstore_live *live = q->live;
    if (count && (!changes || !results))
        return sims_fail(SIMSTORE_EINVAL, "no changes or no results");
    if (count)
        memset(results, 0, count * sizeof *results);
    /* A rule refused stops the batch at its first change. */
    simstore_near_rule rule;
    int rrc = live_near_rule(live, near, &rule);
    for (size_t i = 0; rrc && i < count; i++)
        results[i].rc = rrc;
    if (rrc)
        return rrc;
    q->match_len = q->arena_len = 0;
    q->keep_matches = q->keep_arena = 0;
    q->copy_store = 1;
    live_ticket wait = {0, 0};
    int rc = SIMSTORE_OK;
    size_t done = 0;
    for (; done < count; done++) {
        live_ticket w;
        int one = batch_change(q, &changes[done], &rule, &results[done], &w);
        if (w.seq && wait.seq && w.epoch != wait.epoch) {
            /* The log failed and was recovered during the batch: changes
             * decided before may be lost. */
            one = sims_fail(SIMSTORE_EIO, "the log failed during the batch: its changes may not "
                                          "be logged");
        } else if (w.seq > wait.seq || (w.seq && !wait.seq)) {
            wait = w;
        }
        if (one && !refuses_change(one)) {
            rc = one;
            break;
        }
        results[done].rc = one;
        if (one == SIMSTORE_OK) {
            q->keep_matches = q->match_len;
            q->keep_arena = q->arena_len;
        }
    }
    /* One wait for the batch: its records share the log's groups. */
    int durable = wait_durable(live, wait);
    if (durable && rc == SIMSTORE_OK)
        rc = durable;
    if (rc == SIMSTORE_EIO)
        recover_log(live);
    q->match_len = q->keep_matches;
    q->keep_matches = q->keep_arena = 0;
    q->copy_store = 0;
    point_into_arena(q);
    size_t off = 0;
    uint64_t inserts = 0, deletes = 0;
    for (size_t i = 0; i < count; i++) {
        simstore_live_result *res = &results[i];
        if (i >= done || durable) {
            memset(res, 0, sizeof *res);
            res->rc = rc;
            continue;
        }
        res->matches = res->count ? q->matches + off : NULL;
        off += res->count;
        if (res->applied && changes[i].op == SIMSTORE_LIVE_DELETE)
            deletes++;
        else if (res->applied)
            inserts++;
    }
    atomic_fetch_add(&live->inserts, inserts);
    atomic_fetch_add(&live->deletes, deletes);
    return rc;
}

/* ---- get -------------------------------------------------------------------- */

static int got_document(void *ctx, const simstore_document *d)
{
    simstore_live_query *q = (simstore_live_query *)ctx;
    q->got = !d->missing;
    if (d->missing)
        return 0;
    q->arena_len = 0;
    size_t id_off = 0, meta_off = 0, sketch_off = 0;
    int rc = arena_put(q, d->id, d->id_len, &id_off);
    if (rc == SIMSTORE_OK && d->meta)
        rc = arena_put(q, d->meta, d->meta_len, &meta_off);
    if (rc == SIMSTORE_OK && d->sketch)
        rc = arena_put(q, d->sketch, d->sketch_bytes, &sketch_off);
    if (rc)
        return rc;
    q->doc = *d;
    q->doc.id = q->arena + id_off - 1;
    q->doc.meta = meta_off ? q->arena + meta_off - 1 : NULL;
    q->doc.sketch = sketch_off ? (const uint8_t *)q->arena + sketch_off - 1 : NULL;
    return 0;
}

int simstore_live_get(simstore_live_query *q, const char *id, size_t id_len, simstore_document *doc)
{
    memset(doc, 0, sizeof *doc);
    int rc = check_id(id, id_len);
    if (rc)
        return rc;
    simstore_live *live = q->live;
    for (;;) {
        uint64_t commits = read_commits(live);
        q->got = 0;
        rc = simstore_get(live->s, &id, &id_len, 1, got_document, q);
        if (rc)
            return rc;
        pthread_rwlock_rdlock(&live->mem_lock);
        if (live->flush_commits != commits) {
            pthread_rwlock_unlock(&live->mem_lock);
            continue;
        }
        const sims_mt_doc *d = find_change(live, id, id_len, atomic_load(&live->visible_seq));
        if (d && d->is_delete) {
            q->got = 0;
        } else if (d) {
            q->arena_len = 0;
            size_t id_off = 0, meta_off = 0, sketch_off = 0;
            rc = arena_put(q, sims_mt_doc_id(d), d->id_len, &id_off);
            if (rc == SIMSTORE_OK && d->meta_len)
                rc = arena_put(q, sims_mt_doc_meta(d), d->meta_len, &meta_off);
            if (rc == SIMSTORE_OK && d->sketch_len)
                rc = arena_put(q, sims_mt_doc_sketch(d), d->sketch_len, &sketch_off);
            memset(&q->doc, 0, sizeof q->doc);
            q->doc.id = q->arena + id_off - 1;
            q->doc.id_len = d->id_len;
            q->doc.flags = d->flags & SIMS_CHANGE_FLAG_INTEGER_ID ? SIMSTORE_MATCH_INTEGER_ID : 0;
            q->doc.fp = d->fp;
            q->doc.meta = meta_off ? q->arena + meta_off - 1 : NULL;
            q->doc.meta_len = d->meta_len;
            q->doc.sketch = sketch_off ? (const uint8_t *)q->arena + sketch_off - 1 : NULL;
            q->doc.sketch_bytes = d->sketch_len;
            q->got = rc == SIMSTORE_OK;
        }
        pthread_rwlock_unlock(&live->mem_lock);
        if (rc)
            return rc;
        if (q->got)
            *doc = q->doc;
        return q->got;
    }
}

/* ---- flush ------------------------------------------------------------------ */

static void note_compaction(void *ctx, const simstore_compaction *c)
{
    (void)c;
    simstore_live *live = (simstore_live *)ctx;
    atomic_fetch_add(&live->compactions, 1);
}

static void maintenance_options(const simstore_live *live, simstore_build_options *o)
{
    simstore_build_options_init(o);
    o->memory_bytes = live->opt.memory_bytes;
    o->threads = live->opt.threads;
    o->compacted = note_compaction;
    o->compacted_ctx = (void *)live;
}

/* Write table t (frozen, durable) into the store: a delete of every id it
 * changes (the store's older versions; ids not stored are no harm), then an
 * add of its inserts, whose commit records t's last sequence number. */
static int write_table(simstore_live *live, const sims_memtable *t)
{
    size_t n = sims_memtable_count(t);
    const char **ids = malloc((n ? n : 1) * sizeof *ids);
    size_t *lens = malloc((n ? n : 1) * sizeof *lens);
    if (!ids || !lens) {
        free(ids);
        free(lens);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory flushing");
    }
    /* Each id once: its newest change. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const sims_mt_doc *d = sims_memtable_doc(t, i);
        if (sims_memtable_find(t, sims_mt_doc_id(d), d->id_len, ALL_CHANGES) == d) {
            ids[m] = sims_mt_doc_id(d);
            lens[m++] = d->id_len;
        }
    }
    int rc = m ? simstore_delete(live->s, ids, lens, m, NULL, NULL, NULL) : SIMSTORE_OK;
    free(ids);
    free(lens);
    if (rc)
        return rc;
    simstore_build_options o;
    maintenance_options(live, &o);
    simstore_builder *b;
    rc = simstore_add_begin(live->s, &o, &b);
    if (rc)
        return rc;
    /* Ids as they were logged (an older version's log may hold ids the id
     * rule now refuses: they were acknowledged). */
    sims_builder_take_logged_ids(b);
    for (size_t i = 0; i < n && rc == SIMSTORE_OK; i++) {
        const sims_mt_doc *d = sims_memtable_doc(t, i);
        if (d->is_delete || sims_memtable_find(t, sims_mt_doc_id(d), d->id_len, ALL_CHANGES) != d)
            continue;
        simstore_doc doc = {sims_mt_doc_id(d),   d->id_len,   d->fp,
                            sims_mt_doc_meta(d), d->meta_len, d->seq};
        doc.flags = d->flags & SIMS_CHANGE_FLAG_INTEGER_ID ? SIMSTORE_DOC_INTEGER_ID : 0;
        doc.sketch = sims_mt_doc_sketch(d);
        rc = simstore_builder_add(b, &doc);
    }
    if (rc == SIMSTORE_OK)
        rc = sims_builder_set_wal_applied(b, sims_memtable_last_seq(t));
    if (rc) {
        simstore_builder_abort(b);
        return rc;
    }
    return simstore_builder_finish(b);
}

/* One flush: of the frozen table left by a failed flush, else of the active
 * one (frozen now). *flushed: whether there was anything. maint_mu held. */
static int flush_once(simstore_live *live, int *flushed)
{
    *flushed = 0;
    if (atomic_load(&live->broken))
        return sims_fail(SIMSTORE_EIO, "the live store cannot flush: an earlier change was logged "
                                       "but could not be applied; open it again");
    sims_memtable *fresh = NULL;
    int rc = sims_memtable_new(live->k, &fresh);
    if (rc)
        return rc;
    /* Freeze under write_mu: the frozen table then holds exactly the
     * changes numbered up to its last. */
    pthread_mutex_lock(&live->write_mu);
    pthread_rwlock_wrlock(&live->mem_lock);
    sims_memtable *t = live->frozen;
    if (!t && sims_memtable_count(live->active)) {
        t = live->frozen = live->active;
        live->active = fresh;
        fresh = NULL;
    }
    pthread_rwlock_unlock(&live->mem_lock);
    pthread_mutex_unlock(&live->write_mu);
    if (!fresh)
        room_made(live); /* the active table is new */
    sims_memtable_free(fresh);
    if (!t)
        return SIMSTORE_OK;
    *flushed = 1;
    uint64_t last = sims_memtable_last_seq(t);
    /* Its changes may still be on their way to the disk (no recovery of
     * the log meanwhile: it takes maint_mu). */
    if ((rc = wait_durable(live, ticket_of(live, last))) != SIMSTORE_OK)
        return rc;
    if ((rc = write_table(live, t)) != SIMSTORE_OK)
        return rc;
    pthread_rwlock_wrlock(&live->mem_lock);
    live->flush_commits++;
    live->frozen = NULL;
    pthread_rwlock_unlock(&live->mem_lock);
    room_made(live);
    sims_memtable_free(t);
    atomic_fetch_add(&live->flushes, 1);
    atomic_store(&live->applied_seq, last);
    /* A crash before the trim leaves records the store has applied: the
     * next open skips them (format/store.md, "The state record"). */
    return sims_wal_trim(live->wal, last);
}

int simstore_live_flush(simstore_live *live)
{
    pthread_mutex_lock(&live->maint_mu);
    int flushed = 1, rc = SIMSTORE_OK;
    /* At most twice: a table left by a failed flush, then the active one. */
    for (int i = 0; i < 2 && flushed && rc == SIMSTORE_OK; i++)
        rc = flush_once(live, &flushed);
    pthread_mutex_unlock(&live->maint_mu);
    if (rc)
        recover_log(live);
    return rc;
}

int simstore_live_compact(simstore_live *live, int force)
{
    simstore_build_options o;
    maintenance_options(live, &o);
    pthread_mutex_lock(&live->maint_mu);
    int rc = force ? simstore_compact(live->s, &o) : simstore_maybe_compact(live->s, &o);
    pthread_mutex_unlock(&live->maint_mu);
    return rc;
}

static int needs_flush(simstore_live *live)
{
    pthread_rwlock_rdlock(&live->mem_lock);
    int need =
        live->frozen != NULL || sims_memtable_fill_bytes(live->active) >= live->opt.memtable_bytes;
    pthread_rwlock_unlock(&live->mem_lock);
    return need && !atomic_load(&live->broken);
}

/* After a flush (no lock held): compact when the store's rule says so
 * (simstore_maybe_compact). A failure is the next compaction's to retry;
 * answers never depend on it. */
static void compact_after_flush(simstore_live *live)
{
    if (simstore_live_compact(live, 0) != SIMSTORE_OK)
        sims_error_clear();
}

static void *flush_main(void *arg)
{
    simstore_live *live = (simstore_live *)arg;
    int failed = 0;
    pthread_mutex_lock(&live->flush_mu);
    while (!live->flush_stop) {
        if (!needs_flush(live) || failed) {
            /* After a failure, try again a second later (or when woken). */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            if (failed)
                pthread_cond_timedwait(&live->flush_cv, &live->flush_mu, &until);
            else
                pthread_cond_wait(&live->flush_cv, &live->flush_mu);
            failed = 0;
            continue;
        }
        pthread_mutex_unlock(&live->flush_mu);
        pthread_mutex_lock(&live->maint_mu);
        int flushed;
        int rc = flush_once(live, &flushed);
        pthread_mutex_unlock(&live->maint_mu);
        char why[256] = "";
        if (rc) {
            snprintf(why, sizeof why, "flushing into the store failed: %s", simstore_last_error());
            sims_error_clear();
            recover_log(live);
            failed = 1;
        } else if (flushed) {
            /* Each flush adds a segment: compact when they have piled up
             * (the store's rule), not on a timer. */
            compact_after_flush(live);
        }
        pthread_mutex_lock(&live->flush_mu);
        live->flush_failed = failed;
        snprintf(live->flush_failure, sizeof live->flush_failure, "%s", why);
        pthread_cond_broadcast(&live->room_cv);
    }
    pthread_mutex_unlock(&live->flush_mu);
    return NULL;
}

/* ---- open / close ------------------------------------------------------------ */

typedef struct replay_ctx {
    simstore_live *live;
    sims_memtable *table; /* where the records go */
    uint64_t applied;
    uint64_t replayed;
} replay_ctx;

static int replay_record(void *ctx, uint64_t seq, unsigned type, const uint8_t *payload, size_t len)
{
    replay_ctx *r = (replay_ctx *)ctx;
    if (seq <= r->applied)
        return 0; /* in the store already */
    sims_change c;
    int rc = sims_change_decode(type, payload, len, &c);
    if (rc)
        return sims_fail_context(rc, "record %" PRIu64 " of the log", seq);
    if (c.type == SIMS_CHANGE_INSERT && c.sketch_kind != (unsigned)r->live->sketch)
        return SIMS_CORRUPT("record %" PRIu64 " of the log holds a sketch of kind %u, the store "
                            "keeps kind %u",
                            seq, c.sketch_kind, (unsigned)r->live->sketch);
    rc = sims_memtable_apply(r->table, &c, seq);
    if (rc == SIMSTORE_OK)
        r->replayed++;
    return rc;
}

/* After the log failed to write a group (no lock held): cut it back to its
 * durable records (sims_wal_recover) and make the tables again from the
 * records after the store's applied one, so that they tell the log's story
 * once more and changes are taken again (they fail while the disk stays
 * full, and each failure comes back here). Writers whose records were
 * dropped learn it from their ticket's epoch (ticket_lost). A log that
 * cannot be cut back stays broken: every change is refused, and
 * simstore_live_get_stats() says why. */
static void recover_log(simstore_live *live)
{
    pthread_mutex_lock(&live->maint_mu);
    pthread_mutex_lock(&live->write_mu);
    sims_wal_stats ws;
    sims_wal_get_stats(live->wal, &ws);
    if (!ws.failed) { /* nothing failed, or another thread recovered */
        pthread_mutex_unlock(&live->write_mu);
        pthread_mutex_unlock(&live->maint_mu);
        return;
    }
    sims_memtable *fresh = NULL;
    int rc = sims_wal_recover(live->wal);
    if (rc == SIMSTORE_OK)
        rc = sims_memtable_new(live->k, &fresh);
    /* The epoch's first number given again: the one after the durable
     * records (recorded before any change of the new epoch is decided). */
    uint64_t epoch = atomic_load(&live->log_epoch);
    if (rc == SIMSTORE_OK) {
        pthread_mutex_lock(&live->fail_mu);
        if (sims_grow((void **)&live->lost_from, &live->lost_cap, epoch + 1,
                      sizeof *live->lost_from, 8))
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory recovering the log");
        if (rc == SIMSTORE_OK)
            live->lost_from[epoch] = sims_wal_last_seq(live->wal) + 1;
        pthread_mutex_unlock(&live->fail_mu);
    }
    if (rc == SIMSTORE_OK) {
        replay_ctx r = {live, fresh, atomic_load(&live->applied_seq), 0};
        rc = sims_wal_each_record(live->wal, replay_record, &r);
    }
    if (rc == SIMSTORE_OK) {
        pthread_rwlock_wrlock(&live->mem_lock);
        sims_memtable_free(live->active);
        sims_memtable_free(live->frozen);
        live->active = fresh;
        live->frozen = NULL;
        fresh = NULL;
        atomic_store(&live->log_epoch, epoch + 1);
        pthread_rwlock_unlock(&live->mem_lock);
    } else {
        /* The tables may hold changes the log does not: refuse changes. */
        atomic_store(&live->broken, 1);
        pthread_mutex_lock(&live->fail_mu);
        snprintf(live->failure, sizeof live->failure, "recovering the log failed: %s",
                 simstore_last_error());
        pthread_mutex_unlock(&live->fail_mu);
    }
    sims_memtable_free(fresh);
    pthread_mutex_unlock(&live->write_mu);
    pthread_mutex_unlock(&live->maint_mu);
    room_made(live);
}

void simstore_live_close(simstore_live *live)
{
    if (!live)
        return;
    if (live->flush_started) {
        pthread_mutex_lock(&live->flush_mu);
        live->flush_stop = 1;
        pthread_cond_signal(&live->flush_cv);
        pthread_cond_broadcast(&live->room_cv);
        pthread_mutex_unlock(&live->flush_mu);
        pthread_join(live->flush_thread, NULL);
    }
    for (size_t i = 0; i < live->pool_len; i++)
        simstore_query_free(live->pool[i]);
    free(live->pool);
    sims_wal_close(live->wal);
    sims_memtable_free(live->active);
    sims_memtable_free(live->frozen);
    simstore_close(live->s);
    pthread_mutex_destroy(&live->maint_mu);
    pthread_mutex_destroy(&live->write_mu);
    pthread_rwlock_destroy(&live->mem_lock);
    pthread_mutex_destroy(&live->pool_mu);
    pthread_mutex_destroy(&live->flush_mu);
    pthread_cond_destroy(&live->flush_cv);
    pthread_cond_destroy(&live->room_cv);
    pthread_mutex_destroy(&live->fail_mu);
    free(live->lost_from);
    free(live);
}

/* simstore_live_open(); `role` is noted in writer.lock as the holder (NULL:
 * none, for simstore_live_recover). */
static int live_open(const char *path, const simstore_live_options *o, const char *role,
                     simstore_live **out)
{
    *out = NULL;
    if (!path)
        return sims_fail(SIMSTORE_EINVAL, "no store path");
    if (SIMS_CHECK_OPTIONS(o, simstore_live_options))
        return SIMSTORE_EINVAL;
    simstore_live *live = calloc(1, sizeof *live);
    if (!live)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    if (o)
        live->opt = *o;
    else
        simstore_live_options_init(&live->opt);
    pthread_mutex_init(&live->maint_mu, NULL);
    pthread_mutex_init(&live->write_mu, NULL);
    pthread_rwlock_init(&live->mem_lock, NULL);
    pthread_mutex_init(&live->pool_mu, NULL);
    pthread_mutex_init(&live->flush_mu, NULL);
    pthread_cond_init(&live->flush_cv, NULL);
    pthread_cond_init(&live->room_cv, NULL);
    pthread_mutex_init(&live->fail_mu, NULL);
    /* SIMS_OPEN_LIVE: the log's pending changes are this open's to replay. */
    unsigned flags = SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT | SIMS_OPEN_LIVE |
                     (live->opt.open_flags & (SIMSTORE_OPEN_SKIP_BLOCK_CHECKSUMS |
                                              SIMSTORE_OPEN_TRUST_LMDB | SIMSTORE_OPEN_HUGE_PAGES));
    int rc = simstore_open(path, flags, &live->s);
    simstore_stats st;
    if (rc == SIMSTORE_OK)
        rc = simstore_get_stats(live->s, &st);
    if (rc == SIMSTORE_OK && st.fingerprint_only)
        rc = sims_fail(SIMSTORE_EINVAL,
                       "%s: a fingerprint-only store has no documents to serve live", path);
    if (rc == SIMSTORE_OK && role)
        rc = sims_store_note_holder(live->s, role);
    uint64_t applied = 0;
    if (rc == SIMSTORE_OK)
        rc = sims_store_wal_applied(live->s, &applied);
    if (rc == SIMSTORE_OK) {
        live->k = st.k;
        live->sketch = st.sketch;
        rc = sims_memtable_new(live->k, &live->active);
    }
    char wal_path[PATH_MAX];
    if (rc == SIMSTORE_OK &&
        snprintf(wal_path, sizeof wal_path, "%s/%s", path, WAL_NAME) >= (int)sizeof wal_path)
        rc = sims_fail(SIMSTORE_EINVAL, "%s: path too long", path);
    if (rc == SIMSTORE_OK) {
        sims_wal_options wo = {sims_store_tag(live->s), live->opt.wal_group_bytes};
        replay_ctx r = {live, live->active, applied, 0};
        rc = sims_wal_open(wal_path, &wo, replay_record, &r, &live->wal);
        live->replayed = r.replayed;
    }
    if (rc == SIMSTORE_OK) {
        sims_wal_stats ws;
        sims_wal_get_stats(live->wal, &ws);
        if (ws.first_seq > applied + 1)
            rc = SIMS_CORRUPT("%s: the log starts at record %" PRIu64
                              ", but the store holds the changes only up to record %" PRIu64
                              ": the records between are lost (was the store restored from "
                              "a copy?)",
                              wal_path, ws.first_seq, applied);
        else if (ws.next_seq <= applied)
            /* A log made anew (or an older one): go on numbering after the
             * store's, so that no new record looks applied. */
            rc = sims_wal_reset(live->wal, applied + 1);
    }
    if (rc == SIMSTORE_OK) {
        atomic_store(&live->applied_seq, applied);
        atomic_store(&live->visible_seq, sims_wal_last_seq(live->wal));
        if (live->opt.background_flush) {
            if (pthread_create(&live->flush_thread, NULL, flush_main, live) != 0)
                rc = sims_fail(SIMSTORE_EIO, "could not start the flush thread");
            else
                live->flush_started = 1;
        }
    }
    if (rc) {
        simstore_live_close(live);
        return rc;
    }
    *out = live;
    return SIMSTORE_OK;
}

int simstore_live_recover(const char *path, simstore_live_recovery *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!path)
        return sims_fail(SIMSTORE_EINVAL, "no store path");
    /* No log, or one without records: nothing to apply (and no log made). */
    char wal_path[PATH_MAX];
    struct stat fst;
    if (snprintf(wal_path, sizeof wal_path, "%s/%s", path, WAL_NAME) >= (int)sizeof wal_path)
        return sims_fail(SIMSTORE_EINVAL, "%s: path too long", path);
    if (lstat(wal_path, &fst) != 0 ||
        (S_ISREG(fst.st_mode) && fst.st_size <= SIMS_WAL_HEADER_BYTES))
        return SIMSTORE_OK;
    simstore_live_options o;
    simstore_live_options_init(&o);
    o.background_flush = 0;
    simstore_live *live;
    int rc = live_open(path, &o, NULL, &live);
    if (rc)
        return rc;
    simstore_live_stats st;
    simstore_live_get_stats(live, &st);
    if (st.memtable_changes)
        rc = simstore_live_flush(live);
    if (rc == SIMSTORE_OK && out) {
        out->applied = st.replayed;
        out->torn_bytes = st.torn_bytes;
        out->torn_records = st.torn_records;
        memcpy(out->torn_name, st.torn_name, sizeof out->torn_name);
    }
    simstore_live_close(live);
    return rc;
}

int simstore_live_open(const char *path, const simstore_live_options *o, simstore_live **out)
{
    return live_open(path, o, "server", out);
}

void simstore_live_get_stats(simstore_live *live, simstore_live_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&live->mem_lock);
    const sims_memtable *tables[2] = {live->active, live->frozen};
    for (int i = 0; i < 2; i++) {
        if (!tables[i])
            continue;
        out->memtable_docs += sims_memtable_inserts(tables[i]);
        out->memtable_deletes += sims_memtable_deletes(tables[i]);
        out->memtable_changes += sims_memtable_count(tables[i]);
        out->memtable_bytes += sims_memtable_bytes(tables[i]);
    }
    out->flushing = live->frozen != NULL;
    pthread_rwlock_unlock(&live->mem_lock);
    sims_wal_stats ws;
    sims_wal_get_stats(live->wal, &ws);
    out->wal_bytes = ws.file_bytes;
    out->wal_records = ws.records;
    out->wal_syncs = ws.groups;
    out->wal_last_seq = ws.next_seq - 1;
    out->wal_applied_seq = atomic_load(&live->applied_seq);
    out->replayed = live->replayed;
    out->flushes = atomic_load(&live->flushes);
    out->compactions = atomic_load(&live->compactions);
    out->inserts = atomic_load(&live->inserts);
    out->deletes = atomic_load(&live->deletes);
    out->torn_bytes = ws.tail.bytes;
    out->torn_records = ws.tail.records;
    memcpy(out->torn_name, ws.tail.aside_name, sizeof out->torn_name);
    /* Why changes are refused, the most lasting cause first. */
    pthread_mutex_lock(&live->fail_mu);
    const char *why = ws.broken                                           ? ws.failure
                      : atomic_load(&live->broken) || live->write_failing ? live->failure
                      : ws.failed                                         ? ws.failure
                                                                          : NULL;
    if (why)
        snprintf(out->failure, sizeof out->failure, "%s", why);
    pthread_mutex_unlock(&live->fail_mu);
    if (!why && live->flush_started) {
        pthread_mutex_lock(&live->flush_mu);
        if (live->flush_failed)
            snprintf(out->failure, sizeof out->failure, "%s", live->flush_failure);
        pthread_mutex_unlock(&live->flush_mu);
    }
    out->failing = out->failure[0] != '\0';
}
