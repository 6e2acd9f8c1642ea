// The pure parts of striped links: back-off, wire encoding, the send stream and
// window, and reassembly of fragments into frames.
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "canopy.capnp.h"
#include "transport/backoff.h"
#include "transport/frame.h"
#include "transport/stripe_receive.h"
#include "transport/stripe_send.h"
#include "transport/stripe_wire.h"
#include "transport/striped_link.h"

using namespace canopy::transport;
using namespace std::chrono_literals;

namespace {

// A message whose tag is `tag` and whose one value is `size` bytes of a pattern
// derived from the tag.
void build(capnp::MallocMessageBuilder& b, std::int32_t tag, std::size_t size) {
  auto data = b.initRoot<canopy::wire::DataPacket>();
  data.setTag(tag);
  auto bytes = data.initValues(1)[0].initBytes(static_cast<unsigned>(size));
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<capnp::byte>(tag * 31 + i * 7);
}

// The tags of the frames in `reader`, each checked against its pattern.
std::vector<std::int32_t> read_tags(FrameReader& reader) {
  std::vector<std::int32_t> tags;
  while (auto frame = reader.next()) {
    capnp::FlatArrayMessageReader r(kj::ArrayPtr<const capnp::word>(frame->body.data(), frame->body.size()));
    auto data = r.getRoot<canopy::wire::DataPacket>();
    auto bytes = data.getValues()[0].getBytes();
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      if (bytes[i] != static_cast<capnp::byte>(data.getTag() * 31 + i * 7)) {
        ADD_FAILURE() << "message " << data.getTag() << " damaged at byte " << i;
        break;
      }
    }
    tags.push_back(data.getTag());
  }
  EXPECT_TRUE(reader.error().empty()) << reader.error();
  return tags;
}

struct Cut {
  std::uint64_t seq;
  std::vector<std::byte> payload;
  std::uint32_t checksum;
};

// Cuts the whole stream into fragments of at most `max` bytes, as a sender does.
std::vector<Cut> cut_all(const SendStream& stream, std::size_t max, ChecksumKind kind) {
  std::vector<Cut> cuts;
  for (std::uint64_t seq = stream.begin(); seq < stream.end();) {
    auto bytes = stream.contiguous(seq, max);
    cuts.push_back({seq, {bytes.begin(), bytes.end()}, checksum(kind, bytes.data(), bytes.size())});
    seq += bytes.size();
  }
  return cuts;
}

}  // namespace

// ---------------------------------------------------------------------------

TEST(Backoff, DoublesFromTheInitialDelayUpToTheCap) {
  Backoff b{200ms, 5000ms, 2.0};
  std::vector<long> got;
  for (std::uint32_t attempt = 1; attempt <= 8; ++attempt) got.push_back(b.delay(attempt).count());
  EXPECT_EQ(got, (std::vector<long>{200, 400, 800, 1600, 3200, 5000, 5000, 5000}));
  EXPECT_EQ(b.delay(0).count(), 200);
  EXPECT_EQ(b.delay(1000).count(), 5000);  // no overflow on long failures
}

TEST(Backoff, FollowsAnyFactor) {
  Backoff b{100ms, 1000ms, 3.0};
  EXPECT_EQ(b.delay(2).count(), 300);
  EXPECT_EQ(b.delay(3).count(), 900);
  EXPECT_EQ(b.delay(4).count(), 1000);
}

// ---------------------------------------------------------------------------

