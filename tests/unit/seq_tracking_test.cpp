// SeqTrackingList: ordered, merged ranges of sequence numbers (paper 002).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "transport/seq_tracking.h"

using canopy::transport::SeqRange;
using canopy::transport::SeqTrackingList;

using Ranges = std::vector<SeqRange>;

TEST(SeqTrackingList, MergesAdjacentRanges) {
  SeqTrackingList list;
  list.insert(0, 10);
  list.insert(10, 20);
  EXPECT_EQ(list.ranges(), (Ranges{{0, 20}}));
}

TEST(SeqTrackingList, KeepsOutOfOrderRangesSortedAndSeparate) {
  SeqTrackingList list;
  list.insert(50, 60);
  list.insert(10, 20);
  list.insert(30, 40);
  EXPECT_EQ(list.ranges(), (Ranges{{10, 20}, {30, 40}, {50, 60}}));
}

TEST(SeqTrackingList, ARangeFillingAGapJoinsItsNeighbours) {
  SeqTrackingList list;
  list.insert(0, 10);
  list.insert(20, 30);
  EXPECT_EQ(list.insert(10, 20), 10u);
  EXPECT_EQ(list.ranges(), (Ranges{{0, 30}}));
}

TEST(SeqTrackingList, InsertCountsOnlyNewNumbersSoDuplicatesCountZero) {
  SeqTrackingList list;
  EXPECT_EQ(list.insert(0, 10), 10u);
  EXPECT_EQ(list.insert(0, 10), 0u);
  EXPECT_EQ(list.insert(2, 5), 0u);
  EXPECT_EQ(list.insert(5, 15), 5u);
  EXPECT_EQ(list.ranges(), (Ranges{{0, 15}}));
}

TEST(SeqTrackingList, ARangeOverSeveralRangesMergesThemAll) {
  SeqTrackingList list;
  list.insert(10, 20);
  list.insert(30, 40);
  list.insert(50, 60);
  EXPECT_EQ(list.insert(15, 55), 20u);  // 20..30 and 40..50 are new
  EXPECT_EQ(list.ranges(), (Ranges{{10, 60}}));
}

TEST(SeqTrackingList, EmptyRangesRecordNothing) {
  SeqTrackingList list;
  EXPECT_EQ(list.insert(5, 5), 0u);
  EXPECT_TRUE(list.empty());
}

TEST(SeqTrackingList, ContainsNeedsEveryNumberOfTheRange) {
  SeqTrackingList list;
  list.insert(0, 10);
  list.insert(12, 20);
  EXPECT_TRUE(list.contains(0, 10));
  EXPECT_TRUE(list.contains(3, 7));
  EXPECT_FALSE(list.contains(5, 15));
  EXPECT_FALSE(list.contains(10));
  EXPECT_TRUE(list.contains(12));
  EXPECT_FALSE(list.contains(20));
}

TEST(SeqTrackingList, IntersectsWhenAnyNumberIsRecorded) {
  SeqTrackingList list;
  list.insert(10, 20);
  EXPECT_TRUE(list.intersects(5, 11));
  EXPECT_TRUE(list.intersects(19, 30));
  EXPECT_FALSE(list.intersects(0, 10));
  EXPECT_FALSE(list.intersects(20, 30));
}

TEST(SeqTrackingList, MissingListsTheGapsOfARange) {
  SeqTrackingList list;
  list.insert(10, 20);
  list.insert(30, 40);
  Ranges gaps;
  list.missing(0, 50, gaps);
  EXPECT_EQ(gaps, (Ranges{{0, 10}, {20, 30}, {40, 50}}));
  gaps.clear();
  list.missing(12, 18, gaps);
  EXPECT_TRUE(gaps.empty());
  gaps.clear();
  list.missing(15, 35, gaps);
  EXPECT_EQ(gaps, (Ranges{{20, 30}}));
}

TEST(SeqTrackingList, ContiguousEndIsTheInOrderPoint) {
  SeqTrackingList list;
  EXPECT_EQ(list.contiguous_end(0), 0u);
  list.insert(20, 30);
  EXPECT_EQ(list.contiguous_end(0), 0u);  // out of order: nothing in order yet
  list.insert(0, 10);
  EXPECT_EQ(list.contiguous_end(0), 10u);
  list.insert(10, 20);
  EXPECT_EQ(list.contiguous_end(0), 30u);
  EXPECT_EQ(list.contiguous_end(25), 30u);
  EXPECT_EQ(list.contiguous_end(30), 30u);
}

TEST(SeqTrackingList, EraseSplitsARangeAndLeavesNeighboursAlone) {
  SeqTrackingList list;
  list.insert(0, 10);
  list.insert(20, 40);
  list.insert(50, 60);
  list.erase(25, 30);
  EXPECT_EQ(list.ranges(), (Ranges{{0, 10}, {20, 25}, {30, 40}, {50, 60}}));
  list.erase(10, 20);  // touches two ranges, removes nothing
  EXPECT_EQ(list.ranges(), (Ranges{{0, 10}, {20, 25}, {30, 40}, {50, 60}}));
  list.erase(5, 55);
  EXPECT_EQ(list.ranges(), (Ranges{{0, 5}, {55, 60}}));
}

TEST(SeqTrackingList, AgreesWithABitmapUnderRandomInsertsAndErases) {
  std::mt19937 rng(42);
  const std::uint64_t n = 400;
  std::vector<bool> model(n, false);
  SeqTrackingList list;
  for (int step = 0; step < 5000; ++step) {
    std::uint64_t a = rng() % n, b = rng() % n;
    if (a > b) std::swap(a, b);
    b = std::min(n, b + 1 + rng() % 5);
    if (rng() % 4 == 0) {
      list.erase(a, b);
      for (auto i = a; i < b; ++i) model[i] = false;
    } else {
      std::uint64_t fresh = 0;
      for (auto i = a; i < b; ++i) fresh += model[i] ? 0 : 1;
      ASSERT_EQ(list.insert(a, b), fresh);
      for (auto i = a; i < b; ++i) model[i] = true;
    }
    // Ranges are sorted, disjoint and never adjacent, and hold exactly the model.
    const auto& r = list.ranges();
    for (std::size_t i = 0; i < r.size(); ++i) {
      ASSERT_LT(r[i].begin, r[i].end);
      if (i > 0) {
        ASSERT_LT(r[i - 1].end, r[i].begin);
      }
    }
    std::uint64_t q = rng() % n;
    ASSERT_EQ(list.contains(q), model[q]) << "step " << step << " seq " << q;
    std::uint64_t in_order = 0;
    while (in_order < n && model[in_order]) ++in_order;
    ASSERT_EQ(list.contiguous_end(0), in_order);
  }
}
