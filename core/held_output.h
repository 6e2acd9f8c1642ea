// HeldOutput: what an orphan sends up while it has no parent, held back until an
// adopter takes it and then sent in order. Bounded, so that an orphan that waits
// long cannot grow without limit: a message beyond the bound is refused (the caller
// decides what that means for its data).
#pragma once

#include <capnp/message.h>
#include <kj/array.h>

#include <cstddef>
#include <vector>

#include "transport/link.h"

namespace canopy::core {

class HeldOutput {
 public:
  static constexpr std::size_t kDefaultMaxBytes = 64u << 20;
  explicit HeldOutput(std::size_t max_bytes = kDefaultMaxBytes) : max_bytes_(max_bytes) {}

  // Keeps a copy of `message`; false (and nothing kept) if it would pass the bound.
  bool hold(capnp::MessageBuilder& message);
  // Sends every message held, in the order held, and forgets them.
  void send_all(transport::Link& link);
  std::size_t bytes() const { return bytes_; }
  std::size_t max_bytes() const { return max_bytes_; }

 private:
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  std::vector<kj::Array<capnp::word>> messages_;  // flat copies
};

}  // namespace canopy::core
