// Balanced tree generation from specs such as "b:16^2" or "b:2x4x8".
#include <charconv>

#include "canopy/topology.h"

namespace canopy {
namespace {

constexpr std::uint64_t kMaxNodes = 1100000;

Result<std::uint32_t> parse_count(std::string_view text, std::string_view spec, const char* what) {
  std::uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Error{"bad topology spec '" + std::string(spec) + "': " + what + " '" + std::string(text) +
                 "' is not a whole number"};
  }
  if (value == 0) return Error{"bad topology spec '" + std::string(spec) + "': " + what + " must be at least 1"};
  return value;
}

}  // namespace

Result<Topology> generate_topology(std::string_view spec, std::string_view host) {
  std::string_view body = spec;
  if (auto colon = body.find(':'); colon != std::string_view::npos) {
    std::string_view prefix = body.substr(0, colon);
    if (prefix != "b") {
      return Error{"topology spec prefix '" + std::string(prefix) + ":' is not supported yet; use b:F^D or b:FxF"};
    }
    body = body.substr(colon + 1);
  }
  std::vector<std::uint32_t> fanouts;
  if (auto caret = body.find('^'); caret != std::string_view::npos) {
    auto fanout = parse_count(body.substr(0, caret), spec, "fan-out");
    if (!fanout) return Error{fanout.error()};
    auto depth = parse_count(body.substr(caret + 1), spec, "depth");
    if (!depth) return Error{depth.error()};
    if (*depth > 64) return Error{"bad topology spec '" + std::string(spec) + "': depth " + std::to_string(*depth) + " is too deep"};
    fanouts.assign(*depth, *fanout);
  } else {
    std::size_t start = 0;
    while (true) {
      auto x = body.find('x', start);
      auto fanout = parse_count(body.substr(start, x == std::string_view::npos ? x : x - start), spec, "fan-out");
      if (!fanout) return Error{fanout.error()};
      fanouts.push_back(*fanout);
      if (x == std::string_view::npos) break;
      start = x + 1;
    }
  }
  std::uint64_t total = 1, level = 1;
  for (auto f : fanouts) {
    level *= f;
    total += level;
    if (total > kMaxNodes) {
      return Error{"topology spec '" + std::string(spec) + "' gives more than " + std::to_string(kMaxNodes) +
                   " processes"};
    }
  }

  // Build level by level. Back-ends take ranks 0..N-1 left to right; the front-end
  // and commnodes take kFirstInternalRank and up in breadth-first order.
  std::vector<Node> nodes;
  nodes.reserve(total);
  Rank next_internal = kFirstInternalRank;
  Rank next_backend = 0;
  Node root;
  root.rank = next_internal++;
  root.role = Role::frontend;
  root.host = std::string(host);
  nodes.push_back(root);
  std::vector<std::size_t> current{0};
  for (std::size_t depth = 0; depth < fanouts.size(); ++depth) {
    bool leaves = depth + 1 == fanouts.size();
    std::vector<std::size_t> next;
    for (std::size_t parent : current) {
      for (std::uint32_t i = 0; i < fanouts[depth]; ++i) {
        Node n;
        n.rank = leaves ? next_backend++ : next_internal++;
        n.role = leaves ? Role::backend : Role::commnode;
        n.host = std::string(host);
        n.parent = nodes[parent].rank;
        nodes[parent].children.push_back(n.rank);
        next.push_back(nodes.size());
        nodes.push_back(std::move(n));
      }
    }
    current = std::move(next);
  }
  return Topology::make(std::move(nodes), {}, "generated " + std::string(spec));
}

}  // namespace canopy
