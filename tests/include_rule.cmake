# cmake -DINCLUDE_DIR=<repo>/include -P include_rule.cmake
# The include rule: every header under INCLUDE_DIR/gradsync belongs to a layer, given by its
# folder alone, and includes gradsync headers of its own layer or below only, so that lower
# layers build, and can be understood, without the ones above them. A header in no layer's
# folder fails too, so a new folder gets a layer when it is added.
#
#   0 foundations        core/
#   1 communicator       comm/*.hpp (the concept and subgroups)
#   2 transports         comm/<transport>/ (a folder per transport)
#   3 kernels            kernels/
#   4 policies, memories policy/ memory/
#   5 plan building      plan/ (the plan contracts, schedules, exchanges, triples)
#   6 algorithms         algorithm/
#   7 selectors          selector/ (automatic, tuned, the plan table)
#   8 collectives        collective/ (allreduce, broadcast, their device forms, the check)
#   9 runtime            runtime/, elastic/
#  10 front doors        the headers at the top of gradsync/, and torch/ (torch.hpp's parts)
#
# planner/ is a pillar beside the layers: it includes layer 0 and planner/ only, and only the
# runtime and up (layer 9 and up) include it. A detail/ folder is private to the folder above
# it: only headers under that folder include it.
cmake_minimum_required(VERSION 3.22) # a script's policies: if() does not dereference quoted words
if(NOT INCLUDE_DIR)
  message(FATAL_ERROR "include_rule: pass -DINCLUDE_DIR=<the directory holding gradsync/>")
endif()
set(root "${INCLUDE_DIR}/gradsync")
if(NOT IS_DIRECTORY "${root}")
  message(FATAL_ERROR "include_rule: ${root} is not a directory")
endif()

set(layer_names foundations communicator transports kernels "policies and memories" "plan building"
    algorithms selectors collectives runtime "front doors")
set(planner_includer_layer 9) # the lowest layer that may include a planner/ header

# layer_of(<path relative to gradsync/> <out layer> <out kind>): kind is "layer" or "planner"
# (the pillar); layer is "" for a header in no layer's folder. Folders only: no file is named.
function(layer_of rel out_layer out_kind)
  set(kind layer)
  set(layer "")
  set(folders core "" "" kernels "policy|memory" plan algorithm selector collective "runtime|elastic")
  if(rel MATCHES "^([a-z_]+)/")
    set(top "${CMAKE_MATCH_1}")
    if(top STREQUAL "comm")
      if(rel MATCHES "^comm/[^/]+\\.hpp$")
        set(layer 1)
      else()
        set(layer 2)
      endif()
    elseif(top STREQUAL "torch")
      set(layer 10)
    elseif(top STREQUAL "planner")
      set(layer 0) # what it may include
      set(kind planner)
    else()
      set(index 0)
      foreach(pattern IN LISTS folders)
        if(pattern AND top MATCHES "^(${pattern})$")
          set(layer ${index})
        endif()
        math(EXPR index "${index} + 1")
      endforeach()
    endif()
  elseif(rel MATCHES "^[^/]+\\.hpp$")
    set(layer 10)
  endif()
  set(${out_layer} "${layer}" PARENT_SCOPE)
  set(${out_kind} "${kind}" PARENT_SCOPE)
endfunction()

# describe(<rel> <out>): "<rel> (layer N, name)" or "<rel> (the planner pillar)".
function(describe rel out)
  layer_of("${rel}" layer kind)
  if(kind STREQUAL "planner")
    set(text "${rel} (the planner pillar: layer 0 and planner/ only)")
  else()
    list(GET layer_names ${layer} name)
    set(text "${rel} (layer ${layer}, ${name})")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files LIST_DIRECTORIES false RELATIVE "${root}" "${root}/*")
list(SORT files)
set(problems "")
set(checked 0)
foreach(file IN LISTS files)
  layer_of("${file}" layer kind)
  if(layer STREQUAL "")
    string(APPEND problems "\n  ${file} is in no layer's folder: give its folder a layer in tests/include_rule.cmake")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  get_filename_component(dir "${file}" DIRECTORY)
  file(STRINGS "${root}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"]")
      continue()
    endif()
    set(target "${CMAKE_MATCH_1}")
    if(target MATCHES "^gradsync/(.+)$")
      set(target "${CMAKE_MATCH_1}")
    elseif(line MATCHES "\"" AND EXISTS "${root}/${dir}/${target}")
      # A quoted include relative to the header: the same rule, under its gradsync/ name.
      if(dir)
        set(target "${dir}/${target}")
      endif()
      cmake_path(SET target NORMALIZE "${target}")
    else()
      continue() # not a gradsync header
    endif()
    layer_of("${target}" to_layer to_kind)
    describe("${file}" from_text)
    if(to_layer STREQUAL "")
      string(APPEND problems "\n  ${from_text} includes ${target}, which is in no layer's folder"
             " (a header that was moved or removed?)")
      continue()
    endif()
    describe("${target}" to_text)
    set(why "")
    set(owner "")
    if(target MATCHES "^(.*/)?detail/")
      set(owner "${CMAKE_MATCH_1}") # the folder whose detail/ it is ("" for the top)
    endif()
    string(LENGTH "${owner}" owner_length)
    string(SUBSTRING "${file}" 0 ${owner_length} file_head)
    if(target MATCHES "/?detail/" AND NOT file_head STREQUAL owner)
      set(why "a detail/ folder is private: only headers under ${owner} include it")
    elseif(kind STREQUAL "planner")
      if(NOT (to_kind STREQUAL "planner" OR (to_kind STREQUAL "layer" AND to_layer EQUAL 0)))
        set(why "a planner/ header includes only layer 0 and other planner/ headers")
      endif()
    elseif(to_kind STREQUAL "planner")
      if(layer LESS planner_includer_layer)
        set(why "only layer ${planner_includer_layer} and up include the planner pillar")
      endif()
    elseif(to_layer GREATER layer)
      set(why "a header includes only its own layer and those below")
    endif()
    if(why)
      string(APPEND problems "\n  ${from_text} includes ${to_text}: ${why}")
    endif()
  endforeach()
endforeach()

if(checked EQUAL 0)
  string(APPEND problems "\n  no header found (INCLUDE_DIR must be an absolute path)")
endif()
if(problems)
  message(FATAL_ERROR "include_rule: the include rule is broken:${problems}")
endif()
message(STATUS "include_rule: ${checked} headers under ${root} keep the include rule")
