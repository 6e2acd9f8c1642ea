// MRNet 5.0.1's built-in transformation filters over MRNet-encoded packets
// (docs/mrnet.md, decision 3), as MRNet's FilterDefinitions.C defines them:
//
//   mrnet_sum, mrnet_min, mrnet_max  (TFILTER_SUM 1, TFILTER_MIN 4, TFILTER_MAX 3):
//     packets of exactly one scalar "%c" "%uc" "%hd" "%uhd" "%d" "%ud" "%ld" "%uld"
//     "%f" "%lf"; one packet of the same format with the sum (wrapping around in the
//     directive's type), the least or the greatest value.
//   mrnet_avg  (TFILTER_AVG 2): packets "<scalar> %d", an average and the number of
//     values it averages; one packet of the same format: the weighted average (each
//     product and the running sum kept in the directive's type, integer division for
//     the integer types) and the total count.
//   mrnet_array_concat  (TFILTER_ARRAY_CONCAT 5): packets of exactly one array
//     ("%ac" ... "%as", "%Ac" ... "%As"); one packet of that format with the arrays
//     one after the other, in wave order.
//   mrnet_int_eq_class  (TFILTER_INT_EQ_CLASS 8): packets "%aud %aud %aud" holding
//     equivalence classes: values, member counts, and the members class after class;
//     one packet "%aud %aud %aud" of the union: the values in ascending order, each
//     with the members every packet gave it, in wave order.
//
// Every output carries the tag of the wave's first packet. Where MRNet asserts or
// only prints a debug message (mixed formats, a type the filter does not take), the
// filter fails with an error that names it and the format.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "canopy/filter.h"
#include "mrnet/filters/wave.h"
#include "mrnet/packet_codec.h"

namespace canopy::mrnet_filters {
namespace {

using MRN::DataType;

constexpr const char* kScalars = "\"%c\", \"%uc\", \"%hd\", \"%uhd\", \"%d\", \"%ud\", \"%ld\", \"%uld\", \"%f\" or \"%lf\"";

// A scalar directive's C type, and the type of the Canopy value that carries it.
template <typename Native, typename Carrier>
struct Scalar {
  using native = Native;
  using carrier = Carrier;
  static Native read(const Value& v) { return static_cast<Native>(std::get<Carrier>(v)); }
  static Value carry(Native x) { return Value(std::in_place_type<Carrier>, static_cast<Carrier>(x)); }
};

// Calls f(Scalar<...>{}) for a scalar directive's type; false for any other type.
template <typename F>
bool with_scalar(DataType type, F&& f) {
  switch (type) {
    case MRN::CHAR_T: f(Scalar<char, std::int32_t>{}); return true;
    case MRN::UCHAR_T: f(Scalar<unsigned char, std::uint32_t>{}); return true;
    case MRN::INT16_T: f(Scalar<std::int16_t, std::int32_t>{}); return true;
    case MRN::UINT16_T: f(Scalar<std::uint16_t, std::uint32_t>{}); return true;
    case MRN::INT32_T: f(Scalar<std::int32_t, std::int32_t>{}); return true;
    case MRN::UINT32_T: f(Scalar<std::uint32_t, std::uint32_t>{}); return true;
    case MRN::INT64_T: f(Scalar<std::int64_t, std::int64_t>{}); return true;
    case MRN::UINT64_T: f(Scalar<std::uint64_t, std::uint64_t>{}); return true;
    case MRN::FLOAT_T: f(Scalar<float, float>{}); return true;
    case MRN::DOUBLE_T: f(Scalar<double, double>{}); return true;
    default: return false;
  }
}

bool is_array(DataType type) {
  switch (type) {
    case MRN::CHAR_ARRAY_T: case MRN::UCHAR_ARRAY_T: case MRN::STRING_ARRAY_T:
    case MRN::INT16_ARRAY_T: case MRN::UINT16_ARRAY_T: case MRN::INT32_ARRAY_T:
    case MRN::UINT32_ARRAY_T: case MRN::INT64_ARRAY_T: case MRN::UINT64_ARRAY_T:
    case MRN::FLOAT_ARRAY_T: case MRN::DOUBLE_ARRAY_T:
      return true;
    default:
      return type >= MRN::CHAR_LRG_ARRAY_T && type <= MRN::DOUBLE_LRG_ARRAY_T;
  }
}

// Integer arithmetic wraps around in the type, as MRNet's C arithmetic does (without
// the undefined behaviour of signed overflow).
template <typename T>
T add(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return a + b;
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}

template <typename T>
T multiply(T a, std::int32_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    return a * static_cast<T>(n);
  } else {
    // The low bits of a product do not depend on the width it is computed in.
    const auto wide = static_cast<std::uint64_t>(static_cast<std::int64_t>(a)) *
                      static_cast<std::uint64_t>(static_cast<std::int64_t>(n));
    return static_cast<T>(wide);
  }
}

// a / n as MRNet divides: types narrower than int in int, the others in their own
// type (n converted to it). An error where MRNet's division would trap.
template <typename T>
Result<T> divide(T a, std::int32_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(a / static_cast<T>(n));
  } else if constexpr (sizeof(T) < sizeof(int)) {
    if (n == 0) return Error{"the counts add up to 0"};
    return static_cast<T>(static_cast<int>(a) / n);
  } else {
    const T d = static_cast<T>(n);
    if (d == 0) return Error{"the counts add up to 0"};
    if constexpr (std::is_signed_v<T>) {
      if (d == -1) return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(a));  // no trap at the minimum
    }
    return static_cast<T>(a / d);
  }
}

