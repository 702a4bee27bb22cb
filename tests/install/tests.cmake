# tests/install: libsimstore as a C user gets it (included by
# tests/CMakeLists.txt).
# test_symbols: libsimstore.so exports exactly the SIMSTORE_API functions of
# simstore.h, and libsimstore.a defines only prefixed global names.
add_test(NAME test_symbols
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/symbols.sh ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:simstore_shared> $<TARGET_FILE:simstore>)

# test_install: cmake --install of this build into a temporary prefix, then
# example.c (the README's example) built against it through pkg-config
# (shared and static) and find_package(simstore) (simstore::simstore and
# simstore::simstore_static), each run and its output checked. Instrumented
# builds install instrumented libraries: the example is compiled the same way.
# With the Python package (SIMSTORE_PYTHON), the installed package is imported
# by its interpreter (SIMSTORE_PYTHON3) and answers a query.
set(simstore_install_test_cflags "")
if(SIMSTORE_SANITIZE)
  set(simstore_install_test_cflags "-fsanitize=address,undefined -fno-sanitize-recover=all")
elseif(SIMSTORE_TSAN)
  set(simstore_install_test_cflags "-fsanitize=thread")
endif()
add_test(NAME test_install
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR}
          ${PROJECT_VERSION})
set_tests_properties(test_install PROPERTIES TIMEOUT 600
  ENVIRONMENT "CC=${CMAKE_C_COMPILER};SIMSTORE_EXAMPLE_CFLAGS=${simstore_install_test_cflags};SIMSTORE_PYTHON3=${Python3_EXECUTABLE}")
