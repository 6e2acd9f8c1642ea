// run_canopy: the canopy command line run as a user runs it, its exit status and
// everything it printed, for the tests of its subcommands; and what those tests
// share: starting a process without waiting for it, waiting for a condition, a
// shell command's output.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace canopy::testing {

inline const std::string kCanopy = std::string(CANOPY_BIN_DIR) + "/canopy";

struct Output {
  int status = -1;
  std::string out;
  std::string err;
};

// Runs canopy with `args` and waits for it (bounded by the test's ctest timeout).
inline Output run_canopy(std::vector<std::string> args) {
  char out_path[] = "/tmp/canopy-cli-out-XXXXXX";
  char err_path[] = "/tmp/canopy-cli-err-XXXXXX";
  int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  args.insert(args.begin(), kCanopy);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  Output o;
  if (posix_spawn(&pid, kCanopy.c_str(), &actions, nullptr, argv.data(), environ) == 0) {
    waitpid(pid, &o.status, 0);
  }
  posix_spawn_file_actions_destroy(&actions);
  close(out_fd);
  close(err_fd);
  auto slurp = [](const char* path) {
    std::ifstream in(path);
    std::string s((std::istreambuf_iterator<char>(in)), {});
    unlink(path);
    return s;
  };
  o.out = slurp(out_path);
  o.err = slurp(err_path);
  return o;
}

inline int exit_code(const Output& o) { return WIFEXITED(o.status) ? WEXITSTATUS(o.status) : -1; }

// Starts `argv` (argv[0] a path) with the environment of this process and, if
// `stdout_path` (`stderr_path`) is given, its standard output (error) into that
// file; its pid, or -1.
inline pid_t start_process(std::vector<std::string> argv, const std::string& stdout_path = {},
                           const std::string& stderr_path = {}) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!stdout_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  if (!stderr_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// canopy with `args`, not waited for (start_process).
inline pid_t start_canopy(std::vector<std::string> args, const std::string& stdout_path = {},
                          const std::string& stderr_path = {}) {
  args.insert(args.begin(), kCanopy);
  return start_process(std::move(args), stdout_path, stderr_path);
}

// Attach mode: canopy-demo-backend of ranks 0..count-1 attaching through `file`;
// the pids of those started.
inline std::vector<pid_t> start_demo_backends(const std::string& file, int count) {
  std::vector<pid_t> pids;
  for (int r = 0; r < count; ++r) {
    pid_t pid = start_process({std::string(CANOPY_BIN_DIR) + "/canopy-demo-backend", "--attach", file, std::to_string(r)});
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

// Waits, bounded, until `done` holds; true if it does. `done` is asked once more
// after the last wait, so it must give the same answer when asked again.
inline bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// What /bin/sh prints for `command` on its standard output, and its exit status.
inline std::pair<std::string, int> shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return {"", -1};
  char buffer[4096];
  while (std::size_t n = fread(buffer, 1, sizeof buffer, p)) out.append(buffer, n);
  const int status = pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// The whole of a file ("" if it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace canopy::testing
