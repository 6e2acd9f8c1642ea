// Back-pressure on the way up (docs/protocol.md, "Resource bounds"; issue 16): with
// its front-end stopped, a commnode whose back-ends send as fast as they can must not
// queue what they send without bound. It stops reading them once 16 MiB are queued
// towards the front-end, their send() waits, and the run goes on, losing nothing it
// was given, once the front-end reads again.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include "process_guard.h"

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;

namespace {

const std::string kFlood = std::string(CANOPY_BIN_DIR) + "/canopy-flood";

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Whether canopy-flood's CSV (second,packets,mib) has packets in a second from
// `from` on.
bool any_packets(const std::string& csv, int from) {
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    int second = 0;
    unsigned long long packets = 0;
    if (std::sscanf(line.c_str(), "%d,%llu", &second, &packets) == 2 && second >= from && packets > 0) return true;
  }
  return false;
}

// Resident memory of `pid` in MiB (0 if it is gone).
double rss_mib(pid_t pid) {
  std::istringstream field(ProcessGuard::status_field(pid, "VmRSS"));
  double kib = 0;
  field >> kib;
  return kib / 1024;
}

TEST(Backpressure, AStoppedFrontEndHoldsTheBackendsBackInsteadOfGrowingItsCommnode) {
  ProcessGuard guard;
  const auto dir = std::filesystem::temp_directory_path() / ("canopy-backpressure-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto out = dir / "received.csv", err = dir / "flood.log";

  // The front-end, in a process of its own so that it can be stopped: b:1x4, the
  // back-ends sending 64 KiB packets as fast as they can, for 30 s.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> args = {kFlood, "--packet-bytes", "65536", "--seconds", "30"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Under AddressSanitizer, freed memory waits in a quarantine (256 MiB) before it is
  // used again: the resident memory would grow with every packet that passed, not
  // with what is held. The flood's processes get none; elsewhere the option is unread.
  std::vector<std::string> env;
  bool asan_set = false;
  for (char** e = environ; *e; ++e) {
    env.emplace_back(*e);
    if (env.back().rfind("ASAN_OPTIONS=", 0) == 0) {
      env.back() += ":quarantine_size_mb=0:thread_local_quarantine_size_kb=0";
      asan_set = true;
    }
  }
  if (!asan_set) env.emplace_back("ASAN_OPTIONS=quarantine_size_mb=0:thread_local_quarantine_size_kb=0");
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t frontend = -1;
  ASSERT_EQ(posix_spawn(&frontend, kFlood.c_str(), &actions, nullptr, argv.data(), envp.data()), 0) << kFlood;
  posix_spawn_file_actions_destroy(&actions);

  for (auto until = std::chrono::steady_clock::now() + 60s;
       slurp(err).find("flooding") == std::string::npos && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(slurp(err).find("flooding"), std::string::npos) << "the tree did not come up: " << slurp(err);
  const auto flooding = std::chrono::steady_clock::now();
  pid_t commnode = -1;
  for (pid_t pid : ProcessGuard::descendants()) {
    if (ProcessGuard::name_of(pid) == "canopy-commnode") commnode = pid;
  }
  ASSERT_GT(commnode, 0) << "no commnode among the front-end's children";

  // Flooding with the front-end reading (until packets come, then 2 s more: a
  // sanitizer build on a loaded machine takes seconds to its first), then 5 s with
  // it stopped.
  for (auto until = std::chrono::steady_clock::now() + 60s;
       !any_packets(slurp(out), 1) && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(any_packets(slurp(out), 1)) << "nothing came before the stop: " << slurp(out) << slurp(err);
  std::this_thread::sleep_for(2s);
  ASSERT_EQ(kill(frontend, SIGSTOP), 0);
  std::this_thread::sleep_for(300ms);  // what was on its way settles
  const double at_stop = rss_mib(commnode);
  double peak = at_stop;
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(100ms);
    peak = std::max(peak, rss_mib(commnode));
  }
  ASSERT_EQ(kill(frontend, SIGCONT), 0);
  // The seconds of the flood's run that began before it went on, and one more.
  const int resumed = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - flooding).count() + 2);
  // The bound: 16 MiB queued towards the front-end, then what the kernel holds in
  // the sockets and what the loop has read but not yet sent; 96 MiB leaves room for
  // a sanitizer build. Without back-pressure the back-ends add hundreds of MiB a
  // second here.
  EXPECT_LT(peak - at_stop, 96.0) << "the commnode grew from " << at_stop << " MiB to " << peak
                                  << " MiB while its front-end was stopped";

  int status = -1;
  for (auto until = std::chrono::steady_clock::now() + 90s; std::chrono::steady_clock::now() < until;) {
    if (waitpid(frontend, &status, WNOHANG) == frontend) break;
    status = -1;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(status, -1) << "canopy-flood did not finish";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "canopy-flood: " << slurp(err);
  // It flooded again once the front-end went on: nothing was held back for good.
  // (How many seconds had packets in them says how loaded the machine was, not
  // whether back-pressure works.)
  const std::string received = slurp(out);
  EXPECT_TRUE(any_packets(received, resumed)) << "nothing came after the front-end went on (from second "
                                                << resumed << "):\n" << received;
  EXPECT_TRUE(ProcessGuard::wait_for_none(10s).empty()) << "processes left after canopy-flood";
  std::filesystem::remove_all(dir);
}

}  // namespace
