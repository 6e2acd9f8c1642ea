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

TEST(TopologyWire, ATreeGoesInRunsAndComesBackTheSame) {
  auto t = generate_topology("b:16^2");
  ASSERT_TRUE(t) << t.error();
  ASSERT_TRUE(t->set_port(kFe + 1, 40001));
  ASSERT_TRUE(t->set_port(kFe + 5, 40005));
  Encoded e;
  core::encode_topology(*t, e.topology);
  EXPECT_TRUE(e.topology.hasCompact());
  EXPECT_EQ(e.topology.getNodes().size(), 0u);
  EXPECT_EQ(e.topology.getCompact().getHostRuns().size(), 0u) << "one host: no runs";
  // As a list of nodes it took about 69 bytes a node, in columns about 12 (issue 47);
  // in runs, the ports known (2 bytes a node) and a few words per level.
  EXPECT_LT(e.bytes(), 4 * t->size()) << e.bytes() << " bytes for " << t->size() << " nodes";
  auto back = core::decode_topology(e.topology.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(to_yaml(*back), to_yaml(*t));
  EXPECT_EQ(back->at(kFe + 5).port, 40005);
  EXPECT_EQ(back->at(kFe + 2).port, 0);
}

// The range of ports every process listens in (`ports:`, canopy run --ports, issue
// 49) goes with the topology, in YAML and on the wire, and to every part of it.
TEST(TopologyWire, ThePortRangeGoesWithTheTopology) {
  auto t = parse_topology_yaml("ports: 41000-41099\nnodes:\n  - {rank: 1000000, role: frontend, host: localhost}\n"
                               "  - {rank: 1000001, role: commnode, host: localhost}\n"
                               "  - {rank: 0, role: backend, host: localhost}\n"
                               "edges:\n  - {parent: 1000000, children: [1000001]}\n"
                               "  - {parent: 1000001, children: [0]}\n",
                               "t.yaml");
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->ports(), (PortRange{41000, 41099}));
  EXPECT_NE(to_yaml(*t).find("ports: 41000-41099\n"), std::string::npos) << to_yaml(*t);
  Encoded e;
  core::encode_topology(t->part(kFe + 1), e.topology);
  auto back = core::decode_topology(e.topology.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->ports(), (PortRange{41000, 41099}));
  e.topology.setPortsFirst(500);
  e.topology.setPortsLast(400);
  auto empty = core::decode_topology(e.topology.asReader());
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error(), "topology from parent: the range of ports 500-400 is empty");

  for (auto [text, problem] : std::vector<std::pair<std::string, std::string>>{
           {"ports: 5-3", "t.yaml:1: 'ports': bad port range '5-3': the first port is above the last"},
           {"ports: 0-3", "bad port range '0-3': give LO-HI, two ports from 1 to 65535"},
           {"ports: 70000", "bad port range '70000'"},
           {"ports: [1, 2]", "'ports' is a range LO-HI"}}) {
    auto bad = parse_topology_yaml(text + "\nnodes:\n  - {rank: 1000000, role: frontend, host: localhost}\n", "t.yaml");
    ASSERT_FALSE(bad) << text;
    EXPECT_NE(bad.error().find(problem), std::string::npos) << bad.error();
  }
  auto one = parse_port_range("41000", "--ports");
  ASSERT_TRUE(one) << one.error();
  EXPECT_EQ(one->size(), 1u);
}

