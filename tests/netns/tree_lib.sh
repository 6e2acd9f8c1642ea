# Helpers for the tests that run a Canopy tree across the namespaces of lib.sh, with
# the launcher template `ip netns exec {host} {command}`. Expects `bin` (the build's
# bin directory) and `work` (a directory of the test's own).

# tree_write_topology EDGES: writes $work/tree.yaml, a topology over hosts A and B,
# two NICs each, so that links between them are striped (links: auto). Host A: the
# front-end, commnode 1000002 and back-end 2; host B: commnode 1000001 and back-ends
# 0, 1 and 3. EDGES: the `edges:` entries, one per line.
tree_write_topology() {
  cat >"$work/tree.yaml" <<EOF
hosts:
  - {name: $NETNS_A, nics: [$NETNS_A_NIC1, $NETNS_A_NIC2]}
  - {name: $NETNS_B, nics: [$NETNS_B_NIC1, $NETNS_B_NIC2]}
nodes:
  - {rank: 1000000, role: frontend, host: $NETNS_A}
  - {rank: 1000001, role: commnode, host: $NETNS_B}
  - {rank: 1000002, role: commnode, host: $NETNS_A}
  - {rank: 0, role: backend, host: $NETNS_B}
  - {rank: 1, role: backend, host: $NETNS_B}
  - {rank: 2, role: backend, host: $NETNS_A}
  - {rank: 3, role: backend, host: $NETNS_B}
edges:
$1
EOF
}

# tree_run [canopy run options...]: starts `canopy run` over $work/tree.yaml in
# host A, in the background (its pid: tree_run_pid), with one log per process in
# $work/logs and its output in $work/out and $work/err.
tree_run() {
  mkdir -p "$work/logs"
  ip netns exec "$NETNS_A" env CANOPY_LOG_DIR="$work/logs" timeout 60 \
    "$bin/canopy" run --topology "$work/tree.yaml" --launcher 'ip netns exec {host} {command}' \
    "$@" >"$work/out" 2>"$work/err" &
  tree_run_pid=$!
  netns_on_exit "kill $tree_run_pid 2>/dev/null || true"
}

# tree_fail MESSAGE: fails the test, showing what canopy run printed.
tree_fail() {
  echo "FAIL: $*" >&2
  echo "--- canopy run stdout (tail) ---" >&2; tail -n 8 "$work/out" >&2
  echo "--- canopy run stderr ---" >&2; cat "$work/err" >&2
  exit 1
}
