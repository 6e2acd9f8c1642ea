// The stateful built-in filters (incremental_union, prefix_tree), CallTree and its
// packet encoding, and the loading of filter plugins with every way it can fail.
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include "canopy/call_tree.h"
#include "filters/filter.h"

using canopy::CallTree;
using canopy::Packet;
using canopy::Rank;
using canopy::RankRun;
using canopy::filters::Filter;
using canopy::filters::FilterRegistry;
using I32s = std::vector<std::int32_t>;
using U32s = std::vector<std::uint32_t>;

namespace {

Packet from(Rank source, std::vector<canopy::Value> values, canopy::Tag tag = 0) {
  Packet p{tag, std::move(values)};
  p.set_source(source);
  return p;
}

std::unique_ptr<Filter> make(const std::string& name) {
  static const auto registry = FilterRegistry::with_builtins();
  auto filter = registry.create(name, canopy::FilterContext{});
  EXPECT_TRUE(filter) << filter.error();
  return filter ? std::move(*filter) : nullptr;
}

// Runs one wave; expects exactly one output packet.
canopy::Result<Packet> wave(Filter& filter, std::vector<Packet> packets) {
  std::vector<Packet> out;
  if (auto r = filter.execute(packets, out); !r) return canopy::Error{r.error()};
  if (out.size() != 1) return canopy::Error{"expected one output packet, got " + std::to_string(out.size())};
  return out.front();
}

Packet state_of(Filter& filter) {
  auto state = filter.extract_state();
  EXPECT_TRUE(state) << state.error();
  return state ? *state : Packet{};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// ---- incremental_union ----

TEST(IncrementalUnionFilter, EmitsOnlyIntegersItHasNotSeenBefore) {
  auto f = make("incremental_union");
  auto first = wave(*f, {from(0, {I32s{5, 1}}), from(1, {I32s{3, 1}})});
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(std::get<I32s>((*first)[0]), (I32s{1, 3, 5}));
  auto second = wave(*f, {from(0, {I32s{7, 5}}), from(1, {I32s{2, 3, 7}})});
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(std::get<I32s>((*second)[0]), (I32s{2, 7}));
}

TEST(IncrementalUnionFilter, EmitsOnePacketOfEmptyArraysWhenNothingIsNew) {
  auto f = make("incremental_union");
  ASSERT_TRUE(wave(*f, {from(0, {I32s{1, 2}, std::int64_t{9}})}));
  // A parent in wait-for-all mode needs a packet from this node for every wave.
  auto again = wave(*f, {from(0, {I32s{2, 1}, std::int64_t{9}}), from(1, {I32s{}, std::int64_t{9}})});
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(again->format(), "%ad %ald");
  EXPECT_TRUE(std::get<I32s>((*again)[0]).empty());
  EXPECT_TRUE(std::get<std::vector<std::int64_t>>((*again)[1]).empty());
}

TEST(IncrementalUnionFilter, KeepsPositionsApartAndTakesScalarsAndArraysAlike) {
  auto f = make("incremental_union");
  auto out = wave(*f, {from(0, {std::int32_t{4}, U32s{1}}), from(1, {I32s{4, 1}, std::uint32_t{4}})});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<I32s>((*out)[0]), (I32s{1, 4}));
  EXPECT_EQ(std::get<U32s>((*out)[1]), (U32s{1, 4}));
}

TEST(IncrementalUnionFilter, AddsContributorsAndKeepsTheFirstTag) {
  auto f = make("incremental_union");
  auto a = from(0, {I32s{1}}, 7);
  a.set_contributors(3);
  auto b = from(1, {I32s{2}}, 8);
  b.set_contributors(2);
  auto out = wave(*f, {a, b});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(out->tag(), 7);
  EXPECT_EQ(out->contributors(), 5u);
}

TEST(IncrementalUnionFilter, StateOfAExecutedAtBYieldsExactlyWhatBHadNotSeen) {
  auto a = make("incremental_union");
  auto b = make("incremental_union");
  ASSERT_TRUE(a->state_recoverable());
  ASSERT_TRUE(wave(*a, {from(0, {I32s{1, 2, 3, 5}})}));
  ASSERT_TRUE(wave(*b, {from(1, {I32s{3, 4, 5}})}));

  Packet state = state_of(*a);
  EXPECT_EQ(std::get<I32s>(state[0]), (I32s{1, 2, 3, 5}));
  EXPECT_EQ(state.contributors(), 0u) << "state is not new back-end input";
  auto composed = wave(*b, {state});
  ASSERT_TRUE(composed) << composed.error();
  EXPECT_EQ(std::get<I32s>((*composed)[0]), (I32s{1, 2}));  // A \ B
  EXPECT_EQ(std::get<I32s>(state_of(*b)[0]), (I32s{1, 2, 3, 4, 5}));  // A ∪ B

  // Idempotent: composing the same state again adds nothing.
  auto again = wave(*b, {state});
  ASSERT_TRUE(again) << again.error();
  EXPECT_TRUE(std::get<I32s>((*again)[0]).empty());
}

TEST(IncrementalUnionFilter, StateComposesInAWaveWithOrdinaryInput) {
  // At a new parent, the orphan's state shares a wave with packets of other children.
  auto a = make("incremental_union");
  auto b = make("incremental_union");
  ASSERT_TRUE(wave(*a, {from(0, {std::int32_t{1}}), from(1, {std::int32_t{2}})}));
  ASSERT_TRUE(wave(*b, {from(2, {std::int32_t{3}})}));
  auto out = wave(*b, {from(2, {std::int32_t{4}}), state_of(*a)});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<I32s>((*out)[0]), (I32s{1, 2, 4}));
}

