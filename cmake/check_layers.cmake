# Fails when a file of one layer includes a header of a layer it does not
# depend on (see cmake/layers.cmake). Run as
#   cmake -DRULES=<rules file> -DSOURCE_DIR=<repo> [-DEXTRA="dir:layers;..."]
#         [-DSTAMP=<file>] -P check_layers.cmake
# EXTRA adds folders outside the library (e.g. tools) with the layers and
# API headers they may use, as "dir=layer,layer=header,header".
# Only quoted includes of a layer folder count ("storage/key_codec.h");
# <system> includes and the public "eventfold/..." headers are always allowed.

cmake_minimum_required(VERSION 3.20)
include(${RULES})

set(problems "")
set(dirs ${LAYERS})
foreach(entry IN LISTS EXTRA)
  string(REPLACE "=" ";" parts "${entry}")
  list(GET parts 0 dir)
  list(GET parts 1 layers)
  string(REPLACE "," ";" layers "${layers}")
  set(api "")
  list(LENGTH parts n)
  if(n GREATER 2)
    list(GET parts 2 api)
    string(REPLACE "," ";" api "${api}")
  endif()
  set(LAYER_ALLOWED_${dir} ${dir} ${layers})
  set(LAYER_API_${dir} ${api})
  list(APPEND dirs ${dir})
endforeach()

foreach(dir IN LISTS dirs)
  file(GLOB_RECURSE files LIST_DIRECTORIES false
    ${SOURCE_DIR}/${dir}/*.h ${SOURCE_DIR}/${dir}/*.cc)
  foreach(f IN LISTS files)
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" header "${line}")
      string(REGEX MATCH "^[^/]+" top "${header}")
      if(NOT header MATCHES "/" OR top STREQUAL "eventfold")
        continue()
      endif()
      if(NOT top IN_LIST LAYERS AND NOT top IN_LIST dirs)
        continue()  # not a layer folder (e.g. generated code of a layer's own)
      endif()
      if(top IN_LIST LAYER_ALLOWED_${dir} OR header IN_LIST LAYER_API_${dir})
        continue()
      endif()
      file(RELATIVE_PATH rel ${SOURCE_DIR} ${f})
      string(APPEND problems "  ${rel} includes \"${header}\": layer '${dir}' "
        "may use only: ${LAYER_ALLOWED_${dir}} ${LAYER_API_${dir}}\n")
    endforeach()
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "eventfold layer check: includes against the layer "
    "order (cmake/layers.cmake):\n${problems}")
endif()
if(STAMP)
  file(TOUCH ${STAMP})
endif()
