#include "run_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

namespace canopy::tools {

namespace {

// Sizes of the tree drawing, in SVG units (pixels at scale 1).
constexpr double kLevel = 86;     // from one level to the next
constexpr double kSlot = 64;      // the least width of a subtree
constexpr double kTop = 34;       // above the root: its label
constexpr double kMark = 10;      // a back-end drawn as a square in a grid
constexpr double kMarkGap = 3;
constexpr double kAdoptedGap = 7;  // between a grid's own marks and those it adopted
constexpr double kGridPad = 9;     // either side of a grid
constexpr double kUnderLabel = 27; // below a node's centre: below its label
constexpr double kCommnodeRadius = 10;
constexpr double kBackendRadius = 7;

const char* const kAlive = "#2f9e44";
const char* const kOrphaned = "#f59f00";
const char* const kLost = "#ced4da";
const char* const kAdopted = "#d9480f";

std::string fmt(const char* format, double a) {
  char text[64];
  std::snprintf(text, sizeof text, format, a);
  return text;
}
std::string num(double v) { return fmt("%.1f", v); }

std::string role_words(Role role) {
  return role == Role::frontend ? "front-end" : role == Role::commnode ? "commnode" : "back-end";
}

// "1,234,567"
std::string thousands(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string plural(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The tree laid out: where each node is, and whether it is a mark in a grid.
struct Layout {
  struct Place {
    double x = 0, y = 0;
    bool mark = false;
  };
  std::map<Rank, const PageNode*> by_rank;
  std::map<Rank, std::vector<Rank>> children;  // by current parent, own children first
  std::vector<Rank> roots;
  std::map<Rank, Place> at;
  // Grids of marks, for their labels: the parent, the grid's box, the marks in it.
  struct Grid {
    Rank parent;
    double left, top, width, height;
    double own_width;  // of the block of its own marks, at its left
    std::vector<Rank> own, adopted;
  };
  std::vector<Grid> grids;
  bool compact = false;
  std::size_t columns = 4;
  double width = 0, height = 0;

  bool is_mark(Rank r) const {
    const auto it = by_rank.find(r);
    return compact && it->second->status.role == Role::backend && !children.count(r);
  }
  bool adopted(Rank r) const { return by_rank.at(r)->status.incarnation > 0; }
  struct Split {
    std::vector<Rank> subtrees, own, adopted;  // own and adopted marks
  };
  Split split(Rank r) const {
    Split out;
    if (auto it = children.find(r); it != children.end()) {
      for (Rank c : it->second) (!is_mark(c) ? out.subtrees : adopted(c) ? out.adopted : out.own).push_back(c);
    }
    return out;
  }
  static double block_width(std::size_t cols) {
    return cols ? static_cast<double>(cols) * kMark + static_cast<double>(cols - 1) * kMarkGap : 0;
  }
  // A grid's blocks: its own marks in `columns` columns; the adopted ones beside
  // them, in as many columns as keep them within as many rows.
  std::pair<std::size_t, std::size_t> grid_columns(const Split& s) const {
    const std::size_t own = std::min(s.own.size(), columns);
    const std::size_t rows = std::max<std::size_t>((s.own.size() + columns - 1) / columns, 1);
    const std::size_t adopted = std::min((s.adopted.size() + rows - 1) / rows, columns);
    return {own, adopted};
  }
  double grid_width(const Split& s) const {
    if (s.own.empty() && s.adopted.empty()) return 0;
    const auto [own, adopted] = grid_columns(s);
    return block_width(own) + (own && adopted ? kAdoptedGap : 0) + block_width(adopted) + 2 * kGridPad;
  }
  std::map<Rank, double> widths;
  double measure(Rank r) {
    const Split s = split(r);
    double content = grid_width(s);
    for (Rank c : s.subtrees) content += measure(c);
    return widths[r] = std::max(kSlot, content);
  }
  void place(Rank r, double left, int depth) {
    const Split s = split(r);
    const double y = kTop + depth * kLevel;
    double content = grid_width(s);
    for (Rank c : s.subtrees) content += widths[c];
    double cursor = left + (widths[r] - content) / 2;
    std::vector<double> centres;
    for (Rank c : s.subtrees) {
      place(c, cursor, depth + 1);
      centres.push_back(at[c].x);
      cursor += widths[c];
    }
    if (!s.own.empty() || !s.adopted.empty()) {
      const auto [own_cols, adopted_cols] = grid_columns(s);
      const double top = y + kLevel - kMark;
      const double own_left = cursor + kGridPad;
      const double adopted_left = own_left + block_width(own_cols) + (own_cols ? kAdoptedGap : 0);
      std::size_t rows = 0;
      auto lay = [&](const std::vector<Rank>& marks, double block_left, std::size_t cols) {
        for (std::size_t i = 0; i < marks.size(); ++i) {
          at[marks[i]] = {block_left + static_cast<double>(i % cols) * (kMark + kMarkGap) + kMark / 2,
                          top + static_cast<double>(i / cols) * (kMark + kMarkGap) + kMark / 2, true};
        }
        if (cols) rows = std::max(rows, (marks.size() + cols - 1) / cols);
      };
      lay(s.own, own_left, own_cols);
      lay(s.adopted, adopted_left, adopted_cols);
      const double width = grid_width(s) - 2 * kGridPad;
      Grid grid{r, own_left, top, width, static_cast<double>(rows) * kMark + static_cast<double>(rows - 1) * kMarkGap,
                block_width(own_cols), s.own, s.adopted};
      centres.push_back(own_left + (s.own.empty() ? width : block_width(own_cols)) / 2);
      height = std::max(height, top + grid.height + 26);
      grids.push_back(std::move(grid));
    }
    const double x = centres.empty() ? left + widths[r] / 2 : (centres.front() + centres.back()) / 2;
    at[r] = {x, y, false};
    height = std::max(height, y + 40);
  }
};

Layout lay_out(const std::vector<PageNode>& nodes) {
  Layout layout;
  for (const auto& n : nodes) layout.by_rank[n.status.rank] = &n;
  for (const auto& n : nodes) {
    const auto& s = n.status;
    if (s.parent && layout.by_rank.count(*s.parent) && *s.parent != s.rank) {
      layout.children[*s.parent].push_back(s.rank);
    } else {
      layout.roots.push_back(s.rank);
    }
  }
  // Own children first, then those adopted, each in rank order: a subtree keeps its
  // place as the tree heals.
  for (auto& [parent, kids] : layout.children) {
    std::sort(kids.begin(), kids.end(), [&](Rank a, Rank b) {
      const bool adopted_a = layout.by_rank[a]->status.incarnation > 0;
      const bool adopted_b = layout.by_rank[b]->status.incarnation > 0;
      return adopted_a != adopted_b ? adopted_b : a < b;
    });
  }
  std::stable_sort(layout.roots.begin(), layout.roots.end(), [&](Rank a, Rank b) {
    return layout.by_rank[a]->status.role == Role::frontend && layout.by_rank[b]->status.role != Role::frontend;
  });
  std::size_t backends = 0, largest = 0;
  for (const auto& n : nodes) backends += n.status.role == Role::backend;
  layout.compact = backends > kCompactAbove;
  for (const auto& [parent, kids] : layout.children) largest = std::max(largest, layout.split(parent).own.size());
  layout.columns = std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(largest)))), 2, 8);
  // A parent link that loops (never in a tree the front-end holds) would recurse for
  // ever: such nodes are drawn as roots instead.
  std::set<Rank> seen;
  std::function<void(Rank)> check = [&](Rank r) {
    seen.insert(r);
    auto it = layout.children.find(r);
    if (it == layout.children.end()) return;
    std::vector<Rank> kept;
    for (Rank c : it->second) {
      if (seen.count(c)) continue;
      kept.push_back(c);
      check(c);
    }
    it->second = kept;
  };
  for (Rank r : layout.roots) check(r);
  for (const auto& n : nodes) {
    if (!seen.count(n.status.rank)) {
      layout.roots.push_back(n.status.rank);
      check(n.status.rank);
    }
  }
  double left = 12;
  for (Rank r : layout.roots) {
    layout.measure(r);
    layout.place(r, left, 0);
    left += layout.widths[r];
  }
  layout.width = left + 12;
  return layout;
}

