#!/usr/bin/env bash
# The main job: builds Canopy if needed, then runs `canopy run` with the given
# options (none: the embedded default tree b:4^2 with the demo workload).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
"$here/scripts/build.sh" "$here/build" >&2
exec "$here/build/bin/canopy" run "$@"
