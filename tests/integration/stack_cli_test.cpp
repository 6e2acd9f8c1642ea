// canopy stack on real mpirun jobs (docs/stack.md): the merged tree of a job that
// hangs on purpose (examples/mpi_hang), the launch form, the output formats, bad
// input, and a daemon killed while it holds ranks under ptrace.
#include <signal.h>
#include <fcntl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process_guard.h"
#include "run_canopy.h"

using namespace std::chrono_literals;
using canopy::testing::exit_code;
using canopy::testing::kCanopy;
using canopy::testing::Output;
using canopy::testing::ProcessGuard;
using canopy::testing::run_canopy;

namespace {

const std::string kHang = CANOPY_MPI_HANG;
const std::string kMpiexec = CANOPY_MPIEXEC;
// MPICH's launcher and mpi_hang built against MPICH; "" where not installed.
const std::string kMpiexecHydra = CANOPY_MPIEXEC_HYDRA;
const std::string kHangMpich = CANOPY_MPI_HANG_MPICH;

pid_t spawn(std::vector<std::string> args, const std::string& output = "/dev/null") {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// `args` started in a process group of its own (its pid), its output discarded.
pid_t spawn_in_group(std::vector<std::string> args) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first
  return pid;
}

// At the end of a scope, SIGKILL to the process group of a job's launcher (its
// proxies and ranks, in sessions of their own, are left to the fixture's sweep).
struct KillGroupAtEnd {
  pid_t group;
  ~KillGroupAtEnd() { ::kill(-group, SIGKILL); }
};

// "mpirun -np N mpi_hang 120" as a command line.
std::vector<std::string> hang_job(int ranks) {
  return {kMpiexec, "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks), kHang, "120"};
}

// The job's ranks: descendants running mpi_hang.
std::vector<pid_t> ranks_of_job() {
  std::vector<pid_t> out;
  for (pid_t pid : ProcessGuard::descendants()) {
    if (ProcessGuard::name_of(pid) == "mpi_hang") out.push_back(pid);
  }
  return out;
}

// The ranks of a hydra job of mpi_hang_mpich: descendants with PMI_RANK in their
// environment (before their exec they are copies of their proxy, without it).
std::vector<pid_t> hydra_ranks_of_job() {
  std::vector<pid_t> out;
  for (pid_t pid : ProcessGuard::descendants()) {
    if (ProcessGuard::name_of(pid) != "mpi_hang_mpich") continue;
    // By getline: a rank that exits meanwhile fails the read (ESRCH), which an
    // istreambuf_iterator would throw out of.
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
    for (std::string var; std::getline(in, var, '\0');) {
      if (var.rfind("PMI_RANK=", 0) == 0) {
        out.push_back(pid);
        break;
      }
    }
  }
  return out;
}

// `text` as dot writes it in SVG: '-' as "&#45;", '\'' as "&#39;".
std::string svg_text(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '-' ? std::string("&#45;") : c == '\'' ? std::string("&#39;") : std::string(1, c);
  return out;
}

// The <g class="node"> element of an SVG drawn by dot whose text holds `label`, or "".
std::string svg_node(const std::string& svg, const std::string& label) {
  const auto text = svg.find(">" + label + "</text>");
  if (text == std::string::npos) return "";
  const auto begin = svg.rfind("<g id=\"node", text);
  const auto end = svg.find("</g>", text);
  if (begin == std::string::npos || end == std::string::npos) return "";
  return svg.substr(begin, end - begin);
}

// Every rank runs on, neither traced nor stopped.
void expect_running_untraced(const std::vector<pid_t>& ranks) {
  for (pid_t pid : ranks) {
    EXPECT_EQ(kill(pid, 0), 0) << "rank process " << pid << " is gone";
    EXPECT_EQ(ProcessGuard::status_field(pid, "TracerPid"), "0") << "rank process " << pid << " is still traced";
    const auto state = ProcessGuard::status_field(pid, "State");
    EXPECT_TRUE(state.rfind("R", 0) == 0 || state.rfind("S", 0) == 0) << "rank process " << pid << ": " << state;
  }
}

// Until no rank of the job of `launcher` is in MPI_Init (at most 60 s: seconds on a
// loaded machine), then a second for them to reach where they hang.
void wait_past_mpi_init(pid_t launcher) {
  for (const auto until = std::chrono::steady_clock::now() + 60s;
       run_canopy({"stack", "--mpirun", std::to_string(launcher)}).out.find("MPI_Init") != std::string::npos &&
       std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(200ms);
  }
  std::this_thread::sleep_for(1s);
}

// canopy stack --mpirun PID ARGS..., once the job's ranks are up (the process
// table is empty until every rank has called MPI_Init; at most 30 s) and have had a
// second to reach where they hang.
Output stack_of(pid_t mpirun, std::vector<std::string> args) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (run_canopy({"stack", "--mpirun", std::to_string(mpirun)}).err.find("MPI_Init") != std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(200ms);
  }
  std::this_thread::sleep_for(1s);
  args.insert(args.begin(), {"stack", "--mpirun", std::to_string(mpirun)});
  return run_canopy(args);
}

// Where Open MPI 4 keeps the files of the job that `mpirun` leads: its session
// directory, and the shared-memory segments of its ranks (/dev/shm/vader_segment.
// HOST.UID.JOBID.RANK, JOBID in hex, the job family of contact.txt plus one).
struct OpenMpiFiles {
  std::filesystem::path session;
  std::string segment_infix;  // ".JOBID." once the job is known, else ""

