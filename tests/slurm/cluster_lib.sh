# A real Slurm cluster on this machine for tests and benchmarks (issue 19;
# ../shared/notes/slurm-in-namespaces.md has the facts it relies on): slurmctld and
# one slurmd per node, each node a network namespace of tests/netns/lib.sh with its
# own hostname, munge with a private key and socket, everything in one directory
# and torn down on exit. Source it after tests/netns/lib.sh from a bash script
# running with `set -euo pipefail`:
#
#   slurm_cluster_up NODE...   namespaces "ctl" and one per NODE (names of letters
#                              and digits: n1 n2 n3), slurmctld in ctl, a slurmd in
#                              each node, the partition "canopy" of all of them; waits
#                              until every node is idle. Skips (exit 77) like
#                              netns_setup where the machine cannot, or where Slurm is
#                              not installed (scripts/setup.sh installs it).
#   slurm_on NODE COMMAND...   runs COMMAND in NODE's namespace with its hostname and
#                              the cluster's SLURM_CONF (e.g. slurm_on n1 srun -N3 hostname)
#
# After slurm_cluster_up:
#   SLURM_DIR          the cluster's directory (slurm.conf, logs, spool, munge)
#   SLURM_CONF         its slurm.conf (exported)
#   SLURM_NODE_<N>     node N's address (upper case: SLURM_NODE_N1)
#
# Teardown (on exit, before the namespaces go): slurmds first, then slurmctld, then
# munged (a slurmd left alone retries "epilog complete" for ~10 s).

SLURM_DIR=""
SLURM_NODES=()
_slurm_pids=()

# slurm_on NODE COMMAND...: COMMAND inside NODE's namespace, hostname NODE, with a
# TMPDIR of the node's own (srun passes it on to the tasks), as a real node has its
# own /tmp: Open MPI keeps its session directory there under the node's name
# (ompi.n1.0), which the clusters of tests side by side would otherwise share.
slurm_on() {
  local node=$1
  shift
  local ns_var="NETNS_$(printf '%s' "$node" | tr '[:lower:]' '[:upper:]')"
  TMPDIR="$SLURM_DIR/tmp/$node" SLURM_CONF="$SLURM_CONF" nsenter --net="/run/netns/${!ns_var}" unshare --uts \
    sh -c 'hostname "$0"; exec "$@"' "$node" "$@"
}

_slurm_teardown() {
  local pid
  # slurmds (started last) before slurmctld, then munged.
  for ((i = ${#_slurm_pids[@]} - 1; i >= 0; i--)); do
    pid=${_slurm_pids[$i]}
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if [ -n "$SLURM_DIR" ] && [ -f "$SLURM_DIR/munged.pid" ]; then
    pid="$(cat "$SLURM_DIR/munged.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  [ -n "$SLURM_DIR" ] && rm -rf "$SLURM_DIR"
}

slurm_cluster_up() {
  local nodes=("$@")
  for tool in slurmctld slurmd srun munged nsenter unshare; do
    command -v "$tool" >/dev/null || netns_skip "$tool is not installed (scripts/setup.sh installs Slurm and munge)"
  done
  NETNS_NICS=1 netns_setup ctl "${nodes[@]}"
  SLURM_NODES=("${nodes[@]}")
  SLURM_DIR="$(mktemp -d /tmp/canopy-slurm.XXXXXX)"
  netns_on_exit _slurm_teardown
  export SLURM_CONF="$SLURM_DIR/slurm.conf"
  mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/tmp"

  # munge: a key of its own, a socket of its own; it insists on private directories.
  chmod 700 "$SLURM_DIR"
  dd if=/dev/urandom of="$SLURM_DIR/munge.key" bs=1 count=1024 status=none
  chmod 400 "$SLURM_DIR/munge.key"
  munged --force --key-file="$SLURM_DIR/munge.key" --socket="$SLURM_DIR/munge.sock" \
    --pid-file="$SLURM_DIR/munged.pid" --seed-file="$SLURM_DIR/munged.seed" \
    --log-file="$SLURM_DIR/munged.log" || netns_fail "munged did not start: $(cat "$SLURM_DIR/munged.log" 2>/dev/null)"

  local ctl_addr="$NETNS_CTL_NIC1" node upper node_lines="" names=""
  for node in "${nodes[@]}"; do
    upper="$(printf '%s' "$node" | tr '[:lower:]' '[:upper:]')"
    local addr_var="NETNS_${upper}_NIC1"
    _netns_var "SLURM_NODE_$upper" "${!addr_var}"
    node_lines+="NodeName=$node NodeAddr=${!addr_var} NodeHostname=$node CPUs=4 State=UNKNOWN"$'\n'
    names="${names:+$names,}$node"
    mkdir -p "$SLURM_DIR/spool/$node" "$SLURM_DIR/tmp/$node"
  done
  # Job ids of this cluster's own: clusters of tests running side by side share the
  # machine's process table, /dev/shm and /tmp, and their nodes' names (n1, n2, ...).
  # With every cluster's first job "1", a rank found by its environment
  # (SLURM_JOB_ID, SLURMD_NODENAME: canopy stack --slurm-job) could be another
  # test's, which the tool then walked (that test saw its rank traced), and two jobs'
  # Open MPI shared-memory segments had the same names (a rank crashed in
  # mca_btl_vader on a pointer from another job's process).
  local first_job=$(( (RANDOM * 32768 + RANDOM) % 60000000 + 1000 ))
  cat > "$SLURM_CONF" <<CONF
ClusterName=canopytest
FirstJobId=$first_job
SlurmctldHost=ctl($ctl_addr)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd-%n.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd-%n.log
TmpFS=$SLURM_DIR/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
MinJobAge=5
SlurmdTimeout=30
$node_lines
PartitionName=canopy Nodes=$names Default=YES MaxTime=INFINITE State=UP
CONF
  nsenter --net="/run/netns/$NETNS_CTL" unshare --uts sh -c 'hostname ctl; exec slurmctld -D -i -f "$0"' \
    "$SLURM_CONF" > "$SLURM_DIR/slurmctld.out" 2>&1 &
  _slurm_pids+=($!)
  for node in "${nodes[@]}"; do
    upper="$(printf '%s' "$node" | tr '[:lower:]' '[:upper:]')"
    local ns_var="NETNS_$upper"
    nsenter --net="/run/netns/${!ns_var}" unshare --uts sh -c 'hostname "$0"; exec slurmd -D -N "$0" -f "$1"' \
      "$node" "$SLURM_CONF" > "$SLURM_DIR/slurmd-$node.out" 2>&1 &
    _slurm_pids+=($!)
  done
  # Up when every node is idle.
  local idle=""
  for _ in $(seq 100); do
    idle="$(slurm_on "${nodes[0]}" sinfo -h -o '%T %D' 2>/dev/null || true)"
    [ "$idle" = "idle ${#nodes[@]}" ] && return 0
    sleep 0.2
  done
  netns_fail "the Slurm cluster did not come up (sinfo: '$idle'): $(tail -5 "$SLURM_DIR/slurmctld.log" 2>/dev/null)"
}
