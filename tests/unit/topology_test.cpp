// Topology: the YAML format, its errors (file:line and the problem), the checks of
// Topology::make(), to_yaml() round trips and balanced-tree generation.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <unistd.h>

#include "canopy/topology.h"

using canopy::kFirstInternalRank;
using canopy::Rank;
using canopy::Role;
using canopy::Topology;

namespace {

constexpr Rank kFe = kFirstInternalRank;

::testing::AssertionResult Contains(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

canopy::Result<Topology> parse(std::string_view yaml) { return canopy::parse_topology_yaml(yaml, "t.yaml"); }

// The error parsing `yaml` as t.yaml gives, or "(parsed)".
std::string error_of(std::string_view yaml) {
  auto topology = parse(yaml);
  return topology ? "(parsed)" : topology.error();
}

std::vector<Rank> ranks_in_order(const Topology& topology) {
  std::vector<Rank> ranks;
  for (const auto& node : topology.nodes()) ranks.push_back(node.rank);
  return ranks;
}

// The example of the format's description, with its line numbers.
constexpr std::string_view kSpecExample = R"(# Canopy topology
hosts:                      # optional; a node's host defaults to "localhost"
  - name: node01
    address: 10.0.0.1       # optional; where processes on this host listen
nodes:
  - {rank: 1000000, role: frontend, host: localhost}
  - {rank: 1000001, role: commnode, port: 0}      # port optional, 0 = any free port
  - {rank: 0, role: backend}
  - {rank: 1, role: backend}
edges:
  - {parent: 1000000, children: [1000001]}
  - {parent: 1000001, children: [0, 1]}
)";

constexpr std::string_view kFlat = R"(nodes:
  - {rank: 1000000, role: frontend}
  - {rank: 0, role: backend}
  - {rank: 1, role: backend}
  - {rank: 2, role: backend}
edges:
  - {parent: 1000000, children: [0, 1, 2]}
)";

constexpr std::string_view kBalanced = R"(nodes:
  - {rank: 1000000, role: frontend}
  - {rank: 1000001, role: commnode}
  - {rank: 1000002, role: commnode}
  - {rank: 0, role: backend}
  - {rank: 1, role: backend}
  - {rank: 2, role: backend}
  - {rank: 3, role: backend}
edges:
  - {parent: 1000000, children: [1000001, 1000002]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2, 3]}
)";

// Nodes listed out of tree order, a back-end beside a commnode, three levels.
constexpr std::string_view kUneven = R"(nodes:
  - {rank: 5, role: backend}
  - {rank: 1000003, role: commnode}
  - {rank: 1000000, role: frontend}
  - {rank: 1000001, role: commnode}
  - {rank: 1000002, role: commnode}
  - {rank: 0, role: backend}
  - {rank: 1, role: backend}
  - {rank: 2, role: backend}
  - {rank: 3, role: backend}
  - {rank: 4, role: backend}
edges:
  - {parent: 1000000, children: [1000001, 5]}
  - {parent: 1000001, children: [1000002, 1000003, 0]}
  - {parent: 1000002, children: [1, 2]}
  - {parent: 1000003, children: [3, 4]}
)";

constexpr std::string_view kMultiHost = R"(hosts:
  - {name: login1, address: 10.1.0.1}
  - {name: node01, address: 10.1.0.11}
  - {name: node02}
nodes:
  - {rank: 1000000, role: frontend, host: login1}
  - {rank: 1000001, role: commnode, host: node01, port: 7001}
  - {rank: 1000002, role: commnode, host: node02, port: 7002}
  - {rank: 0, role: backend, host: node01}
  - {rank: 1, role: backend, host: node01}
  - {rank: 2, role: backend, host: node02}
  - {rank: 3, role: backend, host: node03}
edges:
  - {parent: 1000000, children: [1000001, 1000002]}
  - {parent: 1000001, children: [0, 1]}
  - {parent: 1000002, children: [2, 3]}
)";

// Front-end 1000000 with commnodes 1000001 and 1000002; line numbers matter.
constexpr std::string_view kThreeNodes = R"(nodes:
  - {rank: 1000000, role: frontend}
  - {rank: 1000001, role: commnode}
  - {rank: 1000002, role: commnode}
)";

canopy::TopologyNode node(Rank rank, Role role, std::optional<Rank> parent = {}, std::vector<Rank> children = {}) {
  canopy::TopologyNode n;
  n.rank = rank;
  n.role = role;
  n.parent = parent;
  n.children = std::move(children);
  return n;
}