// Only the known ports travel, in runs (protocol version 18): a back-end's part of
// b:100^2 holds 201 nodes, and at launch knows two ports. A column of every node's
// port cost 402 bytes there.
TEST(TopologyWire, OnlyTheKnownPortsTravelAndWhatIsNotRunsOfThemIsRefused) {
  auto t = generate_topology("b:100^2");
  ASSERT_TRUE(t) << t.error();
  Topology part = t->backend_part(kFe + 1);
  Encoded none;
  core::encode_topology(part, none.topology);
  ASSERT_TRUE(part.set_port(kFe, 40000));
  ASSERT_TRUE(part.set_port(kFe + 1, 40001));
  ASSERT_TRUE(part.set_port(kFe + 3, 40003));
  Encoded some;
  core::encode_topology(part, some.topology);
  EXPECT_LE(some.bytes(), none.bytes() + 32) << none.bytes() << " bytes without ports";
  auto back = core::decode_topology(some.topology.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->at(kFe).port, 40000);
  EXPECT_EQ(back->at(kFe + 1).port, 40001);
  EXPECT_EQ(back->at(kFe + 2).port, 0);
  EXPECT_EQ(back->at(kFe + 3).port, 40003);
  EXPECT_EQ(back->at(0).port, 0);

  auto refused = [&](std::vector<std::uint32_t> runs, std::size_t values) {
    Encoded e;
    core::encode_topology(part, e.topology);
    auto c = e.topology.getCompact();
    auto r = c.initPortRuns(static_cast<unsigned>(runs.size()));
    for (unsigned i = 0; i < runs.size(); ++i) r.set(i, runs[i]);
    auto v = c.initPortValues(static_cast<unsigned>(values));
    for (unsigned i = 0; i < values; ++i) v.set(i, 40000);
    auto decoded = core::decode_topology(e.topology.asReader());
    return decoded ? std::string("accepted") : decoded.error();
  };
  EXPECT_NE(refused({0}, 1).find("its ports are not runs"), std::string::npos);
  EXPECT_NE(refused({0, 2}, 1).find("names no node"), std::string::npos) << "two nodes, one port";
  EXPECT_NE(refused({5, 1, 5, 1}, 2).find("overlaps another"), std::string::npos);
  EXPECT_NE(refused({static_cast<std::uint32_t>(part.size()), 1}, 1).find("names no node"), std::string::npos);
  EXPECT_NE(refused({0, 0}, 0).find("names no node"), std::string::npos) << "a run of no node";
  EXPECT_NE(refused({0, 1}, 2).find("more ports than its runs hold"), std::string::npos);
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
  EXPECT_GT(e.topology.getCompact().getHostRuns().size(), 0u) << "two hosts: runs";
}

// Runs built by hand: a front-end and one back-end, spoilt one way at a time.
void set_words(capnp::List<std::uint32_t>::Builder list, std::vector<std::uint32_t> words) {
  for (unsigned i = 0; i < words.size(); ++i) list.set(i, words[i]);
}
std::string refusal(const std::function<void(wire::Topology::Compact::Builder)>& spoil) {
  Encoded e;
  auto c = e.topology.initCompact();
  set_words(c.initRankRuns(4), {kFe, 1, 0, 1});
  set_words(c.initParentRuns(2), {0, 1});
  set_words(c.initRoleRuns(4), {static_cast<std::uint32_t>(wire::Role::FRONTEND), 1,
                                static_cast<std::uint32_t>(wire::Role::BACKEND), 1});
  c.initHostNames(1).set(0, "localhost");
  set_words(c.initHostRuns(2), {0, 2});
  spoil(c);
  auto back = core::decode_topology(e.topology.asReader());
  return back ? "" : back.error();
}

TEST(TopologyWire, WhatIsNotATreeInRunsIsRefused) {
  EXPECT_EQ(refusal([](auto) {}), "") << "the runs unspoilt are a tree";
  EXPECT_NE(refusal([](auto c) { c.getParentRuns().set(0, 1); }).find("comes before its parent"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { set_words(c.initRoleRuns(2), {0, 1}); }).find("differ in length"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.getRoleRuns().set(3, 0); }).find("differ in length"), std::string::npos)
      << "a run of no node";
  EXPECT_NE(refusal([](auto c) { set_words(c.initHostRuns(4), {0, 1, 7, 1}); }).find("not in the list of hosts"),
            std::string::npos);
  EXPECT_EQ(refusal([](auto c) { c.initHostRuns(0); }), "") << "no runs: every node on the first host";
  EXPECT_NE(refusal([](auto c) { c.initHostRuns(0); c.initHostNames(0); }).find("no host names"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.getRoleRuns().set(2, 9); }).find("unknown role"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { set_words(c.initFrontierRuns(4), {5, 1, 1, 1}); }).find("names no node"),
            std::string::npos);
  EXPECT_NE(refusal([](auto c) { set_words(c.initFrontierRuns(4), {1, 2, 1, 1}); }).find("names no node"),
            std::string::npos)
      << "a run past the last node";
  EXPECT_NE(refusal([](auto c) { c.initLinks(1)[0].setNode(2); }).find("names no node"), std::string::npos);
  EXPECT_NE(refusal([](auto c) { c.getRankRuns().set(2, kFe); }), "") << "a duplicate rank";
  // A few words that would stand for billions of nodes.
  EXPECT_NE(refusal([](auto c) { set_words(c.initRankRuns(2), {0, 0xffffffff}); }).find("at most"), std::string::npos);
  const auto over = static_cast<std::uint32_t>(core::kMaxTopologyNodes + 1);  // twice 10^6 back-ends, and one
  EXPECT_NE(refusal([&](auto c) { set_words(c.initRankRuns(4), {0, over - 2, kFe, 2}); }).find("at most 2097152"),
            std::string::npos);
  EXPECT_NE(refusal([](auto c) { set_words(c.initRankRuns(2), {0xfffffff0, 0x100}); }), "") << "ranks past 2^32";
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

