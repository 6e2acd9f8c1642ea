#!/usr/bin/env bash
# The ring-token benchmark of paper 001 §V-B on Canopy (docs/benchmarks.md, "Ring of
# tokens"): canopy-ring-bench once per scenario, then the figures.
#
#   bench/ring_token.sh [OUTPUT_DIR]          default /tmp/canopy-ring-YYYYmmdd-HHMMSS
#
#   OUTPUT_DIR/SCENARIO/   none, one, pairs, half, most: the run's files (tokens.csv, views-*.csv,
#                          kills.csv, detect.csv, latency.csv, frontend.csv, logs/) and
#                          summary.csv (what canopy-ring-bench printed)
#   fig1-SCENARIO.png      token round trip over token index (and hops), the fault-free
#                          run in grey, kills marked: the paper's Fig. 1
#   fig2a-SCENARIO.png     notification latency at every back-end, one line per view and
#                          failed rank, with the bound alpha0 + gamma*D: the paper's Fig. 2(a)
#   overhead.csv/.png      fault-free token round trips against the runtime before the
#                          membership service, if RING_BEFORE_TREE is set (below)
#   summary.txt            the tables of docs/benchmarks.md
#
# Settings (environment):
#   CANOPY_BUILD_DIR   build directory with bin/canopy-ring-bench (default build/; built if missing)
#   RING_TOPOLOGY      tree spec (default b:4^2: 16 back-ends under 4 commnodes)
#   RING_TOKENS        tokens rank 0 injects (default 2000), evenly over
#   RING_DURATION_MS   (default 4000)
#   RING_SCENARIOS     (default "none one pairs half most"; most = n-2 at once)
#   RING_PLOT_ONLY=1   draws the figures and tables again from OUTPUT_DIR, without running
#   RING_BEFORE_TREE   a worktree of the commit before the membership service, configured
#                      with a build/ directory, e.g.
#                        git worktree add /tmp/canopy-before 146ccdf
#                        (cd /tmp/canopy-before && ./scripts/build.sh build -DCANOPY_BUILD_BENCH=ON)
#                      the ring's sources are copied into its bench/ and built there; then
#                      RING_ROUNDS (default 5) rounds of before/after are run in turn
# Every run is bounded (RING_RUN_LIMIT_S, default 90 s) and runs in a process group of
# its own that is killed on the way out, whatever happens; the script fails if any
# process is left.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh  # median, run_bounded
out=${1:-/tmp/canopy-ring-$(date +%Y%m%d-%H%M%S)}
build=${CANOPY_BUILD_DIR:-build}
topology=${RING_TOPOLOGY:-b:4^2}
tokens=${RING_TOKENS:-2000}
duration=${RING_DURATION_MS:-4000}
scenarios=${RING_SCENARIOS:-none one pairs half most}
rounds=${RING_ROUNDS:-5}
limit=${RING_RUN_LIMIT_S:-90}
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v gnuplot >/dev/null || ./scripts/setup.sh
[ -x "$build/bin/canopy-ring-bench" ] || cmake --build "$build" -j2 --target canopy-ring-bench

# ---- bounded runs, each in a process group of its own: run_bounded (bench/lib.sh) ----

# ---- the scenarios ----
for s in $scenarios; do
  [ "${RING_PLOT_ONLY:-0}" = 1 ] && break
  dir="$out/$s"
  rm -rf "$dir"
  mkdir -p "$dir"
  log=()
  [ "$s" = none ] || log=(--log)
  echo "scenario $s ..." >&2
  run_bounded "$dir/summary" "$build/bin/canopy-ring-bench" --out "$dir" --scenario "$s" --topology "$topology" \
    --tokens "$tokens" --duration-ms "$duration" "${log[@]}"
done

metric() { awk -F, -v m="$2" '$3 == m { print $4 }' "$out/$1/summary.csv" 2>/dev/null | head -1; }

