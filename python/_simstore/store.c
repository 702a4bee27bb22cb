/* store.c: the type _simstore.Store, an open store (simstore *) that threads
 * share: opening and closing it, its pool of query contexts, queries of one
 * fingerprint or text, paragraph queries, add, delete, compact and stats.
 * Every call that works runs with the GIL released. The object holds no
 * Python reference (no GC needed); its methods reach the module state
 * through their defining class (METH_METHOD). The package's simstore.Store
 * wraps it: keyword defaults, checks and named results are there. */
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- Calls and query contexts ------------------------------------------------ */

int sp_store_enter(sp_store *self)
{
    int ok = 0;
    pthread_mutex_lock(&self->mu);
    if (self->s) {
        self->busy++;
        ok = 1;
    }
    pthread_mutex_unlock(&self->mu);
    if (!ok)
        PyErr_SetString(PyExc_ValueError, "operation on a closed store");
    return ok ? 0 : -1;
}

void sp_store_leave(sp_store *self)
{
    pthread_mutex_lock(&self->mu);
    self->busy--;
    pthread_mutex_unlock(&self->mu);
}

int sp_slot_take(sp_store *self, int meta, sp_qslot **out)
{
    pthread_mutex_lock(&self->mu);
    sp_qslot *sl = self->idle[meta];
    if (sl)
        self->idle[meta] = sl->next;
    pthread_mutex_unlock(&self->mu);
    if (!sl) {
        sl = calloc(1, sizeof *sl);
        if (!sl)
            return SIMSTORE_ENOMEM;
        int err = simstore_query_new(self->s, meta ? SIMSTORE_QUERY_WITH_META : 0, &sl->q);
        if (err) {
            free(sl);
            return err;
        }
    }
    *out = sl;
    return 0;
}

void sp_slot_give(sp_store *self, int meta, sp_qslot *sl)
{
    pthread_mutex_lock(&self->mu);
    sl->next = self->idle[meta];
    self->idle[meta] = sl;
    pthread_mutex_unlock(&self->mu);
}

static void slots_free(sp_store *self)
{
    for (int m = 0; m < 2; m++) {
        while (self->idle[m]) {
            sp_qslot *sl = self->idle[m];
            self->idle[m] = sl->next;
            simstore_query_free(sl->q);
            simstore_fingerprinter_free(sl->fpr);
            free(sl);
        }
    }
}

/* A query context (with metadata or not) whose fingerprinter is made.
 * Called without the GIL. */
static int slot_take_text(sp_store *self, int meta, sp_qslot **out)
{
    int err = sp_slot_take(self, meta, out);
    if (!err && !(*out)->fpr)
        err = sp_store_fingerprinter(self->s, &(*out)->fpr);
    return err;
}

int sp_store_fingerprinter(simstore *s, simstore_fingerprinter **out)
{
    simstore_text_options o;
    simstore_get_text_options(s, &o);
    int err = simstore_fingerprinter_new(&o, out);
    if (!err && simstore_get_boilerplate(s))
        err = simstore_fingerprinter_set_boilerplate(*out, simstore_get_boilerplate(s));
    if (err) {
        simstore_fingerprinter_free(*out);
        *out = NULL;
    }
    return err;
}

/* ---- Open and close -------------------------------------------------------------- */

static PyObject *store_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    sp_state *st = sp_class_state(type);
    PyObject *bytes = NULL;
    int write = 0, verify = 1, auto_compact = 1, huge_pages = 0;
    if (kwds && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Store() takes positional arguments only");
        return NULL;
    }
    if (!st || !PyArg_ParseTuple(args, "O&pppp:Store", PyUnicode_FSConverter, &bytes, &write,
                                 &verify, &auto_compact, &huge_pages))
        return NULL;
    unsigned flags = (write ? SIMSTORE_OPEN_WRITE : 0) |
                     (verify ? 0 : SIMSTORE_OPEN_SKIP_BLOCK_CHECKSUMS | SIMSTORE_OPEN_TRUST_LMDB) |
                     (auto_compact ? 0 : SIMSTORE_OPEN_NO_AUTO_COMPACT) |
                     (huge_pages ? SIMSTORE_OPEN_HUGE_PAGES : 0);
    simstore *s = NULL;
    simstore_stats stats;
    memset(&stats, 0, sizeof stats);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_open(PyBytes_AS_STRING(bytes), flags, &s);
    if (!err)
        err = simstore_get_stats(s, &stats);
    Py_END_ALLOW_THREADS;
    Py_DECREF(bytes);
    sp_store *self = err ? NULL : (sp_store *)type->tp_alloc(type, 0);
    if (!self) {
        if (err)
            sp_raise_error(st, err, "open");
        Py_BEGIN_ALLOW_THREADS;
        simstore_close(s);
        Py_END_ALLOW_THREADS;
        return NULL;
    }
    self->s = s;
    pthread_mutex_init(&self->mu, NULL);
    self->k = stats.k;
    self->fingerprint_only = stats.fingerprint_only;
    return (PyObject *)self;
}

