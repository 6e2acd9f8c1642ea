// MRNet's topology format (reading, its errors with file:line, writing), format
// detection and the size limit, the k: and g: topgen specs, placement on a host
// list, and back-ends attached to a tree of commnodes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "canopy/topology.h"

using canopy::HostSlots;
using canopy::kFirstInternalRank;
using canopy::Leaves;
using canopy::Rank;
using canopy::Role;
using canopy::Topology;
using canopy::TopologyFormat;

namespace {

constexpr Rank kFe = kFirstInternalRank;

::testing::AssertionResult Contains(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

canopy::Result<Topology> mrnet(std::string_view text, Leaves leaves = Leaves::backends) {
  return canopy::parse_topology_mrnet(text, "t.top", leaves);
}

// The error parsing `text` as t.top gives, or "(parsed)".
std::string error_of(std::string_view text) {
  auto topology = mrnet(text);
  return topology ? "(parsed)" : topology.error();
}

Topology generated(std::string_view spec) {
  auto t = canopy::generate_topology(spec);
  EXPECT_TRUE(t) << spec << ": " << (t ? "" : t.error());
  return t ? *t : *canopy::generate_topology("b:1");
}

std::vector<Rank> ranks_in_order(const Topology& topology) {
  std::vector<Rank> ranks;
  for (const auto& node : topology.nodes()) ranks.push_back(node.rank);
  return ranks;
}

std::size_t count_role(const Topology& topology, Role role) {
  return static_cast<std::size_t>(std::count_if(topology.nodes().begin(), topology.nodes().end(),
                                                [role](const canopy::TopologyNode& n) { return n.role == role; }));
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

// to_mrnet() then parse_topology_mrnet() gives back `topology`.
void expect_mrnet_round_trip(const Topology& topology, Leaves leaves = Leaves::backends) {
  auto text = canopy::to_mrnet(topology);
  ASSERT_TRUE(text) << text.error();
  auto again = canopy::parse_topology_mrnet(*text, "again.top", leaves);
  ASSERT_TRUE(again) << again.error() << "\n" << *text;
  expect_same(topology, *again);
}

// A temporary file holding `text`, removed with the object.
struct TempFile {
  std::string path;
  explicit TempFile(std::string_view text) {
    char name[] = "/tmp/canopy-mrnet-test-XXXXXX";
    int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    path = name;
    EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
  }
  ~TempFile() { unlink(path.c_str()); }
};

// MRNet's own example file (tests/topology_files/local-1x2x4.top): the shape of b:2^2.
constexpr std::string_view kLocal1x2x4 = R"(localhost:0 =>
  localhost:1
  localhost:2 ;

localhost:1 =>
  localhost:3
  localhost:4 ;

localhost:2 =>
  localhost:5
  localhost:6 ;
)";

// A back-end beside commnodes, over two hosts; ranks by the rule of topology.h.
constexpr std::string_view kUneven = R"(# an uneven tree
login:0 => node01:0 node02:5 node01:1 ;   # node02:5 is a back-end at depth 1
node01:0 => node02:0 node02:1 ;
node01:1 =>
  node02:2 ;
)";

}  // namespace

// --- Reading MRNet's format -------------------------------------------------------

TEST(MrnetParse, MrnetsOwnOneByTwoByFourFileIsTheBalancedTree) {
  auto t = mrnet(kLocal1x2x4);
  ASSERT_TRUE(t) << t.error();
  expect_same(*t, generated("b:2^2"));
}

TEST(MrnetParse, RanksAreBackEndsDepthFirstThenCommnodesBreadthFirst) {
  auto t = mrnet(kUneven);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{kFe, kFe + 1, 2, kFe + 2, 0, 1, 3}));
  EXPECT_EQ(t->at(kFe).children, (std::vector<Rank>{kFe + 1, 2, kFe + 2}));
  EXPECT_EQ(t->at(kFe + 1).children, (std::vector<Rank>{0, 1}));
  EXPECT_EQ(t->at(kFe + 2).children, (std::vector<Rank>{3}));
  EXPECT_EQ(t->backends(), (std::vector<Rank>{0, 1, 2, 3}));
  EXPECT_EQ(t->root().role, Role::frontend);
  EXPECT_EQ(t->at(kFe + 1).role, Role::commnode);
  EXPECT_EQ(t->at(2).role, Role::backend);
}

TEST(MrnetParse, HostsComeFromTheNodeNamesAndLinesFromTheirFirstMention) {
  auto t = mrnet(kUneven);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().host, "login");
  EXPECT_EQ(t->at(kFe + 1).host, "node01");
  EXPECT_EQ(t->at(2).host, "node02");
  ASSERT_EQ(t->hosts().size(), 3u);
  EXPECT_EQ(t->hosts()[0].name, "login");
  EXPECT_EQ(t->hosts()[1].name, "node01");
  EXPECT_EQ(t->hosts()[2].name, "node02");
  EXPECT_TRUE(t->hosts()[0].address.empty());
  EXPECT_EQ(t->root().line, 2);
  EXPECT_EQ(t->at(kFe + 2).line, 2);
  EXPECT_EQ(t->at(3).line, 5);
}

