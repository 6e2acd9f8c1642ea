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

set(canopy_installed_programs canopy canopy-commnode canopy-demo-backend canopy-stackd canopy-bulk-task)
set_target_properties(canopy PROPERTIES EXPORT_NAME canopy)
set_target_properties(canopy-commnode PROPERTIES EXPORT_NAME commnode)
set_target_properties(canopy-demo-backend PROPERTIES EXPORT_NAME demo_backend)
set_target_properties(canopy-stackd PROPERTIES EXPORT_NAME stackd)
set_target_properties(canopy-bulk-task PROPERTIES EXPORT_NAME bulk_task)
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

# The manual page (written from canopy's help: tools/CMakeLists.txt) and the docs.
install(FILES ${PROJECT_BINARY_DIR}/man/canopy.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/canopy)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/canopy)

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
  ${CMAKE_CURRENT_LIST_DIR}/CanopyLean.cmake
  ${CMAKE_CURRENT_LIST_DIR}/backend_hot_functions.ld
  ${CMAKE_CURRENT_LIST_DIR}/lean_log.cpp
  DESTINATION ${canopy_package_dir})

# A sanitized build's static libraries need the sanitizer runtimes in every program
# and plugin that links them.
if(CANOPY_SANITIZE)
  set_property(TARGET canopy_packet APPEND PROPERTY
    INTERFACE_LINK_OPTIONS $<INSTALL_INTERFACE:-fsanitize=address,undefined>)
endif()

# pkg-config files, for Makefile, autotools and Spack builds (docs/packaging.md):
#   canopy-frontend.pc   tool front-ends, as Canopy::frontend
#   canopy-backend.pc    tool back-ends, as Canopy::backend
#   canopy-filter.pc     filter plugins, as Canopy::filter_api
#   canopy.pc            all of the above (a program may be both), and `commnode`
# Libs lists the static libraries in link order (a library before those it uses) and
# Requires the .pc modules of what they link; both are computed from the same target
# graph as the export set. The libraries being static, the dependencies are public
# (Requires, Libs), not .private: a plain `pkg-config --libs` links.

# What a library of this project links that is not one of its own, as pkg-config
# says it: a module for Requires, or flags for Libs. A dependency added to the
# libraries must be named here (configure says so), as in CanopyConfig.cmake.in.
function(canopy_pkgconfig_external item out_module out_flags)
  set(module "")
  set(flags "")
  if(item MATCHES "^CapnProto::(capnp|kj)$")
    set(module ${CMAKE_MATCH_1})
  elseif(item STREQUAL "spdlog::spdlog")
    set(module spdlog)  # spdlog.pc requires fmt
  elseif(item MATCHES "^(yaml-cpp::)?yaml-cpp$")
    set(module yaml-cpp)
  elseif(item STREQUAL "PkgConfig::SODIUM")
    set(module libsodium)
  elseif(item STREQUAL "Threads::Threads")
    set(flags -pthread)
  elseif(item STREQUAL "Boost::headers")
    # Header-only: Asio is compiled into the libraries, the public headers include no Boost.
  elseif(item MATCHES "^[A-Za-z0-9_+.-]+$" AND NOT TARGET "${item}")
    set(flags -l${item})  # a system library by name, such as ${CMAKE_DL_LIBS}
  else()
    message(FATAL_ERROR "cmake/CanopyInstall.cmake: Canopy's installed libraries link "
      "'${item}', which canopy_pkgconfig_external() cannot name in the pkg-config files: add it there.")
  endif()
  set(${out_module} "${module}" PARENT_SCOPE)
  set(${out_flags} "${flags}" PARENT_SCOPE)
endfunction()

# Depth-first walk of the link graph; the state is in global properties.
function(canopy_pkgconfig_visit item)
  string(REGEX REPLACE "^\\$<(LINK_ONLY|BUILD_INTERFACE):(.*)>$" "\\2" item "${item}")
  if(item STREQUAL "" OR item MATCHES "^::@")  # a directory scope marker of LINK_LIBRARIES
    return()
  endif()
  if(TARGET "${item}")
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      set(item ${aliased})
    endif()
    get_target_property(imported ${item} IMPORTED)
  else()
    set(imported TRUE)
  endif()
  if(imported)
    canopy_pkgconfig_external("${item}" module flags)
    set_property(GLOBAL APPEND PROPERTY canopy_pc_modules ${module})
    set_property(GLOBAL APPEND PROPERTY canopy_pc_flags ${flags})
    return()
  endif()
  get_property(seen GLOBAL PROPERTY canopy_pc_seen)
  if(item IN_LIST seen)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY canopy_pc_seen ${item})
  foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(linked ${item} ${property})
    if(linked)
      foreach(next IN LISTS linked)
        canopy_pkgconfig_visit("${next}")
      endforeach()
    endif()
  endforeach()
  # After everything it links: reversed, this is the link order.
  set_property(GLOBAL APPEND PROPERTY canopy_pc_postorder ${item})
