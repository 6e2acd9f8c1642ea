#!/usr/bin/env bash
# Scale (issue 47; docs/benchmarks.md, "Scale"): canopy-sim over trees of growing size,
# what a launch and a failure cost per process, and what each process holds.
#
# Usage: bench/scale.sh [OUTPUT_DIR] [TREE...]
#   OUTPUT_DIR defaults to /tmp/canopy-scale; the trees default to
#   "b:8^2 b:16^2 b:32^2 b:16^3". SCALE_KILLS="B C" sets the back-ends and commnodes
#   killed per tree (default "3 2"), SCALE_LATENCY_US and SCALE_CPU_US the simulated
#   latency and CPU per frame (default 50 and 10), SCALE_TIMEOUT the bound on each run
#   in seconds (default 3600, issue 47's bound for b:100^3). It builds nothing: canopy-sim comes with the normal
#   build (CANOPY_BUILD_DIR selects another build directory). SCALE_REUSE=1 takes a
#   tree's runs/TREE.json from an earlier run of the same build instead of running it
#   again (b:100^3 takes 16 to 30 minutes and 14 GB).
# Writes into OUTPUT_DIR:
#   runs/TREE.json   canopy-sim's output per tree (TREE.log: its errors)
#   scale.csv        one row per tree that ran to the end
#   scale.png        per process against processes, log-log: launch bytes sent (and the
#                    most a back-end received), bytes
#                    sent per process reached by a back-end failure, and the heap a
#                    back-end (one whose parent failed apart), and a commnode hold
# and prints scale.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/canopy-scale}
shift || true
trees=("$@")
[ ${#trees[@]} -gt 0 ] || trees=(b:8^2 b:16^2 b:32^2 b:16^3)
build=${CANOPY_BUILD_DIR:-build}
sim="$build/bin/canopy-sim"
read -r kill_b kill_c <<< "${SCALE_KILLS:-3 2}"
latency=${SCALE_LATENCY_US:-50}
cpu=${SCALE_CPU_US:-10}
limit=${SCALE_TIMEOUT:-3600}
if [ ! -x "$sim" ]; then
  echo "scale.sh: $sim is missing; build it first: ./scripts/build.sh" >&2
  exit 1
fi
mkdir -p "$out/runs"
csv="$out/scale.csv"
echo "tree,processes,backends,launch_bytes,launch_bytes_per_process,launch_virtual_ms,be_failure_bytes,be_failure_reached,be_failure_bytes_per_reached,be_failure_root_messages,be_failure_ts_virtual_ms,cn_failure_bytes,cn_failure_reached,cn_failure_virtual_ms,frontend_state,commnode_state_max,commnode_children,backend_state_max,last_wave_ok,wall_seconds,peak_rss_mb,loadavg,launch_backend_received_max,adopted_backend_state_max" > "$csv"
for tree in "${trees[@]}"; do
  name=${tree//[^A-Za-z0-9]/_}
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "scale.sh: $tree (load $load)" >&2
  if [ "${SCALE_REUSE:-0}" = 1 ] && [ -s "$out/runs/$name.json" ]; then
    echo "scale.sh: $tree: reusing $out/runs/$name.json" >&2
  elif ! timeout --kill-after=10 "$limit" "$sim" --tree "$tree" --kill-backends "$kill_b" --kill-commnodes "$kill_c" \
      --latency-us "$latency" --cpu-us "$cpu" > "$out/runs/$name.json" 2> "$out/runs/$name.log"; then
    echo "scale.sh: $tree failed or ran over ${limit} s: $(tail -1 "$out/runs/$name.log")" >&2
    continue
  fi
  python3 - "$out/runs/$name.json" "$tree" "$load" >> "$csv" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
b, c, s = j["backend_failure"], j["commnode_failure"], j["state_bytes"]
per_reached = b["bytes"] / b["processes_reached"] if b["processes_reached"] else 0
print(",".join(str(x) for x in [sys.argv[2], j["processes"], j["backends"], j["launch"]["bytes"],
      round(j["launch"]["bytes"] / j["processes"], 1), j["launch"]["virtual_ms"], b["bytes"], b["processes_reached"],
      round(per_reached, 1), b["root_messages"], b["ts_virtual_ms"], c["bytes"], c["processes_reached"], c["virtual_ms"],
      s["frontend"], s["commnode_max"], s["commnode_max_children"], s["backend_max"], str(j["last_wave_ok"]).lower(),
      j["wall_seconds"], j["peak_rss_mb"], sys.argv[3], j["launch"].get("backend_received_max", ""),
      s.get("adopted_backend_max", "")]))
EOF
done
if command -v gnuplot > /dev/null && [ "$(wc -l < "$csv")" -gt 1 ]; then
  gnuplot <<EOF
set terminal pngcairo size 1400,650 font "sans,11"
set output "$out/scale.png"
set datafile separator ","
set title "canopy-sim: per-process cost against tree size (latency ${latency} us, ${cpu} us per frame)"
set xlabel "processes in the tree"
set ylabel "bytes"
set logscale xy
set grid
set key outside right top box
set xrange [50:*]
plot "$csv" every ::1 using 2:5 with linespoints lw 2 pt 7 lc rgb "#9400d3" title "launch: bytes sent per process", \
     "$csv" every ::1 using 2:23 with linespoints lw 2 pt 13 lc rgb "#0072b2" title "launch: bytes a back-end received (most)", \
     "$csv" every ::1 using 2:9 with linespoints lw 2 pt 5 lc rgb "#009e73" title "back-end failure: bytes sent per process reached", \
     "$csv" every ::1 using 2:18 with linespoints lw 2 pt 9 lc rgb "#56b4e9" title "heap a back-end holds (most)", \
     "$csv" every ::1 using 2:24 with linespoints lw 2 pt 8 lc rgb "#999999" title "heap an adopted back-end holds (most)", \
     "$csv" every ::1 using 2:16 with linespoints lw 2 pt 11 lc rgb "#d55e00" title "heap a commnode holds (most)", \
     2048 with lines dt 2 lc rgb "#9400d3" title "goal: launch, 2 KB per process", \
     256 with lines dt 2 lc rgb "#009e73" title "goal: back-end failure, 256 B per process reached", \
     4096 with lines dt 2 lc rgb "#56b4e9" title "goal: a back-end's state, 4 KB"
EOF
fi
cat "$csv"
