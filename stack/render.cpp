#include "stack/render.h"

#include <algorithm>

#include "canopy/packet.h"
#include "stack/paths.h"

namespace canopy::stack {
namespace {

using NodeId = CallTree::NodeId;

// ranks(node) minus the ranks of its children: who stops here.
std::vector<Rank> ending_at(const CallTree& tree, NodeId node) {
  std::vector<Rank> deeper;
  for (NodeId child : tree.children(node)) {
    const auto r = tree.ranks(child);
    deeper.insert(deeper.end(), r.begin(), r.end());
  }
  std::sort(deeper.begin(), deeper.end());
  std::vector<Rank> out;
  const auto here = tree.ranks(node);
  std::set_difference(here.begin(), here.end(), deeper.begin(), deeper.end(), std::back_inserter(out));
  return out;
}

void collect(const CallTree& tree, NodeId node, std::vector<std::string>& path, std::vector<EquivalenceClass>& out) {
  if (node != CallTree::kRoot) path.push_back(tree.name(node));
  if (auto ending = ending_at(tree, node); !ending.empty()) out.push_back({std::move(ending), path});
  for (NodeId child : tree.children(node)) collect(tree, child, path, out);
  if (node != CallTree::kRoot) path.pop_back();
}

std::string count_of(std::size_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

std::string json_text(const std::string& s) { return canopy::to_json(Value{s}); }

void text_tree(const CallTree& tree, NodeId node, int depth, std::string& out) {
  out.append(static_cast<std::size_t>(depth) * 2, ' ');
  out += tree.name(node) + " [" + format_rank_ranges(tree.rank_runs(node)) + "]\n";
  for (NodeId child : tree.children(node)) text_tree(tree, child, depth + 1, out);
}

void json_tree(const CallTree& tree, NodeId node, std::string& out) {
  out += "{\"name\":" + json_text(tree.name(node)) + ",\"ranks\":\"" + format_rank_ranges(tree.rank_runs(node)) +
         "\",\"count\":" + std::to_string(tree.rank_count(node)) + ",\"children\":[";
  bool first = true;
  for (NodeId child : tree.children(node)) {
    if (!first) out += ',';
    first = false;
    json_tree(tree, child, out);
  }
  out += "]}";
}

}  // namespace

std::vector<EquivalenceClass> equivalence_classes(const CallTree& tree) {
  std::vector<EquivalenceClass> out;
  std::vector<std::string> path;
  collect(tree, CallTree::kRoot, path, out);
  std::stable_sort(out.begin(), out.end(), [](const EquivalenceClass& a, const EquivalenceClass& b) {
    return a.ranks.size() > b.ranks.size();
  });
  return out;
}

std::string describe_path(const std::vector<std::string>& path) {
  if (path.empty()) return "(no frames)";
  std::string out;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    if (!out.empty()) out += " \u2190 ";
    out += *it;
    if (function_of(*it) == "main") break;
  }
  return out;
}

std::string to_text(const CallTree& tree) {
  std::string out;
  for (NodeId child : tree.children(CallTree::kRoot)) text_tree(tree, child, 0, out);
  const auto classes = equivalence_classes(tree);
  out += "\n" + std::to_string(classes.size()) + (classes.size() == 1 ? " class" : " classes") + " of " +
         count_of(tree.rank_count(CallTree::kRoot)) + ":\n";
  for (const auto& c : classes)
    out += "  " + count_of(c.ranks.size()) + " [" + format_rank_ranges(c.ranks) + "]: " + describe_path(c.path) + "\n";
  return out;
}

std::string to_json(const CallTree& tree, const std::string& extra) {
  std::string out = "{" + extra + "\"ranks\":\"" + format_rank_ranges(tree.rank_runs(CallTree::kRoot)) +
                    "\",\"count\":" + std::to_string(tree.rank_count(CallTree::kRoot)) + ",\"tree\":";
  json_tree(tree, CallTree::kRoot, out);
  out += ",\"classes\":[";
  bool first = true;
  for (const auto& c : equivalence_classes(tree)) {
    if (!first) out += ',';
    first = false;
    out += "{\"ranks\":\"" + format_rank_ranges(c.ranks) + "\",\"count\":" + std::to_string(c.ranks.size()) +
           ",\"path\":[";
    for (std::size_t i = 0; i < c.path.size(); ++i) out += (i ? "," : "") + json_text(c.path[i]);
    out += "]}";
  }
  out += "]}\n";
  return out;
}

}  // namespace canopy::stack
