#!/usr/bin/env bash
# A lean back-end (cmake/CanopyLean.cmake) loads no shared library but libc, libm if
# its own code calls into it, and the dynamic loader (named when static libstdc++
# calls into it). With --libc-only, not even libm: Canopy's code calls nothing of it
# (docs/benchmarks.md, "A back-end's resident memory"). With --starts, it also
# starts: run without a parent, it says so and exits 1.
#   tests/lean_backend.sh [--libc-only] [--starts] PROGRAM
# Used by the ctest test LeanBackend.NeedsOnlyLibcAndStarts and by the package test
# (tests/package/run.sh) for the back-ends it links lean.
set -euo pipefail
starts=0 allowed="libc.so.6 libm.so.6"
while [ $# -gt 1 ]; do
  case $1 in
    --starts) starts=1 ;;
    --libc-only) allowed="libc.so.6" ;;
    *) break ;;
  esac
  shift
done
program=$1
needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^ld-linux' | sort | tr '\n' ' ')
for library in $needed; do
  if [[ " $allowed " != *" $library "* ]]; then
    echo "FAIL: $program needs: $needed(a lean back-end needs $allowed only)" >&2
    exit 1
  fi
done
[[ " $needed " == *" libc.so.6 "* ]] || { echo "FAIL: $program does not name libc.so.6: $needed" >&2; exit 1; }
if [ "$starts" = 1 ]; then
  status=0
  message=$(env -u CANOPY_RANK timeout 10 "$program" 2>&1) || status=$?
  if [ "$status" -ne 1 ] || [[ $message != *"CANOPY_RANK is not set"* ]]; then
    echo "FAIL: without a parent, $program exited $status saying: $message" >&2
    exit 1
  fi
fi
echo "ok: $program needs $needed"
