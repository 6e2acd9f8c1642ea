#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on, every library instrumented for coverage) in
# build-fuzz/, and runs each for a while (docs/testing.md, "Fuzzing").
#
#   scripts/fuzz.sh [--seconds N] [HARNESS...]
#       N: seconds per harness (default 30); HARNESS: frames stripe topology
#       packet_format (default: all four).
#
# A crash stops that harness; its input is kept in build-fuzz/crashes/HARNESS/ and
# the script exits 1 after the others ran. Keep a crash as a regression test by
# copying it into fuzz/regressions/HARNESS/ with the fix. clang is installed with
# apt-get if missing (scripts/setup.sh, as root or with sudo).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
seconds=30
harnesses=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=${2:?--seconds needs a value}; shift ;;
    -h|--help) sed -n 2,15p "$0"; exit 0 ;;
    -*) echo "scripts/fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1") ;;
  esac
  shift
done
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "scripts/fuzz.sh: --seconds must be a positive integer" >&2; exit 2; }
[ ${#harnesses[@]} -gt 0 ] || harnesses=(frames stripe topology packet_format)
for h in "${harnesses[@]}"; do
  case $h in
    frames|stripe|topology|packet_format) ;;
    *) echo "scripts/fuzz.sh: no harness '$h' (frames, stripe, topology, packet_format)" >&2; exit 2 ;;
  esac
done

"$here/scripts/setup.sh"  # clang among the rest

build="$here/build-fuzz"
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -O2 with line tables only (-g1): every frame of a crash keeps its file and line
# (docs/testing.md, "Build time").
release="-O2 -g1 -DNDEBUG"
# shellcheck source=compiler_cache.sh
source "$here/scripts/compiler_cache.sh"
cmake -S "$here" -B "$build" "${compiler_cache[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$release" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$release" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCANOPY_BUILD_FUZZERS=ON -DCANOPY_BUILD_TESTS=OFF -DCANOPY_BUILD_BENCH=OFF >/dev/null
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
case " ${harnesses[*]} " in *" frames "*|*" stripe "*) targets+=(canopy-fuzz-seeds) ;; esac
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

if [ -x "$build/bin/canopy-fuzz-seeds" ]; then "$build/bin/canopy-fuzz-seeds" "$build/seeds" >/dev/null; fi
# One harness per core at a time: each is one process, and four of 15 s in turn
# left a core idle for a minute of CI.
run_harness() {
  local h="$1" corpus="$build/corpus/$1" crashes="$build/crashes/$1" seeds=() d
  mkdir -p "$corpus" "$crashes"
  # The fuzzer adds what it finds to the first directory; seeds and kept crashes
  # are read from the others.
  for d in "$build/seeds/$h" "$here/fuzz/corpus/$h" "$here/fuzz/regressions/$h"; do
    [ -d "$d" ] && seeds+=("$d")
  done
  # timeout: a harness must end even if the sanitizer's exit hangs; no leak check
  # at exit (scanning a run's gigabytes stopped the process for minutes).
  ASAN_OPTIONS=detect_leaks=0 timeout -k 10 $((seconds + 120)) "$build/bin/fuzz_$h" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$corpus" "${seeds[@]}" >"$build/fuzz_$h.log" 2>&1
}
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  echo "== fuzz_$h for $seconds s"
  rm -f "$build/fuzz_$h.status"
  { if run_harness "$h"; then echo 0; else echo $?; fi >"$build/fuzz_$h.status"; } &
done
wait
failed=()
for h in "${harnesses[@]}"; do
  if [ "$(cat "$build/fuzz_$h.status" 2>/dev/null)" != 0 ]; then
    failed+=("$h")
    tail -n 40 "$build/fuzz_$h.log" >&2
    echo "fuzz_$h: crashed; the input is in $build/crashes/$h (log: $build/fuzz_$h.log)" >&2
  else
    echo "fuzz_$h: $(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$build/fuzz_$h.log" | tr '\n' ' ')"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/fuzz.sh: crashes in ${failed[*]}" >&2
  exit 1
fi
echo "scripts/fuzz.sh: no crash in ${harnesses[*]} (${seconds} s each)"
