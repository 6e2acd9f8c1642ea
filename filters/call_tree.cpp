// CallTree (include/canopy/call_tree.h). Every walk is iterative: trees arrive from
// the network, and a path a million frames deep must not overflow the stack.
#include "canopy/call_tree.h"

#include <algorithm>
#include <utility>

namespace canopy {
namespace {

using NodeId = CallTree::NodeId;

std::string node_error(std::size_t node, const std::vector<std::string>& names, const std::string& what) {
  std::string label = node < names.size() && !names[node].empty() ? " '" + names[node] + "'" : "";
  return "call tree packet: node " + std::to_string(node) + label + " " + what;
}

// Ascending, neither overlapping nor touching (the canonical form).
bool apart(std::span<const RankRun> runs) {
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].first > runs[i].last) return false;
    if (i > 0 && (runs[i].first <= runs[i - 1].last || runs[i].first - runs[i - 1].last < 2)) return false;
  }
  return true;
}

// Every rank of `inner` is in `outer` (both canonical).
bool includes(std::span<const RankRun> outer, std::span<const RankRun> inner) {
  std::size_t o = 0;
  for (const RankRun& r : inner) {
    while (o < outer.size() && outer[o].last < r.first) ++o;
    if (o == outer.size() || outer[o].first > r.first || outer[o].last < r.last) return false;
  }
  return true;
}

// The union of two canonical run lists, canonical.
std::vector<RankRun> united(std::span<const RankRun> a, std::span<const RankRun> b) {
  std::vector<RankRun> out;
  out.reserve(a.size() + b.size());
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const RankRun next = j == b.size() || (i < a.size() && a[i].first <= b[j].first) ? a[i++] : b[j++];
    // Overlapping or touching the last run: extend it (last + 1 cannot overflow
    // when it is below next.first).
    if (!out.empty() && (next.first <= out.back().last || next.first - out.back().last == 1)) {
      out.back().last = std::max(out.back().last, next.last);
    } else {
      out.push_back(next);
    }
  }
  return out;
}

// The packet's four arrays, once validated, with the runs as RankRuns.
struct Encoded {
  const std::vector<std::uint32_t>* parents;
  const std::vector<std::string>* names;
  const std::vector<std::uint32_t>* offsets;
  std::vector<RankRun> runs;

  std::span<const RankRun> runs_of(std::size_t node) const {
    return std::span<const RankRun>(runs).subspan((*offsets)[node], (*offsets)[node + 1] - (*offsets)[node]);
  }
};

// Checks everything the header promises before the packet touches a tree.
Result<Encoded> validate(const Packet& packet) {
  if (packet.size() != 4 || !std::holds_alternative<std::vector<std::uint32_t>>(packet[0]) ||
      !std::holds_alternative<std::vector<std::string>>(packet[1]) ||
      !std::holds_alternative<std::vector<std::uint32_t>>(packet[2]) ||
      !std::holds_alternative<std::vector<std::uint32_t>>(packet[3])) {
    return Error{"a call tree packet is \"" + std::string(CallTree::kFormat) +
                 "\" (parents, names, rank offsets, rank runs), not \"" + packet.format() + "\""};
  }
  Encoded e{&std::get<std::vector<std::uint32_t>>(packet[0]), &std::get<std::vector<std::string>>(packet[1]),
            &std::get<std::vector<std::uint32_t>>(packet[2]), {}};
  const auto& values = std::get<std::vector<std::uint32_t>>(packet[3]);
  const auto& parents = *e.parents;
  const auto& names = *e.names;
  const auto& offsets = *e.offsets;
  const std::size_t n = parents.size();
  if (n == 0) return Error{"call tree packet: no nodes (the root, node 0, is always there)"};
  if (names.size() != n || offsets.size() != n + 1) {
    return Error{"call tree packet: " + std::to_string(n) + " parents need " + std::to_string(n) +
                 " names and " + std::to_string(n + 1) + " rank offsets, not " + std::to_string(names.size()) +
                 " and " + std::to_string(offsets.size())};
  }
  if (parents[0] != CallTree::kNoParent) {
    return Error{"call tree packet: node 0 is the root, its parent must be 0xFFFFFFFF, not " +
                 std::to_string(parents[0])};
  }
  if (!names[0].empty()) return Error{"call tree packet: node 0 is the root, its name must be empty, not '" + names[0] + "'"};
  for (std::size_t i = 1; i < n; ++i) {
    if (parents[i] >= i) {
      return Error{node_error(i, names, "has parent " + std::to_string(parents[i]) +
                                            ", which is not an earlier node (parents come first)")};
    }
  }
  if (offsets[0] != 0) return Error{"call tree packet: rank offset 0 is " + std::to_string(offsets[0]) + ", not 0"};
  for (std::size_t i = 0; i < n; ++i) {
    if (offsets[i + 1] < offsets[i]) {
      return Error{"call tree packet: rank offsets decrease at node " + std::to_string(i) + " (" +
                   std::to_string(offsets[i]) + " then " + std::to_string(offsets[i + 1]) + ")"};
    }
  }
  if (values.size() % 2 != 0) {
    return Error{"call tree packet: " + std::to_string(values.size()) +
                 " rank run values, an odd number (each run is FIRST LAST)"};
  }
  if (offsets[n] != values.size() / 2) {
    return Error{"call tree packet: the last rank offset is " + std::to_string(offsets[n]) + " but there are " +
                 std::to_string(values.size() / 2) + " rank runs"};
  }
  e.runs.reserve(values.size() / 2);
  for (std::size_t i = 0; i < values.size(); i += 2) e.runs.push_back({values[i], values[i + 1]});
  for (std::size_t i = 0; i < n; ++i) {
    auto runs = e.runs_of(i);
    if (!apart(runs)) {
      return Error{node_error(i, names, "has rank runs that are not ascending and apart (FIRST <= LAST, "
                                        "LAST + 1 < the next FIRST)")};
    }
    if (i > 0 && !includes(e.runs_of(parents[i]), runs)) {
      return Error{node_error(i, names, "has ranks that its parent (node " + std::to_string(parents[i]) +
                                            ") does not have")};
    }
  }
  return e;
}

