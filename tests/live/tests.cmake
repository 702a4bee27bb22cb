# tests/live: the serving layer (included by tests/CMakeLists.txt).
# test_wal: the write-ahead log (format/wal.md): order, group commit from
# many threads, torn tails, every byte damaged, failed writes and fsyncs,
# kill -9 during appends.
simstore_unit_test(test_wal live/test_wal.c)
target_link_libraries(test_wal PRIVATE simstore_live Threads::Threads)
