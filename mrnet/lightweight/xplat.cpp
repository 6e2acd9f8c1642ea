// The parts of XPlat and MRNet's utilities a C back-end uses
// (include/xplat_lightweight/Thread.h, mrn_printf in include/mrnet_lightweight/Types.h).
#include <pthread.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

#include "mrnet/debug_printf.h"
#include "mrnet/lightweight/export.h"
#include "mrnet_lightweight/Types.h"
#include "xplat_lightweight/Thread.h"

static_assert(sizeof(pthread_t) <= sizeof(Thread_Id), "a pthread_t must fit in a Thread_Id");

namespace {
pthread_t as_pthread(Thread_Id id) { return static_cast<pthread_t>(id); }
}  // namespace

extern "C" {

CANOPY_MRNET_LW_EXPORT int Thread_Create(Thread_Func func, void* data, Thread_Id* id) {
  if (!func) return EINVAL;
  pthread_t thread;
  const int rc = pthread_create(&thread, nullptr, func, data);
  if (rc == 0 && id) *id = static_cast<Thread_Id>(thread);
  return rc;
}

CANOPY_MRNET_LW_EXPORT Thread_Id Thread_GetId(void) { return static_cast<Thread_Id>(pthread_self()); }

CANOPY_MRNET_LW_EXPORT int Thread_Join(Thread_Id joinWith, void** exitValue) {
  return pthread_join(as_pthread(joinWith), exitValue) == 0 ? 0 : -1;
}

CANOPY_MRNET_LW_EXPORT int Thread_Cancel(Thread_Id id) { return pthread_cancel(as_pthread(id)); }

CANOPY_MRNET_LW_EXPORT void Thread_Exit(void* val) { pthread_exit(val); }

CANOPY_MRNET_LW_EXPORT int mrn_printf(const char* file, int line, const char* func, FILE* fp, const char* format,
                                      ...) {
  va_list args;
  va_start(args, format);
  const int n = MRN::layer::debug_printf(fp ? fp : stderr, file, line, func, format, args);
  va_end(args);
  return n;
}

}  // extern "C"