void expect_same(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto& x = a.nodes()[i];
    const auto& y = b.nodes()[i];
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.host, y.host);
    EXPECT_EQ(x.port, y.port);
    EXPECT_EQ(x.parent, y.parent);
    EXPECT_EQ(x.children, y.children);
  }
  ASSERT_EQ(a.hosts().size(), b.hosts().size());
  for (std::size_t i = 0; i < a.hosts().size(); ++i) {
    EXPECT_EQ(a.hosts()[i].name, b.hosts()[i].name);
    EXPECT_EQ(a.hosts()[i].address, b.hosts()[i].address);
  }
}

void expect_round_trip(const Topology& topology) {
  std::string yaml = canopy::to_yaml(topology);
  auto again = canopy::parse_topology_yaml(yaml, "again.yaml");
  ASSERT_TRUE(again) << again.error() << "\n" << yaml;
  expect_same(topology, *again);
}

}  // namespace

// --- Valid files -------------------------------------------------------------

TEST(TopologyParse, SpecExampleGivesNodesHostsPortsAndLines) {
  auto t = parse(kSpecExample);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{kFe, kFe + 1, 0, 1}));
  EXPECT_EQ(t->root().rank, kFe);
  EXPECT_EQ(t->at(kFe + 1).parent, kFe);
  EXPECT_EQ(t->at(kFe + 1).children, (std::vector<Rank>{0, 1}));
  EXPECT_EQ(t->at(kFe + 1).line, 7);
  EXPECT_EQ(t->at(0).host, "localhost");
  EXPECT_EQ(t->address_of("node01"), "10.0.0.1");
  EXPECT_EQ(t->address_of("localhost"), "127.0.0.1");
  EXPECT_EQ(t->depth(), 2u);
}

// The gossip detector's settings (docs/gossip.md): parsed, kept through to_yaml,
// and absent unless given.
TEST(TopologyParse, GossipSettingsAreReadAndWrittenBack) {
  auto plain = parse(kSpecExample);
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_FALSE(plain->gossip());
  auto t = parse("gossip: {schedule: dbrr, period_ms: 200, ping_timeout_ms: 900}\n" + std::string(kSpecExample));
  ASSERT_TRUE(t) << t.error();
  ASSERT_TRUE(t->gossip());
  EXPECT_EQ(t->gossip()->schedule, canopy::GossipSchedule::dbrr);
  EXPECT_EQ(t->gossip()->period, std::chrono::milliseconds(200));
  EXPECT_EQ(t->gossip()->max_hangup, canopy::GossipOptions{}.max_hangup) << "a field not given keeps its default";
  EXPECT_EQ(t->gossip()->ping_timeout, std::chrono::milliseconds(900));
  auto again = canopy::parse_topology_yaml(canopy::to_yaml(*t), "again.yaml");
  ASSERT_TRUE(again) << again.error();
  ASSERT_TRUE(again->gossip());
  EXPECT_EQ(again->gossip()->schedule, canopy::GossipSchedule::dbrr);
  EXPECT_EQ(again->gossip()->ping_timeout, std::chrono::milliseconds(900));
}

TEST(TopologyParse, FlatTreeHasTheFrontEndAsOnlyParent) {
  auto t = parse(kFlat);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 4u);
  EXPECT_EQ(t->depth(), 1u);
  EXPECT_EQ(t->root().children, (std::vector<Rank>{0, 1, 2}));
  EXPECT_EQ(t->backends(), (std::vector<Rank>{0, 1, 2}));
}

TEST(TopologyParse, BalancedTreeMatchesItsGeneratedTwin) {
  auto parsed = parse(kBalanced);
  ASSERT_TRUE(parsed) << parsed.error();
  auto generated = canopy::generate_topology("b:2^2");
  ASSERT_TRUE(generated) << generated.error();
  expect_same(*parsed, *generated);
}

// Ports learnt after launch (the Endpoints message) are set in place, node by node.
TEST(TopologyParse, SetPortChangesOneNodesPortAndRefusesAnUnknownRank) {
  auto t = canopy::generate_topology("b:2^2");
  ASSERT_TRUE(t) << t.error();
  const Rank commnode = t->root().children.front();
  EXPECT_TRUE(t->set_port(commnode, 40123));
  EXPECT_EQ(t->at(commnode).port, 40123);
  EXPECT_EQ(t->root().port, 0);
  EXPECT_FALSE(t->set_port(999999, 1));
  EXPECT_EQ(t->size(), 7u);
}

