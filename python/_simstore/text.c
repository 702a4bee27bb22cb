/* text.c: the module's functions over texts, without a store: fingerprint,
 * sketch and paragraphs (each through a fingerprinter made for the call),
 * fingerprints (many, on threads), similarity, distance and id_problem. The
 * package checks their options (python/simstore/_args.py) and shapes what
 * they give back. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* What fingerprint(), sketch() and paragraphs() ask of their text. */
enum text_job { JOB_FINGERPRINT, JOB_SKETCH, JOB_PARAGRAPHS };

typedef struct para_list {
    simstore_paragraph *p;
    size_t n, cap;
} para_list;

typedef struct text_result {
    uint64_t fp;
    uint8_t sketch[SIMSTORE_SKETCH_MAX_BYTES];
    size_t sketch_bytes;
    para_list paras; /* malloc'ed */
} text_result;

static int para_cb(void *ctx, const simstore_paragraph *para)
{
    para_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        simstore_paragraph *p = realloc(l->p, cap * sizeof *p);
        if (!p)
            return SIMSTORE_ENOMEM;
        l->p = p;
        l->cap = cap;
    }
    l->p[l->n++] = *para;
    return 0;
}

/* The call fname(text, options): the job done on the text by a
 * fingerprinter of those options made for it, with the GIL released.
 * Returns 0, or -1 with an exception. */
