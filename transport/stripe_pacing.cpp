#include "transport/stripe_pacing.h"

#include <algorithm>
#include <cmath>

namespace canopy::transport {

std::uint64_t path_budget(double rate, double total_rate, std::size_t live_paths, std::uint64_t window,
                          std::uint64_t max_fragment_bytes) {
  if (live_paths <= 1) return window;
  const double n = static_cast<double>(live_paths);
  double share = (total_rate > 0 && rate > 0) ? rate / total_rate : 1.0 / n;
  share = std::max(share, 1.0 / (4.0 * n));  // room to show it got faster
  return std::max<std::uint64_t>(2 * max_fragment_bytes,
                                 static_cast<std::uint64_t>(share * static_cast<double>(window)));
}

bool RoundTripEstimator::on_acknowledged(const SendWindow::Fragment& f, Clock::time_point now) {
  if (f.transmissions != 1 || f.state != SendWindow::State::sent) return false;
  sample(now - f.sent_at);
  return true;
}

void RoundTripEstimator::sample(Clock::duration round_trip) {
  const double r = std::chrono::duration<double>(round_trip).count();
  if (!srtt_) {
    srtt_ = r;
    rttvar_ = r / 2;
  } else {
    rttvar_ = 0.75 * rttvar_ + 0.25 * std::abs(*srtt_ - r);
    srtt_ = 0.875 * *srtt_ + 0.125 * r;
  }
}

Backoff RoundTripEstimator::retransmit(Backoff configured) const {
  if (srtt_) {
    // Rounded up to the millisecond, but not for a rounding error of the sum (0.1 +
    // 4 · 0.05 is 0.30000000000000004 s: 300 ms, not 301).
    // (The ceiling by hand: std::ceil is a call into libm, which a lean back-end
    // does not load; cmake/CanopyLean.cmake.)
    const double ms = (*srtt_ + 4 * rttvar_) * 1000 - 1e-6;
    auto whole = static_cast<std::int64_t>(ms);  // toward zero: the ceiling if negative
    if (static_cast<double>(whole) < ms) ++whole;
    const auto rto = std::chrono::milliseconds(whole);
    configured.initial = std::min(configured.max, std::max(configured.initial, rto));
  }
  return configured;
}

}  // namespace canopy::transport
