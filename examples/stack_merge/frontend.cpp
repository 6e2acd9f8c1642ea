// stack_merge's front-end: asks every back-end for its call paths on a stream with
// the built-in prefix_tree filter, which merges the back-ends' call trees inside the
// tree, checks the merged tree against the paths it expects (call_paths.h), writes it
// as Graphviz DOT, and renders it as SVG if `dot` is on PATH.
//
//   stack_merge_frontend [--tree SPEC] [--output FILE]
//     --tree    default b:2^2 (2 commnodes, 4 back-ends)
//     --output  the DOT file, default stack_merge.dot; the SVG goes beside it
//
// The back-end program is found beside this program; canopy-commnode on PATH or in
// $CANOPY_COMMNODE.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>

#include <canopy/call_tree.h>
#include <canopy/frontend.h>

#include "call_paths.h"

extern char** environ;

namespace {

int fail(const std::string& message) {
  std::cerr << "stack_merge_frontend: " << message << "\n";
  return 1;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  for (std::string_view rest = path; !rest.empty();) {
    auto colon = rest.find(':');
    std::filesystem::path dir(std::string(rest.substr(0, colon)));
    if (!dir.empty() && access((dir / program).c_str(), X_OK) == 0) return true;
    rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
  }
  return false;
}

// Runs `dot -Tsvg dot_file -o svg_file`; true if it succeeded.
bool render_svg(const std::filesystem::path& dot_file, const std::filesystem::path& svg_file) {
  std::string in = dot_file.string(), out = svg_file.string();
  const char* argv[] = {"dot", "-Tsvg", in.c_str(), "-o", out.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawnp(&pid, "dot", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) return false;
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "b:2^2";
  std::filesystem::path output = "stack_merge.dot";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 < argc && arg == "--tree") {
      spec = argv[++i];
    } else if (i + 1 < argc && arg == "--output") {
      output = argv[++i];
    } else {
      std::cerr << "usage: stack_merge_frontend [--tree SPEC] [--output FILE]\n";
      return 2;
    }
  }
  auto topology = canopy::generate_topology(spec);
  if (!topology) return fail(topology.error());

  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {
      (std::filesystem::canonical("/proc/self/exe").parent_path() / "stack_merge_backend").string()};
  auto network = canopy::Network::launch(std::move(options));
  if (!network) return fail(network.error());
  auto& net = **network;

  auto stream = net.create_stream({.upstream_filter = "prefix_tree"});
  if (!stream) return fail(stream.error());
  if (auto sent = net.broadcast(*stream, canopy::Packet{stack_merge::kSampleTag, {}}); !sent) {
    return fail(sent.error());
  }
  auto in = net.receive(std::chrono::seconds(20));
  if (!in) return fail(in.error());
  if (!*in) return fail("no merged tree within 20 s");
  auto merged = canopy::CallTree::from_packet((*in)->packet);
  if (!merged) return fail(merged.error());
  if (auto down = net.shutdown(); !down) return fail(down.error());

  // The tree the front-end would have built had it seen every back-end's paths itself.
  canopy::CallTree expected;
  for (canopy::Rank rank : topology->backends()) {
    for (const auto& path : stack_merge::call_paths(rank)) expected.add_path(path, rank);
  }
  std::cout << "merged call tree of " << (*in)->packet.contributors() << " back-ends: " << merged->node_count()
            << " frames, ranks " << canopy::format_rank_ranges(merged->ranks(canopy::CallTree::kRoot)) << "\n";
  if (!(*merged == expected)) {
    std::cerr << "expected:\n" << expected.to_dot() << "got:\n" << merged->to_dot();
    return fail("the merged tree is not the union of the back-ends' call paths");
  }

  if (std::error_code ec; output.has_parent_path()) std::filesystem::create_directories(output.parent_path(), ec);
  std::ofstream file(output);
  file << merged->to_dot();
  file.close();
  if (!file) return fail("cannot write " + output.string());
  std::cout << "DOT written to " << output.string() << "\n";
  auto svg = std::filesystem::path(output).replace_extension(".svg");
  if (!on_path("dot")) {
    std::cout << "graphviz is not installed (no `dot` on PATH), so no SVG; with it: dot -Tsvg " << output.string()
              << " -o " << svg.string() << "\n";
    return 0;
  }
  if (!render_svg(output, svg)) return fail("dot -Tsvg " + output.string() + " failed");
  std::cout << "SVG written to " << svg.string() << "\n";
  return 0;
}
