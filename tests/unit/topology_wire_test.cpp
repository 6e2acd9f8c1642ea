// The topology on the wire (protocol version 14): in columns, breadth-first, about 15
// bytes a node; and what is not a tree in columns is refused.
#include <gtest/gtest.h>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <functional>
#include <string>
#include <vector>

#include "canopy/topology.h"
#include "core/codec.h"

namespace canopy {
namespace {

constexpr Rank kFe = kFirstInternalRank;

struct Encoded {
  capnp::MallocMessageBuilder message;
  wire::Topology::Builder topology = message.initRoot<wire::Topology>();
  std::size_t bytes() { return capnp::computeSerializedSizeInWords(message) * sizeof(capnp::word); }
};

TEST(TopologyWire, ATreeGoesInColumnsAndComesBackTheSame) {
  auto t = generate_topology("b:16^2");
  ASSERT_TRUE(t) << t.error();
  ASSERT_TRUE(t->set_port(kFe + 1, 40001));
  ASSERT_TRUE(t->set_port(kFe + 5, 40005));
  Encoded e;
  core::encode_topology(*t, e.topology);
  EXPECT_TRUE(e.topology.hasCompact());
  EXPECT_EQ(e.topology.getNodes().size(), 0u);
  EXPECT_EQ(e.topology.getCompact().getHostOf().size(), 0u) << "one host: no column";
  // As a list of nodes it took about 69 bytes a node (issue 47).
  EXPECT_LT(e.bytes(), 16 * t->size()) << e.bytes() << " bytes for " << t->size() << " nodes";
  auto back = core::decode_topology(e.topology.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(to_yaml(*back), to_yaml(*t));
  EXPECT_EQ(back->at(kFe + 5).port, 40005);
  EXPECT_EQ(back->at(kFe + 2).port, 0);
}

TEST(TopologyWire, ATreeGivenDepthFirstKeepsEachNodesChildrenInTheirOrder) {
  // The front-end, a commnode and its back-ends, then the other, whose children are
  // not in rank order.
  std::vector<TopologyNode> nodes(7);
  nodes[0] = {.rank = kFe, .role = Role::frontend, .children = {kFe + 1, kFe + 2}};
  nodes[1] = {.rank = kFe + 1, .role = Role::commnode, .parent = kFe, .children = {0, 1}};
  nodes[2] = {.rank = 0, .role = Role::backend, .host = "b", .parent = kFe + 1};
  nodes[3] = {.rank = 1, .role = Role::backend, .parent = kFe + 1};
  nodes[4] = {.rank = kFe + 2, .role = Role::commnode, .parent = kFe, .children = {3, 2}};
  nodes[5] = {.rank = 3, .role = Role::backend, .parent = kFe + 2};
  nodes[6] = {.rank = 2, .role = Role::backend, .parent = kFe + 2};
  auto t = Topology::make(std::move(nodes), {});
  ASSERT_TRUE(t) << t.error();
  ASSERT_TRUE(static_cast<bool>(t->add_backend(4, kFe + 1))) << "joined later: appended";
  Encoded e;
  core::encode_topology(*t, e.topology);
  auto back = core::decode_topology(e.topology.asReader());
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->size(), t->size());
  for (const auto& n : t->nodes()) {  // the same tree; the joiner now in breadth-first order
    const TopologyNode* m = back->find(n.rank);
    ASSERT_NE(m, nullptr) << n.rank;
    EXPECT_EQ(m->role, n.role) << n.rank;
    EXPECT_EQ(m->host, n.host) << n.rank;
    EXPECT_EQ(m->parent, n.parent) << n.rank;
    EXPECT_EQ(m->children, n.children) << n.rank;
  }
  EXPECT_EQ(back->at(kFe + 1).children, (std::vector<Rank>{0, 1, 4}));
  EXPECT_EQ(back->at(kFe + 2).children, (std::vector<Rank>{3, 2}));
  EXPECT_EQ(back->at(0).host, "b");
  EXPECT_EQ(back->at(1).host, "localhost");
  EXPECT_EQ(e.topology.getCompact().getHostOf().size(), t->size()) << "two hosts: a column";
}

// Columns built by hand: a front-end and one back-end, spoilt one way at a time.
std::string refusal(const std::function<void(wire::Topology::Compact::Builder)>& spoil) {
  Encoded e;
  auto c = e.topology.initCompact();
  auto ranks = c.initRanks(2);
  ranks.set(0, kFe);
  ranks.set(1, 0);
  auto parents = c.initParents(2);
  parents.set(0, 0);
  parents.set(1, 0);
  auto roles = c.initRoles(2);
  roles[0] = static_cast<kj::byte>(wire::Role::FRONTEND);
  roles[1] = static_cast<kj::byte>(wire::Role::BACKEND);
  c.initHostNames(1).set(0, "localhost");
  auto host_of = c.initHostOf(2);
  host_of.set(0, 0);
  host_of.set(1, 0);
  spoil(c);
  auto back = core::decode_topology(e.topology.asReader());
  return back ? "" : back.error();
}

TEST(TopologyWire, WhatIsNotATreeInColumnsIsRefused) {
  EXPECT_EQ(refusal([](auto) {}), "") << "the columns unspoilt are a tree";
  EXPECT_NE(refusal([](auto c) { c.getParents().set(1, 1); }).find("comes before its parent"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.initRoles(1); }).find("differ in length"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.getHostOf().set(1, 7); }).find("not in the list of hosts"), std::string::npos);
  EXPECT_EQ(refusal([](auto c) { c.initHostOf(0); }), "") << "no column: every node on the first host";
  EXPECT_NE(refusal([](auto c) { c.initHostOf(0); c.initHostNames(0); }).find("no host names"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.getRoles()[1] = 9; }).find("unknown role"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.initFrontiers(1)[0].setNode(5); }).find("names no node"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.initLinks(1)[0].setNode(2); }).find("names no node"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.getRanks().set(1, kFe); }), "") << "a duplicate rank";
}

// Ranks as ranges on the wire (a view, a communicator, view 0): what is written is
// read back, and a list that is not ascending, disjoint ranges is refused.
TEST(TopologyWire, RanksTravelAsRangesAndWhatIsNotRangesIsRefused) {
  auto read = [](std::vector<std::uint32_t> words, core::RankSet& out) {
    capnp::MallocMessageBuilder message;
    auto list = message.initRoot<wire::Endpoints>().initRanks(static_cast<unsigned>(words.size()));
    for (unsigned i = 0; i < words.size(); ++i) list.set(i, words[i]);
    return core::read_ranges(list.asReader(), out);
  };
  const auto set = core::RankSet::of({0, 1, 2, 7, 9, 10, 0xffffffff});
  capnp::MallocMessageBuilder message;
  auto list = message.initRoot<wire::Endpoints>().initRanks(static_cast<unsigned>(2 * set.ranges().size()));
  core::write_ranges(set.ranges(), list);
  core::RankSet back;
  ASSERT_TRUE(core::read_ranges(list.asReader(), back));
  EXPECT_EQ(back, set);
  core::RankSet untouched = set;
  EXPECT_FALSE(read({0, 3, 9}, untouched)) << "odd length";
  EXPECT_FALSE(read({0, 3, 2, 5}, untouched)) << "overlapping";
  EXPECT_FALSE(read({5, 3}, untouched)) << "reversed";
  EXPECT_EQ(untouched, set);
}

}  // namespace
}  // namespace canopy