TEST(IncrementalUnionFilter, StateBeforeAnyInputIsAnEmptyContribution) {
  auto fresh = make("incremental_union");
  auto b = make("incremental_union");
  Packet empty = state_of(*fresh);
  EXPECT_EQ(empty.size(), 0u);
  ASSERT_TRUE(wave(*b, {from(0, {I32s{1}})}));
  auto out = wave(*b, {from(0, {I32s{2}}), empty});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<I32s>((*out)[0]), (I32s{2}));
}

TEST(IncrementalUnionFilter, RejectsNonIntegersNamingTheValueAndRank) {
  auto f = make("incremental_union");
  auto out = wave(*f, {from(4, {I32s{1}, std::vector<double>{1.5}})});
  ASSERT_FALSE(out);
  EXPECT_TRUE(contains(out.error(), "value 2")) << out.error();
  EXPECT_TRUE(contains(out.error(), "rank 4")) << out.error();
  EXPECT_FALSE(wave(*f, {from(4, {std::string("x")})}));
}

TEST(IncrementalUnionFilter, RejectsAnotherElementTypeOrCountThanTheFirstPacket) {
  auto f = make("incremental_union");
  ASSERT_TRUE(wave(*f, {from(0, {I32s{1}})}));
  auto wider = wave(*f, {from(6, {std::vector<std::int64_t>{1}})});
  ASSERT_FALSE(wider);
  EXPECT_TRUE(contains(wider.error(), "rank 6")) << wider.error();
  EXPECT_TRUE(contains(wider.error(), "%ald")) << wider.error();
  auto longer = wave(*f, {from(7, {I32s{1}, I32s{2}})});
  ASSERT_FALSE(longer);
  EXPECT_TRUE(contains(longer.error(), "rank 7")) << longer.error();
}

TEST(IncrementalUnionFilter, ARefusedWaveAddsNothingToTheState) {
  auto f = make("incremental_union");
  ASSERT_TRUE(wave(*f, {from(0, {I32s{1}})}));
  ASSERT_FALSE(wave(*f, {from(0, {I32s{2}}), from(1, {std::vector<double>{3.0}})}));
  // 2 was in the refused wave: it must still count as new, or it would be lost.
  auto out = wave(*f, {from(0, {I32s{2}})});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<I32s>((*out)[0]), (I32s{2}));
}

TEST(IncrementalUnionFilter, OrdersUnsignedAndNegativeIntegersByValue) {
  auto f = make("incremental_union");
  auto out = wave(*f, {from(0, {std::vector<std::int64_t>{3, -5, 0}, std::vector<std::uint64_t>{~0ull, 1}})});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<std::vector<std::int64_t>>((*out)[0]), (std::vector<std::int64_t>{-5, 0, 3}));
  EXPECT_EQ(std::get<std::vector<std::uint64_t>>((*out)[1]), (std::vector<std::uint64_t>{1, ~0ull}));
}

