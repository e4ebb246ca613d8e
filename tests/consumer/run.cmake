# cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DLAUNCH="mpiexec;-n;2;..." [-DEXPECT_CUDA=ON] [-DEXPECT_TORCH=ON]
#       [-DEXPECT_GLOO=ON] -P run.cmake
# Installs the gradsync build in BUILD_DIR into a fresh prefix under WORK_DIR, configures and
# builds SOURCE_DIR (this consumer project) against that prefix only, and runs it with LAUNCH.
file(REMOVE_RECURSE "${WORK_DIR}")
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package.consumer: ${what} failed (${rc})")
  endif()
endfunction()
step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
step("configure" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "-DGRADSYNC_EXPECT_CUDA=${EXPECT_CUDA}"
     "-DGRADSYNC_EXPECT_TORCH=${EXPECT_TORCH}" "-DGRADSYNC_EXPECT_GLOO=${EXPECT_GLOO}")
step("build" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
step("run" ${LAUNCH} "${WORK_DIR}/build/consumer")
if(EXPECT_GLOO)
  step("run the Gloo consumer" "${WORK_DIR}/build/consumer_gloo" "${WORK_DIR}/store")
endif()
