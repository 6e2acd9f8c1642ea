// Orphans as docs/fault-tolerance.md states it, in process on manual time
// (tree_harness.h): healing switched off, the adoption time-out, moving on from an
// adopter that refuses or does not answer, what an orphan holds back, and
// point-to-point packets to a re-adopted back-end.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using core::events::TreeChanged;

constexpr Rank FE = kFirstInternalRank;
// b:2^2: back-ends 0, 1 under FE+1 and 2, 3 under FE+2. b:2x2x2: FE+1 and FE+2 on
// level 1; FE+3 (back-ends 0, 1) and FE+4 (2, 3) under FE+1; FE+5 (4, 5) and FE+6
// (6, 7) under FE+2.

// A packet the front-end sends down `stream` to `backend` reaches it.
void expect_packet_down(TreeHarness& tree, StreamId stream, Rank backend) {
  tree.runtime(FE).streams.send_down(stream, Packet(5, {std::int32_t(50)}), backend);
  ASSERT_TRUE(tree.run_until([&] { return !tree.heard(backend).downstream.empty(); }, 2s))
      << "nothing reached back-end " << backend
      << (tree.heard(FE).errors.empty() ? std::string() : ": " + tree.heard(FE).errors[0]);
  EXPECT_EQ(tree.heard(backend).downstream.back().tag(), 5);
}

bool heard_event(TreeHarness& tree, Rank rank, auto is) {
  const auto& events = tree.heard(rank).events;
  return std::any_of(events.begin(), events.end(), [&](const core::NodeEvent& e) { return std::visit(is, e); });
}

bool orphaned(const core::NodeEvent& e) { return std::holds_alternative<core::events::Orphaned>(e); }

// Whether back-ends 0 to count-1 have each had their own recovery.
bool all_recovered(TreeHarness& tree, Rank count) {
  for (Rank orphan = 0; orphan < count; ++orphan) {
    if (!own_recovery(tree, orphan)) return false;
  }
  return true;
}

// How many adoptions process `r` has applied to its live tree.
std::size_t adoptions_heard(TreeHarness& tree, Rank r) {
  std::size_t n = 0;
  for (const auto& c : tree.heard(r).tree_changes()) n += c.kind == TreeChanged::Kind::adoption;
  return n;
}

// Whether process `r` has applied the failure of `failed` to its live tree.
bool failure_heard(TreeHarness& tree, Rank r, Rank failed) {
  const auto changes = tree.heard(r).tree_changes();
  return std::any_of(changes.begin(), changes.end(),
                     [&](const auto& c) { return c.kind == TreeChanged::Kind::failure && c.rank == failed; });
}

// LaunchOptions::fault_tolerance.enabled = false: losing its parent stops a process
// and its whole subtree, nobody looks for an adopter, and the front-end hears of
// the loss.
TEST(Orphans, WithoutHealingLosingItsParentStopsAProcessAndItsSubtree) {
  FaultToleranceOptions fault;
  fault.enabled = false;
  TreeHarness tree("b:2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  tree.kill(FE + 1);
  const std::vector<Rank> subtree{FE + 3, FE + 4, 0, 1, 2, 3};
  ASSERT_TRUE(tree.run_until(
      [&] { return std::all_of(subtree.begin(), subtree.end(), [&](Rank r) { return tree.heard(r).stopped.has_value(); }); },
      10s));
  for (Rank commnode : {FE + 3, FE + 4}) {
    EXPECT_NE(tree.heard(commnode).stopped->find("lost parent"), std::string::npos) << *tree.heard(commnode).stopped;
  }
  for (Rank r : subtree) EXPECT_FALSE(heard_event(tree, r, [](const auto& e) { return orphaned(e); })) << r;
  EXPECT_TRUE(tree.heard(FE).lost.count(FE + 1));
  EXPECT_TRUE(tree.heard(FE).recovered.empty());
  for (Rank r : {FE + 5, FE + 6, Rank{4}, Rank{7}}) EXPECT_EQ(tree.node(r).phase(), core::Phase::running) << r;
}

// An orphan that no adopter has accepted after `adoption_timeout` stops, and its
// subtree with it: here every potential adopter of FE+1's orphans (FE+2 and the
// front-end, the only ones taller than they) hangs.
TEST(Orphans, AnOrphanNobodyAdoptsStopsItsSubtreeAtTheAdoptionTimeout) {
  const FaultToleranceOptions fault;  // adoption time-out 30 s
  TreeHarness tree("b:2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(FE);
  tree.freeze(FE + 2);
  tree.kill(FE + 1);
  const auto killed_at = tree.elapsed();
  const std::vector<Rank> subtree{FE + 3, FE + 4, 0, 1, 2, 3};
  auto all_stopped = [&] {
    return std::all_of(subtree.begin(), subtree.end(), [&](Rank r) { return tree.heard(r).stopped.has_value(); });
  };
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE + 3).stopped || tree.heard(FE + 4).stopped; },
                             fault.adoption_timeout * 2));
  const auto stopped_after = tree.elapsed() - killed_at;
  EXPECT_GE(stopped_after, fault.adoption_timeout);
  EXPECT_LT(stopped_after, fault.adoption_timeout + fault.heartbeat);
  ASSERT_TRUE(tree.run_until(all_stopped, 10s));
  for (Rank orphan : {FE + 3, FE + 4}) {
    EXPECT_NE(tree.heard(orphan).stopped->find("no adopter accepted this node within 30000 ms"), std::string::npos)
        << *tree.heard(orphan).stopped;
    EXPECT_TRUE(tree.heard(orphan).recovered.empty());
  }
  EXPECT_NE(tree.heard(0).stopped->find("no adopter accepted"), std::string::npos) << *tree.heard(0).stopped;
}

