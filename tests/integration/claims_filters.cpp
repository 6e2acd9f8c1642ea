// Test plugin for docs/filters.md's claims (filter_claims_test.cpp):
//   `stamp`   (a downstream filter): appends the rank of the node running it to the
//             int32 array at position 0, so a back-end can tell which nodes
//             transformed the packet on its way down;
//   `explode` throws from execute(), as a buggy filter would.
#include <stdexcept>
#include <string>

#include "canopy/filter.h"

namespace {

class Stamp {
 public:
  Stamp(const canopy::FilterContext& context, const canopy::Packet&) : rank_(context.rank) {}

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    for (const auto& p : wave) {
      const auto* path = p.size() == 1 ? std::get_if<std::vector<std::int32_t>>(&p[0]) : nullptr;
      if (!path) return canopy::Error{"stamp needs packets \"%ad\""};
      auto stamped = *path;
      stamped.push_back(static_cast<std::int32_t>(rank_));
      out.push_back(canopy::Packet(p.tag(), {std::move(stamped)}));
    }
    return {};
  }

 private:
  canopy::Rank rank_;
};

class Explode {
 public:
  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>&) {
    throw std::runtime_error("explode refuses a wave of " + std::to_string(wave.size()) + " packets");
  }
};

}  // namespace

CANOPY_FILTER(stamp, Stamp)
CANOPY_FILTER(explode, Explode)
