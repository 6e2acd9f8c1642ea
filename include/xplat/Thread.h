// XPlat::Thread: MRNet 5.0.1's portable threads, as its tools use them (docs/mrnet.md),
// on POSIX threads. Part of Canopy's MRNet API layer, written for Canopy.
#pragma once

namespace XPlat {

class Thread {
 public:
  typedef void* (*Func)(void*);
  typedef unsigned long Id;
  // 0, or the pthread error.
  static int Create(Func func, void* data, Id* id);
  static Id GetId();
  static int Join(Id thread, void** exit_value);
  static int Cancel(Id thread);
  static void Exit(void* value);
};

}  // namespace XPlat
