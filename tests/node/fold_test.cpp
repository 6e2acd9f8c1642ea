// Folded parts (docs/scale.md, "A back-end keeps its part folded", "A commnode folds
// its part"; core/folded_part.h), in process on manual time (tree_harness.h): a
// back-end's and a commnode's part folded once nothing reads it, unfolded to heal or
// when read, and folded again with what changed meanwhile.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;

constexpr Rank FE = kFirstInternalRank;
// b:2x2x2: FE+1 and FE+2 on level 1; FE+3 (back-ends 0, 1) and FE+4 (2, 3) under
// FE+1; FE+5 (4, 5) and FE+6 (6, 7) under FE+2.

// A back-end keeps its part of the tree folded (docs/scale.md, "A back-end keeps its
// part folded") through launch, heartbeats, a stream and its waves; its parent's
// failure unfolds it, and it heals from it as from a part held unfolded. The others,
// which heard of nothing, keep theirs folded; reading a back-end's tree (status())
// unfolds it and finds the same part.
TEST(Orphans, ABackEndKeepsItsPartFoldedUntilItsParentFailsAndHealsFromIt) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2", fault);  // FE+1: FE+3 (0, 1), FE+4 (2, 3); FE+2: FE+5 (4, 5), FE+6 (6, 7)
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  expect_whole_wave(tree, stream, 8);
  tree.run_for(3s);  // heartbeats, both ways
  for (Rank b = 0; b < 8; ++b) EXPECT_TRUE(tree.node(b).part_folded()) << "back-end " << b;
  for (Rank c : {FE + 1, FE + 3}) EXPECT_FALSE(tree.node(c).part_folded()) << c;

  tree.kill(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 5s));
  for (Rank orphan : {0u, 1u}) {
    EXPECT_FALSE(tree.node(orphan).part_folded()) << orphan;
    EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 4) << orphan;
  }
  expect_whole_wave(tree, stream, 8);
  for (Rank b = 2; b < 8; ++b) EXPECT_TRUE(tree.node(b).part_folded()) << "back-end " << b << " heard of nothing";
  // Read, back-end 6's part unfolds into its part: FE, FE+1, FE+2, FE+5, FE+6, 6, 7,
  // with the ports of the commnodes it may ask for adoption.
  const canopy::Topology* part = tree.node(6).topology();
  ASSERT_NE(part, nullptr);
  EXPECT_FALSE(tree.node(6).part_folded());
  EXPECT_TRUE(part->partial());
  EXPECT_EQ(part->size(), 7u);
  for (Rank adopter : {FE + 2, FE + 5}) EXPECT_NE(part->at(adopter).port, 0) << adopter;
  EXPECT_EQ(tree.node(6).live_tree()->parent(6), FE + 6);
}

// An adopted back-end kept its part unfolded for ever (89 KB at b:100^3). Now it folds
// it again once left alone (Node::kFoldAgainAfter), with what changed since launch;
// when its new parent fails too, it unfolds the part with those changes and heals from
// it. FE+3 dies: back-ends 0 and 1 go to FE+4 and fold again. FE+4 dies: all four of
// its back-ends are adopted by FE+1 (FE+3, the sibling they would ask first, is known
// to be gone to 0 and 1 from the changes they kept), and every wave is whole.
TEST(Orphans, AnAdoptedBackEndFoldsItsPartAgainAndHealsFromItWhenItsNewParentFails) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2", fault);  // FE+1: FE+3 (0, 1), FE+4 (2, 3); FE+2: FE+5 (4, 5), FE+6 (6, 7)
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  tree.kill(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 5s));
  for (Rank orphan : {0u, 1u}) {
    EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 4) << orphan;
    EXPECT_FALSE(tree.node(orphan).part_folded()) << orphan << " chose its adopter from its part, unfolded";
  }
  expect_whole_wave(tree, stream, 8);
  ASSERT_TRUE(tree.run_until([&] { return tree.node(0).part_folded() && tree.node(1).part_folded(); },
                             3 * core::Node::kFoldAgainAfter + 2s))
      << "the adopted back-ends did not fold their parts again";

  tree.kill(FE + 4);
  auto second = [&](Rank orphan) {
    const auto& own = tree.heard(orphan).recovered;
    return orphan < 2 ? (own.size() >= 2 ? &own.back() : nullptr) : (own.empty() ? nullptr : &own.back());
  };
  ASSERT_TRUE(tree.run_until([&] { return second(0) && second(1) && second(2) && second(3); }, 10s))
      << "the back-ends of FE+4 were not all adopted";
  for (Rank orphan : {0u, 1u, 2u, 3u}) {
    EXPECT_EQ(second(orphan)->failed_parent, FE + 4) << orphan;
    EXPECT_EQ(second(orphan)->adopter, FE + 1) << orphan;
  }
  expect_whole_wave(tree, stream, 8);
  // Unfolded to heal, back-end 0's part holds what it kept: FE+3 gone, itself under
  // FE+1 now.
  const core::TreeView* view = tree.node(0).live_tree();
  ASSERT_NE(view, nullptr);
  EXPECT_FALSE(view->alive(FE + 3));
  EXPECT_FALSE(view->alive(FE + 4));
  EXPECT_EQ(view->parent(0), FE + 1);
}

