/* live.c: the module's functions over a store's live side, the one a server
 * (simstore serve) keeps: recover(), which applies the changes a stopped
 * server left in the store's log (live.wal) before a writer opens it, and
 * insert_if_new(), the live store's near-duplicate rule applied to records. */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

PyDoc_STRVAR(recover_doc,
             "recover(path) -> None or (applied, torn_bytes, torn_records, torn_name)\n\n"
             "Apply the changes a live store (a server) acknowledged in path/live.wal but\n"
             "did not write into the store's files before it stopped, as its next start\n"
             "would (simstore_live_recover): None when the store has no log (it was never\n"
             "served live: nothing is made), else what was done. Raises BusyError while a\n"
             "server or a writer holds the store, CorruptError for a damaged log.");

static PyObject *recover(PyObject *module, PyObject *path)
{
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    const char *p = PyBytes_AS_STRING(bytes);
    char wal[PATH_MAX];
    int fits = snprintf(wal, sizeof wal, "%s/live.wal", p) < (int)sizeof wal;
    simstore_live_recovery rec;
    memset(&rec, 0, sizeof rec);
    int err = 0, logged = 0;
    Py_BEGIN_ALLOW_THREADS;
    struct stat st;
    logged = !fits || stat(wal, &st) == 0 || errno != ENOENT;
    if (logged)
        err = simstore_live_recover(p, &rec);
    Py_END_ALLOW_THREADS;
    Py_DECREF(bytes);
    if (err)
        return sp_raise_error(sp_module_state(module), err, "open");
    if (!logged)
        Py_RETURN_NONE;
    rec.torn_name[sizeof rec.torn_name - 1] = '\0';
    PyObject *items[4] = {
        PyLong_FromUnsignedLongLong(rec.applied), PyLong_FromUnsignedLongLong(rec.torn_bytes),
        PyLong_FromUnsignedLongLong(rec.torn_records),
        rec.torn_name[0] ? PyUnicode_DecodeFSDefault(rec.torn_name) : Py_NewRef(Py_None)};
    return sp_tuple(items, 4);
}

PyDoc_STRVAR(insert_if_new_doc,
             "insert_if_new(path, records, rule) -> list of bool\n\n"
             "Open the store at path as a live store, insert each record unless the store\n"
             "holds a near-duplicate of it by the rule (a dict: k, min_similarity; absent:\n"
             "the library's defaults), write the changes into the store and close. Whether\n"
             "each was inserted.");

static PyObject *insert_if_new(PyObject *module, PyObject *args)
{
    sp_state *st = sp_module_state(module);
    PyObject *bytes = NULL, *records = NULL, *ruled = NULL;
    if (!PyArg_ParseTuple(args, "O&OO:insert_if_new", PyUnicode_FSConverter, &bytes, &records,
                          &ruled))
        return NULL;
    simstore_near_rule rule;
    simstore_near_rule_init(&rule);
    PyObject *it = NULL;
    if (sp_opt_uint(ruled, "k", &rule.k) < 0 ||
        sp_opt_double(ruled, "min_similarity", &rule.min_similarity) < 0 ||
        !(it = PyObject_GetIter(records))) {
        Py_DECREF(bytes);
        return NULL;
    }
    sp_feeder f;
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
        err = sp_store_fingerprinter(simstore_live_store(live), &f.fpr);
    }
    if (!err)
        err = simstore_live_query_new(live, 0, &f.lq);
    Py_END_ALLOW_THREADS;
    if (err) {
        sp_raise_error(st, err, "insert_if_new");
        goto done;
    }
    f.sketch = to.sketch; /* live documents carry no paragraph lists */
    PyObject *item;
    int rc = f.inserted ? 0 : -1;
    while (rc == 0 && (item = PyIter_Next(it)) != NULL) {
        rc = sp_feed_one(st, &f, item);
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
        sp_raise_error(st, err, "insert_if_new: flush");
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

PyMethodDef sp_live_functions[] = {
    {"recover", recover, METH_O, recover_doc},
    {"insert_if_new", insert_if_new, METH_VARARGS, insert_if_new_doc},
    {NULL, NULL, 0, NULL}};
