// Integration tests: real trees of real processes on loopback.
//
// Each test launches a tree through the front-end library (this test process is the
// front-end), checks aggregated results, and ends with no process left: the
// fixture makes this process the subreaper of all it starts and verifies that.
#include <gtest/gtest.h>

#include <optional>

#include <cstdio>
#include <fstream>
#include <numeric>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "far_host.h"
#include "canopy/frontend.h"
#include "demo_protocol.h"
#include "tree_fixture.h"

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;
using canopy::testing::TreeTest;

namespace {

const std::string kBin = CANOPY_BIN_DIR;
const std::string kTestBin = CANOPY_TEST_BIN_DIR;

class Tree : public TreeTest {
 protected:
  canopy::Network& launch(const canopy::Topology& topology, std::vector<std::string> backend = {}) {
    canopy::LaunchOptions options;
    options.topology = topology;
    options.backend_argv = backend.empty() ? std::vector<std::string>{kBin + "/canopy-demo-backend"} : backend;
    options.startup_timeout = 30s;  // generous: sanitizer builds on a loaded machine start slowly
    auto network = canopy::Network::launch(std::move(options));
    if (!network) ADD_FAILURE() << network.error();
    network_ = std::move(*network);
    return *network_;
  }

  canopy::Network& launch(const std::string& spec) {
    auto topology = canopy::generate_topology(spec);
    EXPECT_TRUE(topology) << topology.error();
    return launch(*topology);
  }

  // Starts the demo workload on `stream` and returns the `waves` results.
  std::vector<canopy::Packet> run_waves(canopy::Network& net, canopy::StreamId stream, int waves, int shape = 0) {
    auto start = canopy::Packet::pack(canopy::demo::kStartTag, "%d %d %d", waves, 0, shape);
    EXPECT_TRUE(net.broadcast(stream, *start));
    std::vector<canopy::Packet> out;
    while (static_cast<int>(out.size()) < waves) {
      auto in = net.receive(10s);
      if (!in) {
        ADD_FAILURE() << in.error();
        break;
      }
      if (!*in) {
        ADD_FAILURE() << "no result within 10 s after " << out.size() << " waves";
        break;
      }
      EXPECT_EQ((*in)->stream, stream);
      out.push_back((*in)->packet);
    }
    return out;
  }

  static std::int32_t expected_sum(int wave, const std::vector<canopy::Rank>& backends) {
    std::int32_t s = 0;
    for (auto r : backends) s += canopy::demo::demo_value(wave, r);
    return s;
  }

  void expect_sums(const std::string& spec, int waves) {
    auto& net = launch(spec);
    auto backends = net.topology().backends();
    auto stream = net.create_stream({.upstream_filter = "sum"});
    ASSERT_TRUE(stream) << stream.error();
    auto results = run_waves(net, *stream, waves);
    ASSERT_EQ(results.size(), static_cast<std::size_t>(waves));
    for (int w = 0; w < waves; ++w) {
      EXPECT_EQ(std::get<std::int32_t>(results[w][0]), expected_sum(w, backends)) << "wave " << w;
      EXPECT_EQ(results[w].contributors(), backends.size());
      EXPECT_EQ(results[w].tag(), w);
    }
  }

};

}  // namespace

TEST_F(Tree, FlatTreeOfFourSumsEveryWave) { expect_sums("b:4", 200); }

TEST_F(Tree, TwoLevelBinaryTreeSumsEveryWave) { expect_sums("b:2^2", 200); }

TEST_F(Tree, FourByFourTreeSumsEveryWave) { expect_sums("b:4^2", 200); }

TEST_F(Tree, ThreeLevelTreeSumsEveryWave) { expect_sums("b:2x3x2", 200); }

TEST_F(Tree, UnionOverManyWavesHoldsEveryBackendsValue) {
  auto& net = launch("b:4^2");
  auto backends = net.topology().backends();
  auto stream = net.create_stream({.upstream_filter = "union"});
  ASSERT_TRUE(stream) << stream.error();
  auto results = run_waves(net, *stream, 100, 1);
  ASSERT_EQ(results.size(), 100u);
  for (int w = 0; w < 100; ++w) {
    std::vector<std::int32_t> want;
    for (auto r : backends) want.push_back(canopy::demo::demo_value(w, r));
    EXPECT_EQ(std::get<std::vector<std::int32_t>>(results[w][0]), want) << "wave " << w;
  }
}

