// ChildTable (core/children.h): children by index, found by rank whatever order they
// were added in (an adopted orphan's rank may be below or above its new siblings').
#include <gtest/gtest.h>

#include "core/children.h"

namespace canopy::core {
namespace {

TEST(ChildTable, FindsEachChildByRankWhateverTheOrderTheyCameIn) {
  ChildTable children;
  const Rank ranks[] = {1000005, 7, 1000001, 3, 4000000000u, 0, 42};
  for (std::size_t i = 0; i < std::size(ranks); ++i) {
    EXPECT_EQ(children.add(ranks[i], i % 2 ? Role::backend : Role::commnode), i);
  }
  ASSERT_EQ(children.size(), std::size(ranks));
  for (std::size_t i = 0; i < std::size(ranks); ++i) {
    ASSERT_EQ(children.index_of(ranks[i]), i) << "rank " << ranks[i];
    EXPECT_EQ(children[i].rank, ranks[i]);
  }
  for (Rank absent : {Rank{1}, Rank{8}, Rank{1000002}, Rank{4000000001u}}) {
    EXPECT_EQ(children.index_of(absent), std::nullopt) << "rank " << absent;
  }
}

// A child's loss (its reason, exit status, timer) is made when it is lost, not with
// every child.
TEST(ChildTable, AChildHoldsNothingOfALossUntilItIsLost) {
  ChildTable children;
  children.add(5, Role::backend);
  EXPECT_EQ(children[0].loss, nullptr);
  EXPECT_FALSE(children[0].never_connected());
  children[0].lost().close_reason = Child::kNeverConnected;
  EXPECT_TRUE(children[0].never_connected());
  EXPECT_LE(sizeof(Child), 48u);  // 88 until stop 76
}

}  // namespace
}  // namespace canopy::core
