// canopy-stackd: the tool daemon of canopy stack (docs/stack.md), one per host of the
// job, started by the Canopy tree as a back-end. On each request (stack/protocol.h)
// it walks the ranks the request gives it, `samples` times, and answers with one
// CallTree of their paths, which the prefix_tree filter merges on the way up. A rank
// that cannot be walked (it exited, no permission) is a path of its own, the reason
// in brackets, so the result says so where the user looks.
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>

#include <optional>
#include <string_view>

#include "canopy/backend.h"
#include "canopy/call_tree.h"
#include "stack/hydra.h"
#include "stack/paths.h"
#include "stack/protocol.h"
#include "stack/walker.h"

namespace {

using namespace canopy;

CallTree walk(const stack::Request& request, Rank me) {
  std::vector<pid_t> pids;
  std::vector<Rank> ranks;
  for (const auto& t : request.targets) {
    if (t.daemon != me) continue;
    pids.push_back(t.pid);
    ranks.push_back(t.mpi_rank);
  }
  CallTree tree;
  if (pids.empty()) return tree;
  const stack::PathOptions shape{.mpi_internals = request.mpi_internals,
                                 .startup_frames = request.startup_frames};
  stack::Walker walker({.lines = request.lines, .all_threads = request.threads});
  for (std::uint32_t s = 0; s < request.samples; ++s) {
    if (s > 0) std::this_thread::sleep_for(std::chrono::milliseconds(request.interval_ms));
    const auto stacks = walker.sample(pids);
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (!stacks[i]) {
        tree.add_path({"[not walked: " + stacks[i].error() + "]"}, ranks[i]);
        continue;
      }
      for (const auto& thread : *stacks[i]) {
        tree.add_path(stack::shape_path(thread.frames, shape), ranks[i]);
      }
    }
  }
  return tree;
}

}  // namespace

// The environment variable `name` of process `pid`, if it has it.
std::optional<std::string> env_of(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const std::string key = name + "=";
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\0', at);
    const std::string_view entry(text.data() + at, (end == std::string::npos ? text.size() : end) - at);
    if (entry.substr(0, key.size()) == key) return std::string(entry.substr(key.size()));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return std::nullopt;
}

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  char state = 0;
  int ppid = 0;
  std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid);
  return ppid;
}

// `canopy-stackd --list-slurm-job JOB` (run by canopy stack --slurm-job as a task of
// an overlapping step, one per node of the job): prints "HOST RANK PID EXE" for each
// rank of the job's other steps on this node, found by their environment
// (SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID, and SLURMD_NODENAME this node's); of a
// rank's processes, the topmost (a rank's helpers inherit its environment).
int list_slurm_job(const std::string& job) {
  const char* own_step = std::getenv("SLURM_STEP_ID");
  // This node's ranks only: where nodes share a process table (nodes of a test
  // cluster on one machine), the others' are listed by their own node's task.
  const char* own_node = std::getenv("SLURMD_NODENAME");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::map<std::string, pid_t> candidates;  // "step rank" -> pid
  std::map<pid_t, std::string> key_of;
  DIR* proc = opendir("/proc");
  if (!proc) return 1;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (pid <= 0 || pid == getpid()) continue;
    if (env_of(pid, "SLURM_JOB_ID") != job) continue;
    auto step = env_of(pid, "SLURM_STEP_ID");
    auto rank = env_of(pid, "SLURM_PROCID");
    if (!step || !rank || (own_step && *step == own_step)) continue;
    if (own_node && env_of(pid, "SLURMD_NODENAME").value_or(own_node) != own_node) continue;
    key_of[pid] = *step + " " + *rank;
  }
  closedir(proc);
  for (const auto& [pid, key] : key_of) {
    auto parent = key_of.find(parent_of(pid));
    if (parent != key_of.end() && parent->second == key) continue;  // a helper of the rank
    if (candidates.count(key)) continue;
    candidates[key] = pid;
  }
  for (const auto& [key, pid] : candidates) {
    char exe[4096] = {};
    const ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
    const std::string rank = key.substr(key.find(' ') + 1);
    const std::string step = key.substr(0, key.find(' '));
    std::printf("%s %s %s %d %s\n", host, step.c_str(), rank.c_str(), static_cast<int>(pid), n > 0 ? exe : "?");
  }
  return 0;
}

// `canopy-stackd --list-hydra CONTROL_PORT PROXY_ID` (run by canopy stack through its
// launcher template on each other host of an MPICH job whose mpiexec.hydra has no MPIR
// table): prints "RANK SIZE PID EXE" for each rank below the hydra_pmi_proxy here of
// that control port and proxy id (stack/hydra.h, proxy_ranks), by PMI_RANK and
// PMI_SIZE. Nothing when its ranks have not started yet; exit status 1 and a message
// when there is no such proxy.
int list_hydra(const std::string& control_port, const std::string& proxy_id) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  auto job = stack::proxy_ranks(control_port, proxy_id, stack::list_processes(), host);
  if (!job) {
    std::fprintf(stderr, "canopy-stackd: %s\n", job.error().c_str());
    return 1;
  }
  for (const auto& r : job->ranks) {
    std::printf("%u %u %d %s\n", r.rank, job->size, static_cast<int>(r.pid), r.executable.c_str());
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--list-slurm-job") == 0) return list_slurm_job(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "--list-hydra") == 0) return list_hydra(argv[2], argv[3]);
  auto backend = Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "canopy-stackd: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::minutes(10));
    if (!in) return 0;  // the network has shut down
    if (!*in || (*in)->packet.tag() != stack::kRequestTag) continue;
    auto request = stack::decode_request((*in)->packet);
    CallTree tree;
    if (!request) {
      tree.add_path({"[bad request to the daemon: " + request.error() + "]"}, be.rank());
    } else {
      tree = walk(*request, be.rank());
    }
    if (!be.send((*in)->stream, tree.to_packet(stack::kTreeTag))) return 0;
  }
}
