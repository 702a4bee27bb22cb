/* collect.c: the Store's calls whose answers come through callbacks while
 * the GIL is released: query_batch, get, documents, pairs and clusters. The
 * callbacks copy each answer into a collector (fixed-size records, strings
 * in one growing arena), made into Python tuples once the GIL is back. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- The collector --------------------------------------------------------------- */

typedef struct collected {
    size_t a_off, a_len, b_off, b_len, c_off, c_len; /* SIZE_MAX: a NULL string */
    unsigned a_flags, b_flags;
    uint64_t x, y, z;
    unsigned distance;
    int kept;
    double similarity;
} collected;

typedef struct collector {
    collected *recs;
    size_t n, cap;
    char *arena;
    size_t used, arena_cap;
    int failed; /* out of memory */
} collector;

static size_t collect_string(collector *c, const char *s, size_t len)
{
    if (!s)
        return SIZE_MAX;
    if (c->used + len + 1 > c->arena_cap) {
        size_t cap = c->arena_cap ? c->arena_cap : 4096;
        while (c->used + len + 1 > cap)
            cap *= 2;
        char *a = realloc(c->arena, cap);
        if (!a) {
            c->failed = 1;
            return SIZE_MAX;
        }
        c->arena = a;
        c->arena_cap = cap;
    }
    size_t off = c->used;
    memcpy(c->arena + off, s, len);
    c->arena[off + len] = '\0';
    c->used += len + 1;
    return off;
}

/* A new record holding id a (and b, when not NULL), or NULL when out of
 * memory. */
static collected *collect_new(collector *c, const char *a, size_t a_len, unsigned a_flags,
                              const char *b, size_t b_len, unsigned b_flags)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        collected *r = realloc(c->recs, cap * sizeof *r);
        if (!r) {
            c->failed = 1;
            return NULL;
        }
        c->recs = r;
        c->cap = cap;
    }
    collected *r = &c->recs[c->n++];
    memset(r, 0, sizeof *r);
    r->a_off = collect_string(c, a, a_len);
    r->a_len = a_len;
    r->a_flags = a_flags;
    r->b_off = collect_string(c, b, b_len);
    r->b_len = b_len;
    r->b_flags = b_flags;
    r->c_off = SIZE_MAX;
    return c->failed ? NULL : r;
}

static void collector_free(collector *c)
{
    free(c->recs);
    free(c->arena);
}

static const char *collected_at(const collector *c, size_t off)
{
    return off == SIZE_MAX ? NULL : c->arena + off;
}

/* A record's ids a and b as Python objects. */
static PyObject *id_a(const collector *c, const collected *r)
{
    return sp_id_to_py(collected_at(c, r->a_off), r->a_len, r->a_flags);
}

static PyObject *id_b(const collector *c, const collected *r)
{
    return sp_id_to_py(collected_at(c, r->b_off), r->b_len, r->b_flags);
}

/* A Python object of a record, from its fields (new references, NULL
 * where one failed). */
typedef PyObject *(*make_fn)(const collector *c, const collected *r);

/* A list of what make makes of every record. */
static PyObject *collected_list(const collector *c, make_fn make)
{
    PyObject *list = PyList_New((Py_ssize_t)c->n);
    for (size_t i = 0; list && i < c->n; i++) {
        PyObject *x = make(c, &c->recs[i]);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, x);
    }
    return list;
}

/* ---- query_batch -------------------------------------------------------------------- */

typedef struct batch_ctx {
    collector c;
    int64_t *lims;
} batch_ctx;

static int batch_cb(void *ctx, size_t index, uint64_t fp, const simstore_match *matches,
                    size_t count)
{
    (void)fp;
    batch_ctx *b = ctx;
    for (size_t i = 0; i < count; i++) {
        const simstore_match *m = &matches[i];
        collected *r = collect_new(&b->c, m->id, m->id_len, m->flags, NULL, 0, 0);
        if (!r)
            return SIMSTORE_ENOMEM;
        r->x = m->fp;
        r->distance = m->distance;
        r->similarity = m->similarity;
    }
    b->lims[index + 1] = (int64_t)b->c.n;
    return 0;
}

