// The membership view: which back-ends of the tree are alive, as of which view
// (docs/membership.md). Every process holds one; the front-end changes it, one view
// at a time, when back-ends fail or join, and every process is told of each change
// it applies (Event::Kind::view).
#pragma once

#include <algorithm>
#include <cstdint>
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

}  // namespace canopy
