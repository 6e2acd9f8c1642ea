// The built-in stateful filters: incremental_union and prefix_tree (stateful.h).
#include "filters/stateful.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <type_traits>
#include <variant>

#include "canopy/call_tree.h"

namespace canopy::filters {
namespace {

std::uint32_t total_contributors(std::span<const Packet> wave) {
  std::uint32_t n = 0;
  for (const auto& p : wave) n += p.contributors();
  return n;
}

// A set of integers: open addressing with linear probing, at most half full. It
// runs at every node on every wave, so it is built for that: a lookup is one
// multiplication and usually one cache line, and the set allocates only when its
// table doubles, never per integer. std::unordered_set allocates a node per new
// integer and was 3-4x slower on warm state; a sorted vector pays a sort of the
// input and a merge of the whole state per wave (figures in docs/benchmarks.md).
//
// Fibonacci hashing (Knuth): the top bits of x times 2^64 / golden ratio. Dense
// ranges and power-of-two strides, which integer data usually is, spread without
// a single collision; a few contrived strides (multiples of the multiplier) cluster,
// which costs time, never correctness. A stronger mix (SplitMix64) avoided those
// but was 2-4x slower on warm state, from collisions on ordinary input.
//
// Empty slots hold kEmpty; the integer kEmpty itself, when present, is recorded
// apart so that every value of T can be stored.
template <typename T>
class IntegerSet {
 public:
  // Adds x; true if it was not there yet.
  bool insert(T x) {
    if (x == kEmpty) {
      if (has_empty_) return false;
      return has_empty_ = true;
    }
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (std::size_t i = slot_of(x);; i = (i + 1) & mask_) {
      if (slots_[i] == kEmpty) {
        slots_[i] = x;
        ++size_;
        return true;
      }
      if (slots_[i] == x) return false;
    }
  }

  // Every integer, in no particular order.
  std::vector<T> elements() const {
    std::vector<T> all;
    all.reserve(size_ + has_empty_);
    for (T x : slots_) {
      if (x != kEmpty) all.push_back(x);
    }
    if (has_empty_) all.push_back(kEmpty);
    return all;
  }

 private:
  static constexpr T kEmpty = std::numeric_limits<T>::max();

  // Fibonacci hashing, see above; shift_ keeps the top log2(capacity) bits.
  std::size_t slot_of(T x) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(x) * 0x9E3779B97F4A7C15ull) >> shift_);
  }

  void grow() {
    std::vector<T> old(std::max<std::size_t>(16, slots_.size() * 2), kEmpty);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(slots_.size()));
    size_ = 0;
    for (T x : old) {
      if (x != kEmpty) insert(x);
    }
  }

  std::vector<T> slots_;
  std::size_t size_ = 0;  // in slots_, not counting kEmpty
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  bool has_empty_ = false;
};

// The integers seen at one value position.
template <typename T>
class SeenSet {
 public:
  using element_type = T;

  // Adds the integers of `v` (a T or an array of T) and appends the new ones to
  // `fresh` in the order found.
  void add(const Value& v, std::vector<T>& fresh) {
    if (const T* x = std::get_if<T>(&v)) {
      if (seen_.insert(*x)) fresh.push_back(*x);
    } else {
      for (T x : std::get<std::vector<T>>(v)) {
        if (seen_.insert(x)) fresh.push_back(x);
      }
    }
  }

  // Sorted; only for extract_state, which is rare.
  std::vector<T> sorted() const {
    std::vector<T> all = seen_.elements();
    std::sort(all.begin(), all.end());
    return all;
  }

  static bool accepts(const Value& v) {
    return std::holds_alternative<T>(v) || std::holds_alternative<std::vector<T>>(v);
  }

  std::vector<T> scratch;  // this wave's new integers; reused so waves allocate only their output

 private:
  IntegerSet<T> seen_;
};

using Position = std::variant<SeenSet<std::int32_t>, SeenSet<std::int64_t>, SeenSet<std::uint32_t>,
                              SeenSet<std::uint64_t>>;

template <typename T>
struct element_of {
  using type = T;
};
template <typename E>
struct element_of<std::vector<E>> {
  using type = E;
};

// The set for values like `v`, or false if `v` holds no integers.
bool position_for(const Value& v, Position& out) {
  return std::visit(
      [&](const auto& x) {
        using E = typename element_of<std::remove_cvref_t<decltype(x)>>::type;
        if constexpr (std::is_integral_v<E>) {
          out.emplace<SeenSet<E>>();
          return true;
        } else {
          return false;
        }
      },
      v);
}