TEST(TopologyParse, NodesComeRootFirstThenBreadthFirstInListedChildOrder) {
  auto t = parse(kUneven);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{kFe, kFe + 1, 5, kFe + 2, kFe + 3, 0, 1, 2, 3, 4}));
  EXPECT_EQ(t->depth(), 3u);
}

TEST(TopologyParse, MultiHostTreeKeepsListedHostsAndAddsUnlistedOnes) {
  auto t = parse(kMultiHost);
  ASSERT_TRUE(t) << t.error();
  ASSERT_EQ(t->hosts().size(), 4u);
  EXPECT_EQ(t->hosts()[3].name, "node03");
  EXPECT_EQ(t->hosts()[3].address, "");
  EXPECT_EQ(t->at(kFe + 2).port, 7002);
  EXPECT_EQ(t->at(3).host, "node03");
  EXPECT_EQ(t->address_of("node01"), "10.1.0.11");
  EXPECT_EQ(t->address_of("node02"), "node02");
  EXPECT_EQ(t->address_of("node03"), "node03");
}

TEST(TopologyParse, BlockStyleNodesAndEdgesAreAccepted) {
  auto t = parse("nodes:\n  - rank: 7\n    role: frontend\n  - rank: 0\n    role: backend\n"
                 "edges:\n  - parent: 7\n    children:\n      - 0\n");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().children, (std::vector<Rank>{0}));
  EXPECT_EQ(t->at(0).line, 4);
}

TEST(TopologyParse, ChildrenOfOneParentMayBeSpreadOverSeveralEdges) {
  auto t = parse(std::string(kFlat) + "  - {parent: 1000000, children: []}\n");
  ASSERT_TRUE(t) << t.error();
  auto split = parse("nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 0, role: backend}\n  - {rank: 1, role: backend}\n"
                     "edges:\n  - {parent: 9, children: [1]}\n  - {parent: 9, children: [0]}\n");
  ASSERT_TRUE(split) << split.error();
  EXPECT_EQ(split->root().children, (std::vector<Rank>{1, 0}));
}

TEST(TopologyParse, CommnodeWithoutChildrenIsAllowed) {
  auto t = parse("nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 8, role: commnode}\n"
                 "edges:\n  - {parent: 9, children: [8]}\n");
  ASSERT_TRUE(t) << t.error();
  EXPECT_TRUE(t->backends().empty());
}

TEST(TopologyParse, RanksUpToTheLargest32BitValueAreAccepted) {
  auto t = parse("nodes:\n  - {rank: 4294967295, role: frontend}\n  - {rank: 0, role: backend}\n"
                 "edges:\n  - {parent: 4294967295, children: [0]}\n");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().rank, 4294967295u);
}

// --- Errors in the tree's shape -------------------------------------------------

TEST(TopologyErrors, NodeWithTwoParentsNamesBothEdgesAndLines) {
  auto e = error_of(std::string(kThreeNodes) + "  - {rank: 7, role: backend}\n"
                    "edges:\n"
                    "  - {parent: 1000000, children: [1000001, 1000002]}\n"
                    "  - {parent: 1000001, children: [7]}\n"
                    "  - {parent: 1000002, children: [7]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:9: node 7 has two parents (1000001 at line 8 and 1000002 at line 9)"));
}

TEST(TopologyErrors, ChildListedTwiceUnderOneParentIsNamed) {
  auto e = error_of("nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 0, role: backend}\n"
                    "edges:\n  - {parent: 9, children: [0, 0]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:5: node 0 is listed twice as a child of 9"));
}

TEST(TopologyErrors, DuplicateRankNamesTheFirstLine) {
  auto e = error_of("nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 3, role: backend}\n  - {rank: 3, role: backend}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:4: duplicate rank 3 (first at line 3)"));
}

TEST(TopologyErrors, EdgeToUnknownChildRankIsNamed) {
  auto e = error_of(std::string(kFlat) + "  - {parent: 1000000, children: [42]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:8: edge refers to unknown rank 42"));
}

TEST(TopologyErrors, EdgeFromUnknownParentRankIsNamed) {
  auto e = error_of(std::string(kFlat) + "  - {parent: 43, children: []}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:8: edge refers to unknown rank 43"));
}

