// NICs and link choices in topologies: YAML, the wire, and what a child is told
// about its link to its parent (CANOPY_PARENT_LINK).
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <string>
#include <string_view>

#include "canopy/topology.h"
#include "core/codec.h"
#include "core/node.h"
#include "topology/decimal.h"

using canopy::LinkChecksum;
using canopy::LinkKind;
using canopy::Rank;
using canopy::Topology;

namespace {

constexpr Rank kFe = canopy::kFirstInternalRank;

canopy::Result<Topology> parse(std::string_view yaml) { return canopy::parse_topology_yaml(yaml, "t.yaml"); }

std::string error_of(std::string_view yaml) {
  auto topology = parse(yaml);
  return topology ? "(parsed)" : topology.error();
}

::testing::AssertionResult Contains(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// Two hosts with two NICs each, one with one; the second commnode's edge is plain.
constexpr std::string_view kNics = R"(hosts:
  - {name: a, nics: [10.201.1.1, 10.201.2.1]}
  - {name: b, address: 10.201.2.2, nics: [10.201.1.2, 10.201.2.2]}
  - {name: c, address: 10.201.3.3}
links: {checksum: additive, reliable: false}
nodes:
  - {rank: 1000000, role: frontend, host: a}
  - {rank: 1000001, role: commnode, host: b}
  - {rank: 1000002, role: commnode, host: b}
  - {rank: 1000003, role: commnode, host: c}
  - {rank: 0, role: backend, host: a}
  - {rank: 1, role: backend, host: b}
edges:
  - {parent: 1000000, children: [1000001]}
  - {parent: 1000000, children: [1000002], link: plain}
  - {parent: 1000000, children: [1000003]}
  - {parent: 1000001, children: [0, 1], link: striped}
)";

TEST(LinkTopology, NicsDefaultTheAddressAndAutomaticLinksFollowThem) {
  auto t = parse(kNics);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->address_of("a"), "10.201.1.1") << "the first NIC is the address when none is given";
  EXPECT_EQ(t->address_of("b"), "10.201.2.2");
  EXPECT_EQ(t->nics_of("a"), (std::vector<std::string>{"10.201.1.1", "10.201.2.1"}));
  EXPECT_EQ(t->nics_of("c"), (std::vector<std::string>{"10.201.3.3"}));
  EXPECT_EQ(t->links().checksum, LinkChecksum::additive);
  EXPECT_FALSE(t->links().reliable);

  const auto& fe = t->at(kFe);
  EXPECT_EQ(t->link_between(t->at(kFe + 1), fe), LinkKind::striped) << "two NICs at both ends";
  EXPECT_EQ(t->link_between(t->at(kFe + 2), fe), LinkKind::plain) << "the edge says plain";
  EXPECT_EQ(t->link_between(t->at(kFe + 3), fe), LinkKind::plain) << "one NIC at one end";
  EXPECT_EQ(t->link_between(t->at(1), t->at(kFe + 1)), LinkKind::striped);
  // An orphan adopted by another node: no edge between them, the tree's default.
  EXPECT_EQ(t->link_between(t->at(kFe + 2), t->at(kFe + 1)), LinkKind::striped);
}

TEST(LinkTopology, TheDefaultKindAppliesToEveryEdgeWithoutItsOwn) {
  auto t = parse(R"(links: {default: striped}
nodes:
  - {rank: 1000000, role: frontend}
  - {rank: 0, role: backend}
  - {rank: 1, role: backend}
edges:
  - {parent: 1000000, children: [0]}
  - {parent: 1000000, children: [1], link: auto}
)");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->link_between(t->at(0), t->root()), LinkKind::striped) << "striped even over one NIC";
  EXPECT_EQ(t->link_between(t->at(1), t->root()), LinkKind::plain) << "auto: localhost has one NIC";
  EXPECT_EQ(t->nics_of("localhost"), (std::vector<std::string>{"127.0.0.1"}));
}

