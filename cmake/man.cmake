# man.cmake: the man pages simstore(1) and simstore-COMMAND(1), generated at
# build time by help2man from the commands' --help texts (cmd/man/genman.sh)
# into build/man/, and the bash completion (cmd/completion/simstore.bash);
# both installed. SIMSTORE_MAN=AUTO (the default) makes the pages when
# help2man is found, ON requires it, OFF skips them.
set(SIMSTORE_MAN AUTO CACHE STRING "Generate man pages with help2man (ON, OFF or AUTO)")
set_property(CACHE SIMSTORE_MAN PROPERTY STRINGS ON OFF AUTO)

if(TARGET simstore_cli AND NOT SIMSTORE_MAN STREQUAL "OFF")
  find_program(SIMSTORE_HELP2MAN help2man)
  if(SIMSTORE_HELP2MAN)
    set(simstore_man_dir ${PROJECT_BINARY_DIR}/man)
    add_custom_command(OUTPUT ${simstore_man_dir}/simstore.1
      COMMAND bash ${PROJECT_SOURCE_DIR}/cmd/man/genman.sh $<TARGET_FILE:simstore_cli>
              ${simstore_man_dir}
      DEPENDS simstore_cli ${PROJECT_SOURCE_DIR}/cmd/man/genman.sh
      COMMENT "Generating the man pages with help2man"
      VERBATIM)
    add_custom_target(simstore_man ALL DEPENDS ${simstore_man_dir}/simstore.1)
    install(DIRECTORY ${simstore_man_dir}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
      FILES_MATCHING PATTERN "*.1")
  elseif(SIMSTORE_MAN STREQUAL "ON")
    message(FATAL_ERROR "SIMSTORE_MAN=ON needs help2man (Debian package help2man)")
  else()
    message(STATUS "help2man not found: no man pages (Debian package help2man)")
  endif()
endif()

if(TARGET simstore_cli)
  install(FILES ${PROJECT_SOURCE_DIR}/cmd/completion/simstore.bash
    DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME simstore)
endif()
