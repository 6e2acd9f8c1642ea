// core::Failures: failures alike are one line, named by rank ranges and role, merged
// across a subtree's acks through the wire form, and bounded.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include "core/failures.h"

namespace {

canopy::Topology b4x4() {
  auto t = canopy::generate_topology("b:4^2");
  EXPECT_TRUE(t) << t.error();
  return *t;
}

TEST(Failures, RankRangesCompressRuns) {
  EXPECT_EQ(canopy::core::rank_ranges({0, 1, 2, 3, 7, 9, 10}), "0-3,7,9-10");
  EXPECT_EQ(canopy::core::rank_ranges({5}), "5");
  EXPECT_EQ(canopy::core::rank_ranges({}), "");
}

TEST(Failures, AlikeFailuresAreOneLineNamedByRoleAndRange) {
  const auto t = b4x4();  // front-end 1000000, commnodes 1000001-1000004, back-ends 0-15
  canopy::core::Failures f;
  for (canopy::Rank r : {1000003u, 1000001u, 1000002u, 1000004u, 1000000u}) f.add(r, "cannot load x.so");
  for (canopy::Rank r : {0u, 1u, 2u, 3u, 9u}) f.add(r, "lost");
  f.add(1000002, "no stream 7");
  EXPECT_EQ(f.describe(&t),
            "back-ends 0-3,9: lost; commnodes 1000001-1000004 and the front-end: cannot load x.so; "
            "commnode 1000002 on localhost: no stream 7");
}

TEST(Failures, MergeThroughTheWireKeepsEveryRank) {
  const auto t = b4x4();
  canopy::core::Failures left, right;
  left.add(1000001, "bad");
  right.add(1000002, "bad");
  right.add(5, "other");
  capnp::MallocMessageBuilder wire;
  auto out = wire.initRoot<capnp::List<canopy::wire::Failure>>(static_cast<unsigned>(right.size()));
  right.write(out);
  left.merge(out.asReader());
  EXPECT_EQ(left.describe(&t), "back-end 5 on localhost: other; commnodes 1000001-1000002: bad");
}

TEST(Failures, AreBoundedInMessagesAndLength) {
  canopy::core::Failures f;
  for (std::size_t i = 0; i < canopy::core::Failures::kMaxMessages + 3; ++i) f.add(1, "failure " + std::to_string(i));
  EXPECT_EQ(f.size(), canopy::core::Failures::kMaxMessages);
  EXPECT_NE(f.describe(nullptr).find("; and 3 more failures"), std::string::npos);
  canopy::core::Failures g;
  g.add(1, std::string(100000, 'x'));
  EXPECT_LT(g.describe(nullptr).size(), canopy::core::Failures::kMaxMessageBytes + 64);
}

}  // namespace