void escape_into(std::string& out, std::string_view text) {
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

}  // namespace

CallTree::CallTree() : nodes_(1) {}

NodeId CallTree::child(NodeId parent, std::string_view name) {
  auto& siblings = nodes_[parent].children;
  auto it = std::lower_bound(siblings.begin(), siblings.end(), name,
                             [this](NodeId id, std::string_view n) { return nodes_[id].name < n; });
  if (it != siblings.end() && nodes_[*it].name == name) return *it;
  const auto position = it - siblings.begin();
  const auto id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(Node{std::string(name), {}, {}});  // may move `siblings`
  auto& moved = nodes_[parent].children;
  moved.insert(moved.begin() + position, id);
  return id;
}

void CallTree::add_runs(NodeId node, std::span<const RankRun> runs) {
  auto& mine = nodes_[node].runs;
  // The common case once a tree has settled: nothing new, nothing allocated.
  if (includes(mine, runs)) return;
  mine = united(mine, runs);
}

std::vector<Rank> CallTree::ranks(NodeId node) const {
  std::vector<Rank> out;
  out.reserve(rank_count(node));
  for (const RankRun& r : nodes_[node].runs) {
    for (Rank k = r.first;; ++k) {
      out.push_back(k);
      if (k == r.last) break;
    }
  }
  return out;
}

std::size_t CallTree::rank_count(NodeId node) const {
  std::size_t n = 0;
  for (const RankRun& r : nodes_[node].runs) n += std::size_t{r.last} - r.first + 1;
  return n;
}

void CallTree::add_path(const std::vector<std::string>& frames_outermost_first, Rank rank) {
  const RankRun one[] = {{rank, rank}};
  NodeId node = kRoot;
  add_runs(node, one);
  for (const auto& frame : frames_outermost_first) {
    node = child(node, frame);
    add_runs(node, one);
  }
}

void CallTree::merge(const CallTree& other) {
  if (&other == this) return;  // idempotent; and child() would grow the tree being read
  std::vector<std::pair<NodeId, NodeId>> pending{{kRoot, kRoot}};  // (into, from)
  while (!pending.empty()) {
    auto [into, from] = pending.back();
    pending.pop_back();
    add_runs(into, other.nodes_[from].runs);
    for (NodeId c : other.nodes_[from].children) pending.emplace_back(child(into, other.nodes_[c].name), c);
  }
}