static void store_dealloc(PyObject *op)
{
    sp_store *self = (sp_store *)op;
    PyTypeObject *tp = Py_TYPE(op);
    slots_free(self);
    if (self->s) {
        simstore *s = self->s;
        self->s = NULL;
        Py_BEGIN_ALLOW_THREADS;
        simstore_close(s);
        Py_END_ALLOW_THREADS;
    }
    pthread_mutex_destroy(&self->mu);
    tp->tp_free(op);
    Py_DECREF(tp);
}

PyDoc_STRVAR(close_doc, "close() -> None\n\n"
                        "Close the store; BusyError while a call on it is running.");

static PyObject *store_close(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    (void)args;
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "close", nargs, kwnames, 0);
    if (!st)
        return NULL;
    simstore *s = NULL;
    int busy = 0;
    pthread_mutex_lock(&self->mu);
    if (self->busy) {
        busy = 1;
    } else {
        s = self->s;
        self->s = NULL;
    }
    pthread_mutex_unlock(&self->mu);
    if (busy)
        return sp_raise_code(st, SIMSTORE_EBUSY,
                             PyUnicode_FromString("close: a call on the store is still running"));
    slots_free(self);
    Py_BEGIN_ALLOW_THREADS;
    simstore_close(s);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

/* ---- Queries ---------------------------------------------------------------------- */

/* A list of n objects, item i made by make(base, i) (a new reference, or
 * NULL with an exception set); NULL when one failed. */
typedef PyObject *(*make_item_fn)(const void *base, size_t i);

static PyObject *list_of(size_t n, make_item_fn make, const void *base)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *x = make(base, i);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, x);
    }
    return list;
}

/* A match: (id, fp, distance, similarity, meta, insertion). */
static PyObject *match_item(const void *base, size_t i)
{
    const simstore_match *m = (const simstore_match *)base + i;
    PyObject *items[6] = {
        sp_id_to_py(m->id, m->id_len, m->flags), PyLong_FromUnsignedLongLong(m->fp),
        PyLong_FromUnsignedLong(m->distance),    sp_similarity_to_py(m->similarity),
        sp_meta_to_py(m->meta, m->meta_len),     PyLong_FromUnsignedLongLong(m->insertion)};
    return sp_tuple(items, 6);
}

/* A paragraph match: (id, shared, of, fraction, fp, meta). */
static PyObject *paragraph_match_item(const void *base, size_t i)
{
    const simstore_paragraph_match *m = (const simstore_paragraph_match *)base + i;
    PyObject *items[6] = {sp_id_to_py(m->id, m->id_len, m->flags),
                          PyLong_FromSize_t(m->shared),
                          PyLong_FromSize_t(m->of),
                          PyFloat_FromDouble(m->fraction),
                          PyLong_FromUnsignedLongLong(m->fp),
                          sp_meta_to_py(m->meta, m->meta_len)};
    return sp_tuple(items, 6);
}

PyDoc_STRVAR(query_doc, "query(q, k, meta) -> list of tuples\n\n"
                        "Every document within k of q (a fingerprint or a text): (id, fp,\n"
                        "distance, similarity, meta, insertion), meta its JSON text (with\n"
                        "meta) or None.");

