/* sharded.c: sharded stores (format/shards.md): the assignment of documents
 * to shards, preparing a directory for a sharded build and publishing its
 * manifest last, and reading one: every shard opened and checked against the
 * manifest, queries asked of every shard and merged in the order one store
 * gives, stats summed. */
#include "shard/manifest.h"
#include "simstore_unstable.h"

#include "common/bytes.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/fpversion.h"
#include "common/grow.h"
#include "store/store_internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct simstore_sharded {
    char *path;
    sims_manifest manifest;
    simstore **shard; /* manifest.shards of them */
    char **shard_path;
};

struct simstore_sharded_query {
    simstore_sharded *sh;
    simstore_query **q;
    simstore_match *merged;
    size_t cap;
    simstore_paragraph_match *para;
    size_t para_cap;
};

unsigned simstore_shard_of(const char *id, size_t id_len, unsigned shards)
{
    if (shards == 0)
        return 0;
    return (unsigned)(sims_xxh3_64(id, id_len, 0) % shards);
}

unsigned simstore_shard_of_fp(uint64_t fp, unsigned shards)
{
    if (shards == 0)
        return 0;
    uint8_t b[8];
    le_store64(b, fp);
    return (unsigned)(sims_xxh3_64(b, sizeof b, 0) % shards);
}

void simstore_shard_name(unsigned shard, char *buf, size_t size)
{
    snprintf(buf, size, "shard-%04u", shard);
}

/* "shard-" and 4 or more digits: the number to *index. */
static int shard_dir_name(const char *name, unsigned *index)
{
    if (strncmp(name, "shard-", 6) != 0)
        return 0;
    const char *d = name + 6;
    size_t n = strspn(d, "0123456789");
    if (n < 4 || n > 9)
        return 0;
    if (d[n] != '\0')
        return 0;
    *index = (unsigned)strtoul(d, NULL, 10);
    return 1;
}

/* A builder's temporary directory of a shard, "shard-NNNN.tmp-XXXXXX", or a
 * manifest being written, "MANIFEST.tmp-XXXXXX". */
static int leftover_name(const char *name)
{
    const char *t = strstr(name, ".tmp-");
    if (!t)
        return 0;
    size_t base = (size_t)(t - name);
    unsigned index;
    char head[32];
    if (base >= sizeof head)
        return 0;
    memcpy(head, name, base);
    head[base] = '\0';
    return strcmp(head, SIMSTORE_MANIFEST_NAME) == 0 || shard_dir_name(head, &index);
}

int simstore_is_sharded(const char *path)
{
    char p[PATH_MAX];
    struct stat st;
    if (!path || sims_join_path(p, sizeof p, path, SIMSTORE_MANIFEST_NAME) != 0) {
        sims_error_clear();
        return 0;
    }
    if (lstat(p, &st) == 0)
        return 1;
    char name[16];
    simstore_shard_name(0, name, sizeof name);
    if (sims_join_path(p, sizeof p, path, name) != 0) {
        sims_error_clear();
        return 0;
    }
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode) ? 2 : 0;
}

