// The membership service in process (docs/membership.md): views and epochs over a
// whole tree on manual time (tree_harness.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using Ranks = std::vector<Rank>;

constexpr Rank FE = kFirstInternalRank;
constexpr Rank C1 = FE + 1, C2 = FE + 2;  // b:2^2: back-ends 0, 1 under C1; 2, 3 under C2

membership::MembershipService& membership_of(TreeHarness& tree, Rank rank) { return tree.runtime(rank).membership; }

// Every running process holds view `id` (the root: stable).
bool everyone_holds(TreeHarness& tree, std::uint64_t id) {
  for (const auto& n : tree.topology().nodes()) {
    if (!tree.alive(n.rank) || tree.frozen(n.rank) || tree.node(n.rank).stopping()) continue;
    if (membership_of(tree, n.rank).view().id != id) return false;
  }
  return !membership_of(tree, FE).changing();
}

// The views a process was told of: one per view, in view order.
void expect_views_in_order(TreeHarness& tree, Rank rank) {
  const auto& views = tree.heard(rank).views;
  for (std::size_t i = 1; i < views.size(); ++i) {
    EXPECT_LT(views[i - 1].view.id, views[i].view.id) << "at " << rank;
  }
}

std::vector<Rank> survivors(TreeHarness& tree) {
  std::vector<Rank> out;
  for (const auto& n : tree.topology().nodes()) {
    if (tree.alive(n.rank) && !tree.frozen(n.rank) && !tree.node(n.rank).stopping()) out.push_back(n.rank);
  }
  return out;
}

TEST(Membership, AtLaunchEveryBackendIsAMemberOfViewZero) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  for (const auto& n : tree.topology().nodes()) {
    EXPECT_EQ(membership_of(tree, n.rank).view().id, 0u);
    EXPECT_EQ(membership_of(tree, n.rank).view().members, (Ranks{0, 1, 2, 3})) << n.rank;
    EXPECT_TRUE(tree.heard(n.rank).views.empty()) << "view 0 is known without a message";
  }
}

TEST(Membership, AFailedBackendLeavesTheViewOnceAtEveryProcess) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  tree.kill(3);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, 5s));
  tree.run_for(10s);  // and nothing more happens: no second view, no resent report
  for (Rank r : survivors(tree)) {
    const auto& views = tree.heard(r).views;
    ASSERT_EQ(views.size(), 1u) << "at " << r;
    EXPECT_EQ(views[0].view.id, 1u);
    EXPECT_EQ(views[0].view.members, (Ranks{0, 1, 2}));
    EXPECT_EQ(views[0].left, Ranks{3});
    EXPECT_TRUE(views[0].joined.empty());
    EXPECT_EQ(membership_of(tree, r).epoch(3), 1u) << "the epoch of a failed member goes up, at " << r;
    EXPECT_EQ(membership_of(tree, r).epoch(2), 0u);
  }
  EXPECT_LT(tree.heard(FE).views[0].stabilise, 1ms) << "nothing to wait for: no time passes on manual time";
}

// Issue 47: a back-end's failure changes the live tree only of its ancestors (their
// routes) and the front-end (status); it went as news to every process, a third of
// what a back-end failure cost each. It goes up only now; every process still learns
// it from the view.
TEST(Membership, ABackendsFailureGoesUpOnlyAndEveryProcessLearnsItFromTheView) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  std::map<Rank, std::size_t> news_before;
  for (Rank r : survivors(tree)) news_before[r] = tree.node(r).news_received();
  tree.kill(3);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, 5s));
  tree.run_for(1s);
  for (Rank r : survivors(tree)) {
    EXPECT_EQ(membership_of(tree, r).view().members, (Ranks{0, 1, 2})) << "at " << r;
    const bool ancestor = r == FE || r == C2;  // C2 is the detector: it saw the loss itself
    // Back-ends 0 and 1 and their parent C1 hold their parts: C2 without its children.
    const bool holds = r != 0 && r != 1 && r != C1;
    ASSERT_EQ(tree.node(r).live_tree()->contains(3), holds) << "at " << r;
    if (holds) {
      EXPECT_EQ(tree.node(r).live_tree()->alive(3), !ancestor) << "at " << r;
    }
    EXPECT_EQ(tree.node(r).news_received(), news_before[r] + (r == FE ? 1 : 0)) << "at " << r;
  }
}

