// The attach file (docs/attach.md): how a back-end started by someone else finds its
// place in the tree. The front-end writes it (frontend/network.cpp); every back-end
// reads all of it, so that a damaged or foreign file is refused wherever the
// back-end's own line is, not only when the damage comes before it.
//
// The re-attach file (docs/fault-tolerance.md, "When the front-end fails") has the
// same form with `frontend` and `commnode` lines instead of `backend` ones: how a new
// front-end finds the process that stands in the root's place.
//
// Parsing and formatting, no I/O but read_attach_file's one read and
// write_secret_file's one write.
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

// A `commnode RANK ADDRESS PORT` line (re-attach file).
struct CommnodeEntry {
  Rank rank = 0;
  std::string address;  // where it listens
  std::uint16_t port = 0;
  int line = 0;
};

struct AttachFile {
  std::uint64_t network_id = 0;
  core::Secret secret{};
  std::vector<BackendEntry> backends;  // in file order
  // Re-attach file: `frontend RANK` (the front-end's rank) and the commnodes.
  std::optional<Rank> frontend;
  std::vector<CommnodeEntry> commnodes;  // in file order

  // The line of back-end `rank`, if the file has one.
  const BackendEntry* find(Rank rank) const;
  // An open attach file (`commnode` lines, no `frontend` line): back-ends it does not
  // name may join under one of its commnodes (docs/attach.md, "Open attach").
  bool open() const { return !frontend && !commnodes.empty(); }
};

// Parses a whole attach file. The first line that is neither blank nor a `#`
// comment must be the header `canopy-attach 2`, the next `network HEX`, then
// `secret HEX` (64 digits), and every other line `backend RANK PARENT-RANK ADDRESS
// PORT`, `commnode RANK ADDRESS PORT` or (once) `frontend RANK`, with a rank no
// earlier line has; anything else is an error naming `source:line` and what was
// wrong.
Result<AttachFile> parse_attach_file(std::string_view text, std::string_view source);

// Reads and parses the file at `path` (errors name the path).
Result<AttachFile> read_attach_file(const std::string& path);

// The text of an attach file for `topology`'s back-ends (attach mode), and of a
// re-attach file for its front-end and commnodes (whose ports must be known). With
// `open` (open attach), the attach file also has a `commnode` line for every commnode
// with no commnode below it: where back-ends the topology does not name join.
std::string attach_file_text(const Topology& topology, std::uint64_t network_id, const core::Secret& secret,
                             bool open = false);
std::string reattach_file_text(const Topology& topology, std::uint64_t network_id, const core::Secret& secret);

// Writes `text` to `path` atomically (a reader never sees half of it) and readable
// by its owner only, never into a file someone else made: it holds the network's
// secret (docs/security.md). `what` names the file in errors ("attach file").
Result<void> write_secret_file(const std::string& path, const std::string& text, const std::string& what);

}  // namespace canopy::attach
