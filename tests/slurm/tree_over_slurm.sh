#!/usr/bin/env bash
# A Canopy tree on a real Slurm cluster (cluster_lib.sh: slurmctld and three slurmds,
# each node a network namespace), inside `salloc -N3`, started in one of two ways:
#   spawn  `canopy run --launcher 'srun --overlap -N1 -n1 -w {host} {command}'`: one
#          step per process not on its parent's host (the commnodes of n2 and n3, and
#          back-end 5, on n1 under n3's commnode): three steps;
#   slurm  `canopy run --launch slurm`: one step per level of the tree for those
#          processes, the two commnodes in one, back-end 5 in another (docs/launch.md).
# Either way each node runs one task.
# The union workload must check out (and the demo's waves, for slurm and tree), and
# nothing may be left in any node.
#   heal   `--launch slurm` with the union running 4 s, and the commnode of n2 (started
#          by the level's step) SIGKILLed after 1.5 s: its back-ends are adopted, the
#          union still checks out, the failure is reported.
#   slurmd  `--launch slurm` with the union running 4 s, and the slurmd of n2 stopped
#          (SIGTERM, as an administrator stops it) after 1.5 s: the step's tasks run on
#          under their slurmstepd, the union checks out, no failure is reported, and
#          nothing is left.
#   cancel  `--launch slurm` with the union running 4 s, and the allocation cancelled
#          (scancel) after 1.5 s: Slurm ends the steps' processes, and canopy run
#          stops with an error naming the allocation (it ran on for 30 s and
#          exited 0 before), leaving nothing. canopy run's first two squeue calls
#          fail, as on a busy controller (it ran on and exited 0 too, once in CI).
#   tree    `--launch slurm --tree b:3^2` with no topology file: the tree is spread
#          over the allocation's nodes by itself (a commnode and its back-ends on
#          each of n1, n2, n3), one step of two tasks starts the remote commnodes.
#   badnode  `--launch slurm` in an allocation of n1 and n2 only, the topology naming
#          n3: the launch fails with the step's error and the allocation's nodes, and
#          nothing is left.
#   outside  as tree, but `salloc` and `canopy run` on the controller's host, outside
#          the allocation's nodes, as a user on a login node, whose host name there
#          resolves to a loopback address (`localhost`): every commnode is remote, in
#          one step of three tasks, and must be told an address of the front-end it
#          can reach (issue 49: each failed with "cannot connect to parent").
#   sbatch  examples/slurm/canopy-tree.sbatch as a user submits it (issue 49): unchanged,
#          with sbatch from the controller's host (a login node, as in outside), only
#          --chdir and CANOPY_BIN and CANOPY_ARGS (--log-dir) given. Its batch step on
#          n1 runs the front-end and both workloads on b:3^2 (sized from the job's 3
#          nodes). The job must complete, its output file (the script's own
#          canopy-JOBID.out) say "check: ok" for both, each node's commnode must have
#          listened on that node's address (the logs), and nothing may be left.
#
# Usage: tree_over_slurm.sh BIN_DIR spawn|slurm|heal|slurmd|cancel|tree|badnode|outside|sbatch   (ctest passes the build's bin directory)
set -euo pipefail
bin="${1:?usage: tree_over_slurm.sh BIN_DIR spawn|slurm|heal|slurmd|cancel|tree|badnode|outside|sbatch}"
mode="${2:?usage: tree_over_slurm.sh BIN_DIR spawn|slurm|heal|slurmd|cancel|tree|badnode|outside|sbatch}"
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
  - {rank: 5, role: backend, host: n1}
edges:
  - {parent: 1000000, children: [1000001, 1000002, 1000003]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2, 3]}
  - {parent: 1000003, children: [4, 5]}
T

allocation=(-N3)
duration=2
case "$mode" in
  spawn) how=(--launcher 'srun --overlap -N1 -n1 -w {host} {command}'); expected=3 ;;
  slurm) how=(--launch slurm); expected=2 ;;
  heal | slurmd | cancel) how=(--launch slurm --heartbeat 100 --suspect 300 --lost 800); expected=2; duration=4 ;;
  tree | outside) how=(--launch slurm); expected=1 ;;
  badnode) how=(--launch slurm --startup-timeout 5000); allocation=(-N2 -w n1,n2) ;;
  sbatch) expected=2 ;;  # the script's two runs; the batch step launches no task
  *) netns_fail "unknown mode $mode" ;;