TEST(MrnetParse, FrontEndIsTheNodeThatIsNobodysChildWhereverItsStatementIs) {
  auto t = mrnet("a:1 => a:2 a:3 ;\na:0 => a:1 ;\n");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().line, 2);
  EXPECT_EQ(t->root().children, (std::vector<Rank>{kFe + 1}));
  EXPECT_EQ(t->backends(), (std::vector<Rank>{0, 1}));
}

TEST(MrnetParse, ChildrenOfOneParentMayBeSpreadOverSeveralStatements) {
  auto t = mrnet("a:0 => a:1 ;\na:0 => a:2 a:3 ;\n");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().children, (std::vector<Rank>{0, 1, 2}));
}

TEST(MrnetParse, BlanksCommentsAndLineBreaksMayGoBetweenAnyTokens) {
  auto t = mrnet("# header\n\n  a : 0\t=>   # the front-end\n a:1\r\n a:2 # last\n ; # done\n# trailer");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 3u);
  EXPECT_EQ(t->root().line, 3);
  EXPECT_EQ(t->at(1).line, 5);
}

TEST(MrnetParse, HostNamesMayHoldDotsDashesUnderscoresAndDigits) {
  auto t = mrnet("fe.example-1_a:0 => 10.0.0.7:3 node-02:4294967295 ;");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->root().host, "fe.example-1_a");
  EXPECT_EQ(t->at(0).host, "10.0.0.7");
  EXPECT_EQ(t->at(1).host, "node-02");
}

TEST(MrnetParse, ALoneNodeIsAFrontEndWithoutChildren) {
  auto t = mrnet("fe:0 ;\n");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 1u);
  EXPECT_EQ(t->root().rank, kFe);
  EXPECT_TRUE(t->backends().empty());
}

TEST(MrnetParse, LeavesAreCommnodesWhenTheCallerAsks) {
  auto t = mrnet(kLocal1x2x4, Leaves::commnodes);
  ASSERT_TRUE(t) << t.error();
  EXPECT_TRUE(t->backends().empty());
  EXPECT_EQ(count_role(*t, Role::commnode), 6u);
  EXPECT_EQ(ranks_in_order(*t), (std::vector<Rank>{kFe, kFe + 1, kFe + 2, kFe + 3, kFe + 4, kFe + 5, kFe + 6}));
  EXPECT_EQ(t->at(kFe + 2).children, (std::vector<Rank>{kFe + 5, kFe + 6}));
}

// --- Errors in MRNet's format --------------------------------------------------------

TEST(MrnetErrors, EmptyFileOrOnlyCommentsIsAClearError) {
  for (std::string_view text : {"", "   \n\n", "# nothing\n# here\n"}) {
    EXPECT_EQ(error_of(text), "t.top: the topology is empty; it needs at least one statement 'host:0 => host:1 ;'");
  }
}

TEST(MrnetErrors, MissingSemicolonAtTheEndOfTheFileNamesTheStatement) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\na:1 => a:2\n  a:3\n"),
            "t.top:3: missing ';' at the end of the statement of a:1 (line 2)");
  EXPECT_EQ(error_of("a:0"), "t.top:1: missing ';' at the end of the statement of a:0 (line 1)");
  EXPECT_EQ(error_of("a:0 =>"), "t.top:1: missing ';' at the end of the statement of a:0 (line 1)");
}

TEST(MrnetErrors, MissingSemicolonBeforeTheNextStatementIsNamed) {
  EXPECT_EQ(error_of("a:0 => a:1 a:2\na:1 => a:3 ;\n"),
            "t.top:2: missing ';' before a:1 => (the statement of a:0 at line 1 does not end)");
}

TEST(MrnetErrors, MissingArrowIsNamed) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\n\na:1 a:2 a:3 ;\n"),
            "t.top:3: missing '=>' between the parent a:1 and its children (found a:2)");
}

TEST(MrnetErrors, ArrowWithoutChildrenIsNamed) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\na:1 =>\n;\n"), "t.top:3: a:1 => has no children; list them before ';'");
  EXPECT_TRUE(Contains(error_of("a:0 => => a:1 ;"), "t.top:1: a:0 => has no children before the second '=>'"));
}

TEST(MrnetErrors, BadInstanceNumbersAreNamedWithTheirLine) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"a:0 => b:x ;", "t.top:1: bad instance number 'x' in 'b:x': not a whole number"},
      {"a:0 =>\n b:01 ;", "t.top:2: bad instance number '01' in 'b:01': not a whole number without leading zeros"},
      {"a:0 => b:4294967296 ;", "t.top:1: bad instance number '4294967296' in 'b:4294967296': too large"},
      {"a:0 => b:1.5 ;", "t.top:1: bad instance number '1.5'"},
      {"a:0 =>\n\n b: ;", "t.top:3: missing instance number after 'b:'"},
      {"a:0 => b:-1 ;", "t.top:1: bad instance number '-1' in 'b:-1'"},
      {"a:0 => b ;", "t.top:1: node 'b' has no instance number; a node is host:N, e.g. b:0"},
  };
  for (auto [text, error] : cases) EXPECT_TRUE(Contains(error_of(text), error)) << text;
}

