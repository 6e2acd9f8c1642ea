#!/usr/bin/env bash
# Issue 20's round-trip goal, as it is stated: the b:2^2 round trip (front-end, 2
# commnodes, 4 back-ends; 0 B) within 4x of two raw TCP round trips measured in the
# same run, in each of N full runs of canopy-bench (all of its topologies, 2,000
# samples; about 2 minutes a run). Raw TCP is canopy-bench's own ping-pong of 1 byte
# between two processes, measured in the same run just before the trees.
#
#   bench/roundtrip_runs.sh DIR [N]     N runs (default 5), one after the other
#   ROUNDTRIP_RUNS_PLOT_ONLY=1 bench/roundtrip_runs.sh DIR   the CSV and figure again
#
# Writes DIR/run-K.{csv,log,loadavg} (each run's canopy-bench output, stderr, and the
# load average before it), DIR/roundtrip_runs.csv (per run: load average, raw TCP,
# b:2^2 round trip, their ratio, and b:16^2's reduce throughput for reference) and
# DIR/roundtrip_runs.png (per run: the round trip against two raw round trips, the
# ratio in the run's label). Each run is bounded (limit below) and leaves nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
[ $# -ge 1 ] || { sed -n '7,8p' "$0" >&2; exit 2; }
runs=${2:-5}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench/roundtrip_runs.sh: N must be a positive number" >&2; exit 2; }
limit=600
cd "$here/.."
bench_prologue "$1" canopy-bench
rm -rf "$work"

if [ "${ROUNDTRIP_RUNS_PLOT_ONLY:-0}" != 1 ]; then
  rm -f "$out"/run-*
  for k in $(seq 1 "$runs"); do
    echo "run $k of $runs ..." >&2
    run_bounded "$out/run-$k" "$bin/canopy-bench"
  done
fi

csv="$out/roundtrip_runs.csv"
echo "run,loadavg_1min,raw_tcp_us,two_raw_tcp_us,roundtrip_b2x2_us,ratio,throughput_b16x16_waves_s" > "$csv"
for f in "$out"/run-*.csv; do
  k=${f##*/run-}
  k=${k%.csv}
  awk -F, -v k="$k" -v load="$(cut -d' ' -f1 "$out/run-$k.loadavg" 2>/dev/null || echo)" '
    $1 == "raw_tcp_roundtrip" && $3 == 1 { raw = $5 }
    $1 == "roundtrip" && $2 == "b:2^2" && $3 == 0 { rt = $5 }
    $1 == "throughput" && $2 == "b:16^2" { tp = $5 }
    END { if (raw != "" && rt != "") printf "%s,%s,%.1f,%.1f,%.1f,%.2f,%.0f\n", k, load, raw, 2 * raw, rt, rt / (2 * raw), tp }' "$f"
done | sort -t, -k1n >> "$csv"

dat=$(mktemp)
awk -F, 'NR > 1 { printf "run_%s\\n%.2fx\\nload_%.0f %s %s\n", $1, $6, $2, $5, $4 }' "$csv" > "$dat"
plot_two_bars "$dat" "$out/roundtrip_runs.png" \
  "b:2^2 round trip against two raw TCP round trips in the same run\nunder each run: the ratio (goal: under 4x in every run) and the load average before it" \
  "microseconds (median of 2,000)" "%.0f" "Canopy, b:2^2 round trip (0 B)" "2 x raw TCP round trip (1 B)"
rm -f "$dat"
column -s, -t "$csv" >&2
echo "wrote $csv and $out/roundtrip_runs.png" >&2
