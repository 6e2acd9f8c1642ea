// The node core and its services, in process: a whole tree per test on loopback
// sockets, driven by the test thread on manual time (tree_harness.h). Crashes,
// hangs and adoptions with the time-outs of a real run take milliseconds; the
// process-level tests (tests/integration) stay.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;
using core::events::TreeChanged;

constexpr Rank FE = kFirstInternalRank;
constexpr Rank C1 = FE + 1, C2 = FE + 2;

// The defaults of a real run (heartbeat 0.5 s, lost after 5 s, adoption time-out
// 30 s): time is manual in the harness, so seconds of it pass in milliseconds.
FaultToleranceOptions fast_healing() { return FaultToleranceOptions{}; }

// Every back-end sends one packet on `stream`; returns once the root has `waves`
// results or the time is up.
void send_from_every_backend(TreeHarness& tree, StreamId stream, const std::function<Packet(Rank)>& packet) {
  for (Rank b : tree.topology().backends()) {
    if (tree.alive(b)) tree.runtime(b).streams.send_up(stream, packet(b));
  }
}


TEST(NodeInProcess, ATreeComesUpAndEveryNodeIsRunning) {
  TreeHarness tree("b:2^2", fast_healing());
  ASSERT_TRUE(tree.launch());
  EXPECT_EQ(tree.heard(FE).launched.size(), tree.topology().size() - 1);
  for (const auto& n : tree.topology().nodes()) {
    EXPECT_EQ(tree.node(n.rank).phase(), core::Phase::running) << n.rank;
    EXPECT_NE(tree.node(n.rank).topology()->at(C1).port, 0) << "endpoints reach rank " << n.rank;
  }
}

TEST(NodeInProcess, AStreamSumsOneWaveOverTheTree) {
  TreeHarness tree("b:2^2", fast_healing());
  ASSERT_TRUE(tree.launch());
  StreamId stream = tree.open_stream("sum");
  send_from_every_backend(tree, stream, [](Rank b) { return Packet(0, {std::int64_t(b + 1)}); });
  auto& root = tree.heard(FE);
  ASSERT_TRUE(tree.run_until([&] { return !root.upstream.empty(); }, 5s));
  EXPECT_EQ(std::get<std::int64_t>(root.upstream[0][0]), 10);
  EXPECT_EQ(root.upstream[0].contributors(), 4u);
}

// What a back-end sent before it was lost is kept (docs/membership.md): packets it
// sent that wait at its parent for the rest of their waves still go into them.
TEST(NodeInProcess, PacketsOfALostBackendStillQueuedGoIntoTheirWaves) {
  TreeHarness tree("b:2^2", fast_healing());
  ASSERT_TRUE(tree.launch());
  StreamId stream = tree.open_stream("sum");
  for (std::int64_t v : {10, 20, 30}) tree.runtime(0).streams.send_up(stream, Packet(0, {v}));
  tree.run_for(100ms);  // they wait at C1 for back-end 1's
  tree.kill(0);
  ASSERT_TRUE(tree.run_until([&] { return !tree.heard(FE).lost.empty(); }, 10s));
  for (int wave = 0; wave < 3; ++wave) {
    for (Rank b : {1u, 2u, 3u}) tree.runtime(b).streams.send_up(stream, Packet(0, {std::int64_t(1000)}));
  }
  auto& root = tree.heard(FE);
  ASSERT_TRUE(tree.run_until([&] { return root.upstream.size() == 3; }, 10s));
  std::int64_t total = 0;
  for (const auto& p : root.upstream) total += std::get<std::int64_t>(p[0]);
  EXPECT_EQ(total, 60 + 9 * 1000) << "back-end 0's packets were dropped";
  EXPECT_EQ(root.upstream[0].contributors(), 4u) << "its first packet went into the first wave";
}

// The example of docs/architecture.md, "Adding a service": a service that uses only
// the public seam (core/service.h, core/service_context.h) and needs no edit of the
// core. A ping from the root travels down; every node answers with its rank and
// passes it on; answers travel up to the root.
class Echo final : public core::Service {
 public:
  explicit Echo(core::ServiceContext& node) : node_(node) {}
  core::ServiceId id() const override { return 100; }
  std::string_view name() const override { return "echo"; }
  void ping() { on_message({}, 0, {}); }
  void on_message(const core::Peer& from, std::uint16_t, capnp::AnyPointer::Reader body) override {
    if (from.kind == core::Peer::Kind::child) return up(body.getAs<capnp::Text>());
    for (std::size_t i = 0; i < node_.children().size(); ++i) send(i, "ping");
    up(std::to_string(node_.identity().rank));
  }
  std::vector<std::string> answers;  // at the root

