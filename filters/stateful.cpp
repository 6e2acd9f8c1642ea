// The built-in stateful filters: incremental_union and prefix_tree (stateful.h).
#include "filters/stateful.h"

#include <algorithm>
#include <type_traits>
#include <unordered_set>
#include <variant>

#include "canopy/call_tree.h"

namespace canopy::filters {
namespace {

std::uint32_t total_contributors(std::span<const Packet> wave) {
  std::uint32_t n = 0;
  for (const auto& p : wave) n += p.contributors();
  return n;
}

// The integers seen at one value position. A hash set rather than a sorted vector:
// it runs at every node on every wave, and while the set grows a sorted vector
// pays a merge of the whole state per wave (docs/benchmarks.md has the figures).
// Only the new integers are sorted, for the output; the whole set only for
// extract_state, which is rare.
template <typename T>
class SeenSet {
 public:
  using element_type = T;

  // Adds the integers of `v` (a T or an array of T) and appends the new ones to
  // `fresh` in the order found.
  void add(const Value& v, std::vector<T>& fresh) {
    if (const T* x = std::get_if<T>(&v)) {
      if (seen_.insert(*x).second) fresh.push_back(*x);
    } else {
      for (T x : std::get<std::vector<T>>(v)) {
        if (seen_.insert(x).second) fresh.push_back(x);
      }
    }
  }

  std::vector<T> sorted() const {
    std::vector<T> all(seen_.begin(), seen_.end());
    std::sort(all.begin(), all.end());
    return all;
  }

  static bool accepts(const Value& v) {
    return std::holds_alternative<T>(v) || std::holds_alternative<std::vector<T>>(v);
  }

  std::vector<T> scratch;  // this wave's new integers; reused so waves allocate only their output

 private:
  std::unordered_set<T> seen_;
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
