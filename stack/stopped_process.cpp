#include "stack/stopped_process.h"

#include <dirent.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

namespace canopy::stack {
namespace {

std::string pid_text(pid_t pid) { return std::to_string(pid); }

// The value of `field` ("Tgid", "TracerPid", "Uid") in /proc/PID/status, or "".
std::string status_field(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + pid_text(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, field.size() + 1, field + ":") == 0) {
      auto begin = line.find_first_not_of(" \t", field.size() + 1);
      return begin == std::string::npos ? "" : line.substr(begin);
    }
  }
  return "";
}

// The thread ids in /proc/PID/task; empty if the process is gone.
std::vector<pid_t> list_threads(pid_t pid) {
  std::vector<pid_t> tids;
  DIR* dir = opendir(("/proc/" + pid_text(pid) + "/task").c_str());
  if (dir == nullptr) return tids;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    long tid = std::strtol(entry->d_name, &end, 10);
    if (tid > 0 && end != nullptr && *end == '\0') tids.push_back(static_cast<pid_t>(tid));
  }
  closedir(dir);
  // The main thread first, so that a process whose main thread is alive is unwound
  // from it first and the thread order is stable across samples.
  std::sort(tids.begin(), tids.end(), [pid](pid_t a, pid_t b) {
    if ((a == pid) != (b == pid)) return a == pid;
    return a < b;
  });
  return tids;
}

// waitpid for one traced thread, retried on EINTR.
pid_t wait_thread(pid_t tid, int* status, int flags) {
  while (true) {
    pid_t got = waitpid(tid, status, flags | __WALL);
    if (got >= 0 || errno != EINTR) return got;
  }
}

// After a failed PTRACE_DETACH (ESRCH: the threads were killed and are not in
// ptrace-stop any more), collect their exits from our side: until the tracer has
// waited for a traced thread, its real parent cannot reap it, and a thread-group
// leader cannot be waited for before its other threads. All are polled together, so
// the order does not matter. Bounded: a killed thread becomes a zombie within
// milliseconds. (When the caller is also the real parent, this reaps the process.)
void reap_dying(std::vector<pid_t> tids) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!tids.empty() && std::chrono::steady_clock::now() < deadline) {
    std::erase_if(tids, [](pid_t tid) {
      int status = 0;
      return wait_thread(tid, &status, WNOHANG) != 0;  // reaped, or not ours any more (ECHILD)
    });
    if (!tids.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

std::string process_name(pid_t pid) {
  std::ifstream in("/proc/" + pid_text(pid) + "/comm");
  std::string name;
  if (!std::getline(in, name) || name.empty()) return "?";
  return name;
}

std::string permission_message(pid_t pid) {
  std::string who = "process " + pid_text(pid) + " (" + process_name(pid) + ")";
  std::string tracer = status_field(pid, "TracerPid");
  if (!tracer.empty() && tracer != "0") {
    pid_t tracer_pid = static_cast<pid_t>(std::strtol(tracer.c_str(), nullptr, 10));
    return who + " is already traced by process " + tracer + " (" + process_name(tracer_pid) +
           "): a process has one tracer at a time; detach that debugger and try again";
  }
  std::string uid = status_field(pid, "Uid");
  std::string owner = uid.substr(0, uid.find_first_of(" \t"));
  return "no permission to trace " + who + " (owned by uid " + owner + ", we are uid " +
         std::to_string(geteuid()) +
         "): run as the same user as the process or as root, and check "
         "/proc/sys/kernel/yama/ptrace_scope (1 allows tracing only descendants; 0 allows "
         "any process of the same user)";
}

Result<StoppedProcess> StoppedProcess::stop(pid_t pid, Threads which) {
  if (pid <= 0) {
    return Error{"invalid process id " + pid_text(pid) + ": give the PID of a running process",
                 ErrorKind::invalid_input};
  }
  if (pid == getpid()) {
    return Error{"process " + pid_text(pid) + " is this process itself: it cannot stop itself to be read",
                 ErrorKind::invalid_input};
  }
  std::string tgid = status_field(pid, "Tgid");
  if (tgid.empty()) return Error{"no process " + pid_text(pid), ErrorKind::invalid_input};
  if (tgid != pid_text(pid)) {
    return Error{pid_text(pid) + " is a thread of process " + tgid + ": give the process id (" + tgid + ")",
                 ErrorKind::invalid_input};
  }

  // A zombie has no memory or threads left to read, and ptrace refuses it with EPERM,
  // which would read as a permission problem.
  if (status_field(pid, "State").rfind("Z", 0) == 0) {
    return Error{"process " + pid_text(pid) + " (" + process_name(pid) +
                 ") has exited (a zombie not yet reaped by its parent)"};
  }

  StoppedProcess stopped(pid);
  std::set<pid_t> seen;
  // Re-read the task list until it holds no thread we have not stopped: a thread can
  // create another between our listing and its stop, but not after it.
  bool found_new = true;
  while (found_new) {
    found_new = false;
    const std::vector<pid_t> tids = which == Threads::all ? list_threads(pid) : std::vector<pid_t>{pid};
    for (pid_t tid : tids) {
      if (!seen.insert(tid).second) continue;
      found_new = true;
      if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
        if (errno == ESRCH) continue;  // the thread exited after the listing
        int error = errno;
        stopped.resume();
        if (error == EPERM) return Error{permission_message(pid), ErrorKind::invalid_input};
        return Error{"cannot trace thread " + pid_text(tid) + " of process " + pid_text(pid) + ": " +
                     std::strerror(error)};
      }
      // Registered before the interrupt so that every later path detaches it.
      stopped.threads_.push_back({tid, 0});
      if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) != 0) {
        // ESRCH: killed between seize and interrupt; its exit is collected below.
      }
      int status = 0;
      if (wait_thread(tid, &status, 0) != tid || !WIFSTOPPED(status)) {
        // Exited (or already reaped): no longer ours to detach.
        stopped.threads_.pop_back();
        continue;
      }
      // A stop that is not ours (status >> 16 == 0) is a signal-delivery-stop: the
      // signal must reach the process when we let it go. PTRACE_EVENT_STOP is our
      // interrupt or a group-stop, which carries nothing to give back.
      if ((status >> 16) == 0) stopped.threads_.back().pending_signal = WSTOPSIG(status);
    }
  }
  if (stopped.threads_.empty()) {
    return Error{"process " + pid_text(pid) + " exited while it was being stopped"};
  }
  return stopped;
}

StoppedProcess::StoppedProcess(StoppedProcess&& other) noexcept
    : pid_(other.pid_), threads_(std::move(other.threads_)) {
  other.threads_.clear();
}

StoppedProcess& StoppedProcess::operator=(StoppedProcess&& other) noexcept {
  if (this != &other) {
    resume();
    pid_ = other.pid_;
    threads_ = std::move(other.threads_);
    other.threads_.clear();
  }
  return *this;
}

std::vector<pid_t> StoppedProcess::threads() const {
  std::vector<pid_t> tids;
  for (const Thread& thread : threads_) tids.push_back(thread.tid);
  return tids;
}

void StoppedProcess::resume() {
  std::vector<pid_t> dying;
  for (const Thread& thread : threads_) {
    void* signal = reinterpret_cast<void*>(static_cast<intptr_t>(thread.pending_signal));
    if (ptrace(PTRACE_DETACH, thread.tid, nullptr, signal) != 0 && errno == ESRCH) dying.push_back(thread.tid);
  }
  threads_.clear();
  reap_dying(std::move(dying));
}

}  // namespace canopy::stack
