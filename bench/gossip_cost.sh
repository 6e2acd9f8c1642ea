#!/usr/bin/env bash
# What the gossip detector costs (docs/benchmarks.md, "Gossip: detection time (paper
# 003 Fig. 6), false positives and cost"): canopy-gossip-detect-bench cost on real
# processes (n = 64, gossip off and on in turn, several rounds), and size (the table
# message's encoded size and the cost computed from it for n = 64 and 1024).
#
#   bench/gossip_cost.sh [OUTPUT_DIR] [--quick]
#       default /tmp/canopy-gossip-cost-YYYYmmdd-HHMMSS; --quick: 1 round of 3 s windows
#
#   OUTPUT_DIR/cost.csv       one row per measured tree: CPU seconds and bytes sent, by role
#   OUTPUT_DIR/summary.csv    the medians the driver printed (cost rows)
#   OUTPUT_DIR/size.csv       the size mode's rows: bytes per table, hops, computed costs
#   OUTPUT_DIR/cost.png       CPU and bytes of the tree per configuration (dots: rounds),
#                             and bytes per member per second computed for n = 64 and 1024
#   OUTPUT_DIR/summary.txt    the tables of docs/benchmarks.md
#
# Settings (environment): CANOPY_BUILD_DIR (default build/), GOSSIP_COST_TOPOLOGY
# (b:4^3), GOSSIP_COST_CONFIGS (off,dbrr:500,dbrr:100), GOSSIP_COST_ROUNDS (3),
# GOSSIP_COST_WINDOW_S (10). A full run takes about 2.5 minutes; bounded by
# GOSSIP_COST_RUN_LIMIT_S (600 s), in a process group of its own killed on the way out.
set -euo pipefail
cd "$(dirname "$0")/.."
out=/tmp/canopy-gossip-cost-$(date +%Y%m%d-%H%M%S)
quick=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    -*) echo "usage: bench/gossip_cost.sh [OUTPUT_DIR] [--quick]" >&2; exit 2 ;;
    *) out=$a ;;
  esac
