// Framing: frames split and reassembled at any boundary; bad frames are refused;
// read_messages(), the decoding loop of every link.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "canopy.capnp.h"
#include "transport/frame.h"

using canopy::transport::FrameLimits;
using canopy::transport::FrameReader;
using canopy::transport::read_messages;
using canopy::transport::ReadOutcome;

namespace {

canopy::transport::FrameBuffer frames_with_ranks(std::initializer_list<std::uint32_t> ranks) {
  canopy::transport::FrameBuffer out;
  for (auto r : ranks) {
    capnp::MallocMessageBuilder b;
    auto m = b.initRoot<canopy::wire::Message>();
    m.setSenderRank(r);
    m.getBody().initShutdown().setReason(std::string(r % 50, 'x'));
    canopy::transport::append_frame(b, out);
  }
  return out;
}

std::uint32_t rank_of(const FrameReader::Frame& f) {
  capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(f.body.data(), f.body.size()));
  return reader.getRoot<canopy::wire::Message>().getSenderRank();
}

void feed(FrameReader& reader, const std::byte* data, std::size_t n) {
  auto space = reader.prepare(n);
  std::memcpy(space.data(), data, n);
  reader.commit(n);
}

}  // namespace

TEST(FrameReader, ReassemblesFramesDeliveredOneByteAtATime) {
  auto bytes = frames_with_ranks({1, 22, 333});
  FrameReader reader;
  std::vector<std::uint32_t> seen;
  auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  for (std::size_t i = 0; i < bytes.size() * 8; ++i) {
    feed(reader, data + i, 1);
    while (auto f = reader.next()) seen.push_back(rank_of(*f));
  }
  EXPECT_EQ(seen, (std::vector<std::uint32_t>{1, 22, 333}));
  EXPECT_TRUE(reader.error().empty());
}

TEST(FrameReader, ReadsSeveralFramesFromOneChunk) {
  auto bytes = frames_with_ranks({5, 6, 7, 8});
  FrameReader reader;
  feed(reader, reinterpret_cast<const std::byte*>(bytes.data()), bytes.size() * 8);
  std::vector<std::uint32_t> seen;
  while (auto f = reader.next()) seen.push_back(rank_of(*f));
  EXPECT_EQ(seen, (std::vector<std::uint32_t>{5, 6, 7, 8}));
}

// Issue 47: a link's receive buffer grew to the topology's size at launch (60 bytes a
// process of the tree) and kept it for ever, at every process. Once the large frame
// is read, the next prepare() gives the room back.
TEST(FrameReader, GivesBackTheRoomOfALargeFrameOnceItIsRead) {
  canopy::transport::FrameBuffer bytes;
  {
    capnp::MallocMessageBuilder b;
    b.initRoot<canopy::wire::Message>().getBody().initShutdown().setReason(std::string(1 << 20, 'x'));
    canopy::transport::append_frame(b, bytes);
  }
  FrameReader reader;
  feed(reader, reinterpret_cast<const std::byte*>(bytes.data()), bytes.size() * 8);
  EXPECT_GT(reader.buffer_bytes(), std::size_t{1} << 20);
  ASSERT_TRUE(reader.next());
  EXPECT_FALSE(reader.next());
  auto space = reader.prepare();
  EXPECT_GE(space.size(), FrameReader::kKeepBytes);
  EXPECT_LE(reader.buffer_bytes(), 2 * FrameReader::kKeepBytes);
  // And it still reads what comes next.
  auto small = frames_with_ranks({9});
  std::memcpy(space.data(), small.data(), small.size() * 8);
  reader.commit(small.size() * 8);
  auto f = reader.next();
  ASSERT_TRUE(f);
  EXPECT_EQ(rank_of(*f), 9u);
}

TEST(FrameReader, RefusesAFrameOverTheLimit) {
  FrameReader reader(FrameLimits{.max_frame_bytes = 1024});
  std::uint64_t header = 4096;
  feed(reader, reinterpret_cast<const std::byte*>(&header), 8);
  EXPECT_FALSE(reader.next());
  EXPECT_NE(reader.error().find("exceeds the limit"), std::string::npos) << reader.error();
}

TEST(FrameReader, RefusesALengthThatIsNotWholeWords) {
  FrameReader reader;
  std::uint64_t header = 13;
  feed(reader, reinterpret_cast<const std::byte*>(&header), 8);
  EXPECT_FALSE(reader.next());
  EXPECT_FALSE(reader.error().empty());
}

TEST(FrameReader, GarbageBodyFailsWhenReadNotBeforeAndWithoutCrashing) {
  // A well-framed body that is not a valid message: Cap'n Proto must throw, which
  // the link turns into "bad frame" for that link only.
  std::vector<std::uint64_t> frame = {16, 0xffffffff00000000ull, 0x1234567890abcdefull};
  FrameReader reader;
  feed(reader, reinterpret_cast<const std::byte*>(frame.data()), frame.size() * 8);
  auto f = reader.next();
  ASSERT_TRUE(f);
  EXPECT_ANY_THROW({
    capnp::FlatArrayMessageReader r(kj::ArrayPtr<const capnp::word>(f->body.data(), f->body.size()));
    auto m = r.getRoot<canopy::wire::Message>();
    (void)m.getBody().getShutdown().getReason();
  });
}

