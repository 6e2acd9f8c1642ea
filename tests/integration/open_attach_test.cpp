// Open attach (docs/attach.md, "Open attach"): back-ends the topology does not name
// join a running tree under ranks of their own, as MRNet's attach mode lets them. Real
// commnodes and back-end processes (script_backend) on loopback: the joins reach the
// front-end's live tree and view, a stream is made of those present, a rank already
// in the tree is refused, and joined back-ends heal like launched ones.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include "canopy/frontend.h"
#include "child_process.h"
#include "process_guard.h"
#include "script_protocol.h"
#include "tree_fixture.h"

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;
using canopy::testing::TreeTest;
using canopy::testing::wait_exit;

namespace {

const std::string kScriptBackend = std::string(CANOPY_TEST_BIN_DIR) + "/script_backend";
constexpr canopy::Rank kC1 = canopy::kFirstInternalRank + 1, kC2 = canopy::kFirstInternalRank + 2;

class OpenAttach : public TreeTest {
 protected:
  void SetUp() override {
    TreeTest::SetUp();
    if (HasFatalFailure()) return;
    file_ = (test_dir("canopy-open-attach") / "attach").string();
  }

  // The front-end and two commnodes (1000001, 1000002), no back-ends: they join.
  canopy::Network* launch(bool open = true, bool healing = false) {
    auto topology = canopy::generate_topology("b:2", {}, canopy::Leaves::commnodes);
    EXPECT_TRUE(topology) << topology.error();
    canopy::LaunchOptions options;
    options.topology = *topology;
    options.attach_file = file_;
    options.open_attach = open;
    options.fault_tolerance.enabled = healing;
    auto network = canopy::Network::launch(std::move(options));
    if (!network) {
      ADD_FAILURE() << network.error();
      return nullptr;
    }
    network_ = std::move(*network);
    return network_.get();
  }

  // script_backend --attach FILE RANK, or --join FILE RANK PARENT; stderr to a file.
  pid_t start(canopy::Rank rank, std::optional<canopy::Rank> parent = std::nullopt) {
    std::vector<std::string> args{kScriptBackend, parent ? "--join" : "--attach", file_, std::to_string(rank)};
    if (parent) args.push_back(std::to_string(*parent));
    last_stderr_ = test_dir("canopy-open-attach") / ("stderr-" + std::to_string(rank) + "-" + std::to_string(++runs_));
    const pid_t pid = canopy::testing::spawn(args, {"SCRIPT_BACKEND_SAY_WHY=1"}, {}, last_stderr_);
    EXPECT_GT(pid, 0) << "cannot start " << kScriptBackend;
    return pid;
  }

  // The view event whose members are `members`, failing the test after 20 s.
  std::optional<canopy::Event> view_with(const std::vector<canopy::Rank>& members) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto event = network_->next_event(100ms);
      if (event && event->kind == canopy::Event::Kind::view && event->view.members == members) return event;
    }
    ADD_FAILURE() << "no view with the members expected";
    return std::nullopt;
  }

  // The parent of each live back-end in the front-end's live tree.
  std::map<canopy::Rank, canopy::Rank> parents() {
    std::map<canopy::Rank, canopy::Rank> out;
    for (const auto& n : network_->status()) {
      if (n.role == canopy::Role::backend && n.alive && n.parent) out[n.rank] = *n.parent;
    }
    return out;
  }

  // Broadcasts kReply on `stream` and returns the ranks that answered (their sum,
  // with the contributors).
  std::pair<std::int32_t, std::size_t> reply_sum(canopy::StreamId stream) {
    EXPECT_TRUE(network_->broadcast(stream, canopy::Packet{canopy::script::kReply, {-1, 0}}));
    auto in = network_->receive(10s);
    EXPECT_TRUE(in && *in) << (in ? "nothing within 10 s" : in.error());
    if (!in || !*in) return {-1, 0};
    EXPECT_EQ((*in)->stream, stream);
    return {std::get<std::int32_t>((*in)->packet[0]), (*in)->packet.contributors()};
  }

  // reply_sum() on a new stream over every back-end present.
  std::pair<std::int32_t, std::size_t> sum_of_ranks() {
    auto stream = network_->create_stream({.upstream_filter = "sum"});
    EXPECT_TRUE(stream) << stream.error();
    if (!stream) return {-1, 0};
    return reply_sum(*stream);
  }

  std::string file_;
  std::filesystem::path last_stderr_;
  int runs_ = 0;
};

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST_F(OpenAttach, BackendsTheTopologyDoesNotNameJoinAndAnswer) {
  ASSERT_TRUE(launch());
  // The file says where to join: both commnodes, no back-end.
  const std::string text = slurp(file_);
  EXPECT_NE(text.find("commnode " + std::to_string(kC1) + " "), std::string::npos) << text;
  EXPECT_NE(text.find("commnode " + std::to_string(kC2) + " "), std::string::npos) << text;
  EXPECT_EQ(text.find("backend "), std::string::npos) << text;

  // MRNet's own example numbers its back-ends from 1000; two choose their parent,
  // two are spread by rank (1002 % 2: the first commnode, 1003: the second).
  std::vector<pid_t> pids{start(1000, kC2), start(1001, kC2), start(1002), start(1003)};
  auto joined = view_with({1000, 1001, 1002, 1003});
  ASSERT_TRUE(joined);
  const std::map<canopy::Rank, canopy::Rank> expected{{1000, kC2}, {1001, kC2}, {1002, kC1}, {1003, kC2}};
  EXPECT_EQ(parents(), expected);

  const auto [sum, contributors] = sum_of_ranks();
  EXPECT_EQ(sum, 1000 + 1001 + 1002 + 1003);
  EXPECT_EQ(contributors, 4u);

  // A rank the tree has is refused, and told why.
  const pid_t twin = start(1001, kC1);
  ASSERT_NE(wait_exit(twin, 20s), -1) << "a second back-end 1001 was not refused: " << slurp(last_stderr_);
  EXPECT_NE(slurp(last_stderr_).find("1001 is in the tree already"), std::string::npos) << slurp(last_stderr_);
  EXPECT_EQ(parents(), expected);

  network_.reset();  // shutdown reaches the joined back-ends, which exit
  for (pid_t pid : pids) {
    const int end = wait_exit(pid, 30s);
    ASSERT_NE(end, -1) << "joined back-end " << pid << " did not exit after the shutdown";
    EXPECT_TRUE(WIFEXITED(end) && WEXITSTATUS(end) == 0) << "status " << end;
  }
}

