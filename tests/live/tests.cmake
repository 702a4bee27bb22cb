# tests/live: the serving layer (included by tests/CMakeLists.txt).
# test_wal: the write-ahead log (format/wal.md): order, group commit from
# many threads, torn tails, every byte damaged, failed writes and fsyncs,
# kill -9 during appends.
simstore_unit_test(test_wal live/test_wal.c)
target_link_libraries(test_wal PRIVATE simstore_live Threads::Threads)

# test_live: live stores (simstore_live_*): answers against a brute-force
# reference and against a store changed with add and delete (k = 0..7,
# random and clustered, across flushes, deletes, compactions); threads
# inserting and querying; the insert-if-new race; batches answering as
# their changes one by one with one log commit, a torn batch replaying a
# prefix of it, batches killed and crashed at faults; kill -9 and injected
# crashes (also between a flush's commit and the log's trim) and reopen;
# the CLI's add, delete and compact refused (EBUSY) while queries work.
simstore_unit_test(test_live live/test_live.c)
target_link_libraries(test_live PRIVATE simstore_live simstore_check Threads::Threads)
target_compile_definitions(test_live PRIVATE SIMSTORE_CLI="$<TARGET_FILE:simstore_cli>")
add_dependencies(test_live simstore_cli)
# simstore-mpi's TSV output escapes such ids too, where it is built.
if(TARGET simstore_mpi)
  target_compile_definitions(test_live PRIVATE SIMSTORE_MPI_CLI="$<TARGET_FILE:simstore_mpi>"
    SIMSTORE_MPIEXEC="${MPIEXEC_EXECUTABLE}")
  target_link_libraries(test_live PRIVATE simstore_shard)
  add_dependencies(test_live simstore_mpi)
endif()
set_tests_properties(test_live PROPERTIES TIMEOUT 900)

# test_live_model: tests/live/model_test.py, a model-based test of the live
# store through the binaries: random HTTP writes, batches, insert-if-new,
# queries and gets, the CLI's writers and readers, SIGTERM stops, kill -9
# (also with requests in flight, and before CLI writers), a damaged log and
# a read-only server beside CLI writers, every answer against an in-memory
# model answered by brute force. CI size here (3,000 operations, 60 kills,
# a random seed printed: about 40 s); the long run with
# SIMSTORE_MODEL_OPS=10000 SIMSTORE_MODEL_KILLS=200 in the environment, and
# SIMSTORE_MODEL_SEED=N to repeat a run (the script's head lists the rest).
find_program(SIMSTORE_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SIMSTORE_PYTHON3)
  find_program(SIMSTORE_PYTHON3 NAMES python3 REQUIRED)
endif()
add_test(NAME test_live_model
  COMMAND ${SIMSTORE_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/model_test.py $<TARGET_FILE:simstore_cli>)
set_tests_properties(test_live_model PROPERTIES TIMEOUT 3600)
# Under the sanitizers (SIMSTORE_SAMPLED, tests/CMakeLists.txt) a sample:
# 600 operations, 12 kills, unless SIMSTORE_MODEL_OPS/KILLS say otherwise.
