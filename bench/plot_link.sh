#!/usr/bin/env bash
# Runs canopy-link-bench and draws its figure with gnuplot:
#   link.csv    everything the benchmark printed (docs/striping.md)
#   link.png    bandwidth and latency of each variant relative to plain TcpLink
# Usage: bench/plot_link.sh [OUTPUT_DIR] [benchmark options, e.g. --quick]
# (CANOPY_BUILD_DIR selects the build directory; default build/, built if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-results}
shift || true
mkdir -p "$out"
command -v gnuplot >/dev/null || ./scripts/setup.sh
build=${CANOPY_BUILD_DIR:-build}   # the build directory to take the benchmark from
[ -x "$build/bin/canopy-link-bench" ] || ./scripts/build.sh "$build"
# A run that failed its checks (lost data, a skipped kill, a wrong message) is not drawn.
"$build/bin/canopy-link-bench" "$@" > "$out/link.csv" 2> "$out/link.log" || {
  echo "canopy-link-bench failed; nothing drawn. The end of $out/link.log:" >&2
  grep -v '^[0-9-]*T[0-9:.]* ' "$out/link.log" | tail -n 5 >&2
  exit 1
}

# variant, bandwidth / TCP, latency / TCP, CPU per GiB / TCP
awk -F, 'NR > 1 { print $1, $10, $9, $11 }' "$out/link.csv" > "$out/link.dat"

gnuplot <<GP
set terminal pngcairo size 1000,640
set output "$out/link.png"
set title "StripedLink against plain TcpLink on loopback (medians; 1.0 = TcpLink in the same run)"
# Everything is sized from the data (stats runs before any range is set: it obeys them).
# The y range: the tallest bar (or the 1.0 and 0.9 lines) plus room for the value
# printed above each bar, so no bar or label is clipped whatever the ratios are.
stats "$out/link.dat" using (\$2 > \$3 ? (\$2 > \$4 ? \$2 : \$4) : (\$3 > \$4 ? \$3 : \$4)) name "R" nooutput
# Variant names are broken after each "-" so they stay horizontal and never overlap;
# the bottom margin makes room for the longest name, the axis label and the legend.
wrap(s) = strstrt(s, "-") == 0 ? s : s[1:strstrt(s, "-")] . "\\n" . wrap(s[strstrt(s, "-") + 1:])
lines(s) = strstrt(s, "-") == 0 ? 1 : 1 + lines(s[strstrt(s, "-") + 1:])
stats "$out/link.dat" using (lines(strcol(1))) name "L" nooutput
set yrange [0:(R_max > 1.0 ? R_max : 1.0) * 1.15]
set bmargin L_max + 5
set xtics scale 0 font ",10" nomirror
set xlabel "variant (canopy-link-bench --variant NAME)" offset 0,-(L_max - 1)
set ylabel "ratio to plain TcpLink"
set grid ytics
# The legend goes at the bottom of the image, under the axis label, never over the bars.
set key at screen 0.5, screen 0.01 bottom center horizontal samplen 2 width 1
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
# Each bar's value above it: 3 bars per cluster with gap 1 put bar j (0, 1, 2) of
# cluster i at x = i + (j - 1) / 4.
at(j) = \$0 + (j - 1) / 4.0
plot "$out/link.dat" using 2:xtic(wrap(strcol(1))) title "bandwidth (higher is better)", \\
     "" using 3 title "latency, round trip (lower is better)", \\
     "" using 4 title "CPU per GiB (lower is better)", \\
     0.9 with lines dt 2 lw 1.5 lc rgb "black" title "target: checksummed bandwidth >= 0.9", \\
     "" using (at(0)):2:(sprintf("%.2f", \$2)) with labels offset 0,0.7 font ",8" notitle, \\
     "" using (at(1)):3:(sprintf("%.2f", \$3)) with labels offset 0,0.7 font ",8" notitle, \\
     "" using (at(2)):4:(sprintf("%.2f", \$4)) with labels offset 0,0.7 font ",8" notitle
GP
echo "wrote $out/link.csv, $out/link.png"
