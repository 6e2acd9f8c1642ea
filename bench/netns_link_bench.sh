#!/usr/bin/env bash
# Striped links over two NICs of their own: two network namespaces joined by two veth
# pairs, each limited on the sending side by tc (tbf) to RATE, so that each "NIC" has
# a bandwidth of its own, unlike two addresses on loopback (docs/striping.md,
# "Benchmarks over two NICs"). Runs canopy-stripe-peer between the namespaces:
#
#   bandwidth  1 MiB messages one way as fast as flow control allows, received
#              intact: plain TcpLink over NIC 1, StripedLink over NIC 1 only, and
#              StripedLink over both; MB/s at the receiver, median of the runs, and
#              its ratio to plain TcpLink's (one NIC)
#   failover   a paced stream (16 KiB messages, 1000/s) over both NICs while NIC 1 of
#              the sender goes down 1 s in, for 1.5 s: the longest pause between two
#              deliveries at the receiver (max_gap_ms) and the time from the link going
#              down to the first time-out on its path, when its fragments go out on
#              the other (detect_ms, from the sender's path events); with the default
#              timers, with shorter ones, without any fault, and a plain TcpLink over
#              NIC 1 alone for comparison
#
# Each measurement runs `--runs` times, variants interleaved so that drift in the
# machine's load spreads over all of them; medians. A run that loses, duplicates,
# reorders or damages a message stops the benchmark. Never run by ctest.
#
# Usage: bench/netns_link_bench.sh [OUTPUT_DIR] [--quick] [--runs N] [--rate MBIT]
#   OUTPUT_DIR  default bench-results; gets netns_bandwidth.csv, netns_failover.csv,
#               netns_link.log (every run) and netns_link.png
#   --quick     3 runs, 32 MiB per bandwidth run, a 3 s stream (default 5, 256 MiB, 6 s)
#   --rate      each NIC's rate in Mbit/s (default 300; 0: no limit, the CPU's speed)
# Needs root (network namespaces); CANOPY_BUILD_DIR selects the build (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench-results
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then
  out="$1"
  shift
fi
runs=5 megabytes=256 stream_seconds=6 rate=300
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) runs=3 megabytes=32 stream_seconds=3 ;;
    --runs) runs="${2:?--runs needs a value}"; shift ;;
    --rate) rate="${2:?--rate needs a value}"; shift ;;
    *) echo "netns_link_bench.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
build="${CANOPY_BUILD_DIR:-build}"
bin="$(cd "$build" && pwd)/bin"
[ -x "$bin/canopy-stripe-peer" ] || { echo "netns_link_bench.sh: no $bin/canopy-stripe-peer (build it first)" >&2; exit 1; }
command -v gnuplot >/dev/null || ./scripts/setup.sh
mkdir -p "$out"
out="$(cd "$out" && pwd)"
log="$out/netns_link.log"
: >"$log"

source tests/netns/lib.sh
source tests/netns/peer_lib.sh
netns_setup
work="$(mktemp -d /tmp/canopy-netns-bench.XXXXXX)"
netns_on_exit "rm -rf '$work'"
if [ "$rate" != 0 ]; then
  for k in 1 2; do
    veth="NETNS_A_VETH$k"
    tc -n "$NETNS_A" qdisc add dev "${!veth}" root tbf rate "${rate}mbit" burst 256kb latency 20ms
  done
fi
echo "namespaces $NETNS_A ($NETNS_A_NICS) and $NETNS_B ($NETNS_B_NICS); each NIC ${rate/#0/unlimited} Mbit/s from A to B" | tee -a "$log" >&2

# measure NAME LOCAL REMOTE SEND_OPTIONS... -- SERVE_OPTIONS...: one run; the
# receiver's line and the sender's statistics are left in $work.
measure() {
  local name="$1"
  peer_local="$2" peer_remote="$3" peer_listen="$3"
  shift 3
  local send=() serve=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do send+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  serve=("$@")
  peer_port=$((peer_port + 1))
  peer_serve "$work" "${serve[@]}"
  peer_send "$work" "${send[@]}"
}

source bench/lib.sh  # median

# --- bandwidth --------------------------------------------------------------------
declare -A mbps
bandwidth_variants=(tcp-nic1 striped-nic1 striped-2nics)
for ((run = 1; run <= runs; run++)); do
  for v in "${bandwidth_variants[@]}"; do
    case "$v" in
      tcp-nic1) measure "$v" "$NETNS_A_NIC1" "$NETNS_B_NIC1" --plain --count "$megabytes" --size 1048576 -- --plain --count "$megabytes" ;;
      striped-nic1) measure "$v" "$NETNS_A_NIC1" "$NETNS_B_NIC1" --count "$megabytes" --size 1048576 -- --count "$megabytes" ;;
      striped-2nics) measure "$v" "$NETNS_A_NICS" "$NETNS_B_NICS" --count "$megabytes" --size 1048576 -- --count "$megabytes" ;;
    esac
    peer_wait "$work"
    peer_expect_intact "$work" "$megabytes"
    m="$(peer_value "$work/serve.out" MBps)"
    mbps[$v]+="$m "
    echo "bandwidth run $run/$runs $v: $m MB/s ($(tr '\n' ' ' <"$work/serve.out"))" | tee -a "$log" >&2
  done
