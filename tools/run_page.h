// What the dashboard and the report of `canopy run` show (docs/fault-tolerance.md,
// "Watching a run"), rendered as HTML with inline SVG: the tree drawn level by level,
// the run's progress and check, the stream rates over time and the events in plain
// sentences. Pure: the same snapshot gives the same text, and nothing here does I/O.
// The live page (dashboard_page.h) swaps in render_run_view() twice a second; the
// report (render_report) is that view in a page of its own, with no script.
//
// The drawing marks each node for a reader and for the tests: a node is a
// <g class="node" data-rank data-role data-state data-parent data-incarnation>,
// data-state one of alive, orphaned (alive, its parent lost, not yet adopted) and
// lost; a link is a <line class="edge[ adopted]" data-parent data-child>, "adopted"
// when the child has been adopted (incarnation above 0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "canopy/view.h"
#include "run_story.h"

namespace canopy::tools {

// A process of the live tree, and the link to its current parent ("plain",
// "striped (NICs a,b to c)"; empty for the root).
struct PageNode {
  NodeStatus status;
  std::string link;
};

// How far the workload has come, and, once it is over, its check.
struct RunProgress {
  std::string workload;  // "demo", "union", or "" (not known: nothing is shown)
  std::uint64_t waves = 0, waves_total = 0;  // demo: results received, of how many waves
  std::size_t union_size = 0;                // union: integers in the union so far
  std::size_t packets = 0;                   // union: packets of it received
  double send_seconds = 0;                   // union: how long the back-ends send
  std::string check;                         // once over: "ok", "failed" or "skipped"
  std::string summary;                       // once over: the summary line canopy run prints
  std::string error;                         // once over: why the run failed, if it did
};

// One stream's packet rate at the front-end, sampled once a second.
struct RateSeries {
  std::uint32_t stream = 0;
  std::uint64_t packets = 0;
  double per_second = 0;                           // now
  std::vector<std::pair<double, double>> points;  // (seconds since the start, packets per second)
};

struct RunPage {
  std::string run = "starting";  // starting, running or finished
  std::optional<int> exit_status;
  std::string host;
  long pid = 0;
  double elapsed_s = 0;
  std::vector<PageNode> nodes;  // the root first
  std::optional<View> view;
  RunProgress progress;
  std::vector<RateSeries> rates;
  std::vector<StoryEntry> events;  // oldest first
};

// The tree as an <svg>: the root at the top, a level per depth; when there are more
// than kCompactAbove back-ends, each back-end is a small square in a grid under its
// parent. Lost nodes stay where they were, grey.
std::string render_tree_svg(const std::vector<PageNode>& nodes);
inline constexpr std::size_t kCompactAbove = 32;
// The streams' rates over time as an <svg> (nothing to plot: a sentence saying so),
// with each stream's packets and, `live`, its rate now.
std::string render_rate_plot(const std::vector<RateSeries>& rates, const std::vector<StoryEntry>& events,
                             double elapsed_s, bool live);
// The page's body: <section> elements with ids (run, progress, tree, rates, events)
// that the live page replaces one by one when they change.
std::string render_run_view(const RunPage& page);
// A whole page, readable without the run and without a network: render_run_view in
// the page's style, no script.
std::string render_report(const RunPage& page);
// The style both pages use.
extern const char* const kRunPageStyle;
// `text` with &, <, > and " escaped.
std::string html_escape(const std::string& text);

}  // namespace canopy::tools
