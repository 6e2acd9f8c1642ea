#!/usr/bin/env bash
# The membership service's stabilisation time Ts after one back-end failure, against
# paper 000's model Ts = 2L(H-1) + Ocp*H (docs/benchmarks.md). Runs
# canopy-membership-bench and draws its figure with gnuplot, into OUTPUT_DIR:
#   samples.csv      one row per sample (a fresh tree, one back-end SIGKILLed)
#   summary.csv      one row per (fan-out, members): median/min/max Ts, the model
#   parameters.csv   L (three ways) and Ocp (measured per N, and fitted)
#   ts.png           measured median Ts (min-max bars) and the model, against N
#   bench.log        the benchmark's progress and anything unexpected it noticed
# and prints the summary.
#
# Usage: bench/membership_ts.sh [OUTPUT_DIR] [benchmark options, e.g. --quick]
#   OUTPUT_DIR defaults to /tmp/canopy-membership-ts. It builds nothing: first
#   ./scripts/build.sh build -DCANOPY_BUILD_BENCH=ON (CANOPY_BUILD_DIR selects another
#   build directory). The run is bounded by MEMBERSHIP_TS_TIMEOUT seconds (default 420;
#   a full run takes about 3 minutes on 2 cores), after which it and every process it
#   started are killed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/canopy-membership-ts}
shift || true
build=${CANOPY_BUILD_DIR:-build}
bench="$build/bin/canopy-membership-bench"
limit=${MEMBERSHIP_TS_TIMEOUT:-420}
if [ ! -x "$bench" ]; then
  echo "membership_ts.sh: $bench is missing; build it first: ./scripts/build.sh build -DCANOPY_BUILD_BENCH=ON" >&2
  exit 1
fi
mkdir -p "$out"
rm -f "$out"/{samples,summary,parameters}.csv "$out"/ts*.dat "$out/ts.png"

# timeout puts itself and the benchmark in a process group of their own (its pid),
# which every commnode and back-end the benchmark starts inherits; on time-out it
# signals the whole group. Whatever is still in the group afterwards is killed here.
timeout --kill-after=10 "$limit" "$bench" --out "$out" "$@" > "$out/summary.txt" 2> "$out/bench.log" &
group=$!
cleanup() {
  if pgrep -g "$group" > /dev/null 2>&1; then
    echo "membership_ts.sh: killing processes left in group $group: $(pgrep -g "$group" | tr '\n' ' ')" >&2
    kill -KILL -- "-$group" 2> /dev/null || true
  fi
}
trap 'cleanup; exit 130' INT TERM
status=0
wait "$group" || status=$?
cleanup
trap - INT TERM
if [ "$status" -ne 0 ]; then
  [ "$status" -eq 124 ] && echo "membership_ts.sh: the benchmark did not finish within $limit s" >&2
  echo "membership_ts.sh: the benchmark failed (status $status); the end of $out/bench.log:" >&2
  tail -n 20 "$out/bench.log" >&2
  exit 1
fi

# One file per fan-out for gnuplot: N, median, min, max, model, model with the idle
# L, the tree's CPU from kill to view / 2 cores, second failure's median.
fanouts=$(awk -F, 'NR > 1 { print $1 }' "$out/summary.csv" | sort -nu)
for a in $fanouts; do
  awk -F, -v a="$a" 'NR > 1 && $1 == a { print $2, $6, $7, $8, $9, $11, $16 / 2, $14 }' "$out/summary.csv" > "$out/ts-a$a.dat"
done
param() { awk -F, -v n="$1" '$1 == n { printf "%.1f", $4; exit }' "$out/parameters.csv"; }
L=$(param L)
L_idle=$(param L_link_idle)
ocp=$(awk -F, '$1 == "Ocp_level" { v[++n] = $4 } END { printf "%.1f-%.1f", v[1], v[n] }' "$out/parameters.csv")
busy=$(awk -F, '$1 == "busy_start" { printf "%.0f", $4 }' "$out/parameters.csv")
panels=""
for a in $fanouts; do
  d="$out/ts-a$a.dat"
  panels+="set title \"fan-out a = $a (trees b:$a^k)\"
plot \"$d\" using 1:2:3:4 with yerrorlines pt 7 ps 1.3 lw 2 lc rgb \"#1f77b4\" title \"measured Ts: median, min-max of samples\", \\
     \"$d\" using 1:8 with linespoints pt 8 ps 1 lw 1 lc rgb \"#17becf\" title \"second failure in the same tree (median)\", \\
     \"$d\" using 1:5 with linespoints dt 2 pt 6 lw 2 lc rgb \"#d62728\" title \"model, L = $L us (ping-pong)\", \\
     \"$d\" using 1:6 with linespoints dt 3 pt 4 lw 2 lc rgb \"#ff7f0e\" title \"model, L = $L_idle us (idle ping-pong)\", \\
     \"$d\" using 1:7 with linespoints dt 4 pt 2 lw 1 lc rgb \"#555555\" title \"tree CPU, kill to view, / 2 cores\", \\
     \"< echo 64 1000\" using 1:2 with points pt 9 ps 2.2 lc rgb \"black\" title \"goal: 1 ms at 64 members\"
"
done
if ! command -v gnuplot > /dev/null; then
  echo "membership_ts.sh: gnuplot is missing (./scripts/setup.sh installs it); no figure" >&2
else
gnuplot <<GP
set terminal pngcairo size 1400,640 font ",11"
set output "$out/ts.png"
set multiplot layout 1,$(echo "$fanouts" | wc -w) title "Membership stabilisation time Ts after one back-end SIGKILL, loopback, 2 shared cores (CPUs $busy% busy with other work before the run)\nmodel Ts = 2L(H-1) + Ocp*H, H = k+1 process levels, Ocp = $ocp us per level (measured)"
set xlabel "members N (back-ends)"
set ylabel "microseconds (log scale)"
set logscale x 2
set logscale y 10
set xrange [1.6:320]
set yrange [10:200000]
set format y "%.0f"
set grid xtics ytics mytics
set key top left box opaque font ",10"
$panels
unset multiplot
GP
fi

cat "$out/summary.txt"
# What the benchmark noticed (its notes), and warnings or errors from the tree other
# than each sample's expected "connection closed by peer" of the victim.
noticed=$(grep -E "note:| [WE] " "$out/bench.log" | grep -v "ready -> gone (connection closed by peer)" || true)
if [ -n "$noticed" ]; then
  echo "noticed during the run (from $out/bench.log):"
  echo "$noticed"
fi
echo "wrote $out/samples.csv, summary.csv, parameters.csv$([ -f "$out/ts.png" ] && echo ", ts.png")"
