#!/usr/bin/env bash
# Launch time under Slurm (docs/launch.md), on a real Slurm cluster in network
# namespaces (tests/slurm/cluster_lib.sh; needs root): b:F^2 trees (F commnodes under
# the front-end, F back-ends each) over four nodes, commnode i and its back-ends on
# node i mod 4, started inside `salloc -N4` in turn by
#   spawn  the launcher template `srun --overlap -N1 -n1 -w {host} {command}`: one
#          step per remote commnode, each starting its back-ends locally
#   slurm  `--launch slurm`: one step per level
# REPS times each, the two modes alternating. "launch" is what canopy run reports:
# from the start of the launch to every process connected.
#   slurm_launch.csv   tree,mode,rep,processes,launch_s
#   slurm_launch.png   medians per tree, both modes side by side
# Usage: bench/slurm_launch.sh [OUTPUT_DIR] [REPS (default 5)] [FANOUTS (default "4 8")]
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
reps=${2:-5}
fanouts=${3:-4 8}
bench_prologue "${1:-bench-results}" canopy
rmdir "$work"
source tests/netns/lib.sh
source tests/slurm/cluster_lib.sh
slurm_cluster_up n1 n2 n3 n4
netns_deadline 1800

# b:F^2 over n1..n4: commnode i and its back-ends on node i mod 4.
nodes=()
for n in 1 2 3 4; do var="SLURM_NODE_N$n"; nodes+=("n$n=${!var}"); done

# run_mode MODE YAML: one canopy run inside a fresh allocation, from n1.
run_mode() {
  local how=(--launch slurm)
  [ "$1" = spawn ] && how=(--launcher 'srun --overlap -N1 -n1 -w {host} {command}')
  slurm_on n1 salloc -N4 --exclusive "$bin/canopy" run --topology "$2" "${how[@]}" --waves 1
}
launch_series "$out/slurm_launch.csv" "$SLURM_DIR" spawn slurm run_mode "${nodes[@]}"

launch_medians "$out/slurm_launch.csv" spawn slurm "$fanouts" > "$SLURM_DIR/medians.dat"
plot_two_bars "$SLURM_DIR/medians.dat" "$out/slurm_launch.png" \
  "Launch inside salloc -N4 (medians of $reps runs)" "milliseconds to every process connected" "%.0f" \
  "srun per remote commnode (--launcher)" "one srun step per level (--launch slurm)"
cat "$SLURM_DIR/medians.dat"
echo "wrote $out/slurm_launch.csv and $out/slurm_launch.png"
