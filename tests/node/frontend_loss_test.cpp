// The front-end's own failure (paper 004 §IV-C; docs/fault-tolerance.md, "When the
// front-end fails"), in process on manual time (tree_harness.h): without a grace
// period the tree stops with its front-end; with one, the lowest live child of the
// front-end is promoted to the root's place and adopts the others, the promoted
// root's own loss is handled the same way again, and the tree stops when the grace
// period ends without a front-end.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;

constexpr Rank FE = kFirstInternalRank;
// b:3^2: FE+1 (back-ends 0-2), FE+2 (3-5) and FE+3 (6-8) under the front-end.

bool promoted(const core::NodeEvent& e) { return std::holds_alternative<core::events::Promoted>(e); }

bool heard_promotion(TreeHarness& tree, Rank rank) {
  const auto& events = tree.heard(rank).events;
  return std::any_of(events.begin(), events.end(), promoted);
}

std::vector<Rank> everyone_but(TreeHarness& tree, std::set<Rank> gone) {
  std::vector<Rank> out;
  for (const auto& n : tree.topology().nodes()) {
    if (!gone.count(n.rank)) out.push_back(n.rank);
  }
  return out;
}

// The rank every live process would name as its parent's, agreed by all of them:
// every commnode, and every back-end whose part of the tree holds it (docs/scale.md).
bool all_see_parent(TreeHarness& tree, const std::vector<Rank>& viewers, Rank rank, Rank parent) {
  return std::all_of(viewers.begin(), viewers.end(), [&](Rank v) {
    const auto* view = tree.node(v).live_tree();
    if (view && !view->contains(rank) && tree.topology().at(v).role == canopy::Role::backend) return true;
    return view && view->parent(rank) == parent && view->alive(parent);
  });
}

FaultToleranceOptions kept_for(std::chrono::milliseconds grace) {
  FaultToleranceOptions fault;
  fault.keep_tree_for = grace;
  return fault;
}

TEST(FrontendLoss, WithoutAGracePeriodEveryProcessStopsWithTheFrontEnd) {
  TreeHarness tree("b:3^2", FaultToleranceOptions{});
  ASSERT_TRUE(tree.launch());
  tree.kill(FE);
  const auto rest = everyone_but(tree, {FE});
  ASSERT_TRUE(tree.run_until(
      [&] { return std::all_of(rest.begin(), rest.end(), [&](Rank r) { return tree.heard(r).stopped.has_value(); }); },
      5s));
  for (Rank r : rest) EXPECT_FALSE(heard_promotion(tree, r)) << r;
  EXPECT_NE(tree.heard(FE + 1).stopped->find("lost parent"), std::string::npos) << *tree.heard(FE + 1).stopped;
}

