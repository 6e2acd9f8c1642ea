// The probability that the gossip detector fails (membership/gossip_reliability.h),
// against paper 003's P_brr(4) (§5.2) and closed forms worked out by hand here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "membership/gossip_reliability.h"

namespace canopy::membership {
namespace {

std::vector<bool> dead_set(std::uint32_t n, std::initializer_list<std::uint32_t> dead) {
  std::vector<bool> out(n, false);
  for (auto m : dead) out[m] = true;
  return out;
}

bool fails(GossipSchedule schedule, std::uint32_t n, std::initializer_list<std::uint32_t> dead) {
  auto r = detector_fails(schedule, dead_set(n, dead));
  EXPECT_TRUE(r) << r.error();
  return r && *r;
}

double exact(GossipSchedule schedule, std::uint32_t n, double f) {
  auto r = detector_failure_exact(schedule, n, f);
  EXPECT_TRUE(r) << r.error();
  return r ? r->p_fail : NAN;
}

TEST(GossipReliability, BrrOfFourAtFivePercentIsThePapersPbrr4) {
  // §5.2: P_brr(4) = f^4 + 4f^3(1−f) + 4f^2(1−f)^2 = 0.0095 at f = 0.05.
  const double f = 0.05;
  const double paper = std::pow(f, 4) + 4 * std::pow(f, 3) * (1 - f) + 4 * f * f * (1 - f) * (1 - f);
  EXPECT_NEAR(paper, 0.00950625, 1e-15);
  auto r = detector_failure_exact(GossipSchedule::brr, 4, f);
  ASSERT_TRUE(r) << r.error();
  EXPECT_NEAR(r->p_fail, 0.00950625, 1e-15);
  EXPECT_EQ(r->method, ReliabilityMethod::exact);
  EXPECT_EQ(r->trials, 16u);
  EXPECT_EQ(r->failures, 9u) << "the paper's 4 pairs, 4 triples and the whole set";
  EXPECT_EQ(r->ci_low, r->p_fail);
  EXPECT_EQ(r->ci_high, r->p_fail);
}

TEST(GossipReliability, BrrOfFourFailsForThePapersFourPairsAndEveryTripleOnly) {
  // §5.2: of the pairs, {2,3}, {0,3}, {0,1} and {1,2} leave a member without sources.
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {0, 1})) << "node 2 hears from nobody (Fig. 3)";
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {1, 2}));
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {2, 3}));
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {0, 3}));
  EXPECT_FALSE(fails(GossipSchedule::brr, 4, {0, 2}));
  EXPECT_FALSE(fails(GossipSchedule::brr, 4, {1, 3}));
  for (std::uint32_t m = 0; m < 4; ++m) {
    EXPECT_FALSE(fails(GossipSchedule::brr, 4, {m})) << "one death never isolates a member of 4";
  }
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {1, 2, 3}));
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {0, 2, 3}));
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {0, 1, 3}));
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {0, 1, 2}));
  EXPECT_TRUE(fails(GossipSchedule::brr, 4, {0, 1, 2, 3}));
  EXPECT_FALSE(fails(GossipSchedule::brr, 4, {}));
}

TEST(GossipReliability, WhereEveryoneHearsFromEveryoneTheDetectorFailsOnlyWithNMinusOneDeaths) {
  // Random and RR (and DBRR for n = 4) make every other member a source, so the
  // detector fails with n−1 or n deaths: f^n + n·f^(n−1)·(1−f).
  auto closed = [](std::uint32_t n, double f) { return std::pow(f, n) + n * std::pow(f, n - 1) * (1 - f); };
  EXPECT_NEAR(exact(GossipSchedule::random, 5, 0.3), closed(5, 0.3), 1e-15);
  EXPECT_NEAR(exact(GossipSchedule::rr, 5, 0.3), closed(5, 0.3), 1e-15);
  EXPECT_NEAR(exact(GossipSchedule::rr, 12, 0.5), closed(12, 0.5), 1e-15);
  EXPECT_NEAR(exact(GossipSchedule::dbrr, 4, 0.05), closed(4, 0.05), 1e-15);
  EXPECT_NEAR(*detector_failure_union_bound(GossipSchedule::random, 5, 0.3), closed(5, 0.3), 1e-15);
}

