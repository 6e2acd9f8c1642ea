// Shapes and the numbering rule shared by MRNet's format and the topgen specs.
#include "tree_shape.h"

#include <limits>

namespace canopy::detail {

std::vector<std::size_t> breadth_first(const Shape& shape, std::size_t root) {
  std::vector<std::size_t> order;
  if (shape.empty()) return order;
  order.reserve(shape.size());
  order.push_back(root);
  for (std::size_t next = 0; next < order.size(); ++next) {
    for (std::size_t child : shape[order[next]].children) order.push_back(child);
  }
  return order;
}

std::vector<std::size_t> depth_first(const Shape& shape) {
  std::vector<std::size_t> order;
  if (shape.empty()) return order;
  order.reserve(shape.size());
  std::vector<std::size_t> pending{0};
  while (!pending.empty()) {
    std::size_t at = pending.back();
    pending.pop_back();
    order.push_back(at);
    const auto& children = shape[at].children;
    pending.insert(pending.end(), children.rbegin(), children.rend());
  }
  return order;
}

Result<Topology> number_tree(const Shape& shape, Leaves leaves, std::string_view source) {
  if (shape.empty()) return Error{std::string(source) + ": the topology has no nodes"};
  std::vector<Rank> rank(shape.size());
  std::vector<Role> role(shape.size(), Role::commnode);
  std::vector<bool> numbered(shape.size(), false);
  role[0] = Role::frontend;

  std::size_t backends = 0;
  if (leaves == Leaves::backends) {
    for (std::size_t at : depth_first(shape)) {
      if (at == 0 || !shape[at].children.empty()) continue;
      if (backends == kFirstInternalRank) {
        return Error{std::string(source) + ": more than " + std::to_string(kFirstInternalRank) +
                     " back-ends; their ranks would reach the front-end's rank " + std::to_string(kFirstInternalRank)};
      }
      rank[at] = static_cast<Rank>(backends++);
      role[at] = Role::backend;
      numbered[at] = true;
    }
  }
  constexpr std::size_t kInternalRanks = std::size_t{std::numeric_limits<Rank>::max()} - kFirstInternalRank + 1;
  if (shape.size() - backends > kInternalRanks) {
    return Error{std::string(source) + ": too many front-end and commnode processes to number"};
  }

  std::vector<std::size_t> order = breadth_first(shape);
  Rank next_internal = kFirstInternalRank;
  for (std::size_t at : order) {
    if (!numbered[at]) rank[at] = next_internal++;
  }

  std::vector<TopologyNode> nodes;
  nodes.reserve(shape.size());
  for (std::size_t at : order) {
    TopologyNode node;
    node.rank = rank[at];
    node.role = role[at];
    node.host = shape[at].host;
    node.line = shape[at].line;
    node.children.reserve(shape[at].children.size());
    for (std::size_t child : shape[at].children) node.children.push_back(rank[child]);
    nodes.push_back(std::move(node));
  }
  return Topology::make(std::move(nodes), {}, source);
}

Shape shape_of(const Topology& topology) {
  std::unordered_map<Rank, std::size_t> position;
  position.reserve(topology.size());
  for (std::size_t i = 0; i < topology.size(); ++i) position.emplace(topology.nodes()[i].rank, i);
  Shape shape(topology.size());
  for (std::size_t i = 0; i < topology.size(); ++i) {
    const TopologyNode& node = topology.nodes()[i];
    shape[i].host = node.host;
    shape[i].line = node.line;
    shape[i].children.reserve(node.children.size());
    for (Rank child : node.children) shape[i].children.push_back(position.at(child));
  }
  return shape;
}

Error too_large(std::string_view source, std::size_t bytes) {
  return Error{std::string(source) + ": the topology is larger than " + std::to_string(kMaxTopologyBytes >> 20) +
               " MiB, the limit (at least " + std::to_string(bytes) + " bytes; a tree of a million processes takes "
               "about 40 MiB): is this the right file?"};
}

}  // namespace canopy::detail
