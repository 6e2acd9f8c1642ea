#!/usr/bin/env bash
# Paper 003's Fig. 4: the probability that the gossip failure detector fails, for the
# random, RR, BRR and DBRR schedules at f = 0.05 (docs/benchmarks.md). Runs
# canopy-gossip-bench fig4-sweep and draws its figure with gnuplot, into OUTPUT_DIR:
#   fig4.csv        schedule,n,f,p_fail,method,trials,failures,ci_low,ci_high
#   fig4-bound.csv  schedule,n,f,sources,union_bound
#   fig4.png        p_fail against n, log scale
#   bench.log       the time each point took
# and prints fig4.csv.
#
# Usage: bench/gossip_fig4.sh [OUTPUT_DIR] [sweep options: --quick, --trials N, --seed S,
#                                          --threads T, --f F]
#   OUTPUT_DIR defaults to /tmp/canopy-gossip-fig4. It builds nothing: first
#   ./scripts/build.sh build -DCANOPY_BUILD_BENCH=ON (CANOPY_BUILD_DIR selects another
#   build directory). A full run (10^8 draws per Monte Carlo point) takes about a
#   minute on 2 cores, --quick (10^5) under a second; GOSSIP_FIG4_TIMEOUT (default
#   300 s) bounds it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=/tmp/canopy-gossip-fig4
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  out=$1
  shift
fi
build=${CANOPY_BUILD_DIR:-build}
bench="$build/bin/canopy-gossip-bench"
limit=${GOSSIP_FIG4_TIMEOUT:-300}
if [ ! -x "$bench" ]; then
  echo "gossip_fig4.sh: $bench is missing; build it first: ./scripts/build.sh build -DCANOPY_BUILD_BENCH=ON" >&2
  exit 1
fi
mkdir -p "$out"
rm -f "$out"/fig4.csv "$out"/fig4-bound.csv "$out"/fig4-*.dat "$out/fig4.png"

status=0
timeout "$limit" "$bench" fig4-sweep --out "$out" "$@" > /dev/null 2> "$out/bench.log" || status=$?
if [ "$status" -ne 0 ]; then
  [ "$status" -eq 124 ] && echo "gossip_fig4.sh: the sweep did not finish within $limit s" >&2
  echo "gossip_fig4.sh: the sweep failed (status $status); the end of $out/bench.log:" >&2
  tail -n 20 "$out/bench.log" >&2
  exit 1
fi

# Per schedule, for gnuplot: exact values; Monte Carlo estimates with failures (n p lo
# hi); Monte Carlo points without any failure, as the upper end of their interval; the
# union bound where it is above 0 (a log scale cannot show 0).
for s in random rr brr dbrr; do
  awk -F, -v s="$s" 'NR > 1 && $1 == s && $5 == "exact" && $4 > 0 { print $2, $4 }' "$out/fig4.csv" > "$out/fig4-$s-exact.dat"
  awk -F, -v s="$s" 'NR > 1 && $1 == s && $5 == "montecarlo" && $7 > 0 { print $2, $4, $8, $9 }' "$out/fig4.csv" > "$out/fig4-$s-mc.dat"
  awk -F, -v s="$s" 'NR > 1 && $1 == s && $5 == "montecarlo" && $7 == 0 { print $2, $9 }' "$out/fig4.csv" > "$out/fig4-$s-zero.dat"
  awk -F, -v s="$s" 'NR > 1 && $1 == s && $5 > 0 { print $2, $5 }' "$out/fig4-bound.csv" > "$out/fig4-$s-bound.dat"
done
f=$(awk -F, 'NR == 2 { print $3 }' "$out/fig4.csv")
draws=$(awk -F, 'NR > 1 && $5 == "montecarlo" { print $6; exit }' "$out/fig4.csv")
draws_text=$(awk -v d="${draws:-0}" 'BEGIN { e = int(log(d) / log(10) + 1e-9); if (d == 10 ^ e) printf "10^%d", e; else printf "%d", d }')

# Random and RR make every other member a source, so under this rule their values are
# the same; then they are drawn as one series.
same=$(awk -F, 'NR > 1 && ($1 == "random" || $1 == "rr") { v[$1] = v[$1] " " $4 } END { print (v["random"] == v["rr"]) ? "yes" : "no" }' "$out/fig4.csv")

