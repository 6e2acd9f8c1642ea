// The ranks of a running MPI job, found from its launcher's pid: through the
// launcher's MPIR table when it has one (stack/mpir.h: Open MPI's mpirun), else
// through its process tree and its ranks' PMI environment (stack/hydra.h: MPICH's
// stripped mpiexec.hydra). canopy stack says which way it took.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "stack/hydra.h"
#include "stack/mpir.h"

namespace canopy::stack {

enum class RankSource { mpir_table, hydra_proxies };

// "ranks found through the launcher's MPIR table", "ranks found through hydra's
// proxies and PMI_RANK (no MPIR table)".
std::string describe(RankSource source);

struct JobRanks {
  std::vector<RankProcess> ranks;  // entry i is rank i
  RankSource source = RankSource::mpir_table;
};

// Lists the ranks below one of hydra's proxies on another host, as proxy_ranks()
// does there (canopy stack runs `canopy-stackd --list-hydra` through its launcher
// template); their host is the proxy's.
using RemoteProxyLister = std::function<Result<HydraJob>(const RemoteProxy& proxy)>;

// Every rank of the job, once. The MPIR table is preferred; hydra's process tree
// is read when the launcher has no table to give (none, or not filled yet) and
// leads hydra_pmi_proxy processes; ranks on this host are named `this_host`, those
// below a proxy on another host are listed there by `remote` (if it is empty, such a
// job is refused, naming the hosts).
// Errors: read_proctable's when the launcher leads no proxy (failed instead for a
// process named mpiexec.hydra or mpiexec.mpich: it has not started them yet); hydra_ranks' and
// `remote`'s; and, failed: a remote proxy whose host is not known from its command
// line (started by srun); ranks that have not started yet; ranks that disagree on
// PMI_SIZE or appear twice across hosts.
Result<JobRanks> find_job_ranks(pid_t launcher, const std::string& this_host, const RemoteProxyLister& remote = {});

// For a job just started: tries until every rank is found, as find_job_ranks does,
// or `timeout` passes (the last error then), or the launcher is gone. A launcher
// without MPIR table that leads no proxy yet is tried again (right after exec it
// may not have loaded its MPI library or started its proxies).
Result<JobRanks> wait_for_job_ranks(pid_t launcher, const std::string& this_host, std::chrono::milliseconds timeout,
                                    const RemoteProxyLister& remote = {});

}  // namespace canopy::stack
