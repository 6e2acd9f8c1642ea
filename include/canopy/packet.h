// Packets: what streams carry. A packet is a tag plus a list of typed values.
//
// Two ways to build one:
//   canopy::Packet p{7, {std::int32_t{5}, std::vector<double>{1.0, 2.5}}};
//   auto p = canopy::Packet::pack(7, "%d %alf", 5, std::vector<double>{1.0, 2.5});
// and to read one:
//   std::int32_t n; std::vector<double> xs;
//   if (auto r = p.unpack("%d %alf", n, xs); !r) { /* r.error() says why */ }
//
// Format codes (MRNet's, plus %b): %d int32, %ud uint32, %ld int64, %uld uint64,
// %f float, %lf double, %s string, %b bytes; prefix `a` for arrays of any of the
// numeric types or of strings: %ad %aud %ald %auld %af %alf %as.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"

namespace canopy {

using StreamId = std::uint32_t;
using Tag = std::int32_t;

// A byte string, kept apart from text so that filters and formats can tell them apart.
struct Bytes {
  std::vector<std::uint8_t> data;
  bool operator==(const Bytes&) const = default;
};

using Value = std::variant<std::int32_t, std::int64_t, std::uint32_t, std::uint64_t, float,
                           double, std::string, Bytes, std::vector<std::int32_t>,
                           std::vector<std::int64_t>, std::vector<std::uint32_t>,
                           std::vector<std::uint64_t>, std::vector<float>, std::vector<double>,
                           std::vector<std::string>>;

// The format code of a value's type, e.g. "%ad" for std::vector<int32_t>.
std::string_view format_code(const Value& value);

// Parses a format string into one value-type index (Value::index()) per code.
Result<std::vector<std::size_t>> parse_format(std::string_view format);

class Packet {
 public:
  Packet() = default;
  Packet(Tag tag, std::vector<Value> values) : tag_(tag), values_(std::move(values)) {}

  // Builds a packet from a format string; each argument must be convertible to the
  // type its code names without loss of kind (an integer for %d, a range of doubles
  // for %alf...). A mismatch in count or type is an error naming the position.
  template <typename... Args>
  static Result<Packet> pack(Tag tag, std::string_view format, Args&&... args);

  // Reads values into `out...` according to `format`; an error names the first
  // position whose code does not match the packet.
  template <typename... Args>
  Result<void> unpack(std::string_view format, Args&... out) const;

  Tag tag() const { return tag_; }
  void set_tag(Tag tag) { tag_ = tag; }
  const std::vector<Value>& values() const { return values_; }
  std::vector<Value>& values() { return values_; }
  std::size_t size() const { return values_.size(); }
  const Value& operator[](std::size_t i) const { return values_[i]; }

  // The format string that describes this packet, e.g. "%d %ad".
  std::string format() const;

  // Rank of the back-end (or front-end) that sent it; for an aggregated packet, the
  // rank of the node that produced the aggregate (the `pass` filter aggregates
  // nothing: what it forwards keeps its sender).
  Rank source() const { return source_; }
  void set_source(Rank rank) { source_ = rank; }

  // How many back-end packets were aggregated into this one (1 for a raw packet).
  // A filter may set it on what it emits; where it does not, the runtime sets each
  // packet the filter emitted to the sum over the wave it was given
  // (docs/filters.md, "Contributors").
  std::uint32_t contributors() const { return contributors_; }
  void set_contributors(std::uint32_t n) {
    contributors_ = n;
    contributors_set_ = true;
  }
  // Whether set_contributors() gave it (a packet received has it given).
  bool contributors_set() const { return contributors_set_; }

  // Equal tags, values, sources and contributors.
  bool operator==(const Packet& other) const {
    return tag_ == other.tag_ && values_ == other.values_ && source_ == other.source_ &&
           contributors_ == other.contributors_;
  }

 private:
  template <typename T>
  static bool assign(Value& slot, std::size_t type_index, T&& arg);
  // Stores arg as Value's alternative I if it converts to it. A function rather than
  // a templated lambda: clang 14 instantiates the discarded branches of `if
  // constexpr` in a templated lambda inside a template, and fails on them.
  template <std::size_t I, typename T>
  static bool assign_as(Value& slot, T&& arg);
  template <typename T>
  static bool extract(const Value& value, std::size_t type_index, T& out);

