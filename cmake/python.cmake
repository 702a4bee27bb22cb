# python.cmake: whether to build the Python module (python/), from
# SIMSTORE_PYTHON: ON requires Python 3's interpreter and headers (Debian's
# python3-dev), AUTO builds it when they are found, OFF never. Debian's
# /usr/bin/python3 is preferred over another python3 on PATH (pyenv, a
# venv) unless Python3_EXECUTABLE says otherwise. Instrumented builds
# (SIMSTORE_SANITIZE, SIMSTORE_TSAN, SIMSTORE_FUZZ) leave it out: the module
# would need the sanitizer runtimes preloaded into an uninstrumented
# interpreter (and ThreadSanitizer would report the interpreter's own
# synchronisation, which it cannot see, as races).
set(SIMSTORE_PYTHON_BUILT OFF)
string(TOUPPER "${SIMSTORE_PYTHON}" simstore_python_mode)
if(NOT simstore_python_mode MATCHES "^(ON|OFF|AUTO|TRUE|FALSE|YES|NO|1|0)$")
  message(FATAL_ERROR "SIMSTORE_PYTHON is ON, OFF or AUTO, not '${SIMSTORE_PYTHON}'")
endif()
if(simstore_python_mode MATCHES "^(OFF|FALSE|NO|0)$")
  message(STATUS "simstore: Python module off (SIMSTORE_PYTHON=${SIMSTORE_PYTHON})")
elseif(SIMSTORE_SANITIZE OR SIMSTORE_TSAN OR SIMSTORE_FUZZ)
  if(simstore_python_mode STREQUAL "AUTO")
    message(STATUS "simstore: Python module off in this sanitizer build "
      "(SIMSTORE_PYTHON=AUTO; an instrumented module needs its sanitizer runtime "
      "preloaded into python3)")
  else()
    message(FATAL_ERROR "SIMSTORE_PYTHON=${SIMSTORE_PYTHON} with SIMSTORE_SANITIZE, "
      "SIMSTORE_TSAN or SIMSTORE_FUZZ: the Python module is not built with the sanitizers; "
      "configure with -DSIMSTORE_PYTHON=AUTO or OFF")
  endif()
else()
  if(NOT Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  if(simstore_python_mode STREQUAL "AUTO")
    find_package(Python3 3.10 COMPONENTS Interpreter Development.Module)
  else()
    find_package(Python3 3.10 COMPONENTS Interpreter Development.Module)
    if(NOT Python3_FOUND)
      message(FATAL_ERROR "SIMSTORE_PYTHON=ON needs Python 3's interpreter and headers "
        "(on Debian: apt-get install python3-dev); configure with -DSIMSTORE_PYTHON=AUTO "
        "or OFF to build without the Python module")
    endif()
  endif()
  if(Python3_FOUND)
    add_subdirectory(python)
    set(SIMSTORE_PYTHON_BUILT ON)
  else()
    message(STATUS "simstore: Python module off (SIMSTORE_PYTHON=AUTO and no Python 3 "
      "headers: apt-get install python3-dev)")
  endif()
endif()
