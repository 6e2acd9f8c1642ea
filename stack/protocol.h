// What `canopy stack` (tools/stack_command.cpp) asks its tool daemons
// (tools/canopy_stackd.cpp) on the stack stream, and what they answer (docs/stack.md).
//
// The front-end broadcasts one request naming, for every MPI rank, the daemon that
// walks it and its pid on that daemon's host; each daemon walks its own ranks
// `samples` times, `interval_ms` apart, and answers with one CallTree packet
// (kTreeTag) of its ranks' paths, which the prefix_tree filter merges on the way up.
#pragma once

#include <cstdint>
#include <vector>

#include "canopy/packet.h"
#include "canopy/result.h"

namespace canopy::stack {

inline constexpr Tag kRequestTag = 0x57a0;
inline constexpr Tag kTreeTag = 0x57a1;

struct Target {
  Rank daemon = 0;         // the back-end rank of the daemon on the rank's host
  std::uint32_t mpi_rank = 0;
  std::int32_t pid = 0;    // on that host
  bool operator==(const Target&) const = default;
};

struct Request {
  std::uint32_t samples = 1;
  std::uint32_t interval_ms = 100;
  bool lines = false;          // file:line after each function, where DWARF knows it
  bool threads = false;        // every thread, not only each rank's main thread
  bool mpi_internals = false;  // frames inside MPI calls (stack/paths.h)
  bool startup_frames = false; // the C runtime's frames above main (stack/paths.h)
  std::vector<Target> targets;
  bool operator==(const Request&) const = default;
};

// "%ud %ud %ud %aud %aud %ad": samples, interval, flags, then per target its daemon,
// MPI rank and pid.
Packet encode(const Request& request);
// Validates what a daemon receives: the format, 1 <= samples <= 1000, an interval of
// at most 60 s, arrays of one length, pids > 0.
Result<Request> decode_request(const Packet& packet);

}  // namespace canopy::stack