int simstore_sharded_prepare(const char *path, unsigned shards, int replace)
{
    if (!path || shards < 1 || shards > SIMSTORE_SHARDS_MAX)
        return sims_fail(SIMSTORE_EINVAL, "shards: %u is outside 1..%u", shards,
                         SIMSTORE_SHARDS_MAX);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT)
            return sims_fail_errno("stat %s", path);
        if (mkdir(path, 0755) != 0)
            return sims_fail_errno("mkdir %s", path);
        return sims_fsync_parent(path);
    }
    if (!S_ISDIR(st.st_mode))
        return sims_fail(SIMSTORE_EINVAL, "%s is not a sharded store (not a directory)", path);
    /* Check every entry before changing anything. */
    DIR *d = opendir(path);
    if (!d)
        return sims_fail_errno("opendir %s", path);
    int rc = SIMSTORE_OK, manifest = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        unsigned index;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || leftover_name(n))
            continue;
        if (strcmp(n, SIMSTORE_MANIFEST_NAME) == 0) {
            manifest = 1;
            continue;
        }
        char p[PATH_MAX];
        if (shard_dir_name(n, &index) && sims_join_path(p, sizeof p, path, n) == 0 &&
            lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            /* A shard a server held may have changes only in its log. */
            rc = sims_store_dir_refuse_pending_log(
                p, "replacing the sharded store",
                "apply them first (simstore compact on the shard), or remove its live.wal to "
                "discard them with the store");
            if (rc)
                break;
            continue;
        }
        rc = sims_fail(SIMSTORE_EINVAL,
                       "%s is not a sharded store (it holds '%s'); only a sharded store, or "
                       "the shards of one whose build did not finish, is replaced",
                       path, n);
        break;
    }
    closedir(d);
    if (rc)
        return rc;
    if (manifest && !replace)
        return sims_fail(SIMSTORE_EEXIST, "%s already exists", path);
    char p[PATH_MAX];
    if (manifest) {
        /* Unpublish first: from here the directory is no sharded store
         * until the new manifest is written. */
        if ((rc = sims_join_path(p, sizeof p, path, SIMSTORE_MANIFEST_NAME)) != 0)
            return rc;
        if (unlink(p) != 0)
            return sims_fail_errno("unlink %s", p);
        if ((rc = sims_fsync_dir(path)) != 0)
            return rc;
    }
    d = opendir(path);
    if (!d)
        return sims_fail_errno("opendir %s", path);
    while ((e = readdir(d)) != NULL) {
        unsigned index;
        const char *n = e->d_name;
        int stale =
            (shard_dir_name(n, &index) && index >= shards) ||
            strncmp(n, SIMSTORE_MANIFEST_NAME ".tmp-", sizeof SIMSTORE_MANIFEST_NAME + 4) == 0;
        if (stale && sims_join_path(p, sizeof p, path, n) == 0 && sims_remove_tree(p) != 0) {
            rc = sims_fail_errno("remove %s", p);
            break;
        }
    }
    closedir(d);
    return rc ? rc : sims_fsync_dir(path);
}

/* What a store shares with the other shards, and its own counts. */
static int shard_facts(simstore *s, sims_shard_shared *out, sims_shard_entry *entry)
{
    simstore_stats st;
    int rc = simstore_get_stats(s, &st);
    if (rc)
        return rc;
    simstore_text_options t;
    simstore_get_text_options(s, &t);
    memset(out, 0, sizeof *out);
    out->k = st.k;
    out->fingerprint_only = st.fingerprint_only;
    out->block_bytes = st.block_bytes;
    out->fp_version = sims_fp_version(t.version);
    out->shingle_words = t.shingle_words;
    out->cjk_shingle = t.cjk_shingle;
    out->weighting = (unsigned)t.weighting;
    out->cjk = (unsigned)t.cjk;
    out->sketch = (unsigned)t.sketch;
    out->paragraph_min_words = t.paragraph_min_words;
    out->lambda_fixed = (uint32_t)(t.lambda * 65536.0 + 0.5);
    const simstore_boilerplate *bp = simstore_get_boilerplate(s);
    if (bp) {
        simstore_boilerplate_info info;
        simstore_boilerplate_get_info(bp, &info);
        const uint64_t *keys = simstore_boilerplate_keys(bp);
        sims_xxh3_stream *x = sims_xxh3_stream_new(0);
        if (!x)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory");
        for (uint64_t i = 0; i < info.lines; i++) {
            uint8_t b[8];
            le_store64(b, keys[i]);
            sims_xxh3_stream_update(x, b, sizeof b);
        }
        out->boilerplate_lines = info.lines;
        out->boilerplate_hash = info.lines ? sims_xxh3_stream_digest(x) : 0;
        sims_xxh3_stream_free(x);
    }
    if (entry) {
        entry->documents = st.documents;
        entry->fingerprints = st.fingerprints;
        entry->tables = st.tables;
    }
    return SIMSTORE_OK;
}

/* The first field where a and b differ ("k", ...), or NULL. */
static const char *shared_diff(const sims_shard_shared *a, const sims_shard_shared *b)
{
    if (a->k != b->k)
        return "k";
    if (a->fingerprint_only != b->fingerprint_only)
        return "kind (fingerprint-only or documents)";
    if (a->block_bytes != b->block_bytes)
        return "block bytes";
    if (a->fp_version != b->fp_version || a->shingle_words != b->shingle_words ||
        a->cjk_shingle != b->cjk_shingle || a->weighting != b->weighting || a->cjk != b->cjk ||
        a->lambda_fixed != b->lambda_fixed)
        return "text options";
    if (a->sketch != b->sketch)
        return "sketch kind";
    if (a->paragraph_min_words != b->paragraph_min_words)
        return "paragraph index";
    if (a->boilerplate_lines != b->boilerplate_lines || a->boilerplate_hash != b->boilerplate_hash)
        return "boilerplate set";
    return NULL;
}

