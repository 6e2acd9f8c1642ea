// Fault tolerance through the front-end API, on real processes (docs/fault-tolerance.md,
// "At the front-end"): the front-end adopting orphans of a stream whose filter is
// not state recoverable, the stream's waves going on exact, point-to-point packets
// to the re-adopted back-ends, and Network::status() drawing the healed tree.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "canopy/frontend.h"
#include "tree_fixture.h"
#include "script_protocol.h"

using namespace std::chrono_literals;
using canopy::Rank;
using canopy::testing::ProcessGuard;
using canopy::testing::TreeTest;
namespace script = canopy::script;

namespace {

constexpr Rank FE = canopy::kFirstInternalRank;
constexpr Rank C1 = FE + 1;  // b:1x2: the front-end, commnode C1, back-ends 0 and 1 under it

class RecoveryClaims : public TreeTest {
 protected:
  // b:1x2 with quick failure detection: the front-end is the only potential adopter
  // of C1's back-ends.
  void launch() {
    auto topology = canopy::generate_topology("b:1x2");
    ASSERT_TRUE(topology) << topology.error();
    canopy::LaunchOptions options;
    options.topology = *topology;
    options.backend_argv = {std::string(CANOPY_TEST_BIN_DIR) + "/script_backend"};
    options.fault_tolerance.heartbeat = 100ms;
    options.fault_tolerance.suspect = 300ms;
    options.fault_tolerance.lost = 800ms;
    auto network = canopy::Network::launch(std::move(options));
    ASSERT_TRUE(network) << network.error();
    network_ = std::move(*network);
  }

  // Kills C1 and collects events until the front-end has both orphans' recoveries.
  void kill_c1_and_wait_for_recoveries() {
    const pid_t c1 = ProcessGuard::process_of_rank(C1);
    ASSERT_GT(c1, 0) << "commnode " << C1 << " is not running";
    ASSERT_EQ(kill(c1, SIGKILL), 0);
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (recoveries_.size() < 2 && std::chrono::steady_clock::now() < deadline) {
      if (auto e = network_->next_event(100ms); e && e->kind == canopy::Event::Kind::recovered) {
        recoveries_[e->rank] = *e;
      }
    }
    ASSERT_EQ(recoveries_.size(), 2u) << "recoveries heard before the time-out";
  }

  std::map<Rank, canopy::Event> recoveries_;
};

// The front-end adopts both orphans; `sum` is not state recoverable, so each
// recovery names its stream in incomplete_streams, while the state-recoverable
// stream is not named. receive() does not fail for it (issue 44: the waves say what
// they hold): the sum's next wave is complete and exact.
TEST_F(RecoveryClaims, TheFrontEndAsAdopterReportsTheNonRecoverableStreamAndItsWavesGoOn) {
  launch();
  auto sum = network_->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(sum) << sum.error();
  auto union_stream = network_->create_stream({.upstream_filter = "incremental_union"});
  ASSERT_TRUE(union_stream) << union_stream.error();
  kill_c1_and_wait_for_recoveries();
  for (const auto& [orphan, e] : recoveries_) {
    EXPECT_EQ(e.adopter, FE) << orphan;
    EXPECT_EQ(e.failed_parent, C1) << orphan;
    EXPECT_EQ(e.incomplete_streams, std::vector<canopy::StreamId>{*sum}) << orphan;
  }
  // The orphans' union states may come up as packets of the other stream, of no
  // wave; then the sum's first wave, complete.
  ASSERT_TRUE(network_->broadcast(*sum, canopy::Packet{script::kReply, {-1, 0}}));
  std::optional<canopy::Received> wave;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!wave && std::chrono::steady_clock::now() < deadline) {
    auto in = network_->receive(100ms);
    ASSERT_TRUE(in) << in.error();
    if (!*in) continue;
    if ((*in)->stream == *union_stream) {
      EXPECT_FALSE((*in)->wave) << "the union stream carried only the orphans' states";
      continue;
    }
    wave = std::move(**in);
  }
  ASSERT_TRUE(wave) << "no answer on the sum stream within 10 s";
  EXPECT_EQ(wave->wave, std::optional<std::uint64_t>{0});
  EXPECT_TRUE(wave->complete);
  EXPECT_EQ(wave->holds, 2u);
  EXPECT_EQ(std::get<std::int32_t>(wave->packet[0]), 0 + 1);
}

