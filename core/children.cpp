#include "core/children.h"

#include <algorithm>

#include "core/log.h"
#include "topology/rank_pairs.h"

namespace canopy::core {
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
  topology::set_rank(index_, rank, static_cast<std::uint32_t>(index));
  return index;
}

std::optional<std::size_t> ChildTable::index_of(Rank rank) const {
  const std::uint32_t* at = topology::find_rank(index_, rank);
  if (!at) return std::nullopt;
  return *at;
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
