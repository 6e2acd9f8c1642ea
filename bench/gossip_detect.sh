#!/usr/bin/env bash
# Paper 003's Fig. 6 on real processes (docs/benchmarks.md, "Gossip: detection time
# (paper 003 Fig. 6), false positives and cost"): canopy-gossip-detect-bench detect
# once per point (tree size n, schedule, T_gossip), then the figure.
#
#   bench/gossip_detect.sh [OUTPUT_DIR] [--quick]    default /tmp/canopy-gossip-detect-YYYYmmdd-HHMMSS
#
#   OUTPUT_DIR/SCHEDULE-T-n/   one point: detect.csv (one row per survivor and stopped member),
#                              false.csv, samples.csv (per sample, with when the stopped
#                              members were killed and when the front-end's first view
#                              without one of them came), summary.csv (what the driver printed),
#                              summary.log, sample-K/ (every back-end's events, the front-end's)
#   points.csv                 one row per point: the detection times and T_cleanup
#   fig6.png                   mean detection time against n, BRR and DBRR, next to T_cleanup
#                              and T_cleanup + T_gossip + ping time-out: the paper's Fig. 6
#   summary.txt                the table of docs/benchmarks.md
#
# Every point: 3 samples (--quick: 1), a tree each, one "host" (the back-ends below one
# leaf commnode) SIGSTOPped after 3 ceil(log2 n) rounds; max_hangup 0 and ping time-out
# = T_gossip, the tree's own detection slowed (suspect 30 s, lost 60 s) so that the
# gossip finds them. Points: BRR and DBRR at T = 500 ms for n = 16, 32, 64 (b:4^2,
# b:2^5, b:4^3) and at T = 100 ms for those and n = 128 (b:2^7); --quick: n = 16, 32 at
# 100 ms. A full run takes about 10 minutes, --quick under one. n = 128 at 500 ms adds
# about 4 minutes: GOSSIP_DETECT_POINTS="brr:500:b:2^7 dbrr:500:b:2^7".
# Settings (environment):
#   CANOPY_BUILD_DIR          build directory with bin/canopy-gossip-detect-bench (default build/)
#   GOSSIP_DETECT_POINTS      "SCHEDULE:T_MS:SPEC ..." instead of the default points
#   GOSSIP_DETECT_SAMPLES     samples per point
#   GOSSIP_DETECT_RUN_LIMIT_S bound of one point (default 240 s)
#   GOSSIP_DETECT_PLOT_ONLY=1 draws the figure and table again from OUTPUT_DIR
# Every point runs under that bound in a process group of its own, killed on the way
# out whatever happens; the stopped processes are killed by the driver, and any left
# in the group is killed and reported.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh  # run_bounded
out=/tmp/canopy-gossip-detect-$(date +%Y%m%d-%H%M%S)
quick=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    -*) echo "usage: bench/gossip_detect.sh [OUTPUT_DIR] [--quick]" >&2; exit 2 ;;
    *) out=$a ;;
  esac
done
build=${CANOPY_BUILD_DIR:-build}
bench="$build/bin/canopy-gossip-detect-bench"
limit=${GOSSIP_DETECT_RUN_LIMIT_S:-240}
if [ "$quick" = 1 ]; then
  samples=${GOSSIP_DETECT_SAMPLES:-1}
  points=${GOSSIP_DETECT_POINTS:-"brr:100:b:4^2 dbrr:100:b:4^2 brr:100:b:2^5 dbrr:100:b:2^5"}
else
  samples=${GOSSIP_DETECT_SAMPLES:-3}
  points=${GOSSIP_DETECT_POINTS:-}
  if [ -z "$points" ]; then
    for s in brr dbrr; do
      for spec in 'b:4^2' 'b:2^5' 'b:4^3'; do points="$points $s:500:$spec"; done
    done
    for s in brr dbrr; do
      for spec in 'b:4^2' 'b:2^5' 'b:4^3' 'b:2^7'; do points="$points $s:100:$spec"; done
    done
  fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v gnuplot >/dev/null || ./scripts/setup.sh
[ -x "$bench" ] || cmake --build "$build" -j2 --target canopy-gossip-detect-bench

# ---- bounded runs, each in a process group of its own: run_bounded (bench/lib.sh) ----