// An orphan that is refused moves on to its next candidate at once; one whose
// candidate does not answer moves on after max(500 ms, lost). FE+1 and FE+3 die
// together and FE+2 hangs: FE+4 is orphaned and asks FE+2, which does not answer,
// then the front-end; FE+3's back-ends 0 and 1 ask FE+4 first (their parent's
// sibling), which refuses (it is itself an orphan), then FE+1 (dead: the
// connection fails), then FE+5, which adopts them. (Their reports cannot reach the
// root through the hung FE+2: each orphan's own is read.) The back-ends hold the
// whole tree here, to reach FE+5, their cousin: a back-end's part holds only its
// ancestors and their children (docs/scale.md; the next test).
TEST(Orphans, AnOrphanMovesOnAtOnceWhenRefusedAndAfterTheAttemptTimeOutWhenNotAnswered) {
  const FaultToleranceOptions fault;
  TreeHarness tree("b:2x2x2", fault);
  tree.set_whole_tree();
  ASSERT_TRUE(tree.launch());
  core::TreeView seen_by_0 = *tree.node(0).live_tree();  // as back-end 0 will see it: its parent failed
  seen_by_0.apply_failure(FE + 3);
  ASSERT_EQ(seen_by_0.potential_adopters(0, 3), (std::vector<Rank>{FE + 4, FE + 1, FE + 5}));
  tree.freeze(FE + 2);
  tree.kill(FE + 1);
  tree.kill(FE + 3);
  const auto killed_at = tree.elapsed();
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, fault.lost));
  EXPECT_LT(tree.elapsed() - killed_at, fault.lost / 2) << "the refusal was waited out, not acted on";
  for (Rank orphan : {0u, 1u}) {
    EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 5) << orphan;
    EXPECT_EQ(own_recovery(tree, orphan)->attempts, 3u) << orphan << ": FE+4 refused, FE+1 failed, FE+5 adopted";
  }
  EXPECT_FALSE(own_recovery(tree, FE + 4)) << "FE+4 was adopted although its first candidate hangs";
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, FE + 4) != nullptr; }, fault.lost * 2));
  EXPECT_GE(tree.elapsed() - killed_at, fault.lost) << "FE+4 gave up on FE+2 before the attempt time-out";
  EXPECT_EQ(own_recovery(tree, FE + 4)->adopter, FE);
  EXPECT_EQ(own_recovery(tree, FE + 4)->attempts, 2u) << "FE+2, which did not answer, then the front-end";
  tree.kill(FE + 2);
}

// A back-end holds its part of the tree (docs/scale.md): its ancestors and their
// children, with view 0 whole. It heals from it twice: FE+3's back-ends 0 and 1 go
// to FE+4, their parent's sibling; once FE+4 is lost too, to FE+1, the nearest live
// ancestor (it holds no commnode below FE+1 that is left).
TEST(Orphans, ABackEndHoldsItsPartOfTheTreeAndHealsFromItTwice) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2", fault);  // FE+1: FE+3 (0, 1), FE+4 (2, 3); FE+2: FE+5, FE+6
  ASSERT_TRUE(tree.launch());
  const canopy::Topology& part = *tree.node(0).topology();
  EXPECT_TRUE(part.partial());
  EXPECT_EQ(part.size(), 7u);  // FE, FE+1, FE+2, FE+3, FE+4, 0, 1
  EXPECT_EQ(part.find(FE + 5), nullptr);
  EXPECT_EQ(tree.runtime(0).membership.view().members, tree.topology().backends());
  // A commnode holds its part too: its ancestors and their children, and its subtree.
  EXPECT_TRUE(tree.node(FE + 3).topology()->partial());
  EXPECT_EQ(tree.node(FE + 3).topology()->size(), 7u);  // FE, FE+1, FE+2, FE+3, FE+4, 0, 1
  EXPECT_EQ(tree.node(FE + 1).topology()->size(), 9u);  // FE, FE+1, FE+2, and FE+1's subtree
  EXPECT_FALSE(tree.node(FE).topology()->partial()) << "the front-end holds the whole tree";

  tree.kill(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 5s));
  for (Rank orphan : {0u, 1u}) EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 4) << orphan;
  tree.heard(0).recovered.clear();
  tree.heard(1).recovered.clear();
  tree.kill(FE + 4);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 5s));
  for (Rank orphan : {0u, 1u}) EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 1) << orphan;
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 2) && own_recovery(tree, 3); }, 5s));
  // The root holds the whole live tree: every back-end is under FE+1 now.
  for (Rank b : {0u, 1u, 2u, 3u}) EXPECT_EQ(tree.node(FE).live_tree()->parent(b), FE + 1) << b;
}

// A back-end holding its part knows the ports of its parent's siblings and its
// ancestors only (core/backend_part.h). Here FE+1 fails (FE+2 adopts FE+3 and FE+4),
// then FE+4 (FE+3 adopts back-ends 2 and 3), then FE+3: back-ends 0 and 1, orphaned,
// find FE+2's other children gone and FE+2 itself without a port (at launch it was
// their grandparent's sibling); they skip it and are adopted by the front-end, whose
// port they know, and every wave is whole again. Before stop 79 they knew FE+2's
// port and went to it; either is a process above them.
TEST(Orphans, ABackEndSkipsAnAdopterWhosePortItWasNeverSentAndIsAdoptedAboveIt) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  const canopy::Topology& part = *tree.node(0).topology();
  ASSERT_NE(part.find(FE + 2), nullptr);
  EXPECT_EQ(part.find(FE + 2)->port, 0) << "back-end 0 was sent its grandparent's sibling's port";
  EXPECT_NE(part.find(FE + 4)->port, 0) << "back-end 0 does not know its parent's sibling's port";
  auto adopted = [&](Rank orphan, std::size_t times) { return tree.heard(orphan).recovered.size() >= times; };

  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return adopted(FE + 3, 1) && adopted(FE + 4, 1); }, 5s));
  tree.kill(FE + 4);
  ASSERT_TRUE(tree.run_until([&] { return adopted(2, 1) && adopted(3, 1); }, 5s));
  expect_whole_wave(tree, stream, 8);
  tree.kill(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return adopted(0, 1) && adopted(1, 1) && adopted(2, 2) && adopted(3, 2); }, 10s))
      << "the back-ends of FE+3 were not all adopted";
  for (Rank orphan : {0u, 1u}) {
    const Rank adopter = tree.heard(orphan).recovered.back().adopter;
    EXPECT_TRUE(adopter == FE || adopter == FE + 2) << orphan << " adopted by " << adopter;
  }
  expect_whole_wave(tree, stream, 8);
}

