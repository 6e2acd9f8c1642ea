#!/usr/bin/env bash
# One MRNet-API program linked against Canopy's MRNet layer and against MRNet 5.0.1,
# side by side with Canopy's native API on the same trees.
#
#   bench/mrnet_api.sh [--reps N] [--mrnet-prefix DIR] BUILD_DIR OUT_DIR
#     --reps N            repetitions (default 3); in each, every tree is run by each
#                         system in turn (layer, layer-lw, MRNet, MRNet-lw, native,
#                         layer-lean, native-dyn, layer-lw-lean),
#                         so that all see the same machine in the same minute
#     --mrnet-prefix DIR  an MRNet 5.0.1 installation (its include/, lib/ and
#                         bin/mrnet_commnode): bench/mrnet_api_bench{,_be}.cpp and
#                         the lightweight back-end bench/mrnet_api_bench_lw.c are
#                         compiled against it into OUT_DIR/mrnet-bin; without it, no
#                         MRNet runs
#     BUILD_DIR           Canopy's build tree: bin/canopy-mrnet-bench,
#                         canopy-mrnet-bench-be, canopy-mrnet-bench-lw,
#                         canopy-mrnet-bench-be-lean, canopy-mrnet-bench-lw-lean,
#                         canopy-bench, canopy-demo-backend-dynamic
#                         (built if missing) and
#                         lib/libcanopy_mrnet.so with its filter plug-in
#                         canopy_mrnet_filters.so beside it (or named by
#                         $CANOPY_MRNET_FILTERS)
#
# Systems: "layer" and "layer-lw" are the MRNet-API front-end on Canopy's MRNet layer
# with the C++ back-end (Canopy::mrnet) and the lightweight C back-end
# (Canopy::mrnet_lightweight); "mrnet" and "mrnet-lw" the same sources on MRNet 5.0.1
# (libmrnet, libmrnet_lightweight); "native" is canopy-bench on Canopy's own API;
# "layer-lean" the layer's C++ back-end linked lean (Canopy::mrnet_static with
# canopy_lean_program: canopy-mrnet-bench-be-lean; docs/packaging.md), "layer-lw-lean"
# its lightweight C back-end linked so (Canopy::mrnet_lightweight_static). Canopy's
# back-ends (canopy-demo-backend) are linked lean too; "native-dyn" is canopy-bench
# with canopy-demo-backend-dynamic, the same back-end on shared libraries, as the
# layer's on libcanopy_mrnet.so are: layer/native-dyn is what the layer costs with
# the linking alike on both sides.
# Trees (MRNet's format, every process on localhost; Canopy's native spec alike):
#   1x2x4 = b:2^2 (2 commnodes, 4 back-ends), 4x4 = b:4^2 (4, 16), 16x16 = b:16^2 (16, 256)
# Measures: instantiate (CreateNetworkFE / Network::launch until it returns), the
# first round trip after it (new_Stream included; MRNet API only), round trip (median
# of 300 after 50 warm-up; one int down a sum stream and its sum up, canopy-bench's
# 4 B payload for the native API), reduce throughput (waves/s, 3 runs of 2,000 waves, 500 on
# 16x16). Each program instantiates once per run, in a fresh process: canopy-bench
# runs with --quick --instantiations 1 (its first launch, cold, as the MRNet programs'
# one CreateNetworkFE; later launches in the same process are faster).
#
#   OUT_DIR/mrnet_api.csv    per tree, system and measure: median over the repetitions
#                            of each run's median, min and max of those, p10 and p90
#                            (medians over the runs), number of runs
#   OUT_DIR/mrnet_api.png    one panel per measure, grouped bars per tree (log scale)
#   OUT_DIR/summary.txt      the table and the ratios to native, native-dyn and MRNet
#   OUT_DIR/runs/            every run's CSV, stderr and load average
#
# Settings (environment): MRNET_API_TREES (default "1x2x4 4x4 16x16"),
# MRNET_API_RUN_LIMIT_S (240: each run is killed after that), MRNET_API_PLOT_ONLY=1
# (the CSV, summary and figure again from OUT_DIR/runs, without running). --reps 5
# took 3.5 minutes on 2 cores with MRNet. Every run is in a session of its own, killed on
# the way out; at the end the script looks for any commnode or back-end of its own
# still alive, kills it and says so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"

