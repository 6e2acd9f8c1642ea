// The canopy command line, run as a user would: its output, its errors and, when
// the front-end is killed, the fate of the tree it launched.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process_guard.h"
#include "process_test.h"
#include "run_canopy.h"

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;
using canopy::testing::exit_code;
using canopy::testing::kCanopy;
using canopy::testing::Output;
using canopy::testing::run_canopy;

namespace {

// Lines of `text` that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos) out.push_back(line);
  }
  return out;
}

std::size_t line_count(const std::string& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// A union run on b:2^2 (back-ends 0 to 3, 50 integers a second each for 4 s,
// recorded in its own directory) in which back-end `victim` is SIGKILLed about 1.5 s
// after it starts sending.
struct UnionRunWithAKill {
  Output output;
  std::string record_dir;
  bool killed = false;
  std::chrono::duration<double> took{0};

  // The victim gets `signal` 1.5 s into the run; `extra` are more options for the run.
  UnionRunWithAKill(const std::string& format, std::uint32_t victim, int signal = SIGKILL,
                    const std::vector<std::string>& extra = {}) {
    char dir[] = "/tmp/canopy-cli-union-XXXXXX";
    record_dir = mkdtemp(dir);
    auto started = std::chrono::steady_clock::now();
    std::thread front_end([&] {
      std::vector<std::string> args{"run",      "--tree", "b:2^2",    "--workload", "union",  "--rate",
                                    "50",       "--duration", "4",    "--record",   record_dir, "--format",
                                    format,     "--status", record_dir + "/status.json"};
      args.insert(args.end(), extra.begin(), extra.end());
      output = run_canopy(args);
    });
    // The victim's record file fills once it is sending; no ASSERT before the join.
    const std::string victim_file = record_dir + "/be-" + std::to_string(victim) + ".txt";
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (line_count(victim_file) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    std::this_thread::sleep_for(1500ms);
    pid_t pid = ProcessGuard::process_of_rank(victim);
    killed = pid > 0 && kill(pid, signal) == 0;
    front_end.join();
    took = std::chrono::steady_clock::now() - started;
  }
  ~UnionRunWithAKill() { std::filesystem::remove_all(record_dir); }
};

// `canopy run` as a long-running front-end whose output the test reads as it comes.
class LiveRun {
 public:
  explicit LiveRun(std::vector<std::string> args) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    args.insert(args.begin(), kCanopy);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, kCanopy.c_str(), &actions, nullptr, argv.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    fd_ = fds[0];
    fcntl(fd_, F_SETFL, O_NONBLOCK);
  }
  LiveRun(const LiveRun&) = delete;
  LiveRun& operator=(const LiveRun&) = delete;
  ~LiveRun() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  // Reads the output until `needle` is in it or `limit` has passed; true if it is.
  bool wait_for(const std::string& needle, std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (seen_.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      ssize_t n = fd_ >= 0 ? read(fd_, buf, sizeof buf) : -1;
      if (n > 0) seen_.append(buf, n);
      else std::this_thread::sleep_for(10ms);
    }
    return seen_.find(needle) != std::string::npos;
  }

  // Interrupts the run (SIGINT) unless it has ended, and returns its exit code
  // (-1 if it has not ended within `limit`: the destructor then kills it).
  int stop(std::chrono::milliseconds limit) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGINT);
    auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pid_, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(20ms);
    }
    if (done != pid_) return -1;
    pid_ = -1;
    char buf[4096];
    for (ssize_t n; (n = read(fd_, buf, sizeof buf)) > 0;) seen_.append(buf, n);  // what it printed last
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  const std::string& output() const { return seen_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string seen_;
};

// A demo run with a minute between its two waves: after the first, nothing but
// events can arrive for a minute.
std::vector<std::string> slow_demo_run(const std::string& format) {
  return {"run", "--tree", "b:2^2", "--waves", "2", "--interval", "60000", "--format", format};
}

class Cli : public canopy::testing::ProcessTest {};

}  // namespace

