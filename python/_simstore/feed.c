/* feed.c: documents into a store: the feeder that fingerprints each record
 * the package made of a document (python/simstore/_args.py, records()) and
 * hands it to a builder or to a live store's insert-if-new, shared by
 * build() here, Store.add (store.c) and insert_if_new (live.c); and build()
 * with its boilerplate pass. The library's calls that take a document are
 * add_fp() and add_doc() alone. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The library's calls taking a document ---------------------------------- */

/* One bare fingerprint into a fingerprint-only store's builder. */
static int add_fp(simstore_builder *b, uint64_t fp)
{
    return simstore_builder_add_fp(b, fp);
}

/* One document, fingerprinted (with its sketch and paragraphs' fingerprints,
 * NULL and 0 for none), into the builder or the live store's insert-if-new.
 * Called without the GIL. */
static int add_doc(sp_feeder *f, const simstore_doc *doc, unsigned flags, const uint8_t *sketch,
                   size_t nparas, int *inserted)
{
    simstore_doc d = *doc;
    d.flags = flags;
    d.sketch = sketch;
    if (!f->lq) {
        d.paragraphs = f->paras;
        d.n_paragraphs = nparas;
        return simstore_builder_add(f->b, &d);
    }
    const simstore_match *m;
    size_t n;
    return simstore_live_insert_if_new(f->lq, &d, f->rule, inserted, &m, &n);
}

/* ---- Feeding ----------------------------------------------------------------- */

/* Fingerprint a document's text (and sketch it, and its paragraphs, as the
 * store keeps them). Called without the GIL. */
static int fingerprint_doc(sp_feeder *f, const char *text, size_t len, simstore_doc *doc,
                           const uint8_t **sketch, size_t *nparas)
{
    int err = 0;
    if (f->sketch != SIMSTORE_SKETCH_NONE) {
        err = simstore_fingerprint_sketch(f->fpr, text, len, &doc->fp, f->sketch_buf, NULL);
        *sketch = f->sketch_buf;
    } else {
        err = simstore_fingerprint_text(f->fpr, text, len, &doc->fp, NULL);
    }
    while (!err && f->para_min_words) {
        err = simstore_paragraph_fingerprints(f->fpr, text, len, f->para_min_words, f->paras,
                                              f->paras_cap, nparas);
        if (err || *nparas <= f->paras_cap)
            break;
        uint64_t *p = realloc(f->paras, *nparas * sizeof *p);
        if (!p)
            return SIMSTORE_ENOMEM;
        f->paras = p;
        f->paras_cap = *nparas;
    }
    return err;
}

static int feed_fp(sp_state *st, sp_feeder *f, PyObject *item)
{
    uint64_t fp = 0;
    if (sp_fp_from_py(item, &fp) < 0)
        return -1;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = add_fp(f->b, fp);
    Py_END_ALLOW_THREADS;
    return err ? (sp_raise_error(st, err, "build"), -1) : 0;
}

int sp_feed_one(sp_state *st, sp_feeder *f, PyObject *item)
{
    uint64_t index = f->count++;
    if (f->fingerprint_only)
        return feed_fp(st, f, item);
    simstore_doc doc;
    memset(&doc, 0, sizeof doc);
    doc.source = index;
    PyObject *textobj = NULL, *fpobj = NULL;
    Py_ssize_t id_len = 0, meta_len = 0;
    int integer = 0;
    if (!PyArg_ParseTuple(item, "y#pOOz#:record", &doc.id, &id_len, &integer, &textobj, &fpobj,
                          &doc.meta, &meta_len))
        return -1;
    doc.id_len = (size_t)id_len;
    doc.meta_len = (size_t)meta_len;
    Py_buffer view;
    view.obj = NULL;
    const char *text = NULL;
    size_t len = 0;
    if (textobj != Py_None) {
        int t = sp_text_from_py(textobj, &view, &text, &len);
        if (t <= 0) {
            if (t == 0)
                PyErr_Format(PyExc_TypeError, "docs[%llu]: text is a str or bytes",
                             (unsigned long long)index);
            return -1;
        }
    } else if (sp_fp_from_py(fpobj, &doc.fp) < 0) {
        return -1;
    }
    int err = 0, inserted = 0;
    Py_BEGIN_ALLOW_THREADS;
    const uint8_t *sketch = NULL;
    size_t nparas = 0;
    if (textobj != Py_None)
        err = fingerprint_doc(f, text, len, &doc, &sketch, &nparas);
    if (!err)
        err = add_doc(f, &doc, integer ? SIMSTORE_DOC_INTEGER_ID : 0, sketch, nparas, &inserted);
    Py_END_ALLOW_THREADS;
    sp_text_release(&view);
    if (err) {
        char what[64];
        snprintf(what, sizeof what, "docs[%llu]", (unsigned long long)index);
        sp_raise_error(st, err, what);
        return -1;
    }
    if (f->lq && PyList_Append(f->inserted, inserted ? Py_True : Py_False) < 0)
        return -1;
    return 0;
}

