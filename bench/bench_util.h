// Small helpers the benchmark programs share: wall-clock microseconds (comparable
// across processes, as the events' times are), quantiles, and splitting CSV lines.
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace canopy::bench {

// CLOCK_REALTIME in microseconds.
inline std::int64_t realtime_us() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

inline std::int64_t us_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// The q-quantile (0 <= q <= 1) by linear interpolation; NaN for no values.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = static_cast<std::size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Median, 10th and 90th percentiles by nearest rank (the benchmarks' CSV columns),
// and how many samples; all 0 for none.
struct Stats {
  double median = 0, p10 = 0, p90 = 0;
  std::size_t n = 0;
};
inline Stats nearest_rank_stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
  };
  return {at(0.5), at(0.1), at(0.9), v.size()};
}

// The fields of one line separated by `sep` (a trailing separator ends an empty one).
inline std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, sep)) out.push_back(cell);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

}  // namespace canopy::bench
