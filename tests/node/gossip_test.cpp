// The gossip failure detector in process (docs/gossip.md): whole trees on manual
// time (tree_harness.h), so that rounds of 500 ms and time-outs of seconds take
// milliseconds and happen at the virtual times the options say.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using Ranks = std::vector<Rank>;
using State = membership::GossipService::MemberState;

constexpr Rank FE = kFirstInternalRank;
constexpr Rank C1 = FE + 1, C2 = FE + 2;  // b:2^2: back-ends 0, 1 under C1; 2, 3 under C2

// BRR every 500 ms. The links' own detection is made slow, so that what is found is
// found by the gossip.
FaultToleranceOptions gossip_only(std::chrono::milliseconds ping_timeout = 1000ms) {
  FaultToleranceOptions fault;
  fault.suspect = 30s;
  fault.lost = 60s;
  fault.gossip.schedule = GossipSchedule::brr;
  fault.gossip.period = 500ms;
  fault.gossip.max_hangup = 500ms;
  fault.gossip.ping_timeout = ping_timeout;
  return fault;
}

membership::GossipService& gossip_of(TreeHarness& tree, Rank rank) { return tree.runtime(rank).gossip; }
View view_at(TreeHarness& tree, Rank rank) { return tree.runtime(rank).membership.view(); }

// Every member's heartbeat has reached every other member.
bool everyone_heard_everyone(TreeHarness& tree, const Ranks& members) {
  for (Rank a : members) {
    for (Rank b : members) {
      if (a != b && gossip_of(tree, a).heartbeat_of(b) == 0) return false;
    }
  }
  return true;
}

// Gossip's options reach every process in the launch plan, unless they are the
// defaults (gossip off), which every process reads where it finds none: each
// process kept them in its plan, about 100 bytes of a back-end's 4 KB
// (docs/scale.md, "A back-end's own state").
TEST(Gossip, OptionsReachEveryProcessAndTheDefaultsCostNoneOfThemAnything) {
  {  // one tree at a time: each runs on the one manual clock
    TreeHarness on("b:2^2", gossip_only(700ms));
    ASSERT_TRUE(on.launch());
    for (Rank r : {FE, C1, C2, 0u, 1u, 2u, 3u}) EXPECT_EQ(gossip_of(on, r).options(), gossip_only(700ms).gossip) << r;
  }
  TreeHarness off("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(off.launch());
  for (Rank r : {FE, C1, C2, 0u, 1u, 2u, 3u}) {
    EXPECT_EQ(gossip_of(off, r).options(), GossipOptions{}) << r;
    EXPECT_TRUE(off.node(r).plan().service_options.empty()) << r;
  }
}

TEST(Gossip, EveryMembersHeartbeatReachesEveryOtherWithinACycle) {
  TreeHarness tree("b:2^2", gossip_only());
  ASSERT_TRUE(tree.launch());
  const auto start = tree.elapsed();
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  // BRR over 4 members: a heartbeat reaches everyone in ⌈log2 4⌉ = 2 rounds (a
  // member's first round starts one period after launch; the rounds are not aligned).
  EXPECT_LE(tree.elapsed() - start, 4 * 500ms);
  EXPECT_EQ(gossip_of(tree, 0).suspicion_time(), 2 * 2 * 500ms + 500ms) << "2⌈log2 n⌉·T_gossip + T_max_hangup";
  // Only members gossip; commnodes pass messages on.
  EXPECT_GT(gossip_of(tree, C1).forwarded() + gossip_of(tree, C2).forwarded(), 0u);
  EXPECT_EQ(gossip_of(tree, C1).tables_sent(), 0u);
  tree.run_for(20s);
  for (Rank r : {0u, 1u, 2u, 3u}) {
    EXPECT_EQ(gossip_of(tree, r).pings_sent(), 0u) << "no suspicion in a healthy tree, at " << r;
  }
}

// A member hangs (SIGSTOP): its parent's link detection is slow here, so the
// members' gossip finds it: its heartbeat stays still, it is pinged, it does not
// answer, and the failure goes to the membership service: a view without it. Woken
// up, it is out and stops.
TEST(Gossip, AHungMemberIsFoundEndToEndAndLeavesTheView) {
  TreeHarness tree("b:2^2", gossip_only());
  ASSERT_TRUE(tree.launch());
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  tree.freeze(3);
  const auto frozen_at = tree.elapsed();
  // Every survivor knows: its own gossip found it, or the view without it came.
  auto everyone_knows = [&] {
    for (Rank r : {FE, C1, C2, 0u, 1u, 2u}) {
      if (view_at(tree, r).members != Ranks{0, 1, 2}) return false;
    }
    return true;
  };
  ASSERT_TRUE(tree.run_until(everyone_knows, 20s));
  const auto found_after = tree.elapsed() - frozen_at;
  const auto bound = gossip_of(tree, 0).suspicion_time() + gossip_of(tree, 0).ping_timeout() + 2 * 500ms;
  EXPECT_LE(found_after, bound) << "suspicion + ping + two rounds";
  EXPECT_GE(found_after, gossip_of(tree, 0).suspicion_time()) << "not before the heartbeat was still that long";
  ASSERT_FALSE(tree.heard(FE).gossip_reports.empty());
  EXPECT_EQ(tree.heard(FE).gossip_reports.front().first, 3u);
  EXPECT_NE(tree.heard(FE).gossip_reports.front().second, 3u);
  EXPECT_TRUE(tree.heard(FE).lost.empty()) << "the links' own detection did not find it";
  // Woken up, it finds itself out of the view and stops.
  tree.thaw(3);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(3).stopped.has_value(); }, 10s));
  EXPECT_EQ(view_at(tree, 0).members, (Ranks{0, 1, 2}));
  tree.run_for(500ms);  // the ring follows the view at the next round
  EXPECT_EQ(gossip_of(tree, 0).state_of(3), std::nullopt) << "the ring shrank to the view";
}

