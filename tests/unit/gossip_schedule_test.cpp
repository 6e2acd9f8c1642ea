// The gossip schedules of paper 003 (membership/gossip_schedule.h) against the paper's
// own figures and formulas: eq. 1 (RR, Fig. 2's table for n = 6), eq. 2 (BRR, the n = 4
// example of §4), eq. 3 (DBRR), the cycle lengths and T_cleanup of §4 and §5.3. Every
// expectation is written out by hand or computed here with plain signed arithmetic,
// never by the function under test.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "membership/gossip_schedule.h"

namespace canopy::membership {
namespace {

using Members = std::vector<std::uint32_t>;

// Every destination of member s over one cycle, in round order.
Members targets_of(GossipSchedule schedule, std::uint32_t s, std::uint32_t n) {
  std::mt19937_64 unused;
  Members out;
  for (std::uint32_t r = 1; r <= cycle_rounds(schedule, n); ++r) {
    out.push_back(gossip_target(schedule, s, r, n, unused));
  }
  return out;
}

// x mod n for a possibly negative x, as the paper's "mod" means it.
std::uint32_t ring(std::int64_t x, std::int64_t n) { return static_cast<std::uint32_t>(((x % n) + n) % n); }

TEST(GossipSchedule, RoundRobinForSixMembersIsThePapersFigure2) {
  // Fig. 2, row r lists s -> d for s = 0..5.
  const std::vector<Members> figure2 = {
      {1, 2, 3, 4, 5, 0},  // r = 1
      {2, 3, 4, 5, 0, 1},  // r = 2
      {3, 4, 5, 0, 1, 2},  // r = 3
      {4, 5, 0, 1, 2, 3},  // r = 4
      {5, 0, 1, 2, 3, 4},  // r = 5
  };
  ASSERT_EQ(cycle_rounds(GossipSchedule::rr, 6), 5u) << "a cycle is n-1 = 5 rounds";
  std::mt19937_64 unused;
  for (std::uint32_t r = 1; r <= 5; ++r) {
    for (std::uint32_t s = 0; s < 6; ++s) {
      EXPECT_EQ(gossip_target(GossipSchedule::rr, s, r, 6, unused), figure2[r - 1][s]) << "r=" << r << " s=" << s;
    }
  }
}

TEST(GossipSchedule, RoundRobinSourcesAreEveryOtherMember) {
  EXPECT_EQ(gossip_sources(GossipSchedule::rr, 0, 6), (Members{1, 2, 3, 4, 5}));
  EXPECT_EQ(gossip_sources(GossipSchedule::rr, 4, 6), (Members{0, 1, 2, 3, 5}));
}

TEST(GossipSchedule, BinaryRoundRobinForFourMembersSendsOneThenTwoAhead) {
  ASSERT_EQ(cycle_rounds(GossipSchedule::brr, 4), 2u);
  EXPECT_EQ(targets_of(GossipSchedule::brr, 0, 4), (Members{1, 2}));
  EXPECT_EQ(targets_of(GossipSchedule::brr, 1, 4), (Members{2, 3}));
  EXPECT_EQ(targets_of(GossipSchedule::brr, 2, 4), (Members{3, 0}));
  EXPECT_EQ(targets_of(GossipSchedule::brr, 3, 4), (Members{0, 1}));
}

TEST(GossipSchedule, BinaryRoundRobinNodeTwoOfFourHearsOnlyFromNodesZeroAndOne) {
  // §4: "node 2 gets incoming messages from node 1 (in the 1st round) and from node 0
  // (2nd round) only".
  EXPECT_EQ(gossip_sources(GossipSchedule::brr, 2, 4), (Members{0, 1}));
  EXPECT_EQ(gossip_sources(GossipSchedule::brr, 0, 4), (Members{2, 3}));
  EXPECT_EQ(gossip_sources(GossipSchedule::brr, 3, 4), (Members{1, 2}));
}

TEST(GossipSchedule, BinaryRoundRobinOfANonPowerOfTwoFollowsEquation2) {
  // n = 10: ⌈log2 10⌉ = 4 rounds, offsets 1, 2, 4, 8.
  EXPECT_EQ(targets_of(GossipSchedule::brr, 0, 10), (Members{1, 2, 4, 8}));
  EXPECT_EQ(targets_of(GossipSchedule::brr, 7, 10), (Members{8, 9, 1, 5}));
  EXPECT_EQ(gossip_sources(GossipSchedule::brr, 0, 10), (Members{2, 6, 8, 9}));
}

TEST(GossipSchedule, DoubleBinaryRoundRobinForEightGoesClockwiseThenCounterClockwise) {
  // ⌈log2 8⌉ = 3: rounds 1-3 add 1, 2, 4; rounds 4-6 subtract 1, 2, 4.
  ASSERT_EQ(cycle_rounds(GossipSchedule::dbrr, 8), 6u);
  EXPECT_EQ(targets_of(GossipSchedule::dbrr, 0, 8), (Members{1, 2, 4, 7, 6, 4}));
  EXPECT_EQ(targets_of(GossipSchedule::dbrr, 5, 8), (Members{6, 7, 1, 4, 3, 1}));
  // Sources of 0: 7, 6, 4 (clockwise) and 1, 2, 4 (counter-clockwise); 4 twice.
  EXPECT_EQ(gossip_sources(GossipSchedule::dbrr, 0, 8), (Members{1, 2, 4, 6, 7}));
}

TEST(GossipSchedule, DoubleBinaryRoundRobinOfTenFollowsEquation3) {
  // ⌈log2 10⌉ = 4: rounds 1-4 add 1, 2, 4, 8; rounds 5-8 subtract 1, 2, 4, 8.
  ASSERT_EQ(cycle_rounds(GossipSchedule::dbrr, 10), 8u);
  EXPECT_EQ(targets_of(GossipSchedule::dbrr, 0, 10), (Members{1, 2, 4, 8, 9, 8, 6, 2}));
  EXPECT_EQ(targets_of(GossipSchedule::dbrr, 3, 10), (Members{4, 5, 7, 1, 2, 1, 9, 5}));
}

TEST(GossipSchedule, DoubleBinaryRoundRobinOfSixFollowsEquation3ForEveryMember) {
  // Equation 3 in signed arithmetic: (s + 2^(r-1)) mod n for r <= 3, then
  // (s - 2^(r-3-1)) mod n.
  const std::int64_t n = 6, half = 3;
  ASSERT_EQ(cycle_rounds(GossipSchedule::dbrr, 6), 6u);
  std::mt19937_64 unused;
  for (std::int64_t s = 0; s < n; ++s) {
    for (std::int64_t r = 1; r <= 2 * half; ++r) {
      const std::uint32_t expected = r <= half ? ring(s + (std::int64_t{1} << (r - 1)), n)
                                                 : ring(s - (std::int64_t{1} << (r - half - 1)), n);
      EXPECT_EQ(gossip_target(GossipSchedule::dbrr, static_cast<std::uint32_t>(s), static_cast<std::uint32_t>(r), 6,
                              unused),
                expected)
          << "s=" << s << " r=" << r;
    }
  }
  EXPECT_EQ(targets_of(GossipSchedule::dbrr, 0, 6), (Members{1, 2, 4, 5, 4, 2}));
  EXPECT_EQ(gossip_sources(GossipSchedule::dbrr, 0, 6), (Members{1, 2, 4, 5}));
}

TEST(GossipSchedule, CeilLog2) {
  EXPECT_EQ(ceil_log2(1), 0u);
  EXPECT_EQ(ceil_log2(2), 1u);
  EXPECT_EQ(ceil_log2(3), 2u);
  EXPECT_EQ(ceil_log2(4), 2u);
  EXPECT_EQ(ceil_log2(5), 3u);
  EXPECT_EQ(ceil_log2(1024), 10u);
  EXPECT_EQ(ceil_log2(1025), 11u);
}

TEST(GossipSchedule, CycleRoundsAreNMinusOneForRrLogForBrrTwiceLogForDbrr) {
  EXPECT_EQ(cycle_rounds(GossipSchedule::rr, 6), 5u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::rr, 64), 63u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::brr, 4), 2u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::brr, 10), 4u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::brr, 64), 6u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::dbrr, 4), 4u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::dbrr, 10), 8u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::dbrr, 64), 12u);
  EXPECT_EQ(cycle_rounds(GossipSchedule::random, 64), 1u);
}

