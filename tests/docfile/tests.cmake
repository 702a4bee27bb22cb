# tests/docfile: the document file (lib/docfile, format/docfile.md): lookups
# against brute force, writer checks, the golden file, corruption sweeps.
simstore_unit_test(test_docfile ${CMAKE_CURRENT_LIST_DIR}/test_docfile.c)
target_link_libraries(test_docfile PRIVATE simstore_docfile)