esac
path_prefix=""
if [ "$mode" = cancel ]; then
  mkdir -p "$work/busy"
  cat > "$work/busy/squeue" <<EOF
#!/bin/sh
# squeue as a busy controller answers it at first: the first two calls fail.
n=\$(cat "$work/squeue-calls" 2>/dev/null || echo 0)
echo \$((n + 1)) > "$work/squeue-calls"
[ "\$n" -ge 2 ] || { echo "squeue: error: slurm_receive_msg: Socket timed out on send/recv operation" >&2; exit 1; }
exec $(command -v squeue) "\$@"
EOF
  chmod +x "$work/busy/squeue"
  path_prefix="$work/busy:"
  (
    sleep 1.5
    job="$(slurm_on n1 squeue -h -o %i)"
    slurm_on n1 scancel "$job" && echo "$job" > "$work/cancelled"
  ) &
  netns_on_exit "kill $! 2>/dev/null || true"
fi
if [ "$mode" = slurmd ]; then
  (
    sleep 1.5
    for pid in $(ip netns pids "$NETNS_N2"); do
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmd ] && kill -TERM "$pid" && echo "$pid" > "$work/stopped"
    done
  ) &
  netns_on_exit "kill $! 2>/dev/null || true"
fi
if [ "$mode" = heal ]; then
  (
    sleep 1.5
    ns_var="NETNS_N2"
    for pid in $(ip netns pids "${!ns_var}"); do
      case "$(cat "/proc/$pid/comm" 2>/dev/null)" in canopy-commnod*) kill -KILL "$pid" && echo "$pid" > "$work/killed" ;; esac
    done
  ) &
  netns_on_exit "kill $! 2>/dev/null || true"
fi
status=0
topology=(--topology "$work/tree.yaml")
[ "$mode" = tree ] || [ "$mode" = outside ] && topology=(--tree b:3^2)
# Where the user runs salloc: on n1, or (outside) on the controller's host, a login
# node whose own name resolves to a loopback address.
on_login() {
  mkdir -p "$SLURM_DIR/tmp/login"
  TMPDIR="$SLURM_DIR/tmp/login" SLURM_CONF="$SLURM_CONF" nsenter --net="/run/netns/$NETNS_CTL" unshare --uts \
    sh -c 'hostname localhost; exec "$@"' login "$@"
}
where=(slurm_on n1)
[ "$mode" = outside ] || [ "$mode" = sbatch ] && where=(on_login)
if [ "$mode" = sbatch ]; then
  # The example as it is; its own --output (canopy-%j.out) is relative to --chdir.
  job="$(CANOPY_BIN="$bin" CANOPY_ARGS="--log-dir $work/logs" "${where[@]}" sbatch --parsable --chdir "$work" \
    "$here/../../examples/slurm/canopy-tree.sbatch" 2> "$work/err")" || netns_fail "sbatch failed: $(cat "$work/err")"
  job="${job%%;*}"
  [[ "$job" =~ ^[0-9]+$ ]] || netns_fail "sbatch gave no job id: '$job' $(cat "$work/err")"
  netns_on_exit "slurm_on n1 scancel $job > /dev/null 2>&1 || true"
  # Until the job has ended: no sacct here (no accounting), but scontrol shows an
  # ended job for MinJobAge (5 s) more. No state at all (a busy controller's
  # timeout): asked again, unless the job is unknown.
  state=""
  until_s=$((SECONDS + 60))
  while [ "$SECONDS" -lt "$until_s" ]; do
    info="$("${where[@]}" scontrol -o show job "$job" 2>&1 || true)"
    state="$(grep -o "JobState=[A-Z_]*" <<< "$info" | cut -d= -f2 || true)"
    case "$state" in
      PENDING | CONFIGURING | RUNNING | COMPLETING) sleep 0.2 ;;
      "") grep -q "Invalid job id" <<< "$info" && break; sleep 0.2 ;;
      *) break ;;
    esac
  done
