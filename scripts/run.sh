#!/usr/bin/env bash
# The main job: builds what `canopy run` needs if needed (the tool, the commnode and
# the demo back-end, in build-run/, without the tests and benchmarks that
# scripts/test.sh builds), then runs `canopy run` with the given options (none: the
# embedded default tree b:4^2 with the demo workload).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
CANOPY_TARGETS="canopy canopy-commnode canopy-demo-backend" \
  "$here/scripts/build.sh" "$here/build-run" -DCANOPY_BUILD_TESTS=OFF -DCANOPY_BUILD_BENCH=OFF >&2
exec "$here/build-run/bin/canopy" run "$@"
