/* internal.h: what the files of the extension simstore._simstore share: its
 * module state, the Store object, and the helpers one file defines for the
 * others. The extension is the C core of the package simstore
 * (python/simstore/): it takes positional arguments already checked there
 * (options as dicts named after the library's struct fields, documents as
 * records) and gives back plain tuples, bytes and dicts, which the package
 * shapes into its named results, arrays and messages. It includes only
 * simstore.h of the tree. */
#ifndef SIMSTORE_PY_INTERNAL_H
#define SIMSTORE_PY_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "simstore.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Module state (module.c) ---------------------------------------------- */

#define SP_N_CODES 12 /* SIMSTORE_OK .. -SIMSTORE_EREADONLY */

/* Everything the module owns, one copy per module object (per interpreter):
 * no C global holds a Python object. */
typedef struct sp_state {
    PyTypeObject *store_type;     /* _simstore.Store */
    PyObject *error;              /* simstore.Error */
    PyObject *errors[SP_N_CODES]; /* its subclass for each library code, by -code */
} sp_state;

/* The state of the module a module-level function was called on. */
sp_state *sp_module_state(PyObject *module);
/* The state of the module that defined cls (a METH_METHOD's defining class,
 * or a type of the module's); NULL with an exception if none. */
sp_state *sp_class_state(PyTypeObject *cls);
/* The state of a METH_METHOD method's module, once its call has exactly n
 * positional arguments (all the package passes); NULL with an exception. */
sp_state *sp_method_state(PyTypeObject *cls, const char *fname, Py_ssize_t nargs, PyObject *kwnames,
                          Py_ssize_t n);

/* Raise the exception of library code err with message msg (a new
 * reference, stolen; NULL: an exception is already set) and .code = err.
 * Returns NULL. */
PyObject *sp_raise_code(sp_state *st, int err, PyObject *msg);
/* Raise the exception of library code err for `what`, with the library's
 * detail message of this thread (read before any other simstore call). */
PyObject *sp_raise_error(sp_state *st, int err, const char *what);

/* ---- Values between Python and the library (convert.c) -------------------- */

/* A document id from the library: an int when it was given as one, else a
 * str (undecodable bytes as surrogates); None for no id. */
PyObject *sp_id_to_py(const char *id, size_t len, unsigned flags);
/* Any document id to look for (get, delete): str (UTF-8, surrogateescape),
 * bytes, or int (its digits, *flags SIMSTORE_DOC_INTEGER_ID). *hold owns the
 * bytes. Returns 0, or -1 with an exception. */
int sp_id_from_py(PyObject *obj, const char **id, size_t *len, unsigned *flags, PyObject **hold);
/* A fingerprint: an int (or __index__), or 16 hex digits. */
int sp_fp_from_py(PyObject *obj, uint64_t *fp);
/* Fingerprints from a C-contiguous buffer of 8-byte integers or an iterable
 * of fingerprints; *out is malloc'ed. Returns 0, or -1 with an exception. */
int sp_fps_from_py(PyObject *obj, uint64_t **out, size_t *n);
/* A text: str (UTF-8) or any buffer of bytes (view: release with
 * sp_text_release). Returns 1, 0 when obj is not a text, -1 on error. */
int sp_text_from_py(PyObject *obj, Py_buffer *view, const char **text, size_t *len);
/* sp_text_from_py for an argument of fname(): 0, or -1 with TypeError
 * "fname() takes a str or bytes, not T" when obj is not a text. */
int sp_text_arg(PyObject *obj, Py_buffer *view, const char **text, size_t *len, const char *fname);
void sp_text_release(Py_buffer *view);
/* The UTF-8 of every item of seq (a PySequence_Fast), each a str or bytes
 * that seq keeps alive: -1 when all are, else the index of the first that is
 * neither (no exception set); -2 with an exception. */
Py_ssize_t sp_texts_utf8(PyObject *seq, const char **ptrs, size_t *lens);
/* Metadata (JSON text) as a str the package parses; None for none. */
PyObject *sp_meta_to_py(const char *meta, size_t len);
/* A similarity, None for SIMSTORE_SIMILARITY_UNKNOWN. */
PyObject *sp_similarity_to_py(double sim);
/* A tuple of n new references (stolen); NULL when one is NULL. */
PyObject *sp_tuple(PyObject **items, int n);
/* An unsigned int argument. */
int sp_uint_arg(PyObject *obj, unsigned *out);

/* Options structs from the dicts the package passes: each key present sets
 * the field of that name, the others keep what the struct's _init function
 * gave them. Return 0, or -1 with an exception. */
