// generate_spread_topology: a generated tree spread over a cluster allocation's nodes
// for a launch by level (docs/launch.md), whole subtrees kept on one node.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "canopy/topology.h"

namespace {

using canopy::Host;
using canopy::Rank;
using canopy::Role;
using canopy::Topology;

std::vector<Host> nodes(std::size_t n) {
  std::vector<Host> out;
  for (std::size_t i = 1; i <= n; ++i) out.push_back(Host{"n" + std::to_string(i), "10.0.0." + std::to_string(i), {}, 0});
  return out;
}

// The edges whose two ends are on different hosts: each costs a remote start.
std::size_t remote_edges(const Topology& t) {
  std::size_t remote = 0;
  for (const auto& n : t.nodes()) {
    if (n.parent && t.at(*n.parent).host != n.host) ++remote;
  }
  return remote;
}

TEST(SpreadTopology, EachFirstLevelSubtreeOnANodeWhenTheyAreAsManyAsTheNodes) {
  auto t = canopy::generate_spread_topology("b:3^2", "n1", nodes(3));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().host, "n1");
  std::vector<std::string> placed;
  for (Rank c : t->root().children) {
    placed.push_back(t->at(c).host);
    for (Rank b : t->at(c).children) EXPECT_EQ(t->at(b).host, t->at(c).host) << b;
  }
  EXPECT_EQ(placed, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(remote_edges(*t), 2u);  // the commnodes of n2 and n3
  // The addresses come with the nodes.
  EXPECT_EQ(t->address_of("n2"), "10.0.0.2");
}

TEST(SpreadTopology, SeveralSubtreesPerNodeInContiguousBlocks) {
  auto t = canopy::generate_spread_topology("b:8^2", "n1", nodes(4));
  ASSERT_TRUE(t) << t.error();
  std::map<std::string, int> per_node;
  std::vector<std::string> placed;
  for (Rank c : t->root().children) {
    placed.push_back(t->at(c).host);
    for (Rank b : t->at(c).children) ++per_node[t->at(b).host];
  }
  EXPECT_EQ(placed, (std::vector<std::string>{"n1", "n1", "n2", "n2", "n3", "n3", "n4", "n4"}));
  for (const auto& [node, count] : per_node) EXPECT_EQ(count, 16) << node;
}

TEST(SpreadTopology, ADeeperLevelIsSpreadWhenTheFirstHasTooFewCommnodes) {
  // b:2x4x2: 2 commnodes, then 8, then 16 back-ends; 8 nodes.
  auto t = canopy::generate_spread_topology("b:2x4x2", "n1", nodes(8));
  ASSERT_TRUE(t) << t.error();
  std::vector<std::string> second;
  for (Rank c : t->root().children) {
    const auto& first = t->at(c);
    EXPECT_EQ(first.host, t->at(first.children.front()).host) << "a commnode above goes with its first child";
    for (Rank d : first.children) {
      second.push_back(t->at(d).host);
      for (Rank b : t->at(d).children) EXPECT_EQ(t->at(b).host, t->at(d).host);
    }
  }
  EXPECT_EQ(second, (std::vector<std::string>{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}));
}

TEST(SpreadTopology, MoreNodesThanCommnodesLeavesTheRestUnused) {
  auto t = canopy::generate_spread_topology("b:2^2", "n1", nodes(5));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->at(t->root().children[0]).host, "n1");
  EXPECT_EQ(t->at(t->root().children[1]).host, "n3");  // floor(1 * 5 / 2)
  EXPECT_EQ(t->hosts().size(), 2u);
}

TEST(SpreadTopology, AFlatTreeSpreadsItsBackEnds) {
  auto t = canopy::generate_spread_topology("b:6", "n1", nodes(3));
  ASSERT_TRUE(t) << t.error();
  std::vector<std::string> placed;
  for (Rank b : t->root().children) placed.push_back(t->at(b).host);
  EXPECT_EQ(placed, (std::vector<std::string>{"n1", "n1", "n2", "n2", "n3", "n3"}));
}

TEST(SpreadTopology, AFrontEndOutsideTheNodesIsAHostOfItsOwn) {
  auto t = canopy::generate_spread_topology("b:2^2", "login", nodes(2));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().host, "login");
  ASSERT_EQ(t->hosts().size(), 3u);
  EXPECT_EQ(t->hosts().front().name, "login");
  EXPECT_EQ(t->hosts().front().address, "");  // resolved by name
  for (Rank c : t->root().children) EXPECT_NE(t->at(c).host, "login");
}

TEST(SpreadTopology, BadInputIsExplained) {
  auto none = canopy::generate_spread_topology("b:2^2", "n1", {});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), "no nodes to spread topology spec 'b:2^2' over");
  auto twice = nodes(2);
  twice.push_back(twice.front());
  auto repeated = canopy::generate_spread_topology("b:2^2", "n1", twice);
  ASSERT_FALSE(repeated);
  EXPECT_EQ(repeated.error(), "node 'n1' is named twice among the nodes to spread the tree over");
  auto spec = canopy::generate_spread_topology("b:0^2", "n1", nodes(2));
  ASSERT_FALSE(spec);
  auto host = canopy::generate_spread_topology("b:2", "", nodes(2));
  ASSERT_FALSE(host);
  EXPECT_EQ(host.error(), "the front-end's host has an empty name");
}

}  // namespace