endfunction()

# The relative directories are taken from the .pc file's own place (${pcfiledir}), as
# the prefix is only known at install time (`cmake --install --prefix`). An absolute
# CMAKE_INSTALL_LIBDIR gives configure-time absolute paths instead.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(pc_prefix "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH pc_up "/canopy/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/canopy")
  string(REGEX REPLACE "/$" "" pc_up "${pc_up}")
  set(pc_prefix "\${pcfiledir}/${pc_up}")
endif()
foreach(dir LIBDIR INCLUDEDIR BINDIR)
  string(TOLOWER ${dir} var)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(pc_${var} "${CMAKE_INSTALL_${dir}}")
  else()
    set(pc_${var} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()

# canopy_pkgconfig_file(<name> <description> <variables> <target>...)
function(canopy_pkgconfig_file pc_file pc_description pc_variables)
  foreach(property seen postorder modules flags)
    set_property(GLOBAL PROPERTY canopy_pc_${property} "")
  endforeach()
  foreach(root IN LISTS ARGN)
    canopy_pkgconfig_visit(${root})
  endforeach()
  get_property(order GLOBAL PROPERTY canopy_pc_postorder)
  get_property(modules GLOBAL PROPERTY canopy_pc_modules)
  get_property(flags GLOBAL PROPERTY canopy_pc_flags)
  list(REVERSE order)
  list(REMOVE_DUPLICATES modules)
  list(REMOVE_DUPLICATES flags)
  set(libs "-L\${libdir}")
  foreach(library IN LISTS order)
    get_target_property(type ${library} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      if(NOT library IN_LIST canopy_installed_libraries)
        message(FATAL_ERROR "${pc_file}.pc would link ${library}, which is not installed")
      endif()
      get_target_property(name ${library} OUTPUT_NAME)
      if(NOT name)
        set(name ${library})
      endif()
      string(APPEND libs " -l${name}")
    elseif(NOT type STREQUAL "INTERFACE_LIBRARY")
      message(FATAL_ERROR "${pc_file}.pc: ${library} is a ${type}; the pkg-config files "
        "know only static libraries")
    endif()
  endforeach()
  if(CANOPY_SANITIZE)
    list(APPEND flags -fsanitize=address,undefined)
  endif()
  foreach(flag IN LISTS flags)
    string(APPEND libs " ${flag}")
  endforeach()
  if(pc_variables)
    string(APPEND pc_variables "\n")
  endif()
  list(JOIN modules " " pc_requires)
  set(pc_libs "${libs}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/canopy.pc.in
    ${PROJECT_BINARY_DIR}/pkgconfig/${pc_file}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc_file}.pc
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

set(canopy_pc_commnode "# The commnode program, for LaunchOptions::commnode_exe\ncommnode=\${bindir}/canopy-commnode")
canopy_pkgconfig_file(canopy-frontend "Canopy tool front-ends (canopy::Network)"
  "${canopy_pc_commnode}" canopy_frontend)
canopy_pkgconfig_file(canopy-backend "Canopy tool back-ends (canopy::Backend)"
  "" canopy_backend)
canopy_pkgconfig_file(canopy-filter
  "Canopy filter plugins; build with -shared -fPIC -fvisibility=hidden -fvisibility-inlines-hidden -Wl,--exclude-libs,ALL"
  "" canopy_filter_api)
canopy_pkgconfig_file(canopy "Canopy, a tree-based overlay network for HPC tools: front-ends, back-ends and filter plugins"
  "${canopy_pc_commnode}" canopy_frontend canopy_backend canopy_filter_api)

# MRNet's API (docs/mrnet.md): libcanopy_mrnet.so (C++, Canopy::mrnet),
# libcanopy_mrnet_lightweight.so (C back-ends, Canopy::mrnet_lightweight) and the
# filter plug-in canopy_mrnet_filters.so, which libcanopy_mrnet.so finds next to itself.
# Shared libraries with the Canopy code inside, so that a tool links them alone, as
# it linked -lmrnet. Headers under include/mrnet and include/mrnet_lightweight, with
# the names MRNet tools include.
set(canopy_mrnet_installed canopy_mrnet)
set_target_properties(canopy_mrnet PROPERTIES EXPORT_NAME mrnet)
if(TARGET canopy_mrnet_lightweight)
  # With its static form (Canopy::mrnet_lightweight_static), for lean C back-ends,
  # and the MRNet packet code that form needs.
  list(APPEND canopy_mrnet_installed canopy_mrnet_lightweight canopy_mrnet_lightweight_static canopy_mrnet_packet)
  set_target_properties(canopy_mrnet_lightweight PROPERTIES EXPORT_NAME mrnet_lightweight)
  set_target_properties(canopy_mrnet_lightweight_static PROPERTIES EXPORT_NAME mrnet_lightweight_static)
  set_target_properties(canopy_mrnet_packet PROPERTIES EXPORT_NAME mrnet_packet)
endif()
# The static layer (Canopy::mrnet_static), for lean MRNet back-ends, and the part
# of it that reads MRNet's five back-end arguments.
list(APPEND canopy_mrnet_installed canopy_mrnet_static canopy_mrnet_backend_args)
set_target_properties(canopy_mrnet_static PROPERTIES EXPORT_NAME mrnet_static)
set_target_properties(canopy_mrnet_backend_args PROPERTIES EXPORT_NAME mrnet_backend_args)
install(TARGETS ${canopy_mrnet_installed}
  EXPORT CanopyTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET canopy_mrnet_filters)
  install(TARGETS canopy_mrnet_filters LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mrnet ${PROJECT_SOURCE_DIR}/include/mrnet_lightweight
  ${PROJECT_SOURCE_DIR}/include/xplat ${PROJECT_SOURCE_DIR}/include/xplat_lightweight
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} OPTIONAL FILES_MATCHING PATTERN "*.h")
# Their pkg-config files: one shared library each, found at run time through an
# RPATH to the installed libdir, as MRNet's users find libmrnet.so.
# A make fragment with MRNet's Makefile variables (BINDIR, CXXFLAGS, LIBS,
# LIBS_LIGHTWEIGHT, SOFLAGS...), so that Makefiles written for MRNet, its own examples
# among them, build unchanged: make -f PREFIX/share/canopy/mrnet-examples.mk. It
# finds the prefix from its own place, as the .pc files do.
if(TARGET canopy_mrnet)
  file(RELATIVE_PATH mk_up "/canopy/${CMAKE_INSTALL_DATAROOTDIR}/canopy" "/canopy")
  string(REGEX REPLACE "/$" "" mk_up "${mk_up}")
  foreach(dir LIBDIR INCLUDEDIR)
    string(TOLOWER ${dir} var)
    if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
      set(mk_${var} "${CMAKE_INSTALL_${dir}}")
    else()
      set(mk_${var} "$(canopy_prefix)/${CMAKE_INSTALL_${dir}}")
    endif()
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/canopy-mrnet-examples.mk.in
    ${PROJECT_BINARY_DIR}/share/mrnet-examples.mk @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/share/mrnet-examples.mk DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/canopy)
