// `canopy attach-frontend STATUSFILE`: a new front-end for a tree that outlived its
// own (`canopy run --keep-tree-for`; docs/fault-tolerance.md, "When the front-end
// fails"). It re-attaches through the re-attach file named in STATUSFILE, takes the
// status file over, and carries the run on: the union workload to its end and its
// check, as `canopy run` would have; any other run, by printing results and events
// until it is interrupted (which shuts the tree down).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace canopy::tools {

struct AttachFrontendOptions {
  std::string status_file;
  std::string format = "text";
  std::string record_dir;  // default: the run's own --record
  double timeout_s = 10;
};

// Adds `canopy attach-frontend` to `app`, filling `options`.
CLI::App* add_attach_frontend_command(CLI::App& app, AttachFrontendOptions& options);

// Runs it: the exit status of the run it carries on (as `canopy run`'s), 2 for bad
// input (the run's front-end alive, the run over, not kept).
int run_attach_frontend(const AttachFrontendOptions& options);

}  // namespace canopy::tools
