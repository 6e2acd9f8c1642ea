// docs/filters.md's claims about downstream filters and filters that throw, on real
// trees over loopback (issue 21): a downstream filter transforms what goes down at
// every node that has children, and an exception thrown by a filter's execute()
// becomes an error of that stream at the front-end, while every process runs on.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "canopy/frontend.h"
#include "tree_fixture.h"
#include "script_protocol.h"

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;
using canopy::testing::TreeTest;
namespace script = canopy::script;

namespace {

const std::string kBin = CANOPY_BIN_DIR;
const std::string kScriptBackend = std::string(CANOPY_TEST_BIN_DIR) + "/script_backend";
const std::string kClaimsFilters = CANOPY_CLAIMS_FILTERS;

class FilterClaims : public TreeTest {
 protected:
  // b:2^2: the front-end, commnodes 1000001 and 1000002, back-ends 0..3.
  canopy::Network* launch(canopy::FaultToleranceOptions fault = {}) {
    auto topology = canopy::generate_topology("b:2^2");
    EXPECT_TRUE(topology) << topology.error();
    if (!topology) return nullptr;
    topology_ = *topology;
    canopy::LaunchOptions options;
    options.topology = *topology;
    options.backend_argv = {kScriptBackend};
    options.fault_tolerance = fault;
    auto network = canopy::Network::launch(std::move(options));
    if (!network) {
      ADD_FAILURE() << network.error();
      return nullptr;
    }
    network_ = std::move(*network);
    if (auto loaded = network_->load_filter(kClaimsFilters, "stamp"); !loaded) ADD_FAILURE() << loaded.error();
    if (auto loaded = network_->load_filter(kClaimsFilters, "explode"); !loaded) ADD_FAILURE() << loaded.error();
    if (auto loaded = network_->load_filter(kClaimsFilters, "crash"); !loaded) ADD_FAILURE() << loaded.error();
    if (auto loaded = network_->load_filter(kClaimsFilters, "flood"); !loaded) ADD_FAILURE() << loaded.error();
    if (auto loaded = network_->load_filter(kClaimsFilters, "bloat"); !loaded) ADD_FAILURE() << loaded.error();
    if (auto loaded = network_->load_filter(kClaimsFilters, "slow"); !loaded) ADD_FAILURE() << loaded.error();
    return network_.get();
  }

  std::optional<canopy::Topology> topology_;
};

TEST_F(FilterClaims, ADownstreamFilterTransformsWhatTheBackendsReceiveAtEveryNodeOnTheWay) {
  auto* net = launch();
  ASSERT_TRUE(net);
  auto stream = net->create_stream({.upstream_filter = "concat", .downstream_filter = "stamp"});
  ASSERT_TRUE(stream) << stream.error();
  ASSERT_TRUE(net->broadcast(*stream, canopy::Packet{script::kEcho, {std::vector<std::int32_t>{7}}}));
  auto in = net->receive(10s);
  ASSERT_TRUE(in) << in.error();
  ASSERT_TRUE(*in) << "no answer within 10 s";
  const auto& out = (*in)->packet;
  ASSERT_EQ(out.size(), 2u) << out.format();
  const auto& ranks = std::get<std::vector<std::int32_t>>(out[0]);
  const auto& seen = std::get<std::vector<std::int32_t>>(out[1]);
  ASSERT_EQ(ranks.size(), 4u) << out.format();
  ASSERT_EQ(seen.size(), 3 * ranks.size()) << "each back-end echoes 7 and two stamps: " << out.format();
  std::set<std::int32_t> answered;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const auto rank = static_cast<canopy::Rank>(ranks[i]);
    answered.insert(ranks[i]);
    // The front-end stamped it, then the back-end's own commnode; the back-end
    // received the transformed packet, not the one broadcast.
    const std::vector<std::int32_t> expected{7, static_cast<std::int32_t>(topology_->root().rank),
                                             static_cast<std::int32_t>(*topology_->at(rank).parent)};
    EXPECT_EQ(std::vector<std::int32_t>(seen.begin() + 3 * i, seen.begin() + 3 * i + 3), expected)
        << "back-end " << rank << " received another packet";
  }
  EXPECT_EQ(answered, (std::set<std::int32_t>{0, 1, 2, 3}));
}

