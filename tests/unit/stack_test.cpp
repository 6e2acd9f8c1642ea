// The stack walker and the MPIR reader (stack/walker.h, stack/mpir.h) on real
// processes: canopy-stack-target (a known call stack), real mpirun jobs of
// canopy-mpi-sleeper, sleep. Every process a test starts is killed and reaped at its
// end (ProcessGuard makes this process the reaper of mpirun's ranks too).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "process_guard.h"
#include "stack/mpir.h"
#include "stack/walker.h"

namespace canopy::stack {
namespace {

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;

// A child process with its stdin and stdout on pipes; killed (with its process group
// when it leads one) and reaped when the object goes. A group's leader is an MPI
// launcher here: it is first asked to end its job, so that it removes its files.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv, bool own_group = false) : own_group_(own_group) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      if (own_group) setpgid(0, 0);
      dup2(in[0], STDIN_FILENO);
      dup2(out[1], STDOUT_FILENO);
      close(in[0]), close(in[1]), close(out[0]), close(out[1]);
      std::vector<char*> args;
      for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
    if (own_group) setpgid(pid_, pid_);  // also from here, so kill(-pid) works at once
    close(in[0]), close(out[1]);
    in_ = in[1], out_ = out[0];
  }
  ~Child() {
    if (pid_ > 0) {
      if (own_group_) {
        ProcessGuard::end_launcher(pid_, 5s);
        ::kill(-pid_, SIGKILL);
      }
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  // One line from the child's stdout, or "" after `limit`.
  std::string read_line(std::chrono::milliseconds limit = 5s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    std::string line;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char c;
      if (read(out_, &c, 1) != 1) return line;
      if (c == '\n') return line;
      line += c;
    }
    return "";
  }
  bool write_line(const std::string& text) {
    std::string line = text + "\n";
    return write(in_, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  }

 private:
  pid_t pid_ = -1;
  int in_ = -1;
  int out_ = -1;
  bool own_group_ = false;
};

// Not traced, and not stopped by us (State t is a ptrace-stop).
void expect_untraced(pid_t pid) {
  EXPECT_EQ(ProcessGuard::status_field(pid, "TracerPid"), "0") << "process " << pid << " is still traced";
  EXPECT_NE(ProcessGuard::status_field(pid, "State").substr(0, 1), "t") << "process " << pid << " is left in ptrace-stop";
}

// The index of the first frame that contains `name`, or -1.
int frame_index(const ThreadStack& thread, const std::string& name) {
  for (std::size_t i = 0; i < thread.frames.size(); ++i) {
    if (thread.frames[i].find(name) != std::string::npos) return static_cast<int>(i);
  }
  return -1;
}

std::string describe(const std::vector<ThreadStack>& threads) {
  std::string out;
  for (const auto& thread : threads) {
    out += "thread " + std::to_string(thread.tid) + (thread.truncated.empty() ? "" : " [" + thread.truncated + "]") + ":\n";
    for (const auto& frame : thread.frames) out += "  " + frame + "\n";
  }
  return out;
}

const ThreadStack* thread_with(const std::vector<ThreadStack>& threads, const std::string& name) {
  for (const auto& thread : threads) {
    if (frame_index(thread, name) >= 0) return &thread;
  }
  return nullptr;
}

// Samples until both threads of the target are in their blocking functions (the
// worker thread may still be on its way there just after "ready").
Result<std::vector<ThreadStack>> sample_settled(Walker& walker, pid_t pid) {
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (true) {
    auto result = std::move(walker.sample({pid})[0]);
    bool settled = result && thread_with(*result, "inner_function") && thread_with(*result, "worker_wait");
    if (settled || std::chrono::steady_clock::now() > deadline) return result;
    std::this_thread::sleep_for(20ms);
  }
}

class StackTarget : public ::testing::Test {
 protected:
  explicit StackTarget(const char* program = CANOPY_STACK_TARGET) : target_{{program}} {}
  void SetUp() override { ASSERT_EQ(target_.read_line(), "ready"); }
  // The target still runs: it answers on its pipe.
  void expect_running() {
    ASSERT_TRUE(target_.write_line("ping"));
    EXPECT_EQ(target_.read_line(), "pong");
    expect_untraced(target_.pid());
  }
  Child target_;
};

// The same program with no address index in its debug information (.debug_aranges),
// as clang writes it unless asked for one.
class StackTargetWithoutAddressIndex : public StackTarget {
 protected:
  StackTargetWithoutAddressIndex() : StackTarget(CANOPY_STACK_TARGET_NO_ARANGES) {}
};

TEST_F(StackTarget, FindsBothThreadsWithTheirFramesOutermostFirst) {
  Walker walker;
  auto result = sample_settled(walker, target_.pid());
  ASSERT_TRUE(result) << result.error();
  ASSERT_EQ(result->size(), 2u) << describe(*result);
  EXPECT_EQ((*result)[0].tid, target_.pid()) << "the main thread comes first";

  const ThreadStack* main_thread = thread_with(*result, "inner_function");
  ASSERT_NE(main_thread, nullptr) << describe(*result);
  int main_at = frame_index(*main_thread, "main");
  int outer_at = frame_index(*main_thread, "stack_target::outer_function(int)");
  int inner_at = frame_index(*main_thread, "stack_target::inner_function(int)");
  EXPECT_GE(main_at, 0) << describe(*result);
  EXPECT_LT(main_at, outer_at) << describe(*result);
  EXPECT_LT(outer_at, inner_at) << describe(*result);
  EXPECT_NE(main_thread->frames.front().find("_start"), std::string::npos) << describe(*result);

  const ThreadStack* worker = thread_with(*result, "stack_target::worker_wait(int)");
  ASSERT_NE(worker, nullptr) << describe(*result);
  EXPECT_LT(frame_index(*worker, "stack_target::worker_loop(void*)"),
            frame_index(*worker, "stack_target::worker_wait(int)"));
  expect_running();
}

TEST_F(StackTarget, TheMainThreadAloneIsWalkedWhenAsked) {
  Walker all;
  ASSERT_TRUE(sample_settled(all, target_.pid()));  // both threads where they wait
  Walker walker({.all_threads = false});
  auto result = std::move(walker.sample({target_.pid()})[0]);
  ASSERT_TRUE(result) << result.error();
  ASSERT_EQ(result->size(), 1u) << describe(*result);
  EXPECT_EQ((*result)[0].tid, target_.pid());
  EXPECT_GE(frame_index((*result)[0], "stack_target::inner_function(int)"), 0) << describe(*result);
  expect_running();
}

TEST_F(StackTarget, SamplesTwiceInARowWithTheSameWalker) {
  Walker walker;
  auto first = sample_settled(walker, target_.pid());
  ASSERT_TRUE(first) << first.error();
  expect_running();
  auto second = walker.sample({target_.pid()});
  ASSERT_TRUE(second[0]) << second[0].error();
  EXPECT_NE(thread_with(*second[0], "stack_target::inner_function(int)"), nullptr) << describe(*second[0]);
  EXPECT_NE(thread_with(*second[0], "stack_target::worker_wait(int)"), nullptr) << describe(*second[0]);
  expect_running();
}

// Every frame named in `names` (the first frame with the name, in the first thread
// that has one) ends with " (stack_target.cpp:LINE)".
void expect_lines(const std::vector<ThreadStack>& threads, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const ThreadStack* thread = thread_with(threads, name);
    ASSERT_NE(thread, nullptr) << name << " in\n" << describe(threads);
    const std::string& frame = thread->frames[frame_index(*thread, name)];
    EXPECT_NE(frame.find(" (stack_target.cpp:"), std::string::npos) << frame;
  }
}

TEST_F(StackTarget, LinesAddTheSourceFileAndLine) {
  Walker walker({.lines = true});
  auto result = sample_settled(walker, target_.pid());
  ASSERT_TRUE(result) << result.error();
  expect_lines(*result, {"inner_function", "outer_function"});
  expect_running();
}

// libdw finds a unit by address through the index alone: the walker searches the
// units itself where there is none.
TEST_F(StackTargetWithoutAddressIndex, LinesAreFoundInTheUnitsThemselves) {
  Walker walker({.lines = true});
  auto result = sample_settled(walker, target_.pid());
  ASSERT_TRUE(result) << result.error();
  expect_lines(*result, {"inner_function", "outer_function", "worker_wait"});
  expect_running();
}

TEST_F(StackTarget, AMissingPidFailsAloneAndTheOthersAreSampled) {
  Walker walker;
  pid_t missing = 4'000'000;  // above pid_max's 2^22 limit: never a process
  ASSERT_TRUE(sample_settled(walker, target_.pid()));
  auto results = walker.sample({missing, target_.pid(), missing});
  ASSERT_EQ(results.size(), 3u);
  ASSERT_FALSE(results[0]);
  EXPECT_EQ(results[0].error(), "no process 4000000");
  EXPECT_EQ(results[0].error_kind(), ErrorKind::invalid_input);
  ASSERT_TRUE(results[1]) << results[1].error();
  EXPECT_NE(thread_with(*results[1], "inner_function"), nullptr);
  EXPECT_FALSE(results[2]);
  expect_running();
}

TEST_F(StackTarget, AProcessTheUserStoppedStaysStopped) {
  Walker walker;
  ASSERT_TRUE(sample_settled(walker, target_.pid()));  // in inner_function, before it is stopped
  ASSERT_EQ(::kill(target_.pid(), SIGSTOP), 0);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (ProcessGuard::status_field(target_.pid(), "State").rfind("T", 0) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  auto result = walker.sample({target_.pid()});
  ASSERT_TRUE(result[0]) << result[0].error();
  EXPECT_NE(thread_with(*result[0], "inner_function"), nullptr) << describe(*result[0]);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ProcessGuard::status_field(target_.pid(), "State").substr(0, 1), "T") << "the sample resumed a stopped process";
  EXPECT_EQ(ProcessGuard::status_field(target_.pid(), "TracerPid"), "0");
  ASSERT_EQ(::kill(target_.pid(), SIGCONT), 0);
  expect_running();
}

TEST_F(StackTarget, AProcessTracedByAnotherTracerIsRefusedWithWhoTracesIt) {
  // This thread becomes the target's tracer, as a debugger would.
  ASSERT_EQ(ptrace(PTRACE_SEIZE, target_.pid(), nullptr, nullptr), 0);
  Walker walker;
  auto result = walker.sample({target_.pid()});
  ASSERT_TRUE(ptrace(PTRACE_INTERRUPT, target_.pid(), nullptr, nullptr) == 0);
  ASSERT_EQ(waitpid(target_.pid(), nullptr, __WALL), target_.pid());
  ASSERT_EQ(ptrace(PTRACE_DETACH, target_.pid(), nullptr, nullptr), 0);
  ASSERT_FALSE(result[0]);
  EXPECT_NE(result[0].error().find("is already traced by process " + std::to_string(getpid())), std::string::npos)
      << result[0].error();
  EXPECT_EQ(result[0].error_kind(), ErrorKind::invalid_input);
  expect_running();
}

TEST_F(StackTarget, AnotherUsersProcessIsRefusedWithWhatToDo) {
  // A child that is not root (or pid 1 when we are not root) has no right to trace us.
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  pid_t self = getpid();
  pid_t child = fork();
  if (child == 0) {
    pid_t victim = self;
    if (geteuid() == 0) {
      if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    } else {
      victim = 1;
    }
    Walker walker;
    auto walked = walker.sample({victim});
    auto table = read_proctable(victim);
    std::string text = (walked[0] ? std::string("walked") : walked[0].error()) + "\n" +
                       (table ? std::string("read") : table.error());
    if (write(report[1], text.data(), text.size()) < 0) _exit(3);
    _exit(0);
  }
  close(report[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(report[0], buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  close(report[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto newline = text.find('\n');
  std::string walked = text.substr(0, newline), table = text.substr(newline + 1);
  EXPECT_NE(walked.find("no permission to trace process"), std::string::npos) << walked;
  EXPECT_NE(walked.find("same user"), std::string::npos) << walked;
  EXPECT_NE(walked.find("/proc/sys/kernel/yama/ptrace_scope"), std::string::npos) << walked;
  EXPECT_NE(table.find("no permission to trace process"), std::string::npos) << table;
}

TEST(StackWalker, AZombieIsReportedAsExited) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  // Not reaped yet: a zombie until waitpid below.
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (ProcessGuard::status_field(child, "State").rfind("Z", 0) != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  Walker walker;
  auto result = walker.sample({child});
  auto table = read_proctable(child);
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(result[0]);
  EXPECT_NE(result[0].error().find("has exited"), std::string::npos) << result[0].error();
  ASSERT_FALSE(table);
  EXPECT_NE(table.error().find("has exited"), std::string::npos) << table.error();
}

TEST(StackWalker, RefusesToSampleItsOwnProcess) {
  Walker walker;
  auto result = walker.sample({getpid()});
  ASSERT_FALSE(result[0]);
  EXPECT_EQ(result[0].error_kind(), ErrorKind::invalid_input);
}

TEST(StackWalker, ProcessesKilledWhileSampledGiveErrorsAndNeverHang) {
  // Kill each target at a different moment of a stream of samples: each sample gives
  // stacks or an error, and none blocks or leaves anything traced.
  for (int round = 0; round < 8; ++round) {
    Child target({CANOPY_STACK_TARGET});
    ASSERT_EQ(target.read_line(), "ready");
    Walker walker;
    std::thread killer([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(round * 700));
      ::kill(target.pid(), SIGKILL);
    });
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
      auto result = walker.sample({target.pid()});
      if (!result[0]) {
        EXPECT_NE(result[0].error(), "") << "an error has a message";
      }
    }
    killer.join();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  }
}

// MPIR: real mpirun jobs. Skipped when Open MPI is not installed (CMake found no MPI).
#if defined(CANOPY_MPIEXEC) && defined(CANOPY_MPI_SLEEPER)

std::vector<std::string> mpirun(int ranks, std::vector<std::string> program) {
  std::vector<std::string> argv{CANOPY_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  auto close = line.rfind(')');
  if (close == std::string::npos) return -1;
  return static_cast<pid_t>(std::strtol(line.c_str() + close + 4, nullptr, 10));
}

class Mpir : public ::testing::Test {
 protected:
  void TearDown() override {
    guard_.kill_all();
    EXPECT_TRUE(ProcessGuard::wait_for_none(5s).empty()) << "a process of the job survived";
  }
  ProcessGuard guard_;
};

TEST_F(Mpir, ReadsTheRanksOfARunningJob) {
  Child job(mpirun(4, {CANOPY_MPI_SLEEPER}), /*own_group=*/true);
  auto waited = wait_for_proctable(job.pid(), 30s);
  ASSERT_TRUE(waited) << waited.error();
  auto table = read_proctable(job.pid());
  ASSERT_TRUE(table) << table.error();
  ASSERT_EQ(table->size(), 4u);
  for (std::uint32_t rank = 0; rank < 4; ++rank) {
    const RankProcess& process = (*table)[rank];
    EXPECT_EQ(process.rank, rank);
    EXPECT_FALSE(process.host.empty());
    EXPECT_TRUE(std::filesystem::equivalent(process.executable, CANOPY_MPI_SLEEPER)) << process.executable;
    EXPECT_EQ(parent_of(process.pid), job.pid()) << "rank " << rank << " is not mpirun's child";
    EXPECT_TRUE(std::filesystem::equivalent("/proc/" + std::to_string(process.pid) + "/exe", CANOPY_MPI_SLEEPER));
    EXPECT_EQ(process.pid, (*waited)[rank].pid);
  }
  expect_untraced(job.pid());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(waitpid(job.pid(), nullptr, WNOHANG), 0) << "the job stopped after the read";
  for (const auto& process : *table) EXPECT_EQ(::kill(process.pid, 0), 0) << "rank " << process.rank << " died";
}

TEST_F(Mpir, TheRanksFoundCanBeSampled) {
  Child job(mpirun(2, {CANOPY_MPI_SLEEPER}), /*own_group=*/true);
  auto table = wait_for_proctable(job.pid(), 30s);
  ASSERT_TRUE(table) << table.error();
  std::vector<pid_t> pids;
  for (const auto& process : *table) pids.push_back(process.pid);
  Walker walker;
  // mpirun lists a rank as soon as it has started it: the rank may still be in the
  // dynamic loader, with no main() on its stack yet (seen once under load). Sample
  // again until every rank is in main, for a bound only a broken walker reaches.
  auto in_main = [&](const auto& stacks) {
    return std::all_of(stacks.begin(), stacks.end(),
                       [&](const auto& s) { return s && thread_with(*s, "main") != nullptr; });
  };
  auto stacks = walker.sample(pids);
  for (auto until = std::chrono::steady_clock::now() + 10s; !in_main(stacks) && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(50ms);
    stacks = walker.sample(pids);
  }
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    ASSERT_TRUE(stacks[i]) << stacks[i].error();
    EXPECT_NE(thread_with(*stacks[i], "main"), nullptr) << describe(*stacks[i]);
    expect_untraced(pids[i]);
  }
}

TEST_F(Mpir, AProcessThatIsNotALauncherIsNamed) {
  Child sleeper({"sleep", "30"});
  std::this_thread::sleep_for(100ms);  // past exec
  auto table = read_proctable(sleeper.pid());
  ASSERT_FALSE(table);
  EXPECT_EQ(table.error(), "process " + std::to_string(sleeper.pid()) +
                               " (sleep) is not an MPI launcher: it has no MPIR_proctable; give the PID of mpirun");
  EXPECT_EQ(table.error_kind(), ErrorKind::invalid_input);
  expect_untraced(sleeper.pid());
}

TEST_F(Mpir, AJobOfNonMpiProgramsHasNoTableYet) {
  Child job(mpirun(2, {"sleep", "30"}), /*own_group=*/true);
  // Wait until mpirun has started its two sleeps, so its MPI library is loaded.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  auto sleeps = [&] {
    int count = 0;
    for (pid_t pid : ProcessGuard::descendants()) count += parent_of(pid) == job.pid();
    return count;
  };
  while (sleeps() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  ASSERT_EQ(sleeps(), 2);
  auto table = read_proctable(job.pid());
  ASSERT_FALSE(table);
  EXPECT_NE(table.error().find("have not all called MPI_Init yet; try again"), std::string::npos) << table.error();
  auto waited = wait_for_proctable(job.pid(), 300ms);
  ASSERT_FALSE(waited);
  EXPECT_NE(waited.error().find("MPI_Init"), std::string::npos) << waited.error();
  expect_untraced(job.pid());
}

TEST_F(Mpir, AMissingProcessIsNamed) {
  auto table = read_proctable(4'000'000);
  ASSERT_FALSE(table);
  EXPECT_EQ(table.error(), "no process 4000000");
  EXPECT_EQ(table.error_kind(), ErrorKind::invalid_input);
  auto waited = wait_for_proctable(4'000'000, 1s);
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error(), "no process 4000000");
}

#else
TEST(Mpir, NeedsOpenMpi) { GTEST_SKIP() << "MPI was not found at configure time (scripts/setup.sh installs it)"; }
#endif

}  // namespace
}  // namespace canopy::stack
