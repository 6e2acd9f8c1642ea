// MRN::Packet (docs/mrnet.md, decisions 1 and 2): every MRNet directive packed from
// varargs and from an argument vector, carried as a Canopy packet through the wire
// encoding, and unpacked with MRNet's rules (the same format string; malloc'd copies).
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <cstdlib>
#include <cstring>

#include "core/codec.h"
#include "mrnet/packet_codec.h"

namespace {

// `packet` as it arrives at another process: Canopy's encoding and back.
MRN::PacketPtr over_the_wire(const MRN::Packet& packet) {
  capnp::MallocMessageBuilder message;
  auto data = message.initRoot<canopy::wire::DataPacket>();
  canopy::core::encode_packet(MRN::codec::to_canopy(packet), data);
  auto back = MRN::codec::from_canopy(canopy::core::decode_packet(data.asReader()), packet.get_StreamId());
  EXPECT_TRUE(back) << back.error();
  return back ? *back : MRN::PacketPtr();
}

TEST(MrnetPacket, EveryScalarDirectiveRoundTripsWithItsWidth) {
  const char* fmt = "%c %uc %hd %uhd %d %ud %ld %uld %f %lf %s";
  MRN::Packet sent(7, FirstApplicationTag + 1, fmt, 'x', 250, -30000, 65000, -2000000000, 4000000000u,
                   static_cast<int64_t>(-9000000000000LL), static_cast<uint64_t>(18000000000000000000ULL), 1.5f, 2.25,
                   "hello");
  ASSERT_FALSE(sent.has_Error());
  EXPECT_EQ(sent.get_NumElements(), 11u);
  auto got = over_the_wire(sent);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->get_Tag(), FirstApplicationTag + 1);
  EXPECT_EQ(got->get_StreamId(), 7u);
  EXPECT_STREQ(got->get_FormatString(), fmt);
  char c = 0;
  unsigned char uc = 0;
  short hd = 0;
  unsigned short uhd = 0;
  int d = 0;
  unsigned ud = 0;
  int64_t ld = 0;
  uint64_t uld = 0;
  float f = 0;
  double lf = 0;
  char* s = nullptr;
  ASSERT_EQ(got->unpack(fmt, &c, &uc, &hd, &uhd, &d, &ud, &ld, &uld, &f, &lf, &s), 0);
  EXPECT_EQ(c, 'x');
  EXPECT_EQ(uc, 250);
  EXPECT_EQ(hd, -30000);
  EXPECT_EQ(uhd, 65000);
  EXPECT_EQ(d, -2000000000);
  EXPECT_EQ(ud, 4000000000u);
  EXPECT_EQ(ld, -9000000000000LL);
  EXPECT_EQ(uld, 18000000000000000000ULL);
  EXPECT_EQ(f, 1.5f);
  EXPECT_EQ(lf, 2.25);
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s, "hello");
  std::free(s);  // a copy the caller owns, as in MRNet
}