TEST_F(Cli, RunWithoutArgumentsPrintsTheDefaultTreesSums) {
  auto o = run_canopy({"run", "--format", "jsonl"});
  ASSERT_EQ(exit_code(o), 0) << o.err;
  EXPECT_NE(o.out.find("{\"stream\":1,\"wave\":3,\"values\":[48120],\"contributors\":16,\"complete\":true}"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("\"incomplete_waves\":[],\"missing_waves\":[],\"late_packets\":0}"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"backends\":16,\"processes\":21"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"check\":\"ok\""), std::string::npos) << o.out;
}

TEST_F(Cli, TextFormatIsReadable) {
  auto o = run_canopy({"run", "--tree", "b:2^2", "--waves", "3", "--filter", "union"});
  ASSERT_EQ(exit_code(o), 0) << o.err;
  EXPECT_NE(o.out.find("launched 7/7 processes"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("wave 2: [2000, 2001, 2002, 2003]"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("check: ok"), std::string::npos) << o.out;
}

TEST_F(Cli, BadTopologyFileIsReportedWithFileAndLine) {
  char path[] = "/tmp/canopy-bad-XXXXXX.yaml";
  int fd = mkstemps(path, 5);
  std::string yaml = "nodes:\n  - {rank: 1, role: frontend}\n  - {rank: 1, role: backend}\n";
  ASSERT_EQ(write(fd, yaml.data(), yaml.size()), static_cast<ssize_t>(yaml.size()));
  close(fd);
  auto o = run_canopy({"run", "--topology", path});
  unlink(path);
  EXPECT_EQ(exit_code(o), 2);
  EXPECT_NE(o.err.find(std::string(path) + ":3: duplicate rank 1"), std::string::npos) << o.err;
}

TEST_F(Cli, BadTreeSpecIsAUsageError) {
  auto o = run_canopy({"run", "--tree", "b:0^2"});
  EXPECT_EQ(exit_code(o), 2);
  EXPECT_NE(o.err.find("fan-out"), std::string::npos) << o.err;
}

TEST_F(Cli, BackendExitingEarlyEndsTheRunWithAClearError) {
  auto o = run_canopy({"run", "--tree", "b:2^2", "--backend", std::string(CANOPY_TEST_BIN_DIR) + "/flaky_backend",
                       "exit-at-start", "1", "4"});
  EXPECT_EQ(exit_code(o), 1);
  EXPECT_NE(o.err.find("back-end 1 on localhost exited with status 4 before connecting"), std::string::npos) << o.err;
}

TEST_F(Cli, TopgenWritesYamlThatRunAccepts) {
  auto o = run_canopy({"topgen", "b:3^2"});
  ASSERT_EQ(exit_code(o), 0) << o.err;
  EXPECT_NE(o.out.find("{rank: 1000000, role: frontend"), std::string::npos) << o.out;
  char path[] = "/tmp/canopy-gen-XXXXXX.yaml";
  int fd = mkstemps(path, 5);
  ASSERT_EQ(write(fd, o.out.data(), o.out.size()), static_cast<ssize_t>(o.out.size()));
  close(fd);
  auto r = run_canopy({"run", "--topology", path, "--waves", "2", "--format", "jsonl"});
  unlink(path);
  EXPECT_EQ(exit_code(r), 0) << r.err;
  EXPECT_NE(r.out.find("\"backends\":9"), std::string::npos) << r.out;
}

TEST_F(Cli, KillingTheFrontEndTakesTheWholeTreeDown) {
  // canopy run as a long-running front-end; SIGKILL it once the tree is up.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<std::string> args = {kCanopy, "run", "--tree", "b:4^2", "--waves", "100000", "--interval", "10"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t frontend;
  ASSERT_EQ(posix_spawn(&frontend, kCanopy.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);

  // Wait for the first wave: the whole tree is then up and streaming.
  std::string seen;
  char buf[256];
  auto deadline = std::chrono::steady_clock::now() + 20s;
  fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  while (seen.find("wave 0:") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) seen.append(buf, n);
    else std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(seen.find("wave 0:"), std::string::npos) << seen;
  EXPECT_EQ(ProcessGuard::descendants().size(), 21u);

  kill(frontend, SIGKILL);
  waitpid(frontend, nullptr, 0);
  close(pipe_fds[0]);
  auto left = ProcessGuard::wait_for_none(5s);
  EXPECT_TRUE(left.empty()) << left.size() << " processes outlived the killed front-end by 5 s";
}

TEST_F(Cli, AttachModeRunsTheDemoWithBackendsStartedByTheUser) {
  const std::string file = "/tmp/canopy-cli-attach-" + std::to_string(getpid());
  std::remove(file.c_str());
  Output o;
  std::thread front_end([&] {
    o = run_canopy({"run", "--tree", "b:2^2", "--attach", file, "--waves", "5", "--interval", "1", "--format",
                    "jsonl"});
  });
  for (int i = 0; i < 100 && access(file.c_str(), R_OK) != 0; ++i) std::this_thread::sleep_for(100ms);
  ASSERT_EQ(access(file.c_str(), R_OK), 0) << "no attach file";
  const auto backends = canopy::testing::start_demo_backends(file, 4);
  front_end.join();
  ASSERT_EQ(backends.size(), 4u);
  EXPECT_EQ(exit_code(o), 0) << o.err;
  EXPECT_NE(o.out.find("\"attach_file\""), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("{\"stream\":1,\"wave\":4,\"values\":[16006],"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\"check\":\"ok\""), std::string::npos) << o.out;
  for (pid_t pid : backends) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_NE(access(file.c_str(), F_OK), 0) << "the attach file, which holds the secret, was left behind";
  std::remove(file.c_str());
}

// MRNet's attach mode: the leaves of the topology are the commnodes back-ends attach
// to. `fe => n1 n2` is a front-end and two commnodes, and --backends says how many
// back-ends will attach below them.
TEST_F(Cli, AnMrnetTopologyInAttachModeHasCommnodesForLeaves) {
  const std::string dir = "/tmp/canopy-cli-mrnet-attach-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string topology = dir + "/tree.top", file = dir + "/tool.attach";
  std::ofstream(topology) << "localhost:0 => localhost:1 localhost:2 ;\n";

  auto refused = run_canopy({"run", "--topology", topology, "--attach", file});
  EXPECT_EQ(exit_code(refused), 2) << refused.out;
  EXPECT_NE(refused.err.find("say how many back-ends will attach with --backends N"), std::string::npos) << refused.err;
  auto not_attach = run_canopy({"run", "--tree", "b:2", "--backends", "4"});
  EXPECT_EQ(exit_code(not_attach), 2);
  EXPECT_NE(not_attach.err.find("--backends is for attach mode"), std::string::npos) << not_attach.err;

  Output o;
  std::thread front_end([&] {
    o = run_canopy({"run", "--topology", topology, "--attach", file, "--backends", "4", "--waves", "3", "--interval",
                    "1"});
  });
  for (int i = 0; i < 100 && access(file.c_str(), R_OK) != 0; ++i) std::this_thread::sleep_for(100ms);
  std::vector<pid_t> backends;
  if (access(file.c_str(), R_OK) == 0) backends = canopy::testing::start_demo_backends(file, 4);
  front_end.join();
  for (pid_t pid : backends) waitpid(pid, nullptr, 0);
  std::filesystem::remove_all(dir);
  ASSERT_EQ(backends.size(), 4u) << "no attach file: " << o.err;
  EXPECT_EQ(exit_code(o), 0) << o.err;
  EXPECT_NE(o.out.find("launched 2 commnodes in "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("is waiting for 4 back-ends"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("wave 2: 8006 (4 back-ends)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("check: ok"), std::string::npos) << o.out;
}

TEST_F(Cli, PluginFilterIsLoadedFromTheCommandLine) {
  auto o = run_canopy({"run", "--tree", "b:2", "--filter", "scale", "--plugin", CANOPY_SCALE_FILTER, "--waves", "2"});
  EXPECT_EQ(exit_code(o), 0) << o.err;
  EXPECT_NE(o.out.find("wave 1: 2001 (2 back-ends)"), std::string::npos) << o.out;
  auto missing = run_canopy({"run", "--tree", "b:2", "--filter", "scale"});
  EXPECT_EQ(exit_code(missing), 2);
  EXPECT_NE(missing.err.find("give --plugin FILE"), std::string::npos) << missing.err;
}

// --links striped on one loopback NIC: every link striped and checksummed, a fifth
// of the fragments corrupted (--corrupt), and every wave's sum still right. The
// processes' logs (CANOPY_LOG_DIR) show that the options took effect: striped links
// closed having injected corruption and caught it.
TEST_F(Cli, StripedLinksWithInjectedCorruptionGiveTheRightSums) {
  char dir[] = "/tmp/canopy-cli-striped-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  setenv("CANOPY_LOG_DIR", dir, 1);
  auto o = run_canopy({"run", "--tree", "b:2^2", "--waves", "50", "--interval", "1", "--links", "striped",
                       "--checksum", "additive", "--corrupt", "0.2"});
  unsetenv("CANOPY_LOG_DIR");
  ASSERT_EQ(exit_code(o), 0) << o.err;
  EXPECT_NE(o.out.find("50 waves of sum over 4 back-ends"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("check: ok"), std::string::npos) << o.out;
  // Each striped link logs, when it closes, "... N checksum failures caught, M
  // corruptions injected, ...": plain links log no such line.
  std::size_t striped_links = 0, caught = 0, injected = 0;
  auto number_before = [](const std::string& line, const std::string& what) -> std::size_t {
    auto at = line.find(what);
    if (at == std::string::npos) return 0;
    return std::stoul(line.substr(line.rfind(", ", at) + 2));
  };
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream log(entry.path());
    std::string text((std::istreambuf_iterator<char>(log)), {});
    for (const auto& line : lines_with(text, " corruptions injected")) {
      ++striped_links;
      caught += number_before(line, " checksum failures caught");
      injected += number_before(line, " corruptions injected");
    }
  }
  EXPECT_GT(striped_links, 0u) << "no striped link logged its close in " << dir << ": --links striped ignored?";
  EXPECT_GT(injected, 0u) << "no fragment was corrupted: --corrupt ignored?";
  EXPECT_GT(caught, 0u) << "no corrupt fragment was caught by a checksum";
  if (HasFailure()) {
    std::cerr << "the processes' logs are kept in " << dir << "\n";
  } else {
    std::filesystem::remove_all(dir);
  }

  // Refused by the command-line parser, before anything starts.
  auto bad = run_canopy({"run", "--corrupt", "0.9"});
  EXPECT_EQ(exit_code(bad), 2);
  EXPECT_NE(bad.err.find("--corrupt"), std::string::npos) << bad.err;
  auto kind = run_canopy({"run", "--links", "fast"});
  EXPECT_EQ(exit_code(kind), 2);
  EXPECT_NE(kind.err.find("--links"), std::string::npos) << kind.err;
}

// A back-end killed under the union workload leaves the membership view: the run
// reports the view change, stops waiting for that back-end, and checks the union
// against everything the survivors sent and what the victim recorded more than a
// second before its failure was known.
TEST_F(Cli, UnionRunGoesOnWithoutAKilledBackEnd) {
  UnionRunWithAKill run("jsonl", 1);
  ASSERT_TRUE(run.killed) << "back-end 1 was not found running";
  const auto& o = run.output;
  ASSERT_EQ(exit_code(o), 0) << o.err << o.out;
  EXPECT_LT(run.took, 20s) << "the run waited for the killed back-end";
  EXPECT_EQ(lines_with(o.out, "{\"event\":\"failure\",\"rank\":1,").size(), 1u) << o.out;
  auto views = lines_with(o.out, "\"event\":\"view\"");
  ASSERT_EQ(views.size(), 1u) << o.out;
  EXPECT_NE(views[0].find("\"view\":1,\"members\":3,\"left\":[1],\"joined\":[]"), std::string::npos) << views[0];
  auto summary = lines_with(o.out, "{\"summary\":");
  ASSERT_EQ(summary.size(), 1u) << o.out;
  EXPECT_NE(summary[0].find("\"missing\":0,\"extra\":0,\"failed_backends\":1,\"late_values\":"), std::string::npos)
      << summary[0];
  EXPECT_NE(summary[0].find("\"check\":\"ok\""), std::string::npos) << summary[0];
  // The victim sent for about 1.5 s of the survivors' 4 s.
  EXPECT_LT(line_count(run.record_dir + "/be-1.txt"), line_count(run.record_dir + "/be-0.txt"));
  EXPECT_GT(line_count(run.record_dir + "/frontend.txt"), 0u);
  // canopy status shows the membership: the victim left the view at epoch 1.
  auto status = run_canopy({"status", run.record_dir + "/status.json"});
  ASSERT_EQ(exit_code(status), 0) << status.err;
  EXPECT_NE(status.out.find("backend 1 on localhost: lost, not a member of the view (epoch 1)"), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("; membership view 1: 3 members"), std::string::npos) << status.out;
}

// --record on a full disk (issue 45): the run said "the union differs: 11753 extra"
// with no word of the disk, for the back-ends went on sending the integers they
// could not record. Now each back-end names its file and the reason, sends no
// integer it could not record, and the run says which back-ends stopped recording and
// how much room the file system has, with a check that is exact over what was
// recorded. The disk is a 16 KiB tmpfs in a mount namespace of the run's own.
TEST_F(Cli, ARecordOnAFullDiskIsNamedAndEndsThatBackEndsIntegers) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root (CI runs as root)";
  char dir[] = "/tmp/canopy-cli-full-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string record = dir;
  const std::string err = record + ".err";
  // 4 back-ends, 300 lines of about 20 bytes each: 8 pages wanted, 4 there.
  const auto [out, status] = canopy::testing::shell("unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=16k "
                                   "canopy-full " + record + " && exec " + kCanopy +
                                   " run --tree b:2^2 --workload union --rate 100 --duration 3 --record " + record +
                                   " --format jsonl' 2>" + err);
  const std::string errors = canopy::testing::slurp(err);
  std::filesystem::remove(err);
  std::filesystem::remove_all(record);
  EXPECT_EQ(status, 1) << out << errors;
  EXPECT_NE(errors.find(": cannot write " + record + "/be-"), std::string::npos) << errors;
  EXPECT_NE(errors.find(".txt: No space left on device; recording stops here"), std::string::npos) << errors;
  auto summary = lines_with(out, "{\"summary\":");
  ASSERT_EQ(summary.size(), 1u) << out << errors;
  EXPECT_NE(summary[0].find("\"missing\":0,\"extra\":0,"), std::string::npos) << summary[0];
  EXPECT_NE(summary[0].find("\"check\":\"ok\""), std::string::npos) << summary[0];
  EXPECT_NE(summary[0].find("\"record_error\":\"cannot write " + record + "/frontend.txt: No space left on device; "
                            "back-end(s) ["),
            std::string::npos)
      << summary[0];
  EXPECT_NE(summary[0].find("could not write their record in " + record + " (its file system has "), std::string::npos)
      << summary[0];
}

// Records that fail at different points (issue 50's flake): a union back-end is one
// member of a wait-for-all stream, whose wave n closes once every back-end has sent
// its n-th packet. Back-ends that stopped sending at their first unrecorded integer
// sent fewer packets than the others, so the others' later waves, end markers with
// them, never closed: "back-ends [1] did not finish within 33 s". It failed now and
// then on the 16 KiB disk above (the back-ends' pages filled at about the same line);
// here it always would: back-end 1 records on a roomy disk through a symbolic link,
// the others on the full one.
TEST_F(Cli, BackEndsWhoseRecordsStopAtDifferentPointsAllFinish) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root (CI runs as root)";
  char dir[] = "/tmp/canopy-cli-full-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  char roomy[] = "/tmp/canopy-cli-roomy-XXXXXX";
  ASSERT_NE(mkdtemp(roomy), nullptr);
  const std::string record = dir;
  const std::string err = record + ".err";
  const std::string be1 = std::string(roomy) + "/be-1.txt";
  const auto [out, status] = canopy::testing::shell(
      "unshare --mount --propagation private sh -c 'mount -t tmpfs -o size=16k canopy-full " + record +
      " && ln -s " + be1 + " " + record + "/be-1.txt && exec " + kCanopy +
      " run --tree b:2^2 --workload union --rate 100 --duration 3 --record " + record + " --format jsonl' 2>" + err);
  const std::string errors = canopy::testing::slurp(err);
  const std::size_t be1_lines = line_count(be1);
  std::filesystem::remove(err);
  std::filesystem::remove_all(record);
  std::filesystem::remove_all(roomy);
  EXPECT_EQ(status, 1) << out << errors;
  EXPECT_EQ(errors.find("canopy-demo-backend 1: cannot write"), std::string::npos) << errors;
  EXPECT_GT(be1_lines, 250u) << "back-end 1 should have recorded all its 300 integers";
  auto summary = lines_with(out, "{\"summary\":");
  ASSERT_EQ(summary.size(), 1u) << out << errors;
  EXPECT_NE(summary[0].find("\"missing\":0,\"extra\":0,"), std::string::npos) << summary[0];
  EXPECT_NE(summary[0].find("\"check\":\"ok\""), std::string::npos) << summary[0];
  // Which of 0, 2 and 3 got a page more of the 16 KiB is up to the kernel.
  EXPECT_NE(summary[0].find("] could not write their record in " + record), std::string::npos) << summary[0];
}

// A back-end hangs (SIGSTOP) while the links' own detection is slow (--lost 30 s):
// the back-ends' gossip finds it (docs/gossip.md), a jsonl event says who found it,
// it leaves the view, and the run goes on and ends well without it.
TEST_F(Cli, GossipFindsAHungBackEndAndTheRunGoesOn) {
  UnionRunWithAKill run("jsonl", 1, SIGSTOP,
                        {"--gossip", "brr", "--gossip-period", "100", "--gossip-max-hangup", "200",
                         "--gossip-ping-timeout", "500", "--suspect", "20000", "--lost", "30000"});
  ASSERT_TRUE(run.killed) << "back-end 1 was not found running";
  const auto& o = run.output;
  ASSERT_EQ(exit_code(o), 0) << o.err << o.out;
  EXPECT_LT(run.took, 20s) << "the run waited for the links' detection (30 s)";
  auto gossip = lines_with(o.out, "{\"event\":\"gossip\",\"rank\":1,\"detector\":");
  ASSERT_GE(gossip.size(), 1u) << o.out;
  EXPECT_NE(gossip[0].find("\"silent_ms\":"), std::string::npos) << gossip[0];
  auto views = lines_with(o.out, "\"event\":\"view\"");
  ASSERT_EQ(views.size(), 1u) << o.out;
  EXPECT_NE(views[0].find("\"left\":[1]"), std::string::npos) << views[0];
  auto summary = lines_with(o.out, "{\"summary\":");
  ASSERT_EQ(summary.size(), 1u) << o.out;
  EXPECT_NE(summary[0].find("\"check\":\"ok\""), std::string::npos) << summary[0];
}

// The demo workload checks every wave against the back-ends of the view it arrived
// in: after a back-end is killed, the sums of the others are right.
TEST_F(Cli, DemoRunChecksWavesAgainstTheViewTheyCameIn) {
  Output o;
  std::thread front_end([&] {
    o = run_canopy({"run", "--tree", "b:2^2", "--filter", "sum", "--waves", "120", "--interval", "25", "--format",
                    "jsonl"});
  });
  pid_t victim = 0;
  for (int i = 0; i < 200 && victim <= 0; ++i) {
    std::this_thread::sleep_for(20ms);
    victim = ProcessGuard::process_of_rank(3);
  }
  std::this_thread::sleep_for(1s);
  const bool killed = victim > 0 && kill(victim, SIGKILL) == 0;
  front_end.join();
  ASSERT_TRUE(killed) << "back-end 3 was not found running";
  ASSERT_EQ(exit_code(o), 0) << o.err << o.out;
  auto views = lines_with(o.out, "\"event\":\"view\"");
  ASSERT_EQ(views.size(), 1u) << o.out;
  EXPECT_NE(views[0].find("\"left\":[3]"), std::string::npos) << views[0];
  EXPECT_EQ(lines_with(o.out, "\"check\":\"ok\"").size(), 1u) << o.out;
}

TEST_F(Cli, UnionRunPrintsTheViewChangeAsText) {
  UnionRunWithAKill run("text", 2);
  ASSERT_TRUE(run.killed) << "back-end 2 was not found running";
  const auto& o = run.output;
  ASSERT_EQ(exit_code(o), 0) << o.err << o.out;
  EXPECT_EQ(lines_with(o.out, "event: failure of 2: ").size(), 1u) << o.out;
  EXPECT_EQ(lines_with(o.out, "event: view 1: 3 members, left [2], joined [], stabilised in ").size(), 1u) << o.out;
  EXPECT_EQ(lines_with(o.out, " 0 missing, 0 extra); 1 failed back-end(s) [2]: ").size(), 1u) << o.out;
  EXPECT_NE(o.out.find("check: ok ("), std::string::npos) << o.out;
}

// A failure is printed when the front-end hears of it, not when the next packet
// comes: here no packet comes for a minute after the kill.
TEST_F(Cli, ABackEndLostBetweenSlowWavesIsPrintedBeforeTheNextWave) {
  LiveRun run(slow_demo_run("text"));
  ASSERT_TRUE(run.wait_for("wave 0:", 20s)) << run.output();
  pid_t victim = ProcessGuard::process_of_rank(2);
  ASSERT_GT(victim, 0) << "back-end 2 was not found running";
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  EXPECT_TRUE(run.wait_for("event: failure of 2: ", 30s)) << run.output();
  EXPECT_TRUE(run.wait_for("event: view 1: 3 members, left [2]", 30s)) << run.output();
  EXPECT_EQ(run.output().find("wave 1:"), std::string::npos) << "the events came with a packet:\n" << run.output();
  EXPECT_EQ(run.stop(30s), 130) << run.output();
}

// The demo's sum filter is not state recoverable, yet a commnode lost between two
// waves costs none (none was in flight): the adoption is printed as it happens, no
// error, and the run goes on (issue 44; it used to end with "may have lost data").
TEST_F(Cli, ACommnodeLostBetweenSlowWavesIsPrintedAndTheRunGoesOn) {
  LiveRun run(slow_demo_run("jsonl"));
  ASSERT_TRUE(run.wait_for("{\"stream\":1,\"wave\":0,", 20s)) << run.output();
  pid_t victim = ProcessGuard::process_of_rank(1000001);  // the parent of back-ends 0 and 1
  ASSERT_GT(victim, 0) << "commnode 1000001 was not found running";
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_TRUE(run.wait_for("{\"event\":\"recovered\",\"rank\":1,", 30s)) << run.output();
  ASSERT_TRUE(run.wait_for("{\"event\":\"recovered\",\"rank\":0,", 30s)) << run.output();
  const auto out = run.output();
  EXPECT_NE(out.find("\"adopter\":1000002,"), std::string::npos) << out;
  EXPECT_EQ(out.find("{\"error\":"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"wave\":1,"), std::string::npos) << "the events came with a packet:\n" << out;
  EXPECT_EQ(run.stop(30s), 130) << run.output();
}

// Issue 17, item 3: a back-end that is a wrapper script leaves a command of its own
// running (here `sleep`, holding canopy's standard output). Each launched child
// runs in a process group of its own, which ends with it: the run's output reaches
// its end of file as soon as canopy exits, and nothing is left (before, `canopy run
// ... | head` waited for the stray to exit: 10 minutes in the report).
TEST_F(Cli, AWrapperScriptsStrayCommandsEndWithItsBackend) {
  char dir_template[] = "/tmp/canopy-wrapper-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string script = std::string(dir_template) + "/backend.sh";
  {
    std::ofstream out(script);
    out << "#!/bin/sh\nsleep 600 &\nexec " << CANOPY_BIN_DIR << "/canopy-demo-backend \"$@\"\n";
  }
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<std::string> args = {kCanopy, "run", "--tree", "b:2^2", "--waves", "3", "--backend", script};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, kCanopy.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  // Read to the end of file, for at most 60 s (the run takes about a second).
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  bool eof = false;
  while (!eof && std::chrono::steady_clock::now() < deadline) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) eof = true;
    else output.append(buffer, static_cast<std::size_t>(n));
  }
  close(pipe_fds[0]);
  int status = -1;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(eof) << "canopy's output was still held open 60 s later (a stray of the wrapper script)";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("3 waves of sum over 4 back-ends"), std::string::npos) << output;
  std::filesystem::remove_all(dir_template);
  // TearDown: nothing left, `sleep` included.
}
