/* build.c: builders. A builder takes documents (or bare fingerprints) in any
 * order and, at finish, in bounded memory (each step a finish_* phase):
 *   1. sorts documents by id (duplicates are errors) and then by
 *      (fingerprint, id), which yields the distinct fingerprints (finish_begin
 *      reads what an add is measured against, finish_sort sorts);
 *   2. for a new store, chooses the design from their number (finish_design);
 *   3. writes each permuted table (sorted in runs, merged twice: once for the
 *      Huffman histogram, once to encode), tables in parallel threads
 *      (finish_write_tables);
 *   4. commits documents and the new state in one LMDB write transaction
 *      (finish_commit);
 *   5. for a new store, renames the work directory into place; after an add,
 *      may compact (finish_publish).
 * A new store is built in "<path>.tmp-XXXXXX" beside its final path; a new
 * segment of an existing store writes its files into the store, unreferenced
 * until the commit. Failure removes everything written. */
#include "store/store_internal.h"

#include "common/bytes.h"
#include "common/error.h"
#include "common/fileio.h"
#include "common/fpversion.h"
#include "common/grow.h"
#include "common/sketch.h"
#include "sort/recsort.h"
#include "sort/spool.h"
#include "sort/u64sort.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_CHUNK 4096
#define PROGRESS_EVERY ((uint64_t)1 << 20)
/* A document as the builder sorts it: fp u64, source u64, the record's
 * flags u8 (its sketch kind and paragraph flag included), then the sketch
 * (as many bytes as the kind takes, usually none), then, with
 * SIMS_DOC_FLAG_PARAGRAPHS, a u32 count and that many u64 paragraph
 * fingerprints, then the metadata. */
#define DOC_VAL_FIXED 17

struct simstore_builder {
    simstore_build_options opt;
    simstore_text_options text; /* opt.text points here */
    simstore *store;            /* add: the open store (not owned) */
    char *final_path;           /* build: where the store appears */
    char *work_dir;             /* build: the temporary directory; add: the store */
    int work_lock_fd;           /* build: the work directory's writer.lock */
    int fp_only;
    simstore_sketch_kind sketch; /* what every document brings (none: nothing) */
    unsigned para_min_words;     /* the store's paragraph index: 0 none */
    unsigned threads;
    sims_recsort *docs; /* key: id; value: fp, source, metadata */
    sims_spool *raw;    /* fingerprint-only: every fingerprint added */
    uint64_t added;
    uint64_t next_position;      /* the next document's position (format/store.md,
                               "The document record"): added, unless
                               simstore_builder_set_position moved it on */
    uint64_t last_position;      /* the last document added's (the largest) */
    int broken;                  /* an add failed: finish refuses */
    uint8_t *boilerplate_record; /* build: recorded with the store, or NULL */
    size_t boilerplate_record_len;
    uint64_t wal_applied; /* add: the WAL sequence number its commit applies
                             (sims_builder_set_wal_applied), or 0 */
    int logged_ids;       /* ids of logged changes: only their length checked
                             (sims_builder_take_logged_ids) */
};

/* ---- helpers -------------------------------------------------------------- */

static void progress(const simstore_builder *b, const char *phase, uint64_t done, uint64_t total)
{
    if (b->opt.progress)
        b->opt.progress(b->opt.progress_ctx, phase, done, total);
}

static void source_name(const simstore_builder *b, uint64_t source, char *buf, size_t size)
{
    if (b->opt.source_name)
        b->opt.source_name(b->opt.source_ctx, source, buf, size);
    else
        snprintf(buf, size, "document #%" PRIu64, source + 1);
}

/* Temporary build directories (format/store.md, "Temporary build
 * directories"): a build works in "<STORE>.tmp-XXXXXX" (mkdtemp's six
 * letters and digits), which holds the empty marker file BUILD_MARKER from
 * its first moment until its store is published. Only entries that match
 * the name exactly, are directories of this user and are empty or hold the
 * marker are ever removed as leftovers of other builds: a user's own
 * "<STORE>.tmp-mine", or a file, is never touched. The marker's name has
 * ".tmp-" in it, so one left inside a published store by a crash is a
 * temporary file there, removed by the next writer. */
#define BUILD_MARKER "build.tmp-marker"
#define BUILD_SUFFIX ".tmp-"
#define BUILD_RANDOM_CHARS 6

static int is_alnum_ascii(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether `name` is "<base>.tmp-XXXXXX" with X letters and digits. */
static int is_build_dir_name(const char *name, const char *base, size_t blen)
{
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, BUILD_SUFFIX, 5) != 0)
        return 0;
    const char *x = name + blen + 5;
    for (int i = 0; i < BUILD_RANDOM_CHARS; i++)
        if (!is_alnum_ascii(x[i]))
            return 0;
    return x[BUILD_RANDOM_CHARS] == '\0';
}

/* Create the marker in directory `dir`: one open(O_CREAT | O_EXCL), so the
 * name appears whole or not at all. An existing marker is fine. */
static int put_marker(const char *dir)
{
    char p[PATH_MAX];
    int rc = sims_join_path(p, sizeof p, dir, BUILD_MARKER);
    if (rc)
        return rc;
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST)
        return sims_fail_errno("create %s", p);
    if (fd >= 0)
        close(fd);
    return SIMSTORE_OK;
}

static void remove_marker(const char *dir)
{
    char p[PATH_MAX];
    if (sims_join_path(p, sizeof p, dir, BUILD_MARKER) == SIMSTORE_OK &&
        !sims_fault_hit(SIMS_FAULT_REMOVE))
        unlink(p);
}

/* Whether directory `p` holds the marker as a regular file. */
static int has_marker(const char *p)
{
    char m[PATH_MAX];
    struct stat st;
    return sims_join_path(m, sizeof m, p, BUILD_MARKER) == SIMSTORE_OK && lstat(m, &st) == 0 &&
           S_ISREG(st.st_mode);
}

/* Remove build directory `p`, its marker last and only once nothing else is
 * left: until then it stays marked, so a build killed while removing it (a
 * failed build, or the old store after a replace) leaves something
 * remove_stale_builds still recognises. */
static void remove_build_dir(const char *p)
{
    DIR *d = opendir(p);
    struct dirent *e;
    int others = 0;
    while (d && (e = readdir(d)) != NULL) {
        char q[PATH_MAX];
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            strcmp(e->d_name, BUILD_MARKER) == 0)
            continue;
        if (sims_join_path(q, sizeof q, p, e->d_name) != SIMSTORE_OK || sims_remove_tree(q) != 0)
            others++;
    }
    if (d)
        closedir(d);
    if (others == 0 && d)
        sims_remove_tree(p);
}

/* Remove the build directories of `path` left by builds that died: each live
 * build holds the flock of its writer.lock, so a marked directory whose lock
 * we can take (or that has none yet) is stale. An empty one (a build that
 * died just after mkdtemp) goes by rmdir, which removes nothing else. */
static void remove_stale_builds(const char *path)
{
    char dir[PATH_MAX];
    if (sims_parent_dir(dir, sizeof dir, path))
        return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t blen = strlen(base);
    DIR *d = blen ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!is_build_dir_name(e->d_name, base, blen))
            continue;
        char p[PATH_MAX], lock[PATH_MAX];
        struct stat st;
        if (sims_join_path(p, sizeof p, dir, e->d_name) ||
            sims_join_path(lock, sizeof lock, p, "writer.lock") || lstat(p, &st) != 0 ||
            !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        if (rmdir(p) == 0 || !has_marker(p))
            continue;
        int fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            remove_build_dir(p);
        else if (fd < 0 && errno == ENOENT)
            remove_build_dir(p); /* died before taking its lock */
        if (fd >= 0)
            close(fd);
    }
    if (d)
        closedir(d);
}