TEST(PathsBetween, PairsAddressesByIndexWhenBothHostsHaveAsManyNics) {
  auto p = paths_between({"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}, 7000);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].local_address, "10.0.0.1");
  EXPECT_EQ(p[0].remote_address, "10.0.0.2");
  EXPECT_EQ(p[1].local_address, "10.1.0.1");
  EXPECT_EQ(p[1].remote_address, "10.1.0.2");
  EXPECT_EQ(p[1].remote_port, 7000);
}

TEST(PathsBetween, TakesEveryCombinationOtherwise) {
  EXPECT_EQ(paths_between({"a", "b"}, {"x", "y", "z"}, 1).size(), 6u);
  auto any_local = paths_between({}, {"x", "y"}, 1);
  ASSERT_EQ(any_local.size(), 2u);
  EXPECT_EQ(any_local[0].local_address, "");
}

// ---------------------------------------------------------------------------

TEST(StripeWire, FrameHeaderRoundTripsWithEveryChecksumKind) {
  for (auto kind : {ChecksumKind::none, ChecksumKind::crc32c, ChecksumKind::additive}) {
    FrameHeader h;
    h.type = FrameType::nack;
    h.flags = 3;
    h.length = 48;
    h.seq = 0x0123456789abcdefull;
    h.lirs = 77;
    h.lids = 66;
    h.payload_checksum = 0xdeadbeef;
    std::byte out[kStripeHeaderBytes];
    encode_header(h, kind, out);
    auto back = decode_header(out, kind);
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(back->type, h.type);
    EXPECT_EQ(back->flags, h.flags);
    EXPECT_EQ(back->length, h.length);
    EXPECT_EQ(back->seq, h.seq);
    EXPECT_EQ(back->lirs, h.lirs);
    EXPECT_EQ(back->lids, h.lids);
    EXPECT_EQ(back->payload_checksum, h.payload_checksum);
  }
}

TEST(StripeWire, AHeaderWithAFlippedBitIsRefused) {
  for (auto kind : {ChecksumKind::crc32c, ChecksumKind::additive}) {
    FrameHeader h;
    h.length = 1000;
    h.seq = 5000;
    std::byte out[kStripeHeaderBytes];
    encode_header(h, kind, out);
    out[9] ^= std::byte{0x10};
    auto back = decode_header(out, kind);
    ASSERT_FALSE(back);
    EXPECT_NE(back.error().find("checksum"), std::string::npos);
  }
}

TEST(StripeWire, AnUnknownFrameTypeIsRefused) {
  FrameHeader h;
  std::byte out[kStripeHeaderBytes];
  encode_header(h, ChecksumKind::none, out);
  out[0] = std::byte{9};
  EXPECT_FALSE(decode_header(out, ChecksumKind::none));
}

TEST(StripeWire, PathHelloRoundTrips) {
  PathHello h;
  h.reliable = false;
  h.rejoin = true;
  h.checksum = ChecksumKind::additive;
  h.path_index = 2;
  h.path_count = 3;
  h.max_fragment_bytes = 8192;
  h.link_id = 0xfeedfacecafebeefull;
  std::byte out[kPathHelloBytes];
  encode_hello(h, out);
  EXPECT_TRUE(is_path_hello_magic(out));
  auto back = decode_hello(out);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->reliable, false);
  EXPECT_EQ(back->rejoin, true);
  EXPECT_EQ(back->checksum, ChecksumKind::additive);
  EXPECT_EQ(back->path_index, 2);
  EXPECT_EQ(back->path_count, 3);
  EXPECT_EQ(back->max_fragment_bytes, 8192u);
  EXPECT_EQ(back->link_id, h.link_id);
}

TEST(StripeWire, PathHelloRefusesDamageAndNonsense) {
  PathHello h;
  std::byte out[kPathHelloBytes];
  encode_hello(h, out);
  out[30] ^= std::byte{1};
  EXPECT_NE(decode_hello(out).error().find("checksum"), std::string::npos);

  h.path_index = 4;
  h.path_count = 4;
  encode_hello(h, out);
  EXPECT_FALSE(decode_hello(out));

  h.path_index = 0;
  h.version = 9;
  encode_hello(h, out);
  EXPECT_NE(decode_hello(out).error().find("version"), std::string::npos);

  std::uint64_t plain_frame_header = 4096;  // what a TcpLink sends first
  std::memcpy(out, &plain_frame_header, 8);
  EXPECT_FALSE(is_path_hello_magic(out));
}

TEST(StripeWire, HelloMagicReadAsAPlainFrameLengthIsOverAnyFrameLimit) {
  EXPECT_GT(kPathHelloMagic, kDefaultMaxFrameBytes);
}

TEST(StripeWire, HelloReplyRoundTrips) {
  std::byte out[kHelloReplyBytes];
  HelloReply reply{.status = HelloStatus::unknown_link, .nonce = new_path_nonce()};
  reply.tag[0] = std::byte{7};
  reply.tag[31] = std::byte{9};
  encode_hello_reply(reply, out);
  auto back = decode_hello_reply(out);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, HelloStatus::unknown_link);
  EXPECT_EQ(back->nonce, reply.nonce);
  EXPECT_EQ(back->tag, reply.tag);
  out[10] = std::byte{0};
  EXPECT_FALSE(decode_hello_reply(out));  // checksum no longer matches
}