usage() { sed -n '5,17p' "$0" >&2; exit 2; }
reps=3 prefix="" positional=()
while [ $# -gt 0 ]; do
  case $1 in
    --reps) [ $# -ge 2 ] || usage; reps=$2; shift 2 ;;
    --mrnet-prefix) [ $# -ge 2 ] || usage; prefix=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) usage ;;
    *) positional+=("$1"); shift ;;
  esac
done
[ ${#positional[@]} -eq 2 ] || usage
[[ $reps =~ ^[1-9][0-9]*$ ]] || usage
build=$(cd "${positional[0]}" && pwd)
mkdir -p "${positional[1]}"
out=$(cd "${positional[1]}" && pwd)
trees=${MRNET_API_TREES:-1x2x4 4x4 16x16}
limit=${MRNET_API_RUN_LIMIT_S:-240}
plot_only=${MRNET_API_PLOT_ONLY:-0}
command -v gnuplot >/dev/null || { echo "bench/mrnet_api.sh: gnuplot is not installed (scripts/setup.sh)" >&2; exit 1; }

# name -> fan-outs below the front-end, Canopy's spec, back-ends, waves per throughput run
tree_fanouts() { case $1 in 1x2x4) echo "2 2" ;; 4x4) echo "4 4" ;; 16x16) echo "16 16" ;; *) return 1 ;; esac; }
tree_spec() { case $1 in 1x2x4) echo "b:2^2" ;; 4x4) echo "b:4^2" ;; 16x16) echo "b:16^2" ;; esac; }
tree_backends() { local n=1 f; for f in $(tree_fanouts "$1"); do n=$((n * f)); done; echo "$n"; }
tree_waves() { [ "$(tree_backends "$1")" -gt 100 ] && echo 500 || echo 2000; }
for t in $trees; do tree_fanouts "$t" >/dev/null || { echo "bench/mrnet_api.sh: unknown tree $t" >&2; exit 2; }; done
all_systems="layer layer-lw mrnet mrnet-lw native layer-lean native-dyn layer-lw-lean"
systems="layer layer-lw"
[ -n "$prefix" ] && systems="$systems mrnet mrnet-lw"
systems="$systems native layer-lean native-dyn layer-lw-lean"
system_label() {
  case $1 in
    layer) echo "Canopy's MRNet layer, C++ back-ends" ;; layer-lw) echo "Canopy's MRNet layer, lightweight C back-ends" ;;
    mrnet) echo "MRNet 5.0.1, C++ back-ends" ;; mrnet-lw) echo "MRNet 5.0.1, lightweight C back-ends" ;;
    native) echo "Canopy native API, back-ends linked lean" ;;
    layer-lean) echo "Canopy's MRNet layer, C++ back-ends linked lean" ;;
    native-dyn) echo "Canopy native API, back-ends on shared libraries" ;;
    layer-lw-lean) echo "Canopy's MRNet layer, lightweight C back-ends linked lean" ;;
  esac
}

bin="$build/bin"
mrnet_bin="$out/mrnet-bin"
mkdir -p "$out/runs" "$out/topologies"