TEST(TopologyErrors, NoRootWhenEveryNodeHasAParent) {
  auto e = error_of(std::string(kThreeNodes) +
                    "edges:\n  - {parent: 1000000, children: [1000001]}\n  - {parent: 1000001, children: [1000000]}\n"
                    "  - {parent: 1000001, children: [1000002]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml: no root: every node has a parent (the tree must have exactly one front-end with "
                          "no parent)"));
  EXPECT_TRUE(Contains(e, "cycle: 1000000 -> 1000001 -> 1000000"));
}

TEST(TopologyErrors, CycleBelowTheRootIsNamedFromParentToChild) {
  auto e = error_of(std::string(kThreeNodes) +
                    "edges:\n  - {parent: 1000001, children: [1000002]}\n  - {parent: 1000002, children: [1000001]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:3: cycle: 1000001 -> 1000002 -> 1000001"));
}

TEST(TopologyErrors, NodeThatIsItsOwnParentIsACycle) {
  auto e = error_of(std::string(kThreeNodes) +
                    "edges:\n  - {parent: 1000000, children: [1000002]}\n  - {parent: 1000001, children: [1000001]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:3: cycle: 1000001 -> 1000001"));
}

TEST(TopologyErrors, NodeBelowACycleIsNotReachableFromTheRoot) {
  auto e = error_of(
      "nodes:\n  - {rank: 1000000, role: frontend}\n  - {rank: 6, role: backend}\n"
      "  - {rank: 1000001, role: commnode}\n  - {rank: 1000002, role: commnode}\n"
      "edges:\n  - {parent: 1000001, children: [1000002, 6]}\n  - {parent: 1000002, children: [1000001]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:3: node 6 is not reachable from the root 1000000"));
  EXPECT_TRUE(Contains(e, "1000001 -> 1000002 -> 1000001"));
}

TEST(TopologyErrors, SeveralRootsAreNamedWithTheirLines) {
  auto e = error_of("nodes:\n  - {rank: 7, role: backend}\n  - {rank: 1000000, role: frontend}\n"
                    "  - {rank: 5, role: backend}\n  - {rank: 1000001, role: commnode}\n"
                    "edges:\n  - {parent: 1000000, children: [7]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:4: several roots: 1000000 (line 3) and 5 (line 4)"));
}

TEST(TopologyErrors, RootMustBeTheFrontEnd) {
  auto e = error_of("nodes:\n  - {rank: 1000000, role: frontend}\n  - {rank: 1000001, role: commnode}\n"
                    "edges:\n  - {parent: 1000001, children: [1000000]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:3: root 1000001 is a commnode; the root must be the front-end"));
}

TEST(TopologyErrors, FrontEndBelowTheRootIsNotTheRoot) {
  auto e = error_of("nodes:\n  - {rank: 1, role: frontend}\n  - {rank: 2, role: frontend}\n"
                    "edges:\n  - {parent: 1, children: [2]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:3: front-end 2 is not the root"));
}

TEST(TopologyErrors, BackEndWithChildren) {
  auto e = error_of("nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 2, role: backend}\n  - {rank: 3, role: backend}\n"
                    "edges:\n  - {parent: 9, children: [2]}\n  - {parent: 2, children: [3]}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:3: back-end 2 has children"));
}

// --- Errors in the text ---------------------------------------------------------

TEST(TopologyErrors, UnknownNodeKeyIsNamedWithItsLine) {
  auto e = error_of("nodes:\n  - {rank: 1, role: frontend, prot: 5}\n");
  EXPECT_TRUE(Contains(e, "t.yaml:2: unknown key 'prot' in a node (expected rank, role, host, port)"));
}

TEST(TopologyErrors, UnknownKeysElsewhereAreNamed) {
  EXPECT_TRUE(Contains(error_of("node:\n  - {rank: 1, role: frontend}\n"), "t.yaml:1: unknown key 'node'"));
  EXPECT_TRUE(Contains(error_of(std::string(kFlat) + "  - {parent: 1000000, child: [0]}\n"), "t.yaml:8: unknown key 'child'"));
  EXPECT_TRUE(Contains(error_of("hosts:\n  - {name: a, adress: 1.2.3.4}\n" + std::string(kFlat)),
                       "t.yaml:2: unknown key 'adress'"));
}

