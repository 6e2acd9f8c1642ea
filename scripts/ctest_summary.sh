#!/usr/bin/env bash
# Summarises one ctest run from its JUnit report (ctest --output-junit FILE): how many
# tests ran, passed, failed and were skipped, and for each skipped test why, as the
# test said it: its "SKIP: ..." line (the network-namespace tests, tests/netns/lib.sh),
# or the message of a GTEST_SKIP(), or else ctest's own reason (e.g.
# SKIP_RETURN_CODE=77). scripts/test.sh calls it after each build's ctest run.
#
# Usage: scripts/ctest_summary.sh JUNIT_FILE LABEL
# Prints the summary on stdout, and as its last line "skipped=N failed=N" for the caller.
set -euo pipefail
junit="${1:?usage: ctest_summary.sh JUNIT_FILE LABEL}"
label="${2:?usage: ctest_summary.sh JUNIT_FILE LABEL}"
if [ ! -s "$junit" ]; then
  echo "$label: no test report ($junit): ctest did not run to the end"
  echo "skipped=0 failed=1"
  exit 0
fi

# ctest writes one <testcase ... status="run|fail|notrun"> per test, with an optional
# <skipped message="..."/> or <failure .../>, and the test's output in <system-out>.
awk -v label="$label" '
  function unescape(s) {
    gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s); gsub(/&apos;/, "\047", s)
    gsub(/&amp;/, "\\&", s)
    return s
  }
  function attribute(line, name,    m) {
    if (match(line, name "=\"[^\"]*\"")) return substr(line, RSTART + length(name) + 2, RLENGTH - length(name) - 3)
    return ""
  }
  function finish_case() {
    if (name == "") return
    total++
    if (status == "fail") { failed++; failures = failures "\n  failed  " name }
    else if (status == "notrun") {
      skipped++
      reason = skip_line != "" ? skip_line : (gtest_reason != "" ? gtest_reason : ctest_reason)
      if (reason == "") reason = "(no reason given)"
      skips = skips "\n  skipped " name ": " unescape(reason)
    } else passed++
    name = ""
  }
  /<testcase / {
    finish_case()
    name = attribute($0, "name"); status = attribute($0, "status")
    skip_line = ""; gtest_reason = ""; ctest_reason = ""; after_gtest_skipped = 0; in_out = 0
  }
  /<skipped / { ctest_reason = attribute($0, "message") }
  {
    line = $0
    if (sub(/.*<system-out>/, "", line)) in_out = 1
    if (!in_out) next
    if (sub(/<\/system-out>.*/, "", line)) in_out = 0
    if (after_gtest_skipped && gtest_reason == "" && line != "") gtest_reason = line
    after_gtest_skipped = line ~ /: Skipped$/
    if (skip_line == "" && line ~ /^SKIP: /) skip_line = substr(line, 7)
  }
  END {
    finish_case()
    printf "%s: %d tests, %d passed, %d failed, %d skipped%s%s\n", label, total, passed, failed, skipped, skips, failures
    printf "skipped=%d failed=%d\n", skipped, failed
  }
' "$junit"
