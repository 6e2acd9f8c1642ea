// RankSet: a set of ranks held as ascending, disjoint ranges.
//
// What the membership view is at every process (docs/membership.md, "What a process
// holds"): view 0 of a generated tree is one range, and each back-end that leaves
// splits one range in two, so a view costs 8 bytes per range, not 4 per member: a
// back-end of a million-member view holds a few hundred bytes after a few failures,
// where it held 4 MB. Membership tests are O(log ranges); a change of k ranks costs
// O(k · ranges) at worst (inserting or splitting a range moves those after it).
// Pure logic, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "canopy/topology.h"

namespace canopy::core {

class RankSet {
 public:
  using Range = std::pair<Rank, Rank>;  // first and last, both in

  RankSet() = default;
  // From ranks in any order, duplicates allowed.
  static RankSet of(std::vector<Rank> ranks);
  // From ascending, disjoint ranges (as rank_ranges() makes them); adjacent ones are
  // joined. False if they are not ascending and disjoint, or a range is reversed.
  static bool from_ranges(const std::vector<Range>& ranges, RankSet& out);

  bool contains(Rank rank) const;
  // Whether it was not in / was in.
  bool insert(Rank rank);
  bool erase(Rank rank);
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<Range>& ranges() const { return ranges_; }
  // Every rank, ascending (O(size): for a public View, not for the protocol).
  std::vector<Rank> to_vector() const;
  // Every rank, ascending, without a list of them: for (Rank r : set).
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Rank;
    using difference_type = std::ptrdiff_t;
    using pointer = const Rank*;
    using reference = Rank;
    Iterator() = default;
    Iterator(const std::vector<Range>* ranges, std::size_t range)
        : ranges_(ranges), range_(range), rank_(range < ranges->size() ? (*ranges)[range].first : 0) {}
    Rank operator*() const { return rank_; }
    Iterator& operator++() {
      if (rank_ == (*ranges_)[range_].second) {
        ++range_;
        rank_ = range_ < ranges_->size() ? (*ranges_)[range_].first : 0;
      } else {
        ++rank_;
      }
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const Iterator& other) const { return range_ == other.range_ && rank_ == other.rank_; }

   private:
    const std::vector<Range>* ranges_ = nullptr;
    std::size_t range_ = 0;
    Rank rank_ = 0;
  };
  Iterator begin() const { return Iterator(&ranges_, 0); }
  Iterator end() const { return Iterator(&ranges_, ranges_.size()); }
  // Adds every rank of `other`: O(ranges of both).
  void unite(const RankSet& other);
  // The ranks of this set not in `other`, ascending, into `out`: O(ranges of both +
  // what is found).
  void minus(const RankSet& other, std::vector<Rank>& out) const;

  bool operator==(const RankSet& other) const = default;

 private:
  std::vector<Range> ranges_;
  std::size_t size_ = 0;
};

}  // namespace canopy::core