int sp_feed_all(sp_state *st, sp_feeder *f, PyObject *first, PyObject *it, const char *what)
{
    int rc = 0;
    if (first) {
        rc = sp_feed_one(st, f, first);
        Py_DECREF(first);
    }
    PyObject *item = NULL;
    while (rc == 0 && (item = PyIter_Next(it)) != NULL) {
        rc = sp_feed_one(st, f, item);
        Py_DECREF(item);
    }
    if (rc == 0 && PyErr_Occurred())
        rc = -1;
    simstore_builder *b = f->b;
    f->b = NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    if (rc)
        simstore_builder_abort(b);
    else
        err = simstore_builder_finish(b);
    Py_END_ALLOW_THREADS;
    if (err) {
        sp_raise_error(st, err, what);
        rc = -1;
    }
    return rc;
}

/* ---- build() ------------------------------------------------------------------ */

void sp_source_name(void *ctx, uint64_t source, char *buf, size_t size)
{
    (void)ctx;
    snprintf(buf, size, "docs[%llu]", (unsigned long long)source);
}

/* The first pass of a build with boilerplate: count the lines of every
 * record's text (records, a list), make the set, record it in f->b and give
 * it to f->fpr. *out receives the set (freed after the fingerprinter). */
static int boilerplate_pass(sp_state *st, const simstore_text_options *to, PyObject *bpd,
                            PyObject *records, sp_feeder *f, simstore_boilerplate **out)
{
    simstore_boilerplate_options o;
    simstore_boilerplate_options_init(&o);
    if (sp_opt_double(bpd, "fraction", &o.fraction) < 0 ||
        sp_opt_u64(bpd, "min_documents", &o.min_documents) < 0)
        return -1;
    if (!PyList_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "build(): boilerplate reads the records from a list");
        return -1;
    }
    simstore_boilerplate_counter *c = NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_boilerplate_counter_new(to, &o, &c);
    Py_END_ALLOW_THREADS;
    for (Py_ssize_t i = 0; !err && i < PyList_GET_SIZE(records); i++) {
        PyObject *rec = PyList_GET_ITEM(records, i);
        PyObject *t =
            PyTuple_Check(rec) && PyTuple_GET_SIZE(rec) > 2 ? PyTuple_GET_ITEM(rec, 2) : Py_None;
        Py_buffer view;
        const char *text = NULL;
        size_t len = 0;
        if (t == Py_None)
            continue;
        if (sp_text_from_py(t, &view, &text, &len) < 0) {
            simstore_boilerplate_counter_free(c);
            return -1;
        }
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_boilerplate_counter_add(c, text, len);
        Py_END_ALLOW_THREADS;
        sp_text_release(&view);
    }
    Py_BEGIN_ALLOW_THREADS;
    if (!err)
        err = simstore_boilerplate_counter_finish(c, out);
    simstore_boilerplate_counter_free(c);
    if (!err)
        err = simstore_builder_set_boilerplate(f->b, *out);
    if (!err)
        err = simstore_fingerprinter_set_boilerplate(f->fpr, *out);
    Py_END_ALLOW_THREADS;
    if (err) {
        sp_raise_error(st, err, "build: boilerplate");
        return -1;
    }
    return 0;
}

/* Whether a record has a text (the first decides a sketch 'auto'). */
static int record_has_text(PyObject *rec)
{
    return PyTuple_Check(rec) && PyTuple_GET_SIZE(rec) > 2 && PyTuple_GET_ITEM(rec, 2) != Py_None;
}

