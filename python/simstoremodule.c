/* simstoremodule.c: the Python module `simstore`, a CPython extension over
 * libsimstore's public API (simstore.h, the only simstore header it
 * includes): fingerprints, stores (build, open, query, batch query, add,
 * delete, get, pairs, clusters, stats) and the library's error codes as
 * exceptions. Every call that does real work runs with the GIL released;
 * results are copied into C buffers there and turned into Python objects
 * once the GIL is held again. numpy is never a build dependency: arrays are
 * made at run time with numpy.frombuffer when numpy imports, and inputs are
 * read through the buffer protocol. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "simstore.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

PyMODINIT_FUNC PyInit_simstore(void);

/* ---- Errors -------------------------------------------------------------- */

#define N_CODES 12 /* SIMSTORE_OK .. -SIMSTORE_EREADONLY */

static PyObject *error_base;
static PyObject *error_by_code[N_CODES];

/* Raise the exception of library code err with message msg (a new
 * reference, stolen) and .code = err. */
static PyObject *raise_code(int err, PyObject *msg)
{
    if (!msg)
        return NULL;
    PyObject *cls = error_base;
    if (err < 0 && -err < N_CODES && error_by_code[-err])
        cls = error_by_code[-err];
    PyObject *exc = PyObject_CallOneArg(cls, msg);
    Py_DECREF(msg);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(err);
    if (code) {
        PyObject_SetAttrString(exc, "code", code);
        Py_DECREF(code);
    }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

/* Raise the exception of library code err for `what`, with the library's
 * detail message of this thread (read before any other simstore call). */
static PyObject *raise_error(int err, const char *what)
{
    const char *detail = simstore_last_error();
    if (detail && *detail)
        return raise_code(
            err, PyUnicode_FromFormat("%s: %s (%s)", what, simstore_strerror(err), detail));
    return raise_code(err, PyUnicode_FromFormat("%s: %s", what, simstore_strerror(err)));
}

/* ---- Small helpers ---------------------------------------------------------- */

static PyObject *json_dumps_fn, *json_loads_fn;

static int ensure_json(void)
{
    if (json_dumps_fn)
        return 0;
    /* The import may let another thread run (and get here): the first to
     * come back sets both functions. */
    PyObject *json = PyImport_ImportModule("json");
    if (!json)
        return -1;
    PyObject *loads = PyObject_GetAttrString(json, "loads");
    PyObject *dumps = loads ? PyObject_GetAttrString(json, "dumps") : NULL;
    Py_DECREF(json);
    if (!loads || !dumps) {
        Py_XDECREF(loads);
        return -1;
    }
    if (json_dumps_fn) {
        Py_DECREF(loads);
        Py_DECREF(dumps);
        return 0;
    }
    json_loads_fn = loads;
    json_dumps_fn = dumps;
    return 0;
}

/* Metadata bytes (JSON text) to a Python object; None for none. */
static PyObject *meta_to_py(const char *meta, size_t len)
{
    if (!meta)
        Py_RETURN_NONE;
    if (ensure_json() < 0)
        return NULL;
    PyObject *text = PyUnicode_DecodeUTF8(meta, (Py_ssize_t)len, "replace");
    if (!text)
        return NULL;
    PyObject *v = PyObject_CallOneArg(json_loads_fn, text);
    Py_DECREF(text);
    return v;
}

/* The deepest nesting of arrays and objects a metadata value may have:
 * the tool's JSON reader (jansson, 2048 levels) reads a record, itself an
 * object, around it. */
#define META_MAX_DEPTH 2047

/* Whether JSON text json.dumps made of obj reads back through the tool's
 * JSON reader (what `build` and the server read, so export --json ->
 * build): integers in -2**63..2**63-1, no two keys of an object that are
 * one string in JSON (1 and "1"), no NUL in a key, at most META_MAX_DEPTH
 * levels. Run once json.dumps has taken obj: no cycles, only JSON types.
 * Returns 0, or -1 with an exception (ValueError for a value refused). */
static int meta_check(PyObject *obj, int depth)
{
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow) {
            PyObject *digits = PyLong_Type.tp_repr(obj);
            if (digits)
                PyErr_Format(PyExc_ValueError,
                             "integer %U is outside -2**63..2**63-1, the integers JSON readers "
                             "of simstore take (store it as a str or a float)",
                             digits);
            Py_XDECREF(digits);
            return -1;
        }
        return 0;
    }
    int is_dict = PyDict_Check(obj);
    if (!is_dict && !PyList_Check(obj) && !PyTuple_Check(obj))
        return 0;
    if (depth >= META_MAX_DEPTH) {
        PyErr_Format(PyExc_ValueError, "nested deeper than %d arrays and objects", META_MAX_DEPTH);
        return -1;
    }
    if (!is_dict) {
        PyObject *seq = PySequence_Fast(obj, "a JSON array");
        if (!seq)
            return -1;
        int rc = 0;
        for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(seq); i++)
            rc = meta_check(PySequence_Fast_GET_ITEM(seq, i), depth + 1);
        Py_DECREF(seq);
        return rc;
    }
    /* json.dumps writes a key that is not a str as its JSON text (an int's
     * digits, a float's repr, true, false, null; as _json.c does): only an
     * object with such a key can have two keys that are one in JSON. */
    Py_ssize_t pos = 0;
    PyObject *key = NULL, *val = NULL;
    int mixed = 0;
    while (!mixed && PyDict_Next(obj, &pos, &key, &val))
        mixed = !PyUnicode_Check(key);
    PyObject *seen = mixed ? PySet_New(NULL) : NULL;
    if (mixed && !seen)
        return -1;
    int rc = 0;
    pos = 0;
    while (rc == 0 && PyDict_Next(obj, &pos, &key, &val)) {
        PyObject *text = NULL;
        if (PyUnicode_Check(key))
            text = Py_NewRef(key);
        else if (PyFloat_Check(key))
            text = PyFloat_Type.tp_repr(key);
        else if (key == Py_True || key == Py_False || key == Py_None)
            text = PyUnicode_FromString(key == Py_True    ? "true"
                                        : key == Py_False ? "false"
                                                          : "null");
        else if (PyLong_Check(key))
            text = PyLong_Type.tp_repr(key);
        else
            text = PyObject_Str(key); /* json.dumps refused it already */
        if (!text) {
            rc = -1;
            break;
        }
        Py_ssize_t nul = PyUnicode_FindChar(text, 0, 0, PyUnicode_GET_LENGTH(text), 1);
        if (nul == -2) {
            rc = -1;
        } else if (nul >= 0) {
            PyErr_Format(PyExc_ValueError, "object key %R holds a NUL character", text);
            rc = -1;
        } else if (seen) {
            int dup = PySet_Contains(seen, text);
            if (dup > 0)
                PyErr_Format(PyExc_ValueError, "two keys of one object are the JSON key %R", text);
            rc = dup != 0 || PySet_Add(seen, text) < 0 ? -1 : 0;
        }
        Py_DECREF(text);
        if (rc == 0)
            rc = meta_check(val, depth + 1);
    }
    Py_XDECREF(seen);
    return rc;
}

/* A Python object to compact JSON text (a new bytes object), as the tool
 * stores a record's "meta": json.dumps(obj, separators=(",", ":"),
 * ensure_ascii=False, allow_nan=False), and only JSON that the tool reads
 * back (meta_check). Raises json.dumps's exceptions, ValueError for a value
 * the tool would not read, UnicodeEncodeError for a lone surrogate. */
static PyObject *meta_from_py(PyObject *obj)
{
    if (ensure_json() < 0)
        return NULL;
    PyObject *args = PyTuple_Pack(1, obj);
    PyObject *kw = Py_BuildValue("{s:(ss),s:O,s:O}", "separators", ",", ":", "ensure_ascii",
                                 Py_False, "allow_nan", Py_False);
    PyObject *s = (args && kw) ? PyObject_Call(json_dumps_fn, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (!s)
        return NULL;
    PyObject *b = meta_check(obj, 0) < 0 ? NULL : PyUnicode_AsUTF8String(s);
    Py_DECREF(s);
    return b;
}

/* A document id from the library: an int when it was given as one
 * (SIMSTORE_MATCH_INTEGER_ID), else a str (undecodable bytes as
 * surrogates, so bytes ids come back unchanged through os.fsencode-style
 * round trips); None for no id. */
static PyObject *id_to_py(const char *id, size_t len, unsigned flags)
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

/* A document id from Python: str (UTF-8, lone surrogates as the bytes
 * surrogateescape gives them, so that an id id_to_py gave is found),
 * bytes, or int (its decimal form, flagged SIMSTORE_DOC_INTEGER_ID): any
 * id, as lookups and deletes take it (new ids: new_id_from_py). *hold
 * receives the object owning the bytes. Returns 0, or -1 with an
 * exception. */
static int id_from_py(PyObject *obj, const char **id, size_t *len, unsigned *flags, PyObject **hold)
{
    *flags = 0;
    if (PyUnicode_Check(obj)) {
        *hold = PyUnicode_AsEncodedString(obj, "utf-8", "surrogateescape");
    } else if (PyBytes_Check(obj)) {
        Py_INCREF(obj);
        *hold = obj;
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

/* An id as a message shows it: its repr (control characters, invalid
 * UTF-8 and lone surrogates escaped), cut to 40 characters or bytes. */
static PyObject *id_shown(PyObject *obj)
{
    if ((PyUnicode_Check(obj) || PyBytes_Check(obj)) && PyObject_Length(obj) > 40) {
        PyObject *head = PySequence_GetSlice(obj, 0, 40);
        PyObject *r = head ? PyObject_Repr(head) : NULL;
        Py_XDECREF(head);
        PyObject *shown = r ? PyUnicode_FromFormat("%U...", r) : NULL;
        Py_XDECREF(r);
        return shown;
    }
    return PyObject_Repr(obj);
}

/* A document id to store (Store.build, add) from obj, for docs[index]:
 * id_from_py's forms under the library's one id rule
 * (simstore_id_problem) and, for an int, 0..2**63-1: the integer ids the
 * server takes and JSON readers read back (export --json -> build). A str is
 * encoded without surrogateescape, so that a lone surrogate makes it
 * invalid UTF-8 rather than another id. Returns 0, or -1 with an exception:
 * InvalidArgumentError naming docs[index], the id (escaped) and why. */
static int new_id_from_py(PyObject *obj, unsigned long long index, const char **id, size_t *len,
                          unsigned *flags, PyObject **hold)
{
    const char *why = NULL;
    *hold = NULL;
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow || v < 0)
            why = "an integer id is in 0..2**63-1, as the server takes it (give another "
                  "number as a str)";
    } else if (PyUnicode_Check(obj)) {
        *flags = 0;
        *hold = PyUnicode_AsEncodedString(obj, "utf-8", "surrogatepass");
        if (!*hold)
            return -1;
        *id = PyBytes_AS_STRING(*hold);
        *len = (size_t)PyBytes_GET_SIZE(*hold);
    }
    if (!why && !*hold && id_from_py(obj, id, len, flags, hold) < 0)
        return -1;
    if (!why)
        why = simstore_id_problem(*id, *len);
    if (!why)
        return 0;
    Py_CLEAR(*hold);
    PyObject *shown = id_shown(obj);
    if (shown) {
        raise_code(SIMSTORE_EINVAL,
                   PyUnicode_FromFormat("docs[%llu]: document id %U: %s", index, shown, why));
        Py_DECREF(shown);
    }
    return -1;
}

/* The exception being raised, taken out of the thread's state (a new
 * reference; NULL when none), and back. */
static PyObject *exception_take(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

static void exception_give(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* The exception raised while making docs[index]'s metadata, raised again
 * naming the document: a ValueError (NaN, an integer JSON readers refuse,
 * a lone surrogate, a cycle) as InvalidArgumentError, a TypeError (not a
 * JSON type) as TypeError, each from the original (its __cause__); any
 * other (MemoryError, RecursionError) as it is. */
static void meta_error(unsigned long long index, PyObject *idobj)
{
    PyObject *cause = exception_take();
    if (!cause)
        return;
    int value = PyErr_GivenExceptionMatches(cause, PyExc_ValueError);
    if (!value && !PyErr_GivenExceptionMatches(cause, PyExc_TypeError)) {
        exception_give(cause);
        return;
    }
    PyObject *shown = id_shown(idobj);
    PyObject *msg =
        shown ? PyUnicode_FromFormat("docs[%llu] (id %U): metadata: %S", index, shown, cause)
              : NULL;
    Py_XDECREF(shown);
    if (!msg) {
        Py_DECREF(cause);
        return;
    }
    if (value) {
        raise_code(SIMSTORE_EINVAL, msg);
    } else {
        PyErr_SetObject(PyExc_TypeError, msg);
        Py_DECREF(msg);
    }
    PyObject *exc = exception_take();
    if (!exc) {
        Py_DECREF(cause);
        return;
    }
    PyException_SetCause(exc, cause); /* steals cause */
    exception_give(exc);
}

/* A fingerprint from an int (or anything with __index__: numpy integers),
 * or a string of 16 hex digits. Returns 0, or -1 with an exception. */
static int fp_from_py(PyObject *obj, uint64_t *fp)
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

/* Text of a document: str (UTF-8), bytes or any buffer of bytes. view is
 * released by the caller with PyBuffer_Release when view->obj is set.
 * Returns 1 with *text, *len set, 0 when obj is not a text, -1 on error. */
static int text_from_py(PyObject *obj, Py_buffer *view, const char **text, size_t *len)
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

/* ---- Keyword options ------------------------------------------------------ */

/* Take keyword `name` out of kw (a dict the caller owns, or NULL): a new
 * reference, or NULL when absent (no exception). */
static PyObject *kw_take(PyObject *kw, const char *name)
{
    if (!kw)
        return NULL;
    PyObject *v = PyDict_GetItemString(kw, name);
    if (!v)
        return NULL;
    Py_INCREF(v);
    PyDict_DelItemString(kw, name);
    return v;
}

/* An unsigned keyword in lo..hi; absent or None leaves *out. */
static int kw_unsigned(PyObject *kw, const char *name, unsigned long long lo, unsigned long long hi,
                       unsigned long long *out)
{
    PyObject *v = kw_take(kw, name);
    if (!v || v == Py_None) {
        Py_XDECREF(v);
        return 0;
    }
    PyObject *ix = PyNumber_Index(v);
    Py_DECREF(v);
    if (!ix)
        return -1;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        Py_DECREF(ix);
        return -1;
    }
    if (overflow || x < 0 || (unsigned long long)x < lo || (unsigned long long)x > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be an integer in %llu..%llu, not %R", name, lo, hi,
                     ix);
        Py_DECREF(ix);
        return -1;
    }
    Py_DECREF(ix);
    *out = (unsigned long long)x;
    return 0;
}

static int kw_uint(PyObject *kw, const char *name, unsigned lo, unsigned hi, unsigned *out)
{
    unsigned long long v = *out;
    if (kw_unsigned(kw, name, lo, hi, &v) < 0)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int kw_bool(PyObject *kw, const char *name, int *out)
{
    PyObject *v = kw_take(kw, name);
    if (!v)
        return 0;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (t < 0)
        return -1;
    *out = t;
    return 0;
}

/* A number keyword in lo..hi (NaN is outside); absent or None leaves *out.
 * PyErr_Format has no float conversions: the bounds are formatted here. */
static int kw_double(PyObject *kw, const char *name, double lo, double hi, double *out)
{
    PyObject *v = kw_take(kw, name);
    if (!v || v == Py_None) {
        Py_XDECREF(v);
        return 0;
    }
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
        Py_DECREF(v);
        return -1;
    }
    if (!(d >= lo && d <= hi)) {
        char range[64];
        snprintf(range, sizeof range, "%g..%g", lo, hi);
        PyErr_Format(PyExc_ValueError, "%s must be a number in %s, not %R", name, range, v);
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    *out = d;
    return 0;
}

/* A keyword naming one of `names` (a NULL-terminated list): its index to
 * *out; absent or None leaves *out. */
static int kw_choice(PyObject *kw, const char *name, const char *const *names, int *out)
{
    PyObject *v = kw_take(kw, name);
    if (!v || v == Py_None) {
        Py_XDECREF(v);
        return 0;
    }
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    for (int i = 0; s && names[i]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            Py_DECREF(v);
            return 0;
        }
    }
    if (!PyErr_Occurred()) {
        char list[256] = "";
        for (int i = 0; names[i]; i++) {
            size_t n = strlen(list);
            snprintf(list + n, sizeof list - n, "%s'%s'", i ? ", " : "", names[i]);
        }
        PyErr_Format(PyExc_ValueError, "%s must be one of %s, not %R", name, list, v);
    }
    Py_DECREF(v);
    return -1;
}

/* Fails when kw still holds a keyword nobody took. */
static int kw_done(PyObject *kw, const char *fname)
{
    Py_ssize_t pos = 0;
    PyObject *key = NULL, *val = NULL;
    if (kw && PyDict_Next(kw, &pos, &key, &val)) {
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname, key);
        return -1;
    }
    return 0;
}

