// Refusals that anyone who can reach a port can cause (a wrong hello, a silent or
// garbled connection, a wrong proof), logged once per peer address and kind in an
// interval, with the count of those not logged since: a peer that retries without
// end, or a flood of connections, writes one line per interval and kind, not one
// per try (docs/security.md, "Logs an outsider cannot fill").
//
// Used by the node's handshake (core/node_accept.cpp) and by the listener that tells
// striped connections from plain ones (striped_acceptor.cpp).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace canopy::transport {

class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kInterval{10};
  static constexpr std::size_t kKeys = 1024;  // at most; then it starts again (bounded whoever connects)

  // Whether to log a refusal of `kind` from `peer` ("address:port" or an address)
  // now: the number not logged since the last line of this address and kind, or
  // nothing when it is to be counted and not logged.
  std::optional<std::size_t> admit(std::string_view peer, std::string_view kind, Clock::time_point now = Clock::now());

  // " (N more refused from this address, not logged)" for N > 0, else "".
  static std::string unlogged_note(std::size_t n);

 private:
  struct Entry {
    Clock::time_point logged{};
    std::size_t unlogged = 0;
  };
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace canopy::transport