// The tags of path authentication: each side's depends on the key, on both nonces
// (so none can be replayed on another connection) and on its label (so the
// acceptor's can never serve as the connecting side's proof); without a key they are
// zeros.
TEST(StripeWire, PathTagsBindTheKeyBothNoncesAndTheirRole) {
  auto keyed = [](std::uint8_t key) -> PathMac {
    return [key](std::span<const std::byte> input) {
      PathTag tag{};  // a stand-in MAC: any function of key and input will do here
      for (std::size_t i = 0; i < input.size(); ++i) {
        tag[i % tag.size()] = static_cast<std::byte>(static_cast<std::uint8_t>(tag[i % tag.size()]) * 31u +
                                                     static_cast<std::uint8_t>(input[i]) + key);
      }
      return tag;
    };
  };
  PathHello h;
  h.nonce = new_path_nonce();
  std::byte hello[kPathHelloBytes];
  encode_hello(h, hello);
  HelloReply reply{.status = HelloStatus::accepted, .nonce = new_path_nonce()};
  const auto tag = accept_tag(keyed(1), hello, reply);
  EXPECT_TRUE(tags_equal(tag, accept_tag(keyed(1), hello, reply)));
  EXPECT_FALSE(tags_equal(tag, accept_tag(keyed(2), hello, reply)));
  EXPECT_FALSE(tags_equal(tag, proof_tag(keyed(1), hello, reply)));
  HelloReply other = reply;
  other.nonce = new_path_nonce();
  EXPECT_FALSE(tags_equal(tag, accept_tag(keyed(1), hello, other)));
  PathHello again = h;
  again.nonce = new_path_nonce();
  std::byte hello2[kPathHelloBytes];
  encode_hello(again, hello2);
  EXPECT_FALSE(tags_equal(tag, accept_tag(keyed(1), hello2, reply)));
  EXPECT_TRUE(tags_equal(accept_tag(nullptr, hello, reply), PathTag{}));
}

// ---------------------------------------------------------------------------

TEST(SendStream, EncodesFramesExactlyAsAppendFrameDoes) {
  // Several segments (a tiny first segment forces more), odd and even counts.
  for (int values : {1, 5, 40}) {
    capnp::MallocMessageBuilder b(8, capnp::AllocationStrategy::FIXED_SIZE);
    auto data = b.initRoot<canopy::wire::DataPacket>();
    auto list = data.initValues(static_cast<unsigned>(values));
    for (int i = 0; i < values; ++i) list[i].setString(std::string(static_cast<std::size_t>(i * 3), 'x'));
    ASSERT_GT(b.getSegmentsForOutput().size(), 1u);
    canopy::transport::FrameBuffer expected;
    append_frame(b, expected);
    SendStream stream;
    stream.append(b);
    auto bytes = stream.contiguous(0, SIZE_MAX);
    ASSERT_EQ(bytes.size(), expected.size() * 8);
    EXPECT_EQ(std::memcmp(bytes.data(), expected.data(), bytes.size()), 0) << values << " values";
  }
}

TEST(SendStream, FragmentsNeverSpanTwoBlocks) {
  SendStream stream(4096);
  std::vector<std::uint64_t> ends;
  for (int i = 0; i < 20; ++i) {
    capnp::MallocMessageBuilder b;
    build(b, i, 100 + 700 * (i % 7));
    ends.push_back(stream.append(b));
  }
  EXPECT_EQ(stream.begin(), 0u);
  EXPECT_EQ(stream.end(), ends.back());
  std::uint64_t seq = 0;
  std::size_t fragments = 0;
  while (seq < stream.end()) {
    auto bytes = stream.contiguous(seq, 1000);
    ASSERT_GT(bytes.size(), 0u);
    ASSERT_LE(bytes.size(), 1000u);
    seq += bytes.size();
    ++fragments;
  }
  EXPECT_EQ(seq, stream.end());
  EXPECT_GT(fragments, stream.end() / 1000);  // some were cut short at a block's end
}

