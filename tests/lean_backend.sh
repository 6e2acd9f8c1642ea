#!/usr/bin/env bash
# A lean back-end (cmake/CanopyLean.cmake) loads no shared library but libc, libm and
# the dynamic loader (named when static libstdc++ calls into it), and starts: run
# without a parent, it says so and exits 1.
#   tests/lean_backend.sh PROGRAM
set -euo pipefail
program=$1
needed=$(readelf -d "$program" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^ld-linux' | sort | tr '\n' ' ')
if [ "$needed" != "libc.so.6 libm.so.6 " ]; then
  echo "FAIL: $program needs: $needed(a lean back-end needs libc.so.6 and libm.so.6 only)" >&2
  exit 1
fi
status=0
message=$(env -u CANOPY_RANK timeout 10 "$program" 2>&1) || status=$?
if [ "$status" -ne 1 ] || [[ $message != *"CANOPY_RANK is not set"* ]]; then
  echo "FAIL: without a parent, $program exited $status saying: $message" >&2
  exit 1
fi
echo "ok: $program needs $needed and starts"
