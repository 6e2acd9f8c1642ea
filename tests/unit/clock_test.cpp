// canopy::NodeClock under ManualTime: timers fire when time is moved past their expiry,
// not before, and the clock is real again afterwards.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include "transport/clock.h"

#include <filesystem>
#include <memory>
#include <vector>

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
  // The time is read before the timer is made: its expiry is 20 ms after it is made,
  // so a start read afterwards would make a wait that is exact look short.
  const auto start = std::chrono::steady_clock::now();
  Timer timer(io, 20ms);
  bool fired = false;
  timer.async_wait([&](const boost::system::error_code& ec) { fired = !ec; });
  io.run();
  EXPECT_TRUE(fired);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
}


// A timer makes asio's timer when it is first armed (most never are); until then it
// has nothing to cancel and expires at the epoch, as asio's own timer does, and armed
// late it waits and is cancelled as asio's does.
TEST(Clock, ATimerArmedLateBehavesAsOneArmedFromTheStart) {
  boost::asio::io_context io;
  ManualTime time;
  Timer late(io);
  EXPECT_EQ(late.expiry(), Timer::time_point{});
  EXPECT_EQ(late.cancel(), 0u);
  EXPECT_EQ(late.expires_after(5s), 0u);
  std::vector<std::string> fired;
  late.async_wait([&](const boost::system::error_code& ec) { fired.push_back(ec ? "aborted" : "late"); });
  Timer never(io);  // never armed: its end aborts nothing
  EXPECT_EQ(late.expires_after(2s), 1u);  // moving it aborts the pending wait
  late.async_wait([&](const boost::system::error_code& ec) { fired.push_back(ec ? "aborted again" : "late again"); });
  io.poll();
  EXPECT_EQ(fired, (std::vector<std::string>{"aborted"}));
  time.advance(2s);
  io.poll();
  EXPECT_EQ(fired, (std::vector<std::string>{"aborted", "late again"}));
  EXPECT_LE(sizeof(Timer), 2 * sizeof(void*)) << "an unarmed timer holds nothing but its io_context and an empty pointer";
}

// ---- timers in a TimerQueue (the simulator's, sim/) ----

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(TimerQueue, ATimerFiresWhenItsOwnerFiresWhatIsDueAndOnTheIoContext) {
  boost::asio::io_context io;
  auto& queue = TimerQueue::install(io);
  ManualTime time;
  const auto start = NodeClock::now();
  Timer later(io, 7s), sooner(io, 3s);
  std::vector<std::string> fired;
  later.async_wait([&](const boost::system::error_code& ec) { fired.push_back(ec ? "later aborted" : "later"); });
  sooner.async_wait([&](const boost::system::error_code& ec) { fired.push_back(ec ? "sooner aborted" : "sooner"); });
  ASSERT_TRUE(queue.next_expiry());
  EXPECT_EQ(*queue.next_expiry() - start, 3s);
  EXPECT_EQ(queue.fire_due(NodeClock::now()), 0u);
  io.poll();
  EXPECT_TRUE(fired.empty());
  time.advance(3s);
  EXPECT_EQ(queue.fire_due(NodeClock::now()), 1u);
  EXPECT_TRUE(fired.empty()) << "a handler runs on the io_context, not inside fire_due()";
  io.poll();
  EXPECT_EQ(fired, std::vector<std::string>{"sooner"});
  EXPECT_EQ(*queue.next_expiry() - start, 7s);
  time.advance(10s);
  queue.fire_due(NodeClock::now());
  io.poll();
  EXPECT_EQ(fired, (std::vector<std::string>{"sooner", "later"}));
  EXPECT_FALSE(queue.next_expiry());
}

TEST(TimerQueue, CancelMovingTheExpiryAndTheTimersEndAbortWhatIsPending) {
  boost::asio::io_context io;
  auto& queue = TimerQueue::install(io);
  ManualTime time;
  std::vector<std::string> fired;
  auto note = [&](std::string name) {
    return [&fired, name](const boost::system::error_code& ec) { fired.push_back(name + (ec == boost::asio::error::operation_aborted ? " aborted" : "")); };
  };
  Timer a(io, 1s), b(io, 2s);
  auto c = std::make_unique<Timer>(io, 3s);
  a.async_wait(note("a"));
  b.async_wait(note("b"));
  c->async_wait(note("c"));
  EXPECT_EQ(a.cancel(), 1u);
  EXPECT_EQ(b.expires_after(5s), 1u);
  b.async_wait(note("b again"));
  c.reset();
  io.poll();
  EXPECT_EQ(fired, (std::vector<std::string>{"a aborted", "b aborted", "c aborted"}));
  EXPECT_EQ(a.cancel(), 0u) << "nothing pending any more";
  time.advance(5s);
  EXPECT_EQ(queue.fire_due(NodeClock::now()), 1u);
  io.poll();
  EXPECT_EQ(fired.back(), "b again");
  EXPECT_FALSE(queue.next_expiry());
}

// Asio's timers need the io_context's reactor, which holds three descriptors; a
// thousand simulated processes each with one were refused under a limit of 1,024.
TEST(TimerQueue, IoContextsWhoseTimersWaitInAQueueHoldNoDescriptor) {
  const std::size_t before = open_descriptors();
  std::vector<std::unique_ptr<boost::asio::io_context>> ios;
  std::vector<std::unique_ptr<Timer>> timers;
  for (int i = 0; i < 50; ++i) {
    auto& io = *ios.emplace_back(std::make_unique<boost::asio::io_context>(1));
    TimerQueue::install(io);
    timers.push_back(std::make_unique<Timer>(io, 1h));
    timers.back()->async_wait([](const boost::system::error_code&) {});
    io.poll();
  }
  EXPECT_EQ(open_descriptors(), before);
}

}  // namespace
}  // namespace canopy