# ---- the programs ----
if [ "$plot_only" != 1 ]; then
  if [ ! -x "$bin/canopy-mrnet-bench" ] || [ ! -x "$bin/canopy-mrnet-bench-be" ] ||
     [ ! -x "$bin/canopy-mrnet-bench-lw" ] || [ ! -x "$bin/canopy-mrnet-bench-be-lean" ] ||
     [ ! -x "$bin/canopy-mrnet-bench-lw-lean" ] || [ ! -x "$bin/canopy-bench" ] ||
     [ ! -x "$bin/canopy-demo-backend-dynamic" ]; then
    cmake --build "$build" -j1 --target canopy-mrnet-bench canopy-bench
  fi
  filters=${CANOPY_MRNET_FILTERS:-$build/lib/canopy_mrnet_filters.so}
  if [ ! -f "$filters" ]; then
    echo "bench/mrnet_api.sh: no MRNet filter plug-in at $filters: TFILTER_SUM cannot run in Canopy's layer" \
      "(build the target canopy_mrnet_filters, or name one with CANOPY_MRNET_FILTERS)" >&2
    exit 1
  fi
  export CANOPY_MRNET_FILTERS=$filters
  if [ -n "$prefix" ]; then
    prefix=$(cd "$prefix" && pwd)
    [ -x "$prefix/bin/mrnet_commnode" ] || { echo "bench/mrnet_api.sh: no $prefix/bin/mrnet_commnode" >&2; exit 1; }
    # MRNet installs mrnet_config.h and xplat_config.h in directories of their own.
    includes=(-I"$prefix/include")
    for h in mrnet_config.h xplat_config.h; do
      found=$(find "$prefix" -name "$h" -print -quit)
      [ -n "$found" ] || { echo "bench/mrnet_api.sh: no $h under $prefix" >&2; exit 1; }
      includes+=(-I"$(dirname "$found")")
    done
    mkdir -p "$mrnet_bin"
    # -Dos_linux as MRNet builds its own tools; an RPATH rather than a RUNPATH
    # (--disable-new-dtags), because libmrnet.so finds libxplat.so through it too.
    for prog in mrnet_api_bench mrnet_api_bench_be; do
      name=canopy-mrnet-bench
      [ "$prog" = mrnet_api_bench_be ] && name=canopy-mrnet-bench-be
      g++ -std=c++17 -O2 -g -Dos_linux "${includes[@]}" -o "$mrnet_bin/$name" "$here/$prog.cpp" \
        -L"$prefix/lib" -Wl,--disable-new-dtags,-rpath,"$prefix/lib" -lmrnet -lxplat -lpthread -ldl
    done
    gcc -std=gnu99 -O2 -g -Dos_linux "${includes[@]}" -o "$mrnet_bin/canopy-mrnet-bench-lw" "$here/mrnet_api_bench_lw.c" \
      -L"$prefix/lib" -Wl,--disable-new-dtags,-rpath,"$prefix/lib" -lmrnet_lightweight -lxplat_lightweight -lpthread -ldl -lm
    # MRNet starts its commnodes from this path, and, on localhost, forks them (and
    # they their back-ends) without a remote shell.
    export MRNET_COMM_PATH="$prefix/bin/mrnet_commnode"
  fi
fi

# MRNet's topology format: "host:instance => child child ... ;", the front-end first.
mrnet_topology() {
  awk -v spec="$*" 'BEGIN {
    levels = split(spec, fan, " "); next_id = 1; n = 1; parent[1] = 0
    for (l = 1; l <= levels; l++) {
      m = 0
      for (i = 1; i <= n; i++) {
        line = "localhost:" parent[i] " =>"
        for (c = 1; c <= fan[l]; c++) { child[++m] = next_id; line = line " localhost:" next_id++ }
        print line " ;"
      }
      n = m
      for (i = 1; i <= n; i++) parent[i] = child[i]
    }
  }'
}

# ---- the runs ----
# run_tree LOG COMMAND...: COMMAND in a session of its own, its stdout to LOG.csv,
# stderr to LOG.log, the load average before it to LOG.loadavg; killed after $limit
# seconds. A tree may outlive its front-end for a moment (MRNet's commnodes and
# back-ends shut down after the front-end has gone): the session gets up to $drain
# seconds to end, how long it took goes to LOG.drain (seconds), and whatever is still
# there then is killed, by pid, and reported. Always returns 0.
drain=20
trap kill_bounded_groups EXIT  # bench/lib.sh: kills every session's group on the way out
trap 'exit 130' INT TERM
run_tree() {
  local log=$1
  shift
  cut -d' ' -f1-3 /proc/loadavg > "$log.loadavg"
  setsid "$@" > "$log.csv" 2> "$log.log" &
  local pid=$! waited=0 status=0 drained=0
  groups+=("$pid")
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$waited" -ge $((limit * 10)) ]; then
      echo "run over $limit s, killed: $*" >&2
      kill -KILL -- "-$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  wait "$pid" || status=$?
  while pgrep -s "$pid" >/dev/null && [ "$drained" -lt $((drain * 10)) ]; do
    sleep 0.1
    drained=$((drained + 1))
  done
  awk -v d="$drained" 'BEGIN { print d / 10 }' > "$log.drain"
  local left
  left=$(pgrep -s "$pid" || true)
  if [ -n "$left" ]; then
    echo "processes of $* still alive $drain s after it ended, killed:" >&2
    ps -o pid=,args= -p "$(paste -sd, <<< "$left")" >&2 || true
    xargs -r kill -KILL <<< "$left" 2>/dev/null || true
  fi
  [ "$status" -eq 0 ] || echo "exit status $status: $* (see $log.log)" >&2
  return 0
}

