// canopy stack: the merged stack traces of every rank of a running MPI job
// (docs/stack.md), as STAT gives them over MRNet. Finds the job's ranks from its
// launcher (its MPIR table, or hydra's process tree: stack/job_ranks.h), starts one tool daemon (canopy-stackd) per host of the job in a
// Canopy tree, has every daemon walk the stacks of its host's ranks, merges the call
// trees in the tree (prefix_tree), and writes the result.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace canopy::tools {

struct StackOptions {
  std::optional<pid_t> mpirun;     // the launcher of a running job
  std::string mpirun_cmd;          // or: start this job, then walk it
  std::string slurm_job;           // or: the ranks of this Slurm job (docs/launch.md)
  int after_ms = 0;                // launch form: wait this long once the job is up
  int proctable_timeout_ms = 60000;
  unsigned samples = 1;
  unsigned interval_ms = 100;
  bool lines = false, threads = false, mpi_internals = false;
  bool full = false;               // keep the C runtime's start-up frames above main
  std::string format = "text";     // text, dot, svg, json
  std::string output;              // "": standard output
  unsigned fanout = 32;            // daemons per commnode
  std::string launcher = "ssh {host} {command}";
  std::vector<std::string> addresses;  // HOST=ADDRESS
  int startup_timeout_ms = 10000;
  int lost_ms = 60000;             // a silent daemon is lost after this long
  int timeout_ms = 60000;          // for the merged tree
  bool timings = false;
};

// Adds `canopy stack` to `app`, filling `options`.
CLI::App* add_stack_command(CLI::App& app, StackOptions& options);

// Runs it: 0 when every rank was walked, 1 on an error (a message on stderr) or when
// some ranks are missing from the result (which is still written).
int run_stack(const StackOptions& options);

}  // namespace canopy::tools