/* The texts of a batch: fingerprinted (and sketched, when the store keeps
 * sketches) as the store's documents, with the GIL released. texts is a
 * PySequence_Fast of str or bytes; *fps and *sketches are malloc'ed. */
static int batch_texts(sp_state *st, sp_store *self, PyObject *texts, uint64_t **fps,
                       uint8_t **sketches, size_t *n)
{
    size_t count = (size_t)PySequence_Fast_GET_SIZE(texts);
    const char **ptrs = malloc((count ? count : 1) * sizeof *ptrs);
    size_t *lens = malloc((count ? count : 1) * sizeof *lens);
    simstore_text_options to;
    simstore_get_text_options(self->s, &to);
    size_t sk_bytes = simstore_sketch_bytes(to.sketch);
    *fps = malloc((count ? count : 1) * sizeof **fps);
    *sketches = sk_bytes ? malloc((count ? count : 1) * sk_bytes) : NULL;
    Py_ssize_t bad = -2;
    int err = 0;
    if (!ptrs || !lens || !*fps || (sk_bytes && !*sketches))
        PyErr_NoMemory();
    else
        bad = sp_texts_utf8(texts, ptrs, lens);
    if (bad >= 0) {
        PyErr_Format(PyExc_TypeError,
                     "query_batch() takes fingerprints or texts, not a mix (item %zd is a %.100s)",
                     bad, Py_TYPE(PySequence_Fast_GET_ITEM(texts, bad))->tp_name);
    } else if (bad == -1) {
        sp_qslot *sl = NULL;
        Py_BEGIN_ALLOW_THREADS;
        err = sp_slot_take(self, 0, &sl);
        if (!err && !sl->fpr)
            err = sp_store_fingerprinter(self->s, &sl->fpr);
        for (size_t i = 0; i < count && !err; i++) {
            if (sk_bytes)
                err = simstore_fingerprint_sketch(sl->fpr, ptrs[i], lens[i], &(*fps)[i],
                                                  *sketches + i * sk_bytes, NULL);
            else
                err = simstore_fingerprint_text(sl->fpr, ptrs[i], lens[i], &(*fps)[i], NULL);
        }
        Py_END_ALLOW_THREADS;
        if (sl)
            sp_slot_give(self, 0, sl);
        if (err)
            sp_raise_error(st, err, "query_batch");
    }
    free(ptrs);
    free(lens);
    if (bad != -1 || err) {
        free(*fps);
        free(*sketches);
        *fps = NULL;
        *sketches = NULL;
        return -1;
    }
    *n = count;
    return 0;
}

/* (lims, ids, distances, similarities) of a batch: lims (int64), distances
 * (int32) and similarities (float64, NaN for unknown) as bytearrays of
 * native values; ids a list (the fingerprints in a fingerprint-only store). */
static PyObject *batch_result(const batch_ctx *b, size_t n)
{
    size_t m = b->c.n;
    PyObject *lims = PyByteArray_FromStringAndSize((const char *)b->lims,
                                                   (Py_ssize_t)((n + 1) * sizeof *b->lims));
    PyObject *ids = PyList_New((Py_ssize_t)m);
    PyObject *dists = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(m * sizeof(int32_t)));
    PyObject *sims = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(m * sizeof(double)));
    for (size_t i = 0; lims && ids && dists && sims && i < m; i++) {
        const collected *r = &b->c.recs[i];
        ((int32_t *)PyByteArray_AS_STRING(dists))[i] = (int32_t)r->distance;
        ((double *)PyByteArray_AS_STRING(sims))[i] = r->similarity < 0 ? Py_NAN : r->similarity;
        PyObject *id = r->a_off == SIZE_MAX ? PyLong_FromUnsignedLongLong(r->x) : id_a(&b->c, r);
        if (!id)
            Py_CLEAR(ids);
        else
            PyList_SET_ITEM(ids, (Py_ssize_t)i, id);
    }
    PyObject *items[4] = {lims, ids, dists, sims};
    return sp_tuple(items, 4);
}

