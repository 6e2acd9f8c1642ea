#include "stack_command.h"

#include "cli_checks.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "canopy/call_tree.h"
#include "canopy/frontend.h"
#include "core/process.h"
#include "programs.h"
#include "stack/job_ranks.h"
#include "stack/stopped_process.h"
#include "stack/protocol.h"
#include "stack/render.h"

extern char** environ;

namespace canopy::tools {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int fail(const std::string& message) {
  std::cerr << "canopy stack: " << message << "\n";
  return 1;
}

// Bad usage that CLI11 cannot see (a missing choice, a malformed value): exit status
// 2, as for CLI11's own (docs/stack.md).
int usage_error(const std::string& message) {
  fail(message);
  return 2;
}

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
  return name;
}

// The launch form: `command` run by /bin/sh in a process group of its own (a Ctrl-C
// meant for canopy stack does not reach the job), its standard output sent to our
// standard error so that ours holds only the tree.
Result<pid_t> start_job(const std::string& command) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  const std::string line = "exec " + command;
  const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Error{"cannot start the job: " + std::string(strerror(rc))};
  return pid;
}

// The launch form's ranks: looked for (stack::wait_for_job_ranks, in slices) until
// the job's ranks are up, failing at once if the job ends first.
Result<stack::JobRanks> job_ranks(pid_t job, milliseconds timeout, const stack::RemoteProxyLister& remote) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    int status = 0;
    if (waitpid(job, &status, WNOHANG) == job) {
      const std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                                : "was killed by signal " + std::to_string(WTERMSIG(status));
      return Error{"the job " + how + " before its ranks were up", ErrorKind::invalid_input};
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    auto ranks =
        stack::wait_for_job_ranks(job, this_host(), std::clamp(left, milliseconds(1), milliseconds(250)), remote);
    if (ranks) return ranks;
    if (Clock::now() >= deadline)
      return Error{"the job's ranks were not up within " + std::to_string(timeout.count()) +
                       " ms (--proctable-timeout): " + ranks.error(),
                   ranks.error_kind()};
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// The launch form's job, when its ranks did not come up: ended (SIGTERM to its
// launcher, which ends its ranks; SIGKILL to its process group after 5 s), so that
// canopy stack leaves nothing of what it started. Says so, for the error message.
std::string end_job(pid_t job) {
  int status = 0;
  if (waitpid(job, &status, WNOHANG) == job) return "";  // it ended by itself
  ::kill(job, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (waitpid(job, &status, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(-job, SIGKILL);
      waitpid(job, &status, 0);
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  return "; the job it started (launcher pid " + std::to_string(job) + ") was ended";
}

// What /bin/sh prints for `command` (standard error too), and its exit status.
std::pair<std::string, int> shell_output(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return {"", -1};
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof buffer, p)) out.append(buffer, n);
  const int status = pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// The ranks below one of hydra's proxies on another host: `canopy-stackd --list-hydra`
// run there through the launcher template (as a daemon is started), which prints
// "RANK SIZE PID EXE" for each (tools/canopy_stackd.cpp).
stack::RemoteProxyLister hydra_lister(const std::string& launcher_template) {
  return [launcher_template](const stack::RemoteProxy& proxy) -> Result<stack::HydraJob> {
    const auto argv = core::launcher_argv(launcher_template, proxy.host,
                                          {sibling_program("canopy-stackd"), "--list-hydra", proxy.control_port,
                                           proxy.proxy_id},
                                          {});
    auto [out, status] = shell_output(argv.back());
    if (status != 0) {
      while (!out.empty() && out.back() == '\n') out.pop_back();
      return Error{"canopy-stackd --list-hydra through `" + argv.back() + "` exited with status " +
                   std::to_string(status) + (out.empty() ? "" : ": " + out)};
    }
    stack::HydraJob job;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::uint32_t rank = 0, size = 0;
      pid_t pid = 0;
      std::string exe;
      if (!(words >> rank >> size >> pid >> exe)) continue;  // the launcher's own messages
      job.size = size;
      job.ranks.push_back({rank, proxy.host, exe, pid});
    }
    return job;
  };
}

// "JOB" or "JOB.STEP", as --slurm-job takes it.
struct SlurmJob {
  std::string job, step;  // step "": every step (there must be one with ranks)
  std::string describe() const { return step.empty() ? "Slurm job " + job : "Slurm job step " + job + "." + step; }
};

Result<SlurmJob> parse_slurm_job(const std::string& text) {
  const auto dot = text.find('.');
  SlurmJob j{text.substr(0, dot), dot == std::string::npos ? "" : text.substr(dot + 1)};
  auto number = [](const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; };
  if (!number(j.job) || (dot != std::string::npos && !number(j.step))) {
    return Error{"--slurm-job " + text + ": expected a job id, or JOB.STEP"};
  }
  return j;
}

// The ranks of a Slurm job, as STAT finds them without the launcher's MPIR: one
// task of an overlapping step on each node of the job lists the ranks there
// (canopy-stackd --list-slurm-job: the job's processes of another step, by their
// environment). Those of `step` alone when it is given; without it, a job with
// ranks in more than one step is refused, naming them.
Result<std::vector<stack::RankProcess>> slurm_proctable(const SlurmJob& slurm) {
  const std::string& job = slurm.job;
  auto [count, status] = shell_output("squeue -h -j " + job + " -o %D");
  if (status != 0 || count.empty() || count.find_first_not_of("0123456789\n") != std::string::npos) {
    return Error{"Slurm job " + job + " is not running (squeue: " + count.substr(0, count.find('\n')) + ")"};
  }
  count.erase(count.find_last_not_of('\n') + 1);
  auto [out, listed] = shell_output("srun --jobid=" + job + " --overlap --overcommit -N " + count +
                                    " --ntasks-per-node=1 " + sibling_program("canopy-stackd") +
                                    " --list-slurm-job " + job);
  if (listed != 0) return Error{"cannot list the ranks of Slurm job " + job + ": " + out};
  std::vector<stack::RankProcess> table;
  std::set<std::string> steps;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string host, step, exe;
    std::uint32_t rank = 0;
    pid_t pid = 0;
    if (!(words >> host >> step >> rank >> pid >> exe)) continue;  // srun's own messages
    steps.insert(step);
    if (slurm.step.empty() || step == slurm.step) table.push_back({rank, host, exe, pid});
  }
  std::string list;
  for (const auto& s : steps) list += (list.empty() ? "" : ", ") + job + "." + s;
  if (table.empty()) {
    return Error{slurm.describe() + " has no ranks running" +
                 (steps.empty() ? std::string(" (no process of another step)") : " (steps with ranks: " + list + ")")};
  }
  if (steps.size() > 1 && slurm.step.empty()) {
    return Error{"Slurm job " + job + " has ranks in several steps (" + list + "); walk one at a time: --slurm-job " +
                 job + "." + *steps.begin()};
  }
  std::sort(table.begin(), table.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return table;
}

// Where the daemons go: one per host of the job, in the order the hosts first appear
// in the process table; daemon i is back-end rank i.
struct Placement {
  std::vector<std::string> hosts;
  std::vector<stack::Target> targets;
};

Placement place(const std::vector<stack::RankProcess>& table) {
  Placement p;
  std::map<std::string, Rank> daemon_of;
  for (const auto& process : table) {
    auto [it, fresh] = daemon_of.try_emplace(process.host, static_cast<Rank>(p.hosts.size()));
    if (fresh) p.hosts.push_back(process.host);
    p.targets.push_back({it->second, process.rank, static_cast<std::int32_t>(process.pid)});
  }
  return p;
}

// The tree: the front-end here, the daemons below it, or below commnodes of `fanout`
// daemons each (on the host of their first daemon) when there are more hosts.
Result<Topology> stack_topology(const std::vector<std::string>& hosts, const std::string& me, unsigned fanout,
                                const std::map<std::string, std::string>& addresses) {
  const std::size_t h = hosts.size();
  if (h > std::size_t{fanout} * fanout)
    return Error{std::to_string(h) + " hosts are more than --fanout " + std::to_string(fanout) +
                     " squared: give a larger --fanout",
                 ErrorKind::invalid_input};
  std::vector<TopologyNode> nodes;
  nodes.push_back({.rank = kFirstInternalRank, .role = Role::frontend, .host = me});
  const bool commnodes = h > fanout;
  const std::size_t groups = commnodes ? (h + fanout - 1) / fanout : 0;
  for (std::size_t g = 0; g < groups; ++g) {
    const Rank rank = kFirstInternalRank + 1 + static_cast<Rank>(g);
    nodes.push_back({.rank = rank, .role = Role::commnode, .host = hosts[g * fanout], .parent = kFirstInternalRank});
    nodes.front().children.push_back(rank);
  }
  for (std::size_t i = 0; i < h; ++i) {
    const std::size_t parent_index = commnodes ? 1 + i / fanout : 0;
    nodes.push_back({.rank = static_cast<Rank>(i), .role = Role::backend, .host = hosts[i],
                     .parent = nodes[parent_index].rank});
    nodes[parent_index].children.push_back(static_cast<Rank>(i));
  }
  // Processes of a job that is all on this host talk over loopback.
  const bool local = std::all_of(hosts.begin(), hosts.end(), [&](const std::string& host) { return host == me; });
  std::vector<Host> host_list;
  std::vector<std::string> named{me};
  named.insert(named.end(), hosts.begin(), hosts.end());
  for (const auto& name : named) {
    if (std::any_of(host_list.begin(), host_list.end(), [&](const Host& x) { return x.name == name; })) continue;
    Host host{.name = name};
    if (auto it = addresses.find(name); it != addresses.end()) {
      host.address = it->second;
    } else if (local) {
      host.address = "127.0.0.1";
    }
    host_list.push_back(host);
  }
  return Topology::make(std::move(nodes), std::move(host_list), "<canopy stack>");
}

// Runs graphviz's dot on `dot_text`, writing SVG to `output` (standard output if empty).
Result<void> write_svg(const std::string& dot_text, const std::string& output) {
  char dot_path[] = "/tmp/canopy-stack-XXXXXX";
  const int fd = mkstemp(dot_path);
  if (fd < 0) return Error{std::string("cannot write a temporary file: ") + strerror(errno)};
  const bool written = ::write(fd, dot_text.data(), dot_text.size()) == static_cast<ssize_t>(dot_text.size());
  ::close(fd);
  struct Unlink {
    const char* path;
    ~Unlink() { ::unlink(path); }
  } unlink_later{dot_path};
  if (!written) return Error{"cannot write the temporary DOT file " + std::string(dot_path)};
  std::vector<const char*> argv{"dot", "-Tsvg", dot_path};
  if (!output.empty()) {
    argv.push_back("-o");
    argv.push_back(output.c_str());
  }
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "dot", nullptr, nullptr, const_cast<char* const*>(argv.data()), environ) != 0)
    return Error{"--format svg needs graphviz's dot, which is not installed (apt-get install graphviz); "
                 "--format dot writes the DOT text",
                 ErrorKind::invalid_input};
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error{"dot -Tsvg failed (see its message above)"};
  return {};
}