endif()
foreach(pc mrnet mrnet-lightweight)
  string(REPLACE "-" "_" library "canopy_${pc}")
  if(NOT TARGET ${library})
    continue()
  endif()
  set(pc_file canopy-${pc})
  set(pc_cflags "-I\${includedir}")
  if(pc STREQUAL "mrnet")
    set(pc_description "MRNet 5.0.1's C++ API on Canopy: front-ends, back-ends and filter functions (docs/mrnet.md)")
    set(pc_cflags "${pc_cflags} -std=c++20")
  else()
    set(pc_description "MRNet 5.0.1's lightweight C back-end API on Canopy (docs/mrnet.md)")
  endif()
  set(pc_libs "-L\${libdir} -Wl,-rpath,\${libdir} -l${library}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/canopy-mrnet.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${pc_file}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${pc_file}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# Debug information, split off (docs/packaging.md, "Debug information"). The build
# keeps line tables (-g1) for backtraces and profiles, and a tool linked against the
# installed static libraries would carry all of them: 80 MB for 2 MB of code. So the
# installed programs and libraries carry none. Programs and shared libraries keep a
# GNU debuglink to their debug information, installed beside them in .debug/, where
# gdb and perf find it; the static libraries as built go to <libdir>/debug/, for a
# tool that wants their line tables in its own binary (link with -L<prefix>/lib/debug
# first). CANOPY_INSTALL_DEBUG_INFO=keep installs everything as built.
set(CANOPY_INSTALL_DEBUG_INFO split CACHE STRING
  "split: install programs and libraries without debug information, kept apart; keep: install them as built")
set_property(CACHE CANOPY_INSTALL_DEBUG_INFO PROPERTY STRINGS split keep)
if(CANOPY_INSTALL_DEBUG_INFO STREQUAL "split")
  if(NOT CMAKE_OBJCOPY)
    message(FATAL_ERROR "CANOPY_INSTALL_DEBUG_INFO=split needs objcopy (binutils); or set it to keep")
  endif()
  install(CODE "
    set(canopy_split_objcopy \"${CMAKE_OBJCOPY}\")
    set(canopy_split_dirs \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\"
                          \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
    set(canopy_split_archive_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/debug\")")
  install(SCRIPT ${CMAKE_CURRENT_LIST_DIR}/CanopySplitDebug.cmake)
elseif(NOT CANOPY_INSTALL_DEBUG_INFO STREQUAL "keep")
  message(FATAL_ERROR "CANOPY_INSTALL_DEBUG_INFO is split or keep, not '${CANOPY_INSTALL_DEBUG_INFO}'")
endif()
