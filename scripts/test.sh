#!/usr/bin/env bash
# The test suite: unit and integration tests (real processes on loopback), first in
# a normal build, then in a build with AddressSanitizer and UndefinedBehaviorSanitizer.
# Usage: scripts/test.sh [--no-sanitizers]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
jobs="$(nproc)"

"$here/scripts/build.sh" "$here/build" -DCANOPY_BUILD_BENCH=ON
ctest --test-dir "$here/build" --output-on-failure -j "$jobs" --timeout 180

if [ "${1:-}" != "--no-sanitizers" ]; then
  CANOPY_BUILD_TYPE=Debug "$here/scripts/build.sh" "$here/build-sanitize" -DCANOPY_SANITIZE=ON -DCANOPY_BUILD_BENCH=OFF
  # Leak checking is on; every process of a tree (commnodes, back-ends) is checked.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$here/build-sanitize" --output-on-failure -j "$jobs" --timeout 300 -L 'unit|integration'
fi
echo "all tests passed"
