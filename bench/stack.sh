#!/usr/bin/env bash
# canopy stack against the naive tool (docs/benchmarks.md, "canopy stack: time to the
# merged tree"): on real mpirun jobs of examples/mpi_hang with 8, 32, 64 and 128 ranks
# on this machine, the time from `canopy stack` starting to the written tree, with its
# parts (process table, daemons launched, walk and merge, output), against the loop a
# user would write: `eu-stack -p PID` on every rank one after another, and
# `gdb -batch -p PID -ex bt` likewise (once per size). Canopy and eu-stack take turns
# (A B A B) so that both see the same machine. Every canopy result is checked (the two
# classes of mpi_hang, every rank), every eu-stack and gdb run must succeed, and the
# ranks must be running and untraced after each size.
#
#   bench/stack.sh [OUTPUT_DIR] [--quick]
#       default /tmp/canopy-stack-YYYYmmdd-HHMMSS; --quick: 8 and 32 ranks, 2 rounds
#
#   OUTPUT_DIR/stack.csv    ranks,tool,round,proctable_ms,launch_ms,walk_merge_ms,total_ms,wall_ms
#   OUTPUT_DIR/summary.txt  medians per size and tool, and the ratios
#   OUTPUT_DIR/stack.png    time against ranks (log scale), and canopy's parts
#
# Settings (environment): CANOPY_BUILD_DIR (default build/), STACK_BENCH_RANKS
# (8,32,64,128), STACK_BENCH_ROUNDS (5), STACK_BENCH_GDB (1: run the gdb loop once per
# size; 0: not), STACK_BENCH_PLOT_ONLY=1 (the summary and figure again from
# OUTPUT_DIR/stack.csv, without running). Needs Open MPI (mpicc, mpirun), elfutils (eu-stack), gdb and gnuplot;
# scripts/setup.sh installs all but gdb, which is used if present. Each job runs in a
# session of its own, killed on the way out whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
out=/tmp/canopy-stack-$(date +%Y%m%d-%H%M%S)
quick=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    -*) echo "usage: bench/stack.sh [OUTPUT_DIR] [--quick]" >&2; exit 2 ;;
    *) out=$a ;;
  esac
done
build=${CANOPY_BUILD_DIR:-build}
canopy="$build/bin/canopy"
sizes=${STACK_BENCH_RANKS:-$([ "$quick" = 1 ] && echo 8,32 || echo 8,32,64,128)}
rounds=${STACK_BENCH_ROUNDS:-$([ "$quick" = 1 ] && echo 2 || echo 5)}
use_gdb=${STACK_BENCH_GDB:-1}
command -v gdb >/dev/null || use_gdb=0
for tool in mpicc mpirun eu-stack gnuplot; do
  command -v "$tool" >/dev/null || { echo "bench/stack.sh: $tool is not installed (scripts/setup.sh)" >&2; exit 1; }
done
[ -x "$canopy" ] || { echo "bench/stack.sh: no $canopy: build first (scripts/build.sh)" >&2; exit 1; }
plot_only=${STACK_BENCH_PLOT_ONLY:-0}
if [ "$plot_only" = 1 ]; then
  [ -f "$out/stack.csv" ] || { echo "bench/stack.sh: no $out/stack.csv to plot" >&2; exit 1; }
  sizes=$(awk -F, 'NR > 1 { print $1 }' "$out/stack.csv" | sort -n -u | paste -sd, -)
  rounds=$(awk -F, 'NR > 1 && $2 == "canopy" { print $3 }' "$out/stack.csv" | sort -n | tail -1)
fi
mkdir -p "$out/logs"
# Every Canopy process logs there (a daemon lost mid-run says why in its log).
export CANOPY_LOG_DIR="$out/logs"
[ "$plot_only" = 1 ] || mpicc -g -O2 -o "$out/mpi_hang" examples/mpi_hang/hang.c

job=""
stop_job() {
  [ -n "$job" ] || return 0
  local ranks
  ranks=$(pgrep -P "$job" 2>/dev/null || true)
  kill -KILL -- "-$job" $ranks 2>/dev/null || true
  wait "$job" 2>/dev/null || true
  job=""
}
trap stop_job EXIT
trap 'exit 130' INT TERM

now_ms() { echo $(($(date +%s%N) / 1000000)); }
fail() { echo "bench/stack.sh: $*" >&2; exit 1; }