TEST(IncrementalUnionFilter, StoresTheExtremeValuesOfEachType) {
  // The set marks empty slots with the type's maximum; that integer must still count.
  using L = std::numeric_limits<std::int32_t>;
  using U = std::numeric_limits<std::uint64_t>;
  auto f = make("incremental_union");
  auto out = wave(*f, {from(0, {I32s{L::max(), L::min(), 0, -1}, std::vector<std::uint64_t>{U::max(), 0}})});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<I32s>((*out)[0]), (I32s{L::min(), -1, 0, L::max()}));
  EXPECT_EQ(std::get<std::vector<std::uint64_t>>((*out)[1]), (std::vector<std::uint64_t>{0, U::max()}));
  auto again = wave(*f, {from(0, {I32s{L::max()}, std::vector<std::uint64_t>{U::max()}})});
  ASSERT_TRUE(again) << again.error();
  EXPECT_TRUE(std::get<I32s>((*again)[0]).empty());
  EXPECT_EQ(std::get<I32s>(state_of(*f)[0]), (I32s{L::min(), -1, 0, L::max()}));
}

TEST(IncrementalUnionFilter, EmitsEveryIntegerExactlyOnceAsTheStateGrows) {
  auto f = make("incremental_union");
  std::set<std::int64_t> sent;
  std::vector<std::int64_t> emitted;
  for (std::int64_t w = 0; w < 200; ++w) {
    std::vector<std::int64_t> a, b;
    for (std::int64_t k = 0; k < 300; ++k) {
      a.push_back((w * 300 + k) * 4096);  // a power-of-two stride
      b.push_back((w * 150 + k) * 7 - 50000);  // overlaps earlier waves and `a`
    }
    sent.insert(a.begin(), a.end());
    sent.insert(b.begin(), b.end());
    auto out = wave(*f, {from(0, {a}), from(1, {b})});
    ASSERT_TRUE(out) << out.error();
    const auto& fresh = std::get<std::vector<std::int64_t>>((*out)[0]);
    ASSERT_TRUE(std::is_sorted(fresh.begin(), fresh.end()));
    emitted.insert(emitted.end(), fresh.begin(), fresh.end());
  }
  std::sort(emitted.begin(), emitted.end());
  EXPECT_EQ(emitted, std::vector<std::int64_t>(sent.begin(), sent.end())) << "each once, none lost";
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(state_of(*f)[0]), emitted);
}

// ---- CallTree ----

namespace {

using Frames = std::vector<std::string>;

CallTree tree_of(std::vector<std::pair<Frames, Rank>> paths) {
  CallTree tree;
  for (const auto& [frames, rank] : paths) tree.add_path(frames, rank);
  return tree;
}

// A valid encoding to spoil: / -> main -> {a, b}, ranks 0-3 (a: 0, 1; b: 2, 3), one
// run each.
Packet good_tree_packet() {
  return Packet(0, {U32s{CallTree::kNoParent, 0, 1, 1}, std::vector<std::string>{"", "main", "a", "b"},
                    U32s{0, 1, 2, 3, 4}, U32s{0, 3, 0, 3, 0, 1, 2, 3}});
}

std::string rejection(Packet packet) {
  auto tree = CallTree::from_packet(packet);
  return tree ? std::string("(accepted)") : tree.error();
}

U32s& u32s(Packet& p, std::size_t i) { return std::get<U32s>(p.values()[i]); }

}  // namespace

TEST(CallTree, AddPathRecordsTheRankOnEveryNodeOfThePath) {
  auto tree = tree_of({{{"main", "solve"}, 3}, {{"main", "io"}, 1}});
  ASSERT_EQ(tree.node_count(), 4u);
  EXPECT_EQ(tree.ranks(CallTree::kRoot), (std::vector<Rank>{1, 3}));
  auto main = tree.children(CallTree::kRoot)[0];
  EXPECT_EQ(tree.name(main), "main");
  ASSERT_EQ(tree.children(main).size(), 2u);
  EXPECT_EQ(tree.name(tree.children(main)[0]), "io");  // sorted by name
  EXPECT_EQ(tree.ranks(tree.children(main)[0])[0], 1u);
}