TEST_F(Tree, UnbalancedTreeFromYamlFileSums) {
  const char* yaml = R"(# three levels, uneven
nodes:
  - {rank: 100, role: frontend}
  - {rank: 101, role: commnode}
  - {rank: 102, role: commnode}
  - {rank: 103, role: commnode}
  - {rank: 0, role: backend}
  - {rank: 1, role: backend}
  - {rank: 2, role: backend}
  - {rank: 3, role: backend}
  - {rank: 4, role: backend}
edges:
  - {parent: 100, children: [101, 4]}
  - {parent: 101, children: [102, 103, 0]}
  - {parent: 102, children: [1, 2]}
  - {parent: 103, children: [3]}
)";
  auto topology = canopy::parse_topology_yaml(yaml, "uneven.yaml");
  ASSERT_TRUE(topology) << topology.error();
  auto& net = launch(*topology);
  auto stream = net.create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream) << stream.error();
  auto results = run_waves(net, *stream, 50);
  ASSERT_EQ(results.size(), 50u);
  for (int w = 0; w < 50; ++w) EXPECT_EQ(std::get<std::int32_t>(results[w][0]), expected_sum(w, {0, 1, 2, 3, 4}));
}

TEST_F(Tree, SubsetCommunicatorAggregatesOnlyItsBackends) {
  auto& net = launch("b:4^2");
  std::vector<canopy::Rank> subset = {1, 6, 7, 15};
  auto stream = net.create_stream({.backends = subset, .upstream_filter = "max"});
  ASSERT_TRUE(stream) << stream.error();
  auto results = run_waves(net, *stream, 20);
  ASSERT_EQ(results.size(), 20u);
  for (int w = 0; w < 20; ++w) {
    EXPECT_EQ(std::get<std::int32_t>(results[w][0]), canopy::demo::demo_value(w, 15));
    EXPECT_EQ(results[w].contributors(), 4u);
  }
}

TEST_F(Tree, SendToOneBackendReachesOnlyIt) {
  auto& net = launch("b:2^2");
  auto stream = net.create_stream({.backends = {3}, .upstream_filter = "concat"});
  ASSERT_TRUE(stream) << stream.error();
  canopy::Packet echo{canopy::demo::kEchoTag, {std::string("to three")}};
  ASSERT_TRUE(net.send_to(*stream, 3, echo));
  auto in = net.receive(10s);
  ASSERT_TRUE(in) << in.error();
  ASSERT_TRUE(*in);
  EXPECT_EQ(std::get<std::vector<std::string>>((*in)->packet[0]), std::vector<std::string>{"to three"});
  EXPECT_EQ((*in)->packet.contributors(), 1u);
  auto refused = net.send_to(*stream, 99, echo);
  ASSERT_FALSE(refused) << "99 is not a back-end";
  EXPECT_EQ(refused.error_kind(), canopy::ErrorKind::invalid_input);
}

TEST_F(Tree, EveryFilterGivesTheDemoWorkloadsAggregate) {
  auto& net = launch("b:2^2");
  auto minimum = net.create_stream({.upstream_filter = "min"});
  auto average = net.create_stream({.upstream_filter = "avg"});
  auto concat = net.create_stream({.upstream_filter = "concat"});
  ASSERT_TRUE(minimum && average && concat);
  auto lo = run_waves(net, *minimum, 5);
  auto mean = run_waves(net, *average, 5);
  auto all = run_waves(net, *concat, 5);
  for (int w = 0; w < 5; ++w) {
    EXPECT_EQ(std::get<std::int32_t>(lo[w][0]), w * 1000);
    EXPECT_DOUBLE_EQ(std::get<double>(mean[w][0]), w * 1000 + 1.5);
    auto values = std::get<std::vector<std::int32_t>>(all[w][0]);
    std::sort(values.begin(), values.end());
    EXPECT_EQ(values, (std::vector<std::int32_t>{w * 1000, w * 1000 + 1, w * 1000 + 2, w * 1000 + 3}));
  }
}

TEST_F(Tree, UnknownFilterIsRefusedAndTheTreeKeepsWorking) {
  auto& net = launch("b:2^2");
  auto bad = net.create_stream({.upstream_filter = "median"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("median"), std::string::npos) << bad.error();
  auto good = net.create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(good) << good.error();
  EXPECT_EQ(run_waves(net, *good, 3).size(), 3u);
}

TEST_F(Tree, FilterErrorReachesTheFrontEnd) {
  auto& net = launch("b:2");
  auto stream = net.create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream);
  ASSERT_TRUE(net.broadcast(*stream, canopy::Packet{canopy::demo::kEchoTag, {std::string("not a number")}}));
  auto in = net.receive(10s);
  ASSERT_FALSE(in);
  EXPECT_NE(in.error().find("sum"), std::string::npos) << in.error();
}

