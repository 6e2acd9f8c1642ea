#include "core/rank_map.h"

#include <algorithm>

namespace canopy::core {

namespace {

// The first run whose last rank is at least `rank`.
template <typename Runs>
auto run_at_or_after(Runs& runs, Rank rank) {
  return std::lower_bound(runs.begin(), runs.end(), rank, [](const RankMap::Run& run, Rank r) { return run.last < r; });
}

}  // namespace

RankMap RankMap::of(std::vector<std::pair<Rank, Value>> pairs) {
  // Stable: of a rank given twice, the later pair comes last and wins.
  std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  RankMap map;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (i + 1 < pairs.size() && pairs[i + 1].first == pairs[i].first) continue;
    const auto [rank, value] = pairs[i];
    if (!map.runs_.empty() && map.runs_.back().last + 1 == rank && map.runs_.back().value == value) {
      map.runs_.back().last = rank;
    } else {
      map.runs_.push_back({rank, rank, value});
    }
    ++map.size_;
  }
  return map;
}

std::optional<RankMap::Value> RankMap::find(Rank rank) const {
  auto it = run_at_or_after(runs_, rank);
  if (it == runs_.end() || it->first > rank) return std::nullopt;
  return it->value;
}

void RankMap::set(Rank rank, Value value) {
  auto it = run_at_or_after(runs_, rank);
  if (it != runs_.end() && it->first <= rank) {
    if (it->value == value) return;
    // Split the run around `rank`: [first, rank-1] old, [rank] new, [rank+1, last] old.
    const Run run = *it;
    std::size_t i = static_cast<std::size_t>(it - runs_.begin());
    runs_.erase(it);
    std::vector<Run> pieces;
    if (run.first < rank) pieces.push_back({run.first, rank - 1, run.value});
    const std::size_t at = i + pieces.size();
    pieces.push_back({rank, rank, value});
    if (rank < run.last) pieces.push_back({rank + 1, run.last, run.value});
    runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(i), pieces.begin(), pieces.end());
    join_around(at);
    return;
  }
  ++size_;
  const std::size_t i = static_cast<std::size_t>(it - runs_.begin());
  runs_.insert(it, Run{rank, rank, value});
  join_around(i);
}

bool RankMap::erase(Rank rank) {
  auto it = run_at_or_after(runs_, rank);
  if (it == runs_.end() || it->first > rank) return false;
  --size_;
  if (it->first == it->last) {
    runs_.erase(it);
  } else if (it->first == rank) {
    ++it->first;
  } else if (it->last == rank) {
    --it->last;
  } else {
    const Run after{rank + 1, it->last, it->value};
    it->last = rank - 1;
    runs_.insert(std::next(it), after);
  }
  return true;
}

void RankMap::join_around(std::size_t i) {
  if (i + 1 < runs_.size() && runs_[i].last + 1 == runs_[i + 1].first && runs_[i].value == runs_[i + 1].value) {
    runs_[i].last = runs_[i + 1].last;
    runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(i + 1));
  }
  if (i > 0 && runs_[i - 1].last + 1 == runs_[i].first && runs_[i - 1].value == runs_[i].value) {
    runs_[i - 1].last = runs_[i].last;
    runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

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

}  // namespace canopy::core
