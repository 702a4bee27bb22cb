# tests/store: the store layer's unit tests (included by tests/CMakeLists.txt).
# test_store: stores through the public API against a brute-force oracle.
simstore_unit_test(test_store store/test_store.c)
target_link_libraries(test_store PRIVATE simstore_store)
set_tests_properties(test_store PROPERTIES TIMEOUT 600)

# test_paragraphs: the paragraph index: planted partial copies and edited
# documents give exact SHARED/OF (also after add, delete, compact); paragraph
# queries against a brute-force oracle over every stored paragraph.
simstore_unit_test(test_paragraphs store/test_paragraphs.c)
target_link_libraries(test_paragraphs PRIVATE simstore_check simstore_scan)

# test_corruption: the whole-store corruption sweep (flip and truncate every
# file of a small store; query, inspect and verify must fail cleanly or answer
# correctly). SIMSTORE_SWEEP=full samples densely, =report prints outcomes.
simstore_unit_test(test_corruption store/test_corruption.c)
target_link_libraries(test_corruption PRIVATE simstore_check)
set_tests_properties(test_corruption PROPERTIES TIMEOUT 1800 ENVIRONMENT
  "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR};SIMSTORE_TEST_FILTER=test_corruption__sweep")
# The same program's other two sweeps, each a test of its own so that ctest -j
# runs the three side by side: the store with a paragraph index, and the
# query-path sweep of data.mdb (lazy checks against the walk at open).
add_test(NAME test_corruption_paragraphs COMMAND test_corruption)
set_tests_properties(test_corruption_paragraphs PROPERTIES TIMEOUT 1800 ENVIRONMENT
  "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR};SIMSTORE_TEST_FILTER=test_corruption__sweep_paragraphs")
add_test(NAME test_corruption_query_path COMMAND test_corruption)
set_tests_properties(test_corruption_query_path PROPERTIES TIMEOUT 1800 ENVIRONMENT
  "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR};SIMSTORE_TEST_FILTER=test_corruption__query_path")

# test_lazy_open: read-only opens check LMDB's pages as queries read them:
# the pages checked do not grow with the store (counted, not timed), the
# answers equal those after the walk at open; writers still walk.
simstore_unit_test(test_lazy_open store/test_lazy_open.c)
target_link_libraries(test_lazy_open PRIVATE simstore_store)
set_tests_properties(test_lazy_open PROPERTIES TIMEOUT 600)

# crash_op: the helper test_crash runs (and kills) in child processes: one
# store operation on the deterministic documents of crash_docs.h.
add_executable(crash_op store/crash_op.c)
target_link_libraries(crash_op PRIVATE simstore simstore_faults)

# test_crash: interrupted builds, adds, deletes and compactions (injected
# faults at every write/fsync/rename/commit, and SIGKILL at random moments)
# leave exactly a committed state, and the next writer cleans up.
simstore_unit_test(test_crash store/test_crash.c)
target_link_libraries(test_crash PRIVATE simstore_check)
target_compile_definitions(test_crash PRIVATE CRASH_OP="$<TARGET_FILE:crash_op>")
add_dependencies(test_crash crash_op)
set_tests_properties(test_crash PROPERTIES TIMEOUT 900)

# test_concurrency: one writer at a time (other handles, threads, processes
# get SIMSTORE_EBUSY); readers in threads and processes see only committed
# states while a writer adds, deletes and compacts; read-only copies.
simstore_unit_test(test_concurrency store/test_concurrency.c)
target_link_libraries(test_concurrency PRIVATE simstore_store)
set_tests_properties(test_concurrency PROPERTIES TIMEOUT 600)

# test_clash: clashing document ids in builds and adds (fail at the first,
# report every one, or skip them) and the reports of compactions.
simstore_unit_test(test_clash store/test_clash.c)
target_link_libraries(test_clash PRIVATE simstore_check)

# test_hostile: what build --replace and a build's clean-up may remove (only
# stores; only marked temporary build directories), STORE/ paths, and
# simstore_replaced() after a swap (issue 10, item 6).
simstore_unit_test(test_hostile store/test_hostile.c)
target_link_libraries(test_hostile PRIVATE simstore_store)

# test_insertion: documents' insertion numbers through queries: build and
# adds in order, kept by deletes and compactions, records written without one
# (as older stores hold), and the generation limit (format/store.md); positions
# given to builders (simstore_builder_set_position), and shards built with
# them numbering documents as one store does.
simstore_unit_test(test_insertion store/test_insertion.c)
target_link_libraries(test_insertion PRIVATE simstore_check simstore_shard)

# test_boilerplate: the boilerplate counter against a brute-force count (in
# memory and spilling), a generated templated corpus, and stores that record
# a set (reopen, text queries, adds, a damaged record).
simstore_unit_test(test_boilerplate store/test_boilerplate.c)
target_link_libraries(test_boilerplate PRIVATE simstore_check)

# test_shrink: simstore_shrink (compact's rewrite of data.mdb without its
# free pages): smaller, the same answers before and after and through a
# handle opened before, nothing left beside the store, busy while a writer
# holds it. Its crash and fault sweeps are tests/cli/crash.sh's
# compact-shrink.
simstore_unit_test(test_shrink store/test_shrink.c)
target_link_libraries(test_shrink PRIVATE simstore_store)

# test_options: every call taking an options struct refuses one its _init
# did not fill (simstore.h, "Options structs").
simstore_unit_test(test_options store/test_options.c)
target_link_libraries(test_options PRIVATE simstore_live)
