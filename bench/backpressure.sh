#!/usr/bin/env bash
# Back-pressure (docs/benchmarks.md, "Back-pressure"; docs/protocol.md, "Resource
# bounds"): a commnode's resident memory while its back-ends send as fast as they can
# and its front-end stops reading. canopy-flood runs b:1x4 (one commnode, four
# back-ends) for S seconds; from second A to second A + B its front-end is stopped
# (SIGSTOP), so everything the back-ends send piles up below it. Without back-pressure
# the commnode's queue towards the front-end grows by what the back-ends send; with it
# the commnode stops reading its children once 16 MiB are queued, and their send()
# waits. Run once per packet size.
#
#   bench/backpressure.sh [OUTPUT_DIR] [--sizes "BYTES..."] [--seconds S] [--stop-at A] [--stop-for B]
#       default /tmp/canopy-backpressure-YYYYmmdd-HHMMSS, sizes "65536 33554432"
#       (64 KiB, 32 MiB), S = 14, A = 4, B = 6
#
#   OUTPUT_DIR/rss-BYTES.csv       time (s), commnode RSS (MiB), a back-end's RSS (MiB)
#   OUTPUT_DIR/received-BYTES.csv  second, packets and MiB the front-end received in it
#   OUTPUT_DIR/summary.csv         bytes, commnode RSS before the stop, its peak
#                                  during it, MiB received before the stop (per
#                                  second, median)
#   OUTPUT_DIR/backpressure.png    commnode RSS over time, one line per size
#
# Settings (environment): CANOPY_BUILD_DIR (default build/, built with the bench
# targets). The run is in a process group of its own, continued and killed on the way
# out.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
out=/tmp/canopy-backpressure-$(date +%Y%m%d-%H%M%S)
sizes="65536 33554432"
seconds=14
stop_at=4
stop_for=6
usage='usage: bench/backpressure.sh [OUTPUT_DIR] [--sizes "BYTES..."] [--seconds S] [--stop-at A] [--stop-for B]'
while [ $# -gt 0 ]; do
  case $1 in
    --sizes) sizes=${2:?--sizes needs a value}; shift ;;
    --seconds) seconds=${2:?--seconds needs a value}; shift ;;
    --stop-at) stop_at=${2:?--stop-at needs a value}; shift ;;
    --stop-for) stop_for=${2:?--stop-for needs a value}; shift ;;
    -h|--help) sed -n 2,24p "$0"; exit 0 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
for n in $sizes $seconds $stop_at $stop_for; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench/backpressure.sh: sizes and seconds are positive integers" >&2; exit 2; }
done
[ $((stop_at + stop_for + 2)) -le "$seconds" ] || { echo "bench/backpressure.sh: the stop must end 2 s before the run" >&2; exit 2; }
build=${CANOPY_BUILD_DIR:-build}
flood="$build/bin/canopy-flood"
[ -x "$flood" ] || { echo "bench/backpressure.sh: no $flood: build the tests first (scripts/build.sh)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "bench/backpressure.sh: gnuplot is not installed (scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

own_group_trap

rss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024; found = 1 } END { if (!found) printf "" }' "/proc/$1/status" 2>/dev/null || true; }

echo "bytes,rss_before_mib,rss_peak_stopped_mib,received_mib_per_s_before" > "$out/summary.csv"
for bytes in $sizes; do
  setsid "$flood" --packet-bytes "$bytes" --seconds "$seconds" > "$out/received-$bytes.csv" 2> "$out/flood-$bytes.log" &
  group=$!
  # The tree is up once the front-end says so.
  for _ in $(seq 1 300); do grep -q "flooding" "$out/flood-$bytes.log" 2>/dev/null && break; sleep 0.1; done
  grep -q "flooding" "$out/flood-$bytes.log" || { echo "bench/backpressure.sh: the tree did not come up: $out/flood-$bytes.log" >&2; exit 1; }
  commnode=$(pgrep -s "$group" -x canopy-commnode | head -n 1)
  backend=$(pgrep -s "$group" -f -- "--backend $bytes" | head -n 1)
  start=$(now_ms)
  echo "time_s,commnode_rss_mib,backend_rss_mib" > "$out/rss-$bytes.csv"
  state=running
  while kill -0 "$group" 2>/dev/null; do
    t=$(( $(now_ms) - start ))
    if [ "$state" = running ] && [ "$t" -ge $((stop_at * 1000)) ]; then kill -STOP "$group"; state=stopped; fi
    if [ "$state" = stopped ] && [ "$t" -ge $(((stop_at + stop_for) * 1000)) ]; then kill -CONT "$group"; state=resumed; fi
    c=$(rss_mib "$commnode"); b=$(rss_mib "$backend")
    [ -n "$c" ] && echo "$(awk -v t="$t" 'BEGIN { printf "%.2f", t / 1000 }'),$c,$b" >> "$out/rss-$bytes.csv"
    [ "$t" -gt $(((seconds + 60) * 1000)) ] && { echo "bench/backpressure.sh: run over $((seconds + 60)) s, killed" >&2; break; }
    sleep 0.1
  done
  kill -CONT "$group" 2>/dev/null || true
  status=0
  wait "$group" || status=$?
  left=$(pgrep -s "$group" | wc -l || true)
  end_group
  [ "$status" = 0 ] || { echo "bench/backpressure.sh: canopy-flood exited $status (see $out/flood-$bytes.log)" >&2; exit 1; }
  [ "$left" = 0 ] || { echo "bench/backpressure.sh: $left processes left after canopy-flood" >&2; exit 1; }
  before=$(awk -F, -v a="$stop_at" 'NR > 1 && $1 < a { v = $2 } END { print v }' "$out/rss-$bytes.csv")
  peak=$(awk -F, -v a="$stop_at" -v b="$((stop_at + stop_for))" 'NR > 1 && $1 >= a && $1 <= b && $2 > m { m = $2 } END { print m }' "$out/rss-$bytes.csv")
  rate=$(awk -F, -v a="$stop_at" 'NR > 2 && $1 <= a { print $3 }' "$out/received-$bytes.csv" | median)
  echo "$bytes,$before,$peak,$rate" >> "$out/summary.csv"
  echo "$bytes-byte packets: commnode RSS $before MiB before the stop, at most $peak MiB while the front-end was stopped; front-end received $rate MiB/s (median) before" >&2
done

plots=""
for bytes in $sizes; do
  label=$(awk -v b="$bytes" 'BEGIN { if (b >= 1048576) printf "%g MiB packets", b / 1048576; else printf "%g KiB packets", b / 1024 }')
  plots+="${plots:+, }\"$out/rss-$bytes.csv\" using 1:2 skip 1 with lines lw 2 title \"commnode, $label\""
done
gnuplot <<PLOT
set terminal pngcairo size 1100,520 font "sans,11"
set output "$out/backpressure.png"
set datafile separator ","
set title "A commnode's resident memory, b:1x4, back-ends sending as fast as they can; front-end stopped from ${stop_at} s to $((stop_at + stop_for)) s" noenhanced
set xlabel "time since the flood began (s)"
set ylabel "resident memory (MiB)"
set yrange [0:*]
set grid
set key top right opaque box
set offsets 0, 0, graph 0.3, 0
set object 1 rect from $stop_at, graph 0 to $((stop_at + stop_for)), graph 1 fc rgb "#f4d03f" fs solid 0.25 noborder behind
set label 1 "front-end stopped" at $((stop_at)) + 0.2, graph 0.95 front
plot $plots
PLOT
echo "figure: $out/backpressure.png" >&2
cat "$out/summary.csv"
