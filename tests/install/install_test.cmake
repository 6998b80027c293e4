# Proves that an installed eventfold is usable: installs the build tree into a
# scratch prefix, then configures, builds and runs the consumer project in
# consumer/ against it with find_package(eventfold).
#
#   cmake -DBUILD_DIR=<eventfold build dir> -DSOURCE_DIR=<this folder>
#         -DWORK_DIR=<scratch dir> [-DCONFIG=<config>] -P install_test.cmake
#
# The consumer is configured with the generator, compiler and flags recorded
# in BUILD_DIR's cache, so it builds as the library was built (sanitizer
# flags included). Any failure is a FATAL_ERROR.
cmake_minimum_required(VERSION 3.20)

foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "install_test: pass -D${var}=...")
  endif()
endforeach()
if(NOT EXISTS "${BUILD_DIR}/CMakeCache.txt")
  message(FATAL_ERROR "install_test: ${BUILD_DIR} is not a configured build tree")
endif()

# Reads one entry of the build tree's cache into out (empty when absent).
function(read_cache name out)
  file(STRINGS "${BUILD_DIR}/CMakeCache.txt" lines
       REGEX "^${name}:[A-Z_]+=")
  set(value "")
  if(lines)
    list(GET lines 0 line)
    string(REGEX REPLACE "^${name}:[A-Z_]+=" "" value "${line}")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

read_cache(CMAKE_GENERATOR generator)
read_cache(CMAKE_MAKE_PROGRAM make_program)
read_cache(CMAKE_CXX_COMPILER cxx_compiler)
read_cache(CMAKE_CXX_COMPILER_LAUNCHER cxx_launcher)
read_cache(CMAKE_CXX_FLAGS cxx_flags)
read_cache(CMAKE_EXE_LINKER_FLAGS exe_linker_flags)
read_cache(CMAKE_BUILD_TYPE build_type)
if(NOT DEFINED CONFIG OR CONFIG STREQUAL "")
  set(CONFIG "${build_type}")
endif()
if(CONFIG STREQUAL "")
  set(CONFIG "Release")
endif()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
set(store_dir "${WORK_DIR}/store")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Runs one step; on failure shows its output and stops the test.
function(step what)
  message(STATUS "install_test: ${what}")
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR
      "install_test: ${what} failed (${rc})\n  command: ${cmd}\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# 1. Install.
step("install into ${prefix}"
  "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
  --config "${CONFIG}")

# 2. The installed layout: the package files, and every public header, none
#    of which may include a header of the libraries underneath.
file(GLOB_RECURSE config_files "${prefix}/*/eventfoldConfig.cmake")
if(NOT config_files)
  message(FATAL_ERROR "install_test: no eventfoldConfig.cmake under ${prefix}")
endif()
read_cache(eventfold_SOURCE_DIR project_source)
if(project_source STREQUAL "")
  get_filename_component(project_source "${SOURCE_DIR}/../.." ABSOLUTE)
endif()
file(GLOB_RECURSE source_headers RELATIVE "${project_source}/include"
     "${project_source}/include/eventfold/*.h")
if(NOT source_headers)
  message(FATAL_ERROR "install_test: no headers in include/eventfold")
endif()
foreach(header IN LISTS source_headers)
  set(installed "${prefix}/include/${header}")
  if(NOT EXISTS "${installed}")
    message(FATAL_ERROR "install_test: ${header} was not installed")
  endif()
  file(STRINGS "${installed}" leaks
       REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](leveldb|flatbuffers|simdjson|openssl)[/.]")
  if(leaks)
    message(FATAL_ERROR
      "install_test: public header ${header} includes a dependency's header: ${leaks}")
  endif()
endforeach()

# The README's Embedding program, exactly as written there (its one ```cpp
# block): the consumer project builds it too, and it is run below.
file(READ "${project_source}/README.md" readme)
string(FIND "${readme}" "```cpp\n" snippet_begin)
if(snippet_begin EQUAL -1)
  message(FATAL_ERROR "install_test: README.md has no ```cpp block (the Embedding program)")
endif()
math(EXPR snippet_begin "${snippet_begin} + 7")
string(SUBSTRING "${readme}" ${snippet_begin} -1 snippet)
string(FIND "${snippet}" "```" snippet_end)
string(SUBSTRING "${snippet}" 0 ${snippet_end} snippet)
set(readme_snippet "${WORK_DIR}/readme_embedding.cc")
file(WRITE "${readme_snippet}" "${snippet}")

# 3. Configure the consumer against the prefix only, as the library was built.
set(configure_args
  -S "${SOURCE_DIR}/consumer" -B "${consumer_build}"
  "-DREADME_SNIPPET=${readme_snippet}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_CXX_COMPILER=${cxx_compiler}"
  "-DCMAKE_CXX_FLAGS=${cxx_flags}"
  "-DCMAKE_EXE_LINKER_FLAGS=${exe_linker_flags}"
  "-DCMAKE_BUILD_TYPE=${CONFIG}")
if(NOT generator STREQUAL "")
  list(APPEND configure_args -G "${generator}")
endif()
if(NOT make_program STREQUAL "")
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${make_program}")
endif()
if(NOT cxx_launcher STREQUAL "")
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER_LAUNCHER=${cxx_launcher}")
endif()
step("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})

# It must have found the package just installed, not some other copy.
file(STRINGS "${consumer_build}/CMakeCache.txt" found_dir
     REGEX "^eventfold_DIR:PATH=")
string(REGEX REPLACE "^eventfold_DIR:PATH=" "" found_dir "${found_dir}")
file(REAL_PATH "${found_dir}" found_real)
file(REAL_PATH "${prefix}" prefix_real)
string(FIND "${found_real}/" "${prefix_real}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR
    "install_test: the consumer found eventfold in ${found_dir}, not under ${prefix}")
endif()

# 4. Build and run it.
step("build the consumer"
  "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${CONFIG}")
set(exe "${consumer_build}/consumer")
if(NOT EXISTS "${exe}")
  set(exe "${consumer_build}/${CONFIG}/consumer")
endif()
step("run the consumer" "${exe}" "${store_dir}")
message(STATUS "${step_output}")

# The README's program opens "data/webhooks" (parents created) in its
# working directory, answers 200 and reads the projection back.
set(snippet_exe "${consumer_build}/readme_embedding")
if(NOT EXISTS "${snippet_exe}")
  set(snippet_exe "${consumer_build}/${CONFIG}/readme_embedding")
endif()
file(MAKE_DIRECTORY "${WORK_DIR}/snippet-cwd")
step("run the README's Embedding program"
  "${CMAKE_COMMAND}" -E chdir "${WORK_DIR}/snippet-cwd" "${snippet_exe}")
if(NOT step_output MATCHES "^200 " OR NOT step_output MATCHES "\"state\":\"issued\"")
  message(FATAL_ERROR
    "install_test: the README's Embedding program printed, not 200 and the issued receipt:\n"
    "${step_output}")
endif()
if(NOT EXISTS "${WORK_DIR}/snippet-cwd/data/webhooks/CURRENT")
  message(FATAL_ERROR "install_test: the README's Embedding program made no store at data/webhooks")
endif()
message(STATUS "${step_output}")

# 5. The command, when it was built, is installed too.
if(EXISTS "${BUILD_DIR}/tools/eventfold" AND NOT EXISTS "${prefix}/bin/eventfold")
  message(FATAL_ERROR "install_test: bin/eventfold was not installed")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "install_test: ok")
