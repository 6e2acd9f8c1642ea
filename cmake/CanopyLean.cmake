# Lean back-end programs (docs/benchmarks.md, "A back-end's start"; issue 20).
#
# A tree starts one back-end per leaf, so a back-end's start-up is paid hundreds of
# times per launch. Linked as usual it loads ten shared libraries, and the dynamic
# loader resolves some 4,800 symbols of libstdc++, Cap'n Proto, kj, spdlog and fmt
# before main(). canopy_lean_program(TARGET) links a program with all of them
# inside it instead:
#   - libstdc++ and libgcc: -static-libstdc++ -static-libgcc;
#   - Cap'n Proto, kj, libsodium and yaml-cpp (for topologies, when the program holds
#     a front-end too, as the MRNet layer does): their static archives (Debian ships
#     them), taken whole ahead of everything else, so that the shared copies later on
#     the command line are never needed and --as-needed leaves them out;
#   - spdlog and fmt, which Debian ships only as shared libraries: their
#     implementation compiled into the program (lean_log.cpp, beside this file);
#   - --gc-sections drops what the program never calls;
#   - the functions a back-end runs go together at the start of its code, as
#     backend_hot_functions.ld (beside this file; scripts/hot_functions.sh writes
#     it) lists them, so that a running back-end maps about 0.7 MB of its code, not
#     2.4 (Canopy's own code is compiled with -ffunction-sections for this);
#   - its relative relocations are packed (-z pack-relative-relocs, DT_RELR: a few
#     hundred bytes instead of 115 KB, read at every start), where the linker and
#     the C library can.
# What is left to load is libc. Only for programs that load no plugin built
# against the shared C++ library, or that accept two copies of it in one process: a
# back-end loads a plugin only for a state-recoverable filter from a plugin, and the
# tests run one.
#
# CANOPY_LEAN_BACKENDS (default ON) turns it off; it is off in sanitizer builds
# (the sanitizers' runtimes expect the shared C++ library) and where a static archive
# is missing (configure says which).
#
# The same file is installed with the CMake package (docs/packaging.md), so that a
# tool's back-end can be linked the same way; there Canopy_SANITIZED, set by
# CanopyConfig.cmake, says whether the installed libraries need the sanitizers.
option(CANOPY_LEAN_BACKENDS "Link back-end programs with their C++ libraries inside them (faster start)" ON)
set(_canopy_lean_log_source "${CMAKE_CURRENT_LIST_DIR}/lean_log.cpp")

set(canopy_lean_archives "")
if(CANOPY_LEAN_BACKENDS AND (CANOPY_SANITIZE OR Canopy_SANITIZED))
  message(VERBOSE "CANOPY_LEAN_BACKENDS: off in a sanitizer build")
  set(CANOPY_LEAN_BACKENDS OFF)
endif()
if(CANOPY_LEAN_BACKENDS)
  foreach(name capnp kj sodium yaml-cpp)
    find_library(CANOPY_LEAN_${name}_ARCHIVE NAMES lib${name}.a)
    if(NOT CANOPY_LEAN_${name}_ARCHIVE)
      message(NOTICE "CANOPY_LEAN_BACKENDS: off, no lib${name}.a (scripts/setup.sh installs it)")
      set(CANOPY_LEAN_BACKENDS OFF)
      break()
    endif()
    list(APPEND canopy_lean_archives ${CANOPY_LEAN_${name}_ARCHIVE})
  endforeach()
endif()

