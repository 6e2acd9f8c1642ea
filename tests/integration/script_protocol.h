// Commands understood by script_backend (see there), shared with the tests.
#pragma once

#include <cstdint>

namespace canopy::script {

inline constexpr std::int32_t kReply = 10;    // "%d %d": slow rank, delay ms -> {rank}
inline constexpr std::int32_t kRelay = 11;    // "%ud %ud": from, to -> peer packet
inline constexpr std::int32_t kPeer = 12;     // point-to-point: {from}
inline constexpr std::int32_t kRelayed = 13;  // up the stream: {from, to}
inline constexpr std::int32_t kUnion = 14;    // "%d %d": count, interval ms -> count packets
                                              // {[union_value(rank, i)]}, i = 0..count-1
inline constexpr std::int32_t kGossip = 15;   // no arguments -> {[schedule, period ms, ping time-out ms]}
                                              // of Backend::gossip()
inline constexpr std::int32_t kEcho = 16;     // "%ad": any int32 array -> {rank, the array as received}
inline constexpr std::int32_t kDrain = 17;    // "%d": n -> takes n kItem packets with try_receive()
                                              // alone, then {n taken, or -1 if one more came}
inline constexpr std::int32_t kItem = 18;     // taken by kDrain

inline std::int32_t union_value(std::uint32_t rank, std::int32_t i) {
  return static_cast<std::int32_t>(rank) * 100000 + i;
}

}  // namespace canopy::script
