// What a back-end holds of the tree (Topology::backend_part, docs/scale.md): its
// ancestors and their children, the rest left out; enough to choose the same
// adopters as a process holding the whole tree, and it survives the wire.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <vector>

#include "canopy/topology.h"
#include "core/backend_part.h"
#include "core/codec.h"
#include "core/tree_view.h"

using canopy::Rank;
using canopy::Role;
using canopy::Topology;
using canopy::core::TreeView;

namespace {

Topology generated(const char* spec) {
  auto t = canopy::generate_topology(spec);
  EXPECT_TRUE(t) << t.error();
  return std::move(*t);
}

// The commnode parents of back-ends, in topology order.
std::vector<Rank> leaf_commnodes(const Topology& t) {
  std::vector<Rank> out;
  for (const auto& n : t.nodes()) {
    if (n.role != Role::backend && !n.children.empty() && t.at(n.children.front()).role == Role::backend) {
      out.push_back(n.rank);
    }
  }
  return out;
}

Topology through_the_wire(const Topology& t) {
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(t, w);
  auto back = canopy::core::decode_topology(w.asReader());
  EXPECT_TRUE(back) << back.error();
  return std::move(*back);
}

}  // namespace

TEST(BackendPart, HoldsTheAncestorsAndTheirChildrenAndNothingBelowThem) {
  const Topology whole = generated("b:4^3");  // 1 + 4 + 16 + 64 processes
  const Rank parent = leaf_commnodes(whole).back();
  const Topology part = whole.backend_part(parent);
  EXPECT_TRUE(part.partial());
  EXPECT_FALSE(whole.partial());
  // The root and its 4 children, their 4 children on the path, the parent's 4.
  EXPECT_EQ(part.size(), 1u + 4 + 4 + 4);
  const Rank grandparent = *whole.at(parent).parent;
  for (Rank ancestor : {whole.root().rank, grandparent, parent}) {
    ASSERT_NE(part.find(ancestor), nullptr);
    EXPECT_EQ(part.at(ancestor).children, whole.at(ancestor).children) << ancestor;
    EXPECT_EQ(part.frontier(ancestor), nullptr);
  }
  // Every other commnode it holds is held without its children, with its launch
  // height and fan-out.
  std::size_t frontier = 0;
  for (const auto& n : part.nodes()) {
    if (n.role != Role::commnode || n.rank == grandparent || n.rank == parent) continue;
    ASSERT_NE(part.frontier(n.rank), nullptr) << n.rank;
    EXPECT_TRUE(n.children.empty());
    const bool upper = whole.at(n.rank).parent == whole.root().rank;
    EXPECT_EQ(*part.frontier(n.rank), (Topology::Frontier{upper ? 2u : 1u, 4u})) << n.rank;
    ++frontier;
  }
  EXPECT_EQ(frontier, 3u + 3u);
  EXPECT_EQ(part.backends(), whole.backends_below(parent));
}

TEST(BackendPart, AFlatTreeIsWholeAlready) {
  const Topology whole = generated("b:8");
  const Topology part = whole.backend_part(whole.root().rank);
  EXPECT_FALSE(part.partial());
  EXPECT_EQ(part.size(), whole.size());
}

// Paper 004's choice, from a back-end's part: its parent's siblings, then the
// nearest live ancestor, in the same order as from the whole tree.
TEST(BackendPart, AnOrphanChoosesTheSameFirstAdoptersFromItsPartAsFromTheWholeTree) {
  const Topology whole = generated("b:4^3");
  const TreeView everything(whole);
  for (Rank parent : leaf_commnodes(whole)) {
    const TreeView part(through_the_wire(whole.backend_part(parent)));
    for (Rank backend : whole.at(parent).children) {
      const auto from_part = part.potential_adopters(backend, 4);
      EXPECT_EQ(from_part, everything.potential_adopters(backend, 4)) << backend;
      ASSERT_EQ(from_part.size(), 4u);
      EXPECT_EQ(from_part.back(), *whole.at(parent).parent);  // the grandparent, after the 3 siblings
      for (Rank r : from_part) EXPECT_EQ(part.height(r), everything.height(r)) << r;
    }
  }
}

