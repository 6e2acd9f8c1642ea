#!/usr/bin/env bash
# Chaos soak (docs/benchmarks.md, "Chaos soak"; issues 16 and 44): the union workload,
# with a sum stream beside it (--sum-stream: every complete wave checked exact), on
# b:8^2 while a fault hits a random commnode every 1 to 3 s, for the whole run; once
# per seed. The faults (--faults, any of them, comma-separated; all by default):
#   kill       SIGKILL
#   stop       SIGSTOP for 0.5 to 7 s, half of them within 10% of --lost (default
#              5000 ms): a stop just below it must not cost anything, one just above
#              it makes a zombie parent whose children were re-adopted meanwhile
#              (docs/fault-tolerance.md)
#   stopkill   SIGSTOP, then SIGKILL 0.5 s to --lost later (a hang that ends in death)
#   crash      the commnode and its back-ends SIGKILLed together (a host crash)
#   orphanstop one of its back-ends SIGSTOPped, the commnode SIGKILLed 0.5 s later, the
#              back-end continued 1 to 3 s after that (issue 45: it died of the
#              kernel's SIGHUP, unreported)
# Each run must end with exit status 0, a complete union (canopy run checks it
# against every back-end's record: docs/demo.md), no wrong wave of the sum, and no
# process left.
#
#   bench/chaos.sh [OUTPUT_DIR] [--seeds N] [--seconds S] [--tree SPEC] [--lost MS]
#                  [--faults LIST] [--quick]
#       default /tmp/canopy-chaos-YYYYmmdd-HHMMSS, N = 10, S = 60, SPEC = b:8^2,
#       MS = 5000, LIST = kill,stop,stopkill,crash,orphanstop; --quick: 2 seeds of 20 s
#
#   OUTPUT_DIR/runs.csv     seed, kills (every fault that ends in a SIGKILL), stops
#                           (plain stops), stops at or over --lost, exit status,
#                           union check (ok/failed/none), missing, extra, processes
#                           left after the run, seconds, the sum's complete, incomplete
#                           and wrong waves, its waves in flight at the faults
#                           (below), and its waves that never came (lost whole)
#   OUTPUT_DIR/waves.png    the sum's incomplete and lost waves beside its waves in
#                           flight at the faults, by seed
#   OUTPUT_DIR/faults.csv   seed, time (s), commnode pid, fault, stop length (ms)
#   OUTPUT_DIR/seed-K.*     canopy run's jsonl output (.jsonl), its stderr (.log),
#                           the records (.record/)
#   OUTPUT_DIR/chaos.png    faults per seed and how each run ended
#   OUTPUT_DIR/summary.txt  runs that passed, and what failed
#
# Waves in flight at the faults: of the sum's waves sent (10 a second for --seconds,
# delivered or not, timed from the workload's start, taken as its first progress
# line less 1 s), those sent while a fault held their way up (a stop, for its length
# but at most --lost, after which the stopped commnode's back-ends are adopted), or
# on their way up at a fault (the wave sent just before it). A fault that kills
# back-ends (crash, orphanstop) holds every wave until they leave the view, --lost
# plus suspect (2 s) after their commnode's death, when they are found not adopted.
# No fault may cost more (issue 44).
#
# Settings (environment): CANOPY_BUILD_DIR (default build/, built already);
# CHAOS_PLOT_ONLY=1 draws the figures and summary again from OUTPUT_DIR. Every run
# is in a process group of its own, continued and killed on the way out.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
out=/tmp/canopy-chaos-$(date +%Y%m%d-%H%M%S)
seeds=10
seconds=60
tree='b:8^2'
lost=5000
faults=kill,stop,stopkill,crash,orphanstop
usage="usage: bench/chaos.sh [OUTPUT_DIR] [--seeds N] [--seconds S] [--tree SPEC] [--lost MS] [--faults LIST] [--quick]"
while [ $# -gt 0 ]; do
  case $1 in
    --quick) seeds=2; seconds=20 ;;
    --seeds) seeds=${2:?--seeds needs a value}; shift ;;
    --seconds) seconds=${2:?--seconds needs a value}; shift ;;
    --tree) tree=${2:?--tree needs a value}; shift ;;
    --lost) lost=${2:?--lost needs a value}; shift ;;
    --faults) faults=${2:?--faults needs a value}; shift ;;
    -h|--help) sed -n 2,45p "$0"; exit 0 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
for n in "$seeds" "$seconds" "$lost"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "bench/chaos.sh: --seeds, --seconds and --lost take positive integers" >&2; exit 2; }
done
IFS=, read -r -a kinds <<<"$faults"
for kind in "${kinds[@]}"; do
  case $kind in
    kill|stop|stopkill|crash|orphanstop) ;;
    *) echo "bench/chaos.sh: --faults takes kill, stop, stopkill, crash and orphanstop, not '$kind'" >&2; exit 2 ;;
  esac
