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

}  // namespace canopy::core
