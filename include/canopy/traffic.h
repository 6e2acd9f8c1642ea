// What processes sent and received over their links (Network::traffic()).
#pragma once

#include <cstdint>

namespace canopy {

// Frames as the links carry them (each with its 8-byte length), counted when a link
// queues one to send and when it has read one whole: a process's own traffic since it
// started, over every link it had (parent, children, orphans' and standby links).
struct Traffic {
  std::uint64_t bytes_sent = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t messages_received = 0;
};

// The tree's traffic (Network::traffic()): summed over the processes that answered,
// and the most any one of them sent and received.
struct TreeTraffic {
  std::uint32_t processes = 0;
  Traffic total;
  std::uint64_t most_bytes_sent = 0;
  std::uint64_t most_bytes_received = 0;
};

}  // namespace canopy