TEST_F(FilterClaims, AnExceptionInExecuteBecomesAStreamErrorAndNoProcessDies) {
  auto* net = launch();
  ASSERT_TRUE(net);
  const auto processes = ProcessGuard::descendants().size();
  ASSERT_EQ(processes, 6u) << "two commnodes and four back-ends";
  auto stream = net->create_stream({.upstream_filter = "explode"});
  ASSERT_TRUE(stream) << stream.error();
  ASSERT_TRUE(net->broadcast(*stream, canopy::Packet{script::kReply, {-1, 0}}));
  // Both commnodes throw on their wave: the front-end gets one error of this stream
  // naming both by their ranks, with the exception's message once (errors alike
  // travel up as one: docs/filters.md).
  auto in_error = net->receive(10s);
  ASSERT_FALSE(in_error) << (*in_error ? "a packet arrived instead of the error" : "no error within 10 s");
  EXPECT_EQ(in_error.error(), "stream " + std::to_string(*stream) +
                                  ": commnodes 1000001-1000002: exception: explode refuses a wave of 2 packets");
  auto more = net->receive(500ms);
  EXPECT_TRUE(more && !*more) << "one error, not one per commnode: " << (more ? "a packet" : more.error());
  // Nothing crashed: every process is alive and the tree still reduces.
  EXPECT_EQ(ProcessGuard::descendants().size(), processes);
  auto sum = net->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(sum) << sum.error();
  ASSERT_TRUE(net->broadcast(*sum, canopy::Packet{script::kReply, {-1, 0}}));
  auto in = net->receive(10s);
  ASSERT_TRUE(in) << in.error();
  ASSERT_TRUE(*in) << "no answer within 10 s";
  EXPECT_EQ(std::get<std::int32_t>((*in)->packet[0]), 0 + 1 + 2 + 3);
}

// A filter that kills its commnode (issue 16): the failure event names the node and
// the signal, and the wave the crash cost comes flagged incomplete, holding the
// other commnode's back-ends, with its sum exact over them (issue 44: no error that
// is followed by wrong aggregates).
TEST_F(FilterClaims, AFilterThatKillsItsCommnodeIsNamedWithTheNodeAndTheSignal) {
  auto* net = launch();
  ASSERT_TRUE(net);
  constexpr canopy::Rank kVictim = canopy::kFirstInternalRank + 1;
  auto stream = net->create_stream({.upstream_filter = "crash", .upstream_params = canopy::Packet{0, {kVictim}}});
  ASSERT_TRUE(stream) << stream.error();
  ASSERT_TRUE(net->broadcast(*stream, canopy::Packet{script::kReply, {-1, 0}}));
  std::optional<canopy::Event> failure;
  std::optional<canopy::Received> wave;
  for (auto until = std::chrono::steady_clock::now() + 30s;
       (!failure || !wave) && std::chrono::steady_clock::now() < until;) {
    while (auto e = net->next_event(0ms)) {
      if (e->kind == canopy::Event::Kind::failure && e->rank == kVictim) failure = *e;
    }
    auto in = net->receive(100ms);
    ASSERT_TRUE(in) << in.error();
    if (*in) wave = std::move(**in);
  }
  ASSERT_TRUE(failure) << "no failure event for the commnode the filter killed";
  EXPECT_NE(failure->reason.find("commnode " + std::to_string(kVictim)), std::string::npos) << failure->reason;
  EXPECT_NE(failure->reason.find("killed by signal 11"), std::string::npos) << failure->reason;
  ASSERT_TRUE(wave) << "the wave of the crash never came";
  EXPECT_EQ(wave->wave, std::optional<std::uint64_t>{0});
  EXPECT_FALSE(wave->complete);
  EXPECT_EQ(wave->holds, 2u) << "back-ends 2 and 3, below the other commnode";
  EXPECT_EQ(std::get<std::int32_t>(wave->packet[0]), 2 + 3);
}

// A slow filter is not a hung node (issue 48: MRNet's PerformanceData example, whose
// filter sleeps a second a wave, lost a commnode now and then). Each commnode's
// filter takes 150 ms a wave; the back-ends send 12 waves at once, so a commnode
// has 1.8 s of filtering before it, over four times the lost threshold of 400 ms.
// It handled them all in one turn of its loop: no heartbeat went out meanwhile, its
// parent and back-ends judged it hung and cut it, and waves came incomplete. Now a
// node takes its peers' messages in short turns (docs/fault-tolerance.md, "Slow
// filters"): every wave comes complete and every process stays.
TEST_F(FilterClaims, AFilterThatTakesLongerThanTheLostThresholdInAllIsNotTakenForAHungNode) {
  canopy::FaultToleranceOptions fault;
  fault.heartbeat = 50ms;
  fault.suspect = 200ms;
  fault.lost = 400ms;
  auto* net = launch(fault);
  ASSERT_TRUE(net);
  auto stream = net->create_stream({.upstream_filter = "slow", .upstream_params = canopy::Packet{0, {150u}}});
  ASSERT_TRUE(stream) << stream.error();
  constexpr int kWaves = 12;
  ASSERT_TRUE(net->broadcast(*stream, canopy::Packet{script::kUnion, {kWaves, 0}}));
  for (int wave = 0; wave < kWaves; ++wave) {
    auto in = net->receive(30s);
    ASSERT_TRUE(in) << in.error();
    ASSERT_TRUE(*in) << "no wave " << wave << " within 30 s";
    EXPECT_EQ((*in)->wave, std::optional<std::uint64_t>(wave));
    EXPECT_TRUE((*in)->complete) << "wave " << wave << " holds " << (*in)->holds << " back-ends";
    EXPECT_EQ(std::get<std::vector<std::int32_t>>((*in)->packet[0]).size(), 4u) << (*in)->packet.format();
  }
  EXPECT_EQ(ProcessGuard::descendants().size(), 6u) << "a commnode or back-end was cut as hung";
}