  Tag tag_ = 0;
  std::vector<Value> values_;
  Rank source_ = 0;
  std::uint32_t contributors_ = 1;
  bool contributors_set_ = false;
};

// A packet as received, with the stream it came on.
struct Received {
  StreamId stream = 0;
  Packet packet;
  // The membership view (docs/membership.md) the receiving process held when the
  // packet reached it.
  std::uint64_t view = 0;
  // Upstream, at the front-end (docs/fault-tolerance.md, "Waves after a failure"):
  // the wave this result closes, numbered on its stream by the back-ends from 0 (one
  // per packet each sends on it); none for a packet of no wave (point-to-point, or
  // the filter state an adopted orphan gives its new parent).
  std::optional<std::uint64_t> wave;
  // How many back-ends the wave holds, each once (whatever the filter set as the
  // packet's contributors).
  std::uint32_t holds = 0;
  // Whether the wave holds exactly the back-ends of the stream that are members of
  // view `view`: then it is exact over all of them. An incomplete wave is exact over
  // the `holds` back-ends it holds, and lacks others (packets lost in a failure,
  // closed by a time-out, or don't-wait's one packet at a time).
  bool complete = false;
};

// How a node groups its children's packets into waves for the upstream filter.
enum class SyncMode : std::uint8_t {
  wait_for_all,  // one packet from every child of the stream per wave
  dont_wait,     // every packet is filtered on its own as soon as it arrives
  time_out,      // like wait_for_all, but a wave closes a time-out after its first
                 // packet with whatever has arrived by then
};

// Which filter of a stream new parameters are for. The sync "filter" takes one
// parameter: the time-out of time_out mode in milliseconds (an integer).
enum class FilterSlot : std::uint8_t { upstream, sync, downstream };

// A human-readable rendering, e.g. "48120" or "[1, 2, 3]"; strings are quoted.
std::string to_string(const Value& value);
// JSON rendering of a value (numbers, strings, arrays; bytes as an array of numbers).
std::string to_json(const Value& value);

// ---- implementation of the templates ----

template <std::size_t I, typename T>
bool Packet::assign_as(Value& slot, T&& arg) {
  using A = std::remove_cvref_t<T>;
  using V = std::variant_alternative_t<I, Value>;
  if constexpr (std::is_same_v<A, V>) {
    slot.template emplace<I>(std::forward<T>(arg));
    return true;
  } else if constexpr (std::is_arithmetic_v<V> && std::is_arithmetic_v<A> &&
                       std::is_floating_point_v<V> == std::is_floating_point_v<A>) {
    slot.template emplace<I>(static_cast<V>(arg));
    return true;
  } else if constexpr (std::is_same_v<V, std::string> && std::is_convertible_v<A, std::string_view>) {
    slot.template emplace<I>(std::string(std::string_view(arg)));
    return true;
  } else if constexpr (requires { typename V::value_type; typename A::value_type; } &&
                       !std::is_same_v<V, std::string> && !std::is_same_v<V, Bytes>) {
    using VE = typename V::value_type;
    using AE = typename A::value_type;
    if constexpr (std::is_constructible_v<VE, const AE&> &&
                  std::is_arithmetic_v<VE> == std::is_arithmetic_v<AE>) {
      slot.template emplace<I>(V(arg.begin(), arg.end()));
      return true;
    }
  }
  return false;
}

template <typename T>
bool Packet::assign(Value& slot, std::size_t type_index, T&& arg) {
  return [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    return ((Is == type_index && assign_as<Is>(slot, std::forward<T>(arg))) || ...);
  }(std::make_index_sequence<std::variant_size_v<Value>>{});
}

template <typename T>
bool Packet::extract(const Value& value, std::size_t type_index, T& out) {
  if (value.index() != type_index) return false;
  bool done = false;
  std::visit(
      [&](const auto& v) {
        using V = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_assignable_v<T&, const V&> &&
                      (std::is_arithmetic_v<V> == std::is_arithmetic_v<T>)) {
          out = v;
          done = true;
        }
      },
      value);
  return done;
}

template <typename... Args>
Result<Packet> Packet::pack(Tag tag, std::string_view format, Args&&... args) {
  auto types = parse_format(format);
  if (!types) return Error{types.error()};
  if (types->size() != sizeof...(Args)) {
    return Error{"format \"" + std::string(format) + "\" names " + std::to_string(types->size()) +
                 " values but " + std::to_string(sizeof...(Args)) + " were given"};
  }
  Packet packet;
  packet.tag_ = tag;
  packet.values_.resize(sizeof...(Args));
  std::size_t i = 0;
  std::size_t bad = 0;
  ((bad = bad ? bad : (assign(packet.values_[i], (*types)[i], std::forward<Args>(args)) ? 0 : i + 1),
    ++i),
   ...);
  if (bad) {
    return Error{"argument " + std::to_string(bad) + " does not match its code in format \"" +
                 std::string(format) + "\""};
  }
  return packet;
}

template <typename... Args>
Result<void> Packet::unpack(std::string_view format, Args&... out) const {
  auto types = parse_format(format);
  if (!types) return Error{types.error()};
  if (types->size() != sizeof...(Args) || types->size() != values_.size()) {
    return Error{"format \"" + std::string(format) + "\" does not match packet \"" + this->format() +
                 "\""};
  }
  std::size_t i = 0;
  std::size_t bad = 0;
  ((bad = bad ? bad : (extract(values_[i], (*types)[i], out) ? 0 : i + 1), ++i), ...);
  if (bad) {
    return Error{"value " + std::to_string(bad) + " of packet \"" + this->format() +
                 "\" cannot be read with format \"" + std::string(format) + "\""};
  }
  return {};
}

}  // namespace canopy
