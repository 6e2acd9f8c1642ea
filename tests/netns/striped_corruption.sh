#!/usr/bin/env bash
# netns_striped_corruption: a StripedLink between two network namespaces over two
# veth pairs ("NICs"), with fault injection on both ends: 2 % of the sender's data
# fragments and 5 % of the receiver's (its progress reports) get one bit flipped after
# their CRC-32C was computed, as corruption on a bus or in a NIC would. Passes only if
# every message arrives exactly once, in order and intact, the corruption really
# happened and was caught on both sides, and both NICs carried data.
#
# Usage: striped_corruption.sh BIN_DIR     (ctest passes the directory of canopy-stripe-peer)
set -euo pipefail
bin="${1:?usage: striped_corruption.sh BIN_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
source "$here/peer_lib.sh"

[ -x "$bin/canopy-stripe-peer" ] || { echo "FAIL: $bin/canopy-stripe-peer is missing (build it first)" >&2; exit 1; }
netns_deadline 90
netns_setup
work="$(mktemp -d /tmp/canopy-netns-corruption.XXXXXX)"
netns_on_exit "rm -rf '$work'"

count=2000
peer_serve "$work" --count "$count" --corrupt 0.05
peer_send "$work" --count "$count" --size 65536 --corrupt 0.02
peer_wait "$work"

peer_expect_intact "$work" "$count"
# Sender to receiver: the data fragments.
injected=$(($(peer_value "$work/send.out" path0_corruptions_injected) + $(peer_value "$work/send.out" path1_corruptions_injected)))
caught="$(peer_value "$work/serve.out" link_checksum_failures)"
[ "$injected" -gt 0 ] || peer_fail "$work" "the sender injected no corruption"
[ "${caught:-0}" -gt 0 ] || peer_fail "$work" "the receiver's link caught no corrupt fragment"
[ "$(peer_value "$work/send.out" link_nacks_received)" -gt 0 ] || peer_fail "$work" "no corrupt fragment was asked for again"
# Receiver to sender: its progress reports (and acknowledgements), corrupted too.
back_injected="$(peer_value "$work/serve.out" link_corruptions_injected)"
back_caught="$(peer_value "$work/send.out" link_checksum_failures)"
[ "${back_injected:-0}" -gt 0 ] || peer_fail "$work" "the receiver injected no corruption"
[ "${back_caught:-0}" -gt 0 ] || peer_fail "$work" "the sender's link caught no corrupt frame from the receiver"
[ "$(peer_value "$work/send.out" path0_bytes_sent)" -gt 0 ] || peer_fail "$work" "NIC 1's path carried nothing"
[ "$(peer_value "$work/send.out" path1_bytes_sent)" -gt 0 ] || peer_fail "$work" "NIC 2's path carried nothing"
netns_expect_no_processes || peer_fail "$work" "processes were left in the namespaces"
echo "PASS: $count messages of 64 KiB intact, once, in order over two NICs;" \
  "$injected corrupt fragments injected by the sender, $caught caught by the receiver's link;" \
  "$back_injected injected by the receiver, $back_caught caught by the sender's link"