TEST(MrnetPacket, EveryArrayDirectiveRoundTripsAsAMallocdCopy) {
  const char chars[] = {'a', 'b', 'c'};
  const unsigned char uchars[] = {1, 255};
  const short shorts[] = {-1, 2, -32768};
  const unsigned short ushorts[] = {65535};
  const int ints[] = {1, -2, 3, -4};
  const unsigned uints[] = {7u, 4000000000u};
  const int64_t longs[] = {-5000000000LL};
  const uint64_t ulongs[] = {1, 2, 3};
  const float floats[] = {0.5f, -1.25f};
  const double doubles[] = {3.5};
  const char* strings[] = {"x", "", "yz"};
  const char* fmt = "%ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as";
  MRN::Packet sent(1, 100, fmt, chars, 3u, uchars, 2u, shorts, 3u, ushorts, 1u, ints, 4u, uints, 2u, longs, 1u,
                   ulongs, 3u, floats, 2u, doubles, 1u, strings, 3u);
  ASSERT_FALSE(sent.has_Error());
  auto got = over_the_wire(sent);
  ASSERT_TRUE(got);
  char* c;
  unsigned char* uc;
  short* hd;
  unsigned short* uhd;
  int* d;
  unsigned* ud;
  int64_t* ld;
  uint64_t* uld;
  float* f;
  double* lf;
  char** s;
  uint32_t n[11] = {};
  ASSERT_EQ(got->unpack(fmt, &c, &n[0], &uc, &n[1], &hd, &n[2], &uhd, &n[3], &d, &n[4], &ud, &n[5], &ld, &n[6], &uld,
                        &n[7], &f, &n[8], &lf, &n[9], &s, &n[10]),
            0);
  EXPECT_EQ((std::vector<uint32_t>(n, n + 11)), (std::vector<uint32_t>{3, 2, 3, 1, 4, 2, 1, 3, 2, 1, 3}));
  EXPECT_EQ(std::memcmp(c, chars, 3), 0);
  EXPECT_EQ(std::memcmp(uc, uchars, 2), 0);
  EXPECT_EQ(std::memcmp(hd, shorts, sizeof shorts), 0);
  EXPECT_EQ(uhd[0], 65535);
  EXPECT_EQ(std::memcmp(d, ints, sizeof ints), 0);
  EXPECT_EQ(std::memcmp(ud, uints, sizeof uints), 0);
  EXPECT_EQ(ld[0], -5000000000LL);
  EXPECT_EQ(std::memcmp(uld, ulongs, sizeof ulongs), 0);
  EXPECT_EQ(std::memcmp(f, floats, sizeof floats), 0);
  EXPECT_EQ(lf[0], 3.5);
  EXPECT_STREQ(s[0], "x");
  EXPECT_STREQ(s[1], "");
  EXPECT_STREQ(s[2], "yz");
  for (void* p : {(void*)c, (void*)uc, (void*)hd, (void*)uhd, (void*)d, (void*)ud, (void*)ld, (void*)uld, (void*)f,
                  (void*)lf}) {
    std::free(p);
  }
  for (int i = 0; i < 3; ++i) std::free(s[i]);
  std::free(s);
}

TEST(MrnetPacket, LargeArraysTakeAndGiveSixtyFourBitCounts) {
  const int ints[] = {9, 8};
  MRN::Packet sent(1, 100, "%Ad", ints, static_cast<uint64_t>(2));
  ASSERT_FALSE(sent.has_Error());
  auto got = over_the_wire(sent);
  ASSERT_TRUE(got);
  int* d = nullptr;
  uint64_t n = 0;
  ASSERT_EQ(got->unpack("%Ad", &d, &n), 0);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(d[1], 8);
  std::free(d);
}

TEST(MrnetPacket, TheArgumentVectorFormTakesPointers) {
  int d = 42;
  const char* s = "vec";
  const double values[] = {1, 2, 3};
  uint32_t count = 3;
  const void* slots[] = {&d, s, values, &count};
  MRN::Packet sent(1, 100, slots, "%d %s %alf");
  ASSERT_FALSE(sent.has_Error());
  int d2 = 0;
  char* s2 = nullptr;
  double* v2 = nullptr;
  uint32_t n2 = 0;
  ASSERT_EQ(over_the_wire(sent)->unpack("%d %s %alf", &d2, &s2, &v2, &n2), 0);
  EXPECT_EQ(d2, 42);
  EXPECT_STREQ(s2, "vec");
  EXPECT_EQ(n2, 3u);
  EXPECT_EQ(v2[2], 3.0);
  std::free(s2);
  std::free(v2);
}

TEST(MrnetPacket, UnpackNeedsTheSenderSFormatExactlyAndEmptyArraysAreNull) {
  MRN::Packet sent(1, 100, "%d %d", 1, 2);
  int a = 0, b = 0;
  EXPECT_EQ(sent.unpack("%d%d", &a, &b), -1) << "MRNet compares format strings character for character";
  EXPECT_EQ(sent.unpack(nullptr), -1);
  EXPECT_EQ(sent.unpack("%d %d", &a, &b), 0);
  EXPECT_EQ(b, 2);
  MRN::Packet empty(1, 100, "");
  EXPECT_EQ(empty.get_NumElements(), 0u);
  EXPECT_EQ(over_the_wire(empty)->unpack(""), 0);
  int* none = reinterpret_cast<int*>(1);
  uint32_t n = 9;
  MRN::Packet zero(1, 100, "%ad", static_cast<int*>(nullptr), 0u);
  ASSERT_FALSE(zero.has_Error());
  ASSERT_EQ(over_the_wire(zero)->unpack("%ad", &none, &n), 0);
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(n, 0u);
}

