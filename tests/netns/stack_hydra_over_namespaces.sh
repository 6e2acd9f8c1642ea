#!/usr/bin/env bash
# canopy stack on an MPICH job spread over two network namespaces as two hosts
# (docs/stack.md, "MPICH's hydra"). Debian's mpiexec.hydra has no MPIR table: the
# ranks are found through its process tree. It runs in host A, forks its proxy there
# and starts the proxy of host B through its launcher, an agent that is `ip netns
# exec` (`AGENT HOST COMMAND...` as ssh): ranks 0-1 on A, 2-3 on B. canopy stack, in
# host A, finds A's ranks below the local proxy and lists B's with `canopy-stackd
# --list-hydra` run through its own launcher template (the same agent), starts one
# daemon per host, and must report the two classes of examples/mpi_hang with every
# rank; the job runs on untraced afterwards.
#
# Usage: stack_hydra_over_namespaces.sh BIN_DIR MPI_HANG_MPICH MPIEXEC_HYDRA   (ctest passes them)
set -euo pipefail
bin="${1:?usage: stack_hydra_over_namespaces.sh BIN_DIR MPI_HANG_MPICH MPIEXEC_HYDRA}"
hang="${2:?}"
hydra="${3:?}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/lib.sh"

NETNS_NICS=1 netns_setup
netns_deadline 100
work="$(mktemp -d /tmp/canopy-netns-hydra.XXXXXX)"
netns_on_exit "rm -rf '$work'"
for ns in $NETNS_A $NETNS_B; do ip -n "$ns" link set lo up; done

fail() {
  echo "FAIL: $*" >&2
  echo "--- job output ---" >&2; cat "$work/job.out" >&2 || true
  echo "--- canopy stack stdout ---" >&2; cat "$work/out" >&2 || true
  echo "--- canopy stack stderr ---" >&2; cat "$work/err" >&2 || true
  exit 1
}

# The hosts are named by their addresses (hydra takes an address of its own as this
# host). The agent maps each to its namespace. It does not exec: its command line
# keeps the host, where canopy stack reads which host a proxy is on, as in
# `ssh -x HOST "/usr/bin/hydra_pmi_proxy" ...`.
cat >"$work/nsexec" <<AGENT
#!/bin/sh
[ "\$1" = -x ] && shift
host=\$1; shift
case \$host in
  $NETNS_A_NIC1) ns=$NETNS_A ;;
  $NETNS_B_NIC1) ns=$NETNS_B ;;
  *) echo "nsexec: no namespace for host \$host" >&2; exit 1 ;;
esac
ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$work/nsexec"

# -localhost: the address the proxies call back (hydra's host name resolves to an
# address that host B cannot reach).
ip netns exec "$NETNS_A" "$hydra" -launcher rsh -launcher-exec "$work/nsexec" -localhost "$NETNS_A_NIC1" \
  -hosts "$NETNS_A_NIC1:2,$NETNS_B_NIC1:2" -n 4 "$hang" 120 >"$work/job.out" 2>&1 &
job=$!
# Asked to end, mpiexec.hydra ends its proxies and ranks; what is left in the
# namespaces is killed by their cleanup.
netns_on_exit "kill $job 2>/dev/null; for _ in \$(seq 50); do kill -0 $job 2>/dev/null || break; sleep 0.1; done"

logs="$work/early-logs"
mkdir -p "$logs" "$work/logs"
stack() {
  ip netns exec "$NETNS_A" env CANOPY_LOG_DIR="$logs" timeout 60 "$bin/canopy" stack --mpirun "$job" \
    --launcher "$work/nsexec {host} {command}" --address "$(hostname)=$NETNS_A_NIC1" "$@" >"$work/out" 2>"$work/err"
}
# The job's pid is mpiexec.hydra's once `ip netns exec` has exec'd it.
for _ in $(seq 1 50); do
  [ "$(cat /proc/$job/comm 2>/dev/null)" = mpiexec.hydra ] && break
  sleep 0.1
done
# Until its proxies and every rank have started, canopy stack says so.
for _ in $(seq 1 100); do
  status=0
  stack || status=$?
  [ "$status" = 0 ] && break
  grep -q "not started\|no rank with PMI_RANK yet\|has not started its hydra_pmi_proxy yet" "$work/err" ||
    fail "canopy stack exited with status $status"
  kill -0 "$job" 2>/dev/null || fail "the job ended"
  sleep 0.2
done
sleep 1  # the ranks reach where they hang
logs="$work/logs"
stack || fail "canopy stack exited with status $?"

grep -q "^Stack traces of 4 ranks on 2 hosts (mpiexec.hydra $job, 1 sample):$" "$work/out" ||
  fail "not 4 ranks on 2 hosts"
grep -q "^  3 ranks \[0-2\]: MPI_Barrier ← main$" "$work/out" || fail "no class of ranks 0-2 in MPI_Barrier"
grep -q "^  1 rank \[3\]: .*← compute ← solve ← main$" "$work/out" || fail "no class of rank 3 in compute"
grep -q "^2 classes of 4 ranks:$" "$work/out" || fail "not exactly two classes"
grep -q "ranks found through hydra's proxies and PMI_RANK (no MPIR table)" "$work/err" ||
  fail "canopy stack did not say how it found the ranks"
# One daemon per host: back-end 0 on host A, back-end 1 on host B, each with a log.
ls "$work/logs" | grep -q "backend-0" || fail "no log of the daemon of host A: $(ls "$work/logs")"
ls "$work/logs" | grep -q "backend-1" || fail "no log of the daemon of host B: $(ls "$work/logs")"

# The ranks run on, untraced, in both namespaces.
for ns in $NETNS_A $NETNS_B; do
  ranks=0
  for pid in $(ip netns pids "$ns"); do
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = mpi_hang_mpich ] || continue
    ranks=$((ranks + 1))
    tracer=$(awk '/^TracerPid/ {print $2}' /proc/$pid/status)
    state=$(awk '/^State/ {print $2}' /proc/$pid/status)
    [ "$tracer" = 0 ] || fail "rank process $pid in $ns is still traced by $tracer"
    case $state in R|S) ;; *) fail "rank process $pid in $ns is in state $state" ;; esac
  done
  [ "$ranks" = 2 ] || fail "$ranks rank processes in $ns, expected 2"
done
echo "PASS: canopy stack on an MPICH job over two namespaces: two classes, ranks untraced"
