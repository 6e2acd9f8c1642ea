#include "services/bulk_launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/auth.h"
#include "core/log.h"
#include "core/parent_link.h"

namespace canopy::services {

using core::log;

BulkLaunch::BulkLaunch(core::ServiceContext& node, std::function<void(std::size_t, int)> on_step_exit)
    : node_(node), on_step_exit_(std::move(on_step_exit)) {
  const Topology& topology = *node.topology();
  std::vector<Rank> current{topology.root().rank};
  while (true) {
    std::vector<Rank> next, remote;
    for (Rank r : current) {
      for (Rank c : topology.at(r).children) {
        next.push_back(c);
        if (topology.at(c).host != topology.at(r).host) remote.push_back(c);
      }
    }
    if (next.empty()) break;
    levels_.push_back(std::move(remote));
    current = std::move(next);
  }
}

BulkLaunch::~BulkLaunch() {
  stop(std::chrono::seconds(2), std::chrono::seconds(3));
  steps_.clear();  // SIGKILL to whatever is left, reaped
  if (!dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

bool BulkLaunch::ready(std::size_t level, const std::map<Rank, std::uint16_t>& ports) const {
  const Topology& topology = *node_.topology();
  for (Rank r : this->level(level)) {
    if (!ports.count(*topology.at(r).parent)) return false;
  }
  return true;
}

Result<void> BulkLaunch::start(std::size_t level, const std::map<Rank, std::uint16_t>& ports) {
  const Topology& topology = *node_.topology();
  const core::LaunchPlan& plan = node_.plan();
  if (this->level(level).empty()) return {};
  if (dir_.empty()) {
    char dir[] = "/tmp/canopy-bulk-XXXXXX";
    if (!mkdtemp(dir)) return Error{std::string("cannot make a directory for the steps' host files: ") + std::strerror(errno)};
    dir_ = dir;
  }
  const bool mpirun = plan.bulk_tool == core::LaunchPlan::BulkTool::mpirun;
  const std::string hostfile = dir_ + "/level-" + std::to_string(level) + (mpirun ? ".ranks" : ".hosts");
  char network[17];
  std::snprintf(network, sizeof network, "%016" PRIx64, node_.identity().network_id);
  std::string table = core::to_hex(node_.identity().secret) + "\nnetwork " + network + "\n";
  {
    std::ofstream hosts(hostfile, std::ios::trunc);
    std::size_t task = 0;
    for (Rank r : this->level(level)) {
      const auto& n = topology.at(r);
      const auto& parent = topology.at(*n.parent);
      auto port = ports.find(parent.rank);
      if (port == ports.end()) return Error{"the port of " + node_.describe(parent.rank) + " is not known"};
      // srun: a host per line, in task order; mpirun: a rank file. Slot 0 for every
      // task of a host (tool processes are light: --oversubscribe, not bound).
      if (mpirun) hosts << "rank " << task << "=" << n.host << " slot=0\n";
      else hosts << n.host << "\n";
      ++task;
      // A striped link's description (CANOPY_PARENT_LINK) ends the line.
      const std::string link = core::parent_link_for(topology, n, parent, port->second);
      table += std::to_string(r) + " " + (n.role == Role::commnode ? "commnode" : "backend") + " " +
               topology.address_of(parent.host) + ":" + std::to_string(port->second) +
               (link.empty() ? "" : " " + link) + "\n";
    }
    if (!hosts.flush()) return Error{"cannot write " + hostfile};
  }
  const core::LaunchCommands& commands = plan.commands.get();
  const std::string task = std::filesystem::path(commands.commnode_exe).parent_path() / "canopy-bulk-task";
  const std::string ntasks = std::to_string(this->level(level).size());
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string input;
  if (mpirun) {
    // The table goes in the environment (-x): mpirun gives standard input to its
    // first process only. mpirun's environment is this process's to read alone, and
    // -x values travel in its launch message, not on the remote daemons' command lines.
    argv = {"mpirun", "--rankfile", hostfile, "--oversubscribe", "--bind-to", "none", "--enable-recovery",
            "-x", "CANOPY_BULK_TABLE"};
    // The logging settings a launcher's child is given too (srun passes the whole
    // environment on).
    for (const char* name : {"CANOPY_LOG_DIR", "CANOPY_LOG_LEVEL", "CANOPY_LOG_STDERR"}) {
      if (std::getenv(name)) argv.insert(argv.end(), {"-x", name});
    }
    argv.insert(argv.end(), {"-np", ntasks, task, commands.commnode_exe});
    env = {{"CANOPY_BULK_TABLE", table}};
  } else {
    // --overcommit: tool processes are light; a level may have more of them on a node
    // than the node has CPUs (a commnode's back-ends, say).
    argv = {"srun", "--overlap", "--overcommit", "--input=all", "--distribution=arbitrary", "--ntasks=" + ntasks,
            "--job-name=canopy-level-" + std::to_string(level), task, commands.commnode_exe};
    env = {{"SLURM_HOSTFILE", hostfile}};
    input = table;
  }
  argv.insert(argv.end(), commands.backend_argv.begin(), commands.backend_argv.end());
  auto step = core::ChildProcess::spawn(node_.io(), argv, env, input);
  if (!step) return Error{"cannot start the " + step_name(level) + ": " + step.error()};
  log().info("level {}: {} processes started by one {} (pid {})", level, this->level(level).size(),
             mpirun ? "mpirun" : "srun step", (*step)->pid());
  (*step)->watch([this, level](int status) {
    log().info("the {} {}", step_name(level), core::describe_wait_status(status));
    if (on_step_exit_) on_step_exit_(level, status);
  });
  steps_.push_back(std::move(*step));
  return {};
}

std::string BulkLaunch::step_name(std::size_t level) const {
  const bool mpirun = node_.plan().bulk_tool == core::LaunchPlan::BulkTool::mpirun;
  return std::string(mpirun ? "mpirun" : "srun step") + " of level " + std::to_string(level);
}

void BulkLaunch::ask_allocation_state(std::function<void(const std::string&)> done) {
  if (squeue_ && squeue_->running()) return;
  // The state comes back as the exit status: a pipe for its output would be one more
  // thing to read on the loop, for one word.
  // All states (-t all): by default squeue leaves out a job that has ended. A job it
  // no longer lists at all (its record purged) has ended too: GONE.
  static const std::vector<std::string> states{"RUNNING", "CONFIGURING", "SUSPENDED", "COMPLETING",
                                               "CANCELLED", "TIMEOUT",  "FAILED",     "NODE_FAIL",
                                               "PREEMPTED", "DEADLINE", "OUT_OF_MEMORY", "COMPLETED",
                                               "GONE"};
  std::string script =
      "state=$(squeue -h -j \"$SLURM_JOB_ID\" -t all -o %T 2>/dev/null) || exit 100; "
      "[ -n \"$state\" ] || exit " + std::to_string(states.size() - 1) + "; case \"$state\" in";
  for (std::size_t i = 0; i < states.size(); ++i) script += " " + states[i] + ") exit " + std::to_string(i) + ";;";
  script += " esac; exit 100";
  auto process = core::ChildProcess::spawn(node_.io(), {"/bin/sh", "-c", script}, {});
  if (!process) {
    log().warn("cannot ask squeue for the allocation's state: {}", process.error());
    return done("");
  }
  (*process)->watch([done = std::move(done)](int status) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
    done(code < static_cast<int>(states.size()) ? states[code] : std::string());
  });
  squeue_ = std::move(*process);
}

namespace {

// Whether `step` has exited (or is gone), asked without reaping it: the
// ChildProcess reaps its own.
bool has_exited(const core::ChildProcess& step) {
  if (!step.running()) return true;
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(step.pid()), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != 0;
}

}  // namespace

// Waits until every step has exited or `deadline` has passed.
void BulkLaunch::wait_for_steps(std::chrono::steady_clock::time_point deadline) const {
  for (const auto& step : steps_) {
    while (!has_exited(*step) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void BulkLaunch::stop(std::chrono::milliseconds settle, std::chrono::milliseconds grace) {
  // After an orderly shutdown the tasks are leaving: each step then ends by itself,
  // and Slurm records it as completed rather than cancelled.
  wait_for_steps(std::chrono::steady_clock::now() + settle);
  bool any = false;
  for (auto& step : steps_) {
    if (!has_exited(*step)) {
      step->kill(SIGTERM);  // srun ends its step (mpirun its job), and with it the tasks
      any = true;
    }
  }
  if (any) wait_for_steps(std::chrono::steady_clock::now() + grace);
}

}  // namespace canopy::services
