// canopy-bulk-task: one task of a bulk launch step (docs/launch.md). The front-end
// runs `srun` (or `mpirun`) once per level of the tree, one task per process of that
// level, placed on its host by the step's host file (rank file); every task runs this
// program, with the step's table on its standard input (srun gives every task all of
// it) or, under mpirun, in the environment variable CANOPY_BULK_TABLE (mpirun passes
// standard input to its first task only; the variable is removed before the exec):
//
//   line 1   the network's secret (64 hex digits)
//   line 2   network HEX
//   then, one line per task in task order:  RANK ROLE PARENT-ADDRESS:PORT [LINK]
//   (LINK: the rest of the line, a striped link's CANOPY_PARENT_LINK)
//
// It takes the line of its task (OMPI_COMM_WORLD_RANK under mpirun, else
// SLURM_PROCID), puts the identity in the environment
// as a parent does for a child it starts (CANOPY_RANK, CANOPY_PARENT,
// CANOPY_NETWORK_ID, CANOPY_SECRET, CANOPY_PARENT_LINK) and executes the process's program:
//
//   canopy-bulk-task COMMNODE-PROGRAM BACKEND-PROGRAM [BACKEND-ARGS...]
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

constexpr const char* kTableVariable = "CANOPY_BULK_TABLE";

int fail(const std::string& why) {
  std::fprintf(stderr, "canopy-bulk-task: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: canopy-bulk-task COMMNODE-PROGRAM BACKEND-PROGRAM [BACKEND-ARGS...]");
  // mpirun's first: under an allocation, mpirun's daemons are srun tasks, and their
  // SLURM_PROCID (the node's index) reaches the processes they start.
  const char* variable = "OMPI_COMM_WORLD_RANK";
  const char* procid = std::getenv(variable);
  if (!procid || !*procid) procid = std::getenv(variable = "SLURM_PROCID");
  if (!procid || !*procid) {
    return fail("neither OMPI_COMM_WORLD_RANK nor SLURM_PROCID is set: this program is a task of a step the "
                "front-end starts");
  }
  char* end = nullptr;
  const unsigned long task = std::strtoul(procid, &end, 10);
  if (*end != '\0') return fail(std::string(variable) + " '" + procid + "' is not a task number");

  const char* table = std::getenv(kTableVariable);
  std::istringstream from_environment(table ? table : "");
  std::istream& input = table ? static_cast<std::istream&>(from_environment) : std::cin;
  unsetenv(kTableVariable);  // the secret goes to the program as CANOPY_SECRET alone
  std::string secret, network_line, line;
  if (!std::getline(input, secret) || !std::getline(input, network_line)) {
    return fail("the step's table is cut short");
  }
  std::string network;
  {
    std::istringstream words(network_line);
    std::string key;
    if (!(words >> key >> network) || key != "network") return fail("the table's second line is not 'network HEX'");
  }
  for (unsigned long i = 0; i <= task; ++i) {
    if (!std::getline(input, line)) {
      return fail("the table has no line for task " + std::to_string(task) + " (it has " + std::to_string(i) + ")");
    }
  }
  std::istringstream fields(line);
  std::string rank, role, parent, link;
  if (!(fields >> rank >> role >> parent) || (role != "commnode" && role != "backend")) {
    return fail("line of task " + std::to_string(task) + " is not 'RANK ROLE PARENT-ADDRESS:PORT [LINK]': '" + line +
                "'");
  }
  std::getline(fields >> std::ws, link);  // a striped link's description, or nothing
  if (auto ok = canopy::core::parse_secret(secret); !ok) return fail(ok.error());
  setenv(canopy::core::kEnvRank, rank.c_str(), 1);
  setenv(canopy::core::kEnvParent, parent.c_str(), 1);
  setenv(canopy::core::kEnvNetworkId, network.c_str(), 1);
  setenv(canopy::core::kEnvSecret, secret.c_str(), 1);
  if (link.empty()) {
    unsetenv(canopy::core::kEnvParentLink);  // a plain link
  } else {
    setenv(canopy::core::kEnvParentLink, link.c_str(), 1);
  }
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
