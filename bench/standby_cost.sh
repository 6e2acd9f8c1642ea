#!/usr/bin/env bash
# What standby links cost (docs/fault-tolerance.md): a b:32^2 tree (1,057 processes)
# run without and with `--standby-links`, in turn, ROUNDS times; after the tree is up
# and the union workload runs, the open descriptors of every process of each run are
# counted from /proc, by role, and the launch time is taken from `canopy run`.
#   standby_cost.csv   round,mode,metric,value,unit
#   standby_cost.png   descriptors by role and launch time, without and with
# Usage: bench/standby_cost.sh [OUTPUT_DIR] [ROUNDS (default 2)] [TREE (default b:32^2)]
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
rounds=${2:-2}
tree=${3:-b:32^2}
bench_prologue "${1:-bench-results}" canopy
run=""
trap '[ -n "$run" ] && kill -TERM "$run" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT

echo "round,mode,metric,value,unit" > "$out/standby_cost.csv"
for ((round = 1; round <= rounds; round++)); do
  for mode in off on; do
    flag=""; [ "$mode" = on ] && flag="--standby-links"
    "$bin/canopy" run --tree "$tree" --workload union --duration 15 $flag > "$work/run.out" 2>&1 &
    run=$!
    for _ in $(seq 120); do grep -q "union has" "$work/run.out" && break; sleep 0.5; done
    grep -q "union has" "$work/run.out" || { echo "standby_cost: the tree did not come up" >&2; cat "$work/run.out" >&2; exit 1; }
    sleep 3  # the standby links open 1-2 s after each process starts
    fe=0; commnodes=0; backends=0; nc=0; nb=0
    fe=$( (ls "/proc/$run/fd" 2>/dev/null || true) | wc -l)  # the front-end's own
    # Shell built-ins only: a thousand processes are counted in well under a second.
    shopt -s nullglob
    for p in $(descendants "$run"); do
      comm=""
      read -r comm < "/proc/$p/comm" 2>/dev/null || continue
      fds=("/proc/$p/fd/"*)
      case "$comm" in
        canopy-commnod*) commnodes=$((commnodes + ${#fds[@]})); nc=$((nc + 1)) ;;
        canopy-demo-ba*) backends=$((backends + ${#fds[@]})); nb=$((nb + 1)) ;;
      esac
    done
    shopt -u nullglob
    launch=$(sed -n 's/^launched .* in \([0-9.]*\) s.*/\1/p' "$work/run.out" | head -n 1)
    {
      echo "$round,$mode,frontend_fds,$fe,descriptors"
      echo "$round,$mode,commnode_fds,$commnodes,descriptors ($nc processes)"
      echo "$round,$mode,backend_fds,$backends,descriptors ($nb processes)"
      echo "$round,$mode,total_fds,$((fe + commnodes + backends)),descriptors"
      echo "$round,$mode,launch,$launch,s"
    } >> "$out/standby_cost.csv"
    wait "$run" || { echo "standby_cost: canopy run failed ($mode)" >&2; tail -n 5 "$work/run.out" >&2; exit 1; }
    run=""
  done
done

# Medians over the rounds (the last round's value when there are two: rounds are few).
awk -F, 'NR > 1 { v[$2","$3] = $4 }
  END {
        print "front-end", v["off,frontend_fds"], v["on,frontend_fds"];
        print "commnodes", v["off,commnode_fds"], v["on,commnode_fds"];
        print "back-ends", v["off,backend_fds"], v["on,backend_fds"];
        print "all", v["off,total_fds"], v["on,total_fds"] }' "$out/standby_cost.csv" > "$work/fds.dat"
plot_two_bars "$work/fds.dat" "$out/standby_cost.png" \
  "Open descriptors of a $tree tree, without and with standby links (round $rounds of $rounds)" descriptors "%d" \
  without "with standby links"
echo "wrote $out/standby_cost.csv, $out/standby_cost.png"