// An adopter adopts only an orphan whose parent it knows is gone (docs/security.md).
// Here no one can report FE+3's failure (its parent FE+1 hangs with it), so the
// adopter asked by FE+3's back-ends (FE+4, or FE+5 if FE+4 finds itself orphaned
// first) holds their requests and asks FE+3 itself: a hello to its port gets no
// challenge (it hangs), so it adopts them when the hold ends, before any report of
// FE+3's failure.
TEST(Orphans, AnAdopterThatHearsNoReportProbesTheParentAndAdoptsWhenItIsSilent) {
  FaultToleranceOptions fault;
  fault.heartbeat = 100ms;
  fault.suspect = 300ms;
  fault.lost = 1000ms;
  TreeHarness tree("b:2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(FE + 1);
  tree.freeze(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 10 * fault.lost))
      << "FE+3's back-ends were not adopted: an adopter waited for a report that cannot come";
  for (Rank orphan : {0u, 1u}) {
    const Event& recovered = *own_recovery(tree, orphan);
    EXPECT_EQ(recovered.failed_parent, FE + 3) << orphan;
    ASSERT_TRUE(recovered.adopter == FE + 4 || recovered.adopter == FE + 5) << orphan << ": " << recovered.adopter;
    // The adopter took it before it heard of FE+3's failure, if it ever did.
    const auto changes = tree.heard(recovered.adopter).tree_changes();
    auto first = [&](auto is) { return std::find_if(changes.begin(), changes.end(), is) - changes.begin(); };
    const auto adopted =
        first([&](const auto& c) { return c.kind == TreeChanged::Kind::adoption && c.rank == orphan; });
    const auto failed = first([](const auto& c) { return c.kind == TreeChanged::Kind::failure && c.rank == FE + 3; });
    ASSERT_LT(adopted, static_cast<std::ptrdiff_t>(changes.size())) << orphan;
    EXPECT_LT(adopted, failed) << orphan << ": FE+3's failure reached the adopter first: the test shows nothing";
  }
  tree.kill(FE + 1);
  tree.kill(FE + 3);
}

// Requests held for one parent share one probe of it (core/node_accept.cpp): here
// the 4 back-ends of FE+3 (hung with FE+1, so no one reports it) ask the same
// adopter, which probes FE+3 once, not once per orphan, and adopts them together
// when the hold ends. Each process probes at most once per hung parent (FE+1 and
// FE+3).
TEST(Orphans, RequestsHeldForOneParentShareOneProbe) {
  FaultToleranceOptions fault;
  fault.heartbeat = 100ms;
  fault.suspect = 300ms;
  fault.lost = 1000ms;
  TreeHarness tree("b:2x2x4", fault);  // FE+3 (back-ends 0-3), FE+4 (4-7) under FE+1
  ASSERT_TRUE(tree.launch());
  tree.freeze(FE + 1);
  tree.freeze(FE + 3);
  ASSERT_TRUE(tree.run_until([&] { return all_recovered(tree, 4); }, 10 * fault.lost))
      << "FE+3's back-ends were not adopted";
  for (const auto& n : tree.topology().nodes()) {
    if (!tree.alive(n.rank) || tree.frozen(n.rank)) continue;
    EXPECT_LE(tree.node(n.rank).parent_probes(), 2u) << n.rank << " probed a parent once per held request";
  }
  tree.kill(FE + 1);
  tree.kill(FE + 3);
}

// A probe that found a parent gone holds for the requests that come after it
// (core/node_accept.cpp): FE+1 is killed while the front-end is frozen, so no one
// reports it. Back-end 0 asks FE+2, which probes FE+1, finds nothing there and adopts
// it; back-end 1, frozen meanwhile, asks later and is adopted on that verdict, not
// after a second probe (with a hundred orphans of one parent arriving over tens of
// milliseconds, an adopter probed again for each batch).
TEST(Orphans, AParentFoundGoneIsNotProbedAgain) {
  FaultToleranceOptions fault;
  fault.heartbeat = 100ms;
  fault.suspect = 300ms;
  fault.lost = 1000ms;
  TreeHarness tree("b:2^2", fault);  // FE+1 (back-ends 0, 1), FE+2 (2, 3)
  ASSERT_TRUE(tree.launch());
  tree.freeze(FE);
  tree.freeze(1);
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) != nullptr; }, fault.lost / 2))
      << "back-end 0 was not adopted";
  ASSERT_EQ(own_recovery(tree, 0)->adopter, FE + 2);
  EXPECT_EQ(tree.node(FE + 2).parent_probes(), 1u);
  tree.thaw(1);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 1) != nullptr; }, fault.lost / 2))
      << "back-end 1 was not adopted";
  EXPECT_EQ(own_recovery(tree, 1)->adopter, FE + 2);
  EXPECT_EQ(tree.node(FE + 2).parent_probes(), 1u) << "FE+2 probed FE+1 again for back-end 1";
  for (const auto& change : tree.heard(FE + 2).tree_changes()) {
    EXPECT_FALSE(change.kind == TreeChanged::Kind::failure && change.rank == FE + 1)
        << "FE+1's failure reached FE+2: the test shows nothing";
  }
  tree.kill(FE);
}

