#include "mrnet/lightweight/report.h"

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace MRN::lightweight {

namespace {
std::atomic<int> output_level{1};
}

void set_output_level(int level) { output_level.store(std::clamp(level, 0, 5)); }

void report(const std::string& what) {
  if (output_level.load() >= 1) std::fprintf(stderr, "mrnet_lightweight: %s\n", what.c_str());
}

}  // namespace MRN::lightweight
