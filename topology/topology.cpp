// Tree validation and queries. Pure logic: no I/O.
//
// Topology::make() is the one place a tree is checked, whether it was parsed from a
// file, generated from a spec or received from a parent, so every path gives the
// same guarantees: ranks are unique, each node but the front-end has exactly one
// parent, parent and children agree, every node is reachable from the front-end,
// and roles fit their place in the tree.
#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <unordered_set>

#include "canopy/topology.h"
#include "rank_pairs.h"

namespace canopy {

std::string_view to_string(Role role) {
  switch (role) {
    case Role::frontend: return "frontend";
    case Role::commnode: return "commnode";
    case Role::backend: return "backend";
  }
  return "unknown";
}

std::string_view to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::automatic: return "auto";
    case LinkKind::plain: return "plain";
    case LinkKind::striped: return "striped";
  }
  return "unknown";
}

std::string_view to_string(LinkChecksum checksum) {
  switch (checksum) {
    case LinkChecksum::crc32c: return "crc32c";
    case LinkChecksum::additive: return "additive";
    case LinkChecksum::none: return "none";
  }
  return "unknown";
}

std::optional<LinkKind> link_kind_from(std::string_view name) {
  for (LinkKind kind : {LinkKind::automatic, LinkKind::plain, LinkKind::striped}) {
    if (name == to_string(kind)) return kind;
  }
  return std::nullopt;
}

std::optional<LinkChecksum> link_checksum_from(std::string_view name) {
  for (LinkChecksum checksum : {LinkChecksum::crc32c, LinkChecksum::additive, LinkChecksum::none}) {
    if (name == to_string(checksum)) return checksum;
  }
  return std::nullopt;
}

namespace {

std::string str(Rank rank) { return std::to_string(rank); }

// The nodes under validation with a rank -> position index, and the error format.
struct Draft {
  std::vector<TopologyNode>& nodes;
  std::string_view source;
  std::unordered_map<Rank, std::size_t> index;

  TopologyNode* find(Rank rank) {
    auto it = index.find(rank);
    return it == index.end() ? nullptr : &nodes[it->second];
  }

