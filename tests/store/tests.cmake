# tests/store: the store layer's unit tests (included by tests/CMakeLists.txt).
# test_design: table designs, permutations, the cost model and the design
# record; it reads format/design.md for the golden example.
simstore_unit_test(test_design store/test_design.c)
target_link_libraries(test_design PRIVATE simstore_store)

# test_sort: radix sort and the spilling value and record sorters.
simstore_unit_test(test_sort store/test_sort.c)
target_link_libraries(test_sort PRIVATE simstore_store)

# test_store: stores through the public API against a brute-force oracle.
simstore_unit_test(test_store store/test_store.c)
target_link_libraries(test_store PRIVATE simstore_store)
set_tests_properties(test_store PROPERTIES TIMEOUT 600)