TEST(MrnetErrors, UnexpectedCharactersAndNumericHostNamesAreNamed) {
  EXPECT_EQ(error_of("a:0 => b:1 % ;"), "t.top:1: unexpected character '%' (expected a node host:N, '=>' or ';')");
  EXPECT_EQ(error_of("a:0 =\n"), "t.top:1: unexpected character '=' (expected a node host:N, '=>' or ';')");
  EXPECT_TRUE(Contains(error_of("a:0 => \x01 ;"), "t.top:1: unexpected byte 0x01"));
  EXPECT_TRUE(Contains(error_of("a:0 =>\n 12:0 ;"), "t.top:2: host name '12' is a number"));
}

TEST(MrnetErrors, StatementsMustBeginWithANode) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\n;\n"), "t.top:2: empty statement: ';' with no node before it");
  EXPECT_EQ(error_of("=> a:1 ;"), "t.top:1: a statement must begin with a node host:N, not '=>'");
}

TEST(MrnetErrors, DuplicateChildUnderOneParentIsNamedWithBothLines) {
  EXPECT_EQ(error_of("a:0 => a:1 a:1 ;"), "t.top:1: duplicate node: a:1 is listed twice as a child of a:0 (lines 1 and 1)");
  EXPECT_EQ(error_of("a:0 => a:1 ;\na:0 => a:1 ;"),
            "t.top:2: duplicate node: a:1 is listed twice as a child of a:0 (lines 1 and 2)");
}

TEST(MrnetErrors, NodeWithTwoParentsNamesBothStatements) {
  EXPECT_EQ(error_of("a:0 => a:1 a:2 ;\na:1 => b:0 ;\n\na:2 => b:0 ;\n"),
            "t.top:4: node b:0 has two parents (a:1 at line 2 and a:2 at line 4)");
}

TEST(MrnetErrors, SameHostDifferentInstancesAreDifferentNodes) {
  EXPECT_EQ(error_of("a:0 => a:1 a:2 ;"), "(parsed)");
}

TEST(MrnetErrors, NodeThatIsItsOwnChildIsACycle) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\na:1 => a:1 ;"), "t.top:2: cycle: a:1 is its own child");
}

TEST(MrnetErrors, CycleBesideTheTreeIsNamedParentFirst) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\na:2 => a:3 ;\na:3 => a:2 ;\n"),
            "t.top:2: a:2 is not reachable from the front-end a:0; it is on or below the cycle a:2 -> a:3 -> a:2");
}

TEST(MrnetErrors, NodeBelowACycleIsNotReachable) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\nb:0 => b:1 ;\nb:1 => b:0 b:2 ;\n"),
            "t.top:2: b:0 is not reachable from the front-end a:0; it is on or below the cycle b:0 -> b:1 -> b:0");
}

TEST(MrnetErrors, NoFrontEndWhenEveryNodeIsAChild) {
  EXPECT_EQ(error_of("a:1 => a:2 ;\na:2 => a:1 ;\n"),
            "t.top:1: no front-end: every node is the child of another; cycle: a:1 -> a:2 -> a:1");
}

TEST(MrnetErrors, SeveralFrontEndsAreNamedWithTheirLines) {
  EXPECT_EQ(error_of("a:0 => a:1 ;\n\nb:0 => b:1 ;\n"),
            "t.top:3: several front-ends: a:0 (line 1) and b:0 (line 3) are nobody's child; a tree has exactly one "
            "root, the front-end");
  EXPECT_TRUE(Contains(error_of("a:0 => a:1 ;\nz:9 ;\n"), "t.top:2: several front-ends: a:0 (line 1) and z:9"));
}

TEST(MrnetErrors, GarbageNeverCrashesAndNamesTheSource) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes += static_cast<char>(i);
  for (std::string_view text : {std::string_view(bytes), std::string_view("=>=>;;::"), std::string_view("a:0=>a:1;b"),
                                std::string_view("a:0 => a:1 ; a:1 => a:2 ; a:2 => a:0 ;"), std::string_view(":::")}) {
    auto t = mrnet(text);
    ASSERT_FALSE(t) << text;
    EXPECT_EQ(t.error().rfind("t.top", 0), 0u) << t.error();
  }
}

// --- Format detection and the size limit ------------------------------------------

TEST(MrnetDetect, ArrowOutsideCommentsMeansMrnet) {
  EXPECT_EQ(canopy::detect_topology_format(kLocal1x2x4), TopologyFormat::mrnet);
  EXPECT_EQ(canopy::detect_topology_format("# MRNet\n\n  fe:0=>be:0;"), TopologyFormat::mrnet);
}

TEST(MrnetDetect, LeadingNodeMeansMrnetEvenWithoutArrow) {
  EXPECT_EQ(canopy::detect_topology_format("# just the front-end\nfe:0 ;\n"), TopologyFormat::mrnet);
  EXPECT_EQ(canopy::detect_topology_format("a:0 a:1 ;"), TopologyFormat::mrnet);
}

