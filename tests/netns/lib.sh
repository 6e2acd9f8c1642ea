# Network namespaces for tests and benchmarks: "hosts" joined by veth pairs ("NICs"),
# created by the calling script and removed on every exit. Source it from a bash
# script running with `set -euo pipefail`:
#
#   source tests/netns/lib.sh
#   netns_setup [LABEL...]     one namespace per label (default: a b), NETNS_NICS NICs
#                              each (default 2). First a probe: without root, iproute2,
#                              or kernel support for namespaces, veth pairs (and
#                              bridges, for three labels or more) it skips the test
#                              (exit 77, ctest: SKIPPED); any error after the probe
#                              fails it (exit 1)
#   netns_on_exit COMMAND      run COMMAND on exit, before the namespaces go (last
#                              registered first); e.g. killing a process by its pid
#   netns_deadline SECONDS     the script is stopped (cleanly) after this long
#   netns_wait_for FILE REGEX SECONDS   wait until a line of FILE matches
#   netns_expect_no_processes  fails if a process is left in any of the namespaces
#   netns_skip REASON          print REASON and exit 77; only before the namespaces
#                              are made (after that it fails the test)
#   netns_fail REASON          print REASON and exit 1
#
# Skipping is the probe's alone: a script that exits 77 by any other path (a command
# of its own that happened to return 77, under set -e) fails instead. With
# CANOPY_REQUIRE_NETNS=1 in the environment (CI running as root sets it), a skip
# fails too: there, a test that cannot make its namespaces is broken, not excused.
#
# After netns_setup, for each LABEL (upper case: L) and NIC k (1..NETNS_NICS):
#   NETNS_L           the namespace's name (unique to this run)
#   NETNS_L_NICk      its address on NIC k: 10.201.k.N/24, N = 1 + the label's position
#   NETNS_L_VETHk     its interface on NIC k (`ip -n "$NETNS_L" link set ... down`)
#   NETNS_L_NICS      its NIC addresses, comma-separated
#   NETNS_ALL         every namespace, space-separated
#
# Two namespaces are joined by one veth pair per NIC. Three or more share one bridge
# per NIC, in a namespace of its own (NETNS_HUB), each with a veth pair into it. Every
# interface is created inside the namespaces (`ip link add ... netns`), so the root
# namespace's are never touched; names carry a random run id, so that tests can run
# in parallel. Everything left running in the namespaces is killed on exit.

NETNS_ALL=""
NETNS_HUB=""
NETNS_RUN_ID=""
_netns_exit_commands=()
_netns_cleaned=0
_netns_probe=""      # the probe's namespace while it exists
_netns_skipping=0    # set by netns_skip: the one path that may exit 77

netns_fail() {
  echo "FAIL: $*" >&2
  exit 1
}

netns_skip() {
  if [ -n "$NETNS_ALL$NETNS_HUB" ]; then
    netns_fail "$* (after the namespaces were made: a failure, not a reason to skip)"
  fi
  if [ "${CANOPY_REQUIRE_NETNS:-0}" = 1 ]; then
    netns_fail "$* (CANOPY_REQUIRE_NETNS=1: namespace tests must run here, not skip)"
  fi
  echo "SKIP: $*" >&2
  _netns_skipping=1
  exit 77
}

netns_on_exit() {
  _netns_exit_commands+=("$1")
}

