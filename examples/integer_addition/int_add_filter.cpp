// The filter `int_add`: the sum of 64-bit integers. Every node with children in the
// stream (the commnodes and the front-end) adds up one packet per child and passes
// the sum up, so the front-end receives one packet per request: the sum over all
// back-ends. Addition is associative and commutative, so the result does not depend
// on the shape of the tree.
#include <canopy/filter.h>

namespace {

class IntAdd {
 public:
  // Called once per wave with one packet per child, in child order.
  canopy::Result<void> execute(std::span<const canopy::Packet> wave, std::vector<canopy::Packet>& out) {
    std::int64_t sum = 0;
    std::uint32_t contributors = 0;
    for (const auto& packet : wave) {
      std::int64_t value = 0;
      if (auto ok = packet.unpack("%ld", value); !ok) {
        return canopy::Error{"int_add takes packets of one int64 (\"%ld\"): " + ok.error()};
      }
      sum += value;
      contributors += packet.contributors();
    }
    canopy::Packet result(wave.front().tag(), {sum});
    result.set_contributors(contributors);  // how many back-ends the sum covers
    out.push_back(std::move(result));
    return {};
  }
};

}  // namespace

// Exports the C symbol canopy_filter_int_add, which Network::load_filter(path,
// "int_add") looks up.
CANOPY_FILTER(int_add, IntAdd)
