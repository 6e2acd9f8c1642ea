# Shell helpers shared by the benchmark scripts in bench/ (sourced, not run).

# The median of the numbers on standard input, one per line ("" for none).
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Bounded runs, each in a process group of its own. run_bounded LOG COMMAND...: runs
# COMMAND in a new session (setsid), its stdout to LOG.csv, stderr to LOG.log, the load
# average before it to LOG.loadavg; kills its group (continued first: some benchmarks
# stop processes) once it has run $limit seconds, or if anything of it is left after
# it exits; always returns 0 (failures are reported on stderr). Its first call sets an
# EXIT trap that kills every group still running (and makes INT and TERM exit 130).
groups=()
kill_bounded_groups() {
  for g in "${groups[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
}
# run_bounded LOG COMMAND...: COMMAND's stdout to LOG.csv, stderr to LOG.log.
run_bounded() {
  local log=$1
  shift
  if [ -z "${bounded_trap_set:-}" ]; then
    trap kill_bounded_groups EXIT
    trap 'exit 130' INT TERM
    bounded_trap_set=1
  fi
  cut -d' ' -f1-3 /proc/loadavg > "$log.loadavg"  # the machine is shared: how busy it was
  setsid "$@" > "$log.csv" 2> "$log.log" &
  local pid=$! waited=0
  groups+=("$pid")
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge $((limit * 10)) ]; then
      echo "run over ${limit} s, killed: $*" >&2
      kill -CONT -- "-$pid" 2>/dev/null || true
      kill -KILL -- "-$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  local status=0
  wait "$pid" || status=$?
  if pgrep -g "$pid" >/dev/null 2>&1; then
    echo "processes left in group $pid after: $* -- killing them" >&2
    pgrep -a -g "$pid" >&2 || true
    kill -CONT -- "-$pid" 2>/dev/null || true
    kill -KILL -- "-$pid" 2>/dev/null || true
    status=1
  fi
  [ "$status" -eq 0 ] || echo "exit status $status: $* (see $log.log)" >&2
  return 0
}

# now_ms: milliseconds since the epoch.
now_ms() { date +%s%3N; }

# One run at a time in a process group of its own: the script sets $group to the
# group (the leader's pid, started with setsid); own_group_trap makes the exit,
# whatever causes it, continue and kill that group (a run may have stopped
# processes), and INT and TERM exit 130. end_group does the same at once.
group=""
end_group() {
  [ -n "$group" ] || return 0
  kill -CONT -- "-$group" 2>/dev/null || true
  kill -KILL -- "-$group" 2>/dev/null || true
  wait "$group" 2>/dev/null || true
  group=""
}
own_group_trap() {
  trap end_group EXIT
  trap 'exit 130' INT TERM
}
