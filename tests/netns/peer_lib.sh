# Helpers for tests and benchmarks running canopy-stripe-peer between the namespaces
# of lib.sh: the receiver in NETNS_B, the sender in NETNS_A, by default over every
# NIC. Expects `bin` (the directory of canopy-stripe-peer); outputs go to
# WORK/{serve,send}.{out,err}. The processes need no killing of their own on exit:
# lib.sh stops whatever still runs in its namespaces.

peer_port=7100  # each run has namespaces of its own, so one port does
# Addresses, comma-separated; empty: every NIC of the namespace. The sender's local
# and remote ones are paired by position, one path each.
peer_listen=""
peer_local=""
peer_remote=""

# peer_serve WORK [serve options...]: starts the receiver, waits until it listens.
peer_serve() {
  local work="$1"
  shift
  ip netns exec "$NETNS_B" timeout 60 "$bin/canopy-stripe-peer" serve --listen "${peer_listen:-$NETNS_B_NICS}" \
    --port "$peer_port" "$@" >"$work/serve.out" 2>"$work/serve.err" &
  peer_serve_pid=$!
  netns_wait_for "$work/serve.err" '^canopy-stripe-peer: listening' 10 || peer_fail "$work" "the receiver did not start"
}

# peer_send WORK [send options...]: starts the sender, in the background.
peer_send() {
  local work="$1"
  shift
  ip netns exec "$NETNS_A" timeout 60 "$bin/canopy-stripe-peer" send --local "${peer_local:-$NETNS_A_NICS}" \
    --remote "${peer_remote:-$NETNS_B_NICS}" --port "$peer_port" "$@" >"$work/send.out" 2>"$work/send.err" &
  peer_send_pid=$!
}

# peer_wait WORK: waits for both; fails unless both exited with 0.
peer_wait() {
  local work="$1" send_status=0 serve_status=0
  wait "$peer_send_pid" || send_status=$?
  wait "$peer_serve_pid" || serve_status=$?
  [ "$send_status" = 0 ] || peer_fail "$work" "the sender exited with status $send_status"
  [ "$serve_status" = 0 ] || peer_fail "$work" "the receiver exited with status $serve_status"
}

# peer_value FILE KEY: the value of KEY=VALUE in FILE (the last one), or nothing.
peer_value() {
  grep -oE "(^| )$2=[^ ]*" "$1" | tail -n 1 | sed 's/^ //; s/^[^=]*=//'
}

# peer_expect_intact WORK COUNT: the receiver's verdict, read again from its line.
peer_expect_intact() {
  local work="$1" count="$2" key
  [ "$(peer_value "$work/serve.out" received)" = "$count" ] ||
    peer_fail "$work" "the receiver got $(peer_value "$work/serve.out" received) messages, not $count"
  for key in lost duplicated reordered corrupt; do
    [ "$(peer_value "$work/serve.out" "$key")" = 0 ] || peer_fail "$work" "$key is not 0"
  done
  [ "$(peer_value "$work/send.out" result)" = ok ] || peer_fail "$work" "the sender's close() did not flush"
}

peer_fail() {
  local work="$1"
  shift
  echo "FAIL: $*" >&2
  local f
  for f in serve.out serve.err send.out send.err; do
    [ -s "$work/$f" ] && { echo "--- $f ---" >&2; tail -n 60 "$work/$f" >&2; }
  done
  exit 1
}