TEST(TopologyErrors, BadGossipSettingsAreNamed) {
  EXPECT_TRUE(Contains(error_of("gossip: {schedule: brrr}\n" + std::string(kFlat)),
                       "t.yaml:1: unknown gossip schedule"));
  EXPECT_TRUE(Contains(error_of("gossip: {period_ms: 100}\n" + std::string(kFlat)), "t.yaml:1:"));
  EXPECT_TRUE(Contains(error_of("gossip: {schedule: brr, period_ms: 5}\n" + std::string(kFlat)),
                       "'period_ms' must be at least 10"));
  EXPECT_TRUE(Contains(error_of("gossip: {schedule: brr, period: 100}\n" + std::string(kFlat)),
                       "unknown key 'period' in 'gossip'"));
}

TEST(TopologyErrors, KeyGivenTwiceIsAnError) {
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 1, role: frontend, rank: 2}\n"), "t.yaml:2: key 'rank' appears twice"));
}

TEST(TopologyErrors, MissingRankOrRoleIsNamed) {
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {role: frontend}\n"), "t.yaml:2: a node needs 'rank'"));
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 1}\n"), "t.yaml:2: a node needs 'role'"));
}

TEST(TopologyErrors, NegativeRankIsRejected) {
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: -1, role: frontend}\n"),
                       "t.yaml:2: rank must be a whole number from 0 to 4294967295, not '-1'"));
}

TEST(TopologyErrors, RankAbove32BitsIsRejected) {
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 4294967296, role: frontend}\n"), "t.yaml:2: rank 4294967296 is out of range"));
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 99999999999999999999999, role: frontend}\n"), "out of range"));
}

TEST(TopologyErrors, WrongScalarTypesAreRejected) {
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 1.5, role: frontend}\n"), "t.yaml:2: rank must be a whole number"));
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: [1], role: frontend}\n"), "not a list"));
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: , role: frontend}\n"), "not empty"));
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 1, role: frontend, host: {a: b}}\n"), "t.yaml:2: host must be a non-empty string, not a map"));
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 1, role: frontend}\nedges:\n  - {parent: 1, children: 5}\n"),
                       "t.yaml:4: 'children' must be a list of ranks"));
  EXPECT_TRUE(Contains(error_of("nodes: {rank: 1}\n"), "t.yaml:1: 'nodes' must be a list, not a map"));
}

TEST(TopologyErrors, PortAbove65535IsRejected) {
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 1, role: frontend, port: 65536}\n"),
                       "t.yaml:2: port 65536 is out of range (from 0 to 65535)"));
}

TEST(TopologyErrors, UnknownRoleListsTheRoles) {
  EXPECT_TRUE(Contains(error_of("nodes:\n  - {rank: 1, role: boss}\n"),
                       "t.yaml:2: unknown role 'boss' (expected frontend, commnode or backend)"));
}

TEST(TopologyErrors, HostListedTwiceIsAnError) {
  EXPECT_TRUE(Contains(error_of("hosts:\n  - {name: a}\n  - {name: a}\n" + std::string(kFlat)),
                       "t.yaml:3: host 'a' is listed twice (first at line 2)"));
}

TEST(TopologyErrors, YamlSyntaxErrorGivesItsLine) {
  auto e = error_of("nodes:\n  - {rank: 1, role: frontend}\n  - {rank: 2, role: backend\n");
  EXPECT_TRUE(Contains(e, "t.yaml:"));
  EXPECT_TRUE(Contains(e, "YAML syntax error"));
  EXPECT_FALSE(Contains(e, "t.yaml:0"));
}

// yaml-cpp's own message for a document nested past its limit is "bad file" (issue
// 16); the error says what is wrong, where.
TEST(TopologyErrors, YamlNestedTooDeepSaysSo) {
  auto e = error_of("hosts: " + std::string(3000, '[') + std::string(3000, ']') + "\n");
  EXPECT_TRUE(Contains(e, "t.yaml:1: the YAML is nested ")) << e;
  EXPECT_TRUE(Contains(e, " levels deep, past the parser's limit")) << e;
  EXPECT_FALSE(Contains(e, "bad file")) << e;
}

// yaml-cpp 0.7's LoadAll never returns on these, allocating as it loops (found by
// fuzz_topology; the input is kept in fuzz/regressions/topology/ too): each is an
// error now, at once.
TEST(TopologyErrors, MalformedYamlThatLoopedTheParserIsAnError) {
  for (const std::string& text : {std::string(","), std::string(",\xcc\x03" "b:2x332xAxxA"), std::string("nodes: []\n,\n")}) {
    auto e = error_of(text);
    EXPECT_FALSE(e.empty()) << "accepted: " << text;
  }
}