# One run: SYSTEM TREE REP; its CSV in runs/REP-TREE-SYSTEM.csv (rows of canopy-bench's
# columns), stderr in .log.
run_one() {
  local system=$1 tree=$2 rep=$3
  local log="$out/runs/$rep-$tree-$system" topo="$out/topologies/$tree.top"
  local common=(--name "$tree" --backends "$(tree_backends "$tree")" --waves "$(tree_waves "$tree")"
    --timeout $((limit - 10)))
  case $system in
    layer) run_tree "$log" "$bin/canopy-mrnet-bench" "${common[@]}" "$topo" "$bin/canopy-mrnet-bench-be" ;;
    layer-lw) run_tree "$log" "$bin/canopy-mrnet-bench" "${common[@]}" "$topo" "$bin/canopy-mrnet-bench-lw" ;;
    layer-lean) run_tree "$log" "$bin/canopy-mrnet-bench" "${common[@]}" "$topo" "$bin/canopy-mrnet-bench-be-lean" ;;
    layer-lw-lean) run_tree "$log" "$bin/canopy-mrnet-bench" "${common[@]}" "$topo" "$bin/canopy-mrnet-bench-lw-lean" ;;
    mrnet) run_tree "$log" "$mrnet_bin/canopy-mrnet-bench" "${common[@]}" "$topo" "$mrnet_bin/canopy-mrnet-bench-be" ;;
    mrnet-lw) run_tree "$log" "$mrnet_bin/canopy-mrnet-bench" "${common[@]}" "$topo" "$mrnet_bin/canopy-mrnet-bench-lw" ;;
    native) run_tree "$log" "$bin/canopy-bench" --quick --instantiations 1 --topologies "$(tree_spec "$tree")" ;;
    native-dyn) run_tree "$log" "$bin/canopy-bench" --quick --instantiations 1 --topologies "$(tree_spec "$tree")" \
      --backend canopy-demo-backend-dynamic ;;
  esac
  local rows
  rows=$(awk -F, 'NR > 1 && $1 != "raw_tcp_roundtrip" && $1 != "ratio"' "$log.csv" | wc -l)
  echo "  rep $rep $tree $system: $rows rows, tree gone $(cat "$log.drain") s after, $(( ($(now_ms) - started) / 1000 )) s since start" >&2
}

# Processes of ours still alive: in one of our sessions, or our programs by path.
leftovers() {
  local sids=" ${groups[*]:-} "
  ps -e -o pid=,sid=,args= | while read -r pid sid args; do
    [ "$pid" = "$$" ] && continue
    if [[ $sids == *" $sid "* ]] || [[ $args == "$bin/canopy-commnode"* ]] ||
       [[ $args == "$bin/canopy-demo-backend"* ]] || [[ $args == "$bin/canopy-mrnet-bench"* ]] ||
       [[ $args == "$mrnet_bin/"* ]] || { [ -n "$prefix" ] && [[ $args == "$prefix/bin/mrnet_commnode"* ]]; }; then
      echo "$pid $args"
    fi
  done
}

