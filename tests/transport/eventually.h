// eventually(pred, limit): polls `pred` every 5 ms until it holds or `limit` has
// passed; returns whether it held. Tests wait for conditions this way, never for a
// fixed time.
#pragma once

#include <chrono>
#include <thread>

namespace canopy::testing {

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

}  // namespace canopy::testing
