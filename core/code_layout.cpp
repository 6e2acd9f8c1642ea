#include "core/code_layout.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

// Defined by the linker script of a lean program (hidden, so that a shared library's
// own are found in it); null where the program was linked without it.
extern "C" {
__attribute__((weak, visibility("hidden"))) extern const char __canopy_recovery_code_start[];
__attribute__((weak, visibility("hidden"))) extern const char __canopy_recovery_code_end[];
}

namespace canopy::core {

void map_recovery_code() {
  const auto start = reinterpret_cast<std::uintptr_t>(__canopy_recovery_code_start);
  const auto end = reinterpret_cast<std::uintptr_t>(__canopy_recovery_code_end);
  if (start == 0 || end <= start) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = start & ~(page - 1);
  // An error (an older kernel) leaves the pages to be faulted in when they run.
  (void)madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_READ);
}

}  // namespace canopy::core