// Network::traffic() (issue 47): every process's frames, gathered up the tree. What
// one process sent another received: each counts after passing the request down and
// before answering, so only what crossed the request on its way (a heartbeat on an
// idle link, 500 ms apart) can be counted on one side alone. The launch of b:4^2 is
// most of it (the topology to each of 20 children).
TEST_F(Tree, TrafficCountsWhatEveryProcessSentAndReceived) {
  auto& net = launch("b:4^2");
  auto first = net.traffic();
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(first->processes, 21u);
  const auto& t = first->total;
  const auto apart = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : b - a; };
  EXPECT_LE(apart(t.bytes_sent, t.bytes_received), 20u * 2 * 128) << t.bytes_sent << " sent, " << t.bytes_received << " received";
  EXPECT_LE(apart(t.messages_sent, t.messages_received), 20u * 2);
  EXPECT_GE(t.messages_sent, 20u * 3) << "a hello, a challenge's answer and the topology at least per child";
  EXPECT_GT(first->most_bytes_sent, 0u);
  EXPECT_LE(first->most_bytes_sent, t.bytes_sent);
  std::printf("b:4^2 launch and one traffic request: %llu bytes, %llu messages sent; most by one process %llu\n",
              static_cast<unsigned long long>(t.bytes_sent), static_cast<unsigned long long>(t.messages_sent),
              static_cast<unsigned long long>(first->most_bytes_sent));
  auto second = net.traffic();
  ASSERT_TRUE(second) << second.error();
  EXPECT_GT(second->total.messages_sent, t.messages_sent) << "the first request and its answers";
  EXPECT_LT(second->total.bytes_sent - t.bytes_sent, 21u * 1024) << "a request and its answers, nothing else";
}

// shutdown() returns once the tree has stopped: every process has exited (the bound
// only lets a loaded machine reap them; it is not a speed check).
TEST_F(Tree, ShutdownStopsEveryProcess) {
  auto& net = launch("b:4^2");
  EXPECT_EQ(ProcessGuard::descendants().size(), 20u);
  ASSERT_TRUE(net.shutdown());
  auto left = ProcessGuard::wait_for_none(10s);
  EXPECT_TRUE(left.empty()) << left.size() << " processes outlived the shutdown";
}

// A back-end that ignores the shutdown is SIGKILLed by its parent after the grace
// period; without that kill it would sleep on for an hour, so any bound shows it, and
// a generous one cannot flake.
TEST_F(Tree, BackendThatIgnoresShutdownIsKilled) {
  launch(*canopy::generate_topology("b:2^2"), {kTestBin + "/flaky_backend", "ignore-shutdown"});
  ASSERT_TRUE(network_->shutdown());
  auto left = ProcessGuard::wait_for_none(30s);
  EXPECT_TRUE(left.empty()) << left.size() << " back-ends outlived the shutdown";
}

TEST_F(Tree, BackendExitingBeforeConnectingFailsTheLaunchNamingIt) {
  canopy::LaunchOptions options;
  options.topology = *canopy::generate_topology("b:2^2");
  options.backend_argv = {kTestBin + "/flaky_backend", "exit-at-start", "2", "3"};
  options.startup_timeout = 60s;
  auto started = std::chrono::steady_clock::now();
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_FALSE(network);
  EXPECT_NE(network.error().find("back-end 2"), std::string::npos) << network.error();
  EXPECT_NE(network.error().find("exited with status 3"), std::string::npos) << network.error();
  // Not a speed check: far below the 60 s time-out means the failure did not wait for it.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s) << "the failure must not wait for the time-out";
}

