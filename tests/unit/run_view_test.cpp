// What canopy run's dashboard and report show (tools/run_story.h, tools/run_page.h):
// events told in sentences, a loss and its orphans' recoveries as one; the tree
// drawn with each node's state, adopted links marked, back-ends as marks past
// kCompactAbove.
#include <gtest/gtest.h>

#include <regex>

#include "run_page.h"
#include "run_story.h"

namespace canopy::tools {
namespace {

using namespace std::chrono_literals;

constexpr Rank FE = 1000000, C1 = 1000001, C2 = 1000002;

NodeStatus node(Rank rank, Role role, std::optional<Rank> parent, std::vector<Rank> children = {}) {
  NodeStatus n;
  n.rank = rank;
  n.role = role;
  n.host = role == Role::commnode ? "n" + std::to_string(rank - FE) : "h";
  n.parent = parent;
  n.children = std::move(children);
  n.member = role == Role::backend;
  return n;
}

// b:2^2: back-ends 0, 1 under C1 and 2, 3 under C2.
std::vector<NodeStatus> b2x2() {
  return {node(FE, Role::frontend, std::nullopt, {C1, C2}), node(C1, Role::commnode, FE, {0, 1}),
          node(C2, Role::commnode, FE, {2, 3}),          node(0, Role::backend, C1),
          node(1, Role::backend, C1),                    node(2, Role::backend, C2),
          node(3, Role::backend, C2)};
}

const auto kStart = std::chrono::system_clock::time_point(std::chrono::seconds(1000));

Event failure(Rank rank, std::string reason, std::chrono::milliseconds at) {
  Event e;
  e.kind = Event::Kind::failure;
  e.rank = rank;
  e.reason = std::move(reason);
  e.time = kStart + at;
  return e;
}

Event recovered(Rank orphan, Rank adopter, Rank lost, std::chrono::microseconds connect) {
  Event e;
  e.kind = Event::Kind::recovered;
  e.rank = orphan;
  e.adopter = adopter;
  e.failed_parent = lost;
  e.incarnation = 1;
  e.connect = connect;
  e.time = kStart + 4300ms;
  return e;
}

TEST(EventStory, ALossAndItsOrphansRecoveriesAreOneSentence) {
  EventStory story(kStart);
  story.observe(b2x2());
  story.add(failure(C1, "commnode 1000001 on n1 was killed by signal 9 (Killed)", 4200ms), "failure of 1000001");
  story.add(recovered(0, C2, C1, 2000us), "0 recovered under 1000002");
  story.add(recovered(1, C2, C1, 900us), "1 recovered under 1000002");
  ASSERT_EQ(story.entries().size(), 1u);
  const auto& e = story.entries().front();
  EXPECT_DOUBLE_EQ(e.at_s, 4.2);
  EXPECT_EQ(e.headline,
            "commnode 1000001 on n1 was killed by signal 9 (Killed); back-ends 0, 1 moved to commnode 1000002; "
            "recovered in 2.0 ms");
  EXPECT_EQ(e.detail, (std::vector<std::string>{"failure of 1000001", "0 recovered under 1000002",
                                                "1 recovered under 1000002"}));
}

TEST(EventStory, OrphansNotYetAdoptedWaitForAnAdopter) {
  EventStory story(kStart);
  story.observe(b2x2());
  story.add(failure(C1, "silent for 5000 ms", 1s), "failure of 1000001");
  story.add(recovered(1, FE, C1, 100us), "1 recovered under 1000000");
  ASSERT_EQ(story.entries().size(), 1u);
  EXPECT_EQ(story.entries().front().headline,
            "commnode 1000001 on n1 was lost: silent for 5000 ms; back-end 1 moved to the front-end; back-end 0 waits "
            "for an adopter");
}

TEST(EventStory, ARecoveryHeardBeforeItsParentsFailureJoinsIt) {
  EventStory story(kStart);
  story.observe(b2x2());
  story.add(recovered(0, C2, C1, 1500us), "0 recovered under 1000002");
  story.add(failure(C1, "commnode 1000001 on n1 was killed by signal 9 (Killed)", 4200ms), "failure of 1000001");
  ASSERT_EQ(story.entries().size(), 1u);
  EXPECT_EQ(story.entries().front().kind, "failure") << "a loss, whichever event came first";
  EXPECT_EQ(story.entries().front().headline,
            "commnode 1000001 on n1 was killed by signal 9 (Killed); back-end 0 moved to commnode 1000002; back-end 1 "
            "waits for an adopter");
}

TEST(EventStory, AViewSaysInWordsWhoLeft) {
  EventStory story(kStart);
  story.observe(b2x2());
  Event v;
  v.kind = Event::Kind::view;
  v.view = View{1, {0, 2, 3}};
  v.left = {1};
  v.stabilise = 483us;
  v.time = kStart + 9100ms;
  story.add(v, "view 1: 3 members, left [1], joined [], stabilised in 483 us");
  ASSERT_EQ(story.entries().size(), 1u);
  EXPECT_EQ(story.entries().front().headline,
            "3 back-ends in the membership view (view 1): back-end 1 left; every process agreed in 483 us");
}

TEST(EventStory, KeepsTheLatestEntries) {
  EventStory story(kStart);
  story.observe(b2x2());
  for (Rank r = 0; r < EventStory::kKept + 5; ++r) story.add(failure(r, "gone", 1s), "failure");
  ASSERT_EQ(story.entries().size(), EventStory::kKept);
  EXPECT_EQ(story.entries().front().number, 5u);
  EXPECT_EQ(story.entries().back().number, EventStory::kKept + 4);
}

TEST(DescribeRanks, NamesRolesAndRunsOfRanks) {
  std::map<Rank, NodeStatus> known;
  for (const auto& n : b2x2()) known[n.rank] = n;
  for (Rank r = 4; r < 10; ++r) known[r] = node(r, Role::backend, C2);
  EXPECT_EQ(describe_ranks({4, 5, 6, 7, 9}, known), "back-ends 4\u20137, 9");
  EXPECT_EQ(describe_ranks({C2, FE}, known), "the front-end and commnode 1000002");
  EXPECT_EQ(describe_ranks({C1, C2, 0}, known), "commnodes 1000001, 1000002 and back-end 0");
}

std::vector<PageNode> pages(const std::vector<NodeStatus>& tree) {
  std::vector<PageNode> out;
  for (const auto& n : tree) out.push_back({n, n.parent ? "plain" : ""});
  return out;
}

// data-rank -> data-state of the drawing.
std::map<Rank, std::string> states(const std::string& svg) {
  std::map<Rank, std::string> out;
  static const std::regex g(R"re(data-rank="(\d+)" data-role="[a-z]+" data-state="([a-z]+)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), g), end; it != end; ++it) {
    out[static_cast<Rank>(std::stoul((*it)[1]))] = (*it)[2];
  }
  return out;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TreeDrawing, ShowsEachNodesStateAndMarksAdoptedLinks) {
  auto tree = b2x2();
  tree[1].alive = false;  // C1 lost; back-end 0 adopted by C2, back-end 1 not yet
  tree[1].children.clear();
  tree[3].parent = C2;
  tree[3].incarnation = 1;
  const std::string svg = render_tree_svg(pages(tree));
  EXPECT_EQ(states(svg), (std::map<Rank, std::string>{{FE, "alive"}, {C1, "lost"}, {C2, "alive"}, {0, "alive"},
                                                      {1, "orphaned"}, {2, "alive"}, {3, "alive"}}));
  EXPECT_EQ(occurrences(svg, "<line class=\"edge adopted"), 1u);
  EXPECT_NE(svg.find("<line class=\"edge adopted\" data-parent=\"1000002\" data-child=\"0\""), std::string::npos);
  EXPECT_NE(svg.find("<title>commnode 1000001 on n1: lost"), std::string::npos) << "a hover title per node";
}