  explicit OpenMpiFiles(pid_t mpirun) {
    utsname host{};
    uname(&host);
    const char* tmp = std::getenv("TMPDIR");
    session = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") /
              ("ompi." + std::string(host.nodename) + "." + std::to_string(getuid())) /
              ("pid." + std::to_string(mpirun));
  }
  // Reads the job's id once contact.txt is there; false until then.
  bool read_job() {
    std::ifstream contact(session / "contact.txt");
    unsigned long family = 0;
    if (!(contact >> family)) return false;
    std::ostringstream hex;
    hex << "." << std::hex << family + 1 << ".";
    segment_infix = hex.str();
    return true;
  }
  std::vector<std::string> segments() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
      const auto name = entry.path().filename().string();
      if (name.rfind("vader_segment.", 0) == 0 && name.find(segment_infix) != std::string::npos) out.push_back(name);
    }
    return out;
  }
};

class StackCli : public ::testing::Test {
 protected:
  void TearDown() override {
    guard_.kill_all();
    EXPECT_TRUE(ProcessGuard::wait_for_none(10s).empty()) << "processes left after the test";
  }
  ProcessGuard guard_;
};

// Ending a test's job leaves none of Open MPI's files. Jobs used to be killed
// outright, and each left its session directory in /tmp and its ranks' segments in
// /dev/shm: CI's disk filled up.
TEST_F(StackCli, EndingAJobLeavesNoneOfOpenMpisFiles) {
  const pid_t mpirun = spawn(hang_job(2));
  OpenMpiFiles files(mpirun);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((!files.read_job() || ranks_of_job().size() < 2 || files.segments().size() < 2) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(std::filesystem::exists(files.session)) << files.session;
  ASSERT_EQ(files.segments().size(), 2u) << "no shared-memory segment per rank named *" << files.segment_infix << "*";
  guard_.kill_all();
  EXPECT_FALSE(std::filesystem::exists(files.session)) << files.session << " is left";
  EXPECT_EQ(files.segments(), std::vector<std::string>{}) << "segments are left";
  std::filesystem::remove_all(files.session);  // not to leave them when the test fails
  for (const auto& name : files.segments()) std::filesystem::remove("/dev/shm/" + name);
}

TEST_F(StackCli, AHungJobShowsItsTwoClassesAndRunsOnUnharmed) {
  const pid_t mpirun = spawn(hang_job(8));
  auto out = stack_of(mpirun, {});
  ASSERT_EQ(exit_code(out), 0) << out.err;
  // The launcher is named as it runs: mpiexec here, mpirun when started so.
  EXPECT_NE(out.out.find("Stack traces of 8 ranks on 1 host (" + ProcessGuard::name_of(mpirun) + " " +
                         std::to_string(mpirun) + ", 1 sample)"),
            std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("2 classes of 8 ranks:\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("  7 ranks [0-2,4-7]: MPI_Barrier \u2190 main\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\u2190 compute \u2190 solve \u2190 main\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("  1 rank [3]: "), std::string::npos) << out.out;

  // The tool has detached: the ranks run on, and a second look sees the same.
  const auto ranks = ranks_of_job();
  ASSERT_EQ(ranks.size(), 8u);
  expect_running_untraced(ranks);
  auto again = run_canopy({"stack", "--mpirun", std::to_string(mpirun)});
  EXPECT_EQ(exit_code(again), 0) << again.err;
  EXPECT_NE(again.out.find("  7 ranks [0-2,4-7]: MPI_Barrier \u2190 main\n"), std::string::npos) << again.out;
  // Nothing of the tool is left: only mpirun and its ranks.
  for (pid_t pid : ProcessGuard::descendants()) {
    const std::string name = ProcessGuard::name_of(pid);
    EXPECT_TRUE(name == "mpi_hang" || name == "mpirun" || pid == mpirun) << "left behind: " << pid << " " << name;
  }
}

TEST_F(StackCli, TheLaunchFormStartsTheJobAndLeavesItRunning) {
  const std::string cmd = kMpiexec + " --allow-run-as-root --oversubscribe -np 4 " + kHang + " 120";
  auto out = run_canopy({"stack", "--mpirun-cmd", cmd, "--after", "1000"});
  ASSERT_EQ(exit_code(out), 0) << out.err;
  EXPECT_NE(out.out.find("Stack traces of 4 ranks on 1 host"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\nmain [0-3]\n"), std::string::npos) << out.out;
  // "started the job: mpiexec pid PID": the launcher named as it runs.
  const std::string started = "started the job: " + std::filesystem::path(kMpiexec).filename().string() + " pid ";
  const auto at = out.err.find(started);
  ASSERT_NE(at, std::string::npos) << out.err;
  const pid_t mpirun = std::stoi(out.err.substr(at + started.size()));
  EXPECT_EQ(kill(mpirun, 0), 0) << "the job did not go on";
  // Where the ranks are a second after the start depends on how long MPI_Init takes
  // (seconds on a loaded machine: in 1 of 20 runs under stress-ng two ranks were still
  // in it). The job runs on: once none is, a look finds the hang.
  wait_past_mpi_init(mpirun);
  auto hung = run_canopy({"stack", "--mpirun", std::to_string(mpirun)});
  ASSERT_EQ(exit_code(hung), 0) << hung.err;
  EXPECT_NE(hung.out.find("  3 ranks [0-2]: MPI_Barrier \u2190 main\n"), std::string::npos) << hung.out;
  EXPECT_NE(hung.out.find("\u2190 compute \u2190 solve \u2190 main\n"), std::string::npos) << hung.out;
  const auto ranks = ranks_of_job();
  EXPECT_EQ(ranks.size(), 4u);
  expect_running_untraced(ranks);
}

TEST_F(StackCli, JsonDotSvgAndEveryThread) {
  const pid_t mpirun = spawn(hang_job(4));
  auto json = stack_of(mpirun, {"--format", "json"});
  ASSERT_EQ(exit_code(json), 0) << json.err;
  EXPECT_EQ(json.out.rfind("{\"mpirun\":" + std::to_string(mpirun) + ",\"hosts\":1,\"samples\":1,\"missing\":\"\","
                           "\"ranks\":\"0-3\",\"count\":4,",
                           0),
            0u)
      << json.out;
  EXPECT_NE(json.out.find("{\"ranks\":\"0-2\",\"count\":3,\"path\":["), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"main\",\"MPI_Barrier\"]}"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"main\",\"solve\",\"compute\""), std::string::npos) << json.out;

  // A rank's PID given for the launcher's: said so, naming the launcher to give (issue
  // 50: it said the table was empty and to "use wait_for_proctable", no option).
  const auto ranks = ranks_of_job();
  ASSERT_FALSE(ranks.empty());
  auto rank = run_canopy({"stack", "--mpirun", std::to_string(ranks.front())});
  EXPECT_EQ(exit_code(rank), 1);
  EXPECT_NE(rank.err.find("process " + std::to_string(ranks.front())), std::string::npos) << rank.err;
  EXPECT_NE(rank.err.find("of an MPI job, not its launcher: give the launcher"), std::string::npos) << rank.err;
  EXPECT_NE(rank.err.find("canopy stack --mpirun " + std::to_string(mpirun)), std::string::npos) << rank.err;
  EXPECT_EQ(rank.err.find("wait_for_proctable"), std::string::npos) << rank.err;

  auto dot = run_canopy({"stack", "--mpirun", std::to_string(mpirun), "--format", "dot"});
  ASSERT_EQ(exit_code(dot), 0) << dot.err;
  EXPECT_EQ(dot.out.rfind("digraph", 0), 0u) << dot.out;
  EXPECT_NE(dot.out.find("MPI_Barrier"), std::string::npos) << dot.out;

  // Every thread: Open MPI's two event-loop threads are in every rank.
  auto threads = run_canopy({"stack", "--mpirun", std::to_string(mpirun), "--threads"});
  ASSERT_EQ(exit_code(threads), 0) << threads.err;
  // (Named start_thread and so on where libc's debug symbols are installed, libc.so.6+0x...
  // elsewhere: counted, not named.)
  std::size_t all_ranks = 0;
  for (auto at = threads.out.find("  4 ranks [0-3]: "); at != std::string::npos;
       at = threads.out.find("  4 ranks [0-3]: ", at + 1)) {
    ++all_ranks;
  }
  EXPECT_EQ(all_ranks, 2u) << threads.out;
  EXPECT_NE(threads.out.find("  3 ranks [0-2]: MPI_Barrier \u2190 main\n"), std::string::npos) << threads.out;

  const auto svg = std::filesystem::temp_directory_path() / ("canopy-stack-" + std::to_string(getpid()) + ".svg");
  auto drawn = run_canopy({"stack", "--mpirun", std::to_string(mpirun), "--format", "svg", "-o", svg.string()});
  ASSERT_EQ(exit_code(drawn), 0) << drawn.err;
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(svg);
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_NE(text.find("MPI_Barrier"), std::string::npos);
}

TEST_F(StackCli, BadInputGetsAClearMessage) {
  // Bad usage, found by canopy stack rather than by CLI11, is exit status 2 too.
  auto none = run_canopy({"stack"});
  EXPECT_EQ(exit_code(none), 2);
  EXPECT_NE(none.err.find("give --mpirun PID, --mpirun-cmd \"mpirun ... ./app\" or --slurm-job JOBID"), std::string::npos)
      << none.err;

  const pid_t sleeper = spawn({"sleep", "60"});
  // Until it has exec'd, the child is a copy of this test (its memory map, once,
  // was unreadable: "Exec format error").
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       ProcessGuard::name_of(sleeper) != "sleep" && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(ProcessGuard::name_of(sleeper), "sleep");
  auto not_mpi = run_canopy({"stack", "--mpirun", std::to_string(sleeper)});
  EXPECT_EQ(exit_code(not_mpi), 1);
  EXPECT_NE(not_mpi.err.find("is not an MPI launcher"), std::string::npos) << not_mpi.err;

  auto gone = run_canopy({"stack", "--mpirun", "4000000"});
  EXPECT_EQ(exit_code(gone), 1);
  EXPECT_NE(gone.err.find("no process 4000000"), std::string::npos) << gone.err;

  auto failed_job = run_canopy({"stack", "--mpirun-cmd", "sh -c 'exit 3'"});
  EXPECT_EQ(exit_code(failed_job), 1);
  EXPECT_NE(failed_job.err.find("the job exited with status 3 before its ranks were up"), std::string::npos)
      << failed_job.err;

  EXPECT_EQ(exit_code(run_canopy({"stack", "--mpirun", "1", "--format", "xml"})), 2);
  EXPECT_EQ(exit_code(run_canopy({"stack", "--mpirun", "1", "--mpirun-cmd", "x"})), 2);
  auto address = run_canopy({"stack", "--mpirun", "1", "--address", "nohost"});
  EXPECT_EQ(exit_code(address), 2);
  EXPECT_NE(address.err.find("--address nohost: expected HOST=ADDRESS"), std::string::npos) << address.err;
  for (const char* job : {"abc", "12.x", "12."}) {
    auto bad_job = run_canopy({"stack", "--slurm-job", job});
    EXPECT_EQ(exit_code(bad_job), 2) << job;
    EXPECT_NE(bad_job.err.find(std::string("--slurm-job ") + job + ": expected a job id, or JOB.STEP"), std::string::npos)
        << bad_job.err;
  }
}

// The launch form of a job whose ranks never call MPI_Init (not an MPI program): the
// table stays empty, canopy stack says so when --proctable-timeout passes, and ends
// the job it started: nothing is left.
TEST_F(StackCli, TheLaunchFormEndsAJobWhoseRanksNeverComeUp) {
  const std::string cmd = kMpiexec + " --allow-run-as-root --oversubscribe -np 2 sleep 60";
  auto out = run_canopy({"stack", "--mpirun-cmd", cmd, "--proctable-timeout", "1500"});
  EXPECT_EQ(exit_code(out), 1);
  EXPECT_NE(out.err.find("the job's ranks were not up within 1500 ms (--proctable-timeout)"), std::string::npos)
      << out.err;
  EXPECT_NE(out.err.find("MPI_Init"), std::string::npos) << out.err;
  EXPECT_NE(out.err.find(") was ended"), std::string::npos) << out.err;
  EXPECT_TRUE(ProcessGuard::wait_for_none(5s).empty()) << "the job outlived canopy stack";
}

// A daemon SIGKILLed while it holds a rank under ptrace: the kernel detaches the
// rank, which runs on; canopy stack says which daemon was lost, at once.
TEST_F(StackCli, ADaemonKilledWhileTracingLeavesTheRanksRunning) {
  const pid_t mpirun = spawn(hang_job(4));
  ASSERT_EQ(exit_code(stack_of(mpirun, {})), 0);
  const auto ranks = ranks_of_job();
  ASSERT_EQ(ranks.size(), 4u);

  const std::string err_file = "/tmp/canopy-stack-kill-" + std::to_string(getpid());
  const pid_t tool = spawn({kCanopy, "stack", "--mpirun", std::to_string(mpirun), "--samples", "1000", "--interval",
                            "0", "--timeout", "30000"},
                           err_file);
  // Wait until a daemon traces rank 0, then kill that daemon. TracerPid is read
  // without the kernel's ptrace lock: while a tracer detaches, it can show the
  // tracee's real parent for an instant (here mpirun, which this test once killed
  // instead, in CI on 2026-11-27: the tool then walked a dying job). So the tracer
  // counts only if it is a daemon.
  pid_t tracer = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (tracer == 0 && std::chrono::steady_clock::now() < deadline) {
    const auto seen = static_cast<pid_t>(std::atoi(ProcessGuard::status_field(ranks[0], "TracerPid").c_str()));
    if (seen > 0 && seen != mpirun && ProcessGuard::name_of(seen) == "canopy-stackd") tracer = seen;
  }
  ASSERT_NE(tracer, 0) << "no daemon ever traced rank 0";
  ASSERT_EQ(kill(tracer, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(tool, &status, 0), tool);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  int job_status = 0;
  EXPECT_EQ(waitpid(mpirun, &job_status, WNOHANG), 0) << "the job ended: status " << job_status;
  std::ifstream in(err_file);
  const std::string err((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(err_file);
  EXPECT_NE(err.find("no merged tree: the daemon on "), std::string::npos) << err;
  EXPECT_NE(err.find("killed by signal 9"), std::string::npos) << err;
  expect_running_untraced(ranks);
}

// A daemon that cannot run for seconds (here SIGSTOPped for 7 s, past the tree's
// default `lost` of 5 s; ranks spinning on an oversubscribed host delay wake-ups by
// seconds) is waited for, not declared lost: canopy stack's tree is patient.
TEST_F(StackCli, ADaemonHeldUpForSecondsIsWaitedFor) {
  const pid_t mpirun = spawn(hang_job(4));
  ASSERT_EQ(exit_code(stack_of(mpirun, {})), 0);
  const std::string out_file = "/tmp/canopy-stack-pause-" + std::to_string(getpid());
  const pid_t tool = spawn({kCanopy, "stack", "--mpirun", std::to_string(mpirun), "--samples", "20", "--interval",
                            "100", "--timeout", "60000"},
                           out_file);
  pid_t daemon = -1;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (daemon < 0 && std::chrono::steady_clock::now() < deadline) {
    for (pid_t pid : ProcessGuard::descendants()) {
      if (ProcessGuard::name_of(pid) == "canopy-stackd") daemon = pid;
    }
  }
  ASSERT_GT(daemon, 0) << "no canopy-stackd started";
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(kill(daemon, SIGSTOP), 0);
  std::this_thread::sleep_for(7s);
  ASSERT_EQ(kill(daemon, SIGCONT), 0);
  int status = 0;
  ASSERT_EQ(waitpid(tool, &status, 0), tool);
  std::ifstream in(out_file);
  const std::string out((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(out_file);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("  3 ranks [0-2]: MPI_Barrier \u2190 main\n"), std::string::npos) << out;
  expect_running_untraced(ranks_of_job());
}

// The SVG to hand on (issue 50): a title naming the job, when, and how many ranks and
// samples; a legend of the classes with their ranks; a colour per class, the
// outlier's its own, on its nodes and edges; the root is the job, not "/".
TEST_F(StackCli, TheSvgHasATitleALegendOfTheClassesAndAColourPerClass) {
  const pid_t mpirun = spawn(hang_job(4));
  const auto path = std::filesystem::temp_directory_path() / ("canopy-stack-title-" + std::to_string(getpid()) + ".svg");
  auto drawn = stack_of(mpirun, {"--format", "svg", "-o", path.string()});
  ASSERT_EQ(exit_code(drawn), 0) << drawn.err;
  std::ifstream in(path);
  const std::string svg((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  const std::string job = ProcessGuard::name_of(mpirun) + " " + std::to_string(mpirun);

  EXPECT_NE(svg.find(">Stack traces of 4 ranks on 1 host, 1 sample</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">" + svg_text(job + ": " + kMpiexec + " --allow-run-as-root --oversubscribe -np 4 ")),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find(">taken 20"), std::string::npos) << svg;
  EXPECT_NE(svg.find("ranks found through the launcher"), std::string::npos) << svg;

  EXPECT_NE(svg.find(">2 classes of 4 ranks (where the ranks stop)</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">3 ranks [0&#45;2]</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">1 rank [3]</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">MPI_Barrier \u2190 main</text>"), std::string::npos) << svg;
  // The swatches of the legend: blue for the three ranks, red for the outlier.
  EXPECT_NE(svg.find("<polygon fill=\"#1f77b4\" stroke=\"transparent\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("<polygon fill=\"#d62728\" stroke=\"transparent\""), std::string::npos) << svg;

  EXPECT_NE(svg_node(svg, job), "") << "the root is not the job: " << svg;
  EXPECT_EQ(svg.find(">/</text>"), std::string::npos) << svg;
  EXPECT_NE(svg_node(svg, "MPI_Barrier").find("stroke=\"#1f77b4\""), std::string::npos) << svg_node(svg, "MPI_Barrier");
  EXPECT_NE(svg_node(svg, "compute").find("stroke=\"#d62728\""), std::string::npos) << svg_node(svg, "compute");
  EXPECT_NE(svg_node(svg, "solve").find("stroke=\"#d62728\""), std::string::npos) << svg_node(svg, "solve");
  EXPECT_NE(svg_node(svg, "main").find("stroke=\"#606060\""), std::string::npos) << svg_node(svg, "main");
  // The edges into the outlier's frames are red too, labelled with its rank.
  EXPECT_NE(svg.find("<path fill=\"none\" stroke=\"#d62728\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("fill=\"#d62728\">1:[3]</text>"), std::string::npos) << svg;
}

// The C runtime's frames above main (_start, __libc_start_main, ...) are folded
// away: the tree starts at main. --full keeps them.
TEST_F(StackCli, StartUpFramesAreFoldedAwayUnlessFullIsGiven) {
  const pid_t mpirun = spawn(hang_job(4));
  auto folded = stack_of(mpirun, {});
  ASSERT_EQ(exit_code(folded), 0) << folded.err;
  EXPECT_NE(folded.out.find(":\n\nmain [0-3]\n  MPI_Barrier [0-2]\n"), std::string::npos) << folded.out;
  EXPECT_EQ(folded.out.find("_start"), std::string::npos) << folded.out;
  EXPECT_EQ(folded.out.find("libc"), std::string::npos) << folded.out;

  auto full = run_canopy({"stack", "--mpirun", std::to_string(mpirun), "--full"});
  ASSERT_EQ(exit_code(full), 0) << full.err;
  EXPECT_NE(full.out.find(":\n\n_start [0-3]\n"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("  __libc_start_main"), std::string::npos) << full.out;
  EXPECT_NE(full.out.find("  main [0-3]\n"), std::string::npos) << full.out;
  // The classes read the same either way.
  EXPECT_NE(full.out.find("  3 ranks [0-2]: MPI_Barrier \u2190 main\n"), std::string::npos) << full.out;

  auto dot = run_canopy({"stack", "--mpirun", std::to_string(mpirun), "--format", "dot"});
  ASSERT_EQ(exit_code(dot), 0) << dot.err;
  EXPECT_EQ(dot.out.find("label=\"_start\""), std::string::npos) << dot.out;
  auto full_dot = run_canopy({"stack", "--mpirun", std::to_string(mpirun), "--format", "dot", "--full"});
  ASSERT_EQ(exit_code(full_dot), 0) << full_dot.err;
  EXPECT_NE(full_dot.out.find("label=\"_start\""), std::string::npos) << full_dot.out;
}

// MPICH's mpiexec.hydra (Debian's is stripped: no MPIR table to read) on a job of
// four ranks, rank 3 the outlier: the ranks are found as the children of its
// hydra_pmi_proxy with PMI_RANK, canopy stack says so, walks them and leaves them
// running.
TEST_F(StackCli, AnMpichJobIsFoundThroughHydrasProxiesAndPmiRank) {
  if (kMpiexecHydra.empty()) {
    GTEST_SKIP() << "mpiexec.hydra is not installed (Debian's mpich; scripts/setup.sh installs it): no MPICH job to "
                    "walk";
  }
  ASSERT_FALSE(kHangMpich.empty()) << "mpiexec.hydra is installed but mpicc.mpich is not (libmpich-dev): run "
                                      "scripts/setup.sh and configure again";
  const pid_t hydra = spawn_in_group({kMpiexecHydra, "-n", "4", kHangMpich, "120"});
  KillGroupAtEnd end_job{hydra};
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (hydra_ranks_of_job().size() < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  const auto ranks = hydra_ranks_of_job();
  ASSERT_EQ(ranks.size(), 4u) << "the hydra job's ranks did not all start within 30 s";
  // A rank has PMI_RANK from its start, long before it is through MPI_Init (seconds
  // on a loaded machine): until none is in it, then a second to reach where they hang.
  wait_past_mpi_init(hydra);

  auto out = run_canopy({"stack", "--mpirun", std::to_string(hydra)});
  ASSERT_EQ(exit_code(out), 0) << out.err;
  EXPECT_NE(out.err.find("ranks found through hydra's proxies and PMI_RANK (no MPIR table)"), std::string::npos)
      << out.err;
  EXPECT_NE(out.out.find("Stack traces of 4 ranks on 1 host (" + ProcessGuard::name_of(hydra) + " " +
                         std::to_string(hydra) + ", 1 sample)"),
            std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("2 classes of 4 ranks:\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("  3 ranks [0-2]: MPI_Barrier \u2190 main\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("  1 rank [3]: "), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\u2190 compute \u2190 solve \u2190 main\n"), std::string::npos) << out.out;
  expect_running_untraced(ranks);

  // A rank's pid given for the launcher's: the message names mpiexec.hydra.
  auto rank = run_canopy({"stack", "--mpirun", std::to_string(ranks.front())});
  EXPECT_EQ(exit_code(rank), 1);
  EXPECT_NE(rank.err.find("canopy stack --mpirun " + std::to_string(hydra)), std::string::npos) << rank.err;
}

// The launch form with mpiexec.hydra: canopy stack waits until the proxy's ranks
// are all up, walks them, and leaves the job running.
TEST_F(StackCli, TheLaunchFormWaitsForAnMpichJobsRanks) {
  if (kMpiexecHydra.empty()) {
    GTEST_SKIP() << "mpiexec.hydra is not installed (Debian's mpich; scripts/setup.sh installs it)";
  }
  ASSERT_FALSE(kHangMpich.empty()) << "mpicc.mpich is not installed (libmpich-dev): run scripts/setup.sh";
  auto out = run_canopy({"stack", "--mpirun-cmd", kMpiexecHydra + " -n 4 " + kHangMpich + " 120", "--after", "1000",
                         "--proctable-timeout", "30000"});
  const auto at = out.err.find("started the job: mpiexec.hydra pid ");
  ASSERT_NE(at, std::string::npos) << out.err;
  KillGroupAtEnd end_job{std::stoi(out.err.substr(at + 35))};  // canopy stack started it in a group of its own
  ASSERT_EQ(exit_code(out), 0) << out.err;
  // All four, each walked; where they are depends on how far MPICH's MPI_Init has got
  // (hydra has no MPIR breakpoint to say when every rank is through it).
  EXPECT_NE(out.out.find("Stack traces of 4 ranks on 1 host"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("\nmain [0-3]\n"), std::string::npos) << out.out;
  const auto ranks = hydra_ranks_of_job();
  EXPECT_EQ(ranks.size(), 4u);
  expect_running_untraced(ranks);
}

}  // namespace
