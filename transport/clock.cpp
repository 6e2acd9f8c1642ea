#include "transport/clock.h"

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

}  // namespace canopy