// The lowest child of the front-end, FE+1, takes the root's place; FE+2 and FE+3
// ask it to adopt them (the only potential adopter of a process left without the
// root), though it is no taller than they; every process agrees on the new shape.
// The state of a recoverable stream is composed at FE+1: the back-ends' integers
// sent before the loss are in its filter state. When the grace period ends with no
// front-end, every process stops, and says why.
TEST(FrontendLoss, TheLowestChildOfTheFrontEndIsPromotedAndAdoptsTheOthers) {
  const auto grace = 20s;
  TreeHarness tree("b:3^2", kept_for(grace));
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("incremental_union");
  for (Rank b = 0; b < 9; ++b) tree.runtime(b).streams.send_up(stream, Packet{0, {std::vector<std::int32_t>{int(b) * 10}}});
  ASSERT_TRUE(tree.run_until([&] { return !tree.heard(FE).upstream.empty(); }, 2s));
  tree.kill(FE);
  const auto killed_at = tree.elapsed();
  const auto rest = everyone_but(tree, {FE});

  ASSERT_TRUE(tree.run_until([&] { return heard_promotion(tree, FE + 1); }, 1s));
  EXPECT_TRUE(tree.node(FE + 1).promoted());
  ASSERT_TRUE(tree.run_until(
      [&] { return all_see_parent(tree, rest, FE + 2, FE + 1) && all_see_parent(tree, rest, FE + 3, FE + 1); }, 5s));
  for (Rank r : {FE + 2, FE + 3}) {
    EXPECT_FALSE(heard_promotion(tree, r)) << r;
    ASSERT_FALSE(tree.heard(r).recovered.empty()) << r;
    EXPECT_EQ(tree.heard(r).recovered.back().adopter, FE + 1) << r;
    EXPECT_EQ(tree.node(r).phase(), core::Phase::running) << r;
  }
  for (Rank r : rest) {
    EXPECT_FALSE(tree.heard(r).stopped) << r << ": " << *tree.heard(r).stopped;
    EXPECT_FALSE(tree.node(r).live_tree()->alive(FE)) << r;
    EXPECT_EQ(tree.node(r).live_tree()->heir(), FE + 1) << r;
  }
  EXPECT_EQ(tree.node(FE + 1).children().size(), 5u) << "its three back-ends and its two former siblings";

  ASSERT_TRUE(tree.run_until(
      [&] { return std::all_of(rest.begin(), rest.end(), [&](Rank r) { return tree.heard(r).stopped.has_value(); }); },
      grace + 10s));
  EXPECT_GE(tree.elapsed() - killed_at, grace);
  EXPECT_NE(tree.heard(FE + 1).stopped->find("no front-end re-attached within 20000 ms"), std::string::npos)
      << *tree.heard(FE + 1).stopped;
  EXPECT_NE(tree.heard(7).stopped->find("no front-end re-attached"), std::string::npos) << *tree.heard(7).stopped;
}

// The front-end hangs rather than dies: its children find it lost by silence, each at
// its own moment, and some ask the heir before the heir knows it is one. Their
// requests are held, not refused, and taken once the heir is promoted: nobody waits
// for a retry. (Refused by a heir that was still an orphan itself, they asked again
// 100 ms later.)
TEST(FrontendLoss, OrphansWhoAskTheHeirBeforeItKnowsAreAdoptedWithoutARetry) {
  FaultToleranceOptions fault = kept_for(30s);
  TreeHarness tree("b:3^2", fault);
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("sum");
  // The heir hears from the front-end last: a packet for back-end 0, below it, half a
  // heartbeat after the others heard their last.
  tree.run_for(fault.heartbeat / 2);
  tree.runtime(FE).streams.send_down(stream, Packet{1, {}}, Rank{0});
  tree.run_for(1ms);
  tree.freeze(FE);
  ASSERT_TRUE(tree.run_until([&] { return heard_promotion(tree, FE + 1); }, fault.lost * 3));
  const auto promoted_at = tree.elapsed();
  const auto rest = everyone_but(tree, {FE});
  ASSERT_TRUE(tree.run_until(
      [&] { return all_see_parent(tree, rest, FE + 2, FE + 1) && all_see_parent(tree, rest, FE + 3, FE + 1); }, 5s));
  EXPECT_LT(tree.elapsed() - promoted_at, 50ms) << "an orphan was refused and asked again";
  for (Rank r : {FE + 2, FE + 3}) {
    ASSERT_FALSE(tree.heard(r).recovered.empty()) << r;
    EXPECT_EQ(tree.heard(r).recovered.back().attempts, 1u) << r;
  }
  tree.kill(FE);
}

// The promoted root fails too: the processes it leaves (its own back-ends and the
// former siblings it adopted) are left without the root again, and the lowest of
// them, FE+2, takes its place and adopts the rest.
TEST(FrontendLoss, WhenThePromotedRootFailsTheNextHeirTakesItsPlace) {
  TreeHarness tree("b:3^2", kept_for(30s));
  ASSERT_TRUE(tree.launch());
  tree.kill(FE);
  auto rest = everyone_but(tree, {FE});
  ASSERT_TRUE(tree.run_until(
      [&] { return all_see_parent(tree, rest, FE + 2, FE + 1) && all_see_parent(tree, rest, FE + 3, FE + 1); }, 5s));
  tree.kill(FE + 1);
  rest = everyone_but(tree, {FE, FE + 1});
  ASSERT_TRUE(tree.run_until([&] { return heard_promotion(tree, FE + 2); }, 10s));
  ASSERT_TRUE(tree.run_until(
      [&] {
        return all_see_parent(tree, rest, FE + 3, FE + 2) && all_see_parent(tree, rest, 0, FE + 2) &&
               all_see_parent(tree, rest, 1, FE + 2) && all_see_parent(tree, rest, 2, FE + 2);
      },
      10s));
  EXPECT_FALSE(heard_promotion(tree, FE + 3));
  for (Rank r : rest) EXPECT_FALSE(tree.heard(r).stopped) << r;
}

