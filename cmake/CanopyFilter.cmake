# canopy_add_filter(<target> <source>...): builds a Canopy filter plugin.
#
# Creates a MODULE library, the kind of shared object that is only ever dlopen()ed,
# linked to Canopy::filter_api and compiled as C++20. Load it with
# Network::load_filter("<dir>/<target>.so", "<name>") or `canopy run --plugin`.
#
#   find_package(Canopy REQUIRED)
#   canopy_add_filter(int_add int_add_filter.cpp)   # builds int_add.so
#
# Choices, and why:
#   - No `lib` prefix: the file is <target>.so. A plugin is named by its path, never
#     by `-l`, so the prefix would only be noise in load_filter() calls.
#   - Hidden visibility: the only symbol a plugin must export is the descriptor entry
#     point canopy_filter_<name>, which CANOPY_FILTER(name, Class) marks with default
#     visibility. Hidden helpers cannot clash with those of another plugin or of the
#     node that loads it.
#   - On ELF platforms the static Canopy code linked in for packets (Canopy::packet,
#     through Canopy::filter_api) is kept out of the dynamic symbol table too
#     (--exclude-libs), for the same reason.
# The plugin must be built with the same compiler and standard library as the Canopy
# that loads it; the loader checks the ABI version and type layout (docs/filters.md).
#
# This file is included by CanopyConfig.cmake (installed package) and by Canopy's own
# CMakeLists.txt (build tree), where Canopy::filter_api is an alias.
include_guard(GLOBAL)

function(canopy_add_filter target)
  if(ARGC LESS 2)
    message(FATAL_ERROR "canopy_add_filter(${target}): give at least one source file, "
                        "e.g. canopy_add_filter(${target} ${target}.cpp)")
  endif()
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE Canopy::filter_api)
  target_compile_features(${target} PRIVATE cxx_std_20)
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(CMAKE_SYSTEM_NAME MATCHES "Linux|BSD")
    target_link_options(${target} PRIVATE "LINKER:--exclude-libs,ALL")
  endif()
endfunction()
