// A test plugin that loads: `running_max` emits the largest int32 seen so far, and
// is state recoverable. It calls only inline code of the Canopy headers, so that it
// links nothing and can be unloaded (tests/unit/CMakeLists.txt says why).
#include "canopy/filter.h"

namespace {

class RunningMax {
 public:
  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    std::uint32_t contributors = 0;
    for (const auto& p : wave) {
      const auto* v = p.size() == 1 ? std::get_if<std::int32_t>(&p[0]) : nullptr;
      if (!v) return canopy::Error{"running_max needs packets \"%d\""};
      if (!seen_ || *v > max_) max_ = *v;
      seen_ = true;
      contributors += p.contributors();
    }
    canopy::Packet result(wave.front().tag(), {max_});
    result.set_contributors(contributors);
    out.push_back(std::move(result));
    return {};
  }

  canopy::Packet extract_state() const { return canopy::Packet(0, {max_}); }

 private:
  bool seen_ = false;
  std::int32_t max_ = 0;
};

}  // namespace

CANOPY_FILTER(running_max, RunningMax)