// A filter emitting 200,000 packets a wave (issue 16, finding 3): the shutdown keeps
// to its own bound (Network::shutdown fails saying "the tree did not stop within
// ..." past it); it took 50 s, the front-end running the filter on everything that
// kept arriving after the stop began. The packets a commnode makes of one wave are
// of that wave (issue 44): the front-end's wave holds all 400,000 from its two
// commnodes before its own filter runs, so the first result takes a while (seconds,
// more under the sanitizers on a loaded machine).
TEST_F(FilterClaims, AFilterEmittingManyPacketsAWaveDoesNotHoldUpTheShutdown) {
  auto* net = launch();
  ASSERT_TRUE(net);
  auto stream = net->create_stream({.upstream_filter = "flood", .upstream_params = canopy::Packet{0, {200000u}}});
  ASSERT_TRUE(stream) << stream.error();
  ASSERT_TRUE(net->broadcast(*stream, canopy::Packet{script::kReply, {-1, 0}}));
  auto in = net->receive(90s);
  ASSERT_TRUE(in) << in.error();
  ASSERT_TRUE(*in) << "no result within 90 s";
  EXPECT_EQ((*in)->wave, std::optional<std::uint64_t>{0});
  auto stopped = net->shutdown();
  EXPECT_TRUE(stopped) << stopped.error();
}

// A filter output over the frame limit (issue 16, finding 4): the commnode refuses
// to send it, and the front-end gets an error of the stream naming the node, the
// filter and the size (before, the frame was sent, the front-end refused it and
// closed the link, and the user saw only a missing result). The tree goes on.
// Making and encoding the 68 MB packet is one filter call, which under the
// sanitizers beside other tests took longer than the default lost threshold (5 s):
// the commnode was killed as hung and the error never came. What is tested here is
// the frame limit, so the thresholds are generous.
TEST_F(FilterClaims, AFilterOutputOverTheFrameLimitIsAStreamErrorNamingTheFilterAndTheSize) {
  canopy::FaultToleranceOptions fault;
  fault.suspect = 30s;
  fault.lost = 60s;
  auto* net = launch(fault);
  ASSERT_TRUE(net);
  const std::uint32_t ints = 17'000'000;  // 68 MB, over 64 MiB
  auto stream = net->create_stream({.upstream_filter = "bloat", .upstream_params = canopy::Packet{0, {ints}}});
  ASSERT_TRUE(stream) << stream.error();
  ASSERT_TRUE(net->broadcast(*stream, canopy::Packet{script::kReply, {-1, 0}}));
  auto in = net->receive(30s);
  ASSERT_FALSE(in) << (*in ? "a packet arrived instead of the error" : "no error within 30 s");
  EXPECT_NE(in.error().find("stream " + std::to_string(*stream) + ": commnode"), std::string::npos) << in.error();
  EXPECT_NE(in.error().find("filter 'bloat' produced a packet of 680001"), std::string::npos) << in.error();
  EXPECT_NE(in.error().find("over the frame limit of 67108864 bytes"), std::string::npos) << in.error();
  // No link was closed: every process is still there, and the tree still reduces.
  EXPECT_EQ(ProcessGuard::descendants().size(), 6u);
  auto sum = net->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(sum) << sum.error();
  ASSERT_TRUE(net->broadcast(*sum, canopy::Packet{script::kReply, {-1, 0}}));
  for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
    auto next = net->receive(1s);
    if (next && *next && (*next)->stream == *sum) {
      EXPECT_EQ(std::get<std::int32_t>((*next)->packet[0]), 0 + 1 + 2 + 3);
      return;
    }
  }
  ADD_FAILURE() << "no sum after the refused packet";
}

// The API refuses a packet whose values alone pass the frame limit, at once.
TEST_F(FilterClaims, APacketOverTheFrameLimitIsRefusedByTheApi) {
  auto* net = launch();
  ASSERT_TRUE(net);
  auto stream = net->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream) << stream.error();
  const canopy::Packet huge(1, {std::vector<std::int32_t>(17'000'000, 1)});
  auto sent = net->broadcast(*stream, huge);
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error(), "a packet of 68000000 bytes is over the frame limit of 67108864 bytes "
                          "(docs/protocol.md, \"Resource bounds\")");
  EXPECT_EQ(sent.error_kind(), canopy::ErrorKind::invalid_input);
  EXPECT_FALSE(net->send_to(*stream, 0, huge));
}

}  // namespace