TEST(SendStream, ReleasesOnlyWholeAcknowledgedBlocks) {
  SendStream stream(4096);
  std::vector<std::uint64_t> ends;
  for (int i = 0; i < 10; ++i) {
    capnp::MallocMessageBuilder b;
    build(b, i, 1500);
    ends.push_back(stream.append(b));
  }
  std::uint64_t held = stream.held_bytes();
  stream.release(ends[0]);  // the first block holds more than one message
  EXPECT_EQ(stream.begin(), 0u);
  stream.release(ends[4]);
  EXPECT_GT(stream.begin(), 0u);
  EXPECT_LE(stream.begin(), ends[4]);
  EXPECT_LT(stream.held_bytes(), held);
  auto bytes = stream.contiguous(ends[4], 8);  // still readable
  EXPECT_EQ(bytes.size(), 8u);
  stream.release(stream.end());
  EXPECT_EQ(stream.held_bytes(), 0u);
}

// Issue 47: a stream kept its released blocks for reuse, for ever: each link of a
// process held a block (1 MB here, 256 KB for a TCP link) once it had sent anything.
// Now the first block is small, blocks grow while the stream is busy, and a stream
// with nothing left to send holds nothing.
TEST(SendStream, HoldsNoMemoryOnceEverythingIsReleased) {
  SendStream stream;
  EXPECT_EQ(stream.allocated_bytes(), 0u);
  capnp::MallocMessageBuilder small;
  build(small, 1, 100);
  stream.append(small);
  EXPECT_LE(stream.allocated_bytes(), 2 * SendStream::kFirstBlockBytes) << "a small frame took a large block";
  stream.release(stream.end());
  EXPECT_EQ(stream.allocated_bytes(), 0u);

  // A burst, released in two steps.
  std::vector<std::uint64_t> ends;
  for (int i = 0; i < 400; ++i) {
    capnp::MallocMessageBuilder b;
    build(b, i, 1500);
    ends.push_back(stream.append(b));
  }
  EXPECT_GE(stream.allocated_bytes(), stream.held_bytes());
  stream.release(ends[200]);
  EXPECT_GE(stream.allocated_bytes(), stream.held_bytes());
  EXPECT_GT(stream.held_bytes(), 0u);
  stream.release(stream.end());
  EXPECT_EQ(stream.held_bytes(), 0u);
  EXPECT_EQ(stream.allocated_bytes(), 0u);
}

// ---------------------------------------------------------------------------

TEST(Reassembly, MessagesSurviveFragmentsInAnyOrderWithDuplicates) {
  SendStream stream(8192);
  std::vector<std::int32_t> sent;
  std::mt19937 rng(1);
  for (int i = 0; i < 60; ++i) {
    capnp::MallocMessageBuilder b;
    build(b, i, rng() % 20000);
    stream.append(b);
    sent.push_back(i);
  }
  auto cuts = cut_all(stream, 1000, ChecksumKind::crc32c);  // odd size: cuts inside words
  auto order = cuts;
  for (std::size_t i = 0; i < cuts.size(); i += 3) order.push_back(cuts[i]);  // duplicates
  std::shuffle(order.begin(), order.end(), rng);

  Reassembler reassembler(ChecksumKind::crc32c);
  FrameReader reader;
  std::vector<std::int32_t> received;
  std::size_t duplicates = 0;
  for (const auto& c : order) {
    auto outcome = reassembler.accept(c.seq, c.payload, c.checksum, reader);
    ASSERT_NE(outcome, Reassembler::Outcome::corrupt);
    if (outcome == Reassembler::Outcome::duplicate) ++duplicates;
    auto tags = read_tags(reader);
    received.insert(received.end(), tags.begin(), tags.end());
  }
  EXPECT_EQ(received, sent);
  EXPECT_EQ(duplicates, order.size() - cuts.size());
  EXPECT_EQ(reassembler.lids(), stream.end());
  EXPECT_EQ(reassembler.lirs(), stream.end());
  EXPECT_EQ(reassembler.held_bytes(), 0u);
  EXPECT_EQ(reassembler.received().ranges(), (std::vector<SeqRange>{{0, stream.end()}}));
  EXPECT_EQ(reassembler.delivered().ranges(), (std::vector<SeqRange>{{0, stream.end()}}));
}

