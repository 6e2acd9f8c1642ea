#!/usr/bin/env bash
# The test suite: unit and integration tests (real processes on loopback), first in
# a normal build, then in a build with AddressSanitizer and UndefinedBehaviorSanitizer.
# Usage: scripts/test.sh [--no-sanitizers]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
# Tests at twice the cores: most of a test's time is spent waiting on the real
# processes of its trees and on their timers, and at one test a core the CPU stood
# 60 % idle. Every test must pass on a busy machine (bench/flakiness.sh runs them under
# stress-ng); docs/testing.md, "Build time", has the figures.
jobs=$((2 * $(nproc)))
summaries=""      # one summary per ctest run (scripts/ctest_summary.sh)
skipped_total=0
failed_runs=""

# run_ctest LABEL BUILD_DIR [ctest options...]: runs ctest with a JUnit report, and
# summarises it (tests skipped, and why) whether or not every test passed.
run_ctest() {
  local label="$1" dir="$2" status=0 summary counts
  shift 2
  rm -f "$dir/ctest-junit.xml"
  ctest --test-dir "$dir" --output-on-failure --output-junit "$dir/ctest-junit.xml" "$@" || status=$?
  summary="$("$here/scripts/ctest_summary.sh" "$dir/ctest-junit.xml" "$label")"
  counts="$(tail -n 1 <<<"$summary")"
  summary="$(sed '$d' <<<"$summary")"
  # MPI tests are not built where MPI was not found at configure time (tests/CMakeLists.txt).
  local mpi
  mpi="$(sed -n 's/^CANOPY_MPI_TESTS_MISSING:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null)"
  [ -z "$mpi" ] || summary+=$'\n'"  MPI tests not built (no MPI found at configure time): $mpi"
  summaries+="$summary"$'\n'
  echo "$summary"
  counts="${counts#skipped=}"
  skipped_total=$((skipped_total + ${counts%% *}))
  [ "$status" = 0 ] || failed_runs+=" $label"
}

# How long each step took, printed with the summary (docs/testing.md, "Build time").
times=""
step_started=$SECONDS
step_done() {
  times+="  $1: $((SECONDS - step_started)) s"$'\n'
  step_started=$SECONDS
}

"$here/scripts/build.sh" "$here/build" -DCANOPY_BUILD_BENCH=ON
step_done "normal build"
# Every label: unit, integration, and package (tests/package/run.sh: installs this
# build into a temporary prefix, builds tests/package and examples/ against it).
run_ctest "normal build" "$here/build" -j "$jobs" --timeout 180
step_done "normal build's tests"

if [ "${1:-}" != "--no-sanitizers" ]; then
  # Built by clang, the normal build by gcc: clang compiles Canopy's heaviest files
  # under the sanitizers in half gcc's time (frontend/network.cpp: 12.0 s against
  # 24.6 s), and every change is compiled by both. Debug info as line tables (-g1):
  # the reports still name every frame's file and line. A tree configured by gcc
  # before is configured again from scratch (CMake keeps a tree's compiler).
  if [ -f "$here/build-sanitize/CMakeCache.txt" ] &&
     ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$here/build-sanitize/CMakeCache.txt"; then
    rm -rf "$here/build-sanitize"
  fi
  CANOPY_BUILD_TYPE=Debug "$here/scripts/build.sh" "$here/build-sanitize" -DCANOPY_SANITIZE=ON -DCANOPY_BUILD_BENCH=OFF \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1
  step_done "sanitizer build"
  # Every process of every tree (commnodes and back-ends too, whose reports no test
  # would see) writes sanitizer reports, leaks included, into one directory; any
  # report there fails the run. Unit and integration tests only: the package test
  # checks installation, to which the sanitizers add nothing, and ran above.
  reports="$(mktemp -d /tmp/canopy-sanitizers.XXXXXX)"
  ASAN_OPTIONS="detect_leaks=1:log_path=$reports/asan" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan" \
    run_ctest "sanitizer build" "$here/build-sanitize" -j "$jobs" --timeout 300 -L 'unit|integration'
  step_done "sanitizer build's tests"
  # LeakSanitizer checks a process as it exits from a tracer process; when a tree is
  # torn down and a parent SIGKILLs a child that is slow to exit (a loaded machine,
  # sanitizer builds), the tracer loses its target midway and writes only "Unable to
  # get registers from thread N". That is the kill, not a finding: drop such files.
  for report in "$reports"/*; do
    [ -e "$report" ] || continue
    if ! grep -qv -e '^==[0-9]*==Unable to get registers from thread [0-9]*\.$' -e '^$' "$report"; then
      echo "ignoring $(basename "$report"): leak check interrupted by a kill" >&2
      rm -f "$report"
    fi
  done
  if compgen -G "$reports/*" >/dev/null; then
    echo "sanitizer reports from processes of the trees under test:" >&2
    head -n 40 "$reports"/* >&2
    failed_runs+=" sanitizer-reports"
  else
    rm -rf "$reports"
  fi
fi
echo
echo "== summary =="
printf '%s' "$summaries"
printf 'time taken:\n%s' "$times"
if [ -n "$failed_runs" ]; then
  echo "FAILED:$failed_runs"
  exit 1
fi
if [ "$skipped_total" -gt 0 ]; then
  echo "all tests that ran passed; $skipped_total skipped (see above: a skipped test proves nothing)"
else
  echo "all tests passed, none skipped"
fi
