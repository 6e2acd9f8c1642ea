// Checksums of striped links: CRC-32C (SSE4.2 and table) against published vectors,
// the additive sum, and copying while checksumming.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "transport/checksum.h"

using namespace canopy::transport;

namespace {

struct Vector {
  std::vector<unsigned char> data;
  std::uint32_t crc;
};

// "123456789" is the customary check value; the others are RFC 3720, appendix B.4.
std::vector<Vector> known_vectors() {
  std::vector<Vector> v;
  std::string digits = "123456789";
  v.push_back({{digits.begin(), digits.end()}, 0xE3069283u});
  v.push_back({std::vector<unsigned char>(32, 0x00), 0x8A9136AAu});
  v.push_back({std::vector<unsigned char>(32, 0xFF), 0x62A8AB43u});
  std::vector<unsigned char> up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  v.push_back({up, 0x46DD794Eu});
  v.push_back({down, 0x113FDB5Cu});
  v.push_back({{}, 0u});
  return v;
}

std::vector<unsigned char> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> out(n);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

}  // namespace

TEST(Crc32c, TableImplementationMatchesPublishedVectors) {
  for (const auto& v : known_vectors()) {
    EXPECT_EQ(crc32c_portable(0, v.data.data(), v.data.size()), v.crc) << "length " << v.data.size();
  }
}

TEST(Crc32c, Sse42ImplementationMatchesPublishedVectors) {
  if (!crc32c_hardware_available()) GTEST_SKIP() << "this CPU has no SSE4.2";
  for (const auto& v : known_vectors()) {
    EXPECT_EQ(crc32c_hardware(0, v.data.data(), v.data.size()), v.crc) << "length " << v.data.size();
    EXPECT_EQ(crc32c(0, v.data.data(), v.data.size()), v.crc);
  }
}

TEST(Crc32c, BothImplementationsAgreeAtEveryLengthAndAlignment) {
  if (!crc32c_hardware_available()) GTEST_SKIP() << "this CPU has no SSE4.2";
  auto data = random_bytes(200 * 1024, 7);
  // Every length up to a few interleaving blocks at every alignment, then lengths
  // around the 3 x 8 KiB and 3 x 256 B rounds of the interleaved loop.
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t n = 0; n <= 1600; ++n) {
      ASSERT_EQ(crc32c_hardware(0, data.data() + offset, n), crc32c_portable(0, data.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
  for (std::size_t n : {24575u, 24576u, 24577u, 24576u + 768u, 65536u, 65536u + 5u, 3u * 65536u}) {
    EXPECT_EQ(crc32c_hardware(0, data.data() + 3, n), crc32c_portable(0, data.data() + 3, n)) << "length " << n;
  }
}

TEST(Crc32c, ContinuesFromAnEarlierResult) {
  auto data = random_bytes(100000, 3);
  std::uint32_t whole = crc32c(0, data.data(), data.size());
  for (std::size_t cut : {0u, 1u, 7u, 4096u, 30000u, 99999u}) {
    std::uint32_t first = crc32c(0, data.data(), cut);
    EXPECT_EQ(crc32c(first, data.data() + cut, data.size() - cut), whole) << "cut at " << cut;
    EXPECT_EQ(crc32c_portable(crc32c_portable(0, data.data(), cut), data.data() + cut, data.size() - cut), whole);
  }
}

TEST(Additive32, SumsLittleEndianWordsAndPadsTheLastOne) {
  const unsigned char bytes[] = {1, 0, 0, 0, 2, 0, 0, 0, 3};
  EXPECT_EQ(additive32(0, bytes, sizeof bytes), 6u);
  const unsigned char wraps[] = {0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0};
  EXPECT_EQ(additive32(0, wraps, sizeof wraps), 1u);
  const unsigned char tail[] = {0x10, 0x20, 0x30};
  EXPECT_EQ(additive32(0, tail, sizeof tail), 0x302010u);
  EXPECT_EQ(additive32(0, bytes, 0), 0u);
}

TEST(Additive32, ContinuesAtMultiplesOfFour) {
  auto data = random_bytes(10001, 5);
  std::uint32_t whole = additive32(0, data.data(), data.size());
  for (std::size_t cut : {0u, 4u, 8u, 1000u, 9996u}) {
    EXPECT_EQ(additive32(additive32(0, data.data(), cut), data.data() + cut, data.size() - cut), whole);
  }
}

TEST(CopyAndChecksum, CopiesAndGivesTheSameChecksumForEveryKind) {
  auto data = random_bytes(3 * 65536 + 11, 9);
  for (auto kind : {ChecksumKind::none, ChecksumKind::crc32c, ChecksumKind::additive}) {
    for (std::size_t n : {0u, 1u, 13u, 767u, 768u, 4096u, 65536u, 3u * 65536u + 7u}) {
      std::vector<unsigned char> out(n + 16, 0xAA);
      std::uint32_t sum = copy_and_checksum(kind, out.data() + 1, data.data() + 3, n);
      EXPECT_EQ(sum, checksum(kind, data.data() + 3, n)) << to_string(kind) << " length " << n;
      EXPECT_EQ(std::memcmp(out.data() + 1, data.data() + 3, n), 0) << to_string(kind) << " length " << n;
      EXPECT_EQ(out[0], 0xAA);
      EXPECT_EQ(out[n + 1], 0xAA) << "wrote past the end";
    }
  }
}

TEST(Checksum, EveryKindButNoneCatchesASingleFlippedBit) {
  auto data = random_bytes(65536, 11);
  for (auto kind : {ChecksumKind::crc32c, ChecksumKind::additive}) {
    std::uint32_t good = checksum(kind, data.data(), data.size());
    for (std::size_t bit : {0u, 7u, 8000u, 65536u * 8 - 1}) {
      auto copy = data;
      copy[bit / 8] ^= static_cast<unsigned char>(1u << (bit % 8));
      EXPECT_NE(checksum(kind, copy.data(), copy.size()), good) << to_string(kind) << " bit " << bit;
    }
  }
  EXPECT_EQ(checksum(ChecksumKind::none, data.data(), data.size()), 0u);
}

TEST(Checksum, AdditiveMissesSwappedWordsWhichCrcCatches) {
  // Why CRC-32C is the default: the additive sum cannot see reordering.
  std::array<std::uint32_t, 2> a{1, 2}, b{2, 1};
  EXPECT_EQ(additive32(0, a.data(), 8), additive32(0, b.data(), 8));
  EXPECT_NE(crc32c(0, a.data(), 8), crc32c(0, b.data(), 8));
}

TEST(ChecksumKind, NamesRoundTripAndUnknownNamesAreRefused) {
  for (auto kind : {ChecksumKind::none, ChecksumKind::crc32c, ChecksumKind::additive}) {
    EXPECT_EQ(parse_checksum_kind(to_string(kind)), kind);
  }
  EXPECT_FALSE(parse_checksum_kind("crc32"));
}