TEST(TopologyErrors, EmptyFileOrNoNodesIsAClearError) {
  EXPECT_TRUE(Contains(error_of(""), "t.yaml: the topology is empty"));
  EXPECT_TRUE(Contains(error_of("# just a comment\n"), "t.yaml: the topology is empty"));
  EXPECT_TRUE(Contains(error_of("nodes: []\n"), "t.yaml: the topology has no nodes"));
  EXPECT_TRUE(Contains(error_of("nodes:\n"), "t.yaml: the topology has no nodes"));
  EXPECT_TRUE(Contains(error_of("hosts: []\n"), "t.yaml:1: the topology needs 'nodes'"));
}

TEST(TopologyErrors, NonMapDocumentIsRejected) {
  EXPECT_TRUE(Contains(error_of("- 1\n- 2\n"), "t.yaml:1: the topology must be a map with keys nodes, hosts, edges"));
  EXPECT_TRUE(Contains(error_of("hello"), "not 'hello'"));
}

TEST(TopologyErrors, SeveralYamlDocumentsAreRejected) {
  EXPECT_TRUE(Contains(error_of(std::string(kFlat) + "---\n" + std::string(kFlat)), "t.yaml:9: a topology file holds one"));
}

TEST(TopologyErrors, GarbageNeverCrashesAndNamesTheSource) {
  const std::string inputs[] = {
      "[",          "{{{",          "]]",           "\x01\x02\xff\xfe", std::string("a\0b", 3),
      "nodes: 5",   "nodes:\n  - 5\n", "nodes: [{}]", "nodes: [[]]",    "nodes: [{rank: 1, role: frontend}]\nedges: [5]",
      "edges: x\nnodes: [{rank: 1, role: frontend}]", "{? [a] : b}", "&a [*a]", "*unknown", "!!binary x",
      "nodes: [{rank: 1, role: frontend}]\nhosts: [{name: [a]}]", "%YAML 9.9\n---\n", "\t\tnodes:",
      std::string(5000, '['), std::string(5000, '{'), std::string(3000, '-') + " x"};
  for (const std::string& text : inputs) {
    auto t = canopy::parse_topology_yaml(text, "junk.yaml");
    EXPECT_FALSE(t) << "accepted: " << text.substr(0, 60);
    if (!t) {
      EXPECT_EQ(t.error().rfind("junk.yaml", 0), 0u) << t.error();
    }
  }
}

// --- Files ------------------------------------------------------------------------

TEST(TopologyFile, LoadsAFileAndNamesItInErrors) {
  char path[] = "/tmp/canopy-topology-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = std::string(kFlat) + "  - {parent: 1000000, children: [42]}\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  auto t = canopy::load_topology(path);
  unlink(path);
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), std::string(path) + ":8: edge refers to unknown rank 42"));
}

TEST(TopologyFile, MissingFileIsAClearError) {
  auto t = canopy::load_topology("/nonexistent/tree.yaml");
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), "cannot read topology file /nonexistent/tree.yaml: No such file or directory"));
}

TEST(TopologyFile, DirectoryIsAClearError) {
  auto t = canopy::load_topology("/tmp");
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), "cannot read topology file /tmp: Is a directory"));
}

// --- Topology::make ----------------------------------------------------------------

TEST(TopologyMake, ParentFieldsAloneGiveTheChildren) {
  auto t = Topology::make({node(0, Role::backend, 9), node(9, Role::frontend), node(1, Role::backend, 9)}, {});
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().children, (std::vector<Rank>{0, 1}));
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{9, 0, 1}));
}

TEST(TopologyMake, ChildrenListsAloneGiveTheParents) {
  auto t = Topology::make({node(9, Role::frontend, {}, {1, 0}), node(0, Role::backend), node(1, Role::backend)}, {});
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->at(0).parent, 9u);
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{9, 1, 0}));
}

TEST(TopologyMake, ParentFieldContradictingAChildrenListIsTwoParents) {
  auto t = Topology::make({node(9, Role::frontend, {}, {8, 0}), node(8, Role::commnode, 9), node(0, Role::backend, 8)},
                          {}, "wire");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), "wire: node 0 has two parents (9 and 8)");
}

TEST(TopologyMake, EmptyNodeListIsAnError) {
  auto t = Topology::make({}, {}, "here");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), "here: the topology has no nodes");
}

TEST(TopologyMake, ErrorsWithoutLinesNameOnlyTheSource) {
  auto t = Topology::make({node(9, Role::frontend), node(0, Role::backend)}, {});
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), "<topology>: several roots: 9 and 0 (the tree must have exactly one front-end with no parent)");
}

