// The gossip table's compact encoding (membership/gossip_table.h).
#include "membership/gossip_table.h"

#include <gtest/gtest.h>

#include <random>

namespace canopy::membership {
namespace {

std::vector<std::uint8_t> bytes(std::initializer_list<int> list) {
  std::vector<std::uint8_t> out;
  for (int b : list) out.push_back(static_cast<std::uint8_t>(b));
  return out;
}

TEST(GossipTable, EntriesComeBackAsTheyWent) {
  std::mt19937_64 rng(7);
  std::vector<TableEntry> entries;
  Rank rank = 0;
  for (int i = 0; i < 1000; ++i) {
    rank += 1 + static_cast<Rank>(rng() % 3);
    entries.push_back({rank, rng() % 4 == 0 ? rng() : 400 + rng() % 100});
  }
  entries.push_back({0xFFFFFFFFu, ~std::uint64_t{0}});
  auto decoded = decode_table(encode_table(entries));
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(*decoded, entries);
}

TEST(GossipTable, DenseRanksWithCloseBeatsCostTwoBytesAMember) {
  std::vector<TableEntry> entries;
  for (Rank r = 0; r < 1024; ++r) entries.push_back({r, 460 + (r * 37) % 41});
  const auto encoded = encode_table(entries);
  // The first beat takes 2 bytes, every other entry 1 + 1.
  EXPECT_EQ(encoded.size(), 2 * 1024u + 1);
}

TEST(GossipTable, AnEmptyTableIsNoBytes) {
  EXPECT_TRUE(encode_table({}).empty());
  auto decoded = decode_table({});
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->empty());
}

TEST(GossipTable, ABeatOfAnotherEpochRoundTrips) {
  const std::vector<TableEntry> entries{{3, 500}, {4, (std::uint64_t{2} << 40) | 7}, {9, 498}};
  auto decoded = decode_table(encode_table(entries));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(*decoded, entries);
}

TEST(GossipTable, ACutShortEntryIsRefused) {
  auto encoded = encode_table(std::vector<TableEntry>{{1, 300}, {2, 301}});
  encoded.pop_back();
  auto decoded = decode_table(encoded);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find("entry 1 is cut short"), std::string::npos) << decoded.error();
  // A rank without its beat, and a varint whose last byte says more follows.
  EXPECT_FALSE(decode_table(bytes({5})));
  EXPECT_FALSE(decode_table(bytes({5, 0x80})));
}

TEST(GossipTable, AVarintLongerThanSixtyFourBitsIsRefused) {
  EXPECT_FALSE(decode_table(bytes({0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0})));
  EXPECT_FALSE(decode_table(bytes({1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02})));
  // Ten bytes with a last byte of 1 is the largest UInt64, and fine.
  EXPECT_TRUE(decode_table(bytes({1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01})));
}

TEST(GossipTable, RanksPastUInt32OrNotAscendingAreRefused) {
  auto past = decode_table(bytes({0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0, 1, 0}));
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().find("past 2^32"), std::string::npos) << past.error();
  auto repeated = decode_table(bytes({4, 0, 0, 0}));
  ASSERT_FALSE(repeated);
  EXPECT_NE(repeated.error().find("repeats rank 4"), std::string::npos) << repeated.error();
}

}  // namespace
}  // namespace canopy::membership
