// StoppedProcess: every thread of one process held in ptrace-stop, for as long as the
// object lives, so that its memory and registers can be read as one consistent
// snapshot; released (PTRACE_DETACH) by resume() or the destructor on every path.
//
// How it stops (ptrace(2), "PTRACE_SEIZE"): each thread listed in /proc/PID/task is
// seized (which sends no signal, unlike PTRACE_ATTACH) and interrupted with
// PTRACE_INTERRUPT, then waited for with waitpid(tid, __WALL). The task list is read
// again until it holds no thread not yet stopped: a stopped thread cannot create
// another, so this ends. Threads that exit meanwhile are left out.
//
// Signals: a thread may report a signal-delivery-stop (a signal that arrived while we
// were stopping it: SIGCHLD to mpirun, say) instead of our interrupt. That signal is
// given back with PTRACE_DETACH, so the process receives it as if nothing had
// happened. A process the user stopped (State T, group-stop) reports a group-stop;
// detaching with no signal leaves it stopped (the kernel re-enters the group-stop on
// detach), so resume() never continues a process the user stopped.
//
// Contract: all calls on one object come from the same thread of the caller (ptrace
// binds a tracee to the tracing thread). A thread in uninterruptible sleep (State D)
// delays stop() until it leaves that sleep: it cannot be detached before it stops.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "canopy/result.h"

namespace canopy::stack {

class StoppedProcess {
 public:
  enum class Threads : std::uint8_t { all, main };
  // Stops every thread of `pid` (Threads::main: its main thread only, which is enough
  // to read that thread's stack; the others run on). Errors: invalid_input for no such process, for no
  // permission (the message says why and what to do), for the caller's own process;
  // failed when the process exits while it is being stopped. Nothing stays traced
  // after an error.
  static Result<StoppedProcess> stop(pid_t pid, Threads which = Threads::all);
  // stop() for many processes at once, one result per pid in order: every thread is
  // interrupted before any stop is waited for, so that the processes stop together
  // (on a busy machine each stop waits for its thread to be scheduled; here the waits
  // overlap).
  static std::vector<Result<StoppedProcess>> stop_all(const std::vector<pid_t>& pids, Threads which = Threads::all);

  StoppedProcess(StoppedProcess&& other) noexcept;
  StoppedProcess& operator=(StoppedProcess&& other) noexcept;
  StoppedProcess(const StoppedProcess&) = delete;
  StoppedProcess& operator=(const StoppedProcess&) = delete;
  ~StoppedProcess() { resume(); }

  pid_t pid() const { return pid_; }
  // The stopped threads (thread ids); the first is the main thread when it is alive.
  std::vector<pid_t> threads() const;

  // Detaches every thread, giving back any signal that arrived meanwhile; threads that
  // exited meanwhile are reaped from our side (the tracer must wait for them before
  // their real parent can). Idempotent.
  void resume();

 private:
  struct Thread {
    pid_t tid;
    int pending_signal;  // a signal-delivery-stop's signal, to give back on detach; 0 if none
  };
  explicit StoppedProcess(pid_t pid) : pid_(pid) {}
  Result<void> interrupt(const std::vector<pid_t>& tids, std::set<pid_t>& seen, std::vector<pid_t>& pending);
  void collect(std::vector<pid_t> pending);

  pid_t pid_ = -1;
  std::vector<Thread> threads_;
};

// The value of `field` ("Tgid", "State", "TracerPid", "Uid") in /proc/PID/status, or "".
std::string status_field(pid_t pid, const std::string& field);

// The process's command name (/proc/PID/comm), or "?" if it cannot be read.
std::string process_name(pid_t pid);

// The message for an EPERM from ptrace on `pid`: who traces it already, or the
// same-user and ptrace_scope conditions.
std::string permission_message(pid_t pid);

}  // namespace canopy::stack