// Decodes a wave whose packets must all have the first one's format string, as
// MRNet's filters assert.
Result<std::vector<MRN::PacketPtr>> decode_uniform(const char* filter, std::span<const Packet> wave) {
  auto packets = decode_wave(filter, wave, 0);
  if (!packets) return packets;
  const std::string first = (*packets)[0]->get_FormatString();
  for (std::size_t i = 1; i < packets->size(); ++i) {
    const std::string format = (*packets)[i]->get_FormatString();
    if (format != first) {
      return Error{std::string(filter) + ": packets of one wave differ in format: " +
                       position(0, wave.size(), wave[0]) + " is \"" + first + "\", " +
                       position(i, wave.size(), wave[i]) + " is \"" + format + "\"",
                   ErrorKind::invalid_input};
    }
  }
  return packets;
}

// The type of a format made of exactly one directive ("%d", not "%d " nor "%d %d"),
// as MRNet finds it; UNKNOWN_T for any other format.
DataType single_directive(const std::string& format) {
  return format.size() > 1 && format[0] == '%' ? MRN::Fmt2Type(format.c_str() + 1) : MRN::UNKNOWN_T;
}

Error wrong_format(const char* filter, const std::string& format, const std::string& takes) {
  return Error{std::string(filter) + ": it does not take packets \"" + format + "\"; it takes " + takes,
               ErrorKind::invalid_input};
}

// mrnet_sum, mrnet_min and mrnet_max: Op::first starts the result from the first
// packet's value, Op::next combines it with each of the others.
template <typename Op>
class ScalarFilter {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    if (auto result = in_place(wave)) {
      out.push_back(std::move(*result));
      return {};
    }
    // Not a wave of one scalar format: the full decoding says what is wrong with it.
    auto packets = decode_uniform(Op::name, wave);
    if (!packets) return Error{packets.error(), packets.error_kind()};
    return wrong_format(Op::name, packets->front()->get_FormatString(), std::string("one value: ") + kScalars);
  }

 private:
  // The result, read in place without decoding each packet, when every packet is
  // one value of the same scalar directive (in either form, packet_codec.h); the
  // result takes the first packet's form. Nothing otherwise.
  static std::optional<Packet> in_place(std::span<const Packet> wave) {
    const auto* format = wave[0].size() == 2 ? std::get_if<std::string>(&wave[0][0]) : nullptr;
    const DataType type = scalar_of(wave[0]);
    std::optional<Packet> result;
    with_scalar(type, [&](auto scalar) {
      using S = decltype(scalar);
      for (const auto& p : wave) {
        if (scalar_of(p) != type) return;
      }
      auto acc = Op::first(S::read(wave[0].values().back()));
      for (std::size_t i = 1; i < wave.size(); ++i) acc = Op::next(acc, S::read(wave[i].values().back()));
      result = format ? Packet(wave[0].tag(), {*format, S::carry(acc)}) : Packet(wave[0].tag(), {S::carry(acc)});
    });
    return result;
  }

  // The directive of a packet of one scalar value, in either form (its value last);
  // UNKNOWN_T for any other packet.
  static DataType scalar_of(const Packet& p) {
    if (p.size() == 1) {
      return std::holds_alternative<std::string>(p[0]) ? MRN::UNKNOWN_T : MRN::codec::canonical_type(p[0].index());
    }
    const auto* format = p.size() == 2 ? std::get_if<std::string>(&p[0]) : nullptr;
    if (!format) return MRN::UNKNOWN_T;
    const DataType type = single_directive(*format);
    bool carried = false;
    with_scalar(type, [&](auto scalar) {
      carried = std::holds_alternative<typename decltype(scalar)::carrier>(p[1]);
    });
    return carried ? type : MRN::UNKNOWN_T;
  }
};

