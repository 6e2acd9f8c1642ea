// A filter plugin built with canopy_add_filter(): the maximum of int32 values.
#include <algorithm>
#include <limits>

#include <canopy/filter.h>

namespace {

class Max {
 public:
  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    std::int32_t max = std::numeric_limits<std::int32_t>::min();
    std::uint32_t contributors = 0;
    for (const auto& packet : wave) {
      std::int32_t value = 0;
      if (auto ok = packet.unpack("%d", value); !ok) return canopy::Error{"package_max: " + ok.error()};
      max = std::max(max, value);
      contributors += packet.contributors();
    }
    canopy::Packet result(wave.front().tag(), {max});
    result.set_contributors(contributors);
    out.push_back(std::move(result));
    return {};
  }
};

}  // namespace

CANOPY_FILTER(package_max, Max)