TEST(TopologyMake, UnknownParentRankIsAnError) {
  auto t = Topology::make({node(9, Role::frontend), node(0, Role::backend, 5)}, {});
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), "edge refers to unknown rank 5"));
}

TEST(TopologyMake, DuplicateHostIsAnError) {
  auto t = Topology::make({node(9, Role::frontend)}, {{"a", ""}, {"a", "1.2.3.4"}});
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), "host 'a' is listed twice"));
}

// --- to_yaml ---------------------------------------------------------------------------

TEST(TopologyToYaml, RoundTripsEachExample) {
  for (std::string_view yaml : {kSpecExample, kFlat, kBalanced, kUneven, kMultiHost}) {
    auto t = parse(yaml);
    ASSERT_TRUE(t) << t.error();
    expect_round_trip(*t);
  }
}

TEST(TopologyToYaml, RoundTripsGeneratedTrees) {
  for (const char* spec : {"b:4^2", "b:2x3x2", "b:1^1"}) {
    auto t = canopy::generate_topology(spec, "node7");
    ASSERT_TRUE(t) << t.error();
    expect_round_trip(*t);
  }
}

TEST(TopologyToYaml, QuotesHostNamesAndAddressesThatAreNotPlainNames) {
  canopy::TopologyNode fe = node(9, Role::frontend, {}, {0});
  fe.host = "null";
  canopy::TopologyNode be = node(0, Role::backend);
  be.host = "odd \"host\": #1\t";
  auto t = Topology::make({fe, be}, {{"null", "::1"}});
  ASSERT_TRUE(t) << t.error();
  expect_round_trip(*t);
}

TEST(TopologyToYaml, SingleHostWithoutAddressWritesNoHostsSection) {
  auto t = parse(kBalanced);
  ASSERT_TRUE(t);
  std::string yaml = canopy::to_yaml(*t);
  EXPECT_FALSE(Contains(yaml, "hosts:"));
  EXPECT_TRUE(Contains(yaml, "  - {rank: 1000001, role: commnode}\n"));
  EXPECT_TRUE(Contains(yaml, "  - {parent: 1000000, children: [1000001, 1000002]}\n"));
}

TEST(TopologyToYaml, HostsSectionWhenAnAddressIsGiven) {
  auto t = parse(kSpecExample);
  ASSERT_TRUE(t);
  EXPECT_TRUE(Contains(canopy::to_yaml(*t), "hosts:\n  - {name: node01, address: 10.0.0.1}\n  - {name: localhost}\n"));
}

// --- Generation -----------------------------------------------------------------------------

TEST(Generate, FourSquaredHas21NodesAndDepth2) {
  auto t = canopy::generate_topology("b:4^2");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 21u);
  EXPECT_EQ(t->depth(), 2u);
  EXPECT_EQ(t->root().children.size(), 4u);
  for (Rank commnode : t->root().children) {
    EXPECT_EQ(t->at(commnode).role, Role::commnode);
    EXPECT_EQ(t->at(commnode).children.size(), 4u);
  }
  EXPECT_EQ(t->backends().size(), 16u);
}

TEST(Generate, SixteenSquaredHas273Nodes) {
  auto t = canopy::generate_topology("b:16^2");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 273u);
  EXPECT_EQ(t->backends().size(), 256u);
}

TEST(Generate, PerLevelFanOutsGiveEachLevel) {
  auto t = canopy::generate_topology("b:2x4");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 11u);
  EXPECT_EQ(t->depth(), 2u);
  EXPECT_EQ(t->root().children, (std::vector<Rank>{kFe + 1, kFe + 2}));
  EXPECT_EQ(t->at(kFe + 1).children, (std::vector<Rank>{0, 1, 2, 3}));
  EXPECT_EQ(t->at(kFe + 2).children, (std::vector<Rank>{4, 5, 6, 7}));
}

TEST(Generate, SingleFanOutIsAFlatTree) {
  for (const char* spec : {"b:8", "8", "b:8^1"}) {
    auto t = canopy::generate_topology(spec);
    ASSERT_TRUE(t) << spec << ": " << t.error();
    EXPECT_EQ(t->size(), 9u);
    EXPECT_EQ(t->depth(), 1u);
    EXPECT_EQ(t->root().children, (std::vector<Rank>{0, 1, 2, 3, 4, 5, 6, 7}));
  }
}