class IncrementalUnion {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    if (!shaped_) {
      if (auto r = shape(wave); !r) return r;
    }
    // Check the whole wave before adding anything: a wave refused halfway would
    // leave integers in the state that were never emitted, i.e. lost.
    for (const auto& p : wave) {
      if (p.size() == 0) continue;
      if (p.size() != positions_.size()) {
        return Error{"incremental_union: a packet \"" + p.format() + "\" from rank " + std::to_string(p.source()) +
                     " has " + std::to_string(p.size()) + " values; this stream's have " +
                     std::to_string(positions_.size()) + " (fixed by the first packet)"};
      }
      for (std::size_t i = 0; i < p.size(); ++i) {
        bool ok = std::visit([&](const auto& set) { return set.accepts(p[i]); }, positions_[i]);
        if (!ok) return type_error(p, i);
      }
    }
    std::vector<Value> values;
    values.reserve(positions_.size());
    for (std::size_t i = 0; i < positions_.size(); ++i) {
      std::visit(
          [&](auto& set) {
            using T = typename std::remove_cvref_t<decltype(set)>::element_type;
            set.scratch.clear();
            for (const auto& p : wave) {
              if (p.size() != 0) set.add(p[i], set.scratch);
            }
            std::sort(set.scratch.begin(), set.scratch.end());
            values.emplace_back(std::vector<T>(set.scratch.begin(), set.scratch.end()));
          },
          positions_[i]);
    }
    last_tag_ = wave.front().tag();
    Packet result(last_tag_, std::move(values));
    result.set_contributors(total_contributors(wave));
    out.push_back(std::move(result));
    return {};
  }

  Packet extract_state() const {
    std::vector<Value> values;
    values.reserve(positions_.size());
    for (const auto& position : positions_) {
      std::visit([&](const auto& set) { values.emplace_back(set.sorted()); }, position);
    }
    Packet state(last_tag_, std::move(values));
    state.set_contributors(0);  // state, not new back-end input
    return state;
  }

 private:
  // Fixes the stream's format from the first packet that has values.
  Result<void> shape(std::span<const Packet> wave) {
    auto first = std::find_if(wave.begin(), wave.end(), [](const Packet& p) { return p.size() != 0; });
    if (first == wave.end()) return {};
    std::vector<Position> positions(first->size());
    for (std::size_t i = 0; i < first->size(); ++i) {
      if (!position_for((*first)[i], positions[i])) {
        return Error{"incremental_union: value " + std::to_string(i + 1) + " of a packet \"" + first->format() +
                     "\" from rank " + std::to_string(first->source()) + " is " +
                     std::string(format_code((*first)[i])) + "; it needs integers or integer arrays"};
      }
    }
    positions_ = std::move(positions);
    shaped_ = true;
    return {};
  }

  Error type_error(const Packet& p, std::size_t i) const {
    std::string want = std::visit(
        [](const auto& set) {
          using T = typename std::remove_cvref_t<decltype(set)>::element_type;
          return std::string(format_code(Value(T{}))) + " or " + std::string(format_code(Value(std::vector<T>{})));
        },
        positions_[i]);
    return Error{"incremental_union: value " + std::to_string(i + 1) + " of a packet \"" + p.format() +
                 "\" from rank " + std::to_string(p.source()) + " is " + std::string(format_code(p[i])) +
                 "; this stream's value " + std::to_string(i + 1) + " is " + want +
                 " (fixed by the first packet)"};
  }

  bool shaped_ = false;
  std::vector<Position> positions_;
  Tag last_tag_ = 0;
};

class PrefixTree {
 public:
  Result<void> execute(std::span<const Packet> wave, std::vector<Packet>& out) {
    // A packet refused halfway through the wave leaves the earlier ones merged; no
    // harm, since every output is the complete tree: the next one carries them.
    for (const auto& p : wave) {
      if (auto r = tree_.merge(p); !r) {
        return Error{"prefix_tree: packet from rank " + std::to_string(p.source()) + ": " + r.error()};
      }
    }
    last_tag_ = wave.front().tag();
    Packet result = tree_.to_packet(last_tag_);
    result.set_contributors(total_contributors(wave));
    out.push_back(std::move(result));
    return {};
  }

  Packet extract_state() const {
    Packet state = tree_.to_packet(last_tag_);
    state.set_contributors(0);  // state, not new back-end input
    return state;
  }

 private:
  CallTree tree_;
  Tag last_tag_ = 0;
};

}  // namespace

const canopy_filter_descriptor* incremental_union_descriptor() {
  return filter_descriptor<IncrementalUnion>("incremental_union");
}

const canopy_filter_descriptor* prefix_tree_descriptor() { return filter_descriptor<PrefixTree>("prefix_tree"); }

}  // namespace canopy::filters
