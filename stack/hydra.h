// The ranks of an MPICH job from its launcher's process tree, for a launcher without
// the MPIR table (stack/mpir.h): Debian's mpiexec.hydra is stripped, so no tool can
// find MPIR_proctable in it by name (docs/stack.md, "MPICH's hydra").
//
// What hydra does, checked with MPICH 4.0.2: mpiexec.hydra starts one hydra_pmi_proxy
// per host of the job, as its child on its own host, and elsewhere through a launcher
// (ssh HOST "/usr/bin/hydra_pmi_proxy" --control-port ...; or srun); each proxy forks
// its host's ranks, which carry PMI_RANK and PMI_SIZE in their environment.
//
// hydra_ranks() is pure (a snapshot in, the ranks out), unit-tested without
// processes; list_processes() takes the snapshot from /proc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "stack/mpir.h"

namespace canopy::stack {

// One process of this host, as much as hydra_ranks() needs of it.
struct ProcessEntry {
  pid_t pid = 0;
  pid_t parent = 0;
  std::string name;                     // /proc/PID/comm
  std::vector<std::string> argv;        // /proc/PID/cmdline
  std::string executable;               // /proc/PID/exe, or "" when unreadable
  std::optional<std::uint32_t> pmi_rank;  // PMI_RANK; read for children of a proxy only
  std::optional<std::uint32_t> pmi_size;  // PMI_SIZE; likewise
};

// The processes of this host that can be read (those of other users mostly cannot);
// the environment only of the children of a process named hydra_pmi_proxy.
std::vector<ProcessEntry> list_processes();

// A proxy the launcher started on another host (through ssh, rsh or srun).
struct RemoteProxy {
  pid_t pid = 0;             // of the process that runs it from here (ssh, srun)
  std::string host;          // the host it names (`AGENT [-x] HOST hydra_pmi_proxy ...`), or "" (srun)
  std::string via;           // that process's name: "ssh", "srun", ...
  std::string control_port;  // the job's: its proxies' --control-port ("10.0.0.1:41189")
  std::string proxy_id;      // its --proxy-id
};

struct HydraJob {
  std::uint32_t size = 0;             // PMI_SIZE: the job's number of ranks
  std::vector<RankProcess> ranks;     // those on this host, by rank (host: `this_host`)
  std::vector<RemoteProxy> remote;    // proxies on other hosts, whose ranks are not in `ranks`
};

// Whether `launcher` leads a hydra job: a child of it is a hydra_pmi_proxy, or runs
// one on another host (its command line names hydra_pmi_proxy).
bool leads_hydra_proxies(pid_t launcher, const std::vector<ProcessEntry>& processes);

// The ranks of the hydra job `launcher` leads: the children of its local proxies
// that carry PMI_RANK (a rank's own children, which inherit it, are not ranks).
// Errors:
//   invalid_input  `launcher` has no proxy (leads_hydra_proxies() is false)
//   failed         no rank has started yet (a proxy without children of PMI_RANK);
//                  the ranks disagree on PMI_SIZE, or a PMI_RANK is out of range or
//                  given twice
// Ranks missing from this host are not an error: the caller compares `ranks` with
// `size` (they may not have started yet, or run on the hosts of `remote`, which the
// caller lists there with proxy_ranks()).
Result<HydraJob> hydra_ranks(pid_t launcher, const std::vector<ProcessEntry>& processes, const std::string& this_host);

// What `canopy-stackd --list-hydra CONTROL_PORT PROXY_ID` lists on a remote host: the
// ranks below the hydra_pmi_proxy there whose --control-port and --proxy-id are
// those (hosts that share a process table, network namespaces of one machine, see
// the other hosts' proxies of the job too), named `host`. Errors: invalid_input when
// no such proxy runs here; hydra_ranks' checks of PMI_RANK and PMI_SIZE.
Result<HydraJob> proxy_ranks(const std::string& control_port, const std::string& proxy_id,
                             const std::vector<ProcessEntry>& processes, const std::string& host);

}  // namespace canopy::stack