std::set<std::int32_t> union_at(TreeHarness& tree, Rank rank) {
  std::set<std::int32_t> out;
  for (const auto& packet : tree.heard(rank).upstream) {
    for (const auto& v : packet.values()) {
      if (auto* xs = std::get_if<std::vector<std::int32_t>>(&v)) out.insert(xs->begin(), xs->end());
    }
  }
  return out;
}

std::size_t promotions(TreeHarness& tree, Rank rank) {
  const auto& events = tree.heard(rank).events;
  return static_cast<std::size_t>(std::count_if(events.begin(), events.end(), promoted));
}

// A new front-end re-attaches within the grace period. A process that does not
// stand in the root's place refuses it, saying who does; the promoted FE+1 takes
// it, and it gets the topology and the live tree, the membership view, the events
// of the promotion, and the complete state of the recoverable stream: the union of
// what the back-ends sent before the loss and while the tree had no front-end. The
// tree then runs under it (new integers, a back-end's failure and the view without
// it), and losing this front-end is handled the same way again.
TEST(FrontendLoss, ANewFrontEndReattachesToThePromotedRootAndGetsTheWholeState) {
  TreeHarness tree("b:3^2", kept_for(30s));
  ASSERT_TRUE(tree.launch());
  const StreamId stream = tree.open_stream("incremental_union");
  auto send = [&](Rank b, std::int32_t x) {
    tree.runtime(b).streams.send_up(stream, Packet{0, {std::vector<std::int32_t>{x}}});
  };
  std::set<std::int32_t> sent;
  for (Rank b = 0; b < 9; ++b) send(b, int(b)), sent.insert(int(b));
  ASSERT_TRUE(tree.run_until([&] { return union_at(tree, FE).size() == 9; }, 2s));
  tree.kill(FE);
  auto rest = everyone_but(tree, {FE});
  ASSERT_TRUE(tree.run_until(
      [&] { return all_see_parent(tree, rest, FE + 2, FE + 1) && all_see_parent(tree, rest, FE + 3, FE + 1); }, 5s));
  for (Rank b = 0; b < 9; ++b) send(b, 100 + int(b)), sent.insert(100 + int(b));
  tree.run_for(1s);

  tree.reattach_frontend(FE + 2);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).reattached.has_value(); }, 5s));
  EXPECT_NE(tree.heard(FE).reattached->find("does not stand in the root's place; commnode 1000001"),
            std::string::npos)
      << *tree.heard(FE).reattached;

  tree.reattach_frontend(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).reattached.has_value(); }, 5s));
  ASSERT_EQ(*tree.heard(FE).reattached, "");
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).promotion.size() == 3 && union_at(tree, FE) == sent; }, 5s))
      << union_at(tree, FE).size() << " of " << sent.size() << " integers";
  const auto& p = tree.heard(FE).promotion;
  EXPECT_EQ(p[0].kind, Event::Kind::frontend_lost);
  EXPECT_EQ(p[0].rank, FE);
  EXPECT_EQ(p[1].kind, Event::Kind::promoted);
  EXPECT_EQ(p[1].rank, FE + 1);
  EXPECT_EQ(p[1].adopted, 2u);
  EXPECT_GT(p[1].after.count(), 0);
  EXPECT_EQ(p[2].kind, Event::Kind::reattached);
  EXPECT_GE(p[2].after, 1s);
  EXPECT_TRUE(p[2].incomplete_streams.empty());
  ASSERT_FALSE(tree.heard(FE).views.empty());
  EXPECT_EQ(tree.heard(FE).views.back().view.members.size(), 9u);
  rest = everyone_but(tree, {});
  ASSERT_TRUE(tree.run_until([&] { return all_see_parent(tree, rest, FE + 1, FE); }, 2s));
  EXPECT_EQ(tree.node(FE + 1).phase(), core::Phase::running);

  send(0, 200);
  ASSERT_TRUE(tree.run_until([&] { return union_at(tree, FE).count(200) != 0; }, 2s));
  tree.kill(4);
  ASSERT_TRUE(tree.run_until(
      [&] {
        const auto& views = tree.heard(FE).views;
        return !views.empty() && views.back().left == std::vector<Rank>{4};
      },
      10s));
  EXPECT_GT(tree.heard(FE).views.back().view.id, tree.heard(FE).views.front().view.id);

  tree.kill(FE);
  ASSERT_TRUE(tree.run_until([&] { return promotions(tree, FE + 1) == 2; }, 5s));
  EXPECT_TRUE(tree.node(FE + 1).promoted());
}

