# Runs two commands (FIRST and SECOND, ;-separated lists) that each print one
# "result ... test_accuracy=A parameters=H ..." line and fails unless both print the same
# accuracy and parameter fingerprint: the same training over two transports must end in the
# same bits.
foreach(which FIRST SECOND)
  execute_process(COMMAND ${${which}} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${which} command failed (${rc}): ${${which}}\n${out}\n${err}")
  endif()
  if(NOT out MATCHES "result [^\n]*(test_accuracy=[0-9.]+ parameters=[0-9a-f]+)")
    message(FATAL_ERROR "${which} command printed no result line: ${${which}}\n${out}")
  endif()
  set(${which}_RESULT "${CMAKE_MATCH_1}")
  message(STATUS "${which}: ${CMAKE_MATCH_1}")
endforeach()
if(NOT FIRST_RESULT STREQUAL SECOND_RESULT)
  message(FATAL_ERROR "the runs differ: '${FIRST_RESULT}' and '${SECOND_RESULT}'")
endif()
