// Event detection as docs/fault-tolerance.md states it, in process on manual time
// (tree_harness.h): a late peer is suspect and then alive again without any loss,
// and heartbeats go only on idle links.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using services::PeerState;

constexpr Rank FE = kFirstInternalRank;
constexpr Rank C1 = FE + 1;  // b:2^2: back-ends 0 and 1 under C1, 2 and 3 under C2

// Whether any process of the tree applied a failure or an adoption, or began to
// look for an adopter.
bool anything_healed(TreeHarness& tree) {
  for (const auto& n : tree.topology().nodes()) {
    if (!tree.alive(n.rank)) continue;
    for (const auto& event : tree.heard(n.rank).events) {
      if (std::holds_alternative<core::events::TreeChanged>(event) ||
          std::holds_alternative<core::events::Orphaned>(event)) {
        return true;
      }
    }
  }
  return false;
}

// A commnode silent for longer than `suspect` but less than `lost` is suspect at its
// parent and at its children, and alive again at both once it answers: nobody
// declares it lost, nobody is orphaned, no report or recovery follows.
TEST(Detection, ALateCommnodeThatAnswersBeforeTheLostThresholdIsSuspectThenAliveAgain) {
  const FaultToleranceOptions fault;  // heartbeat 0.5 s, suspect 2 s, lost 5 s
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  auto& at_parent = tree.runtime(FE).detection;
  auto& at_child = tree.runtime(0).detection;
  const std::size_t c1 = *tree.node(FE).children().index_of(C1);
  tree.freeze(C1);
  const auto frozen_at = tree.elapsed();
  ASSERT_TRUE(tree.run_until(
      [&] { return at_parent.child_state(c1) == PeerState::suspect && at_child.parent_state() == PeerState::suspect; },
      fault.lost - fault.heartbeat))
      << "parent sees " << services::to_string(at_parent.child_state(c1)) << ", child sees "
      << services::to_string(at_child.parent_state());
  EXPECT_GE(tree.elapsed() - frozen_at, fault.suspect - fault.heartbeat) << "suspected before `suspect`";
  tree.thaw(C1);
  ASSERT_TRUE(tree.run_until(
      [&] { return at_parent.child_state(c1) == PeerState::alive && at_child.parent_state() == PeerState::alive; },
      fault.heartbeat * 2))
      << "parent sees " << services::to_string(at_parent.child_state(c1)) << ", child sees "
      << services::to_string(at_child.parent_state());
  EXPECT_LT(tree.elapsed() - frozen_at, fault.lost);
  tree.run_for(fault.lost * 2);  // long enough for any loss to surface
  EXPECT_TRUE(tree.heard(FE).lost.empty()) << "declared lost: " << tree.heard(FE).lost.begin()->first;
  EXPECT_TRUE(tree.heard(FE).recovered.empty());
  EXPECT_FALSE(anything_healed(tree)) << "a failure, adoption or orphan followed a mere delay";
  for (Rank r : {C1, Rank{0}, Rank{1}}) EXPECT_EQ(tree.node(r).phase(), core::Phase::running) << r;
  EXPECT_EQ(at_parent.child_state(c1), PeerState::alive);
}

// Heartbeats go only on a link on which nothing has been sent for `heartbeat`:
// back-ends 0 and 1 send a packet every fifth of it and send no heartbeat, while
// back-ends 2 and 3, idle, keep sending theirs.
TEST(Detection, ABusyLinkCarriesNoHeartbeatAndAnIdleOneDoes) {
  const FaultToleranceOptions fault;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  services::StreamSpec spec;  // over the busy back-ends only, so that their waves complete
  spec.id = 1;
  spec.backends = core::RankSet::of({0, 1});
  spec.upstream_filter = "sum";
  tree.runtime(FE).streams.create_stream(spec);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).acks.count(spec.id) != 0; }, 5s));
  const StreamId stream = spec.id;
  std::map<Rank, std::uint64_t> before;
  for (Rank b : tree.topology().backends()) before[b] = tree.runtime(b).detection.heartbeats_sent();
  const auto period = fault.heartbeat / 5;
  const int rounds = 30;  // six heartbeat intervals
  for (int i = 0; i < rounds; ++i) {
    for (Rank busy : {0u, 1u}) tree.runtime(busy).streams.send_up(stream, Packet(0, {std::int64_t(1)}));
    tree.run_for(period);
  }
  for (Rank busy : {0u, 1u}) {
    EXPECT_EQ(tree.runtime(busy).detection.heartbeats_sent(), before[busy])
        << "back-end " << busy << " sent heartbeats on a link that carried data";
  }
  for (Rank idle : {2u, 3u}) {
    EXPECT_GE(tree.runtime(idle).detection.heartbeats_sent() - before[idle], 4u)
        << "back-end " << idle << " was idle for six heartbeat intervals";
  }
  // The data went through: the busy back-ends' packets made whole waves.
  EXPECT_TRUE(tree.run_until([&] { return tree.heard(FE).upstream.size() == rounds; }, fault.heartbeat));
}

// The verdict on a child silent past the lost threshold (issue 45): on a loaded
// machine a healthy process may wait seconds for a CPU; one that hangs does not.
TEST(Detection, ASilentPeerIsStarvedOnlyWhileItWaitsForACpuAndHasHadLittle) {
  using std::chrono::milliseconds;
  const auto window = milliseconds(3000);
  const auto hung = services::DetectionService::kHungCpu;
  const core::CpuAccount before{milliseconds(100), milliseconds(500), false};
  // Waited most of the window, ran a little: starved.
  EXPECT_TRUE(services::starved_not_hung(before, {milliseconds(110), milliseconds(2500), false}, window,
                                         milliseconds(0), hung));
  // Runnable now, its wait not yet counted by the kernel: starved.
  EXPECT_TRUE(services::starved_not_hung(before, {milliseconds(100), milliseconds(500), true}, window,
                                         milliseconds(0), hung));
  // Neither ran nor waited (stopped, or blocked for good): hung.
  EXPECT_FALSE(services::starved_not_hung(before, before, window, milliseconds(0), hung));
  // Waited, but ran its fill and said nothing: hung in a loop.
  EXPECT_FALSE(services::starved_not_hung(before, {milliseconds(700), milliseconds(2500), true}, window,
                                          milliseconds(0), hung));
  // ... counting what it ran in earlier windows of the same silence.
  EXPECT_FALSE(services::starved_not_hung(before, {milliseconds(200), milliseconds(2500), true}, window,
                                          milliseconds(450), hung));
}

}  // namespace
}  // namespace canopy::testing