TEST(CallTree, EncodesTheDocumentedFormat) {
  auto packet = tree_of({{{"main", "b"}, 2}, {{"main", "b"}, 3}, {{"main", "a"}, 0}, {{"main", "a"}, 1}})
                    .to_packet(9);
  EXPECT_EQ(packet.format(), CallTree::kFormat);
  EXPECT_EQ(packet.tag(), 9);
  Packet expected = good_tree_packet();
  expected.set_tag(9);
  EXPECT_EQ(packet, expected);
}

TEST(CallTree, MergingTheSameTreeTwiceChangesNothing) {
  auto a = tree_of({{{"main", "solve"}, 0}, {{"main", "io"}, 1}});
  auto merged = a;
  merged.merge(a);
  EXPECT_EQ(merged, a);
  merged.merge(merged);
  EXPECT_EQ(merged, a);
  ASSERT_TRUE(merged.merge(a.to_packet(0)));
  EXPECT_EQ(merged.to_packet(0), a.to_packet(0));
}

TEST(CallTree, MergeOrderDoesNotChangeTheEncoding) {
  std::vector<CallTree> trees = {tree_of({{{"main", "solve", "MPI_Wait"}, 0}, {{"main", "io"}, 1}}),
                                 tree_of({{{"main", "solve", "MPI_Wait"}, 2}, {{"main"}, 5}}),
                                 tree_of({{{"main", "solve", "compute"}, 3}, {{"init"}, 4}})};
  std::vector<int> order = {0, 1, 2};
  std::optional<Packet> first;
  do {
    CallTree merged;
    for (int i : order) merged.merge(trees[i]);
    auto encoded = merged.to_packet(0);
    if (!first) first = encoded;
    EXPECT_EQ(encoded, *first) << "order " << order[0] << order[1] << order[2];
  } while (std::next_permutation(order.begin(), order.end()));
  // Grouping too: (t0 ∪ t1) ∪ t2 built by merging packets.
  CallTree left = trees[0];
  left.merge(trees[1]);
  CallTree grouped;
  ASSERT_TRUE(grouped.merge(trees[2].to_packet(0)));
  ASSERT_TRUE(grouped.merge(left.to_packet(0)));
  EXPECT_EQ(grouped.to_packet(0), *first);
}

TEST(CallTree, EqualContentEncodesIdenticallyWhateverTheInsertionOrder) {
  auto a = tree_of({{{"main", "z"}, 1}, {{"main", "a"}, 0}, {{"b"}, 2}});
  auto b = tree_of({{{"b"}, 2}, {{"main", "a"}, 0}, {{"main", "z"}, 1}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.to_packet(0), b.to_packet(0));
  EXPECT_EQ(a.to_dot(), b.to_dot());
  EXPECT_NE(a, tree_of({{{"b"}, 2}, {{"main", "a"}, 0}, {{"main", "z"}, 2}}));
}

TEST(CallTree, PacketRoundTripKeepsTheTree) {
  auto a = tree_of({{{"main", "solve"}, 0}, {{"main", "io"}, 1}, {{}, 9}});
  auto back = CallTree::from_packet(a.to_packet(3));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, a);
  EXPECT_EQ(CallTree::from_packet(CallTree().to_packet(0))->node_count(), 1u);
}

TEST(CallTree, FromPacketTakesAnyParentFirstOrderAndMergesSiblingsOfOneName) {
  // / -> b (rank 1), / -> a (rank 0), / -> a (rank 2): two "a" nodes, b before a.
  Packet p(0, {U32s{CallTree::kNoParent, 0, 0, 0}, std::vector<std::string>{"", "b", "a", "a"},
               U32s{0, 1, 2, 3, 4}, U32s{0, 2, 1, 1, 0, 0, 2, 2}});
  auto tree = CallTree::from_packet(p);
  ASSERT_TRUE(tree) << tree.error();
  EXPECT_EQ(*tree, tree_of({{{"a"}, 0}, {{"b"}, 1}, {{"a"}, 2}}));
}

