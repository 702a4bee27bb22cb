# tests/scan: the scan layer (included by tests/CMakeLists.txt).
# test_pairs: pairs, the join of an array, and clusters against brute force.
simstore_unit_test(test_pairs scan/test_pairs.c)
target_link_libraries(test_pairs PRIVATE simstore)
