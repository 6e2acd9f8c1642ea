// canopy-stack-walk-bench: what one stack sample costs (stack/walker.h), to choose the
// unwinder by measurement (docs/benchmarks.md). For each PID given, prints CSV rows
//   pid,threads,sample,call_us,stopped_us
// for the first sample (a new Walker: modules, symbol tables and CFI are read) and
// then `--samples N` more on the same Walker (cached Dwfl), and a summary line per pid
// with the median and 90th percentile of the cached samples. call_us is the whole
// sample() call; stopped_us how long the process was held stopped.
//
// Usage: canopy-stack-walk-bench [--samples N] [--lines] PID...
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "stack/walker.h"

int main(int argc, char** argv) {
  int samples = 20;
  bool lines = false;
  std::vector<pid_t> pids;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--samples") == 0 && i + 1 < argc) {
      samples = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--lines") == 0) {
      lines = true;
    } else if (int pid = std::atoi(argv[i]); pid > 0) {
      pids.push_back(pid);
    } else {
      std::fprintf(stderr, "usage: %s [--samples N] [--lines] PID...\n", argv[0]);
      return 2;
    }
  }
  if (pids.empty() || samples < 1) {
    std::fprintf(stderr, "usage: %s [--samples N] [--lines] PID...\n", argv[0]);
    return 2;
  }
  std::printf("pid,threads,sample,call_us,stopped_us\n");
  for (pid_t pid : pids) {
    canopy::stack::Walker walker({.lines = lines});
    std::vector<double> call, stopped;
    for (int i = 0; i <= samples; ++i) {
      auto began = std::chrono::steady_clock::now();
      auto result = walker.sample({pid});
      double call_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - began).count();
      if (!result[0]) {
        std::fprintf(stderr, "pid %d: %s\n", pid, result[0].error().c_str());
        return 1;
      }
      double stopped_us = static_cast<double>(walker.last_stop_time().count());
      std::printf("%d,%zu,%s,%.0f,%.0f\n", pid, result[0]->size(), i == 0 ? "first" : std::to_string(i).c_str(),
                  call_us, stopped_us);
      if (i > 0) call.push_back(call_us), stopped.push_back(stopped_us);
    }
    using canopy::bench::quantile;
    std::printf("# pid %d cached: call median %.0f us p90 %.0f us; stopped median %.0f us p90 %.0f us\n", pid,
                quantile(call, 0.5), quantile(call, 0.9), quantile(stopped, 0.5), quantile(stopped, 0.9));
  }
  return 0;
}
