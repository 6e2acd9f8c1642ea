// LoopThread: an io_context running on a thread of its own, and an inbox through
// which it hands items to the user's threads. Used by the front-end and back-end
// libraries, whose users call from threads other than the loop's.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

namespace canopy::core {

namespace asio = boost::asio;

class LoopThread {
 public:
  LoopThread() : work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~LoopThread() { stop(); }

  asio::io_context& io() { return io_; }

  // Runs `f` on the loop and returns its result; `f` must not block. Called on the
  // loop thread itself (from a handler the loop runs), `f` runs at once: waiting for
  // the loop there would wait forever.
  template <typename F>
  auto call(F&& f) -> decltype(f()) {
    if (std::this_thread::get_id() == thread_.get_id()) return f();
    std::packaged_task<decltype(f())()> task(std::forward<F>(f));
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }

  void post(std::function<void()> f) { asio::post(io_, std::move(f)); }

  // Stops the loop and joins the thread. Pending handlers are dropped.
  void stop() {
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
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

}  // namespace canopy::core