TEST(LinkTopology, YamlRoundTripKeepsNicsLinksAndEdgeChoices) {
  auto t = parse(kNics);
  ASSERT_TRUE(t) << t.error();
  std::string yaml = canopy::to_yaml(*t);
  auto back = parse(yaml);
  ASSERT_TRUE(back) << back.error() << "\n" << yaml;
  EXPECT_EQ(canopy::to_yaml(*back), yaml);
  EXPECT_EQ(back->links(), t->links());
  EXPECT_EQ(back->at(kFe + 2).link, LinkKind::plain);
  EXPECT_EQ(back->at(0).link, LinkKind::striped);
  EXPECT_FALSE(back->at(kFe + 1).link.has_value());
  EXPECT_EQ(back->nics_of("b"), t->nics_of("b"));
}

TEST(LinkTopology, WireRoundTripKeepsNicsLinksAndEdgeChoices) {
  auto t = parse(kNics);
  ASSERT_TRUE(t) << t.error();
  auto settings = t->links();
  settings.corrupt_fraction = 0.25;
  ASSERT_TRUE(t->set_links(settings));
  capnp::MallocMessageBuilder message;
  auto w = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_topology(*t, w);
  auto back = canopy::core::decode_topology(w.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(canopy::to_yaml(*back), canopy::to_yaml(*t));
  EXPECT_EQ(back->links(), settings);
}

TEST(LinkTopology, MrnetFormatRefusesWhatItCannotHold) {
  auto t = parse(kNics);
  ASSERT_TRUE(t) << t.error();
  auto mrnet = canopy::to_mrnet(*t);
  ASSERT_FALSE(mrnet);
  auto edge = parse(R"(nodes:
  - {rank: 1000000, role: frontend}
  - {rank: 0, role: backend}
edges:
  - {parent: 1000000, children: [0], link: striped}
)");
  ASSERT_TRUE(edge) << edge.error();
  auto refused = canopy::to_mrnet(*edge);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(Contains(refused.error(), "no link choices"));
}

TEST(LinkTopology, BadNicsAndLinkSettingsAreNamedWithTheirLine) {
  const std::string nodes = "nodes:\n  - {rank: 1000000, role: frontend, host: a}\n";
  EXPECT_TRUE(Contains(error_of("hosts:\n  - {name: a, nics: [eth0]}\n" + nodes), "t.yaml:2: host 'a': NIC address 'eth0' is not a numeric"));
  EXPECT_TRUE(Contains(error_of("hosts:\n  - {name: a, nics: [10.0.0.1, 10.0.0.1]}\n" + nodes), "listed twice"));
  EXPECT_TRUE(Contains(error_of("hosts:\n  - {name: a, address: 10.0.0.9, nics: [10.0.0.1]}\n" + nodes),
                       "address 10.0.0.9 is not one of its NICs"));
  EXPECT_TRUE(Contains(error_of("hosts:\n  - {name: a, nics: [1.0.0.1, 1.0.0.2, 1.0.0.3, 1.0.0.4, 1.0.0.5, "
                                "1.0.0.6, 1.0.0.7, 1.0.0.8, 1.0.0.9]}\n" + nodes),
                       "9 NICs, at most 8"));
  EXPECT_TRUE(Contains(error_of("hosts:\n  - {name: a, nics: 10.0.0.1}\n" + nodes), "t.yaml:2: 'nics' must be a list"));
  EXPECT_TRUE(Contains(error_of("links: {default: fast}\n" + nodes), "t.yaml:1: unknown link kind 'fast'"));
  EXPECT_TRUE(Contains(error_of("links: {checksum: md5}\n" + nodes), "t.yaml:1: unknown checksum 'md5'"));
  EXPECT_TRUE(Contains(error_of("links: {reliable: maybe}\n" + nodes), "'reliable' must be true or false"));
  EXPECT_TRUE(Contains(error_of("links: {corrupt: 1.5}\n" + nodes), "'corrupt' must be a fraction"));
  EXPECT_TRUE(Contains(error_of("links: {stripes: 2}\n" + nodes), "unknown key 'stripes'"));
  EXPECT_TRUE(Contains(error_of(nodes + "  - {rank: 0, role: backend}\nedges:\n"
                                         "  - {parent: 1000000, children: [0], link: fast}\n"),
                       "t.yaml:5: unknown link kind 'fast'"));
}

TEST(ParentLink, WhatAParentWritesItsChildReads) {
  canopy::LinkSettings settings;
  settings.checksum = LinkChecksum::none;
  settings.reliable = false;
  settings.corrupt_fraction = 0.125;
  auto paths = canopy::transport::paths_between({"10.201.1.2", "10.201.2.2"}, {"10.201.1.1", "10.201.2.1"}, 4711);
  std::string text = canopy::core::encode_parent_link(settings, paths);
  auto link = canopy::core::parent_link_from("10.201.1.1:4711", text.c_str());
  ASSERT_TRUE(link) << link.error();
  EXPECT_EQ(link->address, "10.201.1.1");
  EXPECT_EQ(link->port, 4711);
  ASSERT_EQ(link->paths.size(), 2u);
  EXPECT_EQ(link->paths[1].local_address, "10.201.2.2");
  EXPECT_EQ(link->paths[1].remote_address, "10.201.2.1");
  EXPECT_EQ(link->paths[1].remote_port, 4711);
  EXPECT_EQ(link->striped.checksum, canopy::transport::ChecksumKind::none);
  EXPECT_FALSE(link->striped.reliable);
  EXPECT_EQ(link->striped.corrupt_fraction, 0.125);

  auto plain = canopy::core::parent_link_from("127.0.0.1:9", nullptr);
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_TRUE(plain->paths.empty());
}

TEST(ParentLink, MalformedValuesAreRefusedNamingTheVariable) {
  auto error = [](const char* parent, const char* link) {
    auto r = canopy::core::parent_link_from(parent, link);
    return r ? std::string("(accepted)") : r.error();
  };
  EXPECT_TRUE(Contains(error(nullptr, nullptr), "CANOPY_PARENT='' is not address:port"));
  EXPECT_TRUE(Contains(error("1.2.3.4:99999", nullptr), "has no valid port"));
  EXPECT_TRUE(Contains(error("1.2.3.4:x", nullptr), "has no valid port"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "checksum=crc32c"), "CANOPY_PARENT_LINK='checksum=crc32c': no paths"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "paths=1.2.3.4"), "is not LOCAL>REMOTE"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "paths=a>b colour=red"), "unknown key 'colour'"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "paths=a>b corrupt=2"), "corrupt must be a fraction"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "paths=a>b checksum=md5"), "unknown checksum 'md5'"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "paths=a>b reliable"), "'reliable' is not key=value"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "paths=a>b corrupt=0x0.1p0"), "corrupt must be a fraction"));
  EXPECT_TRUE(Contains(error("1.2.3.4:5", "paths=a>b corrupt=nan"), "corrupt must be a fraction"));
}

