# install.cmake: what `cmake --install` puts under the prefix (GNUInstallDirs):
#   lib/libsimstore.so.1.0.0 (+ .so.1, .so links), lib/libsimstore.a,
#   include/simstore.h and include/simstore_unstable.h (no stability
#   promise: the project's own clients' pieces), bin/simstore, share/doc/simstore/ (README.md,
#   LICENSE and format/*.md), lib/pkgconfig/simstore.pc, and lib/cmake/simstore/ for
#   find_package(simstore): simstore::simstore (the shared library) and
#   simstore::simstore_static (when lmdb, libxxhash and friso are found
#   through pkg-config, as a static link needs them).
include(CMakePackageConfigHelpers)

set(simstore_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/simstore)

if(SIMSTORE_FAULT_INJECTION)
  install(CODE "message(WARNING \"this build has the test-only fault points \"
    \"(SIMSTORE_FAULT_INJECTION=ON, the default with BUILD_TESTING): the installed \"
    \"tool reads SIMSTORE_FAULT (the library never does). Configure with \"
    \"-DBUILD_TESTING=OFF for an install.\")")
endif()

install(TARGETS simstore_shared EXPORT simstore-shared-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS simstore EXPORT simstore-static-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/lib/include/simstore.h
  ${PROJECT_SOURCE_DIR}/lib/include/simstore_unstable.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET simstore_cli)
  install(TARGETS simstore_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
file(GLOB simstore_format_docs ${PROJECT_SOURCE_DIR}/format/*.md)
install(FILES ${simstore_format_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR}/format)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# simstore.pc names the prefix the install goes to (cmake --install --prefix
# may choose another than the configured one), so it is written at install
# time from the template configured here.
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(SIMSTORE_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(SIMSTORE_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(SIMSTORE_PC_PREFIX "@SIMSTORE_PC_PREFIX@") # kept for the install-time step
configure_file(${CMAKE_CURRENT_LIST_DIR}/simstore.pc.in
  ${PROJECT_BINARY_DIR}/pkgconfig/simstore.pc.in @ONLY)
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/pkgconfig/simstore.pc.in\" pc)
  string(REPLACE \"@SIMSTORE_PC_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" pc \"\${pc}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/pkgconfig/simstore.pc\" \"\${pc}\")")
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/simstore.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(EXPORT simstore-shared-targets NAMESPACE simstore:: DESTINATION ${simstore_cmake_dir})
install(EXPORT simstore-static-targets NAMESPACE simstore:: DESTINATION ${simstore_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/simstore-config.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/simstore-config.cmake
  INSTALL_DESTINATION ${simstore_cmake_dir})
# Within a major version the API and ABI only grow (README.md, "Use the
# library"): any version of the same MAJOR at least the one asked for will do.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/simstore-config-version.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/simstore-config.cmake
  ${PROJECT_BINARY_DIR}/cmake/simstore-config-version.cmake
  DESTINATION ${simstore_cmake_dir})
