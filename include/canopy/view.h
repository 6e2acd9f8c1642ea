// The membership view: which back-ends of the tree are alive, as of which view
// (docs/membership.md). Every process holds one; the front-end changes it, one view
// at a time, when back-ends fail or join, and every process is told of each change
// it applies (Event::Kind::view).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "canopy/topology.h"

namespace canopy {

struct View {
  // 0 is the view at launch: every back-end of the topology, or none in attach mode
  // (back-ends join as they attach). Each change adds one.
  std::uint64_t id = 0;
  // The live back-ends, ascending.
  std::vector<Rank> members;

  bool contains(Rank rank) const { return std::binary_search(members.begin(), members.end(), rank); }
};

// One process of the live tree as a process knows it (Network::status() at the
// front-end, Backend::status() at a back-end).
struct NodeStatus {
  Rank rank = 0;
  Role role = Role::backend;
  std::string host;
  // Where it listens for children and orphans, once known (0 for a back-end, which
  // does not listen, and before the port is learnt).
  std::uint16_t port = 0;
  std::optional<Rank> parent;  // the current parent (after adoptions); none for the root
  bool alive = true;           // false once its failure was reported
  std::uint32_t incarnation = 0;  // how many times it has been adopted
  std::vector<Rank> children;  // current children
  // Back-ends (docs/membership.md): a member of the current view; its epoch (how
  // many times it was declared failed); how many hellos, reports or connections of
  // it at a stale epoch the tree refused or dropped.
  bool member = false;
  std::uint32_t epoch = 0;
  std::uint64_t stale_dropped = 0;
  // Front-end only: packets of a stream this process dropped because their wave had
  // already closed there (a time-out, or a wave closed without a member after a
  // failure), as reported so far (docs/fault-tolerance.md, "Waves after a failure").
  std::uint64_t late_packets = 0;
};

}  // namespace canopy