int sims_build_dir_create(const char *path, char **work_dir, int *lock_fd)
{
    *work_dir = NULL;
    *lock_fd = -1;
    size_t n = strlen(path);
    remove_stale_builds(path);
    /* *work_dir is set only once it names the directory: a caller that
     * removes it on failure would remove whatever its bytes happened to
     * name. */
    char *dir = malloc(n + sizeof ".tmp-XXXXXX");
    if (!dir)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    memcpy(dir, path, n);
    memcpy(dir + n, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    if (!mkdtemp(dir)) {
        int rc = sims_fail_errno("create a build directory beside %s", path);
        free(dir);
        return rc;
    }
    *work_dir = dir;
    chmod(dir, 0755);
    /* Marked before anything else goes in (remove_stale_builds). */
    int rc = put_marker(dir);
    if (rc)
        return rc;
    char lock[PATH_MAX];
    rc = sims_join_path(lock, sizeof lock, dir, "writer.lock");
    if (rc)
        return rc;
    *lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (*lock_fd < 0 || flock(*lock_fd, LOCK_EX | LOCK_NB) != 0)
        return sims_fail_errno("lock %s", lock);
    return SIMSTORE_OK;
}

void sims_build_dir_remove(const char *work_dir)
{
    remove_build_dir(work_dir);
}

/* Whether a directory entry's name is one a store holds (format/store.md,
 * "Directory layout"). */
static int is_store_entry_name(const char *name, int *is_table)
{
    uint64_t seg;
    unsigned table;
    *is_table = sims_segment_file_name(name, &seg, &table) != 0;
    return *is_table || strcmp(name, "data.mdb") == 0 || strcmp(name, "lock.mdb") == 0 ||
           strcmp(name, "writer.lock") == 0 || strcmp(name, SIMS_STORE_WAL_NAME) == 0 ||
           strncmp(name, SIMS_STORE_WAL_NAME ".torn-", sizeof SIMS_STORE_WAL_NAME ".torn-" - 1) ==
               0 ||
           strstr(name, BUILD_SUFFIX) != NULL;
}

/* What build --replace may replace: recognisably a simstore store (also a
 * damaged one, which is what a rebuild is for): a directory, not a symbolic
 * link, holding an LMDB data.mdb, writer.lock or a table file, and nothing
 * but the names a store uses. Anything else is SIMSTORE_EEXIST, untouched. */
static int check_replaceable(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? SIMSTORE_OK : sims_fail_errno("%s", path);
    const char *what = NULL;
    char other[NAME_MAX + 64] = "";
    if (S_ISLNK(st.st_mode))
        what = "a symbolic link";
    else if (S_ISREG(st.st_mode))
        what = "a regular file";
    else if (!S_ISDIR(st.st_mode))
        what = "not a directory";
    if (!what) {
        DIR *d = opendir(path);
        if (!d)
            return sims_fail_errno("%s: open directory", path);
        int has_data = 0, has_lock = 0, has_table = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            int is_table;
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            if (!is_store_entry_name(e->d_name, &is_table)) {
                snprintf(other, sizeof other, "a directory holding '%s', which no store has",
                         e->d_name);
                break;
            }
            has_data |= strcmp(e->d_name, "data.mdb") == 0;
            has_lock |= strcmp(e->d_name, "writer.lock") == 0;
            has_table |= is_table;
        }
        closedir(d);
        if (other[0]) {
            what = other;
        } else if (!has_data) {
            what = "a directory without data.mdb";
        } else if (!has_lock && !has_table) {
            what = "a directory without writer.lock or table files";
        } else {
            /* LMDB's first meta page: the page header (16 bytes), then the
             * magic 0xBEEFC0DE, little-endian. */
            char p[PATH_MAX];
            uint8_t head[20];
            int rc = sims_join_path(p, sizeof p, path, "data.mdb");
            if (rc)
                return rc;
            int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            ssize_t got = fd >= 0 ? pread(fd, head, sizeof head, 0) : -1;
            if (fd >= 0)
                close(fd);
            if (got != (ssize_t)sizeof head || le_load32(head + 16) != 0xBEEFC0DEu)
                what = "its data.mdb is not an LMDB file";
        }
    }
    if (what)
        return sims_fail(SIMSTORE_EEXIST,
                         "%s is not a simstore store (%s): replace only replaces a store; "
                         "remove it yourself or choose another path",
                         path, what);
    /* A server's acknowledged changes that only its log holds would go with
     * the old store: the user decides. */
    return sims_store_dir_refuse_pending_log(
        path, "replacing the store",
        "apply them first (simstore compact), or remove its live.wal to discard them with the "
        "store");
}

/* The text options a store records must be ones a fingerprinter accepts
 * (simstore_fingerprinter_new), or the text record would not decode. */
static int validate_text_options(const simstore_text_options *t)
{
    if (!t)
        return SIMSTORE_OK;
    unsigned version = sims_fp_version(t->version);
    if (version > SIMSTORE_FP_VERSION_LATEST)
        return sims_fail(SIMSTORE_EINVAL, "unknown fingerprint version %u", version);
    if (t->shingle_words < 1 || t->shingle_words > SIMSTORE_SHINGLE_MAX ||
        t->cjk_shingle > SIMSTORE_SHINGLE_MAX)
        return sims_fail(SIMSTORE_EINVAL, "shingle sizes %u and %u: outside 1..%u",
                         t->shingle_words, t->cjk_shingle, SIMSTORE_SHINGLE_MAX);
    if ((unsigned)t->weighting > SIMSTORE_WEIGHT_LOG ||
        (t->weighting == SIMSTORE_WEIGHT_LOG && version == 1))
        return sims_fail(SIMSTORE_EINVAL,
                         "weighting %d is not available with fingerprint "
                         "version %u",
                         (int)t->weighting, version);
    if (!(t->lambda >= 0 && t->lambda <= SIMSTORE_LAMBDA_MAX) ||
        (unsigned)t->cjk > SIMSTORE_CJK_BIGRAM)
        return sims_fail(SIMSTORE_EINVAL, "lambda %g or CJK mode %d out of range", t->lambda,
                         (int)t->cjk);
    if (t->sketch != SIMSTORE_SKETCH_NONE && !sims_sketch_kind_valid((unsigned)t->sketch))
        return sims_fail(SIMSTORE_EINVAL, "unknown sketch kind %d", (int)t->sketch);
    if (t->paragraph_min_words > SIMSTORE_PARAGRAPH_MIN_WORDS_MAX)
        return sims_fail(SIMSTORE_EINVAL, "paragraph minimum of %u words: at most %u",
                         t->paragraph_min_words, SIMSTORE_PARAGRAPH_MIN_WORDS_MAX);
    return SIMSTORE_OK;
}

static int check_options(const simstore_build_options *o)
{
    if (o->k > SIMSTORE_MAX_K)
        return sims_fail(SIMSTORE_EINVAL, "k = %u is above the maximum %u", o->k, SIMSTORE_MAX_K);
    if (!simstore_block_bytes_valid(o->block_bytes))
        return sims_fail(SIMSTORE_EINVAL, "block size %u is not a power of two from %u to %u",
                         o->block_bytes, SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES);
    if (o->tables > SIMS_DESIGN_MAX_TABLES)
        return sims_fail(SIMSTORE_EINVAL, "%u tables is above the maximum %u", o->tables,
                         SIMS_DESIGN_MAX_TABLES);
    if (o->fingerprint_only && o->text && o->text->sketch != SIMSTORE_SKETCH_NONE)
        return sims_fail(SIMSTORE_EINVAL, "a fingerprint-only store keeps no documents, so no "
                                          "sketches: give sketch kind none");
    if (o->fingerprint_only && o->text && o->text->paragraph_min_words)
        return sims_fail(SIMSTORE_EINVAL, "a fingerprint-only store keeps no documents, so no "
                                          "paragraphs");
    return validate_text_options(o->text);
}

static int builder_new(const simstore_build_options *o, simstore_builder **out)
{
    if (SIMS_CHECK_OPTIONS(o, simstore_build_options) ||
        SIMS_CHECK_OPTIONS(o ? o->text : NULL, simstore_text_options))
        return SIMSTORE_EINVAL;
    simstore_builder *b = calloc(1, sizeof *b);
    if (!b)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory for a builder");
    if (o)
        b->opt = *o;
    else
        simstore_build_options_init(&b->opt);
    if (b->opt.text)
        b->text = *b->opt.text;
    else
        simstore_text_options_init(&b->text);
    b->opt.text = &b->text;
    /* The budget covers the whole process: from here on memory_bytes is the
     * part sorting may use (so is the automatic compaction's after an add). */
    b->opt.memory_bytes = sims_sorting_budget(b->opt.memory_bytes);
    b->threads = b->opt.threads ? b->opt.threads : simstore_default_threads();
    b->work_lock_fd = -1;
    *out = b;
    return SIMSTORE_OK;
}

static int builder_start_inputs(simstore_builder *b)
{
    uint64_t mem = b->opt.memory_bytes;
    if (b->fp_only)
        return sims_spool_new((size_t)(mem / 2 / sizeof(uint64_t)), b->work_dir, &b->raw);
    return sims_recsort_new((size_t)(mem / 2), b->work_dir, &b->docs);
}

static void builder_free(simstore_builder *b)
{
    if (!b)
        return;
    sims_recsort_free(b->docs);
    sims_spool_free(b->raw);
    if (b->work_lock_fd >= 0)
        close(b->work_lock_fd);
    if (b->store) {
        pthread_mutex_lock(&b->store->mu);
        b->store->builder_open = 0;
        pthread_mutex_unlock(&b->store->mu);
    }
    free(b->final_path);
    free(b->work_dir);
    free(b->boilerplate_record);
    free(b);
}

int simstore_builder_set_boilerplate(simstore_builder *b, const simstore_boilerplate *bp)
{
    if (!b || !bp)
        return sims_fail(SIMSTORE_EINVAL, "simstore_builder_set_boilerplate: NULL argument");
    if (b->store)
        return sims_fail(SIMSTORE_EINVAL, "an add applies the boilerplate set the store "
                                          "recorded when it was built; it takes no other");
    if (b->fp_only)
        return sims_fail(SIMSTORE_EINVAL, "a fingerprint-only store has no texts to remove "
                                          "boilerplate from");
    uint8_t *record;
    size_t len;
    int rc = sims_boilerplate_encode(bp, &record, &len);
    if (rc)
        return rc;
    free(b->boilerplate_record);
    b->boilerplate_record = record;
    b->boilerplate_record_len = len;
    return SIMSTORE_OK;
}