int sp_text_options_from_py(PyObject *d, simstore_text_options *o);
int sp_build_options_from_py(PyObject *d, simstore_build_options *o);
int sp_scan_options_from_py(PyObject *d, simstore_scan_options *o);
int sp_opt_uint(PyObject *d, const char *name, unsigned *out);
int sp_opt_u64(PyObject *d, const char *name, uint64_t *out);
int sp_opt_double(PyObject *d, const char *name, double *out);
int sp_opt_bool(PyObject *d, const char *name, int *out);

/* ---- Feeding documents (feed.c) -------------------------------------------- */

/* Documents on their way into a builder, or into a live store's
 * insert-if-new (lq set: whether each was inserted goes to `inserted`). */
typedef struct sp_feeder {
    simstore_builder *b;
    simstore_live_query *lq;
    const simstore_near_rule *rule;
    PyObject *inserted;
    simstore_fingerprinter *fpr; /* NULL for a fingerprint-only store */
    simstore_sketch_kind sketch;
    unsigned para_min_words;
    int fingerprint_only; /* items are fingerprints, not records */
    uint8_t sketch_buf[SIMSTORE_SKETCH_MAX_BYTES];
    uint64_t *paras;
    size_t paras_cap;
    uint64_t count; /* items fed: the next one is docs[count] */
} sp_feeder;

/* Feed one item: a record (id bytes, integer id, text or None, fingerprint,
 * metadata JSON bytes or None), or a fingerprint. 0, or -1 with an exception. */
int sp_feed_one(sp_state *st, sp_feeder *f, PyObject *item);
/* Feed `first` (a new reference, stolen; NULL for none) and every item of
 * iterator it, then finish the builder, or abort it on failure. */
int sp_feed_all(sp_state *st, sp_feeder *f, PyObject *first, PyObject *it, const char *what);
/* The library's name of docs[source] in its messages (build options'
 * source_name). */
void sp_source_name(void *ctx, uint64_t source, char *buf, size_t size);
extern PyMethodDef sp_feed_functions[];

/* ---- Module functions (text.c, live.c) ------------------------------------ */

extern PyMethodDef sp_text_functions[];
extern PyMethodDef sp_live_functions[];

/* ---- The Store type (store.c, collect.c) ----------------------------------- */

/* A query context and a fingerprinter for one thread at a time, kept in the
 * store's idle list between calls. */
typedef struct sp_qslot {
    struct sp_qslot *next;
    simstore_query *q;
    simstore_fingerprinter *fpr; /* made on the first text query */
} sp_qslot;

typedef struct sp_store {
    PyObject_HEAD simstore *s;
    pthread_mutex_t mu; /* guards busy, idle and s's closing */
    int busy;           /* calls running on s */
    sp_qslot *idle[2];  /* idle contexts without and with metadata */
    unsigned k;         /* the store's design k */
    int fingerprint_only;
} sp_store;

extern PyType_Spec sp_store_spec;

/* Enter a call on the store (fails, ValueError, when it is closed); leave. */
int sp_store_enter(sp_store *self);
void sp_store_leave(sp_store *self);
/* Take a query context (with metadata or not) and give it back; called
 * without the GIL. */
int sp_slot_take(sp_store *self, int meta, sp_qslot **out);
void sp_slot_give(sp_store *self, int meta, sp_qslot *sl);
/* A fingerprinter of the store's texts: its text options and boilerplate. */
int sp_store_fingerprinter(simstore *s, simstore_fingerprinter **out);

/* Store methods gathering records with the GIL released (collect.c). */
PyObject *sp_store_query_batch(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames);
PyObject *sp_store_get(PyObject *op, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames);
PyObject *sp_store_documents(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames);
PyObject *sp_store_pairs(PyObject *op, PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames);
PyObject *sp_store_clusters(PyObject *op, PyTypeObject *cls, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames);
extern const char sp_store_query_batch_doc[], sp_store_get_doc[], sp_store_documents_doc[],
    sp_store_pairs_doc[], sp_store_clusters_doc[];

/* Methods whose C functions take the METH_METHOD arguments, cast through
 * void (*)(void) as PyMethodDef requires. */
#define SP_METHOD(f) ((PyCFunction)(void (*)(void))(f))
/* A function in a PyType_Slot or PyModuleDef_Slot (a void *): through an
 * integer, as ISO C has no conversion between function and object pointers. */
#define SP_SLOT(f) ((void *)(uintptr_t)(f))

#endif
