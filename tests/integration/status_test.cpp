// `canopy run --status FILE` and `canopy status FILE` (docs/fault-tolerance.md,
// "Watching a run"): a finished run and a run whose front-end was killed are told
// apart from a running one, and `--watch` follows a run in a real terminal (tmux)
// as it starts, heals and ends.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "process_guard.h"
#include "process_test.h"
#include "run_canopy.h"

using namespace std::chrono_literals;
using canopy::testing::exit_code;
using canopy::testing::kCanopy;
using canopy::testing::Output;
using canopy::testing::ProcessGuard;
using canopy::testing::run_canopy;
using canopy::testing::shell;
using canopy::testing::start_canopy;
using canopy::testing::wait_for;

namespace {

constexpr std::uint32_t C1 = 1000001;  // b:2^2: back-ends 0 and 1 under C1

class Status : public canopy::testing::ProcessTest {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/canopy-status-test-XXXXXX";
    dir_ = mkdtemp(dir);
    file_ = dir_ + "/status.json";
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    ProcessTest::TearDown();
  }

  std::string dir_, file_;
};

TEST_F(Status, AFinishedRunIsShownAsFinishedWithItsExitStatus) {
  auto run = run_canopy({"run", "--tree", "b:2", "--waves", "2", "--status", file_});
  ASSERT_EQ(exit_code(run), 0) << run.err;
  auto status = run_canopy({"status", file_});
  EXPECT_EQ(exit_code(status), 0) << status.err;
  EXPECT_EQ(status.out.rfind("run: finished ", 0), 0u) << status.out;
  EXPECT_NE(status.out.find(" with exit status 0 (pid "), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("\nfrontend 1000000 on localhost: alive\n"), std::string::npos) << status.out;

  // A run that fails before its tree is up replaces the earlier run's file: it is
  // not shown as the finished run before it.
  auto failed = run_canopy({"run", "--tree", "b:2", "--status", file_, "--backend", "/bin/false"});
  ASSERT_EQ(exit_code(failed), 1) << failed.out;
  status = run_canopy({"status", file_});
  EXPECT_EQ(exit_code(status), 0) << status.err;
  EXPECT_NE(status.out.find("with exit status 1 (pid "), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("it ended before its tree was up"), std::string::npos) << status.out;

  // A status file that cannot be written is refused before anything is launched.
  auto unwritable = run_canopy({"run", "--tree", "b:2", "--status", dir_ + "/no/such/dir/status.json"});
  EXPECT_EQ(exit_code(unwritable), 2);
  EXPECT_NE(unwritable.err.find("cannot write --status " + dir_ + "/no/such/dir/status.json"), std::string::npos)
      << unwritable.err;
}

TEST_F(Status, ARunWhoseFrontEndWasKilledIsStale) {
  // canopy run with a long workload, SIGKILLed once its status file exists.
  const pid_t pid = start_canopy({"run", "--tree", "b:2", "--waves", "100000", "--interval", "20", "--status", file_});
  ASSERT_GT(pid, 0);
  // The file exists from "starting" on: wait until it says the tree is up.
  Output running;
  const bool started = wait_for(
      [&] {
        running = run_canopy({"status", file_});
        return running.out.rfind("run: running (pid ", 0) == 0;
      },
      20s);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(started) << "the status file did not say running within 20 s: " << running.out;
  EXPECT_EQ(exit_code(running), 0) << running.err;
  EXPECT_EQ(running.out.rfind("run: running (pid " + std::to_string(pid), 0), 0u) << running.out;

  auto stale = run_canopy({"status", file_});
  EXPECT_EQ(exit_code(stale), 1) << stale.out << stale.err;
  EXPECT_EQ(stale.out.rfind("run: STALE: pid " + std::to_string(pid), 0), 0u) << stale.out;
  EXPECT_NE(stale.out.find("is gone without finishing"), std::string::npos) << stale.out;
  // Its commnodes see the front-end gone and exit (ProcessTest checks it).
}

// tmux: a terminal for `canopy status --watch`, on a server of the test's own.
class Terminal {
 public:
  explicit Terminal(const std::string& command) : socket_("canopy-test-" + std::to_string(getpid())) {
    shell("tmux -L " + socket_ + " -f /dev/null new-session -d -s watch -x 160 -y 50 '" + command +
          "; echo watch exited $?; sleep 60'");
  }
  ~Terminal() { shell("tmux -L " + socket_ + " kill-server 2>/dev/null"); }
  std::string screen() const { return shell("tmux -L " + socket_ + " capture-pane -p -t watch").first; }
  bool shows(const std::vector<std::string>& texts, std::chrono::milliseconds limit) const {
    return wait_for(
        [&] {
          const auto s = screen();
          for (const auto& t : texts) {
            if (s.find(t) == std::string::npos) return false;
          }
          return true;
        },
        limit);
  }

 private:
  std::string socket_;
};

TEST_F(Status, WatchFollowsARunThroughAHealingToItsEndInATerminal) {
  if (shell("command -v tmux").second != 0) GTEST_SKIP() << "tmux is not installed (scripts/setup.sh installs it)";
  Terminal terminal(kCanopy + " status --watch " + file_ + " --interval 0.2");
  EXPECT_TRUE(terminal.shows({"waiting for " + file_}, 10s)) << terminal.screen();

  Output run;
  std::thread front_end([&] {
    run = run_canopy({"run", "--tree", "b:2^2", "--workload", "union", "--rate", "50", "--duration", "4", "--status",
                      file_, "--heartbeat", "100", "--suspect", "300", "--lost", "800"});
  });
  // No ASSERT before the join.
  const bool up = terminal.shows({"run: running (pid ", "commnode 1000001 on localhost: alive", "backend 3 on localhost: alive",
                                  "7 alive, 0 lost"},
                                 20s);
  const std::string before = terminal.screen();
  const pid_t c1 = up ? ProcessGuard::process_of_rank(C1) : -1;
  const bool killed = c1 > 0 && kill(c1, SIGKILL) == 0;
  const bool healed =
      killed && terminal.shows({"commnode 1000001 on localhost: lost", "backend 0 on localhost: alive (adopted, incarnation ",
                                "6 alive, 1 lost"},
                               20s);
  const std::string during = terminal.screen();
  front_end.join();
  ASSERT_TRUE(up) << before;
  ASSERT_TRUE(killed);
  EXPECT_TRUE(healed) << during;
  EXPECT_EQ(exit_code(run), 0) << run.err;
  EXPECT_TRUE(terminal.shows({"run: finished ", "with exit status 0", "watch exited 0"}, 10s)) << terminal.screen();
  // Redrawn in place: the screen holds one frame, not a scroll of them.
  const auto end = terminal.screen();
  EXPECT_EQ(end.find("frontend 1000000"), end.rfind("frontend 1000000")) << end;
}

}  // namespace