// A zombie parent (issue 16, finding 2): FE+1 stalls (SIGSTOP, swapped out) long
// enough for its back-ends to declare it lost, but wakes before its own parent
// declares it (the front-end heard from it last: data went up until it stalled,
// while its back-ends last heard a heartbeat). It must not report its former
// children, being adopted elsewhere, as lost (that aborted a healthy run): it reads
// that they declared it lost, and leaves the tree. The front-end then hears of
// FE+1's failure, of no back-end's, and the back-ends end up under FE+2.
TEST(Orphans, AZombieParentThatWakesAfterItsChildrenLeftLeavesTheTreeAndReportsNoOne) {
  FaultToleranceOptions fault;
  fault.heartbeat = 400ms;
  fault.suspect = 600ms;
  fault.lost = 1000ms;
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  // Data up until the stall: the front-end's last word from FE+1 is fresh, and the
  // stall begins when its back-ends' (a heartbeat) is at least 300 ms old.
  auto silent_for = [&](Rank r) { return NodeClock::now() - tree.node(r).parent_link()->last_received(); };
  for (int wave = 0; wave < 100 && (silent_for(0) < 300ms || silent_for(1) < 300ms); ++wave) {
    for (Rank b : {0u, 1u, 2u, 3u}) tree.runtime(b).streams.send_up(stream, Packet(wave, {std::int32_t(1)}));
    tree.run_for(10ms);
  }
  ASSERT_GE(silent_for(0), 300ms);
  ASSERT_GE(silent_for(1), 300ms);
  tree.freeze(FE + 1);
  auto orphaned = [&](Rank r) {
    return heard_event(tree, r, [](const auto& e) {
      return std::is_same_v<std::decay_t<decltype(e)>, core::events::Orphaned>;
    });
  };
  ASSERT_TRUE(tree.run_until([&] { return orphaned(0) && orphaned(1); }, 10 * fault.lost))
      << "FE+1's back-ends never declared it lost";
  ASSERT_TRUE(tree.node(FE).live_tree()->alive(FE + 1)) << "the front-end declared FE+1 lost first: no zombie";
  tree.thaw(FE + 1);  // the zombie wakes
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE + 1).stopped.has_value(); }, 5 * fault.lost))
      << "the zombie went on as if nothing had happened";
  EXPECT_NE(tree.heard(FE + 1).stopped->find("declared lost"), std::string::npos) << *tree.heard(FE + 1).stopped;
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) && own_recovery(tree, 1); }, 5 * fault.lost))
      << "FE+1's back-ends were not adopted after it left";
  tree.run_for(2 * fault.lost);
  EXPECT_FALSE(tree.node(FE).live_tree()->alive(FE + 1)) << "the front-end never heard that FE+1 left";
  for (Rank b : {0u, 1u, 2u, 3u}) {
    EXPECT_FALSE(tree.heard(FE).lost.count(b)) << "back-end " << b << " reported lost: " << tree.heard(FE).lost[b];
    EXPECT_TRUE(tree.node(FE).live_tree()->alive(b)) << b;
  }
  EXPECT_EQ(tree.node(FE).live_tree()->parent(0), FE + 2);
  EXPECT_EQ(tree.node(FE).live_tree()->parent(1), FE + 2);
  EXPECT_EQ(tree.runtime(FE).membership.view().members, (std::vector<Rank>{0, 1, 2, 3}))
      << "a back-end left the membership view";
}

// Point-to-point packets follow the new shape: once FE+1's back-ends are adopted
// (by FE+2), the front-end's send_to reaches them, and so do packets from another
// back-end, and theirs reach it.
TEST(Orphans, PointToPointPacketsReachAReAdoptedBackend) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  tree.kill(FE + 1);
  auto adopted_everywhere = [&] {  // where the orphans are held: 2 and 3's part does not
    for (Rank r : {FE, FE + 2, Rank{0}, Rank{1}}) {
      int adoptions = 0;
      for (const auto& change : tree.heard(r).tree_changes()) adoptions += change.kind == TreeChanged::Kind::adoption;
      if (adoptions < 2) return false;
    }
    return true;
  };
  ASSERT_TRUE(tree.run_until([&] { return adopted_everywhere() && tree.heard(FE).recovered.size() == 2; }, 10s));
  tree.runtime(FE).streams.send_down(stream, Packet(5, {std::int32_t(50)}), Rank{0});
  tree.runtime(3).streams.send_to_backend(1, 0, Packet(7, {std::int32_t(31)}));
  tree.runtime(1).streams.send_to_backend(3, 0, Packet(8, {std::int32_t(13)}));
  ASSERT_TRUE(tree.run_until(
      [&] { return !tree.heard(0).downstream.empty() && !tree.heard(1).downstream.empty() && !tree.heard(3).downstream.empty(); },
      1s))
      << "to 0: " << tree.heard(0).downstream.size() << ", to 1: " << tree.heard(1).downstream.size()
      << ", to 3: " << tree.heard(3).downstream.size() << "; errors: " << tree.heard(FE).errors.size();
  EXPECT_EQ(tree.heard(0).downstream[0].tag(), 5);
  EXPECT_EQ(tree.heard(1).downstream[0].source(), 3u);
  EXPECT_EQ(tree.heard(3).downstream[0].source(), 1u);
  EXPECT_TRUE(tree.heard(FE).errors.empty()) << tree.heard(FE).errors[0];
  EXPECT_TRUE(tree.heard(2).downstream.empty()) << "a packet for 0 went to its old sibling";
}

// An orphan holds back the output of a stream whose filter is not state
// recoverable (sum) and sends it once adopted: every value sent while orphaned is
// in the front-end's sums. The recovery report names the stream as possibly
// incomplete all the same (what was in flight when the parent died is lost).
TEST(Orphans, AnOrphanHoldsBackOutputOfANonRecoverableStreamAndSendsItOnceAdopted) {
  TreeHarness tree("b:2^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until(
      [&] { return tree.node(0).phase() == core::Phase::orphaned && tree.node(1).phase() == core::Phase::orphaned; },
      1s));
  std::int64_t sent = 0;
  for (std::int64_t v = 1; v <= 5; ++v) {
    for (Rank orphan : {0u, 1u}) {
      tree.runtime(orphan).streams.send_up(stream, Packet(0, {v * (orphan + 1)}));
      sent += v * (orphan + 1);
    }
  }
  ASSERT_EQ(tree.node(0).phase(), core::Phase::orphaned) << "sent after the adoption: nothing was held";
  ASSERT_EQ(tree.node(1).phase(), core::Phase::orphaned) << "sent after the adoption: nothing was held";
  auto& root = tree.heard(FE);
  std::int64_t total = 0;
  ASSERT_TRUE(tree.run_until(
      [&] {
        total = 0;
        for (const auto& p : root.upstream) total += std::get<std::int64_t>(p[0]);
        return total == sent && root.recovered.size() == 2;
      },
      10s))
      << "sums received " << total << " of " << sent << "; recoveries " << root.recovered.size();
  for (const auto& report : root.recovered) {
    EXPECT_EQ(report.incomplete_streams, std::vector<StreamId>{stream}) << report.rank;
  }
}

