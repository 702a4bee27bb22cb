# tests/check: the check layer (included by tests/CMakeLists.txt).
# test_verify: simstore_verify() on stores damaged one way at a time (by
# writing table files and LMDB directly), the inspection API, and the LMDB
# walker against LMDB's own statistics.
simstore_unit_test(test_verify check/test_verify.c)
target_link_libraries(test_verify PRIVATE simstore_check)
