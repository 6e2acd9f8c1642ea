# Sourced by scripts/build.sh and scripts/fuzz.sh: compile through ccache where it is
# installed (scripts/setup.sh installs it), into the array `compiler_cache`, cmake
# arguments to add (empty without ccache, or with CANOPY_CCACHE=0).
#
# Keys are made independent of where the checkout is (base_dir: paths under it are
# hashed relative to it; no working directory in the hash), so that a fresh clone, as
# CI makes one, compiles only what differs from a build made before on the same
# machine. The price: ccache gives the compiler paths under the checkout relative to
# the build directory, so line tables and __FILE__ name sources as ../../core/x.cpp,
# from the build directory of the checkout that compiled them first (backtraces and
# `canopy stack --lines` still name file and line; a debugger may look for the
# sources in that other checkout).
# docs/testing.md, "Build time".
# shellcheck shell=bash
compiler_cache=()
if [ "${CANOPY_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$here}"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  # Three builds (gcc, clang with sanitizers, clang for fuzzing) of about 1 GB each.
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-8G}"
  compiler_cache=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  compiler_cache=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
fi