TEST(MrnetDetect, YamlIsTheDefault) {
  EXPECT_EQ(canopy::detect_topology_format("nodes:\n  - {rank: 1000000, role: frontend}\n"), TopologyFormat::yaml);
  EXPECT_EQ(canopy::detect_topology_format("# a => b in a comment\nnodes: []\n"), TopologyFormat::yaml);
  EXPECT_EQ(canopy::detect_topology_format("{nodes: [{rank: 0, role: frontend}]}"), TopologyFormat::yaml);
  EXPECT_EQ(canopy::detect_topology_format("nodes: 0"), TopologyFormat::yaml);
  EXPECT_EQ(canopy::detect_topology_format(""), TopologyFormat::yaml);
  EXPECT_EQ(canopy::detect_topology_format(canopy::to_yaml(generated("b:2^2"))), TopologyFormat::yaml);
}

TEST(MrnetDetect, ParseTopologyReadsEitherFormat) {
  auto from_mrnet = canopy::parse_topology(kLocal1x2x4, "x");
  ASSERT_TRUE(from_mrnet) << from_mrnet.error();
  auto from_yaml = canopy::parse_topology(canopy::to_yaml(generated("b:2^2")), "y");
  ASSERT_TRUE(from_yaml) << from_yaml.error();
  expect_same(*from_mrnet, *from_yaml);
  auto commnodes = canopy::parse_topology(kLocal1x2x4, "x", Leaves::commnodes);
  ASSERT_TRUE(commnodes) << commnodes.error();
  EXPECT_TRUE(commnodes->backends().empty());
}

TEST(MrnetDetect, LoadTopologyReadsMrnetFilesAndNamesThemInErrors) {
  TempFile good(kUneven);
  auto t = canopy::load_topology(good.path);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->backends().size(), 4u);
  TempFile bad("a:0 => a:1 ;\na:1 => a:2\n");
  auto e = canopy::load_topology(bad.path);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error(), bad.path + ":2: missing ';' at the end of the statement of a:1 (line 2)");
}

TEST(MrnetLimits, TextOverTheLimitIsRefusedByEveryReader) {
  std::string huge(canopy::kMaxTopologyBytes + 1, ' ');
  for (auto t : {canopy::parse_topology_mrnet(huge, "big"), canopy::parse_topology_yaml(huge, "big"),
                 canopy::parse_topology(huge, "big")}) {
    ASSERT_FALSE(t);
    EXPECT_TRUE(Contains(t.error(), "big: the topology is larger than 64 MiB, the limit")) << t.error();
  }
}

TEST(MrnetLimits, FileOverTheLimitIsRefusedBeforeReading) {
  TempFile sparse("");
  ASSERT_EQ(truncate(sparse.path.c_str(), static_cast<off_t>(canopy::kMaxTopologyBytes) + 1), 0);
  auto t = canopy::load_topology(sparse.path);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), sparse.path + ": the topology is larger than 64 MiB, the limit (at least 67108865 bytes; a "
                                     "tree of a million processes takes about 40 MiB): is this the right file?");
}

TEST(MrnetLimits, EndlessDeviceIsCutAtTheLimit) {
  auto t = canopy::load_topology("/dev/zero");
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), "/dev/zero: the topology is larger than 64 MiB")) << t.error();
}

TEST(MrnetLimits, TextOfExactlyTheLimitIsNotRefusedForItsSize) {
  std::string text = "%" + std::string(canopy::kMaxTopologyBytes - 1, ' ');
  EXPECT_EQ(error_of(text), "t.top:1: unexpected character '%' (expected a node host:N, '=>' or ';')");
}

TEST(MrnetLimits, YamlWithTooManyItemsIsRefusedBeforeParsing) {
  std::string flow = "nodes: [" + std::string(canopy::kMaxYamlItems, ',') + "]";
  auto t = canopy::parse_topology_yaml(flow, "f.yaml");
  ASSERT_FALSE(t);
  EXPECT_TRUE(Contains(t.error(), "f.yaml: the YAML topology has 2000001 items (',', '[', '{' and line breaks), over "
                                  "the limit of 2000000"))
      << t.error();
  EXPECT_TRUE(Contains(t.error(), "in MRNet's format (canopy topgen --format mrnet)"));
}

TEST(MrnetLimits, MrnetFormatHasNoItemLimit) {
  std::string text = "fe:0 =>";
  for (int i = 0; i < 1000; ++i) text += "\n\n\n b:" + std::to_string(i);
  text += std::string(canopy::kMaxYamlItems, '\n') + ";";
  auto t = mrnet(text);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->backends().size(), 1000u);
}

// --- Writing MRNet's format ---------------------------------------------------------

TEST(MrnetWrite, WritesOneStatementPerParentWithInstancesPerHost) {
  auto t = canopy::generate_topology("b:2^2", std::vector<HostSlots>{{"fe", 1}, {"n1", 3}, {"n2", 3}});
  ASSERT_TRUE(t) << t.error();
  auto text = canopy::to_mrnet(*t);
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(*text,
            "# Canopy topology in MRNet's format: 7 processes, 4 back-ends\n"
            "fe:0 => n1:0 n2:0 ;\n"
            "n1:0 => n1:1 n1:2 ;\n"
            "n2:0 => n2:1 n2:2 ;\n");
}

