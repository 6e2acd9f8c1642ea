#!/usr/bin/env bash
# False positives of the gossip detector under load (docs/benchmarks.md, "Gossip:
# detection time (paper 003 Fig. 6), false positives and cost"): two trees side by
# side, one gossiping with DBRR and one with BRR (T_gossip 200 ms, the library's
# max_hangup 500 ms, ping time-out = lost = 5 s), while stress-ng keeps both cores
# busy and canopy-gossip-detect-bench soak SIGSTOPs one commnode at a time for
# 0.5-4 s (less than `lost`), again and again. Nobody fails: the goal is that nobody
# is declared failed.
#
#   bench/gossip_soak.sh [OUTPUT_DIR] [--minutes M] [--quick]
#       default /tmp/canopy-gossip-soak-YYYYmmdd-HHMMSS, M = 10 (both trees run the M
#       minutes at once); --quick: 1 minute, b:4^2 instead of b:2x4x4 (32 back-ends
#       below 8 leaf commnodes below 2 others)
#
#   OUTPUT_DIR/brr/, dbrr/   one tree: pauses.csv, events.csv (every failure declared,
#                            anywhere), frontend.csv, events-RANK.csv, logs/, summary.csv
#   events.csv               both trees' events, with the schedule
#   summary.txt              the pauses, the suspicions the detectors logged and cleared,
#                            and everything declared failed (the goal: nothing)
#   soak.png                 the pauses over time, one line per commnode, and the events
#   load.txt                 the load: stress-ng, or why there was none
#
# stress-ng: used if installed; if not, installed with apt-get when running as root,
# else the soak runs without load and says so. GOSSIP_SOAK_LOAD=0 runs without it.
# Settings (environment): CANOPY_BUILD_DIR (default build/), GOSSIP_SOAK_TOPOLOGY,
# GOSSIP_SOAK_PERIOD_MS (200), GOSSIP_SOAK_PLOT_ONLY=1 (the figure and summary again
# from OUTPUT_DIR, without running). Each tree runs bounded (M minutes + 3 minutes) in a
# process group of its own, killed on the way out whatever happens, as is stress-ng.
set -euo pipefail
cd "$(dirname "$0")/.."
out=/tmp/canopy-gossip-soak-$(date +%Y%m%d-%H%M%S)
minutes=10
quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --minutes) minutes=${2:?--minutes needs a value}; shift ;;
    -*) echo "usage: bench/gossip_soak.sh [OUTPUT_DIR] [--minutes M] [--quick]" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
[ "$quick" = 1 ] && minutes=1
topology=${GOSSIP_SOAK_TOPOLOGY:-$([ "$quick" = 1 ] && echo 'b:4^2' || echo 'b:2x4x4')}
period=${GOSSIP_SOAK_PERIOD_MS:-200}
build=${CANOPY_BUILD_DIR:-build}
bench="$build/bin/canopy-gossip-detect-bench"
limit=$((minutes * 60 + 180))
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v gnuplot >/dev/null || ./scripts/setup.sh
[ -x "$bench" ] || cmake --build "$build" -j2 --target canopy-gossip-detect-bench

groups=()
cleanup() {
  for g in "${groups[@]}"; do
    kill -CONT -- "-$g" 2>/dev/null || true
    kill -KILL -- "-$g" 2>/dev/null || true
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "${GOSSIP_SOAK_PLOT_ONLY:-0}" = 1 ]; then
  load_note=$(cat "$out/load.txt")
else
# ---- the load ----
load_note=""
if [ "${GOSSIP_SOAK_LOAD:-1}" = 0 ]; then
  load_note="no load: GOSSIP_SOAK_LOAD=0"
elif ! command -v stress-ng >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "stress-ng is missing; installing it with apt-get ..." >&2
    { apt-get update && apt-get install -y stress-ng; } > "$out/apt.log" 2>&1 || true
  fi
  command -v stress-ng >/dev/null || load_note="no load: stress-ng is not installed (and this is not root, or apt-get failed: $out/apt.log)"
fi
if [ -z "$load_note" ]; then
  cpus=$(nproc)
  setsid stress-ng --cpu "$cpus" --timeout $((limit))s > "$out/stress-ng.log" 2>&1 &
  groups+=("$!")
  stress=$!
  load_note="stress-ng --cpu $cpus (pid $stress) for the whole run"
fi
echo "$load_note" | tee "$out/load.txt" >&2
cut -d' ' -f1-3 /proc/loadavg > "$out/loadavg-before"

# ---- the two trees, side by side ----
pids=()
for s in dbrr brr; do
  rm -rf "${out:?}/$s"
  mkdir -p "$out/$s"
  setsid "$bench" soak --out "$out/$s" --topology "$topology" --schedule "$s" --period-ms "$period" \
    --minutes "$minutes" --seed "$([ "$s" = brr ] && echo 2 || echo 1)" --log > "$out/$s.summary.csv" 2> "$out/$s.summary.log" &
  pids+=("$!")
  groups+=("$!")
