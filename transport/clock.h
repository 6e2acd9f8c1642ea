// canopy::NodeClock and canopy::Timer: the time every time-out of a node reads.
//
// In a process, NodeClock is std::chrono::steady_clock under another name. Tests that
// run a whole tree inside one process (tests/node) stop it with ManualTime and move
// it by hand, so that heartbeats, suspicion, adoption deadlines and wave time-outs of
// seconds pass in microseconds of real time, in an order the test controls.
//
// What reads it: every timer of the node core and its services (Timer), a link's
// last_sent()/last_received(), and the times that recovery reports measure. What
// does not: the striped link's own retransmission and path timers (they pace real
// sockets), and the front-end's waits for its user.
#pragma once

#include <boost/asio/basic_waitable_timer.hpp>

#include <atomic>
#include <chrono>
#include <optional>

namespace canopy {

struct NodeClock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<NodeClock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept {
    if (manual_.load(std::memory_order_relaxed)) {
      return time_point(duration(manual_now_.load(std::memory_order_relaxed)));
    }
    return time_point(std::chrono::steady_clock::now().time_since_epoch());
  }
  static bool manual() noexcept { return manual_.load(std::memory_order_relaxed); }

 private:
  friend class ManualTime;
  friend struct NodeClockWaitTraits;
  static void note_expiry(duration from_now) noexcept;
  static std::atomic<bool> manual_;
  static std::atomic<rep> manual_now_;
  static std::atomic<rep> nearest_expiry_;  // manual time: see ManualTime::take_nearest_expiry()
};

// While one exists, NodeClock stands still except when advance() moves it. It starts at
// the real time of its creation, so time points taken before stay in the past. One
// at a time; the clock is real again when it goes.
class ManualTime {
 public:
  ManualTime();
  ~ManualTime();
  ManualTime(const ManualTime&) = delete;
  ManualTime& operator=(const ManualTime&) = delete;

  void advance(NodeClock::duration by);

  // The nearest expiry of a pending timer that an io_context looked at since the
  // last call, if any. An io_context looks at its nearest timer whenever it checks its
  // timers, which under manual time is on every poll(); so after polling every
  // io_context once, this is when the next timer is due (a test can move time
  // straight there).
  std::optional<NodeClock::time_point> take_nearest_expiry();
};

// How long the io_context may sleep before it looks at its timers again: as long as
// the nearest expiry in real time; not at all under ManualTime, where only advance()
// brings an expiry nearer (the test polls its io_contexts rather than sleeping in
// them).
struct NodeClockWaitTraits {
  static NodeClock::duration to_wait_duration(const NodeClock::duration& d) {
    if (!NodeClock::manual()) return d;
    NodeClock::note_expiry(d);
    return NodeClock::duration::zero();
  }
  static NodeClock::duration to_wait_duration(const NodeClock::time_point& t) {
    if (NodeClock::manual()) return to_wait_duration(t - NodeClock::now());
    const auto now = NodeClock::now();
    return t > now ? t - now : NodeClock::duration::zero();
  }
};

using Timer = boost::asio::basic_waitable_timer<NodeClock, NodeClockWaitTraits>;

}  // namespace canopy
