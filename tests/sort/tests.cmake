# tests/sort: the sort layer (included by tests/CMakeLists.txt).
# test_sort: radix sort and the spilling value and record sorters.
simstore_unit_test(test_sort sort/test_sort.c)
target_link_libraries(test_sort PRIVATE simstore_sort)
