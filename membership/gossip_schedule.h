// Gossip schedules of paper 003 (Genaud & Rattanapoka, §4-5): whom a member sends its
// heartbeat table to in each round, how long a cycle is, and how long a heartbeat
// may stay still before its member is suspect (T_cleanup). Pure functions over ring
// positions: member s of n (0 <= s < n), round r counted from 1 within a cycle.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "canopy/fault_tolerance.h"

namespace canopy::membership {

using canopy::GossipSchedule;

using canopy::to_string;
using canopy::gossip_schedule_from;

// ⌈log2 n⌉ (0 for n <= 1).
std::uint32_t ceil_log2(std::uint32_t n);

// Rounds in one cycle: RR n−1, BRR ⌈log2 n⌉, DBRR 2⌈log2 n⌉, random 1 (every round
// alike); at least 1.
std::uint32_t cycle_rounds(GossipSchedule schedule, std::uint32_t n);

// The destination of member s's message in round r (1 <= r <= cycle_rounds):
//   RR   (eq. 1)  (s + r) mod n
//   BRR  (eq. 2)  (s + 2^(r−1)) mod n
//   DBRR (eq. 3)  BRR for r <= ⌈log2 n⌉, then (s − 2^(r−⌈log2 n⌉−1)) mod n
//   random        any member but s, drawn from `rng`
// n must be at least 2.
std::uint32_t gossip_target(GossipSchedule schedule, std::uint32_t s, std::uint32_t r, std::uint32_t n,
                            std::mt19937_64& rng);

// The members that send to d in some round of a cycle (its "sources"), ascending;
// for random, every other member.
std::vector<std::uint32_t> gossip_sources(GossipSchedule schedule, std::uint32_t d, std::uint32_t n);

// T_cleanup in rounds of T_gossip (paper §5.2-5.3): RR ⌈ρ⌉ with ρ(ρ+1)/2 = n (the
// minimum, T_cleanup^min); BRR 2⌈log2 n⌉; DBRR 3⌈log2 n⌉; random, which has no bound,
// 2⌈log2 n⌉ like BRR. At least 1. T_max_hangup is added on top by the detector.
std::uint32_t cleanup_rounds(GossipSchedule schedule, std::uint32_t n);

}  // namespace canopy::membership
