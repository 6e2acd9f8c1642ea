#!/usr/bin/env bash
# The front-end's own failure (docs/fault-tolerance.md, "When the front-end fails"):
# canopy-frontend-loss-bench SIGKILLs the front-end of a union run kept with
# --keep-tree-for, for fan-outs 8 to 64 at the top (b:Fx2), and re-attaches a new one
# a second later; REPS repetitions, the fan-outs in turn within each.
#   frontend_loss.csv   one row per run (columns: see bench/frontend_loss_bench.cpp)
#   frontend_loss.png   medians per fan-out: SIGKILL to promotion complete, and
#                       re-attach to the first regenerated result
# Usage: bench/frontend_loss.sh [OUTPUT_DIR] [REPS (default 3)] [FANOUTS (default 8,16,32,64)]
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
reps=${2:-3}
fanouts=${3:-8,16,32,64}
bench_prologue "${1:-bench-results}" canopy-frontend-loss-bench
trap 'rm -rf "$work"' EXIT
limit=$((60 * reps * 4 + 60))
run_bounded "$work/frontend_loss" "$bin/canopy-frontend-loss-bench" --reps "$reps" --fanouts "$fanouts"
if grep -q FAILED "$work/frontend_loss.log" || [ "$(wc -l < "$work/frontend_loss.csv")" -le 1 ]; then
  cat "$work/frontend_loss.log" >&2
  exit 1
fi
cp "$work/frontend_loss.csv" "$out/frontend_loss.csv"

# Medians per fan-out: fan-out, SIGKILL to promoted, re-attach to first result.
: > "$work/medians.dat"
for f in $(echo "$fanouts" | tr , ' '); do
  promoted=$(awk -F, -v f="$f" 'NR > 1 && $1 == f { print $4 }' "$out/frontend_loss.csv" | median)
  first=$(awk -F, -v f="$f" 'NR > 1 && $1 == f { print $8 }' "$out/frontend_loss.csv" | median)
  echo "fan-out_$f $promoted $first" >> "$work/medians.dat"
done
plot_two_bars "$work/medians.dat" "$out/frontend_loss.png" \
  "Front-end lost under the union workload (b:Fx2, medians of $reps runs)" "milliseconds" "%.1f" \
  "SIGKILL to promotion complete" "re-attach to the first regenerated result"
cat "$work/medians.dat"
echo "wrote $out/frontend_loss.csv and $out/frontend_loss.png"
