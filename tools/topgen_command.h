// canopy topgen: writes a generated topology, YAML or MRNet's format (docs/topology.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>

namespace canopy::tools {

struct TopgenOptions {
  std::string spec;
  std::string host = "localhost";  // every process here, unless a host list is given
  std::string hosts;               // --hosts "h1:4,h2:4"
  std::string hostfile;            // --hostfile FILE: the same entries, one or more a line
  std::string format = "yaml";
  std::size_t backends = 0;        // --backends N: leaves are commnodes, N back-ends spread below them
  std::string output;
};

// Adds the `topgen` subcommand to `app`, its options written into `options`.
CLI::App* add_topgen_command(CLI::App& app, TopgenOptions& options);

// Runs it. Exit status 2 for anything the user gave wrong, 1 when the output
// cannot be written.
int run_topgen(const TopgenOptions& options);

}  // namespace canopy::tools