# split_point SCHEDULE:T_MS:SPEC sets s, t and spec.
split_point() {
  s=${1%%:*}
  local rest=${1#*:}
  t=${rest%%:*}
  spec=${rest#*:}
}
point_dir() { echo "$out/$1-$2-$(echo "$3" | tr -c 'a-z0-9\n' '_')"; }

start=$(date +%s)
if [ "${GOSSIP_DETECT_PLOT_ONLY:-0}" != 1 ]; then
  for p in $points; do
    split_point "$p"
    dir=$(point_dir "$s" "$t" "$spec")
    rm -rf "$dir"
    mkdir -p "$dir"
    echo "$s, T_gossip $t ms, $spec, $samples sample(s) ..." >&2
    run_bounded "$dir/summary" "$bench" detect --out "$dir" --topology "$spec" --schedule "$s" --period-ms "$t" \
      --samples "$samples"
  done
fi
echo "points took $(($(date +%s) - start)) s" >&2

# ---- one row per point ----
metric() { awk -F, -v m="$2" '$4 == m { print $5 }' "$1/summary.csv" 2>/dev/null | head -1; }
cols="backends per_host samples pairs learned detection_mean detection_median detection_p90 detection_min detection_max
  t_cleanup goal t_cleanup_plus_hangup_period_ping by_gossip by_view by_failure within_goal before_any_view
  before_any_view_mean after_a_view after_a_view_mean samples_with_a_frontend_view_before_the_kill false_positive_members"
{
  printf "schedule,period_ms,topology,load"
  for c in $cols; do printf ",%s" "$c"; done
  echo
  for p in $points; do
    split_point "$p"
    dir=$(point_dir "$s" "$t" "$spec")
    [ -s "$dir/summary.csv" ] || continue
    printf "%s,%s,%s,%s" "$s" "$t" "$spec" "$(cut -d' ' -f1 "$dir/summary.loadavg")"
    for c in $cols; do printf ",%s" "$(metric "$dir" "$c")"; done
    echo
  done
} > "$out/points.csv"

# ---- Fig. 6: mean detection time against n, per T_gossip ----
col() { head -1 "$out/points.csv" | tr , '\n' | grep -nx "$1" | cut -d: -f1; }
periods=$(awk -F, 'NR > 1 { print $2 }' "$out/points.csv" | sort -rn -u)
for t in $periods; do
  for s in brr dbrr; do
    # n, mean, min, max (s), T_cleanup, T_cleanup + T, T_cleanup + T + ping, mean of those
    # found before any view change reached the survivor (s)
    awk -F, -v s="$s" -v t="$t" -v n="$(col backends)" -v m="$(col detection_mean)" -v lo="$(col detection_min)" \
      -v hi="$(col detection_max)" -v c="$(col t_cleanup)" -v g="$(col goal)" -v b="$(col t_cleanup_plus_hangup_period_ping)" \
      -v f="$(col before_any_view_mean)" \
      'NR > 1 && $1 == s && $2 == t { print $n, $m / 1000, $lo / 1000, $hi / 1000, $c / 1000, $g / 1000, $b / 1000, $f / 1000 }' \
      "$out/points.csv" | sort -n > "$out/fig6-$s-$t.dat"
  done
done
nt=$(echo "$periods" | wc -w)
if [ "$nt" -gt 0 ]; then
  plots=""
  for t in $periods; do
    # BRR drawn a little left of n, DBRR a little right, so that their bars do not hide each other.
    plots="$plots
set title \"T_gossip = $t ms (max_hangup 0, ping time-out $t ms)\"
plot \"$out/fig6-brr-$t.dat\" using (\$1 * 0.96):2:3:4 with yerrorlines lw 2 pt 7 lc rgb \"blue\" title \"BRR: mean (bars: min-max)\", \\
     \"$out/fig6-dbrr-$t.dat\" using (\$1 * 1.04):2:3:4 with yerrorlines lw 2 pt 5 lc rgb \"red\" title \"DBRR: mean (bars: min-max)\", \\
     \"$out/fig6-brr-$t.dat\" using (\$1 * 0.96):8 with points pt 6 ps 1.5 lc rgb \"blue\" title \"BRR: mean of those found before a view change\", \\
     \"$out/fig6-dbrr-$t.dat\" using (\$1 * 1.04):8 with points pt 4 ps 1.5 lc rgb \"red\" title \"DBRR: mean of those found before a view change\", \\
     \"$out/fig6-brr-$t.dat\" using 1:5 with lines dt 2 lw 2 lc rgb \"blue\" title \"BRR T_cleanup = 2 ceil(log2 n) T\", \\
     \"$out/fig6-dbrr-$t.dat\" using 1:5 with lines dt 2 lw 2 lc rgb \"red\" title \"DBRR T_cleanup = 3 ceil(log2 n) T\", \\
     \"$out/fig6-brr-$t.dat\" using 1:7 with lines dt 3 lw 2 lc rgb \"blue\" title \"BRR T_cleanup + T + ping\", \\
     \"$out/fig6-dbrr-$t.dat\" using 1:7 with lines dt 3 lw 2 lc rgb \"red\" title \"DBRR T_cleanup + T + ping\""
  done
  gnuplot <<GP
set terminal pngcairo size $((720 * nt + 60)),680 noenhanced
set output "$out/fig6.png"
set multiplot layout 1,$nt title "Time for every survivor to learn that the back-ends of one hung host failed\n(SIGSTOP of every back-end below one leaf commnode; $samples sample(s) per point)"
set logscale x 2
set xtics (16, 32, 64, 128, 256)
set xrange [12:170]
set xlabel "back-ends n"
set ylabel "seconds after the SIGSTOP"
set yrange [0:*]
set grid
set key inside top left vertical font ",9" box opaque samplen 3
set offsets 0, 0, graph 0.6, 0  # room for the key above the curves
$plots
unset multiplot
GP
fi

# ---- the table ----
{
  echo "schedule | T (ms) | tree | n | per host | load | pairs | learned | mean (ms) | median | p90 | max | T_cleanup | goal T_cleanup+T | within goal | T_cleanup+T+ping | by own gossip | by view | found before any view: count, mean | after a view: count, mean | samples with a front-end view before the kill | false positives"
  awk -F, -v OFS=" | " 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { printf "%s | %s | %s | %d | %d | %s | %d | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %d | %.0f | %d | %d | %d, %.0f | %d, %.0f | %d of %d | %d\n",
      $c["schedule"], $c["period_ms"], $c["topology"], $c["backends"], $c["per_host"], $c["load"], $c["pairs"], $c["learned"],
      $c["detection_mean"], $c["detection_median"], $c["detection_p90"], $c["detection_max"], $c["t_cleanup"], $c["goal"],
      $c["within_goal"], $c["t_cleanup_plus_hangup_period_ping"], $c["by_gossip"], $c["by_view"], $c["before_any_view"],
      $c["before_any_view_mean"], $c["after_a_view"], $c["after_a_view_mean"],
      $c["samples_with_a_frontend_view_before_the_kill"], $c["samples"], $c["false_positive_members"] }' "$out/points.csv"
} | tee "$out/summary.txt"
echo "wrote $out" >&2