if [ "$plot_only" != 1 ]; then
  rm -f "$out"/runs/*
  for t in $trees; do mrnet_topology "$(tree_fanouts "$t")" > "$out/topologies/$t.top"; done
  started=$(now_ms)
  echo "bench/mrnet_api.sh: $reps repetition(s) of $trees by $systems ..." >&2
  for rep in $(seq 1 "$reps"); do
    for t in $trees; do
      for s in $systems; do run_one "$s" "$t" "$rep"; done
    done
  done
  left=$(leftovers)
  if [ -n "$left" ]; then
    echo "bench/mrnet_api.sh: processes of this run were still alive at the end, killed:" >&2
    echo "$left" >&2
    awk '{ print $1 }' <<< "$left" | xargs -r kill -KILL 2>/dev/null || true
  else
    echo "bench/mrnet_api.sh: no process of this run is left" >&2
  fi
fi

# ---- medians over the runs ----
# measure -> benchmark and metric of each program's CSV
csv="$out/mrnet_api.csv"
echo "topology,canopy_spec,backends,system,measure,unit,median,run_min,run_max,p10,p90,runs" > "$csv"
for t in $trees; do
  for s in $all_systems; do
    for m in instantiate first_roundtrip roundtrip throughput; do
      case $m in
        instantiate) key="instantiate,create_network_fe" unit=ms
          [[ $s == native* ]] && key="instantiate,launch_time" ;;
        first_roundtrip) key="instantiate,new_stream_and_first_roundtrip" unit=ms
          [[ $s == native* ]] && continue ;;
        roundtrip) key="roundtrip,broadcast_reduce_latency" unit=us ;;
        throughput) key="throughput,reduce_waves_per_second" unit=waves/s ;;
      esac
      # benchmark,topology,payload_bytes,metric,median,p10,p90,unit,samples; native: 4 B,
      # one int32 down and its sum up, as the MRNet programs' "%d"
      rows=$(cat "$out"/runs/*-"$t-$s".csv 2>/dev/null |
        awk -F, -v k="$key" -v s="$s" '$1 "," $4 == k && (s !~ /^native/ || $1 != "roundtrip" || $3 == 4)' || true)
      [ -n "$rows" ] || continue
      col() { cut -d, -f"$1" <<< "$rows" | median; }
      runs=$(wc -l <<< "$rows")
      min=$(cut -d, -f5 <<< "$rows" | sort -g | head -1)
      max=$(cut -d, -f5 <<< "$rows" | sort -g | tail -1)
      echo "$t,$(tree_spec "$t"),$(tree_backends "$t"),$s,$m,$unit,$(col 5),$min,$max,$(col 6),$(col 7),$runs" >> "$csv"
    done
  done
done

# ---- summary: the table and the ratios ----
value() { awk -F, -v t="$1" -v s="$2" -v m="$3" '$1 == t && $4 == s && $5 == m { print $7 }' "$csv"; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo "-"; }
show() { [ -n "$1" ] && awk -v v="$1" 'BEGIN { printf (v >= 100 ? "%.0f" : "%.3g"), v }' || echo "-"; }
{
  echo "medians over the runs ($(awk -F, 'NR > 1 { print $12 }' "$csv" | sort -n -u | paste -sd/ -) runs), load average before the first: $(cat "$out"/runs/1-*-layer.loadavg 2>/dev/null | head -1)"
  echo "(-lw: lightweight C back-ends; -lean: back-ends linked lean, Canopy::mrnet_static or mrnet_lightweight_static;"
  echo " native: back-ends linked lean; native-dyn: the same on shared libraries, as the layer's on libcanopy_mrnet.so)"
  echo "tree | measure | Canopy MRNet layer | layer-lw | layer-lean | layer-lw-lean | MRNet 5.0.1 | MRNet-lw | Canopy native | native-dyn | layer/native | layer-lean/native | layer-lw-lean/native | layer/native-dyn | layer-lw/native-dyn | layer/MRNet | layer-lw/MRNet-lw | layer-lean/MRNet-lw | layer-lw-lean/MRNet-lw"
  for t in $trees; do
    for m in instantiate first_roundtrip roundtrip throughput; do
      l=$(value "$t" layer "$m") ll=$(value "$t" layer-lw "$m") r=$(value "$t" mrnet "$m") rl=$(value "$t" mrnet-lw "$m")
      le=$(value "$t" layer-lean "$m") lwe=$(value "$t" layer-lw-lean "$m")
      n=$(value "$t" native "$m") nd=$(value "$t" native-dyn "$m")
      unit=$(awk -F, -v t="$t" -v m="$m" '$1 == t && $5 == m { print $6; exit }' "$csv")
      echo "$t | $m ($unit) | $(show "$l") | $(show "$ll") | $(show "$le") | $(show "$lwe") | $(show "$r") | $(show "$rl") | $(show "$n") | $(show "$nd") | $(ratio "$l" "$n") | $(ratio "$le" "$n") | $(ratio "$lwe" "$n") | $(ratio "$l" "$nd") | $(ratio "$ll" "$nd") | $(ratio "$l" "$r") | $(ratio "$ll" "$rl") | $(ratio "$le" "$rl") | $(ratio "$lwe" "$rl")"
    done
  done
} | tee "$out/summary.txt"

# ---- the figure: one panel per measure, bars grouped by tree ----
# The systems with figures, in the order of $all_systems; each keeps its colour
# (its place in $all_systems) whichever are present.
present=()
for s in $all_systems; do
  awk -F, -v s="$s" 'NR > 1 && $4 == s { found = 1 } END { exit !found }' "$csv" && present+=("$s")
done
group=$(( ${#present[@]} + 1 ))
colour() { local k=1 s; for s in $all_systems; do [ "$s" = "$1" ] && echo "$k" && return; k=$((k + 1)); done; }
# Each .dat line: x, median, run_min, run_max, colour, label
read -r -a tree_list <<< "$trees"
xtics=""
for i in "${!tree_list[@]}"; do
  t=${tree_list[$i]}
  xtics="$xtics${xtics:+, }\"$t\\n$(tree_spec "$t"), $(tree_backends "$t") BEs\" $((i * group + (group - 2) / 2))"
done
for m in instantiate first_roundtrip roundtrip throughput; do
  : > "$out/plot-$m.dat"
  for i in "${!tree_list[@]}"; do
    j=0
    for s in "${present[@]}"; do
      awk -F, -v t="${tree_list[$i]}" -v s="$s" -v m="$m" -v x=$((i * group + j)) -v c="$(colour "$s")" '
        $1 == t && $4 == s && $5 == m {
          # three significant digits at most: 0.62, 21, 728, 8235, 15.7k, 229k
          v = $7; label = (v >= 10 ? sprintf("%.0f", v) : sprintf("%.2g", v))
          if (v >= 10000) label = (v >= 100000 ? sprintf("%.0fk", v / 1000) : sprintf("%.1fk", v / 1000))
          print x, v, $8, $9, c, label }' "$csv" >> "$out/plot-$m.dat"
      j=$((j + 1))
    done
  done
done
legend=""
for s in "${present[@]}"; do legend="$legend, NaN with boxes lc $(colour "$s") title \"$(system_label "$s")\""; done
panel() {  # title, ylabel, measure[, key]: bars from a decade below the smallest value
  # Room above the bars for the labels, and for the legend in its panel.
  local lo hi keys="" key_line="unset key" room=6
  if [ "${4:-}" = key ]; then
    key_line='set key top left font ",10" opaque box' keys=$legend room=40
  fi

  lo=$(awk 'NR == 1 || $3 < m { m = $3 } END { if (NR == 0 || m <= 0) m = 1; print 10 ^ (int(log(m / 2) / log(10) + 100) - 100) }' "$out/plot-$3.dat")
  hi=$(awk -v r="$room" 'NR == 1 || $4 > m { m = $4 } END { if (NR == 0) m = 10; print m * r }' "$out/plot-$3.dat")
  cat <<GP
$key_line
set title "$1"
set ylabel "$2"
set yrange [$lo:$hi]
plot "$out/plot-$3.dat" using 1:2:(\$1 - 0.45):(\$1 + 0.45):($lo):2:5 with boxxyerror lc variable notitle, \\
     "" using 1:3:(0):(\$4 - \$3) with vectors nohead lw 1.5 lc rgb "black" notitle, \\
     "" using 1:4:6 with labels font ",8" offset 0,0.8 notitle$keys
GP
}
last_x=$(( (${#tree_list[@]} - 1) * group + group - 1 ))
runs_done=$(awk -F, 'NR > 1 && $12 > n { n = $12 } END { print n + 0 }' "$csv")
cat > "$out/mrnet_api.gp" <<GP
set terminal pngcairo size 2100,1250 noenhanced font ",12"
set output "$out/mrnet_api.png"
set linetype 1 lc rgb "#3b75af"
set linetype 2 lc rgb "#9cc3e6"
set linetype 3 lc rgb "#d1495b"
set linetype 4 lc rgb "#f0a3ad"
set linetype 5 lc rgb "#5aa05a"
set linetype 6 lc rgb "#1d3f63"
set linetype 7 lc rgb "#a6d49f"
set linetype 8 lc rgb "#8e6bbf"
set style fill solid 0.75 border rgb "black"
set multiplot layout 2,2 title "The same MRNet-API program on Canopy's MRNet layer and on MRNet 5.0.1, and Canopy's native API (localhost, 2 cores)\nmedian of $runs_done run(s), interleaved; whiskers: min-max of the runs' medians; log scale" font ",13"
set logscale y
set grid ytics mytics
set xtics ($xtics)
set xrange [-0.8:$last_x - 0.2]
set bmargin 4
$(panel "instantiate: until CreateNetworkFE / Network::launch returns (lower is better)" "milliseconds" instantiate key)
$(panel "then new_Stream + first round trip (MRNet API only; lower is better)" "milliseconds" first_roundtrip)
$(panel "round trip: one int down, its sum up (median of 300; lower is better)" "microseconds" roundtrip)
set format y "%.0s%c"
$(panel "reduce throughput: back-ends stream waves of one int (higher is better)" "waves per second" throughput)
unset multiplot
GP
gnuplot "$out/mrnet_api.gp"
echo "wrote $csv, $out/summary.txt, $out/mrnet_api.png" >&2