/* ---- begin ----------------------------------------------------------------- */

int simstore_build_begin(const char *path, const simstore_build_options *o, simstore_builder **out)
{
    *out = NULL;
    simstore_builder *b;
    int rc = builder_new(o, &b);
    if (rc)
        return rc;
    rc = check_options(&b->opt);
    if (rc)
        goto fail;
    b->fp_only = b->opt.fingerprint_only != 0;
    b->sketch = b->text.sketch;
    b->para_min_words = b->text.paragraph_min_words;
    /* "S/" names the store S: the work directory goes beside it, not in it. */
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n == 0) {
        rc = sims_fail(SIMSTORE_EINVAL, "empty store path");
        goto fail;
    }
    b->final_path = strndup(path, n);
    if (!b->final_path) {
        rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
        goto fail;
    }
    path = b->final_path;
    struct stat st;
    if (lstat(path, &st) == 0) {
        rc = b->opt.replace ? check_replaceable(path)
                            : sims_fail(SIMSTORE_EEXIST,
                                        "%s already exists (use replace to rebuild it)", path);
        if (rc)
            goto fail;
    }
    rc = sims_build_dir_create(path, &b->work_dir, &b->work_lock_fd);
    if (rc)
        goto fail;
    rc = builder_start_inputs(b);
    if (rc)
        goto fail;
    *out = b;
    return SIMSTORE_OK;
fail:
    simstore_builder_abort(b);
    return rc;
}

