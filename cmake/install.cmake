# Install rules and the CMake package for eventfold, in the style of fmt's.
# Included by the top-level CMakeLists.txt when EVENTFOLD_INSTALL is on, after
# every target is defined.
#
# Consumers use it as:
#   find_package(eventfold 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE eventfold::eventfold)

include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(EVENTFOLD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/eventfold CACHE STRING
  "Installation directory for eventfold's CMake package files, relative to CMAKE_INSTALL_PREFIX or absolute.")

set(eventfold_targets_export_name eventfoldTargets)
set(eventfold_project_config ${PROJECT_BINARY_DIR}/eventfoldConfig.cmake)
set(eventfold_version_config ${PROJECT_BINARY_DIR}/eventfoldConfigVersion.cmake)

# The library: an interface target over its layers (cmake/layers.cmake),
# each a static library. Being static, so its private dependencies (LevelDB,
# FlatBuffers, simdjson, OpenSSL) become link dependencies of the consumer:
# eventfoldConfig.cmake finds them before it loads the targets.
install(TARGETS eventfold eventfold_core eventfold_storage eventfold_replay
    eventfold_store eventfold_receiver eventfold_subscription eventfold_http
  EXPORT ${eventfold_targets_export_name}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The public API: include/eventfold/*.h only. Internal headers (core/,
# storage/, replay/) and flatc output stay private.
install(DIRECTORY ${eventfold_SOURCE_DIR}/include/eventfold
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

# The `eventfold` command, when it is built.
if(TARGET eventfold-cli)
  install(TARGETS eventfold-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

write_basic_package_version_file(${eventfold_version_config}
  VERSION ${eventfold_VERSION}
  COMPATIBILITY SameMajorVersion)

configure_package_config_file(
  ${eventfold_SOURCE_DIR}/cmake/eventfoldConfig.cmake.in
  ${eventfold_project_config}
  INSTALL_DESTINATION ${EVENTFOLD_CMAKE_DIR})

# Lets another build use this build tree directly (eventfold_DIR=<build dir>).
export(EXPORT ${eventfold_targets_export_name}
  NAMESPACE eventfold::
  FILE ${PROJECT_BINARY_DIR}/${eventfold_targets_export_name}.cmake)

install(EXPORT ${eventfold_targets_export_name}
  NAMESPACE eventfold::
  DESTINATION ${EVENTFOLD_CMAKE_DIR})

install(FILES ${eventfold_project_config} ${eventfold_version_config}
  DESTINATION ${EVENTFOLD_CMAKE_DIR})