static PyObject *store_query(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "query", nargs, kwnames, 3);
    unsigned k = 0;
    int meta = 0;
    if (!st || sp_uint_arg(args[1], &k) < 0 || (meta = PyObject_IsTrue(args[2])) < 0)
        return NULL;
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    uint64_t fp = 0;
    int t = sp_text_from_py(args[0], &view, &text, &len);
    if (t < 0 || (t == 0 && sp_fp_from_py(args[0], &fp) < 0))
        return NULL;
    PyObject *result = NULL;
    if (sp_store_enter(self) == 0) {
        sp_qslot *sl = NULL;
        const simstore_match *m = NULL;
        size_t n = 0;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS;
        err = t ? slot_take_text(self, meta, &sl) : sp_slot_take(self, meta, &sl);
        if (!err && t)
            err = simstore_query_text(sl->q, sl->fpr, text, len, k, NULL, &m, &n);
        else if (!err)
            err = simstore_query_fp(sl->q, fp, k, &m, &n);
        Py_END_ALLOW_THREADS;
        result = err ? sp_raise_error(st, err, "query") : list_of(n, match_item, m);
        if (sl)
            sp_slot_give(self, meta, sl);
        sp_store_leave(self);
    }
    sp_text_release(&view);
    return result;
}

PyDoc_STRVAR(fingerprint_doc, "fingerprint(text) -> int\n\n"
                              "The fingerprint of a text as the store's documents are made.");

static PyObject *store_fingerprint(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                                   Py_ssize_t nargs, PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "fingerprint", nargs, kwnames, 1);
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    if (!st || sp_text_arg(args[0], &view, &text, &len, "fingerprint") < 0)
        return NULL;
    PyObject *result = NULL;
    if (sp_store_enter(self) == 0) {
        sp_qslot *sl = NULL;
        uint64_t fp = 0;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS;
        err = slot_take_text(self, 0, &sl);
        if (!err)
            err = simstore_fingerprint_text(sl->fpr, text, len, &fp, NULL);
        Py_END_ALLOW_THREADS;
        if (sl)
            sp_slot_give(self, 0, sl);
        sp_store_leave(self);
        result = err ? sp_raise_error(st, err, "fingerprint") : PyLong_FromUnsignedLongLong(fp);
    }
    sp_text_release(&view);
    return result;
}

/* The paragraphs' fingerprints of a text, as the store indexes them, into
 * *fps (malloc'ed) and *n. Called without the GIL. */
static int paragraph_fps(sp_store *self, sp_qslot *sl, const char *text, size_t len, uint64_t **fps,
                         size_t *n)
{
    simstore_text_options to;
    simstore_get_text_options(self->s, &to);
    size_t cap = 64;
    for (;;) {
        uint64_t *p = realloc(*fps, cap * sizeof *p);
        if (!p)
            return SIMSTORE_ENOMEM;
        *fps = p;
        int err = simstore_paragraph_fingerprints(sl->fpr, text, len, to.paragraph_min_words, *fps,
                                                  cap, n);
        if (err || *n <= cap)
            return err;
        cap = *n;
    }
}

PyDoc_STRVAR(query_paragraphs_doc,
             "query_paragraphs(text, k, min_fraction, meta) -> list of tuples\n\n"
             "The documents sharing near-duplicate paragraphs with a text: (id, shared,\n"
             "of, fraction, fp, meta), meta its JSON text (with meta) or None.");

static PyObject *store_query_paragraphs(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                                        Py_ssize_t nargs, PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "query_paragraphs", nargs, kwnames, 4);
    unsigned k = 0;
    int meta = 0;
    double min_fraction = 0;
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    if (!st || sp_uint_arg(args[1], &k) < 0 ||
        ((min_fraction = PyFloat_AsDouble(args[2])) == -1.0 && PyErr_Occurred()) ||
        (meta = PyObject_IsTrue(args[3])) < 0 ||
        sp_text_arg(args[0], &view, &text, &len, "query_paragraphs") < 0)
        return NULL;
    PyObject *result = NULL;
    if (sp_store_enter(self) == 0) {
        sp_qslot *sl = NULL;
        const simstore_paragraph_match *m = NULL;
        size_t n = 0, nfps = 0;
        uint64_t *fps = NULL;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS;
        err = slot_take_text(self, meta, &sl);
        if (!err)
            err = paragraph_fps(self, sl, text, len, &fps, &nfps);
        if (!err)
            err = simstore_query_paragraphs(sl->q, fps, nfps, k, min_fraction, &m, &n);
        Py_END_ALLOW_THREADS;
        free(fps);
        result =
            err ? sp_raise_error(st, err, "query_paragraphs") : list_of(n, paragraph_match_item, m);
        if (sl)
            sp_slot_give(self, meta, sl);
        sp_store_leave(self);
    }
    sp_text_release(&view);
    return result;
}

