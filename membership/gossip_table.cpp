#include "membership/gossip_table.h"

#include <limits>

namespace canopy::membership {
namespace {

void put_varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

// The varint at bytes[at...], advancing `at`; false if it is truncated or longer
// than a UInt64 takes (10 bytes, the last holding one bit).
bool get_varint(std::span<const std::uint8_t> bytes, std::size_t& at, std::uint64_t& v) {
  v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (at >= bytes.size()) return false;
    const std::uint8_t b = bytes[at++];
    if (shift == 63 && b > 1) return false;
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

std::uint64_t zigzag(std::uint64_t difference) {
  const auto d = static_cast<std::int64_t>(difference);
  return (static_cast<std::uint64_t>(d) << 1) ^ static_cast<std::uint64_t>(d >> 63);
}

std::uint64_t unzigzag(std::uint64_t z) { return (z >> 1) ^ (~(z & 1) + 1); }

}  // namespace

std::vector<std::uint8_t> encode_table(std::span<const TableEntry> entries) {
  std::vector<std::uint8_t> out;
  out.reserve(entries.size() * 3);
  Rank rank = 0;
  std::uint64_t beat = 0;
  for (const auto& e : entries) {
    put_varint(out, e.rank - rank);
    put_varint(out, zigzag(e.beat - beat));  // modulo 2^64: any two beats have a difference
    rank = e.rank;
    beat = e.beat;
  }
  return out;
}

Result<std::vector<TableEntry>> decode_table(std::span<const std::uint8_t> bytes) {
  std::vector<TableEntry> entries;
  std::uint64_t rank = 0, beat = 0;
  std::size_t at = 0;
  while (at < bytes.size()) {
    std::uint64_t rank_step = 0, beat_step = 0;
    if (!get_varint(bytes, at, rank_step) || !get_varint(bytes, at, beat_step))
      return Error{"gossip table: entry " + std::to_string(entries.size()) + " is cut short or malformed at byte " +
                   std::to_string(at)};
    if (!entries.empty() && rank_step == 0)
      return Error{"gossip table: entry " + std::to_string(entries.size()) + " repeats rank " + std::to_string(rank)};
    if (rank_step > std::numeric_limits<Rank>::max() - rank)
      return Error{"gossip table: entry " + std::to_string(entries.size()) + " has a rank past 2^32"};
    rank += rank_step;
    beat += unzigzag(beat_step);
    entries.push_back({static_cast<Rank>(rank), beat});
  }
  return entries;
}

}  // namespace canopy::membership
