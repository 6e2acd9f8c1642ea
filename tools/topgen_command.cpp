#include "topgen_command.h"

#include <fstream>
#include <iostream>
#include <vector>

#include "canopy/topology.h"
#include "cli_checks.h"

namespace canopy::tools {

canopy::Result<std::vector<canopy::HostSlots>> read_host_list(const std::string& text, const std::string& file,
                                                              const std::string& what) {
  if (file.empty()) return canopy::parse_host_list(text, what);
  std::ifstream in(file, std::ios::binary);
  if (!in) return canopy::Error{what + ": cannot read host file " + file};
  std::string contents;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    contents.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (contents.size() > canopy::kMaxTopologyBytes) {
      return canopy::Error{file + ": larger than " + std::to_string(canopy::kMaxTopologyBytes >> 20) +
                           " MiB; is this a host file?"};
    }
  }
  if (in.bad() || !in.eof()) return canopy::Error{"cannot read host file " + file};
  return canopy::parse_host_list(contents, file);
}

void print_placement(const canopy::Topology& topology, const std::string& prefix) {
  for (const std::string& line : canopy::describe_placement(topology)) std::cerr << prefix << line << "\n";
  std::cerr << std::flush;
}


CLI::App* add_topgen_command(CLI::App& app, TopgenOptions& options) {
  auto* topgen_cmd = app.add_subcommand("topgen", "Write a generated topology (YAML or MRNet's format) to standard "
                                                  "output; exits with 2 on bad usage (docs/topology.md)");
  topgen_cmd->add_option("spec", options.spec,
                         "Tree spec: b:F^D (fan-out F, depth D), b:FxFx... (fan-out per level), k:K@N (k-nomial, "
                         "N processes), g:N:N,N:... (child counts level by level)")
      ->required();
  auto* host_opt = topgen_cmd->add_option("--host", options.host, "Host of every process")->capture_default_str();
  auto* hosts_opt = topgen_cmd->add_option("--hosts", options.hosts,
                                           "Hosts to place the tree on, host[:slots] separated by commas, the "
                                           "front-end on the first: without slot counts the tree is spread evenly, "
                                           "each commnode with its back-ends on one host; with counts, each host "
                                           "takes at most its slots, a commnode with its back-ends on the first host "
                                           "with room for them all (docs/topology.md)");
  topgen_cmd->add_option("--hostfile", options.hostfile, "Like --hosts, from a file: host[:slots] entries, # comments")
      ->check(CLI::ExistingFile)
      ->excludes(hosts_opt)
      ->excludes(host_opt);
  hosts_opt->excludes(host_opt);
  topgen_cmd->add_option("--format", options.format, "yaml (Canopy's) or mrnet (MRNet's host:N => host:N ;)")
      ->capture_default_str()
      ->check(CLI::IsMember({"yaml", "mrnet"}));
  topgen_cmd->add_option("--backends", options.backends,
                         "Attach mode: the spec's leaves become commnodes and N back-ends (ranks 0..N-1) are spread "
                         "over them in contiguous blocks")
      ->check(canopy::tools::in_range(std::size_t{1}, std::size_t{canopy::kFirstInternalRank}));
  topgen_cmd->add_option("-o,--output", options.output, "Output file (default: standard output)");
  topgen_cmd->add_flag("--print-placement", options.print_placement,
                       "Say on standard error which processes each host got, and which commnodes have back-ends on "
                       "other hosts");
  return topgen_cmd;
}

int run_topgen(const TopgenOptions& opt) {
  auto fail = [](const std::string& message, int code) {
    std::cerr << "canopy topgen: " << message << "\n";
    return code;
  };
  std::vector<canopy::HostSlots> list;
  if (!opt.hosts.empty() || !opt.hostfile.empty()) {
    auto hosts = read_host_list(opt.hosts, opt.hostfile, "--hosts");
    if (!hosts) return fail(hosts.error(), 2);
    list = std::move(*hosts);
  }
  if (list.empty()) list.push_back({opt.host, 0});
  auto leaves = opt.backends > 0 ? canopy::Leaves::commnodes : canopy::Leaves::backends;
  auto topology = canopy::generate_topology(opt.spec, list, leaves);
  if (!topology) return fail(topology.error(), 2);
  if (opt.backends > 0) {
    topology = canopy::attach_backends(*topology, opt.backends);
    if (!topology) return fail(topology.error(), 2);
  }
  if (opt.print_placement) print_placement(*topology, "");
  std::string text;
  if (opt.format == "mrnet") {
    auto mrnet = canopy::to_mrnet(*topology);
    if (!mrnet) return fail(mrnet.error(), 2);
    text = std::move(*mrnet);
  } else {
    text = canopy::to_yaml(*topology);
  }
  if (opt.output.empty() || opt.output == "-") {
    std::cout << text << std::flush;
    return std::cout ? 0 : fail("cannot write to standard output", 1);
  }
  std::ofstream out(opt.output);
  out << text;
  if (!out.flush()) return fail("cannot write " + opt.output, 1);
  return 0;
}
}  // namespace canopy::tools
