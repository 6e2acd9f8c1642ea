// Both topology parsers and the tree spec (topology/): the input's first byte picks
// YAML, MRNet's format (with either leaf role) or a generated tree's spec ("b:8^2");
// a topology that parses is written back as YAML, which must parse again to the
// same tree (the round trip the docs promise).
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <vector>
#include <string_view>

#include "canopy/topology.h"

using namespace canopy;

namespace {

// Generated trees may have up to 1.1 million nodes: valid, but a gigabyte and
// seconds each under ASan. The spec's parser is fuzzed on trees the numbers in the
// spec keep under 20,000 nodes (fanout^depth for "b:F^D", the product otherwise).
bool small_tree(std::string_view text) {
  std::vector<double> numbers;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] < '0' || text[i] > '9') {
      ++i;
      continue;
    }
    double n = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) n = n * 10 + (text[i] - '0');
    numbers.push_back(n);
  }
  double bound = 1;
  if (text.find('^') != std::string_view::npos && numbers.size() >= 2) {
    bound = std::pow(numbers[0] + 1, numbers[1]);
  } else {
    for (double n : numbers) bound *= n + 1;
  }
  return bound <= 20000;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t pick = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  Result<Topology> topology = Error{""};
  switch (pick % 4) {
    case 0: topology = parse_topology_yaml(text, "fuzz.yaml"); break;
    case 1: topology = parse_topology_mrnet(text, "fuzz.top", Leaves::backends); break;
    case 2: topology = parse_topology_mrnet(text, "fuzz.top", Leaves::commnodes); break;
    case 3:
      if (text.size() > 32) return 0;  // a spec is short; long ones only grow trees
      if (!small_tree(text)) return 0;
      topology = generate_topology(text);
      break;
  }
  if (!topology) return 0;
  // Trees of up to 1.1 million nodes are valid (topology/generate.cpp); their YAML
  // round trip would only measure the allocator under ASan.
  if (topology->size() > 10000) return 0;
  auto again = parse_topology_yaml(to_yaml(*topology), "round-trip.yaml");
  if (!again || again->size() != topology->size()) std::abort();  // the round trip must hold
  return 0;
}
