# tests/mpi: simstore-mpi under mpirun -np 1, 2 and 3 against the
# single-machine tool (included by tests/CMakeLists.txt when it is built).
if(TARGET simstore_mpi)
  # test_mpi runs mpi.sh, test_mpi_NAME runs NAME.sh.
  set(mpi_tests test_mpi test_mpi_scan test_mpi_para test_mpi_query test_mpi_inputs)
  foreach(t IN LISTS mpi_tests)
    string(REGEX REPLACE "^test_mpi_?" "" script "${t}")
    if(script STREQUAL "")
      set(script mpi)
    endif()
    add_test(NAME ${t}
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/mpi/${script}.sh $<TARGET_FILE:simstore_cli>
              $<TARGET_FILE:simstore_mpi> ${MPIEXEC_EXECUTABLE})
    set_tests_properties(${t} PROPERTIES TIMEOUT 900
      ENVIRONMENT "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  endforeach()
  # Not labelled "threads": under ThreadSanitizer, Open MPI's uninstrumented
  # progress threads would be reported (tests/run.sh's TSan build has no MPI).
  # Open MPI's own allocations stay until exit: LeakSanitizer would report
  # them in sanitizer builds (the library's leaks are checked by the rest).
  if(SIMSTORE_SANITIZE)
    set_tests_properties(${mpi_tests} PROPERTIES ENVIRONMENT
      "SIMSTORE_SOURCE_DIR=${PROJECT_SOURCE_DIR};ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
  endif()
endif()
