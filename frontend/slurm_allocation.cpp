#include "canopy/slurm.h"

#include <arpa/inet.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

namespace canopy {
namespace {

// Runs `script` with /bin/sh; its output, or why it failed (with what it printed).
Result<std::string> output_of(const std::string& script) {
  FILE* pipe = popen(script.c_str(), "r");
  if (!pipe) return Error{"cannot run /bin/sh"};
  std::string out;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return Error{"'" + script.substr(0, script.find(" 2>&1")) + "' failed (exit status " +
                 (WIFEXITED(status) ? std::to_string(WEXITSTATUS(status)) : std::string("unknown")) + ")" +
                 (out.empty() ? "" : ": " + out)};
  }
  return out;
}

bool numeric_address(const std::string& text) {
  unsigned char bytes[16];
  return inet_pton(AF_INET, text.c_str(), bytes) == 1 || inet_pton(AF_INET6, text.c_str(), bytes) == 1;
}

}  // namespace

Result<SlurmAllocation> slurm_allocation() {
  SlurmAllocation allocation;
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  for (const auto& [name, value] : {std::pair<const char*, const char*>{"SLURM_JOB_ID", job}, {"SLURM_JOB_NODELIST", list}}) {
    if (!value || !*value) {
      return Error{std::string("not inside a Slurm allocation (salloc, sbatch): ") + name + " is not set",
                   ErrorKind::invalid_input};
    }
  }
  allocation.job = job;
  // The names in the allocation's order; then each node's NodeAddr (sinfo prints a
  // node once per partition it is in).
  auto names = output_of("scontrol show hostnames \"$SLURM_JOB_NODELIST\" 2>&1");
  if (!names) return Error{"cannot list the nodes of allocation " + allocation.job + ": " + names.error()};
  auto addresses = output_of("sinfo -h -N -n \"$SLURM_JOB_NODELIST\" -o '%N %o' 2>&1");
  if (!addresses) return Error{"cannot read the addresses of allocation " + allocation.job + "'s nodes: " + addresses.error()};
  std::map<std::string, std::string> address_of;
  std::istringstream lines(*addresses);
  for (std::string name, address; lines >> name >> address;) address_of.emplace(name, address);
  std::istringstream words(*names);
  for (std::string name; words >> name;) {
    Host host;
    host.name = name;
    if (auto a = address_of.find(name); a != address_of.end() && numeric_address(a->second)) host.address = a->second;
    allocation.nodes.push_back(std::move(host));
  }
  if (allocation.nodes.empty()) return Error{"allocation " + allocation.job + " has no nodes (" + list + ")"};
  if (const char* node = std::getenv("SLURMD_NODENAME"); node && *node) {
    allocation.this_host = node;
  } else {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return Error{"cannot read this host's name"};
    allocation.this_host = name;
    allocation.this_host = allocation.this_host.substr(0, allocation.this_host.find('.'));
  }
  return allocation;
}

}  // namespace canopy