# ---- Fig. 1: round trip over token index, kills marked ----
tokens_dat() {  # token index, rtt in ms, hops (lost tokens left out)
  awk -F, 'NR > 1 && $4 >= 0 { print $1, $4 / 1000, $5 }' "$1/tokens.csv"
}
[ -f "$out/none/tokens.csv" ] && tokens_dat "$out/none" > "$out/none/tokens.dat"
for s in $scenarios; do
  dir="$out/$s"
  [ -f "$dir/tokens.csv" ] || continue
  tokens_dat "$dir" > "$dir/tokens.dat"
  # Each kill at the index of the first token sent after it.
  arrows=$(awk -F, 'FNR == 1 { next } FILENAME ~ /tokens/ { send[++n] = $2; next }
    { for (i = 1; i <= n && send[i] < $4; i++) {} printf "set arrow from %d, graph 0 to %d, graph 1 nohead lc rgb \"red\" dt 2\n", i - 1, i - 1 }' \
    "$dir/tokens.csv" "$dir/kills.csv" 2>/dev/null | sort -u || true)
  lost=$(metric "$s" tokens_lost | cut -d. -f1)
  sent=$(metric "$s" tokens_sent | cut -d. -f1)
  ms=$(metric "$s" duration | cut -d. -f1)
  n=$(metric "$s" backends | cut -d. -f1)
  ref=""
  if [ "$s" != none ] && [ -f "$out/none/tokens.dat" ]; then
    ref="\"$out/none/tokens.dat\" using 1:2 axes x1y1 with points pt 7 ps 0.3 lc rgb \"#bbbbbb\" title \"round trip, run without failures\", "
  fi
  gnuplot <<GP
set terminal pngcairo size 1000,600 noenhanced
set output "$out/fig1-$s.png"
set title "Token round trip, ring of $n back-ends on $topology, scenario '$s': $sent tokens, $lost lost"
set xlabel "token index (rank 0 injects $sent tokens evenly over $ms ms)"
set ylabel "round trip (ms, log scale)"
set y2label "hops per round trip"
set logscale y
set ytics nomirror
set y2tics
set y2range [0:*]
set grid ytics
set key inside top right box opaque
$arrows
plot $ref "$dir/tokens.dat" using 1:2 axes x1y1 with points pt 7 ps 0.3 lc rgb "blue" title "round trip", \
     "" using 1:3 axes x1y2 with lines lw 2 lc rgb "dark-green" title "hops (right axis)", \
     1/0 with lines lc rgb "red" dt 2 title "SIGKILL of back-end(s)"
GP
done

# ---- Fig. 2(a): notification latency per view at every back-end, with the bound ----
for s in $scenarios; do
  dir="$out/$s"
  [ -s "$dir/latency.csv" ] || continue
  [ "$(wc -l < "$dir/latency.csv")" -gt 1 ] || continue
  # One block per (view, failed rank), survivors in order; the bound per survivor.
  awk -F, 'NR > 1 { printf "%d %d %d %.3f\n", $1, $2, $3, $6 / 1000 }' "$dir/latency.csv" |
    sort -k1,1n -k2,2n -k3,3n |
    awk '{ key = $1 " " $2; if (key != prev) { if (NR > 1) printf "\n\n"; printf "\"view %d: rank %d killed\"\n", $1, $2; prev = key }
           print $3, $4 }' > "$dir/latency.dat"
  awk -F, 'NR > 1 { print $3, $8 / 1000 }' "$dir/latency.csv" | sort -n -u > "$dir/bound.dat"
  blocks=$(grep -c '^"' "$dir/latency.dat")
  total=$(metric "$s" latencies | cut -d. -f1)
  meet=$(metric "$s" meet_bound | cut -d. -f1)
  meet_f=$(metric "$s" meet_bound_per_failure | cut -d. -f1)
  a0=$(metric "$s" alpha0)
  g=$(metric "$s" gamma)
  gnuplot <<GP
set terminal pngcairo size 1200,640 noenhanced
set output "$out/fig2a-$s.png"
set title sprintf("Notification latency per view at every back-end, scenario '$s' ($topology)\nwithin alpha0 + gamma*D: $meet of $total (alpha0 = %.0f us, gamma = %.1f us); within alpha0(f) + gamma*D: $meet_f of $total", $a0, $g)
set xlabel "back-end rank (survivor)"
set ylabel "kill to view applied (ms)"
set yrange [0:*]
set xtics 1
set key outside right top
set grid ytics
plot for [i=0:$((blocks - 1))] "$dir/latency.dat" index i using 1:2 with linespoints lt i%8+1 dt i/8+1 \
       pt 7-3*(i/8) ps 0.7 title columnheader(1), \
     "$dir/bound.dat" using 1:2 with linespoints pt 2 lw 3 lc rgb "black" title "bound alpha0 + gamma*D"
GP
done

# ---- overhead against the runtime before the membership service ----
if [ -n "${RING_BEFORE_TREE:-}" ] && [ "${RING_PLOT_ONLY:-0}" != 1 ]; then
  before=$RING_BEFORE_TREE
  [ -d "$before/build" ] || { echo "RING_BEFORE_TREE=$before has no build/ directory" >&2; exit 2; }
  cp bench/ring_backend.cpp bench/ring_bench.cpp bench/ring_protocol.h "$before/bench/"
  grep -q canopy-ring-bench "$before/bench/CMakeLists.txt" ||
    sed -n '/^# canopy-ring-bench:/,/^add_dependencies(canopy-ring-bench/p' bench/CMakeLists.txt >> "$before/bench/CMakeLists.txt"
  { cmake -S "$before" -B "$before/build" && cmake --build "$before/build" -j2 --target canopy-ring-bench; } \
    > "$out/before-build.log" 2>&1 ||
    { echo "building the ring in $before failed: $out/before-build.log" >&2; exit 1; }
  csv="$out/overhead.csv"
  echo "round,build,token_rtt_median_us,ping_rtt_median_us,tokens_back" > "$csv"
  for round in $(seq 1 "$rounds"); do
    for side in before-all after-all after-view; do
      case $side in
        before-all) bin=$before/build/bin ring=all ;;
        after-all) bin=$build/bin ring=all ;;
        after-view) bin=$build/bin ring=view ;;
      esac
      dir="$out/overhead/$side-$round"
      rm -rf "$dir"
      mkdir -p "$dir"
      echo "overhead round $round: $side ..." >&2
      run_bounded "$dir/summary" "$bin/canopy-ring-bench" --out "$dir" --scenario none --ring "$ring" \
        --topology "$topology" --tokens "$tokens" --duration-ms "$duration"
      rtt=$(awk -F, '$3 == "token_rtt_median" { print $4 }' "$dir/summary.csv")
      ping=$(awk -F, '$3 ~ /^ping_cold_rtt_median_/ { print $4; exit }' "$dir/summary.csv")
      back=$(awk -F, '$3 == "tokens_back" { print $4 }' "$dir/summary.csv")
      echo "$round,$side,$rtt,$ping,$back" >> "$csv"
    done
  done