[ "$plot_only" = 1 ] || echo "ranks,tool,round,proctable_ms,launch_ms,walk_merge_ms,total_ms,wall_ms" > "$out/stack.csv"
[ "$plot_only" = 1 ] || cut -d' ' -f1-3 /proc/loadavg > "$out/loadavg"
for n in ${sizes//,/ }; do
  [ "$plot_only" = 1 ] && break
  echo "stack: $n ranks ..." >&2
  setsid mpirun --allow-run-as-root --oversubscribe -np "$n" "$out/mpi_hang" 900 > "$out/job-$n.log" 2>&1 &
  job=$!
  # Until every rank has called MPI_Init the process table is empty.
  ready=0
  for _ in $(seq 1 600); do
    if "$canopy" stack --mpirun "$job" -o /dev/null 2>"$out/wait.err"; then ready=1; break; fi
    grep -q "MPI_Init" "$out/wait.err" || fail "canopy stack on $n ranks: $(cat "$out/wait.err")"
    sleep 0.2
  done
  [ "$ready" = 1 ] || fail "the $n ranks were not up within 120 s"
  sleep 2
  ranks=$(pgrep -P "$job" -x mpi_hang | sort -n)
  [ "$(echo "$ranks" | wc -l)" = "$n" ] || fail "$(echo "$ranks" | wc -l) rank processes, expected $n"
  last=$((n - 1))
  for round in $(seq 1 "$rounds"); do
    # A: canopy stack, its result checked.
    t0=$(now_ms)
    "$canopy" stack --mpirun "$job" --timings -o "$out/tree-$n.txt" 2>"$out/canopy.err" ||
      fail "canopy stack on $n ranks: $(cat "$out/canopy.err")"
    t1=$(now_ms)
    grep -q "^  $((n - 1)) ranks \[0-2,4-$last\]: MPI_Barrier ← main$" "$out/tree-$n.txt" ||
      fail "canopy stack on $n ranks: no class of $((n - 1)) ranks in MPI_Barrier (see $out/tree-$n.txt)"
    grep -q "^  1 rank \[3\]: .*← compute ← solve ← main$" "$out/tree-$n.txt" ||
      fail "canopy stack on $n ranks: no class of rank 3 in compute (see $out/tree-$n.txt)"
    parts=$(sed -n 's/.*timings_ms proctable=\([0-9.]*\) launch=\([0-9.]*\) walk_merge=\([0-9.]*\) output=[0-9.]* total=\([0-9.]*\).*/\1,\2,\3,\4/p' "$out/canopy.err")
    [ -n "$parts" ] || fail "no timings from canopy stack: $(cat "$out/canopy.err")"
    echo "$n,canopy,$round,$parts,$((t1 - t0))" >> "$out/stack.csv"
    # B: eu-stack on every rank, one after another.
    t0=$(now_ms)
    for pid in $ranks; do
      eu-stack -p "$pid" > "$out/eu-stack.txt" 2>&1 || fail "eu-stack -p $pid: $(tail -3 "$out/eu-stack.txt")"
      grep -q "main" "$out/eu-stack.txt" || fail "eu-stack -p $pid found no main"
    done
    t1=$(now_ms)
    echo "$n,eu-stack,$round,,,,$((t1 - t0)),$((t1 - t0))" >> "$out/stack.csv"
  done
  if [ "$use_gdb" = 1 ]; then
    t0=$(now_ms)
    for pid in $ranks; do
      gdb -batch -p "$pid" -ex bt > "$out/gdb.txt" 2>&1 || fail "gdb -p $pid: $(tail -3 "$out/gdb.txt")"
      grep -q " main " "$out/gdb.txt" || fail "gdb -p $pid found no main"
    done
    t1=$(now_ms)
    echo "$n,gdb,1,,,,$((t1 - t0)),$((t1 - t0))" >> "$out/stack.csv"
  fi
  for pid in $ranks; do
    tracer=$(awk '/^TracerPid/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo gone)
    [ "$tracer" = 0 ] || fail "rank process $pid: TracerPid $tracer after the runs"
  done
  stop_job
done

# Medians and ratios.
rm -f "$out/medians.dat"
{
  echo "load average before: $(cat "$out/loadavg"); $rounds round(s) per size, canopy and eu-stack in turn"
  echo "ranks | canopy total (proctable + launch + walk/merge) | canopy wall | eu-stack loop | gdb loop | eu-stack / canopy | gdb / canopy"
  for n in ${sizes//,/ }; do
    col() { awk -F, -v n="$n" -v t="$1" -v c="$2" '$1 == n && $2 == t && $c != "" { print $c }' "$out/stack.csv" | median; }
    ct=$(col canopy 7); cp=$(col canopy 4); cl=$(col canopy 5); cw=$(col canopy 6); cwall=$(col canopy 8)
    eu=$(col eu-stack 7); gd=$(col gdb 7)
    ratio() { [ -n "$1" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
    echo "$n | $ct ($cp + $cl + $cw) | $cwall | $eu | ${gd:--} | $(ratio "$eu" "$ct") | $(ratio "$gd" "$ct")"
    echo "$n $ct $cp $cl $cw $eu ${gd:-NaN}" >> "$out/medians.dat"
  done
} > "$out/summary.txt"

gnuplot <<PLOT
set terminal pngcairo size 1400,560 font "sans,11"
set output "$out/stack.png"
set termoption noenhanced
set multiplot layout 1,2 title "canopy stack on mpi_hang jobs (this 2-core machine, medians of $rounds rounds; gdb once)"
set title "time to the merged tree against the naive loop"
set logscale xy
set xlabel "MPI ranks"
set ylabel "milliseconds"
set grid
set key bottom right
set xrange [6:170]
set xtics ($(echo "$sizes" | sed 's/\([0-9]*\)/"\1" \1/g'))
plot "$out/medians.dat" using 1:2 with linespoints lw 2 pt 7 title "canopy stack", \
     "$out/medians.dat" using 1:6 with linespoints lw 2 pt 5 title "eu-stack -p on each rank in turn", \
     "$out/medians.dat" using 1:7 with linespoints lw 2 pt 9 title "gdb -batch -p ... -ex bt on each rank in turn"
unset logscale
set autoscale x
set title "canopy stack: where the time goes"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.6
set xlabel "MPI ranks"
set ylabel "milliseconds"
set key top left
set xtics auto
plot "$out/medians.dat" using 3:xtic(1) title "process table (MPIR)", \
     "" using 4 title "daemons launched, stream created", \
     "" using 5 title "walk and merge"
unset multiplot
PLOT
cat "$out/summary.txt"
echo "wrote $out" >&2
