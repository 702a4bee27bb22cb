# tests/python: the Python package (python/) with Debian's interpreter (the
# one it was built for, Python3_EXECUTABLE), against the simstore command on
# the same stores; one ctest per group of test_python.py, and
# test_python_package for how the package is put together (test_package.py:
# its C core's module state, heap types, exceptions, exports). Registered
# only when the package is built (SIMSTORE_PYTHON, cmake/python.cmake), with
# PYTHONPATH naming the build's python/ (SIMSTORE_PYTHON_PATH).
if(TARGET simstore_python)
  foreach(group TestFingerprints TestCliParity TestNumpy TestErrors TestThreads TestRefcount TestExample
          TestIds TestMetadata TestRecovery)
    add_test(NAME test_python_${group}
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_python.py
              $<TARGET_FILE:simstore_cli> ${PROJECT_SOURCE_DIR} ${group})
    set_tests_properties(test_python_${group} PROPERTIES TIMEOUT 300
      ENVIRONMENT "PYTHONPATH=${SIMSTORE_PYTHON_PATH};PYTHONDONTWRITEBYTECODE=1")
  endforeach()
  add_test(NAME test_python_package
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_package.py)
  set_tests_properties(test_python_package PROPERTIES TIMEOUT 300
    ENVIRONMENT "PYTHONPATH=${SIMSTORE_PYTHON_PATH};PYTHONDONTWRITEBYTECODE=1")
  # The package without numpy (hidden from the interpreter): lists, not arrays.
  add_test(NAME test_python_without_numpy
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_python.py
            $<TARGET_FILE:simstore_cli> ${PROJECT_SOURCE_DIR} TestFingerprints TestCliParity TestNumpy)
  set_tests_properties(test_python_without_numpy PROPERTIES TIMEOUT 300
    ENVIRONMENT "PYTHONPATH=${SIMSTORE_PYTHON_PATH};PYTHONDONTWRITEBYTECODE=1;SIMSTORE_TEST_NO_NUMPY=1")
endif()