// A back-end that exits is a change of the membership view, not an error: the
// stream goes on with the others, and the front-end hears of the failure and then
// of the view without it (docs/membership.md).
TEST_F(Tree, BackendExitingMidRunLeavesTheViewAndTheStreamGoesOn) {
  auto& net = launch(*canopy::generate_topology("b:2^2"), {kTestBin + "/flaky_backend", "exit-after", "1", "5", "7"});
  EXPECT_EQ(net.view().id, 0u);
  EXPECT_EQ(net.view().members, (std::vector<canopy::Rank>{0, 1, 2, 3}));
  auto stream = net.create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream);
  auto start = canopy::Packet::pack(canopy::demo::kStartTag, "%d %d %d", 20, 1, 0);
  ASSERT_TRUE(net.broadcast(*stream, *start));
  int complete = 0, without_one = 0;
  while (complete + without_one < 20) {
    auto in = net.receive(10s);
    ASSERT_TRUE(in) << in.error();
    ASSERT_TRUE(*in) << "timed out after " << complete + without_one << " results";
    const auto contributors = (*in)->packet.contributors();
    ASSERT_TRUE(contributors == 4u || contributors == 3u) << contributors;
    if (contributors == 4u) {
      EXPECT_EQ(without_one, 0) << "a complete aggregate after back-end 1 had left";
      // Stamped with the view the front-end holds when it arrives: a wave that back-end
      // 1 completed may still be closing at the front-end when view 1 comes in.
      EXPECT_LE((*in)->view, 1u);
      ++complete;
    } else {
      // The detector reports the loss up before the waves without back-end 1, on
      // the same ordered link: the front-end holds view 1 when they arrive.
      EXPECT_EQ((*in)->view, 1u) << "an aggregate without back-end 1 in view 0";
      ++without_one;
    }
  }
  // Back-end 1 sent 5 values before it exited. A wave completes with it only if the
  // other back-ends' values for it arrived before its loss did: waves still open then
  // close without it, in view 1. How many is a matter of scheduling (on a loaded
  // machine, none), so only the bound is checked; the other 15 never include it.
  EXPECT_LE(complete, 5) << "back-end 1 sent only 5 values";
  EXPECT_GE(without_one, 15);
  std::optional<canopy::Event> failure, view;
  while (!view) {
    auto event = net.next_event(10s);
    ASSERT_TRUE(event) << "no view event";
    if (event->kind == canopy::Event::Kind::failure) failure = event;
    if (event->kind == canopy::Event::Kind::view) view = event;
  }
  ASSERT_TRUE(failure) << "the failure comes before the view";
  EXPECT_EQ(failure->rank, 1u);
  EXPECT_NE(failure->reason.find("exited with status 7"), std::string::npos) << failure->reason;
  EXPECT_EQ(view->view.id, 1u);
  EXPECT_EQ(view->view.members, (std::vector<canopy::Rank>{0, 2, 3}));
  EXPECT_EQ(view->left, std::vector<canopy::Rank>{1});
  EXPECT_TRUE(view->joined.empty());
  EXPECT_GT(view->stabilise.count(), 0);
  EXPECT_EQ(net.view().members, view->view.members);
  auto nothing_more = net.receive(500ms);
  ASSERT_TRUE(nothing_more) << nothing_more.error();
  EXPECT_FALSE(*nothing_more);
}

TEST_F(Tree, MissingBackendProgramIsAClearError) {
  canopy::LaunchOptions options;
  options.topology = *canopy::generate_topology("b:2");
  options.backend_argv = {"/nonexistent/backend"};
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_FALSE(network);
  EXPECT_NE(network.error().find("/nonexistent/backend"), std::string::npos) << network.error();
}

TEST_F(Tree, ChildOnAnotherHostIsStartedThroughTheLauncherTemplate) {
  // "far" is another host name, so its commnode and back-ends go through the launcher
  // template; its address is loopback so the test can run anywhere. The launcher
  // records {host} in the environment, which shows it was used.
  const char* yaml = canopy::testing::kFarTopologyYaml;
  auto topology = canopy::parse_topology_yaml(yaml, "far.yaml");
  ASSERT_TRUE(topology) << topology.error();
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {kBin + "/canopy-demo-backend"};
  options.launcher = "env CANOPY_TEST_LAUNCHED_ON={host} {command}";
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_TRUE(network) << network.error();
  network_ = std::move(*network);
  bool commnode_launched_far = false;
  for (pid_t pid : ProcessGuard::descendants()) {
    std::ifstream env("/proc/" + std::to_string(pid) + "/environ");
    std::string all((std::istreambuf_iterator<char>(env)), {});
    std::replace(all.begin(), all.end(), '\0', '\n');
    if (all.find("\nCANOPY_RANK=1000001\n") != std::string::npos) {
      commnode_launched_far = all.find("\nCANOPY_TEST_LAUNCHED_ON=far\n") != std::string::npos;
    }
  }
  EXPECT_TRUE(commnode_launched_far) << "the commnode on host 'far' was not started through the launcher";
  auto stream = network_->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream) << stream.error();
  auto results = run_waves(*network_, *stream, 10);
  ASSERT_EQ(results.size(), 10u);
  EXPECT_EQ(std::get<std::int32_t>(results[9][0]), expected_sum(9, {0, 1}));
}

