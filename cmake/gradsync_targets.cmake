# Settings for the project's own programs (tests, benchmarks, examples): warnings are
# errors, and GRADSYNC_SANITIZE adds sanitizers to every one of them.
function(gradsync_program target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Werror)
  if(GRADSYNC_SANITIZE)
    # g++ 12's -Wmaybe-uninitialized misfires inside libstdc++ (std::regex, std::function)
    # once sanitizers instrument the code; the warning stays on in unsanitized builds.
    target_compile_options(${target} PRIVATE -fsanitize=${GRADSYNC_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all
      -Wno-maybe-uninitialized)
    target_link_options(${target} PRIVATE -fsanitize=${GRADSYNC_SANITIZE})
  endif()
endfunction()

# The MPI launcher with the flags a 2-core machine running as root needs. Open MPI refuses
# to run as root without --allow-run-as-root and more ranks than cores without --oversubscribe.
function(gradsync_mpiexec_command out ranks)
  set(cmd ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks})
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE version ERROR_QUIET)
  if(version MATCHES "Open MPI|OpenRTE")
    list(APPEND cmd --oversubscribe)
    execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(uid STREQUAL "0")
      list(APPEND cmd --allow-run-as-root)
    endif()
  endif()
  set(${out} ${cmd} ${MPIEXEC_PREFLAGS} PARENT_SCOPE)
endfunction()

# What the project's tests (tests/, examples/) share.
# gradsync_all_cores: the CTest resource lock of tests that keep every core busy (groups of
# ranks as threads or processes, OpenMP). Two of them side by side wait for each other's
# threads and take longer together than one after the other; tests under mpiexec, which mostly
# wait, still run beside them.
# gradsync_test_malloc: glibc's malloc serves blocks up to 256 MiB from its heaps and keeps
# freed memory there, instead of mapping fresh pages for every block over 128 KiB and
# returning them on free. The tests allocate and free many such buffers (inputs, references,
# reducers' scratch), and on virtual machines the page faults of fresh pages took most of
# their time (docs/results.md, "The test suite's time").
set(gradsync_all_cores RESOURCE_LOCK cores)
set(gradsync_test_malloc "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824")

# gradsync_torch_headers(target): target, a program of the project's on libtorch (flags by
# gradsync_program), compiles libtorch's headers precompiled, once per build: parsing
# <torch/torch.h> is about 13 s of each such source. They come first, as they must anyway
# (torch_harness.hpp: glog's CHECK before Catch's); the precompiled header is built with the
# programs' flags, as the compiler requires of a header it reuses.
function(gradsync_torch_headers target)
  if(NOT TARGET gradsync_torch_pch)
    set(source ${PROJECT_BINARY_DIR}/gradsync_torch_pch.cpp)
    file(CONFIGURE OUTPUT ${source} CONTENT "")
    add_library(gradsync_torch_pch OBJECT ${source})
    target_link_libraries(gradsync_torch_pch PRIVATE gradsync::torch)
    target_precompile_headers(gradsync_torch_pch PRIVATE <torch/torch.h>)
    gradsync_program(gradsync_torch_pch)
  endif()
  target_precompile_headers(${target} REUSE_FROM gradsync_torch_pch)
endfunction()