netns_cleanup() {
  local status=$?
  [ "$_netns_cleaned" = 1 ] && return "$status"
  _netns_cleaned=1
  set +e
  if [ "$status" = 77 ] && [ "$_netns_skipping" != 1 ]; then
    echo "FAIL: exit status 77 (ctest: SKIPPED) from something other than the probe of netns_setup;" \
      "reported as a failure" >&2
    status=1
  fi
  local i
  for ((i = ${#_netns_exit_commands[@]} - 1; i >= 0; i--)); do
    eval "${_netns_exit_commands[$i]}"
  done
  local ns pids
  for ns in $NETNS_ALL $NETNS_HUB $_netns_probe; do
    # Whatever still runs in our namespaces was started by this script: stop it, or
    # the namespace would outlive its name.
    pids="$(ip netns pids "$ns" 2>/dev/null)"
    if [ -n "$pids" ]; then
      kill -TERM $pids 2>/dev/null
      sleep 0.5
      pids="$(ip netns pids "$ns" 2>/dev/null)"
      [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    fi
    ip netns del "$ns" 2>/dev/null
  done
  # Leaving an EXIT trap by `exit` sets the script's status; `return` would not.
  exit "$status"
}

trap netns_cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

netns_deadline() {
  local seconds="$1" script=$$
  # A sleeper of our own that stops the script; killed on exit, its sleep with it.
  (
    trap 'kill $sleeper 2>/dev/null; exit 0' TERM
    sleep "$seconds" &
    sleeper=$!
    wait $sleeper
    echo "TIMEOUT: stopping after ${seconds} s" >&2
    kill -TERM "$script"
  ) &
  netns_on_exit "kill $! 2>/dev/null"
}

netns_wait_for() {
  local file="$1" regex="$2" seconds="$3" waited=0
  while ! grep -qE "$regex" "$file" 2>/dev/null; do
    if [ "$waited" -ge $((seconds * 20)) ]; then
      echo "no line matching '$regex' in $file after ${seconds} s" >&2
      return 1
    fi
    sleep 0.05
    waited=$((waited + 1))
  done
}

netns_expect_no_processes() {
  local ns left=0
  for ns in $NETNS_ALL; do
    if [ -n "$(ip netns pids "$ns" 2>/dev/null)" ]; then
      echo "processes left in namespace $ns: $(ip netns pids "$ns" | tr '\n' ' ')" >&2
      left=1
    fi
  done
  return "$left"
}

# _netns_var NAME VALUE: sets and exports NAME.
_netns_var() {
  printf -v "$1" '%s' "$2"
  export "${1?}"
}

netns_setup() {
  local labels=("$@")
  [ ${#labels[@]} -gt 0 ] || labels=(a b)
  [ ${#labels[@]} -ge 2 ] || netns_fail "netns_setup needs two labels or more, got: ${labels[*]}"
  local nics="${NETNS_NICS:-2}"
  # The probe: can this machine make what the test needs at all? Only here may the
  # test skip.
  [ "$(id -u)" = 0 ] || netns_skip "network namespaces need root (running as uid $(id -u))"
  command -v ip >/dev/null || netns_skip "iproute2's ip is not installed (scripts/setup.sh installs it)"
  NETNS_RUN_ID="$(printf '%04x%02x' $(($$ & 0xffff)) $((RANDOM & 0xff)))"
  _netns_probe="canopy-probe-$NETNS_RUN_ID"
  ip netns add "$_netns_probe" 2>/dev/null || {
    _netns_probe=""
    netns_skip "cannot create network namespaces (ip netns add failed)"
  }
  ip -n "$_netns_probe" link add probe0 type veth peer name probe1 2>/dev/null ||
    netns_skip "cannot create veth pairs (no veth support in the kernel?)"
  if [ ${#labels[@]} -gt 2 ]; then
    ip -n "$_netns_probe" link add probebr type bridge 2>/dev/null ||
      netns_skip "cannot create bridges (no bridge support in the kernel?)"
  fi
  ip netns del "$_netns_probe" || netns_fail "cannot delete the probe's namespace $_netns_probe"
  _netns_probe=""

  # From here on, every error is a failure.
  local i k label upper ns
  for i in "${!labels[@]}"; do
    label="${labels[$i]}"
    upper="$(printf '%s' "$label" | tr '[:lower:]-' '[:upper:]_')"
    ns="canopy-$label-$NETNS_RUN_ID"
    ip netns add "$ns" || netns_fail "cannot create network namespace $ns"
    NETNS_ALL="${NETNS_ALL:+$NETNS_ALL }$ns"
    ip -n "$ns" link set lo up
    _netns_var "NETNS_$upper" "$ns"
    _netns_var "NETNS_${upper}_NICS" ""
  done
  if [ ${#labels[@]} -gt 2 ]; then
    NETNS_HUB="canopy-hub-$NETNS_RUN_ID"
    ip netns add "$NETNS_HUB" || netns_fail "cannot create network namespace $NETNS_HUB"
    for ((k = 1; k <= nics; k++)); do
      ip -n "$NETNS_HUB" link add "br$k" type bridge || netns_fail "cannot create a bridge"
      ip -n "$NETNS_HUB" link set "br$k" up
    done
  fi
  for ((k = 1; k <= nics; k++)); do
    for i in "${!labels[@]}"; do
      label="${labels[$i]}"
      upper="$(printf '%s' "$label" | tr '[:lower:]-' '[:upper:]_')"
      ns="canopy-$label-$NETNS_RUN_ID"
      local veth="c${NETNS_RUN_ID}n${i}k$k"   # at most 15 characters for i, k < 100
      if [ -z "$NETNS_HUB" ]; then
        # Two hosts: one veth pair per NIC, made when the first host is reached.
        if [ "$i" = 0 ]; then
          ip link add "$veth" netns "$ns" type veth peer name "c${NETNS_RUN_ID}n1k$k" \
            netns "canopy-${labels[1]}-$NETNS_RUN_ID" || netns_fail "cannot create veth pairs"
        fi
      else
        ip link add "$veth" netns "$ns" type veth peer name "c${NETNS_RUN_ID}n${i}h$k" netns "$NETNS_HUB" ||
          netns_fail "cannot create veth pairs"
        ip -n "$NETNS_HUB" link set "c${NETNS_RUN_ID}n${i}h$k" master "br$k" up
      fi
      ip -n "$ns" addr add "10.201.$k.$((i + 1))/24" dev "$veth"
      ip -n "$ns" link set "$veth" up
      _netns_var "NETNS_${upper}_NIC$k" "10.201.$k.$((i + 1))"
      _netns_var "NETNS_${upper}_VETH$k" "$veth"
      local list="NETNS_${upper}_NICS"
      _netns_var "$list" "${!list:+${!list},}10.201.$k.$((i + 1))"
    done
  done
  export NETNS_ALL NETNS_HUB NETNS_RUN_ID
}