// The corrupt fraction goes from parent to child as decimal text, written and read
// without std::to_chars and std::from_chars (topology/decimal.h): exactly, in the
// shortest form, and as std::from_chars would take it.
TEST(Decimal, EveryFractionReadsBackExactlyFromItsShortestText) {
  using canopy::topology::format_double;
  using canopy::topology::parse_double;
  EXPECT_EQ(format_double(0.05), "0.05");
  EXPECT_EQ(format_double(1e-05), "1e-05");
  EXPECT_EQ(format_double(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(format_double(0), "0");
  for (double x : {0.125, 0.1, 1.0 / 3, 0.999999999999, 5e-324, 0.30000000000000004, 2.5e-8}) {
    EXPECT_EQ(parse_double(format_double(x)), x) << format_double(x);
  }
  EXPECT_EQ(parse_double("0.5"), 0.5);
  EXPECT_EQ(parse_double("-1.5e3"), -1500.0);
  EXPECT_EQ(parse_double(".5"), 0.5);
  for (const char* refused : {"", " 0.5", "0.5 ", "+0.5", "0x1p-1", "inf", "nan", "0.5x", "e5", "0,5", "1e"}) {
    EXPECT_FALSE(parse_double(refused)) << '"' << refused << '"';
  }
}

}  // namespace