/* A keyword that may also come as the positional *pos: fails when both. */
static int kw_positional(PyObject *kwargs, const char *name, PyObject **pos)
{
    PyObject *v = kwargs ? PyDict_GetItemString(kwargs, name) : NULL;
    if (v && *pos) {
        PyErr_Format(PyExc_TypeError, "got multiple values for argument '%s'", name);
        return -1;
    }
    if (v)
        *pos = v;
    return 0;
}

/* A boolean keyword of kwargs (not taken out). */
static int kw_flag(PyObject *kwargs, const char *name, int *out)
{
    PyObject *v = kwargs ? PyDict_GetItemString(kwargs, name) : NULL;
    if (!v)
        return 0;
    int t = PyObject_IsTrue(v);
    if (t < 0)
        return -1;
    *out = t;
    return 0;
}

/* Fails when kwargs holds a keyword other than the NULL-terminated names. */
static int kw_only(PyObject *kwargs, const char *fname, ...)
{
    Py_ssize_t pos = 0;
    PyObject *key = NULL, *val = NULL;
    while (kwargs && PyDict_Next(kwargs, &pos, &key, &val)) {
        const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        int known = 0;
        va_list ap;
        va_start(ap, fname);
        for (const char *n = va_arg(ap, const char *); n && k; n = va_arg(ap, const char *))
            known = known || strcmp(n, k) == 0;
        va_end(ap);
        if (!known) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname, key);
            return -1;
        }
    }
    return 0;
}

static PyObject *kw_copy(PyObject *kwargs)
{
    return kwargs ? PyDict_Copy(kwargs) : PyDict_New();
}

static const char *const weight_names[] = {"tf", "length", "log", NULL};
static const char *const cjk_names[] = {"auto", "friso", "bigram", NULL};
static const char *const sketch_names[] = {"none",       "minhash16",  "minhash32", "minhash64",
                                           "minhash128", "minhash256", NULL};

/* The text options, as the tool's: version (or fp_version), shingle,
 * cjk_shingle, weights, lambda (or lambda_), cjk; with `store_options`
 * also sketch and paragraph_min_words. Fields not given keep *o. */
static int text_options_from_kw(PyObject *kw, simstore_text_options *o, int store_options)
{
    unsigned version = o->version;
    if (kw_uint(kw, "version", 1, SIMSTORE_FP_VERSION_LATEST, &version) < 0 ||
        kw_uint(kw, "fp_version", 1, SIMSTORE_FP_VERSION_LATEST, &version) < 0)
        return -1;
    o->version = version;
    if (kw_uint(kw, "shingle", 1, SIMSTORE_SHINGLE_MAX, &o->shingle_words) < 0 ||
        kw_uint(kw, "cjk_shingle", 1, SIMSTORE_SHINGLE_MAX, &o->cjk_shingle) < 0)
        return -1;
    int w = (int)o->weighting, c = (int)o->cjk;
    if (kw_choice(kw, "weights", weight_names, &w) < 0 || kw_choice(kw, "cjk", cjk_names, &c) < 0)
        return -1;
    o->weighting = (simstore_weighting)w;
    o->cjk = (simstore_cjk_mode)c;
    if (kw_double(kw, "lambda", 0, SIMSTORE_LAMBDA_MAX, &o->lambda) < 0 ||
        kw_double(kw, "lambda_", 0, SIMSTORE_LAMBDA_MAX, &o->lambda) < 0)
        return -1;
    if (store_options) {
        int s = (int)o->sketch;
        if (kw_choice(kw, "sketch", sketch_names, &s) < 0)
            return -1;
        o->sketch = (simstore_sketch_kind)s;
        if (kw_uint(kw, "paragraph_min_words", 0, SIMSTORE_PARAGRAPH_MIN_WORDS_MAX,
                    &o->paragraph_min_words) < 0)
            return -1;
    }
    return 0;
}

/* ---- Arrays --------------------------------------------------------------- */

static PyObject *numpy_module;
static int numpy_tried;

/* numpy, or NULL without an exception when it does not import. */
static PyObject *get_numpy(void)
{
    if (!numpy_tried) {
        /* As in ensure_json(): the import may let other threads in. */
        PyObject *np = PyImport_ImportModule("numpy");
        if (!np)
            PyErr_Clear();
        if (numpy_tried) {
            Py_XDECREF(np);
        } else {
            numpy_module = np;
            numpy_tried = 1;
        }
    }
    return numpy_module;
}

/* n values of `size` bytes at data (uint64 when size is 8 and !is_signed,
 * int64 or int32 when is_signed is 1, float64 when it is 2) as a writable
 * numpy array of that dtype, or a list without numpy. */
