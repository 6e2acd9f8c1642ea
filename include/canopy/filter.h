// Filters: how Canopy aggregates packets inside the tree, and the plugin ABI.
//
// A filter is described by one `canopy_filter_descriptor`: its name, create and
// destroy of the per-stream instance state, execute (one wave of input packets →
// zero or more output packets), and, optionally, set_params and extract_state.
// A filter with extract_state is *state recoverable*: after a failure, an orphan
// sends that state to its new parent so that no aggregated information is lost.
//
// Writing a filter in C++ (the usual way): a class with
//   MyFilter(const canopy::FilterContext& context, const canopy::Packet& params);
//   canopy::Result<void> execute(std::span<const canopy::Packet> wave,
//                                std::vector<canopy::Packet>& out);
// and optionally
//   canopy::Result<void> set_params(const canopy::Packet& params);
//   canopy::Packet extract_state() const;
//   void set_context(const canopy::FilterContext& context);  // the tree changed
// then, in the plugin's source file,
//   CANOPY_FILTER(my_filter, MyFilter)
// which exports the C symbol `canopy_filter_my_filter` that the loader looks up
// (CMake: canopy_add_filter(my_plugin my_plugin.cpp) from find_package(Canopy)).
// A constructor may throw to refuse its parameters; every exception that escapes a
// filter becomes an error reported to the front-end, never a crash of the node.
//
// Rules for filters: execute sees one packet per participating child (all of them in
// wait-for-all mode; those that arrived in the other modes), in child order. For
// trees of any shape to give the same result, the aggregation must be associative
// and commutative; for recovery by state composition it must also be idempotent.
//
// ABI. The descriptor is a C struct found by a C symbol, but the packets it passes
// are C++ objects: a plugin must be compiled against the same Canopy headers (ABI
// version) and the same C++ standard library as the processes that load it. The
// loader refuses a descriptor whose `layout` differs from its own, or whose
// `abi_version` it does not know: versions CANOPY_FILTER_ABI_OLDEST to
// CANOPY_FILTER_ABI_VERSION load (version 2 only added fields at the end of
// FilterContext, which a plugin built for version 1 never reads, and set_context at
// the end of the descriptor, which the loader never reads in a version-1 one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "canopy/packet.h"
#include "canopy/result.h"

#define CANOPY_FILTER_ABI_VERSION 2u
#define CANOPY_FILTER_ABI_OLDEST 1u

namespace canopy {

// Where a filter instance runs. Given to create; valid for the call only.
struct FilterContext {
  Rank rank = 0;              // the node running the instance
  StreamId stream = 0;
  bool upstream = true;       // false: the stream's downstream filter
  std::uint32_t children = 0; // number of connected children (at creation, then
                              // with set_context, since ABI version 2)
  // Since ABI version 2: where the node stands in the live tree, live processes only
  // (what MRNet's TopologyLocalInfo tells a filter function), at creation and again
  // through set_context whenever it changes; all 0 where the node does not know the
  // tree.
  std::uint32_t siblings = 0;     // the other children of its parent
  std::uint32_t descendants = 0;  // processes below it
  std::uint32_t backends = 0;     // back-ends below it
  std::uint32_t depth = 0;        // hops up to the front-end
  std::uint32_t height = 0;       // hops down to its deepest descendant
};

// A fingerprint of the C++ types that cross the ABI; equal on both sides of a load.
constexpr std::uint32_t filter_layout() {
  return static_cast<std::uint32_t>(sizeof(Packet)) | static_cast<std::uint32_t>(sizeof(Value)) << 8 |
         static_cast<std::uint32_t>(sizeof(std::string)) << 16 |
#if defined(_GLIBCXX_USE_CXX11_ABI)
         static_cast<std::uint32_t>(_GLIBCXX_USE_CXX11_ABI) << 24 |
#endif
         static_cast<std::uint32_t>(sizeof(std::vector<Packet>)) << 25;
}

}  // namespace canopy

