// The filter registry of one node, and filter instances.
//
// Every filter, built-in or loaded from a plugin, is a canopy_filter_descriptor
// (include/canopy/filter.h). The registry maps names to descriptors; an instance is
// a descriptor plus its state, and keeps the plugin library loaded while it lives.
// Filters run on the node's event-loop thread.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "canopy/filter.h"
#include "canopy/packet.h"
#include "canopy/result.h"

namespace canopy::filters {

// A dlopen()ed plugin; unloaded when the last holder lets go.
class Library;

class Filter {
 public:
  Filter(const canopy_filter_descriptor* descriptor, void* state, std::shared_ptr<Library> library);
  ~Filter();
  Filter(const Filter&) = delete;
  Filter& operator=(const Filter&) = delete;

  const char* name() const { return descriptor_->name; }

  // Aggregates `wave` (non-empty, in child order) into zero or more packets appended
  // to `out`. An error says which value of which input was unsuitable.
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out);
  Result<void> set_params(const Packet& params);
  bool state_recoverable() const { return descriptor_->extract_state != nullptr; }
  Result<Packet> extract_state();
  // Tells the instance its context now (the tree changed); nothing for a filter
  // without set_context, or built for ABI version 1 (whose descriptor has no such
  // field to read).
  Result<void> set_context(const FilterContext& context);

 private:
  const canopy_filter_descriptor* descriptor_;
  void* state_;
  std::shared_ptr<Library> library_;
  std::string error_;  // reused for error messages from the descriptor
};

class FilterRegistry {
 public:
  // A registry holding the built-in filters (see builtin.cpp).
  static FilterRegistry with_builtins();

  // Adds (or replaces) a filter; the descriptor must outlive the registry.
  void add(const canopy_filter_descriptor* descriptor, std::shared_ptr<Library> library = {});

  // Loads filter `name` from the shared object at `path` (symbol canopy_filter_<name>)
  // and registers it. Loading the same file and name again is a no-op. Errors say
  // what failed: the file (dlerror), the symbol, or an ABI or layout mismatch.
  Result<void> load(const std::string& path, const std::string& name);

  // A new instance, or an error listing the known names.
  Result<std::unique_ptr<Filter>> create(const std::string& name, const FilterContext& context,
                                         const Packet& params = {}) const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // The shared object filter `name` was loaded from: "" for a built-in or an unknown name.
  std::string plugin_path(const std::string& name) const;
  // Whether filter `name` has extract_state (see canopy::Filter::state_recoverable).
  bool state_recoverable(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  struct Entry {
    const canopy_filter_descriptor* descriptor;
    std::shared_ptr<Library> library;  // null for built-ins
    std::string path;                  // "" for built-ins
  };
  std::map<std::string, Entry> entries_;
};

// Checks a descriptor found under `name` against this build's ABI.
Result<void> check_descriptor(const canopy_filter_descriptor* descriptor, const std::string& name);

}  // namespace canopy::filters
