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

// Heap sites (canopy-sim --heap-sites RANK): from now on, every block charged to
// `account` is kept with the call stack that allocated it (kSiteDepth return
// addresses), until it is released. Costs nothing for other accounts.
inline constexpr int kSiteDepth = 16;
void trace_heap_sites(std::uint32_t account);
struct LiveBlock {
  std::uint64_t size;
  void* stack[kSiteDepth];  // innermost first (the allocator's own frames too); null past the last
};
// Calls `visit` with every live block of the traced account. `visit` may allocate.
template <class Visit>
void for_each_traced_block(Visit&& visit);
std::size_t traced_block_capacity();
const LiveBlock* traced_block(std::size_t slot);  // null: an empty slot

template <class Visit>
void for_each_traced_block(Visit&& visit) {
  for (std::size_t slot = 0; slot < traced_block_capacity(); ++slot) {
    if (const LiveBlock* block = traced_block(slot)) visit(*block);
  }
}

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