TEST(Membership, BackendsFailingTogetherAllLeaveAndEveryProcessAgrees) {
  TreeHarness tree("b:4^2", FaultToleranceOptions{});  // back-ends 0-15, four under each commnode
  ASSERT_TRUE(tree.launch());
  for (Rank r : {1u, 6u, 7u, 12u}) tree.kill(r);
  const Ranks expected{0, 2, 3, 4, 5, 8, 9, 10, 11, 13, 14, 15};
  auto settled = [&] {
    if (membership_of(tree, FE).changing() || membership_of(tree, FE).view().members != expected) return false;
    return everyone_holds(tree, membership_of(tree, FE).view().id);
  };
  ASSERT_TRUE(tree.run_until(settled, 5s));
  for (Rank r : survivors(tree)) {
    expect_views_in_order(tree, r);
    Ranks left;
    for (const auto& v : tree.heard(r).views) left.insert(left.end(), v.left.begin(), v.left.end());
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (Ranks{1, 6, 7, 12})) << "each failure once, at " << r;
  }
}

// A view travels as the change from the view before it (protocol version 10). A
// commnode that hangs misses one; when it is then found dead, its back-ends, adopted
// elsewhere, are offered the adopter's view by number and digest, find they hold an
// older one, and ask for it whole: each ends with the view every other process has,
// one view event, and the failed member's new epoch. No process that held the view
// before a change asks for it whole.
TEST(Membership, OrphansThatMissedAChangeAskForTheWholeViewAndCatchUp) {
  FaultToleranceOptions fault;
  fault.heartbeat = 100ms;
  fault.suspect = 300ms;
  fault.lost = 600ms;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(C1);  // back-ends 0 and 1 below it will miss view 1
  tree.kill(3);
  ASSERT_TRUE(tree.run_until([&] { return membership_of(tree, 2).view().id == 1; }, 5s));
  EXPECT_EQ(membership_of(tree, 0).view().id, 0u);
  tree.kill(C1);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, 10s));
  for (Rank r : survivors(tree)) {
    EXPECT_EQ(membership_of(tree, r).view().members, (Ranks{0, 1, 2})) << "at " << r;
    EXPECT_EQ(membership_of(tree, r).epoch(3), 1u) << "at " << r;
    ASSERT_EQ(tree.heard(r).views.size(), 1u) << "at " << r;
    EXPECT_EQ(tree.heard(r).views[0].left, Ranks{3}) << "at " << r;
    EXPECT_EQ(membership_of(tree, r).asked_whole(), r == 0 || r == 1 ? 1u : 0u) << "at " << r;
  }
}

TEST(Membership, ACommnodeFailureIsNotAMembershipChange) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  tree.kill(C1);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).recovered.size() == 2; }, 5s));
  tree.run_for(10s);
  for (Rank r : survivors(tree)) {
    EXPECT_TRUE(tree.heard(r).views.empty()) << "at " << r;
    EXPECT_EQ(membership_of(tree, r).view().members, (Ranks{0, 1, 2, 3}));
  }
}

// A second failure while the first view is not yet stable (a commnode hangs and does
// not acknowledge) waits a heartbeat for it, then a second view supersedes the first;
// the root reports the two as one change once the hung commnode is found lost, and
// its back-ends, adopted elsewhere, catch up.
TEST(Membership, AFailureDuringAViewChangeIsBatchedIntoTheNextView) {
  const FaultToleranceOptions fault;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(C2);
  tree.kill(0);
  ASSERT_TRUE(tree.run_until([&] { return membership_of(tree, FE).view().id == 1; }, 1s));
  tree.run_for(100ms);
  EXPECT_TRUE(membership_of(tree, FE).changing()) << "C2 has not acknowledged view 1";
  tree.kill(1);
  tree.run_for(100ms);
  EXPECT_EQ(membership_of(tree, FE).view().id, 1u) << "a new view waits a heartbeat for view 1";
  ASSERT_TRUE(tree.run_until([&] { return membership_of(tree, C1).view().id == 2; }, fault.heartbeat + 100ms))
      << "view 2 supersedes view 1 a heartbeat after it went out";
  // C2 is lost after `lost`; its back-ends are adopted, and view 2 becomes stable.
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 2) && tree.heard(FE).views.size() == 1; },
                             fault.lost * 3));
  const auto& root_views = tree.heard(FE).views;
  EXPECT_EQ(root_views[0].view.id, 2u);
  EXPECT_EQ(root_views[0].left, (Ranks{0, 1})) << "one change at the root";
  EXPECT_GE(root_views[0].stabilise, fault.lost - fault.heartbeat) << "view 2 waited for C2 to be found lost";
  for (Rank r : {2u, 3u}) {
    EXPECT_EQ(membership_of(tree, r).view().members, (Ranks{2, 3})) << r;
    expect_views_in_order(tree, r);
  }
  tree.kill(C2);
}