Result<void> write_output(const std::string& text, const std::string& output) {
  if (output.empty()) {
    std::cout << text << std::flush;
    return std::cout ? Result<void>{} : Result<void>{Error{"cannot write to standard output"}};
  }
  std::ofstream file(output);
  file << text;
  file.close();
  if (!file) return Error{"cannot write " + output, ErrorKind::invalid_input};
  return {};
}

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// The command line of process `pid`, its arguments separated by spaces, or "". Read
// by getline, which turns a failed read (the process exited: ESRCH) into a stream
// error; an istreambuf_iterator would let libstdc++'s exception through.
std::string command_line(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string text;
  for (std::string arg; std::getline(in, arg, '\0');) text += (text.empty() ? "" : " ") + arg;
  return text;
}

// The time now, as "2026-11-29 17:56:41 UTC" (local time, its zone's abbreviation).
std::string time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[64] = {};
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S %Z", &local);
  return text;
}

// The merged tree, waiting at most `timeout`. A daemon lost on the way leaves the
// view and the stream goes on with the others (their tree lacks its ranks, which the
// caller reports); once every daemon is lost no tree can come, and the error says
// which and why instead of waiting out the time.
Result<Packet> receive_tree(Network& net, const std::vector<std::string>& hosts, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::map<Rank, std::string> lost;
  while (true) {
    while (auto event = net.next_event(milliseconds(0))) {
      if (event->kind == Event::Kind::failure && event->rank < hosts.size())
        lost.emplace(event->rank, "the daemon on " + hosts[event->rank] + " was lost: " + event->reason);
    }
    if (lost.size() == hosts.size()) {
      std::string why;
      for (const auto& [rank, reason] : lost) why += (why.empty() ? "" : "; ") + reason;
      return Error{"no merged tree: " + why};
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= milliseconds(0))
      return Error{"no merged tree within " + std::to_string(timeout.count()) + " ms (--timeout)"};
    auto in = net.receive(std::min(left, milliseconds(100)));
    if (!in) return Error{"no merged tree: " + in.error()};
    if (*in) return std::move((*in)->packet);
  }
}

}  // namespace

