// The global operator new and delete of canopy-sim (sim/heap_account.h). Every block
// carries a header of 16 bytes before it: the account charged and the size asked.
#include "sim/heap_account.h"

#include <execinfo.h>

#include <cstdlib>
#include <cstring>
#include <cstddef>
#include <new>

namespace canopy::sim {
namespace {

struct Header {
  std::uint32_t account;
  std::uint32_t offset;  // from the start of the malloc'd block to the user's bytes
  std::uint64_t size;
};
static_assert(sizeof(Header) == 16);

std::uint32_t g_account = kNobody;
std::int64_t* g_bytes = nullptr;  // kMaxAccounts counters, made at first use

// The traced account's live blocks: an open-addressed table keyed by the user's
// pointer, in memory of malloc's (never operator new's), with tombstones.
struct Slot {
  void* user;  // null: empty; kTombstone: released
  LiveBlock block;
};
constexpr std::size_t kSlots = std::size_t{1} << 18;
void* const kTombstone = reinterpret_cast<void*>(1);
std::uint32_t g_traced = kNobody;
Slot* g_slots = nullptr;
std::size_t g_used = 0;  // live and tombstones

std::size_t slot_of(const void* user) {
  auto h = reinterpret_cast<std::uintptr_t>(user) >> 4;
  h ^= h >> 17;
  h *= 0x9E3779B97F4A7C15ull;
  return (h >> 20) & (kSlots - 1);
}

void insert(void* user, const LiveBlock& block) {
  std::size_t i = slot_of(user);
  while (g_slots[i].user != nullptr && g_slots[i].user != kTombstone) i = (i + 1) & (kSlots - 1);
  if (g_slots[i].user == nullptr) ++g_used;
  g_slots[i].user = user;
  g_slots[i].block = block;
}

// Too many slots used, most by tombstones: the live blocks into a new table.
void rebuild() {
  Slot* old = g_slots;
  g_slots = static_cast<Slot*>(std::calloc(kSlots, sizeof(Slot)));
  g_used = 0;
  if (!g_slots) return;
  for (std::size_t i = 0; i < kSlots; ++i) {
    if (old[i].user != nullptr && old[i].user != kTombstone) insert(old[i].user, old[i].block);
  }
  std::free(old);
}

void remember(void* user, std::size_t size) {
  if (g_used + 1 >= kSlots * 3 / 4) rebuild();
  if (!g_slots || g_used + 1 >= kSlots * 3 / 4) return;  // full of live blocks: the report says fewer
  LiveBlock block{size, {}};
  backtrace(block.stack, kSiteDepth);  // from here: the report skips the allocator's own frames
  insert(user, block);
}

void forget(void* user) {
  for (std::size_t i = slot_of(user); g_slots[i].user != nullptr; i = (i + 1) & (kSlots - 1)) {
    if (g_slots[i].user == user) {
      g_slots[i].user = kTombstone;
      return;
    }
  }
}

std::int64_t* counters() {
  if (!g_bytes) g_bytes = static_cast<std::int64_t*>(std::calloc(kMaxAccounts, sizeof(std::int64_t)));
  return g_bytes;
}

void* allocate(std::size_t size, std::size_t align) {
  if (align < alignof(std::max_align_t)) align = alignof(std::max_align_t);
  const std::size_t offset = align >= sizeof(Header) ? align : sizeof(Header);
  void* block = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (offset + size + align - 1) / align * align)
                                                  : std::malloc(offset + size);
  if (!block) return nullptr;
  auto* user = static_cast<unsigned char*>(block) + offset;
  auto* h = reinterpret_cast<Header*>(user - sizeof(Header));
  h->account = g_account;
  h->offset = static_cast<std::uint32_t>(offset);
  h->size = size;
  if (g_account != kNobody) {
    if (auto* c = counters()) c[g_account] += static_cast<std::int64_t>(size);
    if (g_account == g_traced) remember(user, size);
  }
  return user;
}

void release(void* p) noexcept {
  if (!p) return;
  auto* user = static_cast<unsigned char*>(p);
  auto* h = reinterpret_cast<Header*>(user - sizeof(Header));
  if (h->account != kNobody && g_bytes) g_bytes[h->account] -= static_cast<std::int64_t>(h->size);
  if (h->account == g_traced && g_slots) forget(p);
  std::free(user - h->offset);
}

void* allocate_or_throw(std::size_t size, std::size_t align) {
  void* p = allocate(size, align);
  if (!p) throw std::bad_alloc();
  return p;
}

}  // namespace

void charge_heap_to(std::uint32_t account) { g_account = account < kMaxAccounts ? account : kNobody; }
std::uint32_t heap_account() { return g_account; }

void trace_heap_sites(std::uint32_t account) {
  if (!g_slots) g_slots = static_cast<Slot*>(std::calloc(kSlots, sizeof(Slot)));
  if (!g_slots) return;
  void* warm[2];
  backtrace(warm, 2);  // its first call loads libgcc_s, which allocates: not inside allocate()
  g_traced = account;
}
std::size_t traced_block_capacity() { return g_slots ? kSlots : 0; }
const LiveBlock* traced_block(std::size_t slot) {
  const void* user = g_slots[slot].user;
  return user == nullptr || user == kTombstone ? nullptr : &g_slots[slot].block;
}
std::int64_t heap_bytes(std::uint32_t account) {
  return account < kMaxAccounts && g_bytes ? g_bytes[account] : 0;
}

}  // namespace canopy::sim

using canopy::sim::allocate;
using canopy::sim::allocate_or_throw;
using canopy::sim::release;

void* operator new(std::size_t size) { return allocate_or_throw(size, 0); }
void* operator new[](std::size_t size) { return allocate_or_throw(size, 0); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) { return allocate_or_throw(size, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t size, std::align_val_t a) { return allocate_or_throw(size, static_cast<std::size_t>(a)); }
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(size, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