/* ---- Writes ------------------------------------------------------------------------ */

PyDoc_STRVAR(add_doc, "add(records, build_options) -> int\n\n"
                      "Add records (fingerprints in a fingerprint-only store) as a new\n"
                      "segment; the documents (fingerprints) now in the store.");

static PyObject *store_add(PyObject *op, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "add", nargs, kwnames, 2);
    simstore_build_options bo;
    if (!st || sp_build_options_from_py(args[1], &bo) < 0)
        return NULL;
    bo.source_name = sp_source_name;
    PyObject *it = PyObject_GetIter(args[0]);
    if (!it)
        return NULL;
    if (sp_store_enter(self) < 0) {
        Py_DECREF(it);
        return NULL;
    }
    sp_feeder f;
    memset(&f, 0, sizeof f);
    f.fingerprint_only = self->fingerprint_only;
    simstore_text_options to;
    simstore_get_text_options(self->s, &to);
    f.sketch = to.sketch;
    f.para_min_words = to.paragraph_min_words;
    PyObject *result = NULL;
    int err = 0;
    simstore_stats stats;
    Py_BEGIN_ALLOW_THREADS;
    if (!f.fingerprint_only)
        err = sp_store_fingerprinter(self->s, &f.fpr);
    if (!err)
        err = simstore_add_begin(self->s, &bo, &f.b);
    Py_END_ALLOW_THREADS;
    if (err) {
        sp_raise_error(st, err, "add");
    } else if (sp_feed_all(st, &f, NULL, it, "add") == 0) {
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_get_stats(self->s, &stats);
        Py_END_ALLOW_THREADS;
        result = err ? sp_raise_error(st, err, "add")
                     : PyLong_FromUnsignedLongLong(stats.fingerprint_only ? stats.fingerprints
                                                                          : stats.documents);
    }
    sp_store_leave(self);
    Py_DECREF(it);
    simstore_fingerprinter_free(f.fpr);
    free(f.paras);
    return result;
}

PyDoc_STRVAR(delete_doc, "delete(ids) -> int\n\n"
                         "Delete the documents with these ids (a sequence) in one commit; the\n"
                         "number deleted.");

static PyObject *store_delete(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames)
{
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "delete", nargs, kwnames, 1);
    if (!st)
        return NULL;
    PyObject *seq = PySequence_Fast(args[0], "delete() takes a sequence of ids");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *holds = PyList_New(n);
    const char **ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    size_t *lens = malloc((size_t)(n ? n : 1) * sizeof *lens);
    PyObject *result = NULL;
    int ok = holds && ids && lens;
    if (holds && !ok)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        unsigned flags = 0;
        PyObject *hold = NULL;
        ok = sp_id_from_py(PySequence_Fast_GET_ITEM(seq, i), &ids[i], &lens[i], &flags, &hold) == 0;
        if (ok)
            PyList_SET_ITEM(holds, i, hold);
    }
    if (ok && sp_store_enter(self) == 0) {
        uint64_t deleted = 0;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_delete(self->s, ids, lens, (size_t)n, &deleted, NULL, NULL);
        Py_END_ALLOW_THREADS;
        sp_store_leave(self);
        result = err ? sp_raise_error(st, err, "delete") : PyLong_FromUnsignedLongLong(deleted);
    }
    free(ids);
    free(lens);
    Py_XDECREF(holds);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(compact_doc, "compact() -> None\n\n"
                          "Rewrite every segment into one holding only live fingerprints.");

static PyObject *store_compact(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames)
{
    (void)args;
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "compact", nargs, kwnames, 0);
    if (!st || sp_store_enter(self) < 0)
        return NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_compact(self->s, NULL);
    Py_END_ALLOW_THREADS;
    sp_store_leave(self);
    if (err)
        return sp_raise_error(st, err, "compact");
    Py_RETURN_NONE;
}

/* ---- State ---------------------------------------------------------------------- */

PyDoc_STRVAR(replaced_doc, "replaced() -> bool\n\n"
                           "Whether the path now names another store than the one opened.");

