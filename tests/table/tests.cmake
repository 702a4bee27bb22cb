# tests/table: the table file writer and reader (round trips, ranges, search,
# corruption sweeps, golden files, atomic publish).
simstore_unit_test(test_table ${CMAKE_CURRENT_LIST_DIR}/test_table.c)
target_link_libraries(test_table PRIVATE simstore_table)

# Regenerates format/golden/table-* (not a test; run by hand when the format
# version changes): table_golden_gen <source>/format/golden
add_executable(table_golden_gen ${CMAKE_CURRENT_LIST_DIR}/gen_golden.c)
target_link_libraries(table_golden_gen PRIVATE simstore_table simstore_testutil)