  // "<source>:<line>: <problem>", without the line when the node has none.
  Error error(const TopologyNode* at, const std::string& problem) const { return error(at ? at->line : 0, problem); }
  Error error(int line, const std::string& problem) const {
    std::string prefix(source);
    if (line > 0) prefix += ":" + std::to_string(line);
    return Error{prefix + ": " + problem};
  }
};

std::string line_note(const TopologyNode& node) {
  return node.line > 0 ? " (line " + std::to_string(node.line) + ")" : std::string();
}

Result<void> index_ranks(Draft& draft) {
  if (draft.nodes.empty()) return draft.error(nullptr, "the topology has no nodes");
  draft.index.reserve(draft.nodes.size());
  for (std::size_t i = 0; i < draft.nodes.size(); ++i) {
    const TopologyNode& node = draft.nodes[i];
    auto [it, fresh] = draft.index.emplace(node.rank, i);
    if (!fresh) {
      const TopologyNode& first = draft.nodes[it->second];
      std::string note = first.line > 0 ? " (first at line " + std::to_string(first.line) + ")" : "";
      return draft.error(&node, "duplicate rank " + str(node.rank) + note);
    }
  }
  return {};
}

Error two_parents(const Draft& draft, const TopologyNode& child, Rank first, Rank second) {
  if (first == second) {
    return draft.error(&child, "node " + str(child.rank) + " is listed twice as a child of " + str(first));
  }
  return draft.error(&child, "node " + str(child.rank) + " has two parents (" + str(first) + " and " +
                                 str(second) + ")");
}

// Makes `parent` and `children` agree. Children lists are authoritative and fill
// in missing parents; a parent field that no children list mentions appends the
// node to its parent's children. Any disagreement is a node with two parents.
Result<void> link_parents_and_children(Draft& draft) {
  std::unordered_map<Rank, Rank> listed_under;  // child -> the node whose list names it
  for (const TopologyNode& node : draft.nodes) {
    for (Rank rank : node.children) {
      TopologyNode* child = draft.find(rank);
      if (!child) return draft.error(&node, "edge refers to unknown rank " + str(rank));
      auto [it, fresh] = listed_under.emplace(rank, node.rank);
      if (!fresh) return two_parents(draft, *child, it->second, node.rank);
    }
  }
  for (TopologyNode& node : draft.nodes) {
    auto listed = listed_under.find(node.rank);
    if (!node.parent) {
      if (listed != listed_under.end()) node.parent = listed->second;
      continue;
    }
    TopologyNode* parent = draft.find(*node.parent);
    if (!parent) return draft.error(&node, "edge refers to unknown rank " + str(*node.parent));
    if (listed == listed_under.end()) {
      parent->children.push_back(node.rank);
    } else if (listed->second != *node.parent) {
      return two_parents(draft, node, listed->second, *node.parent);
    }
  }
  return {};
}

// The cycle of parent links at or above `start`, written parent first ("1 -> 2 ->
// 1") and beginning at `start` when it is on it. Precondition: every node on the
// way up has a parent, which holds for any node the root does not reach.
struct Cycle {
  std::string path;
  bool through_start;
};

Cycle cycle_above(Draft& draft, const TopologyNode& start) {
  std::vector<Rank> upward;  // start, its parent, its grandparent, ...
  std::unordered_map<Rank, std::size_t> position;
  for (Rank at = start.rank; position.emplace(at, upward.size()).second; at = *draft.find(at)->parent) {
    upward.push_back(at);
  }
  Rank closing = *draft.find(upward.back())->parent;  // the first rank met twice
  std::vector<Rank> cycle(upward.begin() + static_cast<std::ptrdiff_t>(position[closing]), upward.end());
  std::reverse(cycle.begin(), cycle.end());  // child -> parent becomes parent -> child
  std::rotate(cycle.begin(), cycle.end() - 1, cycle.end());  // begin at `closing`
  std::string path;
  for (Rank rank : cycle) path += str(rank) + " -> ";
  return {path + str(closing), closing == start.rank};
}

// `subtree`: the root is a commnode or a back-end (Topology::make_subtree), else the
// front-end.
Result<std::size_t> find_root(Draft& draft, bool subtree) {
  std::optional<std::size_t> root;
  for (std::size_t i = 0; i < draft.nodes.size(); ++i) {
    const TopologyNode& node = draft.nodes[i];
    if (node.parent) continue;
    if (root) {
      const TopologyNode& first = draft.nodes[*root];
      return draft.error(&node, "several roots: " + str(first.rank) + line_note(first) + " and " + str(node.rank) +
                                    line_note(node) + " (the tree must have exactly one front-end with no parent)");
    }
    root = i;
  }
  if (!root) {
    auto frontend = std::find_if(draft.nodes.begin(), draft.nodes.end(),
                                 [](const TopologyNode& node) { return node.role == Role::frontend; });
    const TopologyNode& start = frontend != draft.nodes.end() ? *frontend : draft.nodes.front();
    return draft.error(nullptr, "no root: every node has a parent (the tree must have exactly one front-end with "
                                "no parent); cycle: " + cycle_above(draft, start).path);
  }
  const TopologyNode& node = draft.nodes[*root];
  if (subtree && node.role == Role::frontend) {
    return draft.error(&node, "root " + str(node.rank) + " of a subtree is the front-end");
  }
  if (!subtree && node.role != Role::frontend) {
    return draft.error(&node, "root " + str(node.rank) + " is a " + std::string(to_string(node.role)) +
                                  "; the root must be the front-end");
  }
  return *root;
}

// Positions of the nodes in breadth-first order from the root, children in listed
// order. Linking gave every node at most one parent, so none is queued twice; a
// node left out sits on a cycle of parent links or below one.
Result<std::vector<std::size_t>> breadth_first(Draft& draft, std::size_t root) {
  std::vector<std::size_t> order{root};
  order.reserve(draft.nodes.size());
  for (std::size_t next = 0; next < order.size(); ++next) {
    for (Rank child : draft.nodes[order[next]].children) order.push_back(draft.index.at(child));
  }
  if (order.size() == draft.nodes.size()) return order;

  std::vector<bool> reached(draft.nodes.size());
  for (std::size_t i : order) reached[i] = true;
  const TopologyNode& lost = draft.nodes[static_cast<std::size_t>(std::find(reached.begin(), reached.end(), false) - reached.begin())];
  Cycle cycle = cycle_above(draft, lost);
  if (cycle.through_start) return draft.error(&lost, "cycle: " + cycle.path);
  return draft.error(&lost, "node " + str(lost.rank) + " is not reachable from the root " +
                                str(draft.nodes[root].rank) + " (it hangs below the cycle " + cycle.path + ")");
}

Result<void> check_roles(const Draft& draft) {
  for (const TopologyNode& node : draft.nodes) {
    if (node.role == Role::backend && !node.children.empty()) {
      return draft.error(&node, "back-end " + str(node.rank) + " has children");
    }
    if (node.role == Role::frontend && node.parent) {
      return draft.error(&node, "front-end " + str(node.rank) + " is not the root (its parent is " +
                                    str(*node.parent) + "); the front-end must be the root");
    }
    if (node.host.empty()) return draft.error(&node, "node " + str(node.rank) + " has an empty host name");
  }
  return {};
}

bool is_ip_address(const std::string& text) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 || inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

// A host's NICs: numeric (a path binds its local address before connecting), at
// most kMaxNics, no address twice, and the listening address one of them.
Result<void> check_nics(const Draft& draft, Host& host) {
  if (host.nics.empty()) return {};
  auto problem = [&](const std::string& what) { return draft.error(host.line, "host '" + host.name + "': " + what); };
  if (host.nics.size() > kMaxNics) {
    return problem(std::to_string(host.nics.size()) + " NICs, at most " + std::to_string(kMaxNics));
  }
  std::unordered_set<std::string> seen;
  for (const std::string& nic : host.nics) {
    if (!is_ip_address(nic)) return problem("NIC address '" + nic + "' is not a numeric IPv4 or IPv6 address");
    if (!seen.insert(nic).second) return problem("NIC address " + nic + " is listed twice");
  }
  if (host.address.empty()) host.address = host.nics.front();
  if (!seen.count(host.address)) {
    return problem("address " + host.address + " is not one of its NICs (leave it out to use the first NIC)");
  }
  return {};
}

// Hosts named by nodes but not listed are added with no address.
Result<void> complete_hosts(const Draft& draft, std::vector<Host>& hosts) {
  std::unordered_set<std::string> known;
  for (Host& host : hosts) {
    if (host.name.empty()) return draft.error(nullptr, "a host has an empty name");
    if (!known.insert(host.name).second) return draft.error(nullptr, "host '" + host.name + "' is listed twice");
    if (auto ok = check_nics(draft, host); !ok) return ok;
  }
  for (const TopologyNode& node : draft.nodes) {
    if (known.insert(node.host).second) hosts.push_back({node.host, ""});
  }
  return {};
}

}  // namespace

