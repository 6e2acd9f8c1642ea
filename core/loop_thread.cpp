#include "core/loop_thread.h"

namespace canopy::core {

thread_local const LoopThread* LoopThread::current_ = nullptr;

LoopThread::LoopThread() : work_(asio::make_work_guard(io_)), thread_([this] { main(); }) {}

// The loop's own thread: runs the loop while it owns it, gives it to a caller who
// asks (wanted_), and takes it back once lent for kReclaimAfter, or when kicked.
void LoopThread::main() {
  std::unique_lock lock(mutex_);
  std::uint64_t seen_holds = 0;
  std::chrono::milliseconds look = kReclaimAfter;
  bool busy = false;  // taken back while callers kept coming
  while (true) {
    for (bool woke = false; !quit_ && owner_ != Owner::loop; woke = true) {
      if (woke) ++idle_wakeups_;
      if (owner_ == Owner::lent) {
        // Taken back once no caller came for kReclaimAfter, and in any case once
        // nobody has run the loop for kLookAtMost: callers that come more often than
        // kReclaimAfter without running it (a tool polling status()) would otherwise
        // keep timers and arriving data waiting for as long as they come.
        const auto now = Clock::now();
        const bool idle = kicked_ || now - lent_since_ >= kReclaimAfter;
        if (idle || now - ran_at_ >= kLookAtMost) {
          owner_ = Owner::loop;
          kicked_ = false;
          busy = !idle;
          break;
        }
        changed_.wait_until(lock, std::min(lent_since_ + kReclaimAfter, ran_at_ + kLookAtMost));
      } else if (holds_ != seen_holds) {
        // Callers come and go: look again in a while, less often the longer they
        // keep coming (in a tree of 256 back-ends each polling every 5 ms, these
        // wake-ups were a good part of the machine). Were each release to wake this
        // thread instead, every call would cost the wake-up the fast path saves.
        seen_holds = holds_;
        changed_.wait_for(lock, look);
        look = std::min(look * 2, kLookAtMost);
      } else {
        // One caller has held the loop since the last look (it waits in receive(),
        // running the loop): its release wakes this thread.
        loop_thread_waiting_ = true;
        changed_.wait(lock);
        loop_thread_waiting_ = false;
      }
    }
    if (quit_) return;
    if (!busy) look = kReclaimAfter;  // callers that keep coming keep the long look
    busy = false;
    lock.unlock();
    current_ = this;
    while (wanted_.load(std::memory_order_acquire) == 0 && !io_.stopped()) io_.run_one();
    current_ = nullptr;
    lock.lock();
    // Lent: to the caller who asked (hold()), or, after stop(), to nobody.
    owner_ = Owner::lent;
    lent_since_ = ran_at_ = Clock::now();
    changed_.notify_all();
    if (io_.stopped()) return;
  }
}

std::optional<LoopThread::Hold> LoopThread::try_hold() { return take(false); }

std::optional<LoopThread::Hold> LoopThread::hold() { return take(true); }

std::optional<LoopThread::Hold> LoopThread::take(bool ask) {
  if (running_here()) return Hold(nullptr, this);
  // What a caller runs here must not overtake what was posted before: it waits for
  // the loop's thread, which runs the loop (and the posts) in order.
  if (!ask && posted_.load(std::memory_order_acquire) > 0) return std::nullopt;
  std::unique_lock lock(mutex_);
  if (ask && owner_ == Owner::loop && !quit_) {
    wanted_.fetch_add(1, std::memory_order_acq_rel);
    asio::post(io_, [] {});  // the loop's thread may be waiting for events: wake it
    changed_.wait(lock, [&] { return quit_ || owner_ != Owner::loop; });
    wanted_.fetch_sub(1, std::memory_order_acq_rel);
  }
  if (quit_ || owner_ != Owner::lent) return std::nullopt;
  owner_ = Owner::caller;
  ++holds_;
  const LoopThread* previous = current_;
  current_ = this;
  return Hold(this, previous);
}

LoopThread::Hold::~Hold() {
  if (!loop_) return;
  loop_->release();
  LoopThread::current_ = previous_;
}

// What became ready meanwhile (a write's completion) waits for the next caller or
// the loop's thread; what another thread posted meanwhile kicked it (post()).
void LoopThread::release() {
  std::lock_guard lock(mutex_);
  lent_since_ = Clock::now();
  if (std::exchange(ran_, false)) ran_at_ = lent_since_;
  // Posts left unrun (the caller's own, or its deadline came first) go to the
  // loop's thread, not to the next caller, who would overtake them.
  if (kicked_ || posted_.load(std::memory_order_acquire) > 0) {
    owner_ = Owner::loop;
    kicked_ = false;
    changed_.notify_all();
    return;
  }
  owner_ = Owner::lent;
  if (loop_thread_waiting_ || quit_) changed_.notify_all();
}

void LoopThread::kick() {
  std::lock_guard lock(mutex_);
  switch (owner_) {
    case Owner::loop: return;
    case Owner::caller: kicked_ = true; return;
    case Owner::lent:
      owner_ = Owner::loop;
      changed_.notify_all();
      return;
  }
}

void LoopThread::post(std::function<void()> f) {
  posted_.fetch_add(1, std::memory_order_acq_rel);
  asio::post(io_, [this, f = std::move(f)] {
    posted_.fetch_sub(1, std::memory_order_acq_rel);
    f();
  });
  if (!running_here()) kick();  // else this thread runs it
}

void LoopThread::stop() {
  {
    std::unique_lock lock(mutex_);
    quit_ = true;
    work_.reset();
    io_.stop();  // a caller's run returns after the handler it runs
    changed_.notify_all();
    // The caller that holds the loop gives it back (unless it is this thread).
    if (!running_here()) changed_.wait(lock, [&] { return owner_ != Owner::caller; });
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace canopy::core