// A host hangs: both back-ends of C2 stop at once. The second is found as soon as the
// first, not a suspicion time after the first's view (clocks go on across views),
// and the view waiting for its acknowledgement gives way.
TEST(Gossip, EveryBackendOfAHungHostIsFoundTogether) {
  TreeHarness tree("b:2^2", gossip_only());
  ASSERT_TRUE(tree.launch());
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  tree.freeze(2);
  tree.freeze(3);
  const auto frozen_at = tree.elapsed();
  ASSERT_TRUE(tree.run_until(
      [&] { return view_at(tree, FE).members == Ranks{0, 1} && view_at(tree, 0).members == Ranks{0, 1}; }, 20s));
  const auto& g = gossip_of(tree, 0);
  EXPECT_LE(tree.elapsed() - frozen_at, g.suspicion_time() + g.ping_timeout() + 500ms)
      << "suspicion + ping + a round, for both";
}

// Confirmations made one after the other, before the root's answer to the first came
// back, reach the root once each (each report goes up once; the timer resends).
TEST(Gossip, EachConfirmationReachesTheRootOnce) {
  TreeHarness tree("b:2^2", gossip_only());
  ASSERT_TRUE(tree.launch());
  auto& membership = tree.runtime(0).membership;
  membership.report_end_to_end(2, "confirmed by the test", 1000ms);
  membership.report_end_to_end(3, "confirmed by the test", 1000ms);
  ASSERT_TRUE(tree.run_until([&] { return view_at(tree, FE).members == Ranks{0, 1}; }, 10s));
  tree.run_for(1s);
  EXPECT_EQ(tree.heard(FE).gossip_reports, (std::vector<std::pair<Rank, Rank>>{{2, 0}, {3, 0}}));
}

// The suspect's parent has lost its link (the process is dead) while no view can
// come (the front-end is hung): a sibling's ping reaches that parent, which answers
// for the suspect at once; no ping time-out is waited for.
TEST(Gossip, APingToADeadMemberIsAnsweredByItsParent) {
  TreeHarness tree("b:2^2", gossip_only(/*ping_timeout=*/30s));
  ASSERT_TRUE(tree.launch());
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  tree.freeze(FE);
  tree.kill(3);
  const auto killed_at = tree.elapsed();
  ASSERT_TRUE(tree.run_until([&] { return gossip_of(tree, 2).state_of(3) == State::failed; }, 20s));
  EXPECT_LE(tree.elapsed() - killed_at, gossip_of(tree, 2).suspicion_time() + 2 * 500ms);
  ASSERT_EQ(tree.heard(2).confirmed.count(3), 1u);
}

// A commnode hangs for less than the tree's `lost`: the members below it go silent,
// are suspected and pinged, and answer once it wakes, within the ping time-out (by
// default the tree's `lost`). Nobody leaves the view.
TEST(Gossip, ACommnodeHungForLessThanLostCostsNoMember) {
  FaultToleranceOptions fault;  // lost 5 s
  fault.gossip.schedule = GossipSchedule::brr;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  tree.freeze(C1);
  tree.run_for(4800ms);  // > suspicion time (2.5 s) + a round, < lost (5 s)
  EXPECT_GT(gossip_of(tree, 2).pings_sent() + gossip_of(tree, 3).pings_sent(), 0u) << "0 and 1 were suspected";
  tree.thaw(C1);
  tree.run_for(30s);
  EXPECT_EQ(view_at(tree, FE).id, 0u) << "a member was declared failed";
  EXPECT_TRUE(tree.heard(FE).gossip_reports.empty());
  for (Rank r : {2u, 3u}) {
    EXPECT_EQ(gossip_of(tree, r).state_of(0), State::alive) << "at " << r;
    EXPECT_EQ(gossip_of(tree, r).state_of(1), State::alive) << "at " << r;
  }
}

