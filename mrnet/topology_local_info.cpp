// MRN::TopologyLocalInfo (include/mrnet/NetworkTopology.h): what a filter function is
// told about the node it runs at. Built into the filter plug-in as well as the layer's
// library, so it reads the tree only through the nodes themselves (Node's inline
// accessors and NetworkTopology::get_Root), never through NetworkTopology's other,
// out-of-line methods, which the plug-in does not contain.
#include <cstddef>
#include <vector>

#include "mrnet/NetworkTopology.h"

namespace MRN {

namespace {

using Node = NetworkTopology::Node;

// Every node below `node`, depth first.
void collect_descendants(const Node* node, std::vector<const Node*>& out) {
  for (const Node* child : node->get_Children()) {
    out.push_back(child);
    collect_descendants(child, out);
  }
}

// Hops from `node` down to its deepest leaf (0 for a leaf).
unsigned int subtree_height(const Node* node) {
  unsigned int height = 0;
  for (const Node* child : node->get_Children()) {
    const unsigned int below = subtree_height(child) + 1;
    if (below > height) height = below;
  }
  return height;
}

// Appends the path from `from` down to `target` (both included) to `path`; false, and
// `path` as it was, if `target` is not in the subtree of `from`.
bool path_to(const Node* from, const Node* target, std::vector<const Node*>& path) {
  path.push_back(from);
  if (from == target) return true;
  for (const Node* child : from->get_Children()) {
    if (path_to(child, target, path)) return true;
  }
  path.pop_back();
  return false;
}

}  // namespace

Rank TopologyLocalInfo::get_Rank() const { return local_node ? local_node->get_Rank() : rank_; }

unsigned int TopologyLocalInfo::get_NumChildren() const {
  return local_node ? local_node->get_NumChildren() : place_.children;
}

unsigned int TopologyLocalInfo::get_NumSiblings() const {
  if (!local_node) return place_.siblings;
  if (!topol || !topol->get_Root()) return 0;
  std::vector<const Node*> path;
  if (!path_to(topol->get_Root(), local_node, path) || path.size() < 2) return 0;  // the root has none
  return path[path.size() - 2]->get_NumChildren() - 1;
}

unsigned int TopologyLocalInfo::get_NumDescendants() const {
  if (!local_node) return place_.descendants;
  if (!topol) return 0;
  std::vector<const Node*> below;
  collect_descendants(local_node, below);
  return static_cast<unsigned int>(below.size());
}

unsigned int TopologyLocalInfo::get_NumLeafDescendants() const {
  if (!local_node) return place_.leaf_descendants;
  if (!topol) return 0;
  std::vector<const Node*> below;
  collect_descendants(local_node, below);
  std::size_t leaves = 0;
  for (const Node* node : below) leaves += node->get_Children().empty() ? 1 : 0;
  return static_cast<unsigned int>(leaves);
}

unsigned int TopologyLocalInfo::get_RootDistance() const {
  if (!local_node) return place_.root_distance;
  if (!topol || !topol->get_Root()) return 0;
  std::vector<const Node*> path;
  if (!path_to(topol->get_Root(), local_node, path)) return 0;  // not in the tree (any more)
  return static_cast<unsigned int>(path.size() - 1);
}

unsigned int TopologyLocalInfo::get_MaxLeafDistance() const {
  return local_node ? subtree_height(local_node) : place_.max_leaf_distance;
}

}  // namespace MRN
