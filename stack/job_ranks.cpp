#include "stack/job_ranks.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "canopy/call_tree.h"
#include "stack/hydra.h"

namespace canopy::stack {
namespace {

// The ranks of a hydra job, all of them or an error that says which are not here.
Result<JobRanks> complete_hydra_job(pid_t launcher, HydraJob job) {
  if (job.size != 0 && job.ranks.size() == job.size) return JobRanks{std::move(job.ranks), RankSource::hydra_proxies};
  std::vector<Rank> absent;
  for (std::uint32_t r = 0, i = 0; r < job.size; ++r) {
    if (i < job.ranks.size() && job.ranks[i].rank == r) {
      ++i;
    } else {
      absent.push_back(r);
    }
  }
  const std::string who = "the job of mpiexec.hydra " + std::to_string(launcher);
  const std::string which = job.size == 0 ? std::string("all its ranks")
                                          : "ranks " + format_rank_ranges(absent) + " of " + std::to_string(job.size);
  if (!job.remote.empty()) {
    std::string hosts;
    for (const auto& proxy : job.remote) {
      hosts += (hosts.empty() ? "" : ", ") + (proxy.host.empty() ? std::string("the nodes of its job") : proxy.host) +
               " (through " + proxy.via + ")";
    }
    return Error{who + " has " + which + " on other hosts: " + hosts +
                 ". Without an MPIR table canopy stack finds an MPICH job's ranks on the launcher's host only: run "
                 "it on a host with all the ranks, or under Slurm use --slurm-job"};
  }
  return Error{who + " has not started " + which + " yet (no process of the hydra_pmi_proxy with that PMI_RANK); "
                     "try again in a moment, or start the job with --mpirun-cmd, which waits for its ranks"};
}

// One look at the process tree: nullopt when `launcher` leads no hydra proxy.
std::optional<Result<JobRanks>> hydra_attempt(pid_t launcher, const std::string& this_host) {
  const auto processes = list_processes();
  if (!leads_hydra_proxies(launcher, processes)) return std::nullopt;
  auto job = hydra_ranks(launcher, processes, this_host);
  if (!job) return Result<JobRanks>{Error{job.error(), job.error_kind()}};
  return complete_hydra_job(launcher, std::move(*job));
}

}  // namespace

std::string describe(RankSource source) {
  switch (source) {
    case RankSource::mpir_table: return "ranks found through the launcher's MPIR table";
    case RankSource::hydra_proxies: return "ranks found through hydra's proxies and PMI_RANK (no MPIR table)";
  }
  return "";
}

Result<JobRanks> find_job_ranks(pid_t launcher, const std::string& this_host) {
  auto table = read_proctable(launcher);
  if (table) return JobRanks{std::move(*table), RankSource::mpir_table};
  if (auto hydra = hydra_attempt(launcher, this_host)) return std::move(*hydra);
  return Error{table.error(), table.error_kind()};
}

Result<JobRanks> wait_for_job_ranks(pid_t launcher, const std::string& this_host, std::chrono::milliseconds timeout) {
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
      if (auto found = hydra_attempt(launcher, this_host)) {
        if (*found) return std::move(*found);
        last = std::move(*found);
      }
    }
    if (Clock::now() >= deadline) return last;
    std::this_thread::sleep_for(milliseconds(hydra ? 100 : 50));
  }
}

}  // namespace canopy::stack