TEST(GossipSchedule, CleanupIsTwiceLogForBrrAndThriceLogForDbrr) {
  // §4: BRR T_cleanup = 2⌈log2 n⌉ T_gossip; §5.3: DBRR 3⌈log2 n⌉ T_gossip.
  EXPECT_EQ(cleanup_rounds(GossipSchedule::brr, 4), 4u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::brr, 10), 8u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::brr, 256), 16u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::dbrr, 4), 6u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::dbrr, 10), 12u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::dbrr, 256), 24u);
}

TEST(GossipSchedule, RoundRobinCleanupIsTheCeilingOfRhoWithRhoTimesRhoPlusOneOverTwoEqualToN) {
  // ρ(ρ+1)/2 = n: n = 6 → ρ = 3; 10 → 4 (both triangular, so exactly); 11 → 4.14 → 5;
  // 64 → 10.8 → 11; 55 → 10 and 5050 → 100 (triangular), 56 → 11.
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 6), 3u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 10), 4u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 11), 5u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 64), 11u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 55), 10u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 56), 11u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 5050), 100u);
  // The extremes, computed in integers: 1 → 1; 2^32 - 1 → 92682 (92681 · 92682 / 2 is
  // 4,294,930,221, one short of 92682's 4,295,022,903).
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 1), 1u);
  EXPECT_EQ(cleanup_rounds(GossipSchedule::rr, 4294967295u), 92682u);
}