// alive, orphaned (alive under a lost parent) or lost
std::string shown_state(const NodeStatus& s, const Layout& layout) {
  if (!s.alive) return "lost";
  if (s.parent) {
    const auto it = layout.by_rank.find(*s.parent);
    if (it != layout.by_rank.end() && !it->second->status.alive) return "orphaned";
  }
  return "alive";
}

std::string title_of(const PageNode& n, const std::string& state) {
  const auto& s = n.status;
  std::string t = role_words(s.role) + " " + std::to_string(s.rank) + " on " + s.host + ": " + state;
  if (s.parent) t += "\nparent: " + std::to_string(*s.parent);
  if (s.incarnation) t += "\nadopted; incarnation " + std::to_string(s.incarnation);
  if (!n.link.empty()) t += "\nlink: " + n.link;
  if (s.role == Role::backend) {
    t += s.member ? "\nin the membership view" : "\nnot in the membership view (epoch " + std::to_string(s.epoch) + ")";
  }
  if (!s.children.empty()) t += "\n" + plural(s.children.size(), "child", "children");
  if (s.late_packets) t += "\n" + std::to_string(s.late_packets) + " late packet(s) dropped";
  return html_escape(t);
}

std::string legend_svg() {
  std::string out = "<svg class=\"legend\" width=\"760\" height=\"24\" viewBox=\"0 0 760 24\" role=\"img\" "
                    "aria-label=\"legend\">";
  double x = 4;
  auto item = [&](const std::string& shape, const std::string& text) {
    out += shape;
    out += "<text x=\"" + num(x + 20) + "\" y=\"16\">" + text + "</text>";
    x += 20 + 6.6 * static_cast<double>(text.size()) + 18;  // 12px text: about 6.6px a character
  };
  item("<rect x=\"" + num(x) + "\" y=\"5\" width=\"14\" height=\"14\" rx=\"3\" fill=\"" + kAlive + "\"/>", "alive");
  item("<rect x=\"" + num(x) + "\" y=\"5\" width=\"14\" height=\"14\" rx=\"3\" fill=\"" + kOrphaned + "\"/>",
       "orphaned (waiting for an adopter)");
  item("<rect x=\"" + num(x) + "\" y=\"5\" width=\"14\" height=\"14\" rx=\"3\" fill=\"" + kLost +
           "\" stroke=\"#868e96\" stroke-dasharray=\"3 2\"/>",
       "lost");
  item("<line x1=\"" + num(x) + "\" y1=\"12\" x2=\"" + num(x + 16) + "\" y2=\"12\" stroke=\"" + kAdopted +
           "\" stroke-width=\"2.5\" stroke-dasharray=\"4 3\"/>",
       "adopted (new parent)");
  item("<circle cx=\"" + num(x + 7) + "\" cy=\"12\" r=\"7\" fill=\"#fff\" stroke=\"#495057\"/>", "commnode");
  item("<rect x=\"" + num(x + 2) + "\" y=\"7\" width=\"10\" height=\"10\" fill=\"#fff\" stroke=\"#495057\"/>",
       "back-end");
  return out + "</svg>";
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_tree_svg(const std::vector<PageNode>& nodes) {
  if (nodes.empty()) return "<p class=\"quiet\">The tree is not up yet.</p>";
  const Layout layout = lay_out(nodes);
  std::string edges, marks, shapes, labels;
  for (const auto& n : nodes) {
    const auto& s = n.status;
    const auto& p = layout.at.at(s.rank);
    const std::string state = shown_state(s, layout);
    const bool adopted = s.incarnation > 0;
    // The link to its parent: always for a node drawn whole, only when adopted for a
    // mark (its grid hangs from the parent by one line, drawn below).
    if (s.parent && layout.at.count(*s.parent) && (!p.mark || adopted)) {
      const auto& q = layout.at.at(*s.parent);
      // Links leave a parent below its label (the front-end's is above it).
      const bool from_root = layout.by_rank.at(*s.parent)->status.role == Role::frontend;
      const double from_y = q.y + (from_root ? 11 : kUnderLabel);
      const double to_y = p.y - (p.mark ? kMark / 2 : kCommnodeRadius);
      edges += "<line class=\"edge" + std::string(adopted ? " adopted" : "") + (s.alive ? "" : " lost") +
               (p.mark ? " to-mark" : "") +
               "\" data-parent=\"" +
               std::to_string(*s.parent) + "\" data-child=\"" + std::to_string(s.rank) + "\" x1=\"" + num(q.x) +
               "\" y1=\"" + num(from_y) + "\" x2=\"" + num(p.x) + "\" y2=\"" + num(to_y) + "\"/>";
    }
    const std::string fill = state == "lost" ? kLost : state == "orphaned" ? kOrphaned : kAlive;
    std::string element = "<g class=\"node " + state + (adopted ? " adopted" : "") + " role-" +
                          std::string(to_string(s.role)) + "\" data-rank=\"" + std::to_string(s.rank) +
                          "\" data-role=\"" + std::string(to_string(s.role)) + "\" data-state=\"" + state +
                          "\" data-parent=\"" + (s.parent ? std::to_string(*s.parent) : "") +
                          "\" data-incarnation=\"" + std::to_string(s.incarnation) + "\"><title>" + title_of(n, state) +
                          "</title>";
    if (p.mark) {
      element += "<rect x=\"" + num(p.x - kMark / 2) + "\" y=\"" + num(p.y - kMark / 2) + "\" width=\"" + num(kMark) +
                 "\" height=\"" + num(kMark) + "\" fill=\"" + fill + "\"/></g>";
      marks += element;
      continue;
    }
    if (s.role == Role::frontend) {
      element += "<rect x=\"" + num(p.x - 13) + "\" y=\"" + num(p.y - 11) + "\" width=\"26\" height=\"22\" rx=\"5\" fill=\"" +
                 fill + "\"/>";
    } else if (s.role == Role::commnode) {
      element += "<circle cx=\"" + num(p.x) + "\" cy=\"" + num(p.y) + "\" r=\"" + num(kCommnodeRadius) + "\" fill=\"" +
                 fill + "\"/>";
    } else {
      element += "<rect x=\"" + num(p.x - kBackendRadius) + "\" y=\"" + num(p.y - kBackendRadius) + "\" width=\"" +
                 num(2 * kBackendRadius) + "\" height=\"" + num(2 * kBackendRadius) + "\" fill=\"" + fill + "\"/>";
    }
    if (state == "lost") {  // a cross over it
      element += "<path class=\"cross\" d=\"M" + num(p.x - 5) + " " + num(p.y - 5) + "l10 10m0 -10l-10 10\"/>";
    }
    // Its name: the front-end's above it, the others' below.
    const std::string name = s.role == Role::frontend ? "front-end " + std::to_string(s.rank) : std::to_string(s.rank);
    const double label_y = s.role == Role::frontend ? p.y - 16 : p.y + kCommnodeRadius + 12;
    element += "<text class=\"label" + std::string(state == "lost" ? " lost" : "") + "\" x=\"" + num(p.x) + "\" y=\"" +
               num(label_y) + "\">" + name + "</text>";
    if (state == "lost" && s.role != Role::frontend) {
      element += "<text class=\"label lost\" x=\"" + num(p.x) + "\" y=\"" + num(label_y + 11) + "\">lost</text>";
    }
    element += "</g>";
    shapes += element;
  }
  // Each grid of marks hangs from its parent by one line (to its own marks), with
  // the ranks it holds written under it.
  for (const auto& g : layout.grids) {
    const auto& q = layout.at.at(g.parent);
    std::string text;
    if (!g.own.empty()) {
      edges += "<line class=\"edge group\" x1=\"" + num(q.x) + "\" y1=\"" + num(q.y + kUnderLabel) + "\" x2=\"" +
               num(g.left + g.own_width / 2) + "\" y2=\"" + num(g.top - 2) + "\"/>";
      std::vector<Rank> own = g.own;
      std::sort(own.begin(), own.end());
      const bool run = own.back() - own.front() + 1 == own.size();
      text = run && own.size() > 1 ? std::to_string(own.front()) + "\u2013" + std::to_string(own.back())
                                   : plural(own.size(), "back-end", "back-ends");
    }
    labels += "<text class=\"grid-label\" x=\"" + num(g.left + g.width / 2) + "\" y=\"" + num(g.top + g.height + 11) +
              "\">" + text + "</text>";
    if (!g.adopted.empty()) {
      labels += "<text class=\"grid-label adopted\" x=\"" + num(g.left + g.width / 2) + "\" y=\"" +
                num(g.top + g.height + 22) + "\">+" + std::to_string(g.adopted.size()) + " adopted</text>";
    }
  }
  const double width = std::ceil(layout.width), height = std::ceil(layout.height);
  return "<svg id=\"tree-drawing\" class=\"tree\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) +
         "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\" role=\"img\" aria-label=\"the tree\" data-nodes=\"" + std::to_string(nodes.size()) + "\">" +
         "<g class=\"edges\">" + edges + "</g><g class=\"marks\">" + marks + "</g><g class=\"nodes\">" + shapes +
         "</g><g class=\"labels\">" + labels + "</g></svg>";
}

std::string render_rate_plot(const std::vector<RateSeries>& rates, const std::vector<StoryEntry>& events,
                             double elapsed_s, bool live) {
  double top = 0, end = std::max(elapsed_s, 1.0);
  std::size_t points = 0;
  for (const auto& r : rates) {
    for (const auto& [t, v] : r.points) top = std::max(top, v), end = std::max(end, t), ++points;
  }
  if (points < 2) return "<p class=\"quiet\">No rate to plot yet (one point a second).</p>";
  // A round top for the axis: 1, 2 or 5 times a power of ten.
  double step = std::pow(10.0, std::floor(std::log10(std::max(top, 1.0))));
  double axis = step;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (step * m >= top) {
      axis = step * m;
      break;
    }
  }
  constexpr double W = 640, H = 180, L = 58, R = 12, T = 12, B = 30;
  const auto px = [&](double t) { return L + (W - L - R) * t / end; };
  const auto py = [&](double v) { return T + (H - T - B) * (1 - v / axis); };
  static const char* const colours[] = {"#1971c2", "#e8590c", "#2f9e44", "#9c36b5", "#0c8599", "#c2255c"};
  std::string out = "<svg id=\"rate-plot\" class=\"plot\" width=\"" + num(W) + "\" height=\"" + num(H) +
                    "\" viewBox=\"0 0 " + num(W) + " " + num(H) + "\" role=\"img\" aria-label=\"stream rates\">";
  // Axes, with the top and the end written on them.
  out += "<line class=\"axis\" x1=\"" + num(L) + "\" y1=\"" + num(T) + "\" x2=\"" + num(L) + "\" y2=\"" + num(H - B) +
         "\"/><line class=\"axis\" x1=\"" + num(L) + "\" y1=\"" + num(H - B) + "\" x2=\"" + num(W - R) + "\" y2=\"" +
         num(H - B) + "\"/>";
  out += "<line class=\"grid\" x1=\"" + num(L) + "\" y1=\"" + num(py(axis / 2)) + "\" x2=\"" + num(W - R) + "\" y2=\"" +
         num(py(axis / 2)) + "\"/>";
  out += "<text class=\"tick\" x=\"" + num(L - 6) + "\" y=\"" + num(T + 4) + "\" text-anchor=\"end\">" +
         thousands(static_cast<std::uint64_t>(axis)) + "/s</text>";
  out += "<text class=\"tick\" x=\"" + num(L - 6) + "\" y=\"" + num(py(axis / 2) + 4) + "\" text-anchor=\"end\">" +
         thousands(static_cast<std::uint64_t>(axis / 2)) + "/s</text>";
  out += "<text class=\"tick\" x=\"" + num(L - 6) + "\" y=\"" + num(H - B + 4) + "\" text-anchor=\"end\">0</text>";
  out += "<text class=\"tick\" x=\"" + num(L) + "\" y=\"" + num(H - 10) + "\">+0 s</text>";
  out += "<text class=\"tick\" x=\"" + num(W - R) + "\" y=\"" + num(H - 10) + "\" text-anchor=\"end\">+" +
         fmt("%.0f", end) + " s</text>";
  out += "<text class=\"tick\" x=\"" + num((L + W - R) / 2) + "\" y=\"" + num(H - 10) +
         "\" text-anchor=\"middle\">time since the run started</text>";
  // Failures, where they happened.
  for (const auto& e : events) {
    if (e.kind != "failure" && e.kind != "recovered" && e.kind != "gossip") continue;
    if (e.at_s < 0 || e.at_s > end) continue;
    out += "<line class=\"event-mark\" x1=\"" + num(px(e.at_s)) + "\" y1=\"" + num(T) + "\" x2=\"" + num(px(e.at_s)) +
           "\" y2=\"" + num(H - B) + "\"><title>" + fmt("+%.1f s: ", e.at_s) + html_escape(e.headline) +
           "</title></line>";
  }
  for (std::size_t i = 0; i < rates.size(); ++i) {
    std::string line;
    for (const auto& [t, v] : rates[i].points) line += (line.empty() ? "" : " ") + num(px(t)) + "," + num(py(v));
    out += "<polyline class=\"rate\" data-stream=\"" + std::to_string(rates[i].stream) + "\" fill=\"none\" stroke=\"" +
           colours[i % 6] + "\" stroke-width=\"2\" points=\"" + line + "\"/>";
  }
  out += "</svg><ul class=\"plot-legend\">";
  for (std::size_t i = 0; i < rates.size(); ++i) {
    out += "<li data-stream=\"" + std::to_string(rates[i].stream) + "\"><span class=\"swatch\" style=\"background:" +
           colours[i % 6] + "\"></span>stream " + std::to_string(rates[i].stream) + ": " +
           thousands(rates[i].packets) + " packets" +
           (live ? ", " + fmt("%.1f", rates[i].per_second) + " per second now" : "") + "</li>";
  }
  out += "<li><span class=\"swatch failure\"></span>a failure (hover for what happened)</li></ul>";
  return out;
}