TEST(Reassembly, ACorruptFragmentIsDroppedAndItsResentCopyDelivered) {
  for (auto kind : {ChecksumKind::crc32c, ChecksumKind::additive}) {
    SendStream stream;
    capnp::MallocMessageBuilder b;
    build(b, 7, 5000);
    stream.append(b);
    auto cuts = cut_all(stream, 2048, kind);
    ASSERT_EQ(cuts.size(), 3u);
    Reassembler reassembler(kind);
    FrameReader reader;
    // The middle one arrives first, corrupt: nothing is kept of it.
    auto bad = cuts[1];
    bad.payload[100] ^= std::byte{4};
    EXPECT_EQ(reassembler.accept(bad.seq, bad.payload, bad.checksum, reader), Reassembler::Outcome::corrupt);
    EXPECT_TRUE(reassembler.received().empty());
    EXPECT_EQ(reassembler.accept(cuts[0].seq, cuts[0].payload, cuts[0].checksum, reader),
              Reassembler::Outcome::delivered);
    // In order now, and corrupt again: still refused, still nothing delivered past it.
    EXPECT_EQ(reassembler.accept(bad.seq, bad.payload, bad.checksum, reader), Reassembler::Outcome::corrupt);
    EXPECT_EQ(reassembler.accept(cuts[2].seq, cuts[2].payload, cuts[2].checksum, reader),
              Reassembler::Outcome::held);
    EXPECT_TRUE(read_tags(reader).empty());
    EXPECT_EQ(reassembler.lids(), cuts[1].seq);
    EXPECT_EQ(reassembler.accept(cuts[1].seq, cuts[1].payload, cuts[1].checksum, reader),
              Reassembler::Outcome::delivered);
    EXPECT_EQ(read_tags(reader), std::vector<std::int32_t>{7});
  }
}

TEST(Reassembly, AFragmentResentWithOtherBoundariesAddsOnlyItsNewBytes) {
  // Per-byte sequence numbers let a fragment be resent cut differently (paper 002).
  SendStream stream;
  capnp::MallocMessageBuilder b;
  build(b, 3, 3000);
  stream.append(b);
  auto small = cut_all(stream, 1000, ChecksumKind::crc32c);
  auto large = cut_all(stream, 2500, ChecksumKind::crc32c);
  Reassembler reassembler(ChecksumKind::crc32c);
  FrameReader reader;
  EXPECT_EQ(reassembler.accept(small[1].seq, small[1].payload, small[1].checksum, reader),
            Reassembler::Outcome::held);
  // Covers [0, 2500): delivers [0, 1000), the held [1000, 2000), and [2000, 2500).
  EXPECT_EQ(reassembler.accept(large[0].seq, large[0].payload, large[0].checksum, reader),
            Reassembler::Outcome::delivered);
  EXPECT_EQ(reassembler.lids(), 2500u);
  for (const auto& c : small) reassembler.accept(c.seq, c.payload, c.checksum, reader);
  EXPECT_EQ(reassembler.lids(), stream.end());
  EXPECT_EQ(read_tags(reader), std::vector<std::int32_t>{3});
}

TEST(Reassembly, ReportsTheRangesHeldBeyondAGap) {
  SendStream stream;
  capnp::MallocMessageBuilder b;
  build(b, 1, 10000);
  stream.append(b);
  auto cuts = cut_all(stream, 1000, ChecksumKind::crc32c);
  Reassembler reassembler(ChecksumKind::crc32c);
  FrameReader reader;
  for (std::size_t i : {0u, 2u, 3u, 6u}) reassembler.accept(cuts[i].seq, cuts[i].payload, cuts[i].checksum, reader);
  EXPECT_EQ(reassembler.lirs(), 1000u);
  EXPECT_EQ(reassembler.lids(), 1000u);
  std::vector<SeqRange> held;
  reassembler.received_above_lirs(held, 16);
  EXPECT_EQ(held, (std::vector<SeqRange>{{2000, 4000}, {6000, 7000}}));
  held.clear();
  reassembler.received_above_lirs(held, 1);
  EXPECT_EQ(held.size(), 1u);
  EXPECT_EQ(reassembler.held_bytes(), 3000u);
}