TEST(MrnetWrite, LongChildListsContinueOnFurtherLines) {
  auto text = canopy::to_mrnet(generated("b:20"));
  ASSERT_TRUE(text) << text.error();
  EXPECT_TRUE(Contains(*text, "localhost:8\n    localhost:9")) << *text;
  expect_mrnet_round_trip(generated("b:20"));
}

TEST(MrnetWrite, LoneFrontEndIsWrittenAsALoneNode) {
  auto t = mrnet("fe:0 ;");
  ASSERT_TRUE(t) << t.error();
  EXPECT_TRUE(Contains(*canopy::to_mrnet(*t), "\nfe:0 ;\n"));
  expect_mrnet_round_trip(*t);
}

TEST(MrnetRoundTrip, YamlToMrnetToTopologyAndBackToTheSameYaml) {
  for (std::string_view spec : {"b:1", "b:4", "b:2^3", "b:3x1x2", "k:2@16", "k:3@20", "g:3:2,0,1:1x4,0"}) {
    Topology original = generated(spec);
    std::string yaml = canopy::to_yaml(original);
    auto from_yaml = canopy::parse_topology_yaml(yaml, "a.yaml");
    ASSERT_TRUE(from_yaml) << from_yaml.error();
    auto text = canopy::to_mrnet(*from_yaml);
    ASSERT_TRUE(text) << spec << ": " << text.error();
    auto from_mrnet = canopy::parse_topology_mrnet(*text, "b.top");
    ASSERT_TRUE(from_mrnet) << from_mrnet.error() << "\n" << *text;
    expect_same(original, *from_mrnet);
    EXPECT_EQ(canopy::to_yaml(*from_mrnet), yaml) << spec;
  }
}

TEST(MrnetRoundTrip, MrnetFilesWrittenAndReadGiveTheSameTopology) {
  auto t = mrnet(kUneven);
  ASSERT_TRUE(t) << t.error();
  expect_mrnet_round_trip(*t);
}

TEST(MrnetRoundTrip, TreesOnSeveralHostsKeepTheirHosts) {
  auto t = canopy::generate_topology("k:2@16", std::vector<HostSlots>{{"a", 5}, {"b", 5}, {"c", 6}});
  ASSERT_TRUE(t) << t.error();
  expect_mrnet_round_trip(*t);
}

TEST(MrnetRoundTrip, CommnodeLeavesReadBackWhenAskedFor) {
  auto t = canopy::generate_topology("b:2x3", {}, Leaves::commnodes);
  ASSERT_TRUE(t) << t.error();
  EXPECT_TRUE(Contains(*canopy::to_mrnet(*t), "the leaves are commnodes"));
  expect_mrnet_round_trip(*t, Leaves::commnodes);
}

TEST(MrnetRoundTrip, AttachedBackEndsRoundTrip) {
  auto commnodes = canopy::generate_topology("b:2x3", {}, Leaves::commnodes);
  ASSERT_TRUE(commnodes) << commnodes.error();
  auto t = canopy::attach_backends(*commnodes, 14);
  ASSERT_TRUE(t) << t.error();
  expect_mrnet_round_trip(*t);
}

TEST(MrnetWrite, RefusesWhatTheFormatCannotHold) {
  auto yaml = [](std::string_view text) {
    auto t = canopy::parse_topology_yaml(text, "w.yaml");
    EXPECT_TRUE(t) << t.error();
    return *t;
  };
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"nodes: [{rank: 1000000, role: frontend}, {rank: 0, role: backend, port: 7000}]\n"
       "edges: [{parent: 1000000, children: [0]}]",
       "MRNet's format has no ports (node 0 has port 7000)"},
      {"hosts: [{name: h, address: 10.0.0.1}]\n"
       "nodes: [{rank: 1000000, role: frontend, host: h}, {rank: 0, role: backend}]\n"
       "edges: [{parent: 1000000, children: [0]}]",
       "MRNet's format has no host addresses (host 'h' has 10.0.0.1)"},
      {"nodes: [{rank: 1000000, role: frontend}, {rank: 5, role: backend}]\n"
       "edges: [{parent: 1000000, children: [5]}]",
       "node 5 would read back as 0"},
      {"nodes: [{rank: 1000000, role: frontend}, {rank: 0, role: backend}, {rank: 1, role: backend}]\n"
       "edges: [{parent: 1000000, children: [1, 0]}]",
       "node 1 would read back as 0"},
      {"nodes: [{rank: 1000000, role: frontend}, {rank: 1000001, role: commnode}, {rank: 0, role: backend}]\n"
       "edges: [{parent: 1000000, children: [1000001, 0]}]",
       "cannot hold both back-ends and commnodes without children (such as commnode 1000001)"},
      {"nodes: [{rank: 1000000, role: frontend, host: \"my host\"}, {rank: 0, role: backend}]\n"
       "edges: [{parent: 1000000, children: [0]}]",
       "host name 'my host' of node 1000000 cannot be written in MRNet's format"},
  };
  for (auto [text, problem] : cases) {
    auto written = canopy::to_mrnet(yaml(text));
    ASSERT_FALSE(written) << text;
    EXPECT_TRUE(Contains(written.error(), problem));
  }
}

