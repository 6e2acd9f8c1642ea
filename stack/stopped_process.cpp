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
#include <optional>
#include <set>
#include <thread>

namespace canopy::stack {
namespace {

std::string pid_text(pid_t pid) { return std::to_string(pid); }

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

namespace {

// Why `pid` cannot be stopped before any ptrace call, if it cannot.
std::optional<Error> refusal(pid_t pid) {
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
  return std::nullopt;
}

}  // namespace

// Seizes and interrupts each thread of `tids` not in `seen` (adding it there), and
// lists in `pending` those whose stop is still to be collected. On an error every
// thread is released.
Result<void> StoppedProcess::interrupt(const std::vector<pid_t>& tids, std::set<pid_t>& seen,
                                       std::vector<pid_t>& pending) {
  for (pid_t tid : tids) {
    if (!seen.insert(tid).second) continue;
    if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) != 0) {
      if (errno == ESRCH) continue;  // the thread exited after the listing
      int error = errno;
      resume();
      if (error == EPERM) return Error{permission_message(pid_), ErrorKind::invalid_input};
      return Error{"cannot trace thread " + pid_text(tid) + " of process " + pid_text(pid_) + ": " +
                   std::strerror(error)};
    }
    // Registered before the interrupt so that every later path detaches it.
    threads_.push_back({tid, 0});
    // ESRCH: killed between seize and interrupt; its exit is collected below.
    (void)ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr);
    pending.push_back(tid);
  }
  return {};
}

// Waits for the stop of each thread of `pending`, polling them all: a thread-group
// leader whose process was killed meanwhile cannot be waited for before its other
// traced threads, so no single wait may block. Like a blocking wait, this waits for
// as long as a thread takes to stop (one in uninterruptible sleep delays it).
void StoppedProcess::collect(std::vector<pid_t> pending) {
  auto pause = std::chrono::microseconds(20);
  while (true) {
    std::erase_if(pending, [this](pid_t tid) {
      int status = 0;
      const pid_t got = wait_thread(tid, &status, WNOHANG);
      if (got == 0) return false;  // not stopped yet
      auto thread = std::find_if(threads_.begin(), threads_.end(), [tid](const Thread& t) { return t.tid == tid; });
      if (got != tid || !WIFSTOPPED(status)) {
        // Exited (or already reaped): no longer ours to detach.
        threads_.erase(thread);
        return true;
      }
      // A stop that is not ours (status >> 16 == 0) is a signal-delivery-stop: the
      // signal must reach the process when we let it go. PTRACE_EVENT_STOP is our
      // interrupt or a group-stop, which carries nothing to give back.
      if ((status >> 16) == 0) thread->pending_signal = WSTOPSIG(status);
      return true;
    });
    if (pending.empty()) return;
    // A process killed meanwhile: a thread already collected as stopped exits too,
    // and until we, its tracer, reap it, the leader's exit cannot be collected.
    std::erase_if(threads_, [&pending](const Thread& t) {
      if (std::find(pending.begin(), pending.end(), t.tid) != pending.end()) return false;
      int status = 0;
      return wait_thread(t.tid, &status, WNOHANG) == t.tid && (WIFEXITED(status) || WIFSIGNALED(status));
    });
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::vector<Result<StoppedProcess>> StoppedProcess::stop_all(const std::vector<pid_t>& pids, Threads which) {
  // Every thread is interrupted before any stop is waited for: the waits overlap, so
  // stopping N processes on a busy machine takes about one scheduling delay, not N.
  struct Progress {
    std::optional<StoppedProcess> process;
    std::optional<Error> error;
    std::set<pid_t> seen;
    std::vector<pid_t> pending;
  };
  std::vector<Progress> all(pids.size());
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (auto refused = refusal(pids[i])) {
      all[i].error = std::move(*refused);
      continue;
    }
    all[i].process.emplace(StoppedProcess(pids[i]));
    const auto tids = which == Threads::all ? list_threads(pids[i]) : std::vector<pid_t>{pids[i]};
    if (auto ok = all[i].process->interrupt(tids, all[i].seen, all[i].pending); !ok) {
      all[i].error = Error{ok.error(), ok.error_kind()};
      all[i].process.reset();
    }
  }
  std::vector<Result<StoppedProcess>> out;
  out.reserve(pids.size());
  for (std::size_t i = 0; i < pids.size(); ++i) {
    Progress& p = all[i];
    if (p.process) {
      p.process->collect(p.pending);
      // Threads::all: list the tasks again until none is new (a thread can create
      // another between our listing and its stop, but not after it).
      while (which == Threads::all && !p.error) {
        p.pending.clear();
        if (auto ok = p.process->interrupt(list_threads(pids[i]), p.seen, p.pending); !ok) {
          p.error = Error{ok.error(), ok.error_kind()};
        } else if (p.pending.empty()) {
          break;
        } else {
          p.process->collect(p.pending);
        }
      }
      if (!p.error && p.process->threads_.empty())
        p.error = Error{"process " + pid_text(pids[i]) + " exited while it was being stopped"};
    }
    if (p.error) {
      if (p.process) p.process->resume();
      out.emplace_back(std::move(*p.error));
    } else {
      out.emplace_back(std::move(*p.process));
    }
  }
  return out;
}

Result<StoppedProcess> StoppedProcess::stop(pid_t pid, Threads which) {
  return std::move(stop_all({pid}, which).front());
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