std::string render_run_view(const RunPage& page) {
  std::string out;
  // The run.
  out += "<section id=\"run\" class=\"run " + html_escape(page.run) + "\"><p>";
  const std::string where =
      page.pid ? " (pid " + std::to_string(page.pid) + (page.host.empty() ? "" : " on " + html_escape(page.host)) + ")"
               : "";
  if (page.run == "finished") {
    out += "The run finished after " + fmt("%.1f", page.elapsed_s) + " s with exit status " +
           std::to_string(page.exit_status.value_or(-1)) + where + ".";
  } else if (page.run == "handed over") {
    out += "This front-end stopped after " + fmt("%.1f", page.elapsed_s) + " s with exit status " +
           std::to_string(page.exit_status.value_or(-1)) + where +
           "; the tree outlives it, and canopy attach-frontend may carry the run on.";
  } else if (page.run == "running") {
    out += "Running for " + fmt("%.1f", page.elapsed_s) + " s" + where + ".";
  } else {
    out += "Starting: the tree is not up yet" + where + ".";
  }
  out += "</p>";
  if (!page.nodes.empty()) {
    std::size_t by_role[3] = {}, lost = 0;
    for (const auto& n : page.nodes) {
      ++by_role[static_cast<int>(n.status.role)];
      lost += !n.status.alive;
    }
    out += "<p id=\"summary\">" + plural(page.nodes.size(), "process", "processes") + ": " +
           plural(by_role[0], "front-end", "front-ends") + ", " + plural(by_role[1], "commnode", "commnodes") + ", " +
           plural(by_role[2], "back-end", "back-ends") + "; " + std::to_string(page.nodes.size() - lost) + " alive, " +
           std::to_string(lost) + " lost.";
    if (page.view) {
      out += " " + plural(page.view->members.size(), "back-end", "back-ends") + " in the membership view (view " +
             std::to_string(page.view->id) + ").";
    }
    out += "</p>";
  }
  out += "</section>";

  // Progress, and the check once the run is over.
  const auto& p = page.progress;
  out += "<section id=\"progress\">";
  if (p.workload == "demo") {
    out += "<h2>Progress</h2><p>Waves received: <b>" + thousands(p.waves) + "</b> of " + thousands(p.waves_total) +
           " <progress max=\"" + std::to_string(std::max<std::uint64_t>(p.waves_total, 1)) + "\" value=\"" +
           std::to_string(std::min(p.waves, p.waves_total)) + "\"></progress></p>";
  } else if (p.workload == "union") {
    out += "<h2>Progress</h2><p>Union: <b>" + thousands(p.union_size) + "</b> distinct integers so far, from " +
           thousands(p.packets) + " packets";
    if (p.send_seconds > 0) {
      const double sent = std::min(page.elapsed_s, p.send_seconds);
      out += "; the back-ends send for " + fmt("%.0f", p.send_seconds) + " s <progress max=\"" +
             fmt("%.1f", p.send_seconds) + "\" value=\"" + fmt("%.1f", p.check.empty() ? sent : p.send_seconds) +
             "\"></progress>";
    }
    out += "</p>";
  }
  if (!p.check.empty()) {
    const std::string verdict = p.check == "ok" ? "ok: the results are right"
                                : p.check == "failed" ? "FAILED: the results are wrong"
                                                      : "skipped (nothing to check against)";
    out += "<p id=\"check\" class=\"check " + html_escape(p.check) + "\">Check: " + verdict + ".</p>";
    if (!p.summary.empty()) out += "<p class=\"summary-line\"><code>" + html_escape(p.summary) + "</code></p>";
  }
  if (!p.error.empty()) out += "<p id=\"error\" class=\"check failed\">The run failed: " + html_escape(p.error) + "</p>";
  out += "</section>";

  out += "<section id=\"tree\"><h2>The tree</h2>" + legend_svg() + "<div class=\"drawing\">" +
         render_tree_svg(page.nodes) + "</div><p class=\"quiet\">Hover over a node for its rank, host, "
         "incarnation and link.</p></section>";
  out += "<section id=\"rates\"><h2>Packets per second at the front-end</h2>" +
         render_rate_plot(page.rates, page.events, page.elapsed_s, page.run == "running") + "</section>";

  out += "<section id=\"events\"><h2>Events, latest first</h2>";
  if (page.events.empty()) {
    out += "<p class=\"quiet\">None: no process has failed.</p>";
  } else {
    out += "<ul class=\"events\">";
    for (auto it = page.events.rbegin(); it != page.events.rend(); ++it) {
      out += "<li id=\"event-" + std::to_string(it->number) + "\" class=\"event " + html_escape(it->kind) +
             "\"><span class=\"when\">" + fmt("+%.1f s", it->at_s) +
             "</span> <span class=\"what\">" + html_escape(it->headline) +
             "</span><details><summary>details</summary><pre>";
      for (const auto& line : it->detail) out += html_escape(line) + "\n";
      out += "</pre></details></li>";
    }
    out += "</ul>";
  }
  out += "</section>";
  return out;
}