Result<Topology> Topology::make(std::vector<TopologyNode> nodes, std::vector<Host> hosts, std::string_view source) {
  return assemble(std::move(nodes), std::move(hosts), source, false);
}

Result<Topology> Topology::make_subtree(std::vector<TopologyNode> nodes, std::vector<Host> hosts,
                                        std::string_view source) {
  return assemble(std::move(nodes), std::move(hosts), source, true);
}

Result<Topology> Topology::assemble(std::vector<TopologyNode> nodes, std::vector<Host> hosts, std::string_view source,
                                    bool subtree) {
  Draft draft{nodes, source, {}};
  if (auto ok = index_ranks(draft); !ok) return Error{ok.error()};
  if (auto ok = link_parents_and_children(draft); !ok) return Error{ok.error()};
  auto root = find_root(draft, subtree);
  if (!root) return Error{root.error()};
  auto order = breadth_first(draft, *root);
  if (!order) return Error{order.error()};
  if (auto ok = check_roles(draft); !ok) return Error{ok.error()};
  if (auto ok = complete_hosts(draft, hosts); !ok) return Error{ok.error()};

  Topology topology;
  topology.nodes_.reserve(nodes.size());
  for (std::size_t i : *order) topology.nodes_.push_back(std::move(nodes[i]));
  std::vector<Rank> ranks;
  ranks.reserve(topology.nodes_.size());
  for (const TopologyNode& n : topology.nodes_) ranks.push_back(n.rank);
  RankIndex::of(ranks, topology.index_);  // index_ranks refused a rank given twice
  topology.hosts_ = std::move(hosts);
  return topology;
}

const TopologyNode& Topology::root() const { return nodes_.front(); }

const TopologyNode* Topology::find(Rank rank) const {
  auto at = index_.find(rank);
  return at ? &nodes_[*at] : nullptr;
}

std::size_t Topology::position(Rank rank) const {
  if (auto at = index_.find(rank)) return *at;
  throw std::out_of_range("topology: no process of rank " + std::to_string(rank));
}

const TopologyNode& Topology::at(Rank rank) const { return nodes_[position(rank)]; }

