#include "stack/job_ranks.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "canopy/call_tree.h"
#include "stack/stopped_process.h"

namespace canopy::stack {
namespace {

// The ranks of a hydra job, all of them (those on other hosts listed by `remote`) or
// an error that says which are missing.
Result<JobRanks> complete_hydra_job(pid_t launcher, HydraJob job, const RemoteProxyLister& remote) {
  const std::string who = "the job of mpiexec.hydra " + std::to_string(launcher);
  std::string unlisted;  // remote hosts whose ranks could not be listed
  for (const auto& proxy : job.remote) {
    if (!remote || proxy.host.empty() || proxy.control_port.empty() || proxy.proxy_id.empty()) {
      unlisted += (unlisted.empty() ? "" : ", ") +
                  (proxy.host.empty() ? std::string("the nodes of its job") : proxy.host) + " (through " + proxy.via +
                  ")";
      continue;
    }
    auto there = remote(proxy);
    if (!there) {
      return Error{"cannot list the ranks of " + who + " on " + proxy.host + ": " + there.error(),
                   there.error_kind()};
    }
    if (there->size != 0 && job.size != 0 && there->size != job.size) {
      return Error{"the ranks of " + who + " disagree on PMI_SIZE (" + std::to_string(job.size) + " here, " +
                   std::to_string(there->size) + " on " + proxy.host + ")"};
    }
    if (job.size == 0) job.size = there->size;
    job.ranks.insert(job.ranks.end(), there->ranks.begin(), there->ranks.end());
  }
  std::sort(job.ranks.begin(), job.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  for (std::size_t i = 1; i < job.ranks.size(); ++i) {
    if (job.ranks[i].rank == job.ranks[i - 1].rank) {
      return Error{who + " has rank " + std::to_string(job.ranks[i].rank) + " twice: process " +
                   std::to_string(job.ranks[i - 1].pid) + " on " + job.ranks[i - 1].host + " and process " +
                   std::to_string(job.ranks[i].pid) + " on " + job.ranks[i].host};
    }
  }
  if (job.size != 0 && job.ranks.size() == job.size && job.ranks.back().rank == job.size - 1) {
    return JobRanks{std::move(job.ranks), RankSource::hydra_proxies};
  }
  std::vector<Rank> absent;
  for (std::uint32_t r = 0, i = 0; r < job.size; ++r) {
    if (i < job.ranks.size() && job.ranks[i].rank == r) {
      ++i;
    } else {
      absent.push_back(r);
    }
  }
  const std::string which = job.size == 0 ? std::string("all its ranks")
                                          : "ranks " + format_rank_ranges(absent) + " of " + std::to_string(job.size);
  if (!unlisted.empty()) {
    return Error{who + " has " + which + " on other hosts: " + unlisted +
                 ". canopy stack lists an MPICH job's ranks on another host through the host of its proxy's "
                 "launcher command (ssh HOST hydra_pmi_proxy ...): not for a proxy started by srun (under Slurm, "
                 "use --slurm-job)"};
  }
  return Error{who + " has not started " + which + " yet (no process of its hydra_pmi_proxy with that PMI_RANK); "
                     "try again in a moment, or start the job with --mpirun-cmd, which waits for its ranks"};
}

// One look at the process tree: nullopt when `launcher` leads no hydra proxy.
std::optional<Result<JobRanks>> hydra_attempt(pid_t launcher, const std::string& this_host,
                                              const RemoteProxyLister& remote) {
  const auto processes = list_processes();
  if (!leads_hydra_proxies(launcher, processes)) return std::nullopt;
  auto job = hydra_ranks(launcher, processes, this_host);
  if (!job) return Result<JobRanks>{Error{job.error(), job.error_kind()}};
  return complete_hydra_job(launcher, std::move(*job), remote);
}

}  // namespace

std::string describe(RankSource source) {
  switch (source) {
    case RankSource::mpir_table: return "ranks found through the launcher's MPIR table";
    case RankSource::hydra_proxies: return "ranks found through hydra's proxies and PMI_RANK (no MPIR table)";
  }
  return "";
}

Result<JobRanks> find_job_ranks(pid_t launcher, const std::string& this_host, const RemoteProxyLister& remote) {
  auto table = read_proctable(launcher);
  if (table) return JobRanks{std::move(*table), RankSource::mpir_table};
  if (auto hydra = hydra_attempt(launcher, this_host, remote)) return std::move(*hydra);
  // MPICH's launcher caught before it has started its proxies (a tool run right after
  // the job, as tests/netns/stack_hydra_over_namespaces.sh once did): not "not an MPI
  // launcher".
  if (const std::string name = process_name(launcher); name == "mpiexec.hydra" || name == "mpiexec.mpich") {
    if (kill(launcher, 0) == 0) {
      return Error{"process " + std::to_string(launcher) + " (" + name +
                   ") has no MPIR table and has not started its hydra_pmi_proxy yet: the job is starting; try "
                   "again in a moment, or start the job with --mpirun-cmd, which waits for its ranks"};
    }
  }
  return Error{table.error(), table.error_kind()};
}

Result<JobRanks> wait_for_job_ranks(pid_t launcher, const std::string& this_host, std::chrono::milliseconds timeout,
                                    const RemoteProxyLister& remote) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    // A launcher that leads hydra proxies gets one look for its MPIR table per round,
    // so that the process tree is read often; another one is polled for its table.
    const bool hydra = leads_hydra_proxies(launcher, list_processes());
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    auto table = wait_for_proctable(launcher, hydra ? milliseconds(1) : std::clamp(left, milliseconds(1), milliseconds(250)));
    if (table) return JobRanks{std::move(*table), RankSource::mpir_table};
    Result<JobRanks> last = Error{table.error(), table.error_kind()};
    if (kill(launcher, 0) != 0 && errno == ESRCH) return last;
    if (hydra) {
      if (auto found = hydra_attempt(launcher, this_host, remote)) {
        if (*found) return std::move(*found);
        last = std::move(*found);
      }
    }
    if (Clock::now() >= deadline) return last;
    std::this_thread::sleep_for(milliseconds(hydra ? 100 : 50));
  }
}

}  // namespace canopy::stack
