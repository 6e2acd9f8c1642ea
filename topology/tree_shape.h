// A tree known only by its shape and hosts, as MRNet's format and the topgen specs
// describe it, and the one rule that turns it into a Topology (ranks and roles).
// Private to the topology library.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/topology.h"

namespace canopy::detail {

struct ShapeNode {
  std::string host = "localhost";
  std::vector<std::size_t> children;  // positions in the shape, in the source's order
  int line = 0;                       // where the source first names the node; 0 if generated
};

// Position 0 is the root. A shape is a tree when every other position is the child
// of exactly one node and all are reachable from 0; the functions below assume it.
using Shape = std::vector<ShapeNode>;

// Positions from `root` down (0 unless the shape is still being checked), level by
// level, children in order; only the nodes reachable from `root`.
std::vector<std::size_t> breadth_first(const Shape& shape, std::size_t root = 0);

// Positions in depth-first pre-order, children in order.
std::vector<std::size_t> depth_first(const Shape& shape);

// Numbers the tree by the rule of topology.h (back-ends 0..N-1 depth first, the
// front-end kFirstInternalRank, commnodes after it breadth first) and builds it.
// The root is the front-end; other nodes with children are commnodes; leaves take
// the role `leaves`. Fails if there are more back-ends than kFirstInternalRank.
Result<Topology> number_tree(const Shape& shape, Leaves leaves, std::string_view source);

// Places a shape, the root on `frontend_host` (topology/placement.cpp,
// docs/topology.md): every other node spread over `nodes` (no slot counts), whole
// subtrees at a level with at least as many commnodes as nodes; or packed into the
// slots of `hosts` (the root taking a slot if its host is one of them), each commnode
// with its leaf children on the first host with room for them all. Fails when the
// slots are too few.
void spread_over(Shape& shape, std::string_view frontend_host, const std::vector<std::string>& nodes);
Result<void> pack_on_hosts(Shape& shape, std::string_view frontend_host, const std::vector<HostSlots>& hosts,
                           std::string_view spec);

// The shape of `topology`: position i is topology.nodes()[i].
Shape shape_of(const Topology& topology);

// The error of a reader given more than kMaxTopologyBytes.
Error too_large(std::string_view source, std::size_t bytes);

}  // namespace canopy::detail