TEST(GossipReliability, BrrOfTwoFailsWithAnyDeath) {
  // Each of the two hears only from the other.
  EXPECT_NEAR(exact(GossipSchedule::brr, 2, 0.05), 1 - 0.95 * 0.95, 1e-15);
}

TEST(GossipReliability, BrrAndDbrrOfEightFailFirstWhenOneMembersSourcesAllDie) {
  // BRR, n = 8: member d hears from d−1, d−2, d−4; the 8 such triples are distinct, so
  // for small f, p ≈ 8f^3(1−f)^5. DBRR adds d+1, d+2 (d+4 = d−4): 5 sources, 8f^5(1−f)^3.
  // The next terms are below 70·f^4 and 56·f^6.
  const double f = 1e-4;
  EXPECT_NEAR(exact(GossipSchedule::brr, 8, f) / (8 * std::pow(f, 3) * std::pow(1 - f, 5)), 1.0, 1e-3);
  EXPECT_NEAR(exact(GossipSchedule::dbrr, 8, f) / (8 * std::pow(f, 5) * std::pow(1 - f, 3)), 1.0, 1e-3);
}

TEST(GossipReliability, ExactAgreesWithTheRuleAppliedToEveryFailureSet) {
  // The same sum, set by set through detector_fails instead of the bit masks.
  for (auto [schedule, n] : {std::pair{GossipSchedule::brr, 6u}, std::pair{GossipSchedule::dbrr, 10u},
                             std::pair{GossipSchedule::brr, 11u}}) {
    const double f = 0.2;
    double p = 0;
    for (std::uint32_t set = 0; set < (1u << n); ++set) {
      std::vector<bool> dead(n);
      int k = 0;
      for (std::uint32_t m = 0; m < n; ++m) {
        dead[m] = (set >> m & 1) != 0;
        k += dead[m] ? 1 : 0;
      }
      if (*detector_fails(schedule, dead)) p += std::pow(f, k) * std::pow(1 - f, n - k);
    }
    EXPECT_NEAR(exact(schedule, n, f), p, 1e-12) << to_string(schedule) << " n=" << n;
  }
}

TEST(GossipReliability, TheUnionBoundIsNeverBelowTheExactProbability) {
  for (auto schedule : {GossipSchedule::random, GossipSchedule::rr, GossipSchedule::brr, GossipSchedule::dbrr}) {
    for (std::uint32_t n = 2; n <= 16; ++n) {
      for (double f : {0.05, 0.3}) {
        const double p = exact(schedule, n, f);
        EXPECT_LE(p, *detector_failure_union_bound(schedule, n, f) * (1 + 1e-12))
            << to_string(schedule) << " n=" << n << " f=" << f;
      }
    }
  }
}

TEST(GossipReliability, MonteCarloAgreesWithExactWithinFourStandardErrors) {
  // BRR with n = 11 and 13 at a low f: most failures are exactly one member's sources
  // dead, and no source of d is also a member d sends to (n is not 2^i + 2^j), so the
  // draws must look for the isolated member in the right direction around the ring.
  struct Case {
    GossipSchedule schedule;
    std::uint32_t n;
    double f;
  };
  for (auto c : {Case{GossipSchedule::brr, 8, 0.3}, Case{GossipSchedule::dbrr, 12, 0.4},
                 Case{GossipSchedule::random, 10, 0.7}, Case{GossipSchedule::rr, 6, 0.5},
                 Case{GossipSchedule::brr, 20, 0.2}, Case{GossipSchedule::brr, 11, 0.15},
                 Case{GossipSchedule::brr, 13, 0.15}}) {
    const std::uint64_t trials = 200'000;
    auto mc = detector_failure_montecarlo(c.schedule, c.n, c.f, {.trials = trials, .seed = 42, .threads = 2});
    ASSERT_TRUE(mc) << mc.error();
    const double p = exact(c.schedule, c.n, c.f);
    const double sigma = std::sqrt(p * (1 - p) / trials);
    EXPECT_GT(p, 1e-3) << "a case where failures are common enough to compare";
    EXPECT_NEAR(mc->p_fail, p, 4 * sigma) << to_string(c.schedule) << " n=" << c.n;
    EXPECT_EQ(mc->method, ReliabilityMethod::montecarlo);
    EXPECT_EQ(mc->trials, trials);
    EXPECT_DOUBLE_EQ(mc->p_fail, static_cast<double>(mc->failures) / trials);
    EXPECT_LE(mc->ci_low, mc->p_fail);
    EXPECT_GE(mc->ci_high, mc->p_fail);
  }
}

