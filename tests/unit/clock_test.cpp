// canopy::NodeClock under ManualTime: timers fire when time is moved past their expiry,
// not before, and the clock is real again afterwards.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "transport/clock.h"

namespace canopy {
namespace {

using namespace std::chrono_literals;

TEST(Clock, ATimerFiresOnlyWhenManualTimeReachesItsExpiry) {
  boost::asio::io_context io;
  bool fired = false;
  {
    ManualTime time;
    Timer timer(io, 5s);
    timer.async_wait([&](const boost::system::error_code& ec) { fired = !ec; });
    io.poll();
    EXPECT_FALSE(fired) << "no time has passed";
    time.advance(4999ms);
    io.poll();
    EXPECT_FALSE(fired) << "1 ms early";
    time.advance(1ms);
    io.poll();
    EXPECT_TRUE(fired);
  }
}

TEST(Clock, ManualTimeKnowsTheNearestPendingTimerOnceItsIoContextWasPolled) {
  boost::asio::io_context io;
  ManualTime time;
  const auto start = NodeClock::now();
  Timer later(io, 7s), sooner(io, 3s);
  later.async_wait([](const boost::system::error_code&) {});
  sooner.async_wait([](const boost::system::error_code&) {});
  time.take_nearest_expiry();
  io.poll();
  auto nearest = time.take_nearest_expiry();
  ASSERT_TRUE(nearest);
  EXPECT_EQ(*nearest - start, 3s);
  EXPECT_FALSE(time.take_nearest_expiry()) << "taken";
  time.advance(*nearest - start);
  io.poll();  // `sooner` fires
  io.poll();
  nearest = time.take_nearest_expiry();
  ASSERT_TRUE(nearest);
  EXPECT_EQ(*nearest - start, 7s);
}

TEST(Clock, ManualTimeStandsStillThenMovesByWhatItIsGivenAndIsRealAgainAfterwards) {
  NodeClock::time_point before, after;
  {
    ManualTime time;
    EXPECT_TRUE(NodeClock::manual());
    before = NodeClock::now();
    EXPECT_EQ(NodeClock::now(), before);
    time.advance(1h);
    after = NodeClock::now();
    EXPECT_EQ(after - before, 1h);
    EXPECT_THROW(ManualTime second, std::logic_error) << "one manual time at a time";
  }
  EXPECT_FALSE(NodeClock::manual());
  EXPECT_LT(NodeClock::now(), after) << "real time, which has not moved an hour";
  EXPECT_GE(NodeClock::now(), before);
}

TEST(Clock, ARealTimerStillWaitsInRealTime) {
  boost::asio::io_context io;
  Timer timer(io, 20ms);
  const auto start = std::chrono::steady_clock::now();
  bool fired = false;
  timer.async_wait([&](const boost::system::error_code& ec) { fired = !ec; });
  io.run();
  EXPECT_TRUE(fired);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
}

}  // namespace
}  // namespace canopy
