// Generated trees: the topgen specs (MRNet's b:, k: and g:), their placement on a
// host list or spread over a cluster's nodes, and back-ends added to a tree of
// commnodes.
//
// A spec gives only a shape; detail::number_tree() gives it ranks and roles by the
// same rule as MRNet's format, so a generated tree written with to_mrnet() reads
// back unchanged.
#include <algorithm>
#include <charconv>
#include <limits>

#include "canopy/topology.h"
#include "tree_shape.h"

namespace canopy {
namespace {

using detail::Shape;

// Beyond this a spec is a typo, not a tree: it would take gigabytes to hold.
constexpr std::uint64_t kMaxNodes = 1'100'000;

constexpr std::string_view kUsage = "use b:F^D, b:FxFx..., k:K@N or g:N:N,N:... (docs/topology.md)";

Error bad_spec(std::string_view spec, const std::string& problem) {
  return Error{"bad topology spec '" + std::string(spec) + "': " + problem + " (" + std::string(kUsage) + ")"};
}

Error too_many_nodes(std::string_view spec) {
  return Error{"topology spec '" + std::string(spec) + "' gives more than " + std::to_string(kMaxNodes) +
               " processes; that is not a tree Canopy can launch"};
}

// A whole number of at least `min`, and nothing else.
Result<std::uint32_t> parse_count(std::string_view text, std::string_view spec, const char* what, std::uint32_t min = 1) {
  if (text.empty()) return bad_spec(spec, std::string("missing ") + what);
  std::uint32_t count = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (ec == std::errc::result_out_of_range) return bad_spec(spec, std::string(what) + " " + std::string(text) + " is too large");
  if (ec != std::errc() || end != text.data() + text.size()) {
    return bad_spec(spec, std::string(what) + " '" + std::string(text) + "' is not a whole number");
  }
  if (count < min) return bad_spec(spec, std::string(what) + " must be at least " + std::to_string(min));
  return count;
}

// Splits at each `separator`; "a,,b" gives an empty middle part.
std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    std::size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

// Adds `count` children to `parent`, at the end of the shape.
void add_children(Shape& shape, std::size_t parent, std::uint64_t count) {
  for (std::uint64_t i = 0; i < count; ++i) {
    shape[parent].children.push_back(shape.size());
    shape.emplace_back();
  }
}

// b:F^D or b:F1xF2x...: every node of level i has the i-th fan-out.
Result<Shape> balanced(std::string_view body, std::string_view spec) {
  std::vector<std::uint32_t> fanouts;
  if (auto caret = body.find('^'); caret != std::string_view::npos) {
    auto fanout = parse_count(body.substr(0, caret), spec, "fan-out");
    if (!fanout) return Error{fanout.error()};
    auto depth = parse_count(body.substr(caret + 1), spec, "depth");
    if (!depth) return Error{depth.error()};
    // Every level adds at least one node: a deeper tree is over the limit anyway.
    if (*depth > kMaxNodes) return bad_spec(spec, "depth " + std::to_string(*depth) + " is too large");
    fanouts.assign(*depth, *fanout);
  } else {
    for (std::string_view part : split(body, 'x')) {
      auto fanout = parse_count(part, spec, "fan-out");
      if (!fanout) return Error{fanout.error()};
      fanouts.push_back(*fanout);
    }
  }
  std::uint64_t total = 1, level = 1;
  for (std::uint32_t fanout : fanouts) {
    level *= fanout;  // no overflow: level <= kMaxNodes before, fanout < 2^32
    total += level;
    if (total > kMaxNodes) return too_many_nodes(spec);
  }
  Shape shape(1);
  shape.reserve(total);
  std::size_t level_begin = 0;
  for (std::uint32_t fanout : fanouts) {
    std::size_t level_end = shape.size();
    for (std::size_t parent = level_begin; parent < level_end; ++parent) add_children(shape, parent, fanout);
    level_begin = level_end;
  }
  return shape;
}

// k:K@N, MRNet's k-nomial tree of N processes, the front-end included. It grows in
// rounds: in each, every node already in the tree, oldest first, gets K-1 new
// children, until the tree has N nodes. k:2@2^n is the binomial tree.
Result<Shape> knomial(std::string_view body, std::string_view spec) {
  auto at = body.find('@');
  if (at == std::string_view::npos) return bad_spec(spec, "a k-nomial spec is K@N");
  auto k = parse_count(body.substr(0, at), spec, "k-factor", 2);
  if (!k) return Error{k.error()};
  auto n = parse_count(body.substr(at + 1), spec, "number of processes", 2);
  if (!n) return Error{n.error()};
  if (*n > kMaxNodes) return too_many_nodes(spec);
  Shape shape(1);
  shape.reserve(*n);
  while (shape.size() < *n) {
    std::size_t in_tree = shape.size();
    for (std::size_t parent = 0; parent < in_tree && shape.size() < *n; ++parent) {
      add_children(shape, parent, std::min<std::uint64_t>(*k - 1, *n - shape.size()));
    }
  }
  return shape;
}

// g:N:N,N,KxN:..., MRNet's generic tree. Levels are separated by ':'; a level lists
// the child counts of the nodes of the level above, left to right, separated by
// ','; "KxN" stands for K nodes with N children each. The first level is the
// front-end's count. Nodes of a level left without a count have no children.
Result<Shape> generic(std::string_view body, std::string_view spec) {
  Shape shape(1);
  std::size_t level_begin = 0;
  std::vector<std::string_view> levels = split(body, ':');
  for (std::size_t depth = 0; depth < levels.size(); ++depth) {
    std::size_t level_end = shape.size();
    std::size_t parents = level_end - level_begin;
    struct Run {
      std::uint32_t nodes, children;
    };
    std::vector<Run> runs;
    std::uint64_t counted = 0, added = 0;
    for (std::string_view item : split(levels[depth], ',')) {
      Run run{1, 0};
      auto x = item.find('x');
      if (x != std::string_view::npos) {
        auto nodes = parse_count(item.substr(0, x), spec, "repeat count K of KxN");
        if (!nodes) return Error{nodes.error()};
        run.nodes = *nodes;
        item.remove_prefix(x + 1);
      }
      auto children = parse_count(item, spec, "child count", 0);
      if (!children) return Error{children.error()};
      run.children = *children;
      counted += run.nodes;
      if (counted > parents) {
        std::string level = depth == 0 ? "the first level (the front-end's)" : "level " + std::to_string(depth + 1);
        return bad_spec(spec, level + " gives child counts for " + std::to_string(counted) +
                                  " nodes or more, but the level above it has " + std::to_string(parents));
      }
      added += std::uint64_t{run.nodes} * run.children;
      if (shape.size() + added > kMaxNodes) return too_many_nodes(spec);
      runs.push_back(run);
    }
    if (depth == 0 && runs[0].children == 0) return bad_spec(spec, "the front-end needs at least one child");
    std::size_t parent = level_begin;
    for (const Run& run : runs) {
      for (std::uint32_t i = 0; i < run.nodes; ++i) add_children(shape, parent++, run.children);
    }
    level_begin = level_end;
  }
  return shape;
}

Result<Shape> shape_from_spec(std::string_view spec) {
  std::string_view body = spec;
  std::string_view kind = "b:";
  if (auto colon = body.find(':'); colon != std::string_view::npos) {
    kind = body.substr(0, colon + 1);
    body.remove_prefix(colon + 1);
  }
  if (kind == "b:") return balanced(body, spec);
  if (kind == "k:") return knomial(body, spec);
  if (kind == "g:") return generic(body, spec);
  return bad_spec(spec, "unknown prefix '" + std::string(kind) + "'");
}

std::string source_of(std::string_view spec) { return "generated tree '" + std::string(spec) + "'"; }

}  // namespace

Result<Topology> generate_topology(std::string_view spec, std::string_view host) {
  auto shape = shape_from_spec(spec);
  if (!shape) return Error{shape.error()};
  for (detail::ShapeNode& node : *shape) node.host = std::string(host);
  return detail::number_tree(*shape, Leaves::backends, source_of(spec));
}

Result<Topology> generate_topology(std::string_view spec, const std::vector<HostSlots>& hosts, Leaves leaves) {
  if (hosts.empty()) {
    auto shape = shape_from_spec(spec);
    if (!shape) return Error{shape.error()};
    return detail::number_tree(*shape, leaves, source_of(spec));
  }
  return generate_topology_on_hosts(spec, hosts.front().name, hosts, leaves);
}

Result<Topology> generate_topology_on_hosts(std::string_view spec, std::string_view frontend_host,
                                            const std::vector<HostSlots>& hosts, Leaves leaves) {
  if (hosts.empty()) return Error{"no hosts to place topology spec '" + std::string(spec) + "' on"};
  if (frontend_host.empty()) return Error{"the front-end's host has an empty name"};
  const bool counts = hosts.front().slots > 0;
  std::vector<std::string> names;
  for (const HostSlots& host : hosts) {
    if (host.name.empty()) return Error{"a host of the host list has an empty name"};
    if (std::find(names.begin(), names.end(), host.name) != names.end()) {
      return Error{"host '" + host.name + "' is named twice in the host list"};
    }
    if ((host.slots > 0) != counts) {
      return Error{"host '" + host.name + "' " + (counts ? "has no slot count" : "has a slot count") +
                   " where '" + hosts.front().name + "' " + (counts ? "has one" : "has none") +
                   "; give every host a count (host:slots) or none"};
    }
    names.push_back(host.name);
  }
  auto shape = shape_from_spec(spec);
  if (!shape) return Error{shape.error()};
  if (counts) {
    if (auto packed = detail::pack_on_hosts(*shape, frontend_host, hosts, spec); !packed) return Error{packed.error()};
  } else {
    detail::spread_over(*shape, frontend_host, names);
  }
  return detail::number_tree(*shape, leaves, source_of(spec));
}

Result<Topology> generate_spread_topology(std::string_view spec, std::string_view frontend_host,
                                          const std::vector<Host>& nodes) {
  if (nodes.empty()) return Error{"no nodes to spread topology spec '" + std::string(spec) + "' over"};
  if (frontend_host.empty()) return Error{"the front-end's host has an empty name"};
  std::vector<Host> hosts;
  std::vector<std::string> names;
  for (const Host& node : nodes) {
    if (node.name.empty()) return Error{"a node to spread the tree over has an empty name"};
    if (std::any_of(hosts.begin(), hosts.end(), [&](const Host& h) { return h.name == node.name; })) {
      return Error{"node '" + node.name + "' is named twice among the nodes to spread the tree over"};
    }
    hosts.push_back(node);
    names.push_back(node.name);
  }
  auto shape = shape_from_spec(spec);
  if (!shape) return Error{shape.error()};
  detail::spread_over(*shape, frontend_host, names);
  if (std::none_of(hosts.begin(), hosts.end(), [&](const Host& h) { return h.name == frontend_host; })) {
    hosts.insert(hosts.begin(), Host{std::string(frontend_host), "", {}, 0});
  }
  // The hosts the tree uses, in the nodes' order.
  std::erase_if(hosts, [&](const Host& h) {
    return std::none_of(shape->begin(), shape->end(), [&](const detail::ShapeNode& n) { return n.host == h.name; });
  });
  auto tree = detail::number_tree(*shape, Leaves::backends, source_of(spec));
  if (!tree) return tree;
  return Topology::make(tree->nodes(), std::move(hosts), source_of(spec));
}

Result<Topology> attach_backends(const Topology& commnode_tree, std::size_t count) {
  const std::string what = "cannot attach back-ends: ";
  if (count == 0) return Error{what + "the number of back-ends must be at least 1"};
  if (count > kFirstInternalRank) {
    return Error{what + std::to_string(count) + " back-ends is more than " + std::to_string(kFirstInternalRank) +
                 ", where their ranks would reach the front-end's"};
  }
  if (auto backends = commnode_tree.backends(); !backends.empty()) {
    return Error{what + "the tree already has " + std::to_string(backends.size()) +
                 " back-ends; give a tree whose leaves are commnodes"};
  }
  detail::Shape shape = detail::shape_of(commnode_tree);
  std::vector<Rank> leaves;  // depth first, left to right
  for (std::size_t at : detail::depth_first(shape)) {
    const TopologyNode& node = commnode_tree.nodes()[at];
    if (node.role == Role::commnode && node.children.empty()) leaves.push_back(node.rank);
  }
  if (leaves.empty()) return Error{what + "the tree has no commnode without children to put them under"};
  for (const TopologyNode& node : commnode_tree.nodes()) {
    if (node.rank < count) {
      return Error{what + "the " + std::string(to_string(node.role)) + " " + std::to_string(node.rank) +
                   " has a rank in 0.." + std::to_string(count - 1) + ", the back-ends' ranks"};
    }
  }

  std::vector<TopologyNode> nodes = commnode_tree.nodes();
  std::unordered_map<Rank, std::size_t> position;
  for (std::size_t i = 0; i < nodes.size(); ++i) position.emplace(nodes[i].rank, i);
  nodes.reserve(nodes.size() + count);
  for (std::size_t r = 0; r < count; ++r) {
    Rank leaf = leaves[r * leaves.size() / count];
    TopologyNode backend;
    backend.rank = static_cast<Rank>(r);
    backend.role = Role::backend;
    backend.host = nodes[position.at(leaf)].host;
    backend.parent = leaf;
    nodes[position.at(leaf)].children.push_back(backend.rank);
    nodes.push_back(std::move(backend));
  }
  auto tree = Topology::make(std::move(nodes), commnode_tree.hosts(), "tree with attached back-ends");
  if (tree) (void)tree->set_links(commnode_tree.links());  // already checked
  return tree;
}

}  // namespace canopy
