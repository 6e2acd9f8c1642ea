// Topology: the YAML format, its errors (file:line and the problem) and generation.
#include <gtest/gtest.h>

#include "canopy/topology.h"

using canopy::Role;

namespace {

std::string error_of(const std::string& yaml) {
  auto t = canopy::parse_topology_yaml(yaml, "t.yaml");
  return t ? std::string("(parsed)") : t.error();
}

const char* kTwoLevel = R"(nodes:
  - {rank: 10, role: frontend}
  - {rank: 11, role: commnode, port: 4000}
  - {rank: 0, role: backend}
  - {rank: 1, role: backend, host: other}
edges:
  - {parent: 10, children: [11]}
  - {parent: 11, children: [0, 1]}
)";

}  // namespace

TEST(TopologyYaml, ParsesNodesEdgesHostsAndPorts) {
  auto t = canopy::parse_topology_yaml(kTwoLevel, "t.yaml");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 4u);
  EXPECT_EQ(t->root().rank, 10u);
  EXPECT_EQ(t->at(11).port, 4000);
  EXPECT_EQ(t->at(1).host, "other");
  EXPECT_EQ(t->at(0).parent, 11u);
  EXPECT_EQ(t->backends(), (std::vector<canopy::Rank>{0, 1}));
  EXPECT_EQ(t->depth(), 2u);
  EXPECT_EQ(t->address_of("localhost"), "127.0.0.1");
}

TEST(TopologyYaml, RoundTripsThroughToYaml) {
  auto t = canopy::parse_topology_yaml(kTwoLevel, "t.yaml");
  ASSERT_TRUE(t);
  auto again = canopy::parse_topology_yaml(canopy::to_yaml(*t), "again.yaml");
  ASSERT_TRUE(again) << again.error();
  ASSERT_EQ(again->size(), t->size());
  for (std::size_t i = 0; i < t->size(); ++i) {
    EXPECT_EQ(again->nodes()[i].rank, t->nodes()[i].rank);
    EXPECT_EQ(again->nodes()[i].role, t->nodes()[i].role);
    EXPECT_EQ(again->nodes()[i].host, t->nodes()[i].host);
    EXPECT_EQ(again->nodes()[i].port, t->nodes()[i].port);
    EXPECT_EQ(again->nodes()[i].children, t->nodes()[i].children);
  }
}

TEST(TopologyYaml, DuplicateRankNamesBothLines) {
  auto e = error_of("nodes:\n  - {rank: 1, role: frontend}\n  - {rank: 1, role: backend}\n");
  EXPECT_NE(e.find("t.yaml:3: duplicate rank 1 (first at line 2)"), std::string::npos) << e;
}

TEST(TopologyYaml, NodeWithTwoParentsIsAnError) {
  auto e = error_of(
      "nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 1, role: commnode}\n  - {rank: 2, role: backend}\n"
      "edges:\n  - {parent: 9, children: [1, 2]}\n  - {parent: 1, children: [2]}\n");
  EXPECT_NE(e.find("t.yaml:7: node 2 has two parents"), std::string::npos) << e;
}