// A commnode dies: its members are orphans until adopted, their heartbeats held
// back; suspicion of them waits for the adoption. Nobody leaves the view.
TEST(Gossip, ACommnodeKilledCostsNoMember) {
  FaultToleranceOptions fault;
  fault.gossip.schedule = GossipSchedule::dbrr;
  fault.gossip.period = 100ms;  // suspicion after 3⌈log2 4⌉·100 + 500 = 1.1 s
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  tree.kill(C1);
  tree.run_for(30s);
  EXPECT_EQ(view_at(tree, FE).id, 0u) << "a member was declared failed";
  EXPECT_TRUE(tree.heard(FE).gossip_reports.empty());
  EXPECT_TRUE(tree.node(FE).live_tree()->attached(0) && tree.node(FE).live_tree()->attached(1)) << "re-adopted";
  const auto before = gossip_of(tree, 2).heartbeat_of(0);
  tree.run_for(2s);
  EXPECT_GT(gossip_of(tree, 2).heartbeat_of(0), before) << "the adopted member gossips again";
}

// A commnode dies while the members below it hang, so that no adopter takes them
// in: while they do not hang from the root, the tree is still healing as far as the
// gossip can tell, and it leaves them to the tree: the root declares them failed
// once they have not been adopted within `lost + suspect` (docs/membership.md), not
// the gossip before.
TEST(Gossip, OrphansNotYetAdoptedAreLeftToTheTree) {
  FaultToleranceOptions fault;  // suspect 2 s, lost 5 s
  fault.gossip.schedule = GossipSchedule::brr;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  tree.freeze(0);
  tree.freeze(1);
  tree.kill(C1);
  const auto killed_at = tree.elapsed();
  ASSERT_TRUE(tree.run_until([&] { return view_at(tree, FE).members == Ranks{2, 3}; }, 60s));
  EXPECT_GE(tree.elapsed() - killed_at, fault.lost + fault.suspect);
  EXPECT_TRUE(tree.heard(FE).gossip_reports.empty()) << "the gossip declared an orphan failed";
  EXPECT_GT(gossip_of(tree, 2).pings_sent() + gossip_of(tree, 3).pings_sent(), 0u) << "they were suspected";
}

// A member whose detector never started (it hung before its first round) is never
// suspected by the gossip (paper 003 §5.3, start-up): it is the tree's to find.
TEST(Gossip, AMemberWhoseDetectorNeverStartedIsNotSuspected) {
  TreeHarness tree("b:2^2", gossip_only());
  ASSERT_TRUE(tree.launch());
  ASSERT_LT(tree.elapsed(), 500ms) << "the test needs back-end 3 frozen before its first round";
  tree.freeze(3);
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2}); }, 10s));
  tree.run_for(20s);
  EXPECT_EQ(view_at(tree, FE).id, 0u);
  for (Rank r : {0u, 1u, 2u}) {
    EXPECT_EQ(gossip_of(tree, r).heartbeat_of(3), 0u) << "at " << r;
    EXPECT_EQ(gossip_of(tree, r).pings_sent(), 0u) << "at " << r;
  }
}

// Members that start seconds apart (an MPI job's ranks attach as they start): a
// member whose detector has not started is never suspected, and those that start
// late catch up.
TEST(Gossip, MembersStartingSecondsApartAreNotSuspected) {
  TreeHarness tree("b:2^2", gossip_only());
  tree.set_attach_mode();
  ASSERT_TRUE(tree.launch());
  for (Rank r : {0u, 1u, 2u, 3u}) {
    tree.attach(r);
    tree.run_for(3s);  // more than the suspicion time of 2.5 s
  }
  ASSERT_TRUE(tree.run_until([&] { return everyone_heard_everyone(tree, {0, 1, 2, 3}); }, 10s));
  tree.run_for(20s);
  EXPECT_EQ(view_at(tree, FE).members, (Ranks{0, 1, 2, 3}));
  for (const auto& v : tree.heard(FE).views) EXPECT_TRUE(v.left.empty()) << "view " << v.view.id;
  for (Rank r : {0u, 1u, 2u, 3u}) EXPECT_EQ(gossip_of(tree, r).pings_sent(), 0u) << "at " << r;
}

}  // namespace
}  // namespace canopy::testing