extern "C" {

struct canopy_filter_descriptor {
  std::uint32_t abi_version;  // CANOPY_FILTER_ABI_VERSION when the plugin was built
  std::uint32_t layout;       // canopy::filter_layout() when the plugin was built
  const char* name;           // as streams name it; must equal the symbol's suffix

  // Creates the instance state for one stream at one node. Returns null and sets
  // *error when the parameters are unsuitable.
  void* (*create)(const canopy::FilterContext* context, const canopy::Packet* params,
                  std::string* error);
  void (*destroy)(void* state);

  // Aggregates `count` packets (count >= 1) into zero or more packets appended to
  // *out. Returns false and sets *error if the input was unsuitable.
  bool (*execute)(void* state, const canopy::Packet* wave, std::size_t count,
                  std::vector<canopy::Packet>* out, std::string* error);

  // Optional (null if absent): new parameters for a live instance.
  bool (*set_params)(void* state, const canopy::Packet* params, std::string* error);

  // Optional (null if absent): the instance's whole state as one packet, such that
  // executing it as input at another node composes this state into that node's.
  bool (*extract_state)(void* state, canopy::Packet* out, std::string* error);

  // Since ABI version 2 (a version-1 descriptor ends before it, and is never asked):
  // optional (null if absent). The node's place in the live tree changed (a failure
  // or an adoption somewhere): the instance's context as it is now.
  bool (*set_context)(void* state, const canopy::FilterContext* context, std::string* error);
};

// Every filter exports `const canopy_filter_descriptor* canopy_filter_<name>(void)`.
typedef const canopy_filter_descriptor* (*canopy_filter_entry)(void);

}  // extern "C"

namespace canopy {

// The prefix of the exported symbol: canopy_filter_<name>.
inline constexpr const char* kFilterSymbolPrefix = "canopy_filter_";

namespace filter_detail {

template <typename F>
bool guarded(std::string* error, F&& f) {
  try {
    auto result = f();
    if (!result) {
      *error = result.error();
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    *error = std::string("exception: ") + e.what();
  } catch (...) {
    *error = "unknown exception";
  }
  return false;
}

template <typename T>
concept HasSetParams = requires(T& t, const Packet& p) {
  { t.set_params(p) } -> std::same_as<Result<void>>;
};
template <typename T>
concept HasExtractState = requires(const T& t) {
  { t.extract_state() } -> std::convertible_to<Packet>;
};
template <typename T>
concept HasSetContext = requires(T& t, const FilterContext& c) { t.set_context(c); };

}  // namespace filter_detail

// The descriptor of filter class T (see the top of this file for what T provides).
template <typename T>
const canopy_filter_descriptor* filter_descriptor(const char* name) {
  static const canopy_filter_descriptor descriptor = [name] {
    canopy_filter_descriptor d{};
    d.abi_version = CANOPY_FILTER_ABI_VERSION;
    d.layout = filter_layout();
    d.name = name;
    d.create = [](const FilterContext* context, const Packet* params, std::string* error) -> void* {
      T* instance = nullptr;
      filter_detail::guarded(error, [&]() -> Result<void> {
        if constexpr (std::is_constructible_v<T, const FilterContext&, const Packet&>) {
          instance = new T(*context, *params);
        } else {
          static_assert(std::is_default_constructible_v<T>,
                        "a filter is constructed from (const FilterContext&, const Packet&) or by default");
          if (params->size() != 0) return Error{"this filter takes no parameters"};
          instance = new T();
        }
        return {};
      });
      return instance;
    };
    d.destroy = [](void* state) { delete static_cast<T*>(state); };
    d.execute = [](void* state, const Packet* wave, std::size_t count, std::vector<Packet>* out,
                   std::string* error) {
      return filter_detail::guarded(error, [&] {
        return static_cast<T*>(state)->execute(std::span<const Packet>(wave, count), *out);
      });
    };
    if constexpr (filter_detail::HasSetParams<T>) {
      d.set_params = [](void* state, const Packet* params, std::string* error) {
        return filter_detail::guarded(error, [&] { return static_cast<T*>(state)->set_params(*params); });
      };
    }
    if constexpr (filter_detail::HasExtractState<T>) {
      d.extract_state = [](void* state, Packet* out, std::string* error) {
        return filter_detail::guarded(error, [&]() -> Result<void> {
          *out = static_cast<const T*>(state)->extract_state();
          return {};
        });
      };
    }
    if constexpr (filter_detail::HasSetContext<T>) {
      d.set_context = [](void* state, const FilterContext* context, std::string* error) {
        return filter_detail::guarded(error, [&]() -> Result<void> {
          static_cast<T*>(state)->set_context(*context);
          return {};
        });
      };
    }
    return d;
  }();
  return &descriptor;
}

}  // namespace canopy

// Exports filter class `Class` under `name` (an identifier) from a plugin.
#define CANOPY_FILTER(name, Class)                                                  \
  extern "C" __attribute__((visibility("default"))) const canopy_filter_descriptor* \
      canopy_filter_##name(void) {                                                  \
    return ::canopy::filter_descriptor<Class>(#name);                               \
  }
