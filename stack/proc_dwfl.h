// A libdwfl session (Dwfl) over the modules a live process has mapped, shared by the
// MPIR reader and the walker. Debug information is looked up only on this machine
// (the module itself, then /usr/lib/debug by build id), never through debuginfod:
// a download while the target is stopped would stall it (and, for mpirun, the job).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "canopy/result.h"

typedef struct Dwfl Dwfl;

namespace canopy::stack {

struct DwflDeleter {
  void operator()(Dwfl* dwfl) const;
};
using DwflPtr = std::unique_ptr<Dwfl, DwflDeleter>;

// A new Dwfl with the modules of /proc/PID/maps reported. Errors: failed, with the
// libdwfl reason (the process exited, or its maps could not be read).
Result<DwflPtr> report_process(pid_t pid);

// Reports the modules of /proc/PID/maps again into an existing Dwfl: modules mapped
// as before are kept with what libdwfl read of them (symbol tables, CFI); new ones
// (dlopen) are added and unmapped ones dropped.
Result<void> rereport_process(Dwfl* dwfl, pid_t pid);

// The last libdwfl error as text.
std::string dwfl_error_text();

}  // namespace canopy::stack
