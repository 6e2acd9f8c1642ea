// Packets: format strings, typed values and their wire encoding.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include "canopy/packet.h"
#include "core/codec.h"

using canopy::Bytes;
using canopy::Packet;
using canopy::Value;

namespace {

Packet round_trip(const Packet& p) {
  capnp::MallocMessageBuilder builder;
  auto data = builder.initRoot<canopy::wire::DataPacket>();
  canopy::core::encode_packet(p, data);
  return canopy::core::decode_packet(data.asReader());
}

}  // namespace

TEST(Packet, PackBuildsValuesOfTheFormatsTypes) {
  auto p = Packet::pack(7, "%d %lf %ad %s", 5, 2.5, std::vector<int>{1, 2}, "hi");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->tag(), 7);
  EXPECT_EQ(p->format(), "%d %lf %ad %s");
  EXPECT_EQ(std::get<std::int32_t>((*p)[0]), 5);
  EXPECT_EQ(std::get<double>((*p)[1]), 2.5);
  EXPECT_EQ(std::get<std::vector<std::int32_t>>((*p)[2]), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(std::get<std::string>((*p)[3]), "hi");
}

TEST(Packet, PackRejectsAWrongCountOrKind) {
  EXPECT_FALSE(Packet::pack(0, "%d %d", 1));
  auto wrong = Packet::pack(0, "%d", "text");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find("argument 1"), std::string::npos) << wrong.error();
  EXPECT_FALSE(Packet::pack(0, "%lf", 3));  // an integer is not a double
}

TEST(Packet, UnknownFormatCodeIsNamed) {
  auto p = Packet::pack(0, "%d %q", 1, 2);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("\"%q\""), std::string::npos) << p.error();
}

TEST(Packet, UnpackReadsWhatPackWrote) {
  auto p = Packet::pack(1, "%uld %as %f", std::uint64_t{1} << 40, std::vector<std::string>{"a", "b"}, 1.5f);
  ASSERT_TRUE(p);
  std::uint64_t big = 0;
  std::vector<std::string> names;
  float f = 0;
  ASSERT_TRUE(p->unpack("%uld %as %f", big, names, f));
  EXPECT_EQ(big, std::uint64_t{1} << 40);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f, 1.5f);
}

TEST(Packet, UnpackWithTheWrongFormatFails) {
  Packet p{0, {std::int32_t{1}}};
  double d;
  EXPECT_FALSE(p.unpack("%lf", d));
  std::int32_t a, b;
  EXPECT_FALSE(p.unpack("%d %d", a, b));
}

TEST(PacketEncoding, EveryValueTypeSurvivesTheWire) {
  Packet p{-3,
           {std::int32_t{-1}, std::int64_t{-1} << 40, std::uint32_t{4000000000u}, std::uint64_t{1} << 63, 1.25f,
            -2.5, std::string("text\0with nul", 13), Bytes{{0, 255, 7}}, std::vector<std::int32_t>{1, -2},
            std::vector<std::int64_t>{3}, std::vector<std::uint32_t>{}, std::vector<std::uint64_t>{9, 8},
            std::vector<float>{0.5f}, std::vector<double>{1e300}, std::vector<std::string>{"x", ""}}};
  p.set_source(42);
  p.set_contributors(16);
  EXPECT_EQ(round_trip(p), p);
}

TEST(PacketEncoding, EmptyPacketSurvivesTheWire) {
  Packet p{0, {}};
  EXPECT_EQ(round_trip(p), p);
}

TEST(PacketRendering, JsonAndTextForms) {
  EXPECT_EQ(canopy::to_json(Value{std::vector<std::int32_t>{1, 2}}), "[1,2]");
  EXPECT_EQ(canopy::to_string(Value{std::vector<std::int32_t>{1, 2}}), "[1, 2]");
  EXPECT_EQ(canopy::to_json(Value{std::string("a\"b")}), "\"a\\\"b\"");
  EXPECT_EQ(canopy::to_json(Value{48120}), "48120");
}
