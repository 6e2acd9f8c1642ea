#!/usr/bin/env bash
# netns_striped_failover: a StripedLink between two network namespaces over two veth
# pairs ("NICs"), carrying a paced stream (5000 messages of 16 KiB at 1000/s, 5 s),
# while the sender's end of NIC 1 goes down 1 s in and up again 1.5 s later. When a
# veth goes down, TCP reports nothing: only the link's time-outs can tell, so the
# fragments caught on NIC 1 are resent on NIC 2 after a retransmission time-out,
# and NIC 1's path is declared failed after path_silence (1 s here instead of 3 s,
# so that it fails and rejoins well within the stream), then reconnects once the
# veth is up. Passes only if the receiver got every message exactly once, in order
# and intact, the sender's close() flushed, the fault really hit NIC 1's path
# (time-outs or a failure), and that path carried data again afterwards.
#
# Usage: striped_failover.sh BIN_DIR     (ctest passes the directory of canopy-stripe-peer)
set -euo pipefail
bin="${1:?usage: striped_failover.sh BIN_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
source "$here/peer_lib.sh"

[ -x "$bin/canopy-stripe-peer" ] || { echo "FAIL: $bin/canopy-stripe-peer is missing (build it first)" >&2; exit 1; }
netns_deadline 90
netns_setup
work="$(mktemp -d /tmp/canopy-netns-failover.XXXXXX)"
netns_on_exit "rm -rf '$work'"

count=5000
timers=(--keepalive 200 --path-silence 1000)
peer_serve "$work" --count "$count" "${timers[@]}"
peer_send "$work" --count "$count" --size 16384 --rate 1000 --paths-report "${timers[@]}"
sleep 1
ip -n "$NETNS_A" link set "$NETNS_A_VETH1" down
echo "NIC 1 ($NETNS_A_VETH1, $NETNS_A_NIC1) down" >&2
sleep 1.5
ip -n "$NETNS_A" link set "$NETNS_A_VETH1" up
echo "NIC 1 up" >&2
peer_wait "$work"

peer_expect_intact "$work" "$count"
timeouts="$(peer_value "$work/send.out" path0_timeouts)"
failures="$(peer_value "$work/send.out" path0_failures)"
[ "$timeouts" -gt 0 ] || [ "$failures" -gt 0 ] ||
  peer_fail "$work" "NIC 1's path saw neither a time-out nor a failure: the fault did not happen"
[ "$(peer_value "$work/send.out" link_timeouts)" -gt 0 ] || [ "$(peer_value "$work/send.out" link_failovers)" -gt 0 ] ||
  peer_fail "$work" "no fragment was resent after NIC 1 went down"
[ "$(peer_value "$work/send.out" path0_state)" = live ] || peer_fail "$work" "NIC 1's path was not live at the end"
[ "$(peer_value "$work/send.out" path0_acked_since_recovery)" -gt 0 ] ||
  peer_fail "$work" "NIC 1's path carried no data after it came back"
[ "$(peer_value "$work/send.out" path1_bytes_sent)" -gt 0 ] || peer_fail "$work" "NIC 2's path carried nothing"
netns_expect_no_processes || peer_fail "$work" "processes were left in the namespaces"
echo "PASS: $count messages intact, once, in order while NIC 1 was down for 1.5 s;" \
  "NIC 1's path: $timeouts time-outs, $failures failures, $(peer_value "$work/send.out" path0_rejoins) rejoins;" \
  "longest pause in delivery $(peer_value "$work/serve.out" max_gap_ms) ms"
