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
      kill_session "$pid"
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  local status=0
  wait "$pid" || status=$?
  if [ -n "$(session_pids "$pid")" ]; then
    echo "processes left in session $pid after: $* -- killing them" >&2
    ps -o pid=,comm= -p "$(session_pids "$pid" | paste -sd,)" >&2 || true
    kill_session "$pid"
    status=1
  fi
  [ "$status" -eq 0 ] || echo "exit status $status: $* (see $log.log)" >&2
  return 0
}

# A run is started with setsid: its session holds every process of its tree, each
# child in a process group of its own (core/process.cpp), so runs are found and
# ended by session, not by process group (which held only the front-end since
# 2026-11-25, and left chaos.sh injecting no fault at all).
# session_pids SID: the live processes of session SID (zombies have exited), a line each.
session_pids() { ps -e -o pid=,sid=,stat= | awk -v s="$1" '$2 == s && $3 !~ /^Z/ { print $1 }'; }
# kill_session SID: continues and kills every process of session SID.
kill_session() {
  pkill -CONT -s "$1" 2>/dev/null || true
  pkill -KILL -s "$1" 2>/dev/null || true
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
  kill_session "$group"
  wait "$group" 2>/dev/null || true
  group=""
}
own_group_trap() {
  trap end_group EXIT
  trap 'exit 130' INT TERM
}

# The processes below $1 (children, theirs, ...), one pid a line, from one snapshot
# of the process table (fast enough for a thousand processes).
descendants() {
  ps -eo pid=,ppid= | awk -v root="$1" '{ kids[$2] = kids[$2] " " $1 }
    END { n = split(kids[root], queue, " "); for (i = 1; i <= n; i++) { print queue[i];
            m = split(kids[queue[i]], more, " "); for (j = 1; j <= m; j++) queue[++n] = more[j] } }'
}

# plot_two_bars DAT PNG TITLE YLABEL FORMAT A B: a bar chart of DAT's rows ("label
# a b", underscores in labels drawn as spaces, "\n" as a line break), two bars per row
# titled A and B, each with its value printed above it in FORMAT (a printf format,
# e.g. "%.2f"). The key sits in the room left above the bars.
plot_two_bars() {
  local dat=$1 png=$2 title=$3 ylabel=$4 format=$5 a=$6 b=$7
  gnuplot <<GP
set terminal pngcairo size 1000,560 noenhanced
set output "$png"
set title "$title"
set ylabel "$ylabel"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics
set yrange [0:*]
set offsets 0, 0, graph 0.25, 0
set key top left
set bmargin 5
set xtics scale 0
plot "$dat" using 2:xtic(system("echo '".stringcolumn(1)."' | tr _ ' '")) title "$a", "" using 3 title "$b", \\
     "" using (\$0 - 0.15):2:(sprintf("$format", \$2)) with labels offset 0,0.7 font ",9" notitle, \\
     "" using (\$0 + 0.15):3:(sprintf("$format", \$3)) with labels offset 0,0.7 font ",9" notitle
GP
}

# bench_prologue OUT_DIR PROGRAM: makes OUT_DIR and sets $out to its absolute path,
# installs gnuplot if it is missing, builds $CANOPY_BUILD_DIR (default build/) if
# PROGRAM is not in its bin/, and sets $bin to that bin/ and $work to a new
# temporary directory (the caller removes it).
bench_prologue() {
  mkdir -p "$1"
  out=$(cd "$1" && pwd)
  command -v gnuplot >/dev/null || ./scripts/setup.sh
  local build=${CANOPY_BUILD_DIR:-build}
  [ -x "$build/bin/$2" ] || ./scripts/build.sh "$build"
  bin=$(cd "$build/bin" && pwd)
  work=$(mktemp -d)
}

# The launch benchmarks' (slurm_launch.sh, mpirun_launch.sh) common parts.
# launch_tree_yaml F HOST=ADDRESS...: b:F^2 as YAML on stdout, the front-end on the
# first host, commnode i and its F back-ends on host (i - 1) mod (number of hosts).
launch_tree_yaml() {
  local f=$1 i j b=0 kids=""
  shift
  local hosts=("$@") names=()
  echo "hosts:"
  for h in "${hosts[@]}"; do
    names+=("${h%%=*}")
    echo "  - {name: ${h%%=*}, nics: [${h#*=}]}"
  done
  echo "nodes:"
  echo "  - {rank: 1000000, role: frontend, host: ${names[0]}}"
  for ((i = 1; i <= f; i++)); do echo "  - {rank: $((1000000 + i)), role: commnode, host: ${names[(i - 1) % ${#names[@]}]}}"; done
  for ((i = 1; i <= f; i++)); do
    for ((j = 0; j < f; j++)); do echo "  - {rank: $b, role: backend, host: ${names[(i - 1) % ${#names[@]}]}}"; b=$((b + 1)); done
  done
  echo "edges:"
  for ((i = 1; i <= f; i++)); do kids="${kids:+$kids, }$((1000000 + i))"; done
  echo "  - {parent: 1000000, children: [$kids]}"
  b=0
  for ((i = 1; i <= f; i++)); do
    kids=""
    for ((j = 0; j < f; j++)); do kids="${kids:+$kids, }$b"; b=$((b + 1)); done
    echo "  - {parent: $((1000000 + i)), children: [$kids]}"
  done
}
# launch_row LINE: "PROCESSES,SECONDS" from canopy run's "launched 73/73 processes in
# 0.412 s (64 back-ends)".
launch_row() {
  echo "$1" | sed -E 's#launched ([0-9]+)/[0-9]+ processes in ([0-9.]+) s.*#\1,\2#'
}
# launch_series CSV DIR MODE_A MODE_B RUN HOST=ADDRESS...: $reps repetitions, in each
# every fan-out F of $fanouts, b:F^2 over the hosts (launch_tree_yaml, in DIR) run in
# MODE_A then MODE_B by `RUN MODE YAML`, which runs canopy run and prints its output;
# one row tree,mode,rep,processes,launch_s per run in CSV. Exits with canopy run's
# stderr (DIR/err) when a run does not report its launch.
launch_series() {
  local csv=$1 dir=$2 a=$3 b=$4 run=$5 rep f mode yaml line
  shift 5
  echo "tree,mode,rep,processes,launch_s" > "$csv"
  for ((rep = 1; rep <= reps; rep++)); do
    for f in $fanouts; do
      yaml="$dir/b$f.yaml"
      launch_tree_yaml "$f" "$@" > "$yaml"
      for mode in "$a" "$b"; do
        line=$("$run" "$mode" "$yaml" 2>"$dir/err" | grep -m1 "^launched") ||
          { echo "${csv##*/}: b:$f^2 $mode failed: $(cat "$dir/err")" >&2; exit 1; }
        echo "b:$f^2,$mode,$rep,$(launch_row "$line")" >> "$csv"
      done
    done
  done
}
# launch_medians CSV MODE_A MODE_B FANOUTS: per tree, "b:F^2,_N_processes A B" (the
# medians in ms of CSV's rows tree,mode,rep,processes,launch_s), for plot_two_bars.
launch_medians() {
  local csv=$1 a=$2 b=$3 f
  for f in $4; do
    echo "b:${f}^2,_$(awk -F, -v t="b:$f^2" '$1 == t { print $4; exit }' "$csv")_processes" \
      "$(awk -F, -v t="b:$f^2" -v m="$a" '$1 == t && $2 == m { print $5 * 1000 }' "$csv" | median)" \
      "$(awk -F, -v t="b:$f^2" -v m="$b" '$1 == t && $2 == m { print $5 * 1000 }' "$csv" | median)"
  done
}
