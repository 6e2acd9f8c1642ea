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
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

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

class Timer;

// Timers that whoever runs an io_context keeps itself, in place of the io_context's
// reactor. Where this service is on an io_context (TimerQueue::install(io), before
// any Timer on it is armed), every canopy::Timer on that io_context waits here; the
// owner asks when the nearest wait falls due and has the due ones fired.
// The simulator (sim/) runs thousands of processes on io_contexts of their own: a
// reactor holds three descriptors, this none.
class TimerQueue final : public boost::asio::execution_context::service {
 public:
  using key_type = TimerQueue;
  static boost::asio::execution_context::id id;

  explicit TimerQueue(boost::asio::io_context& io);
  // Puts a queue on `io` (owned by it) and returns it.
  static TimerQueue& install(boost::asio::io_context& io);

  // When the nearest pending wait falls due, if any wait is pending.
  std::optional<NodeClock::time_point> next_expiry() const;
  // Posts the handler of every wait due at `now` to the io_context, nearest first
  // (they run when it is polled); how many.
  std::size_t fire_due(NodeClock::time_point now);

 private:
  friend class Timer;
  struct Wait {
    Timer* timer;
    std::function<void(const boost::system::error_code&)> handler;
    // Pending, it is work of the io_context's, as an asio timer's wait is: poll()
    // and run() do not stop for want of work while it waits.
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  };
  using Waits = std::multimap<NodeClock::time_point, Wait>;

  void shutdown() override;
  Waits::iterator add(NodeClock::time_point at, Timer* timer,
                      std::function<void(const boost::system::error_code&)> handler);
  // Posts the wait's handler with `ec` and forgets it.
  void complete(Waits::iterator wait, const boost::system::error_code& ec);

  boost::asio::io_context& io_;
  Waits waits_;
};

// What every time-out of a node waits on: boost::asio's waitable timer on NodeClock,
// or, on an io_context with a TimerQueue, a wait in that queue. The same calls, with
// asio's meaning: a handler always runs on the io_context, never inside the call that
// completes it; moving the expiry, cancel() and the timer's end complete pending
// waits with operation_aborted.
class Timer {
 public:
  using clock_type = NodeClock;
  using duration = NodeClock::duration;
  using time_point = NodeClock::time_point;

  explicit Timer(boost::asio::io_context& io);
  Timer(boost::asio::io_context& io, duration expiry_from_now);
  Timer(boost::asio::io_context& io, time_point expiry);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  time_point expiry() const;
  std::size_t expires_at(time_point at);
  std::size_t expires_after(duration from_now) { return expires_at(NodeClock::now() + from_now); }
  std::size_t cancel();

  template <typename Handler>
  void async_wait(Handler&& handler) {
    State& s = state();
    if (s.queue) {
      s.waits.push_back(s.queue->add(s.expiry, this, std::forward<Handler>(handler)));
    } else if (!s.queued) {
      real().async_wait(std::forward<Handler>(handler));
    }  // else the queue's io_context is gone: its handlers are destroyed, not run
  }

 private:
  friend class TimerQueue;
  using AsioTimer = boost::asio::basic_waitable_timer<NodeClock, NodeClockWaitTraits>;
  // Made when the timer is first armed: most of a process's timers never are (a
  // back-end's launch, healing and stream timers). An unarmed Timer is two
  // pointers; asio's timer alone is 128 bytes (docs/scale.md).
  struct State {
    // On a TimerQueue (found when first armed): the expiry and the pending waits
    // are kept here. Without one: asio's timer.
    bool queued = false;
    TimerQueue* queue = nullptr;  // null once the queue is shut down
    time_point expiry{};
    std::vector<TimerQueue::Waits::iterator> waits;  // pending, in the queue
    std::unique_ptr<AsioTimer> real;
  };
  State& state();
  AsioTimer& real();

  boost::asio::io_context* io_;
  std::unique_ptr<State> state_;
};

}  // namespace canopy