Result<void> CallTree::merge(const Packet& packet) {
  auto encoded = validate(packet);
  if (!encoded) return Error{encoded.error()};
  const auto& e = *encoded;
  const std::size_t n = e.parents->size();
  // Packet node -> node of this tree; parents come first, so one pass suffices.
  std::vector<NodeId> mapped(n);
  mapped[0] = kRoot;
  add_runs(kRoot, e.runs_of(0));
  for (std::size_t i = 1; i < n; ++i) {
    mapped[i] = child(mapped[(*e.parents)[i]], (*e.names)[i]);
    add_runs(mapped[i], e.runs_of(i));
  }
  return {};
}

Result<CallTree> CallTree::from_packet(const Packet& packet) {
  CallTree tree;
  if (auto r = tree.merge(packet); !r) return Error{r.error()};
  return tree;
}

Packet CallTree::to_packet(Tag tag) const {
  std::vector<std::uint32_t> parents, offsets, runs;
  std::vector<std::string> names;
  parents.reserve(nodes_.size());
  names.reserve(nodes_.size());
  offsets.reserve(nodes_.size() + 1);
  std::size_t total = 0;
  for (const auto& node : nodes_) total += node.runs.size();
  runs.reserve(2 * total);
  // Pre-order, siblings by name: children are pushed in reverse so the first pops first.
  // Reserved: prefix_tree calls this every wave, and a growing stack allocates
  // several times.
  std::vector<std::pair<NodeId, std::uint32_t>> pending;  // (node, parent's new index)
  pending.reserve(nodes_.size());
  pending.emplace_back(kRoot, kNoParent);
  while (!pending.empty()) {
    auto [id, parent] = pending.back();
    pending.pop_back();
    const auto index = static_cast<std::uint32_t>(parents.size());
    const Node& node = nodes_[id];
    parents.push_back(parent);
    names.push_back(node.name);
    offsets.push_back(static_cast<std::uint32_t>(runs.size() / 2));
    for (const RankRun& r : node.runs) {
      runs.push_back(r.first);
      runs.push_back(r.last);
    }
    for (auto c = node.children.rbegin(); c != node.children.rend(); ++c) pending.emplace_back(*c, index);
  }
  offsets.push_back(static_cast<std::uint32_t>(runs.size() / 2));
  return Packet(tag, {std::move(parents), std::move(names), std::move(offsets), std::move(runs)});
}

std::string format_rank_ranges(std::span<const Rank> ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += '-' + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string format_rank_ranges(std::span<const RankRun> runs) {
  std::string out;
  for (const RankRun& r : runs) {
    if (!out.empty()) out += ',';
    out += std::to_string(r.first);
    if (r.last > r.first) out += '-' + std::to_string(r.last);
  }
  return out;
}

std::string CallTree::to_dot() const {
  // Nodes are numbered in the canonical pre-order, so equal trees render identically.
  std::string out = "digraph call_tree {\n  node [shape=box];\n";
  std::uint32_t next = 0;
  std::vector<std::pair<NodeId, std::uint32_t>> pending{{kRoot, kNoParent}};
  while (!pending.empty()) {
    auto [id, parent] = pending.back();
    pending.pop_back();
    const std::uint32_t index = next++;
    const Node& node = nodes_[id];
    out += "  n" + std::to_string(index) + " [label=\"";
    if (id == kRoot) {
      out += '/';
    } else {
      escape_into(out, node.name);
    }
    out += "\"];\n";
    if (parent != kNoParent) {
      out += "  n" + std::to_string(parent) + " -> n" + std::to_string(index) + " [label=\"" +
             std::to_string(rank_count(id)) + ":[" + format_rank_ranges(node.runs) + "]\"];\n";
    }
    for (auto c = node.children.rbegin(); c != node.children.rend(); ++c) pending.emplace_back(*c, index);
  }
  out += "}\n";
  return out;
}

bool CallTree::operator==(const CallTree& other) const {
  if (nodes_.size() != other.nodes_.size()) return false;
  std::vector<std::pair<NodeId, NodeId>> pending{{kRoot, kRoot}};
  while (!pending.empty()) {
    auto [mine, theirs] = pending.back();
    pending.pop_back();
    const Node& a = nodes_[mine];
    const Node& b = other.nodes_[theirs];
    if (a.name != b.name || a.runs != b.runs || a.children.size() != b.children.size()) return false;
    for (std::size_t i = 0; i < a.children.size(); ++i) pending.emplace_back(a.children[i], b.children[i]);
  }
  return true;
}

}  // namespace canopy