TEST(Reassembly, RefusesAFragmentTooFarAhead) {
  Reassembler reassembler(ChecksumKind::none, 1 << 20);
  FrameReader reader;
  std::vector<std::byte> payload(100);
  EXPECT_EQ(reassembler.accept(2u << 20, payload, 0, reader), Reassembler::Outcome::refused);
  EXPECT_EQ(reassembler.accept(1u << 19, payload, 0, reader), Reassembler::Outcome::held);
}

// ---------------------------------------------------------------------------

namespace {
using Clock = SendWindow::Clock;
using State = SendWindow::State;

// Four fragments of 100 bytes: 0 and 2 on path 0, 1 and 3 on path 1, all written.
SendWindow four_written(Clock::time_point now, const Backoff& backoff) {
  SendWindow w(2);
  for (std::uint32_t i = 0; i < 4; ++i) w.add(i * 100, 100, 0, i % 2);
  for (std::uint32_t i = 0; i < 4; ++i) w.written(i * 100, i % 2, now, &backoff);
  return w;
}
}  // namespace

TEST(SendWindow, AnAcknowledgementFreesTheFragmentsBelowLids) {
  Backoff backoff;
  auto now = Clock::now();
  auto w = four_written(now, backoff);
  EXPECT_EQ(w.unacked_bytes(), 400u);
  EXPECT_EQ(w.in_flight(0), 200u);
  std::vector<std::uint64_t> freed;
  w.acknowledge(200, 200, {}, [&](const SendWindow::Fragment& f) { freed.push_back(f.seq); });
  EXPECT_EQ(freed, (std::vector<std::uint64_t>{0, 100}));
  EXPECT_EQ(w.acked(), 200u);
  EXPECT_EQ(w.unacked_bytes(), 200u);
  EXPECT_EQ(w.in_flight(0), 100u);
  EXPECT_EQ(w.in_flight(1), 100u);
  w.acknowledge(100, 100, {}, nullptr);  // an older acknowledgement changes nothing
  EXPECT_EQ(w.acked(), 200u);
}

TEST(SendWindow, EachFragmentCountsAsAcknowledgedOnceEvenWhenHeldFirst) {
  Backoff backoff;
  auto now = Clock::now();
  auto w = four_written(now, backoff);
  std::vector<std::uint64_t> acked;
  auto note = [&](const SendWindow::Fragment& f) { acked.push_back(f.seq); };
  std::vector<SeqRange> held{{200, 300}};
  w.acknowledge(0, 0, held, note);
  w.acknowledge(0, 0, held, note);  // the same news again
  w.acknowledge(400, 400, {}, note);
  EXPECT_EQ(acked, (std::vector<std::uint64_t>{200, 0, 100, 300}));
}

TEST(SendWindow, FragmentsTheReceiverHoldsAreNeverResent) {
  Backoff backoff{10ms, 100ms, 2.0};
  auto now = Clock::now();
  auto w = four_written(now, backoff);
  std::vector<SeqRange> held{{200, 400}};
  w.acknowledge(0, 0, held, nullptr);
  EXPECT_EQ(w.find(200)->state, State::held);
  EXPECT_EQ(w.expire(now + 1s, nullptr), 2u);  // only 0 and 100 time out
  EXPECT_EQ(w.take_resend(1)->seq, 0u);
  EXPECT_EQ(w.take_resend(1)->seq, 100u);
  EXPECT_EQ(w.take_resend(1), nullptr);
  w.acknowledge(400, 400, {}, nullptr);
  EXPECT_EQ(w.fragments(), 0u);
  EXPECT_EQ(w.in_flight(1), 0u);
}

TEST(SendWindow, ANegativeAcknowledgementQueuesTheFragmentAtOnce) {
  Backoff backoff;
  auto now = Clock::now();
  auto w = four_written(now, backoff);
  EXPECT_EQ(w.reject({150, 250}), 2u);  // overlaps fragments 100 and 200
  EXPECT_TRUE(w.has_resend());
  auto* f = w.take_resend(0);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->seq, 100u);
  EXPECT_EQ(f->path, 0u);
  EXPECT_EQ(f->transmissions, 2u);
  EXPECT_EQ(f->state, State::writing);
}

