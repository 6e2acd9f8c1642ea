#!/usr/bin/env bash
# A Canopy tree started over real ssh (docs/launch.md, the spawn launcher template
# `ssh ... {host} {command}`, the secret on ssh's standard input) on three "hosts" h1
# h2 h3, each a network namespace of tests/netns/lib.sh running its own sshd (port
# 2222, a private config and ed25519 keys made in the test's temporary directory),
# with its host name (a UTS namespace) and, as on a Debian cluster, its own
# /etc/hosts (/etc/netns/NS/hosts, which `ip netns exec` bind-mounts over /etc/hosts
# for sshd and so for every process it starts): `localhost`, the host's OWN name on
# 127.0.1.1 (Debian's default), the other hosts and `login` on their 10.201 addresses.
#
# The front-end runs on `login`, as on a login node, whose name also resolves to
# 127.0.1.1 there. lib.sh gives the root namespace no address on its bridge (the
# bridge lives in a hub namespace of its own and the root namespace's interfaces are
# never touched), so the root namespace cannot reach the hosts: `login` is a fourth
# namespace, entered the same way (its hosts file bind-mounted by `ip netns exec`,
# its host name set by `unshare --uts`).
#
#   file   a topology file naming hosts by name only (no address:, no nics:): the
#          front-end on login, commnodes 1000001..1000003 on h1..h3, each with two
#          back-ends on its own host. The union workload checks out; every process
#          ran on its host (its namespace, seen while the run is up); nothing is
#          left on any host or in the root namespace
#   hosts  a generated tree placed by host list: --tree b:3^2 --hosts h1,h2,h3
#          --print-placement --ports 41000-41099. The placement names h1, h2 and h3;
#          the union checks out; while the run is up every canopy socket listening
#          (login's front-end too) is on a port of 41000-41099, and a commnode's on
#          its host's 10.201 address or a wildcard, never on 127.0.1.1; each host ran
#          one commnode and its three back-ends, login the front-end alone; nothing
#          is left
#   heal   as file, the union running 4 s, the commnode of h2 SIGKILLed 1 s into
#          it: its failure is reported, back-ends 2 and 3 (on h2) are adopted
#          across hosts by the commnode of h1 or h3 (ssh-started, reached on its
#          host's address: no "cannot reach potential adopter", and not the
#          front-end, their last resort), no other process is reported lost, the
#          union still checks out, nothing is left
#
# Issue 49: a commnode listens on its host's name, which resolves to 127.0.1.1 on its
# own host, so processes of other hosts (adopters' children, in `heal`; every
# commnode in `hosts`) cannot reach it. SSH_TEST_OWN_NAME=real maps each of h1..h3's
# own name to its real address instead (`login` stays on 127.0.1.1: the front-end
# chooses a reachable address itself), to check this harness apart from that bug.
# KEEP=1 keeps the temporary directory (logs, sshd logs, what was seen where).
#
# Usage: tree_over_ssh.sh BIN_DIR file|hosts|heal   (ctest passes the build's bin directory)
set -euo pipefail
usage="usage: tree_over_ssh.sh BIN_DIR file|hosts|heal"
bin="${1:?$usage}"
mode="${2:?$usage}"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../netns/lib.sh"

case "$mode" in file | hosts | heal) ;; *) netns_fail "unknown mode $mode ($usage)" ;; esac
own_name="${SSH_TEST_OWN_NAME:-loopback}"
case "$own_name" in loopback | real) ;; *) netns_fail "SSH_TEST_OWN_NAME=$own_name: loopback or real" ;; esac
[ -x /usr/sbin/sshd ] || netns_skip "sshd is not installed (scripts/setup.sh installs openssh-server)"
for tool in ssh ssh-keygen unshare ss; do
  command -v "$tool" >/dev/null || netns_skip "$tool is not installed (scripts/setup.sh installs it)"
done

