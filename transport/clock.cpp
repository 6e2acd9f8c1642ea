#include "transport/clock.h"

#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace canopy {

std::atomic<bool> NodeClock::manual_{false};
std::atomic<NodeClock::rep> NodeClock::manual_now_{0};
std::atomic<NodeClock::rep> NodeClock::nearest_expiry_{std::numeric_limits<NodeClock::rep>::max()};

void NodeClock::note_expiry(duration from_now) noexcept {
  const rep at = manual_now_.load(std::memory_order_relaxed) + from_now.count();
  rep nearest = nearest_expiry_.load(std::memory_order_relaxed);
  while (at < nearest && !nearest_expiry_.compare_exchange_weak(nearest, at, std::memory_order_relaxed)) {
  }
}

ManualTime::ManualTime() {
  if (NodeClock::manual_.load()) throw std::logic_error("ManualTime: the clock is already manual");
  NodeClock::manual_now_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  NodeClock::nearest_expiry_.store(std::numeric_limits<NodeClock::rep>::max());
  NodeClock::manual_.store(true);
}

ManualTime::~ManualTime() { NodeClock::manual_.store(false); }

void ManualTime::advance(NodeClock::duration by) { NodeClock::manual_now_.fetch_add(by.count()); }

std::optional<NodeClock::time_point> ManualTime::take_nearest_expiry() {
  const NodeClock::rep nearest = NodeClock::nearest_expiry_.exchange(std::numeric_limits<NodeClock::rep>::max());
  if (nearest == std::numeric_limits<NodeClock::rep>::max()) return std::nullopt;
  return NodeClock::time_point(NodeClock::duration(nearest));
}

// ---- TimerQueue ----

boost::asio::execution_context::id TimerQueue::id;

TimerQueue::TimerQueue(boost::asio::io_context& io) : boost::asio::execution_context::service(io), io_(io) {}

TimerQueue& TimerQueue::install(boost::asio::io_context& io) {
  auto* queue = new TimerQueue(io);
  boost::asio::add_service(io, queue);  // io owns it from here
  return *queue;
}

void TimerQueue::shutdown() {
  // The io_context goes: its handlers are destroyed, not run (asio's rule).
  for (auto& [at, wait] : waits_) wait.timer->state_->queue = nullptr;
  waits_.clear();
}

std::optional<NodeClock::time_point> TimerQueue::next_expiry() const {
  if (waits_.empty()) return std::nullopt;
  return waits_.begin()->first;
}

TimerQueue::Waits::iterator TimerQueue::add(NodeClock::time_point at, Timer* timer,
                                            std::function<void(const boost::system::error_code&)> handler) {
  return waits_.emplace(at, Wait{timer, std::move(handler), boost::asio::make_work_guard(io_)});
}

void TimerQueue::complete(Waits::iterator wait, const boost::system::error_code& ec) {
  // Posted before the wait's work ends, so that the io_context never runs out of
  // work between the two.
  boost::asio::post(io_, [handler = std::move(wait->second.handler), ec] { handler(ec); });
  waits_.erase(wait);
}

std::size_t TimerQueue::fire_due(NodeClock::time_point now) {
  std::size_t fired = 0;
  while (!waits_.empty() && waits_.begin()->first <= now) {
    auto wait = waits_.begin();
    auto& pending = wait->second.timer->state_->waits;
    pending.erase(std::find(pending.begin(), pending.end(), wait));
    complete(wait, {});
    ++fired;
  }
  return fired;
}

// ---- Timer ----

Timer::Timer(boost::asio::io_context& io) : io_(&io) {}

Timer::State& Timer::state() {
  if (!state_) {
    state_ = std::make_unique<State>();
    if (boost::asio::has_service<TimerQueue>(*io_)) {
      state_->queued = true;
      state_->queue = &boost::asio::use_service<TimerQueue>(*io_);
    }
  }
  return *state_;
}

Timer::AsioTimer& Timer::real() {
  State& s = state();
  if (!s.real) s.real = std::make_unique<AsioTimer>(*io_, s.expiry);
  return *s.real;
}

Timer::Timer(boost::asio::io_context& io, duration expiry_from_now) : Timer(io) { expires_after(expiry_from_now); }

Timer::Timer(boost::asio::io_context& io, time_point expiry) : Timer(io) { expires_at(expiry); }

Timer::~Timer() { cancel(); }

Timer::time_point Timer::expiry() const {
  if (!state_) return {};
  return state_->real ? state_->real->expiry() : state_->expiry;
}

std::size_t Timer::expires_at(time_point at) {
  State& s = state();
  if (!s.queued) return real().expires_at(at);
  const std::size_t cancelled = cancel();
  s.expiry = at;
  return cancelled;
}

std::size_t Timer::cancel() {
  if (!state_) return 0;
  State& s = *state_;
  if (!s.queued) return s.real ? s.real->cancel() : 0;
  const std::size_t cancelled = s.waits.size();
  if (s.queue) {
    for (auto wait : s.waits) s.queue->complete(wait, boost::asio::error::operation_aborted);
  }
  s.waits.clear();
  return cancelled;
}

}  // namespace canopy