struct SumOp {
  static constexpr const char* name = "mrnet_sum";
  template <typename T>
  static T first(T v) { return add(T{}, v); }
  template <typename T>
  static T next(T acc, T v) { return add(acc, v); }
};
struct MinOp {
  static constexpr const char* name = "mrnet_min";
  template <typename T>
  static T first(T v) { return v; }
  template <typename T>
  static T next(T acc, T v) { return acc < v ? acc : v; }
};
struct MaxOp {
  static constexpr const char* name = "mrnet_max";
  template <typename T>
  static T first(T v) { return v; }
  template <typename T>
  static T next(T acc, T v) { return acc > v ? acc : v; }
};

// mrnet_avg: packets "<scalar> %d" (an average, and how many values it averages).
class AvgFilter {
 public:
  static constexpr const char* name = "mrnet_avg";

  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    auto packets = decode_uniform(name, wave);
    if (!packets) return Error{packets.error(), packets.error_kind()};
    const auto& first = *packets->front();
    const std::string format = first.get_FormatString();
    // MRNet takes exactly "%c %d", "%uc %d", ... "%lf %d".
    const std::string suffix = " %d";
    DataType type = MRN::UNKNOWN_T;
    if (format.size() > suffix.size() + 1 && format[0] == '%' && format.ends_with(suffix)) {
      type = MRN::Fmt2Type(format.substr(1, format.size() - 1 - suffix.size()).c_str());
    }
    Result<void> outcome;
    const bool taken = with_scalar(type, [&](auto scalar) {
      using S = decltype(scalar);
      using T = typename S::native;
      T sum{};
      std::int32_t count = 0;
      for (const auto& p : *packets) {
        const auto n = std::get<std::int32_t>(p->impl().values[1]);
        sum = add(sum, multiply(S::read(p->impl().values[0]), n));
        count = add(count, n);
      }
      auto average = divide(sum, count);
      if (!average) {
        outcome = Error{std::string(name) + ": cannot average packets \"" + format + "\": " + average.error(),
                        ErrorKind::invalid_input};
        return;
      }
      out.push_back(encode(first.get_Tag(), format, {S::carry(*average), Value(count)}));
    });
    if (!taken) return wrong_format(name, format, std::string("a value and its count \"<v> %d\", <v> one of ") + kScalars);
    return outcome;
  }
};

