// The built-in filters. All are associative and commutative, so any tree shape
// gives the same result at the front-end. The stateless ones are here; the
// stateful ones are in stateful.cpp.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "filters/filter.h"
#include "filters/stateful.h"

namespace canopy::filters {
namespace {

template <typename T>
inline constexpr bool is_vector_v = false;
template <typename T>
inline constexpr bool is_vector_v<std::vector<T>> = true;
template <typename T>
inline constexpr bool is_numeric_vector_v = false;
template <typename T>
inline constexpr bool is_numeric_vector_v<std::vector<T>> = std::is_arithmetic_v<T>;

std::string position_error(std::string_view filter, std::size_t position, const Packet& p,
                           std::string_view need) {
  return std::string(filter) + ": value " + std::to_string(position + 1) + " of a packet \"" +
         p.format() + "\" from rank " + std::to_string(p.source()) + " is " +
         std::string(format_code(p[position])) + "; " + std::string(need);
}

// Checks that every packet of the wave has the first packet's format.
Result<void> same_shape(std::string_view filter, std::span<const Packet> wave) {
  const auto& first = wave.front();
  for (const auto& p : wave) {
    bool same = p.size() == first.size();
    for (std::size_t i = 0; same && i < p.size(); ++i) same = p[i].index() == first[i].index();
    if (!same) {
      return Error{std::string(filter) + ": packets of one wave differ in format (\"" +
                   first.format() + "\" from rank " + std::to_string(first.source()) + ", \"" +
                   p.format() + "\" from rank " + std::to_string(p.source()) + ")"};
    }
  }
  return {};
}

std::uint32_t total_contributors(std::span<const Packet> wave) {
  std::uint32_t n = 0;
  for (const auto& p : wave) n += p.contributors();
  return n;
}

// Element-wise combination of numeric scalars and equal-length numeric arrays:
// sum, min and max.
template <typename Op>
class ElementwiseFilter {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    if (auto r = same_shape(name_, wave); !r) return r;
    Packet result = wave.front();
    for (std::size_t i = 0; i < result.size(); ++i) {
      std::string error;
      std::visit(
          [&](auto& acc) {
            using T = std::remove_cvref_t<decltype(acc)>;
            if constexpr (std::is_arithmetic_v<T>) {
              for (const auto& p : wave.subspan(1)) acc = Op{}(acc, std::get<T>(p[i]));
            } else if constexpr (is_numeric_vector_v<T>) {
              for (const auto& p : wave.subspan(1)) {
                const auto& v = std::get<T>(p[i]);
                if (v.size() != acc.size()) {
                  error = name_ + ": arrays at value " + std::to_string(i + 1) +
                          " differ in length (" + std::to_string(acc.size()) + " and " +
                          std::to_string(v.size()) + " from rank " + std::to_string(p.source()) +
                          ")";
                  return;
                }
                for (std::size_t k = 0; k < v.size(); ++k) acc[k] = Op{}(acc[k], v[k]);
              }
            } else {
              error = position_error(name_, i, wave.front(), "it needs numbers or numeric arrays");
            }
          },
          result.values()[i]);
      if (!error.empty()) return Error{error};
    }
    result.set_contributors(total_contributors(wave));
    out.push_back(std::move(result));
    return {};
  }

 private:
  std::string name_ = Op::name;
};

struct Plus {
  static constexpr const char* name = "sum";
  template <typename T>
  T operator()(T a, T b) const { return static_cast<T>(a + b); }
};
struct Min {
  static constexpr const char* name = "min";
  template <typename T>
  T operator()(T a, T b) const { return std::min(a, b); }
};
struct Max {
  static constexpr const char* name = "max";
  template <typename T>
  T operator()(T a, T b) const { return std::max(a, b); }
};

// Average weighted by the number of back-end packets behind each input, so that an
// average of averages over an unbalanced tree is still the average of the inputs.
// Numeric values become doubles, numeric arrays arrays of doubles.
class AverageFilter {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    if (auto r = same_shape("avg", wave); !r) return r;
    const double total = total_contributors(wave);
    std::vector<Value> values;
    for (std::size_t i = 0; i < wave.front().size(); ++i) {
      std::string error;
      std::visit(
          [&](const auto& first) {
            using T = std::remove_cvref_t<decltype(first)>;
            if constexpr (std::is_arithmetic_v<T>) {
              double sum = 0;
              for (const auto& p : wave) sum += double(std::get<T>(p[i])) * p.contributors();
              values.emplace_back(sum / total);
            } else if constexpr (is_numeric_vector_v<T>) {
              std::vector<double> sum(first.size(), 0.0);
              for (const auto& p : wave) {
                const auto& v = std::get<T>(p[i]);
                if (v.size() != sum.size()) {
                  error = "avg: arrays at value " + std::to_string(i + 1) + " differ in length";
                  return;
                }
                for (std::size_t k = 0; k < v.size(); ++k) sum[k] += double(v[k]) * p.contributors();
              }
              for (auto& s : sum) s /= total;
              values.emplace_back(std::move(sum));
            } else {
              error = position_error("avg", i, wave.front(), "it needs numbers or numeric arrays");
            }
          },
          wave.front()[i]);
      if (!error.empty()) return Error{error};
    }
    Packet result(wave.front().tag(), std::move(values));
    result.set_contributors(static_cast<std::uint32_t>(total));
    out.push_back(std::move(result));
    return {};
  }
};

