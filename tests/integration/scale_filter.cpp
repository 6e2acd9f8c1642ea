// A test plugin: `scale` sums int32 values and multiplies the sum by a factor, given
// as the parameter "%d" at creation and changeable later.
#include "canopy/filter.h"

namespace {

class Scale {
 public:
  Scale(const canopy::FilterContext&, const canopy::Packet& params) {
    if (auto ok = set_params(params); !ok) throw std::invalid_argument(ok.error());
  }

  canopy::Result<void> set_params(const canopy::Packet& params) {
    if (params.size() == 0) return {};
    std::int32_t factor = 0;
    if (!params.unpack("%d", factor)) return canopy::Error{"scale takes one parameter, \"%d\" (the factor)"};
    factor_ = factor;
    return {};
  }

  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    std::int32_t sum = 0;
    std::uint32_t contributors = 0;
    for (const auto& p : wave) {
      std::int32_t v = 0;
      if (!p.unpack("%d", v)) return canopy::Error{"scale needs packets \"%d\""};
      sum += v;
      contributors += p.contributors();
    }
    canopy::Packet result(wave.front().tag(), {sum * factor_});
    result.set_contributors(contributors);
    out.push_back(std::move(result));
    return {};
  }

 private:
  std::int32_t factor_ = 1;
};

}  // namespace

CANOPY_FILTER(scale, Scale)
