// docs/attach.md's refusals, end to end (issue 21): a real back-end process given a
// damaged attach file, or the file of another tree, and a hello of another protocol
// version, each against a live tree that would have accepted the right thing.
#include <gtest/gtest.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <sstream>
#include <thread>

#include "core/attach_file.h"
#include "canopy.capnp.h"
#include "canopy/frontend.h"
#include "core/loop_thread.h"
#include "core/service.h"
#include "tree_fixture.h"
#include "transport/tcp_link.h"

extern char** environ;

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;
using canopy::testing::TreeTest;

namespace {

const std::string kBin = CANOPY_BIN_DIR;
const std::string kScriptBackend = std::string(CANOPY_TEST_BIN_DIR) + "/script_backend";

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The lines of `text`, without their newlines.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class AttachClaims : public TreeTest {
 protected:
  void SetUp() override {
    TreeTest::SetUp();
    if (HasFatalFailure()) return;
    dir_ = test_dir("canopy-attach-claims");
    file_ = (dir_ / "attach").string();
    // Commnodes 1000001 and 1000002, back-ends 0 and 1 under the first, 2 and 3
    // under the second: the back-ends attach to commnodes, as in an MPI job.
    auto topology = canopy::generate_topology("b:2x2");
    ASSERT_TRUE(topology) << topology.error();
    canopy::LaunchOptions options;
    options.topology = *topology;
    options.attach_file = file_;
    auto network = canopy::Network::launch(std::move(options));
    ASSERT_TRUE(network) << network.error();
    network_ = std::move(*network);
  }

  // A copy of the front-end's attach file with line `index` (0-based) replaced, or
  // `extra` appended when index is past the end.
  std::string variant(const std::string& name, std::size_t index, const std::string& line) {
    auto lines = lines_of(slurp(file_));
    if (index < lines.size()) {
      lines[index] = line;
    } else {
      lines.push_back(line);
    }
    const auto path = (dir_ / name).string();
    std::ofstream out(path);
    for (const auto& l : lines) out << l << "\n";
    return path;
  }

  struct Exit {
    int status = -1;  // as waitpid gives it; -1: still running after the limit
    std::string err;
  };
  // Runs script_backend --attach FILE RANK to its end (at most `limit`: it is killed
  // then), with its stderr.
  Exit run_backend(const std::string& file, int rank, std::chrono::milliseconds limit = 10s) {
    const auto err_path = dir_ / ("stderr-" + std::to_string(++runs_));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<std::string> args{kScriptBackend, "--attach", file, std::to_string(rank)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<char*> env;
    for (char** e = environ; *e; ++e) env.push_back(*e);
    std::string say_why = "SCRIPT_BACKEND_SAY_WHY=1";
    env.push_back(say_why.data());
    env.push_back(nullptr);
    pid_t pid = -1;
    Exit exit;
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      ADD_FAILURE() << "cannot start " << kScriptBackend;
      return exit;
    }
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (waitpid(pid, &exit.status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        exit.status = -1;
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    exit.err = slurp(err_path);
    return exit;
  }

  std::filesystem::path dir_;
  std::string file_;
  int runs_ = 0;
};

// The damage is after rank 0's own line: the back-end still refuses the file, and
// says where, before it connects to anything.
TEST_F(AttachClaims, ABackendRefusesADamagedFileNamingTheFileAndLine) {
  const auto lines = lines_of(slurp(file_)).size();
  const auto damaged = variant("damaged", lines, "backend 7 1000001 127.0.0.1");
  auto exit = run_backend(damaged, 0);
  ASSERT_NE(exit.status, -1) << "the back-end did not end: it attached with a damaged file";
  EXPECT_TRUE(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 1) << "status " << exit.status;
  EXPECT_NE(exit.err.find(damaged + ":" + std::to_string(lines + 1) + ": "), std::string::npos) << exit.err;
  EXPECT_NE(exit.err.find("found 4 fields"), std::string::npos) << exit.err;
}

TEST_F(AttachClaims, ABackendRefusesAnAttachFileOfAnotherVersion) {
  const auto other = variant("v3", 0, "canopy-attach 3");
  auto exit = run_backend(other, 0);
  ASSERT_NE(exit.status, -1) << "the back-end did not end: it attached with a version 3 file";
  EXPECT_TRUE(WIFEXITED(exit.status) && WEXITSTATUS(exit.status) == 1) << "status " << exit.status;
  EXPECT_NE(exit.err.find(other + ":1: unsupported attach file version 3"), std::string::npos) << exit.err;
}

// The file of another tree (same commnode address, another network id): the
// commnode refuses the hello and tells the back-end why, and the tree does not
// count it as attached.
TEST_F(AttachClaims, ABackendOfAnotherNetworkIsRefusedAndToldWhy) {
  auto parsed = canopy::attach::read_attach_file(file_);
  ASSERT_TRUE(parsed) << parsed.error();
  const std::uint64_t other_id = parsed->network_id ^ 0x5a5a;
  std::ostringstream network_line;
  network_line << "network " << std::hex << other_id;
  const auto other = variant("other-network", 1, network_line.str());
  auto exit = run_backend(other, 0);
  ASSERT_NE(exit.status, -1) << "the back-end did not end: the tree accepted it";
  EXPECT_NE(exit.err.find("refused by commnode 1000001"), std::string::npos) << exit.err;
  EXPECT_NE(exit.err.find("hello from another network"), std::string::npos) << exit.err;
  std::ostringstream tree_id;
  tree_id << std::hex << parsed->network_id;
  EXPECT_EQ(exit.err.find(tree_id.str()), std::string::npos)
      << "the refusal handed this tree's network id to a stranger: " << exit.err;
  auto attached = network_->wait_for_backends(100ms);
  ASSERT_FALSE(attached);
  EXPECT_NE(attached.error().find("missing ranks 0-3"), std::string::npos) << attached.error();
}

// A process speaking another protocol version (a hello as a newer Canopy would send
// it, to the port of the attach file): refused, with the versions in the reason.
TEST_F(AttachClaims, AHelloOfAnotherProtocolVersionIsRefusedAndToldWhy) {
  auto parsed = canopy::attach::read_attach_file(file_);
  ASSERT_TRUE(parsed) << parsed.error();
  const auto* entry = parsed->find(0);
  ASSERT_TRUE(entry);
  canopy::core::LoopThread loop;
  std::promise<std::string> shutdown_reason, closed;
  bool told = false, ended = false;  // on the loop's thread
  std::shared_ptr<canopy::transport::Link> link;
  loop.call([&] {
    boost::system::error_code ec;
    auto socket = canopy::transport::connect_tcp(loop.io(), entry->address, entry->port, ec);
    ASSERT_FALSE(ec) << ec.message();
    link = canopy::transport::TcpLink::create(std::move(socket));
    link->start(
        [&](capnp::MessageReader& message) {
          auto body = message.getRoot<canopy::wire::Message>().getBody();
          if (body.which() == canopy::wire::Message::Body::SHUTDOWN && !told) {
            told = true;
            shutdown_reason.set_value(body.getShutdown().getReason());
          }
        },
        [&](std::string_view reason) {
          if (!ended) closed.set_value(std::string(reason));
          ended = true;
        });
    canopy::core::NodeIdentity me;
    me.rank = 0;
    me.role = canopy::Role::backend;
    me.network_id = parsed->network_id;
    canopy::core::Message hello(me);
    auto h = hello.body().initHello();
    h.setProtocolVersion(canopy::wire::PROTOCOL_VERSION + 1);
    h.setNetworkId(parsed->network_id);
    h.setRole(canopy::wire::Role::BACKEND);
    h.setRank(0);
    h.setPid(getpid());
    link->send(hello.builder());
  });
  auto reason = shutdown_reason.get_future();
  auto end = closed.get_future();
  ASSERT_EQ(reason.wait_for(10s), std::future_status::ready) << "no shutdown with a reason within 10 s";
  const auto expected = "protocol version " + std::to_string(canopy::wire::PROTOCOL_VERSION + 1) + ", expected " +
                        std::to_string(canopy::wire::PROTOCOL_VERSION);
  const auto said = reason.get();
  EXPECT_NE(said.find("refused by commnode 1000001"), std::string::npos) << said;
  EXPECT_NE(said.find(expected), std::string::npos) << said;
  EXPECT_EQ(end.wait_for(10s), std::future_status::ready) << "the commnode did not close the connection";
  loop.call([&] {
    if (link) link->abort("test over");
  });
  loop.stop();
}

}  // namespace
