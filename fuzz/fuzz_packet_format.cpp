// Packet format strings (include/canopy/packet.h): parse_format on any text; every
// type index it gives must be one a Value has.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "canopy/packet.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto types = canopy::parse_format(text);
  if (!types) return 0;
  for (std::size_t type : *types) {
    if (type >= std::variant_size_v<canopy::Value>) __builtin_trap();  // an index no value has
  }
  return 0;
}
