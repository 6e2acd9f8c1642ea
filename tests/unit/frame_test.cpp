// Framing: frames split and reassembled at any boundary; bad frames are refused.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstring>

#include "canopy.capnp.h"
#include "transport/frame.h"

using canopy::transport::FrameLimits;
using canopy::transport::FrameReader;

namespace {

std::vector<capnp::word> frames_with_ranks(std::initializer_list<std::uint32_t> ranks) {
  std::vector<capnp::word> out;
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
