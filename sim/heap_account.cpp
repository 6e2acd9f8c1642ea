// The global operator new and delete of canopy-sim (sim/heap_account.h). Every block
// carries a header of 16 bytes before it: the account charged and the size asked.
#include "sim/heap_account.h"

#include <cstdlib>
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
  }
  return user;
}

void release(void* p) noexcept {
  if (!p) return;
  auto* user = static_cast<unsigned char*>(p);
  auto* h = reinterpret_cast<Header*>(user - sizeof(Header));
  if (h->account != kNobody && g_bytes) g_bytes[h->account] -= static_cast<std::int64_t>(h->size);
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
