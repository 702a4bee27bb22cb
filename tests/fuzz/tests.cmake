# tests/fuzz (ordinary builds): every libFuzzer target tests/fuzz/fuzz_NAME.c
# is also compiled with regression_driver.c and registered as the ctest
# test_fuzz_corpus_NAME, which replays tests/fuzz/corpus/NAME/ once. Add a
# target by dropping fuzz_NAME.c and corpus/NAME/ here; nothing to register.
file(GLOB SIMSTORE_FUZZ_TARGET_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/fuzz_*.c)
foreach(src ${SIMSTORE_FUZZ_TARGET_SOURCES})
  get_filename_component(target ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" short ${target})
  add_executable(${target}_replay ${src} ${CMAKE_CURRENT_LIST_DIR}/regression_driver.c)
  target_link_libraries(${target}_replay PRIVATE simstore_internal)
  if(target STREQUAL "fuzz_serve_request")
    target_link_libraries(${target}_replay PRIVATE simstore_server_handler)
  endif()
  if(target STREQUAL "fuzz_jsonl_scan")
    target_link_libraries(${target}_replay PRIVATE simstore_cmdkit)
  endif()
  add_test(NAME test_fuzz_corpus_${short}
           COMMAND ${target}_replay ${CMAKE_CURRENT_LIST_DIR}/corpus/${short})
endforeach()

# Writes the seed inputs of the table targets (not a test; run by hand):
#   fuzz_seed_gen <source>/tests/fuzz/corpus
add_executable(fuzz_seed_gen ${CMAKE_CURRENT_LIST_DIR}/gen_seeds.c)
target_link_libraries(fuzz_seed_gen PRIVATE simstore_internal)

# Writes the seed inputs of fuzz_store_records and fuzz_lmdb_walk (records
# and data.mdb files of small real stores; not a test; run by hand):
#   fuzz_record_seed_gen <source>/tests/fuzz/corpus
add_executable(fuzz_record_seed_gen ${CMAKE_CURRENT_LIST_DIR}/gen_record_seeds.c)
target_link_libraries(fuzz_record_seed_gen PRIVATE simstore_internal)