int simstore_add_begin(simstore *s, const simstore_build_options *o, simstore_builder **out)
{
    *out = NULL;
    if (!(s->open_flags & SIMSTORE_OPEN_WRITE))
        return sims_fail(SIMSTORE_EREADONLY, "%s is open read-only", s->path);
    pthread_mutex_lock(&s->mu);
    int busy = s->builder_open;
    s->builder_open = 1;
    pthread_mutex_unlock(&s->mu);
    if (busy)
        return sims_fail(SIMSTORE_EBUSY, "%s: a builder is already open", s->path);
    simstore_builder *b;
    int rc = builder_new(o, &b);
    if (rc) {
        pthread_mutex_lock(&s->mu);
        s->builder_open = 0;
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    b->store = s;
    b->fp_only = (s->store_flags & SIMS_STORE_FLAG_FP_ONLY) != 0;
    b->sketch = s->text.sketch;
    b->para_min_words = s->text.paragraph_min_words;
    b->work_dir = strdup(s->path);
    rc = b->work_dir ? builder_start_inputs(b) : sims_fail(SIMSTORE_ENOMEM, "out of memory");
    if (rc) {
        builder_free(b);
        return rc;
    }
    *out = b;
    return SIMSTORE_OK;
}

/* ---- add -------------------------------------------------------------------- */

int simstore_builder_add(simstore_builder *b, const simstore_doc *doc)
{
    unsigned flags = doc->flags;
    const uint8_t *sketch = doc->sketch;
    const uint64_t *paragraphs = doc->paragraphs;
    size_t n = doc->n_paragraphs;
    if (n && !paragraphs)
        return sims_fail(SIMSTORE_EINVAL, "simstore_builder_add: NULL paragraphs");
    if (n && !b->para_min_words)
        return sims_fail(SIMSTORE_EINVAL,
                         "document '%.*s' comes with paragraphs: this store has no paragraph "
                         "index (build it with paragraphs)",
                         (int)doc->id_len, doc->id);
    if (n > SIMSTORE_MAX_PARAGRAPHS)
        return sims_fail(SIMSTORE_EINVAL, "document '%.*s' has %zu paragraphs (at most %u)",
                         (int)doc->id_len, doc->id, n, SIMSTORE_MAX_PARAGRAPHS);
    if (flags & ~SIMSTORE_DOC_INTEGER_ID)
        return sims_fail(SIMSTORE_EINVAL, "unknown document flags 0x%x", flags);
    if (b->fp_only)
        return sims_fail(SIMSTORE_EINVAL, "a fingerprint-only store takes no documents");
    if (!doc->id || doc->id_len == 0 || doc->id_len > SIMSTORE_MAX_ID_BYTES)
        return sims_fail(SIMSTORE_EINVAL, "document id of %zu bytes (1 to %u allowed)", doc->id_len,
                         SIMSTORE_MAX_ID_BYTES);
    /* A change an older server acknowledged is applied as it was logged
     * (sims_builder_take_logged_ids); every other document follows the id
     * rule. */
    const char *why = b->logged_ids ? NULL : simstore_id_problem(doc->id, doc->id_len);
    if (why)
        return sims_fail(SIMSTORE_EINVAL, "document id '%s': %s",
                         sims_excerpt(doc->id, doc->id_len).text, why);
    size_t meta_len = doc->meta ? doc->meta_len : 0;
    if (meta_len > SIMSTORE_MAX_META_BYTES)
        return sims_fail(SIMSTORE_EINVAL, "metadata of %zu bytes (at most %u allowed)", meta_len,
                         SIMSTORE_MAX_META_BYTES);
    if (b->sketch != SIMSTORE_SKETCH_NONE && !sketch)
        return sims_fail(SIMSTORE_EINVAL,
                         "document '%.*s' has no sketch: this store keeps a %s sketch of every "
                         "document",
                         (int)doc->id_len, doc->id, simstore_sketch_name(b->sketch));
    if (b->sketch == SIMSTORE_SKETCH_NONE && sketch)
        return sims_fail(SIMSTORE_EINVAL,
                         "document '%.*s' comes with a sketch: this store keeps none",
                         (int)doc->id_len, doc->id);
    size_t sketch_len = simstore_sketch_bytes(b->sketch);
    uint8_t fixed[DOC_VAL_FIXED];
    le_store64(fixed, doc->fp);
    le_store64(fixed + 8, doc->source);
    fixed[16] = (uint8_t)(((flags & SIMSTORE_DOC_INTEGER_ID) ? SIMS_DOC_FLAG_INTEGER_ID : 0) |
                          SIMS_DOC_FLAG_SKETCH(b->sketch) | (n ? SIMS_DOC_FLAG_PARAGRAPHS : 0));
    size_t para_len = n ? 4 + n * 8 : 0;
    /* One record: the sorter copies key and value; the value is the fixed
     * part followed by the sketch and the metadata, pushed through a small
     * staging buffer. */
    uint8_t stack[DOC_VAL_FIXED + SIMSTORE_SKETCH_MAX_BYTES + 1024];
    uint8_t *val = stack;
    size_t val_len = DOC_VAL_FIXED + sketch_len + para_len + meta_len;
    if (val_len > sizeof stack) {
        val = malloc(val_len);
        if (!val)
            return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    memcpy(val, fixed, DOC_VAL_FIXED);
    if (sketch_len)
        memcpy(val + DOC_VAL_FIXED, sketch, sketch_len);
    if (n) {
        uint8_t *p = val + DOC_VAL_FIXED + sketch_len;
        le_store32(p, (uint32_t)n);
        for (size_t i = 0; i < n; i++)
            le_store64(p + 4 + 8 * i, paragraphs[i]);
    }
    if (meta_len)
        memcpy(val + DOC_VAL_FIXED + sketch_len + para_len, doc->meta, meta_len);
    /* The position is the record's seq: ids given twice sort the smallest
     * position first, and it becomes the insertion number at commit. */
    int rc = sims_recsort_push_seq(b->docs, doc->id, (uint32_t)doc->id_len, val, (uint32_t)val_len,
                                   b->next_position);
    if (val != stack)
        free(val);
    if (rc)
        b->broken = 1;
    else {
        b->last_position = b->next_position++;
        if (++b->added % PROGRESS_EVERY == 0)
            progress(b, "reading", b->added, 0);
    }
    return rc;
}

int simstore_builder_set_position(simstore_builder *b, uint64_t position)
{
    if (b->fp_only)
        return sims_fail(SIMSTORE_EINVAL, "a fingerprint-only store numbers no documents");
    if (position < b->next_position)
        return sims_fail(SIMSTORE_EINVAL,
                         "position %" PRIu64
                         ": positions only increase (the next is at least %" PRIu64 ")",
                         position, b->next_position);
    if (position >= SIMS_DOC_POSITION_LIMIT)
        return sims_fail(SIMSTORE_EFULL,
                         "position %" PRIu64 ": one commit takes at most %" PRIu64 " documents",
                         position, SIMS_DOC_POSITION_LIMIT);
    b->next_position = position;
    return SIMSTORE_OK;
}

int simstore_builder_add_fp(simstore_builder *b, uint64_t fp)
{
    if (!b->fp_only)
        return sims_fail(SIMSTORE_EINVAL,
                         "this store keeps documents: add documents, not bare fingerprints");
    int rc = sims_spool_append(b->raw, &fp, 1);
    if (rc)
        b->broken = 1;
    else if (++b->added % PROGRESS_EVERY == 0)
        progress(b, "reading", b->added, 0);
    return rc;
}

/* ---- finish: distinct fingerprints ------------------------------------------ */

/* What simstore_builder_finish() holds across its phases; finish_cleanup()
 * releases it. */
typedef struct finish_state {
    simstore_builder *b;
    int new_store;            /* a build (else an add to b->store) */
    sims_recsort *fps;        /* key: fp big-endian, then id */
    sims_spool *distinct;     /* the new segment's fingerprints, sorted, distinct */
    const sims_spool *source; /* what the tables are written from */
    uint64_t doc_count;       /* documents added */
    uint64_t new_fps;         /* distinct fingerprints new to the store */
    uint64_t total_fps;       /* distinct fingerprints of the store after commit */
    sims_design *design;      /* the store's or the new one (owned when building) */
    uint64_t store_tag;
    uint64_t segment_id;
    uint64_t generation; /* the commit's: documents' insertion numbers take it */
    sims_state_record old_state;
    int have_old_state;
    MDB_txn *check_txn;    /* add: a read transaction to test existence */
    sims_snapshot *snap;   /* add, fingerprint-only: the segments to test against */
    uint64_t clashes;      /* documents whose id was stored or given before */
    uint8_t *store_record; /* build: the store record to commit */
    size_t store_record_len;
    int tables_written; /* the segment's table files may exist */
    /* The paragraph index (b->para_min_words): (paragraph fp, id) of every
     * kept document, each document's distinct paragraphs once; the distinct
     * paragraph fingerprints of this commit; its paragraph segment. */
    sims_recsort *pfps;
    sims_spool *pdistinct;
    uint64_t para_fps;
    uint64_t para_segment_id;
    int para_tables_written;
    sims_env env; /* build: the new store's environment */
    int env_open;
    /* build: the segment's documents go to its document file (format/store.md,
     * "Document files"), not to docs and fps; fps's records then carry each
     * document's value and position. */
    int docfile;
} finish_state;

/* An add's id look-up: docs's document, else the store's document file's
 * unless docs has its tombstone (f->snap, f->check_txn: an add). */
static int doc_exists(finish_state *f, const uint8_t *id, size_t len)
{
    sims_doc_found d;
    int rc = sims_doc_lookup(f->b->store, f->snap, f->check_txn, 1, id, len, &d);
    return rc ? rc : d.where == SIMS_DOC_IN_DOCS || d.where == SIMS_DOC_IN_FILE;
}

/* Fingerprint-only stores: is fp in any committed segment's table 0? */
static int fp_exists_tables(finish_state *f, const sims_snapshot *snap, uint64_t fp)
{
    const sims_design *d = f->design;
    uint64_t pq = sims_permute(&d->tables[0].permuter, fp);
    for (uint32_t i = 0; i < snap->segment_count; i++) {
        int found = sims_table_reader_holds(snap->segments[i]->tables[0], pq);
        if (found)
            return found;
    }
    return 0;
}

/* A kept document's distinct paragraph fingerprints into f->pfps, as
 * (fp big-endian, id) keys; key holds the id at key + 8 already. */
static int push_paragraphs(finish_state *f, const sims_rec *rec, uint8_t *key)
{
    simstore_builder *b = f->b;
    size_t sketch_len = simstore_sketch_bytes(b->sketch);
    const uint8_t *p = rec->val + DOC_VAL_FIXED + sketch_len;
    uint32_t n = le_load32(p);
    uint64_t *fps = malloc((size_t)n * sizeof *fps);
    if (!fps)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++)
        fps[i] = le_load64(p + 4 + 8 * (size_t)i);
    qsort(fps, n, sizeof *fps, sims_cmp_u64);
    int rc = SIMSTORE_OK;
    for (uint32_t i = 0; i < n && rc == SIMSTORE_OK; i++) {
        if (i && fps[i] == fps[i - 1])
            continue;
        be_store64(key, fps[i]);
        rc = sims_recsort_push(f->pfps, key, 8 + rec->key_len, NULL, 0);
    }
    free(fps);
    return rc;
}

/* The distinct fingerprints of sorted's (fp big-endian, id) keys into out;
 * with `check` (an add) only those no document of the store holds. */
static int keys_distinct(finish_state *f, sims_recsort *sorted, int check, sims_spool *out)
{
    sims_rec rec;
    uint64_t last = 0, buf[READ_CHUNK];
    int have_last = 0, rc;
    size_t nbuf = 0;
    while ((rc = sims_recsort_next(sorted, &rec)) == 1) {
        uint64_t fp = be_load64(rec.key);
        if (have_last && fp == last)
            continue;
        last = fp;
        have_last = 1;
        if (check) {
            int ex = sims_store_holds_fp(f->b->store, f->snap->docfile, f->snap->docfile_changed,
                                         f->check_txn, fp);
            if (ex < 0)
                return ex;
            if (ex)
                continue;
        }
        buf[nbuf++] = fp;
        if (nbuf == READ_CHUNK) {
            if ((rc = sims_spool_append(out, buf, nbuf)))
                return rc;
            nbuf = 0;
        }
    }
    if (rc < 0)
        return rc;
    return sims_spool_append(out, buf, nbuf);
}

/* The distinct paragraph fingerprints of f->pfps (sorted) into
 * f->pdistinct. They are not checked against the store: a paragraph
 * segment may repeat another's (readers drop repeats, compaction keeps one). */
static int paragraphs_distinct(finish_state *f)
{
    size_t keep = (size_t)(f->b->opt.memory_bytes / 16);
    int rc = sims_recsort_finish(f->pfps, keep);
    if (rc == SIMSTORE_OK)
        rc = keys_distinct(f, f->pfps, 0, f->pdistinct);
    if (rc == SIMSTORE_OK)
        rc = sims_spool_seal(f->pdistinct);
    if (rc == SIMSTORE_OK)
        f->para_fps = sims_spool_count(f->pdistinct);
    return rc;
}

/* Documents mode: pass over documents by id (duplicates, existing ids), then
 * over (fingerprint, id) pairs (distinct fingerprints). */
static int distinct_from_docs(finish_state *f)
{
    simstore_builder *b = f->b;
    /* What each sorter keeps once its input ends: the phases after this one
     * (fingerprint sort, tables, LMDB) share the budget with it. */
    size_t keep = (size_t)(b->opt.memory_bytes / 16);
    int rc = sims_recsort_finish(b->docs, keep);
    if (rc)
        return rc;
    rc = sims_recsort_new((size_t)(b->opt.memory_bytes / 4), b->work_dir, &f->fps);
    if (rc == SIMSTORE_OK && b->para_min_words) {
        rc = sims_recsort_new((size_t)(b->opt.memory_bytes / 8), b->work_dir, &f->pfps);
        if (rc == SIMSTORE_OK)
            rc = sims_spool_new((size_t)(b->opt.memory_bytes / 16 / sizeof(uint64_t)), b->work_dir,
                                &f->pdistinct);
    }
    if (rc)
        return rc;
    sims_rec rec;
    uint8_t prev[SIMSTORE_MAX_ID_BYTES];
    uint32_t prev_len = 0;
    uint64_t prev_source = 0;
    int have_prev = 0;
    uint8_t key[8 + SIMSTORE_MAX_ID_BYTES];
    while ((rc = sims_recsort_next(b->docs, &rec)) == 1) {
        if (rec.val_len < DOC_VAL_FIXED)
            return sims_fail(SIMSTORE_EIO, "internal: short document record");
        uint64_t fp = le_load64(rec.val);
        uint64_t source = le_load64(rec.val + 8);
        /* Ties sort in the order added: the first document with an id is
         * the one kept, and prev stays on it for the repeats that follow. */
        int repeated = have_prev && prev_len == rec.key_len && memcmp(prev, rec.key, prev_len) == 0;
        int stored = 0;
        if (!repeated && f->check_txn) {
            stored = doc_exists(f, rec.key, rec.key_len);
            if (stored < 0)
                return stored;
        }
        if (!repeated) {
            memcpy(prev, rec.key, rec.key_len);
            prev_len = rec.key_len;
            prev_source = source;
            have_prev = 1;
        }
        if (repeated || stored) {
            if (!b->opt.skip_existing && !b->opt.clash) {
                char a[256], c[256];
                source_name(b, source, c, sizeof c);
                if (stored)
                    return sims_fail(SIMSTORE_EINVAL,
                                     "%s: document id '%.*s' is already in the store", c,
                                     (int)rec.key_len, (const char *)rec.key);
                source_name(b, prev_source, a, sizeof a);
                return sims_fail(SIMSTORE_EINVAL, "%s: duplicate document id '%.*s' (first at %s)",
                                 c, (int)rec.key_len, (const char *)rec.key, a);
            }
            f->clashes++;
            if (b->opt.clash) {
                simstore_clash cl = {(const char *)rec.key, rec.key_len, source, repeated,
                                     repeated ? prev_source : 0};
                b->opt.clash(b->opt.clash_ctx, &cl);
            }
            continue;
        }
        if (f->clashes && !b->opt.skip_existing)
            continue; /* the finish fails: only the clashes are still of use */
        be_store64(key, fp);
        memcpy(key + 8, rec.key, rec.key_len);
        rc = f->docfile ? sims_recsort_push_seq(f->fps, key, 8 + rec.key_len, rec.val, rec.val_len,
                                                rec.seq)
                        : sims_recsort_push(f->fps, key, 8 + rec.key_len, NULL, 0);
        if (rc == SIMSTORE_OK && (rec.val[16] & SIMS_DOC_FLAG_PARAGRAPHS))
            rc = push_paragraphs(f, &rec, key);
        if (rc)
            return rc;
        if (++f->doc_count % PROGRESS_EVERY == 0)
            progress(b, "sorting documents", f->doc_count, b->added);
    }
    if (rc < 0)
        return rc;
    if (f->clashes && !b->opt.skip_existing)
        return sims_fail(SIMSTORE_EINVAL,
                         "%" PRIu64 " document id%s given twice or already in the store",
                         f->clashes, f->clashes == 1 ? "" : "s");
    if (f->pfps && (rc = paragraphs_distinct(f)))
        return rc;
    rc = sims_recsort_finish(f->fps, keep);
    if (rc)
        return rc;
    return keys_distinct(f, f->fps, f->check_txn != NULL, f->distinct);
}

/* Fingerprint-only mode: sort the raw fingerprints, dropping repeats and
 * (for a new segment) those already stored. */
static int distinct_from_raw(finish_state *f, const sims_snapshot *snap)
{
    simstore_builder *b = f->b;
    int rc = sims_spool_seal(b->raw);
    if (rc)
        return rc;
    sims_u64sort *sorter;
    rc = sims_u64sort_new((size_t)(b->opt.memory_bytes / 4 / 16), b->work_dir, &sorter);
    if (rc)
        return rc;
    uint64_t *buf = malloc(READ_CHUNK * sizeof *buf);
    if (!buf) {
        sims_u64sort_free(sorter);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    sims_spool_reader r;
    sims_spool_reader_init(&r, b->raw);
    size_t n;
    while ((rc = sims_spool_read(&r, buf, READ_CHUNK, &n)) == SIMSTORE_OK && n > 0)
        if ((rc = sims_u64sort_push(sorter, buf, n)))
            break;
    if (rc == SIMSTORE_OK) {
        /* The raw spool is no longer needed: give its memory back. */
        sims_spool_free(b->raw);
        b->raw = NULL;
        progress(b, "sorting fingerprints", 0, 0);
        rc = sims_u64sort_finish(sorter, 1);
    }
    while (rc == SIMSTORE_OK && (rc = sims_u64sort_read(sorter, buf, READ_CHUNK, &n)) == 0 &&
           n > 0) {
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            if (snap) {
                int ex = fp_exists_tables(f, snap, buf[i]);
                if (ex < 0) {
                    rc = ex;
                    break;
                }
                if (ex)
                    continue;
            }
            buf[w++] = buf[i];
        }
        if (rc == SIMSTORE_OK)
            rc = sims_spool_append(f->distinct, buf, w);
    }
    free(buf);
    sims_u64sort_free(sorter);
    return rc;
}

/* ---- finish: the LMDB transaction ---------------------------------------------- */

typedef struct commit_ctx {
    finish_state *f;
    sims_env *env;
    int new_store;
    const uint8_t *store_record;
    size_t store_record_len;
    uint8_t text_record[SIMS_TEXT_RECORD_BYTES];
    int docs_written; /* a new store's documents went in by chunks already */
} commit_ctx;

/* ---- a new store's documents, in bounded transactions ---------------------------
 * A new store's commit point is the rename of its directory, so its documents
 * can go into LMDB in many small transactions: LMDB then holds only one
 * chunk's dirty pages in memory, not the whole store's. Each chunk is staged
 * in a buffer first so that its transaction can be replayed. */

#define CHUNK_RECORDS 65536
#define CHUNK_BYTES ((size_t)8 << 20)

typedef struct chunk_entry {
    size_t key_off, key_len, val_off, val_len;
} chunk_entry;

typedef struct chunk {
    uint8_t *buf;
    size_t used, cap;
    chunk_entry *entries;
    size_t n;
    MDB_dbi dbi;
    unsigned put_flags;
} chunk;

/* The document record of a builder's value (fp, source, flags, sketch,
 * metadata) with insertion number `insertion`, into buf (cap bytes): its
 * size, or 0 when cap is too small. *need (when not NULL) gets the size. */
/* The parts of a builder's value (DOC_VAL_FIXED): its record flags, the
 * sketch's bytes, the paragraph list and the metadata (NULL when absent). */
typedef struct doc_value {
    unsigned flags;
    const uint8_t *sketch;
    size_t sketch_len;
    const uint8_t *paras;
    uint32_t npara;
    const uint8_t *meta;
    size_t meta_len;
} doc_value;

static void doc_value_parts(const uint8_t *v, size_t vlen, doc_value *d)
{
    d->flags = v[16];
    d->sketch_len = simstore_sketch_bytes((simstore_sketch_kind)SIMS_DOC_SKETCH_KIND(d->flags));
    d->sketch = d->sketch_len ? v + DOC_VAL_FIXED : NULL;
    d->npara = 0;
    d->paras = NULL;
    if (d->flags & SIMS_DOC_FLAG_PARAGRAPHS) {
        d->npara = le_load32(v + DOC_VAL_FIXED + d->sketch_len);
        d->paras = v + DOC_VAL_FIXED + d->sketch_len + 4;
    }
    size_t para_len = d->npara ? 4 + (size_t)d->npara * 8 : 0;
    d->meta_len = vlen - DOC_VAL_FIXED - d->sketch_len - para_len;
    d->meta = d->meta_len ? v + DOC_VAL_FIXED + d->sketch_len + para_len : NULL;
}

static size_t encode_doc_value(const uint8_t *key, size_t klen, const uint8_t *v, size_t vlen,
                               uint64_t insertion, uint8_t *buf, size_t cap, size_t *need)
{
    doc_value dv;
    doc_value_parts(v, vlen, &dv);
    unsigned flags = dv.flags | SIMS_DOC_FLAG_INSERTION;
    uint32_t npara = dv.npara;
    size_t meta_len = dv.meta_len;
    if (need)
        *need = sims_doc_record_size(meta_len, flags) + (size_t)npara * 8;
    if (!buf)
        return 0;
    /* The builder's list is the record's, byte for byte. */
    return sims_doc_record_encode_full(key, klen, le_load64(v), flags, insertion, dv.sketch,
                                       dv.paras, npara, dv.meta, meta_len, buf, cap);
}

static int chunk_add(chunk *ck, const void *key, size_t klen, const void *val, size_t vlen)
{
    size_t need = klen + vlen;
    if (sims_grow_bytes(&ck->buf, &ck->cap, ck->used, need, CHUNK_BYTES))
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    chunk_entry *e = &ck->entries[ck->n++];
    e->key_off = ck->used;
    e->key_len = klen;
    memcpy(ck->buf + ck->used, key, klen);
    ck->used += klen;
    e->val_off = ck->used;
    e->val_len = vlen;
    memcpy(ck->buf + ck->used, val, vlen);
    ck->used += vlen;
    return SIMSTORE_OK;
}

static int chunk_put_fn(MDB_txn *txn, void *arg)
{
    chunk *ck = (chunk *)arg;
    for (size_t i = 0; i < ck->n; i++) {
        chunk_entry *e = &ck->entries[i];
        MDB_val key = {e->key_len, ck->buf + e->key_off}, val = {e->val_len, ck->buf + e->val_off};
        int rc = sims_mdb_write_status(mdb_put(txn, ck->dbi, &key, &val, ck->put_flags),
                                       "write a document");
        if (rc)
            return rc;
    }
    return SIMSTORE_OK;
}

static int chunk_flush(sims_env *env, chunk *ck)
{
    if (ck->n == 0)
        return SIMSTORE_OK;
    int rc = sims_env_write(env, chunk_put_fn, ck);
    ck->n = 0;
    ck->used = 0;
    return rc;
}

/* A new store's paragraph index (the sorted (fp big-endian, id) keys of
 * `sorter`) into `dbi`, by chunks of their own transactions. */
static int load_by_chunks(const simstore_builder *b, sims_env *env, sims_recsort *sorter,
                          MDB_dbi dbi)
{
    chunk ck;
    memset(&ck, 0, sizeof ck);
    ck.dbi = dbi;
    ck.put_flags = MDB_APPENDDUP;
    ck.entries = malloc(CHUNK_RECORDS * sizeof *ck.entries);
    if (!ck.entries)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    int rc = sims_recsort_rewind(sorter);
    sims_rec rec;
    uint64_t done = 0;
    while (rc == SIMSTORE_OK && (rc = sims_recsort_next(sorter, &rec)) == 1) {
        rc = chunk_add(&ck, rec.key, 8, rec.key + 8, rec.key_len - 8);
        if (rc == SIMSTORE_OK && (ck.n == CHUNK_RECORDS || ck.used >= CHUNK_BYTES)) {
            done += ck.n;
            rc = chunk_flush(env, &ck);
            progress(b, "writing the paragraph index", done, 0);
        }
    }
    if (rc == SIMSTORE_OK)
        rc = chunk_flush(env, &ck);
    free(ck.buf);
    free(ck.entries);
    return rc;
}

/* sorted's (fp big-endian, id) keys, from the start, into dbi as fp -> id;
 * progress as `phase` (NULL: none) of total. */
static int put_fp_keys(const simstore_builder *b, MDB_txn *txn, MDB_dbi dbi, sims_recsort *sorted,
                       unsigned flags, const char *what, const char *phase, uint64_t total)
{
    int rc = sims_recsort_rewind(sorted);
    if (rc)
        return rc;
    sims_rec rec;
    uint64_t done = 0;
    while ((rc = sims_recsort_next(sorted, &rec)) == 1) {
        MDB_val key = {8, (void *)rec.key}, val = {rec.key_len - 8, (void *)(rec.key + 8)};
        rc = sims_mdb_write_status(mdb_put(txn, dbi, &key, &val, flags), what);
        if (rc)
            return rc;
        if (phase && ++done % PROGRESS_EVERY == 0)
            progress(b, phase, done, total);
    }
    return rc < 0 ? rc : SIMSTORE_OK;
}

/* A new store's record of meta under name. */
static int put_meta(MDB_txn *txn, MDB_dbi meta, const char *name, const void *data, size_t len,
                    const char *what)
{
    MDB_val key = {strlen(name), (void *)name}, val = {len, (void *)data};
    return sims_mdb_write_status(mdb_put(txn, meta, &key, &val, MDB_NOOVERWRITE), what);
}

static int put_documents(commit_ctx *c, MDB_txn *txn)
{
    finish_state *f = c->f;
    simstore_builder *b = f->b;
    unsigned docs_flags = MDB_NOOVERWRITE; /* an add: a new store's are in its file */
    unsigned fps_flags = 0;
    int rc = sims_recsort_rewind(b->docs);
    if (rc)
        return rc;
    uint8_t *buf = NULL;
    size_t cap = 0;
    sims_rec rec;
    uint64_t done = 0;
    while ((rc = sims_recsort_next(b->docs, &rec)) == 1) {
        size_t need;
        encode_doc_value(rec.key, rec.key_len, rec.val, rec.val_len, 0, NULL, 0, &need);
        uint64_t insertion;
        rc = sims_doc_insertion_number(f->generation, rec.seq, &insertion);
        if (rc)
            break;
        if (need > cap) {
            uint8_t *g = realloc(buf, need);
            if (!g) {
                rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
                break;
            }
            buf = g;
            cap = need;
        }
        size_t n =
            encode_doc_value(rec.key, rec.key_len, rec.val, rec.val_len, insertion, buf, cap, NULL);
        MDB_val key = {rec.key_len, (void *)rec.key}, val = {n, buf};
        if (f->clashes && f->snap) {
            /* An id the store's document file holds, live (docs has no key
             * of it), was a clash the fingerprint pass skipped. */
            docfile_doc fd;
            MDB_val old;
            int in_file = sims_docfile_find_id(f->snap->docfile, rec.key, rec.key_len, &fd);
            int in_docs = in_file == 1 ? mdb_get(txn, c->env->docs, &key, &old) : 0;
            if (in_file < 0) {
                rc = in_file;
                break;
            }
            if (in_file == 1 && in_docs == MDB_NOTFOUND)
                continue;
        }
        int m = mdb_put(txn, c->env->docs, &key, &val, docs_flags);
        if (m == MDB_KEYEXIST && f->snap) {
            /* A tombstone (the file's document of the id was deleted) gives
             * way to the document added again. LMDB pointed val at the
             * value it found. */
            sims_doc_record r;
            int tombstone = 0;
            if (sims_doc_entry_decode(rec.key, rec.key_len, (const uint8_t *)val.mv_data,
                                      val.mv_size, &r, &tombstone) == SIMSTORE_OK &&
                tombstone) {
                val.mv_size = n;
                val.mv_data = buf;
                m = mdb_put(txn, c->env->docs, &key, &val, 0);
            }
        }
        /* An id stored already, or given again (the first given sorts
         * first): skipped, as the fingerprint pass decided. */
        if (m == MDB_KEYEXIST && f->clashes && b->opt.skip_existing)
            continue;
        rc = sims_mdb_write_status(m, "write a document");
        if (rc)
            break;
        if (++done % PROGRESS_EVERY == 0)
            progress(b, "writing documents", done, f->doc_count);
    }
    free(buf);
    if (rc < 0)
        return rc;
    rc = put_fp_keys(b, txn, c->env->fps, f->fps, fps_flags, "write a fingerprint",
                     "writing fingerprint index", f->doc_count);
    if (rc || !f->pfps)
        return rc;
    return put_fp_keys(b, txn, c->env->pfps, f->pfps, fps_flags, "write a paragraph fingerprint",
                       NULL, 0);
}

static int commit_fn(MDB_txn *txn, void *ctx)
{
    commit_ctx *c = (commit_ctx *)ctx;
    finish_state *f = c->f;
    int rc;
    sims_state_record st;
    memset(&st, 0, sizeof st);
    sims_segment_entry *segs = NULL;
    if (c->new_store) {
        rc = put_meta(txn, c->env->meta, "store", c->store_record, c->store_record_len,
                      "write the store record");
        if (rc == SIMSTORE_OK)
            rc = put_meta(txn, c->env->meta, "text", c->text_record, SIMS_TEXT_RECORD_BYTES,
                          "write the text record");
        if (rc == SIMSTORE_OK && f->b->boilerplate_record)
            rc = put_meta(txn, c->env->meta, "boilerplate", f->b->boilerplate_record,
                          f->b->boilerplate_record_len, "write the boilerplate record");
        if (rc)
            return rc;
        st.next_segment_id = 1;
    } else {
        /* Re-read inside the transaction: it is what this commit replaces. */
        rc = sims_store_read_state(f->b->store, txn, &st);
        if (rc)
            return rc;
        if (st.generation != f->old_state.generation) {
            sims_state_record_release(&st);
            return sims_fail(SIMSTORE_EBUSY, "the store changed during the build");
        }
    }
    if (!f->b->fp_only && !c->docs_written) {
        rc = put_documents(c, txn);
        if (rc) {
            sims_state_record_release(&st);
            return rc;
        }
    }
    uint32_t nseg = st.segment_count + (f->new_fps > 0);
    uint32_t npseg = st.para_segment_count + (f->para_fps > 0);
    segs = calloc(nseg + npseg ? nseg + npseg : 1, sizeof *segs);
    if (!segs) {
        sims_state_record_release(&st);
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    }
    if (st.segment_count)
        memcpy(segs, st.segments, st.segment_count * sizeof *segs);
    /* Documents written to docs beside a document file: docs holds changes
     * (format/store.md, "Document files"). */
    for (uint32_t i = 0; i < st.segment_count && !c->new_store && f->doc_count; i++)
        if (segs[i].flags & SIMS_SEGMENT_FLAG_DOCFILE)
            segs[i].flags |= SIMS_SEGMENT_FLAG_CHANGED;
    if (f->new_fps > 0) {
        sims_segment_entry *e = &segs[nseg - 1];
        e->id = f->segment_id;
        e->fp_count = f->new_fps;
        e->created_unix = sims_now_unix();
        e->table_count = f->design->n_tables;
        e->flags = f->docfile ? SIMS_SEGMENT_FLAG_DOCFILE : 0;
    }
    sims_segment_entry *psegs = segs + nseg;
    if (st.para_segment_count)
        memcpy(psegs, st.para_segments, st.para_segment_count * sizeof *segs);
    if (f->para_fps > 0) {
        sims_segment_entry *e = &psegs[npseg - 1];
        e->id = f->para_segment_id;
        e->fp_count = f->para_fps;
        e->created_unix = sims_now_unix();
        e->table_count = f->design->n_tables;
    }
    sims_state_record next = {
        .generation = st.generation + 1,
        .next_segment_id = f->para_fps > 0  ? f->para_segment_id + 1
                           : f->new_fps > 0 ? f->segment_id + 1
                                            : st.next_segment_id,
        .doc_count = st.doc_count + f->doc_count,
        .fp_count = st.fp_count + f->new_fps,
        .segment_count = nseg,
        .segments = segs,
        .para_segment_count = npseg,
        .para_segments = psegs,
    };
    if (next.next_segment_id == 0)
        next.next_segment_id = 1;
    /* Every commit carries the applied WAL sequence number on; a live
     * store's flush raises it (never lowers: numbers never go back). */
    next.wal_applied = st.wal_applied > f->b->wal_applied ? st.wal_applied : f->b->wal_applied;
    rc = sims_put_state(txn, c->env->meta, &next);
    free(segs);
    sims_state_record_release(&st);
    return rc;
}

/* ---- finish --------------------------------------------------------------------- */

/* The text record for a new store: the options (checked by
 * validate_text_options) with AUTO resolved to the segmenter this process
 * uses, version 0 read as 1 and CJK shingle 0 as the default. */
static void encode_text_options(const simstore_text_options *given, uint8_t *out)
{
    simstore_text_options t;
    if (given)
        t = *given;
    else
        simstore_text_options_init(&t);
    if (t.cjk == SIMSTORE_CJK_AUTO)
        t.cjk = (simstore_cjk_mode)simstore_cjk_segmenter(NULL);
    unsigned version = sims_fp_version(t.version);
    sims_text_record r = {
        .shingle_words = t.shingle_words,
        .weighting = (uint32_t)t.weighting,
        .cjk = t.cjk == SIMSTORE_CJK_FRISO ? 1u : 2u,
        .lambda_fixed = (uint64_t)(t.lambda * 65536.0 + 0.5),
        .version = version,
        .cjk_shingle = version == 1    ? 0
                       : t.cjk_shingle ? t.cjk_shingle
                                       : SIMSTORE_CJK_SHINGLE_DEFAULT,
        .sketch = (uint32_t)t.sketch,
        .paragraph_min_words = t.paragraph_min_words,
    };
    sims_text_record_encode(&r, out);
}

static uint64_t random_tag(void)
{
    uint64_t tag = 0;
    if (getrandom(&tag, sizeof tag, 0) != (ssize_t)sizeof tag || tag == 0)
        tag = (sims_now_unix() << 20) ^ (uint64_t)getpid() ^ 0x9E3779B97F4A7C15ULL;
    return tag;
}

static int choose_design(finish_state *f)
{
    simstore_builder *b = f->b;
    f->design = malloc(sizeof *f->design);
    if (!f->design)
        return sims_fail(SIMSTORE_ENOMEM, "out of memory");
    uint64_t n = b->opt.expected_fps ? b->opt.expected_fps : f->new_fps;
    if (b->opt.tables)
        return sims_design_with_tables(b->opt.k, b->opt.tables, f->design);
    double fpb = sims_design_fps_per_block(n, b->opt.block_bytes);
    return sims_design_choose(b->opt.k, n, fpb, NULL, f->design);
}

int sims_store_swap_in(const char *work_dir, const char *final_path, int held_lock_fd)
{
    /* Swap atomically, holding the old store's writer lock so no writer is
     * inside it (the caller's, held_lock_fd, or taken here), then delete the
     * old store. It is marked first: a crash after the swap leaves it as a
     * marked build directory, which the next build of this path removes. */
    int fd = held_lock_fd;
    if (held_lock_fd < 0) {
        char lock[PATH_MAX];
        int rc = sims_join_path(lock, sizeof lock, final_path, "writer.lock");
        if (rc)
            return rc;
        fd = open(lock, O_RDWR | O_CLOEXEC);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
            rc = sims_store_busy(final_path, fd);
            close(fd);
            return rc;
        }
    }
    int rc = put_marker(final_path);
    if (rc == SIMSTORE_OK)
        rc = sims_fsync_dir(final_path);
    if (rc == SIMSTORE_OK &&
        (sims_fault_hit(SIMS_FAULT_RENAME) ||
         renameat2(AT_FDCWD, work_dir, AT_FDCWD, final_path, RENAME_EXCHANGE) != 0))
        rc = sims_fail_errno("swap %s into place", final_path);
    if (rc) {
        remove_marker(final_path);
        if (fd >= 0 && held_lock_fd < 0)
            close(fd);
        return rc;
    }
    /* The new store is published: it is no build directory any more (the
     * caller removes work_dir by name if what follows fails). */
    remove_marker(final_path);
    rc = sims_fsync_parent(final_path);
    if (rc) {
        /* The swap is not known to be durable, and a failure must leave the
         * old store: swap back (still holding its lock); the caller removes
         * the new one from work_dir. */
        if (renameat2(AT_FDCWD, work_dir, AT_FDCWD, final_path, RENAME_EXCHANGE) == 0) {
            (void)sims_fsync_parent(final_path);
            remove_marker(final_path);
        }
        if (fd >= 0 && held_lock_fd < 0)
            close(fd);
        return rc;
    }
    if (fd >= 0 && held_lock_fd < 0)
        close(fd);
    remove_build_dir(work_dir); /* now the old store */
    return SIMSTORE_OK;
}