namespace {

// The port commnode `rank` listens on: chosen by the commnode itself (port 0 in the
// topology) and published to the front-end's topology at launch. No port is picked
// beforehand, so none can be taken by another test in between (ctest -j).
std::uint16_t listening_port(const canopy::Network& net, canopy::Rank rank) {
  const canopy::TopologyNode* node = net.topology().find(rank);
  return node ? node->port : 0;
}

// Connects to 127.0.0.1:port, writes `bytes`, and tells whether the peer then
// closed the connection within two seconds.
bool peer_closes_after(std::uint16_t port, const std::string& bytes, int wait_seconds = 2) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return false;
  }
  (void)write(fd, bytes.data(), bytes.size());
  timeval tv{wait_seconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c;
  ssize_t n = read(fd, &c, 1);
  close(fd);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

std::string frame_header(std::uint64_t length) { return std::string(reinterpret_cast<char*>(&length), 8); }

}  // namespace

TEST_F(Tree, BadFramesCloseOnlyTheirOwnConnection) {
  std::string yaml = "nodes:\n  - {rank: 1000000, role: frontend}\n  - {rank: 1000001, role: commnode}\n"
                     "  - {rank: 0, role: backend}\n  - {rank: 1, role: backend}\n"
                     "edges:\n  - {parent: 1000000, children: [1000001]}\n  - {parent: 1000001, children: [0, 1]}\n";
  auto topology = canopy::parse_topology_yaml(yaml, "one-commnode.yaml");
  ASSERT_TRUE(topology) << topology.error();
  auto& net = launch(*topology);
  const std::uint16_t port = listening_port(net, 1000001);
  ASSERT_NE(port, 0) << "the commnode's listening port was not published";
  auto stream = net.create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream) << stream.error();

  EXPECT_TRUE(peer_closes_after(port, frame_header(1ull << 40))) << "an oversized frame must close the link";
  EXPECT_TRUE(peer_closes_after(port, frame_header(13) + std::string(16, 'x'))) << "a ragged length must close it";
  EXPECT_TRUE(peer_closes_after(port, frame_header(24) + std::string(24, '\xff'))) << "a corrupt message must close it";
  EXPECT_TRUE(peer_closes_after(port, "GET / HTTP/1.1\r\n\r\n")) << "a stranger must be closed";

  // The tree is untouched.
  auto results = run_waves(net, *stream, 20);
  ASSERT_EQ(results.size(), 20u);
  EXPECT_EQ(std::get<std::int32_t>(results[19][0]), expected_sum(19, {0, 1}));
}

TEST_F(Tree, SilentConnectionIsClosedAfterTheStartupTimeout) {
  std::string yaml = "nodes:\n  - {rank: 1000000, role: frontend}\n  - {rank: 1000001, role: commnode}\n"
                     "  - {rank: 0, role: backend}\n"
                     "edges:\n  - {parent: 1000000, children: [1000001]}\n  - {parent: 1000001, children: [0]}\n";
  canopy::LaunchOptions options;
  options.topology = *canopy::parse_topology_yaml(yaml, "one-commnode.yaml");
  options.backend_argv = {kBin + "/canopy-demo-backend"};
  options.startup_timeout = 3s;  // also the hello deadline; long enough for a loaded machine to launch
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_TRUE(network) << network.error();
  network_ = std::move(*network);
  const std::uint16_t port = listening_port(*network_, 1000001);
  ASSERT_NE(port, 0) << "the commnode's listening port was not published";
  EXPECT_TRUE(peer_closes_after(port, "", 15)) << "a connection that never says hello must not linger";
}

TEST_F(Tree, ReceiveAfterShutdownFailsAtOnce) {
  auto& net = launch("b:2");
  ASSERT_TRUE(net.shutdown());
  auto first = net.receive(5s);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error_kind(), canopy::ErrorKind::stopped) << first.error();
  // At once, not after the time-out: a minute's time-out that did not fail at once
  // would hold the test far beyond the 30 s bound below, however loaded the machine.
  auto started = std::chrono::steady_clock::now();
  auto again = net.receive(60s);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error_kind(), canopy::ErrorKind::stopped) << again.error();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
}
