#!/usr/bin/env bash
# Installs, with apt-get, every Debian 12 package Canopy needs to build, test and
# benchmark. Safe to run repeatedly: it only installs what is missing.
# Usage: scripts/setup.sh [--build-only]
#   --build-only: only what building Canopy's programs needs (scripts/run.sh), not
#   the tests', sanitizers' and benchmarks' tools (MPI, Slurm, Chromium, clang...).
set -euo pipefail

build_only=false
case "${1:-}" in
  --build-only) build_only=true ;;
  "") ;;
  *) echo "usage: $0 [--build-only]" >&2; exit 2 ;;
esac

packages=(
  build-essential cmake pkg-config
  libboost1.81-dev            # Asio with C++20 coroutines (replaces the 1.74 headers)
  capnproto libcapnp-dev      # wire protocol
  libyaml-cpp-dev             # topology files
  libcli11-dev                # command line
  libspdlog-dev libfmt-dev    # logging
  libdw-dev                   # stack walking (canopy_stack: libdwfl unwinding and symbols)
  libsodium-dev               # HMAC-SHA256 and random bytes: authenticated handshakes (docs/security.md)
  ccache                      # compiles only what changed, in any checkout (scripts/compiler_cache.sh)
)
$build_only || packages+=(
  clang                       # the sanitizer build (scripts/test.sh) and the fuzzers (scripts/fuzz.sh)
  googletest libgtest-dev     # unit and integration tests
  procps psmisc               # pgrep/pkill used by tests to prove no process is left
  openmpi-bin libopenmpi-dev  # attach-mode test: tool back-ends inside an MPI job
  mpich libmpich-dev          # canopy stack on MPICH's hydra (mpiexec.hydra, mpicc.mpich); the alternatives stay on Open MPI
  iproute2                    # ip netns, veth and tc: striped links across namespaces (docs/striping.md)
  gnuplot-nox                 # benchmark figures (bench/plot_recovery.sh)
  elfutils                    # eu-stack, the baseline of the stack benchmark
  graphviz                    # dot, to draw merged call trees as SVG
  tmux                        # a real terminal for the test of canopy status --watch
  chromium curl               # a real browser (and an HTTP client) for the test of canopy run --dashboard
  libpng-dev                  # that test reads the browser's screenshot back
  slurmctld slurmd slurm-client munge  # a real Slurm cluster in network namespaces for the tests (tests/slurm)
  openssh-server openssh-client  # sshd per namespace host: canopy run's ssh launcher on a real ssh cluster (tests/ssh)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