/* Move the finished work directory to its final path. */
static int publish_store(simstore_builder *b)
{
    int rc = sims_fsync_dir(b->work_dir);
    if (rc)
        return rc;
    struct stat st;
    if (lstat(b->final_path, &st) == 0) {
        if (!b->opt.replace)
            return sims_fail(SIMSTORE_EEXIST, "%s appeared during the build", b->final_path);
        /* What is there now is what gets removed: check it again. */
        rc = check_replaceable(b->final_path);
        if (rc)
            return rc;
        return sims_store_swap_in(b->work_dir, b->final_path, -1);
    }
    if (sims_rename(b->work_dir, b->final_path) != 0)
        return sims_fail_errno("rename %s to %s", b->work_dir, b->final_path);
    remove_marker(b->final_path);
    rc = sims_fsync_parent(b->final_path);
    /* Not known to be durable: a failed build leaves no store, so take it
     * back (the caller removes work_dir). */
    if (rc && rename(b->final_path, b->work_dir) == 0)
        (void)sims_fsync_parent(b->final_path);
    return rc;
}

/* Whether the commit of f->generation can number the documents given
 * (format/store.md, "The document record"): refused before anything is
 * written when it cannot. */
static int check_insertion_limits(const finish_state *f)
{
    uint64_t last;
    if (f->b->fp_only || f->b->added == 0)
        return SIMSTORE_OK;
    /* Positions increase: the last document added holds the largest. */
    return sims_doc_insertion_number(f->generation, f->b->last_position, &last);
}

