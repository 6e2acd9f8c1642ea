#!/usr/bin/env bash
# Configures and builds Canopy. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# Installs missing Debian packages first (scripts/setup.sh). CANOPY_TARGETS="a b ..."
# builds only those targets, and installs only what building needs
# (setup.sh --build-only): scripts/run.sh's quick first build.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
shift || true
if [ -n "${CANOPY_TARGETS:-}" ]; then "$here/scripts/setup.sh" --build-only; else "$here/scripts/setup.sh"; fi
# RelWithDebInfo with line tables only (-g1), not gcc's full debug information (-g):
# backtraces, sanitizer reports, perf and `canopy stack --lines` keep every
# function, file and line, and the build takes about a fifth less time (docs/testing.md,
# "Build time"). For a debugger's view of local variables: CANOPY_BUILD_TYPE=Debug,
# or -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" among the arguments.
# shellcheck source=compiler_cache.sh
source "$here/scripts/compiler_cache.sh"
cmake -S "$here" -B "$build" "${compiler_cache[@]}" -DCMAKE_BUILD_TYPE="${CANOPY_BUILD_TYPE:-RelWithDebInfo}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "$@" >/dev/null
if [ -n "${CANOPY_TARGETS:-}" ]; then
  # shellcheck disable=SC2086  # a list of target names
  cmake --build "$build" -j "$(nproc)" --target $CANOPY_TARGETS
else
  cmake --build "$build" -j "$(nproc)"
fi
