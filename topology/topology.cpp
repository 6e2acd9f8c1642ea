// Tree validation and queries. Pure logic: no I/O.
#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "canopy/topology.h"

namespace canopy {

std::string_view to_string(Role role) {
  switch (role) {
    case Role::frontend: return "frontend";
    case Role::commnode: return "commnode";
    case Role::backend: return "backend";
  }
  return "unknown";
}

namespace {

std::string where(std::string_view source, int line) {
  return std::string(source) + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": ";
}

}  // namespace

Result<Topology> Topology::make(std::vector<Node> nodes, std::vector<Host> hosts, std::string_view source) {
  if (nodes.empty()) return Error{std::string(source) + ": the topology has no nodes"};
  std::unordered_map<Rank, std::size_t> at;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto [it, fresh] = at.emplace(nodes[i].rank, i);
    if (!fresh) {
      const Node& first = nodes[it->second];
      return Error{where(source, nodes[i].line) + "duplicate rank " + std::to_string(nodes[i].rank) +
                   (first.line ? " (first at line " + std::to_string(first.line) + ")" : std::string())};
    }
  }
  // Parents must agree with children lists; both are derived from edges by parsers,
  // but a Topology built by hand may give either.
  for (const Node& n : nodes) {
    for (Rank c : n.children) {
      auto it = at.find(c);
      if (it == at.end()) {
        return Error{where(source, n.line) + "node " + std::to_string(n.rank) + " has unknown child " + std::to_string(c)};
      }
      Node& child = nodes[it->second];
      if (child.parent && *child.parent != n.rank) {
        return Error{where(source, child.line ? child.line : n.line) + "node " + std::to_string(c) +
                     " has two parents (" + std::to_string(*child.parent) + " and " + std::to_string(n.rank) + ")"};
      }
      child.parent = n.rank;
    }
  }
  for (Node& n : nodes) {
    if (!n.parent) continue;
    auto it = at.find(*n.parent);
    if (it == at.end()) {
      return Error{where(source, n.line) + "node " + std::to_string(n.rank) + " has unknown parent " +
                   std::to_string(*n.parent)};
    }
    auto& siblings = nodes[it->second].children;
    if (std::find(siblings.begin(), siblings.end(), n.rank) == siblings.end()) siblings.push_back(n.rank);
  }

  const Node* root = nullptr;
  for (const Node& n : nodes) {
    if (n.parent) continue;
    if (root) {
      return Error{where(source, n.line) + "several roots: " + std::to_string(root->rank) +
                   (root->line ? " (line " + std::to_string(root->line) + ")" : std::string()) + " and " +
                   std::to_string(n.rank) + "; the tree must have exactly one front-end with no parent"};
    }
    root = &n;
  }
  if (!root) {
    // Every node has a parent: there is a cycle. Walk up from the first node to name it.
    std::vector<Rank> path;
    std::unordered_set<Rank> seen;
    Rank r = nodes.front().rank;
    while (seen.insert(r).second) {
      path.push_back(r);
      r = *nodes[at[r]].parent;
    }
    std::string cycle;
    bool in = false;
    for (Rank p : path) {
      if (p == r) in = true;
      if (in) cycle += std::to_string(p) + " -> ";
    }
    return Error{where(source, nodes[at[r]].line) + "no root: every node has a parent; cycle: " + cycle +
                 std::to_string(r)};
  }
  if (root->role != Role::frontend) {
    return Error{where(source, root->line) + "root " + std::to_string(root->rank) + " is a " +
                 std::string(to_string(root->role)) + "; the root must be the front-end"};
  }

  // Breadth-first from the root: gives the stored order and finds the unreachable.
  Topology t;
  std::deque<Rank> queue{root->rank};
  std::unordered_set<Rank> reached{root->rank};
  while (!queue.empty()) {
    const Node& n = nodes[at[queue.front()]];
    queue.pop_front();
    t.nodes_.push_back(n);
    for (Rank c : n.children) {
      if (!reached.insert(c).second) {
        return Error{where(source, nodes[at[c]].line) + "cycle through node " + std::to_string(c)};
      }
      queue.push_back(c);
    }
  }
  for (const Node& n : nodes) {
    if (reached.count(n.rank)) continue;
    // Unreachable nodes sit on a cycle or hang below one.
    return Error{where(source, n.line) + "node " + std::to_string(n.rank) + " is not reachable from the root " +
                 std::to_string(root->rank) + " (it is on or below a cycle)"};
  }
  for (const Node& n : t.nodes_) {
    if (n.role == Role::backend && !n.children.empty()) {
      return Error{where(source, n.line) + "back-end " + std::to_string(n.rank) + " has children"};
    }
    if (n.role == Role::frontend && n.parent) {
      return Error{where(source, n.line) + "front-end " + std::to_string(n.rank) + " is not the root"};
    }
  }
  for (const Node& n : t.nodes_) {
    bool known = std::any_of(hosts.begin(), hosts.end(), [&](const Host& h) { return h.name == n.host; });
    if (!known) hosts.push_back({n.host, ""});
  }
  t.hosts_ = std::move(hosts);
  for (std::size_t i = 0; i < t.nodes_.size(); ++i) t.index_[t.nodes_[i].rank] = i;
  return t;
}

const Node& Topology::root() const { return nodes_.front(); }

const Node* Topology::find(Rank rank) const {
  auto it = index_.find(rank);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

const Node& Topology::at(Rank rank) const { return nodes_[index_.at(rank)]; }

std::vector<Rank> Topology::backends() const {
  std::vector<Rank> out;
  for (const Node& n : nodes_) {
    if (n.role == Role::backend) out.push_back(n.rank);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t Topology::depth() const {
  std::unordered_map<Rank, std::size_t> level;
  std::size_t deepest = 0;
  for (const Node& n : nodes_) {  // breadth-first: parents come first
    std::size_t l = n.parent ? level[*n.parent] + 1 : 0;
    level[n.rank] = l;
    deepest = std::max(deepest, l);
  }
  return deepest;
}

std::vector<Rank> Topology::backends_below(Rank rank) const {
  std::vector<Rank> out;
  std::vector<Rank> stack{rank};
  while (!stack.empty()) {
    const Node* n = find(stack.back());
    stack.pop_back();
    if (!n) continue;
    if (n->role == Role::backend) out.push_back(n->rank);
    stack.insert(stack.end(), n->children.begin(), n->children.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Topology::address_of(std::string_view host) const {
  for (const Host& h : hosts_) {
    if (h.name == host && !h.address.empty()) return h.address;
  }
  if (host == "localhost") return "127.0.0.1";
  return std::string(host);
}

}  // namespace canopy
