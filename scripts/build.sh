#!/usr/bin/env bash
# Configures and builds Canopy. Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# Installs missing Debian packages first (scripts/setup.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
shift || true
"$here/scripts/setup.sh"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE="${CANOPY_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
