#include "stack/render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

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

// A class and the node where its ranks stop.
struct ClassAt {
  EquivalenceClass cls;
  NodeId node;
};

void collect(const CallTree& tree, NodeId node, std::vector<std::string>& path, std::vector<ClassAt>& out) {
  if (node != CallTree::kRoot) path.push_back(tree.name(node));
  if (auto ending = ending_at(tree, node); !ending.empty()) out.push_back({{std::move(ending), path}, node});
  for (NodeId child : tree.children(node)) collect(tree, child, path, out);
  if (node != CallTree::kRoot) path.pop_back();
}

// Largest class first, then in tree order (by path).
std::vector<ClassAt> classes_at(const CallTree& tree) {
  std::vector<ClassAt> out;
  std::vector<std::string> path;
  collect(tree, CallTree::kRoot, path, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const ClassAt& a, const ClassAt& b) { return a.cls.ranks.size() > b.cls.ranks.size(); });
  return out;
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

// Text inside a DOT "..." string.
std::string dot_text(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Text inside a DOT HTML-like label.
std::string html_text(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\n': out += "<br/>"; break;
      default: out += c;
    }
  }
  return out;
}

// At most `limit` bytes of `text`, cut at a UTF-8 character boundary and marked.
std::string shortened(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + "\u2026";
}

// For each node, the class whose ranks alone reach it (the only class stopping at it
// or below it), -1 when several do: the node is drawn in that class's colour.
constexpr int kShared = -1, kNone = -2;
int colour_nodes(const CallTree& tree, NodeId node, const std::vector<int>& class_of_node, std::vector<int>& out) {
  int mine = class_of_node[node] >= 0 ? class_of_node[node] : kNone;
  for (NodeId child : tree.children(node)) {
    const int below = colour_nodes(tree, child, class_of_node, out);
    if (below == kNone) continue;
    mine = (mine == kNone || mine == below) ? below : kShared;
  }
  out[node] = mine;
  return mine;
}

}  // namespace