// Ranks go as runs of consecutive ranks: the largest rank followed by rank 0 is two
// runs, not one that wraps around (which the reader refuses).
TEST(TopologyWire, TheLargestRankAndRankZeroAreNoRun) {
  const Rank last = 0xffffffff;
  std::vector<TopologyNode> nodes(3);
  nodes[0] = {.rank = kFe, .role = Role::frontend, .children = {last, 0}};
  nodes[1] = {.rank = last, .role = Role::backend, .parent = kFe};
  nodes[2] = {.rank = 0, .role = Role::backend, .parent = kFe};
  auto t = Topology::make(std::move(nodes), {});
  ASSERT_TRUE(t) << t.error();
  Encoded e;
  core::encode_topology(*t, e.topology);
  auto back = core::decode_topology(e.topology.asReader());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->at(kFe).children, (std::vector<Rank>{last, 0}));
}

}  // namespace
}  // namespace canopy

namespace canopy {
namespace {

// A back-end launches nothing: its parent sends it a plan without the launcher's
// command, the commnode's path, the back-end's command line or the re-attach file
// (about 100 bytes each on the wire, and 134 held in every back-end), and it holds
// none of them, nor their room (120 bytes in its plan until stop 76). A commnode
// child gets them all.
TEST(TopologyWire, ABackEndsPlanCarriesNothingOnlyALauncherReads) {
  core::LaunchPlan plan;
  auto& commands = plan.commands.set();
  commands.launcher = "srun --overlap -w {host} {command} --with-a-long-option";
  commands.commnode_exe = "/opt/canopy/libexec/canopy/canopy-commnode";
  commands.backend_argv = {"/home/user/tool/backend", "--mode", "trace"};
  commands.reattach_file = "/home/user/.canopy/reattach-1234";
  plan.fault.heartbeat = std::chrono::milliseconds(250);
  auto encoded = [&](bool launches) {
    auto message = std::make_unique<capnp::MallocMessageBuilder>();
    core::encode_plan(plan, message->initRoot<wire::Topology>(), launches);
    return message;
  };
  const auto to_commnode = encoded(true);
  const auto to_backend = encoded(false);
  auto commnode = core::decode_plan(to_commnode->getRoot<wire::Topology>().asReader());
  auto backend = core::decode_plan(to_backend->getRoot<wire::Topology>().asReader());
  ASSERT_TRUE(commnode && backend);
  EXPECT_EQ(commnode->commands.get().launcher, commands.launcher);
  EXPECT_EQ(commnode->commands.get().commnode_exe, commands.commnode_exe);
  EXPECT_EQ(commnode->commands.get().backend_argv, commands.backend_argv);
  EXPECT_EQ(commnode->commands.get().reattach_file, commands.reattach_file);
  EXPECT_FALSE(backend->commands.held()) << "a back-end holds no launch commands";
  EXPECT_LE(sizeof(core::LaunchPlan), 208u) << "the commands are not held in place";
  const core::LaunchPlan copy = *commnode;  // a copy has its own
  EXPECT_EQ(copy.commands.get().backend_argv, commands.backend_argv);
  EXPECT_NE(&copy.commands.get(), &commnode->commands.get());
  EXPECT_EQ(backend->fault.heartbeat, plan.fault.heartbeat) << "what a back-end reads still goes";
  EXPECT_LT(capnp::computeSerializedSizeInWords(*to_backend) + 20, capnp::computeSerializedSizeInWords(*to_commnode));
}

}  // namespace
}  // namespace canopy
