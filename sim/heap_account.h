// What each simulated process holds on the heap (docs/simulation.md, "State
// bytes"): canopy-sim replaces the global operator new and delete so that every
// allocation is charged to the process on whose behalf it is made (the one the
// simulator runs, or the one being created), and its release to the same process,
// wherever it happens. A process's figure is then every byte its node and services
// hold: topology, live tree, view, routes, stream state, link buffers, timers, the
// io_context. Linked into canopy-sim only.
#pragma once

#include <cstdint>

namespace canopy::sim {

inline constexpr std::uint32_t kNobody = 0xffffffffu;
inline constexpr std::uint32_t kMaxAccounts = 1u << 22;  // 4,194,304 processes

// Charges allocations from now on to `account` (< kMaxAccounts), or to nobody.
void charge_heap_to(std::uint32_t account);
std::uint32_t heap_account();
// Bytes allocated for `account` and not yet released.
std::int64_t heap_bytes(std::uint32_t account);

// Charges to `account` for as long as it lives, then to whoever was charged before.
class ChargeHeap {
 public:
  explicit ChargeHeap(std::uint32_t account) : before_(heap_account()) { charge_heap_to(account); }
  ~ChargeHeap() { charge_heap_to(before_); }
  ChargeHeap(const ChargeHeap&) = delete;
  ChargeHeap& operator=(const ChargeHeap&) = delete;

 private:
  std::uint32_t before_;
};

}  // namespace canopy::sim