static int text_job(PyObject *module, PyObject *args, const char *fname, enum text_job job,
                    text_result *r)
{
    PyObject *textobj = NULL, *options = NULL;
    simstore_text_options o;
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    memset(r, 0, sizeof *r);
    if (!PyArg_ParseTuple(args, "OO", &textobj, &options) ||
        sp_text_options_from_py(options, &o) < 0 ||
        sp_text_arg(textobj, &view, &text, &len, fname) < 0)
        return -1;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    simstore_fingerprinter *fpr = NULL;
    err = simstore_fingerprinter_new(&o, &fpr);
    if (!err && job == JOB_FINGERPRINT)
        err = simstore_fingerprint_text(fpr, text, len, &r->fp, NULL);
    else if (!err && job == JOB_SKETCH)
        err = simstore_fingerprint_sketch(fpr, text, len, &r->fp, r->sketch, NULL);
    else if (!err)
        err = simstore_fingerprint_paragraphs(fpr, text, len, para_cb, &r->paras, NULL, NULL);
    simstore_fingerprinter_free(fpr);
    Py_END_ALLOW_THREADS;
    sp_text_release(&view);
    r->sketch_bytes = simstore_sketch_bytes(o.sketch);
    if (err) {
        free(r->paras.p);
        sp_raise_error(sp_module_state(module), err, fname);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(fingerprint_doc, "fingerprint(text, options) -> int\n\n"
                              "The fingerprint of a text (str or bytes) with these text options.");

static PyObject *fingerprint(PyObject *module, PyObject *args)
{
    text_result r;
    if (text_job(module, args, "fingerprint", JOB_FINGERPRINT, &r) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(r.fp);
}

PyDoc_STRVAR(sketch_doc, "sketch(text, options) -> (fp, bytes)\n\n"
                         "The fingerprint and the sketch (of options' kind) of a text.");

static PyObject *sketch(PyObject *module, PyObject *args)
{
    text_result r;
    if (text_job(module, args, "sketch", JOB_SKETCH, &r) < 0)
        return NULL;
    return Py_BuildValue("(Ky#)", (unsigned long long)r.fp, (const char *)r.sketch,
                         (Py_ssize_t)r.sketch_bytes);
}

PyDoc_STRVAR(paragraphs_doc, "paragraphs(text, options) -> list of tuples\n\n"
                             "The paragraphs of a text: (number, offset, length, fp, words).");

static PyObject *paragraphs(PyObject *module, PyObject *args)
{
    text_result r;
    if (text_job(module, args, "paragraphs", JOB_PARAGRAPHS, &r) < 0)
        return NULL;
    PyObject *list = PyList_New((Py_ssize_t)r.paras.n);
    for (size_t i = 0; list && i < r.paras.n; i++) {
        const simstore_paragraph *p = &r.paras.p[i];
        PyObject *items[5] = {PyLong_FromUnsignedLong(p->number), PyLong_FromSize_t(p->offset),
                              PyLong_FromSize_t(p->length),
                              PyLong_FromUnsignedLongLong(p->fingerprint),
                              PyLong_FromUnsignedLongLong(p->words)};
        PyObject *t = sp_tuple(items, 5);
        if (!t)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    free(r.paras.p);
    return list;
}

PyDoc_STRVAR(fingerprints_doc,
             "fingerprints(texts, threads, options) -> bytearray\n\n"
             "The fingerprints of a sequence of texts, made on `threads` threads, as\n"
             "native uint64 values.");

static PyObject *fingerprints(PyObject *module, PyObject *args)
{
    PyObject *texts = NULL, *options = NULL;
    unsigned threads = 0;
    simstore_text_options o;
    if (!PyArg_ParseTuple(args, "OIO:fingerprints", &texts, &threads, &options) ||
        sp_text_options_from_py(options, &o) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(texts, "fingerprints() takes a sequence of texts");
    if (!seq)
        return NULL;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    const char **ptrs = malloc((n ? n : 1) * sizeof *ptrs);
    size_t *lens = malloc((n ? n : 1) * sizeof *lens);
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(uint64_t)));
    Py_ssize_t bad = -2;
    int err = 0, ok = 0;
    if (!ptrs || !lens)
        PyErr_NoMemory();
    else if (out)
        bad = sp_texts_utf8(seq, ptrs, lens);
    if (bad >= 0) {
        PyErr_Format(PyExc_TypeError, "texts[%zd] is a %.100s, not a str or bytes", bad,
                     Py_TYPE(PySequence_Fast_GET_ITEM(seq, bad))->tp_name);
    } else if (bad == -1) {
        /* out is ours alone until it is returned: filled without the GIL. */
        uint64_t *fps = (uint64_t *)PyByteArray_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_fingerprint_many(&o, threads, ptrs, lens, n, fps, NULL);
        Py_END_ALLOW_THREADS;
        ok = !err;
        if (err)
            sp_raise_error(sp_module_state(module), err, "fingerprints");
    }
    free(ptrs);
    free(lens);
    Py_DECREF(seq);
    if (!ok)
        Py_CLEAR(out);
    return out;
}

PyDoc_STRVAR(similarity_doc,
             "similarity(a, b) -> float\n\n"
             "The estimated Jaccard similarity (0..1) of the shingle sets two sketches of\n"
             "one kind (bytes of the same length, from sketch()) were made from.");

static PyObject *similarity(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*:similarity", &a, &b))
        return NULL;
    simstore_sketch_kind kind = SIMSTORE_SKETCH_NONE;
    for (int k = SIMSTORE_SKETCH_MINHASH16; k <= SIMSTORE_SKETCH_MINHASH256; k++)
        if ((Py_ssize_t)simstore_sketch_bytes((simstore_sketch_kind)k) == a.len)
            kind = (simstore_sketch_kind)k;
    PyObject *r = NULL;
    if (kind == SIMSTORE_SKETCH_NONE || a.len != b.len)
        PyErr_Format(PyExc_ValueError,
                     "similarity() takes two sketches of one kind (16, 32, 64, 128 or 256 "
                     "bytes each), not %zd and %zd bytes",
                     a.len, b.len);
    else
        r = PyFloat_FromDouble(simstore_sketch_similarity(kind, a.buf, b.buf));
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return r;
}

PyDoc_STRVAR(distance_doc, "distance(a, b) -> int\n\n"
                           "The Hamming distance of two fingerprints (ints, or 16 hex digits).");

static PyObject *distance(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *a = NULL, *b = NULL;
    uint64_t x = 0, y = 0;
    if (!PyArg_ParseTuple(args, "OO:distance", &a, &b) || sp_fp_from_py(a, &x) < 0 ||
        sp_fp_from_py(b, &y) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(simstore_distance(x, y));
}

PyDoc_STRVAR(id_problem_doc,
             "id_problem(id) -> str or None\n\n"
             "Why the library's one id rule refuses a new document id (bytes), or None.");

static PyObject *id_problem(PyObject *module, PyObject *args)
{
    (void)module;
    const char *id = NULL;
    Py_ssize_t len = 0;
    if (!PyArg_ParseTuple(args, "y#:id_problem", &id, &len))
        return NULL;
    const char *why = simstore_id_problem(id, (size_t)len);
    if (!why)
        Py_RETURN_NONE;
    return PyUnicode_FromString(why);
}

PyMethodDef sp_text_functions[] = {{"fingerprint", fingerprint, METH_VARARGS, fingerprint_doc},
                                   {"sketch", sketch, METH_VARARGS, sketch_doc},
                                   {"paragraphs", paragraphs, METH_VARARGS, paragraphs_doc},
                                   {"fingerprints", fingerprints, METH_VARARGS, fingerprints_doc},
                                   {"similarity", similarity, METH_VARARGS, similarity_doc},
                                   {"distance", distance, METH_VARARGS, distance_doc},
                                   {"id_problem", id_problem, METH_VARARGS, id_problem_doc},
                                   {NULL, NULL, 0, NULL}};