TEST(TopologyYaml, CycleIsAnError) {
  auto e = error_of(
      "nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 1, role: commnode}\n  - {rank: 2, role: commnode}\n"
      "edges:\n  - {parent: 1, children: [2]}\n  - {parent: 2, children: [1]}\n");
  EXPECT_NE(e.find("t.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("cycle"), std::string::npos) << e;
}

TEST(TopologyYaml, UnreachableNodeIsAnError) {
  auto e = error_of(
      "nodes:\n  - {rank: 9, role: frontend}\n  - {rank: 1, role: commnode}\n  - {rank: 2, role: commnode}\n"
      "  - {rank: 3, role: backend}\n"
      "edges:\n  - {parent: 9, children: [3]}\n  - {parent: 1, children: [2]}\n  - {parent: 2, children: [1]}\n");
  EXPECT_TRUE(e.find("not reachable") != std::string::npos || e.find("two parents") != std::string::npos ||
              e.find("cycle") != std::string::npos)
      << e;
}

TEST(TopologyYaml, NoRootIsAnError) {
  auto e = error_of(
      "nodes:\n  - {rank: 1, role: frontend}\n  - {rank: 2, role: commnode}\n"
      "edges:\n  - {parent: 1, children: [2]}\n  - {parent: 2, children: [1]}\n");
  EXPECT_NE(e.find("no root"), std::string::npos) << e;
}

TEST(TopologyYaml, RootMustBeTheFrontEnd) {
  auto e = error_of("nodes:\n  - {rank: 1, role: commnode}\n  - {rank: 2, role: backend}\n"
                    "edges:\n  - {parent: 1, children: [2]}\n");
  EXPECT_NE(e.find("t.yaml:2: root 1 is a commnode"), std::string::npos) << e;
}

TEST(TopologyYaml, SeveralRootsAreAnError) {
  auto e = error_of("nodes:\n  - {rank: 1, role: frontend}\n  - {rank: 2, role: backend}\n");
  EXPECT_NE(e.find("several roots"), std::string::npos) << e;
}

TEST(TopologyYaml, EdgeToUnknownRankIsAnError) {
  auto e = error_of("nodes:\n  - {rank: 1, role: frontend}\nedges:\n  - {parent: 1, children: [42]}\n");
  EXPECT_NE(e.find("t.yaml:4: edge refers to unknown rank 42"), std::string::npos) << e;
}

TEST(TopologyYaml, BackendWithChildrenIsAnError) {
  auto e = error_of("nodes:\n  - {rank: 1, role: frontend}\n  - {rank: 2, role: backend}\n  - {rank: 3, role: backend}\n"
                    "edges:\n  - {parent: 1, children: [2]}\n  - {parent: 2, children: [3]}\n");
  EXPECT_NE(e.find("back-end 2 has children"), std::string::npos) << e;
}

TEST(TopologyYaml, UnknownKeyAndBadValuesAreNamed) {
  EXPECT_NE(error_of("nodes:\n  - {rank: 1, role: frontend, prot: 5}\n").find("t.yaml:2: unknown key 'prot'"),
            std::string::npos);
  EXPECT_NE(error_of("nodes:\n  - {rank: -1, role: frontend}\n").find("t.yaml:2:"), std::string::npos);
  EXPECT_NE(error_of("nodes:\n  - {rank: 1, role: boss}\n").find("unknown role 'boss'"), std::string::npos);
  EXPECT_NE(error_of("nodes:\n  - {rank: 1, role: frontend, port: 70000}\n").find("port"), std::string::npos);
}

TEST(TopologyYaml, GarbageNeverCrashes) {
  for (const char* text : {"", "[", "{{{", "- 1\n- 2", "nodes: 5", "nodes:\n  - 5\n", "\x01\x02\xff", "nodes: [{}]"}) {
    auto t = canopy::parse_topology_yaml(text, "junk.yaml");
    EXPECT_FALSE(t) << "accepted: " << text;
    if (!t) {
      EXPECT_EQ(t.error().rfind("junk.yaml", 0), 0u) << t.error();
    }
  }
}

TEST(TopologyFile, MissingFileIsAClearError) {
  auto t = canopy::load_topology("/nonexistent/tree.yaml");
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().find("cannot read topology file /nonexistent/tree.yaml"), std::string::npos) << t.error();
}

TEST(Generate, BalancedFourByFour) {
  auto t = canopy::generate_topology("b:4^2");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 21u);
  EXPECT_EQ(t->depth(), 2u);
  EXPECT_EQ(t->root().rank, canopy::kFirstInternalRank);
  EXPECT_EQ(t->root().children.size(), 4u);
  EXPECT_EQ(t->backends().size(), 16u);
  EXPECT_EQ(t->backends().back(), 15u);
  EXPECT_EQ(t->backends_below(canopy::kFirstInternalRank + 1), (std::vector<canopy::Rank>{0, 1, 2, 3}));
}

TEST(Generate, SixteenSquaredAndPerLevelFanouts) {
  EXPECT_EQ(canopy::generate_topology("b:16^2")->size(), 273u);
  auto t = canopy::generate_topology("2x4");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->size(), 11u);
  EXPECT_EQ(t->at(canopy::kFirstInternalRank + 1).children.size(), 4u);
  EXPECT_EQ(canopy::generate_topology("b:8")->size(), 9u);
  EXPECT_EQ(canopy::generate_topology("b:2^3")->depth(), 3u);
}

TEST(Generate, BadSpecsAreExplained) {
  for (const char* spec : {"b:0^2", "b:4^", "b:x", "b:4^2junk", "", "b:4xx2", "b:100000^2"}) {
    auto t = canopy::generate_topology(spec);
    EXPECT_FALSE(t) << spec;
  }
  EXPECT_NE(canopy::generate_topology("k:2@8").error().find("not supported yet"), std::string::npos);
}