static PyObject *store_replaced(PyObject *op, PyObject *unused)
{
    (void)unused;
    sp_store *self = (sp_store *)op;
    if (sp_store_enter(self) < 0)
        return NULL;
    int r = simstore_replaced(self->s);
    sp_store_leave(self);
    return PyBool_FromLong(r);
}

/* A number field of a struct: an unsigned, int, enum or uint64_t. */
typedef struct number_field {
    const char *name;
    size_t offset, size;
} number_field;

/* A number_field's initializer: {NUMBER(type, field)}. */
#define NUMBER(type, field) #field, offsetof(type, field), sizeof(((type *)0)->field)

static const number_field stats_fields[] = {
    {NUMBER(simstore_stats, k)},
    {NUMBER(simstore_stats, tables)},
    {NUMBER(simstore_stats, block_bytes)},
    {NUMBER(simstore_stats, fingerprint_only)},
    {NUMBER(simstore_stats, documents)},
    {NUMBER(simstore_stats, fingerprints)},
    {NUMBER(simstore_stats, segments)},
    {NUMBER(simstore_stats, generation)},
    {NUMBER(simstore_stats, table_fps)},
    {NUMBER(simstore_stats, table_bytes)},
    {NUMBER(simstore_stats, lmdb_bytes)},
    {NUMBER(simstore_stats, block_key_bytes)},
    {NUMBER(simstore_stats, sketch)},
    {NUMBER(simstore_stats, sketch_bytes)},
    {NUMBER(simstore_stats, lmdb_records_bytes)},
    {NUMBER(simstore_stats, lmdb_mapping_bytes)},
    {NUMBER(simstore_stats, lmdb_other_bytes)},
    {NUMBER(simstore_stats, lmdb_free_bytes)},
    {NUMBER(simstore_stats, paragraph_min_words)},
    {NUMBER(simstore_stats, paragraph_entries)},
    {NUMBER(simstore_stats, paragraph_fps)},
    {NUMBER(simstore_stats, paragraph_segments)},
    {NUMBER(simstore_stats, paragraph_table_fps)},
    {NUMBER(simstore_stats, paragraph_table_bytes)},
    {NUMBER(simstore_stats, document_file_bytes)},
    {NUMBER(simstore_stats, wal_bytes)},
    {NUMBER(simstore_stats, wal_pending_records)},
    {NUMBER(simstore_stats, wal_torn_bytes)},
    {NUMBER(simstore_stats, wal_damaged)},
};

static const number_field text_option_fields[] = {
    {NUMBER(simstore_text_options, shingle_words)}, {NUMBER(simstore_text_options, weighting)},
    {NUMBER(simstore_text_options, cjk)},           {NUMBER(simstore_text_options, version)},
    {NUMBER(simstore_text_options, cjk_shingle)},
};

