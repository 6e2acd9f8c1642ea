#!/usr/bin/env bash
# A lean back-end (cmake/CanopyLean.cmake) loads no shared library but libc, libm and
# the dynamic loader (named when static libstdc++ calls into it). With --starts, it
# also starts: run without a parent, it says so and exits 1.
#   tests/lean_backend.sh [--starts] PROGRAM
# Used by the ctest test LeanBackend.NeedsOnlyLibcAndLibmAndStarts and by the
# package test (tests/package/run.sh) for the back-ends it links lean.
set -euo pipefail
starts=0
[ "${1:-}" = --starts ] && { starts=1; shift; }
program=$1
needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^ld-linux' | sort | tr '\n' ' ')
if [ "$needed" != "libc.so.6 libm.so.6 " ]; then
  echo "FAIL: $program needs: $needed(a lean back-end needs libc.so.6 and libm.so.6 only)" >&2
  exit 1
fi
if [ "$starts" = 1 ]; then
  status=0
  message=$(env -u CANOPY_RANK timeout 10 "$program" 2>&1) || status=$?
  if [ "$status" -ne 1 ] || [[ $message != *"CANOPY_RANK is not set"* ]]; then
    echo "FAIL: without a parent, $program exited $status saying: $message" >&2
    exit 1
  fi
fi
echo "ok: $program needs $needed"
