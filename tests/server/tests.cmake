# tests/server: simstore serve on a loopback port (the port it picks, read
# from its first line) driven by Python's http.client (/usr/bin/python3 or
# the python3 on PATH), one ctest per scenario of test_server.py.
find_program(SIMSTORE_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT SIMSTORE_PYTHON3)
  find_program(SIMSTORE_PYTHON3 NAMES python3 REQUIRED)
endif()
foreach(scenario routes_and_errors queries_equal_cli beyond_store_k token_and_read_only
                 concurrent_clients insert_if_new_race kill9_restart sighup_reopens_log
                 writes_keepalive_and_drain batch_insert_if_new ipv6_listen memory_bounded
                 request_memory slow_clients request_deadline read_only_follows_store
                 document_ids batch_check_status disk_full access_log_escapes serve_options)
  add_test(NAME test_server_${scenario}
    COMMAND ${SIMSTORE_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/test_server.py
            $<TARGET_FILE:simstore_cli> ${PROJECT_SOURCE_DIR} test_${scenario})
  set_tests_properties(test_server_${scenario} PROPERTIES TIMEOUT 600)
endforeach()
# One near-duplicate rule (issue 35, item 3): the same corpus keeps the same
# documents through dedup, the server's insert-if-new and, when the module is
# built, Python's insert_if_new (with PYTHONPATH set, it must be there).
if(TARGET simstore_python)
  add_test(NAME test_near_rule
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_server.py
            $<TARGET_FILE:simstore_cli> ${PROJECT_SOURCE_DIR} test_near_rule_same_documents)
  set_tests_properties(test_near_rule PROPERTIES TIMEOUT 600
    ENVIRONMENT "PYTHONPATH=${SIMSTORE_PYTHON_PATH};PYTHONDONTWRITEBYTECODE=1;SIMSTORE_TEST_PYTHON=1")
else()
  add_test(NAME test_near_rule
    COMMAND ${SIMSTORE_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/test_server.py
            $<TARGET_FILE:simstore_cli> ${PROJECT_SOURCE_DIR} test_near_rule_same_documents)
  set_tests_properties(test_near_rule PROPERTIES TIMEOUT 600)
endif()
