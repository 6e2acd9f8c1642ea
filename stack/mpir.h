// The MPIR process acquisition interface: the table an MPI launcher (Open MPI's
// mpirun, MPICH's mpiexec) keeps of the processes of its job, read from outside, so
// that a tool can find every rank's host and pid from the launcher's pid alone.
//
// The launcher defines, in its executable or in a library it has loaded (Open MPI 4:
// libopen-rte.so), the global symbols
//   MPIR_proctable       pointer to an array of { char* host_name; char* executable_name; int pid; }
//   MPIR_proctable_size  int, its number of entries; entry i is rank i
//   MPIR_debug_state     int, 1 (MPIR_DEBUG_SPAWNED) once the table is filled
// Open MPI fills the table only once every rank has called MPI_Init; until then (and
// for ever, when the job runs a program that is not an MPI program) it is empty.
//
// The launcher is assumed to be a process of the same ELF class as the caller (64-bit
// on 64-bit); its strings and table are validated while they are read, never trusted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "canopy/result.h"

namespace canopy::stack {

struct RankProcess {
  std::uint32_t rank;
  std::string host;        // as the launcher names it (not resolved)
  std::string executable;  // as the launcher names it (may hold "./")
  pid_t pid;               // on `host`
};

// Bounds on what is read from the launcher, beyond which its table is taken as corrupt.
inline constexpr std::int64_t max_proctable_size = 10'000'000;
inline constexpr std::size_t max_proctable_string = 4096;

// Reads the launcher's process table once. The launcher's threads are stopped with
// ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT) only while the table is read, and detached
// on every path; a signal that arrives meanwhile is given back. Entry i is rank i.
// Errors:
//   invalid_input  no such process; not an MPI launcher (no MPIR_proctable symbol);
//                  no permission to trace it (another user, ptrace_scope, another
//                  debugger already attached)
//   failed         the table is empty (the ranks have not all called MPI_Init yet, or
//                  they are not MPI programs); the launcher exited while it was read;
//                  the table is corrupt (size out of bounds, null or unterminated strings)
Result<std::vector<RankProcess>> read_proctable(pid_t launcher);

// For a job just started: polls until the table is filled, then reads it as
// read_proctable does. The launcher is stopped only for the final read; the polls
// read two integers without stopping it. A missing MPIR_proctable symbol is retried
// too (right after exec the launcher may not have loaded its MPI library yet). Errors
// as read_proctable's, the last one seen when `timeout` passes; "no such process" and
// "no permission" at once.
Result<std::vector<RankProcess>> wait_for_proctable(pid_t launcher, std::chrono::milliseconds timeout);

}  // namespace canopy::stack