fi
if [ -f "$out/overhead.csv" ]; then
  csv="$out/overhead.csv"
  rounds=$(awk -F, 'NR > 1 { print $1 }' "$csv" | sort -n | tail -1)
  side_median() { awk -F, -v s="$1" -v c="$2" 'NR > 1 && $2 == s && $c != "" { print $c }' "$csv" | median; }
  for side in before-all after-all after-view; do
    printf "%s %s %s\n" "$side" "$(side_median "$side" 3)" "$(side_median "$side" 4)"
  done > "$out/overhead.dat"
  # Ratios round by round (each round ran before, after, after in turn), then their median.
  ratio() {
    awk -F, -v a="$1" -v c="$2" 'NR > 1 { v[$1 "," $2] = $c; r[$1] = 1 }
      END { for (k in r) if (v[k ",before-all"] > 0 && v[k "," a] != "") print v[k "," a] / v[k ",before-all"] }' "$csv" | median
  }
  printf "ratios to before (median of the rounds' ratios): after-all %s, after-view %s (token round trip); after-all %s, after-view %s (ping)\n" \
    "$(ratio after-all 3)" "$(ratio after-view 3)" "$(ratio after-all 4)" "$(ratio after-view 4)" > "$out/overhead-ratios.txt"
  awk -F, 'NR > 1 { x = ($2 == "before-all" ? 0 : $2 == "after-all" ? 1 : 2); print x, $3 / 1000, $4 / 1000 }' "$csv" \
    > "$out/overhead-runs.dat"
  gnuplot <<GP
set terminal pngcairo size 1100,520 noenhanced
set output "$out/overhead.png"
set multiplot layout 1,2 title "Fault-free ring on $topology, $rounds rounds run in turn (dots: one run's median; bars: median of the runs)"
set xtics ("before\nring of all" 0, "after\nring of all" 1, "after\nring of the view" 2)
set xrange [-0.6:2.6]
set bmargin 4
set grid ytics
set key off
set boxwidth 0.5
set style fill transparent solid 0.3 border -1
set yrange [0:*]
set title "token round trip, $tokens tokens (lower is better)"
set ylabel "milliseconds"
plot "$out/overhead.dat" using 0:(\$2 / 1000) with boxes lc rgb "grey", "$out/overhead-runs.dat" using 1:2 with points pt 7 ps 1.2 lc rgb "blue"
set title "cold ping-pong, rank 0 and its nearest back-end"
plot "$out/overhead.dat" using 0:(\$3 / 1000) with boxes lc rgb "grey", "$out/overhead-runs.dat" using 1:3 with points pt 7 ps 1.2 lc rgb "red"
unset multiplot
GP
fi

# ---- the tables ----
{
  echo "scenario | load before | back-ends | tokens sent | back | lost | round trip median (us) | alpha0 (us) | gamma (us) | latencies | within bound | over bound | within per-failure bound | latency median (us) | latency max (us) | stabilise median (us)"
  for s in $scenarios; do
    [ -f "$out/$s/summary.csv" ] || continue
    printf "%s | %s" "$s" "$(cut -d' ' -f1 "$out/$s/summary.loadavg" 2>/dev/null)"
    for m in backends tokens_sent tokens_back tokens_lost token_rtt_median alpha0 gamma latencies meet_bound violate_bound \
      meet_bound_per_failure latency_median latency_max stabilise_median; do
      v=$(metric "$s" "$m")
      printf " | %s" "${v:--}"
    done
    echo
  done
  echo
  echo "where the time went (medians over the kills, us): scenario | kill -> link closed | -> report | -> front-end | -> view sent | view -> first survivor | view -> last survivor"
  for s in $scenarios; do
    [ -f "$out/$s/breakdown.csv" ] || continue
    printf "%s" "$s"
    for m in kill_to_link_closed link_closed_to_report report_to_root root_to_view_sent view_sent_to_first_applied \
      view_sent_to_last_applied; do
      printf " | %s" "$(metric "$s" "${m}_median")"
    done
    echo
  done
  if [ -f "$out/overhead.dat" ]; then
    echo
    echo "fault-free, medians of $rounds runs: build | token round trip (us) | ping round trip (us)"
    cat "$out/overhead.dat"
    cat "$out/overhead-ratios.txt"
  fi
} | tee "$out/summary.txt"
echo "wrote $out" >&2