NETNS_NICS=1 netns_setup login h1 h2 h3
netns_deadline 100
work="$(mktemp -d /tmp/canopy-ssh-XXXXXX)"
[ -n "${KEEP:-}" ] || netns_on_exit "rm -rf '$work'"
# On exit, before the directory goes: whatever still runs on the hosts (an interrupted
# run's tree writes its logs there until it is killed).
kill_the_rest() {
  local pids
  for _ in $(seq 20); do
    pids="$(for n in $NETNS_ALL; do ip netns pids "$n"; done)"
    [ -n "$pids" ] || return 0
    kill -KILL $pids 2>/dev/null
    sleep 0.1
  done
}
netns_on_exit kill_the_rest
hosts=(h1 h2 h3)
declare -A ns=([login]=$NETNS_LOGIN [h1]=$NETNS_H1 [h2]=$NETNS_H2 [h3]=$NETNS_H3)
declare -A addr=([login]=$NETNS_LOGIN_NIC1 [h1]=$NETNS_H1_NIC1 [h2]=$NETNS_H2_NIC1 [h3]=$NETNS_H3_NIC1)

fail() {
  echo "FAIL: $*" >&2
  for f in "$work/err" "$work/out"; do [ -s "$f" ] && { echo "--- ${f##*/} ---" >&2; tail -n 15 "$f" >&2; }; done
  for log in "$work"/logs/*.log "$work"/ssh/*.log; do
    [ -s "$log" ] && { echo "--- ${log#"$work/"} ---" >&2; tail -n 4 "$log" >&2; }
  done
  echo "FAIL: $*" >&2
  exit 1
}

# Per-host name resolution, and sshd's privilege separation directory. The
# namespaces' names are this run's own, so are their directories under /etc/netns;
# /etc/netns and /run/sshd themselves are shared by the runs going on: the first that
# needs one makes it (with a marker, .canopy-tests), the last one out removes it, each
# under a lock on /etc (flock: nothing written); one that existed before (no marker)
# stays. In /run/sshd each run holds a file of its own.
shared_dirs_locked() {
  local fd status=0
  exec {fd}</etc
  flock -w 10 "$fd" || echo "flock on /etc timed out: going on without it" >&2
  "$@" || status=$?
  exec {fd}<&-
  return "$status"
}
shared_dirs_make() {
  local dir h
  for dir in /etc/netns /run/sshd; do
    if [ ! -d "$dir" ]; then
      { mkdir -m 755 "$dir" && : >"$dir/.canopy-tests"; } || return 1
    fi
  done
  for h in login "${hosts[@]}"; do mkdir "/etc/netns/${ns[$h]}" || return 1; done
  : >"/run/sshd/.canopy-tests-$NETNS_RUN_ID"
}
shared_dirs_remove() {
  local dir h
  for h in login "${hosts[@]}"; do rm -rf "/etc/netns/${ns[$h]}"; done
  rm -f "/run/sshd/.canopy-tests-$NETNS_RUN_ID"
  for dir in /etc/netns /run/sshd; do
    if [ -e "$dir/.canopy-tests" ] && [ "$(ls -A "$dir")" = .canopy-tests ]; then
      rm -f "$dir/.canopy-tests" && rmdir "$dir"
    fi
  done
  return 0
}
netns_on_exit "shared_dirs_locked shared_dirs_remove"
shared_dirs_locked shared_dirs_make || fail "cannot make this run's directories under /etc/netns and /run/sshd"
for h in login "${hosts[@]}"; do
  {
    echo "127.0.0.1 localhost"
    for other in login "${hosts[@]}"; do
      if [ "$other" = "$h" ] && { [ "$h" = login ] || [ "$own_name" = loopback ]; }; then
        echo "127.0.1.1 $other"
      else
        echo "${addr[$other]} $other"
      fi
    done
  } >"/etc/netns/${ns[$h]}/hosts"
done

# sshd on every host, stopped by its pid on exit (stop_sshds is idempotent; registered
# after shared_dirs_remove, so run before it).
mkdir -p "$work/ssh" "$work/logs" "$work/record" "$work/home"
user_home="$(getent passwd "$(id -u)" | cut -d: -f6)"
[ -d "$user_home" ] || fail "no home directory for user $(id -un)"
ssh-keygen -q -t ed25519 -N '' -C canopy-test-host -f "$work/ssh/host_key"
ssh-keygen -q -t ed25519 -N '' -C canopy-test-client -f "$work/ssh/id"
cp "$work/ssh/id.pub" "$work/ssh/authorized_keys"
stop_sshds() {
  local f
  for f in "$work"/ssh/*.pid; do
    [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
    rm -f "$f"
  done
  return 0
}
netns_on_exit stop_sshds
for h in "${hosts[@]}"; do
  cat >"$work/ssh/$h.conf" <<C
Port 2222
HostKey $work/ssh/host_key
AuthorizedKeysFile $work/ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PrintMotd no
PidFile $work/ssh/$h.pid
C
  # Each host's home is its own empty directory, mounted over this user's home in a
  # mount namespace of sshd's (so of every session it starts): the machine's own
  # dotfiles are not the cluster's. A shell that ran them could wait there for ever
  # (pyenv's rehash waits 60 s on a lock that a killed session left behind: every
  # ssh login, and so every commnode start, then outlasted the start-up time-out).
  mkdir -m 700 "$work/home/$h"
  ip netns exec "${ns[$h]}" unshare --uts --mount sh -c \
    'mount --bind "$3" "$4" && hostname "$0" && exec /usr/sbin/sshd -f "$1" -E "$2"' \
    "$h" "$work/ssh/$h.conf" "$work/ssh/$h.log" "$work/home/$h" "$user_home" || fail "sshd did not start on $h"
done
ssh_opts=(-p 2222 -i "$work/ssh/id" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR)
for h in "${hosts[@]}"; do
  # sshd writes its pid file once it listens.
  for _ in $(seq 100); do [ -s "$work/ssh/$h.pid" ] && break; sleep 0.05; done
  [ -s "$work/ssh/$h.pid" ] || fail "sshd of $h wrote no pid file"
  # From login, as the front-end will: the name resolves, ssh gets in, the host is itself.
  got="$(ip netns exec "$NETNS_LOGIN" ssh "${ssh_opts[@]}" "$h" hostname </dev/null 2>&1)" ||
    fail "ssh from login to $h failed: $got"
  [ "$got" = "$h" ] || fail "ssh from login to $h reached '$got'"
done
launcher="ssh ${ssh_opts[*]} {host} {command}"

cat >"$work/tree.yaml" <<T
nodes:
  - {rank: 1000000, role: frontend, host: login}
  - {rank: 1000001, role: commnode, host: h1}
  - {rank: 1000002, role: commnode, host: h2}
  - {rank: 1000003, role: commnode, host: h3}
  - {rank: 0, role: backend, host: h1}
  - {rank: 1, role: backend, host: h1}
  - {rank: 2, role: backend, host: h2}
  - {rank: 3, role: backend, host: h2}
  - {rank: 4, role: backend, host: h3}
  - {rank: 5, role: backend, host: h3}
edges:
  - {parent: 1000000, children: [1000001, 1000002, 1000003]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2, 3]}
  - {parent: 1000003, children: [4, 5]}
T

# While the run is up: every canopy process of every host, as "HOST RANK COMM" lines
# in $work/seen (RANK from its environment, "-" for the front-end), and in hosts mode
# the canopy sockets listening on every host (login too), in $work/listen-HOST.
# A process's host is the namespace its network namespace is (`-ef`: same inode).
# One pass reads /proc with the shell's builtins and forks nothing a process: beside
# other tests, a pass that forked a few commands a process (`ip netns pids`, `cat`,
# `tr`) took longer than a back-end lives, and missed it.
sampler() {
  local h p pid comm rank entry
  local -a environ
  while :; do
    for p in /proc/[0-9]*; do
      read -r comm 2>/dev/null <"$p/comm" || continue
      case "$comm" in canopy*) ;; *) continue ;; esac
      for h in login "${hosts[@]}"; do
        [[ "$p/ns/net" -ef "/run/netns/${ns[$h]}" ]] || continue
        # A process gone since its name was read has no environ to open, and a failed
        # redirection runs no mapfile: the array would still hold the last process's
        # environment, and its rank be written against this one's host.
        rank=""
        environ=()
        mapfile -d '' environ 2>/dev/null <"$p/environ" || continue
        for entry in "${environ[@]}"; do
          case "$entry" in CANOPY_RANK=*) rank="${entry#CANOPY_RANK=}" ;; esac
        done
        # A process caught as it starts may show no environment yet: seen next time.
        [ -n "$rank" ] || [ "$comm" = canopy ] || continue
        echo "$h ${rank:--} $comm"
      done
    done >>"$work/seen"
    if [ "$mode" = hosts ]; then
      for h in login "${hosts[@]}"; do
        ip netns exec "${ns[$h]}" ss -ltnpH 2>/dev/null | grep '"canopy' >>"$work/listen-$h" || true
      done
    fi
    sleep 0.1
  done
}
sampler &
sampler_pid=$!
netns_on_exit "kill $sampler_pid 2>/dev/null || true"

how=(--topology "$work/tree.yaml")
duration=2
# shellcheck disable=SC2054  # h1,h2,h3 is one argument
case "$mode" in
  hosts) how=(--tree 'b:3^2' --hosts h1,h2,h3 --print-placement --ports 41000-41099) ;;
  heal) how+=(--heartbeat 100 --suspect 300 --lost 800); duration=4 ;;
esac
if [ "$mode" = heal ]; then
  # The kill waits for the workload: a back-end of h2 has recorded a value.
  (
    until [ -s "$work/record/be-2.txt" ]; do sleep 0.1; done
    sleep 1
    for pid in $(ip netns pids "$NETNS_H2"); do
      case "$(cat "/proc/$pid/comm" 2>/dev/null)" in canopy-commnod*) ;; *) continue ;; esac
      if tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qx 'CANOPY_RANK=1000002'; then
        kill -KILL "$pid" && echo "$pid" >"$work/killed"
      fi
    done
  ) &
  netns_on_exit "kill $! 2>/dev/null || true"
fi

status=0
start=$(date +%s%N)
# A start-up time-out of 30 s, not 10: ssh logins beside other tests are slow.
# In the background, so that the deadline's signal is taken at once (bash runs a trap
# only once a foreground command is over, but interrupts `wait`).
ip netns exec "$NETNS_LOGIN" unshare --uts sh -c 'hostname login; exec "$@"' login \
  "$bin/canopy" run "${how[@]}" --launcher "$launcher" --startup-timeout 30000 --log-dir "$work/logs" \
  --workload union --duration "$duration" --record "$work/record" >"$work/out" 2>"$work/err" &
wait $! || status=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
kill "$sampler_pid" 2>/dev/null || true
wait "$sampler_pid" 2>/dev/null || true
sort -u "$work/seen" -o "$work/seen"

[ "$status" = 0 ] || fail "canopy run over ssh ($mode) exited with status $status after $elapsed_ms ms"
grep -q "check: ok" "$work/out" || fail "the union did not check out"

# host_of RANK: the hosts RANK was seen on, space-separated.
host_of() { awk -v r="$1" '$2 == r { print $1 }' "$work/seen" | sort -u | tr '\n' ' ' | sed 's/ $//'; }
[ "$(grep '^login ' "$work/seen")" = "login - canopy" ] ||
  fail "login did not run the front-end alone: $(cat "$work/seen")"
if [ "$mode" = hosts ]; then
  [ -s "$work/listen-login" ] || fail "the front-end was not seen listening on login"
  bad="$(awk '{ n = split($4, a, ":"); p = a[n] + 0; if (p < 41000 || p > 41099) print }' "$work/listen-login" | sort -u)"
  [ -z "$bad" ] || fail "on login the front-end listened outside 41000-41099: $bad"
  for h in "${hosts[@]}"; do
    grep -qw -- "$h" "$work/err" || fail "--print-placement does not name $h"
    commnodes="$(awk -v h="$h" '$1 == h && $3 == "canopy-commnode" { print $2 }' "$work/seen" | sort -u | wc -l)"
    others="$(awk -v h="$h" '$1 == h && $3 != "canopy-commnode" { print $2 }' "$work/seen" | sort -u | wc -l)"
    [ "$commnodes.$others" = 1.3 ] ||
      fail "$h ran $commnodes commnodes and $others back-ends, expected 1 and 3: $(cat "$work/seen")"
    [ -s "$work/listen-$h" ] || fail "no canopy process was seen listening on $h"
    # Local address:port is ss's 4th field; the port follows the last colon.
    bad="$(awk '{ n = split($4, a, ":"); p = a[n] + 0; if (p < 41000 || p > 41099) print }' "$work/listen-$h" | sort -u)"
    [ -z "$bad" ] || fail "on $h canopy listened outside 41000-41099: $bad"
    bad="$(grep '"canopy-commnod' "$work/listen-$h" | awk '{ print $4 }' | sort -u |
      grep -vE "^(${addr[$h]//./\\.}|0\.0\.0\.0|\*|\[::\]|\[::ffff:${addr[$h]//./\\.}\]):[0-9]+$" || true)"
    [ -z "$bad" ] || fail "on $h a commnode listened on $bad, not on ${addr[$h]} or a wildcard"
  done
else
  for rank in 1000001:h1 1000002:h2 1000003:h3 0:h1 1:h1 2:h2 3:h2 4:h3 5:h3; do
    where="$(host_of "${rank%%:*}")"
    [ "$where" = "${rank#*:}" ] || fail "process ${rank%%:*} ran on '${where}', expected ${rank#*:}: $(cat "$work/seen")"
  done
fi
if [ "$mode" = heal ]; then
  [ -s "$work/killed" ] || fail "no commnode 1000002 was found on h2 to kill"
  grep -q "^event: failure of 1000002" "$work/out" || fail "the commnode's loss was not reported"
  for orphan in 2 3; do
    adopter="$(sed -n "s/^event: $orphan recovered under \([0-9]*\).*/\1/p" "$work/out" | tail -n 1)"
    [ -n "$adopter" ] || fail "back-end $orphan was not adopted"
    # By a commnode of h1 or h3, its first potential adopters: the front-end, which
    # chooses its reachable address itself, is only the last resort of a back-end that
    # could reach neither (issue 49: they listened on their hosts' 127.0.1.1).
    unreachable="$(grep "cannot reach potential adopter" "$work/logs/backend-$orphan.log" || true)"
    [ -z "$unreachable" ] || fail "back-end $orphan could not reach a commnode of another host: $unreachable"
    case "$adopter" in 1000001 | 1000003) ;; *) fail "back-end $orphan was adopted by $adopter, not by the commnode of h1 or h3" ;; esac
  done
  lost="$(grep "^event: failure of" "$work/out" | grep -v "failure of 1000002" || true)"
  [ -z "$lost" ] || fail "other processes were reported lost: $lost"
fi

# Nothing left: each host back to its sshd alone (the ssh sessions ended), then no
# process at all once the sshds are stopped, and none anywhere (the root namespace
# included) naming this run's directory.
for _ in $(seq 50); do
  left="$(
    for h in "${hosts[@]}"; do ip netns pids "${ns[$h]}" | grep -vx "$(cat "$work/ssh/$h.pid")"; done
    ip netns pids "$NETNS_LOGIN"
  )" || true
  [ -z "$left" ] && break
  sleep 0.1
done
[ -z "$left" ] || fail "processes were left after the run: $(for p in $left; do ps -o pid=,args= -p "$p"; done)"
stop_sshds
for _ in $(seq 50); do
  netns_expect_no_processes 2>/dev/null && break
  sleep 0.1
done
netns_expect_no_processes || fail "processes were left after sshd stopped"
for p in /proc/[0-9]*; do
  [ "${p#/proc/}" = $$ ] && continue
  if grep -qF "$work/" "$p/environ" "$p/cmdline" 2>/dev/null; then
    fail "a process of this run was left: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)"
  fi
done
echo "PASS: a tree over ssh on 3 hosts (own name: $own_name), $mode, canopy run took $elapsed_ms ms"