std::vector<Rank> Topology::backends() const {
  std::vector<Rank> ranks;
  for (const TopologyNode& node : nodes_) {
    if (node.role == Role::backend) ranks.push_back(node.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::size_t Topology::depth() const {
  std::vector<std::size_t> level(nodes_.size(), 0);  // by position; parents come first
  std::size_t deepest = 0;
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    level[i] = level[position(*nodes_[i].parent)] + 1;
    deepest = std::max(deepest, level[i]);
  }
  return deepest;
}

std::vector<Rank> Topology::backends_below(Rank rank) const {
  std::vector<Rank> ranks;
  std::vector<const TopologyNode*> pending;
  if (const TopologyNode* start = find(rank)) pending.push_back(start);
  while (!pending.empty()) {
    const TopologyNode* node = pending.back();
    pending.pop_back();
    if (node->role == Role::backend) ranks.push_back(node->rank);
    for (Rank child : node->children) pending.push_back(&at(child));
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::string Topology::address_of(std::string_view host) const {
  for (const Host& h : hosts_) {
    if (h.name == host && !h.address.empty()) return h.address;
  }
  if (host == "localhost") return "127.0.0.1";
  return std::string(host);
}

std::vector<std::string> Topology::nics_of(std::string_view host) const {
  for (const Host& h : hosts_) {
    if (h.name == host && !h.nics.empty()) return h.nics;
  }
  return {address_of(host)};
}

bool Topology::set_address(std::string_view host, std::string address) {
  for (Host& h : hosts_) {
    if (h.name != host) continue;
    if (!h.nics.empty()) return false;
    h.address = std::move(address);
    return true;
  }
  return false;
}

bool Topology::set_port(Rank rank, std::uint16_t port) {
  auto at = index_.find(rank);
  if (!at) return false;
  nodes_[*at].port = port;
  return true;
}

Result<void> Topology::add_backend(Rank rank, Rank parent) {
  if (rank >= kFirstInternalRank) {
    return Error{"rank " + std::to_string(rank) + " cannot be a back-end's: ranks from " +
                 std::to_string(kFirstInternalRank) + " are the front-end's and commnodes'"};
  }
  if (find(rank)) return Error{"rank " + std::to_string(rank) + " is in the tree already"};
  const TopologyNode* up = find(parent);
  if (!up || up->role == Role::backend) {
    return Error{"rank " + std::to_string(parent) + " is not a commnode or front-end of the tree"};
  }
  TopologyNode node;
  node.rank = rank;
  node.role = Role::backend;
  node.host = up->host;
  node.parent = parent;
  nodes_[position(parent)].children.push_back(rank);
  index_.add(rank);
  nodes_.push_back(std::move(node));
  return {};
}

Result<void> Topology::graft(Rank under, const Topology& subtree) {
  const TopologyNode& top = subtree.root();
  const TopologyNode* up = find(under);
  if (!up || up->role == Role::backend) {
    return Error{"rank " + std::to_string(under) + " is not a commnode or front-end of this part of the tree"};
  }
  const TopologyNode* known = find(top.rank);
  if (known && (known->role != top.role || !known->children.empty())) {
    return Error{"rank " + std::to_string(top.rank) + " is held here already, with its children"};
  }
  for (const TopologyNode& n : subtree.nodes_) {
    if (n.rank != top.rank && find(n.rank)) {
      return Error{"rank " + std::to_string(n.rank) + " of the subtree is held here already"};
    }
  }
  for (const Host& h : subtree.hosts_) {
    if (std::none_of(hosts_.begin(), hosts_.end(), [&](const Host& mine) { return mine.name == h.name; })) {
      hosts_.push_back(h);
    }
  }
  if (known) {  // held without its children (a frontier): they come now
    TopologyNode& held = nodes_[position(top.rank)];
    held.children = top.children;
    if (top.port != 0) held.port = top.port;
    topology::erase_rank(frontier_, top.rank);
  } else {
    TopologyNode node = top;
    node.parent = under;
    nodes_[position(under)].children.push_back(node.rank);
    index_.add(node.rank);
    nodes_.push_back(std::move(node));
  }
  for (std::size_t i = 1; i < subtree.nodes_.size(); ++i) {  // parents first, as in every Topology
    index_.add(subtree.nodes_[i].rank);
    nodes_.push_back(subtree.nodes_[i]);
    if (const Frontier* f = subtree.frontier(subtree.nodes_[i].rank)) topology::set_rank(frontier_, subtree.nodes_[i].rank, *f);
  }
  return {};
}

const Topology::Frontier* Topology::frontier(Rank rank) const { return topology::find_rank(frontier_, rank); }

bool Topology::set_frontier(Rank rank, Frontier frontier) {
  const TopologyNode* node = find(rank);
  if (!node || node->role != Role::commnode || !node->children.empty()) return false;
  topology::set_rank(frontier_, rank, frontier);
  return true;
}

Topology Topology::backend_part(Rank parent) const { return part_below(parent, std::nullopt); }

Topology Topology::part(Rank self) const {
  const TopologyNode& me = at(self);
  if (!me.parent) return *this;
  return part_below(*me.parent, self);
}

std::vector<std::uint32_t> Topology::heights() const {
  // Each child's before its parent's: a parent comes before its children in nodes_
  // (breadth-first; a back-end that joined or a subtree grafted later comes last).
  std::vector<std::uint32_t> height(nodes_.size(), 0);
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    const TopologyNode& n = nodes_[i];
    if (n.role == Role::backend) continue;
    const Frontier* f = frontier(n.rank);
    std::uint32_t h = f ? f->height : 1;  // a commnode holds back-ends, if only joined ones
    for (Rank c : n.children) h = std::max(h, height[position(c)] + 1);
    height[i] = h;
  }
  return height;
}

Topology Topology::part_below(Rank parent, std::optional<Rank> whole) const {
  const std::vector<std::uint32_t> height = heights();
  std::vector<Rank> path;  // root first
  for (const TopologyNode* n = &at(parent);; n = &at(*n->parent)) {
    path.push_back(n->rank);
    if (!n->parent) break;
  }
  std::reverse(path.begin(), path.end());
  Topology part;
  std::unordered_set<std::string> used_hosts;
  auto hold = [&](const TopologyNode& n) {
    part.index_.add(n.rank);
    part.nodes_.push_back(n);
    used_hosts.insert(n.host);
  };
  hold(at(path.front()));
  for (std::size_t level = 0; level < path.size(); ++level) {
    for (Rank c : at(path[level]).children) {
      const TopologyNode& child = at(c);
      hold(child);
      if (level + 1 < path.size() && c == path[level + 1]) continue;  // on the path: its children follow
      if (level + 1 == path.size() && c == whole) {  // its subtree follows
        if (const Frontier* f = frontier(c)) topology::set_rank(part.frontier_, c, *f);
        continue;
      }
      TopologyNode& held = part.nodes_.back();
      if (held.role != Role::commnode) continue;
      const Frontier* f = frontier(c);
      topology::set_rank(part.frontier_, c,
                        Frontier{height[position(c)], f ? f->fanout : static_cast<std::uint32_t>(held.children.size())});
      held.children.clear();
    }
  }
  if (whole) {
    // Its subtree, breadth-first: after it, only it and what is held below it still
    // have children (its siblings are frontiers or back-ends).
    for (std::size_t i = part.position(*whole); i < part.nodes_.size(); ++i) {
      const std::vector<Rank> children = part.nodes_[i].children;  // hold() grows nodes_
      for (Rank c : children) {
        hold(at(c));
        if (const Frontier* f = frontier(c)) topology::set_rank(part.frontier_, c, *f);
      }
    }
  }
  for (const Host& h : hosts_) {
    if (used_hosts.count(h.name)) part.hosts_.push_back(h);
  }
  part.links_ = links_;
  part.gossip_ = gossip_;
  part.ports_ = ports_;
  return part;
}

Result<void> Topology::set_links(LinkSettings links) {
  if (!(links.corrupt_fraction >= 0.0 && links.corrupt_fraction < 1.0)) {
    return Error{"the fraction of fragments to corrupt must be at least 0 and below 1, not " +
                 std::to_string(links.corrupt_fraction)};
  }
  links_ = links;
  return {};
}

LinkKind Topology::link_between(const TopologyNode& child, const TopologyNode& parent) const {
  LinkKind kind = (child.parent == parent.rank && child.link) ? *child.link : links_.kind;
  if (kind != LinkKind::automatic) return kind;
  return nics_of(child.host).size() >= 2 && nics_of(parent.host).size() >= 2 ? LinkKind::striped : LinkKind::plain;
}

Result<PortRange> parse_port_range(std::string_view text, std::string_view source) {
  auto bad = [&](const std::string& why) {
    return Error{std::string(source) + ": bad port range '" + std::string(text) + "': " + why, ErrorKind::invalid_input};
  };
  auto number = [](std::string_view digits) -> std::optional<std::uint32_t> {
    std::uint32_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || value == 0 || value > 65535) {
      return std::nullopt;
    }
    return value;
  };
  const auto dash = text.find('-');
  auto first = number(text.substr(0, dash));
  auto last = dash == std::string_view::npos ? first : number(text.substr(dash + 1));
  if (!first || !last) return bad("give LO-HI, two ports from 1 to 65535");
  if (*first > *last) return bad("the first port is above the last");
  return PortRange{static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last)};
}

std::string to_string(const PortRange& ports) {
  return ports.any() ? std::string("any") : std::to_string(ports.first) + "-" + std::to_string(ports.last);
}

}  // namespace canopy
