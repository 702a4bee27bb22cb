# tests/mpi: simstore-mpi under mpirun -np 1, 2 and 3 against the
# single-machine tool (included by tests/CMakeLists.txt when it is built).
if(TARGET simstore_mpi)
  add_test(NAME test_mpi
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/mpi.sh $<TARGET_FILE:simstore_cli>
            $<TARGET_FILE:simstore_mpi> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(test_mpi PROPERTIES TIMEOUT 900
    ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  add_test(NAME test_mpi_scan
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/scan.sh $<TARGET_FILE:simstore_cli>
            $<TARGET_FILE:simstore_mpi> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(test_mpi_scan PROPERTIES TIMEOUT 900
    ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  add_test(NAME test_mpi_para
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/para.sh $<TARGET_FILE:simstore_cli>
            $<TARGET_FILE:simstore_mpi> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(test_mpi_para PROPERTIES TIMEOUT 900
    ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  add_test(NAME test_mpi_query
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/query.sh $<TARGET_FILE:simstore_cli>
            $<TARGET_FILE:simstore_mpi> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(test_mpi_query PROPERTIES TIMEOUT 900
    ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  add_test(NAME test_mpi_inputs
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/inputs.sh $<TARGET_FILE:simstore_cli>
            $<TARGET_FILE:simstore_mpi> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(test_mpi_inputs PROPERTIES TIMEOUT 900
    ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  # Open MPI's own allocations stay until exit: LeakSanitizer would report
  # them in sanitizer builds (the library's leaks are checked by the rest).
  if(SIMSTORE_SANITIZE)
    set_tests_properties(test_mpi test_mpi_scan test_mpi_para test_mpi_query test_mpi_inputs
      PROPERTIES ENVIRONMENT
      "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR};ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
  endif()
endif()