// False suspicion (paper 000, footnote 1) and epochs (paper 001): a back-end that
// hangs for longer than `lost` is declared failed. When it wakes up it finds its
// link cut and asks to be adopted with its old epoch: refused and told to stop.
TEST(Membership, ABackendDeclaredFailedWhileHungIsFencedOffWhenItWakesUp) {
  const FaultToleranceOptions fault;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(3);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, fault.lost * 2));
  tree.thaw(3);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(3).stopped.has_value(); }, fault.lost));
  EXPECT_NE(tree.heard(3).stopped->find("declared failed"), std::string::npos) << *tree.heard(3).stopped;
  std::uint64_t refused = 0;
  for (Rank r : survivors(tree)) refused += membership_of(tree, r).stale_dropped();
  EXPECT_GE(refused, 1u) << "the stale adoption request is counted where it was refused";
  ASSERT_TRUE(tree.run_until([&] { return membership_of(tree, FE).stale_dropped_in_tree().count(3) != 0; }, 1s))
      << "and reported to the front-end";
  tree.run_for(fault.lost * 2);
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1, 2}));
  EXPECT_EQ(membership_of(tree, FE).view().id, 1u);
  EXPECT_TRUE(tree.heard(FE).recovered.empty()) << "nobody adopted it";
}

// A view change reaches a back-end that is still connected but was declared failed
// (here by a detector of the test's own): it stops, and its parent cuts it off.
TEST(Membership, ABackendExcludedFromAViewStops) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  membership_of(tree, FE).report_failure({2}, "declared failed by the test");
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(2).stopped.has_value(); }, 5s));
  EXPECT_NE(tree.heard(2).stopped->find("not a member of view 1"), std::string::npos) << *tree.heard(2).stopped;
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, 5s));
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1, 3}));
}

// The orphans of a failed commnode are members still; one that no adopter takes in
// (here: it hangs as its parent dies) has nobody left to report it, so the root
// declares it failed once it has not been adopted within `lost + suspect` of the
// failure (issue 45: it waited `adoption_timeout + lost`, 35 s by default).
TEST(Membership, AnOrphanThatIsNotAdoptedSoonLeavesTheView) {
  const FaultToleranceOptions fault;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(2);
  tree.kill(C2);
  const auto killed_at = tree.elapsed();
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, fault.lost * 2));
  EXPECT_GE(tree.elapsed() - killed_at, fault.lost + fault.suspect);
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1, 3})) << "3 was adopted and stays";
  ASSERT_EQ(tree.heard(FE).views.size(), 1u);
  EXPECT_EQ(tree.heard(FE).views[0].left, Ranks{2});
  // The front-end hears it as a failure, dated back to before its parent failed.
  ASSERT_EQ(tree.heard(FE).orphans_lost.count(2), 1u);
  EXPECT_GE(tree.heard(FE).orphans_lost.at(2), fault.lost);
}

// A node crash: a commnode and its back-ends die together. Nobody is left to see the
// back-ends go, so they leave the view, in one change, `lost + suspect` after the
// commnode's failure, each heard at the front-end as a failure (issue 45: 35 s, and
// no failure event).
TEST(Membership, BackendsThatDieWithTheirCommnodeLeaveTheViewTogetherSoon) {
  const FaultToleranceOptions fault;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  tree.kill(2);
  tree.kill(3);
  tree.kill(C2);
  const auto killed_at = tree.elapsed();
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, fault.lost * 2))
      << "members: " << ::testing::PrintToString(membership_of(tree, FE).view().members);
  EXPECT_GE(tree.elapsed() - killed_at, fault.lost + fault.suspect);
  ASSERT_EQ(tree.heard(FE).views.size(), 1u) << "one view change for the crash";
  EXPECT_EQ(tree.heard(FE).views[0].left, (Ranks{2, 3}));
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1}));
  EXPECT_EQ(tree.heard(FE).orphans_lost.size(), 2u);
}

