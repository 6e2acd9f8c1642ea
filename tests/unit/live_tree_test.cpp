// LiveTree: routes, admission of orphans, fresh incarnations, reports for late
// joiners. HeldOutput: an orphan's bounded, ordered hold-back.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include "canopy.capnp.h"
#include "core/held_output.h"
#include "core/live_tree.h"

using canopy::Rank;
using canopy::Role;
using canopy::core::LiveTree;

namespace {

constexpr Rank FE = canopy::kFirstInternalRank;
constexpr Rank C1 = FE + 1, C2 = FE + 2;

canopy::Topology tree(const char* spec) {
  auto topology = canopy::generate_topology(spec);
  EXPECT_TRUE(topology) << topology.error();
  return *topology;
}

TEST(LiveTree, RoutesFollowAnAdoptedOrphan) {
  auto t = tree("b:2^2");  // back-ends 0, 1 under C1; 2, 3 under C2
  LiveTree fe(t, FE);
  EXPECT_EQ(fe.route_to(0), 0u);
  EXPECT_EQ(fe.route_to(3), 1u);
  ASSERT_TRUE(fe.apply_failure(C1));
  ASSERT_TRUE(fe.apply_adoption(0, C2, 1));
  EXPECT_EQ(fe.route_to(0), 1u) << "through C2 now";
  LiveTree c2(t, C2);
  c2.note_child(0, 2);  // C2 took 0 as its third child
  ASSERT_TRUE(c2.apply_adoption(0, C2, 1));
  EXPECT_EQ(c2.route_to(0), 2u);
}

TEST(LiveTree, OrphansAreRefusedWithAReason) {
  auto t = tree("b:2x2x2");  // FE, C1 C2, C3..C6, back-ends 0..7
  LiveTree c2(t, C2);
  EXPECT_EQ(c2.refuse_adoption(FE + 3, Role::commnode, 1), std::nullopt) << "C3 under C2: same height";
  EXPECT_EQ(c2.refuse_adoption(FE + 3, Role::backend, 1), "role does not match the topology");
  EXPECT_EQ(c2.refuse_adoption(C1, Role::commnode, 1), "adoption would make the tree deeper");
  EXPECT_EQ(c2.refuse_adoption(42, Role::backend, 1), "unknown rank");
  EXPECT_EQ(c2.refuse_adoption(FE, Role::frontend, 1), "unknown rank") << "the root is never adopted";
  EXPECT_EQ(c2.refuse_adoption(FE + 3, Role::commnode, 0), "stale incarnation");
  LiveTree leaf(t, 5);
  EXPECT_EQ(leaf.refuse_adoption(0, Role::backend, 1), "a back-end adopts no one");
  LiveTree c5(t, FE + 5);  // below C2
  EXPECT_EQ(c5.refuse_adoption(C2, Role::commnode, 1), "this node is inside the orphan's subtree");
}

TEST(LiveTree, EveryAdoptionRequestHasAFreshIncarnation) {
  auto t = tree("b:2^2");
  LiveTree orphan(t, 0);
  EXPECT_EQ(orphan.next_incarnation(0), 1u);
  EXPECT_EQ(orphan.next_incarnation(0), 2u) << "the first adopter may still accept late";
  ASSERT_TRUE(orphan.apply_adoption(0, C2, 7));
  EXPECT_EQ(orphan.next_incarnation(0), 8u) << "above every incarnation reported for it";
  EXPECT_EQ(orphan.next_incarnation(12), 13u) << "above its own";
}

TEST(LiveTree, ALateJoinerGetsEveryReportFailuresFirst) {
  auto t = tree("b:2^2");
  LiveTree fe(t, FE);
  EXPECT_TRUE(fe.reports().empty());
  ASSERT_TRUE(fe.apply_failure(C1));
  ASSERT_TRUE(fe.apply_adoption(1, C2, 2));
  ASSERT_TRUE(fe.apply_adoption(0, C2, 1));
  auto reports = fe.reports();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_TRUE(reports[0].failure);
  EXPECT_EQ(reports[0].rank, C1);
  EXPECT_FALSE(reports[1].failure);
  EXPECT_EQ(reports[1].rank, 0u);
  EXPECT_EQ(reports[1].adopter, C2);
  EXPECT_EQ(reports[1].incarnation, 1u);
  EXPECT_EQ(reports[2].rank, 1u);
  EXPECT_EQ(reports[2].incarnation, 2u);
  // Applied to a process that knew nothing, they give the same tree.
  LiveTree late(t, 3);
  for (const auto& r : reports) {
    EXPECT_TRUE(r.failure ? late.apply_failure(r.rank) : late.apply_adoption(r.rank, r.adopter, r.incarnation));
  }
  EXPECT_EQ(late.view().parent(0), C2);
  EXPECT_FALSE(late.view().alive(C1));
}

std::int32_t tag_of(capnp::MessageReader& reader) { return reader.getRoot<canopy::wire::DataPacket>().getTag(); }

// A link that records what is sent on it.
class RecordingLink final : public canopy::transport::Link {
 public:
  void begin() override {}
  void send(capnp::MessageBuilder& message) override {
    capnp::SegmentArrayMessageReader reader(message.getSegmentsForOutput());
    tags.push_back(tag_of(reader));
  }
  void close(std::string_view) override {}
  void detach() override {}
  bool is_open() const override { return true; }
  const std::string& peer() const override { return name_; }
  std::vector<std::int32_t> tags;