// Decision 1: where the values' Canopy types give the format back, packets travel
// without it (every hop encodes and decodes less); any other format travels first,
// and both come back as sent.
TEST(MrnetPacket, FormatsTheValuesGiveBackTravelWithoutTheFormatString) {
  auto encoded_bytes = [](const canopy::Packet& p) {
    capnp::MallocMessageBuilder message;
    canopy::core::encode_packet(p, message.initRoot<canopy::wire::DataPacket>());
    return message.sizeInWords() * 8;
  };
  const std::int32_t ints[] = {1, 2};
  const char* strings[] = {"a"};
  struct Case {
    MRN::PacketPtr packet;
    bool compact;
  };
  const std::vector<Case> cases{
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%d", 5)), true},
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%d %lf %s", 5, 1.5, "x")), true},
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%ad %as %uld", ints, 2u, strings, 1u, static_cast<uint64_t>(7))), true},
      {MRN::PacketPtr(new MRN::Packet(1, 100, "", 0)), true},
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%hd", 5)), false},     // carried as an int32: "%d" would come back
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%d%d", 5, 6)), false},  // not single blanks
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%d ", 5)), false},
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%s %d", "x", 5)), false},  // a string first is the format
      {MRN::PacketPtr(new MRN::Packet(1, 100, "%Ad", ints, static_cast<uint64_t>(2))), false},
  };
  for (const auto& c : cases) {
    const std::string format = c.packet->get_FormatString();
    ASSERT_FALSE(c.packet->has_Error()) << format;
    const canopy::Packet sent = MRN::codec::to_canopy(*c.packet);
    const bool with_format = sent.size() > 0 && std::holds_alternative<std::string>(sent[0]) &&
                             std::get<std::string>(sent[0]) == format;
    EXPECT_EQ(!with_format, c.compact) << "\"" << format << "\"";
    if (c.compact) {
      const canopy::Packet full = MRN::codec::to_canopy(*c.packet, MRN::codec::Form::with_format);
      EXPECT_LT(encoded_bytes(sent), encoded_bytes(full)) << "\"" << format << "\"";
      // Either form is understood on receipt.
      auto from_full = MRN::codec::from_canopy(full, 1);
      ASSERT_TRUE(from_full) << from_full.error();
      EXPECT_EQ((*from_full)->get_FormatString(), format);
    }
    auto back = over_the_wire(*c.packet);
    ASSERT_TRUE(back) << "\"" << format << "\"";
    EXPECT_EQ(std::string(back->get_FormatString()), format);
    EXPECT_EQ(back->get_NumElements(), c.packet->get_NumElements());
    EXPECT_EQ(back->impl().values, c.packet->impl().values) << "\"" << format << "\"";
  }
}

TEST(MrnetPacket, BadInputIsAnErrorNotACrash) {
  MRN::Packet null_string(1, 100, "%s", static_cast<const char*>(nullptr));
  EXPECT_TRUE(null_string.has_Error());
  MRN::Packet unknown(1, 100, "%q", 1);
  EXPECT_TRUE(unknown.has_Error());
  EXPECT_EQ(MRN::Fmt2Type("Auld"), MRN::UINT64_LRG_ARRAY_T);
  EXPECT_EQ(MRN::Fmt2Type("lu"), MRN::UNKNOWN_T);
  // A Canopy packet that is no MRNet packet (a format its values do not match) is
  // refused with the reason.
  EXPECT_FALSE(MRN::codec::from_canopy(canopy::Packet(100, {std::string("%d %d"), std::int32_t{1}}), 1));
  EXPECT_FALSE(MRN::codec::from_canopy(canopy::Packet(100, {std::string("%hd"), std::uint32_t{1}}), 1));
}

}  // namespace