const char* const kRunPageStyle = R"CSS(
  body { font: 14px/1.45 system-ui, sans-serif; margin: 1.2em 1.5em; color: #212529; }
  h1 { font-size: 1.35em; margin: 0 0 .3em; }
  h2 { font-size: 1.05em; margin: 1.1em 0 .35em; }
  p { margin: .25em 0; }
  .quiet { color: #6c757d; font-size: .9em; }
  #banner { color: #c92a2a; font-weight: bold; }
  .run.finished p:first-child { font-weight: bold; }
  .check.ok { color: #2b8a3e; font-weight: bold; }
  .check.failed { color: #c92a2a; font-weight: bold; }
  .check.skipped { color: #6c757d; font-weight: bold; }
  progress { width: 16em; vertical-align: middle; }
  .drawing { overflow-x: auto; }
  svg.tree { max-width: 100%; height: auto; }
  svg.tree .edge { stroke: #adb5bd; stroke-width: 1.2; }
  svg.tree .edge.lost { stroke: #ced4da; stroke-dasharray: 2 3; }
  svg.tree .edge.adopted { stroke: #d9480f; stroke-width: 2; stroke-dasharray: 5 3; }
  svg.tree .edge.adopted.to-mark { stroke-width: 1.2; stroke-dasharray: 3 2; }
  svg.tree .node.lost rect, svg.tree .node.lost circle { stroke: #868e96; stroke-dasharray: 3 2; }
  svg.tree .node.adopted rect, svg.tree .node.adopted circle { stroke: #d9480f; stroke-width: 2; }
  svg.tree .cross { stroke: #495057; stroke-width: 1.6; }
  svg.tree text { font: 10px system-ui, sans-serif; text-anchor: middle; fill: #343a40; }
  svg.tree text.lost { fill: #868e96; }
  svg.tree text.grid-label { font-size: 9px; fill: #495057; }
  svg.tree text.grid-label.adopted { fill: #d9480f; }
  svg.legend text { font: 12px system-ui, sans-serif; fill: #343a40; }
  svg.plot .axis { stroke: #495057; }
  svg.plot .grid { stroke: #e9ecef; }
  svg.plot .tick { font: 11px system-ui, sans-serif; fill: #495057; }
  svg.plot .event-mark { stroke: #c92a2a; stroke-width: 1.5; stroke-dasharray: 4 3; }
  ul.plot-legend { list-style: none; padding: 0; margin: .2em 0; font-size: .9em; }
  ul.plot-legend li { display: inline-block; margin-right: 1.4em; }
  .swatch { display: inline-block; width: 14px; height: 4px; margin-right: .4em; vertical-align: middle; }
  .swatch.failure { background: repeating-linear-gradient(90deg, #c92a2a 0 4px, transparent 4px 7px); }
  ul.events { list-style: none; padding-left: .2em; }
  ul.events li { margin: .25em 0; }
  .when { font-variant-numeric: tabular-nums; color: #495057; display: inline-block; min-width: 4.5em; }
  details { display: inline; margin-left: .6em; font-size: .85em; color: #6c757d; }
  details[open] { display: block; margin-left: 5em; }
  details pre { margin: .2em 0; white-space: pre-wrap; }
  code { font-size: .9em; }
)CSS";

std::string render_report(const RunPage& page) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Canopy: report of a run</title>\n"
         "<style>" +
         std::string(kRunPageStyle) +
         "</style>\n</head>\n<body>\n<h1>Canopy: report of a run</h1>\n"
         "<p class=\"quiet\">Written by canopy run --report when the run ended: the tree, the progress and the events "
         "as they were then.</p>\n" +
         render_run_view(page) + "\n</body>\n</html>\n";
}

}  // namespace canopy::tools