const char sp_store_query_batch_doc[] =
    "query_batch(queries, texts, k, threads) -> (lims, ids, distances, similarities)\n\n"
    "Answer many queries (fingerprints, or with texts a sequence of texts) through\n"
    "the batch path: FAISS range_search's layout, lims, distances and similarities\n"
    "as bytearrays of int64, int32 and float64.";

PyObject *sp_store_query_batch(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "query_batch", nargs, kwnames, 4);
    unsigned k = 0, threads = 0;
    int texts = 0;
    if (!st || (texts = PyObject_IsTrue(args[1])) < 0 || sp_uint_arg(args[2], &k) < 0 ||
        sp_uint_arg(args[3], &threads) < 0 || sp_store_enter(self) < 0)
        return NULL;
    uint64_t *fps = NULL;
    uint8_t *sketches = NULL;
    size_t n = 0;
    batch_ctx b;
    memset(&b, 0, sizeof b);
    PyObject *result = NULL;
    int rc = 0;
    if (texts) {
        PyObject *seq = PySequence_Fast(args[0], "query_batch() takes a sequence of texts");
        rc = seq ? batch_texts(st, self, seq, &fps, &sketches, &n) : -1;
        Py_XDECREF(seq);
    } else {
        rc = sp_fps_from_py(args[0], &fps, &n);
    }
    if (rc == 0 && !(b.lims = calloc(n + 1, sizeof *b.lims))) {
        PyErr_NoMemory();
        rc = -1;
    }
    if (rc == 0) {
        simstore_batch_options o;
        simstore_batch_options_init(&o);
        o.threads = threads;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_query_batch_sketches(self->s, fps, sketches, n, k, &o, batch_cb, &b);
        Py_END_ALLOW_THREADS;
        result = err ? sp_raise_error(st, err, "query_batch") : batch_result(&b, n);
    }
    sp_store_leave(self);
    free(b.lims);
    free(fps);
    free(sketches);
    collector_free(&b.c);
    return result;
}

/* ---- get and documents ------------------------------------------------------------- */

typedef struct get_ctx {
    collector c;
    int missing;
} get_ctx;

static int get_cb(void *ctx, const simstore_document *doc)
{
    get_ctx *g = ctx;
    g->missing = doc->missing;
    if (doc->missing)
        return 0;
    collected *r =
        collect_new(&g->c, doc->id, doc->id_len, doc->flags, doc->meta, doc->meta_len, 0);
    if (!r)
        return SIMSTORE_ENOMEM;
    r->c_off = collect_string(&g->c, (const char *)doc->sketch, doc->sketch_bytes);
    r->c_len = doc->sketch_bytes;
    r->x = doc->fp;
    r->y = doc->segment;
    r->z = doc->insertion;
    return g->c.failed ? SIMSTORE_ENOMEM : 0;
}

/* A document: (id, fp, meta, segment, insertion, sketch), meta its JSON
 * text or None, sketch bytes or None. */
static PyObject *make_document(const collector *c, const collected *r)
{
    PyObject *items[6] = {id_a(c, r),
                          PyLong_FromUnsignedLongLong(r->x),
                          sp_meta_to_py(collected_at(c, r->b_off), r->b_len),
                          PyLong_FromUnsignedLongLong(r->y),
                          PyLong_FromUnsignedLongLong(r->z),
                          r->c_off == SIZE_MAX ? Py_NewRef(Py_None)
                                               : PyBytes_FromStringAndSize(c->arena + r->c_off,
                                                                           (Py_ssize_t)r->c_len)};
    return sp_tuple(items, 6);
}

const char sp_store_get_doc[] = "get(id) -> tuple or None\n\n"
                                "The document with this id: (id, fp, meta, segment, insertion,\n"
                                "sketch), or None.";