// A commnode holding its part folds it once its subtree has been up a while
// (core/folded_part.h, "A commnode folds its part"): a stream opens and its waves go
// through it folded, by the routes it kept. FE+3 fails: FE+4 adopts back-ends 0 and
// 1 (its part did not hold them: it grafts them), unfolds to heal, and folds again
// with its grafts; its waves reach 0 and 1 by the routes it kept. Then FE+1 fails:
// FE+4, orphaned, unfolds its part with the grafts and sends its adopter its live
// subtree, 0 and 1 in it, and every wave is whole. Before stop 83 a commnode held
// its part unfolded for ever (344 bytes a child now, 618 then: docs/scale.md).
TEST(Orphans, ACommnodeFoldsItsPartOnceUpAndAgainAfterAHealWithTheOrphansItGrafted) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  const std::vector<Rank> commnodes{FE + 1, FE + 2, FE + 3, FE + 4, FE + 5, FE + 6};
  auto all_folded = [&](const std::vector<Rank>& ranks) {
    return std::all_of(ranks.begin(), ranks.end(), [&](Rank r) { return tree.node(r).part_folded(); });
  };
  ASSERT_TRUE(tree.run_until([&] { return all_folded(commnodes); }, 3 * core::Node::kFoldAgainAfter + 2s))
      << "the commnodes did not fold their parts once up";
  const StreamId stream = tree.open_stream("sum");
  expect_whole_wave(tree, stream, 8);
  EXPECT_TRUE(all_folded(commnodes)) << "a stream or a wave unfolded a commnode's part";

  tree.kill(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 5s));
  for (Rank orphan : {0u, 1u}) EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 4) << orphan;
  EXPECT_FALSE(tree.node(FE + 4).part_folded()) << "FE+4 adopted without unfolding its part";
  ASSERT_TRUE(tree.run_until([&] { return tree.node(FE + 4).part_folded(); }, 3 * core::Node::kFoldAgainAfter + 2s))
      << "FE+4 did not fold its part again after adopting";
  expect_whole_wave(tree, stream, 8);
  EXPECT_TRUE(tree.node(FE + 4).part_folded()) << "a wave through FE+4 unfolded its part";

  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, FE + 4) != nullptr; }, 5s))
      << "FE+4 was not adopted";
  EXPECT_EQ(own_recovery(tree, FE + 4)->adopter, FE + 2);
  expect_whole_wave(tree, stream, 8);
  // Unfolded to heal, FE+4's part holds its grafts: 0 and 1 below it, with the host
  // they run on.
  const core::TreeView* view = tree.node(FE + 4).live_tree();
  ASSERT_NE(view, nullptr);
  for (Rank b : {0u, 1u}) {
    EXPECT_EQ(view->parent(b), FE + 4) << b;
    ASSERT_NE(tree.node(FE + 4).topology()->find(b), nullptr) << b;
    EXPECT_EQ(tree.node(FE + 4).topology()->find(b)->host, tree.topology().at(b).host) << b;
  }
  // FE+2, its adopter, holds FE+4's subtree with them, and routes to them through it.
  EXPECT_EQ(tree.node(FE + 2).live_tree()->parent(0), FE + 4);
  EXPECT_TRUE(tree.node(FE + 2).route_to(0).has_value());
}

// The front-end publishes every commnode's port once the whole tree is up; a subtree
// up long before has folded its commnodes' parts by then. A folded commnode passes
// the ports on as an unfolded one does: FE+6 starts 3 s late, FE+3 and FE+1 have
// folded, and back-end 0 still learns the port of FE+4, which it would ask to adopt
// it. (Stop 83's first fold kept them as a back-end does, passing nothing on.)
TEST(Orphans, ACommnodeFoldedBeforeTheTreeIsUpPassesThePortsOnToItsBackEnds) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2", fault);
  tree.start_frozen(FE + 6);
  EXPECT_FALSE(tree.launch(3s)) << "up without FE+6";
  for (Rank c : {FE + 1, FE + 3}) ASSERT_TRUE(tree.node(c).part_folded()) << c << " did not fold";
  tree.thaw(FE + 6);
  ASSERT_TRUE(tree.until_up(5s)) << "back-end 0 did not learn its potential adopters' ports";
  const canopy::Topology* part = tree.node(0).topology();
  ASSERT_NE(part, nullptr);
  EXPECT_NE(part->at(FE + 4).port, 0);
  // And it heals with them.
  const StreamId stream = tree.open_stream("sum");
  tree.kill(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 5s));
  expect_whole_wave(tree, stream, 8);
}

}  // namespace
}  // namespace canopy::testing
