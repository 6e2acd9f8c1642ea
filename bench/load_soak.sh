#!/usr/bin/env bash
# Load soak (docs/benchmarks.md, "Load soak"; issue 45): a tree flooded with waves
# (`canopy run --tree b:16^2 --interval 0`: every back-end sends its next wave as soon
# as it can) for MINUTES minutes while `stress-ng --cpu N` takes the machine's cores
# beside it, and no fault injected. It must end with no failure event (a healthy
# process declared lost), every wave that came checked right, and the memory of every
# process bounded: the run's processes' RSS is sampled every 5 s and plotted.
#
#   bench/load_soak.sh [OUTPUT_DIR] [--minutes M] [--tree SPEC] [--stress N] [--quick]
#       default /tmp/canopy-load-soak-YYYYmmdd-HHMMSS, M = 10, SPEC = b:16^2,
#       N = the number of cores; --quick: 1 minute of b:8^2
#
#   OUTPUT_DIR/rss.csv      every sample: seconds, the front-end's RSS, the largest
#                           commnode's and back-end's, the whole tree's (MiB), and the
#                           waves received so far
#   OUTPUT_DIR/rss.png      those over time
#   OUTPUT_DIR/run.jsonl    canopy run's output (run.log: its stderr)
#   OUTPUT_DIR/summary.txt  waves, failure events, the check, memory at the start
#                           and at the end, and whether the soak passed
#
# "Bounded": each role's largest RSS over the last third of the run is at most 1.5
# times its largest over the second third (the first third is start-up and the
# queues filling). The run ends with SIGINT, after which canopy run checks and sums
# up the waves that came (docs/demo.md, "Interrupting a run").
#
# Settings (environment): CANOPY_BUILD_DIR (default build/, built already);
# LOAD_SOAK_PLOT_ONLY=1 draws the figure again from OUTPUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
out=/tmp/canopy-load-soak-$(date +%Y%m%d-%H%M%S)
minutes=10
tree='b:16^2'
stress=$(nproc)
usage="usage: bench/load_soak.sh [OUTPUT_DIR] [--minutes M] [--tree SPEC] [--stress N] [--quick]"
while [ $# -gt 0 ]; do
  case $1 in
    --quick) minutes=1; tree='b:8^2' ;;
    --minutes) minutes=${2:?--minutes needs a value}; shift ;;
    --tree) tree=${2:?--tree needs a value}; shift ;;
    --stress) stress=${2:?--stress needs a value}; shift ;;
    -h|--help) sed -n 2,26p "$0"; exit 0 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) out=$1 ;;
  esac
  shift