static PyObject *array_from(const void *data, size_t n, size_t size, int is_signed)
{
    PyObject *np = get_numpy();
    if (np) {
        PyObject *buf = PyByteArray_FromStringAndSize(data, (Py_ssize_t)(n * size));
        if (!buf)
            return NULL;
        const char *dtype = is_signed == 2 ? "float64"
                            : size == 8    ? (is_signed ? "int64" : "uint64")
                                           : "int32";
        PyObject *arr = PyObject_CallMethod(np, "frombuffer", "Os", buf, dtype);
        Py_DECREF(buf);
        return arr;
    }
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *v = NULL;
        if (is_signed == 2)
            v = PyFloat_FromDouble(((const double *)data)[i]);
        else if (size == 8 && !is_signed)
            v = PyLong_FromUnsignedLongLong(((const uint64_t *)data)[i]);
        else if (size == 8)
            v = PyLong_FromLongLong(((const int64_t *)data)[i]);
        else
            v = PyLong_FromLong(((const int32_t *)data)[i]);
        if (!v) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* Fingerprints from any C-contiguous buffer of 8-byte integers (a numpy
 * uint64 or int64 array, array('Q'), ...) or an iterable of ints. *out is
 * malloc'ed (free it). Returns 0, or -1 with an exception. */
static int fps_from_py(PyObject *obj, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (PyObject_CheckBuffer(obj) && !PyUnicode_Check(obj)) {
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            return -1;
        const char *f = view.format ? view.format : "B";
        if (*f == '@' || *f == '=' || *f == '<')
            f++;
        int ok = view.itemsize == 8 && strlen(f) == 1 && strchr("QqLl", *f);
        if (!ok) {
            PyErr_Format(PyExc_TypeError,
                         "fingerprints come as a buffer of 64-bit integers (numpy uint64), not "
                         "format '%s' of %zd-byte items",
                         view.format ? view.format : "B", view.itemsize);
            PyBuffer_Release(&view);
            return -1;
        }
        size_t count = (size_t)(view.len / 8);
        *out = malloc(count ? count * 8 : 1);
        if (!*out) {
            PyBuffer_Release(&view);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(*out, view.buf, count * 8);
        *n = count;
        PyBuffer_Release(&view);
        return 0;
    }
    PyObject *seq =
        PySequence_Fast(obj, "fingerprints come as a uint64 buffer or an iterable of ints");
    if (!seq)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    *out = malloc(count ? (size_t)count * 8 : 1);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (fp_from_py(PySequence_Fast_GET_ITEM(seq, i), &(*out)[i]) < 0) {
            free(*out);
            *out = NULL;
            Py_DECREF(seq);
            return -1;
        }
    }
    *n = (size_t)count;
    Py_DECREF(seq);
    return 0;
}

/* ---- Collected records ----------------------------------------------------
 * Results gathered while the GIL is released: fixed-size records with their
 * strings in one growing arena (offsets, SIZE_MAX for a NULL string). */

typedef struct collected {
    size_t a_off, a_len, b_off, b_len, c_off, c_len;
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

static collected *collect_new(collector *c)
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
    r->a_off = r->b_off = r->c_off = SIZE_MAX;
    return r;
}

static void collector_free(collector *c)
{
    free(c->recs);
    free(c->arena);
}

static PyObject *collected_id(const collector *c, size_t off, size_t len, unsigned flags)
{
    return id_to_py(off == SIZE_MAX ? NULL : c->arena + off, len, flags);
}

static PyObject *similarity_to_py(double sim)
{
    if (sim < 0)
        Py_RETURN_NONE;
    return PyFloat_FromDouble(sim);
}

/* ---- Result types ---------------------------------------------------------- */

static PyTypeObject MatchType, PairType, MemberType, DocumentType;

static PyStructSequence_Field match_fields[] = {
    {"id", "the document's id (str, or int when given as one); None in a fingerprint-only store"},
    {"fp", "its fingerprint"},
    {"distance", "Hamming distance to the query"},
    {"similarity", "estimated Jaccard similarity to the query's text, or None when unknown"},
    {"meta", "its metadata (parsed JSON) when asked for (meta=True), else None"},
    {"insertion", "insertion order number (0 when unknown)"},
    {NULL, NULL}};
static PyStructSequence_Desc match_desc = {"simstore.Match", "One answer of Store.query().",
                                           match_fields, 6};

static PyStructSequence_Field pair_fields[] = {
    {"a", "id of the first document (byte order a < b); None by fingerprint"},
    {"b", "id of the second document"},
    {"distance", "their Hamming distance"},
    {"fp_a", "fingerprint of a"},
    {"fp_b", "fingerprint of b"},
    {"similarity", "their estimated similarity, or None when unknown"},
    {NULL, NULL}};
static PyStructSequence_Desc pair_desc = {"simstore.Pair", "One pair of Store.pairs().",
                                          pair_fields, 6};

static PyStructSequence_Field member_fields[] = {
    {"cluster", "id of the cluster's kept document"},
    {"id", "id of this document"},
    {"kept", "True for the document the cluster keeps"},
    {"distance", "Hamming distance to the kept document"},
    {"fp", "this document's fingerprint"},
    {"cluster_fp", "the kept document's fingerprint"},
    {"similarity", "estimated similarity to the kept document, or None when unknown"},
    {NULL, NULL}};
static PyStructSequence_Desc member_desc = {
    "simstore.ClusterMember", "One clustered document of Store.clusters().", member_fields, 7};

static PyStructSequence_Field document_fields[] = {
    {"id", "the document's id"},
    {"fp", "its fingerprint"},
    {"meta", "its metadata (parsed JSON), or None"},
    {"segment", "the newest live segment whose tables hold its fingerprint"},
    {"insertion", "insertion order number (0 when unknown)"},
    {"sketch", "its sketch (bytes of the store's sketch kind), or None"},
    {NULL, NULL}};
static PyStructSequence_Desc document_desc = {
    "simstore.Document", "A document of Store.get() and Store.documents().", document_fields, 6};

/* A collected string as bytes, None for none. */
static PyObject *collected_bytes(const collector *c, size_t off, size_t len)
{
    if (off == SIZE_MAX)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(c->arena + off, (Py_ssize_t)len);
}

static PyTypeObject ParagraphType, ParagraphMatchType;

static PyStructSequence_Field paragraph_fields[] = {
    {"number", "1, 2, ... in text order, over the paragraphs with words"},
    {"offset", "byte offset of its first line in the text's UTF-8"},
    {"length", "its bytes, up to the end of its last line"},
    {"fp", "its fingerprint"},
    {"words", "its tokens (what a store's paragraph_min_words counts)"},
    {NULL, NULL}};
static PyStructSequence_Desc paragraph_desc = {
    "simstore.Paragraph", "One paragraph of paragraphs().", paragraph_fields, 5};

static PyStructSequence_Field paragraph_match_fields[] = {
    {"id", "the stored document's id"},
    {"shared", "how many of the query's paragraphs have one of its paragraphs within k"},
    {"of", "the query's paragraphs"},
    {"fraction", "shared / of"},
    {"fp", "the document's (whole-text) fingerprint"},
    {"meta", "its metadata (meta=True), else None"},
    {NULL, NULL}};
static PyStructSequence_Desc paragraph_match_desc = {"simstore.ParagraphMatch",
                                                     "One answer of Store.query_paragraphs().",
                                                     paragraph_match_fields, 6};

/* Fill a struct sequence from `n` new references (stolen, NULL = failure). */
static PyObject *structseq(PyTypeObject *type, PyObject **items, int n)
{
    PyObject *r = PyStructSequence_New(type);
    int ok = r != NULL;
    for (int i = 0; i < n; i++)
        ok = ok && items[i];
    if (!ok) {
        for (int i = 0; i < n; i++)
            Py_XDECREF(items[i]);
        Py_XDECREF(r);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        PyStructSequence_SET_ITEM(r, i, items[i]);
    return r;
}

/* ---- Fingerprints ------------------------------------------------------------ */

PyDoc_STRVAR(fingerprint_doc,
             "fingerprint(text, **options) -> int\n\n"
             "The 64-bit simhash of a text (str, or UTF-8 bytes), as `simstore fingerprint`\n"
             "makes it. Options, as the tool's: version (1 or 2, default 2), shingle (3),\n"
             "cjk_shingle (2), weights ('tf', 'length' or 'log'), lambda (1.0, with\n"
             "weights='length'), cjk ('auto', 'friso' or 'bigram').");

static PyObject *py_fingerprint(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *textobj = NULL;
    if (!PyArg_ParseTuple(args, "O:fingerprint", &textobj))
        return NULL;
    simstore_text_options o;
    simstore_text_options_init(&o);
    PyObject *kw = kw_copy(kwargs);
    if (!kw)
        return NULL;
    if (text_options_from_kw(kw, &o, 0) < 0 || kw_done(kw, "fingerprint") < 0) {
        Py_DECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    int t = text_from_py(textobj, &view, &text, &len);
    if (t <= 0) {
        if (t == 0)
            PyErr_Format(PyExc_TypeError, "fingerprint() takes a str or bytes, not %.100s",
                         Py_TYPE(textobj)->tp_name);
        return NULL;
    }
    uint64_t fp = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    simstore_fingerprinter *fpr = NULL;
    err = simstore_fingerprinter_new(&o, &fpr);
    if (!err)
        err = simstore_fingerprint_text(fpr, text, len, &fp, NULL);
    simstore_fingerprinter_free(fpr);
    Py_END_ALLOW_THREADS;
    if (view.obj)
        PyBuffer_Release(&view);
    if (err)
        return raise_error(err, "fingerprint");
    return PyLong_FromUnsignedLongLong(fp);
}

PyDoc_STRVAR(fingerprints_doc,
             "fingerprints(texts, threads=0, **options) -> numpy.ndarray or list\n\n"
             "The fingerprints of a sequence of texts, fingerprinted on `threads` threads\n"
             "(0: every core) with the options of fingerprint(): a numpy uint64 array when\n"
             "numpy imports, else a list of ints.");

static PyObject *py_fingerprints(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *texts = NULL;
    if (!PyArg_ParseTuple(args, "O:fingerprints", &texts))
        return NULL;
    simstore_text_options o;
    simstore_text_options_init(&o);
    unsigned threads = 0;
    PyObject *kw = kw_copy(kwargs);
    if (!kw)
        return NULL;
    if (kw_uint(kw, "threads", 0, 256, &threads) < 0 || text_options_from_kw(kw, &o, 0) < 0 ||
        kw_done(kw, "fingerprints") < 0) {
        Py_DECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    if (PyUnicode_Check(texts) || PyBytes_Check(texts)) {
        PyErr_SetString(PyExc_TypeError, "fingerprints() takes a sequence of texts (for one "
                                         "text, use fingerprint())");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(texts, "fingerprints() takes a sequence of texts");
    if (!seq)
        return NULL;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    const char **ptrs = malloc((n ? n : 1) * sizeof *ptrs);
    size_t *lens = malloc((n ? n : 1) * sizeof *lens);
    uint64_t *fps = malloc((n ? n : 1) * sizeof *fps);
    PyObject *result = NULL;
    if (!ptrs || !lens || !fps) {
        PyErr_NoMemory();
        goto done;
    }
    /* str objects cache their UTF-8 form and bytes are immutable: seq keeps
     * them alive, so the pointers stay valid while the GIL is released. */
    for (size_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i);
        if (PyUnicode_Check(t)) {
            Py_ssize_t len = 0;
            ptrs[i] = PyUnicode_AsUTF8AndSize(t, &len);
            if (!ptrs[i])
                goto done;
            lens[i] = (size_t)len;
        } else if (PyBytes_Check(t)) {
            ptrs[i] = PyBytes_AS_STRING(t);
            lens[i] = (size_t)PyBytes_GET_SIZE(t);
        } else {
            PyErr_Format(PyExc_TypeError, "texts[%zu] is a %.100s, not a str or bytes", i,
                         Py_TYPE(t)->tp_name);
            goto done;
        }
    }
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_fingerprint_many(&o, threads, ptrs, lens, n, fps, NULL);
    Py_END_ALLOW_THREADS;
    if (err)
        raise_error(err, "fingerprints");
    else
        result = array_from(fps, n, 8, 0);
done:
    free(ptrs);
    free(lens);
    free(fps);
    Py_DECREF(seq);
    return result;
}

/* Parse (text, **options) of sketch() and paragraphs(): the text and the
 * options, with the extra unsigned keyword `extra` (NULL: none). */
static int text_call_args(PyObject *args, PyObject *kwargs, const char *fname,
                          simstore_text_options *o, PyObject **textobj)
{
    if (!PyArg_ParseTuple(args, "O", textobj))
        return -1;
    PyObject *kw = kw_copy(kwargs);
    if (!kw)
        return -1;
    int rc = text_options_from_kw(kw, o, 0) < 0 || kw_done(kw, fname) < 0 ? -1 : 0;
    Py_DECREF(kw);
    return rc;
}

static int text_arg(PyObject *textobj, Py_buffer *view, const char **text, size_t *len,
                    const char *fname)
{
    int t = text_from_py(textobj, view, text, len);
    if (t == 0)
        PyErr_Format(PyExc_TypeError, "%s() takes a str or bytes, not %.100s", fname,
                     Py_TYPE(textobj)->tp_name);
    return t > 0 ? 0 : -1;
}

PyDoc_STRVAR(sketch_doc,
             "sketch(text, kind='minhash256', **options) -> (fp, bytes)\n\n"
             "The fingerprint of a text and its sketch of kind 'minhash16', 'minhash32',\n"
             "'minhash64', 'minhash128' or 'minhash256' (format/sketch.md), made in one\n"
             "pass: `simstore fingerprint --sketch KIND`. similarity() compares two.");

static PyObject *py_sketch(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    simstore_text_options o;
    simstore_text_options_init(&o);
    o.sketch = SIMSTORE_SKETCH_DEFAULT;
    PyObject *textobj = NULL, *kw = kw_copy(kwargs);
    if (!kw)
        return NULL;
    int kind = (int)o.sketch;
    if (kw_choice(kw, "kind", sketch_names, &kind) < 0) {
        Py_DECREF(kw);
        return NULL;
    }
    o.sketch = (simstore_sketch_kind)kind;
    int rc = text_call_args(args, kw, "sketch", &o, &textobj);
    Py_DECREF(kw);
    if (rc < 0)
        return NULL;
    if (o.sketch == SIMSTORE_SKETCH_NONE) {
        PyErr_SetString(PyExc_ValueError, "sketch(): kind must be a sketch kind, not 'none'");
        return NULL;
    }
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    if (text_arg(textobj, &view, &text, &len, "sketch") < 0)
        return NULL;
    uint8_t buf[SIMSTORE_SKETCH_MAX_BYTES];
    uint64_t fp = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    simstore_fingerprinter *fpr = NULL;
    err = simstore_fingerprinter_new(&o, &fpr);
    if (!err)
        err = simstore_fingerprint_sketch(fpr, text, len, &fp, buf, NULL);
    simstore_fingerprinter_free(fpr);
    Py_END_ALLOW_THREADS;
    if (view.obj)
        PyBuffer_Release(&view);
    if (err)
        return raise_error(err, "sketch");
    return Py_BuildValue("(Ky#)", (unsigned long long)fp, (const char *)buf,
                         (Py_ssize_t)simstore_sketch_bytes(o.sketch));
}

PyDoc_STRVAR(similarity_doc,
             "similarity(a, b) -> float\n\n"
             "The estimated Jaccard similarity (0..1) of the shingle sets two sketches of\n"
             "one kind (bytes of the same length, from sketch()) were made from.");

static PyObject *py_similarity(PyObject *self, PyObject *args)
{
    (void)self;
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

typedef struct para_list {
    simstore_paragraph *p;
    size_t n, cap;
} para_list;

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

PyDoc_STRVAR(paragraphs_doc,
             "paragraphs(text, **options) -> list of Paragraph\n\n"
             "The paragraphs of a text (groups of non-blank lines) that have words, each\n"
             "fingerprinted as a document of its own: Paragraph(number, offset, length,\n"
             "fp, words), offsets in bytes of its UTF-8. `simstore fingerprint\n"
             "--paragraphs`. Options as fingerprint().");

static PyObject *py_paragraphs(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    simstore_text_options o;
    simstore_text_options_init(&o);
    PyObject *textobj = NULL;
    if (text_call_args(args, kwargs, "paragraphs", &o, &textobj) < 0)
        return NULL;
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    if (text_arg(textobj, &view, &text, &len, "paragraphs") < 0)
        return NULL;
    para_list l = {NULL, 0, 0};
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    simstore_fingerprinter *fpr = NULL;
    err = simstore_fingerprinter_new(&o, &fpr);
    if (!err)
        err = simstore_fingerprint_paragraphs(fpr, text, len, para_cb, &l, NULL, NULL);
    simstore_fingerprinter_free(fpr);
    Py_END_ALLOW_THREADS;
    if (view.obj)
        PyBuffer_Release(&view);
    PyObject *list = NULL;
    if (err) {
        raise_error(err, "paragraphs");
    } else {
        list = PyList_New((Py_ssize_t)l.n);
        for (size_t i = 0; list && i < l.n; i++) {
            const simstore_paragraph *p = &l.p[i];
            PyObject *items[5] = {PyLong_FromUnsignedLong(p->number), PyLong_FromSize_t(p->offset),
                                  PyLong_FromSize_t(p->length),
                                  PyLong_FromUnsignedLongLong(p->fingerprint),
                                  PyLong_FromUnsignedLongLong(p->words)};
            PyObject *x = structseq(&ParagraphType, items, 5);
            if (!x) {
                Py_CLEAR(list);
                break;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)i, x);
        }
    }
    free(l.p);
    return list;
}

PyDoc_STRVAR(distance_doc, "distance(a, b) -> int\n\nThe Hamming distance of two fingerprints.");

static PyObject *py_distance(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *a = NULL, *b = NULL;
    uint64_t x = 0, y = 0;
    if (!PyArg_ParseTuple(args, "OO:distance", &a, &b) || fp_from_py(a, &x) < 0 ||
        fp_from_py(b, &y) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(simstore_distance(x, y));
}

/* ---- Store --------------------------------------------------------------------- */

/* A query context and a fingerprinter for one thread at a time, kept in the
 * store's idle list between calls. */
typedef struct qslot {
    struct qslot *next;
    simstore_query *q;
    simstore_fingerprinter *fpr; /* made on the first text query */
} qslot;

typedef struct StoreObject {
    PyObject_HEAD simstore *s;
    pthread_mutex_t mu; /* guards busy, idle and s's closing */
    int busy;           /* calls running on s */
    qslot *idle[2];     /* idle contexts without and with metadata */
    unsigned k;         /* the store's design k */
    int fingerprint_only;
    int writable;
    PyObject *path;
    PyObject *recovery; /* a Recovery of what the open applied, or None */
} StoreObject;

static PyTypeObject StoreType;

/* Enter a call on the store: fails when it is closed. */
static int store_enter(StoreObject *self)
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

static void store_leave(StoreObject *self)
{
    pthread_mutex_lock(&self->mu);
    self->busy--;
    pthread_mutex_unlock(&self->mu);
}

/* Called without the GIL. */
static int slot_take(StoreObject *self, int meta, qslot **out)
{
    pthread_mutex_lock(&self->mu);
    qslot *sl = self->idle[meta];
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

static void slot_give(StoreObject *self, int meta, qslot *sl)
{
    pthread_mutex_lock(&self->mu);
    sl->next = self->idle[meta];
    self->idle[meta] = sl;
    pthread_mutex_unlock(&self->mu);
}

static void slots_free(StoreObject *self)
{
    for (int m = 0; m < 2; m++) {
        while (self->idle[m]) {
            qslot *sl = self->idle[m];
            self->idle[m] = sl->next;
            simstore_query_free(sl->q);
            simstore_fingerprinter_free(sl->fpr);
            free(sl);
        }
    }
}

/* A fingerprinter of the store's texts: its text options (sketch included)
 * and boilerplate. */
static int store_fingerprinter(simstore *s, simstore_fingerprinter **out)
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

static StoreObject *store_new_object(simstore *s, PyObject *path, int writable, PyObject *recovery)
{
    StoreObject *self = PyObject_New(StoreObject, &StoreType);
    if (!self) {
        simstore_close(s);
        return NULL;
    }
    self->recovery = Py_NewRef(recovery);
    self->s = s;
    pthread_mutex_init(&self->mu, NULL);
    self->busy = 0;
    self->idle[0] = self->idle[1] = NULL;
    self->writable = writable;
    Py_INCREF(path);
    self->path = path;
    simstore_stats st;
    memset(&st, 0, sizeof st);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_get_stats(s, &st);
    Py_END_ALLOW_THREADS;
    self->k = st.k;
    self->fingerprint_only = st.fingerprint_only;
    if (err) {
        raise_error(err, "open");
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

static void store_dealloc(StoreObject *self)
{
    slots_free(self);
    if (self->s) {
        simstore *s = self->s;
        self->s = NULL;
        Py_BEGIN_ALLOW_THREADS;
        simstore_close(s);
        Py_END_ALLOW_THREADS;
    }
    pthread_mutex_destroy(&self->mu);
    Py_XDECREF(self->path);
    Py_XDECREF(self->recovery);
    PyObject_Free(self);
}

static int open_flags_from_kw(PyObject *kw, unsigned *flags, int *writable)
{
    int write = 0, verify = 1, auto_compact = 1, huge_pages = 0;
    if (kw_bool(kw, "write", &write) < 0 || kw_bool(kw, "verify", &verify) < 0 ||
        kw_bool(kw, "auto_compact", &auto_compact) < 0 ||
        kw_bool(kw, "huge_pages", &huge_pages) < 0)
        return -1;
    *flags = (write ? SIMSTORE_OPEN_WRITE : 0) |
             (verify ? 0 : SIMSTORE_OPEN_SKIP_BLOCK_CHECKSUMS | SIMSTORE_OPEN_TRUST_LMDB) |
             (auto_compact ? 0 : SIMSTORE_OPEN_NO_AUTO_COMPACT) |
             (huge_pages ? SIMSTORE_OPEN_HUGE_PAGES : 0);
    *writable = write;
    return 0;
}

/* ---- A stopped server's log ---------------------------------------------- */

static PyObject *recovery_warning; /* simstore.RecoveryWarning */
static PyTypeObject RecoveryType;

static PyStructSequence_Field recovery_fields[] = {
    {"applied", "changes a stopped server had acknowledged and logged, now written into the "
                "store's files"},
    {"torn_bytes", "bytes of a torn tail of the log (a group whose fsync had not returned: "
                   "never acknowledged) set aside, 0 for none"},
    {"torn_records", "whole records among them"},
    {"torn_name", "the file in the store directory that keeps them, or None"},
    {NULL, NULL}};
static PyStructSequence_Desc recovery_desc = {
    "simstore.Recovery",
    "What opening a store for writing did with the log (live.wal) of a server that stopped "
    "without writing its changes into the store: Store.recovery.",
    recovery_fields, 4};

/* Before a writer opens the store at p (path, as the caller gave it):
 * apply the changes a live store (a server) acknowledged in p/live.wal but
 * did not write into the store's files before it stopped, exactly as its
 * next start would (simstore_live_recover), so that the writer's changes
 * come after them and no later replay overrides them. A store without a
 * log was never served live: nothing to apply (and no log is made). Warns
 * RecoveryWarning when changes were applied or a torn tail set aside.
 * *recovery receives a Recovery of it, or None. Returns 0, or -1 with an
 * exception: the library's (BusyError while a server or writer holds the
 * store; CorruptError for a damaged log, left as it is). */
static int recover_for_write(PyObject *path, const char *p, PyObject **recovery)
{
    *recovery = NULL;
    char wal[PATH_MAX];
    int fits = snprintf(wal, sizeof wal, "%s/live.wal", p) < (int)sizeof wal;
    simstore_live_recovery rec;
    memset(&rec, 0, sizeof rec);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    struct stat st;
    if (!fits || stat(wal, &st) == 0 || errno != ENOENT)
        err = simstore_live_recover(p, &rec);
    Py_END_ALLOW_THREADS;
    if (err) {
        raise_error(err, "open");
        return -1;
    }
    if (!rec.applied && !rec.torn_bytes) {
        *recovery = Py_NewRef(Py_None);
        return 0;
    }
    rec.torn_name[sizeof rec.torn_name - 1] = '\0';
    PyObject *items[4] = {
        PyLong_FromUnsignedLongLong(rec.applied), PyLong_FromUnsignedLongLong(rec.torn_bytes),
        PyLong_FromUnsignedLongLong(rec.torn_records),
        rec.torn_name[0] ? PyUnicode_DecodeFSDefault(rec.torn_name) : Py_NewRef(Py_None)};
    *recovery = structseq(&RecoveryType, items, 4);
    if (!*recovery)
        return -1;
    PyObject *msg = PyUnicode_FromFormat(
        "%S: applied %llu change%s that a stopped server had acknowledged and logged in "
        "live.wal but not written into the store, as its next start would",
        path, (unsigned long long)rec.applied, rec.applied == 1 ? "" : "s");
    if (msg && rec.torn_bytes) {
        PyObject *more = PyUnicode_FromFormat(
            "%U; set aside a torn tail of the log, %llu bytes (%llu records, never "
            "acknowledged), as %s",
            msg, (unsigned long long)rec.torn_bytes, (unsigned long long)rec.torn_records,
            rec.torn_name[0] ? rec.torn_name : "a file beside it");
        Py_SETREF(msg, more);
    }
    const char *text = msg ? PyUnicode_AsUTF8(msg) : NULL;
    int rc = text ? PyErr_WarnEx(recovery_warning, text, 1) : -1;
    Py_XDECREF(msg);
    if (rc < 0) /* warnings as errors: the changes are applied, the store not opened */
        Py_CLEAR(*recovery);
    return rc;
}

/* Open the store at path; a writer (SIMSTORE_OPEN_WRITE) first applies a
 * stopped server's log (recover_for_write). */
static PyObject *open_path(PyObject *path, unsigned flags, int writable)
{
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    simstore *s = NULL;
    int err = 0;
    const char *p = PyBytes_AS_STRING(bytes);
    PyObject *recovery = NULL;
    if (flags & SIMSTORE_OPEN_WRITE) {
        if (recover_for_write(path, p, &recovery) < 0) {
            Py_DECREF(bytes);
            return NULL;
        }
    } else {
        recovery = Py_NewRef(Py_None);
    }
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_open(p, flags, &s);
    Py_END_ALLOW_THREADS;
    Py_DECREF(bytes);
    PyObject *store =
        err ? raise_error(err, "open") : (PyObject *)store_new_object(s, path, writable, recovery);
    Py_DECREF(recovery);
    return store;
}

PyDoc_STRVAR(store_open_doc,
             "Store.open(path, write=False, verify=True, auto_compact=True,\n"
             "           huge_pages=False) -> Store\n\n"
             "Open the store at path. write=True takes the writer lock (add, delete,\n"
             "compact); verify=False trusts the disk (no block checksums, no LMDB page\n"
             "checks: `simstore query --no-verify`); auto_compact=False makes a writer\n"
             "compact only on request; huge_pages=True brings the store's files into\n"
             "the page cache 2 MiB at a time as they are first read (`simstore query\n"
             "--huge-pages`). Raises NotFoundError, CorruptError, BusyError, ...\n\n"
             "A writer first applies the changes a server acknowledged in the store's\n"
             "log (live.wal) but had not written into the store when it stopped (a\n"
             "crash, kill -9), as the server's next start would, so that the writer's\n"
             "changes come after them: it warns RecoveryWarning saying how many, and\n"
             "Store.recovery tells (a Recovery, else None). Readers see the store's\n"
             "files as they are.");

static PyObject *store_open(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    (void)cls;
    PyObject *path = NULL;
    if (!PyArg_ParseTuple(args, "O:open", &path))
        return NULL;
    PyObject *kw = kw_copy(kwargs);
    unsigned flags = 0;
    int writable = 0;
    if (!kw || open_flags_from_kw(kw, &flags, &writable) < 0 || kw_done(kw, "open") < 0) {
        Py_XDECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    return open_path(path, flags, writable);
}

/* Feeding documents to a builder. */
typedef struct feeder {
    simstore_builder *b;
    /* insert_if_new(): documents go to this live store's insert-if-new by
     * rule instead of b, and whether each was inserted to `inserted`. */
    simstore_live_query *lq;
    const simstore_near_rule *rule;
    PyObject *inserted;
    simstore_fingerprinter *fpr; /* NULL for a fingerprint-only store */
    simstore_sketch_kind sketch;
    unsigned para_min_words;
    int fingerprint_only;
    uint8_t sketch_buf[SIMSTORE_SKETCH_MAX_BYTES];
    uint64_t *paras;
    size_t paras_cap;
    uint64_t count;
} feeder;

static void source_name(void *ctx, uint64_t source, char *buf, size_t size)
{
    (void)ctx;
    snprintf(buf, size, "docs[%llu]", (unsigned long long)source);
}

/* One document: (id, text_or_fp[, meta]) or {"id", "text" | "fp", "meta"};
 * for a fingerprint-only store, a fingerprint. */
static int feed_one(feeder *f, PyObject *item)
{
    uint64_t index = f->count++;
    if (f->fingerprint_only) {
        uint64_t fp = 0;
        if (fp_from_py(item, &fp) < 0)
            return -1;
        int err = 0;
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_builder_add_fp(f->b, fp);
        Py_END_ALLOW_THREADS;
        return err ? (raise_error(err, "build"), -1) : 0;
    }
    PyObject *idobj = NULL, *textobj = NULL, *fpobj = NULL, *metaobj = NULL;
    if (PyDict_Check(item)) {
        idobj = PyDict_GetItemString(item, "id");
        textobj = PyDict_GetItemString(item, "text");
        fpobj = PyDict_GetItemString(item, "fp");
        metaobj = PyDict_GetItemString(item, "meta");
        if (!idobj || (!textobj && !fpobj) || (textobj && fpobj)) {
            PyErr_Format(PyExc_ValueError,
                         "docs[%llu]: a document dict has an \"id\" and a \"text\" or an \"fp\"",
                         (unsigned long long)index);
            return -1;
        }
    } else if (PyTuple_Check(item) || PyList_Check(item)) {
        Py_ssize_t n = PySequence_Size(item);
        if (n != 2 && n != 3) {
            PyErr_Format(PyExc_ValueError,
                         "docs[%llu]: a document tuple is (id, text_or_fp) or (id, "
                         "text_or_fp, meta)",
                         (unsigned long long)index);
            return -1;
        }
        idobj = PySequence_Fast_GET_ITEM(item, 0);
        PyObject *x = PySequence_Fast_GET_ITEM(item, 1);
        if (PyUnicode_Check(x) || PyBytes_Check(x))
            textobj = x;
        else
            fpobj = x;
        metaobj = n == 3 ? PySequence_Fast_GET_ITEM(item, 2) : NULL;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "docs[%llu]: a document is a tuple (id, text_or_fp[, meta]) or a dict, "
                     "not %.100s",
                     (unsigned long long)index, Py_TYPE(item)->tp_name);
        return -1;
    }
    simstore_doc doc;
    memset(&doc, 0, sizeof doc);
    doc.source = index;
    unsigned flags = 0;
    PyObject *idhold = NULL, *metahold = NULL;
    Py_buffer view;
    view.obj = NULL;
    const char *text = NULL;
    size_t len = 0;
    int rc = -1;
    if (new_id_from_py(idobj, (unsigned long long)index, &doc.id, &doc.id_len, &flags, &idhold) < 0)
        goto done;
    if (metaobj && metaobj != Py_None) {
        metahold = meta_from_py(metaobj);
        if (!metahold) {
            meta_error((unsigned long long)index, idobj);
            goto done;
        }
        doc.meta = PyBytes_AS_STRING(metahold);
        doc.meta_len = (size_t)PyBytes_GET_SIZE(metahold);
    }
    if (textobj) {
        int t = text_from_py(textobj, &view, &text, &len);
        if (t <= 0) {
            if (t == 0)
                PyErr_Format(PyExc_TypeError, "docs[%llu]: text is a str or bytes",
                             (unsigned long long)index);
            goto done;
        }
    } else if (fp_from_py(fpobj, &doc.fp) < 0) {
        goto done;
    }
    int err = 0, inserted = 0;
    size_t nparas = 0;
    Py_BEGIN_ALLOW_THREADS;
    const uint8_t *sketch = NULL;
    if (textobj) {
        if (f->sketch != SIMSTORE_SKETCH_NONE) {
            err = simstore_fingerprint_sketch(f->fpr, text, len, &doc.fp, f->sketch_buf, NULL);
            sketch = f->sketch_buf;
        } else {
            err = simstore_fingerprint_text(f->fpr, text, len, &doc.fp, NULL);
        }
        while (!err && f->para_min_words) {
            err = simstore_paragraph_fingerprints(f->fpr, text, len, f->para_min_words, f->paras,
                                                  f->paras_cap, &nparas);
            if (err || nparas <= f->paras_cap)
                break;
            uint64_t *p = realloc(f->paras, nparas * sizeof *p);
            if (!p) {
                err = SIMSTORE_ENOMEM;
                break;
            }
            f->paras = p;
            f->paras_cap = nparas;
        }
    }
    if (!err && f->lq) {
        simstore_live_doc ld = {doc.id, doc.id_len, doc.fp, doc.meta, doc.meta_len, flags, sketch};
        const simstore_match *m;
        size_t n;
        err = simstore_live_insert_if_new(f->lq, &ld, f->rule, &inserted, &m, &n);
    } else if (!err) {
        doc.flags = flags;
        doc.sketch = sketch;
        doc.paragraphs = f->paras;
        doc.n_paragraphs = nparas;
        err = simstore_builder_add(f->b, &doc);
    }
    Py_END_ALLOW_THREADS;
    if (!err && f->lq && PyList_Append(f->inserted, inserted ? Py_True : Py_False) < 0)
        goto done;
    if (err) {
        char what[64];
        snprintf(what, sizeof what, "docs[%llu]", (unsigned long long)index);
        raise_error(err, what);
        goto done;
    }
    rc = 0;
done:
    if (view.obj)
        PyBuffer_Release(&view);
    Py_XDECREF(idhold);
    Py_XDECREF(metahold);
    return rc;
}

/* Feed `first` (when not NULL, a new reference: stolen) and then every item
 * of iterator `it`; then finish (or abort on failure). */
static int feed_all(feeder *f, PyObject *first, PyObject *it, const char *what)
{
    int rc = 0;
    if (first) {
        rc = feed_one(f, first);
        Py_DECREF(first);
    }
    PyObject *item = NULL;
    while (rc == 0 && (item = PyIter_Next(it)) != NULL) {
        rc = feed_one(f, item);
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
        raise_error(err, what);
        rc = -1;
    }
    return rc;
}

/* A document's text object (borrowed), or NULL when it has none. */
static PyObject *doc_text(PyObject *item)
{
    if (PyDict_Check(item))
        return PyDict_GetItemString(item, "text");
    if ((PyTuple_Check(item) || PyList_Check(item)) && PySequence_Fast_GET_SIZE(item) >= 2) {
        PyObject *x = PySequence_Fast_GET_ITEM(item, 1);
        return PyUnicode_Check(x) || PyBytes_Check(x) ? x : NULL;
    }
    return NULL;
}

static int doc_has_text(PyObject *item)
{
    return doc_text(item) != NULL;
}

/* The first pass of a build with boilerplate: count the lines of every
 * document's text (docs, a list), make the set, record it in f->b and give
 * it to f->fpr. *out receives the set (the caller frees it after the
 * fingerprinter). */
static int boilerplate_pass(const simstore_text_options *to, const simstore_boilerplate_options *o,
                            PyObject *docs, feeder *f, simstore_boilerplate **out)
{
    simstore_boilerplate_counter *c = NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_boilerplate_counter_new(to, o, &c);
    Py_END_ALLOW_THREADS;
    if (err) {
        raise_error(err, "build: boilerplate");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(docs) && !err; i++) {
        PyObject *t = doc_text(PyList_GET_ITEM(docs, i));
        Py_buffer view;
        const char *text = NULL;
        size_t len = 0;
        if (!t)
            continue;
        int got = text_from_py(t, &view, &text, &len);
        if (got < 0) {
            simstore_boilerplate_counter_free(c);
            return -1;
        }
        Py_BEGIN_ALLOW_THREADS;
        err = simstore_boilerplate_counter_add(c, text, len);
        Py_END_ALLOW_THREADS;
        if (view.obj)
            PyBuffer_Release(&view);
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
        raise_error(err, "build: boilerplate");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(store_build_doc,
             "Store.build(path, docs, k=3, **options) -> Store\n\n"
             "Build a new store at path from docs and open it (read-only unless\n"
             "write=True). Each document is a tuple (id, text_or_fp) or (id, text_or_fp,\n"
             "meta), or a dict {\"id\", \"text\" or \"fp\", \"meta\"}: id a str, UTF-8 bytes\n"
             "(given back as a str) or an int in 0..2**63-1 (given back as an int), text a\n"
             "str or UTF-8 bytes (fingerprinted and sketched with the store's text\n"
             "options), fp an int or 16 hex digits, meta any JSON value (stored as\n"
             "compact JSON). With fingerprint_only=True, docs are fingerprints (ints, or\n"
             "a uint64 buffer).\n\n"
             "Ids follow the tool's one rule: 1..511 bytes of UTF-8 without control\n"
             "characters (tab, newline, NUL, ESC, DEL, U+0080..U+009F) or lone\n"
             "surrogates; metadata is what JSON readers read back (no NaN or Infinity,\n"
             "integers in -2**63..2**63-1). One that breaks them raises\n"
             "InvalidArgumentError (a ValueError) naming docs[i], the id and why, and\n"
             "nothing is built.\n\n"
             "Options: k (0..7), tables (0: the cost model), block_bytes, expected,\n"
             "replace (build over an existing store), fingerprint_only, threads,\n"
             "memory_bytes, skip_existing (a repeated id keeps the first), sketch ('auto':\n"
             "minhash256 when the first document has a text, as `simstore build`; or 'none',\n"
             "'minhash16' ... 'minhash256'), paragraph_min_words (0: no paragraph index),\n"
             "boilerplate ('auto' or True: lines held by more than boilerplate_fraction\n"
             "(0.1) of the documents, when there are boilerplate_min_documents (100) or\n"
             "more, are found in a first pass and removed before fingerprinting, as\n"
             "`simstore build --boilerplate auto`; docs are then read into a list),\n"
             "the text options of fingerprint(), and write, verify for the open.");

static PyObject *store_build(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    (void)cls;
    PyObject *path = NULL, *docs = NULL;
    if (!PyArg_ParseTuple(args, "OO:build", &path, &docs))
        return NULL;
    PyObject *kw = kw_copy(kwargs);
    if (!kw)
        return NULL;
    simstore_build_options bo;
    simstore_build_options_init(&bo);
    simstore_text_options to;
    simstore_text_options_init(&to);
    unsigned long long expected = 0, memory = 0;
    int sketch_auto = 1, writable = 0;
    unsigned open_flags = 0;
    PyObject *sk = PyDict_GetItemString(kw, "sketch");
    if (sk && !(PyUnicode_Check(sk) && PyUnicode_CompareWithASCIIString(sk, "auto") == 0))
        sketch_auto = 0;
    else if (sk)
        PyDict_DelItemString(kw, "sketch");
    /* boilerplate: None, False or "none" (none); True or "auto" (found in a
     * first pass over the documents, as `build --boilerplate auto`). */
    int boiler = 0;
    simstore_boilerplate_options bpo;
    simstore_boilerplate_options_init(&bpo);
    PyObject *bpobj = kw_take(kw, "boilerplate");
    if (bpobj && PyUnicode_Check(bpobj)) {
        int choice = 0;
        static const char *const names[] = {"none", "auto", NULL};
        PyObject *tmp = PyDict_New();
        if (!tmp || PyDict_SetItemString(tmp, "boilerplate", bpobj) < 0 ||
            kw_choice(tmp, "boilerplate", names, &choice) < 0) {
            Py_XDECREF(tmp);
            Py_DECREF(bpobj);
            Py_DECREF(kw);
            return NULL;
        }
        Py_DECREF(tmp);
        boiler = choice;
    } else if (bpobj && bpobj != Py_None) {
        boiler = PyObject_IsTrue(bpobj);
    }
    Py_XDECREF(bpobj);
    unsigned long long bp_min_docs = bpo.min_documents;
    if (boiler < 0 || kw_double(kw, "boilerplate_fraction", 1e-6, 0.999999, &bpo.fraction) < 0 ||
        kw_unsigned(kw, "boilerplate_min_documents", 0, UINT64_MAX >> 1, &bp_min_docs) < 0) {
        Py_DECREF(kw);
        return NULL;
    }
    bpo.min_documents = bp_min_docs;
    if (kw_uint(kw, "k", 0, SIMSTORE_MAX_K, &bo.k) < 0 ||
        kw_uint(kw, "tables", 0, 1u << 16, &bo.tables) < 0 ||
        kw_uint(kw, "block_bytes", SIMSTORE_MIN_BLOCK_BYTES, SIMSTORE_MAX_BLOCK_BYTES,
                &bo.block_bytes) < 0 ||
        kw_unsigned(kw, "expected", 0, UINT64_MAX >> 1, &expected) < 0 ||
        kw_unsigned(kw, "memory_bytes", 0, UINT64_MAX >> 1, &memory) < 0 ||
        kw_uint(kw, "threads", 0, 256, &bo.threads) < 0 ||
        kw_bool(kw, "replace", &bo.replace) < 0 ||
        kw_bool(kw, "fingerprint_only", &bo.fingerprint_only) < 0 ||
        kw_bool(kw, "skip_existing", &bo.skip_existing) < 0 ||
        text_options_from_kw(kw, &to, 1) < 0 ||
        open_flags_from_kw(kw, &open_flags, &writable) < 0 || kw_done(kw, "build") < 0) {
        Py_DECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    bo.expected_fps = expected;
    if (memory)
        bo.memory_bytes = memory;
    bo.source_name = source_name;

    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    feeder f;
    memset(&f, 0, sizeof f);
    f.fingerprint_only = bo.fingerprint_only;
    PyObject *it = NULL, *first = NULL, *result = NULL, *all = NULL;
    uint64_t *fps = NULL;
    size_t nfps = 0;
    simstore_boilerplate *bpset = NULL;
    if (boiler && bo.fingerprint_only) {
        PyErr_SetString(PyExc_ValueError,
                        "build(): boilerplate needs texts: not with fingerprint_only");
        goto done;
    }
    /* Boilerplate reads the documents twice: hold them. */
    if (boiler) {
        all = PySequence_List(docs);
        if (!all)
            goto done;
        docs = all;
    }
    /* A fingerprint-only store takes a buffer of fingerprints whole: they
     * are added below with the GIL released. */
    if (bo.fingerprint_only && PyObject_CheckBuffer(docs)) {
        if (fps_from_py(docs, &fps, &nfps) < 0)
            goto done;
    } else if (!(it = PyObject_GetIter(docs))) {
        goto done;
    }
    if (!bo.fingerprint_only) {
        first = PyIter_Next(it);
        if (!first && PyErr_Occurred())
            goto done;
        if (sketch_auto)
            to.sketch =
                first && doc_has_text(first) ? SIMSTORE_SKETCH_DEFAULT : SIMSTORE_SKETCH_NONE;
    } else {
        to.sketch = SIMSTORE_SKETCH_NONE;
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
        Py_XDECREF(first);
        first = NULL;
        raise_error(err, "build");
        goto done;
    }
    f.sketch = to.sketch;
    f.para_min_words = to.paragraph_min_words;
    if (boiler && boilerplate_pass(&to, &bpo, all, &f, &bpset) < 0) {
        Py_BEGIN_ALLOW_THREADS;
        simstore_builder_abort(f.b);
        Py_END_ALLOW_THREADS;
        f.b = NULL;
        goto done;
    }
    if (fps) {
        Py_BEGIN_ALLOW_THREADS;
        for (size_t i = 0; i < nfps && !err; i++)
            err = simstore_builder_add_fp(f.b, fps[i]);
        if (err)
            simstore_builder_abort(f.b);
        else
            err = simstore_builder_finish(f.b);
        Py_END_ALLOW_THREADS;
        f.b = NULL;
        if (err) {
            raise_error(err, "build");
            goto done;
        }
    } else {
        PyObject *fst = first;
        first = NULL;
        if (feed_all(&f, fst, it, "build") < 0)
            goto done;
    }
    result = open_path(path, open_flags, writable);
done:
    Py_XDECREF(first);
    Py_XDECREF(it);
    Py_DECREF(bytes);
    Py_XDECREF(all);
    simstore_fingerprinter_free(f.fpr);
    simstore_boilerplate_free(bpset); /* after the fingerprinter that borrows it */
    free(f.paras);
    free(fps);
    return result;
}

PyDoc_STRVAR(store_add_doc,
             "add(docs, skip_existing=False, threads=0, memory_bytes=0) -> int\n\n"
             "Add documents (as Store.build takes them, ids and metadata under its rules)\n"
             "as a new segment, committed at once; texts are fingerprinted with the\n"
             "store's text options and boilerplate. An id already stored or repeated is\n"
             "InvalidArgumentError (nothing is added) unless skip_existing. Needs a store\n"
             "opened with write=True (else ReadOnlyError). Returns the number of\n"
             "documents now in the store.");

static PyObject *store_add(StoreObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *docs = NULL;
    if (!PyArg_ParseTuple(args, "O:add", &docs))
        return NULL;
    PyObject *kw = kw_copy(kwargs);
    simstore_build_options bo;
    simstore_build_options_init(&bo);
    unsigned long long memory = 0;
    if (!kw || kw_bool(kw, "skip_existing", &bo.skip_existing) < 0 ||
        kw_uint(kw, "threads", 0, 256, &bo.threads) < 0 ||
        kw_unsigned(kw, "memory_bytes", 0, UINT64_MAX >> 1, &memory) < 0 ||
        kw_done(kw, "add") < 0) {
        Py_XDECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    if (memory)
        bo.memory_bytes = memory;
    bo.source_name = source_name;
    PyObject *it = PyObject_GetIter(docs);
    if (!it)
        return NULL;
    if (store_enter(self) < 0) {
        Py_DECREF(it);
        return NULL;
    }
    feeder f;
    memset(&f, 0, sizeof f);
    f.fingerprint_only = self->fingerprint_only;
    simstore_text_options to;
    simstore_get_text_options(self->s, &to);
    f.sketch = to.sketch;
    f.para_min_words = to.paragraph_min_words;
    PyObject *result = NULL;
    int err = 0;
    simstore_stats st;
    Py_BEGIN_ALLOW_THREADS;
    if (!f.fingerprint_only)
        err = store_fingerprinter(self->s, &f.fpr);
    if (!err)
        err = simstore_add_begin(self->s, &bo, &f.b);
    Py_END_ALLOW_THREADS;
    if (err) {
        raise_error(err, "add");
        goto done;
    }
    if (feed_all(&f, NULL, it, "add") < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_get_stats(self->s, &st);
    Py_END_ALLOW_THREADS;
    if (err)
        raise_error(err, "add");
    else
        result = PyLong_FromUnsignedLongLong(st.fingerprint_only ? st.fingerprints : st.documents);
done:
    store_leave(self);
    Py_DECREF(it);
    simstore_fingerprinter_free(f.fpr);
    free(f.paras);
    return result;
}

PyDoc_STRVAR(store_delete_doc,
             "delete(ids) -> int\n\n"
             "Delete the documents with these ids (one id, or an iterable of ids) in one\n"
             "commit; ids not stored are skipped. Any id of 1..511 bytes is looked for\n"
             "(one an older version stored may break today's id rule). Returns the\n"
             "number deleted. Needs a store opened with write=True.");

static PyObject *store_delete(StoreObject *self, PyObject *arg)
{
    PyObject *seq = NULL;
    if (PyUnicode_Check(arg) || PyBytes_Check(arg) || PyLong_Check(arg))
        seq = PyTuple_Pack(1, arg);
    else
        seq = PySequence_List(arg);
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *holds = PyList_New(n);
    const char **ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    size_t *lens = malloc((size_t)(n ? n : 1) * sizeof *lens);
    PyObject *result = NULL;
    if (!holds || !ids || !lens) {
        if (holds)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned flags = 0;
        PyObject *hold = NULL;
        if (id_from_py(PySequence_Fast_GET_ITEM(seq, i), &ids[i], &lens[i], &flags, &hold) < 0)
            goto done;
        PyList_SET_ITEM(holds, i, hold);
    }
    if (store_enter(self) < 0)
        goto done;
    uint64_t deleted = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_delete(self->s, ids, lens, (size_t)n, &deleted, NULL, NULL);
    Py_END_ALLOW_THREADS;
    store_leave(self);
    if (err)
        raise_error(err, "delete");
    else
        result = PyLong_FromUnsignedLongLong(deleted);
done:
    free(ids);
    free(lens);
    Py_XDECREF(holds);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(store_compact_doc,
             "compact() -> None\n\nRewrite every segment into one holding only live "
             "fingerprints (write=True).");

static PyObject *store_compact(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (store_enter(self) < 0)
        return NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_compact(self->s, NULL);
    Py_END_ALLOW_THREADS;
    store_leave(self);
    if (err)
        return raise_error(err, "compact");
    Py_RETURN_NONE;
}

/* The distance of a call: None for the store's k. Any k in
 * 0..SIMSTORE_MAX_K is answered (above the store's k by the slower path);
 * one out of it is RangeError, whichever side of the range, as the
 * library's error for a k above SIMSTORE_MAX_K. */
static int k_from_py(StoreObject *self, PyObject *kobj, unsigned *k)
{
    *k = self->k;
    if (!kobj || kobj == Py_None)
        return 0;
    PyObject *ix = PyNumber_Index(kobj);
    if (!ix)
        return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(ix);
        return -1;
    }
    if (overflow || v < 0 || v > SIMSTORE_MAX_K) {
        raise_code(SIMSTORE_ERANGE,
                   PyUnicode_FromFormat("k must be a distance in 0..%d (above the store's k, %u, "
                                        "answered by a slower path), not %R",
                                        SIMSTORE_MAX_K, self->k, ix));
        Py_DECREF(ix);
        return -1;
    }
    Py_DECREF(ix);
    *k = (unsigned)v;
    return 0;
}

static PyObject *match_to_py(const simstore_match *m)
{
    PyObject *items[6] = {
        id_to_py(m->id, m->id_len, m->flags), PyLong_FromUnsignedLongLong(m->fp),
        PyLong_FromUnsignedLong(m->distance), similarity_to_py(m->similarity),
        meta_to_py(m->meta, m->meta_len),     PyLong_FromUnsignedLongLong(m->insertion)};
    return structseq(&MatchType, items, 6);
}

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

static PyObject *match_item(const void *base, size_t i)
{
    return match_to_py((const simstore_match *)base + i);
}

static PyObject *paragraph_match_item(const void *base, size_t i)
{
    const simstore_paragraph_match *m = (const simstore_paragraph_match *)base + i;
    PyObject *items[6] = {id_to_py(m->id, m->id_len, m->flags),
                          PyLong_FromSize_t(m->shared),
                          PyLong_FromSize_t(m->of),
                          PyFloat_FromDouble(m->fraction),
                          PyLong_FromUnsignedLongLong(m->fp),
                          meta_to_py(m->meta, m->meta_len)};
    return structseq(&ParagraphMatchType, items, 6);
}

PyDoc_STRVAR(store_query_doc,
             "query(q, k=None, meta=False) -> list of Match\n\n"
             "Every document within distance k (None: the store's k) of q: a fingerprint\n"
             "(int) or a text (str or bytes, fingerprinted and sketched as the store's\n"
             "documents were). Matches (id, fp, distance, similarity, meta, insertion)\n"
             "come sorted by distance, then id bytes, exactly as `simstore query` gives\n"
             "them; meta=True also reads each document's metadata. k may exceed the\n"
             "store's k up to 7: as exact, each table probed at every prefix near the\n"
             "query's (slower); a k outside 0..7 raises RangeError.");

static PyObject *store_query(StoreObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *qobj = NULL, *kobj = NULL;
    int meta = 0;
    unsigned k = 0;
    if (!PyArg_ParseTuple(args, "O|O:query", &qobj, &kobj) ||
        kw_positional(kwargs, "k", &kobj) < 0 || kw_flag(kwargs, "meta", &meta) < 0 ||
        kw_only(kwargs, "query", "k", "meta", NULL) < 0 || k_from_py(self, kobj, &k) < 0)
        return NULL;
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    uint64_t fp = 0;
    int t = text_from_py(qobj, &view, &text, &len);
    if (t < 0 || (t == 0 && fp_from_py(qobj, &fp) < 0))
        return NULL;
    PyObject *result = NULL;
    if (store_enter(self) < 0)
        goto done;
    qslot *sl = NULL;
    const simstore_match *m = NULL;
    size_t n = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = slot_take(self, meta, &sl);
    if (!err && t && !sl->fpr)
        err = store_fingerprinter(self->s, &sl->fpr);
    if (!err && t)
        err = simstore_query_text(sl->q, sl->fpr, text, len, k, NULL, &m, &n);
    else if (!err)
        err = simstore_query_fp(sl->q, fp, k, &m, &n);
    Py_END_ALLOW_THREADS;
    if (err) {
        raise_error(err, "query");
    } else {
        result = list_of(n, match_item, m);
    }
    if (sl)
        slot_give(self, meta, sl);
    store_leave(self);
done:
    if (view.obj)
        PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(store_fingerprint_doc,
             "fingerprint(text) -> int\n\n"
             "The fingerprint of a text as the store's documents are made: with its text\n"
             "options and without its boilerplate lines (`simstore fingerprint --store`).");

static PyObject *store_fingerprint(StoreObject *self, PyObject *textobj)
{
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    if (text_arg(textobj, &view, &text, &len, "fingerprint") < 0)
        return NULL;
    PyObject *result = NULL;
    if (store_enter(self) < 0)
        goto done;
    qslot *sl = NULL;
    uint64_t fp = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = slot_take(self, 0, &sl);
    if (!err && !sl->fpr)
        err = store_fingerprinter(self->s, &sl->fpr);
    if (!err)
        err = simstore_fingerprint_text(sl->fpr, text, len, &fp, NULL);
    Py_END_ALLOW_THREADS;
    if (sl)
        slot_give(self, 0, sl);
    store_leave(self);
    if (err)
        raise_error(err, "fingerprint");
    else
        result = PyLong_FromUnsignedLongLong(fp);
done:
    if (view.obj)
        PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(store_query_paragraphs_doc,
             "query_paragraphs(text, k=None, min_fraction=0.0, meta=False)\n"
             "    -> list of ParagraphMatch\n\n"
             "The stored documents sharing near-duplicate paragraphs with a text, in a\n"
             "store built with paragraph_min_words (`simstore query --paragraphs`):\n"
             "ParagraphMatch(id, shared, of, fraction, fp, meta), `shared` of the text's\n"
             "`of` paragraphs having one of the document's within k; those with a\n"
             "fraction of at least min_fraction, larger fractions first, then by id.");

static PyObject *store_query_paragraphs(StoreObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *textobj = NULL, *kobj = NULL;
    if (!PyArg_ParseTuple(args, "O|O:query_paragraphs", &textobj, &kobj))
        return NULL;
    PyObject *kw = kw_copy(kwargs);
    if (!kw)
        return NULL;
    PyObject *kwk = kw_take(kw, "k");
    double min_fraction = 0;
    int meta = 0;
    unsigned k = 0;
    int bad = kw_double(kw, "min_fraction", 0, 1, &min_fraction) < 0 ||
              kw_bool(kw, "meta", &meta) < 0 || kw_done(kw, "query_paragraphs") < 0;
    if (!bad && kwk && kobj) {
        PyErr_SetString(PyExc_TypeError, "query_paragraphs() got k twice");
        bad = 1;
    }
    if (!bad)
        bad = k_from_py(self, kobj ? kobj : kwk, &k) < 0;
    Py_XDECREF(kwk);
    Py_DECREF(kw);
    if (bad)
        return NULL;
    Py_buffer view;
    const char *text = NULL;
    size_t len = 0;
    if (text_arg(textobj, &view, &text, &len, "query_paragraphs") < 0)
        return NULL;
    PyObject *result = NULL;
    if (store_enter(self) < 0)
        goto done;
    simstore_text_options to;
    simstore_get_text_options(self->s, &to);
    qslot *sl = NULL;
    const simstore_paragraph_match *m = NULL;
    size_t n = 0, nfps = 0, cap = 64;
    uint64_t *fps = NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = slot_take(self, meta, &sl);
    if (!err && !sl->fpr)
        err = store_fingerprinter(self->s, &sl->fpr);
    while (!err) {
        uint64_t *p = realloc(fps, cap * sizeof *p);
        if (!p) {
            err = SIMSTORE_ENOMEM;
            break;
        }
        fps = p;
        err = simstore_paragraph_fingerprints(sl->fpr, text, len, to.paragraph_min_words, fps, cap,
                                              &nfps);
        if (err || nfps <= cap)
            break;
        cap = nfps;
    }
    if (!err)
        err = simstore_query_paragraphs(sl->q, fps, nfps, k, min_fraction, &m, &n);
    Py_END_ALLOW_THREADS;
    free(fps);
    if (err) {
        raise_error(err, "query_paragraphs");
    } else {
        result = list_of(n, paragraph_match_item, m);
    }
    if (sl)
        slot_give(self, meta, sl);
    store_leave(self);
done:
    if (view.obj)
        PyBuffer_Release(&view);
    return result;
}

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
        collected *r = collect_new(&b->c);
        if (!r)
            return SIMSTORE_ENOMEM;
        r->a_off = collect_string(&b->c, matches[i].id, matches[i].id_len);
        r->a_len = matches[i].id_len;
        r->a_flags = matches[i].flags;
        r->x = matches[i].fp;
        r->distance = matches[i].distance;
        r->similarity = matches[i].similarity;
        if (b->c.failed)
            return SIMSTORE_ENOMEM;
    }
    b->lims[index + 1] = (int64_t)b->c.n;
    return 0;
}

/* The texts of a batch: fingerprinted (and sketched, when the store keeps
 * sketches) as the store's documents, with the GIL released. texts is a
 * PySequence_Fast of str or bytes; *fps and *sketches are malloc'ed. */
static int batch_texts(StoreObject *self, PyObject *texts, uint64_t **fps, uint8_t **sketches,
                       size_t *n)
{
    size_t count = (size_t)PySequence_Fast_GET_SIZE(texts);
    const char **ptrs = malloc((count ? count : 1) * sizeof *ptrs);
    size_t *lens = malloc((count ? count : 1) * sizeof *lens);
    simstore_text_options to;
    simstore_get_text_options(self->s, &to);
    size_t sk_bytes = simstore_sketch_bytes(to.sketch);
    *fps = malloc((count ? count : 1) * sizeof **fps);
    *sketches = sk_bytes ? malloc((count ? count : 1) * sk_bytes) : NULL;
    int rc = -1;
    if (!ptrs || !lens || !*fps || (sk_bytes && !*sketches)) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(texts, (Py_ssize_t)i);
        if (PyUnicode_Check(t)) {
            Py_ssize_t len = 0;
            if (!(ptrs[i] = PyUnicode_AsUTF8AndSize(t, &len)))
                goto done;
            lens[i] = (size_t)len;
        } else if (PyBytes_Check(t)) {
            ptrs[i] = PyBytes_AS_STRING(t);
            lens[i] = (size_t)PyBytes_GET_SIZE(t);
        } else {
            PyErr_Format(PyExc_TypeError,
                         "query_batch() takes fingerprints or texts, not a mix (item %zu is "
                         "a %.100s)",
                         i, Py_TYPE(t)->tp_name);
            goto done;
        }
    }
    qslot *sl = NULL;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = slot_take(self, 0, &sl);
    if (!err && !sl->fpr)
        err = store_fingerprinter(self->s, &sl->fpr);
    for (size_t i = 0; i < count && !err; i++) {
        if (sk_bytes)
            err = simstore_fingerprint_sketch(sl->fpr, ptrs[i], lens[i], &(*fps)[i],
                                              *sketches + i * sk_bytes, NULL);
        else
            err = simstore_fingerprint_text(sl->fpr, ptrs[i], lens[i], &(*fps)[i], NULL);
    }
    Py_END_ALLOW_THREADS;
    if (sl)
        slot_give(self, 0, sl);
    if (err) {
        raise_error(err, "query_batch");
        goto done;
    }
    *n = count;
    rc = 0;
done:
    free(ptrs);
    free(lens);
    if (rc) {
        free(*fps);
        free(*sketches);
        *fps = NULL;
        *sketches = NULL;
    }
    return rc;
}

PyDoc_STRVAR(store_query_batch_doc,
             "query_batch(queries, k=None, threads=0, similarity=False)\n"
             "    -> (lims, ids, distances[, similarities])\n\n"
             "Answer many queries at once through the batch path (sorted probes and merge\n"
             "scans: `simstore query --queries`). queries: fingerprints (a buffer of\n"
             "64-bit integers such as a numpy uint64 array, or an iterable of ints), or a\n"
             "sequence of texts (str or bytes, fingerprinted and sketched as the store's\n"
             "documents). The answer is FAISS range_search's layout: the matches of query\n"
             "i are ids[lims[i]:lims[i+1]] with distances[lims[i]:lims[i+1]], in the order\n"
             "query() gives them; lims (n + 1, int64), distances (int32) and, with\n"
             "similarity=True, similarities (float64, NaN when unknown: queries by\n"
             "fingerprint) are numpy arrays when numpy imports (lists otherwise), ids a\n"
             "list (the fingerprints in a fingerprint-only store).");

static PyObject *store_query_batch(StoreObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *fpsobj = NULL, *kobj = NULL;
    unsigned threads = 0;
    unsigned k = 0;
    int with_similarity = 0;
    PyObject *kw = kw_copy(kwargs);
    if (!kw)
        return NULL;
    PyObject *kwk = kw_take(kw, "k");
    int bad = !PyArg_ParseTuple(args, "O|O:query_batch", &fpsobj, &kobj) ||
              kw_uint(kw, "threads", 0, 256, &threads) < 0 ||
              kw_bool(kw, "similarity", &with_similarity) < 0 || kw_done(kw, "query_batch") < 0;
    if (!bad && kwk && kobj) {
        PyErr_SetString(PyExc_TypeError, "query_batch() got k twice");
        bad = 1;
    }
    if (!bad)
        bad = k_from_py(self, kobj ? kobj : kwk, &k) < 0;
    Py_XDECREF(kwk);
    Py_DECREF(kw);
    if (bad)
        return NULL;
    uint64_t *fps = NULL;
    uint8_t *sketches = NULL;
    size_t n = 0;
    batch_ctx b;
    memset(&b, 0, sizeof b);
    PyObject *result = NULL, *lims = NULL, *ids = NULL, *dists = NULL, *sims = NULL;
    int32_t *d = NULL;
    double *sim = NULL;
    if (store_enter(self) < 0)
        return NULL;
    /* Texts: a list or tuple whose first item is a str or bytes. */
    int texts = 0;
    if ((PyList_Check(fpsobj) || PyTuple_Check(fpsobj)) && PySequence_Size(fpsobj) > 0) {
        PyObject *first = PySequence_GetItem(fpsobj, 0);
        texts = first && (PyUnicode_Check(first) || PyBytes_Check(first));
        Py_XDECREF(first);
    }
    if (texts) {
        PyObject *seq = PySequence_Fast(fpsobj, "query_batch() takes a sequence of texts");
        int rc = seq ? batch_texts(self, seq, &fps, &sketches, &n) : -1;
        Py_XDECREF(seq);
        if (rc < 0)
            goto done;
    } else if (fps_from_py(fpsobj, &fps, &n) < 0) {
        goto done;
    }
    b.lims = calloc(n + 1, sizeof *b.lims);
    if (!b.lims) {
        PyErr_NoMemory();
        goto done;
    }
    simstore_batch_options o;
    simstore_batch_options_init(&o);
    o.threads = threads;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_query_batch_sketches(self->s, fps, sketches, n, k, &o, batch_cb, &b);
    Py_END_ALLOW_THREADS;
    if (err) {
        raise_error(err, "query_batch");
        goto done;
    }
    d = malloc((b.c.n ? b.c.n : 1) * sizeof *d);
    sim = malloc((b.c.n ? b.c.n : 1) * sizeof *sim);
    ids = PyList_New((Py_ssize_t)b.c.n);
    if (!d || !sim || !ids) {
        if (ids)
            PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < b.c.n; i++) {
        const collected *r = &b.c.recs[i];
        d[i] = (int32_t)r->distance;
        sim[i] = r->similarity < 0 ? Py_NAN : r->similarity;
        PyObject *id = r->a_off == SIZE_MAX ? PyLong_FromUnsignedLongLong(r->x)
                                            : collected_id(&b.c, r->a_off, r->a_len, r->a_flags);
        if (!id)
            goto done;
        PyList_SET_ITEM(ids, (Py_ssize_t)i, id);
    }
    lims = array_from(b.lims, n + 1, 8, 1);
    dists = lims ? array_from(d, b.c.n, 4, 1) : NULL;
    sims = dists && with_similarity ? array_from(sim, b.c.n, 8, 2) : NULL;
    if (dists && !with_similarity)
        result = PyTuple_Pack(3, lims, ids, dists);
    else if (sims)
        result = PyTuple_Pack(4, lims, ids, dists, sims);
done:
    store_leave(self);
    Py_XDECREF(lims);
    Py_XDECREF(ids);
    Py_XDECREF(dists);
    Py_XDECREF(sims);
    free(d);
    free(sim);
    free(b.lims);
    free(fps);
    free(sketches);
    collector_free(&b.c);
    return result;
}

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
    collected *r = collect_new(&g->c);
    if (!r)
        return SIMSTORE_ENOMEM;
    r->a_off = collect_string(&g->c, doc->id, doc->id_len);
    r->a_len = doc->id_len;
    r->a_flags = doc->flags;
    r->b_off = collect_string(&g->c, doc->meta, doc->meta_len);
    r->b_len = doc->meta_len;
    r->c_off = collect_string(&g->c, (const char *)doc->sketch, doc->sketch_bytes);
    r->c_len = doc->sketch_bytes;
    r->x = doc->fp;
    r->y = doc->segment;
    r->z = doc->insertion;
    return g->c.failed ? SIMSTORE_ENOMEM : 0;
}

PyDoc_STRVAR(store_get_doc, "get(id) -> Document or None\n\n"
                            "The document with this id (id, fp, meta, segment, insertion), as\n"
                            "`simstore get` gives it, or None when there is none. Any id of\n"
                            "1..511 bytes is looked for (as delete()).");

static PyObject *store_get(StoreObject *self, PyObject *idobj)
{
    const char *id = NULL;
    size_t len = 0;
    unsigned flags = 0;
    PyObject *hold = NULL, *result = NULL;
    if (id_from_py(idobj, &id, &len, &flags, &hold) < 0)
        return NULL;
    get_ctx g;
    memset(&g, 0, sizeof g);
    if (store_enter(self) < 0)
        goto done;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_get(self->s, &id, &len, 1, get_cb, &g);
    Py_END_ALLOW_THREADS;
    store_leave(self);
    if (err) {
        raise_error(err, "get");
    } else if (g.missing || g.c.n == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        const collected *r = &g.c.recs[0];
        PyObject *items[6] = {
            collected_id(&g.c, r->a_off, r->a_len, r->a_flags),
            PyLong_FromUnsignedLongLong(r->x),
            meta_to_py(r->b_off == SIZE_MAX ? NULL : g.c.arena + r->b_off, r->b_len),
            PyLong_FromUnsignedLongLong(r->y),
            PyLong_FromUnsignedLongLong(r->z),
            collected_bytes(&g.c, r->c_off, r->c_len)};
        result = structseq(&DocumentType, items, 6);
    }
done:
    collector_free(&g.c);
    Py_XDECREF(hold);
    return result;
}

PyDoc_STRVAR(store_documents_doc,
             "documents(order='id', memory_bytes=0) -> iterator of Document\n\n"
             "Every live document, from one committed state, in id byte order or\n"
             "(order='insertion') in the order they were inserted: `simstore export`.\n"
             "Gathered with the GIL released, then iterated. In a fingerprint-only store,\n"
             "the distinct fingerprints (id None).");

static PyObject *store_documents(StoreObject *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "documents() takes keyword arguments only");
        return NULL;
    }
    static const char *const orders[] = {"id", "insertion", NULL};
    int order = 0;
    unsigned long long memory = 0;
    PyObject *kw = kw_copy(kwargs);
    if (!kw || kw_choice(kw, "order", orders, &order) < 0 ||
        kw_unsigned(kw, "memory_bytes", 0, UINT64_MAX >> 1, &memory) < 0 ||
        kw_done(kw, "documents") < 0) {
        Py_XDECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    simstore_scan_options o;
    simstore_scan_options_init(&o);
    if (memory)
        o.memory_bytes = memory;
    if (store_enter(self) < 0)
        return NULL;
    get_ctx g;
    memset(&g, 0, sizeof g);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_export(self->s, &o, order ? SIMSTORE_EXPORT_BY_INSERTION : 0, get_cb, &g);
    Py_END_ALLOW_THREADS;
    store_leave(self);
    PyObject *list = NULL, *it = NULL;
    if (err) {
        raise_error(err, "documents");
        goto done;
    }
    list = PyList_New((Py_ssize_t)g.c.n);
    for (size_t i = 0; list && i < g.c.n; i++) {
        const collected *r = &g.c.recs[i];
        PyObject *items[6] = {
            collected_id(&g.c, r->a_off, r->a_len, r->a_flags),
            PyLong_FromUnsignedLongLong(r->x),
            meta_to_py(r->b_off == SIZE_MAX ? NULL : g.c.arena + r->b_off, r->b_len),
            PyLong_FromUnsignedLongLong(r->y),
            PyLong_FromUnsignedLongLong(r->z),
            collected_bytes(&g.c, r->c_off, r->c_len)};
        PyObject *x = structseq(&DocumentType, items, 6);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, x);
    }
    if (list)
        it = PyObject_GetIter(list);
done:
    Py_XDECREF(list);
    collector_free(&g.c);
    return it;
}

PyDoc_STRVAR(store_replaced_doc,
             "replaced() -> bool\n\n"
             "Whether the path now names another store than the one opened (a build with\n"
             "replace=True swapped one in) or nothing: reopen to follow it.");

static PyObject *store_replaced(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (store_enter(self) < 0)
        return NULL;
    int r = simstore_replaced(self->s);
    store_leave(self);
    return PyBool_FromLong(r);
}

/* A new record holding two ids (a and b), or NULL when out of memory. */
static collected *collect_two(collector *c, const char *a, size_t a_len, unsigned a_flags,
                              const char *b, size_t b_len, unsigned b_flags)
{
    collected *r = collect_new(c);
    if (!r)
        return NULL;
    r->a_off = collect_string(c, a, a_len);
    r->a_len = a_len;
    r->a_flags = a_flags;
    r->b_off = collect_string(c, b, b_len);
    r->b_len = b_len;
    r->b_flags = b_flags;
    return r;
}

static int pair_cb(void *ctx, const simstore_pair *p)
{
    collector *c = ctx;
    collected *r =
        collect_two(c, p->id_a, p->id_a_len, p->flags_a, p->id_b, p->id_b_len, p->flags_b);
    if (!r)
        return SIMSTORE_ENOMEM;
    r->x = p->fp_a;
    r->y = p->fp_b;
    r->distance = p->distance;
    r->similarity = p->similarity;
    return c->failed ? SIMSTORE_ENOMEM : 0;
}

static int scan_options_from_kw(StoreObject *self, PyObject *kw, simstore_scan_options *o)
{
    simstore_scan_options_init(o);
    unsigned long long memory = 0;
    PyObject *kobj = kw_take(kw, "k");
    /* k=None keeps the scans' default (the near-duplicate setting's k on a
     * store that keeps sketches and is filtered by similarity, else the
     * store's k: simstore_scan_options). */
    int rc = kobj && kobj != Py_None ? k_from_py(self, kobj, &o->k) : 0;
    Py_XDECREF(kobj);
    if (rc < 0 || kw_uint(kw, "threads", 0, 256, &o->threads) < 0 ||
        kw_unsigned(kw, "memory_bytes", 0, UINT64_MAX >> 1, &memory) < 0 ||
        kw_double(kw, "min_similarity", 0, 1, &o->min_similarity) < 0)
        return -1;
    if (memory)
        o->memory_bytes = memory;
    return 0;
}

/* An iterator over what a scan collected: each record made into a `type`
 * of n fields by make (new references, NULL where one failed). */
typedef void (*make_fields_fn)(const collector *c, const collected *r, PyObject **items);

static PyObject *collected_iter(const collector *c, PyTypeObject *type, int n, make_fields_fn make)
{
    PyObject *list = PyList_New((Py_ssize_t)c->n);
    for (size_t i = 0; list && i < c->n; i++) {
        PyObject *items[8];
        make(c, &c->recs[i], items);
        PyObject *x = structseq(type, items, n);
        if (!x) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, x);
    }
    PyObject *it = list ? PyObject_GetIter(list) : NULL;
    Py_XDECREF(list);
    return it;
}

/* A Pair: a, b, distance, fp_a, fp_b, similarity. */
static void make_pair(const collector *c, const collected *r, PyObject **items)
{
    items[0] = collected_id(c, r->a_off, r->a_len, r->a_flags);
    items[1] = collected_id(c, r->b_off, r->b_len, r->b_flags);
    items[2] = PyLong_FromUnsignedLong(r->distance);
    items[3] = PyLong_FromUnsignedLongLong(r->x);
    items[4] = PyLong_FromUnsignedLongLong(r->y);
    items[5] = similarity_to_py(r->similarity);
}

/* A ClusterMember: cluster, id, kept, distance, fp, cluster_fp, similarity. */
static void make_member(const collector *c, const collected *r, PyObject **items)
{
    items[0] = collected_id(c, r->a_off, r->a_len, r->a_flags);
    items[1] = collected_id(c, r->b_off, r->b_len, r->b_flags);
    items[2] = PyBool_FromLong(r->kept);
    items[3] = PyLong_FromUnsignedLong(r->distance);
    items[4] = PyLong_FromUnsignedLongLong(r->x);
    items[5] = PyLong_FromUnsignedLongLong(r->y);
    items[6] = similarity_to_py(r->similarity);
}

PyDoc_STRVAR(store_pairs_doc,
             "pairs(k=None, by_fingerprint=False, min_similarity=None, threads=0,\n"
             "      memory_bytes=0) -> iterator of Pair\n\n"
             "Every unordered pair of stored documents within distance k (up to 7,\n"
             "above the store's k joined in memory or through sorted runs within\n"
             "memory_bytes) whose estimated similarity is at least min_similarity, each\n"
             "once, by distance, then a, then b. Defaults (None), as the CLI's: on a\n"
             "store that keeps sketches and without k, the near-duplicate setting\n"
             "(k=7, min_similarity=0.9); else the store's k, no similarity filter:\n"
             "`simstore pairs STORE`. Pairs (a, b, distance, fp_a, fp_b, similarity)\n"
             "are gathered with the GIL released, then iterated.");

static PyObject *store_pairs(StoreObject *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "pairs() takes keyword arguments only");
        return NULL;
    }
    PyObject *kw = kw_copy(kwargs);
    simstore_scan_options o;
    int by_fp = 0;
    if (!kw || scan_options_from_kw(self, kw, &o) < 0 ||
        kw_bool(kw, "by_fingerprint", &by_fp) < 0 || kw_done(kw, "pairs") < 0) {
        Py_XDECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    if (store_enter(self) < 0)
        return NULL;
    collector c;
    memset(&c, 0, sizeof c);
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_pairs(self->s, &o, by_fp ? SIMSTORE_PAIRS_BY_FINGERPRINT : 0, pair_cb, &c);
    Py_END_ALLOW_THREADS;
    store_leave(self);
    PyObject *it = err ? raise_error(err, "pairs") : collected_iter(&c, &PairType, 6, make_pair);
    collector_free(&c);
    return it;
}

static int member_cb(void *ctx, const simstore_cluster_member *m)
{
    collector *c = ctx;
    collected *r =
        collect_two(c, m->cluster, m->cluster_len, m->cluster_flags, m->id, m->id_len, m->flags);
    if (!r)
        return SIMSTORE_ENOMEM;
    r->x = m->fp;
    r->y = m->cluster_fp;
    r->kept = m->kept;
    r->distance = m->distance;
    r->similarity = m->similarity;
    return c->failed ? SIMSTORE_ENOMEM : 0;
}

static const char *const mode_names[] = {"components", "star", NULL};
static const char *const keep_names[] = {"first", "min_id", "min_key", "max_key", NULL};

/* The key rules: the caller's key(meta) -> number or None, called with the
 * GIL taken back from the thread that runs simstore_clusters(). After an
 * exception no more calls are made; it is raised once the clustering ends. */
typedef struct key_ctx {
    PyObject *fn;
    int failed;
} key_ctx;

static int key_cb(void *ctx, const char *meta, size_t meta_len, double *key)
{
    key_ctx *k = ctx;
    int rc = 0;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!k->failed) {
        PyObject *m = meta_to_py(meta, meta_len);
        PyObject *r = m ? PyObject_CallOneArg(k->fn, m) : NULL;
        if (!r) {
            k->failed = 1;
        } else if (r != Py_None) {
            double d = PyFloat_AsDouble(r);
            if (d == -1.0 && PyErr_Occurred())
                k->failed = 1;
            else {
                *key = d;
                rc = 1;
            }
        }
        Py_XDECREF(m);
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
    return rc;
}

PyDoc_STRVAR(store_clusters_doc,
             "clusters(k=None, mode='components', keep='first', singletons=False,\n"
             "         min_similarity=None, threads=0, memory_bytes=0)\n"
             "    -> iterator of ClusterMember\n\n"
             "The store's near-duplicate clusters at distance k (and min_similarity;\n"
             "defaults as pairs()), as `simstore clusters`:\n"
             "one ClusterMember (cluster, id, kept, distance, fp, cluster_fp, similarity)\n"
             "per clustered document, clusters in the byte order of their kept document's\n"
             "id, each kept document first. mode 'components' (connected components) or\n"
             "'star'; keep 'first' (inserted first), 'min_id', or 'min_key' / 'max_key'\n"
             "with key, a function of a document's metadata (parsed JSON, or None)\n"
             "returning a number or None (documents without one come last; `--keep\n"
             "max-meta FIELD` is key=lambda m: m and m.get(FIELD)); singletons=True also\n"
             "gives each document near no other as a cluster of its own. The documents to\n"
             "drop are the members with kept False.");

static PyObject *store_clusters(StoreObject *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "clusters() takes keyword arguments only");
        return NULL;
    }
    PyObject *kw = kw_copy(kwargs);
    simstore_cluster_options o;
    simstore_cluster_options_init(&o);
    int mode = 0, keep = 0;
    key_ctx kc = {NULL, 0};
    if (!kw || scan_options_from_kw(self, kw, &o.scan) < 0 ||
        kw_choice(kw, "mode", mode_names, &mode) < 0 ||
        kw_choice(kw, "keep", keep_names, &keep) < 0 ||
        kw_bool(kw, "singletons", &o.singletons) < 0) {
        Py_XDECREF(kw);
        return NULL;
    }
    kc.fn = kw_take(kw, "key");
    if (kw_done(kw, "clusters") < 0) {
        Py_XDECREF(kc.fn);
        Py_DECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    if ((keep >= 2) != (kc.fn != NULL && kc.fn != Py_None) ||
        (kc.fn && kc.fn != Py_None && !PyCallable_Check(kc.fn))) {
        PyErr_SetString(PyExc_ValueError, "clusters(): keep='min_key' and 'max_key' take key, "
                                          "a function of a document's metadata, and only they");
        Py_XDECREF(kc.fn);
        return NULL;
    }
    o.mode = mode ? SIMSTORE_CLUSTER_STAR : SIMSTORE_CLUSTER_COMPONENTS;
    static const simstore_keep_rule rules[] = {SIMSTORE_KEEP_FIRST, SIMSTORE_KEEP_MIN_ID,
                                               SIMSTORE_KEEP_MIN_KEY, SIMSTORE_KEEP_MAX_KEY};
    o.keep = rules[keep];
    if (keep >= 2) {
        o.key = key_cb;
        o.key_ctx = &kc;
    }
    if (store_enter(self) < 0) {
        Py_XDECREF(kc.fn);
        return NULL;
    }
    collector c;
    memset(&c, 0, sizeof c);
    simstore_cluster_summary summary;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_clusters(self->s, &o, member_cb, &c, &summary);
    Py_END_ALLOW_THREADS;
    store_leave(self);
    Py_XDECREF(kc.fn);
    PyObject *it = kc.failed ? NULL /* the key function's exception */
                   : err     ? raise_error(err, "clusters")
                             : collected_iter(&c, &MemberType, 7, make_member);
    collector_free(&c);
    return it;
}

/* d[name] = v (stolen); -1 on failure. */
static int dict_put(PyObject *d, const char *name, PyObject *v)
{
    if (!v)
        return -1;
    PyObject *key = PyUnicode_FromString(name);
    int rc = key ? PyDict_SetItem(d, key, v) : -1;
    Py_XDECREF(key);
    Py_DECREF(v);
    return rc;
}

#define PUT_U64(d, name, v) dict_put(d, name, PyLong_FromUnsignedLongLong((unsigned long long)(v)))

static PyObject *text_options_to_py(const simstore_text_options *o)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    int bad = PUT_U64(d, "fp_version", o->version ? o->version : SIMSTORE_FP_VERSION_DEFAULT) < 0 ||
              PUT_U64(d, "shingle", o->shingle_words) < 0 ||
              PUT_U64(d, "cjk_shingle", o->cjk_shingle) < 0 ||
              dict_put(d, "weights", PyUnicode_FromString(weight_names[o->weighting])) < 0 ||
              dict_put(d, "lambda",
                       o->weighting == SIMSTORE_WEIGHT_LENGTH ? PyFloat_FromDouble(o->lambda)
                                                              : Py_NewRef(Py_None)) < 0 ||
              dict_put(d, "cjk", PyUnicode_FromString(cjk_names[o->cjk])) < 0;
    if (bad)
        Py_CLEAR(d);
    return d;
}

static PyObject *boilerplate_to_py(const simstore_boilerplate *bp)
{
    if (!bp)
        Py_RETURN_NONE;
    simstore_boilerplate_info info;
    simstore_boilerplate_get_info(bp, &info);
    return Py_BuildValue("{s:K,s:d,s:K,s:K}", "lines", (unsigned long long)info.lines, "fraction",
                         info.fraction, "documents", (unsigned long long)info.documents,
                         "min_documents", (unsigned long long)info.min_documents);
}

/* The write-ahead log's part of stats(), as `stats --json` names it. */
static PyObject *wal_to_py(const simstore_stats *st)
{
    return Py_BuildValue("{s:K,s:K,s:K,s:O}", "bytes", (unsigned long long)st->wal_bytes,
                         "pending_changes", (unsigned long long)st->wal_pending_records,
                         "torn_bytes", (unsigned long long)st->wal_torn_bytes, "damaged",
                         st->wal_damaged ? Py_True : Py_False);
}

PyDoc_STRVAR(store_stats_doc,
             "stats() -> dict\n\n"
             "Counts and sizes of the store, under the names `simstore stats --json`\n"
             "uses: k, tables, design, block_bytes, fingerprint_only, documents,\n"
             "fingerprints, segments, generation, table_fingerprints, table_bytes,\n"
             "lmdb_bytes (and its parts), block_key_bytes, document_file_bytes,\n"
             "fingerprint_version,\n"
             "text_options, sketch, sketch_bytes_per_document, paragraphs, boilerplate,\n"
             "wal (the write-ahead log a server keeps: bytes, pending_changes (acknowledged,\n"
             "not yet in the store's files), torn_bytes, damaged).");

static PyObject *store_stats(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (store_enter(self) < 0)
        return NULL;
    simstore_stats st;
    simstore_text_options to;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_get_stats(self->s, &st);
    simstore_get_text_options(self->s, &to);
    Py_END_ALLOW_THREADS;
    store_leave(self);
    if (err)
        return raise_error(err, "stats");
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    const char *sk = simstore_sketch_name(st.sketch);
    PyObject *paras = Py_NewRef(Py_None);
    if (st.paragraph_min_words) {
        Py_DECREF(paras);
        paras = Py_BuildValue("{s:I,s:K,s:K,s:K,s:K,s:K}", "min_words", st.paragraph_min_words,
                              "entries", (unsigned long long)st.paragraph_entries, "fingerprints",
                              (unsigned long long)st.paragraph_fps, "segments",
                              (unsigned long long)st.paragraph_segments, "table_fingerprints",
                              (unsigned long long)st.paragraph_table_fps, "table_bytes",
                              (unsigned long long)st.paragraph_table_bytes);
    }
    int bad =
        PUT_U64(d, "k", st.k) < 0 || PUT_U64(d, "tables", st.tables) < 0 ||
        dict_put(d, "design", PyUnicode_FromString(st.design)) < 0 ||
        PUT_U64(d, "block_bytes", st.block_bytes) < 0 ||
        dict_put(d, "fingerprint_only", PyBool_FromLong(st.fingerprint_only)) < 0 ||
        PUT_U64(d, "documents", st.documents) < 0 ||
        PUT_U64(d, "fingerprints", st.fingerprints) < 0 ||
        PUT_U64(d, "segments", st.segments) < 0 || PUT_U64(d, "generation", st.generation) < 0 ||
        PUT_U64(d, "table_fingerprints", st.table_fps) < 0 ||
        PUT_U64(d, "table_bytes", st.table_bytes) < 0 ||
        PUT_U64(d, "lmdb_bytes", st.lmdb_bytes) < 0 ||
        PUT_U64(d, "lmdb_records_bytes", st.lmdb_records_bytes) < 0 ||
        PUT_U64(d, "lmdb_mapping_bytes", st.lmdb_mapping_bytes) < 0 ||
        PUT_U64(d, "lmdb_other_bytes", st.lmdb_other_bytes) < 0 ||
        PUT_U64(d, "lmdb_free_bytes", st.lmdb_free_bytes) < 0 ||
        PUT_U64(d, "block_key_bytes", st.block_key_bytes) < 0 ||
        PUT_U64(d, "document_file_bytes", st.document_file_bytes) < 0 ||
        PUT_U64(d, "fingerprint_version", to.version ? to.version : SIMSTORE_FP_VERSION_DEFAULT) <
            0 ||
        dict_put(d, "text_options", text_options_to_py(&to)) < 0 ||
        dict_put(d, "sketch", PyUnicode_FromString(sk ? sk : "none")) < 0 ||
        PUT_U64(d, "sketch_bytes_per_document", st.sketch_bytes) < 0 ||
        dict_put(d, "paragraphs", paras) < 0 ||
        dict_put(d, "boilerplate", boilerplate_to_py(simstore_get_boilerplate(self->s))) < 0 ||
        dict_put(d, "wal", wal_to_py(&st)) < 0;
    if (bad)
        Py_CLEAR(d);
    return d;
}

PyDoc_STRVAR(store_close_doc,
             "close() -> None\n\nClose the store (also done by `with` and when the object is "
             "freed).\nRaises BusyError while a call on it is running (in another thread, or\n"
             "the key function of clusters()).");

static PyObject *store_close(StoreObject *self, PyObject *unused)
{
    (void)unused;
    simstore *s = NULL;
    int busy = 0;
    pthread_mutex_lock(&self->mu);
    if (self->busy)
        busy = 1;
    else {
        s = self->s;
        self->s = NULL;
    }
    pthread_mutex_unlock(&self->mu);
    if (busy)
        return raise_code(SIMSTORE_EBUSY,
                          PyUnicode_FromString("close: a call on the store is still running"));
    slots_free(self);
    Py_BEGIN_ALLOW_THREADS;
    simstore_close(s);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

static PyObject *store_enter_ctx(StoreObject *self, PyObject *unused)
{
    (void)unused;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *store_exit_ctx(StoreObject *self, PyObject *args)
{
    (void)args;
    PyObject *r = store_close(self, NULL);
    if (!r)
        return NULL;
    Py_DECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *store_get_closed(StoreObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->s == NULL);
}

static PyObject *store_get_path(StoreObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->path);
}

static PyObject *store_get_recovery(StoreObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->recovery);
}

static PyObject *store_get_k(StoreObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLong(self->k);
}

static PyObject *store_repr(StoreObject *self)
{
    return PyUnicode_FromFormat("<simstore.Store %R k=%u%s%s>", self->path, self->k,
                                self->writable ? " write" : "", self->s ? "" : " closed");
}

/* Methods taking (self, args, kwargs), cast through void (*)(void) as the
 * C API's PyCFunction slot requires. */
#define KWMETHOD(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef store_methods[] = {
    {"open", KWMETHOD(store_open), METH_VARARGS | METH_KEYWORDS | METH_CLASS, store_open_doc},
    {"build", KWMETHOD(store_build), METH_VARARGS | METH_KEYWORDS | METH_CLASS, store_build_doc},
    {"query", KWMETHOD(store_query), METH_VARARGS | METH_KEYWORDS, store_query_doc},
    {"query_batch", KWMETHOD(store_query_batch), METH_VARARGS | METH_KEYWORDS,
     store_query_batch_doc},
    {"query_paragraphs", KWMETHOD(store_query_paragraphs), METH_VARARGS | METH_KEYWORDS,
     store_query_paragraphs_doc},
    {"fingerprint", (PyCFunction)store_fingerprint, METH_O, store_fingerprint_doc},
    {"add", KWMETHOD(store_add), METH_VARARGS | METH_KEYWORDS, store_add_doc},
    {"delete", (PyCFunction)store_delete, METH_O, store_delete_doc},
    {"compact", (PyCFunction)store_compact, METH_NOARGS, store_compact_doc},
    {"get", (PyCFunction)store_get, METH_O, store_get_doc},
    {"documents", KWMETHOD(store_documents), METH_VARARGS | METH_KEYWORDS, store_documents_doc},
    {"replaced", (PyCFunction)store_replaced, METH_NOARGS, store_replaced_doc},
    {"pairs", KWMETHOD(store_pairs), METH_VARARGS | METH_KEYWORDS, store_pairs_doc},
    {"clusters", KWMETHOD(store_clusters), METH_VARARGS | METH_KEYWORDS, store_clusters_doc},
    {"stats", (PyCFunction)store_stats, METH_NOARGS, store_stats_doc},
    {"close", (PyCFunction)store_close, METH_NOARGS, store_close_doc},
    {"__enter__", (PyCFunction)store_enter_ctx, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)store_exit_ctx, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef store_getset[] = {
    {"closed", (getter)store_get_closed, NULL, "True once the store is closed", NULL},
    {"path", (getter)store_get_path, NULL, "the path the store was opened at", NULL},
    {"recovery", (getter)store_get_recovery, NULL,
     "a Recovery(applied, torn_bytes, torn_records, torn_name) when opening for writing "
     "applied the changes a stopped server had left in the store's log (live.wal), else None",
     NULL},
    {"k", (getter)store_get_k, NULL,
     "the distance the store's design answers with one probe a table (the default k; "
     "any k up to 7 is answered)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyDoc_STRVAR(store_doc, "A simstore store: made by Store.build() or Store.open(), never directly.\n"
                        "A Store may be shared by threads: queries run in parallel, with the\n"
                        "GIL released.");

static PyTypeObject StoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "simstore.Store",
    .tp_basicsize = sizeof(StoreObject),
    .tp_dealloc = (destructor)store_dealloc,
    .tp_repr = (reprfunc)store_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = store_doc,
    .tp_methods = store_methods,
    .tp_getset = store_getset,
};

/* ---- Insert-if-new: the live store's near-duplicate rule ---------------------- */

PyDoc_STRVAR(insert_if_new_doc,
             "insert_if_new(path, docs, k=None, min_similarity=None) -> list of bool\n\n"
             "Open the store at path as a live store, as `simstore serve` does (its\n"
             "writer lock and its log, live.wal), insert each document of docs in order\n"
             "unless the store (with the documents inserted before it) holds a\n"
             "near-duplicate of it, then write the changes into the store and close.\n"
             "Documents as Store.build() takes them; texts are fingerprinted and\n"
             "sketched with the store's options. Near-duplicates by the library's one\n"
             "rule (simstore.h, \"The near-duplicate rule\"), the one `simstore dedup`\n"
             "and POST /v1/documents with insert-if-new apply: on a store that keeps\n"
             "sketches, within 7 bits at estimated similarity 0.9 or more; without\n"
             "sketches, within the store's k. k and min_similarity set its parts (None:\n"
             "the default; k given alone: by distance alone). Returns, for each\n"
             "document, whether it was inserted. The store must not be open for\n"
             "writing elsewhere (a Store opened with write=True, a server).");

static PyObject *py_insert_if_new(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    PyObject *path = NULL, *docs = NULL, *bytes = NULL;
    if (!PyArg_ParseTuple(args, "OO:insert_if_new", &path, &docs))
        return NULL;
    simstore_near_rule rule;
    simstore_near_rule_init(&rule);
    unsigned long long k = SIMSTORE_NEAR_DEFAULT_K;
    PyObject *kw = kw_copy(kwargs);
    if (!kw || kw_unsigned(kw, "k", 0, SIMSTORE_MAX_K, &k) < 0 ||
        kw_double(kw, "min_similarity", 0, 1, &rule.min_similarity) < 0 ||
        kw_done(kw, "insert_if_new") < 0) {
        Py_XDECREF(kw);
        return NULL;
    }
    Py_DECREF(kw);
    rule.k = (unsigned)k;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    PyObject *it = PyObject_GetIter(docs);
    if (!it) {
        Py_DECREF(bytes);
        return NULL;
    }
    feeder f;
    memset(&f, 0, sizeof f);
    f.rule = &rule;
    f.inserted = PyList_New(0);
    simstore_live *live = NULL;
    simstore_text_options to;
    int err = 0;
    PyObject *result = NULL;
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_live_open(PyBytes_AS_STRING(bytes), NULL, &live);
    if (!err) {
        simstore_get_text_options(simstore_live_store(live), &to);
        err = store_fingerprinter(simstore_live_store(live), &f.fpr);
    }
    if (!err)
        err = simstore_live_query_new(live, 0, &f.lq);
    Py_END_ALLOW_THREADS;
    if (err) {
        raise_error(err, "insert_if_new");
        goto done;
    }
    f.sketch = to.sketch; /* live documents carry no paragraph lists */
    PyObject *item;
    int rc = f.inserted ? 0 : -1;
    while (rc == 0 && (item = PyIter_Next(it)) != NULL) {
        rc = feed_one(&f, item);
        Py_DECREF(item);
    }
    if (rc == 0 && PyErr_Occurred())
        rc = -1;
    /* What was inserted stays (durable in the log) whatever happened: into
     * the store with it. */
    Py_BEGIN_ALLOW_THREADS;
    err = simstore_live_flush(live);
    Py_END_ALLOW_THREADS;
    if (rc == 0 && err)
        raise_error(err, "insert_if_new: flush");
    else if (rc == 0)
        result = Py_NewRef(f.inserted);
done:
    Py_BEGIN_ALLOW_THREADS;
    simstore_live_query_free(f.lq);
    simstore_live_close(live);
    Py_END_ALLOW_THREADS;
    simstore_fingerprinter_free(f.fpr);
    Py_XDECREF(f.inserted);
    Py_DECREF(it);
    Py_DECREF(bytes);
    return result;
}

/* ---- The module ---------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"insert_if_new", KWMETHOD(py_insert_if_new), METH_VARARGS | METH_KEYWORDS, insert_if_new_doc},
    {"fingerprint", KWMETHOD(py_fingerprint), METH_VARARGS | METH_KEYWORDS, fingerprint_doc},
    {"fingerprints", KWMETHOD(py_fingerprints), METH_VARARGS | METH_KEYWORDS, fingerprints_doc},
    {"distance", (PyCFunction)py_distance, METH_VARARGS, distance_doc},
    {"sketch", KWMETHOD(py_sketch), METH_VARARGS | METH_KEYWORDS, sketch_doc},
    {"similarity", (PyCFunction)py_similarity, METH_VARARGS, similarity_doc},
    {"paragraphs", KWMETHOD(py_paragraphs), METH_VARARGS | METH_KEYWORDS, paragraphs_doc},
    {NULL, NULL, 0, NULL}};

PyDoc_STRVAR(module_doc,
             "simstore: a compressed on-disk store of 64-bit simhash fingerprints that\n"
             "answers exact Hamming-distance-k queries (Python bindings of libsimstore).\n\n"
             "Texts: fingerprint(), fingerprints(), sketch(), similarity(), paragraphs(),\n"
             "distance(). Stores: Store.build(), Store.open(), then query(), query_batch(),\n"
             "query_paragraphs(), get(), documents(), pairs(), clusters(), stats(),\n"
             "fingerprint(), add(), delete(), compact(), close(); insert_if_new(), as a\n"
             "server's insert-if-new. Errors: Error and one subclass per library error\n"
             "code (.code). Calls that work release the GIL.\n"
             "Opening for writing after a server stopped applies its logged changes\n"
             "first: RecoveryWarning, Store.recovery (a Recovery).");

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "simstore", module_doc, -1, module_methods, NULL, NULL, NULL, NULL};

typedef struct error_spec {
    int code;
    const char *name;
    PyObject **mixin; /* a built-in exception it also is, or NULL */
} error_spec;

PyMODINIT_FUNC PyInit_simstore(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (PyStructSequence_InitType2(&MatchType, &match_desc) < 0 ||
        PyStructSequence_InitType2(&PairType, &pair_desc) < 0 ||
        PyStructSequence_InitType2(&MemberType, &member_desc) < 0 ||
        PyStructSequence_InitType2(&DocumentType, &document_desc) < 0 ||
        PyStructSequence_InitType2(&ParagraphType, &paragraph_desc) < 0 ||
        PyStructSequence_InitType2(&ParagraphMatchType, &paragraph_match_desc) < 0 ||
        PyStructSequence_InitType2(&RecoveryType, &recovery_desc) < 0 ||
        PyType_Ready(&StoreType) < 0)
        goto fail;
    error_base = PyErr_NewExceptionWithDoc(
        "simstore.Error", "A failure of the simstore library; .code is its error code.", NULL,
        NULL);
    if (!error_base || PyModule_AddObjectRef(m, "Error", error_base) < 0)
        goto fail;
    const error_spec specs[] = {
        {SIMSTORE_ENOTFOUND, "NotFoundError", NULL},
        {SIMSTORE_ECORRUPT, "CorruptError", NULL},
        {SIMSTORE_EVERSION, "VersionError", NULL},
        {SIMSTORE_ENOMEM, "NoMemoryError", &PyExc_MemoryError},
        {SIMSTORE_EIO, "IOFailedError", &PyExc_OSError},
        {SIMSTORE_EFULL, "FullError", NULL},
        {SIMSTORE_EINVAL, "InvalidArgumentError", &PyExc_ValueError},
        {SIMSTORE_EBUSY, "BusyError", NULL},
        {SIMSTORE_ERANGE, "RangeError", &PyExc_ValueError},
        {SIMSTORE_EEXIST, "ExistsError", NULL},
        {SIMSTORE_EREADONLY, "ReadOnlyError", NULL},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char qualified[64], doc[160];
        snprintf(qualified, sizeof qualified, "simstore.%s", specs[i].name);
        snprintf(doc, sizeof doc, "simstore error %d: %s.", specs[i].code,
                 simstore_strerror(specs[i].code));
        PyObject *bases = specs[i].mixin ? PyTuple_Pack(2, error_base, *specs[i].mixin)
                                         : PyTuple_Pack(1, error_base);
        if (!bases)
            goto fail;
        PyObject *cls = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
        Py_DECREF(bases);
        if (!cls)
            goto fail;
        error_by_code[-specs[i].code] = cls;
        if (PyModule_AddObjectRef(m, specs[i].name, cls) < 0)
            goto fail;
    }
    recovery_warning = PyErr_NewExceptionWithDoc(
        "simstore.RecoveryWarning",
        "Warned when opening a store for writing first applied the changes a server had "
        "acknowledged in the store's log (live.wal) but not written into the store before it "
        "stopped (a crash, kill -9), as the server's next start would; Store.recovery says "
        "what was done.",
        PyExc_UserWarning, NULL);
    if (!recovery_warning || PyModule_AddObjectRef(m, "RecoveryWarning", recovery_warning) < 0)
        goto fail;
    if (PyModule_AddObjectRef(m, "Store", (PyObject *)&StoreType) < 0 ||
        PyModule_AddObjectRef(m, "Recovery", (PyObject *)&RecoveryType) < 0 ||
        PyModule_AddObjectRef(m, "Match", (PyObject *)&MatchType) < 0 ||
        PyModule_AddObjectRef(m, "Pair", (PyObject *)&PairType) < 0 ||
        PyModule_AddObjectRef(m, "ClusterMember", (PyObject *)&MemberType) < 0 ||
        PyModule_AddObjectRef(m, "Document", (PyObject *)&DocumentType) < 0 ||
        PyModule_AddObjectRef(m, "Paragraph", (PyObject *)&ParagraphType) < 0 ||
        PyModule_AddObjectRef(m, "ParagraphMatch", (PyObject *)&ParagraphMatchType) < 0 ||
        PyModule_AddStringConstant(m, "__version__", simstore_version_string()) < 0 ||
        PyModule_AddIntConstant(m, "MAX_K", SIMSTORE_MAX_K) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
