// core::ScratchPool and ScratchSegment: where the first segment of an outgoing
// message comes from and goes back to (core/service.h).
#include <gtest/gtest.h>

#include <capnp/serialize.h>

#include <memory>
#include <string>
#include <vector>

#include "core/service.h"

namespace {

using canopy::core::Message;
using canopy::core::NodeIdentity;
using canopy::core::ScratchPool;
using canopy::core::ScratchSegment;

NodeIdentity sender() {
  NodeIdentity id;
  id.rank = 7;
  return id;
}

// canopy-sim gives each simulated process a pool of its own: a message built while
// a pool is in use takes its segment there and gives it back there, and the thread's
// own pool is used again once the Use ends.
TEST(ScratchPool, AMessageTakesItsSegmentFromThePoolInUseAndGivesItBackThere) {
  ScratchPool pool;
  {
    ScratchPool::Use use(pool);
    {
      Message a(sender());
      Message b(sender());
    }
    EXPECT_EQ(pool.kept(), 2u);
    {
      Message c(sender());
      EXPECT_EQ(pool.kept(), 1u);
    }
    EXPECT_EQ(pool.kept(), 2u);
    ScratchPool inner;
    {
      ScratchPool::Use nested(inner);
      Message d(sender());
    }
    EXPECT_EQ(inner.kept(), 1u);
    EXPECT_EQ(pool.kept(), 2u);
  }
  { Message e(sender()); }  // the thread's own pool
  EXPECT_EQ(pool.kept(), 2u);
}

// Many messages alive at once (a burst) leave at most kKept segments kept.
TEST(ScratchPool, KeepsNoMoreThanItsLimit) {
  ScratchPool pool;
  ScratchPool::Use use(pool);
  {
    std::vector<std::unique_ptr<Message>> burst;
    for (std::size_t i = 0; i < ScratchPool::kKept + 3; ++i) burst.push_back(std::make_unique<Message>(sender()));
  }
  EXPECT_EQ(pool.kept(), ScratchPool::kKept);
}

// A segment comes back zeroed for the next message, which capnp requires of a first
// segment and would otherwise read as data.
TEST(ScratchPool, ASegmentComesBackZeroed) {
  ScratchPool pool;
  ScratchPool::Use use(pool);
  {
    Message used(sender());
    used.body().initShutdown().setReason(std::string(150, 'x'));  // fits the first segment
    EXPECT_EQ(used.builder().getSegmentsForOutput().size(), 1u);
  }
  ASSERT_EQ(pool.kept(), 1u);
  Message next(sender());  // takes that segment: an empty body, nothing left of the last
  auto out = capnp::messageToFlatArray(next.builder());
  capnp::FlatArrayMessageReader again(out.asPtr());
  EXPECT_TRUE(again.getRoot<canopy::wire::Message>().getBody().isHello() &&
              !again.getRoot<canopy::wire::Message>().getBody().hasHello());
}

// A message larger than its first segment (256 bytes at first) goes on in segments its
// builder allocates, and is read back whole; the pool's next segments hold one as
// large (its smaller ones go), up to 8 KiB. Streaming 1 KiB packets in two segments
// each made round trips of 1 KiB a tenth slower (docs/benchmarks.md, "Scale").
TEST(ScratchPool, AMessageLargerThanItsSegmentIsWholeAndTheNextSegmentsHoldIt) {
  ScratchPool pool;
  ScratchPool::Use use(pool);
  { Message small(sender()); }
  ASSERT_EQ(pool.kept(), 1u);
  EXPECT_EQ(pool.segment_words(), ScratchSegment::kMinWords);
  const std::string reason(1500, 'x');
  kj::Array<capnp::word> words;
  {
    Message big(sender());
    big.body().initShutdown().setReason(reason);
    EXPECT_GT(big.builder().getSegmentsForOutput().size(), 1u);
    words = capnp::messageToFlatArray(big.builder());
  }
  capnp::FlatArrayMessageReader reader(words.asPtr());
  const auto read = reader.getRoot<canopy::wire::Message>();
  EXPECT_EQ(read.getSenderRank(), 7u);
  ASSERT_TRUE(read.getBody().isShutdown());
  EXPECT_EQ(std::string(read.getBody().getShutdown().getReason().cStr()), reason);
  EXPECT_EQ(pool.segment_words(), 256u);  // 2 KiB: the message took over 1 KiB
  EXPECT_EQ(pool.kept(), 0u);             // the smaller segments went
  {
    Message again(sender());
    again.body().initShutdown().setReason(reason);
    EXPECT_EQ(again.builder().getSegmentsForOutput().size(), 1u);
  }
  EXPECT_EQ(pool.kept(), 1u);
  {
    Message huge(sender());
    huge.body().initShutdown().setReason(std::string(100000, 'x'));
  }
  EXPECT_EQ(pool.segment_words(), ScratchSegment::kMaxWords);  // no more than 8 KiB
}

// A pool whose messages would have fit half a segment, kShrinkAfter in a row, halves
// its segments, down to 256 bytes: a commnode sends its children their parts of the tree
// (several KiB each) at launch, and only small messages after that; it kept 8 KiB
// segments for ever. A message between half and the whole starts the count again.
TEST(ScratchPool, SmallMessagesInARowHalveTheSegmentsAgain) {
  ScratchPool pool;
  ScratchPool::Use use(pool);
  {
    Message huge(sender());
    huge.body().initShutdown().setReason(std::string(100000, 'x'));
  }
  ASSERT_EQ(pool.segment_words(), ScratchSegment::kMaxWords);
  for (std::size_t i = 0; i + 1 < ScratchPool::kShrinkAfter; ++i) Message small(sender());
  {
    Message half(sender());  // over half of 8 KiB: not small
    half.body().initShutdown().setReason(std::string(5000, 'x'));
  }
  for (std::size_t i = 0; i + 1 < ScratchPool::kShrinkAfter; ++i) Message small(sender());
  EXPECT_EQ(pool.segment_words(), ScratchSegment::kMaxWords);
  { Message small(sender()); }
  EXPECT_EQ(pool.segment_words(), ScratchSegment::kMaxWords / 2);
  EXPECT_EQ(pool.kept(), 0u);  // the 8 KiB ones went
  for (std::size_t words = ScratchSegment::kMaxWords / 2; words > ScratchSegment::kMinWords; words /= 2) {
    for (std::size_t i = 0; i < ScratchPool::kShrinkAfter; ++i) Message small(sender());
  }
  EXPECT_EQ(pool.segment_words(), ScratchSegment::kMinWords);
  { Message small(sender()); }  // in a segment of the smallest size, kept
  EXPECT_EQ(pool.kept(), 1u);
}

}  // namespace
