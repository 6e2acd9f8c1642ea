// core::RankSet: the membership view as ranges (docs/membership.md, "What a process
// holds"), checked against a std::set of the same ranks.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

#include "core/rank_set.h"

namespace canopy::core {
namespace {

std::vector<Rank> ranks_of(const std::set<Rank>& s) { return {s.begin(), s.end()}; }

TEST(RankSet, AViewOfOneRangeSplitsOnlyWhereMembersLeave) {
  std::vector<Rank> all(1'000'000);
  for (Rank r = 0; r < all.size(); ++r) all[r] = r;
  RankSet view = RankSet::of(all);
  EXPECT_EQ(view.ranges().size(), 1u);
  EXPECT_EQ(view.size(), 1'000'000u);
  for (Rank gone : {10u, 500'000u, 999'999u, 0u}) EXPECT_TRUE(view.erase(gone));
  EXPECT_FALSE(view.erase(10)) << "gone already";
  EXPECT_EQ(view.ranges(), (std::vector<RankSet::Range>{{1, 9}, {11, 499'999}, {500'001, 999'998}}));
  EXPECT_EQ(view.size(), 999'996u);
  EXPECT_FALSE(view.contains(500'000));
  EXPECT_TRUE(view.contains(500'001));
  EXPECT_TRUE(view.insert(500'000));
  EXPECT_FALSE(view.insert(500'000)) << "in already";
  EXPECT_EQ(view.ranges(), (std::vector<RankSet::Range>{{1, 9}, {11, 999'998}})) << "a rejoin closes the gap";
}

TEST(RankSet, FromRangesJoinsAdjacentOnesAndRefusesWhatIsNotAscendingAndDisjoint) {
  RankSet set;
  ASSERT_TRUE(RankSet::from_ranges({{0, 3}, {4, 4}, {9, 12}}, set));
  EXPECT_EQ(set.ranges(), (std::vector<RankSet::Range>{{0, 4}, {9, 12}}));
  EXPECT_EQ(set.size(), 9u);
  RankSet untouched = set;
  EXPECT_FALSE(RankSet::from_ranges({{0, 3}, {3, 5}}, set)) << "overlap";
  EXPECT_FALSE(RankSet::from_ranges({{5, 7}, {0, 1}}, set)) << "descending";
  EXPECT_FALSE(RankSet::from_ranges({{4, 2}}, set)) << "reversed";
  EXPECT_EQ(set, untouched) << "a refused list leaves the set as it was";
  ASSERT_TRUE(RankSet::from_ranges({{0xfffffffe, 0xffffffff}}, set));
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.to_vector(), (std::vector<Rank>{0xfffffffe, 0xffffffff}));
}

TEST(RankSet, EveryOperationAgreesWithASetOfTheSameRanks) {
  std::mt19937 random(47);
  for (int round = 0; round < 50; ++round) {
    std::set<Rank> a_ranks, b_ranks;
    RankSet a, b;
    for (int step = 0; step < 400; ++step) {
      const Rank r = random() % 200;
      auto [set, ranks] = (step % 2) ? std::tie(a, a_ranks) : std::tie(b, b_ranks);
      if (random() % 3 == 0) {
        EXPECT_EQ(set.erase(r), ranks.erase(r) == 1);
      } else {
        EXPECT_EQ(set.insert(r), ranks.insert(r).second);
      }
    }
    EXPECT_EQ(a.to_vector(), ranks_of(a_ranks));
    EXPECT_EQ(a.size(), a_ranks.size());
    EXPECT_EQ(a, RankSet::of(ranks_of(a_ranks))) << "one way to hold a set of ranks";
    for (Rank r = 0; r < 200; ++r) EXPECT_EQ(a.contains(r), a_ranks.count(r) == 1) << r;
    for (std::size_t i = 1; i < a.ranges().size(); ++i) {
      EXPECT_GT(a.ranges()[i].first, a.ranges()[i - 1].second + 1) << "ranges apart, never adjacent";
    }
    RankSet united = a;
    united.unite(b);
    std::set<Rank> union_ranks = a_ranks;
    union_ranks.insert(b_ranks.begin(), b_ranks.end());
    EXPECT_EQ(united, RankSet::of(ranks_of(union_ranks)));
    std::vector<Rank> walked;
    for (Rank r : united) walked.push_back(r);
    EXPECT_EQ(walked, ranks_of(union_ranks));
    std::vector<Rank> a_not_b, expected;
    a.minus(b, a_not_b);
    std::set_difference(a_ranks.begin(), a_ranks.end(), b_ranks.begin(), b_ranks.end(), std::back_inserter(expected));
    EXPECT_EQ(a_not_b, expected);
  }
}

}  // namespace
}  // namespace canopy::core
