// canopy topgen: writes a generated topology, YAML or MRNet's format (docs/topology.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "canopy/topology.h"

namespace canopy::tools {

struct TopgenOptions {
  std::string spec;
  std::string host = "localhost";  // every process here, unless a host list is given
  std::string hosts;               // --hosts "h1:4,h2:4"
  std::string hostfile;            // --hostfile FILE: the same entries, one or more a line
  std::string format = "yaml";
  std::size_t backends = 0;        // --backends N: leaves are commnodes, N back-ends spread below them
  std::string output;
  bool print_placement = false;    // say on standard error which processes each host got
};

// A host list given as text ("h1:4,h2:4") or as a file of such entries (`#`
// comments): a file when `file` is set, else `text`; `what` names the option in
// errors.
canopy::Result<std::vector<canopy::HostSlots>> read_host_list(const std::string& text, const std::string& file,
                                                              const std::string& what);

// Writes describe_placement(topology) on standard error, each line after `prefix`.
void print_placement(const canopy::Topology& topology, const std::string& prefix);

// Adds the `topgen` subcommand to `app`, its options written into `options`.
CLI::App* add_topgen_command(CLI::App& app, TopgenOptions& options);

// Runs it. Exit status 2 for anything the user gave wrong, 1 when the output
// cannot be written.
int run_topgen(const TopgenOptions& options);

}  // namespace canopy::tools