// A stream made the moment the front-end hears of a join has the back-end that
// joined: the news of the join reaches each commnode before the stream does (a node
// sends what it has learnt of the tree before any message of a service), so the
// commnode holding the back-end makes it a member. Six joins, each followed at once
// by a stream of every back-end present.
TEST_F(OpenAttach, AStreamMadeTheMomentABackendJoinsHasIt) {
  ASSERT_TRUE(launch());
  std::vector<canopy::Rank> present;
  std::vector<pid_t> pids;
  std::int32_t expected_sum = 0;
  for (canopy::Rank rank = 100; rank < 106; ++rank) {
    pids.push_back(start(rank, rank % 2 ? kC1 : kC2));
    present.push_back(rank);
    expected_sum += static_cast<std::int32_t>(rank);
    // The front-end's live tree has it as soon as the front-end accepts the join.
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!parents().count(rank) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(parents().count(rank)) << "back-end " << rank << " did not join";
    const auto [sum, contributors] = sum_of_ranks();
    EXPECT_EQ(sum, expected_sum) << "after back-end " << rank << " joined";
    EXPECT_EQ(contributors, present.size()) << "after back-end " << rank << " joined";
  }
  network_.reset();
  for (pid_t pid : pids) EXPECT_NE(wait_exit(pid, 30s), -1);
}

// A stream made with `joiners` before any back-end is there takes each in as it
// joins: under a commnode already on the stream, and under one that was not (the
// stream is created there then). A stream made without it keeps the back-ends
// present at its making, and a send to a later one is refused with the reason.
TEST_F(OpenAttach, AStreamWithJoinersTakesInBackendsThatJoinLater) {
  ASSERT_TRUE(launch());
  auto none = network_->create_stream({.upstream_filter = "sum"});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no back-end has attached yet"), std::string::npos) << none.error();
  auto listed = network_->create_stream({.backends = {1}, .joiners = true, .upstream_filter = "sum"});
  ASSERT_FALSE(listed);
  EXPECT_NE(listed.error().find("give no list"), std::string::npos) << listed.error();
  auto sum = network_->create_stream({.joiners = true, .upstream_filter = "sum"});
  ASSERT_TRUE(sum) << sum.error();
  auto each = network_->create_stream({.joiners = true, .upstream_filter = "pass", .sync = canopy::SyncMode::dont_wait});
  ASSERT_TRUE(each) << each.error();

  std::vector<pid_t> pids{start(40, kC2)};
  ASSERT_TRUE(view_with({40}));
  auto before = network_->create_stream({.upstream_filter = "sum"});  // 40 only
  ASSERT_TRUE(before) << before.error();
  EXPECT_EQ(reply_sum(*sum), std::make_pair(40, std::size_t{1}));

  // 41 under the commnode that had no back-end (nor the stream), 42 beside 40.
  pids.push_back(start(41, kC1));
  pids.push_back(start(42, kC2));
  ASSERT_TRUE(view_with({40, 41, 42}));
  EXPECT_EQ(reply_sum(*sum), std::make_pair(40 + 41 + 42, std::size_t{3}));
  EXPECT_EQ(reply_sum(*before), std::make_pair(40, std::size_t{1}));
  for (canopy::Rank rank : {41, 42}) {
    ASSERT_TRUE(network_->send_to(*each, rank, canopy::Packet{canopy::script::kReply, {-1, 0}}));
    auto in = network_->receive(10s);
    ASSERT_TRUE(in && *in) << "back-end " << rank << " did not answer on its stream";
    EXPECT_EQ((*in)->stream, *each);
    EXPECT_EQ(std::get<std::int32_t>((*in)->packet[0]), static_cast<std::int32_t>(rank));
  }
  auto refused = network_->send_to(*before, 41, canopy::Packet{canopy::script::kReply, {-1, 0}});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("joined after stream"), std::string::npos) << refused.error();

  network_.reset();
  for (pid_t pid : pids) EXPECT_NE(wait_exit(pid, 30s), -1);
}

