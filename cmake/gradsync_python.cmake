# Finds what the Python package (python/) builds against: Debian's /usr/bin/python3 (the first
# python3 on PATH may be another interpreter) importing torch, its headers, pybind11's, and
# libtorch_python. Sets GRADSYNC_PYTHON_FOUND and, when found, the variables python/CMakeLists.txt
# reads.
set(GRADSYNC_PYTHON_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "The Python whose torch the backend is built for")
set(GRADSYNC_PYTHON_FOUND OFF)
# g++ only: clang 14 stops in Debian's torch 1.13 headers (ATen/core/ivalue_inl.h) with g++ 12's
# standard library.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  message(STATUS "gradsync: the Python package is built with g++ only (Debian's torch headers do not compile with ${CMAKE_CXX_COMPILER_ID})")
elseif(TORCH_FOUND AND TARGET gradsync_gloo AND EXISTS "${GRADSYNC_PYTHON_EXECUTABLE}")
  execute_process(
    COMMAND "${GRADSYNC_PYTHON_EXECUTABLE}" -c
      "import sysconfig, torch, pybind11; print(sysconfig.get_paths()['include']); print(pybind11.get_include()); print(sysconfig.get_config_var('EXT_SUFFIX')); import sys; print('%d.%d' % sys.version_info[:2])"
    OUTPUT_VARIABLE found ERROR_QUIET RESULT_VARIABLE status OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_library(GRADSYNC_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib)
  if(status EQUAL 0 AND GRADSYNC_TORCH_PYTHON_LIBRARY)
    string(REPLACE "\n" ";" found "${found}")
    list(GET found 0 python_include)
    list(GET found 1 pybind11_include)
    list(GET found 2 GRADSYNC_PYTHON_SUFFIX)
    list(GET found 3 python_version)
    # Where Debian's python3 looks: /usr/lib/python3/dist-packages for its own packages,
    # <prefix>/lib/python3.X/dist-packages for others (/usr/local by default).
    if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
      set(GRADSYNC_PYTHON_INSTALL_DIR lib/python3/dist-packages)
    else()
      set(GRADSYNC_PYTHON_INSTALL_DIR lib/python${python_version}/dist-packages)
    endif()
    set(GRADSYNC_PYTHON_INCLUDE_DIRS ${python_include} ${pybind11_include})
    set(GRADSYNC_PYTHON_FOUND ON)
  endif()
endif()
if(NOT GRADSYNC_PYTHON_FOUND AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  message(STATUS "gradsync: the Python package is not built (needs python3-torch, python3-pybind11, libtorch-dev, libgloo-dev)")
endif()