TEST(Generate, TwoCubedHasDepth3) {
  auto t = canopy::generate_topology("b:2^3");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 15u);
  EXPECT_EQ(t->depth(), 3u);
  EXPECT_EQ(t->backends().size(), 8u);
}

TEST(Generate, PrefixIsOptional) {
  auto with = canopy::generate_topology("b:3x2");
  auto without = canopy::generate_topology("3x2");
  ASSERT_TRUE(with && without);
  expect_same(*with, *without);
}

TEST(Generate, OneByOneIsAFrontEndAndOneBackEnd) {
  auto t = canopy::generate_topology("b:1^1");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{kFe, 0}));
}

TEST(Generate, RanksAreBackEndsLeftToRightAndCommnodesBreadthFirst) {
  auto t = canopy::generate_topology("b:2^3");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{kFe, kFe + 1, kFe + 2, kFe + 3, kFe + 4, kFe + 5, kFe + 6,
                                                   0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(t->at(kFe + 2).children, (std::vector<Rank>{kFe + 5, kFe + 6}));
  EXPECT_EQ(t->at(kFe + 6).children, (std::vector<Rank>{6, 7}));
  for (const auto& n : t->nodes()) {
    EXPECT_EQ(n.role, n.rank == kFe ? Role::frontend : n.rank > kFe ? Role::commnode : Role::backend);
    EXPECT_EQ(n.line, 0);
  }
}

TEST(Generate, AllProcessesAreOnTheGivenHost) {
  auto t = canopy::generate_topology("b:2^2", "node42");
  ASSERT_TRUE(t) << t.error();
  for (const auto& n : t->nodes()) EXPECT_EQ(n.host, "node42");
  ASSERT_EQ(t->hosts().size(), 1u);
  EXPECT_EQ(t->hosts()[0].name, "node42");
}

TEST(Generate, BackendsBelowANodeAreItsSubtreesLeaves) {
  auto t = canopy::generate_topology("b:2^3");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->backends_below(kFe), t->backends());
  EXPECT_EQ(t->backends_below(kFe + 2), (std::vector<Rank>{4, 5, 6, 7}));
  EXPECT_EQ(t->backends_below(kFe + 3), (std::vector<Rank>{0, 1}));
  EXPECT_EQ(t->backends_below(5), (std::vector<Rank>{5}));
  EXPECT_TRUE(t->backends_below(12345).empty());
}

TEST(Generate, BadSpecsAreExplained) {
  const std::pair<const char*, const char*> cases[] = {
      {"b:0^2", "fan-out must be at least 1"},   {"b:4^0", "depth must be at least 1"},
      {"b:4^", "missing depth"},                 {"b:^2", "missing fan-out"},
      {"b:x", "missing fan-out"},                {"b:4xx2", "missing fan-out"},
      {"b:2x", "missing fan-out"},               {"", "missing fan-out"},
      {"b:", "missing fan-out"},                 {"b:4^2junk", "depth '2junk' is not a whole number"},
      {"b:4^2^2", "is not a whole number"},      {"b:-4", "fan-out '-4' is not a whole number"},
      {"b: 4", "is not a whole number"},         {"b:four", "is not a whole number"},
      {"b:2X4", "is not a whole number"},        {"b:99999999999", "is too large"},
      {"z:4", "unknown prefix 'z:'"},            {"b:b:4", "is not a whole number"},
  };
  for (auto [spec, problem] : cases) {
    auto t = canopy::generate_topology(spec);
    ASSERT_FALSE(t) << spec;
    EXPECT_TRUE(Contains(t.error(), std::string("bad topology spec '") + spec + "'"));
    EXPECT_TRUE(Contains(t.error(), problem));
  }
}

TEST(Generate, AbsurdSizesAreRefused) {
  for (const char* spec : {"b:1100^2", "b:2^30", "b:1^2000000", "b:4294967295^4294967295", "b:1000x1000x2"}) {
    auto t = canopy::generate_topology(spec);
    ASSERT_FALSE(t) << spec;
    EXPECT_TRUE(Contains(t.error(), "more than 1100000 processes") || Contains(t.error(), "too large")) << t.error();
  }
}

TEST(Generate, BackEndRanksMayNotReachTheFrontEndsRank) {
  auto t = canopy::generate_topology("b:1000001");
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), "generated tree 'b:1000001': more than 1000000 back-ends; their ranks would reach "
                                  "the front-end's rank 1000000"));
}