// Two processes claim one rank at once, each at another commnode: neither commnode
// knows of the other's, so the front-end decides, first come first served. Exactly
// one joins and answers; the other is refused and told why. Five ranks in a row, so
// that most claims meet in that window.
TEST_F(OpenAttach, TwoBackendsClaimingOneRankAtOnceMakeOneMember) {
  ASSERT_TRUE(launch());
  std::vector<pid_t> members;
  std::int32_t expected_sum = 0;
  for (canopy::Rank rank = 500; rank < 505; ++rank) {
    const pid_t a = start(rank, kC1);
    const auto a_err = last_stderr_;
    const pid_t b = start(rank, kC2);
    const auto b_err = last_stderr_;
    // One of the two ends (refused) within 20 s; the other stays.
    pid_t ended = -1;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (ended < 0 && std::chrono::steady_clock::now() < deadline) {
      for (pid_t pid : {a, b}) {
        if (waitpid(pid, nullptr, WNOHANG) == pid) ended = pid;
      }
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_GT(ended, 0) << "both processes under rank " << rank << " are still running";
    const pid_t kept = ended == a ? b : a;
    EXPECT_NE(slurp(ended == a ? a_err : b_err).find("is in the tree already"), std::string::npos)
        << slurp(ended == a ? a_err : b_err);
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(waitpid(kept, nullptr, WNOHANG), 0) << "the back-end kept under rank " << rank << " ended too";
    members.push_back(kept);
    expected_sum += static_cast<std::int32_t>(rank);
    EXPECT_EQ(parents().at(rank), kept == a ? kC1 : kC2);
  }
  ASSERT_TRUE(view_with({500, 501, 502, 503, 504}));
  const auto [sum, contributors] = sum_of_ranks();
  EXPECT_EQ(sum, expected_sum);
  EXPECT_EQ(contributors, 5u);
  network_.reset();
  for (pid_t pid : members) EXPECT_NE(wait_exit(pid, 30s), -1);
}

// A joined back-end is a back-end like any other once in the tree: its commnode
// killed, it is adopted (here by the other commnode, or the front-end) and the next
// stream reaches it.
TEST_F(OpenAttach, JoinedBackendsAreAdoptedWhenTheirCommnodeDies) {
  ASSERT_TRUE(launch(true, true));
  std::vector<pid_t> pids{start(7, kC1), start(8, kC1), start(9, kC2)};
  ASSERT_TRUE(view_with({7, 8, 9}));
  const pid_t c1 = ProcessGuard::process_of_rank(kC1);
  ASSERT_GT(c1, 0);
  ASSERT_EQ(kill(c1, SIGKILL), 0);
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto p = parents();
    if (p.size() == 3 && p[7] != kC1 && p[8] != kC1) break;
    std::this_thread::sleep_for(50ms);
  }
  const auto p = parents();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NE(p.at(7), kC1);
  EXPECT_NE(p.at(8), kC1);
  const auto [sum, contributors] = sum_of_ranks();
  EXPECT_EQ(sum, 7 + 8 + 9);
  EXPECT_EQ(contributors, 3u);
  network_.reset();
  for (pid_t pid : pids) EXPECT_NE(wait_exit(pid, 30s), -1);
}