 private:
  void up(const std::string& text) {
    if (node_.is_root()) return answers.push_back(text);
    core::Outgoing message(node_.identity(), id(), 0);
    message.set<capnp::Text>(text.c_str());
    node_.send_up(message);
  }
  void send(std::size_t child, const char* text) {
    core::Outgoing message(node_.identity(), id(), 0);
    message.set<capnp::Text>(text);
    node_.send_to_child(child, message);
  }
  core::ServiceContext& node_;
};

TEST(NodeInProcess, AServiceOfItsOwnRidesTheOverlayThroughThePublicSeam) {
  std::map<Rank, Echo*> echo;
  TreeHarness tree("b:2^2", fast_healing(), [&](Rank rank, core::ServiceContext& node) {
    auto service = std::make_unique<Echo>(node);
    echo[rank] = service.get();
    return service;
  });
  ASSERT_TRUE(tree.launch());
  echo[FE]->ping();
  auto& answers = echo[FE]->answers;
  ASSERT_TRUE(tree.run_until([&] { return answers.size() == tree.topology().size(); }, 5s));
  std::vector<std::string> expected;
  for (const auto& n : tree.topology().nodes()) expected.push_back(std::to_string(n.rank));
  std::sort(answers.begin(), answers.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(answers, expected);
}

TEST(NodeInProcess, AnotherServiceWithATakenIdIsRefused) {
  TreeHarness tree("b:2", fast_healing());
  ASSERT_TRUE(tree.launch());
  Echo first(tree.node(FE)), second(tree.node(FE));
  EXPECT_TRUE(tree.node(FE).add_service(first));
  auto refused = tree.node(FE).add_service(second);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("already taken by 'echo'"), std::string::npos) << refused.error();
}

// Events reach the services of every process they concern, not only the root's: a
// back-end whose parent died, the commnode that adopts it, and the front-end all
// apply the failure and then both adoptions. Where commnodes hold parts, C2's
// back-ends 2 and 3 hear of neither: the failure of their parent's sibling goes to
// its siblings, not below them, and 0 and 1 are not in their part (docs/scale.md,
// "Who hears of a change"); holding the whole tree, they hear of both.
TEST(NodeInProcess, EveryProcessHearsOfAFailureAndOfTheAdoptionsThatHealIt) {
  for (const bool whole : {false, true}) {
  TreeHarness tree("b:2^2", fast_healing());  // back-ends 0, 1 under C1; 2, 3 under C2
  if (whole) tree.set_whole_tree();
  ASSERT_TRUE(tree.launch());
  tree.kill(C1);
  auto healed = [&](Rank rank) {
    int adoptions = 0;
    bool failure = false;
    for (const auto& change : tree.heard(rank).tree_changes()) {
      failure |= change.kind == TreeChanged::Kind::failure && change.rank == C1;
      adoptions += change.kind == TreeChanged::Kind::adoption && (change.rank == 0 || change.rank == 1);
    }
    const bool told = whole || (rank != 2 && rank != 3);
    return failure == told && adoptions == (told ? 2 : 0);
  };
  const std::vector<Rank> survivors{FE, C2, 0, 1, 2, 3};
  ASSERT_TRUE(tree.run_until([&] { return std::all_of(survivors.begin(), survivors.end(), healed); }, 5s))
      << "not healed: " << [&] {
           std::string out;
           for (Rank r : survivors) out += healed(r) ? "" : std::to_string(r) + " ";
           return out;
         }();
  EXPECT_TRUE(tree.run_until([&] { return tree.heard(FE).recovered.size() == 2; }, 5s));
  for (Rank orphan : {0u, 1u}) {
    EXPECT_TRUE(tree.heard(orphan).events.end() !=
                std::find_if(tree.heard(orphan).events.begin(), tree.heard(orphan).events.end(),
                             [](const core::NodeEvent& e) { return std::holds_alternative<core::events::Adopted>(e); }));
    EXPECT_EQ(tree.node(orphan).phase(), core::Phase::running);
  }
  }
}

