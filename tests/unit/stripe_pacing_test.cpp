// docs/striping.md's pacing rules (transport/stripe_pacing.h): the share budget of
// each path ("Striping") and the round-trip estimate with Karn's rule ("Resending").
#include <gtest/gtest.h>

#include <chrono>

#include "transport/stripe_pacing.h"

using namespace canopy::transport;
using namespace std::chrono_literals;
using Clock = SendWindow::Clock;

namespace {

constexpr std::uint64_t kWindow = 16u << 20;   // W, max_unacked_bytes' default
constexpr std::uint64_t kFragment = 64u << 10;  // max_fragment_bytes' default

TEST(PathBudget, ASingleLivePathGetsTheWholeWindow) {
  EXPECT_EQ(path_budget(0, 0, 1, kWindow, kFragment), kWindow);
  EXPECT_EQ(path_budget(5e6, 5e6, 1, kWindow, kFragment), kWindow);
  EXPECT_EQ(path_budget(0, 0, 0, kWindow, kFragment), kWindow);  // a suspect path while none is live
}

TEST(PathBudget, SharesAreEqualBeforeAnyMeasurement) {
  EXPECT_EQ(path_budget(0, 0, 2, kWindow, kFragment), kWindow / 2);
  EXPECT_EQ(path_budget(0, 0, 4, kWindow, kFragment), kWindow / 4);
}

TEST(PathBudget, SharesFollowTheMeasuredThroughputs) {
  // r_p / Σr of W: 3:1 between two paths.
  EXPECT_EQ(path_budget(300, 400, 2, kWindow, kFragment), kWindow * 3 / 4);
  EXPECT_EQ(path_budget(100, 400, 2, kWindow, kFragment), kWindow / 4);
}

TEST(PathBudget, ASlowPathKeepsAQuarterOfAnEqualShare) {
  // 1 / (4n) of W, not r_p / Σr = 1/100: room to show it got faster.
  EXPECT_EQ(path_budget(1, 100, 2, kWindow, kFragment), kWindow / 8);
  EXPECT_EQ(path_budget(1, 1000, 4, kWindow, kFragment), kWindow / 16);
}

TEST(PathBudget, NeverBelowTwoFragments) {
  const std::uint64_t small_window = 100u << 10;  // W/2 = 50 KiB < 2 fragments
  EXPECT_EQ(path_budget(0, 0, 2, small_window, kFragment), 2 * kFragment);
  EXPECT_EQ(path_budget(1, 100, 2, kWindow, 4u << 20), 8u << 20);  // 2 · 4 MiB > W/8
}

TEST(RoundTripEstimate, FollowsRfc6298) {
  RoundTripEstimator rtt;
  EXPECT_FALSE(rtt.srtt_seconds());
  rtt.sample(100ms);  // SRTT = R, RTTVAR = R/2
  EXPECT_DOUBLE_EQ(*rtt.srtt_seconds(), 0.100);
  EXPECT_DOUBLE_EQ(rtt.rttvar_seconds(), 0.050);
  rtt.sample(300ms);  // RTTVAR = ¾·0.05 + ¼·|0.1 − 0.3|, SRTT = ⅞·0.1 + ⅛·0.3
  EXPECT_DOUBLE_EQ(rtt.rttvar_seconds(), 0.75 * 0.050 + 0.25 * 0.200);
  EXPECT_DOUBLE_EQ(*rtt.srtt_seconds(), 0.875 * 0.100 + 0.125 * 0.300);
}

TEST(RoundTripEstimate, TheConfiguredTimeOutIsAFloorAndItsCapACeiling) {
  const Backoff configured{200ms, 5000ms, 2.0};
  RoundTripEstimator rtt;
  EXPECT_EQ(rtt.retransmit(configured).initial, 200ms);  // nothing measured yet
  rtt.sample(10ms);                                        // 10 + 4·5 = 30 ms < 200 ms
  EXPECT_EQ(rtt.retransmit(configured).initial, 200ms);
  RoundTripEstimator slow;
  slow.sample(100ms);  // SRTT + 4·RTTVAR = 100 + 4·50 = 300 ms
  EXPECT_EQ(slow.retransmit(configured).initial, 300ms);
  EXPECT_EQ(slow.retransmit(configured).max, 5000ms);
  RoundTripEstimator very_slow;
  very_slow.sample(2000ms);  // 6 s, over the cap
  EXPECT_EQ(very_slow.retransmit(configured).initial, 5000ms);
}

// Karn's rule, on the send window's own fragments: the acknowledgement of a
// fragment sent twice gives no sample; one sent once does, from its write.
TEST(RoundTripEstimate, KarnsRuleTakesNoSampleFromAResentFragment) {
  const Backoff backoff{100ms, 1000ms, 2.0};
  const auto t0 = Clock::now();
  SendWindow w(1);
  w.add(0, 100, 0, 0);
  w.add(100, 100, 0, 0);
  w.written(0, 0, t0, &backoff);
  w.written(100, 0, t0 + 150ms, &backoff);
  ASSERT_EQ(w.expire(t0 + 100ms, nullptr), 1u);  // fragment 0 times out and is resent
  ASSERT_EQ(w.take_resend(0)->seq, 0u);
  w.written(0, 0, t0 + 900ms, &backoff);

  RoundTripEstimator rtt;
  std::vector<bool> sampled;
  w.acknowledge(100, 100, {}, [&](const SendWindow::Fragment& f) {
    EXPECT_EQ(f.transmissions, 2u);
    sampled.push_back(rtt.on_acknowledged(f, t0 + 1000ms));
  });
  EXPECT_EQ(sampled, std::vector<bool>{false});
  EXPECT_FALSE(rtt.srtt_seconds()) << "a resent fragment's acknowledgement answers either copy";

  w.acknowledge(200, 200, {}, [&](const SendWindow::Fragment& f) {
    EXPECT_EQ(f.transmissions, 1u);
    sampled.push_back(rtt.on_acknowledged(f, t0 + 1000ms));
  });
  EXPECT_EQ(sampled, (std::vector<bool>{false, true}));
  ASSERT_TRUE(rtt.srtt_seconds());
  EXPECT_DOUBLE_EQ(*rtt.srtt_seconds(), 0.850);  // from its write's completion at 150 ms
}

TEST(RoundTripEstimate, AFragmentStillBeingWrittenGivesNoSample) {
  SendWindow w(1);
  w.add(0, 100, 0, 0);  // its write has not completed: no time to measure from
  RoundTripEstimator rtt;
  bool sampled = true;
  w.acknowledge(100, 100, {}, [&](const SendWindow::Fragment& f) { sampled = rtt.on_acknowledged(f, Clock::now()); });
  EXPECT_FALSE(sampled);
  EXPECT_FALSE(rtt.srtt_seconds());
}

}  // namespace