// Appends a scalar or the elements of an array to an array of the same element type.
template <typename Array>
void append_to(Array& acc, const Value& v) {
  using E = typename Array::value_type;
  if (auto* x = std::get_if<E>(&v)) {
    acc.push_back(*x);
  } else if (auto* xs = std::get_if<Array>(&v)) {
    acc.insert(acc.end(), xs->begin(), xs->end());
  }
}

// The array type that gathers values of `v`'s type; monostate for bytes.
template <typename F>
bool with_array_type(const Value& v, F&& f) {
  return std::visit(
      [&](const auto& x) {
        using T = std::remove_cvref_t<decltype(x)>;
        if constexpr (is_vector_v<T>) {
          f(T{});
          return true;
        } else if constexpr (std::is_same_v<T, Bytes>) {
          return false;
        } else {
          f(std::vector<T>{});
          return true;
        }
      },
      v);
}

// Concatenation in child order: scalars are gathered into arrays, arrays appended.
class ConcatFilter {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    if (auto r = same_shape("concat", wave); !r) return r;
    std::vector<Value> values;
    for (std::size_t i = 0; i < wave.front().size(); ++i) {
      bool ok = with_array_type(wave.front()[i], [&](auto array) {
        for (const auto& p : wave) append_to(array, p[i]);
        values.emplace_back(std::move(array));
      });
      if (!ok) return Error{position_error("concat", i, wave.front(), "bytes cannot be concatenated")};
    }
    Packet result(wave.front().tag(), std::move(values));
    result.set_contributors(total_contributors(wave));
    out.push_back(std::move(result));
    return {};
  }
};

// Integer set union: each value (an integer or an integer array) becomes the sorted
// array of distinct integers found at that position in any input.
class UnionFilter {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    if (auto r = same_shape("union", wave); !r) return r;
    std::vector<Value> values;
    for (std::size_t i = 0; i < wave.front().size(); ++i) {
      bool integral = false;
      with_array_type(wave.front()[i], [&](auto array) {
        using E = typename decltype(array)::value_type;
        if constexpr (std::is_integral_v<E>) {
          integral = true;
          for (const auto& p : wave) append_to(array, p[i]);
          std::sort(array.begin(), array.end());
          array.erase(std::unique(array.begin(), array.end()), array.end());
          values.emplace_back(std::move(array));
        }
      });
      if (!integral) {
        return Error{position_error("union", i, wave.front(), "it needs integers or integer arrays")};
      }
    }
    Packet result(wave.front().tag(), std::move(values));
    result.set_contributors(total_contributors(wave));
    out.push_back(std::move(result));
    return {};
  }
};

// No aggregation: every packet of the wave goes on unchanged, in child order (MRNet's
// TFILTER_NULL). With dont_wait each packet travels alone; with wait_for_all the
// packets of one wave travel together.
class PassFilter {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    out.insert(out.end(), wave.begin(), wave.end());
    return {};
  }
};

}  // namespace

FilterRegistry FilterRegistry::with_builtins() {
  FilterRegistry registry;
  registry.add(filter_descriptor<ElementwiseFilter<Plus>>("sum"));
  registry.add(filter_descriptor<ElementwiseFilter<Min>>("min"));
  registry.add(filter_descriptor<ElementwiseFilter<Max>>("max"));
  registry.add(filter_descriptor<AverageFilter>("avg"));
  registry.add(filter_descriptor<ConcatFilter>("concat"));
  registry.add(filter_descriptor<UnionFilter>("union"));
  registry.add(filter_descriptor<PassFilter>("pass"));
  registry.add(incremental_union_descriptor());
  registry.add(prefix_tree_descriptor());
  return registry;
}

}  // namespace canopy::filters