// The front-end adopts when it is the only candidate (b:1x2: one commnode). Its
// filter of a non-recoverable stream gets no state, and each orphan's report names
// the stream (what the failure cost it, each wave tells: tests/node/waves_test.cpp).
TEST(Orphans, TheFrontEndAdoptsAndTheReportsNameTheNonRecoverableStream) {
  TreeHarness tree("b:1x2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  const StreamId sum = tree.open_stream("sum");
  const StreamId union_stream = tree.open_stream("incremental_union");
  tree.kill(FE + 1);
  auto& root = tree.heard(FE);
  ASSERT_TRUE(tree.run_until([&] { return root.recovered.size() == 2; }, 10s));
  for (const auto& report : root.recovered) {
    EXPECT_EQ(report.adopter, FE) << report.rank;
    EXPECT_EQ(report.failed_parent, FE + 1) << report.rank;
    EXPECT_EQ(report.incomplete_streams, std::vector<StreamId>{sum}) << report.rank << ": not " << union_stream;
  }
  EXPECT_EQ(tree.node(FE).children().size(), 3u) << "FE+1, gone, then 0 and 1";
}

// Adoption reports go down the tree in batches (core/tree_news.h, TreeNews::kFastWindow): when a
// commnode with 8 back-ends dies and its orphans are adopted at about the same
// time, a bystander back-end hears of all 8 adoptions in a few messages, not one
// message per orphan (each message a wake-up of every process in a real tree). The
// back-ends hold the whole tree here: one that holds its part hears only of the
// adoptions it holds (ABackEndHearsOnlyOfTheAdoptionsItsPartHolds).
TEST(Orphans, AttachReportsReachTheRestOfTheTreeInBatches) {
  FaultToleranceOptions fault;
  TreeHarness tree("b:8^2", fault);  // FE+1..FE+8, back-ends 8k..8k+7 under FE+1+k
  tree.set_whole_tree();
  ASSERT_TRUE(tree.launch());
  const Rank bystander = 63;  // under FE+8
  const std::size_t before = tree.node(bystander).news_received();
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return adoptions_heard(tree, bystander) == 8; }, 10s))
      << "the bystander heard of " << adoptions_heard(tree, bystander) << " of the 8 adoptions";
  for (Rank orphan = 0; orphan < 8; ++orphan) ASSERT_TRUE(own_recovery(tree, orphan)) << orphan;
  const std::size_t messages = tree.node(bystander).news_received() - before;
  EXPECT_LE(messages, 3u) << "the failure report and the 8 adoption reports came in " << messages
                          << " messages: they were not batched";
}

// The adoption of a back-end reaches back-ends in a batch of its own (core/node.h,
// TreeNews::kLeafWindow): in the storm after a commnode's death they are not woken for
// the adoptions of its orphans, and they hear of all of them together afterwards.
// Commnodes, which adopt and route, hear of them at once (TreeNews::kFastWindow). (Back-ends
// holding the whole tree, as in the test above.)
TEST(Orphans, BackendsHearOfOtherBackendsAdoptionsTogetherAfterTheStorm) {
  FaultToleranceOptions fault;
  TreeHarness tree("b:8^2", fault);  // FE+1..FE+8, back-ends 8k..8k+7 under FE+1+k
  tree.set_whole_tree();
  ASSERT_TRUE(tree.launch());
  const Rank bystander = 63;  // under FE+8
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until(
      [&] { return adoptions_heard(tree, FE + 8) == 8 && failure_heard(tree, bystander, FE + 1); }, 10s))
      << "FE+8 heard of " << adoptions_heard(tree, FE + 8) << " of the 8 adoptions";
  for (Rank orphan = 0; orphan < 8; ++orphan) ASSERT_TRUE(own_recovery(tree, orphan)) << orphan;
  tree.run_for(50ms);  // ten of kFastWindow, a fifth of kLeafWindow (core/tree_news.h)
  const std::size_t during = adoptions_heard(tree, bystander);
  const std::size_t before = tree.node(bystander).news_received();
  ASSERT_TRUE(tree.run_until([&] { return adoptions_heard(tree, bystander) == 8; }, 10s))
      << "the bystander heard of " << adoptions_heard(tree, bystander) << " of the 8 adoptions";
  EXPECT_LT(during, 8u) << "the bystander heard of every adoption during the storm";
  EXPECT_LE(tree.node(bystander).news_received() - before, 1u) << "the rest came in more than one message";
}

// A failure report that goes to no back-end child does not send them the adoptions
// held for their batch either: in the storm of a commnode's death, the front-end's
// report of it reaches each adopter while it adopts, and used to wake every orphan
// adopted there at once for the others' adoptions (docs/fault-tolerance.md, "Where
// the time goes"). Here the front-end is frozen until the orphans are adopted, so
// that its report comes after the adoptions, as it does in the storm.
TEST(Orphans, AFailureReportNoBackEndTakesLeavesTheirAdoptionNewsForItsBatch) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:8^2", fault);  // FE+1..FE+8, back-ends 8k..8k+7 under FE+1+k
  ASSERT_TRUE(tree.launch());
  tree.freeze(FE);
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return all_recovered(tree, 8); }, 2s));
  std::map<Rank, std::vector<Rank>> adopted;  // adopter -> its orphans
  for (Rank orphan = 0; orphan < 8; ++orphan) adopted[own_recovery(tree, orphan)->adopter].push_back(orphan);
  std::map<Rank, std::size_t> before;  // what each orphan heard with its adoption
  for (Rank orphan = 0; orphan < 8; ++orphan) before[orphan] = adoptions_heard(tree, orphan);
  const auto storm_took = tree.elapsed();
  tree.thaw(FE);
  ASSERT_TRUE(tree.run_until([&] {
    return std::all_of(adopted.begin(), adopted.end(),
                       [&](const auto& a) { return failure_heard(tree, a.first, FE + 1); });
  }, 1s)) << "the adopters did not hear of FE+1's failure from the front-end";
  tree.run_for(20ms);
  ASSERT_LT(tree.elapsed() - storm_took, 200ms) << "too late to tell: the batches go 250 ms after the first adoption";
  std::size_t shared = 0;  // orphans whose adopter took others after them
  for (const auto& [adopter, orphans] : adopted) {
    shared += orphans.size() > 1;
    for (Rank orphan : orphans) {
      EXPECT_EQ(adoptions_heard(tree, orphan), before[orphan])
          << "orphan " << orphan << " under " << adopter << " heard of other adoptions with the failure report";
    }
  }
  ASSERT_GT(shared, 0u) << "no adopter took two orphans: the test shows nothing";
  // They come in their batch, after it.
  ASSERT_TRUE(tree.run_until([&] {
    for (const auto& [adopter, orphans] : adopted) {
      for (Rank orphan : orphans) {
        if (adoptions_heard(tree, orphan) < orphans.size()) return false;
      }
    }
    return true;
  }, 1s)) << "the orphans did not hear of the others adopted by their adopters";
}

