#!/usr/bin/env bash
# Where the time of one Figure 6 recovery goes, beside its floor's
# (docs/fault-tolerance.md, "Where the time goes"). Runs one repetition of
# canopy-recovery-bench (fan-out F, standby links, then canopy-storm-floor) under a
# scheduler trace (perf record of the sched tracepoints), and writes to OUTPUT_DIR:
#   recovery.csv    what the benchmark printed (its checks passed: the union complete)
#   timeline.csv    each orphan's detection, request, answer, state and report (from the kill)
#   account.txt     per storm: the phases (first, median and last orphan) and the CPU
#                   time and runs (switches in) of each role, from the kill to the last report
#   account.csv     the same CPU table (system, role, processes, cpu_ms, runs, window_ms)
#   account.png     the orphans' timelines, Canopy beside the floor, and CPU by role
# Usage: bench/recovery_trace.sh [OUTPUT_DIR] [--fanout F] (default 128)
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed.)
# Needs perf (linux-perf) and root, or kernel.perf_event_paranoid <= -1.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results/trace}
shift || true
fanout=128
while [ $# -gt 0 ]; do
  case $1 in
    --fanout) fanout=$2; shift 2 ;;
    *) echo "usage: bench/recovery_trace.sh [OUTPUT_DIR] [--fanout F]" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
command -v gnuplot >/dev/null || ./scripts/setup.sh
if ! command -v perf >/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -qq linux-perf >/dev/null; else echo "perf is needed (apt-get install linux-perf)" >&2; exit 1; fi
fi
build=${CANOPY_BUILD_DIR:-build}
[ -x "$build/bin/canopy-recovery-bench" ] || ./scripts/build.sh "$build"

perf record -q -a -o "$out/sched.data" \
  -e sched:sched_switch -e sched:sched_waking -e sched:sched_stat_runtime \
  -e sched:sched_process_fork -e sched:sched_process_exec -- \
  "$build/bin/canopy-recovery-bench" --only recovery --fanouts "$fanout" --reps 1 --standby on \
  --timeline "$out/timeline.csv" > "$out/recovery.csv" 2> "$out/recovery.log" || {
  echo "canopy-recovery-bench failed under the trace; the end of $out/recovery.log:" >&2
  tail -n 5 "$out/recovery.log" >&2
  exit 1
}
perf script -i "$out/sched.data" -F comm,pid,tid,cpu,time,event,trace 2>/dev/null > "$out/sched.txt"
python3 bench/recovery_account.py "$out/sched.txt" "$out/timeline.csv" "$out"
rm -f "$out/sched.txt"

gnuplot <<GP
set terminal pngcairo size 1300,620 font ",11"
set output "$out/account.png"
set multiplot layout 1,2 title "One recovery at fan-out $fanout (standby links) beside its floor: bare processes, the same messages"
set title "Each orphan, from the kill"
set xlabel "ms since the kill"
set ylabel "orphans, in the order they found their parent lost"
set key top left
set grid
plot "$out/timeline-canopy.dat" using 2:1 with points pt 7 ps 0.5 lc rgb "#1f77b4" title "Canopy: parent found lost", \
     "" using 3:1 with points pt 7 ps 0.5 lc rgb "#2ca02c" title "Canopy: adopter's answer read", \
     "" using 4:1 with points pt 7 ps 0.5 lc rgb "#d62728" title "Canopy: front-end has its report", \
     "$out/timeline-floor.dat" using 2:1 with points pt 6 ps 0.5 lc rgb "#7f7f7f" title "floor: parent found lost", \
     "" using 4:1 with points pt 6 ps 0.5 lc rgb "#000000" title "floor: front-end has its report"
set title "CPU time from the kill to the last report"
set xlabel ""
set ylabel "ms of CPU (two cores)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -20
set key top right
set yrange [0:*]
plot "$out/cpu.dat" using 2:xtic(1) title "Canopy" lc rgb "#1f77b4", "" using 3 title "floor" lc rgb "#7f7f7f"
unset multiplot
GP
echo "wrote $out/account.txt, $out/account.csv and $out/account.png"
