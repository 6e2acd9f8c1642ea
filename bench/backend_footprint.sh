#!/usr/bin/env bash
# The memory a Canopy back-end costs (issue 20, item 4), launched by its parent and
# attached (docs/attach.md), measured on running processes of a real tree:
#   footprint.csv   mode,metric,value,unit: medians over the back-ends of
#                   VmRSS, RssAnon, RssFile, Pss, Private (smaps_rollup), Threads
#   mappings.csv    what one launched back-end's resident memory is made of, by file
#   footprint.png   resident, proportional and private memory, launched and attached
# Usage: bench/backend_footprint.sh [OUTPUT_DIR] [BACKENDS (default 16)]
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
n=${2:-16}
bench_prologue "${1:-bench-results}" canopy-demo-backend
started=()  # every process this script started; only those are measured or killed
trap 'for p in "${started[@]}"; do kill -KILL "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

# One line per back-end process among the pids given: rss anon file pss private
# threads (kB; threads).
sample() {
  for p in "$@"; do
    [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$bin/canopy-demo-backend" ] || continue
    [ -r "/proc/$p/smaps_rollup" ] || continue
    awk -v pid="$p" '
      FILENAME ~ /status$/ && $1 == "VmRSS:" { rss = $2 }
      FILENAME ~ /status$/ && $1 == "RssAnon:" { anon = $2 }
      FILENAME ~ /status$/ && $1 == "RssFile:" { file = $2 }
      FILENAME ~ /status$/ && $1 == "Threads:" { threads = $2 }
      FILENAME ~ /rollup$/ && $1 == "Pss:" { pss = $2 }
      FILENAME ~ /rollup$/ && ($1 == "Private_Clean:" || $1 == "Private_Dirty:") { priv += $2 }
      END { if (rss) print rss, anon, file, pss, priv, threads }' "/proc/$p/status" "/proc/$p/smaps_rollup" 2>/dev/null || true
  done
}

# Medians of each column of `sample`'s lines, as CSV rows for mode $1.
medians() {
  local mode=$1 file=$2
  local got
  got=$(wc -l < "$file")
  [ "$got" -eq "$n" ] || { echo "backend_footprint: $got of $n back-ends measured ($mode)" >&2; exit 1; }
  local i name unit
  for i in 1 2 3 4 5 6; do
    name=$(echo "rss_kb anon_kb file_kb pss_kb private_kb threads" | cut -d' ' -f$i)
    unit=kB; [ "$name" = threads ] && unit=threads
    sort -n -k$i "$file" | awk -v c=$i '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }' |
      sed "s/^/$mode,${name%_kb},/; s/\$/,$unit/"
  done
}

# Launched: each commnode starts its back-ends (a flat tree of n back-ends under one
# commnode), the union workload running at 100 Hz.
"$bin/canopy" run --tree "b:1x$n" --workload union --rate 100 --duration 4 > "$work/launched.out" 2>&1 &
run=$!
started+=("$run")
sleep 2.5
mapfile -t below < <(descendants "$run")
sample "${below[@]}" > "$work/launched.txt"
p=""
for q in "${below[@]}"; do
  [ "$(readlink "/proc/$q/exe" 2>/dev/null)" = "$bin/canopy-demo-backend" ] && { p=$q; break; }
done
if [ -n "$p" ]; then
  awk '/^[0-9a-f]+-[0-9a-f]+ / { name = ($6 == "" ? "[anonymous]" : $6) } /^Rss:/ { r[name] += $2 }
       END { for (n in r) if (r[n] > 0) print r[n] "," n }' "/proc/$p/smaps" | sort -t, -k1,1 -rn |
    sed "s|$bin/||" > "$work/mappings.txt"
fi
wait "$run"

# Attached: the same tree with `--attach FILE`; the back-ends are started here, as
# an MPI job's ranks would start them, and attach with the file.
"$bin/canopy" run --tree "b:1x$n" --attach "$work/tree.attach" --workload union --rate 100 --duration 4 \
  > "$work/attached.out" 2>&1 &
run=$!
started+=("$run")
for _ in $(seq 100); do [ -f "$work/tree.attach" ] && break; sleep 0.1; done
[ -f "$work/tree.attach" ] || { echo "backend_footprint: no attach file" >&2; cat "$work/attached.out" >&2; exit 1; }
attached=()
for ((r = 0; r < n; r++)); do
  "$bin/canopy-demo-backend" --attach "$work/tree.attach" "$r" &
  attached+=("$!")
  started+=("$!")
done
sleep 2.5
sample "${attached[@]}" > "$work/attached.txt"
wait

{
  echo "mode,metric,value,unit"
  medians launched "$work/launched.txt"
  medians attached "$work/attached.txt"
} > "$out/footprint.csv"
{ echo "kB,mapping"; cat "$work/mappings.txt"; } > "$out/mappings.csv"

awk -F, 'NR > 1 && $4 == "kB" { v[$1","$2] = $3 }
  END { split("rss anon file pss private", k, " ");
        split("resident|of_it_anonymous|of_it_files_(code)|proportional_(PSS)|private", label, "|");
        for (i = 1; i <= 5; i++) print label[i], v["launched,"k[i]] / 1024, v["attached,"k[i]] / 1024 }' \
  "$out/footprint.csv" > "$work/footprint.dat"
plot_two_bars "$work/footprint.dat" "$out/footprint.png" "Memory of one Canopy back-end ($n in the tree; medians)" \
  MiB "%.2f" launched attached
echo "wrote $out/footprint.csv, $out/mappings.csv, $out/footprint.png"