// mrnet_array_concat: packets of one array each.
class ArrayConcatFilter {
 public:
  static constexpr const char* name = "mrnet_array_concat";

  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    auto packets = decode_uniform(name, wave);
    if (!packets) return Error{packets.error(), packets.error_kind()};
    const auto& first = *packets->front();
    const std::string format = first.get_FormatString();
    if (!is_array(single_directive(format))) {
      return wrong_format(name, format, "one array: \"%ac\", \"%auc\", \"%ahd\", \"%auhd\", \"%ad\", \"%aud\", "
                                        "\"%ald\", \"%auld\", \"%af\", \"%alf\", \"%as\" or the same with %A");
    }
    Value result = first.impl().values[0];
    for (std::size_t i = 1; i < packets->size(); ++i) {
      const Value& next = (*packets)[i]->impl().values[0];
      std::visit(
          [&](auto& acc) {
            using V = std::remove_cvref_t<decltype(acc)>;
            if constexpr (std::is_same_v<V, Bytes>) {
              const auto& more = std::get<Bytes>(next).data;
              acc.data.insert(acc.data.end(), more.begin(), more.end());
            } else if constexpr (requires { typename V::value_type; } && !std::is_same_v<V, std::string>) {
              const auto& more = std::get<V>(next);
              acc.insert(acc.end(), more.begin(), more.end());
            }
          },
          result);
    }
    out.push_back(encode(first.get_Tag(), format, {std::move(result)}));
    return {};
  }
};

// mrnet_int_eq_class: packets "%aud %aud %aud" of classes (values, member counts,
// members).
class IntEqClassFilter {
 public:
  static constexpr const char* name = "mrnet_int_eq_class";

  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    auto packets = decode_wave(name, wave, 0);
    if (!packets) return Error{packets.error(), packets.error_kind()};
    const std::vector<DataType> takes(3, MRN::UINT32_ARRAY_T);
    std::map<std::uint32_t, std::vector<std::uint32_t>> classes;
    for (std::size_t i = 0; i < packets->size(); ++i) {
      const auto& impl = (*packets)[i]->impl();
      if (impl.types != takes) return wrong_format(name, impl.format, "\"%aud %aud %aud\"");
      const auto& values = std::get<std::vector<std::uint32_t>>(impl.values[0]);
      const auto& counts = std::get<std::vector<std::uint32_t>>(impl.values[1]);
      const auto& members = std::get<std::vector<std::uint32_t>>(impl.values[2]);
      if (values.size() != counts.size()) {
        return Error{std::string(name) + ": " + position(i, wave.size(), wave[i]) + " has " +
                         std::to_string(values.size()) + " class values but " + std::to_string(counts.size()) +
                         " member counts",
                     ErrorKind::invalid_input};
      }
      std::size_t next = 0;
      for (std::size_t c = 0; c < values.size(); ++c) {
        if (counts[c] > members.size() - next) {
          return Error{std::string(name) + ": " + position(i, wave.size(), wave[i]) + " counts more members (" +
                           std::to_string(next + counts[c]) + " by class " + std::to_string(c + 1) +
                           ") than it holds (" + std::to_string(members.size()) + ")",
                       ErrorKind::invalid_input};
        }
        auto& into = classes[values[c]];
        into.insert(into.end(), members.begin() + static_cast<std::ptrdiff_t>(next),
                    members.begin() + static_cast<std::ptrdiff_t>(next + counts[c]));
        next += counts[c];
      }
    }
    std::vector<std::uint32_t> values, counts, members;
    for (const auto& [value, of_class] : classes) {
      values.push_back(value);
      counts.push_back(static_cast<std::uint32_t>(of_class.size()));
      members.insert(members.end(), of_class.begin(), of_class.end());
    }
    out.push_back(encode(packets->front()->get_Tag(), "%aud %aud %aud",
                         {Value(std::move(values)), Value(std::move(counts)), Value(std::move(members))}));
    return {};
  }
};

using SumFilter = ScalarFilter<SumOp>;
using MinFilter = ScalarFilter<MinOp>;
using MaxFilter = ScalarFilter<MaxOp>;

}  // namespace
}  // namespace canopy::mrnet_filters

// The names MRN::layer::builtin_filter_name gives (mrnet/conventions.h).
CANOPY_FILTER(mrnet_sum, canopy::mrnet_filters::SumFilter)
CANOPY_FILTER(mrnet_avg, canopy::mrnet_filters::AvgFilter)
CANOPY_FILTER(mrnet_max, canopy::mrnet_filters::MaxFilter)
CANOPY_FILTER(mrnet_min, canopy::mrnet_filters::MinFilter)
CANOPY_FILTER(mrnet_array_concat, canopy::mrnet_filters::ArrayConcatFilter)
CANOPY_FILTER(mrnet_int_eq_class, canopy::mrnet_filters::IntEqClassFilter)
