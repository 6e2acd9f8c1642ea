// What a back-end holds of the tree (Topology::backend_part, docs/scale.md): its
// ancestors and their children, the rest left out; enough to choose the same
// adopters as a process holding the whole tree, and it survives the wire.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "canopy/topology.h"
#include "core/backend_part.h"
#include "core/codec.h"
#include "core/folded_part.h"
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

// An `endpoints` message as a parent sends it: ranks ascending, as runs, a port each.
std::unique_ptr<capnp::MallocMessageBuilder> endpoints(const std::vector<std::pair<Rank, std::uint16_t>>& ports) {
  auto message = std::make_unique<capnp::MallocMessageBuilder>();
  auto e = message->initRoot<canopy::wire::Endpoints>();
  std::vector<Rank> ranks;
  for (const auto& p : ports) ranks.push_back(p.first);
  const auto runs = canopy::core::rank_runs(ranks);
  auto wire_runs = e.initRankRuns(static_cast<unsigned>(runs.size()));
  for (unsigned i = 0; i < runs.size(); ++i) wire_runs.set(i, runs[i]);
  auto wire_ports = e.initPorts(static_cast<unsigned>(ports.size()));
  for (unsigned i = 0; i < ports.size(); ++i) wire_ports.set(i, ports[i].second);
  return message;
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
    if (f) {
      EXPECT_EQ(*f, *g);
    }
  }
  // A back-end marked as a frontier is not a part of a tree.
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(part, w);
  ASSERT_TRUE(w.hasCompact()) << "a part goes in columns";
  auto compact = w.getCompact();
  ASSERT_GT(compact.getFrontierRuns().size(), 0u);
  // The first run of back-ends (roles go as (role, count) runs): its first node.
  std::uint32_t node = 0;
  for (unsigned i = 0; i < compact.getRoleRuns().size(); i += 2) {
    if (compact.getRoleRuns()[i] == static_cast<std::uint32_t>(canopy::wire::Role::BACKEND)) break;
    node += compact.getRoleRuns()[i + 1];
  }
  compact.getFrontierRuns().set(0, node);
  compact.getFrontierRuns().set(1, 1);
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

