#!/usr/bin/env bash
# Configures and builds Canopy. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# Installs missing Debian packages first (scripts/setup.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
shift || true
"$here/scripts/setup.sh"
# RelWithDebInfo with line tables only (-g1), not gcc's full debug information (-g):
# backtraces, sanitizer reports, perf and `canopy stack --lines` keep every
# function, file and line, and the build takes about a fifth less time (docs/testing.md,
# "Build time"). For a debugger's view of local variables: CANOPY_BUILD_TYPE=Debug,
# or -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" among the arguments.
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE="${CANOPY_BUILD_TYPE:-RelWithDebInfo}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
