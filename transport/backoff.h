// Truncated exponential back-off: the delay before the n-th retry.
//
// Used for retransmission time-outs (paper 002: so that a receiver busy with
// something else is not flooded) and for reconnecting a failed path.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace canopy::transport {

struct Backoff {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max{5000};
  double factor = 2.0;

  // initial · factor^(attempt-1), at most `max`; attempt 0 counts as 1.
  std::chrono::milliseconds delay(std::uint32_t attempt) const {
    double d = static_cast<double>(initial.count());
    for (std::uint32_t i = 1; i < attempt && d < static_cast<double>(max.count()); ++i) d *= factor;
    return std::min(max, std::chrono::milliseconds(static_cast<std::int64_t>(d)));
  }
};

}  // namespace canopy::transport
