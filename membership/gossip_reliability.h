// The probability that the gossip failure detector itself fails (paper 003, §5.2-5.3
// and Fig. 4). Each of the n members fails independently with probability f within a
// time unit shorter than T_cleanup. The detector FAILS when every member fails, or
// when some live member has all of its sources (gossip_sources) dead: that member then
// hears from nobody and, after T_cleanup, suspects members that are alive. For BRR,
// n = 4, this is the paper's P_brr(4) = f^4 + 4f^3(1−f) + 4f^2(1−f)^2 (0.0095 at
// f = 0.05).
//
// This counts a live member cut off on its own; a group of live members that hear only
// from each other and the dead is not counted (the paper phrases its simulation as
// "the graph ... is connected", which would count it too).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "canopy/result.h"
#include "membership/gossip_schedule.h"

namespace canopy::membership {

enum class ReliabilityMethod : std::uint8_t { exact, montecarlo };
std::string_view to_string(ReliabilityMethod method);

struct DetectorFailure {
  double p_fail = 0;
  ReliabilityMethod method = ReliabilityMethod::exact;
  // exact: the failure sets enumerated (2^n) and how many of them make the detector
  // fail (unweighted); montecarlo: the draws and how many of them failed.
  std::uint64_t trials = 0;
  std::uint64_t failures = 0;
  // The 95 % confidence interval of p_fail: Wilson's score interval for montecarlo
  // (with no failure observed, [0, 3.84/(trials+3.84)]); p_fail itself for exact.
  double ci_low = 0;
  double ci_high = 0;
};

// The largest n detector_failure_exact accepts (2^24 failure sets, about a second).
inline constexpr std::uint32_t kMaxExactMembers = 24;
// The largest n detector_failure_montecarlo accepts.
inline constexpr std::uint32_t kMaxMonteCarloMembers = 4096;

// The failure rule on one failure set: `dead[m]` says whether member m failed
// (dead.size() is n, at least 2). Fails with invalid_input for `off` or n < 2.
Result<bool> detector_fails(GossipSchedule schedule, const std::vector<bool>& dead);

// Sums the probability of every one of the 2^n failure sets that makes the detector
// fail. Fails with invalid_input for `off`, n outside [2, kMaxExactMembers], or f
// outside [0, 1].
Result<DetectorFailure> detector_failure_exact(GossipSchedule schedule, std::uint32_t n, double f);

struct MonteCarloOptions {
  std::uint64_t trials = 1'000'000;
  std::uint64_t seed = 1;
  // Worker threads. The draws are cut into fixed chunks, each with its own generator
  // seeded from (seed, chunk), so the result depends on the seed, not on this.
  unsigned threads = 1;
};

// Draws `trials` failure sets and counts those that make the detector fail. Fails
// with invalid_input for `off`, n outside [2, kMaxMonteCarloMembers], f outside
// [0, 1], or no trials.
Result<DetectorFailure> detector_failure_montecarlo(GossipSchedule schedule, std::uint32_t n, double f,
                                                    const MonteCarloOptions& options);

// An upper bound on the probability (the union bound over the ways to fail):
// f^n + n(1−f)f^k, k the number of sources of a member, capped at 1. It is exact when
// every member hears from every other (random, RR), and close to p_fail whenever
// p_fail is small. Same preconditions as detector_failure_montecarlo but trials.
Result<double> detector_failure_union_bound(GossipSchedule schedule, std::uint32_t n, double f);

// Wilson's score interval for `failures` out of `trials` draws at z (1.96: 95 %).
struct Interval {
  double low = 0;
  double high = 0;
};
Interval wilson_interval(std::uint64_t failures, std::uint64_t trials, double z = 1.96);

}  // namespace canopy::membership