done
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || { echo "bench/load_soak.sh: --minutes takes a positive integer" >&2; exit 2; }
[[ "$stress" =~ ^[0-9]+$ ]] || { echo "bench/load_soak.sh: --stress takes a number of workers (0: none)" >&2; exit 2; }
build=${CANOPY_BUILD_DIR:-build}
canopy="$build/bin/canopy"
[ -x "$canopy" ] || { echo "bench/load_soak.sh: no $canopy: build first (scripts/build.sh)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "bench/load_soak.sh: gnuplot is not installed (scripts/setup.sh)" >&2; exit 1; }
if [ "$stress" -gt 0 ] && ! command -v stress-ng >/dev/null; then
  echo "bench/load_soak.sh: stress-ng is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ "${LOAD_SOAK_PLOT_ONLY:-0}" = 1 ]; then
  [ -s "$out/rss.csv" ] && [ -s "$out/summary.txt" ] ||
    { echo "bench/load_soak.sh: LOAD_SOAK_PLOT_ONLY=1 needs $out/rss.csv and summary.txt" >&2; exit 1; }
fi
load=""
cleanup() {
  end_group
  [ -z "$load" ] || kill_session "$load"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "${LOAD_SOAK_PLOT_ONLY:-0}" != 1 ]; then
if [ "$stress" -gt 0 ]; then
  setsid stress-ng --cpu "$stress" --quiet > /dev/null 2>&1 &
  load=$!
fi

setsid "$canopy" run --tree "$tree" --waves 100000000 --interval 0 --format jsonl \
  > "$out/run.jsonl" 2> "$out/run.log" &
group=$!
start=$(now_ms)
echo "seconds,frontend_mib,commnode_max_mib,backend_max_mib,tree_mib,waves" > "$out/rss.csv"
end=$((start + minutes * 60000))
while kill -0 "$group" 2>/dev/null && [ "$(now_ms)" -lt "$end" ]; do
  t=$(awk -v a="$start" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  waves=$(grep -c '"wave"' "$out/run.jsonl" || true)
  ps -e -o sid=,rss=,comm= | awk -v s="$group" -v t="$t" -v w="$waves" '
    $1 == s { mib = $2 / 1024; tree += mib
              if ($3 == "canopy") fe = mib
              else if ($3 == "canopy-commnode") { if (mib > cn) cn = mib }
              else if (mib > be) be = mib }
    END { printf "%s,%.1f,%.1f,%.1f,%.1f,%d\n", t, fe, cn, be, tree, w }' >> "$out/rss.csv"
  sleep 5
done
status=0
if kill -0 "$group" 2>/dev/null; then
  kill -INT "$group"
  for _ in $(seq 1 600); do kill -0 "$group" 2>/dev/null || break; sleep 0.1; done
fi
wait "$group" || status=$?
sleep 1
left=$(session_pids "$group" | grep -c . || true)
end_group
[ -z "$load" ] || kill_session "$load"
load=""

summary=$(grep '"summary"' "$out/run.jsonl" | tail -n 1 || true)
check=$(sed -n 's/.*"check":"\([a-z]*\)".*/\1/p' <<<"$summary")
waves=$(sed -n 's/.*"summary":{"waves":\([0-9]*\).*/\1/p' <<<"$summary")
incomplete=$(sed -n 's/.*"incomplete_waves":\[\([0-9,]*\)\].*/\1/p' <<<"$summary" | tr ',' '\n' | grep -c . || true)
missing=$(sed -n 's/.*"missing_waves":\[\([0-9,]*\)\].*/\1/p' <<<"$summary" | tr ',' '\n' | grep -c . || true)
failures=$(grep -c '"event":"failure"' "$out/run.jsonl" || true)
bounded=$(awk -F, 'NR > 1 { t[NR] = $1; fe[NR] = $2; cn[NR] = $3; be[NR] = $4; n = NR }
  END {
    if (n < 4) { print "too short to tell"; exit }
    last = t[n]; ok = 1; line = ""
    split("frontend commnode back-end", names, " ")
    for (r = 1; r <= 3; r++) { m2[r] = 0; m3[r] = 0 }
    for (i = 2; i <= n; i++) {
      third = (t[i] < last / 3) ? 1 : (t[i] < 2 * last / 3) ? 2 : 3
      v[1] = fe[i]; v[2] = cn[i]; v[3] = be[i]
      for (r = 1; r <= 3; r++) {
        if (third == 2 && v[r] > m2[r]) m2[r] = v[r]
        if (third == 3 && v[r] > m3[r]) m3[r] = v[r]
      }
    }
    for (r = 1; r <= 3; r++) {
      line = line sprintf(" %s %.0f -> %.0f MiB;", names[r], m2[r], m3[r])
      if (m3[r] > 1.5 * m2[r] + 1) ok = 0
    }
    print (ok ? "yes" : "NO") ":" line
  }' "$out/rss.csv")
passed=no
if [ "$status" = 130 ] && [ "$check" = ok ] && [ "$failures" = 0 ] && [ "$missing" = 0 ] && [ "$left" = 0 ] &&
   [[ "$bounded" == yes* ]]; then
  passed=yes
fi
{
  echo "$tree, --interval 0, ${minutes} min, stress-ng --cpu $stress beside it ($(nproc) cores); build $build"
  echo "waves received and checked: ${waves:-?}; check: ${check:-none}; incomplete: $incomplete; never came: $missing"
  echo "failure events (healthy processes declared lost): $failures"
  echo "memory bounded (largest RSS, second third -> last third):$bounded"
  echo "exit status $status (130: ended by SIGINT, as meant); processes left: $left"
  echo "passed: $passed"
} > "$out/summary.txt"
fi
cat "$out/summary.txt"
failures=$(sed -n 's/^failure events (healthy processes declared lost): //p' "$out/summary.txt")
check=$(sed -n 's/.*; check: \([a-z]*\);.*/\1/p' "$out/summary.txt")
waves=$(sed -n 's/^waves received and checked: \([0-9]*\);.*/\1/p' "$out/summary.txt")
passed=$(sed -n 's/^passed: //p' "$out/summary.txt")

gnuplot <<PLOT
set terminal pngcairo size 1100,560 font "sans,11"
set output "$out/rss.png"
set datafile separator ","
set title "Load soak: $tree at --interval 0 beside stress-ng --cpu $stress, ${minutes} min, no fault injected\n$failures failure events, check ${check:-none}, ${waves:-?} waves; the whole tree at the end: $(tail -n 1 "$out/rss.csv" | cut -d, -f5) MiB" noenhanced
set xlabel "seconds"
set ylabel "resident memory (MiB)"
set y2label "waves received"
set ytics nomirror
set y2tics
set yrange [0:*]
set y2range [0:*]
set key outside right top
set grid ytics
plot "$out/rss.csv" using 1:2 skip 1 with lines lw 2 lc rgb "#2c3e50" title "front-end", \
     "" using 1:3 skip 1 with lines lw 2 lc rgb "#2980b9" title "largest commnode", \
     "" using 1:4 skip 1 with lines lw 2 lc rgb "#27ae60" title "largest back-end", \
     "" using 1:6 skip 1 axes x1y2 with lines lw 1 lc rgb "#c0392b" title "waves received (right)"
PLOT
echo "figure: $out/rss.png" >&2
[ "$passed" = yes ]
