// Filters aggregate one wave of packets (one per participating child) into output.
//
// A Filter object is the per-stream instance: it may keep state across waves.
// Filters run on the node's event-loop thread. The plugin ABI (shared objects with
// a versioned C descriptor) will produce Filter objects through the same registry.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "canopy/packet.h"
#include "canopy/result.h"

namespace canopy::filters {

class Filter {
 public:
  virtual ~Filter() = default;

  // Aggregates `wave` (non-empty, in child order) into zero or more packets appended
  // to `out`. An error says which value of which input was unsuitable.
  virtual Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) = 0;
};

class FilterRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Filter>()>;

  // A registry holding sum, min, max, avg, concat and union.
  static FilterRegistry with_builtins();

  void add(std::string name, Factory factory);
  // A new instance, or an error listing the known names.
  Result<std::unique_ptr<Filter>> create(const std::string& name) const;
  bool contains(const std::string& name) const { return factories_.count(name) != 0; }
  std::vector<std::string> names() const;

 private:
  std::map<std::string, Factory> factories_;
};

}  // namespace canopy::filters