TEST(TreeDrawing, PastTheThresholdBackEndsAreMarksInAGridUnderTheirParent) {
  // b:6^2: 36 back-ends, above kCompactAbove.
  std::vector<NodeStatus> tree{node(FE, Role::frontend, std::nullopt)};
  for (Rank c = 0; c < 6; ++c) {
    tree.push_back(node(C1 + c, Role::commnode, FE));
    for (Rank b = 0; b < 6; ++b) tree.push_back(node(c * 6 + b, Role::backend, C1 + c));
  }
  ASSERT_GT(36u, kCompactAbove);
  const std::string svg = render_tree_svg(pages(tree));
  EXPECT_EQ(states(svg).size(), tree.size());
  EXPECT_EQ(occurrences(svg, "width=\"10.0\" height=\"10.0\""), 36u) << "each back-end a 10-pixel square";
  EXPECT_EQ(occurrences(svg, "<line class=\"edge group\""), 6u) << "one line to each grid, none to each mark";
  EXPECT_NE(svg.find(">0\u20135</text>"), std::string::npos) << "the grid's ranks under it";
  const std::regex width(R"re(<svg id="tree-drawing"[^>]* width="([\d.]+)")re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, width));
  EXPECT_LT(std::stod(m[1]), 6 * 100.0) << "grids keep the drawing narrow";
}

TEST(Report, IsOnePageWithoutScriptAndEscapesWhatItQuotes) {
  RunPage page;
  page.run = "finished";
  page.exit_status = 0;
  auto tree = b2x2();
  tree[1].host = "<b>n1</b>";
  page.nodes = pages(tree);
  page.progress.workload = "demo";
  page.progress.waves = 10;
  page.progress.waves_total = 10;
  page.progress.check = "ok";
  page.progress.summary = "10 waves of sum over 4 back-ends in 0.2 s; check: ok";
  const std::string html = render_report(page);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>n1</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;n1&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("Waves received: <b>10</b> of 10"), std::string::npos);
  EXPECT_NE(html.find("Check: ok"), std::string::npos);
}

}  // namespace
}  // namespace canopy::tools
