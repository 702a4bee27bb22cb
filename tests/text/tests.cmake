# tests/text: the text layer (tokenizer, friso, simhash) and the command
# input reader; included by tests/CMakeLists.txt.
simstore_unit_test(test_text text/test_text.c)
target_link_libraries(test_text PRIVATE simstore_text PkgConfig::XXHASH Threads::Threads)
# Counts the allocations of the statically linked code (test_text_alloc__*).
target_link_options(test_text PRIVATE -Wl,--wrap=malloc,--wrap=realloc,--wrap=calloc)

# Sketches (format/sketch.md): vectors, one pass with the fingerprint, and
# the estimate against exact Jaccard similarity.
simstore_unit_test(test_sketch text/test_sketch.c)
target_link_libraries(test_sketch PRIVATE simstore_text m)

# cmd/input.c (in the command's helper library) is tested directly for
# every malformed-record message.
simstore_unit_test(test_input text/test_input.c)
target_link_libraries(test_input PRIVATE simstore_cmdkit)

# The spec, implemented a second time in Python from its text (bigram mode),
# must agree with `simstore fingerprint` bit for bit.
find_program(SIMSTORE_PYTHON3 python3)
if(SIMSTORE_PYTHON3)
  add_test(NAME test_text_reference
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/text/reference.sh $<TARGET_FILE:simstore_cli>
            ${SIMSTORE_PYTHON3})
  set_tests_properties(test_text_reference PROPERTIES
    ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()

# simstore_fingerprint_many: the same fingerprints as one by one, at every
# thread count and around the chunk size.
simstore_unit_test(test_fingerprint_many text/test_fingerprint_many.c)
target_link_libraries(test_fingerprint_many PRIVATE simstore_text)

# Boilerplate in the text layer: line keys as format/fingerprint.md defines
# them, sets, the bytes removed before fingerprinting, texts that are only
# boilerplate, paragraphs.
simstore_unit_test(test_boilerplate_text text/test_boilerplate_text.c)
target_link_libraries(test_boilerplate_text PRIVATE simstore_text PkgConfig::XXHASH)
