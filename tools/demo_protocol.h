// The demo workload shared by `canopy run` and canopy-demo-backend (docs/demo.md).
//
// The front-end broadcasts one packet on the stream:
//   tag kStartTag, "%d %d %d": waves, interval in ms, shape (0: "%d", 1: "%ad")
// and the back-end of rank r answers with `waves` packets; packet w (from 0) has tag
// w and holds w*1000 + r, as an int32 or as a one-element int32 array.
//   tag kEchoTag, any values: the back-end sends the same packet straight back
// (used for round-trip measurements).
#pragma once

#include <cstdint>

namespace canopy::demo {

inline constexpr std::int32_t kStartTag = -1;
inline constexpr std::int32_t kEchoTag = -2;
// The union workload (docs/demo.md): "%d %d %s": rate in Hz, duration in ms, record
// directory ("" = do not record). Each back-end sends one random integer in
// [0, kUnionRange) per tick as a one-element array, then its end marker.
inline constexpr std::int32_t kUnionStartTag = -3;
inline constexpr std::int32_t kUnionRange = 1000000;
// Beside the union (canopy run --workload union --sum-stream): no values, on a
// stream of its own, before the union's start. At each tick of the union the
// back-end of rank r then also sends, on this stream, tick*1000 + r (demo_value):
// a sum over it is checked wave by wave, through failures (docs/demo.md).
inline constexpr std::int32_t kUnionSumTag = -4;

// The negative integer a back-end sends last, so the front-end knows it is done.
inline std::int32_t union_end_marker(std::uint32_t rank) { return -1 - static_cast<std::int32_t>(rank); }
// The end marker of a back-end whose record could not be written (a full disk): it
// sent no integer after the first it could not record, so that its record still
// holds everything it sent. Back-end ranks are below kRecordFailed.
inline constexpr std::int32_t kRecordFailed = 1 << 30;
inline std::int32_t union_record_failed_marker(std::uint32_t rank) {
  return union_end_marker(rank) - kRecordFailed;
}

inline std::int32_t demo_value(std::int32_t wave, std::uint32_t rank) {
  return wave * 1000 + static_cast<std::int32_t>(rank);
}

}  // namespace canopy::demo