TEST(CallTree, FromPacketRejectsEachMalformation) {
  struct Case {
    const char* what;
    std::function<void(Packet&)> spoil;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"another format", [](Packet& p) { p = Packet(0, {std::int32_t{1}}); }, "not \"%d\""},
      {"no nodes", [](Packet& p) { p = Packet(0, {U32s{}, std::vector<std::string>{}, U32s{0}, U32s{}}); },
       "no nodes"},
      {"names missing", [](Packet& p) { std::get<std::vector<std::string>>(p.values()[1]).pop_back(); },
       "4 names"},
      {"offsets missing", [](Packet& p) { u32s(p, 2).pop_back(); }, "5 rank offsets"},
      {"root with a parent", [](Packet& p) { u32s(p, 0)[0] = 0; }, "node 0 is the root"},
      {"root with a name", [](Packet& p) { std::get<std::vector<std::string>>(p.values()[1])[0] = "x"; },
       "name must be empty"},
      {"parent is itself", [](Packet& p) { u32s(p, 0)[2] = 2; }, "node 2 'a' has parent 2"},
      {"parent comes later", [](Packet& p) { u32s(p, 0)[1] = 3; }, "node 1 'main' has parent 3"},
      {"parent out of range", [](Packet& p) { u32s(p, 0)[3] = 0xFFFFFFF0u; }, "node 3 'b' has parent"},
      {"first offset not 0", [](Packet& p) { u32s(p, 2)[0] = 1; }, "rank offset 0 is 1"},
      {"offsets decrease", [](Packet& p) { u32s(p, 2)[2] = 0; }, "decrease at node 1"},
      {"last offset past the runs", [](Packet& p) { u32s(p, 2)[4] = 13; }, "last rank offset is 13"},
      {"half a run", [](Packet& p) { u32s(p, 3).pop_back(); }, "7 rank run values, an odd number"},
      {"run backwards", [](Packet& p) { u32s(p, 3)[4] = 2; }, "node 2 'a' has rank runs that are not ascending"},
      {"runs overlapping",
       [](Packet& p) { p = Packet(0, {U32s{CallTree::kNoParent}, std::vector<std::string>{""}, U32s{0, 2}, U32s{0, 2, 2, 3}}); },
       "node 0 has rank runs that are not ascending and apart"},
      {"runs touching",
       [](Packet& p) { p = Packet(0, {U32s{CallTree::kNoParent}, std::vector<std::string>{""}, U32s{0, 2}, U32s{0, 1, 2, 3}}); },
       "node 0 has rank runs that are not ascending and apart"},
      {"runs descending",
       [](Packet& p) { p = Packet(0, {U32s{CallTree::kNoParent}, std::vector<std::string>{""}, U32s{0, 2}, U32s{5, 6, 0, 1}}); },
       "node 0 has rank runs that are not ascending and apart"},
      {"rank not in the parent", [](Packet& p) { u32s(p, 3)[7] = 7; }, "node 3 'b' has ranks that its parent"},
  };
  for (const auto& c : cases) {
    Packet p = good_tree_packet();
    ASSERT_TRUE(CallTree::from_packet(p)) << "the unspoilt packet";
    c.spoil(p);
    const std::string error = rejection(p);
    EXPECT_TRUE(contains(error, c.message)) << c.what << ": " << error;
  }
}

TEST(CallTree, AMalformedPacketLeavesTheTreeUnchanged) {
  auto tree = tree_of({{{"main"}, 0}});
  const auto before = tree;
  Packet p = good_tree_packet();
  u32s(p, 3)[7] = 7;  // the last node is bad; all before it are fine
  ASSERT_FALSE(tree.merge(p));
  EXPECT_EQ(tree, before);
}

TEST(CallTree, DotLabelsEachEdgeWithItsRankRanges) {
  CallTree tree;
  for (Rank r : {0, 1, 2, 3, 7}) tree.add_path({"main", "MPI_Barrier"}, r);
  tree.add_path({"main", "say \"hi\""}, 8);
  const std::string dot = tree.to_dot();
  EXPECT_TRUE(contains(dot, "digraph")) << dot;
  EXPECT_TRUE(contains(dot, "\"5:[0-3,7]\"")) << dot;
  EXPECT_TRUE(contains(dot, "\"6:[0-3,7-8]\"")) << dot;
  EXPECT_TRUE(contains(dot, "say \\\"hi\\\"")) << "quotes escaped: " << dot;
}

