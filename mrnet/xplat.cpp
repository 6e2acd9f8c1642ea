// XPlat's Thread and NetUtils (include/xplat/), on POSIX (docs/mrnet.md).
#include <pthread.h>
#include <unistd.h>

#include "xplat/NetUtils.h"
#include "xplat/Thread.h"

namespace XPlat {

static_assert(sizeof(Thread::Id) >= sizeof(pthread_t), "a pthread_t fits in Thread::Id");

int Thread::Create(Func func, void* data, Id* id) {
  pthread_t thread;
  const int r = pthread_create(&thread, nullptr, func, data);
  if (r == 0 && id) *id = static_cast<Id>(thread);
  return r;
}

Thread::Id Thread::GetId() { return static_cast<Id>(pthread_self()); }

int Thread::Join(Id thread, void** exit_value) { return pthread_join(static_cast<pthread_t>(thread), exit_value); }

int Thread::Cancel(Id thread) { return pthread_cancel(static_cast<pthread_t>(thread)); }

void Thread::Exit(void* value) { pthread_exit(value); }

int NetUtils::GetLocalHostName(std::string& name) {
  char buffer[256] = {};
  if (gethostname(buffer, sizeof buffer - 1) != 0) return -1;
  name = buffer;
  return 0;
}

}  // namespace XPlat
