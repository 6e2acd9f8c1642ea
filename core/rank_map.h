// RankMap: a map from ranks to small values (a child's index), held as runs of
// consecutive ranks with one value.
//
// What a process routes by (LiveTree::route_to: back-end rank -> the child it is
// reached through): the back-ends below one child of a generated tree are one run, so
// the front-end of a million back-ends under a hundred children holds a hundred runs
// (12 bytes each), where a hash map of every back-end held about 32 MB. A tree read
// from a file whose ranks do not run costs a run a rank, still less than the map did.
// Lookups are O(log runs); setting or erasing one rank is O(runs) at worst (a run
// split or joined moves those after it), building from pairs O(n log n).
// Pure logic, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "canopy/topology.h"

namespace canopy::core {

class RankMap {
 public:
  using Value = std::uint32_t;
  struct Run {
    Rank first;
    Rank last;  // inclusive
    Value value;
    bool operator==(const Run&) const = default;
  };

  RankMap() = default;
  // From (rank, value) pairs in any order; a rank given twice keeps its last value.
  static RankMap of(std::vector<std::pair<Rank, Value>> pairs);

  std::optional<Value> find(Rank rank) const;
  // Maps `rank` to `value`, whether or not it was mapped.
  void set(Rank rank, Value value);
  // Whether it was mapped.
  bool erase(Rank rank);
  // Ranks mapped.
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Gives back the room kept for more runs (a part folded: core/folded_part.h).
  void shrink_to_fit() { runs_.shrink_to_fit(); }
  const std::vector<Run>& runs() const { return runs_; }
  bool operator==(const RankMap&) const = default;

 private:
  // Joins the run at `i` with its neighbours where they touch and agree.
  void join_around(std::size_t i);

  std::vector<Run> runs_;  // ascending, disjoint; touching runs hold different values
  std::size_t size_ = 0;
};

}  // namespace canopy::core