int simstore_sharded_publish(const char *path, unsigned shards)
{
    if (!path || shards < 1 || shards > SIMSTORE_SHARDS_MAX)
        return sims_fail(SIMSTORE_EINVAL, "shards: %u is outside 1..%u", shards,
                         SIMSTORE_SHARDS_MAX);
    sims_manifest m;
    memset(&m, 0, sizeof m);
    m.shards = shards;
    m.assignment = SIMS_ASSIGN_XXH3_MOD;
    m.entry = calloc(shards, sizeof *m.entry);
    if (!m.entry)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    int rc = SIMSTORE_OK;
    for (unsigned i = 0; i < shards && rc == SIMSTORE_OK; i++) {
        sims_shard_entry *e = &m.entry[i];
        simstore_shard_name(i, e->name, sizeof e->name);
        char p[PATH_MAX];
        simstore *s = NULL;
        sims_shard_shared facts;
        rc = sims_join_path(p, sizeof p, path, e->name);
        if (rc == SIMSTORE_OK && (rc = simstore_open(p, SIMSTORE_OPEN_READONLY, &s)) != 0)
            rc = rc == SIMSTORE_ENOTFOUND
                     ? sims_fail(SIMSTORE_ENOTFOUND, "%s: shard %u of %u is missing", p, i + 1,
                                 shards)
                     : sims_fail_context(rc, "shard %s", p);
        if (rc == SIMSTORE_OK && (rc = shard_facts(s, i ? &facts : &m.shared, e)) != 0)
            rc = sims_fail_context(rc, "%s", p);
        simstore_close(s);
        const char *diff;
        if (rc == SIMSTORE_OK && i > 0 && (diff = shared_diff(&m.shared, &facts)) != NULL)
            rc = sims_fail(SIMSTORE_EINVAL, "%s: its %s differs from the first shard's", p, diff);
        if (rc == SIMSTORE_OK) {
            m.documents += e->documents;
            m.fingerprints += e->fingerprints;
        }
    }
    if (rc == SIMSTORE_OK)
        rc = sims_manifest_write(path, &m);
    sims_manifest_free(&m);
    return rc;
}

void simstore_sharded_close(simstore_sharded *sh)
{
    if (!sh)
        return;
    for (unsigned i = 0; i < sh->manifest.shards; i++) {
        if (sh->shard)
            simstore_close(sh->shard[i]);
        if (sh->shard_path)
            free(sh->shard_path[i]);
    }
    free(sh->shard);
    free(sh->shard_path);
    sims_manifest_free(&sh->manifest);
    free(sh->path);
    free(sh);
}

