/* convert.c: values between Python and libsimstore: document ids,
 * fingerprints, texts, metadata and similarities, the options dicts the
 * package passes (into the library's options structs), and arguments. */
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- Ids, fingerprints, texts ---------------------------------------------- */

PyObject *sp_id_to_py(const char *id, size_t len, unsigned flags)
{
    if (!id)
        Py_RETURN_NONE;
    if (flags & SIMSTORE_MATCH_INTEGER_ID) {
        char buf[64];
        if (len < sizeof buf) {
            memcpy(buf, id, len);
            buf[len] = '\0';
            PyObject *v = PyLong_FromString(buf, NULL, 10);
            if (v)
                return v;
            PyErr_Clear();
        }
    }
    return PyUnicode_DecodeUTF8(id, (Py_ssize_t)len, "surrogateescape");
}

int sp_id_from_py(PyObject *obj, const char **id, size_t *len, unsigned *flags, PyObject **hold)
{
    *flags = 0;
    if (PyUnicode_Check(obj)) {
        *hold = PyUnicode_AsEncodedString(obj, "utf-8", "surrogateescape");
    } else if (PyBytes_Check(obj)) {
        *hold = Py_NewRef(obj);
    } else if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        PyObject *s = PyObject_Str(obj);
        *hold = s ? PyUnicode_AsUTF8String(s) : NULL;
        Py_XDECREF(s);
        *flags = SIMSTORE_DOC_INTEGER_ID;
    } else {
        PyErr_Format(PyExc_TypeError, "a document id is a str, bytes or int, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (!*hold)
        return -1;
    *id = PyBytes_AS_STRING(*hold);
    *len = (size_t)PyBytes_GET_SIZE(*hold);
    return 0;
}

int sp_fp_from_py(PyObject *obj, uint64_t *fp)
{
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n = 0;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
        if (!s)
            return -1;
        char *end = NULL;
        unsigned long long v = n == 16 ? strtoull(s, &end, 16) : 0;
        if (n != 16 || !end || *end != '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ') {
            PyErr_Format(PyExc_ValueError, "a fingerprint string has 16 hex digits, not %R", obj);
            return -1;
        }
        *fp = v;
        return 0;
    }
    PyObject *ix = PyNumber_Index(obj);
    if (!ix)
        return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(ix);
    Py_DECREF(ix);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_SetString(PyExc_OverflowError, "a fingerprint is an integer in 0..2**64-1");
        return -1;
    }
    *fp = v;
    return 0;
}

/* Fingerprints from a buffer of 64-bit integers: checked and copied. */
static int fps_from_buffer(PyObject *obj, uint64_t **out, size_t *n)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = view.format ? view.format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    int rc = -1;
    if (view.itemsize != 8 || strlen(f) != 1 || !strchr("QqLl", *f)) {
        PyErr_Format(PyExc_TypeError,
                     "fingerprints come as a buffer of 64-bit integers (numpy uint64), not "
                     "format '%s' of %zd-byte items",
                     view.format ? view.format : "B", view.itemsize);
    } else if (!(*out = malloc(view.len ? (size_t)view.len : 1))) {
        PyErr_NoMemory();
    } else {
        memcpy(*out, view.buf, (size_t)view.len);
        *n = (size_t)(view.len / 8);
        rc = 0;
    }
    PyBuffer_Release(&view);
    return rc;
}

int sp_fps_from_py(PyObject *obj, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (PyObject_CheckBuffer(obj) && !PyUnicode_Check(obj))
        return fps_from_buffer(obj, out, n);
    PyObject *seq =
        PySequence_Fast(obj, "fingerprints come as a uint64 buffer or an iterable of ints");
    if (!seq)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    *out = malloc(count ? (size_t)count * 8 : 1);
    int rc = *out ? 0 : -1;
    if (rc)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; rc == 0 && i < count; i++)
        rc = sp_fp_from_py(PySequence_Fast_GET_ITEM(seq, i), &(*out)[i]);
    Py_DECREF(seq);
    if (rc) {
        free(*out);
        *out = NULL;
        return -1;
    }
    *n = (size_t)count;
    return 0;
}

int sp_text_from_py(PyObject *obj, Py_buffer *view, const char **text, size_t *len)
{
    view->obj = NULL;
    if (PyUnicode_Check(obj)) {
        Py_ssize_t n = 0;
        const char *s = PyUnicode_AsUTF8AndSize(obj, &n);
        if (!s)
            return -1;
        *text = s;
        *len = (size_t)n;
        return 1;
    }
    if (PyBytes_Check(obj) || PyByteArray_Check(obj) || PyMemoryView_Check(obj)) {
        if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
            return -1;
        *text = view->buf;
        *len = (size_t)view->len;
        return 1;
    }
    return 0;
}

int sp_text_arg(PyObject *obj, Py_buffer *view, const char **text, size_t *len, const char *fname)
{
    int t = sp_text_from_py(obj, view, text, len);
    if (t == 0)
        PyErr_Format(PyExc_TypeError, "%s() takes a str or bytes, not %.100s", fname,
                     Py_TYPE(obj)->tp_name);
    return t > 0 ? 0 : -1;
}

void sp_text_release(Py_buffer *view)
{
    if (view->obj)
        PyBuffer_Release(view);
}

