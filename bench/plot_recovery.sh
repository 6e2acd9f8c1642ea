#!/usr/bin/env bash
# Runs canopy-recovery-bench and draws its figures with gnuplot:
#   recovery.csv         everything the benchmark printed
#   recovery.png         Figure 6: recovery latency against the victim's fan-out
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

awk -F, '$1=="recovery" { split($2, p, "[ =]"); f=p[2]; v[f","$3]=$4; fs[f]=1 }
  END { print "fanout overall orphan_mean choose connect compensate cleanup";
        for (f in fs) print f, v[f",overall_median"], v[f",orphan_mean_median"], v[f",slowest_choose_median"],
          v[f",slowest_connect_median"], v[f",slowest_compensate_median"], v[f",slowest_cleanup_median"] }' \
  "$out/recovery.csv" | sort -n > "$out/recovery.dat"
awk -F, '$1=="perturbation" && $3=="new_integers_per_s" { split($2, p, "t="); print p[2], $4 }' \
  "$out/recovery.csv" > "$out/throughput.dat"
awk -F, '$1=="perturbation" && $3=="failure_at" { print $4 }' "$out/recovery.csv" > "$out/failures.dat"

gnuplot <<GP
set terminal pngcairo size 900,540
set datafile separator " "
set output "$out/recovery.png"
set title "Recovery latency after SIGKILL of a commnode (16 extra adopters; medians)"
set xlabel "victim fan-out (orphans)"
set ylabel "milliseconds"
set logscale x 2
set key top left
plot "$out/recovery.dat" using 1:2 with linespoints title "overall (kill to last recovery event)", \
     "" using 1:3 with linespoints title "per orphan, mean", \
     "" using 1:5 with linespoints title "slowest connect", \
     "" using 1:4 with linespoints title "slowest choose", \
     "" using 1:6 with linespoints title "slowest compensate"
unset logscale x
set output "$out/perturbation.png"
set title "Integer-union throughput, b:8^2, a commnode SIGKILLed periodically"
set xlabel "seconds"
set ylabel "new integers per second at the front-end"
stats "$out/throughput.dat" using 2 nooutput
set yrange [0:STATS_max*1.1]
plot "$out/throughput.dat" using 1:2 with lines title "throughput (250 ms windows)", \
     "$out/failures.dat" using 1:(STATS_max*1.05) with impulses lw 2 title "failure detected"
GP
echo "wrote $out/recovery.csv, $out/recovery.png, $out/perturbation.png"