# A schedule's kinds of points share its colour: filled points exact, points with bars
# Monte Carlo, downward triangles the 95 % upper bound where no failure was seen
# (moved sideways by a factor `shift` so that the schedules' triangles do not hide each
# other), a dashed line the union bound.
series=""
add() {  # schedule, title, colour, point type, shift of the upper-bound triangles
  local d="$out/fig4-$1"
  [ -s "$d-exact.dat" ] && series+="\"$d-exact.dat\" using 1:2 with points pt $4 ps 1.4 lc rgb \"$3\" title \"$2: exact\", "
  [ -s "$d-mc.dat" ] && series+="\"$d-mc.dat\" using 1:2:3:4 with yerrorbars pt $4 ps 1.4 lc rgb \"$3\" title \"$2: Monte Carlo, 95 % CI\", "
  [ -s "$d-zero.dat" ] && series+="\"$d-zero.dat\" using (\$1*$5):2 with points pt 11 ps 1.6 lc rgb \"$3\" title \"$2: no failure seen, 95 % upper bound\", "
  [ -s "$d-bound.dat" ] && series+="\"$d-bound.dat\" using 1:2 with lines dt 2 lw 1.5 lc rgb \"$3\" title \"$2: union bound\", "
  return 0
}
add brr BRR "#d62728" 7 1
add dbrr DBRR "#1f77b4" 5 0.95
if [ "$same" = yes ]; then
  add random "random = RR" "#2ca02c" 9 1.05
else
  add random random "#2ca02c" 9 1.05
  add rr RR "#ff7f0e" 13 1.1
fi
# The paper's own figure for f = 0.05 (§5.2), when that is the f drawn.
[ "$f" = 0.05 ] && series+="\"< echo 4 0.0095\" using 1:2 with points pt 3 ps 3 lw 2 lc rgb \"black\" title \"paper §5.2: P_{brr}(4) = 0.0095\", "
notes="keyentry with points lc rgb \"white\" title \"union bound: f^n + n(1-f)f^k, k = sources per member\""
shifts="DBRR drawn at 0.95n, random$([ "$same" = yes ] && echo /RR) at 1.05n$([ "$same" = yes ] || echo ", RR at 1.1n")"
notes+=", keyentry with points lc rgb \"white\" title \"upper bounds: $shifts\""
[ "$same" = yes ] && notes+=", keyentry with points lc rgb \"white\" title \"random and RR: identical values (every other member is a source)\""
# The first n from which random's values (exact or bound) fall below the y range.
below=$(awk -F, 'NR > 1 && $1 == "random" && $5 < 1e-20 { print $2; exit }' "$out/fig4-bound.csv")
[ -n "$below" ] && notes+=", keyentry with points lc rgb \"white\" title \"off the scale: random/RR below 10^{-20} from n = $below\""

if ! command -v gnuplot > /dev/null; then
  echo "gossip_fig4.sh: gnuplot is missing (./scripts/setup.sh installs it); no figure" >&2
else
  gnuplot <<GP
set terminal pngcairo size 1500,820 font ",11" enhanced
set output "$out/fig4.png"
set title "Probability that the gossip failure detector fails, f = $f (paper 003, Fig. 4)\nit fails when every member fails or a live member has all of its sources dead\nexact for n <= 20, Monte Carlo with $draws_text draws above" font ",12"
set xlabel "members n (log scale)"
set ylabel "P(detector fails) (log scale)"
set logscale x 2
set logscale y 10
set xrange [3.5:300]
set yrange [1e-20:1]
set xtics (4, 8, 12, 16, 20, 32, 64, 128, 256)
set format y "10^{%L}"
set ytics 1e-20, 100, 1
set grid xtics ytics
set key outside right center box opaque font ",10" Left reverse width 1 spacing 1.2
plot $series $notes
GP
fi

cat "$out/fig4.csv"
echo "wrote $out/fig4.csv, fig4-bound.csv$([ -f "$out/fig4.png" ] && echo ", fig4.png")"
