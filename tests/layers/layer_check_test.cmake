# ctest: the layer check (cmake/check_layers.cmake) passes on this tree and
# fails on a tree where a lower layer includes a higher one.
#   cmake -DRULES=<rules> -DSOURCE_DIR=<repo> -DWORK_DIR=<scratch> -P layer_check_test.cmake

set(checker ${SOURCE_DIR}/cmake/check_layers.cmake)

execute_process(COMMAND ${CMAKE_COMMAND} -DRULES=${RULES} -DSOURCE_DIR=${SOURCE_DIR}
  -P ${checker} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the layer check fails on the tree itself:\n${out}")
endif()

# A cycle: storage (below store) includes the Store implementation, and core
# includes storage.
file(REMOVE_RECURSE ${WORK_DIR})
file(WRITE ${WORK_DIR}/storage/bad.cc "#include \"store/store_impl.h\"\n#include <vector>\n")
file(WRITE ${WORK_DIR}/core/bad.h "  #  include \"storage/key_codec.h\" // up\n")
file(WRITE ${WORK_DIR}/store/fine.cc "#include \"storage/key_codec.h\"\n#include \"core/fold.h\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -DRULES=${RULES} -DSOURCE_DIR=${WORK_DIR}
  -P ${checker} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "the layer check accepted storage -> store and core -> storage")
endif()
foreach(expected "storage/bad.cc includes \"store/store_impl.h\""
                 "core/bad.h includes \"storage/key_codec.h\"")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the layer check did not report: ${expected}\n${out}")
  endif()
endforeach()
string(FIND "${out}" "store/fine.cc" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "the layer check refused a downward include:\n${out}")
endif()
message(STATUS "layer check: passes on the tree, refuses upward includes")
