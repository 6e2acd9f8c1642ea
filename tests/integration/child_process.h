// Starting a test's own child processes (back-ends started "by the tool", as in
// attach mode) and waiting for them, bounded. Header-only, for the integration tests.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace canopy::testing {

// Starts argv with this process's environment minus `unset` (names), plus `extra`
// ("NAME=value", replacing any of that name), its stderr into `err_path` (if given);
// the pid, or -1.
inline pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra = {},
                   const std::vector<std::string>& unset = {}, const std::string& err_path = {}) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    bool drop = false;
    for (const auto& name : unset) drop |= var.starts_with(name + "=");
    for (const auto& x : extra) drop |= var.starts_with(x.substr(0, x.find('=') + 1));
    if (!drop) env.push_back(*e);
  }
  for (const auto& x : extra) env.push_back(const_cast<char*>(x.c_str()));
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!err_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// Waits up to `limit` for child `pid`: its wait status, or -1 (then it is killed).
inline int wait_exit(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

}  // namespace canopy::testing
