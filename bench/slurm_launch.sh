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

# topology F: b:F^2 over n1..n4 as YAML.
topology() {
  local f=$1 i j b=0 out="$SLURM_DIR/b$f.yaml"
  {
    echo "hosts:"
    for n in 1 2 3 4; do
      local var="SLURM_NODE_N$n"
      echo "  - {name: n$n, nics: [${!var}]}"
    done
    echo "nodes:"
    echo "  - {rank: 1000000, role: frontend, host: n1}"
    for ((i = 1; i <= f; i++)); do echo "  - {rank: $((1000000 + i)), role: commnode, host: n$(((i - 1) % 4 + 1))}"; done
    for ((i = 1; i <= f; i++)); do
      for ((j = 0; j < f; j++)); do echo "  - {rank: $b, role: backend, host: n$(((i - 1) % 4 + 1))}"; b=$((b + 1)); done
    done
    echo "edges:"
    local kids=""
    for ((i = 1; i <= f; i++)); do kids="${kids:+$kids, }$((1000000 + i))"; done
    echo "  - {parent: 1000000, children: [$kids]}"
    b=0
    for ((i = 1; i <= f; i++)); do
      kids=""
      for ((j = 0; j < f; j++)); do kids="${kids:+$kids, }$b"; b=$((b + 1)); done
      echo "  - {parent: $((1000000 + i)), children: [$kids]}"
    done
  } > "$out"
  echo "$out"
}

echo "tree,mode,rep,processes,launch_s" > "$out/slurm_launch.csv"
for ((rep = 1; rep <= reps; rep++)); do
  for f in $fanouts; do
    yaml=$(topology "$f")
    for mode in spawn slurm; do
      if [ "$mode" = spawn ]; then how=(--launcher 'srun --overlap -N1 -n1 -w {host} {command}'); else how=(--launch slurm); fi
      line=$(slurm_on n1 salloc -N4 --exclusive "$bin/canopy" run --topology "$yaml" "${how[@]}" --waves 1 2>"$SLURM_DIR/err" |
        grep -m1 "^launched") || { echo "slurm_launch: b:$f^2 $mode failed: $(cat "$SLURM_DIR/err")" >&2; exit 1; }
      # "launched 73/73 processes in 0.412 s (64 back-ends)"
      processes=$(echo "$line" | sed -E 's#launched ([0-9]+)/.*#\1#')
      seconds=$(echo "$line" | sed -E 's#.* in ([0-9.]+) s.*#\1#')
      echo "b:$f^2,$mode,$rep,$processes,$seconds" >> "$out/slurm_launch.csv"
    done
  done
done

: > "$SLURM_DIR/medians.dat"
for f in $fanouts; do
  s=$(awk -F, -v t="b:$f^2" '$1 == t && $2 == "spawn" { print $5 * 1000 }' "$out/slurm_launch.csv" | median)
  b=$(awk -F, -v t="b:$f^2" '$1 == t && $2 == "slurm" { print $5 * 1000 }' "$out/slurm_launch.csv" | median)
  n=$(awk -F, -v t="b:$f^2" '$1 == t { print $4; exit }' "$out/slurm_launch.csv")
  echo "b:${f}^2,_${n}_processes $s $b" >> "$SLURM_DIR/medians.dat"
done
plot_two_bars "$SLURM_DIR/medians.dat" "$out/slurm_launch.png" \
  "Launch inside salloc -N4 (medians of $reps runs)" "milliseconds to every process connected" "%.0f" \
  "srun per remote commnode (--launcher)" "one srun step per level (--launch slurm)"
cat "$SLURM_DIR/medians.dat"
echo "wrote $out/slurm_launch.csv and $out/slurm_launch.png"
