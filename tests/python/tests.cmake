# tests/python: the Python module (python/) with Debian's interpreter (the
# one it was built for, Python3_EXECUTABLE), against the simstore command on
# the same stores; one ctest per group of test_python.py. Registered only
# when the module is built (SIMSTORE_PYTHON, cmake/python.cmake).
if(TARGET simstore_python)
  foreach(group TestFingerprints TestCliParity TestNumpy TestErrors TestThreads TestRefcount TestExample
          TestIds TestMetadata TestRecovery)
    add_test(NAME test_python_${group}
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_python.py
              $<TARGET_FILE:simstore_cli> ${PROJECT_SOURCE_DIR} ${group})
    set_tests_properties(test_python_${group} PROPERTIES TIMEOUT 300
      ENVIRONMENT "PYTHONPATH=$<TARGET_FILE_DIR:simstore_python>;PYTHONDONTWRITEBYTECODE=1")
  endforeach()
endif()
# The module without numpy (hidden from the interpreter): lists, not arrays.
if(TARGET simstore_python)
  add_test(NAME test_python_without_numpy
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_python.py
            $<TARGET_FILE:simstore_cli> ${PROJECT_SOURCE_DIR} TestFingerprints TestCliParity TestNumpy)
  set_tests_properties(test_python_without_numpy PROPERTIES TIMEOUT 300
    ENVIRONMENT "PYTHONPATH=$<TARGET_FILE_DIR:simstore_python>;PYTHONDONTWRITEBYTECODE=1;SIMSTORE_TEST_NO_NUMPY=1")
endif()
