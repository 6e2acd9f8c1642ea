#!/usr/bin/env bash
# A Canopy tree started by `canopy run --launch mpirun` (docs/launch.md) over three
# "hosts" n1 n2 n3, each a network namespace of tests/netns/lib.sh, with no Slurm:
# Open MPI's mpirun reaches the other hosts through its rsh agent (ssh on a cluster;
# here a script entering the host's namespace, with its hostname). The tree is the
# b:3^2 of tree_over_slurm.sh: the commnodes of n2 and n3 by one mpirun (level 1),
# back-end 5, on n1 under n3's commnode, by another (level 2).
#   union    the union workload checks out; exactly two mpiruns ran; nothing is left
#   heal     the union running 4 s, the commnode of n2 SIGKILLed 1 s into it: its
#            back-ends are adopted, the failure is reported, the union still checks
#            out, and n3's commnode (same mpirun) was not taken down with it
#   striped  each host with two NICs, so that every link between hosts is striped:
#            the commnodes of n2 and n3 (mpirun's tasks) connect over two striped
#            paths, as does back-end 5; the union checks out
#   badhost  the topology names a host mpirun cannot reach: a clear error naming the
#            mpirun of level 1, nothing left
#
# Usage: tree_over_mpirun.sh BIN_DIR union|heal|striped|badhost   (ctest passes the build's bin directory)
set -euo pipefail
bin="${1:?usage: tree_over_mpirun.sh BIN_DIR union|heal|striped|badhost}"
mode="${2:?usage: tree_over_mpirun.sh BIN_DIR union|heal|striped|badhost}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../netns/lib.sh"

for tool in mpirun nsenter unshare; do
  command -v "$tool" >/dev/null || netns_skip "$tool is not installed (scripts/setup.sh installs Open MPI)"
done
nics=1
[ "$mode" = striped ] && nics=2
NETNS_NICS=$nics netns_setup n1 n2 n3
netns_deadline 100
work="$(mktemp -d /tmp/canopy-mpirun-XXXXXX)"
[ -n "${KEEP:-}" ] || netns_on_exit "rm -rf $work"

# mpirun's rsh agent: AGENT HOST COMMAND... runs COMMAND (a shell command line, as
# ssh would) in HOST's namespace, with HOST as its hostname.
cat > "$work/agent" <<A
#!/bin/sh
host=\$1; shift
case "\$host" in
  n1) ns=$NETNS_N1 ;; n2) ns=$NETNS_N2 ;; n3) ns=$NETNS_N3 ;;
  *) echo "agent: \$host: no such host" >&2; exit 255 ;;
esac
exec nsenter --net=/run/netns/\$ns unshare --uts sh -c 'hostname "\$0"; exec sh -c "\$*"' "\$host" "\$@"
A
# mpirun as canopy finds it on PATH: counts its runs, then the real one.
mkdir -p "$work/path"
cat > "$work/path/mpirun" <<M
#!/bin/sh
echo run >> "$work/mpiruns"
exec $(command -v mpirun) "\$@"
M
chmod +x "$work/agent" "$work/path/mpirun"

hosts="n1 n2 n3"
[ "$mode" = badhost ] && hosts="n1 n2 n4"
set -- $hosts
cat > "$work/tree.yaml" <<T
hosts:
  - {name: $1, nics: [$NETNS_N1_NICS]}
  - {name: $2, nics: [$NETNS_N2_NICS]}
  - {name: $3, nics: [$NETNS_N3_NICS]}
nodes:
  - {rank: 1000000, role: frontend, host: $1}
  - {rank: 1000001, role: commnode, host: $1}
  - {rank: 1000002, role: commnode, host: $2}
  - {rank: 1000003, role: commnode, host: $3}
  - {rank: 0, role: backend, host: $1}
  - {rank: 1, role: backend, host: $1}
  - {rank: 2, role: backend, host: $2}
  - {rank: 3, role: backend, host: $2}
  - {rank: 4, role: backend, host: $3}
  - {rank: 5, role: backend, host: $1}
edges:
  - {parent: 1000000, children: [1000001, 1000002, 1000003]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2, 3]}
  - {parent: 1000003, children: [4, 5]}
T

how=(--launch mpirun)
duration=2
case "$mode" in
  union | striped) ;;
  heal) how+=(--heartbeat 100 --suspect 300 --lost 800); duration=4 ;;
  badhost) how+=(--startup-timeout 5000) ;;
  *) netns_fail "unknown mode $mode" ;;
esac
if [ "$mode" = heal ]; then
  # The kill waits for the workload: a back-end of n2 has recorded a value (a
  # fixed delay after launch killed the commnode during start-up on a loaded machine).
  (
    until [ -s "$work/record/be-2.txt" ]; do sleep 0.1; done
    sleep 1
    for pid in $(ip netns pids "$NETNS_N2"); do
      case "$(cat "/proc/$pid/comm" 2>/dev/null)" in canopy-commnod*) kill -KILL "$pid" && echo "$pid" > "$work/killed" ;; esac
    done
  ) &
  netns_on_exit "kill $! 2>/dev/null || true"
fi
status=0
mkdir -p "$work/logs"
CANOPY_LOG_DIR="$work/logs" PATH="$work/path:$PATH" OMPI_MCA_plm_rsh_agent="$work/agent" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  nsenter --net="/run/netns/$NETNS_N1" unshare --uts sh -c 'hostname n1; exec "$@"' n1 \
  "$bin/canopy" run --topology "$work/tree.yaml" "${how[@]}" \
  --workload union --duration "$duration" --record "$work/record" > "$work/out" 2> "$work/err" || status=$?
if [ "$mode" = badhost ]; then
  [ "$status" = 1 ] || netns_fail "canopy run with an unreachable host exited with $status: $(cat "$work/err")"
  grep -q "the mpirun of level 1 exited with status [0-9]* before the tree was up" "$work/err" ||
    netns_fail "the error does not name the failed mpirun: $(cat "$work/err")"
  grep -qF "can mpirun reach every host of the topology?" "$work/err" ||
    netns_fail "the error does not say what to check: $(cat "$work/err")"
else
  [ "$status" = 0 ] || netns_fail "canopy run --launch mpirun exited with $status: $(cat "$work/err")"
  grep -q "check: ok" "$work/out" || netns_fail "the union did not check out: $(tail -3 "$work/out")"
  runs=$(wc -l < "$work/mpiruns")
  [ "$runs" = 2 ] || netns_fail "$runs mpiruns ran, expected 2 (one per level)"
fi
if [ "$mode" = heal ]; then
  [ -s "$work/killed" ] || netns_fail "no commnode was found in n2 to kill"
  grep -q "event: failure of 1000002" "$work/out" || netns_fail "the commnode's loss was not reported: $(cat "$work/out")"
  if grep -q "event: failure of 1000003" "$work/out"; then
    netns_fail "n3's commnode, of the same mpirun, went down with n2's: $(cat "$work/out")"
  fi
fi
if [ "$mode" = striped ]; then
  for log in commnode-1000002 commnode-1000003 backend-5; do
    grep -q "connected to parent .* over 2 striped paths" "$work/logs/$log.log" ||
      netns_fail "$log did not connect over two striped paths: $(grep -h "parent" "$work/logs/$log.log" | head -3)"
  done
fi
for _ in $(seq 50); do
  left="$(for ns in $NETNS_ALL; do ip netns pids "$ns"; done)"
  [ -z "$left" ] && break
  sleep 0.1
done
netns_expect_no_processes || netns_fail "processes were left after the run"
echo "PASS: a tree over 3 hosts started by mpirun, $mode"