PyObject *sp_store_get(PyObject *op, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "get", nargs, kwnames, 1);
    const char *id = NULL;
    size_t len = 0;
    unsigned flags = 0;
    PyObject *hold = NULL, *result = NULL;
    if (!st || sp_id_from_py(args[0], &id, &len, &flags, &hold) < 0)
        return NULL;
    get_ctx g;
    memset(&g, 0, sizeof g);
    if (sp_store_enter(self) == 0) {
        int err = 0;
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_get(self->s, &id, &len, 1, get_cb, &g);
        Py_END_ALLOW_THREADS;
        sp_store_leave(self);
        if (err)
            sp_raise_error(st, err, "get");
        else if (g.missing || g.c.n == 0)
            result = Py_NewRef(Py_None);
        else
            result = make_document(&g.c, &g.c.recs[0]);
    }
    collector_free(&g.c);
    Py_XDECREF(hold);
    return result;
}

const char sp_store_documents_doc[] =
    "documents(scan_options, by_insertion) -> list of tuples\n\n"
    "Every live document, as get() gives it, in id byte order or by insertion.";

PyObject *sp_store_documents(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "documents", nargs, kwnames, 2);
    simstore_scan_options o;
    int by_insertion = 0;
    if (!st || sp_scan_options_from_py(args[0], &o) < 0 ||
        (by_insertion = PyObject_IsTrue(args[1])) < 0 || sp_store_enter(self) < 0)
        return NULL;
    get_ctx g;
    memset(&g, 0, sizeof g);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_export(self->s, &o, by_insertion ? SIMSTORE_EXPORT_BY_INSERTION : 0, get_cb, &g);
    Py_END_ALLOW_THREADS;
    sp_store_leave(self);
    PyObject *list =
        err ? sp_raise_error(st, err, "documents") : collected_list(&g.c, make_document);
    collector_free(&g.c);
    return list;
}

/* ---- pairs and clusters ------------------------------------------------------------ */

static int pair_cb(void *ctx, const simstore_pair *p)
{
    collector *c = ctx;
    collected *r =
        collect_new(c, p->id_a, p->id_a_len, p->flags_a, p->id_b, p->id_b_len, p->flags_b);
    if (!r)
        return SIMSTORE_ENOMEM;
    r->x = p->fp_a;
    r->y = p->fp_b;
    r->distance = p->distance;
    r->similarity = p->similarity;
    return 0;
}

/* A pair: (a, b, distance, fp_a, fp_b, similarity). */
static PyObject *make_pair(const collector *c, const collected *r)
{
    PyObject *items[6] = {id_a(c, r),
                          id_b(c, r),
                          PyLong_FromUnsignedLong(r->distance),
                          PyLong_FromUnsignedLongLong(r->x),
                          PyLong_FromUnsignedLongLong(r->y),
                          sp_similarity_to_py(r->similarity)};
    return sp_tuple(items, 6);
}

const char sp_store_pairs_doc[] =
    "pairs(scan_options, by_fingerprint) -> list of tuples\n\n"
    "Every pair of stored documents within the scan's k and similarity: (a, b,\n"
    "distance, fp_a, fp_b, similarity).";

PyObject *sp_store_pairs(PyObject *op, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "pairs", nargs, kwnames, 2);
    simstore_scan_options o;
    int by_fp = 0;
    if (!st || sp_scan_options_from_py(args[0], &o) < 0 || (by_fp = PyObject_IsTrue(args[1])) < 0 ||
        sp_store_enter(self) < 0)
        return NULL;
    collector c;
    memset(&c, 0, sizeof c);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_pairs(self->s, &o, by_fp ? SIMSTORE_PAIRS_BY_FINGERPRINT : 0, pair_cb, &c);
    Py_END_ALLOW_THREADS;
    sp_store_leave(self);
    PyObject *list = err ? sp_raise_error(st, err, "pairs") : collected_list(&c, make_pair);
    collector_free(&c);
    return list;
}

