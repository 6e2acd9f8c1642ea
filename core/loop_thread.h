// LoopThread: an io_context with a thread of its own, lent to the user's threads
// while they call into the library (the caller-thread fast path, docs/design.md), and
// an inbox through which the loop hands items to the user's threads. Used by the
// front-end and back-end libraries, whose users call from threads other than the
// loop's.
//
// The single-owner rule: one thread at a time runs the loop, and only that thread
// touches what the loop's handlers touch. Which thread it is changes hands:
//   - the loop's own thread runs it while nobody calls into the library;
//   - a caller that finds the loop lent (its last caller has returned, and the
//     loop's thread has not taken it back) takes it without waking anyone, does its
//     work inline (a send is a write on the caller's thread) and, in a blocking
//     receive, runs the loop itself until an item is there (a packet arriving wakes
//     the caller directly);
//   - a blocking receive that finds the loop's thread running it asks for it once
//     (one hand-off); the next calls then find it lent;
//   - the loop's thread takes it back kReclaimAfter after the last caller returned
//     (up to kLookAtMost after a busy spell of calls), at once when a thread waits
//     without running the loop (kick()), and kLookAtMost after anyone last ran it
//     however often callers come (calls that do not run it, status() in a tight
//     loop, would otherwise keep it lent), and otherwise keeps it: timers and
//     arriving data never wait longer than that.
// Several user threads may call at once: the one that holds the loop runs what the
// others post.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

namespace canopy::core {

namespace asio = boost::asio;

template <typename T>
class Inbox;

class LoopThread {
 public:
  using Clock = std::chrono::steady_clock;
  // How long the loop stays lent after its last caller returned before its own
  // thread takes it back; after a busy spell of calls (the loop's thread looking
  // less often meanwhile, up to kLookAtMost), up to kLookAtMost: far below a
  // heartbeat (500 ms) or a gossip period, and each look is a wake-up of a thread
  // with nothing to do (docs/architecture.md, "Threads").
  static constexpr auto kReclaimAfter = std::chrono::milliseconds(5);
  static constexpr auto kLookAtMost = std::chrono::milliseconds(160);

  LoopThread();
  ~LoopThread() { stop(); }
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  asio::io_context& io() { return io_; }

  // True on the thread that runs the loop now: its own thread, a caller holding it,
  // or a handler either of them runs.
  bool running_here() const { return current_ == this; }

  // The loop, held by the calling thread until the Hold goes, which lends it (or
  // gives it to the loop's thread, if a thread waits meanwhile: kick()).
  class Hold {
   public:
    Hold(Hold&& other) noexcept : loop_(std::exchange(other.loop_, nullptr)), previous_(other.previous_) {}
    Hold& operator=(Hold&&) = delete;
    ~Hold();
    // True if the calling thread already ran the loop (a handler): nothing to give back.
    bool nested() const { return loop_ == nullptr; }

   private:
    friend class LoopThread;
    Hold(LoopThread* loop, const LoopThread* previous) : loop_(loop), previous_(previous) {}
    LoopThread* loop_;
    const LoopThread* previous_;
  };

  // Takes the loop for this thread if that wakes no other thread: it is lent, or
  // this thread runs it already (a nested hold). Nothing if the loop's thread or
  // another caller runs it, or the loop has stopped.
  std::optional<Hold> try_hold();
  // As try_hold(), and if the loop's own thread runs it, asks for it and waits for
  // it (one hand-off). Nothing if another caller holds it or the loop has stopped.
  std::optional<Hold> hold();
  // With a Hold that is not nested: runs handlers on this thread until `done()`,
  // the deadline or the loop's stop. Returns done().
  template <typename P>
  bool run_until(P done, Clock::time_point deadline);

  // For a thread about to wait for something the loop does, without running it: if
  // the loop is lent, its thread takes it back now; if a caller holds it, its thread
  // takes it back when that caller returns.
  void kick();

  // Runs `f` where the loop runs and returns its result; `f` must not block. On the
  // calling thread when it can hold the loop without a hand-off (or runs it
  // already: waiting for the loop there would wait forever), else on the thread
  // that runs the loop.
  template <typename F>
  auto call(F&& f) -> decltype(f()) {
    if (auto hold = try_hold()) return f();
    std::packaged_task<decltype(f())()> task(std::forward<F>(f));
    auto result = task.get_future();
    post([&task] { task(); });
    return result.get();
  }

  // Runs `f` on this thread when it can hold the loop without a hand-off (or runs
  // it already), else queues it for the thread that runs the loop.
  template <typename F>
  void run_or_post(F&& f) {
    if (auto hold = try_hold()) {
      f();
    } else {
      post(std::forward<F>(f));
    }
  }

  // Queues `f` for the thread that runs the loop (waking the loop's own thread if
  // the loop is lent). Until it has run, try_hold() gives no caller the loop, so
  // nothing run on a caller's thread (call(), run_or_post(), the libraries' inline
  // sends) overtakes it.
  void post(std::function<void()> f);

  // The next item of `inbox`, waiting at most `timeout`: a blocking wait runs the
  // loop on this thread when it can (taking it from the loop's thread if need be);
  // a zero time-out takes what is ready, running the loop's ready handlers first
  // when the loop is lent.
  template <typename T>
  std::optional<T> receive(Inbox<T>& inbox, std::chrono::milliseconds timeout);

  // Stops the loop and joins its thread, after any caller running a handler has
  // finished it. Pending handlers are dropped.
  void stop();

