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
set_tests_properties(test_live PROPERTIES TIMEOUT 900)