// --- k: and g: specs ---------------------------------------------------------------

TEST(GenerateKnomial, BinomialTreeOfEightIsTheClassicShape) {
  Topology t = generated("k:2@8");
  EXPECT_EQ(t.size(), 8u);
  EXPECT_EQ(t.backends().size(), 4u);
  EXPECT_EQ(t.depth(), 3u);
  // Rounds: fe gets 1; fe and it get one each; all four get one each.
  EXPECT_EQ(t.root().children.size(), 3u);
  std::vector<std::size_t> fanouts;
  for (const auto& n : t.nodes()) fanouts.push_back(n.children.size());
  EXPECT_EQ(fanouts, (std::vector<std::size_t>{3, 2, 1, 0, 1, 0, 0, 0}));
}

TEST(GenerateKnomial, NodeAndLeafCountsFollowMrnetsFormula) {
  // N counts the front-end; a full k-nomial tree has (N/K)*(K-1) leaves.
  const std::tuple<std::string_view, std::size_t, std::size_t, std::size_t> cases[] = {
      {"k:2@128", 128, 64, 7}, {"k:3@27", 27, 18, 3}, {"k:4@16", 16, 12, 2}, {"k:2@2", 2, 1, 1}};
  for (auto [spec, nodes, leaves, depth] : cases) {
    Topology t = generated(spec);
    EXPECT_EQ(t.size(), nodes) << spec;
    EXPECT_EQ(t.backends().size(), leaves) << spec;
    EXPECT_EQ(t.depth(), depth) << spec;
  }
}

TEST(GenerateKnomial, PartialLastRoundStopsAtNNodes) {
  // k:4@10: round 1 gives the front-end 3 children; round 2 gives it 3 more and
  // its first child the last 3.
  Topology t = generated("k:4@10");
  EXPECT_EQ(t.size(), 10u);
  EXPECT_EQ(t.root().children.size(), 6u);
  EXPECT_EQ(count_role(t, Role::commnode), 1u);
  EXPECT_EQ(t.backends().size(), 8u);
  EXPECT_EQ(t.depth(), 2u);
}

TEST(GenerateKnomial, BadSpecsAreExplained) {
  const std::pair<const char*, const char*> cases[] = {
      {"k:1@8", "k-factor must be at least 2"},       {"k:2@1", "number of processes must be at least 2"},
      {"k:2", "a k-nomial spec is K@N"},              {"k:2@", "missing number of processes"},
      {"k:@8", "missing k-factor"},                   {"k:x@8", "k-factor 'x' is not a whole number"},
      {"k:2@8@2", "'8@2' is not a whole number"},     {"k:2@99999999999", "is too large"},
  };
  for (auto [spec, problem] : cases) {
    auto t = canopy::generate_topology(spec);
    ASSERT_FALSE(t) << spec;
    EXPECT_TRUE(Contains(t.error(), std::string("bad topology spec '") + spec + "'"));
    EXPECT_TRUE(Contains(t.error(), problem));
  }
  EXPECT_TRUE(Contains(canopy::generate_topology("k:2@2000000").error(), "more than 1100000 processes"));
}

TEST(GenerateGeneric, ChildCountsPerParentGiveEachSubtree) {
  Topology t = generated("g:2:8,4");  // MRNet's example
  EXPECT_EQ(t.size(), 15u);
  EXPECT_EQ(t.depth(), 2u);
  EXPECT_EQ(t.root().children.size(), 2u);
  EXPECT_EQ(t.at(kFe + 1).children.size(), 8u);
  EXPECT_EQ(t.at(kFe + 2).children.size(), 4u);
  EXPECT_EQ(t.backends_below(kFe + 2), (std::vector<Rank>{8, 9, 10, 11}));
}

TEST(GenerateGeneric, RepeatShorthandGivesSeveralParentsTheSameCount) {
  Topology t = generated("g:2:2x6");  // MRNet's example
  EXPECT_EQ(t.size(), 15u);
  EXPECT_EQ(t.backends().size(), 12u);
  expect_same(t, generated("b:2x6"));
  expect_same(generated("g:3:1x2,2x1:4x3"), generated("g:3:2,1,1:3,3,3,3"));
}

TEST(GenerateGeneric, NodesWithoutACountAreBackEndsNumberedDepthFirst) {
  // The front-end's second child gets no count: a back-end at depth 1, after the
  // three below the first child.
  Topology t = generated("g:2:3");
  EXPECT_EQ(ranks_in_order(t), (std::vector<Rank>{kFe, kFe + 1, 3, 0, 1, 2}));
  expect_same(t, generated("g:2:3,0"));
}

TEST(GenerateGeneric, ChainAndUnevenDepths) {
  Topology chain = generated("g:1:1:1");
  EXPECT_EQ(chain.size(), 4u);
  EXPECT_EQ(chain.depth(), 3u);
  Topology uneven = generated("g:3:2,0,1:1x4,0");
  EXPECT_EQ(uneven.size(), 1u + 3 + 3 + 4);
  EXPECT_EQ(uneven.depth(), 3u);
  EXPECT_EQ(uneven.backends().size(), 1u + 1 + 1 + 4);  // middle child, 2nd grandchild, 3rd grandchild, 4 at depth 3
}