done
echo "soaking $topology with DBRR and BRR (T_gossip $period ms) for $minutes minute(s) ..." >&2
waited=0
while kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[1]}" 2>/dev/null; do
  if [ "$waited" -ge $((limit * 10)) ]; then
    echo "over ${limit} s: killing the trees" >&2
    cleanup
    break
  fi
  sleep 0.1
  waited=$((waited + 1))
done
: > "$out/status.txt"
names=(dbrr brr)
for i in 0 1; do
  st=0
  wait "${pids[$i]}" || st=$?
  echo "${names[$i]} tree: exit status $st (0: nobody declared failed; 1: someone was, or the run failed)" >> "$out/status.txt"
  if pgrep -s "${pids[$i]}" >/dev/null 2>&1; then
    echo "processes left in group ${pids[$i]}: killing them" | tee -a "$out/status.txt" >&2
    kill -CONT -- "-${pids[$i]}" 2>/dev/null || true
    kill -KILL -- "-${pids[$i]}" 2>/dev/null || true
  fi
done
cut -d' ' -f1-3 /proc/loadavg > "$out/loadavg-after"
[ -n "${stress:-}" ] && kill -TERM -- "-$stress" 2>/dev/null || true
for s in dbrr brr; do mv -f "$out/$s.summary.csv" "$out/$s/summary.csv"; mv -f "$out/$s.summary.log" "$out/$s/summary.log"; done
fi

# ---- all events, and the figure ----
# A value as the driver printed it, whole numbers without their ".000".
metric() { awk -F, -v m="$2" '$4 == m { v = $5; if (v == int(v)) printf "%.0f\n", v; else print v }' "$out/$1/summary.csv" 2>/dev/null | head -1; }
{
  echo "schedule,where,kind,member,time_us,detector,silent_ms"
  for s in dbrr brr; do [ -f "$out/$s/events.csv" ] && awk -v s="$s" 'NR > 1 { print s "," $0 }' "$out/$s/events.csv"; done
} > "$out/events.csv"
plots=""
for s in dbrr brr; do
  [ -f "$out/$s/pauses.csv" ] || continue
  t0=$(metric "$s" start_us)
  # One line per commnode (its rank above the front-end's), from SIGSTOP to SIGCONT.
  awk -F, -v t0="$t0" 'NR > 1 { y = $1 - 1000000; printf "%.3f %d %.3f 0\n", ($4 - t0) / 1e6, y, ($5 - $4) / 1e6 }' \
    "$out/$s/pauses.csv" > "$out/$s/pauses.dat"
  awk -F, -v t0="$t0" 'NR > 1 { printf "%.3f %s\n", ($4 - t0) / 1e6, $3 }' "$out/$s/events.csv" > "$out/$s/events.dat"
  count=$(($(wc -l < "$out/$s/events.csv") - 1))
  events=""
  [ -s "$out/$s/events.dat" ] &&
    events=", \"$out/$s/events.dat\" using 1:(0) with points pt 7 ps 1.5 lc rgb \"red\" title \"a member declared failed (y = 0)\""
  plots="$plots
set title \"$s: $(metric "$s" pauses) pauses of a commnode ($(metric "$s" pauses_over_suspicion_time) longer than the suspicion time, $(metric "$s" suspicion_time) ms), $(metric "$s" suspicions_logged) suspicions logged, $count members declared failed\"
plot \"$out/$s/pauses.dat\" using 1:2:3:4 with vectors nohead lw 4 lc rgb \"orange\" title \"commnode SIGSTOPped\"$events"
done
if [ -n "$plots" ]; then
  gnuplot <<GP
set terminal pngcairo size 1200,720 noenhanced
set output "$out/soak.png"
set multiplot layout 2,1 title "Gossip soak on $topology, T_gossip $period ms, lost 5 s, $load_note"
set xlabel "seconds since the pauses began"
set ylabel "commnode (rank - 1000000)"
set yrange [-0.5:*]
set ytics 1
set grid
set key outside bottom center horizontal
$plots
unset multiplot
GP
fi

# ---- the summary ----
{
  echo "load: $load_note; load average before $(cat "$out/loadavg-before"), after $(cat "$out/loadavg-after")"
  echo "schedule | tree | duration (s) | suspicion time (ms) | pauses | over the suspicion time | pause median (ms) | max (ms) | suspicions logged | cleared by an answer | cleared by a heartbeat | confirmed | views with left | gossip reports | tree failures | back-end gossip events | members declared failed | back-ends running at end"
  for s in dbrr brr; do
    [ -f "$out/$s/summary.csv" ] || continue
    printf "%s | %s" "$s" "$topology"
    for m in duration suspicion_time pauses pauses_over_suspicion_time pause_median pause_max suspicions_logged \
      cleared_by_answer_logged cleared_by_heartbeat_logged confirmed_logged frontend_views_with_left \
      frontend_gossip_reports frontend_failures backend_gossip_events false_positive_members backends_running_at_end; do
      printf " | %s" "$(metric "$s" "$m")"
    done
    echo
  done
  cat "$out/status.txt"
} | tee "$out/summary.txt"
echo "wrote $out" >&2
