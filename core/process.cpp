#include "core/process.h"

#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern char** environ;

namespace canopy::core {

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

std::optional<CpuAccount> cpu_account(pid_t pid) {
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  CpuAccount account;
  bool any = false, all_stopped = true;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream in(task.path() / "schedstat");
    unsigned long long ran = 0, waited = 0;
    if (!(in >> ran >> waited)) continue;  // a thread that ended meanwhile
    account.ran += std::chrono::nanoseconds(ran);
    account.waited += std::chrono::nanoseconds(waited);
    any = true;
    // stat: "TID (COMM) STATE ...", COMM possibly holding spaces or parentheses.
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    if (const auto end = line.rfind(") "); end != std::string::npos && end + 2 < line.size()) {
      const char state = line[end + 2];
      account.runnable = account.runnable || state == 'R';
      all_stopped = all_stopped && (state == 'T' || state == 't');
    } else {
      all_stopped = false;
    }
  }
  if (ec || !any) return std::nullopt;
  account.stopped = all_stopped;
  return account;
}

namespace {

std::optional<std::size_t> number_in(const char* path) {
  std::ifstream in(path);
  std::size_t n = 0;
  if (in >> n) return n;
  return std::nullopt;
}

}  // namespace

Result<void> room_for_tasks(std::size_t tasks) {
  // Tasks running now: the fourth field of /proc/loadavg is "runnable/total".
  std::size_t running = 0;
  {
    std::ifstream in("/proc/loadavg");
    std::string a, b, c, now;
    if (in >> a >> b >> c >> now) {
      if (auto slash = now.find('/'); slash != std::string::npos) running = std::strtoull(now.c_str() + slash + 1, nullptr, 10);
    }
  }
  struct Limit {
    std::string what;
    std::size_t value;
  };
  std::vector<Limit> limits;
  if (auto n = number_in("/proc/sys/kernel/pid_max")) limits.push_back({"the kernel's pid_max", *n});
  if (auto n = number_in("/proc/sys/kernel/threads-max")) limits.push_back({"the kernel's threads-max", *n});
  if (rlimit r{}; getrlimit(RLIMIT_NPROC, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    limits.push_back({"this user's process limit (ulimit -u)", static_cast<std::size_t>(r.rlim_cur)});
  }
  for (const auto& limit : limits) {
    const std::size_t room = limit.value > running ? limit.value - running : 0;
    if (tasks > room) {
      return Error{"this machine has room for " + std::to_string(room) + " more processes and threads (" + limit.what +
                       " is " + std::to_string(limit.value) + ", and " + std::to_string(running) +
                       " are running), and the tree would start about " + std::to_string(tasks) +
                       " here: run a smaller tree, or spread it over hosts (docs/launch.md)",
                   ErrorKind::invalid_input};
    }
  }
  return {};
}

std::string shell_quote(const std::string& word) {
  bool plain = !word.empty();
  for (char c : word) {
    if (!(isalnum(static_cast<unsigned char>(c)) || std::string_view("-_./=:,@%+").find(c) != std::string_view::npos)) {
      plain = false;
    }
  }
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> launcher_argv(const std::string& launcher_template, const std::string& host,
                                       const std::vector<std::string>& command, const Environment& env) {
  std::string cmd = "env";
  for (const auto& [k, v] : env) cmd += " " + shell_quote(k + "=" + v);
  for (const auto& word : command) cmd += " " + shell_quote(word);
  std::string line = launcher_template;
  auto replace = [&](std::string_view key, const std::string& with) {
    for (auto at = line.find(key); at != std::string::npos; at = line.find(key, at + with.size())) {
      line.replace(at, key.size(), with);
    }
  };
  replace("{host}", shell_quote(host));
  replace("{command}", cmd);
  return {"/bin/sh", "-c", "exec " + line};
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::spawn(asio::io_context& io,
                                                          const std::vector<std::string>& argv,
                                                          const Environment& env,
                                                          const std::string& stdin_data) {
  if (argv.empty()) return Error{"cannot start a process: empty command"};
  // Written at once into the socket, whose buffer is made to hold it.
  if (stdin_data.size() > 60000) return Error{"cannot start '" + argv[0] + "': more than 60,000 bytes for its standard input"};
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool overridden = false;
    for (const auto& [k, v] : env) {
      if (entry.size() > k.size() && entry.substr(0, k.size()) == k && entry[k.size()] == '=') overridden = true;
    }
    if (!overridden) env_strings.emplace_back(entry);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int input[2] = {-1, -1};
  if (!stdin_data.empty()) {
    // A socket rather than a pipe: send() with MSG_NOSIGNAL cannot raise SIGPIPE in a
    // host program that left it at its default, should the child be gone already.
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, input) != 0) {
      posix_spawn_file_actions_destroy(&actions);
      return Error{std::string("cannot start a process (socketpair): ") + strerror(errno)};
    }
    // Written before the child exists, while this process holds the reading end: it
    // fits the socket's buffer (60,000 bytes at most, checked above), so it never blocks,
    // and a child that exits at once without reading it (a launcher that starts
    // nothing) is seen exiting, not taken for a failure to start it.
    const int buffer = 128 * 1024;
    (void)::setsockopt(input[1], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    if (::send(input[1], stdin_data.data(), stdin_data.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(stdin_data.size())) {
      const int err = errno ? errno : EIO;
      ::close(input[0]);
      ::close(input[1]);
      posix_spawn_file_actions_destroy(&actions);
      return Error{"cannot start '" + argv[0] + "': its standard input: " + strerror(err)};
    }
    ::close(input[1]);  // the child reads to the end of it
    input[1] = -1;
    posix_spawn_file_actions_adddup2(&actions, input[0], STDIN_FILENO);  // dup2 clears close-on-exec
  }
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGCHLD);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // A process group of its own (its pid): what it starts that is not a Canopy
  // process (a wrapper script's commands) is ended with it, and the terminal's
  // signals go to the front-end alone, which shuts the tree down in order.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argp[0], &actions, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (input[0] >= 0) ::close(input[0]);
  if (rc != 0) return Error{"cannot start '" + argv[0] + "': " + strerror(rc)};

  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int err = errno;
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return Error{std::string("cannot watch child process (pidfd_open): ") + strerror(err)};
  }
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess(io, pid, pidfd));
  for (const auto& word : argv) child->command_ += (child->command_.empty() ? "" : " ") + shell_quote(word);
  return child;
}