/* str objects cache their UTF-8 form and bytes are immutable: seq keeps
 * them alive, so the pointers stay valid while the GIL is released. */
Py_ssize_t sp_texts_utf8(PyObject *seq, const char **ptrs, size_t *lens)
{
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (PyUnicode_Check(t)) {
            Py_ssize_t len = 0;
            if (!(ptrs[i] = PyUnicode_AsUTF8AndSize(t, &len)))
                return -2;
            lens[i] = (size_t)len;
        } else if (PyBytes_Check(t)) {
            ptrs[i] = PyBytes_AS_STRING(t);
            lens[i] = (size_t)PyBytes_GET_SIZE(t);
        } else {
            return i;
        }
    }
    return -1;
}

PyObject *sp_meta_to_py(const char *meta, size_t len)
{
    if (!meta)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(meta, (Py_ssize_t)len, "replace");
}

PyObject *sp_similarity_to_py(double sim)
{
    if (sim < 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(sim);
}

PyObject *sp_tuple(PyObject **items, int n)
{
    PyObject *t = PyTuple_New(n);
    int ok = t != NULL;
    for (int i = 0; i < n; i++)
        ok = ok && items[i];
    if (!ok) {
        for (int i = 0; i < n; i++)
            Py_XDECREF(items[i]);
        Py_XDECREF(t);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, items[i]);
    return t;
}

/* ---- Arguments and options --------------------------------------------------- */

int sp_uint_arg(PyObject *obj, unsigned *out)
{
    unsigned long v = PyLong_AsUnsignedLong(obj);
    if (v == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    if (v > UINT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "an unsigned int argument is too large");
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

/* d[name], borrowed, or NULL (with an exception when d is not a dict). */
static PyObject *opt_get(PyObject *d, const char *name)
{
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "options come as a dict");
        return NULL;
    }
    return PyDict_GetItemString(d, name);
}

int sp_opt_u64(PyObject *d, const char *name, uint64_t *out)
{
    PyObject *v = opt_get(d, name);
    if (!v)
        return PyErr_Occurred() ? -1 : 0;
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

int sp_opt_uint(PyObject *d, const char *name, unsigned *out)
{
    PyObject *v = opt_get(d, name);
    if (!v)
        return PyErr_Occurred() ? -1 : 0;
    return sp_uint_arg(v, out);
}

int sp_opt_double(PyObject *d, const char *name, double *out)
{
    PyObject *v = opt_get(d, name);
    if (!v)
        return PyErr_Occurred() ? -1 : 0;
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

int sp_opt_bool(PyObject *d, const char *name, int *out)
{
    PyObject *v = opt_get(d, name);
    if (!v)
        return PyErr_Occurred() ? -1 : 0;
    int t = PyObject_IsTrue(v);
    if (t < 0)
        return -1;
    *out = t;
    return 0;
}

int sp_text_options_from_py(PyObject *d, simstore_text_options *o)
{
    simstore_text_options_init(o);
    unsigned weighting = o->weighting, cjk = o->cjk, sketch = o->sketch;
    if (sp_opt_uint(d, "version", &o->version) < 0 ||
        sp_opt_uint(d, "shingle_words", &o->shingle_words) < 0 ||
        sp_opt_uint(d, "cjk_shingle", &o->cjk_shingle) < 0 ||
        sp_opt_uint(d, "weighting", &weighting) < 0 || sp_opt_double(d, "lambda", &o->lambda) < 0 ||
        sp_opt_uint(d, "cjk", &cjk) < 0 || sp_opt_uint(d, "sketch", &sketch) < 0 ||
        sp_opt_uint(d, "paragraph_min_words", &o->paragraph_min_words) < 0)
        return -1;
    o->weighting = (simstore_weighting)weighting;
    o->cjk = (simstore_cjk_mode)cjk;
    o->sketch = (simstore_sketch_kind)sketch;
    return 0;
}

int sp_build_options_from_py(PyObject *d, simstore_build_options *o)
{
    simstore_build_options_init(o);
    if (sp_opt_uint(d, "k", &o->k) < 0 || sp_opt_uint(d, "tables", &o->tables) < 0 ||
        sp_opt_uint(d, "block_bytes", &o->block_bytes) < 0 ||
        sp_opt_u64(d, "expected_fps", &o->expected_fps) < 0 ||
        sp_opt_u64(d, "memory_bytes", &o->memory_bytes) < 0 ||
        sp_opt_uint(d, "threads", &o->threads) < 0 || sp_opt_bool(d, "replace", &o->replace) < 0 ||
        sp_opt_bool(d, "fingerprint_only", &o->fingerprint_only) < 0 ||
        sp_opt_bool(d, "skip_existing", &o->skip_existing) < 0)
        return -1;
    return 0;
}

int sp_scan_options_from_py(PyObject *d, simstore_scan_options *o)
{
    simstore_scan_options_init(o);
    if (sp_opt_uint(d, "k", &o->k) < 0 || sp_opt_uint(d, "threads", &o->threads) < 0 ||
        sp_opt_u64(d, "memory_bytes", &o->memory_bytes) < 0 ||
        sp_opt_double(d, "min_similarity", &o->min_similarity) < 0 ||
        sp_opt_bool(d, "bands", &o->bands) < 0)
        return -1;
    return 0;
}
