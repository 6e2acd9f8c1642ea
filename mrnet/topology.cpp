// MRN::NetworkTopology (docs/mrnet.md): a view of the live tree, updated in place
// so that a tool's Node pointers stay valid (failed nodes are marked, not removed).
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>

#include "mrnet/NetworkTopology.h"

namespace MRN {

NetworkTopology::NetworkTopology() = default;
NetworkTopology::~NetworkTopology() = default;

unsigned int NetworkTopology::Node::find_SubTreeHeight() {
  unsigned int height = 0;
  for (Node* child : children_) height = std::max(height, 1 + child->find_SubTreeHeight());
  return height;
}

void NetworkTopology::reset_Nodes(const std::vector<Entry>& entries) {
  for (auto& [rank, node] : nodes_) {
    node->children_.clear();
    node->parent_ = nullptr;
  }
  for (const auto& e : entries) {
    auto& slot = nodes_[e.rank];
    if (!slot) slot.reset(new Node(e.host, e.rank, e.backend));
    slot->failed_ = e.failed;
    slot->port_ = e.port;
  }
  root_ = nullptr;
  for (const auto& e : entries) {
    Node* node = nodes_[e.rank].get();
    if (e.parent == UnknownRank) {
      if (!root_) root_ = node;
      continue;
    }
    auto parent = nodes_.find(e.parent);
    if (parent == nodes_.end()) continue;
    node->parent_ = parent->second.get();
    if (!e.failed) parent->second->children_.insert(node);
  }
}

unsigned int NetworkTopology::get_NumNodes() const {
  unsigned int n = 0;
  for (const auto& [rank, node] : nodes_) n += !node->failed_;
  return n;
}

NetworkTopology::Node* NetworkTopology::find_Node(Rank rank) const {
  auto it = nodes_.find(rank);
  return it == nodes_.end() ? nullptr : it->second.get();
}

bool NetworkTopology::node_Failed(Rank rank) const {
  auto* node = find_Node(rank);
  return node && node->failed_;
}

void NetworkTopology::get_Leaves(std::vector<Node*>& leaves) const {
  leaves.clear();
  for (const auto& [rank, node] : nodes_) {
    if (!node->failed_ && node->children_.empty()) leaves.push_back(node.get());
  }
}

void NetworkTopology::get_ParentNodes(std::set<Node*>& out) const {
  out.clear();
  for (const auto& [rank, node] : nodes_) {
    if (!node->failed_ && !node->children_.empty()) out.insert(node.get());
  }
}

void NetworkTopology::get_OrphanNodes(std::set<Node*>& out) const {
  out.clear();
  for (const auto& [rank, node] : nodes_) {
    if (!node->failed_ && node.get() != root_ && (!node->parent_ || node->parent_->failed_)) out.insert(node.get());
  }
}

void NetworkTopology::get_BackEndNodes(std::set<Node*>& out) const {
  out.clear();
  for (const auto& [rank, node] : nodes_) {
    if (!node->failed_ && node->backend_) out.insert(node.get());
  }
}

size_t NetworkTopology::num_BackEndNodes() const {
  std::set<Node*> nodes;
  get_BackEndNodes(nodes);
  return nodes.size();
}

size_t NetworkTopology::num_InternalNodes() const {
  size_t n = 0;
  for (const auto& [rank, node] : nodes_) n += !node->failed_ && !node->backend_ && node.get() != root_;
  return n;
}

void NetworkTopology::get_Descendants(Node* node, std::vector<Node*>& out) const {
  out.clear();
  std::function<void(Node*)> walk = [&](Node* n) {
    for (Node* child : n->children_) {
      out.push_back(child);
      walk(child);
    }
  };
  if (node) walk(node);
}

void NetworkTopology::get_LeafDescendants(Node* node, std::vector<Node*>& out) const {
  std::vector<Node*> all;
  get_Descendants(node, all);
  out.clear();
  for (Node* n : all) {
    if (n->children_.empty()) out.push_back(n);
  }
}

void NetworkTopology::get_TreeStatistics(unsigned int& num_nodes, unsigned int& depth, unsigned int& min_fanout,
                                         unsigned int& max_fanout, double& avg_fanout, double& stddev_fanout) {
  num_nodes = get_NumNodes();
  depth = root_ ? root_->find_SubTreeHeight() : 0;
  std::vector<unsigned int> fanouts;
  for (const auto& [rank, node] : nodes_) {
    if (!node->failed_ && !node->children_.empty()) fanouts.push_back(node->get_NumChildren());
  }
  min_fanout = max_fanout = 0;
  avg_fanout = stddev_fanout = 0;
  if (fanouts.empty()) return;
  min_fanout = *std::min_element(fanouts.begin(), fanouts.end());
  max_fanout = *std::max_element(fanouts.begin(), fanouts.end());
  for (auto f : fanouts) avg_fanout += f;
  avg_fanout /= fanouts.size();
  for (auto f : fanouts) stddev_fanout += (f - avg_fanout) * (f - avg_fanout);
  stddev_fanout = std::sqrt(stddev_fanout / fanouts.size());
}

std::string NetworkTopology::topology_string() const {
  std::ostringstream out;
  std::function<void(const Node*)> walk = [&](const Node* n) {
    if (n->children_.empty()) return;
    out << n->host_ << ":" << n->rank_ << " =>";
    for (const Node* child : n->children_) out << "\n  " << child->host_ << ":" << child->rank_;
    out << " ;\n";
    for (const Node* child : n->children_) walk(child);
  };
  if (root_) walk(root_);
  return out.str();
}

std::string NetworkTopology::get_TopologyString() { return topology_string(); }

void NetworkTopology::print(FILE* out) const {
  if (out) std::fputs(topology_string().c_str(), out);
}

void NetworkTopology::print_TopologyFile(const char* filename) const {
  if (!filename) return;
  std::ofstream(filename) << topology_string();
}

void NetworkTopology::print_DOTGraph(const char* filename) const {
  if (!filename) return;
  std::ofstream out(filename);
  out << "digraph MRNet {\n";
  for (const auto& [rank, node] : nodes_) {
    for (const Node* child : node->children_) out << "  \"" << rank << "\" -> \"" << child->rank_ << "\";\n";
  }
  out << "}\n";
}

}  // namespace MRN