 private:
  std::string name_ = "recorder";
};

TEST(HeldOutput, KeepsMessagesInOrderWithinItsBound) {
  canopy::core::HeldOutput held(1024);
  auto message = [](std::int32_t tag, unsigned bytes) {
    auto b = std::make_unique<capnp::MallocMessageBuilder>();
    auto d = b->initRoot<canopy::wire::DataPacket>();
    d.setTag(tag);
    d.initValues(1)[0].initBytes(bytes);
    return b;
  };
  EXPECT_TRUE(held.hold(*message(1, 100)));
  EXPECT_TRUE(held.hold(*message(2, 100)));
  EXPECT_FALSE(held.hold(*message(3, 2000))) << "beyond the bound";
  EXPECT_TRUE(held.hold(*message(4, 100))) << "a smaller one still fits";
  RecordingLink link;
  held.send_all(link);
  EXPECT_EQ(link.tags, (std::vector<std::int32_t>{1, 2, 4}));
  EXPECT_EQ(held.bytes(), 0u);
}

}  // namespace

namespace {

// Open attach (docs/attach.md): a back-end no process had joins under a commnode
// launched without children; every process adds it, routes to it and reports it to
// a late joiner; a rank the tree has, or a parent that is not a commnode, is refused.
TEST(LiveTree, ABackendJoinsUnderACommnodeLaunchedWithoutChildren) {
  auto t = canopy::generate_topology("b:2", {}, canopy::Leaves::commnodes);
  ASSERT_TRUE(t) << t.error();
  LiveTree fe(*t, FE);
  EXPECT_EQ(fe.view().height(C1), 1u) << "a commnode holds back-ends, if only joined ones";
  EXPECT_FALSE(fe.add_backend(C2, C1)) << "a commnode's rank";
  EXPECT_FALSE(fe.add_backend(1000, 1000)) << "a parent the tree does not have";
  ASSERT_TRUE(fe.add_backend(1000, C2));
  EXPECT_FALSE(fe.add_backend(1000, C1)) << "a rank the tree has";
  ASSERT_TRUE(fe.apply_adoption(1000, C2, 1));
  EXPECT_EQ(fe.view().parent(1000), C2);
  EXPECT_EQ(fe.view().role(1000), Role::backend);
  EXPECT_EQ(fe.view().children(C2), std::vector<Rank>{1000});
  EXPECT_EQ(fe.route_to(1000), 1u);  // through the front-end's second child
  EXPECT_FALSE(fe.add_backend(1001, 1000)) << "under a back-end";
  // A late joiner hears of it as an adoption report of incarnation 1.
  const auto reports = fe.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].failure);
  EXPECT_EQ(reports[0].rank, 1000u);
  EXPECT_EQ(reports[0].adopter, C2);
  EXPECT_EQ(reports[0].incarnation, 1u);
  // Its commnode failed, it may be adopted like any back-end: the other commnode,
  // of height 1, may take it.
  EXPECT_EQ(fe.view().potential_adopters(1000, 1), std::vector<Rank>{C1});
}

TEST(LiveTree, TheTopologyTakesAJoinedBackendAfterEveryNode) {
  auto t = canopy::generate_topology("b:2", {}, canopy::Leaves::commnodes);
  ASSERT_TRUE(t) << t.error();
  ASSERT_TRUE(t->add_backend(7, C1));
  EXPECT_EQ(t->at(7).parent, C1);
  EXPECT_EQ(t->at(7).host, t->at(C1).host);
  EXPECT_EQ(t->at(C1).children, std::vector<Rank>{7});
  EXPECT_EQ(t->nodes().back().rank, 7u);
  EXPECT_EQ(t->backends(), std::vector<Rank>{7});
  EXPECT_FALSE(t->add_backend(7, C2));
  EXPECT_FALSE(t->add_backend(FE + 9, C2));
  EXPECT_FALSE(t->add_backend(8, 7));
  EXPECT_FALSE(t->add_backend(8, 123));
}

}  // namespace
