#!/usr/bin/env bash
# Launch time with `--launch mpirun` (docs/launch.md) against the per-process
# launcher template, over four hosts that are network namespaces of
# tests/netns/lib.sh (needs root), with no Slurm: b:F^2 trees (F commnodes under the
# front-end, F back-ends each), commnode i and its back-ends on host i mod 4, started
# from host 1 in turn by
#   spawn   the launcher template `ip netns exec {host} {command}`: one command per
#           remote commnode (as cheap as a launcher gets: no ssh handshake), each
#           starting its back-ends locally
#   mpirun  `--launch mpirun`: one mpirun per level (here one: the back-ends are
#           local to their commnodes), its daemons reaching the hosts through an rsh
#           agent that enters the namespace
# REPS times each, the two modes alternating. "launch" is what canopy run reports:
# from the start of the launch to every process connected.
#   mpirun_launch.csv   tree,mode,rep,processes,launch_s
#   mpirun_launch.png   medians per tree, both modes side by side
# Usage: bench/mpirun_launch.sh [OUTPUT_DIR] [REPS (default 5)] [FANOUTS (default "4 8")]
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
reps=${2:-5}
fanouts=${3:-4 8}
bench_prologue "${1:-bench-results}" canopy
source tests/netns/lib.sh
NETNS_NICS=1 netns_setup n1 n2 n3 n4
netns_deadline 1800
netns_on_exit "rm -rf $work"

# mpirun's rsh agent: AGENT HOST COMMAND... (a shell command line, as ssh runs it),
# with HOST as the hostname: Open MPI's daemons tell nodes apart by it (with one name
# for all, mpirun lost its routes and crashed).
cat > "$work/agent" <<'A'
#!/bin/sh
host=$1
shift
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0"; exec sh -c "$1"' "$host" "$*"
A
chmod +x "$work/agent"

# b:F^2 over the four namespaces (host names are the namespaces' names).
hosts=()
for n in 1 2 3 4; do ns="NETNS_N$n" addr="NETNS_N${n}_NIC1"; hosts+=("${!ns}=${!addr}"); done

# run_mode MODE YAML: one canopy run from host 1.
run_mode() {
  local how=(--launch mpirun)
  [ "$1" = spawn ] && how=(--launcher 'ip netns exec {host} {command}')
  OMPI_MCA_plm_rsh_agent="$work/agent" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    ip netns exec "$NETNS_N1" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$NETNS_N1" \
    "$bin/canopy" run --topology "$2" "${how[@]}" --waves 1
}
launch_series "$out/mpirun_launch.csv" "$work" spawn mpirun run_mode "${hosts[@]}"

launch_medians "$out/mpirun_launch.csv" spawn mpirun "$fanouts" > "$work/medians.dat"
plot_two_bars "$work/medians.dat" "$out/mpirun_launch.png" \
  "Launch over 4 namespace hosts, no Slurm (medians of $reps runs)" "milliseconds to every process connected" "%.0f" \
  "ip netns exec per remote commnode (--launcher)" "one mpirun per level (--launch mpirun)"
cat "$work/medians.dat"
echo "wrote $out/mpirun_launch.csv and $out/mpirun_launch.png"
