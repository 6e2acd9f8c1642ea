#include "core/connections.h"

namespace canopy::core {

using transport::Link;

Connections::Connection& Connections::add(std::shared_ptr<Link> link) {
  const Link* raw = link.get();
  auto [it, inserted] = by_link_.try_emplace(raw, Connection{std::move(link), AwaitingHello{}, nullptr});
  if (inserted) ++counts_[index_of<AwaitingHello>()];
  return it->second;
}

Connections::Connection* Connections::find(const Link* link) {
  auto it = by_link_.find(link);
  return it == by_link_.end() ? nullptr : &it->second;
}

Connections::Connection& Connections::set(const std::shared_ptr<Link>& link, State next) {
  auto it = by_link_.find(link.get());
  if (it == by_link_.end()) {
    it = by_link_.emplace(link.get(), Connection{link, AwaitingHello{}, nullptr}).first;
  } else {
    --counts_[it->second.state.index()];
  }
  Connection& c = it->second;
  c.state = std::move(next);
  ++counts_[c.state.index()];
  if (std::holds_alternative<Child>(c.state) || std::holds_alternative<Joining>(c.state) ||
      std::holds_alternative<Standby>(c.state)) {
    c.hello_deadline.reset();
  }
  return c;
}

std::optional<Connections::Connection> Connections::remove(const Link* link) {
  auto it = by_link_.find(link);
  if (it == by_link_.end()) return std::nullopt;
  --counts_[it->second.state.index()];
  std::optional<Connection> out(std::move(it->second));
  by_link_.erase(it);
  return out;
}

std::optional<std::size_t> Connections::child_of(const Link* link) const {
  auto it = by_link_.find(link);
  if (it == by_link_.end()) return std::nullopt;
  const auto* child = std::get_if<Child>(&it->second.state);
  return child ? std::optional(child->index) : std::nullopt;
}

Connections::Connection* Connections::joining(Rank rank) {
  if (count<Joining>() == 0) return nullptr;
  for (auto& [raw, c] : by_link_) {
    if (const auto* j = std::get_if<Joining>(&c.state); j && j->rank == rank) return &c;
  }
  return nullptr;
}

std::size_t Connections::unadmitted() const {
  return count<AwaitingHello>() + count<Challenged>() + count<HeldOrphan>() + count<Joining>();
}

std::vector<std::shared_ptr<Link>> Connections::links(const std::function<bool(const State&)>& in) const {
  std::vector<std::shared_ptr<Link>> out;
  for (const auto& [raw, c] : by_link_) {
    if (in(c.state)) out.push_back(c.link);
  }
  return out;
}

void Connections::detach_all() {
  for (auto& [raw, c] : by_link_) {
    if (!std::holds_alternative<Child>(c.state)) c.link->detach();
  }
  by_link_.clear();
  counts_ = {};
}

}  // namespace canopy::core