// An orphan asks each potential adopter under a new incarnation. With one number
// for every attempt, an adopter that accepted late (after the orphan gave up on it)
// reports an adoption that makes the orphan's later requests look stale: they are
// refused everywhere until the adoption time-out stops the orphan's subtree.
TEST(NodeInProcess, AnOrphanAsksEachAdopterUnderAFreshIncarnation) {
  TreeHarness tree("b:2^2", fast_healing());
  ASSERT_TRUE(tree.launch());
  tree.freeze(C2);  // the first potential adopter of 0 and 1 hangs (and its own children leave it)
  tree.kill(C1);
  auto& root = tree.heard(FE);
  auto report_of = [&](Rank orphan) -> const Event* {
    for (const auto& report : root.recovered) {
      if (report.rank == orphan) return &report;
    }
    return nullptr;
  };
  // C2 is given up on after `lost` (5 s), then the front-end is asked.
  ASSERT_TRUE(tree.run_until([&] { return report_of(0) && report_of(1); }, 15s));
  for (Rank orphan : {0u, 1u}) {
    const auto& report = *report_of(orphan);
    EXPECT_EQ(report.adopter, FE) << orphan;
    EXPECT_EQ(report.attempts, 2u) << "C2, which did not answer, then the front-end";
    EXPECT_EQ(report.incarnation, 2u) << "one incarnation per adoption request";
  }
  tree.kill(C2);
}

TEST(NodeInProcess, AHungBackendIsFoundByHeartbeatsAndReportedLost) {
  const auto fault = fast_healing();
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(3);
  const auto frozen_at = tree.elapsed();
  auto& root = tree.heard(FE);
  ASSERT_TRUE(tree.run_until([&] { return root.lost.count(3) != 0; }, 10s));
  // Its parent checks every half heartbeat; the last message from it may have
  // arrived up to one heartbeat before it froze.
  const auto found_after = tree.elapsed() - frozen_at;
  EXPECT_GE(found_after, fault.lost - fault.heartbeat);
  EXPECT_LE(found_after, fault.lost + fault.heartbeat / 2 + 10ms);
  EXPECT_NE(root.lost[3].find("no message or heartbeat"), std::string::npos) << root.lost[3];
  EXPECT_EQ(tree.node(C2).children()[*tree.node(C2).children().index_of(3)].state, core::ChildState::gone);
}

// Silent for longer than `suspect` but less than `lost`: suspected, not cut off.
TEST(NodeInProcess, ABackendThatPausesForLessThanTheLostThresholdIsKept) {
  const auto fault = fast_healing();
  TreeHarness tree("b:2^2", fault);
  ASSERT_TRUE(tree.launch());
  tree.freeze(3);
  tree.run_for(fault.lost - fault.heartbeat * 2);
  tree.thaw(3);
  tree.run_for(fault.lost * 2);
  EXPECT_TRUE(tree.heard(FE).lost.empty());
  EXPECT_EQ(tree.node(C2).children()[*tree.node(C2).children().index_of(3)].state, core::ChildState::ready);
  EXPECT_EQ(tree.node(3).phase(), core::Phase::running);
}

// Between back-ends on no stream (stream 0, include/canopy/backend.h): through the
// nearest common ancestor and down a commnode that has no stream 0.
TEST(NodeInProcess, APointToPointPacketOnNoStreamCrossesTheTree) {
  TreeHarness tree("b:2^2", fast_healing());
  ASSERT_TRUE(tree.launch());
  tree.runtime(0).streams.send_to_backend(3, 0, Packet(7, {std::int32_t(42)}));
  ASSERT_TRUE(tree.run_until([&] { return !tree.heard(3).downstream.empty(); }, 1s));
  EXPECT_EQ(tree.heard(3).downstream[0].tag(), 7);
  EXPECT_EQ(tree.heard(3).downstream[0].source(), 0u);
}

// State composition: the union over a stream of a state-recoverable filter stays
// complete when a commnode dies between waves.
TEST(NodeInProcess, AdoptedOrphansSendTheirFilterStateAndTheUnionStaysComplete) {
  TreeHarness tree("b:2^2", fast_healing());
  ASSERT_TRUE(tree.launch());
  StreamId stream = tree.open_stream("incremental_union");
  auto& root = tree.heard(FE);
  send_from_every_backend(tree, stream, [](Rank b) { return Packet(0, {std::vector<std::int64_t>{10 + b}}); });
  ASSERT_TRUE(tree.run_until([&] { return !root.upstream.empty(); }, 5s));
  tree.kill(C1);  // its own filter state dies with it; 0's and 1's survives in them
  ASSERT_TRUE(tree.run_until([&] { return root.recovered.size() == 2; }, 5s));
  send_from_every_backend(tree, stream, [](Rank b) { return Packet(0, {std::vector<std::int64_t>{20 + b}}); });
  std::set<std::int64_t> seen;
  auto complete = [&] {
    for (const auto& packet : root.upstream) {
      for (auto v : std::get<std::vector<std::int64_t>>(packet[0])) seen.insert(v);
    }
    return seen.size() == 8;
  };
  EXPECT_TRUE(tree.run_until(complete, 5s)) << "values seen: " << seen.size();
  for (const auto& report : root.recovered) EXPECT_TRUE(report.incomplete_streams.empty());
}

}  // namespace
}  // namespace canopy::testing
