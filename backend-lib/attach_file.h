// The attach file (docs/attach.md): how a back-end started by someone else finds its
// place in the tree. The front-end writes it (frontend/network.cpp); every back-end
// reads all of it, so that a damaged or foreign file is refused wherever the
// back-end's own line is, not only when the damage comes before it.
//
// Pure parsing, no I/O but read_attach_file's one read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"
#include "core/auth.h"

namespace canopy::attach {

// The only version this library reads and the front-end writes.
inline constexpr int kVersion = 2;  // 2: with the network's secret

// A `backend RANK PARENT-RANK ADDRESS PORT` line.
struct BackendEntry {
  Rank rank = 0;
  Rank parent = 0;       // the commnode it connects to
  std::string address;   // where that commnode listens
  std::uint16_t port = 0;
  int line = 0;          // in the file, for messages
};

struct AttachFile {
  std::uint64_t network_id = 0;
  core::Secret secret{};
  std::vector<BackendEntry> backends;  // in file order

  // The line of back-end `rank`, if the file has one.
  const BackendEntry* find(Rank rank) const;
};

// Parses a whole attach file. The first line that is neither blank nor a `#`
// comment must be the header `canopy-attach 2`, the next `network HEX`, then
// `secret HEX` (64 digits), and every
// other line `backend RANK PARENT-RANK ADDRESS PORT` with a rank no earlier line
// has; anything else is an error naming `source:line` and what was wrong.
Result<AttachFile> parse_attach_file(std::string_view text, std::string_view source);

// Reads and parses the file at `path` (errors name the path).
Result<AttachFile> read_attach_file(const std::string& path);

}  // namespace canopy::attach