done
build=${CANOPY_BUILD_DIR:-build}
bench="$build/bin/canopy-gossip-detect-bench"
topology=${GOSSIP_COST_TOPOLOGY:-b:4^3}
configs=${GOSSIP_COST_CONFIGS:-off,dbrr:500,dbrr:100}
rounds=${GOSSIP_COST_ROUNDS:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
window=${GOSSIP_COST_WINDOW_S:-$([ "$quick" = 1 ] && echo 3 || echo 10)}
settle=$([ "$quick" = 1 ] && echo 2 || echo 5)
limit=${GOSSIP_COST_RUN_LIMIT_S:-600}
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v gnuplot >/dev/null || ./scripts/setup.sh
[ -x "$bench" ] || cmake --build "$build" -j2 --target canopy-gossip-detect-bench

group=""
trap '[ -n "$group" ] && kill -KILL -- "-$group" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM

cut -d' ' -f1-3 /proc/loadavg > "$out/loadavg"
echo "cost: $topology, $configs, $rounds round(s) of $window s ..." >&2
setsid timeout -s KILL "$limit" "$bench" cost --out "$out" --topology "$topology" --configs "$configs" \
  --rounds "$rounds" --window-s "$window" --settle-s "$settle" > "$out/summary.csv" 2> "$out/summary.log" &
group=$!
status=0
wait "$group" || status=$?
if pgrep -s "$group" >/dev/null 2>&1; then
  echo "processes left in group $group: killing them" >&2
  kill -KILL -- "-$group" 2>/dev/null || true
fi
[ "$status" -eq 0 ] || { echo "gossip_cost.sh: cost failed (status $status), see $out/summary.log" >&2; tail -5 "$out/summary.log" >&2; }
rm -rf "$out"/run-*  # the back-ends' (empty) event files
"$bench" size --n 64,1024 --topologies "$topology,b:32^2,b:4^5" > "$out/size.csv"

# ---- the figure ----
names=$(echo "$configs" | tr , ' ')
i=0
: > "$out/cost-runs.dat"
: > "$out/cost-medians.dat"
xtics=""
for c in $names; do
  awk -F, -v c="$c" -v x="$i" 'NR > 1 && $2 == c { print x, $6 / $5 * 1000, $10 / $5 / 1024 }' "$out/cost.csv" >> "$out/cost-runs.dat"
  cpu=$(awk -F, -v c="$c" '$2 == c && $4 == "tree_cpu_median" { print $5 }' "$out/summary.csv")
  bytes=$(awk -F, -v c="$c" '$2 == c && $4 == "tree_bytes_median" { print $5 / 1024 }' "$out/summary.csv")
  echo "$i ${cpu:-0} ${bytes:-0}" >> "$out/cost-medians.dat"
  xtics="$xtics${xtics:+, }\"$c\" $i"
  i=$((i + 1))
done
# Computed bytes per member per second: T, n, topology, KiB/s (DBRR; BRR's are the same:
# over a cycle both send along the same pairs of the ring).
awk -F, '$1 == "size" && $4 == "bytes_per_member" && $2 ~ /^dbrr/ { split($2, a, /[ =]/); print a[5], a[3], $3, $5 / 1024 }' \
  "$out/size.csv" > "$out/size-bytes.dat"
measured=$(awk -F, '$4 == "gossip_bytes_per_member_median" { split($2, a, ":"); print a[2], $5 / 1024 }' "$out/summary.csv")
echo "$measured" > "$out/size-measured.dat"
gnuplot <<GP
set terminal pngcairo size 1500,640 noenhanced
set output "$out/cost.png"
set multiplot layout 1,3 title "Cost of the gossip detector: $topology on real processes, $rounds round(s) of $window s (dots: rounds; bars: medians)"
set xtics ($xtics)
set xrange [-0.6:$((i - 1)).6]
set grid ytics
set key off
set boxwidth 0.5
set style fill transparent solid 0.3 border -1
set yrange [0:*]
set title "CPU of every process of the tree"
set ylabel "ms of CPU per second"
plot "$out/cost-medians.dat" using 1:2 with boxes lc rgb "grey", "$out/cost-runs.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "blue"
set title "bytes sent on every socket of the tree"
set ylabel "KiB per second"
plot "$out/cost-medians.dat" using 1:3 with boxes lc rgb "grey", "$out/cost-runs.dat" using 1:3 with points pt 7 ps 1.2 lc rgb "red"
set title "gossip bytes per member per second\n(computed: table bytes x mean hops / T)"
set xtics auto
set logscale xy
set xrange [40:1600]
set yrange [*:*]
set xlabel "members n"
set ylabel "KiB per member per second"
set key below vertical maxrows 6 font ",9" noopaque nobox
plot "< awk '\$1 == 500 && \$3 != \"b:32^2\"' $out/size-bytes.dat" using 2:4 with linespoints pt 7 lc rgb "blue" title "T = 500 ms, b:4^3 and b:4^5, computed", \\
     "< awk '\$1 == 100 && \$3 != \"b:32^2\"' $out/size-bytes.dat" using 2:4 with linespoints pt 5 lc rgb "red" title "T = 100 ms, b:4^3 and b:4^5, computed", \\
     "< awk '\$1 == 500 && \$3 == \"b:32^2\"' $out/size-bytes.dat" using 2:4 with points pt 9 ps 1.5 lc rgb "blue" title "T = 500 ms, b:32^2, computed", \\
     "< awk '\$1 == 100 && \$3 == \"b:32^2\"' $out/size-bytes.dat" using 2:4 with points pt 11 ps 1.5 lc rgb "red" title "T = 100 ms, b:32^2, computed", \\
     "< awk '\$1 == 500' $out/size-measured.dat" using (64):2 with points pt 6 ps 2.5 lw 2 lc rgb "blue" title "T = 500 ms, measured (gossip on - off)", \\
     "< awk '\$1 == 100' $out/size-measured.dat" using (64):2 with points pt 4 ps 2.5 lw 2 lc rgb "red" title "T = 100 ms, measured (gossip on - off)"
unset multiplot
GP

{
  echo "load average before: $(cat "$out/loadavg")"
  echo "config | tree CPU (ms/s, median) | tree bytes (B/s, median) | gossip CPU per member (us/s, median of rounds; min-max) | gossip bytes per member (B/s) | front-end's extra CPU (ms/s)"
  for c in $names; do
    m() { awk -F, -v c="$c" -v k="$1" '$2 == c && $4 == k { print $5 }' "$out/summary.csv"; }
    echo "$c | $(m tree_cpu_median) | $(m tree_bytes_median) | $(m gossip_cpu_per_member_median) ($(m gossip_cpu_per_member_min)-$(m gossip_cpu_per_member_max)) | $(m gossip_bytes_per_member_median) | $(m gossip_frontend_cpu_median)"
  done
  echo
  echo "size and computed cost:"
  awk -F, '$1 == "size"' "$out/size.csv"
} | tee "$out/summary.txt"
echo "wrote $out" >&2
