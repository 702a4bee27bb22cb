# tests/scan: the scan layer (included by tests/CMakeLists.txt).
# test_pairs: pairs, the join of an array, and clusters against brute force;
# components through the spilling path (forced by its test hook, and chosen
# at the 16 MiB floor) against the same references and the in-memory path.
simstore_unit_test(test_pairs scan/test_pairs.c)
target_link_libraries(test_pairs PRIVATE simstore)
# test_batch: simstore_query_batch() against simstore_query_fp() one by one,
# byte for byte, on several store shapes, every strategy, 1 and 2 threads,
# chunked; SIMSTORE_DENSE=1 sweeps more queries.
simstore_unit_test(test_batch scan/test_batch.c)
target_link_libraries(test_batch PRIVATE simstore_scan simstore_check)
set_tests_properties(test_batch PROPERTIES TIMEOUT 600)
# test_similarity: similarities in queries, batches, pairs and clusters
# (with and without a minimum) against brute force over the stored
# sketches; stores without sketches; damaged sketch bytes.
simstore_unit_test(test_similarity scan/test_similarity.c)
target_link_libraries(test_similarity PRIVATE simstore_scan simstore_check PkgConfig::LMDB)
set_tests_properties(test_similarity PROPERTIES TIMEOUT 600)
