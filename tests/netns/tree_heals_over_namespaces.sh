#!/usr/bin/env bash
# The tree of tree_over_namespaces.sh heals across hosts: while back-ends stream
# integers through incremental_union, commnode 1000001 (host B) is killed; its
# back-ends on host B must be re-adopted by a node on host A over striped links, and
# the union at the front-end must hold every integer every back-end sent.
#
# Usage: tree_heals_over_namespaces.sh BIN_DIR
set -euo pipefail
bin="${1:?usage: tree_heals_over_namespaces.sh BIN_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"
source "$here/tree_lib.sh"

netns_setup
netns_deadline 100
work="$(mktemp -d /tmp/canopy-netns-heal.XXXXXX)"
netns_on_exit "rm -rf '$work'"

# Every link is striped.
tree_write_topology "\
  - {parent: 1000000, children: [1000001, 1000002]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2, 3]}"

mkdir "$work/record"
tree_run --workload union --rate 100 --duration 4 --record "$work/record" \
  --heartbeat 100 --suspect 300 --lost 800

# The process of commnode 1000001, found in host B by its environment.
victim=""
for _ in $(seq 100); do
  for pid in $(ip netns pids "$NETNS_B"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'CANOPY_RANK=1000001'; then victim=$pid; fi
  done
  [ -n "$victim" ] && break
  sleep 0.05
done
[ -n "$victim" ] || tree_fail "commnode 1000001 never started in $NETNS_B"
sleep 1.5
kill -KILL "$victim"

status=0
wait "$tree_run_pid" || status=$?
[ "$status" = 0 ] || tree_fail "canopy run exited with status $status"
grep -q 'check: ok (.* 0 missing, 0 extra)' "$work/out" || tree_fail "the union is not complete"
grep -q '^event: failure of 1000001' "$work/out" || tree_fail "the failure of commnode 1000001 was not reported"
for orphan in 0 1; do
  grep -q "^event: $orphan recovered under" "$work/out" || tree_fail "back-end $orphan was not re-adopted"
  grep -q "connected to potential adopter .*(striped, 2 paths)), asking for adoption" "$work/logs/backend-$orphan.log" ||
    tree_fail "back-end $orphan was not re-adopted over a striped link"
done

netns_expect_no_processes || tree_fail "processes were left in the namespaces"
echo "PASS: commnode 1000001 killed in $NETNS_B; back-ends 0 and 1 re-adopted over striped links, union complete"