TEST(BackendPart, FrontiersSurviveTheWireAndABadOneIsRefused) {
  const Topology whole = generated("b:3^3");
  const Topology part = whole.backend_part(leaf_commnodes(whole).front());
  const Topology back = through_the_wire(part);
  ASSERT_EQ(back.size(), part.size());
  for (const auto& n : part.nodes()) {
    const auto* f = part.frontier(n.rank);
    const auto* g = back.frontier(n.rank);
    ASSERT_EQ(f == nullptr, g == nullptr) << n.rank;
    if (f) EXPECT_EQ(*f, *g);
  }
  // A back-end marked as a frontier is not a part of a tree.
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(part, w);
  ASSERT_TRUE(w.hasCompact()) << "a part goes in columns";
  auto compact = w.getCompact();
  ASSERT_GT(compact.getFrontiers().size(), 0u);
  for (unsigned i = 0; i < compact.getRoles().size(); ++i) {
    if (compact.getRoles()[i] == static_cast<kj::byte>(canopy::wire::Role::BACKEND)) {
      compact.getFrontiers()[0].setNode(i);
      break;
    }
  }
  auto refused = canopy::core::decode_topology(w.asReader());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("is held without its children, but is not a commnode"), std::string::npos)
      << refused.error();
}

TEST(BackendPart, ViewZeroTravelsAsRangesAndBadRangesAreRefused) {
  using canopy::core::expand_ranges;
  using canopy::core::rank_ranges;
  const std::vector<Rank> members{0, 1, 2, 3, 7, 9, 10};
  const auto ranges = rank_ranges(members);
  EXPECT_EQ(ranges, (std::vector<std::pair<Rank, Rank>>{{0, 3}, {7, 7}, {9, 10}}));
  EXPECT_EQ(expand_ranges(ranges), members);

  canopy::core::LaunchPlan plan;
  plan.view_zero = ranges;
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_plan(plan, w);
  auto back = canopy::core::decode_plan(w.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->view_zero, ranges);

  auto list = w.initMembers(4);  // 5..6, then 6..8: overlapping
  list.set(0, 5), list.set(1, 6), list.set(2, 6), list.set(3, 8);
  auto refused = canopy::core::decode_plan(w.asReader());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("not ascending ranges"), std::string::npos) << refused.error();
  auto odd = w.initMembers(3);
  odd.set(0, 1);
  EXPECT_FALSE(canopy::core::decode_plan(w.asReader()));
  auto huge = w.initMembers(2);
  huge.set(0, 0), huge.set(1, 0xfffffff0u);
  refused = canopy::core::decode_plan(w.asReader());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("more than"), std::string::npos) << refused.error();
}

// Every back-end child of one parent gets the same part, built once; ports learnt
// later are set in it; a flat tree's back-ends, or MRNet's model, get the whole.
TEST(BackendPart, OnePartPerParentKeptUpToDate) {
  const Topology whole = generated("b:4^2");
  const Rank parent = leaf_commnodes(whole).front();
  canopy::core::LaunchPlan plan;
  canopy::core::BackendPart parts;
  const Topology* part = parts.get(whole, parent, plan);
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part, parts.get(whole, parent, plan));
  const Rank uncle = whole.root().children.back();
  const Rank cousin = whole.at(uncle).children.front();
  EXPECT_TRUE(parts.holds(whole, parent, plan, uncle));
  EXPECT_FALSE(parts.holds(whole, parent, plan, cousin));
  parts.set_port(uncle, 4242);
  EXPECT_EQ(part->at(uncle).port, 4242);
  EXPECT_EQ(canopy::core::expand_ranges(parts.view_zero(whole, plan)), whole.backends());

  plan.whole_tree = true;
  canopy::core::BackendPart whole_parts;
  EXPECT_EQ(whole_parts.get(whole, parent, plan), nullptr);
  EXPECT_TRUE(whole_parts.holds(whole, parent, plan, cousin));
}
