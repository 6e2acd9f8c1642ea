#!/usr/bin/env bash
# canopy stack --slurm-job on a real Slurm cluster (cluster_lib.sh; docs/launch.md,
# docs/stack.md): an MPI job of 6 ranks started with `srun --mpi=pmix` over three
# nodes (examples/mpi_hang: rank 3 computes, the others wait in MPI_Barrier), and,
# from node n1, `canopy stack --slurm-job JOB`: an overlapping step into the job lists
# its ranks on each node, the daemons are started into the job by srun, and the
# merged traces must show the two classes of the 6 ranks on the 3 hosts. The ranks
# run on untraced; the job is then cancelled and nothing is left.
#
# Usage: stack_over_slurm.sh BIN_DIR MPI_HANG
set -euo pipefail
bin="${1:?usage: stack_over_slurm.sh BIN_DIR MPI_HANG}"
hang="${2:?usage: stack_over_slurm.sh BIN_DIR MPI_HANG}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../netns/lib.sh"
source "$here/cluster_lib.sh"

slurm_cluster_up n1 n2 n3
netns_deadline 110
work="$SLURM_DIR/work"
mkdir -p "$work"

fail() {
  echo "FAIL: $*" >&2
  echo "--- job output ---" >&2; cat "$work/job.out" >&2 || true
  echo "--- canopy stack stdout ---" >&2; cat "$work/out" >&2 || true
  echo "--- canopy stack stderr ---" >&2; cat "$work/err" >&2 || true
  exit 1
}

slurm_on n1 salloc -N3 --exclusive srun --mpi=pmix --overcommit -n6 "$hang" 100 > "$work/job.out" 2>&1 &
netns_on_exit "kill $! 2>/dev/null || true"
job=""
for _ in $(seq 100); do
  job="$(slurm_on n1 squeue -h -o %i 2>/dev/null | head -1)"
  [ -n "$job" ] && break
  sleep 0.1
done
[ -n "$job" ] || fail "the MPI job did not start"
netns_on_exit "slurm_on n1 scancel $job 2>/dev/null || true"

stack() {
  slurm_on n1 env CANOPY_LOG_DIR="$work/logs" timeout 60 "$bin/canopy" stack --slurm-job "$job" \
    --address "n1=$SLURM_NODE_N1" --address "n2=$SLURM_NODE_N2" --address "n3=$SLURM_NODE_N3" "$@" \
    >"$work/out" 2>"$work/err"
}
# Until every rank is past MPI_Init and the traces are those of the hang.
for _ in $(seq 60); do
  status=0
  stack || status=$?
  [ "$status" = 0 ] && grep -q "^2 classes of 6 ranks:$" "$work/out" && break
  sleep 0.5
done
[ "$status" = 0 ] || fail "canopy stack exited with status $status"

grep -q "^Stack traces of 6 ranks on 3 hosts (Slurm job $job, 1 sample)" "$work/out" || fail "not 6 ranks on 3 hosts"
grep -q "^  5 ranks \[0-2,4-5\]: MPI_Barrier ← main$" "$work/out" || fail "no class of ranks 0-2,4-5 in MPI_Barrier"
grep -q "^  1 rank \[3\]: .*← compute ← solve ← main$" "$work/out" || fail "no class of rank 3 in compute"
grep -q "^2 classes of 6 ranks:$" "$work/out" || fail "not exactly two classes"

# The ranks run on, untraced, two in each node.
for node in N1 N2 N3; do
  ns_var="NETNS_$node"
  ranks=0
  for pid in $(ip netns pids "${!ns_var}"); do
    [ "$(cat /proc/$pid/comm 2>/dev/null)" = mpi_hang ] || continue
    ranks=$((ranks + 1))
    tracer=$(awk '/^TracerPid/ {print $2}' /proc/$pid/status)
    [ "$tracer" = 0 ] || fail "rank process $pid in $node is still traced by $tracer"
  done
  [ "$ranks" = 2 ] || fail "$ranks rank processes in $node, expected 2"
done
# No daemon or commnode is left once canopy stack is done.
for ns in $NETNS_ALL; do
  for pid in $(ip netns pids "$ns"); do
    case "$(cat /proc/$pid/comm 2>/dev/null)" in canopy*) fail "$(cat /proc/$pid/comm) $pid left in $ns" ;; esac
  done
done
echo "PASS: canopy stack --slurm-job $job: 6 ranks on 3 Slurm nodes, two classes, ranks untraced"