else
  PATH="$path_prefix$PATH" "${where[@]}" salloc "${allocation[@]}" --exclusive "$bin/canopy" run "${topology[@]}" "${how[@]}" \
    --workload union --duration "$duration" --record "$work/record" > "$work/out" 2> "$work/err" || status=$?
fi
if [ "$mode" = heal ]; then
  [ -s "$work/killed" ] || netns_fail "no commnode was found in n2 to kill"
  grep -q "event: failure of 1000002" "$work/out" ||
    netns_fail "the commnode's loss was not reported (exit status ${status:-0}): $(cat "$work/out")
--- standard error ---
$(tail -n 40 "$work/err")"
fi
if [ "$mode" = slurmd ]; then
  [ -s "$work/stopped" ] || netns_fail "no slurmd was found in n2 to stop"
  for _ in $(seq 50); do kill -0 "$(cat "$work/stopped")" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$(cat "$work/stopped")" 2>/dev/null && netns_fail "n2's slurmd did not stop"
  if grep -q "event: failure" "$work/out"; then
    netns_fail "a process was lost when only n2's slurmd stopped: $(cat "$work/out")"
  fi
fi
if [ "$mode" = cancel ]; then
  [ -s "$work/cancelled" ] || netns_fail "the allocation was not cancelled"
  [ "$(cat "$work/squeue-calls" 2>/dev/null || echo 0)" -ge 3 ] ||
    netns_fail "canopy run did not ask squeue again after it failed: $(cat "$work/squeue-calls" 2>/dev/null) call(s)"
  [ "$status" = 1 ] || netns_fail "canopy run exited with $status after its allocation was cancelled: $(cat "$work/err")"
  grep -q "network stopped: the Slurm allocation $(cat "$work/cancelled") ended" "$work/err" ||
    netns_fail "the error does not say the allocation ended: $(cat "$work/err")"
elif [ "$mode" = sbatch ]; then
  out="$work/canopy-$job.out"
  case "$state" in
    COMPLETED) ;;
    PENDING | CONFIGURING | RUNNING | COMPLETING) netns_fail "job $job did not end within 60 s: $info" ;;
    "") netns_fail "job $job is gone before it was seen ending, or scontrol did not answer: $info" ;;
    *) netns_fail "job $job ended $state: $info; its output: $(tail -5 "$out" 2>/dev/null)" ;;
  esac
  grep -q "ExitCode=0:0" <<< "$info" || netns_fail "job $job exited with an error: $info"
  [ -s "$out" ] || netns_fail "no output file canopy-$job.out in the job's directory: $(ls "$work")"
  grep -q "placement: n1: the front-end" "$out" || netns_fail "the front-end was not on the batch host n1: $(head -3 "$out")"
  [ "$(grep -c "launched 13/13 processes" "$out")" = 2 ] || netns_fail "not two runs of b:3^2: $(cat "$out")"
  grep -q "waves of sum over 9 back-ends.*check: ok" "$out" || netns_fail "the demo waves did not check out: $(cat "$out")"
  grep -q "union of .* from 9 back-ends.*check: ok" "$out" || netns_fail "the union did not check out: $(cat "$out")"
  if grep -qE "forcing job termination|Job step aborted" "$out"; then
    netns_fail "the steps were cancelled at the runs' orderly end: $(cat "$out")"
  fi
  # A commnode on each node: it listened on the node's address (only that node's
  # namespace has it). n1's is the front-end's local child; those of n2 and n3 are
  # tasks of each run's one step, and the batch step is no task.
  for node in n1 n2 n3; do
    addr_var="SLURM_NODE_$(printf '%s' "$node" | tr '[:lower:]' '[:upper:]')"
    grep -qF "listening on ${!addr_var} port" "$work"/logs/commnode-*.log ||
      netns_fail "no commnode listened on $node's address ${!addr_var}: $(grep -h "listening on" "$work"/logs/commnode-*.log)"
    tasks=$(grep -c "launch task StepId=$job\." "$SLURM_DIR/slurmd-$node.log" || true)
    want=2
    [ "$node" = n1 ] && want=0
    [ "$tasks" = "$want" ] || netns_fail "node $node ran $tasks tasks, expected $want ($mode)"
  done
  grep -q "Launching batch job $job " "$SLURM_DIR/slurmd-n1.log" || netns_fail "the batch step did not run on n1"
  steps=$(cat "$SLURM_DIR"/slurmd-*.log | grep -o "launch task StepId=[0-9.]*" | sort -u | wc -l)
  [ "$steps" = "$expected" ] || netns_fail "$steps srun steps, expected $expected ($mode)"
