// canopy-slurm-task: one task of a bulk launch step (docs/launch.md). The front-end
// runs `srun` once per level of the tree, one task per process of that level, placed
// on its host by the step's host file; every task runs this program, with the step's
// table on its standard input (srun gives every task all of it):
//
//   line 1   the network's secret (64 hex digits)
//   line 2   network HEX
//   then, one line per task in task order:  RANK ROLE PARENT-ADDRESS:PORT
//
// It takes the line of its task (SLURM_PROCID), puts the identity in the environment
// as a parent does for a child it starts (CANOPY_RANK, CANOPY_PARENT,
// CANOPY_NETWORK_ID, CANOPY_SECRET) and executes the process's program:
//
//   canopy-slurm-task COMMNODE-PROGRAM BACKEND-PROGRAM [BACKEND-ARGS...]
//
// Exit status 2, with the reason on standard error, if the table or its line is
// wrong; otherwise the program's own.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/auth.h"
#include "core/parent_link.h"

namespace {

int fail(const std::string& why) {
  std::fprintf(stderr, "canopy-slurm-task: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: canopy-slurm-task COMMNODE-PROGRAM BACKEND-PROGRAM [BACKEND-ARGS...]");
  const char* procid = std::getenv("SLURM_PROCID");
  if (!procid || !*procid) return fail("SLURM_PROCID is not set: this program is a task of a step the front-end starts");
  char* end = nullptr;
  const unsigned long task = std::strtoul(procid, &end, 10);
  if (*end != '\0') return fail(std::string("SLURM_PROCID '") + procid + "' is not a task number");

  std::string secret, network_line, line;
  if (!std::getline(std::cin, secret) || !std::getline(std::cin, network_line)) {
    return fail("the step's table on standard input is cut short");
  }
  std::string network;
  {
    std::istringstream words(network_line);
    std::string key;
    if (!(words >> key >> network) || key != "network") return fail("the table's second line is not 'network HEX'");
  }
  for (unsigned long i = 0; i <= task; ++i) {
    if (!std::getline(std::cin, line)) {
      return fail("the table has no line for task " + std::to_string(task) + " (it has " + std::to_string(i) + ")");
    }
  }
  std::istringstream fields(line);
  std::string rank, role, parent;
  if (!(fields >> rank >> role >> parent) || (role != "commnode" && role != "backend")) {
    return fail("line of task " + std::to_string(task) + " is not 'RANK ROLE PARENT-ADDRESS:PORT': '" + line + "'");
  }
  if (auto ok = canopy::core::parse_secret(secret); !ok) return fail(ok.error());
  setenv(canopy::core::kEnvRank, rank.c_str(), 1);
  setenv(canopy::core::kEnvParent, parent.c_str(), 1);
  setenv(canopy::core::kEnvNetworkId, network.c_str(), 1);
  setenv(canopy::core::kEnvSecret, secret.c_str(), 1);
  unsetenv(canopy::core::kEnvParentLink);  // a plain link (bulk launch starts no striped ones)
  unsetenv(canopy::core::kEnvSecretOnStdin);

  std::vector<char*> program;
  if (role == "commnode") {
    program.push_back(argv[1]);
  } else {
    for (int i = 2; i < argc; ++i) program.push_back(argv[i]);
  }
  program.push_back(nullptr);
  execvp(program[0], program.data());
  return fail(std::string("cannot run '") + program[0] + "': " + std::strerror(errno));
}