// Where commnodes hold their parts of the tree (docs/scale.md), an adopter may not
// hold the orphans it is asked to take: FE+1 dies, and its orphans FE+3 and FE+4 ask
// FE+2, whose part holds FE+1 without its children. Each sends its subtree with its
// request; FE+2 holds it from then on, routes to its back-ends, and the waves over
// every back-end are whole again. The front-end, which holds the whole tree, moved
// the subtrees and holds no second copy.
TEST(Orphans, ACommnodeAdoptsOrphansItDoesNotHoldFromTheSubtreesTheySend) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  for (Rank r : {FE + 3, FE + 4, Rank{0}, Rank{3}}) {
    ASSERT_FALSE(tree.node(FE + 2).live_tree()->contains(r)) << r << " is held by FE+2 before the failure";
  }
  tree.kill(FE + 1);
  auto& root = tree.heard(FE);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, FE + 3) && own_recovery(tree, FE + 4); }, 5s));
  for (Rank orphan : {FE + 3, FE + 4}) EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 2) << orphan;
  const core::TreeView& adopter = *tree.node(FE + 2).live_tree();
  for (Rank b = 0; b < 4; ++b) {
    ASSERT_TRUE(adopter.contains(b)) << b;
    EXPECT_EQ(adopter.parent(b), b < 2 ? FE + 3 : FE + 4) << b;
    EXPECT_TRUE(tree.node(FE + 2).route_to(b).has_value()) << "FE+2 has no route to " << b;
  }
  EXPECT_EQ(adopter.parent(FE + 3), FE + 2);
  EXPECT_NE(tree.node(FE + 2).topology()->find(0), nullptr) << "the topology lacks the subtree's endpoints";
  EXPECT_EQ(tree.node(FE).topology()->size(), tree.topology().size());
  for (Rank b = 0; b < 4; ++b) EXPECT_EQ(tree.node(FE).live_tree()->parent(b), b < 2 ? FE + 3 : FE + 4) << b;

  // A wave over all eight back-ends, and a packet down to back-end 0 through FE+2.
  ASSERT_TRUE(tree.run_until([&] { return root.recovered.size() == 2; }, 5s));
  ASSERT_NO_FATAL_FAILURE(expect_whole_wave(tree, stream, 8));
  expect_packet_down(tree, stream, 0);
}

// The subtree of an orphan goes up with the adoption's report when the adopter's
// parent is not among the orphan's ancestors (docs/scale.md, "Adopting an orphan
// from another part"). b:3x2x2x2: FE+1..FE+3 on level 1; FE+4 and FE+5 under FE+1;
// FE+10 (back-ends 0, 1) and FE+11 (2, 3) under FE+4. FE+1 and FE+4 die together
// while FE+10 and FE+11 are stopped: FE+5 is adopted by FE+2 or FE+3. When the two
// wake, they ask FE+5, their parent's sibling as they last heard, which has moved:
// its new parent is not among their ancestors and holds neither them nor their
// back-ends, so their subtrees go up with the reports. Without them it ignored the
// adoption of a commnode it did not hold, and had no route to 0..3.
TEST(Orphans, AnAdopterThatMovedSendsTheOrphansSubtreeUpToItsNewParent) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:3x2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  tree.freeze(FE + 10);
  tree.freeze(FE + 11);
  tree.kill(FE + 1);
  tree.kill(FE + 4);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, FE + 5) != nullptr; }, 5s));
  const Rank moved_to = own_recovery(tree, FE + 5)->adopter;
  ASSERT_TRUE(moved_to == FE + 2 || moved_to == FE + 3) << "FE+5 went to " << moved_to;
  tree.run_for(20ms);  // past the news's batch window, well within a heartbeat
  ASSERT_FALSE(tree.node(moved_to).live_tree()->contains(0)) << moved_to << " holds back-end 0 before the adoption";
  tree.thaw(FE + 10);
  tree.thaw(FE + 11);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, FE + 10) && own_recovery(tree, FE + 11); }, 5s));
  for (Rank orphan : {FE + 10, FE + 11}) EXPECT_EQ(own_recovery(tree, orphan)->adopter, FE + 5) << orphan;
  // FE+5's new parent holds the subtrees now, with a route to each back-end; so
  // does the front-end.
  ASSERT_TRUE(tree.run_until(
      [&] {
        for (Rank b = 0; b < 4; ++b) {
          if (!tree.node(moved_to).live_tree()->contains(b) || !tree.node(moved_to).route_to(b)) return false;
        }
        return tree.node(FE).live_tree()->parent(FE + 10) == FE + 5 && tree.node(FE).live_tree()->parent(FE + 11) == FE + 5;
      },
      2s))
      << moved_to << " never held the orphans' subtrees, or the front-end never saw them under FE+5";
  for (Rank b = 0; b < 4; ++b) EXPECT_EQ(tree.node(moved_to).live_tree()->parent(b), b < 2 ? FE + 10 : FE + 11) << b;
  EXPECT_EQ(tree.node(moved_to).live_tree()->parent(FE + 10), FE + 5);

  // A wave over all 24 back-ends, and a packet down to back-end 0 through FE+5.
  ASSERT_NO_FATAL_FAILURE(expect_whole_wave(tree, stream, 24));
  expect_packet_down(tree, stream, 0);
}

