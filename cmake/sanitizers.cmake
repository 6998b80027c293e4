# EVENTFOLD_SANITIZE: a comma-separated list of sanitizers compiled into the
# library, the tests, the tools, the benchmarks and the fuzzers, e.g.
# "address,undefined" or "thread". Included before any target is defined, so
# it applies to every target of the project; Debian's prebuilt libraries
# (LevelDB, simdjson, OpenSSL, GoogleTest) stay uninstrumented.

set(EVENTFOLD_SANITIZE "" CACHE STRING
    "Sanitizers to build with: address,undefined | thread | empty for none")

if(EVENTFOLD_SANITIZE)
  string(REPLACE "," ";" _eventfold_sanitizers "${EVENTFOLD_SANITIZE}")
  if("thread" IN_LIST _eventfold_sanitizers AND
     ("address" IN_LIST _eventfold_sanitizers OR
      "leak" IN_LIST _eventfold_sanitizers))
    message(FATAL_ERROR "EVENTFOLD_SANITIZE: thread cannot be combined with "
                        "address or leak")
  endif()
  set(_eventfold_sanitize_flags -fsanitize=${EVENTFOLD_SANITIZE}
      -fno-omit-frame-pointer -g)
  # Any undefined behaviour fails the program (and the test) instead of
  # printing a line the test's result would not show.
  if("undefined" IN_LIST _eventfold_sanitizers)
    list(APPEND _eventfold_sanitize_flags -fno-sanitize-recover=all)
  endif()
  add_compile_options(${_eventfold_sanitize_flags})
  add_link_options(-fsanitize=${EVENTFOLD_SANITIZE})
  message(STATUS "eventfold: sanitizers ${EVENTFOLD_SANITIZE}")
endif()

# The fuzzers need libFuzzer's coverage instrumentation in every object they
# link, the library included; libFuzzer ships with clang only.
if(EVENTFOLD_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "EVENTFOLD_BUILD_FUZZERS needs clang "
                        "(e.g. -DCMAKE_CXX_COMPILER=clang++), not "
                        "${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
