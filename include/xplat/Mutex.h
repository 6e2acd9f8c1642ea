// XPlat::Mutex: MRNet 5.0.1's portable mutex (docs/mrnet.md), on a std::mutex.
#pragma once

#include <mutex>

namespace XPlat {

class Mutex {
 public:
  Mutex() = default;
  virtual ~Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  // 0, as MRNet's.
  virtual int Lock() {
    mutex_.lock();
    return 0;
  }
  virtual int Unlock() {
    mutex_.unlock();
    return 0;
  }

 private:
  std::mutex mutex_;
};

}  // namespace XPlat
