// Balanced trees from specs such as "b:16^2" or "b:2x4x8".
#include <charconv>

#include "canopy/topology.h"

namespace canopy {
namespace {

// Beyond this a spec is a typo, not a tree: it would take gigabytes to hold.
constexpr std::uint64_t kMaxNodes = 1'100'000;

constexpr std::string_view kUsage = "use b:F^D or b:FxF";

Error bad_spec(std::string_view spec, const std::string& problem) {
  return Error{"bad topology spec '" + std::string(spec) + "': " + problem + " (" + std::string(kUsage) + ")"};
}

// A fan-out or a depth: a whole number of at least 1, and nothing else.
Result<std::uint32_t> parse_count(std::string_view text, std::string_view spec, const char* what) {
  if (text.empty()) return bad_spec(spec, std::string("missing ") + what);
  std::uint32_t count = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec == std::errc::result_out_of_range) return bad_spec(spec, std::string(what) + " " + std::string(text) + " is too large");
  if (ec != std::errc() || end != text.data() + text.size()) {
    return bad_spec(spec, std::string(what) + " '" + std::string(text) + "' is not a whole number");
  }
  if (count == 0) return bad_spec(spec, std::string(what) + " must be at least 1");
  return count;
}

// The fan-out of each level, root first: "F^D" is D times F, "F1xF2x..." lists them.
Result<std::vector<std::uint32_t>> parse_fanouts(std::string_view spec) {
  std::string_view body = spec;
  if (auto colon = body.find(':'); colon != std::string_view::npos) {
    std::string_view prefix = body.substr(0, colon + 1);
    if (prefix == "k:" || prefix == "g:") {
      return Error{"topology spec prefix '" + std::string(prefix) + "' is not supported yet; " + std::string(kUsage)};
    }
    if (prefix != "b:") return bad_spec(spec, "unknown prefix '" + std::string(prefix) + "'");
    body.remove_prefix(colon + 1);
  }
  if (auto caret = body.find('^'); caret != std::string_view::npos) {
    auto fanout = parse_count(body.substr(0, caret), spec, "fan-out");
    if (!fanout) return Error{fanout.error()};
    auto depth = parse_count(body.substr(caret + 1), spec, "depth");
    if (!depth) return Error{depth.error()};
    // Every level adds at least one node: a deeper tree is over the limit anyway.
    if (*depth > kMaxNodes) return bad_spec(spec, "depth " + std::to_string(*depth) + " is too large");
    return std::vector<std::uint32_t>(*depth, *fanout);
  }
  std::vector<std::uint32_t> fanouts;
  for (std::size_t start = 0;;) {
    std::size_t x = body.find('x', start);
    auto fanout = parse_count(body.substr(start, x == std::string_view::npos ? x : x - start), spec, "fan-out");
    if (!fanout) return Error{fanout.error()};
    fanouts.push_back(*fanout);
    if (x == std::string_view::npos) return fanouts;
    start = x + 1;
  }
}

// The number of nodes; refuses trees that are absurdly large, or whose back-end
// ranks (0..N-1) would run into the front-end's rank kFirstInternalRank.
Result<std::size_t> count_nodes(std::string_view spec, const std::vector<std::uint32_t>& fanouts) {
  std::uint64_t total = 1, level = 1;
  for (std::uint32_t fanout : fanouts) {
    level *= fanout;  // no overflow: level <= kMaxNodes before, fanout < 2^32
    total += level;
    if (total > kMaxNodes) {
      return Error{"topology spec '" + std::string(spec) + "' gives more than " + std::to_string(kMaxNodes) +
                   " processes; that is not a tree Canopy can launch"};
    }
  }
  if (level > kFirstInternalRank) {
    return Error{"topology spec '" + std::string(spec) + "' gives " + std::to_string(level) +
                 " back-ends; generated trees allow at most " + std::to_string(kFirstInternalRank)};
  }
  return static_cast<std::size_t>(total);
}

Node make_node(Rank rank, Role role, std::string_view host) {
  Node node;
  node.rank = rank;
  node.role = role;
  node.host = std::string(host);
  return node;
}

}  // namespace

Result<Topology> generate_topology(std::string_view spec, std::string_view host) {
  auto fanouts = parse_fanouts(spec);
  if (!fanouts) return Error{fanouts.error()};
  auto size = count_nodes(spec, *fanouts);
  if (!size) return Error{size.error()};

  // Level by level, left to right: back-ends are numbered 0..N-1 in that order,
  // the front-end and commnodes kFirstInternalRank and up in breadth-first order.
  std::vector<Node> nodes;
  nodes.reserve(*size);
  nodes.push_back(make_node(kFirstInternalRank, Role::frontend, host));
  Rank next_internal = kFirstInternalRank + 1;
  Rank next_backend = 0;
  std::size_t level_begin = 0;
  for (std::size_t depth = 0; depth < fanouts->size(); ++depth) {
    bool leaves = depth + 1 == fanouts->size();
    std::size_t level_end = nodes.size();
    for (std::size_t parent = level_begin; parent < level_end; ++parent) {
      for (std::uint32_t i = 0; i < (*fanouts)[depth]; ++i) {
        Node child = leaves ? make_node(next_backend++, Role::backend, host)
                            : make_node(next_internal++, Role::commnode, host);
        child.parent = nodes[parent].rank;
        nodes[parent].children.push_back(child.rank);
        nodes.push_back(std::move(child));
      }
    }
    level_begin = level_end;
  }
  return Topology::make(std::move(nodes), {}, "generated tree '" + std::string(spec) + "'");
}

}  // namespace canopy
