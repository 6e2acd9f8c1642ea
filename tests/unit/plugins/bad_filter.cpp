// A test plugin of descriptors the loader must refuse, one per check: each is the
// valid descriptor of a trivial filter with one field spoilt; and one it must take,
// built for an older ABI version it still knows.
#include "canopy/filter.h"

namespace {

class Nothing {
 public:
  canopy::Result<void> execute(std::span<const canopy::Packet>, std::vector<canopy::Packet>&) { return {}; }
};

canopy_filter_descriptor valid(const char* name) {
  canopy_filter_descriptor d = *canopy::filter_descriptor<Nothing>("nothing");
  d.name = name;
  return d;
}

}  // namespace

#define CANOPY_TEST_EXPORT extern "C" __attribute__((visibility("default"))) const canopy_filter_descriptor*

CANOPY_TEST_EXPORT canopy_filter_bad_abi(void) {
  static const canopy_filter_descriptor d = [] {
    auto d = valid("bad_abi");
    d.abi_version += 1;
    return d;
  }();
  return &d;
}

CANOPY_TEST_EXPORT canopy_filter_older_abi(void) {
  static const canopy_filter_descriptor d = [] {
    auto d = valid("older_abi");
    d.abi_version = CANOPY_FILTER_ABI_OLDEST;
    return d;
  }();
  return &d;
}

CANOPY_TEST_EXPORT canopy_filter_bad_layout(void) {
  static const canopy_filter_descriptor d = [] {
    auto d = valid("bad_layout");
    d.layout ^= 1u;
    return d;
  }();
  return &d;
}

CANOPY_TEST_EXPORT canopy_filter_misnamed(void) {
  static const canopy_filter_descriptor d = valid("other_name");
  return &d;
}

CANOPY_TEST_EXPORT canopy_filter_no_execute(void) {
  static const canopy_filter_descriptor d = [] {
    auto d = valid("no_execute");
    d.execute = nullptr;
    return d;
  }();
  return &d;
}

CANOPY_TEST_EXPORT canopy_filter_null(void) { return nullptr; }