  // How many times the loop's thread woke without taking the loop (for tests): while
  // callers come and go it looks every kReclaimAfter, not once per call.
  std::uint64_t idle_wakeups() {
    std::lock_guard lock(mutex_);
    return idle_wakeups_;
  }

 private:
  enum class Owner : std::uint8_t { loop, caller, lent };
  void main();
  // try_hold() (ask false) and hold() (ask true).
  std::optional<Hold> take(bool ask);
  void release();
  // With a Hold that is not nested: runs ready handlers until one puts an item in
  // `inbox` or none is ready. Not poll(): a link reading a flood posts its next
  // slice as it ends one, so poll() returned only when the sender paused, and a
  // receive() on a sanitizer build sat seconds on a backlog its inbox already held.
  template <typename T>
  void poll_until_an_item(Inbox<T>& inbox);

  static thread_local const LoopThread* current_;

  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Owner owner_ = Owner::loop;        // under mutex_
  Clock::time_point lent_since_;     // under mutex_
  Clock::time_point ran_at_;         // under mutex_: when a thread last ran the loop
  bool ran_ = false;                 // the holder ran the loop (run_until, poll)
  bool kicked_ = false;              // under mutex_: the next release goes to the loop's thread
  bool loop_thread_waiting_ = false; // under mutex_: the loop's thread waits for a release
  std::uint64_t holds_ = 0;          // under mutex_: times a caller took the loop
  std::uint64_t idle_wakeups_ = 0;   // under mutex_
  bool quit_ = false;                // under mutex_
  // Callers waiting for the loop's thread to give the loop up. A count, not a flag:
  // with a flag, a caller that got the loop cleared it for another still waiting,
  // whose wake-up post it had run meanwhile, and the loop's thread, back in charge,
  // slept in the loop with that caller waiting for ever.
  std::atomic<std::uint32_t> wanted_{0};
  std::atomic<std::size_t> posted_{0};  // post()ed and not yet run: no caller may run ahead of them
  std::thread thread_;
};

// A multi-producer queue with a blocking, time-bounded pop, and on request an
// eventfd that is readable while the queue is not empty. The eventfd costs two
// system calls per item that empties the queue, so it exists only once fd() has been
// called.
template <typename T>
class Inbox {
 public:
  ~Inbox() {
    if (fd_ >= 0) close(fd_);
  }

  void push(T item) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(std::move(item));
      if (items_.size() == 1) signal_fd();
    }
    ready_.notify_one();
  }

  std::optional<T> pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (timeout <= std::chrono::milliseconds::zero()) {
      // No timed wait at all: even a zero one costs the timer slack (tens of µs).
      if (items_.empty()) return std::nullopt;
    } else if (!ready_.wait_for(lock, timeout, [&] { return !items_.empty(); })) {
      return std::nullopt;
    }
    T item = std::move(items_.front());
    items_.pop_front();
    if (items_.empty()) drain_fd();
    return item;
  }

  bool empty() {
    std::lock_guard lock(mutex_);
    return items_.empty();
  }

  // The eventfd, created on first use; -1 if it cannot be created.
  int fd() {
    std::lock_guard lock(mutex_);
    if (fd_ < 0) {
      fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (!items_.empty()) signal_fd();
    }
    return fd_;
  }

 private:
  void signal_fd() {
    if (fd_ < 0) return;
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = write(fd_, &one, sizeof one);
  }
  void drain_fd() {
    if (fd_ < 0) return;
    std::uint64_t n;
    [[maybe_unused]] auto r = read(fd_, &n, sizeof n);
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
  int fd_ = -1;
};

template <typename P>
bool LoopThread::run_until(P done, Clock::time_point deadline) {
  ran_ = true;
  while (!done()) {
    if (io_.stopped() || Clock::now() >= deadline) return done();
    io_.run_one_until(deadline);
  }
  return true;
}

template <typename T>
void LoopThread::poll_until_an_item(Inbox<T>& inbox) {
  ran_ = true;
  while (inbox.empty() && io_.poll_one() > 0) {
  }
}

template <typename T>
std::optional<T> LoopThread::receive(Inbox<T>& inbox, std::chrono::milliseconds timeout) {
  if (auto item = inbox.pop(std::chrono::milliseconds::zero())) {
    // The last of a batch: while the caller worked through it, nothing read on if
    // the loop was lent; what is ready now is read, up to the next item, before the
    // caller comes back, as a loop does between batches (a stream flowing faster
    // than its consumer would otherwise stall until the loop's thread takes the loop
    // back).
    if (inbox.empty()) {
      if (auto held = try_hold(); held && !held->nested()) poll_until_an_item(inbox);
    }
    return item;
  }
  const auto deadline = Clock::now() + timeout;
  if (running_here()) return inbox.pop(timeout);  // a handler that waits: as before, its own fault
  const bool blocking = timeout > std::chrono::milliseconds::zero();
  if (auto held = blocking ? hold() : try_hold()) {
    if (!blocking) {
      poll_until_an_item(inbox);
      return inbox.pop(std::chrono::milliseconds::zero());
    }
    // Another thread may take what this one waited for: then wait on.
    while (run_until([&] { return !inbox.empty(); }, deadline)) {
      if (auto item = inbox.pop(std::chrono::milliseconds::zero())) return item;
    }
    if (!io_.stopped()) return std::nullopt;  // timed out
    // The loop has stopped meanwhile: what it left is waited for below.
  }
  if (!blocking) return std::nullopt;
  kick();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return inbox.pop(std::max(left, std::chrono::milliseconds(1)));
}

}  // namespace canopy::core