/* d[field name] = its value in the struct at base, for each of n fields. */
static int put_numbers(PyObject *d, const void *base, const number_field *fields, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = (const char *)base + fields[i].offset;
        uint64_t v64 = 0;
        uint32_t v32 = 0;
        if (fields[i].size == sizeof v64)
            memcpy(&v64, p, sizeof v64);
        else
            memcpy(&v32, p, sizeof v32);
        PyObject *v = PyLong_FromUnsignedLongLong(fields[i].size == sizeof v64 ? v64 : v32);
        int rc = v ? PyDict_SetItemString(d, fields[i].name, v) : -1;
        Py_XDECREF(v);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The store's numbers under their simstore_stats names, and design, its
 * text options (text_options) under simstore_text_options' and its
 * boilerplate set's numbers (None without one): the package names and
 * groups them as stats --json does. */
static PyObject *stats_to_py(const simstore_stats *s, const simstore_text_options *t,
                             const simstore_boilerplate *bp)
{
    PyObject *d = PyDict_New(), *to = PyDict_New();
    PyObject *design = PyUnicode_FromString(s->design), *lambda = PyFloat_FromDouble(t->lambda);
    PyObject *bpd = Py_NewRef(Py_None);
    if (bp) {
        simstore_boilerplate_info info;
        simstore_boilerplate_get_info(bp, &info);
        Py_SETREF(bpd, Py_BuildValue("{s:K,s:d,s:K,s:K}", "lines", (unsigned long long)info.lines,
                                     "fraction", info.fraction, "documents",
                                     (unsigned long long)info.documents, "min_documents",
                                     (unsigned long long)info.min_documents));
    }
    int bad = !d || !to || !design || !lambda || !bpd ||
              put_numbers(d, s, stats_fields, sizeof stats_fields / sizeof stats_fields[0]) < 0 ||
              put_numbers(to, t, text_option_fields,
                          sizeof text_option_fields / sizeof text_option_fields[0]) < 0 ||
              PyDict_SetItemString(to, "lambda", lambda) < 0 ||
              PyDict_SetItemString(d, "design", design) < 0 ||
              PyDict_SetItemString(d, "text_options", to) < 0 ||
              PyDict_SetItemString(d, "boilerplate", bpd) < 0;
    Py_XDECREF(to);
    Py_XDECREF(design);
    Py_XDECREF(lambda);
    Py_XDECREF(bpd);
    if (bad)
        Py_CLEAR(d);
    return d;
}

PyDoc_STRVAR(stats_doc, "stats() -> dict\n\n"
                        "The store's simstore_stats, text options and boilerplate numbers.");

static PyObject *store_stats(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames)
{
    (void)args;
    sp_store *self = (sp_store *)op;
    sp_state *st = sp_method_state(cls, "stats", nargs, kwnames, 0);
    if (!st || sp_store_enter(self) < 0)
        return NULL;
    simstore_stats s;
    simstore_text_options to;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_get_stats(self->s, &s);
    simstore_get_text_options(self->s, &to);
    Py_END_ALLOW_THREADS;
    PyObject *d = err ? sp_raise_error(st, err, "stats")
                      : stats_to_py(&s, &to, simstore_get_boilerplate(self->s));
    sp_store_leave(self);
    return d;
}

/* ---- The type ------------------------------------------------------------------- */

static PyObject *store_get_k(PyObject *op, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLong(((sp_store *)op)->k);
}

static PyObject *store_get_fingerprint_only(PyObject *op, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((sp_store *)op)->fingerprint_only);
}

static PyObject *store_get_closed(PyObject *op, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((sp_store *)op)->s == NULL);
}

#define METHOD(name, f, doc)                                                                       \
    {                                                                                              \
        name, SP_METHOD(f), METH_METHOD | METH_FASTCALL | METH_KEYWORDS, doc                       \
    }

static PyMethodDef store_methods[] = {
    METHOD("query", store_query, query_doc),
    METHOD("query_batch", sp_store_query_batch, sp_store_query_batch_doc),
    METHOD("query_paragraphs", store_query_paragraphs, query_paragraphs_doc),
    METHOD("fingerprint", store_fingerprint, fingerprint_doc),
    METHOD("get", sp_store_get, sp_store_get_doc),
    METHOD("documents", sp_store_documents, sp_store_documents_doc),
    METHOD("pairs", sp_store_pairs, sp_store_pairs_doc),
    METHOD("clusters", sp_store_clusters, sp_store_clusters_doc),
    METHOD("add", store_add, add_doc),
    METHOD("delete", store_delete, delete_doc),
    METHOD("compact", store_compact, compact_doc),
    METHOD("stats", store_stats, stats_doc),
    METHOD("close", store_close, close_doc),
    {"replaced", store_replaced, METH_NOARGS, replaced_doc},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef store_getset[] = {
    {"k", store_get_k, NULL, "the store's design k", NULL},
    {"fingerprint_only", store_get_fingerprint_only, NULL, "whether it holds fingerprints alone",
     NULL},
    {"closed", store_get_closed, NULL, "True once the store is closed", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyDoc_STRVAR(store_doc,
             "Store(path, write, verify, auto_compact, huge_pages)\n\n"
             "An open store, shared by threads (calls release the GIL). The core of\n"
             "simstore.Store, which applies a stopped server's log before a writer opens.");

static PyType_Slot store_slots[] = {
    {Py_tp_new, SP_SLOT(store_new)}, {Py_tp_dealloc, SP_SLOT(store_dealloc)},
    {Py_tp_methods, store_methods},  {Py_tp_getset, store_getset},
    {Py_tp_doc, (void *)store_doc},  {0, NULL}};

PyType_Spec sp_store_spec = {
    .name = "simstore._simstore.Store",
    .basicsize = sizeof(sp_store),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = store_slots,
};