TEST(CallTree, RankRangesCompressRunsOfConsecutiveRanks) {
  EXPECT_EQ(canopy::format_rank_ranges(std::vector<Rank>{0, 1, 2, 3, 7, 9, 10}), "0-3,7,9-10");
  EXPECT_EQ(canopy::format_rank_ranges(std::vector<Rank>{}), "");
  EXPECT_EQ(canopy::format_rank_ranges(std::vector<Rank>{5}), "5");
}

TEST(CallTree, RankSetsAreRunsOfConsecutiveRanks) {
  CallTree tree;
  std::vector<Rank> ranks(1000);
  for (Rank r = 0; r < 1000; ++r) ranks[r] = (r * 389) % 1000;  // every rank once, shuffled
  for (Rank r : ranks) tree.add_path({"main", r == 500 ? "compute" : "MPI_Barrier"}, r);
  const auto main = tree.children(CallTree::kRoot)[0];
  ASSERT_EQ(tree.rank_runs(main).size(), 1u);
  EXPECT_EQ(tree.rank_runs(main)[0], (RankRun{0, 999}));
  EXPECT_EQ(tree.rank_count(main), 1000u);
  const auto barrier = tree.children(main)[0];
  EXPECT_EQ(tree.name(barrier), "MPI_Barrier");
  EXPECT_EQ(format_rank_ranges(tree.rank_runs(barrier)), "0-499,501-999");
  EXPECT_EQ(tree.ranks(barrier).size(), 999u);
  // On the wire: one run (two values) per node but the split one: 4 nodes, 5 runs.
  const auto packet = tree.to_packet(0);
  EXPECT_EQ(std::get<U32s>(packet[3]).size(), 10u);
  EXPECT_EQ(*CallTree::from_packet(packet), tree);
}

TEST(CallTree, TheHighestRanksMakeARunToo) {
  CallTree tree;
  tree.add_path({"main"}, 0xFFFFFFFFu);
  tree.add_path({"main"}, 0xFFFFFFFEu);
  tree.add_path({"main"}, 0xFFFFFFFDu);
  ASSERT_EQ(tree.rank_runs(CallTree::kRoot).size(), 1u);
  EXPECT_EQ(tree.ranks(CallTree::kRoot), (std::vector<Rank>{0xFFFFFFFDu, 0xFFFFFFFEu, 0xFFFFFFFFu}));
  EXPECT_EQ(*CallTree::from_packet(tree.to_packet(0)), tree);
}

TEST(CallTree, AVeryDeepPathNeedsNoDeepRecursion) {
  Frames frames(100000);
  for (std::size_t i = 0; i < frames.size(); ++i) frames[i] = "f" + std::to_string(i % 7);
  auto tree = tree_of({{frames, 0}});
  auto back = CallTree::from_packet(tree.to_packet(0));
  ASSERT_TRUE(back) << back.error();
  back->merge(tree_of({{frames, 1}}));
  EXPECT_EQ(back->node_count(), frames.size() + 1);
  EXPECT_NE(*back, tree);
  EXPECT_FALSE(back->to_dot().empty());
}

// ---- prefix_tree ----

TEST(PrefixTreeFilter, EmitsTheCompleteMergedTreeEveryWave) {
  auto f = make("prefix_tree");
  auto t0 = tree_of({{{"main", "solve"}, 0}});
  auto t1 = tree_of({{{"main", "io"}, 1}});
  auto first = wave(*f, {from(0, t0.to_packet(4).values(), 4), from(1, t1.to_packet(4).values(), 4)});
  ASSERT_TRUE(first) << first.error();
  auto both = t0;
  both.merge(t1);
  EXPECT_EQ(first->values(), both.to_packet(0).values());
  EXPECT_EQ(first->tag(), 4);
  EXPECT_EQ(first->contributors(), 2u);
  // Nothing new: the same complete tree again, one packet.
  auto second = wave(*f, {from(0, CallTree().to_packet(0).values()), from(1, t1.to_packet(0).values())});
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second->values(), both.to_packet(0).values());
}