/* Phase 1: what the new segment is measured against: the store's state
 * (an add), or a new store's tag. */
static int finish_begin(finish_state *f)
{
    simstore_builder *b = f->b;
    int rc = sims_spool_new((size_t)(b->opt.memory_bytes / 8 / sizeof(uint64_t)), b->work_dir,
                            &f->distinct);
    f->source = f->distinct;
    if (rc)
        return rc;
    if (f->new_store) {
        f->store_tag = random_tag();
        f->segment_id = 1;
        f->generation = 1;
        f->docfile = !b->fp_only;
        return check_insertion_limits(f);
    }
    simstore *s = b->store;
    f->design = s->design;
    f->store_tag = s->store_tag;
    rc = sims_env_read_begin(&s->env, &f->check_txn);
    if (rc)
        return rc;
    rc = sims_store_read_state(s, f->check_txn, &f->old_state);
    if (rc)
        return rc;
    f->have_old_state = 1;
    f->segment_id = f->old_state.next_segment_id;
    /* commit_fn fails unless the state it replaces is this one. */
    f->generation = f->old_state.generation + 1;
    rc = check_insertion_limits(f);
    if (rc)
        return rc;
    /* The segments to test fingerprints against (fingerprint-only), or
     * the document file to test ids and fingerprints against. */
    return sims_store_snapshot(s, f->check_txn, &f->snap);
}

