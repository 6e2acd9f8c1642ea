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
set terminal pngcairo size 1000,540
set output "$out/link.png"
set title "StripedLink against plain TcpLink on loopback (medians; 1.0 = TcpLink in the same run)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set yrange [0:*]
set ylabel "ratio to plain TcpLink"
set xtics rotate by -20 scale 0 font ",9"
set grid ytics
set key top left
plot "$out/link.dat" using 2:xtic(1) title "bandwidth", \
     "" using 3 title "latency (round trip)", \
     "" using 4 title "CPU per GiB", \
     0.9 with lines dt 2 lc rgb "black" title "target: checksummed bandwidth >= 0.9"
GP
echo "wrote $out/link.csv, $out/link.png"