// Network::send_to reaches a back-end the front-end adopted: back-end 1 answers the
// packet sent to it alone, on a stream that does not wait for the others.
TEST_F(RecoveryClaims, SendToReachesABackendTheFrontEndAdopted) {
  launch();
  auto stream = network_->create_stream({.upstream_filter = "sum", .sync = canopy::SyncMode::dont_wait});
  ASSERT_TRUE(stream) << stream.error();
  kill_c1_and_wait_for_recoveries();
  ASSERT_TRUE(network_->send_to(*stream, 1, canopy::Packet{script::kReply, {-1, 0}}));
  std::optional<canopy::Received> answer;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!answer && std::chrono::steady_clock::now() < deadline) {
    auto in = network_->receive(100ms);
    ASSERT_TRUE(in) << in.error();
    if (*in) answer = std::move(**in);
  }
  ASSERT_TRUE(answer) << "no answer from back-end 1 within 10 s";
  EXPECT_EQ(answer->packet.tag(), script::kReply);
  EXPECT_EQ(std::get<std::int32_t>(answer->packet[0]), 1) << "the answer of back-end 1 alone";
}

// Network::status() is the live tree: the root first, then breadth-first, then the
// lost; the adopted back-ends under the front-end with their new incarnation.
TEST_F(RecoveryClaims, StatusIsTheHealedTree) {
  launch();
  auto before = network_->status();
  ASSERT_EQ(before.size(), 4u);
  EXPECT_EQ(before[1].rank, C1);
  EXPECT_EQ(before[1].children, (std::vector<Rank>{0, 1}));
  kill_c1_and_wait_for_recoveries();
  // The orphans may be adopted before the front-end has itself seen C1's connection
  // close (or while it waits up to 300 ms for C1's exit status): until then C1 is
  // alive in its view, beside its adopted back-ends.
  auto status = network_->status();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (status.size() == 4 && status[3].alive && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    status = network_->status();
  }
  ASSERT_EQ(status.size(), 4u);
  EXPECT_EQ(status[0].rank, FE);
  EXPECT_TRUE(status[0].alive);
  EXPECT_FALSE(status[0].parent);
  auto children = status[0].children;
  std::sort(children.begin(), children.end());
  EXPECT_EQ(children, (std::vector<Rank>{0, 1})) << "C1 is no longer a child of the front-end";
  for (std::size_t i : {1u, 2u}) {
    EXPECT_EQ(status[i].role, canopy::Role::backend);
    EXPECT_TRUE(status[i].alive) << status[i].rank;
    EXPECT_EQ(status[i].parent, FE) << status[i].rank;
    EXPECT_EQ(status[i].incarnation, recoveries_[status[i].rank].incarnation) << status[i].rank;
    EXPECT_GE(status[i].incarnation, 1u) << status[i].rank;
  }
  EXPECT_EQ(status[3].rank, C1) << "the lost come last";
  EXPECT_FALSE(status[3].alive);
  EXPECT_EQ(status[3].host, "localhost");
}

// The run ends while C1's back-ends are orphans: they are held stopped across the
// loss of C1 and the front-end's exit, so that no adoption can come first. The
// front-end's port then refuses them, and they stop at once instead of searching for
// an adopter for adoption_timeout (30 s) after the run has ended.
TEST_F(RecoveryClaims, OrphansOfARunThatEndedStopWhenTheFrontEndsPortRefusesThem) {
  launch();
  const std::vector<pid_t> backends{ProcessGuard::process_of_rank(0), ProcessGuard::process_of_rank(1)};
  for (pid_t pid : backends) {
    ASSERT_GT(pid, 0) << "a back-end is not running";
    ASSERT_EQ(kill(pid, SIGSTOP), 0);
  }
  const pid_t c1 = ProcessGuard::process_of_rank(C1);
  ASSERT_GT(c1, 0) << "commnode " << C1 << " is not running";
  ASSERT_EQ(kill(c1, SIGKILL), 0);
  network_.reset();
  for (pid_t pid : backends) kill(pid, SIGCONT);
  auto left = ProcessGuard::wait_for_none(10s);
  EXPECT_TRUE(left.empty()) << left.size() << " orphans still looking for an adopter 10 s after the front-end exited";
}

}  // namespace
