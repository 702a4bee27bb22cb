/* changes_store.h: begin a store whose documents are all changes in LMDB
 * (docs and fps; format/store.md, "Document files"), for the tests whose
 * subject is LMDB's records and pages: the store is built empty with the
 * options, then opened and an add begun without auto-compaction. For tests
 * that link the whole library. */
#ifndef SIMSTORE_TEST_CHANGES_STORE_H
#define SIMSTORE_TEST_CHANGES_STORE_H

#include "simstore.h"

/* As simstore_build_begin(dir, o, b); *s (closed by the caller after the
 * finish or abort) holds the store the add writes. */
static inline int test_changes_begin(const char *dir, const simstore_build_options *o, simstore **s,
                                     simstore_builder **b)
{
    *s = NULL;
    int rc = simstore_build_begin(dir, o, b);
    if (rc == 0)
        rc = simstore_builder_finish(*b);
    if (rc == 0)
        rc = simstore_open(dir, SIMSTORE_OPEN_WRITE | SIMSTORE_OPEN_NO_AUTO_COMPACT, s);
    if (rc == 0)
        rc = simstore_add_begin(*s, o, b);
    return rc;
}

#endif