# The layout and the packing, each if a test program links (and, packed, runs) with
# it: the linker script needs a linker that knows INSERT (GNU ld, lld; not gold),
# packed relocations binutils 2.38 and glibc 2.36.
set(_canopy_lean_hot_script "${CMAKE_CURRENT_LIST_DIR}/backend_hot_functions.ld")
set(_canopy_lean_layout "")
if(CANOPY_LEAN_BACKENDS)
  include(CheckCXXSourceRuns)
  include(CMakePushCheckState)
  cmake_push_check_state(RESET)
  set(CMAKE_REQUIRED_QUIET ON)
  set(_canopy_probe "static int x = 1; int* volatile p = &x; int main() { return *p - 1; }")
  if(EXISTS "${_canopy_lean_hot_script}")
    set(CMAKE_REQUIRED_LINK_OPTIONS "LINKER:-T,${_canopy_lean_hot_script}")
    check_cxx_source_runs("${_canopy_probe}" CANOPY_LEAN_HOT_LAYOUT)
    if(CANOPY_LEAN_HOT_LAYOUT)
      list(APPEND _canopy_lean_layout "LINKER:-T,${_canopy_lean_hot_script}")
    else()
      message(NOTICE "CANOPY_LEAN_BACKENDS: the linker does not take ${_canopy_lean_hot_script}; no hot-code layout")
    endif()
  endif()
  set(CMAKE_REQUIRED_LINK_OPTIONS "LINKER:-z,pack-relative-relocs")
  check_cxx_source_runs("${_canopy_probe}" CANOPY_LEAN_PACKED_RELOCS)
  if(CANOPY_LEAN_PACKED_RELOCS)
    list(APPEND _canopy_lean_layout "LINKER:-z,pack-relative-relocs")
  endif()
  cmake_pop_check_state()
endif()

# spdlog's and fmt's implementation (lean_log.cpp) as object library canopy_lean_log,
# compiled with spdlog::spdlog's definitions but not linked to its shared library;
# made once, by its first user. Position-independent, so that Canopy's MRNet shared
# libraries can hold it too (mrnet/CMakeLists.txt).
function(_canopy_lean_log_objects)
  if(TARGET canopy_lean_log)
    return()
  endif()
  add_library(canopy_lean_log OBJECT ${_canopy_lean_log_source})
  set_target_properties(canopy_lean_log PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_features(canopy_lean_log PRIVATE cxx_std_20)
  # Optimised whatever the tool's build type: unoptimised, fmt's formatting of
  # floating-point numbers calls ceil() from libm, which the back-end would load
  # for it alone.
  target_compile_options(canopy_lean_log PRIVATE -O2)
  target_compile_definitions(canopy_lean_log PRIVATE $<TARGET_PROPERTY:spdlog::spdlog,INTERFACE_COMPILE_DEFINITIONS>)
  target_include_directories(canopy_lean_log PRIVATE $<TARGET_PROPERTY:spdlog::spdlog,INTERFACE_INCLUDE_DIRECTORIES>)
endfunction()

# Links TARGET as a lean program, if CANOPY_LEAN_BACKENDS is on; otherwise nothing
# changes. canopy_lean_program(TARGET SHARED_CXX) keeps libstdc++ and libgcc shared
# and lays out nothing, for a program that loads plugins built against the shared
# C++ library (the commnode: filter plugins): then one copy of it is in the process,
# and every other library is inside the program (a plugin that links one of those
# itself gets its own copy).
function(canopy_lean_program target)
  cmake_parse_arguments(PARSE_ARGV 1 lean "SHARED_CXX" "" "")
  if(NOT CANOPY_LEAN_BACKENDS)
    return()
  endif()
  _canopy_lean_log_objects()
  target_sources(${target} PRIVATE $<TARGET_OBJECTS:canopy_lean_log>)
  set(whole "")
  foreach(archive IN LISTS canopy_lean_archives)
    list(APPEND whole "LINKER:${archive}")
  endforeach()
  set(runtime -static-libstdc++ -static-libgcc)
  set(layout ${_canopy_lean_layout})
  if(lean_SHARED_CXX)
    set(runtime "")
    set(layout "")
  endif()
  # Link options come before the objects and libraries on the command line: the
  # archives, taken whole, define every symbol the shared copies would.
  target_link_options(${target} PRIVATE ${runtime} "LINKER:--as-needed"
    "LINKER:--gc-sections" ${layout} "LINKER:--whole-archive" ${whole} "LINKER:--no-whole-archive")
  if(CANOPY_LEAN_HOT_LAYOUT AND NOT lean_SHARED_CXX)
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${_canopy_lean_hot_script}")
  endif()
endfunction()
