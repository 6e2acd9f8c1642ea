// canopy-commnode's exit status (commnode/main.cpp): 0 after an orderly shutdown, 1
// when it stopped for a failure. A launcher (srun, a script, the tool) reads it: a
// commnode that lost its parent without healing, or left the tree, used to exit 0
// like one that was told to stop.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/asio.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "canopy/frontend.h"
#include "process_guard.h"
#include "run_canopy.h"

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;
using canopy::testing::slurp;
using canopy::testing::start_process;

namespace {

// Waits (bounded) for `pid` and returns its wait status, or -1 if it did not exit.
int wait_status(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(20ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// A commnode whose parent hangs up before the handshake is done (no topology, so
// no healing): it stops for that failure and exits 1.
TEST(CommnodeExit, ACommnodeThatLosesItsParentExitsWithStatus1) {
  ProcessGuard guard;
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const auto port = acceptor.local_endpoint().port();
  setenv("CANOPY_PARENT", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
  setenv("CANOPY_RANK", "1000001", 1);
  setenv("CANOPY_NETWORK_ID", "1", 1);
  setenv("CANOPY_SECRET", std::string(64, 'a').c_str(), 1);
  const pid_t commnode = start_process({std::string(CANOPY_BIN_DIR) + "/canopy-commnode"});
  for (const char* name : {"CANOPY_PARENT", "CANOPY_RANK", "CANOPY_NETWORK_ID", "CANOPY_SECRET"}) unsetenv(name);
  ASSERT_GT(commnode, 0);
  {
    boost::asio::ip::tcp::socket socket(io);
    acceptor.accept(socket);  // the commnode's connection; closed at once
  }
  const int status = wait_status(commnode, 10s);
  ASSERT_NE(status, -1) << "the commnode did not exit within 10 s of losing its parent";
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 1);
}

// Shut down by the front-end, every commnode exits 0 (its parent, the front-end,
// logs the status).
TEST(CommnodeExit, CommnodesShutDownInOrderExitWithStatus0) {
  ProcessGuard guard;
  char dir[] = "/tmp/canopy-commnode-exit-XXXXXX";
  const std::string logs = mkdtemp(dir);
  setenv("CANOPY_LOG_DIR", logs.c_str(), 1);
  auto topology = canopy::generate_topology("b:2^2");
  ASSERT_TRUE(topology) << topology.error();
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {std::string(CANOPY_BIN_DIR) + "/canopy-demo-backend"};
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_TRUE(network) << network.error();
  ASSERT_TRUE((*network)->shutdown());
  network->reset();
  unsetenv("CANOPY_LOG_DIR");
  const std::string log = slurp(logs + "/frontend-" + std::to_string(canopy::kFirstInternalRank) + ".log");
  for (canopy::Rank r : {canopy::kFirstInternalRank + 1, canopy::kFirstInternalRank + 2}) {
    const std::string line = "commnode " + std::to_string(r) + " on localhost (pid ";
    const auto at = log.find(line);
    ASSERT_NE(at, std::string::npos) << log;
    EXPECT_NE(log.find("exited with status 0", at), std::string::npos) << log;
  }
  std::filesystem::remove_all(logs);
}

}  // namespace