/* Phase 2: sort the documents (clashing ids found here) and keep the
 * fingerprints new to the store, distinct: the source of the tables. */
static int finish_sort(finish_state *f)
{
    simstore_builder *b = f->b;
    int rc;
    progress(b, "sorting", 0, 0);
    if (b->fp_only && f->new_store) {
        /* Nothing to filter against: each table's sort drops repeats itself,
         * so the fingerprints go to the tables as read. new_fps is an upper
         * bound until the tables report the distinct count. */
        rc = sims_spool_seal(b->raw);
        f->source = b->raw;
    } else {
        rc = b->fp_only ? distinct_from_raw(f, f->snap) : distinct_from_docs(f);
        if (rc == SIMSTORE_OK)
            rc = sims_spool_seal(f->distinct);
    }
    if (rc)
        return rc;
    f->new_fps = sims_spool_count(f->source);
    if (f->check_txn) {
        mdb_txn_abort(f->check_txn);
        f->check_txn = NULL;
    }
    return SIMSTORE_OK;
}

/* Phase 3: a new store's design (from the fingerprint count) and store
 * record; an add's segment takes the store's block size. */
static int finish_design(finish_state *f)
{
    simstore_builder *b = f->b;
    if (!f->new_store) {
        /* The segment's tables use the store's block size. */
        b->opt.block_bytes = b->store->block_bytes;
        return SIMSTORE_OK;
    }
    int rc = choose_design(f);
    if (rc)
        return rc;
    uint8_t *design_rec = malloc(sims_design_record_bytes(f->design));
    size_t design_len = 0;
    rc = design_rec ? sims_design_encode(f->design, design_rec, sims_design_record_bytes(f->design),
                                         &design_len)
                    : sims_fail(SIMSTORE_ENOMEM, "out of memory");
    if (rc == SIMSTORE_OK) {
        sims_store_record sr = {
            .format_version = SIMS_STORE_FORMAT_VERSION,
            .flags = b->fp_only ? SIMS_STORE_FLAG_FP_ONLY : 0,
            .store_tag = f->store_tag,
            .block_bytes = b->opt.block_bytes,
            .created_unix = sims_now_unix(),
            .incompat_features = sims_store_incompat_of_version(sims_fp_version(b->text.version)),
            .design = design_rec,
            .design_len = (uint32_t)design_len,
        };
        f->store_record_len = sims_store_record_size(&sr);
        f->store_record = malloc(f->store_record_len);
        if (!f->store_record)
            rc = sims_fail(SIMSTORE_ENOMEM, "out of memory");
        else
            sims_store_record_encode(&sr, f->store_record, f->store_record_len);
    }
    free(design_rec);
    return rc;
}

