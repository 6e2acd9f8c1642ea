// RankIndex: each rank's position in a list of distinct ranks, held as runs.
// Internal to Canopy's own classes (Topology, and the live tree of core/): a tool has
// no need of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace canopy {

using Rank = std::uint32_t;

// RankIndex: each rank's position in a list of distinct ranks (0, 1, ...), held as
// runs of consecutive ranks at consecutive positions: where a process keeps each
// process of its tree (Topology, TreeView). A generated tree lists its commnodes and its
// back-ends each in one run of ranks, so the index of a million processes is a few
// runs, where a hash map took about 40 bytes a process. Lookups O(log runs); adding
// a rank O(runs) at worst, building from a list O(n log n).
class RankIndex {
 public:
  struct Run {
    Rank first;
    Rank last;                // inclusive
    std::uint32_t position;   // first's; last's is position + (last - first)
    bool operator==(const Run&) const = default;
  };

  RankIndex() = default;
  // ranks[i] at position i; false (and `out` untouched) if a rank is listed twice.
  static bool of(const std::vector<Rank>& ranks, RankIndex& out);

  std::optional<std::uint32_t> find(Rank rank) const;
  bool contains(Rank rank) const { return find(rank).has_value(); }
  // Adds `rank` at position size(); false if it is there already.
  bool add(Rank rank);
  std::size_t size() const { return size_; }
  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::vector<Run> runs_;  // ascending by rank, disjoint
  std::size_t size_ = 0;
};

}  // namespace canopy