// A commnode below an adopted orphan keeps its routes: the adoption comes down the
// orphan's subtree, and a commnode there took it for a move of its own back-ends to
// somewhere it could not see, and dropped their routes. b:2x2x2x2: FE+1 dies, FE+3
// and FE+4 go to FE+2; FE+7 (back-ends 0, 1) below FE+3 hears of it. A packet down to
// back-end 0 failed at FE+7 with "no route to back-end 0".
TEST(Orphans, ACommnodeBelowAnAdoptedOrphanStillRoutesToItsBackEnds) {
  FaultToleranceOptions fault;
  fault.standby_links = false;
  TreeHarness tree("b:2x2x2x2", fault);
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, FE + 3) && own_recovery(tree, FE + 4); }, 5s));
  ASSERT_TRUE(tree.run_until([&] { return tree.node(FE + 7).live_tree()->parent(FE + 3) == own_recovery(tree, FE + 3)->adopter; }, 2s))
      << "FE+7 never heard that its parent moved";
  tree.run_for(20ms);
  for (Rank b : {Rank{0}, Rank{1}}) EXPECT_TRUE(tree.node(FE + 7).route_to(b).has_value()) << "FE+7 has no route to " << b;
  expect_packet_down(tree, stream, 0);
}

// A back-end holding its part of the tree (docs/scale.md) is sent only the adoptions
// it holds. FE+1 dies; its one back-end, 0, goes to FE+2, whose back-end 1 does not
// hold it and hears of nothing: as a new sibling it heard of it before, and at depth
// 2 every adopter's back-ends did, F² processes for one commnode's failure.
// Back-ends 2 and 3, under FE+3 and FE+4, hear of nothing either: FE+1's failure
// goes to its siblings, not below them (docs/scale.md, "Who hears of a change").
// Holding the whole tree, they hear of the failure and the adoption, as before.
TEST(Orphans, ABackEndHearsOnlyOfTheAdoptionsItsPartHolds) {
  for (const bool whole : {false, true}) {
    FaultToleranceOptions fault;
    fault.standby_links = false;
    TreeHarness tree("b:4x1", fault);  // FE+1..FE+4, back-end k under FE+1+k
    if (whole) tree.set_whole_tree();
    ASSERT_TRUE(tree.launch());
    std::map<Rank, std::size_t> before;
    for (Rank r : {1u, 2u, 3u}) before[r] = tree.node(r).news_received();
    tree.kill(FE + 1);
    ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 0) != nullptr; }, 5s));
    ASSERT_EQ(own_recovery(tree, 0)->adopter, FE + 2);
    tree.run_for(1s);  // past every batch's window
    auto adoptions_heard = [&](Rank r) {
      std::size_t n = 0;
      for (const auto& c : tree.heard(r).tree_changes()) n += c.kind == TreeChanged::Kind::adoption && c.rank == 0;
      return n;
    };
    if (whole) {
      EXPECT_EQ(adoptions_heard(1), 1u);
      EXPECT_EQ(tree.node(1).live_tree()->parent(0), FE + 2);
    } else {
      EXPECT_EQ(adoptions_heard(1), 0u);
      EXPECT_FALSE(tree.node(1).live_tree()->contains(0)) << "back-end 1's part holds back-end 0";
      EXPECT_EQ(tree.node(1).news_received() - before[1], 0u);
    }
    for (Rank bystander : {2u, 3u}) {
      EXPECT_EQ(adoptions_heard(bystander), whole ? 1u : 0u) << bystander << ", whole " << whole;
      EXPECT_EQ(tree.node(bystander).news_received() - before[bystander], whole ? 2u : 0u)
          << bystander << ", whole " << whole << ": the failure report and the adoption's if it holds the whole tree";
    }
  }
}

// An orphan adopted after others is sent the live tree (core/node.cpp,
// send_live_tree) with the adoptions that follow one another in one message: here
// back-end 7, frozen while FE+1's other 7 orphans were adopted, hears of all 7 in
// a few messages, not one per adoption. (Every process holds the whole tree here:
// where commnodes hold parts, an adopter holds only the adoptions of its own line.)
TEST(Orphans, AnOrphanAdoptedLateGetsTheAdoptionsOfTheLiveTreeInOneMessage) {
  FaultToleranceOptions fault;
  TreeHarness tree("b:8^2", fault);  // FE+1..FE+8, back-ends 8k..8k+7 under FE+1+k
  tree.set_whole_tree();
  ASSERT_TRUE(tree.launch());
  tree.freeze(7);
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return all_recovered(tree, 7); }, 10s))
      << "FE+1's other back-ends were not adopted";
  tree.run_for(50ms);  // every commnode hears of every adoption (TreeNews::kFastWindow)
  const std::size_t before = tree.node(7).news_received();
  tree.thaw(7);
  ASSERT_TRUE(tree.run_until([&] { return own_recovery(tree, 7) != nullptr; }, 10s)) << "back-end 7 was not adopted";
  std::size_t adoptions = 0;
  for (const auto& c : tree.heard(7).tree_changes()) adoptions += c.kind == TreeChanged::Kind::adoption && c.rank < 7;
  EXPECT_EQ(adoptions, 7u) << "back-end 7 did not hear of the other adoptions with its own";
  const std::size_t messages = tree.node(7).news_received() - before;
  EXPECT_LE(messages, 3u) << "the live tree came in " << messages << " messages";
}

