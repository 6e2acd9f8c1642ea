#include "canopy/rank_index.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace canopy {

bool RankIndex::of(const std::vector<Rank>& ranks, RankIndex& out) {
  std::vector<std::pair<Rank, std::uint32_t>> by_rank;
  by_rank.reserve(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) by_rank.emplace_back(ranks[i], static_cast<std::uint32_t>(i));
  std::sort(by_rank.begin(), by_rank.end());
  RankIndex index;
  for (std::size_t i = 0; i < by_rank.size(); ++i) {
    const auto [rank, position] = by_rank[i];
    if (i > 0 && by_rank[i - 1].first == rank) return false;
    if (!index.runs_.empty()) {
      Run& last = index.runs_.back();
      if (last.last + 1 == rank && last.position + (last.last - last.first) + 1 == position) {
        last.last = rank;
        continue;
      }
    }
    index.runs_.push_back({rank, rank, position});
  }
  index.size_ = ranks.size();
  out = std::move(index);
  return true;
}

std::optional<std::uint32_t> RankIndex::find(Rank rank) const {
  auto it = std::lower_bound(runs_.begin(), runs_.end(), rank, [](const Run& run, Rank r) { return run.last < r; });
  if (it == runs_.end() || it->first > rank) return std::nullopt;
  return it->position + (rank - it->first);
}

bool RankIndex::add(Rank rank) {
  auto it = std::lower_bound(runs_.begin(), runs_.end(), rank, [](const Run& run, Rank r) { return run.last < r; });
  if (it != runs_.end() && it->first <= rank) return false;
  const auto position = static_cast<std::uint32_t>(size_++);
  // Joins the run before when it ends at rank - 1 and at the position before. (The
  // run after, starting at rank + 1, holds an earlier position: it cannot follow.)
  if (it != runs_.begin()) {
    Run& before = *std::prev(it);
    if (before.last + 1 == rank && before.position + (before.last - before.first) + 1 == position) {
      before.last = rank;
      return true;
    }
  }
  runs_.insert(it, Run{rank, rank, position});
  return true;
}

}  // namespace canopy