TEST(GenerateGeneric, BadSpecsAreExplained) {
  const std::pair<const char*, const char*> cases[] = {
      {"g:2:1,1,1", "level 2 gives child counts for 3 nodes or more, but the level above it has 2"},
      {"g:2,3", "the first level (the front-end's) gives child counts for 2 nodes"},
      {"g:2x3", "the first level (the front-end's) gives child counts for 2 nodes"},
      {"g:0", "the front-end needs at least one child"},
      {"g:", "missing child count"},
      {"g:2::1", "missing child count"},
      {"g:2:,1", "missing child count"},
      {"g:2:x3", "missing repeat count K of KxN"},
      {"g:2:2x", "missing child count"},
      {"g:2:0x3", "repeat count K of KxN must be at least 1"},
      {"g:a", "child count 'a' is not a whole number"},
      {"g:2:1 ,1", "child count '1 ' is not a whole number"},
      {"g:1:4294967296", "is too large"},
  };
  for (auto [spec, problem] : cases) {
    auto t = canopy::generate_topology(spec);
    ASSERT_FALSE(t) << spec;
    EXPECT_TRUE(Contains(t.error(), std::string("bad topology spec '") + spec + "'"));
    EXPECT_TRUE(Contains(t.error(), problem));
  }
}

TEST(GenerateGeneric, AbsurdSizesAreRefused) {
  for (const char* spec : {"g:4294967295", "g:1000:1000x1100", "g:1:4294967295", "g:2:2x4294967295"}) {
    auto t = canopy::generate_topology(spec);
    ASSERT_FALSE(t) << spec;
    EXPECT_TRUE(Contains(t.error(), "more than 1100000 processes")) << t.error();
  }
}

// --- Host lists and placement ----------------------------------------------------------

TEST(GenerateHosts, HostListEntriesSlotsDefaultToOneAndRepeatsAdd) {
  auto hosts = canopy::parse_host_list("a:4, b\n# a comment\nc:2 a:1\t d.example.org", "hosts.txt");
  ASSERT_TRUE(hosts) << hosts.error();
  ASSERT_EQ(hosts->size(), 4u);
  EXPECT_EQ((*hosts)[0].name, "a");
  EXPECT_EQ((*hosts)[0].slots, 5u);
  EXPECT_EQ((*hosts)[1].name, "b");
  EXPECT_EQ((*hosts)[1].slots, 1u);
  EXPECT_EQ((*hosts)[2].slots, 2u);
  EXPECT_EQ((*hosts)[3].name, "d.example.org");
}

TEST(GenerateHosts, BadHostListsAreExplained) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"a:0", "--hosts: bad slot count '0' in 'a:0': a whole number from 1 to 1100000"},
      {"a:x", "--hosts: bad slot count 'x' in 'a:x'"},
      {"a:", "--hosts: bad slot count '' in 'a:'"},
      {"a:2:3", "--hosts: bad slot count '2:3'"},
      {":3", "--hosts: bad host ':3'"},
      {"bad/host", "--hosts: bad host 'bad/host'"},
      {"", "--hosts: the host list is empty"},
      {" , # nothing", "--hosts: the host list is empty"},
  };
  for (auto [text, problem] : cases) {
    auto hosts = canopy::parse_host_list(text, "--hosts");
    ASSERT_FALSE(hosts) << text;
    EXPECT_TRUE(Contains(hosts.error(), problem));
  }
  auto file = canopy::parse_host_list("a:1\nb:2\n\nc:-1\n", "hosts.txt");
  ASSERT_FALSE(file);
  EXPECT_TRUE(Contains(file.error(), "hosts.txt:4: bad slot count '-1' in 'c:-1'"));
}

TEST(GenerateHosts, TreesSpanHostsSlotBySlot) {
  auto hosts = canopy::parse_host_list("h1:2,h2:2,h3:1,h4:8", "--hosts");
  ASSERT_TRUE(hosts) << hosts.error();
  auto t = canopy::generate_topology("b:4", *hosts);
  ASSERT_TRUE(t) << t.error();
  std::vector<std::string> placed;
  for (const auto& n : t->nodes()) placed.push_back(n.host);
  EXPECT_EQ(placed, (std::vector<std::string>{"h1", "h1", "h2", "h2", "h3"}));
  EXPECT_EQ(t->hosts().size(), 3u);  // h4 was not needed
}

TEST(GenerateHosts, SingleSlotHostsGetOneProcessEach) {
  auto hosts = canopy::parse_host_list("n0:1 n1:1 n2:1 n3:1 n4:1 n5:1 n6:1 n7:1", "f");
  ASSERT_TRUE(hosts) << hosts.error();
  auto t = canopy::generate_topology("k:2@8", *hosts);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->hosts().size(), 8u);
}

