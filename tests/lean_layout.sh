#!/usr/bin/env bash
# A lean back-end's code is laid out as cmake/backend_hot_functions.ld says
# (cmake/CanopyLean.cmake): an output section .text.canopy_hot before the rest of
# the code, holding every function the script names by its section (.text.NAME,
# .text.startup.NAME) that the program defines. With --packed, its relative relocations are packed too
# (DT_RELR). Fails if the script is not used, or no longer places what it names
# (a linker that ignores it, patterns that match nothing). With --only REGEX, only
# the functions whose names match it: a tool's own code, compiled without
# -ffunction-sections, stays where it is (its main(), say). With --includes REGEX,
# also every function of the program whose (mangled) name matches it, but for the
# .cold parts the compiler splits off, must lie in .text.canopy_hot, and one at least
# must match: the code of a path the script must cover (an orphan's recovery); and
# the program must define __canopy_recovery_code_start and _end around a part of
# the section, the recovery's group, which core/code_layout.h maps at start.
#   tests/lean_layout.sh [--packed] [--only REGEX] [--includes REGEX] PROGRAM SCRIPT
# Used by the ctest test LeanBackend.HotFunctionsLieTogether and by the package test.
set -euo pipefail
export LC_ALL=C  # join and sort in one collation
packed=0 only="" includes=""
while [ $# -gt 2 ]; do
  case $1 in
    --packed) packed=1; shift ;;
    --only) only=$2; shift 2 ;;
    --includes) includes=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -eq 2 ] || { echo "usage: $0 [--packed] [--only REGEX] [--includes REGEX] PROGRAM SCRIPT" >&2; exit 2; }
program=$1 script=$2

# [Nr] Name Type Address Off Size ...: the hot section's start and size.
hot_start="" hot_size=""
read -r hot_start hot_size < <(readelf -SW "$program" |
  awk '{ sub(/^ *\[ *[0-9]+\] */, "") } $1 == ".text.canopy_hot" { print $3, $5 }') || true
[ -n "$hot_start" ] || { echo "FAIL: $program has no section .text.canopy_hot" >&2; exit 1; }
hot_start=$((16#$hot_start)) hot_size=$((16#$hot_size))
hot_end=$((hot_start + hot_size))

# The names of the script's "*(.text.NAME ...)" patterns, and the program's
# functions with their addresses.
names=$(sed -n 's/^ *\*(\.text\.\(startup\.\|hot\.\)\{0,1\}\([^ )]*\).*/\2/p' "$script" | grep -E -- "${only:-.}" | sort -u) || true
[ -n "$names" ] || { echo "FAIL: $script names no function" >&2; exit 1; }
inside=0 outside=0 missing=0 shown=0
while read -r name address; do
  if [ -z "$address" ]; then
    missing=$((missing + 1))
    continue
  fi
  a=$((16#$address))
  if [ "$a" -ge "$hot_start" ] && [ "$a" -lt "$hot_end" ]; then
    inside=$((inside + 1))
  else
    outside=$((outside + 1))
    [ "$shown" -lt 10 ] && { echo "outside .text.canopy_hot: $name" >&2; shown=$((shown + 1)); }
  fi
done < <(join -a 1 <(echo "$names" | LC_ALL=C sort) \
  <(nm --defined-only "$program" | awk '$2 ~ /^[tTwW]$/ { print $3, $1 }' | LC_ALL=C sort -u -k1,1))
echo "$((hot_size / 1024)) KiB of hot code; of the $((inside + outside + missing)) functions named:" \
  "$inside in it, $outside elsewhere, $missing not in this program"
[ "$inside" -gt 0 ] || { echo "FAIL: none of the functions named lies in .text.canopy_hot" >&2; exit 1; }
[ "$outside" -eq 0 ] || { echo "FAIL: $outside functions named lie outside .text.canopy_hot" >&2; exit 1; }
if [ -n "$includes" ]; then
  matched=0 away=0
  while read -r address name; do
    matched=$((matched + 1))
    a=$((16#$address))
    if [ "$a" -lt "$hot_start" ] || [ "$a" -ge "$hot_end" ]; then
      away=$((away + 1))
      echo "outside .text.canopy_hot, and named by --includes: $name" >&2
    fi
  done < <(nm --defined-only "$program" | awk '$2 ~ /^[tTwW]$/ && $3 !~ /\.cold$/ { print $1, $3 }' |
    grep -E -- " ($includes)" || true)
  [ "$matched" -gt 0 ] || { echo "FAIL: no function of $program matches --includes '$includes'" >&2; exit 1; }
  [ "$away" -eq 0 ] || { echo "FAIL: $away of the $matched functions --includes names lie elsewhere" >&2; exit 1; }
  echo "the $matched functions --includes names lie in .text.canopy_hot"
  group=$(nm "$program" | awk '$3 == "__canopy_recovery_code_start" { s = $1 } $3 == "__canopy_recovery_code_end" { e = $1 }
    END { if (s != "" && e != "") print s, e }')
  [ -n "$group" ] || { echo "FAIL: $program defines no __canopy_recovery_code_start and _end" >&2; exit 1; }
  read -r group_start group_end <<< "$group"
  group_start=$((16#$group_start)) group_end=$((16#$group_end))
  if [ "$group_start" -ge "$group_end" ] || [ "$group_start" -lt "$hot_start" ] || [ "$group_end" -gt "$hot_end" ]; then
    echo "FAIL: the recovery's group is not a part of .text.canopy_hot" >&2
    exit 1
  fi
  echo "the recovery's group: $(((group_end - group_start) / 1024)) KiB at the end of the hot code"
fi
if [ "$packed" = 1 ] && ! readelf -d "$program" | grep -q '(RELR)'; then
  echo "FAIL: $program has no packed relative relocations (DT_RELR)" >&2
  exit 1
fi
echo "ok: $program"