TEST(PrefixTreeFilter, StateOfAExecutedAtBMergesBothTrees) {
  auto a = make("prefix_tree");
  auto b = make("prefix_tree");
  ASSERT_TRUE(a->state_recoverable());
  auto ta = tree_of({{{"main", "solve"}, 0}, {{"main", "io"}, 1}});
  auto tb = tree_of({{{"main", "solve"}, 2}});
  ASSERT_TRUE(wave(*a, {from(0, ta.to_packet(0).values())}));
  ASSERT_TRUE(wave(*b, {from(2, tb.to_packet(0).values())}));
  Packet state = state_of(*a);
  EXPECT_EQ(state.contributors(), 0u);
  EXPECT_EQ(*CallTree::from_packet(state), ta);
  auto composed = wave(*b, {state});
  ASSERT_TRUE(composed) << composed.error();
  auto both = ta;
  both.merge(tb);
  EXPECT_EQ(*CallTree::from_packet(*composed), both);
  // Idempotent: the same state again changes nothing.
  EXPECT_EQ(*CallTree::from_packet(*wave(*b, {state})), both);
  EXPECT_EQ(*CallTree::from_packet(state_of(*b)), both);
}

TEST(PrefixTreeFilter, RejectsAMalformedTreeNamingTheRank) {
  auto f = make("prefix_tree");
  auto out = wave(*f, {from(5, {std::int32_t{1}})});
  ASSERT_FALSE(out);
  EXPECT_TRUE(contains(out.error(), "prefix_tree")) << out.error();
  EXPECT_TRUE(contains(out.error(), "rank 5")) << out.error();
  EXPECT_TRUE(contains(out.error(), CallTree::kFormat)) << out.error();
}

// ---- plugins ----

namespace {

// Whether the shared object at `path` is mapped into this process.
bool is_loaded(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle) dlclose(handle);
  return handle != nullptr;
}

class FilterPlugin : public ::testing::Test {
 protected:
  canopy::Result<void> load(const std::string& path, const std::string& name) {
    return registry_.load(path, name);
  }
  FilterRegistry registry_ = FilterRegistry::with_builtins();
};

}  // namespace

TEST_F(FilterPlugin, AFileThatDoesNotExistIsNamed) {
  auto r = load("/nonexistent/dir/libnothing.so", "nothing");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "/nonexistent/dir/libnothing.so")) << r.error();
  EXPECT_FALSE(registry_.contains("nothing"));
}

TEST_F(FilterPlugin, AFileThatIsNotASharedObjectIsRefused) {
  const auto path = std::filesystem::temp_directory_path() / ("canopy-not-a-plugin-" + std::to_string(getpid()) + ".so");
  std::ofstream(path) << "this is text, not ELF\n";
  auto r = load(path.string(), "text");
  std::filesystem::remove(path);
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "cannot load filter plugin")) << r.error();
  EXPECT_TRUE(contains(r.error(), path.string())) << r.error();
}

TEST_F(FilterPlugin, ALibraryWithoutTheSymbolSaysHowToExportIt) {
  auto r = load(CANOPY_TEST_NO_SYMBOL_PLUGIN, "scale");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "no symbol canopy_filter_scale")) << r.error();
  EXPECT_TRUE(contains(r.error(), "CANOPY_FILTER(scale")) << r.error();
}

TEST_F(FilterPlugin, AnAbiVersionMismatchAsksForARebuild) {
  auto r = load(CANOPY_TEST_BAD_PLUGIN, "bad_abi");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "ABI version " + std::to_string(CANOPY_FILTER_ABI_VERSION + 1))) << r.error();
  EXPECT_TRUE(contains(r.error(), "rebuild the plugin")) << r.error();
  EXPECT_FALSE(registry_.contains("bad_abi"));
}

TEST_F(FilterPlugin, APluginBuiltForAnOlderAbiVersionStillLoads) {
  static_assert(CANOPY_FILTER_ABI_OLDEST < CANOPY_FILTER_ABI_VERSION);
  auto r = load(CANOPY_TEST_BAD_PLUGIN, "older_abi");
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(registry_.contains("older_abi"));
  auto filter = registry_.create("older_abi", canopy::FilterContext{});
  ASSERT_TRUE(filter) << filter.error();
}