elif [ "$mode" = badnode ]; then
  [ "$status" = 1 ] || netns_fail "canopy run with a node outside the allocation exited with $status: $(cat "$work/err")"
  grep -q "the srun step of level 1 exited with status 1 before the tree was up" "$work/err" ||
    netns_fail "the error does not name the failed step: $(cat "$work/err")"
  grep -qF "is every host of the topology a node of the allocation, n[1-2]?" "$work/err" ||
    netns_fail "the error does not name the allocation's nodes: $(cat "$work/err")"
else
  [ "$status" = 0 ] || netns_fail "canopy run under salloc exited with $status: $(cat "$work/err")"
  grep -q "check: ok" "$work/out" || netns_fail "the union did not check out: $(tail -3 "$work/out")"
  for node in n1 n2 n3; do
    tasks=$(grep -c "launch task" "$SLURM_DIR/slurmd-$node.log" || true)
    want=1
    [ "$mode" = tree ] && [ "$node" = n1 ] && want=0  # the front-end's node: its commnode is local
    [ "$tasks" = "$want" ] || netns_fail "node $node ran $tasks tasks, expected $want ($mode)"
  done
  if [ "$mode" = tree ] || [ "$mode" = outside ]; then
    grep -q "launched 13/13 processes" "$work/out" || netns_fail "not the b:3^2 tree: $(head -2 "$work/out")"
  fi
  # An orderly end lets each step end by itself once its tasks have left: srun is
  # not signalled, the step is not cancelled ("forcing job termination").
  if [ "$mode" = slurm ] || [ "$mode" = tree ] || [ "$mode" = outside ]; then
    if grep -qE "forcing job termination|Job step aborted" "$work/err"; then
      netns_fail "the steps were cancelled at the run's orderly end: $(cat "$work/err")"
    fi
  fi
  steps=$(cat "$SLURM_DIR"/slurmd-*.log | grep -o "launch task StepId=[0-9.]*" | sort -u | wc -l)
  [ "$steps" = "$expected" ] || netns_fail "$steps srun steps, expected $expected ($mode)"
  if [ "$mode" = slurm ] || [ "$mode" = tree ]; then
    # The demo workload too: checked waves of sums.
    slurm_on n1 salloc "${allocation[@]}" --exclusive "$bin/canopy" run "${topology[@]}" "${how[@]}" --waves 200 \
      > "$work/demo.out" 2> "$work/demo.err" || netns_fail "the demo workload failed: $(cat "$work/demo.err")"
    grep -q "200 waves of sum over [0-9]* back-ends.*check: ok" "$work/demo.out" ||
      netns_fail "the demo workload did not check out: $(tail -2 "$work/demo.out")"
  fi
fi
# The steps end with the run; slurmstepd may take a moment after the allocation
# ends. The daemons themselves run in the nodes until the teardown: only they may stay.
leftovers() {
  local ns pid comm
  for ns in $NETNS_ALL; do
    for pid in $(ip netns pids "$ns"); do
      comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
      case "$comm" in
        slurmd|slurmctld|slurmscriptd|sh|"") ;;
        *) echo "$pid ($comm) in $ns" ;;
      esac
    done
  done
}
for _ in $(seq 50); do
  [ -z "$(leftovers)" ] && break
  sleep 0.1
done
left="$(leftovers)"
[ -z "$left" ] || netns_fail "processes left after the run: $left"
echo "PASS: a tree over 3 Slurm nodes, $mode"
