// run_canopy: the canopy command line run as a user runs it, its exit status and
// everything it printed, for the tests of its subcommands.
#pragma once

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
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

}  // namespace canopy::testing
