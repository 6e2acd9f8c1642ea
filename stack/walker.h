// Walker: samples the call stacks of every thread of a set of live processes, the way
// a stack-trace tool (STAT, eu-stack) does, with elfutils' libdwfl doing the unwinding
// (DWARF CFI) and the symbol lookup.
//
// A sample first lists and opens each process's modules (/proc/PID/maps, the ELF
// files), while they run; then stops every thread of every process, unwinds them
// all, and lets them all go: the stacks of the processes are one consistent
// snapshot, and each process is stopped for the unwinding of the set (about a
// millisecond per thread; the first sample of a process also reads the CFI of the
// modules its stacks pass through). See last_stop_time(). Names are looked up only
// after the processes run again.
//
// The Walker keeps one Dwfl per process across samples, so that each module's symbol
// table, CFI and line tables are read once; the modules are re-listed at each sample,
// before the stop (a dlopen between samples is seen); a process with a frame outside
// every listed module (a module mapped between the listing and the stop) has its
// modules listed again while it is stopped, and is walked once more. A process is never left traced between samples
// or after the Walker is gone.
//
// Stopped processes: a process the user stopped (State T) is sampled like any other
// and stays stopped afterwards (see stack/stopped_process.h); signals that arrive
// during a sample are delivered after it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "canopy/result.h"

typedef struct Dwfl Dwfl;

namespace canopy::stack {

struct ThreadStack {
  pid_t tid;
  // Outermost first ("_start", "__libc_start_main", ..., "main", ..., innermost).
  // A frame is the demangled function name without its symbol version,
  // "<module basename>+0x<offset in the module>" when the module has no symbol there
  // (the same in every process, unlike the address), or "0x<addr> ??" outside any
  // module; with
  // WalkOptions::lines, " (file.cpp:42)" is appended when DWARF line info is known.
  std::vector<std::string> frames;
  // Why the unwinding stopped early (no CFI for a frame, unreadable memory), or ""
  // when it reached the outermost frame. The frames above it are still valid.
  std::string truncated;
};

struct WalkOptions {
  bool lines = false;              // append " (file.c:42)" from DWARF when known
  bool all_threads = true;         // false: the main thread only is stopped and walked
  std::size_t max_frames = 256;    // deeper stacks (runaway recursion) are cut here
};

// How ThreadStack names the frame at `pc` in `dwfl`'s modules (with " (file:line)"
// when `lines`). `pc` is looked up as given: for a return address, pass it less one.
std::string frame_name(Dwfl* dwfl, std::uint64_t pc, bool lines);

class Walker {
 public:
  explicit Walker(WalkOptions options = {});
  ~Walker();  // releases every Dwfl; no process is traced outside sample()
  Walker(const Walker&) = delete;
  Walker& operator=(const Walker&) = delete;

  // One entry per pid, in the order of `pids`, each the stacks of that process's
  // threads (the main thread first). A pid that cannot be sampled gives an error for
  // that pid only: invalid_input for no such process, no permission, the caller's own
  // process or a thread id; failed for a process that exits during the sample or
  // that libdwfl cannot attach to. Never leaves any of them stopped or traced.
  //
  // Contract: call from one thread at a time (ptrace ties a tracee to the thread that
  // attached it; a sample attaches and detaches within the call).
  std::vector<Result<std::vector<ThreadStack>>> sample(const std::vector<pid_t>& pids);

  // How long the last sample held its processes stopped: from the first stop to the
  // last detach (what the sampled job pays), as opposed to the call's whole duration.
  std::chrono::microseconds last_stop_time() const { return last_stop_time_; }

 private:
  struct Session;
  Session* session_for(pid_t pid, std::string* error);

  WalkOptions options_;
  std::map<pid_t, std::unique_ptr<Session>> sessions_;
  std::chrono::microseconds last_stop_time_{0};
};

}  // namespace canopy::stack
