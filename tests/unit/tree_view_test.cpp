// TreeView: failure and adoption reports, and the choice of adopters for orphans.
#include <gtest/gtest.h>

#include <map>

#include "core/tree_view.h"

using canopy::Rank;
using canopy::core::TreeView;

namespace {

constexpr Rank FE = canopy::kFirstInternalRank;
constexpr Rank C1 = FE + 1, C2 = FE + 2, C3 = FE + 3, C4 = FE + 4;

TreeView view(const char* spec) {
  auto topology = canopy::generate_topology(spec);
  EXPECT_TRUE(topology) << topology.error();
  return TreeView(*topology);
}

// A tree given by its edges, parent first; FE is the front-end, ranks from FE up
// commnodes, the others back-ends. Children keep the order given.
TreeView view_of(const std::vector<std::pair<Rank, std::vector<Rank>>>& edges) {
  std::string nodes = "nodes:\n", links = "edges:\n";
  auto node = [&](Rank r) {
    const char* role = r == FE ? "frontend" : r > FE ? "commnode" : "backend";
    nodes += "  - {rank: " + std::to_string(r) + ", role: " + role + "}\n";
  };
  node(FE);
  for (const auto& [parent, children] : edges) {
    links += "  - {parent: " + std::to_string(parent) + ", children: [";
    for (std::size_t i = 0; i < children.size(); ++i) {
      node(children[i]);
      links += (i ? ", " : "") + std::to_string(children[i]);
    }
    links += "]}\n";
  }
  auto topology = canopy::parse_topology_yaml(nodes + links, "test.yaml");
  EXPECT_TRUE(topology) << topology.error();
  return TreeView(*topology);
}

// How many orphans take each adopter as their first choice.
std::map<Rank, int> first_choices(const TreeView& v, const std::vector<Rank>& orphans) {
  std::map<Rank, int> count;
  for (Rank orphan : orphans) {
    auto adopters = v.potential_adopters(orphan, 1);
    if (!adopters.empty()) ++count[adopters[0]];
  }
  return count;
}

int spread(const std::map<Rank, int>& count) {
  int most = 0, least = 1 << 30;
  for (auto [adopter, n] : count) {
    most = std::max(most, n);
    least = std::min(least, n);
  }
  return most - least;
}

std::vector<Rank> ranks(Rank first, Rank step, std::size_t n) {
  std::vector<Rank> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(first + static_cast<Rank>(i) * step);
  return out;
}

TEST(TreeView, HeightsComeFromTheLaunchTopology) {
  auto v = view("b:2x2x2");  // FE, 2 commnodes, 4 commnodes, 8 back-ends
  EXPECT_EQ(v.height(FE), 3u);
  EXPECT_EQ(v.height(C1), 2u);
  EXPECT_EQ(v.height(C3), 1u);
  EXPECT_EQ(v.height(0), 0u);
  EXPECT_EQ(v.parent(0), C3);
  EXPECT_EQ(v.parent(FE), TreeView::kNone);
}

// What the membership service's orphan watch and the gossip's pause ask: does a
// process hang from the root through live processes only?
TEST(TreeView, AttachedMeansHangingFromTheRootThroughLiveProcesses) {
  auto v = view("b:2^2");  // back-ends 0, 1 under C1; 2, 3 under C2
  for (Rank r : {FE, C1, C2, 0u, 1u, 2u, 3u}) EXPECT_TRUE(v.attached(r)) << r;
  ASSERT_TRUE(v.apply_failure(C1));
  EXPECT_FALSE(v.attached(C1));
  EXPECT_FALSE(v.attached(0)) << "an orphan of C1, not adopted yet";
  EXPECT_TRUE(v.alive(0)) << "and alive";
  EXPECT_TRUE(v.attached(2));
  ASSERT_TRUE(v.apply_adoption(0, C2, 1));
  EXPECT_TRUE(v.attached(0)) << "adopted by C2";
  EXPECT_FALSE(v.attached(1));
  ASSERT_TRUE(v.apply_failure(3));
  EXPECT_FALSE(v.attached(3));
  EXPECT_FALSE(v.attached(424242)) << "not in the tree";
}

// What a filter is told of its node (FilterContext; MRNet's TopologyLocalInfo), on a
// tree of uneven depth, then as the tree heals.
TEST(TreeView, APlaceCountsTheLiveTreeAroundAProcess) {
  // FE -> C1 (back-ends 0, 1, 2) and C2 -> C3 (back-ends 3, 4).
  auto v = view_of({{FE, {C1, C2}}, {C1, {0, 1, 2}}, {C2, {C3}}, {C3, {3, 4}}});
  using Place = TreeView::Place;
  auto fields = [](const Place& p) {
    return std::vector<std::uint32_t>{p.siblings, p.descendants, p.backends, p.depth, p.height};
  };
  // siblings, descendants, back-ends below, depth, height
  EXPECT_EQ(fields(v.place(FE)), (std::vector<std::uint32_t>{0, 8, 5, 0, 3}));
  EXPECT_EQ(fields(v.place(C1)), (std::vector<std::uint32_t>{1, 3, 3, 1, 1}));
  EXPECT_EQ(fields(v.place(C2)), (std::vector<std::uint32_t>{1, 3, 2, 1, 2}));
  EXPECT_EQ(fields(v.place(C3)), (std::vector<std::uint32_t>{0, 2, 2, 2, 1}));
  EXPECT_EQ(fields(v.place(4)), (std::vector<std::uint32_t>{1, 0, 0, 3, 0}));

  // C3 fails: it and its orphans are no longer below C2 or the front-end.
  ASSERT_TRUE(v.apply_failure(C3));
  EXPECT_EQ(fields(v.place(C2)), (std::vector<std::uint32_t>{1, 0, 0, 1, 0}));
  EXPECT_EQ(fields(v.place(FE)), (std::vector<std::uint32_t>{0, 5, 3, 0, 2}));
  // Back-end 3 is adopted by C1, 4 by C2: each is counted where it is now.
  ASSERT_TRUE(v.apply_adoption(3, C1, 1));
  ASSERT_TRUE(v.apply_adoption(4, C2, 1));
  EXPECT_EQ(fields(v.place(C1)), (std::vector<std::uint32_t>{1, 4, 4, 1, 1}));
  EXPECT_EQ(fields(v.place(C2)), (std::vector<std::uint32_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(fields(v.place(3)), (std::vector<std::uint32_t>{3, 0, 0, 2, 0}));
  EXPECT_EQ(fields(v.place(FE)), (std::vector<std::uint32_t>{0, 7, 5, 0, 2}));
}

TEST(TreeView, OrphansPreferTheFailedParentsSiblingsThenTheAncestor) {
  auto v = view("b:2^2");  // back-ends 0,1 under C1; 2,3 under C2
  ASSERT_TRUE(v.apply_failure(C1));
  EXPECT_EQ(v.potential_adopters(0), (std::vector<Rank>{C2, FE}));
  EXPECT_EQ(v.potential_adopters(1), (std::vector<Rank>{C2, FE}));
}

TEST(TreeView, OrphansOfOneFailureSpreadRoundRobinOverTheAdopters) {
  auto v = view("b:4x4");  // back-ends 0..3 under C1
  ASSERT_TRUE(v.apply_failure(C1));
  std::map<Rank, int> adoptions;
  for (Rank orphan : {0u, 1u, 2u, 3u}) {
    auto adopters = v.potential_adopters(orphan, 1);
    ASSERT_EQ(adopters.size(), 1u);
    ++adoptions[adopters[0]];
  }
  EXPECT_EQ(adoptions.size(), 3u) << "C2, C3 and C4 all adopt";
  int most = 0, least = 100;
  for (auto [adopter, n] : adoptions) {
    EXPECT_NE(adopter, FE);
    most = std::max(most, n);
    least = std::min(least, n);
  }
  EXPECT_LE(most - least, 1);
}

// Ranks congruent modulo the number of candidates must not all pick one adopter.
TEST(TreeView, OrphansWithRanksCongruentModuloTheCandidatesStillSpread) {
  // C1 has back-ends 0, 2, 4; the candidates are C2 and C3.
  auto v = view_of({{FE, {C1, C2, C3}}, {C1, {0, 2, 4}}, {C2, {1, 3}}, {C3, {5}}});
  ASSERT_TRUE(v.apply_failure(C1));
  auto count = first_choices(v, {0, 2, 4});
  EXPECT_EQ(count.size(), 2u) << "C2 and C3 both adopt";
  EXPECT_EQ(count.count(FE), 0u);
  EXPECT_LE(spread(count), 1);
}

// MPI jobs often place ranks cyclically: a commnode then holds every k-th rank.
TEST(TreeView, OrphansOfACyclicPlacementSpreadOverTwoCandidates) {
  // Evens under C1, odds under C2, 16 to 23 under C3.
  auto v = view_of({{FE, {C1, C2, C3}}, {C1, ranks(0, 2, 8)}, {C2, ranks(1, 2, 8)}, {C3, ranks(16, 1, 8)}});
  ASSERT_TRUE(v.apply_failure(C1));
  auto count = first_choices(v, ranks(0, 2, 8));
  EXPECT_EQ(count, (std::map<Rank, int>{{C2, 4}, {C3, 4}}));
}

TEST(TreeView, OrphansOfACyclicPlacementSpreadOverThreeCandidates) {
  // Every third rank under each of C1, C2, C3; 24 to 31 under C4.
  auto v = view_of({{FE, {C1, C2, C3, C4}},
                    {C1, ranks(0, 3, 8)},
                    {C2, ranks(1, 3, 8)},
                    {C3, ranks(2, 3, 8)},
                    {C4, ranks(24, 1, 8)}});
  ASSERT_TRUE(v.apply_failure(C1));
  auto count = first_choices(v, ranks(0, 3, 8));
  EXPECT_EQ(count.size(), 3u) << "C2, C3 and C4 all adopt";
  EXPECT_LE(spread(count), 1);
}

// The orphans of an adopter that fails in turn: its launch children and the
// orphans it adopted, in no rank order.
TEST(TreeView, OrphansOfAFailedAdopterSpreadToo) {
  auto v = view("b:4x4");  // back-ends 0..3 under C1, 4..7 under C2, ...
  ASSERT_TRUE(v.apply_failure(C1));
  ASSERT_TRUE(v.apply_adoption(0, C2, 1));
  ASSERT_TRUE(v.apply_adoption(1, C3, 1));
  ASSERT_TRUE(v.apply_adoption(2, C2, 1));
  ASSERT_TRUE(v.apply_adoption(3, C4, 1));
  ASSERT_TRUE(v.apply_failure(C2));  // orphans 4..7, 0, 2; candidates C3 and C4
  auto count = first_choices(v, {4, 5, 6, 7, 0, 2});
  EXPECT_EQ(count, (std::map<Rank, int>{{C3, 3}, {C4, 3}}));
}

// Each orphan computes its choice alone, some after others were adopted already:
// the adoptions must not shift the later orphans' choices onto one adopter.
TEST(TreeView, AnOrphansChoiceDoesNotShiftAsItsSiblingsAreAdopted) {
  auto v = view("b:4x4");
  ASSERT_TRUE(v.apply_failure(C1));
  std::map<Rank, Rank> before;
  for (Rank orphan : {0u, 1u, 2u, 3u}) before[orphan] = v.potential_adopters(orphan, 1).at(0);
  ASSERT_TRUE(v.apply_adoption(0, before[0], 1));
  ASSERT_TRUE(v.apply_adoption(1, before[1], 1));
  EXPECT_EQ(v.potential_adopters(2, 1).at(0), before[2]);
  EXPECT_EQ(v.potential_adopters(3, 1).at(0), before[3]);
}

TEST(TreeView, AdoptersAreNeverInsideTheOrphansSubtreeNorTooShallow) {
  auto v = view("b:2x2x2");
  ASSERT_TRUE(v.apply_failure(C1));  // orphans C3, C4 (height 1), each with 2 back-ends
  for (Rank orphan : {C3, C4}) {
    for (Rank a : v.potential_adopters(orphan, 100)) {
      EXPECT_FALSE(v.in_subtree(a, orphan)) << a;
      EXPECT_GE(v.height(a), 2u) << a << " would make the tree deeper";
      EXPECT_TRUE(v.alive(a));
      EXPECT_NE(v.role(a), canopy::Role::backend);
    }
    EXPECT_EQ(v.potential_adopters(orphan, 100), (std::vector<Rank>{C2, FE}));
  }
}

TEST(TreeView, ChainedFailuresClimbToTheNearestLiveAncestor) {
  auto v = view("b:2x2x2");
  ASSERT_TRUE(v.apply_failure(C3));  // parent of 0 and 1
  ASSERT_TRUE(v.apply_failure(C1));  // and then its parent
  EXPECT_EQ(v.live_ancestor(0), FE);
  auto adopters = v.potential_adopters(0, 100);
  ASSERT_FALSE(adopters.empty());
  EXPECT_EQ(adopters.front(), C2) << "the live child of the nearest live ancestor";
  for (Rank a : adopters) EXPECT_TRUE(v.alive(a));
  EXPECT_EQ(std::count(adopters.begin(), adopters.end(), C1), 0);
  EXPECT_EQ(std::count(adopters.begin(), adopters.end(), C3), 0);
}

TEST(TreeView, TheFrontEndIsTheLastResort) {
  auto top = view("b:1x2");
  ASSERT_TRUE(top.apply_failure(C1));
  EXPECT_EQ(top.potential_adopters(0), (std::vector<Rank>{FE}));
}

TEST(TreeView, AttachReportsAreIdempotentAndOrderedByIncarnation) {
  auto v = view("b:2^2");
  ASSERT_TRUE(v.apply_failure(C1));
  EXPECT_FALSE(v.apply_failure(C1)) << "duplicate failure report";
  ASSERT_TRUE(v.apply_adoption(0, C2, 1));
  EXPECT_EQ(v.parent(0), C2);
  EXPECT_EQ(v.incarnation(0), 1u);
  EXPECT_FALSE(v.apply_adoption(0, C2, 1)) << "duplicate adoption report";
  // A later adoption (C2 failed too) wins; the late report of the first is ignored.
  ASSERT_TRUE(v.apply_failure(C2));
  ASSERT_TRUE(v.apply_adoption(0, FE, 2));
  EXPECT_FALSE(v.apply_adoption(0, C2, 1)) << "late report with a lower incarnation";
  EXPECT_EQ(v.parent(0), FE);
  const auto fe_children = v.children(FE);
  EXPECT_NE(std::find(fe_children.begin(), fe_children.end(), 0u), fe_children.end());
  const auto c2_children = v.children(C2);
  EXPECT_EQ(std::find(c2_children.begin(), c2_children.end(), 0u), c2_children.end());
}

// Two reports with one incarnation and different adopters (a forged or buggy
// report): every process must end with the same tree, whatever order they came in.
TEST(TreeView, AttachReportsWithOneIncarnationAreAppliedInOneTotalOrder) {
  auto in_order = view("b:2^2");
  auto reversed = view("b:2^2");
  for (auto* v : {&in_order, &reversed}) ASSERT_TRUE(v->apply_failure(C1));
  EXPECT_TRUE(in_order.apply_adoption(0, C2, 3));
  EXPECT_FALSE(in_order.apply_adoption(0, FE, 3)) << "lower adopter rank at the same incarnation";
  EXPECT_TRUE(reversed.apply_adoption(0, FE, 3));
  EXPECT_TRUE(reversed.apply_adoption(0, C2, 3)) << "higher adopter rank at the same incarnation";
  for (auto* v : {&in_order, &reversed}) {
    EXPECT_EQ(v->parent(0), C2);
    EXPECT_EQ(v->incarnation(0), 3u);
    const auto fe_children = v->children(FE);
    EXPECT_EQ(std::find(fe_children.begin(), fe_children.end(), 0u), fe_children.end());
  }
}

TEST(TreeView, AdoptionThatWouldMakeACycleIsRefused) {
  auto v = view("b:2x2x2");
  EXPECT_FALSE(v.apply_adoption(C1, C3, 5)) << "C3 is below C1";
  EXPECT_EQ(v.parent(C1), FE);
  EXPECT_FALSE(v.apply_adoption(FE, C1, 1)) << "the root is never adopted";
  EXPECT_FALSE(v.apply_adoption(42424, C1, 1)) << "unknown orphan";
}

}  // namespace