PyDoc_STRVAR(build_doc,
             "build(path, docs, text_options, build_options, sketch_auto, boilerplate) -> None\n\n"
             "Build a new store at path from docs: records, or fingerprints when\n"
             "build_options has fingerprint_only (a uint64 buffer, or an iterable). With\n"
             "sketch_auto, the store keeps the default sketch when the first record has a\n"
             "text. boilerplate: None, or a dict (fraction, min_documents) for a first pass\n"
             "over docs, then a list. Nothing is left at path on failure.");

static PyObject *build(PyObject *module, PyObject *args)
{
    sp_state *st = sp_module_state(module);
    PyObject *bytes = NULL, *docs = NULL, *tod = NULL, *bod = NULL, *bpd = NULL;
    int sketch_auto = 0;
    simstore_build_options bo;
    simstore_text_options to;
    if (!PyArg_ParseTuple(args, "O&OOOpO:build", PyUnicode_FSConverter, &bytes, &docs, &tod, &bod,
                          &sketch_auto, &bpd))
        return NULL;
    sp_feeder f;
    memset(&f, 0, sizeof f);
    PyObject *it = NULL, *first = NULL, *result = NULL;
    uint64_t *fps = NULL;
    size_t nfps = 0;
    simstore_boilerplate *bpset = NULL;
    if (sp_build_options_from_py(bod, &bo) < 0 || sp_text_options_from_py(tod, &to) < 0)
        goto done;
    bo.source_name = sp_source_name;
    f.fingerprint_only = bo.fingerprint_only;
    /* A fingerprint-only store takes a buffer of fingerprints whole: they
     * are added below with the GIL released. */
    if (bo.fingerprint_only && PyObject_CheckBuffer(docs)) {
        if (sp_fps_from_py(docs, &fps, &nfps) < 0)
            goto done;
    } else if (!(it = PyObject_GetIter(docs))) {
        goto done;
    }
    if (bo.fingerprint_only) {
        to.sketch = SIMSTORE_SKETCH_NONE;
    } else {
        first = PyIter_Next(it);
        if (!first && PyErr_Occurred())
            goto done;
        if (sketch_auto)
            to.sketch =
                first && record_has_text(first) ? SIMSTORE_SKETCH_DEFAULT : SIMSTORE_SKETCH_NONE;
    }
    bo.text = &to;
    const char *p = PyBytes_AS_STRING(bytes);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    if (!bo.fingerprint_only)
        err = simstore_fingerprinter_new(&to, &f.fpr);
    if (!err)
        err = simstore_build_begin(p, &bo, &f.b);
    Py_END_ALLOW_THREADS;
    if (err) {
        sp_raise_error(st, err, "build");
        goto done;
    }
    f.sketch = to.sketch;
    f.para_min_words = to.paragraph_min_words;
    if (bpd != Py_None && boilerplate_pass(st, &to, bpd, docs, &f, &bpset) < 0) {
        Py_BEGIN_ALLOW_THREADS;
        simstore_builder_abort(f.b);
        Py_END_ALLOW_THREADS;
        goto done;
    }
    if (fps) {
        Py_BEGIN_ALLOW_THREADS;
        for (size_t i = 0; i < nfps && !err; i++)
            err = add_fp(f.b, fps[i]);
        if (err)
            simstore_builder_abort(f.b);
        else
            err = simstore_builder_finish(f.b);
        Py_END_ALLOW_THREADS;
        if (err) {
            sp_raise_error(st, err, "build");
            goto done;
        }
    } else {
        PyObject *fst = first;
        first = NULL;
        if (sp_feed_all(st, &f, fst, it, "build") < 0)
            goto done;
    }
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(first);
    Py_XDECREF(it);
    Py_DECREF(bytes);
    simstore_fingerprinter_free(f.fpr);
    simstore_boilerplate_free(bpset); /* after the fingerprinter that borrows it */
    free(f.paras);
    free(fps);
    return result;
}

PyMethodDef sp_feed_functions[] = {{"build", build, METH_VARARGS, build_doc},
                                   {NULL, NULL, 0, NULL}};
