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

// An uneven tree (k-nomial) has leaves above the level that is spread: each goes
// on a node of the allocation in turn. They were left on "localhost", which under
// Slurm is no node of the allocation.
TEST(SpreadTopology, LeavesAboveTheSpreadLevelGoOnNodesToo) {
  for (const char* spec : {"k:2@8", "k:3@20", "g:3:2,0,1:1x3,0"}) {
    auto t = canopy::generate_spread_topology(spec, "n1", nodes(3));
    ASSERT_TRUE(t) << t.error();
    std::map<std::string, int> per_node;
    for (const auto& n : t->nodes()) {
      EXPECT_TRUE(n.host == "n1" || n.host == "n2" || n.host == "n3") << spec << ": rank " << n.rank << " on " << n.host;
      ++per_node[n.host];
    }
    EXPECT_GE(per_node.size(), 2u) << spec;
  }
}

// Placement by host for spawn and ssh launches (canopy run --hosts, topgen --hosts):
// with no slot counts, as under Slurm, each commnode with all its back-ends on one
// host, and the front-end where it runs.
TEST(PlaceOnHosts, WithoutCountsEachCommnodeAndItsBackEndsShareAHost) {
  auto hosts = canopy::parse_host_list("h1,h2,h3", "--hosts");
  ASSERT_TRUE(hosts) << hosts.error();
  for (const auto& h : *hosts) EXPECT_EQ(h.slots, 0u) << "no count given";
  auto t = canopy::generate_topology_on_hosts("b:3^2", "login", *hosts);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().host, "login");
  std::vector<std::string> placed;
  for (Rank c : t->root().children) {
    placed.push_back(t->at(c).host);
    for (Rank b : t->at(c).children) EXPECT_EQ(t->at(b).host, t->at(c).host) << b;
  }
  EXPECT_EQ(placed, (std::vector<std::string>{"h1", "h2", "h3"}));
  EXPECT_EQ(canopy::describe_placement(*t),
            (std::vector<std::string>{"login: the front-end", "h1: 1 commnode (1000001), 3 back-ends (0-2)",
                                      "h2: 1 commnode (1000002), 3 back-ends (3-5)",
                                      "h3: 1 commnode (1000003), 3 back-ends (6-8)",
                                      "3 of 3 commnodes have all their back-ends on their own host"}));
  // b:2^2 on three hosts of 3 slots: filled breadth first (as it was), both
  // commnodes went on n1 with the front-end, and every back-end elsewhere.
  auto tight = canopy::parse_host_list("n1:3,n2:3,n3:3", "--hosts");
  ASSERT_TRUE(tight) << tight.error();
  auto b22 = canopy::generate_topology("b:2^2", *tight);
  ASSERT_TRUE(b22) << b22.error();
  for (const auto& n : b22->nodes()) {
    if (n.role == Role::backend) {
      EXPECT_EQ(n.host, b22->at(*n.parent).host) << n.rank;
    }
  }
}

// With counts: no host holds more than its slots; a commnode and its back-ends go
// on the first host with room for them all, and a group that fits nowhere is split,
// which the placement says.
TEST(PlaceOnHosts, WithCountsEachHostHoldsItsSlotsAndSplitGroupsAreNamed) {
  auto hosts = canopy::parse_host_list("a:3,b:4", "--hosts");
  ASSERT_TRUE(hosts) << hosts.error();
  auto t = canopy::generate_topology("b:2^2", *hosts);
  ASSERT_TRUE(t) << t.error();
  std::map<std::string, std::uint32_t> used;
  for (const auto& n : t->nodes()) ++used[n.host];
  EXPECT_EQ(used["a"], 3u);
  EXPECT_EQ(used["b"], 4u);
  EXPECT_EQ(t->root().host, "a");
  const auto& first = t->at(1000001);
  EXPECT_EQ(first.host, "b");
  for (Rank r : first.children) EXPECT_EQ(t->at(r).host, "b");
  const auto lines = canopy::describe_placement(*t);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(),
            "1 of 2 commnodes have all their back-ends on their own host; commnode 1000002 on a has 1 of its 2 "
            "back-ends elsewhere (1 on b)");
  // The front-end off the list takes no slot; too few slots say so.
  auto off = canopy::generate_topology_on_hosts("b:2^2", "login", {{"a", 3}, {"b", 3}});
  ASSERT_TRUE(off) << off.error();
  for (const auto& n : off->nodes()) {
    if (n.role == Role::backend) {
      EXPECT_EQ(n.host, off->at(*n.parent).host) << n.rank;
    }
  }
  auto few = canopy::generate_topology_on_hosts("b:2^2", "login", {{"a", 3}, {"b", 2}});
  ASSERT_FALSE(few);
  EXPECT_EQ(few.error(), "topology spec 'b:2^2' gives 7 processes, 6 of them besides the front-end on login, but the "
                         "hosts have 5 slots (a:3,b:2); add hosts or slots (host:slots)");
}

TEST(PlaceOnHosts, BadHostListsAreRefused) {
  auto mixed = canopy::generate_topology_on_hosts("b:2", "login", {{"a", 2}, {"b", 0}});
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error(), "host 'b' has no slot count where 'a' has one; give every host a count (host:slots) or none");
  auto twice = canopy::generate_topology_on_hosts("b:2", "login", {{"a", 0}, {"a", 0}});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error(), "host 'a' is named twice in the host list");
  EXPECT_FALSE(canopy::generate_topology_on_hosts("b:2", "login", {}));
  EXPECT_FALSE(canopy::generate_topology_on_hosts("b:2", "", {{"a", 0}}));
  // A list with some counts gives an entry without one a single slot.
  auto list = canopy::parse_host_list("a:2 b", "--hosts");
  ASSERT_TRUE(list) << list.error();
  EXPECT_EQ((*list)[1].slots, 1u);
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
