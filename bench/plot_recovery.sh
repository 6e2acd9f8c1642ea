#!/usr/bin/env bash
# Runs canopy-recovery-bench and draws its figures with gnuplot:
#   recovery.csv         everything the benchmark printed
#   recovery.png         Figure 6: recovery latency against the victim's fan-out
#   recovery-standby.png the same with standby links (run side by side)
#   perturbation.png     Figure 7: union throughput over time, failures marked
# Usage: bench/plot_recovery.sh [OUTPUT_DIR] [benchmark options, e.g. --quick]
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results}
shift || true
mkdir -p "$out"
command -v gnuplot >/dev/null || ./scripts/setup.sh
build=${CANOPY_BUILD_DIR:-build}   # the build directory to take the benchmark from
[ -x "$build/bin/canopy-recovery-bench" ] || ./scripts/build.sh "$build"
# A run that failed its checks (lost data, a skipped kill, a wrong message) is not drawn.
"$build/bin/canopy-recovery-bench" "$@" > "$out/recovery.csv" 2> "$out/recovery.log" || {
  echo "canopy-recovery-bench failed; nothing drawn. The end of $out/recovery.log:" >&2
  grep -v '^[0-9-]*T[0-9:.]* ' "$out/recovery.log" | tail -n 5 >&2
  exit 1
}

# One table per mode: recovery.dat without standby links (the paper's design),
# recovery-standby.dat with them (docs/fault-tolerance.md).
for mode in off on; do
  dat="$out/recovery.dat"; [ "$mode" = on ] && dat="$out/recovery-standby.dat"
  awk -F, -v mode="standby=$mode" '$1=="recovery" && index($2, mode) {
      split($2, p, "[ =]"); f=p[2]; v[f","$3]=$4; fs[f]=1 }
    END { print "fanout overall orphan_mean detect choose connect compensate cleanup report floor";
          for (f in fs) print f, v[f",overall_median"], v[f",orphan_mean_median"], v[f",last_detect_median"],
            v[f",slowest_choose_median"], v[f",slowest_connect_median"], v[f",slowest_compensate_median"],
            v[f",slowest_cleanup_median"], v[f",slowest_report_median"],
            (f",floor_overall_median" in v) ? v[f",floor_overall_median"] : 0 }' \
    "$out/recovery.csv" | sort -n > "$dat"
done
awk -F, '$1=="perturbation" && $3=="new_integers_per_s" { split($2, p, "t="); print p[2], $4 }' \
  "$out/recovery.csv" > "$out/throughput.dat"
awk -F, '$1=="perturbation" && $3=="failure_at" { print $4 }' "$out/recovery.csv" > "$out/failures.dat"

# --only runs one part of the benchmark: a figure without data is not drawn.
drawn="$out/recovery.csv"
for mode in off on; do
dat="$out/recovery.dat"; png="$out/recovery.png"; how="without standby links"
[ "$mode" = on ] && { dat="$out/recovery-standby.dat"; png="$out/recovery-standby.png"; how="with standby links"; }
if [ "$(wc -l < "$dat")" -gt 1 ]; then
gnuplot <<GP
set terminal pngcairo size 1000,620
set output "$png"
set title "Recovery latency after SIGKILL of a commnode, $how (16 extra adopters; medians)"
set datafile separator " "
set datafile columnheaders
# One cluster of bars per fan-out, so one fan-out reads as well as several. The
# phases span milliseconds to microseconds: log y, its range from the data (stats
# runs before any range is set: it obeys them), with room above for the values.
lo = 1e99; hi = 0
do for [k=2:10] {
  stats "$dat" using (column(k) > 0 ? column(k) : 1e99) name "C" nooutput
  lo = C_min < lo ? C_min : lo
  stats "$dat" using (column(k)) name "C" nooutput
  hi = C_max > hi ? C_max : hi
}
if (lo == 1e99) { lo = 0.001 }
if (hi <= lo) { hi = lo * 10 }
ybottom = 10 ** floor(log10(lo / 2))
set logscale y
# Headroom for the rotated value labels: a fifth of the decades shown, at least x3.
ytop = hi * ((hi / ybottom) ** 0.2 > 3 ? (hi / ybottom) ** 0.2 : 3)
set yrange [ybottom:ytop]
set format y "%g"
set ylabel "milliseconds (log scale)"
set xlabel "victim fan-out (orphans)"
set xtics scale 0 nomirror
set grid ytics
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
# The legend goes under the plot, never over the bars.
set key bmargin center horizontal maxcols 3 samplen 2 width 1
# A value of 0 is drawn at the bottom of the axis (the label says 0).
v(k) = column(k) > ybottom ? column(k) : ybottom
# 9 bars per cluster with gap 1: bar j (0..8) of cluster i is at x = i + (j - 4) / 10.
at(j) = \$0 + (j - 4) / 10.0
lbl(k) = sprintf(column(k) >= 100 ? "%.0f" : column(k) >= 1 ? "%.1f" : "%.3f", column(k))
plot "$dat" using (v(2)):xtic(sprintf("%d", \$1)) title "overall (kill to last recovery event)", \\
     "" using (v(3)) title "per orphan, mean", \\
     "" using (v(4)) title "last orphan to detect: kill to detection", \\
     "" using (v(5)) title "slowest orphan: choose", \\
     "" using (v(6)) title "slowest orphan: connect", \\
     "" using (v(7)) title "slowest orphan: compensate", \\
     "" using (v(8)) title "slowest orphan: cleanup", \\
     "" using (v(9)) title "slowest report: recovered to the front-end", \\
     "" using (v(10)) lc rgb "#888888" fillstyle pattern 4 border -1 title "floor: bare processes, same messages", \\
     for [j=0:8] "" using (at(j)):(v(j + 2)):(lbl(j + 2)) with labels rotate by 90 left offset 0,0.4 font ",8" notitle
GP
drawn="$drawn, $png"
fi
done
if [ -s "$out/throughput.dat" ]; then
gnuplot <<GP
set terminal pngcairo size 900,560
set output "$out/perturbation.png"
set title "Integer-union throughput, b:8^2, a commnode SIGKILLed periodically"
set xlabel "seconds since the start of the run"
set ylabel "new integers per second at the front-end"
stats "$out/throughput.dat" using 1 name "T" nooutput
stats "$out/throughput.dat" using 2 nooutput
set yrange [0:STATS_max*1.1]
set xrange [0:T_max + 0.5]
set grid ytics
# The legend goes under the plot, never over the curve or the failure marks.
set key bmargin center horizontal samplen 3 width 1
plot "$out/throughput.dat" using 1:2 with linespoints lw 2 pt 7 ps 0.6 title "throughput (250 ms windows)", \\
     "$out/failures.dat" using 1:(STATS_max*1.05) with impulses lw 2 dt 2 title "failure detected"
GP
drawn="$drawn, $out/perturbation.png"
fi
echo "wrote $drawn"
