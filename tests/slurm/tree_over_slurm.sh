#!/usr/bin/env bash
# A Canopy tree on a real Slurm cluster (cluster_lib.sh: slurmctld and three slurmds,
# each node a network namespace): inside `salloc -N3`, `canopy run` starts the
# commnodes on the other nodes with the launcher template
# `srun --overlap -N1 -n1 -w {host} {command}`, one step per remote commnode, which
# start their back-ends locally. The union workload must check out, each remote node
# must have run exactly one step, and nothing may be left in any node.
#
# Usage: tree_over_slurm.sh BIN_DIR     (ctest passes the build's bin directory)
set -euo pipefail
bin="${1:?usage: tree_over_slurm.sh BIN_DIR}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../netns/lib.sh"
source "$here/cluster_lib.sh"

slurm_cluster_up n1 n2 n3
netns_deadline 100
work="$SLURM_DIR/work"
mkdir -p "$work"
cat > "$work/tree.yaml" <<T
hosts:
  - {name: n1, nics: [$SLURM_NODE_N1]}
  - {name: n2, nics: [$SLURM_NODE_N2]}
  - {name: n3, nics: [$SLURM_NODE_N3]}
nodes:
  - {rank: 1000000, role: frontend, host: n1}
  - {rank: 1000001, role: commnode, host: n1}
  - {rank: 1000002, role: commnode, host: n2}
  - {rank: 1000003, role: commnode, host: n3}
  - {rank: 0, role: backend, host: n1}
  - {rank: 1, role: backend, host: n1}
  - {rank: 2, role: backend, host: n2}
  - {rank: 3, role: backend, host: n2}
  - {rank: 4, role: backend, host: n3}
  - {rank: 5, role: backend, host: n3}
edges:
  - {parent: 1000000, children: [1000001, 1000002, 1000003]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2, 3]}
  - {parent: 1000003, children: [4, 5]}
T

status=0
slurm_on n1 salloc -N3 --exclusive "$bin/canopy" run --topology "$work/tree.yaml" \
  --launcher 'srun --overlap -N1 -n1 -w {host} {command}' --workload union --duration 2 --record "$work/record" \
  > "$work/out" 2> "$work/err" || status=$?
[ "$status" = 0 ] || netns_fail "canopy run under salloc exited with $status: $(cat "$work/err")"
grep -q "check: ok" "$work/out" || netns_fail "the union did not check out: $(tail -3 "$work/out")"
for node in n2 n3; do
  steps=$(grep -c "launch task" "$SLURM_DIR/slurmd-$node.log" || true)
  [ "$steps" = 1 ] || netns_fail "node $node ran $steps steps, expected 1 (its commnode): $(cat "$SLURM_DIR/slurmd-$node.log")"
done
# The steps end with the run; slurmstepd may take a moment after the allocation ends.
for _ in $(seq 50); do
  netns_expect_no_processes 2>/dev/null && break
  sleep 0.1
done
# slurmd itself runs in each node until the teardown: only it may be left.
for ns in $NETNS_ALL; do
  for pid in $(ip netns pids "$ns"); do
    comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
    case "$comm" in
      slurmd|slurmctld|slurmscriptd|sh) ;;
      *) netns_fail "process $pid ($comm) left in $ns after the run" ;;
    esac
  done
done
echo "PASS: a tree over 3 Slurm nodes, remote commnodes started by srun, union checked"