int simstore_sharded_open(const char *path, unsigned flags, simstore_sharded **out)
{
    if (!out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_sharded_open: out is NULL");
    *out = NULL;
    if (!path)
        return sims_fail(SIMSTORE_EINVAL, "simstore_sharded_open: path is NULL");
    if (flags & SIMSTORE_OPEN_WRITE)
        return sims_fail(SIMSTORE_EINVAL,
                         "%s: a sharded store opens read-only (write to a shard alone)", path);
    simstore_sharded *sh = calloc(1, sizeof *sh);
    if (!sh || !(sh->path = strdup(path))) {
        free(sh);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    int rc = sims_manifest_read(path, &sh->manifest);
    if (rc == SIMSTORE_ENOTFOUND && simstore_is_sharded(path) == 2)
        rc = sims_fail(SIMSTORE_ENOTFOUND,
                       "%s holds shards but no %s: a sharded build that did not finish (build "
                       "it again)",
                       path, SIMSTORE_MANIFEST_NAME);
    unsigned r = sh->manifest.shards;
    if (rc == SIMSTORE_OK) {
        sh->shard = calloc(r, sizeof *sh->shard);
        sh->shard_path = calloc(r, sizeof *sh->shard_path);
        if (!sh->shard || !sh->shard_path)
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    for (unsigned i = 0; i < r && rc == SIMSTORE_OK; i++) {
        const sims_shard_entry *e = &sh->manifest.entry[i];
        size_t n = strlen(path) + 1 + strlen(e->name) + 1;
        if (!(sh->shard_path[i] = malloc(n))) {
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
            break;
        }
        snprintf(sh->shard_path[i], n, "%s/%s", path, e->name);
        rc = simstore_open(sh->shard_path[i], flags, &sh->shard[i]);
        if (rc == SIMSTORE_ENOTFOUND) {
            rc = sims_fail(SIMSTORE_ENOTFOUND, "%s: shard %u of %u named by %s/%s is missing",
                           sh->shard_path[i], i + 1, r, path, SIMSTORE_MANIFEST_NAME);
            break;
        }
        if (rc) {
            rc = sims_fail_context(rc, "shard %s", sh->shard_path[i]);
            break;
        }
        sims_shard_shared facts;
        const char *diff;
        rc = shard_facts(sh->shard[i], &facts, NULL);
        if (rc == SIMSTORE_OK && (diff = shared_diff(&sh->manifest.shared, &facts)) != NULL)
            rc = SIMS_CORRUPT("%s: its %s differs from what %s/%s records", sh->shard_path[i], diff,
                              path, SIMSTORE_MANIFEST_NAME);
    }
    if (rc) {
        simstore_sharded_close(sh);
        return rc;
    }
    *out = sh;
    return SIMSTORE_OK;
}

unsigned simstore_sharded_count(const simstore_sharded *sh)
{
    return sh ? sh->manifest.shards : 0;
}

simstore *simstore_sharded_shard(simstore_sharded *sh, unsigned i)
{
    return sh && i < sh->manifest.shards ? sh->shard[i] : NULL;
}

const char *simstore_sharded_shard_path(const simstore_sharded *sh, unsigned i)
{
    return sh && i < sh->manifest.shards ? sh->shard_path[i] : NULL;
}

int simstore_sharded_get_stats(simstore_sharded *sh, simstore_stats *out)
{
    if (!sh || !out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_sharded_get_stats: NULL argument");
    simstore_stats sum;
    memset(&sum, 0, sizeof sum);
    for (unsigned i = 0; i < sh->manifest.shards; i++) {
        simstore_stats st;
        int rc = simstore_get_stats(sh->shard[i], &st);
        if (rc)
            return sims_fail_context(rc, "shard %s", sh->shard_path[i]);
        if (i == 0) {
            sum = st;
            continue;
        }
        sum.documents += st.documents;
        sum.fingerprints += st.fingerprints;
        sum.segments += st.segments;
        if (st.generation > sum.generation)
            sum.generation = st.generation;
        sum.table_fps += st.table_fps;
        sum.table_bytes += st.table_bytes;
        sum.lmdb_bytes += st.lmdb_bytes;
        sum.block_key_bytes += st.block_key_bytes;
        sum.lmdb_records_bytes += st.lmdb_records_bytes;
        sum.lmdb_mapping_bytes += st.lmdb_mapping_bytes;
        sum.lmdb_other_bytes += st.lmdb_other_bytes;
        sum.lmdb_free_bytes += st.lmdb_free_bytes;
        sum.lmdb_tail_bytes += st.lmdb_tail_bytes;
        sum.paragraph_entries += st.paragraph_entries;
        sum.paragraph_fps += st.paragraph_fps;
        sum.paragraph_segments += st.paragraph_segments;
        sum.paragraph_table_fps += st.paragraph_table_fps;
        sum.paragraph_table_bytes += st.paragraph_table_bytes;
    }
    size_t n = strlen(sum.design);
    snprintf(sum.design + n, sizeof sum.design - n, ", %u %s", sh->manifest.shards,
             sh->manifest.shards == 1 ? "shard" : "shards");
    *out = sum;
    return SIMSTORE_OK;
}

int simstore_sharded_query_new(simstore_sharded *sh, unsigned flags, simstore_sharded_query **out)
{
    if (!sh || !out)
        return sims_fail(SIMSTORE_EINVAL, "simstore_sharded_query_new: NULL argument");
    *out = NULL;
    simstore_sharded_query *q = calloc(1, sizeof *q);
    if (q)
        q->q = calloc(sh->manifest.shards, sizeof *q->q);
    if (!q || !q->q) {
        free(q);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    q->sh = sh;
    for (unsigned i = 0; i < sh->manifest.shards; i++) {
        int rc = simstore_query_new(sh->shard[i], flags, &q->q[i]);
        if (rc) {
            simstore_sharded_query_free(q);
            return sims_fail_context(rc, "shard %s", sh->shard_path[i]);
        }
    }
    *out = q;
    return SIMSTORE_OK;
}

void simstore_sharded_query_free(simstore_sharded_query *q)
{
    if (!q)
        return;
    for (unsigned i = 0; i < q->sh->manifest.shards; i++)
        simstore_query_free(q->q[i]);
    free(q->q);
    free(q->merged);
    free(q->para);
    free(q);
}

int simstore_sharded_query_fp(simstore_sharded_query *q, uint64_t fp, const uint8_t *sketch,
                              unsigned k, const simstore_match **matches, size_t *count)
{
    if (!q || !matches || !count)
        return sims_fail(SIMSTORE_EINVAL, "simstore_sharded_query_fp: NULL argument");
    *matches = NULL;
    *count = 0;
    size_t len = 0;
    /* Each shard's matches borrow its query's memory, which stays put until
     * that query is asked again: the merged array copies the structs only. */
    for (unsigned i = 0; i < q->sh->manifest.shards; i++) {
        const simstore_match *m;
        size_t n;
        int rc = simstore_query_fp_sketch(q->q[i], fp, sketch, k, &m, &n);
        if (rc)
            return sims_fail_context(rc, "shard %s", q->sh->shard_path[i]);
        if (sims_grow((void **)&q->merged, &q->cap, len + n, sizeof *q->merged, 16))
            return sims_fail(SIMSTORE_ENOMEM, "out of memory");
        if (n)
            memcpy(q->merged + len, m, n * sizeof *m);
        len += n;
    }
    sims_sort_matches(q->merged, len);
    *matches = q->merged;
    *count = len;
    return SIMSTORE_OK;
}

void simstore_sort_matches(simstore_match *matches, size_t n)
{
    if (matches && n > 1)
        sims_sort_matches(matches, n);
}

/* ---- batches over the shards ------------------------------------------------ */

/* One shard's answers to a batch, serialized: per query its first byte. */
typedef struct shard_answers {
    uint8_t *data;
    size_t len, cap;
    size_t *start; /* n + 1 offsets: query i's matches are [start[i], start[i+1]) */
    size_t next;   /* the next query expected */
    size_t n;
    int failed; /* out of memory */
} shard_answers;

/* The fixed part of a serialized match. */
typedef struct packed_match {
    uint64_t fp, insertion;
    double similarity;
    size_t id_len, meta_len, sketch_len; /* SIZE_MAX: NULL */
    unsigned distance, flags;
} packed_match;

static int answers_put(shard_answers *a, const void *p, size_t n)
{
    if (sims_grow_bytes(&a->data, &a->cap, a->len, n, 4096))
        return -1;
    if (n)
        memcpy(a->data + a->len, p, n);
    a->len += n;
    return 0;
}

static int collect_answers(void *ctx, size_t index, uint64_t fp, const simstore_match *m,
                           size_t count)
{
    (void)fp;
    shard_answers *a = (shard_answers *)ctx;
    for (; a->next <= index && a->next < a->n; a->next++)
        a->start[a->next] = a->len;
    for (size_t i = 0; i < count; i++) {
        packed_match p;
        memset(&p, 0, sizeof p);
        p.fp = m[i].fp;
        p.insertion = m[i].insertion;
        p.similarity = m[i].similarity;
        p.distance = m[i].distance;
        p.flags = m[i].flags;
        p.id_len = m[i].id ? m[i].id_len : SIZE_MAX;
        p.meta_len = m[i].meta ? m[i].meta_len : SIZE_MAX;
        p.sketch_len = SIZE_MAX; /* sketches are not carried through the merge */
        if (answers_put(a, &p, sizeof p) || (m[i].id && answers_put(a, m[i].id, m[i].id_len)) ||
            (m[i].id && answers_put(a, "", 1)) ||
            (m[i].meta && answers_put(a, m[i].meta, m[i].meta_len))) {
            a->failed = 1;
            return 1;
        }
    }
    return 0;
}

int simstore_sharded_query_batch(simstore_sharded *sh, const uint64_t *fps, const uint8_t *sketches,
                                 size_t n, unsigned k, const simstore_batch_options *o,
                                 simstore_batch_fn fn, void *ctx)
{
    if (!sh || !fn || (!fps && n > 0))
        return sims_fail(SIMSTORE_EINVAL, "simstore_sharded_query_batch: NULL argument");
    if (SIMS_CHECK_OPTIONS(o, simstore_batch_options))
        return SIMSTORE_EINVAL;
    unsigned r = sh->manifest.shards;
    shard_answers *a = calloc(r, sizeof *a);
    simstore_match *merged = NULL;
    size_t cap = 0;
    int rc = a ? SIMSTORE_OK : sims_fail(SIMSTORE_ENOMEM, "out of memory");
    for (unsigned i = 0; i < r && rc == SIMSTORE_OK; i++) {
        a[i].n = n;
        if (!(a[i].start = malloc((n + 1) * sizeof *a[i].start))) {
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
            break;
        }
        rc = simstore_query_batch_sketches(sh->shard[i], fps, sketches, n, k, o, collect_answers,
                                           &a[i]);
        if (a[i].failed)
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
        else if (rc)
            rc = sims_fail_context(rc, "shard %s", sh->shard_path[i]);
        for (; a[i].next <= n; a[i].next++)
            a[i].start[a[i].next] = a[i].len;
    }
    for (size_t q = 0; q < n && rc == SIMSTORE_OK; q++) {
        size_t len = 0;
        for (unsigned i = 0; i < r && rc == SIMSTORE_OK; i++) {
            const uint8_t *p = a[i].data + a[i].start[q], *end = a[i].data + a[i].start[q + 1];
            while (p < end) {
                if (sims_grow((void **)&merged, &cap, len + 1, sizeof *merged, 64)) {
                    rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
                    break;
                }
                packed_match pm;
                memcpy(&pm, p, sizeof pm);
                p += sizeof pm;
                simstore_match *m = &merged[len++];
                memset(m, 0, sizeof *m);
                m->fp = pm.fp;
                m->insertion = pm.insertion;
                m->similarity = pm.similarity;
                m->distance = pm.distance;
                m->flags = pm.flags;
                if (pm.id_len != SIZE_MAX) {
                    m->id = (const char *)p;
                    m->id_len = pm.id_len;
                    p += pm.id_len + 1;
                }
                if (pm.meta_len != SIZE_MAX) {
                    m->meta = (const char *)p;
                    m->meta_len = pm.meta_len;
                    p += pm.meta_len;
                }
            }
        }
        if (rc)
            break;
        sims_sort_matches(merged, len);
        int stop = fn(ctx, q, fps[q], merged, len);
        if (stop)
            rc = stop;
    }
    if (a)
        for (unsigned i = 0; i < r; i++) {
            free(a[i].data);
            free(a[i].start);
        }
    free(a);
    free(merged);
    return rc;
}

int simstore_sharded_query_paragraphs(simstore_sharded_query *q, const uint64_t *fps, size_t n,
                                      unsigned k, double min_fraction,
                                      const simstore_paragraph_match **matches, size_t *count)
{
    if (!q || !matches || !count)
        return sims_fail(SIMSTORE_EINVAL, "simstore_sharded_query_paragraphs: NULL argument");
    *matches = NULL;
    *count = 0;
    size_t len = 0;
    for (unsigned i = 0; i < q->sh->manifest.shards; i++) {
        const simstore_paragraph_match *m;
        size_t got;
        int rc = simstore_query_paragraphs(q->q[i], fps, n, k, min_fraction, &m, &got);
        if (rc)
            return sims_fail_context(rc, "shard %s", q->sh->shard_path[i]);
        if (sims_grow((void **)&q->para, &q->para_cap, len + got, sizeof *q->para, 16))
            return sims_fail(SIMSTORE_ENOMEM, "out of memory");
        if (got)
            memcpy(q->para + len, m, got * sizeof *m);
        len += got;
    }
    if (len > 1)
        qsort(q->para, len, sizeof *q->para, simstore_paragraph_match_cmp);
    *matches = q->para;
    *count = len;
    return SIMSTORE_OK;
}
