#!/usr/bin/env bash
# Writes cmake/backend_hot_functions.ld, a linker script: the functions a Canopy
# back-end runs, in launched and attach mode (docs/benchmarks.md, "A back-end's
# resident memory"), put together in one output section before the rest of the
# code. canopy_lean_program (cmake/CanopyLean.cmake) links with it, so that a running
# back-end maps a few hundred kilobytes of its code instead of nearly all of it.
#
#   scripts/hot_functions.sh [BUILD_DIR]   (default build/; built if needed)
#
# How: back-ends run under valgrind's callgrind, which records every function
# executed: two launched demo back-ends of b:1x2 (a wrapper given as the tree's
# --backend runs them under valgrind) with the demo workload, two attached ones with
# the union workload, the four of b:2x2 twice, whose parent is killed (a recovery
# with standby links, one without), and two lean MRNet back-ends (canopy-mrnet-bench-be-lean, on
# the static MRNet layer) answering canopy-mrnet-bench's round trips and waves. Every
# function of those programs that any of them ran, by its linker (mangled) name, in
# ascending order so that the file's diffs read well. Run it again after a change to
# a back-end's code path (tests/lean_layout.sh checks the layout is applied); a
# stale list only costs memory (a pattern that matches nothing is no error). Needs
# valgrind and the bench targets; takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=cmake/backend_hot_functions.ld
command -v valgrind >/dev/null || { echo "hot_functions: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
# Only a lean build compiles Canopy with -ffunction-sections (CMakeLists.txt).
grep -q '^CANOPY_LEAN_BACKENDS:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null ||
  { echo "hot_functions: $build is not a lean build (CANOPY_LEAN_BACKENDS)" >&2; exit 1; }
[ -x "$build/bin/canopy" ] && [ -x "$build/bin/canopy-demo-backend" ] &&
  [ -x "$build/bin/canopy-mrnet-bench" ] && [ -x "$build/bin/canopy-mrnet-bench-be-lean" ] ||
  cmake --build "$build" -j2 --target canopy canopy-demo-backend canopy-mrnet-bench canopy-mrnet-bench-be-lean
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

cat > "$work/backend" <<EOF
#!/bin/sh
exec valgrind --quiet --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.demo.%p" "$bin/canopy-demo-backend" "\$@"
EOF
cat > "$work/mrnet-backend" <<EOF
#!/bin/sh
exec valgrind --quiet --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.mrnet.%p" "$bin/canopy-mrnet-bench-be-lean" "\$@"
EOF
chmod +x "$work/backend" "$work/mrnet-backend"

# Under valgrind a back-end runs some fifty times slower: heartbeats get a long
# --lost, so that no back-end is declared failed.
slow=(--heartbeat 2000 --suspect 30000 --lost 60000)
setsid "$bin/canopy" run --tree b:1x2 --waves 100 --interval 20 "${slow[@]}" \
  --backend "$work/backend" > "$work/run-launched.log" 2>&1 &
pids+=("$!")
wait "$!" || { echo "hot_functions: the launched run failed:" >&2; cat "$work/run-launched.log" >&2; exit 1; }
setsid "$bin/canopy" run --tree b:1x2 --attach "$work/tree.attach" --workload union --duration 8 --rate 100 \
  "${slow[@]}" > "$work/run-attach.log" 2>&1 &
run=$!
pids+=("$run")
for _ in $(seq 100); do [ -f "$work/tree.attach" ] && break; sleep 0.1; done
for rank in 0 1; do
  setsid valgrind --quiet --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.demo.attach.$rank" \
    "$bin/canopy-demo-backend" --attach "$work/tree.attach" "$rank" > "$work/attach-$rank.log" 2>&1 &
  pids+=("$!")
done
wait "$run" || { echo "hot_functions: the attached run failed:" >&2; cat "$work/run-attach.log" >&2; exit 1; }
wait
# A recovery, over a standby link and over a new connection: b:2x2 with the union
# workload; once it has run 3 s, commnode 1000001 is killed, and its two back-ends
# find their parent lost, ask 1000002 to adopt them and send it their state. Their
# code for it then lies with the rest: in the storm after a commnode's death, each
# orphan otherwise took its page faults for it while 127 others waited for a core
# (docs/fault-tolerance.md, "Where the time goes").
for standby in --standby-links ""; do
  rm -f "$work/recovery.attach"
  # shellcheck disable=SC2086  # an option, or none
  setsid "$bin/canopy" run --tree b:2x2 --attach "$work/recovery.attach" --workload union --duration 10 --rate 100 \
    $standby "${slow[@]}" > "$work/run-recovery.log" 2>&1 &
  run=$!
  pids+=("$run")
  for _ in $(seq 100); do [ -f "$work/recovery.attach" ] && break; sleep 0.1; done
  for rank in 0 1 2 3; do
    setsid valgrind --quiet --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.demo.recovery$standby.$rank" \
      "$bin/canopy-demo-backend" --attach "$work/recovery.attach" "$rank" > "$work/recovery-$rank.log" 2>&1 &
    pids+=("$!")
  done
  for _ in $(seq 600); do grep -q '^3\.0 s' "$work/run-recovery.log" && break; sleep 0.1; done
  victim=""
  for p in $(ps -e -o pid=,sid= | awk -v s="$run" '$2 == s { print $1 }'); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx CANOPY_RANK=1000001 && victim=$p
  done
  [ -n "$victim" ] || { echo "hot_functions: no commnode 1000001 to kill:" >&2; cat "$work/run-recovery.log" >&2; exit 1; }
  kill -KILL "$victim"
  wait "$run" || { echo "hot_functions: the recovery run failed:" >&2; cat "$work/run-recovery.log" >&2; exit 1; }
  wait
  grep -q "recovered under" "$work/run-recovery.log" ||
    { echo "hot_functions: no back-end recovered:" >&2; cat "$work/run-recovery.log" >&2; exit 1; }
done
# MRNet's topology format: a commnode and two back-ends.
printf 'localhost:0 => localhost:1 ;\nlocalhost:1 => localhost:2 localhost:3 ;\n' > "$work/mrnet.top"
CANOPY_MRNET_FILTERS=$(cd "$build/lib" && pwd)/canopy_mrnet_filters.so \
  setsid "$bin/canopy-mrnet-bench" --samples 50 --warmup 5 --waves 100 --throughput-reps 1 --timeout 120 \
  "$work/mrnet.top" "$work/mrnet-backend" > "$work/run-mrnet.log" 2>&1 &
pids+=("$!")
wait "$!" || { echo "hot_functions: the MRNet run failed:" >&2; cat "$work/run-mrnet.log" >&2; exit 1; }

ls "$work"/cg.* > /dev/null 2>&1 || { echo "hot_functions: callgrind wrote nothing" >&2; exit 1; }
# Callgrind names objects and functions once, "(id) name", then by "(id)" alone;
# cfn= lines name called functions, which ran too, in the object of the cob= line
# just before, or else in the caller's. Symbols callgrind could not name
# (hexadecimal addresses, "(below main)"), its suffixes for recursion ("'2"),
# names a linker script cannot hold and functions the program does not define go.
# ran PROGRAM CALLGRIND_FILES...: the functions of PROGRAM that ran.
ran() {
  local program=$1
  shift
  awk -v program="$program" '
  FNR == 1 { delete ob; delete fn; cur = ""; called = "" }
  match($0, /^c?ob=\([0-9]+\)/) {
    id = substr($0, index($0, "(") + 1, index($0, ")") - index($0, "(") - 1)
    rest = substr($0, RLENGTH + 2)
    if (rest != "") ob[id] = rest
    if ($0 ~ /^ob=/) cur = called = ob[id]; else called = ob[id]
    next
  }
  match($0, /^c?fn=\([0-9]+\)/) {
    id = substr($0, index($0, "(") + 1, index($0, ")") - index($0, "(") - 1)
    rest = substr($0, RLENGTH + 2)
    if (rest != "") fn[id] = rest
    where = ($0 ~ /^fn=/) ? cur : called
    called = cur
    name = fn[id]
    sub(/'\''[0-9]+$/, "", name)
    # Valgrind names the object "???" for code it places in no mapped file, as it
    # does for this very layout; the names are checked against the program below.
    if ((where == program || where == "???") && name ~ /^[A-Za-z_][A-Za-z0-9_.$]*$/) print name
  }' "$@" | LC_ALL=C sort -u > "$work/ran.txt"
  nm --defined-only "$program" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | LC_ALL=C sort -u > "$work/functions.txt"
  LC_ALL=C comm -12 "$work/ran.txt" "$work/functions.txt"
}
# Two groups, in this order: what a back-end runs every day, and then what only an
# orphan's recovery runs, between two symbols (core/code_layout.h maps that group at
# start): the daily code lies as close together as without the recovery's.
{
  ran "$bin/canopy-demo-backend" $(ls "$work"/cg.demo.* | grep -v '/cg\.demo\.recovery')
  ran "$bin/canopy-mrnet-bench-be-lean" "$work"/cg.mrnet.*
} | LC_ALL=C sort -u > "$work/daily.txt"
ran "$bin/canopy-demo-backend" "$work"/cg.demo.recovery* | LC_ALL=C comm -23 - "$work/daily.txt" > "$work/recovery.txt"
LC_ALL=C sort -u "$work/daily.txt" "$work/recovery.txt" > "$work/hot.txt"
n=$(wc -l < "$work/hot.txt")
[ "$n" -gt 100 ] || { echo "hot_functions: only $n functions found" >&2; exit 1; }

# Each function is then found in the program's inputs, with the section it is in:
# Canopy's code is compiled with -ffunction-sections (a function NAME in section
# .text.NAME, or, for a constructor's or destructor's alias, in its twin's), and so
# is most of libstdc++'s; Debian's other static archives are partly not, and a
# function there is in its object's .text, which goes as a whole, named by archive
# and member.
cxx=${CXX:-c++}
inputs=(/usr/lib/x86_64-linux-gnu/{libcapnp,libkj,libsodium,libyaml-cpp}.a
  "$("$cxx" -print-file-name=libstdc++.a)" "$("$cxx" -print-file-name=libgcc.a)"
  "$("$cxx" -print-file-name=libgcc_eh.a)")
mapfile -t own < <(find "$build" -name 'libcanopy_*.a' -o -path '*canopy-demo-backend.dir/*.o' -o -path '*canopy_lean_log.dir/*.o' \
  -o -path '*canopy-mrnet-bench-be-lean.dir/*.o')
inputs+=("${own[@]}")
for f in "${inputs[@]}"; do
  [ -f "$f" ] || { echo "hot_functions: no $f" >&2; exit 1; }
  # objdump -t: "ADDRESS FLAGS SECTION<tab>SIZE [.hidden] NAME", after a line
  # "MEMBER:     file format ..." for each object.
  objdump -t "$f" 2>/dev/null | awk -v lib="$(basename "$f")" -v archive="$([[ $f == *.a ]] && echo 1 || echo 0)" '
    /: +file format / { member = $1; sub(/:$/, "", member); next }
    /\t/ {
      split($0, part, "\t"); n = split(part[1], head, " "); section = head[n]
      if (part[1] !~ / F /) next
      m = split(part[2], tail, " "); name = tail[m]
      if (section !~ /^\.text/) next
      where = archive ? "*" lib ":" member : "*" lib
      print name, where, section
    }'
done | LC_ALL=C sort -k1,1 > "$work/defined.txt"
# One input-section pattern per hot function (several if it has several homes);
# a function found nowhere keeps the pattern its name would have.
# patterns GROUP: the input-section patterns of a group's functions.
patterns() {
  LC_ALL=C join -a 1 "$work/$1.txt" "$work/defined.txt" | awk '
    NF == 1 { print "    *(.text." $1 " .text.startup." $1 ")"; next }
    $3 == ".text" || $3 == ".text.startup" || $3 == ".text.hot" { print "    " $2 "(" $3 ")"; next }
    $3 ~ /^\.text\.unlikely/ { next }
    { print "    *(" $3 ")" }'
}
patterns daily | awk '!seen[$0]++' > "$work/patterns.txt"
# A section already placed with the daily code stays there.
patterns recovery | awk 'NR == FNR { seen[$0] = 1; next } !seen[$0]++' "$work/patterns.txt" - > "$work/recovery-patterns.txt"
{
  echo "/* The functions a Canopy back-end runs, laid out together at the start of its"
  echo "   code (cmake/CanopyLean.cmake; docs/benchmarks.md, \"A back-end's resident"
  echo "   memory\"): $n functions, in $(cat "$work/patterns.txt" "$work/recovery-patterns.txt" | wc -l) input sections, the"
  echo "   recovery's last (core/code_layout.h). Written by"
  echo "   scripts/hot_functions.sh. */"
  echo "SECTIONS"
  echo "{"
  echo "  .text.canopy_hot :"
  echo "  {"
  cat "$work/patterns.txt"
  echo "    PROVIDE_HIDDEN(__canopy_recovery_code_start = .);"
  cat "$work/recovery-patterns.txt"
  echo "    PROVIDE_HIDDEN(__canopy_recovery_code_end = .);"
  echo "  }"
  echo "}"
  echo "INSERT BEFORE .text;"
} > "$out"
echo "wrote $out: $n functions, $(wc -l < "$work/patterns.txt") daily and $(wc -l < "$work/recovery-patterns.txt") recovery input sections"
