#!/usr/bin/env bash
# A Canopy tree spread over two network namespaces ("hosts") joined by two veth
# pairs ("NICs"), started with the launcher template `ip netns exec {host} {command}`.
# Links between the hosts are striped over both NICs. While the demo waves run,
# NIC 1 of host A goes down and, 4 s later (longer than a striped path's 3 s
# path_silence, so its paths are declared failed), up again: every wave must still
# be right, NIC 1's paths must rejoin, and no process may be reported lost, since
# only a NIC failed.
#
# Usage: tree_over_namespaces.sh BIN_DIR     (ctest passes the build's bin directory)
set -euo pipefail
bin="${1:?usage: tree_over_namespaces.sh BIN_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
source "$here/tree_lib.sh"

netns_setup
netns_deadline 100
work="$(mktemp -d /tmp/canopy-netns-tree.XXXXXX)"
netns_on_exit "rm -rf '$work'"

# Every edge but 1000002 -> 2 crosses or stays on a host with two NICs, so every
# link but that one is striped.
tree_write_topology "\
  - {parent: 1000000, children: [1000001, 1000002]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2], link: plain}
  - {parent: 1000002, children: [3]}"

# 1200 waves, one every 10 ms: 12 s or more, with the NIC down from 1 s to 5 s and
# time left for its paths to reconnect (their attempts back off up to 2 s).
tree_run --waves 1200 --interval 10
sleep 1
ip -n "$NETNS_A" link set "$NETNS_A_VETH1" down
sleep 4
ip -n "$NETNS_A" link set "$NETNS_A_VETH1" up
status=0
wait "$tree_run_pid" || status=$?

[ "$status" = 0 ] || tree_fail "canopy run exited with status $status"
grep -q '1200 waves of sum over 4 back-ends' "$work/out" || tree_fail "not every wave arrived"
grep -q 'check: ok' "$work/out" || tree_fail "the sums are wrong"
if grep -q '^event:' "$work/out"; then tree_fail "a NIC failure was taken for a process failure: $(grep '^event:' "$work/out")"; fi

# The links really were striped, and NIC 1's paths really failed and came back.
grep -q "connected to parent .* over 2 striped paths" "$work/logs/commnode-1000001.log" ||
  tree_fail "commnode 1000001 did not connect over two striped paths"
grep -q "connected to parent .* over 2 striped paths" "$work/logs/backend-3.log" ||
  tree_fail "back-end 3 did not connect over two striped paths"
if grep -q "striped" "$work/logs/backend-2.log"; then tree_fail "back-end 2's edge is plain but its link was striped"; fi
grep -hq "path 0 ($NETNS_B_NIC1 -> $NETNS_A_NIC1:[0-9]*) .*-> down" "$work/logs/commnode-1000001.log" ||
  tree_fail "commnode 1000001's path over NIC 1 never went down: $(grep -h 'path 0' "$work/logs/commnode-1000001.log")"
grep -hq "path 0 ($NETNS_B_NIC1 -> $NETNS_A_NIC1:[0-9]*) .*-> live: rejoined" "$work/logs/commnode-1000001.log" ||
  tree_fail "commnode 1000001's path over NIC 1 never came back"

# Every process of the tree has exited.
netns_expect_no_processes || tree_fail "processes were left in the namespaces"
echo "PASS: 1200 waves right across two namespaces while NIC 1 went down and up; no process reported lost"
