#!/usr/bin/env bash
# Compares two builds of Canopy side by side on this machine: canopy-bench from each,
# run in turn (old, new, old, new, ...) so that both see the same machine in the same
# minutes, on the round trip of b:2^2 and the reduce throughput of b:16^2.
#   compare.csv  one row per run: round, build, topology, metric, median of that run
#   compare.png  every run's figure for both builds, and the median of the runs
# and prints the median of the runs per build and the ratio new/old.
# Usage: bench/compare_builds.sh OLD_BIN_DIR NEW_BIN_DIR [ROUNDS] [OUTPUT_DIR]
#   e.g. git worktree add /tmp/canopy-old HEAD~5 && cmake -S /tmp/canopy-old -B /tmp/canopy-old/build \
#        -DCANOPY_BUILD_TESTS=OFF && cmake --build /tmp/canopy-old/build -j2 --target canopy-bench \
#        canopy-commnode canopy-demo-backend
#        bench/compare_builds.sh /tmp/canopy-old/build/bin build/bin 7
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh  # median
if [ $# -lt 2 ]; then
  sed -n '2,13p' "$0" >&2
  exit 2
fi
old=$1 new=$2 rounds=${3:-5} out=${4:-bench-results}
for dir in "$old" "$new"; do
  [ -x "$dir/canopy-bench" ] || { echo "no canopy-bench in $dir" >&2; exit 2; }
done
mkdir -p "$out"
command -v gnuplot >/dev/null || ./scripts/setup.sh
csv="$out/compare.csv"
echo "round,build,topology,metric,value,unit" > "$csv"
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
        $1 == "throughput" && $2 == "b:16^2" { print r "," b ",b:16^2,throughput," $5 "," $8 }' >> "$csv"
  done
done

# Medians of the runs per build and metric, and the ratio new/old.
runs() { awk -F, -v b="$1" -v m="$2" 'NR > 1 && $2 == b && $4 == m { print $5 }' "$csv"; }
rt_old=$(runs old roundtrip | median) rt_new=$(runs new roundtrip | median)
tp_old=$(runs old throughput | median) tp_new=$(runs new throughput | median)
awk -v a="$rt_old" -v b="$rt_new" 'BEGIN { printf "roundtrip b:2^2 (us): old %.1f new %.1f new/old %.3f\n", a, b, b / a }'
awk -v a="$tp_old" -v b="$tp_new" 'BEGIN { printf "throughput b:16^2 (waves/s): old %.0f new %.0f new/old %.3f\n", a, b, b / a }'
awk -F, 'NR > 1 && $4 == "roundtrip" { print $1, ($2 == "old" ? 0 : 1), $5 }' "$csv" > "$out/compare-rt.dat"
awk -F, 'NR > 1 && $4 == "throughput" { print $1, ($2 == "old" ? 0 : 1), $5 / 1000 }' "$csv" > "$out/compare-tp.dat"

gnuplot <<GP
set terminal pngcairo size 1100,480
set output "$out/compare.png"
set multiplot layout 1,2 title "Two builds, run in turn $rounds times each (dots: one run's median; bars: median of the runs)"
set xtics ("old" 0, "new" 1)
set xrange [-0.6:1.6]
set grid ytics
set key off
set boxwidth 0.5
set style fill transparent solid 0.3 border -1
set title "round trip, b:2^2, 0 B (lower is better)"
set ylabel "microseconds"
set yrange [0:*]
plot "-" using 1:2 with boxes lc rgb "grey", "$out/compare-rt.dat" using 2:3 with points pt 7 ps 1.2 lc rgb "blue"
0 $rt_old
1 $rt_new
e
set title "reduce throughput, b:16^2 (higher is better)"
set ylabel "thousand waves per second"
plot "-" using 1:2 with boxes lc rgb "grey", "$out/compare-tp.dat" using 2:3 with points pt 7 ps 1.2 lc rgb "red"
0 $(awk -v v="$tp_old" 'BEGIN { print v / 1000 }')
1 $(awk -v v="$tp_new" 'BEGIN { print v / 1000 }')
e
unset multiplot
GP
echo "wrote $csv, $out/compare.png"
