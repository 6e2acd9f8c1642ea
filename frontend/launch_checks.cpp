// The checks of Network::launch()'s options before anything starts.
#include "launch_checks.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/process.h"
#include "programs.h"

namespace canopy::frontend {

Result<void> check_launch_options(LaunchOptions& options) {
  const bool attach = !options.attach_file.empty();
  if (options.open_attach && !attach) {
    return Error{"open attach is a kind of attach mode: give an attach file too", ErrorKind::invalid_input};
  }
  if (!attach && (options.backend_argv.empty() || options.backend_argv[0].empty())) {
    return Error{"no back-end program given (LaunchOptions::backend_argv)", ErrorKind::invalid_input};
  }
  if (options.open_attach && std::none_of(options.topology.nodes().begin(), options.topology.nodes().end(),
                                          [](const canopy::TopologyNode& n) { return n.role == Role::commnode; })) {
    return Error{"open attach needs a commnode for back-ends to join under; the topology has none",
                 ErrorKind::invalid_input};
  }
  if (options.topology.backends().empty() && !options.open_attach) {
    return Error{"the topology has no back-ends", ErrorKind::invalid_input};
  }
  if (const auto& ft = options.fault_tolerance;
      ft.enabled && !(ft.heartbeat.count() > 0 && ft.heartbeat < ft.suspect && ft.suspect < ft.lost)) {
    return Error{"fault tolerance needs 0 < heartbeat < suspect < lost (got " + std::to_string(ft.heartbeat.count()) +
                 ", " + std::to_string(ft.suspect.count()) + " and " + std::to_string(ft.lost.count()) + " ms)", ErrorKind::invalid_input};
  }
  if (options.method != LaunchMethod::spawn) {
    const bool slurm = options.method == LaunchMethod::slurm;
    const std::string through = slurm ? "a launch through Slurm" : "a launch through mpirun";
    if (attach) return Error{"attach mode and " + through + " exclude each other", ErrorKind::invalid_input};
    if (options.mrnet_backend_args) {
      return Error{through + " does not give back-ends MRNet's arguments", ErrorKind::invalid_input};
    }
    const char* job = std::getenv("SLURM_JOB_ID");
    if (slurm && (!job || !*job)) {
      return Error{"a launch through Slurm runs inside an allocation (salloc, sbatch): SLURM_JOB_ID is not set",
                   ErrorKind::invalid_input};
    }
    const char* tool = slurm ? "srun" : "mpirun";
    if (!on_path(tool)) return Error{through + " needs " + tool + ", which is not on PATH", ErrorKind::invalid_input};
  }
  if (options.method == LaunchMethod::spawn && !attach) {
    // Started here: the processes on the front-end's host; a back-end runs two
    // threads (the program's and the network's), a commnode one. b:1000^2 was taken
    // and failed 17 s and 1.7 GB later (issue 45).
    const std::string& here = options.topology.root().host;
    std::size_t tasks = 0;
    for (const auto& n : options.topology.nodes()) {
      if (n.host == here && n.rank != options.topology.root().rank) tasks += n.role == Role::backend ? 2 : 1;
    }
    if (auto room = core::room_for_tasks(tasks); !room) return Error{room.error(), ErrorKind::invalid_input};
  }
  if (!options.reattach_file.empty() && options.fault_tolerance.keep_tree_for.count() == 0) {
    return Error{"a re-attach file is for a tree kept after its front-end: set keep_tree_for too",
                 ErrorKind::invalid_input};
  }
  if (const auto& ft = options.fault_tolerance; ft.keep_tree_for.count() > 0) {
    if (!ft.enabled) return Error{"keeping the tree after the front-end (keep_tree_for) needs fault tolerance on",
                                  ErrorKind::invalid_input};
    const auto& root = options.topology.root();
    if (std::none_of(root.children.begin(), root.children.end(),
                     [&](Rank r) { return options.topology.at(r).role == Role::commnode; })) {
      return Error{"keeping the tree after the front-end (keep_tree_for) needs a commnode under the front-end to "
                   "take its place; this topology has back-ends only there",
                   ErrorKind::invalid_input};
    }
  }
  // The topology's gossip settings apply unless the options turn gossip on themselves.
  if (options.fault_tolerance.gossip.schedule == GossipSchedule::off && options.topology.gossip()) {
    options.fault_tolerance.gossip = *options.topology.gossip();
  }
  if (const auto& g = options.fault_tolerance.gossip; g.schedule != GossipSchedule::off && g.period.count() < 10) {
    return Error{"the gossip period must be at least 10 ms (got " + std::to_string(g.period.count()) + " ms)",
                 ErrorKind::invalid_input};
  }
  return {};
}

}  // namespace canopy::frontend
