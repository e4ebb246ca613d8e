# cmake -DINCLUDE_DIR=<repo>/include -DWORK_DIR=<scratch> -DHEADER=<path under gradsync/>
#       -DLINE=<an #include line> -DEXPECT=<text> -P include_rule_planted.cmake
# That the include rule catches what it must: copies the headers to WORK_DIR, plants LINE at
# the end of HEADER, and passes only when include_rule.cmake then fails saying EXPECT.
cmake_minimum_required(VERSION 3.22)
foreach(arg INCLUDE_DIR WORK_DIR HEADER LINE EXPECT)
  if(NOT DEFINED ${arg})
    message(FATAL_ERROR "include_rule_planted: pass -D${arg}=...")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(COPY "${INCLUDE_DIR}/gradsync" DESTINATION "${WORK_DIR}")
if(NOT EXISTS "${WORK_DIR}/gradsync/${HEADER}")
  message(FATAL_ERROR "include_rule_planted: there is no gradsync/${HEADER} to plant in")
endif()
file(APPEND "${WORK_DIR}/gradsync/${HEADER}" "\n${LINE}\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DINCLUDE_DIR=${WORK_DIR} -P ${CMAKE_CURRENT_LIST_DIR}/include_rule.cmake
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE "${WORK_DIR}")
string(REPLACE "\n" " " said "${out}${err}")
string(REGEX REPLACE "[ \t]+" " " said "${said}")
if(result EQUAL 0)
  message(FATAL_ERROR "include_rule_planted: the rule let '${LINE}' in gradsync/${HEADER} pass")
endif()
string(FIND "${said}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "include_rule_planted: the rule failed, but without '${EXPECT}': ${said}")
endif()
message(STATUS "include_rule_planted: '${LINE}' in gradsync/${HEADER} caught: ${EXPECT}")
