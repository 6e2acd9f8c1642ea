#!/usr/bin/env bash
# Flakiness of the test suite on a loaded machine (docs/benchmarks.md, "Flakiness under
# load"): runs one ctest label (default: integration) again and again while stress-ng
# keeps every core busy, and records which tests failed in which run. The goal is no
# failure at all: a test that fails only under load waits on a wall clock somewhere.
#
#   bench/flakiness.sh [OUTPUT_DIR] [--runs N] [--label L] [--quick]
#       default /tmp/canopy-flakiness-YYYYmmdd-HHMMSS, N = 20, L = integration;
#       --quick: 2 runs
#
#   OUTPUT_DIR/runs.csv       run, tests, failed, seconds, load average before, the
#                             failed tests' names (space-separated)
#   OUTPUT_DIR/tests.csv      test, failures (every test that failed at least once)
#   OUTPUT_DIR/run-K.log      ctest's output of run K
#   OUTPUT_DIR/flakiness.png  failures per run, with the load average
#   OUTPUT_DIR/summary.txt    runs, failures, the tests that failed and how often
#
# Settings (environment): CANOPY_BUILD_DIR (default build/, configured and built
# already), FLAKINESS_LOAD=0 (no stress-ng), FLAKINESS_JOBS (ctest -j, default 2),
# FLAKINESS_REGEX (only the tests of the label whose names match it, ctest -R),
# FLAKINESS_PLOT_ONLY=1 (figure and summary again from OUTPUT_DIR). stress-ng is
# installed with apt-get if missing (as root); it runs in a process group of its own,
# killed on the way out whatever happens. Each ctest run is bounded by ctest's own --timeout per test.
set -euo pipefail
cd "$(dirname "$0")/.."
out=/tmp/canopy-flakiness-$(date +%Y%m%d-%H%M%S)
runs=20
label=integration
usage="usage: bench/flakiness.sh [OUTPUT_DIR] [--runs N] [--label L] [--quick]"
while [ $# -gt 0 ]; do
  case $1 in
    --quick) runs=2 ;;
    --runs) runs=${2:?--runs needs a value}; shift ;;
    --label) label=${2:?--label needs a value}; shift ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "bench/flakiness.sh: --runs must be a positive integer" >&2; exit 2; }
build=${CANOPY_BUILD_DIR:-build}
jobs=${FLAKINESS_JOBS:-2}
load=${FLAKINESS_LOAD:-1}
plot_only=${FLAKINESS_PLOT_ONLY:-0}
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in gnuplot ctest; do
  command -v "$tool" >/dev/null || { echo "bench/flakiness.sh: $tool is not installed (scripts/setup.sh)" >&2; exit 1; }
done

stress=""
stop_stress() {
  [ -n "$stress" ] || return 0
  kill -KILL -- "-$stress" 2>/dev/null || true
  wait "$stress" 2>/dev/null || true
  stress=""
}
trap stop_stress EXIT
trap 'exit 130' INT TERM

if [ "$plot_only" != 1 ]; then
  [ -f "$build/CTestTestfile.cmake" ] || { echo "bench/flakiness.sh: no tests in $build: build first (scripts/build.sh)" >&2; exit 1; }
  if [ "$load" = 1 ]; then
    if ! command -v stress-ng >/dev/null && [ "$(id -u)" = 0 ]; then
      echo "stress-ng is missing; installing it with apt-get ..." >&2
      { apt-get update && apt-get install -y stress-ng; } > "$out/apt.log" 2>&1 || true
    fi
    command -v stress-ng >/dev/null ||
      { echo "bench/flakiness.sh: stress-ng is not installed (not root, or apt-get failed: $out/apt.log)" >&2; exit 1; }
    setsid stress-ng --cpu "$(nproc)" --quiet >/dev/null 2>&1 &
    stress=$!
    echo "stress-ng --cpu $(nproc)" > "$out/load.txt"
    sleep 2  # the load is there before the first run
  else
    echo "no load (FLAKINESS_LOAD=0)" > "$out/load.txt"
  fi
  echo "run,tests,failed,seconds,loadavg,failed_tests" > "$out/runs.csv"
  for k in $(seq 1 "$runs"); do
    loadavg=$(cut -d' ' -f1 /proc/loadavg)
    start=$(date +%s%N)
    ctest --test-dir "$build" -L "$label" ${FLAKINESS_REGEX:+-R "$FLAKINESS_REGEX"} -j "$jobs" --timeout 300 \
      --output-on-failure > "$out/run-$k.log" 2>&1 || true
    seconds=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    total=$(sed -n 's/.* tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$out/run-$k.log")
    failed=$(sed -n 's/.* tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$out/run-$k.log")
    [ -n "$total" ] || { echo "bench/flakiness.sh: run $k printed no ctest summary (see $out/run-$k.log)" >&2; exit 1; }
    names=$(sed -n '/The following tests FAILED/,$ s/^[[:space:]]*[0-9]* - \([^ ]*\) .*/\1/p' "$out/run-$k.log" | paste -sd' ' -)
    printf '%s,%s,%s,%s,%s,%s\n' "$k" "$total" "$failed" "$seconds" "$loadavg" "$names" >> "$out/runs.csv"
    echo "run $k/$runs: $failed of $total failed${names:+ ($names)} in ${seconds%.*} s, load $loadavg" >&2
  done
  stop_stress
fi

[ -f "$out/runs.csv" ] || { echo "bench/flakiness.sh: no $out/runs.csv" >&2; exit 1; }
echo "test,failures" > "$out/tests.csv"
awk -F, 'NR > 1 && $6 != "" { n = split($6, t, " "); for (i = 1; i <= n; i++) c[t[i]]++ }
         END { for (k in c) print k "," c[k] }' "$out/runs.csv" | sort -t, -k2,2nr >> "$out/tests.csv"
awk -F, -v label="$label" -v load="$(cat "$out/load.txt")" '
  NR > 1 { runs++; tests = $2; failed += $3; if ($3 > 0) bad++; secs[runs] = $4 }
  END {
    printf "label %s, %d runs of %d tests under %s\n", label, runs, tests, load
    printf "%d failures in %d runs (%d runs with a failure)\n", failed, runs, bad
  }' "$out/runs.csv" > "$out/summary.txt"
awk -F, 'NR > 1 { printf "  %s failed %s time(s)\n", $1, $2 }' "$out/tests.csv" >> "$out/summary.txt"
cat "$out/summary.txt"

max_failed=$(awk -F, 'NR > 1 && $3 > m { m = $3 } END { print m + 1 }' "$out/runs.csv")
last_run=$(awk -F, 'NR > 1 { n = $1 } END { print n + 0.5 }' "$out/runs.csv")
gnuplot <<PLOT
set terminal pngcairo size 1100,500 font "sans,11"
set output "$out/flakiness.png"
set datafile separator ","
set title "ctest -L $label under $(cat "$out/load.txt"): failed tests per run" noenhanced
set xlabel "run"
set ylabel "failed tests"
set y2label "load average before the run"
set xrange [0.5:$last_run]
set xtics 1
set yrange [0:$max_failed]
set y2range [0:*]
set ytics 1 nomirror
set y2tics
set key top left
set grid ytics
set style fill solid 0.6
set boxwidth 0.6
plot "$out/runs.csv" using 1:3 skip 1 with boxes lc rgb "#c0392b" title "failed tests", \
     "" using 1:5 skip 1 axes x1y2 with linespoints lc rgb "#2c3e50" pt 7 title "load average"
PLOT
echo "figure: $out/flakiness.png" >&2
