#include "core/service.h"

#include <algorithm>
#include <bit>

namespace canopy::core {
namespace {

// Set once the thread's own pool is destroyed (at the thread's exit): a message
// destroyed later on that thread frees its segment itself. A plain bool, so that it
// can be read after the pool is gone.
thread_local bool own_pool_gone = false;

struct OwnPool {
  ScratchPool pool;
  ~OwnPool() { own_pool_gone = true; }
};

thread_local OwnPool own_pool;
thread_local ScratchPool* used_pool = nullptr;  // set by a ScratchPool::Use

}  // namespace

ScratchPool::~ScratchPool() {
  while (count_ > 0) delete[] free_[--count_];
}

void ScratchPool::took(std::size_t total) {
  if (total > words_) {
    resize(std::min(std::bit_ceil(total), ScratchSegment::kMaxWords));
  } else if (words_ > ScratchSegment::kMinWords && total <= words_ / 2) {
    if (++small_in_a_row_ < kShrinkAfter) return;
    resize(words_ / 2);
  }
  small_in_a_row_ = 0;
}

void ScratchPool::resize(std::size_t words) {
  if (words == words_) return;
  words_ = words;
  while (count_ > 0) delete[] free_[--count_];
}

void ScratchPool::shrink_current() {
  if (ScratchPool* pool = current()) {
    pool->resize(ScratchSegment::kMinWords);
    pool->small_in_a_row_ = 0;
  }
}

ScratchPool::Use::Use(ScratchPool& pool) : before_(used_pool) { used_pool = &pool; }

ScratchPool::Use::~Use() { used_pool = before_; }

ScratchPool* ScratchPool::current() {
  if (used_pool) return used_pool;
  return own_pool_gone ? nullptr : &own_pool.pool;
}

ScratchSegment::ScratchSegment() {
  ScratchPool* pool = ScratchPool::current();
  if (pool && pool->count_ > 0) {
    size_ = pool->words_;
    words_ = pool->free_[--pool->count_];
  } else {
    size_ = pool ? pool->words_ : kMinWords;
    words_ = new capnp::word[size_]();  // zeroed
  }
}

void ScratchSegment::used(std::size_t total) {
  if (ScratchPool* pool = ScratchPool::current()) pool->took(total);
}

ScratchSegment::~ScratchSegment() {
  // Zeroed by the builder's destructor, which ran first. A message destroyed on
  // another thread than its own gives its segment to that thread's pool.
  ScratchPool* pool = ScratchPool::current();
  if (pool && pool->count_ < ScratchPool::kKept && size_ == pool->words_) {
    pool->free_[pool->count_++] = words_;
  } else {
    delete[] words_;
  }
}

}  // namespace canopy::core
