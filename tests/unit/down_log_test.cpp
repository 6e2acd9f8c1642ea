// DownLog (services/down_log.h): what the root sends again to an orphan, what it
// reports no longer kept, its bound, and generations.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <vector>

#include "services/down_log.h"

using canopy::services::down_start;
using canopy::services::DownLog;
using canopy::services::DownSeq;

namespace {

void add(DownLog& log, canopy::StreamId stream, DownSeq seq, std::size_t bytes = 8,
         std::size_t bound = std::size_t{64} << 20) {
  capnp::MallocMessageBuilder b;
  auto d = b.initRoot<canopy::wire::DataPacket>();
  d.setStreamId(stream);
  d.initValues(1)[0].initBytes(bytes);
  log.add(stream, seq, d.asReader(), bound);
}

std::vector<DownSeq> replayed(const DownLog& log, canopy::StreamId stream, DownSeq after) {
  std::vector<DownSeq> out;
  log.replay(stream, after, [&](DownSeq seq, canopy::wire::DataPacket::Reader p) {
    EXPECT_EQ(p.getStreamId(), stream);
    out.push_back(seq);
  });
  return out;
}

}  // namespace

TEST(DownLog, SendsAgainWhatCameAfterTheOrphansLastOfItsStreamOnly) {
  DownLog log;
  for (DownSeq s = 1; s <= 5; ++s) add(log, 1, s);
  add(log, 2, 1);
  EXPECT_EQ(replayed(log, 1, 3), (std::vector<DownSeq>{4, 5}));
  EXPECT_EQ(replayed(log, 1, 5), std::vector<DownSeq>{});
  EXPECT_EQ(replayed(log, 2, 0), std::vector<DownSeq>{1});
  EXPECT_EQ(log.lost(1, 3, 5), 0u);
  EXPECT_EQ(log.lost(1, 5, 5), 0u);
  EXPECT_EQ(log.lost(3, 0, 0), 0u) << "a stream with no broadcast missed none";
}

TEST(DownLog, PastItsBoundTheOldestGoWhateverTheirStreamAndAreReportedLost) {
  DownLog log;
  for (DownSeq s = 1; s <= 20; ++s) add(log, s % 2 ? 1 : 2, (s + 1) / 2, 1000, 10 * 1024);
  EXPECT_LE(log.bytes(), 10u * 1024);
  EXPECT_LT(log.size(), 20u);
  const auto kept = replayed(log, 1, 0);
  ASSERT_FALSE(kept.empty());
  EXPECT_EQ(kept.back(), 10u) << "the newest stay";
  EXPECT_EQ(log.lost(1, 0, 10), kept.front() - 1) << "those before the first kept are lost";
  EXPECT_EQ(log.lost(1, kept.front() - 1, 10), 0u);
}

TEST(DownLog, AnOrphanOfAnEarlierRootMissedNothingThisOneCanName) {
  DownLog log;
  const DownSeq g1 = down_start(1);
  add(log, 1, g1 + 1);
  add(log, 1, g1 + 2);
  // It took broadcast 7 of the lost root: this root sends all of its own.
  EXPECT_EQ(replayed(log, 1, 7), (std::vector<DownSeq>{g1 + 1, g1 + 2}));
  EXPECT_EQ(log.lost(1, 7, g1 + 2), 0u);
  EXPECT_EQ(log.lost(1, 7, g1), 0u) << "this root has sent nothing yet";
}