namespace {

// A handler that records each message's sender rank, and stops after `stop_after`.
struct Recorder {
  std::vector<std::uint32_t> seen;
  std::size_t stop_after = SIZE_MAX;
  bool operator()(capnp::MessageReader& m) {
    seen.push_back(m.getRoot<canopy::wire::Message>().getSenderRank());
    return seen.size() < stop_after;
  }
};

}  // namespace

TEST(FrameDecoder, HandsOutEveryCompleteFrameThenWaitsForMore) {
  auto bytes = frames_with_ranks({1, 22, 333});
  auto* data = reinterpret_cast<const std::byte*>(bytes.data());
  FrameReader reader;
  Recorder record;
  auto handler = [&](capnp::MessageReader& m) { return record(m); };
  feed(reader, data, bytes.size() * 8 - 1);  // the last frame lacks a byte
  auto outcome = read_messages(reader, handler);
  EXPECT_EQ(outcome.status, ReadOutcome::Status::drained);
  EXPECT_EQ(record.seen, (std::vector<std::uint32_t>{1, 22}));
  feed(reader, data + bytes.size() * 8 - 1, 1);
  outcome = read_messages(reader, handler);
  EXPECT_EQ(outcome.status, ReadOutcome::Status::drained);
  EXPECT_TRUE(outcome.error.empty());
  EXPECT_EQ(record.seen, (std::vector<std::uint32_t>{1, 22, 333}));
}

TEST(FrameDecoder, StopsWhenTheHandlerSaysSoAndLeavesTheRest) {
  // A link whose handler closed it delivers nothing more.
  auto bytes = frames_with_ranks({5, 6, 7});
  FrameReader reader;
  feed(reader, reinterpret_cast<const std::byte*>(bytes.data()), bytes.size() * 8);
  Recorder record{.stop_after = 2};
  auto outcome = read_messages(reader, [&](capnp::MessageReader& m) { return record(m); });
  EXPECT_EQ(outcome.status, ReadOutcome::Status::stopped);
  EXPECT_EQ(record.seen, (std::vector<std::uint32_t>{5, 6}));
  auto f = reader.next();
  ASSERT_TRUE(f);
  EXPECT_EQ(rank_of(*f), 7u);
}

TEST(FrameDecoder, ABadHeaderIsABadFrame) {
  FrameReader reader(FrameLimits{.max_frame_bytes = 1024});
  std::uint64_t header = 4096;
  feed(reader, reinterpret_cast<const std::byte*>(&header), 8);
  auto outcome = read_messages(reader, [](capnp::MessageReader&) { return true; });
  EXPECT_EQ(outcome.status, ReadOutcome::Status::failed);
  EXPECT_EQ(outcome.error, "bad frame: frame of 4096 bytes exceeds the limit of 1024");
}

TEST(FrameDecoder, AMalformedMessageIsABadFrameNotACrash) {
  // A segment table that promises more words than the body holds.
  std::vector<std::uint64_t> frame = {16, 0xffffffff00000000ull, 0x1234567890abcdefull};
  FrameReader reader;
  feed(reader, reinterpret_cast<const std::byte*>(frame.data()), frame.size() * 8);
  auto outcome = read_messages(reader, [](capnp::MessageReader& m) {
    (void)m.getRoot<canopy::wire::Message>().getBody().getShutdown().getReason();
    return true;
  });
  EXPECT_EQ(outcome.status, ReadOutcome::Status::failed);
  EXPECT_EQ(outcome.error.rfind("bad frame: ", 0), 0u) << outcome.error;
}

TEST(FrameDecoder, AppliesTheTraversalLimit) {
  // A message larger than the limit fails when the handler reads it: a bad frame.
  auto bytes = frames_with_ranks({49});  // a 49-byte reason: more than 4 words
  FrameReader reader(FrameLimits{.traversal_limit_words = 4});
  feed(reader, reinterpret_cast<const std::byte*>(bytes.data()), bytes.size() * 8);
  bool handled = false;
  auto outcome = read_messages(reader, [&](capnp::MessageReader& m) {
    auto message = m.getRoot<canopy::wire::Message>();
    (void)message.getBody().getShutdown().getReason();
    handled = true;
    return true;
  });
  EXPECT_FALSE(handled);
  EXPECT_EQ(outcome.status, ReadOutcome::Status::failed);
  EXPECT_NE(outcome.error.find("traversal limit"), std::string::npos) << outcome.error;
}

// Issue 47: every link has a reader. Its limits and offsets take 32 bits each (40
// bytes of 64-bit fields before, in every link), so a reader refuses a frame limit
// its offsets could not hold, and says so, rather than wrapping.
TEST(FrameReader, HoldsItsLimitsAndOffsetsIn32BitsAndRefusesALimitTheyCannotHold) {
  EXPECT_LE(sizeof(FrameReader), 56u);
  EXPECT_NO_THROW(FrameReader(FrameLimits{.max_frame_bytes = 1u << 30}));
  try {
    FrameReader reader(FrameLimits{.max_frame_bytes = (1u << 30) + 1});
    ADD_FAILURE() << "a limit above 1 GiB was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("above the most a reader takes"), std::string::npos) << e.what();
  }
}