CLI::App* add_stack_command(CLI::App& app, StackOptions& opt) {
  auto* cmd = app.add_subcommand("stack",
                                 "Merged stack traces of every rank of an MPI job, as STAT gives them: find its ranks "
                                 "from its launcher (Open MPI's mpirun by its MPIR table, MPICH's mpiexec.hydra by its "
                                 "process tree), walk every rank with one daemon per host, merge in the tree "
                                 "(docs/stack.md)");
  auto* pid = cmd->add_option_function<pid_t>(
      "--mpirun", [&opt](pid_t v) { opt.mpirun = v; }, "PID of the launcher of a running job: Open MPI's mpirun, or MPICH's mpiexec.hydra (its ranks on "
      "other hosts are listed there through --launcher)");
  auto* launch = cmd->add_option("--mpirun-cmd", opt.mpirun_cmd,
                                 "Start this job (e.g. \"mpirun -np 64 ./app\"), wait for its ranks, then walk them; "
                                 "the job goes on afterwards");
  pid->excludes(launch);
  auto* slurm = cmd->add_option("--slurm-job", opt.slurm_job,
                                "The id of a running Slurm job (JOB, or JOB.STEP for one step's ranks): its ranks are "
                                "found on its nodes by an overlapping step, and the daemons started into it with srun "
                                "(docs/launch.md)");
  slurm->excludes(pid);
  slurm->excludes(launch);
  cmd->add_option("--after", opt.after_ms, "With --mpirun-cmd: wait this long (ms) once the ranks are up")
      ->capture_default_str()
      ->check(canopy::tools::in_range(0, 3600000));
  cmd->add_option("--proctable-timeout", opt.proctable_timeout_ms,
                  "With --mpirun-cmd: how long (ms) the ranks may take to come up")
      ->capture_default_str()
      ->check(canopy::tools::in_range(1, 3600000));
  cmd->add_option("--samples", opt.samples, "Samples per rank, merged into one tree")
      ->capture_default_str()
      ->check(canopy::tools::in_range(1u, 1000u));
  cmd->add_option("--interval", opt.interval_ms, "Time between samples (ms)")
      ->capture_default_str()
      ->check(canopy::tools::in_range(0u, 60000u));
  cmd->add_flag("--lines", opt.lines, "Add file:line to each frame where debug information has it");
  cmd->add_flag("--threads", opt.threads, "Walk every thread of each rank, not only its main thread");
  cmd->add_flag("--mpi-internals", opt.mpi_internals,
                "Keep the frames inside MPI calls (by default a path ends at the MPI function it is in)");
  cmd->add_flag("--full", opt.full,
                "Keep the C runtime's start-up frames above main (_start, __libc_start_main, "
                "__libc_start_call_main; clone3 and start_thread above a thread's function), folded away by default");
  cmd->add_option("--format", opt.format,
                  "text (an indented tree and the classes), dot or svg (a drawing to hand on: a title naming the job, "
                  "the time and the numbers of ranks and samples, a legend of the classes with their ranks, a colour "
                  "per class; svg needs graphviz), or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "dot", "svg", "json"}));
  cmd->add_option("-o,--output", opt.output, "Write the result to FILE (default: standard output)");
  cmd->add_option("--fanout", opt.fanout, "Daemons per commnode when the job spans more hosts than this")
      ->capture_default_str()
      ->check(canopy::tools::in_range(2u, 1024u));
  cmd->add_option("--launcher", opt.launcher,
                  "How to start a daemon on another host (and, for an MPICH job, list its ranks there); {host} and "
                  "{command} replaced")
      ->capture_default_str();
  cmd->add_option("--address", opt.addresses,
                  "HOST=ADDRESS: the address processes on HOST listen on (default: the host's name, resolved; "
                  "127.0.0.1 when the whole job is on this host)");
  cmd->add_option("--startup-timeout", opt.startup_timeout_ms, "How long (ms) the daemons may take to start")
      ->capture_default_str()
      ->check(canopy::tools::in_range(1, 3600000));
  cmd->add_option("--lost", opt.lost_ms,
                  "A daemon silent this long (ms) is declared lost (a killed one is at once). Long by default: "
                  "on a host with more busy ranks than cores, wake-ups of other processes lag by seconds")
      ->capture_default_str()
      ->check(canopy::tools::in_range(1000, 3600000));
  cmd->add_option("--timeout", opt.timeout_ms, "How long (ms) walking and merging may take")
      ->capture_default_str()
      ->check(canopy::tools::in_range(1, 3600000));
  cmd->add_flag("--timings", opt.timings,
                "Print on standard error how long each part took (proctable, launch, walk and merge, output)");
  return cmd;
}

int run_stack(const StackOptions& opt) {
  const auto start = Clock::now();
  if (!opt.mpirun && opt.mpirun_cmd.empty() && opt.slurm_job.empty()) {
    return usage_error("give --mpirun PID, --mpirun-cmd \"mpirun ... ./app\" or --slurm-job JOBID");
  }
  std::map<std::string, std::string> addresses;
  for (const auto& a : opt.addresses) {
    const auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size())
      return usage_error("--address " + a + ": expected HOST=ADDRESS");
    addresses[a.substr(0, eq)] = a.substr(eq + 1);
  }

  // 1. The job's ranks.
  pid_t launcher = 0;
  Result<std::vector<stack::RankProcess>> table = Error{""};
  std::string found;  // how the ranks were found
  SlurmJob slurm;
  if (!opt.slurm_job.empty()) {
    auto parsed = parse_slurm_job(opt.slurm_job);
    if (!parsed) return usage_error(parsed.error());
    slurm = *parsed;
    table = slurm_proctable(slurm);
    found = "ranks found through an overlapping step (their Slurm environment)";
  } else {
    Result<stack::JobRanks> ranks = Error{""};
    if (opt.mpirun) {
      launcher = *opt.mpirun;
      ranks = stack::find_job_ranks(launcher, this_host(), hydra_lister(opt.launcher));
    } else {
      auto job = start_job(opt.mpirun_cmd);
      if (!job) return fail(job.error());
      launcher = *job;
      ranks = job_ranks(launcher, milliseconds(opt.proctable_timeout_ms), hydra_lister(opt.launcher));
      if (!ranks) return fail(ranks.error() + end_job(launcher));
      std::cerr << "canopy stack: started the job: " << stack::process_name(launcher) << " pid " << launcher
                << "; it goes on after this\n";
    }
    if (!ranks) return fail(ranks.error());
    table = std::move(ranks->ranks);
    found = stack::describe(ranks->source);
    // The MPIR table is the way users expect; another way is said.
    if (ranks->source != stack::RankSource::mpir_table) std::cerr << "canopy stack: " << found << "\n";
  }
  if (!table) return fail(table.error());
  // Who the job is, for the results: its launcher's name and command line.
  std::string launcher_name, launcher_command;
  if (launcher != 0) {
    launcher_name = stack::process_name(launcher);
    launcher_command = command_line(launcher);
  }
  const double proctable_ms = ms_since(start);
  if (!opt.mpirun_cmd.empty() && opt.after_ms > 0) std::this_thread::sleep_for(milliseconds(opt.after_ms));

  // 2. One daemon per host, in a tree.
  const auto placement = place(*table);
  auto topology = stack_topology(placement.hosts, this_host(), opt.fanout, addresses);
  if (!topology) return fail(topology.error());
  const auto launch_start = Clock::now();
  LaunchOptions launch{.topology = std::move(*topology),
                       .backend_argv = {sibling_program("canopy-stackd")},
                       .launcher = opt.launcher,
                       .startup_timeout = milliseconds(opt.startup_timeout_ms)};
  launch.commnode_exe = sibling_program("canopy-commnode");
  if (!opt.slurm_job.empty()) {
    // The daemons go into the job, as overlapping steps (one per level of the tree).
    setenv("SLURM_JOB_ID", slurm.job.c_str(), 1);
    launch.method = LaunchMethod::slurm;
  }
  // Ranks spinning in MPI calls on an oversubscribed host delay every other process's
  // wake-ups, by 2.3 s measured here with 128 ranks on 2 cores: the tree's own
  // heartbeats must not take that for a hang (docs/stack.md).
  launch.fault_tolerance.lost = milliseconds(opt.lost_ms);
  launch.fault_tolerance.suspect = milliseconds(opt.lost_ms / 2);
  auto network = Network::launch(std::move(launch));
  if (!network) return fail("cannot start the tool daemons: " + network.error());
  auto& net = **network;
  auto stream = net.create_stream({.upstream_filter = "prefix_tree"});
  if (!stream) return fail(stream.error());
  const double launch_ms = ms_since(launch_start);

  // 3. Every daemon walks its ranks; the tree merges their call trees.
  const auto walk_start = Clock::now();
  const std::string taken = time_now();
  const stack::Request request{.samples = opt.samples, .interval_ms = opt.interval_ms, .lines = opt.lines,
                               .threads = opt.threads, .mpi_internals = opt.mpi_internals,
                               .startup_frames = opt.full, .targets = placement.targets};
  if (auto sent = net.broadcast(*stream, stack::encode(request)); !sent) return fail(sent.error());
  auto in = receive_tree(net, placement.hosts, milliseconds(opt.timeout_ms));
  if (!in) return fail(in.error());
  auto tree = CallTree::from_packet(*in);
  if (!tree) return fail("the merged tree is malformed: " + tree.error());
  const double walk_ms = ms_since(walk_start);
  (void)net.shutdown();

  // 4. The result, and which ranks it lacks (a daemon lost on the way).
  const auto output_start = Clock::now();
  std::vector<Rank> all, missing;
  for (const auto& p : *table) all.push_back(p.rank);
  std::sort(all.begin(), all.end());
  const auto walked = tree->ranks(CallTree::kRoot);
  std::set_difference(all.begin(), all.end(), walked.begin(), walked.end(), std::back_inserter(missing));
  const std::string job = opt.slurm_job.empty() ? launcher_name + " " + std::to_string(launcher) : slurm.describe();
  const std::string summary = std::to_string(all.size()) + (all.size() == 1 ? " rank" : " ranks") + " on " +
                              std::to_string(placement.hosts.size()) +
                              (placement.hosts.size() == 1 ? " host" : " hosts") + " (" + job + ", " +
                              std::to_string(opt.samples) + (opt.samples == 1 ? " sample" : " samples") + ")";
  const stack::Heading heading{.job = job, .command = launcher_command, .when = taken,
                               .hosts = placement.hosts.size(), .samples = opt.samples, .found = found,
                               .missing = format_rank_ranges(missing)};
  Result<void> written;
  if (opt.format == "text") {
    written = write_output("Stack traces of " + summary + ":\n\n" + stack::to_text(*tree), opt.output);
  } else if (opt.format == "json") {
    const std::string job_member =
        opt.slurm_job.empty() ? "\"mpirun\":" + std::to_string(launcher)
                              : "\"slurm_job\":" + slurm.job + (slurm.step.empty() ? "" : ",\"slurm_step\":" + slurm.step);
    const std::string extra = job_member + ",\"hosts\":" +
                              std::to_string(placement.hosts.size()) + ",\"samples\":" + std::to_string(opt.samples) +
                              ",\"missing\":\"" + format_rank_ranges(missing) + "\",";
    written = write_output(stack::to_json(*tree, extra), opt.output);
  } else if (opt.format == "dot") {
    written = write_output(stack::to_dot(*tree, heading), opt.output);
  } else {
    written = write_svg(stack::to_dot(*tree, heading), opt.output);
  }
  if (!written) return fail(written.error());
  if (opt.timings) {
    std::cerr << "canopy stack: timings_ms proctable=" << fixed(proctable_ms) << " launch=" << fixed(launch_ms)
              << " walk_merge=" << fixed(walk_ms) << " output=" << fixed(ms_since(output_start))
              << " total=" << fixed(ms_since(start)) << "\n";
  }
  if (!missing.empty())
    return fail(std::to_string(missing.size()) + " of " + std::to_string(all.size()) + " ranks are missing (" +
                format_rank_ranges(missing) + "): their daemon was lost; the result above lacks them");
  return 0;
}

}  // namespace canopy::tools