/* One segment's table files: the store's design over `distinct`. */
static int finish_write_segment(finish_state *f, uint64_t segment_id, const sims_spool *distinct,
                                uint64_t *fp_count)
{
    simstore_builder *b = f->b;
    sims_segment_job job = {
        .design = f->design,
        .store_tag = f->store_tag,
        .block_bytes = b->opt.block_bytes,
        .dir = b->work_dir,
        .segment_id = segment_id,
        .distinct = distinct,
        .fp_count = fp_count,
        .threads = b->threads,
        .memory_bytes = b->opt.memory_bytes / 2,
        .progress = b->opt.progress,
        .progress_ctx = b->opt.progress_ctx,
    };
    return sims_segment_write(&job);
}

/* Phase 4: the segment's table files, unreferenced until the commit; first
 * the paragraph segment's (this commit's distinct paragraph fingerprints),
 * the id after the document segment's. */
static int finish_write_tables(finish_state *f)
{
    if (f->para_fps > 0) {
        f->para_segment_id = f->segment_id + 1;
        f->para_tables_written = 1;
        int rc = finish_write_segment(f, f->para_segment_id, f->pdistinct, &f->para_fps);
        if (rc)
            return rc;
    }
    if (f->new_fps == 0)
        return SIMSTORE_OK;
    f->tables_written = 1;
    return finish_write_segment(f, f->segment_id, f->source, &f->new_fps);
}

/* A new store's documents into its segment's document file, from fps's
 * records in (fingerprint, id) order, each with the builder's value and its
 * position. Published in the work directory, which the commit's rename
 * makes the store. */
static int write_docfile(finish_state *f)
{
    simstore_builder *b = f->b;
    char path[PATH_MAX];
    docfile_writer *w = NULL;
    int rc = sims_docfile_path(path, sizeof path, b->work_dir, f->segment_id);
    if (rc == SIMSTORE_OK)
        rc = sims_docfile_writer_open(path, (unsigned)simstore_sketch_bytes(b->sketch),
                                      (size_t)(b->opt.memory_bytes / 4), b->work_dir, &w);
    if (rc == SIMSTORE_OK)
        rc = sims_recsort_rewind(f->fps);
    sims_rec rec;
    uint64_t done = 0;
    while (rc == SIMSTORE_OK && (rc = sims_recsort_next(f->fps, &rec)) == 1) {
        doc_value dv;
        doc_value_parts((const uint8_t *)rec.val, rec.val_len, &dv);
        uint64_t insertion;
        rc = sims_doc_insertion_number(f->generation, rec.seq, &insertion);
        if (rc)
            break;
        docfile_doc d = {0,
                         be_load64(rec.key),
                         insertion,
                         (const uint8_t *)rec.key + 8,
                         rec.key_len - 8,
                         (dv.flags & SIMS_DOC_FLAG_INTEGER_ID) != 0,
                         dv.meta,
                         (uint32_t)dv.meta_len,
                         dv.sketch,
                         dv.paras,
                         dv.npara};
        rc = sims_docfile_writer_add(w, &d);
        if (rc == SIMSTORE_OK && ++done % PROGRESS_EVERY == 0)
            progress(b, "writing documents", done, f->doc_count);
    }
    if (rc < 0) {
        sims_docfile_writer_abort(w);
        return rc;
    }
    return sims_docfile_writer_commit(w, NULL);
}

/* Phase 5: the documents and the new state, in one LMDB commit (a new
 * store's documents first, in chunks of their own). */
static int finish_commit(finish_state *f)
{
    simstore_builder *b = f->b;
    int rc;
    if (f->new_store) {
        rc = sims_env_open(&f->env, b->work_dir,
                           SIMS_ENV_CREATE | (b->para_min_words ? SIMS_ENV_PARAGRAPHS : 0));
        if (rc)
            return rc;
        f->env_open = 1;
    }
    progress(b, "committing", 0, 0);
    commit_ctx c = {f,
                    f->new_store ? &f->env : &b->store->env,
                    f->new_store,
                    f->store_record,
                    f->store_record_len,
                    {0},
                    0};
    if (f->new_store)
        encode_text_options(b->opt.text, c.text_record);
    if (f->new_store && !b->fp_only) {
        /* Nobody can see this store until its directory is renamed, after
         * the final commit below, which syncs everything these chunks wrote:
         * the chunks need not each wait for the disk. */
        mdb_env_set_flags(f->env.env, MDB_NOSYNC, 1);
        rc = f->doc_count ? write_docfile(f) : SIMSTORE_OK;
        if (rc == SIMSTORE_OK && f->pfps)
            rc = load_by_chunks(b, &f->env, f->pfps, f->env.pfps);
        mdb_env_set_flags(f->env.env, MDB_NOSYNC, 0);
        if (rc)
            return rc;
        c.docs_written = 1;
    }
    return sims_env_write(c.env, commit_fn, &c);
}

/* Phase 6, once committed: a new store is renamed into place; an add may
 * compact. Progress says "done" either way. */
static int finish_publish(finish_state *f)
{
    simstore_builder *b = f->b;
    int rc = SIMSTORE_OK;
    if (f->new_store) {
        sims_env_close(&f->env);
        f->env_open = 0;
        rc = publish_store(b);
    } else if (!(b->store->open_flags & SIMSTORE_OPEN_NO_AUTO_COMPACT)) {
        /* The segment is committed, so the add has succeeded whatever
         * happens next: a failed compaction leaves a valid store with more
         * segments, and the next writer tries again. */
        if (simstore_maybe_compact(b->store, &b->opt) != SIMSTORE_OK)
            sims_error_clear();
    }
    progress(b, "done", 1, 1);
    return rc;
}

/* Release what the phases hold; after a failure (rc), remove what they
 * wrote: an add's table files, a build's whole work directory. */
static void finish_cleanup(finish_state *f, int rc)
{
    simstore_builder *b = f->b;
    if (f->check_txn)
        mdb_txn_abort(f->check_txn);
    if (f->env_open)
        sims_env_close(&f->env);
    sims_snapshot_release(f->snap);
    if (rc && !f->new_store && f->tables_written)
        sims_segment_remove(b->work_dir, f->segment_id, f->design->n_tables);
    if (rc && !f->new_store && f->para_tables_written)
        sims_segment_remove(b->work_dir, f->para_segment_id, f->design->n_tables);
    sims_recsort_free(f->pfps);
    sims_spool_free(f->pdistinct);
    if (f->have_old_state)
        sims_state_record_release(&f->old_state);
    sims_recsort_free(f->fps);
    sims_spool_free(f->distinct);
    if (f->new_store)
        free(f->design);
    free(f->store_record);
    if (rc && f->new_store)
        remove_build_dir(b->work_dir);
}

int simstore_builder_finish(simstore_builder *b)
{
    if (b->broken) {
        int rc = sims_fail(SIMSTORE_EINVAL, "an earlier add failed; the build was abandoned");
        simstore_builder_abort(b);
        return rc;
    }
    finish_state f;
    memset(&f, 0, sizeof f);
    f.b = b;
    f.new_store = b->store == NULL;
    if (!f.new_store)
        pthread_mutex_lock(&b->store->write_mu); /* one change at a time per handle */
    int rc = finish_begin(&f);
    if (rc == SIMSTORE_OK)
        rc = finish_sort(&f);
    if (rc == SIMSTORE_OK)
        rc = finish_design(&f);
    if (rc == SIMSTORE_OK)
        rc = finish_write_tables(&f);
    if (rc == SIMSTORE_OK)
        rc = finish_commit(&f);
    if (rc == SIMSTORE_OK)
        rc = finish_publish(&f);
    finish_cleanup(&f, rc);
    if (!f.new_store)
        pthread_mutex_unlock(&b->store->write_mu);
    builder_free(b);
    return rc;
}

void sims_builder_take_logged_ids(simstore_builder *b)
{
    b->logged_ids = 1;
}

int sims_builder_set_wal_applied(simstore_builder *b, uint64_t seq)
{
    if (!b || !b->store)
        return sims_fail(SIMSTORE_EINVAL, "an applied WAL sequence number needs an add's builder");
    b->wal_applied = seq;
    return SIMSTORE_OK;
}

void simstore_builder_abort(simstore_builder *b)
{
    if (!b)
        return;
    if (!b->store && b->work_dir)
        remove_build_dir(b->work_dir);
    builder_free(b);
}
