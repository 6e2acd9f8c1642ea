#include "core/service.h"

namespace canopy::core {
namespace {

// A thread's free segments (all zero). Messages alive at once on one thread are few
// (one being built, perhaps one being forwarded); beyond kKept, segments are freed.
constexpr std::size_t kKept = 8;

// Set once the thread's pool is destroyed (at the thread's exit): a message destroyed
// later on that thread frees its segment itself. A plain bool, so that it can be read
// after the pool is gone.
thread_local bool pool_gone = false;

struct Pool {
  capnp::word* free[kKept];
  std::size_t count = 0;
  ~Pool() {
    while (count > 0) delete[] free[--count];
    pool_gone = true;
  }
};

thread_local Pool pool;

}  // namespace

ScratchSegment::ScratchSegment() {
  if (!pool_gone && pool.count > 0) {
    words_ = pool.free[--pool.count];
  } else {
    words_ = new capnp::word[kWords]();  // zeroed
  }
}

ScratchSegment::~ScratchSegment() {
  // Zeroed by the builder's destructor, which ran first. A message destroyed on
  // another thread than its own gives its segment to that thread's pool.
  if (!pool_gone && pool.count < kKept) {
    pool.free[pool.count++] = words_;
  } else {
    delete[] words_;
  }
}

}  // namespace canopy::core
