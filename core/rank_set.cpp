#include "core/rank_set.h"

#include <algorithm>
#include <iterator>

namespace canopy::core {

namespace {

// The first range whose last rank is at least `rank`.
template <typename Ranges>
auto range_at_or_after(Ranges& ranges, Rank rank) {
  return std::lower_bound(ranges.begin(), ranges.end(), rank,
                          [](const RankSet::Range& range, Rank r) { return range.second < r; });
}

}  // namespace

RankSet RankSet::of(std::vector<Rank> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  RankSet set;
  for (Rank r : ranks) {
    if (!set.ranges_.empty() && set.ranges_.back().second + 1 == r) set.ranges_.back().second = r;
    else set.ranges_.emplace_back(r, r);
  }
  set.size_ = ranks.size();
  return set;
}

bool RankSet::from_ranges(const std::vector<Range>& ranges, RankSet& out) {
  RankSet set;
  for (const auto& [first, last] : ranges) {
    if (last < first) return false;
    if (!set.ranges_.empty()) {
      const Rank before = set.ranges_.back().second;
      if (first <= before) return false;
      if (before + 1 == first) {
        set.ranges_.back().second = last;
        set.size_ += std::size_t{last} - first + 1;
        continue;
      }
    }
    set.ranges_.emplace_back(first, last);
    set.size_ += std::size_t{last} - first + 1;
  }
  out = std::move(set);
  return true;
}

bool RankSet::contains(Rank rank) const {
  auto it = range_at_or_after(ranges_, rank);
  return it != ranges_.end() && it->first <= rank;
}

bool RankSet::insert(Rank rank) {
  auto it = range_at_or_after(ranges_, rank);
  if (it != ranges_.end() && it->first <= rank) return false;
  ++size_;
  // Joins the range before (ending at rank - 1) and/or the one after (starting at
  // rank + 1).
  const bool joins_before = it != ranges_.begin() && std::prev(it)->second + 1 == rank;
  const bool joins_after = it != ranges_.end() && it->first == rank + 1;
  if (joins_before && joins_after) {
    std::prev(it)->second = it->second;
    ranges_.erase(it);
  } else if (joins_before) {
    std::prev(it)->second = rank;
  } else if (joins_after) {
    it->first = rank;
  } else {
    ranges_.insert(it, Range{rank, rank});
  }
  return true;
}

bool RankSet::erase(Rank rank) {
  auto it = range_at_or_after(ranges_, rank);
  if (it == ranges_.end() || it->first > rank) return false;
  --size_;
  if (it->first == it->second) {
    ranges_.erase(it);
  } else if (it->first == rank) {
    ++it->first;
  } else if (it->second == rank) {
    --it->second;
  } else {
    const Range after{rank + 1, it->second};
    it->second = rank - 1;
    ranges_.insert(std::next(it), after);
  }
  return true;
}

std::vector<Rank> RankSet::to_vector() const {
  std::vector<Rank> out;
  out.reserve(size_);
  for (Rank r : *this) out.push_back(r);
  return out;
}

void RankSet::unite(const RankSet& other) {
  std::vector<Range> both;
  both.reserve(ranges_.size() + other.ranges_.size());
  std::merge(ranges_.begin(), ranges_.end(), other.ranges_.begin(), other.ranges_.end(), std::back_inserter(both));
  std::vector<Range> joined;
  std::size_t size = 0;
  for (const auto& [first, last] : both) {
    // Overlapping or adjacent to the last range kept: one range.
    if (!joined.empty() && std::uint64_t{first} <= std::uint64_t{joined.back().second} + 1) {
      if (last > joined.back().second) {
        size += last - joined.back().second;
        joined.back().second = last;
      }
      continue;
    }
    joined.emplace_back(first, last);
    size += std::size_t{last} - first + 1;
  }
  ranges_ = std::move(joined);
  size_ = size;
}

void RankSet::minus(const RankSet& other, std::vector<Rank>& out) const {
  // Walks both lists of ranges once: each range of this set, less the ranges of
  // `other` that overlap it.
  auto o = other.ranges_.begin();
  for (const auto& [first, last] : ranges_) {
    std::uint64_t next = first;  // the first rank of [first, last] not yet placed
    while (o != other.ranges_.end() && o->second < first) ++o;
    for (auto p = o; p != other.ranges_.end() && p->first <= last; ++p) {
      for (std::uint64_t r = next; r < p->first; ++r) out.push_back(static_cast<Rank>(r));
      next = std::max<std::uint64_t>(next, std::uint64_t{p->second} + 1);
    }
    for (std::uint64_t r = next; r <= last; ++r) out.push_back(static_cast<Rank>(r));
  }
}

}  // namespace canopy::core