// A stream whose state-recoverable filter came from a plugin: the re-attached
// front-end, which loaded no plugin, loads it from the path the stream carries, and
// gets the regenerated maximum, without a stream error.
TEST(FrontendLoss, AReattachedFrontEndLoadsTheStreamsRecoverablePluginFilter) {
  TreeHarness tree("b:3^2", kept_for(30s));
  ASSERT_TRUE(tree.launch());
  tree.runtime(FE).requests.load_filter(1, CANOPY_WHERE_FILTERS, "where_max");
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).request_acks.count(1) != 0; }, 5s));
  ASSERT_EQ(tree.heard(FE).request_acks[1], "");
  const StreamId stream = tree.open_stream("where_max");
  for (Rank b = 0; b < 9; ++b) tree.runtime(b).streams.send_up(stream, Packet{0, {std::int32_t(b * 10)}});
  ASSERT_TRUE(tree.run_until([&] { return !tree.heard(FE).upstream.empty(); }, 2s));
  tree.kill(FE);
  const auto rest = everyone_but(tree, {FE});
  ASSERT_TRUE(tree.run_until(
      [&] { return all_see_parent(tree, rest, FE + 2, FE + 1) && all_see_parent(tree, rest, FE + 3, FE + 1); }, 5s));
  tree.runtime(4).streams.send_up(stream, Packet{0, {std::int32_t(500)}});
  tree.run_for(100ms);
  tree.reattach_frontend(FE + 1);
  // The states the heir had not yet filtered (its waves wait for stragglers) follow
  // its own, as its output.
  auto max_heard = [&] {
    std::int32_t max = INT32_MIN;
    for (const auto& p : tree.heard(FE).upstream) {
      std::int32_t v = 0;
      if (p.unpack("%d", v)) max = std::max(max, v);
    }
    return max;
  };
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).promotion.size() == 3 && max_heard() == 500; }, 5s))
      << "the new front-end's maximum is " << max_heard();
  EXPECT_TRUE(tree.heard(FE).errors.empty()) << tree.heard(FE).errors.front();
}

// A stream whose filter is not state recoverable (sum) cannot be regenerated: the
// re-attached front-end is told so (reattached.incomplete_streams, and receive()'s
// error in the library), while the recoverable one is complete.
TEST(FrontendLoss, AStreamThatIsNotStateRecoverableIsReportedAtTheReattach) {
  TreeHarness tree("b:3^2", kept_for(30s));
  ASSERT_TRUE(tree.launch());
  const StreamId sum = tree.open_stream("sum");
  const StreamId unite = tree.open_stream("incremental_union");
  tree.kill(FE);
  const auto rest = everyone_but(tree, {FE});
  ASSERT_TRUE(tree.run_until(
      [&] { return all_see_parent(tree, rest, FE + 2, FE + 1) && all_see_parent(tree, rest, FE + 3, FE + 1); }, 5s));
  tree.reattach_frontend(FE + 1);
  ASSERT_TRUE(tree.run_until([&] { return tree.heard(FE).promotion.size() == 3; }, 5s));
  EXPECT_EQ(tree.heard(FE).promotion[2].incomplete_streams, std::vector<StreamId>{sum});
  (void)unite;
}

}  // namespace
}  // namespace canopy::testing