// Epochs on messages (paper 001 §III-A): a back-end declared failed while still
// connected is cut off by its parent, which first tells it why and then closes the
// link; what the back-end sent meanwhile, below the epoch the parent now knows for
// it, is dropped and counted, and never reaches an aggregate.
TEST(Membership, WhatABackendSendsAfterItWasDeclaredFailedIsDropped) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("incremental_union");
  membership_of(tree, FE).report_failure({2}, "declared failed by the test");
  // The harness polls back-end 2 before its parent: it has not read the news yet.
  ASSERT_TRUE(tree.run_until([&] { return membership_of(tree, C2).view().id == 1; }, 5s));
  ASSERT_FALSE(tree.heard(2).stopped);
  tree.runtime(2).streams.send_up(stream, Packet(0, {std::vector<std::int64_t>{999}}));
  tree.runtime(3).streams.send_up(stream, Packet(0, {std::vector<std::int64_t>{30}}));
  std::set<std::int64_t> seen;
  auto arrived = [&] {
    for (const auto& packet : tree.heard(FE).upstream) {
      for (auto v : std::get<std::vector<std::int64_t>>(packet[0])) seen.insert(v);
    }
    return seen.count(30) != 0;
  };
  ASSERT_TRUE(tree.run_until(arrived, 5s));
  tree.run_for(1s);
  arrived();
  EXPECT_EQ(seen.count(999), 0u) << "a packet of a back-end declared failed reached the front-end";
  EXPECT_GE(membership_of(tree, C2).stale_dropped(), 2u) << "the cut-off, and the packet dropped";
}

// A member that hangs holds up the acknowledgements of a view that still has it
// until its parent finds it lost (`lost`, 5 s); the report that it failed must not
// wait that long behind that view: the next view supersedes the unstable one a
// heartbeat after it went out, and the root reports both as one change.
TEST(Membership, AViewHeldUpByAHungMemberGivesWayToTheNextReport) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  tree.freeze(3);  // it will not acknowledge view 1
  membership_of(tree, FE).report_failure({2}, "declared failed by the test");
  ASSERT_TRUE(tree.run_until([&] { return membership_of(tree, C2).view().id == 1; }, 5s));
  EXPECT_TRUE(membership_of(tree, FE).changing()) << "view 1 waits for back-end 3";
  const auto reported_at = tree.elapsed();
  membership_of(tree, FE).report_failure({3}, "hung, as another detector found");
  ASSERT_TRUE(tree.run_until([&] { return !membership_of(tree, FE).changing(); }, 10s));
  EXPECT_LT(tree.elapsed() - reported_at, FaultToleranceOptions{}.lost) << "it waited for the links' lost";
  EXPECT_LE(tree.elapsed() - reported_at, FaultToleranceOptions{}.heartbeat + 100ms);
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1}));
  ASSERT_EQ(tree.heard(FE).views.size(), 1u) << "one change at the root";
  EXPECT_EQ(tree.heard(FE).views.back().left, (Ranks{2, 3}));
  EXPECT_EQ(tree.heard(FE).views.back().view.id, 2u);
  for (Rank r : {C1, C2, 0u, 1u}) EXPECT_EQ(membership_of(tree, r).view().id, 2u) << "at " << r;
  expect_views_in_order(tree, 0);
}

// Attach mode (an MPI job's ranks attach when they start): view 0 is empty and each
// back-end joins with a view change; joins that arrive while a view is unstable
// are batched.
TEST(Membership, BackendsThatAttachJoinTheViewAndLateJoinersCatchUp) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  tree.set_attach_mode();
  ASSERT_TRUE(tree.launch());
  EXPECT_TRUE(membership_of(tree, FE).view().members.empty());
  for (Rank r : {0u, 1u, 2u}) tree.attach(r);
  auto members_are = [&](const Ranks& expected) {
    return [&tree, expected] {
      return membership_of(tree, FE).view().members == expected &&
             everyone_holds(tree, membership_of(tree, FE).view().id);
    };
  };
  ASSERT_TRUE(tree.run_until(members_are({0, 1, 2}), 5s));
  Ranks joined;
  for (const auto& v : tree.heard(FE).views) joined.insert(joined.end(), v.joined.begin(), v.joined.end());
  std::sort(joined.begin(), joined.end());
  EXPECT_EQ(joined, (Ranks{0, 1, 2}));
  EXPECT_LE(tree.heard(FE).views.size(), 3u);
  tree.attach(3);  // a late joiner
  ASSERT_TRUE(tree.run_until(members_are({0, 1, 2, 3}), 5s));
  EXPECT_EQ(tree.heard(FE).views.back().joined, Ranks{3});
  EXPECT_EQ(membership_of(tree, 3).view().members, (Ranks{0, 1, 2, 3})) << "it holds the view it joined";
  expect_views_in_order(tree, 3);
  for (Rank r : survivors(tree)) expect_views_in_order(tree, r);
  // And a member that attached leaves like any other.
  tree.kill(1);
  ASSERT_TRUE(tree.run_until(members_are({0, 2, 3}), 5s));
}

