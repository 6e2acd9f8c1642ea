// BulkLaunch: the front-end's side of a launch through Slurm or mpirun (docs/launch.md).
//
// Instead of every parent starting each of its remote children with one launcher
// command each, the front-end starts them all itself, one `srun` step per level: the
// step of level d runs one task per process of depth d that is not on its parent's
// host, placed on its own host by a host file (--distribution=arbitrary), each task
// `canopy-bulk-task`, which reads its rank and its parent's endpoint from the step's
// table on standard input (with the secret, as a launcher's child reads it) and runs
// the commnode or back-end program. A child on its parent's host is started by the
// parent, locally, as always (a commnode's back-ends, most often). A level starts
// once every parent of its processes listens (commnodes report it: Listening).
//
// With mpirun (LaunchPlan::BulkTool::mpirun) a level is one `mpirun`: a rank file
// places the tasks, the table travels in the environment, and --enable-recovery keeps
// a process's failure from ending its level's others (the tree heals it).
//
// The steps are this node's child processes: srun ends when its tasks end. stop()
// gives them a moment to end so, then ends those still running (SIGTERM, which srun
// and mpirun pass to their tasks), and waits a little for them.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "core/service_context.h"
#include "core/process.h"

namespace canopy::services {

class BulkLaunch {
 public:
  // Root only; `node` is borrowed. `on_step_exit(level, status)` is called when a
  // step's srun exits.
  BulkLaunch(core::ServiceContext& node, std::function<void(std::size_t level, int status)> on_step_exit);
  ~BulkLaunch();
  BulkLaunch(const BulkLaunch&) = delete;
  BulkLaunch& operator=(const BulkLaunch&) = delete;

  // Levels below the root (1 is the root's children), and the ranks each starts
  // (those not on their parent's host; may be none).
  std::size_t levels() const { return levels_.size(); }
  const std::vector<Rank>& level(std::size_t level) const { return levels_.at(level - 1); }
  // Whether every parent of `level`'s processes has its port in `ports`.
  bool ready(std::size_t level, const std::map<Rank, std::uint16_t>& ports) const;
  // Starts the step of `level` (nothing if it starts no process); the ports of every
  // parent of its processes must be in `ports` (the root's too).
  Result<void> start(std::size_t level, const std::map<Rank, std::uint16_t>& ports);
  // Ends the steps: up to `settle` for them to end by themselves (their tasks leave
  // at an orderly shutdown), then SIGTERM to those still running and up to `grace`
  // for them to exit.
  void stop(std::chrono::milliseconds settle, std::chrono::milliseconds grace);
  // "srun step of level 2", "mpirun of level 2": for messages.
  std::string step_name(std::size_t level) const;
  // Under Slurm: asks squeue, without blocking the loop, whether the allocation
  // (SLURM_JOB_ID) still runs, and calls `done(state)` with the job's state (RUNNING,
  // CANCELLED, TIMEOUT, ..., or GONE: no longer in the queue), or with "" where squeue
  // could not say. A call while a question is under way is dropped.
  void ask_allocation_state(std::function<void(const std::string& state)> done);

 private:
  void wait_for_steps(std::chrono::steady_clock::time_point deadline) const;
  core::ServiceContext& node_;
  std::function<void(std::size_t, int)> on_step_exit_;
  std::vector<std::vector<Rank>> levels_;
  std::vector<std::unique_ptr<core::ChildProcess>> steps_;
  std::unique_ptr<core::ChildProcess> squeue_;  // the question under way
  std::string dir_;  // the steps' host files
};

}  // namespace canopy::services
