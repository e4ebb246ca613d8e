# cmake -DINCLUDE_DIR=<repo>/include -P include_rule.cmake
# The include rule: every header under INCLUDE_DIR/gradsync belongs to a layer and includes
# gradsync headers of its own layer or below only, so that lower layers build, and can be
# understood, without the ones above them. A header that no rule below places fails too, so a
# new header gets a layer when it is added.
#
#   0 foundations       error.hpp types.hpp layout.hpp tags.hpp broadcast_element.hpp codes.hpp
#                       hash.hpp
#                       device/{span,space,cuda}.hpp
#   1 communicator      communicator.hpp subgroup.hpp
#   2 transports        comm/**: a folder per transport, the headers a user includes in it and
#                       its private parts in its detail/; comm/detail/ for what several share
#   3 kernels           kernels/*.hpp
#   4 policies, memory  policy/*.hpp algorithm/memory.hpp device/{memory,policy}.hpp
#   5 algorithms        algorithm/*.hpp plan.hpp broadcast_plan.hpp device/nccl_passthrough.hpp
#   6 the table         plan_table.hpp
#   7 front doors       verify.hpp allreduce.hpp broadcast.hpp device/{reducer,broadcaster}.hpp
#   8 runtime           runtime/*.hpp
#   9 umbrellas         gradsync.hpp device.hpp planner.hpp, and torch.hpp with torch/*.hpp (libtorch)
#
# planner/*.hpp is a pillar beside the layers: it includes layer 0 and planner/ only, and only
# the runtime and the umbrellas (layer 8 and up) include it. planner/calibration.hpp measures
# through the front doors, so it may include up to layer 7 (and planner/), and counts as
# layer 7 for whoever includes it. comm/ never includes algorithm/, plan*.hpp, policy/,
# kernels/ or device/ headers above layer 0, whatever layers those are given. A detail/
# folder is private to the folder above it: only headers under that folder include it.
cmake_minimum_required(VERSION 3.22) # a script's policies: if() does not dereference quoted words
if(NOT INCLUDE_DIR)
  message(FATAL_ERROR "include_rule: pass -DINCLUDE_DIR=<the directory holding gradsync/>")
endif()
set(root "${INCLUDE_DIR}/gradsync")
if(NOT IS_DIRECTORY "${root}")
  message(FATAL_ERROR "include_rule: ${root} is not a directory")
endif()

set(layer_names foundations communicator transports kernels "policies and memories" algorithms "the table"
    "front doors" runtime umbrellas)
set(planner_includer_layer 8) # the lowest layer that may include a planner/ header

# layer_of(<path relative to gradsync/> <out layer> <out kind>): kind is "layer", "planner"
# (the pillar) or "calibration"; layer is "" for a header no rule places.
function(layer_of rel out_layer out_kind)
  set(kind layer)
  set(layer "")
  if(rel MATCHES "^(error|types|layout|tags|broadcast_element|codes|hash)\\.hpp$" OR rel MATCHES "^device/(span|space|cuda)\\.hpp$")
    set(layer 0)
  elseif(rel MATCHES "^(communicator|subgroup)\\.hpp$")
    set(layer 1)
  elseif(rel MATCHES "^comm/.+\\.hpp$")
    set(layer 2)
  elseif(rel MATCHES "^kernels/[^/]+\\.hpp$")
    set(layer 3)
  elseif(rel MATCHES "^policy/[^/]+\\.hpp$" OR rel MATCHES "^algorithm/memory\\.hpp$"
         OR rel MATCHES "^device/(memory|policy)\\.hpp$")
    set(layer 4)
  elseif(rel MATCHES "^algorithm/[^/]+\\.hpp$" OR rel MATCHES "^(plan|broadcast_plan)\\.hpp$"
         OR rel MATCHES "^device/nccl_passthrough\\.hpp$")
    set(layer 5)
  elseif(rel MATCHES "^plan_table\\.hpp$")
    set(layer 6)
  elseif(rel MATCHES "^(verify|allreduce|broadcast)\\.hpp$" OR rel MATCHES "^device/(reducer|broadcaster)\\.hpp$")
    set(layer 7)
  elseif(rel MATCHES "^runtime/[^/]+\\.hpp$")
    set(layer 8)
  elseif(rel MATCHES "^(gradsync|device|planner|torch)\\.hpp$" OR rel MATCHES "^torch/[^/]+\\.hpp$")
    set(layer 9)
  elseif(rel MATCHES "^planner/calibration\\.hpp$")
    set(layer 7)
    set(kind calibration)
  elseif(rel MATCHES "^planner/[^/]+\\.hpp$")
    set(layer 0) # what it may include
    set(kind planner)
  endif()
  set(${out_layer} "${layer}" PARENT_SCOPE)
  set(${out_kind} "${kind}" PARENT_SCOPE)
endfunction()

# describe(<rel> <out>): "<rel> (layer N, name)" or "<rel> (the planner pillar)".
function(describe rel out)
  layer_of("${rel}" layer kind)
  if(kind STREQUAL "planner")
    set(text "${rel} (the planner pillar: layer 0 and planner/ only)")
  elseif(kind STREQUAL "calibration")
    set(text "${rel} (planner pillar, up to layer 7)")
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
    string(APPEND problems "\n  ${file} is assigned to no layer: place it in tests/include_rule.cmake")
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
      string(APPEND problems "\n  ${from_text} includes ${target}, which is assigned to no layer"
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
    elseif(file MATCHES "^comm/" AND (target MATCHES "^(algorithm|policy|kernels)/" OR target MATCHES "^plan[^/]*\\.hpp$"
                                  OR (target MATCHES "^device/" AND NOT to_layer EQUAL 0)))
      set(why "a transport never includes algorithm/, plan*.hpp, policy/, kernels/ or device/ above layer 0")
    elseif(kind STREQUAL "planner")
      if(NOT (to_kind STREQUAL "planner" OR (to_kind STREQUAL "layer" AND to_layer EQUAL 0)))
        set(why "a planner/ header includes only layer 0 and other planner/ headers")
      endif()
    elseif(kind STREQUAL "calibration")
      if(to_kind STREQUAL "layer" AND to_layer GREATER 7)
        set(why "planner/calibration.hpp includes nothing above layer 7")
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

if(problems)
  message(FATAL_ERROR "include_rule: the include rule is broken:${problems}")
endif()
message(STATUS "include_rule: ${checked} headers under ${root} keep the include rule")