// A restarted process under the rank of a back-end that left the view (paper 000's
// NODE_ALIVE): the live tree takes it back under a new incarnation, it becomes a
// member again with the epoch its rank was given when declared failed, and it takes
// part in the streams that name it again.
TEST(Membership, ARestartedBackendRejoinsUnderItsRankAtItsNewEpoch) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("incremental_union");
  tree.kill(3);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, 10s));
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1, 2}));
  EXPECT_EQ(membership_of(tree, FE).epoch(3), 1u);

  tree.attach(3);  // the restarted process
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 2); }, 10s));
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1, 2, 3}));
  EXPECT_EQ(tree.heard(FE).views.back().joined, Ranks{3});
  EXPECT_EQ(tree.node(3).identity().epoch, 1u) << "it speaks at the epoch its rank has now";
  // Its first view event is the one that makes it a member (the welcome is silent).
  ASSERT_FALSE(tree.heard(3).views.empty());
  EXPECT_EQ(tree.heard(3).views.front().view.id, 2u);
  EXPECT_EQ(tree.heard(3).views.front().joined, Ranks{3});
  // Back-ends 0 and 1 and their parent C1 hold their parts of the tree
  // (docs/scale.md): C2 without its children.
  auto holds_3 = [](Rank r) { return r != 0 && r != 1 && r != C1; };
  // Every process's live tree has it back, under C2, at a new incarnation: soon
  // after the view, as adoption reports go down the tree in batches (core/node.h,
  // TreeNews::kFastWindow at each level; to back-ends, the adoption of a back-end in a batch
  // of its own, TreeNews::kLeafWindow). (Back-ends other than its parent's ancestors never
  // had it as failed: a back-end's failure goes up only.)
  ASSERT_TRUE(tree.run_until(
      [&] {
        for (Rank r : survivors(tree)) {
          if (!holds_3(r)) continue;
          if (!tree.node(r).live_tree()->alive(3) || tree.node(r).live_tree()->incarnation(3) != 1) return false;
        }
        return true;
      },
      1s));
  for (Rank r : survivors(tree)) {
    const auto* live = tree.node(r).live_tree();
    ASSERT_EQ(live->contains(3), holds_3(r)) << "at " << r;
    if (!holds_3(r)) continue;
    EXPECT_TRUE(live->alive(3)) << "at " << r;
    EXPECT_EQ(live->parent(3), C2) << "at " << r;
    EXPECT_EQ(live->incarnation(3), 1u) << "at " << r;
  }

  // It is in the stream again: its value reaches the front-end, and nothing it sent
  // was taken for a stale process's.
  tree.runtime(3).streams.send_up(stream, Packet(0, {std::vector<std::int64_t>{33}}));
  tree.runtime(2).streams.send_up(stream, Packet(0, {std::vector<std::int64_t>{22}}));
  std::set<std::int64_t> seen;
  ASSERT_TRUE(tree.run_until(
      [&] {
        for (const auto& packet : tree.heard(FE).upstream) {
          for (auto v : std::get<std::vector<std::int64_t>>(packet[0])) seen.insert(v);
        }
        return seen.count(33) && seen.count(22);
      },
      5s));
  EXPECT_EQ(membership_of(tree, C2).stale_dropped(), 0u);

  // And it can fail again: a second epoch.
  tree.kill(3);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 3); }, 10s));
  EXPECT_EQ(membership_of(tree, FE).epoch(3), 2u);
}

// A new process under a lost back-end's rank before the view without the old one is
// out at the parent would be cut off by that view: it is refused and told why, and
// may attach again once the view is out.
TEST(Membership, ARejoinBeforeTheViewWithoutTheOldProcessIsRefused) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  tree.freeze(FE);  // no view can be ordered
  tree.kill(3);
  auto gone = [&] {
    auto index = tree.node(C2).children().index_of(3);
    return tree.node(C2).children()[*index].state == core::ChildState::gone;
  };
  ASSERT_TRUE(tree.run_until(gone, 5s));
  tree.attach(3);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(3).stopped.has_value(); }, 5s));
  EXPECT_NE(tree.heard(3).stopped->find("the view without it is not out yet"), std::string::npos)
      << *tree.heard(3).stopped;
  tree.thaw(FE);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 1); }, 10s));
  tree.attach(3);
  ASSERT_TRUE(tree.run_until([&] { return everyone_holds(tree, 2); }, 10s));
  EXPECT_EQ(membership_of(tree, FE).view().members, (Ranks{0, 1, 2, 3}));
}

}  // namespace
}  // namespace canopy::testing