static int member_cb(void *ctx, const simstore_cluster_member *m)
{
    collector *c = ctx;
    collected *r =
        collect_new(c, m->cluster, m->cluster_len, m->cluster_flags, m->id, m->id_len, m->flags);
    if (!r)
        return SIMSTORE_ENOMEM;
    r->x = m->fp;
    r->y = m->cluster_fp;
    r->kept = m->kept;
    r->distance = m->distance;
    r->similarity = m->similarity;
    return 0;
}

/* A cluster member: (cluster, id, kept, distance, fp, cluster_fp, similarity). */
static PyObject *make_member(const collector *c, const collected *r)
{
    PyObject *items[7] = {id_a(c, r),
                          id_b(c, r),
                          PyBool_FromLong(r->kept),
                          PyLong_FromUnsignedLong(r->distance),
                          PyLong_FromUnsignedLongLong(r->x),
                          PyLong_FromUnsignedLongLong(r->y),
                          sp_similarity_to_py(r->similarity)};
    return sp_tuple(items, 7);
}

/* The key rules: the caller's key(meta text or None) -> number or None,
 * called from the thread that runs simstore_clusters() (the library's
 * promise), which takes back the GIL it released (ts, its thread state)
 * for the call. After an exception no more calls are made; it is raised
 * once the clustering ends. */
typedef struct key_ctx {
    PyObject *fn;
    PyThreadState *ts;
    int failed;
} key_ctx;

static int key_cb(void *ctx, const char *meta, size_t meta_len, double *key)
{
    key_ctx *k = ctx;
    if (k->failed)
        return 0;
    int rc = 0;
    PyEval_RestoreThread(k->ts);
    PyObject *m = sp_meta_to_py(meta, meta_len);
    PyObject *r = m ? PyObject_CallOneArg(k->fn, m) : NULL;
    if (!r) {
        k->failed = 1;
    } else if (r != Py_None) {
        double d = PyFloat_AsDouble(r);
        if (d == -1.0 && PyErr_Occurred()) {
            k->failed = 1;
        } else {
            *key = d;
            rc = 1;
        }
    }
    Py_XDECREF(m);
    Py_XDECREF(r);
    k->ts = PyEval_SaveThread();
    return rc;
}

const char sp_store_clusters_doc[] =
    "clusters(cluster_options, key) -> list of tuples\n\n"
    "The store's near-duplicate clusters: cluster_options the scan's and mode,\n"
    "keep (their values), singletons; key a function of a document's metadata\n"
    "text (or None) for the key rules, else None. (cluster, id, kept, distance,\n"
    "fp, cluster_fp, similarity) per clustered document.";

PyObject *sp_store_clusters(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "clusters", nargs, kwnames, 2);
    simstore_cluster_options o;
    simstore_cluster_options_init(&o);
    unsigned mode = o.mode, keep = o.keep;
    if (!st || sp_scan_options_from_py(args[0], &o.scan) < 0 ||
        sp_opt_uint(args[0], "mode", &mode) < 0 || sp_opt_uint(args[0], "keep", &keep) < 0 ||
        sp_opt_bool(args[0], "singletons", &o.singletons) < 0)
        return NULL;
    o.mode = (simstore_cluster_mode)mode;
    o.keep = (simstore_keep_rule)keep;
    key_ctx kc = {args[1], NULL, 0};
    if (args[1] != Py_None) {
        o.key = key_cb;
        o.key_ctx = &kc;
    }
    if (sp_store_enter(self) < 0)
        return NULL;
    collector c;
    memset(&c, 0, sizeof c);
    simstore_cluster_summary summary;
    kc.ts = PyEval_SaveThread();
    int err = simstore_clusters(self->s, &o, member_cb, &c, &summary);
    PyEval_RestoreThread(kc.ts);
    sp_store_leave(self);
    PyObject *list = kc.failed ? NULL /* the key function's exception */
                     : err     ? sp_raise_error(st, err, "clusters")
                               : collected_list(&c, make_member);
    collector_free(&c);
    return list;
}