done
one_nic="$(echo ${mbps[tcp-nic1]} | tr ' ' '\n' | median)"
{
  echo "variant,runs,MBps_median,ratio_vs_one_nic"
  for v in "${bandwidth_variants[@]}"; do
    m="$(echo ${mbps[$v]} | tr ' ' '\n' | median)"
    awk -v v="$v" -v r="$runs" -v m="$m" -v one="$one_nic" 'BEGIN { printf "%s,%d,%.1f,%.2f\n", v, r, m, m / one }'
  done
} >"$out/netns_bandwidth.csv"

# --- fail-over --------------------------------------------------------------------
count=$((stream_seconds * 1000))
declare -A gap detect
failover_variants=(striped-default striped-short-timers striped-no-fault tcp-nic1)
short_timers=(--retransmit 50 --keepalive 200 --path-silence 1000)
for ((run = 1; run <= runs; run++)); do
  for v in "${failover_variants[@]}"; do
    stream=(--count "$count" --size 16384 --rate 1000 --paths-report)
    case "$v" in
      striped-default) measure "$v" "$NETNS_A_NICS" "$NETNS_B_NICS" "${stream[@]}" -- --count "$count" ;;
      striped-short-timers)
        measure "$v" "$NETNS_A_NICS" "$NETNS_B_NICS" "${stream[@]}" "${short_timers[@]}" -- --count "$count" "${short_timers[@]}" ;;
      striped-no-fault) measure "$v" "$NETNS_A_NICS" "$NETNS_B_NICS" "${stream[@]}" -- --count "$count" ;;
      tcp-nic1) measure "$v" "$NETNS_A_NIC1" "$NETNS_B_NIC1" "${stream[@]}" --plain -- --count "$count" --plain ;;
    esac
    down_at=""
    if [ "$v" != striped-no-fault ]; then
      sleep 1
      down_at="$(date +%s.%N)"
      ip -n "$NETNS_A" link set "$NETNS_A_VETH1" down
      sleep 1.5
      ip -n "$NETNS_A" link set "$NETNS_A_VETH1" up
    fi
    peer_wait "$work"
    peer_expect_intact "$work" "$count"
    g="$(peer_value "$work/serve.out" max_gap_ms)"
    gap[$v]+="$g "
    d=""
    if [ -n "$down_at" ]; then
      # The first time NIC 1's path left `live` after the link went down.
      d="$(awk -v t="$down_at" '/^path_event path=0 state=(suspect|down) / {
             split($4, a, "="); if (a[2] >= t) { printf "%.0f", (a[2] - t) * 1000; exit } }' "$work/send.out")"
      [ -n "$d" ] && detect[$v]+="$d "
    fi
    echo "failover run $run/$runs $v: max_gap_ms=$g detect_ms=${d:--} ($(grep -E '^(link_timeouts|link_failovers|path0_failures|path0_rejoins)=' "$work/send.out" | tr '\n' ' '))" | tee -a "$log" >&2
  done
done
{
  echo "variant,runs,max_gap_ms_median,max_gap_ms_min,max_gap_ms_max,detect_ms_median"
  for v in "${failover_variants[@]}"; do
    values="$(echo ${gap[$v]} | tr ' ' '\n')"
    printf '%s,%d,%s,%s,%s,%s\n' "$v" "$runs" "$(echo "$values" | median)" "$(echo "$values" | sort -g | head -n 1)" \
      "$(echo "$values" | sort -g | tail -n 1)" "$(echo ${detect[$v]:-} | tr ' ' '\n' | grep . | median || true)"
  done
} >"$out/netns_failover.csv"

# --- figure -----------------------------------------------------------------------
awk -F, 'NR > 1 { print $1, $3 }' "$out/netns_bandwidth.csv" >"$work/bandwidth.dat"
awk -F, 'NR > 1 { print $1, $3, ($6 == "" ? "NaN" : $6) }' "$out/netns_failover.csv" >"$work/failover.dat"
gnuplot <<GP
set terminal pngcairo size 1200,520
set output "$out/netns_link.png"
set multiplot layout 1,2 title "StripedLink over two veth NICs of ${rate/#0/unlimited} Mbit/s each (medians of $runs runs)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set xtics scale 0 font ",9" rotate by -20
set key top left
set yrange [0:*]
set title "bandwidth, 1 MiB messages"
set ylabel "MB/s at the receiver"
plot "$work/bandwidth.dat" using 2:xtic(1) notitle lc rgb "#4477aa", \
     $one_nic * 1.8 with lines dt 2 lc rgb "black" title "target: 1.8 x one NIC"
set title "NIC 1 down for 1.5 s under a 16 MB/s stream (no-fault: never)"
set ylabel "ms (log scale)"
set logscale y
set yrange [1:10000]
plot "$work/failover.dat" using 2:xtic(1) title "longest pause in delivery" lc rgb "#cc6677", \
     "" using 3 title "link down to first time-out" lc rgb "#ddcc77"
unset multiplot
GP
cat "$out/netns_bandwidth.csv"
echo
cat "$out/netns_failover.csv"
echo "wrote $out/netns_bandwidth.csv, $out/netns_failover.csv, $out/netns_link.png and $out/netns_link.log" >&2
