// What integer_union's front-end and back-ends agree on.
//
// The front-end broadcasts, on the incremental_union stream, one start packet:
//   tag kStartTag, "%d %d %ud %s": waves, integers per wave, the id of the check
//   stream, and a directory to record into ("" = none).
// Back-end r then sends `waves` packets "%ad" on that stream (tag = wave number), the
// integers of backend_waves(r, ...); then, on the check stream (filter `union`), one
// packet "%ad" tag kFullSetTag with every integer it sent, sorted and distinct.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace integer_union {

inline constexpr std::int32_t kStartTag = -1;
inline constexpr std::int32_t kFullSetTag = -2;
// Small enough that back-ends, and waves of one back-end, send many equal integers.
inline constexpr std::int32_t kRange = 500;

// The integers back-end `rank` sends, wave by wave: pseudo-random, seeded by the
// rank, so a run can be repeated and each back-end sends something different.
inline std::vector<std::vector<std::int32_t>> backend_waves(std::uint32_t rank, int waves, int per_wave) {
  std::mt19937 random(rank);
  std::uniform_int_distribution<std::int32_t> value(0, kRange - 1);
  std::vector<std::vector<std::int32_t>> out(waves);
  for (auto& wave : out) {
    for (int i = 0; i < per_wave; ++i) wave.push_back(value(random));
  }
  return out;
}

}  // namespace integer_union
