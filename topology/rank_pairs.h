// A vector of (rank, value) pairs ascending by rank, used as a small map: a few bytes
// an entry where a hash map took a node and a bucket, about 40 (docs/scale.md, "A
// commnode's state per child"). Ranks mostly come in ascending order (parts, child
// tables, routes are built so), which makes setting one an append.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "canopy/topology.h"

namespace canopy::topology {

template <class V>
using RankPairs = std::vector<std::pair<Rank, V>>;

// Where `rank` is, or would go.
template <class Pairs>
auto rank_place(Pairs& pairs, Rank rank) {
  return std::lower_bound(pairs.begin(), pairs.end(), rank, [](const auto& p, Rank r) { return p.first < r; });
}

// The value of `rank`, or null.
template <class V>
const V* find_rank(const RankPairs<V>& pairs, Rank rank) {
  auto at = rank_place(pairs, rank);
  return at == pairs.end() || at->first != rank ? nullptr : &at->second;
}

// Sets the value of `rank`, adding it if it is not there.
template <class V>
void set_rank(RankPairs<V>& pairs, Rank rank, V value) {
  if (pairs.empty() || pairs.back().first < rank) {
    pairs.emplace_back(rank, std::move(value));
    return;
  }
  auto at = rank_place(pairs, rank);
  if (at != pairs.end() && at->first == rank) at->second = std::move(value);
  else pairs.emplace(at, rank, std::move(value));
}

// Removes `rank`, if it is there.
template <class V>
void erase_rank(RankPairs<V>& pairs, Rank rank) {
  auto at = rank_place(pairs, rank);
  if (at != pairs.end() && at->first == rank) pairs.erase(at);
}

}  // namespace canopy::topology