done
build=${CANOPY_BUILD_DIR:-build}
canopy="$build/bin/canopy"
[ -x "$canopy" ] || { echo "bench/chaos.sh: no $canopy: build first (scripts/build.sh)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "bench/chaos.sh: gnuplot is not installed (scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

own_group_trap


if [ "${CHAOS_PLOT_ONLY:-0}" = 1 ]; then
  [ -s "$out/runs.csv" ] || { echo "bench/chaos.sh: CHAOS_PLOT_ONLY=1 needs $out/runs.csv" >&2; exit 1; }
  seeds=$(($(wc -l < "$out/runs.csv") - 1))
else
echo "seed,kills,stops,stops_over_lost,exit_status,check,missing,extra,left,seconds,sum_complete,sum_incomplete,sum_wrong,sum_in_flight,sum_missing" > "$out/runs.csv"
echo "seed,time_s,pid,fault,stop_ms" > "$out/faults.csv"
fi
for seed in $(seq 1 "$seeds"); do
  [ "${CHAOS_PLOT_ONLY:-0}" = 1 ] && break
  RANDOM=$seed
  record="$out/seed-$seed.record"
  rm -rf "$record"
  start=$(now_ms)
  setsid "$canopy" run --tree "$tree" --workload union --duration "$seconds" --record "$record" \
    --lost "$lost" --sum-stream --format jsonl > "$out/seed-$seed.jsonl" 2> "$out/seed-$seed.log" &
  group=$!
  kills=0 stops=0 over=0
  first_line=""  # when the first progress line came (ms since the epoch)
  sleep 2  # the tree is up
  declare -A resume=()  # pid -> when to continue it (ms since the epoch)
  declare -A doom=()    # pid -> when to SIGKILL it (ms since the epoch)
  next_fault=$((start + 2000 + 1000 + RANDOM % 2001))
  while kill -0 "$group" 2>/dev/null && [ $(($(now_ms) - start)) -lt $((seconds * 1000)) ]; do
    now=$(now_ms)
    [ -z "$first_line" ] && [ -s "$out/seed-$seed.jsonl" ] && first_line=$now
    for pid in "${!resume[@]}"; do
      if [ "$now" -ge "${resume[$pid]}" ]; then
        kill -CONT "$pid" 2>/dev/null || true
        unset "resume[$pid]"
      fi
    done
    for pid in "${!doom[@]}"; do
      if [ "$now" -ge "${doom[$pid]}" ]; then
        kill -KILL "$pid" 2>/dev/null || true
        unset "doom[$pid]"
      fi
    done
    if [ "$now" -ge "$next_fault" ]; then
      # A commnode of this run that is running (not one stopped or doomed already).
      victims=()
      for pid in $(pgrep -s "$group" -x canopy-commnode || true); do
        [ -z "${resume[$pid]:-}" ] && [ -z "${doom[$pid]:-}" ] && victims+=("$pid")
      done
      if [ ${#victims[@]} -gt 0 ]; then
        pid=${victims[$((RANDOM % ${#victims[@]}))]}
        at=$(awk -v a="$start" -v b="$now" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
        kind=${kinds[$((RANDOM % ${#kinds[@]}))]}
        case $kind in
          kill)
            kill -KILL "$pid" 2>/dev/null || true
            kills=$((kills + 1))
            echo "$seed,$at,$pid,kill," >> "$out/faults.csv"
            ;;
          stop)
            # Half the stops within 10% of --lost (below or above it), the others
            # anywhere in 0.5 to 7 s.
            if [ $((RANDOM % 2)) = 0 ]; then
              length=$((lost * 9 / 10 + RANDOM % (lost / 5 + 1)))
            else
              length=$((500 + RANDOM % 6501))
            fi
            kill -STOP "$pid" 2>/dev/null || true
            resume[$pid]=$((now + length))
            stops=$((stops + 1))
            [ "$length" -ge "$lost" ] && over=$((over + 1))
            echo "$seed,$at,$pid,stop,$length" >> "$out/faults.csv"
            ;;
          stopkill)
            length=$((500 + RANDOM % (lost - 499)))
            kill -STOP "$pid" 2>/dev/null || true
            doom[$pid]=$((now + length))
            kills=$((kills + 1))
            echo "$seed,$at,$pid,stopkill,$length" >> "$out/faults.csv"
            ;;
          crash)
            # The commnode and its back-ends at once (each back-end is in a
            # process group of its own, so one by one, in one go).
            kill -KILL "$pid" $(pgrep -P "$pid" || true) 2>/dev/null || true
            kills=$((kills + 1))
            echo "$seed,$at,$pid,crash," >> "$out/faults.csv"
            ;;
          orphanstop)
            child=$(pgrep -P "$pid" | head -n 1 || true)
            if [ -n "$child" ]; then
              kill -STOP "$child" 2>/dev/null || true
              resume[$child]=$((now + 500 + 1000 + RANDOM % 2001))
            fi
            doom[$pid]=$((now + 500))
            kills=$((kills + 1))
            echo "$seed,$at,$pid,orphanstop,500" >> "$out/faults.csv"
            ;;
        esac
      fi
      next_fault=$((now + 1000 + RANDOM % 2001))
    fi
    sleep 0.05
  done
  for pid in "${!doom[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${!resume[@]}"; do kill -CONT "$pid" 2>/dev/null || true; done
  unset resume doom
  # The run ends by itself once every back-end has sent for --duration; bounded.
  status=0
  waited=0
  while kill -0 "$group" 2>/dev/null && [ "$waited" -lt 1200 ]; do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$group" 2>/dev/null; then
    echo "seed $seed: canopy run still running 120 s after the faults ended; killed" >&2
    status=124
    kill -KILL "$group" 2>/dev/null || true
  fi
  wait "$group" || status=$?
  sleep 1  # what the tree does after its front-end exited
  # Live processes of the run (a zombie has exited; whether it is reaped is up to
  # whoever inherited it, here or init).
  left_list=$(ps -e -o pid=,sid=,stat=,comm= | awk -v g="$group" '$2 == g && $3 !~ /^Z/ { print $1 " " $4 }')
  left=$(grep -c . <<<"$left_list" || true)
  [ "$left" -gt 0 ] && echo "seed $seed: processes left: $(tr '\n' ';' <<<"$left_list")" >&2
  kill_session "$group"
  group=""
  secs=$(awk -v a="$start" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  summary=$(grep '"summary"' "$out/seed-$seed.jsonl" | tail -n 1 || true)
  check=$(sed -n 's/.*"check":"\([a-z]*\)".*/\1/p' <<<"$summary")
  missing=$(sed -n 's/.*"missing":\([0-9]*\).*/\1/p' <<<"$summary")
  extra=$(sed -n 's/.*"extra":\([0-9]*\).*/\1/p' <<<"$summary")
  sum_complete=$(sed -n 's/.*"sum":{"complete_waves":\([0-9]*\).*/\1/p' <<<"$summary")
  sum_incomplete=$(sed -n 's/.*"sum":{[^}]*"incomplete_waves":\[\([0-9,]*\)\].*/\1/p' <<<"$summary" | tr ',' '\n' | grep -c . || true)
  sum_wrong=$(sed -n 's/.*"wrong_waves":\([0-9]*\).*/\1/p' <<<"$summary")
  sum_missing=$(sed -n 's/.*"missing_waves":\[\([0-9,]*\)\].*/\1/p' <<<"$summary" | tr ',' '\n' | grep -c . || true)
  # The sum's waves in flight at this seed's faults (see the top of this script).
  in_flight=""
  if [ -n "$first_line" ] && [ -n "$sum_complete" ]; then
    in_flight=$(awk -F, -v seed="$seed" -v origin="$(( (first_line - start - 1000) ))" -v lost="$lost" \
                    -v waves="$((seconds * 10))" '
      NR > 1 && $1 == seed {
        n++; from[n] = $2 - 0.1; to[n] = $2 + ($5 != "" ? ($5 < lost ? $5 : lost) / 1000 : 0)
        # Back-ends die with a crash (and an orphanstop): every wave waits for them
        # until they leave the view, lost + suspect (2 s) after the death of their parent
        # (docs/membership.md), and is incomplete meanwhile.
        if ($4 == "crash" || $4 == "orphanstop") to[n] = $2 + ($5 != "" ? $5 / 1000 : 0) + (lost + 2000) / 1000
      }
      END {
        held = 0
        for (w = 0; w < waves; w++) {
          t = origin / 1000 + w / 10
          for (i = 1; i <= n; i++) if (t >= from[i] && t <= to[i]) { held++; break }
        }
        print held
      }' "$out/faults.csv")
  fi
  echo "$seed,$kills,$stops,$over,$status,${check:-none},${missing:-},${extra:-},$left,$secs,${sum_complete:-},${sum_incomplete:-},${sum_wrong:-},${in_flight},${sum_missing:-}" >> "$out/runs.csv"
  echo "seed $seed/$seeds: $kills kills, $stops stops ($over at or over --lost): exit $status, check ${check:-none}, $left left, $secs s; sum: ${sum_complete:-?} complete, ${sum_incomplete:-?} incomplete, ${sum_missing:-?} lost whole (${in_flight:-?} in flight at the faults), ${sum_wrong:-?} wrong waves" >&2
done

awk -F, -v tree="$tree" -v secs="$seconds" -v lost="$lost" '
  NR > 1 { runs++; ok = ($5 == 0 && $6 == "ok" && $9 == 0 && $13 == "0"); if (ok) passed++; else bad = bad " " $1
           kills += $2; stops += $3; over += $4; complete += $11; incomplete += $12; wrong += $13; in_flight += $14; lost_whole += $15
           if ($12 + $15 > $14) above = above " " $1 }
  END {
    printf "%s, union workload for %d s, --lost %d ms: %d of %d runs passed (exit 0, union complete, no wrong wave, nothing left)\n", tree, secs, lost, passed, runs
    printf "faults: %d SIGKILLs, %d SIGSTOPs (%d at or over --lost)\n", kills, stops, over
    printf "sum beside the union: %d complete waves, %d incomplete (%.1f per fault), %d lost whole, %d wrong\n", complete, incomplete, (kills + stops) ? incomplete / (kills + stops) : 0, lost_whole, wrong
    printf "waves in flight at the faults: %d; seeds with more incomplete and lost waves than that:%s\n", in_flight, above == "" ? " none" : above
    if (bad != "") printf "failed seeds:%s\n", bad
  }' "$out/runs.csv" > "$out/summary.txt"
awk -F, 'NR > 1 { n[$4]++ } END { line = "faults by kind:"; for (k in n) line = line " " k " " n[k]; print line }' \
  "$out/faults.csv" >> "$out/summary.txt"
cat "$out/summary.txt"

gnuplot <<PLOT
set terminal pngcairo size 1100,520 font "sans,11"
set output "$out/chaos.png"
set datafile separator ","
set title "Chaos soak: $tree, union workload for $seconds s, a fault at a commnode every 1-3 s\n($faults; --lost $lost ms)" noenhanced
set xlabel "seed"
set ylabel "faults injected"
set xrange [0.5:$seeds.5]
set xtics 1
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0
set key outside right top
set grid ytics
set style fill solid 0.7 border -1
set boxwidth 0.6
# Stacked by hand: the total first, then the layers below it.
plot "$out/runs.csv" using 1:(\$2 + \$3) skip 1 with boxes lc rgb "#8e44ad" title "SIGSTOP >= --lost", \
     "" using 1:(\$2 + \$3 - \$4) skip 1 with boxes lc rgb "#2980b9" title "SIGSTOP < --lost", \
     "" using 1:2 skip 1 with boxes lc rgb "#c0392b" title "ending in SIGKILL", \
     "" using 1:(\$2 + \$3 + 1):((\$5 == 0 && stringcolumn(6) eq "ok" && \$9 == 0 && \$13 == 0) ? "passed" : "FAILED") skip 1 with labels notitle
PLOT
gnuplot <<PLOT
set terminal pngcairo size 1100,520 font "sans,11"
set output "$out/waves.png"
set datafile separator ","
set title "Sum beside the union: waves flagged incomplete or lost whole, against the waves in flight at the faults\n$tree, $seconds s at 10 waves/s, --lost $lost ms" noenhanced
set xlabel "seed"
set ylabel "waves"
set key inside top left
set xrange [0:$seeds + 1]
set xtics 1
set yrange [0:*]
set offsets 0, 0, graph 0.3, 0
set grid ytics
set style fill solid 0.7 border -1
set boxwidth 0.35
plot "$out/runs.csv" using (\$1 - 0.18):14 skip 1 with boxes lc rgb "#bdc3c7" title "in flight at the faults (the bound)", \
     "" using (\$1 + 0.18):(\$12 + \$15) skip 1 with boxes lc rgb "#c0392b" title "lost whole (never came)", \
     "" using (\$1 + 0.18):12 skip 1 with boxes lc rgb "#2980b9" title "flagged incomplete", \
     "" using 1:((\$12 + \$15 > \$14 ? \$12 + \$15 : \$14)):(sprintf("%d of %d delivered flagged, %d lost\n%d wrong, %d faults", \$12, \$11 + \$12, \$15, \$13, \$2 + \$3)) skip 1 with labels font ",9" offset 0,1.5 notitle
PLOT
echo "figures: $out/chaos.png, $out/waves.png" >&2
awk -F, 'NR > 1 && !($5 == 0 && $6 == "ok" && $9 == 0 && $13 == "0") { bad = 1 } END { exit bad }' "$out/runs.csv"
