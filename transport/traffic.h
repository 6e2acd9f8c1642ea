// This process's traffic over all its links (canopy/traffic.h), counted where every
// link frames and unframes: SendStream::append and FrameReader::next. (canopy-sim's
// memory links count per simulated process themselves, sim/simulator.h.)
#pragma once

#include <atomic>
#include <cstdint>

#include "canopy/traffic.h"

namespace canopy::transport {

class TrafficCount {
 public:
  void sent(std::uint64_t bytes) {
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
    messages_sent_.fetch_add(1, std::memory_order_relaxed);
  }
  void received(std::uint64_t bytes) {
    bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
    messages_received_.fetch_add(1, std::memory_order_relaxed);
  }
  Traffic now() const {
    return {bytes_sent_.load(std::memory_order_relaxed), messages_sent_.load(std::memory_order_relaxed),
            bytes_received_.load(std::memory_order_relaxed), messages_received_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<std::uint64_t> bytes_sent_{0}, messages_sent_{0}, bytes_received_{0}, messages_received_{0};
};

// The process's one count.
inline TrafficCount& process_traffic() {
  static TrafficCount count;
  return count;
}

}  // namespace canopy::transport
