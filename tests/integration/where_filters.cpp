// A test plugin that says where it is loaded: when a process loads it, and
// CANOPY_TEST_LOAD_LOG names a file, it appends the name of the process's program
// (one line) to that file. Two filters over "%d" packets:
//   `where_sum`   sums; not state recoverable, so back-ends never load it;
//   `where_max`   keeps the largest value seen; state recoverable (its state is
//                 that value), so back-ends load it for the streams that use it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "canopy/filter.h"

namespace {

__attribute__((constructor)) void log_load() {
  const char* log = std::getenv("CANOPY_TEST_LOAD_LOG");
  if (!log) return;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  std::string line(exe, static_cast<std::size_t>(n));
  line = line.substr(line.rfind('/') + 1) + "\n";
  const int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  [[maybe_unused]] auto written = write(fd, line.data(), line.size());  // one write: lines never interleave
  close(fd);
}

canopy::Result<std::int32_t> value_of(const canopy::Packet& p) {
  std::int32_t v = 0;
  if (!p.unpack("%d", v)) return canopy::Error{"where filters need packets \"%d\""};
  return v;
}

class WhereSum {
 public:
  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    std::int32_t sum = 0;
    for (const auto& p : wave) {
      auto v = value_of(p);
      if (!v) return canopy::Error{v.error()};
      sum += *v;
    }
    out.push_back(canopy::Packet(wave.front().tag(), {sum}));
    return {};
  }
};

class WhereMax {
 public:
  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    for (const auto& p : wave) {
      auto v = value_of(p);
      if (!v) return canopy::Error{v.error()};
      max_ = std::max(max_, *v);
    }
    out.push_back(canopy::Packet(wave.front().tag(), {max_}));
    return {};
  }

  canopy::Packet extract_state() const { return canopy::Packet(0, {max_}); }

 private:
  std::int32_t max_ = INT32_MIN;
};

}  // namespace

CANOPY_FILTER(where_sum, WhereSum)
CANOPY_FILTER(where_max, WhereMax)
