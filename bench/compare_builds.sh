#!/usr/bin/env bash
# Compares two builds of Canopy side by side on this machine: canopy-bench from each,
# run in turn (old, new, old, new, ...) so that both see the same machine in the same
# minutes, on the round trip of b:2^2 (empty, and 1 KiB each way), the reduce
# throughput of b:16^2 and the time to instantiate b:16^2 (the median of that run's
# five launches).
#   compare.csv  one row per run: round, build, topology, metric, median of that run
#   compare.png  every run's figure for both builds, and the median of the runs
# and prints the median of the runs per build and the ratio new/old.
# Usage: bench/compare_builds.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS] [OUTPUT_DIR]
#   (ROUNDS 0 plots the compare.csv already in OUTPUT_DIR again)
#   e.g. git worktree add /tmp/canopy-old HEAD~5 && cmake -S /tmp/canopy-old -B /tmp/canopy-old/build \
#        -DCANOPY_BUILD_TESTS=OFF && cmake --build /tmp/canopy-old/build -j2 --target canopy-bench \
#        canopy-commnode canopy-demo-backend
#        bench/compare_builds.sh /tmp/canopy-old/build/bin build/bin 7
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh  # median
if [ $# -lt 2 ]; then
  sed -n '2,14p' "$0" >&2
  exit 2
fi
old=$1 new=$2 rounds=${3:-5} out=${4:-bench-results}
for dir in "$old" "$new"; do
  [ -x "$dir/canopy-bench" ] || { echo "no canopy-bench in $dir" >&2; exit 2; }
done
mkdir -p "$out"
command -v gnuplot >/dev/null || ./scripts/setup.sh
csv="$out/compare.csv"
# ROUNDS 0: no runs, the figure and medians again from the compare.csv in OUTPUT_DIR.
if [ "$rounds" != 0 ]; then echo "round,build,topology,metric,value,unit" > "$csv"; fi
for round in $(seq 1 "$rounds"); do
  for build in old new; do
    dir=$old
    [ "$build" = new ] && dir=$new
    # Each build's own canopy-commnode and demo back-end (found next to canopy-bench).
    log="$out/compare-$build-$round.log"
    trap 'echo "canopy-bench of the $build build failed in round $round: see $log" >&2' ERR
    "$dir/canopy-bench" --samples 2000 --topologies b:2^2,b:16^2 2> "$log" |
      awk -F, -v r="$round" -v b="$build" '
        $1 == "roundtrip" && $2 == "b:2^2" && $3 == 0 { print r "," b ",b:2^2,roundtrip," $5 "," $8 }
        $1 == "roundtrip" && $2 == "b:2^2" && $3 == 1024 { print r "," b ",b:2^2,roundtrip_1k," $5 "," $8 }
        $1 == "throughput" && $2 == "b:16^2" { print r "," b ",b:16^2,throughput," $5 "," $8 }
        $1 == "instantiate" && $2 == "b:16^2" && $4 == "launch_time" { print r "," b ",b:16^2,instantiate," $5 "," $8 }' >> "$csv"
  done
done

# Medians of the runs per build and metric, and the ratio new/old; per metric, the
# runs as "build value" lines for the figure (throughput in thousands).
runs() { awk -F, -v b="$1" -v m="$2" 'NR > 1 && $2 == b && $4 == m { print $5 }' "$csv"; }
declare -A med
for metric in roundtrip roundtrip_1k throughput instantiate; do
  med[$metric,old]=$(runs old $metric | median) med[$metric,new]=$(runs new $metric | median)
  awk -F, -v m=$metric 'NR > 1 && $4 == m { print ($2 == "old" ? 0 : 1), (m == "throughput" ? $5 / 1000 : $5) }' \
    "$csv" > "$out/compare-$metric.dat"
done
line() { awk -v a="${med[$1,old]}" -v b="${med[$1,new]}" -v what="$2" 'BEGIN { printf "%s: old %.1f new %.1f new/old %.3f\n", what, a, b, b / a }'; }
line roundtrip "roundtrip b:2^2 (us)"
line roundtrip_1k "roundtrip b:2^2, 1 KiB (us)"
line throughput "throughput b:16^2 (waves/s)"
line instantiate "instantiate b:16^2 (ms)"
# One panel: title, unit, metric, colour, scale of the medians.
panel() {
  cat <<GP
set title "$1"
set ylabel "$2"
plot "-" using 1:2 with boxes lc rgb "grey", "$out/compare-$3.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "$4"
0 $(awk -v v="${med[$3,old]}" -v k="$5" 'BEGIN { print v / k }')
1 $(awk -v v="${med[$3,new]}" -v k="$5" 'BEGIN { print v / k }')
e
GP
}

[ "$rounds" != 0 ] || rounds=$(awk -F, 'NR > 1 { print $1 }' "$csv" | sort -u | wc -l)
gnuplot <<GP
set terminal pngcairo size 1900,480
set output "$out/compare.png"
set multiplot layout 1,4 title "Two builds, run in turn $rounds times each (dots: one run's median; bars: median of the runs)"
set xtics ("old" 0, "new" 1)
set xrange [-0.6:1.6]
set grid ytics
set key off
set boxwidth 0.5
set style fill transparent solid 0.3 border -1
set yrange [0:*]
$(panel "round trip, b:2^2, 0 B (lower is better)" microseconds roundtrip blue 1)
$(panel "round trip, b:2^2, 1 KiB (lower is better)" microseconds roundtrip_1k "dark-blue" 1)
$(panel "reduce throughput, b:16^2 (higher is better)" "thousand waves per second" throughput red 1000)
$(panel "instantiate b:16^2 (lower is better)" milliseconds instantiate "dark-green" 1)
unset multiplot
GP
echo "wrote $csv, $out/compare.png"
