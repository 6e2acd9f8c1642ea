#include "membership/gossip_schedule.h"

#include <algorithm>
#include <set>

namespace canopy::membership {

std::uint32_t ceil_log2(std::uint32_t n) {
  std::uint32_t bits = 0;
  while (bits < 32 && (std::uint64_t{1} << bits) < n) ++bits;
  return bits;
}

std::uint32_t cycle_rounds(GossipSchedule schedule, std::uint32_t n) {
  switch (schedule) {
    case GossipSchedule::rr: return std::max<std::uint32_t>(1, n - 1);
    case GossipSchedule::brr: return std::max<std::uint32_t>(1, ceil_log2(n));
    case GossipSchedule::dbrr: return std::max<std::uint32_t>(1, 2 * ceil_log2(n));
    case GossipSchedule::off:
    case GossipSchedule::random: return 1;
  }
  return 1;
}

std::uint32_t gossip_target(GossipSchedule schedule, std::uint32_t s, std::uint32_t r, std::uint32_t n,
                            std::mt19937_64& rng) {
  const std::uint64_t big_n = n;
  switch (schedule) {
    case GossipSchedule::rr: return static_cast<std::uint32_t>((s + std::uint64_t{r}) % big_n);
    case GossipSchedule::brr: return static_cast<std::uint32_t>((s + (std::uint64_t{1} << (r - 1))) % big_n);
    case GossipSchedule::dbrr: {
      const std::uint32_t half = ceil_log2(n);
      if (r <= half) return static_cast<std::uint32_t>((s + (std::uint64_t{1} << (r - 1))) % big_n);
      const std::uint64_t back = (std::uint64_t{1} << (r - half - 1)) % big_n;
      return static_cast<std::uint32_t>((s + big_n - back) % big_n);
    }
    case GossipSchedule::off:
    case GossipSchedule::random: {
      std::uniform_int_distribution<std::uint32_t> pick(1, n - 1);
      return static_cast<std::uint32_t>((s + std::uint64_t{pick(rng)}) % big_n);
    }
  }
  return s;
}

std::vector<std::uint32_t> gossip_sources(GossipSchedule schedule, std::uint32_t d, std::uint32_t n) {
  std::set<std::uint32_t> out;
  if (schedule == GossipSchedule::random || schedule == GossipSchedule::off) {
    for (std::uint32_t s = 0; s < n; ++s) {
      if (s != d) out.insert(s);
    }
  } else {
    // Whoever reaches d in round r sits at d minus that round's offset; the offset of
    // a round does not depend on s.
    std::mt19937_64 unused;
    for (std::uint32_t r = 1; r <= cycle_rounds(schedule, n); ++r) {
      const std::uint32_t offset = gossip_target(schedule, 0, r, n, unused);
      const std::uint32_t s = static_cast<std::uint32_t>((std::uint64_t{d} + n - offset) % n);
      if (s != d) out.insert(s);
    }
  }
  return {out.begin(), out.end()};
}

std::uint32_t cleanup_rounds(GossipSchedule schedule, std::uint32_t n) {
  const std::uint32_t log = ceil_log2(n);
  switch (schedule) {
    case GossipSchedule::rr: {
      // The ceiling of ρ with ρ(ρ+1)/2 = n: the least integer r with r(r+1)/2 >= n,
      // found in integers (exact, and no libm in a lean back-end: cmake/CanopyLean.cmake).
      std::uint64_t lo = 0, hi = 1u << 17;  // hi(hi+1)/2 > 2^32 > n
      while (lo < hi) {
        const std::uint64_t mid = (lo + hi) / 2;
        if (mid * (mid + 1) / 2 >= n) hi = mid; else lo = mid + 1;
      }
      return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(lo));
    }
    case GossipSchedule::dbrr: return std::max<std::uint32_t>(1, 3 * log);
    case GossipSchedule::off:
    case GossipSchedule::random:
    case GossipSchedule::brr: return std::max<std::uint32_t>(1, 2 * log);
  }
  return 1;
}

}  // namespace canopy::membership
