// core::cpu_account (core/process.h) on real processes: what a parent reads to tell
// a child starved of CPU on a loaded machine from one that hangs (issue 45).
#include <gtest/gtest.h>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "core/process.h"

namespace canopy::core {
namespace {

using namespace std::chrono_literals;

// A child that spins until killed, on CPU `cpu` if given.
pid_t spinner(std::optional<int> cpu = std::nullopt) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (cpu) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(*cpu, &set);
      sched_setaffinity(0, sizeof set, &set);
    }
    volatile unsigned long spins = 0;
    while (true) spins = spins + 1;
  }
  return pid;
}

void end(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(CpuAccount, AProcessThatSpinsRunsAndIsRunnable) {
  const pid_t pid = spinner();
  ASSERT_GT(pid, 0);
  const auto before = cpu_account(pid);
  std::this_thread::sleep_for(400ms);
  const auto after = cpu_account(pid);
  end(pid);
  ASSERT_TRUE(before && after);
  // On a loaded machine it may have had little of the 400 ms, but it had some, and
  // it is running or waiting to run.
  EXPECT_GT(after->ran, before->ran);
  EXPECT_TRUE(after->runnable);
  EXPECT_FALSE(after->stopped);
}

// And it says it is stopped (a stopped front-end is waited for: docs/fault-tolerance.md).
TEST(CpuAccount, AStoppedProcessNeitherRunsNorWaits) {
  const pid_t pid = spinner();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, WUNTRACED), pid);  // it has stopped
  const auto before = cpu_account(pid);
  std::this_thread::sleep_for(300ms);
  const auto after = cpu_account(pid);
  end(pid);
  ASSERT_TRUE(before && after);
  EXPECT_EQ(after->ran, before->ran);
  EXPECT_EQ(after->waited, before->waited);
  EXPECT_FALSE(after->runnable);
  EXPECT_TRUE(after->stopped);
}

// Three spinners on one CPU: each waits for it about two thirds of the time.
TEST(CpuAccount, ProcessesSharingOneCpuWaitForIt) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine)) ++cpu;
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) pids.push_back(spinner(cpu));
  std::this_thread::sleep_for(100ms);  // pinned
  std::vector<std::optional<CpuAccount>> before;
  for (pid_t pid : pids) before.push_back(cpu_account(pid));
  const auto window = 1s;
  std::this_thread::sleep_for(window);
  std::vector<std::optional<CpuAccount>> after;
  for (pid_t pid : pids) after.push_back(cpu_account(pid));
  for (pid_t pid : pids) end(pid);
  for (std::size_t i = 0; i < pids.size(); ++i) {
    ASSERT_TRUE(before[i] && after[i]);
    // Two thirds on an idle machine, more on a loaded one; a third leaves room for
    // the moments a spinner's wait had not ended when it was read.
    EXPECT_GT(after[i]->waited - before[i]->waited, window / 3) << "spinner " << i;
  }
}

TEST(CpuAccount, AProcessThatIsGoneHasNone) {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  EXPECT_FALSE(cpu_account(pid));
}

}  // namespace
}  // namespace canopy::core
