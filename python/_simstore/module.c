/* module.c: the extension module simstore._simstore: its state (the Store
 * type and the exception classes, one copy per module object), multi-phase
 * initialisation (Py_mod_exec), the library's error codes as exceptions,
 * and the constants and names the package checks its arguments against. */
#include "internal.h"

#include <stdio.h>

sp_state *sp_module_state(PyObject *module)
{
    return (sp_state *)PyModule_GetState(module);
}

sp_state *sp_class_state(PyTypeObject *cls)
{
    return (sp_state *)PyType_GetModuleState(cls);
}

sp_state *sp_method_state(PyTypeObject *cls, const char *fname, Py_ssize_t nargs, PyObject *kwnames,
                          Py_ssize_t n)
{
    if (nargs != n || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd positional arguments", fname, n);
        return NULL;
    }
    return sp_class_state(cls);
}

/* ---- Errors ----------------------------------------------------------------- */

/* A new exception of library code err with message msg (borrowed) and
 * .code = err. */
static PyObject *error_new(sp_state *st, int err, PyObject *msg)
{
    PyObject *cls = st->error;
    if (err < 0 && -err < SP_N_CODES && st->errors[-err])
        cls = st->errors[-err];
    PyObject *exc = PyObject_CallOneArg(cls, msg);
    PyObject *code = exc ? PyLong_FromLong(err) : NULL;
    if (code) {
        PyObject_SetAttrString(exc, "code", code);
        Py_DECREF(code);
    }
    return exc;
}

PyObject *sp_raise_code(sp_state *st, int err, PyObject *msg)
{
    if (!msg)
        return NULL;
    PyObject *exc = error_new(st, err, msg);
    Py_DECREF(msg);
    if (exc) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}

PyObject *sp_raise_error(sp_state *st, int err, const char *what)
{
    const char *detail = simstore_last_error();
    if (detail && *detail)
        return sp_raise_code(
            st, err, PyUnicode_FromFormat("%s: %s (%s)", what, simstore_strerror(err), detail));
    return sp_raise_code(st, err, PyUnicode_FromFormat("%s: %s", what, simstore_strerror(err)));
}

PyDoc_STRVAR(error_doc, "error(code, message) -> Error\n\n"
                        "A new exception of library error code `code` (its subclass of Error)\n"
                        "with this message and .code = code: what the package raises itself.");

static PyObject *error_fn(PyObject *module, PyObject *args)
{
    int code = 0;
    PyObject *msg = NULL;
    if (!PyArg_ParseTuple(args, "iU:error", &code, &msg))
        return NULL;
    return error_new(sp_module_state(module), code, msg);
}

typedef struct error_spec {
    int code;
    const char *name;
    PyObject *const *mixin; /* a built-in exception it also is, or NULL */
} error_spec;

static const error_spec error_specs[] = {
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

/* simstore.Error and its subclass for each library code, into st and m. */
static int add_errors(PyObject *m, sp_state *st)
{
    st->error = PyErr_NewExceptionWithDoc(
        "simstore.Error", "A failure of the simstore library; .code is its error code.", NULL,
        NULL);
    if (!st->error || PyModule_AddObjectRef(m, "Error", st->error) < 0)
        return -1;
    for (size_t i = 0; i < sizeof error_specs / sizeof error_specs[0]; i++) {
        const error_spec *e = &error_specs[i];
        char qualified[64], doc[160];
        snprintf(qualified, sizeof qualified, "simstore.%s", e->name);
        snprintf(doc, sizeof doc, "simstore error %d: %s.", e->code, simstore_strerror(e->code));
        PyObject *bases =
            e->mixin ? PyTuple_Pack(2, st->error, *e->mixin) : PyTuple_Pack(1, st->error);
        PyObject *cls = bases ? PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL) : NULL;
        Py_XDECREF(bases);
        if (!cls)
            return -1;
        st->errors[-e->code] = cls;
        if (PyModule_AddObjectRef(m, e->name, cls) < 0)
            return -1;
    }
    return 0;
}

/* ---- Names and constants ------------------------------------------------------ */

/* Names of the library's enums, each at its value: the package checks a
 * name against them and passes its index. */
static const char *const weight_names[] = {[SIMSTORE_WEIGHT_TF] = "tf",
                                           [SIMSTORE_WEIGHT_LENGTH] = "length",
                                           [SIMSTORE_WEIGHT_LOG] = "log"};
static const char *const cjk_names[] = {
    [SIMSTORE_CJK_AUTO] = "auto", [SIMSTORE_CJK_FRISO] = "friso", [SIMSTORE_CJK_BIGRAM] = "bigram"};
static const char *const cluster_mode_names[] = {
    [SIMSTORE_CLUSTER_COMPONENTS] = "components", [SIMSTORE_CLUSTER_STAR] = "star"};