TEST(GossipReliability, MonteCarloDependsOnTheSeedNotOnTheThreads) {
  auto one = detector_failure_montecarlo(GossipSchedule::brr, 16, 0.3, {.trials = 300'000, .seed = 9, .threads = 1});
  auto two = detector_failure_montecarlo(GossipSchedule::brr, 16, 0.3, {.trials = 300'000, .seed = 9, .threads = 2});
  ASSERT_TRUE(one && two);
  EXPECT_EQ(one->failures, two->failures);
  EXPECT_GT(one->failures, 0u);
}

TEST(GossipReliability, CertainAndImpossibleFailures) {
  for (auto schedule : {GossipSchedule::random, GossipSchedule::rr, GossipSchedule::brr, GossipSchedule::dbrr}) {
    EXPECT_EQ(exact(schedule, 9, 0.0), 0.0);
    EXPECT_NEAR(exact(schedule, 9, 1.0), 1.0, 1e-15);
    auto none = detector_failure_montecarlo(schedule, 100, 0.0, {.trials = 1000});
    auto all = detector_failure_montecarlo(schedule, 100, 1.0, {.trials = 1000});
    ASSERT_TRUE(none && all);
    EXPECT_EQ(none->failures, 0u);
    EXPECT_EQ(all->failures, 1000u);
  }
}

TEST(GossipReliability, WilsonIntervalMatchesHandComputedValues) {
  auto zero = wilson_interval(0, 1'000'000);
  EXPECT_EQ(zero.low, 0.0);
  EXPECT_NEAR(zero.high, 3.8416 / (1'000'000 + 3.8416), 1e-12) << "z^2/(N+z^2) with no failure seen";
  auto half = wilson_interval(50, 100);
  EXPECT_NEAR(half.low, 0.40383, 1e-5);
  EXPECT_NEAR(half.high, 0.59617, 1e-5);
}

TEST(GossipReliability, RefusesWhatIsNotAQuestion) {
  auto refused = [](const auto& r) { return !r && r.error_kind() == ErrorKind::invalid_input; };
  EXPECT_TRUE(refused(detector_failure_exact(GossipSchedule::off, 4, 0.05)));
  EXPECT_TRUE(refused(detector_failure_exact(GossipSchedule::brr, 1, 0.05)));
  EXPECT_TRUE(refused(detector_failure_exact(GossipSchedule::brr, 25, 0.05)));
  EXPECT_TRUE(refused(detector_failure_exact(GossipSchedule::brr, 4, -0.01)));
  EXPECT_TRUE(refused(detector_failure_exact(GossipSchedule::brr, 4, 1.01)));
  EXPECT_TRUE(refused(detector_failure_exact(GossipSchedule::brr, 4, std::numeric_limits<double>::quiet_NaN())));
  EXPECT_TRUE(refused(detector_failure_montecarlo(GossipSchedule::brr, 4, 0.05, {.trials = 0})));
  EXPECT_TRUE(refused(detector_failure_montecarlo(GossipSchedule::dbrr, kMaxMonteCarloMembers + 1, 0.05, {})));
  EXPECT_TRUE(refused(detector_fails(GossipSchedule::brr, {true})));
  EXPECT_TRUE(refused(detector_failure_union_bound(GossipSchedule::off, 8, 0.05)));
}

}  // namespace
}  // namespace canopy::membership
