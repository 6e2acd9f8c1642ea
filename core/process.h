// Starting child processes and learning when they exit, without signals.
//
// Local children are started with posix_spawn, every inherited descriptor above
// stderr closed (Asio's sockets are not close-on-exec, and a child holding its
// grandparent's socket would keep that connection alive after a crash). Exits are
// watched through a pidfd on the io_context, so a library user's SIGCHLD handling
// is left alone and only our own children are reaped.
#pragma once

#include <sys/types.h>

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "canopy/result.h"

namespace canopy::core {

namespace asio = boost::asio;

using Environment = std::vector<std::pair<std::string, std::string>>;

// "exited with status 3", "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

// Quotes `word` for /bin/sh.
std::string shell_quote(const std::string& word);

// The argv that runs `command` (with `env` prepended as `env K=V ...`) on `host`
// through a launcher template such as "ssh {host} {command}": the template is run by
// /bin/sh with {host} and {command} replaced by shell-quoted words.
std::vector<std::string> launcher_argv(const std::string& launcher_template, const std::string& host,
                                       const std::vector<std::string>& command, const Environment& env);

// The CPU a process's threads have had, and how long they waited for one while
// runnable, from the kernel's scheduler statistics (/proc/PID/task/*/schedstat):
// what tells a process starved of CPU on a loaded machine from one that hangs.
// The kernel adds a wait to `waited` only once it ends: a thread waiting now is
// `runnable`.
struct CpuAccount {
  std::chrono::nanoseconds ran{0};
  std::chrono::nanoseconds waited{0};
  bool runnable = false;  // a thread is runnable now (state R)
  // Every thread is stopped (state T: SIGSTOP, Ctrl-Z) or stopped by a tracer (t: a
  // debugger at a breakpoint): the process lives and will run again when continued.
  bool stopped = false;
};
// Nothing if the process is gone or the kernel keeps no such statistics.
std::optional<CpuAccount> cpu_account(pid_t pid);

// Whether this machine has room for `tasks` more processes and threads: an error
// naming the figures if not (the kernel's pid_max and threads-max less the tasks
// running now, and this user's process limit, ulimit -u). Checked before a tree is
// started here, rather than failing after thousands of processes and gigabytes.
Result<void> room_for_tasks(std::size_t tasks);

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH if it has no '/') with the current
  // environment plus `env`. `stdin_data`, if not empty, is all the child reads on its
  // standard input (a socket, closed after it; at most 60,000 bytes), for what must not appear
  // on a command line (the secret through a launcher: core/auth.h); otherwise the
  // child inherits this process's. The error names the program and the reason.
  static Result<std::unique_ptr<ChildProcess>> spawn(asio::io_context& io,
                                                     const std::vector<std::string>& argv,
                                                     const Environment& env, const std::string& stdin_data = {});
  // Each child runs in a process group of its own. The destructor kills the group
  // with SIGKILL and reaps the child if it is still running; a child that exits
  // takes the rest of its group with it (strays of a wrapper script).
  ~ChildProcess();

  // Calls `on_exit(status)` once, on the io_context, after the process exits and has
  // been reaped.
  void watch(std::function<void(int status)> on_exit);
  void kill(int signal);  // to the child's process group
  // Lets the process live on when this object goes (no SIGKILL), and stops
  // watching it: for a parent that leaves the tree to its children (Node::abandon).
  void release();
  pid_t pid() const { return pid_; }
  bool running() const { return running_; }
  // The command line it was started with, shell-quoted (the environment given to
  // spawn() is not in it; a launcher's is, and never holds the secret).
  const std::string& command() const { return command_; }

 private:
  ChildProcess(asio::io_context& io, pid_t pid, int pidfd);
  bool try_reap();

  pid_t pid_;
  asio::posix::stream_descriptor pidfd_;
  std::string command_;
  bool running_ = true;
  bool released_ = false;
  int status_ = 0;
  std::function<void(int)> on_exit_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace canopy::core
