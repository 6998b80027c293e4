# The library's layers. Each layer is a folder and a static library target;
# a layer may use only the layers declared before it, so the link graph is a
# one-way chain by construction:
#
#   core -> storage -> replay -> store      (the Store implementation)
#   core -> receiver, subscription          (on the public API only)
#
# eventfold_layer() also records which folders a layer's files may include
# (its own, its dependencies' and, transitively, theirs; plus the public
# include/eventfold/ and any single headers named in API). The
# `eventfold_layer_check` target runs cmake/check_layers.cmake over every
# layer before anything compiles, so an include that goes up or sideways -
# the start of a cycle - fails the build with the file and line.

set(EVENTFOLD_LAYERS "" CACHE INTERNAL "")

# eventfold_layer(<name> SOURCES <files...> [DEPENDS <layers...>]
#                 [API <headers of lower layers this one may use...>]
#                 [PRIVATE_LIBS <targets...>])
function(eventfold_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPENDS;API;PRIVATE_LIBS" ${ARGN})
  set(target eventfold_${name})
  set(allowed ${name})
  foreach(dep IN LISTS L_DEPENDS)
    if(NOT dep IN_LIST EVENTFOLD_LAYERS)
      message(FATAL_ERROR "layer ${name} depends on ${dep}, which is not a "
        "layer declared before it: layers link one way only")
    endif()
    list(APPEND allowed ${EVENTFOLD_LAYER_ALLOWED_${dep}})
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set(EVENTFOLD_LAYER_ALLOWED_${name} ${allowed} CACHE INTERNAL "")
  set(EVENTFOLD_LAYER_API_${name} ${L_API} CACHE INTERNAL "")
  set(EVENTFOLD_LAYERS ${EVENTFOLD_LAYERS} ${name} CACHE INTERNAL "")

  add_library(${target} STATIC ${L_SOURCES})
  add_dependencies(${target} eventfold_layer_check)
  target_include_directories(${target}
    PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE
      ${PROJECT_SOURCE_DIR}
      ${PROJECT_BINARY_DIR}/generated)
  set(deps)
  foreach(dep IN LISTS L_DEPENDS)
    list(APPEND deps eventfold_${dep})
  endforeach()
  target_link_libraries(${target} PUBLIC ${deps} Threads::Threads
    PRIVATE ${L_PRIVATE_LIBS})
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
endfunction()

# Writes the rules every layer was declared with, for check_layers.cmake.
function(eventfold_write_layer_rules file)
  set(text "")
  foreach(name IN LISTS EVENTFOLD_LAYERS)
    string(APPEND text "set(LAYER_ALLOWED_${name} \"${EVENTFOLD_LAYER_ALLOWED_${name}}\")\n")
    string(APPEND text "set(LAYER_API_${name} \"${EVENTFOLD_LAYER_API_${name}}\")\n")
  endforeach()
  string(APPEND text "set(LAYERS \"${EVENTFOLD_LAYERS}\")\n")
  file(GENERATE OUTPUT ${file} CONTENT "${text}")
endfunction()