// A joined back-end that died may join again under its rank, under another
// commnode: a new incarnation, a member of the next view, in the next stream.
TEST_F(OpenAttach, ARankWhoseProcessDiedJoinsAgainUnderAnotherCommnode) {
  ASSERT_TRUE(launch(true, true));
  const pid_t first = start(5, kC1);
  const pid_t other = start(6, kC2);
  ASSERT_TRUE(view_with({5, 6}));
  ASSERT_EQ(kill(first, SIGKILL), 0);
  EXPECT_EQ(waitpid(first, nullptr, 0), first);
  ASSERT_TRUE(view_with({6}));
  const pid_t again = start(5, kC2);
  auto joined = view_with({5, 6});
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->joined, std::vector<canopy::Rank>{5});
  EXPECT_EQ(parents().at(5), kC2);
  const auto [sum, contributors] = sum_of_ranks();
  EXPECT_EQ(sum, 5 + 6);
  EXPECT_EQ(contributors, 2u);
  network_.reset();
  for (pid_t pid : {other, again}) EXPECT_NE(wait_exit(pid, 30s), -1);
}

// A commnode holds a descriptor per joined back-end. Short of them, it raises its
// soft limit to its hard one; past that, it keeps a reserve for the tree's own links
// and refuses further back-ends, saying why, instead of leaving them hanging in its
// backlog. The commnode's limits are lowered from outside (prlimit) to a few dozen
// above what it has open.
TEST_F(OpenAttach, ACommnodeShortOfDescriptorsRaisesItsLimitThenRefusesJoinersSayingWhy) {
  ASSERT_TRUE(launch());
  const pid_t c1 = ProcessGuard::process_of_rank(kC1);
  ASSERT_GT(c1, 0);
  auto open_descriptors = [&] {
    std::error_code ec;
    std::size_t n = 0;
    for (std::filesystem::directory_iterator it("/proc/" + std::to_string(c1) + "/fd", ec), end; !ec && it != end;
         it.increment(ec)) {
      ++n;
    }
    return n;
  };
  const std::size_t open = open_descriptors();
  ASSERT_GT(open, 0u);
  const rlimit lowered{open + 20, open + 40};
  ASSERT_EQ(prlimit(c1, RLIMIT_NOFILE, &lowered, nullptr), 0) << std::strerror(errno);

  std::vector<pid_t> joined;
  std::vector<std::string> refusals;
  std::int32_t sum = 0;
  for (canopy::Rank rank = 200; rank < 216; ++rank) {
    const pid_t pid = start(rank, kC1);
    bool in = false, out = false;
    for (auto deadline = std::chrono::steady_clock::now() + 20s; !in && !out && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(10ms);
      in = parents().count(rank) != 0;
      out = waitpid(pid, nullptr, WNOHANG) == pid;
    }
    ASSERT_TRUE(in || out) << "back-end " << rank << " neither joined nor was refused within 20 s";
    if (in) {
      joined.push_back(pid);
      sum += static_cast<std::int32_t>(rank);
    } else {
      refusals.push_back(slurp(last_stderr_));
    }
  }
  rlimit now{};
  ASSERT_EQ(prlimit(c1, RLIMIT_NOFILE, nullptr, &now), 0);
  EXPECT_EQ(now.rlim_cur, lowered.rlim_max) << "the commnode did not raise its soft limit to its hard one";
  EXPECT_GT(joined.size(), 0u);
  ASSERT_GT(refusals.size(), 0u) << "every back-end joined: the limit was never reached";
  for (const auto& told : refusals) EXPECT_NE(told.find("out of file descriptors"), std::string::npos) << told;
  // The tree goes on with those it took.
  const auto [total, contributors] = sum_of_ranks();
  EXPECT_EQ(total, sum);
  EXPECT_EQ(contributors, joined.size());
  network_.reset();
  for (pid_t pid : joined) EXPECT_NE(wait_exit(pid, 30s), -1);
}

// Without open attach the same tree takes no back-end it does not name, and the
// file says so to a back-end that tries.
TEST_F(OpenAttach, AClosedTreeTakesNoStranger) {
  auto topology = canopy::generate_topology("b:2", {}, canopy::Leaves::commnodes);
  ASSERT_TRUE(topology);
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.attach_file = file_;
  auto refused = canopy::Network::launch(options);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("no back-ends"), std::string::npos) << refused.error();
  options.attach_file.clear();
  options.open_attach = true;
  refused = canopy::Network::launch(options);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("give an attach file"), std::string::npos) << refused.error();

  // A tree with named back-ends, closed: a stranger is refused by the file itself.
  auto named = canopy::generate_topology("b:2x1");
  ASSERT_TRUE(named);
  options.topology = *named;
  options.attach_file = file_;
  options.open_attach = false;
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_TRUE(network) << network.error();
  network_ = std::move(*network);
  const pid_t stranger = start(1000, kC1);
  const int status = wait_exit(stranger, 20s);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_NE(slurp(last_stderr_).find("1000 is not a back-end of the tree"), std::string::npos) << slurp(last_stderr_);
}

}  // namespace