std::vector<EquivalenceClass> equivalence_classes(const CallTree& tree) {
  std::vector<EquivalenceClass> out;
  for (auto& c : classes_at(tree)) out.push_back(std::move(c.cls));
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

ClassColour class_colour(std::size_t index) {
  static constexpr const char* named[][2] = {
      {"#1f77b4", "#dbe9f6"},  // blue: the largest class
      {"#d62728", "#f9d3d3"},  // red: the first outlier
      {"#ff7f0e", "#ffe3c8"},  // orange
      {"#2ca02c", "#d4edd4"},  // green
      {"#9467bd", "#e6dcf0"},  // purple
      {"#8c564b", "#e8dcd8"},  // brown
      {"#e377c2", "#f8e0f0"},  // pink
      {"#bcbd22", "#eeeec8"},  // olive
      {"#17becf", "#d0f0f4"},  // cyan
  };
  constexpr std::size_t count = sizeof named / sizeof named[0];
  if (index < count) return {named[index][0], named[index][1]};
  // Graphviz's "H S V" form, hues the golden angle apart.
  const double hue = std::fmod(0.11 + 0.618033988749895 * static_cast<double>(index - count), 1.0);
  char line[32], fill[32];
  std::snprintf(line, sizeof line, "%.3f 0.850 0.750", hue);
  std::snprintf(fill, sizeof fill, "%.3f 0.180 1.000", hue);
  return {line, fill};
}

std::string to_dot(const CallTree& tree, const Heading& heading) {
  const auto classes = classes_at(tree);
  std::vector<int> class_of_node(tree.node_count(), -1);
  for (std::size_t i = 0; i < classes.size(); ++i) class_of_node[classes[i].node] = static_cast<int>(i);
  std::vector<int> colour_of(tree.node_count(), kNone);
  colour_nodes(tree, CallTree::kRoot, class_of_node, colour_of);

  const std::size_t ranks = tree.rank_count(CallTree::kRoot);
  const std::string shared_line = "#606060";
  std::string out = "digraph canopy_stack {\n";
  // The title, then the legend: one HTML-like table at the top of the drawing.
  out += "  graph [labelloc=t, labeljust=l, fontname=\"Helvetica\", fontsize=12, label=<\n";
  out += "    <table border=\"0\" cellborder=\"0\" cellspacing=\"2\" cellpadding=\"2\">\n";
  std::string title = "Stack traces of " + count_of(ranks) + " on " + std::to_string(heading.hosts) +
                      (heading.hosts == 1 ? " host" : " hosts") + ", " + std::to_string(heading.samples) +
                      (heading.samples == 1 ? " sample" : " samples");
  out += "    <tr><td colspan=\"3\" align=\"left\"><font point-size=\"16\"><b>" + html_text(title) +
         "</b></font></td></tr>\n";
  auto line = [&](const std::string& text) {
    if (!text.empty())
      out += "    <tr><td colspan=\"3\" align=\"left\">" + html_text(shortened(text, 200)) + "</td></tr>\n";
  };
  line(heading.job + (heading.command.empty() ? "" : ": " + heading.command));
  line(heading.when.empty() ? "" : "taken " + heading.when);
  line(heading.found);
  line(heading.missing.empty() ? "" : "missing: ranks " + heading.missing + " (their daemon was lost)");
  out += "    <tr><td colspan=\"3\" align=\"left\"><b>" + std::to_string(classes.size()) +
         (classes.size() == 1 ? " class" : " classes") + " of " + count_of(ranks) +
         " (where the ranks stop)</b></td></tr>\n";
  for (std::size_t i = 0; i < classes.size(); ++i) {
    const auto& c = classes[i].cls;
    out += "    <tr><td bgcolor=\"" + class_colour(i).line + "\" width=\"14\"> </td><td align=\"left\">" +
           count_of(c.ranks.size()) + " [" + format_rank_ranges(c.ranks) + "]</td><td align=\"left\">" +
           html_text(shortened(describe_path(c.path), 160)) + "</td></tr>\n";
  }
  out += "    </table>>];\n";
  out += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=11, color=\"" + shared_line +
         "\", fillcolor=white];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9, color=\"" + shared_line + "\", fontcolor=\"" + shared_line +
         "\"];\n";
  // The root: the job.
  out += "  n0 [label=\"" + dot_text((heading.job.empty() ? std::string("job") : heading.job) + "\n" + count_of(ranks)) +
         "\", shape=box, style=filled, fillcolor=\"#eeeeee\", fontsize=12];\n";
  // Frames in pre-order, numbered as they come, so equal trees draw identically.
  std::uint32_t next = 1;
  std::vector<std::pair<NodeId, std::uint32_t>> pending;
  for (auto c = tree.children(CallTree::kRoot).rbegin(); c != tree.children(CallTree::kRoot).rend(); ++c)
    pending.emplace_back(*c, 0);
  while (!pending.empty()) {
    auto [id, parent] = pending.back();
    pending.pop_back();
    const std::uint32_t index = next++;
    const std::string n = "n" + std::to_string(index);
    std::string node_style, edge_style;
    if (colour_of[id] >= 0) {
      const auto colour = class_colour(static_cast<std::size_t>(colour_of[id]));
      node_style = ", color=\"" + colour.line + "\", fillcolor=\"" + colour.fill + "\", penwidth=2";
      edge_style = ", color=\"" + colour.line + "\", fontcolor=\"" + colour.line + "\", penwidth=2";
    }
    out += "  " + n + " [label=\"" + dot_text(tree.name(id)) + "\"" + node_style + "];\n";
    out += "  n" + std::to_string(parent) + " -> " + n + " [label=\"" + std::to_string(tree.rank_count(id)) + ":[" +
           format_rank_ranges(tree.rank_runs(id)) + "]\"" + edge_style + "];\n";
    for (auto c = tree.children(id).rbegin(); c != tree.children(id).rend(); ++c) pending.emplace_back(*c, index);
  }
  out += "}\n";
  return out;
}

}  // namespace canopy::stack
