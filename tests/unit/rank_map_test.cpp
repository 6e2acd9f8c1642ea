// core::RankMap: routes as runs of ranks (LiveTree::route_to), checked against a
// std::map of the same pairs.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/rank_map.h"

namespace canopy::core {
namespace {

// Every run is ascending, disjoint, and no two touching runs agree (or they would be
// one); the runs say exactly what `expected` says.
void expect_same(const RankMap& map, const std::map<Rank, RankMap::Value>& expected) {
  ASSERT_EQ(map.size(), expected.size());
  std::map<Rank, RankMap::Value> said;
  const auto& runs = map.runs();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    ASSERT_LE(runs[i].first, runs[i].last);
    if (i > 0) {
      ASSERT_LT(runs[i - 1].last, runs[i].first);
      ASSERT_FALSE(runs[i - 1].last + 1 == runs[i].first && runs[i - 1].value == runs[i].value)
          << "runs " << i - 1 << " and " << i << " touch and agree";
    }
    for (Rank r = runs[i].first; r <= runs[i].last; ++r) said[r] = runs[i].value;
  }
  EXPECT_EQ(said, expected);
  for (const auto& [rank, value] : expected) EXPECT_EQ(map.find(rank), value) << rank;
}

// A front-end of a million back-ends under a hundred children: a hundred runs.
TEST(RankMap, TheBackEndsOfAGeneratedTreeAreARunAChild) {
  std::vector<std::pair<Rank, RankMap::Value>> pairs;
  for (Rank b = 0; b < 1'000'000; ++b) pairs.emplace_back(b, b / 10'000);
  const RankMap map = RankMap::of(std::move(pairs));
  EXPECT_EQ(map.size(), 1'000'000u);
  ASSERT_EQ(map.runs().size(), 100u);
  EXPECT_EQ(map.find(0), 0u);
  EXPECT_EQ(map.find(999'999), 99u);
  EXPECT_EQ(map.find(123'456), 12u);
  EXPECT_EQ(map.find(1'000'000), std::nullopt);
}

TEST(RankMap, SettingARankSplitsItsRunAndMovingItBackJoinsItAgain) {
  RankMap map = RankMap::of({{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 1}, {5, 1}});
  ASSERT_EQ(map.runs().size(), 2u);
  map.set(2, 1);  // an orphan adopted under another child
  EXPECT_EQ(map.runs(), (std::vector<RankMap::Run>{{0, 1, 0}, {2, 2, 1}, {3, 3, 0}, {4, 5, 1}}));
  map.set(3, 1);  // its sibling follows: it joins the run after, and the one it came from
  EXPECT_EQ(map.runs(), (std::vector<RankMap::Run>{{0, 1, 0}, {2, 5, 1}}));
  map.set(2, 0);
  map.set(3, 0);
  EXPECT_EQ(map.runs(), (std::vector<RankMap::Run>{{0, 3, 0}, {4, 5, 1}}));
  EXPECT_EQ(map.size(), 6u);
  map.set(9, 1);  // a back-end that joined later
  EXPECT_EQ(map.size(), 7u);
  EXPECT_EQ(map.find(9), 1u);
  EXPECT_EQ(map.find(7), std::nullopt);
}

TEST(RankMap, ErasingARankLeavesTheRestOfItsRun) {
  RankMap map = RankMap::of({{10, 3}, {11, 3}, {12, 3}});
  EXPECT_TRUE(map.erase(11));
  EXPECT_FALSE(map.erase(11));
  EXPECT_FALSE(map.erase(99));
  EXPECT_EQ(map.runs(), (std::vector<RankMap::Run>{{10, 10, 3}, {12, 12, 3}}));
  EXPECT_TRUE(map.erase(10));
  EXPECT_TRUE(map.erase(12));
  EXPECT_TRUE(map.empty());
  EXPECT_TRUE(map.runs().empty());
}

TEST(RankMap, ARankGivenTwiceKeepsItsLastValue) {
  const RankMap map = RankMap::of({{5, 1}, {3, 0}, {5, 2}, {4, 2}});
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.find(5), 2u);
  EXPECT_EQ(map.runs(), (std::vector<RankMap::Run>{{3, 3, 0}, {4, 5, 2}}));
}

// Random sets, moves and erasures over a small range of ranks and values, where runs
// split and join most often, against a std::map.
TEST(RankMap, AgreesWithAMapThroughRandomChanges) {
  std::mt19937 rng(47);
  std::uniform_int_distribution<Rank> rank(0, 63);
  std::uniform_int_distribution<RankMap::Value> value(0, 2);
  std::uniform_int_distribution<int> op(0, 3);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::pair<Rank, RankMap::Value>> pairs;
    std::map<Rank, RankMap::Value> expected;
    for (int i = 0; i < 40; ++i) {
      const Rank r = rank(rng);
      const RankMap::Value v = value(rng);
      pairs.emplace_back(r, v);
      expected[r] = v;
    }
    RankMap map = RankMap::of(pairs);
    expect_same(map, expected);
    for (int i = 0; i < 300; ++i) {
      const Rank r = rank(rng);
      if (op(rng) == 0) {
        EXPECT_EQ(map.erase(r), expected.erase(r) == 1);
      } else {
        const RankMap::Value v = value(rng);
        map.set(r, v);
        expected[r] = v;
      }
      ASSERT_NO_FATAL_FAILURE(expect_same(map, expected)) << "round " << round << ", step " << i;
    }
  }
}

// A generated tree lists its commnodes (ranks from kFirstInternalRank) and then its
// back-ends (from 0): two runs, however many processes.
TEST(RankIndex, AGeneratedTreesProcessesAreTwoRuns) {
  std::vector<Rank> ranks;
  for (Rank c = 0; c < 10'101; ++c) ranks.push_back(kFirstInternalRank + c);
  for (Rank b = 0; b < 1'000'000; ++b) ranks.push_back(b);
  RankIndex index;
  ASSERT_TRUE(RankIndex::of(ranks, index));
  EXPECT_EQ(index.size(), ranks.size());
  EXPECT_EQ(index.runs().size(), 2u);
  EXPECT_EQ(index.find(kFirstInternalRank), 0u);
  EXPECT_EQ(index.find(0), 10'101u);
  EXPECT_EQ(index.find(999'999), 10'101u + 999'999u);
  EXPECT_EQ(index.find(kFirstInternalRank + 10'101), std::nullopt);
  // A back-end that joins later, and the next after it, take the next positions.
  EXPECT_TRUE(index.add(2'000'000));
  EXPECT_TRUE(index.add(2'000'001));
  EXPECT_FALSE(index.add(5)) << "held already";
  EXPECT_EQ(index.find(2'000'001), ranks.size() + 1);
  EXPECT_EQ(index.runs().size(), 3u);
}

TEST(RankIndex, ARankListedTwiceIsRefused) {
  RankIndex index;
  ASSERT_TRUE(RankIndex::of({7}, index));
  EXPECT_FALSE(RankIndex::of({3, 4, 3}, index));
  EXPECT_EQ(index.size(), 1u) << "left as it was";
}

// Ranks added in random order, with runs broken and joined, against a std::map.
TEST(RankIndex, AgreesWithAMapOfPositions) {
  std::mt19937 rng(51);
  std::uniform_int_distribution<Rank> rank(0, 200);
  for (int round = 0; round < 20; ++round) {
    std::vector<Rank> listed;
    std::map<Rank, std::uint32_t> expected;
    for (int i = 0; i < 60; ++i) {
      const Rank r = rank(rng);
      if (expected.emplace(r, static_cast<std::uint32_t>(listed.size())).second) listed.push_back(r);
    }
    RankIndex index;
    ASSERT_TRUE(RankIndex::of(listed, index));
    for (int i = 0; i < 100; ++i) {
      const Rank r = rank(rng);
      const bool fresh = expected.emplace(r, static_cast<std::uint32_t>(expected.size())).second;
      EXPECT_EQ(index.add(r), fresh);
    }
    ASSERT_EQ(index.size(), expected.size());
    for (Rank r = 0; r <= 201; ++r) {
      auto it = expected.find(r);
      EXPECT_EQ(index.find(r), it == expected.end() ? std::nullopt : std::optional<std::uint32_t>(it->second)) << r;
    }
    const auto& runs = index.runs();
    for (std::size_t i = 1; i < runs.size(); ++i) ASSERT_LT(runs[i - 1].last, runs[i].first);
  }
}

}  // namespace
}  // namespace canopy::core
