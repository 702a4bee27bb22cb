# tests/design: the design layer (included by tests/CMakeLists.txt).
# test_design: table designs, permutations, the cost model and the design
# record; it reads format/design.md for the golden example.
simstore_unit_test(test_design design/test_design.c)
target_link_libraries(test_design PRIVATE simstore_design)