TEST_F(FilterPlugin, ALayoutMismatchAsksForARebuild) {
  auto r = load(CANOPY_TEST_BAD_PLUGIN, "bad_layout");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "layout")) << r.error();
  EXPECT_TRUE(contains(r.error(), "rebuild the plugin")) << r.error();
}

TEST_F(FilterPlugin, ADescriptorUnderAnotherNameIsRefused) {
  auto r = load(CANOPY_TEST_BAD_PLUGIN, "misnamed");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "'other_name'")) << r.error();
}

TEST_F(FilterPlugin, ADescriptorWithoutExecuteOrWithoutDescriptorIsRefused) {
  auto r = load(CANOPY_TEST_BAD_PLUGIN, "no_execute");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "lacks create, destroy or execute")) << r.error();
  r = load(CANOPY_TEST_BAD_PLUGIN, "null");
  ASSERT_FALSE(r);
  EXPECT_TRUE(contains(r.error(), "returned no descriptor")) << r.error();
}

TEST_F(FilterPlugin, ANameThatIsNotAnIdentifierIsRefusedBeforeLoading) {
  for (std::string name : {"", "../x", "a-b", "a b", "x;y"}) {
    auto r = load(CANOPY_TEST_GOOD_PLUGIN, name);
    ASSERT_FALSE(r) << "'" << name << "'";
    EXPECT_TRUE(contains(r.error(), "is not an identifier")) << r.error();
  }
}

TEST_F(FilterPlugin, AGoodPluginLoadsAndRuns) {
  ASSERT_TRUE(load(CANOPY_TEST_GOOD_PLUGIN, "running_max"));
  auto f = registry_.create("running_max", canopy::FilterContext{});
  ASSERT_TRUE(f) << f.error();
  EXPECT_TRUE((*f)->state_recoverable());
  auto first = wave(**f, {from(0, {std::int32_t{3}}), from(1, {std::int32_t{8}})});
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(std::get<std::int32_t>((*first)[0]), 8);
  auto second = wave(**f, {from(0, {std::int32_t{5}})});
  EXPECT_EQ(std::get<std::int32_t>((*second)[0]), 8);
  auto bad = wave(**f, {from(0, {1.0})});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.error(), "running_max needs")) << bad.error();
}

TEST_F(FilterPlugin, LoadingTheSameFileAgainIsANoOpButANameIsTakenOnce) {
  ASSERT_TRUE(load(CANOPY_TEST_GOOD_PLUGIN, "running_max"));
  EXPECT_TRUE(load(CANOPY_TEST_GOOD_PLUGIN, "running_max"));
  auto other = load(CANOPY_TEST_BAD_PLUGIN, "running_max");
  ASSERT_FALSE(other);
  EXPECT_TRUE(contains(other.error(), "already loaded from " CANOPY_TEST_GOOD_PLUGIN)) << other.error();
  auto builtin = load(CANOPY_TEST_GOOD_PLUGIN, "sum");
  ASSERT_FALSE(builtin);
  EXPECT_TRUE(contains(builtin.error(), "(built in)")) << builtin.error();
}

TEST_F(FilterPlugin, TheLibraryStaysLoadedWhileAnInstanceLives) {
  std::unique_ptr<Filter> instance;
  {
    auto registry = FilterRegistry::with_builtins();
    ASSERT_TRUE(registry.load(CANOPY_TEST_GOOD_PLUGIN, "running_max"));
    auto f = registry.create("running_max", canopy::FilterContext{});
    ASSERT_TRUE(f) << f.error();
    instance = std::move(*f);
  }
  // The registry is gone; the instance's code and descriptor must still be there.
  EXPECT_TRUE(is_loaded(CANOPY_TEST_GOOD_PLUGIN));
  auto out = wave(*instance, {from(0, {std::int32_t{11}})});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(std::get<std::int32_t>((*out)[0]), 11);
  EXPECT_EQ(std::get<std::int32_t>(state_of(*instance)[0]), 11);
  instance.reset();
  EXPECT_FALSE(is_loaded(CANOPY_TEST_GOOD_PLUGIN)) << "unloaded with the last instance";
}
