// XPlat::Monitor: MRNet 5.0.1's monitor (docs/mrnet.md): one mutex and condition
// variables registered by number, on std::mutex and std::condition_variable_any.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

namespace XPlat {

class Monitor {
 public:
  Monitor() = default;
  virtual ~Monitor() = default;
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Every call returns 0, or -1 for a condition that was not registered.
  virtual int Lock() {
    mutex_.lock();
    return 0;
  }
  virtual int Unlock() {
    mutex_.unlock();
    return 0;
  }
  // Called with the lock held, as MRNet's.
  virtual int RegisterCondition(unsigned int id) {
    conditions_.emplace(id, std::unique_ptr<std::condition_variable_any>(new std::condition_variable_any));
    return 0;
  }
  // The waits: with the lock held; they release it while waiting.
  virtual int WaitOnCondition(unsigned int id) {
    auto* c = find(id);
    if (!c) return -1;
    c->wait(mutex_);
    return 0;
  }
  // 0 when signalled, 1 when the time ran out (as pthread's ETIMEDOUT is not 0).
  virtual int TimedWaitOnCondition(unsigned int id, int milliseconds) {
    auto* c = find(id);
    if (!c) return -1;
    return c->wait_for(mutex_, std::chrono::milliseconds(milliseconds)) == std::cv_status::timeout ? 1 : 0;
  }
  virtual int SignalCondition(unsigned int id) {
    auto* c = find(id);
    if (!c) return -1;
    c->notify_one();
    return 0;
  }
  virtual int BroadcastCondition(unsigned int id) {
    auto* c = find(id);
    if (!c) return -1;
    c->notify_all();
    return 0;
  }

 private:
  std::condition_variable_any* find(unsigned int id) {
    auto it = conditions_.find(id);
    return it == conditions_.end() ? nullptr : it->second.get();
  }
  std::mutex mutex_;
  std::map<unsigned int, std::unique_ptr<std::condition_variable_any>> conditions_;
};

}  // namespace XPlat