static const char *const keep_names[] = {[SIMSTORE_KEEP_FIRST] = "first",
                                         [SIMSTORE_KEEP_MIN_ID] = "min_id",
                                         [SIMSTORE_KEEP_MIN_KEY] = "min_key",
                                         [SIMSTORE_KEEP_MAX_KEY] = "max_key"};

static int add_names(PyObject *m, const char *name, const char *const *names, size_t n)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(names[i]);
        if (!s)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    int rc = t ? PyModule_AddObjectRef(m, name, t) : -1;
    Py_XDECREF(t);
    return rc;
}

#define ADD_NAMES(m, name, names) add_names(m, name, names, sizeof names / sizeof names[0])

static int add_constants(PyObject *m)
{
    /* The sketch kinds as the library spells them, none first. */
    const char *sketch_names[SIMSTORE_SKETCH_MINHASH256 + 1];
    for (int k = 0; k <= SIMSTORE_SKETCH_MINHASH256; k++)
        sketch_names[k] = simstore_sketch_name((simstore_sketch_kind)k);
    static const struct {
        const char *name;
        long value;
    } ints[] = {
        {"MAX_K", SIMSTORE_MAX_K},
        {"FP_VERSION_DEFAULT", SIMSTORE_FP_VERSION_DEFAULT},
        {"FP_VERSION_LATEST", SIMSTORE_FP_VERSION_LATEST},
        {"SHINGLE_MAX", SIMSTORE_SHINGLE_MAX},
        {"PARAGRAPH_MIN_WORDS_MAX", SIMSTORE_PARAGRAPH_MIN_WORDS_MAX},
        {"MIN_BLOCK_BYTES", SIMSTORE_MIN_BLOCK_BYTES},
        {"MAX_BLOCK_BYTES", SIMSTORE_MAX_BLOCK_BYTES},
        {"SKETCH_DEFAULT", SIMSTORE_SKETCH_DEFAULT},
        {"EINVAL", SIMSTORE_EINVAL},
        {"ERANGE", SIMSTORE_ERANGE},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0)
            return -1;
    PyObject *lambda_max = PyFloat_FromDouble(SIMSTORE_LAMBDA_MAX);
    int rc = lambda_max ? PyModule_AddObjectRef(m, "LAMBDA_MAX", lambda_max) : -1;
    Py_XDECREF(lambda_max);
    if (rc < 0 || PyModule_AddStringConstant(m, "__version__", simstore_version_string()) < 0 ||
        ADD_NAMES(m, "WEIGHTS", weight_names) < 0 || ADD_NAMES(m, "CJK_MODES", cjk_names) < 0 ||
        ADD_NAMES(m, "SKETCH_KINDS", sketch_names) < 0 ||
        ADD_NAMES(m, "CLUSTER_MODES", cluster_mode_names) < 0 ||
        ADD_NAMES(m, "KEEP_RULES", keep_names) < 0)
        return -1;
    return 0;
}

/* ---- The module ---------------------------------------------------------------- */

static int module_exec(PyObject *m)
{
    sp_state *st = sp_module_state(m);
    if (add_errors(m, st) < 0)
        return -1;
    st->store_type = (PyTypeObject *)PyType_FromModuleAndSpec(m, &sp_store_spec, NULL);
    if (!st->store_type || PyModule_AddType(m, st->store_type) < 0 ||
        PyModule_AddFunctions(m, sp_text_functions) < 0 ||
        PyModule_AddFunctions(m, sp_feed_functions) < 0 ||
        PyModule_AddFunctions(m, sp_live_functions) < 0 || add_constants(m) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
    sp_state *st = sp_module_state(m);
    Py_VISIT(st->store_type);
    Py_VISIT(st->error);
    for (int i = 0; i < SP_N_CODES; i++)
        Py_VISIT(st->errors[i]);
    return 0;
}

static int module_clear(PyObject *m)
{
    sp_state *st = sp_module_state(m);
    Py_CLEAR(st->store_type);
    Py_CLEAR(st->error);
    for (int i = 0; i < SP_N_CODES; i++)
        Py_CLEAR(st->errors[i]);
    return 0;
}

static void module_free(void *m)
{
    module_clear((PyObject *)m);
}

static PyMethodDef module_functions[] = {{"error", error_fn, METH_VARARGS, error_doc},
                                         {NULL, NULL, 0, NULL}};

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, SP_SLOT(module_exec)}, {0, NULL}};

PyDoc_STRVAR(module_doc,
             "simstore._simstore: the C core of the package simstore (python/_simstore/):\n"
             "libsimstore's calls, taking the arguments the package has checked and giving\n"
             "back plain tuples, bytes and dicts. Use the package: import simstore.");

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,         .m_name = "simstore._simstore", .m_doc = module_doc,
    .m_size = sizeof(sp_state),    .m_methods = module_functions,  .m_slots = module_slots,
    .m_traverse = module_traverse, .m_clear = module_clear,        .m_free = module_free,
};

PyMODINIT_FUNC PyInit__simstore(void);

PyMODINIT_FUNC PyInit__simstore(void)
{
    return PyModuleDef_Init(&module_def);
}