TEST(GossipSchedule, RandomNeverTargetsItselfAndReachesEveryOtherMember) {
  const std::uint32_t n = 7, s = 3;
  std::mt19937_64 rng(12345);
  std::map<std::uint32_t, int> hits;
  const int draws = 7000;
  for (int i = 0; i < draws; ++i) {
    const std::uint32_t d = gossip_target(GossipSchedule::random, s, 1, n, rng);
    ASSERT_NE(d, s);
    ASSERT_LT(d, n);
    ++hits[d];
  }
  EXPECT_EQ(hits.size(), n - 1u) << "every other member is drawn";
  for (auto [d, count] : hits) {
    // 1,166 expected per member; a fair draw stays well within ±20 %.
    EXPECT_GT(count, draws / 6 * 8 / 10) << "member " << d;
    EXPECT_LT(count, draws / 6 * 12 / 10) << "member " << d;
  }
  EXPECT_EQ(gossip_sources(GossipSchedule::random, 3, 5), (Members{0, 1, 2, 4}));
}

TEST(GossipSchedule, NoScheduleEverTargetsTheSenderItself) {
  std::mt19937_64 rng(7);
  for (auto schedule : {GossipSchedule::random, GossipSchedule::rr, GossipSchedule::brr, GossipSchedule::dbrr}) {
    for (std::uint32_t n = 2; n <= 70; ++n) {
      const std::uint32_t rounds = cycle_rounds(schedule, n);
      for (std::uint32_t s = 0; s < n; ++s) {
        for (std::uint32_t r = 1; r <= rounds; ++r) {
          const std::uint32_t d = gossip_target(schedule, s, r, n, rng);
          ASSERT_NE(d, s) << to_string(schedule) << " n=" << n << " r=" << r;
          ASSERT_LT(d, n) << to_string(schedule) << " n=" << n << " r=" << r;
        }
      }
    }
  }
}

TEST(GossipSchedule, ParseAcceptsTheFiveNamesAndRefusesOthers) {
  for (std::string name : {"off", "random", "rr", "brr", "dbrr"}) {
    auto parsed = gossip_schedule_from(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(to_string(*parsed), name);
  }
  EXPECT_EQ(gossip_schedule_from("brr"), GossipSchedule::brr);
  EXPECT_EQ(gossip_schedule_from("dbrr"), GossipSchedule::dbrr);
  for (std::string bad : {"", "BRR", "dbrr ", " rr", "binary", "round-robin", "rrr", "on"}) {
    EXPECT_FALSE(gossip_schedule_from(bad)) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace canopy::membership
