# bench_march.cmake (included after bench/): the benchmarks measure the tuned
# build. With SIMSTORE_BENCH_MARCH (default native) different from
# SIMSTORE_MARCH, every program in bench/ is compiled with
# -march=${SIMSTORE_BENCH_MARCH} and links a copy of the library's objects
# (and of the command's helper libraries it uses) compiled the same way, so
# what it measures is tuned while libsimstore and the simstore tool stay
# portable; bench/simstore is a tuned copy of the simstore command, which
# bench/scale_run.sh times. The copies are object libraries linked
# directly: their objects come before the portable archives on the link
# line, which then supply nothing.

if(NOT SIMSTORE_BENCH_MARCH OR SIMSTORE_BENCH_MARCH STREQUAL SIMSTORE_MARCH)
  return()
endif()

# simstore_bench_copy(ORIGINAL): the object library ORIGINAL_bench, ORIGINAL's
# sources compiled as ORIGINAL compiles them, plus the bench -march.
function(simstore_bench_copy orig)
  get_target_property(dir ${orig} SOURCE_DIR)
  get_target_property(sources ${orig} SOURCES)
  set(paths)
  foreach(src ${sources})
    if(IS_ABSOLUTE "${src}")
      list(APPEND paths "${src}")
    else()
      list(APPEND paths "${dir}/${src}")
    endif()
  endforeach()
  add_library(${orig}_bench OBJECT ${paths})
  foreach(prop INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS
               POSITION_INDEPENDENT_CODE C_VISIBILITY_PRESET)
    get_target_property(value ${orig} ${prop})
    if(value)
      set_property(TARGET ${orig}_bench PROPERTY ${prop} "${value}")
    endif()
  endforeach()
  # The same dependencies, for their include directories and definitions.
  get_target_property(libs ${orig} LINK_LIBRARIES)
  if(libs)
    target_link_libraries(${orig}_bench PRIVATE ${libs})
  endif()
  target_compile_options(${orig}_bench PRIVATE -march=${SIMSTORE_BENCH_MARCH})
endfunction()

get_property(simstore_bench_layers GLOBAL PROPERTY SIMSTORE_LAYERS)
set(simstore_bench_lib_objects)
foreach(layer ${simstore_bench_layers})
  simstore_bench_copy(${layer})
  list(APPEND simstore_bench_lib_objects ${layer}_bench)
endforeach()

# The command's helper libraries, for the programs that link them.
set(simstore_bench_helpers)
foreach(helper simstore_cmdkit simstore_quantity)
  if(TARGET ${helper})
    simstore_bench_copy(${helper})
    list(APPEND simstore_bench_helpers ${helper})
  endif()
endforeach()

get_property(simstore_bench_targets DIRECTORY ${PROJECT_SOURCE_DIR}/bench PROPERTY BUILDSYSTEM_TARGETS)
foreach(target ${simstore_bench_targets})
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "EXECUTABLE")
    continue()
  endif()
  get_target_property(libs ${target} LINK_LIBRARIES)
  set(objects ${simstore_bench_lib_objects})
  foreach(helper ${simstore_bench_helpers})
    if(helper IN_LIST libs)
      list(APPEND objects ${helper}_bench)
    endif()
  endforeach()
  target_compile_options(${target} PRIVATE -march=${SIMSTORE_BENCH_MARCH})
  target_link_libraries(${target} PRIVATE ${objects})
endforeach()

# bench/simstore: the simstore command, tuned.
if(TARGET simstore_cli)
  simstore_bench_copy(simstore_cli)
  get_target_property(libs simstore_cli LINK_LIBRARIES)
  set(objects simstore_cli_bench ${simstore_bench_lib_objects})
  foreach(helper ${simstore_bench_helpers})
    list(APPEND objects ${helper}_bench)
  endforeach()
  add_executable(simstore_bench_cli)
  target_link_libraries(simstore_bench_cli PRIVATE ${objects} ${libs})
  set_target_properties(simstore_bench_cli PROPERTIES OUTPUT_NAME simstore LINKER_LANGUAGE C
    RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
endif()
