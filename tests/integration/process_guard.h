// ProcessGuard: makes the test process the reaper of every process it starts,
// directly or not, and tells whether any of them is still alive.
//
// PR_SET_CHILD_SUBREAPER makes orphaned descendants (a back-end whose commnode
// died, say) children of the test process instead of init, so "no process left"
// can be checked exactly: the set of live descendants must become empty.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace canopy::testing {

class ProcessGuard {
 public:
  ProcessGuard() { prctl(PR_SET_CHILD_SUBREAPER, 1); }
  ~ProcessGuard() { kill_all(); }

  // Live (non-zombie) descendants of this process, reaping zombies on the way.
  static std::vector<pid_t> descendants() {
    reap();
    std::map<pid_t, pid_t> parent;
    std::set<pid_t> zombies;
    if (DIR* proc = opendir("/proc")) {
      while (dirent* e = readdir(proc)) {
        pid_t pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
        if (pid <= 0) continue;
        std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
        std::string line;
        if (!std::getline(stat, line)) continue;
        auto close = line.rfind(')');
        if (close == std::string::npos) continue;
        std::istringstream rest(line.substr(close + 2));
        char state;
        pid_t ppid;
        rest >> state >> ppid;
        parent[pid] = ppid;
        if (state == 'Z') zombies.insert(pid);
      }
      closedir(proc);
    }
    std::vector<pid_t> out;
    pid_t self = getpid();
    for (auto [pid, ppid] : parent) {
      if (zombies.count(pid)) continue;
      for (pid_t p = ppid; p > 1; p = parent.count(p) ? parent[p] : 0) {
        if (p == self) {
          out.push_back(pid);
          break;
        }
      }
    }
    return out;
  }

  // Waits up to `limit` for every descendant to exit; returns those still alive.
  static std::vector<pid_t> wait_for_none(std::chrono::milliseconds limit) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      auto left = descendants();
      if (left.empty() || std::chrono::steady_clock::now() > deadline) return left;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // The live descendant that Canopy started as `rank` (CANOPY_RANK in its
  // environment), or -1.
  static pid_t process_of_rank(std::uint32_t rank) {
    const std::string wanted = "CANOPY_RANK=" + std::to_string(rank);
    for (pid_t pid : descendants()) {
      std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
      std::string env((std::istreambuf_iterator<char>(in)), {});
      std::istringstream vars(env);
      for (std::string var; std::getline(vars, var, '\0');) {
        if (var == wanted) return pid;
      }
    }
    return -1;
  }

  // The value of `field` ("State", "TracerPid") in /proc/PID/status, or "".
  static std::string status_field(pid_t pid, const std::string& field) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(field + ":", 0) == 0) {
        auto begin = line.find_first_not_of(" \t", field.size() + 1);
        return begin == std::string::npos ? "" : line.substr(begin);
      }
    }
    return "";
  }

  // The command name of `pid` (/proc/PID/comm), or "".
  static std::string name_of(pid_t pid) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    return name;
  }

  // Every descendant, killed. An MPI launcher (mpirun) is first asked to end its
  // job (SIGTERM, up to 5 s): killed outright, it would leave its session directory
  // (/tmp/ompi.HOST.UID/pid.PID, with its ranks' shared-memory files) behind.
  // (MPICH's mpiexec.hydra too: its proxies and ranks, each in a session of its own,
  // are ended by it; those it leaves are still descendants here, and killed.)
  static void kill_all() {
    for (pid_t pid : descendants()) {
      if (is_mpi_launcher(pid)) end_launcher(pid, std::chrono::seconds(5));
    }
    for (pid_t pid : descendants()) ::kill(pid, SIGKILL);
    reap();
  }

  static bool is_mpi_launcher(pid_t pid) {
    const auto name = name_of(pid);
    return name == "mpirun" || name == "mpiexec" || name == "orterun" || name == "prterun" ||
           name == "mpiexec.hydra" || name == "mpiexec.mpich";
  }

  // SIGTERM to `launcher`, then up to `limit` for it to end (reaped if it is our
  // child); SIGKILL if it has not.
  static void end_launcher(pid_t launcher, std::chrono::milliseconds limit) {
    if (::kill(launcher, SIGTERM) != 0) return;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      reap();
      if (::kill(launcher, 0) != 0) return;
      if (status_field(launcher, "State").rfind("Z", 0) == 0) return;  // another's child, ended
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(launcher, SIGKILL);
  }

  static void reap() {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
};

}  // namespace canopy::testing