// Standby links (FaultToleranceOptions::standby_links): once the tree runs, every
// process that has a potential adopter keeps a link to the first, and the
// orphans of a failed commnode are adopted over those links, each by the adopter
// its link went to, with no new connection.
TEST(Orphans, WithStandbyLinksOrphansAreAdoptedOverTheLinksTheyKeep) {
  FaultToleranceOptions fault;
  fault.standby_links = true;
  TreeHarness tree("b:4^2", fault);  // FE+1..FE+4, back-ends 4k..4k+3 under FE+1+k
  ASSERT_TRUE(tree.launch());
  // The commnodes have none: their parent is the root, and no one adopts a child
  // of a failed root.
  auto all_standing = [&] {
    for (const auto& n : tree.topology().nodes()) {
      if (!tree.alive(n.rank)) continue;
      if (n.role == Role::backend && !tree.node(n.rank).standby()) return false;
      if (n.role != Role::backend && tree.node(n.rank).standby()) return false;
    }
    return true;
  };
  auto accepted = [&] {
    std::size_t held = 0;
    for (Rank c = FE + 1; c <= FE + 4; ++c) held += tree.node(c).standbys_accepted();
    return held;
  };
  ASSERT_TRUE(tree.run_until([&] { return all_standing() && accepted() == 16; }, 5s))
      << "not every back-end opened its standby link; the commnodes hold " << accepted() << " of 16";
  std::map<Rank, Rank> standby;
  for (Rank orphan = 0; orphan < 4; ++orphan) {
    standby[orphan] = *tree.node(orphan).standby();
    EXPECT_NE(standby[orphan], FE + 1) << orphan << ": a standby link to its own parent";
    EXPECT_EQ(standby[orphan], tree.node(orphan).live_tree()->potential_adopters(orphan, 1).front()) << orphan;
  }
  tree.kill(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return all_recovered(tree, 4); }, 10s));
  for (Rank orphan = 0; orphan < 4; ++orphan) {
    const Event& recovered = *own_recovery(tree, orphan);
    EXPECT_TRUE(recovered.standby) << orphan << " was not adopted over its standby link";
    EXPECT_EQ(recovered.adopter, standby[orphan]) << orphan;
    EXPECT_EQ(recovered.attempts, 1u) << orphan;
  }
  // The links follow the tree: the adopted orphans open new ones (not to their new
  // parent), and those that pointed at FE+1 (none here: back-ends point at commnodes
  // other than their parent) would move. Not in the storm: the orphans of a larger
  // commnode still wait for a core then (kStandbyQuiet, services/recovery.cpp), and
  // a handshake is the work of several wake-ups on each side.
  tree.run_for(900ms);
  for (Rank orphan = 0; orphan < 4; ++orphan) {
    EXPECT_FALSE(tree.node(orphan).standby()) << orphan << " opened its new standby link within a second of its adoption";
  }
  ASSERT_TRUE(tree.run_until(all_standing, 5s)) << "the adopted orphans did not open new standby links";
  for (Rank orphan = 0; orphan < 4; ++orphan) {
    EXPECT_NE(*tree.node(orphan).standby(), standby[orphan]) << orphan << ": a standby link to its new parent";
  }
}

// A standby link whose acceptor dies is replaced by one to the next potential
// adopter; without the option, no process keeps one.
TEST(Orphans, AStandbyLinkFollowsItsAdopterAndIsKeptOnlyWithTheOption) {
  {
    FaultToleranceOptions fault;
    fault.standby_links = true;
    TreeHarness tree("b:4^2", fault);
    ASSERT_TRUE(tree.launch());
    ASSERT_TRUE(tree.run_until([&] { return tree.node(0).standby().has_value(); }, 5s));
    const Rank first = *tree.node(0).standby();
    tree.kill(first);
    ASSERT_TRUE(tree.run_until([&] {
      auto s = tree.node(0).standby();
      return s && *s != first;
    }, 5s)) << "back-end 0 kept no standby link after its adopter " << first << " died";
    // The next potential adopter: back-end 0 may not hear of the failure of its
    // parent's sibling (docs/scale.md), but finds it unreachable.
    auto candidates = tree.node(0).live_tree()->potential_adopters(0, 2);
    std::erase(candidates, first);
    EXPECT_EQ(*tree.node(0).standby(), candidates.front());
  }
  FaultToleranceOptions without;
  TreeHarness plain("b:4^2", without);
  ASSERT_TRUE(plain.launch());
  plain.run_for(3s);
  for (const auto& n : plain.topology().nodes()) {
    EXPECT_FALSE(plain.node(n.rank).standby()) << n.rank;
    EXPECT_EQ(plain.node(n.rank).standbys_accepted(), 0u) << n.rank;
  }
}

// Healing switched off while the tree runs (Network::set_healing, MRNet's
// set_FailureRecovery(false)): no standby link stays open or opens again, and a lost
// commnode's orphans stop instead of being adopted; switched on again, the standby
// links come back.
TEST(Orphans, HealingSwitchedOffKeepsNoStandbyLinkAndStopsOrphansAndOnAgainHeals) {
  FaultToleranceOptions fault;
  fault.standby_links = true;
  TreeHarness tree("b:4^2", fault);
  ASSERT_TRUE(tree.launch());
  ASSERT_TRUE(tree.run_until([&] { return tree.node(0).standby().has_value(); }, 5s));
  // As the front-end does: the root's requests service carries it to every process.
  tree.runtime(tree.root()).requests.set_healing(1, false);
  ASSERT_TRUE(tree.run_until([&] {
    for (const auto& n : tree.topology().nodes()) {
      if (tree.node(n.rank).healing()) return false;
    }
    return true;
  }, 5s)) << "not every process switched healing off";
  tree.run_for(3s);
  for (const auto& n : tree.topology().nodes()) EXPECT_FALSE(tree.node(n.rank).standby()) << n.rank;

  const Rank commnode = tree.node(0).live_tree()->parent(0);
  ASSERT_EQ(tree.node(1).live_tree()->parent(1), commnode);
  tree.kill(commnode);
  ASSERT_TRUE(tree.run_until([&] {
    return tree.node(0).phase() == core::Phase::stopped && tree.node(1).phase() == core::Phase::stopped;
  }, 10s)) << "the orphans were not stopped with healing off; back-end 0 is " << core::to_string(tree.node(0).phase());
  EXPECT_EQ(tree.node(tree.root()).live_tree()->parent(0), commnode) << "back-end 0 was adopted with healing off";

  tree.runtime(tree.root()).requests.set_healing(2, true);
  EXPECT_TRUE(tree.run_until([&] { return tree.node(4).healing() && tree.node(4).standby().has_value(); }, 5s))
      << "no standby link once healing was on again";
}

}  // namespace
}  // namespace canopy::testing
