#include "core/children.h"

#include <algorithm>

#include "core/log.h"

namespace canopy::core {
namespace {

// Where `rank` is, or would go, in an index ascending by rank.
template <typename Index>
auto place_of(Index& index, Rank rank) {
  return std::lower_bound(index.begin(), index.end(), rank, [](const auto& e, Rank r) { return e.first < r; });
}

}  // namespace

const char* to_string(ChildState state) {
  switch (state) {
    case ChildState::starting: return "starting";
    case ChildState::connected: return "connected";
    case ChildState::ready: return "ready";
    case ChildState::gone: return "gone";
  }
  return "?";
}

std::size_t ChildTable::add(Rank rank, Role role) {
  std::size_t index = children_.size();
  Child& child = children_.emplace_back();
  child.rank = rank;
  child.role = role;
  auto at = place_of(index_, rank);
  if (at != index_.end() && at->first == rank) {
    at->second = static_cast<std::uint32_t>(index);
  } else {
    index_.insert(at, {rank, static_cast<std::uint32_t>(index)});
  }
  return index;
}

std::optional<std::size_t> ChildTable::index_of(Rank rank) const {
  auto at = place_of(index_, rank);
  if (at == index_.end() || at->first != rank) return std::nullopt;
  return at->second;
}

void ChildTable::set_state(std::size_t index, ChildState next, std::string_view why, bool warn) {
  Child& child = children_[index];
  auto level = warn ? spdlog::level::warn : spdlog::level::info;
  log().log(level, "child {}: {} -> {} ({})", child.rank, to_string(child.state), to_string(next), why);
  child.state = next;
}

std::size_t ChildTable::connected() const {
  std::size_t n = 0;
  for (const auto& child : children_) n += child.link != nullptr;
  return n;
}

}  // namespace canopy::core
