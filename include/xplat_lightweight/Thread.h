/* XPlat's threads for C back-ends, as MRNet 5.0.1's xplat_lightweight/Thread.h
 * declares them (docs/mrnet.md), on POSIX threads: part of Canopy's MRNet API
 * layer, written for Canopy. Each returns 0 on success, else -1 (Thread_Join) or
 * the error number, as pthreads does. */
#ifndef CANOPY_XPLAT_LIGHTWEIGHT_THREAD_H
#define CANOPY_XPLAT_LIGHTWEIGHT_THREAD_H

#include "xplat_lightweight/Types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void* (*Thread_Func)(void*);
typedef long Thread_Id;

/* Starts func(data) on a new thread; its id into *id. */
int Thread_Create(Thread_Func func, void* data, Thread_Id* id);
/* The calling thread's id. */
Thread_Id Thread_GetId(void);
/* Waits for thread `joinWith` to end; what it returned into *exitValue (if not NULL). */
int Thread_Join(Thread_Id joinWith, void** exitValue);
/* Asks thread `id` to stop at its next cancellation point. */
int Thread_Cancel(Thread_Id id);
/* Ends the calling thread, returning `val` to its joiner. */
void Thread_Exit(void* val);

#ifdef __cplusplus
}
#endif

#endif
