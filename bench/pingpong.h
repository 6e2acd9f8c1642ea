// Ping-pongs between two processes on loopback, for the benchmarks that need the
// latency L of one hop (canopy-bench, canopy-membership-bench): blocking sockets
// (the physical floor) and TcpLink with asio loops (the path of a message between
// neighbours of the tree). The partner process is the calling executable again, run
// with `--echo-raw PORT BYTES` or `--echo-link PORT`, whose main() calls echo_raw() or
// echo_link(): no process forks while it has threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "canopy/topology.h"

namespace canopy::core {
class Outgoing;
}

namespace canopy::bench {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Clock = std::chrono::steady_clock;
inline double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// This executable's path.
std::string self_exe();

// Whole buffers over a blocking socket; false on end of file or error.
bool read_exact(int fd, char* buf, std::size_t n);
bool write_exact(int fd, const char* buf, std::size_t n);

// A VIEW_ACK, as a process of the tree sends it up: the membership message the
// link ping-pong bounces.
std::unique_ptr<core::Outgoing> view_ack(Rank sender);

// Round trips (µs) of `bytes`-byte messages over blocking sockets with TCP_NODELAY:
// the physical floor. 64 bytes is about a VIEW_ACK frame. `warmup` round trips
// first, not counted (negative: a tenth of `rounds`, at least 10).
std::vector<double> pingpong_raw(int rounds, std::size_t bytes = 64, int warmup = -1);
// Round trips (µs) of a VIEW_ACK bounced over TcpLink between two asio loops. With
// `gap` zero the next ping leaves as soon as the answer is in (both processes stay
// hot); otherwise after `gap`, once both sides sleep in epoll_wait, as every process
// of an idle tree does when a view change reaches it.
inline constexpr std::chrono::microseconds kColdGap{5000};
std::vector<double> pingpong_link(int rounds, std::chrono::microseconds gap = {});

// The partner's side: exit status for main(). `--echo-raw PORT BYTES` runs
// echo_raw(PORT, BYTES).
int echo_raw(std::uint16_t port, std::size_t bytes);
int echo_link(std::uint16_t port);

}  // namespace canopy::bench
