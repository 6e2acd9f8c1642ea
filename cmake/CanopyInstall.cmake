# What `cmake --install` puts under the prefix (docs/packaging.md):
#   include/canopy/*.h                  the public headers
#   lib/libcanopy_*.a                   the static libraries behind Canopy::frontend,
#                                       Canopy::backend and Canopy::filter_api
#   bin/canopy, canopy-commnode, canopy-demo-backend, canopy-stackd (and canopy-bench if built)
#   lib/cmake/Canopy/                   the CMake package: CanopyConfig.cmake,
#                                       CanopyConfigVersion.cmake, CanopyTargets*.cmake,
#                                       CanopyFilter.cmake (canopy_add_filter)
# Included by the top-level CMakeLists.txt after every target is defined.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Filter plugins compile against the public headers and link the packet code, which
# they call through Packet::pack/unpack/format (docs/filters.md).
add_library(canopy_filter_api INTERFACE)
add_library(Canopy::filter_api ALIAS canopy_filter_api)
target_link_libraries(canopy_filter_api INTERFACE canopy_packet)

# The public headers use C++20 (concepts, std::span): say so to every user, so that a
# consumer project that forgets CMAKE_CXX_STANDARD still compiles them.
set_property(TARGET canopy_packet canopy_filter_api APPEND PROPERTY INTERFACE_COMPILE_FEATURES cxx_std_20)

# Canopy::frontend and Canopy::backend are static libraries built on static
# libraries, so every library of this project they link, directly or not, is
# installed and exported as well. The list is computed rather than written out, so
# that a library added to the build later cannot leave the export set incomplete
# (which would fail every configure).
function(canopy_linked_libraries out)
  set(found "")
  set(queue ${ARGN})
  while(queue)
    list(POP_FRONT queue item)
    # $<LINK_ONLY:x>, $<BUILD_INTERFACE:x>: look at x; other expressions are not targets.
    string(REGEX REPLACE "^\\$<(LINK_ONLY|BUILD_INTERFACE):(.*)>$" "\\2" item "${item}")
    if(NOT TARGET "${item}")
      continue()  # a plain library name such as dl, or a generator expression
    endif()
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
    get_target_property(imported ${item} IMPORTED)
    if(imported OR item IN_LIST found)
      continue()
    endif()
    list(APPEND found ${item})
    foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(linked ${item} ${property})
      if(linked)
        list(APPEND queue ${linked})
      endif()
    endforeach()
  endwhile()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

canopy_linked_libraries(canopy_installed_libraries canopy_frontend canopy_backend canopy_filter_api)
foreach(library IN LISTS canopy_installed_libraries)
  string(REGEX REPLACE "^canopy_" "" export_name ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${export_name})
endforeach()

set(canopy_installed_programs canopy canopy-commnode canopy-demo-backend canopy-stackd)
set_target_properties(canopy PROPERTIES EXPORT_NAME canopy)
set_target_properties(canopy-commnode PROPERTIES EXPORT_NAME commnode)
set_target_properties(canopy-demo-backend PROPERTIES EXPORT_NAME demo_backend)
set_target_properties(canopy-stackd PROPERTIES EXPORT_NAME stackd)
if(TARGET canopy-bench)
  list(APPEND canopy_installed_programs canopy-bench)
  set_target_properties(canopy-bench PROPERTIES EXPORT_NAME bench)
endif()

install(TARGETS ${canopy_installed_libraries} ${canopy_installed_programs}
  EXPORT CanopyTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/canopy
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

set(canopy_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Canopy)
install(EXPORT CanopyTargets NAMESPACE Canopy:: DESTINATION ${canopy_package_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/CanopyConfig.cmake.in
  ${PROJECT_BINARY_DIR}/CanopyConfig.cmake
  INSTALL_DESTINATION ${canopy_package_dir})
# 0.x: a minor version may change the API and the filter ABI.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/CanopyConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/CanopyConfig.cmake
  ${PROJECT_BINARY_DIR}/CanopyConfigVersion.cmake
  ${CMAKE_CURRENT_LIST_DIR}/CanopyFilter.cmake
  DESTINATION ${canopy_package_dir})

# A sanitized build's static libraries need the sanitizer runtimes in every program
# and plugin that links them.
if(CANOPY_SANITIZE)
  set_property(TARGET canopy_packet APPEND PROPERTY
    INTERFACE_LINK_OPTIONS $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
endif()