TEST(SendWindow, AFragmentRejectedWhileStillBeingWrittenIsResentOnceTheWriteCompletes) {
  Backoff backoff;
  SendWindow w(1);
  w.add(0, 100, 0, 0);
  EXPECT_EQ(w.reject({0, 100}), 1u);
  EXPECT_EQ(w.reject({0, 100}), 0u);  // the same news twice changes nothing more
  EXPECT_FALSE(w.has_resend());
  w.written(0, 0, Clock::now(), &backoff);
  EXPECT_EQ(w.find(0)->state, State::queued);
  auto* f = w.take_resend(0);
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->rejected);
  w.written(0, 0, Clock::now(), &backoff);
  EXPECT_EQ(w.find(0)->state, State::sent);
}

TEST(SendWindow, AFailedPathsFragmentsAreQueuedLowestFirst) {
  Backoff backoff;
  auto now = Clock::now();
  SendWindow w(2);
  for (std::uint32_t i = 0; i < 4; ++i) w.add(i * 100, 100, 0, i % 2);
  w.written(100, 1, now, &backoff);  // 300 is still being written
  EXPECT_EQ(w.path_failed(1), 2u);
  EXPECT_EQ(w.in_flight(1), 0u);
  auto* f = w.take_resend(0);
  EXPECT_EQ(f->seq, 100u);
  EXPECT_EQ(w.in_flight(0), 300u);  // 0, 200 and now 100 again
  w.written(300, 1, now, &backoff);  // the failed path's late completion is ignored
  EXPECT_EQ(w.find(300)->state, State::queued);
  EXPECT_EQ(w.take_resend(0)->seq, 300u);
}

TEST(SendWindow, ASuspectPathsFragmentsStillBeingWrittenAreQueuedAtOnce) {
  Backoff backoff;
  auto now = Clock::now();
  SendWindow w(2);
  w.add(0, 100, 0, 0);
  w.add(100, 100, 0, 0);
  w.add(200, 100, 0, 1);
  w.written(0, 0, now, &backoff);  // 100 is still being written on path 0
  EXPECT_EQ(w.path_suspect(0), 1u);
  EXPECT_EQ(w.find(0)->state, State::sent);  // its own deadline covers it
  EXPECT_EQ(w.in_flight(0), 100u);
  EXPECT_EQ(w.take_resend(1)->seq, 100u);
  w.written(100, 0, now, &backoff);  // the stuck write completing after all is ignored
  EXPECT_EQ(w.find(100)->path, 1u);
  EXPECT_EQ(w.find(100)->state, State::writing);
}

TEST(SendWindow, TimeOutsFollowTheBackoffSchedule) {
  Backoff backoff{100ms, 350ms, 2.0};
  auto t0 = Clock::now();
  SendWindow w(1);
  w.add(0, 10, 0, 0);
  w.written(0, 0, t0, &backoff);
  EXPECT_EQ(w.next_deadline(), t0 + 100ms);
  EXPECT_EQ(w.expire(t0 + 99ms, nullptr), 0u);
  auto now = t0 + 100ms;
  std::vector<Clock::duration> waits;
  for (int attempt = 0; attempt < 4; ++attempt) {
    ASSERT_EQ(w.expire(now, nullptr), 1u);
    ASSERT_NE(w.take_resend(0), nullptr);
    w.written(0, 0, now, &backoff);
    waits.push_back(*w.next_deadline() - now);
    now = *w.next_deadline();
  }
  EXPECT_EQ(waits, (std::vector<Clock::duration>{200ms, 350ms, 350ms, 350ms}));
}

TEST(SendWindow, WithoutReliabilityNothingTimesOut) {
  SendWindow w(1);
  w.add(0, 10, 0, 0);
  w.written(0, 0, Clock::now(), nullptr);
  EXPECT_FALSE(w.next_deadline());
  EXPECT_EQ(w.expire(Clock::now() + 1h, nullptr), 0u);
  EXPECT_EQ(w.path_failed(0), 1u);  // but a failed path's fragments still go out again
}