TEST(GenerateHosts, TooFewSlotsIsAnErrorNamingTheCounts) {
  auto t = canopy::generate_topology("b:2^2", std::vector<HostSlots>{{"a", 3}, {"b", 3}});
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error(), "topology spec 'b:2^2' gives 7 processes but the hosts have 6 slots (a:3,b:3); add hosts or "
                       "slots (host:slots)");
}

TEST(GenerateHosts, EmptyListPutsEverythingOnLocalhost) {
  auto t = canopy::generate_topology("g:2:2,2", std::vector<HostSlots>{});
  ASSERT_TRUE(t) << t.error();
  for (const auto& n : t->nodes()) EXPECT_EQ(n.host, "localhost");
}

TEST(GenerateHosts, EmptyNamesInAGivenListAreRefused) {
  EXPECT_TRUE(Contains(canopy::generate_topology("b:2", std::vector<HostSlots>{{"", 5}}).error(), "empty name"));
}

// --- attach_backends ---------------------------------------------------------------

TEST(GenerateAttach, BackEndsGoToLeavesInContiguousBlocks) {
  auto commnodes = canopy::generate_topology("b:2x4", {}, Leaves::commnodes);
  ASSERT_TRUE(commnodes) << commnodes.error();
  ASSERT_TRUE(commnodes->backends().empty());
  auto t = canopy::attach_backends(*commnodes, 20);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->size(), 1u + 2 + 8 + 20);
  std::vector<Rank> leaves;  // the leaf commnodes, left to right
  for (Rank r = kFe + 3; r <= kFe + 10; ++r) leaves.push_back(r);
  for (Rank r = 0; r < 20; ++r) EXPECT_EQ(*t->at(r).parent, leaves[r * leaves.size() / 20]) << r;
  EXPECT_EQ(t->at(kFe + 3).children, (std::vector<Rank>{0, 1, 2}));
  EXPECT_EQ(t->at(kFe + 4).children, (std::vector<Rank>{3, 4}));
  EXPECT_EQ(t->at(kFe + 10).children, (std::vector<Rank>{18, 19}));
}

TEST(GenerateAttach, FewerBackEndsThanLeavesLeaveSomeLeavesEmpty) {
  auto commnodes = canopy::generate_topology("b:8", {}, Leaves::commnodes);
  ASSERT_TRUE(commnodes) << commnodes.error();
  auto t = canopy::attach_backends(*commnodes, 3);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(*t->at(0).parent, kFe + 1);
  EXPECT_EQ(*t->at(1).parent, kFe + 3);
  EXPECT_EQ(*t->at(2).parent, kFe + 6);
}

TEST(GenerateAttach, LeavesAreTakenDepthFirstAndBackEndsRunOnTheirHosts) {
  auto commnodes = mrnet("fe:0 => a:0 b:0 ;\na:0 => a:1 a:2 ;\n", Leaves::commnodes);
  ASSERT_TRUE(commnodes) << commnodes.error();
  // Leaves depth first: a:1, a:2 (below a:0), then b:0.
  auto t = canopy::attach_backends(*commnodes, 3);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->at(0).host, "a");
  EXPECT_EQ(t->at(1).host, "a");
  EXPECT_EQ(t->at(2).host, "b");
  EXPECT_EQ(*t->at(2).parent, kFe + 2);
}

TEST(GenerateAttach, YamlCommnodeTreeKeepsItsRanksPortsAndAddresses) {
  auto commnodes = canopy::parse_topology_yaml(R"(hosts: [{name: n1, address: 10.0.0.1}]
nodes:
  - {rank: 1000000, role: frontend}
  - {rank: 77, role: commnode, host: n1, port: 7001}
edges: [{parent: 1000000, children: [77]}]
)", "c.yaml");
  ASSERT_TRUE(commnodes) << commnodes.error();
  auto t = canopy::attach_backends(*commnodes, 4);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->at(77).port, 7001);
  EXPECT_EQ(t->at(77).children, (std::vector<Rank>{0, 1, 2, 3}));
  EXPECT_EQ(t->address_of(t->at(3).host), "10.0.0.1");
  auto clash = canopy::attach_backends(*commnodes, 78);
  ASSERT_FALSE(clash);
  EXPECT_TRUE(Contains(clash.error(), "the commnode 77 has a rank in 0..77, the back-ends' ranks"));
}

TEST(GenerateAttach, RefusesZeroTreesWithBackEndsAndTreesWithoutLeafCommnodes) {
  auto commnodes = canopy::generate_topology("b:2", {}, Leaves::commnodes);
  ASSERT_TRUE(commnodes) << commnodes.error();
  EXPECT_TRUE(Contains(canopy::attach_backends(*commnodes, 0).error(), "must be at least 1"));
  EXPECT_TRUE(Contains(canopy::attach_backends(*commnodes, kFirstInternalRank + 1).error(), "is more than 1000000"));
  EXPECT_TRUE(Contains(canopy::attach_backends(generated("b:2"), 4).error(), "the tree already has 2 back-ends"));
  auto lone = mrnet("fe:0 ;");
  ASSERT_TRUE(lone) << lone.error();
  EXPECT_TRUE(Contains(canopy::attach_backends(*lone, 4).error(), "no commnode without children"));
}
