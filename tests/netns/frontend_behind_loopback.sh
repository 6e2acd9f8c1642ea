#!/usr/bin/env bash
# A front-end whose host name resolves to a loopback address (Debian maps a host's
# own name to 127.0.1.1; here the front-end's host is `localhost`) with its
# commnode and back-ends on another host (namespace B): the children must be told an
# address of the front-end they can reach (issue 49). Before, the commnode was told
# 127.0.0.1 and, on B, connected to itself: "cannot connect to parent". Then
# `--advertise` names the address: an address of this host works, another is
# refused with the reason, before anything is launched.
#
# Usage: frontend_behind_loopback.sh BIN_DIR     (ctest passes the build's bin directory)
set -euo pipefail
bin="${1:?usage: frontend_behind_loopback.sh BIN_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"

NETNS_NICS=1 netns_setup
netns_deadline 100
work="$(mktemp -d /tmp/canopy-netns-loopback.XXXXXX)"
netns_on_exit "rm -rf '$work'"

cat >"$work/tree.yaml" <<YAML
hosts:
  - {name: $NETNS_B, address: $NETNS_B_NIC1}
nodes:
  - {rank: 1000000, role: frontend, host: localhost}
  - {rank: 1000001, role: commnode, host: $NETNS_B}
  - {rank: 0, role: backend, host: $NETNS_B}
  - {rank: 1, role: backend, host: $NETNS_B}
edges:
  - {parent: 1000000, children: [1000001]}
  - {parent: 1000001, children: [0, 1]}
YAML

# run NAME [canopy run options...]: the front-end in namespace A, its output in
# $work/NAME.out and .err, one log per process in $work/NAME-logs; its status in $status.
run() {
  local name="$1"
  shift
  mkdir -p "$work/$name-logs"
  status=0
  ip netns exec "$NETNS_A" env CANOPY_LOG_DIR="$work/$name-logs" timeout 60 \
    "$bin/canopy" run --topology "$work/tree.yaml" --launcher 'ip netns exec {host} {command}' --waves 20 \
    --startup-timeout 5000 "$@" >"$work/$name.out" 2>"$work/$name.err" || status=$?
}
fail_run() {
  local name="$1"
  shift
  echo "FAIL: $*" >&2
  echo "--- stdout ---" >&2; tail -n 8 "$work/$name.out" >&2
  echo "--- stderr ---" >&2; cat "$work/$name.err" >&2
  for log in "$work/$name-logs"/*; do [ -f "$log" ] && { echo "--- $log ---" >&2; tail -n 5 "$log" >&2; }; done
  exit 1
}

run chosen
[ "$status" = 0 ] || fail_run chosen "canopy run exited with status $status"
grep -q '20 waves of sum over 2 back-ends' "$work/chosen.out" || fail_run chosen "not every wave arrived"
grep -q 'check: ok' "$work/chosen.out" || fail_run chosen "the sums are wrong"
grep -q "resolves to 127.0.0.1 here.*it listens on $NETNS_A_NIC1, the address this host reaches $NETNS_B_NIC1 from" \
  "$work/chosen-logs/frontend-1000000.log" || fail_run chosen "the front-end did not say which address it chose and why"
grep -q "connected to parent $NETNS_A_NIC1:" "$work/chosen-logs/commnode-1000001.log" ||
  fail_run chosen "the commnode did not connect to the address chosen"

run named --advertise "$NETNS_A_NIC1"
[ "$status" = 0 ] || fail_run named "canopy run --advertise $NETNS_A_NIC1 exited with status $status"
grep -q 'check: ok' "$work/named.out" || fail_run named "the sums are wrong"
grep -q "listens on $NETNS_A_NIC1 and its children are told it (--advertise)" \
  "$work/named-logs/frontend-1000000.log" || fail_run named "the front-end did not take the address given"

run foreign --advertise 192.0.2.7
[ "$status" != 0 ] || fail_run foreign "an address of no interface here was taken"
grep -q -- "--advertise 192.0.2.7: not an address of this host (its addresses: $NETNS_A_NIC1" "$work/foreign.err" ||
  fail_run foreign "the refusal does not say why"
[ -z "$(ls -A "$work/foreign-logs" 2>/dev/null | grep -v frontend || true)" ] ||
  fail_run foreign "processes were launched before the address was refused"

netns_expect_no_processes || netns_fail "processes were left in the namespaces"
echo "PASS: a front-end on a loopback host name told its children $NETNS_A_NIC1; --advertise takes an address of this host and refuses another"