ChildProcess::ChildProcess(asio::io_context& io, pid_t pid, int pidfd)
    : pid_(pid), pidfd_(io, pidfd) {}

void ChildProcess::release() {
  *alive_ = false;  // the watch's handler, if any, does nothing
  running_ = false;
  released_ = true;
  boost::system::error_code ignored;
  pidfd_.close(ignored);
}

ChildProcess::~ChildProcess() {
  *alive_ = false;
  if (released_) return;
  ::kill(-pid_, SIGKILL);  // the child and whatever of its group is left
  if (running_) waitpid(pid_, nullptr, 0);
}

bool ChildProcess::try_reap() {
  if (!running_) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    running_ = false;
    status_ = status;
    // What it started in its group and left behind (a wrapper script's command
    // holding our output open) goes with it. The group's id cannot name another
    // process while any member is alive.
    ::kill(-pid_, SIGKILL);
    return true;
  }
  return false;
}

void ChildProcess::watch(std::function<void(int)> on_exit) {
  on_exit_ = std::move(on_exit);
  pidfd_.async_wait(asio::posix::stream_descriptor::wait_read,
                    [this, alive = alive_](const boost::system::error_code& ec) {
                      if (!*alive || ec) return;
                      if (!try_reap()) {
                        watch(std::move(on_exit_));  // spurious wake-up
                        return;
                      }
                      if (auto f = std::move(on_exit_)) f(status_);
                    });
}

void ChildProcess::kill(int signal) {
  if (running_) ::kill(-pid_, signal);  // its whole process group
}

}  // namespace canopy::core