// A back-end is sent the ports of the commnodes it may ask to adopt it (paper 004:
// its parent's siblings and its ancestors), not those of every commnode its part
// holds: its ancestors' other children it asks only when its parent and grandparent
// fail together and no sibling of its parent adopts it. In b:4^3 a back-end's parent
// has 3 siblings and 3 ancestors (grandparent, front-end, itself); the part holds 3
// more commnodes, the grandparent's siblings, whose ports a back-end of fan-out 100
// paid 200 bytes for at depth 3. With every port sent, ports_known() waited for them.
TEST(BackendPart, ABackEndIsSentThePortsOfItsPotentialAdoptersOnly) {
  const Topology whole = generated("b:4^3");
  const Rank parent = leaf_commnodes(whole).back();
  const Rank grandparent = *whole.at(parent).parent;
  canopy::core::LaunchPlan plan;
  canopy::core::BackendPart parts;
  std::vector<Rank> sent, held_not_sent;
  for (const auto& n : whole.nodes()) {
    if (parts.sends_port(whole, parent, plan, n.rank)) sent.push_back(n.rank);
    else if (n.role != Role::backend && parts.holds(whole, parent, plan, n.rank)) held_not_sent.push_back(n.rank);
  }
  std::vector<Rank> want{whole.root().rank, grandparent};
  for (Rank s : whole.at(grandparent).children) want.push_back(s);  // the parent among them
  std::sort(sent.begin(), sent.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(sent, want);
  std::vector<Rank> uncles;
  for (Rank u : whole.root().children) {
    if (u != grandparent) uncles.push_back(u);
  }
  std::sort(held_not_sent.begin(), held_not_sent.end());
  EXPECT_EQ(held_not_sent, uncles);

  // Folded, its part knows every port it needs once those are learnt.
  const Topology part = whole.backend_part(parent);
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(part, w);
  const Topology decoded = through_the_wire(part);
  canopy::core::FoldedPart folded(w.asReader(), decoded, whole.at(parent).children.front());
  std::vector<std::pair<Rank, std::uint16_t>> ports;
  for (Rank r : want) ports.emplace_back(r, static_cast<std::uint16_t>(6000 + ports.size()));
  EXPECT_FALSE(folded.ports_known());
  folded.add_endpoints(endpoints(ports)->getRoot<canopy::wire::Endpoints>().asReader(), ports);
  EXPECT_TRUE(folded.ports_known());

  plan.whole_tree = true;  // MRNet's model: every back-end holds the whole tree, ports and all
  canopy::core::BackendPart whole_parts;
  EXPECT_TRUE(whole_parts.sends_port(whole, parent, plan, uncles.front()));
}

// Where commnodes hold parts (Topology::part, docs/scale.md): a commnode's part is
// its parent's back-end part with its own subtree whole, survives the wire, and
// chooses adopters as the whole tree does for its first choices.
TEST(CommnodePart, HoldsTheAncestorsWithTheirChildrenAndItsOwnSubtreeWhole) {
  const Topology whole = generated("b:4^3");  // 1 + 4 + 16 + 64 processes
  const Rank self = whole.root().children.back();  // a level-1 commnode: 4 + 16 below
  const Topology part = through_the_wire(whole.part(self));
  EXPECT_TRUE(part.partial());
  EXPECT_EQ(part.size(), 1u + 4 + 4 + 16);  // root, its children, the subtree below self
  EXPECT_EQ(part.backends(), whole.backends_below(self));
  for (Rank c : whole.root().children) {
    ASSERT_NE(part.find(c), nullptr);
    EXPECT_EQ(part.frontier(c) != nullptr, c != self) << c;
    if (c != self) {
      EXPECT_EQ(part.frontier(c)->height, 2u);
      EXPECT_EQ(part.frontier(c)->fanout, 4u);
    }
  }
  EXPECT_EQ(whole.part(whole.root().rank).size(), whole.size()) << "the root's part is the whole tree";
  const Rank backend = whole.backends().front();
  EXPECT_EQ(whole.part(backend).size(), whole.backend_part(*whole.at(backend).parent).size());
  // A leaf commnode's orphans choose as in the whole tree first: its siblings.
  const Rank leaf = leaf_commnodes(whole).front();
  TreeView mine(whole.part(leaf)), all(whole);
  EXPECT_EQ(mine.potential_adopters(leaf, 3), all.potential_adopters(leaf, 3));
}

// An orphan's subtree (Topology::make_subtree) is rooted at it, not at the front-end,
// and survives the wire; grafted below an adopter that does not hold it, the
// topology and the live tree hold it with its heights; what conflicts is refused.
TEST(CommnodePart, AnOrphansSubtreeIsGraftedBelowItsAdopter) {
  const Topology whole = generated("b:2x2x2");  // FE+1: FE+3 (0, 1), FE+4 (2, 3); FE+2: FE+5, FE+6
  const Rank fe = whole.root().rank;
  std::vector<canopy::TopologyNode> nodes;
  for (Rank r : {fe + 3, Rank{0}, Rank{1}}) nodes.push_back(whole.at(r));
  nodes[0].parent.reset();
  auto subtree = Topology::make_subtree(nodes, whole.hosts(), "test");
  ASSERT_TRUE(subtree) << subtree.error();
  EXPECT_FALSE(Topology::make(nodes, whole.hosts(), "test")) << "a tree must have the front-end at its root";
  nodes[0].role = Role::frontend;
  EXPECT_FALSE(Topology::make_subtree(nodes, whole.hosts(), "test")) << "a subtree has no front-end";

  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(*subtree, w);
  auto back = canopy::core::decode_subtree(w.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_FALSE(canopy::core::decode_topology(w.asReader())) << "a subtree read as a whole tree";

  Topology adopter = whole.part(fe + 2);
  TreeView view(adopter);
  ASSERT_FALSE(view.contains(fe + 3));
  ASSERT_TRUE(view.graft(*back, fe + 2));
  EXPECT_EQ(view.parent(fe + 3), fe + 2);
  EXPECT_EQ(view.children(fe + 3), (std::vector<Rank>{0, 1}));
  EXPECT_EQ(view.height(fe + 3), 1u);
  EXPECT_EQ(view.backends_below(fe + 2), (std::vector<Rank>{0, 1, 4, 5, 6, 7}));
  EXPECT_FALSE(view.graft(*back, fe + 2)) << "the same subtree twice";
  ASSERT_TRUE(adopter.graft(fe + 2, *back));
  EXPECT_EQ(adopter.at(0).parent, std::optional<Rank>(fe + 3));
  EXPECT_FALSE(adopter.graft(fe + 2, *back)) << "the same subtree twice";
  // A frontier gets its children: FE+4 is held by FE+3's part without them.
  Topology nephew = whole.part(fe + 3);
  ASSERT_NE(nephew.frontier(fe + 4), nullptr);
  std::vector<canopy::TopologyNode> other;
  for (Rank r : {fe + 4, Rank{2}, Rank{3}}) other.push_back(whole.at(r));
  other[0].parent.reset();
  auto four = Topology::make_subtree(other, whole.hosts(), "test");
  ASSERT_TRUE(four) << four.error();
  TreeView nephew_view(nephew);
  ASSERT_TRUE(nephew_view.graft(*four, fe + 3));
  EXPECT_EQ(nephew_view.children(fe + 4), (std::vector<Rank>{2, 3}));
  EXPECT_EQ(nephew_view.parent(fe + 4), fe + 1) << "it keeps its parent until the adoption report";
  ASSERT_TRUE(nephew.graft(fe + 3, *four));
  EXPECT_EQ(nephew.frontier(fe + 4), nullptr);
}

// A back-end keeps its part folded, as its parent sent it (core/folded_part.h), and
// unfolds it into the same Topology, with the ports learnt meanwhile; what it reads
// while folded (its parent, the root, its place) is what the unfolded part says.
TEST(FoldedPart, UnfoldsToThePartItWasSentWithThePortsLearntMeanwhile) {
  const Topology whole = generated("b:4^3");
  const Rank parent = leaf_commnodes(whole).back();
  const Rank grandparent = *whole.at(parent).parent;
  const Topology part = whole.backend_part(parent);
  const Rank self = whole.at(parent).children.front();
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(part, w);
  const Topology decoded = through_the_wire(part);
  canopy::core::FoldedPart folded(w.asReader(), decoded, self);

  EXPECT_EQ(folded.parent(), parent);
  EXPECT_EQ(folded.root(), whole.root().rank);
  ASSERT_NE(folded.held(self), nullptr);
  EXPECT_EQ(folded.held(self)->role, Role::backend);
  ASSERT_NE(folded.held(parent), nullptr);
  EXPECT_EQ(folded.held(parent)->role, Role::commnode);
  EXPECT_EQ(folded.held(parent)->host, whole.at(parent).host);
  EXPECT_EQ(folded.held(grandparent), nullptr);
  const TreeView::Place want = TreeView(decoded).place(self);
  EXPECT_EQ(folded.place().siblings, want.siblings);
  EXPECT_EQ(folded.place().depth, want.depth);
  EXPECT_EQ(folded.place().descendants, want.descendants);
  EXPECT_EQ(folded.place().backends, want.backends);
  EXPECT_EQ(folded.place().height, want.height);

  Rank frontier = 0;
  for (const auto& n : part.nodes()) {
    if (part.frontier(n.rank)) frontier = n.rank;
  }
  ASSERT_NE(frontier, 0u);
  std::vector<std::pair<Rank, std::uint16_t>> first{{grandparent, 4242}, {frontier, 4343}};
  std::sort(first.begin(), first.end());
  auto add = [&](const std::vector<std::pair<Rank, std::uint16_t>>& ports) {
    folded.add_endpoints(endpoints(ports)->getRoot<canopy::wire::Endpoints>().asReader(), ports);
  };
  EXPECT_FALSE(folded.ports_known());
  add(first);
  add({{grandparent, 4244}});  // replaces the first
  EXPECT_FALSE(folded.ports_known()) << "the root, the parent and the other frontiers are not known yet";
  std::vector<std::pair<Rank, std::uint16_t>> rest;
  for (const auto& n : part.nodes()) {
    if (n.role != Role::backend && n.rank != grandparent && n.rank != frontier) rest.emplace_back(n.rank, 5000 + rest.size());
  }
  std::sort(rest.begin(), rest.end());
  add(rest);
  EXPECT_TRUE(folded.ports_known());
  auto unfolded = folded.unfold();
  ASSERT_TRUE(unfolded) << unfolded.error();
  ASSERT_EQ(unfolded->size(), part.size());
  EXPECT_TRUE(unfolded->partial());
  for (const auto& n : part.nodes()) {
    const canopy::TopologyNode* u = unfolded->find(n.rank);
    ASSERT_NE(u, nullptr) << n.rank;
    EXPECT_EQ(u->parent, n.parent) << n.rank;
    EXPECT_EQ(u->children, n.children) << n.rank;
    EXPECT_EQ(u->role, n.role) << n.rank;
    EXPECT_EQ(u->host, n.host) << n.rank;
    EXPECT_EQ(unfolded->frontier(n.rank) != nullptr, part.frontier(n.rank) != nullptr) << n.rank;
    if (n.rank == grandparent || n.rank == frontier) {
      EXPECT_EQ(u->port, n.rank == grandparent ? 4244 : 4343) << n.rank;
    } else if (n.role != Role::backend) {
      EXPECT_GE(u->port, 5000) << n.rank;
    } else {
      EXPECT_EQ(u->port, 0) << n.rank;
    }
  }
}

// Folded, a back-end's part of a tree of fan-out 100 (201 processes: the root, its
// children, its parent's) costs about a kilobyte, where the Topology and live tree
// it unfolds into take about 230 bytes a process.
TEST(FoldedPart, APartOfFanOutAHundredFoldsIntoAFewWordsAProcess) {
  const Topology whole = generated("b:100^2");
  const Rank parent = leaf_commnodes(whole).back();
  const Topology part = whole.backend_part(parent);
  ASSERT_EQ(part.size(), 201u);
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(part, w);
  canopy::core::FoldedPart folded(w.asReader(), through_the_wire(part), whole.at(parent).children.back());
  std::vector<std::pair<Rank, std::uint16_t>> ports;  // the root's children's, as endpoints bring them
  for (Rank r : whole.at(whole.root().rank).children) ports.emplace_back(r, static_cast<std::uint16_t>(40000 + ports.size()));
  folded.add_endpoints(endpoints(ports)->getRoot<canopy::wire::Endpoints>().asReader(), ports);
  EXPECT_LT(folded.bytes(), 2048u) << "a part of " << part.size() << " processes";
  EXPECT_EQ(folded.place().siblings, 99u);
  EXPECT_EQ(folded.place().depth, 2u);
}
