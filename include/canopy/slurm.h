// The Slurm allocation a front-end runs in, for a launch by level
// (LaunchMethod::slurm) of a generated tree: its nodes, in order, with the address
// Slurm reaches each by, to give generate_spread_topology() (docs/launch.md).
#pragma once

#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"

namespace canopy {

struct SlurmAllocation {
  std::string job;          // SLURM_JOB_ID
  std::vector<Host> nodes;  // name and NodeAddr (address "" where it is not numeric)
  // The node this process runs on: SLURMD_NODENAME (in a batch script or a step),
  // else this host's name up to its first dot (salloc runs its command where it was
  // typed, which may not be a node of the allocation).
  std::string this_host;
};

// Asks Slurm (scontrol show hostnames, sinfo) about the allocation of SLURM_JOB_ID
// and SLURM_JOB_NODELIST. Fails, saying why, outside an allocation or when the
// commands fail.
Result<SlurmAllocation> slurm_allocation();

}  // namespace canopy
